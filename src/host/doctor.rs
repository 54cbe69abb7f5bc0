//! `netmeter doctor`: the host's ceilings as a document (`--json`) and as text, both
//! rendered here from the same [`Doctor`] value; [`collect`] reads them.

use super::advice;
use super::facts::{HostInfo, Interface, interface_line, line_rate_text, size};
use super::probe;
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::time::Duration;

/// `-c HOST`: where that host is and which local address reaches it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Destination {
    pub host: String,
    pub address: String,
    pub local_address: String,
}

/// Everything `netmeter doctor` found.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct Doctor {
    /// The host's facts; `host.interface` is the one reaching `-c HOST` (none without).
    pub host: HostInfo,
    /// Every interface with an address.
    pub interfaces: Vec<Interface>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination: Option<Destination>,
    /// What to change, each with the command to run.
    pub warnings: Vec<String>,
}

/// How long the memory copy measurement runs.
pub const MEMORY_COPY_BUDGET: Duration = probe::MEMORY_COPY_BUDGET;

/// Read this host's facts; with `target`, find the interface that reaches it (the
/// kernel's route for its address; no packet is sent). `line_rate` (bits/s,
/// `--line-rate`) stands for the interface's link speed in the advice.
pub fn collect(target: Option<&str>, line_rate: Option<u64>) -> Result<Doctor, String> {
    let mut host = probe::system();
    host.given_line_rate_bps = line_rate;
    let destination = match target {
        Some(t) => {
            let (remote, local) = probe::route_to(t)?;
            host.interface = probe::interface_for(local);
            Some(Destination {
                host: t.to_string(),
                address: remote.to_string(),
                local_address: local.to_string(),
            })
        }
        None => None,
    };
    host.memory_copy_bytes_per_second = Some(probe::memory_copy_rate(MEMORY_COPY_BUDGET));
    let mut warnings = advice::warnings(&host);
    let interfaces = probe::all_interfaces();
    if target.is_none() {
        // No destination: each interface's own advice (offloads, copy rate vs its rate).
        for i in &interfaces {
            let one = HostInfo {
                interface: Some(i.clone()),
                ..host.clone()
            };
            for w in advice::warnings(&one) {
                if !warnings.contains(&w) {
                    warnings.push(w);
                }
            }
        }
    }
    Ok(Doctor {
        host,
        interfaces,
        destination,
        warnings,
    })
}

/// The doctor's text.
pub fn text(d: &Doctor) -> String {
    let h = &d.host;
    let mut t = String::new();
    let unknown = || "unknown".to_string();
    if let Some(dst) = &d.destination {
        let _ = writeln!(
            t,
            "Route to {} ({}): from {} via {}",
            dst.host,
            dst.address,
            dst.local_address,
            h.interface
                .as_ref()
                .map_or_else(unknown, |i| i.name.clone())
        );
        if let Some(i) = &h.interface {
            let _ = writeln!(t, "Interface:      {}", interface_line(i));
        }
    } else {
        let _ = writeln!(t, "Interfaces:");
        for i in &d.interfaces {
            let _ = writeln!(t, "  {}", interface_line(i));
        }
    }
    let triple = |v: Option<[u64; 3]>| {
        v.map_or_else(unknown, |[a, b, c]| {
            format!("{a} {b} {c} (max {})", size(c))
        })
    };
    let _ = writeln!(
        t,
        "Socket buffers: net.core.rmem_default {}, net.core.rmem_max {}, net.core.wmem_max {}",
        h.rmem_default.map_or_else(unknown, size),
        h.rmem_max.map_or_else(unknown, size),
        h.wmem_max.map_or_else(unknown, size)
    );
    let _ = writeln!(
        t,
        "TCP buffers:    net.ipv4.tcp_rmem {}",
        triple(h.tcp_rmem)
    );
    let _ = writeln!(
        t,
        "                net.ipv4.tcp_wmem {}",
        triple(h.tcp_wmem)
    );
    let _ = writeln!(
        t,
        "UDP memory:     net.ipv4.udp_mem {}",
        h.udp_mem_pages.map_or_else(unknown, |[a, b, c]| format!(
            "{a} {b} {c} pages (max {})",
            size(c.saturating_mul(h.page_size))
        ))
    );
    let _ = writeln!(
        t,
        "Congestion:     net.ipv4.tcp_congestion_control {}",
        h.congestion_control.clone().unwrap_or_else(unknown)
    );
    let _ = writeln!(
        t,
        "CPUs:           {}, frequency governor {}",
        h.cpus,
        h.governor.clone().unwrap_or_else(unknown)
    );
    if let Some(r) = h.given_line_rate_bps {
        let _ = writeln!(
            t,
            "Line rate:      {} (given with --line-rate)",
            line_rate_text(&Interface {
                line_rate_bps: Some(r),
                ..Interface::default()
            })
        );
    }
    if let Some(c) = h.memory_copy_bytes_per_second {
        let _ = write!(
            t,
            "Memory copy:    {:.1} GBytes/s ({:.1} Gbit/s) on one thread",
            c / 1e9,
            c * 8.0 / 1e9
        );
        // Against the peak a test could reach: a stream copies each byte once per side.
        if let Some(r) = h.line_rate_bps().filter(|&r| r > 0) {
            let _ = write!(t, ", {:.1} times the line rate", c * 8.0 / r as f64);
        }
        t.push('\n');
    }
    if d.warnings.is_empty() {
        let _ = writeln!(t, "No warnings.");
    }
    for w in &d.warnings {
        let _ = writeln!(t, "warning: {w}");
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> Doctor {
        let eth = Interface {
            name: "eth0".into(),
            addresses: vec!["10.0.0.2".into()],
            mtu: Some(9000),
            line_rate_bps: Some(25_000_000_000),
            is_virtual: false,
            gso: Some(true),
            gro: Some(false),
            tso: None,
        };
        Doctor {
            host: HostInfo {
                interface: Some(eth.clone()),
                rmem_max: Some(212_992),
                rmem_default: Some(212_992),
                wmem_max: Some(212_992),
                tcp_rmem: Some([4096, 131_072, 6_291_456]),
                tcp_wmem: Some([4096, 16_384, 4_194_304]),
                udp_mem_pages: Some([188_760, 251_683, 377_520]),
                page_size: 4096,
                congestion_control: Some("cubic".into()),
                cpus: 4,
                governor: None,
                memory_copy_bytes_per_second: Some(12.5e9),
                given_line_rate_bps: None,
            },
            interfaces: vec![eth],
            destination: Some(Destination {
                host: "peer".into(),
                address: "10.0.0.1".into(),
                local_address: "10.0.0.2".into(),
            }),
            warnings: vec!["net.core.rmem_max is small".into()],
        }
    }

    #[test]
    fn text_names_every_fact() {
        let t = text(&doc());
        assert_eq!(
            t,
            "Route to peer (10.0.0.1): from 10.0.0.2 via eth0\n\
             Interface:      eth0 10.0.0.2: line rate 25 Gbit/s, MTU 9000, GSO on, GRO off, TSO unknown\n\
             Socket buffers: net.core.rmem_default 208 KBytes, net.core.rmem_max 208 KBytes, net.core.wmem_max 208 KBytes\n\
             TCP buffers:    net.ipv4.tcp_rmem 4096 131072 6291456 (max 6.00 MBytes)\n\
             \x20               net.ipv4.tcp_wmem 4096 16384 4194304 (max 4.00 MBytes)\n\
             UDP memory:     net.ipv4.udp_mem 188760 251683 377520 pages (max 1.44 GBytes)\n\
             Congestion:     net.ipv4.tcp_congestion_control cubic\n\
             CPUs:           4, frequency governor unknown\n\
             Memory copy:    12.5 GBytes/s (100.0 Gbit/s) on one thread, 4.0 times the line rate\n\
             warning: net.core.rmem_max is small\n"
        );
    }

    #[test]
    fn a_given_line_rate_is_shown_and_judges_the_copy_rate() {
        let mut d = doc();
        d.host.interface.as_mut().unwrap().line_rate_bps = None;
        let t = text(&d);
        assert!(
            t.contains("Memory copy:    12.5 GBytes/s (100.0 Gbit/s) on one thread\n"),
            "no rate, no ratio: {t}"
        );
        d.host.given_line_rate_bps = Some(40_000_000_000);
        let t = text(&d);
        assert!(
            t.contains("Line rate:      40 Gbit/s (given with --line-rate)\nMemory copy:    12.5 GBytes/s (100.0 Gbit/s) on one thread, 2.5 times the line rate\n"),
            "{t}"
        );
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v["host"]["given_line_rate_bps"], 40_000_000_000u64);
        // The advice sizes buffers for the given rate: 20 ms of 40 Gbit/s is 100 MB.
        let w = crate::host::advice::warnings(&d.host);
        assert!(
            w.iter()
                .any(|w| w.contains("sudo sysctl -w net.core.rmem_max=134217728")),
            "{w:?}"
        );
    }

    #[test]
    fn json_keys_and_round_trip() {
        let d = doc();
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v["host"]["interface"]["virtual"], false);
        assert_eq!(v["host"]["interface"]["line_rate_bps"], 25_000_000_000u64);
        assert_eq!(v["host"]["tcp_rmem"][2], 6_291_456);
        assert_eq!(v["host"]["rmem_default"], 212_992);
        assert_eq!(v["destination"]["address"], "10.0.0.1");
        let back: Doctor = serde_json::from_value(v).unwrap();
        assert_eq!(back, d);
    }

    #[test]
    fn virtual_and_unknown_rates() {
        let lo = Interface {
            name: "lo".into(),
            is_virtual: true,
            ..Interface::default()
        };
        assert_eq!(
            interface_line(&lo),
            "lo: line rate unknown (virtual device), MTU unknown, GSO unknown, GRO unknown, TSO unknown"
        );
        let slow = Interface {
            line_rate_bps: Some(100_000_000),
            ..lo
        };
        assert_eq!(line_rate_text(&slow), "100 Mbit/s");
    }
}
