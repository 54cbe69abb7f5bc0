//! ECN codepoints of received datagrams (RFC 3168 §5): how many arrived Not-ECT,
//! ECT(1), ECT(0) and CE, counted by the UDP receive loop from the TOS / traffic class
//! the kernel hands over with each message (`sock::mmsg`).
//!
//! With UDP GRO one message holds many datagrams and carries one TOS byte: the kernel
//! merges only datagrams whose TOS bytes are equal (`inet_gro_receive` flushes on a
//! differing TOS), so every datagram of a message carries the message's codepoint and
//! the receive loop counts them all under it.

use serde::{Deserialize, Serialize};

/// The two ECN bits of an IP TOS or IPv6 traffic class byte (RFC 3168 §5).
pub const ECN_MASK: u8 = 0x03;
/// ECT(1): ECN-capable transport, the L4S identifier (RFC 9331).
pub const ECT1: u8 = 0x01;
/// ECT(0): ECN-capable transport, classic.
pub const ECT0: u8 = 0x02;
/// CE: congestion experienced, set by a router instead of dropping.
pub const CE: u8 = 0x03;

/// `--ecn ect0|ect1`: the codepoint a sender puts on its UDP datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EcnMark {
    Ect0,
    Ect1,
}

impl EcnMark {
    /// The flag's value: `ect0` or `ect1` (case-insensitive, `ect(0)` too).
    pub fn parse(s: &str) -> Option<EcnMark> {
        match s.to_ascii_lowercase().replace(['(', ')'], "").as_str() {
            "ect0" => Some(EcnMark::Ect0),
            "ect1" | "l4s" => Some(EcnMark::Ect1),
            _ => None,
        }
    }

    /// The codepoint's two bits.
    pub fn bits(self) -> u8 {
        match self {
            EcnMark::Ect0 => ECT0,
            EcnMark::Ect1 => ECT1,
        }
    }

    /// The TOS byte with this mark in its ECN bits and the DSCP (`-S`/`--dscp`, the
    /// upper six bits) kept: `--ecn` replaces only the two bits RFC 3168 gives it.
    pub fn on_tos(self, tos: Option<u8>) -> u8 {
        (tos.unwrap_or(0) & !ECN_MASK) | self.bits()
    }
}

/// What decides whether a TCP connection negotiates ECN on Linux, for the line
/// `--ecn` prints with TCP. Linux has no per-socket switch: the `net.ipv4.tcp_ecn`
/// sysctl (`sysctl` here, `None` when unreadable) decides for outgoing connections, a
/// route's `features ecn` asks for it on that route, and a congestion control that needs
/// ECN (dctcp, prague: `-C`) turns it on for its sockets. The IP_TOS ECN bits are
/// masked by the kernel on TCP sockets, so `--ecn`'s codepoint does not reach them.
pub fn tcp_ecn_note(sysctl: Option<u32>, congestion: Option<&str>) -> String {
    let cc_needs = congestion.is_some_and(|c| matches!(c, "dctcp" | "prague" | "bpf_dctcp"));
    let setting = match sysctl {
        Some(0) => "0: ECN off, neither requested nor accepted",
        Some(1) => "1: ECN requested on outgoing connections and accepted on incoming",
        Some(2) => "2: ECN accepted when the peer asks, not requested",
        Some(3) => "3: AccECN requested on outgoing connections and accepted on incoming",
        Some(4) => "4: classic ECN requested on outgoing, AccECN accepted on incoming",
        Some(5) => "5: AccECN accepted when the peer asks, not requested",
        Some(_) => "a value this netmeter does not know",
        None => "unreadable here",
    };
    let outcome = if cc_needs {
        "the congestion control asks for ECN on these sockets"
    } else if matches!(sysctl, Some(1 | 3 | 4)) {
        "this side requests ECN"
    } else {
        "this side requests ECN only on routes with `features ecn` (or with -C dctcp)"
    };
    format!(
        "--ecn with TCP: Linux has no per-socket ECN switch; net.ipv4.tcp_ecn is {setting}; {outcome}. Each stream's negotiated ECN is in its TCP figures\n"
    )
}

/// Cumulative datagram counts per ECN codepoint.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct EcnCounts {
    pub not_ect: u64,
    pub ect1: u64,
    pub ect0: u64,
    pub ce: u64,
}

impl EcnCounts {
    /// Count `datagrams` that arrived with the TOS (traffic class) byte `tos`.
    pub fn add(&mut self, tos: u8, datagrams: u64) {
        let slot = match tos & ECN_MASK {
            ECT1 => &mut self.ect1,
            ECT0 => &mut self.ect0,
            CE => &mut self.ce,
            _ => &mut self.not_ect,
        };
        *slot = slot.saturating_add(datagrams);
    }

    /// What was counted since `earlier` (saturating: a reset counter gives zeros).
    pub fn since(&self, earlier: &EcnCounts) -> EcnCounts {
        EcnCounts {
            not_ect: self.not_ect.saturating_sub(earlier.not_ect),
            ect1: self.ect1.saturating_sub(earlier.ect1),
            ect0: self.ect0.saturating_sub(earlier.ect0),
            ce: self.ce.saturating_sub(earlier.ce),
        }
    }

    /// Both counts added (saturating: a peer's counts are its word, not ours).
    pub fn plus(&self, o: &EcnCounts) -> EcnCounts {
        EcnCounts {
            not_ect: self.not_ect.saturating_add(o.not_ect),
            ect1: self.ect1.saturating_add(o.ect1),
            ect0: self.ect0.saturating_add(o.ect0),
            ce: self.ce.saturating_add(o.ce),
        }
    }

    /// All datagrams counted.
    pub fn total(&self) -> u64 {
        [self.ect1, self.ect0, self.ce]
            .iter()
            .fold(self.not_ect, |a, &b| a.saturating_add(b))
    }

    /// The share of datagrams that arrived CE-marked, percent (0 when none arrived).
    pub fn ce_percent(&self) -> f64 {
        percent(self.ce, self.total())
    }

    /// The figures with percentages, as the reports carry them.
    pub fn figures(&self) -> EcnFigures {
        let t = self.total();
        EcnFigures {
            counts: *self,
            not_ect_percent: percent(self.not_ect, t),
            ect1_percent: percent(self.ect1, t),
            ect0_percent: percent(self.ect0, t),
            ce_percent: percent(self.ce, t),
        }
    }
}

fn percent(part: u64, total: u64) -> f64 {
    if total > 0 {
        100.0 * part as f64 / total as f64
    } else {
        0.0
    }
}

/// ECN counts of an interval or the whole test with each one's share of the datagrams
/// (JSON `netmeter.ecn`, docs/ecn.md).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct EcnFigures {
    #[serde(flatten)]
    pub counts: EcnCounts,
    pub not_ect_percent: f64,
    pub ect1_percent: f64,
    pub ect0_percent: f64,
    pub ce_percent: f64,
}

/// The ECN counters of a TCP connection that Linux 6.18 added to TCP_INFO, cumulative
/// since the connection opened. The kernel keeps them as u32, so the byte counters
/// wrap every 4 GiB: [`AccEcnCounters::since`] takes differences modulo 2^32 (an
/// interval moves far less). `received_*` is what this end received; `delivered_*` is
/// what the peer reported receiving of what this end sent (AccECN feedback, so only
/// where the connection runs AccECN).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AccEcnCounters {
    /// `tcpi_received_ce`: CE-marked segments received.
    pub received_ce: u32,
    /// `tcpi_received_e1_bytes`, `_e0_bytes`, `_ce_bytes`: payload bytes received with
    /// ECT(1), ECT(0), CE.
    pub received_ect1_bytes: u32,
    pub received_ect0_bytes: u32,
    pub received_ce_bytes: u32,
    /// `tcpi_delivered_e1_bytes`, `_e0_bytes`, `_ce_bytes`: payload bytes the peer
    /// reported receiving with ECT(1), ECT(0), CE.
    pub delivered_ect1_bytes: u32,
    pub delivered_ect0_bytes: u32,
    pub delivered_ce_bytes: u32,
}

impl AccEcnCounters {
    /// What moved since `earlier` (the connection's start when `None`).
    pub fn since(&self, earlier: Option<&AccEcnCounters>) -> AccEcnFigures {
        let e = earlier.copied().unwrap_or_default();
        let d = |now: u32, then: u32| u64::from(now.wrapping_sub(then));
        AccEcnFigures {
            received_ce: d(self.received_ce, e.received_ce),
            received_ect1_bytes: d(self.received_ect1_bytes, e.received_ect1_bytes),
            received_ect0_bytes: d(self.received_ect0_bytes, e.received_ect0_bytes),
            received_ce_bytes: d(self.received_ce_bytes, e.received_ce_bytes),
            delivered_ect1_bytes: d(self.delivered_ect1_bytes, e.delivered_ect1_bytes),
            delivered_ect0_bytes: d(self.delivered_ect0_bytes, e.delivered_ect0_bytes),
            delivered_ce_bytes: d(self.delivered_ce_bytes, e.delivered_ce_bytes),
        }
    }
}

/// A TCP connection's AccECN counters over an interval (JSON `netmeter.tcp.ecn.accecn`
/// on a sender's rows, `netmeter.tcp_received_ecn` on a receiver's; docs/ecn.md).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct AccEcnFigures {
    pub received_ce: u64,
    pub received_ect1_bytes: u64,
    pub received_ect0_bytes: u64,
    pub received_ce_bytes: u64,
    pub delivered_ect1_bytes: u64,
    pub delivered_ect0_bytes: u64,
    pub delivered_ce_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codepoints_are_the_low_two_bits_whatever_the_dscp() {
        let mut c = EcnCounts::default();
        c.add(0xb8, 3); // EF, Not-ECT
        c.add(0xb8 | ECT1, 5);
        c.add(0x28 | ECT0, 7);
        c.add(0x28 | CE, 2);
        c.add(CE, 1);
        let want = EcnCounts {
            not_ect: 3,
            ect1: 5,
            ect0: 7,
            ce: 3,
        };
        assert_eq!(c, want);
        assert_eq!(c.total(), 18);
    }

    #[test]
    fn interval_deltas_and_percentages() {
        let a = EcnCounts {
            not_ect: 0,
            ect1: 90,
            ect0: 0,
            ce: 10,
        };
        let mut b = a;
        b.add(ECT1, 30);
        b.add(CE, 10);
        let d = b.since(&a);
        assert_eq!((d.ect1, d.ce, d.total()), (30, 10, 40));
        assert_eq!(d.ce_percent(), 25.0);
        let f = b.figures();
        assert_eq!(
            (f.ect1_percent, f.ce_percent),
            (85.71428571428571, 14.285714285714286)
        );
        assert_eq!(EcnCounts::default().figures().ce_percent, 0.0);
        assert_eq!(a.plus(&d), b);
        // A counter that went backwards (a reset) gives no negative counts.
        assert_eq!(a.since(&b), EcnCounts::default());
    }

    #[test]
    fn marks_keep_the_dscp() {
        assert_eq!(EcnMark::parse("ECT(1)"), Some(EcnMark::Ect1));
        assert_eq!(EcnMark::parse("ect0"), Some(EcnMark::Ect0));
        assert_eq!(EcnMark::parse("ce"), None);
        // --dscp ef (0xb8) with ect1; -S 0x2a (af11 + ECT(0) bits) with ect1.
        assert_eq!(EcnMark::Ect1.on_tos(Some(0xb8)), 0xb9);
        assert_eq!(EcnMark::Ect1.on_tos(Some(0x2a)), 0x29);
        assert_eq!(EcnMark::Ect0.on_tos(None), 0x02);
    }

    #[test]
    fn tcp_note_names_the_sysctl_and_what_follows() {
        let n = tcp_ecn_note(Some(2), None);
        assert!(
            n.contains("net.ipv4.tcp_ecn is 2") && n.contains("features ecn"),
            "{n}"
        );
        assert!(tcp_ecn_note(Some(1), None).contains("this side requests ECN."));
        assert!(tcp_ecn_note(Some(0), Some("dctcp")).contains("congestion control asks"));
        assert!(tcp_ecn_note(None, None).contains("unreadable"));
    }

    #[test]
    fn json_keys() {
        let f = EcnCounts {
            not_ect: 1,
            ect1: 0,
            ect0: 3,
            ce: 0,
        }
        .figures();
        let v = serde_json::to_value(f).unwrap();
        assert_eq!(v["not_ect"], 1);
        assert_eq!(v["ect0"], 3);
        assert_eq!(v["ect0_percent"], 75.0);
    }

    #[test]
    fn accecn_deltas_wrap_with_the_kernels_u32() {
        let a = AccEcnCounters {
            received_ce: 10,
            received_ce_bytes: u32::MAX - 99,
            delivered_ce_bytes: 5_000,
            ..AccEcnCounters::default()
        };
        let b = AccEcnCounters {
            received_ce: 14,
            received_ce_bytes: 900, // wrapped past 2^32
            delivered_ce_bytes: 8_000,
            ..a
        };
        let d = b.since(Some(&a));
        assert_eq!((d.received_ce, d.received_ce_bytes), (4, 1_000));
        assert_eq!(d.delivered_ce_bytes, 3_000);
        assert_eq!(a.since(None).received_ce, 10);
    }
}
