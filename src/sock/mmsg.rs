//! Batched UDP I/O: `sendmmsg`/`recvmmsg` ([`Batch`]), UDP segmentation and receive
//! offload (GSO/GRO), and kernel receive timestamps. One syscall moves up to a batch of
//! messages, and with GSO/GRO one message holds up to 128 datagrams (64 KiB); this is what lets a
//! UDP test reach line rate on one core (docs/benchmarks.md).

use super::{check, setsockopt};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `UDP_SEGMENT` and `UDP_GRO` socket options (`linux/udp.h`), level `SOL_UDP`.
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;

/// Ask the kernel to split every send into `segment`-byte datagrams (UDP GSO); 0 turns
/// it off. Returns false where the kernel does not offer it.
pub fn set_udp_gso(fd: BorrowedFd<'_>, segment: u16) -> bool {
    let v: libc::c_int = segment as libc::c_int;
    setsockopt(fd, libc::SOL_UDP, UDP_SEGMENT, &v).is_ok()
}

/// Ask the kernel to hand over coalesced runs of datagrams (UDP GRO). Returns false where
/// the kernel does not offer it.
pub fn set_udp_gro(fd: BorrowedFd<'_>) -> bool {
    let v: libc::c_int = 1;
    setsockopt(fd, libc::SOL_UDP, UDP_GRO, &v).is_ok()
}

/// Have the kernel stamp every received datagram with its arrival time (SO_TIMESTAMPNS,
/// CLOCK_REALTIME), read back by [`Batch::recv_segments`]. Returns false where the kernel
/// does not offer it.
pub fn set_rx_timestamps(fd: BorrowedFd<'_>) -> bool {
    let v: libc::c_int = 1;
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &v).is_ok()
}

/// Have the kernel hand over every received datagram's TOS byte (IP_RECVTOS) or IPv6
/// traffic class (IPV6_RECVTCLASS), read back by [`Batch::recv_segments`] for ECN
/// counting (`stats::ecn`). Both are asked for: an IPv6 socket receives IPv4-mapped
/// traffic with an IPv4 header. Returns false where neither is taken.
pub fn set_recv_tos(fd: BorrowedFd<'_>) -> bool {
    let v: libc::c_int = 1;
    let v4 = setsockopt(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, &v).is_ok();
    let v6 = setsockopt(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, &v).is_ok();
    v4 || v6
}

/// One received message: its length and, with GRO, the size of the datagrams in it
/// (0 when the message is a single datagram).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Received {
    pub len: usize,
    pub segment: usize,
    /// Kernel arrival time since the Unix epoch, with [`set_rx_timestamps`] on.
    pub stamp: Option<std::time::Duration>,
    /// The TOS byte (IPv4) or traffic class (IPv6) the message arrived with, with
    /// [`set_recv_tos`] on; under GRO one for all of the message's datagrams.
    pub tos: Option<u8>,
}

/// Batched UDP I/O over a connected socket: one syscall for many datagrams.
pub struct Batch {
    iov: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    /// Control-message space per message, for the GRO segment size (24 bytes), the
    /// receive timestamp (32 bytes) and the TOS byte or traffic class (24 bytes).
    cmsg: Vec<[u64; CMSG_WORDS]>,
}

/// 8-byte words of control-message space per received message (96 bytes: 80 used).
const CMSG_WORDS: usize = 12;

// SAFETY: the raw pointers inside point into buffers owned by the caller for the
// duration of each call only; a Batch carries no references between calls.
unsafe impl Send for Batch {}

impl Batch {
    /// Room for up to `n` datagrams per call.
    pub fn new(n: usize) -> Batch {
        Batch {
            // SAFETY: iovec and mmsghdr are plain old data; all-zero is a valid value.
            iov: vec![unsafe { std::mem::zeroed() }; n],
            // SAFETY: as above.
            hdrs: vec![unsafe { std::mem::zeroed() }; n],
            cmsg: vec![[0u64; CMSG_WORDS]; n],
        }
    }

    /// Send the given datagrams with `sendmmsg`; returns how many were sent.
    pub fn send(&mut self, fd: BorrowedFd<'_>, bufs: &[&[u8]]) -> io::Result<usize> {
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
        let rc =
            unsafe { libc::sendmmsg(fd.as_raw_fd(), self.hdrs.as_mut_ptr(), n as libc::c_uint, 0) };
        check(rc).map(|r| r as usize)
    }

    /// Receive up to `bufs.len()` messages with `recvmmsg` (waiting for the first),
    /// with each one's GRO segment size and kernel arrival time, into `out`.
    pub fn recv_segments(
        &mut self,
        fd: BorrowedFd<'_>,
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
            self.hdrs[i].msg_hdr.msg_controllen = std::mem::size_of::<[u64; CMSG_WORDS]>() as _;
            self.hdrs[i].msg_len = 0;
        }
        // SAFETY: hdrs[..n] point at iovecs describing writable buffers owned by `bufs`
        // and at control buffers owned by self, all alive for the call.
        let rc = unsafe {
            libc::recvmmsg(
                fd.as_raw_fd(),
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
            let mut tos = None;
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
                    } else if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_TOS
                    {
                        // One byte (ip_cmsg_recv_tos).
                        tos = Some(std::ptr::read_unaligned(libc::CMSG_DATA(c)));
                    } else if (*c).cmsg_level == libc::IPPROTO_IPV6
                        && (*c).cmsg_type == libc::IPV6_TCLASS
                    {
                        // An int holding the traffic class (ip6_datagram_recv_specific_ctl).
                        let p = libc::CMSG_DATA(c) as *const libc::c_int;
                        tos = Some((std::ptr::read_unaligned(p) & 0xff) as u8);
                    }
                    c = libc::CMSG_NXTHDR(&h.msg_hdr, c);
                }
            }
            out.push(Received {
                len: h.msg_len as usize,
                segment,
                stamp,
                tos,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn batched_udp_round_trip() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        let mut batch = Batch::new(4);
        let msgs: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i; 10 + i as usize]).collect();
        let refs: Vec<&[u8]> = msgs.iter().map(|m| m.as_slice()).collect();
        assert_eq!(batch.send(a.as_fd(), &refs).unwrap(), 3);
        let mut bufs = vec![vec![0u8; 64]; 4];
        let mut got = Vec::new();
        let mut total = 0;
        while total < 3 {
            batch.recv_segments(b.as_fd(), &mut bufs, &mut got).unwrap();
            total += got.len();
        }
        assert_eq!(total, 3);
    }

    #[test]
    fn gso_send_gro_receive_on_loopback() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        if !set_udp_gso(a.as_fd(), 100) || !set_udp_gro(b.as_fd()) {
            return; // kernel without UDP GSO/GRO: nothing to check here
        }
        let mut batch = Batch::new(2);
        let buf = vec![7u8; 1000]; // ten 100-byte datagrams in one send
        assert_eq!(batch.send(a.as_fd(), &[&buf]).unwrap(), 1);
        let mut bufs = vec![vec![0u8; 65536]; 2];
        let mut got = Vec::new();
        let mut datagrams = 0;
        let mut bytes = 0;
        while bytes < 1000 {
            batch.recv_segments(b.as_fd(), &mut bufs, &mut got).unwrap();
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
    fn tos_byte_comes_with_each_message_v4_and_v6() {
        for (any, tos) in [("127.0.0.1:0", 0x2a_u32), ("[::1]:0", 0xb9)] {
            let Ok(b) = std::net::UdpSocket::bind(any) else {
                continue; // no IPv6 here
            };
            let a = std::net::UdpSocket::bind(any).unwrap();
            a.connect(b.local_addr().unwrap()).unwrap();
            let s = socket2::SockRef::from(&a);
            if b.local_addr().unwrap().is_ipv6() {
                s.set_tclass_v6(tos).unwrap();
            } else {
                s.set_tos_v4(tos).unwrap();
            }
            assert!(set_recv_tos(b.as_fd()));
            a.send(&[1u8; 20]).unwrap();
            let mut batch = Batch::new(1);
            let (mut bufs, mut got) = (vec![vec![0u8; 64]], Vec::new());
            batch.recv_segments(b.as_fd(), &mut bufs, &mut got).unwrap();
            assert_eq!(got[0].tos, Some(tos as u8), "{any}");
        }
    }

    #[test]
    fn gro_keeps_the_tos_with_timestamps_on() {
        // All three control messages at once fit the per-message space.
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        socket2::SockRef::from(&a).set_tos_v4(0x01).unwrap();
        if !set_udp_gso(a.as_fd(), 100) || !set_udp_gro(b.as_fd()) {
            return;
        }
        assert!(set_recv_tos(b.as_fd()) && set_rx_timestamps(b.as_fd()));
        let mut batch = Batch::new(2);
        assert_eq!(batch.send(a.as_fd(), &[&[7u8; 1000]]).unwrap(), 1);
        let (mut bufs, mut got) = (vec![vec![0u8; 65536]; 2], Vec::new());
        batch.recv_segments(b.as_fd(), &mut bufs, &mut got).unwrap();
        assert_eq!(got[0].tos, Some(0x01), "{got:?}");
        assert_eq!(got[0].segment, 100, "{got:?}");
        assert!(got[0].stamp.is_some(), "{got:?}");
    }

    #[test]
    fn receive_timestamps_come_with_each_datagram() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        if !set_rx_timestamps(b.as_fd()) {
            return; // kernel without SO_TIMESTAMPNS
        }
        a.send(&[1u8; 20]).unwrap();
        let mut batch = Batch::new(1);
        let (mut bufs, mut got) = (vec![vec![0u8; 64]], Vec::new());
        batch.recv_segments(b.as_fd(), &mut bufs, &mut got).unwrap();
        assert_eq!(got.len(), 1);
        assert!(got[0].stamp.is_some_and(|t| t.as_secs() > 0), "{got:?}");
    }
}
