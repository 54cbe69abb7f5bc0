//! The `--receivers` interval rows printed live: each receiver that promised live rows
//! (its join answer's `live`) sends the row of interval `k` as it closes; this pure
//! machine lines them up by `k` and says when interval `k`'s block (a row per live
//! receiver and `[SUM]`) is ready: when every live receiver sent its row, or
//! [`LIVE_WAIT`] after the interval closed at the sender (`start + (k+1)·interval`),
//! whichever comes first. A receiver without a row by then is shown missing with the
//! reason, and never holds the others back. Blocks come out in order of `k`, once each;
//! rows for a block already out, repeated, or from a receiver not expected are dropped.

use crate::wire::mcast_join::{FigureRow, LiveRow, MAX_FIGURE_ROWS};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long after an interval closed at the sender its block waits for a silent
/// receiver's row (the receivers close their rows on their own clocks, a path's delay
/// later, then the row crosses the control connection).
pub const LIVE_WAIT: Duration = Duration::from_secs(3);

/// What a missing row says.
pub const MISSING: &str = "missing: no row within the wait after the interval";

/// One interval's block: per expected receiver (its index among the receivers) its row
/// or why not, and the sum of the rows that came.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub k: u64,
    pub rows: Vec<(usize, Result<FigureRow, String>)>,
    pub sum: FigureRow,
}

/// The alignment of live rows across receivers.
#[derive(Debug, Clone)]
pub struct Aligner {
    expected: Vec<usize>,
    start: Instant,
    interval: Duration,
    wait: Duration,
    /// The next block to give out.
    next: u64,
    pending: BTreeMap<u64, BTreeMap<usize, FigureRow>>,
}

impl Aligner {
    /// Receivers `expected` (indices) send rows of `interval`; the sender began at
    /// `start`.
    pub fn new(
        expected: Vec<usize>,
        start: Instant,
        interval: Duration,
        wait: Duration,
    ) -> Aligner {
        Aligner {
            expected,
            start,
            interval,
            wait,
            next: 0,
            pending: BTreeMap::new(),
        }
    }

    /// Receiver `i` sent a row.
    pub fn on_row(&mut self, i: usize, row: LiveRow) {
        let Some(row) = row.checked() else { return };
        if row.k < self.next || !self.expected.contains(&i) {
            return;
        }
        self.pending
            .entry(row.k)
            .or_default()
            .entry(i)
            .or_insert(row.row);
    }

    /// Receiver `i` is gone: its rows are no longer waited for.
    pub fn on_gone(&mut self, i: usize) {
        self.expected.retain(|&e| e != i);
    }

    fn due(&self, k: u64) -> Instant {
        let closes = self
            .interval
            .saturating_mul(u32::try_from(k + 1).unwrap_or(u32::MAX));
        self.start + closes + self.wait
    }

    /// The blocks ready at `now`, in order.
    pub fn poll(&mut self, now: Instant) -> Vec<Block> {
        let mut out = Vec::new();
        while self.next < MAX_FIGURE_ROWS as u64 {
            let k = self.next;
            let have = self.pending.get(&k).map_or(0, |m| {
                m.keys().filter(|i| self.expected.contains(i)).count()
            });
            let complete = !self.expected.is_empty() && have == self.expected.len();
            if !complete && now < self.due(k) {
                break;
            }
            // Nothing for this interval nor after it (the run is over or quiet): no
            // empty block; one comes if a later row does.
            if have == 0 && self.pending.range(k..).next().is_none() {
                break;
            }
            out.push(self.block(k));
            self.next += 1;
        }
        out
    }

    /// The blocks still held (at the end: every row that came is in one), with the
    /// missing rows said so.
    pub fn finish(&mut self) -> Vec<Block> {
        let Some(&last) = self.pending.keys().next_back() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        while self.next <= last {
            out.push(self.block(self.next));
            self.next += 1;
        }
        out
    }

    fn block(&mut self, k: u64) -> Block {
        let got = self.pending.remove(&k).unwrap_or_default();
        let mut sum = FigureRow {
            start_s: f64::MAX,
            ..FigureRow::default()
        };
        let mut rows = Vec::new();
        for &i in &self.expected {
            match got.get(&i) {
                Some(r) => {
                    sum.start_s = sum.start_s.min(r.start_s);
                    sum.end_s = sum.end_s.max(r.end_s);
                    sum.bytes += r.bytes;
                    sum.packets += r.packets;
                    sum.lost += r.lost;
                    sum.out_of_order += r.out_of_order;
                    sum.jitter_s = sum.jitter_s.max(r.jitter_s);
                    rows.push((i, Ok(*r)));
                }
                None => rows.push((i, Err(MISSING.to_string()))),
            }
        }
        if sum.start_s == f64::MAX {
            let span = self.interval.as_secs_f64();
            sum.start_s = span * k as f64;
            sum.end_s = span * (k + 1) as f64;
        }
        Block { k, rows, sum }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};

    fn row(k: u64, bytes: u64) -> LiveRow {
        LiveRow {
            k,
            row: FigureRow {
                start_s: k as f64,
                end_s: k as f64 + 1.0,
                bytes,
                packets: bytes / 100,
                ..Default::default()
            },
        }
    }

    fn start() -> (Aligner, Instant) {
        let t0 = ManualClock::at_unix(0).now();
        (
            Aligner::new(vec![0, 1, 2], t0, Duration::from_secs(1), LIVE_WAIT),
            t0,
        )
    }

    #[test]
    fn a_block_is_out_as_soon_as_every_receiver_sent_its_row() {
        let (mut a, t0) = start();
        let at = t0 + Duration::from_millis(1100);
        a.on_row(0, row(0, 1000));
        a.on_row(2, row(0, 3000));
        assert!(a.poll(at).is_empty());
        a.on_row(1, row(0, 2000));
        let b = a.poll(at);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].k, 0);
        assert_eq!(b[0].sum.bytes, 6000);
        assert_eq!(b[0].sum.packets, 60);
        assert_eq!(b[0].rows.len(), 3);
        assert!(b[0].rows.iter().all(|(_, r)| r.is_ok()));
        // Once each: a repeated or late row changes nothing.
        a.on_row(1, row(0, 2000));
        assert!(a.poll(at).is_empty());
    }

    #[test]
    fn a_silent_receiver_is_missing_after_the_wait_and_holds_nobody_back() {
        let (mut a, t0) = start();
        a.on_row(0, row(0, 1000));
        a.on_row(1, row(0, 1000));
        // Interval 0 closed at 1 s: its block waits until 1 s + LIVE_WAIT.
        let before = t0 + Duration::from_secs(1) + LIVE_WAIT - Duration::from_millis(1);
        assert!(a.poll(before).is_empty());
        let b = a.poll(t0 + Duration::from_secs(1) + LIVE_WAIT);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].rows[2], (2, Err(MISSING.to_string())));
        assert_eq!(b[0].sum.bytes, 2000);
        // Once gone, it is not waited for.
        a.on_gone(2);
        a.on_row(0, row(1, 10));
        a.on_row(1, row(1, 10));
        let b = a.poll(t0 + Duration::from_millis(2100));
        assert_eq!((b.len(), b[0].k, b[0].rows.len()), (1, 1, 2));
    }

    #[test]
    fn blocks_come_in_order_and_the_end_flushes_the_rest() {
        let (mut a, t0) = start();
        for i in 0..3 {
            a.on_row(i, row(1, 500));
        }
        // Block 1 is complete but block 0 is not yet due: nothing out of order.
        assert!(a.poll(t0 + Duration::from_millis(1500)).is_empty());
        let b = a.poll(t0 + Duration::from_secs(1) + LIVE_WAIT);
        assert_eq!(b.iter().map(|b| b.k).collect::<Vec<_>>(), vec![0, 1]);
        assert!(b[0].rows.iter().all(|(_, r)| r.is_err()));
        a.on_row(0, row(2, 1));
        let rest = a.finish();
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].k, 2);
        assert!(a.finish().is_empty());
    }

    #[test]
    fn nothing_is_out_before_its_time_and_bad_rows_are_dropped() {
        let (mut a, t0) = start();
        // Long after the start but no usable rows at all: no empty blocks.
        a.on_row(5, row(0, 1));
        a.on_row(0, row(MAX_FIGURE_ROWS as u64, 1));
        let mut nan = row(0, 1);
        nan.row.jitter_s = f64::NAN;
        a.on_row(0, nan);
        assert!(a.poll(t0).is_empty());
        let far = t0 + Duration::from_secs(10 * 3600);
        assert!(a.poll(far).is_empty());
        a.on_row(1, row(3, 1));
        assert_eq!(a.poll(far).len(), 4);
    }
}
