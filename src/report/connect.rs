//! `--connect-only` (TCP connection rate) figures and how they are reported.
//!
//! Pure: the engine (`engine::connect`) records, per client stream, the duration of
//! each `connect()` call (the 3-way handshake as the client sees it) and of the whole
//! connect + request + response + close transaction into [`ConnFigures`]; these
//! functions turn them into interval extras, the end summary and text lines.

use super::build::LocalFinal;
use super::text::TextCtx;
use super::{Interval, StreamExt};
use crate::latency::{Hist, LatencyStats};
use serde::{Deserialize, Serialize};

/// Connections of one stream (or several, merged) over some span.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConnFigures {
    /// `connect()` durations of completed connections.
    pub connect: Hist,
    /// connect + request + response + close durations of the same connections.
    pub transaction: Hist,
    /// Attempts that failed (refused, no answer within the timeout, reset).
    pub failed: u64,
}

impl ConnFigures {
    /// Completed connections.
    pub fn connections(&self) -> u64 {
        self.transaction.len()
    }

    pub fn merge(&mut self, other: &ConnFigures) {
        self.connect.merge(&other.connect);
        self.transaction.merge(&other.transaction);
        self.failed += other.failed;
    }

    pub fn clear(&mut self) {
        self.connect.clear();
        self.transaction.clear();
        self.failed = 0;
    }

    /// Write these figures into an interval row's netmeter extras.
    pub fn fill(&self, ext: &mut StreamExt) {
        ext.connections = Some(self.connections());
        ext.failed = Some(self.failed);
        ext.connect = self.connect.stats();
        ext.transaction = self.transaction.stats();
    }
}

/// A client stream's figures at the end of a connect-only test.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConnFinal {
    pub figures: ConnFigures,
    /// The most recent failure, for the summary.
    pub last_error: Option<String>,
}

/// `end.netmeter.connect_only` (client side).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ConnectOnlyEnd {
    pub streams: u32,
    /// Completed connections (connect, request, response, close).
    pub connections: u64,
    pub seconds: f64,
    pub connections_per_second: f64,
    /// Attempts that failed; not counted in `connections`.
    pub failed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Duration of the `connect()` call (3-way handshake), all streams.
    pub connect: LatencyStats,
    /// The full handshake-time histogram: `[upper bound µs, count]` per non-empty bucket.
    pub connect_histogram_us: Vec<(f64, u64)>,
    /// connect + request + response + close, all streams.
    pub transaction: LatencyStats,
}

/// `end.netmeter.connect_only_answered` (server side): connections the test's cookie
/// opened and the server answered.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct ConnectOnlyAnswered {
    pub connections: u64,
    pub seconds: f64,
    pub connections_per_second: f64,
}

fn rate(n: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    }
}

impl ConnectOnlyAnswered {
    pub fn new(connections: u64, seconds: f64) -> ConnectOnlyAnswered {
        ConnectOnlyAnswered {
            connections,
            seconds,
            connections_per_second: rate(connections, seconds),
        }
    }
}

/// The client's end summary over its streams (`None` unless it ran a connect-only test).
pub fn end_of(locals: &[LocalFinal]) -> Option<ConnectOnlyEnd> {
    let mut all = ConnFigures::default();
    let mut last_error = None;
    let mut streams = 0;
    for c in locals.iter().filter_map(|l| l.conn.as_ref()) {
        all.merge(&c.figures);
        if c.last_error.is_some() {
            last_error.clone_from(&c.last_error);
        }
        streams += 1;
    }
    if streams == 0 {
        return None;
    }
    let seconds = locals
        .iter()
        .filter(|l| l.conn.is_some())
        .map(|l| l.seconds)
        .fold(0.0, f64::max);
    let connections = all.connections();
    Some(ConnectOnlyEnd {
        streams,
        connections,
        seconds,
        connections_per_second: rate(connections, seconds),
        failed: all.failed,
        last_error,
        connect: all.connect.stats().unwrap_or_default(),
        connect_histogram_us: all.connect.buckets_us(),
        transaction: all.transaction.stats().unwrap_or_default(),
    })
}

/// The interval's `[SUM]` extras: the merged figures of every stream (client), or the
/// connections the server answered in the interval (server).
pub fn fill_sum(iv: &mut Interval, merged: Option<&ConnFigures>, answered: Option<u64>) {
    if let Some(m) = merged {
        m.fill(iv.sum.netmeter.get_or_insert_with(StreamExt::default));
    } else if let Some(n) = answered {
        iv.sum
            .netmeter
            .get_or_insert_with(StreamExt::default)
            .connections = Some(n);
    }
}

fn span(start: f64, end: f64) -> String {
    format!("{start:6.2}-{end:<6.2} sec")
}

/// The column header before the first connect-only interval.
pub fn header(ctx: &TextCtx) -> String {
    if ctx.client {
        "[ ID] Interval              Conn/s  Connect min/avg/p99/max\n".into()
    } else {
        "[ ID] Interval              Conn/s\n".into()
    }
}

fn tail(ext: &StreamExt, seconds: f64) -> String {
    let n = ext.connections.unwrap_or(0);
    let mut s = format!("  {:>7.0} conn/s", rate(n, seconds));
    if let Some(c) = &ext.connect {
        s.push_str(&format!(
            "  connect min/avg/p99/max {:.3}/{:.3}/{:.3}/{:.3} ms",
            c.min_ms, c.mean_ms, c.p99_ms, c.max_ms
        ));
    }
    if let Some(f) = ext.failed.filter(|&f| f > 0) {
        s.push_str(&format!("  ({f} failed)"));
    }
    s
}

/// One connect-only interval: a row per client stream and a `[SUM]` row when there are
/// several; on the server only the `[SUM]` of answered connections.
pub fn interval_text(ctx: &TextCtx, iv: &Interval) -> String {
    let omitted = |o: bool| if o { "  (omitted)" } else { "" };
    let mut out = String::new();
    let rows: Vec<_> = iv
        .streams
        .iter()
        .filter_map(|r| {
            r.netmeter
                .filter(|n| n.connections.is_some())
                .map(|n| (r, n))
        })
        .collect();
    for (r, n) in &rows {
        out.push_str(&format!(
            "[{:>3}] {}{}{}\n",
            r.socket,
            span(r.start, r.end),
            tail(n, r.seconds),
            omitted(r.omitted)
        ));
    }
    if let Some(n) = iv.sum.netmeter.filter(|n| n.connections.is_some())
        && rows.len() != 1
    {
        let s = &iv.sum;
        let answered = if ctx.client { "" } else { " answered" };
        out.push_str(&format!(
            "[SUM] {}{}{answered}{}\n",
            span(s.start, s.end),
            tail(&n, s.seconds),
            omitted(s.omitted)
        ));
        if rows.len() > 1 {
            out.push_str(&format!("{}\n", "- ".repeat(30).trim_end()));
        }
    }
    out
}

/// The client's summary lines under the end separator.
pub fn summary_text(e: &ConnectOnlyEnd) -> String {
    let line = |name: &str, r: &LatencyStats| {
        format!(
            "{name} (ms): min {:.3}  mean {:.3}  stdev {:.3}  p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}\n",
            r.min_ms, r.mean_ms, r.stdev_ms, r.p50_ms, r.p90_ms, r.p99_ms, r.p999_ms, r.max_ms
        )
    };
    let mut s = format!(
        "Connect-only: {} connections in {:.2} s = {:.0} conn/s over {} stream(s)\n",
        e.connections, e.seconds, e.connections_per_second, e.streams
    );
    if e.connections > 0 {
        s.push_str(&line("Handshake (connect)", &e.connect));
        s.push_str(&line("Connect+request+response+close", &e.transaction));
    }
    if e.failed > 0 {
        s.push_str(&format!(
            "{} connection attempts failed (last: {})\n",
            e.failed,
            e.last_error.as_deref().unwrap_or("unknown")
        ));
    }
    s
}

/// The server's summary line.
pub fn answered_text(a: &ConnectOnlyAnswered) -> String {
    format!(
        "Connect-only: answered {} connections in {:.2} s = {:.0} conn/s\n",
        a.connections, a.seconds, a.connections_per_second
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::StreamInterval;
    use crate::spec::Protocol;
    use crate::units::Format;

    fn figures(connect_us: &[u64], failed: u64) -> ConnFigures {
        let mut f = ConnFigures::default();
        for &us in connect_us {
            f.connect.record_ns(us * 1000);
            f.transaction.record_ns(us * 3000);
        }
        f.failed = failed;
        f
    }

    #[test]
    fn end_merges_streams_and_rates_use_the_longest_stream() {
        let locals = [
            LocalFinal {
                seconds: 2.0,
                conn: Some(ConnFinal {
                    figures: figures(&[30, 40, 50], 1),
                    last_error: Some("connection refused".into()),
                }),
                ..LocalFinal::default()
            },
            LocalFinal {
                seconds: 1.9,
                conn: Some(ConnFinal {
                    figures: figures(&[60], 0),
                    last_error: None,
                }),
                ..LocalFinal::default()
            },
        ];
        let e = end_of(&locals).unwrap();
        assert_eq!((e.streams, e.connections, e.failed), (2, 4, 1));
        assert_eq!(e.seconds, 2.0);
        assert_eq!(e.connections_per_second, 2.0);
        assert_eq!(e.connect.count, 4);
        let hist: u64 = e.connect_histogram_us.iter().map(|b| b.1).sum();
        assert_eq!(hist, 4);
        assert!((e.transaction.max_ms - 0.18).abs() < 0.001);
        assert_eq!(e.last_error.as_deref(), Some("connection refused"));
        assert!(end_of(&[LocalFinal::default()]).is_none());
    }

    #[test]
    fn interval_row_snapshot() {
        let mut ext = StreamExt::default();
        figures(&[31, 45, 120], 0).fill(&mut ext);
        let iv = Interval {
            streams: vec![StreamInterval {
                socket: 5,
                start: 0.0,
                end: 1.0,
                seconds: 1.0,
                sender: true,
                netmeter: Some(ext),
                ..StreamInterval::default()
            }],
            ..Interval::default()
        };
        let ctx = TextCtx {
            format: Format::Auto,
            protocol: Protocol::Tcp,
            bidir: false,
            client: true,
            verbose: false,
            title: None,
            bounceback: false,
            connect_only: true,
            histogram_bin_ms: None,
        };
        let t = interval_text(&ctx, &iv);
        assert!(t.starts_with("[  5]   0.00-1.00   sec        3 conn/s  connect min/avg/p99/max 0.031/0.065/0.120/0.120 ms"), "{t}");
    }
}
