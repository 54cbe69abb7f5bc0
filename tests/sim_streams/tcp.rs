//! The TCP sender and receiver machines over the byte pipe: `-n`/`-k`/`-t` ends,
//! pacing, `--trip-times` one-way delays against the link delay and the hosts' clocks.

use crate::pipe::Pipe;
use crate::world::Host;
use netmeter::engine::machine::Budget;
use netmeter::engine::machine::tcp_recv::{TcpReceiver, TcpRecvStep};
use netmeter::engine::machine::tcp_send::{TcpSendConfig, TcpSendStep, TcpSender};
use netmeter::latency::OwdRecord;
use netmeter::sim::{HostConfig, Sim};
use netmeter::wire::write_tcp_frame_header;
use std::time::Duration;

/// What a run did.
#[derive(Debug)]
pub struct TcpRun {
    pub sender: TcpSender,
    pub receiver: TcpReceiver,
    /// The one-way delays of its `--trip-times` frames (recorded as the engine does).
    pub owd: OwdRecord,
    /// When the receiver read its last byte (virtual ns).
    pub last_read_ns: u64,
}

/// Run a sender on host `a` to a receiver on host `b` over `pipe` until the receiver
/// sees the end of the stream.
pub fn run(cfg: TcpSendConfig, pipe: Pipe, a: &Host, b: &Host, correction_ns: i64) -> TcpRun {
    run_limited(cfg, None, pipe, a, b, correction_ns)
}

/// As [`run`], with a `-n`/`-k` budget (the engine's, as its streams share it).
pub fn run_limited(
    cfg: TcpSendConfig,
    limit: Option<Budget>,
    pipe: Pipe,
    a: &Host,
    b: &Host,
    correction_ns: i64,
) -> TcpRun {
    let walls = Walls {
        a: &|ns| a.wall_ns(ns),
        b: &|ns| b.wall_ns(ns),
    };
    run_with(cfg, limit, pipe, a, walls, correction_ns)
}

/// The sender's and the receiver's wall clocks at a virtual time (ns since the epoch).
pub struct Walls<'a> {
    pub a: &'a dyn Fn(u64) -> i64,
    pub b: &'a dyn Fn(u64) -> i64,
}

/// As [`run`], the hosts' wall clocks given (the monotonic one is `a`'s), until the
/// receiver sees the end of the stream (or `limit_ns`, a bound that only stops a
/// failure).
pub fn run_with(
    cfg: TcpSendConfig,
    limit: Option<Budget>,
    mut pipe: Pipe,
    a: &Host,
    walls: Walls,
    correction_ns: i64,
) -> TcpRun {
    let limit_ns = 60_000_000_000;
    let trip_times = cfg.trip_times;
    let mut block = vec![0x5a; cfg.block_len.max(1)];
    let mut s = TcpSender::new(cfg, a.at(0));
    let mut r = TcpReceiver::new(trip_times);
    let mut owd = OwdRecord::default();
    let (mut now, mut wake, mut last_read_ns) = (0u64, 0u64, 0u64);
    let mut sending = true;
    loop {
        while sending && wake <= now {
            let take = |n| limit.as_ref().map_or(n, |b| b.take(n));
            match s.poll(|| a.at(now), || (walls.a)(now), take) {
                TcpSendStep::Write {
                    offset,
                    len,
                    block_len,
                    frame_ns,
                    ..
                } => {
                    if let Some(ns) = frame_ns {
                        write_tcp_frame_header(&mut block, block_len as u32, ns);
                    }
                    let n = pipe.write(now, &block[offset..offset + len]);
                    if n == 0 {
                        break; // the send buffer is full
                    }
                    s.on_written(n);
                }
                TcpSendStep::Wait(t) => wake = a.ns(t),
                TcpSendStep::Stop => {
                    sending = false;
                    pipe.close();
                }
            }
        }
        while let Some(data) = pipe.read(now, 128 * 1024) {
            let rx_ns = (walls.b)(now);
            let step = r.on_read(&data, |sent| owd.record_write(rx_ns, sent, correction_ns));
            if step == TcpRecvStep::Stop {
                return TcpRun {
                    sender: s,
                    receiver: r,
                    owd,
                    last_read_ns,
                };
            }
            last_read_ns = now;
        }
        let next = [
            pipe.next_event(now),
            (sending && wake > now).then_some(wake),
        ]
        .into_iter()
        .flatten()
        .min();
        match next {
            Some(t) if t <= limit_ns => now = t,
            _ => panic!("the run did not end by {limit_ns} ns (now {now})"),
        }
    }
}

fn cfg(block_len: usize) -> TcpSendConfig {
    TcpSendConfig {
        block_len,
        rate_bps: 0,
        burst: None,
        end: None,
        trip_times: false,
        ..TcpSendConfig::default()
    }
}

/// 80 Mbit/s (100 ns a byte), 5 ms one way, a 64 KiB send buffer.
fn link() -> Pipe {
    Pipe::new(100, 5_000_000, 64 * 1024)
}

#[test]
fn bytes_end_is_exact_and_the_link_never_idles() {
    let (a, b) = (Host::new(0), Host::new(0));
    let limit = Some(Budget::new(1_000_000, false));
    let run = run_limited(cfg(128 * 1024), limit, link(), &a, &b, 0);
    assert_eq!(run.sender.bytes(), 1_000_000);
    assert_eq!(
        run.sender.blocks(),
        8,
        "7 whole blocks and one of 82 496 bytes"
    );
    assert_eq!(run.receiver.bytes(), 1_000_000);
    // The pipe was never idle: the last byte left at 1e6 × 100 ns and arrived 5 ms on.
    assert_eq!(run.last_read_ns, 105_000_000);
}

#[test]
fn blocks_end_is_exact() {
    let (a, b) = (Host::new(0), Host::new(0));
    let limit = Some(Budget::new(7, true));
    let run = run_limited(cfg(1000), limit, link(), &a, &b, 0);
    assert_eq!((run.sender.blocks(), run.sender.bytes()), (7, 7000));
    assert_eq!(run.receiver.bytes(), 7000);
    assert_eq!(run.last_read_ns, 7000 * 100 + 5_000_000);
}

/// `-t 1 -b 8M -l 10000`: a block every 10 ms.
fn paced(trip_times: bool) -> TcpSendConfig {
    let mut c = cfg(10_000);
    c.rate_bps = 8_000_000;
    c.end = Some(Duration::from_secs(1));
    c.trip_times = trip_times;
    c
}

#[test]
fn a_paced_timed_sender_sends_its_rate_for_its_time() {
    let (a, b) = (Host::new(0), Host::new(0));
    let run = run(paced(false), link(), &a, &b, 0);
    assert_eq!(run.sender.blocks(), 100);
    assert_eq!(run.receiver.bytes(), 1_000_000);
    // Never further behind than the one block the pacer grants ahead.
    assert!(
        run.sender.max_lag_s() < 0.0101,
        "{}",
        run.sender.max_lag_s()
    );
    // The last block was written at 990 ms: 1 ms on the wire, 5 ms on the way.
    assert_eq!(run.last_read_ns, 996_000_000);
}

#[test]
fn trip_times_give_the_link_delay_plus_the_clock_offset() {
    // The receiver's clock is 3 ms ahead of the sender's.
    let (a, b) = (Host::new(0), Host::new(3_000_000));
    let run = run(paced(true), link(), &a, &b, -3_000_000);
    let owd = &run.owd;
    assert_eq!(owd.samples, 100);
    // Each 10 000-byte block: 1 ms on the wire, 5 ms on the way, +3 ms of clock.
    assert_eq!((owd.raw_min_ns, owd.raw_max_ns), (9_000_000, 9_000_000));
    assert_eq!(owd.clock_errors, 0);
    // With the offset removed, the corrected delays are the link's own.
    let st = owd.total.stats().expect("delays");
    assert!(
        (st.min_ms - 6.0).abs() < 0.01 && (st.max_ms - 6.0).abs() < 0.01,
        "{st:?}"
    );
}

#[test]
fn a_sender_clock_ahead_of_the_delay_shows_as_clock_errors() {
    // The sender's clock is 20 ms ahead: every raw delay is 6 − 20 = −14 ms.
    let (a, b) = (Host::new(20_000_000), Host::new(0));
    let run = run(paced(true), link(), &a, &b, 0);
    let owd = &run.owd;
    assert_eq!((owd.samples, owd.clock_errors), (100, 100));
    assert_eq!(owd.raw_max_ns, -14_000_000);
    assert_eq!(owd.negative_corrected, 100);
    assert_eq!(owd.total.len(), 0);
}

#[test]
fn trip_times_follow_a_drifting_receiver_clock() {
    // The simulator's hosts: the receiver's clock runs 100 ppm fast, so the raw delay
    // of the block sent at 10k ms (in 6 ms later) reads 6 ms + (10k + 6) ms × 1e-4.
    let mut sim = Sim::new(1);
    let ha = sim.add_host(HostConfig::default());
    let hb = sim.add_host(HostConfig {
        offset_ns: 0,
        drift_ppb: 100_000,
    });
    let wall = |h, ns| sim.wall_ns(h, Duration::from_nanos(ns));
    let walls = Walls {
        a: &|ns| wall(ha, ns),
        b: &|ns| wall(hb, ns),
    };
    let run = run_with(paced(true), None, link(), &Host::new(0), walls, 0);
    let owd = &run.owd;
    assert_eq!(owd.samples, 100);
    assert_eq!((owd.raw_min_ns, owd.raw_max_ns), (6_000_600, 6_099_600));
    // The mean of 6 000 600 + 1 000 k over k = 0..99.
    assert_eq!(owd.raw_sum_ns, 100 * 6_000_600 + 1000 * 4950);
}
