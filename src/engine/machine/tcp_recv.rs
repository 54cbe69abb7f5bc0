//! The TCP receiver's decisions and accounting: count what each read brought, find the
//! `--trip-times` frames in the byte stream and time each one's last byte against its
//! header's send time, stop when the sender closes.

use crate::latency::OwdRecord;
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
    /// `--trip-times`: the frames and the one-way delays they give.
    frames: Option<(TcpFrameParser, OwdRecord)>,
    bytes: u64,
    reads: u64,
}

impl TcpReceiver {
    /// A receiver; `trip_times`: parse frame headers and record one-way delays.
    pub fn new(trip_times: bool) -> TcpReceiver {
        TcpReceiver {
            frames: trip_times.then(Default::default),
            ..TcpReceiver::default()
        }
    }

    /// A read returned `data` (empty: end of stream) at `rx_ns` on this host's wall
    /// clock; `correction_ns` removes the estimated offset between the two clocks.
    pub fn on_read(&mut self, data: &[u8], rx_ns: i64, correction_ns: i64) -> TcpRecvStep {
        if data.is_empty() {
            return TcpRecvStep::Stop;
        }
        self.bytes += data.len() as u64;
        self.reads += 1;
        if let Some((parser, owd)) = self.frames.as_mut() {
            parser.feed(data, |sent| owd.record_write(rx_ns, sent, correction_ns));
        }
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

    /// The one-way delays (`--trip-times`), if recorded.
    pub fn owd(&self) -> Option<&OwdRecord> {
        self.frames.as_ref().map(|f| &f.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::write_tcp_frame_header;

    #[test]
    fn frames_split_across_reads_give_one_delay_each() {
        let mut stream = [0u8; 64];
        write_tcp_frame_header(&mut stream[..32], 32, 1_000);
        write_tcp_frame_header(&mut stream[32..], 32, 2_000);
        let mut r = TcpReceiver::new(true);
        assert_eq!(r.on_read(&stream[..40], 5_000, 0), TcpRecvStep::Read);
        assert_eq!(r.on_read(&stream[40..], 9_000, -500), TcpRecvStep::Read);
        let owd = r.owd().unwrap();
        assert_eq!(owd.samples, 2);
        assert_eq!((owd.raw_min_ns, owd.raw_max_ns), (4_000, 7_000));
        assert_eq!((r.bytes(), r.reads()), (64, 2));
        assert_eq!(r.on_read(&[], 9_500, 0), TcpRecvStep::Stop);
    }
}
