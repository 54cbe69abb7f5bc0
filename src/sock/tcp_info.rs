//! TCP_INFO, read by field name. The kernel's `struct tcp_info` grows with each release
//! and `getsockopt` returns only as many bytes as the running kernel knows, so every
//! field is valid only when the returned length covers it; a field the kernel did not
//! write reads as 0 (the behaviour netmeter has always had on older kernels).
//!
//! The syscall ([`tcp_info`]) is apart from the parsing ([`TcpInfo::parse`]), which is
//! pure and tested on byte buffers.

use std::mem::{offset_of, size_of};
use std::os::fd::{AsRawFd, BorrowedFd};

/// The kernel's `struct tcp_info` (`include/uapi/linux/tcp.h`) up to `tcpi_snd_wnd`
/// (Linux 5.4), the last field netmeter reads. Field names are the kernel's without
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
    assert!(size_of::<RawTcpInfo>() == 232);
};

/// The TCP_INFO figures netmeter uses, cumulative since the connection opened. A field
/// the kernel did not return (too old) is 0.
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
                if offset_of!(RawTcpInfo, $name) + size_of_val(&raw.$name) <= len {
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
            ..RawTcpInfo::default()
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
        assert_eq!((old.total_retrans, old.rtt_us, old.snd_cwnd), (7, 1234, 20));
        // A length that cuts a field in half leaves that field out too.
        let cut = TcpInfo::parse(&all[..offset_of!(RawTcpInfo, snd_wnd) + 2]);
        assert_eq!((cut.reord_seen, cut.snd_wnd), (2, 0));
        // Only the first 8 bytes: of what netmeter reads, the option bits.
        let first = TcpInfo {
            options: 0x0c,
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
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(tcp_info(u.as_fd()), None);
    }
}
