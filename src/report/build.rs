//! Turning per-stream samples into report values: interval rows and the end summary.
//!
//! Pure functions: the engine hands over cumulative counters and times, and the peer's
//! results message; these functions apply iperf3's definitions (see `docs/metrics.md`)
//! and return typed report values.

use super::{BouncebackEnd, TripTimesEnd, WorkingLoadEnd};
use super::{
    EndSide, EndStream, EndSum, EndUdp, Interval, StreamExt, StreamInterval, SumInterval,
    TcpEndExtra, TcpFigures, UdpEndExtra, UdpExtra, UdpRecvFigures,
};
use crate::clocksync::ClockEstimate;
use crate::latency::Hist;
use crate::latency::{OwdRecord, OwdSummary};
use crate::spec::Protocol;
use crate::stats::{UdpCounts, bits_per_second, lost_percent};
use crate::wire::Bounceback;
use crate::wire::WorkingLoad;
use crate::wire::{Results, StreamResult};

pub mod accountant;
pub mod connect;
mod end;
pub mod profile;
pub use end::{EndInputs, end};

/// TCP summary figures kept by a sending stream over the whole test.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpTotals {
    pub retransmits: u64,
    /// Of `retransmits`, those the receiver D-SACKed (not needed).
    pub spurious_retransmits: u64,
    pub max_snd_cwnd: u64,
    pub max_snd_wnd: u64,
    pub max_rtt: u64,
    pub min_rtt: u64,
    pub rtt_sum: u64,
    pub rtt_samples: u64,
    /// `tcpi_reord_seen` at the last sample (a running count in the kernel).
    pub reorder: u64,
}

impl TcpTotals {
    /// Fold in one interval's TCP_INFO sample.
    pub fn add(&mut self, f: &TcpFigures) {
        self.retransmits += f.retransmits;
        self.reorder = f.reorder;
        self.max_snd_cwnd = self.max_snd_cwnd.max(f.snd_cwnd);
        self.max_snd_wnd = self.max_snd_wnd.max(f.snd_wnd);
        self.max_rtt = self.max_rtt.max(f.rtt);
        self.min_rtt = if self.rtt_samples == 0 {
            f.rtt
        } else {
            self.min_rtt.min(f.rtt)
        };
        self.rtt_sum += f.rtt;
        self.rtt_samples += 1;
    }

    /// Mean of the sampled smoothed RTTs, microseconds.
    pub fn mean_rtt(&self) -> u64 {
        self.rtt_sum.checked_div(self.rtt_samples).unwrap_or(0)
    }
}

/// A local stream's figures at the end of the test (after the omit period).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LocalFinal {
    pub id: i64,
    pub socket: i64,
    pub sender: bool,
    /// True for streams flowing client → server.
    pub forward: bool,
    pub bytes: u64,
    pub seconds: f64,
    /// UDP datagrams sent (sender) — receivers use `udp`.
    pub packets: u64,
    /// UDP, counted during the omit period and not in the figures above: datagrams
    /// sent (sender) or the highest sequence number seen (receiver). iperf3 3.20+
    /// results carry totals with these beside them (`omitted_packets`).
    pub omitted_packets: u64,
    /// UDP receivers: datagrams lost during the omit period (`omitted_errors`).
    pub omitted_errors: u64,
    pub tcp: Option<TcpTotals>,
    pub udp: Option<UdpCounts>,
    /// UDP receivers: datagrams this host's kernel dropped for a full receive buffer.
    pub host_drops: Option<u64>,
    /// `-Z` senders using MSG_ZEROCOPY: (sends the kernel released, of which it copied).
    pub zerocopy: Option<(u64, u64)>,
    /// Bounceback clients: the round-trip histogram and UDP requests never answered.
    pub rtt: Option<(Hist, u64)>,
    /// `--trip-times` receivers: one-way delays.
    pub owd: Option<OwdRecord>,
    /// `--connect-only` clients: the stream's connections.
    pub conn: Option<super::connect::ConnFinal>,
    /// Profiled senders (`--burst-size`, `--isochronous`): the stream's units.
    pub units: Option<crate::profile::UnitFigures>,
    /// Isochronous UDP receivers: whole frames.
    pub frames: Option<crate::profile::FrameSummary>,
    /// `--working-load` probe: round trips before the load started.
    pub rtt_idle: Option<Hist>,
}

/// The working-load summary on the client (`None` unless it ran one).
pub fn working_load_end(
    w: &WorkingLoad,
    locals: &[LocalFinal],
    peer: &Results,
) -> Option<WorkingLoadEnd> {
    let probe = locals.iter().find(|l| l.rtt.is_some())?;
    let (loaded, _) = probe.rtt.as_ref()?;
    let idle = probe.rtt_idle.clone().unwrap_or_default();
    let idle_s = w.idle_ms as f64 / 1000.0;
    // What the receivers counted: a sender's count includes data still queued in its
    // socket buffer and the path, which overstates a short loaded phase.
    let bulk = |client_sends: bool| -> f64 {
        let (bytes, secs) = locals
            .iter()
            .filter(|l| l.rtt.is_none() && l.sender == client_sends)
            .map(|l| {
                if client_sends {
                    let p = peer.streams.iter().find(|p| p.id == l.id);
                    p.map_or((0, 0.0), |p| (p.bytes, p.end_time - p.start_time))
                } else {
                    (l.bytes, l.seconds)
                }
            })
            .fold((0u64, 0f64), |(b, s), (pb, ps)| (b + pb, s.max(ps)));
        bits_per_second(bytes, (secs - idle_s).max(0.0))
    };
    Some(WorkingLoadEnd {
        direction: match (w.up, w.down) {
            (true, true) => "bidir",
            (false, true) => "down",
            _ => "up",
        }
        .into(),
        streams: w.streams,
        idle_seconds: idle_s,
        idle_rtt: idle.stats(),
        loaded_rtt: loaded.stats(),
        idle_rpm: idle.rpm(),
        loaded_rpm: loaded.rpm(),
        up_bits_per_second: if w.up { bulk(true) } else { 0.0 },
        down_bits_per_second: if w.down { bulk(false) } else { 0.0 },
        idle_rtt_histogram_us: idle.buckets_us(),
        loaded_rtt_histogram_us: loaded.buckets_us(),
    })
}

/// One-way delays per direction, from the local receivers and the peer's results.
pub fn trip_times_end(
    clock: &ClockEstimate,
    clock_name: &str,
    locals: &[LocalFinal],
    peer: &Results,
    client: bool,
) -> TripTimesEnd {
    // Local receivers' records, split by direction.
    let local = |forward: bool| -> Vec<OwdSummary> {
        locals
            .iter()
            .filter(|l| !l.sender && l.forward == forward)
            .filter_map(|l| l.owd.as_ref().map(|o| o.summary()))
            .collect()
    };
    // The peer measured the streams this side sends on.
    let remote = |forward: bool| -> Vec<OwdSummary> {
        locals
            .iter()
            .filter(|l| l.sender && l.forward == forward)
            .filter_map(|l| peer.streams.iter().find(|p| p.id == l.id))
            .filter_map(|p| p.netmeter_owd.clone())
            .collect()
    };
    // The server receives client → server streams; the client the others.
    let side = |forward: bool| {
        let parts = if forward != client {
            local(forward)
        } else {
            remote(forward)
        };
        OwdSummary::merge(&parts)
    };
    TripTimesEnd {
        clock: clock_name.to_string(),
        offset_ms: clock.offset_ns as f64 / 1e6,
        offset_uncertainty_ms: clock.uncertainty_ns as f64 / 1e6,
        client_to_server: side(true),
        server_to_client: side(false),
    }
}

/// The bounceback summary over a client's streams (`None` unless it ran one).
pub fn bounceback_end(b: &Bounceback, locals: &[LocalFinal]) -> Option<BouncebackEnd> {
    let mut all = Hist::default();
    let mut lost = 0;
    let mut any = false;
    for (h, l) in locals.iter().filter_map(|l| l.rtt.as_ref()) {
        all.merge(h);
        lost += l;
        any = true;
    }
    if !any {
        return None;
    }
    let seconds = locals.iter().map(|l| l.seconds).fold(0.0, f64::max);
    let transactions = all.len();
    Some(BouncebackEnd {
        request_bytes: b.request_len,
        reply_bytes: b.reply_len,
        hold_ms: b.hold_us as f64 / 1000.0,
        burst: b.burst,
        busy_poll_us: b.busy_poll_us,
        streams: locals.len() as u32,
        transactions,
        seconds,
        transactions_per_second: if seconds > 0.0 {
            transactions as f64 / seconds
        } else {
            0.0
        },
        lost,
        rtt: all.stats().unwrap_or_default(),
        rtt_histogram_us: all.buckets_us(),
    })
}

/// The results message this side sends to its peer.
pub fn local_results(
    locals: &[LocalFinal],
    cpu: (f64, f64, f64),
    has_retransmits: bool,
    congestion: Option<String>,
) -> Results {
    let any_sender = locals.iter().any(|l| l.sender);
    Results {
        cpu_util_total: cpu.0,
        cpu_util_user: cpu.1,
        cpu_util_system: cpu.2,
        sender_has_retransmits: if !any_sender {
            -1
        } else if has_retransmits {
            1
        } else {
            0
        },
        congestion_used: congestion,
        streams: locals
            .iter()
            .map(|l| {
                let (packets, errors, jitter, ooo, dup) = match (&l.udp, l.sender) {
                    (Some(u), false) => (
                        u.highest_seq as i64,
                        u.lost as i64,
                        u.jitter_s,
                        Some(u.out_of_order),
                        Some(u.duplicates),
                    ),
                    _ => (l.packets as i64, 0, 0.0, None, None),
                };
                // iperf3 (3.20+ reads the omitted_* keys) sends whole-test counts
                // with the omit period's part beside them; a 3.20+ peer that finds
                // no omitted_* keys takes all errors (receiver) or all packets
                // (sender, seen from a receiving client) as omitted and shows 0.
                StreamResult {
                    id: l.id,
                    bytes: l.bytes,
                    retransmits: l.tcp.map(|t| t.retransmits as i64).unwrap_or(-1),
                    netmeter_spurious_retransmits: l.tcp.map(|t| t.spurious_retransmits),
                    jitter,
                    errors: errors + l.omitted_errors as i64,
                    omitted_errors: Some(l.omitted_errors as i64),
                    packets: packets + l.omitted_packets as i64,
                    omitted_packets: Some(l.omitted_packets as i64),
                    start_time: 0.0,
                    end_time: l.seconds,
                    netmeter_out_of_order: ooo,
                    netmeter_duplicates: dup,
                    netmeter_host_drops: l.host_drops,
                    netmeter_owd: l.owd.as_ref().map(|o| o.summary()),
                    netmeter_frames: l.frames.clone(),
                }
            })
            .collect(),
        server_output_json: None,
        server_output_text: None,
    }
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
    s.netmeter = spurious.filter(|_| sender).map(|n| TcpEndExtra {
        spurious_retransmits: n,
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
            let mk = |bytes: u64, fig: UdpRecvFigures, sender: bool, seconds: f64| EndSum {
                start: 0.0,
                end: seconds,
                seconds,
                bytes,
                bits_per_second: bits_per_second(bytes, seconds),
                retransmits: None,
                udp_recv: Some(fig),
                sender,
                netmeter: None,
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
                Some(mk(bytes, recv_fig, local_sender, seconds)),
                Some(mk(bytes, sent_fig, true, seconds)),
                Some(mk(rcv_bytes, rcv_fig, false, rcv_seconds)),
            )
        }
    }
}

/// Cumulative counters of one stream at one instant, as the engine samples them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    pub bytes: u64,
    pub packets: u64,
    pub udp: Option<UdpCounts>,
}

/// One stream's interval row from two cumulative samples.
#[allow(clippy::too_many_arguments)]
pub fn stream_interval(
    protocol: Protocol,
    socket: i64,
    sender: bool,
    start: f64,
    end: f64,
    prev: &Sample,
    now: &Sample,
    tcp: Option<TcpFigures>,
    omitted: bool,
) -> StreamInterval {
    let seconds = end - start;
    let bytes = now.bytes.saturating_sub(prev.bytes);
    let mut row = StreamInterval {
        socket,
        start,
        end,
        seconds,
        bytes,
        bits_per_second: bits_per_second(bytes, seconds),
        tcp: if sender { tcp } else { None },
        omitted,
        sender,
        ..StreamInterval::default()
    };
    if protocol == Protocol::Udp {
        if sender {
            row.packets = Some(now.packets.saturating_sub(prev.packets));
        } else if let Some(u) = now.udp {
            let p = prev.udp.unwrap_or_default();
            let packets = u.highest_seq.saturating_sub(p.highest_seq);
            // Lost can shrink when late datagrams fill earlier gaps: clamp at zero.
            let lost = u.lost.saturating_sub(p.lost);
            row.udp_recv = Some(UdpRecvFigures {
                jitter_ms: u.jitter_s * 1000.0,
                lost_packets: lost,
                packets,
                lost_percent: lost_percent(lost, packets),
            });
            row.netmeter = Some(StreamExt {
                udp: Some(UdpExtra {
                    out_of_order: u.out_of_order.saturating_sub(p.out_of_order),
                    duplicates: u.duplicates.saturating_sub(p.duplicates),
                }),
                ..StreamExt::default()
            });
        }
    }
    row
}

/// Sum the rows of one direction into an interval sum.
pub fn sum_interval(rows: &[&StreamInterval], start: f64, end: f64, sender: bool) -> SumInterval {
    let seconds = end - start;
    let bytes = rows.iter().map(|r| r.bytes).sum();
    let tcp: Vec<&TcpFigures> = rows.iter().filter_map(|r| r.tcp.as_ref()).collect();
    let udp: Vec<&UdpRecvFigures> = rows.iter().filter_map(|r| r.udp_recv.as_ref()).collect();
    let udp_recv = (!udp.is_empty()).then(|| {
        let lost = udp.iter().map(|u| u.lost_packets).sum();
        let packets = udp.iter().map(|u| u.packets).sum();
        UdpRecvFigures {
            jitter_ms: udp.iter().map(|u| u.jitter_ms).sum::<f64>() / udp.len() as f64,
            lost_packets: lost,
            packets,
            lost_percent: lost_percent(lost, packets),
        }
    });
    let packets = rows
        .iter()
        .filter_map(|r| r.packets)
        .fold(None, |a: Option<u64>, p| Some(a.unwrap_or(0) + p));
    SumInterval {
        start,
        end,
        seconds,
        bytes,
        bits_per_second: bits_per_second(bytes, seconds),
        retransmits: (!tcp.is_empty()).then(|| tcp.iter().map(|t| t.retransmits).sum()),
        udp_recv,
        packets,
        omitted: rows.first().is_some_and(|r| r.omitted),
        sender,
        netmeter: None,
    }
}

/// Assemble one `intervals[]` element from its rows; `forward` tells for each row
/// whether its stream flows client → server (`sum`) or back (`sum_bidir_reverse`).
pub fn interval(rows: Vec<(StreamInterval, bool)>, start: f64, end: f64, bidir: bool) -> Interval {
    let fwd: Vec<&StreamInterval> = rows
        .iter()
        .filter(|r| r.1 || !bidir)
        .map(|r| &r.0)
        .collect();
    let rev: Vec<&StreamInterval> = rows
        .iter()
        .filter(|r| !r.1 && bidir)
        .map(|r| &r.0)
        .collect();
    let sender_of = |v: &[&StreamInterval]| v.first().is_some_and(|r| r.sender);
    let sum = sum_interval(&fwd, start, end, sender_of(&fwd));
    let sum_bidir_reverse = bidir.then(|| sum_interval(&rev, start, end, sender_of(&rev)));
    Interval {
        streams: rows.into_iter().map(|r| r.0).collect(),
        sum,
        sum_bidir_reverse,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_end_merges_peer_receiver() {
        let l = LocalFinal {
            id: 1,
            socket: 5,
            sender: true,
            forward: true,
            bytes: 1000,
            seconds: 2.0,
            tcp: Some(TcpTotals {
                retransmits: 3,
                ..TcpTotals::default()
            }),
            ..LocalFinal::default()
        };
        let peer = StreamResult {
            id: 1,
            bytes: 900,
            end_time: 2.0,
            retransmits: -1,
            ..StreamResult::default()
        };
        let e = end_stream(Protocol::Tcp, &l, Some(&peer));
        assert_eq!(e.sender.as_ref().unwrap().bytes, 1000);
        assert_eq!(e.sender.as_ref().unwrap().retransmits, Some(3));
        assert_eq!(e.receiver.as_ref().unwrap().bytes, 900);
        assert_eq!(e.receiver.as_ref().unwrap().bits_per_second, 3600.0);
        let (_, sent, recv) = end_sums(Protocol::Tcp, &[&e], true);
        assert_eq!(sent.unwrap().retransmits, Some(3));
        assert_eq!(recv.unwrap().bytes, 900);
    }

    #[test]
    fn udp_end_uses_sender_packets_and_receiver_loss() {
        let l = LocalFinal {
            id: 1,
            socket: 5,
            sender: true,
            forward: true,
            bytes: 100 * 1000,
            seconds: 1.0,
            packets: 100,
            ..LocalFinal::default()
        };
        let peer = StreamResult {
            id: 1,
            bytes: 98 * 1000,
            packets: 99,
            errors: 2,
            jitter: 0.0005,
            end_time: 1.0,
            ..StreamResult::default()
        };
        let e = end_stream(Protocol::Udp, &l, Some(&peer));
        let u = e.udp.unwrap();
        assert_eq!((u.packets, u.lost_packets, u.lost_percent), (100, 2, 2.0));
        assert!((u.jitter_ms - 0.5).abs() < 1e-12);
    }

    #[test]
    fn udp_sender_without_peer_results_reports_nothing_received() {
        // Interrupted: the server's results never came.
        let l = LocalFinal {
            id: 1,
            sender: true,
            forward: true,
            bytes: 500_000,
            seconds: 2.0,
            packets: 500,
            ..LocalFinal::default()
        };
        let e = end_stream(Protocol::Udp, &l, None);
        let (_, sent, recv) = end_sums(Protocol::Udp, &[&e], true);
        assert_eq!(sent.unwrap().bytes, 500_000);
        let recv = recv.unwrap();
        assert_eq!((recv.bytes, recv.udp_recv.unwrap().packets), (0, 0));
    }

    #[test]
    fn udp_sum_received_uses_receiver_time() {
        // The sender stopped at 4 s; the receiver counted until 4.1 s (queued data).
        let l = LocalFinal {
            id: 1,
            sender: true,
            forward: true,
            bytes: 500_000,
            seconds: 4.0,
            packets: 500,
            ..LocalFinal::default()
        };
        let peer = StreamResult {
            id: 1,
            bytes: 410_000,
            packets: 500,
            end_time: 4.1,
            ..StreamResult::default()
        };
        let e = end_stream(Protocol::Udp, &l, Some(&peer));
        let (_, sent, recv) = end_sums(Protocol::Udp, &[&e], true);
        let (sent, recv) = (sent.unwrap(), recv.unwrap());
        assert_eq!((sent.seconds, sent.bits_per_second), (4.0, 1_000_000.0));
        assert_eq!(recv.seconds, 4.1);
        assert!((recv.bits_per_second - 800_000.0).abs() < 1e-6);
    }

    #[test]
    fn udp_interval_loss_from_deltas() {
        let prev = Sample {
            bytes: 0,
            packets: 0,
            udp: Some(UdpCounts::default()),
        };
        let now = Sample {
            bytes: 4800,
            packets: 0,
            udp: Some(UdpCounts {
                highest_seq: 50,
                received: 49,
                lost: 1,
                ..UdpCounts::default()
            }),
        };
        let r = stream_interval(Protocol::Udp, 5, false, 0.0, 1.0, &prev, &now, None, false);
        let f = r.udp_recv.unwrap();
        assert_eq!((f.lost_packets, f.packets, f.lost_percent), (1, 50, 2.0));
        assert_eq!(r.bits_per_second, 38400.0);
    }

    #[test]
    fn results_message_roles() {
        let recv = LocalFinal {
            id: 1,
            udp: Some(UdpCounts {
                highest_seq: 10,
                lost: 1,
                ..UdpCounts::default()
            }),
            ..LocalFinal::default()
        };
        let r = local_results(&[recv], (1.0, 0.5, 0.5), false, None);
        assert_eq!(r.sender_has_retransmits, -1);
        assert_eq!((r.streams[0].packets, r.streams[0].errors), (10, 1));
    }

    /// iperf3 3.20+ reads `omitted_packets`/`omitted_errors` beside whole-test counts;
    /// without them it shows 0 lost (receiving server) or 0 packets (sending server).
    #[test]
    fn results_carry_whole_test_counts_and_the_omitted_share() {
        let recv = LocalFinal {
            id: 1,
            udp: Some(UdpCounts {
                highest_seq: 10,
                lost: 1,
                ..UdpCounts::default()
            }),
            omitted_packets: 5,
            omitted_errors: 2,
            ..LocalFinal::default()
        };
        let send = LocalFinal {
            id: 3,
            sender: true,
            packets: 20,
            omitted_packets: 7,
            ..LocalFinal::default()
        };
        let r = local_results(&[recv, send], (1.0, 0.5, 0.5), false, None);
        let s = &r.streams[0];
        assert_eq!((s.packets, s.omitted_packets), (15, Some(5)));
        assert_eq!((s.errors, s.omitted_errors), (3, Some(2)));
        assert_eq!((s.measured_packets(0), s.measured_errors()), (10, 1));
        let s = &r.streams[1];
        assert_eq!((s.packets, s.omitted_packets), (27, Some(7)));
        assert_eq!((s.errors, s.omitted_errors), (0, Some(0)));
        // No -O: the keys are still there, as 0 (3.20+ needs both or neither).
        let plain = local_results(&[LocalFinal::default()], (0.0, 0.0, 0.0), false, None);
        assert_eq!(
            (
                plain.streams[0].omitted_packets,
                plain.streams[0].omitted_errors
            ),
            (Some(0), Some(0))
        );
        // A pre-3.20 peer's whole-test count less this side's own omit-period count.
        let old = StreamResult {
            packets: 27,
            ..StreamResult::default()
        };
        assert_eq!(old.measured_packets(7), 20);
    }

    /// Spurious retransmits travel from a sending netmeter to its peer in the results,
    /// land in the receiving side's end summary, and are summed with the retransmits;
    /// an iperf3 sender's results (no such key) leave them unknown, not 0.
    #[test]
    fn spurious_retransmits_reach_the_peer_and_the_sums() {
        let tcp = TcpTotals {
            retransmits: 12,
            spurious_retransmits: 9,
            ..TcpTotals::default()
        };
        let sender = LocalFinal {
            id: 1,
            sender: true,
            tcp: Some(tcp),
            ..LocalFinal::default()
        };
        let results = local_results(std::slice::from_ref(&sender), (1.0, 0.5, 0.5), true, None);
        let wire = serde_json::to_string(&results).unwrap();
        let back: Results = serde_json::from_str(&wire).unwrap();
        assert_eq!(back.streams[0].retransmits, 12);
        assert_eq!(back.streams[0].netmeter_spurious_retransmits, Some(9));

        let receiver = LocalFinal {
            id: 1,
            ..LocalFinal::default()
        };
        let e = end_stream(Protocol::Tcp, &receiver, Some(&back.streams[0]));
        let s = e.sender.as_ref().unwrap();
        assert_eq!(s.retransmits, Some(12));
        assert_eq!(s.netmeter.map(|n| n.spurious_retransmits), Some(9));
        let local = end_stream(Protocol::Tcp, &sender, None);
        let (_, sent, received) = end_sums(Protocol::Tcp, &[&e, &local], false);
        let sent = sent.unwrap();
        assert_eq!(sent.retransmits, Some(24));
        assert_eq!(sent.netmeter.map(|n| n.spurious_retransmits), Some(18));
        assert_eq!(received.unwrap().netmeter, None);

        let mut iperf3 = back.streams[0].clone();
        iperf3.netmeter_spurious_retransmits = None;
        let e = end_stream(Protocol::Tcp, &receiver, Some(&iperf3));
        assert_eq!(e.sender.unwrap().netmeter, None);
    }
}
