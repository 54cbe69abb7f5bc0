//! iperf 2's `--bounceback` over TCP: the client sends requests of `bbsize` bytes, each
//! opening with a `bounceback_hdr`; this server stamps its receive and send times (wall
//! clock) into the header and writes back `bbreplysize` bytes (`Server::WriteBB`,
//! `ReadBBWithRXTimestamp`), until the client closes or sets `HEADER_BBSTOP`. Sizes
//! were capped by `wire::iperf2::BbHdr::parse` before this allocates. The hold time
//! (`--bounceback-hold`, `bbhold` µs in each request) is applied between the read and
//! the reply, capped at [`MAX_HOLD`], on the server's clock: the receive stamp is the
//! read's, the send stamp the reply's, so the client's round trip includes the hold and
//! its one-way figures do not. (iperf 2.2.1's own server reads `bbhold` and does not
//! wait; a client asking for a hold gets it here.)

use super::Group;
use super::Plan;
use super::print::Printer;
use super::tcp::{is_timeout, sec_usec, stop_reason};
use crate::wire::iperf2::{BB_HDR_LEN, BB_STOP, BbHdr};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const TICK: Duration = Duration::from_millis(100);
/// The longest hold a request may ask for (iperf 2 takes any `--bounceback-hold`; a
/// server must not be held by one request for longer than a test's idle time would
/// allow anyway).
pub const MAX_HOLD: Duration = Duration::from_secs(10);

/// How long to hold a request that asked for `hold_us` (capped at [`MAX_HOLD`]).
pub fn hold_for(hold_us: u32) -> Duration {
    Duration::from_micros(u64::from(hold_us)).min(MAX_HOLD)
}

/// Wait until `until` on the server's clock, a tick at a time so that the server's
/// shutdown still ends the test. False when it did.
fn hold_until(g: &Group, until: Instant) -> bool {
    loop {
        let now = g.now();
        if now >= until {
            return true;
        }
        if g.shared().shutdown.load(Ordering::Relaxed) || g.shared().signalled() {
            return false;
        }
        std::thread::sleep((until - now).min(TICK));
    }
}

/// Serve a bounceback test whose first `BB_HDR_LEN` bytes (`first`) the door read.
pub(in crate::engine::server) fn serve(
    g: Arc<Group>,
    mut sock: TcpStream,
    first: Vec<u8>,
    plan: &Plan,
) {
    let Ok(bb) = BbHdr::parse(&first) else {
        return;
    };
    let (size, reply) = (bb.size as usize, bb.reply_size as usize);
    if size < BB_HDR_LEN || reply < BB_HDR_LEN {
        g.failed(format!(
            "bounceback sizes {size}/{reply} below the header's {BB_HDR_LEN} bytes"
        ));
        return;
    }
    let _ = sock.set_read_timeout(Some(TICK));
    let _ = sock.set_write_timeout(Some(TICK));
    let _ = sock.set_nodelay(true);
    let mut buf = vec![0u8; size.max(reply)];
    buf[..BB_HDR_LEN].copy_from_slice(&first[..BB_HDR_LEN]);
    let mut last_move = g.now();
    g.received.fetch_add(BB_HDR_LEN as u64, Ordering::Relaxed);
    let mut have = BB_HDR_LEN;
    // `netmeter iperf2 -s`: a row of the requests per interval, as iperf 2's server.
    let mut printer = match (sock.local_addr(), sock.peer_addr()) {
        (Ok(local), Ok(peer)) => Printer::start_bounceback(&g, &bb, local, peer),
        _ => None,
    };
    loop {
        match fill(&g, &mut sock, &mut buf[have..size], plan, &mut last_move) {
            Ok(true) => {}
            Ok(false) => break,
            Err(why) => {
                g.failed(why);
                break;
            }
        }
        let rx = sec_usec(g.wall());
        let Ok(mut h) = BbHdr::parse(&buf[..size]) else {
            g.failed("an unreadable bounceback request".into());
            break;
        };
        if h.bbflags & BB_STOP != 0 {
            break;
        }
        if let Some(p) = printer.as_mut() {
            p.request(size, g.now());
        }
        let hold = hold_for(h.hold_us);
        if !hold.is_zero() && !hold_until(&g, g.now() + hold) {
            break;
        }
        h.server_rx = rx;
        h.server_tx = sec_usec(g.wall());
        h.write(&mut buf);
        if let Err(e) = sock.write_all(&buf[..reply]) {
            g.failed(format!("bounceback write failed: {e}"));
            break;
        }
        g.sent.fetch_add(reply as u64, Ordering::Relaxed);
        have = 0;
    }
    if let Some(p) = printer {
        p.finish(g.now());
    }
    let _ = sock.shutdown(Shutdown::Both);
}

/// Read until `buf` is full: `Ok(false)` when the client closed first.
fn fill(
    g: &Group,
    sock: &mut TcpStream,
    buf: &mut [u8],
    plan: &Plan,
    last_move: &mut Instant,
) -> Result<bool, String> {
    let mut at = 0;
    while at < buf.len() {
        match sock.read(&mut buf[at..]) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                at += n;
                g.received.fetch_add(n as u64, Ordering::Relaxed);
                *last_move = g.now();
            }
            Err(e) if is_timeout(&e) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(false),
            Err(e) => return Err(format!("bounceback read failed: {e}")),
        }
        if let Some(why) = stop_reason(g, plan, *last_move) {
            return Err(why);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_is_the_requests_microseconds_capped() {
        assert_eq!(hold_for(0), Duration::ZERO);
        assert_eq!(hold_for(50_000), Duration::from_millis(50));
        assert_eq!(hold_for(u32::MAX), MAX_HOLD);
    }
}
