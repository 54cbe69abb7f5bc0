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
    /// How many independent units the histogram's samples came in, when they came in
    /// clusters sent at one instant ([`sample_units`]); `None`: each sample its own.
    pub histogram_units: Option<u64>,
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
        histogram_units: None,
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
        let units = sample_units(r, Sampled::Rtt);
        percentiles(&mut out, "rtt", "RTT", &b.rtt, &b.rtt_histogram_us, units);
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
            None,
        );
    }
    if let Some(t) = &ext.trip_times {
        for (key, label, side, way) in [
            (
                "owd_c2s",
                "OWD c→s",
                &t.client_to_server,
                Sampled::OwdClientToServer,
            ),
            (
                "owd_s2c",
                "OWD s→c",
                &t.server_to_client,
                Sampled::OwdServerToClient,
            ),
        ] {
            if let Some(o) = side
                && let Some(stats) = &o.owd
            {
                let units = sample_units(r, way);
                percentiles(&mut out, key, label, stats, &o.histogram_us, units);
            }
        }
    }
    out
}

/// The figures a repetition's table and a sweep summarize: [`figures`] (what
/// `compare` judges), then the receiver's share of the peak (`--line-rate` or the
/// interface's line rate) and each side's CPU use. CPU and the share of the peak are
/// not judged by `compare`: they describe the hosts, not the path.
pub fn summary_figures(r: &Report) -> Vec<Figure> {
    let mut out = figures(r);
    if let Some(e) = &r.end.netmeter.efficiency {
        out.push(fig(
            PERCENT_OF_PEAK,
            "Share of the peak",
            "%",
            Better::Higher,
            e.percent,
        ));
    }
    let cpu = &r.end.cpu_utilization_percent;
    // 0 % is what a report without the figure holds (a peer that never answered).
    for (key, label, v) in [
        ("cpu_local_percent", "CPU (local)", cpu.host_total),
        ("cpu_remote_percent", "CPU (remote)", cpu.remote_total),
    ] {
        if v > 0.0 && v.is_finite() {
            out.push(fig(key, label, "%", Better::Lower, v));
        }
    }
    out
}

/// The key of the receiver's share of the peak.
pub const PERCENT_OF_PEAK: &str = "percent_of_peak";

/// Every figure key a report can have, in [`summary_figures`]'s order: what
/// `netmeter sweep --figure` accepts.
pub fn known_keys() -> Vec<String> {
    let mut keys: Vec<String> = [
        "receiver_bits_per_second",
        "reverse_receiver_bits_per_second",
        "lost_percent",
        "jitter_ms",
        "retransmits",
        "tcp_mean_rtt_ms",
        "transactions_per_second",
    ]
    .iter()
    .map(|k| k.to_string())
    .collect();
    let pcts = |keys: &mut Vec<String>, prefix: &str| {
        for p in ["p50", "p90", "p99", "p999"] {
            keys.push(format!("{prefix}_{p}_ms"));
        }
    };
    pcts(&mut keys, "rtt");
    keys.push("connections_per_second".into());
    for prefix in ["connect", "owd_c2s", "owd_s2c"] {
        pcts(&mut keys, prefix);
    }
    for k in [PERCENT_OF_PEAK, "cpu_local_percent", "cpu_remote_percent"] {
        keys.push(k.to_string());
    }
    keys
}

/// The figures a sweep shows when `--figure` does not say, among the `available`
/// keys (in their order): the headline (the first: throughput, transactions/s or
/// connections/s), then what the test type adds (the reverse direction of `--bidir`,
/// UDP's loss and jitter, TCP's retransmits, the median and p99 of `--bounceback`'s
/// RTT and `--connect-only`'s connect time, one-way delay p99 with `--trip-times`),
/// the share of the peak and each side's CPU.
pub fn default_keys(available: &[&str]) -> Vec<String> {
    const ADDED: &[&str] = &[
        "reverse_receiver_bits_per_second",
        "lost_percent",
        "jitter_ms",
        "retransmits",
        "rtt_p50_ms",
        "rtt_p99_ms",
        "connect_p50_ms",
        "connect_p99_ms",
        "owd_c2s_p99_ms",
        "owd_s2c_p99_ms",
        PERCENT_OF_PEAK,
        "cpu_local_percent",
        "cpu_remote_percent",
    ];
    let mut out: Vec<String> = available
        .first()
        .map(|k| k.to_string())
        .into_iter()
        .collect();
    for k in ADDED {
        if available.contains(k) && !out.iter().any(|o| o == k) {
            out.push(k.to_string());
        }
    }
    out
}

/// `--figure a,b`: the keys, each checked against [`known_keys`]; one sentence naming
/// an unknown one and the valid keys.
pub fn parse_keys(list: &str) -> Result<Vec<String>, String> {
    let known = known_keys();
    let mut out: Vec<String> = Vec::new();
    for k in list.split(',').map(str::trim) {
        if !known.iter().any(|n| n == k) {
            return Err(format!(
                "--figure {list}: '{k}' is not a figure; the figures are {}",
                known.join(",")
            ));
        }
        if !out.iter().any(|o| o == k) {
            out.push(k.to_string());
        }
    }
    Ok(out)
}

/// A latency distribution a report holds, for [`sample_units`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampled {
    /// `--trip-times`' one-way delays client → server (`trip_times.client_to_server`).
    OwdClientToServer,
    /// The same server → client.
    OwdServerToClient,
    /// `--bounceback` round trips.
    Rtt,
}

/// How many independent units a latency distribution's samples came in, when they
/// came in clusters sent at one instant: the frames of an `--isochronous` flow (its
/// datagrams or writes, one-way delays), the bursts of `--burst-size` (client →
/// server), the request bursts of `--bounceback-burst` (round trips). `None` where
/// every sample is its own (bulk and paced traffic, one request at a time) or the
/// report does not say. The Kolmogorov-Smirnov test judges its p-value by these
/// (`stats::ks_histograms_in_units`): the samples of one frame share the path's and
/// the hosts' moment and are not independent (docs/metrics.md).
pub fn sample_units(r: &Report, which: Sampled) -> Option<u64> {
    let n = &r.end.netmeter;
    let units = match which {
        Sampled::OwdClientToServer | Sampled::OwdServerToClient => {
            let forward = which == Sampled::OwdClientToServer;
            if let Some(i) = &n.isochronous {
                // What the side that sent them counted, else the receiver's frames.
                let (sent, got) = if forward {
                    (i.sender.as_ref(), i.receiver.as_ref())
                } else {
                    let h = i.reverse.as_ref();
                    (
                        h.and_then(|h| h.sender.as_ref()),
                        h.and_then(|h| h.receiver.as_ref()),
                    )
                };
                sent.map(|s| s.sent)
                    .or(got.map(|g| g.frames_complete + g.frames_lost))
            } else if forward {
                n.burst.as_ref().map(|b| b.sender.sent)
            } else {
                None
            }
        }
        Sampled::Rtt => n
            .bounceback
            .as_ref()
            .filter(|b| b.burst > 1)
            .map(|b| b.rtt.count.div_ceil(u64::from(b.burst))),
    };
    units.filter(|&u| u > 0)
}

/// p50, p90, p99 and p99.9 of one latency distribution, each with its histogram and
/// the units its samples came in.
fn percentiles(
    out: &mut Vec<Figure>,
    key: &str,
    label: &str,
    s: &LatencyStats,
    hist: &[(f64, u64)],
    units: Option<u64>,
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
        f.histogram_units = units;
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

    #[test]
    fn framed_and_bursty_samples_name_their_units() {
        use crate::report::profile::{BurstEnd, IsochEnd, IsochHalf, UnitsEnd};
        let units = |sent| UnitsEnd {
            sent,
            ..Default::default()
        };
        let mut r = load("trip_times.json");
        // Bulk: each sample its own.
        assert_eq!(sample_units(&r, Sampled::OwdClientToServer), None);
        let owd = |r: &Report| {
            figures(r)
                .into_iter()
                .find(|f| f.key == "owd_c2s_p50_ms")
                .unwrap()
        };
        assert_eq!(owd(&r).histogram_units, None);
        // Isochronous: the frames the client sent; back, the frames the client counted.
        r.end.netmeter.isochronous = Some(IsochEnd {
            sender: Some(units(90)),
            reverse: Some(IsochHalf {
                sender: None,
                receiver: Some(crate::profile::FrameSummary {
                    frames_complete: 88,
                    frames_lost: 1,
                    ..Default::default()
                }),
            }),
            ..Default::default()
        });
        assert_eq!(sample_units(&r, Sampled::OwdClientToServer), Some(90));
        assert_eq!(sample_units(&r, Sampled::OwdServerToClient), Some(89));
        assert_eq!(owd(&r).histogram_units, Some(90));
        // Bursts go client → server only.
        r.end.netmeter.isochronous = None;
        r.end.netmeter.burst = Some(BurstEnd {
            sender: units(30),
            ..Default::default()
        });
        assert_eq!(sample_units(&r, Sampled::OwdClientToServer), Some(30));
        assert_eq!(sample_units(&r, Sampled::OwdServerToClient), None);
        // Bounceback: one request at a time is its own; bursts of 4, a unit each.
        let mut bb = load("bounceback.json");
        assert_eq!(sample_units(&bb, Sampled::Rtt), None);
        let b = bb.end.netmeter.bounceback.as_mut().unwrap();
        b.burst = 4;
        let n = b.rtt.count;
        assert_eq!(sample_units(&bb, Sampled::Rtt), Some(n.div_ceil(4)));
    }

    fn summary_keys(r: &Report) -> Vec<String> {
        summary_figures(r).into_iter().map(|f| f.key).collect()
    }

    #[test]
    fn summary_figures_add_cpu_and_the_share_of_the_peak() {
        let mut r = load("udp.json");
        r.end.cpu_utilization_percent.host_total = 12.5;
        r.end.cpu_utilization_percent.remote_total = 0.0;
        let k = summary_keys(&r);
        assert!(k.contains(&"cpu_local_percent".to_string()), "{k:?}");
        assert!(
            !k.contains(&"cpu_remote_percent".to_string()),
            "0 %: not known"
        );
        assert!(!keys(&r).contains(&"cpu_local_percent".to_string()));
        r.end.netmeter.efficiency = Some(crate::host::facts::Efficiency {
            percent: 42.0,
            ..Default::default()
        });
        let f = summary_figures(&r);
        let peak = f.iter().find(|f| f.key == PERCENT_OF_PEAK).unwrap();
        assert_eq!((peak.value, peak.better), (42.0, Better::Higher));
        for key in summary_keys(&load("bounceback.json")) {
            assert!(known_keys().contains(&key), "{key}");
        }
        for key in summary_keys(&load("trip_times.json")) {
            assert!(known_keys().contains(&key), "{key}");
        }
    }

    #[test]
    fn default_figures_follow_the_test_type() {
        let pick = |r: &Report| {
            let k = summary_keys(r);
            default_keys(&k.iter().map(String::as_str).collect::<Vec<_>>())
        };
        assert_eq!(
            pick(&load("udp.json")),
            [
                "receiver_bits_per_second",
                "lost_percent",
                "jitter_ms",
                "cpu_local_percent",
                "cpu_remote_percent"
            ]
        );
        let bb = pick(&load("bounceback.json"));
        assert_eq!(
            bb[..3],
            ["transactions_per_second", "rtt_p50_ms", "rtt_p99_ms"]
        );
        let tcp = pick(&load("tcp.json"));
        assert_eq!(tcp[..2], ["receiver_bits_per_second", "retransmits"]);
        assert!(!tcp.contains(&"lost_percent".to_string()));
    }

    #[test]
    fn figure_lists_are_checked() {
        assert_eq!(
            parse_keys("rtt_p99_ms, lost_percent,rtt_p99_ms").unwrap(),
            ["rtt_p99_ms", "lost_percent"]
        );
        let e = parse_keys("loss").unwrap_err();
        assert!(
            e.starts_with(
                "--figure loss: 'loss' is not a figure; the figures are receiver_bits_per_second,"
            ),
            "{e}"
        );
        assert!(parse_keys("").is_err());
    }
}
