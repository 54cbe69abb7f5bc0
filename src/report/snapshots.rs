//! Snapshot tests of the renderers on fixed reports.
//!
//! Each `testdata/<case>.json` is a `-J` document a netmeter client wrote over loopback
//! (one per mode: TCP, UDP, -R, --bidir, bounceback, connect-only, trip times, working
//! load, and `-u -R --trip-times` rendered with `-V` for iperf 2's figures). Loading it
//! gives a fixed [`Report`]; the tests check that
//! - the JSON document renders back byte for byte (so the types lose nothing and a saved
//!   document re-renders as it was written),
//! - the text renderer, the `--json-stream` events and the CSV rows print exactly
//!   `testdata/<case>.txt` / `<case>.jsonl` / `<case>.csv`.
//!
//! Plain expected files rather than a snapshot crate: nothing to install, and a diff of
//! a renderer change is an ordinary `git diff` of the `.txt` file. After an intended
//! change, `NETMETER_UPDATE_SNAPSHOTS=1 cargo test --lib report::snapshots` rewrites the
//! expected files; review them before committing.

// Test code only (its unwraps are assertions): compiled for tests, whatever the
// parent module declares.
#![cfg(test)]

use super::text::{self, TextCtx};
use super::{Report, json};
use crate::spec::Protocol;
use crate::units::Format;
use std::path::PathBuf;

/// How one fixture is rendered as text.
struct Case {
    name: &'static str,
    bounceback: bool,
    connect_only: bool,
    verbose: bool,
    histogram_bin_ms: Option<f64>,
}

const CASES: &[Case] = &[
    Case {
        name: "tcp",
        bounceback: false,
        connect_only: false,
        verbose: true,
        histogram_bin_ms: None,
    },
    Case {
        name: "udp",
        bounceback: false,
        connect_only: false,
        verbose: false,
        histogram_bin_ms: None,
    },
    Case {
        name: "tcp_reverse",
        bounceback: false,
        connect_only: false,
        verbose: true,
        histogram_bin_ms: None,
    },
    Case {
        name: "tcp_bidir",
        bounceback: false,
        connect_only: false,
        verbose: false,
        histogram_bin_ms: None,
    },
    Case {
        name: "udp_bidir",
        bounceback: false,
        connect_only: false,
        verbose: false,
        histogram_bin_ms: None,
    },
    Case {
        name: "bounceback",
        bounceback: true,
        connect_only: false,
        verbose: false,
        histogram_bin_ms: Some(0.1),
    },
    Case {
        name: "connect_only",
        bounceback: false,
        connect_only: true,
        verbose: false,
        histogram_bin_ms: None,
    },
    Case {
        name: "trip_times",
        bounceback: false,
        connect_only: false,
        verbose: false,
        histogram_bin_ms: Some(0.05),
    },
    Case {
        name: "udp_reverse_figures",
        bounceback: false,
        connect_only: false,
        verbose: true,
        histogram_bin_ms: None,
    },
    Case {
        name: "working_load",
        bounceback: true,
        connect_only: false,
        verbose: false,
        histogram_bin_ms: None,
    },
];

fn testdata(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/report/testdata")
        .join(file)
}

fn load(name: &str) -> (String, Report) {
    let raw = std::fs::read_to_string(testdata(&format!("{name}.json"))).unwrap();
    let report = Report::from_document(&raw).unwrap();
    (raw, report)
}

/// Compare with the expected file, or rewrite it when asked to.
fn check(file: &str, actual: &str) {
    let path = testdata(file);
    if std::env::var_os("NETMETER_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (NETMETER_UPDATE_SNAPSHOTS=1 writes it)", file));
    same(file, &expected, actual);
}

/// Panic with the first differing lines, not two whole documents.
fn same(file: &str, expected: &str, actual: &str) {
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{file} differs from line {}:\n--- expected\n{}\n--- actual\n{}",
            line + 1,
            expected
                .lines()
                .skip(line)
                .take(5)
                .collect::<Vec<_>>()
                .join("\n"),
            actual
                .lines()
                .skip(line)
                .take(5)
                .collect::<Vec<_>>()
                .join("\n"),
        );
    }
}

fn ctx(r: &Report, c: &Case) -> TextCtx {
    TextCtx {
        format: Format::Auto,
        protocol: match r.start.test_start.protocol.as_str() {
            "UDP" => Protocol::Udp,
            _ => Protocol::Tcp,
        },
        bidir: r.start.test_start.bidir == 1,
        client: r.start.connecting_to.is_some(),
        verbose: c.verbose,
        title: r.title.clone(),
        bounceback: c.bounceback,
        connect_only: c.connect_only,
        histogram_bin_ms: c.histogram_bin_ms,
    }
}

/// The text a client prints from its first interval to the end of the summary.
fn render_text(r: &Report, ctx: &TextCtx) -> String {
    let mut t = String::new();
    if let Some(first) = r.intervals.first() {
        t.push_str(&ctx.titled(text::first_interval_header(ctx, first)));
    }
    for (n, iv) in r.intervals.iter().enumerate() {
        if n > 0 {
            t.push_str(&text::between_intervals(ctx, iv));
        }
        t.push_str(&text::interval(ctx, iv));
    }
    t.push_str(&ctx.titled(text::end_summary(ctx, &r.end)));
    t
}

fn render_stream(r: &Report) -> String {
    let mut t = json::event("start", &r.start);
    for iv in &r.intervals {
        t.push_str(&json::event("interval", iv));
    }
    t.push_str(&json::event("end", &r.end));
    t
}

#[test]
fn json_documents_render_back_byte_for_byte() {
    for c in CASES {
        let (raw, report) = load(c.name);
        same(&format!("{}.json", c.name), &raw, &json::document(&report));
    }
}

#[test]
fn text_renderer_snapshots() {
    for c in CASES {
        let (_, report) = load(c.name);
        check(
            &format!("{}.txt", c.name),
            &render_text(&report, &ctx(&report, c)),
        );
    }
}

#[test]
fn text_renderer_with_a_title_prefixes_every_line() {
    let (_, mut report) = load("tcp_bidir");
    report.title = Some("lab".into());
    let t = render_text(&report, &ctx(&report, &CASES[3]));
    assert!(t.lines().all(|l| l.starts_with("lab:  ")), "{t}");
}

/// The CSV of every fixture, all columns: a change of a column's name, order or
/// number format shows here (docs/csv.md promises they stay).
#[test]
fn csv_snapshots() {
    for c in CASES {
        let (_, report) = load(c.name);
        let rows = super::csv::rows(&report, &super::csv::Columns::default());
        check(&format!("{}.csv", c.name), &rows);
    }
}

#[test]
fn json_stream_snapshots() {
    for name in ["tcp", "udp_bidir", "bounceback", "udp_reverse_figures"] {
        let (_, report) = load(name);
        check(&format!("{name}.jsonl"), &render_stream(&report));
    }
}

#[test]
fn iperf3_documents_load_into_the_same_types() {
    for name in ["iperf3_322_tcp", "iperf3_322_udp_bidir"] {
        let raw = std::fs::read_to_string(testdata(&format!("{name}.json"))).unwrap();
        let r = Report::from_document(&raw).unwrap_or_else(|e| panic!("{name}: {e}"));
        let v: serde_json::Value = serde_json::from_str(&raw).unwrap();
        let n = |path: &str| v.pointer(path).and_then(|x| x.as_f64()).unwrap();
        assert_eq!(r.intervals.len(), v["intervals"].as_array().unwrap().len());
        assert_eq!(
            r.end.streams.len(),
            v["end"]["streams"].as_array().unwrap().len()
        );
        let row = &r.intervals[0].streams[0];
        assert_eq!(
            row.bytes as f64,
            n("/intervals/0/streams/0/bytes"),
            "{name}"
        );
        assert_eq!(
            r.start.test_start.protocol,
            v["start"]["test_start"]["protocol"]
        );
        if r.start.test_start.protocol == "UDP" {
            // A receiver's row: its `packets` are the receive figures' count.
            let rx = r.intervals[0].streams.iter().find(|s| !s.sender).unwrap();
            assert!(
                rx.udp_recv.is_some() && rx.packets.is_none(),
                "{name}: {rx:?}"
            );
            let e = r.end.sum_received.as_ref().unwrap();
            assert_eq!(e.bytes as f64, n("/end/sum_received/bytes"), "{name}");
        } else {
            assert!(row.tcp.is_some(), "{name}");
            let sent = r.end.sum_sent.as_ref().unwrap();
            assert_eq!(
                sent.retransmits.map(|x| x as f64),
                Some(n("/end/sum_sent/retransmits"))
            );
            assert!(r.end.local.sender_retransmits);
        }
        // And it renders.
        let c = &CASES[0];
        assert!(render_text(&r, &ctx(&r, c)).contains("sender"), "{name}");
    }
}
