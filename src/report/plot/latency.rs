//! Latency charts: CDFs and histograms of the HDR histograms a test recorded, and
//! working load's idle against loaded round trips. Pure, like `series`.

use super::{Axis, Chart, MAX_POINTS, Marker, Series, Shape, thin};
use crate::latency::LatencyStats;
use crate::report::Report;

/// Bars in a latency histogram.
const HIST_BARS: usize = 60;

/// A latency distribution: its histogram buckets and its summary.
#[derive(Debug, Clone, PartialEq)]
pub struct Dist {
    pub name: String,
    /// `[upper bound µs, count]` per non-empty bucket.
    pub buckets_us: Vec<(f64, u64)>,
    pub stats: Option<LatencyStats>,
}

/// A distribution and the chart title it goes under.
pub(super) struct Distribution {
    pub title: String,
    pub dist: Dist,
}

/// Every latency histogram the test recorded.
pub(super) fn distributions(r: &Report) -> Vec<Distribution> {
    let mut out = Vec::new();
    let n = &r.end.netmeter;
    let mut push =
        |title: &str, name: &str, buckets: &[(f64, u64)], stats: Option<LatencyStats>| {
            if buckets.iter().any(|b| b.1 > 0) {
                out.push(Distribution {
                    title: title.to_string(),
                    dist: Dist {
                        name: name.to_string(),
                        buckets_us: buckets.to_vec(),
                        stats,
                    },
                });
            }
        };
    if let Some(b) = &n.bounceback {
        push(
            "Bounceback round-trip time",
            "RTT",
            &b.rtt_histogram_us,
            Some(b.rtt),
        );
    }
    if let Some(t) = &n.trip_times {
        for (name, s) in [
            ("client → server", &t.client_to_server),
            ("server → client", &t.server_to_client),
        ] {
            if let Some(s) = s {
                push(
                    &format!("One-way delay, {name}"),
                    name,
                    &s.histogram_us,
                    s.owd,
                );
            }
        }
    }
    if let Some(b) = &n.burst {
        let s = &b.sender;
        push(
            "Burst transfer time",
            "burst",
            &s.transfer_histogram_us,
            Some(s.transfer),
        );
    }
    if let Some(i) = &n.isochronous {
        if let Some(s) = &i.sender {
            push(
                "Frame transfer time (sender)",
                "frame",
                &s.transfer_histogram_us,
                Some(s.transfer),
            );
        }
        if let Some(r) = &i.receiver {
            push(
                "Frame latency (receiver)",
                "frame",
                &r.latency_histogram_us,
                r.latency,
            );
        }
    }
    if let Some(c) = &n.connect_only {
        push(
            "TCP handshake (connect) time",
            "connect",
            &c.connect_histogram_us,
            Some(c.connect),
        );
    }
    out
}

/// Cumulative fraction at each bucket's upper bound, in ms.
pub(super) fn cdf_points(buckets_us: &[(f64, u64)]) -> Vec<(f64, f64)> {
    let mut b: Vec<(f64, u64)> = buckets_us.iter().copied().filter(|b| b.1 > 0).collect();
    b.sort_by(|x, y| x.0.total_cmp(&y.0));
    let total: u64 = b.iter().map(|x| x.1).sum();
    if total == 0 {
        return Vec::new();
    }
    let mut acc = 0u64;
    let pts = b
        .iter()
        .map(|&(us, n)| {
            acc += n;
            (us / 1000.0, acc as f64 / total as f64)
        })
        .collect();
    thin(pts, MAX_POINTS)
}

/// A log axis when the distribution spans more than this factor above its median.
const LOG_TAIL_RATIO: f64 = 5.0;

/// Whether a latency axis needs a log scale: the tail (the largest value) lies far
/// above the median, so a linear axis would squeeze the body into a few pixels.
pub(super) fn needs_log(min_ms: f64, p50_ms: f64, max_ms: f64) -> bool {
    min_ms > 0.0 && p50_ms > 0.0 && max_ms / p50_ms > LOG_TAIL_RATIO
}

fn range_ms(dists: &[Dist]) -> (f64, f64, f64) {
    let pts: Vec<f64> = dists
        .iter()
        .flat_map(|d| {
            d.buckets_us
                .iter()
                .filter(|b| b.1 > 0)
                .map(|b| b.0 / 1000.0)
        })
        .collect();
    let min = pts.iter().copied().fold(f64::INFINITY, f64::min);
    let max = pts.iter().copied().fold(0.0f64, f64::max);
    let p50 = dists
        .iter()
        .filter_map(|d| d.stats.map(|s| s.p50_ms))
        .fold(f64::INFINITY, f64::min);
    let p50 = if p50.is_finite() { p50 } else { max };
    (if min.is_finite() { min } else { 0.0 }, p50, max)
}

fn percentile_markers(s: &LatencyStats) -> Vec<Marker> {
    [
        (s.p50_ms, "p50"),
        (s.p90_ms, "p90"),
        (s.p99_ms, "p99"),
        (s.p999_ms, "p99.9"),
    ]
    .iter()
    .filter(|(v, _)| *v > 0.0)
    .map(|&(x, l)| Marker {
        x,
        label: format!("{l} {}", fmt_ms(x)),
    })
    .collect()
}

/// A latency in ms with about three significant digits.
pub(super) fn fmt_ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 10.0 {
        format!("{v:.1} ms")
    } else if v >= 1.0 {
        format!("{v:.2} ms")
    } else {
        format!("{v:.3} ms")
    }
}

/// CDFs of one or more distributions on one chart. Markers for the percentiles when
/// there is one distribution; with several, each legend entry carries its p50 and p99.
pub(super) fn cdf_chart(title: &str, dists: &[Dist], markers: bool) -> Chart {
    let (min, p50, max) = range_ms(dists);
    let single = dists.len() == 1;
    let series = dists
        .iter()
        .map(|d| Series {
            name: match (single, d.stats) {
                (false, Some(s)) => format!(
                    "{} (p50 {}, p99 {})",
                    d.name,
                    fmt_ms(s.p50_ms),
                    fmt_ms(s.p99_ms)
                ),
                _ => d.name.clone(),
            },
            shape: Shape::Line,
            points: cdf_points(&d.buckets_us),
        })
        .collect();
    let markers = match dists {
        [d] if markers => d.stats.as_ref().map(percentile_markers).unwrap_or_default(),
        _ => Vec::new(),
    };
    Chart {
        kind: "latency_cdf",
        title: format!("{title}: CDF"),
        x: Axis {
            label: "latency (ms)".into(),
            log: needs_log(min, p50, max),
            categories: Vec::new(),
        },
        y: Axis::linear("fraction of samples ≤ x"),
        series,
        markers,
    }
}

/// A histogram of one distribution, re-binned to [`HIST_BARS`] bars (log-spaced on a
/// log axis).
pub(super) fn histogram_chart(title: &str, d: &Dist) -> Chart {
    let (min, p50, max) = range_ms(std::slice::from_ref(d));
    let log = needs_log(min, p50, max);
    Chart {
        kind: "latency_histogram",
        title: format!("{title}: histogram"),
        x: Axis {
            label: "latency (ms)".into(),
            log,
            categories: Vec::new(),
        },
        y: Axis::linear("samples"),
        series: vec![Series {
            name: d.name.clone(),
            shape: Shape::Bars(rebin(&d.buckets_us, HIST_BARS, log)),
            points: Vec::new(),
        }],
        markers: d.stats.as_ref().map(percentile_markers).unwrap_or_default(),
    }
}

/// HDR buckets (upper bound µs, count) into `bars` bars over their range, in ms:
/// (lower edge, upper edge, count). Log-spaced edges when `log`.
pub(super) fn rebin(buckets_us: &[(f64, u64)], bars: usize, log: bool) -> Vec<(f64, f64, f64)> {
    let b: Vec<(f64, u64)> = buckets_us
        .iter()
        .filter(|b| b.1 > 0)
        .map(|&(us, n)| (us / 1000.0, n))
        .collect();
    let lo = b.iter().map(|x| x.0).fold(f64::INFINITY, f64::min);
    let hi = b.iter().map(|x| x.0).fold(0.0f64, f64::max);
    if b.is_empty() || bars == 0 {
        return Vec::new();
    }
    if hi <= lo {
        return vec![(lo * 0.95, hi * 1.05, b.iter().map(|x| x.1 as f64).sum())];
    }
    let log = log && lo > 0.0;
    let edge = |i: usize| {
        let f = i as f64 / bars as f64;
        if log {
            lo * (hi / lo).powf(f)
        } else {
            lo + (hi - lo) * f
        }
    };
    let mut out: Vec<(f64, f64, f64)> = (0..bars).map(|i| (edge(i), edge(i + 1), 0.0)).collect();
    for (v, n) in b {
        let f = if log {
            (v / lo).ln() / (hi / lo).ln()
        } else {
            (v - lo) / (hi - lo)
        };
        let i = ((f * bars as f64) as usize).min(bars - 1);
        out[i].2 += n as f64;
    }
    out
}

/// Working load: idle and loaded RTT on one CDF, the RPM figures in the title.
pub(super) fn working_load(r: &Report, input: Option<&str>) -> Option<Chart> {
    let w = r.end.netmeter.working_load.as_ref()?;
    let mut dists = Vec::new();
    for (name, stats, buckets) in [
        ("idle", w.idle_rtt, &w.idle_rtt_histogram_us),
        ("loaded", w.loaded_rtt, &w.loaded_rtt_histogram_us),
    ] {
        let Some(s) = stats else { continue };
        // Documents without the histograms: the quantiles the summary gives.
        let buckets = if buckets.is_empty() {
            quantile_buckets(&s)
        } else {
            buckets.clone()
        };
        dists.push(Dist {
            name: match input {
                Some(i) => format!("{i}: {name}"),
                None => name.to_string(),
            },
            buckets_us: buckets,
            stats: Some(s),
        });
    }
    if dists.is_empty() {
        return None;
    }
    let rpm = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    let mut c = cdf_chart("", &dists, false);
    c.kind = "working_load";
    c.title = format!(
        "{}Working load ({}, {} streams): RTT idle vs loaded — RPM {} idle, {} loaded",
        input.map(|i| format!("{i}: ")).unwrap_or_default(),
        w.direction,
        w.streams,
        rpm(w.idle_rpm),
        rpm(w.loaded_rpm)
    );
    Some(c)
}

/// A stand-in histogram from summary quantiles: the sample mass between successive
/// quantiles placed at the upper one (1000 samples in all).
fn quantile_buckets(s: &LatencyStats) -> Vec<(f64, u64)> {
    [
        (s.min_ms, 1),
        (s.p50_ms, 499),
        (s.p90_ms, 400),
        (s.p99_ms, 90),
        (s.p999_ms, 9),
        (s.max_ms, 1),
    ]
    .iter()
    .map(|&(ms, n)| (ms * 1000.0, n))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::super::series::single;
    use super::*;
    use crate::report::input::parse_result as read_document;

    fn doc(text: &str) -> Report {
        read_document(text).unwrap()
    }

    #[test]
    fn latency_cdf_and_histogram_from_each_hdr_histogram() {
        let r = doc(include_str!("../testdata/bounceback.json"));
        let c = single(&r);
        let cdf = c.iter().find(|c| c.kind == "latency_cdf").unwrap();
        let hist = c.iter().find(|c| c.kind == "latency_histogram").unwrap();
        let b = r.end.netmeter.bounceback.as_ref().unwrap();
        assert_eq!(cdf.title, "Bounceback round-trip time: CDF");
        let labels: Vec<&str> = cdf.markers.iter().map(|m| m.label.as_str()).collect();
        assert_eq!(labels.len(), 4);
        assert!(labels[0].starts_with("p50 ") && labels[3].starts_with("p99.9 "));
        assert_eq!(cdf.markers[2].x, b.rtt.p99_ms);
        let last = cdf.series[0].points.last().unwrap();
        assert_eq!(last.1, 1.0);
        assert_eq!(
            cdf.x.log,
            needs_log(b.rtt.min_ms, b.rtt.p50_ms, b.rtt.max_ms)
        );
        let Shape::Bars(bars) = &hist.series[0].shape else {
            panic!("bars")
        };
        let total: f64 = bars.iter().map(|b| b.2).sum();
        assert_eq!(
            total as u64,
            b.rtt_histogram_us.iter().map(|b| b.1).sum::<u64>()
        );

        let r = doc(include_str!("../testdata/trip_times.json"));
        let titles: Vec<String> = single(&r).into_iter().map(|c| c.title).collect();
        assert!(titles.contains(&"One-way delay, client → server: CDF".to_string()));
        let r = doc(include_str!("../testdata/connect_only.json"));
        let titles: Vec<String> = single(&r).into_iter().map(|c| c.title).collect();
        assert!(titles.contains(&"TCP handshake (connect) time: histogram".to_string()));
    }

    #[test]
    fn working_load_idle_vs_loaded_with_rpm_in_the_title() {
        let r = doc(include_str!("../testdata/working_load.json"));
        let w = r.end.netmeter.working_load.clone().unwrap();
        let c = single(&r);
        let wl = c.iter().find(|c| c.kind == "working_load").unwrap();
        assert!(wl.title.contains(&format!(
            "RPM {:.0} idle, {:.0} loaded",
            w.idle_rpm.unwrap(),
            w.loaded_rpm.unwrap()
        )));
        assert_eq!(wl.series.len(), 2);
        assert!(wl.series[0].name.starts_with("idle (p50 "));
        assert!(wl.series[1].name.starts_with("loaded (p50 "));
        // With the histograms (documents since this change) they are used as they are.
        let mut r2 = r.clone();
        let wl2 = r2.end.netmeter.working_load.as_mut().unwrap();
        wl2.idle_rtt_histogram_us = vec![(50.0, 10), (100.0, 10)];
        let c2 = single(&r2);
        let wl2 = c2.iter().find(|c| c.kind == "working_load").unwrap();
        assert_eq!(wl2.series[0].points, [(0.05, 0.5), (0.1, 1.0)]);
    }

    #[test]
    fn rebinning_keeps_every_sample() {
        let b = [(10.0, 5), (20.0, 1), (1000.0, 3), (5000.0, 1)];
        for log in [false, true] {
            let bars = rebin(&b, 10, log);
            assert_eq!(bars.len(), 10);
            assert_eq!(bars.iter().map(|x| x.2).sum::<f64>(), 10.0);
            assert_eq!(bars[0].0, 0.01);
            assert!((bars[9].1 - 5.0).abs() < 1e-9);
            assert_eq!(bars[9].2, 1.0);
        }
        assert_eq!(rebin(&[(7.0, 3)], 10, true).len(), 1);
        assert!(rebin(&[], 10, true).is_empty());
    }

    #[test]
    fn log_axis_only_for_a_long_tail() {
        assert!(needs_log(0.01, 0.02, 3.0));
        assert!(!needs_log(0.01, 0.02, 0.05));
        assert!(!needs_log(0.0, 0.02, 3.0));
        assert_eq!(fmt_ms(0.0234), "0.023 ms");
        assert_eq!(fmt_ms(12.34), "12.3 ms");
    }
}
