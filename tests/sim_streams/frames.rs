//! The isochronous and burst UDP sender machine to the frame receiver
//! (`profile::FrameRecv`, as `record::FrameRecord` feeds it) over the simulator: frames
//! sent, complete and lost against the simulator's record of its drops, each frame's
//! latency against the record's arrival times, slips when the sender is not scheduled.

use crate::net::{Net, link};
use netmeter::engine::machine::profile_send::{Carrier, ProfileSender, ProfileStep};
use netmeter::profile::{FrameRecv, Profile};
use netmeter::wire::{IsochHeader, Isochronous, UdpHeader};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const LEN: usize = 1400;
const UDP_HDR: usize = 16; // 64-bit sequence numbers

/// What a run did.
struct Run {
    units: u64,
    slips: u64,
    /// Per packet sent (by its number in the record): its frame id.
    frame_of: BTreeMap<u64, u64>,
    /// Per frame: when it started (virtual ns).
    started: BTreeMap<u64, u64>,
    rx: FrameRecv,
    /// Frame transits the receiver measured, by frame id.
    transits: BTreeMap<u64, i64>,
    rx_dgrams: u64,
    rx_bytes: u64,
    net: Net,
}

/// A profiled UDP sender for 1 s (not scheduled from `stall.0` to `stall.1`, ns) to a
/// frame receiver over `net`'s forward link.
fn run(p: Profile, mut net: Net, stall: (u64, u64)) -> Run {
    let min_len = UDP_HDR + IsochHeader::LEN;
    let carrier = Carrier::Udp { len: LEN, min_len };
    let end = Some(Duration::from_secs(1));
    let mut m = ProfileSender::new(&p, 1, carrier, net.ca.at(0), end);
    let mut rx = FrameRecv::default();
    let mut buf = vec![0u8; LEN];
    let (mut wake, mut seq, mut units, mut over) = (0u64, 0u64, 0, false);
    let (mut frame_of, mut started, mut transits) = Default::default();
    let (mut rx_dgrams, mut rx_bytes) = (0, 0);
    loop {
        let now = net.now();
        if (stall.0..stall.1).contains(&now) {
            wake = stall.1;
        }
        while !over && wake <= now {
            match m.poll(net.ca.at(now)) {
                ProfileStep::Wait(t) => wake = net.ca.ns(t),
                ProfileStep::Over => over = true,
                ProfileStep::Send(u) => {
                    let start_ns = net.sim.wall_ns(net.a, net.sim.now());
                    BTreeMap::insert(&mut started, u.id, now);
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
                        let id = net.send(net.fwd, &buf[..u.piece(i)]);
                        BTreeMap::insert(&mut frame_of, id, u.id);
                    }
                    m.unit_done(net.ca.at(now));
                    units += 1;
                }
            }
        }
        while let Some(d) = net.recv() {
            let h = IsochHeader::read(&d.payload[UDP_HDR..]).expect("a frame header");
            let rx_ns = net.sim.wall_ns(net.b, d.at);
            if let Some(t) = rx.on_datagram(&h, rx_ns) {
                BTreeMap::insert(&mut transits, h.frame_id, t);
            }
            rx_dgrams += 1;
            rx_bytes += d.payload.len() as u64;
        }
        let next = [net.next_arrival(), (!over).then_some(wake.max(now + 1))]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(t) => net.advance_to(t),
            None => {
                return Run {
                    units,
                    slips: m.slips(),
                    frame_of,
                    started,
                    rx,
                    transits,
                    rx_dgrams,
                    rx_bytes,
                    net,
                };
            }
        }
    }
}

/// `fps` frames a second at a mean 10 Mbit/s (stdev 2 Mbit/s).
fn isoch(fps: u32) -> Profile {
    Profile::Isochronous {
        params: Isochronous {
            fps,
            mean_bps: 10_000_000,
            stdev_bps: 2_000_000,
        },
        framed: true,
        both_ways: false,
    }
}

/// 800 Mbit/s, 4 ms one way, `loss` each way.
fn net(seed: u64, loss: f64) -> Net {
    let l = link(800_000_000, Duration::from_millis(4), loss);
    Net::new(seed, l.clone(), l)
}

#[test]
fn every_frame_arrives_whole_and_its_latency_is_the_simulator_s() {
    let r = run(isoch(60), net(1, 0.0), (0, 0));
    assert_eq!((r.units, r.slips), (60, 0));
    let c = r.rx.final_counts();
    assert_eq!((c.highest, c.complete, c.lost), (60, 60, 0));
    assert_eq!(r.rx_dgrams, r.frame_of.len() as u64);
    // Each frame's transit: its last datagram's arrival in the record minus its start.
    let mut last: BTreeMap<u64, u64> = BTreeMap::new();
    for (&id, &f) in &r.frame_of {
        let at = r.net.arrived_at(id).expect("delivered");
        let e = last.entry(f).or_default();
        *e = (*e).max(at);
    }
    let expect: BTreeMap<u64, i64> = last
        .iter()
        .map(|(f, at)| (*f, (at - r.started[f]) as i64))
        .collect();
    assert_eq!(r.transits, expect);
    assert!(expect.values().all(|&t| t >= 4_000_000), "{expect:?}");
}

#[test]
fn frames_lost_are_the_frames_the_simulator_dropped_a_datagram_of() {
    let mut table = String::from("seed dgrams dropped frames complete lost\n");
    for seed in 1..=4 {
        // 1 % loss: about one frame in seven loses a datagram.
        let r = run(isoch(60), net(seed, 0.01), (0, 0));
        let dropped: BTreeSet<u64> = r
            .frame_of
            .iter()
            .filter(|(id, _)| r.net.dropped(**id))
            .map(|(_, f)| *f)
            .collect();
        let c = r.rx.final_counts();
        // A frame still open at the end is not counted lost.
        let expect_lost = dropped.iter().filter(|&&f| f < c.highest).count() as u64;
        assert!(!dropped.is_empty(), "seed {seed}: the draw dropped nothing");
        assert_eq!(c.lost, expect_lost, "seed {seed}");
        let open = dropped.contains(&c.highest) as u64;
        assert_eq!(c.complete, c.highest - expect_lost - open, "seed {seed}");
        let delivered = r.frame_of.keys().filter(|id| !r.net.dropped(**id)).count() as u64;
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
    // 100 fps; the sender sleeps from 305 to 352 ms: the frames due at 310-340 ms
    // passed entirely (slips), the one due at 350 ms goes late.
    let r = run(isoch(100), net(1, 0.0), (305_000_000, 352_000_000));
    assert_eq!((r.units, r.slips), (96, 4));
    let c = r.rx.final_counts();
    assert_eq!((c.highest, c.complete, c.lost), (96, 96, 0));
    assert_eq!(
        r.started[&32], 352_000_000,
        "the late frame left when the sender woke"
    );
}

#[test]
fn udp_bursts_are_cut_into_datagrams_and_counted_whole() {
    // 30 000-byte bursts every 250 ms: 21 datagrams of 1400 bytes and one of 600.
    let p = Profile::Burst {
        bytes: 30_000,
        period_s: 0.25,
    };
    let r = run(p, net(1, 0.0), (0, 0));
    assert_eq!(r.units, 4);
    assert_eq!(r.frame_of.len(), 4 * 22);
    assert_eq!((r.rx_dgrams, r.rx_bytes), (88, 120_000));
}

#[test]
fn every_seed_gives_the_same_record_and_the_same_counts() {
    let once = |seed| {
        let r = run(isoch(60), net(seed, 0.02), (0, 0));
        let c = r.rx.final_counts();
        let record = serde_json::to_string(r.net.sim.record()).expect("serializes");
        (record, c.complete, c.lost, r.transits)
    };
    for seed in 0..8 {
        let (a, b) = (once(seed), once(seed));
        assert!(a == b, "seed {seed} ran differently");
    }
    assert_ne!(once(0).0, once(1).0, "seeds draw differently");
}
