//! One test's data streams, the same on both sides: `TestRun` attaches the data
//! sockets (opened by the client, accepted by the server) and starts a thread on each;
//! `Running` samples them once per interval until the side's half of the control
//! conversation ([`Control`]) or the end condition ends the test, drains what is still
//! in flight and produces this side's final figures and the end summary.
//!
//! The client and the server keep only their half of the conversation: the client
//! connects and ends the test, the server accepts and waits to be told. Everything
//! between the first stream and the final figures is here, once.

use super::connect::{self, Target};
use super::meter::{Meter, receiver_end_s};
use super::output::Output;
use super::record::{FrameRecord, ProfileRecord, StreamError, StreamShared};
use super::stream::{self, Budget, DataSock, Worker};
use super::{Stopped, TestError, test_common};
use crate::clocksync::ClockEstimate;
use crate::report::build;
use crate::report::connect::ConnectOnlyAnswered;
use crate::report::observe::Observer;
use crate::report::{Connected, End, Start, StartExt, text};
use crate::session::Negotiated;
use crate::sock;
use crate::spec::{Direction, EndCondition, Protocol, TestSpec};
use crate::stats::{CpuSample, UdpRecv, cpu_percent};
use crate::wire::{self, Results};
use socket2::SockRef;
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// End-of-test drain: receivers keep counting until the stream has been idle this long…
pub const DRAIN_IDLE: Duration = Duration::from_millis(50);
/// …but never longer than this after the senders stopped.
pub const DRAIN_MAX: Duration = Duration::from_secs(1);

/// Which end of the test this side is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client; `in_process_server`: its server runs in this process (`--loopback`).
    Client {
        in_process_server: bool,
    },
    Server,
}

/// One test's data streams on this side, before they start: attached one by one in the
/// order the client opened them, then started together.
pub struct TestRun {
    spec: TestSpec,
    side: Side,
    live: LiveStreams,
    workers: Vec<(Worker, DataSock)>,
    payload: Arc<Vec<u8>>,
    zerocopy: Option<Arc<std::fs::File>>,
    budget: Option<Arc<Budget>>,
}

impl TestRun {
    /// The streams of `spec` (the test as negotiated) on `side`: the payload every
    /// sender shares, `-Z`'s memory file, the `-n`/`-k` budget.
    pub fn new(spec: TestSpec, side: Side) -> Result<TestRun, TestError> {
        let payload = Arc::new(stream::make_payload(spec.block_len, spec.repeating_payload));
        let zerocopy = if spec.zerocopy && spec.protocol == Protocol::Tcp {
            Some(Arc::new(test_common::zerocopy_file(&payload)?))
        } else {
            None
        };
        Ok(TestRun {
            budget: budget_for(&spec),
            spec,
            side,
            live: LiveStreams::default(),
            workers: Vec::new(),
            payload,
            zerocopy,
        })
    }

    /// The test as both ends run it.
    pub fn spec(&self) -> &TestSpec {
        &self.spec
    }

    /// Attach the next data stream (in the order the client opened them: ids 1, 3, 4,
    /// …; the first `-P` flow client → server with `--bidir`), connected to `remote`.
    /// Its socket options are set already. The socket stays here until the end of the
    /// test (TCP_INFO is read through it); its thread will get a duplicate. Returns the
    /// stream's `start.connected` entry.
    pub fn attach(&mut self, sock: DataSock, remote: SocketAddr) -> std::io::Result<Connected> {
        let i = self.workers.len();
        let id = if i == 0 { 1 } else { i as i64 + 2 };
        let forward = self.spec.client_sends(i as u32);
        let sender = forward == matches!(self.side, Side::Client { .. });
        let (fd, local, tcp, for_thread) = match sock {
            DataSock::Tcp(t) => {
                let t = Arc::new(t);
                let kept = (sock::socket_number(&t), t.local_addr()?, Arc::downgrade(&t));
                let dup = t.try_clone()?;
                self.live.keep_tcp.push(t);
                (kept.0, kept.1, kept.2, DataSock::Tcp(dup))
            }
            DataSock::Udp(u) => {
                let kept = (sock::socket_number(&u), u.local_addr()?);
                let dup = u.try_clone()?;
                self.live.keep_udp.push(u);
                (kept.0, kept.1, Weak::new(), DataSock::Udp(dup))
            }
        };
        let mut w = make_worker(
            &self.spec,
            id,
            fd,
            tcp,
            sender,
            forward,
            &self.live,
            &self.payload,
            &self.budget,
            &self.zerocopy,
        );
        // The thread's duplicate is the same socket as the one kept.
        probe_capabilities(&mut w, &self.spec, for_thread.as_fd());
        self.live.shared.push(w.shared.clone());
        self.workers.push((w, for_thread));
        Ok(connected_entry(fd, local, remote))
    }

    /// `start.sndbuf_actual` / `rcvbuf_actual`: what the kernel granted the first stream.
    pub fn record_buffers(&self, start: &mut Start) {
        let first = match (self.live.keep_tcp.first(), self.live.keep_udp.first()) {
            (Some(t), _) => SockRef::from(&**t),
            (None, Some(u)) => SockRef::from(u),
            (None, None) => return,
        };
        start.sndbuf_actual = first.send_buffer_size().unwrap_or(0) as u64;
        start.rcvbuf_actual = first.recv_buffer_size().unwrap_or(0) as u64;
    }

    /// The `start` facts once every stream is attached: `test_start` (with the UDP
    /// offloads in use) and `start.netmeter` (peer, features, data path, clock).
    pub fn record_start(
        &self,
        start: &mut Start,
        interval_s: f64,
        negotiated: &Negotiated,
        clock: Option<ClockEstimate>,
        warnings: Vec<String>,
    ) {
        let workers = self.workers();
        start.test_start = test_common::test_start(&self.spec, interval_s);
        (start.test_start.gso, start.test_start.gro) = udp_offloads(&workers);
        start.netmeter = StartExt {
            peer: negotiated.peer_name().into(),
            features: negotiated.feature_names(),
            data_path: data_path(&self.spec, &workers),
            warnings,
            clock,
            txstart: None,
        };
    }

    /// The `-V` lines on the data path (`start.netmeter.data_path` and, for UDP, the
    /// segmentation offloads).
    pub fn data_path_text(&self, start: &Start) -> String {
        text::data_path(
            &start.netmeter.data_path,
            udp_offload_note(&self.spec, &self.workers()).as_ref(),
        )
    }

    fn workers(&self) -> Vec<&Worker> {
        self.workers.iter().map(|w| &w.0).collect()
    }

    /// Start every stream's thread: the test's clock starts at `launch.t0`.
    pub fn start(self, launch: Launch) -> Result<Running, TestError> {
        let TestRun {
            spec,
            side,
            mut live,
            workers,
            ..
        } = self;
        let t0 = launch.t0;
        for (mut w, sock) in workers {
            w.owd_correction_ns = launch.owd_correction_ns;
            w.load_start = load_start(&spec, t0);
            w.profile_origin = Some(t0);
            w.profile_end = match spec.end {
                EndCondition::Time(t) if t > 0.0 => Some(Duration::from_secs_f64(t + spec.omit_s)),
                _ => None,
            };
            let sender = w.shared.sender;
            let h = match (sock, &launch.connect_to) {
                (DataSock::Tcp(t), Some(target)) if sender => {
                    connect::spawn_client(w, t, target.clone())?
                }
                (sock, _) => match w.profile {
                    Some(p) => super::profile::spawn(w, p, sock)?,
                    None => stream::spawn(w, sock)?,
                },
            };
            live.handles.push((sender, h));
        }
        let mut meter = Meter::new(
            spec.protocol,
            spec.direction == Direction::Bidir,
            live.shared.clone(),
            spec.omit_s,
        );
        meter.answered = launch.answered;
        let interval = (launch.interval_s > 0.0).then_some(launch.interval_s);
        Ok(Running {
            spec,
            side,
            live,
            meter,
            t0,
            interval,
            interval_s: launch.interval_s,
            next_tick: interval.unwrap_or(f64::INFINITY),
            cpu_start: launch.cpu_start,
            origin: launch.origin,
        })
    }
}

/// How the streams start ([`TestRun::start`]).
pub struct Launch {
    /// The test's start: test time 0.
    pub t0: Instant,
    /// Added to each raw one-way delay a receiver measures (the clock estimate, signed
    /// for this side).
    pub owd_correction_ns: i64,
    /// `--connect-only` client: where the sending streams open their short connections.
    pub connect_to: Option<Arc<Target>>,
    /// `--connect-only` server: the connections answered for this test.
    pub answered: Option<connect::Answered>,
    /// `-i`: seconds between interval rows (0: none).
    pub interval_s: f64,
    /// The process's CPU use when this side's test began, and the clock it counts from.
    pub cpu_start: CpuSample,
    pub origin: Instant,
}

/// How a running test ended: at `at_s` (test seconds), on purpose (`stopped`: an
/// interrupt, the peer's `*_TERMINATE`) or as it should.
#[derive(Debug, Clone, Copy)]
pub struct Ending {
    pub at_s: f64,
    pub stopped: Option<Stopped>,
}

/// A side's half of the control conversation while data flows ([`Running::run_until`]).
pub trait Control {
    /// Before an interval row that is due: end the test now?
    fn check(&mut self, run: &Running, now_s: f64) -> Option<Ending>;
    /// After the rows: wait on the control connection (until the next row is due at
    /// most) and judge what arrived and how the streams are doing.
    fn watch(&mut self, run: &Running, now_s: f64) -> Result<Option<Ending>, TestError>;
}

/// A test whose data threads run: the interval loop, the end and the final figures.
pub struct Running {
    spec: TestSpec,
    side: Side,
    live: LiveStreams,
    pub meter: Meter,
    t0: Instant,
    interval: Option<f64>,
    interval_s: f64,
    /// When the next interval row is due, in test seconds.
    pub next_tick: f64,
    cpu_start: CpuSample,
    origin: Instant,
}

impl Running {
    /// The test as both ends run it.
    pub fn spec(&self) -> &TestSpec {
        &self.spec
    }

    /// Test seconds since `t0`.
    pub fn now_s(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    /// Whether this side receives on any stream.
    pub fn receives(&self) -> bool {
        self.live.shared.iter().any(|s| !s.sender)
    }

    /// The first error a data thread ended with.
    pub fn stream_error(&self) -> Option<StreamError> {
        self.live.first_error()
    }

    /// Print interval rows as they fall due until `side` ends the test.
    pub fn run_until<O: Observer + ?Sized>(
        &mut self,
        out: &mut Output<'_, O>,
        side: &mut impl Control,
    ) -> Result<Ending, TestError> {
        loop {
            let now = self.now_s();
            if let Some(end) = side.check(self, now) {
                return Ok(end);
            }
            // Without interval rows nothing else ends the omit period.
            if self.interval.is_none() && self.meter.omitting() && now >= self.spec.omit_s {
                self.meter.tick(now);
            }
            if now >= self.next_tick {
                let iv = self.meter.tick(now);
                out.interval(iv);
                self.next_tick += self.interval.unwrap_or(f64::INFINITY);
                continue;
            }
            if let Some(end) = side.watch(self, now)? {
                return Ok(end);
            }
        }
    }

    /// Whether the test's own end condition is met at `now_s`: `-t` has passed, or the
    /// `-n` bytes / `-k` blocks have moved (or every sender ran out of its budget).
    pub fn end_reached(&self, now_s: f64) -> bool {
        end_reached(&self.spec, &self.meter, &self.live, now_s)
    }

    /// Tell the sending threads to stop without waiting for them: a paced sender asleep
    /// until its next block (up to `STOP_POLL`) must not delay `TEST_END`.
    pub fn signal_senders(&self) {
        self.live.signal_senders();
    }

    /// End a test that ran to its end at `end_s`: keep the receivers counting what is
    /// still in flight (`LiveStreams::drain_receivers`), then join the senders, then
    /// take this side's final figures.
    pub fn drain<O: Observer + ?Sized>(
        &mut self,
        out: &mut Output<'_, O>,
        end_s: f64,
    ) -> FinalFigures {
        self.signal_senders();
        let last = self.live.drain_receivers(self.t0, DRAIN_IDLE, DRAIN_MAX);
        let recv_end_s = receiver_end_s(end_s, last);
        self.live.stop(true, false);
        self.final_figures(out, end_s, recv_end_s)
    }

    /// Let go of the streams' sockets (the threads have ended): the peer sees them
    /// close. The figures taken so far stay.
    pub fn close_streams(&mut self) {
        self.live = LiveStreams::default();
    }

    /// Stop and join every thread at once (a test stopped early).
    pub fn stop_all(&mut self) {
        self.live.stop(true, true);
    }

    /// What this side measured, once its streams have stopped (both sides end every
    /// test, whole or interrupted, this way): the last, partial interval when it is worth
    /// a row (`intervals`: rows are reported at all), this side's final figures with the
    /// kernel's drop counts, the process's CPU over the test and the congestion control.
    pub fn final_figures<O: Observer + ?Sized>(
        &mut self,
        out: &mut Output<'_, O>,
        send_end_s: f64,
        recv_end_s: f64,
    ) -> FinalFigures {
        let meter = &mut self.meter;
        if self.interval.is_some()
            && meter.worth_reporting(recv_end_s, self.interval_s)
            && !meter.omitting()
        {
            let iv = meter.tick(recv_end_s);
            out.interval(iv);
        }
        let mut locals = meter.finals(send_end_s, recv_end_s);
        self.live.record_host_drops(&mut locals);
        FinalFigures {
            locals,
            cpu: cpu_percent(self.cpu_start, sock::cpu_sample(self.origin)),
            congestion: self
                .live
                .keep_tcp
                .first()
                .and_then(|s| sock::congestion(s.as_fd())),
        }
    }

    /// The end summary from this side's figures and the peer's results (`None`: they
    /// never came, the test was stopped early). A `--connect-only` server adds the
    /// connections it answered to a whole test's summary.
    pub fn summary(&self, start: &Start, fig: &FinalFigures, peer: Option<&Results>) -> End {
        let none = Results::default();
        let (client, in_process) = match self.side {
            Side::Client { in_process_server } => (true, in_process_server),
            Side::Server => (false, false),
        };
        let mut inputs = test_common::end_inputs(
            start,
            &self.spec,
            &fig.locals,
            peer.unwrap_or(&none),
            fig.cpu,
            fig.congestion.clone(),
            client,
            in_process,
        );
        if peer.is_some() {
            inputs.connect_only_answered = self.meter.answered.as_ref().map(|a| {
                let secs = fig.locals.iter().map(|l| l.seconds).fold(0.0, f64::max);
                ConnectOnlyAnswered::new(a.total(), secs)
            });
        }
        build::end(&inputs)
    }

    /// This side's results message for the peer.
    pub fn results(&self, fig: &FinalFigures) -> Results {
        let has_retr = self.spec.protocol == Protocol::Tcp;
        build::local_results(&fig.locals, fig.cpu, has_retr, fig.congestion.clone())
    }
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
    pub fn first_error(&self) -> Option<StreamError> {
        self.shared.iter().find_map(|s| s.error())
    }
}

/// Prepare per-stream state and the data threads' common settings.
#[allow(clippy::too_many_arguments)]
fn make_worker(
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
            Mutex::new(ProfileRecord {
                frames: spec.profile.is_some_and(|p| p.isochronous().is_some()),
                ..Default::default()
            })
        }),
        frames: (spec.profile.is_some_and(|p| p.framed())
            && spec.protocol == Protocol::Udp
            && !sender
            && forward)
            .then(|| Mutex::new(FrameRecord::new(spec.trip_times))),
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
        profile: spec.profile.filter(|_| sender && forward),
        profile_origin: None,
        profile_end: None,
    }
}

/// With `--working-load`: when the bulk streams start (after the idle phase).
fn load_start(spec: &TestSpec, t0: Instant) -> Option<Instant> {
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
fn probe_capabilities(w: &mut Worker, spec: &TestSpec, fd: BorrowedFd<'_>) {
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
fn udp_offload_note(spec: &TestSpec, workers: &[&Worker]) -> Option<text::UdpOffloadNote> {
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
fn budget_for(spec: &TestSpec) -> Option<Arc<Budget>> {
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

/// Whether this side's streams use UDP segmentation offload and UDP_GRO (0 or 1
/// each, `start.test_start.gso`/`gro` as iperf3 3.22 writes them).
fn udp_offloads(workers: &[&Worker]) -> (u8, u8) {
    (
        workers.iter().any(|w| w.caps.gso) as u8,
        workers.iter().any(|w| w.caps.gro) as u8,
    )
}

/// What the data path is, for the JSON record.
fn data_path(spec: &TestSpec, workers: &[&Worker]) -> String {
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

fn end_reached(spec: &TestSpec, meter: &Meter, live: &LiveStreams, now: f64) -> bool {
    if meter.omitting() {
        return now >= spec.omit_s + 3600.0; // never during omit, but bounded
    }
    let all_senders_done = {
        let mut senders = live.shared.iter().filter(|s| s.sender).peekable();
        senders.peek().is_some() && senders.all(|s| s.finished.load(Ordering::Acquire))
    };
    match spec.end {
        _ if spec.until_interrupted() => false,
        EndCondition::Time(t) => now >= t + spec.omit_s,
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
fn connected_entry(fd: i64, local: SocketAddr, remote: SocketAddr) -> Connected {
    Connected {
        socket: fd,
        local_host: host_text(local.ip()),
        local_port: local.port(),
        remote_host: host_text(remote.ip()),
        remote_port: remote.port(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
