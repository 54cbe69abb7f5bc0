//! A scenario's results, rendered (pure): the per-flow text (each flow's usual report
//! under a label) with a closing table and total, and the one JSON document with its
//! `flows` list.

use super::Scenario;
use super::clocks::HostClock;
use super::judge::{AgainstBaseline, KsRow, ks_table, ks_text};
use super::run::FlowOutcome;
use crate::mesh::cell_figures;
use serde::Serialize;

/// The whole run's figures.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Total {
    pub flows: usize,
    /// Flows that ended with an error.
    pub failed: usize,
    /// The receivers' throughputs added up, bit/s.
    pub receiver_bits_per_second: f64,
    /// The spread of the flows' recorded starts (`start.netmeter.txstart.started` less
    /// each flow's `start`), ms; each on its own client's clock.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_spread_ms: Option<f64>,
}

/// The `-J` document.
#[derive(Debug, Serialize)]
pub struct Document<'a> {
    /// The scenario's start instant, seconds since the Unix epoch.
    pub start_epoch: f64,
    /// Each host's clock against the controller's, measured before the start.
    pub hosts: &'a [HostClock],
    pub flows: &'a [FlowOutcome],
    pub total: Total,
    /// The flows' latencies compared pairwise (Kolmogorov-Smirnov).
    pub latency_ks: Vec<KsRow>,
    /// `--baseline`: each flow against the previous run's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<&'a [AgainstBaseline]>,
    /// Stopped by a signal: each flow holds what it measured until then.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// When a flow's data started, relative to the scenario's start instant as planned
/// (its `start` taken off), seconds since the Unix epoch; from its report.
pub fn started_at(f: &FlowOutcome) -> Option<f64> {
    let t = f.report.as_ref()?.start.netmeter.txstart?;
    Some(t.started - f.start_offset_s)
}

/// The run's total.
pub fn total(flows: &[FlowOutcome]) -> Total {
    let starts: Vec<f64> = flows.iter().filter_map(started_at).collect();
    let spread = match (
        starts.iter().copied().reduce(f64::min),
        starts.iter().copied().reduce(f64::max),
    ) {
        (Some(lo), Some(hi)) if starts.len() > 1 => Some((hi - lo) * 1e3),
        _ => None,
    };
    Total {
        flows: flows.len(),
        failed: flows.iter().filter(|f| f.error.is_some()).count(),
        receiver_bits_per_second: flows
            .iter()
            .filter_map(|f| f.report.as_ref())
            .filter_map(|r| cell_figures(r).0)
            .sum(),
        start_spread_ms: spread,
    }
}

/// The `-J` document's text.
pub fn document(
    start_epoch: f64,
    hosts: &[HostClock],
    flows: &[FlowOutcome],
    baseline: Option<&[AgainstBaseline]>,
    interrupted: bool,
) -> String {
    let doc = Document {
        start_epoch,
        hosts,
        flows,
        total: total(flows),
        latency_ks: ks_table(flows),
        baseline,
        interrupted,
    };
    serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

fn rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gbits/sec", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.2} Mbits/sec", bps / 1e6)
    } else {
        format!("{:.2} Kbits/sec", bps / 1e3)
    }
}

/// The text: each flow's report under its label, then one line per flow and the total.
pub fn text(flows: &[FlowOutcome]) -> String {
    let mut out = String::new();
    for f in flows {
        out.push_str(&format!(
            "Flow {} (from {} to {} {}, start +{}s):\n",
            f.name, f.from, f.to, f.address, f.start_offset_s
        ));
        if let Some(r) = &f.report {
            out.push_str(&crate::report::text::whole(r));
        }
        if let Some(e) = &f.error {
            out.push_str(&format!("error: {e}\n"));
        }
        out.push('\n');
    }
    let width = flows.iter().map(|f| f.name.len()).max().unwrap_or(4).max(4);
    out.push_str(&format!(
        "{:<width$}  {:>16}  {:>8}  {:>9}  {:>10}\n",
        "flow", "received", "loss", "rtt", "start late"
    ));
    for f in flows {
        let (bps, loss, rtt) = f.report.as_ref().map_or((None, None, None), cell_figures);
        let late = f
            .report
            .as_ref()
            .and_then(|r| r.start.netmeter.txstart)
            .map(|t| format!("{:.1} ms", t.late_ms));
        let cell = |v: Option<String>| v.unwrap_or_else(|| "-".into());
        out.push_str(&format!(
            "{:<width$}  {:>16}  {:>8}  {:>9}  {:>10}{}\n",
            f.name,
            cell(bps.map(rate)),
            cell(loss.map(|l| format!("{l:.2}%"))),
            cell(rtt.map(|r| format!("{r:.2} ms"))),
            cell(late),
            f.error
                .as_ref()
                .map(|e| format!("  error: {e}"))
                .unwrap_or_default(),
        ));
    }
    let t = total(flows);
    out.push_str(&format!(
        "{:<width$}  {:>16}  {} of {} flows ran{}\n",
        "total",
        rate(t.receiver_bits_per_second),
        t.flows - t.failed,
        t.flows,
        t.start_spread_ms
            .map(|s| format!(", starts within {s:.1} ms"))
            .unwrap_or_default(),
    ));
    out.push_str(&ks_text(&ks_table(flows)));
    out
}

/// One flow as `--check` shows what would run.
#[derive(Debug, Serialize)]
pub struct PlannedFlow<'a> {
    pub name: &'a str,
    pub from: &'a str,
    pub to: &'a str,
    pub address: String,
    pub start_offset_s: f64,
    pub args: &'a [String],
}

/// `--check -J`: the hosts' clocks, what would run, and why the run would be refused.
#[derive(Debug, Serialize)]
pub struct CheckDocument<'a> {
    pub hosts: &'a [HostClock],
    pub clock_limit_s: f64,
    pub flows: Vec<PlannedFlow<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<&'a str>,
}

/// Each flow of `s` as it would run.
pub fn planned(s: &Scenario) -> Vec<PlannedFlow<'_>> {
    s.flows
        .iter()
        .map(|f| {
            let to = &s.hosts[f.to];
            PlannedFlow {
                name: &f.name,
                from: s.from_name(f),
                to: &to.name,
                address: crate::mesh::Host {
                    host: to.host.clone(),
                    port: to.port,
                }
                .to_string(),
                start_offset_s: f.start_s,
                args: &f.args,
            }
        })
        .collect()
}

/// `--check`'s text: the hosts' clocks, then each flow as it would run.
pub fn check_text(s: &Scenario, hosts: &[HostClock], limit_s: f64) -> String {
    let mut out = super::clocks::text(hosts, limit_s);
    out.push_str("Flows:\n");
    for p in planned(s) {
        out.push_str(&format!(
            "  {} (from {} to {} {}, start +{}s): {}\n",
            p.name,
            p.from,
            p.to,
            p.address,
            p.start_offset_s,
            p.args.join(" ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Report;
    use crate::report::profile::TxStart;

    fn flow(name: &str, start: f64, started: Option<f64>, error: Option<&str>) -> FlowOutcome {
        let report = started.map(|s| {
            let mut r = Report::default();
            r.start.netmeter.txstart = Some(TxStart {
                requested: 100.0 + start,
                ready: Some(99.0 + start),
                started: s,
                late_ms: (s - 100.0 - start) * 1e3,
            });
            r
        });
        FlowOutcome {
            name: name.into(),
            from: "local".into(),
            to: "b".into(),
            address: "127.0.0.1:5201".into(),
            start_offset_s: start,
            txstart: 100.0 + start,
            report,
            error: error.map(String::from),
        }
    }

    #[test]
    fn the_total_counts_failures_and_the_start_spread_less_each_offset() {
        let flows = [
            flow("a", 0.0, Some(100.002), None),
            flow("b", 2.0, Some(102.005), None),
            flow("c", 0.0, None, Some("connection refused")),
        ];
        let t = total(&flows);
        assert_eq!((t.flows, t.failed), (3, 1));
        assert!((t.start_spread_ms.unwrap() - 3.0).abs() < 1e-6, "{t:?}");
        assert_eq!(total(&flows[..1]).start_spread_ms, None);
        let text = text(&flows);
        assert!(
            text.contains("Flow b (from local to b 127.0.0.1:5201, start +2s):"),
            "{text}"
        );
        assert!(text.contains("error: connection refused"), "{text}");
        assert!(
            text.contains("2 of 3 flows ran, starts within 3.0 ms"),
            "{text}"
        );
        let hosts = [HostClock::failed(
            "b",
            "127.0.0.1:5201",
            false,
            "refused".into(),
        )];
        let doc: serde_json::Value =
            serde_json::from_str(&document(100.0, &hosts, &flows, None, false)).unwrap();
        assert_eq!(doc["hosts"][0]["clock_error"], "refused");
        assert_eq!(doc["flows"].as_array().unwrap().len(), 3);
        assert_eq!(doc["flows"][1]["name"], "b");
        assert_eq!(doc["flows"][2]["error"], "connection refused");
        assert!(doc["flows"][2].get("report").is_none());
        assert_eq!(doc["total"]["failed"], 1);
        assert_eq!(doc["start_epoch"], 100.0);
        assert_eq!(doc["latency_ks"], serde_json::json!([]));
        assert!(doc.get("baseline").is_none());
        assert!(doc.get("interrupted").is_none());
        let doc: serde_json::Value =
            serde_json::from_str(&document(100.0, &hosts, &flows, None, true)).unwrap();
        assert_eq!(doc["interrupted"], true);
    }

    #[test]
    fn the_check_shows_each_hosts_clock_and_each_flow_as_it_would_run() {
        let s = Scenario::parse(
            "psk_file = \"k\"\n[hosts.a]\naddress = \"10.0.0.1\"\n[hosts.b]\naddress = \"10.0.0.2:5300\"\n\
             [[flow]]\nname = \"video\"\nfrom = \"a\"\nto = \"b\"\nargs = \"-u -b 1M -t 5\"\nstart = 2\n",
        )
        .unwrap();
        let est = crate::clocksync::ClockEstimate {
            offset_ns: -2_000_000,
            uncertainty_ns: 100_000,
            rtt_ns: 200_000,
            probes: 8,
        };
        let hosts = [
            HostClock::measured("a", "10.0.0.1:5201", true, &est),
            HostClock::measured("b", "10.0.0.2:5300", false, &est),
        ];
        let t = check_text(&s, &hosts, 0.1);
        assert!(t.contains("-0.002000 s (± 0.000100 s)  ok"), "{t}");
        assert!(
            t.contains("Flows:\n  video (from a to b 10.0.0.2:5300, start +2s): -u -b 1M -t 5\n"),
            "{t}"
        );
        let doc = serde_json::to_value(CheckDocument {
            hosts: &hosts,
            clock_limit_s: 0.1,
            flows: planned(&s),
            refused: None,
        })
        .unwrap();
        assert_eq!(doc["flows"][0]["args"][0], "-u");
        assert_eq!(doc["hosts"][0]["clock_offset_s"], -0.002);
        assert!(doc.get("refused").is_none());
    }
}
