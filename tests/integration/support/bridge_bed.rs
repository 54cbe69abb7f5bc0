//! A bridge bed for multicast: one sender and three receivers, each in a network
//! namespace of its own, on a Linux bridge (in a fifth namespace) with multicast
//! snooping off, so the bridge floods every group to every port and only the
//! receivers' own joins (and source filters) decide who hears what. Shared by the
//! multicast tests (netmeter and iperf 2 receivers, `--receivers` servers).
//!
//! * Addresses: host `i` (0 the sender, 1..=3 the receivers) is [`v4`]`(i)`/24 and
//!   [`v6`]`(i)`/64 on its interface [`IF`], with a route to 224.0.0.0/4 there.
//! * [`BridgeBed::control_links`] adds a second path, a direct veth [`CTRL_IF`] between
//!   the sender and a receiver ([`ctrl_v4`], [`ctrl_v6`]), for control connections
//!   that must not come in on the interface the group's datagrams arrive on.
//! * Loss toward one receiver is nftables in that receiver's input hook
//!   ([`BridgeBed::drop_every`]): every Nth data datagram to the port (`numgen inc`,
//!   the payload's first bit 0: a positive sequence number, so the FIN's copies are
//!   never counted or dropped), counted ([`BridgeBed::dropped`]).
//!
//! Namespaces are named `nmm{pid}x{n}{role}` and deleted when the bed drops (also while
//! unwinding); beds of a test process that died are swept by the next one.

use super::{Drained, Proc, netmeter, show};
use serde_json::Value;
use std::process::{Command, Output, Stdio};
use std::sync::Once;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const PREFIX: &str = "nmm";
const ROLES: [&str; 5] = ["s", "r1", "r2", "r3", "br"];
/// Each host's interface on the bridge.
pub const IF: &str = "e0";
/// The direct link of [`BridgeBed::control_links`], on both of its ends.
pub const CTRL_IF: &str = "c0";
/// Bounds a failure only.
const LONG: Duration = Duration::from_secs(90);

static N: AtomicU32 = AtomicU32::new(0);
static SWEEP: Once = Once::new();

/// The bed: namespaces 0 (sender), 1..=3 (receivers), 4 (bridge).
pub struct BridgeBed {
    pub ns: Vec<String>,
}

/// Run `cmd` (bounded) and insist it succeeded.
pub fn run_ok(cmd: &mut Command, what: &str) -> Output {
    let out = super::run_bounded(cmd, Duration::from_secs(30), what);
    assert!(out.status.success(), "{what} failed\n{}", show(&out));
    out
}

fn ip(args: &[&str]) -> Output {
    run_ok(
        Command::new("ip").args(args),
        &format!("ip {}", args.join(" ")),
    )
}

fn sweep() {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((pid, tail)) = name.strip_prefix(PREFIX).and_then(|r| r.split_once('x')) else {
            continue;
        };
        let role = tail.trim_start_matches(|c: char| c.is_ascii_digit());
        let dead = pid.parse::<u32>().is_ok_and(|p| {
            p != std::process::id() && !std::path::Path::new(&format!("/proc/{p}")).exists()
        });
        if dead && ROLES.contains(&role) {
            let _ = Command::new("ip").args(["netns", "del", &name]).status();
        }
    }
}

/// Host `i`'s IPv4 address on the bridge.
pub fn v4(i: usize) -> String {
    format!("10.77.0.{}", i + 1)
}

/// Host `i`'s IPv6 address on the bridge.
pub fn v6(i: usize) -> String {
    format!("fd77::{}", i + 1)
}

/// Receiver `i`'s IPv4 address on its direct link to the sender.
pub fn ctrl_v4(i: usize) -> String {
    format!("10.78.{i}.2")
}

/// Receiver `i`'s IPv6 address on its direct link to the sender.
pub fn ctrl_v6(i: usize) -> String {
    format!("fd78:{i}::2")
}

impl BridgeBed {
    pub fn new() -> BridgeBed {
        SWEEP.call_once(sweep);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let mut bed = BridgeBed { ns: Vec::new() };
        for role in ROLES {
            let name = format!("{PREFIX}{}x{n}{role}", std::process::id());
            ip(&["netns", "add", &name]);
            bed.ns.push(name);
            ip(&["-n", bed.ns.last().unwrap(), "link", "set", "lo", "up"]);
        }
        let br = bed.ns[4].clone();
        ip(&[
            "-n",
            &br,
            "link",
            "add",
            "br0",
            "type",
            "bridge",
            "mcast_snooping",
            "0",
        ]);
        ip(&["-n", &br, "link", "set", "br0", "up"]);
        for i in 0..4 {
            let h = bed.ns[i].clone();
            let port = format!("p{i}");
            ip(&[
                "-n", &h, "link", "add", IF, "type", "veth", "peer", "name", &port, "netns", &br,
            ]);
            ip(&["-n", &br, "link", "set", &port, "master", "br0", "up"]);
            bed.address(i, IF, &v4(i), &v6(i));
            // iperf 2.1.8's sender needs a route to the group (its %dev binds the
            // socket, it does not choose the multicast interface).
            ip(&["-n", &h, "route", "add", "224.0.0.0/4", "dev", IF]);
        }
        bed
    }

    fn address(&self, i: usize, dev: &str, a4: &str, a6: &str) {
        let h = &self.ns[i];
        ip(&["-n", h, "addr", "add", &format!("{a4}/24"), "dev", dev]);
        ip(&[
            "-n",
            h,
            "addr",
            "add",
            &format!("{a6}/64"),
            "dev",
            dev,
            "nodad",
        ]);
        ip(&["-n", h, "link", "set", dev, "up"]);
    }

    /// A direct link [`CTRL_IF`] from the sender to each receiver in `which`: the
    /// sender reaches receiver `i` at [`ctrl_v4`]`(i)` / [`ctrl_v6`]`(i)` through it,
    /// not through the bridge.
    pub fn control_links(&self, which: &[usize]) {
        for &i in which {
            let near = format!("c{i}");
            ip(&[
                "-n",
                &self.ns[0],
                "link",
                "add",
                &near,
                "type",
                "veth",
                "peer",
                "name",
                CTRL_IF,
                "netns",
                &self.ns[i],
            ]);
            self.address(0, &near, &format!("10.78.{i}.1"), &format!("fd78:{i}::1"));
            self.address(i, CTRL_IF, &ctrl_v4(i), &ctrl_v6(i));
        }
    }

    /// `prog` run in namespace `i`.
    pub fn exec(&self, i: usize, prog: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns[i], prog]);
        c
    }

    /// Drop every `nth` data datagram to UDP port `port` at receiver `i`, counted.
    pub fn drop_every(&self, i: usize, port: &str, nth: u32) {
        let script = format!(
            "table inet mc {{\n chain in {{\n  type filter hook input priority 0; policy accept;\n  udp dport {port} @th,64,1 0 numgen inc mod {nth} {} counter drop\n }}\n}}\n",
            nth - 1
        );
        let mut c = self.exec(i, "nft");
        c.args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("nft");
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "nft failed\n{}", show(&out));
    }

    /// The drop rule's counter at receiver `i`: (packets, bytes).
    pub fn dropped(&self, i: usize) -> (u64, u64) {
        let out = run_ok(
            self.exec(i, "nft").args(["-j", "list", "ruleset"]),
            "nft -j list",
        );
        let v: Value = serde_json::from_slice(&out.stdout).expect("nft json");
        let mut found = None;
        for item in v["nftables"].as_array().into_iter().flatten() {
            for e in item["rule"]["expr"].as_array().into_iter().flatten() {
                if let Some(c) = e.get("counter") {
                    found = Some((c["packets"].as_u64().unwrap(), c["bytes"].as_u64().unwrap()));
                }
            }
        }
        found.expect("the drop rule's counter")
    }

    /// Wait until receiver `i`'s interface [`IF`] has joined `group` (the kernel's word).
    pub fn await_join(&self, i: usize, group: &str) {
        let deadline = Instant::now() + LONG;
        loop {
            let out = run_ok(
                Command::new("ip").args(["-n", &self.ns[i], "maddr", "show", "dev", IF]),
                "ip maddr",
            );
            if String::from_utf8_lossy(&out.stdout).contains(group) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} never joined {group}",
                self.ns[i]
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A netmeter server (`-s -p PORT`) in namespace `i`, listening.
    pub fn server(&self, i: usize, port: &str) -> (Proc, Drained) {
        let mut c = self.exec(i, netmeter());
        c.args(["-s", "-p", port]);
        let mut p = Proc::spawn(&format!("server {i}"), &mut c);
        let d = p.drain();
        super::await_tcp_listening(p.pid(), port.parse().unwrap());
        (p, d)
    }
}

impl Drop for BridgeBed {
    fn drop(&mut self) {
        for n in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// Ask `p` to stop (SIGTERM), as a user's Ctrl-C would.
pub fn stop(p: &Proc) {
    let _ = Command::new("kill")
        .args(["-TERM", &p.pid().to_string()])
        .status();
}

/// Stop each of `procs` and wait for it (bounded).
pub fn stop_all(procs: Vec<(Proc, Drained)>) {
    for (p, _) in &procs {
        stop(p);
    }
    for (p, _) in procs {
        let _ = p.wait_bounded(LONG);
    }
}
