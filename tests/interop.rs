//! Interop: real iperf3 builds against netmeter, in both directions.
//!
//! For each peer (Debian bookworm's iperf3 3.12 and trixie's multi-threaded 3.18) and
//! each mode, one run has a netmeter client talking to an iperf3 server and another an
//! iperf3 client talking to a netmeter server. Both sides must complete, and every byte
//! count the server measured itself must be exactly the figure the client reports for it
//! (it travels in the results exchange), and receivers must have seen what senders sent.

mod common;
use common::*;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

#[derive(Clone, Copy, PartialEq)]
enum Who {
    NetmeterClient,
    NetmeterServer,
}

fn run_pair(peer_key: &str, who: Who, args: &[&str]) -> (Value, Value) {
    let peer_bin = peer(peer_key);
    let port = free_port().to_string();
    let (server_bin, client_bin) = match who {
        Who::NetmeterClient => (peer_bin.clone(), netmeter().to_string()),
        Who::NetmeterServer => (netmeter().to_string(), peer_bin.clone()),
    };
    let server = Proc::spawn(
        "server",
        Command::new(&server_bin).args(["-s", "-1", "-J", "-B", "127.0.0.1", "-p", &port]),
    );
    wait_listening_after_probe(port.parse().unwrap(), &server_bin);
    let client = run(
        Command::new(&client_bin)
            .args(["-c", "127.0.0.1", "-p", &port, "-J"])
            .args(args),
        Duration::from_secs(40),
    );
    let server_out = server.wait(Duration::from_secs(20));
    let c = json_of(&client, "client");
    let s = json_of(&server_out, "server");
    assert!(
        client.status.success(),
        "client failed: {}\n{}",
        String::from_utf8_lossy(&client.stderr),
        String::from_utf8_lossy(&client.stdout)
    );
    assert!(c.get("error").is_none(), "client error: {}", c["error"]);
    assert!(s.get("error").is_none(), "server error: {}", s["error"]);
    (c, s)
}

/// iperf3 servers close a probe connection badly; only probe netmeter servers by
/// connecting. For iperf3, give it a moment to bind.
fn wait_listening_after_probe(port: u16, server_bin: &str) {
    if server_bin == netmeter() {
        // netmeter drops a connection that sends no cookie without holding a slot.
        wait_listening(port);
    } else {
        std::thread::sleep(Duration::from_millis(400));
    }
}

/// The sum objects that describe client→server and server→client traffic.
fn sums(v: &Value, tcp: bool, reverse_dir: bool) -> (f64, f64) {
    let suffix = if reverse_dir { "_bidir_reverse" } else { "" };
    let sent = v["end"][format!("sum_sent{suffix}")]["bytes"]
        .as_f64()
        .unwrap_or(-1.0);
    let recv = v["end"][format!("sum_received{suffix}")]["bytes"]
        .as_f64()
        .unwrap_or(-1.0);
    let _ = tcp;
    (sent, recv)
}

fn check_tcp(c: &Value, s: &Value, who: Who, mode: &str, peer_key: &str) {
    let threaded_iperf3 = peer_key != "NETMETER_IPERF3_312";
    // One write: iperf3's 128 KiB, or netmeter's 1 MiB bulk block when it is the client.
    let block = c["start"]["test_start"]["blksize"].as_f64().unwrap_or(0.0);
    assert!(
        block > 0.0,
        "{mode}: no start.test_start.blksize in the client JSON"
    );
    let dirs: &[bool] = if mode == "bidir" {
        &[false, true]
    } else {
        &[false]
    };
    let streams = if mode == "bidir" {
        1.0
    } else {
        c["end"]["streams"].as_array().map_or(1, |a| a.len()) as f64
    };
    for &rev in dirs {
        let (c_sent, c_recv) = sums(c, true, rev);
        assert!(
            c_sent > 0.0 && c_recv > 0.0,
            "{mode} (reverse half: {rev}): empty sums in client JSON: sent {c_sent} received {c_recv}\n{}",
            serde_json::to_string(&c["end"]).unwrap()
        );
        let server_sends = match mode {
            "reverse" => true,
            "bidir" => rev,
            _ => false,
        };
        let netmeter_receives = (who == Who::NetmeterClient) == server_sends;
        // iperf3 3.16+ senders can leave their last writes out of their own count when
        // their threads are cancelled, so a receiver may see a few blocks more.
        let sender_undercount = if threaded_iperf3 && netmeter_receives {
            4.0 * block * streams
        } else {
            0.0
        };
        if netmeter_receives {
            // netmeter drains its receive sockets after the sender stops: it must have
            // counted every byte the sender reported, and nothing the sender did not send.
            assert!(
                c_recv >= c_sent && c_recv <= c_sent + sender_undercount,
                "{mode}: netmeter received {c_recv}, the sender reported {c_sent}"
            );
        } else {
            // iperf3 stops reading at TEST_END: bytes still in the socket buffers (at
            // most tcp_wmem max 4 MiB + tcp_rmem max 32 MiB per stream) are not counted.
            assert!(
                c_recv <= c_sent + 4.0 * block * streams,
                "{mode}: received {c_recv} > sent {c_sent}"
            );
            assert!(
                c_sent - c_recv <= streams * 40.0 * 1024.0 * 1024.0,
                "{mode}: received {c_recv} << sent {c_sent}"
            );
        }
        // Every figure the server measured itself must be what the client reports for
        // it (it travels in the results exchange). iperf3 3.18's own JSON can differ
        // from the results message it sent by one block per stream (its sender thread
        // counts once more after sending the results).
        let (s_sent, s_recv) = sums(s, true, rev);
        let own_json_slack = if threaded_iperf3 && who == Who::NetmeterClient {
            block * streams
        } else {
            0.0
        };
        let (mine, reported) = if server_sends {
            (s_sent, c_sent)
        } else {
            (s_recv, c_recv)
        };
        assert!(
            (mine - reported).abs() <= own_json_slack,
            "{mode}: server measured {mine}, client reports {reported}"
        );
        if who == Who::NetmeterServer {
            assert_eq!(
                (s_sent, s_recv),
                (c_sent, c_recv),
                "{mode}: netmeter server summary"
            );
        }
    }
}

fn check_udp(c: &Value, s: &Value, reverse: bool, who: Who) {
    let lost = num(c, "end.sum.lost_percent");
    assert!(lost <= 1.0, "UDP loss on loopback at 10M: {lost}%");
    let packets = num(c, "end.sum.packets");
    assert!(packets > 500.0, "too few datagrams: {packets}");
    // Each side's own measurement must be there (an iperf3 server prints its JSON
    // before the results exchange, so it only knows its own half).
    let (c_key, s_key) = if reverse {
        ("end.sum_received.bytes", "end.sum_sent.bytes")
    } else {
        ("end.sum_sent.bytes", "end.sum_received.bytes")
    };
    assert!(num(c, c_key) > 0.0, "client {c_key}");
    assert!(num(s, s_key) > 0.0, "server {s_key}");
    let netmeter_receives = (who == Who::NetmeterClient) == reverse;
    if netmeter_receives {
        // netmeter drains its sockets after the sender stops: on loopback it must have
        // received every datagram the sender counted.
        let nm = if who == Who::NetmeterClient { c } else { s };
        let got: f64 = nm["end"]["streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|st| st["udp"]["netmeter"]["receiver_packets"].as_f64().unwrap())
            .sum();
        assert_eq!(
            got,
            num(nm, "end.sum.packets"),
            "netmeter received every datagram"
        );
    } else {
        // iperf3 stops reading at TEST_END; a few datagrams may still be in flight.
        let diff = num(c, "end.sum.packets") - num(s, "end.sum.packets");
        assert!(
            (0.0..=10.0).contains(&diff),
            "packet totals differ by {diff}"
        );
    }
}

macro_rules! interop {
    ($name:ident, $peer:expr, $who:expr, $mode:expr, [$($arg:expr),*]) => {
        #[test]
        fn $name() {
            let args: &[&str] = &[$($arg),*];
            let (c, s) = run_pair($peer, $who, args);
            let mode: &str = $mode;
            if args.contains(&"-u") {
                check_udp(&c, &s, $mode == "reverse", $who);
            } else {
                check_tcp(&c, &s, $who, mode, $peer);
            }
            if let Some(pos) = args.iter().position(|a| *a == "-n") {
                let n: f64 = 1024.0 * 1024.0 * args[pos + 1].trim_end_matches('M').parse::<f64>().unwrap();
                let sent = num(&c, "end.sum_sent.bytes");
                assert!(sent >= n && sent < n + 128.0 * 1024.0, "-n: sent {sent} for {n}");
            }
            if let Some(pos) = args.iter().position(|a| *a == "-k") {
                let k: f64 = args[pos + 1].parse().unwrap();
                let sent = num(&c, "end.sum_sent.bytes");
                assert_eq!(sent, k * 128.0 * 1024.0, "-k: {k} blocks of 128K");
            }
        }
    };
}

macro_rules! both_ways {
    ($peer:expr, $($c:ident, $s:ident, $mode:expr, [$($arg:expr),*];)*) => {
        $(
            interop!($c, $peer, Who::NetmeterClient, $mode, [$($arg),*]);
            interop!($s, $peer, Who::NetmeterServer, $mode, [$($arg),*]);
        )*
    };
}

/// A paced netmeter client against iperf3 3.18: the receiver's seconds and bitrate
/// (what the iperf3 server measured, from its `end_time`) match the sender's.
#[test]
fn paced_receiver_ends_with_sender_vs_iperf3_318() {
    for args in [
        &["-t", "1", "-b", "10M", "-P", "2"][..],
        &["-t", "1", "-b", "10M", "-R"],
        &["-t", "1", "-b", "10M", "--bidir"],
        &["-t", "1", "-u", "-b", "10M", "-P", "2"],
    ] {
        let (c, _) = run_pair("NETMETER_IPERF3_318", Who::NetmeterClient, args);
        assert_receiver_ends_with_sender(&c, &format!("{args:?}"));
    }
}

mod iperf3_312 {
    use super::*;
    both_ways!("NETMETER_IPERF3_312",
        tcp_nm_client, tcp_nm_server, "up", ["-t", "1"];
        reverse_nm_client, reverse_nm_server, "reverse", ["-t", "1", "-R"];
        bidir_nm_client, bidir_nm_server, "bidir", ["-t", "1", "--bidir"];
        parallel_nm_client, parallel_nm_server, "up", ["-t", "1", "-P", "4"];
        bytes_nm_client, bytes_nm_server, "up", ["-n", "64M"];
        blocks_nm_client, blocks_nm_server, "up", ["-k", "300"];
        zerocopy_nm_client, zerocopy_nm_server, "up", ["-t", "1", "-Z"];
        zerocopy_reverse_nm_client, zerocopy_reverse_nm_server, "reverse", ["-t", "1", "-Z", "-R"];
        udp_nm_client, udp_nm_server, "up", ["-t", "1", "-u", "-b", "10M", "-l", "1400"];
        udp_reverse_nm_client, udp_reverse_nm_server, "reverse", ["-t", "1", "-u", "-b", "10M", "-l", "1400", "-R"];
    );
}

mod iperf3_318 {
    use super::*;
    both_ways!("NETMETER_IPERF3_318",
        tcp_nm_client, tcp_nm_server, "up", ["-t", "1"];
        reverse_nm_client, reverse_nm_server, "reverse", ["-t", "1", "-R"];
        bidir_nm_client, bidir_nm_server, "bidir", ["-t", "1", "--bidir"];
        parallel_nm_client, parallel_nm_server, "up", ["-t", "1", "-P", "4"];
        bytes_nm_client, bytes_nm_server, "up", ["-n", "64M"];
        blocks_nm_client, blocks_nm_server, "up", ["-k", "300"];
        zerocopy_nm_client, zerocopy_nm_server, "up", ["-t", "1", "-Z"];
        zerocopy_reverse_nm_client, zerocopy_reverse_nm_server, "reverse", ["-t", "1", "-Z", "-R"];
        udp_nm_client, udp_nm_server, "up", ["-t", "1", "-u", "-b", "10M", "-l", "1400"];
        udp_reverse_nm_client, udp_reverse_nm_server, "reverse", ["-t", "1", "-u", "-b", "10M", "-l", "1400", "-R"];
    );
}
