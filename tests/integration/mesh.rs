//! `netmeter mesh`: loopback (several servers on one host: pairs, a host down, Ctrl-C)
//! and, full tier, four network-namespace hosts on a bridge, each running a real
//! `netmeter -s --psk-file` daemon: the 12-pair matrix, a host killed in the middle,
//! a controller without the key.

use crate::support::*;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

struct KeyDir(PathBuf);

impl KeyDir {
    fn new(tag: &str) -> KeyDir {
        let dir = std::env::temp_dir().join(format!("nm-mesh-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("key"), "6b1d0e0f3a7c4c2b9e8d7f6a5b4c3d2e\n").unwrap();
        std::fs::write(dir.join("other"), "f0e1d2c3b4a5968778695a4b3c2d1e0f\n").unwrap();
        KeyDir(dir)
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for KeyDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn cells(v: &serde_json::Value) -> &Vec<serde_json::Value> {
    v["cells"].as_array().expect("cells")
}

fn ok_cells(v: &serde_json::Value) -> usize {
    cells(v)
        .iter()
        .filter(|c| {
            c["error"].is_null() && f64_at(c, "/report/end/sum_received/bits_per_second") > 0.0
        })
        .count()
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn a_loopback_mesh_reports_every_pair_and_a_down_host_as_error_cells() {
    let keys = KeyDir::new("lo");
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let _servers: Vec<_> = ports
        .iter()
        .map(|p| {
            netmeter_server(
                *p,
                &[
                    "--psk-file",
                    &keys.path("key"),
                    "--allow-third-party",
                    "127.0.0.0/8",
                ],
            )
        })
        .collect();
    let down = free_port();
    let mut hosts: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    hosts.push(format!("127.0.0.1:{down}"));
    let out = run(
        Command::new(netmeter())
            .args(["mesh", "--psk-file", &keys.path("key"), "-J"])
            .args(&hosts)
            .args(["--", "-t", "0.5"]),
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", show(&out));
    let v = json_of(&out, "mesh");
    assert_eq!(v["planned"], 12);
    assert_eq!(cells(&v).len(), 12);
    // The 6 pairs among the live servers ran; the 6 touching the down host are errors.
    assert_eq!(ok_cells(&v), 6, "{v:#}");
    let errors: Vec<&str> = cells(&v)
        .iter()
        .filter_map(|c| c["error"].as_str())
        .collect();
    assert_eq!(errors.len(), 6);
    assert!(
        errors.iter().all(|e| e.contains("connection refused")),
        "{errors:?}"
    );
    let progress = String::from_utf8_lossy(&out.stderr);
    assert!(progress.contains("[12/12]"), "{progress}");
}

#[test]
fn a_loopback_mesh_writes_the_table_the_file_and_the_heatmap() {
    let keys = KeyDir::new("table");
    let ports: Vec<u16> = (0..2).map(|_| free_port()).collect();
    let _servers: Vec<_> = ports
        .iter()
        .map(|p| {
            netmeter_server(
                *p,
                &[
                    "--psk-file",
                    &keys.path("key"),
                    "--allow-third-party",
                    "127.0.0.1",
                ],
            )
        })
        .collect();
    let (json, svg) = (keys.0.join("m.json"), keys.0.join("m.svg"));
    let out = run(
        Command::new(netmeter())
            .args(["mesh", "--psk-file", &keys.path("key"), "-o"])
            .arg(&json)
            .arg("--plot")
            .arg(&svg)
            .args(ports.iter().map(|p| format!("127.0.0.1:{p}")))
            .args(["--", "-t", "0.5", "-u", "-b", "10M"]),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", show(&out));
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(
        t.contains("Receiver throughput, Mbit/s") && t.contains("UDP loss, %"),
        "{t}"
    );
    // The throughput table holds each pair's receiver figure from its report: row #0
    // is #0 -> #1, row #1 is #1 -> #0.
    let first_table: Vec<f64> = t
        .split("\n\n")
        .next()
        .unwrap()
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(ok_cells(&v), 2);
    let from_reports: Vec<f64> = cells(&v)
        .iter()
        .map(|c| f64_at(c, "/report/end/sum_received/bits_per_second") / 1e6)
        .collect();
    assert_eq!(first_table.len(), 2, "{t}");
    for (shown, exact) in first_table.iter().zip(&from_reports) {
        assert!((shown - exact).abs() <= 0.005, "{t} vs {from_reports:?}");
    }
    // A 10 Mbit/s UDP test each way (the sender's own figure; the receiver's also
    // counts its setup time).
    for c in cells(&v) {
        let sent = f64_at(c, "/report/end/sum_sent/bits_per_second");
        assert!((9e6..11e6).contains(&sent), "{sent}");
    }
    assert!(std::fs::read_to_string(&svg).unwrap().contains("Gbit/s"));
}

/// Ctrl-C while pairs run: the mesh stops, writes what it has and says so.
#[test]
fn an_interrupted_mesh_writes_what_ran() {
    let keys = KeyDir::new("int");
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let _servers: Vec<_> = ports
        .iter()
        .map(|p| {
            netmeter_server(
                *p,
                &[
                    "--psk-file",
                    &keys.path("key"),
                    "--allow-third-party",
                    "127.0.0.0/8",
                ],
            )
        })
        .collect();
    let mut mesh = Proc::spawn(
        "mesh",
        Command::new(netmeter())
            .args(["mesh", "--psk-file", &keys.path("key"), "-J"])
            .args(ports.iter().map(|p| format!("127.0.0.1:{p}")))
            .args(["--", "-t", "1"]),
    );
    let d = mesh.drain();
    assert!(
        d.wait_for("[1/6]", 1, Duration::from_secs(30)),
        "{}",
        d.text()
    );
    send_sigint(mesh.pid());
    // That it stopped early is judged by what it wrote (interrupted, fewer than the six
    // cells), not by a stopwatch; the bound only ends a mesh that ignores the signal.
    assert!(
        wait_exit(&mut mesh, EVIDENCE_TIMEOUT),
        "mesh did not stop: {}",
        d.text()
    );
    let text = d.text();
    assert!(text.contains("stopped by a signal"), "{text}");
    let stdout = String::from_utf8_lossy(&d.stdout.lock().unwrap()).into_owned();
    let v: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(v["interrupted"], true);
    assert!(ok_cells(&v) >= 1 && cells(&v).len() < 6, "{v:#}");
}

fn send_sigint(pid: u32) {
    let ok = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

fn wait_exit(p: &mut Proc, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if !p.alive() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Four hosts on a bridge, each its own network namespace; a fifth holds the bridge
/// and runs the controller. Dropping it kills the daemons (by PID) and deletes the
/// namespaces, also when a test fails.
struct MeshBed {
    names: Vec<String>,
    daemons: Vec<Option<Proc>>,
}

impl MeshBed {
    const HOSTS: usize = 4;

    fn ns(&self, i: usize) -> &str {
        &self.names[i]
    }

    fn ip(args: &[&str]) {
        let out = Command::new("ip").args(args).output().expect("ip");
        assert!(out.status.success(), "ip {args:?}: {}", show(&out));
    }

    fn new(key: &str) -> MeshBed {
        let tag = format!("nmm{}", std::process::id() % 100000);
        let mut bed = MeshBed {
            names: (0..Self::HOSTS)
                .map(|i| format!("{tag}h{i}"))
                .chain([format!("{tag}br")])
                .collect(),
            daemons: Vec::new(),
        };
        for n in &bed.names {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
            Self::ip(&["netns", "add", n]);
            Self::ip(&["-n", n, "link", "set", "lo", "up"]);
        }
        let br = bed.names[Self::HOSTS].clone();
        Self::ip(&["-n", &br, "link", "add", "br0", "type", "bridge"]);
        Self::ip(&["-n", &br, "addr", "add", "10.77.0.100/24", "dev", "br0"]);
        Self::ip(&["-n", &br, "link", "set", "br0", "up"]);
        for i in 0..Self::HOSTS {
            let h = bed.names[i].clone();
            let port = format!("p{i}");
            Self::ip(&[
                "-n", &h, "link", "add", "eth0", "type", "veth", "peer", "name", &port, "netns",
                &br,
            ]);
            Self::ip(&[
                "-n",
                &h,
                "addr",
                "add",
                &format!("10.77.0.{}/24", i + 1),
                "dev",
                "eth0",
            ]);
            Self::ip(&["-n", &h, "link", "set", "eth0", "up"]);
            Self::ip(&["-n", &br, "link", "set", &port, "master", "br0", "up"]);
        }
        for i in 0..Self::HOSTS {
            let p = Proc::spawn(
                "netns daemon",
                Command::new("ip")
                    .args(["netns", "exec", bed.ns(i), netmeter()])
                    .args([
                        "-s",
                        "--psk-file",
                        key,
                        "--allow-third-party",
                        "10.77.0.0/24",
                    ]),
            );
            bed.daemons.push(Some(p));
        }
        for i in 0..Self::HOSTS {
            let addr = format!("10.77.0.{}:5201", i + 1);
            wait_until(&format!("daemon {addr} listening"), || {
                Command::new("ip")
                    .args([
                        "netns",
                        "exec",
                        &br,
                        "bash",
                        "-c",
                        &format!("exec 3<>/dev/tcp/{}/5201", &addr[..addr.len() - 5]),
                    ])
                    .output()
                    .is_ok_and(|o| o.status.success())
            });
        }
        bed
    }

    fn mesh(&self, key: &str, extra: &[&str]) -> Proc {
        Proc::spawn(
            "mesh",
            Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &self.names[Self::HOSTS],
                    netmeter(),
                    "mesh",
                    "--psk-file",
                    key,
                    "-J",
                ])
                .args((1..=Self::HOSTS).map(|i| format!("10.77.0.{i}")))
                .args(["--retry-gap", "0.5", "--"])
                .args(extra),
        )
    }

    fn kill(&mut self, i: usize) {
        self.daemons[i] = None;
    }
}

impl Drop for MeshBed {
    fn drop(&mut self) {
        self.daemons.clear();
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}

fn finish(p: Proc, limit: Duration) -> Output {
    p.wait_bounded(limit)
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn a_mesh_over_four_namespace_hosts() {
    let keys = KeyDir::new("ns");
    let mut bed = MeshBed::new(&keys.path("key"));

    // The 12-pair matrix, one command.
    let out = finish(
        bed.mesh(&keys.path("key"), &["-t", "1"]),
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", show(&out));
    let v = json_of(&out, "mesh");
    assert_eq!(cells(&v).len(), 12);
    assert_eq!(ok_cells(&v), 12, "{v:#}");
    for c in cells(&v) {
        // Each test ran from its source host to its target, over the bridge.
        let src = c["source"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap();
        let dst = c["target"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap();
        assert_eq!(
            c["report"]["start"]["connected"][0]["local_host"]
                .as_str()
                .unwrap(),
            &src[..src.len() - 5]
        );
        assert_eq!(
            c["report"]["start"]["connected"][0]["remote_host"]
                .as_str()
                .unwrap(),
            &dst[..dst.len() - 5]
        );
    }

    // A controller without the key: every cell refused, nothing run.
    let out = finish(
        bed.mesh(&keys.path("other"), &["-t", "1"]),
        Duration::from_secs(60),
    );
    assert!(!out.status.success(), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no pair of the mesh ran"),
        "{}",
        show(&out)
    );
    let v = json_of(&out, "mesh");
    assert_eq!(ok_cells(&v), 0);
    assert!(
        cells(&v)
            .iter()
            .all(|c| c["error"].as_str().unwrap_or("").contains("pre-shared key")),
        "{v:#}"
    );

    // A host killed in the middle: its pairs are error cells, the rest ran.
    let mesh = bed.mesh(&keys.path("key"), &["-t", "1"]);
    let mut mesh = mesh;
    let d = mesh.drain();
    assert!(
        d.wait_for("[1/12]", 1, Duration::from_secs(60)),
        "{}",
        d.text()
    );
    bed.kill(3);
    assert!(wait_exit(&mut mesh, Duration::from_secs(120)));
    let stdout = String::from_utf8_lossy(&d.stdout.lock().unwrap()).into_owned();
    let v: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {}", d.text()));
    assert_eq!(cells(&v).len(), 12);
    let failed: Vec<&serde_json::Value> =
        cells(&v).iter().filter(|c| !c["error"].is_null()).collect();
    assert!(!failed.is_empty(), "{v:#}");
    assert!(
        failed
            .iter()
            .all(|c| format!("{}{}", c["source"], c["target"]).contains("10.77.0.4")),
        "only host #3's pairs fail: {v:#}"
    );
    // The six pairs among the three live hosts all ran.
    assert!(ok_cells(&v) >= 6, "{v:#}");
}

/// A target busy with another test (iperf3's access denied, `--max-tests 1`) is tried
/// again after `--retry-gap` until it is free; the cell counts the tries.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn a_busy_target_is_retried_until_it_is_free() {
    let keys = KeyDir::new("busy");
    let (a, b) = (free_port(), free_port());
    let opts = [
        "--psk-file",
        &keys.path("key"),
        "--allow-third-party",
        "127.0.0.1",
    ];
    let (_a, _) = netmeter_server(a, &opts);
    let (_b, b_log) = netmeter_server(b, &opts);
    let _busy = Proc::spawn(
        "busy client",
        Command::new(netmeter()).args([
            "-c",
            "127.0.0.1",
            "-p",
            &b.to_string(),
            "-t",
            "2",
            "--psk-file",
            &keys.path("key"),
        ]),
    );
    assert!(b_log.wait_for("Accepted connection", 1, Duration::from_secs(10)));
    let pairs = keys.0.join("pairs");
    std::fs::write(&pairs, format!("127.0.0.1:{a} 127.0.0.1:{b}\n")).unwrap();
    let out = run(
        Command::new(netmeter())
            .args(["mesh", "--psk-file", &keys.path("key"), "-J", "--pairs"])
            .arg(&pairs)
            .args(["--retry-gap", "0.5", "--retries", "20"])
            .args([format!("127.0.0.1:{a}"), format!("127.0.0.1:{b}")])
            .args(["--", "-t", "0.5"]),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", show(&out));
    let v = json_of(&out, "mesh");
    assert_eq!(cells(&v).len(), 1);
    assert_eq!(ok_cells(&v), 1, "{v:#}");
    assert!(v["cells"][0]["attempts"].as_u64().unwrap() >= 2, "{v:#}");
}

/// `--sync-start`: the pairs of one wave start together. Two hosts, `--per-host 2`: both
/// directions run at once (each server holds two tests), with the same requested
/// `--txstart-time`, and each started within 0.3 s of it.
#[test]
fn sync_start_starts_a_wave_together() {
    let keys = KeyDir::new("sync");
    let ports: Vec<u16> = (0..2).map(|_| free_port()).collect();
    let _servers: Vec<_> = ports
        .iter()
        .map(|p| {
            netmeter_server(
                *p,
                &[
                    "--psk-file",
                    &keys.path("key"),
                    "--allow-third-party",
                    "127.0.0.0/8",
                    "--max-tests",
                    "2",
                    // Every host of this mesh is 127.0.0.1: let one source run both.
                    "--max-tests-per-source",
                    "2",
                ],
            )
        })
        .collect();
    let hosts: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let out = run(
        Command::new(netmeter())
            .args(["mesh", "--psk-file", &keys.path("key"), "-J"])
            .args(["--per-host", "2", "--sync-start", "1"])
            .args(&hosts)
            .args(["--", "-t", "1"]),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", show(&out));
    let v = json_of(&out, "mesh");
    assert_eq!(ok_cells(&v), 2, "{v:#}");
    let starts: Vec<(f64, f64)> = cells(&v)
        .iter()
        .map(|c| {
            let t = &c["report"]["start"]["netmeter"]["txstart"];
            (f64_at(t, "/requested"), f64_at(t, "/started"))
        })
        .collect();
    assert_eq!(starts[0].0, starts[1].0, "one wave, one start: {starts:?}");
    // Judged by the reports' txstart records, with a bound a busy host cannot reach by
    // being late (only by running the tests one after the other): each started no
    // earlier than the wave's time and within its one-second test of it, so the two
    // overlapped; run one after the other they would start a second or more apart.
    for (req, started) in &starts {
        assert!(*started >= *req - 1e-5 && started - req < 1.0, "{starts:?}");
    }
    assert!((starts[0].1 - starts[1].1).abs() < 1.0, "{starts:?}");
    // Its own --txstart-time beside --sync-start is refused in one sentence.
    let both = run(
        Command::new(netmeter())
            .args(["mesh", "--psk-file", &keys.path("key"), "--sync-start", "1"])
            .args(&hosts)
            .args(["--", "-t", "1", "--txstart-time", "1"]),
        Duration::from_secs(10),
    );
    assert_eq!(both.status.code(), Some(1), "{}", show(&both));
    assert!(
        String::from_utf8_lossy(&both.stderr).contains("give one of them, not both"),
        "{}",
        show(&both)
    );
}
