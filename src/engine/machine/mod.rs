//! Sans-IO stream machines: each per-stream loop's decisions, apart from its system calls
//! (issue 21, item 2).
//!
//! A machine is given `now` (and what the last I/O did) and says what to do next: send
//! these datagrams with these headers, wait until a time, stop. The engine's data threads
//! drive machines over real sockets (`engine::stream`); tests drive the same machines over
//! the simulated network of [`crate::sim`] on virtual time. Pacing ([`crate::pacing`]),
//! the UDP header ([`crate::wire::UdpHeader`]) and the receive accounting
//! ([`crate::stats::UdpRecv`], the one-way-delay and frame recorders) stay the pure
//! modules they are; a machine holds the loop's state between them.

pub mod udp;

use std::sync::atomic::{AtomicI64, Ordering};

/// A shared byte or block budget for `-n` / `-k` tests, per direction: the streams of a
/// direction take from it until it is spent.
#[derive(Debug)]
pub struct Budget {
    pub remaining: AtomicI64,
    pub blocks: bool,
}

impl Budget {
    /// A budget of `n` bytes, or of `n` blocks when `blocks`.
    pub fn new(n: u64, blocks: bool) -> Budget {
        Budget {
            remaining: AtomicI64::new(n.min(i64::MAX as u64) as i64),
            blocks,
        }
    }

    /// Take up to `want` units; returns how many may be sent (0 = budget exhausted).
    pub fn take(&self, want: usize) -> usize {
        let want_units = if self.blocks { 1 } else { want as i64 };
        let before = self.remaining.fetch_sub(want_units, Ordering::Relaxed);
        if before <= 0 {
            0
        } else if self.blocks || before >= want_units {
            want
        } else {
            before as usize
        }
    }

    /// Give back what was taken for `n` sends of `len` bytes that never went out.
    pub fn give_back(&self, n: usize, len: usize) {
        let units = if self.blocks { n } else { n * len };
        self.remaining.fetch_add(units as i64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_splits_bytes_exactly() {
        let b = Budget::new(250, false);
        assert_eq!(b.take(100), 100);
        assert_eq!(b.take(100), 100);
        assert_eq!(b.take(100), 50);
        assert_eq!(b.take(100), 0);
        let k = Budget::new(2, true);
        assert_eq!((k.take(10), k.take(10), k.take(10)), (10, 10, 0));
    }
}
