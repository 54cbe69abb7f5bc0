//! Interval rows: one stream's row from two cumulative samples, the `[SUM]` of a
//! direction, and the interval object (sums per direction with `--bidir`).

use crate::report::{
    Interval, StreamExt, StreamInterval, SumInterval, TcpFigures, UdpExtra, UdpRecvFigures,
};
use crate::spec::Protocol;
use crate::stats::{UdpCounts, bits_per_second, lost_percent};

/// Cumulative counters of one stream at one instant, as the engine samples them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    pub bytes: u64,
    pub packets: u64,
    pub udp: Option<UdpCounts>,
    /// The stream's socket calls, once its thread has made any (netmeter data loops).
    pub calls: Option<crate::stats::SocketCalls>,
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
            row.netmeter = Some(Box::new(StreamExt {
                udp: Some(UdpExtra {
                    out_of_order: u.out_of_order.saturating_sub(p.out_of_order),
                    duplicates: u.duplicates.saturating_sub(p.duplicates),
                    ecn: u.ecn.map(|e| e.since(&p.ecn.unwrap_or_default()).figures()),
                }),
                ..StreamExt::default()
            }));
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
        netmeter: sum_ext(rows),
    }
}

/// A `[SUM]` row's netmeter figures: iperf 2's, and where the receivers counted ECN
/// codepoints, their counts, out-of-order and duplicate datagrams added up.
fn sum_ext(rows: &[&StreamInterval]) -> Option<Box<StreamExt>> {
    let iperf2 = super::figures::sum_rows(rows);
    let udp: Vec<UdpExtra> = rows
        .iter()
        .filter_map(|r| r.netmeter.as_deref().and_then(|n| n.udp))
        .collect();
    let udp = udp
        .iter()
        .filter_map(|u| u.ecn)
        .map(|f| f.counts)
        .reduce(|a, b| a.plus(&b))
        .map(|c| UdpExtra {
            out_of_order: udp.iter().map(|u| u.out_of_order).sum(),
            duplicates: udp.iter().map(|u| u.duplicates).sum(),
            ecn: Some(c.figures()),
        });
    if iperf2.is_none() && udp.is_none() {
        return None;
    }
    Some(Box::new(StreamExt {
        iperf2: iperf2.unwrap_or_default(),
        udp,
        ..StreamExt::default()
    }))
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
    let sum_bidir_reverse =
        bidir.then(|| Box::new(sum_interval(&rev, start, end, sender_of(&rev))));
    Interval {
        streams: rows.into_iter().map(|r| r.0).collect(),
        sum,
        sum_bidir_reverse,
        owd_histogram_us: Vec::new(),
        frame_latency_histogram_us: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::EcnCounts;

    fn receiver(ecn: Option<EcnCounts>, ooo: u64) -> StreamInterval {
        StreamInterval {
            bytes: 1000,
            udp_recv: Some(UdpRecvFigures::default()),
            netmeter: Some(Box::new(StreamExt {
                udp: Some(UdpExtra {
                    out_of_order: ooo,
                    duplicates: 1,
                    ecn: ecn.map(|c| c.figures()),
                }),
                ..StreamExt::default()
            })),
            ..StreamInterval::default()
        }
    }

    #[test]
    fn sum_rows_carry_the_receivers_ecn_counts_added_up() {
        let a = EcnCounts {
            not_ect: 1,
            ect1: 90,
            ect0: 0,
            ce: 9,
        };
        let b = EcnCounts {
            not_ect: 0,
            ect1: 270,
            ect0: 3,
            ce: 27,
        };
        let (ra, rb) = (receiver(Some(a), 2), receiver(Some(b), 3));
        let s = sum_interval(&[&ra, &rb], 0.0, 1.0, false);
        let u = s
            .netmeter
            .and_then(|n| n.udp)
            .expect("the sum's UDP figures");
        let e = u.ecn.expect("the sum's ECN counts");
        assert_eq!(e.counts, a.plus(&b));
        assert_eq!(e.ce_percent, 9.0);
        assert_eq!((u.out_of_order, u.duplicates), (5, 2));
        // Without ECN counts the sum stays as it was: no netmeter object.
        let (pa, pb) = (receiver(None, 2), receiver(None, 3));
        assert_eq!(sum_interval(&[&pa, &pb], 0.0, 1.0, false).netmeter, None);
    }
}
