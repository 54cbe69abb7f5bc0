//! Sans-IO stream machines: each per-stream loop's decisions, apart from its system calls.
//!
//! A machine is told the time (`now`, monotonic; a wall-clock reading where bytes carry
//! one) and what the last I/O did, and answers with what to do next: write N bytes,
//! send these units, wait until T, stop. It opens no socket, reads no clock and never
//! sleeps, so the same decisions run on the engine's threads over real sockets and in
//! the simulator's virtual time (`tests/sim_*`), where their results are exact.
//!
//! | machine | loop it decides | driven by |
//! |---|---|---|
//! | [`tcp_send::TcpSender`] | bulk and `-b`-paced TCP sender: block sizes, `-t`/`-n`/`-k` ends, `--trip-times` frames | simulator tests (the engine's loop is `stream::tcp_send`) |
//! | [`tcp_recv::TcpReceiver`] | TCP receiver: byte and read counts, `--trip-times` frames and their one-way delays | simulator tests (the engine's loop is `stream::tcp_recv`) |
//! | [`profile_send::ProfileSender`] | burst and isochronous senders: the unit grid, frame sizes, the split into writes or datagrams | `engine::profile` |
//! | [`bounce::BounceClient`], [`bounce::BounceServer`] | bounceback client (requests, replies, period) and server (hold, reply); the `--working-load` probe schedule | `engine::bounce` |
//! | [`connect::ConnectLoop`] | `--connect-only`: connect again, pause after a refusal, ignore what ends after the test | `engine::connect` |
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

/// A sender's `-n` / `-k` budget, as what is left of it.
///
/// A sender asks its budget before each block through a `take` callback, so one stream
/// can keep its own (a `Limit`) and the engine's parallel streams can share one
/// (`stream::Budget`, the same rule on an atomic counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `-n`: this many bytes left.
    Bytes(u64),
    /// `-k`: this many blocks (writes) left.
    Blocks(u64),
}

impl Limit {
    /// Take a block of up to `want` bytes: how many may be sent (0: the budget is
    /// spent). A byte budget's last block is what is left; a block budget gives whole
    /// blocks.
    pub fn take(&mut self, want: usize) -> usize {
        match self {
            Limit::Bytes(left) => {
                let n = (*left).min(want as u64);
                *left -= n;
                n as usize
            }
            Limit::Blocks(0) => 0,
            Limit::Blocks(left) => {
                *left -= 1;
                want
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_taken_as_the_engine_takes_its_budget() {
        let mut b = Limit::Bytes(2500);
        assert_eq!(
            [b.take(1000), b.take(1000), b.take(1000), b.take(1000)],
            [1000, 1000, 500, 0]
        );
        let mut k = Limit::Blocks(2);
        assert_eq!([k.take(10), k.take(10), k.take(10)], [10, 10, 0]);
    }
}
