//! A saved result file, as `netmeter plot`/`report`/`csv`/`compare` read it
//! (`report::input::parse_result`: a `-J` document via `Report::from_document`, or
//! `--json-stream` lines via `Report::from_json_stream`), then rendered the ways those
//! commands render it: the `-J` document again, CSV rows, the text end summary, and the
//! HTML page with its SVG charts.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netmeter::report::csv::{Columns, rows};
use netmeter::report::input::{Input, parse_result};
use netmeter::report::text::{self, TextCtx};
use netmeter::report::{Report, html, json};
use netmeter::spec::Protocol;
use netmeter::units::Format;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Both loaders on every input, whichever the first line looks like.
    let _ = Report::from_document(text);
    let _ = Report::from_json_stream(text);
    let Ok(report) = parse_result(text) else {
        return;
    };
    let doc = json::document(&report);
    let _ = Report::from_document(&doc).expect("a loaded report's own document reads back");
    let _ = rows(&report, &Columns::default());
    let ctx = TextCtx {
        format: Format::Auto,
        protocol: if report.start.test_start.protocol == "UDP" {
            Protocol::Udp
        } else {
            Protocol::Tcp
        },
        bidir: report.start.test_start.bidir != 0,
        client: true,
        verbose: true,
        title: report.title.clone(),
        bounceback: false,
        connect_only: false,
        histogram_bin_ms: Some(0.5),
    };
    let _ = text::end_summary(&ctx, &report.end);
    for iv in &report.intervals {
        let _ = text::interval(&ctx, iv);
    }
    let input = Input {
        name: "fuzz".into(),
        path: "fuzz.json".into(),
        report,
    };
    let _ = html::render(std::slice::from_ref(&input));
});
