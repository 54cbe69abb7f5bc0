//! `--ecn-responsive`'s law ([`netmeter::responsive`]) on a simulated bottleneck with a
//! step marker (CE when the queue holds more than K datagrams), against a classic UDP
//! flow at the same `-b`. The receiver returns its cumulative counts once per feedback
//! round over a reverse link; the sender paces at the law's rate. Judged from the
//! simulator's record: the queue each datagram met, what it dropped and marked.

use std::path::PathBuf;
use std::time::Duration;

use netmeter::responsive::{ROUND, ResponsiveRate};
use netmeter::sim::{Ecn, EcnMark, Fate, HostConfig, LinkConfig, Sim};
use netmeter::stats::EcnCounts;
use serde::Serialize;

const LEN: usize = 1000;
const BOTTLENECK_BPS: u64 = 10_000_000;
const SEND_BPS: u64 = 20_000_000;
/// The step marker's threshold, datagrams.
const K: u64 = 10;
/// The queue's limit, datagrams.
const LIMIT: u64 = 100;
const SECONDS: u64 = 4;

/// One 100 ms slice of the run.
#[derive(Debug, Serialize)]
struct Slice {
    t_ms: u64,
    /// The rate sent in the slice, kbit/s.
    sent_kbps: u64,
    /// Datagrams sent, and how many the queue dropped or the marker marked.
    sent: u64,
    dropped: u64,
    marked: u64,
    /// The deepest queue a datagram of the slice met, datagrams.
    max_queue: u64,
}

struct Run {
    slices: Vec<Slice>,
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn encode(c: &EcnCounts) -> Vec<u8> {
    [c.not_ect, c.ect1, c.ect0, c.ce]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect()
}

fn decode(b: &[u8]) -> EcnCounts {
    let v = |i: usize| u64::from_be_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    EcnCounts {
        not_ect: v(0),
        ect1: v(1),
        ect0: v(2),
        ce: v(3),
    }
}

/// Run one flow for [`SECONDS`]: responsive (the law sets the rate) or classic (`-b`).
fn run(responsive: bool) -> Run {
    let mut sim = Sim::new(7);
    let a = sim.add_host(HostConfig::default());
    let b = sim.add_host(HostConfig::default());
    let data = sim.add_link(
        a,
        b,
        LinkConfig {
            rate_bps: BOTTLENECK_BPS,
            queue_limit_bytes: LIMIT * LEN as u64,
            delay: ms(5),
            ecn: EcnMark::QueueAbove {
                bytes: K * LEN as u64,
            },
            ..LinkConfig::default()
        },
    );
    let back = sim.add_link(
        b,
        a,
        LinkConfig {
            delay: ms(5),
            ..LinkConfig::default()
        },
    );
    let mut law = ResponsiveRate::new(SEND_BPS);
    let mut counts = EcnCounts::default();
    let end = Duration::from_secs(SECONDS);
    let (mut next_send, mut next_fb) = (Duration::ZERO, ROUND);
    while next_send < end {
        let t = next_send
            .min(next_fb)
            .min(sim.next_event().unwrap_or(Duration::MAX));
        sim.advance_to(t);
        while let Some(p) = sim.pop_delivery() {
            if p.link == data {
                counts.add(if p.ecn == Ecn::Ce { 0x03 } else { 0x01 }, 1);
            } else if p.link == back && responsive {
                law.on_feedback(p.at, decode(&p.payload));
            }
        }
        if t >= next_fb {
            sim.send(back, encode(&counts), Ecn::NotEct);
            next_fb += ROUND;
        }
        if t >= next_send {
            // Both flows send ECT: the classic one is ECN-capable but does not respond.
            sim.send(data, vec![0; LEN], Ecn::Ect);
            let rate = if responsive { law.rate() } else { SEND_BPS };
            next_send += Duration::from_nanos(LEN as u64 * 8 * 1_000_000_000 / rate.max(1));
        }
    }
    let mut slices: Vec<Slice> = (0..SECONDS * 10)
        .map(|k| Slice {
            t_ms: k * 100,
            sent_kbps: 0,
            sent: 0,
            dropped: 0,
            marked: 0,
            max_queue: 0,
        })
        .collect();
    for r in sim.record().iter().filter(|r| r.link == data) {
        let s = &mut slices[(r.sent.as_millis() / 100) as usize];
        s.sent += 1;
        s.sent_kbps += LEN as u64 * 8 * 10 / 1000;
        match &r.fate {
            Fate::QueueDropped => {
                s.dropped += 1;
                s.max_queue = s.max_queue.max(LIMIT);
            }
            Fate::Delivered(d) => {
                // The datagram waited (dequeued - sent): the bytes ahead of it at the
                // bottleneck's rate, in datagrams.
                let wait_ns = (d[0].dequeued - r.sent).as_nanos() as u64;
                let ahead = wait_ns * BOTTLENECK_BPS / 8 / LEN as u64 / 1_000_000_000;
                s.max_queue = s.max_queue.max(ahead);
                if d[0].ecn == Ecn::Ce {
                    s.marked += 1;
                }
            }
            Fate::Lost => {}
        }
    }
    Run { slices }
}

fn check_snapshot(name: &str, got: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sim/snapshots")
        .join(format!("{name}.json"));
    if std::env::var_os("NETMETER_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, got).expect("snapshot written");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (NETMETER_UPDATE_SNAPSHOTS=1 writes it)",
            path.display()
        )
    });
    assert!(
        got == want,
        "{name}: the run changed; NETMETER_UPDATE_SNAPSHOTS=1 rewrites {}",
        path.display()
    );
}

/// The last two seconds: after the start-up transient.
fn settled(r: &Run) -> &[Slice] {
    &r.slices[r.slices.len() - 20..]
}

#[test]
fn responsive_sender_converges_at_the_bottleneck_with_the_queue_near_k() {
    let r = run(true);
    let late = settled(&r);
    let sent: u64 = late.iter().map(|s| s.sent).sum();
    let rate = sent as f64 * LEN as f64 * 8.0 / 2.0;
    let b = BOTTLENECK_BPS as f64;
    assert!(
        rate > 0.8 * b && rate < 1.05 * b,
        "settled at {rate} bit/s, the bottleneck is {b}: {:#?}",
        r.slices
    );
    assert!(late.iter().all(|s| s.dropped == 0), "{:?}", r.slices);
    let deepest = late.iter().map(|s| s.max_queue).max().unwrap_or(0);
    assert!(
        deepest <= 3 * K,
        "queue reached {deepest} datagrams, K = {K}"
    );
    assert!(
        late.iter().map(|s| s.marked).sum::<u64>() > 0,
        "held near K: the marker keeps marking"
    );
    let json = serde_json::to_string_pretty(&r.slices).expect("serialises");
    check_snapshot("responsive_step_marker", &(json + "\n"));
}

#[test]
fn classic_flow_at_the_same_rate_fills_the_queue() {
    let r = run(false);
    let late = settled(&r);
    assert!(
        late.iter().all(|s| s.max_queue >= LIMIT - 1),
        "{:?}",
        r.slices
    );
    let dropped: u64 = late.iter().map(|s| s.dropped).sum();
    let sent: u64 = late.iter().map(|s| s.sent).sum();
    // Twice the bottleneck's rate offered: about half is dropped.
    assert!(dropped * 10 > sent * 4, "{dropped} of {sent} dropped");
}
