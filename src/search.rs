//! The maximum-rate search behind `--find-max-rate`, as pure logic.
//!
//! RFC 2544 (section 26.1) style: offer a rate, measure the loss, and narrow the range
//! until the highest rate whose loss stays within the target is known to the requested
//! resolution. First the rate doubles from the start while trials pass (so the search
//! is not capped by a guess), then it bisects between the highest pass and the lowest
//! failure. The engine runs the trials; this module only decides what to try next.

/// Why a trial passed or failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// The senders could not reach the offered rate, so it was not tested.
    SenderShort,
    /// More loss than the target.
    Loss,
}

impl Verdict {
    pub fn pass(self) -> bool {
        self == Verdict::Pass
    }

    /// A short phrase for step lines and JSON.
    pub fn reason(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::SenderShort => "sender below the offered rate",
            Verdict::Loss => "loss above the target",
        }
    }
}

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
    pub verdict: Verdict,
}

impl Trial {
    pub fn pass(&self) -> bool {
        self.verdict.pass()
    }
}

/// How a search ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// The bracket narrowed to the resolution (or the step limit): the highest pass.
    Found(Trial),
    /// No trial passed.
    NothingPassed,
    /// Stopped early (Ctrl-C): the highest pass so far, if any; the true maximum may be
    /// higher.
    Stopped(Option<Trial>),
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
    stopped: bool,
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
            stopped: false,
        }
    }

    /// End the search now (the user interrupted it): no further rate is offered, and
    /// the outcome is the best so far, marked as stopped.
    pub fn finish_interrupted(&mut self) -> Outcome {
        self.stopped = true;
        self.next = None;
        self.outcome()
    }

    /// The result once `next_rate` returned `None` (or after `finish_interrupted`).
    pub fn outcome(&self) -> Outcome {
        match self.best {
            _ if self.stopped => Outcome::Stopped(self.best),
            Some(b) => Outcome::Found(b),
            None => Outcome::NothingPassed,
        }
    }

    /// The rate to try next, or `None` when the search is over.
    pub fn next_rate(&self) -> Option<u64> {
        if self.steps.len() >= self.max_steps {
            return None;
        }
        self.next
    }

    /// Whether a trial at `offered_bps` per stream over `streams` streams passed, and if
    /// not, why (the first reason that applies).
    pub fn judge(
        &self,
        offered_bps: u64,
        streams: u32,
        sent_bps: f64,
        lost_percent: f64,
    ) -> Verdict {
        let offered_total = offered_bps as f64 * streams as f64;
        if sent_bps < 0.99 * offered_total {
            // A sender that could not reach the offered rate did not test it.
            Verdict::SenderShort
        } else if lost_percent > self.loss_target {
            Verdict::Loss
        } else {
            Verdict::Pass
        }
    }

    /// Record a trial and choose the next rate.
    pub fn record(&mut self, t: Trial) {
        self.steps.push(t);
        if t.pass() {
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
            let received = sent * (1.0 - lost / 100.0);
            let verdict = s.judge(r, 1, sent, lost);
            s.record(Trial {
                offered_bps: r,
                sent_bps: sent,
                received_bps: received,
                lost_percent: lost,
                verdict,
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
        assert_eq!(s.judge(1_000_000_000, 1, 400e6, 0.0), Verdict::SenderShort);
        assert_eq!(s.judge(1_000_000_000, 2, 1.995e9, 0.05), Verdict::Pass);
        assert_eq!(s.judge(1_000_000_000, 1, 1e9, 1.0), Verdict::Loss);
    }

    #[test]
    fn nothing_passes() {
        let s = simulate(0, 1_000_000);
        assert!(s.best.is_none());
        assert!(s.next_rate().is_none());
        assert_eq!(s.outcome(), Outcome::NothingPassed);
    }

    #[test]
    fn interrupted_search_reports_the_best_so_far() {
        let mut s = RateSearch::new(10_000_000, 0.1);
        // Interrupted before any trial ended: stopped, nothing known.
        assert_eq!(s.clone().finish_interrupted(), Outcome::Stopped(None));
        let pass = |r: u64| Trial {
            offered_bps: r,
            sent_bps: r as f64,
            received_bps: r as f64,
            lost_percent: 0.0,
            verdict: Verdict::Pass,
        };
        s.record(pass(10_000_000));
        s.record(pass(20_000_000));
        assert_eq!(s.next_rate(), Some(40_000_000));
        let out = s.finish_interrupted();
        assert_eq!(out, Outcome::Stopped(Some(pass(20_000_000))));
        assert_eq!(s.next_rate(), None, "no trial after the interrupt");
        assert_eq!(s.outcome(), out);
    }
}
