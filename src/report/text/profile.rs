//! The text of traffic-profile tests: row suffixes and the summary lines.

use crate::latency::LatencyStats;
use crate::profile::FrameSummary;
use crate::report::profile::{IsochEnd, UnitsEnd};
use crate::report::{EndExt, StreamExt};
use crate::units::{Format, format_bytes, format_rate};

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
        // A `--bidir` test between netmeter peers has frames both ways: name them.
        let (there, back) = match &i.reverse {
            Some(_) => (" client->server", " server->client"),
            None => ("", ""),
        };
        isoch_lines(&mut s, i, there, i.sender.as_ref(), i.receiver.as_ref());
        if let Some(r) = &i.reverse {
            isoch_lines(&mut s, i, back, r.sender.as_ref(), r.receiver.as_ref());
        }
    }
    s
}

/// One direction's isochronous lines: what was sent, then the frames received.
fn isoch_lines(
    s: &mut String,
    i: &IsochEnd,
    way: &str,
    sender: Option<&UnitsEnd>,
    receiver: Option<&FrameSummary>,
) {
    if let Some(u) = sender {
        s.push_str(&format!(
            "Isochronous{way}: {} frames at {} fps (log-normal, mean {}, stdev {}) over {} stream(s), mean frame {}, {}\n",
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
    if let Some(r) = receiver {
        let total = r.frames_complete + r.frames_lost;
        s.push_str(&format!(
            "Frames received{way}: {} complete, {} lost ({:.2}%), frame jitter {:.3} ms\n",
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
    use crate::report::profile::units;
    use crate::report::profile::{FramesInterval, UnitsInterval};

    #[test]
    fn row_suffixes() {
        let r = StreamInterval {
            netmeter: Some(Box::new(StreamExt {
                bursts: Some(UnitsInterval::of(&units(&[1, 3], 10, 2))),
                ..StreamExt::default()
            })),
            ..StreamInterval::default()
        };
        assert_eq!(
            row_suffix(r.netmeter.as_deref().copied()),
            "  2 bursts in 1.000/2.000/3.000 ms min/avg/max (2 slips)"
        );
        let r = StreamInterval {
            netmeter: Some(Box::new(StreamExt {
                frames_received: Some(FramesInterval {
                    complete: 60,
                    lost: 0,
                    jitter_ms: 0.1,
                    latency: None,
                }),
                ..StreamExt::default()
            })),
            ..StreamInterval::default()
        };
        assert_eq!(
            row_suffix(r.netmeter.as_deref().copied()),
            "  frames 60/0 ok/lost, jitter 0.100 ms"
        );
        assert_eq!(row_suffix(None), "");
    }
}
