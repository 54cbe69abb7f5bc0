//! Self-test of the emulated-link test bed (`tests/integration/support/netbed.rs`), without
//! netmeter: proves that connectivity, delay, loss, shaping, delay variation,
//! reordering and cleanup do what accuracy tests will rely on.
//!
//! Full tier (needs root); run with
//! `cargo test --features full-tests --test integration netbed_selftest::`.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::support::netbed::{
    Dir, IPPROTO_UDP, LinkConfig, Netbed, Proto, Reorder, Side, Variation, bed,
    enable_rx_timestamps, force_socket_buffers, recv_timestamped, rfc3550_jitter, sweep_stale_beds,
    timing_lock, udp_goodput_fraction,
};

const PORT: u16 = 40_000;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Wall-clock nanoseconds, the clock of kernel receive timestamps.
fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// One received datagram: sequence number, one-way transit (sender stamp to kernel
/// receive stamp, both wall clock of this machine) and user-space arrival time.
#[derive(Clone, Copy, Debug)]
struct Rx {
    seq: u32,
    transit: Duration,
    at: Instant,
}

/// Sends `count` datagrams of `size` bytes carrying [seq u32][send time u64, wall-clock ns], `gap` apart.
fn send_numbered(sock: &UdpSocket, to: SocketAddr, count: u32, gap: Duration, size: usize) {
    let mut buf = vec![0u8; size.max(12)];
    let start = Instant::now();
    let mut last: Option<Instant> = None;
    for seq in 0..count {
        // On schedule, but never closer than `gap` to the previous datagram (no
        // catch-up bursts after the thread was descheduled).
        let due = (start + gap * seq).max(last.map_or(start, |l| l + gap));
        if let Some(w) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(w);
        }
        buf[..4].copy_from_slice(&seq.to_be_bytes());
        buf[4..12].copy_from_slice(&wall_ns().to_be_bytes());
        sock.send_to(&buf, to).expect("send_to");
        last = Some(Instant::now());
    }
}

/// Receives until `expect` datagrams arrived, nothing came for `idle`, or `limit` passed.
fn recv_numbered(sock: &UdpSocket, expect: usize, idle: Duration, limit: Duration) -> Vec<Rx> {
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    enable_rx_timestamps(sock).unwrap();
    let mut got = Vec::with_capacity(expect);
    let mut buf = [0u8; 65_536];
    let start = Instant::now();
    let mut last = Instant::now();
    while got.len() < expect && start.elapsed() < limit && last.elapsed() < idle {
        match recv_timestamped(sock, &mut buf) {
            Ok((n, stamp)) if n >= 12 => {
                let at = Instant::now();
                let seq = u32::from_be_bytes(buf[..4].try_into().unwrap());
                let sent = u64::from_be_bytes(buf[4..12].try_into().unwrap());
                // Kernel receive stamp: free of this thread's scheduling delay.
                let rx_ns = stamp.map_or_else(wall_ns, |t| {
                    t.duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
                });
                got.push(Rx {
                    seq,
                    transit: Duration::from_nanos(rx_ns.saturating_sub(sent)),
                    at,
                });
                last = at;
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => panic!("recv: {e}"),
        }
    }
    got
}

/// Sends `count` numbered datagrams `from` → `to_side` (while a thread receives) and
/// returns what arrived.
fn udp_exchange(
    b: &Netbed,
    from: Side,
    to_side: Side,
    count: u32,
    gap: Duration,
    size: usize,
) -> Vec<Rx> {
    let dst_ip = if to_side == Side::H2 {
        b.h2_addr()
    } else {
        b.h1_addr()
    };
    let rx = b
        .udp_socket(to_side, SocketAddr::new(IpAddr::V4(dst_ip), PORT))
        .unwrap();
    force_socket_buffers(&rx, 4 << 20).unwrap();
    let tx = b.udp_socket(from, "0.0.0.0:0".parse().unwrap()).unwrap();
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            recv_numbered(
                &rx,
                count as usize,
                Duration::from_millis(500),
                Duration::from_secs(8),
            )
        });
        send_numbered(
            &tx,
            SocketAddr::new(IpAddr::V4(dst_ip), PORT),
            count,
            gap,
            size,
        );
        h.join().unwrap()
    })
}

fn missing(rx: &[Rx], count: u32) -> Vec<u32> {
    let mut seen = vec![false; count as usize];
    for r in rx {
        seen[r.seq as usize] = true;
    }
    (0..count).filter(|&i| !seen[i as usize]).collect()
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn ping_h1_to_h2_works() {
    let b = bed(LinkConfig::new());
    for ns in [b.h1_ns(), b.r_ns(), b.h2_ns()] {
        assert!(
            Path::new(&format!("/run/netns/{ns}")).exists(),
            "{ns} missing"
        );
    }
    let p4 = b
        .ping(
            Side::H1,
            IpAddr::V4(b.h2_addr()),
            5,
            Duration::from_millis(5),
            Duration::from_secs(1),
        )
        .unwrap();
    let p6 = b
        .ping(
            Side::H1,
            IpAddr::V6(b.h2_addr6()),
            5,
            Duration::from_millis(5),
            Duration::from_secs(1),
        )
        .unwrap();
    eprintln!(
        "ping v4 {:?} avg {:.3} ms; v6 avg {:.3} ms",
        p4.received,
        ms(p4.avg().unwrap()),
        ms(p6.avg().unwrap())
    );
    assert_eq!((p4.sent, p4.received), (5, 5));
    assert_eq!((p6.sent, p6.received), (5, 5));
    // Reverse direction and UDP, too.
    let back = b
        .ping(
            Side::H2,
            IpAddr::V4(b.h1_addr()),
            3,
            Duration::from_millis(5),
            Duration::from_secs(1),
        )
        .unwrap();
    assert_eq!(back.received, 3);
    let rx = udp_exchange(&b, Side::H1, Side::H2, 20, Duration::ZERO, 200);
    assert_eq!(rx.len(), 20);
    let c = b.counters().unwrap();
    assert!(c.fwd_12 >= 5 + 5 + 3 + 20 && c.fwd_21 >= 5 + 5 + 3, "{c:?}");
    assert_eq!(c.dropped(), 0);
    assert!(
        b.delay_stats().is_none(),
        "no delay line without delay options"
    );
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn fixed_delay_10ms_each_way_gives_20ms_rtt() {
    let _serial = timing_lock();
    let b = bed(LinkConfig::new().delay_ms(10.0));
    let p = b
        .ping(
            Side::H1,
            IpAddr::V4(b.h2_addr()),
            20,
            Duration::from_millis(15),
            Duration::from_secs(1),
        )
        .unwrap();
    let (min, avg, max) = (p.min().unwrap(), p.avg().unwrap(), p.max().unwrap());
    let mut sorted = p.rtts.clone();
    sorted.sort();
    let median = sorted[sorted.len() / 2];
    let st = b.delay_stats().unwrap();
    eprintln!(
        "RTT min/median/avg/max = {:.3}/{:.3}/{:.3}/{:.3} ms; line lateness mean {:.1} us max {:.1} us (realtime {})",
        ms(min),
        ms(median),
        ms(avg),
        ms(max),
        st.h1_to_h2.mean_lateness().as_secs_f64() * 1e6,
        st.h1_to_h2.max_lateness.as_secs_f64() * 1e6,
        st.realtime
    );
    assert_eq!(p.received, 20);
    assert!(
        min >= Duration::from_millis(20),
        "RTT below the injected 20 ms: {min:?}"
    );
    assert!(
        min <= Duration::from_millis(21),
        "min RTT too high: {min:?}"
    );
    assert!(
        median <= Duration::from_micros(21_500),
        "median RTT too high: {median:?}"
    );
    // Single outliers come from the VM's timer/scheduler, not the bed; bound them loosely.
    assert!(
        max <= Duration::from_millis(30),
        "max RTT too high: {max:?}"
    );
    assert_eq!(st.h1_to_h2.packets_out, 20, "{:?}", st.h1_to_h2.records);
    assert_eq!(st.h2_to_h1.packets_out, 20);
    assert_eq!(b.delay_line_losses().unwrap(), 0);
    assert!(
        st.h1_to_h2
            .records
            .iter()
            .all(|r| r.scheduled == Duration::from_millis(10))
    );
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn drop_every_10th_icmp_one_direction() {
    let b = bed(LinkConfig::new()
        .drop_every_nth(10)
        .loss_proto(Proto::Icmp)
        .loss_dir(Dir::H1ToH2));
    let p = b
        .ping(
            Side::H1,
            IpAddr::V4(b.h2_addr()),
            100,
            Duration::from_millis(2),
            Duration::from_millis(300),
        )
        .unwrap();
    let c = b.counters().unwrap();
    eprintln!(
        "ICMP: sent {} received {} lost {:?}; counters {c:?}",
        p.sent, p.received, p.lost
    );
    assert_eq!(p.received, 90);
    assert_eq!(
        p.lost,
        (0..10).map(|k| k * 10 + 9).collect::<Vec<u16>>(),
        "every 10th request (the 10th, 20th, ...)"
    );
    assert_eq!(
        (c.seen_12, c.nth_12, c.nth_21, c.dropped()),
        (100, 10, 0, 10)
    );
    assert_eq!(b.dropped_packets().unwrap(), 10);
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn drop_every_10th_udp_both_directions_and_reverse_only() {
    let b = bed(LinkConfig::new().drop_every_nth(10)); // UDP, both directions
    let fwd = udp_exchange(&b, Side::H1, Side::H2, 100, Duration::from_micros(200), 300);
    let rev = udp_exchange(&b, Side::H2, Side::H1, 100, Duration::from_micros(200), 300);
    let c = b.counters().unwrap();
    eprintln!(
        "UDP both: fwd {} rev {} received; {c:?}",
        fwd.len(),
        rev.len()
    );
    let expect: Vec<u32> = (0..10).map(|k| k * 10 + 9).collect();
    assert_eq!(missing(&fwd, 100), expect);
    assert_eq!(missing(&rev, 100), expect);
    assert_eq!(
        (c.nth_12, c.nth_21, c.seen_12, c.seen_21),
        (10, 10, 100, 100)
    );

    // Loss only on h2→h1 (what `-R` tests need).
    let b = bed(LinkConfig::new().drop_every_nth(10).loss_dir(Dir::H2ToH1));
    let fwd = udp_exchange(&b, Side::H1, Side::H2, 100, Duration::from_micros(200), 300);
    let rev = udp_exchange(&b, Side::H2, Side::H1, 100, Duration::from_micros(200), 300);
    let c = b.counters().unwrap();
    eprintln!(
        "UDP h2->h1 only: fwd {} rev {} received; {c:?}",
        fwd.len(),
        rev.len()
    );
    assert_eq!(fwd.len(), 100);
    assert_eq!(rev.len(), 90);
    assert_eq!(
        (c.dropped_dir(Dir::H1ToH2), c.dropped_dir(Dir::H2ToH1)),
        (0, 10)
    );
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn random_loss_matches_counter_exactly() {
    let b = bed(LinkConfig::new().random_loss_pct(5.0).loss_dir(Dir::H1ToH2));
    let rx = udp_exchange(
        &b,
        Side::H1,
        Side::H2,
        2000,
        Duration::from_micros(100),
        200,
    );
    let c = b.counters().unwrap();
    eprintln!(
        "random 5%: received {} of 2000, counter {} ({:.2} %)",
        rx.len(),
        c.rand_12,
        c.rand_12 as f64 / 20.0
    );
    assert_eq!(
        rx.len() as u64 + c.rand_12,
        2000,
        "every missing datagram is a counted drop"
    );
    assert!(
        (50..=150).contains(&c.rand_12),
        "5 % of 2000 should be ~100: {}",
        c.rand_12
    );
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn shaper_100mbit_delivers_100mbit() {
    let _serial = timing_lock();
    let b = bed(LinkConfig::new().rate_mbit(100.0));
    let expected = 100.0 * udp_goodput_fraction(SHAPED_SIZE, false);
    // tbf never lets more than its rate (plus one bucket) through, on any host; a
    // busy host can only make it deliver less: its dequeue runs from a timer and a
    // softirq, and a late one overflows the bucket, or a descheduled sender lets the
    // 25 ms queue run dry. So every attempt must stay under the rate, and one of up
    // to three must reach it.
    let mut attempts = Vec::new();
    for _ in 0..3 {
        let goodput = shaped_udp_goodput(&b);
        assert!(
            goodput < expected * 1.05,
            "goodput {goodput:.2} Mbit/s exceeds the shaper's {expected:.2}"
        );
        attempts.push(goodput);
        if (goodput - expected).abs() / expected < 0.03 {
            break;
        }
    }
    let sh = b.shaper_stats(Dir::H1ToH2).unwrap().unwrap();
    eprintln!(
        "UDP through 100 Mbit/s tbf: {attempts:.2?} Mbit/s payload (expected {expected:.2}), shaper {sh:?}"
    );
    let best = attempts.iter().copied().fold(0.0, f64::max);
    assert!(
        (best - expected).abs() / expected < 0.03,
        "goodput {attempts:.2?} vs {expected:.2}"
    );
    assert!(sh.drops > 0, "the shaper should have dropped the excess");

    if Path::new("/usr/bin/iperf3").exists() {
        let _server = b
            .spawn_in(Side::H2, "/usr/bin/iperf3", &["-s", "-1", "-p", "5299"])
            .unwrap();
        let target = b.h2_addr().to_string();
        let mut out = None;
        // The server needs a moment to listen; bounded retries.
        for _ in 0..40 {
            let o = b
                .spawn_in(
                    Side::H1,
                    "/usr/bin/iperf3",
                    &["-c", &target, "-p", "5299", "-t", "2", "-J"],
                )
                .unwrap()
                .finish(Duration::from_secs(8))
                .unwrap();
            // iperf3 -J exits 0 even when it could not connect; look for "error".
            let failed = serde_json::from_slice::<serde_json::Value>(&o.stdout)
                .map_or(true, |v| v.get("error").is_some());
            if o.status.success() && !failed {
                out = Some(o);
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = out.expect("iperf3 client never succeeded");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let bps = v["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap_or_else(|| {
                panic!(
                    "no sum_received in iperf3 output: {}",
                    String::from_utf8_lossy(&out.stdout)
                )
            });
        eprintln!("iperf3 TCP through 100 Mbit/s tbf: {:.2} Mbit/s", bps / 1e6);
        // TCP payload at MSS 1448 in a 1514-byte frame: at most ~95.6 Mbit/s.
        assert!(
            (85e6..=100e6).contains(&bps),
            "iperf3 TCP {:.2} Mbit/s",
            bps / 1e6
        );
    }
}

const SHAPED_SIZE: usize = 1400;

/// Offers 150 Mbit/s of UDP for 1.5 s through the bed's shaper and returns the
/// payload goodput over the steady part (after the first 300 ms: tbf's bucket and the
/// queue filling), timed by the kernel's receive stamps, not the reading thread's
/// clock (a reader descheduled at either end would stretch or shrink the span).
fn shaped_udp_goodput(b: &Netbed) -> f64 {
    let dst = SocketAddr::new(IpAddr::V4(b.h2_addr()), PORT);
    let rx = b.udp_socket(Side::H2, dst).unwrap();
    force_socket_buffers(&rx, 8 << 20).unwrap();
    let tx = b
        .udp_socket(Side::H1, "0.0.0.0:0".parse().unwrap())
        .unwrap();
    let offered_bps = 150e6;
    let pps = offered_bps / (SHAPED_SIZE as f64 * 8.0);
    let dur = Duration::from_millis(1500);
    let times = std::thread::scope(|s| {
        let h = s.spawn(|| {
            rx.set_read_timeout(Some(Duration::from_millis(20)))
                .unwrap();
            enable_rx_timestamps(&rx).unwrap();
            let mut buf = [0u8; 2048];
            let mut times = Vec::new();
            let start = Instant::now();
            let mut last = Instant::now();
            while start.elapsed() < Duration::from_secs(5)
                && last.elapsed() < Duration::from_millis(300)
            {
                if let Ok((n, stamp)) = recv_timestamped(&rx, &mut buf) {
                    assert_eq!(n, SHAPED_SIZE);
                    last = Instant::now();
                    times.push(stamp.unwrap_or_else(SystemTime::now));
                }
            }
            times
        });
        // Paced sender, bounded by `dur`.
        let buf = [0u8; SHAPED_SIZE];
        let start = Instant::now();
        let mut sent = 0u64;
        while start.elapsed() < dur {
            let due = (start.elapsed().as_secs_f64() * pps) as u64;
            while sent < due {
                let _ = tx.send_to(&buf, dst);
                sent += 1;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        h.join().unwrap()
    });
    let first = times[0];
    let steady: Vec<SystemTime> = times
        .iter()
        .copied()
        .filter(|t| *t >= first + Duration::from_millis(300))
        .collect();
    let span = steady
        .last()
        .unwrap()
        .duration_since(steady[0])
        .unwrap()
        .as_secs_f64();
    (steady.len() - 1) as f64 * SHAPED_SIZE as f64 * 8.0 / span / 1e6
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn reordering_every_10th_udp_is_exact() {
    let _serial = timing_lock();
    let b = bed(LinkConfig::new().reorder(Reorder {
        every_nth: 10,
        extra: Duration::from_millis(20),
        dir: Dir::H1ToH2,
        proto: Proto::Udp,
    }));
    // 101 datagrams: the 100th (held) still has a successor that overtakes it.
    let rx = udp_exchange(&b, Side::H1, Side::H2, 101, Duration::from_millis(1), 100);
    let mut max_seen = None;
    let mut late = Vec::new();
    for r in &rx {
        match max_seen {
            Some(m) if r.seq < m => late.push(r.seq),
            _ => max_seen = Some(r.seq),
        }
    }
    let st = b.delay_stats().unwrap();
    eprintln!(
        "reorder: {} received, arrived late: {late:?}; held {} of {} UDP",
        rx.len(),
        st.h1_to_h2.held_for_reorder,
        st.h1_to_h2.reorder_matched
    );
    assert_eq!(rx.len(), 101);
    assert_eq!(late, (0..10).map(|k| k * 10 + 9).collect::<Vec<u32>>());
    assert_eq!(st.h1_to_h2.held_for_reorder, 10);
    assert_eq!(b.delay_line_losses().unwrap(), 0);
    assert_eq!(
        st.h2_to_h1.packets_in, 0,
        "no delay line in the other direction"
    );
}

/// `reorder_port`: of two UDP flows in the same direction, only the one from or to the
/// port is held back; judged from the line's own record of each datagram.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn reordering_by_port_holds_that_port_only() {
    let _serial = timing_lock();
    let extra = Duration::from_millis(20);
    let b = bed(LinkConfig::new()
        .reorder(Reorder {
            every_nth: 1,
            extra,
            dir: Dir::H1ToH2,
            proto: Proto::Udp,
        })
        .reorder_port(PORT));
    let tx = b
        .udp_socket(Side::H1, "0.0.0.0:0".parse().unwrap())
        .unwrap();
    let to = |port| SocketAddr::new(IpAddr::V4(b.h2_addr()), port);
    // 20 datagrams to each port, alternating (nobody needs to receive them: the line
    // logs what it passed).
    for i in 0..40u16 {
        tx.send_to(&[0u8; 64], to(PORT + i % 2)).expect("send_to");
        std::thread::sleep(Duration::from_millis(1));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let records = loop {
        let st = b.delay_stats().unwrap();
        let ours: Vec<_> = st
            .h1_to_h2
            .records
            .iter()
            .filter(|r| r.proto == IPPROTO_UDP && (r.dst_port == PORT || r.dst_port == PORT + 1))
            .cloned()
            .collect();
        if ours.len() == 40 && ours.iter().all(|r| r.written.is_some()) {
            break ours;
        }
        assert!(
            Instant::now() < deadline,
            "the line passed {} of 40",
            ours.len()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    for r in &records {
        if r.dst_port == PORT {
            assert!(r.held && r.scheduled >= extra, "{r:?}");
        } else {
            assert!(!r.held && r.scheduled < extra, "{r:?}");
        }
    }
    let st = b.delay_stats().unwrap();
    assert_eq!(st.h1_to_h2.held_for_reorder, 20);
    assert_eq!(st.h1_to_h2.reorder_matched, 20);
    assert_eq!(b.delay_line_losses().unwrap(), 0);
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn delay_variation_gives_expected_rfc3550_jitter() {
    let _serial = timing_lock();
    // The truth is what the line held each packet for (`actual`), not what it
    // planned: on a busy host the line itself wakes late (6 ms was seen in CI-like
    // load), which the receiver rightly sees as jitter. What the line cannot record
    // (the sender's stack, the line's read) can still disturb one run on a loaded
    // host, so the agreement may take up to three runs on fresh beds; a systematic
    // error fails all three.
    let mut tries = Vec::new();
    for _ in 0..3 {
        let (measured, expected) = jitter_through_a_varying_line();
        tries.push((measured, expected));
        if (measured - expected).abs() < 0.5 {
            return;
        }
    }
    panic!("measured vs expected jitter (ms) never within 0.5 ms: {tries:?}");
}

/// One run of the jitter self-test on a fresh bed: the RFC 3550 jitter the receiver
/// measured and the one the line's actual holds give, in ms. The deterministic
/// parts (the planned delays, no loss, order kept) are asserted on every run.
fn jitter_through_a_varying_line() -> (f64, f64) {
    let cycle: Vec<Duration> = [0u64, 3, 1, 5, 2]
        .iter()
        .map(|&m| Duration::from_millis(m))
        .collect();
    let b = bed(LinkConfig::new()
        .delay_dir(Dir::H1ToH2, Duration::from_millis(2))
        .variation(Variation::Cycle(cycle.clone()))
        .variation_dir(Dir::H1ToH2)
        .variation_proto(Proto::Udp));
    let rx = udp_exchange(&b, Side::H1, Side::H2, 60, Duration::from_millis(8), 200);
    assert_eq!(rx.len(), 60);
    let st = b.delay_stats().unwrap();
    let injected = st.h1_to_h2.scheduled_delays(IPPROTO_UDP);
    assert_eq!(injected.len(), 60);
    // Exactly base + cycle[i], unless the preserve-order clamp had to push a packet
    // behind its predecessor (only if the datagrams reached the router closer than
    // the delay difference, i.e. the sender was descheduled); the log has the truth.
    let mut clamped = 0;
    for (i, d) in injected.iter().enumerate() {
        let planned = Duration::from_millis(2) + cycle[i % cycle.len()];
        assert!(*d >= planned, "packet {i}: {d:?} < {planned:?}");
        clamped += usize::from(*d != planned);
    }
    assert_eq!(b.delay_line_losses().unwrap(), 0);
    assert!(clamped <= 3, "{clamped} of 60 delays clamped: {injected:?}");
    let held: Vec<Duration> = st
        .h1_to_h2
        .records
        .iter()
        .filter(|r| r.proto == IPPROTO_UDP)
        .map(|r| {
            r.actual
                .expect("every datagram arrived, so the line wrote each")
        })
        .collect();
    let transits: Vec<Duration> = rx.iter().map(|r| r.transit).collect();
    let worst = transits
        .iter()
        .zip(&held)
        .map(|(t, d)| t.saturating_sub(*d))
        .max()
        .unwrap();
    let (measured, expected) = (rfc3550_jitter(&transits), rfc3550_jitter(&held));
    eprintln!(
        "jitter: measured {:.3} ms, from the line's actual holds {:.3} ms, from its planned ones {:.3} ms; worst transit beyond the hold {:.3} ms; {clamped} clamped",
        ms(measured),
        ms(expected),
        ms(rfc3550_jitter(&injected)),
        ms(worst),
    );
    assert!(
        rx.windows(2)
            .all(|w| w[0].seq < w[1].seq && w[0].at <= w[1].at),
        "order preserved"
    );
    (ms(measured), ms(expected))
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn stale_beds_of_dead_processes_are_swept() {
    Netbed::require();
    let pid_max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // A pid above pid_max can never be alive: this bed's owner is certainly dead.
    let stale = format!("nmb{}x0h1", pid_max + 1);
    let ok = std::process::Command::new("ip")
        .args(["netns", "add", &stale])
        .status()
        .unwrap();
    assert!(ok.success());
    sweep_stale_beds();
    let gone = !Path::new(&format!("/run/netns/{stale}")).exists();
    if !gone {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &stale])
            .status();
    }
    assert!(gone, "{stale} was not swept");
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn namespaces_removed_after_drop_and_after_panic() {
    let b = bed(LinkConfig::new().delay_ms(1.0));
    let names: Vec<String> = [b.h1_ns(), b.r_ns(), b.h2_ns()].map(String::from).to_vec();
    // A process left running in the bed is killed on drop.
    let mut child = b.cmd(Side::H2, "sleep").arg("30").spawn().unwrap();
    // In the namespace once `ip netns exec` has become `sleep` (10 s bounds a failure).
    let comm = format!("/proc/{}/comm", child.id());
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&comm).map_or(true, |c| c.trim() != "sleep") {
        assert!(
            Instant::now() < deadline,
            "the process never entered the bed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(b.delay_line_running());
    drop(b);
    for ns in &names {
        assert!(
            !Path::new(&format!("/run/netns/{ns}")).exists(),
            "{ns} left behind"
        );
    }
    // Bounded poll (10 s bounds a failure); we only kill it ourselves (and fail) if the
    // bed did not.
    let exited = (0..1000).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        child.try_wait().unwrap().is_some()
    });
    if !exited {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(exited, "process left in the bed was not killed on drop");

    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen2 = seen.clone();
    let r = std::panic::catch_unwind(move || {
        let b = bed(LinkConfig::new().delay_ms(1.0).drop_every_nth(3));
        seen2
            .lock()
            .unwrap()
            .extend([b.h1_ns(), b.r_ns(), b.h2_ns()].map(String::from));
        // A panic inside a namespace thread propagates, and unwinding drops the bed.
        let _ = b.in_ns(Side::H1, || panic!("intentional panic inside the bed"));
    });
    assert!(r.is_err());
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    for ns in seen.iter() {
        assert!(
            !Path::new(&format!("/run/netns/{ns}")).exists(),
            "{ns} left behind after panic"
        );
    }
}

/// Not a check: measures how fast the delay line can carry traffic: 1400-byte UDP for
/// 1 s, unpaced (sender as fast as it can) or paced, with and without the line.
/// Run with `--ignored --nocapture`.
#[test]
#[ignore]
fn measure_delay_line_capacity() {
    let _serial = timing_lock();
    // (delay line on, one-way delay ms, offered Mbit/s; 0 = unpaced)
    let cases = [
        (false, 0.0, 0.0),
        (true, 0.0, 0.0),
        (true, 10.0, 500.0),
        (true, 10.0, 1000.0),
        (true, 10.0, 1500.0),
    ];
    for (force, delay_ms, offered) in cases {
        let b = bed(LinkConfig::new().force_delay_line(force).delay_ms(delay_ms));
        let dst = SocketAddr::new(IpAddr::V4(b.h2_addr()), PORT);
        let rx = b.udp_socket(Side::H2, dst).unwrap();
        force_socket_buffers(&rx, 32 << 20).unwrap();
        let tx = b
            .udp_socket(Side::H1, "0.0.0.0:0".parse().unwrap())
            .unwrap();
        let pps = offered * 1e6 / (1400.0 * 8.0);
        let (sent, got, span) = std::thread::scope(|s| {
            let h = s.spawn(|| {
                rx.set_read_timeout(Some(Duration::from_millis(50)))
                    .unwrap();
                let mut buf = [0u8; 2048];
                let (mut n, mut first, mut last) = (0u64, None, Instant::now());
                let start = Instant::now();
                while start.elapsed() < Duration::from_secs(4)
                    && last.elapsed() < Duration::from_millis(300)
                {
                    if rx.recv(&mut buf).is_ok() {
                        last = Instant::now();
                        first.get_or_insert(last);
                        n += 1;
                    }
                }
                (n, last.duration_since(first.unwrap_or(last)))
            });
            let buf = [0u8; 1400];
            let start = Instant::now();
            let mut sent = 0u64;
            while start.elapsed() < Duration::from_secs(1) {
                let due = if offered > 0.0 {
                    (start.elapsed().as_secs_f64() * pps) as u64
                } else {
                    sent + 1
                };
                while sent < due {
                    if tx.send_to(&buf, dst).is_ok() {
                        sent += 1;
                    }
                }
                if offered > 0.0 {
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
            let (got, span) = h.join().unwrap();
            (sent, got, span)
        });
        let mbit = got as f64 * 1400.0 * 8.0 / span.as_secs_f64() / 1e6;
        let st = b.delay_stats();
        eprintln!(
            "line {} delay {delay_ms} ms offered {offered} Mbit/s: sent {sent}, received {got} ({:.2} %), {mbit:.0} Mbit/s, {:.0} kpps; line in/out/overflow/lateness: {:?}",
            if force { "ON " } else { "OFF" },
            got as f64 * 100.0 / sent as f64,
            got as f64 / span.as_secs_f64() / 1e3,
            st.map(|s| (
                s.h1_to_h2.packets_in,
                s.h1_to_h2.packets_out,
                s.h1_to_h2.overflow_drops,
                s.h1_to_h2.mean_lateness()
            ))
        );
    }
}
