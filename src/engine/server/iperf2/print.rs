//! `netmeter iperf2 -s`: a test's lines in iperf 2's server layout, as its loops read.
//! The lines are `report::iperf2::server`'s; this holds the test's start on the
//! server's clock and writes what it returns to the server's sink. A server not started
//! as iperf 2 (`ServerConfig::iperf2_layout` unset) prints nothing here.

use super::Group;
use crate::engine::output::Sink;
use crate::latency::LatencyStats;
use crate::report::Connected;
use crate::report::UdpRecvFigures;
use crate::report::iperf2::server::{BackHeader, ServerTest, SumRows, UdpCounts};
use crate::report::iperf2::{Bounceback, Iperf2Ctx, Row};
use crate::wire::iperf2::ServerReport;
use crate::wire::iperf2::{BbHdr, TestHdr};
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Instant, UNIX_EPOCH};

/// iperf 2's UDP server reads this much (its `-l` default).
const UDP_READ_LEN: u64 = 1470;
/// iperf 2's TCP server reads this much (its `-l` default, 128 KiB).
const TCP_READ_LEN: u64 = 128 * 1024;

/// What a `-d`/`-r` connection back's settings header names of its socket.
pub(in crate::engine::server) struct BackSock {
    pub write_len: u64,
    pub sndbuf: u64,
    /// UDP: bits/s.
    pub rate_bps: u64,
    /// TCP: its congestion control.
    pub congestion: Option<String>,
}

/// One test's printer.
pub(in crate::engine::server) struct Printer {
    test: ServerTest,
    started: Instant,
    sink: Sink,
}

impl Printer {
    /// A printer for the test `h` on the connection `local`–`peer`, with its
    /// connection line printed; `None` unless the server prints iperf 2's layout.
    pub fn start(g: &Group, h: &TestHdr, local: SocketAddr, peer: SocketAddr) -> Option<Printer> {
        Self::start_as(g, h, local, peer, false, None)
    }

    /// The same for a `--bounceback` test: each request is a read (iperf 2.2.1's
    /// server prints `Reads=Dist` rows for it), the connection line names the sizes.
    pub fn start_bounceback(
        g: &Group,
        bb: &BbHdr,
        local: SocketAddr,
        peer: SocketAddr,
    ) -> Option<Printer> {
        let sizes = Bounceback {
            request_len: bb.size,
            reply_len: bb.reply_size,
            hold_us: bb.hold_us,
            ..Bounceback::default()
        };
        let h = super::bounceback_as_test(bb);
        Self::start_as(g, &h, local, peer, false, Some(sizes))
    }

    /// The same for a test this server sends on (`-R`): a sender's rows (with `-P`,
    /// in the group's sum).
    pub fn start_sending(
        g: &Group,
        h: &TestHdr,
        local: SocketAddr,
        peer: SocketAddr,
    ) -> Option<Printer> {
        Self::start_as(g, h, local, peer, true, None)
    }

    /// The two halves of a `--full-duplex` test: the receiving half's printer (its
    /// connection line, saying `(full-duplex)`, printed) and the sending half's
    /// (`[ *N]` rows), sharing the test's transfer id and its `[FDn]` rows.
    pub fn start_full_duplex(
        g: &Group,
        h: &TestHdr,
        local: SocketAddr,
        peer: SocketAddr,
    ) -> Option<(Printer, Printer)> {
        let (ctx, no) = Self::ctx(g, h, None)?;
        let interval_s = g.shared().cfg.interval_s;
        let fd = SumRows::full_duplex(ctx.clone(), no, interval_s);
        let fd = Arc::new(Mutex::new(fd));
        let recv = Self::test(g, ctx.clone(), local, peer, no).full_duplex(fd.clone());
        let send = Self::test(g, ctx, local, peer, no).full_duplex_sending(fd);
        Some((Self::open(g, recv), Self::open(g, send)))
    }

    /// The `-d`/`-r` connection back to the client's listener `peer` (from `local`),
    /// on which this server sends (`sock`: its blocks, send buffer, rate and congestion
    /// control): iperf 2's client settings header for it, its connection line and a
    /// sender's `[ *N]` rows (with `-d` in the group's sum beside the client's test).
    pub fn start_back(
        g: &Group,
        h: &TestHdr,
        local: SocketAddr,
        peer: SocketAddr,
        sock: BackSock,
    ) -> Option<Printer> {
        let (ctx, no) = Self::ctx(g, h, None)?;
        let back = BackHeader {
            host: super::canon(peer.ip()).to_string(),
            port: peer.port(),
            write_len: sock.write_len,
            sndbuf: sock.sndbuf,
            rate_bps: sock.rate_bps,
            congestion: sock.congestion,
        };
        let mut test = Self::test(g, ctx, local, peer, no).connect_back(back);
        if let Some(sum) = g.sum.clone() {
            test = test.with_sum(sum);
        }
        Some(Self::open(g, test))
    }

    fn start_as(
        g: &Group,
        h: &TestHdr,
        local: SocketAddr,
        peer: SocketAddr,
        sending: bool,
        bounceback: Option<Bounceback>,
    ) -> Option<Printer> {
        let (ctx, no) = Self::ctx(g, h, bounceback)?;
        let mut test = Self::test(g, ctx, local, peer, no);
        if sending {
            test = test.sending();
        }
        if let (Some(sum), None) = (g.sum.clone(), bounceback) {
            test = test.with_sum(sum);
        }
        Some(Self::open(g, test))
    }

    /// The server's iperf 2 layout for the test `h` and a new transfer id; `None`
    /// unless the server prints iperf 2's layout.
    fn ctx(g: &Group, h: &TestHdr, bounceback: Option<Bounceback>) -> Option<(Iperf2Ctx, usize)> {
        let shared = g.shared();
        let mut ctx = shared.cfg.iperf2_layout.as_ref()?.ctx.clone();
        ctx.client = false;
        ctx.udp = h.udp;
        ctx.trip_times = h.trip_times();
        // The connection line's `(isoch)` (and UDP's frame columns): the rate the client
        // chose is not printed on a server, so none is kept.
        ctx.isochronous = h.isochronous().then_some(crate::wire::Isochronous {
            fps: 0,
            mean_bps: 0,
            stdev_bps: 0,
        });
        ctx.bounceback = bounceback;
        ctx.datagram_len = if h.udp { UDP_READ_LEN } else { TCP_READ_LEN };
        let no = shared.iperf2.transfers.fetch_add(1, Ordering::Relaxed) + 1;
        Some((ctx, no))
    }

    /// Transfer `no`'s rows on the connection `local`–`peer`.
    fn test(
        g: &Group,
        ctx: Iperf2Ctx,
        local: SocketAddr,
        peer: SocketAddr,
        no: usize,
    ) -> ServerTest {
        let shared = g.shared();
        let histograms = shared.cfg.iperf2_layout.as_ref().and_then(|l| l.histograms);
        let c = Connected {
            socket: no as i64,
            local_host: super::canon(local.ip()).to_string(),
            local_port: local.port(),
            remote_host: super::canon(peer.ip()).to_string(),
            remote_port: peer.port(),
        };
        let ms = g
            .wall()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64;
        ServerTest::new(ctx, no, c, ms, shared.cfg.interval_s).with_histograms(histograms)
    }

    /// A printer for `test`, its connection line printed.
    fn open(g: &Group, test: ServerTest) -> Printer {
        let p = Printer {
            started: g.now(),
            sink: g.shared().sink.clone(),
            test,
        };
        p.write(p.test.opening());
        p
    }

    fn t(&self, now: Instant) -> f64 {
        now.saturating_duration_since(self.started).as_secs_f64()
    }

    fn write(&self, lines: Vec<String>) {
        if lines.is_empty() {
            return;
        }
        if let Ok(mut w) = self.sink.lock() {
            for l in lines {
                let _ = writeln!(w, "{l}");
            }
            let _ = w.flush();
        }
    }

    /// `f` (what the test was told at `t`) and the lines it returns written, holding
    /// the sink's lock throughout when a row is due: a `-P` member's claim on the
    /// group's column header (made in `f`) and its rows then reach the output before
    /// another member's rows (told apart, a member that lost the claim could print its
    /// row above the header). A read with no row due takes no lock.
    fn step(&mut self, t: f64, f: impl FnOnce(&mut ServerTest) -> Vec<String>) {
        if self.test.row_due(t) {
            self.emit(f);
        } else {
            let out = f(&mut self.test);
            self.write(out);
        }
    }

    /// `f` and the lines it returns written under the sink's lock (see [`Self::step`]).
    fn emit(&mut self, f: impl FnOnce(&mut ServerTest) -> Vec<String>) {
        let Printer { test, sink, .. } = self;
        match sink.lock() {
            Ok(mut w) => {
                let lines = f(test);
                for l in &lines {
                    let _ = writeln!(w, "{l}");
                }
                if !lines.is_empty() {
                    let _ = w.flush();
                }
            }
            Err(_) => {
                f(test);
            }
        }
    }

    /// A bounceback request of `len` bytes, read whole: one read of iperf 2's length.
    pub fn request(&mut self, len: usize, now: Instant) {
        self.read(len, TCP_READ_LEN as usize, now);
    }

    /// A TCP read of `len` bytes that asked for `asked`.
    pub fn read(&mut self, len: usize, asked: usize, now: Instant) {
        let t = self.t(now);
        self.step(t, |x| x.read(len, asked, t));
    }

    /// A UDP datagram of `len` bytes, with the flow's counts after it.
    pub fn datagram(&mut self, len: usize, counts: UdpCounts, now: Instant) {
        let t = self.t(now);
        self.step(t, |x| x.udp(len, counts, t));
    }

    /// The one-way delay (seconds) of what was read last, which arrived at `arrival_s`
    /// (this host's wall clock, seconds since the epoch).
    pub fn delay(&mut self, owd_s: f64, arrival_s: f64) {
        let sent_us = ((arrival_s - owd_s) * 1e6).round() as i64;
        self.test.delay(owd_s, sent_us);
    }

    /// A UDP `--isochronous` datagram that completed frame `frame_id`, `latency_s`
    /// after the frame was due (see `ServerTest::frame`).
    pub fn frame(&mut self, frame_id: u32, latency_s: f64) {
        self.test.frame(frame_id, latency_s);
    }

    /// Whether a row falls due at `now`: a TCP sender reads its socket's retransmits
    /// for it ([`Printer::retransmits`]) only then.
    pub fn row_due(&self, now: Instant) -> bool {
        self.test.row_due(self.t(now))
    }

    /// A TCP sender's segments retransmitted since its connection opened.
    pub fn retransmits(&mut self, total: u64) {
        self.test.retransmits(total);
    }

    /// A send call that sent `len` bytes (`ok`) or failed.
    pub fn wrote(&mut self, len: usize, ok: bool, now: Instant) {
        let t = self.t(now);
        self.step(t, |x| x.write(len, ok, t));
    }

    /// Nothing arrived: the rows of the intervals that ended.
    pub fn tick(&mut self, now: Instant) {
        let t = self.t(now);
        self.step(t, |x| x.tick(t));
    }

    /// The test is over: its last rows.
    pub fn finish(mut self, now: Instant) {
        let t = self.t(now);
        self.emit(|x| x.finish(t));
    }

    /// A UDP `-d`/`-r` connection back is over: its last rows and the datagrams it
    /// sent (`n`, its end included), then the report the client's listener answered
    /// with, when it did.
    pub fn finish_back(mut self, now: Instant, n: u64, report: Option<&ServerReport>) {
        let t = self.t(now);
        let listener = report.map(|r| {
            let pct = if r.datagrams > 0 {
                100.0 * r.lost as f64 / r.datagrams as f64
            } else {
                0.0
            };
            Row {
                end: r.stop_s,
                seconds: r.stop_s,
                bytes: r.bytes,
                udp_recv: Some(UdpRecvFigures {
                    jitter_ms: r.jitter_s * 1e3,
                    lost_packets: r.lost,
                    packets: r.datagrams,
                    lost_percent: pct,
                }),
                owd: r.transit.map(|t| LatencyStats {
                    count: u64::from(t.count),
                    min_ms: t.min_s * 1e3,
                    mean_ms: t.mean_s * 1e3,
                    max_ms: t.max_s * 1e3,
                    stdev_ms: if t.count > 1 {
                        (t.m2_s2 / f64::from(t.count - 1)).sqrt() * 1e3
                    } else {
                        0.0
                    },
                    ..LatencyStats::default()
                }),
                ..Row::default()
            }
        });
        self.emit(|x| {
            let mut out = x.finish_sent(t, n);
            if let Some(row) = &listener {
                out.extend(x.listener_report(row));
            }
            out
        });
    }

    /// A UDP sender's test is over: its last rows, then the datagrams it sent (`n`,
    /// its end included).
    pub fn finish_sent(mut self, now: Instant, n: u64) {
        let t = self.t(now);
        self.emit(|x| x.finish_sent(t, n));
    }
}
