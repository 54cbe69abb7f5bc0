//! iperf 2 UDP tests: the UDP listener offers every datagram from a source no iperf3
//! test expects ([`UdpDoor::offer`]); one carrying an iperf 2 test header starts a flow
//! on a socket connected to the client (as iperf 2's own server does, on the same
//! port), which accounts each datagram (loss, out-of-order, jitter, transit with
//! `--trip-times`) and answers the client's FIN (a negative sequence number) with the
//! server report, sent again for each FIN the client repeats, as iperf 2 expects.
//! With `-R` the flow's socket sends instead; with `--full-duplex` it does both (no
//! server report: iperf 2's full-duplex client asks for none).
//!
//! Bounded: datagrams that are not an iperf 2 header are dropped and counted (one log
//! line a period, not one per datagram); a refused flow's further datagrams are dropped
//! for [`REFUSED_HOLD`] without another line; only a datagram with a sequence number
//! up to [`MAX_FIRST_SEQ`] starts a flow (not a FIN, not the middle of a stream); flows are capped in total
//! ([`MAX_FLOWS`]) and per source ([`MAX_FLOWS_PER_SOURCE`]) besides the test slots; a
//! flow with no datagram for the test's idle time ends.

use super::print::{BackSock, Printer};
use super::{Flow, Group, Plan, over_limit};
use crate::report::iperf2::server::UdpCounts;
use crate::stats::UdpRecv;
use crate::wire::iperf2::{
    Amount, ClientHdr, DatagramId, HEADER_SEQNO64B, HEADER_UDPTESTS, HEADER_VERSION2, IsochPayload,
    Legacy, ServerReport, TestHdr, Transit, UPPER_REVERSE, UPPER_TRIPTIME, UdpOpening,
    classify_udp, udp_start_datagram, write_datagram_id,
};
use socket2::{SockAddr, Type};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant, UNIX_EPOCH};

/// Concurrent iperf 2 UDP flows, all sources.
pub const MAX_FLOWS: usize = 256;
/// Concurrent iperf 2 UDP flows from one source address.
pub const MAX_FLOWS_PER_SOURCE: usize = 32;
/// How long a refused flow's datagrams are dropped without another log line.
pub const REFUSED_HOLD: Duration = Duration::from_secs(10);
/// At most one "dropped N datagrams" line this often.
const DROP_LOG_EVERY: Duration = Duration::from_secs(10);
/// How long the server report waits for silence before it counts as received
/// (`write_UDP_AckFIN`: 250 ms, 10 tries).
const ACK_SILENCE: Duration = Duration::from_millis(250);
const ACK_TRIES: usize = 10;
/// A flow's receive tick (deadline and shutdown checks).
const TICK: Duration = Duration::from_millis(50);
/// The highest sequence number a flow's first datagram may carry.
pub const MAX_FIRST_SEQ: i64 = 1000;
/// Datagrams queued for a flow before its socket took over (a few at most).
const MAX_QUEUED: usize = 64;

/// A running flow, as the listener knows it.
struct Running {
    tx: Sender<Vec<u8>>,
    queued: usize,
    thread: std::thread::JoinHandle<()>,
}

/// The UDP listener's view of iperf 2: running flows, refused ones, dropped counts.
#[derive(Default)]
pub(in crate::engine::server) struct UdpDoor {
    flows: HashMap<SocketAddr, Running>,
    refused: HashMap<SocketAddr, Instant>,
    dropped: u64,
    last_drop_log: Option<Instant>,
}

impl UdpDoor {
    /// A datagram from `from` that no iperf3 test expects. Returns false when it is not
    /// iperf 2's either (the caller's business, e.g. iperf3's connect datagram).
    pub fn offer(&mut self, shared: &Arc<super::Shared>, d: &[u8], from: SocketAddr) -> bool {
        let now = shared.now();
        self.flows.retain(|_, r| !r.thread.is_finished());
        if let Some(r) = self.flows.get_mut(&from) {
            // Arrived before the flow's connected socket took over.
            if r.queued < MAX_QUEUED && r.tx.send(d.to_vec()).is_ok() {
                r.queued += 1;
            }
            return true;
        }
        match classify_udp(d) {
            UdpOpening::Iperf3Connect => return false,
            UdpOpening::Unknown => {
                self.drop_counted(shared, now);
                return true;
            }
            UdpOpening::Iperf2 => {}
        }
        self.refused
            .retain(|_, t| now.duration_since(*t) < REFUSED_HOLD);
        // A flow starts at its first datagrams (sequence 1, or a little later when the
        // first were lost): a FIN with no flow (the client repeating it after its flow
        // ended, or was refused) or a datagram from the middle of a stream starts
        // nothing, so stray or forged datagrams cannot take a test slot as easily.
        let starts = DatagramId::parse(d, DatagramId::flags_seq64(d))
            .is_some_and(|i| (1..=MAX_FIRST_SEQ).contains(&i.seq));
        if !starts || self.refused.contains_key(&from) {
            self.drop_counted(shared, now);
            return true;
        }
        if let Err(r) = self.start(shared, d, from, now) {
            super::refused(shared, from, TestHdr::parse_udp(d).ok().as_ref(), r);
            if self.refused.len() < 4096 {
                self.refused.insert(from, now);
            }
        }
        true
    }

    fn drop_counted(&mut self, shared: &super::Shared, now: Instant) {
        self.dropped += 1;
        if self
            .last_drop_log
            .is_none_or(|t| now.duration_since(t) >= DROP_LOG_EVERY)
        {
            shared.log(&format!(
                "dropped {} UDP datagram(s) that no test takes (no iperf 2 test header, a refused flow's, or a FIN after its flow)",
                self.dropped
            ));
            self.dropped = 0;
            self.last_drop_log = Some(now);
        }
    }

    /// Start a flow for the first datagram `d` of an iperf 2 UDP test.
    fn start(
        &mut self,
        shared: &Arc<super::Shared>,
        d: &[u8],
        from: SocketAddr,
        now: Instant,
    ) -> Result<(), super::Refusal> {
        let refusal = |reason, message: String| super::Refusal {
            reason,
            answer: super::Answer::Busy,
            message,
        };
        use super::super::policy::Reason;
        shared.cfg.policy.check_address(super::canon(from.ip()))?;
        let h = TestHdr::parse_udp(d).map_err(|e| refusal(Reason::Params, e.to_string()))?;
        let plan = super::plan(&h, &shared.cfg.policy, shared.cfg.psk.is_some())?;
        let ip = super::canon(from.ip());
        let same_source = self
            .flows
            .keys()
            .filter(|a| super::canon(a.ip()) == ip)
            .count();
        if self.flows.len() >= MAX_FLOWS || same_source >= MAX_FLOWS_PER_SOURCE {
            return Err(refusal(
                Reason::Busy,
                format!(
                    "{} iperf 2 UDP flows running ({same_source} from {ip}; at most {MAX_FLOWS}, {MAX_FLOWS_PER_SOURCE} per source)",
                    self.flows.len()
                ),
            ));
        }
        let group = shared.iperf2.join(shared, from, &h, &plan, now)?;
        let sock = connected(shared, from)
            .map_err(|e| refusal(Reason::Params, format!("cannot open its UDP socket: {e}")))?;
        if h.threads <= 1 || group.total() == 0 {
            shared.log(&format!(
                "iperf 2 test from {}: {}",
                super::shown(from),
                super::describe(&h, &plan)
            ));
        }
        let (tx, rx) = channel();
        let first = d.to_vec();
        let thread = std::thread::Builder::new()
            .name("nm-iperf2-udp".into())
            .spawn(move || match (plan.legacy, plan.flow) {
                (Some(_), _) => legacy(group, sock, from, h, plan, first, rx),
                (None, Flow::Send) => {
                    let halt = AtomicBool::new(false);
                    send(group, sock, from, &h, &plan, &halt, SendAs::Own(None));
                }
                (None, Flow::Both) => both(group, sock, from, h, plan, first, rx),
                (None, Flow::Receive) => {
                    serve(group, sock, from, h, plan, (first, rx), None);
                }
            })
            .map_err(|e| refusal(Reason::Busy, format!("cannot start a thread: {e}")))?;
        self.flows.insert(
            from,
            Running {
                tx,
                queued: 0,
                thread,
            },
        );
        Ok(())
    }
}

impl Drop for UdpDoor {
    /// The listener is stopping: flows notice the shutdown at their next tick.
    fn drop(&mut self) {
        for (_, r) in self.flows.drain() {
            let _ = r.thread.join();
        }
    }
}

/// A socket on the server's port connected to the client: the kernel hands it the
/// flow's datagrams from now on.
fn connected(shared: &super::Shared, to: SocketAddr) -> std::io::Result<UdpSocket> {
    let local = shared.local;
    let s = super::super::make_listener(local, Type::DGRAM, shared.cfg.family, &shared.cfg.side)?;
    let to = match (local.is_ipv6(), to) {
        (true, SocketAddr::V4(v4)) => {
            SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port())
        }
        _ => to,
    };
    s.connect(&SockAddr::from(to))?;
    let sock: UdpSocket = s.into();
    sock.set_read_timeout(Some(TICK))?;
    Ok(sock)
}

/// Transit times (receiver wall clock minus the client's send time), Welford's running
/// mean and sum of squares, as iperf 2's server report carries them.
#[derive(Debug, Default, Clone, Copy)]
pub struct TransitStats {
    pub count: u32,
    pub min_s: f64,
    pub max_s: f64,
    pub mean_s: f64,
    pub m2_s2: f64,
}

impl TransitStats {
    pub fn add(&mut self, t: f64) {
        self.count += 1;
        if self.count == 1 {
            self.min_s = t;
            self.max_s = t;
        }
        self.min_s = self.min_s.min(t);
        self.max_s = self.max_s.max(t);
        let d = t - self.mean_s;
        self.mean_s += d / f64::from(self.count);
        self.m2_s2 += d * (t - self.mean_s);
    }

    pub fn transit(&self) -> Option<Transit> {
        (self.count > 0).then_some(Transit {
            min_s: self.min_s,
            max_s: self.max_s,
            mean_s: self.mean_s,
            m2_s2: self.m2_s2,
            count: self.count,
        })
    }
}

/// One flow's accounting: pure, `now` (wall seconds) passed in.
#[derive(Debug, Default)]
pub struct FlowCount {
    pub recv: UdpRecv,
    pub bytes: u64,
    pub transit: TransitStats,
    /// The FIN's sequence number, once it came.
    pub fin: Option<DatagramId>,
    /// The last datagram's transit, seconds (what `netmeter iperf2 -s` prints).
    pub last_transit_s: Option<f64>,
}

impl FlowCount {
    /// Account datagram `d` received at wall time `now_s`. The first FIN is counted as
    /// the last datagram (iperf 2's server counts it; its client does not count its
    /// first, so the two agree); later FINs (the client repeating it) are not.
    pub fn on_datagram(&mut self, d: &[u8], seq64: bool, now_s: f64) {
        let Some(id) = DatagramId::parse(d, seq64) else {
            return;
        };
        if self.fin.is_some() {
            return;
        }
        let sent_s = f64::from(id.sec) + f64::from(id.usec) / 1e6;
        let transit = now_s - sent_s;
        let seq = if id.seq < 0 {
            self.fin = Some(id);
            id.seq.unsigned_abs()
        } else {
            id.seq as u64
        };
        self.recv.on_datagram(seq, transit);
        self.bytes += d.len() as u64;
        self.transit.add(transit);
        self.last_transit_s = Some(transit);
    }

    /// The server report for this flow, `elapsed_s` after its first datagram.
    pub fn report(&self, elapsed_s: f64, with_transit: bool) -> ServerReport {
        let c = self.recv.counts();
        ServerReport {
            bytes: self.bytes,
            stop_s: elapsed_s,
            lost: c.lost,
            out_of_order: c.out_of_order,
            datagrams: c.highest_seq,
            jitter_s: c.jitter_s,
            transit: if with_transit {
                self.transit.transit()
            } else {
                None
            },
        }
    }
}

fn wall_s(g: &Group) -> f64 {
    g.wall()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// `--full-duplex` over UDP, iperf 2's way: this server sends its half on the flow's
/// own socket (as for `-R`) while it receives the client's; the client asks for no
/// server report (`HEADER_NOUDPFIN`, which iperf 2 sets for a full-duplex test).
fn both(
    g: Arc<Group>,
    sock: UdpSocket,
    from: SocketAddr,
    h: TestHdr,
    plan: Plan,
    first: Vec<u8>,
    queued: Receiver<Vec<u8>>,
) {
    let tx = match sock.try_clone() {
        Ok(tx) => tx,
        Err(e) => {
            g.failed(format!("cannot clone the flow's socket: {e}"));
            return;
        }
    };
    // `netmeter iperf2 -s`: both halves' rows, the sending half's `[ *N]`, and `[FDn]`.
    let (rx_rows, tx_rows) = match sock
        .local_addr()
        .ok()
        .and_then(|local| Printer::start_full_duplex(&g, &h, local, from))
    {
        Some((r, t)) => (Some(r), Some(t)),
        None => (None, None),
    };
    // The sending half stops when the receiving half ends other than by the client's
    // end (its silence for the idle time, a limit): a forged datagram from a silent
    // source gets no more than the idle time's worth.
    let halt = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (g2, h2, plan2, halt) = (g.clone(), h.clone(), plan.clone(), &halt);
        s.spawn(move || {
            send(
                g2,
                tx,
                from,
                &h2,
                &plan2,
                halt,
                SendAs::Own(tx_rows.map(Box::new)),
            )
        });
        if !serve(g, sock, from, h, plan, (first, queued), rx_rows) {
            halt.store(true, Ordering::Relaxed);
        }
    });
}

/// `-d`/`-r` over UDP, iperf 2's way: the client listens on the port its header names
/// (`-L`, or its `-p`); this server sends there from a socket of its own, to the
/// client's own address only: at once while it receives (`-d`), or after the client's
/// test and its server report (`-r`). The client's listener answers the end with a
/// server report of its own, which the log shows.
fn legacy(
    g: Arc<Group>,
    sock: UdpSocket,
    from: SocketAddr,
    h: TestHdr,
    plan: Plan,
    first: Vec<u8>,
    queued: Receiver<Vec<u8>>,
) {
    let back = SocketAddr::new(super::canon(from.ip()), h.port);
    let (g2, h2, plan2) = (g.clone(), h.clone(), plan.clone());
    let halt = AtomicBool::new(false);
    if plan.legacy == Some(Legacy::Tradeoff) {
        if serve(g, sock, from, h, plan, (first, queued), None) {
            send_back(g2, back, &h2, &plan2, &halt);
        }
        return;
    }
    // `netmeter iperf2 -s`: the client's test's printer before the connection back's,
    // so that it is transfer 1 and the connection back 2, as iperf 2 numbers them
    // (made in their own threads, the two raced for the first number).
    let rows = sock
        .local_addr()
        .ok()
        .and_then(|local| Printer::start(&g, &h, local, from));
    // The sending half stops when the receiving half ends other than by the client's
    // end, as for --full-duplex.
    std::thread::scope(|s| {
        let halt = &halt;
        s.spawn(move || send_back(g2, back, &h2, &plan2, halt));
        if !serve(g, sock, from, h, plan, (first, queued), rows) {
            halt.store(true, Ordering::Relaxed);
        }
    });
}

/// The sending half of `-d`/`-r`: a socket of this server's own, connected to `to`.
/// Which sender a UDP sending loop is.
enum SendAs {
    /// `-R` or `--full-duplex` on the flow's own socket; with the printer of a
    /// `--full-duplex` test's sending half (`netmeter iperf2 -s`).
    Own(Option<Box<Printer>>),
    /// The `-d`/`-r` connection back to the client's listener.
    Back,
}

fn send_back(g: Arc<Group>, to: SocketAddr, h: &TestHdr, plan: &Plan, halt: &AtomicBool) {
    let any: IpAddr = if to.is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    let sock = UdpSocket::bind((any, 0)).and_then(|s| {
        s.connect(to)?;
        s.set_read_timeout(Some(TICK))?;
        Ok(s)
    });
    match sock {
        Ok(sock) => send(g, sock, to, h, plan, halt, SendAs::Back),
        Err(e) => g.failed(format!(
            "cannot open a UDP socket back to {to} (-d/-r): {e}"
        )),
    }
}

/// Serve one flow until its FIN (then the report) or a limit; whether the FIN ended it.
fn serve(
    g: Arc<Group>,
    sock: UdpSocket,
    from: SocketAddr,
    h: TestHdr,
    plan: Plan,
    (first, queued): (Vec<u8>, Receiver<Vec<u8>>),
    rows: Option<Printer>,
) -> bool {
    let seq64 = h.flags & HEADER_SEQNO64B != 0 || DatagramId::flags_seq64(&first);
    // --isochronous: the frame fields, where the client's version puts them.
    let isoch = h.isochronous().then(|| h.isoch_layout());
    let started = g.now();
    let mut last_move = started;
    let mut count = FlowCount::default();
    // `netmeter iperf2 -s`: the flow's rows in iperf 2's server layout.
    let mut printer = rows.or_else(|| {
        sock.local_addr()
            .ok()
            .and_then(|local| Printer::start(&g, &h, local, from))
    });
    let mut feed = |count: &mut FlowCount, d: &[u8], now_s: f64, now: Instant| {
        let before = count.bytes;
        count.on_datagram(d, seq64, now_s);
        let len = count.bytes - before;
        g.received.fetch_add(len, Ordering::Relaxed);
        if let (Some(p), true) = (printer.as_mut(), len > 0) {
            let c = count.recv.counts();
            let counts = UdpCounts {
                received: c.received,
                expected: c.highest_seq,
                lost: c.lost,
                out_of_order: c.out_of_order,
                jitter_ms: c.jitter_s * 1e3,
            };
            p.datagram(len as usize, counts, now);
            if let Some(t) = count.last_transit_s {
                p.delay(t, now_s);
            }
            let frame = isoch.and_then(|l| IsochPayload::read(d, l));
            if let Some(f) = frame.filter(|f| f.ends_frame(d.len())) {
                p.frame(f.frame_id, f.frame_latency_s(now_s));
            }
        }
    };
    feed(&mut count, &first, wall_s(&g), started);
    let mut buf = vec![0u8; 65536];
    let mut why = None;
    while count.fin.is_none() {
        let mut got = Vec::new();
        while let Ok(d) = queued.try_recv() {
            got.push(d);
        }
        match sock.recv(&mut buf) {
            Ok(n) => got.push(buf[..n].to_vec()),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                why = Some(format!("UDP receive failed: {e}"));
                break;
            }
        }
        let now_s = wall_s(&g);
        let now = g.now();
        for d in &got {
            feed(&mut count, d, now_s, now);
        }
        if !got.is_empty() {
            last_move = now;
        }
        why = stop_reason(&g, &plan, started, last_move, now);
        if why.is_some() {
            break;
        }
    }
    let c = count.recv.counts();
    if let Some(p) = printer {
        p.finish(g.now());
    }
    if let Some(why) = why {
        g.failed(why);
        return false;
    }
    let report = count.report(
        g.now().saturating_duration_since(started).as_secs_f64(),
        h.trip_times(),
    );
    let shared = g.shared().clone();
    let peer = super::shown(from);
    shared.log(&format!(
        "iperf 2 UDP flow from {peer}: {} bytes, lost {} of {} datagrams, {} out of order, jitter {:.3} ms",
        count.bytes,
        c.lost,
        c.highest_seq,
        c.out_of_order,
        c.jitter_s * 1e3,
    ));
    if h.no_udp_fin() || plan.flow == Flow::Both {
        return true;
    }
    // The test is over: its slot is free while the report waits for the client.
    drop(g);
    if !send_report(&sock, &report, count.fin.as_ref()) {
        shared.log(&format!(
            "iperf 2 UDP flow from {peer}: the client kept sending after {ACK_TRIES} server reports"
        ));
    }
    true
}

/// iperf 2's UDP rate when the client gives none (`-b` default, 1 Mbit/s).
const DEFAULT_UDP_BPS: u64 = 1024 * 1024;
/// iperf 2's UDP datagram size when the client gives none (`-l` default).
const DEFAULT_UDP_LEN: usize = 1470;

/// `-R` over UDP: send the client datagrams (sequence numbers from 1, send times) on
/// the flow's socket at its `-b` (paced, and under `--server-bitrate-limit`) for its
/// `-t`/`-n`, then a negative sequence number (the end). The client counts loss and
/// jitter itself; it asked for no server report (iperf 2 sets `HEADER_NOUDPFIN` for a
/// reverse test).
/// `halt`: stop now (a full-duplex flow whose receiving half ended).
/// `SendAs::Back`: the `-d`/`-r` connection back to the client's listener: the bytes after
/// each datagram's id are zero (flags naming no test header, so the listener takes its
/// defaults, as from iperf 2's own server), and the end waits for the listener's
/// server report.
fn send(
    g: Arc<Group>,
    sock: UdpSocket,
    to: SocketAddr,
    h: &TestHdr,
    plan: &Plan,
    halt: &AtomicBool,
    sender: SendAs,
) {
    let (back, rows) = match sender {
        SendAs::Own(rows) => (false, rows.map(|p| *p)),
        SendAs::Back => (true, None),
    };
    let len = match h.buf_len {
        0 => DEFAULT_UDP_LEN,
        n => (n as usize).clamp(
            crate::wire::iperf2::UDP_DATAGRAM_LEN,
            crate::wire::UDP_MAX_LEN,
        ),
    };
    let bps = plan.send_bps.unwrap_or(DEFAULT_UDP_BPS).max(1);
    let mut d: Vec<u8> = if back {
        vec![0u8; len]
    } else {
        (0..len).map(|i| b'0' + (i % 10) as u8).collect()
    };
    // `netmeter iperf2 -s`: a `-R` test's rows, `rows` (a `--full-duplex` test's
    // sending half's) or the connection back's of -d/-r.
    let mut printer = rows.or_else(|| match (back, plan.flow, sock.local_addr()) {
        (false, Flow::Send, Ok(local)) => Printer::start_sending(&g, h, local, to),
        (true, _, Ok(local)) => {
            let sndbuf = socket2::SockRef::from(&sock)
                .send_buffer_size()
                .unwrap_or(0);
            let facts = BackSock {
                write_len: len as u64,
                sndbuf: sndbuf as u64,
                rate_bps: bps,
                congestion: None,
            };
            Printer::start_back(&g, h, local, to, facts)
        }
        _ => None,
    });
    if !back && h.reverse_reads_a_start() {
        send_start(&g, &sock, h, plan, len, bps);
    }
    let started = g.now();
    let (mut seq, mut sent, mut why) = (1i64, 0u64, None);
    loop {
        let now = g.now();
        let elapsed = now.duration_since(started);
        if plan.time.is_some_and(|t| elapsed >= t) || plan.bytes.is_some_and(|n| sent >= n) {
            break;
        }
        if halt.load(Ordering::Relaxed) {
            why = Some("its receiving half ended (--full-duplex)".to_string());
            break;
        }
        let due = Duration::from_secs_f64(sent as f64 * 8.0 / bps as f64);
        if due > elapsed {
            std::thread::sleep((due - elapsed).min(TICK));
            continue;
        }
        let t = g.wall().duration_since(UNIX_EPOCH).unwrap_or_default();
        write_datagram_id(&mut d, seq, t.as_secs() as u32, t.subsec_micros());
        // An error (the client gone, ICMP unreachable; a full buffer) loses the
        // datagram, as on any link.
        let r = sock.send(&d);
        if let Ok(n) = r {
            sent += n as u64;
            seq += 1;
            g.sent.fetch_add(n as u64, Ordering::Relaxed);
        }
        if let Some(p) = printer.as_mut() {
            p.wrote(*r.as_ref().unwrap_or(&0), r.is_ok(), now);
        }
        if let Some(w) = stop_reason(&g, plan, started, now, now) {
            why = Some(w);
            break;
        }
    }
    // The end: the next sequence number negated, as iperf 2's sender ends (its reader
    // counts it as the last datagram and stops at once rather than on a timeout);
    // sent three times against loss, the copies ignored once it stopped. A listener
    // (`back`) answers with its report: the end is sent again until it does.
    let mut report = None;
    if why.is_none() {
        let t = g.wall().duration_since(UNIX_EPOCH).unwrap_or_default();
        write_datagram_id(&mut d, -seq, t.as_secs() as u32, t.subsec_micros());
        if back {
            report = await_report(&sock, &d);
        } else {
            for _ in 0..3 {
                let _ = sock.send(&d);
            }
        }
        seq += 1;
    }
    match printer {
        Some(p) if back => p.finish_back(g.now(), (seq - 1) as u64, report.as_ref()),
        Some(p) => p.finish_sent(g.now(), (seq - 1) as u64),
        None => {}
    }
    let heard = match report {
        Some(r) => format!(
            "; its listener reported {} bytes, lost {} of {} datagrams, jitter {:.3} ms",
            r.bytes,
            r.lost,
            r.datagrams,
            r.jitter_s * 1e3
        ),
        None if back && why.is_none() => "; no report from its listener".to_string(),
        None => String::new(),
    };
    g.shared().log(&format!(
        "iperf 2 UDP flow to {}: sent {} datagrams (the last its end), {sent} bytes{heard}",
        super::shown(to),
        seq - 1
    ));
    if let Some(w) = why {
        g.failed(w);
    }
}

/// Before the data of a `-R`/`--full-duplex` test with `--trip-times` (or isochronous
/// or periodic bursts): the datagram iperf 2's own server writes first, a test header
/// with this sender's start time ([`udp_start_datagram`]). The client's reverse reader
/// consumes the first datagram for that start time and counts none of it: without it
/// that reader took the first data datagram, counted it lost (1 of N, where the path
/// lost none) and, finding no start time, ignored `--trip-times` (2.2.1) or timed the
/// test from the epoch (2.1.8). Its sequence number is 0, so the data's 1, 2, … are
/// what the client counts from (iperf 2's own server numbers it 1 and its client
/// counts 1 lost). Not counted in the flow's bytes or datagrams: the client does not
/// count it either.
fn send_start(g: &Group, sock: &UdpSocket, h: &TestHdr, plan: &Plan, len: usize, bps: u64) {
    let t = g.wall().duration_since(UNIX_EPOCH).unwrap_or_default();
    let now = (t.as_secs() as u32, t.subsec_micros());
    let amount = match (plan.bytes, plan.time) {
        (Some(n), _) => Amount::Bytes(n),
        (None, t) => Amount::TimeCentis(t.map_or(0, |t| (t.as_millis() / 10) as u32)),
    };
    let hdr = ClientHdr {
        udp: true,
        threads: 1,
        port: h.port,
        buf_len: len as u32,
        amount,
        rate_bps: bps,
        tos: 0,
        flags: HEADER_VERSION2 | HEADER_UDPTESTS,
        upper: UPPER_REVERSE | UPPER_TRIPTIME,
        start: Some(now),
    };
    // A lost or refused send is what the link does to any datagram: the client then
    // reads the first data datagram in its place, as it would from iperf 2's server.
    let _ = sock.send(&udp_start_datagram(&hdr, len, 0, now));
}

fn stop_reason(
    g: &Group,
    plan: &Plan,
    started: Instant,
    last_move: Instant,
    now: Instant,
) -> Option<String> {
    if g.shared().shutdown.load(Ordering::Relaxed) {
        return Some("the server is stopping".into());
    }
    if let Some(d) = plan.deadline
        && now.duration_since(started) > d
    {
        return Some(format!("ended after {} s", d.as_secs()));
    }
    if now.duration_since(last_move) > plan.idle {
        return Some(format!("no datagram for {} s", plan.idle.as_secs()));
    }
    if let Some(limit) = plan.limit_bps
        && over_limit(g.total(), now.duration_since(g.started), limit)
    {
        return Some(format!(
            "its rate exceeded this server's limit of {limit} bit/s (--server-bitrate-limit)"
        ));
    }
    None
}

/// Send the end `fin` and wait for the listener's server report, sending it again
/// after each [`ACK_SILENCE`] without one (at most [`ACK_TRIES`] times), as iperf 2's
/// client waits for its server's (`AwaitServerFinPacket`).
fn await_report(sock: &UdpSocket, fin: &[u8]) -> Option<ServerReport> {
    let _ = sock.set_read_timeout(Some(ACK_SILENCE));
    let mut buf = [0u8; 2048];
    for _ in 0..ACK_TRIES {
        let _ = sock.send(fin);
        if let Ok(n) = sock.recv(&mut buf)
            && let Ok(r) = ServerReport::parse(&buf[..n])
        {
            return Some(r);
        }
    }
    None
}

/// Send the report, again each time the client repeats its FIN, until it is quiet for
/// [`ACK_SILENCE`] (at most [`ACK_TRIES`] times). Whether the client went quiet.
fn send_report(sock: &UdpSocket, r: &ServerReport, fin: Option<&DatagramId>) -> bool {
    let zero = DatagramId {
        seq: 0,
        sec: 0,
        usec: 0,
    };
    let bytes = r.encode(fin.unwrap_or(&zero));
    let _ = sock.set_read_timeout(Some(ACK_SILENCE));
    let mut buf = [0u8; 2048];
    for _ in 0..ACK_TRIES {
        let _ = sock.send(&bytes);
        if sock.recv(&mut buf).is_err() {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::iperf2::write_datagram_id;

    fn dgram(seq: i64, sec: u32, usec: u32) -> Vec<u8> {
        let mut d = vec![0u8; 100];
        write_datagram_id(&mut d, seq, sec, usec);
        d
    }

    #[test]
    fn loss_reorder_and_the_fin_counted_once() {
        let mut f = FlowCount::default();
        for s in [1, 2, 4, 3, 6] {
            f.on_datagram(&dgram(s, 100, 0), true, 100.001);
        }
        f.on_datagram(&dgram(-7, 100, 0), true, 100.001);
        f.on_datagram(&dgram(-8, 100, 0), true, 100.001);
        let r = f.report(1.0, true);
        assert_eq!(r.datagrams, 7);
        assert_eq!((r.lost, r.out_of_order), (1, 1), "5 lost, 3 late");
        assert_eq!(r.bytes, 600, "the repeated FIN is not counted");
        let t = r.transit.unwrap();
        assert!((t.mean_s - 0.001).abs() < 1e-6 && t.count == 6);
        assert_eq!(f.fin.unwrap().seq, -7);
    }

    #[test]
    fn jitter_follows_the_transit_changes() {
        let mut f = FlowCount::default();
        for (i, extra) in [0.0, 0.002, 0.0, 0.002].iter().enumerate() {
            let seq = i as i64 + 1;
            f.on_datagram(&dgram(seq, 10, 0), false, 10.0 + extra);
        }
        let j = f.report(1.0, false).jitter_s;
        assert!(j > 0.0 && j < 0.002, "{j}");
        assert_eq!(f.report(1.0, false).transit, None);
    }

    #[test]
    fn short_datagrams_are_ignored() {
        let mut f = FlowCount::default();
        f.on_datagram(&[0u8; 8], true, 1.0);
        assert_eq!((f.bytes, f.recv.counts().received), (0, 0));
    }
}
