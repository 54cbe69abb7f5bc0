//! `netmeter rpm`'s output, pure: the run's figures as one serializable document
//! (`-J`: the summary, each phase with its intervals, every probe), the summary text
//! networkQuality prints (capacity each way, responsiveness with its confidence, idle
//! latency) with netmeter's percentiles and text histograms (`rpm::histogram`) of every
//! kind of probe time, and the probe times over the run as a chart for `report::plot`.

use std::fmt::Write as _;

use serde::Serialize;

use super::algo::{Confidence, IntervalRow, Outcome, Probe, rpm_of};
use super::client::{Dir, RpmRun};
use super::summary::{ProbeRecord, ProbeSummary, summarize};
use crate::latency::LatencyStats;
use crate::report::plot::{Axis, Chart, Series, Shape};

/// The draft this client follows.
pub const DRAFT: &str = "draft-ietf-ippm-responsiveness-08";

/// The whole run, as `-J` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct RpmReport {
    pub draft: &'static str,
    /// The HTTP version the run used: `h2`, or `h3` with `--http3` (experimental).
    pub protocol: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_url: Option<String>,
    pub small_url: String,
    pub large_url: String,
    pub upload_url: String,
    pub summary: Summary,
    pub phases: Vec<PhaseReport>,
    /// The foreign probes on the idle path, before the load.
    pub idle_probes: Vec<ProbeRecord>,
    /// The distribution of each kind of probe time under load (every phase).
    pub loaded_probe_times: ProbeSummary,
    pub idle_probe_times: ProbeSummary,
    /// Probes that failed (counted, not measured).
    pub probe_errors: u64,
    /// Probes started: completed, failed, or under way when their phase ended.
    pub probes_launched: u64,
}

/// The figures networkQuality prints.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub downlink_bps: Option<f64>,
    pub downlink_confidence: Option<Confidence>,
    pub uplink_bps: Option<f64>,
    pub uplink_confidence: Option<Confidence>,
    /// The draft's responsiveness: of the one phase, or of the last when sequential.
    pub rpm: Option<f64>,
    pub rpm_confidence: Option<Confidence>,
    pub foreign_rpm: Option<f64>,
    pub self_rpm: Option<f64>,
    /// The idle path's round trip: 60000 over the idle foreign probes' RPM.
    pub idle_latency_ms: Option<f64>,
    pub interrupted: bool,
}

/// One phase: its directions and the probes it completed.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseReport {
    pub directions: Vec<DirReport>,
    pub start_s: f64,
    pub end_s: f64,
    /// The draft's responsiveness over the phase's last MAD intervals of probes.
    pub rpm: Option<f64>,
    pub foreign_rpm: Option<f64>,
    pub self_rpm: Option<f64>,
    /// The lower of the directions' responsiveness confidences.
    pub rpm_confidence: Confidence,
    pub stopped: bool,
    pub probes: Vec<ProbeRecord>,
}

/// One direction of a phase.
#[derive(Debug, Clone, Serialize)]
pub struct DirReport {
    pub direction: Dir,
    pub outcome: Outcome,
    /// Bytes the load-generating connections moved (HTTP/2 payload).
    pub bytes: u64,
    pub connections_opened: usize,
    /// `TCP_NOTSENT_LOWAT` on the load connections as the kernel reported it (absent:
    /// not set, HTTP/3 or `--notsent-lowat 0`); with `auto`, the largest at the
    /// phase's end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notsent_lowat_bytes: Option<u32>,
    /// `--notsent-lowat`: `auto`, `fixed` or `kernel` (absent over HTTP/3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_limit: Option<&'static str>,
    pub intervals: Vec<IntervalRow>,
}

fn secs(run: &RpmRun, t: std::time::Instant) -> f64 {
    t.saturating_duration_since(run.origin).as_secs_f64()
}

fn lowest(a: Confidence, b: Confidence) -> Confidence {
    use Confidence::*;
    match (a, b) {
        (Low, _) | (_, Low) => Low,
        (Medium, _) | (_, Medium) => Medium,
        _ => High,
    }
}

/// The document of a run.
pub fn report(run: &RpmRun) -> RpmReport {
    let window = run.params.interval * run.params.moving_average_distance.max(1) as u32;
    let phases: Vec<PhaseReport> = run
        .phases
        .iter()
        .enumerate()
        .map(|(i, ph)| {
            let probes: Vec<Probe> = run
                .probes
                .iter()
                .filter(|(p, _)| *p == i)
                .map(|(_, p)| *p)
                .collect();
            // Concurrent directions share the probes: the figure is over the last MAD
            // intervals before the phase ended (both machines' windows at once).
            let cut = ph.end.checked_sub(window).unwrap_or(ph.start);
            let last: Vec<Probe> = probes.iter().filter(|p| p.start >= cut).copied().collect();
            let figures = match ph.dirs.as_slice() {
                [one] => super::algo::RpmFigures {
                    rpm: one.outcome.rpm,
                    foreign_rpm: one.outcome.foreign_rpm,
                    self_rpm: one.outcome.self_rpm,
                },
                _ => rpm_of(&last, run.params.trimmed_mean_keep_pct),
            };
            let rpm_confidence = ph
                .dirs
                .iter()
                .map(|d| d.outcome.rpm_confidence)
                .fold(Confidence::High, lowest);
            PhaseReport {
                directions: ph
                    .dirs
                    .iter()
                    .map(|d| DirReport {
                        direction: d.dir,
                        outcome: d.outcome,
                        bytes: d.bytes,
                        connections_opened: d.connections_opened,
                        notsent_lowat_bytes: d.notsent_lowat_bytes,
                        send_limit: d.send_limit,
                        intervals: d.rows.clone(),
                    })
                    .collect(),
                start_s: secs(run, ph.start),
                end_s: secs(run, ph.end),
                rpm: figures.rpm,
                foreign_rpm: figures.foreign_rpm,
                self_rpm: figures.self_rpm,
                rpm_confidence: if figures.rpm.is_some() {
                    rpm_confidence
                } else {
                    Confidence::Low
                },
                stopped: ph.stopped,
                probes: probes
                    .iter()
                    .map(|p| ProbeRecord::of(p, run.origin))
                    .collect(),
            }
        })
        .collect();
    let dir = |want: Dir| {
        phases
            .iter()
            .flat_map(|p| p.directions.iter())
            .find(|d| d.direction == want)
    };
    let (down, up) = (dir(Dir::Download), dir(Dir::Upload));
    let last = phases.iter().rev().find(|p| p.rpm.is_some());
    let idle_rpm = rpm_of(&run.idle, run.params.trimmed_mean_keep_pct).foreign_rpm;
    let loaded: Vec<Probe> = run.probes.iter().map(|(_, p)| *p).collect();
    RpmReport {
        draft: DRAFT,
        protocol: run.protocol,
        config_url: run.config_url.clone(),
        small_url: run.small.url.clone(),
        large_url: run.large.url.clone(),
        upload_url: run.upload.url.clone(),
        summary: Summary {
            downlink_bps: down.and_then(|d| d.outcome.goodput_bps),
            downlink_confidence: down.map(|d| d.outcome.goodput_confidence),
            uplink_bps: up.and_then(|d| d.outcome.goodput_bps),
            uplink_confidence: up.map(|d| d.outcome.goodput_confidence),
            rpm: last.and_then(|p| p.rpm),
            rpm_confidence: last.map(|p| p.rpm_confidence),
            foreign_rpm: last.and_then(|p| p.foreign_rpm),
            self_rpm: last.and_then(|p| p.self_rpm),
            idle_latency_ms: idle_rpm.map(|r| 60_000.0 / r),
            interrupted: phases.iter().any(|p| p.stopped),
        },
        idle_probes: run
            .idle
            .iter()
            .map(|p| ProbeRecord::of(p, run.origin))
            .collect(),
        loaded_probe_times: summarize(&loaded),
        idle_probe_times: summarize(&run.idle),
        phases,
        probe_errors: run.probe_errors,
        probes_launched: run.probes_launched,
    }
}

fn confidence_word(c: Option<Confidence>) -> &'static str {
    match c {
        Some(Confidence::High) => "High",
        Some(Confidence::Medium) => "Medium",
        _ => "Low",
    }
}

fn mbps(bps: f64) -> String {
    format!("{:.3} Mbps", bps / 1e6)
}

/// One interval's progress line.
pub fn row_line(dir: Dir, row: &IntervalRow) -> String {
    let rpm = row.rpm.map_or("-".to_string(), |r| format!("{r:.0}"));
    format!(
        "[{:<8}] {:>3} s  {:>2} conns  {:>10.3} Mbit/s (moving {:.3})  {} RPM",
        dir.name(),
        row.index,
        row.connections,
        row.goodput_bps / 1e6,
        row.goodput_moving_bps / 1e6,
        rpm
    )
}

/// The summary as text.
pub fn render_text(r: &RpmReport) -> String {
    let s = &r.summary;
    let mut out = String::new();
    let _ = writeln!(out, "==== SUMMARY ({}) ====", r.draft);
    if r.protocol == "h3" {
        let _ = writeln!(
            out,
            "Over HTTP/3 (experimental): the foreign probes' TCP and TLS times are each the QUIC handshake (one round trip)"
        );
    }
    if let Some(bps) = s.uplink_bps {
        let _ = writeln!(
            out,
            "Uplink capacity: {} ({} confidence)",
            mbps(bps),
            confidence_word(s.uplink_confidence)
        );
    }
    if let Some(bps) = s.downlink_bps {
        let _ = writeln!(
            out,
            "Downlink capacity: {} ({} confidence)",
            mbps(bps),
            confidence_word(s.downlink_confidence)
        );
    }
    match s.rpm {
        Some(rpm) => {
            let _ = writeln!(
                out,
                "Responsiveness: {rpm:.0} RPM ({} confidence)",
                confidence_word(s.rpm_confidence)
            );
        }
        None => {
            let _ = writeln!(out, "Responsiveness: not measured (no probe completed)");
        }
    }
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.0}"));
    let _ = writeln!(
        out,
        "  foreign {} RPM, self {} RPM",
        opt(s.foreign_rpm),
        opt(s.self_rpm)
    );
    if let Some(ms) = s.idle_latency_ms {
        let _ = writeln!(out, "Idle Latency: {ms:.3} milliseconds");
    }
    let _ = writeln!(
        out,
        "\nProbe times (ms)        count      min      p50      p90      p99      max"
    );
    let kinds = |t: &ProbeSummary| {
        [
            ("foreign TCP", t.foreign_tcp),
            ("foreign TLS", t.foreign_tls),
            ("foreign GET", t.foreign_http),
            ("self GET", t.self_http),
        ]
    };
    for (phase, t) in [
        ("idle", &r.idle_probe_times),
        ("loaded", &r.loaded_probe_times),
    ] {
        for (name, st) in kinds(t) {
            if let Some(st) = st {
                let _ = writeln!(out, "{}", stats_line(&format!("{phase} {name}"), &st));
            }
        }
    }
    let idle: Vec<&ProbeRecord> = r.idle_probes.iter().collect();
    let loaded: Vec<&ProbeRecord> = r.phases.iter().flat_map(|p| p.probes.iter()).collect();
    let histograms = super::histogram::render_kinds("idle", &idle)
        + &super::histogram::render_kinds("loaded", &loaded);
    if !histograms.is_empty() {
        let _ = write!(out, "\nProbe time histograms\n{histograms}");
    }
    if r.probe_errors > 0 {
        let _ = writeln!(out, "{} probes failed", r.probe_errors);
    }
    if s.interrupted {
        let _ = writeln!(
            out,
            "(interrupted: the figures are what was measured so far)"
        );
    }
    out
}

fn stats_line(name: &str, st: &LatencyStats) -> String {
    format!(
        "  {:<20} {:>6} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2}",
        name, st.count, st.min_ms, st.p50_ms, st.p90_ms, st.p99_ms, st.max_ms
    )
}

/// The probe times over the run: one series per kind of time, a point per probe at
/// its start.
pub fn probe_chart(r: &RpmReport) -> Chart {
    let mut series: Vec<Series> = ["foreign TCP", "foreign TLS", "foreign GET", "self GET"]
        .iter()
        .map(|n| Series {
            name: (*n).to_string(),
            shape: Shape::Markers,
            points: Vec::new(),
        })
        .collect();
    let all = r
        .idle_probes
        .iter()
        .chain(r.phases.iter().flat_map(|p| p.probes.iter()));
    for p in all {
        if let (Some(tcp), Some(tls)) = (p.tcp_ms, p.tls_ms) {
            series[0].points.push((p.start_s, tcp));
            series[1].points.push((p.start_s, tls));
            series[2].points.push((p.start_s, p.http_ms));
        } else {
            series[3].points.push((p.start_s, p.http_ms));
        }
    }
    series.retain(|s| !s.points.is_empty());
    let axis = |label: &str| Axis {
        label: label.to_string(),
        log: false,
        categories: Vec::new(),
    };
    Chart {
        kind: "rpm_probes",
        title: format!("Responsiveness probes ({DRAFT})"),
        x: axis("time (s)"),
        y: axis("probe time (ms)"),
        series,
        markers: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use crate::rpm::algo::{EndReason, Params, ProbeTimes};
    use crate::rpm::client::{DirResult, PhaseResult};
    use crate::rpm::config::HttpsUrl;
    use std::time::Duration;

    fn outcome(goodput: f64, rpm_confidence: Confidence) -> Outcome {
        Outcome {
            goodput_bps: Some(goodput),
            rpm: Some(1.0),
            foreign_rpm: None,
            self_rpm: None,
            connections: 4,
            goodput_saturated: true,
            responsiveness_saturated: rpm_confidence == Confidence::High,
            goodput_confidence: Confidence::High,
            rpm_confidence,
            reason: EndReason::Saturated,
            intervals: 10,
            elapsed_s: 10.0,
        }
    }

    /// A concurrent phase of 10 s: early probes slow (100 ms), the last 4 s's fast
    /// (foreign parts 10 ms, self 20 ms); idle probes of 2 ms.
    fn run() -> RpmRun {
        let t0 = ManualClock::at_unix(1_700_000_000).now();
        let d = Duration::from_millis;
        let url = |p: &str| HttpsUrl::parse(&format!("https://h{p}")).unwrap();
        let foreign = |at: u64, ms: u64| Probe {
            start: t0 + d(at),
            times: ProbeTimes::Foreign {
                tcp: d(ms),
                tls: d(ms),
                http: d(ms),
            },
        };
        let own = |at: u64, ms: u64| Probe {
            start: t0 + d(at),
            times: ProbeTimes::Own { http: d(ms) },
        };
        let mut probes = Vec::new();
        for s in 1..10u64 {
            let (f, o) = if s >= 7 { (10, 20) } else { (100, 100) };
            probes.push((0, foreign(s * 1000, f)));
            probes.push((0, own(s * 1000, o)));
        }
        let dir = |dir, g, c| DirResult {
            dir,
            outcome: outcome(g, c),
            rows: Vec::new(),
            bytes: 1000,
            connections_opened: 4,
            notsent_lowat_bytes: Some(16384),
            send_limit: Some("fixed"),
        };
        RpmRun {
            small: url("/small"),
            large: url("/large"),
            upload: url("/slurp"),
            config_url: Some("https://h/.well-known/nq".into()),
            origin: t0,
            idle: vec![foreign(0, 2)],
            phases: vec![PhaseResult {
                dirs: vec![
                    dir(Dir::Download, 90e6, Confidence::High),
                    dir(Dir::Upload, 20e6, Confidence::Medium),
                ],
                start: t0,
                end: t0 + d(10_500),
                stopped: false,
            }],
            probes,
            probe_errors: 2,
            protocol: "h2",
            probes_launched: 21,
            params: Params::default(),
        }
    }

    #[test]
    fn concurrent_phase_takes_the_last_window_and_the_lower_confidence() {
        let r = report(&run());
        let s = &r.summary;
        assert_eq!(s.downlink_bps, Some(90e6));
        assert_eq!(s.uplink_bps, Some(20e6));
        // The last MAD (4) s before the end at 10.5 s: probes at 7, 8 and 9 s, all
        // fast. By hand: foreign 60000 / 10 = 6000, self 60000 / 20 = 3000, mean 4500.
        assert!((s.rpm.unwrap() - 4500.0).abs() < 1e-6, "{:?}", s.rpm);
        assert_eq!(s.rpm_confidence, Some(Confidence::Medium));
        assert!((s.idle_latency_ms.unwrap() - 2.0).abs() < 1e-9);
        // Every probe is in the document.
        assert_eq!(r.phases[0].probes.len(), 18);
        assert_eq!(r.idle_probes.len(), 1);
        assert_eq!(r.loaded_probe_times.self_http.unwrap().count, 9);
    }

    #[test]
    fn text_says_what_network_quality_says() {
        let text = render_text(&report(&run()));
        for want in [
            "Uplink capacity: 20.000 Mbps (High confidence)",
            "Downlink capacity: 90.000 Mbps (High confidence)",
            "Responsiveness: 4500 RPM (Medium confidence)",
            "Idle Latency: 2.000 milliseconds",
            "loaded self GET",
            "2 probes failed",
            "Probe time histograms",
            "idle foreign TCP (ms), 1 probes",
            "loaded self GET (ms), 9 probes",
        ] {
            assert!(text.contains(want), "{want:?} not in\n{text}");
        }
        // Self GETs: six of 100 ms (100-200), three of 20 ms (20-50), and the empty
        // 50-100 between them.
        let self_rows: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.contains("loaded self GET (ms)"))
            .skip(1)
            .take_while(|l| l.contains('|'))
            .collect();
        assert_eq!(self_rows.len(), 3, "{text}");
        assert!(self_rows[0].trim_start().starts_with("20-50 |"), "{text}");
        assert!(self_rows[2].ends_with(" 6"), "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    }

    #[test]
    fn chart_has_a_series_per_kind_of_time() {
        let c = probe_chart(&report(&run()));
        let names: Vec<&str> = c.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            ["foreign TCP", "foreign TLS", "foreign GET", "self GET"]
        );
        assert_eq!(c.series[0].points.len(), 10);
        assert_eq!(c.series[3].points.len(), 9);
        assert_eq!(c.series[3].points[0], (1.0, 100.0));
    }
}
