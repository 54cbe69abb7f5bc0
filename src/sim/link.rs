//! One one-way link: what it does to each packet, decided with the link's own seeded
//! random source. Pure: the caller says when a packet arrives, the link says when (and
//! whether, and how often, and how marked) it leaves the far end.
//!
//! The order a packet meets the link's parts, as Linux's netem and a shaper would have it:
//! random loss (Bernoulli or Gilbert-Elliott) first, so a lost packet takes no room; then
//! the rate limiter's queue (tail drop when its bytes would pass the limit); then, on the
//! way out, ECN marking, the base delay plus jitter, the reordering delay, and duplication
//! (the copy is jittered on its own).

use std::collections::VecDeque;
use std::time::Duration;

use super::rng::Rng;

/// The delay added to the base delay, drawn per packet. The total delay is never below 0.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Jitter {
    /// Every packet takes the base delay.
    #[default]
    None,
    /// Uniform in [-spread, +spread].
    Uniform { spread: Duration },
    /// Normal with mean 0 and standard deviation `sd`.
    Normal { sd: Duration },
}

/// Random loss.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Loss {
    /// Nothing is lost at random.
    #[default]
    None,
    /// Each packet is lost with probability `p`, independently.
    Bernoulli { p: f64 },
    /// The Gilbert-Elliott two-state model: before each packet the state moves good → bad
    /// with probability `p` and bad → good with `r`; the packet is then lost with
    /// probability `loss_good` or `loss_bad` in the state it is in. Starts good.
    GilbertElliott {
        p: f64,
        r: f64,
        loss_good: f64,
        loss_bad: f64,
    },
}

/// When an ECN-capable packet is marked Congestion Experienced.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum EcnMark {
    /// Never.
    #[default]
    Never,
    /// With probability `p`.
    Prob { p: f64 },
    /// When the queue it joined already held more than `bytes`.
    QueueAbove { bytes: u64 },
}

/// A packet's ECN field (RFC 3168).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum Ecn {
    /// Not ECN-capable: never marked.
    #[default]
    NotEct,
    /// ECN-capable.
    Ect,
    /// Congestion Experienced.
    Ce,
}

/// What a link does. The default is a perfect link: no rate limit, no delay, no loss.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LinkConfig {
    /// The rate limit, bits per second (0: none).
    pub rate_bps: u64,
    /// The token bucket's depth, bytes: what may leave back to back at line speed
    /// (0: one packet).
    pub burst_bytes: u64,
    /// The most bytes waiting for tokens; a packet that would pass it is tail-dropped
    /// (0: no limit).
    pub queue_limit_bytes: u64,
    /// The propagation delay every packet takes.
    pub delay: Duration,
    /// Per-packet variation on `delay`.
    pub jitter: Jitter,
    /// Random loss.
    pub loss: Loss,
    /// The probability a packet is held back by `reorder_delay` more (so later ones pass it).
    pub reorder_p: f64,
    /// How long a reordered packet is held back.
    pub reorder_delay: Duration,
    /// The probability a packet is delivered twice.
    pub duplicate_p: f64,
    /// ECN marking of ECT packets.
    pub ecn: EcnMark,
}

/// What the link did with one packet.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum Fate {
    /// Lost by the random-loss model.
    Lost,
    /// Tail-dropped: the queue was full.
    QueueDropped,
    /// Delivered: once, or twice when duplicated (the copy second).
    Delivered(Vec<Delivery>),
}

/// One copy of a packet arriving at the far end.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Delivery {
    /// When it arrives, virtual time since the start.
    pub at: Duration,
    /// When it left the rate limiter's queue.
    pub dequeued: Duration,
    /// Its ECN field on arrival.
    pub ecn: Ecn,
    /// Held back by the reordering delay.
    pub held_back: bool,
    /// The extra copy of a duplicated packet.
    pub duplicate: bool,
}

/// A link's state between packets.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    cfg: LinkConfig,
    rng: Rng,
    ge_bad: bool,
    /// Tokens, in bytes × 8 × 10⁹ (bits × ns per s), so refills are exact integers.
    tokens: u128,
    tokens_at_ns: u64,
    /// (leaves the queue at, bytes) for packets waiting, oldest first.
    queue: VecDeque<(u64, u64)>,
    queue_bytes: u64,
    /// When the last packet left the queue: the next cannot leave before it (FIFO).
    last_out_ns: u64,
}

const SCALE: u128 = 8_000_000_000;

impl Link {
    pub(crate) fn new(cfg: LinkConfig, rng: Rng) -> Link {
        Link {
            cfg,
            rng,
            ge_bad: false,
            tokens: 0,
            tokens_at_ns: 0,
            queue: VecDeque::new(),
            queue_bytes: 0,
            last_out_ns: 0,
        }
    }

    fn depth(&self, bytes: u64) -> u128 {
        self.cfg.burst_bytes.max(bytes) as u128 * SCALE
    }

    fn lost(&mut self) -> bool {
        match self.cfg.loss {
            Loss::None => {
                // Keep the number of draws per packet the same whatever the model.
                self.rng.unit();
                false
            }
            Loss::Bernoulli { p } => self.rng.chance(p),
            Loss::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                let flip = self.rng.chance(if self.ge_bad { r } else { p });
                if flip {
                    self.ge_bad = !self.ge_bad;
                }
                self.rng
                    .chance(if self.ge_bad { loss_bad } else { loss_good })
            }
        }
    }

    /// When a packet of `bytes` that arrives at `now_ns` leaves the rate limiter, or
    /// `None` when the queue has no room; the bytes queued ahead of it alongside.
    fn enqueue(&mut self, now_ns: u64, bytes: u64) -> Option<(u64, u64)> {
        while self.queue.front().is_some_and(|&(out, _)| out <= now_ns) {
            let (_, b) = self.queue.pop_front().unwrap_or_default();
            self.queue_bytes -= b;
        }
        let ahead = self.queue_bytes;
        if self.cfg.rate_bps == 0 {
            return Some((now_ns, ahead));
        }
        let rate = self.cfg.rate_bps as u128;
        // Tokens at the earliest the packet could leave (not before the one ahead).
        let start = now_ns.max(self.last_out_ns);
        let mut tokens =
            (self.tokens + rate * (start - self.tokens_at_ns) as u128).min(self.depth(bytes));
        let need = bytes as u128 * SCALE;
        let out = if tokens >= need {
            start
        } else {
            let wait = (need - tokens).div_ceil(rate);
            tokens += wait * rate;
            start + wait as u64
        };
        if out > now_ns {
            let limit = self.cfg.queue_limit_bytes;
            if limit > 0 && ahead + bytes > limit {
                return None;
            }
            self.queue.push_back((out, bytes));
            self.queue_bytes += bytes;
        }
        self.tokens = tokens - need;
        self.tokens_at_ns = out;
        self.last_out_ns = out;
        Some((out, ahead))
    }

    fn delay_ns(&mut self) -> u64 {
        let base = self.cfg.delay.as_nanos() as i128;
        let extra = match self.cfg.jitter {
            Jitter::None => 0,
            Jitter::Uniform { spread } => {
                let s = spread.as_nanos() as f64;
                ((self.rng.unit() * 2.0 - 1.0) * s) as i128
            }
            Jitter::Normal { sd } => (self.rng.normal() * sd.as_nanos() as f64) as i128,
        };
        (base + extra).max(0) as u64
    }

    fn copy(&mut self, out_ns: u64, ecn: Ecn, duplicate: bool) -> Delivery {
        let held_back = self.rng.chance(self.cfg.reorder_p);
        let mut at = out_ns + self.delay_ns();
        if held_back {
            at += self.cfg.reorder_delay.as_nanos() as u64;
        }
        Delivery {
            at: Duration::from_nanos(at),
            dequeued: Duration::from_nanos(out_ns),
            ecn,
            held_back,
            duplicate,
        }
    }

    /// What happens to a packet of `bytes` with ECN field `ecn` that enters at `now_ns`.
    pub(crate) fn offer(&mut self, now_ns: u64, bytes: u64, ecn: Ecn) -> Fate {
        if self.lost() {
            return Fate::Lost;
        }
        let Some((out_ns, ahead)) = self.enqueue(now_ns, bytes) else {
            return Fate::QueueDropped;
        };
        let mark = match self.cfg.ecn {
            EcnMark::Never => false,
            EcnMark::Prob { p } => self.rng.chance(p),
            EcnMark::QueueAbove { bytes } => ahead > bytes,
        };
        let ecn = if mark && ecn == Ecn::Ect {
            Ecn::Ce
        } else {
            ecn
        };
        let first = self.copy(out_ns, ecn, false);
        let mut copies = vec![first];
        if self.rng.chance(self.cfg.duplicate_p) {
            copies.push(self.copy(out_ns, ecn, true));
        }
        Fate::Delivered(copies)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn rate_limit_spaces_packets_by_their_serialisation_time() {
        // 8 Mbit/s: 1000 bytes take 1 ms.
        let cfg = LinkConfig {
            rate_bps: 8_000_000,
            delay: ms(10),
            ..LinkConfig::default()
        };
        let mut l = Link::new(cfg, Rng::new(1));
        let mut outs = Vec::new();
        for _ in 0..5 {
            match l.offer(0, 1000, Ecn::NotEct) {
                Fate::Delivered(d) => outs.push(d[0].at),
                f => panic!("{f:?}"),
            }
        }
        // The bucket starts empty: the first waits 1 ms for its tokens.
        assert_eq!(outs, vec![ms(11), ms(12), ms(13), ms(14), ms(15)]);
    }

    #[test]
    fn burst_leaves_at_once_after_idle_and_queue_limit_tail_drops() {
        let cfg = LinkConfig {
            rate_bps: 8_000_000,
            burst_bytes: 3000,
            queue_limit_bytes: 2000,
            ..LinkConfig::default()
        };
        let mut l = Link::new(cfg, Rng::new(1));
        // After 1 s idle the bucket is full: three leave at once, two queue, the rest drop.
        let now = 1_000_000_000;
        let fates: Vec<Fate> = (0..7).map(|_| l.offer(now, 1000, Ecn::NotEct)).collect();
        let at = |f: &Fate| match f {
            Fate::Delivered(d) => Some(d[0].at.as_nanos() as u64 - now),
            _ => None,
        };
        let got: Vec<Option<u64>> = fates.iter().map(at).collect();
        assert_eq!(
            got,
            vec![
                Some(0),
                Some(0),
                Some(0),
                Some(1_000_000),
                Some(2_000_000),
                None,
                None
            ]
        );
        assert_eq!(fates[5], Fate::QueueDropped);
        // Once the queue has drained a packet fits again.
        assert!(matches!(
            l.offer(now + 1_000_000, 1000, Ecn::NotEct),
            Fate::Delivered(_)
        ));
    }

    #[test]
    fn ecn_marks_only_ect_packets_above_the_queue_depth() {
        let cfg = LinkConfig {
            rate_bps: 8_000_000,
            ecn: EcnMark::QueueAbove { bytes: 1500 },
            ..LinkConfig::default()
        };
        let mut l = Link::new(cfg, Rng::new(3));
        let ecns: Vec<Ecn> = (0..4)
            .map(|i| {
                let e = if i == 3 { Ecn::NotEct } else { Ecn::Ect };
                match l.offer(0, 1000, e) {
                    Fate::Delivered(d) => d[0].ecn,
                    f => panic!("{f:?}"),
                }
            })
            .collect();
        assert_eq!(ecns, vec![Ecn::Ect, Ecn::Ect, Ecn::Ce, Ecn::NotEct]);
    }

    #[test]
    fn gilbert_elliott_losses_come_in_bursts() {
        let cfg = LinkConfig {
            loss: Loss::GilbertElliott {
                p: 0.01,
                r: 0.25,
                loss_good: 0.0,
                loss_bad: 1.0,
            },
            ..LinkConfig::default()
        };
        let mut l = Link::new(cfg, Rng::new(9));
        let lost: Vec<bool> = (0..100_000)
            .map(|_| l.offer(0, 100, Ecn::NotEct) == Fate::Lost)
            .collect();
        let n = lost.iter().filter(|&&x| x).count() as f64;
        // Stationary bad share p / (p + r) = 3.8 %; mean burst 1 / r = 4 packets.
        assert!((n / 100_000.0 - 0.0385).abs() < 0.005, "{n}");
        let bursts = lost.windows(2).filter(|w| w[1] && !w[0]).count() as f64;
        assert!((n / bursts - 4.0).abs() < 0.4, "{}", n / bursts);
    }

    #[test]
    fn jitter_stays_in_its_range_and_never_goes_negative() {
        let cfg = LinkConfig {
            delay: ms(1),
            jitter: Jitter::Uniform { spread: ms(2) },
            ..LinkConfig::default()
        };
        let mut l = Link::new(cfg, Rng::new(5));
        for _ in 0..1000 {
            let Fate::Delivered(d) = l.offer(0, 10, Ecn::NotEct) else {
                panic!()
            };
            assert!(d[0].at <= ms(3));
        }
    }
}
