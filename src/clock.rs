//! Where netmeter reads the time: the one seam between its logic and the host's clocks.
//!
//! Code that needs the time is given a [`Clock`] (or a `now` taken from one) instead of
//! calling `Instant::now()` or `SystemTime::now()` itself. Production passes
//! [`SystemClock`]; tests and the simulator pass a [`ManualClock`], whose time moves only
//! when they move it, so the same code runs on virtual time and gives the same answer
//! every run. This file and `sock` are the only places that read the host's clocks.
//!
//! Two readings, as the kernel has them: the monotonic clock (`now`), for measuring
//! durations, deadlines and schedules, and the wall clock (`wall`), for labels, file
//! names and timestamps that cross the network (one-way delay, `--txstart-time`).

use std::fmt;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A source of time.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The monotonic clock: for durations, deadlines and pacing schedules.
    fn now(&self) -> Instant;
    /// The wall clock: for timestamps shown to people or sent to a peer.
    fn wall(&self) -> SystemTime;

    /// The wall clock as nanoseconds since the Unix epoch (0 before it).
    fn wall_ns(&self) -> i64 {
        self.wall()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64)
    }
}

/// The host's clocks.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn wall(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// The host's clocks, shared: what production code passes where an `Arc<dyn Clock>` is
/// kept.
pub fn system() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

/// The host's monotonic clock, for I/O code with no clock of its own to hand (a
/// deadline around a system call). Logic takes its time as an argument instead.
pub fn mono_now() -> Instant {
    Instant::now()
}

/// The host's wall clock, for I/O code with no clock of its own to hand.
pub fn wall_now() -> SystemTime {
    SystemTime::now()
}

/// A clock that moves only when told to: virtual time for tests and the simulator.
///
/// Its monotonic time starts at an `Instant` fixed when it is made and its wall time at
/// the `wall` given; [`ManualClock::advance`] moves both by the same amount, and
/// [`ManualClock::set_wall_offset`] skews the wall clock alone (a host whose clock is
/// wrong). Clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    base: Instant,
    inner: Arc<Mutex<ManualState>>,
}

#[derive(Debug)]
struct ManualState {
    elapsed: Duration,
    wall_start: SystemTime,
    wall_offset_ns: i64,
}

impl ManualClock {
    /// A clock at virtual time zero whose wall clock reads `wall`.
    pub fn new(wall: SystemTime) -> ManualClock {
        ManualClock {
            base: Instant::now(),
            inner: Arc::new(Mutex::new(ManualState {
                elapsed: Duration::ZERO,
                wall_start: wall,
                wall_offset_ns: 0,
            })),
        }
    }

    /// A clock whose wall clock starts at `secs` after the Unix epoch.
    pub fn at_unix(secs: u64) -> ManualClock {
        ManualClock::new(UNIX_EPOCH + Duration::from_secs(secs))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ManualState> {
        // A panic elsewhere while holding the lock leaves the numbers intact.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Move time forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.state().elapsed += d;
    }

    /// Move time forward to `t` (no change if `t` is not later than now).
    pub fn advance_to(&self, t: Instant) {
        let target = t.saturating_duration_since(self.base);
        let mut s = self.state();
        if target > s.elapsed {
            s.elapsed = target;
        }
    }

    /// How far this clock has moved since it was made.
    pub fn elapsed(&self) -> Duration {
        self.state().elapsed
    }

    /// Skew the wall clock by `ns` (positive: it reads later than true time).
    pub fn set_wall_offset(&self, ns: i64) {
        self.state().wall_offset_ns = ns;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.base + self.state().elapsed
    }
    fn wall(&self) -> SystemTime {
        let s = self.state();
        let t = s.wall_start + s.elapsed;
        let off = s.wall_offset_ns;
        if off >= 0 {
            t + Duration::from_nanos(off as u64)
        } else {
            t.checked_sub(Duration::from_nanos(off.unsigned_abs()))
                .unwrap_or(UNIX_EPOCH)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let c = ManualClock::at_unix(1_700_000_000);
        let t0 = c.now();
        assert_eq!(c.now(), t0);
        assert_eq!(c.wall_ns(), 1_700_000_000 * 1_000_000_000);
        c.advance(Duration::from_millis(1500));
        assert_eq!(c.now() - t0, Duration::from_millis(1500));
        assert_eq!(c.wall_ns(), 1_700_000_001_500_000_000);
        c.advance_to(t0 + Duration::from_secs(1));
        assert_eq!(c.now() - t0, Duration::from_millis(1500), "never backwards");
        c.advance_to(t0 + Duration::from_secs(2));
        assert_eq!(c.elapsed(), Duration::from_secs(2));
    }

    #[test]
    fn a_skewed_wall_clock_leaves_the_monotonic_one_alone() {
        let c = ManualClock::at_unix(1000);
        let t0 = c.now();
        c.set_wall_offset(-250_000_000);
        assert_eq!(c.wall_ns(), 999_750_000_000);
        assert_eq!(c.now(), t0);
        let shared = c.clone();
        shared.advance(Duration::from_secs(1));
        assert_eq!(c.wall_ns(), 1_000_750_000_000);
    }

    #[test]
    fn the_system_clock_moves_forward() {
        let c = SystemClock;
        let a = c.now();
        assert!(c.now() >= a);
        assert!(c.wall_ns() > 1_600_000_000 * 1_000_000_000);
    }
}
