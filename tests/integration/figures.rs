//! iperf 2's figures in netmeter's own report (issue 22, item 3): packets per second,
//! write and read counts, inP and net power, and the server's per-interval latency
//! histograms, each judged against a truth outside the report:
//!
//! * the system calls the client really made, counted by `strace -c` (full tier: needs
//!   strace), for `writes`/`write_errors` (one per `sendmmsg`) and `reads` (one per
//!   `recvmmsg` that returned data);
//! * the `-b`/`-l` schedule, for packets per second;
//! * the fixed delay of the network-namespace bed's delay line (full tier: root), for
//!   inP and net power by Little's law;
//! * the whole test's histogram, for the server's per-interval frame-latency histograms.

use crate::support::netbed::{LinkConfig, Side, bed, tcp_listening, timing_lock};
use crate::support::*;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

/// `netmeter -s --histograms` printed the one-way delays per interval but not the
/// latency of the isochronous frames (iperf 2's per-interval F8 histograms): now each
/// interval has its frame-latency histogram, as the end has the whole test's.
#[test]
fn server_prints_frame_latency_histograms_per_interval() {
    let port = free_port();
    let (_srv, out) = netmeter_server(port, &["-1", "--histograms", "-i", "0.5"]);
    let args = ["-u", "-t", "1", "--isochronous", "30:8m,1m", "--trip-times"];
    let c = client(port, &args);
    assert!(c.status.success(), "{}", show(&c));
    let end = "Frame latency client->server histogram (";
    assert!(
        out.wait_for(end, 1, EVIDENCE_TIMEOUT),
        "server output:\n{}",
        out.text()
    );
    // 30 frames in 1 s: the intervals' histograms hold the frames completed in them,
    // never more than the whole test's.
    let label = "Frame latency client->server";
    assert_interval_histograms_within_whole(&out.text(), label, end);
}

/// The client's calls of `syscall` as `strace -c` counted them: (calls, errors).
fn strace_count(summary: &str, syscall: &str) -> (u64, u64) {
    for line in summary.lines() {
        let cells: Vec<&str> = line.split_whitespace().collect();
        if cells.last() == Some(&syscall) && cells.len() >= 5 {
            let calls = cells[3].parse().expect("calls");
            // The errors column is empty when there were none.
            let errors = if cells.len() == 6 {
                cells[4].parse().expect("errors")
            } else {
                0
            };
            return (calls, errors);
        }
    }
    (0, 0)
}

/// Run a netmeter client under `strace -f -c` against a fresh loopback server: its
/// `-J` document and strace's summary.
fn client_under_strace(args: &[&str]) -> (Value, String) {
    let port = free_port();
    let (_srv, _out) = netmeter_server(port, &["-1"]);
    let dir = std::env::temp_dir().join(format!("netmeter-figures-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let summary = dir.join(format!("strace-{port}.txt"));
    let out = run_bounded(
        Command::new("strace")
            .args(["-f", "-c", "-e", "trace=sendmmsg,recvmmsg", "-o"])
            .arg(&summary)
            .arg(netmeter())
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-J"])
            .args(args),
        CLIENT_TIMEOUT,
        "client under strace",
    );
    assert!(out.status.success(), "client {args:?}: {}", show(&out));
    let text = std::fs::read_to_string(&summary).expect("strace summary");
    let _ = std::fs::remove_file(&summary);
    (json_of(&out, "client"), text)
}

fn figures_of(v: &Value) -> &Value {
    &v["end"]["netmeter"]["iperf2_figures"]
}

/// Each interval row's packets per second is its datagrams over its seconds, and a
/// paced sender's whole test runs at `-b` ÷ (8 × `-l`) datagrams per second.
fn check_pps(v: &Value, role: &str, want_pps: f64) {
    for iv in v["intervals"].as_array().expect("intervals") {
        for row in iv["streams"].as_array().expect("streams") {
            let secs = num(row, "seconds");
            let pps = num(row, "netmeter.packets_per_second");
            if row["jitter_ms"].is_null() {
                // A sender's row: the same count the row shows.
                let n = num(row, "packets");
                assert!(
                    (pps - n / secs).abs() <= 1e-6 * pps.max(1.0),
                    "row {row}: {pps} pps for {n} datagrams in {secs} s"
                );
            } else {
                // A receiver's row counts sequence numbers, read a moment apart from
                // the datagrams received: they may differ by one receive batch (32).
                let n = num(row, "packets") - num(row, "lost_packets");
                assert!(
                    (pps * secs - n).abs() <= 32.0,
                    "row {row}: {pps} pps for {n} datagrams in {secs} s"
                );
            }
        }
    }
    let end = num(&figures_of(v)["streams"][0][role], "packets_per_second");
    assert!(
        (end - want_pps).abs() <= 0.1 * want_pps,
        "{role}: {end} pps over the test, -b and -l make {want_pps}"
    );
}

/// `writes` is the number of `sendmmsg` calls the client made (iperf 2 counts one per
/// `write`, one datagram each; netmeter's one call carries several when the pacer
/// grants them), `write_errors` the failed ones; `reads` the `recvmmsg` calls that
/// returned data. Truth: strace's count of the client's own system calls. Packets per
/// second: the report's own counts per row, and the `-b 2M -l 1000` schedule's 250.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs strace (apt-get install strace)"
)]
fn write_and_read_counts_are_the_system_calls_made() {
    let base = [
        "-u", "-b", "2M", "-l", "1000", "-t", "2", "--no-gso", "--no-gro",
    ];
    let (v, st) = client_under_strace(&base);
    let (calls, errors) = strace_count(&st, "sendmmsg");
    let snd = &figures_of(&v)["streams"][0]["sender"];
    assert!(calls > 0, "strace saw no sendmmsg:\n{st}");
    assert_eq!(
        (num(snd, "writes") as u64, num(snd, "write_errors") as u64),
        (calls - errors, errors),
        "strace:\n{st}\nfigures: {snd}"
    );
    // Without GSO each message is one datagram, and a call sends at least one.
    let datagrams = num(&v, "end.sum_sent.packets") as u64;
    assert!(
        calls - errors <= datagrams,
        "{calls} calls, {datagrams} datagrams"
    );
    check_pps(&v, "sender", 250.0);
    // The interval rows' writes add up to the whole test's.
    let rows: f64 = v["intervals"]
        .as_array()
        .expect("intervals")
        .iter()
        .map(|iv| num(&iv["sum"], "netmeter.writes"))
        .sum();
    assert!(rows <= num(snd, "writes"), "{rows} in rows, {snd}");

    let mut rev = base.to_vec();
    rev.push("-R");
    let (v, st) = client_under_strace(&rev);
    let (calls, errors) = strace_count(&st, "recvmmsg");
    let rcv = &figures_of(&v)["streams"][0]["receiver"];
    assert!(calls > 0, "strace saw no recvmmsg:\n{st}");
    // A receive that timed out (the 50 ms stop poll) is an error, not a read.
    assert_eq!(
        num(rcv, "reads") as u64,
        calls - errors,
        "strace:\n{st}\n{rcv}"
    );
    check_pps(&v, "receiver", 250.0);
}

/// inP and net power against the link: across the bed's fixed 10 ms delay line at
/// `-b 2M -l 1000`, a receiver holds 250 000 B/s × 10 ms = 2 500 bytes (2.5 datagrams)
/// in flight, and its power is 2 Mbit/s ÷ 10 ms = 2·10⁸. The rate's truth is `-b`, the
/// delay's the line's (which adds at most ~1 ms when it runs late: 15 % tolerance).
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn udp_inp_is_rate_times_the_links_delay() {
    let _t = timing_lock();
    let b = bed(LinkConfig::new().delay_ms(10.0));
    passes_once_in(3, "inP across a 10 ms line", || {
        let mut server = b
            .spawn_in(Side::H2, netmeter(), &["-s", "-1", "-J"])
            .expect("starting server");
        wait_until("the server to listen", || {
            b.in_ns(Side::H2, || tcp_listening(5201)).unwrap()
        });
        let mut cmd = b.cmd(Side::H1, netmeter());
        cmd.args(["-c", &b.h2_addr().to_string(), "-J", "-R", "--trip-times"])
            .args(["-u", "-b", "2M", "-l", "1000", "-t", "3"]);
        let out = run_bounded(&mut cmd, Duration::from_secs(30), "client across the bed");
        let _ = server.wait_timeout(Duration::from_secs(10));
        let _ = server.finish(Duration::from_secs(1));
        if !out.status.success() {
            return Err(show(&out));
        }
        let v = json_of(&out, "client");
        let rcv = &figures_of(&v)["streams"][0]["receiver"];
        let near = |key: &str, want: f64| -> Result<(), String> {
            let got = rcv[key].as_f64().ok_or(format!("no {key} in {rcv}"))?;
            match (got - want).abs() <= 0.15 * want {
                true => Ok(()),
                false => Err(format!("{key} {got}, want {want} ±15 %: {rcv}")),
            }
        };
        near("in_progress_bytes", 2_500.0)?;
        near("in_progress_packets", 2.5)?;
        near("net_power", 2e8)?;
        // Each interval row: inP is its own rate × its own mean delay.
        for iv in v["intervals"].as_array().expect("intervals") {
            let row = &iv["streams"][0];
            let rate = num(row, "bytes") / num(row, "seconds");
            let owd_s = num(row, "netmeter.owd.mean_ms") / 1e3;
            let inp = num(row, "netmeter.in_progress_bytes");
            if (inp - rate * owd_s).abs() > 1e-6 * inp {
                return Err(format!(
                    "row {row}: inP {inp}, rate × delay {}",
                    rate * owd_s
                ));
            }
        }
        Ok(())
    });
}
