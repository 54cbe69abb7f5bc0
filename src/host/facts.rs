//! The host's ceilings as plain values, and the reading of the kernel's text files they
//! come from (sysfs, procfs), as pure functions over that text: no I/O here, so every
//! parser is tested on fixed strings. [`super::probe`] does the reads. The one-line
//! texts of an interface and of the limits are here too, for `doctor` and the reports.

use crate::units::{Format, format_bytes};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// One network interface as a test or `netmeter doctor` sees it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct Interface {
    /// `eth0`, `lo`, ...
    pub name: String,
    /// Its addresses (in a report: the test's local address only).
    pub addresses: Vec<String>,
    /// `/sys/class/net/NAME/mtu`.
    pub mtu: Option<u32>,
    /// The negotiated link speed in bits/s (`/sys/class/net/NAME/speed`); `None` when
    /// unknown: a virtual device (no `device` link in sysfs: loopback, veth, bridges,
    /// tunnels), a link that is down, or a driver that does not say.
    pub line_rate_bps: Option<u64>,
    /// No hardware behind it (loopback, veth, bridge, tunnel...).
    #[serde(rename = "virtual")]
    pub is_virtual: bool,
    /// Offloads the driver has on (ethtool): generic segmentation, generic receive,
    /// TCP segmentation. `None`: the driver did not answer.
    pub gso: Option<bool>,
    pub gro: Option<bool>,
    pub tso: Option<bool>,
}

/// This host's facts that bound a test's figures.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct HostInfo {
    /// The interface the test's local address is on (`None`: not found, e.g. a
    /// wildcard or a vanished address).
    pub interface: Option<Interface>,
    /// `net.core.rmem_max` / `wmem_max`: the most `-w` (SO_RCVBUF/SO_SNDBUF) can get.
    pub rmem_max: Option<u64>,
    pub wmem_max: Option<u64>,
    /// `net.core.rmem_default`: the receive buffer of a socket that does not ask for one
    /// (iperf3's UDP sockets without `-w`; netmeter asks for more, see
    /// `host::advice::udp_buffer_note`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rmem_default: Option<u64>,
    /// `net.ipv4.tcp_rmem` / `tcp_wmem`: min, default, max bytes of TCP's autotuning.
    pub tcp_rmem: Option<[u64; 3]>,
    pub tcp_wmem: Option<[u64; 3]>,
    /// `net.ipv4.udp_mem`: low, pressure, max, in pages of `page_size` bytes, for all
    /// UDP sockets together.
    pub udp_mem_pages: Option<[u64; 3]>,
    pub page_size: u64,
    /// `net.ipv4.tcp_congestion_control`: the default for new TCP sockets.
    pub congestion_control: Option<String>,
    /// CPUs this process may run on.
    pub cpus: u32,
    /// The CPU frequency governor(s) in use (`powersave`, `performance`; several joined
    /// with commas); `None` without cpufreq (common in VMs).
    pub governor: Option<String>,
    /// A single thread's memory copy rate in bytes/s (`netmeter doctor` only: it takes
    /// ~100 ms of a CPU, which a test's report does not spend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_copy_bytes_per_second: Option<f64>,
    /// `netmeter doctor --line-rate RATE`: the line rate the advice uses instead of the
    /// interface's (bits/s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub given_line_rate_bps: Option<u64>,
}

impl HostInfo {
    /// The line rate the rules use: the given one, else the interface's.
    pub fn line_rate_bps(&self) -> Option<u64> {
        self.given_line_rate_bps
            .or_else(|| self.interface.as_ref().and_then(|i| i.line_rate_bps))
    }
}

/// One stream thread's use of a CPU over its life (this side's streams).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct ThreadCpu {
    /// iperf3 stream id.
    pub id: i64,
    /// This side's socket number of the stream, as the text's `[  4]` rows show it
    /// (absent in older documents and for the peer's threads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<i64>,
    /// The thread sent (else it received).
    pub sender: bool,
    /// Wall seconds the thread ran.
    pub seconds: f64,
    /// CPU time it used, as % of one CPU over `seconds`.
    pub cpu_percent: f64,
    /// Time it was ready to run but waited for a CPU (the scheduler's run queue,
    /// `/proc/thread-self/schedstat`), as % of `seconds`; `None` without schedstats.
    pub wait_percent: Option<f64>,
}

/// Where the peak a test is judged against comes from.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum PeakSource {
    /// The link speed of this side's interface.
    #[default]
    Interface,
    /// `--line-rate RATE`.
    Given,
    /// `--line-rate memcpy`: this host's one-thread memory copy rate.
    MemoryCopy,
}

/// A throughput ceiling to judge a test's receiver throughput against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peak {
    pub bits_per_second: u64,
    pub source: PeakSource,
}

/// `--line-rate RATE|memcpy`: the peak a user gives, for links whose speed the host
/// cannot tell (virtual devices, loopback, a path slower than the NIC).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LineRate {
    /// A rate in bits/s.
    Given(u64),
    /// This host's one-thread memory copy rate, in bits/s once measured
    /// (`host::probe::measure_line_rate`, before the test).
    MemoryCopy(Option<f64>),
}

impl LineRate {
    /// `10G`, `25000M` (bits/s, 1000-based, as `-b`), or `memcpy`; one sentence naming
    /// the option and the value otherwise.
    pub fn parse(s: &str) -> Result<LineRate, String> {
        if s.eq_ignore_ascii_case("memcpy") {
            return Ok(LineRate::MemoryCopy(None));
        }
        match crate::units::parse_rate(s) {
            Ok(r) if r > 0 => Ok(LineRate::Given(r)),
            _ => Err(format!(
                "--line-rate takes a rate in bits/s such as 10G, or memcpy (this host's memory copy rate), not '{s}'"
            )),
        }
    }

    /// The peak, once known (`None`: the memory copy rate is still to be measured).
    pub fn peak(self) -> Option<Peak> {
        match self {
            LineRate::Given(r) => Some(Peak {
                bits_per_second: r,
                source: PeakSource::Given,
            }),
            LineRate::MemoryCopy(m) => m.filter(|m| m.is_finite() && *m >= 1.0).map(|m| Peak {
                bits_per_second: m as u64,
                source: PeakSource::MemoryCopy,
            }),
        }
    }
}

/// Receiver throughput against a peak: the line rate of this side's interface, or the
/// one `--line-rate` gave.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct Efficiency {
    /// This side's interface (empty when not found).
    pub interface: String,
    /// The peak, bits/s.
    pub line_rate_bps: u64,
    /// Where the peak comes from: `interface`, `given` (`--line-rate RATE`),
    /// `memory_copy` (`--line-rate memcpy`).
    pub peak: PeakSource,
    /// The receiver's figure of the test's direction (`end.sum_received`).
    pub bits_per_second: f64,
    pub percent: f64,
    /// `--bidir`: the reverse direction's receiver figure and its share.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reverse_bits_per_second: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reverse_percent: Option<f64>,
}

/// `bps` as a percentage of `line_rate_bps`; `None` when the line rate is unknown/0.
pub fn efficiency_percent(bps: f64, line_rate_bps: Option<u64>) -> Option<f64> {
    line_rate_bps
        .filter(|&r| r > 0)
        .map(|r| bps / r as f64 * 100.0)
}

/// A sysfs or procfs number (`"1500\n"`).
pub fn parse_number(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// Three whitespace-separated numbers (`net.ipv4.tcp_rmem`: `"4096\t131072\t6291456\n"`).
pub fn parse_triple(text: &str) -> Option<[u64; 3]> {
    let mut it = text.split_whitespace().map(|w| w.parse::<u64>().ok());
    let t = [it.next()??, it.next()??, it.next()??];
    it.next().is_none().then_some(t)
}

/// `/sys/class/net/NAME/speed` (Mbit/s) as bits/s. Unknown: a virtual device (its
/// speed, if any, is made up: veth says 10000), or `-1`/`4294967295` (SPEED_UNKNOWN)
/// or 0, or text that cannot be read (the kernel answers EINVAL while a link is down).
pub fn line_rate_bps(speed_text: Option<&str>, is_virtual: bool) -> Option<u64> {
    if is_virtual {
        return None;
    }
    let mbps: i64 = speed_text?.trim().parse().ok()?;
    (mbps > 0 && mbps != u32::MAX as i64).then(|| mbps as u64 * 1_000_000)
}

/// `/proc/thread-self/schedstat`: nanoseconds on a CPU, nanoseconds waiting on a run
/// queue (the third field, time slices, is not needed).
pub fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut it = text.split_whitespace().map(|w| w.parse::<u64>().ok());
    Some((it.next()??, it.next()??))
}

/// The governors of every CPU, each named once, in order of first appearance
/// (`None` when no CPU has one).
pub fn governors<'a>(per_cpu: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut seen: Vec<&str> = Vec::new();
    for g in per_cpu.into_iter().map(str::trim).filter(|g| !g.is_empty()) {
        if !seen.contains(&g) {
            seen.push(g);
        }
    }
    (!seen.is_empty()).then(|| seen.join(","))
}

/// The address as the interface lists hold it: an IPv4-mapped IPv6 address
/// (`::ffff:127.0.0.1`, what a dual-stack socket reports) is the IPv4 address.
pub fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    }
}

/// The interface holding `local` among `(name, address)` pairs; `None` for a wildcard
/// address or one no interface has.
pub fn interface_of<'a>(
    addrs: impl IntoIterator<Item = (&'a str, IpAddr)>,
    local: IpAddr,
) -> Option<&'a str> {
    let local = canonical(local);
    if local.is_unspecified() {
        return None;
    }
    addrs
        .into_iter()
        .find(|(_, a)| canonical(*a) == local)
        .map(|(n, _)| n)
}

/// A thread's CPU figures from its start and end readings: CPU seconds used, run-queue
/// wait (schedstat nanoseconds at start and end, when known) and wall seconds.
pub fn thread_cpu(
    id: i64,
    sender: bool,
    cpu_s: f64,
    wait_ns: Option<(u64, u64)>,
    wall_s: f64,
) -> Option<ThreadCpu> {
    if wall_s.is_nan() || wall_s <= 0.0 || !cpu_s.is_finite() || cpu_s < 0.0 {
        return None;
    }
    let pct = |s: f64| (s / wall_s * 100.0).min(100.0);
    Some(ThreadCpu {
        id,
        socket: None,
        sender,
        seconds: wall_s,
        cpu_percent: pct(cpu_s),
        wait_percent: wait_ns.map(|(a, b)| pct(b.saturating_sub(a) as f64 / 1e9)),
    })
}

/// Bytes as iperf3 prints them (`208 KBytes`).
pub fn size(b: u64) -> String {
    format_bytes(b as f64, Format::Auto).trim().to_string()
}

fn on_off(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "on",
        Some(false) => "off",
        None => "unknown",
    }
}

/// `1 Gbit/s`, `25 Gbit/s`, `100 Mbit/s`, or `unknown (virtual)`.
pub fn line_rate_text(i: &Interface) -> String {
    match i.line_rate_bps {
        Some(r) if r >= 1_000_000_000 => format!("{} Gbit/s", r as f64 / 1e9),
        Some(r) => format!("{} Mbit/s", r as f64 / 1e6),
        None if i.is_virtual => "unknown (virtual device)".into(),
        None => "unknown".into(),
    }
}

/// One line about an interface: `eth0 10.0.0.2: 10 Gbit/s, MTU 9000, GSO on, GRO on, TSO on`.
pub fn interface_line(i: &Interface) -> String {
    let mtu = i.mtu.map_or("unknown".to_string(), |m| m.to_string());
    let addrs = if i.addresses.is_empty() {
        String::new()
    } else {
        format!(" {}", i.addresses.join(" "))
    };
    format!(
        "{}{addrs}: line rate {}, MTU {mtu}, GSO {}, GRO {}, TSO {}",
        i.name,
        line_rate_text(i),
        on_off(i.gso),
        on_off(i.gro),
        on_off(i.tso)
    )
}

/// The sysctl limits in one line: `rmem_max 208 KBytes, wmem_max ..., tcp_rmem max ...`.
pub fn limits_line(h: &HostInfo) -> String {
    let opt = |v: Option<u64>| v.map_or("unknown".to_string(), size);
    let max = |t: Option<[u64; 3]>| opt(t.map(|t| t[2]));
    format!(
        "rmem_max {}, wmem_max {}, tcp_rmem max {}, tcp_wmem max {}",
        opt(h.rmem_max),
        opt(h.wmem_max),
        max(h.tcp_rmem),
        max(h.tcp_wmem)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_triples() {
        assert_eq!(parse_number("1500\n"), Some(1500));
        assert_eq!(parse_number(" 212992 "), Some(212_992));
        assert_eq!(parse_number("-1"), None);
        assert_eq!(parse_number(""), None);
        assert_eq!(
            parse_triple("4096\t131072\t6291456\n"),
            Some([4096, 131_072, 6_291_456])
        );
        assert_eq!(
            parse_triple("188760\t251683\t377520"),
            Some([188_760, 251_683, 377_520])
        );
        assert_eq!(parse_triple("1 2"), None);
        assert_eq!(parse_triple("1 2 3 4"), None);
        assert_eq!(parse_triple("1 x 3"), None);
    }

    #[test]
    fn line_rate_only_for_hardware_with_a_known_speed() {
        assert_eq!(line_rate_bps(Some("1000\n"), false), Some(1_000_000_000));
        assert_eq!(line_rate_bps(Some("100000"), false), Some(100_000_000_000));
        // veth reports 10000; a virtual device's speed means nothing.
        assert_eq!(line_rate_bps(Some("10000\n"), true), None);
        assert_eq!(line_rate_bps(Some("-1\n"), false), None);
        assert_eq!(line_rate_bps(Some("4294967295"), false), None);
        assert_eq!(line_rate_bps(Some("0"), false), None);
        assert_eq!(line_rate_bps(None, false), None);
        assert_eq!(line_rate_bps(Some("fast"), false), None);
    }

    #[test]
    fn schedstat_and_governors() {
        assert_eq!(
            parse_schedstat("2087331915 33066839 1022\n"),
            Some((2_087_331_915, 33_066_839))
        );
        assert_eq!(parse_schedstat("12"), None);
        assert_eq!(
            governors(["powersave\n", "powersave\n", "performance\n"]),
            Some("powersave,performance".into())
        );
        assert_eq!(governors(["", "\n"]), None);
        assert_eq!(governors([]), None);
    }

    #[test]
    fn interface_by_address() {
        let lo = IpAddr::from([127, 0, 0, 1]);
        let eth = IpAddr::from([10, 1, 2, 3]);
        let v6: IpAddr = "fe80::1".parse().unwrap();
        let list = [("lo", lo), ("eth0", eth), ("eth0", v6)];
        assert_eq!(interface_of(list, eth), Some("eth0"));
        assert_eq!(interface_of(list, v6), Some("eth0"));
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert_eq!(interface_of(list, mapped), Some("lo"));
        assert_eq!(interface_of(list, IpAddr::from([0, 0, 0, 0])), None);
        assert_eq!(interface_of(list, IpAddr::from([192, 0, 2, 1])), None);
    }

    #[test]
    fn line_rates_a_user_gives() {
        assert_eq!(LineRate::parse("10G"), Ok(LineRate::Given(10_000_000_000)));
        assert_eq!(LineRate::parse("2500M"), Ok(LineRate::Given(2_500_000_000)));
        assert_eq!(LineRate::parse("MemCpy"), Ok(LineRate::MemoryCopy(None)));
        for bad in ["0", "fast", "-1G", ""] {
            let e = LineRate::parse(bad).unwrap_err();
            assert_eq!(
                e,
                format!(
                    "--line-rate takes a rate in bits/s such as 10G, or memcpy (this host's memory copy rate), not '{bad}'"
                )
            );
        }
        assert_eq!(
            LineRate::Given(1_000).peak(),
            Some(Peak {
                bits_per_second: 1_000,
                source: PeakSource::Given
            })
        );
        assert_eq!(LineRate::MemoryCopy(None).peak(), None, "not measured yet");
        assert_eq!(
            LineRate::MemoryCopy(Some(8e10))
                .peak()
                .map(|p| (p.bits_per_second, p.source)),
            Some((80_000_000_000, PeakSource::MemoryCopy))
        );
        assert_eq!(LineRate::MemoryCopy(Some(f64::NAN)).peak(), None);
        let h = HostInfo {
            interface: Some(Interface {
                line_rate_bps: Some(1_000_000_000),
                ..Interface::default()
            }),
            ..HostInfo::default()
        };
        assert_eq!(h.line_rate_bps(), Some(1_000_000_000));
        let given = HostInfo {
            given_line_rate_bps: Some(400_000_000),
            ..h
        };
        assert_eq!(
            given.line_rate_bps(),
            Some(400_000_000),
            "the given one wins"
        );
    }

    #[test]
    fn efficiency_and_thread_cpu() {
        assert_eq!(efficiency_percent(941e6, Some(1_000_000_000)), Some(94.1));
        assert_eq!(efficiency_percent(941e6, None), None);
        assert_eq!(efficiency_percent(941e6, Some(0)), None);
        let t = thread_cpu(5, true, 1.98, Some((1_000, 10_000_001_000)), 2.0).unwrap();
        assert_eq!(t.cpu_percent, 99.0);
        assert_eq!(t.wait_percent, Some(100.0), "capped at 100");
        let t = thread_cpu(5, false, 0.5, None, 2.0).unwrap();
        assert_eq!((t.cpu_percent, t.wait_percent), (25.0, None));
        assert!(thread_cpu(5, true, 1.0, None, 0.0).is_none());
        assert!(thread_cpu(5, true, f64::NAN, None, 1.0).is_none());
    }
}
