//! UDP `--isochronous` between netmeter and the real iperf 2s (2.1.8, 2.2.1), both ways,
//! judged by the frames the far end counts: iperf 2.2 moved the frame fields 4 bytes
//! on (`wire::iperf2::IsochLayout`), so each side must put them where the other reads
//! them. An iperf 2 server's `Frame:rx/lost` for netmeter's frames; netmeter's
//! (`netmeter iperf2 -s -e`) for an iperf 2 client's, against its `isoch:tx/miss/slip`.
//!
//! Both count as iperf 2 counts (`Reporter.c`): the first frame twice, so a count is
//! the frames plus one. A frame sent after a slip (a frame slot the busy sender
//! skipped) is not timed by the receiver, so not counted: a receiver's count may fall
//! short of the frames sent by the slips, never more, and never exceed them.

use crate::support::*;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

const V218: &str = "NETMETER_IPERF2_218";
const V221: &str = "NETMETER_IPERF2_221";
/// 60 frames a second of 10 Mbit/s (iperf 2's own example) for 2 s: about 120 frames.
const ISOCH: &str = "60:10m,1m";

/// Wait until `p` has bound UDP `port`.
fn await_udp(p: &Proc, port: u16, d: &Drained) {
    let pid = p.pid();
    await_evidence(
        &format!("UDP port {port} bound"),
        || udp_bound(pid, port),
        || d.text(),
    );
}

/// The `rx/lost` (or `tx/miss/slip`) figures after the `pps` of an iperf 2 row.
fn frames_after_pps(row: &str) -> Option<Vec<u64>> {
    let rest = row.split(" pps").nth(1)?;
    let field = rest.split_whitespace().next()?;
    field.split('/').map(|x| x.parse().ok()).collect()
}

/// The whole test's row of a test run without `-i`: its only data row.
fn data_row(text: &str) -> Option<String> {
    text.lines()
        .find(|l| l.contains(" 0.0000-") && l.contains(" pps"))
        .map(str::to_string)
}

/// A datagram count `lost/total` in a row.
fn lost_datagrams(row: &str) -> u64 {
    row.split_whitespace()
        .find_map(|w| {
            let (l, t) = w.split_once('/')?;
            t.parse::<u64>().ok()?;
            l.parse().ok()
        })
        .unwrap_or(0)
}

/// netmeter's isochronous UDP client against a real iperf 2 server (`-e`): the
/// server counts every frame netmeter sent (the first twice, as iperf 2 counts),
/// less at most those sent after a slip or whose datagrams were lost. `version`:
/// `--iperf2-version` when given.
fn client_to_iperf2_server(key: &str, version: Option<&str>) {
    let port = free_port();
    let mut srv = Proc::spawn(
        key,
        Command::new("stdbuf")
            .args(["-oL", &peer(key), "-s", "-u", "-e", "-B", "127.0.0.1"])
            .args(["-p", &port.to_string()]),
    );
    let d = srv.drain();
    await_udp(&srv, port, &d);
    let out = run(
        Command::new(netmeter())
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "--iperf2", "-J"])
            .args(["-u", "--isochronous", ISOCH, "--trip-times", "-t", "2"])
            .args(version.map_or(vec![], |v| vec!["--iperf2-version", v])),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "netmeter failed:\n{}", show(&out));
    let v: Value = json_of(&out, "netmeter");
    let sender = &v["end"]["netmeter"]["isochronous"]["sender"];
    let sent = sender["sent"].as_u64().expect("frames sent");
    let slips = sender["slips"].as_u64().unwrap_or(0);
    let row = await_value(&format!("{key}'s whole-test row"), || data_row(&d.text()));
    drop(srv);
    let what = format!("{key}: netmeter sent {sent} frames, {slips} slips; {row}");
    assert!(sent >= 60, "{what}");
    let f = frames_after_pps(&row).unwrap_or_else(|| panic!("no Frame:rx/lost: {what}"));
    let counted = f[0].saturating_sub(1);
    let lost = lost_datagrams(&row);
    assert!(counted <= sent, "{what}");
    assert!(
        counted + slips + lost >= sent,
        "the server counted too few frames: {what}"
    );
    if slips + lost == 0 {
        assert_eq!(counted, sent, "{what}");
    }
}

/// A real iperf 2 isochronous UDP client against `netmeter iperf2 -s -e`: netmeter's
/// `Frame:rx/lost` is the client's `isoch:tx` (both iperf 2's count), less at most
/// the client's slips and the datagrams lost.
fn iperf2_client_to_netmeter(key: &str) {
    let port = free_port();
    let mut srv = Proc::spawn(
        "netmeter iperf2 server",
        Command::new(netmeter())
            .args(["iperf2", "-s", "-u", "-e", "-B", "127.0.0.1"])
            .args(["-p", &port.to_string()]),
    );
    let d = srv.drain();
    await_udp(&srv, port, &d);
    let out = run_bounded(
        Command::new(peer(key))
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-u", "-e"])
            .args(["-t", "2", &format!("--isochronous={ISOCH}"), "--trip-times"]),
        Duration::from_secs(60),
        "iperf 2 client",
    );
    let client = String::from_utf8_lossy(&out.stdout).into_owned();
    let client_row = data_row(&client).unwrap_or_else(|| panic!("{key}:\n{}", show(&out)));
    let tx = frames_after_pps(&client_row).expect("isoch:tx/miss/slip");
    let (sent, slips) = (tx[0], tx[2]);
    let row = await_value("netmeter's whole-test row", || {
        let text = String::from_utf8_lossy(&d.stdout.lock().unwrap()).into_owned();
        text.lines()
            .skip_while(|l| !l.contains("Frame:rx/lost"))
            .find(|l| l.contains(" 0.0000-"))
            .map(str::to_string)
    });
    drop(srv);
    let what = format!("{key} sent {sent} frames, {slips} slips ({client_row}); netmeter: {row}");
    assert!(sent >= 60, "{what}");
    let f = frames_after_pps(&row).unwrap_or_else(|| panic!("no Frame:rx/lost: {what}"));
    let lost = lost_datagrams(&row);
    assert!(f[0] <= sent, "{what}");
    assert!(
        f[0] + slips + lost >= sent,
        "netmeter counted too few frames: {what}"
    );
    if slips + lost == 0 {
        assert_eq!(f[0], sent, "{what}");
    }
}

iperf2_peer_test!(
    netmeter_frames_counted_by_iperf_221,
    client_to_iperf2_server(V221, None)
);
iperf2_peer_test!(
    netmeter_frames_counted_by_iperf_218,
    client_to_iperf2_server(V218, Some("2.1"))
);
iperf2_peer_test!(
    iperf_221_frames_counted_by_netmeter,
    iperf2_client_to_netmeter(V221)
);
iperf2_peer_test!(
    iperf_218_frames_counted_by_netmeter,
    iperf2_client_to_netmeter(V218)
);
