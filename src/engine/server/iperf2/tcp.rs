//! One iperf 2 TCP connection, once the door has read its header: the header
//! acknowledgement when the client waits for one (with `--trip-times`' timestamps),
//! then the data: read and counted, or (`-R`) sent on the same socket, or both
//! (`--full-duplex`), until the client's `-t`/`-n`, the client's close, or this
//! server's limits (deadline, idle, rate, shutdown).

use super::print::{BackSock, Printer};
use super::udp::TransitStats;
use super::{Flow, Group, Plan, over_limit};
use crate::wire::iperf2::{AckTimes, HdrAck, TestHdr, VERSION_L, VERSION_U, Version};
use crate::wire::iperf2::{Amount, ClientHdr, TCP_BURST_LEN, TcpBurstHdr};
use crate::wire::iperf2::{BurstFramer, HEADER_VERSION2, Legacy, UPPER_REVERSE, UPPER_TRIPTIME};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How often a blocked read or write looks at the deadline and the shutdown flag.
const TICK: Duration = Duration::from_millis(100);
/// After sending (`-R`), how long to wait for the client to close.
const LINGER: Duration = Duration::from_secs(2);

/// Seconds and microseconds since the epoch, as iperf 2's timestamps are.
pub(super) fn sec_usec(t: SystemTime) -> (u32, u32) {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    (d.as_secs() as u32, d.subsec_micros())
}

/// The version this server names in its acknowledgement (iperf 2.1.8, as netmeter's
/// client does: the release whose layouts it writes).
pub fn our_version() -> Version {
    Version::from_words(VERSION_U, VERSION_L).unwrap_or(Version {
        major: 2,
        minor: 1,
        patch: 8,
        kind: 3,
    })
}

/// Why a connection's loop stopped, when it was not the test's own end. The deadline
/// counts from the group's start (`-r`'s two legs and `-P`'s members share it), on the
/// server's clock.
pub(super) fn stop_reason(g: &Group, plan: &Plan, last_move: Instant) -> Option<String> {
    let now = g.now();
    if g.shared().shutdown.load(Ordering::Relaxed) || g.shared().signalled() {
        return Some("the server is stopping".into());
    }
    if let Some(d) = plan.deadline
        && now.saturating_duration_since(g.started) > d
    {
        return Some(format!(
            "ended after {} s (its -t with grace, or --server-max-duration)",
            d.as_secs()
        ));
    }
    if now.duration_since(last_move) > plan.idle {
        return Some(format!("no data moved for {} s", plan.idle.as_secs()));
    }
    if let Some(limit) = plan.limit_bps
        && over_limit(g.total(), now.saturating_duration_since(g.started), limit)
    {
        return Some(format!(
            "its rate exceeded this server's limit of {limit} bit/s (--server-bitrate-limit)"
        ));
    }
    None
}

/// Serve one connection. `early` counts the bytes the door read (the header and any
/// data after it).
pub(in crate::engine::server) fn serve(
    g: Arc<Group>,
    mut sock: TcpStream,
    h: &TestHdr,
    plan: &Plan,
    early: usize,
    accepted: SystemTime,
) {
    g.received.fetch_add(early as u64, Ordering::Relaxed);
    let _ = sock.set_read_timeout(Some(TICK));
    let _ = sock.set_write_timeout(Some(TICK));
    if h.wants_ack() {
        let times = h.start.filter(|_| h.trip_times()).map(|sent| AckTimes {
            sent,
            sent_rx: sec_usec(accepted),
            ack: sec_usec(g.wall()),
        });
        let ack = HdrAck {
            version: our_version(),
            times,
        };
        let _ = sock.set_nodelay(true);
        if let Err(e) = sock.write_all(&ack.encode()) {
            g.failed(format!("cannot send the header acknowledgement: {e}"));
            return;
        }
        let _ = sock.set_nodelay(false);
    }
    let peer = sock.peer_addr().ok();
    let mut owd = h.trip_times().then(Owd::default);
    // `netmeter iperf2 -s`: what this side reads, in iperf 2's server layout (the
    // header's bytes, read by the door, as the first read).
    // A `--full-duplex` test's sending half has its own (`tx_printer`).
    let (mut printer, mut tx_printer) = match (plan.flow, plan.legacy, sock.local_addr(), peer) {
        (Flow::Send, None, Ok(local), Some(peer)) => {
            (Printer::start_sending(&g, h, local, peer), None)
        }
        (Flow::Send, None, _, _) => (None, None),
        (Flow::Both, None, Ok(local), Some(peer)) => {
            match Printer::start_full_duplex(&g, h, local, peer) {
                Some((rx, tx)) => (Some(rx), Some(tx)),
                None => (None, None),
            }
        }
        (_, _, Ok(local), Some(peer)) => (Printer::start(&g, h, local, peer), None),
        _ => (None, None),
    };
    if let Some(p) = printer.as_mut().filter(|_| plan.flow != Flow::Send) {
        p.read(early, early, g.now());
    }
    let mut pr = printer.as_mut();
    // `-R`/`--full-duplex` with `--trip-times`: what this side sends opens with a test
    // header carrying its start time and frames each write, as iperf 2's own server does.
    let trip = h.trip_times().then(|| TripSend {
        start: sec_usec(g.wall()),
        port: h.port,
    });
    let result = match (plan.flow, plan.legacy, peer) {
        (_, Some(Legacy::Dual), Some(peer)) => std::thread::scope(|s| {
            let back = s.spawn(|| connect_back(&g, h, peer, plan));
            let r = receive(&g, &mut sock, plan, owd.as_mut(), pr.take());
            let b = back.join().unwrap_or(Ok(()));
            r.and(b)
        }),
        (_, Some(Legacy::Tradeoff), Some(peer)) => {
            // The client's test's rows end before the connection back's begin.
            let r = receive(&g, &mut sock, plan, owd.as_mut(), printer.as_mut());
            if let Some(p) = printer.take() {
                p.finish(g.now());
            }
            r.and_then(|()| connect_back(&g, h, peer, plan))
        }
        (Flow::Receive, _, _) => receive(&g, &mut sock, plan, owd.as_mut(), pr.take()),
        (Flow::Send, _, _) => {
            send(&g, &mut sock, plan, trip, pr.take()).map(|()| linger(&g, &mut sock))
        }
        (Flow::Both, _, _) => match sock.try_clone() {
            Ok(mut tx) => std::thread::scope(|s| {
                let sender = s.spawn(|| {
                    let sent = send(&g, &mut tx, plan, trip, tx_printer.as_mut());
                    if let Some(p) = tx_printer.take() {
                        p.finish(g.now());
                    }
                    sent
                });
                let r = receive(&g, &mut sock, plan, owd.as_mut(), pr.take());
                let w = sender.join().unwrap_or(Ok(()));
                r.and(w)
            }),
            Err(e) => Err(format!("cannot clone the socket: {e}")),
        },
    };
    if let Some(p) = printer {
        p.finish(g.now());
    }
    if let Some(t) = owd.as_ref().and_then(|o| o.delays.transit()) {
        let sd = if t.count > 1 {
            (t.m2_s2 / f64::from(t.count - 1)).sqrt()
        } else {
            0.0
        };
        g.shared().log(&format!(
            "iperf 2 test from {}: one-way delay (--trip-times) min/avg/max/stdev {:.3}/{:.3}/{:.3}/{:.3} ms over {} writes",
            super::shown(peer.unwrap_or(g.peer)),
            t.min_s * 1e3,
            t.mean_s * 1e3,
            t.max_s * 1e3,
            sd * 1e3,
            t.count
        ));
    }
    if let Err(why) = result {
        g.failed(why);
    }
    let _ = sock.shutdown(Shutdown::Both);
}

fn wall_s(g: &Group) -> f64 {
    g.wall()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// With `--trip-times`: the client's writes, framed, and their one-way delays.
#[derive(Default)]
struct Owd {
    framer: BurstFramer,
    delays: TransitStats,
}

/// Read and count until the client closes (or a limit ends the test); with `owd`, each
/// completed write's one-way delay (this host's wall clock at its last byte minus the
/// client's write time).
fn receive(
    g: &Group,
    sock: &mut TcpStream,
    plan: &Plan,
    mut owd: Option<&mut Owd>,
    mut printer: Option<&mut Printer>,
) -> Result<(), String> {
    let mut buf = vec![0u8; 128 * 1024];
    let started = g.now();
    let mut last_move = started;
    loop {
        match sock.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                g.received.fetch_add(n as u64, Ordering::Relaxed);
                last_move = g.now();
                if let Some(p) = printer.as_deref_mut() {
                    p.read(n, buf.len(), last_move);
                }
                if let Some(o) = owd.as_deref_mut() {
                    let now_s = wall_s(g);
                    let Owd { framer, delays } = o;
                    framer.feed(&buf[..n], |sec, usec| {
                        let d = now_s - (f64::from(sec) + f64::from(usec) / 1e6);
                        delays.add(d);
                        if let Some(p) = printer.as_deref_mut() {
                            p.delay(d, now_s);
                        }
                    });
                }
            }
            Err(e) if is_timeout(&e) => {
                if let Some(p) = printer.as_deref_mut() {
                    p.tick(g.now());
                }
            }
            // The client ends a test by closing; a reset at the end is no error.
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(()),
            Err(e) => return Err(format!("read failed: {e}")),
        }
        if let Some(why) = stop_reason(g, plan, last_move) {
            return Err(why);
        }
    }
}

pub(super) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// A `--trip-times` test this server sends on: the start time (wall clock, iperf 2's
/// seconds and microseconds) its test header and every write's head carry, and the
/// port its header names.
#[derive(Clone, Copy)]
struct TripSend {
    start: (u32, u32),
    port: u16,
}

/// What a `--trip-times` sender writes first: iperf 2's TCP test header with the start
/// time (`Client::SendFirstPayload`, which iperf 2's server sends on `-R`; the client's
/// `Server::ClientReverseFirstRead` takes its start time from it, and without one
/// ignores `--trip-times`).
fn trip_header(t: TripSend, plan: &Plan) -> Vec<u8> {
    let amount = match (plan.bytes, plan.time) {
        (Some(n), _) => Amount::Bytes(n),
        (None, t) => Amount::TimeCentis(t.map_or(0, |t| (t.as_millis() / 10) as u32)),
    };
    ClientHdr {
        udp: false,
        threads: 1,
        port: t.port,
        buf_len: plan.block as u32,
        amount,
        rate_bps: plan.send_bps.unwrap_or(0),
        tos: 0,
        flags: HEADER_VERSION2,
        upper: UPPER_REVERSE | UPPER_TRIPTIME,
        start: Some(t.start),
    }
    .encode()
}

/// Send until the client's `-t` or `-n` (paced under `plan.send_bps`), then close our
/// side of the connection. `printer`: `netmeter iperf2 -s`'s rows of a `-R` test.
/// With `trip` the test header goes first ([`trip_header`]) and each block opens with
/// iperf 2's write head ([`TcpBurstHdr`]: its send time, id and size), written whole
/// before the next head, so the client times each write.
fn send(
    g: &Group,
    sock: &mut TcpStream,
    plan: &Plan,
    trip: Option<TripSend>,
    mut printer: Option<&mut Printer>,
) -> Result<(), String> {
    // iperf 2's payload pattern: the digits, repeated (a trip-times block holds at
    // least its head).
    let size = match trip {
        Some(_) => plan.block.max(TCP_BURST_LEN),
        None => plan.block,
    };
    let mut block: Vec<u8> = (0..size).map(|i| b'0' + (i % 10) as u8).collect();
    let started = g.now();
    let mut last_move = started;
    let mut sent: u64 = 0;
    if let Some(t) = trip {
        let head = trip_header(t, plan);
        let _ = sock.set_nodelay(true);
        sock.write_all(&head)
            .map_err(|e| format!("cannot send the test header (-R --trip-times): {e}"))?;
        let _ = sock.set_nodelay(false);
        sent += head.len() as u64;
        g.sent.fetch_add(head.len() as u64, Ordering::Relaxed);
        if let Some(p) = printer.as_deref_mut() {
            p.wrote(head.len(), true, g.now());
        }
    }
    // The part of the current (framed) block not yet written.
    let (mut off, mut end) = (0usize, 0usize);
    let (mut burst_id, mut framed) = (0u32, 0u64);
    loop {
        let now = g.now();
        let elapsed = now.duration_since(started);
        let framing = off < end;
        if !framing
            && (plan.time.is_some_and(|t| elapsed >= t) || plan.bytes.is_some_and(|n| sent >= n))
        {
            break;
        }
        if let (Some(bps), false) = (plan.send_bps, framing) {
            let due = Duration::from_secs_f64(sent as f64 * 8.0 / bps as f64);
            if due > elapsed {
                std::thread::sleep((due - elapsed).min(TICK));
                continue;
            }
        }
        if !framing {
            let len = plan
                .bytes
                .map_or(block.len(), |n| (n - sent).min(block.len() as u64) as usize);
            (off, end) = (0, len);
            if let Some(t) = trip {
                end = len.max(TCP_BURST_LEN);
                burst_id = burst_id.wrapping_add(1);
                framed += end as u64;
                TcpBurstHdr {
                    start: t.start,
                    sent: sec_usec(g.wall()),
                    burst_id,
                    burst_size: end as u32,
                    seq: framed as i64,
                }
                .write(&mut block);
            }
        }
        match sock.write(&block[off..end]) {
            Ok(n) => {
                off += n;
                sent += n as u64;
                g.sent.fetch_add(n as u64, Ordering::Relaxed);
                last_move = g.now();
                if let Some(p) = printer.as_deref_mut() {
                    if p.row_due(last_move) {
                        note_retransmits(sock, p);
                    }
                    p.wrote(n, true, last_move);
                }
            }
            Err(e) if is_timeout(&e) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                ) =>
            {
                // The client stopped reading (its own -t is over): the test ended.
                return Ok(());
            }
            Err(e) => {
                if let Some(p) = printer.as_deref_mut() {
                    p.wrote(0, false, g.now());
                }
                return Err(format!("write failed: {e}"));
            }
        }
        if let Some(why) = stop_reason(g, plan, last_move) {
            return Err(why);
        }
    }
    if let Some(p) = printer {
        note_retransmits(sock, p);
    }
    let _ = sock.shutdown(Shutdown::Write);
    Ok(())
}

/// Tell the printer the connection's retransmits so far (TCP_INFO), for its `Rtry`
/// column and a `-R -P` sum's bins.
fn note_retransmits(sock: &TcpStream, p: &mut Printer) {
    if let Some(i) = crate::sock::tcp_info(std::os::fd::AsFd::as_fd(sock)) {
        p.retransmits(u64::from(i.total_retrans));
    }
}

/// After sending: wait (bounded) for the client to close, discarding what it sends.
fn linger(g: &Group, sock: &mut TcpStream) {
    let until = g.now() + LINGER;
    let mut buf = [0u8; 4096];
    while g.now() < until {
        match sock.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if is_timeout(&e) => {}
            Err(_) => return,
        }
    }
}

/// How long connecting back to a `-d`/`-r` client may take.
const CONNECT_BACK_TIMEOUT: Duration = Duration::from_secs(5);

/// How long to wait before connecting back again to a client whose listener refused.
const CONNECT_BACK_RETRY: Duration = Duration::from_millis(20);

/// Connect to `to` within [`CONNECT_BACK_TIMEOUT`], trying again while it refuses: an
/// iperf 2 client starts its `-d`/`-r` listener on a thread of its own alongside the
/// connection that asks for it, so on a busy host the header can arrive before that
/// listener listens. Bounded: one attempt per [`CONNECT_BACK_RETRY`], to the client's
/// own address only.
fn connect_back_to(g: &Group, to: SocketAddr) -> std::io::Result<TcpStream> {
    let deadline = g.now() + CONNECT_BACK_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(g.now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        match TcpStream::connect_timeout(&to, left) {
            Err(e)
                if e.kind() == std::io::ErrorKind::ConnectionRefused
                    && g.now() + CONNECT_BACK_RETRY < deadline =>
            {
                std::thread::sleep(CONNECT_BACK_RETRY);
            }
            r => return r,
        }
    }
}

/// `-d`/`-r`: connect to the client's own address at `port` (the port its header
/// names, where its listener waits) and send for its `-t`/`-n`. The first four bytes
/// are zero: flags naming no header, so the client's listener takes the rest as data.
fn connect_back(g: &Group, h: &TestHdr, peer: SocketAddr, plan: &Plan) -> Result<(), String> {
    let to = SocketAddr::new(peer.ip(), h.port);
    let mut back =
        connect_back_to(g, to).map_err(|e| format!("cannot connect back to {to} (-d/-r): {e}"))?;
    let _ = back.set_write_timeout(Some(TICK));
    let _ = back.set_read_timeout(Some(TICK));
    // `netmeter iperf2 -s`: the connection back's header and rows, as iperf 2's.
    let sndbuf = socket2::SockRef::from(&back)
        .send_buffer_size()
        .unwrap_or(0);
    let facts = BackSock {
        write_len: plan.block as u64,
        sndbuf: sndbuf as u64,
        rate_bps: 0,
        congestion: crate::sock::congestion(std::os::fd::AsFd::as_fd(&back)),
    };
    let mut rows = back
        .local_addr()
        .ok()
        .and_then(|local| Printer::start_back(g, h, local, to, facts));
    back.write_all(&[0u8; 4])
        .map_err(|e| format!("cannot write to {to} (-d/-r): {e}"))?;
    g.sent.fetch_add(4, Ordering::Relaxed);
    let r = send(g, &mut back, plan, None, rows.as_mut());
    if let Some(p) = rows {
        p.finish(g.now());
    }
    linger(g, &mut back);
    r
}
