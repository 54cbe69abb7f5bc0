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

/// Start a netmeter client `-c 127.0.0.1 -p PORT ARGS`, let it run `after`, send it
/// `sig`, and return its output (it must exit within 10 s).
fn interrupt_client(port: u16, args: &[&str], after: Duration, sig: &str) -> Output {
    let c = Proc::spawn(
        "netmeter client",
        Command::new(netmeter())
            .args(["-c", "127.0.0.1", "-p", &port.to_string()])
            .args(args),
    );
    std::thread::sleep(after);
    signal(c.pid(), sig);
    let started = Instant::now();
    let out = c.wait(Duration::from_secs(10));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the client took {:?} to stop: {}",
        started.elapsed(),
        show(&out)
    );
    out
}

/// A long-running netmeter server (not `-1`): it must survive its clients' interrupts.
fn server() -> (Proc, Drained, u16) {
    let port = free_port();
    let (p, d) = netmeter_server(port, &[]);
    (p, d, port)
}

/// The server finishes a normal 1 s test after the interrupted one.
fn assert_still_serving(port: u16, log: &Drained) {
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
fn ctrl_c_on_a_t0_client_prints_the_partial_summary_and_the_server_serves_on() {
    let (_srv, log, port) = server();
    let out = interrupt_client(
        port,
        &["-t", "0", "-b", "200M"],
        Duration::from_millis(2300),
        "INT",
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let text = stdout(&out);
    // -t 0 ran until the interrupt, not zero seconds.
    let secs = summary_seconds(&text, "sender");
    assert!((2.0..4.0).contains(&secs), "sender ran {secs} s:\n{text}");
    let intervals = text
        .split("- - -")
        .next()
        .unwrap_or("")
        .lines()
        .filter(|l| l.contains(" sec "))
        .count();
    assert!(intervals >= 2, "{intervals} interval lines:\n{text}");
    assert_eq!(
        stderr(&out).trim(),
        "netmeter: interrupt - the client has terminated by signal Interrupt(2)",
        "{}",
        show(&out)
    );
    // The server heard CLIENT_TERMINATE: one line, its own partial summary, no error.
    assert!(
        log.wait_for(
            "stopped: the client has terminated",
            1,
            Duration::from_secs(5)
        ),
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
fn a_stopped_paced_sender_reports_how_far_behind_it_fell() {
    let (srv, _log, port) = server();
    for reverse in [false, true] {
        let mut args = vec!["-u", "-b", "20M", "-t", "2", "-J"];
        if reverse {
            args.push("-R");
        }
        let c = Proc::spawn(
            "netmeter client",
            Command::new(netmeter())
                .args(["-c", "127.0.0.1", "-p", &port.to_string()])
                .args(&args),
        );
        std::thread::sleep(Duration::from_millis(800));
        let sender = if reverse { srv.pid() } else { c.pid() };
        let stopped = Instant::now();
        signal(sender, "STOP");
        std::thread::sleep(Duration::from_millis(50));
        signal(sender, "CONT");
        let held = stopped.elapsed().as_secs_f64() * 1e3;
        let out = c.wait(Duration::from_secs(10));
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
fn ctrl_c_with_json_writes_the_whole_document() {
    let (_srv, log, port) = server();
    for args in [
        &["-t", "0", "-J", "-R"][..],
        &["-t", "0", "-J", "-u", "-b", "20M", "-P", "2"][..],
    ] {
        let out = interrupt_client(port, args, Duration::from_millis(2300), "INT");
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
        assert!((2.0..4.0).contains(&secs), "{args:?}: {secs} s");
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
fn sigterm_and_sighup_end_a_json_stream_with_error_then_end() {
    let (_srv, log, port) = server();
    for (sig, args) in [
        ("TERM", &["-t", "0", "--json-stream", "--bidir"][..]),
        ("HUP", &["-t", "0", "--json-stream", "-u", "-b", "10M"][..]),
    ] {
        let out = interrupt_client(port, args, Duration::from_millis(1600), sig);
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
    std::thread::sleep(Duration::from_millis(1600));
    signal(srv.pid(), "INT");
    let out = c.wait(Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        stderr(&out).contains("netmeter: error - the server has terminated"),
        "{}",
        show(&out)
    );
    let secs = summary_seconds(&stdout(&out), "sender");
    assert!(secs >= 1.0, "{}", show(&out));
    let deadline = Instant::now() + Duration::from_secs(5);
    while srv.alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!srv.alive(), "server still running:\n{}", log.text());
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
            Duration::from_secs(2)
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
    std::thread::sleep(Duration::from_millis(2300));
    signal(c.pid(), "INT");
    let out = c.wait(Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    // Against the old code the session ended at 0 s (time 0 = a zero-second test).
    assert!(
        summary_seconds(&stdout(&out), "sender") >= 2.0,
        "{}",
        show(&out)
    );
    assert!(
        log.wait_for(
            "stopped: the client has terminated",
            1,
            Duration::from_secs(5)
        ),
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
    let mut srv = Proc::spawn(
        "iperf3 3.22 server",
        Command::new(peer("NETMETER_IPERF3_322")).args([
            "-s",
            "-B",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ]),
    );
    let log = srv.drain();
    wait_listening(port);
    let out = interrupt_client(
        port,
        &["-t", "0", "-R", "-u", "-b", "20M"],
        Duration::from_millis(2300),
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
        log.wait_for("the client has terminated", 1, Duration::from_secs(5)),
        "{}",
        log.text()
    );
    assert!(srv.alive(), "{}", log.text());
}

#[test]
fn ctrl_c_ends_find_max_rate_with_the_best_rate_so_far() {
    let (_srv, log, port) = server();
    let out = interrupt_client(
        port,
        &["--find-max-rate", "-t", "1", "-b", "10M"],
        Duration::from_millis(2600),
        "INT",
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let text = stdout(&out);
    assert!(text.contains("step  1:"), "{text}");
    assert!(text.contains("Search interrupted"), "{text}");
    assert!(text.contains("Maximum rate with loss"), "{text}");
    assert!(stderr(&out).contains("interrupt - the client has terminated"));
    assert_still_serving(port, &log);
}

#[test]
fn ctrl_c_ends_loopback_cleanly() {
    let c = Proc::spawn(
        "netmeter --loopback",
        Command::new(netmeter()).args(["--loopback", "-t", "0"]),
    );
    std::thread::sleep(Duration::from_millis(1600));
    signal(c.pid(), "INT");
    let out = c.wait(Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        summary_seconds(&stdout(&out), "sender") >= 1.0,
        "{}",
        show(&out)
    );
    assert!(stderr(&out).contains("interrupt - the client has terminated"));
}

/// Wait (bounded) until `path` exists (`true`) or is gone (`false`).
fn wait_file(path: &Path, exists: bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
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
        let deadline = Instant::now() + Duration::from_secs(5);
        while srv.alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!srv.alive(), "{sig}: server still running");
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
    let deadline = Instant::now() + Duration::from_secs(5);
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
    let deadline = Instant::now() + Duration::from_secs(5);
    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "daemon still running"
    );
}
