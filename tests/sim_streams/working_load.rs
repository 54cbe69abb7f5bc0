//! The `--working-load` probe machine over the simulator with a standing queue: idle
//! probes see the link's round trip, loaded ones the queue the load keeps in front of
//! them, and the RPM figures follow.

use crate::net::{Net, link};
use netmeter::engine::machine::bounce::{BounceClient, BounceConfig, BounceStep, PROBE_PERIOD};
use netmeter::latency::Hist;
use std::time::Duration;

const REQ: usize = 100;
const REP: usize = 100;
const LOAD_AT: u64 = 500_000_000;

/// Probes for 1 s over 8 Mbit/s and 2 ms each way; from 500 ms a load puts 20 000
/// bytes in the forward queue (the simulator's token bucket) and then keeps it there (990 bytes a millisecond, with
/// the probes' 100 bytes every 10 ms: the link's 1000 bytes a millisecond).
fn run() -> (Hist, Hist, u64) {
    let l = link(8_000_000, Duration::from_millis(2), 0.0);
    let mut net = Net::new(1, l.clone(), l);
    let load_start = net.ca.instant(LOAD_AT);
    let mut c = BounceClient::new(BounceConfig {
        burst: 1,
        reply_len: REP,
        period: Some(PROBE_PERIOD),
        load_start: Some(load_start),
        reply_timeout: None,
    });
    let (mut idle, mut loaded) = (Hist::default(), Hist::default());
    let mut rtts = Vec::new();
    let mut next_load = LOAD_AT;
    loop {
        let now = net.now();
        if now >= 1_000_000_000 {
            return (idle, loaded, c.sent());
        }
        while next_load <= now {
            // A full bucket lets one packet through at once: 21 packets of 1000 bytes
            // leave 20 waiting.
            let n = if next_load == LOAD_AT { 21 } else { 1 };
            let len = if next_load == LOAD_AT { 1000 } else { 990 };
            for _ in 0..n {
                net.send(net.fwd, &vec![0u8; len]);
            }
            next_load += 1_000_000;
        }
        let wake = match c.poll(net.ca.at(now)) {
            BounceStep::Send { .. } => {
                c.on_sent(net.ca.at(now));
                net.send(net.fwd, &[1u8; REQ]);
                continue;
            }
            BounceStep::Wait(t) => Some(net.ca.ns(t)),
            BounceStep::Await(_) => None,
            BounceStep::Lost(_) => unreachable!("no deadline"),
        };
        while let Some(d) = net.recv() {
            match (d.to == net.b, d.payload.first()) {
                // The server answers probes; the load ends there.
                (true, Some(1)) => {
                    net.send(net.rev, &[2u8; REP]);
                }
                (true, _) => {}
                (false, _) => c.on_reply_bytes(d.payload.len(), net.ca.at(now), &mut rtts),
            }
        }
        if rtts.is_empty() {
            let next = [net.next_arrival(), wake, Some(next_load)]
                .into_iter()
                .flatten()
                .filter(|&t| t > now)
                .min();
            net.advance_to(next.expect("the load never stops"));
            continue;
        }
        // A reply came: the client may probe again at once.
        for t in rtts.drain(..) {
            if t.idle { &mut idle } else { &mut loaded }.record_ns(t.ns);
        }
    }
}

#[test]
fn loaded_probes_wait_behind_the_standing_queue() {
    let (idle, loaded, sent) = run();
    // One probe every 10 ms while the round trip is shorter; under load (about 24 ms)
    // the next goes as the last one's reply arrives: the period is a floor.
    assert_eq!(idle.len(), 50);
    assert_eq!(sent, 50 + loaded.len() + 1, "and one in flight at the end");
    assert!((20..=24).contains(&loaded.len()), "{}", loaded.len());
    // Idle: 2 ms each way; the first probe waits 100 µs for its tokens (the buckets
    // start empty), the others find them full.
    let i = idle.stats().expect("idle probes");
    assert!(
        (i.min_ms - 4.0).abs() < 0.005 && (i.max_ms - 4.1).abs() < 0.005,
        "{i:?}"
    );
    // Loaded: up to 20 000 bytes ahead at 1 000 bytes a millisecond, up to 20 ms more
    // (the queue ebbs a little as the probes thin out).
    let l = loaded.stats().expect("loaded probes");
    assert!(l.min_ms >= 20.5 && l.max_ms <= 24.2, "{l:?}");
    let (ri, rl) = (idle.rpm().unwrap(), loaded.rpm().unwrap());
    assert!((ri - 60.0 / 0.004).abs() < 60.0, "idle RPM {ri}");
    assert!(
        (60.0 / 0.0242..=60.0 / 0.021).contains(&rl),
        "loaded RPM {rl}"
    );
}
