//! The bulk TCP sender's decisions: how long the next block is, whether `-b` says
//! wait, when `-t`, `-n` or `-k` ends the stream, and which blocks carry a
//! `--trip-times` frame header.
//!
//! The driver writes what [`TcpSender::poll`] asks for (a block, or the rest of one a
//! short write left) and reports each write with [`TcpSender::on_written`]. A block is
//! always finished before the next decision, as the engine's loop does: the stream's
//! bytes stay whole frames for the receiver's parser.

use crate::pacing::Pacer;
use crate::wire::TCP_FRAME_HDR;
use std::time::{Duration, Instant};

/// What a TCP sender is asked to do.
#[derive(Debug, Clone)]
pub struct TcpSendConfig {
    /// `-l`: bytes per block (write).
    pub block_len: usize,
    /// `-b`: bits per second, 0 for unpaced.
    pub rate_bps: u64,
    /// `-b RATE/BURST`: blocks allowed back to back.
    pub burst: Option<u32>,
    /// `-t`: no block starts at or after this long after the origin.
    pub end: Option<Duration>,
    /// `--trip-times`: each block of at least a header's length starts with one.
    pub trip_times: bool,
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpSendStep {
    /// Write bytes `offset..offset + len` of the current block. `frame_ns`: a new
    /// framed block; write its header (`wire::write_tcp_frame_header` with this block
    /// length and send time) into the block's first bytes first.
    Write {
        offset: usize,
        len: usize,
        block_len: usize,
        frame_ns: Option<i64>,
    },
    /// The pacer allows nothing before this instant.
    Wait(Instant),
    /// The stream has sent all it will.
    Stop,
}

/// A bulk or paced TCP sender's state.
#[derive(Debug)]
pub struct TcpSender {
    cfg: TcpSendConfig,
    origin: Instant,
    pacer: Option<Pacer>,
    /// The block being written: its length and how much of it is out.
    block: Option<(usize, usize)>,
    /// The budget is spent.
    done: bool,
    bytes: u64,
    blocks: u64,
}

impl TcpSender {
    /// A sender whose schedule (pacing, `-t`) starts at `origin`.
    pub fn new(cfg: TcpSendConfig, origin: Instant) -> TcpSender {
        let block_len = cfg.block_len.max(1);
        let pacer = (cfg.rate_bps > 0).then(|| {
            let p = Pacer::new(cfg.rate_bps, block_len, cfg.burst, 0.0);
            match cfg.end {
                Some(e) => p.ending_at(e.as_secs_f64()),
                None => p,
            }
        });
        TcpSender {
            cfg: TcpSendConfig { block_len, ..cfg },
            origin,
            pacer,
            block: None,
            done: false,
            bytes: 0,
            blocks: 0,
        }
    }

    /// The next step at `now` (`wall_ns`: the wall clock, for a frame header).
    /// `take(want)` asks the `-n`/`-k` budget for a block of `want` bytes and returns
    /// how many may go, 0 when it is spent ([`super::Budget::take`], shared by the
    /// direction's streams; without a budget, `|n| n`).
    pub fn poll(
        &mut self,
        now: Instant,
        wall_ns: i64,
        take: &mut dyn FnMut(usize) -> usize,
    ) -> TcpSendStep {
        if let Some((len, done)) = self.block {
            return TcpSendStep::Write {
                offset: done,
                len: len - done,
                block_len: len,
                frame_ns: None,
            };
        }
        let since = now.saturating_duration_since(self.origin);
        if self.done || self.cfg.end.is_some_and(|end| since >= end) {
            return TcpSendStep::Stop;
        }
        if let Some(p) = self.pacer.as_mut() {
            let wait = p.poll(since.as_secs_f64(), self.cfg.block_len);
            if !wait.is_zero() {
                return TcpSendStep::Wait(now + wait);
            }
        }
        let len = take(self.cfg.block_len);
        if len == 0 {
            self.done = true;
            return TcpSendStep::Stop;
        }
        self.block = Some((len, 0));
        let framed = self.cfg.trip_times && len >= TCP_FRAME_HDR;
        TcpSendStep::Write {
            offset: 0,
            len,
            block_len: len,
            frame_ns: framed.then_some(wall_ns),
        }
    }

    /// `n` bytes of the current block were written.
    pub fn on_written(&mut self, n: usize) {
        let Some((len, done)) = self.block.as_mut() else {
            return;
        };
        let n = n.min(*len - *done);
        *done += n;
        self.bytes += n as u64;
        if *done == *len {
            self.block = None;
            self.blocks += 1;
        }
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Blocks completed so far.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// The furthest the pacer fell behind its schedule, seconds (0 unpaced).
    pub fn max_lag_s(&self) -> f64 {
        self.pacer.as_ref().map_or(0.0, Pacer::max_lag_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::machine::Budget;

    /// No budget.
    fn all(n: usize) -> usize {
        n
    }

    fn cfg(block_len: usize) -> TcpSendConfig {
        TcpSendConfig {
            block_len,
            rate_bps: 0,
            burst: None,
            end: None,
            trip_times: false,
        }
    }

    /// Write everything asked for, `chunk` bytes a write at most; the writes' lengths.
    fn drain(s: &mut TcpSender, b: &Budget, now: Instant, chunk: usize) -> Vec<usize> {
        let mut out = Vec::new();
        while let TcpSendStep::Write { len, .. } = s.poll(now, 0, &mut |n| b.take(n)) {
            let n = len.min(chunk);
            s.on_written(n);
            out.push(n);
            assert!(out.len() < 10_000, "runaway sender");
        }
        out
    }

    #[test]
    fn bytes_limit_ends_exactly_with_a_short_last_block() {
        let t0 = crate::clock::mono_now();
        let mut s = TcpSender::new(cfg(1000), t0);
        let b = Budget::new(2500, false);
        assert_eq!(drain(&mut s, &b, t0, usize::MAX), vec![1000, 1000, 500]);
        assert_eq!((s.bytes(), s.blocks()), (2500, 3));
        assert_eq!(
            s.poll(t0, 0, &mut all),
            TcpSendStep::Stop,
            "spent stays spent"
        );
    }

    #[test]
    fn blocks_limit_finishes_each_block_across_short_writes() {
        let t0 = crate::clock::mono_now();
        let mut s = TcpSender::new(cfg(1000), t0);
        assert_eq!(
            drain(&mut s, &Budget::new(2, true), t0, 300),
            vec![300, 300, 300, 100, 300, 300, 300, 100]
        );
        assert_eq!((s.bytes(), s.blocks()), (2000, 2));
    }

    #[test]
    fn the_time_end_stops_between_blocks() {
        let t0 = crate::clock::mono_now();
        let mut c = cfg(10);
        c.end = Some(Duration::from_secs(1));
        let mut s = TcpSender::new(c, t0);
        assert!(matches!(s.poll(t0, 0, &mut all), TcpSendStep::Write { .. }));
        let late = t0 + Duration::from_secs(2);
        // The block under way is finished first.
        assert!(matches!(
            s.poll(late, 0, &mut all),
            TcpSendStep::Write { offset: 0, .. }
        ));
        s.on_written(10);
        assert_eq!(s.poll(late, 0, &mut all), TcpSendStep::Stop);
    }

    #[test]
    fn trip_times_frame_only_new_blocks_long_enough() {
        let t0 = crate::clock::mono_now();
        let mut c = cfg(20);
        c.trip_times = true;
        let mut s = TcpSender::new(c, t0);
        let b = Budget::new(30, false);
        let mut take = |n| b.take(n);
        assert!(matches!(
            s.poll(t0, 7, &mut take),
            TcpSendStep::Write {
                frame_ns: Some(7),
                len: 20,
                ..
            }
        ));
        s.on_written(5);
        assert!(matches!(
            s.poll(t0, 8, &mut take),
            TcpSendStep::Write {
                frame_ns: None,
                offset: 5,
                ..
            }
        ));
        s.on_written(15);
        // 10 bytes left: shorter than a header, sent unframed.
        assert!(matches!(
            s.poll(t0, 9, &mut take),
            TcpSendStep::Write {
                frame_ns: None,
                len: 10,
                ..
            }
        ));
    }

    #[test]
    fn a_paced_sender_waits_for_its_rate() {
        let t0 = crate::clock::mono_now();
        let mut c = cfg(1000);
        c.rate_bps = 80_000; // 10 000 bytes/s: a block every 100 ms
        let mut s = TcpSender::new(c, t0);
        let mut now = t0;
        let mut sent = 0;
        while now < t0 + Duration::from_secs(1) {
            match s.poll(now, 0, &mut all) {
                TcpSendStep::Write { len, .. } => {
                    s.on_written(len);
                    sent += 1;
                }
                TcpSendStep::Wait(t) => now = t,
                TcpSendStep::Stop => unreachable!(),
            }
        }
        assert!((10..=11).contains(&sent), "{sent} blocks in 1 s");
    }
}
