//! iperf 2 at one end, netmeter at the other, across the bed's delay line held at 10 ms
//! each way (issue 22): the one-way delay (`--trip-times`) and the bounceback round
//! trip that each side reports agree with each other and with what the line itself
//! recorded, both ways round: netmeter's client (`--iperf2`) against iperf 2.2.1's
//! server (`iperf -s -e`), and iperf 2.2.1's client against netmeter's server.
//!
//! The truth is the line's log: how long it held each packet of each direction
//! (`DelayRecord::actual`). A packet's one-way delay is that hold plus the two stacks
//! and veths outside the line, so it is never below the hold, and the bed's two hosts
//! share one CLOCK_REALTIME, so no clock offset enters. The bounds accepted:
//! - below: a delay or round trip may not undercut the line's shortest hold (per
//!   direction, summed for a round trip) by more than [`RESOLUTION_MS`]: iperf 2
//!   prints milliseconds to three decimals (1 µs), netmeter's histograms' buckets are
//!   8 µs wide at 10-20 ms, and timestamps are microseconds on iperf 2's wire;
//! - above: a mean may exceed the line's mean hold (summed for a round trip) by at most
//!   [`HOST_SHARE_MS`], half the line's one-way delay: the stacks and wake-ups outside
//!   the line are tens of µs on a quiet host, but on the busy CI machine a stalled
//!   receiver moves a mean of 30 to 750 samples by milliseconds (seen: 16.4 ms against
//!   the line's 10.2, a round trip mean of 26.3 against 20.2, each fine when run again).
//!   A figure that counts the line's delay twice is 10 ms over; one that misses it
//!   fails the bound below.
//! - between the two ends: where both print the same figure (a UDP server report that
//!   netmeter shows, or that iperf 2's client prints from netmeter's server), the
//!   minimum and maximum are the same to the microsecond and the mean within rounding.
//!
//! Full tier (root: namespaces and TUN; the iperf 2 peer of `scripts/setup-peers.sh`).
//! Each test holds `timing_lock()`, builds its bed (the netbed tears it down on any
//! failure) and bounds every run; a case that failed is run again, at most [`RUNS`]
//! times in all (the hosts' share is what a busy machine stretches).
//!
//! TCP `--trip-times` runs with `-N` at both ends: with Nagle on, a 1000-byte write
//! (shorter than a segment) waits in the sender for the ACK of the one before, up to a
//! round trip (20 ms here), and iperf 2's write latency, from the write's send time to
//! its last byte read, counts that wait (seen: a mean of 14.8 ms against the line's
//! 10.1). That is the sender's queue, not the path; with `-N` each write leaves at once
//! and its latency is the path's. With Nagle on, netmeter's writes wait as iperf 2's
//! own client's do: the iperf 2 server gives both the same mean (a test of its own).

use crate::support::netbed::{Dir, DirStats, LinkConfig, Netbed, NsChild, Side, bed, timing_lock};
use crate::support::{json_of, passes_once_in, peer, run_bounded, show};
use serde_json::Value;
use std::time::Duration;

const V221: &str = "NETMETER_IPERF2_221";
/// The line's delay each way.
const FIXED_MS: f64 = 10.0;
/// How far below the line's hold a reported figure may go: the coarsest resolution on
/// the way (netmeter's 8 µs histogram buckets at 10-20 ms), with room for rounding.
const RESOLUTION_MS: f64 = 0.02;
/// How far above the line's mean hold a reported mean may go: the hosts' own share,
/// half the line's one-way delay (see the module's head).
const HOST_SHARE_MS: f64 = FIXED_MS / 2.0;
/// How far apart two clients' means of the same writes may be (Nagle on): the wait
/// itself is 4-5 ms here, so a client that did not wait would be that far off.
const SAME_WRITES_MS: f64 = 2.0;
/// Runs of a case before it fails: a busy host stalls one now and then.
const RUNS: usize = 4;
/// Bound for one run (3 s of test plus setup and the end exchange).
const RUN_TIMEOUT: Duration = Duration::from_secs(40);
const IPERF2_PORT: u16 = 5001;
const NETMETER_PORT: u16 = 5201;

fn delay_bed() -> Netbed {
    bed(LinkConfig::new().delay_ms(FIXED_MS))
}

/// The line's hold times (ms) of the packets of `proto` in `dir` to or from `port`.
fn holds_ms(d: &DirStats, proto: u8, port: u16) -> Vec<f64> {
    d.records
        .iter()
        .filter(|r| r.proto == proto && (r.src_port == port || r.dst_port == port))
        .filter_map(|r| r.actual.map(|a| a.as_secs_f64() * 1e3))
        .collect()
}

/// (min, mean) of the line's hold times, or an error naming `what` if it logged none.
fn min_mean(v: &[f64], what: &str) -> Result<(f64, f64), String> {
    if v.is_empty() {
        return Err(format!("the line logged no packets of {what}"));
    }
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    Ok((min, v.iter().sum::<f64>() / v.len() as f64))
}

/// What the line did in one run: per direction, the (min, mean) hold of `proto`'s
/// packets on `port`, as the line measured each hold when it wrote the packet out (so
/// a line running late on a busy host is part of the truth, not an error in it); an
/// error if the line lost packets (then the run says nothing about the tools).
struct Line {
    up: (f64, f64),
    down: (f64, f64),
}

fn line_of(b: &Netbed, proto: u8, port: u16) -> Result<Line, String> {
    let st = b.delay_stats().ok_or("the bed has no delay line")?;
    let lost = b.delay_line_losses().map_err(|e| e.to_string())?;
    if lost > 0 {
        return Err(format!("the line lost {lost} packets"));
    }
    let up = min_mean(&holds_ms(st.dir(Dir::H1ToH2), proto, port), "h1 → h2")?;
    let down = min_mean(&holds_ms(st.dir(Dir::H2ToH1), proto, port), "h2 → h1")?;
    for (what, (min, _)) in [("h1 → h2", up), ("h2 → h1", down)] {
        if min < FIXED_MS - 0.05 {
            return Err(format!("the line held {what} only {min:.4} ms"));
        }
    }
    Ok(Line { up, down })
}

/// A figure against the line: `min` not below `line_min` (less the resolution), `mean`
/// (the tool's central figure: a mean, or netmeter's median round trip) not above
/// `line_mean` plus the hosts' share, nor below the minimum.
fn against_line(
    what: &str,
    (min, mean): (f64, f64),
    (line_min, line_mean): (f64, f64),
) -> Result<(), String> {
    let msg = format!(
        "{what}: min {min:.4} mean {mean:.4} ms; the line held min {line_min:.4} mean {line_mean:.4} ms"
    );
    eprintln!("{msg}");
    if min < line_min - RESOLUTION_MS {
        return Err(format!(
            "{msg}: the minimum undercuts the line by more than {RESOLUTION_MS} ms"
        ));
    }
    if mean > line_mean + HOST_SHARE_MS || mean < min {
        return Err(format!(
            "{msg}: the mean is outside min..line mean + {HOST_SHARE_MS} ms"
        ));
    }
    Ok(())
}

/// The `avg/min/max/stdev` (or `avg/min/max`) figures of the last line of `text` after
/// `after` (if given) that has them before a token `ms`: iperf 2's latency column, its
/// bounceback column (`N=avg/min/max/stdev`) and netmeter's one-way delay log line
/// (there `min/avg/max/stdev`, which the caller reorders).
fn slashed_ms(text: &str, after: Option<&str>) -> Option<Vec<f64>> {
    let from = after.map_or(Some(0), |a| text.rfind(a))?;
    text[from..].lines().rev().find_map(|line| {
        let t: Vec<&str> = line.split_whitespace().collect();
        t.windows(2).find_map(|w| {
            let fig = w[0].rsplit('=').next()?;
            let v: Vec<f64> = fig.split('/').filter_map(|x| x.parse().ok()).collect();
            (w[1] == "ms" && v.len() >= 3 && v.len() == fig.split('/').count()).then_some(v)
        })
    })
}

#[test]
fn slashed_figures_are_found_in_iperf2_rows() {
    let udp = "[  1] 0.0000-2.0014 sec  2.50 MBytes  10.5 Mbits/sec   0.004 ms 0/1785 (0%) 0.005/0.000/0.156/0.009 ms 595 pps";
    assert_eq!(slashed_ms(udp, None), Some(vec![0.005, 0.0, 0.156, 0.009]));
    let bb = "x\n[  1] 0.0000-2.0916 sec  3.91 KBytes  15.3 Kbits/sec    20=0.081/0.008/1.325/0.293 ms    0\n";
    assert_eq!(slashed_ms(bb, None), Some(vec![0.081, 0.008, 1.325, 0.293]));
    let report = "[  1] 0.0-1.0 sec 1.000/1.000/1.000/0 ms\n[  1] Server Report:\nhead\n[  1] 0.0-2.0 sec 10.1/10.0/10.5/0.1 ms\n";
    assert_eq!(
        slashed_ms(report, Some("Server Report:")),
        Some(vec![10.1, 10.0, 10.5, 0.1])
    );
    assert_eq!(slashed_ms("0.012 ms 0/891 (0%)", None), None);
}

/// An iperf 2.2.1 server (`-s -e`, `-u` if `udp`) in h2, line-buffered (piped, iperf 2
/// holds its lines until it exits), once it says it listens.
fn iperf2_server(b: &Netbed, udp: bool) -> NsChild {
    let iperf = peer(V221);
    let port = IPERF2_PORT.to_string();
    let mut args = vec!["-oL", &iperf, "-s", "-e", "-p", &port];
    if udp {
        args.push("-u");
    }
    let mut s = b
        .spawn_in(Side::H2, "stdbuf", &args)
        .expect("starting iperf 2");
    let what = if udp { "UDP" } else { "TCP" };
    s.wait_for_output(
        &format!("Server listening on {what} port"),
        Duration::from_secs(10),
    )
    .expect("iperf 2 listening");
    s
}

/// netmeter's client in h1 against the iperf 2 server, `-J`, with `args`.
fn netmeter_client(b: &Netbed, args: &[&str]) -> Result<Value, String> {
    let mut cmd = b.cmd(Side::H1, crate::support::netmeter());
    cmd.args(["-c", &b.h2_addr().to_string(), "--iperf2", "-J"])
        .args(args);
    let out = run_bounded(&mut cmd, RUN_TIMEOUT, &format!("netmeter {args:?}"));
    if !out.status.success() {
        return Err(format!("netmeter {args:?} failed: {}", show(&out)));
    }
    Ok(json_of(&out, "netmeter"))
}

/// What `p` printed (stdout then stderr) once `done` says it holds the evidence
/// awaited (`what`), or an error after a generous 15 s.
fn await_output(p: &NsChild, what: &str, done: impl Fn(&str) -> bool) -> Result<String, String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let text = all_out(p);
        if done(&text) {
            return Ok(text);
        }
        if std::time::Instant::now() > deadline {
            return Err(format!("no {what} within 15 s:\n{text}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The iperf 2 server's latency row once it has printed one (`-e`: its whole-test row
/// comes when the test ends): `avg/min/max/stdev` in ms.
fn server_latency(s: &NsChild) -> Result<Vec<f64>, String> {
    let text = await_output(s, "latency row from iperf 2", |t| {
        slashed_ms(t, None).is_some()
    })?;
    slashed_ms(&text, None).ok_or(text)
}

/// What a process printed so far, stdout then stderr (netmeter's server logs to either).
fn all_out(p: &NsChild) -> String {
    format!("{}{}", p.stdout_now(), p.stderr_now())
}

fn num(v: &Value, ptr: &str) -> Result<f64, String> {
    v.pointer(ptr)
        .and_then(Value::as_f64)
        .ok_or_else(|| format!("no number at {ptr} in {v}"))
}

/// netmeter's client (`--iperf2`) against iperf 2.2.1's server across the line:
/// UDP `--trip-times` (the server's latency row, the transit netmeter shows from the
/// server's report, and the line's h1 → h2 holds), TCP `--trip-times` (the server's
/// per-write latency; over TCP iperf 2 sends nothing back, so it and the line) and
/// `--bounceback` (netmeter's round trips and the line's holds both ways).
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces) and the iperf 2 peer"
)]
fn netmeter_client_and_iperf2_server_agree_with_the_line() {
    let _t = timing_lock();
    let b = delay_bed();
    passes_once_in(RUNS, "UDP --trip-times to iperf 2's server", || {
        let s = iperf2_server(&b, true);
        b.reset_delay_stats();
        let args = ["-u", "--trip-times", "-b", "2M", "-l", "1000", "-t", "3"];
        let v = netmeter_client(&b, &args)?;
        let theirs = server_latency(&s)?;
        let line = line_of(&b, 17, IPERF2_PORT)?;
        let t = "/end/streams/0/udp/netmeter/transit";
        let ours = (
            num(&v, &format!("{t}/min_ms"))?,
            num(&v, &format!("{t}/mean_ms"))?,
        );
        let max = num(&v, &format!("{t}/max_ms"))?;
        let what = format!(
            "iperf 2 server avg/min/max {theirs:?}, netmeter's transit min/mean/max {ours:?}/{max}"
        );
        eprintln!("{what}");
        if (theirs[1] - ours.0).abs() > 0.0015 || (theirs[2] - max).abs() > 0.0015 {
            return Err(format!("{what}: min or max differ"));
        }
        if (theirs[0] - ours.1).abs() > 0.0015 {
            return Err(format!("{what}: the means differ"));
        }
        against_line("UDP one-way delay (netmeter → iperf 2)", ours, line.up)
    });
    passes_once_in(RUNS, "TCP --trip-times to iperf 2's server", || {
        let s = iperf2_server(&b, false);
        b.reset_delay_stats();
        let args = ["--trip-times", "-N", "-b", "2M", "-l", "1000", "-t", "3"];
        netmeter_client(&b, &args)?;
        let theirs = server_latency(&s)?;
        let line = line_of(&b, 6, IPERF2_PORT)?;
        if !s.stdout_now().contains("(trip-times)") {
            return Err(format!("not a trip-times test:\n{}", s.stdout_now()));
        }
        against_line(
            "TCP write one-way delay (netmeter → iperf 2)",
            (theirs[1], theirs[0]),
            line.up,
        )
    });
    passes_once_in(RUNS, "--bounceback to iperf 2's server", || {
        let _s = iperf2_server(&b, false);
        b.reset_delay_stats();
        let v = netmeter_client(&b, &["--bounceback", "--bounceback-burst", "10", "-t", "3"])?;
        let line = line_of(&b, 6, IPERF2_PORT)?;
        let rtt = "/end/netmeter/bounceback/rtt";
        let n = num(&v, "/end/netmeter/bounceback/transactions")?;
        if n < 10.0 {
            return Err(format!("{n} round trips in 3 s at 10 a second: {v}"));
        }
        // The median: 30 round trips, of which one stalled 5 ms on this busy host
        // moved the mean by 0.2 ms (seen: p50 20.37, mean 20.69, max 25.79 ms).
        eprintln!(
            "netmeter's round trips: {}",
            v.pointer(rtt).unwrap_or(&Value::Null)
        );
        let ours = (
            num(&v, &format!("{rtt}/min_ms"))?,
            num(&v, &format!("{rtt}/p50_ms"))?,
        );
        against_line(
            "bounceback round trip (netmeter → iperf 2)",
            ours,
            (line.up.0 + line.down.0, line.up.1 + line.down.1),
        )
    });
}

/// iperf 2.2.1's client against netmeter's server across the line: UDP `--trip-times`
/// (the Server Report iperf 2 prints is what netmeter's server measured and sent back:
/// against the line's h1 → h2 holds; with `-R`, what iperf 2 measured of netmeter's
/// datagrams, against the h2 → h1 holds), TCP `--trip-times` (netmeter's server's one-way
/// delay log line; with `-R`, iperf 2's write latency of netmeter's writes, against the
/// h2 → h1 holds) and `--bounceback` (iperf 2's round trips, both ways' holds).
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces) and the iperf 2 peer"
)]
fn iperf2_client_and_netmeter_server_agree_with_the_line() {
    let _t = timing_lock();
    let b = delay_bed();
    let mut server = b
        .spawn_in(Side::H2, crate::support::netmeter(), &["-s"])
        .expect("starting netmeter's server");
    server
        .wait_for_output("Server listening", Duration::from_secs(10))
        .expect("netmeter listening");
    let iperf2 = |args: &[&str]| -> Result<String, String> {
        let mut cmd = b.cmd(Side::H1, peer(V221));
        cmd.args([
            "-c",
            &b.h2_addr().to_string(),
            "-p",
            &NETMETER_PORT.to_string(),
            "-e",
        ])
        .args(args);
        let out = run_bounded(&mut cmd, RUN_TIMEOUT, &format!("iperf 2 {args:?}"));
        if !out.status.success() {
            return Err(format!("iperf 2 {args:?} failed: {}", show(&out)));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    // iperf 2's figures after `after` (its Server Report) or its last ones, in ms.
    let figures = |args: &[&str], after: Option<&str>| -> Result<Vec<f64>, String> {
        let text = iperf2(args)?;
        slashed_ms(&text, after).ok_or_else(|| format!("no figures in iperf 2's output:\n{text}"))
    };
    passes_once_in(RUNS, "UDP --trip-times from iperf 2's client", || {
        b.reset_delay_stats();
        let args = ["-u", "--trip-times", "-b", "2M", "-l", "1000", "-t", "3"];
        let r = figures(&args, Some("Server Report:"))?;
        let line = line_of(&b, 17, NETMETER_PORT)?;
        let what = "UDP one-way delay (iperf 2 → netmeter, its server report)";
        against_line(what, (r[1], r[0]), line.up)
    });
    // -R: netmeter's server sends, iperf 2's client times each datagram from its send
    // time to its arrival (h2 → h1), which must be the line's. The server's start
    // datagram (its start time, sequence 0) goes first, so iperf 2 keeps --trip-times
    // and counts as lost only what the line lost: none (without it, 1 of 788).
    passes_once_in(RUNS, "UDP -R --trip-times from iperf 2's client", || {
        b.reset_delay_stats();
        let args = [
            "-u",
            "-R",
            "--trip-times",
            "-b",
            "2M",
            "-l",
            "1000",
            "-t",
            "3",
        ];
        let text = iperf2(&args)?;
        let line = line_of(&b, 17, NETMETER_PORT)?;
        if text.contains("ignore --trip-times") || !text.contains(" 0/") {
            return Err(format!(
                "iperf 2 ignored --trip-times or counted a loss the line did not have:\n{text}"
            ));
        }
        let r = slashed_ms(&text, None)
            .ok_or_else(|| format!("no figures in iperf 2's output:\n{text}"))?;
        against_line(
            "UDP one-way delay (netmeter → iperf 2, -R)",
            (r[1], r[0]),
            line.down,
        )
    });
    passes_once_in(RUNS, "TCP --trip-times from iperf 2's client", || {
        let before = all_out(&server)
            .matches("one-way delay (--trip-times)")
            .count();
        b.reset_delay_stats();
        iperf2(&["--trip-times", "-N", "-b", "2M", "-l", "1000", "-t", "3"])?;
        let needle = "one-way delay (--trip-times)";
        let log = await_output(&server, "one-way delay line from netmeter", |t| {
            t.matches(needle).count() > before
        })?;
        let line = line_of(&b, 6, NETMETER_PORT)?;
        let mm = slashed_ms(&log, Some(needle))
            .ok_or_else(|| format!("no figures in netmeter's one-way delay line:\n{log}"))?;
        // netmeter's log line is min/avg/max/stdev.
        against_line(
            "TCP write one-way delay (iperf 2 → netmeter)",
            (mm[0], mm[1]),
            line.up,
        )
    });
    // TCP -R: netmeter's server sends iperf 2's test header with its start time and a
    // head on each write; iperf 2's client times each write (h2 → h1). At 10 writes a
    // second each write leaves before the next is due, so Nagle holds none of them.
    passes_once_in(RUNS, "TCP -R --trip-times from iperf 2's client", || {
        b.reset_delay_stats();
        let args = ["-R", "--trip-times", "-b", "80k", "-l", "1000", "-t", "3"];
        let text = iperf2(&args)?;
        if text.contains("ignore --trip-times") {
            return Err(format!("iperf 2 ignored --trip-times:\n{text}"));
        }
        let r = slashed_ms(&text, None)
            .ok_or_else(|| format!("no figures in iperf 2's output:\n{text}"))?;
        let line = line_of(&b, 6, NETMETER_PORT)?;
        against_line(
            "TCP write one-way delay (netmeter → iperf 2, -R)",
            (r[1], r[0]),
            line.down,
        )
    });
    passes_once_in(RUNS, "--bounceback from iperf 2's client", || {
        b.reset_delay_stats();
        let r = figures(&["--bounceback", "-t", "3"], None)?;
        let line = line_of(&b, 6, NETMETER_PORT)?;
        against_line(
            "bounceback round trip (iperf 2 → netmeter)",
            (r[1], r[0]),
            (line.up.0 + line.down.0, line.up.1 + line.down.1),
        )
    });
    server.terminate();
    let _ = server.finish(Duration::from_secs(5));
}

/// With Nagle on (no `-N`, as iperf 2's client writes by default), a TCP
/// `--trip-times` write waits in the sender for the ACK of the one before, and the
/// iperf 2 server's write latency counts that wait: netmeter's client (`--iperf2`)
/// and iperf 2.2.1's own client, the same writes at the same rate across the same
/// line, give the server the same mean latency (seen: 14.7 and 14.6, 14.3 and 14.4
/// ms, against the line's 10.1), within [`SAME_WRITES_MS`]; neither is below the line.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces) and the iperf 2 peer"
)]
fn with_nagle_on_netmeters_tcp_writes_wait_as_iperf2s_own_do() {
    let _t = timing_lock();
    let b = delay_bed();
    let args = ["--trip-times", "-b", "2M", "-l", "1000", "-t", "3"];
    passes_once_in(RUNS, "TCP --trip-times with Nagle on, both clients", || {
        let s = iperf2_server(&b, false);
        b.reset_delay_stats();
        let mut cmd = b.cmd(Side::H1, peer(V221));
        cmd.args([
            "-c",
            &b.h2_addr().to_string(),
            "-p",
            &IPERF2_PORT.to_string(),
        ])
        .args(args);
        let out = run_bounded(&mut cmd, RUN_TIMEOUT, "iperf 2's client");
        if !out.status.success() {
            return Err(format!("iperf 2's client failed: {}", show(&out)));
        }
        let theirs = server_latency(&s)?;
        let line = line_of(&b, 6, IPERF2_PORT)?;
        against_line(
            "iperf 2's client, Nagle on",
            (theirs[1], theirs[0]),
            (line.up.0, f64::INFINITY),
        )?;
        drop(s);
        let s = iperf2_server(&b, false);
        netmeter_client(&b, &args)?;
        let ours = server_latency(&s)?;
        against_line(
            "netmeter's client, Nagle on",
            (ours[1], ours[0]),
            (line.up.0, f64::INFINITY),
        )?;
        if (ours[0] - theirs[0]).abs() > SAME_WRITES_MS {
            return Err(format!(
                "the iperf 2 server's mean write latency: {:.3} ms from netmeter, {:.3} ms from iperf 2's own client",
                ours[0], theirs[0]
            ));
        }
        Ok(())
    });
}
