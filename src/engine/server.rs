//! The server: one listener, one session per test, several tests at once if allowed.
//!
//! The accept loop never talks to a client itself. Each new connection gets its own
//! thread that reads the 37-byte cookie with a short deadline: a cookie that belongs
//! to a test waiting for data streams hands the socket to that test; any other opens a
//! new session. A session holds a test slot only once its parameters have arrived, so
//! silent or garbage connections cannot lock real clients out; whatever a peer does, the
//! damage is one logged error for that session.

use super::CTRL_TIMEOUT;
use super::client::{
    DRAIN_IDLE, DRAIN_MAX, LiveStreams, budget_for, connected_entry, data_path, load_start,
    make_worker, probe_capabilities, timestamp_now, udp_offload_note, udp_offloads,
};
use super::clock;
use super::ctrl::{Ctrl, CtrlError};
use super::meter::{Meter, receiver_end_s};
use super::output::{Mode, Output, Renderer, Sink};
use super::stream::{self, Worker};
use super::test_common;
use super::{Stopped, TestError};
use crate::report::build;
use crate::report::connect::ConnectOnlyAnswered;
use crate::report::observe::Event;
use crate::report::text::{self, TextCtx};
use crate::report::{HostPort, StartExt};
use crate::session::{ServerEvent, ServerFailure, ServerMachine};
use crate::sock;
use crate::spec::{Direction, EndCondition, Protocol, TestSpec};
use crate::units::Format;
use crate::wire::{self, Cookie, ErrCode, ExtAnswer, Params, Results, State};
use socket2::{Domain, SockAddr, SockRef, Socket, Type};
use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::client::Family;

/// How long a new connection may take to send its cookie.
const COOKIE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client may take to send its parameters after `PARAM_EXCHANGE`.
const PARAMS_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client may take to open all its data streams.
const STREAMS_TIMEOUT: Duration = Duration::from_secs(20);
/// While a session waits for its data streams: how long it waits on the control
/// connection before it looks for streams handed over again.
const STREAM_POLL: Duration = Duration::from_millis(5);

/// Extra time beyond `-t` + `-O` before a running test is declared stuck (iperf3: 40 s).
const TEST_GRACE: Duration = Duration::from_secs(40);
/// TCP keepalive on the control connection of a `-t 0` test, which has no deadline: a
/// client host that vanished without a word is noticed after about 10 + 3 × 5 s.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_PROBES: u32 = 3;
/// For `-n` / `-k` and `-t 0` tests: how long without any data progress before giving up.
const IDLE_DATA_TIMEOUT: Duration = Duration::from_secs(30);

/// Server settings from the flags.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub port: u16,
    pub bind: Option<IpAddr>,
    pub family: Family,
    pub one_off: bool,
    pub max_tests: usize,
    pub idle_timeout: Option<Duration>,
    pub mode: Mode,
    pub verbose: bool,
    pub format: Format,
    pub interval_s: f64,
    /// This side's own options (`test_common::SideOpts`).
    pub side: test_common::SideOpts,
}

/// Where a TCP data connection (with its accept sequence number) goes.
type StreamSender = Sender<(u64, TcpStream)>;

struct UdpWaiter {
    session: u64,
    peer_ip: IpAddr,
    remaining: usize,
    tx: Sender<(u64, UdpSocket)>,
}

struct Shared {
    cfg: ServerConfig,
    sink: Sink,
    local: SocketAddr,
    active: AtomicUsize,
    tests_done: AtomicU64,
    next_session: AtomicU64,
    tcp_waiters: Mutex<HashMap<[u8; wire::COOKIE_LEN], StreamSender>>,
    /// Order in which data connections arrived: streams are numbered in this order, as
    /// the client numbers them in the order it opens them.
    accept_seq: AtomicU64,
    udp_waiters: Mutex<Vec<UdpWaiter>>,
    /// Cookies of running `--connect-only` tests, whose short connections are answered
    /// without a session.
    connect_hub: super::connect::Hub,
    shutdown: Arc<AtomicBool>,
    /// Stop on SIGINT/SIGTERM/SIGHUP (`Server::stop_on_signals`); off for the in-process
    /// server of `--loopback`, which its client stops.
    on_signals: AtomicBool,
    last_activity: Mutex<Instant>,
    /// The TCP listener takes MPTCP (see `make_listener`).
    mptcp: bool,
}

impl Shared {
    fn log(&self, msg: &str) {
        if let Ok(mut w) = self.sink.lock() {
            let line = match self.cfg.mode {
                Mode::Text => format!("netmeter: {msg}\n"),
                _ => format!(
                    "{}\n",
                    serde_json::json!({"event": "server_log", "data": msg})
                ),
            };
            let _ = w.write_all(line.as_bytes());
            let _ = w.flush();
        }
    }

    fn banner(&self) {
        if self.cfg.mode == Mode::Text {
            let n = self.tests_done.load(Ordering::Relaxed) + 1;
            let dash = "-".repeat(59);
            if let Ok(mut w) = self.sink.lock() {
                let _ = write!(
                    w,
                    "{dash}\nServer listening on {} (test #{n})\n{dash}\n",
                    self.local.port()
                );
                let _ = w.flush();
            }
        }
    }

    /// Whether this server was told to stop by a signal.
    fn signalled(&self) -> bool {
        self.on_signals.load(Ordering::Relaxed) && sock::stop_signal().is_some()
    }

    fn touch(&self) {
        if let Ok(mut t) = self.last_activity.lock() {
            *t = Instant::now();
        }
    }
}

/// Normalise v4-mapped IPv6 addresses so the two families compare equal.
fn canon(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

/// A peer as the log shows it: an IPv4 client of a dual-stack listener as `127.0.0.1:N`,
/// like the "Accepted connection from" line, not `[::ffff:127.0.0.1]:N`.
fn shown(peer: SocketAddr) -> SocketAddr {
    SocketAddr::new(canon(peer.ip()), peer.port())
}

fn listen_addr(cfg: &ServerConfig) -> SocketAddr {
    let ip = cfg.bind.unwrap_or(match cfg.family {
        Family::V4 => IpAddr::from([0, 0, 0, 0]),
        _ => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    });
    SocketAddr::new(ip, cfg.port)
}

/// Every socket the server binds (its TCP and UDP listeners and the per-stream UDP
/// sockets on the same port) comes from here, with this side's `--bind-dev`.
fn make_listener(
    addr: SocketAddr,
    ty: Type,
    family: Family,
    side: &test_common::SideOpts,
) -> std::io::Result<Socket> {
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    // The TCP listener is an MPTCP one where the kernel allows it, as iperf3's is while
    // a client's `-m` test runs: MPTCP clients get MPTCP, plain TCP clients a plain TCP
    // socket (the kernel hands over the subflow itself on fallback).
    let s = match ty {
        Type::STREAM => {
            test_common::mptcp_socket(addr.is_ipv6()).or_else(|_| Socket::new(domain, ty, None))?
        }
        _ => Socket::new(domain, ty, None)?,
    };
    test_common::apply_side_opts(&s, side, false)?;
    s.set_reuse_address(true)?;
    if addr.is_ipv6() {
        s.set_only_v6(family == Family::V6)?;
    }
    s.bind(&SockAddr::from(addr))?;
    Ok(s)
}

/// A running server's listeners, ready to serve.
pub struct Server {
    shared: Arc<Shared>,
    tcp: TcpListener,
    udp: UdpSocket,
}

impl Server {
    /// Bind the TCP and UDP listeners. Port 0 picks a free port usable for both.
    pub fn bind(
        cfg: ServerConfig,
        sink: Sink,
        shutdown: Arc<AtomicBool>,
    ) -> Result<Server, TestError> {
        let mut tries = 0;
        let (tcp, udp) = loop {
            let addr = listen_addr(&cfg);
            let t = make_listener(addr, Type::STREAM, cfg.family, &cfg.side)
                .map_err(|e| TestError::io_while(format!("cannot listen on TCP {addr}"), e))?;
            t.listen(128)?;
            let bound = t.local_addr()?.as_socket().unwrap_or(addr);
            match make_listener(
                SocketAddr::new(addr.ip(), bound.port()),
                Type::DGRAM,
                cfg.family,
                &cfg.side,
            ) {
                Ok(u) => break (t, u),
                Err(e) if cfg.port == 0 && tries < 20 => {
                    tries += 1;
                    let _ = e;
                }
                Err(e) => {
                    return Err(TestError::io_while(
                        format!("cannot listen on UDP port {}", bound.port()),
                        e,
                    ));
                }
            }
        };
        let mptcp = tcp.protocol().ok().flatten() == Some(socket2::Protocol::MPTCP);
        let tcp: TcpListener = tcp.into();
        let udp: UdpSocket = udp.into();
        let local = tcp.local_addr()?;
        Ok(Server {
            shared: Arc::new(Shared {
                cfg,
                sink,
                local,
                active: AtomicUsize::new(0),
                tests_done: AtomicU64::new(0),
                next_session: AtomicU64::new(1),
                tcp_waiters: Mutex::new(HashMap::new()),
                accept_seq: AtomicU64::new(0),
                udp_waiters: Mutex::new(Vec::new()),
                connect_hub: Default::default(),
                shutdown,
                on_signals: AtomicBool::new(false),
                last_activity: Mutex::new(Instant::now()),
                mptcp,
            }),
            tcp,
            udp,
        })
    }

    /// End `serve` on SIGINT, SIGTERM or SIGHUP (`sock::catch_stop_signals`): a running
    /// test sends its client `SERVER_TERMINATE` and prints its partial summary, and
    /// `serve` returns [`Stopped::ServerInterrupted`].
    pub fn stop_on_signals(self) -> Server {
        self.shared.on_signals.store(true, Ordering::Relaxed);
        self
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.shared.local.port()
    }

    /// Serve until shut down (or after one test with `-1`).
    pub fn serve(self) -> Result<(), TestError> {
        let shared = self.shared.clone();
        shared.banner();
        let udp_shared = shared.clone();
        let udp = self.udp;
        let udp_thread = std::thread::Builder::new()
            .name("nm-udp-accept".into())
            .spawn(move || udp_accept_loop(&udp_shared, udp))?;
        let mut sessions: Vec<std::thread::JoinHandle<()>> = Vec::new();
        let one_off_done = Arc::new(AtomicBool::new(false));
        let listener = self.tcp.as_fd();
        // Connect-only tests' acceptors share the listener (see `connect::Hub`); it is
        // non-blocking so that a thread losing the race for a connection just waits on.
        self.tcp.set_nonblocking(true)?;
        shared.connect_hub.set_listener(self.tcp.try_clone()?);
        while !shared.shutdown.load(Ordering::Relaxed) && !one_off_done.load(Ordering::Relaxed) {
            if shared.signalled() {
                break;
            }
            sessions.retain(|h| !h.is_finished());
            if let Some(idle) = shared.cfg.idle_timeout {
                let since = shared
                    .last_activity
                    .lock()
                    .map(|t| t.elapsed())
                    .unwrap_or_default();
                if shared.active.load(Ordering::Relaxed) == 0 && since > idle && shared.cfg.one_off
                {
                    shared.log(&format!(
                        "idle for {} s; exiting (--idle-timeout)",
                        idle.as_secs()
                    ));
                    break;
                }
            }
            // While a connect-only test accepts in our place, take what it hands back.
            let (conn, peer) =
                if let Some(c) = shared.connect_hub.handed_back(Duration::from_millis(50)) {
                    c
                } else if shared.connect_hub.accepting() {
                    continue;
                } else {
                    if !sock::wait_readable(listener, Duration::from_millis(100))? {
                        continue;
                    }
                    match self.tcp.accept() {
                        Ok(c) => c,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                        Err(e) => {
                            shared.log(&format!("accept failed: {e}"));
                            std::thread::sleep(Duration::from_millis(10));
                            continue;
                        }
                    }
                };
            // A connect-only test's short connection whose cookie is already in is
            // answered here, without a thread; anything else goes on as usual.
            let Some(conn) = shared.connect_hub.answer_now(conn) else {
                continue;
            };
            let s = shared.clone();
            let done = one_off_done.clone();
            let seq = shared.accept_seq.fetch_add(1, Ordering::Relaxed);
            let h = std::thread::Builder::new()
                .name("nm-conn".into())
                .spawn(move || {
                    if handle_connection(&s, conn, peer, seq) && s.cfg.one_off {
                        done.store(true, Ordering::Relaxed);
                    }
                });
            match h {
                Ok(h) => sessions.push(h),
                Err(e) => shared.log(&format!("cannot start a thread for {}: {e}", shown(peer))),
            }
        }
        // Running sessions notice a signal at their next wait and end their tests.
        for h in sessions {
            let _ = h.join();
        }
        shared.shutdown.store(true, Ordering::Relaxed);
        let _ = udp_thread.join();
        if shared.signalled() {
            return Err(Stopped::server_interrupted().into());
        }
        Ok(())
    }
}

/// Returns true when the connection was a test session (for `-1`).
fn handle_connection(shared: &Arc<Shared>, conn: TcpStream, peer: SocketAddr, seq: u64) -> bool {
    let mut ctrl = Ctrl::new(conn);
    ctrl.debug = shared.cfg.side.debug.is_some();
    ctrl.stop_on_signal = shared.on_signals.load(Ordering::Relaxed);
    let mut cookie = [0u8; wire::COOKIE_LEN];
    if let Err(e) = ctrl.read_exact(&mut cookie, COOKIE_TIMEOUT, "the cookie") {
        if shared.cfg.verbose {
            shared.log(&format!("dropped connection from {}: {e}", shown(peer)));
        }
        return false;
    }
    // A short connection of a connect-only test (its cookie came late)?
    if shared.connect_hub.answer(&cookie, &mut ctrl.sock) {
        return false;
    }
    // A data stream of a test that is waiting for its streams?
    let waiter = shared
        .tcp_waiters
        .lock()
        .ok()
        .and_then(|w| w.get(&cookie).cloned());
    if let Some(tx) = waiter {
        let _ = tx.send((seq, ctrl.sock));
        return false;
    }
    let id = shared.next_session.fetch_add(1, Ordering::Relaxed);
    match Session::run(shared, ctrl, peer, Cookie(cookie), id) {
        Ok(true) => {
            shared.tests_done.fetch_add(1, Ordering::Relaxed);
            if !shared.cfg.one_off && shared.cfg.max_tests == 1 {
                shared.banner();
            }
            true
        }
        Ok(false) => false,
        Err(e) => {
            match e.stopped() {
                // One line: the test was stopped on purpose, not failed.
                Some(why) => shared.log(&format!("test from {} stopped: {why}", shown(peer))),
                // The one line for a failed test (the session's output does not repeat it).
                None => shared.log(&format!(
                    "test from {} ended with an error: {e:#}",
                    shown(peer)
                )),
            }
            shared.tests_done.fetch_add(1, Ordering::Relaxed);
            if !shared.cfg.one_off && shared.cfg.max_tests == 1 && !shared.signalled() {
                shared.banner();
            }
            true
        }
    }
}

fn udp_accept_loop(shared: &Arc<Shared>, listener: UdpSocket) {
    let _ = listener.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = vec![0u8; 65536];
    while !shared.shutdown.load(Ordering::Relaxed) {
        let (n, from) = match listener.recv_from(&mut buf) {
            Ok(x) => x,
            Err(_) => continue,
        };
        // iperf3 does not check the content; netmeter only ignores empty datagrams.
        if n == 0 {
            continue;
        }
        let from_ip = canon(from.ip());
        let tx = {
            let Ok(mut ws) = shared.udp_waiters.lock() else {
                continue;
            };
            let Some(w) = ws
                .iter_mut()
                .find(|w| w.peer_ip == from_ip && w.remaining > 0)
            else {
                if shared.cfg.verbose {
                    shared.log(&format!(
                        "ignored a UDP datagram from {from}: no test expects it"
                    ));
                }
                continue;
            };
            w.remaining -= 1;
            (w.tx.clone(), w.session)
        };
        match accept_udp(shared, from) {
            Ok(s) => {
                let seq = shared.accept_seq.fetch_add(1, Ordering::Relaxed);
                let _ = tx.0.send((seq, s));
            }
            Err(e) => shared.log(&format!(
                "session {}: UDP stream from {from} failed: {e}",
                tx.1
            )),
        }
    }
}

fn accept_udp(shared: &Shared, from: SocketAddr) -> std::io::Result<UdpSocket> {
    let local = SocketAddr::new(shared.local.ip(), shared.local.port());
    let s = make_listener(local, Type::DGRAM, shared.cfg.family, &shared.cfg.side)?;
    let to = match (local.is_ipv6(), from) {
        (true, SocketAddr::V4(v4)) => {
            SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port())
        }
        _ => from,
    };
    s.connect(&SockAddr::from(to))?;
    let sock: UdpSocket = s.into();
    sock.send(&wire::UDP_CONNECT_REPLY)?;
    Ok(sock)
}

enum Accepted {
    Tcp(TcpStream),
    Udp(UdpSocket),
}

struct Session<'a> {
    shared: &'a Arc<Shared>,
    id: u64,
}

impl Session<'_> {
    /// Run one test. `Ok(false)` when the connection never became a test.
    fn run(
        shared: &Arc<Shared>,
        mut ctrl: Ctrl,
        peer: SocketAddr,
        cookie: Cookie,
        id: u64,
    ) -> Result<bool, TestError> {
        let origin = Instant::now();
        // This side's control-connection options (--snd-timeout, --cntl-ka), as iperf3's
        // server sets them on each control connection it accepts.
        if let Err(e) =
            test_common::apply_side_opts(&SockRef::from(&ctrl.sock), &shared.cfg.side, true)
        {
            shared.log(&format!(
                "cannot set up the control connection from {}: {e}",
                shown(peer)
            ));
            return Ok(false);
        }
        if ctrl.send_state(State::ParamExchange).is_err() {
            return Ok(false);
        }
        let mut machine = ServerMachine::new();
        let params: Params =
            match ctrl.read_json(wire::MAX_PARAMS_LEN, PARAMS_TIMEOUT, "the parameters") {
                Ok(p) => p,
                Err(e) => {
                    if matches!(e, CtrlError::Wire(..)) {
                        let _ =
                            ctrl.write(&wire::encode_server_error(ErrCode::RecvParams, 0), "error");
                    }
                    shared.log(&format!(
                        "connection from {} dropped before a test started: {e}",
                        shown(peer)
                    ));
                    return Ok(false);
                }
            };
        // Only now does the connection compete for a test slot.
        let taken = shared.active.fetch_add(1, Ordering::AcqRel);
        let _slot = SlotGuard(shared.clone());
        if taken >= shared.cfg.max_tests {
            let _ = ctrl.send_state(State::AccessDenied);
            shared.log(&format!(
                "refused a test from {}: {} test(s) already running (--max-tests {})",
                shown(peer),
                taken,
                shared.cfg.max_tests
            ));
            ctrl.close_gracefully(Duration::from_millis(200));
            return Ok(false);
        }
        shared.touch();
        let session = Session { shared, id };
        let r = session.test(&mut ctrl, &mut machine, peer, cookie, &params, origin);
        // Whatever happened, forget this session's waiters.
        if let Ok(mut w) = shared.tcp_waiters.lock() {
            w.remove(&cookie.0);
        }
        if let Ok(mut w) = shared.udp_waiters.lock() {
            w.retain(|w| w.session != id);
        }
        shared.touch();
        // The test's threads and buffers are gone: hand their memory back.
        sock::release_free_memory();
        r.map(|_| true)
    }

    /// Tell the client why the test fails (`SERVER_ERROR` and `code`), and return `e`.
    fn fail(&self, ctrl: &mut Ctrl, code: ErrCode, e: TestError) -> TestError {
        let _ = ctrl.write(&wire::encode_server_error(code, 0), "error");
        e
    }

    fn test(
        &self,
        ctrl: &mut Ctrl,
        machine: &mut ServerMachine,
        peer: SocketAddr,
        cookie: Cookie,
        params: &Params,
        origin: Instant,
    ) -> Result<(), TestError> {
        let shared = self.shared;
        let asked = match TestSpec::from_params(params) {
            Ok(s) => s,
            Err(e) => return Err(self.fail(ctrl, e.code, TestError::Refused(e))),
        };
        let side = &shared.cfg.side;
        if asked.mptcp && !shared.mptcp {
            shared.log(&format!(
                "{} asked for MPTCP (-m), but this host has none (net.mptcp.enabled?): the data streams fall back to TCP",
                shown(peer)
            ));
        }
        if let Some(e) =
            asked.server_limits_refusal(side.max_duration_s, side.bitrate_limit.map(|l| l.0))
        {
            return Err(self.fail(ctrl, e.code, TestError::Refused(e)));
        }
        // The test as both ends agreed on it, fixed from here on.
        let answer = machine.on_params(params);
        let spec = asked.negotiated(machine.negotiated());
        if let Some(cpu) = spec.server_affinity {
            // This session thread spawns the test's data threads: they inherit the mask.
            if let Err(e) = sock::pin_to_cpu(cpu as usize) {
                return Err(self.fail(
                    ctrl,
                    ErrCode::Affinity,
                    TestError::io_while(format!("cannot pin this test to CPU {cpu}"), e),
                ));
            }
        }
        let ctx = TextCtx {
            bounceback: spec.bounceback.is_some(),
            connect_only: spec.connect_only,
            histogram_bin_ms: None,
            format: shared.cfg.format,
            protocol: spec.protocol,
            bidir: spec.direction == Direction::Bidir,
            client: false,
            verbose: shared.cfg.verbose,
            title: None,
        };
        let mut renderer = Renderer::new(shared.cfg.mode, shared.sink.clone(), ctx);
        renderer.json_stream_full = shared.cfg.side.json_stream_full;
        if spec.get_server_output {
            renderer.captured = Some(String::new());
        }
        let mut out = Output::new(&mut renderer);
        // As iperf3's server does, the client's title and extra data go into this side's
        // JSON too (text output is not prefixed with the title on the server).
        out.report.title = spec.title.clone();
        out.report.extra_data = spec.extra_data.clone();
        let result = self.test_inner(ctrl, machine, &mut out, &spec, peer, cookie, answer, origin);
        match &result {
            // A stopped test's one text line is the session's log line.
            Err(e) if e.stopped().is_some() && out.obs.mode == Mode::Text => {
                out.report.error = Some(format!("{e:#}"));
            }
            Err(e) => out.error(&format!("{e:#}")),
            Ok(()) => {}
        }
        out.finish();
        result
    }

    #[allow(clippy::too_many_arguments)]
    fn test_inner(
        &self,
        ctrl: &mut Ctrl,
        machine: &mut ServerMachine,
        out: &mut Output<'_, Renderer>,
        spec: &TestSpec,
        peer: SocketAddr,
        cookie: Cookie,
        answer: Option<ExtAnswer>,
        origin: Instant,
    ) -> Result<(), TestError> {
        let shared = self.shared;
        out.emit(Event::Accepted {
            host: &canon(peer.ip()).to_string(),
            port: peer.port(),
        });
        let start = &mut out.report.start;
        start.version = format!("netmeter {}", env!("CARGO_PKG_VERSION"));
        start.system_info = sock::system_info();
        start.timestamp = timestamp_now();
        start.accepted_connection = Some(HostPort {
            host: canon(peer.ip()).to_string(),
            port: peer.port(),
        });
        start.cookie = cookie.as_text();
        start.target_bitrate = spec.rate_bps;
        start.sock_bufsize = spec.window.unwrap_or(0);
        if spec.protocol == Protocol::Tcp {
            start.tcp_mss_default = sock::tcp_mss(ctrl.sock.as_fd());
        }

        // Extensions: answered only to a client that asked, so iperf3 never sees this.
        let mut clock_est: Option<crate::clocksync::ClockEstimate> = None;
        if let Some(answer) = &answer {
            ctrl.send_state(State::NetmeterExt)?;
            ctrl.send_json(answer, "the extension answer")?;
            // Asked for and agreed (`TestSpec::negotiated`): the client sends its clock
            // probes now, before we ask for streams.
            if spec.trip_times {
                clock_est = Some(clock::sync_server(ctrl)?);
            }
        }

        let total = spec.total_streams() as usize;
        let (tx, rx) = mpsc::channel::<(u64, Accepted)>();
        match spec.protocol {
            Protocol::Tcp => {
                let (ttx, trx) = mpsc::channel::<(u64, TcpStream)>();
                if let Ok(mut w) = shared.tcp_waiters.lock() {
                    w.insert(cookie.0, ttx);
                }
                forward(trx, tx, Accepted::Tcp);
            }
            Protocol::Udp => {
                let (utx, urx) = mpsc::channel::<(u64, UdpSocket)>();
                if let Ok(mut w) = shared.udp_waiters.lock() {
                    w.push(UdpWaiter {
                        session: self.id,
                        peer_ip: canon(peer.ip()),
                        remaining: total,
                        tx: utx,
                    });
                }
                forward(urx, tx, Accepted::Udp);
            }
        }
        ctrl.send_state(State::CreateStreams)?;

        let mut accepted: Vec<(u64, Accepted)> = Vec::with_capacity(total);
        let deadline = Instant::now() + STREAMS_TIMEOUT;
        while accepted.len() < total {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let e = TestError::StreamsMissing {
                    opened: accepted.len(),
                    total,
                };
                return Err(self.fail(ctrl, ErrCode::StreamAccept, e));
            }
            // Take every stream handed over so far, then wait on the control connection
            // (not on the hand-off channel): a client that gives up is noticed at once.
            loop {
                match rx.try_recv() {
                    Ok(a) => accepted.push(a),
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => return Err(TestError::HandOffClosed),
                }
            }
            // Answer repeated UDP connect datagrams (the client retries when a reply is lost).
            for (_, a) in &accepted {
                if let Accepted::Udp(u) = a {
                    let _ = u.set_nonblocking(true);
                    let mut b = [0u8; 64];
                    while let Ok(n) = u.recv(&mut b) {
                        if n == 4 {
                            let _ = u.send(&wire::UDP_CONNECT_REPLY);
                        }
                    }
                    let _ = u.set_nonblocking(false);
                }
            }
            // A client that gives up closes its control connection: notice it (a closed
            // or garbled control connection is an error, not "nothing yet"), so the
            // session frees its test slot now rather than at the stream deadline.
            if accepted.len() >= total {
                break;
            }
            match ctrl.poll_state(left.min(STREAM_POLL), "stream setup") {
                Ok(None) => {}
                // No control message is valid while streams open (`AwaitStreams`).
                Ok(Some(st)) => match machine.on_state(st) {
                    Err(e) => return Err(e.into()),
                    Ok(_) => return Err(ServerFailure::DuringStreamSetup(st).into()),
                },
                Err(e) => return Err(e.into()),
            }
        }
        if let Ok(mut w) = shared.tcp_waiters.lock() {
            w.remove(&cookie.0);
        }
        if let Ok(mut w) = shared.udp_waiters.lock() {
            w.retain(|w| w.session != self.id);
        }
        // Connect-only: from now on the cookie opens short connections, answered and
        // counted until the test is over (the registration ends when this returns).
        let conn_reg = spec
            .connect_only
            .then(|| shared.connect_hub.register(cookie.0));

        // Build the streams: the first `parallel` accepted are client→server.
        let payload = Arc::new(stream::make_payload(spec.block_len, spec.repeating_payload));
        let zerocopy = if spec.zerocopy && spec.protocol == Protocol::Tcp {
            Some(Arc::new(test_common::zerocopy_file(&payload)?))
        } else {
            None
        };
        let budget = budget_for(spec);
        let mut live = LiveStreams::default();
        let mut workers: Vec<(Worker, Accepted)> = Vec::new();
        // Hand-off threads can deliver out of order; the accept order is the client's.
        accepted.sort_by_key(|(seq, _)| *seq);
        for (i, (_, a)) in accepted.into_iter().enumerate() {
            let id = if i == 0 { 1 } else { i as i64 + 2 };
            let client_sends = spec.client_sends(i as u32);
            // The thread gets a duplicate; the original (TCP_INFO is read through it)
            // stays open here until the test is over.
            let (fd, tcp, local, remote, a) = match a {
                Accepted::Tcp(t) => {
                    let r = SockRef::from(&t);
                    if let Err(e) =
                        test_common::apply_sock_opts(&r, spec, &shared.cfg.side, peer.is_ipv6())
                    {
                        return Err(self.fail(
                            ctrl,
                            ErrCode::SetBuf,
                            TestError::io_while("cannot apply socket options", e),
                        ));
                    }
                    let t = Arc::new(t);
                    let info = (sock::socket_number(&t), t.local_addr()?, t.peer_addr()?);
                    let dup = t.try_clone()?;
                    let tcp = Arc::downgrade(&t);
                    live.keep_tcp.push(t);
                    (info.0, tcp, info.1, info.2, Accepted::Tcp(dup))
                }
                Accepted::Udp(u) => {
                    let r = SockRef::from(&u);
                    let _ =
                        test_common::apply_sock_opts(&r, spec, &shared.cfg.side, peer.is_ipv6());
                    if spec.window.is_none() {
                        let _ = r.set_recv_buffer_size(4 << 20);
                        let _ = r.set_send_buffer_size(4 << 20);
                    }
                    let info = (sock::socket_number(&u), u.local_addr()?, u.peer_addr()?);
                    let dup = u.try_clone()?;
                    live.keep_udp.push(u);
                    (info.0, Weak::new(), info.1, info.2, Accepted::Udp(dup))
                }
            };
            let mut w = make_worker(
                spec,
                id,
                fd,
                tcp,
                !client_sends,
                client_sends,
                &live,
                &payload,
                &budget,
                &zerocopy,
            );
            if spec.protocol == Protocol::Tcp {
                w.file = shared.cfg.side.file.clone();
            }
            // The thread's duplicate is the same socket as the one kept.
            match &a {
                Accepted::Tcp(t) => probe_capabilities(&mut w, spec, t.as_fd()),
                Accepted::Udp(u) => probe_capabilities(&mut w, spec, u.as_fd()),
            }
            let c = connected_entry(fd, local, remote);
            out.connected(c);
            live.shared.push(w.shared.clone());
            workers.push((w, a));
        }
        if let Some(first) = live.keep_tcp.first() {
            let s = SockRef::from(first);
            out.report.start.sndbuf_actual = s.send_buffer_size().unwrap_or(0) as u64;
            out.report.start.rcvbuf_actual = s.recv_buffer_size().unwrap_or(0) as u64;
        } else if let Some(first) = live.keep_udp.first() {
            let s = SockRef::from(first);
            out.report.start.sndbuf_actual = s.send_buffer_size().unwrap_or(0) as u64;
            out.report.start.rcvbuf_actual = s.recv_buffer_size().unwrap_or(0) as u64;
        }
        out.report.start.test_start = test_common::test_start(spec, shared.cfg.interval_s);
        (
            out.report.start.test_start.gso,
            out.report.start.test_start.gro,
        ) = udp_offloads(&workers.iter().map(|w| &w.0).collect::<Vec<_>>());
        let negotiated = machine.negotiated();
        out.report.start.netmeter = StartExt {
            peer: negotiated.peer_name().into(),
            features: negotiated.feature_names(),
            data_path: data_path(spec, &workers.iter().map(|w| &w.0).collect::<Vec<_>>()),
            warnings: Vec::new(),
            clock: clock_est,
            txstart: None,
        };
        if shared.cfg.verbose {
            let mine: Vec<&Worker> = workers.iter().map(|w| &w.0).collect();
            let path = text::data_path(
                &out.report.start.netmeter.data_path,
                udp_offload_note(spec, &mine).as_ref(),
            );
            out.emit(Event::Info(&path));
        }
        out.start_done();

        let cpu_start = sock::cpu_sample(origin);
        ctrl.send_state(State::TestStart)?;
        let t0 = Instant::now();
        ctrl.send_state(State::TestRunning)?;
        machine.streams_open();
        for (mut w, a) in workers {
            // We receive from the client: raw delay = true + (server − client) clock.
            w.owd_correction_ns = clock_est.map_or(0, |c| -c.offset_ns);
            w.load_start = load_start(spec, t0);
            let sender = w.shared.sender;
            let h = match a {
                Accepted::Tcp(t) => stream::spawn_tcp(w, t)?,
                Accepted::Udp(u) => stream::spawn_udp(w, u)?,
            };
            live.handles.push((sender, h));
        }

        let mut meter = Meter::new(
            spec.protocol,
            spec.direction == Direction::Bidir,
            live.shared.clone(),
            spec.omit_s,
        );
        meter.answered = conn_reg.as_ref().map(|r| r.answered());
        let interval = (shared.cfg.interval_s > 0.0).then_some(shared.cfg.interval_s);
        let mut next_tick = interval.unwrap_or(f64::INFINITY);
        let hard_deadline = running_deadline(spec);
        if spec.until_interrupted() {
            let ka = socket2::TcpKeepalive::new()
                .with_time(KEEPALIVE_IDLE)
                .with_interval(KEEPALIVE_INTERVAL)
                .with_retries(KEEPALIVE_PROBES);
            let _ = SockRef::from(&ctrl.sock).set_tcp_keepalive(&ka);
        }
        let mut last_progress = (0u64, Instant::now());
        // --rcv-timeout: a receiving server gives up on a client that stopped sending.
        let mut receiving = shared
            .cfg
            .side
            .rcv_timeout
            .map(|limit| (super::client::ReceiveWatch::new(&live, limit), limit));
        let mut rate_judge = shared
            .cfg
            .side
            .bitrate_limit
            .map(|(bps, window_s)| (crate::stats::BitrateLimit::new(bps, window_s), 1.0));
        let (end_s, stopped) = loop {
            let now = t0.elapsed().as_secs_f64();
            if shared.signalled() {
                break (now, Some(Stopped::server_interrupted()));
            }
            if let Some((judge, next_s)) = rate_judge.as_mut()
                && now >= *next_s
            {
                *next_s += 1.0;
                let (sb, rb, _, _) = meter.totals();
                if let Some(bps) = judge.on_second(sb + rb) {
                    let limit = shared.cfg.side.bitrate_limit.map_or(0, |l| l.0);
                    return Err(self.fail(
                        ctrl,
                        ErrCode::TotalRate,
                        TestError::OverRate { bps, limit },
                    ));
                }
            }
            if meter.omitting() && now >= spec.omit_s && interval.is_none() {
                meter.tick(now);
            }
            if now >= next_tick {
                let iv = meter.tick(now);
                out.interval(iv);
                next_tick += interval.unwrap_or(f64::INFINITY);
                continue;
            }
            if let Some(d) = hard_deadline
                && t0.elapsed() > d
            {
                return Err(self.fail(
                    ctrl,
                    ErrCode::ServerTestDurationExpired,
                    TestError::ClientOvertime,
                ));
            }
            if let Some((watch, limit)) = receiving.as_mut()
                && watch.stalled(&meter, Instant::now())
            {
                return Err(self.fail(
                    ctrl,
                    ErrCode::NoMsg,
                    TestError::ClientSilent {
                        secs: limit.as_secs_f64(),
                    },
                ));
            }
            let (sb, rb, _, _) = meter.totals();
            if sb + rb != last_progress.0 {
                last_progress = (sb + rb, Instant::now());
            } else if hard_deadline.is_none() && last_progress.1.elapsed() > IDLE_DATA_TIMEOUT {
                return Err(self.fail(
                    ctrl,
                    ErrCode::StreamRead,
                    TestError::ClientSilent {
                        secs: IDLE_DATA_TIMEOUT.as_secs_f64(),
                    },
                ));
            }
            let wait = (next_tick - now).clamp(0.001, 0.1);
            match ctrl.poll_state(Duration::from_secs_f64(wait), "TEST_END") {
                Ok(None) => {}
                Ok(Some(st)) => match machine.on_state(st) {
                    Ok(ServerEvent::TestEnd) => break (t0.elapsed().as_secs_f64(), None),
                    // IPERF_DONE is not valid while the test runs: the machine refuses it.
                    Ok(ServerEvent::Done) => {
                        return Err(ServerFailure::Unexpected(State::IperfDone).into());
                    }
                    Err(ServerFailure::ClientTerminated) => {
                        break (t0.elapsed().as_secs_f64(), Some(Stopped::ClientTerminated));
                    }
                    Err(e) => return Err(e.into()),
                },
                Err(CtrlError::Interrupted(_)) => {
                    break (
                        t0.elapsed().as_secs_f64(),
                        Some(Stopped::server_interrupted()),
                    );
                }
                Err(e) => return Err(e.into()),
            }
        };
        if let Some(why) = stopped {
            // As iperf3: tell a client we are going away, then print what ran so far.
            if matches!(why, Stopped::ServerInterrupted(_)) {
                let _ = ctrl.send_state(State::ServerTerminate);
            }
            live.stop(true, true);
            let fig = live.final_figures(
                &mut meter,
                out,
                interval.is_some(),
                shared.cfg.interval_s,
                end_s,
                end_s,
                cpu_start,
                origin,
            );
            out.end(build::end(&test_common::end_inputs(
                &out.report.start,
                spec,
                &fig.locals,
                &Results::default(),
                fig.cpu,
                fig.congestion,
                false,
                false,
            )));
            return Err(why.into());
        }
        // Stop sending, then count what is still in flight to us before sampling; join
        // our senders (a paced one sleeps up to STOP_POLL) only after the drain, whose
        // wait is not test time.
        live.signal_senders();
        let recv_end_s = receiver_end_s(end_s, live.drain_receivers(t0, DRAIN_IDLE, DRAIN_MAX));
        live.stop(true, false);
        let super::client::FinalFigures {
            locals,
            cpu,
            congestion,
        } = live.final_figures(
            &mut meter,
            out,
            interval.is_some(),
            shared.cfg.interval_s,
            end_s,
            recv_end_s,
            cpu_start,
            origin,
        );
        drop(live);

        ctrl.send_state(State::ExchangeResults)?;
        let peer_results: Results =
            ctrl.read_json(wire::MAX_RESULTS_LEN, CTRL_TIMEOUT, "the client's results")?;
        let mut inputs = test_common::end_inputs(
            &out.report.start,
            spec,
            &locals,
            &peer_results,
            cpu,
            congestion.clone(),
            false,
            false,
        );
        inputs.connect_only_answered = meter.answered.as_ref().map(|a| {
            let secs = locals.iter().map(|l| l.seconds).fold(0.0, f64::max);
            ConnectOnlyAnswered::new(a.total(), secs)
        });
        out.end(build::end(&inputs));
        let mut mine =
            build::local_results(&locals, cpu, spec.protocol == Protocol::Tcp, congestion);
        if spec.get_server_output {
            match out.obs.mode {
                Mode::Text => mine.server_output_text = out.obs.captured.clone(),
                _ => mine.server_output_json = serde_json::to_value(&out.report).ok(),
            }
        }
        ctrl.send_json(&mine, "the server's results")?;
        ctrl.send_state(State::DisplayResults)?;
        machine.results_sent();
        match ctrl.read_state(Duration::from_secs(10), "IPERF_DONE") {
            Ok(st) => {
                if let Err(e) = machine.on_state(st) {
                    shared.log(&format!("after the results: {e}"));
                }
            }
            Err(e) => shared.log(&format!("client did not acknowledge the results: {e}")),
        }
        Ok(())
    }
}

/// How long a running test may last before the server declares it stuck: `-t + -O`
/// plus [`TEST_GRACE`]. `None` for byte/block tests (judged by data progress instead)
/// and for `-t 0`, which runs until the client ends it: there the data progress check
/// and the control connection (closed, or dead under keepalive) catch a vanished peer.
fn running_deadline(spec: &TestSpec) -> Option<Duration> {
    match spec.end {
        _ if spec.until_interrupted() => None,
        EndCondition::Time(t) => Some(Duration::from_secs_f64(t + spec.omit_s) + TEST_GRACE),
        _ => None,
    }
}

/// Move items from a typed channel into the session's common channel.
fn forward<T: Send + 'static>(
    rx: Receiver<(u64, T)>,
    tx: Sender<(u64, Accepted)>,
    wrap: fn(T) -> Accepted,
) {
    let _ = std::thread::Builder::new()
        .name("nm-handoff".into())
        .spawn(move || {
            while let Ok((seq, x)) = rx.recv() {
                if tx.send((seq, wrap(x))).is_err() {
                    break;
                }
            }
        });
}

struct SlotGuard(Arc<Shared>);

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Start a server on a background thread (for `--loopback` and tests). Returns the
/// bound port and a handle that stops it.
pub fn spawn(cfg: ServerConfig, sink: Sink) -> Result<(u16, ServerHandle), TestError> {
    let shutdown = Arc::new(AtomicBool::new(false));
    let server = Server::bind(cfg, sink, shutdown.clone())?;
    let port = server.port();
    let thread = std::thread::Builder::new()
        .name("nm-server".into())
        .spawn(move || {
            let _ = server.serve();
        })?;
    Ok((
        port,
        ServerHandle {
            shutdown,
            thread: Some(thread),
        },
    ))
}

/// Stops a background server when dropped.
pub struct ServerHandle {
    shutdown: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_until_interrupted_has_no_running_deadline() {
        let timed = |t: f64, omit_s: f64| TestSpec {
            end: EndCondition::Time(t),
            omit_s,
            ..Default::default()
        };
        assert_eq!(
            running_deadline(&timed(10.0, 2.0)),
            Some(Duration::from_secs(52))
        );
        // iperf3 sends `time: 0` for -t 0 and its server then arms no test timer.
        assert_eq!(running_deadline(&timed(0.0, 0.0)), None);
        assert_eq!(running_deadline(&timed(0.0, 3.0)), None);
        let bytes = TestSpec {
            end: EndCondition::Bytes(1 << 20),
            ..Default::default()
        };
        assert_eq!(running_deadline(&bytes), None);
    }
}
