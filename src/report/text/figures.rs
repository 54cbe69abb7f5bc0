//! `-V`: iperf 2's figures (packets per second, Write/Err, Reads, inP, NetPwr, clock-sync
//! errors) in netmeter's text, as lines of their own.
//!
//! iperf3's interval rows are what scripts parse, so they keep their columns: the
//! figures come under them, one line per row that has any (and its `[SUM]`), each
//! starting with `iperf2` so a row parser passes over it; the whole test's come under
//! the end table the same way. Units and scales as iperf 2 prints them: `NetPwr` is
//! iperf 2's (bytes/s ÷ s × 10⁻⁶, the JSON's `net_power` ÷ 8·10⁶).

use super::{TextCtx, span};
use crate::report::{Interval, Iperf2End, Iperf2Figures};
use crate::units::{Format, format_bytes};
use std::fmt::Write;

/// iperf 2's `NetPwr` text (`set_netpowerbuf`): whole above 100, 2 decimals above 10,
/// else 6.
fn net_power_text(bits_per_s_per_s: f64) -> String {
    let p = bits_per_s_per_s / 8e6;
    if p > 100.0 {
        format!("{p:.0}")
    } else if p > 10.0 {
        format!("{p:.2}")
    } else {
        format!("{p:.6}")
    }
}

/// The figures present, in iperf 2's column order.
pub fn parts(f: &Iperf2Figures) -> String {
    let mut s = String::new();
    if let Some(p) = f.packets_per_second {
        let _ = write!(s, "  {p:.0} pps");
    }
    if let (Some(w), Some(e)) = (f.writes, f.write_errors) {
        let _ = write!(s, "  Write/Err {w}/{e}");
    }
    match (f.reads, f.read_bins) {
        (Some(r), Some(b)) => {
            let bins: Vec<String> = b.iter().map(u64::to_string).collect();
            let _ = write!(s, "  Reads=Dist {r}={}", bins.join(":"));
        }
        (Some(r), None) => {
            let _ = write!(s, "  Reads {r}");
        }
        _ => {}
    }
    if let Some(b) = f.in_progress_bytes {
        let _ = write!(s, "  inP {}", format_bytes(b, Format::Auto).trim());
        if let Some(p) = f.in_progress_packets {
            let _ = write!(s, " ({p:.1} pkts)");
        }
    }
    if let Some(p) = f.net_power {
        let _ = write!(s, "  NetPwr {}", net_power_text(p));
    }
    if let Some(n) = f.clock_sync_errors {
        let _ = write!(s, "  Clock sync errors {n}");
    }
    s
}

/// The lines under an interval's rows: one per row with figures, then the `[SUM]`s'
/// when a direction has several streams.
pub fn interval_lines(ctx: &TextCtx, iv: &Interval) -> String {
    let mut out = String::new();
    for r in &iv.streams {
        if let Some(f) = r
            .netmeter
            .as_ref()
            .map(|n| n.iperf2)
            .filter(|f| !f.is_empty())
        {
            let id = ctx.id(r.socket, r.sender);
            let _ = writeln!(out, "iperf2 {id} {}{}", span(r.start, r.end), parts(&f));
        }
    }
    let per_dir = if ctx.bidir {
        iv.streams.len() / 2
    } else {
        iv.streams.len()
    };
    if per_dir > 1 {
        for s in std::iter::once(&iv.sum).chain(iv.sum_bidir_reverse.as_deref()) {
            if let Some(f) = s
                .netmeter
                .as_ref()
                .map(|n| n.iperf2)
                .filter(|f| !f.is_empty())
            {
                let id = ctx.sum_id(s.sender);
                let _ = writeln!(out, "iperf2 {id} {}{}", span(s.start, s.end), parts(&f));
            }
        }
    }
    out
}

/// The lines under the end table: each stream's sender and receiver, then the sums,
/// tagged as the end table's rows are (`local_senders[i]`: this side sends on stream
/// `i`; with `--bidir` a direction's rows carry its tag, `[TX-C]`...).
pub fn end_lines(ctx: &TextCtx, e: &Iperf2End, local_senders: &[bool]) -> String {
    let mut out = String::new();
    let mut line = |id: String, role: &str, f: &Option<Iperf2Figures>| {
        if let Some(f) = f.filter(|f| !f.is_empty()) {
            let _ = writeln!(out, "iperf2 {id} {role:<8}{}", parts(&f));
        }
    };
    for (i, s) in e.streams.iter().enumerate() {
        let local_sender = local_senders.get(i).copied().unwrap_or(s.sender.is_some());
        line(ctx.id(s.socket, local_sender), "sender", &s.sender);
        line(ctx.id(s.socket, local_sender), "receiver", &s.receiver);
    }
    let per_dir = if ctx.bidir {
        e.streams.len() / 2
    } else {
        e.streams.len()
    };
    if per_dir > 1 {
        // The client -> server direction is this side's sending one on the client.
        let (fwd, rev) = (ctx.sum_id(ctx.client), ctx.sum_id(!ctx.client));
        line(fwd.clone(), "sender", &e.sum_sent);
        line(fwd, "receiver", &e.sum_received);
        line(rev.clone(), "sender", &e.sum_sent_bidir_reverse);
        line(rev, "receiver", &e.sum_received_bidir_reverse);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::text::tests::ctx;
    use crate::report::{Iperf2EndStream, StreamExt, StreamInterval};
    use crate::spec::Protocol;

    #[test]
    fn parts_in_iperf2_units() {
        let f = Iperf2Figures {
            packets_per_second: Some(999.6),
            in_progress_bytes: Some(12_500.0),
            in_progress_packets: Some(10.0),
            // 1 Gbit/s ÷ 10 ms: iperf 2's 125 MB/s ÷ 0.01 s × 1e-6 = 12500.
            net_power: Some(1e11),
            reads: Some(40),
            ..Iperf2Figures::default()
        };
        assert_eq!(
            parts(&f),
            "  1000 pps  Reads 40  inP 12.2 KBytes (10.0 pkts)  NetPwr 12500"
        );
        let w = Iperf2Figures {
            writes: Some(7),
            write_errors: Some(1),
            read_bins: Some([1, 0, 0, 0, 0, 0, 0, 2]),
            reads: Some(3),
            clock_sync_errors: Some(0),
            net_power: Some(8e7),
            ..Iperf2Figures::default()
        };
        assert_eq!(
            parts(&w),
            "  Write/Err 7/1  Reads=Dist 3=1:0:0:0:0:0:0:2  NetPwr 10.000000  Clock sync errors 0"
        );
        assert_eq!(net_power_text(4e8), "50.00");
    }

    #[test]
    fn a_line_per_row_with_figures_and_none_without() {
        let fig = |writes| {
            Some(Box::new(StreamExt {
                iperf2: Iperf2Figures {
                    writes: Some(writes),
                    write_errors: Some(0),
                    ..Iperf2Figures::default()
                },
                ..StreamExt::default()
            }))
        };
        let row = |socket, n| StreamInterval {
            socket,
            end: 1.0,
            sender: true,
            netmeter: n,
            ..StreamInterval::default()
        };
        let mut iv = Interval {
            streams: vec![row(5, fig(3)), row(7, None)],
            ..Interval::default()
        };
        iv.sum.end = 1.0;
        iv.sum.sender = true;
        iv.sum.netmeter = fig(3);
        let c = ctx(Protocol::Tcp);
        assert_eq!(
            interval_lines(&c, &iv),
            "iperf2 [  5]   0.00-1.00   sec  Write/Err 3/0\n\
             iperf2 [SUM]   0.00-1.00   sec  Write/Err 3/0\n"
        );
        let e = Iperf2End {
            streams: vec![Iperf2EndStream {
                socket: 5,
                sender: iv.streams[0].netmeter.as_ref().map(|n| n.iperf2),
                receiver: None,
            }],
            ..Iperf2End::default()
        };
        assert_eq!(
            end_lines(&c, &e, &[true]),
            "iperf2 [  5] sender    Write/Err 3/0\n"
        );
        // --bidir on the server: the streams it receives on are tagged [RX-S], and each
        // direction's sums carry that direction's tag.
        let mut s = ctx(Protocol::Tcp);
        (s.bidir, s.client) = (true, false);
        let two = Iperf2End {
            streams: vec![e.streams[0]; 4],
            sum_sent: e.streams[0].sender,
            sum_received_bidir_reverse: e.streams[0].sender,
            ..Iperf2End::default()
        };
        let t = end_lines(&s, &two, &[false, false, true, true]);
        assert!(t.starts_with("iperf2 [  5][RX-S] sender"), "{t}");
        assert!(t.contains("iperf2 [SUM][RX-S] sender"), "{t}");
        assert!(
            t.ends_with("iperf2 [SUM][TX-S] receiver  Write/Err 3/0\n"),
            "{t}"
        );
    }
}
