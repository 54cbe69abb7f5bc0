//! Interval counts, boundaries and contents.

use super::*;

fn rows(r: &netmeter::Report) -> Vec<(f64, f64, u64)> {
    r.intervals
        .iter()
        .map(|i| (i.streams[0].start, i.streams[0].end, i.streams[0].bytes))
        .collect()
}

fn paced(rate_bps: u64, secs: f64, interval: Option<Duration>) -> UdpTest {
    UdpTest {
        rate_bps,
        end: EndCondition::Time(secs),
        interval,
        link: LinkConfig {
            delay: ms(5),
            ..LinkConfig::default()
        },
        ..UdpTest::default()
    }
}

#[test]
fn t10_i1_gives_ten_one_second_intervals_on_both_sides() {
    let o = run(&paced(2_000_000, 10.0, Some(Duration::from_secs(1))));
    for r in [&o.client, &o.server] {
        let got: Vec<(f64, f64)> = rows(r).iter().map(|x| (x.0, x.1)).collect();
        let want: Vec<(f64, f64)> = (0..10).map(|k| (k as f64, k as f64 + 1.0)).collect();
        assert_eq!(got, want);
    }
}

#[test]
fn i_half_gives_twenty_half_second_intervals() {
    let o = run(&paced(2_000_000, 10.0, Some(ms(500))));
    let got: Vec<(f64, f64)> = rows(&o.client).iter().map(|x| (x.0, x.1)).collect();
    let want: Vec<(f64, f64)> = (0..20)
        .map(|k| (k as f64 * 0.5, k as f64 * 0.5 + 0.5))
        .collect();
    assert_eq!(got, want);
    assert_eq!(o.server.intervals.len(), 20);
}

#[test]
fn i0_gives_no_intervals_and_the_same_end() {
    let with = run(&paced(2_000_000, 3.0, Some(Duration::from_secs(1))));
    let without = run(&paced(2_000_000, 3.0, None));
    assert!(without.client.intervals.is_empty() && without.server.intervals.is_empty());
    assert_eq!(v(&with.client)["end"], v(&without.client)["end"]);
}

#[test]
fn a_test_that_is_not_whole_intervals_ends_with_a_short_one() {
    // -t 2.5 -i 1: 1, 1, then 0.5 (kept: over a tenth of an interval).
    let o = run(&paced(2_000_000, 2.5, Some(Duration::from_secs(1))));
    let got: Vec<(f64, f64)> = rows(&o.client).iter().map(|x| (x.0, x.1)).collect();
    assert_eq!(got, vec![(0.0, 1.0), (1.0, 2.0), (2.0, 2.5)]);
    // -t 2.05: the last 0.05 s is under a tenth and folds into the end only.
    let o = run(&paced(2_000_000, 2.05, Some(Duration::from_secs(1))));
    assert_eq!(o.client.intervals.len(), 2);
}

#[test]
fn sender_intervals_hold_exactly_what_was_sent_in_them() {
    let t = paced(3_000_000, 6.0, Some(ms(500)));
    let o = run(&t);
    for (start, end, bytes) in rows(&o.client) {
        let (s, e) = (Duration::from_secs_f64(start), Duration::from_secs_f64(end));
        let sent: u64 = o
            .record
            .iter()
            .filter(|r| r.sent >= s && r.sent < e)
            .map(|r| r.bytes)
            .sum();
        assert_eq!(bytes, sent, "[{start}, {end})");
    }
}

#[test]
fn receiver_intervals_hold_exactly_what_arrived_in_them() {
    let mut t = paced(3_000_000, 6.0, Some(ms(500)));
    t.link.jitter = Jitter::Uniform { spread: ms(3) };
    t.link.loss = Loss::Bernoulli { p: 0.02 };
    let o = run(&t);
    for (start, end, bytes) in rows(&o.server) {
        let (s, e) = (Duration::from_secs_f64(start), Duration::from_secs_f64(end));
        let got = o.arrived.iter().filter(|a| a.at > s && a.at <= e).count() as u64;
        assert_eq!(bytes, got * t.len as u64, "({start}, {end}]");
    }
}

#[test]
fn interval_sums_add_up_to_the_end_totals() {
    let mut t = paced(4_000_000, 5.0, Some(Duration::from_secs(1)));
    t.link.loss = Loss::Bernoulli { p: 0.01 };
    let o = run(&t);
    let c = v(&o.client);
    let sent: u64 = rows(&o.client).iter().map(|r| r.2).sum();
    assert_eq!(sent, u(&c["end"]["sum_sent"]["bytes"]));
    assert_eq!(sent, o.record.iter().map(|r| r.bytes).sum::<u64>());
    // The receiver's rows, and what arrived after its last row (the 5 ms the last
    // datagrams were in flight: too short a span for a row of its own), make its total.
    let received: u64 = rows(&o.server).iter().map(|r| r.2).sum();
    let last_end = Duration::from_secs_f64(rows(&o.server).last().map_or(0.0, |r| r.1));
    let after = o.arrived.iter().filter(|a| a.at > last_end).count() as u64;
    assert!(after > 0);
    assert_eq!(
        received + after * t.len as u64,
        u(&receiver_end(&o)["receiver_bytes"])
    );
    let sums: u64 = o.client.intervals.iter().map(|i| i.sum.bytes).sum();
    assert_eq!(sums, sent);
}
