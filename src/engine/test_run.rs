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
use super::disk_file::{self, DiskFile};
use super::live::{
    LiveStreams, budget_for, connected_entry, data_path, load_start, make_worker,
    probe_capabilities, udp_offload_note, udp_offloads,
};
use super::meter::{Meter, receiver_end_s};
use super::output::Output;
use super::record::StreamError;
use super::stream::{self, Budget, DataSock, Worker};
use super::{Stopped, TestError, test_common};
use crate::clock::Clock;
use crate::clocksync::ClockEstimate;
use crate::control::Negotiated;
use crate::report::build;
use crate::report::connect::ConnectOnlyAnswered;
use crate::report::observe::Observer;
use crate::report::{Connected, End, Start, StartExt, text};
use crate::sock;
use crate::spec::{Direction, EndCondition, Protocol, TestSpec};
use crate::stats::{CpuSample, cpu_percent};
use crate::wire::Results;
use socket2::SockRef;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
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
    /// `-F FILE` (TCP), opened once for the test: a sender sends the file's bytes and
    /// stops at its end, a receiver writes what arrives into it.
    file: Option<Arc<DiskFile>>,
    /// The client's `--line-rate`: the peak the end summary's efficiency is judged against.
    peak: Option<crate::host::facts::Peak>,
    /// Where the test reads the time ([`TestRun::with_clock`]; the host's by default).
    clock: Arc<dyn Clock>,
    /// A dialect's own data loop for every stream (`--iperf2`), else the spec's.
    spawn: Option<SpawnLoop>,
}

/// Starts a stream's thread in place of the loops `TestRun::start` picks from the spec:
/// another protocol's data (`--iperf2`: iperf 2's headers in the data itself).
pub type SpawnLoop =
    Arc<dyn Fn(Worker, DataSock) -> std::io::Result<std::thread::JoinHandle<()>> + Send + Sync>;

/// Whether `side` sends anything built from the payload: a bulk or profiled stream it
/// sends on, or request/response traffic (both ends of a bounceback or `--working-load`
/// probe write the pattern).
fn sends_payload(spec: &TestSpec, side: Side) -> bool {
    if spec.bounceback.is_some() || spec.working_load.is_some() {
        return true;
    }
    let client = matches!(side, Side::Client { .. });
    (0..spec.total_streams()).any(|i| spec.client_sends(i) == client)
}

impl TestRun {
    /// The streams of `spec` (the test as negotiated) on `side`: the payload every
    /// sender shares, `-Z`'s memory file, the `-n`/`-k` budget.
    pub fn new(spec: TestSpec, side: Side) -> Result<TestRun, TestError> {
        // A side that only receives holds no payload: with the default 1 MiB TCP block,
        // that is 1 MiB less for every test a server receives.
        let payload_len = if sends_payload(&spec, side) {
            spec.block_len
        } else {
            0
        };
        let payload = Arc::new(stream::make_payload(payload_len, spec.repeating_payload));
        let zerocopy = if spec.zerocopy && spec.protocol == Protocol::Tcp && payload_len > 0 {
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
            file: None,
            peak: None,
            clock: crate::clock::system(),
            spawn: None,
        })
    }

    /// Read the time from `clock` (the side's config's) instead of the host's clocks.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> TestRun {
        self.clock = clock;
        self
    }

    /// Run every stream with `spawn` instead of the loop the spec would pick.
    pub fn with_loop(mut self, spawn: SpawnLoop) -> TestRun {
        self.spawn = Some(spawn);
        self
    }

    /// `--line-rate`: the end summary's efficiency against this peak.
    pub fn with_peak(mut self, peak: Option<crate::host::facts::Peak>) -> TestRun {
        self.peak = peak;
        self
    }

    /// `-F FILE`: this side's streams send from or write to the file (TCP only),
    /// opened here, once for the test: a side that sends on any stream reads it, one
    /// that only receives creates or truncates it and writes at most `max_bytes`
    /// (`disk_file`).
    pub fn with_file(
        mut self,
        file: Option<&std::path::Path>,
        max_bytes: Option<u64>,
    ) -> std::io::Result<TestRun> {
        let Some(path) = file.filter(|_| self.spec.protocol == Protocol::Tcp) else {
            return Ok(self);
        };
        let client = matches!(self.side, Side::Client { .. });
        let sends = (0..self.spec.total_streams()).any(|i| self.spec.client_sends(i) == client);
        let role = match sends {
            true => disk_file::Use::Source,
            false => disk_file::Use::Sink { max_bytes },
        };
        self.file = Some(Arc::new(DiskFile::open(path, role)?));
        Ok(self)
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
        w.file = self.file.clone();
        // -F keeps what arrives: a receiver writing the file must copy it, whatever
        // --skip-rx-copy the client asked for (MSG_TRUNC reads leave the buffer as it was).
        w.skip_rx_copy &= w.file.is_none();
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
            tcp_congestion: self
                .live
                .keep_tcp
                .first()
                .and_then(|s| sock::congestion(s.as_fd())),
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
            file,
            peak,
            clock,
            spawn,
            ..
        } = self;
        let t0 = launch.t0;
        // Both ends run from here: the bulk senders' -b schedules start now.
        let launched = clock.now();
        for (mut w, sock) in workers {
            w.pace_origin = Some(launched);
            w.clock = clock.clone();
            w.owd_correction_ns = launch.owd_correction_ns;
            w.load_start = load_start(&spec, t0);
            w.schedule_origin = Some(t0);
            w.schedule_end = match spec.end {
                EndCondition::Time(t) if t > 0.0 => Some(Duration::from_secs_f64(t + spec.omit_s)),
                _ => None,
            };
            let sender = w.shared.sender;
            if let Some(spawn) = &spawn {
                live.handles.push((sender, spawn(w, sock)?));
                continue;
            }
            let h = match (sock, &launch.connect_to) {
                (DataSock::Tcp(t), Some(target)) if sender => {
                    connect::spawn_client(w, t, target.clone())?
                }
                (sock, _) => match (w.bounceback, w.profile) {
                    (Some(b), _) => super::bounce::spawn(w, b, sock)?,
                    // -F: the file's bytes, not a profile's units.
                    (None, Some(p)) if w.file.is_none() => super::profile::spawn(w, p, sock)?,
                    _ => stream::spawn(w, sock)?,
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
        meter.interval_histograms = launch.interval_histograms;
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
            file,
            peak,
            clock,
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
    /// `--histograms`: each interval row carries its one-way delay histogram.
    pub interval_histograms: bool,
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
    /// `-F`: the senders end the test at the end of their file; the end summary says
    /// how much of it went over each stream.
    file: Option<Arc<DiskFile>>,
    /// `--line-rate`'s peak (client).
    peak: Option<crate::host::facts::Peak>,
    clock: Arc<dyn Clock>,
}

impl Running {
    /// The test as both ends run it.
    pub fn spec(&self) -> &TestSpec {
        &self.spec
    }

    /// Test seconds since `t0`.
    pub fn now_s(&self) -> f64 {
        self.clock
            .now()
            .saturating_duration_since(self.t0)
            .as_secs_f64()
    }

    /// Whether this side receives on any stream.
    pub fn receives(&self) -> bool {
        self.live.shared.iter().any(|s| !s.sender)
    }

    /// The bytes this side's receiving streams have counted so far, and whether all of
    /// their threads have ended (an iperf 2 client's receivers end at the server's FIN).
    pub fn receive_progress(&self) -> (u64, bool) {
        let mut receivers = self.live.shared.iter().filter(|s| !s.sender).peekable();
        let any = receivers.peek().is_some();
        let (mut bytes, mut done) = (0, any);
        for s in receivers {
            bytes += s.bytes.load(Ordering::Relaxed);
            done &= s.finished.load(Ordering::Acquire);
        }
        (bytes, done)
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
                // Stamped round trips are cut at the interval's own end, however late
                // this loop woke (`Meter::tick_cut`).
                let end = self.t0 + std::time::Duration::from_secs_f64(self.next_tick);
                let iv = self.meter.tick_cut(now, Some(end));
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
        end_reached(
            &self.spec,
            &self.meter,
            &self.live,
            now_s,
            self.file.is_some(),
        )
    }

    /// `-F`: the cap this side's file stopped being written at, once it has.
    pub fn file_capped(&self) -> Option<(&std::path::Path, u64)> {
        let f = self.file.as_ref()?;
        f.capped().map(|max| (f.path(), max))
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
        let last = self
            .live
            .drain_receivers(self.t0, DRAIN_IDLE, DRAIN_MAX, &*self.clock);
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
        self.live.record_kernel_counts(&mut locals);
        FinalFigures {
            locals,
            cpu: cpu_percent(self.cpu_start, sock::cpu_sample(self.origin)),
            congestion: self
                .live
                .keep_tcp
                .first()
                .and_then(|s| sock::congestion(s.as_fd())),
            threads: self.live.thread_cpu(),
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
        // This side's host: the interface of the first stream's local address.
        inputs.host = start
            .connected
            .first()
            .and_then(|c| c.local_host.parse().ok())
            .map(crate::host::probe::for_local_address);
        inputs.threads = fig.threads.clone();
        inputs.peak = self.peak;
        // As iperf3 (fstat of the open file): the size when the test ended.
        inputs.disk_file = self.file.as_ref().and_then(|f| {
            let size = f.size().ok()?;
            Some((f.path().display().to_string(), size))
        });
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
        let mut r = build::local_results(&fig.locals, fig.cpu, has_retr, fig.congestion.clone());
        for s in &mut r.streams {
            if let Some(t) = fig.threads.iter().find(|t| t.id == s.id) {
                s.netmeter_cpu_percent = Some(t.cpu_percent);
                s.netmeter_cpu_wait_percent = t.wait_percent;
            }
        }
        r
    }
}

/// Watches the bytes this side receives, to notice a peer that stopped sending (the
/// client's `-t 0` silent-server check).
pub struct ReceiveWatch {
    receives: bool,
    limit: Duration,
    last: (u64, Instant),
}

impl ReceiveWatch {
    /// A watch on a side that `receives` (else it never stalls), giving up after `limit`,
    /// started at `now`.
    pub fn starting(receives: bool, limit: Duration, now: Instant) -> ReceiveWatch {
        ReceiveWatch {
            receives,
            limit,
            last: (0, now),
        }
    }

    /// Whether nothing has arrived for the limit on a side that receives.
    pub fn stalled(&mut self, meter: &Meter, now: Instant) -> bool {
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

/// A side's own figures at the end of a test ([`Running::final_figures`]).
pub struct FinalFigures {
    pub locals: Vec<build::LocalFinal>,
    /// CPU percent of one core: total, user, system.
    pub cpu: (f64, f64, f64),
    pub congestion: Option<String>,
    /// Each stream thread's CPU use (the threads have ended).
    pub threads: Vec<crate::host::facts::ThreadCpu>,
}

/// `file`: with `-F` a sender stops at the end of its file, and the test ends when all
/// have (iperf3's `diskfile_send` sets `done`).
fn end_reached(spec: &TestSpec, meter: &Meter, live: &LiveStreams, now: f64, file: bool) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Direction;

    #[test]
    fn only_a_sending_side_holds_the_payload() {
        let server = Side::Server;
        let client = Side::Client {
            in_process_server: false,
        };
        let upload = TestSpec::default();
        assert!(sends_payload(&upload, client));
        assert!(!sends_payload(&upload, server));
        let reverse = TestSpec {
            direction: Direction::Reverse,
            ..TestSpec::default()
        };
        assert!(!sends_payload(&reverse, client));
        assert!(sends_payload(&reverse, server));
        let bidir = TestSpec {
            direction: Direction::Bidir,
            ..TestSpec::default()
        };
        assert!(sends_payload(&bidir, client) && sends_payload(&bidir, server));
        let rr = TestSpec {
            bounceback: Some(crate::wire::Bounceback {
                request_len: 1,
                reply_len: 1,
                hold_us: 0,
                burst: 1,
                busy_poll_us: 0,
            }),
            ..TestSpec::default()
        };
        assert!(sends_payload(&rr, server));
        let run = TestRun::new(upload.clone(), server).expect("run");
        assert!(run.payload.is_empty());
        let run = TestRun::new(upload, client).expect("run");
        assert_eq!(run.payload.len(), run.spec.block_len);
    }

    /// Test time is read from the clock the run was given, not the host's.
    #[test]
    fn test_seconds_and_the_stall_watch_follow_the_runs_clock() {
        let clock = crate::clock::ManualClock::at_unix(1_700_000_000);
        let t0 = clock.now();
        clock.advance(Duration::from_millis(200));
        let run = TestRun::new(TestSpec::default(), Side::Server)
            .expect("run")
            .with_clock(Arc::new(clock.clone()));
        let running = run
            .start(Launch {
                t0,
                owd_correction_ns: 0,
                connect_to: None,
                answered: None,
                interval_s: 1.0,
                interval_histograms: false,
                cpu_start: sock::cpu_sample(t0),
                origin: t0,
            })
            .expect("start");
        assert_eq!(running.now_s(), 0.2);
        clock.advance(Duration::from_millis(2300));
        assert_eq!(running.now_s(), 2.5);
        // Nothing arrives on a side that receives: stalled only once past the limit.
        let mut watch = ReceiveWatch::starting(true, Duration::from_secs(3), clock.now());
        clock.advance(Duration::from_secs(3));
        assert!(!watch.stalled(&running.meter, clock.now()));
        clock.advance(Duration::from_millis(1));
        assert!(watch.stalled(&running.meter, clock.now()));
    }
}
