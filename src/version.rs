//! `netmeter --version`: the build, the system, and which optional features this build
//! and this kernel have, as iperf3's `--version` lists its "Optional features
//! available". Each kernel feature is probed ([`crate::sock::kernel_features`]), never
//! assumed from the kernel's version number.

use crate::sock::KernelFeatures;

/// RSA authentication (`--username`, `--rsa-public-key-path`..., `crate::auth`) is
/// built in: pure Rust (RustCrypto `rsa`), so every build has it.
pub const AUTHENTICATION: bool = true;

/// The whole `--version` text. `system` is `uname -a`-like.
pub fn text(system: &str, k: &KernelFeatures) -> String {
    let features: [(&str, bool, &str); 8] = [
        ("UDP GSO", k.udp_gso, "the kernel refuses UDP_SEGMENT"),
        ("UDP GRO", k.udp_gro, "the kernel refuses UDP_GRO"),
        (
            "MSG_ZEROCOPY",
            k.msg_zerocopy,
            "the kernel refuses SO_ZEROCOPY; -Z uses sendfile",
        ),
        (
            "MPTCP",
            k.mptcp,
            "no MPTCP in this kernel, or net.mptcp.enabled=0",
        ),
        ("SCTP", k.sctp, "no SCTP in this kernel"),
        (
            "TCP congestion algorithm setting",
            k.congestion,
            "TCP_CONGESTION unreadable",
        ),
        (
            "socket pacing",
            k.pacing,
            "the kernel refuses SO_MAX_PACING_RATE",
        ),
        ("authentication", AUTHENTICATION, "not in this build"),
    ];
    let have: Vec<&str> = features.iter().filter(|f| f.1).map(|f| f.0).collect();
    let lack: Vec<String> = features
        .iter()
        .filter(|f| !f.1)
        .map(|f| format!("{} ({})", f.0, f.2))
        .collect();
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    let have: Vec<String> = have.into_iter().map(String::from).collect();
    format!(
        "netmeter {} (iperf3 wire protocol; extensions v{})\n{system}\n\
         Optional features available: {}\n\
         Optional features not available: {}\n",
        env!("CARGO_PKG_VERSION"),
        crate::wire::EXT_VERSION,
        list(&have),
        list(&lack),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_each_feature_once_on_the_right_line() {
        let k = KernelFeatures {
            udp_gso: true,
            udp_gro: true,
            mptcp: true,
            ..KernelFeatures::default()
        };
        let t = text("Linux h 6.1 x86_64", &k);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("netmeter "));
        assert_eq!(lines[1], "Linux h 6.1 x86_64");
        assert_eq!(
            lines[2],
            "Optional features available: UDP GSO, UDP GRO, MPTCP, authentication"
        );
        assert!(lines[3].starts_with("Optional features not available: MSG_ZEROCOPY ("));
        assert!(lines[3].contains("SCTP (no SCTP in this kernel)"));
        assert!(!lines[3].contains("authentication"));
        let none = text("x", &KernelFeatures::default());
        assert!(none.contains("Optional features available: authentication\n"));
    }

    /// The probe on this machine: a UDP socket takes UDP_SEGMENT on every kernel since
    /// 4.18, and the answer agrees with a data socket's own probe.
    #[test]
    fn probe_agrees_with_a_data_socket() {
        use std::os::fd::AsFd;
        let k = crate::sock::kernel_features();
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(k.udp_gso, crate::sock::set_udp_gso(u.as_fd(), 1200));
        assert!(k.congestion);
    }
}
