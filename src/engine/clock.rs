//! Wall-clock time for timestamps that cross the network, and the clock-offset probes
//! on the control connection.
//!
//! Every wall-clock reading netmeter puts on the wire or compares with one goes through
//! [`wall_ns`]. `NETMETER_TEST_CLOCK_OFFSET_MS` shifts it, so tests can skew one host's
//! clock on purpose; it is read once and is meant for tests only.

use super::ctrl::{Ctrl, CtrlError};
use crate::clock::Clock;
use crate::clocksync::{self, ClockEstimate, Probe};
use crate::report::Timestamp;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The clock one-way delays are measured with.
pub const CLOCK_NAME: &str = "CLOCK_REALTIME";

/// How many probes the client sends during setup.
pub const PROBES: usize = 8;

/// The test-only skew applied to this process's wall clock, in ns (0 normally).
pub fn test_offset_ns() -> i64 {
    static OFF: OnceLock<i64> = OnceLock::new();
    *OFF.get_or_init(|| {
        std::env::var("NETMETER_TEST_CLOCK_OFFSET_MS")
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|ms| (ms * 1e6) as i64)
            .unwrap_or(0)
    })
}

/// Nanoseconds since the Unix epoch on this host's (possibly test-skewed) wall clock,
/// for a data thread not given a [`Clock`]; [`wall_ns_on`] reads the clock it is given.
pub fn wall_ns() -> i64 {
    skewed_ns(crate::clock::wall_now())
}

/// Nanoseconds since the Unix epoch on `clock`'s wall clock, with the test skew.
pub fn wall_ns_on(clock: &dyn Clock) -> i64 {
    skewed_ns(clock.wall())
}

fn skewed_ns(wall: SystemTime) -> i64 {
    let d = wall.duration_since(UNIX_EPOCH).unwrap_or_default();
    d.as_nanos() as i64 + test_offset_ns()
}

/// `start.timestamp` for the wall-clock time `wall`.
pub fn timestamp_at(wall: SystemTime) -> Timestamp {
    let d = wall.duration_since(UNIX_EPOCH).unwrap_or_default();
    Timestamp {
        time: httpdate(d.as_secs()),
        timesecs: d.as_secs(),
        timemillisecs: d.as_millis() as u64,
    }
}

/// RFC 1123 date in GMT, as iperf3 writes `start.timestamp.time`.
pub fn httpdate(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs / 86400;
    let rem = secs % 86400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        d,
        MONTHS[(m - 1) as usize],
        y,
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Year, month (1-12) and day (1-31) of a day counted from 1970-01-01 (Howard
/// Hinnant's civil-from-days algorithm).
pub fn civil_from_days(days: u64) -> (i64, i64, i64) {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    (y, m, d)
}

/// Client side: send `PROBES` probes, then tell the server the estimate.
pub fn sync_client(ctrl: &mut Ctrl) -> Result<ClockEstimate, CtrlError> {
    let mut probes = Vec::with_capacity(PROBES);
    for _ in 0..PROBES {
        let t1 = wall_ns();
        ctrl.write(&t1.to_be_bytes(), "a clock probe")?;
        let mut b = [0u8; 24];
        ctrl.read_exact(&mut b, Duration::from_secs(5), "a clock probe answer")?;
        let t4 = wall_ns();
        probes.extend(Probe::from_answer(t1, &b, t4));
    }
    let est = clocksync::estimate(&probes).unwrap_or_default();
    ctrl.write(&est.to_wire(), "the clock estimate")?;
    Ok(est)
}

/// Server side: answer the client's probes and read its estimate.
pub fn sync_server(ctrl: &mut Ctrl) -> Result<ClockEstimate, CtrlError> {
    for _ in 0..PROBES {
        let mut b = [0u8; 8];
        ctrl.read_exact(&mut b, Duration::from_secs(5), "a clock probe")?;
        let t2 = wall_ns();
        let mut out = [0u8; 24];
        out[..8].copy_from_slice(&b);
        out[8..16].copy_from_slice(&t2.to_be_bytes());
        let t3 = wall_ns();
        out[16..].copy_from_slice(&t3.to_be_bytes());
        ctrl.write(&out, "a clock probe answer")?;
    }
    let mut m = [0u8; 16];
    ctrl.read_exact(&mut m, Duration::from_secs(5), "the clock estimate")?;
    Ok(ClockEstimate::from_wire(&m, PROBES as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1123_dates() {
        assert_eq!(httpdate(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(httpdate(1_700_000_000), "Tue, 14 Nov 2023 22:13:20 GMT");
    }

    #[test]
    fn the_start_timestamp_and_wire_time_come_from_the_clock_given() {
        let c = crate::clock::ManualClock::at_unix(1_700_000_000);
        c.advance(Duration::from_millis(1_250));
        let t = timestamp_at(c.wall());
        assert_eq!(t.time, "Tue, 14 Nov 2023 22:13:21 GMT");
        assert_eq!(
            (t.timesecs, t.timemillisecs),
            (1_700_000_001, 1_700_000_001_250)
        );
        assert_eq!(wall_ns_on(&c) - test_offset_ns(), 1_700_000_001_250_000_000);
    }
}
