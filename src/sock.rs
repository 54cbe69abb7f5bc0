//! Every system call netmeter makes beyond what `std` and `socket2` offer, and all of its
//! `unsafe`. Linux only for now; each function degrades to an error value, never a panic.

#![allow(unsafe_code)]

use crate::report::TcpFigures;
use crate::stats::CpuSample;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` points to a live, initialised T and we pass its exact size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            val as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    check(rc).map(|_| ())
}

/// Cumulative TCP_INFO of a socket: the interval figures plus the running retransmit total.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpInfo {
    pub figures: TcpFigures,
    /// `tcpi_total_retrans`, cumulative since the connection opened.
    pub total_retrans: u64,
    /// Unacknowledged segments times MSS: bytes in flight.
    pub bytes_in_flight: u64,
    /// `tcpi_dsack_dups`, cumulative: segments the receiver reported (D-SACK) as
    /// received twice, i.e. retransmissions that were not needed. 0 where the kernel's
    /// TCP_INFO is too old to have it, and with receivers that do not send D-SACKs.
    pub dsack_dups: u64,
}

/// Read TCP_INFO (Linux layout of `struct tcp_info`, offsets from `linux/tcp.h`).
pub fn tcp_info(fd: RawFd) -> Option<TcpInfo> {
    let mut buf = [0u8; 232];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is writable for `len` bytes; the kernel writes at most `len` and
    // updates `len` with what it wrote.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let len = len as usize;
    let u32_at = |off: usize| -> u64 {
        if off + 4 <= len {
            u32::from_ne_bytes([buf[off], buf[off + 1], buf[off + 2], buf[off + 3]]) as u64
        } else {
            0
        }
    };
    let mss = u32_at(16);
    Some(TcpInfo {
        figures: TcpFigures {
            retransmits: 0,
            snd_cwnd: u32_at(80) * mss,
            snd_wnd: u32_at(228),
            rtt: u32_at(68),
            rttvar: u32_at(72),
            pmtu: u32_at(60),
            reorder: u32_at(220),
        },
        total_retrans: u32_at(100),
        bytes_in_flight: u32_at(24) * mss,
        dsack_dups: u32_at(216),
    })
}

/// The congestion control algorithm in effect on a TCP socket.
pub fn congestion(fd: RawFd) -> Option<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is writable for `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
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
pub fn set_congestion(fd: RawFd, algo: &str) -> io::Result<()> {
    // SAFETY: the pointer and length describe the bytes of `algo`.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            algo.as_ptr() as *const libc::c_void,
            algo.len() as libc::socklen_t,
        )
    };
    check(rc).map(|_| ())
}

/// Set the kernel's pacing cap (SO_MAX_PACING_RATE) in bits per second.
pub fn set_max_pacing_rate(fd: RawFd, bits_per_second: u64) -> io::Result<()> {
    let bytes: u64 = bits_per_second / 8;
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &bytes)
}

/// Datagrams the kernel dropped on this socket because its receive buffer was full
/// (`SO_MEMINFO`, index `SK_MEMINFO_DROPS`; Linux 4.6+).
pub fn socket_drops(fd: RawFd) -> Option<u64> {
    const SO_MEMINFO: libc::c_int = 55;
    const SK_MEMINFO_DROPS: usize = 8;
    let mut v = [0u32; 9];
    let mut len = std::mem::size_of_val(&v) as libc::socklen_t;
    // SAFETY: v is writable for `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_MEMINFO,
            v.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    (rc == 0 && len as usize >= (SK_MEMINFO_DROPS + 1) * 4).then_some(v[SK_MEMINFO_DROPS] as u64)
}

/// The TCP maximum segment size of a connected socket.
pub fn tcp_mss(fd: RawFd) -> Option<u32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v is a writable c_int and len is its size.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_MAXSEG,
            &mut v as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    (rc == 0 && v > 0).then_some(v as u32)
}

/// Process CPU (user, system) and a monotonic wall time.
pub fn cpu_sample(origin: Instant) -> CpuSample {
    // SAFETY: rusage is plain old data; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: &mut ru is a valid pointer to an rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let (user_s, system_s) = if rc == 0 {
        (tv(ru.ru_utime), tv(ru.ru_stime))
    } else {
        (0.0, 0.0)
    };
    CpuSample {
        wall_s: origin.elapsed().as_secs_f64(),
        user_s,
        system_s,
    }
}

/// Fill `buf` from the kernel's random source.
pub fn random_bytes(buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the pointer and length describe the unfilled tail of `buf`.
        let n = unsafe {
            libc::getrandom(
                buf[done..].as_mut_ptr() as *mut libc::c_void,
                buf.len() - done,
                0,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        done += n as usize;
    }
    Ok(())
}

/// `uname -a`-like text for `start.system_info`.
pub fn system_info() -> String {
    // SAFETY: utsname is plain old data; uname fills it with NUL-terminated strings.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: &mut u is a valid pointer.
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::new();
    }
    let f = |a: &[libc::c_char]| {
        let bytes: Vec<u8> = a
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!(
        "{} {} {} {} {}",
        f(&u.sysname),
        f(&u.nodename),
        f(&u.release),
        f(&u.version),
        f(&u.machine)
    )
}

/// Pin the calling thread (and the threads it creates afterwards) to one CPU (`-A`).
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain old data; CPU_ZERO/CPU_SET only write inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "CPU number too large",
        ));
    }
    // SAFETY: cpu is below CPU_SETSIZE, checked above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; set is a valid cpu_set_t of the given size.
    check(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) })
        .map(|_| ())
}

/// Make every thread allocate from glibc's main heap (`M_ARENA_MAX` = 1). By default each
/// new thread may get a malloc arena of its own (up to 8 per CPU); `malloc_trim` gives
/// back their free chunks but not the top of their heaps, so after a `-P 128` test each of
/// 15 arenas kept 130 KiB or more resident (2–4.5 MiB in all) for good. Data threads allocate
/// their buffers when they start; the only per-batch allocation (a UDP sender's list of at
/// most 32 slices) comes from glibc's per-thread cache without the arena lock, so sharing
/// one arena costs no throughput. Call before spawning threads: arenas that already exist
/// stay in use.
pub fn use_one_malloc_arena() {
    // SAFETY: mallopt only sets a glibc tunable; M_ARENA_MAX takes any positive value.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Give freed heap memory back to the kernel. A test's stream threads allocate their
/// buffers on the heap; glibc keeps freed pages after the threads end, so a
/// long-running server would stay at its high-water mark.
pub fn release_free_memory() {
    // SAFETY: malloc_trim only walks glibc's own heap bookkeeping.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Detach from the terminal (`-D`). Must run before any thread is spawned.
pub fn daemonize() -> io::Result<()> {
    // SAFETY: called while the process is single-threaded; daemon() forks and the
    // parent exits inside libc.
    check(unsafe { libc::daemon(1, 0) }).map(|_| ())
}

/// The signal that asked this process to stop (SIGINT, SIGTERM or SIGHUP), 0 if none.
static STOP_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn on_stop_signal(sig: libc::c_int) {
    // Only an atomic store (async-signal-safe). A second signal while the first is
    // still being handled means the user wants out now: leave without cleanup.
    if STOP_SIGNAL.swap(sig, std::sync::atomic::Ordering::SeqCst) != 0 {
        // SAFETY: _exit is async-signal-safe and takes no pointers.
        unsafe { libc::_exit(1) }
    }
}

/// Catch SIGINT, SIGTERM and SIGHUP (iperf3 stops on the same three): the handler only
/// records the signal; the engine polls [`stop_signal`] at its bounded waits, ends the
/// test cleanly and reports what it measured. SA_RESTART keeps the data threads' blocking
/// calls from failing with EINTR; the control waits use ppoll, which returns at once.
pub fn catch_stop_signals() -> io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the handler
        // is an `extern "C" fn(c_int)` that only touches an atomic; the old action is not
        // asked for (null).
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        check(rc)?;
    }
    Ok(())
}

/// The stop signal received so far, if any (see [`catch_stop_signals`]).
pub fn stop_signal() -> Option<i32> {
    match STOP_SIGNAL.load(std::sync::atomic::Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Receive and discard up to `len` bytes without copying them (`--skip-rx-copy`).
pub fn recv_trunc(fd: RawFd, len: usize) -> io::Result<usize> {
    let mut dummy = 0u8;
    // SAFETY: with MSG_TRUNC on TCP the kernel discards data and writes nothing; the
    // buffer pointer is still valid for one byte in case it writes.
    let n = unsafe {
        libc::recv(
            fd,
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
pub fn recv_nowait(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the whole call.
    let n = unsafe {
        libc::recv(
            fd,
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
pub fn set_busy_poll(fd: RawFd, usec: u32) -> io::Result<()> {
    let v = usec as libc::c_int;
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL, &v)
}

/// Wait until any of `fds` is readable (or closed), at most `timeout`; `ready[i]` tells
/// which. Returns how many are ready (0 on timeout or a signal).
pub fn poll_readable(
    fds: &[RawFd],
    timeout: std::time::Duration,
    ready: &mut Vec<bool>,
) -> io::Result<usize> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
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
pub fn peek_nowait(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the pointer and length describe `buf`, valid for writes for its length.
    let n = unsafe {
        libc::recv(
            fd,
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

/// Send `count` bytes of `file` from `offset` on a socket without a user-space copy (`-Z`).
pub fn sendfile(sock: RawFd, file: RawFd, offset: i64, count: usize) -> io::Result<usize> {
    let mut off: libc::off_t = offset;
    // SAFETY: both descriptors are open for the duration of the call; off is valid.
    let n = unsafe { libc::sendfile(sock, file, &mut off, count) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `SO_ZEROCOPY` (asm-generic/socket.h) and the zero-copy completion codes
/// (linux/errqueue.h), which the libc crate does not define.
const SO_ZEROCOPY: libc::c_int = 60;
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

/// Allow `MSG_ZEROCOPY` sends on a TCP socket; false where the kernel refuses.
pub fn enable_msg_zerocopy(fd: RawFd) -> bool {
    let one: libc::c_int = 1;
    setsockopt(fd, libc::SOL_SOCKET, SO_ZEROCOPY, &one).is_ok()
}

/// `send(MSG_ZEROCOPY)`: the kernel pins `buf`'s pages instead of copying them and
/// reports on the error queue when it has released them (`reap_zerocopy`). The caller
/// must not modify `buf` until then.
pub fn send_msg_zerocopy(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the whole call; the
    // kernel keeps its own page references beyond it.
    let n = unsafe {
        libc::send(
            fd,
            buf.as_ptr() as *const libc::c_void,
            buf.len(),
            libc::MSG_ZEROCOPY,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Zero-copy completions read from a socket's error queue.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ZeroCopyDone {
    /// `MSG_ZEROCOPY` sends whose pages the kernel has released.
    pub sends: u64,
    /// Of those, sends the kernel copied after all (loopback delivery, for one).
    pub copied: u64,
}

/// Read every pending zero-copy completion without blocking.
pub fn reap_zerocopy(fd: RawFd) -> io::Result<ZeroCopyDone> {
    let mut done = ZeroCopyDone::default();
    loop {
        let mut control = [0u64; 16]; // 128 bytes, 8-aligned: room for one error cmsg
        // SAFETY: msghdr is plain data; all-zero is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: msg points to a valid control buffer of the stated length and no
        // data buffers; the kernel writes at most msg_controllen bytes.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(done),
                _ => Err(e),
            };
        }
        // SAFETY: the kernel filled msg_control/msg_controllen; CMSG_* walk it within
        // those bounds, and each error cmsg carries a sock_extended_err.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let ip_err = ((*c).cmsg_level == libc::SOL_IP
                    && (*c).cmsg_type == libc::IP_RECVERR)
                    || ((*c).cmsg_level == libc::SOL_IPV6 && (*c).cmsg_type == libc::IPV6_RECVERR);
                if ip_err {
                    let ee = std::ptr::read_unaligned(
                        libc::CMSG_DATA(c) as *const libc::sock_extended_err
                    );
                    if ee.ee_errno == 0 && ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY {
                        // [ee_info, ee_data]: an inclusive range of send counters.
                        let k = ee.ee_data.wrapping_sub(ee.ee_info) as u64 + 1;
                        done.sends += k;
                        if ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0 {
                            done.copied += k;
                        }
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
    }
}

/// `UDP_SEGMENT` and `UDP_GRO` socket options (`linux/udp.h`), level `SOL_UDP`.
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;

/// Ask the kernel to split every send into `segment`-byte datagrams (UDP GSO). Returns
/// false where the kernel does not offer it.
pub fn set_udp_gso(fd: RawFd, segment: u16) -> bool {
    let v: libc::c_int = segment as libc::c_int;
    setsockopt(fd, libc::SOL_UDP, UDP_SEGMENT, &v).is_ok()
}

/// Ask the kernel to hand over coalesced runs of datagrams (UDP GRO). Returns false where
/// the kernel does not offer it.
pub fn set_udp_gro(fd: RawFd) -> bool {
    let v: libc::c_int = 1;
    setsockopt(fd, libc::SOL_UDP, UDP_GRO, &v).is_ok()
}

/// Have the kernel stamp every received datagram with its arrival time (SO_TIMESTAMPNS,
/// CLOCK_REALTIME), read back by [`Batch::recv_segments`]. Returns false where the kernel
/// does not offer it.
pub fn set_rx_timestamps(fd: RawFd) -> bool {
    let v: libc::c_int = 1;
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &v).is_ok()
}

/// One received message: its length and, with GRO, the size of the datagrams in it
/// (0 when the message is a single datagram).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Received {
    pub len: usize,
    pub segment: usize,
    /// Kernel arrival time since the Unix epoch, with [`set_rx_timestamps`] on.
    pub stamp: Option<std::time::Duration>,
}

/// Batched UDP I/O over a connected socket: one syscall for many datagrams.
pub struct Batch {
    iov: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    /// Control-message space per message, for the GRO segment size (24 bytes) and the
    /// receive timestamp (32 bytes).
    cmsg: Vec<[u64; 8]>,
}

// SAFETY: the raw pointers inside point into buffers owned by the caller for the
// duration of each call only; a Batch carries no references between calls.
unsafe impl Send for Batch {}

impl Batch {
    /// Room for up to `n` datagrams per call.
    pub fn new(n: usize) -> Batch {
        Batch {
            // SAFETY: iovec and mmsghdr are plain old data; all-zero is a valid value.
            iov: vec![unsafe { std::mem::zeroed() }; n],
            hdrs: vec![unsafe { std::mem::zeroed() }; n],
            cmsg: vec![[0u64; 8]; n],
        }
    }

    /// Send the given datagrams with `sendmmsg`; returns how many were sent.
    pub fn send(&mut self, fd: RawFd, bufs: &[&[u8]]) -> io::Result<usize> {
        let n = bufs.len().min(self.hdrs.len());
        for (i, b) in bufs.iter().enumerate().take(n) {
            self.iov[i] = libc::iovec {
                iov_base: b.as_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            };
            // SAFETY: all-zero is a valid msghdr.
            self.hdrs[i].msg_hdr = unsafe { std::mem::zeroed() };
            self.hdrs[i].msg_hdr.msg_iov = &mut self.iov[i];
            self.hdrs[i].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: hdrs[..n] point at iovecs that point into `bufs`, alive for this call.
        let rc = unsafe { libc::sendmmsg(fd, self.hdrs.as_mut_ptr(), n as libc::c_uint, 0) };
        check(rc).map(|r| r as usize)
    }
}

impl Batch {
    /// Like [`Batch::recv`], but also reads the GRO segment size of each message.
    pub fn recv_segments(
        &mut self,
        fd: RawFd,
        bufs: &mut [Vec<u8>],
        out: &mut Vec<Received>,
    ) -> io::Result<()> {
        let n = bufs.len().min(self.hdrs.len());
        for (i, b) in bufs.iter_mut().enumerate().take(n) {
            self.iov[i] = libc::iovec {
                iov_base: b.as_mut_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            };
            // SAFETY: all-zero is a valid msghdr.
            self.hdrs[i].msg_hdr = unsafe { std::mem::zeroed() };
            self.hdrs[i].msg_hdr.msg_iov = &mut self.iov[i];
            self.hdrs[i].msg_hdr.msg_iovlen = 1;
            self.hdrs[i].msg_hdr.msg_control = self.cmsg[i].as_mut_ptr() as *mut libc::c_void;
            self.hdrs[i].msg_hdr.msg_controllen = std::mem::size_of::<[u64; 8]>() as _;
            self.hdrs[i].msg_len = 0;
        }
        // SAFETY: hdrs[..n] point at iovecs describing writable buffers owned by `bufs`
        // and at control buffers owned by self, all alive for the call.
        let rc = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        let got = check(rc)? as usize;
        out.clear();
        for h in &self.hdrs[..got] {
            let mut segment = 0usize;
            let mut stamp = None;
            // SAFETY: the kernel filled msg_control/msg_controllen; CMSG_* walk only
            // within that length.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&h.msg_hdr);
                while !c.is_null() {
                    if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == UDP_GRO {
                        let p = libc::CMSG_DATA(c) as *const libc::c_int;
                        segment = std::ptr::read_unaligned(p).max(0) as usize;
                    } else if (*c).cmsg_level == libc::SOL_SOCKET
                        && (*c).cmsg_type == libc::SO_TIMESTAMPNS
                    {
                        let ts: libc::timespec =
                            std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                        stamp = Some(std::time::Duration::new(
                            ts.tv_sec.max(0) as u64,
                            ts.tv_nsec.clamp(0, 999_999_999) as u32,
                        ));
                    }
                    c = libc::CMSG_NXTHDR(&h.msg_hdr, c);
                }
            }
            out.push(Received {
                len: h.msg_len as usize,
                segment,
                stamp,
            });
        }
        Ok(())
    }
}

/// Wait until `fd` is readable (or has a pending connection) or `timeout` passes.
pub fn wait_readable(fd: RawFd, timeout: std::time::Duration) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
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

/// The raw descriptor of anything socket-like.
pub fn fd_of<T: AsRawFd>(s: &T) -> RawFd {
    s.as_raw_fd()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_info_on_loopback_connection() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let info = tcp_info(c.as_raw_fd()).unwrap();
        assert!(info.figures.snd_cwnd > 0);
        assert!(tcp_mss(c.as_raw_fd()).unwrap() > 0);
        assert!(congestion(c.as_raw_fd()).is_some());
    }

    #[test]
    fn batched_udp_round_trip() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        let mut batch = Batch::new(4);
        let msgs: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i; 10 + i as usize]).collect();
        let refs: Vec<&[u8]> = msgs.iter().map(|m| m.as_slice()).collect();
        assert_eq!(batch.send(a.as_raw_fd(), &refs).unwrap(), 3);
        let mut bufs = vec![vec![0u8; 64]; 4];
        let mut got = Vec::new();
        let mut total = 0;
        while total < 3 {
            batch
                .recv_segments(b.as_raw_fd(), &mut bufs, &mut got)
                .unwrap();
            total += got.len();
        }
        assert_eq!(total, 3);
    }

    #[test]
    fn gso_send_gro_receive_on_loopback() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        if !set_udp_gso(a.as_raw_fd(), 100) || !set_udp_gro(b.as_raw_fd()) {
            return; // kernel without UDP GSO/GRO: nothing to check here
        }
        let mut batch = Batch::new(2);
        let buf = vec![7u8; 1000]; // ten 100-byte datagrams in one send
        assert_eq!(batch.send(a.as_raw_fd(), &[&buf]).unwrap(), 1);
        let mut bufs = vec![vec![0u8; 65536]; 2];
        let mut got = Vec::new();
        let mut datagrams = 0;
        let mut bytes = 0;
        while bytes < 1000 {
            batch
                .recv_segments(b.as_raw_fd(), &mut bufs, &mut got)
                .unwrap();
            for r in &got {
                bytes += r.len;
                datagrams += if r.segment > 0 {
                    r.len.div_ceil(r.segment)
                } else {
                    1
                };
            }
        }
        assert_eq!((bytes, datagrams), (1000, 10));
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
        assert!(socket_drops(b.as_raw_fd()).unwrap() > 0);
        assert_eq!(socket_drops(a.as_raw_fd()), Some(0));
    }

    #[test]
    fn cpu_and_random() {
        let s = cpu_sample(Instant::now());
        assert!(s.user_s >= 0.0);
        let mut b = [0u8; 37];
        random_bytes(&mut b).unwrap();
        assert!(!system_info().is_empty());
    }
}
