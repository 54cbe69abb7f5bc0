//! The I/O half: sockets, threads and clocks that drive the pure parts.
//!
//! `client` and `server` run the control conversation (asking `session` what each
//! state byte means), `stream` moves data on one thread per stream, `meter` samples the
//! streams once per interval, and `output` renders the report as it grows.

pub mod client;
pub mod clock;
pub mod connect;
pub mod ctrl;
pub mod max_rate;
pub mod meter;
pub mod output;
pub mod profile;
pub mod server;
pub mod stream;
pub mod test_common;

use std::time::Duration;

/// How long either side waits for the next control message during setup and teardown
/// (iperf3 uses 30 s overall for one read).
pub const CTRL_TIMEOUT: Duration = Duration::from_secs(30);

/// A test that was stopped on purpose rather than failing: a stop signal here, or the
/// peer's `CLIENT_TERMINATE` / `SERVER_TERMINATE`. The wording is iperf3's (its
/// `IECLIENTTERM` / `IESERVERTERM` messages), so scripts that match on it keep working.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Stopped {
    /// This client got SIGINT, SIGTERM or SIGHUP.
    #[error("interrupt - the client has terminated")]
    ClientInterrupted,
    /// This server got SIGINT, SIGTERM or SIGHUP.
    #[error("interrupt - the server has terminated")]
    ServerInterrupted,
    /// The server sent `SERVER_TERMINATE`.
    #[error("the server has terminated")]
    ServerTerminated,
    /// The client sent `CLIENT_TERMINATE`.
    #[error("the client has terminated")]
    ClientTerminated,
}

impl Stopped {
    /// The `Stopped` an error is (or wraps), if any.
    pub fn of(e: &anyhow::Error) -> Option<Stopped> {
        e.downcast_ref::<Stopped>().copied()
    }

    /// Whether this process itself was told to stop (iperf3 then says "interrupt - …"
    /// rather than "error - …").
    pub fn by_signal(self) -> bool {
        matches!(
            self,
            Stopped::ClientInterrupted | Stopped::ServerInterrupted
        )
    }
}
