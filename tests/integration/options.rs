//! iperf3 3.22's remaining options (issue 10): output (`--timestamps`, `--forceflush`,
//! `--json-stream-full-output`), socket options, server limits, SCTP, `-F`, MPTCP. Each
//! test judges the option by its effect (the peer's JSON, the kernel's view of the
//! socket, the bytes that arrived), against netmeter and, where it has the option,
//! iperf3 3.22 (and 3.18/3.12).

use crate::support::*;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn timestamps_start_every_text_line_with_the_time() {
    let port = free_port();
    let (_srv, _) = netmeter_server(port, &[]);
    let before = now_secs();
    let out = client(port, &["-t", "1", "--timestamps=%s|"]);
    let after = now_secs();
    assert!(out.status.success(), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() > 5, "{text}");
    for l in &lines {
        let (stamp, rest) = l
            .split_once('|')
            .unwrap_or_else(|| panic!("no stamp: {l:?}"));
        let t: u64 = stamp.parse().unwrap_or_else(|_| panic!("stamp {stamp:?}"));
        assert!(
            (before..=after).contains(&t),
            "{t} not in {before}..={after}"
        );
        assert!(!rest.contains('|'), "{l:?}");
    }
    assert!(lines[0].contains("|Connecting to host"), "{text}");
    // The default is iperf3's "%c ": e.g. "Mon Nov 23 00:13:56 2026 Connecting ...".
    let out = client(port, &["-t", "1", "--timestamps"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or("");
    let words: Vec<&str> = first.split_whitespace().collect();
    assert!(
        words.len() > 5
            && ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"].contains(&words[0])
            && words[3].matches(':').count() == 2
            && words[4].len() == 4
            && words[5] == "Connecting",
        "{first:?}"
    );
    // JSON is not stamped (iperf3 stamps only its text).
    let v = client_json(port, &["-t", "1", "--timestamps"]);
    assert!(v["end"].is_object());
}

#[test]
fn timestamps_need_the_equals_sign_like_iperf3() {
    // `--timestamps %T` would make %T the next argument: clap refuses it, as getopt's
    // optional argument does not take a separate word either.
    let out = run(
        Command::new(netmeter()).args(["-c", "127.0.0.1", "--timestamps", "%T"]),
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
}

#[test]
fn forceflush_output_arrives_line_by_line_while_the_test_runs() {
    use std::io::Read;
    let port = free_port();
    let (_srv, _) = netmeter_server(port, &[]);
    let mut p = Proc::spawn(
        "client",
        Command::new(netmeter()).args([
            "-c",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            "4",
            "--forceflush",
        ]),
    );
    let mut stdout = p.child.as_mut().unwrap().stdout.take().unwrap();
    let t0 = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // The first interval line must be readable from the pipe well before the end.
    while !String::from_utf8_lossy(&got).contains("0.00-1.00") {
        let n = stdout.read(&mut buf).unwrap();
        assert!(n > 0, "EOF before the first interval");
        got.extend_from_slice(&buf[..n]);
    }
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert!(
        p.alive(),
        "the test ended before its first interval was read"
    );
}

#[test]
fn json_stream_full_output_ends_with_the_json_document() {
    let port = free_port();
    let (_srv, _) = netmeter_server(port, &[]);
    let out = client(
        port,
        &["-t", "1", "--json-stream", "--json-stream-full-output"],
    );
    assert!(out.status.success(), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let doc_at = text
        .find("\n{\n")
        .expect("a multi-line document after the events")
        + 1;
    for l in text[..doc_at].lines() {
        let e: serde_json::Value = serde_json::from_str(l).unwrap();
        assert!(e["event"].is_string(), "{l}");
    }
    let doc: serde_json::Value = serde_json::from_str(&text[doc_at..]).unwrap();
    assert!(f64_at(&doc, "/end/sum_received/bytes") > 0.0, "{doc}");
    // Without --json-stream the flag changes nothing (iperf3 3.22 prints text too).
    let out = client(port, &["-t", "1", "--json-stream-full-output"]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("Connecting to host"));
}

/// A netmeter client's stderr and exit code against a server, and its `-J` error.
fn refused_by(port: u16, args: &[&str], want: &str) {
    let out = client(port, &[&["-J"], args].concat());
    assert_eq!(out.status.code(), Some(1), "{args:?}: {}", show(&out));
    let v = json_of(&out, "client");
    let err = v["error"].as_str().unwrap_or_default();
    assert!(err.contains(want), "{args:?}: {err}");
}

/// An iperf3 client's `-J` document against a netmeter server.
fn iperf3_client_json(key: &str, port: u16, args: &[&str]) -> serde_json::Value {
    let out = run(
        Command::new(peer(key))
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-J"])
            .args(args),
        Duration::from_secs(60),
    );
    json_of(&out, key)
}

/// An iperf3 server on loopback, its output drained.
fn iperf3_server(key: &str, port: u16, extra: &[&str]) -> (Proc, Drained) {
    let mut p = Proc::spawn(
        key,
        Command::new(peer(key))
            .args(["-s", "-B", "127.0.0.1", "-p", &port.to_string()])
            .args(extra),
    );
    let d = p.drain();
    wait_listening(port);
    (p, d)
}

const DURATION_MSG: &str = "the requested test duration exceeds the server's maximum";
const RATE_MSG: &str = "the requested total bitrate exceeds the server's limit";

#[test]
fn server_max_duration_refuses_long_and_open_ended_tests() {
    let port = free_port();
    let (_srv, log) = netmeter_server(port, &["--server-max-duration", "3"]);
    refused_by(port, &["-t", "4"], DURATION_MSG);
    refused_by(port, &["-t", "2", "-O", "2"], DURATION_MSG);
    refused_by(port, &["-n", "1M"], DURATION_MSG);
    refused_by(port, &["-t", "0"], DURATION_MSG);
    let v = client_json(port, &["-t", "2", "-O", "1"]);
    assert!(f64_at(&v, "/end/sum_received/bytes") > 0.0);
    assert!(
        log.text().contains("this server allows at most 3 s"),
        "{}",
        log.text()
    );
}

#[test]
fn server_bitrate_limit_refuses_and_ends_too_fast_tests() {
    let port = free_port();
    let (_srv, log) = netmeter_server(port, &["--server-bitrate-limit", "100M/1"]);
    // Asked for too much: refused before any data.
    refused_by(port, &["-t", "2", "-b", "60M", "-P", "2"], RATE_MSG);
    refused_by(port, &["-t", "2", "-b", "60M", "--bidir"], RATE_MSG);
    // Unpaced TCP on loopback runs at Gbit/s: ended after the first second's average.
    let t0 = Instant::now();
    refused_by(port, &["-t", "10"], RATE_MSG);
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    assert!(log.wait_for("exceeded this server's limit", 1, Duration::from_secs(5)));
    // Within the limit: the whole test runs.
    let v = client_json(port, &["-t", "2", "-b", "40M", "-P", "2"]);
    let bps = f64_at(&v, "/end/sum_received/bits_per_second");
    assert!((70e6..90e6).contains(&bps), "{bps}");
}

#[test]
#[cfg_attr(not(feature = "full-tests"), ignore = "full tier: needs iperf3 3.22")]
fn server_limits_interoperate_with_iperf3_322() {
    let key = "NETMETER_IPERF3_322";
    // iperf3 client, netmeter server: iperf3's own error text in its JSON.
    let port = free_port();
    let (_srv, _) = netmeter_server(
        port,
        &[
            "--server-max-duration",
            "3",
            "--server-bitrate-limit",
            "100M/1",
        ],
    );
    let v = iperf3_client_json(key, port, &["-t", "5"]);
    assert_eq!(
        v["error"], "client's requested duration exceeds the server's maximum permitted limit",
        "{v}"
    );
    let v = iperf3_client_json(key, port, &["-t", "2", "-b", "60M", "-P", "2"]);
    assert_eq!(
        v["error"],
        "total required bandwidth is larger than server limit"
    );
    let v = iperf3_client_json(key, port, &["-t", "3"]);
    assert_eq!(
        v["error"],
        "total required bandwidth is larger than server limit"
    );
    let v = iperf3_client_json(key, port, &["-t", "2", "-b", "40M", "-P", "2"]);
    assert!(v["error"].is_null(), "{v}");
    let bps = f64_at(&v, "/end/sum_received/bits_per_second");
    assert!((70e6..90e6).contains(&bps), "{bps}");
    // netmeter client, iperf3 server.
    for key in [
        "NETMETER_IPERF3_322",
        "NETMETER_IPERF3_318",
        "NETMETER_IPERF3_312",
    ] {
        let port = free_port();
        let has_max = key == "NETMETER_IPERF3_322";
        let extra: &[&str] = if has_max {
            &[
                "--server-max-duration",
                "3",
                "--server-bitrate-limit",
                "100M/1",
            ]
        } else {
            &["--server-bitrate-limit", "100M/1"]
        };
        let (_srv, _) = iperf3_server(key, port, extra);
        if has_max {
            refused_by(port, &["-t", "5"], DURATION_MSG);
        }
        // 3.12 and 3.18 refuse (and stop) a test over the limit by closing the control
        // connection without an error code (their own client says "control socket has
        // closed unexpectedly"); 3.22 sends IETOTALRATE.
        let asked_too_much = if has_max {
            RATE_MSG
        } else {
            "closed the control connection"
        };
        refused_by(port, &["-t", "2", "-b", "60M", "-P", "2"], asked_too_much);
        refused_by(port, &["-t", "3"], asked_too_much);
        let v = client_json(port, &["-t", "2", "-b", "40M", "-P", "2"]);
        let bps = f64_at(&v, "/end/sum_received/bits_per_second");
        assert!((70e6..90e6).contains(&bps), "{key}: {bps}");
    }
}
