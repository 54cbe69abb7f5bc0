//! One server session: one test's half of the control conversation on the server,
//! from the parameters to `IPERF_DONE` (the accept loop in `server` hands it the
//! control connection and, later, the test's data streams).
//!
//! [`Session`] is the driver: it holds the connection, the control machine
//! (`control::ServerMachine`, which owns the conversation's deadlines), the client's
//! address and cookie, the clock and the server's shared state, and does the I/O the
//! machine asks for. Its phases (parameters, streams, the running test's watch,
//! results) read in the order the conversation happens.

use super::audit::{Entry, TestParams};
use super::door::Ready;
use super::policy::{Answer, Reason, Refusal, RunningJudge};
use super::{Shared, SlotGuard, UdpWaiter, canon, shown};
use crate::clock::Clock;
use crate::control::{Awaited, ServerEvent, ServerFailure, ServerMachine, Timeout, Wait};
use crate::engine::clock;
use crate::engine::ctrl::{Ctrl, CtrlError};
use crate::engine::output::{Mode, Output, Renderer};
use crate::engine::stream::DataSock;
use crate::engine::test_common;
use crate::engine::test_run::{
    Control, Ending, FinalFigures, Launch, ReceiveWatch, Running, Side, TestRun,
};
use crate::engine::{Stopped, TestError};
use crate::report::HostPort;
use crate::report::observe::Event;
use crate::report::text::TextCtx;
use crate::sock;
use crate::spec::{Direction, Protocol, SpecError, TestSpec};
use crate::wire::{self, Cookie, ErrCode, ExtAnswer, Feature, Params, Results, State};
use socket2::SockRef;
use std::cell::Cell;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

/// While a session waits for its data streams: how long it waits on the control
/// connection before it looks for streams handed over again.
const STREAM_POLL: Duration = Duration::from_millis(5);

/// TCP keepalive on the control connection of a `-t 0` test, which has no deadline: a
/// client host that vanished without a word is noticed after about 10 + 3 × 5 s.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_PROBES: u32 = 3;

/// One test's session: the driver of the server's control machine.
pub(super) struct Session<'a> {
    shared: &'a Arc<Shared>,
    id: u64,
    ctrl: Ctrl,
    machine: ServerMachine,
    peer: SocketAddr,
    cookie: Cookie,
    /// Where the session reads the time (`ServerConfig::clock`).
    clock: Arc<dyn Clock>,
    /// When the session began (the CPU figures' origin).
    origin: Instant,
    /// Data bytes this server sent and received so far (for the audit log and the
    /// metrics), updated while the test runs and once more at its end.
    tally: Cell<(u64, u64)>,
    /// The client sent netmeter's extension request: an error code it is sent is
    /// followed by the server's own sentence (`wire::ExtNote`).
    explain: bool,
}

impl<'a> Session<'a> {
    /// Run one test whose handshake the door completed (`ready`: the parameters read,
    /// and with `--psk-file` the key proved). `Ok(false)` when the connection never
    /// became a test or was refused (then `entry.refused` says why). `entry` gets what
    /// the audit log needs.
    pub(super) fn run(
        shared: &'a Arc<Shared>,
        ready: Ready,
        id: u64,
        entry: &mut Entry,
    ) -> Result<bool, TestError> {
        let clock = shared.cfg.clock.clone();
        let origin = clock.now();
        let Ready {
            sock,
            peer,
            cookie,
            params,
            authenticated,
        } = ready;
        let mut ctrl = Ctrl::new(sock);
        ctrl.debug = shared.cfg.side.debug.is_some();
        ctrl.stop_on_signal = shared.on_signals.load(Ordering::Relaxed);
        let ctrl = match admit(shared, ctrl, peer, &params, authenticated, entry) {
            Ok(ctrl) => ctrl,
            Err(served) => return Ok(served),
        };
        // Only now does the connection compete for a test slot.
        // A refused connection gives its slot back before it is told (the telling
        // waits up to 200 ms for the client to close), so refusals cannot keep a
        // slot from the next client.
        let taken = shared.active.fetch_add(1, Ordering::AcqRel);
        let slot = SlotGuard(shared.clone());
        let explain = params.netmeter.is_some();
        if let Some(r) = shared.cfg.policy.busy(taken) {
            drop(slot);
            shared.refuse_saying(ctrl, entry, r, explain);
            return Ok(false);
        }
        let source = match SourceGuard::take(shared, peer) {
            Ok(g) => g,
            Err(r) => {
                drop(slot);
                shared.refuse_saying(ctrl, entry, r, explain);
                return Ok(false);
            }
        };
        let running = shared.counters.running();
        shared.touch();
        let mut session = Session {
            shared,
            id,
            ctrl,
            machine: ServerMachine::new(),
            peer,
            cookie,
            clock,
            origin,
            tally: Cell::new((0, 0)),
            explain,
        };
        let r = session.test(&params, entry);
        (entry.bytes_sent, entry.bytes_received) = session.tally.get();
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
        // The slot is free before the client sees the control connection close: it may
        // start its next test at once (`--loopback` runs TCP then UDP).
        drop((running, slot, source));
        drop(session);
        r.map(|_| true)
    }

    /// Tell the client why the test fails (`SERVER_ERROR` and `code`, then to a
    /// netmeter client this server's own sentence when the failure is about what the
    /// client asked or did), and return `e`. Other failures (this host's I/O errors,
    /// which may name its files and devices) keep to the code.
    fn fail(&mut self, code: ErrCode, e: TestError) -> TestError {
        let _ = self
            .ctrl
            .write(&wire::encode_server_error(code, 0), "error");
        let note = match &e {
            TestError::Refused(r) => Some(r.message.clone()),
            TestError::LimitReached(m) => Some(m.clone()),
            TestError::ClientSilent { .. } | TestError::StreamsMissing { .. } => {
                Some(e.to_string())
            }
            _ => None,
        };
        if let Some(message) = note.filter(|_| self.explain) {
            let _ = self
                .ctrl
                .send_json(&wire::ExtNote { message }, "the reason");
        }
        e
    }

    /// The test the client asked for, checked against the policy and settled with the
    /// machine; its output, then [`Self::test_inner`].
    fn test(&mut self, params: &Params, entry: &mut Entry) -> Result<(), TestError> {
        let shared = self.shared;
        let asked = match TestSpec::from_params(params) {
            Ok(s) => s,
            Err(e) => return Err(self.fail(e.code, TestError::Refused(e))),
        };
        entry.test = Some(TestParams::of(&asked));
        if asked.mptcp && !shared.mptcp {
            shared.log(&format!(
                "{} asked for MPTCP (-m), but this host has none (net.mptcp.enabled?): the data streams fall back to TCP",
                shown(self.peer)
            ));
        }
        if let Err(r) = shared.cfg.policy.check_test(&asked) {
            // `check_test` answers with an error code (never `ACCESS_DENIED`).
            let code = match r.answer {
                Answer::Error(code) => code,
                Answer::Busy => ErrCode::AccessDenied,
            };
            let e = SpecError {
                code,
                message: r.message.clone(),
            };
            entry.refused = Some(r);
            return Err(self.fail(code, TestError::Refused(e)));
        }
        // The test as both ends agreed on it, fixed from here on.
        let answer = self.machine.on_params(params);
        let mut spec = asked.negotiated(self.machine.negotiated());
        // --server-bitrate-limit: a test that asked for no rate gets this server's share
        // of the limit for its own sending (the client's is judged while it runs).
        if let Some(own) = shared.cfg.policy.own_side(&spec) {
            spec = own;
        }
        if let Some(cpu) = spec.server_affinity {
            // This session thread spawns the test's data threads: they inherit the mask.
            if let Err(e) = sock::pin_to_cpu(cpu as usize) {
                let e = TestError::io_while(format!("cannot pin this test to CPU {cpu}"), e);
                return Err(self.fail(ErrCode::Affinity, e));
            }
        }
        let mut renderer = renderer(shared, &spec);
        let mut out = Output::new(&mut renderer);
        // As iperf3's server does, the client's title and extra data go into this side's
        // JSON too (text output is not prefixed with the title on the server).
        out.report.title = spec.title.clone();
        out.report.extra_data = spec.extra_data.clone();
        let result = self.test_inner(&mut out, &spec, answer);
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

    /// From the extension answer to the results: streams, the running test, its end.
    fn test_inner(
        &mut self,
        out: &mut Output<'_, Renderer>,
        spec: &TestSpec,
        answer: Option<ExtAnswer>,
    ) -> Result<(), TestError> {
        let shared = self.shared;
        out.emit(Event::Accepted {
            host: &canon(self.peer.ip()).to_string(),
            port: self.peer.port(),
        });
        record_start(
            out,
            &self.ctrl,
            spec,
            self.peer,
            &self.cookie,
            self.clock.wall(),
        );
        // Extensions: answered only to a client that asked, so iperf3 never sees this.
        let mut clock_est: Option<crate::clocksync::ClockEstimate> = None;
        if let Some(answer) = &answer {
            self.ctrl.send_state(State::NetmeterExt)?;
            self.ctrl.send_json(answer, "the extension answer")?;
            // Asked for and agreed (`TestSpec::negotiated`): the client sends its clock
            // probes now, before we ask for streams.
            if spec.trip_times {
                clock_est = Some(clock::sync_server(&mut self.ctrl)?);
            }
        }
        let accepted = self.accept_streams(spec)?;
        // Connect-only: from now on the cookie opens short connections, answered and
        // counted until the test is over (the registration ends when this returns).
        let conn_reg = spec
            .connect_only
            .then(|| shared.connect_hub.register(self.cookie.0));
        let run = self.attach_streams(out, spec, accepted)?;
        run.record_start(
            &mut out.report.start,
            shared.cfg.interval_s,
            self.machine.negotiated(),
            clock_est,
            Vec::new(),
        );
        if shared.cfg.verbose {
            let path = run.data_path_text(&out.report.start);
            out.emit(Event::Info(&path));
        }
        if let Some(line) = test_common::udp_buffer_line(run.spec(), &out.report.start) {
            out.emit(Event::Info(&line));
        }
        out.start_done();

        let cpu_start = sock::cpu_sample(self.origin);
        self.ctrl.send_state(State::TestStart)?;
        let t0 = self.clock.now();
        self.ctrl.send_state(State::TestRunning)?;
        self.machine.streams_open();
        let mut running = run.start(Launch {
            t0,
            // We receive from the client: raw delay = true + (server − client) clock.
            owd_correction_ns: clock_est.map_or(0, |c| -c.offset_ns),
            connect_to: None,
            answered: conn_reg.as_ref().map(|r| r.answered()),
            interval_s: shared.cfg.interval_s,
            interval_histograms: shared.cfg.histograms.is_some(),
            cpu_start,
            origin: self.origin,
        })?;
        if spec.until_interrupted() {
            let ka = socket2::TcpKeepalive::new()
                .with_time(KEEPALIVE_IDLE)
                .with_interval(KEEPALIVE_INTERVAL)
                .with_retries(KEEPALIVE_PROBES);
            let _ = SockRef::from(&self.ctrl.sock).set_tcp_keepalive(&ka);
        }
        let connections = conn_reg.as_ref().map(|r| r.counter());
        let mut watch = Watch::new(self, spec, &running, t0, connections);
        let ending = match running.run_until(out, &mut watch) {
            Ok(e) => e,
            Err(e) => {
                // Stop sending now (whatever the client does) and count what went.
                running.stop_all();
                let (sb, rb, _, _) = running.meter.totals();
                self.tally.set((sb, rb));
                return Err(e);
            }
        };
        if let Some(why) = ending.stopped {
            watch.tell_file_cap(&running, ending.at_s);
            // As iperf3: tell a client we are going away, then print what ran so far.
            if matches!(why, Stopped::ServerInterrupted(_)) {
                let _ = self.ctrl.send_state(State::ServerTerminate);
            }
            running.stop_all();
            let (sb, rb, _, _) = running.meter.totals();
            self.tally.set((sb, rb));
            let fig = running.final_figures(out, ending.at_s, ending.at_s);
            out.end(running.summary(&out.report.start, &fig, None));
            return Err(why.into());
        }
        // Stop sending, then count what is still in flight to us before sampling; join
        // our senders (a paced one sleeps up to STOP_POLL) only after the drain, whose
        // wait is not test time. The streams' sockets close before the results.
        let fig = running.drain(out, ending.at_s);
        watch.tell_file_cap(&running, running.now_s());
        let (sb, rb, _, _) = running.meter.totals();
        self.tally.set((sb, rb));
        running.close_streams();
        self.exchange_results(out, &running, &fig)
    }

    /// `CREATE_STREAMS`, then wait until the client has opened every data stream
    /// (handed over by the accept loop or the UDP listener) or the machine's streams
    /// deadline passed. Returns them in the order they were accepted, which is the
    /// order the client opened them.
    fn accept_streams(&mut self, spec: &TestSpec) -> Result<Vec<(u64, DataSock)>, TestError> {
        let total = spec.total_streams() as usize;
        let rx = self.register_waiter(spec.protocol, total);
        self.ctrl.send_state(State::CreateStreams)?;
        self.machine.streams_requested(total, self.clock.now());

        let mut accepted: Vec<(u64, DataSock)> = Vec::with_capacity(total);
        while accepted.len() < total {
            // Take every stream handed over so far, then wait on the control connection
            // (not on the hand-off channel): a client that gives up is noticed at once.
            loop {
                match rx.try_recv() {
                    Ok(a) => {
                        accepted.push(a);
                        self.machine.on_stream();
                    }
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => return Err(TestError::HandOffClosed),
                }
            }
            answer_udp_retries(&accepted);
            if accepted.len() >= total {
                break;
            }
            let now = self.clock.now();
            if let Err(t) = self.machine.on_timeout(now) {
                return Err(self.streams_missing(t, accepted.len(), total));
            }
            let left = self
                .machine
                .poll_timeout()
                .map_or(STREAM_POLL, |at| at.saturating_duration_since(now));
            // A client that gives up closes its control connection: notice it (a closed
            // or garbled control connection is an error, not "nothing yet"), so the
            // session frees its test slot now rather than at the stream deadline.
            match self.ctrl.poll_state(left.min(STREAM_POLL), "stream setup") {
                Ok(None) => {}
                // No control message is valid while streams open (`AwaitStreams`).
                Ok(Some(st)) => match self.machine.on_state(st) {
                    Err(e) => return Err(e.into()),
                    Ok(_) => return Err(ServerFailure::DuringStreamSetup(st).into()),
                },
                Err(e) => return Err(e.into()),
            }
        }
        self.forget_waiter();
        // Hand-off threads can deliver out of order; the accept order is the client's.
        accepted.sort_by_key(|(seq, _)| *seq);
        Ok(accepted)
    }

    /// The streams deadline passed: tell the client how many of its streams came.
    fn streams_missing(&mut self, t: Timeout, accepted: usize, total: usize) -> TestError {
        let (opened, total) = match t.awaited {
            Awaited::Streams { opened, total } => (opened, total),
            _ => (accepted, total),
        };
        self.fail(
            ErrCode::StreamAccept,
            TestError::StreamsMissing { opened, total },
        )
    }

    /// Ask the accept loop (TCP, by cookie) or the UDP listener (by cookie when the
    /// client agreed to [`Feature::UdpCookie`], else by source address) to hand this
    /// session its data streams.
    fn register_waiter(&self, protocol: Protocol, total: usize) -> Receiver<(u64, DataSock)> {
        let shared = self.shared;
        let (tx, rx) = mpsc::channel::<(u64, DataSock)>();
        match protocol {
            Protocol::Tcp => {
                let (ttx, trx) = mpsc::channel::<(u64, TcpStream)>();
                if let Ok(mut w) = shared.tcp_waiters.lock() {
                    w.insert(self.cookie.0, ttx);
                }
                forward(trx, tx, DataSock::Tcp);
            }
            Protocol::Udp => {
                let (utx, urx) = mpsc::channel::<(u64, UdpSocket)>();
                if let Ok(mut w) = shared.udp_waiters.lock() {
                    let by_cookie = self.machine.negotiated().has(Feature::UdpCookie);
                    w.push(UdpWaiter {
                        session: self.id,
                        peer_ip: canon(self.peer.ip()),
                        cookie: by_cookie.then_some(self.cookie.0),
                        remaining: total,
                        sources: Vec::with_capacity(total),
                        tx: utx,
                    });
                }
                forward(urx, tx, DataSock::Udp);
            }
        }
        rx
    }

    /// All streams came: no more are handed to this session.
    fn forget_waiter(&self) {
        if let Ok(mut w) = self.shared.tcp_waiters.lock() {
            w.remove(&self.cookie.0);
        }
        if let Ok(mut w) = self.shared.udp_waiters.lock() {
            w.retain(|w| w.session != self.id);
        }
    }

    /// Set each accepted stream's socket options and attach it (the first `-P` with
    /// `--bidir` flow client → server).
    fn attach_streams(
        &mut self,
        out: &mut Output<'_, Renderer>,
        spec: &TestSpec,
        accepted: Vec<(u64, DataSock)>,
    ) -> Result<TestRun, TestError> {
        let side = &self.shared.cfg.side;
        let run = TestRun::new(spec.clone(), Side::Server)?.with_clock(self.clock.clone());
        // -F: opened once for the test, as iperf3 tells a client it cannot (IEFILE).
        let mut run = match run.with_file(side.file.as_deref(), side.file_max_bytes) {
            Ok(run) => run,
            Err(e) => return Err(self.fail(ErrCode::File, TestError::Io(e))),
        };
        for (_, sock) in accepted {
            if let Err(e) = data_sock_opts(&sock, spec, side, self.peer.is_ipv6()) {
                let e = TestError::io_while("cannot apply socket options", e);
                return Err(self.fail(ErrCode::SetBuf, e));
            }
            let remote = match &sock {
                DataSock::Tcp(t) => t.peer_addr()?,
                DataSock::Udp(u) => u.peer_addr()?,
            };
            let c = run.attach(sock, remote)?;
            out.connected(c);
        }
        run.record_buffers(&mut out.report.start);
        Ok(run)
    }

    /// `EXCHANGE_RESULTS`: read the client's results, print the end summary, send ours
    /// (with this side's output for `--get-server-output`), `DISPLAY_RESULTS`, and wait
    /// for `IPERF_DONE`.
    fn exchange_results(
        &mut self,
        out: &mut Output<'_, Renderer>,
        run: &Running,
        fig: &FinalFigures,
    ) -> Result<(), TestError> {
        self.ctrl.send_state(State::ExchangeResults)?;
        let wait = self.machine.results_requested(self.clock.now());
        let peer_results: Results = self.ctrl.read_json_until(wire::MAX_RESULTS_LEN, wait)?;
        self.machine.on_client_results();
        out.end(run.summary(&out.report.start, fig, Some(&peer_results)));
        let mut mine = run.results(fig);
        if run.spec().get_server_output {
            match out.obs.mode {
                Mode::Text => mine.server_output_text = out.obs.captured.clone(),
                _ => mine.server_output_json = serde_json::to_value(&out.report).ok(),
            }
        }
        self.ctrl.send_json(&mine, "the server's results")?;
        self.ctrl.send_state(State::DisplayResults)?;
        let wait: Wait = self.machine.results_sent(self.clock.now());
        match self.ctrl.read_state_until(wait) {
            Ok(st) => {
                if let Err(e) = self.machine.on_state(st) {
                    self.shared.log(&format!("after the results: {e}"));
                }
            }
            Err(e) => self
                .shared
                .log(&format!("client did not acknowledge the results: {e}")),
        }
        Ok(())
    }
}

/// Before the session takes a test slot: this side's control-connection options, the
/// credential (`--authorized-users-path`), a third-party request or a multicast join
/// (served here and done). `Err` when the connection ends here: refused (`false`), or served as a
/// third-party request (whether that ran a test).
fn admit(
    shared: &Arc<Shared>,
    ctrl: Ctrl,
    peer: SocketAddr,
    params: &Params,
    authenticated: bool,
    entry: &mut Entry,
) -> Result<Ctrl, bool> {
    // This side's control-connection options (--snd-timeout, --cntl-ka), as iperf3's
    // server sets them on each control connection it accepts.
    if let Err(e) = test_common::apply_side_opts(&SockRef::from(&ctrl.sock), &shared.cfg.side, true)
    {
        shared.log(&format!(
            "cannot set up the control connection from {}: {e}",
            shown(peer)
        ));
        return Err(false);
    }
    // iperf3 checks the credential where it reads the parameters; a refused client
    // never takes a test slot, and -1 keeps waiting for one that authenticates.
    if let Some(auth) = &shared.cfg.auth {
        match auth.check_at(
            params.authtoken.as_deref(),
            crate::auth::unix_secs(shared.cfg.clock.wall()),
        ) {
            Ok(user) => {
                if shared.cfg.verbose {
                    shared.log(&format!(
                        "authentication succeeded for user '{user}' from {}",
                        shown(peer)
                    ));
                }
                entry.user = Some(user);
            }
            Err(e) => {
                let r = Refusal {
                    reason: Reason::Auth,
                    answer: Answer::Error(ErrCode::AuthTest),
                    message: format!("test authorization failed: {e}"),
                };
                shared.refuse(ctrl, entry, r);
                return Err(false);
            }
        }
    }
    if let Some(req) = params.netmeter.as_ref().and_then(|r| r.mcast_join.as_ref()) {
        return Err(super::mcast_join::serve(shared, ctrl, entry, req, peer));
    }
    if let Some(req) = params
        .netmeter
        .as_ref()
        .and_then(|r| r.third_party.as_ref())
    {
        return Err(super::third_party::serve(
            shared,
            ctrl,
            entry,
            req,
            authenticated,
        ));
    }
    Ok(ctrl)
}

/// The session's renderer for a test as agreed.
fn renderer(shared: &Shared, spec: &TestSpec) -> Renderer {
    let ctx = TextCtx {
        bounceback: spec.bounceback.is_some(),
        connect_only: spec.connect_only,
        histogram_bin_ms: shared.cfg.histograms,
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
    renderer
}

/// The `start` facts a session knows once it has the client's parameters.
fn record_start(
    out: &mut Output<'_, Renderer>,
    ctrl: &Ctrl,
    spec: &TestSpec,
    peer: SocketAddr,
    cookie: &Cookie,
    wall: std::time::SystemTime,
) {
    let start = &mut out.report.start;
    start.version = format!("netmeter {}", env!("CARGO_PKG_VERSION"));
    start.system_info = sock::system_info();
    start.timestamp = clock::timestamp_at(wall);
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
}

/// Answer repeated UDP connect datagrams on the streams accepted so far (the client
/// retries when a reply is lost).
fn answer_udp_retries(accepted: &[(u64, DataSock)]) {
    for (_, a) in accepted {
        if let DataSock::Udp(u) = a {
            let _ = u.set_nonblocking(true);
            let mut b = [0u8; 64];
            while let Ok(n) = u.recv(&mut b) {
                if wire::is_udp_connect(&b[..n]) {
                    let _ = u.send(&wire::UDP_CONNECT_REPLY);
                }
            }
            let _ = u.set_nonblocking(false);
        }
    }
}

/// The server's one place where a data stream's socket options are applied (after
/// accept). A UDP stream's refusals are ignored, as they always were; a TCP stream's
/// end the test with `SetBuf`.
fn data_sock_opts(
    sock: &DataSock,
    spec: &TestSpec,
    side: &test_common::SideOpts,
    ipv6: bool,
) -> std::io::Result<()> {
    match sock {
        DataSock::Tcp(t) => test_common::apply_sock_opts(&SockRef::from(t), spec, side, ipv6),
        DataSock::Udp(u) => {
            let r = SockRef::from(u);
            let _ = test_common::apply_sock_opts(&r, spec, side, ipv6);
            test_common::udp_default_buffers(&r, spec);
            Ok(())
        }
    }
}

/// The server's half of the conversation while data flows: it waits for the client's
/// `TEST_END`, and gives up on a test that overstays or stops moving.
struct Watch<'a, 's> {
    session: &'a mut Session<'s>,
    t0: Instant,
    /// The policy's limits on the running test (duration, idle data, bitrate).
    judge: RunningJudge,
    /// A `--connect-only` test's answered connections: its progress, as bytes are others'.
    connections: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// `--rcv-timeout`: a receiving server gives up on a client that stopped sending.
    receiving: Option<(ReceiveWatch, Duration)>,
    /// `-F`: the log was told that `--server-max-file-size` stopped the writing.
    file_cap_told: bool,
}

impl<'a, 's> Watch<'a, 's> {
    /// The watch of a test whose data started at `t0`.
    fn new(
        session: &'a mut Session<'s>,
        spec: &TestSpec,
        running: &Running,
        t0: Instant,
        connections: Option<Arc<std::sync::atomic::AtomicU64>>,
    ) -> Self {
        let cfg = &session.shared.cfg;
        let judge = cfg.policy.running_judge(spec);
        // `-F` here, sending: the senders stop at the file's end by design and the test
        // runs on to its -t, moving nothing (as iperf3's does).
        let sends_file = cfg.side.file.is_some()
            && spec.protocol == Protocol::Tcp
            && (0..spec.total_streams()).any(|i| !spec.client_sends(i));
        let judge = if sends_file {
            judge.without_idle_check()
        } else {
            judge
        };
        let receiving = cfg.side.rcv_timeout.map(|limit| {
            let watch = ReceiveWatch::starting(running.receives(), limit, cfg.clock.now());
            (watch, limit)
        });
        Watch {
            session,
            t0,
            judge,
            connections,
            receiving,
            file_cap_told: false,
        }
    }

    /// `-F`: log once that `--server-max-file-size` stopped the writing (while the test
    /// runs, or after the drain for a test that ended first).
    fn tell_file_cap(&mut self, run: &Running, now_s: f64) {
        if !self.file_cap_told
            && let Some((path, max)) = run.file_capped()
        {
            self.file_cap_told = true;
            self.session.shared.log(&format!(
                "-F: stopped writing {} at {max} bytes by {now_s:.1} s into the test (--server-max-file-size); the rest was received and not written",
                path.display()
            ));
        }
    }
}

impl Control for Watch<'_, '_> {
    fn check(&mut self, _: &Running, now_s: f64) -> Option<Ending> {
        if self.session.shared.signalled() {
            return Some(Ending {
                at_s: now_s,
                stopped: Some(Stopped::server_interrupted()),
            });
        }
        None
    }

    fn watch(&mut self, run: &Running, now_s: f64) -> Result<Option<Ending>, TestError> {
        let (sb, rb, _, _) = run.meter.totals();
        self.session.tally.set((sb, rb));
        self.tell_file_cap(run, now_s);
        let connections = self
            .connections
            .as_ref()
            .map_or(0, |c| c.load(Ordering::Relaxed));
        let bytes = sb.saturating_add(rb);
        if let Some(stop) = self
            .judge
            .judge(now_s, bytes.saturating_add(connections), bytes)
        {
            let e = TestError::LimitReached(stop.message);
            return Err(self.session.fail(stop.code, e));
        }
        let now = self.session.clock.now();
        if let Some((watch, limit)) = self.receiving.as_mut()
            && watch.stalled(&run.meter, now)
        {
            let e = TestError::ClientSilent {
                secs: limit.as_secs_f64(),
            };
            return Err(self.session.fail(ErrCode::NoMsg, e));
        }
        let t0 = self.t0;
        let clock = self.session.clock.clone();
        let ended = |stopped| {
            Ok(Some(Ending {
                at_s: clock.now().saturating_duration_since(t0).as_secs_f64(),
                stopped,
            }))
        };
        let wait = (run.next_tick - now_s).clamp(0.001, 0.1);
        match self
            .session
            .ctrl
            .poll_state(Duration::from_secs_f64(wait), "TEST_END")
        {
            Ok(None) => Ok(None),
            Ok(Some(st)) => match self.session.machine.on_state(st) {
                Ok(ServerEvent::TestEnd) => ended(None),
                // IPERF_DONE is not valid while the test runs: the machine refuses it.
                Ok(ServerEvent::Done) => Err(ServerFailure::Unexpected(State::IperfDone).into()),
                Err(ServerFailure::ClientTerminated) => ended(Some(Stopped::ClientTerminated)),
                Err(e) => Err(e.into()),
            },
            Err(CtrlError::Interrupted(_)) => ended(Some(Stopped::server_interrupted())),
            Err(e) => Err(e.into()),
        }
    }
}

/// Move items from a typed channel into the session's common channel.
fn forward<T: Send + 'static>(
    rx: Receiver<(u64, T)>,
    tx: Sender<(u64, DataSock)>,
    wrap: fn(T) -> DataSock,
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

/// A test's place in its source's count (`--max-tests-per-source`), given back when the
/// session ends.
struct SourceGuard {
    shared: Arc<Shared>,
    source: std::net::IpAddr,
}

impl SourceGuard {
    fn take(shared: &Arc<Shared>, peer: SocketAddr) -> Result<SourceGuard, Refusal> {
        let limit = shared.cfg.policy.max_tests_per_source;
        let mut slots = shared
            .source_slots
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let source = slots.take(peer.ip(), limit)?;
        Ok(SourceGuard {
            shared: shared.clone(),
            source,
        })
    }
}

impl Drop for SourceGuard {
    fn drop(&mut self) {
        let mut slots = self
            .shared
            .source_slots
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        slots.give_back(self.source);
    }
}
