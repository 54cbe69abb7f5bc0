//! The key figures of one test, read from its [`Report`]: what repetitions summarize
//! and what a comparison judges. Each figure knows its unit and which direction is
//! better (throughput up, loss and latency down); latency percentiles carry the
//! histogram they come from, for the Kolmogorov-Smirnov test.

use crate::latency::LatencyStats;
use crate::report::{EndSum, Report};
use serde::Serialize;

/// Which way a figure improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Higher,
    Lower,
}

/// One key figure of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Stable JSON name, e.g. `receiver_bits_per_second`, `rtt_p99_ms`.
    pub key: String,
    /// What the text table shows, e.g. "Receiver throughput".
    pub label: String,
    /// The unit of `value`: "bits/s", "%", "ms", "1/s", "count".
    pub unit: &'static str,
    pub better: Better,
    pub value: f64,
    /// For a latency figure, the whole distribution it comes from (`[bound µs, count]`).
    pub histogram_us: Option<Vec<(f64, u64)>>,
}

/// The values a figure of this unit can take: every key figure is a rate, a count, a
/// delay or a share, none below 0; a share ("%") is at most 100.
pub fn bounds(unit: &str) -> (f64, f64) {
    match unit {
        "%" => (0.0, 100.0),
        _ => (0.0, f64::INFINITY),
    }
}

fn fig(key: &str, label: &str, unit: &'static str, better: Better, value: f64) -> Figure {
    Figure {
        key: key.to_string(),
        label: label.to_string(),
        unit,
        better,
        value,
        histogram_us: None,
    }
}

/// What kind of test a report holds: two reports compare only when these agree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestKind {
    pub protocol: String,
    /// "client to server", "server to client, -R" or "both directions, --bidir".
    pub direction: &'static str,
    /// "bulk", "bounceback" or "connect-only".
    pub mode: &'static str,
}

impl std::fmt::Display for TestKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a {} {} test ({})",
            self.protocol, self.mode, self.direction
        )
    }
}

/// The kind of test `r` is.
pub fn kind(r: &Report) -> TestKind {
    let ts = &r.start.test_start;
    let direction = if ts.bidir != 0 {
        "both directions, --bidir"
    } else if ts.reverse != 0 {
        "server to client, -R"
    } else {
        "client to server"
    };
    let ext = &r.end.netmeter;
    let mode = if ext.bounceback.is_some() {
        "bounceback"
    } else if ext.connect_only.is_some() {
        "connect-only"
    } else {
        "bulk"
    };
    TestKind {
        protocol: ts.protocol.clone(),
        direction,
        mode,
    }
}

/// The receiving side's total for the forward direction: `sum_received`, or iperf3's
/// older UDP `sum` (whose loss and jitter are the receiver's).
fn received(r: &Report) -> Option<&EndSum> {
    r.end.sum_received.as_ref().or(r.end.sum.as_ref())
}

/// Every key figure `r` holds, in a fixed order.
pub fn figures(r: &Report) -> Vec<Figure> {
    let mut out = Vec::new();
    let ext = &r.end.netmeter;
    let bulk = ext.bounceback.is_none() && ext.connect_only.is_none();
    if bulk && let Some(s) = received(r) {
        out.push(fig(
            "receiver_bits_per_second",
            "Receiver throughput",
            "bits/s",
            Better::Higher,
            s.bits_per_second,
        ));
    }
    if bulk && let Some(s) = &r.end.sum_received_bidir_reverse {
        out.push(fig(
            "reverse_receiver_bits_per_second",
            "Reverse receiver throughput",
            "bits/s",
            Better::Higher,
            s.bits_per_second,
        ));
    }
    if let Some(u) = received(r).and_then(|s| s.udp_recv.as_ref()) {
        out.push(fig(
            "lost_percent",
            "Loss",
            "%",
            Better::Lower,
            u.lost_percent,
        ));
        out.push(fig("jitter_ms", "Jitter", "ms", Better::Lower, u.jitter_ms));
    }
    if bulk && let Some(n) = r.end.sum_sent.as_ref().and_then(|s| s.retransmits) {
        out.push(fig(
            "retransmits",
            "Retransmits",
            "count",
            Better::Lower,
            n as f64,
        ));
    }
    // TCP's own smoothed RTT, averaged over the sending streams that report it (µs).
    let rtts: Vec<f64> = r
        .end
        .streams
        .iter()
        .filter_map(|s| s.sender.as_ref()?.mean_rtt)
        .map(|us| us as f64 / 1000.0)
        .collect();
    if bulk && !rtts.is_empty() {
        let mean = rtts.iter().sum::<f64>() / rtts.len() as f64;
        out.push(fig(
            "tcp_mean_rtt_ms",
            "TCP mean RTT",
            "ms",
            Better::Lower,
            mean,
        ));
    }
    if let Some(b) = &ext.bounceback {
        out.push(fig(
            "transactions_per_second",
            "Transactions",
            "1/s",
            Better::Higher,
            b.transactions_per_second,
        ));
        percentiles(&mut out, "rtt", "RTT", &b.rtt, &b.rtt_histogram_us);
    }
    if let Some(c) = &ext.connect_only {
        out.push(fig(
            "connections_per_second",
            "Connections",
            "1/s",
            Better::Higher,
            c.connections_per_second,
        ));
        percentiles(
            &mut out,
            "connect",
            "Connect",
            &c.connect,
            &c.connect_histogram_us,
        );
    }
    if let Some(t) = &ext.trip_times {
        for (key, label, side) in [
            ("owd_c2s", "OWD c→s", &t.client_to_server),
            ("owd_s2c", "OWD s→c", &t.server_to_client),
        ] {
            if let Some(o) = side
                && let Some(stats) = &o.owd
            {
                percentiles(&mut out, key, label, stats, &o.histogram_us);
            }
        }
    }
    out
}

/// p50, p90, p99 and p99.9 of one latency distribution, each with its histogram.
fn percentiles(
    out: &mut Vec<Figure>,
    key: &str,
    label: &str,
    s: &LatencyStats,
    hist: &[(f64, u64)],
) {
    if s.count == 0 {
        return;
    }
    for (p, v) in [
        ("p50", s.p50_ms),
        ("p90", s.p90_ms),
        ("p99", s.p99_ms),
        ("p99.9", s.p999_ms),
    ] {
        let mut f = fig(
            &format!("{key}_{}_ms", p.replace('.', "")),
            &format!("{label} {p}"),
            "ms",
            Better::Lower,
            v,
        );
        f.histogram_us = (!hist.is_empty()).then(|| hist.to_vec());
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(name: &str) -> Report {
        let path = format!("{}/src/report/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
        Report::from_document(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn keys(r: &Report) -> Vec<String> {
        figures(r).into_iter().map(|f| f.key).collect()
    }

    #[test]
    fn tcp_figures() {
        let r = load("tcp.json");
        let f = figures(&r);
        assert_eq!(f[0].key, "receiver_bits_per_second");
        assert_eq!(f[0].value, 400269852.8645118);
        assert_eq!(f[0].better, Better::Higher);
        assert!(keys(&r).contains(&"retransmits".to_string()));
        assert!(!keys(&r).contains(&"lost_percent".to_string()));
        assert_eq!(kind(&r).to_string(), "a TCP bulk test (client to server)");
    }

    #[test]
    fn udp_and_iperf3_figures() {
        let r = load("udp.json");
        let f = figures(&r);
        let loss = f.iter().find(|f| f.key == "lost_percent").unwrap();
        assert_eq!((loss.value, loss.better), (0.0, Better::Lower));
        let jitter = f.iter().find(|f| f.key == "jitter_ms").unwrap();
        assert_eq!(jitter.value, 0.0017320126607050595);
        let r = load("iperf3_322_udp_bidir.json");
        assert_eq!(
            keys(&r)[..2],
            [
                "receiver_bits_per_second",
                "reverse_receiver_bits_per_second"
            ]
        );
        assert_eq!(kind(&r).direction, "both directions, --bidir");
    }

    #[test]
    fn latency_figures_carry_histograms() {
        let r = load("bounceback.json");
        let f = figures(&r);
        assert_eq!(f[0].key, "transactions_per_second");
        assert!(!keys(&r).contains(&"receiver_bits_per_second".to_string()));
        let p99 = f.iter().find(|f| f.key == "rtt_p99_ms").unwrap();
        assert_eq!(p99.value, 0.097663);
        assert!(p99.histogram_us.as_ref().is_some_and(|h| !h.is_empty()));
        assert_eq!(kind(&r).mode, "bounceback");
        let r = load("trip_times.json");
        assert!(keys(&r).contains(&"owd_c2s_p999_ms".to_string()));
        let r = load("connect_only.json");
        assert_eq!(keys(&r)[0], "connections_per_second");
    }
}
