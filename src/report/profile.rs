//! Traffic-profile figures (`--burst-size`/`--burst-period`, `--isochronous`) and
//! `--txstart-time`, as report values and text lines.
//!
//! Pure: the engine (`engine::profile`) records per-unit transfer times on the sender
//! (`crate::profile::UnitFigures`) and whole frames on an isochronous receiver
//! (`crate::profile::FrameSummary`); these functions turn them into interval extras,
//! the end summary and text.

use super::build::LocalFinal;
use super::{EndExt, StreamExt};
use crate::latency::LatencyStats;
use crate::profile::{FrameSummary, Profile, UnitFigures};
use crate::units::{Format, format_bytes, format_rate};
use crate::wire::Results;
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
}

/// `start.netmeter.txstart`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct TxStart {
    /// The requested start, seconds since the Unix epoch.
    pub requested: f64,
    /// When the data threads started, seconds since the Unix epoch.
    pub started: f64,
    /// `started − requested`, ms (setup took longer than its lead when clearly > 0).
    pub late_ms: f64,
}

fn rate(n: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    }
}

/// The sender's figures over its profiled streams (`None` if it sent none).
pub fn units_end(locals: &[LocalFinal]) -> Option<UnitsEnd> {
    let mut all = UnitFigures::default();
    let mut streams = 0;
    let mut seconds: f64 = 0.0;
    for l in locals.iter().filter(|l| l.units.is_some()) {
        if let Some(u) = &l.units {
            all.merge(u);
        }
        streams += 1;
        seconds = seconds.max(l.seconds);
    }
    if streams == 0 {
        return None;
    }
    let sent = all.sent();
    Some(UnitsEnd {
        streams,
        sent,
        bytes: all.bytes,
        mean_bytes: if sent > 0 {
            all.bytes as f64 / sent as f64
        } else {
            0.0
        },
        slips: all.slips,
        seconds,
        per_second: rate(sent, seconds),
        transfer: all.transfer.stats().unwrap_or_default(),
        transfer_histogram_us: all.transfer.buckets_us(),
    })
}

/// Whole frames at the receiver: this side's receiving streams, or (on the client) the
/// server's results for the streams this side sent.
pub fn frames_end(locals: &[LocalFinal], peer: &Results) -> Option<FrameSummary> {
    let mut parts: Vec<FrameSummary> = locals
        .iter()
        .filter(|l| !l.sender)
        .filter_map(|l| l.frames.clone())
        .collect();
    if parts.is_empty() {
        parts = locals
            .iter()
            .filter(|l| l.sender && l.units.is_some())
            .filter_map(|l| peer.streams.iter().find(|p| p.id == l.id))
            .filter_map(|p| p.netmeter_frames.clone())
            .collect();
    }
    FrameSummary::merge(&parts)
}

/// Fill `end.netmeter.burst` / `end.netmeter.isochronous` for a profiled test.
pub fn fill_end(
    ext: &mut EndExt,
    profile: Option<&Profile>,
    locals: &[LocalFinal],
    peer: &Results,
) {
    match profile {
        Some(Profile::Burst { bytes, period_s }) => {
            ext.burst = units_end(locals).map(|sender| BurstEnd {
                burst_bytes: *bytes,
                period_s: *period_s,
                sender,
            });
        }
        Some(Profile::Isochronous { params, .. }) => {
            let sender = units_end(locals);
            let receiver = frames_end(locals, peer);
            if sender.is_some() || receiver.is_some() {
                ext.isochronous = Some(IsochEnd {
                    fps: params.fps,
                    mean_bps: params.mean_bps,
                    stdev_bps: params.stdev_bps,
                    distribution: "lognormal".into(),
                    sender,
                    receiver,
                });
            }
        }
        None => {}
    }
}

fn stats_line(name: &str, r: &LatencyStats) -> String {
    format!(
        "{name} (ms): min {:.3}  mean {:.3}  stdev {:.3}  p50 {:.3}  p90 {:.3}  p99 {:.3}  max {:.3}\n",
        r.min_ms, r.mean_ms, r.stdev_ms, r.p50_ms, r.p90_ms, r.p99_ms, r.max_ms
    )
}

fn slips_text(n: u64) -> String {
    match n {
        0 => "no slips".into(),
        1 => "1 slip (a period skipped: the sender was a whole period behind)".into(),
        n => format!("{n} slips (periods skipped: the sender was a whole period behind)"),
    }
}

/// The summary lines under the end table.
pub fn summary_text(ext: &EndExt) -> String {
    let mut s = String::new();
    if let Some(b) = &ext.burst {
        let u = &b.sender;
        s.push_str(&format!(
            "Bursts: {} of {} every {:.3} s over {} stream(s) in {:.2} s, {}\n",
            u.sent,
            format_bytes(b.burst_bytes as f64, Format::Auto).trim_start(),
            b.period_s,
            u.streams,
            u.seconds,
            slips_text(u.slips)
        ));
        if u.sent > 0 {
            s.push_str(&stats_line("Burst transfer time", &u.transfer));
        }
    }
    if let Some(i) = &ext.isochronous {
        if let Some(u) = &i.sender {
            s.push_str(&format!(
                "Isochronous: {} frames at {} fps (log-normal, mean {}, stdev {}) over {} stream(s), mean frame {}, {}\n",
                u.sent,
                i.fps,
                format_rate(i.mean_bps as f64, Format::Auto).trim_start(),
                format_rate(i.stdev_bps as f64, Format::Auto).trim_start(),
                u.streams,
                format_bytes(u.mean_bytes, Format::Auto).trim_start(),
                slips_text(u.slips)
            ));
            if u.sent > 0 {
                s.push_str(&stats_line("Frame transfer time", &u.transfer));
            }
        }
        if let Some(r) = &i.receiver {
            let total = r.frames_complete + r.frames_lost;
            s.push_str(&format!(
                "Frames received: {} complete, {} lost ({:.2}%), frame jitter {:.3} ms\n",
                r.frames_complete,
                r.frames_lost,
                if total > 0 {
                    100.0 * r.frames_lost as f64 / total as f64
                } else {
                    0.0
                },
                r.frame_jitter_ms
            ));
            if let Some(l) = &r.latency {
                s.push_str(&stats_line("Frame latency", l));
            }
        }
    }
    s
}

/// The profile part of an interval row (appended to iperf3's columns), or "".
pub fn row_suffix(ext: Option<StreamExt>) -> String {
    let Some(x) = ext else {
        return String::new();
    };
    let mut s = String::new();
    for (name, u) in [("bursts", x.bursts), ("frames", x.frames)] {
        let Some(u) = u else { continue };
        s.push_str(&format!("  {} {name}", u.sent));
        if let Some(t) = &u.transfer {
            s.push_str(&format!(
                " in {:.3}/{:.3}/{:.3} ms min/avg/max",
                t.min_ms, t.mean_ms, t.max_ms
            ));
        }
        if u.slips > 0 {
            s.push_str(&format!(" ({} slips)", u.slips));
        }
    }
    if let Some(f) = x.frames_received {
        s.push_str(&format!(
            "  frames {}/{} ok/lost, jitter {:.3} ms",
            f.complete, f.lost, f.jitter_ms
        ));
        if let Some(l) = &f.latency {
            s.push_str(&format!(", latency avg {:.3} ms", l.mean_ms));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::StreamInterval;
    use crate::wire::{Isochronous, StreamResult};

    fn units(ms: &[u64], bytes: u64, slips: u64) -> UnitFigures {
        let mut f = UnitFigures::default();
        for &m in ms {
            f.record(m * 1_000_000, bytes);
        }
        f.slips = slips;
        f
    }

    #[test]
    fn burst_end_over_streams() {
        let locals = [
            LocalFinal {
                id: 1,
                sender: true,
                seconds: 2.0,
                units: Some(units(&[1, 2], 1000, 1)),
                ..LocalFinal::default()
            },
            LocalFinal {
                id: 3,
                sender: true,
                seconds: 2.0,
                units: Some(units(&[3, 4], 1000, 0)),
                ..LocalFinal::default()
            },
        ];
        let mut ext = EndExt::default();
        let p = Profile::Burst {
            bytes: 1000,
            period_s: 1.0,
        };
        fill_end(&mut ext, Some(&p), &locals, &Results::default());
        let b = ext.burst.as_ref().unwrap();
        assert_eq!(
            (b.sender.streams, b.sender.sent, b.sender.bytes),
            (2, 4, 4000)
        );
        assert_eq!((b.sender.slips, b.sender.per_second), (1, 2.0));
        assert_eq!(b.sender.mean_bytes, 1000.0);
        assert!((b.sender.transfer.max_ms - 4.0).abs() < 0.01);
        let t = summary_text(&ext);
        assert!(
            t.starts_with(
                "Bursts: 4 of 1000 Bytes every 1.000 s over 2 stream(s) in 2.00 s, 1 slip"
            ),
            "{t}"
        );
        assert!(ext.isochronous.is_none());
    }

    #[test]
    fn isochronous_end_takes_the_receiver_from_the_peer() {
        let locals = [LocalFinal {
            id: 1,
            sender: true,
            seconds: 1.0,
            units: Some(units(&[1; 60], 41_667, 0)),
            ..LocalFinal::default()
        }];
        let peer = Results {
            streams: vec![StreamResult {
                id: 1,
                netmeter_frames: Some(FrameSummary {
                    frames_complete: 59,
                    frames_lost: 1,
                    frame_jitter_ms: 0.25,
                    ..FrameSummary::default()
                }),
                ..StreamResult::default()
            }],
            ..Results::default()
        };
        let p = Profile::Isochronous {
            params: Isochronous {
                fps: 60,
                mean_bps: 20_000_000,
                stdev_bps: 0,
            },
            framed: true,
        };
        let mut ext = EndExt::default();
        fill_end(&mut ext, Some(&p), &locals, &peer);
        let i = ext.isochronous.as_ref().unwrap();
        assert_eq!(i.sender.as_ref().unwrap().sent, 60);
        assert_eq!(i.receiver.as_ref().unwrap().frames_lost, 1);
        let t = summary_text(&ext);
        assert!(t.contains("Isochronous: 60 frames at 60 fps"), "{t}");
        assert!(
            t.contains("Frames received: 59 complete, 1 lost (1.67%), frame jitter 0.250 ms"),
            "{t}"
        );
    }

    #[test]
    fn row_suffixes() {
        let r = StreamInterval {
            netmeter: Some(StreamExt {
                bursts: Some(UnitsInterval::of(&units(&[1, 3], 10, 2))),
                ..StreamExt::default()
            }),
            ..StreamInterval::default()
        };
        assert_eq!(
            row_suffix(r.netmeter),
            "  2 bursts in 1.000/2.000/3.000 ms min/avg/max (2 slips)"
        );
        let r = StreamInterval {
            netmeter: Some(StreamExt {
                frames_received: Some(FramesInterval {
                    complete: 60,
                    lost: 0,
                    jitter_ms: 0.1,
                    latency: None,
                }),
                ..StreamExt::default()
            }),
            ..StreamInterval::default()
        };
        assert_eq!(
            row_suffix(r.netmeter),
            "  frames 60/0 ok/lost, jitter 0.100 ms"
        );
        assert_eq!(row_suffix(None), "");
    }
}
