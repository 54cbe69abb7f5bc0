//! `--psk-file` and third-party tests (`-c B --via A`) over loopback: a client with the
//! key runs, one without it or with another key is refused on both sides (the server
//! logs why), an iperf3 client gets iperf3's "test authorization failed", and a
//! third-party request runs only when authenticated and allowed. Replaying a captured
//! proof is covered at the unit level (`auth::psk`).

use crate::support::*;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// A key file in a fresh temporary directory (removed with the value).
struct Keys {
    dir: PathBuf,
}

impl Keys {
    fn new(tag: &str) -> Keys {
        let dir = std::env::temp_dir().join(format!("nm-psk-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("key"), "a shared key of 32 bytes, at least\n").unwrap();
        std::fs::write(dir.join("other"), "another key, also long enough\n").unwrap();
        Keys { dir }
    }
    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_server_with_a_key_takes_only_clients_that_prove_it() {
    let keys = Keys::new("server");
    let port = free_port();
    let (_srv, log) = netmeter_server(port, &["--psk-file", &keys.path("key")]);

    let v = client_json(port, &["-t", "1", "--psk-file", &keys.path("key")]);
    assert!(f64_at(&v, "/end/sum_received/bytes") > 0.0, "{v}");

    let none = client(port, &["-t", "1"]);
    assert!(!none.status.success(), "{}", show(&none));
    assert!(
        stderr(&none).contains("requires a pre-shared key (--psk-file)"),
        "{}",
        show(&none)
    );
    assert!(
        log.wait_for("no pre-shared-key nonce", 1, Duration::from_secs(5)),
        "{}",
        log.text()
    );

    let wrong = client(port, &["-t", "1", "--psk-file", &keys.path("other")]);
    assert!(!wrong.status.success(), "{}", show(&wrong));
    assert!(
        stderr(&wrong).contains("does not have the same pre-shared key"),
        "{}",
        show(&wrong)
    );
    assert!(
        log.wait_for("left without proving the key", 1, Duration::from_secs(5)),
        "{}",
        log.text()
    );

    // The server keeps serving after the refusals.
    let again = client_json(port, &["-t", "1", "--psk-file", &keys.path("key")]);
    assert!(f64_at(&again, "/end/sum_received/bytes") > 0.0);
}

#[test]
fn a_client_with_a_key_refuses_a_server_without_one() {
    let keys = Keys::new("client");
    let port = free_port();
    let (_srv, _log) = netmeter_server(port, &[]);
    let out = client(port, &["-t", "1", "--psk-file", &keys.path("key")]);
    assert!(!out.status.success(), "{}", show(&out));
    assert!(
        stderr(&out).contains("did not ask for the pre-shared key"),
        "{}",
        show(&out)
    );
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs iperf3 3.22 (peers.env)"
)]
fn an_iperf3_client_gets_iperf3s_authorization_failure() {
    let keys = Keys::new("iperf3");
    let port = free_port();
    let (_srv, log) = netmeter_server(port, &["--psk-file", &keys.path("key")]);
    let out = run(
        Command::new(peer("NETMETER_IPERF3_322")).args([
            "-c",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            "1",
        ]),
        CLIENT_TIMEOUT,
    );
    assert!(!out.status.success(), "{}", show(&out));
    assert!(
        show(&out).contains("test authorization failed"),
        "{}",
        show(&out)
    );
    assert!(
        log.wait_for("no pre-shared-key nonce", 1, Duration::from_secs(5)),
        "{}",
        log.text()
    );
}

fn via(a: u16, b: u16, key: &str, args: &[&str]) -> std::process::Output {
    run(
        Command::new(netmeter())
            .args(["-c", "127.0.0.1", "-p", &b.to_string()])
            .args(["--via", &format!("127.0.0.1:{a}"), "--psk-file", key])
            .args(args),
        CLIENT_TIMEOUT,
    )
}

#[test]
fn a_third_party_test_runs_on_the_source_and_reports_back() {
    let keys = Keys::new("via");
    let (a, b) = (free_port(), free_port());
    let (_a, a_log) = netmeter_server(
        a,
        &[
            "--psk-file",
            &keys.path("key"),
            "--allow-third-party",
            "127.0.0.0/8",
        ],
    );
    let (_b, b_log) = netmeter_server(b, &[]);
    let out = via(
        a,
        b,
        &keys.path("key"),
        &["-t", "1", "-u", "-b", "20M", "-J"],
    );
    assert!(out.status.success(), "{}", show(&out));
    let v = json_of(&out, "controller");
    // A's report of its UDP test to B: B's address, about 20 Mbit/s.
    assert_eq!(
        v["start"]["connecting_to"]["port"].as_u64(),
        Some(b as u64),
        "{v}"
    );
    let bps = f64_at(&v, "/end/sum_received/bits_per_second");
    assert!((15e6..25e6).contains(&bps), "{bps}");
    assert!(a_log.wait_for("third-party test for 127.0.0.1", 1, Duration::from_secs(5)));
    assert!(
        b_log.wait_for("Accepted connection", 1, Duration::from_secs(5)),
        "{}",
        b_log.text()
    );

    // Text: A's interval rows and summary.
    let text = via(a, b, &keys.path("key"), &["-t", "1"]);
    assert!(text.status.success(), "{}", show(&text));
    let t = String::from_utf8_lossy(&text.stdout);
    assert!(
        t.contains("Test from 127.0.0.1 to 127.0.0.1") && t.contains("receiver"),
        "{t}"
    );
}

#[test]
fn third_party_requests_are_refused_unless_authenticated_and_allowed() {
    let keys = Keys::new("refuse");
    let (a, b, c) = (free_port(), free_port(), free_port());
    let (_a, a_log) = netmeter_server(
        a,
        &[
            "--psk-file",
            &keys.path("key"),
            "--allow-third-party",
            "127.0.0.2/32",
        ],
    );
    let (_b, _) = netmeter_server(b, &[]);
    let (_c, _) = netmeter_server(c, &["--psk-file", &keys.path("key")]);
    // Wrong key: refused before anything runs.
    let wrong = via(a, b, &keys.path("other"), &["-t", "1"]);
    assert!(!wrong.status.success());
    assert!(
        stderr(&wrong).contains("pre-shared key"),
        "{}",
        show(&wrong)
    );
    // Authenticated, but 127.0.0.1 is not in A's list.
    let denied = via(a, b, &keys.path("key"), &["-t", "1"]);
    assert!(!denied.status.success());
    assert!(
        stderr(&denied).contains("not in this server's --allow-third-party"),
        "{}",
        show(&denied)
    );
    assert!(a_log.wait_for("refused a third-party request", 1, Duration::from_secs(5)));
    // A server with a key but no --allow-third-party.
    let none = via(c, b, &keys.path("key"), &["-t", "1"]);
    assert!(
        stderr(&none).contains("does not run third-party tests"),
        "{}",
        show(&none)
    );
    // A's own --server-max-duration holds for the tests it runs for others.
    let d = free_port();
    let (_d, _) = netmeter_server(
        d,
        &[
            "--psk-file",
            &keys.path("key"),
            "--allow-third-party",
            "127.0.0.1",
            "--server-max-duration",
            "2",
        ],
    );
    let long = via(d, b, &keys.path("key"), &["-t", "5"]);
    assert!(
        stderr(&long).contains("over this server's limits"),
        "{}",
        show(&long)
    );
    // Options that touch the source host's files never leave the controller.
    let file = via(a, b, &keys.path("key"), &["-F", "/etc/passwd"]);
    assert!(
        stderr(&file).contains("-F cannot be part of a third-party test"),
        "{}",
        show(&file)
    );
}

/// netmeter to netmeter only: a client with a key, or a third-party request, meets an
/// iperf3 server that cannot prove it, and stops with one sentence.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs iperf3 3.22 (peers.env)"
)]
fn a_key_holder_refuses_an_iperf3_server() {
    let keys = Keys::new("iperf3srv");
    let port = free_port();
    let mut srv = Proc::spawn(
        "iperf3 server",
        Command::new(peer("NETMETER_IPERF3_322")).args([
            "-s",
            "-B",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ]),
    );
    let _log = srv.drain();
    wait_listening(port);
    let out = client(port, &["-t", "1", "--psk-file", &keys.path("key")]);
    assert!(!out.status.success(), "{}", show(&out));
    assert!(
        stderr(&out).contains("did not ask for the pre-shared key"),
        "{}",
        show(&out)
    );
    let b = free_port();
    let via_out = via(port, b, &keys.path("key"), &["-t", "1"]);
    assert!(!via_out.status.success(), "{}", show(&via_out));
    assert!(
        stderr(&via_out).contains("did not ask for the pre-shared key"),
        "{}",
        show(&via_out)
    );
}
