//! `netmeter rpm-server --http3` (experimental): the same paths over HTTP/3 on QUIC,
//! on UDP at the TCP listener's port. Connections go through the same caps
//! (`Admission`) as the TCP ones before the handshake is answered, the handshake is
//! bounded by `--header-timeout`, a connection's bytes (QUIC's UDP payload both ways,
//! read from quinn's statistics) are held to `--max-transfer` and watched for
//! `--idle-timeout`, and each connection ends in the same audit line (ALPN `h3`).
//! The HTTP/2 answers advertise this listener with `Alt-Svc`. docs/rpm-server.md.

use super::server_config::{NqConfig, origin_from_authority, origin_of_addr};
use super::server_policy::{
    AuditLine, CACHE_CONTROL, CONTENT_TYPE, IdleWatch, Limits, Outcome, Refusal, Route, route,
};
use crate::clock::Clock;
use bytes::{Buf, Bytes};
use http::{Request, Response, StatusCode, header};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::watch;

/// What the HTTP/3 side needs of the server it runs in (`rpm::server` implements it:
/// the caps, the audit log and the objects are the HTTP/2 side's).
pub trait Host: Send + Sync + 'static {
    fn limits(&self) -> &Limits;
    /// Takes a connection from `ip` under the caps, or says which cap refuses it.
    fn admit(&self, ip: IpAddr) -> Result<(), Refusal>;
    /// A connection [`Host::admit`] took has ended.
    fn release(&self, ip: IpAddr);
    /// Writes one audit line (stdout and `--audit-log`).
    fn write_audit(&self, line: &AuditLine);
    fn large_bytes(&self) -> u64;
    fn public_name(&self) -> Option<&str>;
    /// The listening port (the configuration's origin when the client named none).
    fn port(&self) -> u16;
    fn clock(&self) -> &dyn Clock;
}

/// What one connection moved, for its cap, its idle watch and its audit line.
#[derive(Default)]
struct Counters {
    /// UDP payload each way.
    rx: AtomicU64,
    tx: AtomicU64,
    body_rx: AtomicU64,
    body_tx: AtomicU64,
    requests: AtomicU64,
}

impl Counters {
    fn total(&self) -> u64 {
        self.rx.load(Ordering::Relaxed) + self.tx.load(Ordering::Relaxed)
    }

    fn line(
        &self,
        peer: SocketAddr,
        begun: (Instant, SystemTime),
        now: Instant,
        alpn: Option<String>,
        outcome: Outcome,
        detail: Option<String>,
    ) -> AuditLine {
        AuditLine {
            time: begun
                .1
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| (d.as_millis() as f64) / 1000.0),
            peer,
            alpn,
            requests: self.requests.load(Ordering::Relaxed),
            bytes_sent: self.tx.load(Ordering::Relaxed),
            bytes_received: self.rx.load(Ordering::Relaxed),
            body_bytes_sent: self.body_tx.load(Ordering::Relaxed),
            body_bytes_received: self.body_rx.load(Ordering::Relaxed),
            duration_s: now.saturating_duration_since(begun.0).as_secs_f64(),
            outcome,
            detail,
        }
    }
}

/// The ALPN token of HTTP/3 (RFC 9114, section 3.1).
pub const ALPN_H3: &[u8] = b"h3";
/// Requests under way on one connection at most (as the HTTP/2 side's
/// `max_concurrent_streams`).
const MAX_STREAMS: u32 = 100;
/// How often a connection's byte counts are read from quinn.
const METER_TICK: Duration = Duration::from_millis(100);
/// The large object's chunk.
const CHUNK_BYTES: usize = 64 * 1024;
/// QUIC application error code for a connection closed by the server's limits
/// (H3_NO_ERROR, RFC 9114 section 8.1, 0x0100: a deliberate close, not a fault).
const H3_NO_ERROR: u32 = 0x0100;

/// The `Alt-Svc` value the HTTP/2 answers carry: HTTP/3 on `port` (RFC 7838).
pub fn alt_svc(port: u16) -> String {
    format!("h3=\":{port}\"; ma=86400")
}

/// quinn's server configuration from the TCP side's rustls one: the same certificate,
/// TLS 1.3 only (QUIC has no other), ALPN `h3`; the stream cap and the idle timeout
/// of `shared`'s limits.
pub fn quic_config(
    tls: &rustls::ServerConfig,
    idle: Duration,
) -> Result<quinn::ServerConfig, String> {
    let mut tls = tls.clone();
    tls.alpn_protocols = vec![ALPN_H3.to_vec()];
    tls.max_early_data_size = 0;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
        .map_err(|e| format!("the certificate does not make a QUIC configuration: {e}"))?;
    let mut cfg = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut t = quinn::TransportConfig::default();
    t.max_concurrent_bidi_streams(MAX_STREAMS.into())
        .max_concurrent_uni_streams(8u32.into())
        .stream_receive_window((8u32 << 20).into())
        .receive_window((16u32 << 20).into())
        .send_window(16 << 20)
        // quinn's own idle timeout backs the byte watch up (its maximum is 2^62 ms).
        .max_idle_timeout(quinn::IdleTimeout::try_from(idle).ok());
    cfg.transport_config(Arc::new(t));
    Ok(cfg)
}

/// Binds the UDP socket (before the runtime starts, so a taken port fails at start).
pub fn bind_udp(addr: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    let s = std::net::UdpSocket::bind(addr)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// How many ports are tried, with port 0 asked for, before the server gives up on
/// one whose UDP side is free too.
const PORT_TRIES: usize = 16;

/// The TCP listener (`bind_tcp`) and the UDP socket on one port: with port 0 the
/// kernel picks the TCP port, and one whose UDP port is taken is given up for another.
pub fn bind_pair(
    listen: SocketAddr,
    bind_tcp: impl Fn() -> std::io::Result<std::net::TcpListener>,
) -> std::io::Result<(std::net::TcpListener, std::net::UdpSocket)> {
    let tries = if listen.port() == 0 { PORT_TRIES } else { 1 };
    let mut last = std::io::Error::other("no port tried");
    for _ in 0..tries {
        let tcp = bind_tcp()?;
        let port = tcp.local_addr()?.port();
        match bind_udp(SocketAddr::new(listen.ip(), port)) {
            Ok(udp) => return Ok((tcp, udp)),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The QUIC endpoint on `socket`; inside the server's runtime.
pub fn endpoint(
    socket: std::net::UdpSocket,
    cfg: quinn::ServerConfig,
) -> std::io::Result<quinn::Endpoint> {
    quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(cfg),
        socket,
        Arc::new(quinn::TokioRuntime),
    )
}

/// The next incoming QUIC connection, or never without an endpoint.
pub async fn next(ep: Option<&quinn::Endpoint>) -> Option<quinn::Incoming> {
    match ep {
        Some(ep) => ep.accept().await,
        None => std::future::pending().await,
    }
}

/// One incoming QUIC connection through the caps: a refused one is refused here and
/// audited; a taken one comes back as the task that serves it.
pub fn admit<H: Host>(
    incoming: quinn::Incoming,
    host: &Arc<H>,
    stop: watch::Receiver<bool>,
) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
    let peer = incoming.remote_address();
    let begun = (host.clock().now(), host.clock().wall());
    let counters = Arc::new(Counters::default());
    if let Err(why) = host.admit(peer.ip()) {
        incoming.refuse();
        let detail = Some(format!("{} reached", why.option()));
        let now = host.clock().now();
        host.write_audit(&counters.line(peer, begun, now, None, Outcome::Refused, detail));
        return None;
    }
    let host = Arc::clone(host);
    Some(async move {
        let (alpn, outcome, detail) = connection(incoming, &*host, &counters, stop).await;
        host.release(peer.ip());
        let now = host.clock().now();
        host.write_audit(&counters.line(peer, begun, now, alpn, outcome, detail));
    })
}

/// Copies the connection's UDP byte counts into `c` every [`METER_TICK`] and resolves
/// when `--max-transfer` is reached.
async fn meter(conn: &quinn::Connection, c: &Counters, cap: u64) {
    let mut tick = tokio::time::interval(METER_TICK);
    loop {
        tick.tick().await;
        read_stats(conn, c);
        if c.total() >= cap {
            return;
        }
    }
}

fn read_stats(conn: &quinn::Connection, c: &Counters) {
    let s = conn.stats();
    c.rx.store(s.udp_rx.bytes, Ordering::Relaxed);
    c.tx.store(s.udp_tx.bytes, Ordering::Relaxed);
}

/// Resolves when no byte has moved on the connection for `timeout` (as the TCP side's
/// watch, on the UDP counts [`meter`] keeps).
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

/// Serves one taken connection: the handshake within `--header-timeout`, then
/// requests until the client closes, a limit ends it or the server stops.
async fn connection<H: Host>(
    incoming: quinn::Incoming,
    host: &H,
    c: &Arc<Counters>,
    mut stop: watch::Receiver<bool>,
) -> (Option<String>, Outcome, Option<String>) {
    let local = incoming.local_ip();
    let handshake = async {
        let connecting = incoming.accept().map_err(|e| e.to_string())?;
        connecting.await.map_err(|e| e.to_string())
    };
    let conn = tokio::select! {
        r = tokio::time::timeout(host.limits().header_timeout, handshake) => match r {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return (None, Outcome::Tls, Some(e)),
            Err(_) => return (None, Outcome::Tls, Some("no handshake within --header-timeout".into())),
        },
        _ = stop.changed() => return (None, Outcome::Stopped, None),
    };
    let alpn = conn
        .handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|d| d.protocol)
        .map(|p| String::from_utf8_lossy(&p).into_owned());
    let limits = host.limits();
    let ctx = Arc::new(Ctx {
        c: Arc::clone(c),
        large_bytes: host.large_bytes(),
        public_name: host.public_name().map(str::to_string),
        local: SocketAddr::new(local.unwrap_or(conn.remote_address().ip()), host.port()),
    });
    let max_field = u64::try_from(limits.max_header_bytes).unwrap_or(u64::MAX);
    let serve = serve_requests(conn.clone(), ctx, max_field);
    let (outcome, detail) = tokio::select! {
        r = serve => ended(r, conn.close_reason()),
        () = meter(&conn, c, limits.max_transfer_bytes) => (Outcome::TransferCap, None),
        () = idle(c, limits.idle_timeout) => (Outcome::Idle, None),
        _ = stop.changed() => (Outcome::Stopped, None),
    };
    read_stats(&conn, c);
    conn.close(H3_NO_ERROR.into(), b"");
    (alpn, outcome, detail)
}

/// How a served connection's end reads: by QUIC's reason when the connection is
/// closed (a client that closed it, or went silent past the idle timeout), else by
/// HTTP/3's error.
fn ended(
    r: Result<(), String>,
    reason: Option<quinn::ConnectionError>,
) -> (Outcome, Option<String>) {
    use quinn::ConnectionError as E;
    match (r, reason) {
        (Ok(()), _) => (Outcome::Ok, None),
        (Err(_), Some(E::TimedOut)) => (Outcome::Idle, None),
        (Err(_), Some(E::ApplicationClosed(_) | E::ConnectionClosed(_) | E::LocallyClosed)) => {
            (Outcome::Ok, None)
        }
        (Err(e), _) => (Outcome::Error, Some(short(e))),
    }
}

/// The HTTP/3 connection's request loop; each request is a task of its own. Ends
/// when the client has no more requests (GOAWAY) or the connection fails.
async fn serve_requests(
    conn: quinn::Connection,
    ctx: Arc<Ctx>,
    max_field: u64,
) -> Result<(), String> {
    let mut h3 = h3::server::builder()
        .max_field_section_size(max_field)
        .build::<_, Bytes>(h3_quinn::Connection::new(conn))
        .await
        .map_err(|e| e.to_string())?;
    let mut requests = tokio::task::JoinSet::new();
    loop {
        match h3.accept().await {
            Ok(Some(resolver)) => {
                let ctx = Arc::clone(&ctx);
                requests.spawn(async move {
                    if let Ok((req, stream)) = resolver.resolve_request().await {
                        answer(req, stream, &ctx).await;
                    }
                });
                while requests.try_join_next().is_some() {}
            }
            // No more requests: the ones under way are answered before the connection
            // is let go (dropping the set would abort them and reset their streams
            // mid-answer, which a client that asked, then stopped asking, saw as
            // "Remote reset: 0x0"). Each ends when it is answered or its stream fails.
            Ok(None) => break,
            Err(e) if e.is_h3_no_error() => break,
            Err(e) => return Err(e.to_string()),
        }
    }
    while requests.join_next().await.is_some() {}
    Ok(())
}

fn short(mut s: String) -> String {
    s.truncate(200);
    s
}

/// What a request's answer needs of its connection.
struct Ctx {
    c: Arc<Counters>,
    large_bytes: u64,
    public_name: Option<String>,
    local: SocketAddr,
}

type Stream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

fn head(status: StatusCode, len: u64, typed: bool) -> Response<()> {
    let mut r = Response::new(());
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static(CACHE_CONTROL),
    );
    h.insert(header::CONTENT_LENGTH, header::HeaderValue::from(len));
    if typed {
        h.insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static(CONTENT_TYPE),
        );
    }
    r
}

/// Answers one request as the HTTP/2 side does (server.rs `answer`); a stream the
/// client resets just ends.
async fn answer(req: Request<()>, mut s: Stream, ctx: &Ctx) {
    ctx.c.requests.fetch_add(1, Ordering::Relaxed);
    let is_head = req.method() == http::Method::HEAD;
    let _ = match route(req.method(), req.uri().path()) {
        Route::Config => {
            let body = Bytes::from(NqConfig::for_origin(&ctx.origin(&req)).to_body());
            send_whole(&mut s, body, is_head, &ctx.c).await
        }
        Route::Small => send_whole(&mut s, Bytes::from_static(b"x"), is_head, &ctx.c).await,
        Route::Large => send_large(&mut s, ctx.large_bytes, is_head, &ctx.c).await,
        Route::Upload => {
            while let Ok(Some(mut d)) = s.recv_data().await {
                let n = d.remaining();
                d.advance(n);
                ctx.c.body_rx.fetch_add(n as u64, Ordering::Relaxed);
            }
            send_empty(&mut s, head(StatusCode::OK, 0, false)).await
        }
        Route::MethodNotAllowed(allow) => {
            let mut r = head(StatusCode::METHOD_NOT_ALLOWED, 0, false);
            r.headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static(allow));
            send_empty(&mut s, r).await
        }
        Route::NotFound => send_empty(&mut s, head(StatusCode::NOT_FOUND, 0, false)).await,
    };
}

async fn send_empty(s: &mut Stream, r: Response<()>) -> Result<(), h3::error::StreamError> {
    s.send_response(r).await?;
    s.finish().await
}

async fn send_whole(
    s: &mut Stream,
    body: Bytes,
    is_head: bool,
    c: &Counters,
) -> Result<(), h3::error::StreamError> {
    s.send_response(head(StatusCode::OK, body.len() as u64, true))
        .await?;
    if !is_head {
        c.body_tx.fetch_add(body.len() as u64, Ordering::Relaxed);
        s.send_data(body).await?;
    }
    s.finish().await
}

/// The large object, generated chunk by chunk from one buffer.
async fn send_large(
    s: &mut Stream,
    size: u64,
    is_head: bool,
    c: &Counters,
) -> Result<(), h3::error::StreamError> {
    s.send_response(head(StatusCode::OK, size, true)).await?;
    if !is_head {
        let chunk = Bytes::from(vec![b'x'; CHUNK_BYTES]);
        let mut left = size;
        while left > 0 {
            let n = left.min(CHUNK_BYTES as u64) as usize;
            s.send_data(chunk.slice(..n)).await?;
            c.body_tx.fetch_add(n as u64, Ordering::Relaxed);
            left -= n as u64;
        }
    }
    s.finish().await
}

impl Ctx {
    /// The origin the configuration's URLs carry, as the HTTP/2 side picks it.
    fn origin(&self, req: &Request<()>) -> String {
        if let Some(p) = &self.public_name {
            return p.clone();
        }
        req.uri()
            .authority()
            .and_then(|a| origin_from_authority(a.as_str()))
            .map_or_else(|| origin_of_addr(self.local), str::to_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alt_svc_names_the_port() {
        assert_eq!(alt_svc(8443), "h3=\":8443\"; ma=86400");
    }

    #[test]
    fn tcp_and_udp_share_a_port_and_a_taken_udp_port_is_given_up() {
        let lo: SocketAddr = ([127, 0, 0, 1], 0).into();
        let bind = || std::net::TcpListener::bind(lo);
        let (tcp, udp) = bind_pair(lo, bind).unwrap();
        let port = tcp.local_addr().unwrap().port();
        assert_eq!(udp.local_addr().unwrap().port(), port);
        // A fixed port whose UDP side is taken (by `udp`) fails, naming no other port.
        drop(tcp);
        let fixed: SocketAddr = ([127, 0, 0, 1], port).into();
        let err = bind_pair(fixed, || std::net::TcpListener::bind(fixed)).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    }

    #[test]
    fn a_connection_end_reads_by_quics_reason() {
        use quinn::ConnectionError as E;
        let err = || Err("H3 error".to_string());
        assert_eq!(ended(Ok(()), None), (Outcome::Ok, None));
        // A client that went silent: quinn's idle timeout, not a fault.
        assert_eq!(ended(err(), Some(E::TimedOut)), (Outcome::Idle, None));
        assert_eq!(ended(err(), Some(E::LocallyClosed)), (Outcome::Ok, None));
        assert_eq!(
            ended(err(), Some(E::Reset)),
            (Outcome::Error, Some("H3 error".into()))
        );
        assert_eq!(
            ended(err(), None),
            (Outcome::Error, Some("H3 error".into()))
        );
    }

    #[test]
    fn the_tcp_sides_certificate_makes_a_quic_configuration() {
        let cert = super::super::tls::self_signed(&["localhost".to_string()]).unwrap();
        let tls = super::super::tls::server_config(cert).unwrap();
        // The TCP side keeps its ALPN; QUIC's copy speaks h3 only.
        assert_eq!(
            tls.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        quic_config(&tls, Duration::from_secs(60)).unwrap();
    }
}
