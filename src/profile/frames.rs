//! Receiver-side frame accounting for isochronous UDP between netmeter peers: whole
//! frames completed, frames lost, frame jitter and latency from the frame headers, with
//! a bounded window so a peer's headers cannot make the receiver allocate without limit.

use super::{FRAME_WINDOW, MAX_TRACKED_DGRAMS};
use crate::wire::IsochHeader;

#[derive(Debug, Clone)]
struct Pending {
    id: u64,
    start_ns: i64,
    /// 0 until a datagram of the frame has arrived (a placeholder for a skipped id).
    dgrams: u32,
    got: u32,
    seen: Vec<u64>,
}

/// Cumulative frame counts of a receiving stream.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FrameCounts {
    /// Highest frame id seen (frames are numbered 1, 2, … by the sender).
    pub highest: u64,
    /// Frames whose every datagram arrived.
    pub complete: u64,
    /// Frames given up on: still missing a datagram (or all of them) once a frame
    /// [`FRAME_WINDOW`] ids newer has arrived.
    pub lost: u64,
    /// RFC 3550-style jitter of the frame transit times, seconds (running value).
    pub jitter_s: f64,
}

/// Follows the frames of one stream as its datagrams arrive, in any order.
#[derive(Debug, Clone, Default)]
pub struct FrameRecv {
    pending: Vec<Pending>,
    highest: u64,
    complete: u64,
    jitter_s: f64,
    last_transit_ns: Option<i64>,
}

impl FrameRecv {
    /// One datagram's frame header, received at `rx_ns` (receiver wall clock). Returns
    /// the frame's transit time (`rx_ns − start_ns`, raw: clock offset included) when
    /// this datagram completed its frame.
    pub fn on_datagram(&mut self, h: &IsochHeader, rx_ns: i64) -> Option<i64> {
        if h.frame_id == 0 || h.dgrams == 0 || h.index >= h.dgrams {
            return None;
        }
        if h.frame_id > self.highest {
            // Ids skipped over may still arrive (reordering): keep placeholders for the
            // newest ones. Frames more than the window behind the newest are given up.
            let first = (self.highest + 1).max(h.frame_id.saturating_sub(FRAME_WINDOW as u64 - 1));
            for id in first..=h.frame_id {
                self.pending.push(Pending {
                    id,
                    start_ns: 0,
                    dgrams: 0,
                    got: 0,
                    seen: Vec::new(),
                });
            }
            self.highest = h.frame_id;
            let oldest_kept = self.highest.saturating_sub(FRAME_WINDOW as u64 - 1);
            self.pending.retain(|p| p.id >= oldest_kept);
        }
        // Frames at or below `highest` that are not pending are decided: ignore.
        let i = self.pending.iter().position(|p| p.id == h.frame_id)?;
        let p = &mut self.pending[i];
        if p.dgrams == 0 {
            p.dgrams = h.dgrams;
            p.start_ns = h.start_ns;
            if h.dgrams <= MAX_TRACKED_DGRAMS {
                p.seen = vec![0u64; (h.dgrams as usize).div_ceil(64)];
            }
        }
        if h.dgrams != p.dgrams {
            return None; // inconsistent headers: not ours to judge
        }
        let (w, b) = ((h.index / 64) as usize, h.index % 64);
        if let Some(word) = p.seen.get_mut(w) {
            if *word & (1 << b) != 0 {
                return None; // duplicate
            }
            *word |= 1 << b;
        }
        p.got += 1;
        if p.got < p.dgrams {
            return None;
        }
        // start_ns is the peer's header (any i64): saturate rather than overflow.
        let transit = rx_ns.saturating_sub(p.start_ns);
        self.pending.swap_remove(i);
        self.complete += 1;
        if let Some(prev) = self.last_transit_ns {
            let d = (i128::from(transit) - i128::from(prev)).unsigned_abs() as f64 / 1e9;
            self.jitter_s += (d - self.jitter_s) / 16.0;
        }
        self.last_transit_ns = Some(transit);
        Some(transit)
    }

    /// Counts so far; frames still open are neither complete nor lost.
    pub fn counts(&self) -> FrameCounts {
        FrameCounts {
            highest: self.highest,
            complete: self.complete,
            lost: self.highest - self.complete - self.pending.len() as u64,
            jitter_s: self.jitter_s,
        }
    }

    /// Counts at the end of the test: open frames are lost, except the newest one,
    /// which the sender may have been cut off in the middle of (not counted either way).
    pub fn final_counts(&self) -> FrameCounts {
        let newest_open = self.pending.iter().any(|p| p.id == self.highest) as u64;
        FrameCounts {
            lost: self.highest - self.complete - newest_open,
            ..self.counts()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(frame_id: u64, index: u32, dgrams: u32, start_ns: i64) -> IsochHeader {
        IsochHeader {
            frame_id,
            start_ns,
            dgrams,
            index,
        }
    }

    #[test]
    fn send_times_anywhere_in_i64_do_not_overflow() {
        // Frame send times from the peer's header far in the past, then far in the
        // future: the transit and its change overflowed (fuzz target udp_datagram).
        let mut r = FrameRecv::default();
        let rx = 1_790_000_000_000_000_000i64;
        assert_eq!(r.on_datagram(&hdr(1, 0, 1, i64::MIN), rx), Some(i64::MAX));
        assert_eq!(
            r.on_datagram(&hdr(2, 0, 1, i64::MAX), rx),
            Some(rx - i64::MAX)
        );
        let c = r.counts();
        assert_eq!((c.complete, c.lost), (2, 0));
        assert!(c.jitter_s.is_finite() && c.jitter_s > 0.0);
    }

    #[test]
    fn frames_complete_lost_and_reordered() {
        let mut f = FrameRecv::default();
        // Frame 1: three datagrams, the last arrives at 1 500 ns.
        assert_eq!(f.on_datagram(&hdr(1, 0, 3, 1000), 1100), None);
        assert_eq!(f.on_datagram(&hdr(1, 2, 3, 1000), 1200), None);
        assert_eq!(f.on_datagram(&hdr(1, 2, 3, 1000), 1300), None, "duplicate");
        assert_eq!(f.on_datagram(&hdr(1, 1, 3, 1000), 1500), Some(500));
        // Frame 3 before frame 2 (reordering), then frame 2 completes.
        assert_eq!(f.on_datagram(&hdr(3, 0, 1, 3000), 3100), Some(100));
        assert_eq!(f.on_datagram(&hdr(2, 0, 1, 2000), 3200), Some(1200));
        let c = f.counts();
        assert_eq!((c.highest, c.complete, c.lost), (3, 3, 0));
        // Frame 4 misses a datagram; frames 5..=13 arrive: 4 falls out of the window.
        f.on_datagram(&hdr(4, 0, 2, 4000), 4100);
        for id in 5..=13 {
            f.on_datagram(&hdr(id, 0, 1, id as i64 * 1000), id as i64 * 1000 + 100);
        }
        let c = f.counts();
        assert_eq!((c.complete, c.lost), (12, 1));
        // A late datagram of the decided frame 4 changes nothing.
        assert_eq!(f.on_datagram(&hdr(4, 1, 2, 4000), 20_000), None);
        // Frames 14..=15 never arrive at all; 16 is cut off by the end of the test.
        f.on_datagram(&hdr(16, 0, 5, 16_000), 16_100);
        assert_eq!(f.counts().lost, 1, "14 and 15 may still come");
        let end = f.final_counts();
        assert_eq!((end.highest, end.complete, end.lost), (16, 12, 3));
        assert!(f.counts().jitter_s > 0.0);
    }

    #[test]
    fn frame_jitter_of_constant_transit_is_zero() {
        let mut f = FrameRecv::default();
        for id in 1..=100u64 {
            let t = id as i64 * 1_000_000;
            f.on_datagram(&hdr(id, 0, 2, t), t + 300);
            f.on_datagram(&hdr(id, 1, 2, t), t + 500);
        }
        let c = f.final_counts();
        assert_eq!((c.complete, c.lost), (100, 0));
        assert_eq!(c.jitter_s, 0.0);
    }

    #[test]
    fn hostile_headers_are_ignored() {
        let mut f = FrameRecv::default();
        for h in [hdr(0, 0, 1, 0), hdr(1, 0, 0, 0), hdr(1, 5, 5, 0)] {
            assert_eq!(f.on_datagram(&h, 1), None);
        }
        assert_eq!(f.counts(), FrameCounts::default());
        // A frame too large for a bitmap is still counted (by datagrams).
        f.on_datagram(&hdr(1, 0, u32::MAX, 0), 1);
        assert!(f.pending[0].seen.is_empty());
        let mut g = FrameRecv::default();
        let big = MAX_TRACKED_DGRAMS + 1;
        for i in 0..big {
            g.on_datagram(&hdr(1, i, big, 0), 1);
        }
        assert_eq!(g.counts().complete, 1);
        // A huge jump in frame ids allocates at most the window.
        f.on_datagram(&hdr(u64::MAX, 0, 2, 0), 1);
        assert!(f.pending.len() <= FRAME_WINDOW);
        assert_eq!(f.counts().lost, u64::MAX - FRAME_WINDOW as u64);
    }
}
