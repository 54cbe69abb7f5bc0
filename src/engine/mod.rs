//! The I/O half: sockets, threads and clocks that drive the pure parts.
//!
//! `client` and `server` run their halves of the control conversation (asking `control`'s
//! machines what each state byte means); `test_run` runs one test's data streams the same way on
//! both sides; `stream` (with `profile` and `connect`) moves data on one thread per
//! stream, `meter` samples the streams once per interval, and `output` renders the
//! report as it grows. Each layer uses only those below it (ARCHITECTURE.md,
//! "Layering").

pub mod bounce;
pub mod client;
pub mod clock;
pub mod connect;
pub mod ctrl;
pub mod disk_file;
pub mod iperf2_client;
pub mod live;
pub mod machine;
pub mod max_rate;
pub mod meter;
pub mod multicast;
pub mod output;
pub mod profile;
pub mod progress;
pub mod psk;
pub mod record;
pub mod server;
pub mod stream;
pub mod test_common;
pub mod test_run;
pub mod third_party;

use ctrl::CtrlError;

use crate::control::{ClientFailure, ClientStep, ServerFailure};
use crate::spec::SpecError;
use crate::wire::{ErrCode, State, WireError};
use std::net::SocketAddr;
use std::time::Duration;

/// Address family restriction (`-4` / `-6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Any,
    V4,
    V6,
}

/// How long either side waits for the next control message during setup and teardown
/// (iperf3 uses 30 s overall for one read).
pub const CTRL_TIMEOUT: Duration = crate::control::CTRL_TIMEOUT;

/// A test that was stopped on purpose rather than failing: a stop signal here, or the
/// peer's `CLIENT_TERMINATE` / `SERVER_TERMINATE`. The wording is iperf3's (its
/// `IECLIENTTERM` / `IESERVERTERM` messages, and since 3.19 "by signal Interrupt(2)"
/// after an interrupt), so scripts that match on it keep working.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Stopped {
    /// This client got the signal (SIGINT, SIGTERM or SIGHUP).
    #[error("interrupt - the client has terminated by signal {}", signal_name(*.0))]
    ClientInterrupted(i32),
    /// This server got the signal (SIGINT, SIGTERM or SIGHUP).
    #[error("interrupt - the server has terminated by signal {}", signal_name(*.0))]
    ServerInterrupted(i32),
    /// The server sent `SERVER_TERMINATE`.
    #[error("the server has terminated")]
    ServerTerminated,
    /// The client sent `CLIENT_TERMINATE`.
    #[error("the client has terminated")]
    ClientTerminated,
}

impl Stopped {
    /// This client was interrupted by the stop signal it received.
    pub fn client_interrupted() -> Stopped {
        Stopped::ClientInterrupted(crate::sock::stop_signal().unwrap_or(libc::SIGINT))
    }

    /// This server was interrupted by the stop signal it received.
    pub fn server_interrupted() -> Stopped {
        Stopped::ServerInterrupted(crate::sock::stop_signal().unwrap_or(libc::SIGINT))
    }

    /// Whether this process itself was told to stop (iperf3 then says "interrupt - …"
    /// rather than "error - …", and since 3.19 exits 0).
    pub fn by_signal(self) -> bool {
        matches!(
            self,
            Stopped::ClientInterrupted(_) | Stopped::ServerInterrupted(_)
        )
    }
}

/// Why a test (or a server) ended without a result. Each variant's message is the one
/// line `main` prints after "error - "; the wording is kept stable because scripts and
/// tests match on it. No variant exposes a `source()` beyond what it wraps
/// transparently, so `{:#}` through `anyhow` prints the same line.
#[derive(Debug, thiserror::Error)]
pub enum TestError {
    /// Stopped on purpose: a stop signal, or the peer's `*_TERMINATE`.
    #[error(transparent)]
    Stopped(#[from] Stopped),
    /// The control connection failed: timeout, closed, I/O, or bytes that did not parse.
    #[error(transparent)]
    Ctrl(#[from] CtrlError),
    /// Bytes from the peer that did not parse.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The server answered out of turn, or was busy.
    #[error(transparent)]
    Client(#[from] ClientFailure),
    /// The client sent a control message out of turn.
    #[error(transparent)]
    Server(#[from] ServerFailure),
    /// This server refused the client's parameters (and answered with their code).
    #[error("refused parameters: {0}")]
    Refused(SpecError),
    /// The server sent `SERVER_ERROR` with an iperf3 error code and its errno.
    #[error("the server reported an error: {}{}", .code.describe(), os_error(*.errno))]
    Peer { code: ErrCode, errno: i32 },
    /// The server sent `SERVER_ERROR` with an iperf3 error code and, after it, its own
    /// sentence (a netmeter server tells a netmeter client why, [`crate::wire::ExtNote`]).
    #[error("the server reported an error: {message} (iperf3 error {})", .code.to_i32())]
    PeerSaid {
        code: ErrCode,
        errno: i32,
        message: String,
    },
    /// The server ended a running test itself at one of its limits
    /// (`--server-max-duration`, `--test-idle-timeout`, `--server-bitrate-limit`).
    #[error("{0}")]
    LimitReached(String),
    /// The server was busy (`ACCESS_DENIED`) and said why (a netmeter server's
    /// `--max-tests`, `--max-tests-per-source` or `--max-conn-rate` sentence).
    #[error("the server is busy ({0}); try again later")]
    BusySaid(String),
    /// The server sent `SERVER_ERROR` but no readable code.
    #[error("the server reported an error but did not say which")]
    PeerUnexplained,
    /// The server sent `ACCESS_DENIED` while the test ran.
    #[error("the server denied access")]
    DeniedDuringTest,
    /// The server sent a state byte that has no meaning while the test runs.
    #[error("the server sent an unexpected {0:?} during the test")]
    UnexpectedDuringTest(State),
    /// A step the client machine cannot produce at this point (a bug).
    #[error("internal error: unexpected step {step:?} {when}")]
    UnexpectedStep {
        step: ClientStep,
        when: &'static str,
    },
    /// A test option the peer cannot serve (`flag` as the user typed it).
    #[error("{flag} needs a netmeter server; {host} answered like an iperf3 server")]
    NeedsNetmeter { flag: &'static str, host: String },
    /// Options that cannot run together here (found only once the test starts).
    #[error("{0}")]
    Usage(&'static str),
    /// The host name did not resolve.
    #[error("cannot resolve host '{0}': unknown host")]
    UnknownHost(String),
    /// The host has no address of the family asked for (`-4`/`-6`).
    #[error("host '{0}' has no address of the requested family")]
    NoAddress(String),
    /// Nothing listens on the server's TCP port.
    #[error("unable to connect to {0}: connection refused (is a server running on port {port}?)", port = .0.port())]
    ConnectRefused(SocketAddr),
    /// The server did not answer the TCP connect in time.
    #[error("unable to connect to {server}: no answer within {secs:.1} s")]
    ConnectTimeout { server: SocketAddr, secs: f64 },
    /// Nothing listens on the server's UDP port.
    #[error("the server refused the UDP stream (nothing listens on UDP port {port})")]
    UdpRefused { port: u16 },
    /// No answer to any UDP connect datagram.
    #[error(
        "the server did not answer the UDP stream setup after {tries} tries; is UDP port {port} reachable?"
    )]
    UdpNoAnswer { tries: usize, port: u16 },
    /// A data stream thread failed.
    #[error("a data stream failed: {0}")]
    Stream(record::StreamError),
    /// A receiving client heard nothing from the server for `secs` (`--rcv-timeout`;
    /// by default only in a `-t 0` test).
    #[error(
        "no data received for {secs} s; the server seems to have stopped sending (--rcv-timeout)"
    )]
    ServerSilent { secs: f64 },
    /// A server heard no data from the client for `secs` (`--rcv-timeout`).
    #[error("idle timeout for receiving data: no data for {secs} s (--rcv-timeout)")]
    ClientSilent { secs: f64 },
    /// A timed test the client did not end within its duration plus grace.
    #[error("the client did not end the test in time")]
    ClientOvertime,
    /// The client did not open all its data streams in time.
    #[error("the client opened {opened} of {total} data streams in time")]
    StreamsMissing { opened: usize, total: usize },
    /// The hand-off of accepted streams to a session broke (a bug).
    #[error("stream hand-off closed")]
    HandOffClosed,
    /// `--connect-only`: not one short connection succeeded.
    #[error(
        "--connect-only: none of {failed} connection attempts to {host} succeeded (last error: {last_error})"
    )]
    NoConnection {
        failed: u64,
        host: String,
        last_error: String,
    },
    /// `--find-max-rate`: no rate tried passed.
    #[error("no rate kept the loss within {loss_target}%")]
    NoRatePassed { loss_target: f64 },
    /// `--username`: the credential could not be made (see `auth`).
    #[error("cannot make the authentication credential: {0}")]
    AuthToken(crate::auth::AuthError),
    /// `--username`: the server closed the connection right after the parameters without
    /// a word, which is how iperf3 3.22 servers refuse a credential.
    #[error(
        "the server closed the connection after the parameters: test authorization failed (wrong user, password, key or padding?)"
    )]
    AuthClosed,
    /// `--username`: the server answered the parameters with an error only a running
    /// test can have (see [`ErrCode::arises_only_in_a_running_test`]): an iperf3 3.22
    /// server refusing a credential with its previous test's leftover error.
    #[error(
        "the server refused the test after the parameters: test authorization failed (wrong user, password, key or padding?); the error it sent, {}{}, is left over from its previous test",
        .code.describe(),
        os_error(*.errno)
    )]
    AuthRefusedStale { code: ErrCode, errno: i32 },
    /// A client without credentials met a server that requires them.
    #[error(
        "the server refused the test: test authorization failed; it requires a pre-shared key (--psk-file) or a user name and key (--username, --rsa-public-key-path)"
    )]
    AuthRequired,
    /// `--psk-file`: the key exchange failed (a different key, a server without one).
    #[error("pre-shared-key authentication failed: {0}")]
    Psk(psk::PskFailure),
    /// A third-party server did not run the test (refused, or the test failed there).
    #[error("{host} did not run the test: {why}")]
    ThirdParty { host: String, why: String },
    /// A third-party server's test met a busy server: worth trying again.
    #[error("{host} did not run the test: {why}")]
    ThirdPartyBusy { host: String, why: String },
    /// A system call failed while doing `what`.
    #[error("{what}: {err}")]
    IoWhile { what: String, err: std::io::Error },
    /// A system call failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A JSON document could not be written.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl TestError {
    /// A failed system call and what it was doing.
    pub fn io_while(what: impl Into<String>, err: std::io::Error) -> TestError {
        TestError::IoWhile {
            what: what.into(),
            err,
        }
    }

    /// A busy server (iperf3's access denied, here or at a third-party test's target):
    /// the same test may run later.
    pub fn is_busy(&self) -> bool {
        matches!(
            self,
            TestError::Client(ClientFailure::AccessDenied)
                | TestError::BusySaid(_)
                | TestError::ThirdPartyBusy { .. }
                | TestError::Peer {
                    code: ErrCode::AccessDenied,
                    ..
                }
        )
    }

    /// The [`Stopped`] this error is, if the test was stopped on purpose.
    pub fn stopped(&self) -> Option<Stopped> {
        match self {
            TestError::Stopped(s) => Some(*s),
            _ => None,
        }
    }
}

/// `": <strerror>"` for a non-zero errno from the peer, else nothing.
fn os_error(errno: i32) -> String {
    if errno != 0 {
        format!(": {}", std::io::Error::from_raw_os_error(errno))
    } else {
        String::new()
    }
}

/// A stop signal as glibc's `strsignal` names it, with its number: `Interrupt(2)`.
fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGINT => "Interrupt",
        libc::SIGTERM => "Terminated",
        libc::SIGHUP => "Hangup",
        _ => "Signal",
    };
    format!("{name}({sig})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupts_are_worded_as_iperf3_3_19_and_later() {
        assert_eq!(
            Stopped::ClientInterrupted(libc::SIGINT).to_string(),
            "interrupt - the client has terminated by signal Interrupt(2)"
        );
        assert_eq!(
            Stopped::ServerInterrupted(libc::SIGTERM).to_string(),
            "interrupt - the server has terminated by signal Terminated(15)"
        );
        assert!(Stopped::ClientInterrupted(libc::SIGHUP).by_signal());
        assert!(!Stopped::ServerTerminated.by_signal());
    }

    /// The lines users and scripts see stay word for word.
    #[test]
    fn error_messages_keep_their_wording() {
        let e = TestError::from(Stopped::ClientInterrupted(libc::SIGINT));
        assert_eq!(e.stopped(), Some(Stopped::ClientInterrupted(libc::SIGINT)));
        assert_eq!(
            TestError::Client(ClientFailure::AccessDenied).to_string(),
            "the server is busy running a test; try again later"
        );
        assert_eq!(
            TestError::Peer {
                code: ErrCode::Affinity,
                errno: 0
            }
            .to_string(),
            "the server reported an error: the server could not apply a requested socket option (iperf3 error 132)"
        );
        assert_eq!(
            TestError::BusySaid("1 test(s) already running (--max-tests 1)".into()).to_string(),
            "the server is busy (1 test(s) already running (--max-tests 1)); try again later"
        );
        assert!(TestError::BusySaid(String::new()).is_busy());
        assert_eq!(
            TestError::PeerSaid {
                code: ErrCode::NumStreams,
                errno: 0,
                message: "the client asked for 4 data streams and this server allows at most 2 (--max-streams)".into(),
            }
            .to_string(),
            "the server reported an error: the client asked for 4 data streams and this server allows at most 2 (--max-streams) (iperf3 error 6)"
        );
        assert_eq!(
            TestError::AuthRefusedStale {
                code: ErrCode::StreamRead,
                errno: libc::EBADF
            }
            .to_string(),
            "the server refused the test after the parameters: test authorization failed (wrong user, password, key or padding?); the error it sent, the server could not create or run a data stream (iperf3 error 206): Bad file descriptor (os error 9), is left over from its previous test"
        );
        assert_eq!(
            TestError::ConnectRefused("127.0.0.1:5201".parse().unwrap()).to_string(),
            "unable to connect to 127.0.0.1:5201: connection refused (is a server running on port 5201?)"
        );
        assert_eq!(
            TestError::NeedsNetmeter {
                flag: "--trip-times",
                host: "h".into()
            }
            .to_string(),
            "--trip-times needs a netmeter server; h answered like an iperf3 server"
        );
        let io = std::io::Error::from_raw_os_error(libc::EADDRINUSE);
        let text = io.to_string();
        assert_eq!(
            TestError::io_while("cannot bind to 0.0.0.0 port 1", io).to_string(),
            format!("cannot bind to 0.0.0.0 port 1: {text}")
        );
        assert!(TestError::ClientOvertime.stopped().is_none());
        // A stream thread's error is typed, and still reads as the io::Error it wraps.
        let reset = std::io::Error::from_raw_os_error(libc::ECONNRESET);
        let text = reset.to_string();
        let e = record::StreamError {
            stream: 3,
            sender: true,
            err: std::sync::Arc::new(reset),
        };
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset);
        assert_eq!(
            TestError::Stream(e).to_string(),
            format!("a data stream failed: {text}")
        );
    }
}
