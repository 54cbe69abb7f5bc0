//! One seed, one run: byte-identical reports, invariants over a range of seeds, and
//! pinned snapshots.

use super::*;
use std::path::PathBuf;

fn rough(seed: u64) -> UdpTest {
    UdpTest {
        seed,
        rate_bps: 6_000_000,
        len: 1200,
        end: EndCondition::Time(3.0),
        interval: Some(ms(500)),
        trip_times: true,
        link: LinkConfig {
            rate_bps: 7_000_000,
            queue_limit_bytes: 24_000,
            delay: ms(15),
            // Uniform, not normal: its draws are plain arithmetic, while the normal's
            // logarithm and cosine come from the platform's libm, so a pinned report
            // could differ between machines.
            jitter: Jitter::Uniform { spread: ms(3) },
            loss: Loss::GilbertElliott {
                p: 0.01,
                r: 0.25,
                loss_good: 0.001,
                loss_bad: 0.6,
            },
            reorder_p: 0.02,
            reorder_delay: ms(6),
            duplicate_p: 0.01,
            ..LinkConfig::default()
        },
        server_clock: HostConfig {
            offset_ns: 2_500_000,
            drift_ppb: 30_000,
        },
        clock: Some(netmeter::clocksync::ClockEstimate {
            offset_ns: 2_500_000,
            uncertainty_ns: 15_000_000,
            rtt_ns: 30_000_000,
            probes: 8,
        }),
        owd_correction_ns: -2_500_000,
        ..UdpTest::default()
    }
}

#[test]
fn the_same_seed_gives_byte_identical_reports() {
    let (a, b) = (run(&rough(77)), run(&rough(77)));
    assert_eq!(a.json(), b.json());
    assert_eq!(a.record, b.record);
    assert_ne!(a.json(), run(&rough(78)).json());
}

#[test]
fn every_seed_in_a_range_keeps_the_invariants() {
    for seed in 0..16 {
        let o = run(&rough(seed));
        check_accounting(&o);
        // The sender's report is what it put on the link.
        let c = v(&o.client);
        let sent: u64 = o.record.iter().map(|r| r.bytes).sum();
        assert_eq!(u(&c["end"]["sum_sent"]["bytes"]), sent, "seed {seed}");
        // The receiver took only what the link delivered, each copy once.
        let copies: usize = o
            .record
            .iter()
            .map(|r| match &r.fate {
                Fate::Delivered(c) => c.len(),
                _ => 0,
            })
            .sum();
        assert!(o.arrived.len() <= copies, "seed {seed}");
        let mut ids: Vec<(u64, bool)> = Vec::new();
        for a in &o.arrived {
            let Fate::Delivered(c) = &o.record[a.id as usize].fate else {
                panic!("seed {seed}: took a packet the link did not deliver")
            };
            let copy = c
                .iter()
                .position(|d| d.at == a.at)
                .expect("a delivered copy");
            ids.push((a.id, c[copy].duplicate));
        }
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(
            ids.len(),
            o.arrived.len(),
            "seed {seed}: a copy counted twice"
        );
        // Intervals on both sides tile the test.
        for r in [&o.client, &o.server] {
            for (k, i) in r.intervals.iter().enumerate() {
                assert_eq!(i.sum.start, k as f64 * 0.5, "seed {seed}");
            }
        }
    }
}

fn check_snapshot(name: &str, o: &UdpOutcome) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sim/snapshots")
        .join(format!("{name}.json"));
    let got = o.json();
    if std::env::var_os("NETMETER_UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("snapshot dir");
        std::fs::write(&path, &got).expect("snapshot written");
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
        "{name}: the report changed; NETMETER_UPDATE_SNAPSHOTS=1 rewrites {}",
        path.display()
    );
}

#[test]
fn snapshot_rough_link_reports() {
    check_snapshot("udp_rough_link", &run(&rough(5)));
}

#[test]
fn snapshot_clean_paced_reports() {
    let t = UdpTest {
        rate_bps: 2_000_000,
        end: EndCondition::Time(3.0),
        link: LinkConfig {
            delay: ms(5),
            ..LinkConfig::default()
        },
        ..UdpTest::default()
    };
    check_snapshot("udp_clean_paced", &run(&t));
}
