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
use crate::stats::{UdpCounts, UdpRecv};
use crate::wire::IsochHeader;
use std::io;
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, Weak};

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
    /// MSG_ZEROCOPY senders: sends the kernel released, and of those the ones it copied
    /// anyway (stored when the thread ends).
    pub zc_sends: AtomicU64,
    pub zc_copied: AtomicU64,
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
