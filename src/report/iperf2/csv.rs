//! iperf 2's `-y C` lines (`reportCSV_bw_format`, `reportCSV_bw_jitter_loss_format`):
//! `time,srcaddress,srcport,dstaddr,dstport,transferid,istart-iend,bytes,bits/s`, and for
//! UDP `,jitter_ms,lost,total,lost_percent,out_of_order`. The addresses are the client's
//! then the server's on both sides, as iperf 2.2.1 prints them.

use super::rows::end_row;
use super::{Iperf2Ctx, Row, connection, csv_time, stream_no};
use crate::report::{End, Interval, Start};
use std::collections::HashMap;

/// The interval's rows, one per stream (iperf 2 writes no sum row in CSV for one stream,
/// and a `transferid` of -1 for the sum of several).
pub fn interval(ctx: &Iperf2Ctx, start: Option<&Start>, iv: &Interval) -> Vec<String> {
    let mut out: Vec<String> = iv
        .streams
        .iter()
        .map(|s| {
            line(
                ctx,
                start,
                s.socket,
                stream_no(start, s.socket) as i64,
                &Row::of_stream(s),
            )
        })
        .collect();
    if iv.streams.len() > 1 {
        out.push(line(ctx, start, -1, -1, &Row::of_sum(&iv.sum)));
    }
    out
}

/// The whole test's rows.
pub fn end(ctx: &Iperf2Ctx, start: Option<&Start>, end: &End) -> Vec<String> {
    let none = HashMap::new();
    let mut out = Vec::new();
    for (i, st) in end.streams.iter().enumerate() {
        let sends = end.local.senders.get(i).copied().unwrap_or(ctx.client);
        if let Some((socket, row)) = end_row(end, i, st, (sends, sends == ctx.client), &none) {
            let id = stream_no(start, socket) as i64;
            out.push(line(ctx, start, socket, id, &row));
        }
    }
    // Several streams: their sum, as the interval rows have it.
    let sum = if ctx.client {
        &end.sum_sent
    } else {
        &end.sum_received
    };
    if let (true, Some(s)) = (end.streams.len() > 1, sum.as_ref().or(end.sum.as_ref())) {
        let row = Row {
            start: s.start,
            end: s.end,
            seconds: s.seconds,
            bytes: s.bytes,
            udp_recv: s.udp_recv,
            ..Row::default()
        };
        out.push(line(ctx, start, -1, -1, &row));
    }
    out
}

pub(super) fn line(
    ctx: &Iperf2Ctx,
    start: Option<&Start>,
    socket: i64,
    id: i64,
    r: &Row,
) -> String {
    let t0 = start.map_or(0, |s| s.timestamp.timesecs);
    let time = csv_time(t0 + r.end.max(0.0) as u64);
    let peers = match connection(start, socket).or(start.and_then(|s| s.connected.first())) {
        Some(c) if ctx.client => format!(
            "{},{},{},{}",
            c.local_host, c.local_port, c.remote_host, c.remote_port
        ),
        Some(c) => format!(
            "{},{},{},{}",
            c.remote_host, c.remote_port, c.local_host, c.local_port
        ),
        None => ",0,,0".to_string(),
    };
    let bps = if r.seconds > 0.0 {
        (r.bytes as f64 * 8.0 / r.seconds) as u64
    } else {
        0
    };
    let mut s = format!(
        "{time},{peers},{id},{:.1}-{:.1},{},{bps}",
        r.start, r.end, r.bytes
    );
    if ctx.udp {
        let (jitter, lost, total) = match r.udp_recv {
            Some(u) => (u.jitter_ms, u.lost_packets, u.packets),
            // A sender's row: iperf 2 writes its datagrams with no jitter or loss.
            None => (0.0, 0, r.packets.unwrap_or(0)),
        };
        let pct = if total > 0 {
            100.0 * lost as f64 / total as f64
        } else {
            0.0
        };
        let ooo = r.out_of_order.unwrap_or(0);
        s.push_str(&format!(",{jitter:.3},{lost},{total},{pct:.3},{ooo}"));
    }
    s
}
