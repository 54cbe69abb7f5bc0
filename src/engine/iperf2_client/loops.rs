//! The data loops of an iperf 2 client: TCP writes the test header first, then blocks;
//! UDP carries the header in every datagram after its 64-bit sequence number and send
//! time, as iperf 2's client does, and receives iperf 2's datagrams (`-R`, `--bidir`:
//! `recv` decides). Both publish into the stream's `StreamShared` like
//! the bulk loops (`engine::stream`), so the meter and the report see them as any
//! stream. The TCP sender drives the bulk sender's machine
//! (`engine::machine::tcp_send::TcpSender`, through `engine::stream`'s helpers) and
//! differs only in the bytes: iperf 2's burst head instead of netmeter's frame head.

use super::recv::{Admit, Arrival, BackFilter, HeaderRetry, UdpRecvHalf};
use super::trip_rx::TcpTripRx;
use crate::clock::mono_now;
use crate::engine::machine::bounce::{BounceClient, BounceConfig, BounceStep};
use crate::engine::machine::profile_send::{Carrier, ProfileSender};
use crate::engine::machine::tcp_send::TcpSendStep;
use crate::engine::machine::udp::RecvSinks;
use crate::engine::profile;
use crate::engine::record::StreamShared;
use crate::engine::stream::{self, STOP_POLL, Worker};
use crate::pacing::Pacer;
use crate::profile::Profile;
use crate::profile::{Due, Schedule, UnitSizer};
use crate::wire::iperf2::{
    BB_HDR_LEN, BB_REPLYSIZE, BB_TOS, BbHdr, HEADER_BOUNCEBACK, TCP_BURST_LEN, UDP_DATAGRAM_LEN,
    write_datagram_id,
};
use crate::wire::iperf2::{ISOCH_MIN_LEN, IsochLayout, IsochPayload};
use crate::wire::iperf2_client::{TcpBurstHdr, write_burst_period};
use crate::wire::{Bounceback, Isochronous};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, UdpSocket};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The `-b` pacer of a sender, told when a timed test ends.
fn pacer(w: &Worker, unit: usize, origin: Instant) -> Option<Pacer> {
    (w.rate_bps > 0).then(|| {
        let p = Pacer::new(w.rate_bps, unit, w.burst, 0.0);
        match (w.schedule_origin, w.schedule_end) {
            (Some(o), Some(e)) => {
                p.ending_at((o + e).saturating_duration_since(origin).as_secs_f64())
            }
            _ => p,
        }
    })
}

/// The size of the next block, once the pacer allows it (`None`: asked to stop, or the
/// `-n` budget is spent).
fn next_block(w: &Worker, pacer: &mut Option<Pacer>, origin: Instant, len: usize) -> Option<usize> {
    while !w.stop.load(Ordering::Relaxed) {
        if let Some(p) = pacer.as_mut() {
            let wait = p.poll(
                mono_now().saturating_duration_since(origin).as_secs_f64(),
                len,
            );
            if !wait.is_zero() {
                std::thread::sleep(wait.min(STOP_POLL));
                continue;
            }
        }
        return match &w.budget {
            Some(b) => Some(b.take(len)).filter(|&n| n > 0),
            None => Some(len),
        };
    }
    None
}

fn publish(s: &StreamShared, bytes: u64, blocks: u64) {
    s.bytes.store(bytes, Ordering::Relaxed);
    s.packets.store(blocks, Ordering::Relaxed);
}

/// TCP: `-l` blocks after the test header (`header_len` bytes, written when the
/// connection opened, counted as sent: the server counts every byte it reads), then a
/// shutdown of the write side, which is how an iperf 2 server learns the test is over.
/// With `trip` (`--trip-times`: the start time the test header carried) each block
/// opens with iperf 2's `TCP_burst_payload` ([`TcpBurstHdr`]) holding its send time,
/// as iperf 2's client writes them, so the server measures each write's one-way delay;
/// a block is then at least that head's [`TCP_BURST_LEN`] bytes. `sole_reader`: no
/// receiver shares the connection, so this loop reads what the server sent on it
/// before closing ([`drain_until_closed`]).
pub fn tcp_send(
    w: &Worker,
    mut sock: TcpStream,
    header_len: u64,
    trip: Option<(u32, u32)>,
    sole_reader: bool,
) -> io::Result<()> {
    sock.set_write_timeout(Some(STOP_POLL))?;
    w.shared
        .awaits_peer_close
        .store(sole_reader, Ordering::Relaxed);
    if let Some(b) = &w.budget {
        b.take(header_len as usize);
    }
    publish(&w.shared, header_len, 1);
    // The machine decides as for any bulk stream (pacing, the `-n` budget, the block
    // under way); this loop stamps iperf 2's burst head where netmeter's frame head
    // would go, so the machine's own framing is off.
    let origin = w.pace_origin.unwrap_or_else(|| w.clock.now());
    let mut m = stream::tcp_sender(w, origin, false, false);
    let mut block = w.payload.to_vec();
    block.resize(block.len().max(w.block_len).max(TCP_BURST_LEN), 0);
    let (mut burst_id, mut seq) = (0u32, 0i64);
    while !w.stop.load(Ordering::Relaxed) {
        // A trip-times block is never shorter than its head (a short last block of
        // the `-n` budget grows to it).
        let take = |n: usize| {
            let got = w.budget.as_ref().map_or(n, |b| b.take(n));
            if trip.is_some() && got > 0 {
                got.max(TCP_BURST_LEN)
            } else {
                got
            }
        };
        let (off, end) = match stream::poll_sender_taking(w, &mut m, take) {
            TcpSendStep::Write {
                offset,
                len,
                block_len,
                fresh,
                ..
            } => {
                if let (true, Some(start)) = (fresh, trip) {
                    burst_id = burst_id.wrapping_add(1);
                    seq += block_len as i64;
                    TcpBurstHdr {
                        start,
                        sent: stream::wall_now(false),
                        burst_id,
                        burst_size: block_len as u32,
                        seq,
                    }
                    .write(&mut block);
                }
                (offset, offset + len)
            }
            TcpSendStep::Wait(_) => continue,
            TcpSendStep::Stop => break,
        };
        match w.shared.calls.wrote(sock.write(&block[off..end])) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "peer closed")),
            Ok(n) => {
                if m.on_written(n) {
                    w.shared.packets.store(m.blocks() + 1, Ordering::Relaxed);
                }
                w.shared
                    .bytes
                    .store(header_len + m.bytes(), Ordering::Relaxed);
            }
            Err(e) if stream::is_transient(&e) => {}
            Err(e) => return Err(e),
        }
    }
    let _ = sock.flush();
    let _ = sock.shutdown(Shutdown::Write);
    if sole_reader {
        drain_until_closed(&mut sock);
    }
    Ok(())
}

/// TCP bursts (`--burst-size`/`--burst-period`) and isochronous frames
/// (`--isochronous`) as iperf 2's client sends them (`Client::RunTCP` with its frame
/// counter): after the test header (`header_len` bytes, counted as sent), on the
/// profile's grid (`machine::profile_send::ProfileSender`: a slot that passed entirely
/// is skipped), one unit (a burst, or a frame of log-normal size) at a time, at least
/// iperf 2's [`TCP_BURST_LEN`] bytes, written in `-l` pieces whose first opens with the
/// burst head ([`TcpBurstHdr`]: the start time the test header carried, the send time,
/// the slot's number as iperf 2's `burst_id`, the unit's size, the bytes so far) and
/// the profile's period ([`write_burst_period`]). The server reads each unit by the
/// size in its head, so it counts bursts (and, with `--trip-times`, times them) as
/// netmeter sent them. A unit cut off by a stop is not counted as sent.
pub fn tcp_send_profile(
    w: &Worker,
    mut sock: TcpStream,
    header_len: u64,
    start: (u32, u32),
    p: &Profile,
) -> io::Result<()> {
    sock.set_write_timeout(Some(STOP_POLL))?;
    w.shared.awaits_peer_close.store(true, Ordering::Relaxed);
    if let Some(b) = &w.budget {
        b.take(header_len as usize);
    }
    publish(&w.shared, header_len, 1);
    let Some(rec) = w.shared.profile.as_ref() else {
        return Ok(());
    };
    let block_len = w.block_len.max(TCP_BURST_LEN);
    let origin = w.schedule_origin.unwrap_or_else(|| w.clock.now());
    let carrier = Carrier::Tcp { block_len };
    let mut m = ProfileSender::new(p, w.shared.id, carrier, origin, w.schedule_end);
    let period_us = (p.period_ns() / 1000).min(u64::from(u32::MAX)) as u32;
    let mut buf = w.payload.to_vec();
    buf.resize(buf.len().max(block_len), 0);
    let (mut bytes, mut writes, mut seq) = (header_len, 1u64, 0i64);
    'units: while let Some(unit) = profile::next_unit(w, &mut m, rec) {
        let size = unit.size.clamp(TCP_BURST_LEN as u64, u64::from(u32::MAX));
        let mut left = size;
        while left > 0 {
            let want = (left as usize).min(block_len);
            let got = match &w.budget {
                Some(b) => b.take(want),
                None => want,
            };
            if got == 0 {
                break 'units;
            }
            let head = left == size;
            // The head rides whole in the unit's first write.
            let len = if head { got.max(TCP_BURST_LEN) } else { got };
            if head {
                seq += size as i64;
                TcpBurstHdr {
                    start,
                    sent: stream::wall_now(false),
                    burst_id: (unit.slot + 1).min(u64::from(u32::MAX)) as u32,
                    burst_size: size as u32,
                    seq,
                }
                .write(&mut buf);
                write_burst_period(&mut buf, period_us);
            }
            let mut off = 0;
            while off < len {
                if w.stop.load(Ordering::Relaxed) {
                    break 'units;
                }
                match w.shared.calls.wrote(sock.write(&buf[off..len])) {
                    Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "peer closed")),
                    Ok(n) => {
                        off += n;
                        bytes += n as u64;
                        w.shared.bytes.store(bytes, Ordering::Relaxed);
                    }
                    Err(e) if stream::is_transient(&e) => {}
                    Err(e) => return Err(e),
                }
            }
            left = left.saturating_sub(len as u64);
            writes += 1;
            w.shared.packets.store(writes, Ordering::Relaxed);
        }
        profile::record_unit(w, rec, &mut m, size);
    }
    let _ = sock.flush();
    let _ = sock.shutdown(Shutdown::Write);
    drain_until_closed(&mut sock);
    Ok(())
}

/// How long a sender waits for the server to close after its shutdown.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// Read (and drop) what the server sent until it closes, for at most [`CLOSE_WAIT`]: an
/// iperf 2 server answers netmeter's extended header (and a trip-times one) with its
/// acknowledgement, and a socket closed with those bytes unread is reset, which throws
/// away what is still in its send queue: behind a small window, megabytes the server
/// never counted. Waiting for the server's close also means it has read everything.
fn drain_until_closed(sock: &mut TcpStream) {
    if sock.set_read_timeout(Some(STOP_POLL)).is_err() {
        return;
    }
    let until = mono_now() + CLOSE_WAIT;
    let mut buf = [0u8; 512];
    while mono_now() < until {
        match sock.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if stream::is_transient(&e) => {}
            Err(_) => return,
        }
    }
}

/// UDP: `hdr` (from [`crate::wire::iperf2::ClientHdr::encode`]) at the start of
/// every datagram, its sequence number (1, 2, …) and send time written before each send.
/// The FIN is the control thread's (`fin`), once this loop has ended, but with
/// `duplex_fin` (`--bidir`, iperf 2's `--full-duplex`: no report is awaited) this loop
/// sends it, once, as soon as it stops, counted as sent (as iperf 2 counts it).
pub fn udp_send(w: &Worker, sock: UdpSocket, hdr: &[u8], duplex_fin: bool) -> io::Result<()> {
    sock.set_write_timeout(Some(STOP_POLL))?;
    let len = w.block_len.max(hdr.len());
    let mut buf = w.payload.to_vec();
    buf.resize(len, 0);
    buf[..hdr.len()].copy_from_slice(hdr);
    let origin = w.pace_origin.unwrap_or_else(mono_now);
    let mut pacer = pacer(w, len, origin);
    let (mut bytes, mut seq) = (0u64, 1i64);
    let mut lag_s: f64 = 0.0;
    while let Some(want) = next_block(w, &mut pacer, origin, len) {
        // A short last datagram of a -n budget still carries the whole header.
        let n = want.max(hdr.len().max(UDP_DATAGRAM_LEN));
        let (sec, usec) = stream::wall_now(false);
        write_datagram_id(&mut buf, seq, sec, usec);
        match w.shared.calls.wrote(sock.send(&buf[..n])) {
            Ok(sent) => {
                bytes += sent as u64;
                seq += 1;
                publish(&w.shared, bytes, seq as u64 - 1);
                w.shared.messages.store(seq as u64 - 1, Ordering::Relaxed);
            }
            // ECONNREFUSED: the ICMP of an earlier datagram (an iperf 2 server hands each
            // new client its listening socket and binds another, and a datagram between
            // the two finds no socket); this one was not sent: send it again.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                if let Some(b) = &w.budget {
                    b.remaining.fetch_add(want as i64, Ordering::Relaxed);
                }
            }
            Err(e) if stream::is_transient(&e) || e.raw_os_error() == Some(libc::ENOBUFS) => {
                w.shared.send_blocked.fetch_add(1, Ordering::Relaxed);
                if let Some(b) = &w.budget {
                    b.remaining.fetch_add(want as i64, Ordering::Relaxed);
                }
            }
            Err(e) => return Err(e),
        }
        if let Some(p) = &pacer {
            lag_s = lag_s.max(p.max_lag_s());
        }
    }
    w.shared
        .pacing_lag_us
        .store((lag_s * 1e6) as u64, Ordering::Relaxed);
    if duplex_fin {
        let (sec, usec) = stream::wall_now(false);
        write_datagram_id(&mut buf, -seq, sec, usec);
        if let Ok(sent) = sock.send(&buf[..len.max(UDP_DATAGRAM_LEN)]) {
            publish(&w.shared, bytes + sent as u64, seq as u64);
        }
    }
    Ok(())
}

/// UDP `--isochronous`, as iperf 2's client sends frames (`Client::RunUDPIsochronous`):
/// on the frame clock ([`Schedule`], `fps` a second from the stream's start; a slot
/// that passed entirely is skipped), a frame of log-normal size ([`UnitSizer`], at
/// least one datagram) cut into `-l` datagrams, each with its sequence number, send
/// time and [`IsochPayload`] (the frame's id, the previous frame's, its size and the
/// bytes left) where `layout`'s server reads it, so the iperf 2 server counts frames.
/// A frame's tail shorter than the header grows to it, as iperf 2's does.
pub fn udp_send_isoch(
    w: &Worker,
    sock: UdpSocket,
    hdr: &[u8],
    iso: Isochronous,
    layout: IsochLayout,
) -> io::Result<()> {
    sock.set_write_timeout(Some(STOP_POLL))?;
    let min = hdr.len().max(ISOCH_MIN_LEN);
    let len = w.block_len.max(min);
    let mut buf = w.payload.to_vec();
    buf.resize(len, 0);
    buf[..hdr.len()].copy_from_slice(hdr);
    let origin = w.pace_origin.unwrap_or_else(mono_now);
    let fps = u64::from(iso.fps.max(1));
    let mut clock = Schedule::every(1_000_000_000, fps);
    if let (Some(o), Some(e)) = (w.schedule_origin, w.schedule_end) {
        let end = (o + e).saturating_duration_since(origin);
        clock = clock.ending_at(end.as_nanos() as u64);
    }
    let mut sizer = UnitSizer::lognormal(&iso, w.shared.id as u64);
    let period_us = (1e6 / fps as f64).round() as u32;
    let (mut bytes, mut seq, mut prev_frame) = (0u64, 1i64, 0u32);
    let mut start = None;
    'frames: while !w.stop.load(Ordering::Relaxed) {
        let now_ns = mono_now().saturating_duration_since(origin).as_nanos() as u64;
        let slot = match clock.poll(now_ns) {
            Due::Wait(ns) => {
                std::thread::sleep(Duration::from_nanos(ns).min(STOP_POLL));
                continue;
            }
            Due::Over => break,
            Due::Send { slot, skipped, .. } => {
                if let (Some(rec), true) = (&w.shared.profile, skipped > 0) {
                    rec.lock().unwrap_or_else(|p| p.into_inner()).interval.slips += skipped;
                }
                slot
            }
        };
        let frame_id = (slot + 1) as u32;
        let mut remaining = sizer.next_bytes().max(min as u64);
        let mut burst = remaining;
        let (frame_began, frame_bytes) = (mono_now(), bytes);
        // The frame clock's origin on the wall clock: the server times frame k from
        // start + (k - 1) periods, so a late first frame must not move the grid.
        let start = *start.get_or_insert_with(|| {
            let (sec, usec) = stream::wall_now(false);
            let since = mono_now().saturating_duration_since(origin).as_micros() as u64;
            let at = (u64::from(sec) * 1_000_000 + u64::from(usec)).saturating_sub(since);
            ((at / 1_000_000) as u32, (at % 1_000_000) as u32)
        });
        while remaining > 0 {
            if w.stop.load(Ordering::Relaxed) {
                break 'frames;
            }
            let want = remaining.min(len as u64) as usize;
            let n = match &w.budget {
                Some(b) => b.take(want),
                None => want,
            };
            if n == 0 {
                break 'frames;
            }
            let n = n.max(min);
            let (sec, usec) = stream::wall_now(false);
            write_datagram_id(&mut buf, seq, sec, usec);
            IsochPayload {
                period_us,
                start,
                prev_frame_id: prev_frame,
                frame_id,
                burst_size: burst.min(u64::from(u32::MAX)) as u32,
                remaining: remaining.min(u64::from(u32::MAX)) as u32,
            }
            .write(&mut buf, layout);
            match w.shared.calls.wrote(sock.send(&buf[..n])) {
                Ok(sent) => {
                    bytes += sent as u64;
                    seq += 1;
                    remaining = remaining.saturating_sub(sent as u64);
                    if remaining > 0 && remaining < min as u64 {
                        (remaining, burst) = (min as u64, min as u64);
                    }
                    publish(&w.shared, bytes, seq as u64 - 1);
                    w.shared.messages.store(seq as u64 - 1, Ordering::Relaxed);
                }
                // Not sent (a full buffer, an earlier datagram's ICMP): the frame's rest
                // goes on, as iperf 2's does after a write error it accounts.
                Err(e)
                    if stream::is_transient(&e)
                        || e.kind() == io::ErrorKind::ConnectionRefused
                        || e.raw_os_error() == Some(libc::ENOBUFS) =>
                {
                    w.shared.send_blocked.fetch_add(1, Ordering::Relaxed);
                    if let Some(b) = &w.budget {
                        b.remaining.fetch_add(n as i64, Ordering::Relaxed);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        prev_frame = frame_id;
        // The frame went out whole: netmeter's own frame figures (frames, bytes, the
        // time its datagrams took).
        if let Some(rec) = &w.shared.profile {
            let ns = mono_now().saturating_duration_since(frame_began).as_nanos() as u64;
            rec.lock()
                .unwrap_or_else(|p| p.into_inner())
                .interval
                .record(ns, bytes - frame_bytes);
        }
    }
    Ok(())
}

/// iperf 2's bounceback period: a burst of requests every second (`Settings.cpp`:
/// without `--bounceback-period`, `mFPS = 1.0`).
pub const BOUNCEBACK_PERIOD: Duration = Duration::from_secs(1);

/// The request's `bounceback_hdr` as iperf 2's client writes it (`WriteTcpTxBBHdr`):
/// the burst's id, this request's send time, the hold and the sizes; the server's
/// timestamps unset (all ones).
pub fn bb_request(b: &Bounceback, tos: u8, burst_id: u32, sent: (u32, u32)) -> BbHdr {
    let mut bbflags = 0;
    if tos != 0 {
        bbflags |= BB_TOS;
    }
    if b.reply_len != b.request_len {
        bbflags |= BB_REPLYSIZE;
    }
    BbHdr {
        flags: HEADER_BOUNCEBACK,
        size: b.request_len,
        id: burst_id,
        bbflags,
        tos: u16::from(tos),
        run_time_centis: 0,
        client_tx: sent,
        server_rx: (u32::MAX, u32::MAX),
        server_tx: (u32::MAX, u32::MAX),
        hold_us: b.hold_us,
        reply_size: b.reply_len,
    }
}

/// Read exactly `buf.len()` bytes; `false` when asked to stop or the server closed.
fn read_exact_or_stop(w: &Worker, sock: &mut TcpStream, buf: &mut [u8]) -> io::Result<bool> {
    let mut off = 0;
    while off < buf.len() {
        if w.stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let want = buf.len() - off;
        match w.shared.calls.read(sock.read(&mut buf[off..]), want) {
            Ok(0) => return Ok(false),
            Ok(n) => off += n,
            Err(e) if stream::is_transient(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// TCP bounceback against an iperf 2 server (`RunBounceBackTCP`): every period a
/// burst of `burst` requests (`period`: `None` back to back), each written (its `bounceback_hdr` first) and its reply
/// read before the next, as iperf 2's client does; the round trip runs from the
/// request's write to the reply's last byte. No test header opens the connection: the
/// first request's header is it. The test ends with a close.
pub fn tcp_bounce(
    w: &Worker,
    mut sock: TcpStream,
    b: Bounceback,
    tos: u8,
    period: Option<Duration>,
) -> io::Result<()> {
    sock.set_nodelay(true)?;
    sock.set_write_timeout(Some(STOP_POLL))?;
    sock.set_read_timeout(Some(STOP_POLL))?;
    let Some(rec) = w.shared.rtt.as_ref() else {
        return Ok(());
    };
    let mut req = w.payload.to_vec();
    req.resize((b.request_len as usize).max(BB_HDR_LEN), 0);
    let mut reply = vec![0u8; (b.reply_len as usize).max(BB_HDR_LEN)];
    let mut m = BounceClient::new(BounceConfig {
        burst: b.burst,
        reply_len: reply.len(),
        period,
        load_start: None,
        reply_timeout: None,
    });
    let mut burst_id = 0u32;
    let mut rtts = Vec::with_capacity(1);
    while !w.stop.load(Ordering::Relaxed) {
        let count = match m.poll(mono_now()) {
            BounceStep::Wait(t) => {
                let left = t.saturating_duration_since(mono_now());
                std::thread::sleep(left.min(STOP_POLL));
                continue;
            }
            BounceStep::Send { count } => count,
            // Each reply is read before the next request: nothing is left to await.
            BounceStep::Await(_) | BounceStep::Lost(_) => break,
        };
        burst_id = burst_id.wrapping_add(1);
        for _ in 0..count {
            let (sec, usec) = stream::wall_now(false);
            bb_request(&b, tos, burst_id, (sec, usec)).write(&mut req);
            m.on_sent(mono_now());
            if !write_all_or_stop(w, &mut sock, &req)? {
                return Ok(());
            }
            if !read_exact_or_stop(w, &mut sock, &mut reply)? {
                return Ok(());
            }
            rtts.clear();
            let back = mono_now();
            m.on_reply_bytes(reply.len(), back, &mut rtts);
            {
                // Stamped with the reply's time, iperf 2's `packetTime`: the row it
                // counts in is the interval that time falls in.
                let mut r = rec.lock().unwrap_or_else(|p| p.into_inner());
                for t in &rtts {
                    r.on_round_trip(back, t.ns, req.len() as u64, false);
                }
            }
            w.shared
                .bytes
                .store(m.sent() * req.len() as u64, Ordering::Relaxed);
            w.shared.packets.store(m.done(), Ordering::Relaxed);
        }
    }
    Ok(())
}

/// Write all of `buf`, each write counted; `false` when asked to stop or the server
/// closed.
fn write_all_or_stop(w: &Worker, sock: &mut TcpStream, buf: &[u8]) -> io::Result<bool> {
    stream::write_full_counted(sock, buf, &w.stop, Some(&w.shared.calls))
}

/// UDP receiving half (`-R`, `--bidir`): iperf 2's datagrams from the server read and
/// accounted by [`UdpRecvHalf`] until its FIN, which is answered with the report
/// datagram iperf 2's receiver sends (`write_UDP_AckFIN`; an iperf 2 server sending
/// `-R` asks for none and ignores it), or until asked to stop. `trip_times`: the
/// report carries the transit. `hello`: `-R`'s test header datagram, sent again until
/// the server answers ([`HeaderRetry`]). `back`: `-d`/`-r`'s listening socket, not
/// yet connected: datagrams are taken from the server's sender only ([`BackFilter`]),
/// the socket connected to it at its first (so the FIN's answer goes back to it).
pub fn udp_recv(
    w: &Worker,
    sock: UdpSocket,
    trip_times: bool,
    mut hello: Option<Vec<u8>>,
    mut back: Option<BackFilter>,
) -> io::Result<()> {
    let began = mono_now();
    sock.set_read_timeout(Some(HeaderRetry::EVERY.min(STOP_POLL)))?;
    let Some(udp) = w.shared.udp.as_ref() else {
        return Ok(());
    };
    let owd = w.shared.owd.as_ref();
    let mut half = UdpRecvHalf::default();
    let mut retry = HeaderRetry::default();
    let mut buf = vec![0u8; crate::wire::UDP_MAX_LEN + 64];
    while !w.stop.load(Ordering::Relaxed) {
        let since = mono_now().saturating_duration_since(began);
        if let Some(d) = hello.as_mut()
            && retry.due(since, half.datagrams() > 0)
        {
            let (sec, usec) = stream::wall_now(false);
            write_datagram_id(d, 1, sec, usec);
            let _ = sock.send(d);
        }
        let got = match back.as_mut() {
            None => sock.recv(&mut buf),
            Some(f) => match sock.recv_from(&mut buf) {
                Ok((n, from)) => match f.admit(from) {
                    Admit::Take => Ok(n),
                    Admit::Connect(to) => sock.connect(to).map(|_| n),
                    Admit::Drop => continue,
                },
                // A read without a sender's address: the socket was shut down to
                // stop this loop (std cannot name the sender).
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => continue,
                Err(e) => Err(e),
            },
        };
        let n = match w.shared.calls.read(got, buf.len()) {
            Ok(n) => n,
            Err(e) if stream::is_transient(&e) => continue,
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
            Err(e) => return Err(e),
        };
        let rx_ns = crate::engine::clock::wall_ns();
        let mut acc = udp.lock().unwrap_or_else(|p| p.into_inner());
        let mut owd_rec = owd.map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
        let mut sinks = RecvSinks {
            acc: &mut acc,
            owd: owd_rec.as_deref_mut(),
            frames: None,
        };
        let arrival = half.on_datagram(&buf[..n], rx_ns, w.owd_correction_ns, &mut sinks);
        let counts = sinks.acc.counts();
        drop(owd_rec);
        drop(acc);
        publish(&w.shared, half.bytes(), half.datagrams());
        w.shared.messages.store(half.datagrams(), Ordering::Relaxed);
        if let Arrival::Fin(id) = arrival {
            // One answer: the server's sender sends its FIN once and reads nothing.
            let _ = sock.send(&half.report(&counts, trip_times).encode(&id));
            return Ok(());
        }
    }
    Ok(())
}

/// TCP `-R --trip-times`: read what the server sends until it closes (or this side
/// stops), as the bulk receiver does, and with the stream's delay record time each of
/// the server's writes ([`TcpTripRx`]: its test header skipped, each write's head
/// read): this host's wall clock at the write's last byte minus the send time in its
/// head, as iperf 2's `-R --trip-times` client times them.
pub fn tcp_recv_trip(w: &Worker, mut sock: TcpStream) -> io::Result<()> {
    sock.set_read_timeout(Some(STOP_POLL))?;
    let mut buf = vec![0u8; 128 * 1024];
    let mut rx = TcpTripRx::default();
    let (mut bytes, mut reads) = (0u64, 0u64);
    while !w.stop.load(Ordering::Relaxed) {
        let n = match w.shared.calls.read(sock.read(&mut buf), buf.len()) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if stream::is_transient(&e) => continue,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break,
            Err(e) => return Err(e),
        };
        if let Some(owd) = w.shared.owd.as_ref() {
            let now = crate::engine::clock::wall_ns();
            let mut rec = owd.lock().unwrap_or_else(|p| p.into_inner());
            rx.feed(&buf[..n], |sec, usec| {
                let sent = i64::from(sec) * 1_000_000_000 + i64::from(usec) * 1_000;
                rec.record_write(now, sent, w.owd_correction_ns);
            });
        }
        bytes += n as u64;
        reads += 1;
        publish(&w.shared, bytes, reads);
    }
    Ok(())
}
