//! HTTP/3 (experimental, `--http3`) for `netmeter rpm-server` and `netmeter rpm` over
//! loopback: the server's HTTP/3 side serves the configuration, the objects and the
//! upload sink as its HTTP/2 side does (compared request by request, judged by the
//! audit lines), advertises itself with `Alt-Svc`, holds a connection to
//! `--max-transfer` and to the per-host cap; and a whole short `netmeter rpm --http3`
//! run completes against it, its load and probes over QUIC.

use crate::support::*;
use bytes::{Buf, Bytes};
use netmeter::rpm::config::HttpsUrl;
use netmeter::rpm::h3_net::{self, Link};
use netmeter::rpm::net::{self, Dialer, Target};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// A running `netmeter rpm-server --http3` on 127.0.0.1 with its audit log.
struct H3Server {
    _proc: Proc,
    out: Drained,
    port: u16,
    dir: PathBuf,
}

impl Drop for H3Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl H3Server {
    fn start(name: &str, extra: &[&str]) -> H3Server {
        let dir = std::env::temp_dir().join(format!("nm-rpmh3-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut p = Proc::spawn(
            "netmeter rpm-server --http3",
            Command::new(netmeter())
                .args(["rpm-server", "--http3", "-B", "127.0.0.1", "-p", "0"])
                .arg("--audit-log")
                .arg(dir.join("audit.jsonl"))
                .args(extra),
        );
        let out = p.drain();
        await_evidence(
            "the rpm-server's banner",
            || out.text().contains("public key pin"),
            || out.text(),
        );
        let port = out
            .text()
            .lines()
            .find_map(|l| l.strip_prefix("rpm-server listening on 127.0.0.1:"))
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("no port in the banner: {}", out.text()));
        H3Server {
            _proc: p,
            out,
            port,
            dir,
        }
    }

    fn url(&self, path: &str) -> HttpsUrl {
        HttpsUrl::parse(&format!("https://localhost:{}{path}", self.port)).unwrap()
    }

    fn audit(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// Waits for `n` audit lines with ALPN `alpn`; all such lines.
    fn await_audits(&self, alpn: &str, n: usize) -> Vec<serde_json::Value> {
        let pick = || -> Vec<serde_json::Value> {
            self.audit()
                .into_iter()
                .filter(|l| l["alpn"] == alpn)
                .collect()
        };
        await_evidence(
            &format!("{n} audit lines of {alpn}"),
            || pick().len() >= n,
            || format!("audit: {:?}\nserver: {}", self.audit(), self.out.text()),
        );
        pick()
    }

    /// A dialer to this server: HTTP/3 with `http3`, else HTTP/2; any certificate.
    fn dialer(&self, http3: bool) -> Dialer {
        let tls = net::tls_config(true, None).unwrap();
        let quic = http3.then(|| Arc::new(h3_net::client_config(&tls).unwrap()));
        Dialer {
            target: Target {
                addr: ([127, 0, 0, 1], self.port).into(),
                host: "localhost".into(),
            },
            tls,
            congestion: None,
            send_limit: netmeter::rpm::net::SendLimit::Kernel,
            clock: netmeter::clock::system(),
            quic,
            quic_endpoints: Default::default(),
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Every step of a test's async part is bounded by this (a failure, not a pace).
const BOUND: Duration = Duration::from_secs(60);

async fn bounded<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(BOUND, f)
        .await
        .unwrap_or_else(|_| panic!("{what} took over {BOUND:?}"))
}

/// POSTs `len` zero bytes over HTTP/3 and finishes the body; the answer's status.
async fn post_h3(send: &mut h3_net::H3Send, url: &HttpsUrl, len: usize) -> u16 {
    let req = http::Request::builder()
        .method("POST")
        .uri(&url.url)
        .body(())
        .unwrap();
    let mut s = send.send_request(req).await.expect("POST");
    let chunk = Bytes::from(vec![0u8; 64 * 1024]);
    let mut left = len;
    while left > 0 {
        let n = left.min(chunk.len());
        s.send_data(chunk.slice(..n)).await.expect("body");
        left -= n;
    }
    s.finish().await.expect("finish");
    let resp = s.recv_response().await.expect("answer");
    while let Some(mut d) = s.recv_data().await.expect("answer body") {
        d.advance(d.remaining());
    }
    resp.status().as_u16()
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs curl with HTTP/2 (scripts/setup-peers.sh)"
)]
fn http3_serves_what_http2_serves_and_is_advertised() {
    let srv = H3Server::start("same", &["--large-size", "1M"]);
    let rt = runtime();
    let (h2_config, h3_config, small, large, status) = rt.block_on(async {
        let mut h2 = bounded("HTTP/2 connect", h3_net::open_link(&srv.dialer(false)))
            .await
            .expect("HTTP/2 connection");
        let mut h3 = bounded("QUIC connect", h3_net::open_link(&srv.dialer(true)))
            .await
            .expect("HTTP/3 connection");
        assert!(matches!(h3.send, Link::H3(_)));
        let url = srv.url("/.well-known/nq");
        let h2_config = h2.send.get_small(&url, 64 << 10).await.expect("h2 config");
        let h3_config = h3.send.get_small(&url, 64 << 10).await.expect("h3 config");
        let small = h3
            .send
            .get_small(&srv.url("/files/small"), 64 << 10)
            .await
            .expect("small");
        let large = h3
            .send
            .get_small(&srv.url("/files/large"), 2 << 20)
            .await
            .expect("large");
        let Link::H3(send) = &mut h3.send else {
            unreachable!()
        };
        let status = bounded("the upload", post_h3(send, &srv.url("/slurp"), 5_000_000)).await;
        // The connections closed (their handles dropped) while the runtime still runs
        // to send QUIC's CONNECTION_CLOSE.
        drop((h2, h3));
        (h2_config, h3_config, small, large, status)
    });
    let h3_lines = srv.await_audits("h3", 1);
    drop(rt);
    // The same configuration document, byte for byte, whichever protocol asked.
    assert_eq!(h3_config, h2_config);
    let cfg = netmeter::rpm::config::NqConfig::parse(&h3_config).expect("configuration");
    cfg.require_host("localhost").expect("same host");
    assert_eq!((small.len(), &small[..]), (1, &b"x"[..]));
    assert_eq!(large.len(), 1 << 20);
    assert_eq!(status, 200);
    // The HTTP/3 connection's audit line: every request and body byte counted.
    let line = &h3_lines[0];
    assert_eq!(line["requests"], 4, "{line}");
    assert_eq!(line["body_bytes_received"], 5_000_000, "{line}");
    let sent = line["body_bytes_sent"].as_u64().unwrap();
    assert_eq!(sent, h3_config.len() as u64 + 1 + (1 << 20), "{line}");
    assert!(
        line["bytes_received"].as_u64().unwrap() > 5_000_000,
        "{line}"
    );
    assert_eq!(line["outcome"], "ok", "{line}");
    // The HTTP/2 answers advertise HTTP/3 at the same port.
    let out = run_bounded(
        Command::new("curl")
            .args([
                "-sS",
                "-k",
                "--http2",
                "--max-time",
                "60",
                "-o",
                "/dev/null",
            ])
            .args(["-D", "-", &srv.url("/files/small").url]),
        Duration::from_secs(90),
        "curl",
    );
    let headers = String::from_utf8_lossy(&out.stdout).to_lowercase();
    let want = format!("alt-svc: h3=\":{}\"; ma=86400", srv.port);
    assert!(headers.contains(&want), "{headers}");
}

#[test]
fn http3_connections_are_held_to_the_caps() {
    let srv = H3Server::start(
        "caps",
        &["--max-connections-per-host", "1", "--max-transfer", "1M"],
    );
    let rt = runtime();
    rt.block_on(async {
        let mut first = bounded("QUIC connect", h3_net::open_link(&srv.dialer(true)))
            .await
            .expect("first connection");
        // A second connection from the same host is refused at the handshake.
        let second = bounded("second connect", h3_net::open_link(&srv.dialer(true))).await;
        assert!(second.is_err(), "a second connection was taken");
        // The large object (8 GiB) stops at --max-transfer, and the client learns it
        // from the server's close, not from its own 10 s timeout: when the close is
        // lost in the burst before it, the client's keep-alive draws it again.
        let got = first
            .send
            .get_small(&srv.url("/files/large"), 64 << 20)
            .await;
        match got {
            Ok(_) => panic!("the large object came whole past the cap"),
            Err(e @ netmeter::rpm::net::NetError::Timeout { .. }) => {
                panic!("the client never saw the server's close: {e}")
            }
            Err(_) => {}
        }
    });
    drop(rt);
    let refused = srv.await_audits_outcome("refused");
    assert_eq!(
        refused["detail"], "--max-connections-per-host reached",
        "{refused}"
    );
    let capped = srv.await_audits_outcome("transfer-cap");
    assert_eq!(capped["alpn"], "h3", "{capped}");
}

impl H3Server {
    fn await_audits_outcome(&self, outcome: &str) -> serde_json::Value {
        let find = || self.audit().into_iter().find(|l| l["outcome"] == outcome);
        await_evidence(
            &format!("an audit line {outcome}"),
            || find().is_some(),
            || format!("audit: {:?}\nserver: {}", self.audit(), self.out.text()),
        );
        find().unwrap()
    }
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: a whole run of several seconds"
)]
fn a_short_rpm_run_over_http3_completes() {
    // A client that leaves without closing is seen off within 5 s, not the default 60.
    let srv = H3Server::start("run", &["--idle-timeout", "5"]);
    let url = srv.url("/.well-known/nq").url;
    let out = run_bounded(
        Command::new(netmeter()).args(["rpm", "--http3", "--insecure", "-J", "-m", "2", &url]),
        Duration::from_secs(120),
        "netmeter rpm --http3",
    );
    assert!(out.status.success(), "{}", show(&out));
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(&out)));
    assert_eq!(doc["protocol"], "h3", "{doc}");
    // The idle probes: the QUIC handshake stands for both the TCP and the TLS time.
    let idle = doc["idle_probes"].as_array().expect("idle probes");
    assert_eq!(idle.len(), 5, "{doc}");
    for p in idle {
        assert_eq!(p["tcp_ms"], p["tls_ms"], "{p}");
    }
    // Both directions loaded the path over QUIC.
    let dirs: Vec<&serde_json::Value> = doc["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .flat_map(|p| p["directions"].as_array().expect("directions").iter())
        .collect();
    assert_eq!(dirs.len(), 2, "{doc}");
    for d in &dirs {
        assert!(d["bytes"].as_u64().unwrap() > 0, "{d}");
    }
    // Every connection the server saw was HTTP/3 (config, idle probes, loads, probes).
    // The upload's connection writes its line when it ends (the client's close at its
    // exit, or this server's 5 s idle timeout): wait for that line itself, not for a
    // count the probes reach first.
    srv.await_audits("h3", 1 + 5 + 2);
    let uploaded = || {
        srv.audit()
            .iter()
            .any(|l| l["body_bytes_received"].as_u64().unwrap_or(0) > 0)
    };
    await_evidence("the upload connection's audit line", uploaded, || {
        format!("audit: {:?}\nserver: {}", srv.audit(), srv.out.text())
    });
    assert!(
        srv.audit()
            .iter()
            .all(|l| l["alpn"] == "h3" || l["alpn"].is_null()),
        "{:?}",
        srv.audit()
    );
}

/// The server's idle timeout in the close tests: far beyond the evidence deadline, so
/// a connection the client left open cannot end in time by it.
const LONG_IDLE_S: f64 = 60.0;

/// After `netmeter rpm --http3` has exited (its document `doc`), every connection it
/// reported is in the server's audit log well before the server's idle timeout: the
/// configuration's, the idle probes', each completed foreign probe's and each
/// load-generating connection's. Judged by what the server recorded: none ended by the
/// idle timeout, each lasted less than it, and (with `loaded`, a run that went on long
/// enough) the load connections that moved data ended `ok`.
fn assert_closed_by_the_client(srv: &H3Server, doc: &serde_json::Value, loaded: bool) {
    let phases = doc["phases"].as_array().expect("phases");
    let foreign = phases
        .iter()
        .flat_map(|p| p["probes"].as_array().expect("probes").iter())
        .filter(|p| p["kind"] == "foreign")
        .count();
    let loads: u64 = phases
        .iter()
        .flat_map(|p| p["directions"].as_array().expect("directions").iter())
        .map(|d| {
            d["connections_opened"]
                .as_u64()
                .expect("connections_opened")
        })
        .sum();
    let idle = doc["idle_probes"].as_array().expect("idle probes").len();
    let lines = srv.await_audits("h3", 1 + idle + foreign + loads as usize);
    for l in &lines {
        assert_ne!(l["outcome"], "idle", "{l}\nall: {lines:?}");
        let d = l["duration_s"].as_f64().expect("duration_s");
        assert!(d < LONG_IDLE_S, "{l}");
    }
    let loads: Vec<_> = lines
        .iter()
        .filter(|l| {
            let body = |k: &str| l[k].as_u64().unwrap_or(0);
            body("body_bytes_sent") + body("body_bytes_received") > 64 * 1024
        })
        .collect();
    assert!(
        !loaded || !loads.is_empty(),
        "no load connection's line: {lines:?}"
    );
    for l in loads {
        assert_eq!(l["outcome"], "ok", "{l}");
    }
}

/// A run that ends by itself closes its QUIC connections (CONNECTION_CLOSE) before it
/// exits: the server's cap slots come back at once, not at its idle timeout.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: a whole run of several seconds"
)]
fn an_http3_run_closes_its_connections_when_it_ends() {
    let idle = LONG_IDLE_S.to_string();
    let srv = H3Server::start("close", &["--idle-timeout", &idle]);
    let url = srv.url("/.well-known/nq").url;
    let out = run_bounded(
        Command::new(netmeter()).args([
            "rpm",
            "--http3",
            "--insecure",
            "-J",
            "-d",
            "down",
            "-m",
            "2",
            &url,
        ]),
        Duration::from_secs(120),
        "netmeter rpm --http3",
    );
    assert!(out.status.success(), "{}", show(&out));
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(&out)));
    assert_closed_by_the_client(&srv, &doc, true);
}

/// Ctrl-C (SIGINT) during the load, an upload this time, closes the QUIC connections
/// as the run's own end does.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: a whole run of several seconds"
)]
fn an_interrupted_http3_run_closes_its_connections() {
    let idle = LONG_IDLE_S.to_string();
    let srv = H3Server::start("sigint", &["--idle-timeout", &idle]);
    let url = srv.url("/.well-known/nq").url;
    let mut p = Proc::spawn(
        "netmeter rpm --http3",
        Command::new(netmeter()).args([
            "rpm",
            "--http3",
            "--insecure",
            "-J",
            "-d",
            "up",
            "-m",
            "30",
            &url,
        ]),
    );
    let out = p.drain();
    // The phase is under way once the configuration's and the five idle probes' lines
    // are in (those connections end before it starts) and a foreign probe's under load.
    srv.await_audits("h3", 1 + 5 + 1);
    let pid = p.pid().to_string();
    let kill = run_bounded(
        Command::new("kill").args(["-INT", &pid]),
        Duration::from_secs(30),
        "kill",
    );
    assert!(kill.status.success(), "{}", show(&kill));
    let end = p.wait_bounded(Duration::from_secs(60));
    assert!(end.status.success(), "{}\n{}", show(&end), out.text());
    let stdout = out.stdout.lock().map(|b| b.clone()).unwrap_or_default();
    let doc: serde_json::Value =
        serde_json::from_slice(&stdout).unwrap_or_else(|e| panic!("{e}: {}", out.text()));
    assert_eq!(doc["summary"]["interrupted"], true, "{doc}");
    // Every connection counts, whether or not its load had moved much by Ctrl-C.
    assert_closed_by_the_client(&srv, &doc, false);
}
