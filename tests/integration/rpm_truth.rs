//! The link's truth for `netmeter rpm`: on a network-namespace path through the test
//! bed's delay line (10 ms each way, so no round trip can take less than 20 ms) with a
//! 20 Mbit/s tbf whose queue holds at most 5 ms (plus its 2 ms burst), every round trip
//! lies between 20 ms and 20 + 7 ms of queue, whatever the load. `netmeter rpm` against
//! `netmeter rpm-server` must report idle probe times of one round trip for each part
//! (TCP connect, TLS handshake per round trip, HTTP GET) and an idle latency of the same;
//! under a download its foreign probes' TCP connects within the loaded bound; and
//! `--working-load` over the same path must say the same of its own probe: its loaded
//! round trip and the foreign TCP connect's agree (docs/rpm.md, "One measurement, two
//! views").
//!
//! The bounds: below, the line's 20 ms less 0.1 ms (clock reading), for every probe;
//! above, the path's most plus [`SLACK_MS`] for a busy 2-CPU host (a late wake-up),
//! judged on medians so that single stalls do not decide. Under load a TLS handshake
//! and a GET also wait for the CPU of two debug-build processes moving the download
//! (seen: a TLS median of 92 ms on a path of at most 27 ms while others compiled), so
//! their medians are bounded by [`CPU_BOUND_MS`] only; the RPM figures, trimmed means
//! that keep such stalls, are printed, not judged.
//!
//! The ICMP truth (below [`truth_rate_mbit`]): an upload with cubic into a tbf queue of
//! a known size, without and with the delay line, timed at once by `netmeter rpm -C
//! cubic -d up` and by ICMP echo from the same namespace, then by `--working-load` and
//! echo; the loaded round trips that cross the queue once must agree within 10 %, and a
//! smaller queue must raise the RPM as the buffer predicts.

use crate::support::netbed::{Dir, LinkConfig, Netbed, PingStats, Side, timing_lock};
use crate::support::*;
use serde_json::Value;
use std::time::Duration;

/// The delay line's one-way delay.
const ONE_WAY_MS: f64 = 10.0;
/// The bottleneck: rate, and its queue in ms at that rate (the burst adds 2 ms).
const RATE_MBIT: f64 = 20.0;
const QUEUE_MS: f64 = 5.0;
const BURST_MS: f64 = 2.0;
/// What a busy host may add to a median round trip.
const SLACK_MS: f64 = 15.0;
/// The most a loaded TLS handshake's or GET's median may take: the path's 27 ms and
/// the two processes' CPU on a busy host.
const CPU_BOUND_MS: f64 = 150.0;

fn rtt_ms() -> f64 {
    2.0 * ONE_WAY_MS
}

fn loaded_max_ms() -> f64 {
    rtt_ms() + QUEUE_MS + BURST_MS + SLACK_MS
}

/// The median of `xs` (nearest rank).
fn median(mut xs: Vec<f64>) -> f64 {
    assert!(!xs.is_empty(), "no samples");
    xs.sort_by(f64::total_cmp);
    xs[(xs.len() - 1) / 2]
}

/// Each part's times (`tcp_ms`, `tls_ms`, `http_ms`) of the foreign probes in `probes`.
fn parts(probes: &Value) -> [(&'static str, Vec<f64>); 3] {
    let foreign: Vec<&Value> = probes
        .as_array()
        .expect("probes")
        .iter()
        .filter(|p| p["kind"] == "foreign")
        .collect();
    ["tcp_ms", "tls_ms", "http_ms"].map(|k| {
        (
            k,
            foreign
                .iter()
                .filter_map(|p| p[k].as_f64())
                .collect::<Vec<f64>>(),
        )
    })
}

fn within(what: &str, ms: f64, lo: f64, hi: f64) {
    assert!(
        (lo..=hi).contains(&ms),
        "{what}: {ms:.2} ms, the path says {lo:.1} to {hi:.1} ms"
    );
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces, the TUN delay line)"
)]
fn rpm_and_working_load_tell_the_delay_lines_truth() {
    let _t = timing_lock();
    Netbed::require();
    let bed = Netbed::new(
        LinkConfig::new()
            .rate_mbit(RATE_MBIT)
            .queue_ms(QUEUE_MS)
            .burst_ms(BURST_MS)
            .delay_ms(ONE_WAY_MS),
    )
    .expect("building the bed");
    let h2 = bed.h2_addr().to_string();
    let low = rtt_ms() - 0.1;

    // The responsiveness test against netmeter rpm-server.
    let rpm_srv = bed
        .spawn_in(
            Side::H2,
            netmeter(),
            &["rpm-server", "-p", "8443", "--large-size", "1G"],
        )
        .expect("rpm-server");
    await_tcp_listening(rpm_srv.id(), 8443);
    let url = format!("https://{h2}:8443/.well-known/nq");
    let out = bed
        .run_in(
            Side::H1,
            netmeter(),
            &["rpm", "--insecure", "-d", "down", "-m", "8", "-J", &url],
            Duration::from_secs(90),
        )
        .expect("netmeter rpm");
    let _ = rpm_srv.finish(Duration::from_secs(1));
    let doc: Value = serde_json::from_str(&out).expect("rpm JSON");

    // Idle: each part one round trip, and the idle latency the same.
    for (part, times) in parts(&doc["idle_probes"]) {
        eprintln!("idle {part}: {times:?}");
        let min = times.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(
            min >= low,
            "idle {part} {min:.2} ms, below the line's {low} ms"
        );
        within(
            &format!("idle {part} median"),
            median(times),
            low,
            rtt_ms() + SLACK_MS,
        );
    }
    let idle = doc["summary"]["idle_latency_ms"].as_f64().expect("idle");
    within("idle latency", idle, low, rtt_ms() + SLACK_MS);

    // Loaded: each foreign part one round trip through at most the tbf's queue.
    let loaded: Vec<Value> = doc["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .flat_map(|p| p["probes"].as_array().cloned().unwrap_or_default())
        .collect();
    let mut tcp_median = 0.0;
    for (part, times) in parts(&Value::Array(loaded)) {
        let m = median(times.clone());
        let min = times.iter().copied().fold(f64::INFINITY, f64::min);
        eprintln!(
            "loaded {part}: median {m:.2}, min {min:.2} of {} probes",
            times.len()
        );
        assert!(times.len() >= 5, "loaded {part}: {} probes", times.len());
        assert!(
            min >= low,
            "loaded {part} {min:.2} ms, below the line's {low} ms"
        );
        if part == "tcp_ms" {
            within("loaded TCP connect median", m, low, loaded_max_ms());
            tcp_median = m;
        } else {
            within(&format!("loaded {part} median"), m, low, CPU_BOUND_MS);
        }
    }
    eprintln!(
        "rpm: idle {idle:.2} ms, foreign {:?} RPM, self {:?}, rpm {:?}, down {:?} bit/s",
        doc["summary"]["foreign_rpm"],
        doc["summary"]["self_rpm"],
        doc["summary"]["rpm"],
        doc["summary"]["downlink_bps"]
    );

    // --working-load over the same path, the load the same way.
    let mut srv = bed
        .spawn_in(Side::H2, netmeter(), &["-s", "-1", "-J"])
        .expect("server");
    await_tcp_listening(srv.id(), 5201);
    let client = bed
        .run_in(
            Side::H1,
            netmeter(),
            &["-c", h2.as_str(), "-J", "-t", "6", "--working-load=down,4"],
            Duration::from_secs(60),
        )
        .expect("client");
    let _ = srv.wait_timeout(Duration::from_secs(10));
    let v: Value = serde_json::from_str(&client).expect("client JSON");
    let w = &v["end"]["netmeter"]["working_load"];
    let (idle_p50, loaded_p50, loaded_rpm) = (
        f64_at(w, "/idle_rtt/p50_ms"),
        f64_at(w, "/loaded_rtt/p50_ms"),
        f64_at(w, "/loaded_rpm"),
    );
    eprintln!(
        "--working-load: idle p50 {idle_p50:.2} ms, loaded p50 {loaded_p50:.2} ms, {loaded_rpm:.0} RPM"
    );
    within(
        "--working-load idle p50",
        idle_p50,
        low,
        rtt_ms() + SLACK_MS,
    );
    within(
        "--working-load loaded p50",
        loaded_p50,
        low,
        loaded_max_ms(),
    );
    // The two views of one loaded path: the same queue, so the same round trip, within
    // what the queue and a busy host may make of one median against the other.
    assert!(
        (loaded_p50 - tcp_median).abs() <= QUEUE_MS + BURST_MS + SLACK_MS,
        "--working-load's loaded round trip {loaded_p50:.2} ms against rpm's foreign TCP connect {tcp_median:.2} ms"
    );
    eprintln!("--working-load {loaded_rpm:.0} RPM");
}

// ----- The ICMP truth: an upload with cubic into a tbf queue, timed by ping -----
//
// The bed: a tbf on the router's egress (both ways; only the client's upload loads
// it) at truth_rate_mbit(), with a queue of a known size in ms. `netmeter rpm -C cubic
// -d up` loads it against `netmeter rpm-server` while ICMP echo from the client's
// namespace (the bed's raw-socket ping, no netmeter code in it) times round trips
// through the same queue; then `netmeter -c S -C cubic --working-load=up,4` does the
// same with ping beside it. A loss-based congestion control keeps the queue near
// its limit (filling it to a drop, backing off by 30 %, filling again), so the
// loaded round trip is the queue's size within that saw-tooth.
//
// The rate, 20 Mbit/s: what two debug-build processes moving TLS and HTTP/2 keep
// full on this shared 2-CPU machine with margin (the delay-line case above ran at
// 18.7 Mbit/s while others compiled); a load that the CPU cannot keep up with leaves
// the queue empty and proves nothing. At that rate a 20 ms queue is 50 kB (33 full
// frames) and a 5 ms one 12.5 kB (8 frames).
//
// What must agree within 10 %, and why that and not the draft's RPM: the foreign
// probe's TCP connect is one round trip through the loaded queue, as an ICMP echo is;
// both are taken over the same window (the phase's last MAD intervals) and reduced
// the same way (the draft's trimmed mean, fastest 95 %). The TLS handshake and the
// GET also wait for the CPU of two debug-build processes, and the self probe waits
// behind its own connection's unsent bytes, which drain at that connection's share of
// the rate (about a tenth here): 25 to 31 kB each with TCP_NOTSENT_LOWAT at 16 KiB
// (65 to 120 kB without), sampled with `ss -tin`, 100 to 130 ms, where the tbf's
// queue is 5 to 20 ms; with rustls's records and the body's chunks held to half a
// congestion window (4 to 64 KiB; 4 to 6 kB here) the self probe still takes 150 to
// 230 ms ("Where a self probe's time goes" in docs/rpm.md follows it layer by layer).
// So the draft's RPM, the mean of the foreign and self RPMs, stays about half the
// path's: the test prints it, the self probe's time and what
// waits in front of it, checks the kernel took the option (`notsent_lowat_bytes`),
// and holds the self probe to the relation it must have (slower than the path's
// round trip, never faster). docs/rpm.md, "The ICMP truth", has the figures.

/// The bottleneck's rate for the ICMP-truth cases, Mbit/s: 20, or
/// `NETMETER_RPM_TRUTH_MBIT` to run the same cases by hand on a faster path with a
/// release build (`cargo test --release`; docs/rpm.md, "The ICMP truth").
fn truth_rate_mbit() -> f64 {
    std::env::var("NETMETER_RPM_TRUTH_MBIT")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&r: &f64| (1.0..=1000.0).contains(&r))
        .unwrap_or(20.0)
}
/// The agreement the issue asks for between a loaded RPM and 60000 / ping's RTT.
const AGREE: f64 = 0.10;
/// ICMP echo spacing: 50 a second, 200 in a window of four 1 s intervals.
const PING_EVERY: Duration = Duration::from_millis(20);
/// Each rpm phase's limit (`-m`): goodput saturation needs at least 7 intervals.
const RPM_MAX_S: u64 = 12;

/// The draft's trimmed mean: the mean of the fastest 95 %.
fn trimmed_mean(mut xs: Vec<f64>) -> f64 {
    assert!(!xs.is_empty(), "no samples");
    xs.sort_by(f64::total_cmp);
    let keep = ((xs.len() as f64 * 0.95).ceil() as usize).max(1);
    xs[..keep].iter().sum::<f64>() / keep as f64
}

/// Echo round trips (ms) sent from `from_s` to `to_s` seconds after the ping started,
/// from a [`PingStats`] whose requests went [`PING_EVERY`] apart.
fn ping_window(p: &PingStats, from_s: f64, to_s: f64) -> Vec<f64> {
    let lost: std::collections::HashSet<u16> = p.lost.iter().copied().collect();
    let answered = (0..p.sent as u16).filter(|s| !lost.contains(s));
    answered
        .zip(&p.rtts)
        .filter(|(seq, _)| {
            let t = f64::from(*seq) * PING_EVERY.as_secs_f64();
            (from_s..=to_s).contains(&t)
        })
        .map(|(_, rtt)| rtt.as_secs_f64() * 1e3)
        .collect()
}

/// Runs `program args` in H1 while ICMP echo times the path from H1 to H2 for
/// `ping_s` seconds, both started together; returns the program's stdout, the echoes
/// and [`SendQueues`] of H1's connections to `port` sampled meanwhile.
fn with_ping(
    bed: &Netbed,
    args: &[&str],
    ping_s: u64,
    timeout: Duration,
    port: u16,
) -> (String, PingStats, SendQueues) {
    let to = std::net::IpAddr::V4(bed.h2_addr());
    let count = (Duration::from_secs(ping_s).as_millis() / PING_EVERY.as_millis()) as u16;
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let ping = s.spawn(|| {
            bed.ping(Side::H1, to, count, PING_EVERY, Duration::from_secs(2))
                .expect("ping")
        });
        let queues = s.spawn(|| sample_send_queues(bed, port, &done));
        let out = bed.run_in(Side::H1, netmeter(), args, timeout);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let ping = ping.join().expect("ping thread");
        let queues = queues.join().expect("ss thread");
        (out.expect("netmeter in H1"), ping, queues)
    })
}

/// One `ss -tin` sample of H1's TCP connections to a port: seconds since sampling
/// began, the bytes in their send queues (Send-Q: sent and not acknowledged, or not
/// sent yet) and of those not yet sent (`notsent`), summed, and how many connections.
#[derive(Clone, Copy, Debug)]
struct SendQueue {
    t_s: f64,
    send_q: u64,
    notsent: u64,
    conns: usize,
}

type SendQueues = Vec<SendQueue>;

/// One `ss -Htin` listing: each socket's line (Send-Q the second column) and, indented
/// below it, its TCP_INFO line (`notsent:N` when bytes wait unsent).
fn send_queue_of(t_s: f64, listing: &str) -> SendQueue {
    let mut q = SendQueue {
        t_s,
        send_q: 0,
        notsent: 0,
        conns: 0,
    };
    for l in listing.lines() {
        if l.starts_with(char::is_whitespace) {
            q.notsent += l
                .split_whitespace()
                .find_map(|w| w.strip_prefix("notsent:")?.parse::<u64>().ok())
                .unwrap_or(0);
        } else if let Some(b) = l
            .split_whitespace()
            .nth(1)
            .and_then(|b| b.parse::<u64>().ok())
        {
            q.send_q += b;
            q.conns += 1;
        }
    }
    q
}

/// Samples H1's send queues toward `port` four times a second until `done` (at most
/// 600 samples): the evidence of what waits in the client's own buffers.
fn sample_send_queues(bed: &Netbed, port: u16, done: &std::sync::atomic::AtomicBool) -> SendQueues {
    let start = std::time::Instant::now();
    let mut out = Vec::new();
    while !done.load(std::sync::atomic::Ordering::Relaxed) && out.len() < 600 {
        let filter = format!("dport = :{port}");
        if let Ok(o) = bed
            .cmd(Side::H1, "ss")
            .args(["-Htin", "state", "established", &filter])
            .output()
        {
            let listing = String::from_utf8_lossy(&o.stdout);
            out.push(send_queue_of(start.elapsed().as_secs_f64(), &listing));
        }
        std::thread::sleep(Duration::from_millis(250)); // a sampling period, not a wait
    }
    out
}

/// What one bed showed: ping's and netmeter's loaded round trips.
#[derive(Clone, Debug)]
struct TruthFigures {
    idle_ping_ms: f64,
    /// 60000 / the trimmed mean of the echoes during the rpm phase's last MAD intervals.
    ping_rpm: f64,
    /// 60000 / the trimmed mean of the foreign TCP connects of the same window.
    tcp_rpm: f64,
    foreign_rpm: f64,
    self_rpm: f64,
    rpm: f64,
    uplink_mbit: f64,
    /// 60000 / the trimmed mean of the echoes during `--working-load`'s load.
    wl_ping_rpm: f64,
    wl_loaded_rpm: f64,
    /// The host's stalls in the record: foreign TCP connects of the window longer
    /// than the longest echo of the same seconds plus 1 ms (no round trip through the
    /// path took that long), and their number.
    tcp_stalled: usize,
    tcp_count: usize,
    /// `--working-load`'s loaded p90 and the longest echo beside it.
    wl_p90_ms: f64,
    wl_ping_max_ms: f64,
}

impl TruthFigures {
    /// Why this run cannot judge the path, if the record shows the host, not the path,
    /// decided it: an upload short of the rate (the queue not kept filled), or more
    /// stalled probes than the trimmed mean drops (5 %).
    fn disturbed(&self) -> Option<String> {
        let mut why = Vec::new();
        if self.uplink_mbit < 0.8 * truth_rate_mbit() {
            why.push(format!(
                "the upload moved {:.1} Mbit/s of the tbf's {}: the CPU, not \
                 the queue, was the bottleneck",
                self.uplink_mbit,
                truth_rate_mbit()
            ));
        }
        if self.tcp_stalled * 20 > self.tcp_count {
            why.push(format!(
                "{} of {} foreign TCP connects longer than any echo",
                self.tcp_stalled, self.tcp_count
            ));
        }
        if self.wl_p90_ms > self.wl_ping_max_ms + 1.0 {
            why.push(format!(
                "--working-load's loaded p90 {:.2} ms above the longest echo {:.2} ms",
                self.wl_p90_ms, self.wl_ping_max_ms
            ));
        }
        (!why.is_empty()).then(|| why.join("; "))
    }

    fn print(&self, what: &str) {
        eprintln!(
            "{what}: idle ping {:.2} ms; rpm -d up {:.1} Mbit/s: ping {:.0} RPM, foreign TCP \
             connect {:.0} RPM, foreign {:.0} RPM, self {:.0} RPM, the draft's RPM {:.0}; \
             --working-load: ping {:.0} RPM, loaded_rpm {:.0}",
            self.idle_ping_ms,
            self.uplink_mbit,
            self.ping_rpm,
            self.tcp_rpm,
            self.foreign_rpm,
            self.self_rpm,
            self.rpm,
            self.wl_ping_rpm,
            self.wl_loaded_rpm
        );
    }
}

/// `netmeter rpm -C cubic -d DIRECTION -m RPM_MAX_S -J` with `extra` from H1 against
/// `netmeter rpm-server -C cubic` with `server_extra` in H2 (a download's load is the
/// server's sending), ICMP echo beside it: its JSON document, the echoes and the
/// client's send queues.
fn rpm_with_ping(
    bed: &Netbed,
    direction: &str,
    server_extra: &[&str],
    extra: &[&str],
) -> (Value, PingStats, SendQueues) {
    let mut server_args = vec![
        "rpm-server",
        "-p",
        "8443",
        "--large-size",
        "1G",
        "-C",
        "cubic",
    ];
    server_args.extend_from_slice(server_extra);
    let srv = bed
        .spawn_in(Side::H2, netmeter(), &server_args)
        .expect("rpm-server");
    await_tcp_listening(srv.id(), 8443);
    let url = format!("https://{}:8443/.well-known/nq", bed.h2_addr());
    let m = RPM_MAX_S.to_string();
    let mut args = vec![
        "rpm",
        "--insecure",
        "-C",
        "cubic",
        "-d",
        direction,
        "-m",
        &m,
        "-J",
    ];
    args.extend_from_slice(extra);
    args.push(&url);
    let (out, ping, queues) = with_ping(
        bed,
        &args,
        RPM_MAX_S + 8,
        Duration::from_secs(RPM_MAX_S + 60),
        8443,
    );
    let _ = srv.finish(Duration::from_secs(1));
    let doc: Value = serde_json::from_str(&out).expect("rpm JSON");
    (doc, ping, queues)
}

fn close(rpm: f64, truth: f64) -> bool {
    (rpm - truth).abs() <= AGREE * truth
}

/// [`measure_truth`], once more if the first run's record shows the host disturbed
/// it (see [`TruthFigures::disturbed`]); the second run is judged whatever it shows.
fn truth_of(cfg: LinkConfig, idle_rtt_ms: f64, what: &str) -> TruthFigures {
    let f = measure_truth(cfg.clone(), idle_rtt_ms);
    f.print(what);
    match f.disturbed() {
        Some(why) => {
            eprintln!("{what}: the host disturbed the run ({why}); once more");
            let g = measure_truth(cfg, idle_rtt_ms);
            g.print(what);
            g
        }
        _ => f,
    }
}

/// Runs both measurements of the truth on `cfg`'s bed and checks the idle ones.
fn measure_truth(cfg: LinkConfig, idle_rtt_ms: f64) -> TruthFigures {
    let queue_ms = cfg.queue_ms;
    let bed = Netbed::new(cfg).expect("building the bed");
    let h2 = bed.h2_addr().to_string();
    let to = std::net::IpAddr::V4(bed.h2_addr());

    // The path's idle round trip, before any load.
    let idle = bed
        .ping(Side::H1, to, 25, PING_EVERY, Duration::from_secs(2))
        .expect("idle ping");
    let idle_ms: Vec<f64> = idle.rtts.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    let idle_ping_ms = median(idle_ms.clone());
    eprintln!(
        "idle ping: median {idle_ping_ms:.2} ms of {} echoes",
        idle_ms.len()
    );
    within(
        "idle ping median",
        idle_ping_ms,
        idle_rtt_ms - 0.1,
        idle_rtt_ms + SLACK_MS,
    );

    let (doc, ping, queues) = rpm_with_ping(&bed, "up", &[], &[]);

    // Idle: the foreign TCP connect is the path's round trip, as the echo is.
    let (_, idle_tcp) = parts(&doc["idle_probes"]).into_iter().next().expect("tcp");
    let idle_tcp = median(idle_tcp);
    let idle_latency = doc["summary"]["idle_latency_ms"].as_f64().expect("idle");
    eprintln!("idle: TCP connect median {idle_tcp:.2} ms, idle latency {idle_latency:.2} ms");
    within(
        "idle TCP connect median",
        idle_tcp,
        idle_rtt_ms - 0.1,
        idle_ping_ms + SLACK_MS,
    );
    within(
        "idle latency",
        idle_latency,
        idle_rtt_ms - 0.1,
        idle_ping_ms + SLACK_MS,
    );

    // Loaded: the phase's last MAD (4) intervals, the draft's window for its figure.
    let phase = &doc["phases"][0];
    let end_s = f64_at(phase, "/end_s");
    let from_s = end_s - 4.0;
    let probes = phase["probes"].as_array().expect("probes");
    let window: Vec<&Value> = probes
        .iter()
        .filter(|p| p["start_s"].as_f64().is_some_and(|t| t >= from_s))
        .collect();
    let tcp: Vec<f64> = window.iter().filter_map(|p| p["tcp_ms"].as_f64()).collect();
    let selfs: Vec<f64> = window
        .iter()
        .filter(|p| p["kind"] == "self")
        .filter_map(|p| p["http_ms"].as_f64())
        .collect();
    let echoes = ping_window(&ping, from_s, end_s);
    assert!(
        tcp.len() >= 20,
        "{} foreign probes in the window",
        tcp.len()
    );
    assert!(echoes.len() >= 50, "{} echoes in the window", echoes.len());
    let (tcp_tm, ping_tm) = (trimmed_mean(tcp.clone()), trimmed_mean(echoes.clone()));
    let longest_echo = echoes.iter().copied().fold(0.0, f64::max);
    let summary = &doc["summary"];
    let figures = TruthFigures {
        idle_ping_ms,
        ping_rpm: 60_000.0 / ping_tm,
        tcp_rpm: 60_000.0 / tcp_tm,
        foreign_rpm: f64_at(summary, "/foreign_rpm"),
        self_rpm: f64_at(summary, "/self_rpm"),
        rpm: f64_at(summary, "/rpm"),
        uplink_mbit: f64_at(summary, "/uplink_bps") / 1e6,
        wl_ping_rpm: 0.0,
        wl_loaded_rpm: 0.0,
        tcp_stalled: tcp.iter().filter(|&&t| t > longest_echo + 1.0).count(),
        tcp_count: tcp.len(),
        wl_p90_ms: 0.0,
        wl_ping_max_ms: 0.0,
    };
    eprintln!(
        "rpm window {from_s:.1}-{end_s:.1} s, {} load connections: ping TM {ping_tm:.2} ms of {} \
         (median {:.2}), TCP connect TM {tcp_tm:.2} ms of {} (median {:.2}), self TM {:.1} ms of {}",
        phase["directions"][0]["connections_opened"],
        echoes.len(),
        median(echoes.clone()),
        tcp.len(),
        median(tcp.clone()),
        trimmed_mean(selfs.clone()),
        selfs.len()
    );
    // Why the self probe is slow: what the client's own send queues hold, and how long
    // a request behind its connection's share of them waits at the upload's rate.
    let held: Vec<&SendQueue> = queues
        .iter()
        .filter(|q| (from_s..=end_s).contains(&q.t_s) && q.conns > 0)
        .collect();
    if !held.is_empty() {
        let n = held.len() as f64;
        let mean = held.iter().map(|q| q.send_q as f64).sum::<f64>() / n;
        let notsent = held.iter().map(|q| q.notsent as f64).sum::<f64>() / n;
        let conns = held.iter().map(|q| q.conns as f64).sum::<f64>() / n;
        // A self probe's request waits behind its own connection's unsent bytes, which
        // drain at that connection's share of the upload's rate.
        let share_bps = figures.uplink_mbit * 1e6 / conns;
        eprintln!(
            "client send queues toward the server: {:.0} kB on average over {} samples \
             (the tbf's queue holds at most {:.0} kB): {:.0} ms at {:.1} Mbit/s; unsent \
             (ss notsent) {:.0} kB over {conns:.1} connections, {:.1} kB each: {:.0} ms at \
             a connection's share of the rate",
            mean / 1e3,
            held.len(),
            truth_rate_mbit() * 1e3 / 8.0 * (queue_ms + BURST_MS) / 1e3,
            mean * 8.0 / (figures.uplink_mbit * 1e3),
            figures.uplink_mbit,
            notsent / 1e3,
            notsent / conns / 1e3,
            notsent / conns * 8.0 / share_bps * 1e3,
        );
    }
    // The default, auto: the load connections' TCP_NOTSENT_LOWAT as the kernel reported
    // it (getsockopt), within the bound's limits.
    let dir = &phase["directions"][0];
    assert_eq!(dir["send_limit"], "auto", "{dir}");
    let lowat = dir["notsent_lowat_bytes"]
        .as_u64()
        .expect("notsent_lowat_bytes");
    assert!((1448..=65536).contains(&lowat), "TCP_NOTSENT_LOWAT {lowat}");
    // The self probe waits behind the upload's own data: never faster than the path.
    assert!(
        figures.self_rpm <= figures.ping_rpm * (1.0 + AGREE),
        "self {:.0} RPM above the path's {:.0}",
        figures.self_rpm,
        figures.ping_rpm
    );

    // --working-load over the same path, ping beside it. The load starts after the
    // first quarter (2 s of 10): its window is from 2.5 s (the queue filled) to 9.5 s.
    let mut srv = bed
        .spawn_in(Side::H2, netmeter(), &["-s", "-1", "-J"])
        .expect("server");
    await_tcp_listening(srv.id(), 5201);
    let (client, ping, _) = with_ping(
        &bed,
        &[
            "-c",
            h2.as_str(),
            "-J",
            "-t",
            "10",
            "-C",
            "cubic",
            "--working-load=up,4",
        ],
        10,
        Duration::from_secs(60),
        5201,
    );
    let _ = srv.wait_timeout(Duration::from_secs(10));
    let v: Value = serde_json::from_str(&client).expect("client JSON");
    let w = &v["end"]["netmeter"]["working_load"];
    let idle_s = f64_at(w, "/idle_seconds");
    let echoes = ping_window(&ping, idle_s + 0.5, 9.5);
    let ping_tm = trimmed_mean(echoes.clone());
    let figures = TruthFigures {
        wl_ping_rpm: 60_000.0 / ping_tm,
        wl_loaded_rpm: f64_at(w, "/loaded_rpm"),
        wl_p90_ms: f64_at(w, "/loaded_rtt/p90_ms"),
        wl_ping_max_ms: echoes.iter().copied().fold(0.0, f64::max),
        ..figures
    };
    eprintln!(
        "--working-load: ping TM {ping_tm:.2} ms of {} echoes, loaded p50 {:.2} ms, idle p50 {:.2} ms",
        echoes.len(),
        f64_at(w, "/loaded_rtt/p50_ms"),
        f64_at(w, "/idle_rtt/p50_ms"),
    );
    within(
        "--working-load idle p50",
        f64_at(w, "/idle_rtt/p50_ms"),
        idle_rtt_ms - 0.1,
        idle_ping_ms + SLACK_MS,
    );
    figures
}

fn agree(what: &str, rpm: f64, truth: f64) {
    assert!(
        close(rpm, truth),
        "{what}: {rpm:.0} RPM against ping's {truth:.0} RPM (more than {:.0} % apart)",
        AGREE * 100.0
    );
}

/// The prediction from the buffer: a loss-based sender keeps the queue between 70 %
/// of its limit (after a drop, cubic's multiplicative decrease) and the limit plus the
/// tbf's burst, so a loaded round trip is the idle one plus that; [`SLACK_MS`] above
/// for a busy host. Both ping's and rpm's loaded RPM must lie in that band.
fn predicted(f: &TruthFigures, idle_rtt_ms: f64, queue_ms: f64) {
    let lo = 60_000.0 / (idle_rtt_ms + queue_ms + BURST_MS + SLACK_MS);
    let hi = 60_000.0 / (idle_rtt_ms + 0.7 * queue_ms);
    within("ping's loaded RPM", f.ping_rpm, lo, hi);
    within("rpm's foreign TCP connect RPM", f.tcp_rpm, lo, hi);
}

/// Each loaded figure that is one round trip through the queue against the truth.
fn check_truth(f: &TruthFigures) {
    agree("rpm's foreign TCP connect", f.tcp_rpm, f.ping_rpm);
    agree(
        "--working-load's loaded_rpm",
        f.wl_loaded_rpm,
        f.wl_ping_rpm,
    );
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn rpm_upload_agrees_with_ping_through_a_tbf_queue() {
    let _t = timing_lock();
    Netbed::require();
    let big = truth_of(
        LinkConfig::new()
            .rate_mbit(truth_rate_mbit())
            .queue_ms(20.0)
            .burst_ms(BURST_MS),
        0.0,
        "20 ms queue",
    );
    check_truth(&big);
    // The prediction from the buffer: cubic keeps the queue between its 70 % and its
    // limit, so a loaded round trip is 0.7 * 20 ms to 20 + 2 ms (the burst) and RPM
    // 60000 / 22 to 60000 / 14 (2727 to 4286); with 5 ms, 0.7 * 5 ms to 7 ms, RPM
    // 8571 to 17143: at least twice the 20 ms queue's, and within its own band.
    let small = truth_of(
        LinkConfig::new()
            .rate_mbit(truth_rate_mbit())
            .queue_ms(QUEUE_MS)
            .burst_ms(BURST_MS),
        0.0,
        "5 ms queue",
    );
    check_truth(&small);
    predicted(&big, 0.0, 20.0);
    predicted(&small, 0.0, QUEUE_MS);
    assert!(
        small.tcp_rpm >= 2.0 * big.tcp_rpm,
        "a 5 ms queue: {:.0} RPM, not twice the 20 ms queue's {:.0}",
        small.tcp_rpm,
        big.tcp_rpm
    );
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces, the TUN delay line)"
)]
fn rpm_upload_agrees_with_ping_through_the_delay_line_and_a_tbf_queue() {
    let _t = timing_lock();
    Netbed::require();
    let f = truth_of(
        LinkConfig::new()
            .rate_mbit(truth_rate_mbit())
            .queue_ms(20.0)
            .burst_ms(BURST_MS)
            .delay_ms(ONE_WAY_MS),
        rtt_ms(),
        "10 ms each way and a 20 ms queue",
    );
    check_truth(&f);
    predicted(&f, rtt_ms(), 20.0);
}

/// `--notsent-lowat auto` (docs/rpm.md, "Bounding by time"): what a self probe waits
/// behind is held to about a segment in each of three places (the kernel's unsent
/// bytes, rustls's records, the body's chunk), and it waits besides for an
/// acknowledgement to open its connection's window, so its time is the path's loaded
/// round trip plus a few segments at its connection's share of the rate. Held: the
/// self probe's trimmed mean at most ping's of the same seconds plus
/// [`AUTO_SEGMENTS_AHEAD`] segments at that share and [`SLACK_MS`] (on this bed about
/// 20 + 50 + 15 ms). Measured, upload (`rpm --notsent-lowat auto`): 31.0 ms with a
/// debug build (42.5 before `sendq::Room`), 31 ms with a release build on a quiet
/// host; with the fixed mark 185 ms in debug, 165 to 203 ms in release, which this
/// bound fails. Download (`rpm-server --notsent-lowat auto`, the load being the
/// server's): the answer is two frames, its HEADERS and its DATA, so
/// [`AUTO_ANSWER_SEGMENTS`] more (before `sendq::Room` h2 sent a frame of the large
/// object between them: a capture on the server's veth showed 5 to 8 full segments
/// leave between the request's arrival and the answer's). 37.0 ms in debug (67 and
/// 75 before the room); with the server's fixed 16384 263 ms.
const AUTO_SEGMENTS_AHEAD: f64 = 8.0;
/// See [`AUTO_SEGMENTS_AHEAD`]: a download's answer behind its own HEADERS and one
/// more frame of the load.
const AUTO_ANSWER_SEGMENTS: f64 = 2.0;

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn rpm_auto_send_limit_keeps_the_self_probe_near_the_round_trip() {
    auto_send_limit_holds("up", Dir::H1ToH2, &[], &["--notsent-lowat", "auto"]);
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn rpm_server_auto_send_limit_keeps_the_download_self_probe_near_the_round_trip() {
    auto_send_limit_holds("down", Dir::H2ToH1, &["--notsent-lowat", "auto"], &[]);
}

/// One run of [`auto_send_limit_holds`]: the figures it judges.
struct AutoRun {
    /// The tbf's rate, Mbit/s.
    rate_mbit: f64,
    self_tm: f64,
    self_count: usize,
    ping_tm: f64,
    mbit: f64,
    conns: f64,
    foreign_rpm: f64,
    self_rpm: f64,
    rpm: f64,
}

impl AutoRun {
    /// A segment's time at a connection's share of the load, ms.
    fn segment_ms(&self) -> f64 {
        1448.0 * 8.0 / (self.mbit * 1e3 / self.conns)
    }

    /// Why this run cannot judge the sender, if its record shows the host decided it:
    /// the load short of the rate, or the foreign probes (whose TLS and GET are the
    /// CPU of the two processes) more than `foreign_under` under ping's RPM (a quiet
    /// host keeps them within 1 to 2 % at 100 Mbit/s, 1 to 7 % at 20; docs/rpm.md);
    /// the self probe's answer waits for the same CPU.
    fn disturbed(&self, foreign_under: f64) -> Option<String> {
        let mut why = Vec::new();
        if self.mbit < 0.8 * self.rate_mbit {
            why.push(format!(
                "the load moved {:.1} Mbit/s of the tbf's {}",
                self.mbit, self.rate_mbit
            ));
        }
        let ping_rpm = 60_000.0 / self.ping_tm;
        if self.foreign_rpm < (1.0 - foreign_under) * ping_rpm {
            why.push(format!(
                "the foreign probes' {:.0} RPM against ping's {ping_rpm:.0}",
                self.foreign_rpm
            ));
        }
        (!why.is_empty()).then(|| why.join("; "))
    }
}

/// `netmeter rpm -d DIRECTION` beside ping on a fresh bed made as `cfg` says, with the
/// options given; the self probes' and the echoes' trimmed means over the phase's last
/// MAD seconds, what the load moved and the summary's RPMs.
fn auto_run(cfg: LinkConfig, direction: &str, server_extra: &[&str], extra: &[&str]) -> AutoRun {
    let rate_mbit = cfg.rate_mbit.expect("a shaped bed");
    let bed = Netbed::new(cfg).expect("building the bed");
    let (doc, ping, _) = rpm_with_ping(&bed, direction, server_extra, extra);
    let phase = &doc["phases"][0];
    let dir = &phase["directions"][0];
    let load = if direction == "up" {
        "upload"
    } else {
        "download"
    };
    assert_eq!(dir["direction"], load, "{dir}");
    if direction == "up" {
        // The client's own connections: the kernel took the mark it set.
        assert_eq!(dir["send_limit"], "auto", "{dir}");
        let lowat = dir["notsent_lowat_bytes"]
            .as_u64()
            .expect("notsent_lowat_bytes");
        assert!((1448..=65536).contains(&lowat), "TCP_NOTSENT_LOWAT {lowat}");
    }
    let end_s = f64_at(phase, "/end_s");
    let from_s = end_s - 4.0;
    let selfs: Vec<f64> = phase["probes"]
        .as_array()
        .expect("probes")
        .iter()
        .filter(|p| p["kind"] == "self" && p["start_s"].as_f64().is_some_and(|t| t >= from_s))
        .filter_map(|p| p["http_ms"].as_f64())
        .collect();
    let echoes = ping_window(&ping, from_s, end_s);
    assert!(
        selfs.len() >= 20,
        "{} self probes in the window",
        selfs.len()
    );
    assert!(echoes.len() >= 50, "{} echoes in the window", echoes.len());
    let summary = &doc["summary"];
    let key = if direction == "up" {
        "/uplink_bps"
    } else {
        "/downlink_bps"
    };
    AutoRun {
        rate_mbit,
        self_count: selfs.len(),
        self_tm: trimmed_mean(selfs),
        ping_tm: trimmed_mean(echoes),
        mbit: f64_at(summary, key) / 1e6,
        conns: dir["connections_opened"]
            .as_f64()
            .expect("connections_opened"),
        foreign_rpm: f64_at(summary, "/foreign_rpm"),
        self_rpm: f64_at(summary, "/self_rpm"),
        rpm: f64_at(summary, "/rpm"),
    }
}

/// Runs of [`auto_run`] a disturbed host may cost before the sender goes unjudged.
const AUTO_TRIES: usize = 3;

/// [`auto_run`] on a bed `cfg` makes, printed by `show`, until a run whose record shows
/// the host left it alone ([`AutoRun::disturbed`] with `foreign_under`), at most
/// [`AUTO_TRIES`]; that run, whose load must have kept the queue full. `None` when the
/// host disturbed every run: the record then shows the CPU, not the sender (in one
/// full-suite run on this VM the foreign probes came out 28 % and then 20 % under
/// ping's, where a quiet host keeps them within 2 to 7 %), and the caller says so
/// instead of judging it.
fn auto_run_judged(
    cfg: impl Fn() -> LinkConfig,
    direction: &str,
    server_extra: &[&str],
    extra: &[&str],
    foreign_under: f64,
    show: impl Fn(&AutoRun),
) -> Option<AutoRun> {
    for _ in 0..AUTO_TRIES {
        let r = auto_run(cfg(), direction, server_extra, extra);
        show(&r);
        match r.disturbed(foreign_under) {
            Some(why) => eprintln!("{direction}: the host disturbed the run ({why})"),
            None => {
                assert!(
                    r.mbit >= 0.8 * r.rate_mbit,
                    "the load moved {:.1} Mbit/s of the tbf's {}: the queue was not kept full",
                    r.mbit,
                    r.rate_mbit
                );
                return Some(r);
            }
        }
    }
    eprintln!(
        "{direction}: the host disturbed all {AUTO_TRIES} runs: their records cannot judge \
         the sender"
    );
    None
}

/// The check of [`AUTO_SEGMENTS_AHEAD`] for one direction, the tbf on that direction,
/// `auto` on the side that sends the load, on a run the host left alone
/// ([`auto_run_judged`]).
fn auto_send_limit_holds(direction: &str, shaped: Dir, server_extra: &[&str], extra: &[&str]) {
    let _t = timing_lock();
    Netbed::require();
    let ahead = match direction {
        "up" => AUTO_SEGMENTS_AHEAD,
        _ => AUTO_SEGMENTS_AHEAD + AUTO_ANSWER_SEGMENTS,
    };
    let show = |r: &AutoRun| {
        eprintln!(
            "auto, {direction}: {:.1} Mbit/s over {} connections (a segment {:.1} ms at a \
             connection's share); ping TM {:.2} ms; self TM {:.1} ms of {} (at most {:.1}); \
             foreign {:.0} RPM, self {:.0}, the draft's {:.0} against ping's {:.0}",
            r.mbit,
            r.conns,
            r.segment_ms(),
            r.ping_tm,
            r.self_tm,
            r.self_count,
            r.ping_tm + ahead * r.segment_ms() + SLACK_MS,
            r.foreign_rpm,
            r.self_rpm,
            r.rpm,
            60_000.0 / r.ping_tm,
        );
    };
    let cfg = || {
        LinkConfig::new()
            .rate_mbit(truth_rate_mbit())
            .rate_dir(shaped)
            .queue_ms(20.0)
            .burst_ms(BURST_MS)
    };
    let Some(r) = auto_run_judged(cfg, direction, server_extra, extra, AGREE, show) else {
        return;
    };
    let most = r.ping_tm + ahead * r.segment_ms() + SLACK_MS;
    assert!(
        r.self_tm <= most,
        "the self probe took {:.1} ms (trimmed mean) where the round trip was {:.2} ms and \
         {ahead} segments at a connection's share {:.1} ms",
        r.self_tm,
        r.ping_tm,
        ahead * r.segment_ms()
    );
}

/// Issue 25's figure itself: on a path whose round trip is long against a segment at a
/// connection's share, the draft's RPM (the mean of the foreign and the self RPM) agrees
/// with ping's within [`AGREE`]: the delay line (10 ms each way) and a tbf of
/// [`DRAFT_RATE_MBIT`] with 20 ms of queue, cubic, `auto` (the default) on the side
/// that sends the load. A segment at a tenth of the rate is 1.2 ms and the self probe
/// comes out 2 to 3 ms above the 37 ms loaded round trip for an upload, 6 to 7 ms for
/// a download (docs/rpm.md, "Bounding by time"). Measured in this test's build (its
/// TLS and HTTP/2 crates optimised), three runs each: upload -3.6 to -4.1 %, download
/// -7.5 to -8.2 %; before `sendq::Room` the upload's was -6.1 to -8.2 % in eleven runs.
/// On the 20 Mbit/s beds above, where a segment at a connection's share is 6 ms, it
/// cannot (-18 % for an upload in a release build). Judged on a run whose
/// record shows the host left it alone ([`auto_run_judged`]): not the foreign probes
/// more than [`DRAFT_FOREIGN_UNDER`] under ping's RPM (with one of the two CPUs kept
/// busy by another process they came out 6.4 % under and the draft's RPM 11.9 %).
const DRAFT_RATE_MBIT: f64 = 100.0;
/// See [`DRAFT_RATE_MBIT`]: quiet, the foreign probes came out 1.0 to 1.6 % under;
/// with another process taking half of one CPU, 2.4 and 2.5 % (and the draft's RPM
/// -8.3 and -8.5 %).
const DRAFT_FOREIGN_UNDER: f64 = 0.02;

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces, the TUN delay line)"
)]
fn rpm_draft_rpm_agrees_with_ping_through_the_delay_line_at_100_mbit() {
    draft_rpm_agrees_through_the_delay_line("up");
}

/// As the upload's, the load being `rpm-server`'s large object (its `--notsent-lowat
/// auto`, the default, and `-C cubic`), the queue filling on the way down.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces, the TUN delay line)"
)]
fn rpm_draft_rpm_agrees_with_ping_downloading_through_the_delay_line_at_100_mbit() {
    draft_rpm_agrees_through_the_delay_line("down");
}

/// The check of [`DRAFT_RATE_MBIT`] with the load in `direction`.
fn draft_rpm_agrees_through_the_delay_line(direction: &str) {
    let _t = timing_lock();
    Netbed::require();
    let cfg = || {
        LinkConfig::new()
            .rate_mbit(DRAFT_RATE_MBIT)
            .queue_ms(20.0)
            .burst_ms(BURST_MS)
            .delay_ms(ONE_WAY_MS)
    };
    let show = |r: &AutoRun| {
        eprintln!(
            "the draft's RPM at {DRAFT_RATE_MBIT} Mbit/s through the delay line, {direction}: \
             {:.1} Mbit/s over {} connections; ping TM {:.2} ms ({:.0} RPM); self TM {:.1} \
             ms; foreign {:.0} RPM, self {:.0}, the draft's {:.0} ({:+.1} %)",
            r.mbit,
            r.conns,
            r.ping_tm,
            60_000.0 / r.ping_tm,
            r.self_tm,
            r.foreign_rpm,
            r.self_rpm,
            r.rpm,
            (r.rpm * r.ping_tm / 60_000.0 - 1.0) * 100.0,
        );
    };
    let Some(r) = auto_run_judged(cfg, direction, &[], &[], DRAFT_FOREIGN_UNDER, show) else {
        return;
    };
    agree("the draft's RPM", r.rpm, 60_000.0 / r.ping_tm);
}
