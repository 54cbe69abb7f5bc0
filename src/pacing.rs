//! Rate pacing math for `-b RATE[/BURST]`, with time passed in.
//!
//! A token bucket per stream: credit accrues at the target rate; a send of `n` bytes is
//! allowed when the bucket holds `n`. The bucket holds at most [`DEPTH_S`] of traffic (or
//! one burst, if larger): that is the most that ever leaves back to back.
//!
//! Policy after a stall (the sender thread was not scheduled, or the socket blocked):
//! credit that overflowed the bucket during the stall, up to [`CATCH_UP_S`] of traffic,
//! is made up **at no more than twice the target rate**; older missed credit is
//! forfeited. So a short stall does not lower the interval's rate, and no stall ever
//! produces a line-rate burst. iperf3, by contrast, paces against the since-start
//! average and sends everything it missed as fast as it can. A stall longer than
//! [`CATCH_UP_S`] shows up as a lower rate in the interval that contains it, which is
//! the truth about that interval.
//!
//! The pacer also keeps the most the sender was ever owed ([`Pacer::max_lag_s`]): how far
//! behind its schedule a stall put it. A stall of `S` seconds on a path at its capacity
//! queues about `S` seconds of traffic there, so this figure tells a queue the sender made
//! from one the path made.

use std::time::Duration;

/// How much traffic, in seconds at the target rate, the bucket may hold.
pub const DEPTH_S: f64 = 0.010;
/// How much missed traffic, in seconds at the target rate, is made up after a stall.
pub const CATCH_UP_S: f64 = 0.100;

/// Token-bucket pacer. Times are seconds on any monotonic clock.
#[derive(Debug, Clone)]
pub struct Pacer {
    bytes_per_s: f64,
    depth_bytes: f64,
    credit: f64,
    /// Missed credit still to be made up (at most `CATCH_UP_S` of traffic).
    debt: f64,
    last_s: f64,
    /// The most credit plus debt seen at a refill, bytes.
    max_owed: f64,
}

impl Pacer {
    /// A pacer for `rate_bps` bits/s sending `unit` bytes per send, allowing `burst`
    /// sends back to back.
    pub fn new(rate_bps: u64, unit: usize, burst: Option<u32>, now_s: f64) -> Pacer {
        let bytes_per_s = rate_bps as f64 / 8.0;
        let depth_bytes = match burst {
            Some(b) => (b.max(1) as f64) * unit as f64,
            None => 0.0,
        }
        .max(bytes_per_s * DEPTH_S)
        .max(unit as f64);
        Pacer {
            bytes_per_s,
            depth_bytes,
            // Start with one send's worth so the first datagram leaves at once.
            credit: unit as f64,
            debt: 0.0,
            last_s: now_s,
            max_owed: 0.0,
        }
    }

    fn refill(&mut self, now_s: f64) {
        if now_s > self.last_s {
            let accrued = (now_s - self.last_s) * self.bytes_per_s;
            // Repay debt at up to the target rate again (so at most twice the rate).
            let repay = self.debt.min(accrued);
            self.debt -= repay;
            let total = self.credit + accrued + repay;
            let overflow = (total - self.depth_bytes).max(0.0);
            self.credit = total - overflow;
            // What did not fit the bucket is remembered, up to the catch-up window.
            self.debt = (self.debt + overflow).min(self.bytes_per_s * CATCH_UP_S);
            self.last_s = now_s;
            self.max_owed = self.max_owed.max(self.credit + self.debt);
        }
    }

    /// The furthest the sender fell behind its schedule, in seconds at the target rate:
    /// the most it was owed at any one time (what had accrued since its last send, the
    /// overflow of a stall included, up to the bucket plus [`CATCH_UP_S`]). A sender that
    /// keeps up stays near one send's worth (or one burst's); a stall of 30 ms shows as
    /// about 30 ms. Zero for an unpaced sender.
    pub fn max_lag_s(&self) -> f64 {
        if self.bytes_per_s > 0.0 {
            self.max_owed / self.bytes_per_s
        } else {
            0.0
        }
    }

    /// Grant between `min_units` and `max_units` sends of `unit` bytes now (consuming
    /// the credit), or say how long to wait until `min_units` are allowed.
    pub fn grant(
        &mut self,
        now_s: f64,
        unit: usize,
        min_units: usize,
        max_units: usize,
    ) -> Result<usize, Duration> {
        self.refill(now_s);
        let unit_f = unit.max(1) as f64;
        if self.bytes_per_s <= 0.0 {
            return Ok(max_units);
        }
        let avail = (self.credit / unit_f).floor() as usize;
        if avail >= min_units.max(1) {
            let k = avail.min(max_units.max(1));
            self.credit -= k as f64 * unit_f;
            return Ok(k);
        }
        let need = min_units.max(1) as f64 * unit_f - self.credit;
        Err(Duration::from_secs_f64(
            (need / self.bytes_per_s).clamp(1e-6, 1.0),
        ))
    }

    /// How long to wait before `n` bytes may be sent; zero means "send now" (and the
    /// credit is consumed).
    pub fn poll(&mut self, now_s: f64, n: usize) -> Duration {
        self.refill(now_s);
        let need = n as f64;
        if self.credit >= need || self.bytes_per_s <= 0.0 {
            self.credit -= need;
            return Duration::ZERO;
        }
        let wait = ((need - self.credit) / self.bytes_per_s).max(1e-6);
        Duration::from_secs_f64(wait.min(1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drive a pacer with a fake clock: jump to the next allowed send each time.
    fn run(p: &mut Pacer, unit: usize, until_s: f64, mut now: f64) -> (u64, f64) {
        let mut sent = 0u64;
        while now < until_s {
            let w = p.poll(now, unit);
            if w.is_zero() {
                sent += unit as u64;
            } else {
                now += w.as_secs_f64();
            }
        }
        (sent, now)
    }

    #[test]
    fn holds_rate_within_one_percent() {
        for &rate in &[10_000u64, 100_000, 10_000_000, 500_000_000, 10_000_000_000] {
            let unit = 1448;
            let mut p = Pacer::new(rate, unit, None, 0.0);
            let (sent, _) = run(&mut p, unit, 1.0, 0.0);
            let got = sent as f64 * 8.0;
            let err = (got - rate as f64).abs() / rate as f64;
            // At 10 kbit/s one datagram is 1.16% of a second's worth; allow one unit.
            assert!(
                err < 0.01 || (got - rate as f64).abs() <= unit as f64 * 8.0,
                "rate {rate}: sent {got} bits"
            );
        }
    }

    #[test]
    fn stall_is_made_up_at_twice_the_rate_never_as_a_burst() {
        let unit = 1000;
        let mut p = Pacer::new(8_000_000, unit, None, 0.0); // 1 MB/s: depth 10 kB
        let (_, now) = run(&mut p, unit, 0.5, 0.0);
        // A 50 ms stall: only the bucket (10 sends) goes out back to back...
        let mut now = now + 0.05;
        let mut back_to_back = 0;
        while p.poll(now, unit).is_zero() {
            back_to_back += 1;
        }
        assert_eq!(back_to_back, 10);
        // ...and the other 40 ms are made up at 2x: over the next 40 ms, 80 kB go out.
        let start = now;
        let mut sent = 0;
        while now < start + 0.040 {
            match p.grant(now, unit, 1, 1) {
                Ok(k) => sent += k * unit,
                Err(w) => now += w.as_secs_f64(),
            }
        }
        assert!((77_000..=81_000).contains(&sent), "{sent}");
        // Debt repaid: back to the plain rate.
        let (later, _) = run(&mut p, unit, now + 0.1, now);
        assert!((99_000..=103_000).contains(&later), "{later}");
    }

    #[test]
    fn interval_with_short_stall_still_holds_rate() {
        let unit = 1448;
        let rate = 10_000_000u64;
        let mut p = Pacer::new(rate, unit, None, 0.0);
        let (mut now, mut sent) = (0.0, 0u64);
        while now < 1.0 {
            if (0.3..0.35).contains(&now) {
                now = 0.35; // a 50 ms stall
            }
            match p.grant(now, unit, 1, 64) {
                Ok(k) => sent += (k * unit) as u64,
                Err(w) => now += w.as_secs_f64(),
            }
        }
        let err = (sent as f64 * 8.0 - rate as f64).abs() / rate as f64;
        assert!(err < 0.01, "error {err}");
    }

    #[test]
    fn long_stall_is_partly_forfeited() {
        let unit = 1000;
        let mut p = Pacer::new(8_000_000, unit, None, 0.0);
        // 1 s of silence: at most depth + catch-up window (10 + 100 ms) is made up.
        let (sent, _) = run(&mut p, unit, 1.5, 1.0);
        assert!(sent <= 500_000 + 110_000 + 2 * unit as u64, "{sent}");
        assert!(sent >= 500_000 + 100_000, "{sent}");
    }

    #[test]
    fn lag_is_one_send_when_keeping_up_and_the_stall_after_one() {
        let unit = 1000;
        let mut p = Pacer::new(8_000_000, unit, None, 0.0); // 1 MB/s: 1 ms per send
        let (_, now) = run(&mut p, unit, 0.5, 0.0);
        assert!(p.max_lag_s() <= 0.001 + 1e-9, "{}", p.max_lag_s());
        // A 30 ms stall: 10 ms in the bucket, 20 ms of debt, owed 30 ms in all (plus
        // what was left of the last send's credit, under 1 ms).
        p.grant(now + 0.030, unit, 1, 1).unwrap();
        let lag = p.max_lag_s();
        assert!((0.030..=0.031 + 1e-9).contains(&lag), "{lag}");
        // A shorter stall later does not lower it; a 1 s one is capped at 110 ms.
        run(&mut p, unit, now + 1.0, now + 0.030);
        assert_eq!(p.max_lag_s(), lag);
        p.grant(now + 2.0, unit, 1, 1).unwrap();
        assert!((p.max_lag_s() - (DEPTH_S + CATCH_UP_S)).abs() < 1e-6);
        assert_eq!(Pacer::new(0, unit, None, 0.0).max_lag_s(), 0.0);
    }

    #[test]
    fn grant_batches_what_the_bucket_allows() {
        let unit = 1000;
        let mut p = Pacer::new(8_000_000, unit, None, 0.0);
        assert_eq!(p.grant(0.0, unit, 1, 32), Ok(1)); // the initial send
        assert!(p.grant(0.0, unit, 1, 32).is_err());
        assert_eq!(p.grant(0.005, unit, 1, 32), Ok(5)); // 5 ms at 1 MB/s
        assert_eq!(p.grant(1.0, unit, 1, 32), Ok(10)); // capped by the 10 ms depth
        let wait = p.grant(1.0, unit, 1, 32).unwrap_err();
        assert!((wait.as_secs_f64() - 0.001).abs() < 1e-9);
    }

    #[test]
    fn grant_holds_rate_with_late_wakeups() {
        // A sender that always oversleeps by 3 ms still gets the full rate.
        let unit = 1448;
        for &rate in &[10_000_000u64, 500_000_000] {
            let mut p = Pacer::new(rate, unit, None, 0.0);
            let (mut now, mut sent) = (0.0, 0u64);
            while now < 1.0 {
                match p.grant(now, unit, 1, 64) {
                    Ok(k) => sent += (k * unit) as u64,
                    Err(w) => now += w.as_secs_f64() + 0.003,
                }
            }
            let err = (sent as f64 * 8.0 - rate as f64).abs() / rate as f64;
            assert!(err < 0.01, "rate {rate}: error {err}");
        }
    }

    #[test]
    fn burst_sends_that_many_per_tick() {
        let unit = 100;
        let mut p = Pacer::new(80_000, unit, Some(5), 0.0); // 10 kB/s, 5 x 100 B bursts
        let mut now = 0.0;
        // After the first send, wait for a full bucket: 5 sends back to back.
        assert!(p.poll(now, unit).is_zero());
        now += 0.05;
        let mut n = 0;
        while p.poll(now, unit).is_zero() {
            n += 1;
        }
        assert_eq!(n, 5);
    }
}
