//! `--psk-file` and third-party tests (`-c B --via A`) over loopback: a client with the
//! key runs, one without it or with another key is refused on both sides (the server
//! logs why), an iperf3 client gets iperf3's "test authorization failed", and a
//! third-party request runs only when authenticated and allowed. Replaying a captured
//! proof is covered at the unit level (`auth::psk`).

use crate::support::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
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
        // As `head -c 32 /dev/urandom | base64` makes them.
        std::fs::write(
            dir.join("key"),
            "7y0Y1hQ3u7m0o2a8v5cXg7J4e0LrT+Kq9s/ZpD6bWfE=\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("other"),
            "Qm9vdHN0cmFwIGtleSBub3QgdGhlIHNhbWUgb25lIQ==\n",
        )
        .unwrap();
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
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
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
    // The client proved first, so the server judged it (and sent no proof of its own).
    assert!(
        log.wait_for(
            "pre-shared-key authentication failed: the peer does not have the same pre-shared key",
            1,
            Duration::from_secs(5)
        ),
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
            "--audit-log",
            &keys.path("audit.jsonl"),
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
    // Both refusals are in A's audit log, with their reasons.
    let reasons = || -> Vec<String> {
        std::fs::read_to_string(keys.path("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .map(|v| format!("{} {}", v["result"], v["reason"]))
            .collect()
    };
    wait_until("A's audit lines", || reasons().len() >= 2);
    assert_eq!(
        reasons(),
        [r#""refused" "auth""#, r#""refused" "third_party""#],
        "{}",
        a_log.text()
    );
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

/// The client's opening as a netmeter client sends it, with a hello of `psk_version`
/// (`None`: a version 1 hello, without the field).
fn raw_open(port: u16, psk_version: Option<u32>) -> TcpStream {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"rawpskprobe0123456789abcdefghijklmno\0")
        .unwrap();
    let mut b = [0u8; 1];
    c.read_exact(&mut b).unwrap();
    assert_eq!(b[0], 9, "PARAM_EXCHANGE");
    let mut hello = serde_json::json!({ "client_nonce": "11".repeat(32) });
    if let Some(v) = psk_version {
        hello["version"] = v.into();
    }
    let params = serde_json::json!({
        "tcp": true, "omit": 0, "time": 1, "parallel": 1, "len": 131072,
        "client_version": "raw",
        "netmeter": { "version": 1, "psk": hello },
    });
    let body = serde_json::to_vec(&params).unwrap();
    c.write_all(&(body.len() as u32).to_be_bytes()).unwrap();
    c.write_all(&body).unwrap();
    c
}

/// Everything the server sends until it closes (bounded by the read timeout).
fn rest(c: &mut TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    let _ = c.read_to_end(&mut all);
    all
}

/// SERVER_ERROR (-2) with iperf3's IEAUTHTEST (142) and errno 0.
const AUTH_FAILED: [u8; 9] = [0xfe, 0, 0, 0, 142, 0, 0, 0, 0];

/// A connection that has not proved the key gets a random nonce and nothing else that
/// depends on the key: before its proof, the challenge holds only the version and the
/// nonce; after a wrong proof, only iperf3's "test authorization failed". A version 1
/// client (whose server proved first) is refused before any challenge, and the server
/// names the version.
#[test]
fn an_unproved_connection_gets_nothing_that_depends_on_the_key() {
    let keys = Keys::new("unproved");
    let port = free_port();
    let (_srv, log) = netmeter_server(port, &["--psk-file", &keys.path("key")]);

    let mut c = raw_open(port, Some(2));
    let mut hdr = [0u8; 5];
    c.read_exact(&mut hdr).unwrap();
    assert_eq!(hdr[0], 0x41, "NETMETER_AUTH");
    let len = u32::from_be_bytes(hdr[1..].try_into().unwrap()) as usize;
    assert!(len < 1024, "{len}");
    let mut body = vec![0u8; len];
    c.read_exact(&mut body).unwrap();
    let ch: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let mut keys_sent: Vec<&str> = ch.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    keys_sent.sort();
    assert_eq!(keys_sent, ["server_nonce", "version"], "{ch}");
    assert_eq!(ch["version"], 2, "{ch}");
    assert_eq!(ch["server_nonce"].as_str().unwrap().len(), 64, "{ch}");
    let wrong =
        serde_json::to_vec(&serde_json::json!({ "client_proof": "22".repeat(32) })).unwrap();
    c.write_all(&(wrong.len() as u32).to_be_bytes()).unwrap();
    c.write_all(&wrong).unwrap();
    assert_eq!(rest(&mut c), AUTH_FAILED);
    assert!(
        log.wait_for(
            "does not have the same pre-shared key",
            1,
            Duration::from_secs(5)
        ),
        "{}",
        log.text()
    );

    let mut old = raw_open(port, None);
    assert_eq!(rest(&mut old), AUTH_FAILED);
    assert!(
        log.wait_for(
            "the client speaks version 1 of the pre-shared-key exchange and this netmeter version 2: update netmeter on the client",
            1,
            Duration::from_secs(5)
        ),
        "{}",
        log.text()
    );
}

/// A client meeting a server of version 1 (which sends its proof with its nonce) says
/// so in one sentence, and sends no proof of its own.
#[test]
fn a_client_names_an_older_servers_exchange_version() {
    let keys = Keys::new("oldserver");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let fake = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut cookie = [0u8; 37];
        c.read_exact(&mut cookie).unwrap();
        c.write_all(&[9]).unwrap();
        let mut len = [0u8; 4];
        c.read_exact(&mut len).unwrap();
        let mut params = vec![0u8; u32::from_be_bytes(len) as usize];
        c.read_exact(&mut params).unwrap();
        let v1 = serde_json::to_vec(&serde_json::json!({
            "server_nonce": "33".repeat(32),
            "server_proof": "44".repeat(32),
        }))
        .unwrap();
        c.write_all(&[0x41]).unwrap();
        c.write_all(&(v1.len() as u32).to_be_bytes()).unwrap();
        c.write_all(&v1).unwrap();
        // What the client sends after the challenge: nothing (it hangs up).
        rest(&mut c)
    });
    let out = client(port, &["-t", "1", "--psk-file", &keys.path("key")]);
    assert!(!out.status.success(), "{}", show(&out));
    assert!(
        stderr(&out).contains(
            "the server speaks version 1 of the pre-shared-key exchange and this netmeter version 2: update netmeter on the server"
        ),
        "{}",
        show(&out)
    );
    assert_eq!(fake.join().unwrap(), b"");
}

/// A key file that cannot hold 128 random bits is a usage error naming the command
/// that makes a good key; the key that command makes is taken.
#[test]
fn a_weak_key_file_is_refused_with_the_command_that_makes_one() {
    let keys = Keys::new("weak");
    let made = run(
        Command::new(netmeter()).args(["generate", "psk"]),
        Duration::from_secs(10),
    );
    assert!(made.status.success(), "{}", show(&made));
    let good = keys.path("generated");
    std::fs::write(&good, &made.stdout).unwrap();
    let port = free_port();
    let (_srv, _log) = netmeter_server(port, &["--psk-file", &good]);
    let v = client_json(port, &["-t", "1", "--psk-file", &good]);
    assert!(f64_at(&v, "/end/sum_received/bytes") > 0.0, "{v}");

    let weak = keys.path("weak");
    std::fs::write(&weak, "correct horse battery staple\n").unwrap();
    let server = run(
        Command::new(netmeter()).args(["-s", "-1", "--psk-file", &weak]),
        Duration::from_secs(10),
    );
    assert_eq!(server.status.code(), Some(1), "{}", show(&server));
    for e in [stderr(&server), usage_error(&["--psk-file", &weak])] {
        assert!(
            e.contains("a printable phrase")
                && e.contains("head -c 32 /dev/urandom | base64 > FILE"),
            "{e}"
        );
    }
}
