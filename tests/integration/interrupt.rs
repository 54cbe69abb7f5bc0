//! `-t 0` (until interrupted), Ctrl-C and friends, end to end: a process is sent a
//! signal by its PID mid-test, and what it printed, its exit status and the peer's
//! state afterwards are checked — against netmeter and iperf3 3.22 peers.
//!
//! iperf3 3.22 on SIGINT/SIGTERM/SIGHUP (observed on loopback): the client prints the
//! partial summary and `iperf3: interrupt - the client has terminated by signal
//! Interrupt(2)`, exits 0 (3.18 and older exit 1), and
//! tells the server (CLIENT_TERMINATE), whose session ends while it keeps serving; with
//! `-J` the document has `start`, `intervals`, `end` and `error`; with `--json-stream`
//! the last events are `error` then `end`. A server that is interrupted sends
//! SERVER_TERMINATE; its client prints its figures and `error - the server has
//! terminated`.

use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Send `sig` (INT, TERM, HUP) to one process by its PID.
fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .args(["-s", sig, &pid.to_string()])
        .status()
        .expect("kill");
    assert!(st.success(), "kill -s {sig} {pid} failed");
}

/// How long an interrupted process may take to stop before the test fails: it bounds a
/// failure (a process that ignores the signal), not the speed of a busy host.
const STOP_BOUND: Duration = Duration::from_secs(30);

/// Start a netmeter client `-c 127.0.0.1 -p PORT ARGS`, wait until `log` (the output
/// of the server it talks to) shows interval rows reaching `secs` of this test, send
/// the client `sig`, and return its output (it must stop within [`STOP_BOUND`]). The
/// server's own rows are the evidence that the test has run that long: a client spawned
/// on a busy host can take seconds to connect, so a fixed pause proves nothing.
fn interrupt_client(port: u16, args: &[&str], log: &Drained, secs: f64, sig: &str) -> Output {
    log.await_between_tests("the server");
    let mark = log.mark();
    let c = Proc::spawn(
        "netmeter client",
        Command::new(netmeter())
            .args(["-c", "127.0.0.1", "-p", &port.to_string()])
            .args(args),
    );
    log.await_interval_end(mark, secs, "the server");
    signal(c.pid(), sig);
    c.wait_bounded(STOP_BOUND)
}

/// A long-running netmeter server (not `-1`): it must survive its clients' interrupts.
fn server() -> (Proc, Drained, u16) {
    let port = free_port();
    let (p, d) = netmeter_server(port, &[]);
    (p, d, port)
}

/// The server finishes a normal 1 s test after the interrupted one.
fn assert_still_serving(port: u16, log: &Drained) {
    log.await_between_tests("the server");
    let out = run(
        Command::new(netmeter()).args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1"]),
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "next test failed: {}\nserver:\n{}",
        show(&out),
        log.text()
    );
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// An interrupted test's summary must end where its interval rows do: the same process
/// read the same clock for both when it stopped. The last, partial row is printed
/// when it is at least a tenth of the 1 s interval (`Accountant::worth_reporting`), so
/// the summary is at most that past the last row. `secs` is the summary's seconds,
/// `last_row_end` the furthest row's end; `what` names the case.
fn assert_summary_ends_with_rows(secs: f64, last_row_end: f64, what: &str) {
    assert!(
        secs >= 2.0,
        "{what}: the summary covers {secs} s, but the server had counted 3 s before the \
         interrupt (-t 0 ran as a zero-second test?)"
    );
    assert!(
        secs <= last_row_end + 0.1 + 0.015,
        "{what}: the summary covers {secs} s, the interval rows end at {last_row_end} s"
    );
}

/// Seconds of the summary line ending in `role` (e.g. `0.00-2.31` → 2.31).
fn summary_seconds(text: &str, role: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.trim_end().ends_with(role) && l.contains("sec"))
        .unwrap_or_else(|| panic!("no {role} summary line in:\n{text}"));
    let span = line
        .split_whitespace()
        .find(|w| w.starts_with("0.00-"))
        .unwrap_or_else(|| panic!("no interval in {line}"));
    span[5..].parse().expect("seconds")
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn ctrl_c_on_a_t0_client_prints_the_partial_summary_and_the_server_serves_on() {
    let (_srv, log, port) = server();
    let out = interrupt_client(port, &["-t", "0", "-b", "200M"], &log, 3.0, "INT");
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let text = stdout(&out);
    // -t 0 ran until the interrupt, not zero seconds.
    let secs = summary_seconds(&text, "sender");
    let rows = text.split("- - -").next().unwrap_or("");
    let intervals = rows.lines().filter(|l| l.contains(" sec ")).count();
    assert!(intervals >= 2, "{intervals} interval lines:\n{text}");
    let last = last_interval_end_s(rows).unwrap_or(0.0);
    assert_summary_ends_with_rows(secs, last, &text);
    assert_eq!(
        stderr(&out).trim(),
        "netmeter: interrupt - the client has terminated by signal Interrupt(2)",
        "{}",
        show(&out)
    );
    // The server heard CLIENT_TERMINATE: one line, its own partial summary, no error.
    assert!(
        log.wait_for("stopped: the client has terminated", 1, EVIDENCE_TIMEOUT),
        "{}",
        log.text()
    );
    assert!(!log.text().contains("error"), "{}", log.text());
    assert_still_serving(port, &log);
}

/// A paced UDP sender that the system did not run for a while says how far behind its
/// `-b` schedule it fell. Truth: the sender's process is stopped (SIGSTOP) for at least
/// 50 ms, so it owes at least that much when it runs again; what it owes is capped at the
/// pacer's bucket plus its catch-up window, 10 + 100 ms. Once the client sends (its own
/// figure), once the server (`-R`, the figure from its results).
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn a_stopped_paced_sender_reports_how_far_behind_it_fell() {
    let (srv, log, port) = server();
    for reverse in [false, true] {
        // -t 4: the stop comes once the first interval row is out, seconds before the end.
        let mut args = vec!["-u", "-b", "20M", "-t", "4", "-J"];
        if reverse {
            args.push("-R");
        }
        log.await_between_tests("the server");
        let mark = log.mark();
        let c = Proc::spawn(
            "netmeter client",
            Command::new(netmeter())
                .args(["-c", "127.0.0.1", "-p", &port.to_string()])
                .args(&args),
        );
        // Evidence that the sender is sending: the server's first interval row.
        log.await_interval_end(mark, 1.0, "the server");
        let sender = if reverse { srv.pid() } else { c.pid() };
        let stopped = Instant::now();
        signal(sender, "STOP");
        // Not a synchronisation: the fault itself, the truth the figure is judged by
        // (the process stays stopped at least this long).
        std::thread::sleep(Duration::from_millis(50));
        signal(sender, "CONT");
        let held = stopped.elapsed().as_secs_f64() * 1e3;
        let out = c.wait_bounded(STOP_BOUND);
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let key = if reverse {
            "remote_pacing_lag_ms"
        } else {
            "local_pacing_lag_ms"
        };
        let lag = v["end"]["netmeter"][key]
            .as_f64()
            .unwrap_or_else(|| panic!("no {key}: {}", show(&out)));
        eprintln!("{key}: {lag} ms after a stop of {held:.1} ms");
        // At least the stop; at most the stop plus a generous allowance for this
        // busy machine's scheduling (the pacer owes up to its 10 ms bucket plus 1 s).
        assert!(
            (50.0..=held + 500.0).contains(&lag),
            "{key} {lag} ms, the sender was stopped for {held:.1} ms"
        );
        // The other side sent nothing, so it has no such figure.
        let other = if reverse {
            "local_pacing_lag_ms"
        } else {
            "remote_pacing_lag_ms"
        };
        assert!(v["end"]["netmeter"][other].is_null(), "{other}");
    }
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn ctrl_c_with_json_writes_the_whole_document() {
    let (_srv, log, port) = server();
    for args in [
        &["-t", "0", "-J", "-R"][..],
        &["-t", "0", "-J", "-u", "-b", "20M", "-P", "2"][..],
    ] {
        let out = interrupt_client(port, args, &log, 3.0, "INT");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", show(&out));
        let v: Value = json_of(&out, "client");
        assert_eq!(
            v["error"], "interrupt - the client has terminated by signal Interrupt(2)",
            "{args:?}"
        );
        assert_eq!(num(&v, "start.test_start.duration"), 0.0, "{args:?}");
        let ivs = v["intervals"].as_array().expect("intervals");
        assert!(ivs.len() >= 2, "{args:?}: {} intervals", ivs.len());
        let sum = if args.contains(&"-R") {
            "end.sum_received"
        } else {
            "end.sum_sent"
        };
        assert!(num(&v, &format!("{sum}.bytes")) > 0.0, "{args:?}: {v}");
        let secs = num(&v, &format!("{sum}.seconds"));
        let last = ivs.iter().map(|iv| num(iv, "sum.end")).fold(0.0, f64::max);
        assert_summary_ends_with_rows(secs, last, &format!("{args:?}"));
        assert!(
            v["end"]["streams"]
                .as_array()
                .is_some_and(|s| !s.is_empty()),
            "{args:?}"
        );
    }
    assert_still_serving(port, &log);
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn sigterm_and_sighup_end_a_json_stream_with_error_then_end() {
    let (_srv, log, port) = server();
    for (sig, args) in [
        ("TERM", &["-t", "0", "--json-stream", "--bidir"][..]),
        ("HUP", &["-t", "0", "--json-stream", "-u", "-b", "10M"][..]),
    ] {
        let out = interrupt_client(port, args, &log, 2.0, sig);
        assert_eq!(out.status.code(), Some(0), "{sig}: {}", show(&out));
        let events: Vec<Value> = stdout(&out)
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON event per line"))
            .collect();
        let names: Vec<&str> = events
            .iter()
            .map(|e| e["event"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(names.first(), Some(&"start"), "{sig}: {names:?}");
        assert!(names.contains(&"interval"), "{sig}: {names:?}");
        assert_eq!(
            &names[names.len() - 2..],
            ["error", "end"],
            "{sig}: {names:?}"
        );
        assert_eq!(
            events[events.len() - 2]["data"],
            format!(
                "interrupt - the client has terminated by signal {}",
                if sig == "TERM" {
                    "Terminated(15)"
                } else {
                    "Hangup(1)"
                }
            ),
            "{sig}"
        );
    }
    assert_still_serving(port, &log);
}

#[test]
fn an_interrupted_server_tells_its_client_and_exits() {
    let (mut srv, log, port) = server();
    let c = Proc::spawn(
        "netmeter client",
        Command::new(netmeter()).args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "0"]),
    );
    log.await_interval_end(0, 2.0, "the server");
    signal(srv.pid(), "INT");
    let out = c.wait_bounded(STOP_BOUND);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        stderr(&out).contains("netmeter: error - the server has terminated"),
        "{}",
        show(&out)
    );
    let secs = summary_seconds(&stdout(&out), "sender");
    assert!(secs >= 1.0, "{}", show(&out));
    await_evidence(
        "the interrupted server's exit",
        || !srv.alive(),
        || log.text(),
    );
    let code = srv
        .child
        .as_mut()
        .and_then(|c| c.wait().ok())
        .and_then(|s| s.code());
    assert_eq!(code, Some(0), "{}", log.text());
    assert!(
        log.wait_for(
            "netmeter: interrupt - the server has terminated",
            1,
            EVIDENCE_TIMEOUT
        ),
        "{}",
        log.text()
    );
    assert!(
        log.text().contains("receiver"),
        "partial summary: {}",
        log.text()
    );
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs the peers of scripts/setup-peers.sh"
)]
fn an_iperf3_client_interrupted_against_a_netmeter_server() {
    let (_srv, log, port) = server();
    let mark = log.mark();
    let c = Proc::spawn(
        "iperf3 3.22 client",
        Command::new(peer("NETMETER_IPERF3_322")).args([
            "-c",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            "0",
            "-b",
            "100M",
        ]),
    );
    log.await_interval_end(mark, 3.0, "the server");
    signal(c.pid(), "INT");
    let out = c.wait_bounded(STOP_BOUND);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    // Against the old code the session ended at 0 s (time 0 = a zero-second test).
    assert!(
        summary_seconds(&stdout(&out), "sender") >= 2.0,
        "{}",
        show(&out)
    );
    assert!(
        log.wait_for("stopped: the client has terminated", 1, EVIDENCE_TIMEOUT),
        "{}",
        log.text()
    );
    assert!(
        summary_seconds(&log.text(), "receiver") >= 2.0,
        "{}",
        log.text()
    );
    assert_still_serving(port, &log);
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs the peers of scripts/setup-peers.sh"
)]
fn a_netmeter_client_interrupted_against_an_iperf3_server() {
    let port = free_port();
    // Its banner and interval rows, flushed line by line (--forceflush), are the
    // evidence this test waits on.
    let (mut srv, log) = iperf3_server_ready("NETMETER_IPERF3_322", port, &[]);
    let out = interrupt_client(
        port,
        &["-t", "0", "-R", "-u", "-b", "20M"],
        &log,
        3.0,
        "INT",
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        summary_seconds(&stdout(&out), "receiver") >= 2.0,
        "{}",
        show(&out)
    );
    assert!(
        stderr(&out).contains("interrupt - the client has terminated"),
        "{}",
        show(&out)
    );
    // iperf3's server got CLIENT_TERMINATE (it says so) and serves the next test.
    assert!(
        log.wait_for("the client has terminated", 1, EVIDENCE_TIMEOUT),
        "{}",
        log.text()
    );
    assert!(srv.alive(), "{}", log.text());
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn ctrl_c_ends_find_max_rate_with_the_best_rate_so_far() {
    let (_srv, log, port) = server();
    // Against a netmeter server the first trial runs twice (again with one-way delay),
    // and its step line is printed before the next trial connects: the server's third
    // accepted control connection is the evidence that step 1 is out.
    let c = Proc::spawn(
        "netmeter client",
        Command::new(netmeter()).args([
            "-c",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "--find-max-rate",
            "-t",
            "1",
            "-b",
            "10M",
        ]),
    );
    log.await_since(0, "Accepted connection from", 3, "the server");
    signal(c.pid(), "INT");
    let out = c.wait_bounded(STOP_BOUND);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let text = stdout(&out);
    assert!(text.contains("step  1:"), "{text}");
    assert!(text.contains("Search interrupted"), "{text}");
    // The best rate so far is what the recorded steps say: a passing step's rate, or,
    // when the host was too busy for the sender to keep up with any (a step's FAIL
    // says so), that no rate passed.
    let passed = text
        .lines()
        .any(|l| l.starts_with("step ") && l.trim_end().ends_with("pass"));
    if passed {
        assert!(text.contains("Maximum rate with loss"), "{text}");
    } else {
        assert!(
            text.contains("No rate tried kept the loss within"),
            "{text}"
        );
    }
    assert!(stderr(&out).contains("interrupt - the client has terminated"));
    assert_still_serving(port, &log);
}

#[test]
fn ctrl_c_ends_loopback_cleanly() {
    let c = Proc::spawn(
        "netmeter --loopback",
        Command::new(netmeter()).args(["--loopback", "-t", "0"]),
    )
    .watch();
    // netmeter writes its text line by line, piped too: its own rows are the evidence.
    c.out.await_interval_end(0, 2.0, "netmeter --loopback");
    signal(c.pid(), "INT");
    let out = c.finish(STOP_BOUND);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        summary_seconds(&stdout(&out), "sender") >= 1.0,
        "{}",
        show(&out)
    );
    assert!(stderr(&out).contains("interrupt - the client has terminated"));
}

/// Wait (bounded by [`EVIDENCE_TIMEOUT`]) until `path` exists (`true`) or is gone
/// (`false`).
fn wait_file(path: &Path, exists: bool) -> bool {
    let deadline = Instant::now() + EVIDENCE_TIMEOUT;
    while path.exists() != exists {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

fn pidfile(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("netmeter-{}-{name}.pid", std::process::id()))
}

#[test]
fn the_pid_file_is_removed_on_sigterm_and_sigint() {
    for sig in ["TERM", "INT"] {
        let path = pidfile(&format!("fg-{sig}"));
        let port = free_port();
        let (mut srv, log) =
            netmeter_server(port, &["-I", path.to_str().expect("utf-8 temp path")]);
        assert!(wait_file(&path, true), "no pid file: {}", log.text());
        signal(srv.pid(), sig);
        let gone = wait_file(&path, false);
        let _ = std::fs::remove_file(&path);
        assert!(gone, "{sig}: the pid file stayed behind: {}", log.text());
        await_evidence(
            &format!("the server's exit on SIG{sig}"),
            || !srv.alive(),
            || log.text(),
        );
    }
}

#[test]
fn a_daemon_removes_its_pid_file_on_sigterm() {
    let path = pidfile("daemon");
    let port = free_port().to_string();
    let out = run(
        Command::new(netmeter()).args([
            "-s",
            "-D",
            "-B",
            "127.0.0.1",
            "-p",
            &port,
            "-I",
            path.to_str().expect("utf-8 temp path"),
        ]),
        Duration::from_secs(10),
    );
    assert!(out.status.success(), "{}", show(&out));
    assert!(wait_file(&path, true), "the daemon wrote no pid file");
    // The file appears (created) a moment before the pid is written into it.
    let deadline = Instant::now() + EVIDENCE_TIMEOUT;
    let pid: u32 = loop {
        let text = std::fs::read_to_string(&path).expect("pid file");
        match text.trim().parse() {
            Ok(pid) => break pid,
            Err(e) if Instant::now() >= deadline => {
                panic!("no pid in the pid file ({e}): {text:?}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    // The daemon is the process we started (forked by daemon(3)); stop it by its PID.
    signal(pid, "TERM");
    let gone = wait_file(&path, false);
    if !gone {
        // Clean up after a failure: the daemon may or may not still run.
        let _ = Command::new("kill")
            .args(["-s", "KILL", &pid.to_string()])
            .status();
        let _ = std::fs::remove_file(&path);
    }
    assert!(gone, "the daemon's pid file stayed behind after SIGTERM");
    let deadline = Instant::now() + EVIDENCE_TIMEOUT;
    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "daemon still running"
    );
}
