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
