//! `netmeter scenario FILE` over loopback: two servers on two ports with the key and
//! third-party tests allowed; flows local and third-party started together (judged
//! from the start times the reports recorded), a host down, the JSON shape and the
//! text; and every shipped example parsed.

use crate::support::*;
use std::path::PathBuf;
use std::process::{Command, Output};
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

/// bob's servers (h2): the video flow's on 5201, the audio flow's on 5202 (the
/// example's `bob-audio`), as the example's comment has them.
const VIDEO_PORT: u16 = 5201;
const AUDIO_PORT: u16 = 5202;

/// The FaceTime example's hosts on `bed`: alice (h1) runs a server that takes
/// third-party tests toward bob, bob (h2) the two servers the flows go to; returned
/// once all three listen (they stop when dropped).
fn facetime_servers(
    bed: &crate::support::netbed::Netbed,
    dir: &Dir,
) -> Vec<crate::support::netbed::NsChild> {
    use crate::support::netbed::{Side, tcp_listening};
    let key = dir.0.join("key").display().to_string();
    let allow = format!("{}/32", bed.h2_addr());
    let server = |side: Side, port: u16, extra: &[&str]| {
        let port = port.to_string();
        let mut args = vec!["-s", "-p", &port, "--psk-file", &key, "--max-tests", "4"];
        args.extend_from_slice(extra);
        bed.spawn_in(side, netmeter(), &args).expect("server")
    };
    let servers = vec![
        server(Side::H1, VIDEO_PORT, &["--allow-third-party", &allow]),
        server(Side::H2, VIDEO_PORT, &[]),
        server(Side::H2, AUDIO_PORT, &[]),
    ];
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    for (side, port) in [
        (Side::H1, VIDEO_PORT),
        (Side::H2, VIDEO_PORT),
        (Side::H2, AUDIO_PORT),
    ] {
        while !bed.in_ns(side, || tcp_listening(port)).unwrap() {
            assert!(std::time::Instant::now() < deadline, "no server on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    servers
}

/// The shipped FaceTime example itself, its addresses rewritten to `bed`'s and its
/// flows 3 s long, run by the controller in alice's namespace with the scenario
/// options `extra`.
fn facetime_run(dir: &Dir, bed: &crate::support::netbed::Netbed, extra: &[&str]) -> Output {
    use crate::support::netbed::Side;
    let example = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scenarios/facetime.toml"),
    )
    .unwrap();
    let text = example
        .replace("10.0.0.1", &bed.h1_addr().to_string())
        .replace("10.0.0.2", &bed.h2_addr().to_string())
        .replace("call.key", "key")
        .replace("-t 30", "-t 3");
    assert_eq!(text.matches("-t 3\"").count(), 2, "{text}");
    let file = dir.write("facetime.toml", &text);
    let mut cmd = bed.cmd(Side::H1, netmeter());
    cmd.arg("scenario").arg(&file).args(extra);
    run(&mut cmd, Duration::from_secs(120))
}

/// One direction's data datagrams of the flow to bob's `port`, as the delay line
/// logged them: their one-way delays (ms) from the sender's timestamp (ns, with
/// `--trip-times`) to the moment the line wrote them out, the truth the flow's figures
/// are judged against (latency_accuracy's, the receiving stack aside). Not the
/// connect datagrams ("9876" and the cookie) nor their short replies.
fn line_owd_ms(
    bed: &crate::support::netbed::Netbed,
    way: crate::support::netbed::Dir,
    port: u16,
) -> Vec<f64> {
    use crate::support::netbed::{Dir as Way, IPPROTO_UDP};
    let st = bed.delay_stats().expect("delay line stats");
    st.dir(way)
        .records
        .iter()
        .filter(|r| r.proto == IPPROTO_UDP && r.len >= 20 + 8 + 16)
        .filter(|r| match way {
            Way::H2ToH1 => r.src_port == port,
            _ => r.dst_port == port,
        })
        .filter(|r| r.udp_head.is_some_and(|h| &h[..4] != b"9876"))
        .filter_map(|r| r.transit_to_egress_ns(true))
        .map(|ns| ns as f64 / 1e6)
        .collect()
}

/// The median of `v` (not empty).
fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A flow's one-way delay in one direction (`side`, "client_to_server" or
/// "server_to_client") against the delay line's own record of the same datagrams, as
/// latency_accuracy judges a single test's: the median within 0.5 ms of the line's,
/// once the clock offset netmeter estimated is taken into account (the hosts share one
/// clock, so what the estimate is off by moves every corrected delay: `sign` −1 for
/// client → server, whose arrival the server's clock reads, +1 the other way), and
/// nearly every datagram sent (the line logged at least 98 % of the samples).
fn check_owd_against_line(flow: &serde_json::Value, side: &str, line: &[f64]) {
    let name = flow["name"].as_str().unwrap_or_default();
    let tt = "/report/end/netmeter/trip_times";
    let offset_ms = f64_at(flow, &format!("{tt}/offset_ms"));
    let sign = if side == "client_to_server" {
        -1.0
    } else {
        1.0
    };
    let est_err = sign * offset_ms;
    let samples = f64_at(flow, &format!("{tt}/{side}/samples"));
    let p50 = f64_at(flow, &format!("{tt}/{side}/owd/p50_ms"));
    assert!(
        samples > 0.0 && !line.is_empty(),
        "{name} {side}: no samples"
    );
    let line_p50 = median(line);
    eprintln!(
        "facetime {name} {side}: {samples} samples, owd p50 {p50:.4} ms; the line's p50 \
         {line_p50:.4} ms over {} datagrams; offset estimate {offset_ms:.4} ms",
        line.len()
    );
    assert!(
        line.len() as f64 >= 0.98 * samples,
        "{name} {side}: the line logged {} datagrams of {samples}",
        line.len()
    );
    assert!(
        (p50 - (line_p50 + est_err)).abs() < 0.5,
        "{name} {side}: owd p50 {p50} ms, the line's {line_p50} ms, estimate error {est_err} ms"
    );
}

/// The shipped FaceTime-like example between two network-namespace hosts (alice runs
/// both flows as third-party tests toward bob's two servers; the controller sits in
/// alice's namespace) over a 10 ms delay line. Judged from the reports against what
/// the router and the line recorded:
/// - each flow's DSCP is on the wire: the router counts, per DSCP value, as many
///   datagrams as the flow's report says it sent, and the reverse directions'
///   datagrams all arrive;
/// - both flows were scheduled for the same instant and their data started within
///   5 ms of each other (plus how late a loaded host woke both), as their reports
///   recorded it (one clock: both ran on alice: `check_started_together`);
/// - each flow's one-way delay, both ways, matches the line's own record of its
///   datagrams as a single test's does (`check_owd_against_line`).
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn the_facetime_example_marks_each_flow_with_its_dscp_between_two_netns_hosts() {
    let _t = crate::support::netbed::timing_lock();
    // A run whose clients were both ready before the instant but which the host woke
    // too far apart is the host's doing, shown in the record: again on a fresh bed.
    for attempt in 1..=3 {
        match facetime_dscp_run() {
            Ok(()) => return,
            Err(why) if attempt < 3 => eprintln!("facetime run {attempt}: {why}; again"),
            Err(why) => panic!("{why}"),
        }
    }
}

/// One run of the FaceTime example on a fresh bed, judged (panicking) on everything
/// but a start spread the host caused (`Err`, see `check_started_together`).
fn facetime_dscp_run() -> Result<(), String> {
    use crate::support::netbed::{Dir as Way, LinkConfig, R_H1_IF, R_H2_IF, Side, bed};
    let dir = Dir::new("facetime");
    // The line's threads at normal priority: at real-time priority they preempt
    // whatever runs when the first flow's first frame (14 datagrams) reaches them,
    // which on this 2-CPU machine can keep the other flow's just-woken client off
    // both CPUs: in seven runs each, recorded starts 0.4 to 4.4 ms apart with (five
    // over 2 ms; one flow 0.1 ms late, the other up to 4.5 ms), 0 to 2.3 ms without.
    // The one-way delays are judged against the line's own record, so its lateness
    // costs nothing there.
    let bed = bed(LinkConfig::new().delay_ms(10.0).delay_rt_priority(None));
    let _servers = facetime_servers(&bed, &dir);
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

    let out = facetime_run(&dir, &bed, &["-J"]);
    assert!(out.status.success(), "{}", show(&out));
    let v = json_of(&out, "scenario");
    let f = flows(&v);
    assert_eq!(f.len(), 2, "{v:#}");
    let mut back_all = 0;
    for (flow, dscp, port) in [(&f[0], "cs5", VIDEO_PORT), (&f[1], "cs6", AUDIO_PORT)] {
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
        // The delay line's 10 ms, as the line itself held this flow's datagrams.
        check_owd_against_line(
            flow,
            "client_to_server",
            &line_owd_ms(&bed, Way::H1ToH2, port),
        );
        check_owd_against_line(
            flow,
            "server_to_client",
            &line_owd_ms(&bed, Way::H2ToH1, port),
        );
    }
    // The servers' reverse streams (bob → alice): every datagram counted. (They go
    // unmarked today: the server does not apply the client's --dscp to them.)
    assert_eq!(nft_count(&bed, "udp_21"), back_all);
    assert_eq!(bed.delay_line_losses().unwrap(), 0);
    check_started_together(f)
}

/// The flows started together, from what their reports recorded
/// (`start.netmeter.txstart`): both were scheduled for the one instant the
/// controller chose (`requested`, the same number in both), both were set up and
/// waiting before it (`ready`: what netmeter controls), neither started before it,
/// and their data began within 5 ms of each other (both clients ran on alice: one
/// clock), plus however late the host woke both (the smaller `late_ms`). With both
/// ready in time, a wider spread is the host waking one client late: `Err`, for a
/// fresh run.
fn check_started_together(f: &[serde_json::Value]) -> Result<(), String> {
    let at = |flow: &serde_json::Value, k: &str| {
        f64_at(flow, &format!("/report/start/netmeter/txstart/{k}"))
    };
    let requested: Vec<f64> = f.iter().map(|x| at(x, "requested")).collect();
    let ready_ms: Vec<f64> = f
        .iter()
        .map(|x| (at(x, "ready") - at(x, "requested")) * 1e3)
        .collect();
    let late_ms: Vec<f64> = f.iter().map(|x| at(x, "late_ms")).collect();
    let started: Vec<f64> = f.iter().map(|x| at(x, "started")).collect();
    let spread_ms = (started[0] - started[1]).abs() * 1e3;
    eprintln!(
        "facetime: requested {requested:?}, ready {ready_ms:?} ms, late {late_ms:?} ms, starts {spread_ms:.3} ms apart"
    );
    assert_eq!(requested[0], requested[1], "one scheduled instant");
    for r in &ready_ms {
        assert!(*r < 0.0, "a flow was set up {r} ms after its instant");
    }
    for l in &late_ms {
        assert!(*l >= 0.0, "a flow started {l} ms before its instant");
    }
    // Each start is its own thread waking from a sleep until that instant, recorded
    // 0.06 to 0.14 ms late on this 2-CPU machine when it was merely busy, but 10.0 and
    // 13.1 ms late (3.2 ms apart) when other tests loaded it: the host was then slow to
    // wake both (and see the bed's line priority above for one flow alone late). How
    // late the earlier one woke is what the report shows of that (both waited for the
    // same instant; netmeter had nothing left to do but wake), so the bound is the
    // issue's 5 ms plus it.
    let host_late_ms = late_ms.iter().copied().fold(f64::INFINITY, f64::min);
    if spread_ms < 5.0 + host_late_ms {
        Ok(())
    } else {
        Err(format!(
            "starts {spread_ms} ms apart: both ready in time ({ready_ms:?} ms), woken {late_ms:?} ms late"
        ))
    }
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
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (two scenario runs and a plot, about 4 s)"
)]
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
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (clock probes and a scenario run, about 3 s)"
)]
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

/// A flow toward a host whose server is iperf3 (3.22): the controller's clock probe
/// finds no netmeter clock exchange there, and the host's clock is reported as not
/// checked (a field and a sentence), not as an error; `--check` passes, and the flow
/// runs (without the scenario's key, which iperf3 cannot prove).
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs the peers of scripts/setup-peers.sh"
)]
fn an_iperf3_target_has_its_clock_not_checked_rather_than_an_error() {
    let dir = Dir::new("iperf3");
    let (pa, pi) = (free_port(), free_port());
    let key = dir.0.join("key").display().to_string();
    let _a = netmeter_server(pa, &["--psk-file", &key, "--max-tests", "4"]);
    let (_i3, _) = iperf3_server_ready("NETMETER_IPERF3_322", pi, &[]);
    let file = dir.write(
        "s.toml",
        &format!(
            "psk_file = \"key\"\n[hosts.a]\naddress = \"127.0.0.1:{pa}\"\n[hosts.i3]\naddress = \"127.0.0.1:{pi}\"\n\
             [[flow]]\nname = \"to-a\"\nfrom = \"local\"\nto = \"a\"\nargs = \"-t 0.5\"\n\
             [[flow]]\nname = \"to-iperf3\"\nfrom = \"local\"\nto = \"i3\"\nargs = \"-t 0.5\"\n"
        ),
    );
    let scenario = |extra: &[&str]| {
        run(
            Command::new(netmeter())
                .arg("scenario")
                .arg(&file)
                .args(["--lead", "1"])
                .args(extra),
            Duration::from_secs(120),
        )
    };
    let out = scenario(&["--check"]);
    assert!(out.status.success(), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("not checked: its server is iperf3, which has no netmeter clock exchange"),
        "{text}"
    );
    let out = scenario(&["-J"]);
    assert!(out.status.success(), "{}", show(&out));
    let v = json_of(&out, "scenario");
    let hosts = v["hosts"].as_array().expect("hosts");
    let (a, i3) = (&hosts[0], &hosts[1]);
    assert_eq!(i3["name"], "i3", "{v:#}");
    assert!(i3.get("clock_error").is_none(), "{v:#}");
    assert!(i3.get("clock_offset_s").is_none(), "{v:#}");
    assert!(
        i3["clock_not_checked"]
            .as_str()
            .is_some_and(|s| s.contains("iperf3")),
        "{v:#}"
    );
    // The netmeter host's clock is measured as before.
    assert!(f64_at(a, "/clock_offset_s").abs() < 0.5, "{v:#}");
    assert!(a.get("clock_not_checked").is_none(), "{v:#}");
    for f in flows(&v) {
        assert!(f["error"].is_null(), "{f:#}");
        assert!(f64_at(f, "/report/end/sum_received/bytes") > 0.0, "{f:#}");
    }
    assert_eq!(
        flows(&v)[1]["report"]["start"]["netmeter"]["peer"],
        "iperf3"
    );
}

/// Ctrl-C stops the flows the scenario started on other hosts too: the controller
/// tells the host (`CLIENT_TERMINATE` on the third-party request's connection), the
/// host stops the test it runs and says so in its log, and its report of what ran
/// comes back into the document with the interrupt as its error. The flow is asked
/// for 60 s; the report the host sent back shows it ended long before.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn ctrl_c_stops_the_flows_running_on_other_hosts() {
    let dir = Dir::new("sigint-far");
    let (pa, pb) = (free_port(), free_port());
    let key = dir.0.join("key").display().to_string();
    let a = netmeter_server_watched(
        pa,
        &[
            "--psk-file",
            &key,
            "--allow-third-party",
            "127.0.0.0/8",
            "--max-tests",
            "4",
        ],
    );
    let b = netmeter_server_watched(pb, &["--psk-file", &key, "--max-tests", "4"]);
    let mb = b.out.mark();
    let file = dir.write(
        "s.toml",
        &format!(
            "psk_file = \"key\"\n[hosts.a]\naddress = \"127.0.0.1:{pa}\"\n[hosts.b]\naddress = \"127.0.0.1:{pb}\"\n\
             [[flow]]\nname = \"far\"\nfrom = \"a\"\nto = \"b\"\nargs = \"-t 60 -b 10M\"\n"
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
    // Evidence the far flow runs: b, its target, has printed its first second of rows.
    b.out.await_interval_end(mb, 1.0, "server b");
    let st = Command::new("kill")
        .args(["-s", "INT", &scenario.pid().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    let out = scenario.finish(Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    // The host stopped the test it ran for the controller, and says so.
    await_evidence(
        "host a's log line about the stopped third-party test",
        || a.out.text().contains("stopped by its controller"),
        || a.out.text(),
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the document")).unwrap();
    assert_eq!(v["interrupted"], true, "{v:#}");
    let f = &flows(&v)[0];
    assert_eq!(f["from"], "a");
    // Host a got no signal: its test's error says who stopped it.
    let e = f["error"].as_str().unwrap_or_default();
    assert_eq!(
        e, "interrupt - the test was stopped by its controller",
        "{f:#}"
    );
    assert_eq!(f["report"]["error"].as_str(), Some(e), "{f:#}");
    // What ran came back from the host: its intervals, ending long before the 60 s.
    let intervals = f["report"]["intervals"].as_array().expect("intervals");
    assert!(!intervals.is_empty(), "{f:#}");
    let secs = f64_at(intervals.last().unwrap(), "/sum/end");
    assert!(secs > 0.0 && secs < 59.0, "far: {secs} s");
    // The text printed too, the flow under its label.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Flow far (from a to b"), "{text}");
}

/// The row `key` of flow `name`'s comparison against the baseline.
fn baseline_row<'a>(v: &'a serde_json::Value, name: &str, key: &str) -> &'a serde_json::Value {
    v["baseline"]
        .as_array()
        .and_then(|b| b.iter().find(|x| x["name"] == name))
        .and_then(|x| x["comparison"]["figures"].as_array())
        .and_then(|f| f.iter().find(|r| r["key"] == key))
        .unwrap_or_else(|| panic!("no {key} row for {name} in {v:#}"))
}

/// Every figure of flow `name`'s comparison against the baseline that a
/// Kolmogorov-Smirnov test judged (its one-way delay percentiles, both ways).
fn ks_rows<'a>(v: &'a serde_json::Value, name: &str) -> Vec<&'a serde_json::Value> {
    let rows: Vec<_> = v["baseline"]
        .as_array()
        .and_then(|b| b.iter().find(|x| x["name"] == name))
        .and_then(|x| x["comparison"]["figures"].as_array())
        .into_iter()
        .flatten()
        .filter(|r| r["test"]["test"] == "kolmogorov_smirnov")
        .collect();
    assert!(rows.len() >= 2, "no KS rows for {name} in {v:#}");
    rows
}

/// The KS verdict on the FaceTime example itself, over a 10 ms delay line, each run
/// on a fresh bed: a baseline run; a second run on the same line, which the
/// comparison calls "no significant change" in every one-way delay figure of both
/// flows; and a run with 5 ms more on the audio flow's path from alice to bob only
/// (the line holds back UDP to bob's audio server port; video, the reverse ways and
/// the control connections, TCP, keep their paths, so the clock estimate stays
/// symmetric), which it calls "worse, significant" in audio's client → server delay
/// and nowhere else, `--fail-if-worse` exiting 2 naming audio only.
///
/// Two beds with the same line differ in what the host adds: tens of µs of the
/// line's lateness, and on a busy host video's median moved by up to 0.3 ms from one
/// bed to the next; the KS test at video's ~1,250 samples calls a shift of 0.07 ms
/// different against a narrow spread (seen with 0 to 4.75 ms). So the line adds, on
/// every bed, the same known spread to UDP both ways, a cycle of 0 to 9.5 ms in
/// 0.5 ms steps: a shift below ~0.6 ms moves video's distribution by less than KS
/// can tell at that size (D < 0.06), while the 5 ms added to audio's 150 samples
/// moves it by about half (D ~ 0.5, where 0.18 is significant). Each
/// datagram keeps its own step: were the line to keep their order, a video frame's
/// datagrams, sent back to back, would all wait for the slowest step among them, and
/// where in the cycle a frame begins (different on every bed) would shape video's
/// distribution (seen: KS D = 0.24 between two beds with the same line).
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn the_ks_verdict_finds_the_facetime_flow_whose_path_got_slower() {
    use crate::support::netbed::{
        Dir as Way, LinkConfig, Proto, Reorder, Variation, bed, timing_lock,
    };
    let _t = timing_lock();
    let dir = Dir::new("ks");
    let base_json = dir.0.join("base.json");
    let cycle: Vec<Duration> = (0..20).map(|i| Duration::from_micros(500 * i)).collect();
    let line = || {
        LinkConfig::new()
            .delay_ms(10.0)
            .variation(Variation::Cycle(cycle.clone()))
            .variation_dir(Way::Both)
            .variation_proto(Proto::Udp)
            .preserve_order(false)
    };
    let on_fresh_bed = |cfg: LinkConfig, extra: &[&str]| {
        let bed = bed(cfg);
        let _servers = facetime_servers(&bed, &dir);
        let out = facetime_run(&dir, &bed, extra);
        assert_eq!(bed.delay_line_losses().unwrap(), 0);
        out
    };
    // The baseline: a run on a fresh bed, its document to base.json.
    let baseline = || {
        let out = on_fresh_bed(line(), &["--lead", "1", "-o", base_json.to_str().unwrap()]);
        assert!(out.status.success(), "{}", show(&out));
        let base: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&base_json).unwrap()).unwrap();
        for f in flows(&base) {
            assert!(f["error"].is_null(), "{f:#}");
        }
        base
    };
    // The document to a file, the text (with its verdicts in words) on stdout.
    let new_json = dir.0.join("new.json");
    let against_base = [
        "--lead",
        "1",
        "-o",
        new_json.to_str().unwrap(),
        "--baseline",
        base_json.to_str().unwrap(),
        "--fail-if-worse",
        "10",
    ];
    let doc = || -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(&new_json).expect("the document")).unwrap()
    };
    let owd = |doc: &serde_json::Value, i: usize, side: &str| {
        f64_at(
            &flows(doc)[i],
            &format!("/report/end/netmeter/trip_times/{side}/owd/p50_ms"),
        )
    };
    // Every KS-judged figure of both flows as expected: audio's client → server
    // delay, if `audio_slower`, significantly different (p below the per-test level)
    // and "worse" at its median and p90 (its far tail, the largest of 150 samples,
    // may read either way), no significant change in all the others. Each run's
    // verdicts, or the first figure that differs.
    let judge = |base: &serde_json::Value,
                 v: &serde_json::Value,
                 audio_slower: bool|
     -> Result<(), String> {
        for (i, name) in ["video", "audio"].into_iter().enumerate() {
            eprintln!(
                "ks {name}: c→s {:.3} → {:.3} ms, s→c {:.3} → {:.3} ms",
                owd(base, i, "client_to_server"),
                owd(v, i, "client_to_server"),
                owd(base, i, "server_to_client"),
                owd(v, i, "server_to_client"),
            );
            for r in ks_rows(v, name) {
                let key = r["key"].as_str().unwrap_or_default();
                eprintln!("ks {name} {key}: {} {}", r["verdict"], r["test"]);
                let slower = audio_slower && name == "audio" && key.starts_with("owd_c2s");
                let ok = if !slower {
                    r["verdict"] == "no_significant_change"
                } else if key.ends_with("p50_ms") || key.ends_with("p90_ms") {
                    r["verdict"] == "worse"
                } else {
                    r["verdict"] == "worse" || r["verdict"] == "better"
                };
                if !ok {
                    return Err(format!("{name}: {r}"));
                }
            }
        }
        Ok(())
    };
    // A run is judged unless its record shows the host disturbed it: an isochronous
    // sender a whole frame period behind skips the frames it missed (`slips`), which
    // a busy 2-CPU machine's stall of a few hundred ms does (seen: the baseline's audio
    // flow with 115 of 150 samples and a delay 6 ms beyond the line's largest), and
    // such a run is measured again on a fresh bed, at most three times. The KS test
    // counts each flow's frames as its samples (docs/metrics.md, "KS sample unit"):
    // an undisturbed identical pair is judged once, with no retry.
    let disturbed = |v: &serde_json::Value| -> Option<String> {
        flows(v).iter().find_map(|f| {
            let slips = f
                .pointer("/report/end/netmeter/isochronous/sender/slips")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0);
            (slips > 0).then(|| format!("flow {} skipped {slips} frames", f["name"]))
        })
    };
    let undisturbed = |run: &dyn Fn() -> (serde_json::Value, Option<Output>)| {
        let mut seen = Vec::new();
        for _ in 0..3 {
            let (v, out) = run();
            match disturbed(&v) {
                None => return (v, out),
                Some(why) => {
                    eprintln!("ks: measured again: {why}");
                    seen.push(why);
                }
            }
        }
        panic!("three runs, each disturbed: {seen:?}");
    };
    let (base, _) = undisturbed(&|| (baseline(), None));
    // The same line again: no significant change anywhere.
    let (v, out) = undisturbed(&|| {
        let out = on_fresh_bed(line(), &against_base);
        (doc(), Some(out))
    });
    let out = out.expect("the run's output");
    judge(&base, &v, false).unwrap_or_else(|e| panic!("the same line was called different: {e}"));
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));

    // 5 ms more on every UDP datagram from alice to bob's audio server.
    let slower = || {
        line()
            .reorder(Reorder {
                every_nth: 1,
                extra: Duration::from_millis(5),
                dir: Way::H1ToH2,
                proto: Proto::Udp,
            })
            .reorder_port(AUDIO_PORT)
    };
    let (v, out) = undisturbed(&|| {
        let out = on_fresh_bed(slower(), &against_base);
        (doc(), Some(out))
    });
    let out = out.expect("the run's output");
    judge(&base, &v, true).unwrap_or_else(|e| panic!("the slower path was judged wrongly: {e}"));
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.lines().any(|l| l.ends_with("more than 10%: audio")),
        "{err}"
    );
    let v = doc();
    let audio_p50 = baseline_row(&v, "audio", "owd_c2s_p50_ms");
    assert_eq!(audio_p50["verdict"], "worse", "{audio_p50:#}");
    // The text says it in words.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("worse, significant"), "{text}");
}
