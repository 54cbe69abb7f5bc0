//! Multicast socket options: joining a group (any-source, or source-specific where the
//! kernel filters by sender), and a sender's TTL / hop limit, loopback and outgoing
//! interface. The option names follow iperf 2's `Listener::my_multicast_join` (2.1.8):
//! IP_ADD_MEMBERSHIP / IPV6_JOIN_GROUP for any-source, the protocol-independent
//! MCAST_JOIN_SOURCE_GROUP for (S,G) in both families, and IP_MULTICAST_ALL off so a
//! socket hears only the groups it joined.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;

use socket2::{InterfaceIndexOrAddress, SockAddr, SockAddrStorage, Socket};

/// The index of interface `name` (`if_nametoindex`).
pub fn if_index(name: &str) -> io::Result<u32> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name has a NUL"))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(i)
}

/// Join `group` on `sock` (bound to the group's port), on interface `ifindex` (0: the
/// kernel's choice by route), from `source` only when given (SSM).
pub fn join(sock: &Socket, group: IpAddr, source: Option<IpAddr>, ifindex: u32) -> io::Result<()> {
    if group.is_ipv4() {
        // Only the groups joined on this socket, not every group some socket on the
        // host joined (Linux's default, IP_MULTICAST_ALL on).
        sock.set_multicast_all_v4(false)?;
    }
    match (group, source) {
        (IpAddr::V4(g), None) => {
            let iface = if ifindex == 0 {
                InterfaceIndexOrAddress::Address(Ipv4Addr::UNSPECIFIED)
            } else {
                InterfaceIndexOrAddress::Index(ifindex)
            };
            sock.join_multicast_v4_n(&g, &iface)
        }
        (IpAddr::V6(g), None) => sock.join_multicast_v6(&g, ifindex),
        (g, Some(s)) => join_source_group(sock, g, s, ifindex),
    }
}

/// MCAST_JOIN_SOURCE_GROUP (RFC 3678): (S,G) on interface `ifindex`, either family.
fn join_source_group(sock: &Socket, group: IpAddr, source: IpAddr, ifindex: u32) -> io::Result<()> {
    if group.is_ipv4() != source.is_ipv4() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the source and the group are of different address families",
        ));
    }
    let level = if group.is_ipv4() {
        libc::IPPROTO_IP
    } else {
        libc::IPPROTO_IPV6
    };
    // SAFETY: group_source_req is plain old data; all-zero is a valid value.
    let mut req: libc::group_source_req = unsafe { std::mem::zeroed() };
    req.gsr_interface = ifindex;
    copy_storage(&mut req.gsr_group, SocketAddr::new(group, 0));
    copy_storage(&mut req.gsr_source, SocketAddr::new(source, 0));
    // SAFETY: `req` is a live, initialised group_source_req and we pass its exact size;
    // the descriptor is `sock`'s, open for the call.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            libc::MCAST_JOIN_SOURCE_GROUP,
            (&raw const req).cast(),
            std::mem::size_of::<libc::group_source_req>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn copy_storage(to: &mut libc::sockaddr_storage, a: SocketAddr) {
    let sa = SockAddr::from(a);
    let len = (sa.len() as usize).min(std::mem::size_of::<libc::sockaddr_storage>());
    // SAFETY: both regions are valid for `len` bytes (len is capped at the storage's
    // size, and `sa` holds at least `sa.len()` bytes); they do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(
            sa.as_ptr().cast::<u8>(),
            (to as *mut libc::sockaddr_storage).cast::<u8>(),
            len,
        );
    }
}

/// Have the kernel stamp every datagram `sock` receives with its arrival time
/// (SO_TIMESTAMPNS, CLOCK_REALTIME), read back by [`recv_stamped`]. iperf 2's receiver
/// does the same (SO_TIMESTAMP, `Server::InitKernelTimeStamping`), and so does
/// netmeter's unicast UDP receiver: the jitter is then the path's, not the time the
/// receiving thread took to be scheduled. Returns false where the kernel refuses.
pub fn set_rx_timestamps(sock: &Socket) -> bool {
    crate::sock::mmsg::set_rx_timestamps(std::os::fd::AsFd::as_fd(sock))
}

/// One datagram read by [`recv_stamped`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamped {
    pub len: usize,
    pub from: SocketAddr,
    /// The kernel's arrival time since the Unix epoch ([`set_rx_timestamps`] on), else
    /// `None` (the caller stamps it with its own clock).
    pub arrival: Option<std::time::Duration>,
}

/// Receive one datagram into `buf` (`recvmsg`, blocking as the socket's read timeout
/// says) with its sender's address and the kernel's arrival time.
pub fn recv_stamped(sock: &impl AsRawFd, buf: &mut [u8]) -> io::Result<Stamped> {
    let mut name = SockAddrStorage::zeroed();
    let mut cmsg = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: all-zero is a valid msghdr.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&raw mut name).cast();
    msg.msg_namelen = name.size_of();
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cmsg) as _;
    // SAFETY: `msg` points at `name`, `iov` (describing `buf`) and `cmsg`, all live and
    // writable for the call, each with its exact size.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &raw mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut arrival = None;
    // SAFETY: the kernel filled msg_control/msg_controllen; CMSG_* walk only within
    // that length, and each read is of the type the header names.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&raw const msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SO_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                arrival = Some(std::time::Duration::new(
                    ts.tv_sec.max(0) as u64,
                    ts.tv_nsec.clamp(0, 999_999_999) as u32,
                ));
            }
            c = libc::CMSG_NXTHDR(&raw const msg, c);
        }
    }
    // SAFETY: the kernel wrote a socket address of `msg_namelen` bytes into `name`.
    let from = unsafe { SockAddr::new(name, msg.msg_namelen) }
        .as_socket()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not an IP sender"))?;
    Ok(Stamped {
        len: n as usize,
        from,
        arrival,
    })
}

/// Where a multicast sender's datagrams leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outgoing {
    /// The route's interface.
    Route,
    /// The interface with this index.
    Index(u32),
    /// The interface holding this IPv4 address (`-B addr`).
    Address(Ipv4Addr),
}

/// A sender's options: TTL / hop limit, multicast loopback (iperf 2 leaves it at the
/// kernel's default, on; netmeter turns it off unless asked, so a host's own receiver
/// does not hear the test twice), and the outgoing interface.
pub fn set_sender(
    sock: &Socket,
    v6: bool,
    ttl: u32,
    looped: bool,
    out: Outgoing,
) -> io::Result<()> {
    if v6 {
        sock.set_multicast_hops_v6(ttl)?;
        sock.set_multicast_loop_v6(looped)?;
        match out {
            Outgoing::Index(i) => sock.set_multicast_if_v6(i)?,
            Outgoing::Address(_) | Outgoing::Route => {}
        }
    } else {
        sock.set_multicast_ttl_v4(ttl)?;
        sock.set_multicast_loop_v4(looped)?;
        match out {
            Outgoing::Index(i) => set_multicast_ifindex_v4(sock, i)?,
            Outgoing::Address(a) => sock.set_multicast_if_v4(&a)?,
            Outgoing::Route => {}
        }
    }
    Ok(())
}

/// IP_MULTICAST_IF by interface index (`struct ip_mreqn`).
fn set_multicast_ifindex_v4(sock: &Socket, index: u32) -> io::Result<()> {
    let req = libc::ip_mreqn {
        imr_multiaddr: libc::in_addr { s_addr: 0 },
        imr_address: libc::in_addr { s_addr: 0 },
        imr_ifindex: index as libc::c_int,
    };
    // SAFETY: `req` is a live, initialised ip_mreqn and we pass its exact size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_MULTICAST_IF,
            (&raw const req).cast(),
            std::mem::size_of::<libc::ip_mreqn>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::{Domain, Protocol, Type};

    #[test]
    fn loopback_has_an_index_and_nonsense_has_none() {
        assert!(if_index("lo").unwrap() > 0);
        assert!(if_index("no-such-if0").is_err());
        assert!(if_index("a\0b").is_err());
    }

    #[test]
    fn sender_options_are_set_as_asked() {
        let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        set_sender(&s, false, 8, false, Outgoing::Route).unwrap();
        assert_eq!(s.multicast_ttl_v4().unwrap(), 8);
        assert!(!s.multicast_loop_v4().unwrap());
        let s6 = Socket::new(Domain::IPV6, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        set_sender(&s6, true, 3, true, Outgoing::Index(if_index("lo").unwrap())).unwrap();
        assert_eq!(s6.multicast_hops_v6().unwrap(), 3);
        assert!(s6.multicast_loop_v6().unwrap());
    }

    /// The arrival time is the kernel's, taken when the datagram arrived, not when
    /// it was read: a datagram known to be queued (peeked) before `t` is stamped
    /// before `t`, however late the read comes.
    #[test]
    fn the_arrival_time_is_the_kernels_not_the_reads() {
        let rx = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        rx.bind(&SockAddr::from(SocketAddr::from(([127, 0, 0, 1], 0))))
            .unwrap();
        assert!(set_rx_timestamps(&rx));
        let rx: std::net::UdpSocket = rx.into();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"0123456789", rx.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 64];
        // Blocks until the datagram is queued.
        rx.peek(&mut buf).unwrap();
        let queued = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        let got = recv_stamped(&rx, &mut buf).unwrap();
        assert_eq!(got.len, 10);
        assert_eq!(got.from, tx.local_addr().unwrap());
        let at = got.arrival.expect("a kernel timestamp");
        assert!(at <= queued, "{at:?} after {queued:?}");
    }

    #[test]
    fn mixed_families_are_refused_before_the_kernel() {
        let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        let e = join(
            &s,
            "232.1.1.1".parse().unwrap(),
            Some("::1".parse().unwrap()),
            0,
        )
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
