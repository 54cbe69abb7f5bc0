//! Data-stream threads: one per stream, moving bytes as fast as allowed.
//!
//! The hot loops touch only their own socket, their own buffer and their own counters:
//! cumulative totals are *stored* (not added) into per-stream atomics after each
//! write/read batch, so the control thread can sample them at any time without locks or
//! contention. UDP receive accounting sits behind a per-stream mutex taken once per
//! `recvmmsg` batch; only the control thread ever contends for it, once per interval.

use super::clock;
use super::disk_file::DiskFile;
use super::record::StreamShared;
use crate::pacing::Pacer;
use crate::sock::{self, Batch};
use crate::wire::UdpHeader;
use crate::wire::{self, Bounceback};
use std::io::{self, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
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

/// A shared byte or block budget for `-n` / `-k` tests, per direction.
#[derive(Debug)]
pub struct Budget {
    pub remaining: AtomicI64,
    pub blocks: bool,
}

impl Budget {
    /// Take up to `want` units; returns how many may be sent (0 = budget exhausted).
    pub(super) fn take(&self, want: usize) -> usize {
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
}

/// What a data thread needs besides its socket.
pub struct Worker {
    pub shared: Arc<StreamShared>,
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
    let t = clock::wall_ns();
    let (sec, sub) = (t.div_euclid(1_000_000_000), t.rem_euclid(1_000_000_000));
    (
        sec as u32,
        if ns { sub as u32 } else { (sub / 1000) as u32 },
    )
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

fn tcp_send(w: &Worker, mut sock: TcpStream) -> io::Result<()> {
    sock.set_write_timeout(Some(STOP_POLL))?;
    if let Some(at) = w.load_start {
        // --working-load: stay quiet while the probe measures the idle path.
        while Instant::now() < at && !w.stop.load(Ordering::Relaxed) {
            std::thread::sleep(at.saturating_duration_since(Instant::now()).min(STOP_POLL));
        }
    }
    // --trip-times: every write starts with a frame header carrying its send time.
    let framed = w.ts_ns && w.zerocopy.is_none() && w.block_len >= wire::TCP_FRAME_HDR;
    let mut frame = if framed {
        w.payload.to_vec()
    } else {
        Vec::new()
    };
    // --working-load: the schedule starts with the load, not with the idle phase.
    let origin = (w.load_start.or(w.pace_origin)).unwrap_or_else(Instant::now);
    let mut pacer = pacer(w, w.block_len, origin);
    let (mut bytes, mut blocks) = (0u64, 0u64);
    let mut zc = ZeroCopyState::default();
    while !w.stop.load(Ordering::Relaxed) {
        let len = match next_block(w, &mut pacer, origin) {
            Next::Wait => continue,
            Next::Done => break,
            Next::Block(n) => n,
        };
        let framed_now = framed && len >= wire::TCP_FRAME_HDR;
        if framed_now {
            wire::write_tcp_frame_header(&mut frame, len as u32, clock::wall_ns());
        }
        let mut off = 0;
        while off < len && !w.stop.load(Ordering::Relaxed) {
            let r = match &w.zerocopy {
                Some(_) if w.caps.msg_zerocopy => {
                    sock::send_msg_zerocopy(sock.as_fd(), &w.payload[off..len])
                }
                Some(f) => sock::sendfile(sock.as_fd(), f.as_fd(), off as i64, len - off),
                None if framed_now => sock.write(&frame[off..len]),
                None => sock.write(&w.payload[off..len]),
            };
            match w.shared.calls.wrote(r) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "peer closed")),
                Ok(n) => {
                    off += n;
                    bytes += n as u64;
                    w.shared.bytes.store(bytes, Ordering::Relaxed);
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
        blocks += 1;
        w.shared.packets.store(blocks, Ordering::Relaxed);
    }
    if w.caps.msg_zerocopy {
        // The payload must outlive the kernel's use of its pages: wait (bounded) for
        // the last completions before the thread lets go of it.
        let deadline = Instant::now() + Duration::from_secs(1);
        while zc.done.sends < zc.sent && Instant::now() < deadline {
            if zc.reap(&sock)? == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        w.shared.zc_sends.store(zc.done.sends, Ordering::Relaxed);
        w.shared.zc_copied.store(zc.done.copied, Ordering::Relaxed);
    }
    Ok(())
}

/// The `-b` pacer of a bulk sender (none unpaced) whose clock starts at `origin`, told
/// when a timed test ends.
fn pacer(w: &Worker, unit: usize, origin: Instant) -> Option<Pacer> {
    (w.rate_bps > 0).then(|| {
        let p = Pacer::new(w.rate_bps, unit, w.burst, 0.0);
        match (w.schedule_origin, w.schedule_end) {
            (Some(o), Some(e)) => {
                let end = (o + e).saturating_duration_since(origin);
                p.ending_at(end.as_secs_f64())
            }
            _ => p,
        }
    })
}

/// A bulk TCP sender's next step ([`next_block`]).
enum Next {
    /// The pacer said wait (slept for up to [`STOP_POLL`]): ask again.
    Wait,
    /// Send a block of this many bytes.
    Block(usize),
    /// The `-n`/`-k` budget is spent.
    Done,
}

/// Pace (`-b`) and budget (`-n`/`-k`) the next block of a bulk TCP sender.
fn next_block(w: &Worker, pacer: &mut Option<Pacer>, origin: Instant) -> Next {
    if let Some(p) = pacer.as_mut() {
        let wait = p.poll(origin.elapsed().as_secs_f64(), w.block_len);
        if !wait.is_zero() {
            std::thread::sleep(wait.min(STOP_POLL));
            return Next::Wait;
        }
    }
    match &w.budget {
        Some(b) => match b.take(w.block_len) {
            0 => Next::Done,
            n => Next::Block(n),
        },
        None => Next::Block(w.block_len),
    }
}

/// `-F`: send the file's next bytes (the streams share the file: each byte goes out
/// once), `-b`-paced and within the `-n`/`-k` budget like any block, and stop at the end
/// of the file (iperf3's `diskfile_send`).
fn tcp_send_file(w: &Worker, file: &DiskFile, mut sock: TcpStream) -> io::Result<()> {
    sock.set_write_timeout(Some(STOP_POLL))?;
    let mut buf = vec![0u8; w.block_len];
    let origin = w.pace_origin.unwrap_or_else(Instant::now);
    let mut pacer = pacer(w, w.block_len, origin);
    let (mut bytes, mut blocks) = (0u64, 0u64);
    while !w.stop.load(Ordering::Relaxed) {
        let want = match next_block(w, &mut pacer, origin) {
            Next::Wait => continue,
            Next::Done => break,
            Next::Block(n) => n,
        };
        let n = file.read_next(&mut buf[..want])?;
        if n == 0 {
            break; // the end of the file ends this sender
        }
        if !write_full(&mut sock, &buf[..n], &w.stop)? {
            break;
        }
        bytes += n as u64;
        blocks += 1;
        w.shared.bytes.store(bytes, Ordering::Relaxed);
        w.shared.packets.store(blocks, Ordering::Relaxed);
    }
    // The client's test ends when this thread does (`client::test_should_end`): first
    // let the peer's kernel have the file's last bytes, which an iperf3 server that
    // stops reading at TEST_END would otherwise miss if still in flight (bounded: 1 s).
    let deadline = Instant::now() + Duration::from_secs(1);
    while sock::tcp_outq(sock.as_fd()).is_ok_and(|n| n > 0) && Instant::now() < deadline {
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
    let (mut bytes, mut reads) = (0u64, 0u64);
    let mut frames = wire::TcpFrameParser::default();
    // -F: what arrives goes to the file (a source, with --bidir, is not written).
    let file = w.file.as_deref().filter(|f| !f.is_source());
    while !w.stop.load(Ordering::Relaxed) {
        let r = if w.skip_rx_copy {
            sock::recv_trunc(sock.as_fd(), rx)
        } else {
            sock.read(&mut buf)
        };
        match w.shared.calls.read(r, rx) {
            Ok(0) => break, // the sender closed: normal at the end of a test
            Ok(n) => {
                if let Some(f) = file {
                    f.write_next(&buf[..n])?;
                }
                bytes += n as u64;
                reads += 1;
                w.shared.bytes.store(bytes, Ordering::Relaxed);
                w.shared.packets.store(reads, Ordering::Relaxed);
                if let Some(owd) = &w.shared.owd {
                    // Write-to-read delay: from the write's start to its last byte here.
                    let now = clock::wall_ns();
                    let mut rec = owd.lock().unwrap_or_else(|p| p.into_inner());
                    frames.feed(&buf[..n], |sent| {
                        rec.record_write(now, sent, w.owd_correction_ns)
                    });
                }
            }
            Err(e) if is_transient(&e) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break,
            Err(e) => return Err(e),
        }
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

fn udp_send(w: &Worker, sock: &UdpSocket) -> io::Result<()> {
    sock.set_write_timeout(Some(STOP_POLL))?;
    let fd = sock.as_fd();
    let hdr_len = UdpHeader::len(w.udp_seq64);
    let len = w.block_len.max(hdr_len);
    // UDP GSO: the kernel cuts each send into `len`-byte datagrams. Probed when the
    // stream was set up; dropped here if the first send says the path cannot do it.
    let mut segs = if w.caps.gso { gso_segments(len) } else { 1 };
    let burst = w.burst.map(|b| b as usize).unwrap_or(1).max(1);
    let mut bufs: Vec<Vec<u8>> = (0..UDP_BATCH)
        .map(|_| {
            let mut b = Vec::with_capacity(len * segs);
            while b.len() < len * segs {
                let take = (len * segs - b.len()).min(w.payload.len().max(1));
                b.extend_from_slice(&w.payload[..take.min(w.payload.len())]);
                if w.payload.is_empty() {
                    b.resize(len * segs, 0);
                }
            }
            b
        })
        .collect();
    let mut batch = Batch::new(UDP_BATCH);
    // The schedule starts with the side's launch: what a late thread start missed is
    // made up, paced (`pacing`), like any stall.
    let origin = w.pace_origin.unwrap_or_else(Instant::now);
    let mut pacer = pacer(w, len, origin);
    let mut seq: u64 = 0;
    let mut bytes = 0u64;
    let mut messages = 0u64;
    let mut fell_back = false;
    while !w.stop.load(Ordering::Relaxed) {
        let max_now = UDP_BATCH * segs;
        // How many datagrams may go now: what the pacer grants, or a full batch.
        let mut n = match pacer.as_mut() {
            Some(p) => match p.grant(origin.elapsed().as_secs_f64(), len, burst, max_now) {
                Ok(k) => k,
                Err(wait) => {
                    std::thread::sleep(wait.min(STOP_POLL));
                    continue;
                }
            },
            None => max_now,
        };
        if let Some(b) = &w.budget {
            let mut allowed = 0;
            while allowed < n && b.take(len) == len {
                allowed += 1;
            }
            if allowed == 0 {
                break;
            }
            n = allowed;
        }
        // Pack n datagrams into messages of up to `segs` datagrams each.
        let (sec, usec) = wall_now(w.ts_ns);
        let msgs = n.div_ceil(segs);
        let mut counts = [0usize; UDP_BATCH];
        for (m, buf) in bufs.iter_mut().take(msgs).enumerate() {
            let k = segs.min(n - m * segs);
            counts[m] = k;
            for j in 0..k {
                UdpHeader {
                    sec,
                    usec,
                    seq: seq + 1 + (m * segs + j) as u64,
                }
                .write(&mut buf[j * len..], w.udp_seq64);
            }
        }
        let refs: Vec<&[u8]> = (0..msgs).map(|m| &bufs[m][..counts[m] * len]).collect();
        let mut sent_msgs = 0;
        // Set when the kernel refused this round's segmentation before anything went.
        let mut resend = false;
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
                        && bytes == 0
                        && e.raw_os_error() == Some(libc::EINVAL) =>
                {
                    // A kernel older than 6.13 takes at most 64 segments per send.
                    segs = GSO_SEGMENTS_OLD_KERNEL;
                    resend = true;
                    break;
                }
                Err(e) if segs > 1 && !fell_back && bytes == 0 => {
                    // The path refused segmentation offload (EIO/EINVAL): plain sends.
                    let _ = e;
                    sock::set_udp_gso(fd, 0);
                    segs = 1;
                    fell_back = true;
                    resend = true;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        if resend {
            // Re-send this round with fewer segments per send or without GSO; the
            // sequence numbers were not used.
            if let Some(b) = &w.budget {
                b.remaining.fetch_add(n as i64, Ordering::Relaxed);
            }
            continue;
        }
        let sent: usize = counts[..sent_msgs].iter().sum();
        seq += sent as u64;
        bytes += (sent * len) as u64;
        messages += sent_msgs as u64;
        w.shared.bytes.store(bytes, Ordering::Relaxed);
        w.shared.packets.store(seq, Ordering::Relaxed);
        w.shared.messages.store(messages, Ordering::Relaxed);
        if let Some(p) = &pacer {
            let lag_us = (p.max_lag_s() * 1e6) as u64;
            w.shared
                .pacing_lag_us
                .store(lag_us.max(1), Ordering::Relaxed);
        }
    }
    Ok(())
}

fn udp_recv(w: &Worker, sock: &UdpSocket) -> io::Result<()> {
    sock.set_read_timeout(Some(STOP_POLL))?;
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
    let mut bytes = 0u64;
    let mut datagrams = 0u64;
    let mut messages = 0u64;
    let Some(udp) = w.shared.udp.as_ref() else {
        return Ok(());
    };
    // Per-datagram kernel arrival times for jitter (`caps.rx_timestamps`, switched on
    // when the stream was set up): one clock read after `recvmmsg` returns would give
    // every datagram of a batch the same time and add this thread's wake-up latency to
    // its transit. That read remains the fallback.
    let owd = w.shared.owd.as_ref();
    let skew = clock::test_offset_ns();
    while !w.stop.load(Ordering::Relaxed) {
        match w
            .shared
            .calls
            .read_batch(batch.recv_segments(fd, &mut bufs, &mut got))
        {
            Ok(()) => {
                let now_ns = clock::wall_ns();
                let mut acc = match udp.lock() {
                    Ok(g) => g,
                    Err(p) => p.into_inner(),
                };
                let mut owd_rec = owd.map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
                let frames = w.shared.frames.as_ref();
                let mut frame_rec = frames.map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
                for (buf, r) in bufs.iter().zip(got.iter()) {
                    // The kernel's arrival stamp (on the same, possibly test-skewed,
                    // clock as our own readings), else the time recvmmsg returned.
                    let rx_ns = r.stamp.map_or(now_ns, |t| t.as_nanos() as i64 + skew);
                    let stride = if r.segment > 0 {
                        r.segment
                    } else {
                        r.len.max(1)
                    };
                    let before = datagrams;
                    let mut off = 0;
                    while off < r.len {
                        let end = (off + stride).min(r.len);
                        // Short datagrams are repeated connect messages, not data.
                        if let Ok(h) = UdpHeader::read(&buf[off..end], w.udp_seq64) {
                            bytes += (end - off) as u64;
                            datagrams += 1;
                            let raw_ns = rx_ns.saturating_sub(h.send_ns(w.ts_ns, rx_ns));
                            acc.on_datagram(h.seq, raw_ns as f64 / 1e9);
                            if let Some(o) = owd_rec.as_mut() {
                                o.record_at(rx_ns, raw_ns, w.owd_correction_ns);
                            }
                            if let Some(f) = frame_rec.as_mut() {
                                f.on_datagram(&buf[off + hdr_len..end], rx_ns, w.owd_correction_ns);
                            }
                        }
                        off = end;
                    }
                    // A message that held only repeated connect datagrams carried no data.
                    if datagrams > before {
                        messages += 1;
                    }
                }
                drop(frame_rec);
                drop(owd_rec);
                drop(acc);
                w.shared.bytes.store(bytes, Ordering::Relaxed);
                w.shared.packets.store(datagrams, Ordering::Relaxed);
                w.shared.messages.store(messages, Ordering::Relaxed);
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
    let mut off = 0;
    while off < buf.len() {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        match sock.write(&buf[off..]) {
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
    fn budget_splits_bytes_exactly() {
        let b = Budget {
            remaining: AtomicI64::new(250),
            blocks: false,
        };
        assert_eq!(b.take(100), 100);
        assert_eq!(b.take(100), 100);
        assert_eq!(b.take(100), 50);
        assert_eq!(b.take(100), 0);
        let k = Budget {
            remaining: AtomicI64::new(2),
            blocks: true,
        };
        assert_eq!((k.take(10), k.take(10), k.take(10)), (10, 10, 0));
    }

    #[test]
    fn repeating_payload_pattern() {
        assert_eq!(&make_payload(12, true), b"012345678901");
    }
}
