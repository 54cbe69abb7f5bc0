//! TCP_INFO, read by field name. The kernel's `struct tcp_info` grows with each release
//! and `getsockopt` returns only as many bytes as the running kernel knows, so every
//! field is valid only when the returned length covers it; a field the kernel did not
//! write reads as 0 (the behaviour netmeter has always had on older kernels).
//!
//! The syscall ([`tcp_info`]) is apart from the parsing ([`TcpInfo::parse`]), which is
//! pure and tested on byte buffers.
//!
//! The layout past `tcpi_snd_wnd` is newer than the installed C headers, so it is
//! written down here from the kernel's `include/uapi/linux/tcp.h`: `tcpi_rcv_wnd` and
//! `tcpi_rehash` (Linux 6.2), `tcpi_total_rto`, `tcpi_total_rto_recoveries`,
//! `tcpi_total_rto_time` (6.7), then the ECN fields of Linux 6.18 (Accurate ECN):
//! `tcpi_received_ce`, the six AccECN byte counters and two u16, `tcpi_accecn_fail_mode`
//! and `tcpi_accecn_opt_seen`, 280 bytes in all. Figures from fields the kernel did not
//! write are `None`, never 0. Later kernels turn those last four bytes into one word of
//! bitfields that starts with `tcpi_ecn_mode`, at the same length, so the returned
//! length cannot tell which layout a kernel has: netmeter does not read them.

use std::mem::{offset_of, size_of};
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::stats::AccEcnCounters;

/// The kernel's `struct tcp_info` (`include/uapi/linux/tcp.h`) as of Linux 6.18. Field names are the kernel's without
/// the `tcpi_` prefix; the two bitfield bytes are kept whole. All fields are plain
/// integers laid out without padding (checked below), so any byte pattern is a valid
/// value.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawTcpInfo {
    pub state: u8,
    pub ca_state: u8,
    pub retransmits: u8,
    pub probes: u8,
    pub backoff: u8,
    pub options: u8,
    /// `tcpi_snd_wscale : 4, tcpi_rcv_wscale : 4`.
    pub wscale: u8,
    /// `tcpi_delivery_rate_app_limited : 1, tcpi_fastopen_client_fail : 2`.
    pub app_limited_flags: u8,

    pub rto: u32,
    pub ato: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,

    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub fackets: u32,

    pub last_data_sent: u32,
    pub last_ack_sent: u32,
    pub last_data_recv: u32,
    pub last_ack_recv: u32,

    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    pub rtt: u32,
    pub rttvar: u32,
    pub snd_ssthresh: u32,
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,

    pub rcv_rtt: u32,
    pub rcv_space: u32,

    pub total_retrans: u32,

    pub pacing_rate: u64,
    pub max_pacing_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,

    pub notsent_bytes: u32,
    pub min_rtt: u32,
    pub data_segs_in: u32,
    pub data_segs_out: u32,

    pub delivery_rate: u64,

    pub busy_time: u64,
    pub rwnd_limited: u64,
    pub sndbuf_limited: u64,

    pub delivered: u32,
    pub delivered_ce: u32,

    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    pub dsack_dups: u32,
    pub reord_seen: u32,

    pub rcv_ooopack: u32,

    pub snd_wnd: u32,
    /// Linux 6.2.
    pub rcv_wnd: u32,
    pub rehash: u32,
    /// Linux 6.7.
    pub total_rto: u16,
    pub total_rto_recoveries: u16,
    pub total_rto_time: u32,
    /// Linux 6.18 (AccECN).
    pub received_ce: u32,
    pub delivered_e1_bytes: u32,
    pub delivered_e0_bytes: u32,
    pub delivered_ce_bytes: u32,
    pub received_e1_bytes: u32,
    pub received_e0_bytes: u32,
    pub received_ce_bytes: u32,
    /// Linux 6.18's two u16 (a bitfield word with `tcpi_ecn_mode` on later kernels, at
    /// the same length): not read.
    pub accecn_fail_mode: u16,
    pub accecn_opt_seen: u16,
}

// The layout must be the kernel's: offsets from linux/tcp.h (as netmeter read them as
// bare offsets before), and no padding anywhere.
const _: () = {
    assert!(offset_of!(RawTcpInfo, snd_mss) == 16);
    assert!(offset_of!(RawTcpInfo, unacked) == 24);
    assert!(offset_of!(RawTcpInfo, pmtu) == 60);
    assert!(offset_of!(RawTcpInfo, rtt) == 68);
    assert!(offset_of!(RawTcpInfo, rttvar) == 72);
    assert!(offset_of!(RawTcpInfo, snd_cwnd) == 80);
    assert!(offset_of!(RawTcpInfo, total_retrans) == 100);
    assert!(offset_of!(RawTcpInfo, pacing_rate) == 104);
    assert!(offset_of!(RawTcpInfo, delivery_rate) == 160);
    assert!(offset_of!(RawTcpInfo, bytes_sent) == 200);
    assert!(offset_of!(RawTcpInfo, dsack_dups) == 216);
    assert!(offset_of!(RawTcpInfo, reord_seen) == 220);
    assert!(offset_of!(RawTcpInfo, snd_wnd) == 228);
    assert!(offset_of!(RawTcpInfo, rcv_wnd) == 232);
    assert!(offset_of!(RawTcpInfo, total_rto) == 240);
    assert!(offset_of!(RawTcpInfo, total_rto_time) == 244);
    assert!(offset_of!(RawTcpInfo, received_ce) == 248);
    assert!(offset_of!(RawTcpInfo, delivered_e1_bytes) == 252);
    assert!(offset_of!(RawTcpInfo, received_ce_bytes) == 272);
    assert!(offset_of!(RawTcpInfo, accecn_fail_mode) == 276);
    assert!(size_of::<RawTcpInfo>() == 280);
};

/// Whether the kernel wrote the field `$name` of `$raw` (its bytes lie within the first
/// `$len`).
macro_rules! covered {
    ($raw:expr, $len:expr, $name:ident) => {
        offset_of!(RawTcpInfo, $name) + size_of_val(&$raw.$name) <= $len
    };
}

/// The TCP_INFO figures netmeter uses, cumulative since the connection opened. A plain
/// field the kernel did not return (too old) is 0; the 6.18 ECN figures are `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// `tcpi_snd_mss`: the sender's maximum segment size, bytes.
    pub snd_mss: u32,
    /// `tcpi_unacked`: segments sent and not yet acknowledged.
    pub unacked: u32,
    /// `tcpi_pmtu`: path MTU, bytes.
    pub pmtu: u32,
    /// `tcpi_rtt`: smoothed round-trip time, µs.
    pub rtt_us: u32,
    /// `tcpi_rttvar`: round-trip time variation, µs.
    pub rttvar_us: u32,
    /// `tcpi_snd_cwnd`: congestion window, segments.
    pub snd_cwnd: u32,
    /// `tcpi_total_retrans`: segments retransmitted since the connection opened.
    pub total_retrans: u32,
    /// `tcpi_dsack_dups` (Linux 4.19+): segments the receiver reported (D-SACK) as
    /// received twice, i.e. retransmissions that were not needed. 0 with receivers that
    /// do not send D-SACKs.
    pub dsack_dups: u32,
    /// `tcpi_reord_seen` (Linux 4.19+): reordering events seen.
    pub reord_seen: u32,
    /// `tcpi_snd_wnd` (Linux 5.4+): the peer's advertised receive window, bytes.
    pub snd_wnd: u32,
    /// `tcpi_options`: TCPI_OPT_* bits the connection negotiated ([`TcpInfo::ecn`]).
    pub options: u8,
    /// `tcpi_delivered` (Linux 4.18+): segments delivered to the peer, retransmits
    /// included.
    pub delivered: u32,
    /// `tcpi_delivered_ce` (Linux 4.18+): of those, the segments the peer echoed as
    /// CE-marked (ECE on the ACK; with classic ECN the echo repeats until CWR, so an
    /// upper bound; with AccECN exact).
    pub delivered_ce: u32,
    /// `tcpi_bytes_acked` (Linux 4.1+): payload bytes the peer acknowledged
    /// (`netmeter rpm` counts an upload's goodput with it).
    pub bytes_acked: u64,
    /// `tcpi_delivery_rate` (Linux 4.9+): the connection's most recent delivery rate
    /// sample, bytes a second.
    pub delivery_rate: u64,
    /// `tcpi_delivery_rate_app_limited`: that sample was taken while the sender had
    /// less to send than the window allowed, so the path may carry more.
    pub delivery_rate_app_limited: bool,
    /// `tcpi_notsent_bytes` (Linux 4.6+): bytes written and not yet sent.
    pub notsent_bytes: u32,
    /// The AccECN counters (Linux 6.18+); `None` from an older kernel.
    pub accecn: Option<AccEcnCounters>,
}

/// `tcpi_options` bit: ECN was negotiated on the connection (`linux/tcp.h`).
const TCPI_OPT_ECN: u8 = 0x08;

impl TcpInfo {
    /// ECN was negotiated in the handshake (`TCPI_OPT_ECN`).
    pub fn ecn(&self) -> bool {
        self.options & TCPI_OPT_ECN != 0
    }

    /// Congestion window in bytes (segments × MSS).
    pub fn snd_cwnd_bytes(&self) -> u64 {
        self.snd_cwnd as u64 * self.snd_mss as u64
    }

    /// Bytes in flight: unacknowledged segments × MSS.
    pub fn bytes_in_flight(&self) -> u64 {
        self.unacked as u64 * self.snd_mss as u64
    }

    /// The figures from `raw`, of which the kernel wrote the first `len` bytes: a field
    /// that does not lie wholly within them reads as 0.
    pub fn from_raw(raw: &RawTcpInfo, len: usize) -> TcpInfo {
        macro_rules! field {
            ($name:ident) => {
                if covered!(raw, len, $name) {
                    raw.$name
                } else {
                    0
                }
            };
        }
        TcpInfo {
            snd_mss: field!(snd_mss),
            unacked: field!(unacked),
            pmtu: field!(pmtu),
            rtt_us: field!(rtt),
            rttvar_us: field!(rttvar),
            snd_cwnd: field!(snd_cwnd),
            total_retrans: field!(total_retrans),
            dsack_dups: field!(dsack_dups),
            reord_seen: field!(reord_seen),
            snd_wnd: field!(snd_wnd),
            options: field!(options),
            delivered: field!(delivered),
            delivered_ce: field!(delivered_ce),
            bytes_acked: field!(bytes_acked),
            delivery_rate: field!(delivery_rate),
            delivery_rate_app_limited: field!(app_limited_flags) & 1 != 0,
            notsent_bytes: field!(notsent_bytes),
            // The 6.18 counters came together; `tcpi_received_ce_bytes` is their last.
            accecn: covered!(raw, len, received_ce_bytes).then(|| AccEcnCounters {
                received_ce: raw.received_ce,
                received_ect1_bytes: raw.received_e1_bytes,
                received_ect0_bytes: raw.received_e0_bytes,
                received_ce_bytes: raw.received_ce_bytes,
                delivered_ect1_bytes: raw.delivered_e1_bytes,
                delivered_ect0_bytes: raw.delivered_e0_bytes,
                delivered_ce_bytes: raw.delivered_ce_bytes,
            }),
        }
    }

    /// The figures from the bytes TCP_INFO returned (in native byte order, as the
    /// kernel writes them); bytes beyond [`RawTcpInfo`] are ignored.
    pub fn parse(bytes: &[u8]) -> TcpInfo {
        let mut raw = RawTcpInfo::default();
        let len = bytes.len().min(size_of::<RawTcpInfo>());
        // SAFETY: RawTcpInfo is repr(C), made only of integers and without padding, so
        // any bytes are a valid value; `len` is at most its size and at most the
        // length of `bytes`; the two do not overlap (`raw` is a fresh local).
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                (&mut raw as *mut RawTcpInfo).cast::<u8>(),
                len,
            );
        }
        TcpInfo::from_raw(&raw, len)
    }
}

/// Read TCP_INFO of a TCP socket; `None` when the call fails (not a TCP socket).
pub fn tcp_info(fd: BorrowedFd<'_>) -> Option<TcpInfo> {
    let mut raw = RawTcpInfo::default();
    let mut len = size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: `raw` is writable for `len` bytes (its size) and any bytes are a valid
    // RawTcpInfo; the kernel writes at most `len` and updates `len` with what it wrote.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw as *mut RawTcpInfo).cast::<libc::c_void>(),
            &mut len,
        )
    };
    (rc == 0).then(|| TcpInfo::from_raw(&raw, len as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_of(raw: &RawTcpInfo) -> Vec<u8> {
        // SAFETY: RawTcpInfo is repr(C) integers without padding: all of its
        // size_of bytes are initialised, and `raw` outlives the borrow.
        unsafe {
            std::slice::from_raw_parts(
                (raw as *const RawTcpInfo).cast::<u8>(),
                size_of::<RawTcpInfo>(),
            )
        }
        .to_vec()
    }

    fn sample() -> RawTcpInfo {
        RawTcpInfo {
            snd_mss: 1448,
            unacked: 10,
            pmtu: 1500,
            rtt: 1234,
            rttvar: 56,
            snd_cwnd: 20,
            total_retrans: 7,
            dsack_dups: 3,
            reord_seen: 2,
            snd_wnd: 65535,
            pacing_rate: u64::MAX,
            options: 0x08 | 0x04,
            delivered: 900,
            delivered_ce: 45,
            bytes_acked: 123_456_789_012,
            delivery_rate: 2_350_000,
            app_limited_flags: 0x01 | 0x04,
            notsent_bytes: 4_096,
            received_ce: 17,
            delivered_e1_bytes: 1_000,
            delivered_e0_bytes: 2_000,
            delivered_ce_bytes: 3_000,
            received_e1_bytes: 4_000,
            received_e0_bytes: 5_000,
            received_ce_bytes: 6_000,
            accecn_opt_seen: 2,
            ..RawTcpInfo::default()
        }
    }

    fn accecn() -> AccEcnCounters {
        AccEcnCounters {
            received_ce: 17,
            received_ect1_bytes: 4_000,
            received_ect0_bytes: 5_000,
            received_ce_bytes: 6_000,
            delivered_ect1_bytes: 1_000,
            delivered_ect0_bytes: 2_000,
            delivered_ce_bytes: 3_000,
        }
    }

    #[test]
    fn parses_every_field_by_name() {
        let info = TcpInfo::parse(&bytes_of(&sample()));
        assert_eq!(
            info,
            TcpInfo {
                snd_mss: 1448,
                unacked: 10,
                pmtu: 1500,
                rtt_us: 1234,
                rttvar_us: 56,
                snd_cwnd: 20,
                total_retrans: 7,
                dsack_dups: 3,
                reord_seen: 2,
                snd_wnd: 65535,
                options: 0x0c,
                delivered: 900,
                delivered_ce: 45,
                bytes_acked: 123_456_789_012,
                delivery_rate: 2_350_000,
                delivery_rate_app_limited: true,
                notsent_bytes: 4_096,
                accecn: Some(accecn()),
            }
        );
        assert!(info.ecn());
        assert!(!TcpInfo::default().ecn());
        assert_eq!(info.snd_cwnd_bytes(), 20 * 1448);
        assert_eq!(info.bytes_in_flight(), 10 * 1448);
        // Bytes past the known struct (a newer kernel) change nothing.
        let mut longer = bytes_of(&sample());
        longer.extend_from_slice(&[0xff; 64]);
        assert_eq!(TcpInfo::parse(&longer), info);
    }

    #[test]
    fn an_older_kernel_leaves_the_newer_fields_at_zero() {
        let all = bytes_of(&sample());
        // Linux 4.18 and older stop before tcpi_dsack_dups (offset 216).
        let old = TcpInfo::parse(&all[..offset_of!(RawTcpInfo, dsack_dups)]);
        assert_eq!((old.dsack_dups, old.reord_seen, old.snd_wnd), (0, 0, 0));
        assert_eq!(old.accecn, None);
        // Linux 6.7 to 6.17 (248 bytes): no AccECN figures.
        let pre = TcpInfo::parse(&all[..offset_of!(RawTcpInfo, received_ce)]);
        assert_eq!((pre.accecn, pre.snd_wnd), (None, 65535));
        assert!(pre.ecn());
        // The counters cut short: none of them.
        assert_eq!(TcpInfo::parse(&all[..274]).accecn, None);
        assert!(TcpInfo::parse(&all[..276]).accecn.is_some());
        assert_eq!(TcpInfo::parse(&all).accecn, Some(accecn()));
        assert_eq!((old.total_retrans, old.rtt_us, old.snd_cwnd), (7, 1234, 20));
        // A length that cuts a field in half leaves that field out too.
        let cut = TcpInfo::parse(&all[..offset_of!(RawTcpInfo, snd_wnd) + 2]);
        assert_eq!((cut.reord_seen, cut.snd_wnd), (2, 0));
        // Only the first 8 bytes: of what netmeter reads, the option bits and the
        // delivery rate's app-limited bit (its rate comes later).
        let first = TcpInfo {
            options: 0x0c,
            delivery_rate_app_limited: true,
            ..TcpInfo::default()
        };
        assert_eq!(TcpInfo::parse(&all[..8]), first);
        assert_eq!(TcpInfo::parse(&all[..5]), TcpInfo::default());
        assert_eq!(TcpInfo::parse(&[]), TcpInfo::default());
    }

    #[test]
    fn tcp_info_on_loopback_connection() {
        use std::os::fd::AsFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let info = tcp_info(c.as_fd()).unwrap();
        assert!(info.snd_cwnd_bytes() > 0);
        // This kernel's length decides the AccECN figures: present from 6.18 on.
        let (major, minor) = kernel_version();
        assert_eq!(
            info.accecn.is_some(),
            (major, minor) >= (6, 18),
            "{major}.{minor}"
        );
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(tcp_info(u.as_fd()), None);
    }

    fn kernel_version() -> (u32, u32) {
        let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mut it = r.trim().split(['.', '-']).map(|p| p.parse().unwrap_or(0));
        (it.next().unwrap_or(0), it.next().unwrap_or(0))
    }
}
