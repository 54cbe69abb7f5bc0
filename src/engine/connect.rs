//! `--connect-only`: TCP connection rate, like netperf TCP_CRR and iperf 2's
//! `--connect-only`.
//!
//! The test keeps the iperf3 conversation intact: the client opens its `-P` data
//! streams as usual (the server expects `total_streams` of them before `TEST_START`),
//! but they carry no data; each one's thread instead opens short connections to the
//! server's listening port as fast as it can until the test ends. A short connection
//! is: `connect()` (timed: the 3-way handshake as the client sees it), the test cookie
//! as the request, one byte back as the response, close. The server answers a short
//! connection whose cookie belongs to a running connect-only test ([`Hub`]) and closes
//! it; no thread, channel or session is involved per connection.
//!
//! TIME_WAIT: tens of thousands of connections per run would otherwise leave as many
//! sockets in TIME_WAIT on the side that closes first and exhaust the ephemeral ports
//! of one source address (28 232 on a default Linux, gone within ~3 s at loopback
//! rates; netperf's TCP_CRR runs into the same wall). The client closes with
//! SO_LINGER 0, which sends RST instead of FIN: its socket is freed at once, and the
//! server's socket, already closed after its answer (FIN_WAIT), is discarded by the
//! RST, so neither side keeps TIME_WAIT state and the port can be reused immediately.
//! Rotating 127.0.0.x source addresses would only help on loopback; RST-on-close works
//! against any server. The cost: the close is an abort, so the transaction time does
//! not include a graceful FIN exchange.

use super::machine::connect::{ConnStep, ConnectLoop, Outcome, Record};
use super::record::ConnRecord;
use super::stream::{STOP_POLL, Worker};
use super::test_common::{self, SideOpts};
use crate::clock::mono_now;
use crate::report::connect::{ConnFigures, ConnFinal};
use crate::sock;
use crate::spec::TestSpec;
use crate::wire::COOKIE_LEN;
use socket2::{Domain, SockAddr, Socket, Type};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long one `connect()` may take before the attempt counts as failed.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long the client waits for the server's one-byte answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(1);
/// The server's answer to a short connection.
const ANSWER: [u8; 1] = [b'1'];

// ---------------------------------------------------------------------------------
// Client side.

/// Where and how a stream opens its short connections.
pub struct Target {
    server: SockAddr,
    bind: Option<SockAddr>,
    cookie: [u8; COOKIE_LEN],
    /// Socket options (`-w`, `-S`, `-M`, `-C`, `-N`) apply to every short connection.
    spec: TestSpec,
    /// And the client's own (`--bind-dev`, `--snd-timeout`).
    side: SideOpts,
    ipv6: bool,
}

impl Target {
    pub fn new(
        server: SocketAddr,
        bind: Option<IpAddr>,
        cookie: [u8; COOKIE_LEN],
        spec: &TestSpec,
        side: &SideOpts,
    ) -> Arc<Target> {
        Arc::new(Target {
            server: SockAddr::from(server),
            bind: bind.map(|ip| SockAddr::from(SocketAddr::new(ip, 0))),
            cookie,
            spec: spec.clone(),
            side: side.clone(),
            ipv6: server.is_ipv6(),
        })
    }
}

/// Start a client stream's connection loop. `data` is the stream's idle data
/// connection; the thread holds it until the end, as a bulk stream would.
pub fn spawn_client(w: Worker, data: TcpStream, target: Arc<Target>) -> io::Result<JoinHandle<()>> {
    let name = format!("nm-conn-{}", w.shared.id);
    std::thread::Builder::new().name(name).spawn(move || {
        client_loop(&w, &target);
        drop(data);
        w.shared.finished.store(true, Ordering::Release);
    })
}

/// Open short connections until the test ends; the decisions (again, pause after a
/// refusal, a connection that ended after the test left out) are [`ConnectLoop`]'s.
fn client_loop(w: &Worker, t: &Target) {
    let Some(rec) = w.shared.conn.as_ref() else {
        return;
    };
    let mut m = ConnectLoop::new();
    loop {
        let now = w.clock.now();
        match m.poll(now, w.stop.load(Ordering::Relaxed)) {
            ConnStep::Stop => break,
            ConnStep::Pause(until) => {
                std::thread::sleep(until.saturating_duration_since(now).min(STOP_POLL));
                continue;
            }
            ConnStep::Connect => {}
        }
        let start = w.clock.now();
        let r = one_connection(t);
        let end = w.clock.now();
        let outcome = match r {
            Ok(connect_ns) => Outcome::Answered {
                connect_ns,
                total_ns: (end - start).as_nanos() as u64,
            },
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                Outcome::Refused(describe(&e))
            }
            Err(e) => Outcome::Failed(describe(&e)),
        };
        // Finished after the end of the test: not part of it.
        let Some(record) = m.on_outcome(outcome, end, w.stop.load(Ordering::Relaxed)) else {
            break;
        };
        {
            let mut g = rec.lock().unwrap_or_else(|p| p.into_inner());
            match record {
                Record::Answered {
                    connect_ns,
                    total_ns,
                } => {
                    g.interval.connect.record_ns(connect_ns);
                    g.interval.transaction.record_ns(total_ns);
                }
                Record::Failed(e) => {
                    g.interval.failed += 1;
                    g.last_error = Some(e);
                }
            }
        }
        w.shared.packets.store(m.counts().0, Ordering::Relaxed);
    }
}

fn describe(e: &io::Error) -> String {
    let timed_out = matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    ) || e.raw_os_error() == Some(libc::EINPROGRESS);
    if timed_out {
        "no answer within 1 s".into()
    } else {
        e.to_string()
    }
}

/// One short connection; returns how long `connect()` took, in nanoseconds.
fn one_connection(t: &Target) -> io::Result<u64> {
    let domain = if t.ipv6 { Domain::IPV6 } else { Domain::IPV4 };
    let s = Socket::new(domain, Type::STREAM, None)?;
    // RST on close: no TIME_WAIT on either side (see the module comment).
    s.set_linger(Some(Duration::ZERO))?;
    // Linux bounds a blocking connect() by SO_SNDTIMEO (it then fails with EINPROGRESS).
    s.set_write_timeout(Some(CONNECT_TIMEOUT))?;
    s.set_read_timeout(Some(ANSWER_TIMEOUT))?;
    test_common::apply_sock_opts(&s, &t.spec, &t.side, t.ipv6)?;
    if let Some(b) = &t.bind {
        s.bind(b)?;
    }
    let t0 = mono_now();
    s.connect(&t.server)?;
    let connect_ns = mono_now().saturating_duration_since(t0).as_nanos() as u64;
    (&s).write_all(&t.cookie)?;
    let mut b = [0u8; 1];
    if (&s).read(&mut b)? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the server closed the connection without answering",
        ));
    }
    drop(s);
    Ok(connect_ns)
}

/// Per-interval bookkeeping for the meter: collects each stream's interval figures
/// into its row, folds them into the stream's total, and merges them for `[SUM]`.
#[derive(Default)]
pub struct IntervalSum {
    merged: Option<ConnFigures>,
}

impl IntervalSum {
    /// Move a stream's interval figures into its row (and, unless omitting, its total).
    pub fn take(
        &mut self,
        rec: &Mutex<ConnRecord>,
        omitting: bool,
        ext: &mut crate::report::StreamExt,
    ) {
        let mut r = rec.lock().unwrap_or_else(|p| p.into_inner());
        let r = &mut *r;
        r.interval.fill(ext);
        if !omitting {
            r.total.merge(&r.interval);
        }
        self.merged
            .get_or_insert_with(ConnFigures::default)
            .merge(&r.interval);
        r.interval.clear();
    }

    /// Fill the interval's `[SUM]` (client) or the server's answered count.
    pub fn finish(self, iv: &mut crate::report::Interval, answered: Option<&mut Answered>) {
        let omitted = iv.sum.omitted;
        let n = answered.map(|a| a.take(omitted));
        crate::report::connect::fill_sum(iv, self.merged.as_ref(), n);
    }
}

/// A stream's final figures: the total plus anything recorded since the last tick.
pub fn final_of(rec: &Mutex<ConnRecord>, omitting: bool) -> ConnFinal {
    let r = rec.lock().unwrap_or_else(|p| p.into_inner());
    let mut figures = r.total.clone();
    if !omitting {
        figures.merge(&r.interval);
    }
    ConnFinal {
        figures,
        last_error: r.last_error.clone(),
    }
}

// ---------------------------------------------------------------------------------
// Server side.

/// The server's answered-connection counter as the meter samples it.
pub struct Answered {
    count: Arc<AtomicU64>,
    prev: u64,
    /// Count where the measured part began (end of `-O`).
    base: u64,
}

impl Answered {
    /// Connections answered since the last call; an omitted interval moves the base.
    pub fn take(&mut self, omitted: bool) -> u64 {
        let now = self.count.load(Ordering::Relaxed);
        let d = now.saturating_sub(self.prev);
        self.prev = now;
        if omitted {
            self.base = now;
        }
        d
    }

    /// Connections answered in the measured part.
    pub fn total(&self) -> u64 {
        self.count.load(Ordering::Relaxed).saturating_sub(self.base)
    }
}

/// A connection handed back to the main accept loop: not a short connection of a
/// connect-only test (another test's connection, a late or missing cookie).
type Returned = (TcpStream, SocketAddr);

/// How long a freshly accepted connection may take to send its cookie before the
/// acceptor hands it to the ordinary path (which gives it the full cookie timeout).
const PENDING_MAX: Duration = Duration::from_millis(200);
/// Connections an acceptor waits on at once; beyond that the oldest is handed back.
const MAX_PENDING: usize = 1024;
/// Connections accepted per wake-up before the pending ones are looked at again.
const ACCEPT_BATCH: usize = 64;
/// How often an acceptor checks whether its test is over.
const ACCEPTOR_POLL: Duration = Duration::from_millis(20);

/// The server's connect-only state: cookies of running connect-only tests, the
/// listening socket their acceptors share with the main accept loop, and the way back
/// to that loop.
///
/// While a connect-only test runs, a thread spawned by its session (so pinned like the
/// session with `-A n,m`) accepts from the server's one listener in place of the main
/// loop: a short connection costs accept, peek, read, write and close on that thread,
/// with no thread or channel per connection. A connection whose cookie has not arrived
/// yet waits in a poll set; one whose cookie belongs to no connect-only test (or that
/// stays silent for 200 ms) is handed back to the main loop untouched, nothing read
/// from it, and gets the ordinary treatment there (the door's handshake budget, the
/// 5 s cookie deadline). Silent connections therefore still hold nothing.
pub struct Hub(Arc<Inner>);

struct Inner {
    /// Number of registered tests: lets the accept paths skip all of this otherwise.
    active: AtomicUsize,
    tests: Mutex<HashMap<[u8; COOKIE_LEN], Arc<AtomicU64>>>,
    /// A handle on the server's (non-blocking) listening socket.
    listener: OnceLock<TcpListener>,
    /// Acceptor threads running; while any runs the main loop does not accept.
    accepting: AtomicUsize,
    back_tx: Sender<Returned>,
    back_rx: Mutex<Receiver<Returned>>,
}

impl Default for Hub {
    fn default() -> Self {
        let (back_tx, back_rx) = mpsc::channel();
        Hub(Arc::new(Inner {
            active: AtomicUsize::new(0),
            tests: Mutex::new(HashMap::new()),
            listener: OnceLock::new(),
            accepting: AtomicUsize::new(0),
            back_tx,
            back_rx: Mutex::new(back_rx),
        }))
    }
}

/// A test's registration: answers its cookie's connections until dropped, whatever
/// ends the test; stops and joins the test's acceptor.
pub struct Registration {
    inner: Arc<Inner>,
    cookie: [u8; COOKIE_LEN],
    count: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl Registration {
    /// The connections answered so far (the server's policy counts them as the test's
    /// progress: a connect-only test moves no data).
    pub fn counter(&self) -> Arc<AtomicU64> {
        self.count.clone()
    }

    /// The answered-connection counter, for the meter.
    pub fn answered(&self) -> Answered {
        Answered {
            count: self.count.clone(),
            prev: 0,
            base: 0,
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.acceptor.take() {
            let _ = h.join();
        }
        if let Ok(mut t) = self.inner.tests.lock()
            && t.remove(&self.cookie).is_some()
        {
            self.inner.active.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Hub {
    /// Give the hub the server's listening socket (a handle on the same, non-blocking,
    /// socket the main loop accepts from). Without it tests rely on the main loop.
    pub fn set_listener(&self, l: TcpListener) {
        let _ = self.0.listener.set(l);
    }

    /// From now until the registration is dropped, connections opening with `cookie`
    /// are answered and counted, by an acceptor thread started here (it inherits the
    /// calling thread's CPU affinity).
    pub fn register(&self, cookie: [u8; COOKIE_LEN]) -> Registration {
        let count = Arc::new(AtomicU64::new(0));
        if let Ok(mut t) = self.0.tests.lock()
            && t.insert(cookie, count.clone()).is_none()
        {
            self.0.active.fetch_add(1, Ordering::AcqRel);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor = self.0.listener.get().is_some().then(|| {
            let (inner, stop) = (self.0.clone(), stop.clone());
            inner.accepting.fetch_add(1, Ordering::AcqRel);
            let started = std::thread::Builder::new()
                .name("nm-conn-accept".into())
                .spawn({
                    let inner = inner.clone();
                    move || {
                        inner.acceptor(&stop);
                        inner.accepting.fetch_sub(1, Ordering::AcqRel);
                    }
                });
            if started.is_err() {
                inner.accepting.fetch_sub(1, Ordering::AcqRel);
            }
            started.ok()
        });
        Registration {
            inner: self.0.clone(),
            cookie,
            count,
            stop,
            acceptor: acceptor.flatten(),
        }
    }

    /// Whether a connect-only test's acceptor is accepting in place of the main loop.
    pub fn accepting(&self) -> bool {
        self.0.accepting.load(Ordering::Acquire) > 0
    }

    /// For the main accept loop: a connection an acceptor handed back, if any. While an
    /// acceptor runs, waits up to `wait` for one.
    pub fn handed_back(&self, wait: Duration) -> Option<Returned> {
        let rx = self.0.back_rx.lock().ok()?;
        if self.accepting() {
            rx.recv_timeout(wait).ok()
        } else {
            rx.try_recv().ok()
        }
    }

    /// The cookie was read (by the ordinary path): answer the connection if it belongs
    /// to a connect-only test. Returns whether it did (the caller then drops the socket).
    pub fn answer(&self, cookie: &[u8; COOKIE_LEN], sock: &mut TcpStream) -> bool {
        if self.0.active.load(Ordering::Acquire) == 0 {
            return false;
        }
        let Some(count) = self.0.counter(cookie) else {
            return false;
        };
        if sock.write_all(&ANSWER).is_ok() {
            count.fetch_add(1, Ordering::Relaxed);
        }
        true
    }

    /// Main-loop fast path for a connection it accepted itself while a connect-only
    /// test runs: answered now if its cookie is in and registered, else handed back
    /// untouched (nothing read from it).
    pub fn answer_now(&self, conn: TcpStream) -> Option<TcpStream> {
        if self.0.active.load(Ordering::Acquire) == 0 {
            return Some(conn);
        }
        match self.0.settle(conn) {
            Settle::Done => None,
            Settle::NotMine(c) | Settle::Waiting(c) => Some(c),
        }
    }
}

/// What became of a connection whose cookie was looked at.
enum Settle {
    /// Answered, or closed by the peer: nothing left to do.
    Done,
    /// Its cookie belongs to no connect-only test, or is incomplete: the ordinary path.
    NotMine(TcpStream),
    /// Nothing has arrived yet.
    Waiting(TcpStream),
}

impl Inner {
    fn counter(&self, cookie: &[u8]) -> Option<Arc<AtomicU64>> {
        let t = self.tests.lock().ok()?;
        t.get(cookie).cloned()
    }

    /// Peek at the cookie and answer the connection if it is a registered one.
    fn settle(&self, mut conn: TcpStream) -> Settle {
        let mut cookie = [0u8; COOKIE_LEN];
        match sock::peek_nowait(conn.as_fd(), &mut cookie) {
            Ok(n) if n == COOKIE_LEN => {}
            Ok(0) => return Settle::Done, // closed before saying anything
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Settle::Waiting(conn),
            Err(_) => return Settle::Done,
            // Part of a cookie: let the ordinary path read the rest with its deadline.
            Ok(_) => return Settle::NotMine(conn),
        }
        let Some(count) = self.counter(&cookie) else {
            return Settle::NotMine(conn);
        };
        // The 37 bytes are in the receive queue and the send buffer is empty: neither
        // call can block.
        if conn.read_exact(&mut cookie).is_ok() && conn.write_all(&ANSWER).is_ok() {
            count.fetch_add(1, Ordering::Relaxed);
        }
        Settle::Done
    }

    fn hand_back(&self, conn: TcpStream, peer: SocketAddr) {
        let _ = self.back_tx.send((conn, peer));
    }

    /// A connect-only test's acceptor: accept, answer, hand back the rest, until `stop`.
    fn acceptor(&self, stop: &AtomicBool) {
        let Some(listener) = self.listener.get() else {
            return;
        };
        let mut pending: Vec<(TcpStream, SocketAddr, Instant)> = Vec::new();
        let mut ready = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let fds = std::iter::once(listener.as_fd()).chain(pending.iter().map(|p| p.0.as_fd()));
            if sock::poll_readable(fds, ACCEPTOR_POLL, &mut ready).is_err() {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            // Pending connections first (backwards: swap_remove only moves entries that
            // were already looked at).
            let now = mono_now();
            for i in (0..pending.len()).rev() {
                let expired = now.saturating_duration_since(pending[i].2) > PENDING_MAX;
                if !ready[i + 1] && !expired {
                    continue;
                }
                let (conn, peer, since) = pending.swap_remove(i);
                match self.settle(conn) {
                    Settle::Done => {}
                    Settle::NotMine(c) => self.hand_back(c, peer),
                    Settle::Waiting(c) if expired => self.hand_back(c, peer),
                    Settle::Waiting(c) => pending.push((c, peer, since)),
                }
            }
            if !ready[0] {
                continue;
            }
            for _ in 0..ACCEPT_BATCH {
                match listener.accept() {
                    Ok((conn, peer)) => match self.settle(conn) {
                        Settle::Done => {}
                        Settle::NotMine(c) => self.hand_back(c, peer),
                        Settle::Waiting(c) => {
                            if pending.len() >= MAX_PENDING {
                                let (old, old_peer, _) = pending.remove(0);
                                self.hand_back(old, old_peer);
                            }
                            pending.push((c, peer, mono_now()));
                        }
                    },
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        // Out of descriptors or similar: let it pass rather than spin.
                        std::thread::sleep(Duration::from_millis(10));
                        break;
                    }
                }
            }
        }
        for (conn, peer, _) in pending {
            self.hand_back(conn, peer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_answers_registered_cookies_only() {
        let hub = Hub::default();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let cookie = [b'a'; COOKIE_LEN];
        let other = [b'b'; COOKIE_LEN];
        let reg = hub.register(cookie);
        let mut answered = reg.answered();
        for (c, want_answer) in [(cookie, true), (other, false)] {
            let mut client = TcpStream::connect(addr).unwrap();
            client.write_all(&c).unwrap();
            let (conn, _) = l.accept().unwrap();
            // Wait until the cookie is readable on the server side.
            assert!(sock::wait_readable(conn.as_fd(), Duration::from_secs(2)).unwrap());
            let back = hub.answer_now(conn);
            assert_eq!(back.is_none(), want_answer);
            if want_answer {
                let mut b = [0u8; 1];
                client.read_exact(&mut b).unwrap();
                assert_eq!(b, ANSWER);
            } else {
                // Untouched: the whole cookie is still there for the normal path.
                let mut back = back.unwrap();
                let mut got = [0u8; COOKIE_LEN];
                back.read_exact(&mut got).unwrap();
                assert_eq!(got, other);
            }
        }
        assert_eq!(answered.take(false), 1);
        drop(reg);
        assert_eq!(hub.0.active.load(Ordering::Relaxed), 0);
        let mut client = TcpStream::connect(addr).unwrap();
        client.write_all(&cookie).unwrap();
        let (conn, _) = l.accept().unwrap();
        assert!(
            hub.answer_now(conn).is_some(),
            "answered after unregistering"
        );
    }

    #[test]
    fn acceptor_answers_its_connections_and_hands_back_the_rest() {
        let hub = Hub::default();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        hub.set_listener(l.try_clone().unwrap());
        let cookie = [b'a'; COOKIE_LEN];
        let reg = hub.register(cookie);
        assert!(hub.accepting());
        let mut answered = reg.answered();
        for _ in 0..20 {
            let mut c = TcpStream::connect(addr).unwrap();
            c.write_all(&cookie).unwrap();
            let mut b = [0u8; 1];
            c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            c.read_exact(&mut b).unwrap();
            assert_eq!(b, ANSWER);
        }
        // The acceptor counts right after writing the answer: give it a moment.
        let deadline = mono_now() + Duration::from_secs(2);
        let mut n = answered.take(false);
        while n < 20 && mono_now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            n += answered.take(false);
        }
        assert_eq!(n, 20);
        // Another test's connection comes back to the main loop with its cookie unread.
        let mut other = TcpStream::connect(addr).unwrap();
        other.write_all(&[b'b'; COOKIE_LEN]).unwrap();
        let (mut back, _) = hub
            .handed_back(Duration::from_secs(2))
            .expect("handed back");
        let mut got = [0u8; COOKIE_LEN];
        back.read_exact(&mut got).unwrap();
        assert_eq!(got, [b'b'; COOKIE_LEN]);
        // A silent one too, after PENDING_MAX.
        let silent = TcpStream::connect(addr).unwrap();
        let t = mono_now();
        let (back, peer) = hub
            .handed_back(Duration::from_secs(2))
            .expect("handed back");
        assert!(mono_now() - t >= PENDING_MAX / 2);
        assert_eq!(peer, silent.local_addr().unwrap());
        drop(back);
        drop(reg);
        assert!(!hub.accepting());
        assert!(hub.handed_back(Duration::ZERO).is_none());
    }
}
