//! The iperf3 control conversation as pure state machines.
//!
//! The engine reads a state byte from the control socket and asks the machine what it
//! means *now*; the machine answers with the next step to perform or a typed failure.
//! No sockets, no clocks: every sequence (including hostile ones) can be driven in unit
//! tests. The order of messages is the one described in `docs/protocol.md`.
//!
//! Both machines also settle what the two ends agreed on: the client's from the
//! server's extension answer (or its absence: an iperf3 server), the server's from the
//! client's parameters. The result is one [`Negotiated`] value, which the engine asks
//! (`negotiated.has(Feature::TripTimes)`) instead of looking at feature names.
//!
//! # Deadlines
//!
//! Each machine owns the deadlines of the conversation, as quinn-proto's connection
//! does: time comes in as `now`, [`ClientMachine::poll_timeout`] /
//! [`ServerMachine::poll_timeout`] say when the peer's next word is due, and
//! `on_timeout(now)` says what a passed deadline means (a [`Timeout`] naming what was
//! awaited). The driver only reads with the [`Wait`] the machine gives it. A wait
//! starts when the driver has done what the last message asked (`step_done`,
//! `streams_requested`, `results_requested`, `results_sent`), so a slow step of this
//! side (opening streams, draining) never eats the peer's time. The deadlines:
//!
//! | side | awaits | for | armed by |
//! |---|---|---|---|
//! | client | each setup message (`PARAM_EXCHANGE` … `TEST_RUNNING`) | [`CTRL_TIMEOUT`] | `step_done` |
//! | client | the extension answer | [`CTRL_TIMEOUT`] | `on_state(NETMETER_EXT)` |
//! | client | `EXCHANGE_RESULTS` after `TEST_END` (the server drains first), then `DISPLAY_RESULTS` | [`CTRL_TIMEOUT`] | `step_done` |
//! | client | the server's results | [`CTRL_TIMEOUT`] | `step_done` after sending its own |
//! | server | the parameters | [`PARAMS_TIMEOUT`] | `param_exchange_sent` (the door's, in the engine) |
//! | server | every data stream | [`STREAMS_TIMEOUT`] | `streams_requested` |
//! | server | the client's results | [`CTRL_TIMEOUT`] | `results_requested` |
//! | server | `IPERF_DONE` | [`DONE_TIMEOUT`] | `results_sent` |
//!
//! While the test runs neither machine has a deadline of its own: the client ends the
//! test on its end condition, and the server's limits on a running test (its `-t` plus
//! grace, `--server-max-duration`, `--test-idle-timeout`, `--server-bitrate-limit`) are
//! the policy's (`engine::server::policy::RunningJudge`, pure as well).

use crate::wire::{self, ExtAnswer, ExtRequest, Feature, Params, State};
use std::time::{Duration, Instant};

/// How long either side waits for each of the peer's control messages outside the
/// running test (iperf3 waits without limit; a vanished peer would hang the test).
pub const CTRL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a server waits for a client's parameters after `PARAM_EXCHANGE`.
pub const PARAMS_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client may take to open all its data streams after `CREATE_STREAMS`.
pub const STREAMS_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a server waits for `IPERF_DONE` after `DISPLAY_RESULTS` (the test is over;
/// a client that does not acknowledge is only logged).
pub const DONE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client reads the 8-byte trailer after `SERVER_ERROR`.
pub const ERROR_TRAILER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client waits for the server's sentence after an error code: only a
/// server that keeps the connection open without one makes it wait this long.
pub const NOTE_TIMEOUT: Duration = Duration::from_secs(1);

/// What a machine waits for from its peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Awaited {
    /// Client: the server's next state byte during setup.
    ServerMessage,
    /// Client: the extension answer after `NETMETER_EXT`.
    ExtAnswer,
    /// Client: `EXCHANGE_RESULTS` (after `TEST_END`) or `DISPLAY_RESULTS`.
    ResultsExchange,
    /// Client: the server's results JSON.
    ServerResults,
    /// Server: the client's parameter JSON.
    Params,
    /// Server: the data streams, `opened` of `total` so far.
    Streams { opened: usize, total: usize },
    /// Server: the client's results JSON.
    ClientResults,
    /// Server: `IPERF_DONE`.
    Done,
}

impl Awaited {
    /// The words a timeout or a closed connection uses for it.
    pub fn what(&self) -> &'static str {
        match self {
            Awaited::ServerMessage => "the server's next control message",
            Awaited::ExtAnswer => "the extension answer",
            Awaited::ResultsExchange => "the server's results exchange",
            Awaited::ServerResults => "the server's results",
            Awaited::Params => "the client's parameters",
            Awaited::Streams { .. } => "stream setup",
            Awaited::ClientResults => "the client's results",
            Awaited::Done => "IPERF_DONE",
        }
    }
}

/// A deadline that passed: what was awaited, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("timed out after {:.1} s waiting for {}", .after.as_secs_f64(), .awaited.what())]
pub struct Timeout {
    pub awaited: Awaited,
    pub after: Duration,
}

/// One bounded wait, as a machine hands it to the driver: read until `until`, and if
/// nothing came, the wait was for `timeout.awaited` and lasted `timeout.after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    pub until: Instant,
    pub after: Duration,
    pub what: &'static str,
}

impl Wait {
    /// A wait of `after` from `now` for `what` (I/O that bounds one exchange itself).
    pub fn new(now: Instant, after: Duration, what: &'static str) -> Wait {
        Wait {
            until: now + after,
            after,
            what,
        }
    }
}

/// A machine's armed deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Deadline {
    at: Instant,
    timeout: Timeout,
}

impl Deadline {
    fn new(now: Instant, after: Duration, awaited: Awaited) -> Deadline {
        Deadline {
            at: now + after,
            timeout: Timeout { awaited, after },
        }
    }

    fn after(now: Instant, after: Duration, awaited: Awaited) -> Option<Deadline> {
        Some(Deadline::new(now, after, awaited))
    }

    fn wait(&self) -> Wait {
        Wait {
            until: self.at,
            after: self.timeout.after,
            what: self.timeout.awaited.what(),
        }
    }
}

/// The deadline accessors both machines share (`poll_timeout`, `wait`, `on_timeout`),
/// written once: `$peer` names who is awaited, `$done` is the machine's end phase.
macro_rules! deadline_accessors {
    ($peer:literal, $done:expr) => {
        #[doc = concat!("When the ", $peer, "'s next word is due (`None`: nothing awaited).")]
        pub fn poll_timeout(&self) -> Option<Instant> {
            self.deadline.map(|d| d.at)
        }

        /// The read the driver is to make: until the deadline, for what is awaited.
        pub fn wait(&self) -> Option<Wait> {
            self.deadline.map(|d| d.wait())
        }

        /// Time passed: `Err` with what was awaited once `now` reached the deadline (the
        /// conversation is over then).
        pub fn on_timeout(&mut self, now: Instant) -> Result<(), Timeout> {
            fire(&mut self.deadline, now).inspect_err(|_| self.phase = $done)
        }
    };
}

/// `on_timeout`'s answer for an armed deadline: the timeout once `now` reached it
/// (the deadline is spent then).
fn fire(deadline: &mut Option<Deadline>, now: Instant) -> Result<(), Timeout> {
    match *deadline {
        Some(d) if now >= d.at => {
            *deadline = None;
            Err(d.timeout)
        }
        _ => Ok(()),
    }
}

/// Who is at the other end, as far as the conversation tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// An iperf3 (or a netmeter that was not asked for, or did not answer with,
    /// extensions): plain iperf3 protocol.
    Iperf3,
    /// A netmeter that negotiated extensions at this protocol version.
    Netmeter { version: u32 },
}

/// What both ends agreed on for one test: the peer and the extension features in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    pub peer: Peer,
    /// Features this side asked for (client) or was asked for (server), known ones only.
    requested: Vec<Feature>,
    /// Features in use, in the order of the answer.
    accepted: Vec<Feature>,
}

impl Negotiated {
    /// Nothing negotiated: an iperf3 peer. `requested` is what this side asked for.
    pub fn iperf3(requested: Vec<Feature>) -> Negotiated {
        Negotiated {
            peer: Peer::Iperf3,
            requested,
            accepted: Vec::new(),
        }
    }

    /// Whether the test uses `feature`.
    pub fn has(&self, feature: Feature) -> bool {
        self.accepted.contains(&feature)
    }

    /// Whether `feature` was asked for but not agreed to.
    pub fn declined(&self, feature: Feature) -> bool {
        self.requested.contains(&feature) && !self.has(feature)
    }

    /// The features in use, in the order of the answer.
    pub fn features(&self) -> &[Feature] {
        &self.accepted
    }

    /// The features in use by their wire names, as `start.netmeter.features` lists them.
    pub fn feature_names(&self) -> Vec<String> {
        self.accepted
            .iter()
            .map(|f| f.as_str().to_string())
            .collect()
    }

    /// The peer as `start.netmeter.peer` names it: `"netmeter"` or `"iperf3"`.
    pub fn peer_name(&self) -> &'static str {
        match self.peer {
            Peer::Iperf3 => "iperf3",
            Peer::Netmeter { .. } => "netmeter",
        }
    }

    /// Warnings for a client whose peer declined something it can do without:
    /// `--no-gso`/`--no-gro` (the server's side may still offload) and isochronous frame
    /// counting (only the sender's figures are reported).
    pub fn client_warnings(&self, host: &str) -> Vec<String> {
        let mut w = Vec::new();
        if matches!(self.peer, Peer::Netmeter { .. }) && self.declined(Feature::NoOffload) {
            w.push(format!(
                "{host} is an older netmeter that does not take --no-gso/--no-gro: its side may still use UDP offload"
            ));
        }
        if self.declined(Feature::Isochronous) {
            w.push(format!(
                "{host} does not count isochronous frames (it answered like an iperf3 server); only the sender's frame figures are reported"
            ));
        }
        w
    }
}

/// What the client must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientStep {
    /// Send the parameter JSON.
    SendParams,
    /// Read the netmeter extension answer (length-prefixed JSON) that follows.
    ReadExtAnswer,
    /// Read the pre-shared-key challenge that follows (state 0x41) and answer it.
    Authenticate,
    /// Read the third-party test's answer (state 0x42): the conversation ends there.
    ReadThirdParty,
    /// Read a multicast receiver's answer (state 0x43): first whether it joined, then
    /// (once the test ended) its figures.
    ReadMcastAnswer,
    /// Open the data streams.
    CreateStreams,
    /// The server accepted all streams: start the clocks.
    StartClock,
    /// Start moving data.
    StartData,
    /// Send our results, then read the server's.
    ExchangeResults,
    /// Print the final report and send `IPERF_DONE`.
    Display,
    /// Read the 8-byte error trailer, then fail.
    ReadServerError,
}

/// Why the client stops.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientFailure {
    #[error("the server is busy running a test; try again later")]
    AccessDenied,
    #[error("the server terminated the test")]
    ServerTerminated,
    #[error("the server sent {got:?} while the client expected {expected}")]
    Unexpected { got: State, expected: &'static str },
    /// `--psk-file`, but the server went on without the key exchange.
    #[error(
        "the server did not ask for the pre-shared key: it runs without --psk-file (or is not netmeter), so it cannot prove it holds the key"
    )]
    NoPskChallenge,
    /// `--receivers`, but the server went on to a test: it does not take join requests.
    #[error(
        "it went on to a test instead of answering the join request: --receivers needs a netmeter server (iperf3 does not join groups)"
    )]
    NotMcastReceiver,
}

/// Where the client is in the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientPhase {
    AwaitParamExchange,
    AwaitCreateStreams,
    AwaitTestStart,
    AwaitTestRunning,
    Running,
    AwaitExchangeResults,
    AwaitDisplay,
    /// A multicast receiver joined: its figures (state 0x43) come at the test's end.
    McastMember,
    Done,
}

/// The client's control state machine.
#[derive(Debug, Clone)]
pub struct ClientMachine {
    pub phase: ClientPhase,
    ext_requested: bool,
    /// The request carried a pre-shared-key nonce: the server must challenge it.
    psk_requested: bool,
    /// The challenge came (and was answered).
    psk_challenged: bool,
    /// The request is a third-party request: the answer is the result (0x42).
    third_party: bool,
    /// The request asks the server to join a multicast group (`--receivers`).
    mcast_join: bool,
    negotiated: Negotiated,
    /// When the server's next word is due, and what it is.
    deadline: Option<Deadline>,
    /// `EXCHANGE_RESULTS` came: the server's results JSON follows ours.
    results_pending: bool,
}

impl ClientMachine {
    /// A fresh machine; `request` is the extension request the parameters carry, if any.
    pub fn new(request: Option<&ExtRequest>) -> Self {
        let requested = request.map_or_else(Vec::new, |r| known(&r.features));
        ClientMachine {
            phase: ClientPhase::AwaitParamExchange,
            ext_requested: request.is_some(),
            psk_requested: request.is_some_and(|r| r.psk.is_some()),
            psk_challenged: false,
            third_party: request.is_some_and(|r| r.third_party.is_some()),
            mcast_join: request.is_some_and(|r| r.mcast_join.is_some()),
            negotiated: Negotiated::iperf3(requested),
            deadline: None,
            results_pending: false,
        }
    }

    /// The step the last state byte asked for is done (or, at first, the cookie is
    /// sent): the wait for the server's next word starts `now`. Nothing is awaited
    /// while the test runs (the client ends it) or once the conversation is over.
    pub fn step_done(&mut self, now: Instant) {
        use ClientPhase as P;
        let awaited = match self.phase {
            P::AwaitParamExchange
            | P::AwaitCreateStreams
            | P::AwaitTestStart
            | P::AwaitTestRunning => Some(Awaited::ServerMessage),
            P::AwaitDisplay if self.results_pending => Some(Awaited::ServerResults),
            P::AwaitExchangeResults | P::AwaitDisplay => Some(Awaited::ResultsExchange),
            // The figures come when the sender's test ended: its own wait bounds them.
            P::Running | P::McastMember | P::Done => None,
        };
        self.deadline = awaited.and_then(|a| Deadline::after(now, CTRL_TIMEOUT, a));
    }

    /// The server's results were read (after [`ClientStep::ExchangeResults`]).
    pub fn on_server_results(&mut self) {
        self.results_pending = false;
        self.deadline = None;
    }

    deadline_accessors!("server", ClientPhase::Done);

    /// The server's extension answer (after [`ClientStep::ReadExtAnswer`]): the features
    /// in use are those it accepted of the ones asked for.
    pub fn on_ext_answer(&mut self, answer: &ExtAnswer) -> &Negotiated {
        self.deadline = None;
        if self.ext_requested {
            let n = &mut self.negotiated;
            n.peer = Peer::Netmeter {
                version: answer.version,
            };
            n.accepted = answer
                .accepted
                .iter()
                .filter(|f| n.requested.contains(f))
                .cloned()
                .collect();
        }
        &self.negotiated
    }

    /// What the two ends agreed on so far: final from [`ClientStep::CreateStreams`] on
    /// (an iperf3 peer if no extension answer came).
    pub fn negotiated(&self) -> &Negotiated {
        &self.negotiated
    }

    /// The client has sent `TEST_END`; from now on the server's next word is results.
    pub fn test_ended(&mut self) {
        self.phase = ClientPhase::AwaitExchangeResults;
    }

    /// Interpret one state byte from the server, come at `now`.
    pub fn on_state(&mut self, s: State, now: Instant) -> Result<ClientStep, ClientFailure> {
        use ClientPhase as P;
        // The awaited word came; the next wait starts when its step is done, but the
        // extension answer follows its state byte at once.
        self.deadline = None;
        match s {
            State::AccessDenied => return Err(ClientFailure::AccessDenied),
            State::ServerError => return Ok(ClientStep::ReadServerError),
            State::ServerTerminate => return Err(ClientFailure::ServerTerminated),
            _ => {}
        }
        // With --psk-file the server must challenge before anything else it says.
        let unproven = self.psk_requested && !self.psk_challenged;
        if unproven
            && self.phase == P::AwaitCreateStreams
            && matches!(
                s,
                State::NetmeterExt
                    | State::CreateStreams
                    | State::NetmeterThirdParty
                    | State::NetmeterMcast
            )
        {
            return Err(ClientFailure::NoPskChallenge);
        }
        let (next, step, expected) = match (self.phase, s) {
            (P::AwaitParamExchange, State::ParamExchange) => {
                (P::AwaitCreateStreams, ClientStep::SendParams, "")
            }
            (P::AwaitCreateStreams, State::NetmeterAuth) if unproven => {
                self.psk_challenged = true;
                (P::AwaitCreateStreams, ClientStep::Authenticate, "")
            }
            (P::AwaitCreateStreams, State::NetmeterExt) if self.ext_requested => {
                (P::AwaitCreateStreams, ClientStep::ReadExtAnswer, "")
            }
            (P::AwaitCreateStreams, State::NetmeterThirdParty) if self.third_party => {
                (P::Done, ClientStep::ReadThirdParty, "")
            }
            (P::AwaitCreateStreams, State::NetmeterMcast) if self.mcast_join => {
                (P::McastMember, ClientStep::ReadMcastAnswer, "")
            }
            (P::McastMember, State::NetmeterMcast) => (P::Done, ClientStep::ReadMcastAnswer, ""),
            (P::AwaitCreateStreams, State::CreateStreams) if self.mcast_join => {
                return Err(ClientFailure::NotMcastReceiver);
            }
            (P::AwaitCreateStreams, State::CreateStreams) => {
                (P::AwaitTestStart, ClientStep::CreateStreams, "")
            }
            (P::AwaitTestStart, State::TestStart) => {
                (P::AwaitTestRunning, ClientStep::StartClock, "")
            }
            (P::AwaitTestRunning, State::TestRunning) => (P::Running, ClientStep::StartData, ""),
            (P::AwaitExchangeResults, State::ExchangeResults) => {
                self.results_pending = true;
                (P::AwaitDisplay, ClientStep::ExchangeResults, "")
            }
            (P::AwaitDisplay, State::DisplayResults) => (P::Done, ClientStep::Display, ""),
            (phase, got) => {
                let expected = match phase {
                    P::AwaitParamExchange => "PARAM_EXCHANGE",
                    P::AwaitCreateStreams => "CREATE_STREAMS",
                    P::AwaitTestStart => "TEST_START",
                    P::AwaitTestRunning => "TEST_RUNNING",
                    P::Running => "nothing until the test ends",
                    P::AwaitExchangeResults => "EXCHANGE_RESULTS",
                    P::AwaitDisplay => "DISPLAY_RESULTS",
                    P::McastMember => "the multicast receiver's figures",
                    P::Done => "nothing more",
                };
                return Err(ClientFailure::Unexpected { got, expected });
            }
        };
        debug_assert!(expected.is_empty());
        self.phase = next;
        if step == ClientStep::ReadExtAnswer {
            self.deadline = Deadline::after(now, CTRL_TIMEOUT, Awaited::ExtAnswer);
        }
        Ok(step)
    }
}

/// What the server hears from a client once the test runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerEvent {
    /// The client ended the test (`TEST_END`).
    TestEnd,
    /// The client acknowledged the results (`IPERF_DONE`).
    Done,
}

/// Why the server ends a session early.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerFailure {
    #[error("the client terminated the test")]
    ClientTerminated,
    #[error("the client sent {0:?}, which is not valid at this point")]
    Unexpected(State),
    /// Any state byte while the client opens its data streams.
    #[error("the client sent {0:?} while opening its data streams")]
    DuringStreamSetup(State),
}

/// Where the server is in the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerPhase {
    /// `PARAM_EXCHANGE` sent; the parameter JSON is next.
    AwaitParams,
    /// Parameters answered, `CREATE_STREAMS` sent: data streams arrive, no control
    /// message is valid.
    AwaitStreams,
    /// `TEST_START`/`TEST_RUNNING` sent: the client's `TEST_END` is next.
    Running,
    /// `TEST_END` received: the server sends `EXCHANGE_RESULTS` and reads results JSON.
    ExchangeResults,
    /// Results and `DISPLAY_RESULTS` sent: the client's `IPERF_DONE` is next.
    AwaitDone,
    Done,
}

/// The server's control state machine (one per session): what each message means in
/// the current phase, and when the client's next word is due.
#[derive(Debug, Clone)]
pub struct ServerMachine {
    pub phase: ServerPhase,
    negotiated: Negotiated,
    deadline: Option<Deadline>,
}

impl Default for ServerMachine {
    fn default() -> Self {
        ServerMachine::new()
    }
}

impl ServerMachine {
    /// A session that has sent `PARAM_EXCHANGE`.
    pub fn new() -> Self {
        ServerMachine {
            phase: ServerPhase::AwaitParams,
            negotiated: Negotiated::iperf3(Vec::new()),
            deadline: None,
        }
    }

    /// `PARAM_EXCHANGE` went out `now`: the parameters are due within
    /// [`PARAMS_TIMEOUT`]. (netmeter's server reads them in its door, under the door's
    /// own budget with this same limit, and makes the machine from them.)
    pub fn param_exchange_sent(&mut self, now: Instant) -> Wait {
        self.arm(now, PARAMS_TIMEOUT, Awaited::Params)
    }

    /// `CREATE_STREAMS` went out `now`: `total` data streams are due within
    /// [`STREAMS_TIMEOUT`].
    pub fn streams_requested(&mut self, total: usize, now: Instant) -> Wait {
        self.arm(now, STREAMS_TIMEOUT, Awaited::Streams { opened: 0, total })
    }

    /// One data stream arrived; true once all have (the deadline is spent then).
    pub fn on_stream(&mut self) -> bool {
        let Some(d) = self.deadline.as_mut() else {
            return false;
        };
        let Awaited::Streams { opened, total } = &mut d.timeout.awaited else {
            return false;
        };
        *opened += 1;
        let all = *opened >= *total;
        if all {
            self.deadline = None;
        }
        all
    }

    /// `EXCHANGE_RESULTS` went out `now` (after this side's drain): the client's
    /// results are due within [`CTRL_TIMEOUT`]; the read to make.
    pub fn results_requested(&mut self, now: Instant) -> Wait {
        self.arm(now, CTRL_TIMEOUT, Awaited::ClientResults)
    }

    fn arm(&mut self, now: Instant, after: Duration, awaited: Awaited) -> Wait {
        let d = Deadline::new(now, after, awaited);
        self.deadline = Some(d);
        d.wait()
    }

    /// The client's results were read.
    pub fn on_client_results(&mut self) {
        self.deadline = None;
    }

    deadline_accessors!("client", ServerPhase::Done);

    /// The client's parameters arrived: settle the features and return the extension
    /// answer to send (after [`State::NetmeterExt`]), `None` for a client that did not
    /// ask (an iperf3 client must never see that state byte).
    pub fn on_params(&mut self, params: &Params) -> Option<ExtAnswer> {
        self.phase = ServerPhase::AwaitStreams;
        self.deadline = None;
        let req = params.netmeter.as_ref()?;
        let answer = negotiate(req);
        self.negotiated = Negotiated {
            peer: Peer::Netmeter {
                version: answer.version,
            },
            requested: known(&req.features),
            accepted: answer.accepted.clone(),
        };
        Some(answer)
    }

    /// What the two ends agreed on (after [`Self::on_params`]).
    pub fn negotiated(&self) -> &Negotiated {
        &self.negotiated
    }

    /// All data streams are open and `TEST_RUNNING` sent.
    pub fn streams_open(&mut self) {
        self.phase = ServerPhase::Running;
        self.deadline = None;
    }

    /// Results and `DISPLAY_RESULTS` sent `now`: `IPERF_DONE` is due within
    /// [`DONE_TIMEOUT`]; the read to make.
    pub fn results_sent(&mut self, now: Instant) -> Wait {
        self.phase = ServerPhase::AwaitDone;
        self.arm(now, DONE_TIMEOUT, Awaited::Done)
    }

    /// Interpret one state byte from the client.
    pub fn on_state(&mut self, s: State) -> Result<ServerEvent, ServerFailure> {
        use ServerPhase as P;
        match (self.phase, s) {
            (P::AwaitStreams, s) => Err(ServerFailure::DuringStreamSetup(s)),
            (P::Running, State::TestEnd) => {
                self.phase = P::ExchangeResults;
                Ok(ServerEvent::TestEnd)
            }
            (P::AwaitDone, State::IperfDone) => {
                self.phase = P::Done;
                self.deadline = None;
                Ok(ServerEvent::Done)
            }
            (_, State::ClientTerminate) => Err(ServerFailure::ClientTerminated),
            (_, other) => Err(ServerFailure::Unexpected(other)),
        }
    }
}

/// The known features of a request, in its order.
fn known(features: &[Feature]) -> Vec<Feature> {
    features.iter().filter(|f| f.is_known()).cloned().collect()
}

/// The features both sides will use, from the client's request and what we support.
pub fn negotiate(req: &ExtRequest) -> ExtAnswer {
    let accepted = req
        .features
        .iter()
        .filter(|f| f.is_known())
        .take(Feature::ALL.len())
        .cloned()
        .collect();
    ExtAnswer {
        version: wire::EXT_VERSION.min(req.version),
        accepted,
        server: format!("netmeter {}", env!("CARGO_PKG_VERSION")),
    }
}

#[cfg(test)]
mod pair;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};

    /// A fixed instant for tests that do not look at time.
    fn t0() -> Instant {
        ManualClock::at_unix(0).now()
    }

    #[test]
    fn normal_iperf3_sequence() {
        let mut m = ClientMachine::new(None);
        assert_eq!(
            m.on_state(State::ParamExchange, t0()),
            Ok(ClientStep::SendParams)
        );
        assert_eq!(
            m.on_state(State::CreateStreams, t0()),
            Ok(ClientStep::CreateStreams)
        );
        assert_eq!(
            m.on_state(State::TestStart, t0()),
            Ok(ClientStep::StartClock)
        );
        assert_eq!(
            m.on_state(State::TestRunning, t0()),
            Ok(ClientStep::StartData)
        );
        m.test_ended();
        assert_eq!(
            m.on_state(State::ExchangeResults, t0()),
            Ok(ClientStep::ExchangeResults)
        );
        assert_eq!(
            m.on_state(State::DisplayResults, t0()),
            Ok(ClientStep::Display)
        );
        assert_eq!(m.phase, ClientPhase::Done);
    }

    #[test]
    fn extension_answer_only_when_requested() {
        let mut m = ClientMachine::new(Some(&ExtRequest::default()));
        m.on_state(State::ParamExchange, t0()).unwrap();
        assert_eq!(
            m.on_state(State::NetmeterExt, t0()),
            Ok(ClientStep::ReadExtAnswer)
        );
        assert_eq!(
            m.on_state(State::CreateStreams, t0()),
            Ok(ClientStep::CreateStreams)
        );

        let mut plain = ClientMachine::new(None);
        plain.on_state(State::ParamExchange, t0()).unwrap();
        assert!(plain.on_state(State::NetmeterExt, t0()).is_err());
    }

    /// With a pre-shared key the server must challenge first; a server that goes on
    /// without (no key, an older netmeter, an iperf3) is refused, and a challenge is
    /// answered once only.
    #[test]
    fn psk_challenge_comes_first_or_the_client_stops() {
        let with_psk = ExtRequest {
            psk: Some(wire::PskHello {
                client_nonce: "00".repeat(32),
                version: 2,
            }),
            ..ExtRequest::default()
        };
        for skipped in [
            State::NetmeterExt,
            State::CreateStreams,
            State::NetmeterThirdParty,
        ] {
            let mut m = ClientMachine::new(Some(&with_psk));
            m.on_state(State::ParamExchange, t0()).unwrap();
            assert_eq!(
                m.on_state(skipped, t0()),
                Err(ClientFailure::NoPskChallenge)
            );
        }
        let mut m = ClientMachine::new(Some(&with_psk));
        m.on_state(State::ParamExchange, t0()).unwrap();
        assert_eq!(
            m.on_state(State::NetmeterAuth, t0()),
            Ok(ClientStep::Authenticate)
        );
        assert!(m.on_state(State::NetmeterAuth, t0()).is_err());
        assert_eq!(
            m.on_state(State::NetmeterExt, t0()),
            Ok(ClientStep::ReadExtAnswer)
        );
        // A client without a key never takes a challenge.
        let mut plain = ClientMachine::new(Some(&ExtRequest::default()));
        plain.on_state(State::ParamExchange, t0()).unwrap();
        assert!(plain.on_state(State::NetmeterAuth, t0()).is_err());
    }

    #[test]
    fn third_party_answer_only_for_a_third_party_request() {
        let req = ExtRequest {
            third_party: Some(wire::ThirdPartyRequest {
                target: "b".into(),
                port: 5201,
                args: vec![],
            }),
            ..ExtRequest::default()
        };
        let mut m = ClientMachine::new(Some(&req));
        m.on_state(State::ParamExchange, t0()).unwrap();
        assert_eq!(
            m.on_state(State::NetmeterThirdParty, t0()),
            Ok(ClientStep::ReadThirdParty)
        );
        assert_eq!(m.phase, ClientPhase::Done);
        let mut plain = ClientMachine::new(Some(&ExtRequest::default()));
        plain.on_state(State::ParamExchange, t0()).unwrap();
        assert!(plain.on_state(State::NetmeterThirdParty, t0()).is_err());
    }

    /// A join request: the answer, then the figures, both state 0x43; a server that
    /// goes on to a test (iperf3 ignores the request) is refused naming --receivers.
    #[test]
    fn a_join_request_reads_two_answers_or_refuses_a_test() {
        let req = ExtRequest {
            mcast_join: Some(wire::mcast_join::JoinRequest {
                group: "239.1.1.1".into(),
                dev: None,
                source: None,
                port: 5201,
                duration_ms: 1000,
                interval_ms: 0,
                trip_times: false,
                sender: None,
                live: false,
            }),
            ..ExtRequest::default()
        };
        let mut m = ClientMachine::new(Some(&req));
        m.on_state(State::ParamExchange, t0()).unwrap();
        assert_eq!(
            m.on_state(State::NetmeterMcast, t0()),
            Ok(ClientStep::ReadMcastAnswer)
        );
        m.step_done(t0());
        // The figures wait is the driver's (the sender's test runs first).
        assert_eq!(m.poll_timeout(), None);
        assert_eq!(
            m.on_state(State::NetmeterMcast, t0()),
            Ok(ClientStep::ReadMcastAnswer)
        );
        assert_eq!(m.phase, ClientPhase::Done);
        assert!(m.on_state(State::NetmeterMcast, t0()).is_err());

        let mut iperf3 = ClientMachine::new(Some(&req));
        iperf3.on_state(State::ParamExchange, t0()).unwrap();
        let e = iperf3.on_state(State::CreateStreams, t0()).unwrap_err();
        assert_eq!(e, ClientFailure::NotMcastReceiver);
        assert!(e.to_string().contains("--receivers"));
        // Only a client that asked reads the answer.
        let mut plain = ClientMachine::new(Some(&ExtRequest::default()));
        plain.on_state(State::ParamExchange, t0()).unwrap();
        assert!(plain.on_state(State::NetmeterMcast, t0()).is_err());
    }

    #[test]
    fn busy_error_and_out_of_order_states() {
        let mut m = ClientMachine::new(None);
        assert_eq!(
            m.on_state(State::AccessDenied, t0()),
            Err(ClientFailure::AccessDenied)
        );
        let mut m = ClientMachine::new(None);
        assert_eq!(
            m.on_state(State::ServerError, t0()),
            Ok(ClientStep::ReadServerError)
        );
        let mut m = ClientMachine::new(None);
        assert!(matches!(
            m.on_state(State::TestRunning, t0()),
            Err(ClientFailure::Unexpected { .. })
        ));
    }

    /// A request for `features` (everything else default).
    fn request(features: Vec<Feature>) -> ExtRequest {
        ExtRequest {
            version: wire::EXT_VERSION,
            features,
            ..ExtRequest::default()
        }
    }

    #[test]
    fn client_negotiates_what_it_asked_and_the_server_accepted() {
        let req = request(vec![
            Feature::UdpSeq64,
            Feature::TripTimes,
            Feature::NoOffload,
        ]);
        let mut m = ClientMachine::new(Some(&req));
        m.on_state(State::ParamExchange, t0()).unwrap();
        assert_eq!(
            m.on_state(State::NetmeterExt, t0()),
            Ok(ClientStep::ReadExtAnswer)
        );
        // An older server that knows no `no_offload`; a feature nobody asked for and a
        // newer one's unknown name are not in use.
        let n = m.on_ext_answer(&ExtAnswer {
            version: 1,
            accepted: vec![
                Feature::TripTimes,
                Feature::UdpSeq64,
                Feature::Bounceback,
                Feature::Unknown("teleport".into()),
            ],
            server: "netmeter 0.0.1".into(),
        });
        assert_eq!(n.peer, Peer::Netmeter { version: 1 });
        assert!(n.has(Feature::TripTimes) && n.has(Feature::UdpSeq64));
        assert!(!n.has(Feature::Bounceback));
        assert!(n.declined(Feature::NoOffload));
        assert_eq!(n.features(), &[Feature::TripTimes, Feature::UdpSeq64]);
        assert_eq!(n.peer_name(), "netmeter");
        assert_eq!(
            m.on_state(State::CreateStreams, t0()),
            Ok(ClientStep::CreateStreams)
        );
        assert_eq!(m.negotiated().features().len(), 2);
    }

    #[test]
    fn client_without_an_answer_talks_to_iperf3() {
        // Asked, but the server went straight to CREATE_STREAMS: an iperf3 server.
        let req = request(vec![Feature::UdpSeq64, Feature::Isochronous]);
        let mut m = ClientMachine::new(Some(&req));
        m.on_state(State::ParamExchange, t0()).unwrap();
        m.on_state(State::CreateStreams, t0()).unwrap();
        let n = m.negotiated();
        assert_eq!(n.peer, Peer::Iperf3);
        assert_eq!(n.peer_name(), "iperf3");
        assert!(!n.has(Feature::UdpSeq64));
        assert!(n.declined(Feature::Isochronous));
        let w = n.client_warnings("h");
        assert_eq!(w.len(), 1);
        assert!(w[0].starts_with("h does not count isochronous frames"));
        // Not asked at all (--no-extensions): nothing declined, no warning.
        let plain = ClientMachine::new(None);
        assert!(!plain.negotiated().declined(Feature::Isochronous));
        assert!(plain.negotiated().client_warnings("h").is_empty());
    }

    #[test]
    fn client_warns_when_a_netmeter_declines_no_offload() {
        let req = request(vec![Feature::UdpSeq64, Feature::NoOffload]);
        let mut m = ClientMachine::new(Some(&req));
        m.on_state(State::ParamExchange, t0()).unwrap();
        m.on_state(State::NetmeterExt, t0()).unwrap();
        let n = m.on_ext_answer(&ExtAnswer {
            version: 1,
            accepted: vec![Feature::UdpSeq64],
            server: String::new(),
        });
        assert_eq!(
            n.client_warnings("srv"),
            vec![
                "srv is an older netmeter that does not take --no-gso/--no-gro: its side may still use UDP offload"
                    .to_string()
            ]
        );
    }

    #[test]
    fn server_machine_runs_the_whole_conversation() {
        let mut m = ServerMachine::new();
        assert_eq!(m.phase, ServerPhase::AwaitParams);
        let params = Params {
            netmeter: Some(request(vec![
                Feature::UdpSeq64,
                Feature::Unknown("teleport".into()),
                Feature::TripTimes,
            ])),
            ..Params::default()
        };
        let answer = m
            .on_params(&params)
            .expect("a netmeter client gets an answer");
        assert_eq!(answer.accepted, vec![Feature::UdpSeq64, Feature::TripTimes]);
        let n = m.negotiated();
        assert_eq!(n.peer, Peer::Netmeter { version: 1 });
        assert!(n.has(Feature::TripTimes) && !n.has(Feature::Bounceback));
        // While streams open, any control message is out of place.
        assert_eq!(m.phase, ServerPhase::AwaitStreams);
        assert_eq!(
            m.on_state(State::ClientTerminate),
            Err(ServerFailure::DuringStreamSetup(State::ClientTerminate))
        );
        m.streams_open();
        assert_eq!(
            m.on_state(State::IperfDone),
            Err(ServerFailure::Unexpected(State::IperfDone))
        );
        assert_eq!(m.on_state(State::TestEnd), Ok(ServerEvent::TestEnd));
        assert_eq!(m.phase, ServerPhase::ExchangeResults);
        m.results_sent(t0());
        assert_eq!(m.on_state(State::IperfDone), Ok(ServerEvent::Done));
        assert_eq!(m.phase, ServerPhase::Done);
    }

    #[test]
    fn server_machine_with_an_iperf3_client() {
        let mut m = ServerMachine::new();
        assert_eq!(m.on_params(&Params::default()), None);
        assert_eq!(m.negotiated().peer, Peer::Iperf3);
        assert!(m.negotiated().features().is_empty());
        m.streams_open();
        assert_eq!(
            m.on_state(State::ClientTerminate),
            Err(ServerFailure::ClientTerminated)
        );
        m.on_state(State::TestEnd).unwrap();
        m.results_sent(t0());
        assert_eq!(
            m.on_state(State::ClientTerminate),
            Err(ServerFailure::ClientTerminated)
        );
    }

    #[test]
    fn negotiation_keeps_only_known_features() {
        let a = negotiate(&wire::ExtRequest {
            version: 7,
            bounceback: None,
            trip_times: false,
            connect_only: false,
            isochronous: None,
            working_load: None,
            no_gso: true,
            no_gro: false,
            ecn_feedback: false,
            psk: None,
            third_party: None,
            mcast_join: None,
            features: vec![
                Feature::UdpSeq64,
                Feature::Unknown("teleport".into()),
                Feature::NoOffload,
            ],
        });
        assert_eq!(a.version, wire::EXT_VERSION);
        assert_eq!(a.accepted, vec![Feature::UdpSeq64, Feature::NoOffload]);
    }
}
