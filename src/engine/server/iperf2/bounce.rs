//! iperf 2's `--bounceback` over TCP: the client sends requests of `bbsize` bytes, each
//! opening with a `bounceback_hdr`; this server stamps its receive and send times (wall
//! clock) into the header and writes back `bbreplysize` bytes (`Server::WriteBB`,
//! `ReadBBWithRXTimestamp`), until the client closes or sets `HEADER_BBSTOP`. Sizes
//! were capped by `wire::iperf2::BbHdr::parse` before this allocates. The hold time
//! (`--bounceback-hold`) is not applied: the reply leaves at once, and its stamps say so.

use super::Group;
use super::Plan;
use super::tcp::{is_timeout, sec_usec, stop_reason};
use crate::wire::iperf2::{BB_HDR_LEN, BB_STOP, BbHdr};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const TICK: Duration = Duration::from_millis(100);

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
