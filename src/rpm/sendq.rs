//! What a load-generating connection holds unsent in front of a self probe, bounded by
//! time rather than by bytes.
//!
//! A self probe is a request on a loaded connection: it leaves only after every byte
//! that connection's sender holds unsent (the DATA frame h2 is writing, rustls's
//! records, the kernel's unsent bytes), and those leave at the connection's own share
//! of the path's rate, not at the rate. [`SendBound`] keeps what may wait in each of
//! those places to [`AHEAD`] of the connection's delivery rate (TCP_INFO
//! `tcpi_delivery_rate`), within [`MIN_BYTES`] and [`MAX_BYTES`]. [`EorTcp`] makes
//! the kernel's part hold: Linux checks `TCP_NOTSENT_LOWAT` only when a write needs a
//! new buffer segment, so a writer whose data keeps being appended to the unsent tail
//! segment can hold up to 64 KiB unsent whatever the mark says; a write sent with
//! `MSG_EOR` is never appended to, so every write meets the mark.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// How long, at the connection's delivery rate, what waits unsent in each place may
/// take to leave.
pub const AHEAD: Duration = Duration::from_millis(1);
/// The least a connection may hold: one full segment of a 1500-byte path, so that a
/// slow share still sends whole segments.
pub const MIN_BYTES: usize = 1448;
/// The most: rustls's own default record buffer, and four of h2's 16 KiB frames.
pub const MAX_BYTES: usize = 64 * 1024;

/// One connection's bound, from its delivery rate samples.
#[derive(Debug, Clone, Default)]
pub struct SendBound {
    /// The connection's rate, bytes a second: the last sample the sender was not
    /// holding back, or a faster one taken while it was.
    rate: u64,
}

impl SendBound {
    /// Takes a sample (`tcpi_delivery_rate`, `tcpi_delivery_rate_app_limited`) and
    /// gives the bound. A sample taken while the sender had less to send than its
    /// window allowed says only that the path carries at least that much: it may
    /// raise the rate, never lower it (else the bound would starve the connection,
    /// whose next sample would be lower still).
    pub fn on_sample(&mut self, rate: u64, app_limited: bool) -> usize {
        if !app_limited || rate > self.rate {
            self.rate = rate;
        }
        self.bound()
    }

    /// [`AHEAD`] of the connection's rate, within [`MIN_BYTES`] and [`MAX_BYTES`].
    pub fn bound(&self) -> usize {
        let bytes = u128::from(self.rate) * AHEAD.as_nanos() / 1_000_000_000;
        usize::try_from(bytes)
            .unwrap_or(usize::MAX)
            .clamp(MIN_BYTES, MAX_BYTES)
    }
}

/// What a TLS 1.3 record adds to its plaintext (a 5-byte header, the content type and
/// a 16-byte AEAD tag) and an HTTP/2 frame header: a body chunk of `k` segments less
/// this is one DATA frame in one record filling `k` whole segments.
pub const FRAMING_BYTES: usize = 22 + 9;
/// The largest HTTP/2 frame and TLS record payload (both default to 16 KiB).
const RECORD_BYTES: usize = 16 * 1024;

/// The body chunk for a connection bounded to `bound` bytes whose segments carry `mss`
/// bytes: whole segments' worth, at least one, less [`FRAMING_BYTES`], so that a
/// write sent alone (`MSG_EOR`) does not end in a short segment (a 1448-byte chunk
/// would go as 1448 and 31 bytes). Above one record a chunk spans several frames and
/// records anyway: `bound` as it is.
pub fn chunk_for(bound: usize, mss: usize) -> usize {
    // A segment larger than a record (loopback's 65483 bytes) has no whole segments to
    // fill: the bound as it is.
    if mss <= FRAMING_BYTES || bound > RECORD_BYTES || mss > RECORD_BYTES + FRAMING_BYTES {
        return bound;
    }
    let segments = (bound / mss).clamp(1, (RECORD_BYTES + FRAMING_BYTES) / mss);
    segments * mss - FRAMING_BYTES
}

/// A TCP stream whose every write goes with `MSG_EOR` (see the module's text), or,
/// made [`EorTcp::plain`], without (a plain socket's writes, for the server's
/// connections whose mark is fixed).
pub struct EorTcp {
    inner: TcpStream,
    flags: libc::c_int,
}

impl EorTcp {
    pub fn new(inner: TcpStream) -> EorTcp {
        EorTcp {
            inner,
            flags: libc::MSG_EOR | libc::MSG_NOSIGNAL,
        }
    }

    /// Writes without `MSG_EOR`.
    pub fn plain(inner: TcpStream) -> EorTcp {
        EorTcp {
            inner,
            flags: libc::MSG_NOSIGNAL,
        }
    }

    pub fn get_ref(&self) -> &TcpStream {
        &self.inner
    }

    fn poll_send(&self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.inner.poll_write_ready(cx))?;
            let sent = self.inner.try_io(Interest::WRITABLE, || {
                socket2::SockRef::from(&self.inner).send_vectored_with_flags(bufs, self.flags)
            });
            match sent {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                r => return Poll::Ready(r),
            }
        }
    }
}

impl AsyncRead for EorTcp {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for EorTcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_send(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_send(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_a_millisecond_of_the_rate_within_its_limits() {
        let at = |rate| {
            let mut b = SendBound::default();
            b.on_sample(rate, false)
        };
        assert_eq!(SendBound::default().bound(), MIN_BYTES);
        // A tenth of 100 Mbit/s: 1.16 kB in 1 ms, less than a segment.
        assert_eq!(at(1_160_000), MIN_BYTES);
        assert_eq!(at(20_000_000), 20_000);
        // A tenth of 10 Gbit/s.
        assert_eq!(at(125_000_000), MAX_BYTES);
        assert_eq!(at(u64::MAX), MAX_BYTES);
    }

    #[test]
    fn a_sample_the_sender_held_back_raises_the_rate_and_never_lowers_it() {
        let mut b = SendBound::default();
        assert_eq!(b.on_sample(20_000_000, false), 20_000);
        // Held back by the bound itself: the path carried at least this; no lower.
        assert_eq!(b.on_sample(5_000_000, true), 20_000);
        assert_eq!(b.on_sample(30_000_000, true), 30_000);
        // A sample with the window full is the path's rate, lower or not.
        assert_eq!(b.on_sample(10_000_000, false), 10_000);
    }

    #[test]
    fn a_chunk_fills_whole_segments_in_one_frame_and_record() {
        assert_eq!(chunk_for(1448, 1448), 1448 - FRAMING_BYTES);
        assert_eq!(chunk_for(1447, 1448), 1448 - FRAMING_BYTES);
        assert_eq!(chunk_for(4000, 1448), 2 * 1448 - FRAMING_BYTES);
        // One record holds at most 16 KiB: eleven segments' worth.
        assert_eq!(chunk_for(16_384, 1448), 11 * 1448 - FRAMING_BYTES);
        assert!(chunk_for(16_384, 1448) + FRAMING_BYTES <= 16 * 1024 + FRAMING_BYTES);
        // Past a record, or an MSS unknown: the bound as it is.
        assert_eq!(chunk_for(20_000, 1448), 20_000);
        assert_eq!(chunk_for(4000, 0), 4000);
        // Loopback's segments are larger than a record: no whole segments to fill.
        assert_eq!(chunk_for(1448, 65483), 1448);
        assert_eq!(chunk_for(16_384, 65483), 16_384);
        assert_eq!(
            chunk_for(16_384, RECORD_BYTES + FRAMING_BYTES),
            RECORD_BYTES
        );
        // A jumbo segment: one whole segment, larger than the bound.
        assert_eq!(chunk_for(1448, 9000), 9000 - FRAMING_BYTES);
    }

    /// Writes `chunk` bytes at a time without blocking until the socket takes no more,
    /// and gives the kernel's unsent bytes then.
    fn fill(
        w: &mut (impl AsyncWrite + Unpin),
        chunk: usize,
        fd: std::os::fd::BorrowedFd<'_>,
    ) -> u32 {
        let buf = vec![0u8; chunk];
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut total = 0usize;
        while let Poll::Ready(r) = Pin::new(&mut *w).poll_write(&mut cx, &buf) {
            total += r.expect("write");
            assert!(total < 1 << 30, "the socket never stopped taking bytes");
        }
        crate::sock::tcp_info(fd).expect("TCP_INFO").notsent_bytes
    }

    #[test]
    fn with_msg_eor_the_kernel_holds_no_more_unsent_than_the_mark_and_a_write() {
        use std::os::fd::AsFd;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            // The peer never reads: its window closes and what follows stays unsent.
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let tcp = TcpStream::connect(addr).await.unwrap();
            let (_peer, _) = listener.accept().await.unwrap();
            let lowat = 4096;
            socket2::SockRef::from(&tcp)
                .set_tcp_notsent_lowat(lowat)
                .unwrap();
            let mut eor = EorTcp::new(tcp);
            let chunk = 1417;
            let fd = eor.get_ref().as_fd().try_clone_to_owned().unwrap();
            let unsent = fill(&mut eor, chunk, fd.as_fd());
            assert!(
                unsent > 0,
                "nothing left unsent: the peer's window never closed"
            );
            assert!(
                unsent as usize <= lowat as usize + chunk,
                "{unsent} bytes unsent with the mark at {lowat} and writes of {chunk}"
            );
        });
    }
}
