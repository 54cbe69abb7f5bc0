//! Network interfaces, for `netmeter doctor` and the report's host section: which
//! interface holds an address (`getifaddrs(3)`) and the offloads the driver has on
//! (GSO, GRO, TSO, through the `SIOCETHTOOL` ioctl).
//!
//! The offloads use ethtool's legacy per-feature commands (`ETHTOOL_GGSO`,
//! `ETHTOOL_GGRO`, `ETHTOOL_GTSO`: one `struct ethtool_value` each, no string sets),
//! which every kernel since 2.6 still answers from the same feature bits that
//! `ETHTOOL_GFEATURES` reports; reading needs no privilege. The `ethtool` crate was not
//! used: it speaks ethtool's generic netlink through an async (tokio) stack, far more
//! than three booleans need.

use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;

/// An interface and one of its addresses (an interface with several addresses appears
/// once per address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfAddr {
    pub name: String,
    pub addr: IpAddr,
}

/// Every IPv4 and IPv6 address of this host's interfaces.
pub fn interface_addresses() -> io::Result<Vec<IfAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: &mut head is a valid out-pointer; on success getifaddrs stores a list that
    // we own until freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: cur is a non-null node of the list getifaddrs returned, alive until
        // freeifaddrs below.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: ifa_addr is non-null and points to a sockaddr whose family field is
        // always valid to read.
        let family = unsafe { (*ifa.ifa_addr).sa_family } as libc::c_int;
        let addr = match family {
            libc::AF_INET => {
                // SAFETY: the family says the sockaddr is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                IpAddr::from(sin.sin_addr.s_addr.to_ne_bytes())
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the sockaddr is a sockaddr_in6.
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                IpAddr::from(sin6.sin6_addr.s6_addr)
            }
            _ => continue,
        };
        out.push(IfAddr { name, addr });
    }
    // SAFETY: head came from a successful getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// `SIOCETHTOOL` (include/uapi/linux/sockios.h).
const SIOCETHTOOL: libc::c_ulong = 0x8946;
/// ethtool commands (include/uapi/linux/ethtool.h).
const ETHTOOL_GTSO: u32 = 0x0000_001e;
const ETHTOOL_GGSO: u32 = 0x0000_0023;
const ETHTOOL_GGRO: u32 = 0x0000_002b;

/// `struct ethtool_value`.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// `struct ifreq` with the `ifr_data` member of its union, padded to the kernel's size
/// (40 bytes on 64-bit Linux: a 16-byte name and a 24-byte union).
#[repr(C)]
struct IfreqData {
    name: [u8; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 24 - std::mem::size_of::<usize>()],
}

/// Segmentation and receive offloads an interface has on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Offloads {
    pub gso: Option<bool>,
    pub gro: Option<bool>,
    pub tso: Option<bool>,
}

/// The GSO, GRO and TSO settings of interface `name`; a feature the driver does not
/// answer for (or a name too long) is `None`.
pub fn offloads(name: &str) -> Offloads {
    let Ok(sock) = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None) else {
        return Offloads::default();
    };
    let get = |cmd: u32| ethtool_get(sock.as_raw_fd(), name, cmd).ok();
    Offloads {
        gso: get(ETHTOOL_GGSO),
        gro: get(ETHTOOL_GGRO),
        tso: get(ETHTOOL_GTSO),
    }
}

fn ethtool_get(fd: libc::c_int, name: &str, cmd: u32) -> io::Result<bool> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let mut value = EthtoolValue { cmd, data: 0 };
    let mut req = IfreqData {
        name: [0; libc::IFNAMSIZ],
        data: &mut value as *mut EthtoolValue as *mut libc::c_void,
        _pad: [0; 24 - std::mem::size_of::<usize>()],
    };
    req.name[..bytes.len()].copy_from_slice(bytes);
    // SAFETY: req is a valid ifreq-sized struct with a NUL-terminated name; its data
    // pointer points to `value`, a live ethtool_value the kernel fills for the GET
    // commands used here; both outlive the call.
    let rc = unsafe { libc::ioctl(fd, SIOCETHTOOL as _, &mut req as *mut IfreqData) };
    super::check(rc)?;
    Ok(value.data != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_listed_and_answers_ethtool() {
        let addrs = interface_addresses().unwrap();
        let lo = addrs
            .iter()
            .find(|a| a.addr == IpAddr::from([127, 0, 0, 1]))
            .expect("127.0.0.1 on some interface");
        assert_eq!(lo.name, "lo");
        // lo has GSO and GRO on by default; what matters here is that the ioctl answers.
        let o = offloads("lo");
        assert!(
            o.gso.is_some() && o.gro.is_some() && o.tso.is_some(),
            "{o:?}"
        );
        assert_eq!(offloads("no-such-if0"), Offloads::default());
        assert_eq!(offloads("name-longer-than-15"), Offloads::default());
    }

    #[test]
    fn ifreq_has_the_kernels_size() {
        assert_eq!(std::mem::size_of::<IfreqData>(), 40);
    }
}
