//! `--ecn-responsive`: the rate law of a UDP sender that answers congestion marks the
//! L4S way (RFC 9330/9331), after iperf 2's `--udp-l4s` (which runs TCP Prague's
//! window law per datagram acknowledgement; this is its rate form, per feedback round).
//!
//! The receiver returns its cumulative ECN counts once per feedback round; each round
//! the law takes the fraction of that round's datagrams that arrived CE-marked, `F`,
//! and keeps DCTCP's moving average of it (RFC 8257 §3.3):
//!
//! ```text
//! alpha <- (1 - g) * alpha + g * F            g = 1/16, alpha starts at 1
//! rate  <- rate * (1 - alpha / 2)             when the round saw a mark, at most
//!                                             once in 3 rounds (CUT_GAP_ROUNDS)
//! rate  <- rate + A * (1 - F)                 A = -b / 100 per round (additive increase)
//! rate  clamped to [floor, -b]                floor = -b / 100
//! ```
//!
//! A scalable response: the reduction is in proportion to how much was marked, not a
//! halving per mark, so a shallow marking threshold keeps the queue short without
//! starving the flow. With every round marked at a steady fraction `p` (a marker that
//! marks a fixed share, as nftables' `numgen` does), alpha tends to `p` and the rate
//! settles where one cut (every [`CUT_GAP_ROUNDS`] = 3 rounds) takes what the rounds
//! between cuts added; averaged over that cycle the rate is
//! `rate* = A (1 - p) (6 / p - 1)`, i.e. `-b * 0.01 (1 - p) (6 / p - 1)`, clamped to
//! [floor, -b] (p = 10 %: 53 % of `-b`; p = 20 %: 23 %; p = 50 %: 5.5 %; below about
//! 5.6 % it stays at `-b`). Behind a step marker (CE when the queue holds more
//! than K packets) the rate saws just under the bottleneck's rate with the queue near K:
//! on the simulator (10 Mbit/s, 10 ms round trip, K = 10 datagrams, `-b 20M`) it
//! averages 85-90 % of the bottleneck, the queue never past 3 K, nothing dropped, where
//! a classic flow at the same `-b` keeps the queue full and loses half of what it sends
//! (`tests/sim/responsive.rs`).
//!
//! Feedback that stops arriving is treated as congestion: after
//! [`SILENCE_ROUNDS`] rounds without any, the rate falls to the floor
//! ([`ResponsiveRate::on_silence`]) and climbs again once feedback resumes.
//!
//! Pure: counts and `now` come in, the rate goes out.

use std::time::Duration;

use crate::stats::EcnCounts;

/// The EWMA gain `g` of the marked fraction (DCTCP's default, RFC 8257 §4.2).
pub const GAIN: f64 = 1.0 / 16.0;
/// The additive increase per round, as a share of `-b`.
pub const STEP_SHARE: f64 = 1.0 / 100.0;
/// The floor, as a share of `-b`.
pub const FLOOR_SHARE: f64 = 1.0 / 100.0;
/// How often the receiver returns its counts: one feedback round.
pub const ROUND: Duration = Duration::from_millis(10);
/// Rounds after a reduction before the next may come: the marks of the datagrams
/// sent before the reduction took effect are still on their way back (the round trip
/// of a rate-paced sender's feedback), and answering them again would cut twice for
/// one queue.
pub const CUT_GAP_ROUNDS: u64 = 3;
/// Rounds without feedback after which the rate falls to the floor.
pub const SILENCE_ROUNDS: u32 = 10;

/// The sender's rate under `--ecn-responsive`.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponsiveRate {
    max_bps: f64,
    floor_bps: f64,
    step_bps: f64,
    rate_bps: f64,
    alpha: f64,
    last: EcnCounts,
    last_feedback: Option<Duration>,
    rounds: u64,
    marked_rounds: u64,
    next_cut: u64,
    /// When the sender next reads its socket for feedback ([`ResponsiveRate::read_due`]).
    next_read: Option<Duration>,
}

/// One feedback round as the law saw it (for the charts and tests).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Round {
    /// Datagrams the receiver counted in the round.
    pub datagrams: u64,
    /// Of them, CE-marked.
    pub ce: u64,
    /// The marked fraction, 0..=1.
    pub fraction: f64,
    /// The moving average after the round.
    pub alpha: f64,
    /// The rate after the round, bits per second.
    pub rate_bps: f64,
}

impl ResponsiveRate {
    /// A law capped at `max_bps` (`-b`, which must be set: a responsive sender needs a
    /// ceiling), starting there.
    pub fn new(max_bps: u64) -> ResponsiveRate {
        let max_bps = max_bps.max(1) as f64;
        ResponsiveRate {
            max_bps,
            floor_bps: max_bps * FLOOR_SHARE,
            step_bps: max_bps * STEP_SHARE,
            rate_bps: max_bps,
            alpha: 1.0,
            last: EcnCounts::default(),
            last_feedback: None,
            rounds: 0,
            marked_rounds: 0,
            next_cut: 0,
            next_read: None,
        }
    }

    /// The receiver's cumulative counts `counts`, arrived at `now`. Counts that went
    /// backwards (a reordered or forged feedback datagram) are ignored.
    pub fn on_feedback(&mut self, now: Duration, counts: EcnCounts) -> Option<Round> {
        if counts.total() < self.last.total() || counts.ce < self.last.ce {
            return None;
        }
        let d = counts.since(&self.last);
        self.last = counts;
        self.last_feedback = Some(now);
        let datagrams = d.total();
        if datagrams == 0 {
            return None;
        }
        let fraction = (d.ce as f64 / datagrams as f64).clamp(0.0, 1.0);
        self.alpha = (1.0 - GAIN) * self.alpha + GAIN * fraction;
        if d.ce > 0 {
            self.marked_rounds += 1;
            if self.rounds >= self.next_cut {
                self.rate_bps *= 1.0 - self.alpha / 2.0;
                self.next_cut = self.rounds + CUT_GAP_ROUNDS;
            }
        }
        self.rate_bps += self.step_bps * (1.0 - fraction);
        self.rate_bps = self.rate_bps.clamp(self.floor_bps, self.max_bps);
        self.rounds += 1;
        Some(Round {
            datagrams,
            ce: d.ce,
            fraction,
            alpha: self.alpha,
            rate_bps: self.rate_bps,
        })
    }

    /// Called when the sender looks at its feedback at `now`: if none came for
    /// [`SILENCE_ROUNDS`] rounds since the last (or since `start`, before the first),
    /// the rate falls to the floor. Returns whether it did.
    pub fn on_silence(&mut self, now: Duration, start: Duration) -> bool {
        let since = self.last_feedback.unwrap_or(start);
        if now.saturating_sub(since) >= ROUND * SILENCE_ROUNDS && self.rate_bps > self.floor_bps {
            self.rate_bps = self.floor_bps;
            return true;
        }
        false
    }

    /// Whether the sender should read its feedback at `now`: the first time, then once
    /// a [`ROUND`] (the receiver returns its counts once a round, so reading on every
    /// send round would be a wasted system call per batch). Each `true` starts the
    /// next round's wait.
    pub fn read_due(&mut self, now: Duration) -> bool {
        if self.next_read.is_some_and(|t| now < t) {
            return false;
        }
        self.next_read = Some(now + ROUND);
        true
    }

    /// The rate to send at now, bits per second.
    pub fn rate(&self) -> u64 {
        self.rate_bps.round() as u64
    }

    /// The lowest rate the law goes to, bits per second.
    pub fn floor(&self) -> u64 {
        self.floor_bps.round() as u64
    }

    /// The moving average of the marked fraction.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Feedback rounds taken, and of them those that saw a mark.
    pub fn rounds(&self) -> (u64, u64) {
        (self.rounds, self.marked_rounds)
    }

    /// Where the rate settles when every round is marked at fraction `p`:
    /// `A (1 - p) (2 * CUT_GAP_ROUNDS / p - 1)`, the mean over a cycle of cuts, clamped
    /// to [floor, -b].
    pub fn settle_bps(max_bps: u64, p: f64) -> f64 {
        let max = max_bps as f64;
        if p <= 0.0 {
            return max;
        }
        (max * STEP_SHARE * (1.0 - p) * (2.0 * CUT_GAP_ROUNDS as f64 / p - 1.0))
            .clamp(max * FLOOR_SHARE, max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(total: u64, ce: u64) -> EcnCounts {
        EcnCounts {
            ect1: total - ce,
            ce,
            ..EcnCounts::default()
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn unmarked_rounds_keep_the_rate_at_the_ceiling() {
        let mut l = ResponsiveRate::new(100_000_000);
        for k in 1..=50 {
            l.on_feedback(ms(10 * k), counts(100 * k, 0));
        }
        assert_eq!(l.rate(), 100_000_000);
        assert!(l.alpha() < 0.05, "{}", l.alpha());
    }

    #[test]
    fn the_first_mark_halves_then_reductions_follow_alpha() {
        let mut l = ResponsiveRate::new(100_000_000);
        // alpha starts at 1: a round with 10 % marked gives alpha = 15/16 + 0.1/16.
        let r = l.on_feedback(ms(10), counts(100, 10)).expect("a round");
        let alpha = 15.0 / 16.0 + 0.1 / 16.0;
        assert!((r.alpha - alpha).abs() < 1e-12);
        let want = 100e6 * (1.0 - alpha / 2.0) + 1e6 * 0.9;
        assert!((r.rate_bps - want).abs() < 1e-3, "{} vs {want}", r.rate_bps);
    }

    #[test]
    fn a_steady_fraction_settles_at_the_documented_rate() {
        for p in [0.1, 0.2, 0.5] {
            let mut l = ResponsiveRate::new(100_000_000);
            let (mut total, mut ce) = (0u64, 0u64);
            let mut late = Vec::new();
            for k in 1..=2000 {
                total += 1000;
                ce += (1000.0 * p) as u64;
                l.on_feedback(ms(10 * k), counts(total, ce));
                if k > 1700 {
                    late.push(l.rate() as f64);
                }
            }
            // The rate saws between cuts: judge its mean.
            let want = ResponsiveRate::settle_bps(100_000_000, p);
            let got = late.iter().sum::<f64>() / late.len() as f64;
            assert!((got - want).abs() / want < 0.01, "p {p}: {got} vs {want}");
        }
    }

    #[test]
    fn the_rate_never_leaves_floor_and_ceiling() {
        let mut l = ResponsiveRate::new(10_000_000);
        for k in 1..=300 {
            l.on_feedback(ms(10 * k), counts(100 * k, 100 * k));
            assert!(l.rate() >= l.floor());
        }
        assert_eq!(l.rate(), 100_000);
        // Marks stop: additive increase back to the ceiling, not above.
        for k in 301..=600 {
            l.on_feedback(ms(10 * k), counts(100 * k, 30_000));
            assert!(l.rate() <= 10_000_000);
        }
        assert_eq!(l.rate(), 10_000_000);
    }

    #[test]
    fn counts_going_backwards_or_empty_rounds_change_nothing() {
        let mut l = ResponsiveRate::new(10_000_000);
        l.on_feedback(ms(10), counts(100, 50));
        let before = l.clone();
        assert_eq!(l.on_feedback(ms(20), counts(90, 50)), None);
        assert_eq!(l.on_feedback(ms(30), counts(100, 40)), None);
        assert_eq!(l.rate(), before.rate());
        assert_eq!(l.alpha(), before.alpha());
        // An empty round moves the silence clock only.
        assert_eq!(l.on_feedback(ms(40), counts(100, 50)), None);
        assert_eq!(l.rate(), before.rate());
    }

    #[test]
    fn feedback_is_read_once_a_round() {
        let mut l = ResponsiveRate::new(10_000_000);
        // A sender polling every 100 µs reads its socket once per 10 ms round.
        let reads = (0..1000u64)
            .filter(|&k| l.read_due(Duration::from_micros(100 * k)))
            .count();
        assert_eq!(reads, 10);
        // A sender that slept past a round reads at once, then waits a round again.
        assert!(l.read_due(ms(250)));
        assert!(!l.read_due(ms(259)));
        assert!(l.read_due(ms(260)));
    }

    #[test]
    fn silence_drops_to_the_floor() {
        let mut l = ResponsiveRate::new(10_000_000);
        assert!(!l.on_silence(ms(99), ms(0)));
        assert!(l.on_silence(ms(100), ms(0)));
        assert_eq!(l.rate(), l.floor());
        l.on_feedback(ms(110), counts(10, 0));
        assert!(l.rate() > l.floor());
        assert!(!l.on_silence(ms(200), ms(0)));
        assert!(l.on_silence(ms(210), ms(0)));
    }
}
