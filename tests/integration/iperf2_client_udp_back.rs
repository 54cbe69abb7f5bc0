//! `netmeter iperf2 -c -u -d` and `-u -r`: iperf 2's dual and tradeoff tests over UDP,
//! the server sending back to the client's listening socket. Judged by what the
//! server itself prints: its row for what it received has the datagrams netmeter sent
//! (its total is netmeter's `Sent N` less one: iperf 2's client counts its reporter's
//! end record too), and the "Server Report" of its sending half (the report netmeter's
//! listener answered the server's FIN with) is netmeter's own receiving row, lost/total
//! for lost/total. Against netmeter's own server (quick tier) its log says the same.
//! And `-r`'s failure paths: a server that never sends back (the client gives up after
//! its bounded wait, in one sentence), and an interrupt during the server's half.

use crate::iperf2_client::iperf2_server_styled;
use crate::support::*;
use std::net::UdpSocket;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

const V218: &str = "NETMETER_IPERF2_218";
const V221: &str = "NETMETER_IPERF2_221";

/// A row's `lost/total` (the field before iperf 2's `(N%)`).
fn lost_total(row: &str) -> Option<(u64, u64)> {
    let f: Vec<&str> = row.split_whitespace().collect();
    f.windows(2).find_map(|w| {
        if !(w[1].starts_with('(') && w[1].ends_with("%)")) {
            return None;
        }
        let (l, t) = w[0].split_once('/')?;
        Some((l.parse().ok()?, t.parse().ok()?))
    })
}

/// The last row of `text` starting with `label` and holding a whole test (from 0).
fn whole_row<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    text.lines()
        .rfind(|l| l.starts_with(label) && l.contains(" 0.0000-"))
}

/// The lost/total of the last whole-test row of `label` that has one (not its
/// `N datagrams received out-of-order` line).
fn whole_lost_total(text: &str, label: &str) -> Option<(u64, u64)> {
    text.lines()
        .rev()
        .filter(|l| l.starts_with(label) && l.contains(" 0.0000-"))
        .find_map(lost_total)
}

/// `Sent N datagrams` of stream 1.
fn sent(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let n = l.strip_prefix("[  1] Sent ")?.strip_suffix(" datagrams")?;
        n.parse().ok()
    })
}

/// The row after the column header that follows "Server Report:" (`[ *2]` or `[  2]`
/// on a server, the listener's report of its sending half).
fn server_report_row(text: &str) -> Option<&str> {
    let mut it = text.lines().skip_while(|l| !l.contains("Server Report:"));
    it.nth(2)
}

fn netmeter_iperf2(port: u16, args: &[&str]) -> Output {
    run(
        Command::new(netmeter())
            .args(["iperf2", "-c", "127.0.0.1", "-p", &port.to_string()])
            .args(args),
        Duration::from_secs(90),
    )
}

/// `flag` (`-d` or `-r`) over UDP against a real iperf 2 server started with `-e`.
fn check_back(key: &str, flag: &str) {
    let port = free_port();
    let (server, d) = iperf2_server_styled(key, port, true, &["-e"]);
    let out = netmeter_iperf2(port, &["-u", flag, "-e", "-t", "2", "-b", "1m"]);
    let ours = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{key} {flag}: netmeter failed:\n{}",
        show(&out)
    );
    await_evidence(
        &format!("{key}'s Server Report row for its sending half"),
        || server_report_row(&d.text()).is_some_and(|r| lost_total(r).is_some()),
        || d.text(),
    );
    let theirs = d.text();
    drop(server);
    let what = format!("{key} {flag}\n--- netmeter\n{ours}\n--- iperf 2 server\n{theirs}");
    let sent = sent(&ours).unwrap_or_else(|| panic!("no Sent line: {what}"));
    let received = whole_lost_total(&theirs, "[  1]")
        .unwrap_or_else(|| panic!("no whole-test row of what the server received: {what}"));
    assert_eq!(
        received.1 + 1,
        sent,
        "the server's total is what netmeter sent: {what}"
    );
    let back = whole_lost_total(&ours, "[  2]")
        .unwrap_or_else(|| panic!("no whole-test row of what netmeter received: {what}"));
    let report = server_report_row(&theirs).and_then(lost_total);
    assert_eq!(
        report,
        Some(back),
        "the server's Server Report is what netmeter received: {what}"
    );
    assert!(back.1 > 0, "{what}");
}

iperf2_peer_test!(udp_dual_218, check_back(V218, "-d"));
iperf2_peer_test!(udp_dual_221, check_back(V221, "-d"));
iperf2_peer_test!(udp_tradeoff_218, check_back(V218, "-r"));
iperf2_peer_test!(udp_tradeoff_221, check_back(V221, "-r"));

/// Quick tier: against netmeter's own server, its log line for the connection back
/// carries the report netmeter's listener sent: netmeter's receiving row's lost/total.
fn check_back_netmeter(flag: &str) {
    let port = free_port();
    let (server, d) = netmeter_server(port, &[]);
    let out = netmeter_iperf2(port, &["-u", flag, "-e", "-t", "1", "-b", "1m"]);
    let ours = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "netmeter {flag} failed:\n{}",
        show(&out)
    );
    let reported = await_value("the server's line for its connection back", || {
        d.text().lines().find_map(|l| {
            let rest = l.split_once("its listener reported ")?.1;
            let rest = rest.split_once(" bytes, lost ")?.1;
            let (lost, rest) = rest.split_once(" of ")?;
            let total = rest.split_once(" datagrams")?.0;
            Some((lost.parse::<u64>().ok()?, total.parse::<u64>().ok()?))
        })
    });
    drop(server);
    let back = whole_lost_total(&ours, "[  2]");
    assert_eq!(
        back,
        Some(reported),
        "netmeter:\n{ours}\nserver:\n{}",
        d.text()
    );
    assert!(reported.1 > 0, "{ours}");
}

#[test]
fn udp_dual_against_a_netmeter_server() {
    check_back_netmeter("-d");
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (two 1 s halves, one after the other)"
)]
fn udp_tradeoff_against_a_netmeter_server() {
    check_back_netmeter("-r");
}

/// A server that takes the test (reads every datagram, answers nothing) and never
/// sends back: `-u -r` ends after its bounded wait with one sentence saying so and a
/// failing exit status, the first half's rows printed. (iperf 2.2.1's client prints
/// `ERROR: expected reverse connect did not occur` after waiting its `-t`, and exits 0.)
/// Datagrams another address (127.0.0.2) sends to the port the header names are not
/// taken for the server's: they are dropped, with a warning naming their sender.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (the 10 s wait for a server that never sends back)"
)]
fn udp_tradeoff_gives_up_on_a_server_that_never_sends_back() {
    let sock = UdpSocket::bind("127.0.0.1:0").expect("a UDP socket");
    let port = sock.local_addr().expect("its address").port();
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .expect("a read timeout");
    let stop = Arc::new(AtomicBool::new(false));
    let got = Arc::new(AtomicU64::new(0));
    let fake = {
        let (stop, got) = (stop.clone(), got.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            let stranger = UdpSocket::bind("127.0.0.2:0").expect("a socket on 127.0.0.2");
            // Bounded by the client's run (stopped below) and a count.
            while !stop.load(Ordering::Relaxed) && got.load(Ordering::Relaxed) < 1_000_000 {
                let Ok((n, from)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                // The first datagram names the client's listening port: a stranger
                // sends there, as if it were the server's test back.
                if got.fetch_add(1, Ordering::Relaxed) == 0
                    && let Ok(h) = netmeter::wire::iperf2::TestHdr::parse_udp(&buf[..n])
                {
                    let to = std::net::SocketAddr::new(from.ip(), h.port);
                    for seq in 1..=3i64 {
                        let mut d = vec![0u8; 200];
                        netmeter::wire::iperf2::write_datagram_id(&mut d, seq, 0, 0);
                        let _ = stranger.send_to(&d, to);
                    }
                }
            }
        })
    };
    let out = netmeter_iperf2(port, &["-u", "-r", "-t", "1", "-b", "1m"]);
    stop.store(true, Ordering::Relaxed);
    let _ = fake.join();
    let text = show(&out);
    assert!(!out.status.success(), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the iperf 2 server sent nothing back (-r) within 10 s"),
        "{text}"
    );
    let ours = String::from_utf8_lossy(&out.stdout);
    assert!(sent(&ours).is_some(), "the first half's rows: {text}");
    // No report came for the first half: none is printed (the warning says so).
    assert!(!ours.contains("Server Report:"), "{text}");
    assert!(err.contains("sent no report"), "{text}");
    assert!(
        got.load(Ordering::Relaxed) > 0,
        "the fake got the test: {text}"
    );
    assert!(
        err.contains("-r: dropped a datagram from 127.0.0.2:"),
        "the stranger's datagrams: {text}"
    );
}

/// Send SIGINT to one process by its PID.
fn interrupt(pid: u32) {
    let st = Command::new("kill")
        .args(["-s", "INT", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(st.success(), "kill -s INT {pid} failed");
}

/// Ctrl-C while the server's half of `-u -r` runs (the evidence: its connection line):
/// the first half's rows and Server Report stay printed, the second half's whole-test
/// row holds what arrived, ending well before the server's 4 s, and the client stops
/// at once (bounded: a client that ignored the signal runs the whole 4 s and more),
/// with netmeter's interrupt line and exit status 0, as any interrupted client.
#[test]
fn udp_tradeoff_interrupted_during_the_servers_half() {
    let port = free_port();
    let (server, _d) = netmeter_server(port, &[]);
    let c = Proc::spawn(
        "netmeter iperf2 -u -r",
        Command::new(netmeter())
            .args(["iperf2", "-c", "127.0.0.1", "-p", &port.to_string()])
            .args(["-u", "-r", "-t", "4", "-b", "1m"]),
    )
    .watch();
    await_evidence(
        "the server's half's connection line",
        || c.out.text().contains("[  2] local"),
        || c.out.text(),
    );
    interrupt(c.pid());
    let out = c.finish(Duration::from_secs(30));
    drop(server);
    let text = show(&out);
    let ours = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(sent(&ours).is_some(), "the first half's rows: {text}");
    assert!(ours.contains("Server Report:"), "{text}");
    let row = whole_row(&ours, "[  2]").unwrap_or_else(|| panic!("no second-half row: {text}"));
    let end_s: f64 = row
        .split_whitespace()
        .nth(2)
        .and_then(|iv| iv.split_once('-'))
        .and_then(|(_, e)| e.parse().ok())
        .unwrap_or_else(|| panic!("no interval in {row}"));
    assert!(end_s < 3.5, "the second half stopped early: {text}");
    // As any interrupted netmeter client (and iperf3's): the line, exit status 0.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("interrupt - the client has terminated by signal"),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
}

/// `netmeter iperf2 -c -u ARGS` against a real iperf 2.2.1 server (`-e` with `-e`)
/// has the shape of iperf 2.2.1's own client's output (`capture`, numbers masked).
fn check_shape(args: &[&str], capture: &str) {
    let port = free_port();
    let style: &[&str] = if args.contains(&"-e") { &["-e"] } else { &[] };
    let (server, d) = iperf2_server_styled(V221, port, true, style);
    let out = netmeter_iperf2(port, args);
    await_evidence(
        "the iperf 2 server's Server Report for its sending half",
        || d.text().contains("Server Report:"),
        || d.text(),
    );
    drop(server);
    assert!(out.status.success(), "netmeter failed:\n{}", show(&out));
    assert_shape(&out, args, capture);
}

/// netmeter's stdout has the line shapes of iperf 2.2.1's captured `capture`.
fn assert_shape(out: &std::process::Output, args: &[&str], capture: &str) {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let p = format!(
        "{}/src/report/testdata/iperf2/{capture}.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let want = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
    use netmeter::report::iperf2::shape::shapes;
    assert_eq!(
        shapes(&want),
        shapes(&text),
        "netmeter iperf2 {args:?} has not iperf 2.2.1's shape ({capture}):\n{text}"
    );
}

/// Quick tier: the plain layouts (no latency, which a netmeter server's report
/// carries only with `--trip-times`) against netmeter's own server.
fn check_shape_netmeter(args: &[&str], capture: &str) {
    let port = free_port();
    let (server, _d) = netmeter_server(port, &[]);
    let out = netmeter_iperf2(port, args);
    drop(server);
    assert!(out.status.success(), "netmeter failed:\n{}", show(&out));
    assert_shape(&out, args, capture);
}

#[test]
fn udp_dual_plain_shape_against_a_netmeter_server() {
    check_shape_netmeter(&with(&["-d"]), "udp_dual_plain.client");
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (two 2 s halves, one after the other)"
)]
fn udp_tradeoff_plain_shape_against_a_netmeter_server() {
    check_shape_netmeter(&with(&["-r"]), "udp_tradeoff_plain.client");
}

const SHAPE: [&str; 7] = ["-u", "-i", "1", "-t", "2", "-b", "1m"];

fn with(extra: &[&'static str]) -> Vec<&'static str> {
    let mut a = SHAPE.to_vec();
    a.extend_from_slice(extra);
    a
}

iperf2_peer_test!(
    udp_dual_enhanced_shape_221,
    check_shape(&with(&["-d", "-e"]), "udp_dual.client")
);
iperf2_peer_test!(
    udp_dual_plain_shape_221,
    check_shape(&with(&["-d"]), "udp_dual_plain.client")
);
iperf2_peer_test!(
    udp_tradeoff_enhanced_shape_221,
    check_shape(&with(&["-r", "-e"]), "udp_tradeoff.client")
);
iperf2_peer_test!(
    udp_tradeoff_plain_shape_221,
    check_shape(&with(&["-r"]), "udp_tradeoff_plain.client")
);
