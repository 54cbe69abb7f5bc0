//! What a running test tells whoever watches it: typed events, in order.
//!
//! The engine keeps the [`Report`] and emits an [`Event`] as each part of it becomes
//! known (and for the few lines iperf3 prints that are not figures: connecting, the
//! `-R` line, warnings, the server's output, "iperf Done."). Renderers (the iperf3
//! text, the `-J` document, `--json-stream`) implement [`Observer`] and only read; a
//! program using netmeter as a library can implement it too, or ignore the events and
//! use the `Report` that `netmeter::run` returns. A server also tells its own life
//! (listening, its log lines) as events, outside any one test's report.

use super::{Connected, End, Interval, Report, Start};

/// One thing that happened in a test, in the order it happened.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// The client is about to connect to `host`, `port`.
    Connecting { host: &'a str, port: u16 },
    /// The server accepted a client's control connection.
    Accepted { host: &'a str, port: u16 },
    /// A data stream is connected (also in `start.connected`).
    Connected(&'a Connected),
    /// `-R`: the server (`host`) sends.
    ReverseMode { host: &'a str },
    /// Something the user should know; the test goes on.
    Warning(&'a str),
    /// A line about the test beyond its figures, already worded (`-V`'s "Starting Test"
    /// and data path, the `--txstart-time` wait).
    Info(&'a str),
    /// The `start` object is complete.
    Started(&'a Start),
    /// One interval (then appended to `intervals`).
    Interval(&'a Interval),
    /// The test failed or was stopped (also in `error`); an `End` may still follow.
    Error(&'a str),
    /// The end summary (also in `end`).
    End(&'a End),
    /// The server's own text output (`--get-server-output`).
    ServerOutput(&'a str),
    /// The conversation ended normally (iperf3's "iperf Done.").
    Done,
    /// The report is complete: nothing follows.
    Finished(&'a Report),
    /// A server is ready for its `test`-th test (1, 2, …) on `port` (iperf3's
    /// "Server listening on" banner).
    Listening { port: u16, test: u64 },
    /// A server's line about a session or a connection rather than a test's figures: a
    /// refused or failed test, a dropped connection, the `--idle-timeout` exit.
    ServerLog(&'a str),
}

/// Receives a test's events.
pub trait Observer {
    fn on(&mut self, event: Event<'_>);
}

/// Ignores every event (the `Report` is all the caller wants).
#[derive(Debug, Default, Clone, Copy)]
pub struct Quiet;

impl Observer for Quiet {
    fn on(&mut self, _: Event<'_>) {}
}

impl<O: Observer + ?Sized> Observer for &mut O {
    fn on(&mut self, event: Event<'_>) {
        (**self).on(event)
    }
}
