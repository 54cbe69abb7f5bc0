//! Accuracy of netmeter's figures against links whose behaviour is known exactly.
//!
//! Every test here compares a number netmeter reports (`-J`, iperf3 schema) with the
//! same quantity computed independently from the emulated link (`tests/integration/support/netbed.rs`:
//! the router's tbf shaper, its nftables counters, the delay line's per-packet log), or
//! from the requested rate on loopback. The tolerances are derived in the comments; each
//! assertion fails if netmeter's figure is wrong by more than the measurement's own
//! granularity.
//!
//! The bed's veths have segmentation/receive offloads turned off (see
//! `Netbed::disable_offloads`), so netmeter's UDP GSO / TCP TSO sends are cut into
//! single datagrams before the first veth, as on a real wire; the UDP tests check that
//! (nftables sees exactly one packet per datagram) instead of assuming it.
//!
//! Full tier (needs root: network namespaces, tc, nftables, TUN, ethtool, real-time
//! priority); run with `cargo test --features full-tests --test integration accuracy::`.
//! All tests hold `timing_lock()`, so they run one at a time (about 40 s in all).

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::netbed::{
    Dir, IPPROTO_UDP, LinkConfig, Netbed, PortCounter, Proto, Reorder, Side, Variation, bed,
    rfc3550_jitter, tcp_listening, timing_lock, udp_goodput_fraction, udp_rcvbuf_errors,
};
use crate::support::{Proc, cpu_hogs, f64_at, free_port, netmeter, u64_at, wait_until};
use serde_json::Value;

/// Bound for one netmeter run (tests last at most 5 s plus the end-of-test exchange).
const RUN_TIMEOUT: Duration = Duration::from_secs(30);
/// Ethernet header as the bed's tbf counts it (no preamble, FCS or inter-frame gap).
const ETH: usize = 14;

fn parse(what: &str, stdout: &[u8]) -> Value {
    serde_json::from_slice(stdout).unwrap_or_else(|e| {
        panic!(
            "{what}: output is not JSON ({e}): {}",
            String::from_utf8_lossy(stdout)
        )
    })
}

/// How netmeter runs: at normal priority, or as a real-time (SCHED_FIFO) process.
#[derive(Clone, Copy, PartialEq)]
enum Prio {
    Normal,
    /// For timing measurements (pacing, jitter): other jobs on this 2-vCPU machine
    /// (builds, other test binaries) otherwise starve netmeter's data threads for tens
    /// to hundreds of ms now and then, which netmeter then correctly reports as a slow
    /// interval. Priority 5 stays below the bed's delay line (10). Used only for
    /// low-CPU runs; RT throttling (95 %) bounds it anyway.
    Realtime,
}

/// Program and leading arguments that run netmeter with `prio`.
fn netmeter_cmd(prio: Prio) -> (&'static str, Vec<&'static str>) {
    static RT_OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let rt_ok = *RT_OK.get_or_init(|| {
        let ok = Command::new("chrt")
            .args(["-f", "5", "true"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("note: `chrt -f` unavailable, timing tests run at normal priority");
        }
        ok
    });
    if prio == Prio::Realtime && rt_ok {
        ("chrt", vec!["-f", "5", netmeter()])
    } else {
        (netmeter(), vec![])
    }
}

/// One netmeter test through the bed: server (`-s -1 -J`) in h2, client in h1 with
/// `args` (plus `-c H2 -J`). Returns (client JSON, server JSON).
fn run_bed(bed: &Netbed, prio: Prio, args: &[&str]) -> (Value, Value) {
    let h2 = bed.h2_addr().to_string();
    run_bed_to(bed, prio, Side::H2, &h2, args)
}

/// [`run_bed`] with the server in `server_side` and the client (in h1) connecting to
/// `host`.
fn run_bed_to(
    bed: &Netbed,
    prio: Prio,
    server_side: Side,
    host: &str,
    args: &[&str],
) -> (Value, Value) {
    let (prog, mut srv_args) = netmeter_cmd(prio);
    let mut cli_args = srv_args.clone();
    srv_args.extend(["-s", "-1", "-J"]);
    let mut server = bed
        .spawn_in(server_side, prog, &srv_args)
        .expect("starting server");
    wait_until("the server to listen", || {
        bed.in_ns(server_side, || tcp_listening(5201)).unwrap()
    });
    cli_args.extend(["-c", host, "-J"]);
    cli_args.extend_from_slice(args);
    let client = bed
        .run_in(Side::H1, prog, &cli_args, RUN_TIMEOUT)
        .unwrap_or_else(|e| panic!("client {cli_args:?}: {e:#}"));
    let _ = server.wait_timeout(Duration::from_secs(10));
    let out = server
        .finish(Duration::from_secs(1))
        .expect("server output");
    (
        parse("client", client.as_bytes()),
        parse("server", &out.stdout),
    )
}

/// One netmeter test on loopback: server and client on 127.0.0.1, a private port.
fn run_loopback(prio: Prio, args: &[&str]) -> (Value, Value) {
    let port = free_port().to_string();
    let (prog, pre) = netmeter_cmd(prio);
    let server = Proc::spawn(
        "server",
        Command::new(prog)
            .args(&pre)
            .args(["-s", "-1", "-J", "-B", "127.0.0.1", "-p", &port]),
    );
    // This thread is in the root namespace, so /proc/thread-self/net is loopback's.
    wait_until("the loopback server to listen", || {
        tcp_listening(port.parse().unwrap())
    });
    let mut full = vec!["-c", "127.0.0.1", "-p", port.as_str(), "-J"];
    full.extend_from_slice(args);
    let client =
        Proc::spawn("client", Command::new(prog).args(&pre).args(&full)).wait_bounded(RUN_TIMEOUT);
    assert!(
        client.status.success(),
        "client {full:?} failed: {}",
        String::from_utf8_lossy(&client.stderr)
    );
    let server = server.wait_bounded(Duration::from_secs(11));
    (
        parse("client", &client.stdout),
        parse("server", &server.stdout),
    )
}

fn rel_err(got: f64, want: f64) -> f64 {
    (got - want) / want
}

/// Why a run cannot serve as a rate measurement, if it cannot: an interval (other than
/// the last, which may be cut short) that lasted more than 5 % longer or shorter than
/// the nominal 1 s means the reporting thread itself was not scheduled for tens of ms;
/// on this small VM that is a host-wide stall (other jobs, steal time), and the data
/// threads were stalled with it. Pacing forfeits credit beyond 100 ms of stall, and a
/// shaped link idles, so the figures then describe the host, not netmeter.
fn host_stall(what: &str, v: &Value) -> Option<String> {
    let ivs = v["intervals"].as_array()?;
    ivs.iter()
        .take(ivs.len().saturating_sub(1))
        .map(|iv| f64_at(iv, "/sum/seconds"))
        .find(|s| (s - 1.0).abs() > 0.05)
        .map(|s| format!("{what}: an interval lasted {s:.3} s"))
}

/// Runs `run` until it yields a run without a host stall, at most twice: a single
/// stall is the machine's, but netmeter's own control loop stalling every time still
/// fails the test.
fn without_stall(mut run: impl FnMut() -> (Value, Value)) -> (Value, Value) {
    for attempt in 1..=2 {
        let (c, s) = run();
        match host_stall("client", &c).or_else(|| host_stall("server", &s)) {
            None => return (c, s),
            Some(why) if attempt < 2 => eprintln!("host stall, measuring again: {why}"),
            Some(why) => panic!("host stalled in two runs in a row: {why}"),
        }
    }
    unreachable!()
}

// ---------------------------------------------------------------------------------
// 0. The bed is a wire: no offload super-packets on it
// ---------------------------------------------------------------------------------

/// One UDP GSO send (UDP_SEGMENT, as netmeter's sender uses) of 40 segments from h1
/// must cross the router as 40 packets, each counted by nftables and delivered as its
/// own datagram; otherwise every per-packet figure of the bed (every-Nth loss, the
/// delay line's log, tbf's bursts) would be off by the GSO factor.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn bed_carries_gso_sends_as_single_datagrams() {
    const SEG: usize = 1000;
    const SEGS: usize = 40;
    let b = bed(LinkConfig::new().force_delay_line(true));
    let rx = b
        .udp_socket(Side::H2, (b.h2_addr(), 40_001).into())
        .unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let tx = b.udp_socket(Side::H1, (b.h1_addr(), 0).into()).unwrap();
    let seg: libc::c_int = SEG as libc::c_int;
    // SAFETY: passes a pointer to a live c_int and its exact size.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&tx),
            libc::SOL_UDP,
            103, // UDP_SEGMENT
            (&seg as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "UDP_SEGMENT: {}", std::io::Error::last_os_error());
    let sent = tx
        .send_to(&[7u8; SEG * SEGS], (b.h2_addr(), 40_001))
        .unwrap();
    assert_eq!(sent, SEG * SEGS);
    let mut buf = [0u8; 65_536];
    let mut sizes = Vec::new();
    while sizes.len() < SEGS {
        match rx.recv(&mut buf) {
            Ok(n) => sizes.push(n),
            Err(e) => panic!("after {} datagrams: {e}", sizes.len()),
        }
    }
    let c = b.counters().unwrap();
    let st = b.delay_stats().unwrap();
    let line_udp = st
        .h1_to_h2
        .records
        .iter()
        .filter(|r| r.proto == IPPROTO_UDP)
        .count();
    eprintln!("GSO send of {SEGS} x {SEG}: {c:?}, delay line saw {line_udp} UDP packets");
    assert!(sizes.iter().all(|&n| n == SEG), "{sizes:?}");
    assert_eq!(c.udp_12, SEGS as u64);
    assert_eq!(line_udp, SEGS);
}

// ---------------------------------------------------------------------------------
// 1. Goodput across a 100 Mbit/s shaped link
// ---------------------------------------------------------------------------------

/// 100 Mbit/s h1→h2. The queue (100 ms) keeps the link busy through sender stalls of
/// up to 100 ms, and the 20 ms bucket lets tbf make up for being serviced late (it
/// runs in softirq context, which a busy 2-vCPU machine defers): with the defaults
/// (25 ms, 2 ms) the link itself delivered up to 4 % less than its rate while other
/// jobs ran. The bucket can add at most 20 ms of traffic to the 4 s measured (0.5 %),
/// and only if the omit period ended right after such a delay.
fn shaped_100m() -> LinkConfig {
    LinkConfig::new()
        .rate_mbit(100.0)
        .rate_dir(Dir::H1ToH2)
        .queue_ms(100.0)
        .burst_ms(20.0)
}

/// The bed's tbf (on the router's egress towards h2) passes 100 Mbit/s counted over
/// Ethernet frames without preamble/FCS: 14 + IP length bytes per packet. A 1400-byte
/// UDP payload travels in 1400 + 8 (UDP) + 20 (IPv4) + 14 = 1442 bytes, so an overdriven
/// link (-b 200M) delivers 100 * 1400/1442 = 97.087 Mbit/s of payload; that is what
/// netmeter's receiver must report, within 2 %.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn udp_goodput_matches_shaped_link() {
    let _t = timing_lock();
    let b = bed(shaped_100m());
    let (c, s) = without_stall(|| {
        run_bed(
            &b,
            Prio::Normal,
            &["-u", "-b", "200M", "-l", "1400", "-t", "4", "-O", "1"],
        )
    });
    let frac = udp_goodput_fraction(1400, false);
    assert!((frac - 1400.0 / 1442.0).abs() < 1e-12);
    let want = 100e6 * frac;
    let sum_rx = f64_at(&c, "/end/sum_received/bits_per_second");
    let stream_rx = f64_at(&c, "/end/streams/0/udp/netmeter/receiver_bits_per_second");
    let server_rx = f64_at(&s, "/end/sum_received/bits_per_second");
    let sent = f64_at(&c, "/end/sum_sent/bits_per_second");
    let shaper = b.shaper_stats(Dir::H1ToH2).unwrap().unwrap();
    let rcvbuf_errors = udp_rcvbuf_errors(&b, Side::H2);
    eprintln!(
        "UDP goodput: expected {:.3} Mbit/s; client sum_received {:.3} ({:+.2} %), \
         stream receiver {:.3} ({:+.2} %), server sum_received {:.3} ({:+.2} %); \
         sent {:.1} Mbit/s; receiver socket overflows {rcvbuf_errors}; shaper {shaper:?}",
        want / 1e6,
        sum_rx / 1e6,
        rel_err(sum_rx, want) * 100.0,
        stream_rx / 1e6,
        rel_err(stream_rx, want) * 100.0,
        server_rx / 1e6,
        rel_err(server_rx, want) * 100.0,
        sent / 1e6
    );
    // sum_received is the receiver's bytes over the receiver's own time (until its
    // last datagram, after the end-of-test drain), like iperf3's receiver_time: over
    // the sender's time instead, the ~27 ms of tbf queue still draining when the sender
    // stopped would add ~0.7 % (27 ms / 4 s) to it.
    let rx_bytes = u64_at(&c, "/end/streams/0/udp/netmeter/receiver_bytes") as f64;
    let rx_secs = f64_at(&c, "/end/streams/0/udp/netmeter/receiver_seconds");
    assert!(rx_secs > f64_at(&c, "/end/sum_sent/seconds"));
    assert_eq!(f64_at(&c, "/end/sum_received/seconds"), rx_secs);
    assert!(rel_err(sum_rx, rx_bytes * 8.0 / rx_secs).abs() < 1e-9);
    // The link really was the bottleneck (the shaper dropped the excess).
    assert!(sent > 150e6, "sender did not overdrive the link: {sent}");
    assert!(shaper.drops > 0, "{shaper:?}");
    for (what, got) in [
        ("client end.sum_received", sum_rx),
        (
            "client end.streams[0].udp.netmeter.receiver_bits_per_second",
            stream_rx,
        ),
        ("server end.sum_received", server_rx),
    ] {
        assert!(
            rel_err(got, want).abs() < 0.02,
            "{what}: {:.3} Mbit/s, expected {:.3} Mbit/s ± 2 %",
            got / 1e6,
            want / 1e6
        );
    }
}

/// `--find-max-rate -t 1 -J` from h1 against a netmeter server in h2 (serving every
/// trial), returning the search document.
fn find_max_rate_on_bed(bed: &Netbed, args: &[&str]) -> Value {
    let server = bed
        .spawn_in(Side::H2, netmeter(), &["-s"])
        .expect("starting server");
    wait_until("the server to listen", || {
        bed.in_ns(Side::H2, || tcp_listening(5201)).unwrap()
    });
    let h2 = bed.h2_addr().to_string();
    let mut cli = vec!["-c", h2.as_str(), "--find-max-rate", "-J"];
    cli.extend_from_slice(args);
    let out = bed.run_in(Side::H1, netmeter(), &cli, Duration::from_secs(90));
    server.terminate();
    let out = out.unwrap_or_else(|e| panic!("client {cli:?}: {e:#}"));
    parse("find-max-rate", out.as_bytes())["find_max_rate"].clone()
}

/// Issue 9: on a 100 Mbit/s link whose tbf queue holds 400 ms, a 1 s trial a few %
/// above capacity loses nothing (the excess waits in the queue), so a search that
/// judged trials by loss alone answered above what the link carries (99.2 Mbit/s
/// against a 97.2 Mbit/s payload ceiling). The answer must not exceed the ceiling,
/// 100 * 1460/1502 = 97.20 Mbit/s of 1460-byte datagrams (tbf counts 14 + 20 + 8 +
/// 1460 bytes each), and lie close below it (the search stops when its bracket is
/// 1 % wide; see the lower bound below for why "close" is 10 %). Trials of the default
/// length, 2 s: the growth figure is the standing queue at 1.5 s (its late span is the
/// last quarter), the rule allows 0.1 % of that (1.5 ms), and the 2 ms token bucket
/// hides another 2 ms of excess, so overloads below (1.5 + 2) / 1500 = 0.23 % pass;
/// the search's step next to the ceiling is 97.50 (0.31 % over). Trials that failed
/// must say why.
///
/// The bed's link is the host's softirq work: when this 2-CPU VM pauses (steal time,
/// seen as a paced sender 20-50 ms behind its schedule), the link loses that time for
/// good and even a trial 7 % below the ceiling can end with a standing queue (seen in
/// CI: 90 Mbit/s "queue grew 7.8 ms", 90.47 "queue grew 116 ms" with the sender 46 ms
/// behind). The search measures such a trial again when the sender's own lag explains
/// its queue; when a trial below 95 % of the ceiling still failed, the bed did not
/// carry its rate and the whole search runs once more, like `without_stall`.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn find_max_rate_deep_buffer_stays_within_the_link() {
    let _t = timing_lock();
    let b = bed(LinkConfig::new()
        .rate_mbit(100.0)
        .rate_dir(Dir::H1ToH2)
        .queue_ms(400.0)
        .burst_ms(2.0));
    let ceiling = 100e6 * udp_goodput_fraction(1460, false);
    let offered = |s: &Value| f64_at(s, "/offered_bits_per_second_per_stream");
    let mut doc = Value::Null;
    for attempt in 1..=2 {
        doc = find_max_rate_on_bed(&b, &["-t", "2", "-l", "1460", "-b", "60M"]);
        let steps = doc["steps"].as_array().expect("steps");
        let repeated = doc["repeated_steps"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (what, s) in steps
            .iter()
            .map(|s| ("", s))
            .chain(repeated.iter().map(|s| ("measured again: ", s)))
        {
            eprintln!(
                "{what}offered {:.2} sent {:.2} Mbit/s: {} (growth {:?} ms, sender lag {:?} ms, received short {} %, loss {:.3} %)",
                offered(s) / 1e6,
                f64_at(s, "/sent_bits_per_second") / 1e6,
                s["verdict"],
                s["owd_growth_ms"].as_f64(),
                s["sender_lag_ms"].as_f64(),
                s["received_short_percent"],
                f64_at(s, "/lost_percent")
            );
        }
        let disturbed = steps
            .iter()
            .find(|s| offered(s) < 0.95 * ceiling && s["pass"] == false);
        match disturbed {
            Some(s) if attempt < 2 => eprintln!(
                "the bed did not carry {:.2} Mbit/s ({}): searching again",
                offered(s) / 1e6,
                s["verdict"]
            ),
            _ => break,
        }
    }
    let steps = doc["steps"].as_array().expect("steps");
    // Every trial of a netmeter sender says how far it fell behind its schedule.
    assert!(steps.iter().all(|s| s["sender_lag_ms"].as_f64().is_some()));
    let best = f64_at(&doc, "/result/offered_bits_per_second_per_stream");
    // A sender the host stalled for S ms lets the link drain S ms of its queue, so the
    // trial's late minimum of one-way delay, and with it the growth, can read up to S
    // low: a trial just over the ceiling (97.50 is 0.31 % over, 4.6 ms of queue by the
    // late span of a 2 s trial) then passes. What the answer may exceed the ceiling by
    // is what the passing trial's own recorded lag could hide, over the three quarters
    // of the trial before its late span.
    let hidden_ms = steps
        .iter()
        .chain(doc["repeated_steps"].as_array().into_iter().flatten())
        .filter(|s| offered(s) == best && s["pass"] == true)
        .filter_map(|s| s["sender_lag_ms"].as_f64())
        .fold(0.0, f64::max)
        + netmeter::search::owd_growth_limit_ms(2.0);
    let allowed = ceiling * (1.0 + hidden_ms / (0.75 * 2.0 * 1e3));
    assert!(
        best <= allowed && best >= 0.90 * ceiling,
        "answer {:.2} Mbit/s, payload ceiling {:.2} Mbit/s ({:.2} with what a {hidden_ms:.1} ms stall could hide)",
        best / 1e6,
        ceiling / 1e6,
        allowed / 1e6
    );
    assert!(steps.len() <= 10, "{} steps", steps.len());
    // Above the ceiling nothing was lost, yet the trial failed for the queue.
    // (With 2 s trials the 120 Mbit/s step fills the 400 ms queue and loses datagrams;
    // the steps between the ceiling and it lose none.)
    let over = steps
        .iter()
        .find(|s| offered(s) > ceiling * 1.01 && f64_at(s, "/lost_percent") == 0.0)
        .expect("a lossless trial above the ceiling");
    assert_eq!(over["pass"], false);
    assert!(
        over["verdict"].as_str().unwrap().starts_with("queue grew"),
        "{over}"
    );
    assert!(over["owd_growth_ms"].as_f64().unwrap() > 5.0, "{over}");
}

/// TCP over the same link: Linux uses timestamps, so a full segment carries
/// MSS 1460 - 12 = 1448 payload bytes in 1448 + 12 (options) + 20 (TCP) + 20 (IPv4) +
/// 14 = 1514 shaper bytes: 100 * 1448/1514 = 95.641 Mbit/s of goodput. ACKs flow
/// h2→h1, which is not shaped. -O 1 leaves slow start out of the figures; the tbf queue
/// (100 ms) is far deeper than the path's BDP, so cubic keeps the link busy. `-w 4M`
/// fixes both socket buffers at 4 MiB (the kernel doubles it): with autotuning the
/// receive window stays close to what is in flight (~1.25 MB queued), so whenever the
/// receiving thread was starved for some 20 ms by other jobs the window closed and the
/// link idled (intervals 3 % low, -1.9 % in all under load). Either way netmeter
/// reported what arrived; the larger window just keeps the link the bottleneck.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn tcp_goodput_matches_shaped_link() {
    let _t = timing_lock();
    let b = bed(shaped_100m());
    let (c, s) = without_stall(|| run_bed(&b, Prio::Normal, &["-t", "4", "-O", "1", "-w", "4M"]));
    let want = 100e6 * 1448.0 / (1448.0 + 12.0 + 20.0 + 20.0 + ETH as f64);
    let sum_rx = f64_at(&c, "/end/sum_received/bits_per_second");
    let server_rx = f64_at(&s, "/end/sum_received/bits_per_second");
    let shaper = b.shaper_stats(Dir::H1ToH2).unwrap().unwrap();
    let avg_pkt = shaper.sent_bytes as f64 / shaper.sent_packets.max(1) as f64;
    let rx_intervals: Vec<String> = s["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|iv| format!("{:.2}", f64_at(iv, "/sum/bits_per_second") / 1e6))
        .collect();
    eprintln!(
        "TCP goodput: expected {:.3} Mbit/s; client sum_received {:.3} ({:+.2} %), \
         server {:.3} ({:+.2} %); receiver intervals (Mbit/s, the first omitted) \
         {rx_intervals:?}; shaper average frame {avg_pkt:.1} B, {shaper:?}",
        want / 1e6,
        sum_rx / 1e6,
        rel_err(sum_rx, want) * 100.0,
        server_rx / 1e6,
        rel_err(server_rx, want) * 100.0,
    );
    // Full-sized segments: the shaper's mean frame is ~1514 bytes (a few short
    // control packets lower it slightly), i.e. the kernel sent single MSS-sized
    // segments (no TSO super-packets) and used timestamps as assumed above.
    assert!(
        (1490.0..=1514.0).contains(&avg_pkt),
        "shaper mean frame {avg_pkt:.1} B: segments are not 1514-byte frames"
    );
    for (what, got) in [
        ("client end.sum_received", sum_rx),
        ("server end.sum_received", server_rx),
    ] {
        assert!(
            rel_err(got, want).abs() < 0.02,
            "{what}: {:.3} Mbit/s, expected {:.3} Mbit/s ± 2 %",
            got / 1e6,
            want / 1e6
        );
    }
}

// ---------------------------------------------------------------------------------
// 2. Loss: every 50th datagram dropped
// ---------------------------------------------------------------------------------

/// `-u -b 20M -l 1200 -t 3`: 20e6 / 8 / 1200 = 2083 datagrams/s, ~6250 in all. The
/// router drops UDP packets 50, 100, ... of the direction; packet 1 is the 4-byte
/// connect datagram (forward) or the server's reply to it (reverse), so data datagram k
/// is packet k + 1 and datagrams 49, 99, ... are lost: floor((N + 1) / 50) of N, i.e.
/// 2.00 % (125 of 6250; the rounding moves it by < 0.02 %). netmeter's lost count must
/// equal the router's drop counter, except that a drop of the very last datagram
/// (N + 1 ≡ 0 mod 50) is invisible to any receiver (no later sequence number reveals
/// the gap), as in iperf3.
///
/// `contended`: with one busy process per CPU (`support::cpu_hogs`, started once this
/// test holds the timing lock, so no other accuracy test shares the contention).
fn check_every_50th(dir: Dir, reverse: bool, contended: bool) {
    let _t = timing_lock();
    let _hogs = contended.then(cpu_hogs);
    let b = bed(LinkConfig::new()
        .drop_every_nth(50)
        .loss_dir(dir)
        .loss_proto(Proto::Udp));
    let mut args = vec!["-u", "-b", "20M", "-l", "1200", "-t", "3"];
    if reverse {
        args.push("-R");
    }
    let (c, _s) = run_bed(&b, Prio::Normal, &args);
    let n = u64_at(&c, "/end/streams/0/udp/packets");
    let lost = u64_at(&c, "/end/sum/lost_packets");
    let pct = f64_at(&c, "/end/sum/lost_percent");
    let cnt = b.counters().unwrap();
    let (udp_in, seen, dropped) = if dir == Dir::H1ToH2 {
        (cnt.udp_12, cnt.seen_12, cnt.nth_12)
    } else {
        (cnt.udp_21, cnt.seen_21, cnt.nth_21)
    };
    eprintln!(
        "every 50th {dir:?}: sent {n}, netmeter lost {lost} ({pct:.3} %), router dropped \
         {dropped} of {seen} UDP packets; {cnt:?}"
    );
    // One router packet per datagram (plus the connect datagram / its reply): GSO
    // super-packets were segmented before the router, as on a wire.
    assert_eq!(
        udp_in,
        n + 1,
        "router saw {udp_in} UDP packets for {n} datagrams"
    );
    assert_eq!(seen, n + 1);
    assert_eq!(dropped, (n + 1) / 50);
    assert_eq!(cnt.dropped_dir(dir), dropped);
    let invisible = u64::from((n + 1).is_multiple_of(50));
    assert_eq!(
        lost,
        dropped - invisible,
        "netmeter lost {lost}, router dropped {dropped}"
    );
    assert_eq!(u64_at(&c, "/end/streams/0/udp/lost_packets"), lost);
    assert!((pct - 2.0).abs() <= 0.05, "lost_percent {pct}");
    assert!(n > 5000, "only {n} datagrams sent");
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn udp_loss_every_50th_forward() {
    check_every_50th(Dir::H1ToH2, false, false);
}

/// Reverse (-R): the server in h2 sends, the client in h1 receives and reports.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn udp_loss_every_50th_reverse() {
    check_every_50th(Dir::H2ToH1, true, false);
}

/// Issue 19: the loss count stays exact when the CPUs are contended (seen by hand: 351
/// and 392 lost where the link dropped 351 and 392), and the paced sender still sends
/// its ~6250 datagrams.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn udp_loss_every_50th_under_cpu_contention() {
    check_every_50th(Dir::H1ToH2, false, true);
}

/// TCP retransmits against the segments the link dropped. The router drops every
/// 200th TCP packet in the sending direction (`-b 100M` for 3 s: ~26,000 data segments,
/// ~130 drops) and counts each connection's packets before and after its loss rules,
/// so the data connection's drops are known exactly (the control connection's are
/// kept apart). Every dropped segment must be sent again, and the retransmissions that
/// were not needed are the ones the receiver D-SACKed (netmeter's
/// `spurious_retransmits`), so `retransmits - spurious_retransmits` must equal the
/// drops. Slack of 2 either way: a drop in the last round trip (or of the FIN) is
/// repaired after the sender's final TCP_INFO reading, and a needless retransmission
/// whose D-SACK is still on its way then counts as needed. One case goes above that: a
/// retransmission can itself fall on a 200th slot and be dropped; the timeout that
/// repairs it makes Linux resend the unacknowledged window, and segments of it that had
/// arrived are not always D-SACKed (seen: 148 retransmits, 1 spurious, 131 drops, and
/// the link carried 18 more segments than in the runs with 131 = 131, so the count was
/// true). So above the drops the bound is one window (the sender's largest cwnd).
fn check_tcp_retransmits(dir: Dir, reverse: bool) {
    let _t = timing_lock();
    let b = bed(LinkConfig::new()
        .drop_every_nth(200)
        .loss_dir(dir)
        .loss_proto(Proto::Tcp));
    // Packets from the sender towards the receiver, per client port.
    let (matching, key) = if reverse {
        ("tcp sport 5201", "tcp dport")
    } else {
        ("tcp dport 5201", "tcp sport")
    };
    let counter = |set, priority| PortCounter {
        set,
        priority,
        matching: matching.to_string(),
        key,
    };
    b.add_port_counters("retr", &[counter("before", -10), counter("after", 10)])
        .expect("adding the counters");
    let mut args = vec!["-b", "100M", "-t", "3"];
    if reverse {
        args.push("-R");
    }
    let (c, s) = run_bed(&b, Prio::Normal, &args);
    let before = b.port_counts("retr", "before").unwrap();
    let after = b.port_counts("retr", "after").unwrap();
    let (&port, &sent) = before
        .iter()
        .max_by_key(|&(_, n)| *n)
        .expect("no packets counted");
    let dropped = sent - after.get(&port).copied().unwrap_or(0);
    let sender = &c["end"]["streams"][0]["sender"];
    let retr = u64_at(sender, "/retransmits");
    let spurious = u64_at(sender, "/netmeter/spurious_retransmits");
    let needed = retr.saturating_sub(spurious);
    eprintln!(
        "TCP {dir:?}: data connection (port {port}) sent {sent} packets, the router \
         dropped {dropped}; netmeter: {retr} retransmits, {spurious} spurious; all ports \
         {before:?} -> {after:?}; bed {:?}",
        b.counters().unwrap()
    );
    assert!(
        dropped >= 100,
        "only {dropped} drops: the test sent too little"
    );
    // Never fewer than the drops: every lost segment was sent again and counted.
    assert!(
        needed + 2 >= dropped,
        "{retr} retransmits - {spurious} spurious = {needed}, but the link dropped \
         {dropped} of the data connection's segments"
    );
    // More only by what one retransmission timeout can resend needlessly: one window.
    let sender_side = if reverse { &s } else { &c };
    let max_cwnd = u64_at(&sender_side["end"]["streams"][0]["sender"], "/max_snd_cwnd");
    let window_segments = max_cwnd.div_ceil(1448);
    assert!(
        needed <= dropped + 2 + window_segments,
        "{retr} retransmits - {spurious} spurious = {needed}, but the link dropped \
         {dropped} of the data connection's segments (largest window {window_segments} \
         segments)"
    );
    assert_eq!(u64_at(&c, "/end/sum_sent/retransmits"), retr);
    assert_eq!(
        u64_at(&c, "/end/sum_sent/netmeter/spurious_retransmits"),
        spurious
    );
    // The intervals' figures add up to the end's (the sender's own intervals: the
    // client's for a forward test, the server's for -R).
    let sender_report = if reverse { &s } else { &c };
    let per_interval = |key: &str| -> u64 {
        sender_report["intervals"]
            .as_array()
            .expect("intervals")
            .iter()
            .map(|iv| {
                iv["streams"][0]
                    .pointer(key)
                    .and_then(Value::as_u64)
                    .unwrap_or(0)
            })
            .sum()
    };
    // Up to the end: a tail shorter than a tenth of an interval gets no row of its own
    // (iperf3's rule too), so what the kernel retransmitted in it (about 44/s here)
    // is in the end figure only. A clean CI run saw 130 in the rows against 131.
    let sender_end = &sender_report["end"]["streams"][0]["sender"];
    for (row_key, end_key) in [
        ("/retransmits", "/retransmits"),
        (
            "/netmeter/tcp/spurious_retransmits",
            "/netmeter/spurious_retransmits",
        ),
    ] {
        let (rows, end) = (per_interval(row_key), u64_at(sender_end, end_key));
        assert!(
            rows <= end && end - rows <= 2,
            "{row_key}: the intervals add up to {rows}, the end says {end}"
        );
    }
}

/// Reordering without loss: the delay line holds every 50th TCP segment h1→h2 back by
/// 5 ms (at `-b 20M`, ~1,700 segments/s, ~9 later ones overtake it). TCP takes some
/// of those holes for losses and retransmits; nothing was lost, so every
/// retransmission was spurious and the receiver D-SACKs it: `spurious_retransmits`
/// must account for all of them (slack 2, as above).
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn tcp_spurious_retransmits_under_reordering() {
    let _t = timing_lock();
    let b = bed(LinkConfig::new().reorder(Reorder {
        every_nth: 50,
        extra: Duration::from_millis(5),
        dir: Dir::H1ToH2,
        proto: Proto::Tcp,
    }));
    let before = receiver_drops(&b);
    let (c, _s) = run_bed(&b, Prio::Normal, &["-b", "20M", "-t", "3"]);
    // Segments the receiving host itself dropped (out-of-order queue or receive queue
    // pruned under memory pressure on a busy host): real losses the delay line never
    // saw, whose retransmissions are not spurious.
    let dropped = receiver_drops(&b).saturating_sub(before);
    let st = b.delay_stats().unwrap();
    let sender = &c["end"]["streams"][0]["sender"];
    let retr = u64_at(sender, "/retransmits");
    let spurious = u64_at(sender, "/netmeter/spurious_retransmits");
    eprintln!(
        "TCP reordering: line held {} segments, losses {}, receiver drops {dropped}; \
         netmeter {retr} retransmits, {spurious} spurious",
        st.h1_to_h2.held_for_reorder,
        b.delay_line_losses().unwrap()
    );
    assert_eq!(b.delay_line_losses().unwrap(), 0);
    assert!(st.h1_to_h2.held_for_reorder >= 50);
    assert!(
        retr > 0,
        "no retransmits: the reordering did not exercise the count"
    );
    assert!(
        spurious <= retr && retr - spurious <= 2 + dropped,
        "{retr} retransmits on a link that lost nothing, {spurious} of them spurious \
         ({dropped} segments dropped by the receiving host)"
    );
}

/// The TCP segments h2's kernel dropped on receipt so far (`/proc/net/netstat`'s
/// TcpExt: out-of-order queue, receive queue, backlog and zero-window drops).
fn receiver_drops(b: &Netbed) -> u64 {
    let out = Command::new("ip")
        .args(["netns", "exec", b.ns(Side::H2), "cat", "/proc/net/netstat"])
        .output()
        .expect("ip netns exec cat /proc/net/netstat");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
        panic!("no TcpExt lines in h2's /proc/net/netstat:\n{text}");
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .filter(|(n, _)| {
            matches!(
                *n,
                "OfoPruned" | "TCPOFODrop" | "TCPRcvQDrop" | "TCPBacklogDrop" | "TCPZeroWindowDrop"
            )
        })
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum()
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn tcp_retransmits_match_drops_forward() {
    check_tcp_retransmits(Dir::H1ToH2, false);
}

/// Reverse (-R): the server sends, and its counts reach the client in the results.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn tcp_retransmits_match_drops_reverse() {
    check_tcp_retransmits(Dir::H2ToH1, true);
}

// ---------------------------------------------------------------------------------
// 3. Reordering
// ---------------------------------------------------------------------------------

/// The delay line holds every 10th UDP packet h1→h2 back by 3 ms; at 2083 datagrams/s
/// (0.48 ms apart) the next ~6 overtake it, so it arrives after a higher sequence
/// number: one out-of-order datagram, and no loss (the gap it left is filled).
/// The expected count comes from the line's log (packets written after a later
/// arrival), not from arithmetic, so bursts or a held packet at the very end that no
/// one overtook are accounted for exactly.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn udp_reordering_counted_exactly() {
    let _t = timing_lock();
    let b = bed(LinkConfig::new().reorder(Reorder {
        every_nth: 10,
        extra: Duration::from_millis(3),
        dir: Dir::H1ToH2,
        proto: Proto::Udp,
    }));
    let (c, s) = run_bed(
        &b,
        Prio::Normal,
        &["-u", "-b", "20M", "-l", "1200", "-t", "3"],
    );
    let st = b.delay_stats().unwrap();
    let d = &st.h1_to_h2;
    let want = d.reordered(IPPROTO_UDP);
    let ooo = u64_at(&c, "/end/streams/0/udp/out_of_order");
    let srv_ooo = u64_at(&s, "/end/streams/0/udp/out_of_order");
    let lost = u64_at(&c, "/end/sum/lost_packets");
    let n = u64_at(&c, "/end/streams/0/udp/packets");
    let intervals = s["intervals"].as_array().unwrap();
    let iv_sum: u64 = intervals
        .iter()
        .map(|iv| {
            iv.pointer("/streams/0/netmeter/out_of_order")
                .and_then(Value::as_u64)
                .unwrap_or(0)
        })
        .sum();
    let logged_udp = d.records.iter().filter(|r| r.proto == IPPROTO_UDP).count();
    eprintln!(
        "reordering: sent {n}, held {}, reordered per line {want}; netmeter out_of_order \
         {ooo} (server {srv_ooo}, intervals {iv_sum}), lost {lost}; line in/out {}/{}, \
         logged UDP {logged_udp}, max lateness {:?}",
        d.held_for_reorder, d.packets_in, d.packets_out, d.max_lateness
    );
    assert_eq!(b.delay_line_losses().unwrap(), 0);
    assert_eq!(d.records_dropped, 0, "log too short");
    assert_eq!(
        logged_udp as u64,
        n + 1,
        "one UDP packet per datagram + connect"
    );
    // Sanity of the injected pattern: N/10 held, most of them overtaken (one is not if
    // the sender sent nothing within 3 ms after it: at the very end, or in a stall).
    assert_eq!(d.held_for_reorder, (n + 1) / 10);
    assert!(want * 10 >= d.held_for_reorder * 9, "{want}");
    assert_eq!(
        ooo, want,
        "netmeter out_of_order {ooo}, delay line reordered {want}"
    );
    assert_eq!(srv_ooo, want);
    assert_eq!(lost, 0);
    assert_eq!(u64_at(&c, "/end/sum/lost_packets"), 0);
    // Interval rows add up to the total, except for held packets released after the
    // server's last reported interval (a trailing stretch under 10 % of an interval is
    // not reported, as in iperf3). How long that stretch was is in the server's own
    // report (its end minus its last interval's end; on a busy host it can be tens of
    // ms): every 10th datagram sent in it, plus the last 3 ms of holding, is the bound.
    let last_end = intervals
        .last()
        .and_then(|iv| iv.pointer("/sum/end"))
        .and_then(Value::as_f64)
        .unwrap();
    let end = f64_at(&s, "/end/sum/end");
    let per_s = n as f64 / f64_at(&c, "/end/sum/seconds");
    let trailing = ((end - last_end).max(0.0) + 0.003) * per_s / 10.0;
    let bound = trailing.ceil() as u64 + 1;
    assert!(
        iv_sum <= ooo && ooo - iv_sum <= bound,
        "intervals' out_of_order sum {iv_sum} vs end {ooo} (bound {bound}: {:.3} s \
         after the last interval, {per_s:.0} datagrams/s)",
        end - last_end
    );
}

// ---------------------------------------------------------------------------------
// 4. Jitter
// ---------------------------------------------------------------------------------

/// Delay variation from a cycle of extra delays on h1→h2. netmeter must report the
/// RFC 3550 jitter (J += (|D| - J)/16, in delivery order) of the datagrams' transit
/// from their sender timestamps to the line's egress, within 15 %.
///
/// Why egress transit and not the hold times the line applied: the hold time starts
/// when the line's thread reads the datagram, and on this VM that read is sometimes
/// late by hundreds of µs (vCPU steal of 8-14 % was measured during these runs, and the
/// line then reads a few datagrams at once). The datagram waited in the TUN queue, so
/// its real transit, and netmeter's, grew; the hold time did not. Runs with such
/// stalls read 30-57 % above the hold-time jitter while matching the egress figure.
/// The egress transit (CLOCK_REALTIME at the line's write, minus the timestamp netmeter
/// put in the datagram) leaves out only the receive side after the line: a veth hop
/// and the kernel's receive stamp. Over 8 runs netmeter read -2.1 % to +9.3 % from it,
/// hence 15 %; a jitter without smoothing, in the wrong unit, over user-space receive
/// times of whole batches, or over hold times alone is further off.
///
/// `-u -b 5M -l 1000`: 625 datagrams/s, 1.6 ms apart; the cycle's steps (at most
/// 0.9 ms) are smaller than that, so without stalls the line never holds a packet back
/// to keep order and the applied delays are the cycle itself (printed for comparison).
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn udp_jitter_matches_injected_variation() {
    let _t = timing_lock();
    let us = Duration::from_micros;
    let cycle = vec![us(0), us(400), us(900), us(200), us(700), us(300)];
    let b = bed(LinkConfig::new()
        .variation(Variation::Cycle(cycle))
        .variation_dir(Dir::H1ToH2)
        .variation_proto(Proto::Udp));
    let (c, _s) = run_bed(
        &b,
        Prio::Realtime,
        &["-u", "-b", "5M", "-l", "1000", "-t", "3"],
    );
    assert_eq!(b.delay_line_losses().unwrap(), 0);
    let st = b.delay_stats().unwrap();
    let d = &st.h1_to_h2;
    // Data datagrams only (IPv4 length 1028; the 4-byte connect datagram is excluded),
    // in the order the line delivered them.
    let mut data: Vec<_> = d
        .records
        .iter()
        .filter(|r| r.proto == IPPROTO_UDP && r.len == 1028)
        .collect();
    data.sort_by_key(|r| r.written);
    let actual: Vec<Duration> = data.iter().map(|r| r.actual.unwrap()).collect();
    let scheduled: Vec<Duration> = data.iter().map(|r| r.scheduled).collect();
    // Without --trip-times the timestamp's second field is in microseconds.
    let egress: Vec<Duration> = data
        .iter()
        .map(|r| {
            let ns = r
                .transit_to_egress_ns(false)
                .expect("a data datagram's header");
            Duration::from_nanos(ns.max(0) as u64)
        })
        .collect();
    let want = rfc3550_jitter(&egress).as_secs_f64() * 1e3;
    let held = rfc3550_jitter(&actual).as_secs_f64() * 1e3;
    let want_sched = rfc3550_jitter(&scheduled).as_secs_f64() * 1e3;
    let got = f64_at(&c, "/end/streams/0/udp/jitter_ms");
    let n = u64_at(&c, "/end/streams/0/udp/packets");
    eprintln!(
        "jitter: netmeter {got:.4} ms; RFC 3550 over transit to the line's egress \
         {want:.4} ms ({:+.1} %); over hold times {held:.4} ms, over scheduled delays \
         {want_sched:.4} ms; {} datagrams logged of {n}; line lateness max {:?} mean {:?}",
        rel_err(got, want) * 100.0,
        data.len(),
        d.max_lateness,
        d.mean_lateness()
    );
    assert_eq!(data.len() as u64, n);
    // The bed did inject the cycle: without it the jitter would be a few µs.
    assert!(
        want > 0.3,
        "the line's egress jitter is only {want:.4} ms; the variation was not applied"
    );
    assert!(
        rel_err(got, want).abs() < 0.15,
        "netmeter jitter {got:.4} ms vs {want:.4} ms at the delay line's egress (> 15 % off)"
    );
}

// ---------------------------------------------------------------------------------
// 5. Pacing on loopback
// ---------------------------------------------------------------------------------

/// Runs `-u -b RATE -l LEN -t 4 -i 1` on loopback and checks every full 1-second
/// interval of the sender, and the middle ones (1..3) of the receiver, within 1 %.
///
/// Granularity: an interval holds a whole number of datagrams, and where the pacer's
/// sends fall relative to the interval boundaries moves one datagram in or out, so a
/// 1-second figure is only good to ±1 datagram. That must stay well under 1 %: at
/// 100 kbit/s we use 50-byte datagrams (250/s, 0.4 % each) instead of the default
/// 1460 (8.6/s, 12 % each, for which 1 % per interval is not achievable).
fn check_pacing(rate: &str, target_bps: f64, len: &str) {
    let _t = timing_lock();
    let (c, s) = without_stall(|| {
        run_loopback(
            Prio::Realtime,
            &["-u", "-b", rate, "-l", len, "-t", "4", "-i", "1"],
        )
    });
    let per_datagram = len.parse::<f64>().unwrap() * 8.0 / target_bps;
    let rows = |v: &Value| -> Vec<(f64, f64, f64)> {
        v["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|iv| {
                (
                    f64_at(iv, "/sum/start"),
                    f64_at(iv, "/sum/seconds"),
                    f64_at(iv, "/sum/bits_per_second"),
                )
            })
            .collect()
    };
    let snd = rows(&c);
    let rcv = rows(&s);
    let show = |r: &[(f64, f64, f64)]| {
        r.iter()
            .map(|(st, secs, bps)| {
                format!(
                    "{st:.2}+{secs:.4}s {:+.3}%",
                    rel_err(*bps, target_bps) * 100.0
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    eprintln!(
        "pacing {rate} -l {len} ({:.2} % per datagram-second): sender [{}]; receiver [{}]; \
         end sent {:.4} Mbit/s, lost {}",
        per_datagram * 100.0,
        show(&snd),
        show(&rcv),
        f64_at(&c, "/end/sum_sent/bits_per_second") / 1e6,
        u64_at(&c, "/end/sum/lost_packets")
    );
    // All four are full intervals (the fourth ends at the end of the test, 4 s).
    let full: Vec<_> = snd.iter().filter(|r| r.1 > 0.9).collect();
    assert!(full.len() >= 4, "expected 4 full sender intervals: {snd:?}");
    // Each within 1 %, except one that a host stall visibly cut into: its own tick came
    // late (the interval is over 5 ms longer or shorter than 1 s: the whole VM stopped,
    // the sender with it), and then the pacer must have made the time up, the interval
    // and the next together within 0.5 %.
    for (i, (st, secs, bps)) in full.iter().enumerate() {
        if rel_err(*bps, target_bps).abs() < 0.01 {
            continue;
        }
        let stalled = (secs - 1.0).abs() > 0.005;
        // The late tick lengthens one interval and shortens its neighbour (seen in CI:
        // 1.0144 s at -1.42 %, then 0.9857 s at +1.45 %), so either neighbour may pair.
        let pairs = |(_, s2, b2): &&(f64, f64, f64)| {
            rel_err((bps * secs + b2 * s2) / (secs + s2), target_bps).abs() < 0.005
        };
        let made_up = full.get(i + 1).is_some_and(pairs)
            || i.checked_sub(1)
                .and_then(|j| full.get(j))
                .is_some_and(pairs);
        assert!(
            stalled && made_up,
            "sender interval at {st:.2} s ({secs:.4} s long): {bps:.0} bit/s vs target \
             {target_bps:.0} ± 1 % (and not a stall a neighbouring interval made up)"
        );
    }
    let middle: Vec<_> = rcv.iter().filter(|r| r.0 > 0.5 && r.0 < 2.5).collect();
    assert_eq!(middle.len(), 2, "receiver intervals: {rcv:?}");
    for (st, _, bps) in middle {
        assert!(
            rel_err(*bps, target_bps).abs() < 0.01,
            "receiver interval at {st:.2} s: {bps:.0} bit/s vs target {target_bps:.0} ± 1 %"
        );
    }
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: a timing measurement (real-time priority needs root)"
)]
fn pacing_100k() {
    check_pacing("100K", 100e3, "50");
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: a timing measurement (real-time priority needs root)"
)]
fn pacing_10m() {
    check_pacing("10M", 10e6, "1460");
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: a timing measurement (real-time priority needs root)"
)]
fn pacing_500m() {
    check_pacing("500M", 500e6, "1460");
}

// ---------------------------------------------------------------------------------
// 6. UDP messages (GSO/GRO) against netfilter's packet counts
// ---------------------------------------------------------------------------------

/// nftables counters in `side`'s namespace for UDP to `port` longer than 1000 bytes
/// (data, not the 4-byte connect datagrams): on the output hook, before the device cuts
/// a GSO send into datagrams, and on the input hook, after any receive coalescing.
/// The output hook counts `sk_buff`s, so it sees one packet per message the sender
/// handed the kernel.
fn add_udp_io_counters(bed: &Netbed, side: Side, port: u16) {
    let script = format!(
        "table inet nmio {{\n\
         chain out {{ type filter hook output priority 0; udp dport {port} meta length > 1000 counter comment \"out\"; }}\n\
         chain in {{ type filter hook input priority 0; udp dport {port} meta length > 1000 counter comment \"in\"; }}\n\
         }}\n"
    );
    bed.nft_apply(side, &script)
        .expect("adding the nft counters");
}

/// (output, input) packets counted by [`add_udp_io_counters`] in `side`.
fn udp_io_counts(bed: &Netbed, side: Side) -> (u64, u64) {
    let count = |name: &str| {
        bed.nft_rule_counter(side, "nmio", name)
            .expect("reading the nft counters")
            .0
    };
    (count("out"), count("in"))
}

/// `end.netmeter.{local,remote}_udp_io.{sent,received}` as (datagrams, messages).
fn udp_io(v: &Value, side: &str, dir: &str) -> (u64, u64) {
    let p = format!("/end/netmeter/{side}_udp_io/{dir}");
    (
        u64_at(v, &format!("{p}/datagrams")),
        u64_at(v, &format!("{p}/messages")),
    )
}

/// The datagrams netmeter reports and the kernel messages that carried them, checked
/// against netfilter's packet counts on two paths:
/// - loopback inside a namespace (a private `lo`): GSO sends cross `lo` whole and a GRO
///   receiver takes them whole, so both ends' message counts equal the packets the
///   hooks counted, with more than one datagram per message (at 100 Mbit/s the pacer
///   grants a few datagrams at a time);
/// - the bed's veths, whose offloads are off: the sender's messages equal the output
///   hook's count (before segmentation), the receiver's equal the input hook's count,
///   one datagram each, as on a real wire.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces, nftables)"
)]
fn udp_messages_match_netfilter_counts() {
    let _t = timing_lock();
    let b = bed(LinkConfig::new());
    let port: u16 = 5201;
    let args = ["-u", "-b", "100M", "-l", "1400", "-t", "2"];
    let run =
        |server_side: Side, host: &str| run_bed_to(&b, Prio::Normal, server_side, host, &args);

    // Loopback in h1's namespace: nothing else uses this `lo`.
    add_udp_io_counters(&b, Side::H1, port);
    let (c, s) = run(Side::H1, "127.0.0.1");
    let (hook_out, hook_in) = udp_io_counts(&b, Side::H1);
    let sent = udp_io(&c, "local", "sent");
    let received = udp_io(&s, "local", "received");
    eprintln!("lo: sent {sent:?} received {received:?}; hooks out {hook_out} in {hook_in}");
    // A message the receiver's full socket buffer dropped passed the input hook: the
    // kernel's drop count (one per message) closes the sum.
    let drops = |v: &Value| {
        v["end"]["netmeter"]["local_host_drops"]
            .as_u64()
            .unwrap_or(0)
    };
    assert_eq!(sent.1, hook_out, "sender's messages vs output hook");
    assert_eq!(
        received.1 + drops(&s),
        hook_in,
        "receiver's messages vs input hook"
    );
    assert!(received.0 <= sent.0, "datagrams sent and received");
    assert!(
        sent.0 > sent.1,
        "GSO on lo should carry several datagrams per message: {sent:?}"
    );
    // The client shows the server's figures as the remote side's.
    assert_eq!(udp_io(&c, "remote", "received"), received);

    // The bed: h1 → router → h2, offloads off on every veth.
    add_udp_io_counters(&b, Side::H2, port);
    let (h1_out_before, _) = udp_io_counts(&b, Side::H1);
    let h2 = b.h2_addr().to_string();
    let (c, s) = run(Side::H2, &h2);
    let (h1_out, _) = udp_io_counts(&b, Side::H1);
    let (_, h2_in) = udp_io_counts(&b, Side::H2);
    let sent = udp_io(&c, "local", "sent");
    let received = udp_io(&s, "local", "received");
    eprintln!(
        "bed: sent {sent:?} received {received:?}; h1 out {} h2 in {h2_in}",
        h1_out - h1_out_before
    );
    assert_eq!(
        sent.1,
        h1_out - h1_out_before,
        "sender's messages vs h1's output hook"
    );
    assert_eq!(
        received.1 + drops(&s),
        h2_in,
        "receiver's messages vs h2's input hook"
    );
    assert_eq!(received.0, received.1, "one datagram per received message");
    assert!(
        received.0 <= sent.0 && sent.0 > sent.1,
        "{sent:?} {received:?}"
    );
}
