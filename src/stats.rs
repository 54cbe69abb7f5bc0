//! Counting what arrived: UDP loss, reordering, duplicates, jitter, and interval deltas.
//!
//! Pure accounting fed by the engine's receive loops. Definitions match iperf3's where a
//! netmeter figure has an iperf3 counterpart (see `docs/metrics.md`): `lost` is the
//! number of sequence numbers skipped over, minus the late datagrams that later filled a
//! gap; `out_of_order` counts datagrams that arrived after a higher sequence number.
//! Unlike iperf3, a datagram seen twice is counted as a duplicate and does not "un-lose"
//! another one.

use serde::{Deserialize, Serialize};

mod calls;
pub mod ecn;
pub use calls::{READ_BINS, SocketCalls, lenient_calls, read_bin};
pub use ecn::{AccEcnCounters, AccEcnFigures, EcnCounts, EcnFigures, EcnMark};

/// RFC 3550 (§6.4.1, A.8) interarrival jitter, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Jitter {
    prev_transit_s: Option<f64>,
    /// Current smoothed jitter estimate.
    pub jitter_s: f64,
}

impl Jitter {
    /// Feed one datagram's transit time (receiver clock minus sender timestamp). The
    /// unknown offset between the two clocks cancels out in the differences.
    pub fn on_transit(&mut self, transit_s: f64) {
        if let Some(prev) = self.prev_transit_s {
            let d = (transit_s - prev).abs();
            self.jitter_s += (d - self.jitter_s) / 16.0;
        }
        self.prev_transit_s = Some(transit_s);
    }
}

/// Sequence numbers remembered for duplicate detection.
const DUP_WINDOW: u64 = 8192;

/// Cumulative receive-side UDP counters.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UdpCounts {
    /// Highest sequence number seen (iperf3's receiver `packets`).
    pub highest_seq: u64,
    /// Distinct datagrams received.
    pub received: u64,
    /// Lost datagrams, iperf3 definition (gaps minus late arrivals).
    pub lost: u64,
    /// Datagrams that arrived after a higher sequence number.
    pub out_of_order: u64,
    /// Datagrams whose sequence number had already been received.
    pub duplicates: u64,
    /// Jitter, seconds.
    pub jitter_s: f64,
    /// Datagrams per ECN codepoint, once the receive loop reads the TOS byte
    /// ([`UdpRecv::on_ecn`]); `None` where it does not.
    pub ecn: Option<EcnCounts>,
}

/// Receive-side accounting for one UDP stream.
#[derive(Debug, Clone)]
pub struct UdpRecv {
    counts: UdpCounts,
    jitter: Jitter,
    /// Bit i set: sequence number with `seq % DUP_WINDOW == i` received, for sequence
    /// numbers in `(highest_seq - DUP_WINDOW, highest_seq]`.
    seen: Vec<u64>,
}

impl Default for UdpRecv {
    fn default() -> Self {
        UdpRecv {
            counts: UdpCounts::default(),
            jitter: Jitter::default(),
            seen: vec![0; (DUP_WINDOW / 64) as usize],
        }
    }
}

impl UdpRecv {
    fn bit(&mut self, seq: u64) -> (&mut u64, u64) {
        let i = seq % DUP_WINDOW;
        (&mut self.seen[(i / 64) as usize], 1u64 << (i % 64))
    }

    /// Account one received datagram with sequence number `seq` (first = 1) and its
    /// transit time in seconds (for jitter).
    pub fn on_datagram(&mut self, seq: u64, transit_s: f64) {
        let c = &mut self.counts;
        if seq > c.highest_seq {
            let gap = seq - c.highest_seq - 1;
            c.lost += gap;
            // Forget the bits that slide out of the window.
            let old = c.highest_seq;
            c.highest_seq = seq;
            if seq - old >= DUP_WINDOW {
                self.seen.iter_mut().for_each(|w| *w = 0);
            } else {
                for s in old + 1..seq {
                    let (w, m) = self.bit(s);
                    *w &= !m;
                }
            }
            let (w, m) = self.bit(seq);
            *w |= m;
            self.counts.received += 1;
        } else {
            // seq <= highest_seq here; subtracting cannot overflow (64-bit sequence
            // numbers near u64::MAX come from peers).
            let in_window = c.highest_seq - seq < DUP_WINDOW && seq > 0;
            if in_window {
                let (w, m) = self.bit(seq);
                if *w & m != 0 {
                    self.counts.duplicates += 1;
                    return;
                }
                *w |= m;
            }
            let c = &mut self.counts;
            c.out_of_order += 1;
            c.received += 1;
            c.lost = c.lost.saturating_sub(1);
        }
        self.jitter.on_transit(transit_s);
        self.counts.jitter_s = self.jitter.jitter_s;
    }

    /// Count `datagrams` data datagrams that arrived in one message with TOS (traffic
    /// class) byte `tos`: under GRO a message's datagrams share its TOS ([`ecn`]).
    pub fn on_ecn(&mut self, tos: u8, datagrams: u64) {
        self.counts
            .ecn
            .get_or_insert_with(EcnCounts::default)
            .add(tos, datagrams);
    }

    /// The cumulative counters so far.
    pub fn counts(&self) -> UdpCounts {
        self.counts
    }
}

/// Process CPU time and wall time at one instant, for utilisation figures.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuSample {
    pub wall_s: f64,
    pub user_s: f64,
    pub system_s: f64,
}

/// CPU utilisation between two samples, as iperf3 reports it: percent of one core
/// (can exceed 100 with several threads). Returns (total, user, system).
pub fn cpu_percent(start: CpuSample, end: CpuSample) -> (f64, f64, f64) {
    let wall = end.wall_s - start.wall_s;
    if wall <= 0.0 {
        return (0.0, 0.0, 0.0);
    }
    let user = (end.user_s - start.user_s).max(0.0) / wall * 100.0;
    let sys = (end.system_s - start.system_s).max(0.0) / wall * 100.0;
    (user + sys, user, sys)
}

/// Bits per second for `bytes` over `seconds`, 0 for an empty interval.
pub fn bits_per_second(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    }
}

/// Loss percentage as iperf3 prints it: lost over expected.
pub fn lost_percent(lost: u64, packets: u64) -> f64 {
    if packets > 0 {
        100.0 * lost as f64 / packets as f64
    } else {
        0.0
    }
}

/// `--server-bitrate-limit RATE[/SECONDS]`: the server's judge of a test's total rate
/// (both directions, all streams), fed the cumulative byte count about once a second
/// with the test time it was read at.
///
/// iperf3 (`iperf_check_total_rate`) averages the last `SECONDS` one-second samples and
/// judges nothing before it has that many, so with its default of 5 s a 4 s test is
/// never judged. This judge decides from the first sample: the average over the time
/// since the oldest sample it keeps (the test's start until `SECONDS` have passed, then
/// the last `SECONDS`), measured on the samples' own times so a late check does not
/// count as a fast one. A paced sender at exactly the limit runs up to one block ahead
/// per stream (it sends whole blocks), so that much (`slack_bytes`) is allowed on top.
#[derive(Debug, Clone)]
pub struct BitrateLimit {
    limit_bps: u64,
    slack_bytes: u64,
    /// Samples kept: (test seconds, cumulative bytes), oldest first, the start included.
    samples: std::collections::VecDeque<(f64, u64)>,
    /// How many one-second samples a window spans.
    len: usize,
}

impl BitrateLimit {
    /// A judge for `limit_bps` averaged over `window_s` seconds (iperf3's default 5;
    /// below one second, one second, which is the sampling period), allowing
    /// `slack_bytes` above the limit.
    pub fn new(limit_bps: u64, window_s: f64, slack_bytes: u64) -> BitrateLimit {
        let len = window_s.round().max(1.0) as usize;
        let mut samples = std::collections::VecDeque::with_capacity(len + 1);
        samples.push_back((0.0, 0));
        BitrateLimit {
            limit_bps,
            slack_bytes,
            samples,
            len,
        }
    }

    /// Feed the cumulative byte count read at test time `now_s` (about one second after
    /// the previous sample). The average rate in bits/s when it is above the limit.
    ///
    /// A count that went down (the measured part starts after `-O`, and the counts start
    /// again from there) starts the judge again from this sample.
    pub fn on_sample(&mut self, now_s: f64, total_bytes: u64) -> Option<u64> {
        if self.samples.back().is_some_and(|&(_, b)| total_bytes < b) {
            self.samples.clear();
            self.samples.push_back((now_s, total_bytes));
            return None;
        }
        self.samples.push_back((now_s, total_bytes));
        while self.samples.len() > self.len + 1 {
            self.samples.pop_front();
        }
        let (t0, b0) = *self.samples.front()?;
        let span_s = now_s - t0;
        if !span_s.is_finite() || span_s <= 0.0 {
            return None;
        }
        let bytes = total_bytes.saturating_sub(b0);
        let allowed = self.limit_bps as f64 / 8.0 * span_s + self.slack_bytes as f64;
        (bytes as f64 > allowed).then(|| (bytes as f64 * 8.0 / span_s) as u64)
    }
}

/// UDP datagrams and the kernel messages that carried them, over a stream's whole life
/// (omit period included, both counted from the same moment).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct UdpIo {
    /// Datagrams of test data.
    pub datagrams: u64,
    /// Messages handed to the kernel (sender) or taken from it (receiver): one per
    /// `sendmmsg`/`recvmmsg` entry. With UDP GSO or GRO one message carries many
    /// datagrams, and on loopback or veth it crosses the interface as one packet (the
    /// interface's packet counter counts it once); a physical NIC sends each datagram as
    /// a packet of its own.
    pub messages: u64,
}

impl UdpIo {
    /// Both counts added.
    pub fn plus(self, o: UdpIo) -> UdpIo {
        UdpIo {
            datagrams: self.datagrams + o.datagrams,
            messages: self.messages + o.messages,
        }
    }

    /// Datagrams per message, when there were messages.
    pub fn per_message(&self) -> Option<f64> {
        (self.messages > 0).then(|| self.datagrams as f64 / self.messages as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_per_message() {
        let a = UdpIo {
            datagrams: 640,
            messages: 10,
        };
        assert_eq!(a.per_message(), Some(64.0));
        assert_eq!(UdpIo::default().per_message(), None);
        let b = a.plus(UdpIo {
            datagrams: 5,
            messages: 5,
        });
        assert_eq!((b.datagrams, b.messages), (645, 15));
    }
    use proptest::prelude::*;

    fn feed(seqs: &[u64]) -> UdpCounts {
        let mut r = UdpRecv::default();
        for &s in seqs {
            r.on_datagram(s, 0.0);
        }
        r.counts()
    }

    #[test]
    fn sequence_numbers_near_the_top_of_64_bits() {
        // A 64-bit sequence number near u64::MAX from a peer, then an older one: the
        // window check overflowed (fuzz target udp_datagram).
        let mut r = UdpRecv::default();
        r.on_datagram(u64::MAX - 1, 0.001);
        r.on_datagram(u64::MAX - 3, 0.001);
        r.on_datagram(u64::MAX - 3, 0.001);
        r.on_datagram(u64::MAX, 0.001);
        let c = r.counts();
        assert_eq!(c.highest_seq, u64::MAX);
        assert_eq!((c.received, c.out_of_order, c.duplicates), (3, 1, 1));
        assert_eq!(c.lost, u64::MAX - 3);
    }

    #[test]
    fn in_order_no_loss() {
        let c = feed(&[1, 2, 3, 4]);
        assert_eq!(
            (c.highest_seq, c.received, c.lost, c.out_of_order),
            (4, 4, 0, 0)
        );
    }

    #[test]
    fn gap_is_loss() {
        let c = feed(&[1, 2, 5, 6]);
        assert_eq!((c.lost, c.out_of_order), (2, 0));
    }

    #[test]
    fn late_arrival_fills_gap() {
        let c = feed(&[1, 3, 2, 4]);
        assert_eq!((c.lost, c.out_of_order, c.received), (0, 1, 4));
    }

    #[test]
    fn duplicate_does_not_unlose() {
        // iperf3 would count the second 3 as out-of-order and cancel the loss of 2.
        let c = feed(&[1, 3, 3, 4]);
        assert_eq!((c.lost, c.out_of_order, c.duplicates), (1, 0, 1));
        let c = feed(&[1, 2, 2]);
        assert_eq!((c.lost, c.out_of_order, c.duplicates), (0, 0, 1));
    }

    #[test]
    fn duplicate_window_slides() {
        let mut seqs: Vec<u64> = (1..=20_000).collect();
        seqs.push(19_999); // recent: duplicate
        seqs.push(5); // far outside the window: treated as late, not duplicate
        let c = feed(&seqs);
        assert_eq!(c.duplicates, 1);
        assert_eq!(c.out_of_order, 1);
    }

    #[test]
    fn jitter_constant_spacing_is_zero_and_follows_rfc3550() {
        let mut j = Jitter::default();
        for _ in 0..10 {
            j.on_transit(0.010);
        }
        assert_eq!(j.jitter_s, 0.0);
        let mut j = Jitter::default();
        j.on_transit(0.010);
        j.on_transit(0.026);
        assert!((j.jitter_s - 0.001).abs() < 1e-12);
    }

    #[test]
    fn cpu_and_rates() {
        let a = CpuSample {
            wall_s: 1.0,
            user_s: 0.1,
            system_s: 0.2,
        };
        let b = CpuSample {
            wall_s: 3.0,
            user_s: 0.5,
            system_s: 1.2,
        };
        let (t, u, s) = cpu_percent(a, b);
        assert!((u - 20.0).abs() < 1e-9 && (s - 50.0).abs() < 1e-9 && (t - 70.0).abs() < 1e-9);
        assert_eq!(bits_per_second(125, 1.0), 1000.0);
        assert_eq!(lost_percent(1, 50), 2.0);
        assert_eq!(lost_percent(0, 0), 0.0);
    }

    proptest! {
        /// For any arrival order of a set of distinct sequence numbers, received + lost
        /// equals the highest sequence number, and nothing is a duplicate.
        #[test]
        fn conservation(mut seqs in proptest::collection::vec(1u64..2000, 1..500), seed: u64) {
            seqs.sort_unstable();
            seqs.dedup();
            // Deterministic shuffle of nearby elements (bounded reordering).
            let mut x = seed | 1;
            for i in 0..seqs.len() {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                let j = (i + (x % 4) as usize).min(seqs.len() - 1);
                seqs.swap(i, j);
            }
            let c = feed(&seqs);
            prop_assert_eq!(c.duplicates, 0);
            prop_assert_eq!(c.received + c.lost, c.highest_seq);
            prop_assert_eq!(c.received, seqs.len() as u64);
        }
    }

    #[test]
    fn bitrate_limit_judges_from_the_first_second() {
        // 1 Mbit/s is 125 000 bytes a second.
        let mut l = BitrateLimit::new(1_000_000, 5.0, 0);
        assert_eq!(l.on_sample(1.0, 125_000), None, "exactly the limit");
        let mut l = BitrateLimit::new(1_000_000, 5.0, 0);
        // 40 Mbit/s is ended at the first sample, not once a 5 s window is full.
        assert_eq!(l.on_sample(1.0, 5_000_000), Some(40_000_000));
        // A late check is judged on its own time: 1.1 s at the limit passes.
        let mut l = BitrateLimit::new(1_000_000, 5.0, 0);
        assert_eq!(l.on_sample(1.1, 137_500), None);
        // One block per stream of slack: a paced sender one 128 KiB block ahead passes.
        let mut l = BitrateLimit::new(1_000_000, 5.0, 128 * 1024);
        assert_eq!(l.on_sample(1.0, 128 * 1024 + 125_000), None);
        assert!(l.on_sample(2.0, 128 * 1024 + 250_001 + 1).is_some());
    }

    #[test]
    fn bitrate_limit_averages_over_its_window_once_full() {
        // A steady 1 Mbit/s passes a 2 Mbit/s limit over 3 s; a one-second burst of
        // 3 Mbit/s is averaged away, a second one is not.
        let mut l = BitrateLimit::new(2_000_000, 3.0, 0);
        let mut total = 0;
        for s in 1..=10 {
            total += 125_000;
            assert_eq!(l.on_sample(s as f64, total), None);
        }
        total += 375_000;
        assert_eq!(l.on_sample(11.0, total), None);
        total += 375_000;
        assert_eq!(l.on_sample(12.0, total), Some(2_333_333));
        // An idle start does not buy a burst later: only the last 3 s count.
        let mut l = BitrateLimit::new(1_000_000, 3.0, 0);
        for s in 1..=10 {
            assert_eq!(l.on_sample(s as f64, 0), None);
        }
        assert_eq!(l.on_sample(11.0, 500_000), Some(1_333_333));
        // The counts start again after -O: judged from there, not from the old base.
        let mut l = BitrateLimit::new(1_000_000, 5.0, 0);
        assert_eq!(l.on_sample(1.0, 100_000), None);
        assert_eq!(l.on_sample(2.0, 10_000), None, "the omit period ended");
        assert_eq!(l.on_sample(3.0, 130_000), None);
        assert_eq!(l.on_sample(4.0, 400_000), Some(1_560_000));
        // Below one second, the window is one sample.
        let mut l = BitrateLimit::new(8, 0.2, 0);
        assert_eq!(l.on_sample(1.0, 2), Some(16));
        assert_eq!(l.on_sample(2.0, 3), None);
    }
}
