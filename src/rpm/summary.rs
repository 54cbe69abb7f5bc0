//! The probes of a responsiveness run as the output shows them, pure: each probe as a
//! record for `-J` (its kind, its start from the run's origin and its times in
//! milliseconds) and the distribution of each kind of time (the foreign probes' TCP
//! set-up, TLS handshake and GET; the self probes' GET) with netmeter's usual
//! percentiles (`latency::LatencyStats`, from an HDR histogram).

use std::time::{Duration, Instant};

use serde::Serialize;

use super::algo::{Probe, ProbeTimes};
use crate::latency::{Hist, LatencyStats};

/// One probe, as `-J` carries it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeRecord {
    /// `foreign` (a fresh connection) or `self` (a load-generating connection).
    pub kind: &'static str,
    /// Seconds from the run's origin to the probe's start.
    pub start_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_ms: Option<f64>,
    pub http_ms: f64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl ProbeRecord {
    /// `probe` with its start counted from `origin` (0 for a probe before it).
    pub fn of(probe: &Probe, origin: Instant) -> ProbeRecord {
        let start_s = probe.start.saturating_duration_since(origin).as_secs_f64();
        match probe.times {
            ProbeTimes::Foreign { tcp, tls, http } => ProbeRecord {
                kind: "foreign",
                start_s,
                tcp_ms: Some(ms(tcp)),
                tls_ms: Some(ms(tls)),
                http_ms: ms(http),
            },
            ProbeTimes::Own { http } => ProbeRecord {
                kind: "self",
                start_s,
                tcp_ms: None,
                tls_ms: None,
                http_ms: ms(http),
            },
        }
    }
}

/// The distribution of each kind of probe time (`None`: no such probe).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProbeSummary {
    pub foreign_tcp: Option<LatencyStats>,
    pub foreign_tls: Option<LatencyStats>,
    pub foreign_http: Option<LatencyStats>,
    pub self_http: Option<LatencyStats>,
    /// Each kind's histogram: (bucket upper bound in µs, count), as `--working-load`'s
    /// `*_rtt_histogram_us` (empty: no such probe).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub foreign_tcp_histogram_us: Vec<(f64, u64)>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub foreign_tls_histogram_us: Vec<(f64, u64)>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub foreign_http_histogram_us: Vec<(f64, u64)>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub self_http_histogram_us: Vec<(f64, u64)>,
}

/// Summarises `probes` per kind of time.
pub fn summarize(probes: &[Probe]) -> ProbeSummary {
    let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let (mut tcp, mut tls, mut http, mut own) = (
        Hist::default(),
        Hist::default(),
        Hist::default(),
        Hist::default(),
    );
    for p in probes {
        match p.times {
            ProbeTimes::Foreign {
                tcp: a,
                tls: b,
                http: c,
            } => {
                tcp.record_ns(ns(a));
                tls.record_ns(ns(b));
                http.record_ns(ns(c));
            }
            ProbeTimes::Own { http: c } => own.record_ns(ns(c)),
        }
    }
    ProbeSummary {
        foreign_tcp: tcp.stats(),
        foreign_tls: tls.stats(),
        foreign_http: http.stats(),
        self_http: own.stats(),
        foreign_tcp_histogram_us: tcp.buckets_us(),
        foreign_tls_histogram_us: tls.buckets_us(),
        foreign_http_histogram_us: http.buckets_us(),
        self_http_histogram_us: own.buckets_us(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};

    fn close(a: f64, b: f64) -> bool {
        // The HDR histogram keeps 3 significant digits.
        (a - b).abs() <= b.abs() * 0.002
    }

    #[test]
    fn each_kind_is_summarised_apart() {
        let t0 = ManualClock::at_unix(1_700_000_000).now();
        let d = Duration::from_millis;
        let mut probes: Vec<Probe> = (1..=3)
            .map(|i| Probe {
                start: t0,
                times: ProbeTimes::Foreign {
                    tcp: d(10 * i),
                    tls: d(20 * i),
                    http: d(30 * i),
                },
            })
            .collect();
        probes.push(Probe {
            start: t0,
            times: ProbeTimes::Own { http: d(100) },
        });
        let s = summarize(&probes);
        let tcp = s.foreign_tcp.unwrap();
        assert_eq!(tcp.count, 3);
        assert!(
            close(tcp.min_ms, 10.0) && close(tcp.max_ms, 30.0),
            "{tcp:?}"
        );
        assert!(close(tcp.p50_ms, 20.0), "{tcp:?}");
        assert!(close(s.foreign_tls.unwrap().max_ms, 60.0));
        assert!(close(s.foreign_http.unwrap().min_ms, 30.0));
        let own = s.self_http.unwrap();
        assert_eq!(own.count, 1);
        assert!(close(own.mean_ms, 100.0));
        // The histograms hold every probe.
        let n = |h: &[(f64, u64)]| h.iter().map(|b| b.1).sum::<u64>();
        assert_eq!(n(&s.foreign_tcp_histogram_us), 3);
        assert_eq!(n(&s.self_http_histogram_us), 1);
        let (us, count) = s.self_http_histogram_us[0];
        assert!(close(us, 100_000.0) && count == 1, "{us} {count}");
        assert_eq!(summarize(&[]), ProbeSummary::default());
    }

    #[test]
    fn records_carry_kind_start_and_times() {
        let t0 = ManualClock::at_unix(1_700_000_000).now();
        let d = Duration::from_millis;
        let f = Probe {
            start: t0 + d(1500),
            times: ProbeTimes::Foreign {
                tcp: d(1),
                tls: d(2),
                http: d(3),
            },
        };
        let r = ProbeRecord::of(&f, t0);
        assert_eq!(r.kind, "foreign");
        assert!((r.start_s - 1.5).abs() < 1e-9);
        assert_eq!((r.tcp_ms, r.tls_ms, r.http_ms), (Some(1.0), Some(2.0), 3.0));
        let s = Probe {
            start: t0,
            times: ProbeTimes::Own { http: d(7) },
        };
        let v = serde_json::to_value(ProbeRecord::of(&s, t0 + d(10))).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"kind": "self", "start_s": 0.0, "http_ms": 7.0})
        );
    }
}
