//! The connect-only loop's decisions on virtual time: a short connection costs two
//! round trips (the handshake, then the cookie and the one-byte answer), a refusal one
//! (SYN, RST) and then the machine's pause; what ends after the test is left out.

use crate::world::Host;
use netmeter::engine::machine::connect::{ConnStep, ConnectLoop, Outcome, REFUSED_PAUSE, Record};

/// What a run recorded.
#[derive(Debug, Default)]
struct Run {
    answered: Vec<(u64, u64)>,
    failed: u64,
    /// When each connection started (virtual ns).
    starts: Vec<u64>,
}

/// A connect-only stream for `test_ns` over a path of `rtt_ns`, the server refusing
/// before `listening_ns`.
fn run(rtt_ns: u64, listening_ns: u64, test_ns: u64) -> Run {
    let host = Host::new(0);
    let mut m = ConnectLoop::new();
    let mut out = Run::default();
    let mut now = 0;
    loop {
        match m.poll(host.at(now), now >= test_ns) {
            ConnStep::Stop => return out,
            ConnStep::Pause(t) => {
                now = host.ns(t);
                continue;
            }
            ConnStep::Connect => {}
        }
        out.starts.push(now);
        let outcome = if now < listening_ns {
            now += rtt_ns;
            Outcome::Refused("connection refused".into())
        } else {
            now += 2 * rtt_ns;
            Outcome::Answered {
                connect_ns: rtt_ns,
                total_ns: 2 * rtt_ns,
            }
        };
        match m.on_outcome(outcome, host.at(now), now > test_ns) {
            Some(Record::Answered {
                connect_ns,
                total_ns,
            }) => out.answered.push((connect_ns, total_ns)),
            Some(Record::Failed(_)) => out.failed += 1,
            None => return out,
        }
    }
}

#[test]
fn connections_follow_the_round_trip() {
    let r = run(10_000_000, 0, 1_000_000_000);
    assert_eq!(r.answered.len(), 50, "20 ms a connection for 1 s");
    assert!(r.answered.iter().all(|&c| c == (10_000_000, 20_000_000)));
    assert_eq!(r.failed, 0);
}

#[test]
fn refusals_pause_and_the_loop_resumes_when_the_server_listens() {
    // Refused for the first 100 ms: a refusal is one 10 ms round trip and a 10 ms
    // pause, so five; then 45 answered connections in the 900 ms left.
    let r = run(10_000_000, 100_000_000, 1_000_000_000);
    assert_eq!(REFUSED_PAUSE.as_nanos(), 10_000_000);
    assert_eq!(r.failed, 5);
    let ms: Vec<u64> = r.starts[..6].iter().map(|t| t / 1_000_000).collect();
    assert_eq!(ms, vec![0, 20, 40, 60, 80, 100]);
    assert_eq!(r.answered.len(), 45);
}

#[test]
fn a_connection_that_ends_after_the_test_is_not_counted() {
    // 30 ms connections in a 100 ms test: the fourth ends at 120 ms.
    let r = run(15_000_000, 0, 100_000_000);
    assert_eq!((r.answered.len(), r.starts.len()), (3, 4));
}
