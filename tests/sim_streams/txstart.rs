//! `--txstart-time` on virtual time: the machine sleeps towards a wall-clock instant
//! on its host's clock, so a host whose clock is off starts off by as much in true
//! time, and reports itself on time.

use crate::world::{Host, WALL0_S};
use netmeter::engine::machine::txstart;
use std::time::Duration;

/// Sleep as the engine does (`profile::sleep_until`) on `host`'s clock from `now`;
/// the true time it wakes and how many sleeps it took.
fn wake(host: &Host, at: f64, lead_s: f64, mut now: u64) -> (u64, u32) {
    let mut sleeps = 0;
    while let Some(d) = txstart::wait(at, lead_s, host.wall_s(now)) {
        assert!(d <= txstart::MAX_SLEEP);
        now += d.as_nanos() as u64;
        sleeps += 1;
        assert!(sleeps < 100, "no end to the wait");
    }
    (now, sleeps)
}

#[test]
fn a_host_whose_clock_is_ahead_starts_that_much_early() {
    let host = Host::new(250_000_000);
    let at = (WALL0_S + 10) as f64;
    let ready = host.wall_s(0);
    let (t, sleeps) = wake(&host, at, 0.0, 0);
    // True time 9.75 s; the wall clock's f64 seconds resolve ~0.24 µs here.
    assert!(t.abs_diff(9_750_000_000) < 1_000, "woke at {t} ns");
    assert_eq!(sleeps, 10, "nine whole seconds, then the rest");
    let ts = txstart::started(at, ready, host.wall_s(t));
    assert!(ts.late_ms.abs() < 0.001, "{ts:?}");
    assert!(ts.ready.unwrap() < at, "{ts:?}");
}

#[test]
fn the_connect_lead_and_then_the_instant() {
    // A clock 40 ms behind: the lead ends 5 s before, the start 40 ms after true time.
    let host = Host::new(-40_000_000);
    let at = (WALL0_S + 8) as f64;
    let (lead_end, _) = wake(&host, at, 5.0, 0);
    assert!(lead_end.abs_diff(3_040_000_000) < 1_000, "{lead_end}");
    let (start, sleeps) = wake(&host, at, 0.0, lead_end);
    assert!(start.abs_diff(8_040_000_000) < 1_000, "{start}");
    assert_eq!(sleeps, 5);
}

#[test]
fn a_time_already_past_starts_at_once_and_says_how_late() {
    let host = Host::new(0);
    let at = WALL0_S as f64 + 1.0;
    let now = 1_500_000_000;
    assert_eq!(wake(&host, at, 0.0, now), (now, 0));
    let ts = txstart::started(at, host.wall_s(now), host.wall_s(now));
    assert!((ts.late_ms - 500.0).abs() < 0.001, "{ts:?}");
    assert!(
        txstart::lateness_cause(&ts).starts_with("setup ended 500 ms after"),
        "{ts:?}"
    );
    assert_eq!(
        txstart::wait(at, 0.0, at - 0.25),
        Some(Duration::from_millis(250))
    );
}
