//! The one helper tree of the integration tests (`tests/integration/main.rs`): the
//! netmeter binary, the real peers installed by `scripts/setup-peers.sh`, free loopback
//! ports, bounded waits, child processes that are always stopped (by PID) when a test
//! ends, pass or fail, and the emulated-link bed ([`netbed`], root only).
//!
//! Each helper lives here once; a test module keeps only what is particular to it.
//! Not every module uses every helper, hence the `dead_code` allowance.
#![allow(dead_code)]

pub mod bridge_bed;
pub mod netbed;
pub mod rpm_reference;

use std::collections::HashMap;
use std::net::{TcpListener, UdpSocket};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------
// The binary under test and the peers

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

/// A loopback port free for both TCP and UDP right now, below the kernel's ephemeral
/// range: a port from that range can be taken as the local port of some other test's
/// outgoing connection between this check and the server's bind (the server then
/// fails to listen, and a probe connecting to the port can even meet itself, a TCP
/// self-connect, and look like a listener).
pub fn free_port() -> u16 {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (lo, hi) = (10000u16, ephemeral_low.clamp(12000, 32768));
    let span = u32::from(hi - lo);
    let start = std::process::id() % span;
    for _ in 0..500 {
        let n = u32::from(NEXT.fetch_add(1, Ordering::Relaxed));
        let p = lo + ((start + n) % span) as u16;
        if TcpListener::bind(("127.0.0.1", p)).is_ok() && UdpSocket::bind(("127.0.0.1", p)).is_ok()
        {
            return p;
        }
    }
    panic!("no free loopback port");
}

// ---------------------------------------------------------------------------------
// Child processes

/// A child process killed (by its PID) when dropped.
pub struct Proc {
    pub child: Option<Child>,
    pub name: String,
}

impl Proc {
    pub fn spawn(name: &str, cmd: &mut Command) -> Proc {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Proc {
            child: Some(child),
            name: name.to_string(),
        }
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("child").id()
    }

    /// Wait for exit (bounded), returning its output; a child still running after
    /// `timeout` is killed and its output returned as well.
    pub fn wait(self, timeout: Duration) -> Output {
        self.wait_inner(timeout).0
    }

    /// Like [`Proc::wait`], but a child still running after `timeout` fails the test.
    pub fn wait_bounded(self, timeout: Duration) -> Output {
        let name = self.name.clone();
        let (out, timed_out) = self.wait_inner(timeout);
        assert!(
            !timed_out,
            "{name} still running after {timeout:?}; killed\n{}",
            show(&out)
        );
        out
    }

    /// Wait for exit (bounded): the output, and whether the child had to be killed.
    /// The output is read while waiting, so a child that prints more than a pipe holds
    /// cannot block.
    fn wait_inner(mut self, timeout: Duration) -> (Output, bool) {
        let mut child = self.child.take().expect("child");
        let reader = |r: Option<Box<dyn std::io::Read + Send>>| {
            std::thread::spawn(move || {
                let mut v = Vec::new();
                if let Some(mut r) = r {
                    let _ = r.read_to_end(&mut v);
                }
                v
            })
        };
        let out = reader(
            child
                .stdout
                .take()
                .map(|o| Box::new(o) as Box<dyn std::io::Read + Send>),
        );
        let err = reader(
            child
                .stderr
                .take()
                .map(|e| Box::new(e) as Box<dyn std::io::Read + Send>),
        );
        let deadline = Instant::now() + timeout;
        let (status, timed_out) = loop {
            match child.try_wait() {
                Ok(Some(st)) => break (st, false),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    let _ = child.kill();
                    break (child.wait().expect("wait"), true);
                }
            }
        };
        let output = Output {
            status,
            stdout: out.join().unwrap_or_default(),
            stderr: err.join().unwrap_or_default(),
        };
        (output, timed_out)
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

/// CPU contention a test creates itself: one busy process (a shell spinning in a
/// loop) per CPU this process may use, at normal priority, each killed by its PID when
/// the returned list is dropped. Returns once every one has been on a CPU.
pub fn cpu_hogs() -> Vec<Proc> {
    let n = std::thread::available_parallelism().map_or(2, |n| n.get());
    let hogs: Vec<Proc> = (0..n)
        .map(|i| {
            Proc::spawn(
                &format!("CPU hog {i}"),
                Command::new("sh").args(["-c", "while :; do :; done"]),
            )
        })
        .collect();
    for h in &hogs {
        let stat = format!("/proc/{}/stat", h.pid());
        wait_until("a CPU hog to run", || {
            // utime and stime, fields 14 and 15 (after the parenthesised name).
            std::fs::read_to_string(&stat).is_ok_and(|t| {
                t.rsplit_once(')').is_some_and(|(_, rest)| {
                    let f: Vec<&str> = rest.split_whitespace().collect();
                    f.get(11).zip(f.get(12)).is_some_and(|(u, s)| {
                        u.parse::<u64>().unwrap_or(0) + s.parse::<u64>().unwrap_or(0) > 0
                    })
                })
            })
        });
    }
    hogs
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

/// Run a command to completion; one still running after `timeout` is killed and fails
/// the test (`what` names it in the message).
pub fn run_bounded(cmd: &mut Command, timeout: Duration, what: &str) -> Output {
    Proc::spawn(what, cmd).wait_bounded(timeout)
}

/// Polls `check` every 5 ms for up to 5 s; fails the test naming `what` if it never holds.
pub fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
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

/// The number at a JSON pointer like `/end/sum_sent/bytes`.
pub fn f64_at(v: &serde_json::Value, ptr: &str) -> f64 {
    v.pointer(ptr)
        .and_then(serde_json::Value::as_f64)
        .unwrap_or_else(|| panic!("no number at {ptr} in {v}"))
}

/// The whole number at a JSON pointer like `/end/sum/packets`.
pub fn u64_at(v: &serde_json::Value, ptr: &str) -> u64 {
    v.pointer(ptr)
        .and_then(serde_json::Value::as_u64)
        .unwrap_or_else(|| panic!("no integer at {ptr} in {v}"))
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

/// Output of a long-running child, read continuously so that a full pipe can never
/// block it. (Appended for the robustness and end-to-end tests.)
#[derive(Clone, Default)]
pub struct Drained {
    pub stdout: Arc<Mutex<Vec<u8>>>,
    pub stderr: Arc<Mutex<Vec<u8>>>,
}

impl Drained {
    /// Everything read so far, stdout then stderr, as text.
    pub fn text(&self) -> String {
        let o = self.stdout.lock().map(|b| b.clone()).unwrap_or_default();
        let e = self.stderr.lock().map(|b| b.clone()).unwrap_or_default();
        format!(
            "{}{}",
            String::from_utf8_lossy(&o),
            String::from_utf8_lossy(&e)
        )
    }

    /// Wait (bounded) until `needle` has appeared `count` times; false on timeout.
    pub fn wait_for(&self, needle: &str, count: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.text().matches(needle).count() >= count {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Appends everything `r` yields to `into`, on a thread of its own. The thread ends at
/// EOF, i.e. when the process (and anything it passed the pipe to) exits or is killed.
pub fn drain_into<R: std::io::Read + Send + 'static>(
    mut r: R,
    into: Arc<Mutex<Vec<u8>>>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 {
                break;
            }
            into.lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(&buf[..n]);
        }
    })
}

impl Proc {
    /// Read the child's stdout and stderr in the background from now on.
    pub fn drain(&mut self) -> Drained {
        let d = Drained::default();
        let child = self.child.as_mut().expect("child");
        if let Some(o) = child.stdout.take() {
            drain_into(o, d.stdout.clone());
        }
        if let Some(e) = child.stderr.take() {
            drain_into(e, d.stderr.clone());
        }
        d
    }

    /// Whether the child is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }
}

// ---------------------------------------------------------------------------------
// netmeter on loopback

/// Start `netmeter -s -B 127.0.0.1 -p PORT` plus `extra` flags, wait until it listens,
/// and drain its output.
pub fn netmeter_server(port: u16, extra: &[&str]) -> (Proc, Drained) {
    let (p, d) = spawn_netmeter_server(port, extra);
    wait_listening(port);
    (p, d)
}

/// Start `netmeter -s -B 127.0.0.1 -p PORT` plus `extra` flags and drain its output
/// (the callers differ in how they wait for it to listen).
fn spawn_netmeter_server(port: u16, extra: &[&str]) -> (Proc, Drained) {
    let mut p = Proc::spawn(
        "netmeter server",
        Command::new(netmeter())
            .args(["-s", "-B", "127.0.0.1", "-p", &port.to_string()])
            .args(extra),
    );
    let d = p.drain();
    (p, d)
}

/// The server's per-interval histogram lines for `label` (those of intervals starting
/// at 0.x and 1.x s) hold no more samples than its whole-test line (`end`, found in
/// `text`), which holds some.
pub fn assert_interval_histograms_within_whole(text: &str, label: &str, end: &str) {
    let samples = |from: &str| -> u64 {
        let rest = &from[from.find(" ms bins, ").expect("bins") + 10..];
        rest[..rest.find(' ').expect("count")]
            .parse()
            .expect("samples")
    };
    let per_interval: Vec<u64> = text
        .match_indices(&format!("{label} 0."))
        .chain(text.match_indices(&format!("{label} 1.")))
        .map(|(i, _)| samples(&text[i..]))
        .collect();
    assert!(!per_interval.is_empty(), "no interval histograms:\n{text}");
    let whole = samples(&text[text.find(end).expect("end")..]);
    assert!(whole > 0, "{text}");
    assert!(per_interval.iter().sum::<u64>() <= whole, "{text}");
}

/// Text of a finished process: stdout and stderr, labelled, for assertion messages.
pub fn show(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Bound for one client run on loopback (the longest test asks for a few seconds).
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

/// Run `netmeter -c 127.0.0.1 -p PORT ARGS` to completion (bounded by
/// [`CLIENT_TIMEOUT`]); its output, whatever its exit status.
pub fn client(port: u16, args: &[&str]) -> Output {
    run(
        Command::new(netmeter())
            .args(["-c", "127.0.0.1", "-p", &port.to_string()])
            .args(args),
        CLIENT_TIMEOUT,
    )
}

/// Run `netmeter -c 127.0.0.1 -p PORT -J ARGS`, assert it succeeded; its `-J` document.
pub fn client_json(port: u16, args: &[&str]) -> serde_json::Value {
    let out = client(port, &[&["-J"], args].concat());
    assert!(out.status.success(), "client {args:?}: {}", show(&out));
    json_of(&out, "client")
}

/// Run a netmeter client with `args` (plus `-c 127.0.0.1 -p PORT -t 1`) against a real
/// iperf3 server (`peer_key` from peers.env) and assert it stops with exit code 1 and
/// one line saying the mode needs a netmeter server.
pub fn assert_needs_netmeter_server(peer_key: &str, args: &[&str]) {
    let port = free_port().to_string();
    let srv = Proc::spawn(
        "iperf3",
        Command::new(peer(peer_key)).args(["-s", "-1", "-B", "127.0.0.1", "-p", &port]),
    );
    // Its listening socket, not a probe connection (which would be its one test).
    await_tcp_listening(srv.pid(), port.parse().expect("port"));
    let out = run(
        Command::new(netmeter())
            .args(["-c", "127.0.0.1", "-p", &port, "-t", "2"])
            .args(args),
        Duration::from_secs(30),
    );
    drop(srv);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs a netmeter server"), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
}

/// Run a netmeter client with `args` against a fresh one-test netmeter server on
/// 127.0.0.1 (its output drained away); returns the client's output.
pub fn client_vs_fresh_server(args: &[&str], timeout: Duration) -> Output {
    let port = free_port();
    let (_srv, _out) = netmeter_server(port, &["-1"]);
    run(
        Command::new(netmeter())
            .args(["-c", "127.0.0.1", "-p", &port.to_string()])
            .args(args),
        timeout,
    )
}

/// A client command line that must be refused as a user mistake: exit status 1 before
/// any connection is made. Returns its stderr.
pub fn usage_error(args: &[&str]) -> String {
    let out = run(
        Command::new(netmeter())
            .args(["-c", "127.0.0.1"])
            .args(args),
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(1), "{args:?}: {}", show(&out));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A paced test's receiver figures must end where the sender's do: for each direction
/// in `end` (`sum_sent`/`sum_received`, and the `_bidir_reverse` pair when present),
/// the receiver's seconds within 15 ms of the sender's and its bitrate within 2 %.
/// (Before issue 9 a netmeter client joined its paced senders, asleep for up to 50 ms,
/// before TEST_END: the receiver ran ~45 ms long and a lossless test read like loss.)
pub fn assert_receiver_ends_with_sender(v: &serde_json::Value, what: &str) {
    if let Err(e) = receiver_ends_with_sender(v, what) {
        panic!("{e}");
    }
}

/// [`assert_receiver_ends_with_sender`]'s check as a result: what is wrong, if anything.
pub fn receiver_ends_with_sender(v: &serde_json::Value, what: &str) -> Result<(), String> {
    let end = &v["end"];
    let mut pairs = 0;
    for suffix in ["", "_bidir_reverse"] {
        let (s, r) = (
            &end[format!("sum_sent{suffix}")],
            &end[format!("sum_received{suffix}")],
        );
        if s.is_null() && r.is_null() {
            continue;
        }
        pairs += 1;
        let (ss, rs) = (num(s, "seconds"), num(r, "seconds"));
        let (sb, rb) = (num(s, "bits_per_second"), num(r, "bits_per_second"));
        if (rs - ss).abs() > 0.015 {
            return Err(format!(
                "{what}{suffix}: receiver ran {rs:.4} s, sender {ss:.4} s\n{}",
                serde_json::to_string(end).unwrap()
            ));
        }
        if !(sb > 0.0 && (rb - sb).abs() <= 0.02 * sb) {
            return Err(format!(
                "{what}{suffix}: receiver {rb:.0} bit/s vs sender {sb:.0} bit/s\n{}",
                serde_json::to_string(end).unwrap()
            ));
        }
    }
    if pairs == 0 {
        return Err(format!("{what}: no sum_sent/sum_received in {end}"));
    }
    Ok(())
}

/// Run `attempt` (a whole test and its check) up to `runs` times, until it passes once;
/// fail the test with every run's complaint if none does. Only for a check that a
/// stalled host breaks on some runs and a defect on every run: e.g. the receiver's end
/// against the sender's, each read by a different process around a control message
/// (TEST_RUNNING, TEST_END) that a busy host delays now and then, while the defect it
/// guards (the receiver ~45 ms long) is there on each run.
pub fn passes_once_in(runs: usize, what: &str, mut attempt: impl FnMut() -> Result<(), String>) {
    let mut errors = Vec::new();
    for _ in 0..runs {
        match attempt() {
            Ok(()) => return,
            Err(e) => errors.push(e),
        }
    }
    panic!(
        "{what}: none of {runs} runs passed:\n{}",
        errors.join("\n---\n")
    );
}

// ---------------------------------------------------------------------------------
// Waiting for evidence (issue 21, item 5)
//
// A test synchronises on something the processes did (a banner, an interval row, a
// listening socket, a file, a count), never on a fixed sleep, and each wait is bounded
// by one generous deadline that only bounds a failure: on a busy 2-CPU CI host a
// process can be seconds late, never this late.

/// How long a test waits for a piece of evidence before it fails.
pub const EVIDENCE_TIMEOUT: Duration = Duration::from_secs(30);

/// Polls `check` every 10 ms until it holds; fails the test naming `what` (with
/// `context()`, e.g. a process's output so far) after [`EVIDENCE_TIMEOUT`].
pub fn await_evidence(what: &str, mut check: impl FnMut() -> bool, context: impl Fn() -> String) {
    let deadline = Instant::now() + EVIDENCE_TIMEOUT;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "no evidence of {what} within {EVIDENCE_TIMEOUT:?}\n{}",
            context()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Polls `f` every 10 ms until it yields `Some`; that value. Fails the test naming
/// `what` after [`EVIDENCE_TIMEOUT`].
pub fn await_value<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + EVIDENCE_TIMEOUT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "no evidence of {what} within {EVIDENCE_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether a TCP socket of the network namespace of process `pid` listens on `port`
/// (read from `/proc/PID/net/tcp` and `tcp6`, so nothing connects to it: a probe
/// connection would use up a `-1` server's one test, and can leave an iperf3 server
/// resetting the next client's control connection). Works for a process in another
/// namespace too (`ip netns exec` execs the program: the pid is the program's; until it
/// has, the pid is still `ip`'s, maybe in the host's namespace, and this says false).
pub fn tcp_listening(pid: u32, port: u16) -> bool {
    const LISTEN: &str = "0A";
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    if comm.trim() == "ip" {
        return false;
    }
    ["tcp", "tcp6"].iter().any(|t| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{t}")).is_ok_and(|text| {
            text.lines().skip(1).any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 3
                    && f[3] == LISTEN
                    && f[1]
                        .rsplit_once(':')
                        .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
                        == Some(port)
            })
        })
    })
}

/// Wait until process `pid` (a server just started) listens on TCP `port`, without
/// connecting to it (see [`tcp_listening`]); fails the test after [`EVIDENCE_TIMEOUT`].
pub fn await_tcp_listening(pid: u32, port: u16) {
    await_evidence(
        &format!("a listener on port {port} (pid {pid})"),
        || tcp_listening(pid, port),
        || {
            format!(
                "/proc/{pid} exists: {}",
                std::path::Path::new(&format!("/proc/{pid}")).exists()
            )
        },
    );
}

/// The furthest end (seconds) of the interval rows in `text`, iperf3's layout
/// (`[  5]   1.06-2.00   sec ...`), whoever printed them (netmeter or iperf3, client
/// or server): the evidence that a test has run that long by the printer's own clock.
/// `None` before the first row.
pub fn last_interval_end_s(text: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.contains(" sec "))
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|w| w.split_once('-').and_then(|(_, b)| b.parse::<f64>().ok()))
        })
        .max_by(f64::total_cmp)
}

impl Drained {
    /// How much stdout has been read so far: a mark for [`Drained::stdout_since`] (a
    /// long-running server prints every test's rows into the same pipe).
    pub fn mark(&self) -> usize {
        self.stdout.lock().map(|b| b.len()).unwrap_or(0)
    }

    /// The stdout read after `mark`, as text.
    pub fn stdout_since(&self, mark: usize) -> String {
        let b = self.stdout.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(b.get(mark..).unwrap_or_default()).into_owned()
    }

    /// Wait until the interval rows printed on stdout after `mark` reach `secs` (see
    /// [`last_interval_end_s`]); fails the test, naming `who`, after
    /// [`EVIDENCE_TIMEOUT`].
    pub fn await_interval_end(&self, mark: usize, secs: f64, who: &str) {
        await_evidence(
            &format!("{who}'s interval rows reaching {secs} s"),
            || last_interval_end_s(&self.stdout_since(mark)).is_some_and(|e| e >= secs),
            || self.text(),
        );
    }

    /// Wait until a long-running netmeter server (one test at a time, text output) is
    /// between tests: its last "Server listening" banner, which it prints again once a
    /// test's session has ended and freed the slot, comes after its last "Accepted
    /// connection". A client started earlier can be told the server is busy.
    pub fn await_between_tests(&self, who: &str) {
        await_evidence(
            &format!("{who} between tests (its banner after the last accepted test)"),
            || {
                let t = self.stdout_since(0);
                match (t.rfind("Server listening"), t.rfind("Accepted connection")) {
                    (Some(b), Some(a)) => b > a,
                    (Some(_), None) => true,
                    _ => false,
                }
            },
            || self.text(),
        );
    }

    /// Wait until `needle` has appeared `count` times on stdout after `mark`; fails the
    /// test, naming `who`, after [`EVIDENCE_TIMEOUT`].
    pub fn await_since(&self, mark: usize, needle: &str, count: usize, who: &str) {
        await_evidence(
            &format!("{count} × {needle:?} from {who}"),
            || self.stdout_since(mark).matches(needle).count() >= count,
            || self.text(),
        );
    }
}

/// A child whose output is read in the background from its start, with the reader
/// threads kept: once it has exited, [`Watched::finish`] has its whole output (no pause
/// for the pipes to drain).
pub struct Watched {
    proc: Proc,
    pub out: Drained,
    readers: Vec<JoinHandle<()>>,
}

impl Proc {
    /// Read the child's stdout and stderr in the background from now on, keeping the
    /// readers for [`Watched::finish`].
    pub fn watch(mut self) -> Watched {
        let out = Drained::default();
        let mut readers = Vec::new();
        let child = self.child.as_mut().expect("child");
        if let Some(o) = child.stdout.take() {
            readers.push(drain_into(o, out.stdout.clone()));
        }
        if let Some(e) = child.stderr.take() {
            readers.push(drain_into(e, out.stderr.clone()));
        }
        Watched {
            proc: self,
            out,
            readers,
        }
    }
}

impl Watched {
    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// Whether the child is still running.
    pub fn alive(&mut self) -> bool {
        self.proc.alive()
    }

    /// Wait for the child to exit; one still running after `timeout` is killed and
    /// fails the test. Then its whole output (the readers end at EOF; bounded by
    /// [`EVIDENCE_TIMEOUT`] for a descendant that kept the pipes).
    pub fn finish(mut self, timeout: Duration) -> Output {
        let name = self.proc.name.clone();
        let mut child = self.proc.child.take().expect("child");
        let deadline = Instant::now() + timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(st)) => break st,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "{name} still running after {timeout:?}; killed\n{}",
                        self.out.text()
                    );
                }
            }
        };
        let drained = Instant::now() + EVIDENCE_TIMEOUT;
        while self.readers.iter().any(|r| !r.is_finished()) && Instant::now() < drained {
            std::thread::sleep(Duration::from_millis(5));
        }
        let take = |b: &Arc<Mutex<Vec<u8>>>| b.lock().map(|b| b.clone()).unwrap_or_default();
        Output {
            status,
            stdout: take(&self.out.stdout),
            stderr: take(&self.out.stderr),
        }
    }
}

/// Start `netmeter -s -B 127.0.0.1 -p PORT` plus `extra` flags, read its output from
/// the start, and wait for its "Server listening" banner (printed once the listener
/// is bound), without a probe connection.
pub fn netmeter_server_watched(port: u16, extra: &[&str]) -> Watched {
    let w = Proc::spawn(
        "netmeter server",
        Command::new(netmeter())
            .args(["-s", "-B", "127.0.0.1", "-p", &port.to_string()])
            .args(extra),
    )
    .watch();
    w.out
        .await_since(0, "Server listening", 1, "the netmeter server");
    w
}

/// Start `netmeter -s -B 127.0.0.1 -p PORT` plus `extra` flags, drain its output, and
/// wait until its listening socket shows in `/proc` ([`await_tcp_listening`]): for a
/// `-J` server, which prints no banner, without the probe connection of
/// [`netmeter_server`].
pub fn netmeter_server_listening(port: u16, extra: &[&str]) -> (Proc, Drained) {
    let (p, d) = spawn_netmeter_server(port, extra);
    await_tcp_listening(p.pid(), port);
    (p, d)
}

/// Start an iperf3 server (`peer_key` from peers.env) on 127.0.0.1 with `extra` flags,
/// its output read from the start, and wait until it listens: its banner when it
/// prints text (with `--forceflush`: piped, iperf3 buffers its output), its listening
/// socket with `-J` (which prints nothing until a test ends). Never a probe
/// connection, which would use up `-1`'s one test.
pub fn iperf3_server_ready(peer_key: &str, port: u16, extra: &[&str]) -> (Proc, Drained) {
    let json = extra.contains(&"-J");
    let mut p = Proc::spawn(
        peer_key,
        Command::new(peer(peer_key))
            .args(["-s", "-B", "127.0.0.1", "-p", &port.to_string()])
            .args(if json { &[][..] } else { &["--forceflush"][..] })
            .args(extra),
    );
    let d = p.drain();
    if json {
        await_tcp_listening(p.pid(), port);
    } else {
        d.await_since(0, "Server listening", 1, peer_key);
    }
    (p, d)
}

/// How many threads of process `pid` are named `name` (`/proc/PID/task/*/comm`, as
/// netmeter names its threads: `nm-conn` for a session, `nm-udp-accept`, ...): the
/// evidence that a process's sessions have ended, or a server has settled.
pub fn threads_named(pid: u32, name: &str) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .flatten()
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm")).is_ok_and(|n| n.trim() == name)
                })
                .count()
        })
        .unwrap_or(0)
}

/// A full-tier test that needs the iperf 2 peers: `iperf2_peer_test!(name, check(..))`.
macro_rules! iperf2_peer_test {
    ($name:ident, $check:expr) => {
        #[test]
        #[cfg_attr(
            not(feature = "full-tests"),
            ignore = "full tier: needs the iperf 2 peers of scripts/setup-peers.sh"
        )]
        fn $name() {
            $check
        }
    };
}

/// Whether process `pid` has a UDP socket bound to `port` (`/proc/PID/net/udp`), read
/// without sending it anything: a probe datagram would start a test on an iperf 2 server.
pub fn udp_bound(pid: u32, port: u16) -> bool {
    ["udp", "udp6"].iter().any(|t| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{t}")).is_ok_and(|text| {
            text.lines().skip(1).any(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|a| a.rsplit_once(':'))
                    .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
                    == Some(port)
            })
        })
    })
}
