//! The platform layer: every system call netmeter makes beyond what `std` and
//! `socket2` offer, and all of its `unsafe` (the rest of the crate denies it). Linux
//! only for now; each function degrades to an error value, never a panic.
//!
//! Descriptors come in as [`BorrowedFd`]: the caller's socket stays open for the call,
//! and raw numbers exist only here, where libc wants them. This module imports nothing
//! above the pure core (`stats`), so the engine maps what it returns (e.g. [`TcpInfo`])
//! to the report's figures.
//!
//! - this file: socket options, single-socket reads, readiness waits, and the probed
//!   [`Capabilities`] of a data socket;
//! - [`tcp_info`](mod@tcp_info): TCP_INFO by field name;
//! - [`mmsg`]: batched UDP I/O (`sendmmsg`/`recvmmsg`), GSO/GRO, receive timestamps;
//! - [`zerocopy`]: `MSG_ZEROCOPY` and `sendfile`;
//! - [`options`]: IP_MTU_DISCOVER, IPv6 flow labels, protocol probes (SCTP, MPTCP);
//! - [`multicast`]: joining groups (any-source, source-specific), a sender's TTL, loopback, interface;
//! - [`netdev`]: interfaces and their addresses (getifaddrs), offloads (SIOCETHTOOL);
//! - [`process`]: CPU usage (process and thread), random bytes, affinity, malloc arenas, daemon, signals.

#![allow(unsafe_code)]

pub mod mmsg;
pub mod multicast;
pub mod netdev;
pub mod options;
pub mod process;
pub mod tcp_info;
pub mod zerocopy;

pub use mmsg::{Batch, Received, set_recv_tos, set_rx_timestamps, set_udp_gro, set_udp_gso};
pub use options::{
    mtu_discover, set_dont_fragment, set_flowlabel, stream_protocol_available, tcp_outq,
};
pub use process::{
    PageBuf, catch_hangup, catch_stop_signals, clear_stop, cpu_sample, daemonize, local_time_text,
    page_size, pin_to_cpu, random_bytes, release_free_memory, request_stop, stop_signal,
    system_info, take_hangup, thread_cpu_seconds, use_one_malloc_arena,
};
pub use tcp_info::{TcpInfo, tcp_info};
pub use zerocopy::{ZeroCopyDone, enable_msg_zerocopy, reap_zerocopy, send_msg_zerocopy, sendfile};

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn setsockopt<T>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    val: &T,
) -> io::Result<()> {
    // SAFETY: `val` points to a live, initialised T and we pass its exact size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            val as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    check(rc).map(|_| ())
}

/// The congestion control algorithm in effect on a TCP socket.
pub fn congestion(fd: BorrowedFd<'_>) -> Option<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is writable for `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let end = buf[..len as usize]
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(len as usize);
    Some(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// Set the congestion control algorithm (`-C`).
pub fn set_congestion(fd: BorrowedFd<'_>, algo: &str) -> io::Result<()> {
    // SAFETY: the pointer and length describe the bytes of `algo`.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            algo.as_ptr() as *const libc::c_void,
            algo.len() as libc::socklen_t,
        )
    };
    check(rc).map(|_| ())
}

/// Why the kernel refused `set_congestion`, in words: ENOENT is an algorithm it has
/// not loaded, EPERM one an unprivileged process may not choose (the lists are the
/// kernel's own files).
pub fn congestion_refused(e: &io::Error) -> String {
    let list = |file: &str| {
        std::fs::read_to_string(format!("/proc/sys/net/ipv4/{file}"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    match e.raw_os_error() {
        Some(libc::ENOENT) => format!(
            "this kernel has no such congestion control (it has: {})",
            list("tcp_available_congestion_control")
        ),
        Some(libc::EPERM) => format!(
            "only root may choose it (others may choose: {})",
            list("tcp_allowed_congestion_control")
        ),
        _ => e.to_string(),
    }
}

/// Set the kernel's pacing cap (SO_MAX_PACING_RATE) in bits per second.
pub fn set_max_pacing_rate(fd: BorrowedFd<'_>, bits_per_second: u64) -> io::Result<()> {
    let bytes: u64 = bits_per_second / 8;
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &bytes)
}

/// Datagrams the kernel dropped on this socket because its receive buffer was full
/// (`SO_MEMINFO`, index `SK_MEMINFO_DROPS`; Linux 4.6+).
pub fn socket_drops(fd: BorrowedFd<'_>) -> Option<u64> {
    const SO_MEMINFO: libc::c_int = 55;
    const SK_MEMINFO_DROPS: usize = 8;
    let mut v = [0u32; 9];
    let mut len = std::mem::size_of_val(&v) as libc::socklen_t;
    // SAFETY: v is writable for `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_MEMINFO,
            v.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    (rc == 0 && len as usize >= (SK_MEMINFO_DROPS + 1) * 4).then_some(v[SK_MEMINFO_DROPS] as u64)
}

/// The TCP maximum segment size of a connected socket.
pub fn tcp_mss(fd: BorrowedFd<'_>) -> Option<u32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v is a writable c_int and len is its size.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_MAXSEG,
            &mut v as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    (rc == 0 && v > 0).then_some(v as u32)
}

/// Receive and discard up to `len` bytes without copying them (`--skip-rx-copy`).
pub fn recv_trunc(fd: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    let mut dummy = 0u8;
    // SAFETY: with MSG_TRUNC on TCP the kernel discards data and writes nothing; the
    // buffer pointer is still valid for one byte in case it writes.
    let n = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            &mut dummy as *mut u8 as *mut libc::c_void,
            len,
            libc::MSG_TRUNC,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `recv` without blocking (`MSG_DONTWAIT`): `WouldBlock` when nothing is queued.
pub fn recv_nowait(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the whole call.
    let n = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// SO_BUSY_POLL: let blocking reads poll the device queue for `usec` µs (sockets on a
/// NAPI device; raising it above net.core.busy_read needs CAP_NET_ADMIN).
pub fn set_busy_poll(fd: BorrowedFd<'_>, usec: u32) -> io::Result<()> {
    let v = usec as libc::c_int;
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL, &v)
}

/// Wait until any of `fds` is readable (or closed), at most `timeout`; `ready[i]` tells
/// which. Returns how many are ready (0 on timeout or a signal).
pub fn poll_readable<'a>(
    fds: impl IntoIterator<Item = BorrowedFd<'a>>,
    timeout: std::time::Duration,
    ready: &mut Vec<bool>,
) -> io::Result<usize> {
    let mut p: Vec<libc::pollfd> = fds
        .into_iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `p` holds `p.len()` valid pollfds; a valid timespec; no signal mask.
    let rc = unsafe {
        libc::ppoll(
            p.as_mut_ptr(),
            p.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    ready.clear();
    ready.extend(p.iter().map(|x| x.revents != 0));
    if rc < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            ready.iter_mut().for_each(|r| *r = false);
            Ok(0)
        } else {
            Err(e)
        };
    }
    Ok(rc as usize)
}

/// Look at up to `buf.len()` received bytes without consuming them and without waiting
/// (`--connect-only` servers check a new connection's cookie this way).
pub fn peek_nowait(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the pointer and length describe `buf`, valid for writes for its length.
    let n = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Wait until `fd` is readable (or has a pending connection) or `timeout` passes.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: std::time::Duration) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one valid pollfd, count 1, a valid timespec, no signal mask.
    let rc = unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
    match rc {
        r if r < 0 => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            }
        }
        0 => Ok(false),
        _ => Ok(true),
    }
}

/// Whether `fd` is writable now, as the kernel would wake a writer (for TCP, what it
/// holds unsent under half of `TCP_NOTSENT_LOWAT` and room in the send buffer); an
/// error or hang-up counts as writable, for the next write to report. A TCP socket
/// found not writable is marked so that the kernel signals when it becomes so, as
/// after a refused write.
pub fn writable_now(fd: BorrowedFd<'_>) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd, count 1, no wait.
    let rc = unsafe { libc::poll(&mut p, 1, 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(p.revents & (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) != 0)
}

/// The number iperf3 shows for a socket (`[  5]`, `"socket": 5`): its descriptor.
/// A label for reports only; code that acts on the socket borrows it instead.
pub fn socket_number(s: &impl AsFd) -> i64 {
    s.as_fd().as_raw_fd() as i64
}

/// What the kernel granted one data socket, probed once when its stream is set up
/// ([`Capabilities::probe`]) and carried with the stream: the data loops read it to
/// choose their path, and the JSON record (`start.netmeter.data_path`,
/// `start.test_start.gso`/`gro`) says from it what was used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// UDP_SEGMENT: the kernel cuts each send into datagrams (UDP GSO).
    pub gso: bool,
    /// UDP_GRO: receives hand over coalesced runs of datagrams.
    pub gro: bool,
    /// SO_ZEROCOPY: sends may use `MSG_ZEROCOPY`.
    pub msg_zerocopy: bool,
    /// SO_TIMESTAMPNS: every received datagram carries its kernel arrival time.
    pub rx_timestamps: bool,
    /// SO_BUSY_POLL: blocking reads poll the device queue first.
    pub busy_poll: bool,
    /// IP_RECVTOS / IPV6_RECVTCLASS: every received message carries its TOS byte, for
    /// the ECN counts.
    pub recv_tos: bool,
}

/// What this kernel offers this process, probed on fresh sockets that are never
/// connected (for `--version`, as iperf3 lists its "optional features").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelFeatures {
    /// UDP_SEGMENT accepted on a UDP socket.
    pub udp_gso: bool,
    /// UDP_GRO accepted on a UDP socket.
    pub udp_gro: bool,
    /// SO_ZEROCOPY accepted on a TCP socket.
    pub msg_zerocopy: bool,
    /// An `IPPROTO_MPTCP` socket can be made (and `net.mptcp.enabled` is not 0).
    pub mptcp: bool,
    /// An `IPPROTO_SCTP` socket can be made.
    pub sctp: bool,
    /// SO_MAX_PACING_RATE accepted on a TCP socket.
    pub pacing: bool,
    /// TCP_CONGESTION readable on a TCP socket.
    pub congestion: bool,
}

/// Probe [`KernelFeatures`]: each socket option is tried on a socket of its own; a
/// refusal (or a socket the kernel will not make) means "not available".
pub fn kernel_features() -> KernelFeatures {
    use socket2::{Domain, Protocol, Socket, Type};
    let udp = Socket::new(Domain::IPV4, Type::DGRAM, None).ok();
    let tcp = Socket::new(Domain::IPV4, Type::STREAM, None).ok();
    let made =
        |proto: i32| Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::from(proto))).is_ok();
    let mptcp_enabled =
        std::fs::read_to_string("/proc/sys/net/mptcp/enabled").map_or(true, |v| v.trim() != "0");
    KernelFeatures {
        udp_gso: udp.as_ref().is_some_and(|s| set_udp_gso(s.as_fd(), 1400)),
        udp_gro: udp.as_ref().is_some_and(|s| set_udp_gro(s.as_fd())),
        msg_zerocopy: tcp.as_ref().is_some_and(|s| enable_msg_zerocopy(s.as_fd())),
        mptcp: mptcp_enabled && made(libc::IPPROTO_MPTCP),
        sctp: made(libc::IPPROTO_SCTP),
        pacing: tcp
            .as_ref()
            .is_some_and(|s| set_max_pacing_rate(s.as_fd(), u64::MAX).is_ok()),
        congestion: tcp
            .as_ref()
            .is_some_and(|s| congestion(s.as_fd()).is_some()),
    }
}

/// What to ask of a data socket. Which capabilities a stream wants is the caller's
/// policy (flags, stream role); [`Capabilities::probe`] only asks the kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Wanted {
    /// UDP GSO with datagrams of this size.
    pub gso_segment: Option<u16>,
    pub gro: bool,
    pub msg_zerocopy: bool,
    pub rx_timestamps: bool,
    /// SO_BUSY_POLL for this many µs.
    pub busy_poll_us: Option<u32>,
    pub recv_tos: bool,
}

impl Capabilities {
    /// Switch on what `want` asks for; each is granted where the kernel accepts the
    /// socket option (an older kernel or another socket type refuses: that one is off,
    /// and the stream takes its plain path).
    pub fn probe(fd: BorrowedFd<'_>, want: &Wanted) -> Capabilities {
        Capabilities {
            gso: want.gso_segment.is_some_and(|s| set_udp_gso(fd, s)),
            gro: want.gro && set_udp_gro(fd),
            msg_zerocopy: want.msg_zerocopy && enable_msg_zerocopy(fd),
            rx_timestamps: want.rx_timestamps && set_rx_timestamps(fd),
            busy_poll: want
                .busy_poll_us
                .is_some_and(|us| set_busy_poll(fd, us).is_ok()),
            recv_tos: want.recv_tos && set_recv_tos(fd),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_options_on_loopback_connection() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        assert!(tcp_mss(c.as_fd()).unwrap() > 0);
        assert!(congestion(c.as_fd()).is_some());
        assert_eq!(socket_number(&c), c.as_raw_fd() as i64);
    }

    #[test]
    fn receive_buffer_drops_are_counted() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket2::SockRef::from(&b)
            .set_recv_buffer_size(4096)
            .unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        for _ in 0..200 {
            let _ = a.send(&[0u8; 1000]);
        }
        assert!(socket_drops(b.as_fd()).unwrap() > 0);
        assert_eq!(socket_drops(a.as_fd()), Some(0));
    }

    #[test]
    fn probing_grants_only_what_was_asked_and_offered() {
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(
            Capabilities::probe(u.as_fd(), &Wanted::default()),
            Capabilities::default()
        );
        // A UDP socket never takes a TCP-only option, whatever the kernel.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let want = Wanted {
            gso_segment: Some(1000),
            gro: true,
            ..Wanted::default()
        };
        let tcp = Capabilities::probe(c.as_fd(), &want);
        assert!(!tcp.gso && !tcp.gro, "{tcp:?}");
        let want = Wanted {
            rx_timestamps: true,
            ..Wanted::default()
        };
        let udp = Capabilities::probe(u.as_fd(), &want);
        assert!(
            udp.rx_timestamps && !udp.gso && !udp.msg_zerocopy,
            "{udp:?}"
        );
    }
}
