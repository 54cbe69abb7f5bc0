//! The TCP receiver's decisions and accounting: count what each read brought, find the
//! `--trip-times` frames in the byte stream and hand over each one's send time as its
//! last byte arrives, stop when the sender closes.
//!
//! The one-way delays themselves go where the driver keeps them (the engine: the
//! stream's shared `OwdRecord`, which the meter reads each interval), so the machine
//! holds no recorder of its own.

use crate::wire::TcpFrameParser;

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpRecvStep {
    /// Read again.
    Read,
    /// The sender closed the connection: the stream is over.
    Stop,
}

/// A TCP receiver's state.
#[derive(Debug, Default)]
pub struct TcpReceiver {
    /// `--trip-times`: the frames in the byte stream.
    frames: Option<TcpFrameParser>,
    bytes: u64,
    reads: u64,
}

impl TcpReceiver {
    /// A receiver; `trip_times`: parse frame headers.
    pub fn new(trip_times: bool) -> TcpReceiver {
        TcpReceiver {
            frames: trip_times.then(TcpFrameParser::default),
            ..TcpReceiver::default()
        }
    }

    /// A read returned `data` (empty: end of stream). `frame_done(send_ns)` is called
    /// for each `--trip-times` frame whose last byte is in it, with the send time its
    /// header carries (the sender's clock: any value).
    pub fn on_read(&mut self, data: &[u8], frame_done: impl FnMut(i64)) -> TcpRecvStep {
        let step = self.on_count(data.len());
        if let Some(parser) = self.frames.as_mut() {
            parser.feed(data, frame_done);
        }
        step
    }

    /// A read took `n` bytes the driver did not copy (`MSG_TRUNC`, `--skip-rx-copy`,
    /// which leaves no frames to parse); 0: end of stream.
    pub fn on_count(&mut self, n: usize) -> TcpRecvStep {
        if n == 0 {
            return TcpRecvStep::Stop;
        }
        self.bytes += n as u64;
        self.reads += 1;
        TcpRecvStep::Read
    }

    /// Bytes received so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Reads that returned data so far.
    pub fn reads(&self) -> u64 {
        self.reads
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::write_tcp_frame_header;

    #[test]
    fn frames_split_across_reads_are_handed_over_once_each() {
        let mut stream = [0u8; 64];
        write_tcp_frame_header(&mut stream[..32], 32, 1_000);
        write_tcp_frame_header(&mut stream[32..], 32, 2_000);
        let mut r = TcpReceiver::new(true);
        let mut sent = Vec::new();
        assert_eq!(
            r.on_read(&stream[..40], |t| sent.push(t)),
            TcpRecvStep::Read
        );
        assert_eq!(sent, vec![1_000]);
        assert_eq!(
            r.on_read(&stream[40..], |t| sent.push(t)),
            TcpRecvStep::Read
        );
        assert_eq!(sent, vec![1_000, 2_000]);
        assert_eq!((r.bytes(), r.reads()), (64, 2));
        assert_eq!(r.on_read(&[], |_| {}), TcpRecvStep::Stop);
    }

    #[test]
    fn without_trip_times_nothing_is_parsed() {
        let mut r = TcpReceiver::new(false);
        let mut stream = [0u8; 32];
        write_tcp_frame_header(&mut stream, 32, 1_000);
        r.on_read(&stream, |_| panic!("not parsed"));
        assert_eq!(r.bytes(), 32);
    }

    #[test]
    fn uncopied_reads_are_counted_and_zero_ends_the_stream() {
        let mut r = TcpReceiver::new(false);
        assert_eq!(r.on_count(4096), TcpRecvStep::Read);
        assert_eq!(r.on_count(10), TcpRecvStep::Read);
        assert_eq!((r.bytes(), r.reads()), (4106, 2));
        assert_eq!(r.on_count(0), TcpRecvStep::Stop);
    }
}
