//! RSA authentication (`--username` … `--use-pkcs1-padding`, src/auth) end to end.
//!
//! Quick tier: netmeter at both ends, and a raw control client that sends the
//! credentials iperf3's clients cannot (none, garbage, truncated, skewed, replayed) and
//! times the refusals of an unknown user and of a wrong password.
//! Full tier: real iperf3 3.12 (PKCS#1 v1.5 only), 3.18 and 3.22 in both directions,
//! success and refusals, each judged by the peer's own output: its `-J` document when the
//! peer is the client, its log when it is the server.
//!
//! The RSA key is made at test time (once per run, in the test's temporary directory).

use crate::support::*;
use netmeter::auth::{ClientAuth, Padding, PublicKey};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const PARAM_EXCHANGE: u8 = 0x09;
const CREATE_STREAMS: u8 = 0x0a;
const SERVER_ERROR: u8 = 0xfe;
/// iperf3's `IEAUTHTEST`.
const IEAUTHTEST: i32 = 142;

/// Key files and a users file: alice/secret and carol/pw2.
struct Files {
    key: String,
    public: String,
    users: String,
}

fn files() -> &'static Files {
    static FILES: OnceLock<Files> = OnceLock::new();
    FILES.get_or_init(|| {
        use rsa::pkcs8::{DecodePrivateKey, EncodePrivateKey, EncodePublicKey, LineEnding};
        // A fixed key (the unit tests' fixture, made for tests only), not a random one:
        // every run sees the same key, and none waits for one to be generated.
        let fixed = include_str!("../../src/auth/testdata/test-only-key.pem");
        let key = rsa::RsaPrivateKey::from_pkcs8_pem(fixed).expect("the fixture's RSA key");
        let dir = std::env::temp_dir().join(format!("netmeter-auth-it-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = |n: &str| dir.join(n).to_str().unwrap().to_string();
        let (k, p, u) = (path("key.pem"), path("public.pem"), path("users.csv"));
        std::fs::write(&k, key.to_pkcs8_pem(LineEnding::LF).unwrap().as_bytes()).unwrap();
        std::fs::write(
            &p,
            key.to_public_key()
                .to_public_key_pem(LineEnding::LF)
                .unwrap(),
        )
        .unwrap();
        let users = format!(
            "# netmeter test users\nalice,{}\ncarol,{}\n",
            netmeter::auth::password_hash("alice", "secret"),
            netmeter::auth::password_hash("carol", "pw2")
        );
        std::fs::write(&u, users).unwrap();
        Files {
            key: k,
            public: p,
            users: u,
        }
    })
}

fn server_flags(pkcs1: bool) -> Vec<String> {
    let f = files();
    let mut v = vec![
        "--rsa-private-key-path".to_string(),
        f.key.clone(),
        "--authorized-users-path".into(),
        f.users.clone(),
    ];
    if pkcs1 {
        v.push("--use-pkcs1-padding".into());
    }
    v
}

/// A netmeter server that requires authentication, with `extra` flags; its log.
fn nm_auth_server(port: u16, pkcs1: bool, extra: &[&str]) -> (Proc, Drained) {
    let mut flags = server_flags(pkcs1);
    flags.extend(extra.iter().map(|s| s.to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    netmeter_server(port, &flags)
}

/// An iperf3 server that requires authentication (OAEP, except 3.12: PKCS#1 v1.5); its
/// log, flushed as it goes.
fn iperf3_auth_server(bin: &str, port: u16) -> (Proc, Drained) {
    let mut server = Proc::spawn(
        "iperf3 server",
        Command::new(bin)
            .args([
                "-s",
                "-B",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "--forceflush",
            ])
            .args(server_flags(false)),
    );
    let log = server.drain();
    // Its banner (a probe connection, which iperf3 servers close badly, is no evidence).
    log.await_since(0, "Server listening", 1, bin);
    (server, log)
}

/// netmeter's client was refused: an error exit and iperf3's words in its `-J` error.
fn assert_nm_refused(out: &Output, what: &str) {
    assert!(!out.status.success(), "{what}: exit 0\n{}", show(out));
    assert_refused(out, what);
}

/// Tests here run one at a time: the timing test must not share the CPU with the
/// others' RSA work and data transfers.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A client command (netmeter or iperf3) authenticating as `user` with `password`.
fn auth_client(bin: &str, port: u16, user: &str, password: &str, extra: &[&str]) -> Output {
    run(
        Command::new(bin)
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1", "-J"])
            .args(["--username", user, "--rsa-public-key-path", &files().public])
            .args(extra)
            .env("IPERF3_PASSWORD", password),
        Duration::from_secs(40),
    )
}

/// The client's `-J` says the test ran: bytes received, no error.
fn assert_ran(out: &Output, what: &str) {
    let v = json_of(out, what);
    assert!(v.get("error").is_none(), "{what}: {}", show(out));
    assert!(
        f64_at(&v, "/end/sum_received/bytes") > 0.0,
        "{what}: nothing received\n{}",
        show(out)
    );
}

/// The client was refused with iperf3's "test authorization failed", in its `-J` error.
/// (iperf3 3.12 with -J exits 0 even then: the document is the verdict.)
fn assert_refused(out: &Output, what: &str) {
    let v = json_of(out, what);
    let e = v["error"].as_str().unwrap_or("");
    assert!(
        e.contains("test authorization failed"),
        "{what}: error {e:?}\n{}",
        show(out)
    );
}

// ---------------------------------------------------------------------------------
// A raw control client

/// One attempt with `token` in otherwise plain iperf3 TCP parameters: the first state
/// byte after the parameters, the error code if it was `SERVER_ERROR`, and how long
/// the answer took from the end of the parameters.
fn raw_attempt(port: u16, token: Option<&str>) -> (u8, Option<i32>, Duration) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_nodelay(true).unwrap();
    s.write_all(&cookie()).unwrap();
    let mut b = [0u8; 1];
    s.read_exact(&mut b).unwrap();
    assert_eq!(b[0], PARAM_EXCHANGE);
    let mut params = serde_json::json!({
        "tcp": true, "omit": 0, "time": 1, "num": 0, "blockcount": 0, "parallel": 1,
        "len": 131072, "pacing_timer": 1000, "client_version": "3.22"
    });
    if let Some(t) = token {
        params["authtoken"] = t.into();
    }
    let body = params.to_string();
    let mut msg = (body.len() as u32).to_be_bytes().to_vec();
    msg.extend_from_slice(body.as_bytes());
    s.write_all(&msg).unwrap();
    let t0 = Instant::now();
    s.read_exact(&mut b).unwrap();
    let took = t0.elapsed();
    let code = (b[0] == SERVER_ERROR).then(|| {
        let mut c = [0u8; 4];
        s.read_exact(&mut c).unwrap();
        // The server is done with a refused connection once it has closed it (EOF):
        // the next attempt then meets a server with nothing else to do.
        s.set_read_timeout(Some(EVIDENCE_TIMEOUT)).unwrap();
        let _ = s.read_to_end(&mut Vec::new());
        i32::from_be_bytes(c)
    });
    (b[0], code, took)
}

/// A well-formed random cookie (36 base32 characters and a NUL).
fn cookie() -> [u8; 37] {
    let mut c = [0u8; 37];
    netmeter::sock::random_bytes(&mut c[..36]).unwrap();
    for b in c.iter_mut().take(36) {
        *b = b"abcdefghijklmnopqrstuvwxyz234567"[(*b % 32) as usize];
    }
    c
}

fn token(user: &str, password: &str, padding: Padding, ts_offset_s: i64) -> String {
    let public = PublicKey::read(std::path::Path::new(&files().public)).unwrap();
    let a = ClientAuth {
        user: user.into(),
        password: password.into(),
        key: public,
        padding,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    a.token_at(now + ts_offset_s).unwrap()
}

// ---------------------------------------------------------------------------------
// Quick tier: netmeter at both ends

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn netmeter_client_and_server_with_either_padding() {
    let _serial = serial();
    for pkcs1 in [false, true] {
        let port = free_port();
        let (_server, log) = nm_auth_server(port, pkcs1, &[]);
        let pad: &[&str] = if pkcs1 { &["--use-pkcs1-padding"] } else { &[] };
        let what = |w: &str| format!("{w} (pkcs1 {pkcs1})");
        assert_ran(
            &auth_client(netmeter(), port, "alice", "secret", pad),
            &what("alice"),
        );
        assert_nm_refused(
            &auth_client(netmeter(), port, "alice", "Secret", pad),
            &what("wrong password"),
        );
        assert_nm_refused(
            &auth_client(netmeter(), port, "bob", "secret", pad),
            &what("unknown user"),
        );
        let other: &[&str] = if pkcs1 { &[] } else { &["--use-pkcs1-padding"] };
        assert_nm_refused(
            &auth_client(netmeter(), port, "alice", "secret", other),
            &what("other padding"),
        );
        let none = client(port, &["-t", "1", "-J"]);
        assert_nm_refused(&none, &what("no credential"));
        // One log line per refusal, and the server still serves.
        assert!(
            log.wait_for("test authorization failed", 4, Duration::from_secs(5)),
            "{}",
            log.text()
        );
        assert_ran(
            &auth_client(netmeter(), port, "carol", "pw2", pad),
            &what("carol after the refusals"),
        );
        let text = log.text();
        assert_eq!(text.matches("refused a test").count(), 4, "{text}");
        assert!(
            text.contains("user 'bob': unknown user or wrong password"),
            "{text}"
        );
        assert!(text.contains("no credential in the parameters"), "{text}");
        assert!(
            !text.contains("Secret"),
            "a password never reaches the log: {text}"
        );
    }
}

/// `--audit-log` names the authenticated user of a test, and a refused credential as
/// an `auth` refusal without a user (and never the password).
#[test]
fn audit_log_names_the_authenticated_user() {
    let _serial = serial();
    let port = free_port();
    let audit = std::env::temp_dir().join(format!("netmeter-auth-audit-{}", std::process::id()));
    let _ = std::fs::remove_file(&audit);
    let (_server, _log) = nm_auth_server(port, false, &["--audit-log", audit.to_str().unwrap()]);
    assert_ran(
        &auth_client(netmeter(), port, "alice", "secret", &[]),
        "alice",
    );
    assert_nm_refused(
        &auth_client(netmeter(), port, "carol", "Secret", &[]),
        "wrong password",
    );
    // Each line is written when its session ends, which can be after the client exits.
    let read = || std::fs::read_to_string(&audit).unwrap_or_default();
    wait_until("two audit lines", || read().lines().count() >= 2);
    let text = read();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["user"], "alice", "{text}");
    assert_eq!(lines[0]["result"], "ok", "{text}");
    assert!(lines[1]["user"].is_null(), "{text}");
    assert_eq!(
        (lines[1]["result"].as_str(), lines[1]["reason"].as_str()),
        (Some("refused"), Some("auth")),
        "{text}"
    );
    assert!(
        !text.contains("Secret") && !text.contains("secret"),
        "{text}"
    );
    let _ = std::fs::remove_file(&audit);
}

/// A user name is the peer's choice: its terminal escapes, BEL and line separator reach
/// the server's log escaped, not raw (issue 20 item 5).
#[test]
fn a_user_name_with_control_characters_shows_escaped_in_the_server_log() {
    let port = free_port();
    let (mut srv, log) = nm_auth_server(port, false, &["--verbose"]);
    let evil = "ev\x1b[31mil\x07\u{2028}x";
    let (_, code, _) = raw_attempt(port, Some(&token(evil, "nope", Padding::Oaep, 0)));
    assert_eq!(code, Some(IEAUTHTEST));
    let shown = "user 'ev\\x1b[31mil\\x07\\u{2028}x'";
    assert!(
        log.wait_for(shown, 1, Duration::from_secs(10)),
        "{}",
        log.text()
    );
    let text = log.text();
    assert!(
        !text.contains('\x1b') && !text.contains('\x07') && !text.contains('\u{2028}'),
        "{text:?}"
    );
    assert!(srv.alive());
}

#[test]
fn server_refuses_forged_skewed_and_replayed_credentials_and_keeps_serving() {
    let _serial = serial();
    let port = free_port();
    let (_server, log) = nm_auth_server(port, false, &["--max-tests", "4"]);
    let good = token("alice", "secret", Padding::Oaep, 0);
    let cases: Vec<(&str, String)> = vec![
        ("garbage", "this is not base64!".into()),
        ("truncated", good[..200].to_string()),
        ("empty", String::new()),
        ("noise of the right size", good.chars().rev().collect()),
        (
            "PKCS#1 to an OAEP server",
            token("alice", "secret", Padding::Pkcs1v15, 0),
        ),
        ("60 s old", token("alice", "secret", Padding::Oaep, -60)),
        ("60 s ahead", token("alice", "secret", Padding::Oaep, 60)),
        ("huge", "QUFB".repeat(1000)),
    ];
    for (what, t) in &cases {
        let (st, code, _) = raw_attempt(port, Some(t));
        assert_eq!((st, code), (SERVER_ERROR, Some(IEAUTHTEST)), "{what}");
    }
    // A good credential opens a test (the raw client then walks away)...
    let (st, code, _) = raw_attempt(port, Some(&good));
    assert_eq!(
        (st, code),
        (CREATE_STREAMS, None),
        "first use of a good credential"
    );
    // ...but not twice.
    let (st, code, _) = raw_attempt(port, Some(&good));
    assert_eq!(
        (st, code),
        (SERVER_ERROR, Some(IEAUTHTEST)),
        "replayed credential"
    );
    let n = cases.len() + 1;
    assert!(
        log.wait_for("refused a test", n, Duration::from_secs(5)),
        "{}",
        log.text()
    );
    let text = log.text();
    for needle in [
        "not base64",
        "bytes for a 256-byte key",
        "does not decrypt",
        "s from this host's clock",
        "replayed",
        "longer than any RSA key",
    ] {
        assert!(text.contains(needle), "log lacks {needle:?}:\n{text}");
    }
    assert_eq!(
        text.matches("refused a test").count(),
        n,
        "one line per refusal:\n{text}"
    );
    assert_ran(
        &auth_client(netmeter(), port, "alice", "secret", &[]),
        "a good client afterwards",
    );
}

/// `-1`: a refused client does not count as the one test (as in iperf3 3.22), and
/// `--time-skew-threshold` moves the limit: with 120, a credential 150 s old is refused
/// and one 60 s old (refused by the default 10) opens the test.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn one_off_server_waits_for_an_authenticated_client_within_its_threshold() {
    let _serial = serial();
    let port = free_port();
    let (mut server, log) = nm_auth_server(port, false, &["-1", "--time-skew-threshold", "120"]);
    assert_nm_refused(
        &auth_client(netmeter(), port, "alice", "nope", &[]),
        "wrong password",
    );
    let stale = token("alice", "secret", Padding::Oaep, -150);
    assert_eq!(
        raw_attempt(port, Some(&stale)).1,
        Some(IEAUTHTEST),
        "150 s old"
    );
    assert!(
        server.alive(),
        "refusals do not end a -1 server\n{}",
        log.text()
    );
    let late = token("alice", "secret", Padding::Oaep, -60);
    let (st, code, _) = raw_attempt(port, Some(&late));
    assert_eq!(
        (st, code),
        (CREATE_STREAMS, None),
        "60 s old, threshold 120"
    );
    // The raw client walks away: that was the -1 server's one test.
    wait_until("the -1 server to exit after its test", || !server.alive());
    assert_eq!(
        log.text().matches("refused a test").count(),
        2,
        "{}",
        log.text()
    );
}

/// The server must not tell "unknown user" from "wrong password" by its answer time.
/// One measurement: 50 rounds of four attempts, unknown user / wrong password / wrong
/// password / unknown user, 15 ms apart (the server idle at each), so that both kinds
/// take each place in a round. Load from other processes only ever adds time, so each
/// round keeps the quicker attempt of each kind, and the measurement is the median over
/// the rounds of their difference. It must stay within 0.5 ms (a refusal takes ~3.5 ms
/// here, nearly all of it RSA), or 8 % of the typical refusal time when load makes that
/// longer. A burst of load from elsewhere can still push one measurement over, so one
/// over the bound is measured twice more and the median of the three decides: a real
/// difference shows in all three. Broken on purpose, with a 1 ms pause on the
/// unknown-user path only, this test fails.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn unknown_user_and_wrong_password_take_the_same_time() {
    let _serial = serial();
    let port = free_port();
    let (_server, _log) = nm_auth_server(port, false, &[]);
    let attempt = |unknown: bool| {
        let (user, pw) = if unknown {
            ("mallory", "secret")
        } else {
            ("alice", "wrong")
        };
        let t = token(user, pw, Padding::Oaep, 0);
        // (raw_attempt returns once the server has closed the connection it refused.)
        let (st, code, took) = raw_attempt(port, Some(&t));
        assert_eq!((st, code), (SERVER_ERROR, Some(IEAUTHTEST)), "{user}");
        took.as_secs_f64() * 1e3
    };
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    // (unknown minus wrong, ms; the bound, ms)
    let measure = || {
        let (mut diffs, mut all) = (Vec::new(), Vec::new());
        for round in 0..52 {
            let t: Vec<f64> = [true, false, false, true].map(attempt).to_vec();
            if round >= 2 {
                diffs.push(t[0].min(t[3]) - t[1].min(t[2]));
                all.extend(t);
            }
        }
        let (d, typical) = (median(diffs), median(all));
        let allowed = (0.08 * typical).max(0.5);
        eprintln!(
            "refusal time: median {typical:.2} ms; unknown user minus wrong password: {d:+.3} ms (median of 50 rounds; allowed {allowed:.2} ms)"
        );
        (d, allowed)
    };
    let (d, allowed) = measure();
    if d.abs() <= allowed {
        return;
    }
    let (d2, a2) = measure();
    let (d3, a3) = measure();
    let d = median(vec![d, d2, d3]);
    let allowed = median(vec![allowed, a2, a3]);
    assert!(
        d.abs() <= allowed,
        "an unknown user is refused {d:+.3} ms later than a wrong password (median of three measurements; allowed {allowed:.2} ms)"
    );
}

// ---------------------------------------------------------------------------------
// Full tier: real iperf3 in both directions

const PEERS: [&str; 3] = [
    "NETMETER_IPERF3_312",
    "NETMETER_IPERF3_318",
    "NETMETER_IPERF3_322",
];

/// iperf3 3.12 knows only PKCS#1 v1.5; 3.22 refuses --use-pkcs1-padding on a client
/// ("server only"), so its clients send OAEP.
fn speaks_oaep(peer_key: &str) -> bool {
    peer_key != "NETMETER_IPERF3_312"
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs iperf3 3.12/3.18/3.22 (scripts/setup-peers.sh)"
)]
#[test]
fn iperf3_clients_to_a_netmeter_server() {
    let _serial = serial();
    for key in PEERS {
        let bin = peer(key);
        let pkcs1 = !speaks_oaep(key);
        let port = free_port();
        let (_server, log) = nm_auth_server(port, pkcs1, &[]);
        let what = |w: &str| format!("{key} client, {w}");
        assert_ran(
            &auth_client(&bin, port, "alice", "secret", &[]),
            &what("alice"),
        );
        assert_refused(
            &auth_client(&bin, port, "alice", "nope", &[]),
            &what("wrong password"),
        );
        assert_refused(
            &auth_client(&bin, port, "dave", "secret", &[]),
            &what("unknown user"),
        );
        let plain = run(
            Command::new(&bin).args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1", "-J"]),
            Duration::from_secs(40),
        );
        assert_refused(&plain, &what("no credential"));
        assert!(
            log.wait_for("refused a test", 3, Duration::from_secs(5)),
            "{}",
            log.text()
        );
        assert_ran(
            &auth_client(&bin, port, "carol", "pw2", &[]),
            &what("carol after the refusals"),
        );
        assert_eq!(
            log.text().matches("refused a test").count(),
            3,
            "{}",
            log.text()
        );
    }
    // Padding mismatch: an OAEP client against a PKCS#1 netmeter server.
    let port = free_port();
    let (_server, log) = nm_auth_server(port, true, &[]);
    let bin = peer("NETMETER_IPERF3_322");
    assert_refused(
        &auth_client(&bin, port, "alice", "secret", &[]),
        "3.22 OAEP client, PKCS#1 server",
    );
    // PKCS#1 v1.5 unpadding of an OAEP block usually fails ("does not decrypt"), but
    // now and then the random-looking block happens to unpad (it starts 00 02 and has a
    // zero byte later), and what comes out is then garbage, not a credential: also a
    // refusal, for that reason (seen once in a clean CI run).
    assert!(
        log.wait_for("refused a test", 1, Duration::from_secs(5))
            && (log.text().contains("does not decrypt")
                || log
                    .text()
                    .contains("a decrypted credential not in iperf3's format")),
        "{}",
        log.text()
    );
}

#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs iperf3 3.12/3.18/3.22 (scripts/setup-peers.sh)"
)]
#[test]
fn netmeter_client_to_iperf3_servers() {
    let _serial = serial();
    for key in PEERS {
        let bin = peer(key);
        let port = free_port();
        // 3.18 and 3.22 servers use OAEP unless told otherwise; 3.12 only PKCS#1 v1.5.
        let pad: &[&str] = if speaks_oaep(key) {
            &[]
        } else {
            &["--use-pkcs1-padding"]
        };
        let (_server, log) = iperf3_auth_server(&bin, port);
        let what = |w: &str| format!("{key} server, {w}");
        assert_ran(
            &auth_client(netmeter(), port, "alice", "secret", pad),
            &what("alice"),
        );
        assert!(
            log.wait_for("Accepted connection", 1, Duration::from_secs(5)),
            "{}",
            log.text()
        );
        // Each next client only once the server is back to listening, so that its
        // log lines follow the clients in order.
        let listening = |n: usize| {
            assert!(
                log.wait_for("Server listening", n, Duration::from_secs(10)),
                "{}",
                log.text()
            );
        };
        listening(2);
        // The iperf3 server's own verdict: 3.12 and 3.18 log the error. 3.22 sets no
        // error code for a refused credential, so it logs whatever its global error
        // still holds: "no error", or a stream error left from the last test (and sends
        // that code to the client, which netmeter reports as stale).
        let verdict = if key == "NETMETER_IPERF3_322" {
            "error - "
        } else {
            "error - test authorization failed"
        };
        let before = log.text().matches(verdict).count();
        assert_nm_refused(
            &auth_client(netmeter(), port, "alice", "nope", pad),
            &what("wrong password"),
        );
        listening(3);
        assert_nm_refused(
            &auth_client(netmeter(), port, "dave", "secret", pad),
            &what("unknown user"),
        );
        assert!(
            log.wait_for(verdict, before + 2, Duration::from_secs(5)),
            "{}: {}",
            what("verdict"),
            log.text()
        );
        assert_ran(
            &auth_client(netmeter(), port, "carol", "pw2", pad),
            &what("carol after the refusals"),
        );
        assert!(
            log.wait_for("Accepted connection", 2, Duration::from_secs(5)),
            "{}",
            log.text()
        );
        assert_eq!(
            log.text().matches(verdict).count(),
            before + 2,
            "{}",
            log.text()
        );
    }
    // A PKCS#1 v1.5 netmeter client against an OAEP iperf3 3.18 server is refused.
    let port = free_port();
    let (_server, log) = iperf3_auth_server(&peer("NETMETER_IPERF3_318"), port);
    assert_nm_refused(
        &auth_client(
            netmeter(),
            port,
            "alice",
            "secret",
            &["--use-pkcs1-padding"],
        ),
        "PKCS#1 client, 3.18 OAEP server",
    );
    assert!(
        log.wait_for("test authorization failed", 1, Duration::from_secs(5)),
        "{}",
        log.text()
    );
}

/// An iperf3 3.22 server refusing a credential sends its previous test's stream error
/// (its receive thread's `IESTREAMREAD` with EBADF, seen in CI). Answered to the
/// parameters, before any stream exists, netmeter reports the refusal and calls the code
/// stale; a client without credentials gets the server's error as it came.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn a_stream_error_in_answer_to_a_credential_is_reported_as_a_refusal() {
    // SERVER_ERROR, IESTREAMREAD (206), EBADF (9).
    let stale = [SERVER_ERROR, 0, 0, 0, 206, 0, 0, 0, 9];
    let creds = [
        "--username",
        "alice",
        "--rsa-public-key-path",
        files().public.as_str(),
    ];
    let (params, out) = crate::e2e::answer_params(&creds, &[("IPERF3_PASSWORD", "secret")], &stale);
    assert!(params["authtoken"].is_string(), "{params}");
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("test authorization failed")
            && err.contains("iperf3 error 206")
            && err.contains("left over from its previous test"),
        "{}",
        show(&out)
    );
    let (params, out) = crate::e2e::answer_params(&[], &[], &stale);
    assert!(params.get("authtoken").is_none(), "{params}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("could not create or run a data stream (iperf3 error 206)")
            && !err.contains("authorization"),
        "{}",
        show(&out)
    );
}

/// A credential a real iperf3 client sent (read from its `-d` output) works once; played
/// back, it is refused (iperf3 servers would accept it again within the threshold).
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs iperf3 3.12/3.18/3.22 (scripts/setup-peers.sh)"
)]
#[test]
fn a_real_iperf3_credential_played_back_is_refused() {
    let _serial = serial();
    for key in ["NETMETER_IPERF3_312", "NETMETER_IPERF3_322"] {
        let port = free_port();
        let (_server, log) = nm_auth_server(port, !speaks_oaep(key), &[]);
        let out = run(
            Command::new(peer(key))
                .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1", "-d"])
                .args([
                    "--username",
                    "alice",
                    "--rsa-public-key-path",
                    &files().public,
                ])
                .env("IPERF3_PASSWORD", "secret"),
            Duration::from_secs(40),
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("iperf Done."), "{key}: {}", show(&out));
        let token = text
            .split("\"authtoken\":")
            .nth(1)
            .and_then(|rest| rest.split('"').nth(1))
            .unwrap_or_else(|| panic!("{key}: no authtoken in the -d output\n{}", show(&out)));
        let (st, code, _) = raw_attempt(port, Some(token));
        assert_eq!(
            (st, code),
            (SERVER_ERROR, Some(IEAUTHTEST)),
            "{key}: replay"
        );
        assert!(
            log.wait_for("replayed", 1, Duration::from_secs(5)),
            "{key}: {}",
            log.text()
        );
    }
}
