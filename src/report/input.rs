//! Result files as inputs of `netmeter plot` and `netmeter report`.
//!
//! A saved `-J` document, netmeter's or iperf3's (3.12–3.22), becomes a [`Report`]
//! through [`Report::from_document`]. Before that, the document is judged as a whole so
//! that a file that cannot be plotted is refused in one sentence naming it and what is
//! wrong with it: not JSON, cut short, JSON that is not a test result (or
//! `--json-stream` lines), a test that failed (`error`), or a test that measured
//! nothing. The judgement is pure ([`read_document`]); [`load_file`] adds the file.

use super::Report;
use serde::Deserialize;
use serde::de::IgnoredAny;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One loaded result and the name it goes by in legends and headings.
#[derive(Debug, Clone)]
pub struct Input {
    /// The document's `title` (`-T`/`--title`), else the file's name without `.json`.
    pub name: String,
    pub path: PathBuf,
    pub report: Report,
}

/// What is wrong with a document, worded to follow the file's name.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Problem {
    #[error("is empty")]
    Empty,
    #[error("is cut short: the JSON ends at line {line} before the document is complete")]
    Truncated { line: usize },
    #[error("is not JSON ({0})")]
    NotJson(String),
    #[error(
        "holds --json-stream lines; plot and report read a whole -J document (run the test with -J)"
    )]
    JsonStream,
    #[error("is not a netmeter or iperf3 -J result (no start, intervals and end objects)")]
    NotAResult,
    #[error("is a -J result that does not load: {0}")]
    Schema(String),
    #[error("records a test that failed: {0}")]
    Failed(String),
    #[error("holds an empty test: no intervals and no end summary")]
    NoMeasurements,
}

/// A file that could not be used, as one sentence.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot read {}: {err}", path.display())]
    Read { path: PathBuf, err: std::io::Error },
    #[error("{} {problem}", path.display())]
    Bad { path: PathBuf, problem: Problem },
}

/// Read and judge one result file.
pub fn load_file(path: &Path) -> Result<Input, InputError> {
    let text = std::fs::read_to_string(path).map_err(|err| InputError::Read {
        path: path.to_path_buf(),
        err,
    })?;
    let report = read_document(&text).map_err(|problem| InputError::Bad {
        path: path.to_path_buf(),
        problem,
    })?;
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

/// The file's name without a `.json` ending, for legends.
fn file_label(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    match name.strip_suffix(".json") {
        Some(stem) if !stem.is_empty() => stem.to_string(),
        _ => name,
    }
}

/// Judge a document's text and load it.
pub fn read_document(text: &str) -> Result<Report, Problem> {
    if text.trim().is_empty() {
        return Err(Problem::Empty);
    }
    // The syntax first, every value skipped unread (no allocation), then the top keys.
    match serde_json::from_str::<IgnoredAny>(text) {
        Ok(_) => {}
        Err(e) if e.is_eof() => return Err(Problem::Truncated { line: e.line() }),
        Err(_) if looks_like_stream(text) => return Err(Problem::JsonStream),
        Err(e) => return Err(Problem::NotJson(e.to_string())),
    }
    let outline: Outline = serde_json::from_str(text).map_err(|_| Problem::NotAResult)?;
    if let Some(err) = outline.error {
        let msg = err.as_str().map_or_else(|| err.to_string(), str::to_string);
        return Err(Problem::Failed(msg));
    }
    if outline.start.is_none() || outline.end.is_none() {
        return Err(if outline.event.is_some() {
            Problem::JsonStream
        } else {
            Problem::NotAResult
        });
    }
    let report = Report::from_document(text).map_err(|e| Problem::Schema(e.to_string()))?;
    let e = &report.end;
    let has_end = !e.streams.is_empty()
        || e.sum.is_some()
        || e.sum_sent.is_some()
        || e.sum_received.is_some();
    if report.intervals.is_empty() && !has_end {
        return Err(Problem::NoMeasurements);
    }
    Ok(report)
}

/// The top of a document: which keys it has (`start` and `end` must be objects).
#[derive(Deserialize)]
struct Outline {
    start: Option<HashMap<String, IgnoredAny>>,
    end: Option<HashMap<String, IgnoredAny>>,
    event: Option<IgnoredAny>,
    error: Option<serde_json::Value>,
}

/// `--json-stream` output: one JSON object per line, each with an `event` key.
fn looks_like_stream(text: &str) -> bool {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let first = lines
        .next()
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok());
    first.is_some_and(|v| v.get("event").is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: &str = include_str!("testdata/tcp.json");

    #[test]
    fn netmeter_and_iperf3_documents_load() {
        for doc in [
            TCP,
            include_str!("testdata/udp_bidir.json"),
            include_str!("testdata/iperf3_322_tcp.json"),
            include_str!("testdata/iperf3_322_udp_bidir.json"),
            // iperf3 3.12 repeats start's sock_bufsize/sndbuf_actual/rcvbuf_actual per stream.
            include_str!("testdata/iperf3_312_tcp_p2.json"),
        ] {
            let r = read_document(doc).unwrap();
            assert!(!r.intervals.is_empty());
            if r.start.test_start.protocol == "TCP" {
                // TCP_INFO figures of the sender's rows (Debian's 3.12 writes no `reorder`).
                let row = &r.intervals[0].streams[0];
                assert!(row.tcp.is_some_and(|t| t.snd_cwnd > 0), "{row:?}");
            }
        }
    }

    #[test]
    fn each_bad_document_has_its_own_sentence() {
        assert_eq!(read_document("  \n"), Err(Problem::Empty));
        let cut = &TCP[..TCP.len() / 2];
        assert!(matches!(read_document(cut), Err(Problem::Truncated { .. })));
        assert!(matches!(read_document("hello"), Err(Problem::NotJson(_))));
        assert_eq!(
            read_document(include_str!("testdata/tcp.jsonl")),
            Err(Problem::JsonStream)
        );
        assert_eq!(read_document(r#"{"a": 1}"#), Err(Problem::NotAResult));
        assert_eq!(read_document("[1, 2]"), Err(Problem::NotAResult));
        assert_eq!(
            read_document(r#"{"start": {}, "intervals": [], "end": {}, "error": "unable to connect to server - server may have stopped running or use a different port, firewall issue, etc.: Connection refused"}"#),
            Err(Problem::Failed("unable to connect to server - server may have stopped running or use a different port, firewall issue, etc.: Connection refused".into()))
        );
        assert_eq!(
            read_document(r#"{"start": {}, "intervals": [], "end": {}}"#),
            Err(Problem::NoMeasurements)
        );
        assert!(matches!(
            read_document(
                r#"{"start": {"test_start": {"num_streams": "two"}}, "intervals": [], "end": {}}"#
            ),
            Err(Problem::Schema(_))
        ));
    }

    #[test]
    fn messages_name_the_file() {
        let e = InputError::Bad {
            path: "runs/a.json".into(),
            problem: Problem::Truncated { line: 7 },
        };
        assert_eq!(
            e.to_string(),
            "runs/a.json is cut short: the JSON ends at line 7 before the document is complete"
        );
        assert_eq!(file_label(Path::new("x/tcp-run.json")), "tcp-run");
        assert_eq!(file_label(Path::new("x/.json")), ".json");
    }
}
