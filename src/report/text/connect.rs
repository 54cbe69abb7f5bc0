//! The text lines of a `--connect-only` test: interval rows and the summaries.

use super::TextCtx;
use crate::latency::LatencyStats;
use crate::report::connect::{ConnectOnlyAnswered, ConnectOnlyEnd, rate};
use crate::report::{Interval, StreamExt};

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
                .as_deref()
                .copied()
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
    if let Some(n) = iv
        .sum
        .netmeter
        .as_deref()
        .copied()
        .filter(|n| n.connections.is_some())
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
    use crate::report::connect::figures;
    use crate::spec::Protocol;
    use crate::units::Format;

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
                netmeter: Some(Box::new(ext)),
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
