//! `--metrics ADDR:PORT`: the server's counters in the Prometheus text exposition
//! format (version 0.0.4), served over plain HTTP at `/metrics`.
//!
//! The responder is a few lines of std around one `ppoll`: one thread serves up to
//! [`MAX_CONNECTIONS`] connections at once, each with a whole-request deadline
//! ([`REQUEST_DEADLINE`], reading and answering together), and a new connection when all
//! are taken drops the oldest. So a client that trickles a byte at a time, or a handful
//! that connect and say nothing, cost a scrape at most one deadline, never the sum of
//! theirs. A scrape is a single GET every few seconds from one Prometheus; an HTTP crate
//! (hyper, tiny_http) would bring an async runtime or a thread pool and dozens of
//! dependencies for that.
//!
//! The request parser ([`parse_request`]) and the reply ([`reply`]) are pure, bytes in
//! and bytes out, and fuzzed (`fuzz/fuzz_targets/metrics_request.rs`): anything but
//! `GET /metrics` (or `/`, or `HEAD`) gets a 404 or 405, a malformed request line 400,
//! and a request head is read up to [`MAX_REQUEST_BYTES`], never more.

use super::audit::Outcome;
use super::policy::Reason;
use crate::clock::Clock;
use crate::sock;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The counters, updated by the sessions as tests end.
#[derive(Debug, Default)]
pub struct Counters {
    tests_ok: AtomicU64,
    tests_error: AtomicU64,
    refused: [AtomicU64; Reason::ALL.len()],
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    active: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub tests_ok: u64,
    pub tests_error: u64,
    pub refused: [u64; Reason::ALL.len()],
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub active: u64,
}

impl Counters {
    /// Count one test that ended with `outcome`, having moved these bytes.
    pub fn record(&self, outcome: &Outcome, bytes_sent: u64, bytes_received: u64) {
        match outcome {
            Outcome::Ok => self.tests_ok.fetch_add(1, Ordering::Relaxed),
            Outcome::Error(_) => self.tests_error.fetch_add(1, Ordering::Relaxed),
            Outcome::Refused(r, _) => {
                self.refused[reason_index(*r)].fetch_add(1, Ordering::Relaxed)
            }
        };
        self.bytes_sent.fetch_add(bytes_sent, Ordering::Relaxed);
        self.bytes_received
            .fetch_add(bytes_received, Ordering::Relaxed);
    }

    /// A test starts running; the gauge drops again when the guard goes.
    pub fn running(self: &Arc<Self>) -> ActiveGuard {
        self.active.fetch_add(1, Ordering::Relaxed);
        ActiveGuard(self.clone())
    }

    pub fn snapshot(&self) -> Snapshot {
        let mut refused = [0; Reason::ALL.len()];
        for (r, c) in refused.iter_mut().zip(&self.refused) {
            *r = c.load(Ordering::Relaxed);
        }
        Snapshot {
            tests_ok: self.tests_ok.load(Ordering::Relaxed),
            tests_error: self.tests_error.load(Ordering::Relaxed),
            refused,
            bytes_sent: self.bytes_sent.load(Ordering::Relaxed),
            bytes_received: self.bytes_received.load(Ordering::Relaxed),
            active: self.active.load(Ordering::Relaxed),
        }
    }
}

/// Keeps a test counted in `netmeter_server_active_tests`.
pub struct ActiveGuard(Arc<Counters>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

fn reason_index(r: Reason) -> usize {
    // `ALL` lists every variant, so the search always finds it.
    Reason::ALL.iter().position(|&x| x == r).unwrap_or(0)
}

/// The exposition text of `s`.
pub fn render(s: &Snapshot) -> String {
    let mut o = String::new();
    let mut family = |name: &str, kind: &str, help: &str, samples: &[(String, u64)]| {
        let _ = writeln!(o, "# HELP {name} {help}");
        let _ = writeln!(o, "# TYPE {name} {kind}");
        for (labels, v) in samples {
            let _ = writeln!(o, "{name}{labels} {v}");
        }
    };
    family(
        "netmeter_server_tests_total",
        "counter",
        "Tests run to their end or to an error, by result.",
        &[
            ("{result=\"ok\"}".into(), s.tests_ok),
            ("{result=\"error\"}".into(), s.tests_error),
        ],
    );
    family(
        "netmeter_server_test_errors_total",
        "counter",
        "Tests that ended with an error.",
        &[(String::new(), s.tests_error)],
    );
    let refused: Vec<(String, u64)> = Reason::ALL
        .iter()
        .zip(s.refused)
        .map(|(r, n)| (format!("{{reason=\"{}\"}}", r.label()), n))
        .collect();
    family(
        "netmeter_server_refused_total",
        "counter",
        "Tests refused by the server's policy, by reason.",
        &refused,
    );
    family(
        "netmeter_server_bytes_total",
        "counter",
        "Data bytes this server sent and received, over finished tests.",
        &[
            ("{direction=\"sent\"}".into(), s.bytes_sent),
            ("{direction=\"received\"}".into(), s.bytes_received),
        ],
    );
    family(
        "netmeter_server_active_tests",
        "gauge",
        "Tests running now.",
        &[(String::new(), s.active)],
    );
    o
}

/// How long one connection may take from its arrival to the end of the answer.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(2);
/// Metric connections served at once; one more drops the oldest.
pub const MAX_CONNECTIONS: usize = 8;
/// A request head (request line and headers) longer than this gets 431.
pub const MAX_REQUEST_BYTES: usize = 8192;

/// What a request asks for, as far as this responder cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    /// `/metrics` or `/` (a query string ignored).
    pub metrics_path: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Other,
}

/// Why a request cannot be answered as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("the request line is not METHOD TARGET [HTTP/1.x]")]
    Malformed,
    #[error("the request head is longer than {MAX_REQUEST_BYTES} bytes")]
    TooLarge,
}

/// What the bytes received so far amount to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// The head has not ended yet: read on (unless the peer has closed).
    Incomplete,
    Done(Result<Request, RequestError>),
}

/// Judge the bytes a metrics client sent so far. `closed`: the peer will send no more
/// (answer what the request line says, if there is one). Pure; looks at no more than
/// [`MAX_REQUEST_BYTES`].
pub fn parse_request(received: &[u8], closed: bool) -> Parsed {
    let window = &received[..received.len().min(MAX_REQUEST_BYTES)];
    let ended =
        window.windows(4).any(|w| w == b"\r\n\r\n") || window.windows(2).any(|w| w == b"\n\n");
    if !ended && !closed {
        if received.len() >= MAX_REQUEST_BYTES {
            return Parsed::Done(Err(RequestError::TooLarge));
        }
        return Parsed::Incomplete;
    }
    let line_end = window
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or(window.len());
    let line = window[..line_end]
        .strip_suffix(b"\r")
        .unwrap_or(&window[..line_end]);
    Parsed::Done(request_line(line))
}

/// `METHOD SP TARGET [SP HTTP/1.x]`, in ASCII.
fn request_line(line: &[u8]) -> Result<Request, RequestError> {
    let text = std::str::from_utf8(line).map_err(|_| RequestError::Malformed)?;
    let mut words = text.split(' ');
    let (Some(method), Some(target)) = (words.next(), words.next()) else {
        return Err(RequestError::Malformed);
    };
    let version_ok = match words.next() {
        None => true,
        Some(v) => v.starts_with("HTTP/1.") && words.next().is_none(),
    };
    let token = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_graphic());
    if !version_ok || !token(method) || !token(target) {
        return Err(RequestError::Malformed);
    }
    let path = target.split('?').next().unwrap_or("");
    Ok(Request {
        method: match method {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            _ => Method::Other,
        },
        metrics_path: matches!(path, "/metrics" | "/"),
    })
}

/// The whole HTTP answer to `request`, with the counters of `s`.
pub fn reply(request: Result<Request, RequestError>, s: &Snapshot) -> Vec<u8> {
    let (status, body, with_body) = match request {
        Ok(Request {
            method: m @ (Method::Get | Method::Head),
            metrics_path: true,
        }) => ("200 OK", render(s), m == Method::Get),
        Ok(Request {
            metrics_path: true, ..
        }) => ("405 Method Not Allowed", "only GET\n".into(), true),
        Ok(Request { method, .. }) => (
            "404 Not Found",
            "try /metrics\n".into(),
            method != Method::Head,
        ),
        Err(RequestError::Malformed) => ("400 Bad Request", "try GET /metrics\n".into(), true),
        Err(RequestError::TooLarge) => (
            "431 Request Header Fields Too Large",
            "request head too long\n".into(),
            true,
        ),
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if with_body {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

/// Bind the metrics listener (before the server says it is listening, so a bad
/// address is the user's one-line error, not a log line later).
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let l = TcpListener::bind(addr)?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// One metrics connection: what it sent, then what is left of its answer.
struct Conn {
    sock: TcpStream,
    deadline: Instant,
    received: Vec<u8>,
    /// The answer, once the request is judged, and how much of it has gone.
    answer: Option<(Vec<u8>, usize)>,
}

/// What became of a connection after a step.
enum Step {
    Waiting,
    Finished,
}

impl Conn {
    /// Read what has arrived (without waiting) and judge it; then send what the socket
    /// takes of the answer.
    fn step(&mut self, counters: &Counters) -> Step {
        if self.answer.is_none() {
            let mut buf = [0u8; 1024];
            let mut closed = false;
            loop {
                let room = MAX_REQUEST_BYTES.saturating_sub(self.received.len());
                if room == 0 {
                    break;
                }
                let take = room.min(buf.len());
                match self.sock.read(&mut buf[..take]) {
                    Ok(0) => {
                        closed = true;
                        break;
                    }
                    Ok(n) => self.received.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(_) => return Step::Finished,
                }
            }
            match parse_request(&self.received, closed) {
                Parsed::Incomplete => return Step::Waiting,
                Parsed::Done(r) => self.answer = Some((reply(r, &counters.snapshot()), 0)),
            }
        }
        let Some((bytes, sent)) = &mut self.answer else {
            return Step::Waiting;
        };
        while *sent < bytes.len() {
            match self.sock.write(&bytes[*sent..]) {
                Ok(0) => return Step::Finished,
                Ok(n) => *sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Waiting,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Step::Finished,
            }
        }
        Step::Finished
    }
}

/// Answer scrapes on `listener` until `shutdown`: one `ppoll` over the listener and up
/// to [`MAX_CONNECTIONS`] connections, each dropped at its [`REQUEST_DEADLINE`].
/// The time is read from `clock`.
pub fn serve(
    listener: TcpListener,
    counters: Arc<Counters>,
    shutdown: Arc<AtomicBool>,
    clock: Arc<dyn Clock>,
) {
    let mut conns: VecDeque<Conn> = VecDeque::with_capacity(MAX_CONNECTIONS);
    let mut ready = Vec::with_capacity(MAX_CONNECTIONS + 1);
    while !shutdown.load(Ordering::Relaxed) {
        let now = clock.now();
        conns.retain(|c| c.deadline > now);
        let writing = conns.iter().any(|c| c.answer.is_some());
        let wait = poll_wait(conns.iter().map(|c| c.deadline), writing, now);
        let fds = std::iter::once(listener.as_fd()).chain(conns.iter().map(|c| c.sock.as_fd()));
        if sock::poll_readable(fds, wait, &mut ready).is_err() {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        let mut i = 0;
        conns.retain_mut(|c| {
            i += 1;
            let due = ready.get(i).copied().unwrap_or(false) || c.answer.is_some();
            !due || matches!(c.step(&counters), Step::Waiting)
        });
        if ready.first().copied().unwrap_or(false) {
            accept_waiting(&listener, &mut conns, clock.now());
        }
    }
}

/// How long the serving loop waits at `now` for input, given its connections'
/// deadlines. An answer the socket did not take at once (`writing`) is retried soon
/// (the wait is for input only); otherwise it wakes for the next deadline, or every
/// 100 ms to look at the shutdown flag.
fn poll_wait(deadlines: impl Iterator<Item = Instant>, writing: bool, now: Instant) -> Duration {
    let next_deadline = deadlines
        .map(|d| d.saturating_duration_since(now))
        .min()
        .unwrap_or(Duration::MAX);
    next_deadline.min(Duration::from_millis(if writing { 10 } else { 100 }))
}

/// Take the connections waiting on `listener` (a bounded number per call), the oldest
/// connection giving way when all [`MAX_CONNECTIONS`] are taken.
/// Each is given until `now` + [`REQUEST_DEADLINE`].
fn accept_waiting(listener: &TcpListener, conns: &mut VecDeque<Conn>, now: Instant) {
    for _ in 0..MAX_CONNECTIONS {
        let sock = match listener.accept() {
            Ok((sock, _)) => sock,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        if sock.set_nonblocking(true).is_err() {
            continue;
        }
        if conns.len() >= MAX_CONNECTIONS {
            conns.pop_front();
        }
        conns.push_back(Conn {
            sock,
            deadline: now + REQUEST_DEADLINE,
            received: Vec::new(),
            answer: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn the_loop_wakes_for_the_nearest_deadline_or_to_look_at_shutdown() {
        let clock = ManualClock::at_unix(1_700_000_000);
        let t0 = clock.now();
        let ms = Duration::from_millis;
        // Nothing open: every 100 ms, to look at the shutdown flag.
        assert_eq!(poll_wait(std::iter::empty(), false, t0), ms(100));
        // A connection accepted now is dropped REQUEST_DEADLINE later: wake then.
        let deadlines = [t0 + REQUEST_DEADLINE, t0 + ms(30)];
        clock.advance(ms(25));
        assert_eq!(poll_wait(deadlines.into_iter(), false, clock.now()), ms(5));
        // A deadline already passed (dropped before the wait) never waits negative.
        clock.advance(ms(10));
        assert_eq!(poll_wait(deadlines.into_iter(), false, clock.now()), ms(0));
        // An answer the socket did not take is retried within 10 ms.
        assert_eq!(
            poll_wait(std::iter::once(t0 + REQUEST_DEADLINE), true, clock.now()),
            ms(10)
        );
    }

    #[test]
    fn counters_follow_outcomes() {
        let c = Arc::new(Counters::default());
        c.record(&Outcome::Ok, 100, 5);
        c.record(&Outcome::Error("x".into()), 7, 0);
        c.record(&Outcome::Refused(Reason::Rate, "r".into()), 0, 0);
        c.record(&Outcome::Refused(Reason::Rate, "r".into()), 0, 0);
        let g = c.running();
        let s = c.snapshot();
        assert_eq!((s.tests_ok, s.tests_error), (1, 1));
        assert_eq!(s.refused[reason_index(Reason::Rate)], 2);
        assert_eq!(s.refused.iter().sum::<u64>(), 2);
        assert_eq!((s.bytes_sent, s.bytes_received, s.active), (107, 5, 1));
        drop(g);
        assert_eq!(c.snapshot().active, 0);
    }

    #[test]
    fn exposition_lists_every_family_and_label() {
        let mut s = Snapshot {
            tests_ok: 3,
            tests_error: 1,
            bytes_sent: 10,
            bytes_received: 20,
            active: 2,
            ..Default::default()
        };
        s.refused[reason_index(Reason::Address)] = 4;
        let text = render(&s);
        for line in [
            "# TYPE netmeter_server_tests_total counter",
            "netmeter_server_tests_total{result=\"ok\"} 3",
            "netmeter_server_tests_total{result=\"error\"} 1",
            "netmeter_server_test_errors_total 1",
            "netmeter_server_refused_total{reason=\"address\"} 4",
            "netmeter_server_refused_total{reason=\"params\"} 0",
            "netmeter_server_refused_total{reason=\"third_party\"} 0",
            "netmeter_server_bytes_total{direction=\"sent\"} 10",
            "netmeter_server_bytes_total{direction=\"received\"} 20",
            "# TYPE netmeter_server_active_tests gauge",
            "netmeter_server_active_tests 2",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        // Every sample line is `name{labels} value` or `name value`.
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, v) = l.rsplit_once(' ').unwrap();
            v.parse::<u64>().unwrap();
        }
        assert!(text.ends_with('\n'));
    }

    fn status(head: &[u8]) -> String {
        let r = match parse_request(head, true) {
            Parsed::Done(r) => r,
            Parsed::Incomplete => panic!("a closed request is judged"),
        };
        let out = String::from_utf8(reply(r, &Snapshot::default())).unwrap();
        out.lines().next().unwrap().to_string()
    }

    #[test]
    fn only_get_metrics_is_answered() {
        assert_eq!(status(b"GET /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 OK");
        assert_eq!(
            status(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"),
            "HTTP/1.1 200 OK"
        );
        assert_eq!(status(b"GET / HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 OK");
        assert_eq!(status(b"GET /metrics\n\n"), "HTTP/1.1 200 OK");
        assert_eq!(
            status(b"POST /metrics HTTP/1.1\r\n\r\n"),
            "HTTP/1.1 405 Method Not Allowed"
        );
        assert_eq!(status(b"GET /x HTTP/1.1\r\n\r\n"), "HTTP/1.1 404 Not Found");
        assert_eq!(status(b"\xff\xfe"), "HTTP/1.1 400 Bad Request");
        assert_eq!(status(b""), "HTTP/1.1 400 Bad Request");
        assert_eq!(
            status(b"GET  /metrics HTTP/1.1\r\n\r\n"),
            "HTTP/1.1 400 Bad Request"
        );
        assert_eq!(
            status(b"GET /metrics SPDY/3\r\n\r\n"),
            "HTTP/1.1 400 Bad Request"
        );
        assert_eq!(
            status(b"GET /\x1b[2J HTTP/1.1\r\n\r\n"),
            "HTTP/1.1 400 Bad Request"
        );
    }

    #[test]
    fn a_head_request_gets_the_headers_without_the_body() {
        let s = Snapshot::default();
        let get = reply(
            Ok(Request {
                method: Method::Get,
                metrics_path: true,
            }),
            &s,
        );
        let head = reply(
            Ok(Request {
                method: Method::Head,
                metrics_path: true,
            }),
            &s,
        );
        let get = String::from_utf8(get).unwrap();
        let head = String::from_utf8(head).unwrap();
        let (get_head, body) = get.split_once("\r\n\r\n").unwrap();
        assert_eq!(format!("{get_head}\r\n\r\n"), head);
        assert!(get_head.contains(&format!("Content-Length: {}", body.len())));
        assert_eq!(body, render(&s));
    }

    #[test]
    fn a_request_is_judged_once_its_head_ends_or_its_peer_closes() {
        assert_eq!(
            parse_request(b"GET /metrics HTTP/1.1\r\n", false),
            Parsed::Incomplete
        );
        assert_eq!(parse_request(b"G", false), Parsed::Incomplete);
        let whole = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
        let ok = Parsed::Done(Ok(Request {
            method: Method::Get,
            metrics_path: true,
        }));
        assert_eq!(parse_request(whole, false), ok);
        // Closed after the request line alone: answered from it.
        assert_eq!(parse_request(b"GET /metrics HTTP/1.1\r\n", true), ok);
    }

    #[test]
    fn a_head_that_never_ends_is_cut_at_the_cap() {
        let mut head = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
        head.resize(MAX_REQUEST_BYTES - 1, b'a');
        assert_eq!(parse_request(&head, false), Parsed::Incomplete);
        head.push(b'a');
        assert_eq!(
            parse_request(&head, false),
            Parsed::Done(Err(RequestError::TooLarge))
        );
        // A terminator beyond the cap is not looked at.
        head.extend_from_slice(b"\r\n\r\n");
        assert_eq!(
            parse_request(&head, false),
            Parsed::Done(Err(RequestError::TooLarge))
        );
        assert!(
            String::from_utf8(reply(Err(RequestError::TooLarge), &Snapshot::default()))
                .unwrap()
                .starts_with("HTTP/1.1 431 ")
        );
    }
}
