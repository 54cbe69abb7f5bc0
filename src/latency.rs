//! Latency distributions: HDR histograms and the summary figures printed from them.
//!
//! Values are recorded in nanoseconds with 3 significant digits (relative error 0.1 %),
//! from 1 ns to 1000 s. Histograms from several streams merge exactly.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// A latency histogram in nanoseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Hist(Histogram<u64>);

impl Default for Hist {
    fn default() -> Self {
        // 1 ns .. 1000 s with 3 significant figures: valid bounds, cannot fail.
        Hist(Histogram::new_with_bounds(1, 1_000_000_000_000, 3).expect("valid histogram bounds"))
    }
}

impl Hist {
    /// Record one sample (saturating at the histogram's range).
    pub fn record_ns(&mut self, ns: u64) {
        self.0.saturating_record(ns.max(1));
    }

    pub fn len(&self) -> u64 {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Record `n` samples of one value.
    pub fn record_n_ns(&mut self, ns: u64, n: u64) {
        let _ = self.0.record_n(ns.clamp(1, self.0.high()), n);
    }

    /// Add another histogram's samples.
    pub fn merge(&mut self, other: &Hist) {
        // Same bounds on both sides: adding cannot fail.
        let _ = self.0.add(&other.0);
    }

    pub fn clear(&mut self) {
        self.0.reset();
    }

    /// Responsiveness in round trips per minute, after the IETF responsiveness draft
    /// (draft-ietf-ippm-responsiveness): 60 s divided by the trimmed mean round trip,
    /// the mean of the samples at or below the 95th percentile. `None` when empty.
    pub fn rpm(&self) -> Option<f64> {
        if self.0.is_empty() {
            return None;
        }
        let cut = self.0.value_at_quantile(0.95);
        let (mut sum, mut n) = (0f64, 0u64);
        for v in self.0.iter_recorded() {
            if v.value_iterated_to() > cut {
                break;
            }
            let c = v.count_at_value();
            sum += self.0.median_equivalent(v.value_iterated_to()) as f64 * c as f64;
            n += c;
        }
        (n > 0 && sum > 0.0).then(|| 60.0 / (sum / n as f64 / 1e9))
    }

    /// Summary figures in milliseconds, `None` when empty.
    pub fn stats(&self) -> Option<LatencyStats> {
        if self.0.is_empty() {
            return None;
        }
        let ms = |ns: u64| ns as f64 / 1e6;
        let h = &self.0;
        Some(LatencyStats {
            count: h.len(),
            min_ms: ms(h.min()),
            mean_ms: h.mean() / 1e6,
            stdev_ms: h.stdev() / 1e6,
            p50_ms: ms(h.value_at_quantile(0.50)),
            p90_ms: ms(h.value_at_quantile(0.90)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
        })
    }

    /// The full distribution as (upper bound of the bucket in µs, count) pairs, one per
    /// non-empty bucket at the histogram's resolution.
    pub fn buckets_us(&self) -> Vec<(f64, u64)> {
        self.0
            .iter_recorded()
            .map(|v| {
                (
                    v.value_iterated_to() as f64 / 1e3,
                    v.count_since_last_iteration(),
                )
            })
            .collect()
    }
}

/// One-way delays seen by a receiving stream (`--trip-times`): the offset-corrected
/// delays in histograms, the raw ones (receiver clock minus sender clock, which may be
/// negative) as min/mean/max, and the impossible samples.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OwdRecord {
    /// Corrected delays of the current interval.
    pub interval: Hist,
    /// Corrected delays of the whole test.
    pub total: Hist,
    /// Impossible raw samples (negative delay: the sender's clock is ahead of the
    /// receiver's), as iperf 2 counts clock errors.
    pub clock_errors: u64,
    /// Samples still negative after the offset correction (left out of the histograms):
    /// the clocks moved apart by more than the estimate's uncertainty.
    pub negative_corrected: u64,
    pub raw_min_ns: i64,
    pub raw_max_ns: i64,
    pub raw_sum_ns: i128,
    pub samples: u64,
    /// How the delay moved over the test (queue growth).
    pub trend: OwdTrend,
}

/// Width of the windows `OwdTrend` keeps minimums of, receiver clock.
pub const TREND_WINDOW_NS: i64 = 100_000_000;
/// The most windows the late span covers (1 s).
pub const TREND_LATE_WINDOWS: usize = 10;

/// Whether a standing queue built up over a test: the lowest raw delay in the first
/// 100 ms of arrivals against the lowest over the test's late span, its last quarter
/// (at most its last second, at least its last window). Raw delays carry the unknown
/// offset between the clocks, which cancels in the difference.
///
/// A span's minimum is the delay of its least-queued datagram, so only a queue that
/// never drained during the span moves it (CoDel's test for a standing queue, over a
/// longer interval): a receiving thread that was late, cross traffic, or a sender that
/// was not scheduled for a while and then sent what it owed all raise some samples for
/// a while, and the queue such a burst leaves drains before the span ends, while an
/// overload keeps every sample after it higher. A steady overload of `x` shows as the
/// queue it had built when the late span began, `x` times the time since the first
/// window (a 2 % overload over a 2 s test: 30 ms). The span trades the two: a burst
/// must have drained within it, and a shorter one sees more of an overload. Constant memory, time as an argument.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OwdTrend {
    /// Arrival time of the first sample, and the first window's lowest raw delay.
    start: Option<(i64, i64)>,
    /// (window index, lowest raw delay) of the latest windows with samples, by index
    /// modulo [`TREND_LATE_WINDOWS`].
    late: [Option<(i64, i64)>; TREND_LATE_WINDOWS],
    /// The latest window index seen.
    last: i64,
}

impl OwdTrend {
    /// One sample: arrival time `rx_ns` (receiver clock) and its raw delay.
    pub fn record(&mut self, rx_ns: i64, raw_ns: i64) {
        let (t0, first) = self.start.get_or_insert((rx_ns, raw_ns));
        let idx = (rx_ns - *t0).max(0) / TREND_WINDOW_NS;
        if idx == 0 {
            *first = (*first).min(raw_ns);
        }
        // Arrival stamps out of order (several receiving threads) by more than the
        // ring holds: that window's minimum only matters through `first`.
        if idx + TREND_LATE_WINDOWS as i64 <= self.last {
            return;
        }
        self.last = self.last.max(idx);
        let slot = &mut self.late[idx as usize % TREND_LATE_WINDOWS];
        match slot {
            Some((i, m)) if *i == idx => *m = (*m).min(raw_ns),
            Some((i, _)) if *i > idx => {}
            _ => *slot = Some((idx, raw_ns)),
        }
    }

    /// Lowest raw delay over the late span minus lowest in the first window, in ns;
    /// `None` until the samples span more than one window.
    pub fn growth_ns(&self) -> Option<i64> {
        let (_, first) = self.start?;
        if self.last == 0 {
            return None;
        }
        // Windows 1..=last; the late span is the last quarter of 0..=last.
        let k = ((self.last + 1) / 4).clamp(1, TREND_LATE_WINDOWS as i64);
        let from = (self.last - k + 1).max(1);
        let late = self
            .late
            .iter()
            .flatten()
            .filter(|(i, _)| (from..=self.last).contains(i))
            .map(|&(_, m)| m)
            .min()?;
        Some(late - first)
    }
}

impl OwdRecord {
    /// `record` with the arrival time (receiver clock), which also feeds the trend.
    pub fn record_at(&mut self, rx_ns: i64, raw_ns: i64, correction_ns: i64) {
        self.trend.record(rx_ns, raw_ns);
        self.record(raw_ns, correction_ns);
    }

    /// One `--trip-times` TCP write whose last byte was read at `rx_ns`, sent at
    /// `sent_ns` (the peer's frame header: any value). The delay saturates rather than
    /// overflow.
    pub fn record_write(&mut self, rx_ns: i64, sent_ns: i64, correction_ns: i64) {
        self.record_at(rx_ns, rx_ns.saturating_sub(sent_ns), correction_ns);
    }

    /// Record one datagram or write: `raw_ns` = arrival (receiver clock) − send time
    /// (sender clock); `correction_ns` removes the estimated clock offset.
    pub fn record(&mut self, raw_ns: i64, correction_ns: i64) {
        if self.samples == 0 {
            (self.raw_min_ns, self.raw_max_ns) = (raw_ns, raw_ns);
        } else {
            self.raw_min_ns = self.raw_min_ns.min(raw_ns);
            self.raw_max_ns = self.raw_max_ns.max(raw_ns);
        }
        self.raw_sum_ns += raw_ns as i128;
        self.samples += 1;
        if raw_ns < 0 {
            self.clock_errors += 1;
        }
        let corrected = raw_ns.saturating_add(correction_ns);
        if corrected < 0 {
            self.negative_corrected += 1;
        } else {
            self.interval.record_ns(corrected as u64);
            self.total.record_ns(corrected as u64);
        }
    }

    /// The whole test's summary, for the results message and the report.
    pub fn summary(&self) -> OwdSummary {
        OwdSummary {
            samples: self.samples,
            clock_errors: self.clock_errors,
            negative_corrected: self.negative_corrected,
            raw_min_ms: self.raw_min_ns as f64 / 1e6,
            raw_mean_ms: if self.samples > 0 {
                (self.raw_sum_ns / self.samples as i128) as f64 / 1e6
            } else {
                0.0
            },
            raw_max_ms: self.raw_max_ns as f64 / 1e6,
            growth_ms: self.trend.growth_ns().map(|g| g as f64 / 1e6),
            owd: self.total.stats(),
            histogram_us: self.total.buckets_us(),
        }
    }
}

/// A receiver's one-way-delay summary.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct OwdSummary {
    pub samples: u64,
    pub clock_errors: u64,
    #[serde(default)]
    pub negative_corrected: u64,
    /// Raw delay (receiver clock − sender clock), which includes the clock offset.
    pub raw_min_ms: f64,
    pub raw_mean_ms: f64,
    pub raw_max_ms: f64,
    /// How much the delay grew from the test's first 100 ms to its last (`OwdTrend`):
    /// a queue building up on the path. Absent from older peers and short tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growth_ms: Option<f64>,
    /// Offset-corrected delay distribution (samples that came out negative excluded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owd: Option<LatencyStats>,
    /// The corrected histogram: `[upper bound µs, count]` per non-empty bucket.
    #[serde(default)]
    pub histogram_us: Vec<(f64, u64)>,
}

impl OwdSummary {
    /// Combine several streams' summaries (histograms merged at bucket resolution).
    /// `None` when no stream recorded a sample: a summary of nothing has no minimum or
    /// maximum, and the report prints it as absent rather than as ±`f64::MAX`.
    pub fn merge(parts: &[OwdSummary]) -> Option<OwdSummary> {
        let samples: u64 = parts.iter().map(|p| p.samples).sum();
        if samples == 0 {
            return None;
        }
        let mut h = Hist::default();
        for p in parts {
            for &(us, n) in &p.histogram_us {
                h.record_n_ns((us * 1e3) as u64, n);
            }
        }
        let with = || parts.iter().filter(|p| p.samples > 0);
        Some(OwdSummary {
            samples,
            clock_errors: parts.iter().map(|p| p.clock_errors).sum(),
            negative_corrected: parts.iter().map(|p| p.negative_corrected).sum(),
            // At least one part has samples (`samples > 0` above), so both folds meet a
            // real value.
            raw_min_ms: with().map(|p| p.raw_min_ms).fold(f64::INFINITY, f64::min),
            raw_max_ms: with()
                .map(|p| p.raw_max_ms)
                .fold(f64::NEG_INFINITY, f64::max),
            raw_mean_ms: with()
                .map(|p| p.raw_mean_ms * p.samples as f64)
                .sum::<f64>()
                / samples as f64,
            // The stream whose queue grew most.
            growth_ms: parts
                .iter()
                .filter_map(|p| p.growth_ms)
                .fold(None, |a: Option<f64>, g| Some(a.map_or(g, |a| a.max(g)))),
            owd: h.stats(),
            histogram_us: h.buckets_us(),
        })
    }
}

/// Summary of a latency distribution, milliseconds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct LatencyStats {
    pub count: u64,
    pub min_ms: f64,
    pub mean_ms: f64,
    pub stdev_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_sent_at_any_time_is_recorded_without_overflow() {
        // A frame header's send time of i64::MIN made `now - sent` overflow (fuzz
        // target tcp_frames); i64::MAX is a (huge) negative delay, a clock error.
        let now = 1_790_000_000_000_000_000i64;
        let mut r = OwdRecord::default();
        r.record_write(now, i64::MIN, 0);
        r.record_write(now, i64::MAX, 0);
        r.record_write(now, now - 2_000, 0);
        assert_eq!(r.samples, 3);
        assert_eq!(r.clock_errors, 1);
        assert_eq!(r.raw_max_ns, i64::MAX);
        assert_eq!(r.raw_min_ns, now - i64::MAX);
    }

    #[test]
    fn a_merge_of_streams_without_samples_is_absent_not_f64_max() {
        // `--bidir --isochronous --trip-times -u`: a direction whose streams recorded no
        // delay printed `raw min 1.797e308 … max -1.797e308`.
        let empty = OwdRecord::default().summary();
        assert_eq!(OwdSummary::merge(&[empty.clone(), empty.clone()]), None);
        assert_eq!(OwdSummary::merge(&[]), None);
        // A stream without samples does not drag a sampled one's figures.
        let mut r = OwdRecord::default();
        r.record(3_000_000, 0);
        r.record(5_000_000, 0);
        let m = OwdSummary::merge(&[empty, r.summary()]).unwrap();
        assert_eq!(m.samples, 2);
        assert_eq!((m.raw_min_ms, m.raw_mean_ms, m.raw_max_ms), (3.0, 4.0, 5.0));
    }

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut h = Hist::default();
        for us in 1..=1000u64 {
            h.record_ns(us * 1000);
        }
        let s = h.stats().unwrap();
        assert_eq!(s.count, 1000);
        assert!((s.min_ms - 0.001).abs() < 1e-6);
        assert!((s.p50_ms - 0.5).abs() / 0.5 < 0.002, "{}", s.p50_ms);
        assert!((s.p99_ms - 0.99).abs() / 0.99 < 0.002, "{}", s.p99_ms);
        assert!((s.max_ms - 1.0).abs() < 0.001);
        assert!((s.mean_ms - 0.5005).abs() < 0.001);
    }

    #[test]
    fn rpm_from_trimmed_mean() {
        let mut h = Hist::default();
        // 95 round trips of 10 ms and 5 of 1 s: the slow 5 % are trimmed away.
        h.record_n_ns(10_000_000, 95);
        h.record_n_ns(1_000_000_000, 5);
        let rpm = h.rpm().unwrap();
        assert!((rpm - 6000.0).abs() / 6000.0 < 0.002, "{rpm}");
        assert!(Hist::default().rpm().is_none());
    }

    #[test]
    fn owd_correction_and_clock_errors() {
        let mut r = OwdRecord::default();
        // Sender clock 50 ms ahead: raw delays are 10 - 50 = -40 ms; correction +50 ms.
        for _ in 0..10 {
            r.record(-40_000_000, 50_000_000);
        }
        // A sample the correction cannot rescue.
        r.record(-60_000_000, 50_000_000);
        let s = r.summary();
        assert_eq!(
            (s.samples, s.clock_errors, s.negative_corrected),
            (11, 11, 1)
        );
        let o = s.owd.unwrap();
        assert_eq!(o.count, 10);
        assert!((o.p50_ms - 10.0).abs() < 0.01);
        assert!((s.raw_min_ms + 60.0).abs() < 1e-9 && (s.raw_max_ms + 40.0).abs() < 1e-9);
    }

    #[test]
    fn trend_sees_a_growing_queue_not_noise() {
        let ms = 1_000_000i64;
        // `secs` of arrivals every 1 ms; the clocks differ by 7 s (cancels).
        let run = |secs: i64, delay_at: &dyn Fn(i64) -> i64| {
            let mut t = OwdTrend::default();
            for i in 0..secs * 1000 {
                let rx = 1_000 * ms + i * ms;
                t.record(rx, 7_000 * ms + delay_at(i));
            }
            t.growth_ns().unwrap() as f64 / 1e6
        };
        // A steady 5 ms path with scheduling spikes of up to 30 ms on every 7th sample.
        let noisy = run(1, &|i| 5 * ms + if i % 7 == 0 { 30 * ms } else { 0 });
        assert!(noisy.abs() < 1e-9, "{noisy}");
        // 2 % overload: the queue grows 20 ms/s; the late span of a 1 s test starts at
        // 0.8 s, of a 2 s test at 1.5 s, of a 5 s test at 4 s (its last second).
        for (secs, want) in [(1, 16.0), (2, 30.0), (5, 80.0)] {
            let growing = run(secs, &|i| 5 * ms + i * ms / 50);
            assert!((growing - want).abs() < 0.1, "{secs} s: {growing}");
        }
        // A queue draining (the previous trial's) reads as negative growth.
        assert!(run(1, &|i| 30 * ms - i * ms / 50) < -15.0);
        // Seen in CI: a 90 Mbit/s trial on a 97.2 Mbit/s link whose sender was not
        // scheduled for ~30 ms at 1.7 s and then sent what it owed. The burst drains at
        // the 7.4 % headroom, 0.074 ms per ms, and has not drained when the test ends;
        // the last 200 ms alone read 7.9 ms of growth, the late span (from 1.5 s) none.
        let burst = run(2, &|i| {
            5 * ms
                + if i >= 1700 {
                    (30 * ms - (i - 1700) * 74_000).max(0)
                } else {
                    0
                }
        });
        assert!(burst.abs() < 1e-9, "{burst}");
        // Less than one window: no figure.
        let mut t = OwdTrend::default();
        t.record(0, 5 * ms);
        t.record(50 * ms, 9 * ms);
        assert_eq!(t.growth_ns(), None);
        t.record(150 * ms, 9 * ms);
        assert_eq!(t.growth_ns(), Some(4 * ms));
        // Stamps out of order by more than the ring: ignored, not misfiled.
        t.record(1_500 * ms, 6 * ms);
        t.record(160 * ms, ms);
        assert_eq!(t.growth_ns(), Some(ms));
    }

    #[test]
    fn merged_growth_is_the_largest() {
        let part = |g: Option<f64>| OwdSummary {
            samples: 1,
            growth_ms: g,
            ..Default::default()
        };
        let m = OwdSummary::merge(&[part(Some(1.0)), part(None), part(Some(12.0))]).unwrap();
        assert_eq!(m.growth_ms, Some(12.0));
        assert_eq!(OwdSummary::merge(&[part(None)]).unwrap().growth_ms, None);
    }

    #[test]
    fn merge_is_exact_and_buckets_sum_to_count() {
        let mut a = Hist::default();
        let mut b = Hist::default();
        a.record_ns(10_000);
        b.record_ns(20_000);
        b.record_ns(20_000);
        a.merge(&b);
        assert_eq!(a.len(), 3);
        let total: u64 = a.buckets_us().iter().map(|b| b.1).sum();
        assert_eq!(total, 3);
        assert!(Hist::default().stats().is_none());
    }
}
