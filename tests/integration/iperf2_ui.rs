//! `netmeter iperf2` (and netmeter invoked as `iperf`) end to end over loopback: iperf
//! 2's command line runs a test against a netmeter server (on iperf 2's wire, which a
//! netmeter server serves; `iperf2_client` runs it against real iperf 2 servers), and
//! what it prints has the shape of iperf 2.2.1's own output of the same mode (`src/report/testdata/iperf2/`,
//! captured from the real iperf 2.2.1), numbers masked.

use crate::support::*;
use netmeter::report::iperf2::shape::shapes;
use std::process::Command;
use std::time::Duration;

fn capture(name: &str) -> String {
    let p = format!(
        "{}/src/report/testdata/iperf2/{name}.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// `netmeter iperf2 -c 127.0.0.1 -p PORT ARGS` against a fresh one-test netmeter server.
fn iperf2_client(args: &[&str]) -> String {
    let port = free_port();
    let (_srv, _out) = netmeter_server(port, &["-1"]);
    let out = run(
        Command::new(netmeter())
            .args(["iperf2", "-c", "127.0.0.1", "-p", &port.to_string()])
            .args(args),
        CLIENT_TIMEOUT,
    );
    assert!(out.status.success(), "{args:?}: {}", show(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn assert_shape(capture_name: &str, ours: &str) {
    let (want, got) = (shapes(&capture(capture_name)), shapes(ours));
    assert_eq!(
        want, got,
        "{capture_name}: netmeter iperf2's output has not iperf 2.2.1's shape:\n{ours}"
    );
}

#[test]
fn tcp_enhanced_has_iperf2s_layout() {
    let out = iperf2_client(&["-e", "-i", "1", "-t", "2"]);
    assert_shape("tcp.client", &out);
}

#[test]
fn udp_has_iperf2s_layout_with_the_server_report() {
    let out = iperf2_client(&["-u", "-b", "10m", "-i", "1", "-t", "2"]);
    assert_shape("udp_plain.client", &out);
}

#[test]
fn parallel_streams_have_iperf2s_sum_rows() {
    let out = iperf2_client(&["-P", "2", "-e", "-i", "1", "-t", "2"]);
    assert_shape("tcp_p2.client", &out);
}

#[test]
fn bounceback_has_iperf2s_layout() {
    // iperf 2's default period: a burst a second, the second due at the first
    // interval's end. Each round trip counts in the interval its reply's time falls in
    // (`RttRecord::on_round_trip`), as iperf 2 cuts its rows, so the burst lands in the
    // second row however late the host wakes the interval sampler.
    let out = iperf2_client(&["--bounceback", "-i", "1", "-t", "2"]);
    assert_shape("bb.client", &out);
}

#[test]
fn csv_has_iperf2s_columns() {
    let out = iperf2_client(&["-y", "C", "-i", "1", "-t", "2"]);
    assert_shape("tcp_csv.client", &out);
}

#[test]
fn invoked_as_iperf_it_speaks_iperf2() {
    let dir = std::env::temp_dir().join(format!("netmeter-iperf2-ui-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let link = dir.join("iperf");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(netmeter(), &link).expect("symlink");
    let out = run(Command::new(&link).arg("-v"), Duration::from_secs(30));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("iperf version 2"), "{text}");
}

#[test]
fn an_option_netmeter_cannot_honour_is_one_sentence() {
    let out = run(
        Command::new(netmeter()).args(["iperf2", "-c", "127.0.0.1", "-r", "-d"]),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("-r") && err.contains("-d") && err.trim().lines().count() == 1,
        "{err}"
    );
}
