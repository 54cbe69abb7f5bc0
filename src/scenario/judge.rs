//! A scenario's flows judged (pure): each flow's latency distribution, a
//! Kolmogorov-Smirnov table between the flows (do two flows see the same latency?),
//! and each flow against the same flow of a previous run (`--baseline`), with
//! `compare`'s figures and verdicts (`experiment::compare`).

use super::run::FlowOutcome;
use crate::experiment::compare::{self, ALPHA, Comparison};
use crate::experiment::figures::{Sampled, sample_units};
use crate::experiment::stats::ks_histograms_in_units;
use crate::report::Report;
use serde::Serialize;

/// A flow's latency: its name, its `[upper bound µs, count]` buckets and how many
/// independent units its samples came in (`figures::sample_units`: the frames of an
/// isochronous flow; `None`, each sample its own).
#[derive(Debug, Clone, Copy)]
pub struct Latency<'a> {
    pub kind: &'static str,
    pub buckets: &'a [(f64, u64)],
    pub units: Option<u64>,
}

/// The latency a flow's report holds, the first of: its one-way delay client → server
/// (`--trip-times`), its bounceback round trips, its receiver's frame latency
/// (`--isochronous`, one sample per frame).
pub fn latency_of(r: &Report) -> Option<Latency<'_>> {
    let n = &r.end.netmeter;
    let nonempty = |b: &[(f64, u64)]| b.iter().any(|x| x.1 > 0);
    if let Some(s) = n
        .trip_times
        .as_ref()
        .and_then(|t| t.client_to_server.as_ref())
        && nonempty(&s.histogram_us)
    {
        return Some(Latency {
            kind: "one-way delay client → server",
            buckets: &s.histogram_us,
            units: sample_units(r, Sampled::OwdClientToServer),
        });
    }
    if let Some(b) = &n.bounceback
        && nonempty(&b.rtt_histogram_us)
    {
        return Some(Latency {
            kind: "bounceback round trip",
            buckets: &b.rtt_histogram_us,
            units: sample_units(r, Sampled::Rtt),
        });
    }
    if let Some(r) = n.isochronous.as_ref().and_then(|i| i.receiver.as_ref())
        && nonempty(&r.latency_histogram_us)
    {
        return Some(Latency {
            kind: "frame latency",
            buckets: &r.latency_histogram_us,
            units: None,
        });
    }
    None
}

/// The flows' latencies as charts, one per kind of latency, each flow a CDF line on it.
pub fn cdf_charts(flows: &[FlowOutcome]) -> Vec<crate::report::plot::Chart> {
    let mut kinds: Vec<(&'static str, Vec<crate::report::plot::Dist>)> = Vec::new();
    for f in flows {
        let Some(r) = &f.report else { continue };
        let Some(Latency { kind, buckets, .. }) = latency_of(r) else {
            continue;
        };
        let dist = crate::report::plot::Dist {
            name: f.name.clone(),
            buckets_us: buckets.to_vec(),
            stats: stats_of(r),
        };
        match kinds.iter_mut().find(|k| k.0 == kind) {
            Some(k) => k.1.push(dist),
            None => kinds.push((kind, vec![dist])),
        }
    }
    kinds
        .iter()
        .map(|(kind, dists)| {
            let mut title = String::from(*kind);
            if let Some(c) = title.get_mut(0..1) {
                c.make_ascii_uppercase();
            }
            crate::report::plot::latency_cdfs(&format!("{title} per flow"), dists)
        })
        .collect()
}

/// The summary of the latency [`latency_of`] picks.
fn stats_of(r: &Report) -> Option<crate::latency::LatencyStats> {
    let n = &r.end.netmeter;
    let tt = n
        .trip_times
        .as_ref()
        .and_then(|t| t.client_to_server.as_ref());
    if let Some(s) = tt
        && s.histogram_us.iter().any(|b| b.1 > 0)
    {
        return s.owd;
    }
    if let Some(b) = &n.bounceback
        && b.rtt_histogram_us.iter().any(|x| x.1 > 0)
    {
        return Some(b.rtt);
    }
    n.isochronous
        .as_ref()
        .and_then(|i| i.receiver.as_ref())
        .and_then(|r| r.latency)
}

/// Two flows' latency distributions compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KsRow {
    pub a: String,
    pub b: String,
    /// The largest distance between the two CDFs.
    pub d: f64,
    /// From the units the samples came in (`n_eff_a`, `n_eff_b`).
    pub p: f64,
    /// Each flow's samples counted as independent (its frames or bursts, or its
    /// samples).
    pub n_eff_a: u64,
    pub n_eff_b: u64,
    /// Different at α = 0.05.
    pub different: bool,
}

/// Every pair of flows whose reports hold the same kind of latency.
pub fn ks_table(flows: &[FlowOutcome]) -> Vec<KsRow> {
    let lat: Vec<Option<Latency<'_>>> = flows
        .iter()
        .map(|f| f.report.as_ref().and_then(latency_of))
        .collect();
    let mut rows = Vec::new();
    for i in 0..flows.len() {
        for j in i + 1..flows.len() {
            if let (Some(a), Some(b)) = (lat[i], lat[j])
                && a.kind == b.kind
                && let Some(ks) = ks_histograms_in_units(
                    a.buckets,
                    b.buckets,
                    a.units.unwrap_or(u64::MAX),
                    b.units.unwrap_or(u64::MAX),
                )
            {
                rows.push(KsRow {
                    a: flows[i].name.clone(),
                    b: flows[j].name.clone(),
                    d: ks.d,
                    p: ks.p,
                    n_eff_a: ks.n_eff_a,
                    n_eff_b: ks.n_eff_b,
                    different: ks.p < ALPHA,
                });
            }
        }
    }
    rows
}

/// The KS table as text (empty when no two flows have comparable latencies).
pub fn ks_text(rows: &[KsRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let w = rows
        .iter()
        .map(|r| r.a.len() + r.b.len() + 4)
        .max()
        .unwrap_or(0)
        .max(5);
    let mut out = format!(
        "\nLatency between flows (Kolmogorov-Smirnov, alpha {ALPHA}):\n{:<w$}  {:>6}  {:>8}  verdict\n",
        "pair", "D", "p"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<w$}  {:>6.3}  {:>8.4}  {}\n",
            format!("{} vs {}", r.a, r.b),
            r.d,
            r.p,
            if r.different {
                "different, significant"
            } else {
                "no significant difference"
            }
        ));
    }
    out
}

/// One flow against the same-named flow of the baseline run.
#[derive(Debug, Clone, Serialize)]
pub struct AgainstBaseline {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
    /// Why there is no comparison (no such flow in the baseline, no report...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The flows of a previous run's `-J` document: (name, report) for each that ran.
pub fn baseline_flows(doc: &str) -> Result<Vec<(String, Report)>, String> {
    let v: serde_json::Value =
        serde_json::from_str(doc).map_err(|e| format!("it is not JSON ({e})"))?;
    let flows = v["flows"]
        .as_array()
        .ok_or("it is not a scenario's -J document (no flows list)")?;
    let mut out = Vec::new();
    for f in flows {
        let name = f["name"].as_str().ok_or("a flow has no name")?;
        if let Some(r) = f.get("report") {
            let r = Report::from_document(&r.to_string())
                .map_err(|e| format!("flow '{name}''s report cannot be read: {e}"))?;
            out.push((name.to_string(), r));
        }
    }
    Ok(out)
}

/// Each flow of this run against the baseline's flow of the same name.
pub fn against_baseline(base: &[(String, Report)], flows: &[FlowOutcome]) -> Vec<AgainstBaseline> {
    flows
        .iter()
        .map(|f| {
            let old = base.iter().find(|(n, _)| *n == f.name).map(|b| &b.1);
            let (comparison, note) = match (old, &f.report) {
                (None, _) => (None, Some("not in the baseline run".to_string())),
                (_, None) => (None, Some("it did not run".to_string())),
                (Some(o), Some(n)) => {
                    match compare::compare(std::slice::from_ref(o), std::slice::from_ref(n)) {
                        Ok(c) => (Some(c), None),
                        Err(e) => (None, Some(e.to_string())),
                    }
                }
            };
            AgainstBaseline {
                name: f.name.clone(),
                comparison,
                note,
            }
        })
        .collect()
}

/// The flows (by name) with a figure worse than the baseline beyond `pct` percent
/// with significance.
pub fn worse_beyond(rows: &[AgainstBaseline], pct: f64) -> Vec<&str> {
    rows.iter()
        .filter(|r| {
            r.comparison
                .as_ref()
                .is_some_and(|c| !c.worse_beyond(pct).is_empty())
        })
        .map(|r| r.name.as_str())
        .collect()
}

/// The comparisons as text, one `compare` table per flow.
pub fn baseline_text(rows: &[AgainstBaseline]) -> String {
    let mut out = String::new();
    for r in rows {
        out.push_str(&format!("\nFlow {} against the baseline:\n", r.name));
        match (&r.comparison, &r.note) {
            (Some(c), _) => out.push_str(&compare::text(c, "baseline", "this run")),
            (None, Some(n)) => out.push_str(&format!("  no comparison: {n}\n")),
            (None, None) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{BouncebackEnd, Report};

    fn flow(name: &str, buckets: Vec<(f64, u64)>) -> FlowOutcome {
        let mut r = Report::default();
        // The percentiles compare reads, roughly from the buckets (µs → ms).
        let n: u64 = buckets.iter().map(|b| b.1).sum();
        let at = |q: f64| {
            let mut acc = 0;
            for &(us, c) in &buckets {
                acc += c;
                if acc as f64 >= q * n as f64 {
                    return us / 1000.0;
                }
            }
            0.0
        };
        let rtt = crate::latency::LatencyStats {
            count: n,
            p50_ms: at(0.5),
            p90_ms: at(0.9),
            p99_ms: at(0.99),
            p999_ms: at(0.999),
            ..Default::default()
        };
        r.end.netmeter.bounceback = Some(BouncebackEnd {
            rtt_histogram_us: buckets,
            rtt,
            ..Default::default()
        });
        FlowOutcome {
            name: name.into(),
            from: "local".into(),
            to: "b".into(),
            address: "b:5201".into(),
            start_offset_s: 0.0,
            txstart: 0.0,
            report: Some(r),
            error: None,
        }
    }

    fn spread(center_us: f64, n: u64) -> Vec<(f64, u64)> {
        (0..20).map(|i| (center_us + i as f64 * 10.0, n)).collect()
    }

    #[test]
    fn the_ks_table_tells_alike_flows_from_different_ones() {
        let flows = [
            flow("a", spread(1000.0, 50)),
            flow("b", spread(1000.0, 60)),
            flow("c", spread(6000.0, 50)),
        ];
        let rows = ks_table(&flows);
        assert_eq!(rows.len(), 3);
        assert_eq!((rows[0].a.as_str(), rows[0].b.as_str()), ("a", "b"));
        assert!(!rows[0].different, "{rows:?}");
        assert!(rows[1].different && rows[2].different, "{rows:?}");
        let charts = cdf_charts(&flows);
        assert_eq!(charts.len(), 1);
        assert_eq!(charts[0].series.len(), 3);
        assert!(
            charts[0]
                .title
                .starts_with("Bounceback round trip per flow"),
            "{}",
            charts[0].title
        );
        assert!(
            charts[0].series[2].name.starts_with("c (p50"),
            "{}",
            charts[0].series[2].name
        );
        let t = ks_text(&rows);
        assert!(t.contains("a vs b"), "{t}");
        assert!(t.contains("no significant difference"), "{t}");
        assert!(t.contains("different, significant"), "{t}");
        // A flow without a latency is left out of the table.
        let mut none = flow("d", Vec::new());
        none.report = None;
        assert!(ks_table(&[flows[0].clone(), none]).is_empty());
        assert_eq!(ks_text(&[]), "");
    }

    /// The table between flows judges an isochronous flow's one-way delays by its
    /// frames: two flows of 90 frames (1,280 datagrams) whose CDFs are 0.125 apart are
    /// "different" counted by datagrams (nₑ = 640, p ~ 1e-9) but not by frames
    /// (nₑ = 45, p ~ 0.45).
    #[test]
    fn the_ks_table_counts_an_isochronous_flows_frames() {
        use crate::report::profile::{IsochEnd, UnitsEnd};
        let owd = |name: &str, buckets: Vec<(f64, u64)>, frames: Option<u64>| {
            let mut f = flow(name, Vec::new());
            let r = f.report.as_mut().unwrap();
            r.end.netmeter.bounceback = None;
            r.end.netmeter.trip_times = Some(crate::report::TripTimesEnd {
                client_to_server: Some(crate::latency::OwdSummary {
                    samples: buckets.iter().map(|b| b.1).sum(),
                    histogram_us: buckets,
                    ..Default::default()
                }),
                ..Default::default()
            });
            r.end.netmeter.isochronous = frames.map(|sent| IsochEnd {
                sender: Some(UnitsEnd {
                    sent,
                    ..Default::default()
                }),
                ..Default::default()
            });
            f
        };
        // 1,280 datagrams a side, in eight buckets; b one bucket later.
        let a: Vec<(f64, u64)> = (1..=8).map(|x| (x as f64 * 1e3, 160)).collect();
        let b: Vec<(f64, u64)> = (2..=9).map(|x| (x as f64 * 1e3, 160)).collect();
        let framed = ks_table(&[owd("a", a.clone(), Some(90)), owd("b", b.clone(), Some(90))]);
        assert_eq!(framed.len(), 1);
        let r = &framed[0];
        assert_eq!((r.d, r.n_eff_a, r.n_eff_b), (0.125, 90, 90));
        assert!(!r.different && r.p > 0.05, "{r:?}");
        let loose = ks_table(&[owd("a", a, None), owd("b", b, None)]);
        assert_eq!((loose[0].n_eff_a, loose[0].n_eff_b), (1280, 1280));
        assert!(loose[0].different && loose[0].p < 1e-6, "{loose:?}");
    }

    #[test]
    fn each_flow_is_judged_against_its_namesake_in_the_baseline() {
        let base_flows = [
            flow("a", spread(1000.0, 500)),
            flow("gone", spread(1000.0, 50)),
        ];
        let doc = super::super::output::document(0.0, &[], &base_flows, None, false);
        let base = baseline_flows(&doc).unwrap();
        assert_eq!(base.len(), 2);
        // The same distribution: no significant change; 5 ms later: worse.
        let same = against_baseline(&base, &[flow("a", spread(1000.0, 500))]);
        assert!(worse_beyond(&same, 5.0).is_empty(), "{same:?}");
        let worse = against_baseline(
            &base,
            &[flow("a", spread(6000.0, 500)), flow("new", spread(1.0, 1))],
        );
        assert_eq!(worse_beyond(&worse, 5.0), ["a"]);
        assert_eq!(worse[1].note.as_deref(), Some("not in the baseline run"));
        let t = baseline_text(&worse);
        assert!(t.contains("Flow a against the baseline:"), "{t}");
        assert!(t.contains("worse, significant"), "{t}");
        assert!(t.contains("no comparison: not in the baseline run"), "{t}");
        assert!(baseline_flows("{}").unwrap_err().contains("no flows list"));
        assert!(baseline_flows("x").unwrap_err().contains("not JSON"));
    }
}
