//! What a data thread shares with the control thread of its test: the stream's
//! cumulative counters (atomics the thread *stores*, the meter loads) and its recorders
//! (the extension figures behind a mutex taken once per batch or per interval).
//!
//! This sits below every data loop (`stream`, `profile`, `connect`) and below the
//! `meter` that reads it, so none of them needs another to name what they share.

use crate::latency::{Hist, OwdRecord};
use crate::profile::{FrameCounts, FrameRecv, UnitFigures};
use crate::report::connect::ConnFigures;
use crate::sock;
use crate::stats::{READ_BINS, SocketCalls, UdpCounts, UdpRecv, read_bin};
use crate::wire::IsochHeader;
use std::collections::VecDeque;
use std::io;
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

/// Per-stream state shared between the data thread and the control thread. (`Default`:
/// for drivers other than `live`, such as the simulator tests.)
#[derive(Default)]
pub struct StreamShared {
    /// iperf3 stream id (1, 3, 4, ...).
    pub id: i64,
    /// Socket descriptor, as iperf3 shows it in `[  5]` (a label: see `tcp`).
    pub socket: i64,
    /// A TCP stream's socket as the test keeps it open (`LiveStreams::keep_tcp`), for
    /// TCP_INFO; empty for UDP, and dead once the test has let go of its sockets.
    pub tcp: Weak<TcpStream>,
    /// This side sends on the stream.
    pub sender: bool,
    /// The stream flows client → server.
    pub forward: bool,
    pub bytes: AtomicU64,
    /// Blocks written (TCP) or datagrams sent (UDP).
    pub packets: AtomicU64,
    /// UDP data threads: the messages that carried the datagrams (see
    /// [`crate::stats::UdpIo`]); 0 elsewhere.
    pub messages: AtomicU64,
    /// Paced UDP senders: the furthest the thread fell behind its `-b` schedule, µs
    /// ([`crate::pacing::Pacer::max_lag_s`]); 0 elsewhere.
    pub pacing_lag_us: AtomicU64,
    /// UDP senders: sends that found the socket's buffer full for the whole send
    /// timeout ([`super::stream::STOP_POLL`]); 0 elsewhere.
    pub send_blocked: AtomicU64,
    /// Receive-side UDP accounting. This and the records below are boxed: a stream has
    /// at most one or two of them, and inline they made every stream's shared state 2.2 KB
    /// (a server's memory per stream, docs/benchmarks.md).
    pub udp: Option<Box<Mutex<UdpRecv>>>,
    /// Bounceback client: round-trip times.
    pub rtt: Option<Box<Mutex<RttRecord>>>,
    /// `--trip-times` receiver: one-way delays.
    pub owd: Option<Box<Mutex<OwdRecord>>>,
    /// `--connect-only` client: the stream's short connections.
    pub conn: Option<Box<Mutex<ConnRecord>>>,
    /// Profiled sender (`--burst-size`, `--isochronous`): its bursts or frames.
    pub profile: Option<Box<Mutex<ProfileRecord>>>,
    /// Isochronous UDP receiver (netmeter peers): whole frames.
    pub frames: Option<Box<Mutex<FrameRecord>>>,
    /// The thread's socket calls (iperf 2's Write/Err and Reads=Dist), counted by the
    /// bulk and profiled data loops.
    pub calls: CallCounters,
    /// MSG_ZEROCOPY senders: sends the kernel released, and of those the ones it copied
    /// anyway (stored when the thread ends).
    pub zc_sends: AtomicU64,
    pub zc_copied: AtomicU64,
    /// A TCP sender that, after its own shutdown, reads until its peer closes (iperf 2's
    /// client: the server's acknowledgements arrive on it). The test's end leaves its
    /// reading side alone (`LiveStreams::stop`): cut short, the socket would close with
    /// the peer's last bytes unread, and Linux then resets it and throws away what was
    /// still queued to send.
    pub awaits_peer_close: AtomicBool,
    /// Set when the thread has ended (error, budget exhausted, or peer closed).
    pub finished: AtomicBool,
    /// The thread's own CPU use over its life (stored when it ends).
    pub thread_cpu: Mutex<Option<crate::host::facts::ThreadCpu>>,
    /// Why the thread ended early, if it did.
    pub error: Mutex<Option<StreamError>>,
}

impl StreamShared {
    /// Current UDP receive counters, if this is a UDP receiver.
    pub fn udp_counts(&self) -> Option<UdpCounts> {
        self.udp
            .as_ref()
            .map(|m| m.lock().map(|u| u.counts()).unwrap_or_default())
    }

    /// TCP_INFO of a TCP stream's socket while the test holds it open.
    pub fn tcp_info(&self) -> Option<sock::TcpInfo> {
        sock::tcp_info(self.tcp.upgrade()?.as_fd())
    }

    /// Keep the first error of the stream's thread.
    pub(super) fn fail(&self, err: io::Error) {
        if let Ok(mut g) = self.error.lock() {
            g.get_or_insert_with(|| StreamError {
                stream: self.id,
                sender: self.sender,
                err: Arc::new(err),
            });
        }
    }

    /// The error the stream's thread ended with, if it failed.
    pub fn error(&self) -> Option<StreamError> {
        self.error.lock().ok().and_then(|g| g.clone())
    }
}

/// A stream's socket calls as its thread makes them (see [`SocketCalls`]). The thread is
/// the only writer, so a count is a load and a store (no locked add in the hot loop);
/// the meter only loads.
#[derive(Debug, Default)]
pub struct CallCounters {
    writes: AtomicU64,
    write_errors: AtomicU64,
    reads: AtomicU64,
    read_bins: [AtomicU64; READ_BINS],
}

/// One more in a counter only its own thread writes. Release, with `snapshot`'s
/// Acquire: a sampler that sees the count sees what the thread stored before it.
fn bump(a: &AtomicU64) {
    a.store(a.load(Ordering::Relaxed).wrapping_add(1), Ordering::Release);
}

impl CallCounters {
    /// Count one send call by what it returned (passed through, so a loop wraps its
    /// call): a write, or a write error (an interrupted call, retried at once, is
    /// neither).
    pub fn wrote<T>(&self, r: io::Result<T>) -> io::Result<T> {
        match &r {
            Ok(_) => bump(&self.writes),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => bump(&self.write_errors),
        }
        r
    }

    /// Count one receive call that asked for `asked` bytes (passed through): a read
    /// when it returned data, binned by how much of `asked` it returned.
    pub fn read(&self, r: io::Result<usize>, asked: usize) -> io::Result<usize> {
        if let Ok(n) = r
            && n > 0
        {
            bump(&self.reads);
            bump(&self.read_bins[read_bin(n, asked)]);
        }
        r
    }

    /// Count one batched receive call (`recvmmsg`) that returned messages. Call it
    /// once what the call returned is in the stream's counters: the end of a test
    /// samples them while the loop may still be reading, and counting the read first
    /// showed a read whose datagrams were not counted yet (501 reads, 500 datagrams).
    pub fn read_batch(&self) {
        bump(&self.reads);
    }

    /// The counts so far; `None` before the thread made any call.
    pub fn snapshot(&self) -> Option<SocketCalls> {
        let load = |a: &AtomicU64| a.load(Ordering::Acquire);
        let c = SocketCalls {
            writes: load(&self.writes),
            write_errors: load(&self.write_errors),
            reads: load(&self.reads),
            read_bins: std::array::from_fn(|i| load(&self.read_bins[i])),
        };
        (c != SocketCalls::default()).then_some(c)
    }
}

/// Why a data thread ended early: the system call that failed on its socket. Shown as
/// the call's error alone (`TestError::Stream` adds "a data stream failed: "), the
/// line users saw before it was typed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{err}")]
pub struct StreamError {
    /// The stream's id (1, 3, 4, ...).
    pub stream: i64,
    /// Whether this side sent on the stream.
    pub sender: bool,
    /// The failure (shared: the error is read by the control thread and kept).
    pub err: Arc<io::Error>,
}

impl StreamError {
    /// The kind of the failed call's error.
    pub fn kind(&self) -> io::ErrorKind {
        self.err.kind()
    }
}

/// A round trip waiting for the interval it belongs to ([`RttRecord::on_round_trip`]).
#[derive(Debug, Clone, Copy)]
struct Stamped {
    /// When its reply's last byte came: the time stamp it is cut by.
    at: Instant,
    ns: u64,
    /// The request bytes it sent.
    bytes: u64,
}

/// Round trips held for their interval at most: past this many (a back-to-back
/// bounceback without interval rows, which are what drain them), the oldest go into
/// the current interval at once.
const MAX_PENDING: usize = 1 << 16;

/// Round-trip times of a bounceback client stream: the current interval's and the
/// whole test's, plus UDP requests that never got a reply.
#[derive(Debug, Default)]
pub struct RttRecord {
    pub interval: Hist,
    /// The whole test's (with `--working-load`: the loaded phase's) round trips.
    pub total: Hist,
    /// `--working-load`: round trips before the load started.
    pub idle: Hist,
    pub lost: u64,
    /// Replies whose server timestamps contradict their round trip, this interval's and
    /// the whole test's; `None` unless the server stamps its replies (an iperf 2 server
    /// with `--trip-times`): see [`RttRecord::on_stamped_reply`].
    pub clock_sync_errors: Option<(u64, u64)>,
    /// Round trips stamped ([`RttRecord::on_round_trip`]) and not yet cut into an
    /// interval, oldest first.
    pending: VecDeque<Stamped>,
    /// The round trips and request bytes cut into intervals so far ([`RttRecord::cut`]);
    /// `None` unless the loop stamps its round trips, when the stream's counters are
    /// the meter's transactions and bytes instead.
    cut: Option<(u64, u64)>,
}

impl RttRecord {
    /// A round trip of `ns` whose reply came at `at`, its request `bytes` long: in the
    /// whole test's figures now, in an interval's when [`RttRecord::cut`] reaches `at`.
    /// So a round trip counts in the interval its time stamp falls in, as iperf 2's
    /// reporter cuts intervals by each packet's time (`packetTime`, which its
    /// bounceback client sets when the reply's last byte came), not in the one whose
    /// row the sampler happened to take after it: a burst due at an interval's end
    /// lands in the next row however late the sampler runs.
    /// `idle`: a `--working-load` round trip before the load, kept apart from the
    /// loaded ones.
    pub fn on_round_trip(&mut self, at: Instant, ns: u64, bytes: u64, idle: bool) {
        match idle {
            true => self.idle.record_ns(ns),
            false => self.total.record_ns(ns),
        }
        self.cut.get_or_insert((0, 0));
        if self.pending.len() >= MAX_PENDING
            && let Some(old) = self.pending.pop_front()
        {
            self.take(old);
        }
        self.pending.push_back(Stamped { at, ns, bytes });
    }

    fn take(&mut self, t: Stamped) {
        self.interval.record_ns(t.ns);
        if let Some((n, b)) = self.cut.as_mut() {
            *n += 1;
            *b += t.bytes;
        }
    }

    /// Move the round trips stamped before `until` (all of them: `None`) into the
    /// current interval; the round trips and request bytes cut so far, `None` unless
    /// round trips are stamped.
    pub fn cut(&mut self, until: Option<Instant>) -> Option<(u64, u64)> {
        while let Some(t) = self.pending.front().copied() {
            if until.is_some_and(|u| t.at >= u) {
                break;
            }
            self.pending.pop_front();
            self.take(t);
        }
        self.cut
    }

    /// A reply that carries the server's receive and send times (ns since the epoch,
    /// server clock) of a request this side sent at `sent_ns` and saw answered at
    /// `back_ns` (this side's clock). iperf 2's check (`reporter_handle_packet_bb_client`):
    /// the request cannot arrive before it was sent, nor the reply before the server
    /// sent it (iperf 2 writes this as "held longer than the round trip"); either means
    /// the clocks disagree by more than the round trip.
    pub fn on_stamped_reply(
        &mut self,
        sent_ns: i64,
        server_rx_ns: i64,
        server_tx_ns: i64,
        back_ns: i64,
    ) {
        let to_server = server_rx_ns.saturating_sub(sent_ns);
        let turnaround = server_tx_ns.saturating_sub(server_rx_ns);
        let since_server_rx = back_ns.saturating_sub(server_rx_ns);
        let bad = to_server < 0 || since_server_rx.saturating_sub(turnaround) < 0;
        let c = self.clock_sync_errors.get_or_insert((0, 0));
        if bad {
            c.0 += 1;
            c.1 += 1;
        }
    }
}

/// A client stream's connections, shared with the control thread's meter.
#[derive(Debug, Default)]
pub struct ConnRecord {
    /// Since the last interval tick.
    pub interval: ConnFigures,
    /// The measured part (after `-O`) up to the last tick.
    pub total: ConnFigures,
    pub last_error: Option<String>,
}

/// A profiled sender's units, shared with the control thread's meter.
#[derive(Debug, Default)]
pub struct ProfileRecord {
    /// Isochronous frames (else bursts), for the report's key.
    pub frames: bool,
    /// Since the last interval tick.
    pub interval: UnitFigures,
    /// The measured part (after `-O`) up to the last tick.
    pub total: UnitFigures,
}

/// An isochronous UDP receiver's frames, shared with the control thread's meter.
#[derive(Debug, Default)]
pub struct FrameRecord {
    pub recv: FrameRecv,
    /// Record frame latency (`--trip-times`: the clocks are compared).
    pub latency: bool,
    pub interval_latency: Hist,
    pub total_latency: Hist,
    /// Counts at the last tick, and where the measured part began.
    pub(super) prev: FrameCounts,
    pub(super) base: FrameCounts,
}

impl FrameRecord {
    pub fn new(latency: bool) -> FrameRecord {
        FrameRecord {
            latency,
            ..FrameRecord::default()
        }
    }

    /// One data datagram's payload after the UDP header.
    pub fn on_datagram(&mut self, after_udp_header: &[u8], rx_ns: i64, correction_ns: i64) {
        let Some(h) = IsochHeader::read(after_udp_header) else {
            return;
        };
        if let Some(transit) = self.recv.on_datagram(&h, rx_ns)
            && self.latency
        {
            let ns = transit.saturating_add(correction_ns);
            if ns >= 0 {
                self.interval_latency.record_ns(ns as u64);
                self.total_latency.record_ns(ns as u64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bursts every second, the second due at the first interval's end and answered
    /// 0.1 ms after it: with the interval sampler 3 ms late, the second burst still
    /// counts in the second row (iperf 2 cuts by each round trip's time stamp), not in
    /// the first, where counting what had arrived by the sampler's time put it.
    #[test]
    fn round_trips_count_in_the_interval_their_reply_falls_in() {
        let t0 = crate::clock::Clock::now(&crate::clock::ManualClock::at_unix(1_700_000_000));
        let at = |s: f64| t0 + std::time::Duration::from_secs_f64(s);
        let mut r = RttRecord::default();
        assert_eq!(
            r.cut(Some(at(1.0))),
            None,
            "nothing stamped: the counters rule"
        );
        r.on_round_trip(at(0.0002), 150_000, 100, false);
        r.on_round_trip(at(1.0001), 120_000, 100, false);
        // The first interval's row, taken at 1.003 s and cut at its end, 1.0 s.
        assert_eq!(r.cut(Some(at(1.0))), Some((1, 100)));
        assert_eq!(r.interval.len(), 1);
        r.interval.clear();
        r.on_round_trip(at(1.9), 130_000, 100, false);
        assert_eq!(r.cut(Some(at(2.0))), Some((3, 300)));
        assert_eq!(r.interval.len(), 2, "the late burst and the next");
        assert_eq!(r.total.len(), 3);
        // The last row takes whatever is left.
        r.interval.clear();
        r.on_round_trip(at(2.5), 100_000, 100, true);
        assert_eq!(r.cut(None), Some((4, 400)));
        assert_eq!((r.interval.len(), r.idle.len(), r.total.len()), (1, 1, 3));
    }

    /// Without interval rows to drain them, stamped round trips are held up to a cap,
    /// the oldest then counted at once.
    #[test]
    fn stamped_round_trips_are_capped() {
        let t0 = crate::clock::Clock::now(&crate::clock::ManualClock::at_unix(1_700_000_000));
        let mut r = RttRecord::default();
        for _ in 0..MAX_PENDING + 10 {
            r.on_round_trip(t0, 1_000, 1, false);
        }
        assert_eq!(r.pending.len(), MAX_PENDING);
        assert_eq!(r.interval.len(), 10);
    }

    #[test]
    fn calls_count_writes_errors_and_binned_reads() {
        let c = CallCounters::default();
        assert_eq!(c.snapshot(), None, "no call yet");
        assert_eq!(c.wrote(Ok::<usize, io::Error>(1000)).unwrap(), 1000);
        c.wrote(Ok::<(), io::Error>(())).unwrap();
        let e = c.wrote::<usize>(Err(io::Error::from(io::ErrorKind::WouldBlock)));
        assert_eq!(e.unwrap_err().kind(), io::ErrorKind::WouldBlock);
        let _ = c.wrote::<usize>(Err(io::Error::from(io::ErrorKind::Interrupted)));
        assert_eq!(c.read(Ok(8), 64).unwrap(), 8);
        let _ = c.read(Ok(64), 64);
        let _ = c.read(Ok(0), 64); // end of stream: not a read
        let _ = c.read(Err(io::Error::from(io::ErrorKind::TimedOut)), 64);
        c.read_batch();
        let s = c.snapshot().unwrap();
        assert_eq!((s.writes, s.write_errors, s.reads), (2, 1, 3));
        assert_eq!(s.read_bins, [1, 0, 0, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn stamped_replies_count_clock_sync_errors() {
        let mut r = RttRecord::default();
        assert_eq!(r.clock_sync_errors, None);
        // Sent at 0, at the server 5..6 (its clock), back at 10: consistent.
        r.on_stamped_reply(0, 5, 6, 10);
        assert_eq!(r.clock_sync_errors, Some((0, 0)));
        // The server's clock 20 behind: the request "arrived" before it was sent.
        r.on_stamped_reply(0, -15, -14, 10);
        // The server's clock 20 ahead: the reply "left" after it came back.
        r.on_stamped_reply(0, 25, 26, 10);
        assert_eq!(r.clock_sync_errors, Some((2, 2)));
    }

    #[test]
    fn frame_record_reads_headers_and_latency() {
        let mut r = FrameRecord::new(true);
        let mut b = [0u8; IsochHeader::LEN + 10];
        IsochHeader {
            frame_id: 1,
            start_ns: 1_000,
            dgrams: 1,
            index: 0,
        }
        .write(&mut b);
        // Raw transit 5 000 ns, clock correction -1 000 ns: latency 4 µs.
        r.on_datagram(&b, 6_000, -1_000);
        assert_eq!(r.recv.counts().complete, 1);
        assert_eq!(r.total_latency.len(), 1);
        assert!((r.total_latency.stats().unwrap().mean_ms - 0.004).abs() < 1e-5);
        r.on_datagram(&b[..5], 7_000, 0); // too short: ignored
        assert_eq!(r.recv.counts().highest, 1);
    }
}
