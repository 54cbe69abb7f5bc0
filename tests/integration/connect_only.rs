//! TCP connection rate (`--connect-only`) end to end over loopback: the counts agree
//! everywhere they appear, handshake times are plausible, the server keeps serving
//! (other clients, ordinary tests) while and after it runs, and a plain iperf3 server
//! gives a clear error.

use crate::support::*;
use std::io::Read;
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Checks that hold for any connect-only client report; returns the total.
fn check_consistent(v: &serde_json::Value, streams: usize) -> f64 {
    let c = &v["end"]["netmeter"]["connect_only"];
    let n = f(&c["connections"]);
    let secs = f(&c["seconds"]);
    assert!(n > 0.0, "no connections: {c}");
    assert_eq!(c["streams"], streams as u64);
    assert!((f(&c["connections_per_second"]) - n / secs).abs() <= 1e-6 * n / secs);
    // Intervals: per-stream rows add up to the [SUM] row, and the rows to the total.
    let mut per_interval = 0.0;
    for iv in v["intervals"].as_array().unwrap() {
        let rows: Vec<f64> = iv["streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| f(&r["netmeter"]["connections"]))
            .collect();
        assert_eq!(rows.len(), streams);
        let sum = f(&iv["sum"]["netmeter"]["connections"]);
        assert_eq!(rows.iter().sum::<f64>(), sum, "{iv}");
        for r in iv["streams"].as_array().unwrap() {
            let x = &r["netmeter"];
            if f(&x["connections"]) > 0.0 {
                assert_eq!(x["connect"]["count"], x["connections"]);
            }
        }
        per_interval += sum;
    }
    assert_eq!(per_interval, n);
    // Histograms hold every connection.
    let hist: f64 = c["connect_histogram_us"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| f(&b[1]))
        .sum();
    assert_eq!(hist, n);
    assert_eq!(f(&c["connect"]["count"]), n);
    assert_eq!(f(&c["transaction"]["count"]), n);
    let h = |k: &str| f(&c["connect"][k]);
    assert!(h("min_ms") <= h("p50_ms") && h("p50_ms") <= h("p99_ms") && h("p99_ms") <= h("max_ms"));
    assert!(
        h("p50_ms") < 5.0,
        "loopback handshake p50 {} ms",
        h("p50_ms")
    );
    // A transaction contains its handshake.
    assert!(f(&c["transaction"]["p50_ms"]) >= h("p50_ms"));
    n
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn loopback_counts_agree_and_the_server_serves_on() {
    let port = free_port();
    let (_srv, srv_out) = netmeter_server(port, &[]);
    let out = client(port, &["-t", "2", "-J", "--connect-only"]);
    assert!(out.status.success(), "{}", show(&out));
    let v = json_of(&out, "client");
    let n = check_consistent(&v, 1);
    assert_eq!(v["end"]["netmeter"]["connect_only"]["failed"], 0);
    assert!(
        v["start"]["netmeter"]["features"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "connect_only")
    );
    // The server answered at least every connection the client counted (the client
    // drops the few still in flight when the test ends).
    assert!(srv_out.wait_for("Connect-only: answered", 1, Duration::from_secs(5)));
    let text = srv_out.text();
    let answered: f64 = text
        .split("Connect-only: answered ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(answered >= n && answered <= n + 8.0, "{answered} vs {n}");
    // An ordinary test right after, on the same server.
    let out = client(port, &["-t", "1", "-J"]);
    assert!(out.status.success(), "{}", show(&out));
    let v = json_of(&out, "client");
    assert!(num(&v, "end.sum_received.bytes") > 0.0);
}

#[test]
fn two_streams() {
    let port = free_port();
    let (_srv, _out) = netmeter_server(port, &["-1"]);
    let out = client(port, &["-t", "2", "-J", "-P", "2", "--connect-only"]);
    assert!(out.status.success(), "{}", show(&out));
    check_consistent(&json_of(&out, "client"), 2);
}

#[test]
fn text_report() {
    let port = free_port();
    let (_srv, _out) = netmeter_server(port, &["-1"]);
    let out = client(port, &["-t", "1", "--connect-only"]);
    assert!(out.status.success(), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(" conn/s  connect min/avg/p99/max ")
            && text.contains("Connect-only: ")
            && text.contains("Handshake (connect) (ms): min"),
        "{text}"
    );
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn the_server_stays_available_during_a_test() {
    // While a connect-only test owns the listener, other connections are handed to the
    // ordinary path: a silent one holds nothing, and a second client is told at once
    // that the server is busy (--max-tests 1), not left hanging.
    let port = free_port();
    let (_srv, log) = netmeter_server(port, &[]);
    let mut first = Proc::spawn(
        "connect-only client",
        Command::new(netmeter()).args([
            "-c",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            "6",
            "-J",
            "--connect-only",
        ]),
    );
    // Evidence that the connect-only test runs: the server accepted its control
    // connection (its connect rows follow).
    log.await_since(0, "Accepted connection from", 1, "the server");
    let mut silent = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let busy = client(port, &["-t", "1"]);
    assert_eq!(busy.status.code(), Some(1), "{}", show(&busy));
    assert!(
        String::from_utf8_lossy(&busy.stderr).contains("busy"),
        "{}",
        show(&busy)
    );
    // Told at once, by the server's own account rather than a stopwatch: the silent
    // connection is still open (the server gives it 5 s for its cookie, and would have
    // closed it had it waited on it first) and the first test still runs.
    silent.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    assert!(
        matches!(silent.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the silent connection was already closed: the busy answer waited for it"
    );
    silent.set_nonblocking(false).unwrap();
    assert!(
        first.alive(),
        "the connect-only test ended before the busy answer"
    );
    let out = first.wait(Duration::from_secs(30));
    assert!(out.status.success(), "{}", show(&out));
    check_consistent(&json_of(&out, "client"), 1);
    // The silent connection is dropped after the cookie timeout.
    silent
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut b = [0u8; 1];
    assert!(matches!(silent.read(&mut b), Ok(0) | Err(_)));
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs the peers of scripts/setup-peers.sh"
)]
fn against_iperf3_is_a_clear_error() {
    assert_needs_netmeter_server("NETMETER_IPERF3_312", &["--connect-only"]);
}

#[test]
fn bad_flag_combinations() {
    for args in [
        vec!["--connect-only", "-u"],
        vec!["--connect-only", "-R"],
        vec!["--connect-only", "--bidir"],
        vec!["--connect-only", "--bounceback"],
        vec!["--connect-only", "-n", "1M"],
    ] {
        let err = usage_error(&args);
        assert!(
            err.contains("--connect-only cannot be combined"),
            "{args:?}: {err}"
        );
    }
}
