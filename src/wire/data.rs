//! The headers data streams carry: iperf3's UDP header (32- or 64-bit sequence
//! numbers), the 16-byte frame header of `--trip-times` TCP writes, and the isochronous
//! frame header after the UDP header. Big-endian, parsed without panics.

use super::WireError;

/// Header at the start of every UDP data datagram. All fields big-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader {
    /// Sender timestamp, seconds part.
    pub sec: u32,
    /// Sender timestamp, microseconds part.
    pub usec: u32,
    /// Sequence number, first datagram = 1.
    pub seq: u64,
}

impl UdpHeader {
    /// Header length: 12 bytes with 32-bit sequence numbers, 16 with 64-bit.
    pub fn len(seq64: bool) -> usize {
        if seq64 { 16 } else { 12 }
    }

    /// Write the header into the front of `buf` (which must hold [`Self::len`] bytes).
    pub fn write(&self, buf: &mut [u8], seq64: bool) {
        buf[0..4].copy_from_slice(&self.sec.to_be_bytes());
        buf[4..8].copy_from_slice(&self.usec.to_be_bytes());
        if seq64 {
            buf[8..16].copy_from_slice(&self.seq.to_be_bytes());
        } else {
            buf[8..12].copy_from_slice(&(self.seq as u32).to_be_bytes());
        }
    }

    /// Parse the header of a received datagram.
    pub fn read(buf: &[u8], seq64: bool) -> Result<UdpHeader, WireError> {
        if buf.len() < Self::len(seq64) {
            return Err(WireError::ShortDatagram(buf.len()));
        }
        let be32 = |i: usize| u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let seq = if seq64 {
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[8..16]);
            u64::from_be_bytes(b)
        } else {
            be32(8) as u64
        };
        Ok(UdpHeader {
            sec: be32(0),
            usec: be32(4),
            seq,
        })
    }

    /// The send time in ns since the epoch. `ns_stamps`: the second field holds
    /// nanoseconds (netmeter's `--trip-times`), else microseconds (iperf3). The seconds
    /// field is 32 bits; it is unwrapped against the receiver's clock `now_ns`, so it
    /// stays right past 2106. Saturates instead of overflowing for any `now_ns`.
    pub fn send_ns(&self, ns_stamps: bool, now_ns: i64) -> i64 {
        let now_s = now_ns.div_euclid(1_000_000_000);
        let base = now_s - (now_s as u32) as i64;
        let mut s = base + self.sec as i64;
        if s - now_s > (1 << 31) {
            s -= 1 << 32;
        }
        let sub = if ns_stamps {
            self.usec as i64
        } else {
            self.usec as i64 * 1000
        };
        s.saturating_mul(1_000_000_000).saturating_add(sub)
    }
}

/// Header at the start of every TCP write when both netmeter peers run `--trip-times`:
/// magic `NMTT`, the write's length (header included, big-endian u32), and the sender's
/// wall-clock time in ns since the Unix epoch (big-endian i64).
pub const TCP_FRAME_HDR: usize = 16;
const TCP_FRAME_MAGIC: [u8; 4] = *b"NMTT";

/// Write a trip-times frame header into the first 16 bytes of `buf`.
pub fn write_tcp_frame_header(buf: &mut [u8], len: u32, send_ns: i64) {
    buf[..4].copy_from_slice(&TCP_FRAME_MAGIC);
    buf[4..8].copy_from_slice(&len.to_be_bytes());
    buf[8..16].copy_from_slice(&send_ns.to_be_bytes());
}

/// Follows the trip-times frames in a TCP byte stream, however the reads split them.
#[derive(Debug, Default, Clone)]
pub struct TcpFrameParser {
    hdr: [u8; TCP_FRAME_HDR],
    have: usize,
    left: usize,
    send_ns: i64,
    /// Set when the stream stopped looking like frames; parsing then stops.
    pub broken: bool,
}

impl TcpFrameParser {
    /// Consume `data`; `done(send_ns)` is called for each frame whose last byte is in it.
    pub fn feed(&mut self, mut data: &[u8], mut done: impl FnMut(i64)) {
        while !data.is_empty() && !self.broken {
            if self.left == 0 {
                let take = (TCP_FRAME_HDR - self.have).min(data.len());
                self.hdr[self.have..self.have + take].copy_from_slice(&data[..take]);
                self.have += take;
                data = &data[take..];
                if self.have < TCP_FRAME_HDR {
                    return;
                }
                self.have = 0;
                let len = u32::from_be_bytes([self.hdr[4], self.hdr[5], self.hdr[6], self.hdr[7]]);
                if self.hdr[..4] != TCP_FRAME_MAGIC || (len as usize) < TCP_FRAME_HDR {
                    self.broken = true;
                    return;
                }
                let mut t = [0u8; 8];
                t.copy_from_slice(&self.hdr[8..16]);
                self.send_ns = i64::from_be_bytes(t);
                self.left = len as usize - TCP_FRAME_HDR;
                if self.left == 0 {
                    done(self.send_ns);
                }
            } else {
                let take = self.left.min(data.len());
                self.left -= take;
                data = &data[take..];
                if self.left == 0 {
                    done(self.send_ns);
                }
            }
        }
    }
}

/// Frame header that follows the UDP header of every isochronous datagram between
/// netmeter peers (feature `isochronous`). All fields big-endian: frame id (u64, the
/// first frame is 1), the frame's send time (i64 ns since the epoch, taken just before
/// its first datagram), the frame's datagram count (u32) and this datagram's index in
/// it (u32, from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IsochHeader {
    pub frame_id: u64,
    pub start_ns: i64,
    pub dgrams: u32,
    pub index: u32,
}

impl IsochHeader {
    pub const LEN: usize = 24;

    /// Write into the first [`Self::LEN`] bytes of `buf`.
    pub fn write(&self, buf: &mut [u8]) {
        buf[0..8].copy_from_slice(&self.frame_id.to_be_bytes());
        buf[8..16].copy_from_slice(&self.start_ns.to_be_bytes());
        buf[16..20].copy_from_slice(&self.dgrams.to_be_bytes());
        buf[20..24].copy_from_slice(&self.index.to_be_bytes());
    }

    /// Read from the front of `buf` (the datagram after its UDP header).
    pub fn read(buf: &[u8]) -> Option<IsochHeader> {
        let b = buf.get(..Self::LEN)?;
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_be_bytes(a)
        };
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Some(IsochHeader {
            frame_id: u64_at(0),
            start_ns: u64_at(8) as i64,
            dgrams: u32_at(16),
            index: u32_at(20),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn header_timestamps_unwrap_and_units() {
        let now = 1_790_000_000_123_456_789i64; // 2026
        let h = |sec: u32, usec: u32| UdpHeader { sec, usec, seq: 1 };
        let sec = (now / 1_000_000_000) as u32;
        assert_eq!(h(sec, 123_456).send_ns(false, now), now - 789);
        assert_eq!(h(sec, 123_456_789).send_ns(true, now), now);
        // A send time one second before a 32-bit rollover, seen just after it.
        let after = (1i64 << 32) * 1_000_000_000 + 500_000_000;
        let sent = after - 1_000_000_000;
        let got = h((sent / 1_000_000_000) as u32, 500_000_000).send_ns(true, after);
        assert_eq!(got, sent);
    }

    #[test]
    fn isoch_header_round_trip() {
        let h = IsochHeader {
            frame_id: 7,
            start_ns: -5,
            dgrams: 30,
            index: 29,
        };
        let mut b = [0u8; 24];
        h.write(&mut b);
        assert_eq!(IsochHeader::read(&b), Some(h));
        assert_eq!(IsochHeader::read(&b[..23]), None);
    }

    #[test]
    fn udp_header_layout() {
        let h = UdpHeader {
            sec: 1,
            usec: 2,
            seq: 0x0102_0304,
        };
        let mut b = [0u8; 16];
        h.write(&mut b, false);
        assert_eq!(&b[..12], &[0, 0, 0, 1, 0, 0, 0, 2, 1, 2, 3, 4]);
        assert_eq!(UdpHeader::read(&b, false).unwrap(), h);
        assert_eq!(
            UdpHeader::read(&b[..11], false),
            Err(WireError::ShortDatagram(11))
        );
    }

    #[test]
    fn tcp_frames_survive_any_split() {
        let mut stream = Vec::new();
        for (i, len) in [16usize, 100, 40_000, 17].iter().enumerate() {
            let mut f = vec![0u8; *len];
            write_tcp_frame_header(&mut f, *len as u32, 1000 + i as i64);
            stream.extend_from_slice(&f);
        }
        for chunk in [1, 7, 16, 999, 100_000] {
            let mut p = TcpFrameParser::default();
            let mut seen = Vec::new();
            for c in stream.chunks(chunk) {
                p.feed(c, |t| seen.push(t));
            }
            assert_eq!(seen, vec![1000, 1001, 1002, 1003], "chunk {chunk}");
        }
        let mut p = TcpFrameParser::default();
        p.feed(&[0u8; 64], |_| panic!("not a frame"));
        assert!(p.broken);
    }

    proptest! {
        #[test]
        fn tcp_frame_parser_never_panics(bytes: Vec<u8>) {
            let mut p = TcpFrameParser::default();
            p.feed(&bytes, |_| {});
        }

        #[test]
        fn udp_header_round_trip(sec: u32, usec: u32, seq: u64, seq64: bool) {
            let h = UdpHeader { sec, usec, seq: if seq64 { seq } else { seq as u32 as u64 } };
            let mut b = [0u8; 16];
            h.write(&mut b, seq64);
            prop_assert_eq!(UdpHeader::read(&b, seq64).unwrap(), h);
        }

    }
}
