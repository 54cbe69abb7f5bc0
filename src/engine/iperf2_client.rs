//! netmeter as a client of an iperf 2 server (`-c HOST --iperf2`).
//!
//! iperf 2 has no control connection: each data connection (TCP) or every datagram
//! (UDP) carries the test header (`wire::iperf2`). So this side opens the `-P`
//! streams, runs them with `TestRun` (intervals, drain, end summary as for any test) on
//! its own loops (`loops`), and ends the test itself: TCP by shutting the write side
//! (the server sends nothing back), UDP with iperf 2's FIN exchange (`fin`), whose
//! server report becomes the receiver's figures in the summary, as an iperf3 server's
//! results would.

mod fin;
mod loops;
mod recv;
mod tradeoff;
mod trip_rx;

use super::client::{self, ClientConfig, Iperf2Opts};
use super::output::Output;
use super::stream::DataSock;
use super::test_common;
use super::test_run::{Control, Ending, FinalFigures, Launch, Running, Side, SpawnLoop, TestRun};
use super::{Stopped, TestError};
use crate::control::Negotiated;
use crate::profile::Profile;
use crate::report::observe::Event;
use crate::sock;
use crate::spec::{Direction, EndCondition, Protocol, TestSpec};
use crate::wire::iperf2::{
    Amount, BB_HDR_LEN, ClientHdr, HEADER_UDPTESTS, HEADER_VERSION1, HEADER_VERSION2,
    ISOCH_MIN_LEN, IsochLayout, RUN_NOW, ServerReport, TCP_BURST_LEN, UDP_HDR_LEN,
    UPPER_EPOCH_START, UPPER_FULLDUPLEX, UPPER_ISOCH, UPPER_NOUDPFIN, UPPER_PERIODICBURST,
    UPPER_REVERSE, UPPER_TRIPTIME, write_datagram_id,
};
use crate::wire::iperf2_client::{UDP_START_HDR_LEN, with_burst_settings};
use crate::wire::{Results, StreamResult};
use fin::{FinStep, FinWait};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

/// How long the server has to connect back for `-d` once the headers went out (for
/// `-r`, once this client's test has ended).
pub const CONNECT_BACK_WAIT: Duration = Duration::from_secs(10);

/// iperf 2's port (`-p` unless given).
pub const IPERF2_PORT: u16 = 5001;
/// iperf 2's default UDP datagram (`-l` not given): 1470 bytes.
pub const IPERF2_UDP_LEN: usize = 1470;

/// The option of `cfg` an iperf 2 server cannot serve through this client, as one
/// sentence naming it (`None`: the test can run). The CLI refuses with it before the
/// test; [`run`] again for library callers.
pub fn unsupported(cfg: &ClientConfig) -> Option<&'static str> {
    let s = &cfg.spec;
    let udp = s.protocol == Protocol::Udp;
    let dual = cfg.iperf2.is_some_and(|o| o.dual);
    let legacy = cfg.iperf2.is_some_and(|o| o.dual || o.tradeoff);
    let isoch = s
        .profile
        .as_ref()
        .is_some_and(|p| p.isochronous().is_some());
    let refusals: [(bool, &'static str); 25] = [
        (
            dual && s.bounceback.is_some(),
            "-d (the server connecting back) runs bulk tests only: drop --bounceback",
        ),
        (
            legacy && udp && s.parallel > 1,
            "-d and -r run one UDP stream (the server sends back to one listening socket): drop -P",
        ),
        (
            legacy && udp && s.trip_times,
            "-d and -r do not take --trip-times over UDP yet: drop --trip-times",
        ),
        (
            dual && s.direction != Direction::Bidir,
            "-d sends both ways at once: it does not go with -R",
        ),
        (
            udp && s.bounceback.is_some(),
            "--bounceback runs over TCP only against an iperf 2 server, as iperf 2's own: drop -u",
        ),
        (
            s.bounceback.is_some_and(|b| {
                b.request_len < BB_HDR_LEN as u32 || b.reply_len < BB_HDR_LEN as u32
            }),
            "with --iperf2, --bounceback-request and --bounceback-reply must be at least 64 bytes: iperf 2's bounceback header rides in each",
        ),
        (
            s.bounceback.is_some() && s.parallel > 1,
            "--bounceback runs one stream against an iperf 2 server: drop -P",
        ),
        (
            udp && s
                .profile
                .as_ref()
                .is_some_and(|p| p.isochronous().is_none()),
            "with --iperf2, --burst-size bursts run over TCP only: drop -u",
        ),
        (
            s.profile.is_some() && !udp && s.block_len < TCP_BURST_LEN,
            "with --iperf2, TCP --burst-size and --isochronous need -l of at least 92 bytes: iperf 2's burst header opens every burst",
        ),
        (
            isoch && s.direction != Direction::Upload,
            "with --iperf2, --isochronous sends from the client only: drop -R or --bidir",
        ),
        (
            s.profile.is_some() && s.direction != Direction::Upload,
            "with --iperf2, --burst-size bursts go from the client only: drop -R or --bidir",
        ),
        (
            isoch && udp && s.block_len < ISOCH_MIN_LEN,
            "with --iperf2, --isochronous needs -l of at least 112 bytes: iperf 2's frame fields ride in every datagram",
        ),
        (
            s.working_load.is_some(),
            "--working-load needs a netmeter server, not --iperf2",
        ),
        (
            s.connect_only,
            "--connect-only needs a netmeter or iperf3 server, not --iperf2",
        ),
        (
            s.trip_times && !udp && s.block_len < TCP_BURST_LEN,
            "with --iperf2, TCP --trip-times needs -l of at least 92 bytes: iperf 2's timestamp header opens every write",
        ),
        (
            s.trip_times && udp && s.block_len < UDP_START_HDR_LEN,
            "with --iperf2, UDP --trip-times needs -l of at least 128 bytes: iperf 2's header with its start time rides in every datagram",
        ),
        (
            matches!(s.end, EndCondition::Blocks(_)),
            "-k counts blocks, which an iperf 2 server cannot be told: use -n or -t with --iperf2",
        ),
        (
            s.omit_s > 0.0,
            "-O would leave out bytes the iperf 2 server counts: drop -O with --iperf2",
        ),
        (
            s.get_server_output,
            "--get-server-output needs an iperf3 or netmeter server, not --iperf2",
        ),
        (
            cfg.psk.is_some() || cfg.auth.is_some(),
            "--psk-file and --username need a netmeter or iperf3 server, not --iperf2",
        ),
        (
            s.zerocopy,
            "-Z cannot send iperf 2's test header: drop -Z with --iperf2",
        ),
        (
            s.mptcp,
            "-m (MPTCP) is not offered to an iperf 2 server: drop -m with --iperf2",
        ),
        (
            cfg.side.file.is_some(),
            "-F cannot send iperf 2's test header: drop -F with --iperf2",
        ),
        (
            s.protocol == Protocol::Udp && cfg.len_given && s.block_len < UDP_HDR_LEN,
            "with --iperf2, UDP -l must be at least 76 bytes: iperf 2's test header rides in every datagram",
        ),
        (
            cfg.in_process_server,
            "--loopback runs a netmeter server, not an iperf 2 one: drop --iperf2",
        ),
    ];
    refusals
        .into_iter()
        .find(|(hit, _)| *hit)
        .map(|(_, why)| why)
        .or_else(|| tradeoff::unsupported(cfg))
}

/// The port an iperf 2 server is asked to connect back to, in a version 1 header
/// (`-d`, `-r`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectBack {
    /// The port this client listens on.
    pub port: u16,
    /// `-d`: the server sends at once, while this client sends (iperf 2's `RUN_NOW`);
    /// `-r`: after this client's test has ended.
    pub run_now: bool,
}

/// The test as iperf 2's header announces it. `started`: the client's wall clock at
/// its start (seconds, microseconds), which `--trip-times` sends; `txstart`: the
/// `--txstart-time` it waits for, sent instead.
/// `back`: `-d`'s or `-r`'s listening port, which the header names instead of the
/// server's (a version 1 header, with `RUN_NOW` for the dual test and without it for
/// the tradeoff, as iperf 2's client sends them: `Settings_GenerateClientHdr`).
fn client_hdr(
    spec: &TestSpec,
    len_given: bool,
    port: u16,
    started: (u32, u32),
    txstart: Option<f64>,
    back: Option<ConnectBack>,
) -> ClientHdr {
    let dual = back.map(|b| b.port);
    let mut upper = match (spec.direction, dual) {
        (_, Some(_)) => 0,
        (Direction::Reverse, _) => UPPER_REVERSE,
        (Direction::Bidir, _) => UPPER_FULLDUPLEX,
        (Direction::Upload, _) => 0,
    };
    let mut flags = match back {
        Some(ConnectBack { run_now: true, .. }) => HEADER_VERSION1 | RUN_NOW,
        Some(_) => HEADER_VERSION1,
        None if upper != 0 => HEADER_VERSION2,
        None => 0,
    };
    let port = dual.unwrap_or(port);
    let udp = spec.protocol == Protocol::Udp;
    let tcp_profile = !udp && spec.profile.is_some();
    let start = match txstart {
        Some(at) => {
            upper |= UPPER_EPOCH_START;
            let at = at.max(0.0);
            Some((at.trunc() as u32, (at.fract() * 1e6) as u32))
        }
        // TCP bursts and frames carry the start time too, as iperf 2's client sends it.
        None => (spec.trip_times || tcp_profile).then_some(started),
    };
    match spec.profile.as_ref() {
        Some(Profile::Isochronous { .. }) if !udp => upper |= UPPER_ISOCH,
        Some(Profile::Burst { .. }) if !udp => upper |= UPPER_PERIODICBURST,
        _ => {}
    }
    if spec.trip_times {
        upper |= UPPER_TRIPTIME;
    }
    if start.is_some() && udp {
        flags |= HEADER_UDPTESTS;
    }
    // --isochronous: the frame fields' enclave in every datagram.
    if udp
        && spec
            .profile
            .as_ref()
            .is_some_and(|p| p.isochronous().is_some())
    {
        upper |= UPPER_ISOCH;
        flags |= HEADER_UDPTESTS;
    }
    // iperf 2's UDP client marks -R and --full-duplex as UDP test settings, and asks
    // for no server report with --full-duplex (`Settings_GenerateClientHdr`).
    if udp && dual.is_none() && spec.direction != Direction::Upload {
        flags |= HEADER_UDPTESTS;
    }
    if udp && dual.is_none() && spec.direction == Direction::Bidir {
        upper |= UPPER_NOUDPFIN;
    }
    ClientHdr {
        udp: spec.protocol == Protocol::Udp,
        threads: spec.parallel,
        port,
        buf_len: if len_given { spec.block_len as u32 } else { 0 },
        amount: match spec.end {
            EndCondition::Bytes(n) => Amount::Bytes(n),
            EndCondition::Time(t) => Amount::TimeCentis((t.max(0.0) * 100.0).round() as u32),
            EndCondition::Blocks(_) => Amount::TimeCentis(0),
        },
        rate_bps: spec.rate_bps,
        tos: spec.tos.unwrap_or(0),
        // iperf 2's client marks the 2.0.10+ settings valid with -R and --full-duplex.
        flags,
        upper,
        start,
    }
}

/// The header's bytes: `hdr` encoded, and for TCP periodic bursts the burst settings
/// iperf 2's client adds (their rate and size, `wire::iperf2_client::with_burst_settings`).
fn header_bytes(spec: &TestSpec, hdr: &ClientHdr, layout: IsochLayout) -> Vec<u8> {
    match spec.profile.as_ref() {
        Some(Profile::Burst { bytes, period_s }) if !hdr.udp => with_burst_settings(
            hdr.encode(),
            1.0 / period_s.max(1e-6),
            (*bytes).min(u64::from(u32::MAX)) as u32,
        ),
        _ => hdr.encode_as(layout),
    }
}

/// The gap between bounceback requests: iperf 2's 10 a second unless
/// `--bounceback-period` says otherwise (0: back to back).
fn bounceback_period(opts: &Iperf2Opts) -> Option<Duration> {
    match opts.bounceback_period {
        None => Some(loops::BOUNCEBACK_PERIOD),
        Some(p) if p.is_zero() => None,
        Some(p) => Some(p),
    }
}

/// Run one test against an iperf 2 server (the caller has the `Output`:
/// `engine::client::run_keeping_report_on`, which `netmeter::run` calls with this for a
/// `ClientConfig::iperf2` test).
pub fn run(cfg: &ClientConfig, out: &mut Output) -> Result<(), TestError> {
    if let Some(why) = unsupported(cfg) {
        return Err(TestError::Usage(why));
    }
    let origin = cfg.clock.now();
    let server = client::before_connect(cfg, out)?;
    let mut spec = cfg.spec.clone();
    if spec.protocol == Protocol::Udp && !cfg.len_given {
        spec.block_len = IPERF2_UDP_LEN;
    }
    let opts = cfg.iperf2.unwrap_or_default();
    // -r: its listener's connections back come once this client's test has ended.
    let (listener, tradeoff_listener, back) = back_listener(cfg, out, &server, &opts)?;
    let started = super::stream::wall_now(false);
    let hdr = client_hdr(
        &spec,
        cfg.len_given,
        server.port(),
        started,
        cfg.txstart,
        back,
    );
    let layout = opts.isoch_layout;
    let hdr = Arc::new(header_bytes(&spec, &hdr, layout));
    let udp = spec.protocol == Protocol::Udp;
    let loop_hdr = hdr.clone();
    let tos = spec.tos.unwrap_or(0);
    // TCP --trip-times: each write carries the start time the header announced.
    let trip = (spec.trip_times && !udp).then_some(started);
    let bb_period = bounceback_period(&opts);
    let trip_times = spec.trip_times;
    // A TCP sender reads what the server sent on its connection before closing it,
    // unless a receiver shares the connection (--bidir on one connection) and reads it.
    let sole_reader = !(spec.direction == Direction::Bidir && listener.is_none());
    let isoch = spec.profile.as_ref().and_then(|p| p.isochronous());
    // TCP bursts and frames: iperf 2's burst heads on the profile's grid.
    let tcp_profile = spec.profile.filter(|_| !udp);
    // --bidir over UDP: the sender ends with its FIN at once (no report to await); -d's
    // sender is an upload's and awaits its report.
    let duplex_fin = udp && spec.direction == Direction::Bidir && back.is_none();
    // -d over UDP: the receiving stream is the listener, taking the server's datagrams.
    let back_from = (udp && listener.is_some()).then(|| recv::BackFilter::new(server.ip()));
    let hello =
        (udp && spec.direction == Direction::Reverse).then(|| reverse_hdr(&hdr, spec.block_len));
    let spawn: SpawnLoop = Arc::new(move |w, sock| {
        if !w.shared.sender {
            return spawn_receiver(w, sock, trip_times, hello.clone(), back_from);
        }
        let hdr = loop_hdr.clone();
        let name = format!("nm-iperf2-{}", w.shared.id);
        super::stream::spawn_loop(name, w, move |w| match (sock, w.bounceback) {
            (DataSock::Tcp(t), Some(b)) => loops::tcp_bounce(w, t, b, tos, bb_period),
            (DataSock::Tcp(t), None) => match &tcp_profile {
                Some(p) => loops::tcp_send_profile(w, t, hdr.len() as u64, started, p),
                None => loops::tcp_send(w, t, hdr.len() as u64, trip, sole_reader),
            },
            (DataSock::Udp(u), _) => match isoch {
                Some(iso) => loops::udp_send_isoch(w, u, &hdr, iso, layout),
                None => loops::udp_send(w, u, &hdr, duplex_fin),
            },
        })
    });
    let side = Side::Client {
        in_process_server: false,
    };
    // UDP -R: iperf 2's client prints each datagram's latency from its send time with
    // or without --trip-times, so the receiver records it (`opts.send_time_latency`);
    // the header, built above, still asks for no trip times.
    if opts.send_time_latency && udp && (spec.direction == Direction::Reverse || opts.dual) {
        spec.trip_times = true;
    }
    let mut run = TestRun::new(spec, side)?
        .with_peak(cfg.line_rate.and_then(|l| l.peak()))
        .with_clock(cfg.clock.clone())
        .with_loop(spawn);
    client::record_start_common(out, cfg, &cfg.spec);
    out.emit(Event::Info(&start_note(&cfg.host, server.port(), udp)));
    let fins = open_streams(cfg, out, &mut run, server, &hdr, listener.as_ref())?;
    run.record_buffers(&mut out.report.start);
    run.record_start(
        &mut out.report.start,
        cfg.interval_s,
        &Negotiated::iperf3(Vec::new()),
        None,
        Vec::new(),
    );
    out.report.start.netmeter.peer = PEER_NAME.into();
    if run.spec().direction == Direction::Reverse {
        out.emit(Event::ReverseMode { host: &cfg.host });
    }
    if let Some(line) = test_common::udp_buffer_line(run.spec(), &out.report.start) {
        out.emit(Event::Info(&line));
    }
    out.start_done();
    // With --txstart-time the data starts at that instant (the TCP headers went out
    // before it, as iperf 2's client sends its first payload, then waits).
    let t0 = super::profile::client_t0(cfg.txstart, Some(cfg.clock.now()), &*cfg.clock, out);
    let mut running = run.start(Launch {
        t0,
        owd_correction_ns: 0,
        connect_to: None,
        answered: None,
        interval_s: cfg.interval_s,
        interval_histograms: false,
        cpu_start: sock::cpu_sample(origin),
        origin,
    })?;
    let mut ends = Ends {
        recv: (udp && running.receives()).then(|| {
            let spec = running.spec();
            recv::RecvWatch::new(recv::RecvWatch::idle_bound(spec.rate_bps, spec.block_len))
        }),
    };
    let ending = running.run_until(out, &mut ends)?;
    if let Some(why) = ending.stopped {
        running.stop_all();
        let now = running.now_s().max(ending.at_s);
        let fig = running.final_figures(out, now, now);
        out.error(&why.to_string());
        out.end(running.summary(&out.report.start, &fig, None));
        return Err(why.into());
    }
    let mut fig = running.drain(out, ending.at_s);
    if let Some(e) = running.stream_error() {
        return Err(TestError::Stream(e));
    }
    let fin_len = running.spec().block_len.max(hdr.len());
    let upload = running.spec().direction == Direction::Upload || opts.dual;
    let peer = (udp && upload).then(|| udp_upload_end(out, &fins, &mut fig, &hdr, fin_len));
    // -d over UDP: a server that never sent back leaves an empty receiving row; say so.
    if opts.dual && udp && fig.locals.iter().all(|l| l.sender || l.bytes == 0) {
        out.warning("the iperf 2 server sent nothing back (-d): the receiving row is empty; a firewall may stop its datagrams");
    }
    let results = peer.as_ref().map(|(r, _)| r);
    let mut end = running.summary(&out.report.start, &fig, results);
    if let Some((_, reports)) = &peer {
        with_transit(&mut end, reports);
    }
    out.end(end);
    if let Some(l) = tradeoff_listener {
        tradeoff::server_half(cfg, out, &l, server, running.spec())?;
    }
    out.emit(Event::Done);
    Ok(())
}

/// A receiving stream's thread. A TCP receiver reads plain bytes: the bulk loop's (the
/// header went out first), or with `--trip-times` each of the server's writes timed
/// (`loops::tcp_recv_trip`); a UDP receiver reads iperf 2's datagrams (`hello`: `-R`'s
/// header datagram, sent again until the server answers).
pub(super) fn spawn_receiver(
    w: super::stream::Worker,
    sock: DataSock,
    trip_times: bool,
    hello: Option<Vec<u8>>,
    back: Option<recv::BackFilter>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let name = format!("nm-iperf2-rx-{}", w.shared.id);
    match sock {
        DataSock::Udp(u) => super::stream::spawn_loop(name, w, move |w| {
            loops::udp_recv(w, u, trip_times, hello, back)
        }),
        DataSock::Tcp(t) if trip_times => {
            super::stream::spawn_loop(name, w, move |w| loops::tcp_recv_trip(w, t))
        }
        tcp => super::stream::spawn(w, tcp),
    }
}

/// The end of a UDP upload: each stream's FIN exchange, the server's reports (as the
/// receiver's results, and each by its socket label), the FIN counted as sent.
fn udp_upload_end(
    out: &mut Output,
    fins: &[UdpSocket],
    fig: &mut FinalFigures,
    hdr: &[u8],
    fin_len: usize,
) -> (Results, Vec<(i64, ServerReport)>) {
    let sent: Vec<Sent> = fig
        .locals
        .iter()
        .filter(|l| l.sender)
        .map(|l| Sent {
            id: l.id,
            socket: l.socket,
            datagrams: l.packets,
        })
        .collect();
    let reports = server_reports(out, fins, &sent, hdr, fin_len);
    // The FIN is a datagram of the test as iperf 2 counts it: its server counts its
    // bytes and its sequence number as the total (`reporter_handle_packet_server_udp`),
    // and iperf 2's client counts it as sent (its bytes in the Transfer column). A
    // server that answered got one FIN; one that did not got at least one.
    for l in fig.locals.iter_mut().filter(|l| l.sender) {
        l.bytes += fin_len as u64;
        l.packets += 1;
    }
    reports
}

/// Open the `-P` connections (TCP: each starts with the test header, written here; with
/// `--bidir` each is attached twice, as the client's sending stream and, after all of
/// those, as its receiving one) or UDP sockets, and attach them. Returns a handle on
/// each UDP socket for the FIN exchange.
fn open_streams(
    cfg: &ClientConfig,
    out: &mut Output,
    run: &mut TestRun,
    server: SocketAddr,
    hdr: &[u8],
    dual: Option<&Back>,
) -> Result<Vec<UdpSocket>, TestError> {
    let mut fins = Vec::new();
    let mut duplex = Vec::new();
    for i in 0..run.spec().parallel {
        let cport = cfg.cport.map(|p| p.wrapping_add(i as u16)).unwrap_or(0);
        let sock = open_stream(cfg, run.spec(), &server, cport)?;
        match &sock {
            DataSock::Udp(u) if run.spec().direction == Direction::Reverse => {
                send_reverse_hdr(u, hdr, run.spec().block_len)?;
            }
            DataSock::Udp(u) => {
                fins.push(u.try_clone()?);
                if run.spec().direction == Direction::Bidir && dual.is_none() {
                    duplex.push(DataSock::Udp(u.try_clone()?));
                }
            }
            DataSock::Tcp(t) => {
                // iperf 2 has no control connection: the first data connection's MSS is
                // the one `start` reports (the engine's client reads its control's).
                if i == 0 {
                    client::record_mss(&mut out.report.start, run.spec(), t.as_fd());
                }
                let mut t: &TcpStream = t;
                // A bounceback test opens with its first request's header instead.
                if run.spec().bounceback.is_some() {
                    let c = run.attach(sock, server)?;
                    out.connected(c);
                    continue;
                }
                t.set_write_timeout(Some(cfg.connect_timeout))?;
                std::io::Write::write_all(&mut t, hdr)
                    .map_err(|e| TestError::io_while("cannot send iperf 2's test header", e))?;
                t.set_write_timeout(None)?;
                if run.spec().direction == Direction::Bidir && dual.is_none() {
                    duplex.push(DataSock::Tcp(t.try_clone()?));
                }
            }
        }
        let c = run.attach(sock, server)?;
        out.connected(c);
    }
    match dual {
        Some(Back::Tcp(l)) => {
            for s in accept_back(out, l, server.ip(), run.spec().parallel as usize)? {
                let peer = s.peer_addr()?;
                let c = run.attach(DataSock::Tcp(s), peer)?;
                out.connected(c);
            }
        }
        // UDP: the listener itself receives (one stream), the server's sender taken
        // at its first datagram (`recv::BackFilter`); it is told as connected to the
        // server's address until then.
        Some(Back::Udp(u)) => {
            let c = run.attach(DataSock::Udp(u.try_clone()?), server)?;
            out.connected(c);
        }
        None => {}
    }
    for sock in duplex {
        let c = run.attach(sock, server)?;
        out.connected(c);
    }
    Ok(fins)
}

/// `-R` over UDP: the test header as one datagram, `-l` long when that is longer, as
/// iperf 2's client sends it (`Client::SendFirstPayload`); its sequence number (1) and
/// send time are written as it goes.
fn reverse_hdr(hdr: &[u8], len: usize) -> Vec<u8> {
    let mut d = hdr.to_vec();
    d.resize(len.max(hdr.len()), 0);
    d
}

/// `-R` over UDP: the header datagram, sent once as the stream opens (the receiving
/// loop sends it again until the server answers); the server sends on the socket it
/// came from.
fn send_reverse_hdr(sock: &UdpSocket, hdr: &[u8], len: usize) -> Result<(), TestError> {
    let mut d = reverse_hdr(hdr, len);
    let (sec, usec) = super::stream::wall_now(false);
    write_datagram_id(&mut d, 1, sec, usec);
    sock.send(&d)
        .map_err(|e| TestError::io_while("cannot send iperf 2's test header", e))?;
    Ok(())
}

/// `-d` and `-r`: the listener, opened before the header goes out (the server may
/// connect back at once; `-d`'s is returned first, `-r`'s second), and the port the
/// header names; `-r` announces it (iperf 2's client prints its listener's banner
/// first).
fn back_listener(
    cfg: &ClientConfig,
    out: &mut Output,
    server: &SocketAddr,
    opts: &Iperf2Opts,
) -> Result<BackListener, TestError> {
    if !(opts.dual || opts.tradeoff) {
        return Ok((None, None, None));
    }
    let l = dual_listener(cfg, server)?;
    let port = l.port()?;
    // iperf 2's client announces its listener as a server (UDP -d too: 2.2.1's
    // `-u -d` output opens with it).
    if opts.tradeoff || cfg.spec.protocol == Protocol::Udp {
        out.emit(Event::Listening { port, test: 0 });
    }
    let back = ConnectBack {
        port,
        run_now: !opts.tradeoff,
    };
    Ok(match opts.tradeoff {
        true => (None, Some(l), Some(back)),
        false => (Some(l), None, Some(back)),
    })
}

/// `-d`'s listener, `-r`'s, and the port the header names.
type BackListener = (Option<Back>, Option<Back>, Option<ConnectBack>);

/// Where the server's test back arrives (`-d`, `-r`): a TCP listener, or over UDP the
/// socket the server's datagrams come to.
pub(crate) enum Back {
    Tcp(TcpListener),
    Udp(UdpSocket),
}

impl Back {
    fn port(&self) -> std::io::Result<u16> {
        match self {
            Back::Tcp(l) => l.local_addr().map(|a| a.port()),
            Back::Udp(u) => u.local_addr().map(|a| a.port()),
        }
    }
}

/// `-d`'s listener, on the address family of `server`'s (and `-B`'s address if given),
/// a port the kernel picks: the header names it. Over UDP a socket bound there, its
/// receive buffer `-w` when given (the server's datagrams arrive on it).
fn dual_listener(cfg: &ClientConfig, server: &SocketAddr) -> Result<Back, TestError> {
    let ip = cfg.bind.unwrap_or(match server {
        SocketAddr::V4(_) => IpAddr::from([0u8; 4]),
        SocketAddr::V6(_) => IpAddr::from([0u16; 8]),
    });
    let what = |e| TestError::io_while(format!("cannot listen on {ip} for -d/-r"), e);
    if cfg.spec.protocol == Protocol::Udp {
        // The address this host sends to the server from (a connected socket's, which
        // sends nothing): the one the server sends back to, and the one the
        // connection line names.
        let ip = match cfg.bind {
            Some(ip) => ip,
            None => UdpSocket::bind(SocketAddr::new(ip, 0))
                .and_then(|p| p.connect(server).and_then(|_| p.local_addr()))
                .map_or(ip, |a| a.ip()),
        };
        let u = UdpSocket::bind(SocketAddr::new(ip, 0)).map_err(what)?;
        if let Some(w) = cfg.spec.window {
            let _ = socket2::SockRef::from(&u).set_recv_buffer_size(w as usize);
        }
        return Ok(Back::Udp(u));
    }
    let l = TcpListener::bind(SocketAddr::new(ip, 0)).map_err(what)?;
    l.set_nonblocking(true)?;
    Ok(Back::Tcp(l))
}

/// Accept `n` connections from the server's address `from` (`-d`), each within
/// [`CONNECT_BACK_WAIT`] of the last; a connection from anywhere else is closed at
/// once, with a warning.
fn accept_back(
    out: &mut Output,
    l: &TcpListener,
    from: IpAddr,
    n: usize,
) -> Result<Vec<TcpStream>, TestError> {
    let mut got = Vec::with_capacity(n);
    let mut deadline = crate::clock::mono_now() + CONNECT_BACK_WAIT;
    while got.len() < n {
        match l.accept() {
            Ok((s, peer)) if peer.ip() == from => {
                s.set_nonblocking(false)?;
                got.push(s);
                deadline = crate::clock::mono_now() + CONNECT_BACK_WAIT;
            }
            Ok((_, peer)) => out.warning(&format!(
                "-d: refused a connection from {peer}: only the server ({from}) connects back"
            )),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if crate::clock::mono_now() >= deadline {
                    return Err(TestError::io_while(
                        format!(
                            "the iperf 2 server did not connect back (-d) within {} s; a firewall may stop it",
                            CONNECT_BACK_WAIT.as_secs()
                        ),
                        std::io::Error::from(std::io::ErrorKind::TimedOut),
                    ));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => {
                return Err(TestError::io_while(
                    "cannot accept the server's -d connection",
                    e,
                ));
            }
        }
    }
    Ok(got)
}

/// `start.netmeter.peer` for an iperf 2 server.
pub const PEER_NAME: &str = "iperf 2";

/// The start line saying who the peer is taken to be and what comes back from it.
fn start_note(host: &str, port: u16, udp: bool) -> String {
    let back = if udp {
        "its report at the end gives the receiver's figures"
    } else {
        "over TCP it reports nothing back, so the figures are what netmeter sent"
    };
    format!("Testing against an iperf 2 server at {host} port {port} (--iperf2): {back}\n")
}

/// One data socket to the server, options set, connected (TCP) or aimed (UDP), as
/// the engine's client opens its own (`engine::client`): only what goes over it first
/// differs.
fn open_stream(
    cfg: &ClientConfig,
    spec: &TestSpec,
    server: &SocketAddr,
    cport: u16,
) -> Result<DataSock, TestError> {
    Ok(match spec.protocol {
        Protocol::Udp => DataSock::Udp(client::open_udp(cfg, server, spec, cport)?),
        Protocol::Tcp => DataSock::Tcp(client::connect_tcp(cfg, server, Some(spec), cport)?),
    })
}

/// The client's half while data flows: no control connection to listen to, so it ends
/// the test on its end condition or an interrupt, and wakes for the interval rows. With
/// UDP receivers (`recv`) the end waits for them too: `-R` ends when the server's data
/// does (its FIN, or its silence: [`recv::RecvWatch`]), the server's clock starting a
/// little after the client's.
struct Ends {
    recv: Option<recv::RecvWatch>,
}

impl Control for Ends {
    fn check(&mut self, run: &Running, now_s: f64) -> Option<Ending> {
        let end = run.end_reached(now_s);
        let over = match self.recv.as_mut() {
            None => end,
            Some(w) => {
                let (bytes, all_fin) = run.receive_progress();
                let over = w.over(now_s, bytes, all_fin, end);
                // --bidir: this side's sending half runs to its own end and stops there
                // (its FIN goes out at once, while the server still reads), the
                // receiving half on until the server's end.
                let bidir = run.spec().direction == Direction::Bidir;
                if bidir && end {
                    run.signal_senders();
                }
                over && (end || !bidir)
            }
        };
        over.then_some(Ending {
            at_s: now_s,
            stopped: None,
        })
    }

    fn watch(&mut self, run: &Running, now_s: f64) -> Result<Option<Ending>, TestError> {
        if sock::stop_signal().is_some() {
            return Ok(Some(Ending {
                at_s: now_s,
                stopped: Some(Stopped::client_interrupted()),
            }));
        }
        if let Some(e) = run.stream_error() {
            return Err(TestError::Stream(e));
        }
        // Past -t (receivers still listening) it wakes every 10 ms, never spins.
        let until = match run.spec().end {
            EndCondition::Time(t) if t > now_s => run.next_tick.min(t),
            _ => run.next_tick.min(now_s + 0.01),
        };
        std::thread::sleep(Duration::from_secs_f64((until - now_s).clamp(0.0, 0.1)));
        Ok(None)
    }
}

/// The UDP end: each stream's FIN exchange, one after the other, and the reports as
/// the receiver's results (a stream without a report is left out, with a warning),
/// with each report by its stream's socket label.
fn server_reports(
    out: &mut Output,
    socks: &[UdpSocket],
    sent: &[Sent],
    hdr: &[u8],
    fin_len: usize,
) -> (Results, Vec<(i64, ServerReport)>) {
    let mut results = Results {
        sender_has_retransmits: -1,
        ..Results::default()
    };
    let mut reports = Vec::new();
    for (sock, s) in socks.iter().zip(sent) {
        let mut buf = hdr.to_vec();
        buf.resize(fin_len, 0);
        match await_report(sock, &mut buf, s.datagrams as i64 + 1) {
            Some(r) => {
                out.emit(Event::Info(&report_line(s.socket, &r)));
                results.streams.push(stream_result(s.id, &r));
                reports.push((s.socket, r));
            }
            None => out.warning(&format!(
                "the iperf 2 server sent no report for stream [{:3}] after {} FINs over {} s; its figures are unknown",
                s.socket,
                fin::FIN_TRIES,
                (fin::FIN_RETRY * fin::FIN_TRIES).as_secs_f64().round()
            )),
        }
    }
    (results, reports)
}

/// The transit each report carried, into its stream's receiver figures in `end`
/// (`udp.netmeter.transit`), which the iperf 2 layout prints in the Server Report's
/// latency columns as iperf 2's client does.
fn with_transit(end: &mut crate::report::End, reports: &[(i64, ServerReport)]) {
    for st in &mut end.streams {
        let Some(u) = st.udp.as_mut() else { continue };
        let Some(t) = reports
            .iter()
            .find(|(socket, _)| *socket == u.socket)
            .and_then(|(_, r)| r.transit)
        else {
            continue;
        };
        if let Some(x) = u.netmeter.as_mut() {
            x.transit = Some(transit_summary(&t));
        }
    }
}

/// iperf 2's transit figures in milliseconds; the standard deviation as iperf 2's
/// client prints it (`sqrt(m2 / (cnt - 1))`, 0 under two samples: `ReportOutputs.c`).
fn transit_summary(t: &crate::wire::iperf2::Transit) -> crate::report::TransitSummary {
    let stdev_s = if t.count < 2 {
        0.0
    } else {
        (t.m2_s2.max(0.0) / f64::from(t.count - 1)).sqrt()
    };
    crate::report::TransitSummary {
        count: u64::from(t.count),
        min_ms: t.min_s * 1e3,
        mean_ms: t.mean_s * 1e3,
        max_ms: t.max_s * 1e3,
        stdev_ms: stdev_s * 1e3,
    }
}

/// What a UDP stream sent: its id, its socket label, its datagrams.
struct Sent {
    id: i64,
    socket: i64,
    datagrams: u64,
}

/// One stream's FIN exchange on its socket (`fin::FinWait` decides, this does the I/O).
fn await_report(sock: &UdpSocket, buf: &mut [u8], next_seq: i64) -> Option<ServerReport> {
    let begun = crate::clock::mono_now();
    let mut wait = FinWait::new(next_seq);
    let mut rx = vec![0u8; 2048];
    loop {
        match wait.poll(crate::clock::mono_now().saturating_duration_since(begun)) {
            FinStep::Send(seq) => {
                let (sec, usec) = super::stream::wall_now(false);
                write_datagram_id(buf, seq, sec, usec);
                // A lost FIN is sent again; a refused one means no server (given up later).
                let _ = sock.send(buf);
            }
            FinStep::Wait(d) => {
                sock.set_read_timeout(Some(d.max(Duration::from_millis(1))))
                    .ok()?;
                if let Ok(n) = sock.recv(&mut rx)
                    && let Some(r) = wait.on_datagram(&rx[..n])
                {
                    return Some(r);
                }
            }
            FinStep::GiveUp => return None,
        }
    }
}

/// The server's report as the receiver's entry in the results.
fn stream_result(id: i64, r: &ServerReport) -> StreamResult {
    StreamResult {
        id,
        bytes: r.bytes,
        jitter: r.jitter_s,
        errors: r.lost as i64,
        packets: r.datagrams as i64,
        start_time: 0.0,
        end_time: r.stop_s,
        netmeter_out_of_order: Some(r.out_of_order),
        ..StreamResult::default()
    }
}

/// The report as iperf 2's client shows it ("Server Report"), one line.
fn report_line(socket: i64, r: &ServerReport) -> String {
    let transit = r.transit.map_or(String::new(), |t| {
        format!(
            ", transit min/mean/max {:.3}/{:.3}/{:.3} ms over {} datagrams",
            t.min_s * 1e3,
            t.mean_s * 1e3,
            t.max_s * 1e3,
            t.count
        )
    });
    format!(
        "[{socket:3}] iperf 2 server report: {} bytes in {:.2} s, {}/{} datagrams lost, {} out of order, jitter {:.3} ms{transit}\n",
        r.bytes,
        r.stop_s,
        r.lost,
        r.datagrams,
        r.out_of_order,
        r.jitter_s * 1e3
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_says_what_the_test_is() {
        let spec = TestSpec {
            protocol: Protocol::Udp,
            block_len: 1000,
            end: EndCondition::Time(3.0),
            rate_bps: 2_000_000,
            parallel: 2,
            ..TestSpec::default()
        };
        let h = client_hdr(&spec, true, 5001, (0, 0), None, None);
        assert!(h.udp);
        assert_eq!((h.threads, h.port, h.buf_len), (2, 5001, 1000));
        assert_eq!((h.amount, h.rate_bps), (Amount::TimeCentis(300), 2_000_000));
        let n = TestSpec {
            end: EndCondition::Bytes(5 << 20),
            ..TestSpec::default()
        };
        let h = client_hdr(&n, false, 5001, (0, 0), None, None);
        assert_eq!((h.udp, h.buf_len), (false, 0));
        assert_eq!(h.amount, Amount::Bytes(5 << 20));
    }

    /// What the client sends with --trip-times and --txstart-time is what a server
    /// (netmeter's own iperf 2 parser, `wire::iperf2::TestHdr`) reads back.
    #[test]
    fn trip_times_and_txstart_reach_the_server_as_sent() {
        use crate::wire::iperf2::TestHdr;
        let spec = TestSpec {
            protocol: Protocol::Udp,
            block_len: 1470,
            trip_times: true,
            ..TestSpec::default()
        };
        let mut d = client_hdr(&spec, true, 5001, (1_700_000_000, 123_456), None, None).encode();
        d.resize(1470, 0);
        let h = TestHdr::parse_udp(&d).expect("a UDP test header");
        assert!(h.trip_times() && h.udp);
        assert_eq!(h.start, Some((1_700_000_000, 123_456)));
        let tcp = TestSpec {
            trip_times: false,
            ..TestSpec::default()
        };
        let b = client_hdr(&tcp, false, 5001, (1, 2), Some(1_800_000_000.5), None).encode();
        let h = TestHdr::parse_tcp(&b).expect("a TCP test header");
        assert_eq!(h.start, Some((1_800_000_000, 500_000)));
        assert_eq!(h.upper & UPPER_EPOCH_START, UPPER_EPOCH_START);
        assert!(!h.trip_times());
        // Without either, no start time and the header is 2.1.8's plain one.
        let plain = client_hdr(&tcp, false, 5001, (1, 2), None, None);
        assert_eq!(plain.start, None);
    }

    /// `-d`: a version 1 header naming the client's listening port, which a server
    /// (`wire::iperf2::TestHdr`) reads as the dual test; no full duplex on the way.
    #[test]
    fn the_dual_test_header_names_the_listening_port() {
        use crate::wire::iperf2::{Legacy, TestHdr};
        let spec = TestSpec {
            direction: Direction::Bidir,
            ..TestSpec::default()
        };
        let back = ConnectBack {
            port: 40_001,
            run_now: true,
        };
        let b = client_hdr(&spec, false, 5001, (0, 0), None, Some(back)).encode();
        let h = TestHdr::parse_tcp(&b).expect("a TCP test header");
        assert_eq!(h.legacy, Some(Legacy::Dual));
        assert_eq!(h.port, 40_001);
        assert!(!h.full_duplex() && h.flags & HEADER_VERSION2 == 0);
        // Without -d the same direction is iperf 2's --full-duplex.
        let b = client_hdr(&spec, false, 5001, (0, 0), None, None).encode();
        let h = TestHdr::parse_tcp(&b).expect("a TCP test header");
        assert!(h.full_duplex() && h.legacy.is_none());
    }

    #[test]
    fn a_bounceback_request_says_what_iperf_2s_client_says() {
        use crate::wire::iperf2::{BB_REPLYSIZE, BB_TOS, BbHdr, HEADER_BOUNCEBACK};
        let b = crate::wire::Bounceback {
            request_len: 100,
            reply_len: 100,
            hold_us: 2000,
            burst: 10,
            busy_poll_us: 0,
        };
        let h = loops::bb_request(&b, 0, 7, (1_700_000_000, 250));
        assert_eq!(
            (h.flags, h.size, h.id, h.hold_us),
            (HEADER_BOUNCEBACK, 100, 7, 2000)
        );
        assert_eq!(h.bbflags, 0, "same sizes, no TOS: no flags");
        assert_eq!(h.client_tx, (1_700_000_000, 250));
        assert_eq!(h.server_rx, (u32::MAX, u32::MAX));
        // What the server reads back from the bytes: a reply size and TOS when set.
        let other = crate::wire::Bounceback {
            reply_len: 300,
            ..b
        };
        let mut bytes = vec![0u8; 100];
        loops::bb_request(&other, 0x28, 1, (1, 2)).write(&mut bytes);
        let back = BbHdr::parse(&bytes).expect("a bounceback header");
        assert_eq!(back.bbflags, BB_REPLYSIZE | BB_TOS);
        assert_eq!((back.reply_size, back.tos), (300, 0x28));
    }

    #[test]
    fn a_server_report_becomes_the_receivers_results() {
        let r = ServerReport {
            bytes: 1_470_000,
            stop_s: 2.5,
            lost: 3,
            out_of_order: 1,
            datagrams: 1000,
            jitter_s: 0.0002,
            transit: None,
        };
        let s = stream_result(1, &r);
        assert_eq!((s.bytes, s.errors, s.packets), (1_470_000, 3, 1000));
        assert_eq!((s.jitter, s.end_time), (0.0002, 2.5));
        assert_eq!(s.netmeter_out_of_order, Some(1));
        assert!(report_line(1, &r).contains("3/1000 datagrams lost"));
    }

    /// The transit in milliseconds, its deviation as iperf 2's client computes it
    /// (`sqrt(m2 / (cnt - 1))`), none under two samples.
    #[test]
    fn a_server_reports_transit_is_kept_in_milliseconds() {
        let t = crate::wire::iperf2::Transit {
            min_s: 0.001,
            max_s: 0.004,
            mean_s: 0.002,
            m2_s2: 9e-6,
            count: 10,
        };
        let s = transit_summary(&t);
        assert_eq!(
            (s.count, s.min_ms, s.max_ms, s.mean_ms),
            (10, 1.0, 4.0, 2.0)
        );
        assert!((s.stdev_ms - 1.0).abs() < 1e-9, "{s:?}");
        let one = transit_summary(&crate::wire::iperf2::Transit { count: 1, ..t });
        assert_eq!(one.stdev_ms, 0.0);
    }
}
