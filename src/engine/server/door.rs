//! The server's door: every connection's handshake, served by the accept loop's one
//! thread, before any thread is spent on it.
//!
//! A connection accepted here waits in a poll set, read without blocking, until it
//! has said who it is: its 37-byte cookie (a data stream of a waiting test goes to that
//! test, a connect-only test's short connection is answered), and for a new test
//! `PARAM_EXCHANGE`, its parameters and, with `--psk-file`, its key proof. Only then
//! does it get a session thread. Until then it costs a descriptor and a few bytes, and
//! the [`budget::Budget`] bounds how many may wait (in total and per source, the least
//! advanced and oldest dropped first) and for how long; `--max-conn-rate` is charged
//! when the connection is accepted. A flood of stalled handshakes from one source
//! therefore holds at most [`budget::MAX_PENDING_PER_SOURCE`] descriptors and no thread
//! (issue 20: it used to hold a thread each, up to the task limit).
//!
//! The pure parts are `budget` (who waits, whom to drop, deadlines) and `handshake`
//! (the bytes); this file is the I/O around them.

pub mod budget;
pub mod handshake;

use super::audit::{self, Entry};
use super::policy::{Answer, Reason, Refusal};
use super::{Shared, canon, shown};
use crate::auth::psk::{self as psk_proofs, Nonce};
use crate::engine::ctrl::CtrlError;
use crate::engine::psk::{self, PskFailure};
use crate::wire::{self, COOKIE_LEN, Cookie, ErrCode, Params, PskResponse, State};
use budget::{Budget, MAX_PENDING, MAX_PENDING_PER_SOURCE, Source, Stage};
use handshake::{Handshake, Step};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long a new connection may take to send its cookie.
pub const COOKIE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client may take to send its parameters after `PARAM_EXCHANGE`.
pub const PARAMS_TIMEOUT: Duration = crate::control::PARAMS_TIMEOUT;
/// How long a client may take to prove the pre-shared key after the challenge.
pub const PROOF_TIMEOUT: Duration = Duration::from_secs(10);
/// Reads of one connection per wake-up of the loop (4 KiB each at most).
const READS_PER_WAKE: usize = 16;
/// How long a refused connection may take to read its answer and close.
const CLOSING_TIMEOUT: Duration = Duration::from_secs(1);
/// Session threads beyond `--max-tests` (a refused test's thread lives briefly; a
/// third-party request's while it runs): past that, new tests are told "busy" at the
/// door, so whatever clients do the server runs a bounded number of threads.
pub const SESSION_SPARE: usize = 16;

/// A handshake that is complete: what its session thread starts from.
pub(super) struct Ready {
    pub sock: TcpStream,
    pub peer: SocketAddr,
    pub cookie: Cookie,
    pub params: Params,
    /// The client proved the `--psk-file` key.
    pub authenticated: bool,
}

/// A connection in its handshake.
struct Conn {
    sock: TcpStream,
    peer: SocketAddr,
    hs: Handshake,
    cookie: [u8; COOKIE_LEN],
    params: Option<Params>,
    /// The key exchange under way: client nonce, our nonce, the bound request.
    proof: Option<(Nonce, Nonce, Nonce)>,
    /// `--max-conn-rate` took a token for this connection.
    charged: bool,
    /// The peer has sent at least one byte.
    heard: bool,
    /// An iperf 2 test header, as far as it came (`wire::classify_tcp` told it from a
    /// cookie by its first bytes).
    iperf2: Option<Vec<u8>>,
    /// When it was accepted, wall clock (iperf 2's `--trip-times` acknowledgement).
    accepted_wall: std::time::SystemTime,
}

/// The pending handshakes.
pub(super) struct Door {
    shared: Arc<Shared>,
    budget: Budget,
    conns: HashMap<u64, Conn>,
    /// iperf 2 connections' threads (`iperf2::tcp`), joined when the door closes.
    iperf2_threads: Vec<std::thread::JoinHandle<()>>,
}

impl Drop for Door {
    /// The server is stopping: iperf 2 connections notice at their next tick.
    fn drop(&mut self) {
        for h in self.iperf2_threads.drain(..) {
            let _ = h.join();
        }
    }
}

/// Write a few bytes to a fresh non-blocking socket; its send buffer is empty, so
/// anything short of all of them means the peer is gone or misbehaving.
fn send(sock: &mut TcpStream, bytes: &[u8]) -> bool {
    matches!(sock.write(bytes), Ok(n) if n == bytes.len())
}

impl Door {
    pub fn new(shared: Arc<Shared>) -> Door {
        Door {
            shared,
            budget: Budget::new(MAX_PENDING, MAX_PENDING_PER_SOURCE),
            conns: HashMap::new(),
            iperf2_threads: Vec::new(),
        }
    }

    fn debug(&self, what: std::fmt::Arguments<'_>) {
        if self.shared.cfg.side.debug.is_some() {
            eprintln!("netmeter debug: {what}");
        }
    }

    /// Wait up to `wait` (less when a deadline comes sooner) for the listener or a
    /// pending connection; returns whether the listener is ready and which
    /// connections are.
    pub fn poll(
        &self,
        listener: Option<BorrowedFd<'_>>,
        wait: Duration,
        now: Instant,
    ) -> io::Result<(bool, Vec<u64>)> {
        let wait = match self.budget.next_deadline() {
            Some(d) => wait.min(d.saturating_duration_since(now)),
            None => wait,
        };
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        let mut fds: Vec<BorrowedFd<'_>> = Vec::with_capacity(ids.len() + 1);
        fds.extend(listener);
        fds.extend(
            ids.iter()
                .filter_map(|id| self.conns.get(id))
                .map(|c| c.sock.as_fd()),
        );
        let mut ready = Vec::new();
        crate::sock::poll_readable(
            fds.iter().copied(),
            wait.max(Duration::from_millis(1)),
            &mut ready,
        )?;
        let skip = usize::from(listener.is_some());
        let listener_ready = listener.is_some() && ready.first().copied().unwrap_or(false);
        let conns = ids
            .into_iter()
            .zip(ready.into_iter().skip(skip))
            .filter_map(|(id, r)| r.then_some(id))
            .collect();
        Ok((listener_ready, conns))
    }

    /// A connection just accepted (by the accept loop or handed back by a connect-only
    /// test's acceptor), numbered `seq` in accept order.
    pub fn accepted(
        &mut self,
        sock: TcpStream,
        peer: SocketAddr,
        seq: u64,
        now: Instant,
    ) -> Option<Ready> {
        let shared = self.shared.clone();
        if sock.set_nonblocking(true).is_err() {
            return None;
        }
        let source = Source::of(canon(peer.ip()));
        let exempt = shared.runs_from(source);
        let conn = Conn {
            sock,
            peer,
            hs: Handshake::new(),
            cookie: [0; COOKIE_LEN],
            params: None,
            proof: None,
            charged: false,
            heard: false,
            iperf2: None,
            accepted_wall: crate::clock::wall_now(),
        };
        let dropped = self
            .budget
            .admit(seq, source, Stage::Cookie, now + COOKIE_TIMEOUT, exempt);
        for id in dropped {
            if let Some(c) = self.conns.remove(&id)
                && shared.cfg.verbose
            {
                shared.log(&format!(
                    "dropped a connection from {} still in its handshake: too many are waiting",
                    shown(c.peer)
                ));
            }
        }
        self.conns.insert(seq, conn);
        // `--max-conn-rate`: charged now, before a byte is read (a source with a test
        // running here is not charged for its data streams).
        if !exempt && let Some(gate) = &shared.rate_gate {
            let admitted = match gate.lock() {
                Ok(mut g) => g.admit(canon(peer.ip()), now),
                Err(_) => Ok(()),
            };
            if let Err(r) = admitted {
                self.refuse(seq, r, now);
                return None;
            }
            if let Some(c) = self.conns.get_mut(&seq) {
                c.charged = true;
            }
        }
        // Its cookie is usually in already.
        self.readable(seq, now)
    }

    /// A pending connection is readable: take what it sent.
    pub fn readable(&mut self, id: u64, now: Instant) -> Option<Ready> {
        let mut buf = [0u8; 4096];
        // Reads per wake-up: a peer that keeps sending cannot hold the loop.
        for _ in 0..READS_PER_WAKE {
            let conn = self.conns.get_mut(&id)?;
            if self.budget.stage(id) == Some(Stage::Closing) {
                // A refused connection: discard until it closes.
                match conn.sock.read(&mut buf) {
                    Ok(n) if n > 0 => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    _ => {
                        self.forget(id);
                        return None;
                    }
                }
            }
            let want = conn.hs.wanted().min(buf.len());
            if want == 0 {
                // Nothing is owed now (cannot happen while it waits here): drop it
                // rather than poll a readable socket forever.
                self.forget(id);
                return None;
            }
            let n = match conn.sock.read(&mut buf[..want]) {
                Ok(0) => {
                    self.lost(id, CtrlError::Closed(self.waiting_for(id)));
                    return None;
                }
                Ok(n) => {
                    conn.heard = true;
                    n
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let what = self.waiting_for(id);
                    self.lost(id, CtrlError::Io(e, what));
                    return None;
                }
            };
            match conn.hs.feed(&buf[..n]) {
                Step::More => {}
                Step::Cookie(c) => {
                    conn.cookie = c;
                    if let wire::TcpOpening::Iperf2 { header_len } = wire::classify_tcp(&c) {
                        self.iperf2_opening(id, header_len, now)?;
                        continue;
                    }
                    self.on_cookie(id, now)?;
                    // Handed on, or waiting for its parameters: read on (they may be in).
                }
                Step::Message(body) if conn.iperf2.is_some() => {
                    self.iperf2_header(id, &body, now);
                    return None;
                }
                Step::Message(body) => return self.on_message(id, &body, now),
                Step::Bad(e) => {
                    let what = self.waiting_for(id);
                    self.bad_params(id, CtrlError::Wire(e, what), now);
                    return None;
                }
            }
        }
        None
    }

    /// What connection `id` owes, for messages.
    fn waiting_for(&self, id: u64) -> &'static str {
        if self.conns.get(&id).is_some_and(|c| c.iperf2.is_some()) {
            return "the rest of its iperf 2 header";
        }
        match self.budget.stage(id) {
            Some(Stage::Params) => "the parameters",
            Some(Stage::Proof) => "the pre-shared-key proof",
            _ => "the cookie",
        }
    }

    /// Close connections whose time is up.
    pub fn expire(&mut self, now: Instant) {
        for id in self.budget.expired(now) {
            let timeout = match self.budget.stage(id) {
                Some(Stage::Params) => PARAMS_TIMEOUT,
                Some(Stage::Proof) => PROOF_TIMEOUT,
                Some(Stage::Closing) => {
                    self.forget(id);
                    continue;
                }
                _ => COOKIE_TIMEOUT,
            };
            let what = self.waiting_for(id);
            self.lost(id, CtrlError::Timeout(timeout.as_secs_f64(), what));
        }
    }

    /// The connection closed, failed or timed out in its handshake: log as the
    /// threads did, and forget it.
    fn lost(&mut self, id: u64, e: CtrlError) {
        let Some(stage) = self.budget.stage(id) else {
            return;
        };
        let Some(conn) = self.conns.get(&id) else {
            return;
        };
        let peer = shown(conn.peer);
        let shared = self.shared.clone();
        match stage {
            Stage::Cookie => {
                // Closed without a word (a port probe, a health check): no test attempt.
                if conn.charged
                    && !conn.heard
                    && matches!(e, CtrlError::Closed(_))
                    && let Some(gate) = &shared.rate_gate
                    && let Ok(mut g) = gate.lock()
                {
                    g.refund(canon(conn.peer.ip()));
                }
                if shared.cfg.verbose {
                    shared.log(&format!("dropped connection from {peer}: {e}"));
                }
            }
            Stage::Params => shared.log(&format!(
                "connection from {peer} dropped before a test started: {e}"
            )),
            Stage::Proof => {
                let why = match e {
                    CtrlError::Closed(_) => "the client left without proving the key".to_string(),
                    e => e.to_string(),
                };
                let r = Refusal {
                    reason: Reason::Auth,
                    answer: Answer::Error(ErrCode::AuthTest),
                    message: format!("pre-shared-key authentication failed: {why}"),
                };
                let mut entry = Entry::begun(peer, shared.now(), shared.cfg.clock.wall());
                shared.log_refusal(&mut entry, &r);
                shared.record(&entry, &audit::Outcome::Refused(r.reason, r.message));
            }
            Stage::Closing => {}
        }
        self.forget(id);
    }

    fn forget(&mut self, id: u64) {
        self.budget.remove(id);
        self.conns.remove(&id);
    }

    /// Tell the client why it may not test (as `Shared::refuse` does, without
    /// waiting), log and record it, and let it close.
    fn refuse(&mut self, id: u64, r: Refusal, now: Instant) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        match r.answer {
            Answer::Error(code) => send(&mut conn.sock, &wire::encode_server_error(code, 0)),
            Answer::Busy => send(&mut conn.sock, &[State::AccessDenied.to_byte()]),
        };
        let _ = conn.sock.shutdown(std::net::Shutdown::Write);
        let mut entry = Entry::begun(
            shown(conn.peer),
            self.shared.now(),
            self.shared.cfg.clock.wall(),
        );
        self.shared.log_refusal(&mut entry, &r);
        if let Some(p) = &conn.params {
            entry.test = crate::spec::TestSpec::from_params(p)
                .ok()
                .map(|s| audit::TestParams::of(&s));
        }
        self.shared
            .record(&entry, &audit::Outcome::Refused(r.reason, r.message));
        self.budget
            .advance(id, Stage::Closing, now + CLOSING_TIMEOUT);
    }

    /// Unreadable parameters: iperf3's "error receiving parameters", as a session did.
    fn bad_params(&mut self, id: u64, e: CtrlError, now: Instant) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        send(
            &mut conn.sock,
            &wire::encode_server_error(ErrCode::RecvParams, 0),
        );
        let _ = conn.sock.shutdown(std::net::Shutdown::Write);
        self.shared.log(&format!(
            "connection from {} dropped before a test started: {e}",
            shown(conn.peer)
        ));
        self.budget
            .advance(id, Stage::Closing, now + CLOSING_TIMEOUT);
    }

    /// The cookie is in: a data stream, a connect-only connection, or a new test.
    /// `None` when the connection is handed on or closed.
    fn on_cookie(&mut self, id: u64, now: Instant) -> Option<()> {
        let shared = self.shared.clone();
        let conn = self.conns.get_mut(&id)?;
        let cookie = conn.cookie;
        let peer = conn.peer;
        // `--allow`/`--deny` apply to every connection, a test's data streams included.
        if let Err(r) = shared.cfg.policy.check_address(canon(peer.ip())) {
            let is_stream = shared
                .tcp_waiters
                .lock()
                .is_ok_and(|w| w.contains_key(&cookie));
            if is_stream {
                shared.log(&format!(
                    "dropped a data connection from {}: {}",
                    shown(peer),
                    r.message
                ));
                self.forget(id);
            } else {
                self.refuse(id, r, now);
            }
            return None;
        }
        // A short connection of a connect-only test (its cookie came late)?
        if shared.connect_hub.answer(&cookie, &mut conn.sock) {
            self.forget(id);
            return None;
        }
        // A data stream of a test that is waiting for its streams?
        let waiter = shared
            .tcp_waiters
            .lock()
            .ok()
            .and_then(|w| w.get(&cookie).cloned());
        if let Some(tx) = waiter {
            let conn = self.conns.remove(&id)?;
            self.budget.remove(id);
            if conn.sock.set_nonblocking(false).is_ok() {
                let _ = tx.send((id, conn.sock));
            }
            return None;
        }
        // A new test. Past the session threads the server allows, it is busy.
        let live = shared.sessions_live.load(Ordering::Relaxed);
        if live >= shared.cfg.policy.max_tests.saturating_add(SESSION_SPARE) {
            let r = Refusal {
                reason: Reason::Busy,
                answer: Answer::Busy,
                message: format!(
                    "{live} sessions already running (--max-tests {} and {SESSION_SPARE} more)",
                    shared.cfg.policy.max_tests
                ),
            };
            self.refuse(id, r, now);
            return None;
        }
        if !send(&mut conn.sock, &[State::ParamExchange.to_byte()]) {
            self.forget(id);
            return None;
        }
        self.debug(format_args!(
            "sent state {} ParamExchange",
            State::ParamExchange.to_byte()
        ));
        let conn = self.conns.get_mut(&id)?;
        conn.hs.expect_message(wire::MAX_PARAMS_LEN);
        self.budget.advance(id, Stage::Params, now + PARAMS_TIMEOUT);
        Some(())
    }

    /// A whole message arrived: the parameters, or the key proof.
    fn on_message(&mut self, id: u64, body: &[u8], now: Instant) -> Option<Ready> {
        match self.budget.stage(id)? {
            Stage::Params => {
                self.debug(format_args!(
                    "got JSON (the parameters): {}",
                    String::from_utf8_lossy(body)
                ));
                let params: Params = match wire::decode_json(body) {
                    Ok(p) => p,
                    Err(e) => {
                        self.bad_params(id, CtrlError::Wire(e, "the parameters"), now);
                        return None;
                    }
                };
                if self.shared.cfg.psk.is_none() {
                    return self.ready(id, params, false);
                }
                self.challenge(id, params, now)
            }
            Stage::Proof => {
                let key = self.shared.cfg.psk.clone()?;
                let conn = self.conns.get_mut(&id)?;
                let (cn, sn, bound) = conn.proof?;
                let cookie = Cookie(conn.cookie);
                let verdict = wire::decode_json::<PskResponse>(body)
                    .map_err(|e| PskFailure::Ctrl(CtrlError::Wire(e, "the pre-shared-key proof")))
                    .and_then(|r| psk::server_verdict(&key, &cookie, (&cn, &sn), &bound, &r));
                match verdict {
                    Ok(confirm) => {
                        let mut out = vec![State::NetmeterAuth.to_byte()];
                        out.extend_from_slice(&wire::encode_json(&confirm));
                        if !send(&mut conn.sock, &out) {
                            self.forget(id);
                            return None;
                        }
                        if self.shared.cfg.verbose {
                            self.shared
                                .log(&format!("pre-shared key proved by {}", shown(conn.peer)));
                        }
                        let params = conn.params.take()?;
                        self.ready(id, params, true)
                    }
                    Err(e) => {
                        self.psk_refused(id, e, now);
                        None
                    }
                }
            }
            Stage::Cookie | Stage::Closing => None,
        }
    }

    /// `--psk-file`: send our nonce (nothing that depends on the key) and wait for the
    /// client's proof.
    fn challenge(&mut self, id: u64, params: Params, now: Instant) -> Option<Ready> {
        let ext = params.netmeter.as_ref();
        let fields = ext
            .and_then(|r| r.third_party.as_ref())
            .map(|t| t.bound_fields());
        let refs: Option<Vec<&str>> = fields
            .as_ref()
            .map(|f| f.iter().map(String::as_str).collect());
        let bound = psk_proofs::bind_request(refs.as_deref());
        let opening = psk::server_opening(ext.and_then(|r| r.psk.as_ref()));
        let conn = self.conns.get_mut(&id)?;
        conn.params = Some(params);
        let (cn, sn, ch) = match opening {
            Ok(o) => o,
            Err(e) => {
                self.psk_refused(id, e, now);
                return None;
            }
        };
        let mut out = vec![State::NetmeterAuth.to_byte()];
        out.extend_from_slice(&wire::encode_json(&ch));
        if !send(&mut conn.sock, &out) {
            self.forget(id);
            return None;
        }
        conn.proof = Some((cn, sn, bound));
        conn.hs.expect_message(psk::MAX_PROOF_LEN);
        self.budget.advance(id, Stage::Proof, now + PROOF_TIMEOUT);
        // The proof may be in already.
        self.readable(id, now)
    }

    fn psk_refused(&mut self, id: u64, e: PskFailure, now: Instant) {
        let r = Refusal {
            reason: Reason::Auth,
            answer: Answer::Error(ErrCode::AuthTest),
            message: format!("pre-shared-key authentication failed: {e}"),
        };
        self.refuse(id, r, now);
    }

    /// The handshake is complete: the connection leaves the door for a session.
    fn ready(&mut self, id: u64, params: Params, authenticated: bool) -> Option<Ready> {
        self.budget.remove(id);
        let conn = self.conns.remove(&id)?;
        conn.sock.set_nonblocking(false).ok()?;
        Some(Ready {
            sock: conn.sock,
            peer: conn.peer,
            cookie: Cookie(conn.cookie),
            params,
            authenticated,
        })
    }
}

/// iperf 2 TCP clients: their header instead of a cookie.
impl Door {
    /// The first [`COOKIE_LEN`] bytes are an iperf 2 header of `header_len` bytes: read
    /// the rest, or serve it if it is all in. `None` when the connection is gone.
    fn iperf2_opening(&mut self, id: u64, header_len: usize, now: Instant) -> Option<()> {
        let shared = self.shared.clone();
        let conn = self.conns.get_mut(&id)?;
        let peer = conn.peer;
        if let Err(r) = shared.cfg.policy.check_address(canon(peer.ip())) {
            super::iperf2::refused(&shared, peer, None, r);
            self.forget(id);
            return None;
        }
        let first = conn.cookie.to_vec();
        if header_len > COOKIE_LEN {
            conn.hs.expect_raw(header_len - COOKIE_LEN);
            conn.iperf2 = Some(first);
            self.budget.advance(id, Stage::Params, now + PARAMS_TIMEOUT);
            return Some(());
        }
        conn.iperf2 = Some(Vec::new());
        self.iperf2_header(id, &first, now);
        None
    }

    /// More of an iperf 2 header arrived (the whole of it, as the handshake counts):
    /// parse it, check it against the server's limits, and start serving it.
    fn iperf2_header(&mut self, id: u64, more: &[u8], now: Instant) {
        let shared = self.shared.clone();
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let peer = conn.peer;
        let mut bytes = conn.iperf2.take().unwrap_or_default();
        bytes.extend_from_slice(more);
        if wire::iperf2::is_bounceback([bytes[0], bytes[1], bytes[2], bytes[3]]) {
            self.iperf2_bounceback(id, bytes, now);
            return;
        }
        let parsed = wire::iperf2::TestHdr::parse_tcp(&bytes);
        let h = match parsed {
            Ok(h) => h,
            Err(e) => {
                let r = Refusal {
                    reason: Reason::Params,
                    answer: Answer::Busy,
                    message: format!("unreadable test header: {e}"),
                };
                super::iperf2::refused(&shared, peer, None, r);
                self.forget(id);
                return;
            }
        };
        let plan = match super::iperf2::plan(&h, &shared.cfg.policy, shared.cfg.psk.is_some()) {
            Ok(p) => p,
            Err(r) => {
                super::iperf2::refused(&shared, peer, Some(&h), r);
                self.forget(id);
                return;
            }
        };
        let group = match shared.iperf2.join(&shared, peer, &h, &plan, now) {
            Ok(g) => g,
            Err(r) => {
                super::iperf2::refused(&shared, peer, Some(&h), r);
                self.forget(id);
                return;
            }
        };
        let Some(conn) = self.hand_over(id) else {
            return;
        };
        shared.log(&format!(
            "iperf 2 test from {}: {}",
            shown(peer),
            super::iperf2::describe(&h, &plan)
        ));
        // The header counts as the test's first bytes, as iperf 2's server (and its
        // client's -n) count them; with what the door read past it.
        let early = bytes.len();
        let accepted = conn.accepted_wall;
        let spawned = std::thread::Builder::new()
            .name("nm-iperf2".into())
            .spawn(move || super::iperf2::tcp::serve(group, conn.sock, &h, &plan, early, accepted));
        self.keep_iperf2_thread(&shared, peer, spawned);
    }
}

impl Door {
    /// Take a connection out of the door's care for a thread of its own: off the
    /// budget and the list, back to blocking reads (`None`: it is gone or the socket
    /// refused).
    fn hand_over(&mut self, id: u64) -> Option<Conn> {
        self.budget.remove(id);
        let conn = self.conns.remove(&id)?;
        conn.sock.set_nonblocking(false).ok()?;
        Some(conn)
    }

    /// Keep an iperf 2 test's thread (pruning the finished ones), or log why there is
    /// none.
    fn keep_iperf2_thread(
        &mut self,
        shared: &Shared,
        peer: SocketAddr,
        spawned: std::io::Result<std::thread::JoinHandle<()>>,
    ) {
        match spawned {
            Ok(t) => {
                self.iperf2_threads.retain(|t| !t.is_finished());
                self.iperf2_threads.push(t);
            }
            Err(e) => shared.log(&format!("cannot start a thread for {}: {e}", shown(peer))),
        }
    }

    /// An iperf 2 bounceback request's header is in: judge it as a one-thread TCP test
    /// of its run time and serve it.
    fn iperf2_bounceback(&mut self, id: u64, bytes: Vec<u8>, now: Instant) {
        let shared = self.shared.clone();
        let Some(peer) = self.conns.get(&id).map(|c| c.peer) else {
            return;
        };
        let refuse = |this: &mut Door, h: Option<&wire::iperf2::TestHdr>, r: Refusal| {
            super::iperf2::refused(&shared, peer, h, r);
            this.forget(id);
        };
        let bb = match wire::iperf2::BbHdr::parse(&bytes)
            .and_then(|bb| wire::iperf2::plausible::bounceback_opening(&bb).map(|()| bb))
        {
            Ok(b) => b,
            Err(e) => {
                let r = Refusal {
                    reason: Reason::Params,
                    answer: Answer::Busy,
                    message: format!("unreadable bounceback header: {e}"),
                };
                return refuse(self, None, r);
            }
        };
        let h = super::iperf2::bounceback_as_test(&bb);
        let plan = match super::iperf2::plan(&h, &shared.cfg.policy, shared.cfg.psk.is_some()) {
            Ok(p) => p,
            Err(r) => return refuse(self, Some(&h), r),
        };
        let group = match shared.iperf2.join(&shared, peer, &h, &plan, now) {
            Ok(g) => g,
            Err(r) => return refuse(self, Some(&h), r),
        };
        let Some(conn) = self.hand_over(id) else {
            return;
        };
        shared.log(&format!(
            "iperf 2 test from {}: iperf 2 client, TCP, --bounceback of {} bytes (replies of {})",
            shown(peer),
            bb.size,
            bb.reply_size
        ));
        let spawned = std::thread::Builder::new()
            .name("nm-iperf2-bb".into())
            .spawn(move || super::iperf2::bounce::serve(group, conn.sock, bytes, &plan));
        self.keep_iperf2_thread(&shared, peer, spawned);
    }
}
