//! `--repeat` and `compare` statistics on seeded simulated runs: a seed picks the
//! link (rate and delay), the run is the TCP machines over it, its report the figures
//! `experiment` summarizes. The same seeds give the same table, byte for byte.

use crate::pipe::Pipe;
use crate::tcp;
use crate::world::Host;
use netmeter::engine::machine::tcp_send::TcpSendConfig;
use netmeter::experiment::compare;
use netmeter::experiment::repeat::{self, Plan, RepeatInfo};
use netmeter::profile::Rng;
use netmeter::report::{EndSum, Report};
use std::time::Duration;

/// One `-t 1` TCP run over a link drawn from `seed`: 76 to 84 Mbit/s (95 to 105 ns a
/// byte), 4 to 6 ms one way, a 64 KiB send buffer.
pub fn seeded_run(seed: u64) -> Report {
    let mut rng = Rng::new(seed);
    let ns_per_byte = 95 + rng.next_u64() % 11;
    let delay_ns = 4_000_000 + rng.next_u64() % 2_000_001;
    let cfg = TcpSendConfig {
        block_len: 128 * 1024,
        rate_bps: 0,
        burst: None,
        end: Some(Duration::from_secs(1)),
        trip_times: false,
        ..TcpSendConfig::default()
    };
    let (a, b) = (Host::new(0), Host::new(0));
    let run = tcp::run(cfg, Pipe::new(ns_per_byte, delay_ns, 64 * 1024), &a, &b, 0);
    let sum = |bytes: u64, seconds: f64, sender: bool| EndSum {
        start: 0.0,
        end: seconds,
        seconds,
        bytes,
        bits_per_second: bytes as f64 * 8.0 / seconds,
        sender,
        ..EndSum::default()
    };
    let mut r = Report::default();
    r.start.test_start.protocol = "TCP".into();
    r.start.test_start.num_streams = 1;
    r.start.test_start.duration = 1.0;
    r.end.sum_sent = Some(sum(run.sender.bytes(), 1.0, true));
    r.end.sum_received = Some(sum(
        run.receiver.bytes(),
        run.last_read_ns as f64 / 1e9,
        false,
    ));
    r
}

/// The `--repeat` table of the runs of `seeds`.
fn table(seeds: std::ops::Range<u64>) -> String {
    let runs: Vec<Report> = seeds.map(seeded_run).collect();
    let plan = Plan::from_flags(runs.len() as u32, 0.0, None).expect("a valid plan");
    let st = repeat::statistics(&runs, plan.level);
    let info = RepeatInfo {
        plan,
        runs: runs.len(),
        ended: "all runs".into(),
    };
    repeat::table(&info, &st)
}

#[test]
fn the_same_seeds_give_the_same_repeat_table() {
    let t = table(1..6);
    assert_eq!(t, table(1..6));
    assert!(t.contains("5 runs (all runs)"), "{t}");
    assert!(t.contains("Receiver throughput"), "{t}");
    assert_ne!(t, table(6..11), "other seeds, other links");
    crate::snapshot::check("repeat_seeds_1_5.txt", &t);
}

#[test]
fn the_statistics_are_those_of_the_links_the_seeds_drew() {
    // Each run's receiver rate is the link's, less the one-way delay's share of the
    // receiver's time: mean, min and max follow from the five links alone.
    let runs: Vec<Report> = (1..6).map(seeded_run).collect();
    let st = repeat::statistics(&runs, 0.95);
    let rx = st
        .iter()
        .find(|f| f.key == "receiver_bits_per_second")
        .expect("receiver throughput");
    let xs: Vec<f64> = runs
        .iter()
        .map(|r| r.end.sum_received.as_ref().unwrap().bits_per_second)
        .collect();
    let mean = xs.iter().sum::<f64>() / 5.0;
    assert!(
        (rx.summary.mean - mean).abs() < 1e-6 * mean,
        "{:?}",
        rx.summary
    );
    assert_eq!(rx.summary.min, xs.iter().cloned().fold(f64::MAX, f64::min));
    assert!(
        rx.summary.max <= 84.3e6 && rx.summary.min >= 75.0e6,
        "{:?}",
        rx.summary
    );
    let ci = rx.ci.expect("five runs give an interval");
    assert!(ci.low < mean && mean < ci.high);
}

#[test]
fn compare_of_two_seeded_series_is_deterministic() {
    let run = |r: std::ops::Range<u64>| r.map(seeded_run).collect::<Vec<Report>>();
    let text = |b: &[Report], n: &[Report]| {
        let c = compare::compare(b, n).expect("same kind of test");
        compare::text(&c, "base", "new")
    };
    let (b, n) = (run(1..6), run(11..16));
    let first = text(&b, &n);
    assert_eq!(first, text(&run(1..6), &run(11..16)));
    assert!(first.contains("Receiver throughput"), "{first}");
    crate::snapshot::check("compare_seeds_1_5_vs_11_15.txt", &first);
    // A series against itself: no change.
    let same = compare::compare(&b, &b).expect("same kind");
    assert!(same.worse_beyond(0.0).is_empty());
}

#[test]
fn every_seed_in_a_range_gives_byte_identical_reports() {
    for seed in 0..8 {
        let a = serde_json::to_string(&seeded_run(seed)).expect("serializes");
        let b = serde_json::to_string(&seeded_run(seed)).expect("serializes");
        assert_eq!(a, b, "seed {seed}");
    }
}
