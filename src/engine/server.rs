//! The server: one listener, one session per test, several tests at once if allowed.
//!
//! The accept loop serves every connection's handshake itself, without a thread
//! (`door`): the 37-byte cookie, read without blocking under a deadline, hands a data
//! stream to the test waiting for it; a new test's parameters (and `--psk-file` proof)
//! are read the same way, and only a complete handshake gets a session thread. A
//! bounded number of handshakes wait at once, in total and per source, so silent,
//! slow or garbage connections hold neither threads nor test slots; a session holds a
//! test slot only once its parameters have arrived. Whatever a peer does, the damage is
//! one logged error for that connection.

pub mod audit;
pub mod door;
mod iperf2;
mod mcast_join;
pub mod metrics;
pub mod policy;
pub mod refusal_log;
mod session;
pub mod third_party;

use super::Family;
use super::ctrl::Ctrl;
use super::output::{Mode, Renderer, Sink};
use super::test_common;
use super::{Stopped, TestError};
use crate::report::escape::{Lines, escape_controls};
use crate::report::observe::{Event, Observer};
use crate::report::text::TextCtx;
use crate::sock;
use crate::spec::Protocol;
use crate::units::Format;
use crate::wire;
use refusal_log::Verdict;
use socket2::{Domain, SockAddr, Socket, Type};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Server settings from the flags.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub port: u16,
    pub bind: Option<IpAddr>,
    pub family: Family,
    pub one_off: bool,
    /// Who may test and what they may ask for (`--max-tests`, `--allow`, ...).
    pub policy: policy::Policy,
    /// `--audit-log FILE` (`-` = stdout): one JSON line per test, and its size bound.
    pub audit_log: Option<audit::Target>,
    /// `--metrics ADDR:PORT`: Prometheus counters over HTTP.
    pub metrics: Option<SocketAddr>,
    pub idle_timeout: Option<Duration>,
    pub mode: Mode,
    pub verbose: bool,
    pub format: Format,
    pub interval_s: f64,
    /// `--histograms[=BIN_MS]`: print one-way delay histograms (end of test, and per
    /// interval) with this bin width, as iperf 2's server does.
    pub histograms: Option<f64>,
    /// `--rsa-private-key-path`/`--authorized-users-path`: every test must authenticate.
    pub auth: Option<Arc<crate::auth::ServerAuth>>,
    /// `--psk-file`: every test must prove this key (netmeter clients only: an iperf3
    /// client is refused with iperf3's "test authorization failed").
    pub psk: Option<Arc<crate::auth::psk::Psk>>,
    /// `--allow-third-party`: run third-party tests toward these targets (needs `psk`).
    pub third_party: Option<third_party::ThirdPartyPolicy>,
    /// This side's own options (`test_common::SideOpts`).
    pub side: test_common::SideOpts,
    /// Where the sessions read the time (`crate::clock::system()`).
    pub clock: Arc<dyn crate::clock::Clock>,
    /// `netmeter iperf2 -s`: iperf 2 clients' tests printed in iperf 2's server layout
    /// (`server/iperf2/print.rs`).
    pub iperf2_layout: Option<crate::report::iperf2::server::ServerLayout>,
}

/// Connections accepted per pass of the accept loop before the pending handshakes
/// are read again.
const ACCEPT_BATCH: usize = 32;
/// At most one "accept failed" log line this often.
const ACCEPT_LOG_EVERY: Duration = Duration::from_secs(1);

/// Where a TCP data connection (with its accept sequence number) goes.
type StreamSender = Sender<(u64, TcpStream)>;

/// A test waiting for its UDP streams. With `cookie` (the client agreed to
/// [`wire::Feature::UdpCookie`]) only connect datagrams carrying that cookie are its;
/// without, any 4-byte one from `peer_ip` is (iperf3's match, by source address).
struct UdpWaiter {
    session: u64,
    peer_ip: IpAddr,
    cookie: Option<[u8; wire::COOKIE_LEN]>,
    remaining: usize,
    /// Where its streams came from: a repeated connect datagram still queued on the
    /// listener is not a new stream.
    sources: Vec<SocketAddr>,
    tx: Sender<(u64, UdpSocket)>,
}

impl UdpWaiter {
    /// Whether a connect datagram from `from` (`from_ip` canonical) carrying `cookie`
    /// opens one more of this test's streams.
    fn wants(
        &self,
        from: SocketAddr,
        from_ip: IpAddr,
        cookie: Option<&[u8; wire::COOKIE_LEN]>,
    ) -> bool {
        let ours = match (cookie, &self.cookie) {
            (Some(got), Some(mine)) => got == mine,
            (None, None) => from_ip == self.peer_ip,
            _ => false,
        };
        ours && self.remaining > 0 && !self.sources.contains(&from)
    }
}

struct Shared {
    cfg: ServerConfig,
    /// Where each test's renderer writes.
    sink: Sink,
    /// Who hears about the server itself: listening, its log lines (the iperf3
    /// renderer on `sink` unless `Server::observed_by` set another).
    events: Mutex<Box<dyn Observer + Send>>,
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
    /// Stop on SIGINT/SIGTERM, reopen on SIGHUP (`Server::stop_on_signals`); off for the in-process
    /// server of `--loopback`, which its client stops.
    on_signals: AtomicBool,
    last_activity: Mutex<Instant>,
    /// The TCP listener takes MPTCP (see `make_listener`).
    mptcp: bool,
    /// `--max-conn-rate`'s buckets.
    rate_gate: Option<Mutex<policy::RateGate>>,
    /// `--max-tests-per-source`: the tests each source runs.
    source_slots: Mutex<policy::SourceSlots>,
    audit: Option<audit::AuditLog>,
    /// Which refusals get lines of their own (`refusal_log`).
    refusals: Mutex<refusal_log::RefusalLimiter>,
    /// What `--metrics` shows (counted whether or not it is served).
    counters: Arc<metrics::Counters>,
    /// Session threads alive (`door::SESSION_SPARE` bounds them).
    sessions_live: AtomicUsize,
    /// Sessions alive per source: such a source's data streams and short connections
    /// are not held to the per-source handshake cap nor charged `--max-conn-rate`.
    running: Mutex<HashMap<door::budget::Source, usize>>,
    /// iperf 2 tests open to more of their `-P` connections or flows.
    iperf2: iperf2::Groups,
}

/// A taken test slot (`--max-tests`), given back when dropped.
struct SlotGuard(Arc<Shared>);

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One session thread, counted from before it starts until it ends.
struct LiveSession {
    shared: Arc<Shared>,
    source: door::budget::Source,
}

impl LiveSession {
    fn new(shared: &Arc<Shared>, peer: IpAddr) -> LiveSession {
        let source = door::budget::Source::of(canon(peer));
        shared.sessions_live.fetch_add(1, Ordering::AcqRel);
        if let Ok(mut r) = shared.running.lock() {
            *r.entry(source).or_insert(0) += 1;
        }
        LiveSession {
            shared: shared.clone(),
            source,
        }
    }
}

impl Drop for LiveSession {
    fn drop(&mut self) {
        self.shared.sessions_live.fetch_sub(1, Ordering::AcqRel);
        if let Ok(mut r) = self.shared.running.lock()
            && let Some(n) = r.get_mut(&self.source)
        {
            *n -= 1;
            if *n == 0 {
                r.remove(&self.source);
            }
        }
    }
}

impl Shared {
    /// The server's monotonic time, from the clock its config carries.
    fn now(&self) -> Instant {
        self.cfg.clock.now()
    }

    /// Whether a session from `source` is alive.
    fn runs_from(&self, source: door::budget::Source) -> bool {
        self.running.lock().is_ok_and(|r| r.contains_key(&source))
    }

    /// Tell the server's observer about the server itself (not one test's report).
    fn tell(&self, event: Event<'_>) {
        if let Ok(mut o) = self.events.lock() {
            o.on(event);
        }
    }

    /// One line of the server's log. Its sentences quote what peers sent (user names,
    /// error strings, refusals' reasons), so control characters are escaped here, once,
    /// for every observer.
    fn log(&self, msg: &str) {
        self.tell(Event::ServerLog(&escape_controls(msg, Lines::One)));
    }

    fn banner(&self) {
        self.tell(Event::Listening {
            port: self.local.port(),
            test: self.tests_done.load(Ordering::Relaxed) + 1,
        });
    }

    /// Whether this server was told to stop by a signal.
    fn signalled(&self) -> bool {
        self.on_signals.load(Ordering::Relaxed) && sock::stop_signal().is_some()
    }

    /// Count a test that ended and write its audit line.
    fn record(&self, entry: &audit::Entry, outcome: &audit::Outcome) {
        self.counters
            .record(outcome, entry.bytes_sent, entry.bytes_received);
        if let Some(a) = &self.audit
            && !entry.held
            && let Err(e) = a.write(&entry.line(outcome, self.now()))
        {
            self.log(&format!("cannot write the audit log: {e}"));
        }
    }

    /// Tell a client its test is refused, the way its iperf3 understands, log it, and
    /// record it (or only count it: `refusal_log` writes one line per source a period).
    fn refuse(&self, ctrl: Ctrl, entry: &mut audit::Entry, r: policy::Refusal) {
        self.refuse_saying(ctrl, entry, r, false);
    }

    /// As [`Shared::refuse`], and when `explain` (a netmeter client) the server's own
    /// sentence after the answer (`wire::ExtNote`).
    fn refuse_saying(
        &self,
        mut ctrl: Ctrl,
        entry: &mut audit::Entry,
        r: policy::Refusal,
        explain: bool,
    ) {
        tell_refusal(&mut ctrl, &r);
        if explain {
            let note = wire::ExtNote {
                message: r.message.clone(),
            };
            let _ = ctrl.send_json(&note, "the reason");
        }
        self.log_refusal(entry, &r);
        ctrl.close_gracefully(Duration::from_millis(200));
        entry.refused = Some(r);
    }

    /// The log line of a refusal, unless `refusal_log` holds it back for its source's
    /// summary (then `entry.held` keeps its audit line back too).
    fn log_refusal(&self, entry: &mut audit::Entry, r: &policy::Refusal) {
        entry.held = self.refusal_verdict(entry.peer.ip(), r.reason) == Verdict::Hold;
        if !entry.held {
            self.log(&format!(
                "refused a test from {}: {}",
                entry.peer, r.message
            ));
        }
    }

    /// Ask the refusal table whether this refusal's lines are written; write the
    /// summary of the period it closes.
    fn refusal_verdict(&self, ip: IpAddr, reason: policy::Reason) -> Verdict {
        let (verdict, closed) = match self.refusals.lock() {
            Ok(mut t) => t.note(canon(ip), reason, self.now()),
            Err(_) => (Verdict::Write, None),
        };
        if let Some(s) = closed {
            self.write_summary(&s);
        }
        verdict
    }

    /// One log line and one audit line for the refusals a period held back.
    fn write_summary(&self, s: &refusal_log::Summary) {
        self.log(&s.sentence());
        if let Some(a) = &self.audit
            && let Err(e) = a.write(&audit::summary_line(s, self.cfg.clock.wall(), self.now()))
        {
            self.log(&format!("cannot write the audit log: {e}"));
        }
    }

    /// Between connections: reopen the audit log after SIGHUP, and write the summaries
    /// of refusal periods that are over.
    fn housekeeping(&self) {
        if self.on_signals.load(Ordering::Relaxed)
            && sock::take_hangup()
            && let Some(a) = &self.audit
        {
            match a.reopen() {
                Ok(()) => self.log("reopened the audit log (SIGHUP)"),
                Err(e) => self.log(&format!("cannot reopen the audit log: {e}")),
            }
        }
        let due = match self.refusals.lock() {
            Ok(mut t) => t.due(self.now()),
            Err(_) => Vec::new(),
        };
        for s in &due {
            self.write_summary(s);
        }
    }

    /// The server stops: the counts still held back are written now.
    fn flush_refusals(&self) {
        let held = match self.refusals.lock() {
            Ok(mut t) => t.drain(),
            Err(_) => Vec::new(),
        };
        for s in &held {
            self.write_summary(s);
        }
    }

    fn touch(&self) {
        if let Ok(mut t) = self.last_activity.lock() {
            *t = self.now();
        }
    }
}

/// The iperf3 rendering of the server's own events.
fn server_renderer(cfg: &ServerConfig, sink: Sink) -> Renderer {
    let ctx = TextCtx {
        bounceback: false,
        connect_only: false,
        histogram_bin_ms: None,
        format: cfg.format,
        protocol: Protocol::Tcp,
        bidir: false,
        client: false,
        verbose: cfg.verbose,
        title: None,
    };
    Renderer::new(cfg.mode, sink, ctx)
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

/// Send a refused client its answer: `SERVER_ERROR` with the code, or `ACCESS_DENIED`.
fn tell_refusal(ctrl: &mut Ctrl, r: &policy::Refusal) {
    let _ = match r.answer {
        policy::Answer::Error(code) => ctrl.write(&wire::encode_server_error(code, 0), "error"),
        policy::Answer::Busy => ctrl.send_state(wire::State::AccessDenied),
    };
}

/// A running server's listeners, ready to serve.
pub struct Server {
    shared: Arc<Shared>,
    tcp: TcpListener,
    udp: UdpSocket,
    metrics: Option<TcpListener>,
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
        let audit = match &cfg.audit_log {
            Some(t) => Some(audit::AuditLog::open(t).map_err(|e| {
                TestError::io_while(format!("cannot open the audit log {}", t.path.display()), e)
            })?),
            None => None,
        };
        let metrics = match cfg.metrics {
            Some(a) => Some(
                metrics::bind(a)
                    .map_err(|e| TestError::io_while(format!("cannot serve metrics on {a}"), e))?,
            ),
            None => None,
        };
        let rate_gate = cfg
            .policy
            .conn_rate
            .map(|r| Mutex::new(policy::RateGate::new(r)));
        let mptcp = tcp.protocol().ok().flatten() == Some(socket2::Protocol::MPTCP);
        let tcp: TcpListener = tcp.into();
        let udp: UdpSocket = udp.into();
        let local = tcp.local_addr()?;
        let started = cfg.clock.now();
        Ok(Server {
            shared: Arc::new(Shared {
                events: Mutex::new(Box::new(server_renderer(&cfg, sink.clone()))),
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
                last_activity: Mutex::new(started),
                mptcp,
                rate_gate,
                source_slots: Mutex::new(policy::SourceSlots::default()),
                audit,
                refusals: Default::default(),
                counters: Default::default(),
                sessions_live: AtomicUsize::new(0),
                running: Mutex::new(HashMap::new()),
                iperf2: Default::default(),
            }),
            tcp,
            udp,
            metrics,
        })
    }

    /// End `serve` on SIGINT or SIGTERM (`sock::catch_stop_signals`): a running test
    /// sends its client `SERVER_TERMINATE` and prints its partial summary, and `serve`
    /// returns [`Stopped::ServerInterrupted`]. SIGHUP (`sock::catch_hangup`) reopens the
    /// audit log instead.
    pub fn stop_on_signals(self) -> Server {
        self.shared.on_signals.store(true, Ordering::Relaxed);
        self
    }

    /// Tell `obs` about the server itself (listening, log lines) instead of printing
    /// them; each test's own output still goes to the sink given to [`Server::bind`].
    pub fn observed_by(self, obs: Box<dyn Observer + Send>) -> Server {
        if let Ok(mut o) = self.shared.events.lock() {
            *o = obs;
        }
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
        let metrics_thread = match self.metrics {
            Some(l) => {
                let (c, stop) = (shared.counters.clone(), shared.shutdown.clone());
                let clock = shared.cfg.clock.clone();
                Some(
                    std::thread::Builder::new()
                        .name("nm-metrics".into())
                        .spawn(move || metrics::serve(l, c, stop, clock))?,
                )
            }
            None => None,
        };
        let mut sessions: Vec<std::thread::JoinHandle<()>> = Vec::new();
        let one_off_done = Arc::new(AtomicBool::new(false));
        let listener = self.tcp.as_fd();
        let mut door = door::Door::new(shared.clone());
        // `accept` failing (out of descriptors) repeats every turn while it lasts: one log
        // line a second, with how many failed since the last.
        let mut accept_failures: (Option<Instant>, u64) = (None, 0);
        // Connect-only tests' acceptors share the listener (see `connect::Hub`); it is
        // non-blocking so that a thread losing the race for a connection just waits on.
        self.tcp.set_nonblocking(true)?;
        shared.connect_hub.set_listener(self.tcp.try_clone()?);
        while !shared.shutdown.load(Ordering::Relaxed) && !one_off_done.load(Ordering::Relaxed) {
            if shared.signalled() {
                break;
            }
            shared.housekeeping();
            sessions.retain(|h| !h.is_finished());
            if let Some(idle) = shared.cfg.idle_timeout {
                let since = shared
                    .last_activity
                    .lock()
                    .map(|t| shared.now().saturating_duration_since(*t))
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
            let now = shared.now();
            door.expire(now);
            let mut done: Vec<door::Ready> = Vec::new();
            // While a connect-only test accepts in our place, take what it hands back.
            while let Some((conn, peer)) = shared.connect_hub.handed_back(Duration::ZERO) {
                let seq = shared.accept_seq.fetch_add(1, Ordering::Relaxed);
                done.extend(door.accepted(conn, peer, seq, now));
            }
            let hub = shared.connect_hub.accepting();
            let wait = Duration::from_millis(if hub { 20 } else { 100 });
            let (listener_ready, readable) =
                door.poll((!hub).then_some(listener), wait, shared.now())?;
            let now = shared.now();
            for id in readable {
                done.extend(door.readable(id, now));
            }
            for _ in 0..ACCEPT_BATCH {
                if !listener_ready {
                    break;
                }
                let (conn, peer) = match self.tcp.accept() {
                    Ok(c) => c,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => {
                        // Out of descriptors, most likely: the door's budget frees some
                        // as deadlines pass.
                        accept_failures.1 += 1;
                        if accept_failures
                            .0
                            .is_none_or(|t| now.duration_since(t) >= ACCEPT_LOG_EVERY)
                        {
                            shared.log(&format!(
                                "accept failed: {e} ({} time(s) since the last such line)",
                                accept_failures.1
                            ));
                            accept_failures = (Some(now), 0);
                        }
                        std::thread::sleep(Duration::from_millis(10));
                        break;
                    }
                };
                // A connect-only test's short connection whose cookie is already in is
                // answered here; anything else goes through the door.
                let Some(conn) = shared.connect_hub.answer_now(conn) else {
                    continue;
                };
                let seq = shared.accept_seq.fetch_add(1, Ordering::Relaxed);
                done.extend(door.accepted(conn, peer, seq, now));
            }
            for ready in done {
                let s = shared.clone();
                let finished = one_off_done.clone();
                let peer = ready.peer;
                let live = LiveSession::new(&shared, peer.ip());
                let h = std::thread::Builder::new()
                    .name("nm-session".into())
                    .spawn(move || {
                        let _live = live;
                        if handle_session(&s, ready) && s.cfg.one_off {
                            finished.store(true, Ordering::Relaxed);
                        }
                    });
                match h {
                    Ok(h) => sessions.push(h),
                    Err(e) => {
                        shared.log(&format!("cannot start a thread for {}: {e}", shown(peer)))
                    }
                }
            }
        }
        // Running sessions notice a signal at their next wait and end their tests.
        for h in sessions {
            let _ = h.join();
        }
        shared.shutdown.store(true, Ordering::Relaxed);
        shared.flush_refusals();
        let _ = udp_thread.join();
        if let Some(t) = metrics_thread {
            let _ = t.join();
        }
        if shared.signalled() {
            return Err(Stopped::server_interrupted().into());
        }
        Ok(())
    }
}

/// Run the session of a connection whose handshake is complete. Returns true when it
/// was a test session (for `-1`).
fn handle_session(shared: &Arc<Shared>, ready: door::Ready) -> bool {
    let peer = ready.peer;
    let mut entry = audit::Entry::begun(shown(peer), shared.now(), shared.cfg.clock.wall());
    let id = shared.next_session.fetch_add(1, Ordering::Relaxed);
    let r = session::Session::run(shared, ready, id, &mut entry);
    let outcome = audit::Outcome::of(&r, entry.refused.take());
    if let Some(o) = &outcome {
        shared.record(&entry, o);
    }
    match r {
        Ok(true) => {
            shared.tests_done.fetch_add(1, Ordering::Relaxed);
            if !shared.cfg.one_off && shared.cfg.policy.max_tests == 1 {
                shared.banner();
            }
            true
        }
        Ok(false) => false,
        Err(e) => {
            match (&e, e.stopped()) {
                // Refused on its parameters (policy limits, or a test this server cannot run).
                (TestError::Refused(se), _) => shared.log(&format!(
                    "refused a test from {}: {}",
                    shown(peer),
                    se.message
                )),
                // One line: the test was stopped on purpose, not failed.
                (_, Some(why)) => shared.log(&format!("test from {} stopped: {why}", shown(peer))),
                // The one line for a failed test (the session's output does not repeat it).
                (_, None) => shared.log(&format!(
                    "test from {} ended with an error: {e:#}",
                    shown(peer)
                )),
            }
            shared.tests_done.fetch_add(1, Ordering::Relaxed);
            if !shared.cfg.one_off && shared.cfg.policy.max_tests == 1 && !shared.signalled() {
                shared.banner();
            }
            true
        }
    }
}

fn udp_accept_loop(shared: &Arc<Shared>, listener: UdpSocket) {
    let _ = listener.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = vec![0u8; 65536];
    let mut iperf2 = iperf2::udp::UdpDoor::default();
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
        let cookie = wire::udp_connect_cookie(&buf[..n]);
        let tx = {
            let Ok(mut ws) = shared.udp_waiters.lock() else {
                continue;
            };
            let Some(w) = ws
                .iter_mut()
                .find(|w| w.wants(from, from_ip, cookie.as_ref()))
            else {
                // Not an iperf3 test's: an iperf 2 UDP test's, or dropped and counted.
                // A netmeter connect datagram (a late copy) is never iperf 2's.
                if cookie.is_none() && iperf2.offer(shared, &buf[..n], from) {
                    continue;
                }
                if shared.cfg.verbose {
                    shared.log(&format!(
                        "ignored a UDP datagram from {from}: no test expects it"
                    ));
                }
                continue;
            };
            w.remaining -= 1;
            w.sources.push(from);
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
    use crate::clock::ManualClock;
    use std::sync::mpsc;

    /// Keeps the server's log lines.
    struct Log(Arc<Mutex<Vec<String>>>);

    impl Observer for Log {
        fn on(&mut self, event: Event<'_>) {
            if let (Event::ServerLog(line), Ok(mut l)) = (event, self.0.lock()) {
                l.push(line.to_string());
            }
        }
    }

    fn one_off_config(clock: ManualClock, idle: Duration) -> ServerConfig {
        ServerConfig {
            port: 0,
            bind: Some([127, 0, 0, 1].into()),
            family: Family::V4,
            one_off: true,
            policy: Default::default(),
            audit_log: None,
            metrics: None,
            idle_timeout: Some(idle),
            mode: Mode::Text,
            verbose: false,
            format: Default::default(),
            interval_s: 1.0,
            histograms: None,
            auth: None,
            psk: None,
            third_party: None,
            side: Default::default(),
            clock: Arc::new(clock),
            iperf2_layout: None,
        }
    }

    fn waiter(session: u64, cookie: Option<[u8; wire::COOKIE_LEN]>) -> UdpWaiter {
        UdpWaiter {
            session,
            peer_ip: [127, 0, 0, 1].into(),
            cookie,
            remaining: 2,
            sources: Vec::new(),
            tx: mpsc::channel().0,
        }
    }

    /// Two tests from one address wait for their UDP streams at once: a connect
    /// datagram goes to the test whose cookie it carries, not to the first waiting (as
    /// a match by address did, swapping the streams); iperf3's 4 bytes go only to a
    /// test that did not agree to cookies; a repeated datagram is not a new stream.
    #[test]
    fn a_udp_stream_goes_to_the_test_whose_cookie_it_carries() {
        let (a, b) = ([b'a'; wire::COOKIE_LEN], [b'b'; wire::COOKIE_LEN]);
        let mut ws = [waiter(1, Some(a)), waiter(2, Some(b)), waiter(3, None)];
        let ip: IpAddr = [127, 0, 0, 1].into();
        let from: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let pick = |ws: &[UdpWaiter], c: Option<&[u8; wire::COOKIE_LEN]>| {
            ws.iter().find(|w| w.wants(from, ip, c)).map(|w| w.session)
        };
        assert_eq!(pick(&ws, Some(&b)), Some(2));
        assert_eq!(pick(&ws, Some(&a)), Some(1));
        assert_eq!(pick(&ws, None), Some(3));
        assert_eq!(pick(&ws, Some(&[b'c'; wire::COOKIE_LEN])), None);
        ws[1].sources.push(from);
        assert_eq!(pick(&ws, Some(&b)), None);
        ws[2].remaining = 0;
        assert_eq!(pick(&ws, None), None);
        let other: IpAddr = [127, 0, 0, 2].into();
        assert!(!ws[0].wants(from, other, None));
    }

    /// `-1 --idle-timeout 60` counts the idle minute on the server's clock: once that
    /// clock has moved past it, the server leaves at its next turn, with no minute of
    /// real time spent (on the host's clock it would wait the whole minute).
    #[test]
    fn an_idle_one_off_server_leaves_when_its_own_clock_passes_the_timeout() {
        let clock = ManualClock::at_unix(1_700_000_000);
        let cfg = one_off_config(clock.clone(), Duration::from_secs(60));
        let sink = super::super::output::sink(Box::new(std::io::sink()));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let server = Server::bind(cfg, sink, Arc::new(AtomicBool::new(false)))
            .unwrap()
            .observed_by(Box::new(Log(lines.clone())));
        clock.advance(Duration::from_secs(61));
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(server.serve().is_ok());
        });
        // 30 s only bounds a failure: the server leaves at its first turn.
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(true));
        let lines = lines.lock().unwrap();
        assert!(
            lines
                .iter()
                .any(|l| l.contains("idle for 60 s; exiting (--idle-timeout)")),
            "{lines:?}"
        );
    }
    /// Wait (bounded, for a failure only) until a log line contains `what`.
    fn wait_line(lines: &Mutex<Vec<String>>, what: &str) {
        let until = crate::clock::mono_now() + Duration::from_secs(30);
        while !lines.lock().unwrap().iter().any(|l| l.contains(what)) {
            assert!(
                crate::clock::mono_now() < until,
                "no line with {what:?}: {:?}",
                lines.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// An iperf 2 test's deadline is kept on the server's clock: a `-t 1000` test ends
    /// ("ended after") once that clock has moved past its time and grace, with no real
    /// second of it spent (on the host's clock it would run 17 minutes).
    #[test]
    fn an_iperf2_test_ends_when_the_servers_own_clock_passes_its_deadline() {
        use crate::wire::iperf2::{Amount, ClientHdr, HDR_ACK_LEN};
        use std::io::{Read, Write};
        let clock = ManualClock::at_unix(1_700_000_000);
        let mut cfg = one_off_config(clock.clone(), Duration::from_secs(3600));
        cfg.one_off = false;
        let sink = super::super::output::sink(Box::new(std::io::sink()));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let server = Server::bind(cfg, sink, stop.clone())
            .unwrap()
            .observed_by(Box::new(Log(lines.clone())));
        let port = server.port();
        let serving = std::thread::spawn(move || server.serve().is_ok());
        let hdr = ClientHdr {
            udp: false,
            threads: 1,
            port,
            buf_len: 0,
            amount: Amount::TimeCentis(100_000),
            rate_bps: 0,
            tos: 0,
            flags: 0,
            upper: 0,
            start: None,
        };
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.write_all(&hdr.encode()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut ack = [0u8; HDR_ACK_LEN];
        c.read_exact(&mut ack).unwrap();
        wait_line(&lines, "iperf 2 test from");
        c.write_all(&[0u8; 1000]).unwrap();
        clock.advance(Duration::from_secs(1000) + policy::TEST_GRACE + Duration::from_secs(1));
        wait_line(&lines, "ended after 1040 s");
        stop.store(true, Ordering::Relaxed);
        drop(c);
        assert!(serving.join().unwrap());
    }
}
