//! The bounceback client and server machines over a TCP byte pipe each way: round
//! trips against the link's delays and serialization, the server's hold, bursts, and
//! the `--working-load` probe's period and idle RPM.

use crate::pipe::Pipe;
use crate::world::Host;
use netmeter::engine::machine::bounce::{
    BounceClient, BounceConfig, BounceServer, BounceStep, PROBE_PERIOD, Rtt,
};
use netmeter::latency::Hist;
use std::time::Duration;

/// A run's round trips (client) and the server's counts.
#[derive(Debug)]
pub struct BounceRun {
    pub rtts: Vec<Rtt>,
    pub client: BounceClient,
    pub server: BounceServer,
}

/// A client on `a` and a server on `b`: requests of `req_len` over `fwd`, replies of
/// `cfg.reply_len` over `rev`, the server holding each `hold`; `until_ns` of virtual
/// time.
pub fn run(
    cfg: BounceConfig,
    req_len: usize,
    hold: Duration,
    mut fwd: Pipe,
    mut rev: Pipe,
    until_ns: u64,
) -> BounceRun {
    let (a, b) = (Host::new(0), Host::new(0));
    let mut c = BounceClient::new(cfg);
    let mut s = BounceServer::new(hold);
    let (req, reply) = (vec![1u8; req_len], vec![2u8; cfg.reply_len]);
    let (mut now, mut wake) = (0u64, 0u64);
    let mut rtts = Vec::new();
    // The server: request bytes in, the reply it holds (due time).
    let (mut got, mut holding) = (0usize, None::<u64>);
    loop {
        // Client.
        if wake <= now {
            match c.poll(a.at(now)) {
                BounceStep::Send { count } => {
                    for _ in 0..count {
                        c.on_sent(a.at(now));
                        assert_eq!(fwd.write(now, &req), req_len, "requests fit the buffer");
                    }
                    c.burst_sent(a.at(now));
                }
                BounceStep::Wait(t) => wake = b.ns(t).max(a.ns(t)),
                BounceStep::Await(_) => {}
                BounceStep::Lost(n) => panic!("{n} replies lost on a lossless link"),
            }
        }
        let mut replied = false;
        while let Some(d) = rev.read(now, usize::MAX) {
            c.on_reply_bytes(d.len(), a.at(now), &mut rtts);
            replied = true;
        }
        // Server: one request at a time, held, then answered.
        if let Some(due) = holding
            && due <= now
        {
            assert_eq!(
                rev.write(now, &reply),
                reply.len(),
                "replies fit the buffer"
            );
            holding = None;
        }
        while let Some(d) = fwd.read(now, req_len - got) {
            got += d.len();
            if got == req_len {
                break;
            }
        }
        if holding.is_none() && got == req_len {
            got = 0;
            holding = Some(b.ns(s.on_request(req_len, b.at(now))));
            continue; // a zero hold answers at once
        }
        if replied {
            continue; // the client may send again at once
        }
        let next = [
            fwd.next_event(now),
            rev.next_event(now),
            (wake > now).then_some(wake),
            holding.filter(|&t| t > now),
        ]
        .into_iter()
        .flatten()
        .min();
        match next {
            Some(t) if t < until_ns => now = t,
            _ => {
                return BounceRun {
                    rtts,
                    client: c,
                    server: s,
                };
            }
        }
    }
}

fn cfg(burst: u32, reply_len: usize) -> BounceConfig {
    BounceConfig {
        burst,
        reply_len,
        period: None,
        load_start: None,
        reply_timeout: None,
    }
}

/// 8 Mbit/s (1 µs a byte) and 2 ms each way.
fn pipes() -> (Pipe, Pipe) {
    (
        Pipe::new(1000, 2_000_000, 1 << 20),
        Pipe::new(1000, 2_000_000, 1 << 20),
    )
}

#[test]
fn a_round_trip_is_both_delays_and_both_serializations() {
    let (f, r) = pipes();
    let run = run(cfg(1, 200), 100, Duration::ZERO, f, r, 1_000_000_000);
    // 100 µs out, 2 ms, 200 µs back, 2 ms.
    assert!(
        run.rtts.iter().all(|t| t.ns == 4_300_000),
        "{:?}",
        &run.rtts[..3]
    );
    assert_eq!(run.rtts.len(), 232, "back to back: ⌊1 s / 4.3 ms⌋");
    assert_eq!(run.server.counts(), (233 * 100, 233));
    let mut h = Hist::default();
    run.rtts.iter().for_each(|t| h.record_ns(t.ns));
    let st = h.stats().expect("round trips");
    assert!(
        (st.min_ms - 4.3).abs() < 0.005 && (st.mean_ms - 4.3).abs() < 0.005,
        "{st:?}"
    );
}

#[test]
fn the_server_hold_is_added_to_every_round_trip() {
    let (f, r) = pipes();
    let hold = Duration::from_micros(250);
    let run = run(cfg(1, 200), 100, hold, f, r, 100_000_000);
    assert!(
        run.rtts.iter().all(|t| t.ns == 4_550_000),
        "{:?}",
        &run.rtts[..3]
    );
    assert_eq!(run.rtts.len(), 21);
}

#[test]
fn a_burst_of_requests_queues_on_the_link() {
    let (f, r) = pipes();
    // Three 1000-byte requests back to back: the k-th is in after (k+1) ms, its
    // 100-byte reply 0.1 ms later, each way 2 ms.
    let run = run(cfg(3, 100), 1000, Duration::ZERO, f, r, 20_000_000);
    // A burst takes 7.1 ms: in 20 ms two whole bursts and the third's first reply.
    let ns: Vec<u64> = run.rtts.iter().map(|t| t.ns).collect();
    let (a, b, c) = (5_100_000, 6_100_000, 7_100_000);
    assert_eq!(ns, vec![a, b, c, a, b, c, a]);
    assert_eq!(run.client.sent(), 9);
}

#[test]
fn working_load_probes_keep_their_period_and_give_the_idle_rpm() {
    let (f, r) = pipes();
    let t = Host::new(0);
    let c = BounceConfig {
        period: Some(PROBE_PERIOD),
        load_start: Some(t.at(0) + Duration::from_millis(500)),
        ..cfg(1, 200)
    };
    let run = run(c, 100, Duration::ZERO, f, r, 1_000_000_000);
    assert_eq!(run.client.sent(), 100, "one probe every 10 ms for 1 s");
    let idle: Vec<&Rtt> = run.rtts.iter().filter(|r| r.idle).collect();
    assert_eq!(idle.len(), 50);
    let mut h = Hist::default();
    idle.iter().for_each(|t| h.record_ns(t.ns));
    // RPM = 60 s / 4.3 ms.
    let rpm = h.rpm().expect("idle probes");
    assert!((rpm - 60.0 / 0.0043).abs() < 15.0, "{rpm}");
}
