//! The saturation machine driven with synthetic goodput and probe sequences on virtual
//! time: no sockets, no clock but a `ManualClock`'s readings.

use super::*;
use crate::clock::{Clock, ManualClock};

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64(v / 1000.0)
}

/// What the synthetic path does with `n` load-generating connections in interval `k`:
/// its goodput (bits a second) and the times of a foreign probe (each part) and a self
/// probe, in milliseconds.
struct Path {
    goodput: fn(usize, usize) -> f64,
    foreign_part_ms: fn(usize, usize) -> f64,
    self_ms: fn(usize, usize) -> f64,
}

/// Runs the machine until it finishes, five foreign and five self probes an interval
/// (within MPS), returning the rows and the outcome.
fn drive(path: &Path, params: Params) -> (Vec<IntervalRow>, Outcome) {
    let clock = ManualClock::at_unix(1_700_000_000);
    let mut m = Saturation::new(params, clock.now());
    let (mut bytes, mut rows) = (0u64, Vec::new());
    for k in 0..1000 {
        let n = m.connections();
        for i in 0..5 {
            let start = clock.now() + Duration::from_millis(100 * i);
            let f = ms((path.foreign_part_ms)(n, k));
            let times = ProbeTimes::Foreign {
                tcp: f,
                tls: f,
                http: f,
            };
            m.on_probe(Probe { start, times });
            let times = ProbeTimes::Own {
                http: ms((path.self_ms)(n, k)),
            };
            m.on_probe(Probe { start, times });
        }
        bytes += ((path.goodput)(n, k) / 8.0) as u64;
        clock.advance_to(m.poll_timeout());
        let step = m.on_interval(clock.now(), bytes);
        rows.push(step.row);
        assert_eq!(m.connections(), n + step.add_connections);
        if let Some(done) = step.finished {
            return (rows, done);
        }
    }
    panic!("the run never ended");
}

/// A 90 Mbit/s bottleneck that one connection fills a third of.
fn capped(n: usize, _k: usize) -> f64 {
    (n.min(3) as f64) * 30e6
}

#[test]
fn saturation_reached_ends_early_with_high_confidence() {
    let path = Path {
        goodput: capped,
        foreign_part_ms: |_, _| 10.0,
        self_ms: |_, _| 20.0,
    };
    let (rows, out) = drive(&path, Params::default());
    assert_eq!(out.reason, EndReason::Saturated);
    assert_eq!(out.goodput_confidence, Confidence::High);
    assert_eq!(out.rpm_confidence, Confidence::High);
    assert!(out.goodput_saturated && out.responsiveness_saturated);
    // Three connections fill the link (30, 60, 90, 90, ... Mbit/s); the full-window
    // moving averages from the fourth interval are 67.5, 82.5, 90, 90, 90: the last
    // four (sd 3.25) are within 5 % of 90 at the 8th interval, goodput saturation.
    // Then MAD (4) intervals of equal responsiveness: the 11th ends the run.
    assert_eq!(rows.iter().position(|r| r.goodput_saturated), Some(7));
    assert_eq!(out.intervals, 11);
    assert!(
        (out.goodput_bps.unwrap() - 90e6).abs() < 1e3,
        "{:?}",
        out.goodput_bps
    );
    // By hand (-08): foreign 60000 / 10 = 6000, self 60000 / 20 = 3000, the mean 4500.
    assert!((out.rpm.unwrap() - 4500.0).abs() < 1e-6, "{:?}", out.rpm);
    assert!((out.foreign_rpm.unwrap() - 6000.0).abs() < 1e-6);
    assert!((out.self_rpm.unwrap() - 3000.0).abs() < 1e-6);
    // Connections were added one an interval, never two at once, never past MNP.
    assert!(
        rows.windows(2)
            .all(|w| w[1].connections <= w[0].connections + 1)
    );
    assert!(out.connections <= MAX_CONNECTIONS);
}

#[test]
fn never_saturating_times_out_with_low_confidence() {
    // A goodput that grows by a fifth every interval never settles (one that swings
    // back and forth would: its moving average is steady).
    let path = Path {
        goodput: |_, k| 10e6 * 1.2f64.powi(k as i32),
        foreign_part_ms: |_, _| 10.0,
        self_ms: |_, _| 20.0,
    };
    let (rows, out) = drive(&path, Params::default());
    assert_eq!(out.reason, EndReason::MaxDuration);
    // MAD intervals ran without stability: medium for the capacity; the
    // responsiveness stage never began: low.
    assert_eq!(out.goodput_confidence, Confidence::Medium);
    assert_eq!(out.rpm_confidence, Confidence::Low);
    assert!(!out.goodput_saturated);
    assert_eq!(out.intervals, 20);
    assert!((out.elapsed_s - 20.0).abs() < 1e-6);
    // One connection added per interval up to the maximum, then no more.
    assert_eq!(out.connections, MAX_CONNECTIONS);
    assert_eq!(rows[0].connections, 1);
    assert_eq!(rows[5].connections, 6);
}

#[test]
fn goodput_saturated_but_responsiveness_not_is_medium() {
    // Every probe takes a fifth longer every interval: no stable responsiveness,
    // though the goodput settles. (Self probes alone growing would not do: the mean of
    // the two RPMs then settles at half the foreign one.)
    let path = Path {
        goodput: capped,
        foreign_part_ms: |_, k| 10.0 * 1.2f64.powi(k as i32),
        self_ms: |_, k| 20.0 * 1.2f64.powi(k as i32),
    };
    let (_, out) = drive(&path, Params::default());
    assert_eq!(out.reason, EndReason::MaxDuration);
    assert!(out.goodput_saturated && !out.responsiveness_saturated);
    assert_eq!(out.goodput_confidence, Confidence::High);
    assert_eq!(out.rpm_confidence, Confidence::Medium);
    assert_eq!(out.connections, MAX_CONNECTIONS);
}

#[test]
fn latency_rising_under_load_lowers_the_rpm() {
    // Idle round trip 10 ms. Each load-generating connection keeps 20 ms of queue at
    // the bottleneck, up to the three that fill it: 60 ms of queue. A foreign probe's
    // parts each take a round trip through that queue (70 ms); a self probe waits also
    // behind its own connection's data, one more queue's worth (130 ms).
    let path = Path {
        goodput: capped,
        foreign_part_ms: |n, _| 10.0 + 20.0 * n.min(3) as f64,
        self_ms: |n, _| 10.0 + 2.0 * 20.0 * n.min(3) as f64,
    };
    let (_, out) = drive(&path, Params::default());
    assert_eq!(out.rpm_confidence, Confidence::High);
    // By hand: foreign 60000 / 70 = 857.14, self 60000 / 130 = 461.54, the mean
    // 659.34 RPM, against 60000 / 10 = 6000 RPM idle.
    let by_hand: f64 = (60000.0 / 70.0 + 60000.0 / 130.0) / 2.0;
    assert!((by_hand - 659.34).abs() < 0.01);
    assert!((out.rpm.unwrap() - by_hand).abs() < 1e-6, "{:?}", out.rpm);
    assert!((out.foreign_rpm.unwrap() - 60000.0 / 70.0).abs() < 1e-6);
    assert!((out.self_rpm.unwrap() - 60000.0 / 130.0).abs() < 1e-6);
}

#[test]
fn final_figure_trims_the_slowest_probes() {
    let clock = ManualClock::at_unix(1_700_000_000);
    let t0 = clock.now();
    // 19 self probes of 10 ms and one of 10 s: the trimmed mean drops the outlier.
    let mut probes: Vec<Probe> = (0..19)
        .map(|_| Probe {
            start: t0,
            times: ProbeTimes::Own { http: ms(10.0) },
        })
        .collect();
    probes.push(Probe {
        start: t0,
        times: ProbeTimes::Own { http: ms(10_000.0) },
    });
    let f = rpm_of(&probes, TRIMMED_MEAN_KEEP_PCT);
    assert!((f.self_rpm.unwrap() - 6000.0).abs() < 1e-6);
    assert_eq!(f.foreign_rpm, None);
    assert_eq!(f.rpm, f.self_rpm);
}

#[test]
fn probe_rate_is_limited_by_mps_and_capacity_share() {
    let clock = ManualClock::at_unix(1_700_000_000);
    let t0 = clock.now();
    let mut m = Saturation::new(Params::default(), t0);
    assert!(m.probe_allowed(t0));
    // No goodput known yet: 1/MPS = 10 ms.
    m.on_probe_sent(t0, 5_000);
    assert_eq!(m.next_probe_at(), t0 + Duration::from_millis(10));
    assert!(!m.probe_allowed(t0 + Duration::from_millis(9)));
    // 1 Mbit/s of goodput: 5 % is 50 kbit/s, a 5000-byte probe takes 0.8 s of it.
    let t1 = t0 + Duration::from_secs(1);
    m.on_interval(t1, 125_000);
    m.on_probe_sent(t1, 5_000);
    assert_eq!(m.next_probe_at(), t1 + Duration::from_millis(800));
    // 1 Gbit/s: the capacity allows far more, MPS holds it at 10 ms.
    let t2 = t1 + Duration::from_secs(1);
    m.on_interval(t2, 125_000 + 125_000_000);
    m.on_probe_sent(t2, 5_000);
    let gap = m.next_probe_at() - t2;
    assert_eq!(gap, Duration::from_millis(10));
}

#[test]
fn stop_gives_what_was_measured() {
    let clock = ManualClock::at_unix(1_700_000_000);
    let t0 = clock.now();
    let mut m = Saturation::new(Params::default(), t0);
    let start = t0;
    m.on_probe(Probe {
        start,
        times: ProbeTimes::Own { http: ms(30.0) },
    });
    let t1 = t0 + Duration::from_secs(1);
    m.on_interval(t1, 1_250_000);
    m.on_probe(Probe {
        start: t1,
        times: ProbeTimes::Own { http: ms(50.0) },
    });
    let out = m.stop(t1 + Duration::from_millis(500));
    assert_eq!(out.reason, EndReason::Stopped);
    assert_eq!(out.goodput_confidence, Confidence::Low);
    assert_eq!(out.rpm_confidence, Confidence::Low);
    assert_eq!(out.goodput_bps, Some(10e6));
    // Both probes, the finished interval's and the one in progress: mean 40 ms.
    assert!((out.rpm.unwrap() - 1500.0).abs() < 1e-6);
    assert!((out.elapsed_s - 1.5).abs() < 1e-9);
    assert!(!m.probe_allowed(t1 + Duration::from_secs(1)));
    // Stopping twice gives the same result.
    assert_eq!(m.stop(t1 + Duration::from_secs(5)), out);
}

#[test]
fn probes_beyond_the_cap_are_counted_not_kept() {
    let clock = ManualClock::at_unix(1_700_000_000);
    let t0 = clock.now();
    let mut m = Saturation::new(Params::default(), t0);
    for _ in 0..(MAX_PROBES_PER_INTERVAL + 3) {
        m.on_probe(Probe {
            start: t0,
            times: ProbeTimes::Own { http: ms(1.0) },
        });
    }
    assert_eq!(m.dropped_probes(), 3);
}

#[test]
fn a_limit_before_mad_intervals_is_low_confidence() {
    // A 3 s limit: the stage runs 3 intervals, fewer than MAD (4).
    let params = Params {
        max_duration: Duration::from_secs(3),
        ..Params::default()
    };
    let path = Path {
        goodput: |_, _| 50e6,
        foreign_part_ms: |_, _| 10.0,
        self_ms: |_, _| 10.0,
    };
    let (rows, out) = drive(&path, params);
    assert_eq!(rows.len(), 3);
    assert_eq!(out.reason, EndReason::MaxDuration);
    assert_eq!(out.goodput_confidence, Confidence::Low);
    assert_eq!(out.rpm_confidence, Confidence::Low);
    assert!(!out.goodput_saturated);
    assert_eq!(out.goodput_bps, Some(50e6));
}

#[test]
fn a_late_tick_counts_its_real_duration() {
    let clock = ManualClock::at_unix(1_700_000_000);
    let t0 = clock.now();
    let mut m = Saturation::new(Params::default(), t0);
    // 2 s late: 2.5 MB over 2 s is 10 Mbit/s, not 20.
    let step = m.on_interval(t0 + Duration::from_secs(2), 2_500_000);
    assert!((step.row.goodput_bps - 10e6).abs() < 1e-3);
}

proptest::proptest! {
    /// Whatever the goodput and probe times, the run adds at most one connection an
    /// interval, never passes MNP, and ends by the maximum duration.
    #[test]
    fn any_sequence_ends_in_time_within_the_connection_cap(
        goodput in proptest::collection::vec(0u64..2_000_000_000, 25),
        probe_ms in proptest::collection::vec(0u32..5_000, 25),
    ) {
        let clock = ManualClock::at_unix(1_700_000_000);
        let mut m = Saturation::new(Params::default(), clock.now());
        let mut bytes = 0u64;
        let mut ended = None;
        for (k, (&g, &p)) in goodput.iter().zip(&probe_ms).enumerate() {
            let start = clock.now();
            let d = Duration::from_millis(u64::from(p));
            m.on_probe(Probe { start, times: ProbeTimes::Foreign { tcp: d, tls: d, http: d } });
            m.on_probe(Probe { start, times: ProbeTimes::Own { http: d } });
            bytes += g / 8;
            let before = m.connections();
            clock.advance_to(m.poll_timeout());
            let step = m.on_interval(clock.now(), bytes);
            proptest::prop_assert!(step.add_connections <= 1);
            proptest::prop_assert!(m.connections() <= MAX_CONNECTIONS);
            proptest::prop_assert_eq!(m.connections(), before + step.add_connections);
            if let Some(out) = step.finished {
                ended = Some((k, out));
                break;
            }
        }
        let (k, out) = ended.expect("ended within 20 intervals");
        proptest::prop_assert!(k < 20);
        if let Some(rpm) = out.rpm {
            proptest::prop_assert!(rpm.is_finite() && rpm > 0.0);
        }
    }

    /// A slower probe never raises the responsiveness.
    #[test]
    fn slower_probes_never_raise_the_rpm(
        times in proptest::collection::vec(1u32..10_000, 1..40),
        which in 0usize..40,
        extra in 1u32..10_000,
    ) {
        let clock = ManualClock::at_unix(1_700_000_000);
        let start = clock.now();
        let probe = |ms: u32| Probe { start, times: ProbeTimes::Own { http: Duration::from_millis(u64::from(ms)) } };
        let base: Vec<Probe> = times.iter().map(|&t| probe(t)).collect();
        let mut slower = times.clone();
        let i = which % slower.len();
        slower[i] += extra;
        let slower: Vec<Probe> = slower.iter().map(|&t| probe(t)).collect();
        let a = rpm_of(&base, TRIMMED_MEAN_KEEP_PCT).rpm.unwrap();
        let b = rpm_of(&slower, TRIMMED_MEAN_KEEP_PCT).rpm.unwrap();
        proptest::prop_assert!(b <= a + 1e-9, "{} > {}", b, a);
    }
}
