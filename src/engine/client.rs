//! The client: connects, negotiates, opens the data streams, decides when the test
//! ends, and prints the merged report.
//!
//! The client's half of the conversation and the sockets it opens (control, TCP and
//! UDP data) read best together; the data streams themselves are `test_run`'s.

use super::clock;
use super::connect;
use super::ctrl::{Ctrl, CtrlError};
use super::output::{Mode, Output, Renderer, Sink};
use super::stream::DataSock;
use super::test_common;
use super::test_run::{
    Control, Ending, FinalFigures, Launch, ReceiveWatch, Running, Side, TestRun,
};
use super::{Stopped, TestError};
use crate::clock::{Clock, mono_now};
use crate::clocksync::ClockEstimate;
use crate::control::{self, Awaited, ClientFailure, ClientMachine, ClientStep, Wait};
use crate::report::observe::{Event, Observer};
use crate::report::text::TextCtx;
use crate::report::{HostPort, Report};
use crate::sock;
use crate::spec::{Direction, EndCondition, Protocol, TestSpec};
use crate::units::Format;
use crate::wire::{self, Cookie, ExtAnswer, Feature, Results, State};
use socket2::{Domain, SockAddr, Socket, Type};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use super::Family;

/// Everything the client needs, resolved from the flags.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The server runs inside this process (`--loopback`): both ends' CPU figures are
    /// the one process's, so per-side CPU warnings would count it twice.
    pub in_process_server: bool,
    pub host: String,
    pub port: u16,
    pub spec: TestSpec,
    /// Whether `-l` was given (else UDP uses the path MSS, as iperf3 does).
    pub len_given: bool,
    pub interval_s: f64,
    pub format: Format,
    pub mode: Mode,
    pub verbose: bool,
    pub family: Family,
    pub bind: Option<IpAddr>,
    pub cport: Option<u16>,
    pub connect_timeout: Duration,
    /// Ask a netmeter server for extensions (off only for tests of the fallback).
    pub extensions: bool,
    /// `-A N`: pin this process's test threads to CPU N.
    pub affinity: Option<u32>,
    /// `--histograms[=BIN_MS]`: print latency histograms with this bin width.
    pub histograms: Option<f64>,
    /// `--txstart-time`: start sending at this wall-clock time (seconds since the epoch).
    pub txstart: Option<f64>,
    /// `--username`/`--rsa-public-key-path`: the credential to send with the parameters.
    pub auth: Option<crate::auth::ClientAuth>,
    /// `--psk-file`: prove this key to a netmeter server (and have it proved back).
    pub psk: Option<crate::auth::psk::Psk>,
    /// This side's own options (`test_common::SideOpts`).
    pub side: test_common::SideOpts,
    /// `--line-rate RATE|memcpy`: the peak the end summary's efficiency is judged
    /// against (the memory copy rate is measured before the test when not yet known).
    pub line_rate: Option<crate::host::facts::LineRate>,
    /// Where the client reads the time for the conversation's deadlines and the
    /// test's origin (`crate::clock::system()`; a `ManualClock` in tests).
    pub clock: Arc<dyn Clock>,
    /// `--iperf2`: the server is an iperf 2 server (`engine::iperf2_client`), with
    /// the options only iperf 2's command line has.
    pub iperf2: Option<Iperf2Opts>,
    /// Stop the test as a stop signal would, when set from elsewhere (the server
    /// running a third-party test whose controller asked to stop it).
    pub stop: Option<Arc<std::sync::atomic::AtomicBool>>,
}

/// What only iperf 2's command line (`netmeter iperf2 -c`) asks of a client of an iperf
/// 2 server (`engine::iperf2_client`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Iperf2Opts {
    /// `-d`, iperf 2's dual test: the server connects back to a port this client
    /// listens on and sends there while this client sends (TCP); the spec's direction
    /// is `--bidir`'s.
    pub dual: bool,
    /// `-r`, iperf 2's tradeoff test: this client's test first, then the server
    /// connects back to a port this client listens on and sends for the same `-t`/`-n`
    /// (TCP; `engine::iperf2_client::tradeoff`); the spec's direction is the upload's.
    pub tradeoff: bool,
    /// `--bounceback-period`: time between bursts (`None`: iperf 2's second; zero:
    /// back to back).
    pub bounceback_period: Option<Duration>,
    /// UDP `-R`, `-d` and `-r`: record each received datagram's latency from the send time in it even without
    /// `--trip-times`, as iperf 2's `-R` client prints it (`netmeter iperf2 -c -u -R`);
    /// the test header does not ask for trip times.
    pub send_time_latency: bool,
    /// Where UDP `--isochronous` datagrams carry the frame fields: the server's
    /// version's layout (`--iperf2-version`; iperf 2.2's unless told).
    pub isoch_layout: crate::wire::iperf2::IsochLayout,
}

/// Resolve `host:port`, honouring `-4` / `-6`.
pub fn resolve(host: &str, port: u16, family: Family) -> Result<SocketAddr, TestError> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|_| TestError::UnknownHost(host.to_string()))?
        .filter(|a| match family {
            Family::Any => true,
            Family::V4 => a.is_ipv4(),
            Family::V6 => a.is_ipv6(),
        })
        .collect();
    addrs
        .first()
        .copied()
        .ok_or_else(|| TestError::NoAddress(host.to_string()))
}

fn new_socket(addr: &SocketAddr, ty: Type) -> Result<Socket, TestError> {
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    Ok(Socket::new(domain, ty, None)?)
}

fn bind_local(
    s: &Socket,
    cfg: &ClientConfig,
    server: &SocketAddr,
    port: u16,
) -> Result<(), TestError> {
    if cfg.bind.is_none() && port == 0 {
        return Ok(());
    }
    let ip = cfg.bind.unwrap_or(if server.is_ipv4() {
        IpAddr::from([0, 0, 0, 0])
    } else {
        IpAddr::from([0u16; 8])
    });
    s.set_reuse_address(true)?;
    s.bind(&SockAddr::from(SocketAddr::new(ip, port)))
        .map_err(|e| TestError::io_while(format!("cannot bind to {ip} port {port}"), e))
}

/// One TCP connection to `server` from local port `port` (0: any) with the client's
/// options: the control connection (`spec` `None`) or a data stream's (its socket
/// options, `--cport`, `-B`). An iperf 2 server's streams open the same way.
pub(super) fn connect_tcp(
    cfg: &ClientConfig,
    server: &SocketAddr,
    spec: Option<&TestSpec>,
    port: u16,
) -> Result<TcpStream, TestError> {
    // `-m`: the data connections over MPTCP (the control connection stays TCP, as in
    // iperf3).
    let s = if spec.is_some_and(|s| s.mptcp) {
        test_common::mptcp_socket(server.is_ipv6())?
    } else {
        new_socket(server, Type::STREAM)?
    };
    bind_local(&s, cfg, server, port)?;
    match spec {
        Some(spec) => test_common::apply_sock_opts(&s, spec, &cfg.side, server.is_ipv6())?,
        // The control connection.
        None => test_common::apply_side_opts(&s, &cfg.side, true)?,
    }
    let to = match spec {
        Some(spec) => test_common::data_peer(&s, spec, *server)?,
        None => *server,
    };
    s.connect_timeout(&SockAddr::from(to), cfg.connect_timeout)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused => TestError::ConnectRefused(*server),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
                TestError::ConnectTimeout {
                    server: *server,
                    secs: cfg.connect_timeout.as_secs_f64(),
                }
            }
            _ => TestError::io_while(format!("unable to connect to {server}"), e),
        })?;
    Ok(s.into())
}

/// One UDP data socket aimed at `server` from local port `port` (0: any), the
/// stream's options and buffers set; nothing sent yet (an iperf3 or netmeter server
/// is greeted by [`connect_udp`], an iperf 2 server by the first datagram).
pub(super) fn open_udp(
    cfg: &ClientConfig,
    server: &SocketAddr,
    spec: &TestSpec,
    port: u16,
) -> Result<UdpSocket, TestError> {
    let s = new_socket(server, Type::DGRAM)?;
    bind_local(&s, cfg, server, port)?;
    test_common::apply_sock_opts(&s, spec, &cfg.side, server.is_ipv6())?;
    test_common::udp_default_buffers(&s, spec);
    let to = test_common::data_peer(&s, spec, *server)?;
    s.connect(&SockAddr::from(to))
        .map_err(|e| TestError::io_while(format!("cannot open a UDP stream to {server}"), e))?;
    Ok(s.into())
}

/// How many UDP connect attempts, and how long to wait for each reply.
const UDP_CONNECT_WAITS_MS: [u64; 6] = [1000, 1000, 2000, 2000, 3000, 3000];

/// Open one UDP data stream; `cookie` is the test's when the server matches UDP streams
/// by cookie ([`wire::Feature::UdpCookie`]), sent after iperf3's 4 connect bytes.
fn connect_udp(
    cfg: &ClientConfig,
    server: &SocketAddr,
    spec: &TestSpec,
    port: u16,
    cookie: Option<&Cookie>,
) -> Result<UdpSocket, TestError> {
    let sock = open_udp(cfg, server, spec, port)?;
    let with_cookie = cookie.map(wire::udp_connect_with_cookie);
    let hello: &[u8] = with_cookie.as_ref().map_or(&wire::UDP_CONNECT_MSG, |c| c);
    let mut buf = vec![0u8; 65536];
    for wait_ms in UDP_CONNECT_WAITS_MS {
        // iperf3 sends this once and waits 30 s; a lost datagram then hangs the test.
        // netmeter repeats it; the server answers every copy.
        let _ = sock.send(hello);
        let deadline = mono_now() + Duration::from_millis(wait_ms);
        loop {
            let left = deadline.saturating_duration_since(mono_now());
            if left.is_zero() {
                break;
            }
            sock.set_read_timeout(Some(left))?;
            match sock.recv(&mut buf) {
                // The reply is 4 bytes; larger datagrams are early data in -R mode.
                Ok(4) => return Ok(sock),
                Ok(_) => {}
                Err(e) if super::ctrl::is_timeout(&e) => break,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    return Err(TestError::UdpRefused {
                        port: server.port(),
                    });
                }
                Err(e) => return Err(TestError::io_while("UDP stream setup failed", e)),
            }
        }
    }
    Err(TestError::UdpNoAnswer {
        tries: UDP_CONNECT_WAITS_MS.len(),
        port: server.port(),
    })
}

/// A control failure as the client reports it: a stop signal during a wait is the
/// user's interrupt, not a failure.
pub(super) fn ctrl_err(e: CtrlError) -> TestError {
    match e {
        CtrlError::Interrupted(_) => Stopped::client_interrupted().into(),
        e => TestError::Ctrl(e),
    }
}

/// The iperf3 text / `-J` / `--json-stream` renderer for a client test's flags.
pub fn renderer(cfg: &ClientConfig, sink: Sink) -> Renderer {
    let ctx = TextCtx {
        bounceback: cfg.spec.bounceback.is_some(),
        connect_only: cfg.spec.connect_only,
        histogram_bin_ms: cfg.histograms,
        format: cfg.format,
        protocol: cfg.spec.protocol,
        bidir: cfg.spec.direction == Direction::Bidir,
        client: true,
        verbose: cfg.verbose,
        title: cfg.spec.title.clone(),
    };
    let mut r = Renderer::new(cfg.mode, sink, ctx);
    r.json_stream_full = cfg.side.json_stream_full;
    r
}

/// Run one test as the client, telling `obs` what happens as it happens. Returns the
/// report (on failure, the error; a partial report has gone to `obs`).
pub fn run(cfg: &ClientConfig, obs: &mut dyn Observer) -> Result<Report, TestError> {
    let (report, result) = run_keeping_report(cfg, obs);
    result.map(|_| report)
}

/// [`run`], returning the report also when the test failed or was stopped (then it
/// holds what ran and the error).
pub fn run_keeping_report(
    cfg: &ClientConfig,
    obs: &mut dyn Observer,
) -> (Report, Result<(), TestError>) {
    run_keeping_report_on(cfg, obs, run_inner)
}

/// One client test's conversation and data, given the `Output` ([`run_keeping_report_on`]).
pub type Runner = fn(&ClientConfig, &mut Output) -> Result<(), TestError>;

/// [`run_keeping_report`] with another dialect's `runner` (`netmeter::run` passes
/// `engine::iperf2_client::run` for `ClientConfig::iperf2`, so this module need not
/// know it).
pub fn run_keeping_report_on(
    cfg: &ClientConfig,
    obs: &mut dyn Observer,
    runner: Runner,
) -> (Report, Result<(), TestError>) {
    let mut out = Output::new(obs);
    out.report.title = cfg.spec.title.clone();
    out.report.extra_data = cfg.spec.extra_data.clone();
    // `--line-rate memcpy`: measured now, before any socket is open (~100 ms of one CPU).
    let measured;
    let cfg = match cfg.line_rate {
        Some(l @ crate::host::facts::LineRate::MemoryCopy(None)) => {
            let mut c = cfg.clone();
            c.line_rate = Some(crate::host::probe::measure_line_rate(l));
            measured = c;
            &measured
        }
        _ => cfg,
    };
    let result = runner(cfg, &mut out);
    // An interrupted test recorded its error before its partial summary (iperf3's
    // order in --json-stream: the error event, then the end event).
    if let Err(e) = &result
        && out.report.error.is_none()
    {
        out.error(&format!("{e:#}"));
    }
    out.finish();
    (out.report, result)
}

fn run_inner(cfg: &ClientConfig, out: &mut Output) -> Result<(), TestError> {
    if cfg.iperf2.is_some() {
        return Err(TestError::Usage(
            "an iperf 2 server's test runs through netmeter::run (engine::iperf2_client)",
        ));
    }
    let origin = cfg.clock.now();
    let server = before_connect(cfg, out)?;
    let ctrl_sock = connect_tcp(cfg, &server, None, 0)?;
    let mut ctrl = Ctrl::new(ctrl_sock);
    ctrl.debug = cfg.side.debug.is_some();
    ctrl.stop_on_signal = true;
    ctrl.stop = cfg.stop.clone();
    let r = converse(cfg, out, &mut ctrl, server, origin);
    match r.as_ref().err().and_then(TestError::stopped) {
        // Tell the server, as iperf3 does (CLIENT_TERMINATE), so its session ends now.
        Some(Stopped::ClientInterrupted(_)) => {
            let _ = ctrl.send_state(State::ClientTerminate);
        }
        None if r.is_ok() => ctrl.close_gracefully(Duration::from_secs(2)),
        _ => {}
    }
    r
}

/// What every client does before its first connection, whatever the server: `-A`'s
/// pinning (the data threads inherit it), the server's address, `--txstart-time`'s
/// early warning, `-V`'s preamble and the "Connecting" line. Returns the address.
pub(super) fn before_connect(
    cfg: &ClientConfig,
    out: &mut Output,
) -> Result<SocketAddr, TestError> {
    if let Some(cpu) = cfg.affinity {
        // Threads started from here on (all data threads) inherit the mask.
        sock::pin_to_cpu(cpu as usize)
            .map_err(|e| TestError::io_while(format!("cannot pin to CPU {cpu} (-A)"), e))?;
    }
    let server = resolve(&cfg.host, cfg.port, cfg.family)?;
    if let Some(at) = cfg.txstart {
        super::profile::txstart_before_connect(at, out);
    }
    if cfg.verbose {
        let pre = crate::report::text::verbose_preamble(
            &format!("netmeter {}", env!("CARGO_PKG_VERSION")),
            &sock::system_info(),
            &clock::timestamp_at(cfg.clock.wall()).time,
        );
        out.emit(Event::Info(&pre));
    }
    out.emit(Event::Connecting {
        host: &cfg.host,
        port: cfg.port,
    });
    Ok(server)
}

/// The control conversation, from the cookie to `IPERF_DONE`: setup, the running test
/// (with [`TestRun`]), the end, the results exchange, the display.
fn converse(
    cfg: &ClientConfig,
    out: &mut Output,
    ctrl: &mut Ctrl,
    server: SocketAddr,
    origin: Instant,
) -> Result<(), TestError> {
    let mut rnd = [0u8; wire::COOKIE_LEN - 1];
    sock::random_bytes(&mut rnd)?;
    let cookie = Cookie::from_random(&rnd);
    ctrl.write(&cookie.0, "sending the cookie")
        .map_err(ctrl_err)?;
    let cpu_start = sock::cpu_sample(origin);
    let asked = asked_spec(cfg, ctrl);
    if asked.bounceback.is_some() && !cfg.extensions {
        return Err(TestError::Usage(
            "--bounceback needs netmeter's extensions (drop --no-extensions)",
        ));
    }
    record_start(out, cfg, ctrl, &cookie, &asked);
    if cfg.verbose {
        let tcp = asked.protocol == Protocol::Tcp;
        let t = crate::report::text::verbose_connected(&out.report.start, tcp);
        out.emit(Event::Info(&t));
    }
    let mut psk_cn = None;
    let ext_req = match cfg.extensions.then(|| asked.ext_request()) {
        Some(mut req) if cfg.psk.is_some() => {
            let (cn, hello) = super::psk::client_hello()?;
            psk_cn = Some(cn);
            req.psk = Some(hello);
            Some(req)
        }
        other => other,
    };
    let mut talk = Talk {
        psk_cn,
        cfg,
        ctrl,
        server,
        cookie,
        machine: ClientMachine::new(ext_req.as_ref()),
        ext_req,
        asked,
        clock_est: None,
        warnings: Vec::new(),
    };
    let (run, test_start) = talk.setup(out)?;
    let t0 = super::profile::client_t0(cfg.txstart, test_start, &*cfg.clock, out);
    let connect_to = run
        .spec()
        .connect_only
        .then(|| connect::Target::new(server, cfg.bind, talk.cookie.0, run.spec(), &cfg.side));
    let mut running = run.start(Launch {
        t0,
        // We receive from the server: raw delay = true + (client − server) clock.
        owd_correction_ns: talk.clock_est.map_or(0, |c| c.offset_ns),
        connect_to,
        answered: None,
        interval_s: cfg.interval_s,
        interval_histograms: cfg.histograms.is_some(),
        cpu_start,
        origin,
    })?;
    let mut watch = Watch {
        ctrl: &mut *talk.ctrl,
        clock: cfg.clock.as_ref(),
        receiving: ReceiveWatch::starting(
            running.receives(),
            cfg.side.rcv_timeout.unwrap_or(RCV_TIMEOUT),
            cfg.clock.now(),
        ),
        rcv_timeout: cfg.side.rcv_timeout,
    };
    let ending = running.run_until(out, &mut watch)?;
    if let Some(why) = ending.stopped {
        // Interrupted (or the server quit): stop everything and report what ran so far,
        // as iperf3 does; the peer's figures are unknown.
        running.stop_all();
        let now = running.now_s().max(ending.at_s);
        let fig = running.final_figures(out, now, now);
        return Err(partial_end(out, &running, &fig, why));
    }
    // Ending: stop sending, tell the server at once (the server's figures end when
    // TEST_END arrives: joining a paced sender first, asleep for up to STOP_POLL,
    // stretched them by ~45 ms), count what is still in flight to us, and only then
    // wait for our senders to go.
    running.signal_senders();
    talk.ctrl.send_state(State::TestEnd).map_err(ctrl_err)?;
    talk.machine.test_ended();
    let fig = running.drain(out, ending.at_s);
    let peer = talk.exchange_results(out, &running, &fig)?;
    talk.display(out, running, &fig, peer)
}

/// What this client asks for; the test it runs is derived from it once the server has
/// answered (`TestSpec::negotiated`) and neither changes afterwards.
fn asked_spec(cfg: &ClientConfig, ctrl: &Ctrl) -> TestSpec {
    let mut spec = cfg.spec.clone();
    if spec.protocol == Protocol::Udp && !cfg.len_given {
        // iperf3 sizes datagrams to the control connection's MSS, capped at 1460.
        spec.block_len = sock::tcp_mss(ctrl.sock.as_fd())
            .map(|m| (m as usize).min(wire::UDP_DEFAULT_LEN))
            .unwrap_or(wire::UDP_DEFAULT_LEN)
            .max(wire::UDP_MIN_LEN);
    }
    spec
}

/// The `start` facts known before the server answers.
fn record_start(
    out: &mut Output,
    cfg: &ClientConfig,
    ctrl: &Ctrl,
    cookie: &Cookie,
    asked: &TestSpec,
) {
    record_start_common(out, cfg, asked);
    let start = &mut out.report.start;
    start.cookie = cookie.as_text();
    if asked.protocol == Protocol::Tcp {
        record_mss(start, asked, ctrl.sock.as_fd());
    }
}

/// The `start` facts of any client's test, whatever the server: who and when, where
/// to, the asked rate and buffer.
pub(super) fn record_start_common(out: &mut Output, cfg: &ClientConfig, asked: &TestSpec) {
    let start = &mut out.report.start;
    start.version = format!("netmeter {}", env!("CARGO_PKG_VERSION"));
    start.system_info = sock::system_info();
    start.timestamp = clock::timestamp_at(cfg.clock.wall());
    start.connecting_to = Some(HostPort {
        host: cfg.host.clone(),
        port: cfg.port,
    });
    start.target_bitrate = asked.rate_bps;
    start.fq_rate = asked.fq_rate_bps.unwrap_or(0);
    start.sock_bufsize = asked.window.unwrap_or(0);
}

/// The TCP MSS `start` reports: `-M`'s, else the one the kernel gave `fd`'s connection
/// (the control connection's; an iperf 2 server's first data connection).
pub(super) fn record_mss(
    start: &mut crate::report::Start,
    asked: &TestSpec,
    fd: std::os::fd::BorrowedFd<'_>,
) {
    match asked.mss {
        Some(m) => start.tcp_mss = Some(m),
        None => start.tcp_mss_default = sock::tcp_mss(fd),
    }
}

/// The client's half of the control conversation outside the running test.
struct Talk<'a> {
    cfg: &'a ClientConfig,
    ctrl: &'a mut Ctrl,
    server: SocketAddr,
    cookie: Cookie,
    machine: ClientMachine,
    ext_req: Option<wire::ExtRequest>,
    asked: TestSpec,
    clock_est: Option<ClockEstimate>,
    /// `--psk-file`: our nonce, sent in the parameters.
    psk_cn: Option<crate::auth::psk::Nonce>,
    /// Warnings about the test as negotiated, for `start.netmeter.warnings`.
    warnings: Vec<String>,
}

impl Talk<'_> {
    /// Setup: everything up to `TEST_RUNNING`. Returns the attached streams and when
    /// `TEST_START` arrived.
    fn setup(&mut self, out: &mut Output) -> Result<(TestRun, Option<Instant>), TestError> {
        let mut run: Option<TestRun> = None;
        let mut test_start: Option<Instant> = None;
        let mut sent_token = false;
        loop {
            // The last step is done (at first: the cookie is sent): the server's word
            // is due from now.
            self.machine.step_done(self.cfg.clock.now());
            let st = self
                .ctrl
                .read_state_until(self.wait())
                .map_err(|e| match e {
                    // iperf3 3.22 refuses a credential by closing the connection.
                    CtrlError::Closed(_) if sent_token && run.is_none() => TestError::AuthClosed,
                    e => ctrl_err(e),
                })?;
            let step = match self.machine.on_state(st, self.cfg.clock.now()) {
                Ok(s) => s,
                Err(ClientFailure::ServerTerminated) => {
                    return Err(Stopped::ServerTerminated.into());
                }
                Err(ClientFailure::AccessDenied) => {
                    return Err(match read_note(self.ctrl) {
                        Some(why) => TestError::BusySaid(why),
                        None => ClientFailure::AccessDenied.into(),
                    });
                }
                Err(e) => return Err(e.into()),
            };
            match step {
                ClientStep::SendParams => {
                    let mut params = self.asked.to_params(self.ext_req.clone());
                    if let Some(auth) = &self.cfg.auth {
                        let now = crate::auth::unix_secs(self.cfg.clock.wall());
                        params.authtoken = Some(auth.token_at(now).map_err(TestError::AuthToken)?);
                        sent_token = true;
                    }
                    self.ctrl
                        .send_json(&params, "sending the parameters")
                        .map_err(ctrl_err)?
                }
                ClientStep::ReadExtAnswer => {
                    let a: ExtAnswer = self
                        .ctrl
                        .read_json_until(wire::MAX_EXT_LEN, self.wait())
                        .map_err(ctrl_err)?;
                    if self.machine.on_ext_answer(&a).has(Feature::TripTimes) {
                        // The server waits for our clock probes before CREATE_STREAMS.
                        self.clock_est = Some(clock::sync_client(self.ctrl).map_err(ctrl_err)?);
                    }
                }
                ClientStep::Authenticate => {
                    if let (Some(key), Some(cn)) = (&self.cfg.psk, &self.psk_cn) {
                        let bound = crate::auth::psk::bind_request(None);
                        super::psk::client_answer(self.ctrl, key, &self.cookie, cn, &bound)
                            .map_err(TestError::Psk)?;
                    }
                }
                ClientStep::ReadServerError => {
                    return Err(match server_error(self.ctrl) {
                        TestError::Peer {
                            code: wire::ErrCode::AuthTest,
                            ..
                        } if self.cfg.psk.is_none() && self.cfg.auth.is_none() => {
                            TestError::AuthRequired
                        }
                        TestError::Peer { code, errno }
                            if sent_token
                                && run.is_none()
                                && code.arises_only_in_a_running_test() =>
                        {
                            TestError::AuthRefusedStale { code, errno }
                        }
                        e => e,
                    });
                }
                ClientStep::CreateStreams => run = Some(self.create_streams(out)?),
                ClientStep::StartClock => {
                    let run = match &mut run {
                        Some(r) => r,
                        None => run.insert(self.unattached()?),
                    };
                    test_start = Some(self.cfg.clock.now());
                    self.start_clock(out, run);
                }
                ClientStep::StartData => break,
                other => {
                    return Err(TestError::UnexpectedStep {
                        step: other,
                        when: "during setup",
                    });
                }
            }
        }
        // The machine requires CREATE_STREAMS before TEST_RUNNING.
        let run = match run {
            Some(r) => r,
            None => self.unattached()?,
        };
        Ok((run, test_start))
    }

    /// The read the machine awaits. Outside the running test it always awaits
    /// something (`step_done`); should it not, the setup wait is the one to make.
    fn wait(&self) -> Wait {
        self.machine.wait().unwrap_or_else(|| {
            let what = Awaited::ServerMessage.what();
            Wait::new(self.cfg.clock.now(), control::CTRL_TIMEOUT, what)
        })
    }

    /// The test as negotiated, without streams (a server that skipped `CREATE_STREAMS`).
    fn unattached(&self) -> Result<TestRun, TestError> {
        let spec = self.asked.negotiated(self.machine.negotiated());
        Ok(TestRun::new(spec, self.side())?
            .with_clock(self.cfg.clock.clone())
            .with_peak(self.peak()))
    }

    /// `--line-rate`'s peak, measured already if it is the memory copy rate.
    fn peak(&self) -> Option<crate::host::facts::Peak> {
        self.cfg.line_rate.and_then(|l| l.peak())
    }

    fn side(&self) -> Side {
        Side::Client {
            in_process_server: self.cfg.in_process_server,
        }
    }

    /// `CREATE_STREAMS`: fix the test as negotiated, then open and attach the streams.
    fn create_streams(&mut self, out: &mut Output) -> Result<TestRun, TestError> {
        let cfg = self.cfg;
        let negotiated = self.machine.negotiated();
        if let Some(flag) = self.asked.unmet_need(negotiated) {
            return Err(TestError::NeedsNetmeter {
                flag,
                host: cfg.host.clone(),
            });
        }
        self.warnings.extend(negotiated.client_warnings(&cfg.host));
        let mut run = TestRun::new(self.asked.negotiated(negotiated), self.side())?
            .with_clock(cfg.clock.clone())
            .with_file(cfg.side.file.as_deref(), cfg.side.file_max_bytes)?
            .with_peak(self.peak());
        for w in &self.warnings {
            out.warning(w);
        }
        let total = run.spec().total_streams();
        if let Some(at) = cfg.txstart {
            super::profile::txstart_before_streams(at, self.ctrl.sock.as_fd(), total);
        }
        for i in 0..total {
            let cport = cfg.cport.map(|p| p.wrapping_add(i as u16)).unwrap_or(0);
            let sock = self.open_stream(run.spec(), cport)?;
            let c = run.attach(sock, self.server)?;
            out.connected(c);
        }
        run.record_buffers(&mut out.report.start);
        Ok(run)
    }

    /// Open one data stream from local port `cport` (0: any), socket options set.
    fn open_stream(&self, spec: &TestSpec, cport: u16) -> Result<DataSock, TestError> {
        Ok(match spec.protocol {
            Protocol::Tcp => {
                let mut s = connect_tcp(self.cfg, &self.server, Some(spec), cport)?;
                std::io::Write::write_all(&mut s, &self.cookie.0).map_err(|e| {
                    TestError::io_while("cannot send the cookie on a data stream", e)
                })?;
                DataSock::Tcp(s)
            }
            Protocol::Udp => {
                let by_cookie = self.machine.negotiated().has(wire::Feature::UdpCookie);
                let cookie = by_cookie.then_some(&self.cookie);
                DataSock::Udp(connect_udp(self.cfg, &self.server, spec, cport, cookie)?)
            }
        })
    }

    /// `TEST_START`: the `start` facts, the reverse-mode and `-V` lines.
    fn start_clock(&mut self, out: &mut Output, run: &TestRun) {
        let cfg = self.cfg;
        let spec = run.spec();
        run.record_start(
            &mut out.report.start,
            cfg.interval_s,
            self.machine.negotiated(),
            self.clock_est,
            std::mem::take(&mut self.warnings),
        );
        if spec.direction == Direction::Reverse {
            out.emit(Event::ReverseMode { host: &cfg.host });
        }
        if cfg.verbose {
            let line = format!(
                "Starting Test: protocol: {}, {} streams, {} byte blocks, omitting {} seconds, {} second test, tos {}\n",
                out.report.start.test_start.protocol,
                spec.parallel,
                spec.block_len,
                spec.omit_s,
                out.report.start.test_start.duration,
                spec.tos.unwrap_or(0)
            );
            out.emit(Event::Info(&line));
            let path = run.data_path_text(&out.report.start);
            out.emit(Event::Info(&path));
        }
        if let Some(line) = test_common::udp_buffer_line(spec, &out.report.start) {
            out.emit(Event::Info(&line));
        }
        if spec.ecn.is_some() && spec.protocol == crate::spec::Protocol::Tcp {
            let line = crate::stats::ecn::tcp_ecn_note(
                crate::host::probe::tcp_ecn(),
                spec.congestion.as_deref(),
            );
            out.emit(Event::Info(&line));
        }
        out.start_done();
    }

    /// After `TEST_END`: send our results, read the server's, up to `DISPLAY_RESULTS`.
    fn exchange_results(
        &mut self,
        out: &mut Output,
        run: &Running,
        fig: &FinalFigures,
    ) -> Result<Results, TestError> {
        let mut peer = Results::default();
        loop {
            // TEST_END went out and our side drained (at first), or the server's results
            // were read: its next word is due from now.
            self.machine.step_done(self.cfg.clock.now());
            let st = self.ctrl.read_state_until(self.wait()).map_err(ctrl_err);
            let now = self.cfg.clock.now();
            let step = st.and_then(|st| match self.machine.on_state(st, now) {
                Err(ClientFailure::ServerTerminated) => Err(Stopped::ServerTerminated.into()),
                r => r.map_err(TestError::from),
            });
            // Interrupted while the server works out its results: report our own figures.
            let step = match step {
                Err(e) => match e.stopped() {
                    Some(why) => return Err(partial_end(out, run, fig, why)),
                    None => return Err(e),
                },
                Ok(step) => step,
            };
            match step {
                ClientStep::ExchangeResults => {
                    self.ctrl
                        .send_json(&run.results(fig), "sending results")
                        .map_err(ctrl_err)?;
                    self.machine.step_done(self.cfg.clock.now());
                    peer = match self
                        .ctrl
                        .read_json_until(wire::MAX_RESULTS_LEN, self.wait())
                    {
                        Ok(p) => {
                            self.machine.on_server_results();
                            p
                        }
                        Err(CtrlError::Interrupted(_)) => {
                            let why = Stopped::client_interrupted();
                            return Err(partial_end(out, run, fig, why));
                        }
                        Err(e) => return Err(ctrl_err(e)),
                    };
                }
                ClientStep::Display => return Ok(peer),
                ClientStep::ReadServerError => return Err(server_error(self.ctrl)),
                other => {
                    return Err(TestError::UnexpectedStep {
                        step: other,
                        when: "at the end",
                    });
                }
            }
        }
    }

    /// `DISPLAY_RESULTS`: the end summary, the server's output, `IPERF_DONE`.
    fn display(
        &mut self,
        out: &mut Output,
        run: Running,
        fig: &FinalFigures,
        mut peer: Results,
    ) -> Result<(), TestError> {
        out.end(run.summary(&out.report.start, fig, Some(&peer)));
        if let Some(t) = peer.server_output_text.take() {
            out.emit(Event::ServerOutput(&t));
            out.report.server_output_text = Some(t);
        }
        if let Some(j) = peer.server_output_json.take() {
            out.report.server_output_json = Some(j);
        }
        out.emit(Event::Done);
        let _ = self.ctrl.send_state(State::IperfDone);
        drop(run);
        if let Some(c) = &out.report.end.netmeter.connect_only
            && c.connections == 0
        {
            return Err(TestError::NoConnection {
                failed: c.failed,
                host: self.cfg.host.clone(),
                last_error: c.last_error.as_deref().unwrap_or("none").to_string(),
            });
        }
        Ok(())
    }
}

/// The client's half of the conversation while data flows: it ends the test itself
/// (the end condition), and only listens to the server for bad news.
struct Watch<'a> {
    ctrl: &'a mut Ctrl,
    clock: &'a dyn Clock,
    receiving: ReceiveWatch,
    /// `--rcv-timeout`, when given.
    rcv_timeout: Option<Duration>,
}

impl Control for Watch<'_> {
    fn check(&mut self, run: &Running, now_s: f64) -> Option<Ending> {
        run.end_reached(now_s).then_some(Ending {
            at_s: now_s,
            stopped: None,
        })
    }

    fn watch(&mut self, run: &Running, now: f64) -> Result<Option<Ending>, TestError> {
        let spec = run.spec();
        let stop = |why| {
            Ok(Some(Ending {
                at_s: now,
                stopped: Some(why),
            }))
        };
        // Sleep until the next tick or the end of a timed test; byte and block counts
        // (and the omit period's end) are checked every 10 ms. Fewer wake-ups keep the
        // control thread off the data threads' cores.
        let until = match spec.end {
            // -t 0: nothing ends the test but an interrupt; wake for the ticks only.
            _ if spec.until_interrupted() => run.next_tick,
            EndCondition::Time(t) if !run.meter.omitting() => run.next_tick.min(t + spec.omit_s),
            _ => run.next_tick.min(now + 0.01),
        };
        let wait = (until - now).clamp(0.0, 0.25);
        let st = match self.ctrl.poll_state(
            Duration::from_secs_f64(wait),
            "control messages during the test",
        ) {
            Ok(st) => st,
            Err(CtrlError::Interrupted(_)) => return stop(Stopped::client_interrupted()),
            Err(e) => return Err(ctrl_err(e)),
        };
        if let Some(st) = st {
            return self.on_state(st, stop);
        }
        if let Some(e) = run.stream_error() {
            // A server that ends a test (a limit it enforces, an error of its own)
            // resets the data streams and says why on the control connection; the
            // reset can arrive first. Its word, or its closing, is the better reason.
            return match self
                .ctrl
                .poll_state(STREAM_ERROR_GRACE, "control messages during the test")
            {
                Ok(Some(st)) => self.on_state(st, stop),
                Ok(None) => Err(TestError::Stream(e)),
                Err(CtrlError::Interrupted(_)) => stop(Stopped::client_interrupted()),
                Err(c) => Err(ctrl_err(c)),
            };
        }
        // Receiving: a server that stopped sending without a word is given up after
        // --rcv-timeout, as an iperf3 client does; by default only in a -t 0 test (a
        // timed one ends by its own deadline).
        if (spec.until_interrupted() || self.rcv_timeout.is_some())
            && self.receiving.stalled(&run.meter, self.clock.now())
        {
            return Err(TestError::ServerSilent {
                secs: self.rcv_timeout.unwrap_or(RCV_TIMEOUT).as_secs_f64(),
            });
        }
        Ok(None)
    }
}

impl Watch<'_> {
    /// What a state the server sent during the test means for the client.
    fn on_state(
        &mut self,
        st: State,
        stop: impl Fn(Stopped) -> Result<Option<Ending>, TestError>,
    ) -> Result<Option<Ending>, TestError> {
        match st {
            State::ServerError => Err(server_error(self.ctrl)),
            State::ServerTerminate => stop(Stopped::ServerTerminated),
            State::AccessDenied => Err(TestError::DeniedDuringTest),
            other => Err(TestError::UnexpectedDuringTest(other)),
        }
    }
}

/// How long a client whose data stream failed waits for the server's reason on the
/// control connection before it reports the stream's own error.
const STREAM_ERROR_GRACE: Duration = Duration::from_secs(2);

/// iperf3's default `--rcv-timeout`: how long a receiving client of a `-t 0` test waits
/// for data before it gives up on a silent server.
const RCV_TIMEOUT: Duration = Duration::from_secs(120);

/// End a test that was stopped early: record why (before the summary, as iperf3 orders
/// its `--json-stream` events), print the summary of what this side measured (the peer's
/// figures never came) and return the error that ends the run.
fn partial_end(out: &mut Output, run: &Running, fig: &FinalFigures, why: Stopped) -> TestError {
    out.error(&why.to_string());
    out.end(run.summary(&out.report.start, fig, None));
    why.into()
}

pub(super) fn server_error(ctrl: &mut Ctrl) -> TestError {
    match ctrl.read_error_trailer(control::ERROR_TRAILER_TIMEOUT) {
        // A netmeter server says why after the code (`wire::ExtNote`); iperf3 and older
        // netmeter servers close the connection instead, which ends the wait at once.
        Ok((code, errno)) => match read_note(ctrl) {
            Some(message) => TestError::PeerSaid {
                code,
                errno,
                message,
            },
            None => TestError::Peer { code, errno },
        },
        Err(_) => TestError::PeerUnexplained,
    }
}

/// The server's sentence after a refusal (`wire::ExtNote`), printable, if it sent one.
fn read_note(ctrl: &mut Ctrl) -> Option<String> {
    ctrl.read_json::<wire::ExtNote>(
        wire::MAX_NOTE_LEN,
        control::NOTE_TIMEOUT,
        "the server's reason",
    )
    .ok()
    .filter(|n| !n.message.trim().is_empty())
    .map(|n| n.printable())
}
