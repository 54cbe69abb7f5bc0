//! A server exposed to hostile sources (issue 20, items 2 and 5), end to end over
//! loopback: a `--metrics` client that trickles its request or says nothing does not
//! hold up a scrape; a source refused as fast as it connects writes a bounded number of
//! log and audit lines that still count every refusal; SIGHUP reopens the audit log and
//! leaves the server serving. Other source addresses come from binding 127.0.0.x.

use crate::support::*;
use socket2::{Domain, SockAddr, Socket, Type};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn scratch(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("nm-exposure-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// Polls `check` every 20 ms for up to `limit` (a bound on a failure only).
fn wait_long(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `GET /metrics`; the body, or why there was none.
fn try_scrape(port: u16) -> Result<String, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).map_err(|e| e.to_string())?;
    let (head, body) = reply.split_once("\r\n\r\n").ok_or("not an HTTP reply")?;
    if !head.starts_with("HTTP/1.1 200 OK") {
        return Err(head.to_string());
    }
    Ok(body.to_string())
}

fn sample(body: &str, series: &str) -> u64 {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{body}"))
        .parse()
        .unwrap()
}

/// Send `sig` to one process by its PID.
fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .args(["-s", sig, &pid.to_string()])
        .status()
        .expect("kill");
    assert!(st.success(), "kill -s {sig} {pid} failed");
}

/// Whether the peer has closed `s` (EOF or reset), looking without waiting.
fn closed_by_peer(s: &TcpStream) -> bool {
    let mut b = [0u8; 64];
    s.set_nonblocking(true).unwrap();
    let r = (&*s).read(&mut b);
    s.set_nonblocking(false).unwrap();
    match r {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    }
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn a_slow_or_silent_metrics_client_does_not_hold_up_a_scrape() {
    let port = free_port();
    let mport = free_port();
    let (mut server, log) = netmeter_server(port, &["--metrics", &format!("127.0.0.1:{mport}")]);
    // Twenty clients connect and say nothing.
    let silent: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(("127.0.0.1", mport)).unwrap())
        .collect();
    // One client trickles a request that never ends: a byte every 200 ms (each read
    // well within any per-read deadline), for at most 60 s.
    let slow = TcpStream::connect(("127.0.0.1", mport)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let trickler = {
        let stop = stop.clone();
        let mut slow = slow.try_clone().unwrap();
        std::thread::spawn(move || {
            let started = Instant::now();
            let request = b"GET /metrics HTTP/1.1\r\nX-Slow: ";
            for i in 0..300 {
                if stop.load(Ordering::Relaxed) {
                    return None;
                }
                let b = *request.get(i).unwrap_or(&b'a');
                if slow.write_all(&[b]).is_err() || closed_by_peer(&slow) {
                    return Some(started.elapsed());
                }
                // Not a synchronisation: the slow client the test is about.
                std::thread::sleep(Duration::from_millis(200));
            }
            None
        })
    };
    // Scrapes are answered meanwhile, while the slow client is still sending.
    for _ in 0..3 {
        let body = try_scrape(mport).unwrap_or_else(|e| {
            panic!("a scrape behind a slow client failed: {e}\n{}", log.text())
        });
        assert_eq!(sample(&body, "netmeter_server_active_tests"), 0);
    }
    // The slow client is cut off by the whole-request deadline (2 s), long before its
    // request could end; 30 s only bounds a failure.
    let cut = Instant::now() + Duration::from_secs(30);
    while !trickler.is_finished() && Instant::now() < cut {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let cut_after = trickler.join().unwrap();
    assert!(
        cut_after.is_some(),
        "the server kept a request that never ended open for 30 s"
    );
    // The silent ones are closed too, with nothing written to them.
    for s in &silent {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut rest = Vec::new();
        let _ = (&*s).read_to_end(&mut rest);
        assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    }
    // And the server still runs tests.
    let out = client(port, &["-t", "0.5"]);
    assert!(out.status.success(), "{}", show(&out));
    assert!(server.alive(), "{}", log.text());
}

/// A TCP connection to the test port from `source`, sending a cookie and closing.
fn knock(source: [u8; 4], port: u16) {
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.bind(&SockAddr::from(SocketAddr::from((source, 0))))
        .unwrap();
    s.connect(&SockAddr::from(SocketAddr::from(([127, 0, 0, 1], port))))
        .unwrap();
    let mut s: TcpStream = s.into();
    s.write_all(&[b'a'; 37]).unwrap();
}

fn audit_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn a_refusal_flood_writes_a_few_lines_that_count_every_refusal() {
    const FLOOD: u64 = 300;
    let port = free_port();
    let mport = free_port();
    let audit = scratch("flood.jsonl");
    let (mut server, log) = netmeter_server(
        port,
        &[
            "--deny",
            "127.0.0.2",
            "--metrics",
            &format!("127.0.0.1:{mport}"),
            "--audit-log",
            audit.to_str().unwrap(),
        ],
    );
    for _ in 0..FLOOD {
        knock([127, 0, 0, 2], port);
    }
    // The server has refused every one (the metrics count each refusal).
    let mut refused = 0;
    wait_long("every refusal counted", Duration::from_secs(120), || {
        refused = try_scrape(mport)
            .map(|b| sample(&b, "netmeter_server_refused_total{reason=\"address\"}"))
            .unwrap_or(0);
        refused >= FLOOD
    });
    assert_eq!(refused, FLOOD);
    // A legitimate client tests meanwhile.
    let out = client(port, &["-t", "0.5"]);
    assert!(out.status.success(), "{}", show(&out));
    // Stopping writes the counts still held back.
    signal(server.pid(), "TERM");
    wait_long("the server to stop", Duration::from_secs(30), || {
        !server.alive()
    });
    let text = log.text();
    let logged: Vec<&str> = text.lines().filter(|l| l.contains("127.0.0.2")).collect();
    // Ten lines as they happened, one summary at the end (eleven more per minute if
    // the flood took that long).
    assert!(
        (11..=33).contains(&logged.len()),
        "{} lines:\n{}",
        logged.len(),
        logged.join("\n")
    );
    assert!(
        logged
            .iter()
            .any(|l| l.contains("more connection(s) from 127.0.0.2 (address)")),
        "{text}"
    );
    let lines = audit_lines(&audit);
    let mine: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|v| {
            v["peer"]
                .as_str()
                .is_some_and(|p| p.starts_with("127.0.0.2"))
        })
        .collect();
    assert!((11..=33).contains(&mine.len()), "{lines:?}");
    assert!(
        mine.iter()
            .all(|v| v["result"] == "refused" && v["reason"] == "address")
    );
    let counted: u64 = mine
        .iter()
        .map(|v| v.get("count").and_then(|c| c.as_u64()).unwrap_or(1))
        .sum();
    assert_eq!(counted, FLOOD, "{mine:?}");
    // The legitimate test has its own line.
    assert!(lines.iter().any(|v| v["result"] == "ok"), "{lines:?}");
    let _ = std::fs::remove_file(&audit);
}

#[test]
fn sighup_reopens_the_audit_log_and_the_server_keeps_serving() {
    let port = free_port();
    let audit = scratch("hup.jsonl");
    let moved = scratch("hup.jsonl.1");
    let (mut server, log) = netmeter_server(port, &["--audit-log", audit.to_str().unwrap()]);
    let out = client(port, &["-t", "0.3"]);
    assert!(out.status.success(), "{}", show(&out));
    wait_long("the first audit line", Duration::from_secs(30), || {
        audit_lines(&audit).len() == 1
    });
    // As logrotate does: move the file away, then SIGHUP.
    std::fs::rename(&audit, &moved).unwrap();
    signal(server.pid(), "HUP");
    assert!(
        log.wait_for("reopened the audit log", 1, Duration::from_secs(30)),
        "{}",
        log.text()
    );
    assert!(server.alive(), "SIGHUP stopped the server:\n{}", log.text());
    let out = client(port, &["-t", "0.3"]);
    assert!(out.status.success(), "{}", show(&out));
    wait_long("the second audit line", Duration::from_secs(30), || {
        audit_lines(&audit).len() == 1
    });
    assert_eq!(audit_lines(&moved).len(), 1);
    assert!(server.alive(), "{}", log.text());
    let _ = std::fs::remove_file(&audit);
    let _ = std::fs::remove_file(&moved);
}
