//! `--ecn-responsive`'s feedback datagram (netmeter extension, feature `ecn_feedback`):
//! a UDP receiver's cumulative ECN counts, sent back to the sender on the stream's own
//! connected data socket once per feedback round (`responsive::ROUND`, 10 ms: 100
//! datagrams of 36 bytes a second per stream, whatever the data rate). Cumulative, so
//! a lost or reordered feedback datagram costs nothing but its round.
//!
//! Layout, big-endian: magic `0x4e4d4546` ("NMEF"), then Not-ECT, ECT(1), ECT(0), CE
//! as u64 each.

use crate::stats::EcnCounts;

/// "NMEF": netmeter ECN feedback.
pub const ECN_FEEDBACK_MAGIC: u32 = 0x4e4d_4546;
/// The datagram's length, bytes.
pub const ECN_FEEDBACK_LEN: usize = 4 + 4 * 8;

/// One feedback datagram: the receiver's counts so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EcnFeedback(pub EcnCounts);

impl EcnFeedback {
    /// The datagram's bytes.
    pub fn encode(&self) -> [u8; ECN_FEEDBACK_LEN] {
        let mut b = [0u8; ECN_FEEDBACK_LEN];
        b[..4].copy_from_slice(&ECN_FEEDBACK_MAGIC.to_be_bytes());
        let c = self.0;
        for (i, v) in [c.not_ect, c.ect1, c.ect0, c.ce].into_iter().enumerate() {
            b[4 + i * 8..12 + i * 8].copy_from_slice(&v.to_be_bytes());
        }
        b
    }

    /// A feedback datagram from `b`, or `None` for anything else (wrong length or magic).
    pub fn parse(b: &[u8]) -> Option<EcnFeedback> {
        if b.len() != ECN_FEEDBACK_LEN || b[..4] != ECN_FEEDBACK_MAGIC.to_be_bytes() {
            return None;
        }
        let v = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[4 + i * 8..12 + i * 8]);
            u64::from_be_bytes(w)
        };
        Some(EcnFeedback(EcnCounts {
            not_ect: v(0),
            ect1: v(1),
            ect0: v(2),
            ce: v(3),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_anything_else() {
        let f = EcnFeedback(EcnCounts {
            not_ect: 1,
            ect1: 2,
            ect0: 3,
            ce: u64::MAX,
        });
        let b = f.encode();
        assert_eq!(&b[..4], b"NMEF");
        assert_eq!(EcnFeedback::parse(&b), Some(f));
        assert_eq!(EcnFeedback::parse(&b[..35]), None);
        let mut wrong = b;
        wrong[0] = b'X';
        assert_eq!(EcnFeedback::parse(&wrong), None);
        assert_eq!(EcnFeedback::parse(&[]), None);
    }
}
