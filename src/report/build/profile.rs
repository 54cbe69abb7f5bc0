//! The traffic-profile end summary (`--burst-size`, `--isochronous`).

use super::LocalFinal;
use crate::profile::{FrameSummary, Profile, UnitFigures};
use crate::report::EndExt;
use crate::report::profile::{BurstEnd, IsochEnd, IsochHalf, UnitsEnd, rate};
use crate::wire::Results;

/// The sender's figures over its profiled streams flowing client → server (`forward`)
/// or back (`None` if it sent none that way).
pub fn units_end(locals: &[LocalFinal], forward: bool) -> Option<UnitsEnd> {
    let mut all = UnitFigures::default();
    let mut streams = 0;
    let mut seconds: f64 = 0.0;
    for l in locals
        .iter()
        .filter(|l| l.units.is_some() && l.forward == forward)
    {
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

/// Whole frames at the receiver of the streams flowing client → server (`forward`) or
/// back: this side's receiving streams, or the peer's results for the streams this
/// side sent.
pub fn frames_end(locals: &[LocalFinal], peer: &Results, forward: bool) -> Option<FrameSummary> {
    let way: Vec<&LocalFinal> = locals.iter().filter(|l| l.forward == forward).collect();
    let mut parts: Vec<FrameSummary> = way
        .iter()
        .filter(|l| !l.sender)
        .filter_map(|l| l.frames.clone())
        .collect();
    if parts.is_empty() {
        parts = way
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
            ext.burst = units_end(locals, true).map(|sender| BurstEnd {
                burst_bytes: *bytes,
                period_s: *period_s,
                sender,
            });
        }
        Some(Profile::Isochronous { params, .. }) => {
            let sender = units_end(locals, true);
            let receiver = frames_end(locals, peer, true);
            let back = IsochHalf {
                sender: units_end(locals, false),
                receiver: frames_end(locals, peer, false),
            };
            let reverse = (back.sender.is_some() || back.receiver.is_some()).then_some(back);
            if sender.is_some() || receiver.is_some() || reverse.is_some() {
                ext.isochronous = Some(IsochEnd {
                    fps: params.fps,
                    mean_bps: params.mean_bps,
                    stdev_bps: params.stdev_bps,
                    distribution: "lognormal".into(),
                    sender,
                    receiver,
                    reverse,
                });
            }
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::profile::units;
    use crate::report::text::profile::summary_text;
    use crate::wire::{Isochronous, StreamResult};

    #[test]
    fn burst_end_over_streams() {
        let locals = [
            LocalFinal {
                id: 1,
                sender: true,
                forward: true,
                seconds: 2.0,
                units: Some(units(&[1, 2], 1000, 1)),
                ..LocalFinal::default()
            },
            LocalFinal {
                id: 3,
                sender: true,
                forward: true,
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
            forward: true,
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
            both_ways: false,
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

    /// `--bidir` between netmeter peers: each side reports both halves, the frames its
    /// receivers counted and, for the half it sent, the peer's counts.
    #[test]
    fn isochronous_bidir_reports_the_frames_received_each_way() {
        let frames = |complete| FrameSummary {
            frames_complete: complete,
            ..FrameSummary::default()
        };
        let p = Profile::Isochronous {
            params: Isochronous {
                fps: 30,
                mean_bps: 4_800_000,
                stdev_bps: 0,
            },
            framed: true,
            both_ways: true,
        };
        // The client: stream 1 it sent (the server counted 29 frames of it), stream 3
        // the server sent (28 frames complete here).
        let client = [
            LocalFinal {
                id: 1,
                sender: true,
                forward: true,
                seconds: 1.0,
                units: Some(units(&[1; 30], 20_000, 0)),
                ..LocalFinal::default()
            },
            LocalFinal {
                id: 3,
                frames: Some(frames(28)),
                ..LocalFinal::default()
            },
        ];
        let from_server = Results {
            streams: vec![StreamResult {
                id: 1,
                netmeter_frames: Some(frames(29)),
                ..StreamResult::default()
            }],
            ..Results::default()
        };
        let mut ext = EndExt::default();
        fill_end(&mut ext, Some(&p), &client, &from_server);
        let i = ext.isochronous.as_ref().unwrap();
        assert_eq!(i.sender.as_ref().unwrap().sent, 30);
        assert_eq!(i.receiver.as_ref().unwrap().frames_complete, 29);
        let back = i.reverse.as_ref().unwrap();
        assert_eq!(back.receiver.as_ref().unwrap().frames_complete, 28);
        assert!(back.sender.is_none());
        // The server: the mirror image, the client's counts of what it sent.
        let server = [
            LocalFinal {
                id: 1,
                forward: true,
                frames: Some(frames(29)),
                ..LocalFinal::default()
            },
            LocalFinal {
                id: 3,
                sender: true,
                seconds: 1.0,
                units: Some(units(&[1; 30], 20_000, 0)),
                ..LocalFinal::default()
            },
        ];
        let from_client = Results {
            streams: vec![StreamResult {
                id: 3,
                netmeter_frames: Some(frames(28)),
                ..StreamResult::default()
            }],
            ..Results::default()
        };
        let mut ext = EndExt::default();
        fill_end(&mut ext, Some(&p), &server, &from_client);
        let i = ext.isochronous.as_ref().unwrap();
        assert!(i.sender.is_none());
        assert_eq!(i.receiver.as_ref().unwrap().frames_complete, 29);
        let back = i.reverse.as_ref().unwrap();
        assert_eq!(back.sender.as_ref().unwrap().sent, 30);
        assert_eq!(back.receiver.as_ref().unwrap().frames_complete, 28);
        let t = summary_text(&ext);
        assert!(
            t.contains("Frames received client->server: 29 complete")
                && t.contains("Isochronous server->client: 30 frames")
                && t.contains("Frames received server->client: 28 complete"),
            "{t}"
        );
    }
}
