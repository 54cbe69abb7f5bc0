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

    /// Add another histogram's samples.
    pub fn merge(&mut self, other: &Hist) {
        // Same bounds on both sides: adding cannot fail.
        let _ = self.0.add(&other.0);
    }

    pub fn clear(&mut self) {
        self.0.reset();
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
