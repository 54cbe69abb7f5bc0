//! The end summary as a pure function of what the test measured.
//!
//! [`end`] takes everything it needs in [`EndInputs`] (this side's final figures, the
//! peer's results, CPU, congestion control, the socket buffers the kernel granted, the
//! clock estimate, the connections a server answered) and returns the [`End`] object.
//! Nothing is read back from a renderer; the renderers only read the result.

use super::connect;
use super::{LocalFinal, bounceback_end, end_stream, end_sums, trip_times_end, working_load_end};
use crate::clocksync::ClockEstimate;
use crate::report::advice::{self, HostFacts};
use crate::report::connect::ConnectOnlyAnswered;
use crate::report::{CpuUtil, End, EndExt, EndStream, LocalRoles};
use crate::spec::{Direction, Protocol, TestSpec};
use crate::wire::Results;

/// What the end summary is built from.
#[derive(Debug, Clone)]
pub struct EndInputs<'a> {
    pub spec: &'a TestSpec,
    /// This side's streams' final figures, in stream order.
    pub locals: &'a [LocalFinal],
    /// The peer's results (empty when the test was stopped before they came).
    pub peer: &'a Results,
    /// This process's CPU: (total, user, system) percent.
    pub local_cpu: (f64, f64, f64),
    /// The congestion control this side's TCP streams used.
    pub local_congestion: Option<String>,
    /// The client of `--loopback`: both ends are this process.
    pub in_process_server: bool,
    /// This side is the client (the working-load summary and the direction of each
    /// one-way delay depend on it).
    pub client: bool,
    /// The receive and send buffers the kernel granted (`start.rcvbuf_actual`,
    /// `start.sndbuf_actual`).
    pub rcvbuf: u64,
    pub sndbuf: u64,
    /// `--trip-times`: the clock offset estimate and the name of the clock.
    pub clock: Option<(ClockEstimate, &'static str)>,
    /// A `--connect-only` server: the connections it answered.
    pub connect_only_answered: Option<ConnectOnlyAnswered>,
}

/// The `end` object.
pub fn end(i: &EndInputs) -> End {
    let (spec, locals, peer) = (i.spec, i.locals, i.peer);
    let protocol = spec.protocol;
    let bidir = spec.direction == Direction::Bidir;
    let streams: Vec<EndStream> = locals
        .iter()
        .map(|l| end_stream(protocol, l, peer.streams.iter().find(|p| p.id == l.id)))
        .collect();
    let in_dir = |forward: bool| -> Vec<&EndStream> {
        streams
            .iter()
            .zip(locals)
            .filter(|(_, l)| (l.forward || !bidir) == forward)
            .map(|(s, _)| s)
            .collect()
    };
    let (fwd, rev) = (in_dir(true), in_dir(false));
    let fwd_local_sender = locals
        .iter()
        .find(|l| l.forward || !bidir)
        .is_some_and(|l| l.sender);
    let (sum, sum_sent, sum_received) = end_sums(protocol, &fwd, fwd_local_sender);
    let (sum_rev, sum_sent_rev, sum_received_rev) = end_sums(protocol, &rev, !fwd_local_sender);
    let local_sends = locals.iter().any(|l| l.sender);
    let peer_congestion = peer.congestion_used.clone();
    let (snd_cc, rcv_cc) = if protocol != Protocol::Tcp {
        (None, None)
    } else if local_sends {
        (i.local_congestion.clone(), peer_congestion)
    } else {
        (peer_congestion, i.local_congestion.clone())
    };
    let sender_retransmits = protocol == Protocol::Tcp
        && (locals.iter().any(|l| l.sender && l.tcp.is_some()) || peer.sender_has_retransmits == 1);
    End {
        streams,
        sum,
        sum_sent,
        sum_received,
        sum_bidir_reverse: sum_rev,
        sum_sent_bidir_reverse: sum_sent_rev,
        sum_received_bidir_reverse: sum_received_rev,
        cpu_utilization_percent: CpuUtil {
            host_total: i.local_cpu.0,
            host_user: i.local_cpu.1,
            host_system: i.local_cpu.2,
            remote_total: peer.cpu_util_total,
            remote_user: peer.cpu_util_user,
            remote_system: peer.cpu_util_system,
        },
        sender_tcp_congestion: snd_cc,
        receiver_tcp_congestion: rcv_cc,
        netmeter: extensions(i),
        local: LocalRoles {
            senders: locals.iter().map(|l| l.sender).collect(),
            sender_retransmits,
        },
    }
}

/// `end.netmeter`: host facts and warnings, then each mode's summary.
fn extensions(i: &EndInputs) -> EndExt {
    let (spec, locals, peer) = (i.spec, i.locals, i.peer);
    let mut x = host_checks(i);
    // Under --working-load the probe's figures are reported as the working-load summary.
    x.bounceback = spec
        .bounceback
        .as_ref()
        .filter(|_| spec.working_load.is_none())
        .and_then(|b| bounceback_end(b, locals));
    x.connect_only = connect::end_of(locals);
    super::profile::fill_end(&mut x, spec.profile.as_ref(), locals, peer);
    x.connect_only_answered = i.connect_only_answered;
    if i.client {
        x.working_load = spec
            .working_load
            .as_ref()
            .and_then(|w| working_load_end(w, locals, peer));
    }
    if let Some((c, name)) = &i.clock {
        x.trip_times = Some(trip_times_end(c, name, locals, peer, i.client));
    }
    x
}

/// Host facts and warnings for both sides.
fn host_checks(i: &EndInputs) -> EndExt {
    let (spec, locals, peer) = (i.spec, i.locals, i.peer);
    let sum = |it: &mut dyn Iterator<Item = Option<u64>>| {
        it.fold(None, |a: Option<u64>, d| match (a, d) {
            (a, None) => a,
            (None, Some(d)) => Some(d),
            (Some(a), Some(d)) => Some(a + d),
        })
    };
    let local_drops = sum(&mut locals.iter().map(|l| l.host_drops));
    let remote_drops = sum(&mut peer.streams.iter().map(|s| s.netmeter_host_drops));
    let udp = spec.protocol == Protocol::Udp;
    let local = HostFacts {
        side: "local",
        udp,
        rate_bps: spec.rate_bps,
        streams: locals.len() as u32,
        requested_buf: spec.window,
        rcvbuf: i.rcvbuf,
        sndbuf: i.sndbuf,
        receives: locals.iter().any(|l| !l.sender),
        host_drops: local_drops,
        cpu_total: i.local_cpu.0,
        zerocopy: locals
            .iter()
            .filter_map(|l| l.zerocopy)
            .reduce(|a, b| (a.0 + b.0, a.1 + b.1)),
    };
    let remote = HostFacts {
        side: "remote",
        udp,
        rate_bps: spec.rate_bps,
        streams: peer.streams.len() as u32,
        host_drops: remote_drops,
        cpu_total: peer.cpu_util_total,
        ..HostFacts::default()
    };
    let warnings = if i.in_process_server {
        // One process, both ends: its CPU is judged once, for both.
        advice::shared_process_warnings(&local)
    } else {
        let mut w = advice::warnings(&local);
        w.extend(advice::warnings(&remote));
        w
    };
    EndExt {
        local_host_drops: local_drops,
        remote_host_drops: remote_drops,
        warnings,
        ..EndExt::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::build::TcpTotals;
    use crate::wire::StreamResult;

    fn local(id: i64, sender: bool, forward: bool, bytes: u64) -> LocalFinal {
        LocalFinal {
            id,
            socket: id + 3,
            sender,
            forward,
            bytes,
            seconds: 10.0,
            tcp: sender.then(|| TcpTotals {
                retransmits: 2,
                ..TcpTotals::default()
            }),
            ..LocalFinal::default()
        }
    }

    fn peer_of(locals: &[LocalFinal]) -> Results {
        Results {
            cpu_util_total: 7.0,
            congestion_used: Some("reno".into()),
            streams: locals
                .iter()
                .map(|l| StreamResult {
                    id: l.id,
                    bytes: l.bytes - 1000,
                    retransmits: if l.sender { -1 } else { 5 },
                    start_time: 0.0,
                    end_time: 10.5,
                    ..StreamResult::default()
                })
                .collect(),
            ..Results::default()
        }
    }

    fn inputs<'a>(
        spec: &'a TestSpec,
        locals: &'a [LocalFinal],
        peer: &'a Results,
    ) -> EndInputs<'a> {
        EndInputs {
            spec,
            locals,
            peer,
            local_cpu: (3.0, 1.0, 2.0),
            local_congestion: Some("cubic".into()),
            in_process_server: false,
            client: true,
            rcvbuf: 131072,
            sndbuf: 131072,
            clock: None,
            connect_only_answered: None,
        }
    }

    #[test]
    fn tcp_client_sending_two_streams() {
        let spec = TestSpec::default();
        let locals = [local(1, true, true, 5000), local(3, true, true, 7000)];
        let peer = peer_of(&locals);
        let e = end(&inputs(&spec, &locals, &peer));
        assert_eq!(e.streams.len(), 2);
        let sent = e.sum_sent.as_ref().unwrap();
        assert_eq!((sent.bytes, sent.retransmits), (12000, Some(4)));
        let received = e.sum_received.as_ref().unwrap();
        assert_eq!((received.bytes, received.seconds), (10000, 10.5));
        assert!(e.sum_sent_bidir_reverse.is_none());
        // This side sends: its congestion control is the sender's.
        assert_eq!(e.sender_tcp_congestion.as_deref(), Some("cubic"));
        assert_eq!(e.receiver_tcp_congestion.as_deref(), Some("reno"));
        assert_eq!(e.cpu_utilization_percent.host_total, 3.0);
        assert_eq!(e.cpu_utilization_percent.remote_total, 7.0);
        assert_eq!(e.local.senders, [true, true]);
        assert!(e.local.sender_retransmits);
    }

    #[test]
    fn tcp_receiver_takes_the_peers_retransmits_and_congestion() {
        let spec = TestSpec {
            direction: Direction::Reverse,
            ..TestSpec::default()
        };
        let locals = [local(1, false, false, 5000)];
        let mut peer = peer_of(&locals);
        peer.sender_has_retransmits = 1;
        let e = end(&inputs(&spec, &locals, &peer));
        assert_eq!(e.sum_sent.as_ref().unwrap().retransmits, Some(5));
        assert_eq!(e.sender_tcp_congestion.as_deref(), Some("reno"));
        assert_eq!(e.receiver_tcp_congestion.as_deref(), Some("cubic"));
        assert_eq!(e.local.senders, [false]);
        assert!(e.local.sender_retransmits);
        // An iperf3 peer that does not know its retransmits: no Retr column.
        peer.sender_has_retransmits = 0;
        assert!(!end(&inputs(&spec, &locals, &peer)).local.sender_retransmits);
    }

    #[test]
    fn bidir_splits_the_sums_by_direction() {
        let spec = TestSpec {
            direction: Direction::Bidir,
            ..TestSpec::default()
        };
        let locals = [local(1, true, true, 5000), local(3, false, false, 9000)];
        let peer = peer_of(&locals);
        let e = end(&inputs(&spec, &locals, &peer));
        assert_eq!(e.sum_sent.as_ref().unwrap().bytes, 5000);
        assert_eq!(e.sum_received.as_ref().unwrap().bytes, 4000);
        assert_eq!(e.sum_sent_bidir_reverse.as_ref().unwrap().bytes, 8000);
        assert_eq!(e.sum_received_bidir_reverse.as_ref().unwrap().bytes, 9000);
        assert_eq!(e.local.senders, [true, false]);
    }

    #[test]
    fn a_stopped_test_without_peer_results_still_sums_this_side() {
        let spec = TestSpec::default();
        let locals = [local(1, true, true, 5000)];
        let e = end(&inputs(&spec, &locals, &Results::default()));
        assert_eq!(e.sum_sent.as_ref().unwrap().bytes, 5000);
        assert!(e.sum_received.is_none());
        assert_eq!(e.receiver_tcp_congestion, None);
    }

    #[test]
    fn udp_has_no_congestion_control() {
        let spec = TestSpec {
            protocol: Protocol::Udp,
            ..TestSpec::default()
        };
        let locals = [LocalFinal {
            tcp: None,
            packets: 10,
            ..local(1, true, true, 5000)
        }];
        let peer = peer_of(&locals);
        let e = end(&inputs(&spec, &locals, &peer));
        assert_eq!(e.sender_tcp_congestion, None);
        assert!(e.sum.is_some());
        assert!(!e.local.sender_retransmits);
    }

    #[test]
    fn the_answered_connections_and_the_clock_come_from_the_inputs() {
        let spec = TestSpec::default();
        let locals = [local(1, false, true, 0)];
        let peer = Results::default();
        let mut i = inputs(&spec, &locals, &peer);
        i.client = false;
        i.connect_only_answered = Some(ConnectOnlyAnswered::new(100, 2.0));
        i.clock = Some((
            ClockEstimate {
                offset_ns: 1_500_000,
                uncertainty_ns: 20_000,
                rtt_ns: 40_000,
                probes: 8,
            },
            "test clock",
        ));
        let e = end(&i);
        assert_eq!(e.netmeter.connect_only_answered, i.connect_only_answered);
        let tt = e.netmeter.trip_times.unwrap();
        assert_eq!((tt.clock.as_str(), tt.offset_ms), ("test clock", 1.5));
        assert_eq!(
            end(&inputs(&spec, &locals, &peer)).netmeter.trip_times,
            None
        );
    }

    #[test]
    fn host_warnings_use_the_granted_buffers() {
        // A 100 Mbit/s UDP receiver with a 4 KiB buffer cannot ride out 10 ms.
        let spec = TestSpec {
            protocol: Protocol::Udp,
            rate_bps: 100_000_000,
            ..TestSpec::default()
        };
        let locals = [LocalFinal {
            tcp: None,
            ..local(1, false, false, 5000)
        }];
        let peer = Results::default();
        let mut i = inputs(&spec, &locals, &peer);
        i.rcvbuf = 4096;
        let small = end(&i).netmeter.warnings;
        i.rcvbuf = 64 << 20;
        let large = end(&i).netmeter.warnings;
        assert!(small.len() > large.len(), "{small:?} vs {large:?}");
    }
}
