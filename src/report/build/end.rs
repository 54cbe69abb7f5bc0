//! The end summary as a pure function of what the test measured.
//!
//! [`end`] takes everything it needs in [`EndInputs`] (this side's final figures, the
//! peer's results, CPU, congestion control, the socket buffers the kernel granted, the
//! clock estimate, the connections a server answered) and returns the [`End`] object.
//! Nothing is read back from a renderer; the renderers only read the result. The end
//! table's per-stream rows (`end_stream`) and direction sums (`end_sums`) are here too.

use super::connect;
use super::{LocalFinal, bounceback_end, trip_times_end, working_load_end};
use crate::clocksync::ClockEstimate;
use crate::host::facts::{self, Efficiency, HostInfo, Peak, PeakSource, ThreadCpu};
use crate::report::advice::{self, HostFacts};
use crate::report::connect::ConnectOnlyAnswered;
use crate::report::{
    CpuUtil, DiskFile, End, EndExt, EndSide, EndStream, EndSum, EndSumExtra, EndUdp, LocalRoles,
    RateShortfall, TcpEndExtra, UdpEndExtra, UdpIoSides, UdpRecvFigures,
};
use crate::spec::{Direction, Protocol, TestSpec};
use crate::stats::{UdpCounts, bits_per_second, lost_percent};
use crate::wire::Results;
use crate::wire::StreamResult;

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
    /// This side's host facts (`end.netmeter.host`), if read.
    pub host: Option<HostInfo>,
    /// The client's `--line-rate`: the peak efficiency is judged against instead of the
    /// interface's line rate.
    pub peak: Option<Peak>,
    /// This side's stream threads' CPU use.
    pub threads: Vec<ThreadCpu>,
    /// `-F FILE` on this side: the name as given and the file's size at the end.
    pub disk_file: Option<(String, u64)>,
}

/// The `end` object.
pub fn end(i: &EndInputs) -> End {
    let (spec, locals, peer) = (i.spec, i.locals, i.peer);
    let protocol = spec.protocol;
    let bidir = spec.direction == Direction::Bidir;
    let streams: Vec<EndStream> = locals
        .iter()
        .map(|l| {
            let mut s = end_stream(protocol, l, peer.streams.iter().find(|p| p.id == l.id));
            s.diskfile = i.disk_file.as_ref().map(|(name, size)| {
                let bytes = |x: &Option<EndSide>| x.as_ref().map_or(0, |x| x.bytes);
                DiskFile::new(bytes(&s.sender), bytes(&s.receiver), *size, name.clone())
            });
            s
        })
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
    let mut netmeter = extensions(i);
    netmeter.efficiency = efficiency(
        i.host.as_ref(),
        i.peak,
        sum_received.as_ref().or(sum.as_ref()),
        sum_received_rev.as_ref().or(sum_rev.as_ref()),
    );
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
        netmeter,
        local: LocalRoles {
            senders: locals.iter().map(|l| l.sender).collect(),
            sender_retransmits,
        },
    }
}

/// Receiver throughput as a share of the peak: the one `--line-rate` gave, else this
/// side's line rate when it is known; `reverse`: `--bidir`'s other direction.
fn efficiency(
    host: Option<&HostInfo>,
    peak: Option<Peak>,
    fwd: Option<&EndSum>,
    reverse: Option<&EndSum>,
) -> Option<Efficiency> {
    let iface = host.and_then(|h| h.interface.as_ref());
    let (rate, source) = match peak {
        Some(p) => (p.bits_per_second, p.source),
        None => (iface?.line_rate_bps?, PeakSource::Interface),
    };
    let bps = fwd?.bits_per_second;
    let rev = reverse.map(|s| s.bits_per_second);
    Some(Efficiency {
        interface: iface.map_or(String::new(), |i| i.name.clone()),
        line_rate_bps: rate,
        peak: source,
        bits_per_second: bps,
        percent: facts::efficiency_percent(bps, Some(rate))?,
        reverse_bits_per_second: rev,
        reverse_percent: rev.and_then(|r| facts::efficiency_percent(r, Some(rate))),
    })
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
    let bidir = spec.direction == Direction::Bidir;
    x.iperf2_figures = super::figures::end(spec.protocol, locals, peer, bidir);
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
    // Per-thread figures, where known, judge a side's CPU instead of its process's.
    let threads_known = !i.threads.is_empty();
    let remote_threads = peer_threads(locals, peer);
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
        cpu_total: if threads_known { 0.0 } else { i.local_cpu.0 },
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
        cpu_total: if remote_threads.is_empty() {
            peer.cpu_util_total
        } else {
            0.0
        },
        ..HostFacts::default()
    };
    let mut warnings = if i.in_process_server {
        // One process, both ends: its CPU is judged once, for both.
        advice::shared_process_warnings(&local)
    } else {
        let mut w = advice::warnings(&local);
        w.extend(advice::warnings(&remote));
        w
    };
    let cpus = i.host.as_ref().map(|h| h.cpus).filter(|&c| c > 0);
    // --busy-poll spins on purpose: a busy thread there is the point, not a limit.
    if spec.bounceback.as_ref().is_none_or(|b| b.busy_poll_us == 0) {
        warnings.extend(advice::thread_warnings(&i.threads, cpus, false));
        warnings.extend(advice::thread_warnings(&remote_threads, None, true));
    }
    let rate_shortfall = rate_shortfalls(spec, locals, peer, &i.threads, &remote_threads);
    warnings.extend(rate_shortfall.iter().map(advice::shortfall_warning));
    EndExt {
        rate_shortfall,
        local_host_drops: local_drops,
        remote_host_drops: remote_drops,
        warnings,
        host: i.host.clone(),
        // Named in the text by the socket its rows show ([  4]), not the iperf3 id.
        stream_threads: i
            .threads
            .iter()
            .map(|t| ThreadCpu {
                socket: locals.iter().find(|l| l.id == t.id).map(|l| l.socket),
                ..t.clone()
            })
            .collect(),
        remote_stream_threads: remote_threads,
        local_udp_io: local_udp_io(locals),
        remote_udp_io: peer_udp_io(locals, peer),
        local_pacing_lag_ms: max_of(locals.iter().map(|l| l.pacing_lag_ms)),
        remote_pacing_lag_ms: max_of(peer.streams.iter().map(|s| s.netmeter_pacing_lag_ms)),
        ..EndExt::default()
    }
}

/// The shortfall rule (`advice::rate_shortfall`) on each side's paced bulk UDP senders:
/// this side's from its final figures, the peer's from its results.
fn rate_shortfalls(
    spec: &TestSpec,
    locals: &[LocalFinal],
    peer: &Results,
    threads: &[ThreadCpu],
    remote_threads: &[ThreadCpu],
) -> Vec<RateShortfall> {
    // Profiles, request/response and connect-only tests have no `-b` schedule; under
    // `--ecn-responsive` `-b` is a ceiling the marks hold the sender under, not a
    // shortfall.
    let paced = spec.protocol == Protocol::Udp
        && spec.rate_bps > 0
        && spec.profile.is_none()
        && spec.bounceback.is_none()
        && !spec.connect_only
        && !spec.ecn_responsive;
    if !paced {
        return Vec::new();
    }
    let local: Vec<advice::SenderEnd> = locals
        .iter()
        .filter(|l| l.sender)
        .map(|l| advice::SenderEnd {
            id: l.id,
            bytes: l.bytes,
            seconds: l.seconds,
            blocked_sends: l.send_blocked,
        })
        .collect();
    // The peer sends where this side receives; an empty results message (a stopped
    // test) has no streams.
    let remote: Vec<advice::SenderEnd> = peer
        .streams
        .iter()
        .filter(|p| locals.iter().any(|l| l.id == p.id && !l.sender))
        .map(|p| advice::SenderEnd {
            id: p.id,
            bytes: p.bytes,
            seconds: (p.end_time - p.start_time).max(0.0),
            blocked_sends: p.netmeter_send_blocked,
        })
        .collect();
    [
        advice::rate_shortfall(
            "local",
            spec.rate_bps,
            spec.block_len,
            &local,
            threads,
            max_of(locals.iter().map(|l| l.pacing_lag_ms)),
        ),
        advice::rate_shortfall(
            "remote",
            spec.rate_bps,
            spec.block_len,
            &remote,
            remote_threads,
            max_of(peer.streams.iter().map(|s| s.netmeter_pacing_lag_ms)),
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The largest of the figures present.
fn max_of(v: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    v.flatten().reduce(f64::max)
}

/// This side's UDP datagrams and messages, by direction.
fn local_udp_io(locals: &[LocalFinal]) -> Option<UdpIoSides> {
    let mut sides: Option<UdpIoSides> = None;
    for l in locals {
        if let Some(io) = l.udp_io {
            sides.get_or_insert_default().add(l.sender, io);
        }
    }
    sides
}

/// A netmeter peer's UDP datagrams and messages, by its direction (the opposite of
/// this side's on each stream).
fn peer_udp_io(locals: &[LocalFinal], peer: &Results) -> Option<UdpIoSides> {
    let mut sides: Option<UdpIoSides> = None;
    for s in &peer.streams {
        let (Some(io), Some(mine)) = (s.netmeter_udp_io, locals.iter().find(|l| l.id == s.id))
        else {
            continue;
        };
        sides.get_or_insert_default().add(!mine.sender, io);
    }
    sides
}

/// A netmeter peer's stream threads, from its results (its role on each stream is the
/// opposite of this side's).
fn peer_threads(locals: &[LocalFinal], peer: &Results) -> Vec<ThreadCpu> {
    peer.streams
        .iter()
        .filter_map(|s| {
            let cpu = s.netmeter_cpu_percent.filter(|c| c.is_finite())?;
            let mine = locals.iter().find(|l| l.id == s.id)?;
            Some(ThreadCpu {
                id: s.id,
                socket: None,
                sender: !mine.sender,
                seconds: (s.end_time - s.start_time).max(0.0),
                cpu_percent: cpu.clamp(0.0, 100.0),
                wait_percent: s
                    .netmeter_cpu_wait_percent
                    .filter(|w| w.is_finite())
                    .map(|w| w.clamp(0.0, 100.0)),
            })
        })
        .collect()
}

fn side(socket: i64, bytes: u64, seconds: f64, sender: bool) -> EndSide {
    EndSide {
        socket,
        start: 0.0,
        end: seconds,
        seconds,
        bytes,
        bits_per_second: bits_per_second(bytes, seconds),
        sender,
        ..EndSide::default()
    }
}

/// One stream's end summary from the local figures and the peer's matching entry.
pub fn end_stream(protocol: Protocol, l: &LocalFinal, peer: Option<&StreamResult>) -> EndStream {
    let peer_secs = peer.map(|p| (p.end_time - p.start_time).max(0.0));
    match protocol {
        Protocol::Tcp => {
            let mut local = side(l.socket, l.bytes, l.seconds, l.sender);
            if let Some(t) = &l.tcp {
                local.retransmits = Some(t.retransmits);
                local.reorder = Some(t.reorder);
                local.max_snd_cwnd = Some(t.max_snd_cwnd);
                local.max_snd_wnd = Some(t.max_snd_wnd);
                local.max_rtt = Some(t.max_rtt);
                local.min_rtt = Some(t.min_rtt);
                local.mean_rtt = Some(t.mean_rtt());
                local.netmeter = Some(TcpEndExtra {
                    spurious_retransmits: t.spurious_retransmits,
                });
            }
            let remote = peer.map(|p| {
                let mut s = side(l.socket, p.bytes, peer_secs.unwrap_or(l.seconds), !l.sender);
                if !l.sender && p.retransmits >= 0 {
                    s.retransmits = Some(p.retransmits as u64);
                    // A netmeter peer says how many were spurious; iperf3 does not.
                    s.netmeter = p.netmeter_spurious_retransmits.map(|n| TcpEndExtra {
                        spurious_retransmits: n,
                    });
                }
                s
            });
            let (sender, receiver) = if l.sender {
                (Some(local), remote)
            } else {
                (remote, Some(local))
            };
            EndStream {
                sender,
                receiver,
                udp: None,
                diskfile: None,
            }
        }
        Protocol::Udp => {
            // iperf3 merges both sides: sender's bytes and packets, receiver's loss.
            let (snd_bytes, snd_packets, snd_secs, rcv, rcv_bytes, rcv_secs) = if l.sender {
                let rcv = peer.map(|p| UdpCounts {
                    highest_seq: p.measured_packets(l.omitted_packets),
                    lost: p.measured_errors(),
                    out_of_order: p.netmeter_out_of_order.unwrap_or(0),
                    duplicates: p.netmeter_duplicates.unwrap_or(0),
                    jitter_s: p.jitter,
                    received: 0,
                    ecn: p.netmeter_ecn,
                });
                (
                    l.bytes,
                    l.packets,
                    l.seconds,
                    rcv,
                    peer.map(|p| p.bytes),
                    peer_secs,
                )
            } else {
                let (b, pk, s) = peer
                    .map(|p| {
                        (
                            p.bytes,
                            p.measured_packets(l.omitted_packets),
                            peer_secs.unwrap_or(0.0),
                        )
                    })
                    .unwrap_or((
                        l.bytes,
                        l.udp.map(|u| u.highest_seq).unwrap_or(0),
                        l.seconds,
                    ));
                (b, pk, s, l.udp, Some(l.bytes), Some(l.seconds))
            };
            let rcv = rcv.unwrap_or_default();
            let packets = snd_packets.max(rcv.highest_seq);
            let netmeter = rcv_bytes.map(|b| UdpEndExtra {
                duplicates: rcv.duplicates,
                receiver_bytes: b,
                receiver_bits_per_second: bits_per_second(b, rcv_secs.unwrap_or(0.0)),
                receiver_seconds: rcv_secs.unwrap_or(0.0),
                receiver_packets: rcv.received,
                ecn: rcv.ecn.map(|e| e.figures()),
                transit: None,
            });
            EndStream {
                sender: None,
                receiver: None,
                udp: Some(EndUdp {
                    socket: l.socket,
                    start: 0.0,
                    end: snd_secs,
                    seconds: snd_secs,
                    bytes: snd_bytes,
                    bits_per_second: bits_per_second(snd_bytes, snd_secs),
                    jitter_ms: rcv.jitter_s * 1000.0,
                    lost_packets: rcv.lost,
                    packets,
                    lost_percent: lost_percent(rcv.lost, packets),
                    out_of_order: rcv.out_of_order,
                    sender: l.sender,
                    netmeter,
                }),
                diskfile: None,
            }
        }
    }
}

/// Sum sender or receiver sides of TCP end summaries.
fn sum_sides<'a>(sides: impl Iterator<Item = &'a EndSide>, sender: bool) -> Option<EndSum> {
    let mut any = false;
    let mut s = EndSum {
        sender,
        ..EndSum::default()
    };
    let mut retrans: Option<u64> = None;
    let mut spurious: Option<u64> = None;
    for x in sides {
        any = true;
        s.bytes += x.bytes;
        s.seconds = s.seconds.max(x.seconds);
        if let Some(r) = x.retransmits {
            retrans = Some(retrans.unwrap_or(0) + r);
        }
        if let Some(n) = x.netmeter {
            spurious = Some(spurious.unwrap_or(0) + n.spurious_retransmits);
        }
    }
    s.end = s.seconds;
    s.bits_per_second = bits_per_second(s.bytes, s.seconds);
    s.retransmits = if sender { retrans } else { None };
    s.netmeter = spurious.filter(|_| sender).map(|n| EndSumExtra {
        spurious_retransmits: Some(n),
        ecn: None,
    });
    any.then_some(s)
}

/// The end sums for one direction's streams: (sum, sum_sent, sum_received).
pub fn end_sums(
    protocol: Protocol,
    streams: &[&EndStream],
    local_sender: bool,
) -> (Option<EndSum>, Option<EndSum>, Option<EndSum>) {
    if streams.is_empty() {
        return (None, None, None);
    }
    match protocol {
        Protocol::Tcp => (
            None,
            sum_sides(streams.iter().filter_map(|s| s.sender.as_ref()), true),
            sum_sides(streams.iter().filter_map(|s| s.receiver.as_ref()), false),
        ),
        Protocol::Udp => {
            let udp: Vec<&EndUdp> = streams.iter().filter_map(|s| s.udp.as_ref()).collect();
            let seconds = udp.iter().map(|u| u.seconds).fold(0.0, f64::max);
            let bytes: u64 = udp.iter().map(|u| u.bytes).sum();
            let packets: u64 = udp.iter().map(|u| u.packets).sum();
            let lost: u64 = udp.iter().map(|u| u.lost_packets).sum();
            let jitter = udp.iter().map(|u| u.jitter_ms).sum::<f64>() / udp.len().max(1) as f64;
            // A sender whose peer sent no results (the test was interrupted) does not
            // know what arrived: like iperf3 it reports 0 received, not what it sent.
            let rcv_known = udp.iter().any(|u| u.netmeter.is_some());
            let rcv_bytes: u64 = udp
                .iter()
                .map(|u| u.netmeter.map(|n| n.receiver_bytes).unwrap_or(0))
                .sum();
            let recv_fig = UdpRecvFigures {
                jitter_ms: jitter,
                lost_packets: lost,
                packets,
                lost_percent: lost_percent(lost, packets),
            };
            // The receiver's bytes over the receiver's own time (it counts until the last
            // datagram arrived, after the end-of-test drain), as iperf3's sum_received
            // does: over the sender's time, data still queued on the path when the sender
            // stopped would inflate the rate.
            let rcv_seconds = udp
                .iter()
                .filter_map(|u| u.netmeter.map(|n| n.receiver_seconds))
                .fold(0.0, f64::max);
            let rcv_seconds = if rcv_seconds > 0.0 {
                rcv_seconds
            } else {
                seconds
            };
            // The receivers' ECN counts added up, where any receiver read them.
            let ecn = udp
                .iter()
                .filter_map(|u| u.netmeter.and_then(|n| n.ecn))
                .map(|f| f.counts)
                .reduce(|a, b| a.plus(&b))
                .map(|c| EndSumExtra {
                    spurious_retransmits: None,
                    ecn: Some(c.figures()),
                });
            let mk = |bytes: u64,
                      fig: UdpRecvFigures,
                      sender: bool,
                      seconds: f64,
                      netmeter: Option<EndSumExtra>| EndSum {
                start: 0.0,
                end: seconds,
                seconds,
                bytes,
                bits_per_second: bits_per_second(bytes, seconds),
                retransmits: None,
                udp_recv: Some(fig),
                sender,
                netmeter,
            };
            let sent_fig = UdpRecvFigures {
                jitter_ms: 0.0,
                lost_packets: 0,
                packets,
                lost_percent: 0.0,
            };
            let rcv_fig = if rcv_known {
                recv_fig
            } else {
                UdpRecvFigures {
                    packets: 0,
                    ..recv_fig
                }
            };
            (
                Some(mk(bytes, recv_fig, local_sender, seconds, ecn)),
                Some(mk(bytes, sent_fig, true, seconds, None)),
                Some(mk(rcv_bytes, rcv_fig, false, rcv_seconds, ecn)),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ShortfallCause;
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
            host: None,
            peak: None,
            threads: Vec::new(),
            disk_file: None,
        }
    }

    fn eth0(line_rate_bps: Option<u64>) -> HostInfo {
        HostInfo {
            interface: Some(crate::host::facts::Interface {
                name: "eth0".into(),
                line_rate_bps,
                ..Default::default()
            }),
            cpus: 4,
            ..HostInfo::default()
        }
    }

    #[test]
    fn efficiency_is_the_receivers_share_of_the_line_rate() {
        let spec = TestSpec::default();
        // 10000 bytes received in 10.5 s = 7619 bit/s against a 10 kbit/s "line".
        let locals = [local(1, true, true, 12_000)];
        let peer = peer_of(&locals);
        let mut i = inputs(&spec, &locals, &peer);
        i.host = Some(eth0(Some(10_000)));
        let e = end(&i);
        let x = e.netmeter.efficiency.as_ref().unwrap();
        let rx = e.sum_received.as_ref().unwrap().bits_per_second;
        assert_eq!((x.interface.as_str(), x.line_rate_bps), ("eth0", 10_000));
        assert_eq!(x.bits_per_second, rx);
        assert!((x.percent - rx / 100.0).abs() < 1e-9, "{}", x.percent);
        assert_eq!(x.reverse_percent, None);
        assert_eq!(e.netmeter.host, i.host);
        // Unknown line rate (virtual device): no efficiency, the host facts stay.
        i.host = Some(eth0(None));
        let e = end(&i);
        assert!(e.netmeter.efficiency.is_none());
        assert!(e.netmeter.host.is_some());
    }

    #[test]
    fn a_given_peak_replaces_or_stands_in_for_the_line_rate() {
        let spec = TestSpec::default();
        let locals = [local(1, true, true, 12_000)];
        let peer = peer_of(&locals);
        let mut i = inputs(&spec, &locals, &peer);
        let rx = end(&i).sum_received.unwrap().bits_per_second;
        // A virtual device (no line rate), as loopback: --line-rate 20 kbit/s.
        i.host = Some(eth0(None));
        i.peak = Some(Peak {
            bits_per_second: 20_000,
            source: PeakSource::Given,
        });
        let e = end(&i);
        let x = e.netmeter.efficiency.as_ref().unwrap();
        assert_eq!((x.interface.as_str(), x.line_rate_bps), ("eth0", 20_000));
        assert_eq!(x.peak, PeakSource::Given);
        assert!((x.percent - rx / 200.0).abs() < 1e-9, "{}", x.percent);
        // It wins over a known line rate; no host facts at all are no obstacle.
        i.host = Some(eth0(Some(10_000)));
        i.peak = Some(Peak {
            bits_per_second: 40_000,
            source: PeakSource::MemoryCopy,
        });
        let x = end(&i).netmeter.efficiency.unwrap();
        assert_eq!((x.line_rate_bps, x.peak), (40_000, PeakSource::MemoryCopy));
        i.host = None;
        let x = end(&i).netmeter.efficiency.unwrap();
        assert_eq!(x.interface, "");
        assert!((x.percent - rx / 400.0).abs() < 1e-9, "{}", x.percent);
        // Without a peak the interface's line rate is it.
        i.host = Some(eth0(Some(10_000)));
        i.peak = None;
        let x = end(&i).netmeter.efficiency.unwrap();
        assert_eq!((x.line_rate_bps, x.peak), (10_000, PeakSource::Interface));
    }

    #[test]
    fn busy_stream_threads_replace_the_process_cpu_rule() {
        let spec = TestSpec::default();
        let locals = [local(1, true, true, 5000)];
        let peer = peer_of(&locals);
        let mut i = inputs(&spec, &locals, &peer);
        i.local_cpu = (99.0, 1.0, 98.0);
        i.host = Some(eth0(None));
        i.threads = vec![ThreadCpu {
            id: 1,
            socket: None,
            sender: true,
            seconds: 10.0,
            cpu_percent: 98.6,
            wait_percent: Some(0.5),
        }];
        let e = end(&i);
        assert_eq!(
            e.netmeter.warnings,
            [
                "the sender's stream thread used 99% of a CPU: the test was CPU-bound on this host, not network-bound; try -P 2"
            ]
        );
        // Each thread names its stream's socket (the text's [  4]), not its iperf3 id.
        assert_eq!(e.netmeter.stream_threads.len(), 1);
        assert_eq!(
            e.netmeter.stream_threads[0],
            ThreadCpu {
                socket: Some(4),
                ..i.threads[0].clone()
            }
        );
        // The peer's threads come in its results: a busy remote receiver is named so, and
        // replaces the rule on the peer's process CPU; out-of-range values are clamped.
        let mut peer = peer_of(&locals);
        peer.cpu_util_total = 99.0;
        peer.streams[0].netmeter_cpu_percent = Some(250.0);
        peer.streams[0].netmeter_cpu_wait_percent = Some(-3.0);
        let mut j = inputs(&spec, &locals, &peer);
        j.host = i.host.clone();
        let e = end(&j);
        let r = &e.netmeter.remote_stream_threads;
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].sender, r[0].cpu_percent, r[0].wait_percent),
            (false, 100.0, Some(0.0))
        );
        assert_eq!(
            e.netmeter.warnings,
            [
                "the remote receiver's stream thread used 100% of a CPU: the test was CPU-bound on the remote host, not network-bound; try -P 2"
            ]
        );
        // --busy-poll: spinning is what was asked for; no CPU-bound warning.
        let polled = TestSpec {
            bounceback: Some(crate::wire::Bounceback {
                request_len: 1,
                reply_len: 1,
                hold_us: 0,
                burst: 1,
                busy_poll_us: 50,
            }),
            ..TestSpec::default()
        };
        let mut k = inputs(&polled, &locals, &peer);
        k.threads = i.threads.clone();
        assert!(
            end(&k).netmeter.warnings.is_empty(),
            "{:?}",
            end(&k).netmeter.warnings
        );
        // Without per-thread figures the process rule still speaks.
        i.threads.clear();
        let w = end(&i).netmeter.warnings;
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("local side was CPU-bound"), "{}", w[0]);
    }

    #[test]
    fn udp_messages_by_side_and_direction() {
        use crate::stats::UdpIo;
        let spec = TestSpec {
            protocol: Protocol::Udp,
            ..TestSpec::default()
        };
        // Two local streams: one sent (GSO, 64 per message), one received (GRO).
        let mut locals = [local(1, true, true, 5000), local(3, false, false, 7000)];
        locals[0].udp_io = Some(UdpIo {
            datagrams: 6400,
            messages: 100,
        });
        locals[1].udp_io = Some(UdpIo {
            datagrams: 500,
            messages: 500,
        });
        let mut peer = peer_of(&locals);
        // The peer received stream 1 and sent stream 3; a stream it has no figure for
        // adds nothing.
        peer.streams[0].netmeter_udp_io = Some(UdpIo {
            datagrams: 6390,
            messages: 120,
        });
        peer.streams[1].netmeter_udp_io = None;
        let e = end(&inputs(&spec, &locals, &peer));
        let l = e.netmeter.local_udp_io.expect("local");
        assert_eq!(l.sent, locals[0].udp_io);
        assert_eq!(l.received, locals[1].udp_io);
        let r = e.netmeter.remote_udp_io.expect("remote");
        assert_eq!(r.sent, None);
        assert_eq!(r.received, peer.streams[0].netmeter_udp_io);
        // TCP streams carry none: no key at all.
        let tcp = [local(1, true, true, 5000)];
        let p = peer_of(&tcp);
        let e = end(&inputs(&TestSpec::default(), &tcp, &p));
        assert_eq!(
            (e.netmeter.local_udp_io, e.netmeter.remote_udp_io),
            (None, None)
        );
    }

    #[test]
    fn paced_udp_senders_short_of_b_are_reported_per_side() {
        let spec = TestSpec {
            protocol: Protocol::Udp,
            rate_bps: 1_000_000,
            block_len: 1460,
            ..TestSpec::default()
        };
        // 10 s at 1 Mbit/s is 1 250 000 bytes. Stream 1 (sent here) 5 % short; stream
        // 3 (received here, sent by the peer) on time, then 3 % short.
        let mut locals = [
            local(1, true, true, 1_187_500),
            local(3, false, false, 1_250_000),
        ];
        locals[0].tcp = None;
        locals[0].pacing_lag_ms = Some(80.0);
        locals[0].send_blocked = Some(0);
        let mut peer = peer_of(&locals);
        peer.streams[1].bytes = 1_250_000;
        peer.streams[1].end_time = 10.0;
        let e = end(&inputs(&spec, &locals, &peer));
        let r = &e.netmeter.rate_shortfall;
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(
            (r[0].side.as_str(), r[0].streams.clone()),
            ("local", vec![1])
        );
        assert_eq!(r[0].cause, ShortfallCause::Stall);
        assert!(
            e.netmeter
                .warnings
                .iter()
                .any(|w| w.starts_with("local UDP sender sent 950 Kbits/sec, 5.0% below -b")),
            "{:?}",
            e.netmeter.warnings
        );
        peer.streams[1].bytes = 1_212_500;
        let e = end(&inputs(&spec, &locals, &peer));
        let sides: Vec<&str> = e
            .netmeter
            .rate_shortfall
            .iter()
            .map(|r| r.side.as_str())
            .collect();
        assert_eq!(sides, ["local", "remote"]);
        assert_eq!(e.netmeter.rate_shortfall[1].streams, vec![3]);
        // Unpaced, TCP, or -b a ceiling under --ecn-responsive: no -b schedule to
        // fall short of.
        for spec in [
            TestSpec {
                rate_bps: 0,
                ..spec.clone()
            },
            TestSpec {
                ecn_responsive: true,
                ..spec.clone()
            },
            TestSpec {
                protocol: Protocol::Tcp,
                ..spec.clone()
            },
        ] {
            assert!(
                end(&inputs(&spec, &locals, &peer))
                    .netmeter
                    .rate_shortfall
                    .is_empty()
            );
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

    #[test]
    fn udp_end_sums_carry_the_receivers_ecn_counts() {
        let stream = |ect1: u64, ce: u64| EndStream {
            udp: Some(EndUdp {
                packets: ect1 + ce,
                sender: true,
                netmeter: Some(UdpEndExtra {
                    ecn: Some(
                        crate::stats::EcnCounts {
                            ect1,
                            ce,
                            ..Default::default()
                        }
                        .figures(),
                    ),
                    ..UdpEndExtra::default()
                }),
                ..EndUdp::default()
            }),
            ..EndStream::default()
        };
        let (a, b) = (stream(900, 100), stream(2900, 100));
        let (sum, sent, received) = end_sums(Protocol::Udp, &[&a, &b], true);
        let ecn = |s: Option<EndSum>| s.and_then(|s| s.netmeter).and_then(|n| n.ecn);
        let r = ecn(received).expect("the receivers' sum");
        assert_eq!((r.counts.ect1, r.counts.ce), (3800, 200));
        assert_eq!(r.ce_percent, 5.0);
        assert_eq!(ecn(sum), Some(r));
        assert_eq!(ecn(sent), None);
    }
}
