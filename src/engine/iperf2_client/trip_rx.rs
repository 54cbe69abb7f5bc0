//! TCP `-R --trip-times` from an iperf 2 server, as this client reads it: the server
//! writes its own test header first (`Client::SendFirstPayload`; its length follows
//! from its flags, `wire::iperf2::tcp_header_len`, as iperf 2's
//! `Server::ClientReverseFirstRead` reads it), then each write opens with the burst
//! head holding its send time (`wire::iperf2::BurstFramer`). Pure: bytes in, each
//! completed write's send time out; the loop (`loops::tcp_recv_trip`) does the I/O
//! and the delay record.

use crate::wire::iperf2::{BurstFramer, tcp_header_len};

/// Where in the server's stream the reader is.
#[derive(Debug, Clone)]
enum Phase {
    /// The header's flags word, `have` of its 4 bytes so far.
    Flags { word: [u8; 4], have: usize },
    /// The rest of the header: this many bytes still to skip.
    Header(usize),
    /// The timed writes.
    Writes,
    /// The header made no sense: the bytes are counted, none timed.
    Untimed,
}

/// One connection's reader of the server's timed writes.
#[derive(Debug, Clone)]
pub struct TcpTripRx {
    phase: Phase,
    framer: BurstFramer,
}

impl Default for TcpTripRx {
    fn default() -> Self {
        TcpTripRx {
            phase: Phase::Flags {
                word: [0; 4],
                have: 0,
            },
            framer: BurstFramer::default(),
        }
    }
}

impl TcpTripRx {
    /// Take bytes as they were read; `done(sec, usec)` with the send time of each write
    /// they complete.
    pub fn feed(&mut self, mut b: &[u8], mut done: impl FnMut(u32, u32)) {
        while !b.is_empty() {
            match &mut self.phase {
                Phase::Flags { word, have } => {
                    let n = (4 - *have).min(b.len());
                    word[*have..*have + n].copy_from_slice(&b[..n]);
                    *have += n;
                    b = &b[n..];
                    if *have == 4 {
                        self.phase = match tcp_header_len(*word) {
                            Ok(len) => Phase::Header(len.saturating_sub(4)),
                            Err(_) => Phase::Untimed,
                        };
                    }
                }
                Phase::Header(left) => {
                    let n = (*left).min(b.len());
                    *left -= n;
                    b = &b[n..];
                    if *left == 0 {
                        self.phase = Phase::Writes;
                    }
                }
                Phase::Writes => {
                    self.framer.feed(b, &mut done);
                    if self.framer.lost() {
                        self.phase = Phase::Untimed;
                    }
                    return;
                }
                Phase::Untimed => return,
            }
        }
    }

    /// Whether the writes are being timed (or may yet be): not once the framing is lost.
    #[cfg(test)]
    fn timing(&self) -> bool {
        !matches!(self.phase, Phase::Untimed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::iperf2::{Amount, ClientHdr, HEADER_VERSION2, UPPER_REVERSE, UPPER_TRIPTIME};
    use crate::wire::iperf2_client::TcpBurstHdr;

    /// The server's stream: its header, then writes of `size` bytes sent at 100.000k s.
    fn stream(writes: u32, size: usize) -> Vec<u8> {
        let mut s = ClientHdr {
            udp: false,
            threads: 1,
            port: 5001,
            buf_len: size as u32,
            amount: Amount::TimeCentis(200),
            rate_bps: 0,
            tos: 0,
            flags: HEADER_VERSION2,
            upper: UPPER_REVERSE | UPPER_TRIPTIME,
            start: Some((100, 0)),
        }
        .encode();
        let mut seq = 0i64;
        for k in 1..=writes {
            let mut w = vec![0u8; size];
            seq += size as i64;
            TcpBurstHdr {
                start: (100, 0),
                sent: (100 + k, 1000 * k),
                burst_id: k,
                burst_size: size as u32,
                seq,
            }
            .write(&mut w);
            s.extend_from_slice(&w);
        }
        s
    }

    /// Every write's send time, however the reads cut the stream (the header's bytes
    /// and each write's head split across reads included).
    #[test]
    fn each_write_is_timed_whatever_the_reads() {
        let s = stream(5, 1000);
        for cut in [1, 3, 7, 52, 333, 1000, 4096] {
            let mut rx = TcpTripRx::default();
            let mut got = Vec::new();
            for piece in s.chunks(cut) {
                rx.feed(piece, |sec, usec| got.push((sec, usec)));
            }
            let want: Vec<(u32, u32)> = (1..=5).map(|k| (100 + k, 1000 * k)).collect();
            assert_eq!(got, want, "reads of {cut} bytes");
            assert!(rx.timing());
        }
    }

    /// A stream that opens with no iperf 2 header is counted but never timed.
    #[test]
    fn no_header_no_times() {
        let mut rx = TcpTripRx::default();
        let mut n = 0;
        rx.feed(&[0u8; 4096], |_, _| n += 1);
        assert_eq!(n, 0);
        assert!(!rx.timing());
    }
}
