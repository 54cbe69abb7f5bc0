//! Traffic-profile figures (`--burst-size`/`--burst-period`, `--isochronous`) and
//! `--txstart-time`, as report values and text lines.
//!
//! Pure: the engine (`engine::profile`) records per-unit transfer times on the sender
//! (`crate::profile::UnitFigures`) and whole frames on an isochronous receiver
//! (`crate::profile::FrameSummary`); these are the report values. The end summary is
//! built in `build::profile`, the text in `text::profile`.

use crate::latency::LatencyStats;
use crate::profile::{FrameSummary, UnitFigures};
use serde::{Deserialize, Serialize};

/// A profiled sender's units in one interval (`netmeter.bursts` / `netmeter.frames`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct UnitsInterval {
    /// Units (bursts or frames) whose last write completed in the interval.
    pub sent: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Schedule slots skipped because the sender was a whole period behind.
    pub slips: u64,
    /// Per-unit transfer time: first write started → last write completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transfer: Option<LatencyStats>,
}

impl UnitsInterval {
    pub fn of(f: &UnitFigures) -> UnitsInterval {
        UnitsInterval {
            sent: f.sent(),
            bytes: f.bytes,
            slips: f.slips,
            transfer: f.transfer.stats(),
        }
    }
}

/// An isochronous receiver's frames in one interval (`netmeter.frames_received`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct FramesInterval {
    /// Frames whose last missing datagram arrived in the interval.
    pub complete: u64,
    /// Frames given up on in the interval.
    pub lost: u64,
    /// Frame transit jitter (running value, like UDP jitter), ms.
    pub jitter_ms: f64,
    /// `--trip-times`: latency of the frames completed in the interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyStats>,
}

/// A sender's units over the whole test, all streams.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct UnitsEnd {
    pub streams: u32,
    /// Units sent completely.
    pub sent: u64,
    pub bytes: u64,
    pub mean_bytes: f64,
    pub slips: u64,
    pub seconds: f64,
    pub per_second: f64,
    /// Per-unit transfer time: first write started → last write completed.
    pub transfer: LatencyStats,
    /// `[upper bound µs, count]` per non-empty bucket.
    pub transfer_histogram_us: Vec<(f64, u64)>,
}

/// `end.netmeter.burst`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct BurstEnd {
    pub burst_bytes: u64,
    pub period_s: f64,
    pub sender: UnitsEnd,
}

/// `end.netmeter.isochronous`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct IsochEnd {
    pub fps: u32,
    pub mean_bps: u64,
    pub stdev_bps: u64,
    /// How frame sizes are drawn.
    pub distribution: String,
    /// What the client sent (client side only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<UnitsEnd>,
    /// Whole frames at the receiver (netmeter receivers of UDP frames only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver: Option<FrameSummary>,
    /// `--bidir` between netmeter peers: the frames the server sent to the client. The
    /// two halves above are client → server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse: Option<IsochHalf>,
}

/// `end.netmeter.isochronous.reverse`: the server → client half of a `--bidir` test.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct IsochHalf {
    /// What the server sent (server side only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<UnitsEnd>,
    /// Whole frames at the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver: Option<FrameSummary>,
}

/// `start.netmeter.txstart`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct TxStart {
    /// The requested start, seconds since the Unix epoch.
    pub requested: f64,
    /// When the client had set everything up and began its last wait for the start,
    /// seconds since the Unix epoch: after `requested` when setup took longer than
    /// its lead (absent in documents from before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<f64>,
    /// When the data threads started, seconds since the Unix epoch.
    pub started: f64,
    /// `started − requested`, ms: setup's lateness when `ready` is after `requested`,
    /// else how late the host woke the client from its wait.
    pub late_ms: f64,
}

pub(super) fn rate(n: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    }
}

#[cfg(test)]
pub(super) fn units(ms: &[u64], bytes: u64, slips: u64) -> UnitFigures {
    let mut f = UnitFigures::default();
    for &m in ms {
        f.record(m * 1_000_000, bytes);
    }
    f.slips = slips;
    f
}
