//! The server's door (issue 20 item 1): handshakes served without a thread per
//! connection, a bounded number waiting per source and in total, `--max-conn-rate`
//! charged at accept. A flood of connections that send 2 bytes of a cookie and stall,
//! from one source, must not cost the server threads nor keep a legitimate client
//! (another source) from testing, even with a 1024-descriptor limit on the server.

use crate::support::*;
use socket2::{Domain, SockAddr, Socket, Type};
use std::collections::VecDeque;
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Flood connections held open at once by the test: more than the server's descriptor
/// limit, so a server that kept them all would run out, unless this process's own
/// limit is low (then half of it, leaving the tests that run beside this one room).
const FLOOD_HELD_MAX: usize = 1100;

/// How many flood connections this process may hold (see [`FLOOD_HELD_MAX`]).
fn flood_held() -> usize {
    let soft = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|l| {
            l.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3)?.parse::<usize>().ok())
        })
        .unwrap_or(1024);
    FLOOD_HELD_MAX.min(soft / 2)
}
/// Flood connections opened in all (bounds the flood whatever happens).
const FLOOD_TOTAL: u64 = 30_000;

/// Connect from `from` to the server and send `first` (without waiting).
fn connect_from(from: &str, port: u16, first: &[u8]) -> std::io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    let local: SocketAddr = format!("{from}:0").parse().unwrap();
    s.bind(&SockAddr::from(local))?;
    let to: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    s.connect_timeout(&SockAddr::from(to), Duration::from_secs(5))?;
    if !first.is_empty() {
        s.send(first)?;
    }
    Ok(s)
}

/// A number field of a process's status (`Threads:`, `VmRSS:` in kB).
fn status_field(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

fn threads(pid: u32) -> Option<u64> {
    status_field(pid, "Threads:")
}

/// From 127.0.0.2, connections that each send 2 bytes of a cookie and stall, opened as
/// fast as the machine allows, the oldest closed once `flood_held()` are open, until
/// `stop` (or `FLOOD_TOTAL`). Counts what it opened in `opened`.
fn flood(port: u16, stop: Arc<AtomicBool>, opened: Arc<AtomicU64>) {
    let most = flood_held();
    let mut held: VecDeque<Socket> = VecDeque::new();
    while !stop.load(Ordering::Relaxed) && opened.load(Ordering::Relaxed) < FLOOD_TOTAL {
        match connect_from("127.0.0.2", port, b"ab") {
            Ok(s) => {
                opened.fetch_add(1, Ordering::Relaxed);
                held.push_back(s);
                if held.len() > most {
                    held.pop_front();
                }
            }
            // Out of descriptors here, or the backlog is full: make room and go on.
            Err(_) => {
                held.pop_front();
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn a_stalled_handshake_flood_holds_no_threads_and_real_tests_run() {
    let port = free_port();
    let mut srv = Proc::spawn(
        "netmeter server (1024 descriptors)",
        Command::new("prlimit")
            .arg("--nofile=1024:1024")
            .arg(netmeter())
            .args(["-s", "-B", "127.0.0.1", "-p", &port.to_string()]),
    );
    let log = srv.drain();
    wait_listening(port);
    let pid = srv.pid();
    let idle_threads = threads(pid).expect("the server's /proc status");

    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicU64::new(0));
    let flooder = std::thread::spawn({
        let (stop, opened) = (stop.clone(), opened.clone());
        move || flood(port, stop, opened)
    });
    // The flood is well under way (as many connections opened as it holds at once)
    // before the first real test.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let held = flood_held() as u64;
    while opened.load(Ordering::Relaxed) < held && !flooder.is_finished() {
        assert!(
            std::time::Instant::now() < deadline,
            "the flood opened only {} connections in 120 s",
            opened.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // The server's thread count and resident memory, sampled all through the flood.
    let sampler = std::thread::spawn({
        let stop = stop.clone();
        move || {
            let (mut threads_max, mut rss_max_kb) = (0, 0);
            while !stop.load(Ordering::Relaxed) {
                threads_max = threads_max.max(threads(pid).unwrap_or(0));
                rss_max_kb = rss_max_kb.max(status_field(pid, "VmRSS:").unwrap_or(0));
                std::thread::sleep(Duration::from_millis(20));
            }
            (threads_max, rss_max_kb)
        }
    });
    let idle_rss_kb = status_field(pid, "VmRSS:").unwrap_or(0);
    for round in 0..5 {
        let out = client(port, &["-t", "1", "-J"]);
        assert!(
            out.status.success(),
            "round {round}: {}\nserver: {}",
            show(&out),
            log.text()
        );
        let v = json_of(&out, "client");
        assert!(
            f64_at(&v, "/end/sum_received/bytes") > 0.0,
            "round {round}: {v}"
        );
    }
    let flooded = opened.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    flooder.join().unwrap();
    let (max_threads, max_rss_kb) = sampler.join().unwrap();
    assert!(flooded > held, "the flood opened only {flooded}");
    eprintln!(
        "flood: {flooded} connections; server threads at most {max_threads} (idle {idle_threads}), resident at most {max_rss_kb} kB (idle {idle_rss_kb} kB)"
    );
    // One accept loop, the UDP acceptor, a test's session and stream threads: a thread
    // per stalled connection (the old server) would be hundreds.
    assert!(
        max_threads <= idle_threads + 12,
        "{max_threads} threads during the flood (idle: {idle_threads})"
    );
    assert!(srv.alive(), "the server died\n{}", log.text());
}

/// `--max-conn-rate` is charged when a connection is accepted: a source over its rate
/// is told "access denied" at once, before it has sent a byte (it used to be judged
/// only after its cookie, so a silent flood was never turned away).
#[test]
fn max_conn_rate_turns_silent_connections_away_at_accept() {
    let port = free_port();
    let (_srv, log) = netmeter_server(port, &["--max-conn-rate", "2/min"]);
    let _first = connect_from("127.0.0.3", port, b"").unwrap();
    let _second = connect_from("127.0.0.3", port, b"").unwrap();
    let third = connect_from("127.0.0.3", port, b"").unwrap();
    let mut third: TcpStream = third.into();
    third
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut b = [0u8; 1];
    let n = third.read(&mut b).unwrap_or(0);
    assert_eq!((n, b[0]), (1, 0xff), "ACCESS_DENIED (-1)\n{}", log.text());
    assert!(
        log.wait_for(
            "127.0.0.3 started more than 2 test(s) per 60 s (--max-conn-rate)",
            1,
            Duration::from_secs(5)
        ),
        "{}",
        log.text()
    );
    // Another source is not affected.
    let v = client_json(port, &["-t", "1"]);
    assert!(f64_at(&v, "/end/sum_received/bytes") > 0.0, "{v}");
}
