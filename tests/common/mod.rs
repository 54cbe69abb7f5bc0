//! Shared helpers for the end-to-end and interop tests: the netmeter binary, the real
//! peers installed by `scripts/setup-peers.sh`, free loopback ports, and processes that
//! are always stopped (by PID) when a test ends, pass or fail.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::{TcpListener, UdpSocket};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

/// Path of the netmeter binary under test.
pub fn netmeter() -> &'static str {
    env!("CARGO_BIN_EXE_netmeter")
}

/// The peer tools, from the env file written by `scripts/setup-peers.sh`.
pub fn peers() -> HashMap<String, String> {
    let path = std::env::var("NETMETER_PEERS_ENV")
        .unwrap_or_else(|_| "/opt/netmeter-peers/peers.env".to_string());
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("cannot read {path} ({e}); run scripts/setup-peers.sh first (.ci/run does)")
    });
    text.lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A peer binary by its env key (e.g. `NETMETER_IPERF3_312`); panics with the fix if absent.
pub fn peer(key: &str) -> String {
    peers()
        .get(key)
        .cloned()
        .unwrap_or_else(|| panic!("{key} is not set in peers.env; run scripts/setup-peers.sh"))
}

static NEXT: AtomicU16 = AtomicU16::new(0);

/// A loopback port free for both TCP and UDP right now.
pub fn free_port() -> u16 {
    let base = 20000 + (std::process::id() % 200) as u16 * 100;
    for _ in 0..500 {
        let p = base + NEXT.fetch_add(1, Ordering::Relaxed) % 10000;
        if TcpListener::bind(("127.0.0.1", p)).is_ok() && UdpSocket::bind(("127.0.0.1", p)).is_ok()
        {
            return p;
        }
    }
    panic!("no free loopback port");
}

/// A child process killed (by its PID) when dropped.
pub struct Proc {
    pub child: Option<Child>,
    pub name: String,
}

impl Proc {
    pub fn spawn(name: &str, cmd: &mut Command) -> Proc {
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Proc {
            child: Some(child),
            name: name.to_string(),
        }
    }

    /// Wait for exit (bounded), returning its output.
    pub fn wait(mut self, timeout: Duration) -> Output {
        let mut child = self.child.take().expect("child");
        let deadline = Instant::now() + timeout;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    let _ = child.kill();
                    break;
                }
            }
        }
        child.wait_with_output().expect("output")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Wait until something listens on the TCP port.
pub fn wait_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing listens on port {port}");
}

/// Run a command to completion (bounded) and return its output.
pub fn run(cmd: &mut Command, timeout: Duration) -> Output {
    Proc::spawn("command", cmd).wait(timeout)
}

/// Parse stdout as JSON, with the process output in the panic message.
pub fn json_of(out: &Output, who: &str) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{who}: stdout is not JSON ({e})\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A whole number from a JSON path like `end.sum_sent.bytes`.
pub fn num(v: &serde_json::Value, path: &str) -> f64 {
    let mut cur = v;
    for k in path.split('.') {
        cur = &cur[k];
    }
    cur.as_f64().unwrap_or_else(|| {
        panic!(
            "{path} missing in {}",
            serde_json::to_string_pretty(v).unwrap()
        )
    })
}
