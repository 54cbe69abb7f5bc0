//! Reading saved `--json-stream` lines (netmeter's or iperf3's) back into a
//! [`Report`], beside `load` ([`Report::from_document`]) for whole `-J` documents.
//!
//! Each line is one event, `{"event": NAME, "data": VALUE}` (iperf3's
//! `JSONStream_Output`, src/iperf_api.c): `start` (the `start` object), `interval` (one
//! element of `intervals`), `end` (the `end` object), `error` (a string), and iperf3's
//! `server_output_json` / `server_output_text`. Each data value has the same shape as
//! the same part of a `-J` document, so it loads with the same types; an event name this
//! version does not know (a newer writer's) is skipped. Blank lines are allowed.

use super::Report;
use serde::Deserialize;

/// Why the lines are not a `--json-stream` result. `line` counts from 1.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StreamError {
    #[error("it has no events")]
    NoEvents,
    #[error("line {line} is cut short")]
    Truncated { line: usize },
    #[error("line {line} is not JSON ({why})")]
    NotJson { line: usize, why: String },
    #[error("line {line} is not a --json-stream event ({why})")]
    NotEvent { line: usize, why: String },
    #[error("line {line} starts a second test; keep one test's lines per file")]
    SecondTest { line: usize },
    #[error("the {event} event on line {line} does not have iperf3's shape ({why})")]
    BadData {
        line: usize,
        event: String,
        why: String,
    },
}

#[derive(Deserialize)]
struct Line {
    event: String,
    #[serde(default)]
    data: serde_json::Value,
}

/// Does this line look like the first of a `--json-stream` file?
pub fn is_event_line(line: &str) -> bool {
    serde_json::from_str::<Line>(line.trim()).is_ok()
}

impl Report {
    /// Read `--json-stream` lines. Roles are inferred as for a document
    /// ([`Report::from_document`]).
    pub fn from_json_stream(text: &str) -> Result<Report, StreamError> {
        Report::from_json_stream_reader(text.as_bytes())
    }

    /// Read `--json-stream` lines from `reader`, one line in memory at a time.
    pub fn from_json_stream_reader(reader: impl std::io::BufRead) -> Result<Report, StreamError> {
        let mut r = Report::default();
        let mut events = 0;
        let mut started = false;
        for (i, raw) in reader.lines().enumerate() {
            let line = i + 1;
            let raw = raw.map_err(|e| StreamError::NotJson {
                line,
                why: match e.kind() {
                    std::io::ErrorKind::InvalidData => "it is not UTF-8 text".to_string(),
                    _ => e.to_string(),
                },
            })?;
            let raw = raw.trim();
            if raw.is_empty() {
                continue;
            }
            let value: serde_json::Value = serde_json::from_str(raw).map_err(|e| {
                if e.is_eof() {
                    StreamError::Truncated { line }
                } else {
                    StreamError::NotJson {
                        line,
                        why: e.to_string(),
                    }
                }
            })?;
            let ev: Line = serde_json::from_value(value).map_err(|e| StreamError::NotEvent {
                line,
                why: e.to_string(),
            })?;
            events += 1;
            let bad = |e: serde_json::Error| StreamError::BadData {
                line,
                event: ev.event.clone(),
                why: e.to_string(),
            };
            match ev.event.as_str() {
                // A server's log holds one test after another; rows of two tests in one
                // report would be nonsense.
                "start" if started => return Err(StreamError::SecondTest { line }),
                "start" => {
                    started = true;
                    r.start = serde_json::from_value(ev.data.clone()).map_err(bad)?
                }
                "interval" => r
                    .intervals
                    .push(serde_json::from_value(ev.data.clone()).map_err(bad)?),
                "end" => r.end = serde_json::from_value(ev.data.clone()).map_err(bad)?,
                "error" => r.error = Some(string_of(&ev.data)),
                "server_output_json" => r.server_output_json = Some(ev.data.clone()),
                "server_output_text" => r.server_output_text = Some(string_of(&ev.data)),
                _ => {}
            }
        }
        if events == 0 {
            return Err(StreamError::NoEvents);
        }
        r.end.local = super::load::roles_of(&r);
        Ok(r)
    }
}

fn string_of(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/report/testdata")
            .join(name);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// netmeter's own lines load into the report its `-J` document loads into, but for
    /// what `--json-stream` does not carry (title, extra data).
    #[test]
    fn netmeter_stream_matches_its_document() {
        for case in ["tcp", "udp_bidir", "bounceback", "udp_reverse_figures"] {
            let doc = Report::from_document(&fixture(&format!("{case}.json"))).unwrap();
            let stream = Report::from_json_stream(&fixture(&format!("{case}.jsonl"))).unwrap();
            assert_eq!(stream.start, doc.start, "{case}");
            assert_eq!(stream.intervals, doc.intervals, "{case}");
            assert_eq!(stream.end, doc.end, "{case}");
        }
    }

    /// Lines written by the real iperf3 3.18 and 3.22 (`-P 2`, UDP, `--bidir`).
    #[test]
    fn iperf3_streams_load() {
        for (name, protocol, streams) in [
            ("iperf3_318_tcp.jsonl", "TCP", 2),
            ("iperf3_322_tcp.jsonl", "TCP", 2),
            ("iperf3_318_udp.jsonl", "UDP", 1),
            ("iperf3_322_udp.jsonl", "UDP", 1),
            ("iperf3_322_bidir.jsonl", "TCP", 2),
        ] {
            let r = Report::from_json_stream(&fixture(name)).unwrap();
            assert_eq!(r.start.test_start.protocol, protocol, "{name}");
            assert!(r.start.version.starts_with("iperf 3."), "{name}");
            assert_eq!(r.intervals.len(), 2, "{name}");
            assert_eq!(r.intervals[0].streams.len(), streams, "{name}");
            assert!(r.intervals[1].sum.bits_per_second > 0.0, "{name}");
            assert_eq!(r.end.streams.len(), streams, "{name}");
            assert!(r.error.is_none(), "{name}");
        }
        let bidir = Report::from_json_stream(&fixture("iperf3_322_bidir.jsonl")).unwrap();
        assert!(bidir.intervals[0].sum_bidir_reverse.is_some());
        assert_eq!(bidir.end.local.senders, [true, false]);
    }

    /// iperf3 3.22 failing to connect: an `error` event, then an empty `end`.
    #[test]
    fn iperf3_error_stream() {
        let r = Report::from_json_stream(&fixture("iperf3_322_error.jsonl")).unwrap();
        assert!(r.error.unwrap().starts_with("unable to connect to server"));
        assert!(r.intervals.is_empty() && r.end.streams.is_empty());
    }

    #[test]
    fn refusals_name_the_line() {
        let full = fixture("iperf3_322_tcp.jsonl");
        let cut = &full[..full.len() - 40];
        assert_eq!(
            Report::from_json_stream(cut),
            Err(StreamError::Truncated { line: 4 })
        );
        assert_eq!(
            Report::from_json_stream("\n  \n"),
            Err(StreamError::NoEvents)
        );
        assert!(matches!(
            Report::from_json_stream("{\"event\":\"start\",\"data\":{}}\nnot json\n"),
            Err(StreamError::NotJson { line: 2, .. })
        ));
        assert!(matches!(
            Report::from_json_stream("{\"a\": 1}\n"),
            Err(StreamError::NotEvent { line: 1, .. })
        ));
        assert!(matches!(
            Report::from_json_stream("{\"event\":\"interval\",\"data\":{\"streams\":3}}\n"),
            Err(StreamError::BadData { line: 1, .. })
        ));
        let two = format!("{full}{full}");
        assert_eq!(
            Report::from_json_stream(&two),
            Err(StreamError::SecondTest { line: 5 })
        );
        // A newer writer's event is skipped, not refused.
        let r = Report::from_json_stream("{\"event\":\"later\",\"data\":1}\n").unwrap();
        assert!(r.intervals.is_empty());
    }
}
