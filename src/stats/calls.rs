//! A stream's socket calls: iperf 2's `Write/Err` and `Reads=Dist` figures.
//!
//! iperf 2 counts each `write()` that succeeded (`WriteCnt`), each that failed with an
//! error it carries on after (`WriteErr`: EAGAIN, EINTR, ENOBUFS, ECONNREFUSED), each
//! `read()` that returned data (`ReadCnt`), and sorts a TCP receiver's reads into eight
//! bins by how much of the asked-for length they returned (`bins[(len - 1) / (-l / 8)]`,
//! `src/Reporter.c`, `reporter_handle_packet_server_tcp`). netmeter counts its own calls
//! the same way: a `sendmmsg` or `recvmmsg` is one call however many datagrams it
//! carried, and a read's bin is taken against the length that read asked for.

use serde::{Deserialize, Deserializer, Serialize};

/// How many read-size bins (iperf 2's `TCPREADBINCOUNT`).
pub const READ_BINS: usize = 8;

/// Cumulative socket-call counts of one stream (or their difference over an interval).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SocketCalls {
    /// Send calls that succeeded (`write`, `send`, `sendmmsg`).
    pub writes: u64,
    /// Send calls that failed (timeouts with the buffer full, ENOBUFS, ECONNREFUSED, and
    /// the error a stream ended with); an interrupted call (EINTR) is not counted.
    pub write_errors: u64,
    /// Receive calls that returned data.
    pub reads: u64,
    /// TCP receivers: those reads by the share of the asked-for length they returned,
    /// in eighths (`read_bins[0]`: up to 1/8, ..., `read_bins[7]`: more than 7/8).
    pub read_bins: [u64; READ_BINS],
}

impl SocketCalls {
    /// The counts since `prev` (an earlier sample of the same stream).
    pub fn since(&self, prev: &SocketCalls) -> SocketCalls {
        let mut bins = [0; READ_BINS];
        for (b, (now, was)) in bins
            .iter_mut()
            .zip(self.read_bins.iter().zip(prev.read_bins))
        {
            *b = now.saturating_sub(was);
        }
        SocketCalls {
            writes: self.writes.saturating_sub(prev.writes),
            write_errors: self.write_errors.saturating_sub(prev.write_errors),
            reads: self.reads.saturating_sub(prev.reads),
            read_bins: bins,
        }
    }

    /// Both counts added (streams summed).
    pub fn plus(&self, o: &SocketCalls) -> SocketCalls {
        let mut bins = self.read_bins;
        for (b, x) in bins.iter_mut().zip(o.read_bins) {
            *b = b.saturating_add(x);
        }
        SocketCalls {
            writes: self.writes.saturating_add(o.writes),
            write_errors: self.write_errors.saturating_add(o.write_errors),
            reads: self.reads.saturating_add(o.reads),
            read_bins: bins,
        }
    }

    /// Whether any read was binned (TCP receivers).
    pub fn binned(&self) -> bool {
        self.read_bins.iter().any(|&b| b > 0)
    }
}

/// A peer's `netmeter_calls` (results message), or `None` when it is not one: a value
/// the peer got wrong (a ninth bin, a negative count) costs this figure, not the whole
/// results message.
pub fn lenient_calls<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketCalls>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(serde_json::from_value(v).ok())
}

/// The bin of a read that returned `len` bytes of the `asked` it asked for: iperf 2's
/// `(len - 1) / (asked / 8)`, here `(len - 1) * 8 / asked` so a length under 8 bytes
/// still has bins; a read longer than asked (it cannot be) goes to the last bin.
pub fn read_bin(len: usize, asked: usize) -> usize {
    if len == 0 || asked == 0 {
        return 0;
    }
    ((len - 1).saturating_mul(READ_BINS) / asked).min(READ_BINS - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fall_in_eighths_of_the_length_asked() {
        // iperf 2 with -l 128K: bins of 16 KiB, a full read in the last one.
        let asked = 128 * 1024;
        assert_eq!(read_bin(1, asked), 0);
        assert_eq!(read_bin(16 * 1024, asked), 0);
        assert_eq!(read_bin(16 * 1024 + 1, asked), 1);
        assert_eq!(read_bin(asked, asked), 7);
        assert_eq!(read_bin(asked * 2, asked), 7);
        // Tiny lengths and nothing asked never index out of the bins.
        assert_eq!(read_bin(3, 4), 4);
        assert_eq!(read_bin(5, 0), 0);
    }

    #[test]
    fn a_malformed_peer_count_is_dropped_not_fatal() {
        #[derive(Deserialize)]
        struct R {
            #[serde(default, deserialize_with = "lenient_calls")]
            c: Option<SocketCalls>,
        }
        let read = |s: &str| serde_json::from_str::<R>(s).unwrap().c;
        assert_eq!(read(r#"{"c": {"writes": 3}}"#).unwrap().writes, 3);
        assert_eq!(
            read(r#"{"c": {"read_bins": [1, 2, 3, 4, 5, 6, 7, 8, 9]}}"#),
            None
        );
        assert_eq!(read(r#"{"c": {"reads": -1}}"#), None);
        assert_eq!(read(r#"{"c": "many"}"#), None);
        assert_eq!(read("{}"), None);
    }

    #[test]
    fn interval_counts_are_differences_and_sums_add() {
        let a = SocketCalls {
            writes: 10,
            write_errors: 1,
            reads: 4,
            read_bins: [1, 0, 0, 0, 0, 0, 0, 3],
        };
        let b = SocketCalls {
            writes: 25,
            write_errors: 1,
            reads: 9,
            read_bins: [1, 1, 0, 0, 0, 0, 0, 7],
        };
        let d = b.since(&a);
        assert_eq!((d.writes, d.write_errors, d.reads), (15, 0, 5));
        assert_eq!(d.read_bins, [0, 1, 0, 0, 0, 0, 0, 4]);
        assert!(d.binned());
        assert_eq!(a.plus(&d), b);
        // A counter that went back (a restarted sample) gives 0, not a wrap.
        assert_eq!(a.since(&b), SocketCalls::default());
    }
}
