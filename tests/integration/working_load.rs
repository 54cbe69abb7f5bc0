//! Latency under working load: the probe's idle and loaded round trips, responsiveness
//! (RPM), and — on an emulated bottleneck with a deep queue — the known truth that a
//! loaded path's round trip grows by about the queue's delay (bufferbloat).

use crate::support::netbed::{LinkConfig, Netbed, Side, timing_lock};
use crate::support::*;
use std::process::Command;
use std::time::Duration;

fn wl(v: &serde_json::Value) -> &serde_json::Value {
    &v["end"]["netmeter"]["working_load"]
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn loopback_probes_idle_then_loaded() {
    let out = client_vs_fresh_server(
        &["-J", "-t", "4", "--working-load=up,2"],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", show(&out));
    let v = json_of(&out, "client");
    let w = wl(&v);
    // 4 s test: the first second (t/4) is idle; probes go out every 10 ms.
    assert_eq!(w["idle_seconds"], 1.0);
    let idle_n = w["idle_rtt"]["count"].as_f64().unwrap();
    let loaded_n = w["loaded_rtt"]["count"].as_f64().unwrap();
    assert!(
        (85.0..=101.0).contains(&idle_n),
        "{idle_n} idle probes in 1 s"
    );
    assert!(
        (250.0..=301.0).contains(&loaded_n),
        "{loaded_n} loaded probes in 3 s"
    );
    // RPM is 60 s over the trimmed mean round trip: never above 60 s / min RTT.
    for (rtt, rpm) in [("idle_rtt", "idle_rpm"), ("loaded_rtt", "loaded_rpm")] {
        let min_s = w[rtt]["min_ms"].as_f64().unwrap() / 1e3;
        let r = w[rpm].as_f64().unwrap();
        assert!(
            r > 0.0 && r <= 60.0 / min_s * 1.001,
            "{rpm} {r} vs min RTT {min_s}"
        );
    }
    assert!(w["up_bits_per_second"].as_f64().unwrap() > 1e8);
    assert_eq!(w["down_bits_per_second"], 0.0);
    // Two bulk streams plus the probe.
    assert_eq!(v["end"]["streams"].as_array().unwrap().len(), 3);
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs the peers of scripts/setup-peers.sh"
)]
fn against_iperf3_is_a_clear_error() {
    assert_needs_netmeter_server("NETMETER_IPERF3_312", &["--working-load"]);
}

#[test]
fn bad_working_load_flags() {
    for args in [
        vec!["--working-load=sideways"],
        vec!["--working-load=up,0"],
        vec!["--working-load", "-u"],
        vec!["--working-load", "-t", "1"],
        vec!["--working-load", "-n", "1M"],
    ] {
        let out = run(
            Command::new(netmeter())
                .args(["-c", "127.0.0.1"])
                .args(&args),
            Duration::from_secs(10),
        );
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", show(&out));
    }
}

/// A 20 Mbit/s bottleneck with 5 ms each way and a 100 ms queue in the router. Idle,
/// the probe sees about 10 ms; under 4 bulk TCP streams the queue fills and the probe
/// (which shares it) waits behind it: its round trip grows by tens of milliseconds.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn bufferbloat_on_an_emulated_bottleneck() {
    let _t = timing_lock();
    Netbed::require();
    let bed = Netbed::new(
        LinkConfig::new()
            .rate_mbit(20.0)
            .queue_ms(100.0)
            .delay_ms(5.0),
    )
    .expect("building the bed");
    let mut srv = bed
        .spawn_in(Side::H2, netmeter(), &["-s", "-1", "-J"])
        .expect("server");
    await_tcp_listening(srv.id(), 5201);
    let h2 = bed.h2_addr().to_string();
    let client = bed
        .run_in(
            Side::H1,
            netmeter(),
            &["-c", h2.as_str(), "-J", "-t", "6", "--working-load=up,4"],
            Duration::from_secs(40),
        )
        .expect("client");
    let _ = srv.wait_timeout(Duration::from_secs(10));
    let v: serde_json::Value = serde_json::from_str(&client).expect("client JSON");
    let w = wl(&v);
    let idle = w["idle_rtt"]["p50_ms"].as_f64().unwrap();
    let loaded = w["loaded_rtt"]["p50_ms"].as_f64().unwrap();
    assert!(
        (9.5..=12.0).contains(&idle),
        "idle RTT p50 {idle} ms, path RTT is 10 ms"
    );
    assert!(
        loaded > idle + 30.0,
        "loaded RTT p50 {loaded} ms vs idle {idle} ms"
    );
    assert!(
        loaded < idle + 150.0,
        "loaded RTT p50 {loaded} ms beyond the 100 ms queue"
    );
    assert!(w["loaded_rpm"].as_f64().unwrap() < w["idle_rpm"].as_f64().unwrap() / 2.0);
    // The load itself fills the bottleneck.
    let up = w["up_bits_per_second"].as_f64().unwrap();
    assert!(
        up > 15e6 && up < 20.5e6,
        "load {up} bit/s on a 20 Mbit/s link"
    );
}
