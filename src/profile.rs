//! Traffic profiles and a synchronized start, as pure math with time passed in.
//!
//! iperf 2's profiles, under iperf 2's names:
//!
//! - **Bursts** (`--burst-size BYTES --burst-period SEC`): every period the sender writes
//!   one burst of BYTES as fast as it can, then idles until the next period.
//! - **Isochronous frames** (`--isochronous FPS:MEAN,STDEV`): frames on a fixed
//!   FPS clock; each frame's size is drawn so that the per-frame bit rate
//!   (size × 8 × FPS) follows a **log-normal** distribution with the given mean and
//!   standard deviation (what iperf 2 draws). Log-normal keeps every frame positive
//!   without clipping, so the mean frame size is the requested one.
//! - **`--txstart-time EPOCH`**: data starts at a wall-clock instant (see
//!   [`check_txstart`] and [`stream_setup_lead_s`]).
//!
//! Both profiles share one [`Schedule`]: units (bursts or frames) are due on a fixed grid
//! `k × period` from the stream's start. A unit that is due is sent at once, even if it
//! is late; when the sender has fallen a whole period or more behind (a burst took longer
//! than its period, or the thread was not scheduled), the slots that have passed entirely
//! are skipped and counted as *slips* instead of being sent back to back. So a profile
//! never sends more than one unit per period, and a slow path shows up as slips.
//!
//! The engine (`engine::profile`) drives these types from the data threads; here there
//! are no sockets and no clocks, so everything is tested with a fake clock.

mod frames;

use crate::latency::Hist;
pub use crate::wire::FrameSummary;
use crate::wire::Isochronous;
pub use frames::{FrameCounts, FrameRecv};

/// Largest burst (`--burst-size`), bytes.
pub const MAX_BURST_BYTES: u64 = 1 << 30;
/// Shortest and longest `--burst-period`, seconds.
pub const MIN_PERIOD_S: f64 = 0.001;
pub const MAX_PERIOD_S: f64 = 3600.0;
/// Most frames per second (`--isochronous`).
pub const MAX_FPS: u32 = 10_000;
/// Largest mean or stdev bit rate of an isochronous stream (1 Tbit/s).
pub const MAX_ISOCH_BPS: u64 = 1_000_000_000_000;
/// A drawn frame is clamped to 1 byte ..= this many bytes.
pub const MAX_FRAME_BYTES: u64 = 1 << 30;
/// An incomplete frame counts as lost once a frame this many ids newer has arrived (so
/// datagrams reordered across up to this many frames still complete their frame).
pub const FRAME_WINDOW: usize = 8;
/// Frames of up to this many datagrams are checked for duplicates datagram by datagram
/// (a bitmap of 8 KiB at most); larger ones are only counted, so that a peer's headers
/// cannot make the receiver allocate more than `FRAME_WINDOW` such bitmaps per stream.
pub const MAX_TRACKED_DGRAMS: u32 = 1 << 16;

/// iperf 2 defaults when only one of `--burst-size` / `--burst-period` is given.
pub const DEFAULT_BURST_BYTES: u64 = 1 << 20;
pub const DEFAULT_BURST_PERIOD_S: f64 = 1.0;

/// A client's sending profile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Profile {
    /// One burst of `bytes` every `period_s`.
    Burst { bytes: u64, period_s: f64 },
    /// Isochronous frames. `framed`: the server accepted the `isochronous` extension,
    /// so every UDP datagram carries an [`IsochHeader`] and the server counts frames.
    ///
    /// `both_ways`: with `--bidir`, the server accepted `isochronous_bidir`, so its
    /// streams send frames to the client too (else the reverse half is a bulk stream).
    ///
    /// [`IsochHeader`]: crate::wire::IsochHeader
    Isochronous {
        params: Isochronous,
        framed: bool,
        both_ways: bool,
    },
}

impl Profile {
    /// The unit grid: a period of `num / den` ns (exact for frames at `fps`).
    pub fn grid(&self) -> (u64, u64) {
        match self {
            Profile::Burst { .. } => (self.period_ns(), 1),
            Profile::Isochronous { params, .. } => (1_000_000_000, u64::from(params.fps.max(1))),
        }
    }

    /// Time between units, ns (rounded).
    pub fn period_ns(&self) -> u64 {
        match self {
            Profile::Burst { period_s, .. } => (period_s * 1e9).round().max(1.0) as u64,
            Profile::Isochronous { params, .. } => {
                (1e9 / params.fps.max(1) as f64).round().max(1.0) as u64
            }
        }
    }

    /// What one unit is called in reports.
    pub fn unit(&self) -> &'static str {
        match self {
            Profile::Burst { .. } => "burst",
            Profile::Isochronous { .. } => "frame",
        }
    }

    /// The isochronous parameters, if this is an isochronous profile.
    pub fn isochronous(&self) -> Option<Isochronous> {
        match self {
            Profile::Isochronous { params, .. } => Some(*params),
            Profile::Burst { .. } => None,
        }
    }

    /// UDP datagrams carry frame headers (isochronous, negotiated).
    pub fn framed(&self) -> bool {
        matches!(self, Profile::Isochronous { framed: true, .. })
    }

    /// Framed isochronous frames flow server → client as well (`--bidir`, negotiated).
    pub fn both_ways(&self) -> bool {
        matches!(
            self,
            Profile::Isochronous {
                framed: true,
                both_ways: true,
                ..
            }
        )
    }

    /// The size of every unit, seeded for stream `stream_id` (deterministic).
    pub fn sizer(&self, stream_id: i64) -> UnitSizer {
        match self {
            Profile::Burst { bytes, .. } => UnitSizer::Fixed(*bytes),
            Profile::Isochronous { params, .. } => {
                UnitSizer::lognormal(params, SEED ^ (stream_id as u64).wrapping_mul(GOLDEN))
            }
        }
    }
}

/// Check `--isochronous` values (from the flags or from the wire).
pub fn check_isochronous(p: &Isochronous) -> Result<(), String> {
    if !(1..=MAX_FPS).contains(&p.fps) {
        return Err(format!(
            "isochronous frame rate must be 1 to {MAX_FPS} frames per second"
        ));
    }
    if p.mean_bps == 0 || p.mean_bps > MAX_ISOCH_BPS || p.stdev_bps > MAX_ISOCH_BPS {
        return Err("isochronous mean rate must be above 0 and rates at most 1T".into());
    }
    Ok(())
}

/// Parse iperf 2's `FPS:MEAN,STDEV` (e.g. `60:20m,5m`; rates with K/M/G/T suffixes,
/// 1000-based; STDEV optional, default 0).
pub fn parse_isochronous(s: &str) -> Result<Isochronous, String> {
    let bad = || {
        format!(
            "'{s}' is not FPS:MEAN,STDEV (e.g. 60:20m,5m: 60 frames/s, mean 20 Mbit/s, stdev 5 Mbit/s)"
        )
    };
    let (fps, rates) = s.split_once(':').ok_or_else(bad)?;
    let fps: u32 = fps.trim().parse().map_err(|_| bad())?;
    let (mean, stdev) = match rates.split_once(',') {
        Some((m, d)) => (m, Some(d)),
        None => (rates, None),
    };
    let mean_bps = crate::units::parse_rate(mean).map_err(|_| bad())?;
    let stdev_bps = match stdev {
        Some(d) => crate::units::parse_rate(d).map_err(|_| bad())?,
        None => 0,
    };
    let p = Isochronous {
        fps,
        mean_bps,
        stdev_bps,
    };
    check_isochronous(&p)?;
    Ok(p)
}

// ---------------------------------------------------------------------------------
// Random frame sizes.

const SEED: u64 = 0x6e65_746d_6574_6572; // "netmeter"
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// xorshift64* generator: tiny, fast and deterministic for a seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // splitmix64 of the seed: well-mixed and never the all-zero state.
        let mut z = seed.wrapping_add(GOLDEN);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in the open interval (0, 1).
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.uniform(), self.uniform());
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// The size of each unit a profiled sender sends.
#[derive(Debug, Clone)]
pub enum UnitSizer {
    Fixed(u64),
    /// Frame bytes = rate / fps / 8 with rate log-normal: `exp(mu + sigma × N(0,1))`.
    LogNormal {
        mu: f64,
        sigma: f64,
        fps: f64,
        rng: Rng,
    },
}

impl UnitSizer {
    /// A log-normal sizer whose *rate* has the given mean and standard deviation.
    pub fn lognormal(p: &Isochronous, seed: u64) -> UnitSizer {
        let m = p.mean_bps.max(1) as f64;
        let s = p.stdev_bps as f64;
        let sigma2 = (1.0 + (s / m).powi(2)).ln();
        UnitSizer::LogNormal {
            mu: m.ln() - sigma2 / 2.0,
            sigma: sigma2.sqrt(),
            fps: p.fps.max(1) as f64,
            rng: Rng::new(seed),
        }
    }

    /// Bytes of the next unit (at least 1).
    pub fn next_bytes(&mut self) -> u64 {
        match self {
            UnitSizer::Fixed(b) => (*b).max(1),
            UnitSizer::LogNormal {
                mu,
                sigma,
                fps,
                rng,
            } => {
                let z = if *sigma > 0.0 { rng.normal() } else { 0.0 };
                let rate = (*mu + *sigma * z).exp();
                ((rate / *fps / 8.0).round() as u64).clamp(1, MAX_FRAME_BYTES)
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// The unit clock.

/// What a profiled sender should do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Nothing is due for this many ns.
    Wait(u64),
    /// Send the unit of grid slot `slot` (due at `due_ns`); `skipped` slots before it
    /// passed entirely and were dropped (slips).
    Send {
        slot: u64,
        due_ns: u64,
        skipped: u64,
    },
    /// The next unit would be due at or after the end of the test: send nothing more.
    Over,
}

/// Units due on a fixed grid `k × period` (ns since the stream's start).
///
/// With an end (`-t`), only slots due strictly before it are sent: `-t 2
/// --burst-period 0.5` sends 4 bursts (at 0, 0.5, 1.0 and 1.5 s), as iperf 2 does, and
/// never a fifth that would race the end of the test at 2.0 s.
///
/// The grid is exact for a period of `num / den` ns (`1e9 / fps` for frames): slot `k`
/// is due at `⌊k × num / den⌋`, so rounding the period never adds a frame at the end
/// (30 fps for 1 s: 30 frames, not 31) nor lets the grid drift.
#[derive(Debug, Clone)]
pub struct Schedule {
    num: u64,
    den: u64,
    slot: u64,
    /// No unit is due at or after this time (ns since the stream's start).
    end_ns: Option<u64>,
    /// Slots skipped so far.
    pub slips: u64,
}

impl Schedule {
    /// The first unit is due at once (time 0); no end.
    pub fn new(period_ns: u64) -> Schedule {
        Schedule::every(period_ns, 1)
    }

    /// A grid with a period of `num / den` ns.
    pub fn every(num: u64, den: u64) -> Schedule {
        Schedule {
            num: num.max(1),
            den: den.max(1),
            slot: 0,
            end_ns: None,
            slips: 0,
        }
    }

    /// When slot `k` is due, ns since the start.
    fn due(&self, k: u64) -> u64 {
        (k as u128 * self.num as u128 / self.den as u128).min(u64::MAX as u128) as u64
    }

    /// The same grid, ending at `end_ns` (the test's length, ns since the start).
    pub fn ending_at(self, end_ns: u64) -> Schedule {
        Schedule {
            end_ns: Some(end_ns),
            ..self
        }
    }

    /// Ask at time `now_ns` (since the stream's start, monotonic).
    pub fn poll(&mut self, now_ns: u64) -> Due {
        let over = |due_ns: u64| self.end_ns.is_some_and(|end| due_ns >= end);
        let next_ns = self.due(self.slot);
        if over(next_ns) {
            return Due::Over;
        }
        if now_ns < next_ns {
            return Due::Wait(next_ns - now_ns);
        }
        // The latest slot already due: an estimate, then corrected for the flooring.
        let mut latest = ((now_ns as u128 * self.den as u128 / self.num as u128)
            .min(u64::MAX as u128) as u64)
            .max(self.slot);
        while latest > self.slot && self.due(latest) > now_ns {
            latest -= 1;
        }
        while self.due(latest + 1) <= now_ns {
            latest += 1;
        }
        let due_ns = self.due(latest);
        if over(due_ns) {
            // Late past the end: what was skipped is not a slip of the test.
            return Due::Over;
        }
        let skipped = latest - self.slot;
        self.slips += skipped;
        self.slot = latest + 1;
        Due::Send {
            slot: latest,
            due_ns,
            skipped,
        }
    }
}

/// How a unit of `bytes` is cut into UDP datagrams of at most `len` bytes, none shorter
/// than `min_len` (the headers): `(datagrams, length of the last one)`.
pub fn split_datagrams(bytes: u64, len: usize, min_len: usize) -> (u64, usize) {
    let len = len.max(min_len).max(1) as u64;
    let n = bytes.div_ceil(len).max(1);
    let last = bytes - (n - 1) * len;
    (n, (last as usize).max(min_len))
}

// ---------------------------------------------------------------------------------
// Sender-side figures.

/// Units a profiled sender completed over some span.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UnitFigures {
    /// Per unit: from the start of its first write to the completion of its last write
    /// (the sender's monotonic clock). Its count is the number of units sent.
    pub transfer: Hist,
    /// Bytes of those units.
    pub bytes: u64,
    /// Grid slots skipped because the sender was a whole period or more behind.
    pub slips: u64,
}

impl UnitFigures {
    pub fn sent(&self) -> u64 {
        self.transfer.len()
    }

    pub fn record(&mut self, transfer_ns: u64, bytes: u64) {
        self.transfer.record_ns(transfer_ns);
        self.bytes += bytes;
    }

    pub fn merge(&mut self, o: &UnitFigures) {
        self.transfer.merge(&o.transfer);
        self.bytes += o.bytes;
        self.slips += o.slips;
    }

    pub fn clear(&mut self) {
        self.transfer.clear();
        self.bytes = 0;
        self.slips = 0;
    }
}

// ---------------------------------------------------------------------------------
// --txstart-time.

/// Latest accepted start time, seconds ahead of now.
pub const TXSTART_MAX_AHEAD_S: f64 = 3600.0;
/// Earliest accepted start time, seconds in the past (then the test starts at once).
pub const TXSTART_MAX_PAST_S: f64 = 1.0;
/// The client connects and negotiates this long before the start time, so that setup
/// does not delay the start (and stays within the servers' setup deadlines).
pub const TXSTART_CONNECT_LEAD_S: f64 = 5.0;

/// Refuse a start time too far ahead or already past (`now` = seconds since the epoch).
pub fn check_txstart(t: f64, now: f64) -> Result<(), String> {
    if !t.is_finite() {
        return Err("--txstart-time must be seconds since the Unix epoch".into());
    }
    if t > now + TXSTART_MAX_AHEAD_S {
        return Err(format!(
            "--txstart-time {t:.3} is {:.0} s in the future; the limit is 1 hour",
            t - now
        ));
    }
    if t < now - TXSTART_MAX_PAST_S {
        return Err(format!(
            "--txstart-time {t:.3} is already {:.3} s in the past",
            now - t
        ));
    }
    Ok(())
}

/// How long before the start time to open the data streams: enough for `streams`
/// connections one after the other plus TEST_START, at a control-connection round trip
/// of `rtt_s`, with a 2× margin and 20 ms for scheduling; at most 5 s. The server's
/// clock starts when the streams are up, so this is also about how long the server
/// sees no data before the start.
pub fn stream_setup_lead_s(rtt_s: f64, streams: u32) -> f64 {
    ((streams as f64 + 2.0) * rtt_s.max(0.0) * 2.0 + 0.020).min(TXSTART_CONNECT_LEAD_S)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_on_a_fake_clock() {
        let mut s = Schedule::new(100);
        assert_eq!(
            s.poll(0),
            Due::Send {
                slot: 0,
                due_ns: 0,
                skipped: 0
            }
        );
        assert_eq!(s.poll(30), Due::Wait(70));
        // A little late: still slot 1, no slip.
        assert_eq!(
            s.poll(150),
            Due::Send {
                slot: 1,
                due_ns: 100,
                skipped: 0
            }
        );
        // The grid does not drift with lateness.
        assert_eq!(s.poll(199), Due::Wait(1));
        // 2.5 periods late: slots 2 and 3 passed entirely, slot 4 goes now.
        assert_eq!(
            s.poll(450),
            Due::Send {
                slot: 4,
                due_ns: 400,
                skipped: 2
            }
        );
        assert_eq!(s.slips, 2);
        assert_eq!(s.poll(450), Due::Wait(50));
    }

    #[test]
    fn schedule_sends_one_unit_per_period_over_time() {
        // Polled every 7 ns for 10 000 ns with a 1 000 ns period: exactly 10 units.
        let mut s = Schedule::new(1000);
        let sent = (0..10_000u64)
            .step_by(7)
            .filter(|&t| matches!(s.poll(t), Due::Send { .. }))
            .count();
        assert_eq!(sent, 10);
        assert_eq!(s.slips, 0);
    }

    #[test]
    fn no_unit_is_due_at_or_after_the_end() {
        // -t 2 --burst-period 0.5 (in ms here): bursts at 0, 500, 1000, 1500; not 2000,
        // however the sender's wake-ups fall.
        for step in [1u64, 7, 499, 500, 501] {
            let mut s = Schedule::new(500).ending_at(2000);
            let mut due = Vec::new();
            let mut t = 0;
            loop {
                match s.poll(t) {
                    Due::Send { due_ns, .. } => due.push(due_ns),
                    Due::Wait(_) => {}
                    Due::Over => break,
                }
                t += step;
                assert!(t < 10_000, "step {step}: never over");
            }
            assert_eq!(due, [0, 500, 1000, 1500], "step {step}");
        }
        // Woken exactly at the end (the race that sent a fifth burst): over.
        let mut s = Schedule::new(500).ending_at(1000);
        assert!(matches!(s.poll(0), Due::Send { .. }));
        assert!(matches!(s.poll(500), Due::Send { .. }));
        assert_eq!(s.poll(1000), Due::Over);
        // A slot just before the end still goes, even when polled after the end.
        let mut s = Schedule::new(500).ending_at(1001);
        s.poll(0);
        s.poll(500);
        assert_eq!(
            s.poll(1003),
            Due::Send {
                slot: 2,
                due_ns: 1000,
                skipped: 0
            }
        );
        assert_eq!(s.poll(1003), Due::Over);
        // Late by several periods across the end: nothing more, no slips counted.
        let mut s = Schedule::new(100).ending_at(1000);
        s.poll(0);
        assert_eq!(s.poll(5000), Due::Over);
        assert_eq!(s.slips, 0);
        // Isochronous frames for 1 s, whether 1e9 / fps rounds up (60) or down (30):
        // exactly fps frames, the last one before the end.
        for fps in [60u64, 30, 24, 7] {
            let mut s = Schedule::every(1_000_000_000, fps).ending_at(1_000_000_000);
            let mut due = Vec::new();
            for t in (0..=1_100_000_000u64).step_by(100_000) {
                if let Due::Send { due_ns, .. } = s.poll(t) {
                    due.push(due_ns);
                }
            }
            assert_eq!(due.len() as u64, fps, "{fps} fps");
            assert!(due.iter().all(|&d| d < 1_000_000_000), "{fps} fps");
            assert_eq!(s.slips, 0);
        }
    }

    #[test]
    fn fractional_grid_does_not_drift() {
        // 30 fps: slot k due at ⌊k × 1e9 / 30⌋, whatever the polls' timing.
        let mut s = Schedule::every(1_000_000_000, 30);
        let mut t = 0u64;
        let mut last = None;
        while t < 10_000_000_000 {
            if let Due::Send { slot, due_ns, .. } = s.poll(t) {
                assert_eq!(due_ns, (slot as u128 * 1_000_000_000 / 30) as u64);
                last = Some(slot);
            }
            t += 1_234_567;
        }
        assert_eq!(last, Some(299));
        assert_eq!(s.slips, 0);
        // Two and a half periods late: two slots skipped, the grid unchanged.
        let mut s = Schedule::every(1_000_000_000, 30);
        s.poll(0);
        assert_eq!(
            s.poll(3 * 33_333_333 + 16_000_000),
            Due::Send {
                slot: 3,
                due_ns: 100_000_000,
                skipped: 2
            }
        );
    }

    #[test]
    fn periods_of_both_profiles() {
        let b = Profile::Burst {
            bytes: 10,
            period_s: 0.25,
        };
        assert_eq!(b.period_ns(), 250_000_000);
        let i = Profile::Isochronous {
            params: Isochronous {
                fps: 60,
                mean_bps: 1,
                stdev_bps: 0,
            },
            framed: false,
            both_ways: false,
        };
        assert_eq!(i.period_ns(), 16_666_667);
        assert_eq!((b.unit(), i.unit()), ("burst", "frame"));
    }

    #[test]
    fn frame_sizes_follow_the_requested_mean_and_stdev() {
        // 60 fps, mean 20 Mbit/s, stdev 5 Mbit/s: mean frame 41 667 bytes.
        let p = Isochronous {
            fps: 60,
            mean_bps: 20_000_000,
            stdev_bps: 5_000_000,
        };
        let mut z = UnitSizer::lognormal(&p, 7);
        let n = 200_000;
        let v: Vec<f64> = (0..n).map(|_| z.next_bytes() as f64).collect();
        let mean = v.iter().sum::<f64>() / n as f64;
        let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        let want_mean = 20e6 / 60.0 / 8.0;
        let want_sd = 5e6 / 60.0 / 8.0;
        assert!((mean / want_mean - 1.0).abs() < 0.005, "mean {mean}");
        assert!((sd / want_sd - 1.0).abs() < 0.02, "stdev {sd}");
        assert!(v.iter().all(|&x| x >= 1.0));
        // Deterministic for a seed, different across seeds.
        let a: Vec<u64> = {
            let mut z = UnitSizer::lognormal(&p, 1);
            (0..5).map(|_| z.next_bytes()).collect()
        };
        let b: Vec<u64> = {
            let mut z = UnitSizer::lognormal(&p, 1);
            (0..5).map(|_| z.next_bytes()).collect()
        };
        let c: Vec<u64> = {
            let mut z = UnitSizer::lognormal(&p, 2);
            (0..5).map(|_| z.next_bytes()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
        // No deviation: every frame is the mean.
        let mut z = UnitSizer::lognormal(&Isochronous { stdev_bps: 0, ..p }, 3);
        assert!((0..10).all(|_| z.next_bytes() == 41_667));
    }

    #[test]
    fn normal_draws_are_standard() {
        let mut r = Rng::new(42);
        let n = 100_000;
        let v: Vec<f64> = (0..n).map(|_| r.normal()).collect();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(
            mean.abs() < 0.02 && (var - 1.0).abs() < 0.02,
            "{mean} {var}"
        );
        assert!((0..1000).map(|_| r.uniform()).all(|u| u > 0.0 && u < 1.0));
    }

    #[test]
    fn isochronous_syntax() {
        let p = parse_isochronous("60:20m,5m").unwrap();
        assert_eq!(
            (p.fps, p.mean_bps, p.stdev_bps),
            (60, 20_000_000, 5_000_000)
        );
        assert_eq!(parse_isochronous("30:1G").unwrap().stdev_bps, 0);
        for bad in ["60", "x:1m", "0:1m,0", "60:0", "60:1m,x", "20000:1m", ""] {
            let e = parse_isochronous(bad).unwrap_err();
            assert!(!e.contains('\n'), "{bad}: {e}");
        }
    }

    #[test]
    fn datagram_split() {
        assert_eq!(split_datagrams(3000, 1000, 40), (3, 1000));
        assert_eq!(split_datagrams(2500, 1000, 40), (3, 500));
        assert_eq!(split_datagrams(2010, 1000, 40), (3, 40));
        assert_eq!(split_datagrams(5, 1000, 40), (1, 40));
    }

    #[test]
    fn txstart_limits() {
        let now = 1_700_000_000.0;
        assert!(check_txstart(now + 10.0, now).is_ok());
        assert!(check_txstart(now - 0.5, now).is_ok());
        assert!(check_txstart(now - 1.5, now).is_err());
        assert!(check_txstart(now + 3601.0, now).is_err());
        assert!(check_txstart(f64::NAN, now).is_err());
        let e = check_txstart(now + 7200.0, now).unwrap_err();
        assert!(e.contains("1 hour") && !e.contains('\n'));
    }

    #[test]
    fn setup_lead_grows_with_streams_and_rtt() {
        assert!((stream_setup_lead_s(0.0, 1) - 0.020).abs() < 1e-12);
        assert!((stream_setup_lead_s(0.010, 3) - 0.120).abs() < 1e-9);
        assert_eq!(stream_setup_lead_s(1.0, 128), TXSTART_CONNECT_LEAD_S);
    }
}
