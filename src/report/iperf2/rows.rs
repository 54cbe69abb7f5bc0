//! Rows of iperf 2's layouts taken from a netmeter report's end summary, for the text
//! renderer and the CSV lines alike.

use super::Row;
use crate::latency::LatencyStats;
use crate::report::{End, EndStream, TransitSummary};
use std::collections::HashMap;

/// Stream `i`'s whole-test row for the side that sends on it (`sender`) or receives;
/// `client_sends`: the client is the stream's sender (which way its one-way delays
/// went).
pub fn end_row(
    end: &End,
    i: usize,
    st: &EndStream,
    (sender, client_sends): (bool, bool),
    last: &HashMap<i64, Row>,
) -> Option<(i64, Row)> {
    let figs = end
        .netmeter
        .iperf2_figures
        .as_ref()
        .and_then(|f| f.streams.get(i))
        .and_then(|f| if sender { f.sender } else { f.receiver })
        .unwrap_or_default();
    // The receiver's one-way delays over the whole test.
    let owd = end
        .netmeter
        .trip_times
        .as_ref()
        .and_then(|t| {
            if client_sends {
                t.client_to_server.as_ref()
            } else {
                t.server_to_client.as_ref()
            }
        })
        .and_then(|o| o.owd)
        .filter(|_| !sender && end.streams.len() == 1);
    if let Some(u) = &st.udp {
        let ext = u.netmeter.filter(|_| !sender);
        // An iperf 2 server's report carries its transit: its latency columns.
        let owd = owd.or_else(|| ext.and_then(|x| x.transit).map(|t| transit_latency(&t)));
        let row = Row {
            start: u.start,
            end: ext.map_or(u.end, |x| u.start + x.receiver_seconds),
            seconds: ext.map_or(u.seconds, |x| x.receiver_seconds),
            bytes: ext.map_or(u.bytes, |x| x.receiver_bytes),
            packets: Some(ext.map_or(u.packets, |x| x.receiver_packets)),
            udp_recv: (!sender).then_some(crate::report::UdpRecvFigures {
                jitter_ms: u.jitter_ms,
                lost_packets: u.lost_packets,
                packets: u.packets,
                lost_percent: u.lost_percent,
            }),
            owd,
            out_of_order: (!sender).then_some(u.out_of_order),
            frames: end
                .netmeter
                .isochronous
                .as_ref()
                .and_then(|i| i.sender.as_ref())
                .filter(|_| sender && end.streams.len() == 1)
                .map(|s| (s.sent, s.slips)),
            figures: figs,
            ..Row::default()
        };
        return Some((u.socket, row));
    }
    let side = if sender { &st.sender } else { &st.receiver };
    let s = side.as_ref()?;
    let prev = last.get(&s.socket).copied().unwrap_or_default();
    // A bounceback test's totals are the stream's when it ran one.
    let bb = end
        .netmeter
        .bounceback
        .as_ref()
        .filter(|_| sender && end.streams.len() == 1);
    let row = Row {
        start: s.start,
        end: s.end,
        seconds: s.seconds,
        bytes: s.bytes,
        retransmits: s.retransmits,
        transactions: bb.map(|b| b.transactions),
        rtt: bb.map(|b| b.rtt),
        owd,
        tcp: prev.tcp,
        tcp_extra: prev.tcp_extra,
        frames: tcp_frames(end, sender),
        figures: figs,
        ..Row::default()
    };
    Some((s.socket, row))
}

/// A TCP isochronous sender's frames sent and slips over the whole test (one stream),
/// for its `isoch:tx/miss/slip` column.
fn tcp_frames(end: &End, sender: bool) -> Option<(u64, u64)> {
    end.netmeter
        .isochronous
        .as_ref()
        .and_then(|i| i.sender.as_ref())
        .filter(|_| sender && end.streams.len() == 1)
        .map(|s| (s.sent, s.slips))
}

/// An iperf 2 server's transit as the latency of a row: the mean, minimum, maximum and
/// standard deviation iperf 2 prints. It sends no distribution, so the percentiles are
/// NaN (the iperf 2 layout prints none of them).
fn transit_latency(t: &TransitSummary) -> LatencyStats {
    LatencyStats {
        count: t.count,
        min_ms: t.min_ms,
        mean_ms: t.mean_ms,
        stdev_ms: t.stdev_ms,
        p50_ms: f64::NAN,
        p90_ms: f64::NAN,
        p99_ms: f64::NAN,
        p999_ms: f64::NAN,
        max_ms: t.max_ms,
    }
}
