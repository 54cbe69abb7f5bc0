//! The large object's body: `size` bytes cut from one fixed 64 KiB buffer, so an 8 GB
//! object costs the server no storage and no copy (each frame shares the buffer), and
//! its exact size hint gives the response its `Content-Length`.

use hyper::body::{Body, Bytes, Frame, SizeHint};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

/// The buffer the chunks are cut from: the most a chunk may be.
const BUFFER_BYTES: usize = super::net::BUFFER_MAX_BYTES;

/// A body of `remaining` bytes of the letter `x` (the reference nginx setup fills its
/// large file with `x`), handed to HTTP/2 in chunks of the connection's
/// `rpm::net::buffer_bound` (`chunk`): a download's self probe is answered behind the
/// DATA frame h2 is writing, which is at most one chunk (docs/rpm.md, "Where a self
/// probe's time goes").
#[derive(Debug)]
pub struct LargeBody {
    buffer: Bytes,
    chunk: Arc<AtomicUsize>,
    remaining: u64,
    /// With `auto`: each chunk is made when the socket can take it (`sendq::Room`).
    room: Option<super::sendq::Room>,
}

impl LargeBody {
    pub fn new(size: u64, chunk: Arc<AtomicUsize>) -> LargeBody {
        LargeBody {
            buffer: Bytes::from(vec![b'x'; BUFFER_BYTES]),
            chunk,
            remaining: size,
            room: None,
        }
    }

    /// Makes each chunk when `room` says the socket can take it.
    pub fn with_room(mut self, room: Option<super::sendq::Room>) -> LargeBody {
        self.room = room;
        self
    }
}

impl Body for LargeBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.remaining == 0 {
            return Poll::Ready(None);
        }
        if let Some(room) = &mut self.room {
            std::task::ready!(room.poll_next(cx));
        }
        let chunk = self.chunk.load(Ordering::Relaxed).clamp(1, BUFFER_BYTES);
        let n = self.remaining.min(chunk as u64) as usize;
        self.remaining -= n as u64;
        if let Some(room) = &mut self.room {
            room.made(n);
        }
        Poll::Ready(Some(Ok(Frame::data(self.buffer.slice(..n)))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    #[test]
    fn the_body_is_exactly_its_size() {
        let size = 3 * BUFFER_BYTES as u64 + 17;
        let body = LargeBody::new(size, Arc::new(AtomicUsize::new(BUFFER_BYTES)));
        assert_eq!(body.size_hint().exact(), Some(size));
        let all = runtime().block_on(body.collect()).unwrap().to_bytes();
        assert_eq!(all.len() as u64, size);
        assert!(all.iter().all(|&b| b == b'x'));
        let none = LargeBody::new(0, Arc::new(AtomicUsize::new(BUFFER_BYTES)));
        assert!(none.is_end_stream());
    }

    #[test]
    fn chunks_follow_the_connections_bound() {
        // A download's self probe is answered behind the frame h2 already handed on:
        // the chunks are what the connection's bound says, as it changes.
        let rt = runtime();
        let chunk = Arc::new(AtomicUsize::new(4096));
        let mut body = LargeBody::new(1 << 20, chunk.clone());
        let mut next = || {
            let f = rt.block_on(body.frame()).unwrap().unwrap();
            f.into_data().unwrap().len()
        };
        assert_eq!(next(), 4096);
        chunk.store(20_000, Ordering::Relaxed);
        assert_eq!(next(), 20_000);
        // Never more than the buffer, never an empty frame.
        chunk.store(1 << 30, Ordering::Relaxed);
        assert_eq!(next(), BUFFER_BYTES);
        chunk.store(0, Ordering::Relaxed);
        assert_eq!(next(), 1);
    }
}
