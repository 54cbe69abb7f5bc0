//! The responsiveness client's network side: TLS settings, one HTTP/2 connection over
//! TLS with its set-up timed (the foreign probe's TCP and TLS parts), a GET of the small
//! object timed and bounded, and the load-generating transfers (a GET of the large
//! object, a POST of an endless body) counting their bytes. Everything here runs on
//! the tokio runtime `rpm::client` creates; the decisions are `rpm::algo`'s.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::{Body, Frame, Incoming};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::config::HttpsUrl;
use crate::clock::Clock;

/// The request body type of every request: empty for a GET, endless for the upload.
pub type ReqBody = BoxBody<Bytes, Infallible>;

/// The most a small object's answer may hold: it is 1 byte; a server sending more is
/// refused rather than read without end.
pub const MAX_SMALL_BYTES: usize = 64 * 1024;
/// The longest a `--cacert` file may be.
pub const MAX_CACERT_BYTES: u64 = 1024 * 1024;
/// The longest a configuration download, a connection set-up or a small GET may take.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// The least and the most TLS records rustls may hold for a connection that the
/// socket has not taken yet (`set_buffer_limit`; rustls's default is 64 KiB), and the
/// least and the most a load's body hands HTTP/2 at once: between them, half a
/// congestion window of the connection ([`buffer_bound`]). A self probe's request
/// waits behind those records and behind the DATA frame h2 is writing (h2 puts a new
/// stream's HEADERS ahead of every frame still queued, not of the one under way), and
/// when the socket turns writable the records go into the kernel at once, past
/// `TCP_NOTSENT_LOWAT`. On the truth bed (a tenth of 20 Mbit/s a connection) 4 KiB of
/// each took a self probe from 280-320 ms to 175-200 ms, a whole window (7 to 11 kB)
/// to 240-250 ms, at the same goodput; at 1 Gbit/s a fixed 4 KiB cut a debug build's
/// load from 0.8 to 0.3 Gbit/s, which half a window does not (docs/rpm.md, "Where a
/// self probe's time goes").
pub const BUFFER_MIN_BYTES: usize = 4 * 1024;
/// See [`BUFFER_MIN_BYTES`]: rustls's own default, and four of h2's 16 KiB frames.
pub const BUFFER_MAX_BYTES: usize = 64 * 1024;
/// Writes between two readings of a connection's congestion window (TCP_INFO).
const BOUND_EVERY_WRITES: u32 = 32;
/// How much each TCP connection may hold unsent in front of a probe (`--notsent-lowat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendLimit {
    /// `auto` (the default): the kernel's unsent bytes (`TCP_NOTSENT_LOWAT`, every write
    /// with `MSG_EOR` so that the mark holds), rustls's records and the body's chunks
    /// each held to [`sendq::AHEAD`](super::sendq::AHEAD) of the connection's delivery
    /// rate (`rpm::sendq`).
    Auto,
    /// BYTES: `TCP_NOTSENT_LOWAT` fixed at that (16384, the default before `auto`, is
    /// the value Cloudflare publishes for HTTP/2 senders, "Optimizing HTTP/2
    /// prioritization with BBR and tcp_notsent_lowat", 2018; docs/rpm.md,
    /// "TCP_NOTSENT_LOWAT: the client's own queue"),
    /// rustls's records and the body's chunks at half the congestion window
    /// ([`buffer_bound`]).
    Fixed(u32),
    /// 0: the kernel's default (no `TCP_NOTSENT_LOWAT`); rustls and the chunks as with
    /// a fixed mark.
    Kernel,
}

impl SendLimit {
    /// Its name in `-J` (`send_limit`).
    pub fn name(self) -> &'static str {
        match self {
            SendLimit::Auto => "auto",
            SendLimit::Fixed(_) => "fixed",
            SendLimit::Kernel => "kernel",
        }
    }
}

/// Why a connection or a request failed: one sentence.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("cannot read the CA file {path}: {why}")]
    CaFile { path: String, why: String },
    #[error("cannot resolve {0}")]
    Resolve(String),
    #[error("cannot connect to {addr}: {why}")]
    Connect { addr: SocketAddr, why: String },
    #[error("the TLS handshake with {host} failed: {why}")]
    Tls { host: String, why: String },
    #[error("{host} did not agree to HTTP/2 (ALPN h2)")]
    NoH2 { host: String },
    #[error("the HTTP/2 exchange with {host} failed: {why}")]
    Http { host: String, why: String },
    #[error("{url} answered with status {status}")]
    Status { url: String, status: u16 },
    #[error("{url} sent more than {max} bytes where a small object was expected")]
    TooLarge { url: String, max: usize },
    #[error("{what} took more than {} s", .after.as_secs())]
    Timeout { what: String, after: Duration },
}

/// Where the client connects and what it calls the server.
#[derive(Debug, Clone)]
pub struct Target {
    /// The address every connection goes to (resolved once).
    pub addr: SocketAddr,
    /// The TLS server name and the `:authority` (the URLs' host).
    pub host: String,
}

impl Target {
    /// Resolves `url`'s host, or `endpoint` (the configuration's `test_endpoint`)
    /// instead, keeping the URL's host as the TLS name.
    pub async fn resolve(url: &HttpsUrl, endpoint: Option<&str>) -> Result<Target, NetError> {
        let host = endpoint.unwrap_or(&url.host);
        let authority = if host.contains(':') {
            format!("[{host}]:{}", url.port)
        } else {
            format!("{host}:{}", url.port)
        };
        let found =
            tokio::time::timeout(STEP_TIMEOUT, tokio::net::lookup_host(authority.clone())).await;
        let addr = match found {
            Ok(Ok(mut addrs)) => addrs.next(),
            _ => None,
        };
        let addr = addr.ok_or(NetError::Resolve(authority))?;
        Ok(Target {
            addr,
            host: url.host.clone(),
        })
    }
}

/// The TLS settings: ALPN `h2`; the default trust roots (webpki-roots) and a
/// `--cacert` file's certificates, or with `insecure` any certificate.
pub fn tls_config(insecure: bool, cacert: Option<&Path>) -> Result<Arc<ClientConfig>, NetError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| NetError::Tls {
            host: "-".into(),
            why: e.to_string(),
        })?;
    let mut cfg = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        if let Some(path) = cacert {
            for cert in read_certs(path)? {
                roots.add(cert).map_err(|e| NetError::CaFile {
                    path: path.display().to_string(),
                    why: e.to_string(),
                })?;
            }
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(cfg))
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, NetError> {
    use std::io::Read;
    let bad = |why: String| NetError::CaFile {
        path: path.display().to_string(),
        why,
    };
    let f = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let mut pem = Vec::new();
    f.take(MAX_CACERT_BYTES + 1)
        .read_to_end(&mut pem)
        .map_err(|e| bad(e.to_string()))?;
    if pem.len() as u64 > MAX_CACERT_BYTES {
        return Err(bad(format!("it is over {MAX_CACERT_BYTES} bytes")));
    }
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| bad(format!("{e:?}")))?;
    if certs.is_empty() {
        return Err(bad("it holds no PEM certificate".into()));
    }
    Ok(certs)
}

/// `--insecure`: any certificate is taken; the signatures are still checked so the
/// handshake is a real one (its round trips are what the probe times).
#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// An open HTTP/2 connection and how long it took to set up.
pub struct Conn {
    pub send: SendRequest<ReqBody>,
    /// The TCP connection set-up.
    pub tcp: Duration,
    /// The TLS handshake per round trip: TLS 1.3 takes one, 1.2 two (the draft's
    /// normalisation, "Measuring Responsiveness").
    pub tls: Duration,
    /// A duplicate of the TCP socket's descriptor, for TCP_INFO (the upload counts what
    /// the peer acknowledged); it keeps the socket open until dropped.
    pub socket: Option<std::os::fd::OwnedFd>,
    /// `TCP_NOTSENT_LOWAT` as the kernel reports it after netmeter set it to a fixed
    /// value (getsockopt); `None` when it was not (`auto` sets it as the connection
    /// goes) or the kernel did not take it.
    pub notsent_lowat: Option<u32>,
    /// The connection's [`buffer_bound`], which an upload on it cuts its chunks to.
    pub chunk: Arc<AtomicUsize>,
    /// With `auto`: what the connection's writer tells a load body's
    /// [`super::sendq::Room`], which an upload on it makes from `socket`.
    pub pace: Option<Arc<super::sendq::Pace>>,
}

/// How each connection is set up.
#[derive(Debug, Clone)]
pub struct Dialer {
    pub target: Target,
    pub tls: Arc<ClientConfig>,
    /// `-C`: the TCP congestion control of every connection.
    pub congestion: Option<String>,
    /// What every TCP connection may hold unsent (`--notsent-lowat`).
    pub send_limit: SendLimit,
    pub clock: Arc<dyn Clock>,
    /// `--http3` (experimental): connections are QUIC with these settings, opened by
    /// `rpm::h3_net::open_link` instead of [`Dialer::open`].
    pub quic: Option<Arc<quinn::ClientConfig>>,
    /// The QUIC endpoints of the run's open connections, closed at its end.
    pub quic_endpoints: QuicEndpoints,
}

/// The QUIC endpoints (one per connection) whose connections may still be open, so that
/// the run's end, however it comes (the last phase, an error, Ctrl-C), closes them
/// with CONNECTION_CLOSE. Without it the runtime's shutdown drops the endpoints' tasks
/// before any close is sent, and the server holds each connection's cap slot until its
/// idle timeout. Endpoints whose connections have ended are let go as new ones come,
/// so the list holds no more than the connections open.
#[derive(Debug, Clone, Default)]
pub struct QuicEndpoints(Arc<std::sync::Mutex<Vec<quinn::Endpoint>>>);

impl QuicEndpoints {
    /// Remembers `ep`, whose connection is open.
    pub fn add(&self, ep: &quinn::Endpoint) {
        // A poisoned lock only means another task panicked while pushing: the list is
        // still a list of endpoints.
        let mut eps = self.0.lock().unwrap_or_else(|e| e.into_inner());
        eps.retain(|e| e.open_connections() > 0);
        eps.push(ep.clone());
    }

    /// Closes every connection still open with `code` and waits, at most `within`, for
    /// the endpoints to have sent their closes (quinn's `wait_idle`).
    pub async fn close_all(&self, code: u32, within: Duration) {
        let eps = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        for ep in &eps {
            ep.close(code.into(), b"");
        }
        let _ = tokio::time::timeout(within, async {
            for ep in &eps {
                ep.wait_idle().await;
            }
        })
        .await;
    }
}

impl Dialer {
    /// Opens a connection: TCP, TLS with ALPN h2, the HTTP/2 preface; each step bounded.
    pub async fn open(&self) -> Result<Conn, NetError> {
        let addr = self.target.addr;
        let host = self.target.host.clone();
        let t0 = self.clock.now();
        let tcp = tokio::time::timeout(STEP_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| timeout(format!("connecting to {addr}")))?
            .map_err(|e| NetError::Connect {
                addr,
                why: e.to_string(),
            })?;
        let t1 = self.clock.now();
        let _ = tcp.set_nodelay(true);
        let socket = {
            use std::os::fd::AsFd;
            tcp.as_fd().try_clone_to_owned().ok()
        };
        if let Some(cc) = &self.congestion {
            use std::os::fd::AsFd;
            crate::sock::set_congestion(tcp.as_fd(), cc).map_err(|e| NetError::Connect {
                addr,
                why: format!(
                    "cannot set the congestion control {cc}: {}",
                    crate::sock::congestion_refused(&e)
                ),
            })?;
        }
        let notsent_lowat = match self.send_limit {
            SendLimit::Fixed(v) => set_notsent_lowat(&tcp, v),
            SendLimit::Auto | SendLimit::Kernel => None,
        };
        let name = ServerName::try_from(host.clone()).map_err(|e| NetError::Tls {
            host: host.clone(),
            why: e.to_string(),
        })?;
        let chunk = Arc::new(AtomicUsize::new(BUFFER_MIN_BYTES));
        let mut pace = None;
        let (send, tls, round_trips) = if self.send_limit == SendLimit::Auto {
            let told = Arc::new(super::sendq::Pace::default());
            pace = Some(Arc::clone(&told));
            let tcp = super::sendq::EorTcp::new(tcp);
            let bounded = |tls, chunk| Bounded::by_rate(tls, chunk).with_pace(Some(told));
            self.tls_h2(name, tcp, &chunk, bounded).await?
        } else {
            self.tls_h2(name, tcp, &chunk, Bounded::new).await?
        };
        Ok(Conn {
            send,
            tcp: t1.saturating_duration_since(t0),
            tls: tls / round_trips,
            socket,
            notsent_lowat,
            chunk,
            pace,
        })
    }

    /// The TLS handshake (timed) and HTTP/2's over `tcp`, the TLS stream bounded by
    /// `bounded`: the request sender, the handshake's time and its round trips.
    async fn tls_h2<IO>(
        &self,
        name: ServerName<'static>,
        tcp: IO,
        chunk: &Arc<AtomicUsize>,
        bounded: impl FnOnce(
            tokio_rustls::client::TlsStream<IO>,
            Arc<AtomicUsize>,
        ) -> Bounded<tokio_rustls::client::TlsStream<IO>>,
    ) -> Result<(SendRequest<ReqBody>, Duration, u32), NetError>
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
        tokio_rustls::client::TlsStream<IO>: TlsOverTcp,
    {
        let host = self.target.host.clone();
        let t1 = self.clock.now();
        let connector = tokio_rustls::TlsConnector::from(self.tls.clone());
        let tls = tokio::time::timeout(STEP_TIMEOUT, connector.connect(name, tcp))
            .await
            .map_err(|_| timeout(format!("the TLS handshake with {host}")))?
            .map_err(|e| NetError::Tls {
                host: host.clone(),
                why: e.to_string(),
            })?;
        let t2 = self.clock.now();
        let session = tls.get_ref().1;
        if session.alpn_protocol() != Some(b"h2".as_slice()) {
            return Err(NetError::NoH2 { host });
        }
        let round_trips = match session.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_2) => 2,
            _ => 1,
        };
        let mut builder = hyper::client::conn::http2::Builder::new(TokioExecutor::new());
        builder
            .initial_stream_window_size(8 << 20)
            .initial_connection_window_size(16 << 20)
            .max_header_list_size(64 * 1024);
        let io = TokioIo::new(bounded(tls, chunk.clone()));
        let (send, conn) = tokio::time::timeout(STEP_TIMEOUT, builder.handshake(io))
            .await
            .map_err(|_| timeout(format!("the HTTP/2 handshake with {host}")))?
            .map_err(|e| http_err(&host, e))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok((send, t2.saturating_duration_since(t1), round_trips))
    }
}

/// Sets `TCP_NOTSENT_LOWAT` to `bytes` and reads it back: the kernel's value, or `None`
/// when it refused it (a kernel before 3.12); the connection goes on either way, and
/// `-J` says which.
pub fn set_notsent_lowat(tcp: &TcpStream, bytes: u32) -> Option<u32> {
    let sock = socket2::SockRef::from(tcp);
    sock.set_tcp_notsent_lowat(bytes).ok()?;
    sock.tcp_notsent_lowat().ok()
}

/// How much rustls may hold unsent, and how large a body's chunks are, on a
/// connection whose congestion window is `cwnd_bytes`: half a window, so that what
/// waits above the socket in front of a probe drains in about half of the
/// connection's round trip, within [`BUFFER_MIN_BYTES`] and [`BUFFER_MAX_BYTES`].
pub fn buffer_bound(cwnd_bytes: u64) -> usize {
    usize::try_from(cwnd_bytes / 2)
        .unwrap_or(usize::MAX)
        .clamp(BUFFER_MIN_BYTES, BUFFER_MAX_BYTES)
}

/// A TLS stream over a TCP socket, as [`Bounded`] needs it: the socket, for its
/// congestion window, and rustls's buffer limit.
pub trait TlsOverTcp {
    fn tcp(&self) -> std::os::fd::BorrowedFd<'_>;
    fn set_tls_buffer(&mut self, bytes: usize);
    /// rustls holds records the socket has not taken yet.
    fn tls_pending(&self) -> bool;
}

impl TlsOverTcp for tokio_rustls::client::TlsStream<super::sendq::EorTcp> {
    fn tcp(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.get_ref().0.get_ref().as_fd()
    }

    fn set_tls_buffer(&mut self, bytes: usize) {
        self.get_mut().1.set_buffer_limit(Some(bytes));
    }

    fn tls_pending(&self) -> bool {
        self.get_ref().1.wants_write()
    }
}

impl TlsOverTcp for tokio_rustls::client::TlsStream<TcpStream> {
    fn tcp(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.get_ref().0.as_fd()
    }

    fn set_tls_buffer(&mut self, bytes: usize) {
        self.get_mut().1.set_buffer_limit(Some(bytes));
    }

    fn tls_pending(&self) -> bool {
        self.get_ref().1.wants_write()
    }
}

/// Every HTTP/2 connection of `netmeter rpm` and `netmeter rpm-server`: the TLS stream
/// with rustls's unsent records held to [`buffer_bound`] of the connection's
/// congestion window (half of it), read every `BOUND_EVERY_WRITES` writes, and that bound shared
/// (`chunk`) with the load body on the connection, which cuts its chunks to it.
pub struct Bounded<S> {
    inner: S,
    chunk: Arc<AtomicUsize>,
    writes: u32,
    /// Bounded by time at the connection's delivery rate (`rpm::sendq`), the kernel's
    /// `TCP_NOTSENT_LOWAT` too, instead of by half the congestion window.
    by_rate: Option<(super::sendq::SendBound, usize)>,
    /// Told of every write, for the load bodies that pace on it (`sendq::Room`).
    pace: Option<Arc<super::sendq::Pace>>,
}

impl<S: TlsOverTcp> Bounded<S> {
    pub fn new(mut inner: S, chunk: Arc<AtomicUsize>) -> Bounded<S> {
        inner.set_tls_buffer(BUFFER_MIN_BYTES);
        chunk.store(BUFFER_MIN_BYTES, Ordering::Relaxed);
        Bounded {
            inner,
            chunk,
            writes: 0,
            by_rate: None,
            pace: None,
        }
    }

    /// Tells `pace` of every write.
    pub fn with_pace(mut self, pace: Option<Arc<super::sendq::Pace>>) -> Bounded<S> {
        self.pace = pace;
        self
    }

    fn wrote(&self, r: &Poll<std::io::Result<usize>>) {
        if let (Some(p), Poll::Ready(Ok(n))) = (&self.pace, r) {
            p.on_write(*n);
        }
    }

    /// As [`Bounded::new`], bounded by time at the connection's delivery rate, with the
    /// kernel's `TCP_NOTSENT_LOWAT` set to the same bound (`rpm::sendq`).
    pub fn by_rate(inner: S, chunk: Arc<AtomicUsize>) -> Bounded<S> {
        let mut b = Bounded::new(inner, chunk);
        let first = super::sendq::SendBound::default();
        let bound = first.bound();
        b.inner.set_tls_buffer(bound);
        b.chunk.store(bound, Ordering::Relaxed);
        b.by_rate = Some((first, 0));
        b
    }

    fn follow_window(&mut self) {
        self.writes = self.writes.wrapping_add(1);
        if self.writes % BOUND_EVERY_WRITES != 1 {
            return;
        }
        if let Some(info) = crate::sock::tcp_info(self.inner.tcp()) {
            if let Some((rate, lowat)) = &mut self.by_rate {
                let bound = rate.on_sample(info.delivery_rate, info.delivery_rate_app_limited);
                let changed = std::mem::replace(lowat, bound) != bound;
                if changed {
                    let fd = self.inner.tcp();
                    let _ = socket2::SockRef::from(&fd)
                        .set_tcp_notsent_lowat(u32::try_from(bound).unwrap_or(u32::MAX));
                }
                self.inner.set_tls_buffer(bound);
                let mss = usize::try_from(info.snd_mss).unwrap_or(0);
                self.chunk
                    .store(super::sendq::chunk_for(bound, mss), Ordering::Relaxed);
                return;
            }
            let bound = buffer_bound(info.snd_cwnd_bytes());
            self.inner.set_tls_buffer(bound);
            self.chunk.store(bound, Ordering::Relaxed);
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Bounded<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: TlsOverTcp + AsyncWrite + Unpin> Bounded<S> {
    /// Bounded by rate: a write is taken only once rustls has handed every record of
    /// the one before to the socket. Else rustls, at its buffer limit, takes only the
    /// part of a frame that fits, and the frame goes out as two records: one write of
    /// a chunk's 1448 bytes became 1470 (two segments, the second of 22 bytes) in 86 %
    /// of the writes seen with strace, once a small control frame had put the records
    /// out of step.
    fn poll_whole_records(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.by_rate.is_some() && self.inner.tls_pending() {
            return Pin::new(&mut self.inner).poll_flush(cx);
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: TlsOverTcp + AsyncWrite + Unpin> AsyncWrite for Bounded<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.follow_window();
        ready!(self.as_mut().poll_whole_records(cx))?;
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.wrote(&r);
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.follow_window();
        ready!(self.as_mut().poll_whole_records(cx))?;
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.wrote(&r);
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

fn timeout(what: String) -> NetError {
    NetError::Timeout {
        what,
        after: STEP_TIMEOUT,
    }
}

fn http_err(host: &str, e: hyper::Error) -> NetError {
    NetError::Http {
        host: host.to_string(),
        why: e.to_string(),
    }
}

/// A request as every netmeter rpm request is made, over HTTP/2 or HTTP/3 (`h3_net`
/// passes `()` as its body): the URL, `Accept-Encoding: identity`, netmeter's agent.
pub(super) fn request<B>(method: http::Method, url: &HttpsUrl, body: B) -> http::Request<B> {
    let mut req = http::Request::new(body);
    *req.method_mut() = method;
    // The URL was checked by HttpsUrl::parse; a URI the HTTP stack still refuses is
    // sent as "/". (HTTP/3 needs the scheme and authority the full URL carries.)
    *req.uri_mut() = url
        .url
        .parse()
        .unwrap_or_else(|_| http::Uri::from_static("/"));
    let h = req.headers_mut();
    h.insert(
        http::header::ACCEPT_ENCODING,
        http::HeaderValue::from_static("identity"),
    );
    h.insert(
        http::header::USER_AGENT,
        http::HeaderValue::from_static(concat!("netmeter/", env!("CARGO_PKG_VERSION"))),
    );
    req
}

fn empty() -> ReqBody {
    http_body_util::Empty::new().boxed()
}

/// Sends `req` and checks the status.
async fn send(
    s: &mut SendRequest<ReqBody>,
    req: http::Request<ReqBody>,
    url: &HttpsUrl,
) -> Result<http::Response<Incoming>, NetError> {
    s.ready().await.map_err(|e| http_err(&url.host, e))?;
    let resp = s
        .send_request(req)
        .await
        .map_err(|e| http_err(&url.host, e))?;
    if !resp.status().is_success() {
        return Err(NetError::Status {
            url: url.url.clone(),
            status: resp.status().as_u16(),
        });
    }
    Ok(resp)
}

/// GETs `url` (a small object or the configuration) whole, at most `max` bytes,
/// within [`STEP_TIMEOUT`].
pub async fn get_small(
    s: &mut SendRequest<ReqBody>,
    url: &HttpsUrl,
    max: usize,
) -> Result<Bytes, NetError> {
    let work = async {
        let resp = send(s, request(http::Method::GET, url, empty()), url).await?;
        let body = http_body_util::Limited::new(resp.into_body(), max);
        match body.collect().await {
            Ok(c) => Ok(c.to_bytes()),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(NetError::TooLarge {
                url: url.url.clone(),
                max,
            }),
            Err(e) => Err(NetError::Http {
                host: url.host.clone(),
                why: e.to_string(),
            }),
        }
    };
    tokio::time::timeout(STEP_TIMEOUT, work)
        .await
        .map_err(|_| timeout(format!("the GET of {}", url.url)))?
}

/// A load-generating download: GETs the large object and counts its bytes into
/// `counter`, again on the same connection when it ends (the draft's load is
/// endless), until a request fails or the task is dropped.
pub async fn download(
    mut s: SendRequest<ReqBody>,
    url: HttpsUrl,
    counter: Arc<AtomicU64>,
) -> Result<(), NetError> {
    loop {
        let resp = send(&mut s, request(http::Method::GET, &url, empty()), &url).await?;
        let mut body = resp.into_body();
        let mut got = 0u64;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| http_err(&url.host, e))?;
            if let Some(d) = frame.data_ref() {
                got += d.len() as u64;
                counter.fetch_add(d.len() as u64, Ordering::Relaxed);
            }
        }
        if got == 0 {
            // An empty large object would loop without load: the server is not usable.
            return Err(NetError::Http {
                host: url.host.clone(),
                why: format!("{} answered with no bytes", url.url),
            });
        }
    }
}

/// A load-generating upload: POSTs an endless body, counting what HTTP/2 takes of it
/// into `counter`, until the server answers, fails, or the task is dropped.
pub async fn upload(
    mut s: SendRequest<ReqBody>,
    url: HttpsUrl,
    counter: Arc<AtomicU64>,
    chunk: Arc<AtomicUsize>,
    room: Option<super::sendq::Room>,
) -> Result<(), NetError> {
    let body = Endless::new(counter, chunk, room).boxed();
    let mut req = request(http::Method::POST, &url, body);
    req.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/octet-stream"),
    );
    let resp = send(&mut s, req, &url).await?;
    // The sink answered: read its (small) answer and end.
    let _ = http_body_util::Limited::new(resp.into_body(), MAX_SMALL_BYTES)
        .collect()
        .await;
    Ok(())
}

/// The upload's body: zeros for ever, in chunks of the connection's current
/// [`buffer_bound`] (cut from one shared buffer), each counted as HTTP/2 takes it;
/// with a [`super::sendq::Room`], each made when the socket can take it.
struct Endless {
    zeros: Bytes,
    chunk: Arc<AtomicUsize>,
    counter: Arc<AtomicU64>,
    room: Option<super::sendq::Room>,
}

impl Endless {
    fn new(
        counter: Arc<AtomicU64>,
        chunk: Arc<AtomicUsize>,
        room: Option<super::sendq::Room>,
    ) -> Endless {
        Endless {
            zeros: Bytes::from(vec![0u8; BUFFER_MAX_BYTES]),
            chunk,
            counter,
            room,
        }
    }
}

impl Body for Endless {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let me = self.get_mut();
        if let Some(room) = &mut me.room {
            ready!(room.poll_next(cx));
        }
        let n = me.chunk.load(Ordering::Relaxed).clamp(1, me.zeros.len());
        if let Some(room) = &mut me.room {
            room.made(n);
        }
        me.counter.fetch_add(n as u64, Ordering::Relaxed);
        Poll::Ready(Some(Ok(Frame::data(me.zeros.slice(..n)))))
    }

    fn is_end_stream(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_half_a_congestion_window_within_its_limits() {
        assert_eq!(buffer_bound(0), BUFFER_MIN_BYTES);
        assert_eq!(buffer_bound(5 * 1448), BUFFER_MIN_BYTES);
        // The truth bed: five to eight segments a connection.
        assert_eq!(buffer_bound(8 * 1448), 4 * 1448);
        assert_eq!(buffer_bound(10 << 20), BUFFER_MAX_BYTES);
        assert_eq!(buffer_bound(u64::MAX), BUFFER_MAX_BYTES);
    }

    #[test]
    fn the_upload_follows_the_connections_bound() {
        // h2 writes a frame of up to 16 KiB of a larger chunk before a self probe's
        // HEADERS; chunks of the connection's bound keep that frame as small.
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let counter = Arc::new(AtomicU64::new(0));
        let chunk = Arc::new(AtomicUsize::new(BUFFER_MIN_BYTES));
        let mut body = Endless::new(counter.clone(), chunk.clone(), None);
        let mut next = || {
            let f = rt.block_on(body.frame()).unwrap().unwrap();
            f.into_data().unwrap().len()
        };
        assert_eq!(next(), BUFFER_MIN_BYTES);
        chunk.store(7240, Ordering::Relaxed);
        assert_eq!(next(), 7240);
        chunk.store(1 << 30, Ordering::Relaxed);
        assert_eq!(next(), BUFFER_MAX_BYTES);
        assert_eq!(
            counter.load(Ordering::Relaxed),
            (BUFFER_MIN_BYTES + 7240 + BUFFER_MAX_BYTES) as u64
        );
    }

    /// A TLS server on a loopback port that reads 3 bytes from its first client and
    /// gives them back from its task.
    async fn tls_server_reading_three_bytes() -> (SocketAddr, tokio::task::JoinHandle<Vec<u8>>) {
        use tokio::io::AsyncReadExt;
        let cert = crate::rpm::tls::self_signed(&["localhost".to_string()]).unwrap();
        let acceptor =
            tokio_rustls::TlsAcceptor::from(crate::rpm::tls::server_config(cert).unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut tls = acceptor.accept(tcp).await.unwrap();
            let mut got = vec![0u8; 3];
            tls.read_exact(&mut got).await.unwrap();
            got
        });
        (addr, server)
    }

    /// The client's TLS handshake (any certificate taken) over `io`.
    async fn tls_client<IO: AsyncRead + AsyncWrite + Unpin>(
        io: IO,
    ) -> tokio_rustls::client::TlsStream<IO> {
        let connector = tokio_rustls::TlsConnector::from(tls_config(true, None).unwrap());
        let name = ServerName::try_from("localhost").unwrap();
        connector.connect(name, io).await.unwrap()
    }

    #[test]
    fn a_bounded_tls_stream_follows_the_congestion_window() {
        use tokio::io::AsyncWriteExt;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (addr, server) = tls_server_reading_three_bytes().await;
            let tcp = TcpStream::connect(addr).await.unwrap();
            let tls = tls_client(tcp).await;
            let chunk = Arc::new(AtomicUsize::new(0));
            let mut bounded = Bounded::new(tls, chunk.clone());
            // Before the first write: the least.
            assert_eq!(chunk.load(Ordering::Relaxed), BUFFER_MIN_BYTES);
            bounded.write_all(b"abc").await.unwrap();
            bounded.flush().await.unwrap();
            // After it: the socket's window, as TCP_INFO gives it, within the limits.
            let info = crate::sock::tcp_info(bounded.inner.tcp()).unwrap();
            assert_eq!(
                chunk.load(Ordering::Relaxed),
                buffer_bound(info.snd_cwnd_bytes())
            );
            assert!(info.snd_cwnd_bytes() > 0);
            assert_eq!(server.await.unwrap(), b"abc");
        });
    }

    #[test]
    fn a_stream_bounded_by_rate_sets_the_kernels_mark_and_whole_segment_chunks() {
        use super::super::sendq::{self, EorTcp};
        use std::os::fd::AsFd;
        use tokio::io::AsyncWriteExt;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (addr, server) = tls_server_reading_three_bytes().await;
            let tcp = EorTcp::new(TcpStream::connect(addr).await.unwrap());
            let fd = tcp.get_ref().as_fd().try_clone_to_owned().unwrap();
            let tls = tls_client(tcp).await;
            let chunk = Arc::new(AtomicUsize::new(0));
            let mut bounded = Bounded::by_rate(tls, chunk.clone());
            bounded.write_all(b"abc").await.unwrap();
            bounded.flush().await.unwrap();
            // After the first write: the kernel's mark is the bound, and a chunk is
            // whole segments of it less the framing.
            let lowat = socket2::SockRef::from(&fd).tcp_notsent_lowat().unwrap() as usize;
            assert!(
                (sendq::MIN_BYTES..=sendq::MAX_BYTES).contains(&lowat),
                "{lowat}"
            );
            let mss = crate::sock::tcp_info(fd.as_fd()).unwrap().snd_mss as usize;
            assert_eq!(chunk.load(Ordering::Relaxed), sendq::chunk_for(lowat, mss));
            assert_eq!(server.await.unwrap(), b"abc");
        });
    }
}
