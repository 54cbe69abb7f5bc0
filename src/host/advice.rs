//! What to change on this host, from its facts: pure rules over a [`HostInfo`], each
//! warning naming the limit, why it matters, and the command that changes it.

use super::facts::HostInfo;
use crate::units::{Format, format_bytes};

/// The smallest `net.core.rmem_max`/`wmem_max` netmeter calls enough: 16 MiB holds
/// 10 ms of datagrams at 13 Gbit/s. Faster links want 20 ms at their line rate.
pub const BUFFER_FLOOR: u64 = 16 << 20;

/// Seconds of line rate a TCP autotuning maximum should hold (a 40 ms round trip).
pub const TCP_BDP_SECONDS: f64 = 0.040;

/// The `rmem_max`/`wmem_max` to suggest for a line rate (bits/s, if known).
pub fn buffer_target(line_rate_bps: Option<u64>) -> u64 {
    let at_rate = line_rate_bps.map_or(0, |r| (r as f64 / 8.0 * 0.020) as u64);
    at_rate.max(BUFFER_FLOOR).next_power_of_two()
}

fn size(b: u64) -> String {
    format_bytes(b as f64, Format::Auto).trim().to_string()
}

/// What netmeter asks for each UDP data socket's buffers without `-w`
/// (`engine::test_common::udp_default_buffers`); Linux doubles it.
pub const UDP_BUFFER_REQUEST: u64 = 4 << 20;

/// The start line saying netmeter raised a UDP socket's receive buffer above the
/// system default (`granted`: SO_RCVBUF as the kernel reports it), or `None` when it did
/// not (`-w` given, or the default is as large). Issue 19: with only `rcvbuf_actual`
/// in the JSON, netmeter showed 0 % loss where iperf3, which keeps the default, showed
/// 5 % on the same path, and nothing said why.
pub fn udp_buffer_note(granted: u64, rmem_default: Option<u64>) -> Option<String> {
    let default = rmem_default.filter(|&d| d > 0 && d < granted)?;
    Some(format!(
        "UDP receive buffer: netmeter raised it to {} (net.core.rmem_default is {}, which iperf3 and most applications keep; a netmeter peer raises its own too), so a receiver here rides out stalls that make them lose datagrams; -w {} tests with the default buffer",
        size(granted),
        size(default),
        window_arg(default / 2)
    ))
}

/// `-w` for `bytes` as the user types it (`104K`), rounded down to KiB.
fn window_arg(bytes: u64) -> String {
    let kib = bytes / 1024;
    if kib >= 1024 && kib.is_multiple_of(1024) {
        format!("{}M", kib / 1024)
    } else {
        format!("{}K", kib.max(1))
    }
}

/// The warnings `netmeter doctor` prints for `h`.
pub fn warnings(h: &HostInfo) -> Vec<String> {
    let mut w = Vec::new();
    let rate = h.line_rate_bps();
    let target = buffer_target(rate);
    for (name, v, what) in [
        (
            "net.core.rmem_max",
            h.rmem_max,
            "-w cannot get a larger receive buffer, and a UDP receiver at a high rate drops datagrams once its buffer fills (10 ms at 1 Gbit/s is 1.2 MiB)",
        ),
        (
            "net.core.wmem_max",
            h.wmem_max,
            "-w cannot get a larger send buffer",
        ),
    ] {
        if let Some(v) = v.filter(|&v| v < target) {
            w.push(format!(
                "{name} is {}: {what}; run: sudo sysctl -w {name}={target}",
                size(v)
            ));
        }
    }
    if let Some(d) = h.rmem_default.filter(|&d| d < UDP_BUFFER_REQUEST) {
        // netmeter asks for more on its own UDP sockets (up to rmem_max); iperf3 and
        // most applications keep this default, so the two can disagree about loss.
        w.push(format!(
            "net.core.rmem_default is {}: UDP receivers that keep the default buffer (iperf3 without -w, most applications) drop datagrams once that much queues (10 ms at {:.0} Mbit/s), while netmeter asks for {} (within net.core.rmem_max) and may show no loss on the same path; to give every socket more, run: sudo sysctl -w net.core.rmem_default={} (with net.core.rmem_max at least that); to measure as iperf3 does: -w {}",
            size(d),
            d as f64 * 8.0 / 0.010 / 1e6,
            size(UDP_BUFFER_REQUEST),
            UDP_BUFFER_REQUEST,
            window_arg(d / 2)
        ));
    }
    if let Some(r) = rate {
        let need = (r as f64 / 8.0 * TCP_BDP_SECONDS) as u64;
        for (name, v) in [
            ("net.ipv4.tcp_rmem", h.tcp_rmem),
            ("net.ipv4.tcp_wmem", h.tcp_wmem),
        ] {
            if let Some([lo, def, max]) = v.filter(|t| t[2] < need) {
                let want = need.next_power_of_two();
                w.push(format!(
                    "{name} lets TCP grow a buffer to {} only, less than {:.0} ms at the {:.0} Mbit/s line rate, which caps a single stream on long paths; run: sudo sysctl -w {name}=\"{lo} {def} {want}\"",
                    size(max),
                    TCP_BDP_SECONDS * 1000.0,
                    r as f64 / 1e6
                ));
            }
        }
    }
    if let (Some(udp), Some(rmem)) = (h.udp_mem_pages, h.rmem_max) {
        let max = udp[2].saturating_mul(h.page_size.max(1));
        if max < rmem {
            w.push(format!(
                "net.ipv4.udp_mem allows {} for all UDP sockets together, less than one receive buffer of net.core.rmem_max ({}); run: sudo sysctl -w net.ipv4.udp_mem=\"{} {} {}\"",
                size(max),
                size(rmem),
                udp[0],
                udp[1],
                (rmem * 4).div_ceil(h.page_size.max(1))
            ));
        }
    }
    if h.congestion_control.as_deref() == Some("reno") {
        w.push("net.ipv4.tcp_congestion_control is reno, which recovers slowly on fast paths; run: sudo sysctl -w net.ipv4.tcp_congestion_control=cubic (or bbr; per test: -C)".into());
    }
    if h.governor
        .as_deref()
        .is_some_and(|g| g.split(',').any(|g| g == "powersave"))
    {
        w.push("the CPU frequency governor is powersave, which can keep clocks low between bursts and make results vary; run: sudo cpupower frequency-set -g performance".into());
    }
    if h.cpus == 1 {
        w.push("this process may use 1 CPU only: several streams (-P) share it, so a CPU-bound test cannot be sped up here".into());
    }
    if let Some(i) = &h.interface {
        for (name, on) in [("gso", i.gso), ("gro", i.gro), ("tso", i.tso)] {
            if on == Some(false) && !(name == "tso" && i.is_virtual) {
                w.push(format!(
                    "{} has {} off: every packet costs the CPU a trip through the stack; run: sudo ethtool -K {} {name} on",
                    i.name,
                    name.to_uppercase(),
                    i.name
                ));
            }
        }
    }
    if let (Some(r), Some(copy)) = (rate, h.memory_copy_bytes_per_second)
        && copy * 8.0 < 2.0 * r as f64
    {
        w.push(format!(
            "one thread copies memory at {:.1} Gbit/s, less than twice the {:.1} Gbit/s line rate: a stream copies each byte at least once per side, so a single stream cannot reach the line rate here; use -P 2 or more, or -Z",
            copy * 8.0 / 1e9,
            r as f64 / 1e9
        ));
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::facts::Interface;

    fn tuned() -> HostInfo {
        HostInfo {
            interface: Some(Interface {
                name: "eth0".into(),
                line_rate_bps: Some(10_000_000_000),
                gso: Some(true),
                gro: Some(true),
                tso: Some(true),
                ..Interface::default()
            }),
            rmem_max: Some(32 << 20),
            rmem_default: None,
            wmem_max: Some(32 << 20),
            tcp_rmem: Some([4096, 131_072, 64 << 20]),
            tcp_wmem: Some([4096, 16_384, 64 << 20]),
            udp_mem_pages: Some([188_760, 251_683, 377_520]),
            page_size: 4096,
            congestion_control: Some("cubic".into()),
            cpus: 8,
            governor: Some("performance".into()),
            memory_copy_bytes_per_second: Some(10e9),
            given_line_rate_bps: None,
        }
    }

    #[test]
    fn a_tuned_host_gets_no_warning() {
        assert_eq!(warnings(&tuned()), Vec::<String>::new());
        let big_default = HostInfo {
            rmem_default: Some(UDP_BUFFER_REQUEST),
            ..tuned()
        };
        assert_eq!(warnings(&big_default), Vec::<String>::new());
    }

    #[test]
    fn a_small_rmem_default_names_the_sysctl_and_iperf3s_view() {
        // Issue 19: netmeter showed 0 % loss where iperf3 showed 5 %, and the doctor
        // never named the default buffer iperf3 keeps.
        let h = HostInfo {
            rmem_default: Some(212_992),
            ..tuned()
        };
        assert_eq!(
            warnings(&h),
            [
                "net.core.rmem_default is 208 KBytes: UDP receivers that keep the default buffer \
              (iperf3 without -w, most applications) drop datagrams once that much queues (10 ms \
              at 170 Mbit/s), while netmeter asks for 4.00 MBytes (within net.core.rmem_max) and \
              may show no loss on the same path; to give every socket more, run: sudo sysctl -w \
              net.core.rmem_default=4194304 (with net.core.rmem_max at least that); to measure as \
              iperf3 does: -w 104K"
            ]
        );
    }

    #[test]
    fn the_start_line_says_netmeter_raised_the_udp_buffer() {
        assert_eq!(
            udp_buffer_note(8 << 20, Some(212_992)).as_deref(),
            Some(
                "UDP receive buffer: netmeter raised it to 8.00 MBytes (net.core.rmem_default is \
                 208 KBytes, which iperf3 and most applications keep; a netmeter peer raises its \
                 own too), so a receiver here rides out stalls that make them lose datagrams; -w \
                 104K tests with the default buffer"
            )
        );
        // Nothing raised, or the default unknown: no line.
        assert_eq!(udp_buffer_note(212_992, Some(212_992)), None);
        assert_eq!(udp_buffer_note(8 << 20, None), None);
        assert_eq!(window_arg(8 << 20), "8M");
    }

    #[test]
    fn buffer_targets() {
        assert_eq!(buffer_target(None), 16 << 20);
        assert_eq!(buffer_target(Some(1_000_000_000)), 16 << 20);
        // 100 Gbit/s: 20 ms is 250 MB, rounded up to 256 MiB.
        assert_eq!(buffer_target(Some(100_000_000_000)), 256 << 20);
    }

    #[test]
    fn default_buffers_say_the_sysctl_to_run() {
        let h = HostInfo {
            rmem_max: Some(212_992),
            wmem_max: Some(212_992),
            ..tuned()
        };
        let w = warnings(&h);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].starts_with("net.core.rmem_max is 208 KBytes"),
            "{}",
            w[0]
        );
        assert!(
            w[0].ends_with("run: sudo sysctl -w net.core.rmem_max=33554432"),
            "{}",
            w[0]
        );
        assert!(
            w[1].contains("sudo sysctl -w net.core.wmem_max=33554432"),
            "{}",
            w[1]
        );
    }

    #[test]
    fn tcp_autotuning_udp_mem_and_cc() {
        let h = HostInfo {
            tcp_rmem: Some([4096, 131_072, 6_291_456]),
            udp_mem_pages: Some([1000, 2000, 4000]),
            congestion_control: Some("reno".into()),
            ..tuned()
        };
        let w = warnings(&h);
        assert_eq!(w.len(), 3, "{w:?}");
        // 10 Gbit/s for 40 ms = 50 MB -> 64 MiB.
        assert!(
            w[0].contains("sudo sysctl -w net.ipv4.tcp_rmem=\"4096 131072 67108864\""),
            "{}",
            w[0]
        );
        // 32 MiB * 4 / 4096 = 32768 pages.
        assert!(
            w[1].contains("net.ipv4.udp_mem=\"1000 2000 32768\""),
            "{}",
            w[1]
        );
        assert!(w[2].contains("tcp_congestion_control=cubic"), "{}", w[2]);
    }

    #[test]
    fn governor_cpus_offloads_and_memory() {
        let mut h = HostInfo {
            governor: Some("performance,powersave".into()),
            cpus: 1,
            memory_copy_bytes_per_second: Some(1e9),
            ..tuned()
        };
        if let Some(i) = h.interface.as_mut() {
            i.gro = Some(false);
            i.tso = None;
        }
        let w = warnings(&h);
        assert_eq!(w.len(), 4, "{w:?}");
        assert!(w[0].contains("cpupower frequency-set -g performance"));
        assert!(w[1].contains("1 CPU only"));
        assert!(w[2].contains("sudo ethtool -K eth0 gro on"), "{}", w[2]);
        assert!(
            w[3].contains("8.0 Gbit/s, less than twice the 10.0 Gbit/s"),
            "{}",
            w[3]
        );
    }

    #[test]
    fn unknown_line_rate_skips_the_rate_rules() {
        let mut h = HostInfo {
            tcp_rmem: Some([4096, 131_072, 6_291_456]),
            memory_copy_bytes_per_second: Some(1e9),
            ..tuned()
        };
        if let Some(i) = h.interface.as_mut() {
            i.line_rate_bps = None;
        }
        assert!(warnings(&h).is_empty(), "{:?}", warnings(&h));
    }
}
