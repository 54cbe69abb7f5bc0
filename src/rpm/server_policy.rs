//! `netmeter rpm-server`'s decisions, apart from its I/O: which connections it takes
//! (the caps on open connections, overall and per source address), what each request
//! is answered with (the paths, methods and headers of Apple's reference nginx
//! configuration), when a quiet connection has been idle too long, and the audit line
//! written when a connection ends. Time comes in as an argument. Who may connect at all
//! (`--allow`, `--deny`, `--max-conn-rate`) is judged by the netmeter server's own
//! policy code ([`crate::engine::server::policy`]), so both servers mean the same by
//! those options.

use super::server_config::{CONFIG_PATH, LARGE_PATH, SMALL_PATH, UPLOAD_PATH, WELL_KNOWN_PATH};
use crate::engine::server::policy::{ConnRate, Policy, RateGate};
use ipnet::IpNet;
use serde::Serialize;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// What one server enforces (`netmeter rpm-server`'s options).
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// `--max-connections`: connections open at once; one more is closed at accept.
    pub max_connections: usize,
    /// `--max-connections-per-host`: connections open at once from one address.
    pub max_per_host: usize,
    /// `--max-header-size`: a request's header block, in bytes.
    pub max_header_bytes: usize,
    /// `--header-timeout`: the TLS handshake, and an HTTP/1.1 request's header, must
    /// arrive within this.
    pub header_timeout: Duration,
    /// `--idle-timeout`: a connection on which no byte moves either way for this long
    /// is closed.
    pub idle_timeout: Duration,
    /// `--max-transfer`: bytes one connection may move, both ways together, counted on
    /// the wire (TLS included); past it the connection is closed.
    pub max_transfer_bytes: u64,
    /// `--allow CIDR,...`: when not empty, only these sources may connect.
    pub allow: Vec<IpNet>,
    /// `--deny CIDR,...`: these sources may not connect (wins over `--allow`).
    pub deny: Vec<IpNet>,
    /// `--max-conn-rate N/PERIOD`: connections one source address may open.
    pub conn_rate: Option<ConnRate>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 256,
            max_per_host: 64,
            max_header_bytes: 16 * 1024,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_transfer_bytes: 64 << 30,
            allow: Vec::new(),
            deny: Vec::new(),
            conn_rate: None,
        }
    }
}

/// `--allow`/`--deny` and `--max-conn-rate`, judged at accept before anything else is
/// spent on a connection: the netmeter server's [`Policy::check_address`] and
/// [`RateGate`], the same code `netmeter -s` runs. A responsiveness client opens one
/// connection per foreign probe (up to 100 a second, draft section 4.4), so a rate meant
/// for it is far above one meant for iperf3 tests.
#[derive(Debug)]
pub struct Access {
    policy: Policy,
    gate: Option<RateGate>,
}

impl Access {
    /// The access rules of `limits`.
    pub fn new(limits: &Limits) -> Access {
        Access {
            policy: Policy {
                allow: limits.allow.clone(),
                deny: limits.deny.clone(),
                ..Policy::default()
            },
            gate: limits.conn_rate.map(RateGate::new),
        }
    }

    /// Whether `ip` may open a connection at `now`: the refusal's sentence for the
    /// audit line when not. An address refused by `--deny`/`--allow` spends no token of
    /// its rate.
    pub fn check(&mut self, ip: IpAddr, now: Instant) -> Result<(), String> {
        let ip = host_of(ip);
        self.policy.check_address(ip).map_err(|r| r.message)?;
        match &mut self.gate {
            Some(g) => g.admit(ip, now).map_err(|r| r.message),
            None => Ok(()),
        }
    }
}

/// Why a connection was closed at accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    MaxConnections,
    MaxPerHost,
}

impl Refusal {
    /// The option that said no, for the audit line.
    pub fn option(self) -> &'static str {
        match self {
            Refusal::MaxConnections => "--max-connections",
            Refusal::MaxPerHost => "--max-connections-per-host",
        }
    }
}

/// The open connections, overall and per source address.
#[derive(Debug, Default)]
pub struct Admission {
    open: usize,
    per_host: HashMap<IpAddr, usize>,
}

/// An address as one host: an IPv4-mapped IPv6 address is its IPv4 address.
fn host_of(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

impl Admission {
    /// Take a connection from `ip`, or say which cap it would pass. A connection taken
    /// is given back with [`Admission::release`].
    pub fn admit(&mut self, ip: IpAddr, limits: &Limits) -> Result<(), Refusal> {
        if self.open >= limits.max_connections {
            return Err(Refusal::MaxConnections);
        }
        let n = self.per_host.entry(host_of(ip)).or_insert(0);
        if *n >= limits.max_per_host {
            return Err(Refusal::MaxPerHost);
        }
        *n += 1;
        self.open += 1;
        Ok(())
    }

    /// A connection from `ip` ended.
    pub fn release(&mut self, ip: IpAddr) {
        let h = host_of(ip);
        if let Some(n) = self.per_host.get_mut(&h) {
            *n -= 1;
            if *n == 0 {
                self.per_host.remove(&h);
            }
            self.open = self.open.saturating_sub(1);
        }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open
    }
}

/// What a request is answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The configuration (`/.well-known/nq`, `/config`).
    Config,
    /// The 1-byte object.
    Small,
    /// The large object.
    Large,
    /// The upload sink: the body read and thrown away, then 200 with no body.
    Upload,
    /// 405, with this `Allow`.
    MethodNotAllowed(&'static str),
    /// 404.
    NotFound,
}

/// The route of `method path` (the path without its query). The objects and the
/// configuration are static files in the reference nginx configuration (GET and HEAD;
/// anything else 405); `/slurp` and below go to the upload sink, which takes POST
/// (Apple's own server answers anything else 405; curl `-T` sends PUT unless `-X POST`,
/// so PUT is taken as well).
pub fn route(method: &http::Method, path: &str) -> Route {
    let get = method == http::Method::GET || method == http::Method::HEAD;
    let file = match path {
        WELL_KNOWN_PATH | CONFIG_PATH => Some(Route::Config),
        SMALL_PATH => Some(Route::Small),
        LARGE_PATH => Some(Route::Large),
        _ => None,
    };
    if let Some(r) = file {
        return if get {
            r
        } else {
            Route::MethodNotAllowed("GET, HEAD")
        };
    }
    let upload = path == UPLOAD_PATH
        || path
            .strip_prefix(UPLOAD_PATH)
            .is_some_and(|r| r.starts_with('/'));
    match (upload, method) {
        (true, &http::Method::POST | &http::Method::PUT) => Route::Upload,
        (true, _) => Route::MethodNotAllowed("POST"),
        (false, _) => Route::NotFound,
    }
}

/// `Cache-Control` on every answer, Apple's reference server's value for its objects: no
/// cache between a client and the server may answer for it (a cached configuration
/// would carry another client's host name).
pub const CACHE_CONTROL: &str = "no-store, must-revalidate, private, max-age=0";
/// `Content-Type` of the objects and the configuration: nginx's `default_type` for files
/// without an extension, as the reference configuration serves them.
pub const CONTENT_TYPE: &str = "application/octet-stream";

/// The no-byte-moved watch behind `--idle-timeout`: told the connection's byte count
/// at each tick, says when it has not changed for the timeout.
#[derive(Debug)]
pub struct IdleWatch {
    timeout: Duration,
    last_total: u64,
    last_change: Duration,
}

impl IdleWatch {
    /// A watch over a connection that starts at time 0 (`now` is time since then).
    pub fn new(timeout: Duration) -> IdleWatch {
        IdleWatch {
            timeout,
            last_total: 0,
            last_change: Duration::ZERO,
        }
    }

    /// The connection has moved `total` bytes by `now`: true when nothing moved for
    /// the timeout.
    pub fn expired(&mut self, total: u64, now: Duration) -> bool {
        if total != self.last_total {
            self.last_total = total;
            self.last_change = now;
            return false;
        }
        now.saturating_sub(self.last_change) >= self.timeout
    }

    /// How often to look: often enough to close within a quarter of the timeout late.
    pub fn tick(&self) -> Duration {
        (self.timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(1))
    }
}

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The client closed it (or the server finished with it).
    Ok,
    /// Closed at accept, before the TLS handshake, by `--allow`/`--deny`,
    /// `--max-conn-rate` or a cap (`detail` says which, naming the option).
    Refused,
    /// The TLS handshake failed or did not finish within `--header-timeout`.
    Tls,
    /// An HTTP/1.1 request's header did not arrive within `--header-timeout`.
    HeaderTimeout,
    /// No byte moved for `--idle-timeout`.
    Idle,
    /// `--max-transfer` reached.
    TransferCap,
    /// The server was stopped.
    Stopped,
    /// A protocol or socket error (`detail`).
    Error,
}

/// One line of `--audit-log`: a connection, from accept to close.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditLine {
    /// Wall-clock time the connection was accepted, Unix seconds.
    pub time: f64,
    pub peer: SocketAddr,
    /// `h2` or `http/1.1` as ALPN settled it (absent before the handshake).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alpn: Option<String>,
    pub requests: u64,
    /// Bytes on the wire each way (TLS records included).
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// HTTP body bytes: objects served, uploads read.
    pub body_bytes_sent: u64,
    pub body_bytes_received: u64,
    pub duration_s: f64,
    pub outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl AuditLine {
    /// The JSON line (no newline).
    pub fn to_json(&self) -> String {
        // Numbers, an address and plain strings: serialization cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The server log's line for people.
    pub fn to_text(&self) -> String {
        let detail = self
            .detail
            .as_deref()
            .map(|d| {
                format!(
                    ": {}",
                    crate::report::escape::escape_controls(d, crate::report::escape::Lines::One)
                )
            })
            .unwrap_or_default();
        format!(
            "{} {}: {} requests, {} bytes sent, {} received in {:.2} s ({:?}{detail})",
            self.peer,
            self.alpn.as_deref().unwrap_or("-"),
            self.requests,
            self.bytes_sent,
            self.bytes_received,
            self.duration_s,
            self.outcome,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn caps_hold_overall_and_per_host_and_free_on_release() {
        let limits = Limits {
            max_connections: 3,
            max_per_host: 2,
            ..Limits::default()
        };
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let c: IpAddr = "::1".parse().unwrap();
        let mut adm = Admission::default();
        assert_eq!(adm.admit(a, &limits), Ok(()));
        assert_eq!(adm.admit(mapped, &limits), Ok(()));
        assert_eq!(adm.admit(a, &limits), Err(Refusal::MaxPerHost));
        assert_eq!(adm.admit(b, &limits), Ok(()));
        assert_eq!(adm.admit(c, &limits), Err(Refusal::MaxConnections));
        assert_eq!(adm.open(), 3);
        adm.release(a);
        assert_eq!(adm.admit(c, &limits), Ok(()));
        assert_eq!(adm.admit(a, &limits), Err(Refusal::MaxConnections));
        adm.release(c);
        assert_eq!(adm.admit(a, &limits), Ok(()));
        // Releasing an address that holds nothing changes nothing.
        adm.release("10.0.0.1".parse().unwrap());
        assert_eq!(adm.open(), 3);
    }

    #[test]
    fn access_applies_the_servers_allow_deny_and_rate() {
        let nets = |s: &[&str]| s.iter().map(|n| n.parse().unwrap()).collect::<Vec<IpNet>>();
        let limits = Limits {
            allow: nets(&["127.0.0.0/8", "::1/128"]),
            deny: nets(&["127.0.0.9/32"]),
            conn_rate: Some(ConnRate::parse("2/min").unwrap()),
            ..Limits::default()
        };
        let mut access = Access::new(&limits);
        let t0 = crate::clock::Clock::now(&crate::clock::ManualClock::at_unix(1_700_000_000));
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let denied = access.check(ip("127.0.0.9"), t0).unwrap_err();
        assert!(denied.contains("--deny"), "{denied}");
        let outside = access.check(ip("10.0.0.1"), t0).unwrap_err();
        assert!(outside.contains("--allow"), "{outside}");
        // A mapped address is its IPv4 address: allowed, and counted with it.
        assert_eq!(access.check(ip("::ffff:127.0.0.1"), t0), Ok(()));
        assert_eq!(access.check(ip("127.0.0.1"), t0), Ok(()));
        let fast = access.check(ip("127.0.0.1"), t0).unwrap_err();
        assert!(fast.contains("--max-conn-rate"), "{fast}");
        // Another address has its own bucket; half a minute refills one connection.
        assert_eq!(access.check(ip("::1"), t0), Ok(()));
        assert_eq!(
            access.check(ip("127.0.0.1"), t0 + Duration::from_secs(30)),
            Ok(())
        );
        // The denied address spent nothing: with no rate it would pass the rest.
        let mut open = Access::new(&Limits::default());
        assert_eq!(open.check(ip("10.0.0.1"), t0), Ok(()));
    }

    #[test]
    fn routes_follow_the_reference_configuration() {
        assert_eq!(route(&Method::GET, "/.well-known/nq"), Route::Config);
        assert_eq!(route(&Method::HEAD, "/config"), Route::Config);
        assert_eq!(route(&Method::GET, "/files/small"), Route::Small);
        assert_eq!(route(&Method::GET, "/files/large"), Route::Large);
        assert_eq!(route(&Method::POST, "/slurp"), Route::Upload);
        assert_eq!(route(&Method::PUT, "/slurp/x"), Route::Upload);
        assert_eq!(
            route(&Method::POST, "/files/large"),
            Route::MethodNotAllowed("GET, HEAD")
        );
        assert_eq!(
            route(&Method::GET, "/slurp"),
            Route::MethodNotAllowed("POST")
        );
        assert_eq!(route(&Method::GET, "/slurpy"), Route::NotFound);
        assert_eq!(route(&Method::GET, "/files/large/x"), Route::NotFound);
        assert_eq!(route(&Method::GET, "/"), Route::NotFound);
    }

    #[test]
    fn idle_watch_expires_only_after_a_quiet_timeout() {
        let s = Duration::from_secs;
        let mut w = IdleWatch::new(s(10));
        assert!(!w.expired(0, s(9)));
        assert!(!w.expired(5, s(9)));
        assert!(!w.expired(5, s(18)));
        assert!(w.expired(5, s(19)));
        assert!(!w.expired(6, s(30)));
        assert_eq!(w.tick(), s(1));
        assert_eq!(
            IdleWatch::new(Duration::from_millis(100)).tick(),
            Duration::from_millis(50)
        );
    }

    #[test]
    fn the_audit_line_is_one_json_object() {
        let line = AuditLine {
            time: 1.5,
            peer: "127.0.0.1:4000".parse().unwrap(),
            alpn: Some("h2".into()),
            requests: 2,
            bytes_sent: 10,
            bytes_received: 20,
            body_bytes_sent: 1,
            body_bytes_received: 7,
            duration_s: 0.25,
            outcome: Outcome::TransferCap,
            detail: Some("x\u{1b}".into()),
        };
        let v: serde_json::Value = serde_json::from_str(&line.to_json()).unwrap();
        assert_eq!(v["peer"], "127.0.0.1:4000");
        assert_eq!(v["outcome"], "transfer-cap");
        assert_eq!(v["body_bytes_received"], 7);
        assert!(line.to_text().contains("\\x1b"), "{}", line.to_text());
    }
}
