//! A result file as `netmeter compare` reads it (`cli::compare_cmd::runs_from`): a
//! `--repeat` document (`{"runs": [...]}`, read run by run, each run checked as a result
//! of its own), else one result (`-J` document or `--json-stream` lines); and as
//! `netmeter plot`/`report` look at it first, a sweep document
//! (`sweep_plot::read_document_from`: its points' cells and the sweep's charts). The runs
//! are then compared (`compare::compare`, its text table and JSON), with themselves and,
//! when there are two or more, the first half against the rest.
//!
//! Input: a flags byte (bit 0: keep the interval rows, as `compare --plot` does), then
//! the file. The 1 GiB file limit (`report::input::MAX_RESULT_FILE_BYTES`) is checked
//! on the file's size before any byte is read, so no input here reaches it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netmeter::cli::compare_cmd;
use netmeter::experiment::{compare, figures, sweep_plot};
use std::io::Cursor;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, body)) = data.split_first() else {
        return;
    };
    if let Ok(Some((swept, cells))) = sweep_plot::read_document_from(&mut Cursor::new(body)) {
        let _ = sweep_plot::charts(&swept, &cells);
    }
    let Ok(runs) = compare_cmd::runs_from(&mut Cursor::new(body), flags & 1 == 1) else {
        return;
    };
    assert!(!runs.is_empty(), "a file read without error has a run");
    for r in &runs {
        let _ = figures::figures(r);
        let _ = figures::kind(r);
    }
    let half = runs.len() / 2;
    let pairs = [(&runs[..], &runs[..]), (&runs[..half], &runs[half..])];
    for (base, new) in pairs {
        if let Ok(c) = compare::compare(base, new) {
            let _ = compare::text(&c, "base.json", "new.json");
            let _ = serde_json::to_string(&c).expect("a comparison serializes");
        }
    }
});
