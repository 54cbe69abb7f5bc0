//! `Pair`: both control machines driven against each other on virtual time, as
//! quinn-proto's tests drive two endpoints. The harness owns a [`ManualClock`] and the
//! two directions of an in-memory control connection (the bytes iperf3 puts on the wire:
//! the cookie, state bytes, length-prefixed JSON, the error trailer, each arriving one
//! link delay after it was sent) and plays each side's driver the way the engine does
//! (`engine::client`, `engine::server::session`): what the machine's step asks, then
//! `step_done`; it moves the clock only to the next thing due (a message, a stream, a
//! side's own timer, a machine's `poll_timeout`), so every run is exact and takes no
//! real time. A script makes either side misbehave (vanish, refuse, stall).
//!
//! Test-only: it builds the parameters and reads them back with `spec::TestSpec`, as
//! the drivers do (nothing outside tests makes `control` use `spec`).

use super::*;
use crate::clock::{Clock, ManualClock};
use crate::spec::{Direction, EndCondition, TestSpec};
use crate::wire::{Cookie, ErrCode, Results};
use std::collections::VecDeque;

/// One message in flight on one direction of the control connection.
struct InFlight {
    at: Instant,
    bytes: Vec<u8>,
}

/// One direction of the control connection: bytes in flight, then bytes arrived and
/// not yet read.
#[derive(Default)]
struct Pipe {
    flight: VecDeque<InFlight>,
    arrived: Vec<u8>,
}

impl Pipe {
    fn send(&mut self, at: Instant, bytes: &[u8]) {
        self.flight.push_back(InFlight {
            at,
            bytes: bytes.to_vec(),
        });
    }

    /// Move what has arrived by `now` to the reading end.
    fn deliver(&mut self, now: Instant) -> bool {
        let mut moved = false;
        while self.flight.front().is_some_and(|m| m.at <= now) {
            if let Some(m) = self.flight.pop_front() {
                self.arrived.extend_from_slice(&m.bytes);
                moved = true;
            }
        }
        moved
    }

    fn next_at(&self) -> Option<Instant> {
        self.flight.front().map(|m| m.at)
    }

    fn take(&mut self, n: usize) -> Option<Vec<u8>> {
        (self.arrived.len() >= n).then(|| self.arrived.drain(..n).collect())
    }

    fn take_state(&mut self) -> Option<State> {
        let b = self.take(1)?;
        Some(State::from_byte(b[0]).expect("the harness sends known states"))
    }

    /// One whole length-prefixed JSON message, once it has all arrived.
    fn take_json<T: for<'de> serde::Deserialize<'de>>(&mut self) -> Option<T> {
        let hdr: [u8; 4] = self.arrived.get(..4)?.try_into().ok()?;
        let len = wire::decode_json_len(hdr, u32::MAX).expect("a sane length");
        let all = self.take(4 + len)?;
        Some(wire::decode_json(&all[4..]).expect("the harness sends valid JSON"))
    }
}

/// How a side's conversation ended.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// The conversation completed.
    Done,
    /// The machine's deadline passed.
    TimedOut(Timeout),
    /// The client refused a state byte.
    Client(ClientFailure),
    /// The server answered with `SERVER_ERROR` and this code.
    ServerError(ErrCode),
    /// The script made this side go silent (its host vanished).
    Vanished,
    /// The server ended on purpose (refused, or a test stopped by the client).
    Stopped(&'static str),
}

/// Where a scripted client goes silent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vanish {
    /// After the cookie: the parameters never come.
    BeforeParams,
    /// After opening this many data streams.
    AfterStreams(usize),
    /// When its data starts: `TEST_END` never comes.
    MidTest,
    /// After `TEST_END`, when `EXCHANGE_RESULTS` comes: its results never do.
    BeforeResults,
    /// After the results: `IPERF_DONE` never comes.
    BeforeDone,
}

/// What the scripted client does.
pub struct ClientScript {
    pub spec: TestSpec,
    /// Ask for netmeter's extensions.
    pub extensions: bool,
    pub vanish: Option<Vanish>,
    /// How long opening one data stream takes.
    pub per_stream: Duration,
    /// `--txstart-time`: the wall-clock start asked for (seconds since the epoch).
    pub txstart: Option<f64>,
}

/// What the scripted server does.
#[derive(Default)]
pub struct ServerScript {
    /// Refuse after the cookie with `ACCESS_DENIED` (busy).
    pub busy: bool,
    /// Refuse the parameters with `SERVER_ERROR` and this code.
    pub refuse: Option<ErrCode>,
    /// Never answer `TEST_END` (a server stuck in its drain).
    pub stall_after_test_end: bool,
    /// Go silent right after the cookie.
    pub silent: bool,
}

/// A timer of the client driver's own (not a conversation deadline).
#[derive(Debug, Clone, Copy, PartialEq)]
enum ClientTimer {
    /// The last data stream is open: `CREATE_STREAMS`' step is done.
    StreamsOpen,
    /// Data starts (at `TEST_RUNNING`, or at `--txstart-time`).
    StartData,
    /// The end condition: send `TEST_END`.
    EndTest,
}

/// What the client driver reads next.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ClientRead {
    State,
    ExtAnswer,
    ServerResults,
    ErrorTrailer,
}

/// What the server driver reads next.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ServerRead {
    Cookie,
    Params,
    Streams,
    State,
    ClientResults,
}

/// Both machines, the connection between them, and the clock.
pub struct Pair {
    pub clock: ManualClock,
    /// When the harness began (virtual time zero).
    pub start: Instant,
    /// One-way delay of the control connection and the data streams.
    pub delay: Duration,
    pub client: ClientMachine,
    pub server: ServerMachine,
    cs: ClientScript,
    ss: ServerScript,
    c2s: Pipe,
    s2c: Pipe,
    /// Data streams on their way to the server (arrival times).
    streams: VecDeque<Instant>,
    client_read: ClientRead,
    server_read: ServerRead,
    client_timer: Option<(Instant, ClientTimer)>,
    /// The streams the server awaits (from the parameters, as `TestSpec` reads them).
    pub server_total: usize,
    pub client_end: Option<End>,
    pub server_end: Option<End>,
    /// Each state byte as it was sent: (virtual time, sender, state).
    pub transcript: Vec<(Duration, &'static str, State)>,
    /// When `TEST_START` reached the client, and when its data started.
    pub test_start: Option<Instant>,
    pub data_start: Option<Instant>,
    /// When the server sent `TEST_RUNNING` (its test clock's origin).
    pub server_t0: Option<Instant>,
    /// `--txstart-time`: how late data started after the instant asked for (ns).
    pub txstart_late_ns: Option<i64>,
}

impl Pair {
    /// A pair whose wall clock reads `wall_s` (seconds since the epoch) at the start.
    pub fn new(cs: ClientScript, ss: ServerScript, delay: Duration, wall_s: u64) -> Pair {
        let clock = ManualClock::at_unix(wall_s);
        let start = clock.now();
        let request = cs.extensions.then(|| cs.spec.ext_request());
        Pair {
            client: ClientMachine::new(request.as_ref()),
            server: ServerMachine::new(),
            clock,
            start,
            delay,
            cs,
            ss,
            c2s: Pipe::default(),
            s2c: Pipe::default(),
            streams: VecDeque::new(),
            client_read: ClientRead::State,
            server_read: ServerRead::Cookie,
            client_timer: None,
            server_total: 0,
            client_end: None,
            server_end: None,
            transcript: Vec::new(),
            test_start: None,
            data_start: None,
            server_t0: None,
            txstart_late_ns: None,
        }
    }

    /// Virtual time since the start.
    pub fn elapsed(&self, t: Instant) -> Duration {
        t - self.start
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }

    fn client_state(&mut self, s: State) {
        let now = self.now();
        self.transcript.push((now - self.start, "client", s));
        self.c2s.send(now + self.delay, &[s.to_byte()]);
    }

    fn server_state(&mut self, s: State) {
        let now = self.now();
        self.transcript.push((now - self.start, "server", s));
        self.s2c.send(now + self.delay, &[s.to_byte()]);
    }

    /// The states `who` sent, in order.
    pub fn sent_by(&self, who: &str) -> Vec<State> {
        self.transcript
            .iter()
            .filter(|(_, w, _)| *w == who)
            .map(|(_, _, s)| *s)
            .collect()
    }

    /// Run until both sides have ended, nothing more can happen, or `limit` of virtual
    /// time has passed.
    pub fn run(&mut self, limit: Duration) {
        // The client connects and sends its cookie; its wait for PARAM_EXCHANGE starts.
        let now = self.now();
        let cookie = Cookie::from_random(&[7; wire::COOKIE_LEN - 1]);
        self.c2s.send(now + self.delay, &cookie.0);
        self.client.step_done(now);
        loop {
            let now = self.now();
            let mut moved = self.c2s.deliver(now) | self.s2c.deliver(now);
            moved |= self.server_turn(now);
            moved |= self.client_turn(now);
            if moved {
                continue;
            }
            if self.client_end.is_none()
                && let Err(t) = self.client.on_timeout(now)
            {
                self.client_end = Some(End::TimedOut(t));
            }
            if self.server_end.is_none()
                && let Err(t) = self.server.on_timeout(now)
            {
                self.server_end = Some(End::TimedOut(t));
            }
            if self.client_end.is_some() && self.server_end.is_some() {
                return;
            }
            let next = [
                self.c2s.next_at(),
                self.s2c.next_at(),
                self.streams
                    .front()
                    .copied()
                    .filter(|_| self.server_end.is_none()),
                self.client_timer.map(|(t, _)| t),
                self.client_end
                    .is_none()
                    .then(|| self.client.poll_timeout())
                    .flatten(),
                self.server_end
                    .is_none()
                    .then(|| self.server.poll_timeout())
                    .flatten(),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(t) if t > now && t - self.start <= limit => self.clock.advance_to(t),
                // Beyond the limit, or nothing more will happen.
                _ => return,
            }
        }
    }

    /// The client driver: its own timers, then what has arrived.
    fn client_turn(&mut self, now: Instant) -> bool {
        if self.client_end.is_some() {
            return false;
        }
        if let Some((at, timer)) = self.client_timer
            && at <= now
        {
            self.client_timer = None;
            self.client_timer_fired(timer, now);
            return true;
        }
        match self.client_read {
            ClientRead::State => match self.s2c.take_state() {
                Some(s) => self.client_on_state(s, now),
                None => return false,
            },
            ClientRead::ExtAnswer => match self.s2c.take_json::<ExtAnswer>() {
                Some(a) => {
                    self.client.on_ext_answer(&a);
                    self.client_read = ClientRead::State;
                    self.client.step_done(now);
                }
                None => return false,
            },
            ClientRead::ServerResults => match self.s2c.take_json::<Results>() {
                Some(_) => {
                    self.client.on_server_results();
                    self.client_read = ClientRead::State;
                    self.client.step_done(now);
                }
                None => return false,
            },
            ClientRead::ErrorTrailer => match self.s2c.take(8) {
                Some(b) => {
                    let b: [u8; 8] = b.try_into().expect("8 bytes");
                    let (code, _) = wire::decode_error_trailer(b);
                    self.client_end = Some(End::ServerError(code));
                }
                None => return false,
            },
        }
        true
    }

    fn client_on_state(&mut self, s: State, now: Instant) {
        let step = match self.client.on_state(s, now) {
            Ok(step) => step,
            Err(e) => {
                self.client_end = Some(End::Client(e));
                return;
            }
        };
        match step {
            ClientStep::SendParams => {
                if self.cs.vanish == Some(Vanish::BeforeParams) {
                    self.client_end = Some(End::Vanished);
                    return;
                }
                let request = self.cs.extensions.then(|| self.cs.spec.ext_request());
                let params = self.cs.spec.to_params(request);
                self.c2s.send(now + self.delay, &wire::encode_json(&params));
                self.client.step_done(now);
            }
            ClientStep::ReadExtAnswer => self.client_read = ClientRead::ExtAnswer,
            ClientStep::CreateStreams => self.open_streams(now),
            ClientStep::StartClock => {
                self.test_start = Some(now);
                self.client.step_done(now);
            }
            ClientStep::StartData => {
                // `--txstart-time`: data starts at the wall-clock instant asked for, at
                // once if it has passed (`engine::profile::client_t0`).
                let at = match self.cs.txstart {
                    Some(t) => now + wall_until(epoch_ns(t), self.clock.wall_ns()),
                    None => now,
                };
                self.client_timer = Some((at, ClientTimer::StartData));
            }
            ClientStep::ExchangeResults => {
                if self.cs.vanish == Some(Vanish::BeforeResults) {
                    self.client_end = Some(End::Vanished);
                    return;
                }
                self.c2s
                    .send(now + self.delay, &wire::encode_json(&Results::default()));
                self.client.step_done(now);
                self.client_read = ClientRead::ServerResults;
            }
            ClientStep::Display => {
                if self.cs.vanish == Some(Vanish::BeforeDone) {
                    self.client_end = Some(End::Vanished);
                    return;
                }
                self.client_state(State::IperfDone);
                self.client_end = Some(End::Done);
            }
            ClientStep::ReadServerError => self.client_read = ClientRead::ErrorTrailer,
            ClientStep::Authenticate | ClientStep::ReadThirdParty | ClientStep::ReadMcastAnswer => {
                panic!("the harness does not script {step:?}")
            }
        }
    }

    /// `CREATE_STREAMS`: open the streams one after another (with `--txstart-time`,
    /// first wait until their setup lead before the start, `profile::stream_setup_lead_s`).
    fn open_streams(&mut self, now: Instant) {
        let total = self.cs.spec.total_streams() as usize;
        let mut at = now;
        if let Some(t) = self.cs.txstart {
            let rtt_s = 2.0 * self.delay.as_secs_f64();
            let lead = crate::profile::stream_setup_lead_s(rtt_s, total as u32);
            let until = wall_until(epoch_ns(t), self.clock.wall_ns());
            at += until.saturating_sub(Duration::from_secs_f64(lead));
        }
        let opened = match self.cs.vanish {
            Some(Vanish::AfterStreams(n)) => n.min(total),
            _ => total,
        };
        for _ in 0..opened {
            at += self.cs.per_stream;
            self.streams.push_back(at + self.delay);
        }
        if opened < total {
            self.client_end = Some(End::Vanished);
        } else {
            self.client_timer = Some((at, ClientTimer::StreamsOpen));
        }
    }

    fn client_timer_fired(&mut self, timer: ClientTimer, now: Instant) {
        match timer {
            ClientTimer::StreamsOpen => self.client.step_done(now),
            ClientTimer::StartData if self.cs.vanish == Some(Vanish::MidTest) => {
                self.client_end = Some(End::Vanished);
            }
            ClientTimer::StartData => {
                self.data_start = Some(now);
                self.txstart_late_ns = self.cs.txstart.map(|t| self.clock.wall_ns() - epoch_ns(t));
                let secs = match self.cs.spec.end {
                    EndCondition::Time(t) => t,
                    _ => 1.0,
                };
                let end = now + Duration::from_secs_f64(secs);
                self.client_timer = Some((end, ClientTimer::EndTest));
            }
            ClientTimer::EndTest => {
                // Stop sending, TEST_END, drain (no time here): the results are due.
                self.client_state(State::TestEnd);
                self.client.test_ended();
                self.client.step_done(now);
            }
        }
    }

    /// The server driver: what has arrived, in the order the session reads it.
    fn server_turn(&mut self, now: Instant) -> bool {
        if self.server_end.is_some() {
            return false;
        }
        match self.server_read {
            ServerRead::Cookie => {
                if self.c2s.take(wire::COOKIE_LEN).is_none() {
                    return false;
                }
                if self.ss.silent {
                    self.server_end = Some(End::Vanished);
                } else if self.ss.busy {
                    self.server_state(State::AccessDenied);
                    self.server_end = Some(End::Stopped("busy"));
                } else {
                    self.server_state(State::ParamExchange);
                    let _ = self.server.param_exchange_sent(now);
                    self.server_read = ServerRead::Params;
                }
            }
            ServerRead::Params => match self.c2s.take_json::<Params>() {
                Some(p) => self.server_on_params(&p, now),
                None => return false,
            },
            ServerRead::Streams => {
                if self.streams.front().is_none_or(|&t| t > now) {
                    return false;
                }
                self.streams.pop_front();
                if self.server.on_stream() {
                    self.server_state(State::TestStart);
                    self.server_state(State::TestRunning);
                    self.server_t0 = Some(now);
                    self.server.streams_open();
                    self.server_read = ServerRead::State;
                }
            }
            ServerRead::State => match self.c2s.take_state() {
                Some(s) => self.server_on_state(s, now),
                None => return false,
            },
            ServerRead::ClientResults => match self.c2s.take_json::<Results>() {
                Some(_) => {
                    self.server.on_client_results();
                    let mine = wire::encode_json(&Results::default());
                    self.s2c.send(now + self.delay, &mine);
                    self.server_state(State::DisplayResults);
                    let _ = self.server.results_sent(now);
                    self.server_read = ServerRead::State;
                }
                None => return false,
            },
        }
        true
    }

    fn server_on_params(&mut self, p: &Params, now: Instant) {
        let answer = self.server.on_params(p);
        let refused = match TestSpec::from_params(p) {
            Ok(spec) => {
                self.server_total = spec.total_streams() as usize;
                self.ss.refuse
            }
            Err(e) => Some(e.code),
        };
        if let Some(code) = refused {
            self.s2c
                .send(now + self.delay, &wire::encode_server_error(code, 0));
            self.transcript
                .push((now - self.start, "server", State::ServerError));
            self.server_end = Some(End::Stopped("refused"));
            return;
        }
        if let Some(a) = answer {
            self.server_state(State::NetmeterExt);
            self.s2c.send(now + self.delay, &wire::encode_json(&a));
        }
        self.server_state(State::CreateStreams);
        let _ = self.server.streams_requested(self.server_total, now);
        self.server_read = ServerRead::Streams;
    }

    fn server_on_state(&mut self, s: State, now: Instant) {
        match self.server.on_state(s) {
            Ok(ServerEvent::TestEnd) if self.ss.stall_after_test_end => {
                self.server_end = Some(End::Vanished);
            }
            Ok(ServerEvent::TestEnd) => {
                self.server_state(State::ExchangeResults);
                let _ = self.server.results_requested(now);
                self.server_read = ServerRead::ClientResults;
            }
            Ok(ServerEvent::Done) => self.server_end = Some(End::Done),
            Err(_) => self.server_end = Some(End::Stopped("client error")),
        }
    }
}

/// Seconds since the epoch as nanoseconds, exactly for a fraction f64 holds exactly
/// (`1700000003.5`): whole seconds and fraction apart.
fn epoch_ns(at_s: f64) -> i64 {
    let secs = at_s.floor();
    secs as i64 * 1_000_000_000 + ((at_s - secs) * 1e9).round() as i64
}

/// How long from a wall clock reading `wall_ns` until the instant `at_ns` (zero if it
/// has passed).
fn wall_until(at_ns: i64, wall_ns: i64) -> Duration {
    Duration::from_nanos(at_ns.saturating_sub(wall_ns).max(0) as u64)
}

/// A `-t secs` test as the client asks for it.
fn spec(secs: f64, parallel: u32, direction: Direction) -> TestSpec {
    TestSpec {
        end: EndCondition::Time(secs),
        parallel,
        direction,
        ..TestSpec::default()
    }
}

fn client(spec: TestSpec, extensions: bool) -> ClientScript {
    ClientScript {
        spec,
        extensions,
        vanish: None,
        per_stream: Duration::from_millis(1),
        txstart: None,
    }
}

const MS: Duration = Duration::from_millis(1);
const WALL: u64 = 1_700_000_000;
const LIMIT: Duration = Duration::from_secs(600);

/// A pair with a 10 ms one-way control link.
fn pair(cs: ClientScript, ss: ServerScript) -> Pair {
    Pair::new(cs, ss, 10 * MS, WALL)
}

#[test]
fn an_iperf3_conversation_runs_in_order_on_virtual_time() {
    let mut p = pair(
        client(spec(10.0, 1, Direction::Upload), false),
        ServerScript::default(),
    );
    p.run(LIMIT);
    assert_eq!(p.client_end, Some(End::Done));
    assert_eq!(p.server_end, Some(End::Done));
    use State as S;
    assert_eq!(
        p.sent_by("server"),
        [
            S::ParamExchange,
            S::CreateStreams,
            S::TestStart,
            S::TestRunning,
            S::ExchangeResults,
            S::DisplayResults
        ]
    );
    assert_eq!(p.sent_by("client"), [S::TestEnd, S::IperfDone]);
    assert_eq!(p.server.negotiated().peer, Peer::Iperf3);
    // Cookie at 0 (arrives 10 ms), PARAM_EXCHANGE 10 → 20, params 20 → 30,
    // CREATE_STREAMS 30 → 40, the stream opened at 41 arrives at 51: TEST_START there,
    // at the client at 61, data from 61 for 10 s, TEST_END at 10.061 s.
    assert_eq!(p.elapsed(p.server_t0.unwrap()), 51 * MS);
    assert_eq!(p.elapsed(p.test_start.unwrap()), 61 * MS);
    assert_eq!(p.elapsed(p.data_start.unwrap()), 61 * MS);
    let test_end = p.transcript.iter().find(|t| t.2 == S::TestEnd).unwrap();
    assert_eq!(test_end.0, Duration::from_millis(10_061));
    // Nothing is left awaited once both are done.
    assert_eq!(
        (p.client.poll_timeout(), p.server.poll_timeout()),
        (None, None)
    );
}

#[test]
fn a_netmeter_conversation_negotiates_the_same_features_on_both_sides() {
    let mut s = spec(5.0, 2, Direction::Upload);
    s.trip_times = false;
    s.protocol = crate::spec::Protocol::Udp;
    s.block_len = wire::UDP_DEFAULT_LEN;
    let mut p = pair(client(s, true), ServerScript::default());
    p.run(LIMIT);
    assert_eq!(
        (p.client_end.clone(), p.server_end.clone()),
        (Some(End::Done), Some(End::Done))
    );
    assert_eq!(
        p.sent_by("server")[..3],
        [
            State::ParamExchange,
            State::NetmeterExt,
            State::CreateStreams
        ]
    );
    let (c, s) = (p.client.negotiated(), p.server.negotiated());
    assert_eq!(
        c.peer,
        Peer::Netmeter {
            version: wire::EXT_VERSION
        }
    );
    assert_eq!(c.features(), s.features());
    assert!(c.has(Feature::UdpSeq64));
    assert_eq!(p.server_total, 2);
}

#[test]
fn the_parameters_deadline_fires_at_exactly_ten_seconds() {
    let mut cs = client(spec(10.0, 1, Direction::Upload), false);
    cs.vanish = Some(Vanish::BeforeParams);
    let mut p = pair(cs, ServerScript::default());
    p.run(LIMIT);
    let t = Timeout {
        awaited: Awaited::Params,
        after: PARAMS_TIMEOUT,
    };
    assert_eq!(p.server_end, Some(End::TimedOut(t)));
    // PARAM_EXCHANGE went out when the cookie arrived (10 ms): due 10 s later.
    assert_eq!(p.elapsed(p.clock.now()), 10 * MS + PARAMS_TIMEOUT);
    assert_eq!(
        t.to_string(),
        "timed out after 10.0 s waiting for the client's parameters"
    );
}

#[test]
fn a_deadline_is_not_due_a_nanosecond_early() {
    let mut m = ServerMachine::new();
    let c = ManualClock::at_unix(WALL);
    let wait = m.streams_requested(3, c.now());
    assert_eq!(wait.until, c.now() + STREAMS_TIMEOUT);
    assert_eq!(wait.what, "stream setup");
    c.advance(STREAMS_TIMEOUT - Duration::from_nanos(1));
    assert_eq!(m.on_timeout(c.now()), Ok(()));
    assert!(!m.on_stream());
    c.advance(Duration::from_nanos(1));
    let t = m.on_timeout(c.now()).unwrap_err();
    assert_eq!(
        t.awaited,
        Awaited::Streams {
            opened: 1,
            total: 3
        }
    );
    assert_eq!(m.poll_timeout(), None, "a deadline fires once");
    assert_eq!(m.phase, ServerPhase::Done);
}

#[test]
fn a_client_that_vanishes_while_opening_streams_is_given_up_at_twenty_seconds() {
    let mut cs = client(spec(10.0, 3, Direction::Upload), false);
    cs.vanish = Some(Vanish::AfterStreams(2));
    let mut p = pair(cs, ServerScript::default());
    p.run(LIMIT);
    assert_eq!(
        p.server_end,
        Some(End::TimedOut(Timeout {
            awaited: Awaited::Streams {
                opened: 2,
                total: 3
            },
            after: STREAMS_TIMEOUT,
        }))
    );
    // CREATE_STREAMS went out at 30 ms.
    assert_eq!(p.elapsed(p.clock.now()), 30 * MS + STREAMS_TIMEOUT);
    assert_eq!(p.client_end, Some(End::Vanished));
}

#[test]
fn the_client_waits_thirty_seconds_after_test_end_for_the_results_exchange() {
    let ss = ServerScript {
        stall_after_test_end: true,
        ..ServerScript::default()
    };
    let mut p = pair(client(spec(2.0, 1, Direction::Upload), false), ss);
    p.run(LIMIT);
    let t = Timeout {
        awaited: Awaited::ResultsExchange,
        after: CTRL_TIMEOUT,
    };
    assert_eq!(p.client_end, Some(End::TimedOut(t)));
    // TEST_END at 61 ms + 2 s; the grace runs from there.
    assert_eq!(
        p.elapsed(p.clock.now()),
        Duration::from_millis(2_061) + CTRL_TIMEOUT
    );
    assert_eq!(
        t.to_string(),
        "timed out after 30.0 s waiting for the server's results exchange"
    );
}

#[test]
fn the_server_waits_thirty_seconds_for_the_results_of_a_client_that_vanished() {
    let mut cs = client(spec(1.0, 1, Direction::Upload), false);
    cs.vanish = Some(Vanish::BeforeResults);
    let mut p = pair(cs, ServerScript::default());
    p.run(LIMIT);
    assert_eq!(
        p.server_end,
        Some(End::TimedOut(Timeout {
            awaited: Awaited::ClientResults,
            after: CTRL_TIMEOUT,
        }))
    );
    // TEST_END sent at 1.061 s reaches the server at 1.071 s: EXCHANGE_RESULTS then.
    assert_eq!(
        p.elapsed(p.clock.now()),
        Duration::from_millis(1_071) + CTRL_TIMEOUT
    );
}

#[test]
fn a_client_that_never_acknowledges_the_results_is_given_up_after_ten_seconds() {
    let mut cs = client(spec(1.0, 1, Direction::Upload), false);
    cs.vanish = Some(Vanish::BeforeDone);
    let mut p = pair(cs, ServerScript::default());
    p.run(LIMIT);
    let t = Timeout {
        awaited: Awaited::Done,
        after: DONE_TIMEOUT,
    };
    assert_eq!(p.server_end, Some(End::TimedOut(t)));
    // Results in at 1.091 s (TEST_END 1.071, EXCHANGE_RESULTS → 1.081, results → 1.091).
    assert_eq!(
        p.elapsed(p.clock.now()),
        Duration::from_millis(1_091) + DONE_TIMEOUT
    );
    assert_eq!(
        t.to_string(),
        "timed out after 10.0 s waiting for IPERF_DONE"
    );
}

#[test]
fn a_silent_server_is_given_up_thirty_seconds_after_the_cookie() {
    let ss = ServerScript {
        silent: true,
        ..ServerScript::default()
    };
    let mut p = pair(client(spec(10.0, 1, Direction::Upload), false), ss);
    p.run(LIMIT);
    assert_eq!(
        p.client_end,
        Some(End::TimedOut(Timeout {
            awaited: Awaited::ServerMessage,
            after: CTRL_TIMEOUT,
        }))
    );
    assert_eq!(p.elapsed(p.clock.now()), CTRL_TIMEOUT);
}

#[test]
fn a_server_that_refuses_ends_the_client_at_once() {
    // Busy: ACCESS_DENIED after the cookie.
    let busy = ServerScript {
        busy: true,
        ..ServerScript::default()
    };
    let mut p = pair(client(spec(10.0, 1, Direction::Upload), false), busy);
    p.run(LIMIT);
    assert_eq!(p.client_end, Some(End::Client(ClientFailure::AccessDenied)));
    assert_eq!(p.elapsed(p.clock.now()), 20 * MS);
    // A refused test: SERVER_ERROR and its code after the parameters.
    let refuse = ServerScript {
        refuse: Some(ErrCode::ServerTestDurationExpired),
        ..ServerScript::default()
    };
    let mut p = pair(client(spec(10.0, 1, Direction::Upload), false), refuse);
    p.run(LIMIT);
    assert_eq!(
        p.client_end,
        Some(End::ServerError(ErrCode::ServerTestDurationExpired))
    );
    assert_eq!(p.elapsed(p.clock.now()), 40 * MS);
    assert_eq!(p.client.poll_timeout(), None);
}

#[test]
fn the_clients_wait_starts_when_its_own_step_is_done() {
    // Opening 5 streams takes this client 25 s: longer than the 20 s the server gives
    // (by 20.03 s three had arrived, at 5.05, 10.05 and 15.05 s).
    let mut cs = client(spec(10.0, 5, Direction::Upload), false);
    cs.per_stream = Duration::from_secs(5);
    let mut p = pair(cs, ServerScript::default());
    p.run(Duration::from_secs(26));
    assert!(matches!(
        p.server_end,
        Some(End::TimedOut(Timeout {
            awaited: Awaited::Streams {
                opened: 3,
                total: 5
            },
            ..
        }))
    ));
    // The client's own wait for TEST_START began only when its last stream was open
    // (30 ms + 25 s), not at CREATE_STREAMS: it is due 30 s after that.
    assert_eq!(
        p.client.poll_timeout().map(|t| p.elapsed(t)),
        Some(40 * MS + Duration::from_secs(25) + CTRL_TIMEOUT)
    );
}

#[test]
fn txstart_in_the_future_starts_data_at_the_instant_asked_for() {
    let mut cs = client(spec(2.0, 2, Direction::Upload), false);
    // Asked for 3.5 s after the pair's wall clock start.
    cs.txstart = Some(WALL as f64 + 3.5);
    let mut p = pair(cs, ServerScript::default());
    p.run(LIMIT);
    assert_eq!(
        (p.client_end.clone(), p.server_end.clone()),
        (Some(End::Done), Some(End::Done))
    );
    assert_eq!(
        p.elapsed(p.data_start.unwrap()),
        Duration::from_millis(3_500)
    );
    // The streams opened one setup lead before the start, well inside the server's
    // 20 s: TEST_RUNNING came before the start and the server's clock ran from there.
    assert_eq!(p.txstart_late_ns, Some(0));
    let lead = crate::profile::stream_setup_lead_s(0.02, 2);
    let opened = Duration::from_millis(3_500) - Duration::from_secs_f64(lead) + 2 * MS;
    assert_eq!(p.elapsed(p.server_t0.unwrap()), opened + 10 * MS);
    assert!(p.server_t0.unwrap() < p.data_start.unwrap());
}

#[test]
fn txstart_that_has_passed_starts_data_at_once_and_the_server_does_not_wait() {
    let mut cs = client(spec(2.0, 1, Direction::Upload), false);
    // Half a second in the past (within `profile::TXSTART_MAX_PAST_S`).
    cs.txstart = Some(WALL as f64 - 0.5);
    let mut p = pair(cs, ServerScript::default());
    p.run(LIMIT);
    assert_eq!(
        (p.client_end.clone(), p.server_end.clone()),
        (Some(End::Done), Some(End::Done))
    );
    // As without --txstart-time: data at TEST_RUNNING's arrival (61 ms), late by 561 ms.
    assert_eq!(p.elapsed(p.data_start.unwrap()), 61 * MS);
    assert_eq!(p.txstart_late_ns, Some(561_000_000));
}

#[test]
fn reverse_and_bidir_tests_await_their_streams() {
    for (direction, parallel, total) in [
        (Direction::Reverse, 3, 3),
        (Direction::Bidir, 3, 6),
        (Direction::Upload, 1, 1),
    ] {
        let mut p = pair(
            client(spec(1.0, parallel, direction), true),
            ServerScript::default(),
        );
        p.run(LIMIT);
        assert_eq!(p.server_total, total, "{direction:?}");
        assert_eq!(
            (p.client_end.clone(), p.server_end.clone()),
            (Some(End::Done), Some(End::Done))
        );
        // The last of `total` streams (1 ms apart from 40 ms) arrived 10 ms later.
        assert_eq!(
            p.elapsed(p.server_t0.unwrap()),
            MS * (40 + total as u32 + 10),
            "{direction:?}"
        );
    }
}

#[test]
fn the_same_script_gives_the_same_transcript() {
    let run = || {
        let mut p = pair(
            client(spec(3.0, 2, Direction::Bidir), true),
            ServerScript::default(),
        );
        p.run(LIMIT);
        p.transcript
    };
    assert_eq!(run(), run());
}

#[test]
fn while_the_test_runs_the_machines_await_nothing() {
    // A client that vanishes once data flows: no conversation deadline covers the
    // running test (the server's policy judges it: -t + -O + 40 s, idle data), so the
    // pair comes to rest with the server still waiting for TEST_END.
    let mut cs = client(spec(5.0, 1, Direction::Upload), false);
    cs.vanish = Some(Vanish::MidTest);
    let mut p = pair(cs, ServerScript::default());
    p.run(LIMIT);
    assert_eq!(p.client_end, Some(End::Vanished));
    assert_eq!(p.server_end, None);
    assert_eq!(p.server.phase, ServerPhase::Running);
    assert_eq!(p.server.poll_timeout(), None);
    assert_eq!(p.client.phase, ClientPhase::Running);
    assert_eq!(p.client.poll_timeout(), None);
    assert_eq!(p.elapsed(p.clock.now()), 61 * MS);
}
