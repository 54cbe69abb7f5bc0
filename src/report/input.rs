//! A saved result as input (`netmeter csv`, `plot`, `report`): a `-J` document or `--json-stream`
//! lines, netmeter's or iperf3's, told apart by their first line and checked before
//! anything is rendered, so a bad file ends in one sentence and no output.
//!
//! Refused: an empty file, text that is not JSON or is cut short, JSON that is not a
//! result (no `start`/`intervals`/`end`), a result with an `error` (the test failed),
//! and a result with no measurements (no interval and no end-of-test stream). The one
//! error accepted is a stop on purpose (iperf3's and netmeter's `interrupt - ...`, as
//! every `-t 0` test ends): what ran before the stop is a valid result.

use super::Report;
use super::load_stream::{self, StreamError};
use serde::de::IgnoredAny;
use serde_json::error::Category;
use std::path::{Path, PathBuf};

/// What is wrong with the input, worded to follow "cannot use FILE: ".
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot read it: {0}")]
    Read(std::io::Error),
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

/// Read and check a result file.
pub fn read_result(path: &Path) -> Result<Report, FileError> {
    let err = |why| FileError {
        path: path.to_path_buf(),
        why,
    };
    let bytes = std::fs::read(path).map_err(|e| err(InputError::Read(e)))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| err(InputError::NotJson("it is not UTF-8 text".into())))?;
    parse_result(&text).map_err(err)
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
    let Some(first) = text.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return Err(InputError::Empty);
    };
    let report = if load_stream::is_event_line(first) {
        Report::from_json_stream(text).map_err(InputError::Stream)?
    } else {
        document(text)?
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

fn json_error(e: serde_json::Error) -> InputError {
    match e.classify() {
        Category::Eof => InputError::Truncated(e.line()),
        // Valid JSON of another shape (an array, a string...).
        Category::Data => InputError::NotAResult,
        Category::Syntax | Category::Io => InputError::NotJson(e.to_string()),
    }
}

/// A `-J` document: checked on a first pass that builds nothing (one JSON value, an
/// object with `start`, `intervals` and `end`), then loaded.
fn document(text: &str) -> Result<Report, InputError> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<Keys>();
    let keys = match values.next() {
        Some(Ok(keys)) => keys,
        Some(Err(e)) => return Err(json_error(e)),
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
    Report::from_document(text).map_err(|e| InputError::BadShape(e.to_string()))
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
