//! A saved result as input (`netmeter csv`, `plot`, `report`, `compare`): a `-J` document
//! or `--json-stream` lines, netmeter's or iperf3's, told apart by their first line and
//! checked before anything is rendered, so a bad file ends in one sentence and no output.
//!
//! Refused: a file over [`MAX_RESULT_FILE_BYTES`], an empty file, text that is not JSON or
//! is cut short, JSON that is not a result (no `start`/`intervals`/`end`), a result with
//! an `error` (the test failed), and a result with no measurements (no interval and no
//! end-of-test stream). The one error accepted is a stop on purpose (iperf3's and
//! netmeter's `interrupt - ...`, as every `-t 0` test ends): what ran before the stop is
//! a valid result.
//!
//! Memory: a `-J` document is parsed from the file straight into the typed [`Report`],
//! never held as text or as a `serde_json::Value` (a `Value` of a large document takes
//! about ten times the file); the checks that name what is wrong with a bad file run only
//! once the typed parse has failed, on a second pass that builds nothing. A repetition
//! document (`--repeat`'s `{"runs": [...]}`) is read run by run ([`read_runs`]), and a
//! reader that needs no interval rows (`compare` without `--plot`) drops each run's rows
//! before the next is read. `--json-stream` lines are read a line at a time into the same
//! types.

use super::Report;
use super::load_stream::{self, StreamError};
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::error::Category;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The largest result file `netmeter plot`, `report`, `csv` and `compare` read: 1 GiB.
/// A `-J` document of that size is a test of days at `-i 1` with `-P 128`; reading it
/// takes up to about twice its size in memory (docs/json.md).
pub const MAX_RESULT_FILE_BYTES: u64 = 1 << 30;

/// How far into a file its first line is looked for (`--json-stream` or not): the first
/// line of either kind is short; a one-line document longer than this is a document.
const FIRST_LINE_MAX: u64 = 1 << 20;

/// What is wrong with the input, worded to follow "cannot use FILE: ".
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot read it: {0}")]
    Read(std::io::Error),
    #[error(
        "it has {0} bytes, more than the {MAX_RESULT_FILE_BYTES} bytes (1 GiB) a result file may have"
    )]
    TooLarge(u64),
    #[error("it is empty")]
    Empty,
    #[error("it is not JSON ({0})")]
    NotJson(String),
    #[error("it is truncated JSON (it ends at line {0} before the document is complete)")]
    Truncated(usize),
    #[error("it holds {0} JSON documents (a log of several tests?); keep one per file")]
    SeveralDocuments(usize),
    #[error("it is not a netmeter or iperf3 result (no start, intervals and end)")]
    NotAResult,
    #[error("it is not a netmeter or iperf3 result ({0})")]
    BadShape(String),
    #[error("as --json-stream lines, {0}")]
    Stream(StreamError),
    #[error("the test it records failed: {0}")]
    Failed(String),
    #[error("it holds no measurements (no intervals and no end-of-test streams)")]
    NoData,
}

/// An input error with the file it is about.
#[derive(Debug, thiserror::Error)]
#[error("cannot use {}: {why}", path.display())]
pub struct FileError {
    pub path: PathBuf,
    pub why: InputError,
}

/// Open a result file, refusing one over [`MAX_RESULT_FILE_BYTES`] before reading it.
pub fn open_result(path: &Path) -> Result<BufReader<std::fs::File>, InputError> {
    let file = std::fs::File::open(path).map_err(InputError::Read)?;
    let size = file.metadata().map_err(InputError::Read)?.len();
    if size > MAX_RESULT_FILE_BYTES {
        return Err(InputError::TooLarge(size));
    }
    Ok(BufReader::with_capacity(1 << 16, file))
}

/// Read and check a result file.
pub fn read_result(path: &Path) -> Result<Report, FileError> {
    let err = |why| FileError {
        path: path.to_path_buf(),
        why,
    };
    let mut r = open_result(path).map_err(err)?;
    parse_result_from(&mut r).map_err(err)
}

/// One loaded result and the name it goes by in legends and headings.
#[derive(Debug, Clone)]
pub struct Input {
    /// The document's `title` (`-T`/`--title`), else the file's name without `.json`.
    pub name: String,
    pub path: PathBuf,
    pub report: Report,
}

/// Read and check a result file, named for charts and tables.
pub fn load_file(path: &Path) -> Result<Input, FileError> {
    let report = read_result(path)?;
    let name = match report.title.as_deref().map(str::trim) {
        Some(t) if !t.is_empty() => t.to_string(),
        _ => file_label(path),
    };
    Ok(Input {
        name,
        path: path.to_path_buf(),
        report,
    })
}

/// The file's name without a `.json`/`.jsonl` ending, for legends.
pub fn file_label(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    match name
        .strip_suffix(".json")
        .or_else(|| name.strip_suffix(".jsonl"))
    {
        Some(stem) if !stem.is_empty() => stem.to_string(),
        _ => name,
    }
}

/// Check a result given as text: a `-J` document or `--json-stream` lines.
pub fn parse_result(text: &str) -> Result<Report, InputError> {
    parse_result_from(&mut std::io::Cursor::new(text.as_bytes()))
}

/// What a result file starts with.
enum Kind {
    Empty,
    Stream,
    Document,
}

/// The first non-blank line decides: a `--json-stream` event, or a document.
fn kind_of<R: BufRead + Seek>(r: &mut R) -> Result<Kind, InputError> {
    r.seek(SeekFrom::Start(0)).map_err(InputError::Read)?;
    let mut head = r.by_ref().take(FIRST_LINE_MAX);
    let mut line = Vec::new();
    loop {
        line.clear();
        if head
            .read_until(b'\n', &mut line)
            .map_err(InputError::Read)?
            == 0
        {
            return Ok(Kind::Empty);
        }
        if !line.trim_ascii().is_empty() {
            break;
        }
    }
    let first = String::from_utf8_lossy(&line);
    Ok(match load_stream::is_event_line(&first) {
        true => Kind::Stream,
        false => Kind::Document,
    })
}

/// Check a result read from `r` (rewound first): a `-J` document or `--json-stream`
/// lines.
pub fn parse_result_from<R: BufRead + Seek>(r: &mut R) -> Result<Report, InputError> {
    let report = match kind_of(r)? {
        Kind::Empty => return Err(InputError::Empty),
        Kind::Stream => {
            r.seek(SeekFrom::Start(0)).map_err(InputError::Read)?;
            Report::from_json_stream_reader(r.take(MAX_RESULT_FILE_BYTES))
                .map_err(InputError::Stream)?
        }
        Kind::Document => document(r)?,
    };
    check(&report)?;
    Ok(report)
}

/// The top-level keys every result has; nothing else is read on this first pass.
#[derive(serde::Deserialize)]
struct Keys {
    start: Option<IgnoredAny>,
    intervals: Option<IgnoredAny>,
    end: Option<IgnoredAny>,
}

fn json_error<R: BufRead + Seek>(e: serde_json::Error, r: &mut R) -> InputError {
    match e.classify() {
        Category::Eof => InputError::Truncated(e.line()),
        // A file cut inside a number (`12.`, `1e`, `-`) ends in a syntax error at its
        // very last character: truncated too.
        Category::Syntax if ends_at(r, e.line(), e.column()) => InputError::Truncated(e.line()),
        // Valid JSON of another shape (an array, a string...).
        Category::Data => InputError::NotAResult,
        Category::Syntax | Category::Io => InputError::NotJson(e.to_string()),
    }
}

/// Whether an error at `line`, `column` (as serde_json counts them: the last
/// character it read) lies at or past the last non-blank character of `r`'s text: the
/// text ended there. Read again from the start; only an error's path comes here.
fn ends_at<R: BufRead + Seek>(r: &mut R, line: usize, column: usize) -> bool {
    if r.seek(SeekFrom::Start(0)).is_err() {
        return false;
    }
    let (mut last, mut at) = ((0usize, 0usize), (1usize, 0usize));
    let mut buf = [0u8; 64 * 1024];
    let mut read = 0u64;
    while read < MAX_RESULT_FILE_BYTES {
        let n = match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        read += n as u64;
        for &b in &buf[..n] {
            if b == b'\n' {
                at = (at.0 + 1, 0);
            } else {
                at.1 += 1;
                if !b.is_ascii_whitespace() {
                    last = at;
                }
            }
        }
    }
    (line, column) >= last
}

/// A `-J` document, read straight into the typed report. Only when that fails, a
/// second pass that builds nothing says why (one JSON value, an object with `start`,
/// `intervals` and `end`), and when the typed parse failed on a repeated key, a third
/// reads it through a `serde_json::Value`, where a repeated key keeps its last value: iperf3 3.12 writes `sock_bufsize`,
/// `sndbuf_actual` and `rcvbuf_actual` into `start` once per TCP stream
/// (`iperf_tcp_connect`), which the typed structs refuse. (That `Value` takes several
/// times the file, but only for such a document.)
fn document<R: BufRead + Seek>(r: &mut R) -> Result<Report, InputError> {
    r.seek(SeekFrom::Start(0)).map_err(InputError::Read)?;
    let typed_error = match serde_json::from_reader::<_, Report>(r.by_ref()) {
        Ok(mut report) => {
            report.end.local = super::load::roles_of(&report);
            return Ok(report);
        }
        Err(e) => e,
    };
    r.seek(SeekFrom::Start(0)).map_err(InputError::Read)?;
    let mut values = serde_json::Deserializer::from_reader(r.by_ref()).into_iter::<Keys>();
    let keys = match values.next() {
        Some(Ok(keys)) => keys,
        Some(Err(e)) => {
            drop(values);
            return Err(json_error(e, r));
        }
        None => return Err(InputError::Empty),
    };
    match values.next() {
        // `netmeter -s -J` and `iperf3 -s -J` write one document per test to one log.
        Some(Ok(_)) => {
            let more = values.take_while(Result::is_ok).count();
            return Err(InputError::SeveralDocuments(2 + more));
        }
        Some(Err(e)) => return Err(InputError::NotJson(e.to_string())),
        None => {}
    }
    if keys.start.is_none() || keys.intervals.is_none() || keys.end.is_none() {
        return Err(InputError::NotAResult);
    }
    let bad_shape = || InputError::BadShape(typed_error.to_string());
    // Only a repeated key is worth the `Value`: any other shape error stays one.
    if !typed_error.to_string().starts_with("duplicate field") {
        return Err(bad_shape());
    }
    r.seek(SeekFrom::Start(0)).map_err(InputError::Read)?;
    let value: serde_json::Value = serde_json::from_reader(r.by_ref()).map_err(|_| bad_shape())?;
    let mut report: Report = serde_json::from_value(value).map_err(|_| bad_shape())?;
    report.end.local = super::load::roles_of(&report);
    Ok(report)
}

fn check(r: &Report) -> Result<(), InputError> {
    if let Some(e) = &r.error
        && !e.starts_with("interrupt - ")
    {
        return Err(InputError::Failed(e.clone()));
    }
    if r.intervals.is_empty() && r.end.streams.is_empty() {
        return Err(InputError::NoData);
    }
    Ok(())
}

/// What [`read_runs`] found.
pub enum Runs {
    /// A repetition document's runs (`{"runs": [...]}`, from `--repeat`), each checked
    /// as a result of its own.
    Repetition(Vec<Report>),
    /// Not a repetition document: read it as one result.
    NotRepetition,
}

/// A repetition document's `runs`, read one run at a time from `r` (rewound first).
/// Without `keep_intervals` each run keeps only its last interval row (from which its
/// roles were read), so at most one run's rows are in memory at once.
pub fn read_runs<R: BufRead + Seek>(r: &mut R, keep_intervals: bool) -> Result<Runs, InputError> {
    /// The first pass: is there a `runs` array at the top?
    #[derive(serde::Deserialize)]
    struct Probe {
        runs: Option<IgnoredAny>,
    }
    r.seek(SeekFrom::Start(0)).map_err(InputError::Read)?;
    match serde_json::from_reader::<_, Probe>(r.by_ref()) {
        Ok(Probe { runs: Some(_) }) => {}
        _ => return Ok(Runs::NotRepetition),
    }
    r.seek(SeekFrom::Start(0)).map_err(InputError::Read)?;
    let mut de = serde_json::Deserializer::from_reader(r.by_ref());
    let runs = DocSeed { keep_intervals }
        .deserialize(&mut de)
        .map_err(|e| match e.classify() {
            Category::Eof => InputError::Truncated(e.line()),
            _ => InputError::BadShape(format!("its runs: {e}")),
        })?;
    runs.map(Runs::Repetition)
}

/// The repetition document's object: `runs` through [`RunsSeed`], the rest skipped.
struct DocSeed {
    keep_intervals: bool,
}

type RunsResult = Result<Vec<Report>, InputError>;

impl<'de> DeserializeSeed<'de> for DocSeed {
    type Value = RunsResult;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<RunsResult, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DocSeed {
    type Value = RunsResult;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a repetition document")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RunsResult, A::Error> {
        let mut runs = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "runs" && runs.is_none() {
                runs = Some(map.next_value_seed(RunsSeed {
                    keep_intervals: self.keep_intervals,
                })?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(runs.unwrap_or(Ok(Vec::new())))
    }
}

/// The `runs` array: each run parsed, checked and (without `keep_intervals`) cut down
/// before the next one is read.
struct RunsSeed {
    keep_intervals: bool,
}

impl<'de> DeserializeSeed<'de> for RunsSeed {
    type Value = RunsResult;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<RunsResult, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for RunsSeed {
    type Value = RunsResult;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of -J documents")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RunsResult, A::Error> {
        let mut out = Vec::new();
        let mut bad = None;
        while let Some(mut run) = seq.next_element::<Report>()? {
            if bad.is_some() {
                continue;
            }
            run.end.local = super::load::roles_of(&run);
            if let Err(e) = check(&run) {
                bad = Some(e);
                continue;
            }
            if !self.keep_intervals {
                let last = run.intervals.pop();
                run.intervals = last.into_iter().collect();
            }
            out.push(run);
        }
        Ok(match bad {
            Some(e) => Err(e),
            None => Ok(out),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/report/testdata")
            .join(name);
        std::fs::read_to_string(&p).unwrap()
    }

    #[test]
    fn documents_and_streams_of_both_tools() {
        for f in [
            "tcp.json",
            "udp_bidir.json",
            "iperf3_322_tcp.json",
            "iperf3_322_udp_bidir.json",
            "tcp.jsonl",
            "iperf3_318_udp.jsonl",
            "iperf3_322_bidir.jsonl",
        ] {
            let r = parse_result(&fixture(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
            assert!(!r.intervals.is_empty(), "{f}");
        }
    }

    #[test]
    fn bad_inputs_in_one_sentence_each() {
        let doc = fixture("tcp.json");
        let msg = |t: &str| parse_result(t).unwrap_err().to_string();
        assert_eq!(msg(""), "it is empty");
        assert_eq!(msg(" \n\n"), "it is empty");
        assert!(msg(&doc[..doc.len() / 2]).starts_with("it is truncated JSON (it ends at line"));
        // Cut inside a number, where serde_json finds a syntax error, not the end: a
        // full run's half-cut file once ended `"seconds": 1.` and was called not JSON.
        let at = doc.find(": 1.").expect("a number with a fraction") + 4;
        for cut in [&doc[..at], &doc[..at - 1], &format!("{}\n\n", &doc[..at])] {
            assert!(
                msg(cut).starts_with("it is truncated JSON (it ends at line"),
                "{:?}: {}",
                &cut[cut.len().saturating_sub(20)..],
                msg(cut)
            );
        }
        assert!(msg("{\"a\": 1.x}").starts_with("it is not JSON"));
        assert!(msg("hello").starts_with("it is not JSON"));
        assert_eq!(
            msg("{\"name\": \"x\"}"),
            "it is not a netmeter or iperf3 result (no start, intervals and end)"
        );
        assert_eq!(
            msg("[1, 2]"),
            "it is not a netmeter or iperf3 result (no start, intervals and end)"
        );
        assert!(
            msg("{\"start\": 1, \"intervals\": [], \"end\": {}}")
                .starts_with("it is not a netmeter or iperf3 result (")
        );
        assert_eq!(
            msg(&fixture("iperf3_322_error.jsonl")),
            "the test it records failed: unable to connect to server - server may have \
             stopped running or use a different port, firewall issue, etc.: Connection refused"
        );
        let mut v: serde_json::Value = serde_json::from_str(&doc).unwrap();
        v["intervals"] = serde_json::json!([]);
        v["end"]["streams"] = serde_json::json!([]);
        assert_eq!(
            msg(&v.to_string()),
            "it holds no measurements (no intervals and no end-of-test streams)"
        );
        assert_eq!(
            msg(&format!("{doc}{doc}{doc}")),
            "it holds 3 JSON documents (a log of several tests?); keep one per file"
        );
        let stream = fixture("iperf3_322_tcp.jsonl");
        assert_eq!(
            msg(&stream[..stream.len() - 10]),
            "as --json-stream lines, line 4 is cut short"
        );
    }

    /// A test stopped on purpose keeps what it measured; any other error refuses.
    #[test]
    fn an_interrupted_test_is_a_result() {
        let mut v: serde_json::Value = serde_json::from_str(&fixture("tcp.json")).unwrap();
        v["error"] = "interrupt - the client has terminated by signal Interrupt(2)".into();
        assert!(parse_result(&v.to_string()).is_ok());
        v["error"] = "the server has terminated".into();
        assert_eq!(
            parse_result(&v.to_string()).unwrap_err().to_string(),
            "the test it records failed: the server has terminated"
        );
    }

    /// The reader path gives what the text path gave: the same report for every
    /// fixture, iperf3 3.12's repeated `start` keys included.
    #[test]
    fn read_from_a_file_as_from_text() {
        for f in [
            "tcp.json",
            "udp_bidir.json",
            "iperf3_312_tcp_p2.json",
            "tcp.jsonl",
        ] {
            let p = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("src/report/testdata")
                .join(f);
            let from_file = read_result(&p).unwrap_or_else(|e| panic!("{f}: {e}"));
            let text = fixture(f);
            let from_text = match f.ends_with(".jsonl") {
                true => Report::from_json_stream(&text).unwrap(),
                false => Report::from_document(&text).unwrap(),
            };
            assert_eq!(from_file, from_text, "{f}");
        }
    }

    /// A repetition document is read run by run; without the rows, each run keeps its
    /// last one; a bad run refuses the file; anything else is not a repetition.
    #[test]
    fn repetition_documents_run_by_run() {
        let tcp: serde_json::Value = serde_json::from_str(&fixture("tcp.json")).unwrap();
        let doc = serde_json::json!({"netmeter_repeat": {"runs": 2}, "runs": [tcp, tcp], "statistics": []});
        let runs = |doc: &serde_json::Value, keep| {
            read_runs(&mut std::io::Cursor::new(doc.to_string()), keep)
        };
        let Ok(Runs::Repetition(all)) = runs(&doc, true) else {
            panic!("not read as a repetition");
        };
        assert_eq!(all.len(), 2);
        assert_eq!(all[0], parse_result(&fixture("tcp.json")).unwrap());
        let Ok(Runs::Repetition(cut)) = runs(&doc, false) else {
            panic!("not read as a repetition");
        };
        assert_eq!(
            cut[1].intervals,
            all[1].intervals[all[1].intervals.len() - 1..]
        );
        assert_eq!(cut[1].end, all[1].end);
        let mut failed = tcp.clone();
        failed["error"] = "the server has terminated".into();
        let bad = serde_json::json!({"runs": [tcp, failed]});
        assert_eq!(
            runs(&bad, false).err().map(|e| e.to_string()).as_deref(),
            Some("the test it records failed: the server has terminated")
        );
        assert!(matches!(runs(&tcp, false), Ok(Runs::NotRepetition)));
        assert!(matches!(
            read_runs(&mut std::io::Cursor::new("not json"), false),
            Ok(Runs::NotRepetition)
        ));
    }

    #[test]
    fn the_file_is_named() {
        let e = read_result(Path::new("/nonexistent/r.json")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot use /nonexistent/r.json: cannot read it:"),
            "{e}"
        );
    }
}
