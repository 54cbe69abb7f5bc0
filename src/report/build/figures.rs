//! iperf 2's figures (issue 22: packets per second, inP, NetPwr, socket calls) from what
//! the rows and final figures already hold, per stream and summed.
//!
//! Pure: the accountant calls [`fill_row`] on each stream's interval row once the
//! extension recorders' figures (its one-way delays) are in, [`sum_rows`] for a
//! direction's `[SUM]`; the end summary calls [`end`]. Definitions (iperf 2's
//! `src/Reporter.c`, `src/ReportOutputs.c`):
//! - packets per second: UDP datagrams sent, or received, over the row's seconds
//!   (iperf 2 divides by the span its packets covered, which for a steady stream is the
//!   interval);
//! - inP (Little's law): receive rate × mean one-way delay, in bytes and, for UDP, in
//!   datagrams (iperf 2 rounds the rate to whole datagrams per second first);
//! - net power: receive rate (bits/s) ÷ mean one-way delay (s); a sum's delay is the
//!   rate-weighted mean of its streams' delays, so its power is `(Σ rate)² ÷ (8 Σ inP)`;
//! - writes, write errors, reads and read bins: the stream's [`SocketCalls`] since the
//!   last sample, sender's or receiver's as the row is.

use super::{LocalFinal, Sample};
use crate::latency::LatencyStats;
use crate::report::{Iperf2End, Iperf2EndStream, Iperf2Figures, StreamInterval};
use crate::spec::Protocol;
use crate::stats::{SocketCalls, bits_per_second};
use crate::wire::{Results, StreamResult};

/// What one side of a stream did over some span, the figures' inputs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SideCounts {
    pub protocol: Option<Protocol>,
    pub sender: bool,
    pub bytes: u64,
    pub seconds: f64,
    /// UDP: datagrams sent (sender) or received (receiver).
    pub datagrams: u64,
    /// Socket calls, when the side counted them (netmeter data loops).
    pub calls: Option<SocketCalls>,
    /// Receivers with one-way delays: their mean, ms.
    pub owd_mean_ms: Option<f64>,
    /// Bounceback clients with the server's timestamps: clock-sync errors.
    pub clock_sync_errors: Option<u64>,
}

fn per_second(n: f64, seconds: f64) -> Option<f64> {
    (seconds > 0.0).then(|| n / seconds)
}

/// The figures of one side of one stream.
pub fn side(c: &SideCounts) -> Iperf2Figures {
    let udp = c.protocol == Some(Protocol::Udp);
    let pps = if udp {
        per_second(c.datagrams as f64, c.seconds)
    } else {
        None
    };
    let mut f = Iperf2Figures {
        packets_per_second: pps,
        clock_sync_errors: c.clock_sync_errors,
        ..Iperf2Figures::default()
    };
    if let Some(calls) = c.calls {
        if c.sender {
            f.writes = Some(calls.writes);
            f.write_errors = Some(calls.write_errors);
        } else {
            f.reads = Some(calls.reads);
            if c.protocol == Some(Protocol::Tcp) {
                f.read_bins = Some(calls.read_bins);
            }
        }
    }
    let delay_s = c
        .owd_mean_ms
        .filter(|m| *m > 0.0 && m.is_finite())
        .map(|m| m / 1e3);
    if let (false, Some(d), true) = (c.sender, delay_s, c.seconds > 0.0) {
        let bps = bits_per_second(c.bytes, c.seconds);
        f.in_progress_bytes = Some(bps / 8.0 * d);
        f.in_progress_packets = pps.map(|p| p * d);
        f.net_power = Some(bps / d);
    }
    f
}

/// Add a stream row's figures, from the two samples around it and the one-way delays
/// already in its `netmeter` object. A clock-sync count the meter put there is kept.
pub fn fill_row(protocol: Protocol, row: &mut StreamInterval, prev: &Sample, now: &Sample) {
    let ext = row.netmeter.as_deref();
    let calls = now.calls.map(|c| c.since(&prev.calls.unwrap_or_default()));
    let f = side(&SideCounts {
        protocol: Some(protocol),
        sender: row.sender,
        bytes: row.bytes,
        seconds: row.seconds,
        datagrams: now.packets.saturating_sub(prev.packets),
        calls,
        owd_mean_ms: ext.and_then(|e| e.owd).map(|o: LatencyStats| o.mean_ms),
        clock_sync_errors: ext.and_then(|e| e.iperf2.clock_sync_errors),
    });
    if !f.is_empty() {
        row.netmeter.get_or_insert_with(Default::default).iperf2 = f;
    }
}

fn add_u64(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, b) => a.or(b),
    }
}

fn add_f64(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    }
}

/// Sum several streams' figures, each with its rate in bits/s (for the sum's power).
pub fn sum(parts: &[(Iperf2Figures, f64)]) -> Iperf2Figures {
    let mut s = Iperf2Figures::default();
    let (mut delayed_bps, mut inp) = (0.0, 0.0);
    for (f, bps) in parts {
        s.packets_per_second = add_f64(s.packets_per_second, f.packets_per_second);
        s.in_progress_bytes = add_f64(s.in_progress_bytes, f.in_progress_bytes);
        s.in_progress_packets = add_f64(s.in_progress_packets, f.in_progress_packets);
        s.writes = add_u64(s.writes, f.writes);
        s.write_errors = add_u64(s.write_errors, f.write_errors);
        s.reads = add_u64(s.reads, f.reads);
        s.clock_sync_errors = add_u64(s.clock_sync_errors, f.clock_sync_errors);
        s.read_bins = match (s.read_bins, f.read_bins) {
            (Some(a), Some(b)) => Some(
                SocketCalls {
                    read_bins: a,
                    ..SocketCalls::default()
                }
                .plus(&SocketCalls {
                    read_bins: b,
                    ..SocketCalls::default()
                })
                .read_bins,
            ),
            (a, b) => a.or(b),
        };
        if let Some(b) = f.in_progress_bytes {
            delayed_bps += bps;
            inp += b;
        }
    }
    if inp > 0.0 {
        s.net_power = Some(delayed_bps * delayed_bps / (8.0 * inp));
    }
    s
}

/// A direction's `[SUM]` figures from its rows (`None` when no row has any).
pub fn sum_rows(rows: &[&StreamInterval]) -> Option<Iperf2Figures> {
    let parts: Vec<(Iperf2Figures, f64)> = rows
        .iter()
        .filter_map(|r| r.netmeter.as_ref().map(|n| (n.iperf2, r.bits_per_second)))
        .filter(|(f, _)| !f.is_empty())
        .collect();
    (!parts.is_empty()).then(|| sum(&parts))
}

/// This side's counts of one stream over the whole test.
fn local_counts(protocol: Protocol, l: &LocalFinal) -> SideCounts {
    SideCounts {
        protocol: Some(protocol),
        sender: l.sender,
        bytes: l.bytes,
        seconds: l.seconds,
        datagrams: match (&l.udp, l.sender) {
            (Some(u), false) => u.received,
            _ => l.packets,
        },
        calls: l.calls,
        owd_mean_ms: l
            .owd
            .as_ref()
            .and_then(|o| o.summary().owd)
            .map(|o| o.mean_ms),
        clock_sync_errors: l.clock_sync_errors,
    }
}

/// The peer's counts of the same stream, from its results (its role is the opposite).
fn peer_counts(protocol: Protocol, l: &LocalFinal, p: &StreamResult) -> SideCounts {
    let sender = !l.sender;
    let packets = p.measured_packets(l.omitted_packets);
    SideCounts {
        protocol: Some(protocol),
        sender,
        bytes: p.bytes,
        seconds: (p.end_time - p.start_time).max(0.0),
        datagrams: if sender {
            packets
        } else {
            packets.saturating_sub(p.measured_errors())
        },
        calls: p.netmeter_calls,
        owd_mean_ms: p
            .netmeter_owd
            .as_ref()
            .and_then(|o| o.owd)
            .map(|o| o.mean_ms),
        clock_sync_errors: None,
    }
}

/// `end.netmeter.iperf2_figures`: per stream (this side's figures and, from the peer's
/// results, the other side's) and per direction; `None` when no figure applies.
pub fn end(
    protocol: Protocol,
    locals: &[LocalFinal],
    peer: &Results,
    bidir: bool,
) -> Option<Iperf2End> {
    let mut out = Iperf2End::default();
    // (figures, rate) per direction (forward?) and role (sender?).
    let mut parts: [[Vec<(Iperf2Figures, f64)>; 2]; 2] = Default::default();
    for l in locals {
        let mine = local_counts(protocol, l);
        let theirs = peer
            .streams
            .iter()
            .find(|p| p.id == l.id)
            .map(|p| peer_counts(protocol, l, p));
        let mut row = Iperf2EndStream {
            socket: l.socket,
            ..Iperf2EndStream::default()
        };
        for c in std::iter::once(mine).chain(theirs) {
            let f = side(&c);
            if f.is_empty() {
                continue;
            }
            let fwd = l.forward || !bidir;
            parts[usize::from(fwd)][usize::from(c.sender)]
                .push((f, bits_per_second(c.bytes, c.seconds)));
            if c.sender {
                row.sender = Some(f);
            } else {
                row.receiver = Some(f);
            }
        }
        out.streams.push(row);
    }
    let total = |v: &Vec<(Iperf2Figures, f64)>| (!v.is_empty()).then(|| sum(v));
    out.sum_sent = total(&parts[1][1]);
    out.sum_received = total(&parts[1][0]);
    out.sum_sent_bidir_reverse = total(&parts[0][1]);
    out.sum_received_bidir_reverse = total(&parts[0][0]);
    let any = out
        .streams
        .iter()
        .any(|s| s.sender.is_some() || s.receiver.is_some());
    any.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::OwdRecord;
    use crate::report::StreamExt;
    use crate::report::build::accountant::{Accountant, Snapshot, StreamKey};
    use crate::stats::UdpCounts;

    fn key(id: i64, sender: bool) -> StreamKey {
        StreamKey {
            id,
            socket: id + 4,
            sender,
            forward: true,
        }
    }

    fn snap(bytes: u64, packets: u64, udp: Option<UdpCounts>, calls: SocketCalls) -> Snapshot {
        Snapshot {
            sample: Sample {
                bytes,
                packets,
                udp,
                calls: Some(calls),
            },
            tcp: None,
            tcp_received_ecn: None,
        }
    }

    fn writes(writes: u64, write_errors: u64) -> SocketCalls {
        SocketCalls {
            writes,
            write_errors,
            ..SocketCalls::default()
        }
    }

    /// A paced UDP sender of 1000-byte datagrams, one per `sendmmsg` here: its rows carry
    /// the datagrams per second and the calls of each interval, and the sum adds them.
    #[test]
    fn udp_sender_rows_carry_pps_and_write_counts() {
        let keys = vec![key(1, true), key(3, true)];
        let mut a = Accountant::new(Protocol::Udp, false, keys, 0.0, &[None, None]);
        let first = [
            snap(500_000, 500, None, writes(500, 0)),
            snap(250_000, 250, None, writes(250, 2)),
        ];
        let iv = a.tick(0.5, &first, |_, _, _| {});
        let f = iv.streams[0].netmeter.as_ref().unwrap().iperf2;
        assert_eq!(f.packets_per_second, Some(1000.0));
        assert_eq!((f.writes, f.write_errors), (Some(500), Some(0)));
        assert_eq!(
            (f.reads, f.in_progress_bytes, f.net_power),
            (None, None, None)
        );
        let s = iv.sum.netmeter.as_ref().unwrap().iperf2;
        assert_eq!(s.packets_per_second, Some(1500.0));
        assert_eq!((s.writes, s.write_errors), (Some(750), Some(2)));
        // The next interval counts only its own calls.
        let second = [
            snap(1_500_000, 1500, None, writes(1500, 0)),
            snap(250_000, 250, None, writes(250, 5)),
        ];
        let iv = a.tick(1.5, &second, |_, _, _| {});
        let f = iv.streams[1].netmeter.as_ref().unwrap().iperf2;
        assert_eq!(f.packets_per_second, Some(0.0));
        assert_eq!((f.writes, f.write_errors), (Some(0), Some(3)));
        let finals = a.finals(1.5, 1.5, &second);
        assert_eq!(finals[0].calls, Some(writes(1500, 0)));
    }

    /// A UDP receiver with one-way delays: inP and network power by Little's law from the
    /// row's rate and its mean delay; a row without calls or delays gets nothing.
    #[test]
    fn udp_receiver_rows_carry_inp_and_net_power() {
        let keys = vec![key(1, false)];
        let mut a = Accountant::new(Protocol::Udp, false, keys, 0.0, &[None]);
        let udp = UdpCounts {
            highest_seq: 1000,
            received: 1000,
            ..UdpCounts::default()
        };
        let reads = SocketCalls {
            reads: 40,
            ..SocketCalls::default()
        };
        // 1000 datagrams of 1250 bytes in 1 s (10 Mbit/s), 10 ms mean delay.
        let snaps = [snap(1_250_000, 1000, Some(udp), reads)];
        let iv = a.tick(1.0, &snaps, |_, row, _| {
            row.netmeter.get_or_insert_with(Default::default).owd = Some(LatencyStats {
                count: 1000,
                mean_ms: 10.0,
                ..LatencyStats::default()
            });
        });
        let f = iv.streams[0].netmeter.as_ref().unwrap().iperf2;
        assert_eq!(f.packets_per_second, Some(1000.0));
        assert_eq!(f.reads, Some(40));
        assert_eq!(f.read_bins, None, "UDP reads are not binned");
        assert_eq!(f.writes, None);
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-6 * b);
        assert!(close(f.in_progress_bytes, 12_500.0), "{f:?}");
        assert!(close(f.in_progress_packets, 10.0), "{f:?}");
        assert!(close(f.net_power, 1e9), "{f:?}");

        let mut plain = StreamInterval {
            bytes: 1000,
            seconds: 1.0,
            ..StreamInterval::default()
        };
        fill_row(
            Protocol::Tcp,
            &mut plain,
            &Sample::default(),
            &Sample::default(),
        );
        assert_eq!(plain.netmeter, None);
    }

    /// Two streams at the same rate, 10 ms and 30 ms: the sum's delay is their
    /// rate-weighted mean (20 ms), so its power is the summed rate ÷ 20 ms.
    #[test]
    fn sum_power_uses_the_rate_weighted_delay() {
        let one = |ms: f64| {
            side(&SideCounts {
                protocol: Some(Protocol::Tcp),
                bytes: 1_000_000,
                seconds: 1.0,
                owd_mean_ms: Some(ms),
                ..SideCounts::default()
            })
        };
        let s = sum(&[(one(10.0), 8e6), (one(30.0), 8e6)]);
        assert!((s.in_progress_bytes.unwrap() - 40_000.0).abs() < 1e-6);
        assert!((s.net_power.unwrap() - 16e6 / 0.02).abs() < 1.0);
        assert_eq!(s.in_progress_packets, None, "TCP has no datagrams");
    }

    /// A TCP receiver's reads land in iperf 2's eighths; the sum adds bin by bin.
    #[test]
    fn tcp_receiver_reads_are_binned() {
        let calls = SocketCalls {
            reads: 3,
            read_bins: [1, 0, 0, 0, 0, 0, 0, 2],
            ..SocketCalls::default()
        };
        let mut row = StreamInterval {
            bytes: 300_000,
            seconds: 1.0,
            bits_per_second: 2.4e6,
            ..StreamInterval::default()
        };
        let now = Sample {
            calls: Some(calls),
            ..Sample::default()
        };
        fill_row(Protocol::Tcp, &mut row, &Sample::default(), &now);
        let f = row.netmeter.as_ref().unwrap().iperf2;
        assert_eq!((f.reads, f.read_bins), (Some(3), Some(calls.read_bins)));
        assert_eq!(f.packets_per_second, None);
        let s = sum_rows(&[&row, &row]).unwrap();
        assert_eq!(s.reads, Some(6));
        assert_eq!(s.read_bins, Some([2, 0, 0, 0, 0, 0, 0, 4]));
        // A row's clock-sync count (bounceback, set by the meter) survives.
        let mut bb = StreamInterval {
            sender: true,
            netmeter: Some(Box::new(StreamExt {
                iperf2: Iperf2Figures {
                    clock_sync_errors: Some(2),
                    ..Iperf2Figures::default()
                },
                ..StreamExt::default()
            })),
            ..StreamInterval::default()
        };
        fill_row(
            Protocol::Udp,
            &mut bb,
            &Sample::default(),
            &Sample::default(),
        );
        assert_eq!(bb.netmeter.unwrap().iperf2.clock_sync_errors, Some(2));
    }

    /// The end summary: a UDP client's sending stream, with the server's reads and
    /// one-way delays from its results; per stream and per direction.
    #[test]
    fn end_takes_the_sender_locally_and_the_receiver_from_the_peer() {
        let l = LocalFinal {
            id: 1,
            socket: 5,
            sender: true,
            forward: true,
            bytes: 2_500_000,
            seconds: 2.0,
            packets: 2000,
            calls: Some(writes(2000, 1)),
            ..LocalFinal::default()
        };
        let mut owd = OwdRecord::default();
        for _ in 0..10 {
            owd.total.record_ns(20_000_000);
        }
        let peer = Results {
            streams: vec![StreamResult {
                id: 1,
                bytes: 2_400_000,
                packets: 2000,
                errors: 80,
                end_time: 2.0,
                netmeter_calls: Some(SocketCalls {
                    reads: 500,
                    ..SocketCalls::default()
                }),
                netmeter_owd: Some(crate::latency::OwdSummary {
                    owd: owd.total.stats(),
                    ..crate::latency::OwdSummary::default()
                }),
                ..StreamResult::default()
            }],
            ..Results::default()
        };
        let e = end(Protocol::Udp, &[l], &peer, false).unwrap();
        let s = &e.streams[0];
        assert_eq!(s.socket, 5);
        let snd = s.sender.unwrap();
        assert_eq!(snd.packets_per_second, Some(1000.0));
        assert_eq!((snd.writes, snd.write_errors), (Some(2000), Some(1)));
        let rcv = s.receiver.unwrap();
        assert_eq!(rcv.packets_per_second, Some(960.0));
        assert_eq!(rcv.reads, Some(500));
        let inp = rcv.in_progress_bytes.unwrap();
        // 1.2 MB/s × ~20 ms (the histogram's resolution): ~24 kB.
        assert!((inp - 24_000.0).abs() < 240.0, "{inp}");
        assert_eq!(e.sum_sent, Some(snd));
        assert_eq!(e.sum_received.unwrap().reads, Some(500));
        assert_eq!(e.sum_sent_bidir_reverse, None);
        // An iperf3 peer and a TCP test without counted calls: nothing to report.
        let quiet = LocalFinal {
            sender: true,
            ..LocalFinal::default()
        };
        assert_eq!(
            end(Protocol::Tcp, &[quiet], &Results::default(), false),
            None
        );
    }
}
