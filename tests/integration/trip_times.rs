//! One-way delay (`--trip-times`) end to end on loopback: a deliberately skewed sender
//! clock is the known truth for the offset estimate and the clock-error count.

use crate::support::*;
use std::process::Command;
use std::time::Duration;

fn trip(client_env: Option<(&str, &str)>, extra: &[&str]) -> serde_json::Value {
    let port = free_port();
    let (_srv, _out) = netmeter_server(port, &["-1"]);
    let mut cmd = Command::new(netmeter());
    cmd.args([
        "-c",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-J",
        "--trip-times",
    ])
    .args(extra);
    if let Some((k, v)) = client_env {
        cmd.env(k, v);
    }
    let out = run(&mut cmd, Duration::from_secs(30));
    assert!(out.status.success(), "{}", show(&out));
    json_of(&out, "client")
}

#[test]
fn skewed_sender_clock_is_recovered_and_counted() {
    // The client's clock runs 50 ms ahead: every raw delay is about -50 ms (a clock
    // error), the estimate of server - client is -50 ms, and the corrected delays are
    // the sub-millisecond loopback delays.
    let v = trip(
        Some(("NETMETER_TEST_CLOCK_OFFSET_MS", "50")),
        &["-u", "-b", "5M", "-t", "1", "-l", "1000"],
    );
    let tt = &v["end"]["netmeter"]["trip_times"];
    let off = tt["offset_ms"].as_f64().unwrap();
    assert!(
        (off + 50.0).abs() < 1.0,
        "offset estimate {off} ms, injected -50 ms"
    );
    assert!(tt["offset_uncertainty_ms"].as_f64().unwrap() < 1.0);
    let c2s = &tt["client_to_server"];
    let samples = c2s["samples"].as_f64().unwrap();
    assert!(samples > 400.0, "{samples}");
    assert_eq!(
        c2s["clock_errors"].as_f64().unwrap(),
        samples,
        "every raw delay is negative"
    );
    assert!(c2s["raw_mean_ms"].as_f64().unwrap() < -49.0);
    let owd = &c2s["owd"];
    assert!(owd["min_ms"].as_f64().unwrap() >= 0.0);
    assert!(owd["p50_ms"].as_f64().unwrap() < 1.0, "{owd}");
    assert_eq!(c2s["negative_corrected"], 0);
    // Intervals carry the corrected one-way delays of what the server received; the
    // client shows them through the results only at the end, so check the histogram.
    let hist: f64 = c2s["histogram_us"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b[1].as_f64().unwrap())
        .sum();
    assert_eq!(hist, samples);
}

#[test]
fn reverse_direction_is_measured_by_the_client() {
    let v = trip(
        Some(("NETMETER_TEST_CLOCK_OFFSET_MS", "-20")),
        &["-u", "-b", "5M", "-t", "1", "-R"],
    );
    let tt = &v["end"]["netmeter"]["trip_times"];
    assert!((tt["offset_ms"].as_f64().unwrap() - 20.0).abs() < 1.0);
    let s2c = &tt["server_to_client"];
    // The receiving client's clock is 20 ms behind: raw delays are about -20 ms.
    assert!(s2c["raw_mean_ms"].as_f64().unwrap() < -19.0);
    assert!(s2c["owd"]["p50_ms"].as_f64().unwrap() < 1.0);
    // Per-interval corrected OWD on the client's receiving stream.
    let iv = &v["intervals"][0]["streams"][0]["netmeter"]["owd"];
    assert!(iv["count"].as_f64().unwrap() > 100.0, "{iv}");
}

#[test]
fn tcp_writes_are_timed() {
    let v = trip(None, &["-t", "1", "-b", "200M"]);
    let c2s = &v["end"]["netmeter"]["trip_times"]["client_to_server"];
    let n = c2s["samples"].as_f64().unwrap();
    // 200 Mbit/s of 128 KiB writes for a second: about 190 writes.
    assert!(n > 100.0, "{n} timed writes");
    assert_eq!(c2s["clock_errors"], 0);
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs the peers of scripts/setup-peers.sh"
)]
fn against_iperf3_is_a_clear_error() {
    assert_needs_netmeter_server("NETMETER_IPERF3_318", &["-u", "--trip-times"]);
}

/// `netmeter -s --histograms` printed no histogram: the server, which receives the
/// one-way delays, prints them per interval (`-i`) and at the end, as iperf 2's does.
#[test]
fn server_prints_one_way_delay_histograms() {
    let port = free_port();
    let (_srv, out) = netmeter_server(port, &["-1", "--histograms", "-i", "0.5"]);
    let c = client(
        port,
        &["--trip-times", "-u", "-b", "2M", "-t", "1", "-l", "1000"],
    );
    assert!(c.status.success(), "{}", show(&c));
    let end = "One-way delay client->server histogram (0.1 ms bins, ";
    assert!(
        out.wait_for(end, 1, Duration::from_secs(30)),
        "server output:\n{}",
        out.text()
    );
    let text = out.text();
    let samples = |from: &str| -> u64 {
        let rest = &from[from.find(" ms bins, ").expect("bins") + 10..];
        rest[..rest.find(' ').expect("count")]
            .parse()
            .expect("samples")
    };
    let per_interval: Vec<u64> = text
        .match_indices("One-way delay client->server 0.")
        .chain(text.match_indices("One-way delay client->server 1."))
        .map(|(i, _)| samples(&text[i..]))
        .collect();
    assert!(!per_interval.is_empty(), "no interval histograms:\n{text}");
    let whole = samples(&text[text.find(end).expect("end")..]);
    assert!(whole > 0, "{text}");
    // The intervals' histograms hold no more than the whole test's.
    assert!(per_interval.iter().sum::<u64>() <= whole, "{text}");
}
