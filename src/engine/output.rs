//! Where a test's report goes.
//!
//! [`Output`] is the engine's side: it owns the growing [`Report`] and tells an
//! [`Observer`] what happened, in order. [`Renderer`] is the iperf3 text / `-J` /
//! `--json-stream` observer: text lines as they happen (rendered with `report::text`),
//! `--json-stream` events, the `-J` document at the end, and a copy of the text for a
//! server whose client asked for `--get-server-output`.

use crate::report::escape::{Lines, escape_controls};
use crate::report::observe::{Event, Observer};
use crate::report::text::{self, TextCtx};
use crate::report::{Connected, End, Interval, Report, json};
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

/// iperf3's default `--timestamps` format (`TIMESTAMP_FORMAT`, src/iperf.h).
pub const TIMESTAMP_FORMAT: &str = "%c ";

/// `--timestamps[=FORMAT]`: starts every line written through it with a stamp (the
/// local time in `strftime` FORMAT, taken when the line's first byte is written), as
/// iperf3 does for its text output. iperf3 stamps each `printf` call, netmeter each
/// line: the same for one-line messages, and a multi-line block gets a stamp per line.
pub struct Stamped<W> {
    inner: W,
    stamp: Box<dyn FnMut() -> String + Send>,
    at_line_start: bool,
}

impl<W: Write> Stamped<W> {
    /// Stamp lines with the local time in `format`, as `clock`'s wall clock reads it.
    pub fn local_time(
        inner: W,
        format: String,
        clock: std::sync::Arc<dyn crate::clock::Clock>,
    ) -> Stamped<W> {
        Stamped::with(
            inner,
            Box::new(move || {
                let secs = clock.wall_ns().div_euclid(1_000_000_000);
                crate::sock::local_time_text(&format, secs)
            }),
        )
    }

    /// Stamp lines with what `stamp` returns.
    pub fn with(inner: W, stamp: Box<dyn FnMut() -> String + Send>) -> Stamped<W> {
        Stamped {
            inner,
            stamp,
            at_line_start: true,
        }
    }
}

impl<W: Write> Write for Stamped<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut out = Vec::with_capacity(buf.len() + 32);
        for line in buf.split_inclusive(|&b| b == b'\n') {
            if self.at_line_start {
                out.extend_from_slice((self.stamp)().as_bytes());
            }
            out.extend_from_slice(line);
            self.at_line_start = line.ends_with(b"\n");
        }
        self.inner.write_all(&out)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// One test's report in progress, and who is told about it.
pub struct Output<'o, O: Observer + ?Sized + 'o = dyn Observer + 'o> {
    pub report: Report,
    pub obs: &'o mut O,
}

impl<'o, O: Observer + ?Sized + 'o> Output<'o, O> {
    pub fn new(obs: &'o mut O) -> Output<'o, O> {
        Output {
            // Known before any connection, so even an error document carries them.
            report: Report {
                start: crate::report::Start {
                    version: format!("netmeter {}", env!("CARGO_PKG_VERSION")),
                    system_info: crate::sock::system_info(),
                    ..Default::default()
                },
                ..Default::default()
            },
            obs,
        }
    }

    /// Tell the observer (for events that carry no report part).
    pub fn emit(&mut self, event: Event<'_>) {
        self.obs.on(event);
    }

    /// A warning for the user.
    pub fn warning(&mut self, w: &str) {
        self.obs.on(Event::Warning(w));
    }

    /// A data stream connected: tell, and keep it in `start.connected`.
    pub fn connected(&mut self, c: Connected) {
        self.obs.on(Event::Connected(&c));
        self.report.start.connected.push(c);
    }

    /// The `start` object is complete.
    pub fn start_done(&mut self) {
        self.obs.on(Event::Started(&self.report.start));
    }

    /// One interval.
    pub fn interval(&mut self, iv: Interval) {
        self.obs.on(Event::Interval(&iv));
        self.report.intervals.push(iv);
    }

    /// The end summary: keep it in the report and tell.
    pub fn end(&mut self, end: End) {
        self.report.end = end;
        self.obs.on(Event::End(&self.report.end));
    }

    /// Record an error in the report and tell.
    pub fn error(&mut self, msg: &str) {
        self.report.error = Some(msg.to_string());
        self.obs.on(Event::Error(msg));
    }

    /// The report is complete.
    pub fn finish(&mut self) {
        self.obs.on(Event::Finished(&self.report));
    }
}

/// The iperf3 renderings of a test's events.
pub struct Renderer {
    pub mode: Mode,
    sink: Sink,
    pub ctx: TextCtx,
    /// Text captured for `--get-server-output`.
    pub captured: Option<String>,
    /// `--json-stream-full-output`: after the `--json-stream` events, the whole `-J`
    /// document too (as iperf3 3.17+).
    pub json_stream_full: bool,
    headers_done: bool,
}

impl Renderer {
    pub fn new(mode: Mode, sink: Sink, ctx: TextCtx) -> Renderer {
        Renderer {
            mode,
            sink,
            ctx,
            captured: None,
            json_stream_full: false,
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
    fn text(&mut self, s: &str) {
        if let Some(c) = self.captured.as_mut() {
            c.push_str(s);
        }
        if self.mode == Mode::Text {
            let s = self.ctx.titled(s.to_string());
            self.write(&s);
        }
    }

    fn interval(&mut self, iv: &Interval) {
        let mut t = if self.headers_done {
            text::between_intervals(&self.ctx, iv)
        } else {
            self.headers_done = true;
            let h = text::first_interval_header(&self.ctx, iv);
            self.text(&h);
            String::new()
        };
        t.push_str(&text::interval(&self.ctx, iv));
        if let Some(c) = self.captured.as_mut() {
            c.push_str(&t);
        }
        match self.mode {
            Mode::Text => self.write(&t),
            Mode::JsonStream => self.write(&json::event("interval", iv)),
            Mode::Json => {}
        }
    }
}

impl Observer for Renderer {
    fn on(&mut self, event: Event<'_>) {
        match event {
            Event::Connecting { host, port } => self.text(&text::connecting(host, port)),
            Event::Accepted { host, port } => self.text(&text::accepted(host, port)),
            Event::Connected(c) => self.text(&text::connected(c)),
            Event::ReverseMode { host } => {
                self.text(&format!("Reverse mode, remote host {host} is sending\n"))
            }
            // A warning can quote the peer (its extension answer, a third-party server).
            Event::Warning(w) => {
                self.text(&format!("warning: {}\n", escape_controls(w, Lines::Many)))
            }
            Event::Info(s) => self.text(s),
            Event::Started(start) => {
                if self.mode == Mode::JsonStream {
                    self.write(&json::event("start", start));
                }
            }
            Event::Interval(iv) => self.interval(iv),
            Event::Error(msg) => {
                // An error reaches the user once: a client's on stderr from main, a
                // server's in the server's log line naming the client (`engine::server`).
                if self.mode == Mode::JsonStream {
                    self.write(&json::event("error", &msg));
                }
            }
            Event::End(end) => {
                let t = text::end_summary(&self.ctx, end);
                self.text(&t);
                if self.mode == Mode::JsonStream {
                    self.write(&json::event("end", end));
                }
            }
            Event::ServerOutput(t) => {
                self.text("\nServer output:\n");
                // The server's text, as the server chose it: shown, not obeyed.
                self.text(&escape_controls(t, Lines::Many));
            }
            Event::Done => self.text("\niperf Done.\n"),
            Event::Finished(report) => {
                if self.mode == Mode::Json
                    || (self.mode == Mode::JsonStream && self.json_stream_full)
                {
                    self.write(&json::document(report));
                }
            }
            Event::Listening { port, test } => {
                if self.mode == Mode::Text {
                    self.write(&text::listening(port, test));
                }
            }
            Event::ServerLog(msg) => match self.mode {
                Mode::Text => self.write(&text::server_log(msg)),
                _ => self.write(&json::server_log(msg)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Protocol;

    /// A sink whose bytes the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn ctx() -> TextCtx {
        TextCtx {
            bounceback: false,
            connect_only: false,
            histogram_bin_ms: None,
            format: Default::default(),
            protocol: Protocol::Tcp,
            bidir: false,
            client: true,
            verbose: false,
            title: None,
        }
    }

    /// Keeps the names of the events it saw.
    #[derive(Default)]
    struct Names(Vec<String>);

    impl Observer for Names {
        fn on(&mut self, e: Event<'_>) {
            let name = format!("{e:?}");
            self.0
                .push(name.split([' ', '(']).next().unwrap().to_string());
        }
    }

    #[test]
    fn output_keeps_the_report_and_tells_in_order() {
        let mut names = Names::default();
        let mut out = Output::new(&mut names);
        out.emit(Event::Connecting { host: "h", port: 1 });
        out.connected(Connected {
            socket: 5,
            local_host: "127.0.0.1".into(),
            local_port: 40000,
            remote_host: "127.0.0.1".into(),
            remote_port: 5201,
        });
        out.start_done();
        out.interval(Interval::default());
        out.error("boom");
        out.end(End::default());
        out.emit(Event::Done);
        out.finish();
        assert_eq!(out.report.start.connected.len(), 1);
        assert_eq!(out.report.intervals.len(), 1);
        assert_eq!(out.report.error.as_deref(), Some("boom"));
        assert!(out.report.start.version.starts_with("netmeter "));
        assert_eq!(
            names.0,
            [
                "Connecting",
                "Connected",
                "Started",
                "Interval",
                "Error",
                "End",
                "Done",
                "Finished"
            ]
        );
    }

    #[test]
    fn text_renderer_prints_iperf3s_lines_and_captures_them() {
        let buf = Shared::default();
        let mut r = Renderer::new(Mode::Text, sink(Box::new(buf.clone())), ctx());
        r.captured = Some(String::new());
        r.on(Event::Connecting {
            host: "example",
            port: 5201,
        });
        r.on(Event::ReverseMode { host: "example" });
        r.on(Event::Warning("careful"));
        r.on(Event::Error("not printed in text mode"));
        r.on(Event::ServerOutput("server text\n"));
        r.on(Event::Done);
        r.on(Event::Finished(&Report::default()));
        let want = "Connecting to host example, port 5201\n\
                    Reverse mode, remote host example is sending\n\
                    warning: careful\n\
                    \nServer output:\nserver text\n\
                    \niperf Done.\n";
        assert_eq!(
            String::from_utf8(buf.0.lock().unwrap().clone()).unwrap(),
            want
        );
        assert_eq!(r.captured.as_deref(), Some(want));
    }

    #[test]
    fn server_output_reaches_the_terminal_with_its_controls_escaped() {
        let buf = Shared::default();
        let mut r = Renderer::new(Mode::Text, sink(Box::new(buf.clone())), ctx());
        r.on(Event::ServerOutput("user \x1b]0;pwned\x07 ok\r\n\tnext\n"));
        r.on(Event::Warning("the server says \x1b[2J"));
        let got = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            got,
            "\nServer output:\nuser \\x1b]0;pwned\\x07 ok\\r\n\tnext\n\
             warning: the server says \\x1b[2J\n"
        );
    }

    #[test]
    fn json_renderer_prints_the_document_only_at_the_end() {
        let buf = Shared::default();
        let mut r = Renderer::new(Mode::Json, sink(Box::new(buf.clone())), ctx());
        r.on(Event::Connecting {
            host: "example",
            port: 5201,
        });
        r.on(Event::Done);
        assert!(buf.0.lock().unwrap().is_empty());
        let report = Report::default();
        r.on(Event::Finished(&report));
        let got = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert_eq!(got, json::document(&report));
    }

    /// The server's own events, byte for byte as the server always printed them: the
    /// banner only in text mode, log lines as text or as one JSON object per line.
    #[test]
    fn server_events_render_as_before() {
        let text = Shared::default();
        let mut r = Renderer::new(Mode::Text, sink(Box::new(text.clone())), ctx());
        r.on(Event::Listening {
            port: 5201,
            test: 2,
        });
        r.on(Event::ServerLog("test from 127.0.0.1:1 stopped"));
        let dash = "-".repeat(59);
        assert_eq!(
            String::from_utf8(text.0.lock().unwrap().clone()).unwrap(),
            format!(
                "{dash}\nServer listening on 5201 (test #2)\n{dash}\n\
                 netmeter: test from 127.0.0.1:1 stopped\n"
            )
        );
        for mode in [Mode::Json, Mode::JsonStream] {
            let buf = Shared::default();
            let mut r = Renderer::new(mode, sink(Box::new(buf.clone())), ctx());
            r.on(Event::Listening {
                port: 5201,
                test: 1,
            });
            r.on(Event::ServerLog("say \"hi\""));
            assert_eq!(
                String::from_utf8(buf.0.lock().unwrap().clone()).unwrap(),
                "{\"data\":\"say \\\"hi\\\"\",\"event\":\"server_log\"}\n"
            );
        }
    }

    #[test]
    fn stamped_lines_each_start_with_a_stamp() {
        let buf = Shared::default();
        let mut n = 0;
        let mut w = Stamped::with(
            buf.clone(),
            Box::new(move || {
                n += 1;
                format!("<{n}> ")
            }),
        );
        w.write_all(b"one\ntwo").unwrap();
        w.write_all(b" more\n\nthree\n").unwrap();
        let got = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert_eq!(got, "<1> one\n<2> two more\n<3> \n<4> three\n");
    }

    #[test]
    fn json_stream_full_output_adds_the_document_after_the_events() {
        let buf = Shared::default();
        let mut r = Renderer::new(Mode::JsonStream, sink(Box::new(buf.clone())), ctx());
        r.on(Event::End(&End::default()));
        let report = Report::default();
        r.on(Event::Finished(&report));
        let events = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert!(!events.contains(&json::document(&report)));
        buf.0.lock().unwrap().clear();
        r.json_stream_full = true;
        r.on(Event::End(&End::default()));
        r.on(Event::Finished(&report));
        let got = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert!(got.starts_with("{\"event\":\"end\""), "{got}");
        assert!(got.ends_with(&json::document(&report)), "{got}");
    }
}
