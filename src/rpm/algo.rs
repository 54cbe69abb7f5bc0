//! The responsiveness test's algorithm (draft-ietf-ippm-responsiveness, section
//! "Responsiveness Test" and its parameters), sans-IO: the driver opens the connections,
//! sends the probes and counts the bytes; this machine, given `now`, says when the next
//! interval ends, how many load-generating connections to add, when a probe may go out,
//! and when the test is over with which figures and confidence.
//!
//! Read from draft-ietf-ippm-responsiveness-08 (2025-10-20), sections "Test
//! Parameters", "Measuring Responsiveness", "Aggregating the Measurements", "Final
//! Algorithm" and "Confidence of Test-Results". The run, interval by interval (ID, 1 s):
//! 1. INP (1) load-generating connection to start, INC (1) more at each interval's
//!    end, up to MNP (16), until the run ends;
//! 2. at each interval's end the moving average of the aggregate goodput over the last
//!    MAD (4) intervals; goodput saturation when the standard deviation of the last MAD
//!    moving averages is less than SDT (5 %) of the current one (only full-window
//!    averages count: the draft divides a window's bytes by MAD times ID, so a partial
//!    window is never stable);
//! 3. from goodput saturation on, the responsiveness of each interval, the formula over
//!    the completed probes of the last MAD intervals (`rpm_of`); responsiveness
//!    saturation when the last MAD of those are stable the same way, and that interval's
//!    figure is the result;
//! 4. at the maximum duration (20 s per direction: the draft leaves the limit to the
//!    client, networkQuality and goresponsiveness use 20 s) the end with what there is.
//!
//! Probes go out as pairs (a foreign and a self probe) every 1/MPS (100 a second) and,
//! once the goodput is known, no faster than keeps their bytes (the draft's estimates:
//! 5000 for a foreign probe, 1000 for a self probe) under PTC (5 %) of it.
//!
//! The confidence is the draft's, for each metric: low when the stage did not run MAD
//! intervals, medium when it did without reaching stability, high when it reached it.
//! draft-ietf-ippm-responsiveness-09 (2026-07) changes ID to 5 s "pending further
//! investigation"; netmeter keeps -08's 1 s (docs/rpm.md says why).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::algo_math::{ForeignMeans, is_stable, moving_average, responsiveness_rpm, trimmed_mean};

/// ID: the interval at whose end the goodput and responsiveness are judged (-08, "Test
/// Parameters"; -09 makes it 5 s).
pub const INTERVAL: Duration = Duration::from_secs(1);
/// MAD: the moving-average distance, in intervals.
pub const MOVING_AVERAGE_DISTANCE: usize = 4;
/// TMP: the share of the probe times kept by the trimmed mean (the slowest 5 % go).
pub const TRIMMED_MEAN_KEEP_PCT: f64 = 95.0;
/// SDT: the standard deviation tolerance, as a fraction of the mean.
pub const STD_DEV_TOLERANCE: f64 = 0.05;
/// MNP: the most load-generating connections.
pub const MAX_CONNECTIONS: usize = 16;
/// MPS: the most probes a second.
pub const MAX_PROBES_PER_SECOND: u32 = 100;
/// PTC: the share of the measured goodput probes may use.
pub const PROBE_CAPACITY_SHARE: f64 = 0.05;
/// The draft's estimate of a foreign probe's bytes, TCP and TLS included ("Measuring
/// Responsiveness").
pub const FOREIGN_PROBE_BYTES: u64 = 5000;
/// The draft's estimate of a self probe's bytes.
pub const SELF_PROBE_BYTES: u64 = 1000;
/// The longest a direction runs before it ends unsaturated.
pub const MAX_DURATION: Duration = Duration::from_secs(20);
/// Probes kept per interval; more in one interval than the rate limit allows are a
/// driver's bug, counted and dropped rather than stored without bound.
const MAX_PROBES_PER_INTERVAL: usize = 10_000;

/// The draft's parameters; `Default` is the draft's values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    pub interval: Duration,
    pub moving_average_distance: usize,
    pub trimmed_mean_keep_pct: f64,
    pub std_dev_tolerance: f64,
    pub max_connections: usize,
    pub max_probes_per_second: u32,
    pub probe_capacity_share: f64,
    pub max_duration: Duration,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            interval: INTERVAL,
            moving_average_distance: MOVING_AVERAGE_DISTANCE,
            trimmed_mean_keep_pct: TRIMMED_MEAN_KEEP_PCT,
            std_dev_tolerance: STD_DEV_TOLERANCE,
            max_connections: MAX_CONNECTIONS,
            max_probes_per_second: MAX_PROBES_PER_SECOND,
            probe_capacity_share: PROBE_CAPACITY_SHARE,
            max_duration: MAX_DURATION,
        }
    }
}

/// What one probe measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ProbeTimes {
    /// On a fresh connection: TCP connect, TLS handshake, GET of the small object.
    Foreign {
        tcp: Duration,
        tls: Duration,
        http: Duration,
    },
    /// A GET of the small object on a load-generating connection.
    #[serde(rename = "self")]
    Own { http: Duration },
}

/// One finished probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Probe {
    /// When it started.
    pub start: Instant,
    pub times: ProbeTimes,
}

/// How far to trust the figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

/// Why the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// Goodput and responsiveness both saturated.
    Saturated,
    /// The maximum duration passed first.
    MaxDuration,
    /// The driver stopped it (an interrupt).
    Stopped,
}

/// The figures of one interval, for the driver to show.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct IntervalRow {
    pub index: usize,
    /// Load-generating connections open during the interval.
    pub connections: usize,
    pub goodput_bps: f64,
    /// The moving average over the last MAD intervals (fewer at the start).
    pub goodput_moving_bps: f64,
    /// The formula over the completed probes of the last MAD intervals (`None`: none).
    pub rpm: Option<f64>,
    pub goodput_saturated: bool,
}

/// The result of a run (one direction).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Outcome {
    /// The goodput's last moving average, bits a second.
    pub goodput_bps: Option<f64>,
    /// The draft's responsiveness over the last MAD intervals' probes.
    pub rpm: Option<f64>,
    /// The foreign probes alone: 60000 / the mean of their parts' trimmed means.
    pub foreign_rpm: Option<f64>,
    /// The self probes alone (the draft's `Loaded_Responsiveness`).
    pub self_rpm: Option<f64>,
    pub connections: usize,
    pub goodput_saturated: bool,
    pub responsiveness_saturated: bool,
    /// The capacity's confidence.
    pub goodput_confidence: Confidence,
    /// The responsiveness's confidence.
    pub rpm_confidence: Confidence,
    pub reason: EndReason,
    pub intervals: usize,
    pub elapsed_s: f64,
}

/// What an interval's end asks of the driver.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// Load-generating connections to open now.
    pub add_connections: usize,
    pub row: IntervalRow,
    /// `Some` when the run is over.
    pub finished: Option<Outcome>,
}

/// The saturation machine of one direction.
#[derive(Debug)]
pub struct Saturation {
    params: Params,
    started: Instant,
    interval_start: Instant,
    connections: usize,
    last_bytes: u64,
    /// Each interval's aggregate goodput, bits a second.
    goodput: Vec<f64>,
    /// The goodput's moving averages over full MAD-interval windows.
    goodput_ma: Vec<f64>,
    /// The responsiveness of each interval from goodput saturation on.
    responsiveness: Vec<f64>,
    current: Vec<Probe>,
    /// The completed probes of the last MAD intervals, one entry an interval.
    recent: VecDeque<Vec<Probe>>,
    dropped_probes: u64,
    goodput_saturated: bool,
    responsiveness_saturated: bool,
    next_probe_at: Instant,
    finished: Option<Outcome>,
}

impl Saturation {
    /// A run starting at `now` with one load-generating connection (INP).
    pub fn new(params: Params, now: Instant) -> Saturation {
        Saturation {
            params,
            started: now,
            interval_start: now,
            connections: 1,
            last_bytes: 0,
            goodput: Vec::new(),
            goodput_ma: Vec::new(),
            responsiveness: Vec::new(),
            current: Vec::new(),
            recent: VecDeque::new(),
            dropped_probes: 0,
            goodput_saturated: false,
            responsiveness_saturated: false,
            next_probe_at: now,
            finished: None,
        }
    }

    /// The load-generating connections the run wants open.
    pub fn connections(&self) -> usize {
        self.connections
    }

    /// When the current interval ends: call [`Saturation::on_interval`] then.
    pub fn poll_timeout(&self) -> Instant {
        self.interval_start + self.params.interval
    }

    /// When the run ends at the latest.
    pub fn deadline(&self) -> Instant {
        self.started + self.params.max_duration
    }

    /// The result, once the run is over.
    pub fn outcome(&self) -> Option<&Outcome> {
        self.finished.as_ref()
    }

    /// Probes reported beyond the per-interval cap (a driver sending too fast).
    pub fn dropped_probes(&self) -> u64 {
        self.dropped_probes
    }

    /// Whether a pair of probes may start at `now` (MPS and PTC).
    pub fn probe_allowed(&self, now: Instant) -> bool {
        self.finished.is_none() && now >= self.next_probe_at
    }

    /// When the next pair of probes may start.
    pub fn next_probe_at(&self) -> Instant {
        self.next_probe_at
    }

    /// Probes of `wire_bytes` together (a pair: [`FOREIGN_PROBE_BYTES`] +
    /// [`SELF_PROBE_BYTES`]) went out at `now`: the next wait 1/MPS, or longer if the
    /// probes would use more than PTC of the goodput.
    pub fn on_probe_sent(&mut self, now: Instant, wire_bytes: u64) {
        let mps = f64::from(self.params.max_probes_per_second.max(1));
        let mut gap_s = 1.0 / mps;
        let mad = self.params.moving_average_distance;
        if let Some(bps) = moving_average(&self.goodput, mad) {
            let budget = bps * self.params.probe_capacity_share;
            if budget > 0.0 {
                gap_s = gap_s.max(wire_bytes as f64 * 8.0 / budget);
            }
        }
        // Never more than an interval between probes: the run must see some each one.
        let gap = Duration::from_secs_f64(gap_s).min(self.params.interval);
        self.next_probe_at = now + gap;
    }

    /// A probe completed.
    pub fn on_probe(&mut self, probe: Probe) {
        if self.current.len() >= MAX_PROBES_PER_INTERVAL {
            self.dropped_probes += 1;
            return;
        }
        self.current.push(probe);
    }

    /// The interval ended at `now` with `total_bytes` moved by all load-generating
    /// connections since the start (cumulative, so a driver's late tick loses nothing).
    pub fn on_interval(&mut self, now: Instant, total_bytes: u64) -> Step {
        let elapsed = now.saturating_duration_since(self.interval_start);
        let bytes = total_bytes.saturating_sub(self.last_bytes);
        self.last_bytes = total_bytes.max(self.last_bytes);
        self.interval_start = now;
        let secs = elapsed.as_secs_f64().max(1e-6);
        self.goodput.push(bytes as f64 * 8.0 / secs);
        let mad = self.params.moving_average_distance.max(1);
        let gma = moving_average(&self.goodput, mad).unwrap_or(0.0);
        if self.goodput.len() >= mad {
            self.goodput_ma.push(gma);
        }
        self.recent.push_back(std::mem::take(&mut self.current));
        while self.recent.len() > mad {
            self.recent.pop_front();
        }
        let rpm = self.window_figures().rpm;
        let sdt = self.params.std_dev_tolerance;
        if !self.goodput_saturated && is_stable(&self.goodput_ma, mad, sdt) {
            self.goodput_saturated = true;
        }
        if self.goodput_saturated && !self.responsiveness_saturated {
            if let Some(r) = rpm {
                self.responsiveness.push(r);
            }
            self.responsiveness_saturated = is_stable(&self.responsiveness, mad, sdt);
        }
        let row = IntervalRow {
            index: self.goodput.len(),
            connections: self.connections,
            goodput_bps: *self.goodput.last().unwrap_or(&0.0),
            goodput_moving_bps: gma,
            rpm,
            goodput_saturated: self.goodput_saturated,
        };
        let finished = if self.goodput_saturated && self.responsiveness_saturated {
            Some(self.finish(now, EndReason::Saturated))
        } else if now.saturating_duration_since(self.started) >= self.params.max_duration {
            Some(self.finish(now, EndReason::MaxDuration))
        } else {
            None
        };
        // INC: one more connection at each interval while the run goes on, up to MNP.
        let add = usize::from(finished.is_none() && self.connections < self.params.max_connections);
        self.connections += add;
        Step {
            add_connections: add,
            row,
            finished,
        }
    }

    /// Ends the run at `now` (an interrupt) with what was measured, the probes of the
    /// interval in progress included.
    pub fn stop(&mut self, now: Instant) -> Outcome {
        if let Some(done) = self.finished {
            return done;
        }
        if !self.current.is_empty() {
            self.recent.push_back(std::mem::take(&mut self.current));
            while self.recent.len() > self.params.moving_average_distance.max(1) + 1 {
                self.recent.pop_front();
            }
        }
        self.finish(now, EndReason::Stopped)
    }

    fn window_figures(&self) -> RpmFigures {
        let window: Vec<Probe> = self.recent.iter().flatten().copied().collect();
        rpm_of(&window, self.params.trimmed_mean_keep_pct)
    }

    fn finish(&mut self, now: Instant, reason: EndReason) -> Outcome {
        let figures = self.window_figures();
        let mad = self.params.moving_average_distance.max(1);
        // "Confidence of Test-Results": low when the stage did not run MAD intervals,
        // medium when it did without stability, high when it reached stability.
        let confidence = |saturated: bool, iterations: usize| {
            if saturated {
                Confidence::High
            } else if iterations >= mad {
                Confidence::Medium
            } else {
                Confidence::Low
            }
        };
        let rpm_confidence = if figures.rpm.is_none() {
            Confidence::Low
        } else {
            confidence(self.responsiveness_saturated, self.responsiveness.len())
        };
        let outcome = Outcome {
            goodput_bps: moving_average(&self.goodput, mad),
            rpm: figures.rpm,
            foreign_rpm: figures.foreign_rpm,
            self_rpm: figures.self_rpm,
            connections: self.connections,
            goodput_saturated: self.goodput_saturated,
            responsiveness_saturated: self.responsiveness_saturated,
            goodput_confidence: confidence(self.goodput_saturated, self.goodput.len()),
            rpm_confidence,
            reason,
            intervals: self.goodput.len(),
            elapsed_s: now.saturating_duration_since(self.started).as_secs_f64(),
        };
        self.finished = Some(outcome);
        outcome
    }
}

/// Responsiveness figures of a set of probes.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RpmFigures {
    /// The draft's formula.
    pub rpm: Option<f64>,
    pub foreign_rpm: Option<f64>,
    pub self_rpm: Option<f64>,
}

/// The draft's responsiveness and the foreign and self RPMs of `probes`, from the
/// single-sided trimmed means (keeping the fastest `keep_pct` percent) of each time.
pub fn rpm_of(probes: &[Probe], keep_pct: f64) -> RpmFigures {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let (mut tcp, mut tls, mut http, mut own) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for p in probes {
        match p.times {
            ProbeTimes::Foreign {
                tcp: a,
                tls: b,
                http: c,
            } => {
                tcp.push(ms(a));
                tls.push(ms(b));
                http.push(ms(c));
            }
            ProbeTimes::Own { http: c } => own.push(ms(c)),
        }
    }
    let foreign = match (trimmed_mean(&tcp, keep_pct), trimmed_mean(&http, keep_pct)) {
        (Some(tcp_ms), Some(http_ms)) => Some(ForeignMeans {
            tcp_ms,
            tls_ms: trimmed_mean(&tls, keep_pct),
            http_ms,
        }),
        _ => None,
    };
    let own = trimmed_mean(&own, keep_pct);
    RpmFigures {
        rpm: responsiveness_rpm(foreign, own),
        foreign_rpm: responsiveness_rpm(foreign, None),
        self_rpm: responsiveness_rpm(None, own),
    }
}

#[cfg(test)]
#[path = "algo_tests.rs"]
mod tests;
