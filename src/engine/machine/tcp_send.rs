//! The bulk TCP sender's decisions: how long the next block is, whether `-b` says
//! wait, when `-t`, `-n` or `-k` ends the stream, which blocks carry a `--trip-times`
//! frame header, and (`--working-load`) that nothing goes before the schedule's start.
//!
//! The driver writes what [`TcpSender::poll`] asks for (a block, or the rest of one a
//! short write left) and reports each write with [`TcpSender::on_written`]. A block is
//! always finished before the next decision, as the engine's loop does: the stream's
//! bytes stay whole frames for the receiver's parser.
//!
//! The times are asked for, not handed over: `poll` calls its `now` only when a decision
//! needs the time (pacing, a `-t` end, the start not reached yet) and its `wall_ns` only
//! for a new framed block, so an unpaced, untimed sender (the engine's bulk stream, which
//! the control thread stops) costs no clock read per block, as before it had a machine.

use crate::pacing::Pacer;
use crate::wire::TCP_FRAME_HDR;
use std::time::{Duration, Instant};

/// What a TCP sender is asked to do.
#[derive(Debug, Clone, Default)]
pub struct TcpSendConfig {
    /// `-l`: bytes per block (write).
    pub block_len: usize,
    /// `-b`: bits per second, 0 for unpaced.
    pub rate_bps: u64,
    /// `-b RATE/BURST`: blocks allowed back to back.
    pub burst: Option<u32>,
    /// `-t`: no block starts at or after this long after the origin.
    pub end: Option<Duration>,
    /// Where the `-b` schedule ends after the origin (a timed test's end), so the pacer
    /// makes up what it owes before it; `None`: at `end`.
    pub pace_end: Option<Duration>,
    /// `--trip-times`: each block of at least a header's length starts with one.
    pub trip_times: bool,
    /// Nothing goes before the origin (`--working-load`: the bulk senders stay quiet
    /// through the idle phase).
    pub hold_until_origin: bool,
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpSendStep {
    /// Write bytes `offset..offset + len` of the current block. `fresh`: the block is
    /// new (a driver with a source, `-F`, fills it now). `frame_ns`: a new framed block;
    /// write its header (`wire::write_tcp_frame_header` with this block length and send
    /// time) into the block's first bytes first.
    Write {
        offset: usize,
        len: usize,
        block_len: usize,
        fresh: bool,
        frame_ns: Option<i64>,
    },
    /// Nothing may go before this instant (the pacer, or the schedule's start).
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
    /// Still before the origin (`hold_until_origin`).
    holding: bool,
    /// The budget (or the source) is spent.
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
            match cfg.pace_end.or(cfg.end) {
                Some(e) => p.ending_at(e.as_secs_f64()),
                None => p,
            }
        });
        TcpSender {
            holding: cfg.hold_until_origin,
            cfg: TcpSendConfig { block_len, ..cfg },
            origin,
            pacer,
            block: None,
            done: false,
            bytes: 0,
            blocks: 0,
        }
    }

    /// Whether a decision reads the time: pacing, a `-t` end, or the start to wait for.
    fn clocked(&self) -> bool {
        self.holding || self.pacer.is_some() || self.cfg.end.is_some()
    }

    /// The next step. `now()` is the monotonic clock and `wall_ns()` the wall clock
    /// (for a frame header), each called only when the decision needs it.
    /// `take(want)` asks the `-n`/`-k` budget for a block of `want` bytes and returns
    /// how many may go, 0 when it is spent ([`super::Budget::take`], shared by the
    /// direction's streams; without a budget, `|n| n`).
    pub fn poll(
        &mut self,
        now: impl FnOnce() -> Instant,
        wall_ns: impl FnOnce() -> i64,
        take: impl FnOnce(usize) -> usize,
    ) -> TcpSendStep {
        if let Some((len, done)) = self.block {
            return TcpSendStep::Write {
                offset: done,
                len: len - done,
                block_len: len,
                fresh: false,
                frame_ns: None,
            };
        }
        if self.done {
            return TcpSendStep::Stop;
        }
        if self.clocked() {
            let now = now();
            if self.holding {
                if now < self.origin {
                    return TcpSendStep::Wait(self.origin);
                }
                self.holding = false;
            }
            let since = now.saturating_duration_since(self.origin);
            if self.cfg.end.is_some_and(|end| since >= end) {
                return TcpSendStep::Stop;
            }
            if let Some(p) = self.pacer.as_mut() {
                let wait = p.poll(since.as_secs_f64(), self.cfg.block_len);
                if !wait.is_zero() {
                    return TcpSendStep::Wait(now + wait);
                }
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
            fresh: true,
            frame_ns: framed.then(wall_ns),
        }
    }

    /// The new block's source had only `n` of its bytes (`-F`: the file's end is near):
    /// the block is `n` bytes long, and with `n` = 0 the stream is over.
    pub fn source_gave(&mut self, n: usize) {
        if let Some((len, 0)) = self.block.as_mut() {
            if n == 0 {
                self.block = None;
                self.done = true;
            } else {
                *len = n.min(*len);
            }
        }
    }

    /// `n` bytes of the current block were written; true when that finished the block.
    pub fn on_written(&mut self, n: usize) -> bool {
        let Some((len, done)) = self.block.as_mut() else {
            return false;
        };
        let n = n.min(*len - *done);
        *done += n;
        self.bytes += n as u64;
        if *done == *len {
            self.block = None;
            self.blocks += 1;
            return true;
        }
        false
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
            ..TcpSendConfig::default()
        }
    }

    /// Write everything asked for, `chunk` bytes a write at most; the writes' lengths.
    fn drain(s: &mut TcpSender, b: &Budget, now: Instant, chunk: usize) -> Vec<usize> {
        let mut out = Vec::new();
        while let TcpSendStep::Write { len, .. } = s.poll(|| now, || 0, |n| b.take(n)) {
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
            s.poll(|| t0, || 0, all),
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
        assert!(matches!(
            s.poll(|| t0, || 0, all),
            TcpSendStep::Write { .. }
        ));
        let late = t0 + Duration::from_secs(2);
        // The block under way is finished first.
        assert!(matches!(
            s.poll(|| late, || 0, all),
            TcpSendStep::Write { offset: 0, .. }
        ));
        s.on_written(10);
        assert_eq!(s.poll(|| late, || 0, all), TcpSendStep::Stop);
    }

    #[test]
    fn trip_times_frame_only_new_blocks_long_enough() {
        let t0 = crate::clock::mono_now();
        let mut c = cfg(20);
        c.trip_times = true;
        let mut s = TcpSender::new(c, t0);
        let b = Budget::new(30, false);
        let take = |n| b.take(n);
        assert!(matches!(
            s.poll(|| t0, || 7, take),
            TcpSendStep::Write {
                frame_ns: Some(7),
                len: 20,
                ..
            }
        ));
        s.on_written(5);
        assert!(matches!(
            s.poll(|| t0, || 8, take),
            TcpSendStep::Write {
                frame_ns: None,
                offset: 5,
                ..
            }
        ));
        s.on_written(15);
        // 10 bytes left: shorter than a header, sent unframed.
        assert!(matches!(
            s.poll(|| t0, || 9, take),
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
            match s.poll(|| now, || 0, all) {
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

    /// The engine's bulk stream (unpaced, no `-t` end: the control thread stops it)
    /// reads no clock per block; a framed block reads the wall clock once.
    #[test]
    fn an_unpaced_untimed_sender_never_asks_the_time() {
        let t0 = crate::clock::mono_now();
        let mut c = cfg(100);
        c.trip_times = true;
        let mut s = TcpSender::new(c, t0);
        for _ in 0..3 {
            let step = s.poll(|| panic!("no clock read"), || 5, all);
            assert!(matches!(
                step,
                TcpSendStep::Write {
                    fresh: true,
                    frame_ns: Some(5),
                    ..
                }
            ));
            s.on_written(60);
            let step = s.poll(|| panic!("no clock read"), || panic!("no wall read"), all);
            assert!(matches!(
                step,
                TcpSendStep::Write {
                    fresh: false,
                    offset: 60,
                    len: 40,
                    ..
                }
            ));
            assert!(s.on_written(40), "the block is finished");
        }
        assert_eq!((s.bytes(), s.blocks()), (300, 3));
    }

    /// `--working-load`: nothing goes before the origin; then the schedule runs from it.
    #[test]
    fn a_held_sender_waits_for_its_origin() {
        let t0 = crate::clock::mono_now();
        let start = t0 + Duration::from_millis(500);
        let mut c = cfg(10);
        c.hold_until_origin = true;
        let mut s = TcpSender::new(c, start);
        assert_eq!(s.poll(|| t0, || 0, all), TcpSendStep::Wait(start));
        assert!(matches!(
            s.poll(|| start, || 0, all),
            TcpSendStep::Write { len: 10, .. }
        ));
        s.on_written(10);
        // Past the start it no longer reads the time (unpaced, untimed).
        assert!(matches!(
            s.poll(|| panic!("no clock read"), || 0, all),
            TcpSendStep::Write { .. }
        ));
    }

    /// `-F`: a block the file filled only partly is that long; an empty one ends the
    /// stream, and the budget's `-n` still counts whole blocks.
    #[test]
    fn a_short_source_shortens_the_block_and_an_empty_one_stops() {
        let t0 = crate::clock::mono_now();
        let mut s = TcpSender::new(cfg(100), t0);
        assert!(matches!(
            s.poll(|| t0, || 0, all),
            TcpSendStep::Write {
                fresh: true,
                len: 100,
                ..
            }
        ));
        s.source_gave(30);
        assert!(matches!(
            s.poll(|| t0, || 0, all),
            TcpSendStep::Write {
                fresh: false,
                len: 30,
                ..
            }
        ));
        assert!(s.on_written(30));
        assert!(matches!(
            s.poll(|| t0, || 0, all),
            TcpSendStep::Write { fresh: true, .. }
        ));
        s.source_gave(0);
        assert_eq!(s.poll(|| t0, || 0, all), TcpSendStep::Stop);
        assert_eq!((s.bytes(), s.blocks()), (30, 1));
    }

    /// The pacer's schedule may end at the test's end while the driver stops the stream.
    #[test]
    fn the_pace_end_alone_does_not_stop_the_sender() {
        let t0 = crate::clock::mono_now();
        let mut c = cfg(1000);
        c.rate_bps = 80_000;
        c.pace_end = Some(Duration::from_secs(1));
        let mut s = TcpSender::new(c, t0);
        let late = t0 + Duration::from_secs(5);
        assert!(matches!(
            s.poll(|| late, || 0, all),
            TcpSendStep::Write { .. }
        ));
    }
}
