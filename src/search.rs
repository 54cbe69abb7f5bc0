//! The maximum-rate search behind `--find-max-rate`, as pure logic.
//!
//! RFC 2544 (section 26.1) style: offer a rate, measure the loss, and narrow the range
//! until the highest rate whose loss stays within the target is known to the requested
//! resolution. First the rate doubles from the start while trials pass (so the search
//! is not capped by a guess), then it bisects between the highest pass and the lowest
//! failure. The engine runs the trials; this module only decides what to try next.

/// One trial's outcome.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trial {
    /// Offered rate per stream, bits/s.
    pub offered_bps: u64,
    /// What the senders achieved, bits/s (all streams).
    pub sent_bps: f64,
    /// What the receivers got, bits/s (all streams).
    pub received_bps: f64,
    pub lost_percent: f64,
    pub pass: bool,
}

/// Search state.
#[derive(Debug, Clone)]
pub struct RateSearch {
    pub loss_target: f64,
    /// Highest passing rate so far.
    pub best: Option<Trial>,
    /// Lowest failing rate so far.
    lowest_fail: Option<u64>,
    next: Option<u64>,
    /// Stop when the bracket is narrower than this fraction of the rate.
    pub resolution: f64,
    pub max_rate: u64,
    pub max_steps: usize,
    pub steps: Vec<Trial>,
}

impl RateSearch {
    pub fn new(start_bps: u64, loss_target: f64) -> RateSearch {
        RateSearch {
            loss_target,
            best: None,
            lowest_fail: None,
            next: Some(start_bps.max(1000)),
            resolution: 0.01,
            max_rate: 400_000_000_000,
            max_steps: 20,
            steps: Vec::new(),
        }
    }

    /// The rate to try next, or `None` when the search is over.
    pub fn next_rate(&self) -> Option<u64> {
        if self.steps.len() >= self.max_steps {
            return None;
        }
        self.next
    }

    /// Whether a trial at `offered_bps` per stream over `streams` streams passed.
    pub fn judge(&self, offered_bps: u64, streams: u32, sent_bps: f64, lost_percent: f64) -> bool {
        // A sender that could not reach the offered rate did not test it.
        let offered_total = offered_bps as f64 * streams as f64;
        lost_percent <= self.loss_target && sent_bps >= 0.99 * offered_total
    }

    /// Record a trial and choose the next rate.
    pub fn record(&mut self, t: Trial) {
        self.steps.push(t);
        if t.pass {
            if self.best.is_none_or(|b| t.offered_bps > b.offered_bps) {
                self.best = Some(t);
            }
        } else {
            self.lowest_fail = Some(
                self.lowest_fail
                    .map_or(t.offered_bps, |f| f.min(t.offered_bps)),
            );
        }
        let lo = self.best.map_or(0, |b| b.offered_bps);
        self.next = match self.lowest_fail {
            // Still climbing: double.
            None => {
                let up = lo.saturating_mul(2);
                (up <= self.max_rate && up > lo).then_some(up)
            }
            Some(hi) => {
                let width = hi.saturating_sub(lo) as f64;
                if width <= self.resolution * hi as f64 || hi <= 1000 {
                    None
                } else {
                    Some(lo + (hi - lo) / 2)
                }
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A simulated link that loses nothing up to `capacity` and 5 % above it.
    fn simulate(capacity: u64, start: u64) -> RateSearch {
        let mut s = RateSearch::new(start, 0.1);
        while let Some(r) = s.next_rate() {
            let lost = if r <= capacity { 0.0 } else { 5.0 };
            let sent = r as f64;
            let pass = s.judge(r, 1, sent, lost);
            s.record(Trial {
                offered_bps: r,
                sent_bps: sent,
                received_bps: sent * (1.0 - lost / 100.0),
                lost_percent: lost,
                pass,
            });
        }
        s
    }

    #[test]
    fn finds_capacity_within_resolution_from_below_and_above() {
        for (cap, start) in [
            (943_000_000u64, 100_000_000u64),
            (943_000_000, 10_000_000_000),
            (5_000_000, 1_000_000_000),
        ] {
            let s = simulate(cap, start);
            let best = s.best.unwrap().offered_bps;
            assert!(best <= cap, "{best} > {cap}");
            assert!(best as f64 >= cap as f64 * 0.98, "{best} far below {cap}");
            assert!(s.steps.len() <= 20);
        }
    }

    #[test]
    fn sender_short_of_offered_rate_fails() {
        let s = RateSearch::new(1_000_000, 0.1);
        assert!(!s.judge(1_000_000_000, 1, 400e6, 0.0));
        assert!(s.judge(1_000_000_000, 2, 1.995e9, 0.05));
    }

    #[test]
    fn nothing_passes() {
        let s = simulate(0, 1_000_000);
        assert!(s.best.is_none());
        assert!(s.next_rate().is_none());
    }
}
