//! The experiment subcommands through the binary: `netmeter compare` on fixed result
//! files (the renderers' testdata: netmeter's and iperf3 3.22's `-J` documents, and
//! repetition documents made from them), its exit codes and its JSON.

use crate::support::{Proc, client, free_port, netmeter, netmeter_server, netmeter_server_watched};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/report/testdata")
        .join(name)
}

/// A scratch directory for this test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("nm-exp-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A repetition document (`{"runs": [...]}`) of `tcp.json` with these receiver rates.
fn repetitions(dir: &Path, name: &str, rates: &[f64]) -> PathBuf {
    let base: Value =
        serde_json::from_str(&std::fs::read_to_string(testdata("tcp.json")).unwrap()).unwrap();
    let runs: Vec<Value> = rates
        .iter()
        .map(|&bps| {
            let mut r = base.clone();
            r["end"]["sum_received"]["bits_per_second"] = bps.into();
            r
        })
        .collect();
    let path = dir.join(name);
    std::fs::write(&path, serde_json::json!({ "runs": runs }).to_string()).unwrap();
    path
}

fn compare(args: &[&str]) -> Output {
    Command::new(netmeter())
        .arg("compare")
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn compare_repetitions_gates_on_a_significant_drop() {
    let s = Scratch::new("gate");
    let base = repetitions(
        &s.0,
        "base.json",
        &[100.1e6, 99.8e6, 100.3e6, 99.9e6, 100.0e6],
    );
    let same = repetitions(
        &s.0,
        "same.json",
        &[100.2e6, 99.7e6, 100.0e6, 100.1e6, 99.9e6],
    );
    let slow = repetitions(&s.0, "slow.json", &[80.1e6, 79.8e6, 80.3e6, 79.9e6, 80.0e6]);
    let p = |x: &PathBuf| x.to_str().unwrap().to_string();

    let o = compare(&[&p(&base), &p(&same), "--fail-if-worse", "10"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("(5 runs)"), "{out}");
    assert!(out.contains("no significant change (Welch"), "{out}");

    let o = compare(&[&p(&base), &p(&slow), "--fail-if-worse", "10"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    assert!(out.contains("-20.0 %  worse, significant (Welch"), "{out}");
    assert_eq!(
        err.trim(),
        "netmeter: Receiver throughput got worse by more than 10 % with significance"
    );
    // Worse, but not by more than the limit: passes.
    let o = compare(&[&p(&base), &p(&slow), "--fail-if-worse", "25"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));

    let o = compare(&[&p(&base), &p(&slow), "-J"]);
    assert_eq!(o.status.code(), Some(0));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = &j["comparison"]["figures"][0];
    assert_eq!(row["key"], "receiver_bits_per_second");
    assert_eq!(row["verdict"], "worse");
    assert_eq!(row["test"]["test"], "welch");
    assert_eq!(row["base"]["n"], 5);
    assert!((row["change_pct"].as_f64().unwrap() + 20.0).abs() < 0.1);
}

#[test]
fn compare_single_runs_and_iperf3_documents() {
    let tcp = testdata("tcp.json");
    let o = compare(&[
        tcp.to_str().unwrap(),
        tcp.to_str().unwrap(),
        "--fail-if-worse",
        "0",
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("single run, no significance"), "{out}");
    // iperf3's own document against netmeter's: the same kind of test, compared.
    let o = compare(&[
        testdata("iperf3_322_udp_bidir.json").to_str().unwrap(),
        testdata("udp_bidir.json").to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("Reverse receiver throughput"), "{out}");
    assert!(out.contains("Jitter"), "{out}");
}

/// The `<text>` elements of an SVG, trimmed.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| t.split_once('>').map(|x| x.1))
        .filter_map(|t| t.split_once("</text>").map(|x| x.0.trim().to_string()))
        .collect()
}

/// `--plot` overlays both sides: each run's throughput per interval, and for latency
/// tests both distributions on one CDF; a plot file of the wrong kind is refused
/// before anything is read.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn compare_plot_overlays_both_results() {
    let s = Scratch::new("cmp-plot");
    let base = repetitions(&s.0, "a.json", &[100.1e6, 99.8e6]);
    let new = repetitions(&s.0, "b.json", &[80.1e6, 79.8e6]);
    let svg = s.0.join("tcp.svg");
    let p = |x: &PathBuf| x.to_str().unwrap().to_string();
    let o = compare(&[&p(&base), &p(&new), "--plot", &p(&svg)]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let t = svg_texts(&std::fs::read_to_string(&svg).unwrap());
    for want in [
        "Throughput (sum of streams)",
        "base: a #1",
        "base: a #2",
        "new: b #1",
        "new: b #2",
    ] {
        assert!(t.iter().any(|x| x == want), "{want} not in {t:?}");
    }

    let bb = testdata("bounceback.json");
    let png = s.0.join("bb.png");
    let o = compare(&[&p(&bb), &p(&bb), "--plot", &p(&png)]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
    let svg = s.0.join("bb.svg");
    compare(&[&p(&bb), &p(&bb), "--plot", &p(&svg)]);
    let t = svg_texts(&std::fs::read_to_string(&svg).unwrap());
    assert!(t.iter().any(|x| x.ends_with(": CDF")), "{t:?}");
    // Both in the throughput legend, and both distributions on the CDF.
    for side in ["base", "new"] {
        let want = format!("{side}: bounceback");
        assert!(t.contains(&want), "{want}: {t:?}");
        let cdf = format!("{want} (p50 0.023 ms, p99 0.098 ms)");
        assert!(t.contains(&cdf), "{cdf}: {t:?}");
    }

    let o = compare(&[&p(&bb), &p(&bb), "--plot", "x.pdf"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).1.contains("'x.pdf' must end in .svg or .png"),
        "{:?}",
        text(&o)
    );
}

#[test]
fn compare_refuses_mismatched_or_bad_files() {
    let o = compare(&[
        testdata("tcp.json").to_str().unwrap(),
        testdata("tcp_reverse.json").to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(out.is_empty(), "{out}");
    assert_eq!(
        err.trim(),
        "netmeter: the base result is a TCP bulk test (client to server) but the new one \
         is a TCP bulk test (server to client, -R): compare needs two results of the same \
         kind of test"
    );
    // TCP against UDP, through the binary: one sentence, exit 1.
    let o = compare(&[
        testdata("tcp.json").to_str().unwrap(),
        testdata("udp.json").to_str().unwrap(),
        "--fail-if-worse",
        "10",
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(out.is_empty(), "{out}");
    assert_eq!(
        err.trim(),
        "netmeter: the base result is a TCP bulk test (client to server) but the new one \
         is a UDP bulk test (client to server): compare needs two results of the same \
         kind of test"
    );
    let o = compare(&[
        "/nonexistent/base.json",
        testdata("tcp.json").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o)
            .1
            .starts_with("netmeter: cannot use /nonexistent/base.json: cannot read it")
    );
    let o = compare(&[
        testdata("tcp.txt").to_str().unwrap(),
        testdata("tcp.json").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).1.contains("tcp.txt: it is not JSON"),
        "{:?}",
        text(&o)
    );
    let o = compare(&["a.json"]);
    assert_eq!(o.status.code(), Some(1));
}

/// `--repeat 3 -t 1` over loopback: a line per run, then the statistics table; with
/// `-J` one document holding every run, which `compare` reads back.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn repeat_reports_each_run_and_the_statistics() {
    let port = free_port();
    let (_srv, log) = netmeter_server(port, &[]);
    let out = client(port, &["-t", "1", "--repeat", "3", "--repeat-gap", "0.2"]);
    let (text_out, err) = text(&out);
    assert!(
        out.status.success(),
        "{text_out}{err}\nserver:\n{}",
        log.text()
    );
    for i in 1..=3 {
        assert!(
            text_out.contains(&format!("run {i}/3: Receiver throughput ")),
            "{text_out}"
        );
    }
    assert!(text_out.contains("3 runs (all runs):"), "{text_out}");
    assert!(text_out.contains("95 % CI"), "{text_out}");

    let s = Scratch::new("repeat");
    let out = client(
        port,
        &[
            "-t",
            "1",
            "-u",
            "-b",
            "20M",
            "--repeat",
            "3",
            "--repeat-gap",
            "0",
            "-J",
        ],
    );
    assert!(out.status.success(), "{:?}", text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    assert_eq!(doc["netmeter_repeat"]["runs"], 3);
    assert_eq!(doc["netmeter_repeat"]["ended"], "all runs");
    assert!(
        text(&out).1.contains("run 3/3: Receiver throughput"),
        "{:?}",
        text(&out)
    );
    // The statistics agree with the runs' own figures.
    let rates: Vec<f64> = runs
        .iter()
        .map(|r| {
            r["end"]["sum_received"]["bits_per_second"]
                .as_f64()
                .unwrap()
        })
        .collect();
    let st = &doc["statistics"][0];
    assert_eq!(st["key"], "receiver_bits_per_second");
    let mean = rates.iter().sum::<f64>() / 3.0;
    assert!((st["mean"].as_f64().unwrap() - mean).abs() < 1e-6 * mean);
    assert_eq!(
        st["min"].as_f64().unwrap(),
        rates.iter().copied().fold(f64::MAX, f64::min)
    );
    let (low, high) = (
        st["ci"]["low"].as_f64().unwrap(),
        st["ci"]["high"].as_f64().unwrap(),
    );
    assert!(low <= mean && mean <= high);
    // 20 Mbit/s paced on loopback: the interval holds the offered rate give or take 2 %.
    assert!(low < 20.4e6 && high > 19.6e6, "CI {low}..{high}");
    assert!(
        doc["statistics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["key"] == "lost_percent")
    );

    // compare reads the document back as three runs a side.
    let path = s.0.join("rep.json");
    std::fs::write(&path, &out.stdout).unwrap();
    let o = compare(&[
        path.to_str().unwrap(),
        path.to_str().unwrap(),
        "--fail-if-worse",
        "0",
    ]);
    let (cmp, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{cmp}{err}");
    assert!(cmp.contains("(3 runs)"), "{cmp}");
    assert!(
        cmp.contains("no significant change (Welch t=0.00, p=1.0000)"),
        "{cmp}"
    );
}

/// `--confidence 95,50` on a paced UDP test: the series stops at the first run whose
/// interval is within ±50 % (the third on a steady host), not at 10.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn confidence_stops_early() {
    let port = free_port();
    let (_srv, log) = netmeter_server(port, &[]);
    let out = client(
        port,
        &[
            "-t",
            "1",
            "-u",
            "-b",
            "10M",
            "--repeat",
            "10",
            "--repeat-gap",
            "0",
            "--confidence",
            "95,50",
            "-J",
        ],
    );
    assert!(
        out.status.success(),
        "{:?}\nserver:\n{}",
        text(&out),
        log.text()
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["netmeter_repeat"]["stop_width_pct"], 50.0);
    // Judged on the runs the document recorded, not on how steady this host kept them
    // (the statistics themselves are unit tests on fixed samples: experiment::repeat):
    // the series ended at the first run whose interval was tight, or ran all ten.
    use netmeter::experiment::{figures, repeat};
    let watched: Vec<f64> = doc["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|run| {
            let r = netmeter::report::Report::from_document(&run.to_string()).expect("a run");
            figures::figures(&r)
                .into_iter()
                .find(|f| f.key == repeat::WATCHED)
                .expect("the watched figure")
                .value
        })
        .collect();
    let plan = repeat::Plan::from_flags(10, 0.0, Some("95,50")).unwrap();
    let first_tight = (1..=watched.len()).find(|&n| plan.tight_enough(&watched[..n]));
    let ended = doc["netmeter_repeat"]["ended"].as_str().unwrap_or_default();
    match first_tight {
        Some(n) => assert_eq!(
            (ended, watched.len()),
            ("confidence reached", n),
            "{watched:?}"
        ),
        None => assert_eq!((ended, watched.len()), ("all runs", 10), "{watched:?}"),
    }
    assert!(watched.len() >= repeat::MIN_RUNS_FOR_EARLY_STOP);
}

/// Ctrl-C during the second run: the first run's line and the statistics of what
/// completed, exit 0.
#[test]
fn repeat_stops_cleanly_on_sigint() {
    let port = free_port();
    let srv = netmeter_server_watched(port, &[]);
    let c = Proc::spawn(
        "netmeter client",
        Command::new(netmeter())
            .args(["-c", "127.0.0.1", "-p", &port.to_string()])
            .args(["-t", "1", "--repeat", "5", "--repeat-gap", "0"]),
    );
    // SIGINT in the middle of run 2: once the server has accepted its test (it lasts a
    // second, which the signal takes no time to cut short).
    srv.out
        .await_since(0, "Accepted connection", 2, "the server");
    let st = Command::new("kill")
        .args(["-s", "INT", &c.pid().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = c.wait(std::time::Duration::from_secs(10));
    let (o, e) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{o}{e}");
    assert!(o.contains("run 1/5:"), "{o}");
    assert!(!o.contains("run 3/5:"), "{o}");
    assert!(o.contains("(interrupted):"), "{o}");
}

/// Ctrl-C in a sweep: the table and the `--plot` chart of the points that completed.
#[test]
fn sweep_stops_on_sigint_and_plots_what_it_has() {
    let port = free_port();
    let srv = netmeter_server_watched(port, &[]);
    let dir = Scratch::new("sweep-int");
    let svg = dir.0.join("int.svg");
    let c = Proc::spawn(
        "netmeter sweep",
        Command::new(netmeter())
            .args(["sweep", "-c", "127.0.0.1", "-p", &port.to_string()])
            .args(["-t", "1", "-P", "1,2,4"])
            .args(["--figure", "receiver_bits_per_second", "--plot"])
            .arg(&svg),
    );
    // SIGINT in the middle of point 2: once the server has accepted its test.
    srv.out
        .await_since(0, "Accepted connection", 2, "the server");
    let st = Command::new("kill")
        .args(["-s", "INT", &c.pid().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = c.wait(std::time::Duration::from_secs(10));
    let (o, e) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{o}{e}");
    assert!(o.contains("[1/3] -P 1: "), "{o}");
    assert!(o.contains("1 of 3 points (interrupted):"), "{o}");
    let drawn = std::fs::read_to_string(&svg).unwrap();
    // The one completed point: one dot.
    assert_eq!(drawn.matches("<circle").count(), 1, "{drawn}");
}

/// `netmeter sweep -P 1,2 -l 64K,1M -t 1` over loopback: four points in order, a
/// progress line with an ETA each, the 2 × 2 table; `-J` with `--repeat 2`: one document
/// with every run of every point.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn sweep_runs_the_grid_in_order() {
    let port = free_port();
    let (_srv, log) = netmeter_server(port, &[]);
    let p = port.to_string();
    let out = crate::support::run(
        Command::new(netmeter()).args([
            "sweep",
            "-c",
            "127.0.0.1",
            "-p",
            &p,
            "-t",
            "1",
            "-P",
            "1,2",
            "-l",
            "64K,1M",
        ]),
        std::time::Duration::from_secs(60),
    );
    let (o, e) = text(&out);
    assert!(out.status.success(), "{o}{e}\nserver:\n{}", log.text());
    let progress: Vec<&str> = o.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(progress.len(), 4, "{o}");
    for (line, want) in
        progress
            .iter()
            .zip(["-P 1 -l 64K", "-P 1 -l 1M", "-P 2 -l 64K", "-P 2 -l 1M"])
    {
        assert!(line.contains(want) && line.contains("(ETA "), "{line}");
    }
    assert!(o.contains("4 of 4 points (all points):"), "{o}");
    let header = o
        .lines()
        .find(|l| l.contains("-l 64K") && l.contains("-l 1M"))
        .unwrap();
    assert!(header.trim_start().starts_with("-P"), "{o}");

    let out = crate::support::run(
        Command::new(netmeter()).args([
            "sweep",
            "-c",
            "127.0.0.1",
            "-p",
            &p,
            "-t",
            "1",
            "-u",
            "-b",
            "10M,30M",
            "--repeat",
            "2",
            "--repeat-gap",
            "0",
            "-J",
        ]),
        std::time::Duration::from_secs(60),
    );
    assert!(out.status.success(), "{:?}", text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let points = doc["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(doc["netmeter_sweep"]["completed"], 2);
    for (pt, want) in points.iter().zip([10e6, 30e6]) {
        // --repeat 2: each point is two runs and their statistics.
        let runs = pt["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "{pt}");
        for r in runs {
            // Each point ran at its own rate: the -b value reached the test, and its
            // sender kept to it (a paced sender never runs ahead; on a loaded host it
            // and the receiver can fall behind, so that is no bound).
            assert_eq!(r["start"]["test_start"]["target_bitrate"], want as u64);
            let sent = r["end"]["sum_sent"]["bits_per_second"].as_f64().unwrap();
            assert!(sent > 0.0 && sent < 1.05 * want, "{sent} for {want}");
        }
        assert_eq!(pt["statistics"][0]["n"], 2);
        assert!(
            pt["statistics"][0]["ci"]["half_width"].as_f64().is_some(),
            "{pt}"
        );
    }
    assert_eq!(points[1]["settings"]["-b"], "30M");
    // Progress went to stderr, so stdout is the document alone.
    assert!(text(&out).1.contains("[2/2] -b 30M: "), "{:?}", text(&out));
    assert!(text(&out).1.contains(", 2 runs (ETA"), "{:?}", text(&out));
}

/// An invalid value anywhere in a list fails before any test: no server is listening,
/// yet the error is the value, not the connection.
#[test]
fn sweep_checks_every_value_first() {
    let port = free_port().to_string();
    let out = crate::support::run(
        Command::new(netmeter()).args([
            "sweep",
            "-c",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "1",
            "-P",
            "1,2,500",
        ]),
        std::time::Duration::from_secs(10),
    );
    let (o, e) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(o.is_empty(), "{o}");
    assert_eq!(e.trim(), "netmeter: -P 500: -P must be between 1 and 128");
    // Each list parser: a value the client refuses, a protocol, a congestion control
    // this kernel lacks, a plot file without a format.
    for (list, want) in [
        (
            &["-l", "8K,0"][..],
            "netmeter: -l 0: -l for TCP must be between 1 byte and 1M",
        ),
        (
            &["-w", "64K,100G"],
            "netmeter: -w 100G: -w is larger than the 512M maximum",
        ),
        (&["-b", "1M,fast"], "netmeter: -b fast: "),
        (
            &["-C", "reno,no-such-cc"],
            "netmeter: -C no-such-cc: congestion control 'no-such-cc' is not available here",
        ),
        (
            &["--proto", "tcp,sctp"],
            "error: --proto tcp,sctp: 'sctp' is not a protocol",
        ),
        (
            &["-P", "1,2", "--plot", "s.gif"],
            "error: --plot s.gif needs a file name ending in .svg, .png or .html",
        ),
    ] {
        let out = crate::support::run(
            Command::new(netmeter())
                .args(["sweep", "-c", "127.0.0.1", "-p", &port, "-t", "1"])
                .args(list),
            std::time::Duration::from_secs(10),
        );
        let (o, e) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{list:?}: {o}{e}");
        assert!(o.is_empty(), "{list:?}: {o}");
        assert!(e.starts_with(want), "{list:?}: {e}");
    }
}

/// `--proto tcp,udp` runs each point over both protocols; `--plot` draws throughput
/// against the first swept option (-b), a line per protocol, with the repeated points'
/// confidence intervals as error bars; `netmeter plot` of the `-J` document draws the
/// same chart.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn sweep_plots_protocols_with_error_bars() {
    let port = free_port();
    let (_srv, log) = netmeter_server(port, &[]);
    let p = port.to_string();
    let dir = Scratch::new("sweep-plot");
    let live = dir.0.join("live.svg");
    let out = crate::support::run(
        Command::new(netmeter())
            .args([
                "sweep",
                "-c",
                "127.0.0.1",
                "-p",
                &p,
                "-t",
                "0.5",
                "-b",
                "20M,50M",
                "--proto",
                "tcp,udp",
                "--repeat",
                "2",
                "--repeat-gap",
                "0",
                "-J",
                "--figure",
                "receiver_bits_per_second",
                "--plot",
            ])
            .arg(&live),
        std::time::Duration::from_secs(60),
    );
    let (o, e) = text(&out);
    assert!(out.status.success(), "{o}{e}\nserver:\n{}", log.text());
    let doc: Value = serde_json::from_str(&o).unwrap();
    let points = doc["points"].as_array().unwrap();
    let protocols: Vec<(&str, &str)> = points
        .iter()
        .map(|p| {
            (
                p["settings"]["--proto"].as_str().unwrap(),
                p["runs"][0]["start"]["test_start"]["protocol"]
                    .as_str()
                    .unwrap(),
            )
        })
        .collect();
    assert_eq!(
        protocols,
        [
            ("tcp", "TCP"),
            ("udp", "UDP"),
            ("tcp", "TCP"),
            ("udp", "UDP")
        ]
    );
    let svg = std::fs::read_to_string(&live).unwrap();
    let texts: Vec<String> = svg
        .split("<text")
        .skip(1)
        .filter_map(|t| t.split_once('>').map(|x| x.1))
        .filter_map(|t| t.split_once("</text>").map(|x| x.0.trim().to_string()))
        .collect();
    for want in [
        "Receiver throughput by -b and --proto — bars: 95 % confidence interval",
        "-b (target bitrate)",
        "Receiver throughput (Mbit/s)",
        "tcp",
        "udp",
        "20M",
        "50M",
    ] {
        assert!(texts.iter().any(|t| t == want), "{want} not in {texts:?}");
    }
    // A dot per point and two lines of two points.
    assert_eq!(svg.matches("<circle").count(), 4, "{svg}");

    let again = dir.0.join("again.svg");
    let doc_path = dir.0.join("sweep.json");
    std::fs::write(&doc_path, &o).unwrap();
    let out = Command::new(netmeter())
        .arg("plot")
        .arg(&doc_path)
        .arg("-o")
        .arg(&again)
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}", text(&out));
    assert_eq!(std::fs::read_to_string(&again).unwrap(), svg);
    // A sweep document plots alone.
    let out = Command::new(netmeter())
        .arg("plot")
        .arg(&doc_path)
        .arg(testdata("tcp.json"))
        .arg("-o")
        .arg(&again)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).1.contains("is a sweep document: plot it alone"),
        "{:?}",
        text(&out)
    );
}

/// Issue 19 item 5: a sweep shows the figures its test type has (UDP: loss and
/// jitter besides throughput; bounceback: RTT percentiles; both: CPU), as tables and
/// charts, and `--figure` picks which. The figures' values are not judged here (the
/// renderers' unit tests do that): what is shown is.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn sweep_shows_the_test_types_figures_and_figure_picks() {
    let port = free_port();
    let (_srv, log) = netmeter_server(port, &[]);
    let p = port.to_string();
    let dir = Scratch::new("sweep-figures");
    let svg = dir.0.join("udp.svg");
    let sweep = |extra: &[&str], plot: Option<&Path>| {
        let mut cmd = Command::new(netmeter());
        cmd.args(["sweep", "-c", "127.0.0.1", "-p", &p, "-t", "0.5"])
            .args(extra);
        if let Some(f) = plot {
            cmd.arg("--plot").arg(f);
        }
        let out = crate::support::run(&mut cmd, std::time::Duration::from_secs(60));
        let (o, e) = text(&out);
        assert!(
            out.status.success(),
            "{extra:?}: {o}{e}\nserver:\n{}",
            log.text()
        );
        o
    };
    let o = sweep(&["-u", "-b", "5M,10M"], Some(&svg));
    // The table headings, each alone on its line.
    const LABELS: [&str; 5] = [
        "Receiver throughput",
        "Loss",
        "Jitter",
        "CPU (local)",
        "CPU (remote)",
    ];
    let tables: Vec<&str> = o.lines().filter(|l| LABELS.contains(l)).collect();
    // The server's CPU shows where it reported one above 0 (it always has, so far).
    assert_eq!(tables[..4], LABELS[..4], "{o}");
    let drawn = std::fs::read_to_string(&svg).unwrap();
    for title in [
        "Receiver throughput by -b",
        "Loss by -b",
        "Jitter by -b",
        "CPU (local) by -b",
    ] {
        assert!(drawn.contains(title), "{title}: no chart");
    }
    let o = sweep(&["--bounceback", "-P", "1,2"], None);
    for want in [
        "\nTransactions\n",
        "\nRTT p50\n",
        "\nRTT p99\n",
        "\nCPU (local)\n",
    ] {
        assert!(o.contains(want), "{want}: {o}");
    }
    assert!(!o.contains("Receiver throughput"), "{o}");
    // --figure: these, in this order, in the table, the progress lines and the chart.
    let picked = dir.0.join("picked.svg");
    let o = sweep(
        &["-u", "-b", "5M,10M", "--figure", "jitter_ms,lost_percent"],
        Some(&picked),
    );
    assert!(
        o.lines().any(|l| l.starts_with("[1/2] -b 5M: Jitter ")),
        "{o}"
    );
    let shown: Vec<&str> = o.lines().filter(|l| LABELS.contains(l)).collect();
    assert_eq!(shown, ["Jitter", "Loss"], "{o}");
    let drawn = std::fs::read_to_string(&picked).unwrap();
    assert!(drawn.contains("Jitter by -b"), "{drawn}");
    assert!(!drawn.contains("Receiver throughput"), "{drawn}");
}

/// Issue 19 item 5: `sweep --csv` writes the sweep as CSV (stable columns, a row per
/// figure of each run and of each point's summary; progress on stderr), and
/// `netmeter csv` reads a sweep's and a `--repeat`'s `-J` document into the same rows.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn sweep_and_repeat_documents_as_csv() {
    let port = free_port();
    let (_srv, log) = netmeter_server(port, &[]);
    let p = port.to_string();
    let dir = Scratch::new("sweep-csv");
    let run = |args: &[&str]| {
        let out = crate::support::run(
            Command::new(netmeter()).args(args),
            std::time::Duration::from_secs(60),
        );
        let (o, e) = text(&out);
        assert!(
            out.status.success(),
            "{args:?}: {o}{e}\nserver:\n{}",
            log.text()
        );
        (o, e)
    };
    const HEADER: &str = "kind,point,run,parallel,length,bitrate,window,congestion,protocol,figure,unit,value,n,stdev,min,max,ci_level,ci_low,ci_high";
    let (o, e) = run(&[
        "sweep",
        "-c",
        "127.0.0.1",
        "-p",
        &p,
        "-t",
        "0.5",
        "-u",
        "-b",
        "5M,10M",
        "--csv",
    ]);
    assert!(e.contains("[2/2] -b 10M: "), "progress on stderr: {e}");
    let mut lines = o.lines();
    assert_eq!(lines.next(), Some(HEADER), "{o}");
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == 19), "{o}");
    let rate = |point: &str, kind: &str| -> f64 {
        rows.iter()
            .find(|r| r[0] == kind && r[1] == point && r[9] == "receiver_bits_per_second")
            .unwrap_or_else(|| panic!("no {kind} row of point {point}: {o}"))[11]
            .parse()
            .unwrap()
    };
    for (point, bitrate, want) in [("1", "5M", 5e6), ("2", "10M", 10e6)] {
        // Each point ran at its own rate (what the receiver counted, the run's figure):
        // never above it, and more than half of it (above the other point's rate for
        // 10M) even if a busy host sent short.
        let got = rate(point, "run");
        assert!(
            got <= 1.05 * want && got > 0.5 * want,
            "{got} for {want}: {o}"
        );
        assert_eq!(rate(point, "summary"), got, "one run: the mean is the run");
        assert!(
            rows.iter()
                .filter(|r| r[1] == point)
                .all(|r| r[5] == bitrate && r[3].is_empty()),
            "{o}"
        );
    }
    for key in ["lost_percent", "jitter_ms"] {
        assert!(
            rows.iter().any(|r| r[0] == "summary" && r[9] == key),
            "{key}: {o}"
        );
    }

    // Saved -J documents of a sweep and of --repeat, through `netmeter csv`.
    let (doc, _) = run(&[
        "sweep",
        "-c",
        "127.0.0.1",
        "-p",
        &p,
        "-t",
        "0.5",
        "-P",
        "1,2",
        "--repeat",
        "2",
        "--repeat-gap",
        "0",
        "-J",
    ]);
    let sweep_json = dir.0.join("sweep.json");
    std::fs::write(&sweep_json, &doc).unwrap();
    let path = sweep_json.to_str().unwrap();
    let (csv, _) = run(&["csv", path]);
    assert_eq!(csv.lines().next(), Some(HEADER), "{csv}");
    let v: Value = serde_json::from_str(&doc).unwrap();
    let mean = v["points"][1]["statistics"][0]["mean"].as_f64().unwrap();
    let summary = csv
        .lines()
        .find(|l| l.starts_with("summary,2,,2,") && l.contains(",receiver_bits_per_second,"))
        .unwrap_or_else(|| panic!("{csv}"));
    let cells: Vec<&str> = summary.split(',').collect();
    assert_eq!(cells[11].parse::<f64>().unwrap(), mean, "{summary}");
    assert_eq!(cells[12], "2", "two runs: {summary}");
    assert_eq!(cells[16], "0.95", "{summary}");
    assert!(csv.lines().any(|l| l.starts_with("run,2,2,2,")), "{csv}");
    let (picked, _) = run(&["csv", path, "--fields", "point,parallel,figure,value"]);
    assert!(
        picked.starts_with("point,parallel,figure,value\n1,1,receiver_bits_per_second,"),
        "{picked}"
    );
    // A test's columns do not fit an experiment's rows: one sentence, exit 1.
    let out = Command::new(netmeter())
        .args(["csv", path, "--fields", "bytes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out)
            .1
            .contains("--fields: unknown column 'bytes' for a sweep"),
        "{:?}",
        text(&out)
    );

    let (doc, _) = run(&[
        "-c",
        "127.0.0.1",
        "-p",
        &p,
        "-t",
        "0.5",
        "--repeat",
        "2",
        "--repeat-gap",
        "0",
        "-J",
    ]);
    let repeat_json = dir.0.join("repeat.json");
    std::fs::write(&repeat_json, &doc).unwrap();
    let (csv, _) = run(&["csv", repeat_json.to_str().unwrap()]);
    assert_eq!(csv.lines().next(), Some(HEADER), "{csv}");
    assert!(
        csv.lines()
            .any(|l| l.starts_with("run,1,2,,,,,,,receiver_bits_per_second,bits/s,")),
        "{csv}"
    );
    assert!(
        csv.lines()
            .any(|l| l.starts_with("summary,1,,,,,,,,receiver_bits_per_second,bits/s,")),
        "{csv}"
    );

    // --repeat --csv is refused, pointing to the way that works.
    let out = Command::new(netmeter())
        .args(["-c", "127.0.0.1", "-p", &p, "--repeat", "2", "--csv"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).1.contains("(for CSV: netmeter csv REPEAT.json)"),
        "{:?}",
        text(&out)
    );
}

/// Issue 13's truth on a netns link: UDP overdriving a tbf-shaped link (200M offered,
/// 1400-byte payloads) delivers 97.087 Mbit/s of payload at 100 Mbit/s (100 · 1400/1442:
/// the shaper counts 14 + 20 + 8 bytes of headers per datagram; the bed turns GSO off,
/// so tbf sees single datagrams) and 77.670 at 80 Mbit/s. Three runs on each: the 95 %
/// confidence interval contains the ceiling, two series on the same link never trip
/// `--fail-if-worse 10`, and 100 → 80 is "worse, significant", ~20 %, exit 2.
///
/// Each run omits its first second (`-O 1`): tbf's bucket starts full, so the first
/// 20 ms worth of tokens (250 KB at 100 Mbit/s) pass on top of the rate. Measured from
/// the start, a 1-second run read +1.4 % above the ceiling (98.49, CI 98.14..98.85
/// Mbit/s; the bucket adds at most 20 ms / 1 s = +2 %), which no per-packet overhead
/// explains: 1442 bytes is what tbf charges (qdisc_pkt_len = skb->len with the
/// Ethernet header; no GSO super-packets on this bed).
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn compare_verdicts_on_a_shaped_link() {
    use crate::support::netbed::{Dir, LinkConfig, Side, bed, tcp_listening, timing_lock};
    let _t = timing_lock();
    let s = Scratch::new("bed");
    // Each named file: one `--repeat 3` series of 1-second runs after a 1-second omit,
    // with these extra options (UDP at 200M, or TCP).
    let series = |mbit: f64, names: &[(&str, &[&str])]| -> Vec<PathBuf> {
        let b = bed(LinkConfig::new()
            .rate_mbit(mbit)
            .rate_dir(Dir::H1ToH2)
            .queue_ms(100.0)
            .burst_ms(20.0));
        let _server = b.spawn_in(Side::H2, netmeter(), &["-s"]).expect("server");
        crate::support::wait_until("the server to listen", || {
            b.in_ns(Side::H2, || tcp_listening(5201)).unwrap()
        });
        let h2 = b.h2_addr().to_string();
        names
            .iter()
            .map(|(name, extra)| {
                let out = b
                    .run_in(
                        Side::H1,
                        netmeter(),
                        &[
                            &["-c", &h2][..],
                            extra,
                            &[
                                "-t",
                                "1",
                                "-O",
                                "1",
                                "--repeat",
                                "3",
                                "--repeat-gap",
                                "0.2",
                                "-J",
                            ],
                        ]
                        .concat(),
                        std::time::Duration::from_secs(60),
                    )
                    .expect("client");
                let path = s.0.join(name);
                std::fs::write(&path, &out).unwrap();
                path
            })
            .collect()
    };
    let udp: &[&str] = &["-u", "-b", "200M", "-l", "1400"];
    // TCP: a window for the 100 ms queue, as accuracy::tcp_goodput_matches_shaped_link.
    let tcp: &[&str] = &["-w", "4M"];
    let at100 = series(
        100.0,
        &[("a.json", udp), ("b.json", udp), ("tcp.json", tcp)],
    );
    let at80 = series(80.0, &[("c.json", udp)]);

    // Payload per frame tbf charges: UDP 1400 of 1442 (8 + 20 + 14 bytes of headers),
    // TCP 1448 of 1514 (20 + 12 of TCP with timestamps, 20 of IPv4, 14 of Ethernet).
    let udp_ceiling = 100e6 * crate::support::netbed::udp_goodput_fraction(1400, false);
    assert!((udp_ceiling - 100e6 * 1400.0 / 1442.0).abs() < 1e-3);
    let tcp_ceiling = 100e6 * 1448.0 / 1514.0;
    for (path, ceiling) in [(&at100[0], udp_ceiling), (&at100[2], tcp_ceiling)] {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let st = &doc["statistics"][0];
        assert_eq!(st["key"], "receiver_bits_per_second");
        let (low, high) = (
            st["ci"]["low"].as_f64().unwrap(),
            st["ci"]["high"].as_f64().unwrap(),
        );
        eprintln!(
            "{}: 100 Mbit/s link: mean {:.3} Mbit/s, 95 % CI {:.3}..{:.3}, payload ceiling {:.3}",
            path.display(),
            st["mean"].as_f64().unwrap() / 1e6,
            low / 1e6,
            high / 1e6,
            ceiling / 1e6
        );
        // The link's payload ceiling is inside the runs' confidence interval. TCP's
        // goodput sits a little under it (each run's start and end ramp), so a tight CI
        // may end just below: seen in a clean CI run, 95.480..95.619 against 95.641
        // (-0.02 %). Within 0.2 % of the ceiling counts. UDP's three runs agree to a
        // few parts in a million, so its CI is that narrow and may end as far under
        // the ceiling as a run's edges put it: seen, 97.0828..97.0862 against 97.0874
        // (12 ppm). Within 0.01 % counts.
        let top = if ceiling == tcp_ceiling {
            ceiling * 0.998
        } else {
            ceiling * 0.9999
        };
        assert!(low <= ceiling && top <= high, "CI {low}..{high}");
    }

    let p = |x: &PathBuf| x.to_str().unwrap().to_string();
    let o = compare(&[&p(&at100[0]), &p(&at100[1]), "--fail-if-worse", "10", "-J"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    let j: Value = serde_json::from_str(&out).unwrap();
    let row = &j["comparison"]["figures"][0];
    eprintln!("same link twice: {row}");
    assert!(row["change_pct"].as_f64().unwrap().abs() < 2.0, "{row}");

    let o = compare(&[&p(&at100[0]), &p(&at80[0]), "--fail-if-worse", "10"]);
    let (out, err) = text(&o);
    eprintln!("{out}{err}");
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("Receiver throughput"))
        .unwrap();
    assert!(line.contains("worse, significant (Welch"), "{line}");
    let change: f64 = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix('-').and_then(|v| v.parse().ok()))
        .unwrap();
    // The change is the two documents' own means' (what compare read), and the 80
    // Mbit/s link cannot be faster than 80 % of the 100 Mbit/s one at its ceiling
    // (checked above): at least 20 % worse, within the runs' spread at 100. More
    // when a loaded host held the 80 Mbit/s shaper back (its runs' own mean shows it:
    // 75.48 against 77.67 Mbit/s in one full run).
    let mean = |x: &PathBuf| {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(x).unwrap()).unwrap();
        doc["statistics"][0]["mean"].as_f64().unwrap()
    };
    let (base, new) = (mean(&at100[0]), mean(&at80[0]));
    let want = (base - new) / base * 100.0;
    assert!(
        (change - want).abs() < 0.1,
        "{line}: the means give -{want:.2} %"
    );
    assert!(new <= 80e6 * 1400.0 / 1442.0 * 1.005, "{new} at 80 Mbit/s");
    assert!(change > 18.0, "{line}");
}
