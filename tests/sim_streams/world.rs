//! Hosts on virtual time: each has its own `ManualClock` (monotonic time, and a wall
//! clock that may be off by a fixed offset), all moved together by the test's loop.

use netmeter::clock::{Clock, ManualClock};
use std::time::{Duration, Instant};

/// Every host's wall clock reads this (seconds since the epoch) at time zero, plus its
/// offset.
pub const WALL0_S: u64 = 1_700_000_000;

/// One host.
#[derive(Debug)]
pub struct Host {
    clock: ManualClock,
    origin: Instant,
}

impl Host {
    /// A host whose wall clock is `offset_ns` ahead of true time (negative: behind).
    pub fn new(offset_ns: i64) -> Host {
        let clock = ManualClock::at_unix(WALL0_S);
        clock.set_wall_offset(offset_ns);
        let origin = clock.now();
        Host { clock, origin }
    }

    /// Move this host's clocks to `ns` after time zero; its monotonic time then.
    pub fn at(&self, ns: u64) -> Instant {
        self.clock
            .advance_to(self.origin + Duration::from_nanos(ns));
        self.clock.now()
    }

    /// The monotonic instant `ns` after time zero, without moving the clock.
    pub fn instant(&self, ns: u64) -> Instant {
        self.origin + Duration::from_nanos(ns)
    }

    /// Its wall clock at `ns`, ns since the epoch.
    pub fn wall_ns(&self, ns: u64) -> i64 {
        self.at(ns);
        self.clock.wall_ns()
    }

    /// Its wall clock at `ns`, seconds since the epoch.
    pub fn wall_s(&self, ns: u64) -> f64 {
        self.wall_ns(ns) as f64 / 1e9
    }

    /// A monotonic instant of this host as ns after time zero.
    pub fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.origin).as_nanos() as u64
    }
}
