//! Data-stream threads: one per stream, moving bytes as fast as allowed.
//!
//! Each loop is the driver of a stream machine (`engine::machine`: `TcpSender`,
//! `TcpReceiver`, `UdpSender`, `UdpReceiver`): the machine decides what goes next and
//! when, the loop makes the system call and reports what it did. The times the machines
//! are given come from the test's clock (`Worker::clock`).
//!
//! The hot loops touch only their own socket, their own buffer and their own counters:
//! cumulative totals are *stored* (not added) into per-stream atomics after each
//! write/read batch, so the control thread can sample them at any time without locks or
//! contention. UDP receive accounting sits behind a per-stream mutex taken once per
//! `recvmmsg` batch; only the control thread ever contends for it, once per interval.

use super::clock;
use super::disk_file::DiskFile;
use super::machine::tcp_recv::{TcpReceiver, TcpRecvStep};
use super::machine::tcp_send::{TcpSendConfig, TcpSendStep, TcpSender};
use super::machine::udp::{
    RecvSinks, SendAction, UdpReceiver, UdpSender, UdpSenderConfig, header_time,
};
use super::record::StreamShared;
use crate::clock::Clock;
use crate::responsive::{ROUND, ResponsiveRate};
use crate::sock::{self, Batch};
use crate::wire::{self, Bounceback};
use crate::wire::{EcnFeedback, UdpHeader};
use std::io::{self, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often a blocked data thread wakes to check whether it should stop.
pub const STOP_POLL: Duration = Duration::from_millis(50);

/// Bytes a TCP receiver asks for per read, whatever the sender's block size: reads
/// return what has arrived, so the size only sets how often the receiver frees buffer
/// space. Chosen by measurement (docs/benchmarks.md).
pub const TCP_READ_LEN: usize = 128 * 1024;

/// Messages per `sendmmsg` / `recvmmsg` call (each up to 128 datagrams with GSO/GRO).
pub(super) const UDP_BATCH: usize = 32;

pub use super::machine::Budget;

/// What a data thread needs besides its socket.
pub struct Worker {
    pub shared: Arc<StreamShared>,
    /// The test's monotonic clock ([`crate::engine::test_run::TestRun`]'s): every
    /// decision of the loop (a pacing time, a schedule, a deadline) reads it. The host's
    /// clock through `clock::mono_now` only bounds a wait on the kernel.
    pub clock: Arc<dyn Clock>,
    pub stop: Arc<AtomicBool>,
    pub block_len: usize,
    pub rate_bps: u64,
    pub burst: Option<u32>,
    pub budget: Option<Arc<Budget>>,
    pub payload: Arc<Vec<u8>>,
    pub udp_seq64: bool,
    pub zerocopy: Option<Arc<std::fs::File>>,
    pub skip_rx_copy: bool,
    /// What the kernel granted the stream's socket: `msg_zerocopy` (with `-Z`: send the
    /// payload with `MSG_ZEROCOPY` instead of `sendfile` from `zerocopy`'s file), `gso`
    /// (send GSO super-buffers), `gro` (walk coalesced receives), `rx_timestamps`,
    /// `busy_poll`.
    pub caps: sock::Capabilities,
    /// Request/response instead of bulk data: client side sends requests and times the
    /// replies; server side answers them.
    pub bounceback: Option<Bounceback>,
    /// `--trip-times` between netmeter peers: the UDP header's second timestamp field
    /// carries nanoseconds instead of microseconds.
    pub ts_ns: bool,
    /// Added to each raw one-way delay to remove the estimated clock offset.
    pub owd_correction_ns: i64,
    /// Send bursts or isochronous frames instead of a bulk stream (client senders).
    pub profile: Option<crate::profile::Profile>,
    /// Where a profile's unit grid starts: the test's start (else the thread's).
    pub schedule_origin: Option<Instant>,
    /// Where a bulk sender's `-b` schedule starts: when the side launched its stream
    /// threads, both ends running (`TEST_RUNNING`), else the thread's own start. A thread
    /// that starts late owes what it missed and makes it up (issue 19: 20 threads on a
    /// busy host started 20-40 ms into the test, 1-2 % of a 2 s test never sent). Not
    /// the test's start: an iperf3 server creates its receiving threads between
    /// `TEST_START` and `TEST_RUNNING`, and data owed for that gap would only fill its
    /// socket buffer before anyone reads it.
    pub pace_origin: Option<Instant>,
    /// A timed test's end (`-t` plus `-O`) after `schedule_origin`: no unit is due at or
    /// after it, and the `-b` pacer makes up what it owes before it.
    pub schedule_end: Option<Duration>,
    /// `--working-load`: bulk senders start at this instant; the probe files its
    /// round trips before it as idle and after it as loaded.
    pub load_start: Option<Instant>,
    /// `-F FILE` (TCP), opened once for the test and shared by its streams: a sender
    /// sends the file's next bytes and stops at its end; a receiver writes what it
    /// receives at the file's next offset (`disk_file`).
    pub file: Option<Arc<DiskFile>>,
    /// `--ecn-responsive` (negotiated): a UDP receiver returns its ECN counts once per
    /// round on its socket; a `-b` UDP sender reads them and paces at the responsive
    /// law's rate (`udp_feedback`).
    pub ecn_feedback: bool,
}

/// Fill a payload buffer: random bytes, or iperf2's repeating "0123456789".
pub fn make_payload(len: usize, repeating: bool) -> Vec<u8> {
    let mut v = vec![0u8; len];
    if repeating {
        for (i, b) in v.iter_mut().enumerate() {
            *b = b'0' + (i % 10) as u8;
        }
    } else if sock::random_bytes(&mut v).is_err() {
        // Fall back to a fixed pattern: payload content does not affect measurement.
        for (i, b) in v.iter_mut().enumerate() {
            *b = (i * 131 % 251) as u8;
        }
    }
    v
}

/// Wall-clock timestamp for the UDP header: seconds and microseconds (iperf3's format),
/// or seconds and nanoseconds when both ends are netmeter with `--trip-times`.
pub(super) fn wall_now(ns: bool) -> (u32, u32) {
    header_time(clock::wall_ns(), ns)
}

pub(super) fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Run `body` on a thread of its own named `name` (`nm-tcp-3`): its error, if any, is
/// kept as the stream's, its CPU use recorded, and the stream is marked finished when it
/// returns. Every data loop (bulk, request/response, profiled) runs under this.
pub fn spawn_loop(
    name: String,
    w: Worker,
    body: impl FnOnce(&Worker) -> io::Result<()> + Send + 'static,
) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(name).spawn(move || {
        let clock = crate::host::probe::ThreadClock::start();
        if let Err(e) = body(&w) {
            w.shared.fail(e);
        }
        let (cpu_s, wait_ns, wall_s) = clock.read();
        let s = &w.shared;
        if let Ok(mut slot) = s.thread_cpu.lock() {
            *slot = crate::host::facts::thread_cpu(s.id, s.sender, cpu_s, wait_ns, wall_s);
        }
        w.shared.finished.store(true, Ordering::Release);
    })
}

/// A data stream's socket as its thread gets it.
pub enum DataSock {
    Tcp(TcpStream),
    Udp(UdpSocket),
}

impl AsFd for DataSock {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            DataSock::Tcp(t) => t.as_fd(),
            DataSock::Udp(u) => u.as_fd(),
        }
    }
}

/// Start the thread of a bulk stream.
pub fn spawn(w: Worker, sock: DataSock) -> io::Result<JoinHandle<()>> {
    match sock {
        DataSock::Tcp(t) => spawn_tcp(w, t),
        DataSock::Udp(u) => spawn_udp(w, u),
    }
}

/// Start the thread of a bulk TCP stream.
pub fn spawn_tcp(w: Worker, sock: TcpStream) -> io::Result<JoinHandle<()>> {
    let name = format!("nm-tcp-{}", w.shared.id);
    spawn_loop(name, w, move |w| match (w.shared.sender, &w.file) {
        (true, Some(f)) if f.is_source() => tcp_send_file(w, f, sock),
        (true, _) => tcp_send(w, sock),
        (false, _) => tcp_recv(w, sock),
    })
}

/// A bulk TCP sender's thread: the machine ([`TcpSender`]) decides how long each block
/// is, when `-b` says wait and when the `-n`/`-k` budget or the file ends the stream;
/// this loop sleeps, stamps the `--trip-times` header and makes the system calls. Per
/// write: one `write`/`sendmsg`/`sendfile`, the budget taken for a new block and, only
/// when paced (or before `--working-load`'s start), one read of the worker's clock.
fn tcp_send(w: &Worker, mut sock: TcpStream) -> io::Result<()> {
    sock.set_write_timeout(Some(STOP_POLL))?;
    // --trip-times: every write starts with a frame header carrying its send time.
    let framed = w.ts_ns && w.zerocopy.is_none() && w.block_len >= wire::TCP_FRAME_HDR;
    let mut frame = if framed {
        w.payload.to_vec()
    } else {
        Vec::new()
    };
    // --working-load: the schedule starts with the load, not with the idle phase, and
    // nothing goes before it.
    let origin = (w.load_start.or(w.pace_origin)).unwrap_or_else(|| w.clock.now());
    let mut m = tcp_sender(w, origin, w.load_start.is_some(), framed);
    let mut zc = ZeroCopyState::default();
    let mut framed_now = false;
    while !w.stop.load(Ordering::Relaxed) {
        let (off, end) = match poll_sender(w, &mut m) {
            TcpSendStep::Write {
                offset,
                len,
                block_len,
                fresh,
                frame_ns,
            } => {
                if fresh {
                    framed_now = frame_ns.is_some();
                }
                if let Some(ns) = frame_ns {
                    wire::write_tcp_frame_header(&mut frame, block_len as u32, ns);
                }
                (offset, offset + len)
            }
            TcpSendStep::Wait(_) => continue,
            TcpSendStep::Stop => break,
        };
        let r = match &w.zerocopy {
            Some(_) if w.caps.msg_zerocopy => {
                sock::send_msg_zerocopy(sock.as_fd(), &w.payload[off..end])
            }
            Some(f) => sock::sendfile(sock.as_fd(), f.as_fd(), off as i64, end - off),
            None if framed_now => sock.write(&frame[off..end]),
            None => sock.write(&w.payload[off..end]),
        };
        match w.shared.calls.wrote(r) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "peer closed")),
            Ok(n) => {
                if m.on_written(n) {
                    w.shared.packets.store(m.blocks(), Ordering::Relaxed);
                }
                w.shared.bytes.store(m.bytes(), Ordering::Relaxed);
                if w.caps.msg_zerocopy {
                    zc.sent += 1;
                    zc.reap(&sock)?;
                }
            }
            // MSG_ZEROCOPY: too many sends await release (optmem_max); take the
            // completions and give the kernel a moment before sending again.
            Err(e) if w.caps.msg_zerocopy && e.raw_os_error() == Some(libc::ENOBUFS) => {
                if zc.reap(&sock)? == 0 {
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
            Err(e) if is_transient(&e) => {}
            Err(e) => return Err(e),
        }
    }
    if w.caps.msg_zerocopy {
        // The payload must outlive the kernel's use of its pages: wait (bounded) for
        // the last completions before the thread lets go of it. The host's clock: this
        // bounds waiting on the kernel, it decides nothing about the test.
        let deadline = crate::clock::mono_now() + Duration::from_secs(1);
        while zc.done.sends < zc.sent && crate::clock::mono_now() < deadline {
            if zc.reap(&sock)? == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        w.shared.zc_sends.store(zc.done.sends, Ordering::Relaxed);
        w.shared.zc_copied.store(zc.done.copied, Ordering::Relaxed);
    }
    Ok(())
}

/// The sender machine of a bulk TCP stream whose `-b` schedule starts at `origin`
/// (`hold`: nothing before it), its pacer told when a timed test ends. No `-t` end of
/// its own: the control thread ends the test (`w.stop`).
pub(super) fn tcp_sender(w: &Worker, origin: Instant, hold: bool, trip_times: bool) -> TcpSender {
    let pace_end = match (w.schedule_origin, w.schedule_end) {
        (Some(o), Some(e)) => Some((o + e).saturating_duration_since(origin)),
        _ => None,
    };
    let cfg = TcpSendConfig {
        block_len: w.block_len,
        rate_bps: w.rate_bps,
        burst: w.burst,
        end: None,
        pace_end,
        trip_times,
        hold_until_origin: hold,
    };
    TcpSender::new(cfg, origin)
}

/// The sender machine's next step: the worker's clock read only when the machine asks
/// (pacing, the start), the wall clock only for a frame header, a new block taken from
/// the `-n`/`-k` budget. A wait is slept here, at most [`STOP_POLL`].
fn poll_sender(w: &Worker, m: &mut TcpSender) -> TcpSendStep {
    poll_sender_taking(w, m, |n| w.budget.as_ref().map_or(n, |b| b.take(n)))
}

/// [`poll_sender`] with the new block's length from `take` (a driver whose block
/// heads have a size of their own: the iperf 2 client's).
pub(super) fn poll_sender_taking(
    w: &Worker,
    m: &mut TcpSender,
    take: impl FnOnce(usize) -> usize,
) -> TcpSendStep {
    let mut read = None;
    let step = m.poll(|| *read.insert(w.clock.now()), clock::wall_ns, take);
    if let TcpSendStep::Wait(until) = step {
        let now = read.unwrap_or(until);
        std::thread::sleep(until.saturating_duration_since(now).min(STOP_POLL));
    }
    step
}

/// `-F`: send the file's next bytes (the streams share the file: each byte goes out
/// once), `-b`-paced and within the `-n`/`-k` budget like any block, and stop at the end
/// of the file (iperf3's `diskfile_send`). The machine decides as for any block; the
/// file fills each new one and says how long it is.
fn tcp_send_file(w: &Worker, file: &DiskFile, mut sock: TcpStream) -> io::Result<()> {
    sock.set_write_timeout(Some(STOP_POLL))?;
    let mut buf = vec![0u8; w.block_len.max(1)];
    let origin = w.pace_origin.unwrap_or_else(|| w.clock.now());
    let mut m = tcp_sender(w, origin, false, false);
    while !w.stop.load(Ordering::Relaxed) {
        let (off, end) = match poll_sender(w, &mut m) {
            TcpSendStep::Write {
                offset, len, fresh, ..
            } if fresh => {
                let n = file.read_next(&mut buf[..len])?;
                m.source_gave(n);
                if n == 0 {
                    break; // the end of the file ends this sender
                }
                (offset, offset + n)
            }
            TcpSendStep::Write { offset, len, .. } => (offset, offset + len),
            TcpSendStep::Wait(_) => continue,
            TcpSendStep::Stop => break,
        };
        match sock.write(&buf[off..end]) {
            Ok(0) => break,
            Ok(n) => {
                if m.on_written(n) {
                    w.shared.packets.store(m.blocks(), Ordering::Relaxed);
                }
                w.shared.bytes.store(m.bytes(), Ordering::Relaxed);
            }
            Err(e) if is_transient(&e) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                ) =>
            {
                break;
            }
            Err(e) => return Err(e),
        }
    }
    // The client's test ends when this thread does (`client::test_should_end`): first
    // let the peer's kernel have the file's last bytes, which an iperf3 server that
    // stops reading at TEST_END would otherwise miss if still in flight (bounded: 1 s,
    // on the host's clock, as it bounds waiting on the kernel).
    let deadline = crate::clock::mono_now() + Duration::from_secs(1);
    while sock::tcp_outq(sock.as_fd()).is_ok_and(|n| n > 0) && crate::clock::mono_now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// `MSG_ZEROCOPY` bookkeeping of one sender: sends made, completions read.
#[derive(Default)]
struct ZeroCopyState {
    sent: u64,
    done: sock::ZeroCopyDone,
}

impl ZeroCopyState {
    /// Read pending completions; returns how many sends they released.
    fn reap(&mut self, sock: &TcpStream) -> io::Result<u64> {
        let d = sock::reap_zerocopy(sock.as_fd())?;
        self.done.sends += d.sends;
        self.done.copied += d.copied;
        Ok(d.sends)
    }
}

/// A bulk TCP receiver's thread: each read handed to the machine ([`TcpReceiver`]),
/// which counts it, finds the `--trip-times` frames and says when the sender closed.
/// Per read: one `read` (or `MSG_TRUNC` `recv`) and, only with `--trip-times`, one
/// wall-clock read for the frames it completes.
fn tcp_recv(w: &Worker, mut sock: TcpStream) -> io::Result<()> {
    sock.set_read_timeout(Some(STOP_POLL))?;
    // MSG_TRUNC reads copy nothing, so they take as much as the block (fewer calls).
    let rx = if w.skip_rx_copy {
        w.block_len.max(TCP_READ_LEN)
    } else {
        TCP_READ_LEN
    };
    // MSG_TRUNC reads need no buffer (the kernel writes nothing to it). The buffer is
    // page-aligned (the copy to user space is much faster) and exactly its own pages.
    let mut buf = sock::PageBuf::new(if w.skip_rx_copy { 0 } else { rx })?;
    // The stream has a one-way-delay record only with --trip-times (and a copy).
    let mut m = TcpReceiver::new(w.shared.owd.is_some());
    // -F: what arrives goes to the file (a source, with --bidir, is not written).
    let file = w.file.as_deref().filter(|f| !f.is_source());
    while !w.stop.load(Ordering::Relaxed) {
        let r = if w.skip_rx_copy {
            sock::recv_trunc(sock.as_fd(), rx)
        } else {
            sock.read(&mut buf)
        };
        let n = match w.shared.calls.read(r, rx) {
            Ok(n) => n,
            Err(e) if is_transient(&e) => continue,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break,
            Err(e) => return Err(e),
        };
        let step = match &w.shared.owd {
            Some(owd) => {
                // Write-to-read delay: from the write's start to its last byte here.
                let now = clock::wall_ns();
                let mut rec = owd.lock().unwrap_or_else(|p| p.into_inner());
                m.on_read(&buf[..n], |sent| {
                    rec.record_write(now, sent, w.owd_correction_ns)
                })
            }
            None => m.on_count(n),
        };
        if step == TcpRecvStep::Stop {
            break; // the sender closed: normal at the end of a test
        }
        if let Some(f) = file {
            f.write_next(&buf[..n])?;
        }
        w.shared.bytes.store(m.bytes(), Ordering::Relaxed);
        w.shared.packets.store(m.reads(), Ordering::Relaxed);
    }
    Ok(())
}

/// Start the thread of a bulk UDP stream.
pub fn spawn_udp(w: Worker, sock: UdpSocket) -> io::Result<JoinHandle<()>> {
    let name = format!("nm-udp-{}", w.shared.id);
    spawn_loop(name, w, move |w| match w.shared.sender {
        true => udp_send(w, &sock),
        false => udp_recv(w, &sock),
    })
}

/// Datagrams packed into one GSO send: as many as fit in one 64 KiB UDP payload, up to
/// the kernel's `UDP_MAX_SEGMENTS` (128 since Linux 6.13; a send over an older kernel's
/// 64 is refused with EINVAL, and the sender then uses [`GSO_SEGMENTS_OLD_KERNEL`]).
/// Only datagrams under 508 bytes reach more than 64: for 64-byte datagrams 128 per send
/// halves the sends, as iperf3 3.22's `--gsro` does.
pub fn gso_segments(len: usize) -> usize {
    (65_000 / len.max(1)).clamp(1, 128)
}

/// `UDP_MAX_SEGMENTS` before Linux 6.13.
pub const GSO_SEGMENTS_OLD_KERNEL: usize = 64;

/// The sender machine of a UDP stream whose `-b` schedule starts at `origin`.
fn udp_sender(w: &Worker, origin: Instant) -> UdpSender {
    let pace_end = match (w.schedule_origin, w.schedule_end) {
        (Some(o), Some(e)) => Some((o + e).saturating_duration_since(origin)),
        _ => None,
    };
    let cfg = UdpSenderConfig {
        len: w.block_len,
        seq64: w.udp_seq64,
        ts_ns: w.ts_ns,
        rate_bps: w.rate_bps,
        burst: w.burst,
        pace_end,
        // The control thread ends the test (`w.stop`).
        stop_at: None,
    };
    UdpSender::new(cfg, w.budget.clone())
}

/// Send buffers for `segs` datagrams of `len` bytes each, filled with the payload.
fn udp_send_bufs(payload: &[u8], len: usize, segs: usize) -> Vec<Vec<u8>> {
    (0..UDP_BATCH)
        .map(|_| {
            let mut b = Vec::with_capacity(len * segs);
            while b.len() < len * segs {
                let take = (len * segs - b.len()).min(payload.len().max(1));
                b.extend_from_slice(&payload[..take.min(payload.len())]);
                if payload.is_empty() {
                    b.resize(len * segs, 0);
                }
            }
            b
        })
        .collect()
}

/// What one round of `sendmmsg` calls came to.
enum Sent {
    /// This many messages went (all, or fewer when stopped).
    Messages(usize),
    /// The kernel refused this segmentation before anything went: send again with
    /// `segs` datagrams per message.
    Retry { segs: usize },
}

/// Send `refs` (messages of `segs` datagrams each) until all went or the stream stops.
/// `first`: nothing has been sent on this socket yet (a refused segmentation can still
/// be changed).
fn udp_send_round(
    w: &Worker,
    fd: std::os::fd::BorrowedFd<'_>,
    batch: &mut Batch,
    refs: &[&[u8]],
    segs: usize,
    first: bool,
) -> io::Result<Sent> {
    let msgs = refs.len();
    let mut sent_msgs = 0;
    while sent_msgs < msgs && !w.stop.load(Ordering::Relaxed) {
        match w.shared.calls.wrote(batch.send(fd, &refs[sent_msgs..])) {
            Ok(k) => sent_msgs += k,
            Err(e) if is_transient(&e) => {
                // The send timeout passed with the buffer still full: the socket,
                // not the pacer, held the sender back (the shortfall rule's cause).
                if e.kind() != io::ErrorKind::Interrupted {
                    w.shared.send_blocked.fetch_add(1, Ordering::Relaxed);
                }
            }
            // A receiver that has not started yet or an ICMP error bounced back:
            // the datagram is gone, like any other loss; keep going.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => sent_msgs = msgs,
            Err(e)
                if segs > GSO_SEGMENTS_OLD_KERNEL
                    && first
                    && e.raw_os_error() == Some(libc::EINVAL) =>
            {
                // A kernel older than 6.13 takes at most 64 segments per send.
                return Ok(Sent::Retry {
                    segs: GSO_SEGMENTS_OLD_KERNEL,
                });
            }
            Err(_) if segs > 1 && first => {
                // The path refused segmentation offload (EIO/EINVAL): plain sends.
                sock::set_udp_gso(fd, 0);
                return Ok(Sent::Retry { segs: 1 });
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Sent::Messages(sent_msgs))
}

/// A UDP sender's thread: the machine ([`UdpSender`]) decides how many datagrams go
/// and numbers them; this loop sleeps, stamps and makes the system calls.
fn udp_send(w: &Worker, sock: &UdpSocket) -> io::Result<()> {
    sock.set_write_timeout(Some(STOP_POLL))?;
    let fd = sock.as_fd();
    // The schedule starts with the side's launch: what a late thread start missed is
    // made up, paced (`pacing`), like any stall.
    let origin = w.pace_origin.unwrap_or_else(|| w.clock.now());
    let mut m = udp_sender(w, origin);
    let len = m.datagram_len();
    // UDP GSO: the kernel cuts each send into `len`-byte datagrams. Probed when the
    // stream was set up; dropped here if the first send says the path cannot do it.
    let mut segs = if w.caps.gso { gso_segments(len) } else { 1 };
    let mut bufs = udp_send_bufs(&w.payload, len, segs);
    let mut batch = Batch::new(UDP_BATCH);
    let mut fell_back = false;
    let mut law = (w.ecn_feedback && w.rate_bps > 0).then(|| ResponsiveRate::new(w.rate_bps));
    // A responsive sender wakes at least once a round to read its feedback.
    let nap = if law.is_some() { ROUND } else { STOP_POLL };
    while !w.stop.load(Ordering::Relaxed) {
        let now = w.clock.now().saturating_duration_since(origin);
        if let Some(l) = law.as_mut()
            && l.read_due(now)
        {
            udp_feedback(fd, l, &mut m, now);
        }
        let n = match m.poll(now, UDP_BATCH * segs) {
            SendAction::Send(n) => n,
            SendAction::Wait(wait) => {
                std::thread::sleep(wait.min(nap));
                continue;
            }
            SendAction::Stop => break,
        };
        // Pack n datagrams into messages of up to `segs` datagrams each.
        let wall = clock::wall_ns();
        let msgs = n.div_ceil(segs);
        let mut counts = [0usize; UDP_BATCH];
        for (i, buf) in bufs.iter_mut().take(msgs).enumerate() {
            counts[i] = segs.min(n - i * segs);
            m.write_headers(buf, i * segs, counts[i], wall);
        }
        let refs: Vec<&[u8]> = (0..msgs).map(|i| &bufs[i][..counts[i] * len]).collect();
        let first = m.bytes() == 0 && !fell_back;
        let sent_msgs = match udp_send_round(w, fd, &mut batch, &refs, segs, first)? {
            Sent::Messages(k) => k,
            Sent::Retry { segs: fewer } => {
                // Send this round again with fewer segments per send or without GSO;
                // its sequence numbers were not used.
                fell_back = fewer == 1;
                segs = fewer;
                m.unsend(n);
                continue;
            }
        };
        m.on_sent(counts[..sent_msgs].iter().sum(), sent_msgs);
        w.shared.bytes.store(m.bytes(), Ordering::Relaxed);
        w.shared.packets.store(m.datagrams(), Ordering::Relaxed);
        w.shared.messages.store(m.messages(), Ordering::Relaxed);
        if let Some(lag_us) = m.pacing_lag_us() {
            w.shared.pacing_lag_us.store(lag_us, Ordering::Relaxed);
        }
    }
    Ok(())
}

/// Read the feedback datagrams waiting on a responsive sender's socket (at most a
/// batch's worth a call; the caller comes once a round, `ResponsiveRate::read_due`),
/// feed them to the law and pace at its rate.
fn udp_feedback(
    fd: std::os::fd::BorrowedFd<'_>,
    law: &mut ResponsiveRate,
    m: &mut UdpSender,
    now: Duration,
) {
    let before = law.rate();
    let mut buf = [0u8; 64];
    for _ in 0..UDP_BATCH {
        match sock::recv_nowait(fd, &mut buf) {
            Ok(n) => {
                if let Some(f) = EcnFeedback::parse(&buf[..n]) {
                    law.on_feedback(now, f.0);
                }
            }
            // Nothing waiting, or an ICMP error of the peer not yet listening.
            Err(_) => break,
        }
    }
    law.on_silence(now, Duration::ZERO);
    let rate = law.rate();
    if rate != before {
        m.set_rate(now, rate);
    }
}

/// A UDP receiver's thread: `recvmmsg` batches handed to the machine
/// ([`UdpReceiver`]) with their arrival times.
fn udp_recv(w: &Worker, sock: &UdpSocket) -> io::Result<()> {
    // A receiver returning ECN feedback wakes at least once a round to send it.
    sock.set_read_timeout(Some(if w.ecn_feedback { ROUND } else { STOP_POLL }))?;
    let hdr_len = UdpHeader::len(w.udp_seq64);
    // With GRO a message holds many datagrams (up to 64 KiB); without, one.
    let buf_len = if w.caps.gro {
        65_536 + 4096
    } else {
        w.block_len.max(hdr_len) + 64
    };
    let mut bufs = vec![vec![0u8; buf_len]; UDP_BATCH];
    let mut got = Vec::with_capacity(UDP_BATCH);
    let mut batch = Batch::new(UDP_BATCH);
    let fd = sock.as_fd();
    let Some(udp) = w.shared.udp.as_ref() else {
        return Ok(());
    };
    let mut m = UdpReceiver::new(w.udp_seq64, w.ts_ns, w.owd_correction_ns);
    // Per-datagram kernel arrival times for jitter (`caps.rx_timestamps`, switched on
    // when the stream was set up): one clock read after `recvmmsg` returns would give
    // every datagram of a batch the same time and add this thread's wake-up latency to
    // its transit. That read remains the fallback.
    let owd = w.shared.owd.as_ref();
    let frames = w.shared.frames.as_ref();
    let skew = clock::test_offset_ns();
    let mut next_feedback = w.clock.now() + ROUND;
    while !w.stop.load(Ordering::Relaxed) {
        if w.ecn_feedback && w.clock.now() >= next_feedback {
            // Once a round, the counts so far back to the sender (lost ones cost
            // nothing: they are cumulative).
            let counts = udp.lock().unwrap_or_else(|p| p.into_inner()).counts().ecn;
            let _ = sock.send(&EcnFeedback(counts.unwrap_or_default()).encode());
            next_feedback = w.clock.now() + ROUND;
        }
        match batch.recv_segments(fd, &mut bufs, &mut got) {
            Ok(()) => {
                let now_ns = clock::wall_ns();
                let mut acc = udp.lock().unwrap_or_else(|p| p.into_inner());
                let mut owd_rec = owd.map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
                let mut frame_rec = frames.map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
                let mut sinks = RecvSinks {
                    acc: &mut acc,
                    owd: owd_rec.as_deref_mut(),
                    frames: frame_rec.as_deref_mut(),
                };
                for (buf, r) in bufs.iter().zip(got.iter()) {
                    // The kernel's arrival stamp (on the same, possibly test-skewed,
                    // clock as our own readings), else the time recvmmsg returned.
                    let rx_ns = r.stamp.map_or(now_ns, |t| t.as_nanos() as i64 + skew);
                    let n =
                        m.on_message(&buf[..r.len.min(buf.len())], r.segment, rx_ns, &mut sinks);
                    if let Some(tos) = r.tos {
                        sinks.acc.on_ecn(tos, n);
                    }
                }
                drop(frame_rec);
                drop(owd_rec);
                drop(acc);
                w.shared.bytes.store(m.bytes(), Ordering::Relaxed);
                w.shared.packets.store(m.datagrams(), Ordering::Relaxed);
                w.shared.messages.store(m.messages(), Ordering::Relaxed);
                // Counted after the datagrams, so no sample sees more reads than data.
                w.shared.calls.read_batch();
            }
            Err(e) if is_transient(&e) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Write all of `buf` unless asked to stop; `Ok(false)` when stopped or the peer left.
pub(super) fn write_full(sock: &mut TcpStream, buf: &[u8], stop: &AtomicBool) -> io::Result<bool> {
    write_full_counted(sock, buf, stop, None)
}

/// [`write_full`], each write counted in `calls` when given (iperf 2's Write/Err).
pub(super) fn write_full_counted(
    sock: &mut TcpStream,
    buf: &[u8],
    stop: &AtomicBool,
    calls: Option<&super::record::CallCounters>,
) -> io::Result<bool> {
    let mut off = 0;
    while off < buf.len() {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let r = sock.write(&buf[off..]);
        let r = match calls {
            Some(c) => c.wrote(r),
            None => r,
        };
        match r {
            Ok(0) => return Ok(false),
            Ok(n) => off += n,
            Err(e) if is_transient(&e) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                ) =>
            {
                return Ok(false);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gso_sends_fill_64_kib_up_to_128_segments() {
        assert_eq!(gso_segments(64), 128);
        assert_eq!(gso_segments(507), 128);
        assert_eq!(gso_segments(600), 108);
        assert_eq!(gso_segments(1448), 44);
        assert_eq!(gso_segments(65_000), 1);
        assert_eq!(gso_segments(0), 128);
    }

    #[test]
    fn repeating_payload_pattern() {
        assert_eq!(&make_payload(12, true), b"012345678901");
    }
}
