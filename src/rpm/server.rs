//! `netmeter rpm-server`'s I/O: a tokio runtime of its own, the accept loop (the caps of
//! [`Admission`] applied before anything else is spent on a connection), the TLS
//! handshake, HTTP/2 or HTTP/1.1 served by hyper, the answers [`route`] picks, and one
//! audit line per connection. The decisions are `server_policy`'s; this file only runs
//! them. docs/rpm-server.md.

use super::server_body::LargeBody;
use super::server_config::{NqConfig, origin_from_authority, origin_of_addr};
use super::server_policy::{
    Access, Admission, AuditLine, CACHE_CONTROL, CONTENT_TYPE, IdleWatch, Limits, Outcome, Route,
    route,
};
use crate::clock::Clock;
use crate::engine::server::audit::{AuditLog, Target as AuditTarget};
use http_body_util::{BodyExt, Empty, Full, combinators::BoxBody};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode, header};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::convert::Infallible;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// Everything `netmeter rpm-server` was told.
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub limits: Limits,
    /// `--public-name`: the origin the configuration's URLs carry, whatever name the
    /// client used.
    pub public_name: Option<String>,
    pub tls: Arc<rustls::ServerConfig>,
    /// The large object's size in bytes.
    pub large_bytes: u64,
    /// `--audit-log FILE` (`-` = stdout): one JSON line per connection, written
    /// whole by the netmeter server's audit writer (so that inside `netmeter -s --rpm`
    /// both servers' lines go to one file, rotated as `-s` says).
    pub audit_log: Option<AuditTarget>,
    /// Times the connections (duration, wall time of the audit line).
    pub clock: Arc<dyn Clock>,
    /// `--http3` (experimental): also HTTP/3 on UDP at the same port (`rpm::h3_server`).
    pub http3: bool,
    /// `-C`: the congestion control of every TCP connection, set on the listening
    /// socket (the accepted ones inherit it).
    pub congestion: Option<String>,
    /// `--notsent-lowat`: what each connection may hold unsent, as the client's.
    pub send_limit: super::net::SendLimit,
    /// Log lines (each connection's, an accept error) as JSON `server_log` events, as
    /// `netmeter -s -J` writes its own, instead of text (`netmeter -s -J --rpm`).
    pub json_log: bool,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {0}: {1}")]
    Listen(SocketAddr, io::Error),
    #[error("cannot open --audit-log {0}: {1}")]
    AuditLog(String, io::Error),
    #[error("cannot start the server's runtime: {0}")]
    Runtime(io::Error),
    #[error("--http3: {0}")]
    Http3(String),
    #[error("--congestion {0}: {1}")]
    Congestion(String, String),
}

/// A bound server, not yet serving.
pub struct Server {
    listener: std::net::TcpListener,
    shared: Shared,
    /// `--http3`: the UDP socket at the TCP port and quinn's configuration.
    quic: Option<(std::net::UdpSocket, quinn::ServerConfig)>,
}

/// What every connection reads.
struct Shared {
    limits: Limits,
    public_name: Option<String>,
    acceptor: tokio_rustls::TlsAcceptor,
    large_bytes: u64,
    admission: Mutex<Admission>,
    access: Mutex<Access>,
    audit: Option<Audit>,
    clock: Arc<dyn Clock>,
    /// The listening port; with `--http3` the HTTP/2 answers' `Alt-Svc`.
    port: u16,
    alt_svc: Option<header::HeaderValue>,
    /// `ServerConfig::json_log`.
    json_log: bool,
    /// `ServerConfig::send_limit`.
    send_limit: super::net::SendLimit,
}

/// The HTTP/3 side (`--http3`) shares the caps, the audit log and the objects.
impl super::h3_server::Host for Shared {
    fn limits(&self) -> &Limits {
        &self.limits
    }
    fn admit(&self, ip: std::net::IpAddr) -> Result<(), super::server_policy::Refusal> {
        self.admission
            .lock()
            .map_or(Ok(()), |mut a| a.admit(ip, &self.limits))
    }
    fn release(&self, ip: std::net::IpAddr) {
        if let Ok(mut a) = self.admission.lock() {
            a.release(ip);
        }
    }
    fn write_audit(&self, line: &AuditLine) {
        write_audit(self, line);
    }
    fn large_bytes(&self) -> u64 {
        self.large_bytes
    }
    fn public_name(&self) -> Option<&str> {
        self.public_name.as_deref()
    }
    fn port(&self) -> u16 {
        self.port
    }
    fn clock(&self) -> &dyn Clock {
        &*self.clock
    }
}

impl Server {
    /// Bind the listening socket and open the audit log.
    pub fn bind(cfg: ServerConfig) -> Result<Server, ServerError> {
        let bind_tcp = || {
            std::net::TcpListener::bind(cfg.listen)
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
        };
        let (listener, udp) = match cfg.http3 {
            true => super::h3_server::bind_pair(cfg.listen, bind_tcp).map(|(l, u)| (l, Some(u))),
            false => bind_tcp().map(|l| (l, None)),
        }
        .map_err(|e| ServerError::Listen(cfg.listen, e))?;
        if let Some(cc) = &cfg.congestion {
            use std::os::fd::AsFd;
            crate::sock::set_congestion(listener.as_fd(), cc).map_err(|e| {
                ServerError::Congestion(cc.clone(), crate::sock::congestion_refused(&e))
            })?;
        }
        let audit = match &cfg.audit_log {
            Some(t) => Some(
                Audit::open(t)
                    .map_err(|e| ServerError::AuditLog(t.path.display().to_string(), e))?,
            ),
            None => None,
        };
        let port = listener
            .local_addr()
            .map_or(cfg.listen.port(), |a| a.port());
        let quic = match udp {
            Some(udp) => {
                let qc = super::h3_server::quic_config(&cfg.tls, cfg.limits.idle_timeout)
                    .map_err(ServerError::Http3)?;
                Some((udp, qc))
            }
            None => None,
        };
        let alt_svc = quic
            .as_ref()
            .and_then(|_| header::HeaderValue::from_str(&super::h3_server::alt_svc(port)).ok());
        Ok(Server {
            quic,
            listener,
            shared: Shared {
                access: Mutex::new(Access::new(&cfg.limits)),
                limits: cfg.limits,
                public_name: cfg.public_name,
                acceptor: tokio_rustls::TlsAcceptor::from(cfg.tls),
                large_bytes: cfg.large_bytes,
                admission: Mutex::new(Admission::default()),
                audit,
                clock: cfg.clock,
                port,
                alt_svc,
                json_log: cfg.json_log,
                send_limit: cfg.send_limit,
            },
        })
    }

    /// The address it listens on (the port chosen when 0 was asked for).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serve until a stop signal (`sock::stop_signal`), then give the open connections
    /// up to 2 s to write their audit lines.
    pub fn run(self) -> Result<(), ServerError> {
        self.run_until(Arc::new(AtomicBool::new(false)))
    }

    /// [`Server::run`], stopping also when `stop` is set (`netmeter -s --rpm`: the
    /// iperf3-compatible server ended without a signal, after `-1`'s test).
    pub fn run_until(self, stop: Arc<AtomicBool>) -> Result<(), ServerError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("rpm-server")
            .build()
            .map_err(ServerError::Runtime)?;
        rt.block_on(serve(self.listener, self.quic, Arc::new(self.shared), stop))
    }
}

async fn serve(
    listener: std::net::TcpListener,
    quic: Option<(std::net::UdpSocket, quinn::ServerConfig)>,
    sh: Arc<Shared>,
    stop: Arc<AtomicBool>,
) -> Result<(), ServerError> {
    let addr = listener.local_addr().map_err(ServerError::Runtime)?;
    let listener =
        tokio::net::TcpListener::from_std(listener).map_err(|e| ServerError::Listen(addr, e))?;
    let quic = match quic {
        Some((udp, cfg)) => {
            Some(super::h3_server::endpoint(udp, cfg).map_err(|e| ServerError::Listen(addr, e))?)
        }
        None => None,
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    let mut look = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            got = listener.accept() => match got {
                Ok((tcp, peer)) => {
                    if let Some(task) = admit(tcp, peer, &sh, stop_rx.clone()) {
                        tasks.spawn(task);
                    }
                }
                // Out of descriptors or a connection reset before accept: the server goes
                // on (the caps keep the first rare).
                Err(e) => {
                    log(sh.json_log, &format!("accept: {e}"));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(incoming) = super::h3_server::next(quic.as_ref()) => {
                if let Some(task) = super::h3_server::admit(incoming, &sh, stop_rx.clone()) {
                    tasks.spawn(task);
                }
            }
            _ = look.tick() => {
                while tasks.try_join_next().is_some() {}
                if crate::sock::stop_signal().is_some() || stop.load(Ordering::Relaxed) {
                    break;
                }
            }
        }
    }
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    Ok(())
}

/// Writes a log line on stdout: text, or with `json` the JSON `server_log` event
/// `netmeter -s -J` writes for its own lines.
fn log(json: bool, line: &str) {
    let mut out = io::stdout().lock();
    let _ = match json {
        true => out.write_all(crate::report::json::server_log(line).as_bytes()),
        false => writeln!(out, "{line}"),
    };
    let _ = out.flush();
}

/// One connection through the caps: refused ones are closed here and audited; a taken
/// one comes back as the task that serves it.
fn admit(
    tcp: TcpStream,
    peer: SocketAddr,
    sh: &Arc<Shared>,
    stop: watch::Receiver<bool>,
) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
    let begun = (sh.clock.now(), sh.clock.wall());
    // --allow/--deny and --max-conn-rate first, then the caps: nothing of the TLS
    // handshake is spent on a refused connection.
    let taken = sh
        .access
        .lock()
        .map_or(Ok(()), |mut a| a.check(peer.ip(), begun.0))
        .and_then(|()| {
            sh.admission
                .lock()
                .map_or(Ok(()), |mut a| a.admit(peer.ip(), &sh.limits))
                .map_err(|why| format!("{} reached", why.option()))
        });
    let counters = Arc::new(Counters::new(sh.limits.max_transfer_bytes));
    if let Err(why) = taken {
        drop(tcp);
        let mut line = audit_line(sh, peer, begun, &counters, None, Outcome::Refused);
        line.detail = Some(why);
        write_audit(sh, &line);
        return None;
    }
    let sh = Arc::clone(sh);
    Some(async move {
        let (alpn, outcome, detail) = connection(tcp, peer, &sh, &counters, stop).await;
        if let Ok(mut a) = sh.admission.lock() {
            a.release(peer.ip());
        }
        let mut line = audit_line(&sh, peer, begun, &counters, alpn, outcome);
        line.detail = detail;
        write_audit(&sh, &line);
    })
}

fn audit_line(
    sh: &Shared,
    peer: SocketAddr,
    begun: (std::time::Instant, std::time::SystemTime),
    c: &Counters,
    alpn: Option<String>,
    outcome: Outcome,
) -> AuditLine {
    let time = begun
        .1
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| (d.as_millis() as f64) / 1000.0);
    AuditLine {
        time,
        peer,
        alpn,
        requests: c.requests.load(Ordering::Relaxed),
        bytes_sent: c.tx.load(Ordering::Relaxed),
        bytes_received: c.rx.load(Ordering::Relaxed),
        body_bytes_sent: c.body_tx.load(Ordering::Relaxed),
        body_bytes_received: c.body_rx.load(Ordering::Relaxed),
        duration_s: sh
            .clock
            .now()
            .saturating_duration_since(begun.0)
            .as_secs_f64(),
        outcome,
        detail: None,
    }
}

fn write_audit(sh: &Shared, line: &AuditLine) {
    log(sh.json_log, &line.to_text());
    if let Some(a) = &sh.audit
        && let Err(e) = a.write(&line.to_json())
    {
        log(sh.json_log, &format!("cannot write the audit log: {e}"));
    }
}

/// The audit log as this server writes it: the netmeter server's writer, which the
/// file's rotation belongs to when both servers share it (`netmeter -s --rpm`), so this
/// one never rotates it but follows it: before each line, when the file at the path is
/// no longer the one it holds (rotated by the iperf3 server, moved by logrotate), it
/// opens the path again.
struct Audit {
    log: AuditLog,
    path: std::path::PathBuf,
    /// The device and inode of the file it holds (`None` for stdout).
    held: Mutex<Option<(u64, u64)>>,
}

fn file_id(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl Audit {
    fn open(t: &AuditTarget) -> io::Result<Audit> {
        let own = AuditTarget {
            path: t.path.clone(),
            rotation: None,
        };
        let log = AuditLog::open(&own)?;
        let stdout = t.path.as_os_str() == "-";
        Ok(Audit {
            log,
            held: Mutex::new(if stdout { None } else { file_id(&t.path) }),
            path: t.path.clone(),
        })
    }

    fn write(&self, line: &str) -> io::Result<()> {
        if let Ok(mut held) = self.held.lock()
            && held.is_some()
            && file_id(&self.path) != *held
        {
            self.log.reopen()?;
            *held = file_id(&self.path);
        }
        self.log.write(line)
    }
}

/// What one connection moved, shared by its socket wrapper, its requests and its
/// audit line.
struct Counters {
    rx: AtomicU64,
    tx: AtomicU64,
    body_rx: AtomicU64,
    body_tx: Arc<AtomicU64>,
    requests: AtomicU64,
    cap: u64,
    capped: AtomicBool,
    /// The client's end of the socket closed: a read found its end, or a read or write
    /// was refused with a reset (a client that closes with bytes unread resets).
    peer_closed: AtomicBool,
}

impl Counters {
    fn new(cap: u64) -> Counters {
        Counters {
            rx: AtomicU64::new(0),
            tx: AtomicU64::new(0),
            body_rx: AtomicU64::new(0),
            body_tx: Arc::new(AtomicU64::new(0)),
            requests: AtomicU64::new(0),
            cap,
            capped: AtomicBool::new(false),
            peer_closed: AtomicBool::new(false),
        }
    }

    /// Note what a socket call said of the client's end.
    fn saw(&self, err: Option<io::ErrorKind>, eof: bool) {
        let gone = match err {
            None => eof,
            Some(k) => matches!(
                k,
                io::ErrorKind::ConnectionReset
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::ConnectionAborted
            ),
        };
        if gone {
            self.peer_closed.store(true, Ordering::Relaxed);
        }
    }

    fn total(&self) -> u64 {
        self.rx.load(Ordering::Relaxed) + self.tx.load(Ordering::Relaxed)
    }

    /// `--max-transfer` reached: the socket refuses to move more.
    fn over_cap(&self) -> bool {
        let over = self.total() >= self.cap;
        if over {
            self.capped.store(true, Ordering::Relaxed);
        }
        over
    }
}

fn cap_error() -> io::Error {
    io::Error::other("--max-transfer reached")
}

/// The TCP socket, counting what crosses it and refusing to move more past the cap.
struct CountingIo {
    inner: super::sendq::EorTcp,
    c: Arc<Counters>,
}

impl super::net::TlsOverTcp for tokio_rustls::server::TlsStream<CountingIo> {
    fn tcp(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.get_ref().0.inner.get_ref().as_fd()
    }

    fn set_tls_buffer(&mut self, bytes: usize) {
        self.get_mut().1.set_buffer_limit(Some(bytes));
    }

    fn tls_pending(&self) -> bool {
        self.get_ref().1.wants_write()
    }
}

impl AsyncRead for CountingIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.c.over_cap() {
            return Poll::Ready(Err(cap_error()));
        }
        let (before, room) = (buf.filled().len(), buf.remaining());
        let r = Pin::new(&mut me.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        me.c.rx.fetch_add(n as u64, Ordering::Relaxed);
        if let Poll::Ready(res) = &r {
            me.c.saw(res.as_ref().err().map(io::Error::kind), n == 0 && room > 0);
        }
        r
    }
}

impl AsyncWrite for CountingIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        if me.c.over_cap() {
            return Poll::Ready(Err(cap_error()));
        }
        let r = Pin::new(&mut me.inner).poll_write(cx, data);
        match &r {
            Poll::Ready(Ok(n)) => {
                me.c.tx.fetch_add(*n as u64, Ordering::Relaxed);
            }
            Poll::Ready(Err(e)) => me.c.saw(Some(e.kind()), false),
            Poll::Pending => {}
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Resolves when no byte has moved on the connection for `timeout`.
async fn idle(c: &Counters, timeout: Duration) {
    let mut watch = IdleWatch::new(timeout);
    let mut ticks = tokio::time::interval(watch.tick());
    let start = ticks.tick().await;
    loop {
        let t = ticks.tick().await;
        if watch.expired(c.total(), t.duration_since(start)) {
            return;
        }
    }
}

/// Serve one taken connection: the TLS handshake within `--header-timeout`, then HTTP
/// until the client closes, a limit ends it or the server stops. Returns the ALPN
/// protocol, the outcome and its detail.
async fn connection(
    tcp: TcpStream,
    peer: SocketAddr,
    sh: &Arc<Shared>,
    c: &Arc<Counters>,
    mut stop: watch::Receiver<bool>,
) -> (Option<String>, Outcome, Option<String>) {
    let _ = tcp.set_nodelay(true);
    // A download's self probe waits behind what this server has queued unsent for the
    // same connection, as an upload's waits behind the client's: the same limits as
    // `netmeter rpm` sets (docs/rpm-server.md). A kernel that refuses the mark serves
    // anyway.
    let local = tcp.local_addr().unwrap_or(peer);
    // With `auto` the large objects pace on the socket (`sendq::Room`), each from its
    // own duplicate of it (a readiness wakes one task).
    let room = match sh.send_limit {
        super::net::SendLimit::Auto => {
            use std::os::fd::AsFd;
            let fd = tcp.as_fd().try_clone_to_owned().ok();
            fd.map(|fd| (fd, Arc::new(super::sendq::Pace::default())))
        }
        _ => None,
    };
    let inner = match sh.send_limit {
        super::net::SendLimit::Fixed(v) => {
            let _ = super::net::set_notsent_lowat(&tcp, v);
            super::sendq::EorTcp::plain(tcp)
        }
        super::net::SendLimit::Kernel => super::sendq::EorTcp::plain(tcp),
        // `Bounded::by_rate` sets the mark at the first write and as it changes.
        super::net::SendLimit::Auto => super::sendq::EorTcp::new(tcp),
    };
    let io = CountingIo {
        inner,
        c: Arc::clone(c),
    };
    let handshake = tokio::time::timeout(sh.limits.header_timeout, sh.acceptor.accept(io));
    let tls = tokio::select! {
        r = handshake => match r {
            Ok(Ok(tls)) => tls,
            Ok(Err(_)) if c.peer_closed.load(Ordering::Relaxed) => {
                return (None, Outcome::Tls, Some(CLOSED_IN_HANDSHAKE.into()))
            }
            Ok(Err(e)) => return (None, Outcome::Tls, Some(e.to_string())),
            Err(_) => return (None, Outcome::Tls, Some("no handshake within --header-timeout".into())),
        },
        _ = stop.changed() => return (None, Outcome::Stopped, None),
    };
    let alpn = tls
        .get_ref()
        .1
        .alpn_protocol()
        .map(|p| String::from_utf8_lossy(p).into_owned());
    // A download's self probe is answered behind the answers' TLS records and the DATA
    // frame under way: both held to a congestion window, or by time with `auto`, as
    // the client's are.
    let chunk = Arc::new(AtomicUsize::new(super::net::BUFFER_MIN_BYTES));
    let tls = match sh.send_limit {
        super::net::SendLimit::Auto => super::net::Bounded::by_rate(tls, Arc::clone(&chunk))
            .with_pace(room.as_ref().map(|(_, pace)| Arc::clone(pace))),
        _ => super::net::Bounded::new(tls, Arc::clone(&chunk)),
    };
    let ctx = Arc::new(Ctx {
        c: Arc::clone(c),
        large_bytes: sh.large_bytes,
        public_name: sh.public_name.clone(),
        local,
        chunk,
        room,
    });
    let alt_svc = sh.alt_svc.clone();
    let service = hyper::service::service_fn(move |req| {
        let (ctx, alt_svc) = (Arc::clone(&ctx), alt_svc.clone());
        async move {
            let mut r = answer(req, &ctx).await;
            if let Some(v) = alt_svc {
                r.headers_mut().insert(header::ALT_SVC, v);
            }
            Ok::<_, Infallible>(r)
        }
    });
    let mut http = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    http.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(sh.limits.header_timeout)
        .max_buf_size(sh.limits.max_header_bytes);
    http.http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(sh.limits.max_header_bytes).unwrap_or(u32::MAX))
        .max_concurrent_streams(100);
    let conn = http.serve_connection(TokioIo::new(tls), service);
    let (outcome, detail) = tokio::select! {
        r = conn => ended(r, c),
        _ = idle(c, sh.limits.idle_timeout) => (Outcome::Idle, None),
        _ = stop.changed() => (Outcome::Stopped, None),
    };
    (alpn, outcome, detail)
}

/// How a served connection's end reads.
fn ended(
    r: Result<(), Box<dyn std::error::Error + Send + Sync>>,
    c: &Counters,
) -> (Outcome, Option<String>) {
    if c.capped.load(Ordering::Relaxed) {
        return (Outcome::TransferCap, None);
    }
    let Err(e) = r else {
        return (Outcome::Ok, None);
    };
    if e.downcast_ref::<hyper::Error>()
        .is_some_and(hyper::Error::is_timeout)
    {
        return (Outcome::HeaderTimeout, None);
    }
    // A responsiveness client ends its load connections by closing them with the large
    // object still coming (the draft never reads it to its end), so the socket resets
    // and hyper says "connection error": that is the test's normal end.
    if c.peer_closed.load(Ordering::Relaxed) {
        return (Outcome::Ok, Some(CLOSED_MID_TRANSFER.into()));
    }
    (Outcome::Error, Some(error_chain(&*e)))
}

/// The audit detail of a connection the client closed while an answer was under way.
const CLOSED_MID_TRANSFER: &str = "closed by the client mid-transfer";
/// The audit detail of a connection the client closed before its handshake finished (a
/// probe the client gave up when its phase ended, or a port probe).
const CLOSED_IN_HANDSHAKE: &str = "closed by the client during the TLS handshake";

/// An error with its causes, `outer: inner: ...`, at most 200 bytes: hyper's own text
/// alone is only "connection error".
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text = format!("{text}: {c}");
        cause = c.source();
    }
    if text.len() > 200 {
        let mut cut = 200;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

/// What a request's answer needs of its connection.
struct Ctx {
    c: Arc<Counters>,
    large_bytes: u64,
    public_name: Option<String>,
    local: SocketAddr,
    /// The connection's `net::buffer_bound`: the large object's chunks.
    chunk: Arc<AtomicUsize>,
    /// With `auto`: a duplicate of the socket, from which each large object makes its
    /// own `sendq::Room`, and what the connection's writer tells them.
    room: Option<(std::os::fd::OwnedFd, Arc<super::sendq::Pace>)>,
}

type Out = Response<BoxBody<Bytes, Infallible>>;

fn response(status: StatusCode, body: BoxBody<Bytes, Infallible>, len: Option<u64>) -> Out {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static(CACHE_CONTROL),
    );
    if let Some(n) = len {
        h.insert(header::CONTENT_LENGTH, header::HeaderValue::from(n));
    }
    r
}

fn object(bytes: Bytes, head: bool, c: &Counters) -> Out {
    let len = bytes.len() as u64;
    let body = if head {
        Empty::new().boxed()
    } else {
        c.body_tx.fetch_add(len, Ordering::Relaxed);
        Full::new(bytes).boxed()
    };
    let mut r = response(StatusCode::OK, body, Some(len));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(CONTENT_TYPE),
    );
    r
}

/// The answer to one request (`Accept-Encoding` is not looked at: every answer is
/// identity-coded).
async fn answer(req: Request<Incoming>, ctx: &Ctx) -> Out {
    ctx.c.requests.fetch_add(1, Ordering::Relaxed);
    let head = req.method() == hyper::Method::HEAD;
    match route(req.method(), req.uri().path()) {
        Route::Config => {
            let origin = ctx.origin(&req);
            object(NqConfig::for_origin(&origin).to_body().into(), head, &ctx.c)
        }
        Route::Small => object(Bytes::from_static(b"x"), head, &ctx.c),
        Route::Large => {
            let body = if head {
                Empty::new().boxed()
            } else {
                Counted::new(
                    LargeBody::new(ctx.large_bytes, Arc::clone(&ctx.chunk)).with_room(ctx.room()),
                    &ctx.c.body_tx,
                )
                .boxed()
            };
            let mut r = response(StatusCode::OK, body, Some(ctx.large_bytes));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(CONTENT_TYPE),
            );
            r
        }
        Route::Upload => {
            let mut body = req.into_body();
            while let Some(frame) = body.frame().await {
                match frame {
                    Ok(f) => {
                        if let Some(d) = f.data_ref() {
                            ctx.c.body_rx.fetch_add(d.len() as u64, Ordering::Relaxed);
                        }
                    }
                    Err(_) => break,
                }
            }
            response(StatusCode::OK, Empty::new().boxed(), Some(0))
        }
        Route::MethodNotAllowed(allow) => {
            let mut r = response(
                StatusCode::METHOD_NOT_ALLOWED,
                Empty::new().boxed(),
                Some(0),
            );
            r.headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static(allow));
            r
        }
        Route::NotFound => response(StatusCode::NOT_FOUND, Empty::new().boxed(), Some(0)),
    }
}

impl Ctx {
    /// A room for one large object on this connection, with `auto`; `None` (unpaced)
    /// without it or when the descriptor cannot be duplicated.
    fn room(&self) -> Option<super::sendq::Room> {
        use std::os::fd::AsFd;
        let (fd, pace) = self.room.as_ref()?;
        super::sendq::Room::new(fd.as_fd(), Arc::clone(pace)).ok()
    }

    /// The origin the configuration's URLs carry: `--public-name`, else the name the
    /// client reached the server by when it is a plain one, else the address it arrived at.
    fn origin(&self, req: &Request<Incoming>) -> String {
        if let Some(p) = &self.public_name {
            return p.clone();
        }
        let named = req
            .uri()
            .authority()
            .map(|a| a.as_str().to_string())
            .or_else(|| {
                req.headers()
                    .get(header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .map(str::to_string)
            });
        named
            .as_deref()
            .and_then(origin_from_authority)
            .map_or_else(|| origin_of_addr(self.local), str::to_string)
    }
}

/// A body that counts the bytes it hands to the connection.
struct Counted<B> {
    inner: B,
    sent: Arc<AtomicU64>,
}

impl<B> Counted<B> {
    fn new(inner: B, sent: &Arc<AtomicU64>) -> Counted<B> {
        Counted {
            inner,
            sent: Arc::clone(sent),
        }
    }
}

impl<B: hyper::body::Body<Data = Bytes> + Unpin> hyper::body::Body for Counted<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, B::Error>>> {
        let me = self.get_mut();
        let r = Pin::new(&mut me.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(f))) = &r
            && let Some(d) = f.data_ref()
        {
            me.sent.fetch_add(d.len() as u64, Ordering::Relaxed);
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// The banner's first lines: where the server listens and its configuration's URL.
pub fn listening_lines(addr: SocketAddr, public_name: Option<&str>) -> Vec<String> {
    let origin = match public_name {
        Some(p) => p.to_string(),
        None if addr.ip().is_unspecified() => format!("localhost:{}", addr.port()),
        None => origin_of_addr(addr),
    };
    vec![
        format!("rpm-server listening on {addr}"),
        format!(
            "configuration: https://{origin}{}",
            super::server_config::WELL_KNOWN_PATH
        ),
    ]
}

/// The banner's lines about the certificate: where it came from, its SHA-256
/// fingerprint and, for a self-signed one, the public key pin curl takes.
pub fn cert_lines(cert: &super::tls::ServerCert) -> Vec<String> {
    let mut v = vec![if cert.names.is_empty() {
        "certificate: from --cert".to_string()
    } else {
        format!(
            "certificate: self-signed at start for {} (clients need --insecure, curl -k)",
            cert.names.join(", ")
        )
    }];
    v.push(format!(
        "certificate SHA-256 fingerprint: {}",
        cert.fingerprint
    ));
    if let Some(pin) = &cert.key_pin {
        v.push(format!("public key pin: {pin}"));
    }
    v
}
