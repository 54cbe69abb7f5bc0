//! Sending without a user-space copy (`-Z`): `MSG_ZEROCOPY` with its error-queue
//! completions, and `sendfile` where a socket does not take `MSG_ZEROCOPY`. Kept apart
//! because the pages handed to the kernel here outlive the call that sends them.

use super::setsockopt;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Send `count` bytes of `file` from `offset` on a socket without a user-space copy (`-Z`).
pub fn sendfile(
    sock: BorrowedFd<'_>,
    file: BorrowedFd<'_>,
    offset: i64,
    count: usize,
) -> io::Result<usize> {
    let mut off: libc::off_t = offset;
    // SAFETY: both descriptors are open for the duration of the call (borrowed); off is
    // a valid off_t.
    let n = unsafe { libc::sendfile(sock.as_raw_fd(), file.as_raw_fd(), &mut off, count) };
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
pub fn enable_msg_zerocopy(fd: BorrowedFd<'_>) -> bool {
    let one: libc::c_int = 1;
    setsockopt(fd, libc::SOL_SOCKET, SO_ZEROCOPY, &one).is_ok()
}

/// `send(MSG_ZEROCOPY)`: the kernel pins `buf`'s pages instead of copying them and
/// reports on the error queue when it has released them (`reap_zerocopy`). The caller
/// must not modify `buf` until then.
pub fn send_msg_zerocopy(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the whole call; the
    // kernel keeps its own page references beyond it.
    let n = unsafe {
        libc::send(
            fd.as_raw_fd(),
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
pub fn reap_zerocopy(fd: BorrowedFd<'_>) -> io::Result<ZeroCopyDone> {
    let mut done = ZeroCopyDone::default();
    loop {
        let mut control = [0u64; 16]; // 128 bytes, 8-aligned: room for one error cmsg
        // SAFETY: msghdr is plain data; all-zero is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: msg points to a valid control buffer of the stated length and no
        // data buffers; the kernel writes at most msg_controllen bytes.
        let n = unsafe {
            libc::recvmsg(
                fd.as_raw_fd(),
                &mut msg,
                libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
            )
        };
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
