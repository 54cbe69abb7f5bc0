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

    /// The `Stopped` an error is (or wraps), if any.
    pub fn of(e: &anyhow::Error) -> Option<Stopped> {
        e.downcast_ref::<Stopped>().copied()
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
}
