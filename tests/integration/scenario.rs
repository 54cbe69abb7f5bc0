//! `netmeter scenario FILE` over loopback: two servers on two ports with the key and
//! third-party tests allowed; flows local and third-party started together (judged
//! from the start times the reports recorded), a host down, the JSON shape and the
//! text; and every shipped example parsed.

use crate::support::*;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!("nm-scen-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("key"), "6b1d0e0f3a7c4c2b9e8d7f6a5b4c3d2e\n").unwrap();
        Dir(dir)
    }
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn flows(v: &serde_json::Value) -> &Vec<serde_json::Value> {
    v["flows"].as_array().expect("flows")
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn local_and_third_party_flows_start_together_and_report_per_flow() {
    let dir = Dir::new("together");
    let (pa, pb) = (free_port(), free_port());
    // The servers read the key relative to their own working directory.
    let key = dir.0.join("key").display().to_string();
    let srv = |p: u16| {
        netmeter_server(
            p,
            &[
                "--psk-file",
                &key,
                "--allow-third-party",
                "127.0.0.0/8",
                "--max-tests",
                "4",
            ],
        )
    };
    let (_a, _b) = (srv(pa), srv(pb));
    let file = dir.write(
        "s.toml",
        &format!(
            "psk_file = \"key\"\n[hosts.a]\naddress = \"127.0.0.1:{pa}\"\n[hosts.b]\naddress = \"127.0.0.1:{pb}\"\n\
             [[flow]]\nname = \"up\"\nfrom = \"local\"\nto = \"a\"\nargs = \"-t 1\"\n\
             [[flow]]\nname = \"third\"\nfrom = \"a\"\nto = \"b\"\nargs = \"-u -b 2M -t 1\"\n\
             [[flow]]\nname = \"down\"\nfrom = \"local\"\nto = \"b\"\nargs = \"-t 1 -R -T 'down link'\"\n"
        ),
    );
    let out = run(
        Command::new(netmeter())
            .arg("scenario")
            .arg(&file)
            .arg("-J"),
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", show(&out));
    let v = json_of(&out, "scenario");
    let f = flows(&v);
    assert_eq!(f.len(), 3, "{v:#}");
    let names: Vec<&str> = f.iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["up", "third", "down"]);
    assert_eq!(f[1]["from"], "a");
    let epoch = f64_at(&v, "/start_epoch");
    for x in f {
        assert!(x["error"].is_null(), "{x:#}");
        assert!(
            f64_at(x, "/report/end/sum_received/bytes") > 0.0,
            "{}: {x:#}",
            x["name"]
        );
        // Every flow was asked for the one start instant, and its report says when
        // its data began: on this loopback every client reads the same clock, and none
        // began before the instant. (How late is bounded generously only: a busy CI
        // machine may set a test up slowly; the netns test judges the spread.)
        assert_eq!(f64_at(x, "/report/start/netmeter/txstart/requested"), epoch);
        let started = f64_at(x, "/report/start/netmeter/txstart/started");
        assert!(
            (started - epoch) > -0.05 && (started - epoch) < 10.0,
            "{}: started {started}, asked {epoch}",
            x["name"]
        );
    }
    assert_eq!(f[2]["report"]["title"], "down link");
    assert_eq!(v["total"]["flows"], 3);
    assert_eq!(v["total"]["failed"], 0);
    assert!(f64_at(&v, "/total/receiver_bits_per_second") > 0.0);
    assert!(f64_at(&v, "/total/start_spread_ms") < 10_000.0);
}

#[test]
fn a_host_down_is_a_flow_with_its_error_and_the_text_labels_each_flow() {
    let dir = Dir::new("down");
    let live = free_port();
    let key = dir.0.join("key").display().to_string();
    let _srv = netmeter_server(
        live,
        &[
            "--psk-file",
            &key,
            "--allow-third-party",
            "127.0.0.0/8",
            "--max-tests",
            "4",
        ],
    );
    let down = free_port();
    let file = dir.write(
        "s.toml",
        &format!(
            "psk_file = \"key\"\n[hosts.live]\naddress = \"127.0.0.1:{live}\"\n[hosts.gone]\naddress = \"127.0.0.1:{down}\"\n\
             [[flow]]\nname = \"ok\"\nfrom = \"local\"\nto = \"live\"\nargs = \"-t 0.3\"\n\
             [[flow]]\nname = \"to-gone\"\nfrom = \"local\"\nto = \"gone\"\nargs = \"-t 0.3\"\n\
             [[flow]]\nname = \"from-gone\"\nfrom = \"gone\"\nto = \"live\"\nargs = \"-t 0.3\"\n"
        ),
    );
    let json = dir.0.join("run.json");
    let out = run(
        Command::new(netmeter())
            .arg("scenario")
            .arg(&file)
            .args(["--lead", "1", "-o"])
            .arg(&json),
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("Flow ok (from local to live 127.0.0.1:{live}")),
        "{text}"
    );
    assert!(text.contains("Flow from-gone (from gone to live"), "{text}");
    assert!(text.contains("1 of 3 flows ran"), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let f = flows(&v);
    assert!(f[0]["error"].is_null(), "{v:#}");
    assert!(f64_at(&f[0], "/report/end/sum_received/bytes") > 0.0);
    for x in &f[1..] {
        let e = x["error"].as_str().unwrap_or_default();
        assert!(e.contains("refused"), "{x:#}");
        assert!(x.get("report").is_none(), "{x:#}");
    }
    assert_eq!(v["total"]["failed"], 2);
    // No flow at all ran: the exit status says so.
    let file = dir.write(
        "gone.toml",
        &format!(
            "[hosts.gone]\naddress = \"127.0.0.1:{down}\"\n[[flow]]\nname = \"x\"\nfrom = \"local\"\nto = \"gone\"\nargs = \"-t 0.3\"\n"
        ),
    );
    let out = run(
        Command::new(netmeter())
            .arg("scenario")
            .arg(&file)
            .args(["--lead", "0.5"]),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no flow of the scenario ran"));
}

#[test]
fn a_bad_file_is_one_sentence_naming_the_line_and_the_key() {
    let dir = Dir::new("bad");
    let file = dir.write(
        "bad.toml",
        "[hosts.a]\naddress = \"127.0.0.1\"\n\n[[flow]]\nname = \"v\"\nfrom = \"local\"\nto = \"a\"\nstart = -2\n",
    );
    let out = run(
        Command::new(netmeter()).arg("scenario").arg(&file),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("line 8: start:"), "{err}");
}

/// Packets the router counted in the nft counter `name` (table `inet scen`).
fn nft_count(bed: &crate::support::netbed::Netbed, name: &str) -> u64 {
    use crate::support::netbed::Side;
    let out = bed
        .run_in(
            Side::R,
            "nft",
            &["-j", "list", "counter", "inet", "scen", name],
            Duration::from_secs(10),
        )
        .expect("nft list counter");
    let v: serde_json::Value = serde_json::from_str(&out).expect("nft -j");
    v["nftables"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|i| i["counter"]["packets"].as_u64())
        .unwrap_or_else(|| panic!("no counter {name} in {out}"))
}

/// The shipped FaceTime-like example between two network-namespace hosts (alice runs
/// both flows as third-party tests toward bob's two servers; the controller sits in
/// alice's namespace) over a 10 ms delay line: each flow's DSCP is on the wire (the
/// router counts, per DSCP value, as many datagrams as the flow's report says it sent),
/// the reverse directions' datagrams all arrive, and each flow's one-way delay shows
/// the line.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn the_facetime_example_marks_each_flow_with_its_dscp_between_two_netns_hosts() {
    use crate::support::netbed::{
        LinkConfig, R_H1_IF, R_H2_IF, Side, bed, tcp_listening, timing_lock,
    };
    let _t = timing_lock();
    let dir = Dir::new("facetime");
    let bed = bed(LinkConfig::new().delay_ms(10.0));
    let (alice, bob) = (bed.h1_addr(), bed.h2_addr());
    let key = dir.0.join("key").display().to_string();
    let allow = format!("{bob}/32");
    let server = |side: Side, port: &str, extra: &[&str]| {
        let mut args = vec!["-s", "-p", port, "--psk-file", &key, "--max-tests", "4"];
        args.extend_from_slice(extra);
        bed.spawn_in(side, netmeter(), &args).expect("server")
    };
    let _servers = [
        server(Side::H1, "5201", &["--allow-third-party", &allow]),
        server(Side::H2, "5201", &[]),
        server(Side::H2, "5202", &[]),
    ];
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    for (side, port) in [(Side::H1, 5201), (Side::H2, 5201), (Side::H2, 5202)] {
        while !bed.in_ns(side, || tcp_listening(port)).unwrap() {
            assert!(std::time::Instant::now() < deadline, "no server on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // Count the data datagrams (not the UDP connect, 4 bytes or "9876" and the test's
    // cookie, nor its reply) by DSCP and direction, in the router.
    let mut script = String::from(
        "table inet scen {\n  counter cs5_12 { }\n  counter cs6_12 { }\n  counter udp_21 { }\n  \
         chain scenario_count {\n    type filter hook forward priority -10; policy accept;\n",
    );
    // By the router interface they arrive on: the delay line passes each packet
    // through the forward hook a second time, from its TUN device.
    for c in ["cs5", "cs6"] {
        script.push_str(&format!(
            "    iifname \"{R_H1_IF}\" ip dscp {c} udp length > 16 @th,64,32 != 0x39383736 counter name {c}_12\n"
        ));
    }
    script.push_str(&format!(
        "    iifname \"{R_H2_IF}\" udp length > 16 @th,64,32 != 0x39383736 counter name udp_21\n  }}\n}}\n"
    ));
    let mut nft = bed.cmd(Side::R, "nft");
    nft.args(["-f", "-"]).stdin(std::process::Stdio::piped());
    let mut child = nft.spawn().expect("nft");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success(), "nft -f: {script}");

    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scenarios/facetime.toml"),
    )
    .unwrap();
    let text = example
        .replace("10.0.0.1", &alice.to_string())
        .replace("10.0.0.2", &bob.to_string())
        .replace("call.key", "key")
        .replace("-t 30", "-t 3");
    let file = dir.write("facetime.toml", &text);
    let out = bed
        .run_in(
            Side::H1,
            netmeter(),
            &["scenario", file.to_str().unwrap(), "-J"],
            Duration::from_secs(120),
        )
        .expect("netmeter scenario");
    let v: serde_json::Value = serde_json::from_str(&out).expect("scenario -J");
    let f = flows(&v);
    assert_eq!(f.len(), 2, "{v:#}");
    let mut starts = Vec::new();
    let mut back_all = 0;
    for (flow, dscp) in [(&f[0], "cs5"), (&f[1], "cs6")] {
        assert!(flow["error"].is_null(), "{flow:#}");
        let sent = f64_at(flow, "/report/end/sum_sent/packets") as u64;
        let back = f64_at(flow, "/report/end/sum_sent_bidir_reverse/packets") as u64;
        assert!(sent > 0 && back > 0, "{flow:#}");
        assert_eq!(
            nft_count(&bed, &format!("{dscp}_12")),
            sent,
            "{}",
            flow["name"]
        );
        back_all += back;
        // The delay line's 10 ms shows in the one-way delay the flow measured.
        let owd = f64_at(
            flow,
            "/report/end/netmeter/trip_times/client_to_server/owd/mean_ms",
        );
        assert!(owd >= 9.0, "{}: one-way delay {owd} ms", flow["name"]);
        starts.push(f64_at(flow, "/report/start/netmeter/txstart/started"));
    }
    // The servers' reverse streams (bob → alice): every datagram counted. (They go
    // unmarked today: the server does not apply the client's --dscp to them.)
    assert_eq!(nft_count(&bed, "udp_21"), back_all);
    // Both clients ran on alice, one clock: their data began together.
    let spread_ms = (starts[0] - starts[1]).abs() * 1e3;
    eprintln!("facetime: starts {spread_ms:.3} ms apart");
    assert!(spread_ms < 500.0, "starts {spread_ms} ms apart");
}

/// Scale every latency in a saved `-J` document's flows by `f` (a baseline that was
/// that much faster).
fn scale_latencies(v: &mut serde_json::Value, f: f64) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k.ends_with("histogram_us") {
                    for b in x.as_array_mut().into_iter().flatten() {
                        b[0] = serde_json::json!(b[0].as_f64().unwrap_or(0.0) * f);
                    }
                } else if k.ends_with("_ms") && x.is_number() {
                    *x = serde_json::json!(x.as_f64().unwrap_or(0.0) * f);
                } else {
                    scale_latencies(x, f);
                }
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| scale_latencies(x, f)),
        _ => {}
    }
}

#[test]
fn a_run_is_judged_against_a_baseline_plotted_and_fails_if_worse() {
    let dir = Dir::new("baseline");
    let port = free_port();
    let key = dir.0.join("key").display().to_string();
    let _srv = netmeter_server(port, &["--psk-file", &key, "--max-tests", "4"]);
    let file = dir.write(
        "s.toml",
        &format!(
            "psk_file = \"key\"\n[hosts.a]\naddress = \"127.0.0.1:{port}\"\n\
             [[flow]]\nname = \"rr\"\nfrom = \"local\"\nto = \"a\"\nargs = \"--bounceback -t 0.5\"\n"
        ),
    );
    let (base, png) = (dir.0.join("base.json"), dir.0.join("cdf.png"));
    let out = run(
        Command::new(netmeter())
            .arg("scenario")
            .arg(&file)
            .args(["--lead", "0.5", "-J", "-o"])
            .arg(&base)
            .arg("--plot")
            .arg(&png),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", show(&out));
    // The flows' latency CDFs, drawn.
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG"), "{} bytes", bytes.len());
    let v = json_of(&out, "scenario");
    assert!(v["latency_ks"].is_array(), "{v:#}");
    // Against a second run: a comparison per flow. (Not judged with --fail-if-worse:
    // on a busy machine a 0.5 s run's round trips can be ten times another's; the
    // exit status is judged below against a baseline made faster on purpose.)
    let out = run(
        Command::new(netmeter())
            .arg("scenario")
            .arg(&file)
            .args(["--lead", "0.5", "-J", "--baseline"])
            .arg(&base),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", show(&out));
    let v = json_of(&out, "scenario");
    assert_eq!(v["baseline"][0]["name"], "rr", "{v:#}");
    assert!(
        v["baseline"][0]["comparison"]["figures"].is_array(),
        "{v:#}"
    );
    // A baseline a hundred times faster: this run is worse, exit status 2.
    let mut fast: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&base).unwrap()).unwrap();
    scale_latencies(&mut fast["flows"], 0.01);
    let fast_file = dir.write("fast.json", &fast.to_string());
    let out = run(
        Command::new(netmeter())
            .arg("scenario")
            .arg(&file)
            .args(["--lead", "0.5", "--fail-if-worse", "5", "--baseline"])
            .arg(&fast_file),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Flow rr against the baseline:"), "{text}");
    assert!(text.contains("worse, significant"), "{text}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("rr"),
        "{}",
        show(&out)
    );
}

/// A server whose wall clock runs `skew_ms` off (`NETMETER_TEST_CLOCK_OFFSET_MS`, which
/// moves every wall-clock reading the process puts on the wire: its clock probes'
/// answers, and the third-party client tests it runs).
fn skewed_server(port: u16, key: &str, skew_ms: &str) -> (Proc, Drained) {
    let mut p = Proc::spawn(
        "skewed netmeter server",
        Command::new(netmeter())
            .args(["-s", "-B", "127.0.0.1", "-p", &port.to_string()])
            .args(["--psk-file", key, "--allow-third-party", "127.0.0.0/8"])
            .args(["--max-tests", "4"])
            .env("NETMETER_TEST_CLOCK_OFFSET_MS", skew_ms),
    );
    let d = p.drain();
    wait_listening(port);
    (p, d)
}

/// A host whose clock is 1.5 s behind the controller's starts a flow: the run is
/// refused in one sentence naming it and its offset (measured with the clock probes,
/// so judged from what the probes recorded, not a stopwatch), `--check` shows the
/// offsets and what would run without running it, and `--ignore-clock` runs with each
/// host's offset in the document.
#[test]
fn a_host_whose_clock_is_off_is_refused_unless_told_to_ignore_it() {
    let dir = Dir::new("clock");
    let (pa, pb) = (free_port(), free_port());
    let key = dir.0.join("key").display().to_string();
    let _a = skewed_server(pa, &key, "-1500");
    let _b = netmeter_server(pb, &["--psk-file", &key, "--max-tests", "4"]);
    let file = dir.write(
        "s.toml",
        &format!(
            "psk_file = \"key\"\n[hosts.a]\naddress = \"127.0.0.1:{pa}\"\n[hosts.b]\naddress = \"127.0.0.1:{pb}\"\n\
             [[flow]]\nname = \"from-a\"\nfrom = \"a\"\nto = \"b\"\nargs = \"-t 0.5\"\n"
        ),
    );
    let scenario = |extra: &[&str]| {
        run(
            Command::new(netmeter())
                .arg("scenario")
                .arg(&file)
                .args(["--lead", "2"])
                .args(extra),
            Duration::from_secs(120),
        )
    };
    let out = scenario(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("host a's clock is 1.5") && last.contains(" s behind this controller's"),
        "{err}"
    );
    assert!(last.contains("--ignore-clock"), "{err}");
    assert!(out.stdout.is_empty(), "{}", show(&out));

    // --check: the offsets and the plan, the same refusal, no flow run.
    let out = scenario(&["--check", "-J"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let v = json_of(&out, "scenario --check");
    let hosts = v["hosts"].as_array().expect("hosts");
    assert_eq!(hosts.len(), 2, "{v:#}");
    let offset_a = f64_at(&hosts[0], "/clock_offset_s");
    assert!((offset_a + 1.5).abs() < 0.1, "{v:#}");
    assert_eq!(hosts[0]["starts_flows"], true);
    assert!(f64_at(&hosts[1], "/clock_offset_s").abs() < 0.1, "{v:#}");
    assert_eq!(v["flows"][0]["name"], "from-a");
    assert!(
        v["refused"]
            .as_str()
            .unwrap_or_default()
            .contains("host a's"),
        "{v:#}"
    );
    assert!(v.get("start_epoch").is_none(), "{v:#}");
    // A generous tolerance lets the check pass.
    let out = scenario(&["--check", "--clock-tolerance", "1900"]);
    assert!(out.status.success(), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Flows:\n  from-a (from a to b"), "{text}");

    // --ignore-clock: it runs, and the document keeps each host's offset.
    let out = scenario(&["--ignore-clock", "-J"]);
    assert!(out.status.success(), "{}", show(&out));
    let v = json_of(&out, "scenario");
    assert!(flows(&v)[0]["error"].is_null(), "{v:#}");
    let a = &v["hosts"][0];
    assert!((f64_at(a, "/clock_offset_s") + 1.5).abs() < 0.1, "{v:#}");
    assert!(f64_at(a, "/clock_offset_bound_s") >= 1.4, "{v:#}");
}

/// Ctrl-C during a scenario: every local flow stops with what it measured (its report
/// keeps its intervals and says it was interrupted), the document is written with
/// `interrupted`, and the exit status is netmeter's on an interrupt (0, as iperf3's).
/// The flows are asked for 60 s; the reports show they ended long before.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn ctrl_c_stops_every_flow_and_writes_what_was_measured() {
    let dir = Dir::new("sigint");
    let (pa, pb) = (free_port(), free_port());
    let key = dir.0.join("key").display().to_string();
    let srv = |p: u16| netmeter_server_watched(p, &["--psk-file", &key]);
    let (a, b) = (srv(pa), srv(pb));
    let (ma, mb) = (a.out.mark(), b.out.mark());
    let file = dir.write(
        "s.toml",
        &format!(
            "psk_file = \"key\"\n[hosts.a]\naddress = \"127.0.0.1:{pa}\"\n[hosts.b]\naddress = \"127.0.0.1:{pb}\"\n\
             [[flow]]\nname = \"one\"\nfrom = \"local\"\nto = \"a\"\nargs = \"-t 60 -b 10M\"\n\
             [[flow]]\nname = \"two\"\nfrom = \"local\"\nto = \"b\"\nargs = \"-t 60 -u -b 1M\"\n"
        ),
    );
    let json = dir.0.join("run.json");
    let scenario = Proc::spawn(
        "netmeter scenario",
        Command::new(netmeter())
            .arg("scenario")
            .arg(&file)
            .args(["--lead", "1", "-o"])
            .arg(&json),
    )
    .watch();
    // Evidence the flows run: each server has printed its first second of rows.
    a.out.await_interval_end(ma, 1.0, "server a");
    b.out.await_interval_end(mb, 1.0, "server b");
    let st = Command::new("kill")
        .args(["-s", "INT", &scenario.pid().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    let out = scenario.finish(Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("scenario stopped by a signal"),
        "{}",
        show(&out)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the document")).unwrap();
    assert_eq!(v["interrupted"], true, "{v:#}");
    for f in flows(&v) {
        let e = f["error"].as_str().unwrap_or_default();
        assert!(e.contains("interrupt"), "{f:#}");
        let intervals = f["report"]["intervals"].as_array().expect("intervals");
        assert!(!intervals.is_empty(), "{f:#}");
        let secs = f64_at(intervals.last().unwrap(), "/sum/end");
        assert!(secs > 0.0 && secs < 59.0, "{}: {secs} s", f["name"]);
    }
    // The text printed too, each flow under its label.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Flow one (from local to a"), "{text}");
}
