//! `--metrics ADDR:PORT`: the server's counters in the Prometheus text exposition
//! format (version 0.0.4), served over plain HTTP at `/metrics`.
//!
//! The responder is a few lines of std: one thread, one request at a time, each with
//! short read and write deadlines. A scrape is a single GET every few seconds from one
//! Prometheus; an HTTP crate (hyper, tiny_http) would bring an async runtime or a
//! thread pool and dozens of dependencies for that. Anything but `GET /metrics` (or
//! `GET /`) gets a 404 or 405; a request is read up to 8 KiB, never more.

use super::audit::Outcome;
use super::policy::Reason;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

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

/// Bind the metrics listener (before the server says it is listening, so a bad
/// address is the user's one-line error, not a log line later).
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let l = TcpListener::bind(addr)?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Answer scrapes on `listener` until `shutdown`.
pub fn serve(listener: TcpListener, counters: Arc<Counters>, shutdown: Arc<AtomicBool>) {
    while !shutdown.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, _)) => {
                let _ = answer(conn, &counters);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// What to answer to a request whose head is `head`: status line and body.
pub fn respond(head: &[u8], s: &Snapshot) -> (&'static str, String) {
    let text = String::from_utf8_lossy(head);
    let mut words = text.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET" | "HEAD", "/metrics" | "/") => ("200 OK", render(s)),
        (_, "/metrics" | "/") => ("405 Method Not Allowed", "only GET\n".into()),
        _ => ("404 Not Found", "try /metrics\n".into()),
    }
}

fn answer(mut conn: TcpStream, counters: &Counters) -> std::io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    conn.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while head.len() < 8192 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let (status, body) = respond(&head, &counters.snapshot());
    let head_only = head.starts_with(b"HEAD ");
    let mut reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if !head_only {
        reply.push_str(&body);
    }
    conn.write_all(reply.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn only_get_metrics_is_answered() {
        let s = Snapshot::default();
        assert_eq!(respond(b"GET /metrics HTTP/1.1\r\n\r\n", &s).0, "200 OK");
        assert_eq!(
            respond(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n", &s).0,
            "200 OK"
        );
        assert_eq!(respond(b"GET / HTTP/1.1\r\n\r\n", &s).0, "200 OK");
        assert_eq!(
            respond(b"POST /metrics HTTP/1.1\r\n\r\n", &s).0,
            "405 Method Not Allowed"
        );
        assert_eq!(respond(b"GET /x HTTP/1.1\r\n\r\n", &s).0, "404 Not Found");
        assert_eq!(respond(b"\xff\xfe", &s).0, "404 Not Found");
        assert_eq!(respond(b"", &s).0, "404 Not Found");
    }
}
