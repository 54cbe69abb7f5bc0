//! Results as other tools read them: `--csv` on a live run, `netmeter csv` on saved
//! results (netmeter's and the real iperf3's `-J` and `--json-stream`), and the refusal of
//! bad input files.

use crate::support::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A CSV text as a header and rows of cells (the tests write no quoted cells).
fn table(csv: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = csv.lines();
    let head: Vec<String> = lines
        .next()
        .unwrap_or_else(|| panic!("no header in {csv:?}"))
        .split(',')
        .map(String::from)
        .collect();
    let rows: Vec<Vec<String>> = lines
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    for r in &rows {
        assert_eq!(r.len(), head.len(), "ragged row {r:?} in\n{csv}");
    }
    (head, rows)
}

fn cell<'a>(head: &[String], row: &'a [String], name: &str) -> &'a str {
    let i = head
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name} in {head:?}"));
    &row[i]
}

fn number(head: &[String], row: &[String], name: &str) -> f64 {
    let c = cell(head, row, name);
    c.parse()
        .unwrap_or_else(|_| panic!("{name} = {c:?} is not a number in {row:?}"))
}

/// A scratch directory of this test, removed first if a previous run left it.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("netmeter-results-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn netmeter_csv(args: &[&str]) -> std::process::Output {
    run(
        Command::new(netmeter()).arg("csv").args(args),
        Duration::from_secs(20),
    )
}

/// `--csv` on a live TCP run with two streams: only CSV on stdout, the header, two
/// stream rows and a sum row per interval, end rows; the sum row is the streams' sum.
#[test]
fn csv_client_run_over_loopback() {
    let port = free_port();
    let (_srv, _log) = netmeter_server(port, &["-1"]);
    let out = client(port, &["--csv", "-t", "2", "-P", "2"]);
    assert!(out.status.success(), "{}", show(&out));
    let csv = String::from_utf8(out.stdout.clone()).unwrap();
    let (head, rows) = table(&csv);
    assert_eq!(head[..4], ["kind", "direction", "role", "stream"]);
    let iv: Vec<_> = rows.iter().filter(|r| r[0] == "interval").collect();
    assert_eq!(iv.len(), 2 * 3, "{csv}");
    for chunk in iv.chunks(3) {
        let streams = number(&head, chunk[0], "bytes") + number(&head, chunk[1], "bytes");
        assert_eq!(cell(&head, chunk[2], "stream"), "sum");
        assert_eq!(number(&head, chunk[2], "bytes"), streams);
        for r in &chunk[..2] {
            assert_eq!(cell(&head, r, "role"), "sender");
            assert_eq!(cell(&head, r, "direction"), "up");
            assert!(number(&head, r, "bits_per_second") > 0.0);
            assert!(number(&head, r, "rtt_us") > 0.0);
            assert_eq!(cell(&head, r, "remote_port"), port.to_string());
        }
    }
    // Per stream a sender and a receiver row, then the two sums.
    let end: Vec<_> = rows.iter().filter(|r| r[0] == "end").collect();
    assert_eq!(end.len(), 2 * 2 + 2, "{csv}");
    let recv_sum = end.last().unwrap();
    assert_eq!(cell(&head, recv_sum, "role"), "receiver");
    assert!(number(&head, recv_sum, "bytes") > 0.0);
}

/// A title or host name that a spreadsheet would run as a formula is written as text
/// (OWASP's CSV injection), in `--csv` and in `netmeter csv`; numbers stay numbers.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn csv_text_cells_cannot_inject_formulas() {
    let port = free_port();
    let (_srv, _log) = netmeter_server(port, &[]);
    let out = client(
        port,
        &["--csv", "--fields", "title,bytes", "-t", "1", "-T", "=1+2"],
    );
    assert!(out.status.success(), "{}", show(&out));
    let csv = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "title,bytes", "{csv}");
    for l in &lines[1..] {
        let (title, bytes) = l.rsplit_once(',').unwrap();
        assert_eq!(title, "\"'=1+2\"", "{csv}");
        assert!(bytes.parse::<u64>().is_ok(), "{csv}");
    }
    // A saved result whose text fields were written by someone else.
    let dir = scratch("inject");
    let mut doc = client_json(port, &["-t", "1"]);
    doc["title"] = "@SUM(A1)".into();
    doc["start"]["connected"][0]["remote_host"] = "-2+3".into();
    let path = dir.join("r.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    let out = netmeter_csv(&[
        path.to_str().unwrap(),
        "--fields",
        "title,remote_host,stream,bytes",
    ]);
    assert!(out.status.success(), "{}", show(&out));
    let csv = String::from_utf8_lossy(&out.stdout).into_owned();
    let row = csv.lines().nth(1).unwrap();
    assert!(row.starts_with("\"'@SUM(A1)\",\"'-2+3\","), "{csv}");
    let bytes = row.rsplit(',').next().unwrap();
    assert!(bytes.parse::<u64>().is_ok(), "{csv}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--fields` picks and orders the columns of a live UDP run.
#[test]
fn csv_fields_on_a_udp_run() {
    let port = free_port();
    let (_srv, _log) = netmeter_server(port, &["-1"]);
    let out = client(
        port,
        &[
            "--csv",
            "--fields",
            "stream,role,packets,lost_percent,jitter_ms",
            "-u",
            "-b",
            "10M",
            "-t",
            "2",
            "-R",
        ],
    );
    assert!(out.status.success(), "{}", show(&out));
    let (head, rows) = table(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        head,
        ["stream", "role", "packets", "lost_percent", "jitter_ms"]
    );
    let recv: Vec<_> = rows.iter().filter(|r| r[1] == "receiver").collect();
    assert!(recv.len() >= 4, "{rows:?}");
    for r in recv {
        assert!(number(&head, r, "packets") > 0.0, "{r:?}");
        number(&head, r, "lost_percent");
        number(&head, r, "jitter_ms");
    }
}

#[test]
fn csv_usage_errors() {
    for (args, want) in [
        (
            &["--csv", "-J"][..],
            "--csv and -J/--json-stream cannot be used together",
        ),
        (
            &["--fields", "bytes"][..],
            "--fields chooses CSV columns; use it with --csv",
        ),
        (
            &["--csv", "--fields", "bytes,rate"][..],
            "unknown column 'rate'",
        ),
        (
            &["--csv", "--find-max-rate"][..],
            "cannot be used with --loopback or --find-max-rate",
        ),
    ] {
        let err = usage_error(args);
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}

/// A saved `-J` document and `--json-stream` lines of live runs, as CSV: one row per
/// stream per interval plus sums, bytes as the JSON says.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn csv_of_saved_netmeter_results() {
    let dir = scratch("saved");
    let port = free_port();
    let (_srv, _log) = netmeter_server(port, &[]);
    let doc = client_json(port, &["-t", "2", "--bidir"]);
    let doc_path = dir.join("bidir.json");
    std::fs::write(&doc_path, doc.to_string()).unwrap();
    let out = netmeter_csv(&[doc_path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", show(&out));
    let (head, rows) = table(&String::from_utf8_lossy(&out.stdout));
    let intervals = doc["intervals"].as_array().unwrap();
    let iv: Vec<_> = rows.iter().filter(|r| r[0] == "interval").collect();
    // Two streams, a sum per direction.
    assert_eq!(iv.len(), intervals.len() * 4);
    for (i, chunk) in iv.chunks(4).enumerate() {
        assert_eq!(
            number(&head, chunk[2], "bytes"),
            f64_at(&intervals[i], "/sum/bytes")
        );
        assert_eq!(cell(&head, chunk[3], "direction"), "down");
        assert_eq!(
            number(&head, chunk[3], "bytes"),
            f64_at(&intervals[i], "/sum_bidir_reverse/bytes")
        );
    }

    let out = client(port, &["-t", "2", "-u", "-b", "5M", "--json-stream"]);
    assert!(out.status.success(), "{}", show(&out));
    let lines_path = dir.join("udp.jsonl");
    std::fs::write(&lines_path, &out.stdout).unwrap();
    let csv_path = dir.join("udp.csv");
    let conv = netmeter_csv(&[
        lines_path.to_str().unwrap(),
        "-o",
        csv_path.to_str().unwrap(),
    ]);
    assert!(
        conv.status.success() && conv.stdout.is_empty(),
        "{}",
        show(&conv)
    );
    let (head, rows) = table(&std::fs::read_to_string(&csv_path).unwrap());
    let sent: f64 = rows
        .iter()
        .filter(|r| r[0] == "interval" && r[3] != "sum")
        .map(|r| number(&head, r, "packets"))
        .sum();
    let end_sum = rows
        .iter()
        .find(|r| r[0] == "end" && r[3] == "sum" && r[2] == "sender")
        .unwrap();
    assert_eq!(sent, number(&head, end_sum, "packets"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each kind of bad input: exit 1, one line naming the file and what is wrong, and no
/// output file (not even a partial one).
#[test]
fn csv_refuses_bad_inputs() {
    let dir = scratch("bad");
    let good = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/report/testdata/tcp.json"),
    )
    .unwrap();
    let mut no_data: serde_json::Value = serde_json::from_str(&good).unwrap();
    no_data["intervals"] = serde_json::json!([]);
    no_data["end"]["streams"] = serde_json::json!([]);
    let mut failed: serde_json::Value = serde_json::from_str(&good).unwrap();
    failed["error"] = "error - unable to receive parameters from client".into();
    let cases: [(&str, String, &str); 7] = [
        ("empty.json", String::new(), "it is empty"),
        (
            "cut.json",
            good[..good.len() / 3].to_string(),
            "it is truncated JSON",
        ),
        ("text.json", "this is not json\n".into(), "it is not JSON"),
        (
            "other.json",
            "{\"name\": \"x\"}".into(),
            "it is not a netmeter or iperf3 result",
        ),
        (
            "nodata.json",
            no_data.to_string(),
            "it holds no measurements",
        ),
        (
            "failed.json",
            failed.to_string(),
            "the test it records failed: error - unable",
        ),
        (
            "cut.jsonl",
            "{\"event\":\"start\",\"data\":{}}\n{\"event\":\"interval\",\"da".into(),
            "line 2 is cut short",
        ),
    ];
    for (name, content, want) in cases {
        let input = dir.join(name);
        std::fs::write(&input, content).unwrap();
        let output = dir.join(format!("{name}.csv"));
        let out = netmeter_csv(&[input.to_str().unwrap(), "-o", output.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", show(&out));
        assert!(
            err.contains(&format!("cannot use {}: ", input.display())),
            "{err}"
        );
        assert!(err.contains(want), "{name}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{name}: {err}");
        assert!(out.stdout.is_empty(), "{name}");
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".csv"))
            .collect();
        assert!(left.is_empty(), "{name}: left {left:?}");
    }
    let missing = dir.join("missing.json");
    let out = netmeter_csv(&[missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read it"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A result file over the documented limit (1 GiB) is refused before it is read, in
/// one sentence, by every command that reads results. (The file is sparse: it takes no
/// disk and no time to make.)
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn result_files_over_the_size_limit_are_refused() {
    let dir = scratch("huge");
    let huge = dir.join("huge.json");
    let f = std::fs::File::create(&huge).unwrap();
    f.set_len((1 << 30) + 1).unwrap();
    drop(f);
    let h = huge.to_str().unwrap();
    let out_svg = dir.join("o.svg");
    let out_html = dir.join("o.html");
    let out_csv = dir.join("o.csv");
    for args in [
        vec!["csv", h, "-o", out_csv.to_str().unwrap()],
        vec!["plot", h, "-o", out_svg.to_str().unwrap()],
        vec!["report", h, "-o", out_html.to_str().unwrap()],
        vec!["compare", h, h],
    ] {
        let out = run(
            Command::new(netmeter()).args(&args),
            Duration::from_secs(20),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", show(&out));
        assert!(
            err.contains(&format!(
                "cannot use {h}: it has 1073741825 bytes, more than the 1073741824 bytes (1 GiB) a result file may have"
            )),
            "{args:?}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The real iperf3 3.18 and 3.22 write `--json-stream` lines and a `-J` document of a
/// UDP and a TCP test; `netmeter csv` reads both, and the stream rows carry the bytes
/// iperf3 wrote.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs the iperf3 peers"
)]
fn csv_of_real_iperf3_results() {
    let dir = scratch("iperf3");
    for key in ["NETMETER_IPERF3_318", "NETMETER_IPERF3_322"] {
        let bin = peer(key);
        for (proto, extra) in [("tcp", &["-P", "2"][..]), ("udp", &["-u", "-b", "5M"][..])] {
            for (form, flag) in [("jsonl", "--json-stream"), ("json", "-J")] {
                let port = free_port().to_string();
                let srv = Proc::spawn(
                    "iperf3 server",
                    Command::new(&bin).args(["-s", "-1", "-B", "127.0.0.1", "-p", &port]),
                );
                // Its listening socket (a probe connection would be its one test).
                await_tcp_listening(srv.pid(), port.parse().expect("port"));
                let out = run_bounded(
                    Command::new(&bin)
                        .args(["-c", "127.0.0.1", "-p", &port, "-t", "2", flag])
                        .args(extra),
                    Duration::from_secs(30),
                    "iperf3 client",
                );
                drop(srv);
                assert!(out.status.success(), "{key} {proto}: {}", show(&out));
                let path = dir.join(format!("{key}-{proto}.{form}"));
                std::fs::write(&path, &out.stdout).unwrap();
                // The intervals' bytes, as iperf3 wrote them.
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                let intervals: Vec<serde_json::Value> = if form == "json" {
                    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                    v["intervals"].as_array().unwrap().clone()
                } else {
                    text.lines()
                        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
                        .filter(|e| e["event"] == "interval")
                        .map(|e| e["data"].clone())
                        .collect()
                };
                let want: Vec<f64> = intervals
                    .iter()
                    .flat_map(|iv| iv["streams"].as_array().unwrap().clone())
                    .map(|s| f64_at(&s, "/bytes"))
                    .collect();
                let conv = netmeter_csv(&[path.to_str().unwrap()]);
                assert!(
                    conv.status.success(),
                    "{key} {proto} {form}: {}",
                    show(&conv)
                );
                let (head, rows) = table(&String::from_utf8_lossy(&conv.stdout));
                let got: Vec<f64> = rows
                    .iter()
                    .filter(|r| r[0] == "interval" && r[3] != "sum")
                    .map(|r| number(&head, r, "bytes"))
                    .collect();
                assert_eq!(got, want, "{key} {proto} {form}");
                assert!(rows.iter().any(|r| r[0] == "end"), "{key} {proto} {form}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Run `netmeter -c 127.0.0.1 -p PORT ARGS` with a pseudo-terminal as its standard
/// output (util-linux `script`, in every Debian system); what the terminal received.
fn client_on_a_terminal(port: u16, args: &[&str]) -> String {
    let (ok, tty) = client_on_a_terminal_status(port, args);
    assert!(ok, "{args:?}: {tty:?}");
    tty
}

/// [`client_on_a_terminal`] whatever the exit status: (success, terminal output).
fn client_on_a_terminal_status(port: u16, args: &[&str]) -> (bool, String) {
    on_a_terminal(&format!(
        "{} -c 127.0.0.1 -p {port} {}",
        netmeter(),
        args.join(" ")
    ))
}

/// Run a shell command line on a pseudo-terminal (`script`): (success, what it drew).
fn on_a_terminal(cmd: &str) -> (bool, String) {
    let out = run_bounded(
        // indicatif (rightly) draws nothing on a dumb terminal (TERM unset or "dumb", as
        // under CI): the terminal here is a capable one.
        Command::new("script")
            .args(["-qfec", cmd, "/dev/null"])
            .env("TERM", "xterm-256color"),
        Duration::from_secs(60),
        "netmeter under script",
    );
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The status line's marks: a line redrawn in place (carriage return + erase line) with
/// the elapsed/total time.
fn has_status_line(terminal: &str, total: &str) -> bool {
    terminal.contains("\r\x1b[2K") && terminal.contains(&format!("/{total} s  "))
}

/// `-i 0` on a terminal: the status line is drawn and redrawn while the test runs, and
/// erased before the summary, which is iperf3's.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn progress_line_on_a_terminal_with_i0() {
    let port = free_port();
    let (_srv, _log) = netmeter_server(port, &[]);
    let tty = client_on_a_terminal(port, &["-t", "2", "-i", "0"]);
    assert!(has_status_line(&tty, "2.0"), "{tty:?}");
    assert!(tty.contains("Gbits/sec") || tty.contains("Mbits/sec"));
    let updates = tty.matches("/2.0 s  ").count();
    assert!(updates >= 2, "{updates} updates: {tty:?}");
    // The summary starts on a clean line, after the last erase.
    let after = &tty[tty.rfind("\x1b[2K").unwrap()..];
    assert!(
        after.contains("sender") && after.contains("receiver"),
        "{tty:?}"
    );
    assert!(!after.contains("/2.0 s"), "{tty:?}");
    // No interval lines: the renderer saw a -i 0 test.
    assert!(!tty.contains("0.00-0.50"), "{tty:?}");

    // UDP, received here (-R): the line has loss and jitter.
    let tty = client_on_a_terminal(port, &["-t", "2", "-i", "0", "-u", "-b", "10M", "-R"]);
    assert!(
        has_status_line(&tty, "2.0") && tty.contains(" loss "),
        "{tty:?}"
    );
}

/// Never without a terminal, nor with interval lines, -J, --csv or --logfile.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn no_progress_line_when_piped_or_not_text() {
    let port = free_port();
    let (_srv, _log) = netmeter_server(port, &[]);
    let out = client(port, &["-t", "2", "-i", "0"]);
    assert!(out.status.success(), "{}", show(&out));
    let piped = String::from_utf8_lossy(&out.stdout);
    assert!(
        !piped.contains('\r') && !piped.contains('\x1b'),
        "{piped:?}"
    );
    assert!(piped.contains("receiver"), "{piped:?}");

    let dir = scratch("progress");
    let log = dir.join("log.txt");
    let log_arg = format!("--logfile={}", log.display());
    for args in [
        &["-t", "2"][..],
        &["-t", "2", "-i", "0", "-J"],
        &["-t", "2", "-i", "0", "--json-stream"],
        &["-t", "2", "-i", "0", "--csv"],
        &["-t", "2", "-i", "0", &log_arg],
    ] {
        let tty = client_on_a_terminal(port, args);
        assert!(
            !tty.contains("\x1b[2K") && !tty.contains("/2.0 s"),
            "{args:?}: {tty:?}"
        );
    }
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("receiver") && !logged.contains('\x1b'),
        "{logged:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--loopback -i 0` on a terminal: each of its two tests has the status line.
#[test]
fn progress_line_for_loopback() {
    let (ok, tty) = on_a_terminal(&format!("{} --loopback -i 0 -t 1", netmeter()));
    assert!(ok, "{tty:?}");
    let (tcp, udp) = tty.split_once("UDP test").expect("two tests");
    assert!(has_status_line(tcp, "1.0"), "{tcp:?}");
    assert!(has_status_line(udp, "1.0"), "{udp:?}");
    assert_eq!(tty.matches("  receiver\r\n").count(), 2, "{tty:?}");
}

/// `--find-max-rate` on a terminal: each trial shows its step and offered rate.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn progress_line_for_find_max_rate() {
    let port = free_port();
    let (_srv, _log) = netmeter_server(port, &[]);
    // Whether a rate passes depends on the machine; the status line does not.
    let (_, tty) = client_on_a_terminal_status(port, &["--find-max-rate", "-t", "1", "-b", "2G"]);
    assert!(has_status_line(&tty, "1.0"), "{tty:?}");
    assert!(
        tty.contains("step  1: offered 2.00 Gbits/sec/stream  0.5/1.0 s"),
        "{tty:?}"
    );
    assert!(
        tty.contains("Maximum rate with loss") || tty.contains("No rate tried"),
        "{tty:?}"
    );
}
