//! The isochronous and burst UDP sender machine to the frame receiver
//! (`record::FrameRecord`, i.e. `profile::FrameRecv`) over a datagram link: frames
//! sent, complete, lost against the link's own record of its drops, latency against
//! its delay, slips when the sender is not scheduled.

use crate::dgram::DgramLink;
use crate::world::Host;
use netmeter::engine::machine::profile_send::{Carrier, ProfileSender, ProfileStep};
use netmeter::engine::record::FrameRecord;
use netmeter::profile::Profile;
use netmeter::wire::{IsochHeader, Isochronous, UdpHeader};
use std::collections::BTreeSet;
use std::time::Duration;

const LEN: usize = 1400;
const UDP_HDR: usize = 16; // 64-bit sequence numbers

/// What a run did.
struct Run {
    units: u64,
    slips: u64,
    /// Per datagram sent: its frame id.
    frame_of: Vec<u64>,
    rx: FrameRecord,
    rx_dgrams: u64,
    rx_bytes: u64,
    link: DgramLink,
}

/// A profiled UDP sender for 1 s on host `a` (not scheduled from `stall.0` to
/// `stall.1`, ns) to a frame receiver on `b`.
fn run(p: Profile, mut link: DgramLink, a: &Host, b: &Host, stall: (u64, u64)) -> Run {
    let min_len = UDP_HDR + IsochHeader::LEN;
    let carrier = Carrier::Udp { len: LEN, min_len };
    let mut m = ProfileSender::new(&p, 1, carrier, a.at(0), Some(Duration::from_secs(1)));
    let mut rx = FrameRecord::new(true);
    let mut buf = vec![0u8; LEN];
    let (mut now, mut wake, mut seq) = (0u64, 0u64, 0u64);
    let (mut frame_of, mut units, mut over) = (Vec::new(), 0, false);
    let (mut rx_dgrams, mut rx_bytes) = (0, 0);
    loop {
        if (stall.0..stall.1).contains(&now) {
            wake = stall.1;
        }
        while !over && wake <= now {
            match m.poll(a.at(now)) {
                ProfileStep::Wait(t) => wake = a.ns(t),
                ProfileStep::Over => over = true,
                ProfileStep::Send(u) => {
                    let start_ns = a.wall_ns(now);
                    for i in 0..u.pieces {
                        seq += 1;
                        UdpHeader {
                            sec: 0,
                            usec: 0,
                            seq,
                        }
                        .write(&mut buf, true);
                        let h = IsochHeader {
                            frame_id: u.id,
                            start_ns,
                            dgrams: u.pieces as u32,
                            index: i as u32,
                        };
                        h.write(&mut buf[UDP_HDR..]);
                        link.send(now, &buf[..u.piece(i)]);
                        frame_of.push(u.id);
                    }
                    m.unit_done(a.at(now));
                    units += 1;
                }
            }
        }
        while let Some((at, d)) = link.recv(now) {
            assert_eq!(at, now);
            rx.on_datagram(&d[UDP_HDR..], b.wall_ns(now), 0);
            rx_dgrams += 1;
            rx_bytes += d.len() as u64;
        }
        let next = [link.next_arrival(), (!over).then_some(wake.max(now + 1))]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(t) => now = t,
            None => {
                return Run {
                    units,
                    slips: m.slips(),
                    frame_of,
                    rx,
                    rx_dgrams,
                    rx_bytes,
                    link,
                };
            }
        }
    }
}

/// 60 frames a second at a mean 10 Mbit/s (stdev 2 Mbit/s): ~20 800 bytes a frame.
fn isoch(fps: u32) -> Profile {
    Profile::Isochronous {
        params: Isochronous {
            fps,
            mean_bps: 10_000_000,
            stdev_bps: 2_000_000,
        },
        framed: true,
    }
}

#[test]
fn every_frame_arrives_whole_on_a_clean_link_and_its_latency_is_the_link_s() {
    let (a, b) = (Host::new(0), Host::new(0));
    // 800 Mbit/s (10 ns a byte), 4 ms: a frame's last datagram is in 4 ms plus its
    // bytes' serialization after the frame started.
    let r = run(
        isoch(60),
        DgramLink::new(10, 4_000_000, 0, 1),
        &a,
        &b,
        (0, 0),
    );
    assert_eq!((r.units, r.slips), (60, 0));
    let c = r.rx.recv.final_counts();
    assert_eq!((c.highest, c.complete, c.lost), (60, 60, 0));
    assert_eq!(r.rx_dgrams, r.frame_of.len() as u64);
    let st = r.rx.total_latency.stats().expect("frame latency");
    assert_eq!(r.rx.total_latency.len(), 60);
    // Largest frame well under 100 KB: at most 1 ms of serialization.
    assert!(st.min_ms >= 4.0 && st.max_ms <= 5.01, "{st:?}");
}

#[test]
fn frames_lost_are_the_frames_the_link_dropped_a_datagram_of() {
    let mut table = String::from("seed dgrams dropped frames complete lost\n");
    for seed in 1..=4 {
        let (a, b) = (Host::new(0), Host::new(0));
        // 1 % loss: about one frame in seven loses a datagram.
        let link = DgramLink::new(10, 4_000_000, 10_000, seed);
        let r = run(isoch(60), link, &a, &b, (0, 0));
        let dropped: BTreeSet<u64> = r
            .link
            .record
            .iter()
            .zip(&r.frame_of)
            .filter(|(d, _)| **d)
            .map(|(_, f)| *f)
            .collect();
        let c = r.rx.recv.final_counts();
        // A frame still open at the end is not counted lost.
        let expect_lost = dropped.iter().filter(|&&f| f < c.highest).count() as u64;
        assert!(!dropped.is_empty(), "seed {seed}: the draw dropped nothing");
        assert_eq!(c.lost, expect_lost, "seed {seed}");
        assert_eq!(
            c.complete,
            c.highest - expect_lost - dropped.contains(&c.highest) as u64
        );
        let delivered = r.link.record.iter().filter(|d| !**d).count() as u64;
        assert_eq!(r.rx_dgrams, delivered, "seed {seed}");
        table += &format!(
            "{seed} {} {} {} {} {}\n",
            r.frame_of.len(),
            r.frame_of.len() as u64 - delivered,
            r.units,
            c.complete,
            c.lost
        );
    }
    crate::snapshot::check("isochronous_loss_seeds_1_4.txt", &table);
}

#[test]
fn a_sender_not_scheduled_slips_slots_and_loses_no_frame() {
    let (a, b) = (Host::new(0), Host::new(0));
    // 100 fps; the sender sleeps from 305 to 352 ms: the frames due at 310-340 ms
    // passed entirely (slips), the one due at 350 ms goes late.
    let link = DgramLink::new(10, 1_000_000, 0, 1);
    let r = run(isoch(100), link, &a, &b, (305_000_000, 352_000_000));
    assert_eq!((r.units, r.slips), (96, 4));
    let c = r.rx.recv.final_counts();
    assert_eq!((c.highest, c.complete, c.lost), (96, 96, 0));
}

#[test]
fn udp_bursts_are_cut_into_datagrams_and_counted_whole() {
    let (a, b) = (Host::new(0), Host::new(0));
    // 30 000-byte bursts every 250 ms: 21 datagrams of 1400 bytes and one of 600.
    let p = Profile::Burst {
        bytes: 30_000,
        period_s: 0.25,
    };
    let r = run(p, DgramLink::new(10, 1_000_000, 0, 1), &a, &b, (0, 0));
    assert_eq!(r.units, 4);
    assert_eq!(r.frame_of.len(), 4 * 22);
    assert_eq!((r.rx_dgrams, r.rx_bytes), (88, 120_000));
}
