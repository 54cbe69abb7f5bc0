//! Request/response streams (`--bounceback`, and the probe of `--working-load`): the
//! client writes requests and times each reply, the server answers them. One thread per
//! stream like the bulk loops of `stream`, whose `Worker` they run on; round trips go
//! to the stream's `RttRecord`. The decisions (bursts, which reply completes which
//! request, the probe period, lost replies, the server's hold) are the sans-IO
//! `machine::bounce`'s; here are the sockets, the sleeps and the records.

use super::machine::bounce::{
    BounceClient, BounceConfig, BounceServer, BounceStep, PROBE_PERIOD, UDP_REPLY_TIMEOUT,
};
use super::stream::{self, DataSock, STOP_POLL, Worker, is_transient, write_full};
use crate::clock::{Clock, mono_now};
use crate::sock;
use crate::wire::Bounceback;
use std::io::{self, Read};
use std::net::{TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Start a request/response stream's thread (named like a bulk stream).
pub fn spawn(w: Worker, b: Bounceback, sock: DataSock) -> io::Result<JoinHandle<()>> {
    match sock {
        DataSock::Tcp(t) => {
            let name = format!("nm-tcp-{}", w.shared.id);
            stream::spawn_loop(name, w, move |w| match w.shared.sender {
                true => tcp_bounce_client(w, b, t),
                false => tcp_bounce_server(w, b, t),
            })
        }
        DataSock::Udp(u) => {
            let name = format!("nm-udp-{}", w.shared.id);
            stream::spawn_loop(name, w, move |w| match w.shared.sender {
                true => udp_bounce_client(w, b, &u),
                false => udp_bounce_server(w, b, &u),
            })
        }
    }
}

/// `len` bytes of the stream's payload pattern, repeated as needed (bounceback
/// requests and replies can be longer or shorter than the bulk block).
fn repeat_payload(payload: &[u8], len: usize) -> Vec<u8> {
    payload.iter().copied().cycle().take(len).collect()
}

/// `--busy-poll`: non-blocking receives for up to `spin`, so a message that arrives
/// meanwhile is taken without the sleep and wake-up a blocking read costs. Each poll
/// yields the CPU, so a peer that shares it still runs. `None` when nothing came: the
/// caller then blocks as usual.
fn poll_recv(fd: impl AsFd, buf: &mut [u8], spin: Duration) -> Option<io::Result<usize>> {
    if spin.is_zero() {
        return None;
    }
    let t0 = mono_now();
    loop {
        match sock::recv_nowait(fd.as_fd(), buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if mono_now().saturating_duration_since(t0) >= spin {
                    return None;
                }
                std::thread::yield_now();
            }
            r => return Some(r),
        }
    }
}

/// One TCP read: polled first under `--busy-poll`, then blocking.
fn read_polled(sock: &mut TcpStream, buf: &mut [u8], spin: Duration) -> io::Result<usize> {
    match poll_recv(&*sock, buf, spin) {
        Some(r) => r,
        None => sock.read(buf),
    }
}

/// One UDP receive: polled first under `--busy-poll`, then blocking (with the socket's
/// read timeout).
fn recv_polled(sock: &UdpSocket, buf: &mut [u8], spin: Duration) -> io::Result<usize> {
    match poll_recv(sock, buf, spin) {
        Some(r) => r,
        None => sock.recv(buf),
    }
}

/// `--busy-poll` for a request/response socket: the user-space poll time per read.
/// SO_BUSY_POLL itself was asked for when the stream was set up (`caps.busy_poll`): it
/// polls the device queue where there is one (not on loopback, and above
/// net.core.busy_read only with CAP_NET_ADMIN); the user-space poll works anywhere.
fn rr_spin(b: &Bounceback) -> Duration {
    Duration::from_micros(b.busy_poll_us as u64)
}

/// Read exactly `buf.len()` bytes unless asked to stop; calls `each(total_so_far)` after
/// every read. `Ok(false)` when stopped or the peer closed.
fn read_full(
    sock: &mut TcpStream,
    buf: &mut [u8],
    stop: &AtomicBool,
    spin: Duration,
    mut each: impl FnMut(usize),
) -> io::Result<bool> {
    let mut off = 0;
    while off < buf.len() {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        match read_polled(sock, &mut buf[off..], spin) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                off += n;
                each(off);
            }
            Err(e) if is_transient(&e) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Set up a TCP request/response socket; returns the `--busy-poll` spin per read.
///
/// Reads block without a timeout: a timed wait arms a kernel timer on every read, a
/// cost a transaction of a few µs notices. A blocked read is woken instead by
/// `LiveStreams::stop`, which shuts the socket down for reading. Writes keep the
/// timeout (they only wait when the peer stops reading, and must then see the stop).
fn rr_socket(sock: &TcpStream, b: &Bounceback) -> io::Result<Duration> {
    sock.set_nodelay(true)?;
    sock.set_write_timeout(Some(STOP_POLL))?;
    sock.set_read_timeout(None)?;
    Ok(rr_spin(b))
}

/// The client's machine for `b` (TCP: replies awaited without a deadline; the
/// `--working-load` probe keeps its period).
fn client_machine(w: &Worker, b: &Bounceback, udp: bool) -> BounceClient {
    BounceClient::new(BounceConfig {
        burst: b.burst,
        reply_len: b.reply_len as usize,
        period: w.load_start.map(|_| PROBE_PERIOD),
        load_start: w.load_start,
        reply_timeout: udp.then_some(UDP_REPLY_TIMEOUT),
    })
}

/// Sleep towards `t` (at most [`STOP_POLL`], so a stop is seen).
fn sleep_until(clock: &dyn Clock, t: Instant) {
    let left = t.saturating_duration_since(clock.now());
    if !left.is_zero() {
        std::thread::sleep(left.min(STOP_POLL));
    }
}

/// TCP bounceback client: `burst` requests back to back, then their replies, each
/// timed from its request's write to the arrival of its last reply byte; the
/// decisions are [`BounceClient`]'s.
fn tcp_bounce_client(w: &Worker, b: Bounceback, mut sock: TcpStream) -> io::Result<()> {
    let spin = rr_socket(&sock, &b)?;
    let req: Vec<u8> = repeat_payload(&w.payload, b.request_len as usize);
    let mut replies = vec![0u8; b.reply_len as usize * b.burst.max(1) as usize];
    let mut rtts = Vec::with_capacity(b.burst.max(1) as usize);
    let Some(rec) = w.shared.rtt.as_ref() else {
        return Ok(());
    };
    let mut m = client_machine(w, &b, false);
    while !w.stop.load(Ordering::Relaxed) {
        let count = match m.poll(w.clock.now()) {
            BounceStep::Wait(t) => {
                sleep_until(&*w.clock, t);
                continue;
            }
            BounceStep::Send { count } => count,
            // Every burst's replies are read in full below: nothing is left to await.
            BounceStep::Await(_) | BounceStep::Lost(_) => break,
        };
        for _ in 0..count {
            m.on_sent(w.clock.now());
            if !write_full(&mut sock, &req, &w.stop)? {
                return Ok(());
            }
        }
        rtts.clear();
        let mut prev = 0;
        let complete = read_full(&mut sock, &mut replies, &w.stop, spin, |got| {
            m.on_reply_bytes(got - prev, w.clock.now(), &mut rtts);
            prev = got;
        })?;
        {
            let mut r = rec.lock().unwrap_or_else(|p| p.into_inner());
            for t in &rtts {
                r.interval.record_ns(t.ns);
                if t.idle {
                    r.idle.record_ns(t.ns);
                } else {
                    r.total.record_ns(t.ns);
                }
            }
        }
        w.shared
            .bytes
            .store(m.sent() * req.len() as u64, Ordering::Relaxed);
        w.shared.packets.store(m.done(), Ordering::Relaxed);
        if !complete {
            break;
        }
    }
    Ok(())
}

/// TCP bounceback server: read a request, hold, answer ([`BounceServer`]).
fn tcp_bounce_server(w: &Worker, b: Bounceback, mut sock: TcpStream) -> io::Result<()> {
    let spin = rr_socket(&sock, &b)?;
    let mut req = vec![0u8; b.request_len as usize];
    let reply: Vec<u8> = repeat_payload(&w.payload, b.reply_len as usize);
    let mut m = BounceServer::new(Duration::from_micros(b.hold_us as u64));
    while !w.stop.load(Ordering::Relaxed) {
        if !read_full(&mut sock, &mut req, &w.stop, spin, |_| {})? {
            break;
        }
        hold_until(&*w.clock, m.on_request(req.len(), w.clock.now()));
        if !write_full(&mut sock, &reply, &w.stop)? {
            break;
        }
        let (bytes, done) = m.counts();
        w.shared.bytes.store(bytes, Ordering::Relaxed);
        w.shared.packets.store(done, Ordering::Relaxed);
    }
    Ok(())
}

/// The server's hold: sleep until the reply is due (no sleep without a hold).
fn hold_until(clock: &dyn Clock, t: Instant) {
    let left = t.saturating_duration_since(clock.now());
    if !left.is_zero() {
        std::thread::sleep(left);
    }
}

/// UDP bounceback client: requests carry an 8-byte sequence number that the reply
/// echoes; a reply that does not come within a second counts as lost.
fn udp_bounce_client(w: &Worker, b: Bounceback, sock: &UdpSocket) -> io::Result<()> {
    sock.set_write_timeout(Some(STOP_POLL))?;
    // Set once: a reply's 1 s deadline is checked between reads.
    sock.set_read_timeout(Some(STOP_POLL))?;
    let spin = rr_spin(&b);
    let req_len = b.request_len as usize;
    let mut req: Vec<u8> = repeat_payload(&w.payload, req_len);
    let mut buf = vec![0u8; (b.reply_len as usize).max(8) + 64];
    let Some(rec) = w.shared.rtt.as_ref() else {
        return Ok(());
    };
    let mut m = client_machine(w, &b, true);
    while !w.stop.load(Ordering::Relaxed) {
        match m.poll(w.clock.now()) {
            BounceStep::Wait(t) => sleep_until(&*w.clock, t),
            BounceStep::Send { count } => {
                for _ in 0..count {
                    let seq = m.on_sent(w.clock.now());
                    req[..8].copy_from_slice(&seq.to_be_bytes());
                    match sock.send(&req) {
                        Ok(_) => {}
                        Err(e)
                            if is_transient(&e) || e.kind() == io::ErrorKind::ConnectionRefused =>
                        {
                            m.on_send_failed(seq)
                        }
                        Err(e) => return Err(e),
                    }
                }
                m.burst_sent(w.clock.now());
            }
            BounceStep::Await(_) => match recv_polled(sock, &mut buf, spin) {
                Ok(n) if n >= 8 => {
                    let mut s = [0u8; 8];
                    s.copy_from_slice(&buf[..8]);
                    if let Some(t) = m.on_reply(u64::from_be_bytes(s), w.clock.now()) {
                        let mut r = rec.lock().unwrap_or_else(|p| p.into_inner());
                        r.interval.record_ns(t.ns);
                        r.total.record_ns(t.ns);
                    }
                }
                Ok(_) => {}
                Err(e) if is_transient(&e) || e.kind() == io::ErrorKind::ConnectionRefused => {}
                Err(e) => return Err(e),
            },
            BounceStep::Lost(n) => {
                if !w.stop.load(Ordering::Relaxed) {
                    rec.lock().unwrap_or_else(|p| p.into_inner()).lost += n;
                }
            }
        }
        w.shared
            .bytes
            .store(m.sent() * req_len as u64, Ordering::Relaxed);
        w.shared.packets.store(m.done(), Ordering::Relaxed);
    }
    Ok(())
}

/// UDP bounceback server: echo each request's sequence number in a reply.
fn udp_bounce_server(w: &Worker, b: Bounceback, sock: &UdpSocket) -> io::Result<()> {
    // No read timeout (a timed wait arms a kernel timer per request): the end of the
    // test wakes the read by shutting the socket down (LiveStreams::stop).
    sock.set_read_timeout(None)?;
    let spin = rr_spin(&b);
    let mut buf = vec![0u8; (b.request_len as usize).max(8) + 64];
    let mut reply: Vec<u8> = repeat_payload(&w.payload, b.reply_len as usize);
    let mut m = BounceServer::new(Duration::from_micros(b.hold_us as u64));
    while !w.stop.load(Ordering::Relaxed) {
        match recv_polled(sock, &mut buf, spin) {
            // Shorter datagrams are repeated connect messages.
            Ok(n) if n >= 8 => {
                hold_until(&*w.clock, m.on_request(n, w.clock.now()));
                reply[..8].copy_from_slice(&buf[..8]);
                let _ = sock.send(&reply);
                let (bytes, done) = m.counts();
                w.shared.bytes.store(bytes, Ordering::Relaxed);
                w.shared.packets.store(done, Ordering::Relaxed);
            }
            Ok(_) => {}
            Err(e) if is_transient(&e) || e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
