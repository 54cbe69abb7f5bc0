//! Loss, reordering, duplicates and jitter against the simulator's record.

use super::*;

fn lossy(seed: u64, link: LinkConfig) -> UdpTest {
    UdpTest {
        seed,
        rate_bps: 8_000_000,
        len: 1000,
        end: EndCondition::Time(4.0),
        link: LinkConfig {
            delay: ms(10),
            ..link
        },
        ..UdpTest::default()
    }
}

fn lost_by_link(o: &UdpOutcome) -> usize {
    o.record.iter().filter(|r| r.fate == Fate::Lost).count()
}

#[test]
fn bernoulli_loss_is_counted_exactly() {
    let o = run(&lossy(
        3,
        LinkConfig {
            loss: Loss::Bernoulli { p: 0.03 },
            ..LinkConfig::default()
        },
    ));
    check_accounting(&o);
    let (distinct, max, _, _) = truth(&o);
    // Every loss the link made before the last datagram is in the report.
    let before_last = o
        .record
        .iter()
        .filter(|r| r.fate == Fate::Lost && o.seqs[r.id as usize] < max)
        .count() as u64;
    assert_eq!(u(&udp_end(&o)["lost_packets"]), before_last);
    assert_eq!(max - distinct, before_last);
    assert!(lost_by_link(&o) > 80, "{}", lost_by_link(&o));
}

#[test]
fn gilbert_elliott_loss_is_counted_exactly() {
    let o = run(&lossy(
        4,
        LinkConfig {
            loss: Loss::GilbertElliott {
                p: 0.005,
                r: 0.2,
                loss_good: 0.001,
                loss_bad: 0.7,
            },
            ..LinkConfig::default()
        },
    ));
    check_accounting(&o);
    assert!(lost_by_link(&o) > 20);
}

#[test]
fn queue_drops_at_a_bottleneck_are_loss() {
    let mut t = lossy(
        5,
        LinkConfig {
            rate_bps: 6_000_000,
            queue_limit_bytes: 30_000,
            ..LinkConfig::default()
        },
    );
    t.drain = Duration::from_secs(1);
    let o = run(&t);
    check_accounting(&o);
    let dropped = o
        .record
        .iter()
        .filter(|r| r.fate == Fate::QueueDropped)
        .count();
    // 8 Mbit/s into 6 Mbit/s for 4 s: about a quarter is dropped.
    assert!(dropped > 800, "{dropped}");
    assert_eq!(u(&udp_end(&o)["lost_packets"]) as usize, dropped);
}

#[test]
fn reordering_is_counted_exactly() {
    let o = run(&lossy(
        6,
        LinkConfig {
            reorder_p: 0.05,
            reorder_delay: ms(4),
            ..LinkConfig::default()
        },
    ));
    check_accounting(&o);
    let (_, _, ooo, _) = truth(&o);
    assert!(ooo > 100, "{ooo}");
    // Late arrivals fill their gaps: nothing is lost in the end.
    assert_eq!(u(&udp_end(&o)["lost_packets"]), 0);
}

#[test]
fn duplicates_are_counted_and_do_not_hide_loss() {
    let o = run(&lossy(
        7,
        LinkConfig {
            duplicate_p: 0.04,
            loss: Loss::Bernoulli { p: 0.02 },
            jitter: Jitter::Uniform { spread: ms(1) },
            ..LinkConfig::default()
        },
    ));
    check_accounting(&o);
    let dups = o
        .record
        .iter()
        .filter(|r| matches!(&r.fate, Fate::Delivered(c) if c.len() == 2))
        .count() as u64;
    assert_eq!(u(&udp_end(&o)["netmeter"]["duplicates"]), dups);
    assert!(dups > 50);
}

#[test]
fn everything_at_once_is_counted_exactly() {
    let o = run(&lossy(
        8,
        LinkConfig {
            rate_bps: 9_000_000,
            queue_limit_bytes: 20_000,
            jitter: Jitter::Normal { sd: ms(2) },
            loss: Loss::GilbertElliott {
                p: 0.01,
                r: 0.3,
                loss_good: 0.0,
                loss_bad: 0.5,
            },
            reorder_p: 0.02,
            reorder_delay: ms(5),
            duplicate_p: 0.02,
            ..LinkConfig::default()
        },
    ));
    check_accounting(&o);
}

#[test]
fn uniform_jitter_matches_rfc3550_and_the_distribution() {
    // Less than the 1 ms between datagrams, so they stay in order: in arrival order
    // reordered pairs would weigh more.
    let spread = Duration::from_micros(300);
    let o = run(&lossy(
        9,
        LinkConfig {
            jitter: Jitter::Uniform { spread },
            ..LinkConfig::default()
        },
    ));
    check_accounting(&o);
    // E|D| for the difference of two uniforms on [-s, s] is 2s/3: 0.2 ms. The estimator
    // is a 1/16 running mean of |D|, so it scatters around that.
    let j = udp_end(&o)["jitter_ms"].as_f64().unwrap_or_default();
    assert!((j - 0.2).abs() < 0.05, "{j}");
}

#[test]
fn normal_jitter_matches_rfc3550_and_the_distribution() {
    let o = run(&lossy(
        10,
        LinkConfig {
            delay: ms(20),
            jitter: Jitter::Normal {
                sd: Duration::from_micros(200),
            },
            ..LinkConfig::default()
        },
    ));
    check_accounting(&o);
    // E|D| for the difference of two N(0, σ²) is 2σ/√π: 0.226 ms.
    let j = udp_end(&o)["jitter_ms"].as_f64().unwrap_or_default();
    assert!((j - 0.226).abs() < 0.06, "{j}");
}

#[test]
fn a_clean_link_has_no_loss_no_reordering_and_no_jitter() {
    let o = run(&lossy(11, LinkConfig::default()));
    check_accounting(&o);
    let e = udp_end(&o);
    assert_eq!((u(&e["lost_packets"]), u(&e["out_of_order"])), (0, 0));
    // Only the header's microsecond stamps vary the transit: under a microsecond.
    assert!(e["jitter_ms"].as_f64().unwrap_or(1.0) < 0.001, "{e}");
}
