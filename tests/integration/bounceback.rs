//! Request/response (`--bounceback`) end to end: TCP and UDP over loopback, the server's
//! hold time as a known truth for the round-trip time, bursts, and the clear error
//! against a plain iperf3 server.

use crate::support::*;
use std::time::Duration;

fn bounce(extra: &[&str]) -> serde_json::Value {
    let out = client_vs_fresh_server(
        &[&["-J", "--bounceback"], extra].concat(),
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", show(&out));
    json_of(&out, "client")
}

#[test]
fn tcp_transactions_and_rtt_figures() {
    let v = bounce(&["-t", "2"]);
    let b = &v["end"]["netmeter"]["bounceback"];
    let n = b["transactions"].as_f64().unwrap();
    let tps = b["transactions_per_second"].as_f64().unwrap();
    let secs = b["seconds"].as_f64().unwrap();
    // How many a second holds is the host's business (thousands when quiet, a hundred
    // at load 50); that each was counted once and timed is the report's.
    assert!(n > 0.0, "no transactions on loopback");
    assert!((tps - n / secs).abs() < 1e-6 * tps);
    // Every interval's transactions add up to the total (nothing counted twice).
    let per_interval: f64 = v["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["sum"]["netmeter"]["transactions"].as_f64().unwrap())
        .sum();
    assert_eq!(per_interval, n);
    // The histogram holds every transaction, and the percentiles are ordered.
    let hist_total: f64 = b["rtt_histogram_us"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[1].as_f64().unwrap())
        .sum();
    assert_eq!(hist_total, n);
    let r = &b["rtt"];
    let f = |k: &str| r[k].as_f64().unwrap();
    assert!(f("min_ms") <= f("p50_ms") && f("p50_ms") <= f("p99_ms") && f("p99_ms") <= f("max_ms"));
    assert_eq!(b["request_bytes"], 100);
    assert_eq!(b["lost"], 0);
}

#[test]
fn server_hold_time_shows_in_rtt() {
    // A 5 ms hold on a sub-millisecond loopback: every RTT is at least 5 ms, and the
    // fastest is nearer one hold than two (a hold applied twice would be 10 ms). The
    // fastest, not the median: a busy host's sleep overshoot and wake-ups stretch most
    // round trips by milliseconds, but not every one of a second's worth.
    let v = bounce(&["-t", "1", "--bounceback-hold", "5"]);
    let r = &v["end"]["netmeter"]["bounceback"]["rtt"];
    let min = r["min_ms"].as_f64().unwrap();
    assert!(min >= 5.0, "min RTT {min} ms is below the 5 ms hold");
    assert!(min < 7.5, "min RTT {min} ms is far above the 5 ms hold");
    // One transaction at a time: at most one per fastest round trip, by the report's
    // own figures (and at least one).
    let bb = &v["end"]["netmeter"]["bounceback"];
    let tps = bb["transactions_per_second"].as_f64().unwrap();
    assert!(
        tps > 0.0 && tps <= 1000.0 / min,
        "{tps} trans/s with a 5 ms hold (fastest round trip {min} ms)"
    );
}

#[test]
fn udp_with_sizes_and_burst() {
    let v = bounce(&[
        "-u",
        "-t",
        "1",
        "--bounceback-request",
        "64",
        "--bounceback-reply",
        "1200",
        "--bounceback-burst",
        "4",
        "-P",
        "2",
    ]);
    let b = &v["end"]["netmeter"]["bounceback"];
    assert_transactions_timed(b);
    assert_eq!(b["reply_bytes"], 1200);
    assert_eq!(b["burst"], 4);
    assert_eq!(b["streams"], 2);
    assert_eq!(b["lost"], 0);
}

#[test]
fn text_report_shows_transactions_and_rtt() {
    let out = client_vs_fresh_server(&["-t", "1", "--bounceback"], Duration::from_secs(30));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", show(&out));
    assert!(text.contains("Trans/s"), "{text}");
    assert!(
        text.contains("Bounceback:") && text.contains("RTT (ms): min"),
        "{text}"
    );
}

#[test]
fn busy_poll_runs_on_both_ends_and_is_reported() {
    let v = bounce(&["-t", "1", "--bounceback-request", "1", "--busy-poll", "50"]);
    let b = &v["end"]["netmeter"]["bounceback"];
    // Judged by the report, not by a rate: on a busy host (load 50 on 2 CPUs) a second
    // held 130 transactions, not the thousands of a quiet one.
    assert_transactions_timed(b);
    assert_eq!(b["busy_poll_us"], 50);
    assert_eq!(b["request_bytes"], 1);
    let v = bounce(&[
        "-u",
        "-t",
        "1",
        "--bounceback-request",
        "8",
        "--busy-poll",
        "50",
    ]);
    let b = &v["end"]["netmeter"]["bounceback"];
    assert_transactions_timed(b);
    assert_eq!(b["busy_poll_us"], 50);
    assert_eq!(b["lost"], 0);
}

/// The bounceback summary `b` ran transactions and timed each of them.
fn assert_transactions_timed(b: &serde_json::Value) {
    let n = b["transactions"].as_f64().unwrap_or(0.0);
    assert!(n > 0.0, "{b}");
    assert_eq!(b["rtt"]["count"].as_f64(), Some(n), "{b}");
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs the peers of scripts/setup-peers.sh"
)]
fn against_iperf3_is_a_clear_error() {
    assert_needs_netmeter_server("NETMETER_IPERF3_312", &["--bounceback"]);
}

#[test]
fn bad_bounceback_flags() {
    for args in [
        vec!["--bounceback", "-R"],
        vec!["--bounceback", "-u", "--bounceback-request", "4"],
        vec!["--bounceback", "--bounceback-burst", "0"],
        vec!["--bounceback", "--bounceback-hold", "5000"],
        vec!["--busy-poll", "50"],
        vec!["--bounceback", "--busy-poll", "20000"],
    ] {
        usage_error(&args);
    }
}
