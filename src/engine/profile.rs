//! Traffic profiles on real sockets: the profiled sender loops (bursts and isochronous
//! frames, TCP and UDP), the isochronous receiver's frame record, the meter's interval
//! extras, and the `--txstart-time` waits.
//!
//! The scheduling math lives in `crate::profile`, the loops' decisions in the sans-IO
//! `machine::profile_send` and `machine::txstart`; here are the threads and clocks. A
//! profiled sender is a separate loop chosen once when the stream thread starts, so the
//! bulk loops in `stream` carry no profile checks.

use super::clock;
use super::machine::profile_send::{Carrier, ProfileSender, ProfileStep, Unit};
use super::machine::txstart;
use super::output::Output;
use super::record::{ProfileRecord, StreamShared};
use super::stream::{self, DataSock, STOP_POLL, UDP_BATCH, Worker, is_transient, wall_now};
use crate::latency::Hist;
use crate::profile::{FrameSummary, Profile, UnitFigures};
use crate::report::observe::Event;
use crate::report::profile::{FramesInterval, TxStart, UnitsInterval};
use crate::report::{Interval, StreamInterval};
use crate::sock::Batch;
use crate::wire::{self, IsochHeader, UdpHeader};
use std::io::{self, Write};
use std::net::{TcpStream, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Instant, UNIX_EPOCH};

/// Per-interval profile extras, stream by stream, and their `[SUM]`.
#[derive(Default)]
pub struct IntervalSum {
    units: Option<(bool, UnitFigures)>,
    frames: Option<(FramesInterval, u32, Hist)>,
}

impl IntervalSum {
    /// Move a stream's interval figures into its row (and, unless omitting, its total).
    pub fn take(&mut self, s: &StreamShared, omitting: bool, row: &mut StreamInterval) {
        if let Some(rec) = &s.profile {
            let mut r = rec.lock().unwrap_or_else(|p| p.into_inner());
            let r = &mut *r;
            let ext = row.netmeter.get_or_insert_with(Default::default);
            let u = Some(UnitsInterval::of(&r.interval));
            if r.frames {
                ext.frames = u;
            } else {
                ext.bursts = u;
            }
            if !omitting {
                r.total.merge(&r.interval);
            }
            self.units
                .get_or_insert_with(|| (r.frames, UnitFigures::default()))
                .1
                .merge(&r.interval);
            r.interval.clear();
        }
        if let Some(rec) = &s.frames {
            let mut r = rec.lock().unwrap_or_else(|p| p.into_inner());
            let r = &mut *r;
            let now = r.recv.counts();
            let f = FramesInterval {
                complete: now.complete.saturating_sub(r.prev.complete),
                lost: now.lost.saturating_sub(r.prev.lost),
                jitter_ms: now.jitter_s * 1000.0,
                latency: r.interval_latency.stats(),
            };
            row.netmeter
                .get_or_insert_with(Default::default)
                .frames_received = Some(f);
            let sum = self
                .frames
                .get_or_insert_with(|| (FramesInterval::default(), 0, Hist::default()));
            sum.0.complete += f.complete;
            sum.0.lost += f.lost;
            sum.0.jitter_ms += f.jitter_ms;
            sum.1 += 1;
            sum.2.merge(&r.interval_latency);
            r.interval_latency.clear();
            r.prev = now;
            if omitting {
                r.base = now;
                r.total_latency.clear();
            }
        }
    }

    /// Fill the interval's `[SUM]` extras.
    pub fn finish(self, iv: &mut Interval) {
        if let Some((frames, u)) = self.units {
            let ext = iv.sum.netmeter.get_or_insert_with(Default::default);
            let x = Some(UnitsInterval::of(&u));
            if frames {
                ext.frames = x;
            } else {
                ext.bursts = x;
            }
        }
        if let Some((mut f, n, h)) = self.frames {
            f.jitter_ms /= n.max(1) as f64;
            f.latency = h.stats();
            iv.sum
                .netmeter
                .get_or_insert_with(Default::default)
                .frames_received = Some(f);
        }
    }
}

/// A stream's final profile figures: sender units, receiver frames.
pub fn finals(s: &StreamShared, omitting: bool) -> (Option<UnitFigures>, Option<FrameSummary>) {
    let units = s.profile.as_ref().map(|rec| {
        let r = rec.lock().unwrap_or_else(|p| p.into_inner());
        let mut f = r.total.clone();
        if !omitting {
            f.merge(&r.interval);
        }
        f
    });
    let frames = s.frames.as_ref().map(|rec| {
        let r = rec.lock().unwrap_or_else(|p| p.into_inner());
        let c = r.recv.final_counts();
        FrameSummary {
            frames_complete: c.complete.saturating_sub(r.base.complete),
            frames_lost: c.lost.saturating_sub(r.base.lost),
            frame_jitter_ms: c.jitter_s * 1000.0,
            latency: r.total_latency.stats(),
            latency_histogram_us: r.total_latency.buckets_us(),
        }
    });
    (units, frames)
}

// ---------------------------------------------------------------------------------
// Senders.

/// Start a profiled sender's thread (named like the bulk stream it replaces).
pub fn spawn(w: Worker, p: Profile, sock: DataSock) -> io::Result<JoinHandle<()>> {
    match sock {
        DataSock::Tcp(t) => {
            let name = format!("nm-tcp-{}", w.shared.id);
            stream::spawn_loop(name, w, move |w| tcp_send(w, &p, t))
        }
        DataSock::Udp(u) => {
            let name = format!("nm-udp-{}", w.shared.id);
            stream::spawn_loop(name, w, move |w| udp_send(w, &p, &u))
        }
    }
}

/// A profiled sender's machine: the unit grid from the test's start (`origin`),
/// ending where the test does (`-t`), units carried as `carrier` says.
fn machine(w: &Worker, p: &Profile, carrier: Carrier, origin: Instant) -> ProfileSender {
    ProfileSender::new(p, w.shared.id, carrier, origin, w.schedule_end)
}

/// Sleep until the next unit is due; `None` when asked to stop first or when no unit is
/// due before the end of the test. The grid starts at
/// the test's start, so the units of parallel streams (and, with `--txstart-time`, of
/// several clients) line up, and a thread that starts late shows slips.
pub(crate) fn next_unit(
    w: &Worker,
    m: &mut ProfileSender,
    rec: &Mutex<ProfileRecord>,
) -> Option<Unit> {
    loop {
        if w.stop.load(Ordering::Relaxed) {
            return None;
        }
        let now = w.clock.now();
        match m.poll(now) {
            ProfileStep::Wait(t) => {
                std::thread::sleep(t.saturating_duration_since(now).min(STOP_POLL))
            }
            ProfileStep::Over => return None,
            ProfileStep::Send(u) => {
                if u.skipped > 0 {
                    rec.lock().unwrap_or_else(|p| p.into_inner()).interval.slips += u.skipped;
                }
                return Some(u);
            }
        }
    }
}

/// The unit under way is sent: record its transfer time and bytes.
pub(crate) fn record_unit(
    w: &Worker,
    rec: &Mutex<ProfileRecord>,
    m: &mut ProfileSender,
    bytes: u64,
) {
    let ns = m.unit_done(w.clock.now());
    rec.lock()
        .unwrap_or_else(|p| p.into_inner())
        .interval
        .record(ns, bytes);
}

/// TCP: each unit is written in `-l` blocks as fast as the socket takes them.
fn tcp_send(w: &Worker, p: &Profile, mut sock: TcpStream) -> io::Result<()> {
    sock.set_write_timeout(Some(STOP_POLL))?;
    let Some(rec) = w.shared.profile.as_ref() else {
        return Ok(());
    };
    // --trip-times: every write starts with a frame header carrying its send time.
    let framed = w.ts_ns && w.block_len >= wire::TCP_FRAME_HDR;
    let mut frame = if framed {
        w.payload.to_vec()
    } else {
        Vec::new()
    };
    let origin = w.schedule_origin.unwrap_or_else(|| w.clock.now());
    let block_len = w.block_len.max(1);
    let mut m = machine(w, p, Carrier::Tcp { block_len }, origin);
    let (mut bytes, mut blocks) = (0u64, 0u64);
    'units: while let Some(unit) = next_unit(w, &mut m, rec) {
        let size = unit.size;
        let mut left = size;
        while left > 0 {
            let want = (left as usize).min(block_len);
            let len = match &w.budget {
                Some(b) => match b.take(want) {
                    0 => break 'units,
                    n => n,
                },
                None => want,
            };
            let framed_now = framed && len >= wire::TCP_FRAME_HDR;
            if framed_now {
                wire::write_tcp_frame_header(&mut frame, len as u32, clock::wall_ns());
            }
            let mut off = 0;
            while off < len {
                if w.stop.load(Ordering::Relaxed) {
                    return Ok(()); // cut off mid-unit: not counted as sent
                }
                let r = if framed_now {
                    sock.write(&frame[off..len])
                } else {
                    sock.write(&w.payload[off..len])
                };
                match w.shared.calls.wrote(r) {
                    Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "peer closed")),
                    Ok(n) => {
                        off += n;
                        bytes += n as u64;
                        w.shared.bytes.store(bytes, Ordering::Relaxed);
                    }
                    Err(e) if is_transient(&e) => {}
                    Err(e) => return Err(e),
                }
            }
            left -= len as u64;
            blocks += 1;
            w.shared.packets.store(blocks, Ordering::Relaxed);
        }
        if left == 0 {
            record_unit(w, rec, &mut m, size);
        }
    }
    Ok(())
}

/// UDP: each unit is cut into `-l` datagrams (the last one shorter) sent with
/// `sendmmsg`; isochronous frames to a netmeter server carry an [`IsochHeader`].
fn udp_send(w: &Worker, p: &Profile, sock: &UdpSocket) -> io::Result<()> {
    sock.set_write_timeout(Some(STOP_POLL))?;
    let Some(rec) = w.shared.profile.as_ref() else {
        return Ok(());
    };
    let fd = sock.as_fd();
    let hdr_len = UdpHeader::len(w.udp_seq64);
    let framed = p.framed();
    let min_len = hdr_len + if framed { IsochHeader::LEN } else { 0 };
    let len = w.block_len.max(min_len);
    let mut bufs: Vec<Vec<u8>> = (0..UDP_BATCH)
        .map(|_| {
            let mut b: Vec<u8> = w.payload.iter().copied().cycle().take(len).collect();
            b.resize(len, 0);
            b
        })
        .collect();
    let mut lens = [0usize; UDP_BATCH];
    let mut batch = Batch::new(UDP_BATCH);
    let origin = w.schedule_origin.unwrap_or_else(|| w.clock.now());
    let mut m = machine(w, p, Carrier::Udp { len, min_len }, origin);
    let (mut seq, mut bytes) = (0u64, 0u64);
    while let Some(unit) = next_unit(w, &mut m, rec) {
        let (n, frame_id) = (unit.pieces, unit.id);
        let start_ns = clock::wall_ns();
        let mut i = 0u64;
        while i < n {
            let mut k = (n - i).min(UDP_BATCH as u64) as usize;
            if let Some(b) = &w.budget {
                let mut allowed = 0;
                while allowed < k && b.take(len) == len {
                    allowed += 1;
                }
                if allowed == 0 {
                    return Ok(());
                }
                k = allowed;
            }
            let (sec, usec) = wall_now(w.ts_ns);
            for (j, buf) in bufs.iter_mut().take(k).enumerate() {
                let idx = i + j as u64;
                lens[j] = unit.piece(idx);
                UdpHeader {
                    sec,
                    usec,
                    seq: seq + 1 + j as u64,
                }
                .write(buf, w.udp_seq64);
                if framed {
                    IsochHeader {
                        frame_id,
                        start_ns,
                        dgrams: u32::try_from(n).unwrap_or(u32::MAX),
                        index: idx as u32,
                    }
                    .write(&mut buf[hdr_len..]);
                }
            }
            let refs: Vec<&[u8]> = (0..k).map(|j| &bufs[j][..lens[j]]).collect();
            let mut sent = 0;
            while sent < k {
                if w.stop.load(Ordering::Relaxed) {
                    return Ok(()); // cut off mid-unit: not counted as sent
                }
                match w.shared.calls.wrote(batch.send(fd, &refs[sent..])) {
                    Ok(m) => sent += m,
                    Err(e) if is_transient(&e) => {}
                    // ICMP port unreachable bounced back: the datagrams are gone, like
                    // any other loss; keep going.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => sent = k,
                    Err(e) => return Err(e),
                }
            }
            seq += k as u64;
            bytes += lens[..k].iter().sum::<usize>() as u64;
            i += k as u64;
            w.shared.bytes.store(bytes, Ordering::Relaxed);
            w.shared.packets.store(seq, Ordering::Relaxed);
            // One datagram per message: the profiled sender does not use GSO.
            w.shared.messages.store(seq, Ordering::Relaxed);
        }
        record_unit(w, rec, &mut m, unit.bytes());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// --txstart-time.

/// This host's wall clock, seconds since the epoch.
fn epoch_now() -> f64 {
    crate::clock::wall_now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// Sleep until `lead_s` before the wall-clock instant `at` (seconds since the epoch),
/// re-reading the clock at least once a second so a clock step is followed
/// (`machine::txstart::wait`).
fn sleep_until(at: f64, lead_s: f64) {
    while let Some(d) = txstart::wait(at, lead_s, epoch_now()) {
        std::thread::sleep(d);
    }
}

/// `Waiting until <time> to start`.
pub fn waiting_text(epoch_s: f64) -> String {
    let secs = epoch_s.floor();
    let ms = ((epoch_s - secs) * 1000.0).round().min(999.0) as u32;
    let date = clock::httpdate(secs.max(0.0) as u64);
    // "Tue, 14 Nov 2023 22:13:20 GMT" → "Tue, 14 Nov 2023 22:13:20.250 GMT"
    let date = match date.strip_suffix(" GMT") {
        Some(d) => format!("{d}.{ms:03} GMT"),
        None => date,
    };
    format!("Waiting until {date} ({epoch_s:.3}) to start\n")
}

/// Before connecting: announce the start and sleep until the connect lead before it.
pub fn txstart_before_connect(at: f64, out: &mut Output) {
    out.emit(Event::Info(&waiting_text(at)));
    sleep_until(at, crate::profile::TXSTART_CONNECT_LEAD_S);
}

/// Before opening the data streams: sleep until their estimated setup time before the
/// start (`ctrl_fd`: the control connection, whose RTT sizes the estimate).
pub fn txstart_before_streams(at: f64, ctrl_fd: BorrowedFd<'_>, streams: u32) {
    let rtt_s = crate::sock::tcp_info(ctrl_fd)
        .map(|i| i.rtt_us as f64 / 1e6)
        .unwrap_or(0.0);
    sleep_until(at, crate::profile::stream_setup_lead_s(rtt_s, streams));
}

/// Right before the data threads start: sleep until the instant itself.
pub fn txstart_now(at: f64) -> TxStart {
    let ready = epoch_now();
    sleep_until(at, 0.0);
    txstart::started(at, ready, epoch_now())
}

/// A start later than this (ms) gets a warning.
pub const TXSTART_LATE_WARN_MS: f64 = 10.0;

/// The client's test clock origin: TEST_START, or with `--txstart-time` the start
/// instant itself (waited for here; recorded in `start.netmeter.txstart`).
/// `clock`: the test's monotonic clock (the client's config's).
pub fn client_t0(
    txstart: Option<f64>,
    test_start: Option<Instant>,
    clock: &dyn crate::clock::Clock,
    out: &mut Output,
) -> Instant {
    let Some(at) = txstart else {
        return test_start.unwrap_or_else(|| clock.now());
    };
    let ts = txstart_now(at);
    let t0 = clock.now();
    if ts.late_ms > TXSTART_LATE_WARN_MS {
        let w = format!(
            "data started {:.0} ms after --txstart-time: {}",
            ts.late_ms,
            txstart::lateness_cause(&ts)
        );
        out.warning(&w);
        out.report.start.netmeter.warnings.push(w);
    }
    out.report.start.netmeter.txstart = Some(ts);
    t0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_line() {
        assert_eq!(
            waiting_text(1_700_000_000.25),
            "Waiting until Tue, 14 Nov 2023 22:13:20.250 GMT (1700000000.250) to start\n"
        );
    }
}
