//! Where a test's report goes: text lines as they happen, or iperf3 JSON.
//!
//! One `Output` per test. It owns the growing [`Report`], renders text with
//! `report::text`, emits `--json-stream` events, and keeps a copy of the text for a
//! client that asked for `--get-server-output`.

use crate::report::text::{self, TextCtx};
use crate::report::{End, Interval, Report, json};
use std::io::Write;
use std::sync::{Arc, Mutex};

/// Output style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Text,
    /// `-J`: one document at the end.
    Json,
    /// `--json-stream`: one event per line as things happen.
    JsonStream,
}

/// A shared, thread-safe destination (stdout or a `--logfile`).
pub type Sink = Arc<Mutex<Box<dyn Write + Send>>>;

/// Make a sink from any writer.
pub fn sink(w: Box<dyn Write + Send>) -> Sink {
    Arc::new(Mutex::new(w))
}

/// One test's report in progress.
pub struct Output {
    pub mode: Mode,
    sink: Sink,
    pub ctx: TextCtx,
    pub report: Report,
    /// Text captured for `--get-server-output`.
    pub captured: Option<String>,
    headers_done: bool,
}

impl Output {
    pub fn new(mode: Mode, sink: Sink, ctx: TextCtx) -> Output {
        Output {
            mode,
            sink,
            ctx,
            // Known before any connection, so even an error document carries them.
            report: Report {
                start: crate::report::Start {
                    version: format!("netmeter {}", env!("CARGO_PKG_VERSION")),
                    system_info: crate::sock::system_info(),
                    ..Default::default()
                },
                ..Default::default()
            },
            captured: None,
            headers_done: false,
        }
    }

    fn write(&self, s: &str) {
        if let Ok(mut w) = self.sink.lock() {
            let _ = w.write_all(s.as_bytes());
            let _ = w.flush();
        }
    }

    /// Print text (text mode only; always captured when capturing).
    pub fn text(&mut self, s: &str) {
        if let Some(c) = self.captured.as_mut() {
            c.push_str(s);
        }
        if self.mode == Mode::Text {
            let s = self.ctx.titled(s.to_string());
            self.write(&s);
        }
    }

    /// The `start` object is complete.
    pub fn start_done(&mut self) {
        if self.mode == Mode::JsonStream {
            let s = json::event("start", &self.report.start);
            self.write(&s);
        }
    }

    /// One interval.
    pub fn interval(&mut self, iv: Interval) {
        if !self.headers_done {
            self.headers_done = true;
            let h = text::first_interval_header(&self.ctx, &iv);
            self.text(&h);
        }
        let t = text::interval(&self.ctx, &iv);
        if let Some(c) = self.captured.as_mut() {
            c.push_str(&t);
        }
        match self.mode {
            Mode::Text => self.write(&t),
            Mode::JsonStream => self.write(&json::event("interval", &iv)),
            Mode::Json => {}
        }
        self.report.intervals.push(iv);
    }

    /// The end summary: print it (text, `--json-stream`) and keep it in the report.
    pub fn end(&mut self, end: End) {
        let t = text::end_summary(&self.ctx, &end);
        self.report.end = end;
        self.text(&t);
        if self.mode == Mode::JsonStream {
            let s = json::event("end", &self.report.end);
            self.write(&s);
        }
    }

    /// Record an error: a line in text mode, the `error` key in JSON.
    pub fn error(&mut self, msg: &str) {
        self.report.error = Some(msg.to_string());
        match self.mode {
            // An error reaches the user once: a client's on stderr from main, a server's
            // in the server's log line naming the client (`engine::server`).
            Mode::Text => {}
            Mode::JsonStream => self.write(&json::event("error", &msg)),
            Mode::Json => {}
        }
    }

    /// Finish: print the JSON document in `-J` mode.
    pub fn finish(&mut self) {
        if self.mode == Mode::Json {
            let s = json::document(&self.report);
            self.write(&s);
        }
    }
}
