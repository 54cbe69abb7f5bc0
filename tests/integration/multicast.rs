//! Multicast on a bridge: one sender and three receivers, each in a network namespace
//! of its own, on a Linux bridge (in a fifth namespace) with multicast snooping off, so
//! the bridge floods every group to every port and only the receivers' own joins (and
//! source filters) decide who hears what.
//!
//! Loss toward one receiver is made by nftables in that receiver's input hook: every
//! Nth data datagram (`numgen inc`, the payload's first bit 0: a positive sequence
//! number, so the FIN's copies are never counted or dropped) is dropped and counted.
//! Each receiver's reported loss must equal its own drop counter, the others' none.
//! A receiver joined to a source the sender is not (SSM) must hear nothing and say so.
//! The iperf 2 tests run iperf 2.1.8 / 2.2.1 as the sender and as the receivers, judged
//! by the iperf 2 side's own report.
//!
//! Namespaces are named `nmm{pid}x{n}{role}` and deleted when the bed drops (also while
//! unwinding); beds of a test process that died are swept by the next one.

use crate::support::{Drained, Proc, netmeter, peer, show};
use serde_json::Value;
use std::net::IpAddr;
use std::process::{Command, Output, Stdio};
use std::sync::Once;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const PREFIX: &str = "nmm";
const ROLES: [&str; 5] = ["s", "r1", "r2", "r3", "br"];
const IF: &str = "e0";
const PORT: &str = "5001";
/// Bounds a failure only: a run takes a few seconds.
const LONG: Duration = Duration::from_secs(90);

static N: AtomicU32 = AtomicU32::new(0);
static SWEEP: Once = Once::new();

/// The bed: namespaces 0 (sender), 1..=3 (receivers), 4 (bridge).
struct Bed {
    ns: Vec<String>,
}

fn run_ok(cmd: &mut Command, what: &str) -> Output {
    let out = crate::support::run_bounded(cmd, Duration::from_secs(30), what);
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

impl Bed {
    fn new() -> Bed {
        SWEEP.call_once(sweep);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let mut bed = Bed { ns: Vec::new() };
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
            ip(&["-n", &h, "addr", "add", &format!("{}/24", v4(i)), "dev", IF]);
            ip(&[
                "-n",
                &h,
                "addr",
                "add",
                &format!("{}/64", v6(i)),
                "dev",
                IF,
                "nodad",
            ]);
            ip(&["-n", &h, "link", "set", IF, "up"]);
            // iperf 2.1.8's sender needs a route to the group (its %dev binds the
            // socket, it does not choose the multicast interface).
            ip(&["-n", &h, "route", "add", "224.0.0.0/4", "dev", IF]);
        }
        bed
    }

    fn exec(&self, i: usize, prog: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns[i], prog]);
        c
    }

    /// Drop every `nth` data datagram to the group's port at receiver `i`, counted.
    fn drop_every(&self, i: usize, nth: u32) {
        let script = format!(
            "table inet mc {{\n chain in {{\n  type filter hook input priority 0; policy accept;\n  udp dport {PORT} @th,64,1 0 numgen inc mod {nth} {} counter drop\n }}\n}}\n",
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
    fn dropped(&self, i: usize) -> (u64, u64) {
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

    /// Wait until receiver `i`'s interface has joined `group` (the kernel's word).
    fn await_join(&self, i: usize, group: &str) {
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
}

impl Drop for Bed {
    fn drop(&mut self) {
        for n in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn v4(i: usize) -> String {
    format!("10.77.0.{}", i + 1)
}

fn v6(i: usize) -> String {
    format!("fd77::{}", i + 1)
}

/// A netmeter receiver in namespace `i`: `-s -u -B GROUP%e0 [-H SOURCE] -J`.
fn receiver(
    bed: &Bed,
    i: usize,
    group: &str,
    source: Option<&str>,
    one_off: bool,
) -> (Proc, Drained) {
    let mut c = bed.exec(i, netmeter());
    c.args([
        "-s",
        "-u",
        "-B",
        &format!("{group}%{IF}"),
        "-p",
        PORT,
        "-J",
        "-t",
        "80",
    ]);
    if let Some(s) = source {
        c.args(["-H", s]);
    }
    if one_off {
        c.arg("-1");
    }
    let mut p = Proc::spawn(&format!("receiver {i}"), &mut c);
    let d = p.drain();
    (p, d)
}

/// The JSON lines a receiver printed.
fn lines(d: &Drained) -> Vec<Value> {
    let o = d.stdout.lock().unwrap().clone();
    String::from_utf8_lossy(&o)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn stop(p: &Proc) {
    let _ = Command::new("kill")
        .args(["-TERM", &p.pid().to_string()])
        .status();
}

struct Case {
    group: &'static str,
    v6: bool,
    /// Source-specific: receivers 1 and 2 join (sender, group), receiver 3 (another, group).
    ssm: bool,
    /// Receiver (1..=3) whose input drops every Nth datagram.
    lossy: usize,
    nth: u32,
}

fn addr(c: &Case, i: usize) -> String {
    if c.v6 { v6(i) } else { v4(i) }
}

fn bed_run(c: &Case) {
    let bed = Bed::new();
    bed.drop_every(c.lossy, c.nth);
    let mut rx = Vec::new();
    for i in 1..=3 {
        let (src, hears) = match (c.ssm, i) {
            (false, _) => (None, true),
            (true, 3) => (Some(addr(c, 9)), false),
            (true, _) => (Some(addr(c, 0)), true),
        };
        let (p, d) = receiver(&bed, i, c.group, src.as_deref(), hears);
        rx.push((i, p, d, hears));
    }
    for (i, ..) in &rx {
        bed.await_join(*i, c.group);
    }
    let src = addr(c, 0);
    let sent = run_ok(
        bed.exec(0, netmeter()).args([
            "-c",
            &format!("{}%{IF}", c.group),
            "-B",
            &src,
            "-u",
            "-b",
            "2M",
            "-t",
            "2",
            "-p",
            PORT,
            "--ttl",
            "2",
            "-J",
        ]),
        "the multicast sender",
    );
    let s: Value = serde_json::from_slice(&sent.stdout).expect("sender JSON");
    let datagrams = s["datagrams"].as_u64().unwrap();
    assert!(datagrams > 100, "{s}");
    for (i, p, d, hears) in rx {
        if hears {
            let out = p.wait_bounded(LONG);
            let v = lines(&d);
            assert_eq!(v.len(), 1, "receiver {i}: {}", show(&out));
            let sum = &v[0]["sum"];
            let (lost, packets) = (
                sum["lost"].as_u64().unwrap(),
                sum["packets"].as_u64().unwrap(),
            );
            assert_eq!(v[0]["reason"], "fin", "receiver {i}: {}", v[0]);
            assert_eq!(
                v[0]["source_host"]
                    .as_str()
                    .unwrap()
                    .parse::<IpAddr>()
                    .unwrap(),
                src.parse::<IpAddr>().unwrap()
            );
            assert_eq!(
                lost + packets,
                datagrams,
                "receiver {i}: every datagram sent is received or lost: {}",
                v[0]
            );
            if i == c.lossy {
                let (drops, bytes) = bed.dropped(i);
                // nft counts skbs: each one datagram of 1470 bytes and its headers
                // (what the hook sees of them differs between IPv4 and IPv6), never
                // several datagrams as one.
                assert!(
                    drops > 0 && bytes % drops == 0,
                    "{bytes} bytes in {drops} packets"
                );
                assert!(
                    (1470..1470 + 64).contains(&(bytes / drops)),
                    "{bytes} bytes in {drops} packets"
                );
                assert!(drops >= datagrams / u64::from(c.nth) - 1, "{drops}");
                assert_eq!(
                    lost, drops,
                    "receiver {i}'s loss is its own drop counter: {}",
                    v[0]
                );
            } else {
                assert_eq!(lost, 0, "receiver {i} lost nothing: {}", v[0]);
            }
        } else {
            // Outside the source filter: nothing heard; stopped, it says so.
            stop(&p);
            let out = p.wait_bounded(LONG);
            let v = lines(&d);
            assert_eq!(v.len(), 1, "receiver {i}: {}", show(&out));
            assert!(
                v[0]["error"]
                    .as_str()
                    .unwrap()
                    .contains("no datagram from source"),
                "{}",
                v[0]
            );
            assert!(v[0].get("sum").is_none(), "{}", v[0]);
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn any_source_v4_each_receiver_reports_its_own_loss() {
    bed_run(&Case {
        group: "239.1.1.1",
        v6: false,
        ssm: false,
        lossy: 1,
        nth: 7,
    });
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn source_specific_v4_outside_the_filter_hears_nothing() {
    bed_run(&Case {
        group: "232.1.1.1",
        v6: false,
        ssm: true,
        lossy: 2,
        nth: 5,
    });
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn any_source_v6_each_receiver_reports_its_own_loss() {
    bed_run(&Case {
        group: "ff15::77",
        v6: true,
        ssm: false,
        lossy: 3,
        nth: 6,
    });
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn source_specific_v6_outside_the_filter_hears_nothing() {
    bed_run(&Case {
        group: "ff3e::8000:1",
        v6: true,
        ssm: true,
        lossy: 1,
        nth: 9,
    });
}

/// The last `lost/total (` figures of an iperf 2 receiver's report.
fn iperf2_lost_total(text: &str) -> Option<(u64, u64)> {
    text.lines().rev().find_map(|l| {
        let (before, _) = l.split_once(" (")?;
        let field = before.split_whitespace().last()?;
        let (lost, total) = field.split_once('/')?;
        Some((lost.parse().ok()?, total.parse().ok()?))
    })
}

/// netmeter sends to iperf 2 receivers (any-source on 1 and 2, source-specific on 3),
/// receiver 2 dropping every 6th datagram; then iperf 2 sends to netmeter receivers.
fn iperf2_both_ways(key: &str) {
    let iperf = peer(key);
    let bed = Bed::new();
    bed.drop_every(2, 6);
    let (asm, ssm) = ("239.1.1.1", "232.1.1.1");
    let mut rx = Vec::new();
    for i in 1..=3 {
        let mut c = bed.exec(i, &iperf);
        c.args(["-s", "-u", "-p", PORT]);
        if i == 3 {
            c.args(["-B", &format!("{ssm}%{IF}"), "-H", &v4(0)]);
        } else {
            c.args(["-B", &format!("{asm}%{IF}")]);
        }
        let mut p = Proc::spawn(&format!("iperf 2 receiver {i}"), &mut c);
        let d = p.drain();
        rx.push((i, p, d));
    }
    for i in 1..=3 {
        bed.await_join(i, if i == 3 { ssm } else { asm });
    }
    let mut sent = std::collections::HashMap::new();
    for g in [asm, ssm] {
        let out = run_ok(
            bed.exec(0, netmeter()).args([
                "-c",
                &format!("{g}%{IF}"),
                "-B",
                &v4(0),
                "-u",
                "-b",
                "2M",
                "-t",
                "2",
                "-p",
                PORT,
                "-J",
            ]),
            "the multicast sender",
        );
        let v: Value = serde_json::from_slice(&out.stdout).expect("sender JSON");
        sent.insert(g, v["datagrams"].as_u64().unwrap());
    }
    let deadline = Instant::now() + LONG;
    for (i, p, d) in &rx {
        let got = loop {
            if let Some(f) = iperf2_lost_total(&d.text()) {
                break f;
            }
            assert!(
                Instant::now() < deadline,
                "iperf 2 receiver {i} printed no report\n{}",
                d.text()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        stop(p);
        let lost = if *i == 2 { bed.dropped(2).0 } else { 0 };
        assert!(lost > 0 || *i != 2);
        // iperf 2 counts the FIN as the last datagram, as netmeter's sender does.
        let sent = sent[if *i == 3 { ssm } else { asm }];
        assert_eq!(
            got,
            (lost, sent),
            "iperf 2 receiver {i}'s report\n{}",
            d.text()
        );
    }
    drop(rx);

    // iperf 2 sends; netmeter receivers hear it (receiver 2 still drops every 6th).
    let before = bed.dropped(2).0;
    let mut rx = Vec::new();
    for i in 1..=3 {
        let (p, d) = receiver(&bed, i, asm, None, true);
        rx.push((i, p, d));
    }
    for i in 1..=3 {
        bed.await_join(i, asm);
    }
    let out = run_ok(
        bed.exec(0, &iperf).args([
            "-c", asm, "-u", "-b", "2M", "-t", "2", "-p", PORT, "-T", "2",
        ]),
        "the iperf 2 sender",
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let sent: u64 = text
        .lines()
        .find_map(|l| {
            l.split("Sent ")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("iperf 2's sent count\n{text}"));
    for (i, p, d) in rx {
        let out = p.wait_bounded(LONG);
        let v = lines(&d);
        assert_eq!(v.len(), 1, "receiver {i}: {}", show(&out));
        let sum = &v[0]["sum"];
        let lost = if i == 2 { bed.dropped(2).0 - before } else { 0 };
        assert_eq!(
            sum["lost"].as_u64().unwrap(),
            lost,
            "receiver {i}: {}",
            v[0]
        );
        // iperf 2's `Sent N datagrams` is one more than any receiver counts (its own
        // receiver reports N-1 too, 2.1.8 and 2.2.1 alike).
        let total = sum["lost"].as_u64().unwrap() + sum["packets"].as_u64().unwrap();
        assert_eq!(total + 1, sent, "receiver {i}: {}", v[0]);
    }
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root and the iperf 2.1.8 peer"
)]
fn iperf2_218_both_ways() {
    iperf2_both_ways("NETMETER_IPERF2_218");
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root and the iperf 2.2.1 peer"
)]
fn iperf2_221_both_ways() {
    iperf2_both_ways("NETMETER_IPERF2_221");
}

#[test]
fn a_missing_interface_is_one_line_naming_it() {
    let out = crate::support::run_bounded(
        Command::new(netmeter()).args(["-s", "-u", "-B", "239.1.1.1%nm-nosuch0", "-p", "5001"]),
        Duration::from_secs(30),
        "a receiver on a missing interface",
    );
    assert!(!out.status.success(), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("-B 239.1.1.1%nm-nosuch0: no such interface"),
        "{err}"
    );
}

/// The control port of the receivers' netmeter servers (the group's port is `PORT`).
const CTRL_PORT: &str = "5201";

/// A netmeter server (`-s -p 5201`) in namespace `i`, listening.
fn server(bed: &Bed, i: usize) -> (Proc, Drained) {
    let mut c = bed.exec(i, netmeter());
    c.args(["-s", "-p", CTRL_PORT]);
    let mut p = Proc::spawn(&format!("server {i}"), &mut c);
    let d = p.drain();
    crate::support::await_tcp_listening(p.pid(), CTRL_PORT.parse().unwrap());
    (p, d)
}

fn ctrl_host(c: &Case, i: usize) -> String {
    if c.v6 {
        format!("[{}]:{CTRL_PORT}", v6(i))
    } else {
        format!("{}:{CTRL_PORT}", v4(i))
    }
}

/// The sender with `--receivers` to receivers `which`; its `-J` document.
fn receivers_run(bed: &Bed, c: &Case, which: &[usize]) -> (Value, Output) {
    let list: Vec<String> = which.iter().map(|&i| ctrl_host(c, i)).collect();
    let out = crate::support::run_bounded(
        bed.exec(0, netmeter()).args([
            "-c",
            &format!("{}%{IF}", c.group),
            "-B",
            &addr(c, 0),
            "-u",
            "-b",
            "2M",
            "-t",
            "2",
            "-p",
            PORT,
            "--ttl",
            "2",
            "--trip-times",
            "-J",
            "--receivers",
            &list.join(","),
        ]),
        LONG,
        "the multicast sender with --receivers",
    );
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("the sender's -J document ({e})\n{}", show(&out)));
    (v, out)
}

/// Three netmeter servers asked by the sender; receiver `lossy` drops every Nth data
/// datagram. Each row's loss is its own drop counter, the others' none, and every
/// datagram sent is received or lost at each.
fn receivers_bed_run(c: &Case) {
    let bed = Bed::new();
    bed.drop_every(c.lossy, c.nth);
    let servers: Vec<_> = (1..=3).map(|i| server(&bed, i)).collect();
    let (v, out) = receivers_run(&bed, c, &[1, 2, 3]);
    assert!(out.status.success(), "{}", show(&out));
    let datagrams = v["end"]["sender"]["datagrams"].as_u64().unwrap();
    assert!(datagrams > 100, "{v}");
    let rows = v["end"]["receivers"].as_array().expect("end.receivers");
    assert_eq!(rows.len(), 3, "{v}");
    let mut lost_sum = 0;
    for (k, row) in rows.iter().enumerate() {
        let i = k + 1;
        assert_eq!(row["name"], ctrl_host(c, i).as_str(), "{row}");
        assert!(row.get("reason").is_none(), "receiver {i}: {row}");
        let (lost, packets) = (
            row["sum"]["lost"].as_u64().unwrap(),
            row["sum"]["packets"].as_u64().unwrap(),
        );
        assert_eq!(lost + packets, datagrams, "receiver {i}: {row}");
        let want = if i == c.lossy { bed.dropped(i).0 } else { 0 };
        assert!(i != c.lossy || want > 0, "receiver {i} dropped nothing");
        assert_eq!(
            lost, want,
            "receiver {i}'s loss is its own drop counter: {row}"
        );
        assert!(row["owd"]["count"].as_u64().unwrap() > 0, "{row}");
        assert!(!row["intervals"].as_array().unwrap().is_empty(), "{row}");
        lost_sum += lost;
    }
    assert_eq!(
        v["end"]["receivers_sum"]["sum"]["lost"].as_u64(),
        Some(lost_sum),
        "{v}"
    );
    for (p, d) in servers {
        stop(&p);
        let _ = p.wait_bounded(LONG);
        let log = d.text();
        assert!(log.contains("multicast receiver for"), "{log}");
    }
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn receivers_any_source_v4_each_row_is_its_own_loss() {
    receivers_bed_run(&Case {
        group: "239.1.1.1",
        v6: false,
        ssm: false,
        lossy: 2,
        nth: 7,
    });
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn receivers_source_specific_v4_each_row_is_its_own_loss() {
    receivers_bed_run(&Case {
        group: "232.1.1.1",
        v6: false,
        ssm: true,
        lossy: 1,
        nth: 5,
    });
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn receivers_any_source_v6_each_row_is_its_own_loss() {
    receivers_bed_run(&Case {
        group: "ff15::77",
        v6: true,
        ssm: false,
        lossy: 3,
        nth: 6,
    });
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn receivers_source_specific_v6_each_row_is_its_own_loss() {
    receivers_bed_run(&Case {
        group: "ff3e::8000:1",
        v6: true,
        ssm: true,
        lossy: 2,
        nth: 9,
    });
}

/// Receiver 3's server is not running: its row says why, the other two are complete;
/// the text rows name each receiver as given, and the sum adds the two.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn receivers_one_server_missing_is_a_row_with_its_reason() {
    let c = Case {
        group: "239.1.1.1",
        v6: false,
        ssm: false,
        lossy: 1,
        nth: 4,
    };
    let bed = Bed::new();
    bed.drop_every(c.lossy, c.nth);
    let servers: Vec<_> = (1..=2).map(|i| server(&bed, i)).collect();
    let (v, out) = receivers_run(&bed, &c, &[1, 2, 3]);
    assert!(out.status.success(), "{}", show(&out));
    let rows = v["end"]["receivers"].as_array().expect("end.receivers");
    assert_eq!(rows.len(), 3, "{v}");
    let datagrams = v["end"]["sender"]["datagrams"].as_u64().unwrap();
    for row in &rows[..2] {
        let s = &row["sum"];
        assert_eq!(
            s["lost"].as_u64().unwrap() + s["packets"].as_u64().unwrap(),
            datagrams,
            "{row}"
        );
    }
    assert_eq!(rows[0]["sum"]["lost"].as_u64(), Some(bed.dropped(1).0));
    let why = rows[2]["reason"].as_str().expect("a reason");
    assert!(why.contains("refused"), "{why}");
    assert!(rows[2].get("sum").is_none(), "{}", rows[2]);
    for (p, _) in servers {
        stop(&p);
        let _ = p.wait_bounded(LONG);
    }
}

/// Receiver 1 is an iperf3 server (3.18), which ignores the join request and goes on
/// to a test: its row is a sentence naming --receivers, and receiver 2 (netmeter) is
/// complete. In text: a row per receiver, named as given, and the sum.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root and the iperf3 3.18 peer"
)]
fn receivers_an_iperf3_server_is_refused_naming_the_option() {
    let iperf3 = peer("NETMETER_IPERF3_318");
    let bed = Bed::new();
    let mut c = bed.exec(1, &iperf3);
    c.args(["-s", "-p", CTRL_PORT]);
    let mut i3 = Proc::spawn("iperf3 server 1", &mut c);
    let _i3_out = i3.drain();
    crate::support::await_tcp_listening(i3.pid(), CTRL_PORT.parse().unwrap());
    let (nm, _nm_out) = server(&bed, 2);
    let names = [
        format!("{}:{CTRL_PORT}", v4(1)),
        format!("{}:{CTRL_PORT}", v4(2)),
    ];
    let out = crate::support::run_bounded(
        bed.exec(0, netmeter()).args([
            "-c",
            &format!("239.1.1.1%{IF}"),
            "-B",
            &v4(0),
            "-u",
            "-b",
            "1M",
            "-t",
            "1",
            "-p",
            PORT,
            "--receivers",
            &names.join(","),
        ]),
        LONG,
        "the multicast sender with an iperf3 receiver",
    );
    assert!(out.status.success(), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let row = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no row for {name}\n{text}"))
            .to_string()
    };
    let r1 = row(&names[0]);
    assert!(
        r1.contains("refused: it went on to a test") && r1.contains("--receivers"),
        "{r1}"
    );
    let r2 = row(&names[1]);
    assert!(r2.contains("0/") && r2.contains("bits/sec"), "{r2}");
    assert!(row("[SUM]").contains("bits/sec"), "{text}");
    stop(&i3);
    stop(&nm);
    let _ = i3.wait_bounded(LONG);
    let _ = nm.wait_bounded(LONG);
}

/// Interrupted while it sends (SIGINT), the sender ends with its FIN and still
/// collects every receiver's figures: rows with figures, not "no figures sent".
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn receivers_an_interrupted_sender_still_reports_every_receiver() {
    let bed = Bed::new();
    let servers: Vec<_> = (1..=2).map(|i| server(&bed, i)).collect();
    let names = [
        format!("{}:{CTRL_PORT}", v4(1)),
        format!("{}:{CTRL_PORT}", v4(2)),
    ];
    let mut c = bed.exec(0, netmeter());
    c.args([
        "-c",
        &format!("239.1.1.1%{IF}"),
        "-B",
        &v4(0),
        "-u",
        "-b",
        "1M",
        "-t",
        "60",
        "-p",
        PORT,
        "--receivers",
        &names.join(","),
    ]);
    let mut p = Proc::spawn("the multicast sender", &mut c);
    let d = p.drain();
    assert!(
        d.wait_for("Multicast sender", 1, LONG),
        "the sender never started sending\n{}",
        d.text()
    );
    let st = Command::new("kill")
        .args(["-s", "INT", &p.pid().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    let out = p.wait_bounded(LONG);
    assert!(out.status.success(), "{}\n{}", show(&out), d.text());
    // The pipe's last bytes may still be on their way to the drain.
    assert!(d.wait_for("[SUM]", 1, LONG), "no [SUM] row\n{}", d.text());
    let text = d.text();
    for name in &names {
        let row = text
            .lines()
            .find(|l| l.starts_with(name.as_str()))
            .unwrap_or_else(|| panic!("no row for {name}\n{text}"));
        assert!(row.contains("bits/sec"), "{row}\n{text}");
    }
    for (s, _) in servers {
        stop(&s);
        let _ = s.wait_bounded(LONG);
    }
}
