//! `netmeter plot`, `--plot` and `netmeter report` end to end: results of live loopback
//! runs (netmeter's, and in the full tier the real iperf3 3.12/3.18/3.22's -J output)
//! drawn into SVG, PNG and HTML; bad input files refused in one sentence with no file
//! left behind; and (full tier) the HTML report rendered by headless Chromium at desktop
//! and phone widths, its screenshot not blank and its DOM holding every section.

use crate::support::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!("nm-plots-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// Every file in the directory.
    fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `netmeter plot|report ARGS`, bounded.
fn tool(args: &[&str]) -> Output {
    run_bounded(
        Command::new(netmeter()).args(args),
        Duration::from_secs(30),
        "netmeter plot/report",
    )
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A client `-J` run against a fresh netmeter server, saved as `name`.
fn saved_run(dir: &Scratch, name: &str, args: &[&str]) -> PathBuf {
    let out = client_vs_fresh_server(&[&["-J"], args].concat(), CLIENT_TIMEOUT);
    assert!(out.status.success(), "{args:?}: {}", show(&out));
    dir.write(name, &String::from_utf8_lossy(&out.stdout))
}

/// A client `-J --get-server-output` run against a fresh `-J` server (which then sends
/// its own document along), saved as `name`.
fn saved_run_with_server(dir: &Scratch, name: &str, args: &[&str]) -> PathBuf {
    let port = free_port();
    let (_srv, _out) = netmeter_server_listening(port, &["-1", "-J"]);
    let v = client_json(port, &[&["--get-server-output"], args].concat());
    assert!(
        v["server_output_json"].is_object(),
        "no server_output_json: {v}"
    );
    dir.write(name, &v.to_string())
}

/// The text of every `<text>` element of an SVG.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| t.split_once('>').map(|x| x.1))
        .filter_map(|t| t.split_once("</text>").map(|x| x.0.trim().to_string()))
        .collect()
}

/// Plot `inputs` to SVG and return its texts; asserts success.
fn plot_svg(dir: &Scratch, inputs: &[&Path], out: &str) -> Vec<String> {
    let o = dir.path(out);
    let mut args = vec!["plot"];
    args.extend(inputs.iter().map(|p| s(p)));
    args.extend(["-o", s(&o)]);
    let r = tool(&args);
    assert!(r.status.success(), "{}", show(&r));
    svg_texts(&std::fs::read_to_string(&o).unwrap())
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn tcp_run_plots_each_stream_the_sum_cwnd_and_rtt() {
    let dir = Scratch::new("tcp");
    let run = saved_run(
        &dir,
        "tcp.json",
        &["-t", "2", "-P", "2", "-T", "two streams"],
    );
    let t = plot_svg(&dir, &[&run], "tcp.svg");
    for want in [
        "Throughput, client → server",
        "stream 1",
        "stream 2",
        "sum (sender)",
        "TCP congestion window, client → server (intervals with retransmissions marked)",
        "TCP smoothed RTT, client → server",
        "time (s)",
    ] {
        assert!(t.iter().any(|x| x == want), "{want} missing: {t:?}");
    }
    // PNG of the same run: a PNG as tall as three charts.
    let png = dir.path("tcp.png");
    let r = tool(&["plot", s(&run), "-o", s(&png)]);
    assert!(r.status.success(), "{}", show(&r));
    let bytes = std::fs::read(&png).unwrap();
    let dec = png::Decoder::new(&bytes[..]).read_info().unwrap();
    assert_eq!((dec.info().width, dec.info().height), (960, 3 * 400));
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn udp_run_with_server_output_plots_the_receivers_loss_and_jitter() {
    let dir = Scratch::new("udp");
    let run = saved_run_with_server(&dir, "udp.json", &["-u", "-b", "20M", "-t", "2"]);
    let t = plot_svg(&dir, &[&run], "udp.svg");
    for want in [
        "Throughput, client → server",
        "sum (receiver, counted by the server)",
        "UDP loss, client → server",
        "UDP jitter, client → server",
        "lost datagrams (%)",
    ] {
        assert!(t.iter().any(|x| x == want), "{want} missing: {t:?}");
    }
    // Without the server's output the client still holds the server's end results:
    // each stream's loss and jitter over the whole test (a lossy run was charted as a
    // clean throughput line).
    let plain = saved_run(&dir, "udp-plain.json", &["-u", "-b", "20M", "-t", "1"]);
    let t = plot_svg(&dir, &[&plain], "udp-plain.svg");
    for want in [
        "UDP loss, client → server (whole test",
        "UDP jitter, client → server (whole test",
    ] {
        assert!(
            t.iter().any(|x| x.starts_with(want)),
            "{want} missing: {t:?}"
        );
    }
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn bidir_plots_both_directions() {
    let dir = Scratch::new("bidir");
    let run = saved_run(&dir, "bidir.json", &["-t", "2", "--bidir"]);
    let t = plot_svg(&dir, &[&run], "bidir.svg");
    assert!(
        t.iter().any(|x| x == "Throughput, client → server"),
        "{t:?}"
    );
    assert!(
        t.iter().any(|x| x == "Throughput, server → client"),
        "{t:?}"
    );
    assert!(t.iter().any(|x| x == "sum (receiver)"), "{t:?}");
    let has = |t: &[String], s: &str| t.iter().any(|x| x == s);
    assert!(has(&t, "TCP smoothed RTT, client → server"), "{t:?}");
    assert!(!has(&t, "TCP smoothed RTT, server → client"), "{t:?}");
    // The server's TCP_INFO for what it sent, from its document (a -J server).
    let run = saved_run_with_server(&dir, "bidir-srv.json", &["-t", "2", "--bidir"]);
    let t = plot_svg(&dir, &[&run], "bidir-srv.svg");
    assert!(has(&t, "TCP smoothed RTT, server → client"), "{t:?}");
    assert!(has(&t, "sum (sender, counted by the server)"), "{t:?}");
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn latency_runs_plot_cdf_histogram_and_percentiles() {
    let dir = Scratch::new("latency");
    let bb = saved_run(&dir, "bb.json", &["-t", "1", "--bounceback"]);
    let t = plot_svg(&dir, &[&bb], "bb.svg");
    for want in [
        "Bounceback round-trip time: CDF",
        "Bounceback round-trip time: histogram",
        "latency (ms)",
    ] {
        assert!(t.iter().any(|x| x == want), "{want} missing: {t:?}");
    }
    for p in ["p50 ", "p90 ", "p99 ", "p99.9 "] {
        assert_eq!(
            t.iter().filter(|x| x.starts_with(p)).count(),
            2,
            "{p}: {t:?}"
        );
    }
    let co = saved_run(&dir, "co.json", &["-t", "1", "--connect-only"]);
    let t = plot_svg(&dir, &[&co], "co.svg");
    assert!(
        t.iter().any(|x| x == "TCP handshake (connect) time: CDF"),
        "{t:?}"
    );
    let tt = saved_run(
        &dir,
        "tt.json",
        &["-t", "1", "-u", "-b", "5M", "--trip-times"],
    );
    let t = plot_svg(&dir, &[&tt], "tt.svg");
    assert!(
        t.iter().any(|x| x == "One-way delay, client → server: CDF"),
        "{t:?}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn traffic_profiles_plot_their_transfer_and_frame_latency() {
    let dir = Scratch::new("profiles");
    let burst = saved_run(
        &dir,
        "burst.json",
        &["-t", "2", "--burst-size", "256K", "--burst-period", "0.1"],
    );
    let t = plot_svg(&dir, &[&burst], "burst.svg");
    assert!(t.iter().any(|x| x == "Burst transfer time: CDF"), "{t:?}");
    let iso = saved_run(
        &dir,
        "iso.json",
        &["-u", "-t", "2", "--isochronous", "30:8m,1m", "--trip-times"],
    );
    let t = plot_svg(&dir, &[&iso], "iso.svg");
    assert!(
        t.iter()
            .any(|x| x == "Frame transfer time (sender): histogram"),
        "{t:?}"
    );
    assert!(
        t.iter().any(|x| x == "Frame latency (receiver): CDF"),
        "{t:?}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn working_load_plots_idle_and_loaded_with_rpm() {
    let dir = Scratch::new("wl");
    let run = saved_run(&dir, "wl.json", &["-t", "3", "--working-load=up,1"]);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&run).unwrap()).unwrap();
    let w = &v["end"]["netmeter"]["working_load"];
    assert!(
        w["loaded_rtt_histogram_us"]
            .as_array()
            .is_some_and(|a| !a.is_empty()),
        "{w}"
    );
    let t = plot_svg(&dir, &[&run], "wl.svg");
    let title = t
        .iter()
        .find(|x| x.starts_with("Working load (up, 1 streams): RTT idle vs loaded — RPM "))
        .unwrap_or_else(|| panic!("{t:?}"));
    let rpm = format!("{:.0} loaded", w["loaded_rpm"].as_f64().unwrap());
    assert!(title.ends_with(&rpm), "{title} vs {rpm}");
    assert!(t.iter().any(|x| x.starts_with("idle (p50 ")), "{t:?}");
    assert!(t.iter().any(|x| x.starts_with("loaded (p50 ")), "{t:?}");
}

#[test]
fn several_results_share_a_chart_named_by_title_or_file() {
    let dir = Scratch::new("multi");
    let a = saved_run(&dir, "first-run.json", &["-t", "1"]);
    let b = saved_run(&dir, "b.json", &["-t", "1", "-R", "-T", "reverse run"]);
    let t = plot_svg(&dir, &[&a, &b], "both.svg");
    assert!(
        t.iter().any(|x| x == "Throughput (sum of streams)"),
        "{t:?}"
    );
    assert!(t.iter().any(|x| x == "first-run"), "{t:?}");
    assert!(t.iter().any(|x| x == "reverse run"), "{t:?}");
}

#[test]
fn client_plot_flag_draws_the_run() {
    let dir = Scratch::new("flag");
    let svg = dir.path("live.svg");
    let out = client_vs_fresh_server(&["-t", "1", "--plot", s(&svg)], CLIENT_TIMEOUT);
    assert!(out.status.success(), "{}", show(&out));
    // The text report is printed as usual.
    assert!(String::from_utf8_lossy(&out.stdout).contains("iperf Done."));
    let t = svg_texts(&std::fs::read_to_string(&svg).unwrap());
    assert!(
        t.iter().any(|x| x == "Throughput, client → server"),
        "{t:?}"
    );
    assert_eq!(dir.files(), ["live.svg"]);
}

/// Ctrl-C in the middle of a `-t 0` run with `--plot`: the chart of what ran is still
/// drawn, and the client ends as an interrupted iperf3 client does (status 0, the
/// interrupt sentence).
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn client_plot_flag_draws_an_interrupted_run() {
    let dir = Scratch::new("flag-int");
    let svg = dir.path("cut.svg");
    let port = free_port();
    let _srv = netmeter_server_watched(port, &["-1"]);
    let c = Proc::spawn(
        "netmeter client",
        Command::new(netmeter())
            .args(["-c", "127.0.0.1", "-p", &port.to_string()])
            .args(["-t", "0", "-b", "100M", "--plot", s(&svg)]),
    )
    .watch();
    // Two interval rows: a chart with something to draw (the client prints its rows
    // line by line, piped too).
    c.out.await_interval_end(0, 2.0, "the client");
    let st = Command::new("kill")
        .args(["-s", "INT", &c.pid().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    let out = c.finish(EVIDENCE_TIMEOUT);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("interrupt - the client has terminated"),
        "{}",
        show(&out)
    );
    let t = svg_texts(&std::fs::read_to_string(&svg).unwrap());
    assert!(
        t.iter().any(|x| x == "Throughput, client → server"),
        "{t:?}"
    );
    assert_eq!(dir.files(), ["cut.svg"]);
    // A test that never ran (no server): its error, and no chart.
    let none = dir.path("none.svg");
    let out = run(
        Command::new(netmeter()).args([
            "-c",
            "127.0.0.1",
            "-p",
            &free_port().to_string(),
            "--plot",
            s(&none),
        ]),
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unable to connect"),
        "{}",
        show(&out)
    );
    assert!(
        !none.exists(),
        "a chart of a test that never ran was written"
    );
}

#[test]
fn bad_inputs_are_one_sentence_and_leave_no_file() {
    let dir = Scratch::new("bad");
    let good = saved_run(&dir, "good.json", &["-t", "1"]);
    let text = std::fs::read_to_string(&good).unwrap();
    let cases: Vec<(PathBuf, &str)> = vec![
        (dir.write("notres.json", r#"{"hello": "world"}"#), "it is not a netmeter or iperf3 result"),
        (dir.write("cut.json", &text[..text.len() / 2]), "it is truncated JSON"),
        (dir.write("empty.json", r#"{"start": {}, "intervals": [], "end": {}}"#), "it holds no measurements"),
        (
            dir.write(
                "failed.json",
                r#"{"start": {}, "intervals": [], "end": {}, "error": "unable to connect to server: Connection refused"}"#,
            ),
            "the test it records failed: unable to connect to server: Connection refused",
        ),
        (dir.write("zero.json", ""), "it is empty"),
        (dir.path("missing.json"), "cannot read it"),
    ];
    for (input, why) in &cases {
        for (cmd, out) in [
            ("plot", "out.svg"),
            ("plot", "out.png"),
            ("report", "out.html"),
        ] {
            let o = dir.path(out);
            // A good input first: the bad one must still stop the whole command.
            let r = tool(&[cmd, s(&good), s(input), "-o", s(&o)]);
            assert_eq!(r.status.code(), Some(1), "{cmd} {input:?}: {}", show(&r));
            let err = String::from_utf8_lossy(&r.stderr);
            assert_eq!(err.trim().lines().count(), 1, "{err}");
            assert!(err.contains(s(input)) && err.contains(why), "{cmd}: {err}");
            assert!(!o.exists(), "{cmd} {input:?} left {o:?}");
        }
    }
    let mut left = dir.files();
    left.retain(|f| f.starts_with("out") || f.starts_with('.'));
    assert!(left.is_empty(), "{left:?}");
    // Usage mistakes.
    let r = tool(&["plot", s(&good), "-o", s(&dir.path("x.jpg"))]);
    assert_eq!(r.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("needs a file name ending in .svg or .png")
    );
    let r = tool(&["plot", s(&good)]);
    assert_eq!(r.status.code(), Some(1), "{}", show(&r));
    let r = tool(&["report", "--help"]);
    assert!(r.status.success());
    assert!(String::from_utf8_lossy(&r.stdout).contains("Usage: netmeter report"));
}

#[test]
fn report_of_a_live_run_holds_every_section() {
    let dir = Scratch::new("report");
    let run = saved_run(&dir, "tcp.json", &["-t", "1", "-P", "2"]);
    let html = dir.path("r.html");
    let r = tool(&["report", s(&run), "-o", s(&html)]);
    assert!(r.status.success(), "{}", show(&r));
    let h = std::fs::read_to_string(&html).unwrap();
    for id in [
        "result-1",
        "settings-1",
        "hosts-1",
        "summary-1",
        "warnings-1",
        "plots-1",
    ] {
        assert!(h.contains(&format!("id=\"{id}\"")), "{id}");
    }
    assert_eq!(h.matches("<figure class=\"chart\"").count(), 3);
    assert!(!h.contains("<script"));
}

// ---------------------------------------------------------------------------------
// Full tier: the real iperf3's documents, and headless Chromium.

/// A real iperf3 client's and server's `-J` documents for one loopback test.
fn iperf3_docs(key: &str, args: &[&str]) -> (String, String) {
    let bin = peer(key);
    let port = free_port().to_string();
    let server = Proc::spawn(
        "iperf3 server",
        Command::new(&bin).args(["-s", "-1", "-J", "-B", "127.0.0.1", "-p", &port]),
    );
    // Its listening socket (a probe connection would be its one test).
    await_tcp_listening(server.pid(), port.parse().expect("port"));
    let client = run_bounded(
        Command::new(&bin)
            .args(["-c", "127.0.0.1", "-p", &port, "-J"])
            .args(args),
        Duration::from_secs(40),
        "iperf3 client",
    );
    let srv = server.wait_bounded(Duration::from_secs(20));
    assert!(client.status.success(), "{key} {args:?}: {}", show(&client));
    (
        String::from_utf8_lossy(&client.stdout).into_owned(),
        String::from_utf8_lossy(&srv.stdout).into_owned(),
    )
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs the iperf3 peers"
)]
fn iperf3_312_to_322_results_plot_and_report() {
    let dir = Scratch::new("iperf3");
    for key in [
        "NETMETER_IPERF3_312",
        "NETMETER_IPERF3_318",
        "NETMETER_IPERF3_322",
    ] {
        let cases: [(&str, &[&str], &[&str]); 3] = [
            (
                "tcp",
                &["-t", "2", "-P", "2"],
                &["stream 2", "TCP smoothed RTT, client → server"],
            ),
            (
                "udp",
                &["-t", "2", "-u", "-b", "10M", "-R"],
                &["UDP loss, server → client"],
            ),
            (
                "bidir",
                &["-t", "2", "--bidir"],
                &["Throughput, server → client", "sum (receiver)"],
            ),
        ];
        let mut all = Vec::new();
        for (name, args, want) in cases {
            let (c, srv) = iperf3_docs(key, args);
            let cp = dir.write(&format!("{key}-{name}.json"), &c);
            let sp = dir.write(&format!("{key}-{name}-server.json"), &srv);
            let t = plot_svg(&dir, &[&cp], &format!("{key}-{name}.svg"));
            for w in want
                .iter()
                .chain(&["Throughput, client → server", "time (s)"])
            {
                if name == "udp" && *w == "Throughput, client → server" {
                    continue;
                }
                assert!(t.iter().any(|x| x == w), "{key} {name}: {w} missing: {t:?}");
            }
            // The server's document too (its rows are the other side's).
            let t = plot_svg(&dir, &[&sp], &format!("{key}-{name}-server.svg"));
            assert!(
                t.iter().any(|x| x.starts_with("Throughput, ")),
                "{key} {name} server: {t:?}"
            );
            all.push(cp);
        }
        let html = dir.path(&format!("{key}.html"));
        let mut args = vec!["report"];
        args.extend(all.iter().map(|p| s(p)));
        args.extend(["-o", s(&html)]);
        let r = tool(&args);
        assert!(r.status.success(), "{key}: {}", show(&r));
        let h = std::fs::read_to_string(&html).unwrap();
        assert!(
            h.contains("id=\"compare\"") && h.contains("id=\"result-3\""),
            "{key}"
        );
    }
}

/// Chromium run in a network namespace of its own (nothing but its own loopback, so it
/// cannot reach anything) with a throw-away profile.
fn chromium(dir: &Scratch, args: &[&str]) -> Output {
    let profile = dir.path("chromium-profile");
    let out = run_bounded(
        Command::new("unshare")
            .args([
                "--net",
                "--",
                "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
            ])
            .args([
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--force-device-scale-factor=1",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(args),
        Duration::from_secs(90),
        "chromium",
    );
    assert!(out.status.success(), "chromium {args:?}: {}", show(&out));
    out
}

/// (pixels, pixels that are not white, pixels in the charts' second line colour) of an
/// RGB(A) PNG.
fn pixel_counts(png_path: &Path) -> (usize, usize, usize) {
    let bytes = std::fs::read(png_path).unwrap();
    let mut reader = png::Decoder::new(&bytes[..]).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let step = info.color_type.samples();
    assert!(step >= 3, "{:?}", info.color_type);
    let px = &buf[..info.buffer_size()];
    let (mut ink, mut orange) = (0, 0);
    for p in px.chunks(step) {
        if p[0] < 240 || p[1] < 240 || p[2] < 240 {
            ink += 1;
        }
        // The second series colour (213, 94, 0), allowing for anti-aliasing: the hue
        // (green a third to a half of red, little blue); the page's own styles use none.
        let (r, g, b) = (p[0] as u32, p[1] as u32, p[2] as u32);
        if r >= 150 && g * 10 >= r * 3 && g * 10 <= r * 6 && b * 10 <= r * 2 {
            orange += 1;
        }
    }
    (px.len() / step, ink, orange)
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs chromium (scripts/setup-chromium.sh) and root (unshare --net)"
)]
fn chromium_renders_the_report_at_desktop_and_phone_width() {
    let dir = Scratch::new("chromium");
    let tcp = saved_run(&dir, "tcp.json", &["-t", "2", "-P", "2"]);
    let udp = saved_run_with_server(&dir, "udp.json", &["-t", "2", "-u", "-b", "10M"]);
    let html = dir.path("report.html");
    let r = tool(&["report", s(&tcp), s(&udp), "-o", s(&html)]);
    assert!(r.status.success(), "{}", show(&r));
    let url = format!("file://{}", html.display());

    let dom = chromium(&dir, &["--dump-dom", &url]);
    let dom = String::from_utf8_lossy(&dom.stdout);
    for id in ["compare", "result-1", "result-2"] {
        assert!(
            dom.contains(&format!("<section id=\"{id}\"")),
            "{id} missing in the DOM"
        );
    }
    for n in 1..=2 {
        for sec in ["settings", "hosts", "summary", "warnings", "plots"] {
            assert!(
                dom.contains(&format!("id=\"{sec}-{n}\"")),
                "{sec}-{n} missing in the DOM"
            );
        }
    }
    let svgs = dom.matches("<svg").count();
    let file = std::fs::read_to_string(&html).unwrap();
    let kinds: Vec<&str> = file
        .split("data-kind=\"")
        .skip(1)
        .filter_map(|k| k.split('"').next())
        .collect();
    let in_file = file.matches("<svg").count();
    assert!(
        svgs >= 6 && svgs == in_file,
        "{svgs} charts in the DOM, {in_file} in the file: {kinds:?}"
    );

    for (name, size) in [("desktop", "1280,2400"), ("phone", "390,4000")] {
        let shot = dir.path(&format!("{name}.png"));
        chromium(
            &dir,
            &[
                &format!("--window-size={size}"),
                &format!("--screenshot={}", shot.display()),
                &url,
            ],
        );
        let (all, ink, orange) = pixel_counts(&shot);
        // Text, tables and charts: a blank page has no ink, a page without its charts
        // none of the second series colour.
        assert!(
            ink * 100 > all * 3,
            "{name}: only {ink} of {all} pixels are not white"
        );
        assert!(
            orange > 300,
            "{name}: {orange} pixels of the charts' orange: not drawn?"
        );
        eprintln!("{name}: {ink} of {all} pixels not white, {orange} orange");
    }
}

/// At a 1000 px window every chart of the report scrolled sideways: the SVG was 100 %
/// of its box plus its 2 px border. Each chart must fit its box (no sideways scroll)
/// and scale with the page, keeping its shape, at desktop widths.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs chromium (scripts/setup-chromium.sh) and root (unshare --net)"
)]
fn chromium_report_charts_fit_the_page() {
    let dir = Scratch::new("chromium-fit");
    let html = dir.path("report.html");
    let input = concat!(env!("CARGO_MANIFEST_DIR"), "/src/report/testdata/tcp.json");
    let r = tool(&["report", input, "-o", s(&html)]);
    assert!(r.status.success(), "{}", show(&r));
    // The report runs no script; a copy of it gets one that writes each chart's layout
    // into the DOM, which --dump-dom then shows.
    let probe = "<script>window.addEventListener('load', () => {\
        const out = [];\
        document.querySelectorAll('figure').forEach(f => {\
          const b = f.querySelector('svg').getBoundingClientRect();\
          out.push([f.scrollWidth, f.clientWidth, b.width, b.height].join(','));\
        });\
        document.body.setAttribute('data-probe', out.join(';'));\
      });</script>";
    let page = std::fs::read_to_string(&html)
        .unwrap()
        .replace("</body>", &format!("{probe}</body>"));
    let probed = dir.path("probed.html");
    std::fs::write(&probed, page).unwrap();
    let url = format!("file://{}", probed.display());
    let mut widths = Vec::new();
    for window in [1000, 1280, 800] {
        let dom = chromium(
            &dir,
            &[&format!("--window-size={window},3000"), "--dump-dom", &url],
        );
        let dom = String::from_utf8_lossy(&dom.stdout);
        let probe = dom
            .split("data-probe=\"")
            .nth(1)
            .and_then(|p| p.split('"').next())
            .unwrap_or_else(|| panic!("no probe in the DOM at {window} px"));
        let charts: Vec<Vec<f64>> = probe
            .split(';')
            .map(|c| c.split(',').map(|x| x.parse().unwrap()).collect())
            .collect();
        assert!(charts.len() >= 3, "{window} px: {probe}");
        for c in &charts {
            let (scroll, client, w, h) = (c[0], c[1], c[2], c[3]);
            assert!(scroll <= client, "{window} px: a chart scrolls: {probe}");
            assert!(
                w <= client + 0.5,
                "{window} px: wider than its box: {probe}"
            );
            // Scaled, not cropped: the 960 × 400 drawing keeps its shape.
            let ratio = h / w;
            assert!((ratio - 400.0 / 960.0).abs() < 0.02, "{window} px: {probe}");
        }
        widths.push(charts[0][2]);
    }
    // Narrower than 960 px at 800, as wide as the page allows at 1280.
    assert!(widths[2] < 960.0 && widths[2] < widths[0], "{widths:?}");
}

/// A sweep's page (`netmeter sweep --plot FILE.html`, and `netmeter report` of its `-J`
/// document): the points' table and the chart render in Chromium, both lines drawn.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs chromium (scripts/setup-chromium.sh) and root (unshare --net)"
)]
fn chromium_renders_a_sweep_page() {
    let dir = Scratch::new("chromium-sweep");
    let port = free_port();
    let (_srv, log) = netmeter_server(port, &[]);
    let p = port.to_string();
    let live = dir.path("live.html");
    let out = run_bounded(
        Command::new(netmeter())
            .args([
                "sweep",
                "-c",
                "127.0.0.1",
                "-p",
                &p,
                "-t",
                "0.3",
                "-P",
                "1,2",
            ])
            .args(["-l", "64K,1M", "--repeat", "2", "--repeat-gap", "0", "-J"])
            .args(["--figure", "receiver_bits_per_second", "--plot"])
            .arg(&live),
        Duration::from_secs(60),
        "sweep",
    );
    assert!(
        out.status.success(),
        "{}\nserver: {}",
        show(&out),
        log.text()
    );
    let doc = dir.write("sweep.json", &String::from_utf8_lossy(&out.stdout));
    let page = dir.path("report.html");
    let r = tool(&["report", s(&doc), "-o", s(&page)]);
    assert!(r.status.success(), "{}", show(&r));
    for html in [&live, &page] {
        let url = format!("file://{}", html.display());
        let dom = chromium(&dir, &["--dump-dom", &url]);
        let dom = String::from_utf8_lossy(&dom.stdout);
        for id in ["sweep-table", "sweep-plots"] {
            assert!(
                dom.contains(&format!("<section id=\"{id}\"")),
                "{id}: {dom}"
            );
        }
        // A header and four points, each with its interval; one chart.
        assert_eq!(dom.matches("<tr>").count(), 5, "{dom}");
        assert_eq!(dom.matches("95 %: ").count(), 4, "{dom}");
        assert_eq!(dom.matches("<svg").count(), 1, "{dom}");
        assert!(dom.contains("data-kind=\"sweep\""), "{dom}");
        let shot = dir.path("sweep.png");
        chromium(
            &dir,
            &[
                "--window-size=1280,1200",
                &format!("--screenshot={}", shot.display()),
                &url,
            ],
        );
        let (all, ink, orange) = pixel_counts(&shot);
        assert!(
            ink * 100 > all * 3,
            "only {ink} of {all} pixels are not white"
        );
        // The second line (-l 1M) with its dots and error bars.
        assert!(
            orange > 300,
            "{orange} orange pixels: the second line not drawn?"
        );
        eprintln!(
            "{}: {ink} of {all} pixels not white, {orange} orange",
            html.display()
        );
    }
}
