//! The simulator tier: whole UDP tests on virtual time (issue 21).
//!
//! Each test runs the sender machine, a seeded simulated link and the receiver machine
//! with both sides' meters and end summaries ([`harness`]), then judges the reports
//! against the simulator's own record of what it did to every packet: exact equalities,
//! no stopwatch, no tolerance for the host being busy. The whole tier runs as a normal
//! user with plain `cargo test`, in seconds.
//!
//! Snapshots: `tests/sim/snapshots/<name>.json` hold pinned reports; after an intended
//! change, `NETMETER_UPDATE_SNAPSHOTS=1 cargo test --test sim snapshot` rewrites them.

mod harness;

use std::collections::HashSet;
use std::time::Duration;

use harness::{UdpOutcome, UdpTest, run};
use netmeter::sim::{Fate, HostConfig, Jitter, LinkConfig, Loss};
use netmeter::spec::EndCondition;
use serde_json::Value;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn v(r: &netmeter::Report) -> Value {
    serde_json::to_value(r).expect("report serialises")
}

/// The client's merged UDP end figures (`end.streams[0].udp`).
fn udp_end(o: &UdpOutcome) -> Value {
    v(&o.client)["end"]["streams"][0]["udp"].clone()
}

/// What the server's receiver counted itself (`end.streams[0].udp.netmeter`).
fn receiver_end(o: &UdpOutcome) -> Value {
    v(&o.server)["end"]["streams"][0]["udp"]["netmeter"].clone()
}

fn u(x: &Value) -> u64 {
    x.as_u64().unwrap_or_else(|| panic!("not a count: {x}"))
}

/// Distinct sequence numbers delivered, their highest, and arrivals of a number already
/// seen (from the simulator's own record of what the receiver took).
fn truth(o: &UdpOutcome) -> (u64, u64, u64, u64) {
    let mut seen = HashSet::new();
    let (mut max, mut ooo, mut dup) = (0, 0, 0);
    for a in &o.arrived {
        if !seen.insert(a.seq) {
            dup += 1;
            continue;
        }
        if a.seq < max {
            ooo += 1;
        }
        max = max.max(a.seq);
    }
    (seen.len() as u64, max, ooo, dup)
}

/// RFC 3550 A.8 jitter over what the receiver took, seconds, computed here.
fn rfc3550_jitter(o: &UdpOutcome) -> f64 {
    let mut seen = HashSet::new();
    let (mut j, mut prev) = (0.0f64, None::<f64>);
    for a in &o.arrived {
        if !seen.insert(a.seq) {
            continue;
        }
        let transit = (a.rx_ns - a.tx_ns) as f64 / 1e9;
        if let Some(p) = prev {
            j += ((transit - p).abs() - j) / 16.0;
        }
        prev = Some(transit);
    }
    j
}

/// Loss, reordering, duplicates and jitter in the client's report equal what the
/// simulator's record says happened.
fn check_accounting(o: &UdpOutcome) {
    let (distinct, max, ooo, dup) = truth(o);
    let e = udp_end(o);
    // iperf3's merged figures: the sender's count of datagrams, and as lost the gaps
    // below the highest number received (a lost tail is not seen as lost).
    assert_eq!(u(&e["packets"]), o.record.len() as u64, "{e}");
    assert_eq!(u(&e["lost_packets"]), max - distinct, "{e}");
    let s = receiver_end(o);
    assert_eq!(u(&s["receiver_packets"]), distinct, "{s}");
    assert_eq!(u(&e["out_of_order"]), ooo, "{e}");
    assert_eq!(u(&e["netmeter"]["duplicates"]), dup, "{e}");
    let j = e["jitter_ms"].as_f64().expect("jitter");
    let want = rfc3550_jitter(o) * 1e3;
    assert!((j - want).abs() <= 1e-9 * want.max(1.0), "{j} vs {want}");
}

mod delay;
mod determinism;
mod ends;
mod impairments;
mod intervals;
mod max_rate;
mod pacing;
mod responsive;
