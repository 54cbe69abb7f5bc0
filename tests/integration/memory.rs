//! Server memory (issue 5): idle RSS ≤ 10 MiB, and after a `-P 128` test the server's
//! RSS comes back to its idle level instead of staying at a new high-water mark.
//!
//! Measured on the 2-core VM: idle after a warm-up test 4.2–4.6 MiB (release build;
//! 7.2–7.4 MiB for the debug build, whose binary maps more code); while the 128 streams
//! run ≈ 22 MiB (128 × 128 KiB receive buffers); after the test idle + 164–200 KiB
//! (release) or + 212–264 KiB (debug): glibc's cache of exited threads' stacks (at most
//! 20 cached 2 MiB stacks, ~8 KiB resident each) plus a little heap. Before the server
//! used a single malloc arena it stayed at idle + 2.1 to 4.6 MiB (130 KiB or more kept in
//! each of 15 per-thread arenas), and grew or shrank from test to test.
//!
//! Margin: idle + 1 MiB. It passes with ~4× headroom over what is measured and fails on
//! the old behaviour by more than 1 MiB, and it does not depend on timing: RSS is read only
//! once the server runs nothing but its main thread and UDP acceptor (the session
//! thread, which trims the heap at its end, has exited) and the figure has settled;
//! the test's peak is judged against the bytes the report says each stream received.
//!
//! What is compared is the server's private memory (`RssAnon`: heap, stacks), which is
//! where the kept arenas showed. `VmRSS` also counts the binary's code pages mapped from
//! the page cache (`RssFile`), shared and not the server's own cost; they grow with the
//! binary and with the kernel's fault-around. With plotting, authentication and the
//! option work linked in, the debug build's idle `RssFile` reached 10.8 MiB (VmRSS
//! 12.3 MiB, RssAnon 1.5 MiB; release: 5.7, 6.2 and 0.5 MiB). The release build's
//! whole VmRSS is the benchmark's idle-memory goal (`bench/run.py`, case `mem`).

use crate::support::*;
use std::time::Duration;

const MIB: u64 = 1024;

/// A `/proc/PID/status` field in KiB (or a count, for `Threads`).
fn status(pid: u32, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("cannot read /proc/{pid}/status: {e}"));
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status:\n{text}"))
}

/// The server's threads other than its main thread, by name (`/proc/PID/task/*/comm`).
fn helper_threads(pid: u32) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut names: Vec<String> = tasks
        .flatten()
        .filter(|t| t.file_name().to_string_lossy() != pid.to_string())
        .map(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .map(|n| n.trim().to_string())
                .unwrap_or_default()
        })
        .collect();
    names.sort();
    names
}

/// Wait until the server is idle, judged by what it runs rather than by a pause: its
/// only thread besides the main one is the UDP acceptor (`nm-udp-accept`, started
/// with the listener), so every session and stream thread has ended, and with the
/// session the heap trim it does just before it ends. Then until its private resident
/// memory (`RssAnon`) reads the same twice running, 100 ms apart (the kernel folds its
/// per-CPU RSS counts in lazily). Returns it, with `VmRSS` printed. Bounded by
/// [`EVIDENCE_TIMEOUT`].
fn settled_rss(pid: u32) -> u64 {
    await_evidence(
        "an idle server (main thread and UDP acceptor only)",
        || helper_threads(pid) == ["nm-udp-accept"],
        || format!("threads besides main: {:?}", helper_threads(pid)),
    );
    let mut last = status(pid, "RssAnon");
    let rss = await_value("a settled RssAnon", || {
        std::thread::sleep(Duration::from_millis(100));
        let now = status(pid, "RssAnon");
        let settled = now == last;
        last = now;
        settled.then_some(now)
    });
    eprintln!(
        "server VmRSS {} KiB (RssFile {} KiB)",
        status(pid, "VmRSS"),
        status(pid, "RssFile")
    );
    rss
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn server_memory_returns_to_idle_after_p128() {
    let port = free_port();
    // Waited for by its banner, not a probe connection (which would start a session
    // thread of its own).
    let srv = netmeter_server_watched(port, &[]);
    let log = srv.out.clone();
    let pid = srv.pid();

    // Warm-up: one small test, so that what any first test initialises for good (code
    // pages, the stack cache's first entries, lazily built statics) counts as idle.
    client_json(port, &["-P", "2", "-t", "1"]);
    let idle = settled_rss(pid);
    let idle_vm = status(pid, "VmRSS");
    assert!(
        idle <= 10 * MIB,
        "idle RssAnon {idle} KiB > 10 MiB\n{}",
        log.text()
    );

    let doc = client_json(port, &["-P", "128", "-t", "2"]);
    let streams = doc["end"]["streams"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        streams.len(),
        128,
        "the -P 128 test did not run 128 streams"
    );
    // The test really used the server's memory (without this the check below could
    // pass on a test that never started), judged against what the report says moved:
    // each stream the server received data on read it into a buffer of its own, a
    // fresh anonymous mapping, so it touched at least one new page (up to its 128 KiB
    // when its reads were whole; that share is printed). On a busy host a third of the
    // 128 senders was seen to get no turn in 2 s (load 20 on 2 CPUs): their threads
    // still ran, and what the others moved sets the floor.
    let page_kib = 4;
    let received: Vec<u64> = streams
        .iter()
        .map(|s| num(s, "receiver.bytes") as u64)
        .collect();
    let busy = received.iter().filter(|&&b| b > 0).count() as u64;
    assert!(busy > 0, "no stream received data: {received:?}");
    let floor = busy * page_kib;
    let buffered: u64 = received.iter().map(|b| (b / 1024).min(128)).sum();
    let peak = status(pid, "VmHWM");
    eprintln!(
        "peak VmHWM {peak} KiB, idle VmRSS {idle_vm} KiB: +{} KiB; {busy} streams moved {} MiB \
         (up to {buffered} KiB of read buffers), the floor is {floor} KiB",
        peak.saturating_sub(idle_vm),
        received.iter().sum::<u64>() >> 20
    );
    assert!(
        peak >= idle_vm + floor,
        "peak RSS {peak} KiB is not ≥ idle RSS {idle_vm} KiB + {floor} KiB (a buffer page \
         for each of the {busy} streams that received data): the test did not load the \
         server"
    );

    let after = settled_rss(pid);
    eprintln!(
        "server RssAnon: idle {idle} KiB, after -P 128 {after} KiB ({:+} KiB); VmHWM {peak} KiB",
        after as i64 - idle as i64
    );
    assert!(
        after <= idle + MIB,
        "after the -P 128 test the server kept {after} KiB, idle was {idle} KiB: more than \
         1 MiB did not come back"
    );
    assert!(
        after <= 10 * MIB,
        "RssAnon after the test {after} KiB > 10 MiB"
    );
    drop(srv);
}
