//! One-way delay against the link's delay, and clock-offset estimation against the
//! offsets the simulator applied.

use super::*;
use netmeter::clocksync::{ClockEstimate, Probe, estimate};
use netmeter::sim::{Ecn, Sim};

fn trip(server_clock: HostConfig, link: LinkConfig, correction_ns: i64) -> UdpTest {
    UdpTest {
        rate_bps: 4_000_000,
        end: EndCondition::Time(3.0),
        trip_times: true,
        owd_correction_ns: correction_ns,
        server_clock,
        link,
        clock: Some(ClockEstimate {
            offset_ns: -correction_ns,
            uncertainty_ns: 0,
            rtt_ns: 0,
            probes: 8,
        }),
        ..UdpTest::default()
    }
}

fn c2s(o: &UdpOutcome) -> Value {
    v(&o.client)["end"]["netmeter"]["trip_times"]["client_to_server"].clone()
}

fn f(x: &Value) -> f64 {
    x.as_f64().unwrap_or_else(|| panic!("not a number: {x}"))
}

#[test]
fn one_way_delay_is_the_links_delay() {
    let link = LinkConfig {
        delay: ms(25),
        ..LinkConfig::default()
    };
    let o = run(&trip(HostConfig::default(), link, 0));
    let s = c2s(&o);
    assert_eq!(u(&s["samples"]), o.arrived.len() as u64);
    assert_eq!((f(&s["raw_min_ms"]), f(&s["raw_max_ms"])), (25.0, 25.0));
    assert_eq!(u(&s["clock_errors"]), 0);
}

#[test]
fn one_way_delay_follows_the_queue_at_a_bottleneck() {
    // 4 Mbit/s into 3 Mbit/s with a deep queue: the queue grows by a quarter of the
    // time, so the last datagram (sent at 3 s) waits about 1 s.
    let link = LinkConfig {
        delay: ms(10),
        rate_bps: 3_000_000,
        ..LinkConfig::default()
    };
    let mut t = trip(HostConfig::default(), link, 0);
    t.drain = Duration::from_secs(3);
    let o = run(&t);
    let s = c2s(&o);
    let want_max = o
        .arrived
        .iter()
        .map(|a| (a.rx_ns - a.tx_ns) as f64 / 1e6)
        .fold(0.0, f64::max);
    assert_eq!(f(&s["raw_max_ms"]), want_max);
    assert!((want_max - 1010.0).abs() < 15.0, "{want_max}");
    assert!(f(&s["growth_ms"]) > 500.0, "{s}");
}

#[test]
fn raw_delay_carries_the_clock_offset_and_the_correction_removes_it() {
    let link = LinkConfig {
        delay: ms(25),
        ..LinkConfig::default()
    };
    let ahead = HostConfig {
        offset_ns: 7_000_000,
        drift_ppb: 0,
    };
    let o = run(&trip(ahead, link.clone(), -7_000_000));
    let s = c2s(&o);
    assert_eq!((f(&s["raw_min_ms"]), f(&s["raw_max_ms"])), (32.0, 32.0));
    // The corrected distribution (a histogram: to its bucket's resolution).
    let mean = f(&s["owd"]["mean_ms"]);
    assert!((mean - 25.0).abs() < 0.25, "{s}");
    // A server clock 30 ms behind makes the raw delay negative: each is a clock error.
    let behind = HostConfig {
        offset_ns: -30_000_000,
        drift_ppb: 0,
    };
    let o = run(&trip(behind, link, 30_000_000));
    let s = c2s(&o);
    assert_eq!(f(&s["raw_min_ms"]), -5.0);
    assert_eq!(u(&s["clock_errors"]), o.arrived.len() as u64);
}

#[test]
fn clock_drift_shows_as_delay_growing_with_time() {
    // +200 ppm: the server's clock gains 0.2 ms a second.
    let drifting = HostConfig {
        offset_ns: 0,
        drift_ppb: 200_000,
    };
    let link = LinkConfig {
        delay: ms(10),
        ..LinkConfig::default()
    };
    let o = run(&trip(drifting, link, 0));
    let s = c2s(&o);
    let (first, last) = (o.arrived[0], *o.arrived.last().expect("arrivals"));
    let span_ms = (f(&s["raw_max_ms"]) - f(&s["raw_min_ms"])) * 1e6;
    let want = ((last.rx_ns - last.tx_ns) - (first.rx_ns - first.tx_ns)) as f64;
    assert!((span_ms - want).abs() < 1.0, "{span_ms} vs {want}");
    assert!((want / 1e6 - 0.6).abs() < 0.01, "{want}");
}

/// Eight clock probes over a simulated path: the client stamps t1 and t4 on its clock,
/// the server t2 = t3 on its own as the probe passes.
fn probes(seed: u64, server: HostConfig, up: LinkConfig, down: LinkConfig) -> Vec<Probe> {
    let mut sim = Sim::new(seed);
    let a = sim.add_host(HostConfig::default());
    let b = sim.add_host(server);
    let (ab, ba) = (sim.add_link(a, b, up), sim.add_link(b, a, down));
    let mut t1s = Vec::new();
    for k in 0..8u64 {
        sim.advance_to(ms(10 * k));
        let t1 = sim.wall_ns(a, sim.now());
        t1s.push(t1);
        sim.send(ab, t1.to_be_bytes().to_vec(), Ecn::NotEct);
    }
    let mut out = Vec::new();
    while let Some(t) = sim.next_event() {
        sim.advance_to(t);
        while let Some(d) = sim.pop_delivery() {
            if d.link == ab {
                let t2 = sim.wall_ns(b, d.at);
                let mut answer = d.payload.clone();
                answer.extend_from_slice(&t2.to_be_bytes());
                answer.extend_from_slice(&t2.to_be_bytes());
                sim.send(ba, answer, Ecn::NotEct);
            } else {
                let bytes: [u8; 24] = d.payload[..].try_into().expect("24-byte answer");
                let t1 = i64::from_be_bytes(bytes[..8].try_into().expect("8 bytes"));
                let t4 = sim.wall_ns(a, d.at);
                out.extend(Probe::from_answer(t1, &bytes, t4));
            }
        }
    }
    assert_eq!(out.len(), t1s.len());
    out
}

fn one_way(delay: Duration, jitter: Jitter) -> LinkConfig {
    LinkConfig {
        delay,
        jitter,
        ..LinkConfig::default()
    }
}

#[test]
fn clock_offset_is_recovered_exactly_on_a_symmetric_path() {
    let server = HostConfig {
        offset_ns: 42_000_000,
        drift_ppb: 0,
    };
    let link = one_way(ms(15), Jitter::None);
    let e = estimate(&probes(1, server, link.clone(), link)).expect("an estimate");
    assert_eq!(e.offset_ns, 42_000_000);
    assert_eq!((e.rtt_ns, e.uncertainty_ns), (30_000_000, 15_000_000));
}

#[test]
fn clock_offset_error_on_an_asymmetric_path_is_half_the_asymmetry() {
    let server = HostConfig {
        offset_ns: -3_000_000,
        drift_ppb: 0,
    };
    let e = estimate(&probes(
        2,
        server,
        one_way(ms(10), Jitter::None),
        one_way(ms(30), Jitter::None),
    ))
    .expect("an estimate");
    // (10 − 30) / 2 = −10 ms of error, inside the ± 20 ms the estimate claims.
    assert_eq!(e.offset_ns, -3_000_000 - 10_000_000);
    assert_eq!(e.uncertainty_ns, 20_000_000);
}

#[test]
fn clock_offset_is_within_its_uncertainty_under_jitter_for_every_seed() {
    let server = HostConfig {
        offset_ns: 123_456_789,
        drift_ppb: 0,
    };
    for seed in 0..16 {
        let link = one_way(ms(8), Jitter::Normal { sd: ms(3) });
        let ps = probes(seed, server, link.clone(), link);
        let e = estimate(&ps).expect("an estimate");
        let err = (e.offset_ns - 123_456_789).abs();
        assert!(err <= e.uncertainty_ns, "seed {seed}: {e:?}");
        // The best probe is the one with the least delay: no other had less.
        let least = ps.iter().map(|p| (p.t4 - p.t1) - (p.t3 - p.t2)).min();
        assert_eq!(Some(e.rtt_ns), least);
    }
}
