//! Measurement under host load (issue 19): paced UDP senders against `-b` while the CPUs
//! are contended, against iperf3 3.22 in the same moments, and the loss count's
//! exactness under the same contention.
//!
//! The contention is the test's own: one busy process per CPU (`support::cpu_hogs`),
//! killed by PID when the test ends, on top of whatever else the machine runs. Rates
//! are judged by what the receivers counted (datagrams sent less those lost) against
//! `-b` × the report's own duration (`sum_sent.seconds`), never by this test's clock.
//!
//! Full tier: iperf3 3.22 from `scripts/setup-peers.sh`; the loss test needs root
//! (network namespaces).

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::support::{
    Proc, cpu_hogs, f64_at, free_port, json_of, netmeter_server, peer, run, show, u64_at,
    wait_listening,
};

/// Datagram size for both tools (iperf3 would use loopback's 64 KiB MTU otherwise).
const LEN: &str = "1460";
/// Per-stream rate, streams and seconds: issue 19's `-u -P 20 -b 1M -t 2`.
const RATE_BPS: f64 = 1e6;
const ARGS: [&str; 10] = ["-u", "-P", "20", "-b", "1M", "-t", "2", "-l", LEN, "-J"];

/// What the receivers counted against `-b` × streams × the report's duration: 1.0 is
/// the requested rate exactly.
fn reached(v: &Value) -> f64 {
    let received = u64_at(v, "/end/sum/packets") - u64_at(v, "/end/sum/lost_packets");
    let secs = f64_at(v, "/end/sum_sent/seconds");
    let want = RATE_BPS * 20.0 * secs / 8.0 / LEN.parse::<f64>().unwrap();
    received as f64 / want
}

/// Issue 19: on the 2-CPU machine with other work running, netmeter's 20 paced streams
/// sent 84-89 % of `-b` (and a single one 92 %) without a word, where iperf3 3.22
/// reached 100 %. Alternating the two, three rounds each under the test's own
/// contention: netmeter must reach on average what iperf3 reaches, less 1 %, and
/// any round it ends more than 1 % short must say so (`end.netmeter.rate_shortfall`).
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs iperf3 3.22 (scripts/setup-peers.sh)"
)]
fn paced_udp_reaches_b_under_cpu_contention_as_iperf3_does() {
    let iperf3 = peer("NETMETER_IPERF3_322");
    let nm_port = free_port();
    let (_nm, _nm_log) = netmeter_server(nm_port, &[]);
    let i3_port = free_port();
    let _i3 = Proc::spawn(
        "iperf3 3.22 server",
        Command::new(&iperf3).args(["-s", "-B", "127.0.0.1", "-p", &i3_port.to_string()]),
    );
    wait_listening(i3_port);
    let _hogs = cpu_hogs();
    let (mut nm, mut i3) = (Vec::new(), Vec::new());
    for round in 0..3 {
        let out = run(
            Command::new(crate::support::netmeter())
                .args([
                    "-c",
                    "127.0.0.1",
                    "-p",
                    &nm_port.to_string(),
                    "--trip-times",
                ])
                .args(ARGS),
            Duration::from_secs(60),
        );
        assert!(
            out.status.success(),
            "netmeter round {round}: {}",
            show(&out)
        );
        let v = json_of(&out, "netmeter");
        let r = reached(&v);
        let said = &v["end"]["netmeter"]["rate_shortfall"];
        eprintln!(
            "round {round}: netmeter reached {:.2} % of -b; shortfall {said}",
            r * 100.0
        );
        assert!(
            r >= 0.99 || said.as_array().is_some_and(|a| !a.is_empty()),
            "round {round}: netmeter reached {:.2} % of -b without saying so: {}",
            r * 100.0,
            v["end"]["netmeter"]
        );
        nm.push(r);
        let out = run(
            Command::new(&iperf3)
                .args(["-c", "127.0.0.1", "-p", &i3_port.to_string()])
                .args(ARGS),
            Duration::from_secs(60),
        );
        assert!(out.status.success(), "iperf3 round {round}: {}", show(&out));
        let r = reached(&json_of(&out, "iperf3"));
        eprintln!(
            "round {round}: iperf3 3.22 reached {:.2} % of -b",
            r * 100.0
        );
        i3.push(r);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    assert!(
        mean(&nm) >= mean(&i3) - 0.01,
        "netmeter reached {nm:?} of -b, iperf3 3.22 {i3:?} in the same moments"
    );
}
