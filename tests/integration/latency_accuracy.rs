//! Accuracy of netmeter's latency figures (`--trip-times` one-way delay, `--bounceback`
//! round-trip time and rate, TCP_INFO RTT) against known truths:
//!
//! * the emulated link of `tests/integration/support/netbed.rs` (h1 – r – h2 with the TUN delay
//!   line in r): a fixed delay per direction, or a delay variation whose every applied
//!   value the delay line logs;
//! * a deliberately skewed sender clock (`NETMETER_TEST_CLOCK_OFFSET_MS`);
//! * the segments the bed's router forwarded (nftables counters), for the bounceback
//!   transaction count;
//! * netperf's TCP_RR on loopback, measured in the same test run, as the floor for the
//!   bounceback rate.
//!
//! Both bed hosts are namespaces of one machine, so they share one CLOCK_REALTIME: the
//! true clock offset between netmeter's client and server is 0 unless a test skews it.
//!
//! Full tier (needs root: namespaces, TUN; and netperf from `scripts/setup-peers.sh`);
//! run with `cargo test --features full-tests --test integration latency_accuracy::`.
//! Every test holds `timing_lock()`, so they run one at a time (about 50 s in all).

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::netbed::{
    DelayLineStats, DelayRecord, Dir, DirStats, IPPROTO_UDP, LinkConfig, Netbed, PortCounter,
    Proto, Side, Variation, bed, tcp_listening, timing_lock,
};
use crate::support::{
    Proc, f64_at, free_port, netmeter, peer, run_bounded, wait_listening, wait_until,
};
use serde_json::Value;

/// Bound for one netmeter run (at most 3 s of test plus setup and the end exchange).
const RUN_TIMEOUT: Duration = Duration::from_secs(30);

fn parse(what: &str, out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "{what} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what}: output is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Worst lateness of the delay line (a packet written this long after its release time)
/// beyond which the link cannot be said to have held the delay the fixed-delay checks
/// take as truth. The line's mean lateness is ~0.1 ms here; single packets reach a few
/// ms when the host stalls the VM.
const MAX_LINE_LATENESS_MS: f64 = 1.0;

thread_local! {
    /// Worst delay-line lateness (ms) seen by `run_bed` since `on_steady_line` reset it.
    static WORST_LATENESS_MS: std::cell::Cell<f64> = const { std::cell::Cell::new(0.0) };
}

/// Runs a fixed-delay test body; if its checks fail while the delay line ran late
/// (`MAX_LINE_LATENESS_MS`), the failure says nothing about netmeter (the link did not
/// deliver the configured truth), so the body runs again, at most three times in all.
/// A failure on a steady line, or on the last attempt, fails the test as it is.
fn on_steady_line(body: impl Fn()) {
    for attempt in 1..=3 {
        WORST_LATENESS_MS.with(|w| w.set(0.0));
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(&body)) {
            Ok(()) => return,
            Err(panic) => {
                let late = WORST_LATENESS_MS.with(|w| w.get());
                if late <= MAX_LINE_LATENESS_MS || attempt == 3 {
                    std::panic::resume_unwind(panic);
                }
                eprintln!(
                    "attempt {attempt} failed while the delay line ran up to {late:.2} ms late (the link did not hold its delay); running again"
                );
            }
        }
    }
}

#[test]
fn steady_line_retries_only_failures_on_a_late_line() {
    use std::cell::Cell;
    // A failure while the line ran late is retried...
    let runs = Cell::new(0);
    on_steady_line(|| {
        runs.set(runs.get() + 1);
        if runs.get() == 1 {
            WORST_LATENESS_MS.with(|w| w.set(MAX_LINE_LATENESS_MS + 2.0));
            panic!("first attempt on a late line");
        }
    });
    assert_eq!(runs.get(), 2);
    // ...a failure on a steady line is not.
    let runs = Cell::new(0);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        on_steady_line(|| {
            runs.set(runs.get() + 1);
            panic!("netmeter wrong on a steady line");
        })
    }));
    assert!(r.is_err());
    assert_eq!(runs.get(), 1);
}

/// One netmeter test through the bed: server (`-s -1 -J`) in h2, client in h1 with
/// `args` (plus `-c H2 -J`) and the environment `env`. Returns (client, server) JSON.
/// Delay-line statistics are reset first, so they describe this run.
fn run_bed(bed: &Netbed, args: &[&str], env: &[(&str, &str)]) -> (Value, Value) {
    bed.reset_delay_stats();
    let out = run_bed_once(bed, args, env);
    if let Some(st) = bed.delay_stats() {
        let late = ms(st.h1_to_h2.max_lateness).max(ms(st.h2_to_h1.max_lateness));
        WORST_LATENESS_MS.with(|w| w.set(w.get().max(late)));
    }
    out
}

fn run_bed_once(bed: &Netbed, args: &[&str], env: &[(&str, &str)]) -> (Value, Value) {
    let mut server = bed
        .spawn_in(Side::H2, netmeter(), &["-s", "-1", "-J"])
        .expect("starting server");
    wait_until("the server to listen", || {
        bed.in_ns(Side::H2, || tcp_listening(5201)).unwrap()
    });
    let mut cmd = bed.cmd(Side::H1, netmeter());
    cmd.args(["-c", &bed.h2_addr().to_string(), "-J"])
        .args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let client = run_bounded(&mut cmd, RUN_TIMEOUT, &format!("client {args:?}"));
    let _ = server.wait_timeout(Duration::from_secs(10));
    let server = server
        .finish(Duration::from_secs(1))
        .expect("server output");
    (parse("client", &client), parse("server", &server))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Nearest-rank percentile (the smallest value with at least `q` of the samples at or
/// below it) of sorted values.
fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    assert!(!sorted.is_empty());
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The same percentile read from netmeter's `histogram_us` (`[[upper_us, count], ...]`),
/// in ms: the upper bound of the bucket holding the rank-th sample.
fn hist_percentile(hist: &Value, q: f64) -> f64 {
    let buckets: Vec<(f64, u64)> = hist
        .as_array()
        .expect("histogram_us array")
        .iter()
        .map(|b| (b[0].as_f64().unwrap(), b[1].as_u64().unwrap()))
        .collect();
    let total: u64 = buckets.iter().map(|b| b.1).sum();
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    for (upper_us, n) in buckets {
        seen += n;
        if seen >= rank {
            return upper_us / 1e3;
        }
    }
    unreachable!()
}

/// Width of the HDR bucket (3 significant digits, ns units) holding `ms`: the histogram
/// cannot place a value more precisely than this.
fn bin_width_ms(ms: f64) -> f64 {
    let ns = (ms * 1e6).max(1.0);
    // 2048 sub-buckets per power of two: values below 2^11 ns are exact; above,
    // a bucket spans 2^(floor(log2 v) - 10) ns.
    let exp = (ns.log2().floor() as i32 - 10).max(0);
    2f64.powi(exp) / 1e6
}

/// Asserts |got - want| <= tol, with a readable message.
fn assert_near(what: &str, got: f64, want: f64, tol: f64) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: netmeter {got:.4} ms, truth {want:.4} ms (tolerance {tol} ms)"
    );
}

// ---------------------------------------------------------------------------------
// 1. A fixed 10 ms one-way delay in each direction
// ---------------------------------------------------------------------------------

/// The delay line holds every packet 10 ms in each direction; the path outside it
/// (two veths and the router's forwarding, all in one kernel) adds tens of µs. So the
/// true one-way delay of every datagram is 10 ms plus at most the line's release
/// lateness and that path; the true clock offset is 0 (one shared host clock), and the
/// control connection's round trip is symmetric (10 ms each way), so the NTP-style
/// estimate has no systematic error either (only the two directions' different
/// lateness on the probes, tens of µs).
const FIXED_MS: f64 = 10.0;

fn fixed_delay_bed() -> Netbed {
    bed(LinkConfig::new().delay_ms(FIXED_MS))
}

/// Delays above this (10 ms + 5 ms) are host stalls, not the link: on this shared VM a
/// few datagrams now and then wait milliseconds for a CPU (the sending thread between
/// stamping and sending, the receiving kernel's softirq work); the link itself never
/// adds more than the line's lateness (~0.1 ms, at most a few ms in a stall).
const STALL_MS: f64 = FIXED_MS + 5.0;

/// `histogram_us` split at `cut_ms` by bucket upper bound: (samples at or below, their
/// mean in ms (upper bounds), all samples).
fn hist_split(hist: &Value, cut_ms: f64) -> (f64, f64, f64) {
    let (mut n, mut sum, mut total) = (0.0, 0.0, 0.0);
    for b in hist.as_array().expect("histogram_us array") {
        let (upper_ms, count) = (b[0].as_f64().unwrap() / 1e3, b[1].as_f64().unwrap());
        total += count;
        if upper_ms <= cut_ms {
            n += count;
            sum += upper_ms * count;
        }
    }
    (n, if n > 0.0 { sum / n } else { 0.0 }, total)
}

/// Checks one direction's corrected one-way delays against the fixed 10 ms delay.
/// `sign` is how the offset estimate enters the correction: corrected = raw − offset
/// for client→server (the server's clock reads the arrival), raw + offset for
/// server→client.
///
/// Truth: 10 ms plus the line's lateness and the path outside it (together ~0.1–0.3
/// ms), plus the offset estimate's error, `sign · (true_offset_ms − offset_ms)`: the
/// median must be 10 ms plus that error within 0.5 ms. The error is the estimate's, and
/// [`check_offset`] judges it against the estimate's own uncertainty; here it is taken
/// as the estimate gave it (tens of µs on a quiet host, over a millisecond when a busy
/// one delayed a probe on one way: seen 1.08 ms, ± 11.9 ms claimed, with the median
/// 11.2 ms where a fixed 10 ± 0.5 ms failed the test). The mean is checked the same way
/// over the datagrams below `STALL_MS`, of which there must be at least 98 %, and the
/// reported mean must be the raw mean corrected by the offset (so the raw figures are
/// right too).
/// The one-way delays (ms) the datagrams of `dir` really had up to the line's egress:
/// from their sender's timestamp (ns, `--trip-times`) to the moment the line wrote
/// them out, with `skew_ms` added back where the sender's clock was skewed on purpose.
/// Only the receiving side's stack is missing from it.
fn line_owd_ms(bed: &Netbed, dir: Dir, skew_ms: f64) -> Vec<f64> {
    let st = bed.delay_stats().expect("delay line stats");
    st.dir(dir)
        .records
        .iter()
        .filter(|r| r.proto == IPPROTO_UDP)
        .filter_map(|r| r.transit_to_egress_ns(true))
        .map(|ns| ns as f64 / 1e6 + skew_ms)
        .collect()
}

fn check_corrected_owd(
    what: &str,
    d: &Value,
    (offset_ms, true_offset_ms): (f64, f64),
    sign: f64,
    line: &[f64],
) -> f64 {
    let est_err = sign * (true_offset_ms - offset_ms);
    let samples = f64_at(d, "/samples");
    let owd = &d["owd"];
    let (p50, mean) = (f64_at(owd, "/p50_ms"), f64_at(owd, "/mean_ms"));
    let raw_mean = f64_at(d, "/raw_mean_ms");
    let hist = &d["histogram_us"];
    let (n_ok, mean_ok, n_hist) = hist_split(hist, STALL_MS);
    eprintln!(
        "{what}: {samples} samples, {} clock errors; owd min {:.4} p50 {p50:.4} mean \
         {mean:.4} (below {STALL_MS} ms: {n_ok} samples, mean {mean_ok:.4}) p99 {:.4} \
         max {:.4} ms; raw min {:.4} mean {raw_mean:.4} max {:.4} ms",
        f64_at(d, "/clock_errors"),
        f64_at(owd, "/min_ms"),
        f64_at(owd, "/p99_ms"),
        f64_at(owd, "/max_ms"),
        f64_at(d, "/raw_min_ms"),
        f64_at(d, "/raw_max_ms"),
    );
    assert_eq!(f64_at(d, "/negative_corrected"), 0.0, "{what}");
    assert_eq!(f64_at(owd, "/count"), samples, "{what}: histogram count");
    assert_eq!(n_hist, samples, "{what}: histogram_us total");
    assert_near(&format!("{what} OWD p50"), p50, FIXED_MS + est_err, 0.5);
    assert!(
        n_ok >= 0.98 * samples,
        "{what}: {} of {samples} datagrams took over {STALL_MS} ms",
        samples - n_ok
    );
    // Upper bucket bounds overstate by at most a bucket (8 µs here). The truth for the
    // mean is what the datagrams really took to the line's egress (its lateness and a
    // host stall's queue before it included), over those below the stall bound too.
    let line_ok: Vec<f64> = line.iter().copied().filter(|&x| x <= STALL_MS).collect();
    assert!(
        line_ok.len() as f64 >= 0.9 * samples,
        "{what}: the line logged {} datagrams below {STALL_MS} ms of {samples}",
        line_ok.len()
    );
    let line_mean = line_ok.iter().sum::<f64>() / line_ok.len() as f64;
    eprintln!(
        "{what}: the line's own mean to egress {line_mean:.4} ms; the offset estimate's \
         error moves the corrected delays by {est_err:.4} ms"
    );
    assert_near(
        &format!("{what} OWD mean below stalls (against the line's)"),
        mean_ok,
        line_mean + est_err,
        0.5,
    );
    assert_near(
        &format!("{what} OWD mean vs raw mean corrected by the offset"),
        mean,
        raw_mean - sign * offset_ms,
        0.02,
    );
    n_ok
}

/// 1(a): one direction's `trip_times` object, on the fixed-delay link with the true
/// offset 0: besides the corrected figures, no raw delay can be below the 10 ms the
/// line held the datagram (sent before it reached the line, received after it left,
/// on the same clock), so there are no clock errors and the raw minimum is ≥ 10 ms.
fn check_fixed_direction(what: &str, d: &Value, offset_ms: f64, sign: f64, line: &[f64]) {
    let samples = f64_at(d, "/samples");
    // 2 Mbit/s of 1000-byte datagrams for 3 s: 750 datagrams.
    assert!(samples >= 700.0, "{what}: only {samples} samples");
    check_corrected_owd(what, d, (offset_ms, 0.0), sign, line);
    assert_eq!(f64_at(d, "/clock_errors"), 0.0, "{what}: clock errors");
    let raw_min = f64_at(d, "/raw_min_ms");
    assert!(
        raw_min >= FIXED_MS - 0.01,
        "{what}: raw delay {raw_min} ms is shorter than the 10 ms the line held it"
    );
}

/// Per-interval OWD of the receiving side (`intervals[].streams[0].netmeter.owd`).
/// `offset_ms` and `sign` as for [`check_corrected_owd`] (the true offset is 0): each
/// interval's median is 10 ms plus the estimate's error within 0.5 ms.
fn check_fixed_intervals(what: &str, receiver: &Value, offset_ms: f64, sign: f64) {
    let est_err = sign * (0.0 - offset_ms);
    let ivs = receiver["intervals"].as_array().expect("intervals");
    assert!(ivs.len() >= 3, "{what}: {} intervals", ivs.len());
    for (i, iv) in ivs.iter().enumerate() {
        let owd = &iv["streams"][0]["netmeter"]["owd"];
        if owd.is_null() || f64_at(owd, "/count") == 0.0 {
            continue; // a sliver of an interval at the very end
        }
        assert_near(
            &format!("{what} interval {i} OWD p50"),
            f64_at(owd, "/p50_ms"),
            FIXED_MS + est_err,
            0.5,
        );
    }
}

/// The smallest round trip (ms) the delay line gave a clock probe: netmeter's client
/// writes `clock::PROBES` 8-byte probes on the control connection (server port 5201)
/// and the server answers each with 24 bytes. In the line's log they are the TCP
/// segments to and from port 5201 whose length is a pure ACK's (the connection's
/// shortest segment: IP + TCP header with its options) plus 8, and plus 24; the k-th
/// request pairs with the k-th answer. The round trip of a pair on the link is the
/// sum of the two hold times the line measured, lateness included. `None` if the log
/// holds no complete pair.
fn probe_rtt_on_line_ms(st: &DelayLineStats) -> Option<f64> {
    const PROBES: usize = 8;
    let control = |d: &DirStats, to_server: bool| -> Vec<DelayRecord> {
        d.records
            .iter()
            .filter(|r| r.proto == 6 && if to_server { r.dst_port } else { r.src_port } == 5201)
            .copied()
            .collect()
    };
    let (req, rep) = (control(&st.h1_to_h2, true), control(&st.h2_to_h1, false));
    let ack_len = req.iter().chain(&rep).map(|r| r.len).min()?;
    let hold_ms = |v: &[DelayRecord], len: u16| -> Vec<f64> {
        v.iter()
            .filter(|r| r.len == len)
            .take(PROBES)
            .map(|r| r.actual.map_or(f64::INFINITY, |a| a.as_secs_f64() * 1e3))
            .collect()
    };
    let (out, back) = (hold_ms(&req, ack_len + 8), hold_ms(&rep, ack_len + 24));
    out.iter()
        .zip(&back)
        .map(|(a, b)| a + b)
        .filter(|rtt| rtt.is_finite())
        .min_by(f64::total_cmp)
}

#[test]
fn probe_round_trip_pairs_requests_with_answers() {
    let rec = |len: u16, to_server: bool, ms: u64| DelayRecord {
        index: 0,
        proto: 6,
        src_port: if to_server { 40000 } else { 5201 },
        dst_port: if to_server { 5201 } else { 40000 },
        len,
        scheduled: Duration::from_millis(10),
        actual: Some(Duration::from_micros(ms)),
        held: false,
        written: Some(0),
        udp_head: None,
        written_wall_ns: None,
    };
    let mut st = DelayLineStats::default();
    // Pure ACKs of 52 bytes (IPv4 + TCP with timestamps), requests of 60, answers of 76;
    // a 53-byte state byte and a UDP datagram of request length that must be ignored.
    st.h1_to_h2.records = vec![
        rec(52, true, 10_000),
        rec(60, true, 10_900),
        rec(53, true, 10_000),
        rec(60, true, 10_300),
        rec(60, true, 10_000),
    ];
    st.h1_to_h2.records.push(DelayRecord {
        proto: 17,
        ..rec(60, true, 1)
    });
    st.h2_to_h1.records = vec![
        rec(52, false, 10_000),
        rec(76, false, 10_050),
        rec(76, false, 10_100),
        rec(76, false, 11_000),
    ];
    // Pairs: 20.95, 20.40, 21.00 ms: the best is the second.
    let rtt = probe_rtt_on_line_ms(&st).unwrap();
    assert!((rtt - 20.4).abs() < 1e-9, "{rtt}");
    assert_eq!(probe_rtt_on_line_ms(&DelayLineStats::default()), None);
}

/// Hold times (ms) the delay line measured for the TCP segments of the data connection
/// to the server's port 5201 (the one with the most data segments; the control
/// connection carries a few), each direction in order: (client → server data
/// segments, server → client data segments). Pure ACKs (the connection's shortest
/// segments) are left out.
fn data_holds_ms(st: &DelayLineStats) -> (Vec<f64>, Vec<f64>) {
    let tcp = |d: &DirStats| -> Vec<DelayRecord> {
        d.records.iter().filter(|r| r.proto == 6).copied().collect()
    };
    let (up, down) = (tcp(&st.h1_to_h2), tcp(&st.h2_to_h1));
    let Some(ack_len) = up.iter().chain(&down).map(|r| r.len).min() else {
        return (Vec::new(), Vec::new());
    };
    let mut per_port = std::collections::HashMap::<u16, usize>::new();
    for r in up.iter().filter(|r| r.dst_port == 5201 && r.len > ack_len) {
        *per_port.entry(r.src_port).or_default() += 1;
    }
    let Some((&port, _)) = per_port.iter().max_by_key(|(_, n)| **n) else {
        return (Vec::new(), Vec::new());
    };
    let holds = |v: &[DelayRecord], to_server: bool| -> Vec<f64> {
        v.iter()
            .filter(|r| r.len > ack_len)
            .filter(|r| {
                if to_server {
                    r.src_port == port && r.dst_port == 5201
                } else {
                    r.src_port == 5201 && r.dst_port == port
                }
            })
            .filter_map(|r| r.actual.map(|a| a.as_secs_f64() * 1e3))
            .collect()
    };
    (holds(&up, true), holds(&down, false))
}

/// Checks the clock offset estimate; returns it (ms). Its uncertainty is half the best
/// probe's round trip (as netmeter timed it), so it is judged against the best round
/// trip the delay line actually gave a probe (10 ms each way, plus however late the
/// line ran): never below half of that (a smaller uncertainty than the line allows is
/// wrong whatever the load), and above it by at most the hosts' own share of the best
/// probe (the stacks, the line's wake-up). That share is what a busy host stretches,
/// so it is allowed up to half the line's one-way delay: still far below the 10 ms
/// that the whole round trip instead of its half would add. The estimate's error comes
/// from the same share (a probe delayed on one way only): beyond `tol`, the estimate
/// may be off by the part of that share above 0.5 ms, as its own uncertainty says.
fn check_offset(bed: &Netbed, tt: &Value, want_ms: f64, tol: f64) -> f64 {
    let off = f64_at(tt, "/offset_ms");
    let unc = f64_at(tt, "/offset_uncertainty_ms");
    eprintln!("clock offset estimate {off:.4} ms ± {unc:.4} ms (true {want_ms} ms)");
    let line_rtt = bed
        .delay_stats()
        .as_ref()
        .and_then(probe_rtt_on_line_ms)
        .expect("the delay line logged the clock probes and their answers");
    eprintln!("best probe round trip on the line: {line_rtt:.4} ms");
    assert!(
        line_rtt >= 2.0 * FIXED_MS - 0.05,
        "the line held a probe for {line_rtt:.3} ms, less than its {} ms delay",
        2.0 * FIXED_MS
    );
    let host_share = unc - line_rtt / 2.0;
    assert!(
        (-0.02..=FIXED_MS / 2.0).contains(&host_share),
        "offset uncertainty {unc:.4} ms against half the best probe round trip on the line, \
         {:.4} ms (allowed: -0.02 to +{} ms for the hosts' own share)",
        line_rtt / 2.0,
        FIXED_MS / 2.0
    );
    assert_near(
        "clock offset estimate",
        off,
        want_ms,
        tol + (host_share - 0.5).max(0.0),
    );
    off
}

/// 1(a) UDP `--trip-times` both ways across the fixed-delay link.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn udp_one_way_delay_matches_fixed_delay() {
    let _t = timing_lock();
    on_steady_line(|| {
        let b = fixed_delay_bed();
        let args = ["-u", "--trip-times", "-b", "2M", "-l", "1000", "-t", "3"];

        let (c, s) = run_bed(&b, &args, &[]);
        let tt = &c["end"]["netmeter"]["trip_times"];
        let off = check_offset(&b, tt, 0.0, 0.5);
        let line = line_owd_ms(&b, Dir::H1ToH2, 0.0);
        check_fixed_direction("client→server", &tt["client_to_server"], off, 1.0, &line);
        check_fixed_intervals("client→server (server's intervals)", &s, off, 1.0);
        let st = b.delay_stats().unwrap();
        eprintln!(
            "delay line h1→h2: lateness max {:?} mean {:?}",
            st.h1_to_h2.max_lateness,
            st.h1_to_h2.mean_lateness()
        );

        b.reset_delay_stats();
        let mut rev = args.to_vec();
        rev.push("-R");
        let (c, _s) = run_bed(&b, &rev, &[]);
        let tt = &c["end"]["netmeter"]["trip_times"];
        let off = check_offset(&b, tt, 0.0, 0.5);
        let line = line_owd_ms(&b, Dir::H2ToH1, 0.0);
        check_fixed_direction("server→client", &tt["server_to_client"], off, -1.0, &line);
        check_fixed_intervals("server→client (client's intervals)", &c, off, -1.0);
        let st = b.delay_stats().unwrap();
        eprintln!(
            "delay line h2→h1: lateness max {:?} mean {:?}",
            st.h2_to_h1.max_lateness,
            st.h2_to_h1.mean_lateness()
        );
        assert_eq!(b.delay_line_losses().unwrap(), 0);
    });
}

/// 1(b) TCP bounceback across the fixed-delay link: each transaction is one request
/// h1→h2 (10 ms) and one reply h2→h1 (10 ms), so every RTT is at least 20 ms and
/// exceeds it only by the line's lateness and the stacks' few tens of µs; the median
/// must be 20 ms within 1 ms. One stream with burst 1 does transactions back to back,
/// so the rate must be 1 / mean RTT (within 5 %: the client's bookkeeping between
/// transactions is µs against 20 ms).
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn tcp_bounceback_rtt_matches_fixed_delay() {
    let _t = timing_lock();
    on_steady_line(|| {
        let b = fixed_delay_bed();
        let (c, _s) = run_bed(&b, &["--bounceback", "-t", "2"], &[]);
        let bb = &c["end"]["netmeter"]["bounceback"];
        let rtt = &bb["rtt"];
        let (min, p50, mean, max) = (
            f64_at(rtt, "/min_ms"),
            f64_at(rtt, "/p50_ms"),
            f64_at(rtt, "/mean_ms"),
            f64_at(rtt, "/max_ms"),
        );
        let tps = f64_at(bb, "/transactions_per_second");
        let n = f64_at(bb, "/transactions");
        eprintln!(
            "bounceback over 2 x {FIXED_MS} ms: {n} transactions, {tps:.2}/s; \
             RTT min {min:.4} p50 {p50:.4} mean {mean:.4} max {max:.4} ms"
        );
        // The truth is what the line did to each transaction: the k-th request's hold
        // plus the k-th reply's (10 ms each way, plus however late the line ran). The
        // hosts' own share (stacks, wake-ups) comes on top: at most 1.5 ms at p50.
        let (req, rep) = data_holds_ms(&b.delay_stats().expect("delay line stats"));
        let mut line: Vec<f64> = req.iter().zip(&rep).map(|(a, b)| a + b).collect();
        line.sort_by(f64::total_cmp);
        assert!(
            line.len() as f64 >= n - 1.0,
            "{} transactions on the line",
            line.len()
        );
        let line_p50 = line[line.len() / 2];
        eprintln!(
            "line: {} transactions, round trip min {:.4} p50 {line_p50:.4} ms",
            line.len(),
            line[0]
        );
        assert!(
            p50 >= line_p50 - 0.05 && p50 <= line_p50 + 1.5,
            "bounceback RTT p50 {p50:.4} ms against the line's {line_p50:.4} ms \
             (allowed: -0.05 to +1.5 ms for the hosts' own share)"
        );
        assert!(
            line_p50 >= 2.0 * FIXED_MS - 0.05,
            "the line held a transaction for {line_p50} ms, less than its 20 ms"
        );
        assert!(
            min >= line[0] - 0.05,
            "bounceback RTT min {min} ms is below the line's shortest round trip {}",
            line[0]
        );
        assert!(n >= 80.0, "{n} transactions in 2 s at 20 ms each");
        let want_tps = 1e3 / mean;
        assert!(
            (tps / want_tps - 1.0).abs() < 0.05,
            "{tps:.2} transactions/s, but 1 / mean RTT = {want_tps:.2}/s"
        );
        assert_eq!(b.delay_line_losses().unwrap(), 0);
    });
}

/// 1(c) TCP bulk at 20 Mbit/s across the fixed-delay link: no shaper, so no standing
/// queue; the kernel's smoothed RTT (TCP_INFO, reported per interval in µs and as the
/// sender's mean_rtt) must be the path's round trip as the delay line held it (20 ms
/// plus the line's lateness, from its own log) within 2 ms (its samples include
/// delayed-ACK and pacing-burst queueing of a few hundred µs).
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn tcp_info_rtt_matches_fixed_delay() {
    let _t = timing_lock();
    on_steady_line(|| {
        let b = fixed_delay_bed();
        let (c, _s) = run_bed(&b, &["-b", "20M", "-t", "3"], &[]);
        let want_us = 2.0 * FIXED_MS * 1e3;
        let ivs = c["intervals"].as_array().expect("intervals");
        let rtts: Vec<f64> = ivs.iter().map(|iv| f64_at(iv, "/streams/0/rtt")).collect();
        let mean_rtt = f64_at(&c, "/end/streams/0/sender/mean_rtt");
        let (min_rtt, max_rtt) = (
            f64_at(&c, "/end/streams/0/sender/min_rtt"),
            f64_at(&c, "/end/streams/0/sender/max_rtt"),
        );
        eprintln!(
            "TCP_INFO RTT per interval {rtts:?} µs; mean_rtt {mean_rtt} min {min_rtt} max \
             {max_rtt} µs (path round trip {want_us} µs)"
        );
        assert!(rtts.len() >= 3, "{} intervals", rtts.len());
        // The path's round trip as the line held it: the mean hold of the data segments
        // one way and of the ACKs back (20 ms, plus the line's mean lateness).
        let st = b.delay_stats().expect("delay line stats");
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let back: Vec<f64> = st
            .h2_to_h1
            .records
            .iter()
            .filter(|r| r.proto == 6 && r.src_port == 5201)
            .filter_map(|r| r.actual.map(|a| a.as_secs_f64() * 1e3))
            .collect();
        let (out, _) = data_holds_ms(&st);
        let path_us = (mean(&out) + mean(&back)) * 1e3;
        eprintln!("path round trip as the line held it: {path_us:.0} µs");
        assert!(path_us >= want_us - 50.0, "the line held {path_us} µs");
        for (i, r) in rtts.iter().enumerate() {
            assert!(
                (r - path_us).abs() <= 2000.0,
                "interval {i}: TCP_INFO rtt {r} µs vs the path's {path_us:.0} µs"
            );
        }
        assert!(
            (mean_rtt - path_us).abs() <= 2000.0,
            "mean_rtt {mean_rtt} µs vs the path's {path_us:.0} µs"
        );
        // mean_rtt is the mean of the interval samples (docs/metrics.md).
        let avg = rtts.iter().sum::<f64>() / rtts.len() as f64;
        assert!(
            (mean_rtt - avg).abs() <= 1.0 + 1e-3 * avg,
            "mean_rtt {mean_rtt} µs is not the mean of the interval samples ({avg:.1} µs)"
        );
        assert!(min_rtt >= want_us - 50.0, "min_rtt {min_rtt} µs < path RTT");
        assert_eq!(b.delay_line_losses().unwrap(), 0);
    });
}

// ---------------------------------------------------------------------------------
// 2. Injected delay variation: the OWD distribution's shape
// ---------------------------------------------------------------------------------

/// h1→h2 UDP packets get 5 ms plus a seeded uniform extra delay in [0, 4] ms (no order
/// clamp); the delay line logs every datagram's sender timestamp (nanoseconds, with
/// `--trip-times`) and the wall-clock time it wrote the datagram out. netmeter's
/// percentiles of the corrected OWD (p50, p90, p99 as reported, p10 read from
/// `histogram_us`) must match the same percentiles of those transits to the line's
/// egress.
///
/// Why egress transit and not the line's hold times: the hold starts when the line's
/// thread reads the datagram, and on this VM that read is now and then hundreds of µs
/// late (vCPU steal of 8-14 % measured during these runs), time the datagram spent
/// queued before the line that its real one-way delay includes. The hold times (and
/// the line's release lateness) are printed for comparison.
///
/// Tolerance: netmeter's OWD of a datagram is its egress transit plus the receive side
/// (a veth hop and the kernel's receive stamp), corrected by the offset estimate (true
/// offset 0, so the estimate itself is the error, tens of µs) and rounded up to its
/// HDR bucket (4–8 µs at 5–9 ms, 0.1 %). Every datagram's OWD is at least its egress
/// transit, so every percentile is too, less the offset estimate and a bucket. The
/// allowance above is one bucket + |offset estimate| + 0.5 ms. Measured: the receive
/// side adds 0.00–0.12 ms at every percentile in most runs, and 0.37 ms at p99 in one
/// of six, when the line released packets in a burst after a stall (p99 lateness
/// 1.6 ms) and the router's softirq forwarded them late. A wrong percentile
/// (p50 read as p90 or p10 is 1.6 or 1.5 ms off), a distorted distribution, timestamps
/// in the wrong unit, or a lost or doubled offset correction (25 ms in test 3) exceed
/// it.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn udp_owd_percentiles_match_injected_variation() {
    let _t = timing_lock();
    let b = bed(LinkConfig::new()
        .delay_ms(5.0)
        .variation(Variation::Uniform {
            max: Duration::from_millis(4),
            seed: 0x6e6d_0002,
        })
        .variation_dir(Dir::H1ToH2)
        .variation_proto(Proto::Udp)
        .preserve_order(false));
    let (c, _s) = run_bed(
        &b,
        &["-u", "--trip-times", "-b", "2M", "-l", "1000", "-t", "3"],
        &[],
    );
    assert_eq!(b.delay_line_losses().unwrap(), 0);
    let st = b.delay_stats().unwrap();
    let d = &st.h1_to_h2;
    // netmeter's data datagrams: IPv4 length 20 + 8 + 1000 (the connect datagram is 4
    // bytes of payload), each delivered by the line.
    let mut held: Vec<f64> = d
        .records
        .iter()
        .filter(|r| r.proto == IPPROTO_UDP && r.len == 1028)
        .filter_map(|r| r.actual.map(ms))
        .collect();
    held.sort_by(f64::total_cmp);
    // Sender timestamp (ns with --trip-times) to the line's egress.
    let mut egress: Vec<f64> = d
        .records
        .iter()
        .filter(|r| r.proto == IPPROTO_UDP && r.len == 1028)
        .filter_map(|r| r.transit_to_egress_ns(true))
        .map(|ns| ns as f64 / 1e6)
        .collect();
    egress.sort_by(f64::total_cmp);
    assert_eq!(
        egress.len(),
        held.len(),
        "every delivered datagram has an egress time"
    );
    // How late the line released each of them (printed with the percentiles).
    let mut late: Vec<f64> = d
        .records
        .iter()
        .filter(|r| r.proto == IPPROTO_UDP && r.len == 1028)
        .filter_map(|r| r.actual.map(|a| ms(a.saturating_sub(r.scheduled))))
        .collect();
    late.sort_by(f64::total_cmp);
    let tt = &c["end"]["netmeter"]["trip_times"];
    let c2s = &tt["client_to_server"];
    let samples = f64_at(c2s, "/samples");
    let offset = f64_at(tt, "/offset_ms");
    eprintln!(
        "variation: {} datagrams held by the line ({:.4}..{:.4} ms), netmeter {samples} \
         samples; line lateness max {:?} mean {:?}; offset estimate {offset:.4} ms",
        held.len(),
        held[0],
        held[held.len() - 1],
        d.max_lateness,
        d.mean_lateness()
    );
    // The datagrams still in the line when the test ended (≤ 9 ms at 250/s) may be
    // uncounted by netmeter; nothing else may be missing.
    assert!(
        (held.len() as f64 - samples).abs() <= 4.0,
        "line delivered {} data datagrams, netmeter timed {samples}",
        held.len()
    );
    assert_eq!(f64_at(c2s, "/clock_errors"), 0.0);
    assert_eq!(f64_at(c2s, "/negative_corrected"), 0.0);
    let hist = &c2s["histogram_us"];
    let owd = &c2s["owd"];
    for (q, reported) in [
        (0.10, None),
        (0.50, Some("/p50_ms")),
        (0.90, Some("/p90_ms")),
        (0.99, Some("/p99_ms")),
    ] {
        let want = nearest_rank(&egress, q);
        let from_hist = hist_percentile(hist, q);
        let got = reported.map_or(from_hist, |p| f64_at(owd, p));
        let bin = bin_width_ms(got);
        let allow = offset.abs() + 0.5;
        eprintln!(
            "p{:<4} egress {want:.4} ms, netmeter {got:.4} ms (histogram {from_hist:.4}), \
             diff {:+.4} ms; bin {bin:.4} ms, allowance {allow:.4} ms; held {:.4} ms, \
             line lateness {:.4} ms",
            q * 100.0,
            got - want,
            nearest_rank(&held, q),
            nearest_rank(&late, q)
        );
        // The reported percentile and the histogram agree to the bucket.
        assert!(
            (got - from_hist).abs() <= bin + 1e-9,
            "p{}: reported {got} ms, histogram_us says {from_hist} ms",
            q * 100.0
        );
        assert!(
            got >= want - offset.abs() - bin - 0.005,
            "p{}: netmeter {got:.4} ms is below the transit to the line's egress {want:.4} ms",
            q * 100.0
        );
        assert!(
            got <= want + bin + allow,
            "p{}: netmeter {got:.4} ms exceeds the egress transit {want:.4} ms by more than \
             one bucket ({bin:.4} ms) + {allow:.4} ms",
            q * 100.0
        );
    }
}

// ---------------------------------------------------------------------------------
// 3. A skewed sender clock
// ---------------------------------------------------------------------------------

/// The client's wall clock runs 25 ms ahead (NETMETER_TEST_CLOCK_OFFSET_MS=25 on the
/// client only); the link delays 10 ms each way. Truth: server − client = −25 ms; every
/// raw client→server delay is 10 − 25 = −15 ms, i.e. a clock error (all of them, unless
/// a host stall holds a datagram over 15 ms: see `STALL_MS`); after the correction the
/// delays are the link's 10 ms again.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn skewed_client_clock_is_estimated_and_corrected() {
    let _t = timing_lock();
    on_steady_line(|| {
        let b = fixed_delay_bed();
        let (c, s) = run_bed(
            &b,
            &["-u", "--trip-times", "-b", "2M", "-l", "1000", "-t", "2"],
            &[("NETMETER_TEST_CLOCK_OFFSET_MS", "25")],
        );
        let tt = &c["end"]["netmeter"]["trip_times"];
        let off = check_offset(&b, tt, -25.0, 1.0);
        // The server applies the same estimate (it received it from the client).
        let s_off = f64_at(&s, "/end/netmeter/trip_times/offset_ms");
        assert_near("server's copy of the offset", s_off, off, 1e-6);
        let d = &tt["client_to_server"];
        let samples = f64_at(d, "/samples");
        assert!(samples >= 450.0, "{samples} samples in 2 s at 250/s");
        // The client's clock runs 25 ms ahead: its stamps are 25 ms late.
        let line = line_owd_ms(&b, Dir::H1ToH2, 25.0);
        let n_ok = check_corrected_owd("skewed client→server", d, (off, -25.0), 1.0, &line);
        // Every datagram that took less than 25 ms (all but host stalls, which
        // `check_corrected_owd` bounds to 2 %) arrived with a raw delay of about
        // 10 − 25 = −15 ms: a clock error.
        let errors = f64_at(d, "/clock_errors");
        assert!(
            errors >= n_ok && errors <= samples,
            "{errors} clock errors among {samples} samples, {n_ok} of which took under \
             {STALL_MS} ms (raw delay < 0)"
        );
        assert_near(
            "raw minimum",
            f64_at(d, "/raw_min_ms"),
            FIXED_MS - 25.0,
            0.5,
        );
    });
}

// ---------------------------------------------------------------------------------
// 4. Bounceback count against the link, and rate against netperf TCP_RR on loopback
// ---------------------------------------------------------------------------------

/// nftables table the count test adds in the bed's router (its own, beside the bed's).
const RR_COUNT_TABLE: &str = "rrcount";

/// One-byte segments the router forwarded on the busiest connection to port 5201 (the
/// bounceback stream; the control connection carries a few state bytes):
/// (requests towards the server, replies from it).
fn one_byte_segments(bed: &Netbed) -> (u64, u64) {
    let busiest = |set: &str| {
        bed.port_counts(RR_COUNT_TABLE, set)
            .expect("reading the counters")
            .into_values()
            .max()
            .unwrap_or(0)
    };
    (busiest("req"), busiest("rep"))
}

/// The transaction count (and so the rate) netmeter prints is true: it equals the
/// 1-byte requests and replies the link carried on the bounceback connection, counted
/// by nftables in the router between client and server, per connection (the control
/// connection's 1-byte state messages are kept apart). When the test time ends one
/// request may be on the wire, and its reply may come back after the client stopped
/// counting: requests and replies are the count or one more. The rate is the count
/// over the measured seconds (checked in `bounceback`), and those seconds must
/// fit inside the client's lifetime.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces)"
)]
fn bounceback_count_matches_packets_on_the_link() {
    let _t = timing_lock();
    let b = bed(LinkConfig::new());
    // IPv4 with TCP timestamps (the namespaces' default): 20 + 32 header bytes, so a
    // one-byte segment is 53 bytes long; 41 covers a stack without timestamps.
    let len = "ip length { 41, 53 }";
    b.add_port_counters(
        RR_COUNT_TABLE,
        &[
            PortCounter {
                set: "req",
                priority: -10,
                matching: format!("tcp dport 5201 {len}"),
                key: "tcp sport",
            },
            PortCounter {
                set: "rep",
                priority: -10,
                matching: format!("tcp sport 5201 {len}"),
                key: "tcp dport",
            },
        ],
    )
    .expect("adding the counters");
    assert_eq!(one_byte_segments(&b), (0, 0));

    let started = Instant::now();
    let (c, _s) = run_bed(
        &b,
        &[
            "--bounceback",
            "--bounceback-request",
            "1",
            "--bounceback-reply",
            "1",
            "-t",
            "2",
        ],
        &[],
    );
    let lifetime = started.elapsed().as_secs_f64();
    let bb = &c["end"]["netmeter"]["bounceback"];
    let n = f64_at(bb, "/transactions") as u64;
    let secs = f64_at(bb, "/seconds");
    let (req, rep) = one_byte_segments(&b);
    eprintln!(
        "bounceback: {n} transactions in {secs} s; the link carried {req} one-byte \
         requests and {rep} one-byte replies on the stream"
    );
    // (Thousands on an idle host; a busy one is slower, and the check is the count.)
    assert!(n > 100, "only {n} transactions in 2 s on an unshaped link");
    assert!(
        (n..=n + 1).contains(&req),
        "{n} transactions reported, {req} one-byte requests on the link"
    );
    assert!(
        (n..=n + 1).contains(&rep) && rep <= req,
        "{n} transactions reported, {rep} one-byte replies ({req} requests) on the link"
    );
    assert!(
        secs >= 1.9 && secs <= lifetime,
        "{secs} s measured for a 2 s test of a client that lived {lifetime:.2} s"
    );
}

/// Seconds per run of each tool.
const RR_SECONDS: &str = "1";
/// Runs of each tool per pinning, alternating.
const RR_PAIRS: usize = 7;

/// The lowest acceptable netmeter / netperf rate ratio, and why there is no highest.
///
/// This is the rate compared with a peer; whether netmeter's count is *true* is
/// checked exactly, against the packets the link carried, by
/// `bounceback_count_matches_packets_on_the_link`. So no upper bound here: a rate above
/// netperf's is netmeter doing less per transaction (its TCP reads block without a
/// receive timeout, where netperf's loop and netmeter's earlier one armed a kernel
/// timer per read), not a counting error, and the benchmark (`bench/run.py`, case
/// `rr`) is where the speed goal is measured and published. An upper bound of 1.10
/// failed CI at 1.126 on one core (pair ratios 0.90-1.45) once the timer went.
///
/// The floor catches a request/response path that lost its footing (Nagle or delayed
/// ACKs back, a sleep in the loop: ratios of 0.01-0.1), not a few per cent. It sits
/// below everything measured with this procedure on the 2-vCPU test VM with other jobs
/// running: same core 0.78-0.93 in the debug build before the timer went (16
/// measurements), 1.13 after; release 0.91-0.96; different cores, where two cross-CPU
/// wake-ups per transaction set the rate whatever the tool, medians of seven pairs
/// 0.875-1.028 (30 measurements).
const RR_MIN_RATIO: f64 = 0.7;

/// Runs `cmd` at real-time priority (SCHED_FIFO 1, inherited by its threads and
/// children) when this process may (root). The test machine is shared: a ping-pong
/// whose wake-ups wait for other jobs to be preempted measures those jobs, not the
/// tool. Both tools get the same treatment; the kernel's RT throttling still leaves 5 %
/// of each CPU to the rest.
fn realtime(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return cmd;
    }
    // SAFETY: the hook runs in the forked child before exec and makes one system call
    // on a local struct (no allocation, no locks).
    unsafe {
        cmd.pre_exec(|| {
            let p = libc::sched_param { sched_priority: 1 };
            if libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// netperf TCP_RR, 1-byte request and response, pinned with `-T pin`: transactions/s.
fn netperf_rr(netperf: &str, port: u16, pin: &str) -> f64 {
    let mut cmd = Command::new(netperf);
    realtime(&mut cmd)
        .args(["-H", "127.0.0.1", "-p", &port.to_string(), "-t", "TCP_RR"])
        .args(["-l", RR_SECONDS, "-T", pin, "-P", "0", "--", "-r", "1,1"]);
    let out = run_bounded(&mut cmd, RUN_TIMEOUT, "netperf");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "netperf failed: {text} {out:?}");
    // With -P 0 the result is one line: send/recv socket sizes, request and response
    // sizes, elapsed seconds, transactions per second.
    text.lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 6).then(|| f[5].parse::<f64>().ok()).flatten()
        })
        .unwrap_or_else(|| panic!("no TCP_RR result in netperf's output: {text}"))
}

/// netmeter `--bounceback`, 1-byte request and reply, pinned with `-A pin`:
/// transactions/s.
fn netmeter_rr(port: u16, pin: &str) -> f64 {
    let mut cmd = Command::new(netmeter());
    realtime(&mut cmd)
        .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-J"])
        .args(["--bounceback", "--bounceback-request", "1"])
        .args(["--bounceback-reply", "1", "-t", RR_SECONDS, "-A", pin]);
    let out = run_bounded(&mut cmd, RUN_TIMEOUT, "netmeter");
    let v = parse("netmeter client", &out);
    let bb = &v["end"]["netmeter"]["bounceback"];
    let rate = f64_at(bb, "/transactions_per_second");
    // Back to back on one stream a transaction takes its RTT plus the client's own
    // bookkeeping, so the rate cannot exceed 1 / mean RTT.
    let mean_rtt_ms = f64_at(bb, "/rtt/mean_ms");
    assert!(
        rate * mean_rtt_ms / 1e3 <= 1.02,
        "{rate:.0} transactions/s with a mean RTT of {mean_rtt_ms} ms"
    );
    rate
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One stream of back-to-back 1-byte transactions is what netperf's TCP_RR measures,
/// with the same socket calls (one send and one receive per transaction on each side),
/// so on the same machine, pinned the same way, netmeter must keep up with netperf's
/// rate (see `RR_MIN_RATIO` for what "keep up" asserts and why).
/// Same core (`-T 0,0` / `-A 0,0`): the ends take turns on one CPU; different cores
/// (`-T 0,1` / `-A 0,1`): each transaction crosses CPUs twice and waits for two
/// wake-ups.
///
/// Procedure: the tools alternate (and which one starts), both at the same real-time
/// priority, and each pair of adjacent runs gives a ratio; the median of the ratios is
/// checked. Runs are 1 s, seven of each tool per pinning, not the 3 s × 3 (median of
/// three) first planned: this VM's speed per vCPU switches between two levels (~90k and
/// ~135k same-core transactions/s, even for a minimal C ping-pong) every fraction of a
/// second to several seconds, and medians of three 3-s runs then differed between the
/// tools by −31 % to +18 % from one measurement to the next (same core), while
/// adjacent 1-s pairs mostly see the same level, and the median of their ratios varies
/// much less. Each tool's runs and median are printed too.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs netperf (scripts/setup-peers.sh), a timing measurement"
)]
fn bounceback_rate_keeps_up_with_netperf_tcp_rr() {
    let _t = timing_lock();
    let netperf = peer("NETMETER_NETPERF");
    let np_port = free_port();
    let mut netserver = Proc::spawn(
        "netserver",
        realtime(&mut Command::new(peer("NETMETER_NETSERVER"))).args([
            "-D",
            "-4",
            "-L",
            "127.0.0.1",
            "-p",
            &np_port.to_string(),
        ]),
    );
    let _netserver_out = netserver.drain();
    wait_listening(np_port);
    let nm_port = free_port();
    let mut nm_server = Proc::spawn(
        "netmeter server",
        realtime(&mut Command::new(netmeter())).args([
            "-s",
            "-B",
            "127.0.0.1",
            "-p",
            &nm_port.to_string(),
        ]),
    );
    let _nm_server_out = nm_server.drain();
    wait_listening(nm_port);

    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pins: &[&str] = if cpus >= 2 { &["0,0", "0,1"] } else { &["0,0"] };
    let mut failures = Vec::new();
    for &pin in pins {
        let (mut np, mut nm, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..RR_PAIRS {
            let (p, m) = if i % 2 == 0 {
                let p = netperf_rr(&netperf, np_port, pin);
                (p, netmeter_rr(nm_port, pin))
            } else {
                let m = netmeter_rr(nm_port, pin);
                (netperf_rr(&netperf, np_port, pin), m)
            };
            np.push(p.round());
            nm.push(m.round());
            ratios.push(m / p);
        }
        let ratio = median(ratios.clone());
        eprintln!(
            "-T/-A {pin}: netperf TCP_RR {np:?}/s (median {}), netmeter bounceback \
             {nm:?}/s (median {}); pair ratios {:.3?}, median {ratio:.3} \
             (at least {RR_MIN_RATIO})",
            median(np.clone()),
            median(nm.clone()),
            ratios,
        );
        if ratio < RR_MIN_RATIO {
            failures.push(format!(
                "pinned {pin}: netmeter / netperf TCP_RR = {ratio:.3} ({:+.1} %), \
                 at least {RR_MIN_RATIO} expected",
                (ratio - 1.0) * 100.0
            ));
        }
    }
    assert!(failures.is_empty(), "bounceback rate: {failures:?}");
}
