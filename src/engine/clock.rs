//! Wall-clock time for timestamps that cross the network, and the clock-offset probes
//! on the control connection.
//!
//! Every wall-clock reading netmeter puts on the wire or compares with one goes through
//! [`wall_ns`]. `NETMETER_TEST_CLOCK_OFFSET_MS` shifts it, so tests can skew one host's
//! clock on purpose; it is read once and is meant for tests only.

use super::ctrl::{Ctrl, CtrlError};
use crate::clocksync::{self, ClockEstimate, Probe};
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

/// Nanoseconds since the Unix epoch on this host's (possibly test-skewed) wall clock.
pub fn wall_ns() -> i64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    d.as_nanos() as i64 + test_offset_ns()
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
        let at = |i: usize| i64::from_be_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        // The answer echoes t1: a mismatch means the peer is confused; drop that round.
        if at(0) == t1 {
            probes.push(Probe {
                t1,
                t2: at(8),
                t3: at(16),
                t4,
            });
        }
    }
    let est = clocksync::estimate(&probes).unwrap_or_default();
    let mut msg = [0u8; 16];
    msg[..8].copy_from_slice(&est.offset_ns.to_be_bytes());
    msg[8..].copy_from_slice(&est.uncertainty_ns.to_be_bytes());
    ctrl.write(&msg, "the clock estimate")?;
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
    let offset = i64::from_be_bytes(m[..8].try_into().unwrap_or([0; 8]));
    let unc = i64::from_be_bytes(m[8..].try_into().unwrap_or([0; 8]));
    Ok(ClockEstimate {
        offset_ns: offset,
        uncertainty_ns: unc.max(0),
        rtt_ns: unc.max(0).saturating_mul(2),
        probes: PROBES as u32,
    })
}
