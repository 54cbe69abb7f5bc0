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
//!
//! What the kernel holds is not all: a load body asked for its next chunk makes it at
//! once, and h2 then holds it as the frame it writes next (the socket not taking it
//! yet) or queues it before a probe's frames in its round robin, which sends one frame
//! of each stream in turn. A download's answer is two frames (HEADERS, DATA) and went
//! out behind two such chunks, each waiting for the congestion window to open: the
//! server's captured delay from a probe's request to its answer was 6 ms at 100 Mbit/s
//! over ten connections. [`Room`] makes a body's next chunk only once the writer has
//! taken the last ([`Pace`]) and the kernel can take a write at once (`poll_room`),
//! so that a probe's frames come next after what the kernel holds.

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Notify, futures::OwnedNotified};

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

/// Ready once the kernel would wake a writer blocked on `tcp`: what it holds unsent
/// under half of `TCP_NOTSENT_LOWAT` (the kernel's wake rule) and room in the send
/// buffer. Else pending, woken when that holds: `poll(2)` on a socket that is not
/// writable marks it so that the kernel signals when it becomes so, as a refused write
/// does. A writer that asks first writes only what the kernel takes at once, so the
/// write does not wait above the socket (in rustls, in h2's frame) in front of a probe.
fn poll_room(tcp: &TcpStream, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
    use std::os::fd::AsFd;
    loop {
        ready!(tcp.poll_write_ready(cx))?;
        let room = tcp.try_io(Interest::WRITABLE, || {
            match crate::sock::writable_now(tcp.as_fd())? {
                true => Ok(()),
                false => Err(io::ErrorKind::WouldBlock.into()),
            }
        });
        match room {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            r => return Poll::Ready(r),
        }
    }
}

/// What a connection's writer ([`super::net::Bounded`]) tells the load bodies on it:
/// how many bytes it has taken in all, and a wake-up after each write.
#[derive(Debug, Default)]
pub struct Pace {
    taken: AtomicU64,
    written: Arc<Notify>,
}

impl Pace {
    /// The writer took `n` bytes.
    pub fn on_write(&self, n: usize) {
        self.taken.fetch_add(n as u64, Ordering::Release);
        self.written.notify_waiters();
    }

    fn taken(&self) -> u64 {
        self.taken.load(Ordering::Acquire)
    }
}

/// A load body's pace on its connection: its next chunk is made only once the writer
/// has taken the one before ([`Pace`]) and the kernel can take a write at once
/// (`poll_room`). A chunk made earlier waits above the socket (as h2's next frame, or
/// queued in h2 before a probe's frames in turn), and a self probe's request or answer
/// waits behind it; made then, nothing of the body waits there, and a probe's frames
/// are next after what the kernel holds. The socket is a duplicate descriptor with its
/// own readiness (one per body: a readiness wakes one task), which keeps the socket
/// open until the body is dropped.
pub struct Room {
    tcp: TcpStream,
    pace: Arc<Pace>,
    /// What the writer must have taken before the next chunk: all of the last one.
    after: u64,
    wait: Option<Pin<Box<OwnedNotified>>>,
}

impl std::fmt::Debug for Room {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Room").field("after", &self.after).finish()
    }
}

impl Room {
    /// A room on the socket `fd`, which must be a connected TCP socket in non-blocking
    /// mode (a tokio one), written by a writer that reports to `pace`; registers with
    /// the current runtime.
    pub fn new(fd: std::os::fd::BorrowedFd<'_>, pace: Arc<Pace>) -> io::Result<Room> {
        let dup = std::net::TcpStream::from(fd.try_clone_to_owned()?);
        dup.set_nonblocking(true)?;
        Ok(Room {
            tcp: TcpStream::from_std(dup)?,
            pace,
            after: 0,
            wait: None,
        })
    }

    /// Ready when the body may make its next chunk. A socket error is ready too: the
    /// connection's own write reports it.
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        while self.pace.taken() < self.after {
            let written = Arc::clone(&self.pace.written);
            let wait = self
                .wait
                .get_or_insert_with(|| Box::pin(written.notified_owned()));
            // Registered before the second look, so a write between the two wakes it.
            wait.as_mut().enable();
            if self.pace.taken() < self.after {
                ready!(wait.as_mut().poll(cx));
            }
            self.wait = None;
        }
        poll_room(&self.tcp, cx).map(|_| ())
    }

    /// The body made a chunk of `n` bytes.
    pub fn made(&mut self, n: usize) {
        self.after = self.pace.taken() + n as u64;
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

    /// A connected loopback pair: the writer's socket, then the reader's.
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tcp, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (tcp.unwrap(), accepted.unwrap().0)
    }

    /// Waits (in a task of its own, so that the wake-up is what ends it) until `room`
    /// lets the next chunk be made; a guard of a minute stands for a lost wake-up.
    async fn next_chunk_allowed(mut room: Room) -> Room {
        let task = tokio::spawn(async move {
            std::future::poll_fn(|cx| room.poll_next(cx)).await;
            room
        });
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("the room was never woken")
            .unwrap()
    }

    fn allowed_now(room: &mut Room) -> bool {
        room.poll_next(&mut Context::from_waker(std::task::Waker::noop()))
            .is_ready()
    }

    #[test]
    fn a_room_waits_until_the_last_chunk_is_taken_and_the_kernel_has_room() {
        use std::os::fd::AsFd;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (tcp, mut peer) = pair().await;
            // Writable only with nothing unsent.
            socket2::SockRef::from(&tcp)
                .set_tcp_notsent_lowat(1)
                .unwrap();
            let pace = Arc::new(Pace::default());
            let room = Room::new(tcp.as_fd(), Arc::clone(&pace)).unwrap();
            // Room from the start (once the runtime has seen the socket writable).
            let mut room = next_chunk_allowed(room).await;

            // A chunk of 1000 bytes made: the next waits until the writer took 1000 more.
            room.made(1000);
            assert!(!allowed_now(&mut room));
            pace.on_write(999);
            assert!(!allowed_now(&mut room));
            let waiting = tokio::spawn(next_chunk_allowed(room));
            tokio::task::yield_now().await;
            assert!(!waiting.is_finished());
            pace.on_write(1);
            let mut room = waiting.await.unwrap();

            // The reader stops reading: what the writer sends fills its window, and the
            // rest stays unsent.
            let block = vec![0u8; 1 << 16];
            loop {
                match tcp.try_write(&block) {
                    Ok(_) => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("{e}"),
                }
            }
            assert!(!allowed_now(&mut room));
            let waiting = tokio::spawn(next_chunk_allowed(room));
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            assert!(!waiting.is_finished());
            // The reader drains it all: the kernel sends the rest and wakes the room.
            let reading = tokio::spawn(async move {
                use tokio::io::AsyncReadExt;
                let mut buf = vec![0u8; 1 << 16];
                while peer.read(&mut buf).await.is_ok_and(|n| n > 0) {}
            });
            waiting.await.unwrap();
            drop(tcp);
            reading.await.unwrap();
        });
    }

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
