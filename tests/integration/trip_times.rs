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

/// The offset estimate (server − client, ms) and its uncertainty, judged by what they
/// claim: NTP-style, the true offset lies within ± half the best probe's round trip
/// (the uncertainty) of the estimate, whatever the host's load made that round trip;
/// and that round trip, on loopback, stays far below the injected skew. `true_ms` is
/// the injected offset. Returns (estimate, uncertainty).
fn check_offset(tt: &serde_json::Value, true_ms: f64) -> (f64, f64) {
    let (off, unc) = (num(tt, "offset_ms"), num(tt, "offset_uncertainty_ms"));
    assert!(
        (off - true_ms).abs() <= unc + 0.01,
        "offset estimate {off} ms ± {unc} ms, injected {true_ms} ms"
    );
    assert!(
        unc < true_ms.abs() / 2.0,
        "offset uncertainty {unc} ms: the {true_ms} ms skew is not resolved"
    );
    (off, unc)
}

/// One direction's delays (`d`, e.g. `client_to_server`) against the offset estimate
/// `off` ± `unc` (receiver − sender, ms) when the sender's clock is `skew_ms` ahead of
/// the receiver's, judged by the report's own relations: every datagram was timed; a
/// raw delay is negative exactly when counted as a clock error, and the fastest one
/// shows the skew; the correction removes the estimate, so a corrected delay is at
/// worst the estimate's uncertainty below zero, negative ones are counted apart from the
/// histogram, and the histogram's mean is the raw mean corrected.
fn check_corrected(d: &serde_json::Value, received: f64, off: f64, unc: f64, skew_ms: f64) {
    let samples = num(d, "samples");
    assert_eq!(samples, received, "every datagram received is timed: {d}");
    let (raw_min, raw_max) = (num(d, "raw_min_ms"), num(d, "raw_max_ms"));
    let errors = num(d, "clock_errors");
    assert!(
        raw_min < -skew_ms / 2.0,
        "the fastest raw delay {raw_min} ms"
    );
    if raw_max < 0.0 {
        assert_eq!(errors, samples, "every raw delay is negative: {d}");
    } else {
        assert!(errors > 0.0 && errors < samples, "{d}");
    }
    // Corrected = raw − `off`, the receiver's clock minus the sender's as estimated
    // (server − client for client → server; the caller passes its negative for the
    // other direction).
    let corrected_min = raw_min - off;
    assert!(
        corrected_min >= -unc - 0.01,
        "the fastest corrected delay {corrected_min} ms, uncertainty {unc} ms"
    );
    let negative = num(d, "negative_corrected");
    assert_eq!(
        negative > 0.0,
        corrected_min < 0.0,
        "negative corrected delays counted ({negative}) exactly when the fastest is below \
         zero ({corrected_min} ms)"
    );
    let owd = &d["owd"];
    assert_eq!(num(owd, "count"), samples - negative, "{d}");
    if negative == 0.0 {
        let want = num(d, "raw_mean_ms") - off;
        assert!(
            (num(owd, "mean_ms") - want).abs() < 0.01,
            "corrected mean {} ms, raw mean corrected {want} ms",
            num(owd, "mean_ms")
        );
    }
}

#[test]
fn skewed_sender_clock_is_recovered_and_counted() {
    // The client's clock runs 50 ms ahead: every raw delay is about -50 ms (a clock
    // error), the estimate of server - client is -50 ms, and the corrected delays are
    // the loopback delays.
    let v = trip(
        Some(("NETMETER_TEST_CLOCK_OFFSET_MS", "50")),
        &["-u", "-b", "5M", "-t", "1", "-l", "1000"],
    );
    let tt = &v["end"]["netmeter"]["trip_times"];
    let (off, unc) = check_offset(tt, -50.0);
    let c2s = &tt["client_to_server"];
    let received = num(&v, "end.sum_received.packets");
    assert!(
        received > 100.0,
        "{received} datagrams\n{}",
        serde_json::to_string_pretty(&v["end"]).unwrap_or_default()
    );
    check_corrected(c2s, received, off, unc, 50.0);
    // Intervals carry the corrected one-way delays of what the server received; the
    // client shows them through the results only at the end, so check the histogram.
    let hist: f64 = c2s["histogram_us"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b[1].as_f64().unwrap())
        .sum();
    assert_eq!(hist, num(c2s, "owd.count"));
}

#[test]
fn reverse_direction_is_measured_by_the_client() {
    let v = trip(
        Some(("NETMETER_TEST_CLOCK_OFFSET_MS", "-20")),
        &["-u", "-b", "5M", "-t", "1", "-R"],
    );
    let tt = &v["end"]["netmeter"]["trip_times"];
    let (off, unc) = check_offset(tt, 20.0);
    let s2c = &tt["server_to_client"];
    // The receiving client's clock is 20 ms behind: raw delays are about -20 ms, and
    // corrected by adding the estimate (server − client) back.
    let received = num(&v, "end.sum_received.packets");
    assert!(received > 100.0, "{received} datagrams");
    check_corrected(s2c, received, -off, unc, 20.0);
    // Per-interval corrected OWD on the client's receiving stream.
    let iv = &v["intervals"][0]["streams"][0]["netmeter"]["owd"];
    assert!(iv["count"].as_f64().unwrap() > 0.0, "{iv}");
}

#[test]
fn tcp_writes_are_timed() {
    let v = trip(None, &["-t", "1", "-b", "200M"]);
    let c2s = &v["end"]["netmeter"]["trip_times"]["client_to_server"];
    let n = c2s["samples"].as_f64().unwrap();
    // Every whole write the server read is timed (about 190 of 128 KiB at 200 Mbit/s).
    let writes = num(&v, "end.sum_received.bytes") / num(&v, "start.test_start.blksize");
    assert!(
        n > 10.0 && n == writes.floor(),
        "{n} timed writes of {writes}"
    );
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
    // The intervals' histograms hold no more than the whole test's.
    let label = "One-way delay client->server";
    assert_interval_histograms_within_whole(&out.text(), label, end);
}
