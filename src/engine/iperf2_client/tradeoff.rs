//! iperf 2's tradeoff test (`-r`) from this client: the test header is a version 1 one
//! without `RUN_NOW`, naming a port this client listens on (`ConnectBack`). This
//! client runs its test first, as any upload; once it has ended, the iperf 2 server
//! connects back to that port (`-P` connections, from its own address only) and sends
//! for the same `-t`/`-n` (the amount the header carried), and this client receives.
//!
//! The two halves are two tests told one after the other: the observer sees the first
//! test's `Started`, intervals and `End`, then the second's (its own `Started` with the
//! connections back, intervals timed from its own start, its `End`: this client's
//! receiving figures). The returned `Report` is the first, with the second in
//! `Report::tradeoff` (`netmeter_tradeoff` in JSON).

use super::{Back, CONNECT_BACK_WAIT, Ends, PEER_NAME, accept_back, recv};
use crate::control::Negotiated;
use crate::engine::TestError;
use crate::engine::client::{self, ClientConfig};
use crate::engine::output::Output;
use crate::engine::stream::{self, DataSock};
use crate::engine::test_run::{Launch, Side, SpawnLoop, TestRun};
use crate::report::observe::Event;
use crate::sock;
use crate::spec::{Direction, Protocol, TestSpec};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

/// Why `cfg` cannot run as iperf 2's tradeoff test (`None`: it can, or it is none).
pub fn unsupported(cfg: &ClientConfig) -> Option<&'static str> {
    let opts = cfg.iperf2?;
    if !opts.tradeoff {
        return None;
    }
    let s = &cfg.spec;
    let refusals: [(bool, &'static str); 5] = [
        (
            opts.dual,
            "-r (the server's test after this one) and -d (both at once) are two tests: choose one",
        ),
        (
            s.direction != Direction::Upload,
            "-r sends first and then receives: it goes with neither -R nor --bidir",
        ),
        (
            s.bounceback.is_some() || s.profile.is_some(),
            "-r runs bulk TCP tests: drop --bounceback, --isochronous or --burst-size",
        ),
        (
            s.trip_times,
            "-r does not take --trip-times yet: the server's half would be framed",
        ),
        (
            cfg.txstart.is_some(),
            "-r does not take --txstart-time: the server's half starts when this one ends",
        ),
    ];
    refusals
        .into_iter()
        .find(|(hit, _)| *hit)
        .map(|(_, why)| why)
}

/// The test the spec of the first half (`first`) asks the server to run back: the
/// same amount and lengths, this client receiving. `send_time_latency`: a UDP
/// receiver records each datagram's delay from its send time, as iperf 2.2.1's client
/// prints it (the header still asks for no trip times).
fn back_spec(first: &TestSpec, send_time_latency: bool) -> TestSpec {
    let mut spec = first.clone();
    spec.direction = Direction::Reverse;
    if send_time_latency && spec.protocol == Protocol::Udp {
        spec.trip_times = true;
    }
    spec
}

/// The second half: accept the server's `-P` connections on `l` (from `server`'s
/// address only, each within [`CONNECT_BACK_WAIT`]; over UDP its first datagram),
/// receive until the server closes them or sends its FIN (or goes quiet:
/// `recv::RecvWatch`), told to `out`'s observer as a test of its own and kept in
/// `out.report.tradeoff`.
pub(super) fn server_half(
    cfg: &ClientConfig,
    out: &mut Output,
    l: &Back,
    server: SocketAddr,
    first: &TestSpec,
) -> Result<(), TestError> {
    let latency = cfg.iperf2.is_some_and(|o| o.send_time_latency);
    let spec = back_spec(first, latency);
    out.emit(Event::Info(&format!(
        "-r: this client's test is over; waiting up to {} s for the iperf 2 server to connect back and send\n",
        CONNECT_BACK_WAIT.as_secs()
    )));
    let socks = match l {
        Back::Tcp(l) => accept_back(out, l, server.ip(), spec.parallel as usize)?
            .into_iter()
            .map(DataSock::Tcp)
            .collect(),
        Back::Udp(u) => vec![DataSock::Udp(first_datagram(out, u, server.ip())?)],
    };
    let origin = cfg.clock.now();
    // The second half is told through `out` as a test of its own; its report is kept
    // apart and the first half's put back.
    let first_report = std::mem::take(&mut out.report);
    let result = run_back(cfg, out, socks, first, spec, origin);
    let second = std::mem::replace(&mut out.report, first_report);
    out.report.tradeoff = Some(Box::new(second));
    result
}

/// The second half on the accepted connections `socks`, told to `back` (whose report
/// is the second half's).
fn run_back(
    cfg: &ClientConfig,
    back: &mut Output,
    socks: Vec<DataSock>,
    first: &TestSpec,
    spec: TestSpec,
    origin: std::time::Instant,
) -> Result<(), TestError> {
    client::record_start_common(back, cfg, first);
    // Over UDP the listener takes the server's sender only (`recv::BackFilter`).
    let back_from = recv::BackFilter::new(server_ip(&socks));
    let spawn: SpawnLoop =
        Arc::new(move |w, sock| super::spawn_receiver(w, sock, false, None, Some(back_from)));
    let (rate, len) = (spec.rate_bps, spec.block_len);
    let mut run = TestRun::new(
        spec,
        Side::Client {
            in_process_server: false,
        },
    )?
    .with_clock(cfg.clock.clone())
    .with_loop(spawn);
    for s in socks {
        let peer = match &s {
            DataSock::Tcp(t) => t.peer_addr()?,
            DataSock::Udp(u) => u.peer_addr()?,
        };
        let c = run.attach(s, peer)?;
        back.connected(c);
    }
    run.record_buffers(&mut back.report.start);
    run.record_start(
        &mut back.report.start,
        cfg.interval_s,
        &Negotiated::iperf3(Vec::new()),
        None,
        Vec::new(),
    );
    back.report.start.netmeter.peer = PEER_NAME.into();
    back.start_done();
    let mut running = run.start(Launch {
        t0: cfg.clock.now(),
        owd_correction_ns: 0,
        connect_to: None,
        answered: None,
        interval_s: cfg.interval_s,
        interval_histograms: false,
        cpu_start: sock::cpu_sample(origin),
        origin,
    })?;
    // The server ends its half by closing; a silent one is given up on.
    let mut ends = Ends {
        recv: Some(recv::RecvWatch::new(recv::RecvWatch::idle_bound(rate, len))),
    };
    let ending = running.run_until(back, &mut ends)?;
    if let Some(why) = ending.stopped {
        running.stop_all();
        let now = running.now_s().max(ending.at_s);
        let fig = running.final_figures(back, now, now);
        back.error(&why.to_string());
        back.end(running.summary(&back.report.start, &fig, None));
        return Err(why.into());
    }
    let fig = running.drain(back, ending.at_s);
    if let Some(e) = running.stream_error() {
        return Err(TestError::Stream(e));
    }
    back.end(running.summary(&back.report.start, &fig, None));
    Ok(())
}

/// `-r` over UDP: wait (up to [`CONNECT_BACK_WAIT`], or until interrupted) for the
/// server's first datagram from its address `from`, left queued for the receiver;
/// datagrams from anyone else are read and dropped, with a warning. Returns the
/// socket connected to the server's sender.
fn first_datagram(out: &mut Output, u: &UdpSocket, from: IpAddr) -> Result<UdpSocket, TestError> {
    let deadline = crate::clock::mono_now() + CONNECT_BACK_WAIT;
    u.set_read_timeout(Some(Duration::from_millis(100)))?;
    let mut buf = [0u8; 64];
    let mut warned = false;
    loop {
        if sock::stop_signal().is_some() {
            return Err(TestError::io_while(
                "interrupted while waiting for the iperf 2 server's test back (-r)",
                std::io::Error::from(std::io::ErrorKind::Interrupted),
            ));
        }
        match u.peek_from(&mut buf) {
            Ok((_, peer)) if peer.ip().to_canonical() == from.to_canonical() => {
                u.connect(peer)?;
                u.set_read_timeout(None)?;
                return Ok(u.try_clone()?);
            }
            Ok((_, peer)) => {
                let _ = u.recv_from(&mut buf);
                if !std::mem::replace(&mut warned, true) {
                    out.warning(&format!(
                        "-r: dropped a datagram from {peer}: only the server ({from}) sends back"
                    ));
                }
            }
            Err(e) if stream::is_transient(&e) => {}
            // An ICMP error of an earlier send on this socket: not the server's data.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
            Err(e) => {
                return Err(TestError::io_while(
                    "cannot read the server's -r datagrams",
                    e,
                ));
            }
        }
        if crate::clock::mono_now() >= deadline {
            return Err(TestError::io_while(
                format!(
                    "the iperf 2 server sent nothing back (-r) within {} s of this client's test; a firewall may stop it",
                    CONNECT_BACK_WAIT.as_secs()
                ),
                std::io::Error::from(std::io::ErrorKind::TimedOut),
            ));
        }
    }
}

/// The server's address, from the second half's first socket (unspecified if none).
fn server_ip(socks: &[DataSock]) -> IpAddr {
    let peer = socks.first().and_then(|s| match s {
        DataSock::Tcp(t) => t.peer_addr().ok(),
        DataSock::Udp(u) => u.peer_addr().ok(),
    });
    peer.map_or(IpAddr::from([0u8; 4]), |p| p.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server's half is the first half's test the other way round.
    #[test]
    fn the_server_half_is_the_same_test_received() {
        let first = TestSpec {
            end: crate::spec::EndCondition::Bytes(3 << 20),
            parallel: 2,
            block_len: 65_536,
            ..TestSpec::default()
        };
        let b = back_spec(&first, true);
        assert_eq!(b.direction, Direction::Reverse);
        assert_eq!((b.end, b.parallel, b.block_len), (first.end, 2, 65_536));
        assert!(!b.trip_times, "TCP: no send-time latency");
        let udp = TestSpec {
            protocol: Protocol::Udp,
            ..first
        };
        assert!(back_spec(&udp, true).trip_times);
        assert!(!back_spec(&udp, false).trip_times);
    }

    /// The second half rides in the first half's document under its own key, and a
    /// saved document reads back with it.
    #[test]
    fn the_second_half_is_kept_under_its_own_key() {
        use crate::report::Report;
        let mut second = Report::default();
        second.start.test_start.reverse = 1;
        second.end.sum_received = Some(crate::report::EndSum {
            bytes: 4242,
            ..Default::default()
        });
        let first = Report {
            tradeoff: Some(Box::new(second)),
            ..Report::default()
        };
        let doc = serde_json::to_string(&first).unwrap();
        let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
        assert_eq!(v["netmeter_tradeoff"]["end"]["sum_received"]["bytes"], 4242);
        let back = Report::from_document(&doc).unwrap();
        let half = back.tradeoff.expect("the second half");
        assert_eq!(half.end.sum_received.map(|s| s.bytes), Some(4242));
        // Without -r the key is absent.
        let plain = serde_json::to_value(Report::default()).unwrap();
        assert!(plain.get("netmeter_tradeoff").is_none());
    }
}
