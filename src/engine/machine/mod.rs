//! Sans-IO stream machines: each per-stream loop's decisions, apart from its system calls
//! (issue 21, item 2).
//!
//! A machine is given `now` (monotonic; a wall-clock reading where bytes carry one) and
//! what the last I/O did, and says what to do next: send these datagrams with these
//! headers, write N bytes, send this unit, wait until a time, stop. It opens no socket,
//! reads no clock and never sleeps. The engine's data threads drive machines over real
//! sockets; tests drive the same machines over the simulated network of [`crate::sim`]
//! on virtual time (`tests/sim/`, `tests/sim_streams/`). Pacing ([`crate::pacing`]), the
//! schedules of [`crate::profile`], the UDP header ([`crate::wire::UdpHeader`]) and the
//! receive accounting ([`crate::stats::UdpRecv`], the one-way-delay and frame recorders)
//! stay the pure modules they are; a machine holds the loop's state between them.
//!
//! | machine | loop it decides | driven by |
//! |---|---|---|
//! | [`udp::UdpSender`], [`udp::UdpReceiver`] | bulk and paced UDP: datagrams per round, headers; receive accounting | `engine::stream` |
//! | [`tcp_send::TcpSender`] | bulk and `-b`-paced TCP sender: block sizes, `-t`/`-n`/`-k` ends, `--trip-times` frames, `--working-load`'s start, `-F`'s last block | `engine::stream`, `engine::iperf2_client` (its TCP sender) |
//! | [`tcp_recv::TcpReceiver`] | TCP receiver: byte and read counts, `--trip-times` frames (each one's send time handed to the driver) | `engine::stream` |
//! | [`profile_send::ProfileSender`] | burst and isochronous senders: the unit grid, frame sizes, the split into writes or datagrams | `engine::profile` |
//! | [`bounce::BounceClient`], [`bounce::BounceServer`] | bounceback client (requests, replies, period) and server (hold, reply); the `--working-load` probe schedule | `engine::bounce` |
//! | [`connect::ConnectLoop`] | `--connect-only`: connect again, pause after a refusal, ignore what ends after the test | `engine::connect` |
//! | [`txstart`] | `--txstart-time`: how long to sleep towards a wall-clock instant | `engine::profile` |
//!
//! The isochronous frame receiver needs no machine of its own: `profile::FrameRecv`
//! (behind `record::FrameRecord::on_datagram`) already takes the datagram and its
//! arrival time and keeps the counts.

pub mod bounce;
pub mod connect;
pub mod profile_send;
pub mod tcp_recv;
pub mod tcp_send;
pub mod txstart;
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
