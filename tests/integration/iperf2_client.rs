//! netmeter as a client of real iperf 2 servers (`--iperf2`): Debian bookworm's 2.1.8
//! and trixie's 2.2.1, TCP and UDP, judged by what the iperf 2 server itself prints
//! (its `-y C` lines, one per stream): for TCP its byte count is what netmeter sent on
//! that connection; for UDP its datagram total is what netmeter sent (the FIN
//! included, as iperf 2 counts it), its bytes are the datagrams that arrived, and
//! netmeter's receiver figures (bytes, lost/total, out of order) are the server's
//! report, number for number.

use crate::support::*;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

const V218: &str = "NETMETER_IPERF2_218";
const V221: &str = "NETMETER_IPERF2_221";

/// An iperf 2 server on 127.0.0.1:`port` printing `-y C` lines, line-buffered through
/// `stdbuf` (piped, iperf 2 holds its UDP lines until it exits), once it listens.
fn iperf2_server(key: &str, port: u16, udp: bool) -> (Proc, Drained) {
    iperf2_server_styled(key, port, udp, &["-y", "C"])
}

/// The same printing `style` (`-y C`, or `-e` for its enhanced text).
pub(crate) fn iperf2_server_styled(
    key: &str,
    port: u16,
    udp: bool,
    style: &[&str],
) -> (Proc, Drained) {
    let mut p = Proc::spawn(
        key,
        Command::new("stdbuf")
            .args(["-oL", &peer(key), "-s", "-B", "127.0.0.1"])
            .args(style)
            .args(["-p", &port.to_string()])
            .args(if udp { &["-u"][..] } else { &[][..] }),
    );
    let d = p.drain();
    let pid = p.pid();
    match udp {
        true => await_evidence(
            &format!("{key} bound to UDP port {port}"),
            || udp_bound(pid, port),
            || d.text(),
        ),
        false => await_tcp_listening(pid, port),
    }
    (p, d)
}

/// One stream as the iperf 2 server's CSV line gives it (`id` > 0; 2.2.1 adds sum
/// lines with negative ids and column titles): the sending and receiving ports (the
/// server's port first when it sent: `-R`, `--bidir`), bytes and, for UDP, lost, total
/// and out-of-order datagrams.
#[derive(Debug)]
struct ServerLine {
    from_port: u16,
    to_port: u16,
    bytes: u64,
    udp: Option<(u64, u64, u64)>,
}

fn server_lines(text: &str) -> Vec<ServerLine> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.trim().split(',').collect();
            if f.len() < 9 || f[5].parse::<i64>().ok()? <= 0 {
                return None;
            }
            let udp = (f.len() >= 14).then(|| {
                let n = |i: usize| f[i].parse::<u64>().unwrap_or(u64::MAX);
                (n(10), n(11), n(13))
            });
            Some(ServerLine {
                from_port: f[2].parse().ok()?,
                to_port: f[4].parse().ok()?,
                bytes: f[7].parse().ok()?,
                udp,
            })
        })
        .collect()
}

/// Run `netmeter -c 127.0.0.1 -p PORT --iperf2 -J ARGS` against a fresh iperf 2
/// server; netmeter's document and the server's lines, once it has printed one per
/// stream.
fn run_against(key: &str, args: &[&str]) -> (Value, Vec<ServerLine>, u16) {
    run_against_server(key, &["-y", "C"], args)
}

/// [`run_against`] a server started with `server_args` (its CSV style among them).
fn run_against_server(
    key: &str,
    server_args: &[&str],
    args: &[&str],
) -> (Value, Vec<ServerLine>, u16) {
    let udp = args.contains(&"-u");
    let port = free_port();
    let (server, d) = iperf2_server_styled(key, port, udp, server_args);
    let out = run(
        Command::new(netmeter())
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "--iperf2", "-J"])
            .args(args),
        Duration::from_secs(60),
    );
    let v = json_of(&out, "netmeter");
    assert!(out.status.success(), "netmeter failed:\n{}", show(&out));
    assert!(v.get("error").is_none(), "netmeter error: {}", v["error"]);
    let streams = v["end"]["streams"].as_array().map_or(0, |s| s.len());
    assert!(
        streams > 0,
        "no streams in netmeter's document:\n{}",
        show(&out)
    );
    await_evidence(
        &format!("{key}'s line for each of {streams} streams"),
        || server_lines(&d.text()).len() >= streams,
        || d.text(),
    );
    let lines = server_lines(&d.text());
    drop(server);
    assert_eq!(
        v["start"]["netmeter"]["peer"], "iperf 2",
        "start.netmeter.peer"
    );
    (v, lines, port)
}

/// netmeter's stream of socket label `socket`: its local port (`start.connected`).
fn local_port(v: &Value, socket: &Value) -> u16 {
    v["start"]["connected"]
        .as_array()
        .and_then(|c| c.iter().find(|c| &c["socket"] == socket))
        .and_then(|c| c["local_port"].as_u64())
        .expect("the stream's start.connected entry") as u16
}

/// The server's line for what it received from client port `port`.
fn line_for(lines: &[ServerLine], port: u16) -> &ServerLine {
    lines
        .iter()
        .find(|l| l.from_port == port)
        .unwrap_or_else(|| panic!("no server line for client port {port}: {lines:?}"))
}

/// The server's line for what it sent from its port `server` to client port `port`.
fn sent_line(lines: &[ServerLine], server: u16, port: u16) -> &ServerLine {
    lines
        .iter()
        .find(|l| l.from_port == server && l.to_port == port)
        .unwrap_or_else(|| panic!("no server line for sending to port {port}: {lines:?}"))
}

/// TCP: each connection's bytes on the server are the bytes netmeter sent on it (the
/// test header included: iperf 2's server counts it).
fn check_tcp(key: &str, args: &[&str]) {
    check_tcp_to(key, &["-y", "C"], args)
}

/// [`check_tcp`] against a server started with `server_args`.
fn check_tcp_to(key: &str, server_args: &[&str], args: &[&str]) {
    let (v, lines, _) = run_against_server(key, server_args, args);
    for s in v["end"]["streams"].as_array().unwrap() {
        let sent = s["sender"]["bytes"].as_u64().expect("sender bytes");
        let l = line_for(&lines, local_port(&v, &s["sender"]["socket"]));
        assert_eq!(
            l.bytes, sent,
            "{key} {args:?}: server bytes vs netmeter's sent"
        );
        assert!(sent > 60, "{key} {args:?}: only {sent} bytes sent");
    }
}

/// TCP with the server sending (`-R`, `--bidir`): what netmeter received on each
/// connection is what the server sent on it, all of it with `exact` (a `-n` test, which
/// the server ends itself), else at most that (a timed test ends at netmeter's clock,
/// with the server's last bytes in flight); with `--bidir` what netmeter sent the server
/// received, to the byte.
fn check_tcp_server_sends(key: &str, args: &[&str], exact: bool) {
    let (v, lines, server) = run_against(key, args);
    let mut received = 0;
    for s in v["end"]["streams"].as_array().unwrap() {
        let what = format!("{key} {args:?}: {s}, server lines {lines:?}");
        let sender = &s["sender"];
        if let Some(sent) = sender["bytes"]
            .as_u64()
            .filter(|_| sender["sender"] == true)
        {
            let l = line_for(&lines, local_port(&v, &sender["socket"]));
            assert_eq!(l.bytes, sent, "{what}: server received vs netmeter sent");
        }
        if let Some(got) = s["receiver"]["bytes"].as_u64() {
            let l = sent_line(&lines, server, local_port(&v, &s["receiver"]["socket"]));
            match exact {
                true => assert_eq!(got, l.bytes, "{what}: netmeter received vs server sent"),
                false => assert!(got <= l.bytes && got > 0, "{what}"),
            }
            received += 1;
        }
    }
    assert!(received > 0, "{key} {args:?}: no receiving stream in {v}");
}

/// UDP: netmeter's receiver figures are the server's own; with `exact` (one stream,
/// fixed-size datagrams) also the server's total is what netmeter sent and its bytes
/// are the datagrams that arrived.
fn check_udp(key: &str, args: &[&str], len: u64, exact: bool) {
    let (v, lines, _) = run_against(key, args);
    for s in v["end"]["streams"].as_array().unwrap() {
        let u = &s["udp"];
        let l = line_for(&lines, local_port(&v, &u["socket"]));
        let (lost, total, ooo) = l.udp.expect("a UDP server line");
        let what = format!("{key} {args:?}: server line {l:?}, netmeter {u}");
        assert_eq!(
            u["netmeter"]["receiver_bytes"].as_u64(),
            Some(l.bytes),
            "{what}"
        );
        assert_eq!(u["lost_packets"].as_u64(), Some(lost), "{what}");
        assert_eq!(u["out_of_order"].as_u64(), Some(ooo), "{what}");
        assert_eq!(u["packets"].as_u64(), Some(total), "{what}");
        assert!(total > 10, "{what}");
        if exact {
            let sent = u["bytes"].as_u64().unwrap();
            assert_eq!(sent % len, 0, "{what}: datagrams of {len} bytes");
            assert_eq!(sent / len, total, "{what}: datagrams sent vs server total");
            assert_eq!(l.bytes, (total - lost) * len, "{what}: bytes that arrived");
        }
    }
}

iperf2_peer_test!(
    tcp_parallel_timed_218,
    check_tcp(V218, &["-t", "2", "-P", "2", "-l", "64K"])
);
iperf2_peer_test!(
    tcp_parallel_timed_221,
    check_tcp(V221, &["-t", "2", "-P", "2", "-l", "64K"])
);
iperf2_peer_test!(
    tcp_bytes_paced_218,
    check_tcp(V218, &["-n", "3M", "-b", "40M"])
);
iperf2_peer_test!(
    tcp_bytes_paced_221,
    check_tcp(V221, &["-n", "3M", "-b", "40M"])
);
// A server reading through a small window leaves the end of the test in netmeter's
// send queue. 2.2.1 (and 2.1.8) answer netmeter's extended header with an
// acknowledgement on the connection; closed with it unread, the socket was reset and the
// queued end never sent: the server counted up to a few hundred kB less than netmeter.
iperf2_peer_test!(
    tcp_small_window_timed_218,
    check_tcp_to(V218, &["-y", "C", "-w", "16K"], &["-t", "1"])
);
iperf2_peer_test!(
    tcp_small_window_timed_221,
    check_tcp_to(V221, &["-y", "C", "-w", "16K"], &["-t", "1"])
);
iperf2_peer_test!(
    tcp_reverse_bytes_218,
    check_tcp_server_sends(V218, &["-R", "-n", "3M"], true)
);
iperf2_peer_test!(
    tcp_reverse_bytes_221,
    check_tcp_server_sends(V221, &["-R", "-n", "3M"], true)
);
iperf2_peer_test!(
    tcp_full_duplex_218,
    check_tcp_server_sends(V218, &["--bidir", "-t", "2", "-P", "2"], false)
);
iperf2_peer_test!(
    tcp_full_duplex_221,
    check_tcp_server_sends(V221, &["--bidir", "-t", "2", "-P", "2"], false)
);
iperf2_peer_test!(
    udp_timed_218,
    check_udp(
        V218,
        &["-u", "-b", "10M", "-t", "2", "-l", "1200"],
        1200,
        true
    )
);
iperf2_peer_test!(
    udp_timed_221,
    check_udp(
        V221,
        &["-u", "-b", "10M", "-t", "2", "-l", "1200"],
        1200,
        true
    )
);
iperf2_peer_test!(
    udp_parallel_218,
    check_udp(V218, &["-u", "-b", "4M", "-t", "2", "-P", "2"], 1470, false)
);
iperf2_peer_test!(
    udp_parallel_221,
    check_udp(V221, &["-u", "-b", "4M", "-t", "2", "-P", "2"], 1470, false)
);

/// Quick tier: the options an iperf 2 server cannot serve are refused in one sentence
/// naming them, before anything is sent.
#[test]
fn refusals_name_the_option() {
    for (args, needle) in [
        (&["-k", "10"][..], "-k"),
        (&["-u", "-l", "50"][..], "-l must be at least 76"),
        (&["-u", "--bounceback"][..], "--bounceback"),
        (&["--trip-times", "-l", "80"][..], "at least 92"),
        (&["--isochronous", "--bidir"][..], "--bidir"),
        (&["-u", "--trip-times", "-l", "100"][..], "at least 128"),
        (&["--bounceback", "-P", "2"][..], "-P"),
    ] {
        let mut a = vec!["--iperf2"];
        a.extend_from_slice(args);
        let e = usage_error(&a);
        assert!(e.contains(needle), "{args:?}: {e}");
    }
}

/// `netmeter iperf2 -c 127.0.0.1 -p PORT ARGS` (iperf 2's command line) against a fresh
/// iperf 2 server: netmeter's output and the server's lines, once it has printed `streams`.
fn iperf2_cli_against(key: &str, args: &[&str], streams: usize) -> (String, Vec<ServerLine>) {
    let udp = args.contains(&"-u");
    let port = free_port();
    let (server, d) = iperf2_server(key, port, udp);
    let out = run(
        Command::new(netmeter())
            .args(["iperf2", "-c", "127.0.0.1", "-p", &port.to_string()])
            .args(args),
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "netmeter iperf2 failed:\n{}",
        show(&out)
    );
    await_evidence(
        &format!("{key}'s line for each of {streams} streams"),
        || server_lines(&d.text()).len() >= streams,
        || d.text(),
    );
    let lines = server_lines(&d.text());
    drop(server);
    (String::from_utf8_lossy(&out.stdout).into_owned(), lines)
}

/// The whole-test CSV line of `netmeter iperf2 -y C` for stream `id`: its local port,
/// bytes and, for UDP, lost and total datagrams (iperf 2's client columns).
fn whole_test_csv(text: &str, id: i64) -> (u16, u64, Option<(u64, u64)>) {
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.trim().split(',').collect::<Vec<_>>())
        .filter(|f| f.len() >= 9 && f[5].parse::<i64>().ok() == Some(id))
        .collect();
    // The whole test's line is the last of the stream's (its interval starts at 0).
    let f = rows
        .iter()
        .rev()
        .find(|f| f[6].starts_with("0.0-"))
        .unwrap_or_else(|| panic!("no whole-test CSV line for stream {id}:\n{text}"));
    let udp = (f.len() >= 14).then(|| (f[10].parse().unwrap(), f[11].parse().unwrap()));
    (f[2].parse().unwrap(), f[7].parse().unwrap(), udp)
}

/// TCP through iperf 2's command line: the server's byte count for each connection is
/// what `netmeter iperf2 -y C` reports it sent, to the byte.
fn check_cli_tcp(key: &str) {
    let (text, lines) = iperf2_cli_against(key, &["-y", "C", "-t", "2", "-P", "2"], 2);
    for id in 1..=2 {
        let (port, sent, _) = whole_test_csv(&text, id);
        let l = line_for(&lines, port);
        assert_eq!(
            l.bytes, sent,
            "{key}: server bytes vs netmeter's, stream {id}:\n{text}"
        );
        assert!(sent > 60, "{key}: only {sent} bytes sent");
    }
}

/// UDP through iperf 2's command line: the server's bytes, lost and total datagrams are
/// the server report `netmeter iperf2 -y C` printed (iperf 2 prints the server's report
/// as the client's whole-test line when it has one).
fn check_cli_udp(key: &str) {
    let (text, lines) = iperf2_cli_against(
        key,
        &["-u", "-y", "C", "-b", "5m", "-t", "2", "-l", "1000"],
        1,
    );
    let (port, _, _) = whole_test_csv(&text, 1);
    let l = line_for(&lines, port);
    let (lost, total, _) = l.udp.expect("a UDP server line");
    assert!(total > 10, "{key}: {l:?}");
    // What the server received is what arrived of the datagrams netmeter sent.
    assert_eq!(l.bytes, (total - lost) * 1000, "{key}: {l:?}");
    let shown = text
        .lines()
        .filter(|x| x.split(',').nth(2) == Some(&port.to_string()))
        .any(|x| {
            let f: Vec<&str> = x.split(',').collect();
            f.len() >= 14 && f[10] == lost.to_string() && f[11] == total.to_string()
        });
    assert!(
        shown,
        "{key}: the server's {lost}/{total} is not in netmeter's lines:\n{text}"
    );
}

/// `netmeter iperf2 -c -e` has iperf 2.2.1's layout while talking to a real iperf 2.
fn check_cli_shape(key: &str, args: &[&str], capture: &str) {
    let (text, lines) = iperf2_cli_against(key, args, 1);
    assert!(!lines.is_empty());
    let p = format!(
        "{}/src/report/testdata/iperf2/{capture}.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let want = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
    use netmeter::report::iperf2::shape::shapes;
    assert_eq!(
        shapes(&want),
        shapes(&text),
        "{key}: netmeter iperf2's output has not iperf 2.2.1's shape ({capture}):\n{text}"
    );
}

iperf2_peer_test!(cli_tcp_218, check_cli_tcp(V218));
iperf2_peer_test!(cli_tcp_221, check_cli_tcp(V221));
iperf2_peer_test!(cli_udp_218, check_cli_udp(V218));
iperf2_peer_test!(cli_udp_221, check_cli_udp(V221));
iperf2_peer_test!(
    cli_tcp_enhanced_shape_221,
    check_cli_shape(V221, &["-e", "-i", "1", "-t", "2"], "tcp.client")
);
iperf2_peer_test!(
    cli_tcp_plain_shape_218,
    check_cli_shape(V218, &["-i", "1", "-t", "2"], "tcp_plain.client")
);
iperf2_peer_test!(
    cli_udp_plain_shape_221,
    check_cli_shape(
        V221,
        &["-u", "-b", "10m", "-i", "1", "-t", "2"],
        "udp_plain.client"
    )
);
iperf2_peer_test!(
    cli_udp_csv_shape_218,
    check_cli_shape(
        V218,
        &["-u", "-y", "C", "-b", "10m", "-i", "1", "-t", "2"],
        "udp_csv.client"
    )
);

/// Bounceback against a real iperf 2 server: iperf 2's period (a burst a second, not
/// back to back), the hold the server applied (no round trip shorter than it; 2.1.8
/// applies it, 2.2.1's server reads it but no longer waits: its `Server.cpp` has no
/// delay), and what the server itself counted: each completed transaction's request
/// and reply (a request cut off by the test's end may add one more).
fn check_bounceback(key: &str, holds: bool) {
    let (v, lines, _) = run_against(
        key,
        &[
            "--bounceback",
            "--bounceback-burst",
            "5",
            "--bounceback-hold",
            "2",
            "-t",
            "2.5",
        ],
    );
    let bb = &v["end"]["netmeter"]["bounceback"];
    let n = bb["transactions"].as_u64().expect("transactions");
    assert!(
        (5..=15).contains(&n),
        "{key}: {n} transactions in 2.5 s, bursts of 5 a second: {bb}"
    );
    let min = bb["rtt"]["min_ms"].as_f64().expect("rtt min");
    assert!(
        !holds || min >= 2.0,
        "{key}: a round trip of {min} ms under the 2 ms hold: {bb}"
    );
    let l = lines.first().expect("the server's line");
    let per = 200; // 100-byte requests and replies
    assert!(
        l.bytes == n * per || l.bytes == (n + 1) * per,
        "{key}: the server counted {} bytes for {n} transactions of {per}",
        l.bytes
    );
}

iperf2_peer_test!(bounceback_218, check_bounceback(V218, true));
iperf2_peer_test!(bounceback_221, check_bounceback(V221, false));

/// The `a/b/c/d` (or `a/b/c`) figures of `line` just before the token `ms` that follows
/// them: iperf 2's latency column, netmeter's transit.
fn slashed_ms(line: &str) -> Option<Vec<f64>> {
    let t: Vec<&str> = line.split_whitespace().collect();
    t.windows(2).find_map(|w| {
        let v: Vec<f64> = w[0].split('/').filter_map(|x| x.parse().ok()).collect();
        (w[1] == "ms" && v.len() >= 3 && v.len() == w[0].split('/').count()).then_some(v)
    })
}

/// UDP `--trip-times` against a real iperf 2 server (`-e`): the server takes the test
/// as a trip-times one (its connection line says so), and the transit netmeter shows
/// from the server's report is the latency the server prints itself: the same minimum
/// and maximum, the mean within rounding.
fn check_udp_trip_times(key: &str) {
    let port = free_port();
    let (server, d) = iperf2_server_styled(key, port, true, &["-e"]);
    let out = run(
        Command::new(netmeter())
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "--iperf2"])
            .args(["-u", "-b", "5M", "-t", "2", "--trip-times"]),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "netmeter failed:\n{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let ours = text
        .lines()
        .find(|l| l.contains("iperf 2 server report") && l.contains("transit"))
        .and_then(|l| slashed_ms(l.split("transit").nth(1)?))
        .unwrap_or_else(|| panic!("{key}: no transit in netmeter's output:\n{text}"));
    let row = |t: &str| {
        t.lines()
            .find(|l| l.contains("0.0000-") && l.contains("pps"))
            .and_then(slashed_ms)
    };
    await_evidence(
        &format!("{key}'s row with its latency"),
        || row(&d.text()).is_some(),
        || d.text(),
    );
    let theirs = row(&d.text()).unwrap();
    let conn = d.text();
    drop(server);
    assert!(
        conn.contains("(trip-times)"),
        "{key}: not a trip-times test:\n{conn}"
    );
    let (avg, min, max) = (theirs[0], theirs[1], theirs[2]);
    let what = format!(
        "{key}: server avg/min/max {avg}/{min}/{max}, netmeter's transit min/mean/max {ours:?}"
    );
    assert_eq!(min, ours[0], "{what}");
    assert_eq!(max, ours[2], "{what}");
    assert!((avg - ours[1]).abs() <= 0.005 + avg * 0.05, "{what}");
}

/// `--txstart-time` against a real iperf 2 server: the server sees an epoch start
/// (its connection line says so) and netmeter's report recorded the start it waited for.
fn check_txstart(key: &str) {
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        + 2.0;
    let at = format!("{at:.3}");
    let port = free_port();
    let (server, d) = iperf2_server_styled(key, port, false, &["-e"]);
    let out = run(
        Command::new(netmeter())
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "--iperf2", "-J"])
            .args(["-t", "1", "--txstart-time", &at]),
        Duration::from_secs(60),
    );
    let v = json_of(&out, "netmeter");
    assert!(out.status.success(), "netmeter failed:\n{}", show(&out));
    await_evidence(
        &format!("{key}'s connection line"),
        || d.text().contains("connected with"),
        || d.text(),
    );
    let conn = d.text();
    drop(server);
    assert!(
        conn.contains("(epoch-start)"),
        "{key}: no epoch start:\n{conn}"
    );
    let ts = &v["start"]["netmeter"]["txstart"];
    assert_eq!(
        ts["requested"].as_f64().map(|r| format!("{r:.3}")),
        Some(at.clone()),
        "{key}: {ts}"
    );
    assert!(
        ts["started"].as_f64().unwrap() >= at.parse::<f64>().unwrap(),
        "{key}: {ts}"
    );
}

iperf2_peer_test!(udp_trip_times_218, check_udp_trip_times(V218));
iperf2_peer_test!(udp_trip_times_221, check_udp_trip_times(V221));
iperf2_peer_test!(txstart_218, check_txstart(V218));
iperf2_peer_test!(txstart_221, check_txstart(V221));

/// `-d`, iperf 2's dual test, through `netmeter iperf2 -c`: the server connects back
/// to netmeter's listener and sends while netmeter sends. Judged by the server's own
/// `-y C` lines: what it received from netmeter is what netmeter sent, to the byte;
/// what netmeter received on the connection the server opened is what the server sent
/// on it (at most: a timed test ends at netmeter's clock).
fn check_cli_dual(key: &str) {
    let (text, lines) = iperf2_cli_against(key, &["-d", "-y", "C", "-t", "2"], 2);
    let (up_port, sent, _) = whole_test_csv(&text, 1);
    let (back_port, got, _) = whole_test_csv(&text, 2);
    let what = format!("{key}: netmeter\n{text}\nserver {lines:?}");
    assert_eq!(line_for(&lines, up_port).bytes, sent, "{what}");
    let back = lines
        .iter()
        .find(|l| l.to_port == back_port)
        .unwrap_or_else(|| panic!("no server line sending to port {back_port}: {what}"));
    assert!(got > 0 && got <= back.bytes, "{what}");
}

iperf2_peer_test!(cli_dual_218, check_cli_dual(V218));
iperf2_peer_test!(cli_dual_221, check_cli_dual(V221));

/// `--bounceback-period` through `netmeter iperf2 -c` against a real iperf 2 server:
/// bursts of 2 every 0.2 s for 2 s are about 20 round trips (not a second's 4 to 6, not
/// back to back's thousands), as the server counted them (requests and replies); a
/// busy host may skip a few periods, so 8 bound it from below.
fn check_cli_bounceback_period(key: &str) {
    let (text, lines) = iperf2_cli_against(
        key,
        &[
            "--bounceback=2",
            "--bounceback-period",
            "0.2",
            "-t",
            "2",
            "-y",
            "C",
        ],
        1,
    );
    let l = lines.first().expect("the server's line");
    let transactions = l.bytes / 200;
    assert!(
        (8..=24).contains(&transactions),
        "{key}: {transactions} round trips in 2 s at 2 every 0.2 s: {l:?}\n{text}"
    );
}

iperf2_peer_test!(cli_bounceback_period_221, check_cli_bounceback_period(V221));

/// `netmeter iperf2 -c 127.0.0.1 -p PORT ARGS` against a fresh iperf 2 server started
/// with `-e`: netmeter's output, the server's, and the server's whole-test row (the
/// last row from 0.0000 holding `mark`), once it has printed it.
fn cli_against_enhanced(
    key: &str,
    udp: bool,
    args: &[&str],
    mark: &str,
) -> (String, String, String) {
    let port = free_port();
    let (server, d) = iperf2_server_styled(key, port, udp, &["-e"]);
    let out = run(
        Command::new(netmeter())
            .args(["iperf2", "-c", "127.0.0.1", "-p", &port.to_string()])
            .args(args),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "netmeter failed:\n{}", show(&out));
    let row = |t: &str| {
        t.lines()
            .rfind(|l| l.contains("0.0000-") && l.contains(mark))
            .map(str::to_string)
    };
    await_evidence(
        &format!("{key}'s whole-test row"),
        || row(&d.text()).is_some(),
        || d.text(),
    );
    let theirs = d.text();
    drop(server);
    let r = row(&theirs).unwrap_or_default();
    (String::from_utf8_lossy(&out.stdout).into_owned(), theirs, r)
}

/// `netmeter iperf2 -c -u -e` against a real iperf 2 server started with `-e`: its
/// Server Report row has the server's own latency (avg/min/max/stdev, as the server
/// prints it for the same test; the mean within a rounding step: the server prints
/// its final mean, the client the report's sum over its count), and "Sent N datagrams"
/// is what iperf 2's client prints for the same datagrams: the server's total and one
/// more (iperf 2's client counts its FIN and its reporter's end-of-test record).
fn check_cli_udp_server_report(key: &str) {
    let args = ["-u", "-e", "-b", "2m", "-t", "1", "-l", "1000"];
    let (text, _, theirs_row) = cli_against_enhanced(key, true, &args, " pps");
    let ours_row = text
        .lines()
        .skip_while(|l| !l.contains("Server Report:"))
        .nth(2)
        .unwrap_or_else(|| panic!("{key}: no Server Report row:\n{text}"));
    let what = format!("{key}: server\n{theirs_row}\nnetmeter\n{text}");
    let theirs = slashed_ms(&theirs_row).unwrap_or_else(|| panic!("{what}"));
    let ours = slashed_ms(ours_row).unwrap_or_else(|| panic!("no latency: {what}"));
    assert_eq!(theirs.len(), 4, "{what}");
    assert_eq!(ours.len(), 4, "{what}");
    assert_eq!(
        (ours[1], ours[2]),
        (theirs[1], theirs[2]),
        "min, max: {what}"
    );
    assert!((ours[0] - theirs[0]).abs() <= 0.0015, "avg: {what}");
    assert!((ours[3] - theirs[3]).abs() <= 0.0015, "stdev: {what}");
    // The server's total: `lost/total (` in its row.
    let total = |l: &str| -> u64 {
        l.split_whitespace()
            .find_map(|w| w.split_once('/').and_then(|(_, t)| t.parse().ok()))
            .unwrap_or_else(|| panic!("no lost/total in {l}"))
    };
    let sent: u64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("[  1] Sent ")?
                .strip_suffix(" datagrams")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no Sent line: {what}"));
    let theirs_total = total(theirs_row.split(" ms ").nth(1).unwrap_or(""));
    assert_eq!(sent, theirs_total + 1, "{what}");
}

iperf2_peer_test!(cli_udp_server_report_218, check_cli_udp_server_report(V218));
iperf2_peer_test!(cli_udp_server_report_221, check_cli_udp_server_report(V221));

/// TCP `--trip-times` through `netmeter iperf2 -c -e` against a real iperf 2 server
/// started with `-e`: the server takes the test as a trip-times one (its connection
/// line says so) and times every write by the head netmeter puts on it: its latency
/// row counts one burst per write netmeter made (`-n 2M -l 64K`: the 60-byte test
/// header, then 31 whole writes and a last one of the rest), each latency a real one
/// (above 0, under a generous 2 s on loopback).
fn check_cli_tcp_trip_times(key: &str) {
    let args = ["-e", "-n", "2M", "-l", "64K", "--trip-times"];
    let (ours, text, theirs) = cli_against_enhanced(key, false, &args, " ms (");
    let what = format!("{key}: server\n{text}\nnetmeter\n{ours}");
    assert!(
        text.contains("(trip-times)"),
        "not a trip-times test: {what}"
    );
    let lat = slashed_ms(&theirs).unwrap_or_else(|| panic!("no latency: {what}"));
    assert_eq!(lat.len(), 4, "{what}");
    let (avg, min, max) = (lat[0], lat[1], lat[2]);
    assert!(
        min > 0.0 && min <= avg && avg <= max && max < 2000.0,
        "{what}"
    );
    let count: u64 = theirs
        .split(" ms (")
        .nth(1)
        .and_then(|t| t.split('/').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no (cnt/size): {what}"));
    let writes = (2u64 * 1024 * 1024 - 60).div_ceil(64 * 1024);
    assert_eq!(count, writes, "{what}");
}

iperf2_peer_test!(cli_tcp_trip_times_218, check_cli_tcp_trip_times(V218));
iperf2_peer_test!(cli_tcp_trip_times_221, check_cli_tcp_trip_times(V221));

/// The data connections open as any netmeter client's (`engine::client`): `-V` prints
/// the preamble (version, system, time) before "Connecting", `--cport` is the local
/// port the iperf 2 server sees. Before they were shared, `--iperf2` skipped the
/// preamble.
fn check_client_preamble_and_cport(key: &str) {
    let port = free_port();
    let cport = free_port();
    let (server, d) = iperf2_server(key, port, false);
    let out = run(
        Command::new(netmeter())
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "--iperf2", "-V"])
            .args(["-n", "1M", "--cport", &cport.to_string()]),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "netmeter failed:\n{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let time = text
        .find("Time: ")
        .unwrap_or_else(|| panic!("no -V preamble:\n{text}"));
    let connecting = text
        .find("Connecting to host")
        .expect("the connecting line");
    assert!(time < connecting, "the preamble comes first:\n{text}");
    await_evidence(
        &format!("{key}'s line for the stream"),
        || !server_lines(&d.text()).is_empty(),
        || d.text(),
    );
    let lines = server_lines(&d.text());
    drop(server);
    assert!(line_for(&lines, cport).bytes > 0, "{key}: {lines:?}");
}

iperf2_peer_test!(
    client_preamble_and_cport_221,
    check_client_preamble_and_cport(V221)
);

/// `netmeter -c --iperf2 -J ARGS` against a fresh iperf 2 server started with `-e -f b`
/// (its enhanced rows, bytes exact): netmeter's document and the server's output, once
/// it printed its whole-test row (from 0.0000, holding `mark`).
fn run_against_enhanced(key: &str, args: &[&str], mark: &str) -> (Value, String) {
    let port = free_port();
    let (server, d) = iperf2_server_styled(key, port, false, &["-e", "-f", "b"]);
    let out = run(
        Command::new(netmeter())
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "--iperf2", "-J"])
            .args(args),
        Duration::from_secs(60),
    );
    let v = json_of(&out, "netmeter");
    assert!(out.status.success(), "netmeter failed:\n{}", show(&out));
    let whole = |t: &str| {
        t.lines()
            .any(|l| l.contains("0.0000-") && l.contains(mark) && !l.contains("%)"))
    };
    await_evidence(
        &format!("{key}'s whole-test row"),
        || whole(&d.text()),
        || d.text(),
    );
    let text = d.text();
    drop(server);
    (v, text)
}

/// The bytes of an iperf 2 `-f b` row: the number before `Bytes`.
fn row_bytes(row: &str) -> Option<u64> {
    let t: Vec<&str> = row.split_whitespace().collect();
    t.windows(2)
        .find(|w| w[1] == "Bytes")
        .and_then(|w| w[0].parse().ok())
}

/// TCP `--isochronous` against a real iperf 2 server (`-e`, `--trip-times`): the
/// server takes the test as an isochronous trip-times one (its connection line says
/// both), counts every byte netmeter sent and, where it counts frames (2.2.1: its
/// `(cnt/size)` after the burst latency), counts the frames netmeter sent whole (less
/// those that followed a slip, which it does not time), its size the bytes per frame. 2.1.8's server reads the same heads but prints `(0/0)` for an
/// isochronous test (as for iperf 2.1.8's own client): there netmeter's own frame
/// count is checked against the frame clock (20 a second for 2 s, a few slips allowed).
fn check_tcp_isochronous(key: &str, counts_frames: bool) {
    // 20 frames a second: the server gives up on a stream silent for two frame
    // periods (its receive timeout, `Server.cpp`), which a busy host's scheduling must
    // not reach.
    let args = ["--isochronous", "20:10m,1m", "--trip-times", "-t", "2"];
    let (v, text) = run_against_enhanced(key, &args, " ms (");
    let iso = &v["end"]["netmeter"]["isochronous"]["sender"];
    let what = format!("{key}: server\n{text}\nnetmeter {iso}");
    let (frames, frame_bytes) = (
        iso["sent"].as_u64().expect("frames sent"),
        iso["bytes"].as_u64().expect("frame bytes"),
    );
    assert!((30..=41).contains(&frames), "{what}");
    assert!(
        text.contains("(isoch)") && text.contains("(trip-times)"),
        "not an isochronous trip-times test: {what}"
    );
    let row = text
        .lines()
        .rfind(|l| l.contains("0.0000-") && l.contains(" ms ("))
        .expect("the whole-test row");
    let sent = v["end"]["streams"][0]["sender"]["bytes"].as_u64().unwrap();
    assert_eq!(row_bytes(row), Some(sent), "server bytes vs sent: {what}");
    // The frames and the 80-byte test header (no partial frame on the wire).
    assert_eq!(sent, frame_bytes + 80, "{what}");
    let (cnt, size): (u64, u64) = row
        .split(" ms (")
        .nth(1)
        .and_then(|t| {
            let (c, s) = t.split(')').next()?.split_once('/')?;
            Some((c.parse().ok()?, s.parse().ok()?))
        })
        .unwrap_or_else(|| panic!("no (cnt/size): {what}"));
    if counts_frames {
        // 2.2.1 times a frame only when its id follows the previous frame's
        // (`Reporter.c`, the TCP frame accounting): a frame after skipped slots (a
        // slip, on a busy host) is counted as a slip, not timed. So every frame
        // netmeter sent is counted but at most one per slip, all of them without.
        let slips = iso["slips"].as_u64().expect("slips");
        assert!(
            cnt <= frames && cnt + slips >= frames,
            "frames counted: {what}"
        );
        if slips == 0 {
            assert_eq!(cnt, frames, "frames counted vs sent: {what}");
        }
        // Its size is the bytes it read (netmeter's, header included) per frame.
        assert!(size.abs_diff(sent / cnt.max(1)) <= 1, "mean size: {what}");
    } else {
        assert!(cnt == 0 || cnt == frames, "{what}");
    }
}

iperf2_peer_test!(tcp_isochronous_218, check_tcp_isochronous(V218, false));
iperf2_peer_test!(
    cli_tcp_isochronous_shape_221,
    check_cli_shape(
        V221,
        &["-e", "-i", "1", "-t", "2", "--isochronous=20:10m,1m"],
        "tcp_iso.client"
    )
);
iperf2_peer_test!(tcp_isochronous_221, check_tcp_isochronous(V221, true));

/// TCP periodic bursts (`--burst-size 40K --burst-period 0.25`, `-l 10K`) against a
/// real iperf 2 server (`-e`, `--trip-times`): the header's `HEADER_PERIODICBURST` and
/// burst settings make the server print a row per burst (its `Burst (start-end)` rows
/// with the transfer time and duty cycle): one for each burst netmeter sent, each of
/// the burst's 40960 bytes (the first also carrying the 112-byte test header), adding
/// up to what netmeter sent. (A quarter-second period: the server ends a test whose
/// next burst is two periods late, its receive timeout, which a busy host must not
/// reach.)
fn check_tcp_bursts(key: &str) {
    let args = [
        "--burst-size",
        "40K",
        "--burst-period",
        "0.25",
        "-l",
        "10K",
        "--trip-times",
        "-t",
        "2",
    ];
    let (v, text) = run_against_enhanced(key, &args, " ms ");
    let b = &v["end"]["netmeter"]["burst"]["sender"];
    let what = format!("{key}: server\n{text}\nnetmeter {b}");
    let bursts = b["sent"].as_u64().expect("bursts sent");
    assert!((4..=8).contains(&bursts), "{what}");
    assert!(text.contains("(burst-period=0.2500s)"), "{what}");
    let rows: Vec<u64> = text
        .lines()
        .filter(|l| l.contains(" ms (") && l.contains("%)"))
        .map(|l| row_bytes(l).unwrap_or_else(|| panic!("no bytes in {l}: {what}")))
        .collect();
    assert_eq!(rows.len() as u64, bursts, "a row per burst: {what}");
    assert_eq!(rows[0], 40_960 + 112, "{what}");
    assert!(rows[1..].iter().all(|&r| r == 40_960), "{what}");
    let sent = v["end"]["streams"][0]["sender"]["bytes"].as_u64().unwrap();
    assert_eq!(rows.iter().sum::<u64>(), sent, "{what}");
}

iperf2_peer_test!(tcp_bursts_218, check_tcp_bursts(V218));
iperf2_peer_test!(tcp_bursts_221, check_tcp_bursts(V221));

/// UDP `-R -e` without `--trip-times` through `netmeter iperf2 -c`: iperf 2.2.1's own
/// client prints each interval's latency from the datagrams' send times (its capture
/// `udp_rev.client`), and so does netmeter: the same headers line for line, the first
/// interval's and the whole test's latency real figures (min ≤ avg ≤ max, under a generous second on loopback), not the
/// `-/-/-/-` of a receiver that kept none.
fn check_cli_udp_reverse_latency(key: &str) {
    let args = [
        "-u", "-R", "-e", "-b", "8m", "-l", "1000", "-i", "1", "-t", "2",
    ];
    let (text, _) = iperf2_cli_against(key, &args, 1);
    // The settings and column headers line for line; the rows below (a last interval
    // past -t on a busy host may hold only the server's FIN, without a latency).
    let p = format!(
        "{}/src/report/testdata/iperf2/udp_rev.client.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let want = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
    let head = |t: &str| -> Vec<String> {
        let upto: String = t
            .lines()
            .take_while(|l| !l.starts_with("[ *1]"))
            .map(|l| format!("{l}\n"))
            .collect();
        netmeter::report::iperf2::shape::shapes(&upto)
    };
    assert_eq!(head(&want), head(&text), "{key}: headers:\n{text}");
    let first = text
        .lines()
        .find(|l| l.starts_with("[ *1] 0.0000-1.0"))
        .unwrap_or_else(|| panic!("{key}: no first interval row:\n{text}"));
    let first = slashed_ms(first).unwrap_or_else(|| panic!("{key}: no latency:\n{text}"));
    assert_eq!(first.len(), 4, "{key}:\n{text}");
    let row = text
        .lines()
        .rfind(|l| l.starts_with("[ *1] 0.0000-"))
        .unwrap_or_else(|| panic!("{key}: no whole-test row:\n{text}"));
    let lat = slashed_ms(row).unwrap_or_else(|| panic!("{key}: no latency in the row:\n{text}"));
    assert_eq!(lat.len(), 4, "{key}:\n{text}");
    let (avg, min, max) = (lat[0], lat[1], lat[2]);
    assert!(
        0.0 <= min && min <= avg && avg <= max && max < 1000.0,
        "{key}:\n{text}"
    );
}

iperf2_peer_test!(
    cli_udp_reverse_latency_218,
    check_cli_udp_reverse_latency(V218)
);
iperf2_peer_test!(
    cli_udp_reverse_latency_221,
    check_cli_udp_reverse_latency(V221)
);

/// `netmeter iperf2 -c -e` sending TCP periodic bursts against a real iperf 2.2.1
/// server (`-e`: a burst test's server prints its per-burst rows, no CSV) has iperf 2.2.1's
/// client layout (`tcp_burst.client`: the burst size beside the write size, the
/// `Bursting:` line).
fn check_cli_bursts_shape(key: &str) {
    let args = [
        "-e",
        "-i",
        "1",
        "-t",
        "2",
        "-l",
        "10K",
        "--burst-size",
        "40K",
        "--burst-period",
        "0.25",
    ];
    let (ours, theirs, _) = cli_against_enhanced(key, false, &args, " ms  ");
    let p = format!(
        "{}/src/report/testdata/iperf2/tcp_burst.client.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let want = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
    use netmeter::report::iperf2::shape::shapes;
    assert_eq!(
        shapes(&want),
        shapes(&ours),
        "{key}: not iperf 2.2.1's shape:\n{ours}\nserver:\n{theirs}"
    );
}

iperf2_peer_test!(cli_tcp_bursts_shape_221, check_cli_bursts_shape(V221));

/// `-r`, iperf 2's tradeoff test, through `netmeter iperf2 -c -y C`: netmeter's test
/// first, then the server's on the connections it opened back to netmeter's listener.
/// Judged by the server's own `-y C` lines: what it received on each of netmeter's
/// connections is what netmeter sent on it, and what it sent on each connection back
/// is what netmeter received on it, to the byte (netmeter reads until the server
/// closes). netmeter's lines for the connections back (ids after its own) name the
/// server's port first, as iperf 2 names a connection's client.
fn check_cli_tradeoff(key: &str, streams: usize, args: &[&str]) {
    let mut a = vec!["-r", "-y", "C"];
    let p = streams.to_string();
    a.extend_from_slice(&["-P", &p]);
    a.extend_from_slice(args);
    let (text, lines) = iperf2_cli_against(key, &a, 2 * streams);
    let what = format!("{key} {a:?}: netmeter\n{text}\nserver {lines:?}");
    for id in 1..=streams as i64 {
        let (port, sent, _) = whole_test_csv(&text, id);
        assert_eq!(line_for(&lines, port).bytes, sent, "{what}");
        assert!(sent > 0, "{what}");
    }
    for id in streams as i64 + 1..=2 * streams as i64 {
        let (server_port, got, _) = whole_test_csv(&text, id);
        assert_eq!(line_for(&lines, server_port).bytes, got, "{what}");
        assert!(got > 0, "{what}");
    }
}

// One stream with 2.1.8: its server's connections back of a `-P 2` tradeoff now and
// then carry nothing and are never reported (iperf 2.1.8's own client gets 0 bytes
// back and waits for them).
iperf2_peer_test!(
    cli_tradeoff_timed_218,
    check_cli_tradeoff(V218, 1, &["-t", "2"])
);
iperf2_peer_test!(
    cli_tradeoff_timed_221,
    check_cli_tradeoff(V221, 2, &["-t", "2"])
);
iperf2_peer_test!(
    cli_tradeoff_bytes_218,
    check_cli_tradeoff(V218, 1, &["-n", "3M"])
);
iperf2_peer_test!(
    cli_tradeoff_bytes_221,
    check_cli_tradeoff(V221, 1, &["-n", "3M"])
);
iperf2_peer_test!(
    cli_tradeoff_enhanced_shape_221,
    check_cli_shape(
        V221,
        &["-r", "-e", "-i", "1", "-t", "2"],
        "tcp_tradeoff.client"
    )
);
iperf2_peer_test!(
    cli_tradeoff_plain_shape_218,
    check_cli_shape(
        V218,
        &["-r", "-i", "1", "-t", "2"],
        "tcp_tradeoff_plain.client"
    )
);

/// Quick tier: `netmeter iperf2 -c -r` against netmeter's own server (which serves an
/// iperf 2 client's `-r`): the server's end-of-test log line counts, received and sent,
/// are the client's two halves' bytes as its `-y C` lines give them.
#[test]
fn tradeoff_against_a_netmeter_server() {
    let port = free_port();
    let (server, d) = netmeter_server(port, &[]);
    let out = run(
        Command::new(netmeter())
            .args(["iperf2", "-c", "127.0.0.1", "-p", &port.to_string()])
            .args(["-r", "-y", "C", "-t", "1"]),
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "netmeter iperf2 -r failed:\n{}",
        show(&out)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (_, sent, _) = whole_test_csv(&text, 1);
    let (_, got, _) = whole_test_csv(&text, 2);
    let logged = await_value("the server's end-of-test line", || {
        d.text().lines().find_map(|l| {
            let rest = l.split_once("ended: received ")?.1;
            let (received, rest) = rest.split_once(" bytes, sent ")?;
            let sent = rest.split_once(" bytes")?.0;
            Some((received.parse::<u64>().ok()?, sent.parse::<u64>().ok()?))
        })
    });
    assert_eq!(
        logged,
        (sent, got),
        "client:\n{text}\nserver:\n{}",
        d.text()
    );
    assert!(sent > 0 && got > 0, "{text}");
    drop(server);
}

/// TCP `-R --trip-times` through `netmeter iperf2 -c -e` against a real iperf 2 server
/// (`-e -f b`): netmeter times the server's writes from the send times in their heads.
/// Judged by the server's own row: netmeter times every `-l` block of the bytes the
/// server counted (`(cnt/size)`), but for the first with 2.1.8, whose first write's
/// head still holds its test header's words (iperf 2.1.8's own client times 23 of 24
/// too); with 2.2.1 (`writes`) the count is also the server's Write count less its
/// test header's write; the delays are a loopback's (above 0, under a second). Paced to
/// last over a second, so the whole-test row has its intervals' delays (without a
/// clock estimate the end summary holds none, as for UDP `-R`).
fn check_cli_reverse_trip_times(key: &str, writes_counted: bool) {
    let port = free_port();
    let (server, d) = iperf2_server_styled(key, port, false, &["-e", "-f", "b"]);
    let out = run(
        Command::new(netmeter())
            .args(["iperf2", "-c", "127.0.0.1", "-p", &port.to_string()])
            .args([
                "-R",
                "--trip-times",
                "-e",
                "-n",
                "3M",
                "-b",
                "20m",
                "-i",
                "1",
            ]),
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "netmeter iperf2 failed:\n{}",
        show(&out)
    );
    let ours = String::from_utf8_lossy(&out.stdout).into_owned();
    let row = |t: &str| {
        t.lines()
            .find(|l| l.contains("0.0000-") && l.contains("Bytes") && l.contains("/0 "))
            .map(str::to_string)
    };
    let theirs = await_value(&format!("{key}'s whole-test row"), || row(&d.text()));
    drop(server);
    let what = format!("{key}: netmeter\n{ours}\nserver row {theirs}");
    let writes: u64 = theirs
        .split_whitespace()
        .find_map(|t| t.strip_suffix("/0")?.parse().ok())
        .unwrap_or_else(|| panic!("no Write/Err: {what}"));
    let mine = ours
        .lines()
        .rev()
        .find(|l| l.starts_with("[ *1] 0.0000-") && l.contains(" ms ("))
        .unwrap_or_else(|| panic!("no whole-test row with latency: {what}"));
    let (lat, cnt) = mine.split_once(" ms (").unwrap();
    let (cnt, size) = cnt.split_once(')').unwrap().0.split_once('/').unwrap();
    let cnt: u64 = cnt.parse().unwrap();
    let blocks = row_bytes(&theirs).unwrap_or_else(|| panic!("no bytes: {what}")) / 131_072;
    assert!(blocks >= 20 && cnt <= blocks && cnt + 1 >= blocks, "{what}");
    if writes_counted {
        assert_eq!(cnt + 1, writes, "{what}");
    }
    assert_eq!(size, "131072", "{what}");
    let ms: Vec<f64> = lat
        .rsplit(' ')
        .next()
        .unwrap()
        .split('/')
        .map(|x| x.parse().unwrap())
        .collect();
    let (avg, min, max) = (ms[0], ms[1], ms[2]);
    assert!(
        min > 0.0 && min <= avg && avg <= max && max < 1000.0,
        "{what}"
    );
}

iperf2_peer_test!(
    cli_reverse_trip_times_218,
    check_cli_reverse_trip_times(V218, false)
);
iperf2_peer_test!(
    cli_reverse_trip_times_221,
    check_cli_reverse_trip_times(V221, true)
);
iperf2_peer_test!(
    tcp_reverse_trip_times_bytes_218,
    check_tcp_server_sends(V218, &["-R", "--trip-times", "-n", "3M"], true)
);
// 2.2.1's server writes its enhanced CSV with --trip-times (other columns): 2.1.8's
// plain CSV judges the bytes, and the client's layout (its own) is checked against it.
iperf2_peer_test!(
    cli_reverse_trip_times_shape_218,
    check_cli_shape(
        V218,
        &["-R", "--trip-times", "-e", "-i", "1", "-t", "2"],
        "tcp_rev_tt.client"
    )
);

/// The `(cnt/size)` count of the last whole-test row of `text` starting with `label`
/// that has burst latency columns.
fn burst_count(text: &str, label: &str) -> Option<u64> {
    let row = text
        .lines()
        .rfind(|l| l.starts_with(label) && l.contains(" 0.0000-") && l.contains(" ms ("))?;
    let cnt = row.split_once(" ms (")?.1.split_once('/')?.0;
    cnt.parse().ok()
}

/// TCP `--full-duplex --trip-times` through `netmeter iperf2 -c -e` against a real
/// iperf 2 server (`-e -f b`): both ends time each other's writes on the one
/// connection. The server timed every `-l` block netmeter sent (its `(cnt/size)`
/// against its own byte count in 64 KiB blocks, netmeter's test header aside), and
/// netmeter every block the server sent (its bytes in 64 KiB blocks; 2.2.1's test
/// header, its first write, is not timed and is not a block).
fn check_cli_full_duplex_trip_times(key: &str) {
    let port = free_port();
    let (server, d) = iperf2_server_styled(key, port, false, &["-e", "-f", "b"]);
    let out = run(
        Command::new(netmeter())
            .args(["iperf2", "-c", "127.0.0.1", "-p", &port.to_string()])
            .args(["--full-duplex", "--trip-times", "-e", "-t", "2", "-i", "1"])
            .args(["-l", "64K", "-b", "200m"]),
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "netmeter iperf2 failed:\n{}",
        show(&out)
    );
    let ours = String::from_utf8_lossy(&out.stdout).into_owned();
    let sent_row = |t: &str| {
        t.lines()
            .rfind(|l| l.starts_with("[ *1] 0.0000-") && l.contains("/0 "))
            .map(str::to_string)
    };
    await_evidence(
        &format!("{key}'s whole-test rows of both halves"),
        || sent_row(&d.text()).is_some() && burst_count(&d.text(), "[  1]").is_some(),
        || d.text(),
    );
    let theirs = d.text();
    drop(server);
    let what = format!("{key}: netmeter\n{ours}\nserver\n{theirs}");
    let recv_row = theirs
        .lines()
        .rfind(|l| l.starts_with("[  1] 0.0000-") && l.contains(" ms ("))
        .unwrap_or_else(|| panic!("no receiving row: {what}"));
    let blocks = row_bytes(recv_row).unwrap_or_else(|| panic!("no bytes: {what}")) / 65_536;
    let timed = burst_count(&theirs, "[  1]").unwrap_or(0);
    assert!(
        blocks >= 20 && timed <= blocks && timed + 1 >= blocks,
        "{what}"
    );
    // 2.1.8's server counts two writes a block when paced: its bytes say the blocks.
    let sent_blocks = sent_row(&theirs)
        .and_then(|r| row_bytes(&r))
        .unwrap_or_else(|| panic!("no bytes sent: {what}"))
        / 65_536;
    let mine = burst_count(&ours, "[  2]").unwrap_or_else(|| panic!("no latency: {what}"));
    assert!(
        mine <= sent_blocks && mine + 1 >= sent_blocks && mine >= 20,
        "{what}"
    );
}

iperf2_peer_test!(
    cli_full_duplex_trip_times_218,
    check_cli_full_duplex_trip_times(V218)
);
iperf2_peer_test!(
    cli_full_duplex_trip_times_221,
    check_cli_full_duplex_trip_times(V221)
);

/// Quick tier: `netmeter iperf2 -c -R --trip-times` against netmeter's own server,
/// which frames its writes as iperf 2's server does: every `-l` block it sent is timed
/// (the count in the whole-test row's `(cnt/size)`: the server's sent bytes, its
/// 80-byte test header aside, in 128 KiB blocks), with a loopback's delays.
#[test]
fn reverse_trip_times_against_a_netmeter_server() {
    let port = free_port();
    let (server, d) = netmeter_server(port, &[]);
    let out = run(
        Command::new(netmeter())
            .args(["iperf2", "-c", "127.0.0.1", "-p", &port.to_string()])
            .args([
                "-R",
                "--trip-times",
                "-e",
                "-n",
                "3M",
                "-b",
                "20m",
                "-i",
                "1",
            ]),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let sent = await_value("the server's end-of-test line", || {
        d.text().lines().find_map(|l| {
            let rest = l.split_once(", sent ")?.1;
            rest.split_once(" bytes")?.0.parse::<u64>().ok()
        })
    });
    drop(server);
    let row = text
        .lines()
        .rev()
        .find(|l| l.starts_with("[ *1] 0.0000-") && l.contains(" ms ("))
        .unwrap_or_else(|| panic!("no whole-test row with latency:\n{text}"));
    let cnt = row.split_once(" ms (").unwrap().1;
    assert!(
        cnt.starts_with(&format!("{}/131072)", sent / 131_072)),
        "server sent {sent}:\n{text}"
    );
}
