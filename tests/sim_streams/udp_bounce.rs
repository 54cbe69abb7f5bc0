//! The UDP bounceback client and server machines over a lossy datagram link each way:
//! a transaction whose request or reply the link dropped is lost after the reply
//! deadline, every other one's round trip is the link's.

use crate::dgram::DgramLink;
use crate::world::Host;
use netmeter::engine::machine::bounce::{
    BounceClient, BounceConfig, BounceServer, BounceStep, UDP_REPLY_TIMEOUT,
};
use std::time::Duration;

const REQ: usize = 100;
const REP: usize = 200;

/// What a run did: round trips, lost, and per transaction whether the link dropped
/// its request or reply.
struct Run {
    rtts: Vec<u64>,
    lost: u64,
    dropped: Vec<bool>,
    server: BounceServer,
    /// The forward link's own record.
    fwd_record: Vec<bool>,
}

/// `secs` of bounceback, `burst` requests at a time, loss `ppm` each way.
fn run(burst: u32, ppm: u64, seed: u64, secs: u64) -> Run {
    let (a, b) = (Host::new(0), Host::new(0));
    let mut fwd = DgramLink::new(1000, 2_000_000, ppm, seed);
    let mut rev = DgramLink::new(1000, 2_000_000, ppm, seed + 1000);
    let mut c = BounceClient::new(BounceConfig {
        burst,
        reply_len: REP,
        period: None,
        load_start: None,
        reply_timeout: Some(UDP_REPLY_TIMEOUT),
    });
    let mut s = BounceServer::new(Duration::ZERO);
    let (mut req, mut rep) = (vec![0u8; REQ], vec![0u8; REP]);
    let (mut rtts, mut lost, mut dropped) = (Vec::new(), 0, Vec::new());
    let mut now = 0u64;
    let end = secs * 1_000_000_000;
    loop {
        let wake = match c.poll(a.at(now)) {
            // Every burst sent is settled (answered or lost) before the run ends.
            BounceStep::Send { .. } if now >= end => break,
            BounceStep::Send { count } => {
                for _ in 0..count {
                    let seq = c.on_sent(a.at(now));
                    req[..8].copy_from_slice(&seq.to_be_bytes());
                    dropped.push(fwd.send(now, &req));
                }
                c.burst_sent(a.at(now));
                continue;
            }
            BounceStep::Await(until) => until.map(|t| a.ns(t)),
            BounceStep::Lost(n) => {
                lost += n;
                continue;
            }
            BounceStep::Wait(_) => unreachable!("no period"),
        };
        // The server answers each request as it arrives.
        while let Some((_, d)) = fwd.recv(now) {
            s.on_request(d.len(), b.at(now));
            rep[..8].copy_from_slice(&d[..8]);
            let seq = u64::from_be_bytes(d[..8].try_into().unwrap());
            if rev.send(now, &rep) {
                dropped[seq as usize - 1] = true;
            }
        }
        let mut got = false;
        while let Some((_, d)) = rev.recv(now) {
            let seq = u64::from_be_bytes(d[..8].try_into().unwrap());
            if let Some(t) = c.on_reply(seq, a.at(now)) {
                rtts.push(t.ns);
            }
            got = true;
        }
        if got {
            continue;
        }
        let next = [fwd.next_arrival(), rev.next_arrival(), wake]
            .into_iter()
            .flatten()
            .filter(|&t| t >= now)
            .min();
        now = next.expect("something is pending");
    }
    Run {
        rtts,
        lost,
        dropped,
        server: s,
        fwd_record: fwd.record,
    }
}

#[test]
fn lost_transactions_are_those_the_link_dropped_a_datagram_of() {
    for seed in [3, 7, 11] {
        // 5 % each way over 20 s: about one transaction in ten.
        let r = run(4, 50_000, seed, 20);
        assert_eq!(r.rtts.len() as u64 + r.lost, r.dropped.len() as u64);
        let expect = r.dropped.iter().filter(|d| **d).count() as u64;
        assert!(expect > 0, "seed {seed}");
        assert_eq!(r.lost, expect, "seed {seed}");
        // What the server answered is what the forward link delivered.
        let delivered = r.fwd_record.iter().filter(|d| !**d).count() as u64;
        assert_eq!(
            r.server.counts(),
            (delivered * REQ as u64, delivered),
            "seed {seed}"
        );
    }
}

#[test]
fn answered_round_trips_are_the_link_s_and_the_burst_s() {
    let r = run(2, 0, 1, 1);
    assert_eq!(r.lost, 0);
    // Request 100 µs + 2 ms, reply 200 µs + 2 ms; the second reply waits behind the
    // first on the way back (it leaves at 2.5 ms, not 2.4).
    assert_eq!(&r.rtts[..2], &[4_300_000, 4_500_000]);
    assert_eq!(r.rtts.len() % 2, 0);
}
