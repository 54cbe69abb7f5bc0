//! The UDP bounceback client and server machines over the simulator, lossy each way: a
//! transaction whose request or reply the simulator dropped is lost after the reply
//! deadline; every other one's round trip is its reply's arrival in the record minus
//! its request's sending.

use crate::net::{Net, link};
use netmeter::engine::machine::bounce::{
    BounceClient, BounceConfig, BounceServer, BounceStep, UDP_REPLY_TIMEOUT,
};
use std::time::Duration;

const REQ: usize = 100;
const REP: usize = 200;

/// What a run did.
struct Run {
    /// Round trips by sequence number.
    rtts: Vec<(u64, u64)>,
    lost: u64,
    /// Per transaction (sequence − 1): its request's and its reply's packet numbers.
    packets: Vec<(u64, Option<u64>)>,
    server: BounceServer,
    net: Net,
}

/// `secs` of bounceback, `burst` requests at a time, loss `p` each way: 8 Mbit/s and
/// 2 ms each way.
fn run(burst: u32, p: f64, seed: u64, secs: u64) -> Run {
    let l = link(8_000_000, Duration::from_millis(2), p);
    let mut net = Net::new(seed, l.clone(), l);
    let mut c = BounceClient::new(BounceConfig {
        burst,
        reply_len: REP,
        period: None,
        load_start: None,
        reply_timeout: Some(UDP_REPLY_TIMEOUT),
    });
    let mut s = BounceServer::new(Duration::ZERO);
    let (mut req, mut rep) = (vec![0u8; REQ], vec![0u8; REP]);
    let (mut rtts, mut lost, mut packets) = (Vec::new(), 0, Vec::new());
    let end = secs * 1_000_000_000;
    loop {
        let now = net.now();
        let wake = match c.poll(net.ca.at(now)) {
            // Every burst sent is settled (answered or lost) before the run ends.
            BounceStep::Send { .. } if now >= end => break,
            BounceStep::Send { count } => {
                for _ in 0..count {
                    let seq = c.on_sent(net.ca.at(now));
                    req[..8].copy_from_slice(&seq.to_be_bytes());
                    packets.push((net.send(net.fwd, &req), None));
                }
                c.burst_sent(net.ca.at(now));
                continue;
            }
            BounceStep::Await(until) => until.map(|t| net.ca.ns(t)),
            BounceStep::Lost(n) => {
                lost += n;
                continue;
            }
            BounceStep::Wait(_) => unreachable!("no period"),
        };
        let mut got = false;
        while let Some(d) = net.recv() {
            let seq = u64::from_be_bytes(d.payload[..8].try_into().expect("8 bytes"));
            if d.to == net.b {
                // The server answers each request as it arrives.
                s.on_request(d.payload.len(), net.cb.at(now));
                rep[..8].copy_from_slice(&d.payload[..8]);
                packets[seq as usize - 1].1 = Some(net.send(net.rev, &rep));
            } else if let Some(t) = c.on_reply(seq, net.ca.at(now)) {
                rtts.push((seq, t.ns));
            }
            got = true;
        }
        if got {
            continue;
        }
        let next = [net.next_arrival(), wake].into_iter().flatten().min();
        net.advance_to(next.expect("something is pending"));
    }
    Run {
        rtts,
        lost,
        packets,
        server: s,
        net,
    }
}

#[test]
fn lost_transactions_are_those_the_simulator_dropped_a_datagram_of() {
    for seed in [3, 7, 11] {
        // 5 % each way over 20 s: about one transaction in ten.
        let r = run(4, 0.05, seed, 20);
        assert_eq!(r.rtts.len() + r.lost as usize, r.packets.len());
        let dropped =
            |&(q, a): &(u64, Option<u64>)| r.net.dropped(q) || a.is_none_or(|a| r.net.dropped(a));
        let expect = r.packets.iter().filter(|p| dropped(p)).count() as u64;
        assert!(expect > 0, "seed {seed}");
        assert_eq!(r.lost, expect, "seed {seed}");
        // What the server answered is what the forward link delivered.
        let delivered = r.packets.iter().filter(|p| !r.net.dropped(p.0)).count() as u64;
        assert_eq!(
            r.server.counts(),
            (delivered * REQ as u64, delivered),
            "seed {seed}"
        );
    }
}

#[test]
fn answered_round_trips_are_the_simulator_s() {
    let r = run(2, 0.0, 1, 1);
    assert_eq!(r.lost, 0);
    for &(seq, ns) in &r.rtts {
        let (q, a) = r.packets[seq as usize - 1];
        let sent = r.net.sim.record()[q as usize].sent.as_nanos() as u64;
        let back = r.net.arrived_at(a.expect("answered")).expect("delivered");
        assert_eq!(ns, back - sent, "transaction {seq}");
    }
    // Both delays at least; the first request waits 100 µs for its tokens (the bucket
    // starts empty), the second 100 µs more, and its reply 100 µs for tokens behind the
    // first reply's; after an idle
    // round trip the buckets are full and a burst's first request and reply leave at
    // once.
    let first = [
        (1, 4_100_000),
        (2, 4_300_000),
        (3, 4_000_000),
        (4, 4_200_000),
    ];
    assert_eq!(&r.rtts[..4], &first);
    assert!(r.rtts.iter().all(|&(_, ns)| ns >= 4_000_000));
    assert!(r.rtts.len() > 200, "{}", r.rtts.len());
}
