//! `netmeter rpm-server` over loopback, judged by curl (HTTP/2 through nghttp2) and
//! openssl: the configuration and the objects as the reference server serves them, the
//! upload counted in the audit line, the printed certificate fingerprint, and the limits
//! against hostile clients (too many connections, slow headers, silence, an endless
//! upload), after each of which the server still serves.

use crate::support::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A running `netmeter rpm-server` on 127.0.0.1 with its audit log in a folder of its own.
struct RpmServer {
    proc: Option<Proc>,
    out: Drained,
    port: u16,
    dir: PathBuf,
}

impl Drop for RpmServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl RpmServer {
    fn start(name: &str, extra: &[&str]) -> RpmServer {
        let dir = std::env::temp_dir().join(format!("nm-rpmsrv-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let audit = dir.join("audit.jsonl");
        // Port 0: the server binds a free port and prints it, so no other test can take
        // the port between a check and the bind.
        let mut p = Proc::spawn(
            "netmeter rpm-server",
            Command::new(netmeter())
                .args(["rpm-server", "-B", "127.0.0.1", "-p", "0"])
                .arg("--audit-log")
                .arg(&audit)
                .args(extra),
        );
        let out = p.drain();
        await_evidence(
            "the rpm-server's banner",
            || out.text().contains("public key pin") || out.text().contains("from --cert"),
            || out.text(),
        );
        let port = out
            .text()
            .lines()
            .find_map(|l| l.strip_prefix("rpm-server listening on 127.0.0.1:"))
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("no port in the banner: {}", out.text()));
        RpmServer {
            proc: Some(p),
            out,
            port,
            dir,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.port)
    }

    /// The audit log's lines so far.
    fn audit(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// Wait for an audit line that `pred` accepts; that line.
    fn await_audit(
        &self,
        what: &str,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let mut found = None;
        await_evidence(
            what,
            || {
                found = self.audit().into_iter().find(&pred);
                found.is_some()
            },
            || format!("audit: {:?}\nserver: {}", self.audit(), self.out.text()),
        );
        found.unwrap()
    }

    /// The value of the banner line starting with `label`.
    fn banner(&self, label: &str) -> String {
        self.out
            .text()
            .lines()
            .find_map(|l| l.strip_prefix(label))
            .unwrap_or_else(|| panic!("no '{label}' in {}", self.out.text()))
            .trim()
            .to_string()
    }

    /// curl -k `args` (bounded); its output.
    fn curl(&self, args: &[&str]) -> std::process::Output {
        run_bounded(
            Command::new("curl")
                .args(["-sS", "-k", "--max-time", "60"])
                .args(args),
            Duration::from_secs(90),
            "curl",
        )
    }

    /// A GET of the small object succeeds: the server still serves.
    fn assert_serves(&self) {
        let out = self.curl(&["--http2", &self.url("/files/small")]);
        assert!(out.status.success(), "{}", show(&out));
        assert_eq!(out.stdout, b"x");
    }
}

fn header<'a>(headers: &'a str, name: &str) -> Option<&'a str> {
    headers.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// The configuration, the 1-byte object, a prefix of the large one and uploads over
/// HTTP/2 and HTTP/1.1: as Apple's reference configuration serves them, each upload
/// answered 200 and counted to the byte in the audit line.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs curl with HTTP/2 and openssl (scripts/setup-peers.sh)"
)]
fn serves_the_configuration_objects_and_uploads() {
    let s = RpmServer::start("serve", &[]);
    let out = s.curl(&[
        "--http2",
        "-D",
        "-",
        "-w",
        "\nversion=%{http_version}",
        &s.url("/.well-known/nq"),
    ]);
    assert!(out.status.success(), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.ends_with("version=2"), "{text}");
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/2 200"), "{head}");
    assert_eq!(
        header(head, "content-type"),
        Some("application/octet-stream")
    );
    assert!(header(head, "cache-control").is_some_and(|v| v.contains("no-store")));
    let body = body.trim_end_matches("version=2");
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["version"], 1);
    let origin = format!("https://localhost:{}", s.port);
    for (key, path) in [
        ("small_download_url", "/files/small"),
        ("small_https_download_url", "/files/small"),
        ("large_download_url", "/files/large"),
        ("large_https_download_url", "/files/large"),
        ("upload_url", "/slurp"),
        ("https_upload_url", "/slurp"),
    ] {
        assert_eq!(v["urls"][key], format!("{origin}{path}"), "{key} in {v}");
    }
    assert_eq!(v["urls"].as_object().unwrap().len(), 6, "{v}");
    // The same document at /config, its URLs naming the address used this time.
    let out = s.curl(&[&format!("https://127.0.0.1:{}/config", s.port)]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["urls"]["upload_url"],
        format!("https://127.0.0.1:{}/slurp", s.port)
    );

    let out = s.curl(&["--http2", "-D", "-", &s.url("/files/small")]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert_eq!(header(head, "content-length"), Some("1"), "{head}");
    assert_eq!(body.len(), 1);

    // The large object: at least 8 GB announced, a prefix read, then curl stopped.
    let hdr = s.dir.join("large.headers");
    let mut curl = Proc::spawn(
        "curl large",
        Command::new("curl")
            .args(["-sS", "-k", "--http2", "--max-time", "60", "-D"])
            .arg(&hdr)
            .arg(s.url("/files/large")),
    );
    let mut prefix = vec![0u8; 1 << 20];
    curl.child
        .as_mut()
        .unwrap()
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut prefix)
        .unwrap();
    drop(curl);
    assert!(prefix.iter().all(|&b| b == b'x'));
    let head = std::fs::read_to_string(&hdr).unwrap();
    let len: u64 = header(&head, "content-length").unwrap().parse().unwrap();
    assert!(len >= 8_000_000_000, "{head}");

    // Uploads of N bytes, over HTTP/2 and HTTP/1.1: 200, and N in the audit line.
    let n: usize = 3_000_017;
    let file = s.dir.join("upload");
    std::fs::write(&file, vec![7u8; n]).unwrap();
    let data = format!("@{}", file.display());
    for (version, size) in [("--http2", n), ("--http1.1", n - 1)] {
        if size != n {
            std::fs::write(&file, vec![7u8; size]).unwrap();
        }
        let out = s.curl(&[
            version,
            "--data-binary",
            &data,
            "-w",
            "%{http_code}",
            &s.url("/slurp"),
        ]);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "200",
            "{}",
            show(&out)
        );
        let line = s.await_audit(&format!("the {version} upload's audit line"), |l| {
            l["body_bytes_received"] == size
        });
        assert_eq!(line["outcome"], "ok", "{line}");
        assert!(
            line["bytes_received"].as_u64().unwrap() > size as u64,
            "{line}"
        );
        assert!(line["duration_s"].as_f64().is_some(), "{line}");
    }
    // A GET of the sink and a POST of an object are refused as the reference does.
    let out = s.curl(&["-w", "%{http_code}", "-o", "/dev/null", &s.url("/slurp")]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "405");
    let out = s.curl(&[
        "-w",
        "%{http_code}",
        "-o",
        "/dev/null",
        "-X",
        "POST",
        &s.url("/files/small"),
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "405");
    let out = s.curl(&["-w", "%{http_code}", "-o", "/dev/null", &s.url("/nothing")]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "404");
}

/// The SHA-256 fingerprint the server prints is the certificate's that openssl
/// receives, its public key pin is what curl checks; a --cert/--key pair is served and
/// its fingerprint printed.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs curl with HTTP/2 and openssl (scripts/setup-peers.sh)"
)]
fn the_printed_fingerprint_is_the_served_certificate() {
    let s = RpmServer::start("fp", &[]);
    let printed = s.banner("certificate SHA-256 fingerprint:");
    let seen = served_fingerprint(s.port);
    assert_eq!(seen, printed);
    let pin = s.banner("public key pin:");
    let out = s.curl(&["--pinnedpubkey", &pin, &s.url("/files/small")]);
    assert!(out.status.success(), "{}", show(&out));
    let wrong = "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let out = s.curl(&["--pinnedpubkey", wrong, &s.url("/files/small")]);
    assert!(!out.status.success(), "{}", show(&out));

    // A certificate from files: trusted by curl through --cacert, without -k.
    let dir = s.dir.join("files");
    std::fs::create_dir_all(&dir).unwrap();
    let (c, k) = (dir.join("c.pem"), dir.join("k.pem"));
    let out = run_bounded(
        Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
            ])
            .args(["-nodes", "-days", "2", "-subj", "/CN=localhost"])
            .args(["-addext", "subjectAltName=DNS:localhost"])
            .arg("-keyout")
            .arg(&k)
            .arg("-out")
            .arg(&c),
        Duration::from_secs(60),
        "openssl req",
    );
    assert!(out.status.success(), "{}", show(&out));
    let f = RpmServer::start(
        "fpfiles",
        &["--cert", c.to_str().unwrap(), "--key", k.to_str().unwrap()],
    );
    let printed = f.banner("certificate SHA-256 fingerprint:");
    assert_eq!(printed, file_fingerprint(&c));
    assert_eq!(served_fingerprint(f.port), printed);
    let out = run_bounded(
        Command::new("curl")
            .args(["-sS", "--max-time", "60", "--cacert"])
            .arg(&c)
            .arg(f.url("/files/small")),
        Duration::from_secs(90),
        "curl --cacert",
    );
    assert!(out.status.success(), "{}", show(&out));
}

fn fingerprint_of(text: &str) -> String {
    text.lines()
        .find_map(|l| {
            l.split_once("Fingerprint=")
                .map(|(_, f)| f.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no fingerprint in {text}"))
}

fn file_fingerprint(cert: &Path) -> String {
    let out = run_bounded(
        Command::new("openssl")
            .args(["x509", "-noout", "-fingerprint", "-sha256", "-in"])
            .arg(cert),
        Duration::from_secs(60),
        "openssl x509",
    );
    fingerprint_of(&String::from_utf8_lossy(&out.stdout))
}

/// The fingerprint of the certificate `openssl s_client` receives on `port`.
fn served_fingerprint(port: u16) -> String {
    let out = run_bounded(
        Command::new("openssl")
            .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
            .stdin(Stdio::null()),
        Duration::from_secs(60),
        "openssl s_client",
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let pem_start = text
        .find("-----BEGIN CERTIFICATE-----")
        .expect("a certificate");
    let pem_end = text.find("-----END CERTIFICATE-----").expect("its end") + 25;
    let mut x = Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    x.stdin
        .take()
        .unwrap()
        .write_all(&text.as_bytes()[pem_start..pem_end])
        .unwrap();
    let out = x.wait_with_output().unwrap();
    fingerprint_of(&String::from_utf8_lossy(&out.stdout))
}

/// A plain TCP connection from `from` to the server (no TLS): a connection slot held.
fn hold(from: &str, port: u16) -> TcpStream {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let local: SocketAddr = format!("{from}:0").parse().unwrap();
    sock.bind(&local.into()).unwrap();
    let to: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    sock.connect(&to.into()).unwrap();
    let s: TcpStream = sock.into();
    s.set_read_timeout(Some(EVIDENCE_TIMEOUT)).unwrap();
    s
}

/// The server closes `s` (EOF or reset) before the evidence deadline.
fn assert_closed(mut s: TcpStream, what: &str) {
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => {}
        Err(e)
            if e.kind() != std::io::ErrorKind::WouldBlock
                && e.kind() != std::io::ErrorKind::TimedOut => {}
        other => panic!("{what}: the server did not close it: {other:?}"),
    }
}

/// `-C` reaches every accepted connection (the kernel's own listing, `ss -ti`, names
/// it), `--notsent-lowat auto` serves the large object whole and exact, and an
/// algorithm the kernel lacks stops the server at start with one sentence naming the
/// option.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs curl with HTTP/2 and openssl (scripts/setup-peers.sh)"
)]
fn congestion_and_send_limit_reach_every_connection() {
    let s = RpmServer::start(
        "cc",
        &[
            "-C",
            "reno",
            "--notsent-lowat",
            "auto",
            "--large-size",
            "3M",
        ],
    );
    let _held = hold("127.0.0.1", s.port);
    let sport = format!("( sport = :{} )", s.port);
    let ss = || {
        let out = run_bounded(
            Command::new("ss").args(["-Htin", "state", "established", &sport]),
            Duration::from_secs(10),
            "ss",
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    await_evidence(
        "the accepted connection in ss",
        || ss().contains(&format!(":{}", s.port)),
        ss,
    );
    let listing = ss();
    assert!(
        listing.split_whitespace().any(|w| w == "reno"),
        "the accepted connection's congestion control is not reno: {listing}"
    );
    let out = s.curl(&["--http2", &s.url("/files/large")]);
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(out.stdout.len(), 3 << 20);
    assert!(out.stdout.iter().all(|&b| b == b'x'));
    s.assert_serves();

    let out = run_bounded(
        Command::new(netmeter()).args([
            "rpm-server",
            "-B",
            "127.0.0.1",
            "-p",
            "0",
            "-C",
            "nosuchcc",
        ]),
        Duration::from_secs(30),
        "rpm-server -C nosuchcc",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{}", show(&out));
    assert!(
        err.contains("--congestion nosuchcc") && err.trim().lines().count() == 1,
        "{}",
        show(&out)
    );
}

/// Connections beyond --max-connections-per-host and --max-connections are closed at
/// accept and audited as refused, naming the option; the ones held keep theirs, and
/// once they go the server serves again.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs curl with HTTP/2 and openssl (scripts/setup-peers.sh)"
)]
fn connections_beyond_the_caps_are_closed_at_accept() {
    let s = RpmServer::start(
        "caps",
        &[
            "--max-connections",
            "2",
            "--max-connections-per-host",
            "1",
            "--header-timeout",
            "120",
        ],
    );
    let a = hold("127.0.0.1", s.port);
    assert_closed(
        hold("127.0.0.1", s.port),
        "a second connection from 127.0.0.1",
    );
    s.await_audit("the per-host refusal", |l| {
        l["outcome"] == "refused"
            && l["detail"]
                .as_str()
                .is_some_and(|d| d.contains("--max-connections-per-host"))
    });
    // Another address still gets in.
    let out = s.curl(&[
        "--interface",
        "127.0.0.2",
        &format!("https://127.0.0.1:{}/files/small", s.port),
    ]);
    assert!(out.status.success(), "{}", show(&out));
    s.await_audit("127.0.0.2's request", |l| {
        l["outcome"] == "ok"
            && l["peer"]
                .as_str()
                .is_some_and(|p| p.starts_with("127.0.0.2:"))
    });
    let b = hold("127.0.0.2", s.port);
    assert_closed(hold("127.0.0.3", s.port), "a third connection");
    s.await_audit("the overall refusal", |l| {
        l["outcome"] == "refused"
            && l["detail"]
                .as_str()
                .is_some_and(|d| d.contains("--max-connections reached"))
    });
    drop((a, b));
    s.await_audit("the held connections' end", |_| {
        let ended = s.audit().iter().filter(|l| l["outcome"] == "tls").count();
        ended == 2
    });
    s.assert_serves();
}

/// A handshake that never comes and a request header trickled line by line end at
/// --header-timeout; a connection that goes quiet ends at --idle-timeout. (The idle
/// timeout is the longer, so a trickle stalled by a busy host still ends at the header
/// timeout.)
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs curl with HTTP/2 and openssl (scripts/setup-peers.sh)"
)]
fn slow_headers_and_silence_are_cut_off() {
    let s = RpmServer::start("slow", &["--header-timeout", "2", "--idle-timeout", "4"]);
    // No TLS at all.
    assert_closed(
        hold("127.0.0.1", s.port),
        "a connection without a handshake",
    );
    s.await_audit("the handshake timeout", |l| {
        l["outcome"] == "tls"
            && l["detail"]
                .as_str()
                .is_some_and(|d| d.contains("--header-timeout"))
    });
    // Slowloris: an HTTP/1.1 header one line every 200 ms, for up to 30 s.
    let mut sc = s_client(s.port, "http/1.1");
    let mut stdin = sc.child.as_mut().unwrap().stdin.take().unwrap();
    let trickle = std::thread::spawn(move || {
        let mut lines = vec!["GET /files/small HTTP/1.1\r\nHost: localhost\r\n".to_string()];
        lines.extend((0..150).map(|i| format!("X-Slow-{i}: {i}\r\n")));
        for l in lines {
            if stdin
                .write_all(l.as_bytes())
                .and_then(|()| stdin.flush())
                .is_err()
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let line = s.await_audit("the slow header's end", |l| {
        l["outcome"] == "header-timeout"
    });
    assert_eq!(line["alpn"], "http/1.1", "{line}");
    assert_eq!(line["requests"], 0, "{line}");
    let _ = sc.wait(Duration::from_secs(30));
    let _ = trickle.join();
    // Silence after the handshake.
    let mut quiet = s_client(s.port, "h2");
    let line = s.await_audit("the idle connection's end", |l| l["outcome"] == "idle");
    assert_eq!(line["alpn"], "h2", "{line}");
    drop(quiet.child.as_mut().unwrap().stdin.take());
    drop(quiet);
    s.assert_serves();
}

/// `openssl s_client` connected with ALPN `alpn`, its stdin a pipe the test holds.
fn s_client(port: u16, alpn: &str) -> Proc {
    s_client_drained(port, alpn).0
}

/// [`s_client`], with its output.
fn s_client_drained(port: u16, alpn: &str) -> (Proc, Drained) {
    let mut p = Proc {
        child: Some(
            Command::new("openssl")
                .args(["s_client", "-quiet", "-alpn", alpn])
                .args(["-connect", &format!("127.0.0.1:{port}")])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        ),
        name: "openssl s_client".into(),
    };
    let d = p.drain();
    (p, d)
}

/// An upload that never ends stops at --max-transfer: the connection is closed, the
/// audit line says so with the bytes bounded by the cap, and the server serves on.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs curl with HTTP/2 and openssl (scripts/setup-peers.sh)"
)]
fn an_endless_upload_ends_at_the_transfer_cap() {
    let cap: u64 = 4 << 20;
    let s = RpmServer::start("cap", &["--max-transfer", "4M"]);
    for version in ["--http2", "--http1.1"] {
        let out = s.curl(&[version, "-T", "/dev/zero", "-X", "POST", &s.url("/slurp")]);
        assert!(!out.status.success(), "{}", show(&out));
        let line = s.await_audit(&format!("the {version} cap"), |l| {
            l["outcome"] == "transfer-cap"
                && l["alpn"]
                    == if version == "--http2" {
                        "h2"
                    } else {
                        "http/1.1"
                    }
        });
        let moved = line["bytes_received"].as_u64().unwrap() + line["bytes_sent"].as_u64().unwrap();
        // One read past the cap at most (a TLS record, a socket buffer's worth).
        assert!(moved >= cap && moved < cap + (1 << 20), "{line}");
        assert!(
            line["body_bytes_received"].as_u64().unwrap() < cap,
            "{line}"
        );
    }
    s.assert_serves();
}

/// SIGTERM stops the server: exit status 0, and a connection still open gets its audit
/// line, `stopped`.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs curl with HTTP/2 and openssl (scripts/setup-peers.sh)"
)]
fn a_stop_signal_ends_the_server_and_audits_open_connections() {
    let mut s = RpmServer::start("stop", &[]);
    let (mut quiet, said) = s_client_drained(s.port, "h2");
    // s_client names the certificate it received: the server took the connection.
    await_evidence(
        "the server's certificate at s_client",
        || said.text().contains("depth=0"),
        || said.text(),
    );
    let server = s.proc.take().unwrap();
    let out = run_bounded(
        Command::new("kill").args(["-TERM", &server.pid().to_string()]),
        Duration::from_secs(30),
        "kill",
    );
    assert!(out.status.success(), "{}", show(&out));
    let out = server.wait_bounded(Duration::from_secs(60));
    assert!(out.status.success(), "{}", show(&out));
    s.await_audit("the open connection's line", |l| l["outcome"] == "stopped");
    drop(quiet.child.as_mut().unwrap().stdin.take());
}

/// `--allow`/`--deny` and `--max-conn-rate`, read and judged by the netmeter server's
/// own policy code: a denied or unlisted source, and a source past its rate, are closed
/// at accept before any TLS byte, and audited as refused naming the option; the others
/// are served.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs curl with HTTP/2 and openssl (scripts/setup-peers.sh)"
)]
fn allow_deny_and_conn_rate_refuse_before_the_handshake() {
    let s = RpmServer::start(
        "policy",
        &[
            "--allow",
            "127.0.0.1,127.0.0.2/31",
            "--deny",
            "127.0.0.3",
            "--max-conn-rate",
            "2/h",
            "--header-timeout",
            "120",
        ],
    );
    // Denied (in the --allow network 127.0.0.2/31, but --deny wins), and not allowed:
    // closed without a byte of the server's TLS.
    for (from, says) in [
        ("127.0.0.3", "is in 127.0.0.3/32 (--deny)"),
        ("127.0.0.4", "is not in any --allow network"),
    ] {
        assert_closed(hold(from, s.port), &format!("a connection from {from}"));
        s.await_audit(&format!("{from}'s refusal"), |l| {
            l["outcome"] == "refused"
                && l["peer"]
                    .as_str()
                    .is_some_and(|p| p.starts_with(&format!("{from}:")))
                && l["detail"].as_str().is_some_and(|d| d.contains(says))
                && l["bytes_sent"] == 0
        });
    }
    // 127.0.0.2 may open two connections an hour: two requests served, the third
    // connection refused; 127.0.0.1 has a bucket of its own.
    let small = |from: &str| {
        s.curl(&[
            "--interface",
            from,
            &format!("https://127.0.0.1:{}/files/small", s.port),
        ])
    };
    for n in 0..2 {
        let out = small("127.0.0.2");
        assert!(out.status.success(), "request {n}: {}", show(&out));
    }
    assert!(!small("127.0.0.2").status.success(), "the third connection");
    s.await_audit("the rate refusal", |l| {
        l["outcome"] == "refused"
            && l["detail"]
                .as_str()
                .is_some_and(|d| d.contains("127.0.0.2") && d.contains("--max-conn-rate"))
    });
    s.assert_serves();
}

/// `netmeter rpm` against `netmeter rpm-server`: every connection the client opened and
/// closed when it was done (load connections, probes, the configuration's) is audited
/// as "ok", none as a connection error (the load connections, closed with the large
/// object still coming, were "error: connection error"). A foreign probe the client
/// gave up when its phase ended may end in its handshake: audited as the client's
/// close, not an error.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs curl with HTTP/2 and openssl (scripts/setup-peers.sh)"
)]
fn connections_the_client_closed_are_audited_ok() {
    let s = RpmServer::start("closed", &["--large-size", "64M"]);
    let out = run_bounded(
        Command::new(netmeter()).args([
            "rpm",
            "--insecure",
            "-d",
            "down",
            "--max-duration",
            "4",
            "-J",
            &s.url("/.well-known/nq"),
        ]),
        Duration::from_secs(120),
        "netmeter rpm",
    );
    assert!(out.status.success(), "{}", show(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The connections the client opened and finished with: the configuration's, one
    // per completed foreign probe, idle or loaded, and the load-generating ones.
    let foreign = |probes: &serde_json::Value| {
        probes
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["kind"] == "foreign")
            .count()
    };
    let phases = doc["phases"].as_array().unwrap();
    let opened = 1
        + foreign(&doc["idle_probes"])
        + phases.iter().map(|p| foreign(&p["probes"])).sum::<usize>()
        + phases
            .iter()
            .flat_map(|p| p["directions"].as_array().unwrap())
            .map(|d| d["connections_opened"].as_u64().unwrap() as usize)
            .sum::<usize>();
    assert!(opened > 2, "{doc}");
    // The client has exited: each of those connections ends and is audited.
    s.await_audit("the client's connections' lines", |_| {
        s.audit().len() >= opened
    });
    let bad: Vec<serde_json::Value> = s
        .audit()
        .into_iter()
        .filter(|l| {
            let detail = l["detail"].as_str().unwrap_or("");
            let given_up = l["outcome"] == "tls" && detail.contains("closed by the client");
            (l["outcome"] != "ok" && !given_up) || detail.contains("connection error")
        })
        .collect();
    assert!(bad.is_empty(), "not ok: {bad:?}\nserver: {}", s.out.text());
}

/// `netmeter -s --rpm 0`: one process serves an iperf3-style test and `netmeter rpm`,
/// with one `--deny` list and one audit log for both, which the responsiveness server
/// follows when the file is moved away; Ctrl-C (SIGINT) ends both.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs curl with HTTP/2 and openssl (scripts/setup-peers.sh)"
)]
fn one_process_serves_iperf3_tests_and_rpm() {
    let dir = std::env::temp_dir().join(format!("nm-rpm-one-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let audit_path = dir.join("audit.jsonl");
    let port = free_port();
    let mut p = Proc::spawn(
        "netmeter -s --rpm",
        Command::new(netmeter())
            .args(["-s", "-B", "127.0.0.1", "-p", &port.to_string()])
            .args(["--rpm", "0", "--deny", "127.0.0.3", "--audit-log"])
            .arg(&audit_path),
    );
    let out = p.drain();
    await_evidence(
        "the responsiveness server's banner",
        || out.text().contains("public key pin"),
        || out.text(),
    );
    let rpm_port: u16 = out
        .text()
        .lines()
        .find_map(|l| l.strip_prefix("rpm-server listening on 127.0.0.1:"))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no rpm port in {}", out.text()));
    await_tcp_listening(p.pid(), port);
    let audit = || -> Vec<serde_json::Value> {
        std::fs::read_to_string(&audit_path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };

    // An iperf3-style test, then the responsiveness test, against the one process.
    let doc = client_json(port, &["-t", "1"]);
    assert!(num(&doc, "end.sum_received.bytes") > 0.0, "{doc}");
    let rpm = run_bounded(
        Command::new(netmeter()).args([
            "rpm",
            "--insecure",
            "-d",
            "down",
            "--max-duration",
            "3",
            "-J",
            &format!("https://127.0.0.1:{rpm_port}/.well-known/nq"),
        ]),
        Duration::from_secs(120),
        "netmeter rpm",
    );
    assert!(rpm.status.success(), "{}", show(&rpm));
    let rdoc: serde_json::Value = serde_json::from_slice(&rpm.stdout).unwrap();
    assert!(
        rdoc["summary"]["downlink_bps"].as_f64().unwrap() > 0.0,
        "{rdoc}"
    );

    // One audit log: the iperf3 test's line and the responsiveness server's.
    await_evidence(
        "both servers' lines in the one audit log",
        || {
            let lines = audit();
            lines
                .iter()
                .any(|l| l["result"] == "ok" && l["test"].is_object())
                && lines
                    .iter()
                    .any(|l| l["outcome"] == "ok" && l["alpn"] == "h2")
        },
        || format!("{:?}", audit()),
    );
    // The file moved away (a rotation, logrotate): the responsiveness server's next
    // line goes to a new file at the path. And -s's --deny holds on its port too,
    // before any TLS.
    std::fs::rename(&audit_path, dir.join("audit.jsonl.1")).unwrap();
    assert_closed(hold("127.0.0.3", rpm_port), "a denied connection");
    await_evidence(
        "the refusal's line in the new audit file",
        || {
            audit().iter().any(|l| {
                l["outcome"] == "refused"
                    && l["detail"].as_str().is_some_and(|d| d.contains("--deny"))
            })
        },
        || format!("{:?}", audit()),
    );

    // Ctrl-C ends the process: both servers.
    let pid = p.pid().to_string();
    let kill = run_bounded(
        Command::new("kill").args(["-INT", &pid]),
        Duration::from_secs(30),
        "kill",
    );
    assert!(kill.status.success(), "{}", show(&kill));
    let end = p.wait_bounded(Duration::from_secs(60));
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", rpm_port)).is_err(),
        "the responsiveness port still open after Ctrl-C: {}",
        show(&end)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `netmeter -s -J --rpm 0`: stdout is JSON throughout. The responsiveness server's
/// banner and its connections' log lines are the `-s -J` server's `server_log`
/// events, beside the iperf3-style test's document (they were text lines before,
/// which broke every JSON reader of the server's output).
#[test]
fn server_json_with_rpm_keeps_stdout_json() {
    let port = free_port();
    let mut p = Proc::spawn(
        "netmeter -s -J --rpm",
        Command::new(netmeter())
            .args(["-s", "-J", "-B", "127.0.0.1", "-p", &port.to_string()])
            .args(["--rpm", "0"]),
    );
    let out = p.drain();
    let events = |out: &Drained| -> Vec<serde_json::Value> {
        let bytes = out.stdout.lock().map(|b| b.clone()).unwrap_or_default();
        serde_json::Deserializer::from_slice(&bytes)
            .into_iter::<serde_json::Value>()
            .map_while(Result::ok)
            .collect()
    };
    let logged = |out: &Drained, needle: &str| -> Option<String> {
        events(out).iter().find_map(|v| {
            let data = v["data"].as_str()?;
            (v["event"] == "server_log" && data.contains(needle)).then(|| data.to_string())
        })
    };
    let banner = await_value(
        "the responsiveness server's banner as a server_log event",
        || logged(&out, "rpm-server listening on 127.0.0.1:"),
    );
    let rpm_port: u16 = banner
        .strip_prefix("rpm-server listening on 127.0.0.1:")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no rpm port in {banner}"));
    await_value(
        "the certificate's fingerprint as a server_log event",
        || logged(&out, "certificate SHA-256 fingerprint"),
    );
    await_tcp_listening(p.pid(), port);

    // An iperf3-style test's document, and a responsiveness connection's log line
    // (one that leaves without a TLS handshake).
    let doc = client_json(port, &["-t", "1"]);
    assert!(num(&doc, "end.sum_received.bytes") > 0.0, "{doc}");
    drop(hold("127.0.0.1", rpm_port));
    await_evidence(
        "the connection's log line as a server_log event",
        || logged(&out, " requests, ").is_some_and(|d| d.starts_with("127.0.0.1:")),
        || out.text(),
    );
    await_evidence(
        "the test's document on the server's stdout",
        || events(&out).iter().any(|v| v["end"].is_object()),
        || out.text(),
    );

    let pid = p.pid().to_string();
    let kill = run_bounded(
        Command::new("kill").args(["-INT", &pid]),
        Duration::from_secs(30),
        "kill",
    );
    assert!(kill.status.success(), "{}", show(&kill));
    let _ = p.wait_bounded(Duration::from_secs(60));
    // Every byte of stdout is JSON: a stream of objects and nothing else.
    let bytes = out.stdout.lock().map(|b| b.clone()).unwrap_or_default();
    for v in serde_json::Deserializer::from_slice(&bytes).into_iter::<serde_json::Value>() {
        let v = v.unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}",
                String::from_utf8_lossy(&bytes)
            )
        });
        assert!(v.is_object(), "{v}");
    }
}
