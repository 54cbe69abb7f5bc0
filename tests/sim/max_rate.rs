//! `--find-max-rate` on a simulated bottleneck with a deep queue.

use super::*;
use netmeter::clocksync::ClockEstimate;
use netmeter::engine::max_rate::figures;
use netmeter::search::{Outcome, RateSearch, Trial};

/// The search as `engine::max_rate` runs it, each trial a 2 s UDP test with
/// `--trip-times` over a 20 Mbit/s link that never drops (its queue has no limit).
fn search(link_bps: u64) -> RateSearch {
    let mut s = RateSearch::new(1_000_000, 0.0);
    let mut seed = 0;
    while let Some(rate) = s.next_rate() {
        seed += 1;
        let t = UdpTest {
            seed,
            rate_bps: rate,
            end: EndCondition::Time(2.0),
            interval: None,
            trip_times: true,
            drain: ms(100),
            link: LinkConfig {
                rate_bps: link_bps,
                delay: ms(10),
                ..LinkConfig::default()
            },
            clock: Some(ClockEstimate {
                offset_ns: 0,
                uncertainty_ns: 10_000_000,
                rtt_ns: 20_000_000,
                probes: 8,
            }),
            ..UdpTest::default()
        };
        let o = run(&t);
        let f = figures(&o.client, rate, 1, 2.0);
        s.record(Trial::of(&f, s.judge(&f)));
    }
    s
}

#[test]
fn find_max_rate_lands_within_one_bisection_step_of_the_link_rate() {
    let link = 20_000_000;
    let s = search(link);
    let Outcome::Found(best) = s.outcome() else {
        panic!("no rate passed: {:?}", s.steps)
    };
    // The last bracket is at most the resolution wide and holds the link's rate.
    let step = (s.resolution * link as f64) as u64;
    assert!(best.offered_bps <= link + link / 1000, "{:?}", s.steps);
    assert!(best.offered_bps + step >= link, "{:?}", s.steps);
    // Every rate above the link failed, every rate at or below it passed.
    for t in &s.steps {
        assert_eq!(t.pass(), t.offered_bps <= link, "{t:?}");
    }
}
