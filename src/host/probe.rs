//! Reading this host's facts: sysctls under `/proc/sys`, interfaces under
//! `/sys/class/net`, addresses (`getifaddrs`) and offloads (ethtool) through `sock`, the
//! CPU governors, a timed memory copy, and a stream thread's own CPU clock. Everything
//! degrades to "unknown" (`None`); nothing here fails a test.

use super::facts::{self, HostInfo, Interface};
use crate::clock::mono_now;
use crate::sock;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

fn read(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn sysctl(name: &str) -> Option<String> {
    read(format!("/proc/sys/{}", name.replace('.', "/")))
}

/// `net.core.rmem_default`, bytes: a socket's receive buffer unless it asks for one.
pub fn rmem_default() -> Option<u64> {
    sysctl("net.core.rmem_default").and_then(|t| facts::parse_number(&t))
}

/// `net.ipv4.tcp_ecn`: whether this host's TCP connections request ECN
/// (`stats::ecn::tcp_ecn_note`).
pub fn tcp_ecn() -> Option<u32> {
    sysctl("net.ipv4.tcp_ecn").and_then(|t| t.trim().parse().ok())
}

/// The facts that do not depend on an interface (sysctls, CPUs, governor).
pub fn system() -> HostInfo {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);

    HostInfo {
        interface: None,
        rmem_max: sysctl("net.core.rmem_max").and_then(|t| facts::parse_number(&t)),
        rmem_default: rmem_default(),
        wmem_max: sysctl("net.core.wmem_max").and_then(|t| facts::parse_number(&t)),
        tcp_rmem: sysctl("net.ipv4.tcp_rmem").and_then(|t| facts::parse_triple(&t)),
        tcp_wmem: sysctl("net.ipv4.tcp_wmem").and_then(|t| facts::parse_triple(&t)),
        udp_mem_pages: sysctl("net.ipv4.udp_mem").and_then(|t| facts::parse_triple(&t)),
        page_size: sock::page_size(),
        congestion_control: sysctl("net.ipv4.tcp_congestion_control")
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty()),
        cpus,
        governor: governors_under(Path::new("/sys/devices/system/cpu")),
        memory_copy_bytes_per_second: None,
        given_line_rate_bps: None,
    }
}

/// The governors of the CPUs under `dir` (`cpu0/cpufreq/scaling_governor`, ...; the
/// CPU numbers need not be contiguous), each named once.
fn governors_under(dir: &Path) -> Option<String> {
    let mut cpus: Vec<(u32, std::path::PathBuf)> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let n = e
                .file_name()
                .to_string_lossy()
                .strip_prefix("cpu")?
                .parse()
                .ok()?;
            Some((n, e.path()))
        })
        .collect();
    cpus.sort();
    let per_cpu: Vec<String> = cpus
        .iter()
        .filter_map(|(_, d)| read(d.join("cpufreq/scaling_governor")))
        .collect();
    facts::governors(per_cpu.iter().map(String::as_str))
}

/// Interface `name`'s facts, listing `addresses`.
pub fn interface(name: &str, addresses: Vec<String>) -> Interface {
    let dir = Path::new("/sys/class/net").join(name);
    // Hardware has a `device` link (PCI, USB, virtio...); lo, veth, bridges do not.
    let is_virtual = !dir.join("device").exists();
    let o = sock::netdev::offloads(name);
    Interface {
        name: name.to_string(),
        addresses,
        mtu: read(dir.join("mtu")).and_then(|t| facts::parse_number(&t).map(|m| m as u32)),
        line_rate_bps: facts::line_rate_bps(read(dir.join("speed")).as_deref(), is_virtual),
        is_virtual,
        gso: o.gso,
        gro: o.gro,
        tso: o.tso,
    }
}

/// The interface holding address `local`, if any.
pub fn interface_for(local: IpAddr) -> Option<Interface> {
    let addrs = sock::netdev::interface_addresses().ok()?;
    let name = facts::interface_of(addrs.iter().map(|a| (a.name.as_str(), a.addr)), local)?;
    Some(interface(name, vec![facts::canonical(local).to_string()]))
}

/// Every interface with an address, each with all of its addresses, in the order the
/// kernel lists them.
pub fn all_interfaces() -> Vec<Interface> {
    let addrs = sock::netdev::interface_addresses().unwrap_or_default();
    let mut names: Vec<&str> = Vec::new();
    for a in &addrs {
        if !names.contains(&a.name.as_str()) {
            names.push(&a.name);
        }
    }
    names
        .into_iter()
        .map(|n| {
            let mine = addrs.iter().filter(|a| a.name == n);
            interface(n, mine.map(|a| a.addr.to_string()).collect())
        })
        .collect()
}

/// The report's host section for a test whose local address is `local`.
pub fn for_local_address(local: IpAddr) -> HostInfo {
    HostInfo {
        interface: interface_for(local),
        ..system()
    }
}

/// The address `host` resolves to and the local address the kernel's routing picks to
/// reach it: a UDP socket is connected to it, which sends nothing (a UDP connect only
/// chooses the route and source address).
pub fn route_to(host: &str) -> Result<(IpAddr, IpAddr), String> {
    let remote: SocketAddr = (host, 5201)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host} resolves to no address"))?;
    let bind: SocketAddr = if remote.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let s = UdpSocket::bind(bind).map_err(|e| format!("cannot open a socket: {e}"))?;
    s.connect(remote)
        .map_err(|e| format!("no route to {host} ({}): {e}", remote.ip()))?;
    let local = s
        .local_addr()
        .map_err(|e| format!("cannot read the local address: {e}"))?;
    Ok((remote.ip(), local.ip()))
}

/// How long the memory copy measurement runs (`netmeter doctor`, `--line-rate memcpy`).
pub const MEMORY_COPY_BUDGET: Duration = Duration::from_millis(100);

/// `--line-rate memcpy` with the memory copy rate measured (bits/s); any other line
/// rate as it is.
pub fn measure_line_rate(l: facts::LineRate) -> facts::LineRate {
    match l {
        facts::LineRate::MemoryCopy(None) => {
            facts::LineRate::MemoryCopy(Some(memory_copy_rate(MEMORY_COPY_BUDGET) * 8.0))
        }
        other => other,
    }
}

/// Bytes one thread copies per second between two 32 MiB buffers (larger than most
/// last-level caches), copying for about `budget` (at least one whole buffer).
pub fn memory_copy_rate(budget: Duration) -> f64 {
    const LEN: usize = 32 << 20;
    const CHUNK: usize = 1 << 20;
    // Written once first so the pages exist before the clock starts.
    let src = vec![0x5au8; LEN];
    // vec![0; _] maps zero pages lazily: write the destination too.
    let mut dst = vec![0u8; LEN];
    dst.fill(1);
    // A measurement of this host's memory, so on the host's clock, never a virtual one.
    let t = mono_now();
    let mut copied = 0usize;
    let mut off = 0usize;
    while copied < LEN || mono_now() - t < budget {
        dst[off..off + CHUNK].copy_from_slice(std::hint::black_box(&src[off..off + CHUNK]));
        std::hint::black_box(&mut dst);
        copied += CHUNK;
        off = (off + CHUNK) % LEN;
    }
    copied as f64 / (mono_now() - t).as_secs_f64()
}

/// A thread's CPU clock, started on the thread it measures. Its wall time is the
/// host's monotonic clock too: CPU seconds are judged against real seconds.
#[derive(Debug, Clone, Copy)]
pub struct ThreadClock {
    wall: Instant,
    cpu_s: f64,
    wait_ns: Option<u64>,
}

fn sched_wait_ns() -> Option<u64> {
    read("/proc/thread-self/schedstat")
        .and_then(|t| facts::parse_schedstat(&t))
        .map(|(_, wait)| wait)
}

impl ThreadClock {
    /// Start measuring the calling thread.
    pub fn start() -> ThreadClock {
        ThreadClock {
            wall: mono_now(),
            cpu_s: sock::thread_cpu_seconds(),
            wait_ns: sched_wait_ns(),
        }
    }

    /// On the same thread: (CPU seconds used, run-queue wait at start and now in ns,
    /// wall seconds) since [`ThreadClock::start`].
    pub fn read(&self) -> (f64, Option<(u64, u64)>, f64) {
        let cpu = sock::thread_cpu_seconds() - self.cpu_s;
        let wait = self.wait_ns.zip(sched_wait_ns());
        (cpu, wait, (mono_now() - self.wall).as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_address_is_on_lo() {
        let h = for_local_address(IpAddr::from([127, 0, 0, 1]));
        let lo = h.interface.expect("lo");
        assert_eq!(lo.name, "lo");
        assert!(lo.is_virtual);
        assert_eq!(lo.line_rate_bps, None);
        assert!(lo.mtu.is_some_and(|m| m >= 1500), "{:?}", lo.mtu);
        assert!(h.cpus >= 1);
        assert!(h.rmem_max.is_some() && h.tcp_rmem.is_some());
        assert!(interface_for(IpAddr::from([0, 0, 0, 0])).is_none());
    }

    #[test]
    fn route_to_loopback_picks_a_loopback_source() {
        let (remote, local) = route_to("127.0.0.1").unwrap();
        assert_eq!(remote, IpAddr::from([127, 0, 0, 1]));
        assert!(local.is_loopback(), "{local}");
        assert!(route_to("no-such-host.invalid").is_err());
    }

    #[test]
    fn governors_of_every_numbered_cpu() {
        let dir = std::env::temp_dir().join(format!("nm-cpufreq-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (cpu, g) in [
            ("cpu0", "powersave"),
            ("cpu10", "schedutil"),
            ("cpu2", "performance"),
        ] {
            std::fs::create_dir_all(dir.join(cpu).join("cpufreq")).unwrap();
            std::fs::write(
                dir.join(cpu).join("cpufreq/scaling_governor"),
                format!("{g}\n"),
            )
            .unwrap();
        }
        // Not CPUs: cpufreq/, cpuidle/; a CPU without cpufreq (cpu3).
        std::fs::create_dir_all(dir.join("cpufreq/cpufreq")).unwrap();
        std::fs::write(dir.join("cpufreq/cpufreq/scaling_governor"), "ondemand\n").unwrap();
        std::fs::create_dir_all(dir.join("cpu3")).unwrap();
        // In CPU order: 0, 2, 10.
        assert_eq!(
            governors_under(&dir).as_deref(),
            Some("powersave,performance,schedutil")
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(governors_under(&dir), None);
    }

    #[test]
    fn memory_copy_is_bounded_and_positive() {
        let t = mono_now();
        let r = memory_copy_rate(Duration::from_millis(20));
        assert!(r.is_finite() && r > 1e6, "{r}");
        assert!(mono_now() - t < Duration::from_secs(5));
    }
}
