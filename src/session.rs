//! The iperf3 control conversation as pure state machines.
//!
//! The engine reads a state byte from the control socket and asks the machine what it
//! means *now*; the machine answers with the next step to perform or a typed failure.
//! No sockets, no clocks: every sequence (including hostile ones) can be driven in unit
//! tests. The order of messages is the one described in `docs/protocol.md`.

use crate::wire::{self, State};

/// What the client must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientStep {
    /// Send the parameter JSON.
    SendParams,
    /// Read the netmeter extension answer (length-prefixed JSON) that follows.
    ReadExtAnswer,
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
    Done,
}

/// The client's control state machine.
#[derive(Debug, Clone)]
pub struct ClientMachine {
    pub phase: ClientPhase,
    ext_requested: bool,
}

impl ClientMachine {
    /// A fresh machine; `ext_requested` says whether the parameters ask for extensions.
    pub fn new(ext_requested: bool) -> Self {
        ClientMachine {
            phase: ClientPhase::AwaitParamExchange,
            ext_requested,
        }
    }

    /// The client has sent `TEST_END`; from now on the server's next word is results.
    pub fn test_ended(&mut self) {
        self.phase = ClientPhase::AwaitExchangeResults;
    }

    /// Interpret one state byte from the server.
    pub fn on_state(&mut self, s: State) -> Result<ClientStep, ClientFailure> {
        use ClientPhase as P;
        match s {
            State::AccessDenied => return Err(ClientFailure::AccessDenied),
            State::ServerError => return Ok(ClientStep::ReadServerError),
            State::ServerTerminate => return Err(ClientFailure::ServerTerminated),
            _ => {}
        }
        let (next, step, expected) = match (self.phase, s) {
            (P::AwaitParamExchange, State::ParamExchange) => {
                (P::AwaitCreateStreams, ClientStep::SendParams, "")
            }
            (P::AwaitCreateStreams, State::NetmeterExt) if self.ext_requested => {
                (P::AwaitCreateStreams, ClientStep::ReadExtAnswer, "")
            }
            (P::AwaitCreateStreams, State::CreateStreams) => {
                (P::AwaitTestStart, ClientStep::CreateStreams, "")
            }
            (P::AwaitTestStart, State::TestStart) => {
                (P::AwaitTestRunning, ClientStep::StartClock, "")
            }
            (P::AwaitTestRunning, State::TestRunning) => (P::Running, ClientStep::StartData, ""),
            (P::AwaitExchangeResults, State::ExchangeResults) => {
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
                    P::Done => "nothing more",
                };
                return Err(ClientFailure::Unexpected { got, expected });
            }
        };
        debug_assert!(expected.is_empty());
        self.phase = next;
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
}

/// Interpret a state byte from the client while a test runs (`running`) or after the
/// results were displayed (`!running`).
pub fn server_on_state(running: bool, s: State) -> Result<ServerEvent, ServerFailure> {
    match (running, s) {
        (true, State::TestEnd) => Ok(ServerEvent::TestEnd),
        (false, State::IperfDone) => Ok(ServerEvent::Done),
        (_, State::ClientTerminate) => Err(ServerFailure::ClientTerminated),
        (_, other) => Err(ServerFailure::Unexpected(other)),
    }
}

/// The features both sides will use, from the client's request and what we support.
pub fn negotiate(req: &wire::ExtRequest) -> wire::ExtAnswer {
    let accepted = req
        .features
        .iter()
        .filter(|f| wire::EXT_FEATURES.contains(&f.as_str()))
        .take(wire::EXT_FEATURES.len())
        .cloned()
        .collect();
    wire::ExtAnswer {
        version: wire::EXT_VERSION.min(req.version),
        accepted,
        server: format!("netmeter {}", env!("CARGO_PKG_VERSION")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_iperf3_sequence() {
        let mut m = ClientMachine::new(false);
        assert_eq!(m.on_state(State::ParamExchange), Ok(ClientStep::SendParams));
        assert_eq!(
            m.on_state(State::CreateStreams),
            Ok(ClientStep::CreateStreams)
        );
        assert_eq!(m.on_state(State::TestStart), Ok(ClientStep::StartClock));
        assert_eq!(m.on_state(State::TestRunning), Ok(ClientStep::StartData));
        m.test_ended();
        assert_eq!(
            m.on_state(State::ExchangeResults),
            Ok(ClientStep::ExchangeResults)
        );
        assert_eq!(m.on_state(State::DisplayResults), Ok(ClientStep::Display));
        assert_eq!(m.phase, ClientPhase::Done);
    }

    #[test]
    fn extension_answer_only_when_requested() {
        let mut m = ClientMachine::new(true);
        m.on_state(State::ParamExchange).unwrap();
        assert_eq!(
            m.on_state(State::NetmeterExt),
            Ok(ClientStep::ReadExtAnswer)
        );
        assert_eq!(
            m.on_state(State::CreateStreams),
            Ok(ClientStep::CreateStreams)
        );

        let mut plain = ClientMachine::new(false);
        plain.on_state(State::ParamExchange).unwrap();
        assert!(plain.on_state(State::NetmeterExt).is_err());
    }

    #[test]
    fn busy_error_and_out_of_order_states() {
        let mut m = ClientMachine::new(false);
        assert_eq!(
            m.on_state(State::AccessDenied),
            Err(ClientFailure::AccessDenied)
        );
        let mut m = ClientMachine::new(false);
        assert_eq!(
            m.on_state(State::ServerError),
            Ok(ClientStep::ReadServerError)
        );
        let mut m = ClientMachine::new(false);
        assert!(matches!(
            m.on_state(State::TestRunning),
            Err(ClientFailure::Unexpected { .. })
        ));
    }

    #[test]
    fn server_side_events() {
        assert_eq!(
            server_on_state(true, State::TestEnd),
            Ok(ServerEvent::TestEnd)
        );
        assert_eq!(
            server_on_state(false, State::IperfDone),
            Ok(ServerEvent::Done)
        );
        assert_eq!(
            server_on_state(true, State::ClientTerminate),
            Err(ServerFailure::ClientTerminated)
        );
        assert!(server_on_state(true, State::IperfDone).is_err());
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
            features: vec!["udp_seq64".into(), "teleport".into(), "no_offload".into()],
        });
        assert_eq!(a.version, wire::EXT_VERSION);
        assert_eq!(
            a.accepted,
            vec!["udp_seq64".to_string(), "no_offload".to_string()]
        );
    }
}
