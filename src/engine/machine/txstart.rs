//! `--txstart-time`'s decisions: how long to sleep before a wall-clock instant (less a
//! lead), re-reading the clock at least once a second so a clock step is followed; and
//! the record of when the data really started.
//!
//! The instant is on the client's wall clock: a host whose clock is off by `d` starts
//! `d` early or late in true time, which is what iperf 2 does too (`--txstart-time`
//! lines clients up only as well as their clocks agree).

use crate::report::profile::TxStart;
use std::time::Duration;

/// The longest single sleep: the clock is read again after it.
pub const MAX_SLEEP: Duration = Duration::from_secs(1);

/// With the wall clock reading `wall_s` (seconds since the epoch), how long to sleep
/// before `lead_s` before `at`; `None`: that moment has come.
pub fn wait(at: f64, lead_s: f64, wall_s: f64) -> Option<Duration> {
    let left = at - lead_s - wall_s;
    (left > 0.0).then(|| Duration::from_secs_f64(left).min(MAX_SLEEP))
}

/// The client was ready (set up, about to wait for `at`) when the wall clock read
/// `ready_s`, and the data started when it read `wall_s`.
pub fn started(at: f64, ready_s: f64, wall_s: f64) -> TxStart {
    TxStart {
        requested: at,
        ready: Some(ready_s),
        started: wall_s,
        late_ms: (wall_s - at) * 1000.0,
    }
}

/// Why a start `late_ms` late was late: setup that ended after the instant, or a
/// host that woke the waiting client late (it was ready before the instant).
pub fn lateness_cause(ts: &TxStart) -> String {
    match ts.ready {
        Some(ready) if ready > ts.requested => format!(
            "setup ended {:.0} ms after --txstart-time (the time had passed, or setup took longer than allowed for)",
            (ready - ts.requested) * 1000.0
        ),
        Some(_) => "the client was ready in time; the host woke it late".into(),
        None => "the time had passed, or setup took longer than allowed for".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_in_steps_of_at_most_a_second() {
        assert_eq!(wait(100.0, 0.0, 97.5), Some(MAX_SLEEP));
        assert_eq!(wait(100.0, 0.0, 99.75), Some(Duration::from_millis(250)));
        assert_eq!(wait(100.0, 5.0, 95.0), None);
        assert_eq!(wait(100.0, 0.0, 100.5), None);
        assert_eq!(started(100.0, 99.0, 100.5).late_ms, 500.0);
    }

    #[test]
    fn lateness_is_setup_or_the_hosts_wake_up() {
        let setup = started(100.0, 100.2, 100.25);
        assert_eq!(setup.ready, Some(100.2));
        assert!(lateness_cause(&setup).starts_with("setup ended 200 ms after"));
        let woke = started(100.0, 99.9, 100.03);
        assert_eq!(
            lateness_cause(&woke),
            "the client was ready in time; the host woke it late"
        );
        let old = TxStart {
            ready: None,
            ..woke
        };
        assert!(lateness_cause(&old).contains("the time had passed"));
    }
}
