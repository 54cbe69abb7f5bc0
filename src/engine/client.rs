//! The client: connects, negotiates, opens the data streams, decides when the test
//! ends, and prints the merged report.

use super::CTRL_TIMEOUT;
use super::clock;
use super::connect;
use super::ctrl::{Ctrl, CtrlError};
use super::meter::{Meter, receiver_end_s};
use super::output::{Mode, Output, Renderer, Sink};
use super::stream::{self, Budget, StreamShared, Worker};
use super::test_common;
use super::{Stopped, TestError};
use crate::clocksync::ClockEstimate;
use crate::report::build;
use crate::report::observe::{Event, Observer};
use crate::report::text::{self, TextCtx};
use crate::report::{Connected, HostPort, Report, StartExt, Timestamp};
use crate::session::{ClientFailure, ClientMachine, ClientStep};
use crate::sock;
use crate::spec::{Direction, EndCondition, Protocol, TestSpec};
use crate::stats::{UdpRecv, cpu_percent};
use crate::units::Format;
use crate::wire::{self, Cookie, ExtAnswer, Feature, Results, State};
use socket2::{Domain, SockAddr, Socket, Type};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Address family restriction (`-4` / `-6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Any,
    V4,
    V6,
}

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
    /// This side's own options (`test_common::SideOpts`).
    pub side: test_common::SideOpts,
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

fn connect_tcp(
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

/// End-of-test drain: receivers keep counting until the stream has been idle this long…
pub const DRAIN_IDLE: Duration = Duration::from_millis(50);
/// …but never longer than this after the senders stopped.
pub const DRAIN_MAX: Duration = Duration::from_secs(1);

/// How many UDP connect attempts, and how long to wait for each reply.
const UDP_CONNECT_WAITS_MS: [u64; 6] = [1000, 1000, 2000, 2000, 3000, 3000];

fn connect_udp(
    cfg: &ClientConfig,
    server: &SocketAddr,
    spec: &TestSpec,
    port: u16,
) -> Result<UdpSocket, TestError> {
    let s = new_socket(server, Type::DGRAM)?;
    bind_local(&s, cfg, server, port)?;
    test_common::apply_sock_opts(&s, spec, &cfg.side, server.is_ipv6())?;
    if spec.window.is_none() {
        // Room for a burst of datagrams at high rates (capped by net.core.[rw]mem_max).
        let _ = s.set_recv_buffer_size(4 << 20);
        let _ = s.set_send_buffer_size(4 << 20);
    }
    let to = test_common::data_peer(&s, spec, *server)?;
    s.connect(&SockAddr::from(to))
        .map_err(|e| TestError::io_while(format!("cannot open a UDP stream to {server}"), e))?;
    let sock: UdpSocket = s.into();
    let mut buf = vec![0u8; 65536];
    for wait_ms in UDP_CONNECT_WAITS_MS {
        // iperf3 sends this once and waits 30 s; a lost datagram then hangs the test.
        // netmeter repeats it; the server answers every copy.
        let _ = sock.send(&wire::UDP_CONNECT_MSG);
        let deadline = Instant::now() + Duration::from_millis(wait_ms);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
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

fn host_text(ip: IpAddr) -> String {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(|v4| v4.to_string())
            .unwrap_or_else(|| v6.to_string()),
        v4 => v4.to_string(),
    }
}

/// A `start.connected` entry for a socket.
pub fn connected_entry(fd: i64, local: SocketAddr, remote: SocketAddr) -> Connected {
    Connected {
        socket: fd,
        local_host: host_text(local.ip()),
        local_port: local.port(),
        remote_host: host_text(remote.ip()),
        remote_port: remote.port(),
    }
}

/// `start.timestamp` for now.
pub fn timestamp_now() -> Timestamp {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp {
        time: httpdate(d.as_secs()),
        timesecs: d.as_secs(),
        timemillisecs: d.as_millis() as u64,
    }
}

/// RFC 1123 date in GMT, as iperf3 writes `start.timestamp.time`.
pub(crate) fn httpdate(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs / 86400;
    let rem = secs % 86400;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        d,
        MONTHS[(m - 1) as usize],
        y,
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// A side's own figures at the end of a test ([`LiveStreams::final_figures`]).
pub struct FinalFigures {
    pub locals: Vec<build::LocalFinal>,
    /// CPU percent of one core: total, user, system.
    pub cpu: (f64, f64, f64),
    pub congestion: Option<String>,
}

/// Live data streams of one test, with the sockets kept open until the end so that
/// their descriptors (used for TCP_INFO) cannot be reused under us.
#[derive(Default)]
pub struct LiveStreams {
    pub shared: Vec<Arc<StreamShared>>,
    pub handles: Vec<(bool, JoinHandle<()>)>,
    /// The TCP sockets, in the order of `shared` (both are pushed per stream). Shared
    /// with the streams' `StreamShared::tcp` (weakly) for TCP_INFO.
    pub keep_tcp: Vec<Arc<TcpStream>>,
    pub keep_udp: Vec<UdpSocket>,
    pub stop_send: Arc<AtomicBool>,
    pub stop_recv: Arc<AtomicBool>,
}

/// A test that ends early (an error, a vanished peer) still stops and joins its
/// threads: none outlives its test, blocked on a socket nobody reads.
impl Drop for LiveStreams {
    fn drop(&mut self) {
        self.stop(true, true);
    }
}

impl LiveStreams {
    /// Tell the sending threads to stop, without waiting for them: a paced sender
    /// asleep until its next block (up to `STOP_POLL`) must not delay `TEST_END`.
    pub fn signal_senders(&self) {
        self.stop_send.store(true, Ordering::Relaxed);
    }

    /// Stop and join the sending threads, then the receiving ones.
    pub fn stop(&mut self, senders_too: bool, receivers_too: bool) {
        if senders_too {
            self.signal_senders();
        }
        if receivers_too {
            self.stop_recv.store(true, Ordering::Relaxed);
        }
        // Wake threads blocked in a read without a timeout (request/response streams):
        // a socket shut down for reading returns end-of-file at once. Nothing is sent.
        let stopping =
            |sh: &StreamShared| (sh.sender && senders_too) || (!sh.sender && receivers_too);
        for (s, sh) in self.keep_tcp.iter().zip(&self.shared) {
            if stopping(sh) {
                let _ = s.shutdown(std::net::Shutdown::Read);
            }
        }
        for (s, sh) in self.keep_udp.iter().zip(&self.shared) {
            if stopping(sh) {
                let _ = socket2::SockRef::from(s).shutdown(std::net::Shutdown::Read);
            }
        }
        let mut keep = Vec::new();
        for (sender, h) in self.handles.drain(..) {
            if (sender && senders_too) || (!sender && receivers_too) {
                let _ = h.join();
            } else {
                keep.push((sender, h));
            }
        }
        self.handles = keep;
    }

    /// Once the senders were told to stop, keep the receivers reading until nothing has
    /// arrived for `idle` (at most `max`), so data still in flight when the test ended
    /// is counted instead of being mistaken for loss. Returns when data last arrived
    /// during the drain, in seconds since `t0` (to the 2 ms poll), or `None` if none
    /// did: the wait itself is not test time (`meter::receiver_end_s`).
    pub fn drain_receivers(&mut self, t0: Instant, idle: Duration, max: Duration) -> Option<f64> {
        let receivers: Vec<Arc<StreamShared>> =
            self.shared.iter().filter(|s| !s.sender).cloned().collect();
        if receivers.is_empty() {
            return None;
        }
        let total = || -> u64 {
            receivers
                .iter()
                .map(|s| s.bytes.load(Ordering::Relaxed))
                .sum()
        };
        let start = Instant::now();
        let (mut last, mut arrived) = (total(), None::<Instant>);
        loop {
            std::thread::sleep(Duration::from_millis(2));
            let now = total();
            if now != last {
                (last, arrived) = (now, Some(Instant::now()));
            }
            let all_done = receivers.iter().all(|s| s.finished.load(Ordering::Acquire));
            let quiet = arrived.unwrap_or(start).elapsed() >= idle;
            if all_done || quiet || start.elapsed() >= max {
                break;
            }
        }
        self.stop(false, true);
        arrived.map(|a| a.duration_since(t0).as_secs_f64())
    }

    /// What this side measured, once its streams have stopped (both sides end every
    /// test, whole or interrupted, this way): the last, partial interval when it is worth
    /// a row (`intervals`: rows are reported at all), this side's final figures with the
    /// kernel's drop counts, the process's CPU over the test and the congestion control.
    #[allow(clippy::too_many_arguments)]
    pub fn final_figures<O: Observer + ?Sized>(
        &self,
        meter: &mut Meter,
        out: &mut Output<'_, O>,
        intervals: bool,
        interval_s: f64,
        send_end_s: f64,
        recv_end_s: f64,
        cpu_start: crate::stats::CpuSample,
        origin: Instant,
    ) -> FinalFigures {
        if intervals && meter.worth_reporting(recv_end_s, interval_s) && !meter.omitting() {
            let iv = meter.tick(recv_end_s);
            out.interval(iv);
        }
        let mut locals = meter.finals(send_end_s, recv_end_s);
        self.record_host_drops(&mut locals);
        FinalFigures {
            locals,
            cpu: cpu_percent(cpu_start, sock::cpu_sample(origin)),
            congestion: self
                .keep_tcp
                .first()
                .and_then(|s| sock::congestion(s.as_fd())),
        }
    }

    /// Read each UDP receiver's kernel drop counter into its final figures.
    pub fn record_host_drops(&self, locals: &mut [build::LocalFinal]) {
        for l in locals.iter_mut().filter(|l| !l.sender) {
            if let Some(s) = self
                .keep_udp
                .iter()
                .find(|s| sock::socket_number(s) == l.socket)
            {
                l.host_drops = sock::socket_drops(s.as_fd());
            }
        }
        for l in locals.iter_mut().filter(|l| l.sender) {
            if let Some(s) = self.shared.iter().find(|s| s.socket == l.socket) {
                let sends = s.zc_sends.load(Ordering::Relaxed);
                if sends > 0 {
                    l.zerocopy = Some((sends, s.zc_copied.load(Ordering::Relaxed)));
                }
            }
        }
    }

    /// First error reported by any stream thread.
    pub fn first_error(&self) -> Option<String> {
        self.shared
            .iter()
            .find_map(|s| s.error.lock().ok().and_then(|g| g.clone()))
    }
}

/// Prepare per-stream state and the data threads' common settings.
#[allow(clippy::too_many_arguments)]
pub fn make_worker(
    spec: &TestSpec,
    id: i64,
    socket: i64,
    tcp: Weak<TcpStream>,
    sender: bool,
    forward: bool,
    live: &LiveStreams,
    payload: &Arc<Vec<u8>>,
    budget: &Option<Arc<Budget>>,
    zerocopy: &Option<Arc<std::fs::File>>,
) -> Worker {
    // Stream ids are 1, 3, 4, ... in creation order (iperf3 skips 2).
    let index = if id == 1 { 0 } else { (id - 2) as u32 };
    // With --working-load only the last stream is a request/response probe.
    let bounce = match spec.working_load {
        Some(_) if !spec.is_probe(index) => None,
        _ => spec.bounceback,
    };
    let shared = Arc::new(StreamShared {
        id,
        socket,
        tcp,
        sender,
        forward,
        bytes: Default::default(),
        packets: Default::default(),
        udp: (spec.protocol == Protocol::Udp && !sender && spec.bounceback.is_none())
            .then(|| Mutex::new(UdpRecv::default())),
        rtt: (bounce.is_some() && sender).then(|| Mutex::new(Default::default())),
        owd: (spec.trip_times && !sender && spec.bounceback.is_none() && !spec.skip_rx_copy)
            .then(|| Mutex::new(Default::default())),
        conn: (spec.connect_only && sender).then(|| Mutex::new(Default::default())),
        profile: (spec.profile.is_some() && sender && forward).then(|| {
            Mutex::new(super::profile::ProfileRecord {
                frames: spec.profile.is_some_and(|p| p.isochronous().is_some()),
                ..Default::default()
            })
        }),
        frames: (spec.profile.is_some_and(|p| p.framed())
            && spec.protocol == Protocol::Udp
            && !sender
            && forward)
            .then(|| Mutex::new(super::profile::FrameRecord::new(spec.trip_times))),
        zc_sends: AtomicU64::new(0),
        zc_copied: AtomicU64::new(0),
        finished: AtomicBool::new(false),
        error: Mutex::new(None),
    });
    Worker {
        shared,
        stop: if sender {
            live.stop_send.clone()
        } else {
            live.stop_recv.clone()
        },
        block_len: spec.block_len,
        rate_bps: spec.rate_bps,
        burst: spec.burst,
        budget: if sender { budget.clone() } else { None },
        payload: payload.clone(),
        udp_seq64: spec.udp_seq64,
        zerocopy: if sender { zerocopy.clone() } else { None },
        skip_rx_copy: spec.skip_rx_copy && !sender,
        caps: sock::Capabilities::default(),
        bounceback: bounce,
        ts_ns: spec.trip_times,
        owd_correction_ns: 0,
        load_start: None,
        file: None,
        profile: spec.profile.filter(|_| sender && forward),
        profile_origin: None,
        profile_end: None,
    }
}

/// With `--working-load`: when the bulk streams start (after the idle phase).
pub fn load_start(spec: &TestSpec, t0: Instant) -> Option<Instant> {
    spec.working_load
        .map(|w| t0 + Duration::from_millis(w.idle_ms as u64))
}

/// Probe the stream's socket for what its data loop can use, as far as the test allows
/// it, and record what was granted in `w.caps` (for the loop, the JSON record and `-V`):
/// - UDP bulk streams: GSO when sending (unless `--no-gso`; carried to the server in the
///   extension request), GRO and kernel receive timestamps when receiving (GRO unless
///   `--no-gro`). Request/response and profiled datagrams stay single datagrams.
/// - `-Z` TCP senders: `MSG_ZEROCOPY` where the socket accepts SO_ZEROCOPY (it measured
///   faster than `sendfile` here, docs/benchmarks.md), else `sendfile`.
///   `NETMETER_ZEROCOPY=sendfile` forces `sendfile`.
/// - Request/response streams with `--busy-poll`: SO_BUSY_POLL.
pub fn probe_capabilities(w: &mut Worker, spec: &TestSpec, fd: BorrowedFd<'_>) {
    let sender = w.shared.sender;
    let mut want = sock::Wanted {
        busy_poll_us: w.bounceback.map(|b| b.busy_poll_us).filter(|&us| us > 0),
        ..Default::default()
    };
    match spec.protocol {
        Protocol::Udp if w.bounceback.is_none() && w.profile.is_none() => {
            let len = w.block_len;
            if sender {
                want.gso_segment = (!spec.no_gso && stream::gso_segments(len) > 1)
                    .then(|| u16::try_from(len).ok())
                    .flatten();
            } else {
                want.gro = !spec.no_gro;
            }
        }
        Protocol::Udp => {}
        Protocol::Tcp => {
            let forced_sendfile =
                std::env::var_os("NETMETER_ZEROCOPY").is_some_and(|v| v == "sendfile");
            want.msg_zerocopy = w.zerocopy.is_some() && sender && !forced_sendfile;
        }
    }
    // The bulk UDP receive loop (`stream::udp_recv`) is the one that reads the stamps.
    want.rx_timestamps = spec.protocol == Protocol::Udp
        && !sender
        && w.bounceback.is_none()
        && w.shared.udp.is_some();
    w.caps = sock::Capabilities::probe(fd, &want);
}

/// What this side's UDP streams do about segmentation offload, for the `-V` text.
pub fn udp_offload_note(spec: &TestSpec, workers: &[&Worker]) -> Option<text::UdpOffloadNote> {
    if spec.protocol != Protocol::Udp {
        return None;
    }
    let why_not = |used: bool, refused: bool| match () {
        _ if used => text::Offload::On,
        _ if spec.bounceback.is_some() || spec.profile.is_some() => text::Offload::OneByOne,
        _ if refused => text::Offload::Refused,
        _ => text::Offload::Unavailable,
    };
    let senders: Vec<_> = workers.iter().filter(|w| w.shared.sender).collect();
    let receivers: Vec<_> = workers.iter().filter(|w| !w.shared.sender).collect();
    let len = spec.block_len.max(wire::UdpHeader::len(spec.udp_seq64));
    Some(text::UdpOffloadNote {
        datagram_len: len,
        batch: stream::UDP_BATCH,
        gso: (!senders.is_empty()).then(|| {
            let on = senders.iter().any(|w| w.caps.gso);
            (
                why_not(on, spec.no_gso),
                if on { stream::gso_segments(len) } else { 1 },
            )
        }),
        gro: (!receivers.is_empty())
            .then(|| why_not(receivers.iter().any(|w| w.caps.gro), spec.no_gro)),
    })
}

/// The budget shared by a direction's senders in `-n` / `-k` tests.
pub fn budget_for(spec: &TestSpec) -> Option<Arc<Budget>> {
    match spec.end {
        EndCondition::Time(_) => None,
        EndCondition::Bytes(n) => Some(Arc::new(Budget {
            remaining: AtomicI64::new(n.min(i64::MAX as u64) as i64),
            blocks: false,
        })),
        EndCondition::Blocks(k) => Some(Arc::new(Budget {
            remaining: AtomicI64::new(k.min(i64::MAX as u64) as i64),
            blocks: true,
        })),
    }
}

/// A control failure as the client reports it: a stop signal during a wait is the
/// user's interrupt, not a failure.
fn ctrl_err(e: CtrlError) -> TestError {
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
    let mut out = Output::new(obs);
    out.report.title = cfg.spec.title.clone();
    out.report.extra_data = cfg.spec.extra_data.clone();
    let result = run_inner(cfg, &mut out);
    // An interrupted test recorded its error before its partial summary (iperf3's
    // order in --json-stream: the error event, then the end event).
    if let Err(e) = &result
        && out.report.error.is_none()
    {
        out.error(&format!("{e:#}"));
    }
    out.finish();
    result.map(|_| out.report)
}

fn run_inner(cfg: &ClientConfig, out: &mut Output) -> Result<(), TestError> {
    let origin = Instant::now();
    if let Some(cpu) = cfg.affinity {
        // Threads started from here on (all data threads) inherit the mask.
        sock::pin_to_cpu(cpu as usize)
            .map_err(|e| TestError::io_while(format!("cannot pin to CPU {cpu} (-A)"), e))?;
    }
    let server = resolve(&cfg.host, cfg.port, cfg.family)?;
    if let Some(at) = cfg.txstart {
        super::profile::txstart_before_connect(at, out);
    }
    out.emit(Event::Connecting {
        host: &cfg.host,
        port: cfg.port,
    });
    let ctrl_sock = connect_tcp(cfg, &server, None, 0)?;
    let mut ctrl = Ctrl::new(ctrl_sock);
    ctrl.debug = cfg.side.debug.is_some();
    ctrl.stop_on_signal = true;
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

/// The control conversation, from the cookie to `IPERF_DONE`.
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

    // What this client asks for; the test it runs is derived from it once the server
    // has answered (`effective`) and neither changes afterwards.
    let asked = {
        let mut spec = cfg.spec.clone();
        if spec.protocol == Protocol::Udp && !cfg.len_given {
            // iperf3 sizes datagrams to the control connection's MSS, capped at 1460.
            spec.block_len = sock::tcp_mss(ctrl.sock.as_fd())
                .map(|m| (m as usize).min(wire::UDP_DEFAULT_LEN))
                .unwrap_or(wire::UDP_DEFAULT_LEN)
                .max(wire::UDP_MIN_LEN);
        }
        spec
    };
    let mss = sock::tcp_mss(ctrl.sock.as_fd());
    if asked.bounceback.is_some() && !cfg.extensions {
        return Err(TestError::Usage(
            "--bounceback needs netmeter's extensions (drop --no-extensions)",
        ));
    }
    let ext_req = cfg.extensions.then(|| asked.ext_request());
    let mut clock_est: Option<ClockEstimate> = None;
    let mut machine = ClientMachine::new(ext_req.as_ref());
    let mut effective: Option<TestSpec> = None;
    let mut profile_warnings: Vec<String> = Vec::new();

    let start = &mut out.report.start;
    start.version = format!("netmeter {}", env!("CARGO_PKG_VERSION"));
    start.system_info = sock::system_info();
    start.timestamp = timestamp_now();
    start.connecting_to = Some(HostPort {
        host: cfg.host.clone(),
        port: cfg.port,
    });
    start.cookie = cookie.as_text();
    if asked.protocol == Protocol::Tcp {
        match asked.mss {
            Some(m) => start.tcp_mss = Some(m),
            None => start.tcp_mss_default = mss,
        }
    }
    start.target_bitrate = asked.rate_bps;
    start.fq_rate = asked.fq_rate_bps.unwrap_or(0);
    start.sock_bufsize = asked.window.unwrap_or(0);

    let payload = Arc::new(stream::make_payload(
        asked.block_len,
        asked.repeating_payload,
    ));
    let zerocopy = if asked.zerocopy && asked.protocol == Protocol::Tcp {
        Some(Arc::new(test_common::zerocopy_file(&payload)?))
    } else {
        None
    };
    let budget = budget_for(&asked);
    let mut live = LiveStreams::default();
    let mut workers: Vec<(Worker, Option<TcpStream>, Option<UdpSocket>)> = Vec::new();
    let mut test_start: Option<Instant> = None;

    // Setup: everything up to TEST_RUNNING.
    loop {
        let st = ctrl
            .read_state(CTRL_TIMEOUT, "the server's next control message")
            .map_err(ctrl_err)?;
        let step = match machine.on_state(st) {
            Ok(s) => s,
            Err(ClientFailure::ServerTerminated) => return Err(Stopped::ServerTerminated.into()),
            Err(e) => return Err(e.into()),
        };
        match step {
            ClientStep::SendParams => ctrl
                .send_json(&asked.to_params(ext_req.clone()), "sending the parameters")
                .map_err(ctrl_err)?,
            ClientStep::ReadExtAnswer => {
                let a: ExtAnswer = ctrl
                    .read_json(wire::MAX_EXT_LEN, CTRL_TIMEOUT, "the extension answer")
                    .map_err(ctrl_err)?;
                if machine.on_ext_answer(&a).has(Feature::TripTimes) {
                    // The server waits for our clock probes before CREATE_STREAMS.
                    clock_est = Some(clock::sync_client(ctrl).map_err(ctrl_err)?);
                }
            }
            ClientStep::ReadServerError => return Err(server_error(ctrl)),
            ClientStep::CreateStreams => {
                let negotiated = machine.negotiated();
                if let Some(flag) = asked.unmet_need(negotiated) {
                    return Err(TestError::NeedsNetmeter {
                        flag,
                        host: cfg.host.clone(),
                    });
                }
                profile_warnings.extend(negotiated.client_warnings(&cfg.host));
                let spec: &TestSpec = effective.insert(asked.negotiated(negotiated));
                for w in &profile_warnings {
                    out.warning(w);
                }
                if let Some(at) = cfg.txstart {
                    super::profile::txstart_before_streams(
                        at,
                        ctrl.sock.as_fd(),
                        spec.total_streams(),
                    );
                }
                for i in 0..spec.total_streams() {
                    let id = if i == 0 { 1 } else { i as i64 + 2 };
                    let sender = spec.client_sends(i);
                    let cport = cfg.cport.map(|p| p.wrapping_add(i as u16)).unwrap_or(0);
                    let (fd, local, w) = match spec.protocol {
                        Protocol::Tcp => {
                            let mut s = connect_tcp(cfg, &server, Some(spec), cport)?;
                            std::io::Write::write_all(&mut s, &cookie.0).map_err(|e| {
                                TestError::io_while("cannot send the cookie on a data stream", e)
                            })?;
                            let s = Arc::new(s);
                            let fd = sock::socket_number(&s);
                            let local = s.local_addr()?;
                            let mut w = make_worker(
                                spec,
                                id,
                                fd,
                                Arc::downgrade(&s),
                                sender,
                                sender,
                                &live,
                                &payload,
                                &budget,
                                &zerocopy,
                            );
                            probe_capabilities(&mut w, spec, s.as_fd());
                            w.file = cfg.side.file.clone();
                            // The thread gets a duplicate; the original (TCP_INFO is read
                            // through it) stays open here until the test is over.
                            let for_thread = s.try_clone()?;
                            live.keep_tcp.push(s);
                            (fd, local, (w, Some(for_thread), None))
                        }
                        Protocol::Udp => {
                            let s = connect_udp(cfg, &server, spec, cport)?;
                            let fd = sock::socket_number(&s);
                            let local = s.local_addr()?;
                            let mut w = make_worker(
                                spec,
                                id,
                                fd,
                                Weak::new(),
                                sender,
                                sender,
                                &live,
                                &payload,
                                &budget,
                                &zerocopy,
                            );
                            probe_capabilities(&mut w, spec, s.as_fd());
                            let for_thread = s.try_clone()?;
                            live.keep_udp.push(s);
                            (fd, local, (w, None, Some(for_thread)))
                        }
                    };
                    let c = connected_entry(fd, local, server);
                    out.connected(c);
                    live.shared.push(w.0.shared.clone());
                    workers.push(w);
                }
                if let Some(first) = live.keep_tcp.first() {
                    let s = socket2::SockRef::from(first);
                    out.report.start.sndbuf_actual = s.send_buffer_size().unwrap_or(0) as u64;
                    out.report.start.rcvbuf_actual = s.recv_buffer_size().unwrap_or(0) as u64;
                } else if let Some(first) = live.keep_udp.first() {
                    let s = socket2::SockRef::from(first);
                    out.report.start.sndbuf_actual = s.send_buffer_size().unwrap_or(0) as u64;
                    out.report.start.rcvbuf_actual = s.recv_buffer_size().unwrap_or(0) as u64;
                }
            }
            ClientStep::StartClock => {
                let spec: &TestSpec =
                    effective.get_or_insert_with(|| asked.negotiated(machine.negotiated()));
                test_start = Some(Instant::now());
                out.report.start.test_start = test_common::test_start(spec, cfg.interval_s);
                (
                    out.report.start.test_start.gso,
                    out.report.start.test_start.gro,
                ) = udp_offloads(&workers.iter().map(|w| &w.0).collect::<Vec<_>>());
                let negotiated = machine.negotiated();
                out.report.start.netmeter = StartExt {
                    peer: negotiated.peer_name().into(),
                    features: negotiated.feature_names(),
                    data_path: data_path(spec, &workers.iter().map(|w| &w.0).collect::<Vec<_>>()),
                    warnings: std::mem::take(&mut profile_warnings),
                    clock: clock_est,
                    txstart: None,
                };
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
                    let mine: Vec<&Worker> = workers.iter().map(|w| &w.0).collect();
                    let path = text::data_path(
                        &out.report.start.netmeter.data_path,
                        udp_offload_note(spec, &mine).as_ref(),
                    );
                    out.emit(Event::Info(&path));
                }
                out.start_done();
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
    // The test as negotiated (set at CREATE_STREAMS, which the machine requires
    // before TEST_RUNNING).
    let spec = effective.unwrap_or_else(|| asked.negotiated(machine.negotiated()));
    let t0 = super::profile::client_t0(cfg.txstart, test_start, out);
    let conn_target = spec
        .connect_only
        .then(|| connect::Target::new(server, cfg.bind, cookie.0, &spec));
    for (w, tcp, udp) in workers {
        // We receive from the server: raw delay = true + (client − server) clock.
        let mut w = w;
        w.owd_correction_ns = clock_est.map_or(0, |c| c.offset_ns);
        w.load_start = load_start(&spec, t0);
        w.profile_origin = Some(t0);
        w.profile_end = match spec.end {
            EndCondition::Time(t) if t > 0.0 => Some(Duration::from_secs_f64(t + spec.omit_s)),
            _ => None,
        };
        let sender = w.shared.sender;
        let h = match (tcp, udp) {
            (Some(t), _) => match &conn_target {
                Some(target) if sender => connect::spawn_client(w, t, target.clone())?,
                _ => stream::spawn_tcp(w, t)?,
            },
            (_, Some(u)) => stream::spawn_udp(w, u)?,
            _ => continue,
        };
        live.handles.push((sender, h));
    }

    // Running: intervals, end condition, and watching the control connection.
    let mut meter = Meter::new(
        spec.protocol,
        spec.direction == Direction::Bidir,
        live.shared.clone(),
        spec.omit_s,
    );
    let interval = (cfg.interval_s > 0.0).then_some(cfg.interval_s);
    let mut next_tick = interval.unwrap_or(f64::INFINITY);
    let rcv_limit = cfg.side.rcv_timeout.unwrap_or(RCV_TIMEOUT);
    let mut receiving = ReceiveWatch::new(&live, rcv_limit);
    let (end_s, stopped) = loop {
        let now = t0.elapsed().as_secs_f64();
        if test_should_end(&spec, &meter, &live, now, cfg.side.file.is_some()) {
            break (now, None);
        }
        if now >= next_tick {
            let iv = meter.tick(now);
            out.interval(iv);
            next_tick += interval.unwrap_or(f64::INFINITY);
            continue;
        }
        // Sleep until the next tick or the end of a timed test; byte and block counts
        // (and the omit period's end) are checked every 10 ms. Fewer wake-ups keep the
        // control thread off the data threads' cores.
        let until = match spec.end {
            // -t 0: nothing ends the test but an interrupt; wake for the ticks only.
            _ if spec.until_interrupted() => next_tick,
            EndCondition::Time(t) if !meter.omitting() => next_tick.min(t + spec.omit_s),
            _ => next_tick.min(now + 0.01),
        };
        let wait = (until - now).clamp(0.0, 0.25);
        let st = match ctrl.poll_state(
            Duration::from_secs_f64(wait),
            "control messages during the test",
        ) {
            Ok(st) => st,
            Err(CtrlError::Interrupted(_)) => break (now, Some(Stopped::client_interrupted())),
            Err(e) => return Err(ctrl_err(e)),
        };
        if let Some(st) = st {
            return Err(match st {
                State::ServerError => server_error(ctrl),
                State::ServerTerminate => break (now, Some(Stopped::ServerTerminated)),
                State::AccessDenied => TestError::DeniedDuringTest,
                other => TestError::UnexpectedDuringTest(other),
            });
        }
        if let Some(e) = live.first_error() {
            return Err(TestError::Stream(e));
        }
        // Receiving: a server that stopped sending without a word is given up after
        // --rcv-timeout, as an iperf3 client does; by default only in a -t 0 test (a
        // timed one ends by its own deadline).
        if (spec.until_interrupted() || cfg.side.rcv_timeout.is_some())
            && receiving.stalled(&meter, Instant::now())
        {
            return Err(TestError::ServerSilent {
                secs: rcv_limit.as_secs_f64(),
            });
        }
    };
    if let Some(why) = stopped {
        // Interrupted (or the server quit): stop everything and report what ran so far,
        // as iperf3 does; the peer's figures are unknown.
        live.stop(true, true);
        let now = t0.elapsed().as_secs_f64().max(end_s);
        let fig = live.final_figures(
            &mut meter,
            out,
            interval.is_some(),
            cfg.interval_s,
            now,
            now,
            cpu_start,
            origin,
        );
        return Err(partial_end(out, &spec, cfg, &fig, why));
    }

    // Ending: stop sending, tell the server at once (the server's figures end when
    // TEST_END arrives: joining a paced sender first, asleep for up to STOP_POLL,
    // stretched them by ~45 ms), count what is still in flight to us, and only then
    // wait for our senders to go.
    live.signal_senders();
    ctrl.send_state(State::TestEnd).map_err(ctrl_err)?;
    machine.test_ended();
    let recv_end_s = receiver_end_s(end_s, live.drain_receivers(t0, DRAIN_IDLE, DRAIN_MAX));
    live.stop(true, false);
    let fig = live.final_figures(
        &mut meter,
        out,
        interval.is_some(),
        cfg.interval_s,
        end_s,
        recv_end_s,
        cpu_start,
        origin,
    );
    let mut peer = Results::default();
    loop {
        let st = ctrl
            .read_state(CTRL_TIMEOUT, "the server's results exchange")
            .map_err(ctrl_err);
        let step = st.and_then(|st| match machine.on_state(st) {
            Err(ClientFailure::ServerTerminated) => Err(Stopped::ServerTerminated.into()),
            r => r.map_err(TestError::from),
        });
        // Interrupted while the server works out its results: report our own figures.
        let step = match step {
            Err(e) => match e.stopped() {
                Some(why) => {
                    return Err(partial_end(out, &spec, cfg, &fig, why));
                }
                None => return Err(e),
            },
            Ok(step) => step,
        };
        match step {
            ClientStep::ExchangeResults => {
                let has_retr = spec.protocol == Protocol::Tcp;
                let mine =
                    build::local_results(&fig.locals, fig.cpu, has_retr, fig.congestion.clone());
                ctrl.send_json(&mine, "sending results").map_err(ctrl_err)?;
                peer = match ctrl.read_json(
                    wire::MAX_RESULTS_LEN,
                    CTRL_TIMEOUT,
                    "the server's results",
                ) {
                    Ok(p) => p,
                    Err(CtrlError::Interrupted(_)) => {
                        let why = Stopped::client_interrupted();
                        return Err(partial_end(out, &spec, cfg, &fig, why));
                    }
                    Err(e) => return Err(ctrl_err(e)),
                };
            }
            ClientStep::Display => break,
            ClientStep::ReadServerError => return Err(server_error(ctrl)),
            other => {
                return Err(TestError::UnexpectedStep {
                    step: other,
                    when: "at the end",
                });
            }
        }
    }
    out.end(build::end(&test_common::end_inputs(
        &out.report.start,
        &spec,
        &fig.locals,
        &peer,
        fig.cpu,
        fig.congestion,
        true,
        cfg.in_process_server,
    )));
    if let Some(t) = peer.server_output_text.take() {
        out.emit(Event::ServerOutput(&t));
        out.report.server_output_text = Some(t);
    }
    if let Some(j) = peer.server_output_json.take() {
        out.report.server_output_json = Some(j);
    }
    out.emit(Event::Done);
    let _ = ctrl.send_state(State::IperfDone);
    drop(live);
    if let Some(c) = &out.report.end.netmeter.connect_only
        && c.connections == 0
    {
        return Err(TestError::NoConnection {
            failed: c.failed,
            host: cfg.host.clone(),
            last_error: c.last_error.as_deref().unwrap_or("none").to_string(),
        });
    }
    Ok(())
}

/// iperf3's default `--rcv-timeout`: how long a receiving client of a `-t 0` test waits
/// for data before it gives up on a silent server.
const RCV_TIMEOUT: Duration = Duration::from_secs(120);

/// Watches the bytes this side receives, for `--rcv-timeout` (and, on a client, the
/// `-t 0` silent-server check).
pub(super) struct ReceiveWatch {
    receives: bool,
    limit: Duration,
    last: (u64, Instant),
}

impl ReceiveWatch {
    pub(super) fn new(live: &LiveStreams, limit: Duration) -> ReceiveWatch {
        ReceiveWatch {
            receives: live.shared.iter().any(|s| !s.sender),
            limit,
            last: (0, Instant::now()),
        }
    }

    /// Whether nothing has arrived for the limit on a side that receives.
    pub(super) fn stalled(&mut self, meter: &Meter, now: Instant) -> bool {
        if !self.receives {
            return false;
        }
        let (_, received, _, _) = meter.totals();
        if received != self.last.0 {
            self.last = (received, now);
        }
        now.duration_since(self.last.1) > self.limit
    }
}

/// End a test that was stopped early: record why (before the summary, as iperf3 orders
/// its `--json-stream` events), print the summary of what this side measured (the peer's
/// figures never came) and return the error that ends the run.
#[allow(clippy::too_many_arguments)]
fn partial_end(
    out: &mut Output,
    spec: &TestSpec,
    cfg: &ClientConfig,
    fig: &FinalFigures,
    why: Stopped,
) -> TestError {
    out.error(&why.to_string());
    out.end(build::end(&test_common::end_inputs(
        &out.report.start,
        spec,
        &fig.locals,
        &Results::default(),
        fig.cpu,
        fig.congestion.clone(),
        true,
        cfg.in_process_server,
    )));
    why.into()
}

/// Whether this side's streams use UDP segmentation offload and UDP_GRO (0 or 1
/// each, `start.test_start.gso`/`gro` as iperf3 3.22 writes them).
pub fn udp_offloads(workers: &[&Worker]) -> (u8, u8) {
    (
        workers.iter().any(|w| w.caps.gso) as u8,
        workers.iter().any(|w| w.caps.gro) as u8,
    )
}

/// What the data path is, for the JSON record.
pub fn data_path(spec: &TestSpec, workers: &[&Worker]) -> String {
    match spec.protocol {
        Protocol::Tcp if spec.connect_only => "tcp connect/request/response/close".into(),
        Protocol::Tcp if spec.zerocopy && workers.iter().any(|w| w.caps.msg_zerocopy) => {
            "tcp send(MSG_ZEROCOPY)".into()
        }
        // -Z is a sending method: a side that only receives reports its reads.
        Protocol::Tcp if workers.iter().any(|w| w.zerocopy.is_some()) => "tcp sendfile".into(),
        Protocol::Tcp if spec.skip_rx_copy => "tcp write/recv(MSG_TRUNC)".into(),
        Protocol::Tcp => "tcp write/read".into(),
        Protocol::Udp => {
            let gso = workers.iter().any(|w| w.caps.gso);
            let gro = workers.iter().any(|w| w.caps.gro);
            format!(
                "udp sendmmsg{}/recvmmsg{}",
                if gso { "+GSO" } else { "" },
                if gro { "+GRO" } else { "" }
            )
        }
    }
}

/// `file`: with `-F` a sender stops at the end of its file, and the test ends when all
/// have (iperf3's `diskfile_send` sets `done`).
fn test_should_end(
    spec: &TestSpec,
    meter: &Meter,
    live: &LiveStreams,
    now: f64,
    file: bool,
) -> bool {
    if meter.omitting() {
        return now >= spec.omit_s + 3600.0; // never during omit, but bounded
    }
    let all_senders_done = {
        let mut senders = live.shared.iter().filter(|s| s.sender).peekable();
        senders.peek().is_some() && senders.all(|s| s.finished.load(Ordering::Acquire))
    };
    match spec.end {
        _ if spec.until_interrupted() => file && all_senders_done,
        EndCondition::Time(t) => now >= t + spec.omit_s || (file && all_senders_done),
        // -F: the senders end the test themselves, once the peer has their bytes.
        EndCondition::Bytes(_) if file && live.shared.iter().any(|s| s.sender) => all_senders_done,
        EndCondition::Bytes(n) => {
            let (sb, rb, _, _) = meter.totals();
            all_senders_done || sb >= n || rb >= n
        }
        EndCondition::Blocks(k) => {
            let (_, _, sp, rp) = meter.totals();
            all_senders_done || sp >= k || rp >= k
        }
    }
}

fn server_error(ctrl: &mut Ctrl) -> TestError {
    match ctrl.read_error_trailer(Duration::from_secs(5)) {
        Ok((code, errno)) => TestError::Peer { code, errno },
        Err(_) => TestError::PeerUnexplained,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1123_dates() {
        assert_eq!(httpdate(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(httpdate(1_700_000_000), "Tue, 14 Nov 2023 22:13:20 GMT");
    }

    /// A bounceback spec of `len`-byte messages over `protocol`.
    fn rr_spec(protocol: Protocol, len: u32) -> TestSpec {
        TestSpec {
            protocol,
            bounceback: Some(crate::wire::Bounceback {
                request_len: len,
                reply_len: len,
                hold_us: 0,
                burst: 1,
                busy_poll_us: 0,
            }),
            ..Default::default()
        }
    }

    /// Start one stream thread on `sock` (blocked on a silent peer), then require
    /// `stop` for its role to end it within 2 s.
    fn assert_stop_ends_blocked_thread(spec: &TestSpec, sender: bool, sock: Sock) {
        let mut live = LiveStreams::default();
        let payload = Arc::new(vec![0u8; 16]);
        let (fd, kind) = match &sock {
            Sock::Tcp(t) => (sock::socket_number(t), "TCP"),
            Sock::Udp(u) => (sock::socket_number(u), "UDP"),
        };
        let sock = match sock {
            Sock::Tcp(t) => Ok(Arc::new(t)),
            Sock::Udp(u) => Err(u),
        };
        let tcp = sock.as_ref().map_or_else(|_| Weak::new(), Arc::downgrade);
        let w = make_worker(
            spec, 1, fd, tcp, sender, true, &live, &payload, &None, &None,
        );
        live.shared.push(w.shared.clone());
        let handle = match sock {
            Ok(t) => {
                let dup = t.try_clone().unwrap();
                live.keep_tcp.push(t);
                stream::spawn_tcp(w, dup)
            }
            Err(u) => {
                let dup = u.try_clone().unwrap();
                live.keep_udp.push(u);
                stream::spawn_udp(w, dup)
            }
        };
        live.handles.push((sender, handle.unwrap()));
        // Let the thread reach its blocking read.
        std::thread::sleep(Duration::from_millis(100));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            live.stop(sender, !sender);
            let _ = tx.send(());
        });
        assert!(
            rx.recv_timeout(Duration::from_secs(2)).is_ok(),
            "stop() did not end a {kind} thread blocked on a silent peer"
        );
    }

    enum Sock {
        Tcp(TcpStream),
        Udp(UdpSocket),
    }

    /// A request/response read has no timeout; stopping the test must still end the
    /// thread at once when the peer never answers (TCP client, UDP server).
    #[test]
    fn stop_wakes_bounceback_reads_that_have_no_timeout() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tcp = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_silent_server, _) = listener.accept().unwrap();
        assert_stop_ends_blocked_thread(&rr_spec(Protocol::Tcp, 1), true, Sock::Tcp(tcp));

        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let silent_client = UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.connect(silent_client.local_addr().unwrap()).unwrap();
        assert_stop_ends_blocked_thread(&rr_spec(Protocol::Udp, 8), false, Sock::Udp(udp));
    }

    #[test]
    fn ipv4_mapped_addresses_print_as_ipv4() {
        let ip: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert_eq!(host_text(ip), "127.0.0.1");
    }
}
