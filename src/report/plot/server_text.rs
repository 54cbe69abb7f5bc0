//! The server's text output (`--get-server-output` from a server not running `-J`, as
//! iperf3 and netmeter servers usually do) read back for its UDP receiver rows, so a
//! client's document charts the loss and jitter of every interval the server counted.
//!
//! Only the interval rows of a one-direction UDP receiver are read:
//! `[  7]   0.00-1.00   sec   177 MBytes  1.48 Gbits/sec  0.001 ms  219/23380 (0.94%)`
//! and the `[SUM]` rows of the same layout. End-summary rows (ending in `sender` or
//! `receiver`), `--bidir`'s tagged rows and anything else are skipped. Pure; the text
//! is capped before it is read.

use crate::report::{Interval, Report, StreamInterval, SumInterval, UdpRecvFigures};

/// Most text read (a long `-i 0.1` run's output is far below this).
const MAX_TEXT: usize = 4 << 20;
/// Most interval rows kept.
const MAX_ROWS: usize = 200_000;

/// One UDP receiver row.
struct Row {
    /// The stream's socket number, or `None` for `[SUM]`.
    socket: Option<i64>,
    start: f64,
    end: f64,
    bits_per_second: f64,
    figures: UdpRecvFigures,
}

/// A report holding the server's UDP receiver intervals, or `None` when the text has
/// none.
pub(super) fn udp_receiver_report(text: &str) -> Option<Report> {
    let text = text.get(..MAX_TEXT.min(text.len())).unwrap_or(text);
    let mut intervals: Vec<Interval> = Vec::new();
    for row in text.lines().filter_map(row).take(MAX_ROWS) {
        let same = intervals
            .last()
            .is_some_and(|iv| iv.sum.start == row.start && iv.sum.end == row.end);
        if !same {
            intervals.push(Interval {
                sum: SumInterval {
                    start: row.start,
                    end: row.end,
                    seconds: row.end - row.start,
                    sender: false,
                    ..Default::default()
                },
                ..Default::default()
            });
        }
        let Some(iv) = intervals.last_mut() else {
            continue;
        };
        match row.socket {
            Some(socket) => {
                iv.streams.push(StreamInterval {
                    socket,
                    start: row.start,
                    end: row.end,
                    seconds: row.end - row.start,
                    bits_per_second: row.bits_per_second,
                    udp_recv: Some(row.figures),
                    sender: false,
                    ..Default::default()
                });
                // One stream: its row is the sum (iperf3 prints no [SUM] row then).
                if iv.streams.len() == 1 {
                    iv.sum.bits_per_second = row.bits_per_second;
                    iv.sum.udp_recv = Some(row.figures);
                }
            }
            None => {
                iv.sum.bits_per_second = row.bits_per_second;
                iv.sum.udp_recv = Some(row.figures);
            }
        }
    }
    if intervals.is_empty() {
        return None;
    }
    Some(Report {
        intervals,
        ..Default::default()
    })
}

/// One line as a UDP receiver interval row, if it is one.
fn row(line: &str) -> Option<Row> {
    let rest = line.trim_start().strip_prefix('[')?;
    let (tag, rest) = rest.split_once(']')?;
    let socket = match tag.trim() {
        "SUM" => None,
        n => Some(n.parse::<i64>().ok()?),
    };
    let t: Vec<&str> = rest.split_whitespace().take(12).collect();
    // interval, "sec", transfer, unit, rate, unit, jitter, "ms", lost/total, (pct)
    if t.len() < 10 || t[1] != "sec" || t[7] != "ms" {
        return None;
    }
    if matches!(t.last(), Some(&"sender") | Some(&"receiver")) {
        return None;
    }
    let (start, end) = t[0].split_once('-')?;
    let (start, end) = (start.parse::<f64>().ok()?, end.parse::<f64>().ok()?);
    let scale = match t[5] {
        "bits/sec" => 1.0,
        "Kbits/sec" => 1e3,
        "Mbits/sec" => 1e6,
        "Gbits/sec" => 1e9,
        "Tbits/sec" => 1e12,
        _ => return None,
    };
    let bits_per_second = t[4].parse::<f64>().ok()? * scale;
    let jitter_ms = t[6].parse::<f64>().ok()?;
    let (lost, total) = t[8].split_once('/')?;
    let (lost, total) = (lost.parse::<u64>().ok()?, total.parse::<u64>().ok()?);
    let finite = [start, end, bits_per_second, jitter_ms]
        .iter()
        .all(|v| v.is_finite());
    if !finite || end < start {
        return None;
    }
    let lost_percent = if total == 0 {
        0.0
    } else {
        lost as f64 * 100.0 / total as f64
    };
    Some(Row {
        socket,
        start,
        end,
        bits_per_second,
        figures: UdpRecvFigures {
            jitter_ms,
            lost_packets: lost,
            packets: total,
            lost_percent,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stream_and_sum_rows_skipping_the_end_summary() {
        let text = "\
Accepted connection from 127.0.0.1, port 58334
[  7] local 127.0.0.1 port 25302 connected to 127.0.0.1 port 52771
[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams
[  7]   0.00-1.00   sec   177 MBytes  1.48 Gbits/sec  0.001 ms  219/23380 (0.94%)
[  8]   0.00-1.00   sec   176 MBytes  1.47 Gbits/sec  0.002 ms  354/23405 (1.5%)
[SUM]   0.00-1.00   sec   353 MBytes  2.96 Gbits/sec  0.001 ms  573/46785 (1.2%)
- - - - - - - - - - - - - - - - - - - - - - - - - - - - - -
[  7]   1.00-2.00   sec   176 MBytes  1.47 Gbits/sec  0.001 ms  414/23436 (1.8%)  OWD 0.002/0.010/1.175 ms
[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams
[  7]   0.00-2.00   sec   352 MBytes  1.48 Gbits/sec  0.001 ms  633/46823 (1.4%)  receiver
";
        let r = udp_receiver_report(text).unwrap();
        assert_eq!(r.intervals.len(), 2);
        let first = &r.intervals[0];
        assert_eq!(first.streams.len(), 2);
        assert_eq!(first.streams[1].socket, 8);
        assert_eq!(first.streams[1].udp_recv.unwrap().lost_packets, 354);
        assert_eq!(first.streams[1].udp_recv.unwrap().jitter_ms, 0.002);
        let sum = first.sum.udp_recv.unwrap();
        assert_eq!((sum.lost_packets, sum.packets), (573, 46785));
        assert!((sum.lost_percent - 573.0 * 100.0 / 46785.0).abs() < 1e-12);
        assert_eq!(first.sum.bits_per_second, 2.96e9);
        assert!(!first.sum.sender);
        // A single stream's row stands for the sum.
        let second = &r.intervals[1];
        assert_eq!(second.sum.udp_recv.unwrap().lost_packets, 414);
    }

    #[test]
    fn tcp_text_and_garbage_give_nothing() {
        let tcp = "[  5]   0.00-1.00   sec  3.2 GBytes  27.5 Gbits/sec\n";
        assert!(udp_receiver_report(tcp).is_none());
        for junk in [
            "",
            "[",
            "[x] 1-2 sec",
            "[ 5] a-b sec 1 K 1 Mbits/sec x ms 1/2 (1%)",
        ] {
            assert!(udp_receiver_report(junk).is_none(), "{junk}");
        }
    }
}
