//! Socket options that `socket2` does not offer, for iperf3 3.22's options:
//! `--dont-fragment` (IP_MTU_DISCOVER), `-L` (IPv6 flow labels), and the probes that
//! say whether this kernel has a protocol at all (`--sctp`, `-m`).

use super::{check, setsockopt};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `--dont-fragment`: set DF on every IPv4 datagram and never fragment locally
/// (`IP_PMTUDISC_DO`, as iperf3 on Linux): a datagram larger than the path MTU fails
/// with EMSGSIZE instead of leaving in fragments.
pub fn set_dont_fragment(fd: BorrowedFd<'_>) -> io::Result<()> {
    setsockopt(
        fd,
        libc::IPPROTO_IP,
        libc::IP_MTU_DISCOVER,
        &(libc::IP_PMTUDISC_DO as libc::c_int),
    )
}

/// The socket's IP_MTU_DISCOVER mode (`libc::IP_PMTUDISC_*`).
pub fn mtu_discover(fd: BorrowedFd<'_>) -> io::Result<i32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and len are valid for writes and len holds v's size.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            &mut v as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    check(rc).map(|_| v)
}

/// `struct in6_flowlabel_req` (include/uapi/linux/in6.h).
#[repr(C)]
struct FlowlabelReq {
    dst: [u8; 16],
    /// Network byte order.
    label: u32,
    action: u8,
    share: u8,
    flags: u16,
    expires: u16,
    linger: u16,
    pad: u32,
}

const IPV6_FLOWLABEL_MGR: libc::c_int = 32;
const IPV6_FLOWINFO_SEND: libc::c_int = 33;
const IPV6_FL_A_GET: u8 = 0;
const IPV6_FL_S_ANY: u8 = 255;
const IPV6_FL_F_CREATE: u16 = 1;

/// `-L`: lease flow label `label` (1..=0xfffff) towards `dst` and have the socket send
/// the flow information of the address it connects to, as iperf3 does. Returns the
/// `sin6_flowinfo` value (network byte order) to connect with.
pub fn set_flowlabel(fd: BorrowedFd<'_>, label: u32, dst: std::net::Ipv6Addr) -> io::Result<u32> {
    let req = FlowlabelReq {
        dst: dst.octets(),
        label: (label & 0xfffff).to_be(),
        action: IPV6_FL_A_GET,
        share: IPV6_FL_S_ANY,
        flags: IPV6_FL_F_CREATE,
        expires: 0,
        linger: 0,
        pad: 0,
    };
    setsockopt(fd, libc::IPPROTO_IPV6, IPV6_FLOWLABEL_MGR, &req)?;
    setsockopt(
        fd,
        libc::IPPROTO_IPV6,
        IPV6_FLOWINFO_SEND,
        &(1 as libc::c_int),
    )?;
    Ok(req.label)
}

/// Bytes a TCP socket still holds to send or to have acknowledged (SIOCOUTQ): 0 once
/// the peer's kernel has everything written so far.
pub fn tcp_outq(fd: BorrowedFd<'_>) -> io::Result<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (= TIOCOUTQ) writes one int through the valid pointer.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
    check(rc).map(|_| n.max(0) as usize)
}

/// Whether this kernel can open a `SOCK_STREAM` socket of `protocol` (e.g.
/// `libc::IPPROTO_SCTP`, `libc::IPPROTO_MPTCP`); the kernel's error otherwise
/// (EPROTONOSUPPORT when the protocol is not built or loaded, ENOPROTOOPT when MPTCP
/// is switched off by `net.mptcp.enabled=0`).
pub fn stream_protocol_available(protocol: i32) -> io::Result<()> {
    // SAFETY: plain socket(2) call; the descriptor is closed below.
    let fd = check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, protocol) })?;
    // SAFETY: fd was just returned by socket() and is owned here only.
    unsafe { libc::close(fd) };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn dont_fragment_sets_pmtudisc_do() {
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_ne!(mtu_discover(u.as_fd()).unwrap(), libc::IP_PMTUDISC_DO);
        set_dont_fragment(u.as_fd()).unwrap();
        assert_eq!(mtu_discover(u.as_fd()).unwrap(), libc::IP_PMTUDISC_DO);
    }

    #[test]
    fn outq_empties_once_the_peer_has_the_bytes() {
        use std::io::Write;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _a = l.accept().unwrap();
        c.write_all(&[7u8; 1000]).unwrap();
        let t0 = std::time::Instant::now();
        while tcp_outq(c.as_fd()).unwrap() != 0 {
            assert!(t0.elapsed().as_secs() < 5);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn tcp_is_available_and_a_bogus_protocol_is_not() {
        stream_protocol_available(libc::IPPROTO_TCP).unwrap();
        assert!(stream_protocol_available(253).is_err());
    }
}
