//! Estimating the offset between two hosts' wall clocks, NTP style, with no I/O.
//!
//! The client stamps `t1` when it sends a probe on the control connection; the server
//! stamps `t2` when it reads it and `t3` when it answers; the client stamps `t4` when
//! the answer arrives. For each round (RFC 5905 §8):
//! `offset = ((t2 − t1) + (t3 − t4)) / 2` (server clock minus client clock) and
//! `delay = (t4 − t1) − (t3 − t2)` (the round trip spent on the network).
//! The round with the smallest delay is the least disturbed by queueing; its offset is
//! wrong by at most half its delay (if the two directions were as unequal as possible),
//! which is the uncertainty reported.

use serde::{Deserialize, Serialize};

/// One probe's four timestamps, nanoseconds since the Unix epoch on each host's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pub t1: i64,
    pub t2: i64,
    pub t3: i64,
    pub t4: i64,
}

/// The estimate of `server clock − client clock`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct ClockEstimate {
    pub offset_ns: i64,
    /// Half the round trip of the best probe: the offset is within ± this.
    pub uncertainty_ns: i64,
    /// The best probe's round trip on the control connection.
    pub rtt_ns: i64,
    pub probes: u32,
}

impl Probe {
    /// A round from the server's 24-byte answer to the probe sent at `t1` (the echoed
    /// `t1`, then `t2` and `t3`, big-endian), the answer read at `t4`. `None` when the
    /// answer does not echo `t1`: the peer is confused, and that round is dropped.
    pub fn from_answer(t1: i64, answer: &[u8; 24], t4: i64) -> Option<Probe> {
        let at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&answer[i..i + 8]);
            i64::from_be_bytes(b)
        };
        (at(0) == t1).then(|| Probe {
            t1,
            t2: at(8),
            t3: at(16),
            t4,
        })
    }
}

impl ClockEstimate {
    /// The 16 bytes the client sends after its probes: offset, then uncertainty (ns,
    /// big-endian i64).
    pub fn to_wire(&self) -> [u8; 16] {
        let mut m = [0u8; 16];
        m[..8].copy_from_slice(&self.offset_ns.to_be_bytes());
        m[8..].copy_from_slice(&self.uncertainty_ns.to_be_bytes());
        m
    }

    /// The server's reading of [`Self::to_wire`] after `probes` rounds. The offset is
    /// kept within `±i64::MAX` (so either side can negate it) and the uncertainty at
    /// or above zero, whatever the client sent.
    pub fn from_wire(m: &[u8; 16], probes: u32) -> ClockEstimate {
        let (mut off, mut unc) = ([0u8; 8], [0u8; 8]);
        off.copy_from_slice(&m[..8]);
        unc.copy_from_slice(&m[8..]);
        let unc = i64::from_be_bytes(unc).max(0);
        ClockEstimate {
            offset_ns: i64::from_be_bytes(off).max(-i64::MAX),
            uncertainty_ns: unc,
            rtt_ns: unc.saturating_mul(2),
            probes,
        }
    }
}

/// The estimate from a set of probes, `None` if there are none.
pub fn estimate(probes: &[Probe]) -> Option<ClockEstimate> {
    let best = probes
        .iter()
        .map(|p| {
            let delay = (p.t4 as i128 - p.t1 as i128) - (p.t3 as i128 - p.t2 as i128);
            (delay.clamp(0, i64::MAX as i128) as i64, p)
        })
        .min_by_key(|(d, _)| *d)?;
    let (delay, p) = best;
    // i128 so that far-off clocks (or hostile values) cannot overflow the sums.
    let offset = ((p.t2 as i128 - p.t1 as i128) + (p.t3 as i128 - p.t4 as i128)) / 2;
    Some(ClockEstimate {
        offset_ns: offset.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
        uncertainty_ns: delay / 2,
        rtt_ns: delay,
        probes: probes.len() as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetric_path_recovers_the_offset_exactly() {
        // Server 50 ms ahead, 10 ms each way, 1 ms server processing.
        let off = 50_000_000;
        let p = Probe {
            t1: 1_000_000_000,
            t2: 1_000_000_000 + 10_000_000 + off,
            t3: 1_000_000_000 + 11_000_000 + off,
            t4: 1_000_000_000 + 21_000_000,
        };
        let e = estimate(&[p]).unwrap();
        assert_eq!(e.offset_ns, off);
        assert_eq!(e.rtt_ns, 20_000_000);
        assert_eq!(e.uncertainty_ns, 10_000_000);
    }

    #[test]
    fn probe_answers_must_echo_t1() {
        let mut a = [0u8; 24];
        a[..8].copy_from_slice(&100i64.to_be_bytes());
        a[8..16].copy_from_slice(&150i64.to_be_bytes());
        a[16..].copy_from_slice(&160i64.to_be_bytes());
        let p = Probe::from_answer(100, &a, 210).unwrap();
        assert_eq!((p.t1, p.t2, p.t3, p.t4), (100, 150, 160, 210));
        assert_eq!(Probe::from_answer(101, &a, 210), None);
    }

    #[test]
    fn estimate_message_round_trips_and_can_be_negated() {
        let e = ClockEstimate {
            offset_ns: -5_000,
            uncertainty_ns: 700,
            rtt_ns: 1_400,
            probes: 8,
        };
        assert_eq!(ClockEstimate::from_wire(&e.to_wire(), 8), e);
        // A client's offset of i64::MIN made the server's correction (`-offset_ns`)
        // overflow (fuzz target `ext`); a negative uncertainty reads as zero.
        let mut m = [0u8; 16];
        m[..8].copy_from_slice(&i64::MIN.to_be_bytes());
        m[8..].copy_from_slice(&(-1i64).to_be_bytes());
        let e = ClockEstimate::from_wire(&m, 8);
        assert_eq!(e.offset_ns, -i64::MAX);
        assert_eq!(-e.offset_ns, i64::MAX);
        assert_eq!((e.uncertainty_ns, e.rtt_ns), (0, 0));
    }

    #[test]
    fn least_delayed_probe_wins() {
        let fast = Probe {
            t1: 0,
            t2: 1_000,
            t3: 1_000,
            t4: 2_000,
        };
        // A queued probe: 9 µs extra on the way back skews its offset by 4.5 µs.
        let slow = Probe {
            t1: 0,
            t2: 1_000,
            t3: 1_000,
            t4: 11_000,
        };
        let e = estimate(&[slow, fast, slow]).unwrap();
        assert_eq!(e.offset_ns, 0);
        assert_eq!(e.rtt_ns, 2_000);
        assert!(estimate(&[]).is_none());
    }

    #[test]
    fn absurd_timestamps_do_not_overflow() {
        let p = Probe {
            t1: i64::MIN,
            t2: i64::MAX,
            t3: i64::MAX,
            t4: i64::MIN,
        };
        let e = estimate(&[p]).unwrap();
        assert_eq!(e.offset_ns, i64::MAX);
    }
}
