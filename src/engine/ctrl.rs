//! The control connection: framed reads and writes with a deadline on every wait.
//!
//! Every read has a deadline, every length is checked against a cap before allocating,
//! and every failure becomes a [`CtrlError`] that names what was being waited for.
//!
//! Only the I/O lives here: the conversation's deadlines are the control machines'
//! (`crate::control`), which hand the driver a [`Wait`] for each read (`*_until`). The
//! reads taking a `Duration` serve exchanges that bound themselves (the clock probes,
//! the pre-shared-key exchange, the third-party answer). The host's clock is read only
//! through `clock::mono_now`, to bound the system calls: a `Wait` is on the host's
//! monotonic clock, which is the driver's in production (`clock::system()`); a machine
//! on virtual time is driven without sockets (`control/pair.rs`).

use crate::clock::mono_now;
use crate::control::Wait;
use crate::wire::{self, ErrCode, State, WireError};
use serde::Serialize;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What went wrong on the control connection.
#[derive(Debug, thiserror::Error)]
pub enum CtrlError {
    #[error("timed out after {0:.1} s waiting for {1}")]
    Timeout(f64, &'static str),
    #[error("the peer closed the control connection while netmeter waited for {0}")]
    Closed(&'static str),
    #[error("control connection error while waiting for {1}: {0}")]
    Io(io::Error, &'static str),
    #[error("{1} could not be read: {0}")]
    Wire(WireError, &'static str),
    /// A stop signal (SIGINT, SIGTERM, SIGHUP) arrived while waiting for {0}.
    #[error("interrupted by a signal while waiting for {0}")]
    Interrupted(&'static str),
}

/// How long one slice of a control read waits before looking for a stop signal.
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// A state byte's name for `-d` output.
fn state_name(b: u8) -> String {
    State::from_byte(b).map_or_else(|_| "(unknown)".into(), |s| format!("{s:?}"))
}

/// A control connection with deadline-bounded framed I/O.
pub struct Ctrl {
    pub sock: TcpStream,
    /// Give up a wait with [`CtrlError::Interrupted`] once a stop signal arrived
    /// (`sock::stop_signal`). Off for the in-process server of `--loopback`, which the
    /// client stops itself.
    pub stop_on_signal: bool,
    /// A stop asked for by other means than a signal (a third-party test's controller,
    /// `engine::server::third_party`): heeded as a stop signal is, with
    /// `stop_on_signal`.
    pub stop: Option<Arc<AtomicBool>>,
    /// `-d`: write each control message (state bytes, JSON) to stderr as it passes.
    pub debug: bool,
}

impl Ctrl {
    /// `-d`'s one line about the control conversation (stderr, so that `-J` output on
    /// stdout stays one document).
    fn debug_line(&self, what: std::fmt::Arguments<'_>) {
        if self.debug {
            eprintln!("netmeter debug: {what}");
        }
    }

    pub fn new(sock: TcpStream) -> Ctrl {
        let _ = sock.set_nodelay(true);
        let _ = sock.set_write_timeout(Some(Duration::from_secs(30)));
        Ctrl {
            sock,
            stop_on_signal: false,
            stop: None,
            debug: false,
        }
    }

    /// Whether a stop signal arrived that this connection heeds.
    fn signalled(&self) -> bool {
        self.stop_on_signal
            && (crate::sock::stop_signal().is_some()
                || self
                    .stop
                    .as_ref()
                    .is_some_and(|s| s.load(Ordering::Acquire)))
    }

    /// Read exactly `buf.len()` bytes before `timeout` elapses.
    pub fn read_exact(
        &mut self,
        buf: &mut [u8],
        timeout: Duration,
        what: &'static str,
    ) -> Result<(), CtrlError> {
        self.read_exact_until(buf, Wait::new(mono_now(), timeout, what))
    }

    /// Read exactly `buf.len()` bytes before `wait.until`.
    pub fn read_exact_until(&mut self, buf: &mut [u8], wait: Wait) -> Result<(), CtrlError> {
        let what = wait.what;
        let mut got = 0;
        while got < buf.len() {
            let left = wait.until.saturating_duration_since(mono_now());
            if left.is_zero() {
                return Err(CtrlError::Timeout(wait.after.as_secs_f64(), what));
            }
            if self.signalled() {
                return Err(CtrlError::Interrupted(what));
            }
            let slice = if self.stop_on_signal {
                left.min(SIGNAL_CHECK)
            } else {
                left
            };
            self.sock
                .set_read_timeout(Some(slice.max(Duration::from_millis(1))))
                .map_err(|e| CtrlError::Io(e, what))?;
            match self.sock.read(&mut buf[got..]) {
                Ok(0) => return Err(CtrlError::Closed(what)),
                Ok(n) => got += n,
                Err(e) if is_timeout(&e) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(CtrlError::Io(e, what)),
            }
        }
        Ok(())
    }

    /// Wait up to `timeout` for one state byte; `Ok(None)` if none arrived in time.
    pub fn poll_state(
        &mut self,
        timeout: Duration,
        what: &'static str,
    ) -> Result<Option<State>, CtrlError> {
        if self.signalled() {
            return Err(CtrlError::Interrupted(what));
        }
        // poll() with microsecond precision: socket read timeouts are rounded to
        // kernel ticks, which would make interval boundaries drift by milliseconds.
        match crate::sock::wait_readable(self.sock.as_fd(), timeout) {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(e) => return Err(CtrlError::Io(e, what)),
        }
        self.sock
            .set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(|e| CtrlError::Io(e, what))?;
        let mut b = [0u8; 1];
        match self.sock.read(&mut b) {
            Ok(0) => Err(CtrlError::Closed(what)),
            Ok(_) => {
                self.debug_line(format_args!(
                    "got state {} {} ({what})",
                    b[0],
                    state_name(b[0])
                ));
                State::from_byte(b[0])
                    .map(Some)
                    .map_err(|e| CtrlError::Wire(e, what))
            }
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => Ok(None),
            Err(e) => Err(CtrlError::Io(e, what)),
        }
    }

    /// Wait up to `timeout` for one state byte.
    pub fn read_state(
        &mut self,
        timeout: Duration,
        what: &'static str,
    ) -> Result<State, CtrlError> {
        self.read_state_until(Wait::new(mono_now(), timeout, what))
    }

    /// Wait until `wait.until` for one state byte.
    pub fn read_state_until(&mut self, wait: Wait) -> Result<State, CtrlError> {
        let what = wait.what;
        let mut b = [0u8; 1];
        self.read_exact_until(&mut b, wait)?;
        self.debug_line(format_args!(
            "got state {} {} ({what})",
            b[0],
            state_name(b[0])
        ));
        State::from_byte(b[0]).map_err(|e| CtrlError::Wire(e, what))
    }

    /// Read one length-prefixed JSON message of at most `max` bytes.
    pub fn read_json<T: for<'de> serde::Deserialize<'de>>(
        &mut self,
        max: u32,
        timeout: Duration,
        what: &'static str,
    ) -> Result<T, CtrlError> {
        self.read_json_until(max, Wait::new(mono_now(), timeout, what))
    }

    /// Read one length-prefixed JSON message of at most `max` bytes, all of it before
    /// `wait.until`.
    pub fn read_json_until<T: for<'de> serde::Deserialize<'de>>(
        &mut self,
        max: u32,
        wait: Wait,
    ) -> Result<T, CtrlError> {
        let what = wait.what;
        let mut hdr = [0u8; 4];
        self.read_exact_until(&mut hdr, wait)?;
        let len = wire::decode_json_len(hdr, max).map_err(|e| CtrlError::Wire(e, what))?;
        let mut body = vec![0u8; len];
        self.read_exact_until(&mut body, wait)?;
        self.debug_line(format_args!(
            "got JSON ({what}): {}",
            String::from_utf8_lossy(&body)
        ));
        wire::decode_json(&body).map_err(|e| CtrlError::Wire(e, what))
    }

    /// Read the 8-byte trailer that follows `SERVER_ERROR`. Some iperf3 paths send only
    /// the 4-byte code and close (3.12's refused credential, `iperf_exchange_parameters`);
    /// iperf3's client prints the code then, and so does this: errno reads as 0.
    pub fn read_error_trailer(&mut self, timeout: Duration) -> Result<(ErrCode, i32), CtrlError> {
        let wait = Wait::new(mono_now(), timeout, "the server's error code");
        let mut b = [0u8; 8];
        self.read_exact_until(&mut b[..4], wait)?;
        let errno = Wait {
            what: "the server's errno",
            ..wait
        };
        match self.read_exact_until(&mut b[4..], errno) {
            Ok(()) | Err(CtrlError::Closed(_)) => Ok(wire::decode_error_trailer(b)),
            Err(e) => Err(e),
        }
    }

    pub fn write(&mut self, bytes: &[u8], what: &'static str) -> Result<(), CtrlError> {
        self.sock
            .write_all(bytes)
            .map_err(|e| CtrlError::Io(e, what))
    }

    pub fn send_state(&mut self, s: State) -> Result<(), CtrlError> {
        self.debug_line(format_args!("sent state {} {s:?}", s.to_byte()));
        self.write(&[s.to_byte()], "sending a state byte")
    }

    pub fn send_json<T: Serialize>(&mut self, v: &T, what: &'static str) -> Result<(), CtrlError> {
        let bytes = wire::encode_json(v);
        self.debug_line(format_args!(
            "sent JSON ({what}): {}",
            String::from_utf8_lossy(bytes.get(4..).unwrap_or_default())
        ));
        self.write(&bytes, what)
    }

    /// Close without waiting for the peer (it has said all it will).
    pub fn close_quietly(&mut self) {
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
    }

    /// Half-close and drain until the peer closes (bounded), so the last byte we sent is
    /// not destroyed by a reset (iperf3's `iperf_sync_close_socket`).
    pub fn close_gracefully(mut self, timeout: Duration) {
        let _ = self.sock.shutdown(std::net::Shutdown::Write);
        let deadline = mono_now() + timeout;
        let mut buf = [0u8; 256];
        while mono_now() < deadline {
            let _ = self.sock.set_read_timeout(Some(
                deadline
                    .saturating_duration_since(mono_now())
                    .max(Duration::from_millis(1)),
            ));
            match self.sock.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if is_timeout(&e) => break,
                Err(_) => break,
            }
        }
    }
}

/// Whether an I/O error is a socket timeout.
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}
