//! A whole test on one virtual clock: the client's and the server's control machines
//! (`control::ClientMachine`, `control::ServerMachine`, each deadline taken from its
//! `poll_timeout`) talking over a simulated control connection, the stream machines of
//! every stream (TCP: `TcpSender` → [`Pipe`] → `TcpReceiver`; `-u`: `UdpSender` → a
//! seeded `sim::Sim` link → `UdpReceiver`, drained as `LiveStreams::drain_receivers`
//! waits), and each side's meter, ending in the two `Report`s a real run makes, rendered
//! by the usual renderers (`report::text::whole`, `report::json::document`).
//!
//! The conversation is iperf3's, with its bytes: the cookie, `PARAM_EXCHANGE`, the
//! parameters as length-prefixed JSON (`TestSpec::to_params` on the client,
//! `TestSpec::from_params` on the server), `CREATE_STREAMS`, one connection per stream,
//! `TEST_START`, `TEST_RUNNING`, the client's end (`-t`, `-n`, `-k`, as
//! `test_run::end_reached` judges it), `TEST_END`, the drain (a receiver reads until its
//! sender's last byte: it ends with the sender), `EXCHANGE_RESULTS`, both results
//! messages, `DISPLAY_RESULTS`, `IPERF_DONE`. Each message crosses the control link
//! whole, its one-way delay after it was sent. With `--txstart-time` the client starts
//! its data when its own wall clock (offset as the test says) reaches the instant.
//!
//! At one instant the loop runs, in order: control messages, data reads, interval ticks,
//! the client's end, senders, the client's end again (a budget just spent), the drains. Everything is a function of the test and its seed.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::pipe::Pipe;
use crate::world::{Host, WALL0_S};
use netmeter::control::{ClientMachine, ClientStep, ServerEvent, ServerMachine};
use netmeter::engine::machine::Budget;
use netmeter::engine::machine::tcp_recv::{TcpReceiver, TcpRecvStep};
use netmeter::engine::machine::tcp_send::{TcpSendConfig, TcpSendStep, TcpSender};
use netmeter::engine::machine::txstart;
use netmeter::engine::machine::udp::{
    RecvSinks, SendAction, UdpReceiver, UdpSender, UdpSenderConfig,
};
use netmeter::engine::meter::{Meter, receiver_end_s};
use netmeter::engine::record::StreamShared;
use netmeter::engine::test_common::{end_inputs, test_start};
use netmeter::engine::test_run::{DRAIN_IDLE, DRAIN_MAX};
use netmeter::profile::Rng;
use netmeter::report::build::local_results;
use netmeter::report::{Interval, Report, Start};
use netmeter::sim::{Ecn, HostConfig, LinkConfig, LinkId, Sim};
use netmeter::spec::{Direction, EndCondition, Protocol, TestSpec};
use netmeter::stats::UdpRecv;
use netmeter::wire::{self, Params, Results, State};

/// What to run.
#[derive(Debug, Clone)]
pub struct WholeTest {
    /// Draws the data links: 95 to 105 ns a byte (76 to 84 Mbit/s), 4 to 6 ms one way.
    pub seed: u64,
    /// `-P`.
    pub parallel: u32,
    /// `-R`, `--bidir`.
    pub direction: Direction,
    /// `-t`, `-n`, `-k`.
    pub end: EndCondition,
    /// `-O`.
    pub omit: Duration,
    /// `-i` (`None`: `-i 0`).
    pub interval: Option<Duration>,
    /// `-l`.
    pub block_len: usize,
    /// `-b` (0: unpaced).
    pub rate_bps: u64,
    /// `--txstart-time`, this long after the wall clock's time zero.
    pub txstart_after: Option<Duration>,
    /// The client host's wall clock against true time, ns.
    pub client_offset_ns: i64,
    /// The control connection's one-way delay.
    pub ctrl_delay: Duration,
    /// Each data connection's send buffer.
    pub buffer: u64,
    /// A client that opens only this many of its data connections (a stall: the
    /// server's stream deadline passes).
    pub opens: Option<usize>,
    /// `-u`: the streams are UDP, each over a link of the seeded simulator.
    pub udp: Option<LinkConfig>,
}

impl Default for WholeTest {
    fn default() -> WholeTest {
        WholeTest {
            seed: 1,
            parallel: 1,
            direction: Direction::Upload,
            end: EndCondition::Time(2.0),
            omit: Duration::ZERO,
            interval: Some(Duration::from_secs(1)),
            block_len: 128 * 1024,
            rate_bps: 0,
            txstart_after: None,
            client_offset_ns: 0,
            ctrl_delay: Duration::from_millis(5),
            buffer: 64 * 1024,
            opens: None,
            udp: None,
        }
    }
}

/// What came of it.
#[derive(Debug)]
pub struct WholeRun {
    pub client: Report,
    pub server: Report,
    /// The control conversation: `<ns> <side> <what>`, one line a message.
    pub transcript: Vec<String>,
    /// When each side's test clock started (`TEST_START` at the client, or its
    /// `--txstart-time`; `TEST_START` sent at the server), virtual ns.
    pub client_t0_ns: u64,
    pub server_t0_ns: u64,
    /// Each stream's last byte read by its receiver, virtual ns, in stream order.
    pub last_reads_ns: Vec<u64>,
    /// When the client sent `TEST_END`, virtual ns.
    pub test_end_ns: u64,
}

impl WholeRun {
    /// Both reports as the client and the server render them: text, then `-J`.
    pub fn rendered(&self) -> String {
        format!(
            "== client text\n{}== server text\n{}== client json\n{}\n== server json\n{}\n== transcript\n{}\n",
            netmeter::report::text::whole(&self.client),
            netmeter::report::text::whole(&self.server),
            netmeter::report::json::document(&self.client),
            netmeter::report::json::document(&self.server),
            self.transcript.join("\n"),
        )
    }
}

/// One message on the control connection (the data connections' first bytes too).
#[derive(Debug, Clone)]
enum Msg {
    Cookie,
    State(u8),
    Json(Vec<u8>),
    /// A data connection's cookie: the stream is open at the server.
    StreamOpen,
}

/// One direction of the control connection: messages arrive whole, a delay after.
#[derive(Debug, Default)]
struct CtrlLink {
    delay_ns: u64,
    queue: VecDeque<(u64, Msg)>,
}

impl CtrlLink {
    fn send(&mut self, now: u64, m: Msg) {
        self.queue.push_back((now + self.delay_ns, m));
    }
    fn next(&self) -> Option<u64> {
        self.queue.front().map(|q| q.0)
    }
    fn pop(&mut self, now: u64) -> Option<Msg> {
        if self.next().is_some_and(|t| t <= now) {
            return self.queue.pop_front().map(|q| q.1);
        }
        None
    }
}

/// One data stream: its sender's machine, the link, its receiver's machine.
struct Stream {
    /// Sent by the client (else by the server).
    upload: bool,
    pipe: Pipe,
    sender: Option<TcpSender>,
    receiver: TcpReceiver,
    block: Vec<u8>,
    wake: u64,
    tx: Arc<StreamShared>,
    rx: Arc<StreamShared>,
    last_read: Option<u64>,
    eof: bool,
    budget: Option<Arc<Budget>>,
    /// `-u`: the UDP machines and their simulator link (the TCP fields then idle).
    udp: Option<UdpIo>,
}

/// A UDP stream's machines: datagrams go over a link of the simulator.
struct UdpIo {
    link: LinkId,
    len: usize,
    sender: Option<UdpSender>,
    /// Where the sender's `-b` schedule starts, virtual ns.
    origin: u64,
    receiver: UdpReceiver,
    /// Arrived before the receiving side's thread runs (the kernel holds them).
    held: VecDeque<(u64, Vec<u8>)>,
}

impl Stream {
    fn sending(&self) -> bool {
        match &self.udp {
            Some(u) => u.sender.is_some(),
            None => self.sender.is_some(),
        }
    }
}

/// One side: its meter, rows, test clock.
struct Side {
    meter: Meter,
    rows: Vec<Interval>,
    t0: Option<u64>,
    next_tick: Option<u64>,
    /// The side ended its test (client: sent `TEST_END`; server: received it).
    ended: Option<u64>,
    /// Drained: its receivers have read their senders' last bytes; its results.
    results: Option<(Vec<netmeter::report::build::LocalFinal>, Results)>,
}

impl Side {
    fn secs(&self, now: u64) -> f64 {
        now.saturating_sub(self.t0.unwrap_or(now)) as f64 / 1e9
    }
}

/// The whole state of one run.
struct World {
    t: WholeTest,
    /// The UDP streams' network.
    sim: Sim,
    spec: TestSpec,
    a: Host,
    b: Host,
    c2s: CtrlLink,
    s2c: CtrlLink,
    cm: ClientMachine,
    sm: ServerMachine,
    streams: Vec<Stream>,
    client: Side,
    server: Side,
    transcript: Vec<String>,
    server_spec: Option<TestSpec>,
    /// Server results the client read; the client's `EXCHANGE_RESULTS` waiting for
    /// its own drain.
    peer_results: Option<Results>,
    exchange_pending: bool,
    /// `--txstart-time`: the client's data starts at this virtual ns.
    data_start: Option<u64>,
    /// `--txstart-time`: the client's wall clock when it was set up and began to wait.
    txstart_ready: f64,
    /// The client's data threads run (its receivers read).
    client_running: bool,
    /// `start.netmeter.txstart`, the client's.
    txstart: Option<netmeter::report::profile::TxStart>,
    /// A control deadline passed: when, and what the machine said.
    timed_out: Option<(u64, String)>,
    done: bool,
}

fn spec_of(t: &WholeTest) -> TestSpec {
    TestSpec {
        protocol: if t.udp.is_some() {
            Protocol::Udp
        } else {
            Protocol::Tcp
        },
        parallel: t.parallel,
        direction: t.direction,
        end: t.end,
        omit_s: t.omit.as_secs_f64(),
        block_len: t.block_len,
        rate_bps: t.rate_bps,
        ..TestSpec::default()
    }
}

/// Run `t` to its end (bounded: a run that does not finish in 120 virtual seconds, or
/// a control deadline that passes, is a failure).
pub fn run(t: &WholeTest) -> WholeRun {
    match play(t) {
        Ok(r) => r,
        Err((at, e)) => panic!("a control deadline passed at {at} ns: {e}"),
    }
}

/// Run `t` to its end or to a control deadline that passes: when, and the timeout.
pub fn play(t: &WholeTest) -> Result<WholeRun, (u64, String)> {
    let mut w = World::new(t);
    w.send_c2s(0, Msg::Cookie, "cookie");
    w.cm.step_done(w.a.at(0));
    let mut now = 0u64;
    for _ in 0..20_000_000u64 {
        w.step(now);
        if let Some(e) = w.timed_out.take() {
            return Err(e);
        }
        if w.done {
            return Ok(w.finish());
        }
        match w.next_event(now) {
            Some(n) if n <= 120_000_000_000 => now = n,
            other => panic!("the run is stuck at {now} ns (next {other:?})"),
        }
    }
    panic!("the run took too many steps");
}

impl World {
    fn new(t: &WholeTest) -> World {
        let spec = spec_of(t);
        let mut rng = Rng::new(t.seed);
        let ns_per_byte = 95 + rng.next_u64() % 11;
        let delay_ns = 4_000_000 + rng.next_u64() % 2_000_001;
        let bidir = t.direction == Direction::Bidir;
        let budget = |_: bool| match t.end {
            EndCondition::Bytes(n) => Some(Arc::new(Budget::new(n, false))),
            EndCondition::Blocks(k) => Some(Arc::new(Budget::new(k, true))),
            EndCondition::Time(_) => None,
        };
        let (up_budget, down_budget) = (budget(true), budget(false));
        let mut sim = Sim::new(t.seed);
        let (ha, hb) = (
            sim.add_host(HostConfig::default()),
            sim.add_host(HostConfig::default()),
        );
        let protocol = spec_of(t).protocol;
        let mut streams = Vec::new();
        let total = t.parallel * if bidir { 2 } else { 1 };
        for i in 0..total {
            let id = if i == 0 { 1 } else { i as i64 + 2 };
            let upload = match t.direction {
                Direction::Upload => true,
                Direction::Reverse => false,
                Direction::Bidir => i < t.parallel,
            };
            let udp_recv = |sender: bool| {
                (t.udp.is_some() && !sender).then(|| Box::new(Mutex::new(UdpRecv::default())))
            };
            let shared = |sender| {
                Arc::new(StreamShared {
                    id,
                    socket: 5 + i as i64,
                    sender,
                    forward: upload,
                    udp: udp_recv(sender),
                    ..StreamShared::default()
                })
            };
            let udp = t.udp.as_ref().map(|cfg| {
                let (from, to) = if upload { (ha, hb) } else { (hb, ha) };
                UdpIo {
                    link: sim.add_link(from, to, cfg.clone()),
                    len: t.block_len,
                    sender: None,
                    origin: 0,
                    receiver: UdpReceiver::new(false, false, 0),
                    held: VecDeque::new(),
                }
            });
            streams.push(Stream {
                upload,
                pipe: Pipe::new(ns_per_byte, delay_ns, t.buffer),
                sender: None,
                receiver: TcpReceiver::new(false),
                block: vec![0x5a; t.block_len.max(1)],
                wake: 0,
                tx: shared(true),
                rx: shared(false),
                last_read: None,
                eof: false,
                budget: if upload {
                    up_budget.clone()
                } else {
                    down_budget.clone()
                },
                udp,
            });
        }
        let side_of = |client: bool| {
            let shared = streams
                .iter()
                .map(|s| match s.upload == client {
                    true => s.tx.clone(),
                    false => s.rx.clone(),
                })
                .collect();
            Side {
                meter: Meter::new(protocol, bidir, shared, t.omit.as_secs_f64()),
                rows: Vec::new(),
                t0: None,
                next_tick: None,
                ended: None,
                results: None,
            }
        };
        let delay = t.ctrl_delay.as_nanos() as u64;
        World {
            sim,
            client: side_of(true),
            server: side_of(false),
            t: t.clone(),
            spec,
            a: Host::new(t.client_offset_ns),
            b: Host::new(0),
            c2s: CtrlLink {
                delay_ns: delay,
                ..CtrlLink::default()
            },
            s2c: CtrlLink {
                delay_ns: delay,
                ..CtrlLink::default()
            },
            cm: ClientMachine::new(None),
            sm: ServerMachine::new(),
            streams,
            transcript: Vec::new(),
            server_spec: None,
            peer_results: None,
            exchange_pending: false,
            data_start: None,
            txstart_ready: 0.0,
            client_running: false,
            txstart: None,
            timed_out: None,
            done: false,
        }
    }

    fn send_c2s(&mut self, now: u64, m: Msg, what: &str) {
        self.transcript.push(format!("{now:>12} client {what}"));
        self.c2s.send(now, m);
    }

    fn send_s2c(&mut self, now: u64, m: Msg, what: &str) {
        self.transcript.push(format!("{now:>12} server {what}"));
        self.s2c.send(now, m);
    }

    fn next_event(&self, now: u64) -> Option<u64> {
        let deadline = |t: Option<std::time::Instant>, h: &Host| t.map(|i| h.ns(i));
        let mut next: Vec<Option<u64>> = vec![
            self.c2s.next(),
            self.s2c.next(),
            self.client.next_tick,
            self.server.next_tick,
            self.data_start,
            deadline(self.cm.poll_timeout(), &self.a),
            deadline(self.sm.poll_timeout(), &self.b),
        ];
        if let (EndCondition::Time(secs), Some(t0), None) =
            (self.t.end, self.client.t0, self.client.ended)
        {
            next.push(Some(t0 + ((secs + self.spec.omit_s) * 1e9).round() as u64));
        }
        for s in &self.streams {
            next.push(s.pipe.next_event(now));
            if s.sending() && s.wake > now {
                next.push(Some(s.wake));
            }
        }
        next.push(self.sim.next_event().map(|d| d.as_nanos() as u64));
        for client in [true, false] {
            next.push(self.udp_drained_at(client));
        }
        next.into_iter().flatten().filter(|&n| n > now).min()
    }

    fn step(&mut self, now: u64) {
        self.check_deadlines(now);
        if self.timed_out.is_some() {
            return;
        }
        while let Some(m) = self.c2s.pop(now) {
            self.server_hears(now, m);
        }
        while let Some(m) = self.s2c.pop(now) {
            self.client_hears(now, m);
        }
        if self.data_start == Some(now) {
            self.data_start = None;
            self.client_starts(now);
        }
        self.read_streams(now);
        self.read_datagrams(now);
        self.ticks(now);
        self.client_end(now);
        self.send_streams(now);
        // A sender that just spent the -n/-k budget ends the test at once.
        self.client_end(now);
        self.drains(now);
    }

    fn check_deadlines(&mut self, now: u64) {
        if let Err(e) = self.cm.on_timeout(self.a.at(now)) {
            self.timed_out = Some((now, format!("client: {e}")));
        } else if let Err(e) = self.sm.on_timeout(self.b.at(now)) {
            self.timed_out = Some((now, format!("server: {e}")));
        }
    }

    fn server_hears(&mut self, now: u64, m: Msg) {
        let at = self.b.at(now);
        match m {
            Msg::Cookie => {
                self.send_s2c(
                    now,
                    Msg::State(State::ParamExchange.to_byte()),
                    "PARAM_EXCHANGE",
                );
                self.sm.param_exchange_sent(at);
            }
            Msg::Json(bytes) if self.server_spec.is_none() => {
                let p: Params = serde_json::from_slice(&bytes[4..]).expect("parameters");
                let spec = TestSpec::from_params(&p).expect("the server takes them");
                assert!(self.sm.on_params(&p).is_none(), "no extension asked for");
                self.server_spec = Some(spec.negotiated(self.sm.negotiated()));
                self.send_s2c(
                    now,
                    Msg::State(State::CreateStreams.to_byte()),
                    "CREATE_STREAMS",
                );
                self.sm.streams_requested(self.streams.len(), at);
            }
            Msg::Json(bytes) => {
                let _: Results = serde_json::from_slice(&bytes[4..]).expect("client results");
                self.sm.on_client_results();
                let (_, mine) = self.server.results.as_ref().expect("drained before");
                let json = wire::encode_json(mine);
                self.send_s2c(now, Msg::Json(json), "results");
                self.send_s2c(
                    now,
                    Msg::State(State::DisplayResults.to_byte()),
                    "DISPLAY_RESULTS",
                );
                self.sm.results_sent(at);
            }
            Msg::StreamOpen => {
                if self.sm.on_stream() {
                    self.send_s2c(now, Msg::State(State::TestStart.to_byte()), "TEST_START");
                    self.send_s2c(
                        now,
                        Msg::State(State::TestRunning.to_byte()),
                        "TEST_RUNNING",
                    );
                    self.sm.streams_open();
                    self.server.t0 = Some(now);
                    self.server.next_tick = self.t.interval.map(|i| now + i.as_nanos() as u64);
                    self.start_senders(now, false, now);
                }
            }
            Msg::State(b) => {
                let s = State::from_byte(b).expect("a state byte");
                match self.sm.on_state(s).expect("the server follows") {
                    ServerEvent::TestEnd => {
                        self.server.ended = Some(now);
                        self.stop_senders(false);
                    }
                    ServerEvent::Done => self.done = true,
                }
            }
        }
    }

    fn client_hears(&mut self, now: u64, m: Msg) {
        let at = self.a.at(now);
        let b = match m {
            Msg::State(b) => b,
            Msg::Json(bytes) => {
                let r: Results = serde_json::from_slice(&bytes[4..]).expect("server results");
                self.peer_results = Some(r);
                self.cm.on_server_results();
                return;
            }
            other => panic!("the client does not expect {other:?}"),
        };
        let s = State::from_byte(b).expect("a state byte");
        match self.cm.on_state(s, at).expect("the client follows") {
            ClientStep::SendParams => {
                let json = wire::encode_json(&self.spec.to_params(None));
                self.send_c2s(now, Msg::Json(json), "parameters");
            }
            ClientStep::CreateStreams => {
                for i in 0..self.t.opens.unwrap_or(self.streams.len()) {
                    self.send_c2s(now, Msg::StreamOpen, &format!("stream {}", i + 1));
                }
            }
            ClientStep::StartClock => self.client.t0 = Some(now),
            ClientStep::StartData => match self.t.txstart_after {
                // The wall instant on the client's own clock: sleep towards it as
                // `machine::txstart` says, then the test's clock starts there.
                Some(after) => {
                    self.txstart_ready = self.a.wall_s(now);
                    self.data_start = Some(self.txstart_wake(now, after));
                }
                None => self.client_starts(now),
            },
            ClientStep::ExchangeResults => self.exchange_pending = true,
            ClientStep::Display => {
                self.send_c2s(now, Msg::State(State::IperfDone.to_byte()), "IPERF_DONE");
            }
            other => panic!("unexpected client step {other:?}"),
        }
        self.cm.step_done(at);
    }

    /// When the client's wall clock reaches `--txstart-time`, sleeping as the engine
    /// does (at most a second at a time).
    fn txstart_wake(&self, now: u64, after: Duration) -> u64 {
        let at = WALL0_S as f64 + after.as_secs_f64();
        let mut t = now;
        while let Some(d) = txstart::wait(at, 0.0, self.a.wall_s(t)) {
            t += d.as_nanos().max(1) as u64;
        }
        t
    }

    fn client_starts(&mut self, now: u64) {
        if let Some(after) = self.t.txstart_after {
            let at = WALL0_S as f64 + after.as_secs_f64();
            let ready = self.txstart_ready;
            self.txstart = Some(txstart::started(at, ready, self.a.wall_s(now)));
            self.client.t0 = Some(now);
        }
        let t0 = self.client.t0.expect("TEST_START came");
        self.client.next_tick = self.t.interval.map(|i| t0 + i.as_nanos() as u64);
        self.start_senders(now, true, t0);
    }

    /// The senders of one side start: their `-b` schedule from `now`, a timed test's
    /// end from the side's test clock (`schedule_origin`), as `TestRun::start` sets them.
    fn start_senders(&mut self, now: u64, upload: bool, schedule_origin: u64) {
        if upload {
            self.client_running = true;
        }
        let pace_end = match self.t.end {
            EndCondition::Time(secs) => {
                let end = schedule_origin + ((secs + self.spec.omit_s) * 1e9).round() as u64;
                Some(Duration::from_nanos(end.saturating_sub(now)))
            }
            _ => None,
        };
        let host = if upload { &self.a } else { &self.b };
        for s in self.streams.iter_mut().filter(|s| s.upload == upload) {
            s.wake = now;
            if let Some(u) = s.udp.as_mut() {
                let cfg = UdpSenderConfig {
                    len: u.len,
                    seq64: false,
                    ts_ns: false,
                    rate_bps: self.t.rate_bps,
                    burst: None,
                    pace_end,
                    stop_at: None,
                };
                u.sender = Some(UdpSender::new(cfg, s.budget.clone()));
                u.origin = now;
                continue;
            }
            let cfg = TcpSendConfig {
                block_len: self.t.block_len,
                rate_bps: self.t.rate_bps,
                pace_end,
                ..TcpSendConfig::default()
            };
            s.sender = Some(TcpSender::new(cfg, host.at(now)));
            s.wake = now;
        }
    }

    /// A side's senders stop (the control thread's stop): the connection closes after
    /// what they wrote.
    fn stop_senders(&mut self, upload: bool) {
        for s in self.streams.iter_mut().filter(|s| s.upload == upload) {
            if s.sender.take().is_some() {
                s.pipe.close();
            }
            if let Some(u) = s.udp.as_mut() {
                u.sender = None;
            }
        }
    }

    fn read_streams(&mut self, now: u64) {
        let (client_running, server_running) = (self.client_running, self.server.t0.is_some());
        for s in &mut self.streams {
            // A receiver reads once its side's threads run (the kernel holds the rest).
            let running = if s.upload {
                server_running
            } else {
                client_running
            };
            while running && !s.eof {
                let Some(data) = s.pipe.read(now, 128 * 1024) else {
                    break;
                };
                if s.receiver.on_read(&data, |_| {}) == TcpRecvStep::Stop {
                    s.eof = true;
                    break;
                }
                s.last_read = Some(now);
                s.rx.bytes.store(s.receiver.bytes(), Ordering::Relaxed);
                s.rx.packets.store(s.receiver.reads(), Ordering::Relaxed);
            }
        }
    }

    fn ticks(&mut self, now: u64) {
        let every = self.t.interval.map(|i| i.as_nanos() as u64);
        for side in [&mut self.client, &mut self.server] {
            if side.next_tick == Some(now) && side.ended.is_none() {
                let secs = side.secs(now);
                side.rows.push(side.meter.tick(secs));
                side.next_tick = every.map(|i| now + i);
            }
        }
    }

    /// The client's end condition, as `test_run::end_reached` judges it.
    fn client_end(&mut self, now: u64) {
        let Some(t0) = self.client.t0 else {
            return;
        };
        if !self.client_running || self.client.ended.is_some() {
            return;
        }
        let mut senders = self.streams.iter().filter(|s| s.upload).peekable();
        let all_senders_done = senders.peek().is_some() && senders.all(|s| !s.sending());
        let (sb, rb, sp, rp) = self.client.meter.totals();
        let end = match self.t.end {
            EndCondition::Time(secs) => {
                now >= t0 + ((secs + self.spec.omit_s) * 1e9).round() as u64
            }
            EndCondition::Bytes(n) => all_senders_done || sb >= n || rb >= n,
            EndCondition::Blocks(k) => all_senders_done || sp >= k || rp >= k,
        };
        if !end {
            return;
        }
        self.client.ended = Some(now);
        self.client.next_tick = None;
        self.stop_senders(true);
        self.send_c2s(now, Msg::State(State::TestEnd.to_byte()), "TEST_END");
        self.cm.test_ended();
        self.cm.step_done(self.a.at(now));
    }

    /// A side that ended its test is drained once each of its receivers read its
    /// sender's last byte: its last interval and its results.
    fn drains(&mut self, now: u64) {
        for client in [true, false] {
            let side = if client { &self.client } else { &self.server };
            let Some(ended) = side.ended else { continue };
            if side.results.is_some() {
                continue;
            }
            let mine = |s: &&Stream| s.upload != client;
            let drained = match self.udp_drained_at(client) {
                Some(at) => now >= at,
                None => self.streams.iter().filter(mine).all(|s| s.eof),
            };
            if !drained {
                continue;
            }
            let last = self
                .streams
                .iter()
                .filter(mine)
                .filter_map(|s| s.last_read)
                .max();
            let side = if client {
                &mut self.client
            } else {
                &mut self.server
            };
            let end_s = side.secs(ended);
            let recv_end_s = receiver_end_s(end_s, last.map(|l| side.secs(l)));
            let interval_s = self.t.interval.map_or(0.0, |i| i.as_secs_f64());
            if interval_s > 0.0 && side.meter.worth_reporting(recv_end_s, interval_s) {
                side.rows.push(side.meter.tick(recv_end_s));
            }
            let locals = side.meter.finals(end_s, recv_end_s);
            let results = local_results(&locals, (0.0, 0.0, 0.0), false, None);
            side.results = Some((locals, results));
            if !client {
                self.send_s2c(
                    now,
                    Msg::State(State::ExchangeResults.to_byte()),
                    "EXCHANGE_RESULTS",
                );
                self.sm.results_requested(self.b.at(now));
            }
        }
        if self.exchange_pending
            && let Some((_, r)) = self.client.results.as_ref()
        {
            let json = wire::encode_json(r);
            self.exchange_pending = false;
            self.send_c2s(now, Msg::Json(json), "results");
        }
    }

    fn send_streams(&mut self, now: u64) {
        self.send_datagrams(now);
        for s in self.streams.iter_mut().filter(|s| s.udp.is_none()) {
            let host = if s.upload { &self.a } else { &self.b };
            while s.wake <= now {
                let Some(m) = s.sender.as_mut() else { break };
                let budget = s.budget.as_deref();
                let step = m.poll(
                    || host.at(now),
                    || host.wall_ns(now),
                    |n| budget.map_or(n, |b| b.take(n)),
                );
                match step {
                    TcpSendStep::Write { offset, len, .. } => {
                        let n = s.pipe.write(now, &s.block[offset..offset + len]);
                        if n == 0 {
                            break; // the send buffer is full: again when it drains
                        }
                        if m.on_written(n) {
                            s.tx.packets.store(m.blocks(), Ordering::Relaxed);
                        }
                        s.tx.bytes.store(m.bytes(), Ordering::Relaxed);
                    }
                    TcpSendStep::Wait(t) => s.wake = host.ns(t),
                    TcpSendStep::Stop => {
                        s.sender = None;
                        s.pipe.close();
                    }
                }
            }
        }
    }

    /// A UDP side that ended is drained once no datagram came for `DRAIN_IDLE` (from
    /// the end, or from the last arrival), at most `DRAIN_MAX` after the end, as
    /// `LiveStreams::drain_receivers` waits; `None` for TCP or a side still running.
    fn udp_drained_at(&self, client: bool) -> Option<u64> {
        self.t.udp.as_ref()?;
        let side = if client { &self.client } else { &self.server };
        let ended = side.ended.filter(|_| side.results.is_none())?;
        let mine = self.streams.iter().filter(|s| s.upload != client);
        let last = mine
            .filter_map(|s| s.last_read)
            .max()
            .unwrap_or(0)
            .max(ended);
        let idle = last + DRAIN_IDLE.as_nanos() as u64;
        Some(idle.min(ended + DRAIN_MAX.as_nanos() as u64))
    }

    /// Datagrams that arrived by `now`, to their receivers (held until the receiving
    /// side's thread runs).
    fn read_datagrams(&mut self, now: u64) {
        if self.t.udp.is_none() {
            return;
        }
        self.sim.advance_to(Duration::from_nanos(now));
        while let Some(d) = self.sim.pop_delivery() {
            let s = self
                .streams
                .iter_mut()
                .find(|s| s.udp.as_ref().is_some_and(|u| u.link == d.link))
                .expect("a stream's link");
            let u = s.udp.as_mut().expect("UDP");
            u.held.push_back((d.at.as_nanos() as u64, d.payload));
        }
        let (client_running, server_running) = (self.client_running, self.server.t0.is_some());
        for s in &mut self.streams {
            let running = if s.upload {
                server_running
            } else {
                client_running
            };
            let (Some(u), true) = (s.udp.as_mut(), running) else {
                continue;
            };
            let host = if s.upload { &self.b } else { &self.a };
            let mut acc = s.rx.udp.as_ref().expect("a receiver").lock().expect("lock");
            while let Some((at, payload)) = u.held.pop_front() {
                let mut sinks = RecvSinks {
                    acc: &mut acc,
                    owd: None,
                    frames: None,
                };
                u.receiver
                    .on_message(&payload, 0, host.wall_ns(now), &mut sinks);
                s.last_read = Some(now.max(at));
            }
            drop(acc);
            s.rx.bytes.store(u.receiver.bytes(), Ordering::Relaxed);
            s.rx.packets
                .store(u.receiver.datagrams(), Ordering::Relaxed);
            s.rx.messages
                .store(u.receiver.messages(), Ordering::Relaxed);
        }
    }

    /// UDP senders due at `now`: a `sendmmsg` batch of up to 32 datagrams, the next
    /// when a 1 Gbit/s interface has put them on the wire.
    fn send_datagrams(&mut self, now: u64) {
        for s in &mut self.streams {
            let Some(u) = s.udp.as_mut() else { continue };
            let host = if s.upload { &self.a } else { &self.b };
            if s.wake > now {
                continue;
            }
            let Some(m) = u.sender.as_mut() else { continue };
            let since = Duration::from_nanos(now - u.origin);
            match m.poll(since, 32) {
                SendAction::Send(n) => {
                    let mut buf = vec![0x5a; u.len * n];
                    m.write_headers(&mut buf, 0, n, host.wall_ns(now));
                    for d in buf.chunks(u.len).take(n) {
                        self.sim.send(u.link, d.to_vec(), Ecn::NotEct);
                    }
                    m.on_sent(n, n);
                    s.tx.bytes.store(m.bytes(), Ordering::Relaxed);
                    s.tx.packets.store(m.datagrams(), Ordering::Relaxed);
                    s.tx.messages.store(m.messages(), Ordering::Relaxed);
                    s.wake = now + (n * u.len * 8) as u64;
                }
                SendAction::Wait(d) => s.wake = now + (d.as_nanos() as u64).max(1),
                SendAction::Stop => u.sender = None,
            }
        }
    }

    fn finish(self) -> WholeRun {
        let interval_s = self.t.interval.map_or(0.0, |i| i.as_secs_f64());
        let server_spec = self
            .server_spec
            .clone()
            .expect("the server read the parameters");
        let (client_locals, client_results) = self.client.results.expect("the client drained");
        let (server_locals, _) = self.server.results.expect("the server drained");
        let report = |spec: &TestSpec, locals, peer, client, rows, txstart| {
            let mut start = Start {
                test_start: test_start(spec, interval_s),
                ..Start::default()
            };
            start.netmeter.txstart = txstart;
            let end = netmeter::report::build::end(&end_inputs(
                &start,
                spec,
                locals,
                peer,
                (0.0, 0.0, 0.0),
                None,
                client,
                false,
            ));
            Report {
                start,
                intervals: rows,
                end,
                ..Report::default()
            }
        };
        let peer = self
            .peer_results
            .expect("the client read the server's results");
        WholeRun {
            client: report(
                &self.spec,
                &client_locals,
                &peer,
                true,
                self.client.rows,
                self.txstart,
            ),
            server: report(
                &server_spec,
                &server_locals,
                &client_results,
                false,
                self.server.rows,
                None,
            ),
            transcript: self.transcript,
            client_t0_ns: self.client.t0.unwrap_or(0),
            server_t0_ns: self.server.t0.unwrap_or(0),
            last_reads_ns: self
                .streams
                .iter()
                .map(|s| s.last_read.unwrap_or(0))
                .collect(),
            test_end_ns: self.client.ended.unwrap_or(0),
        }
    }
}
