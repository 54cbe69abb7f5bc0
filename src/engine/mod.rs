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
