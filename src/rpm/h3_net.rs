//! `netmeter rpm --http3` (experimental): the client's connections over HTTP/3 on QUIC
//! (quinn, h3). A connection's set-up is the QUIC handshake, timed as one round trip
//! (QUIC carries the TLS 1.3 handshake in its own first flight: no TCP connect before
//! it); the requests are the HTTP/2 path's (`rpm::net`): a GET of the small object,
//! bounded, and the endless download and upload counting their bytes. [`Link`] is a
//! connection's request handle of either protocol, so `rpm::client` drives both alike.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use hyper::client::conn::http2::SendRequest;

use super::config::HttpsUrl;
use super::net::{self, Dialer, NetError, ReqBody, STEP_TIMEOUT, Target};
use crate::clock::Clock;

/// The ALPN token of HTTP/3 (RFC 9114, section 3.1).
pub const ALPN_H3: &[u8] = b"h3";
/// The application error code of a deliberate close, H3_NO_ERROR (RFC 9114, section
/// 8.1): what the client's connections end with when the run ends.
pub const H3_NO_ERROR: u32 = 0x0100;
/// The longest the run's end waits for its QUIC connections' closes to go out.
pub const CLOSE_WAIT: Duration = Duration::from_secs(1);
/// The upload's chunk: zeros, shared by reference.
const UPLOAD_CHUNK: usize = 64 * 1024;
/// Bytes a connection may have sent and not yet had acknowledged: the upload counts
/// what it handed to QUIC, so this bounds how far that count runs ahead of the path.
const SEND_WINDOW_BYTES: u64 = 2 << 20;

/// HTTP/3's request handle on a QUIC connection.
pub type H3Send = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// A connection's request handle: HTTP/2 over TLS over TCP, or HTTP/3 over QUIC.
#[derive(Clone)]
pub enum Link {
    H2(SendRequest<ReqBody>),
    H3(H3Send),
}

/// The QUIC client settings from the HTTP/2 path's rustls configuration (the same
/// trust roots, `--cacert` or `--insecure`): ALPN `h3`, TLS 1.3 (QUIC's only version),
/// receive windows as large as the HTTP/2 connection's.
/// How often a QUIC connection with nothing to send pings its server. A server's
/// CONNECTION_CLOSE can be lost (on loopback, into a receive buffer the large object's
/// burst has filled), and a client only receiving would then wait for its own timeout
/// (10 s for a small GET); QUIC answers a packet for a closed connection with the
/// close again (RFC 9000, 10.2.1), so a ping learns of it within about this interval.
pub const KEEP_ALIVE: Duration = Duration::from_secs(1);

pub fn client_config(tls: &rustls::ClientConfig) -> Result<quinn::ClientConfig, NetError> {
    let mut tls = tls.clone();
    tls.alpn_protocols = vec![ALPN_H3.to_vec()];
    tls.enable_early_data = false;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(Arc::new(tls)).map_err(|e| {
        NetError::Tls {
            host: "-".into(),
            why: format!("no QUIC configuration: {e}"),
        }
    })?;
    let mut cfg = quinn::ClientConfig::new(Arc::new(crypto));
    let mut t = quinn::TransportConfig::default();
    t.stream_receive_window((8u32 << 20).into())
        .receive_window((16u32 << 20).into())
        .send_window(SEND_WINDOW_BYTES)
        .keep_alive_interval(Some(KEEP_ALIVE));
    cfg.transport_config(Arc::new(t));
    Ok(cfg)
}

/// An open connection of either protocol and how long it took to set up.
pub struct LinkConn {
    pub send: Link,
    /// The TCP connection set-up; over QUIC the handshake.
    pub tcp: Duration,
    /// The TLS handshake per round trip; over QUIC the handshake again (one round trip
    /// covers both).
    pub tls: Duration,
    /// HTTP/2: a duplicate of the TCP socket, for TCP_INFO.
    pub socket: Option<std::os::fd::OwnedFd>,
    /// HTTP/2: `TCP_NOTSENT_LOWAT` as the kernel reports it (`net::Conn`).
    pub notsent_lowat: Option<u32>,
    /// HTTP/2: the connection's `net::buffer_bound`, an upload's chunk (`net::Conn`).
    pub chunk: Option<Arc<AtomicUsize>>,
    /// HTTP/2 with `auto`: what the writer tells an upload's room (`net::Conn`).
    pub pace: Option<Arc<super::sendq::Pace>>,
}

/// Opens a connection as `dialer` says: HTTP/3 over QUIC when it has QUIC settings
/// (`--http3`), else HTTP/2 over TLS (`Dialer::open`).
pub async fn open_link(dialer: &Dialer) -> Result<LinkConn, NetError> {
    match &dialer.quic {
        Some(quic) => {
            let c = open(&dialer.target, quic, &dialer.clock).await?;
            dialer.quic_endpoints.add(&c.endpoint);
            Ok(LinkConn {
                send: Link::H3(c.send),
                tcp: c.handshake,
                tls: c.handshake,
                socket: None,
                notsent_lowat: None,
                chunk: None,
                pace: None,
            })
        }
        None => {
            let c = dialer.open().await?;
            Ok(LinkConn {
                send: Link::H2(c.send),
                tcp: c.tcp,
                tls: c.tls,
                socket: c.socket,
                notsent_lowat: c.notsent_lowat,
                chunk: Some(c.chunk),
                pace: c.pace,
            })
        }
    }
}

/// An open HTTP/3 connection and how long its QUIC handshake took.
pub struct Conn3 {
    pub send: H3Send,
    /// The QUIC handshake (transport and TLS 1.3 together): one round trip.
    pub handshake: Duration,
    /// The connection's endpoint (its UDP socket), to close it at the run's end.
    pub endpoint: quinn::Endpoint,
}

/// Opens a QUIC connection to `target` on a UDP socket of its own (each connection a
/// flow of its own, as each HTTP/2 connection is a TCP connection), then HTTP/3's
/// control streams; each step bounded by [`STEP_TIMEOUT`].
pub async fn open(
    target: &Target,
    cfg: &quinn::ClientConfig,
    clock: &Arc<dyn Clock>,
) -> Result<Conn3, NetError> {
    let (addr, host) = (target.addr, target.host.clone());
    let bind: std::net::SocketAddr = if addr.is_ipv6() {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    };
    let connect_err = |why: String| NetError::Connect { addr, why };
    let ep = quinn::Endpoint::client(bind).map_err(|e| connect_err(e.to_string()))?;
    let t0 = clock.now();
    let connecting = ep
        .connect_with(cfg.clone(), addr, &host)
        .map_err(|e| connect_err(e.to_string()))?;
    let conn = tokio::time::timeout(STEP_TIMEOUT, connecting)
        .await
        .map_err(|_| timeout(format!("the QUIC handshake with {host}")))?
        .map_err(|e| NetError::Tls {
            host: host.clone(),
            why: format!("QUIC: {e}"),
        })?;
    let handshake = clock.now().saturating_duration_since(t0);
    let alpn = conn
        .handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|d| d.protocol);
    if alpn.as_deref() != Some(ALPN_H3) {
        return Err(NetError::Http {
            host,
            why: "the server did not agree to HTTP/3 (ALPN h3)".into(),
        });
    }
    let mut builder = h3::client::builder();
    builder.max_field_section_size(64 * 1024);
    let built = builder.build::<_, _, Bytes>(h3_quinn::Connection::new(conn));
    let (mut driver, send) = tokio::time::timeout(STEP_TIMEOUT, built)
        .await
        .map_err(|_| timeout(format!("the HTTP/3 set-up with {host}")))?
        .map_err(|e| h3_err(&host, e))?;
    // The driver runs the connection's control streams until it closes; it owns the
    // endpoint so the UDP socket lives as long as the connection.
    let endpoint = ep.clone();
    tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        drop(ep);
    });
    Ok(Conn3 {
        send,
        handshake,
        endpoint,
    })
}

fn timeout(what: String) -> NetError {
    NetError::Timeout {
        what,
        after: STEP_TIMEOUT,
    }
}

fn h3_err(host: &str, e: impl std::fmt::Display) -> NetError {
    NetError::Http {
        host: host.to_string(),
        why: format!("HTTP/3: {e}"),
    }
}

type Stream = h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// Sends a bodiless request and checks the answer's status.
async fn send_get(s: &mut H3Send, url: &HttpsUrl) -> Result<Stream, NetError> {
    let mut stream = s
        .send_request(net::request(http::Method::GET, url, ()))
        .await
        .map_err(|e| h3_err(&url.host, e))?;
    stream.finish().await.map_err(|e| h3_err(&url.host, e))?;
    let resp = stream
        .recv_response()
        .await
        .map_err(|e| h3_err(&url.host, e))?;
    if !resp.status().is_success() {
        return Err(NetError::Status {
            url: url.url.clone(),
            status: resp.status().as_u16(),
        });
    }
    Ok(stream)
}

/// GETs `url` whole over HTTP/3, at most `max` bytes, within [`STEP_TIMEOUT`].
pub async fn get_small(s: &mut H3Send, url: &HttpsUrl, max: usize) -> Result<Bytes, NetError> {
    let work = async {
        let mut stream = send_get(s, url).await?;
        let mut out = BytesMut::new();
        while let Some(chunk) = stream.recv_data().await.map_err(|e| h3_err(&url.host, e))? {
            if out.len() + chunk.remaining() > max {
                return Err(NetError::TooLarge {
                    url: url.url.clone(),
                    max,
                });
            }
            out.put(chunk);
        }
        Ok(out.freeze())
    };
    tokio::time::timeout(STEP_TIMEOUT, work)
        .await
        .map_err(|_| timeout(format!("the GET of {}", url.url)))?
}

/// The endless download over HTTP/3, as `net::download`.
pub async fn download(
    mut s: H3Send,
    url: HttpsUrl,
    counter: Arc<AtomicU64>,
) -> Result<(), NetError> {
    loop {
        let mut stream = send_get(&mut s, &url).await?;
        let mut got = 0u64;
        while let Some(mut chunk) = stream.recv_data().await.map_err(|e| h3_err(&url.host, e))? {
            let n = chunk.remaining();
            chunk.advance(n);
            got += n as u64;
            counter.fetch_add(n as u64, Ordering::Relaxed);
        }
        if got == 0 {
            return Err(NetError::Http {
                host: url.host.clone(),
                why: format!("{} answered with no bytes", url.url),
            });
        }
    }
}

/// The endless upload over HTTP/3: a POST whose body never ends, each chunk counted
/// as QUIC takes it (at most `SEND_WINDOW_BYTES` ahead of what the server
/// acknowledged), until the stream fails or the task is dropped.
pub async fn upload(mut s: H3Send, url: HttpsUrl, counter: Arc<AtomicU64>) -> Result<(), NetError> {
    let mut req = net::request(http::Method::POST, &url, ());
    req.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/octet-stream"),
    );
    let mut stream = s
        .send_request(req)
        .await
        .map_err(|e| h3_err(&url.host, e))?;
    let chunk = Bytes::from(vec![0u8; UPLOAD_CHUNK]);
    loop {
        stream
            .send_data(chunk.clone())
            .await
            .map_err(|e| h3_err(&url.host, e))?;
        counter.fetch_add(chunk.len() as u64, Ordering::Relaxed);
    }
}

impl Link {
    /// GETs a small object (or the configuration) whole, at most `max` bytes.
    pub async fn get_small(&mut self, url: &HttpsUrl, max: usize) -> Result<Bytes, NetError> {
        match self {
            Link::H2(s) => net::get_small(s, url, max).await,
            Link::H3(s) => get_small(s, url, max).await,
        }
    }

    /// The load-generating download on this connection.
    pub async fn download(self, url: HttpsUrl, counter: Arc<AtomicU64>) -> Result<(), NetError> {
        match self {
            Link::H2(s) => net::download(s, url, counter).await,
            Link::H3(s) => download(s, url, counter).await,
        }
    }

    /// The load-generating upload on this connection; over HTTP/2 in chunks of `chunk`
    /// (`LinkConn::chunk`; without it, `net::BUFFER_MAX_BYTES`).
    pub async fn upload(
        self,
        url: HttpsUrl,
        counter: Arc<AtomicU64>,
        chunk: Option<Arc<AtomicUsize>>,
        room: Option<super::sendq::Room>,
    ) -> Result<(), NetError> {
        match self {
            Link::H2(s) => {
                let chunk =
                    chunk.unwrap_or_else(|| Arc::new(AtomicUsize::new(net::BUFFER_MAX_BYTES)));
                net::upload(s, url, counter, chunk, room).await
            }
            Link::H3(s) => upload(s, url, counter).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quic_settings_come_from_the_tls_ones() {
        let tls = net::tls_config(true, None).unwrap();
        client_config(&tls).unwrap();
        // The HTTP/2 connections keep their ALPN.
        assert_eq!(tls.alpn_protocols, vec![b"h2".to_vec()]);
    }
}
