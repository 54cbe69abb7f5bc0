//! netmeter as an iperf 2 client over UDP with the server sending (`--iperf2 -u -R`):
//! against a stand-in server on loopback (quick tier: the FIN answered with the report
//! datagram, a silent server ending the test), and against real iperf 2.1.8 and 2.2.1
//! servers, judged by what the iperf 2 server prints in its enhanced (`-e -f b`) text:
//! the bytes it sent and its write count (the FIN included) are what netmeter received
//! and counted.

use crate::support::*;
use netmeter::wire::iperf2::{ServerReport, TestHdr};
use serde_json::Value;
use std::net::UdpSocket;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const V218: &str = "NETMETER_IPERF2_218";
const V221: &str = "NETMETER_IPERF2_221";

/// An iperf 2 datagram of `len` bytes: sequence number `seq` (negative: the FIN) split
/// low/high around the send time, as iperf 2's sender writes it.
fn datagram(seq: i64, len: usize) -> Vec<u8> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let mut d = vec![0u8; len];
    d[0..4].copy_from_slice(&(seq as u32).to_be_bytes());
    d[4..8].copy_from_slice(&(now.as_secs() as u32).to_be_bytes());
    d[8..12].copy_from_slice(&now.subsec_micros().to_be_bytes());
    d[12..16].copy_from_slice(&(((seq as u64) >> 32) as u32).to_be_bytes());
    d
}

/// A stand-in iperf 2 server on loopback: it takes the client's header (which must ask
/// for -R), sends `seqs` back as datagrams of `len` bytes, then the FIN `fin` if given
/// and the client's answer to it, parsed. It holds its socket until `done` closes.
fn stand_in(
    seqs: Vec<i64>,
    fin: Option<i64>,
    len: usize,
) -> (
    u16,
    std::thread::JoinHandle<Option<ServerReport>>,
    std::sync::mpsc::Sender<()>,
) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(EVIDENCE_TIMEOUT)).unwrap();
    let port = sock.local_addr().unwrap().port();
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        let (n, from) = sock.recv_from(&mut buf).expect("the client's header");
        let h = TestHdr::parse_udp(&buf[..n]).expect("an iperf 2 UDP test header");
        assert!(h.reverse(), "the header asks for -R: {h:?}");
        sock.connect(from).unwrap();
        for s in seqs {
            sock.send(&datagram(s, len)).unwrap();
        }
        let report = fin.map(|f| {
            sock.send(&datagram(f, len)).unwrap();
            // The report echoes the FIN's (negative) number; a copy of the header (the
            // client sends it again while nothing has come) does not.
            loop {
                let n = sock.recv(&mut buf).expect("the client's report datagram");
                if n >= 4 && i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) < 0 {
                    break ServerReport::parse(&buf[..n]).expect("a report datagram");
                }
            }
        });
        // Silent from here, the socket still open, until the test is over.
        let _ = wait.recv_timeout(EVIDENCE_TIMEOUT * 2);
        report
    });
    (port, t, done)
}

fn reverse_client(port: u16, args: &[&str]) -> Value {
    let out = run(
        Command::new(netmeter())
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "--iperf2", "-u"])
            .args(["-R", "-J"])
            .args(args),
        Duration::from_secs(90),
    );
    assert!(out.status.success(), "netmeter failed:\n{}", show(&out));
    json_of(&out, "netmeter")
}

/// The server's FIN ends the test (long before its -t of 60 s), counted as the last
/// datagram; the client answers it with iperf 2's report datagram carrying its counts.
#[test]
fn reverse_udp_answers_the_servers_fin_with_its_report() {
    let seqs: Vec<i64> = (1..=20).filter(|&s| s != 7).collect();
    let (port, server, done) = stand_in(seqs, Some(-21), 200);
    let v = reverse_client(port, &["-t", "60", "-l", "200"]);
    drop(done);
    let r = server.join().unwrap().expect("a report");
    let u = &v["end"]["streams"][0]["udp"];
    let what = format!("netmeter {u}, its report {r:?}");
    assert_eq!(u["packets"].as_u64(), Some(21), "{what}");
    assert_eq!(u["lost_packets"].as_u64(), Some(1), "{what}");
    assert_eq!(u["bytes"].as_u64(), Some(20 * 200), "{what}");
    assert_eq!((r.datagrams, r.lost, r.bytes), (21, 1, 4000), "{what}");
    let secs = v["end"]["sum"]["seconds"].as_f64().unwrap();
    assert!(secs < 60.0, "the FIN ended the test, not -t: {secs} s");
}

/// A server that goes silent without its FIN: a timed test ends after its -t (and a
/// quiet tail), a -n test after the idle bound; neither hangs, and what arrived counts.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (a silent server's idle bounds, about 4 s)"
)]
fn reverse_udp_ends_when_the_server_goes_silent() {
    for args in [&["-t", "1"][..], &["-n", "100M"][..]] {
        let (port, server, done) = stand_in((1..=10).collect(), None, 300);
        let v = reverse_client(port, args);
        drop(done);
        assert!(server.join().unwrap().is_none());
        let u = &v["end"]["streams"][0]["udp"];
        assert_eq!(u["packets"].as_u64(), Some(10), "{args:?}: {u}");
        assert_eq!(u["bytes"].as_u64(), Some(3000), "{args:?}: {u}");
        assert_eq!(u["lost_packets"].as_u64(), Some(0), "{args:?}: {u}");
    }
}

/// What an iperf 2 server's enhanced text (`-e -f b`) says it sent, per stream row
/// (`[  1] 0.0000-2.0040 sec  252000 Bytes  2007700 bits/sec  252/0/0 ...`): bytes and
/// writes (the FIN's among them).
fn sent_rows(text: &str) -> Vec<(u64, u64)> {
    text.lines()
        .filter_map(|l| {
            let (id, rest) = l.trim().strip_prefix('[')?.split_once(']')?;
            id.trim().parse::<u32>().ok()?;
            let t: Vec<&str> = rest.split_whitespace().collect();
            let at = t.iter().position(|w| *w == "Bytes")?;
            let bytes = t.get(at.checked_sub(1)?)?.parse().ok()?;
            let rate = t.iter().position(|w| *w == "bits/sec")?;
            let writes = t.get(rate + 1)?.split('/').next()?.parse().ok()?;
            Some((bytes, writes))
        })
        .collect()
}

/// `-R` over UDP against a real iperf 2 server: netmeter's datagram total is the
/// server's write count and its bytes the server's, summed over the streams; the
/// bytes are the datagrams that arrived, of `len` bytes each.
fn check_reverse(key: &str, args: &[&str], len: u64) {
    let port = free_port();
    let mut server = Proc::spawn(
        key,
        Command::new("stdbuf")
            .args([
                "-oL",
                &peer(key),
                "-s",
                "-u",
                "-e",
                "-f",
                "b",
                "-B",
                "127.0.0.1",
            ])
            .args(["-p", &port.to_string()]),
    );
    let d = server.drain();
    await_evidence(
        &format!("{key} listening on UDP port {port}"),
        || d.text().contains("Server listening"),
        || d.text(),
    );
    let v = reverse_client(port, args);
    let streams = v["end"]["streams"].as_array().unwrap().clone();
    await_evidence(
        &format!("{key}'s row for each of {} streams", streams.len()),
        || sent_rows(&d.text()).len() >= streams.len(),
        || d.text(),
    );
    let rows = sent_rows(&d.text());
    drop(server);
    let what = format!("{key} {args:?}: server rows {rows:?}, netmeter {streams:?}");
    let (mut packets, mut lost, mut bytes) = (0, 0, 0);
    for s in &streams {
        let u = &s["udp"];
        assert_eq!(u["sender"], false, "{what}");
        packets += u["packets"].as_u64().unwrap();
        lost += u["lost_packets"].as_u64().unwrap();
        bytes += u["bytes"].as_u64().unwrap();
    }
    let sent_bytes: u64 = rows.iter().map(|r| r.0).sum();
    let writes: u64 = rows.iter().map(|r| r.1).sum();
    assert_eq!(
        packets, writes,
        "{what}: datagrams counted vs the server's writes"
    );
    assert_eq!(bytes, (packets - lost) * len, "{what}: bytes that arrived");
    if lost == 0 {
        assert_eq!(bytes, sent_bytes, "{what}: bytes received vs sent");
    }
    assert!(packets > 10, "{what}");
}

iperf2_peer_test!(
    udp_reverse_timed_218,
    check_reverse(V218, &["-t", "2", "-b", "5M", "-l", "1000"], 1000)
);
iperf2_peer_test!(
    udp_reverse_timed_221,
    check_reverse(V221, &["-t", "2", "-b", "5M", "-l", "1000"], 1000)
);
iperf2_peer_test!(
    udp_reverse_parallel_218,
    check_reverse(V218, &["-t", "2", "-b", "2M", "-P", "2"], 1470)
);
iperf2_peer_test!(
    udp_reverse_parallel_221,
    check_reverse(V221, &["-t", "2", "-b", "2M", "-P", "2"], 1470)
);
iperf2_peer_test!(
    udp_reverse_bytes_221,
    check_reverse(V221, &["-n", "500K", "-b", "5M", "-l", "1000"], 1000)
);

/// One row of an iperf 2 server's `-e -f b` text for a `--full-duplex` UDP test: what
/// it received (`[  1] … 262000 Bytes  2092648 bits/sec   0.003 ms 0/262 (0%) …`:
/// bytes, lost, total) or what it sent (`[ *1] … 262000 Bytes  2093312 bits/sec
/// 262/0/0 …`: bytes, writes).
#[derive(Debug)]
enum DuplexRow {
    Received { bytes: u64, lost: u64, total: u64 },
    Sent { bytes: u64, writes: u64 },
}

fn duplex_rows(text: &str) -> Vec<DuplexRow> {
    text.lines()
        .filter_map(|l| {
            let (id, rest) = l.trim().strip_prefix('[')?.split_once(']')?;
            id.trim().trim_start_matches('*').parse::<u32>().ok()?;
            let t: Vec<&str> = rest.split_whitespace().collect();
            let at = t.iter().position(|w| *w == "Bytes")?;
            let bytes = t.get(at.checked_sub(1)?)?.parse().ok()?;
            let rate = t.iter().position(|w| *w == "bits/sec")?;
            if t.get(rate + 2) == Some(&"ms") {
                let (lost, total) = t.get(rate + 3)?.split_once('/')?;
                return Some(DuplexRow::Received {
                    bytes,
                    lost: lost.parse().ok()?,
                    total: total.parse().ok()?,
                });
            }
            let writes = t.get(rate + 1)?.split('/').next()?.parse().ok()?;
            Some(DuplexRow::Sent { bytes, writes })
        })
        .collect()
}

/// `--bidir` over UDP against a real iperf 2 server (its `--full-duplex` on one
/// socket): the server's received total is what netmeter sent (the FIN included), its
/// write count what netmeter received and counted; bytes the same way when nothing was
/// lost.
fn check_duplex(key: &str, args: &[&str], len: u64) {
    let port = free_port();
    let mut server = Proc::spawn(
        key,
        Command::new("stdbuf")
            .args([
                "-oL",
                &peer(key),
                "-s",
                "-u",
                "-e",
                "-f",
                "b",
                "-B",
                "127.0.0.1",
            ])
            .args(["-p", &port.to_string()]),
    );
    let d = server.drain();
    await_evidence(
        &format!("{key} listening on UDP port {port}"),
        || d.text().contains("Server listening"),
        || d.text(),
    );
    let out = run(
        Command::new(netmeter())
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "--iperf2", "-u"])
            .args(["--bidir", "-J"])
            .args(args),
        Duration::from_secs(90),
    );
    assert!(out.status.success(), "netmeter failed:\n{}", show(&out));
    let v = json_of(&out, "netmeter");
    await_evidence(
        &format!("{key}'s rows for both halves"),
        || duplex_rows(&d.text()).len() >= 2,
        || d.text(),
    );
    let rows = duplex_rows(&d.text());
    drop(server);
    let streams = v["end"]["streams"].as_array().unwrap();
    let what = format!("{key} {args:?}: server rows {rows:?}, netmeter {streams:?}");
    let udp = |sender: bool| {
        streams
            .iter()
            .map(|s| &s["udp"])
            .find(|u| u["sender"] == sender)
            .unwrap_or_else(|| panic!("{what}: no stream with sender={sender}"))
    };
    let (tx, rx) = (udp(true), udp(false));
    let n = |u: &Value, k: &str| u[k].as_u64().unwrap_or_else(|| panic!("{what}: {k}"));
    for r in &rows {
        match *r {
            DuplexRow::Received { bytes, lost, total } => {
                // The FIN goes once, unanswered, as iperf 2's own --full-duplex client
                // sends it, and counts as sent: on a busy host it can be the one
                // datagram the server never reads (seen once: 502 of 503). Then every
                // data datagram must have arrived, and only the FIN's bytes are missing.
                let fin_missing = total + 1 == n(tx, "packets") && lost == 0;
                if !fin_missing {
                    assert_eq!(total, n(tx, "packets"), "{what}: sent vs server total");
                }
                if lost == 0 {
                    let fin = if fin_missing { len } else { 0 };
                    assert_eq!(bytes + fin, n(tx, "bytes"), "{what}: sent bytes");
                }
            }
            DuplexRow::Sent { bytes, writes } => {
                assert_eq!(writes, n(rx, "packets"), "{what}: server writes vs counted");
                let got = (n(rx, "packets") - n(rx, "lost_packets")) * len;
                assert_eq!(n(rx, "bytes"), got, "{what}: bytes that arrived");
                if n(rx, "lost_packets") == 0 {
                    assert_eq!(bytes, n(rx, "bytes"), "{what}: received bytes");
                }
            }
        }
    }
    assert!(n(rx, "packets") > 10 && n(tx, "packets") > 10, "{what}");
}

iperf2_peer_test!(
    udp_full_duplex_218,
    check_duplex(V218, &["-t", "2", "-b", "2M", "-l", "1000"], 1000)
);
iperf2_peer_test!(
    udp_full_duplex_221,
    check_duplex(V221, &["-t", "2", "-b", "2M", "-l", "1000"], 1000)
);

/// The `Frame:rx/lost` of an iperf 2 server's last `-e` row of an isochronous
/// `--trip-times` test (`... 179 pps   61/0  -0.1/... ms 20043`).
fn server_frames(text: &str) -> Option<(u64, u64)> {
    let row = text
        .lines()
        .rev()
        .find(|l| l.contains(" pps ") && l.contains(" sec "))?;
    let t: Vec<&str> = row.split_whitespace().collect();
    let at = t.iter().position(|w| *w == "pps")?;
    let (rx, lost) = t.get(at + 1)?.split_once('/')?;
    Some((rx.parse().ok()?, lost.parse().ok()?))
}

#[test]
fn server_frames_are_read_from_iperf2_rows() {
    let row = "[  1] 0.0000-2.0115 sec   490 KBytes  1.99 Mbits/sec   0.013 ms 0/361 (0%) 0.012/0.001/0.680/0.048 ms 179 pps   61/0  -3.799/-4.097/0.038/0.586 ms 20043";
    assert_eq!(server_frames(row), Some((61, 0)));
    assert_eq!(server_datagrams_lost(row), Some(0));
    let lossy = row.replace("0/361 (0%)", "3/361 (0.83%)");
    assert_eq!(server_datagrams_lost(&lossy), Some(3));
}

/// `--isochronous` over UDP against a real iperf 2.1.8 server: it takes the test as
/// isochronous with trip times (its connection line says `(isoch) (trip-times)`) and
/// counts netmeter's frames: the frames it received and lost are the frames netmeter
/// sent (and skipped), and one more (iperf 2's reporter starts its frame count at the first frame's
/// id: iperf 2.1.8's own client's 120 frames count 121 there too).
fn check_isochronous(key: &str) {
    let port = free_port();
    let mut server = Proc::spawn(
        key,
        Command::new("stdbuf")
            .args(["-oL", &peer(key), "-s", "-u", "-e", "-B", "127.0.0.1"])
            .args(["-p", &port.to_string()]),
    );
    let d = server.drain();
    await_evidence(
        &format!("{key} listening on UDP port {port}"),
        || d.text().contains("Server listening"),
        || d.text(),
    );
    let out = run_bounded(
        Command::new(netmeter())
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "--iperf2", "-u"])
            .args(["--isochronous", "30:2M,0", "--trip-times", "-t", "2", "-J"])
            // Where a 2.1.x server reads the frame fields (2.2's are the default).
            .args(["--iperf2-version", "2.1"]),
        Duration::from_secs(60),
        "netmeter --iperf2 --isochronous",
    );
    assert!(out.status.success(), "{}", show(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let sent = v["end"]["netmeter"]["isochronous"]["sender"]["sent"]
        .as_u64()
        .unwrap_or_else(|| panic!("no frames sent: {}", show(&out)));
    await_evidence(
        &format!("{key}'s whole-test row"),
        || server_frames(&d.text()).is_some() && d.text().contains(" 0.0000-2."),
        || d.text(),
    );
    let text = d.text();
    drop(server);
    let what = format!("{key}: netmeter sent {sent} frames; the server:\n{text}");
    assert!(text.contains("(isoch) (trip-times)"), "{what}");
    let (rx, lost) = server_frames(&text).expect("the server's frames");
    // A slot netmeter skipped (a stalled thread on a busy host) is a frame the server
    // counts lost.
    let slips = v["end"]["netmeter"]["isochronous"]["sender"]["slips"]
        .as_u64()
        .unwrap_or(0);
    assert!(sent >= 50, "{what}");
    // A frame whose datagrams the loopback dropped (its socket full on a busy host) is
    // counted lost when a later frame arrives; the last frame's loss nothing reveals.
    let dropped = server_datagrams_lost(&text).expect("the server's lost/total") > 0;
    // A slip is a gap in the frame ids. iperf 2.1.8's server times (and counts) a frame
    // only when its id follows the previous frame's id the datagram carries
    // (Server.cpp: `frameID - prevframeID == 1`), so the frame after a gap is not
    // counted, and the next one finds the gap's skipped ids plus two (its own
    // predecessor and itself: Reporter.c adds the whole `framedelta`): each of `gaps`
    // gaps costs one received frame and adds its skipped slots and 2 to the lost ones.
    // Seen with 2 slots skipped in one gap: 58 frames sent, the server's 58/4.
    let gaps = (sent + 1).saturating_sub(rx);
    let slipped = gaps <= slips && (slips == 0) == (gaps == 0) && lost == slips + 2 * gaps;
    assert!(
        (rx + gaps == sent + 1 && slipped) || (dropped && rx + lost + 1 == sent + slips + 1),
        "{what} ({slips} slips)"
    );
}

/// The datagrams lost in the server's whole-test row (`lost/total (N%)`).
fn server_datagrams_lost(text: &str) -> Option<u64> {
    let row = text
        .lines()
        .rev()
        .find(|l| l.contains(" pps ") && l.contains(" 0.0000-"))?;
    let t: Vec<&str> = row.split_whitespace().collect();
    let at = t
        .iter()
        .position(|w| w.starts_with('(') && w.ends_with("%)"))?;
    t.get(at.checked_sub(1)?)?.split_once('/')?.0.parse().ok()
}

iperf2_peer_test!(isochronous_frames_218, check_isochronous(V218));
