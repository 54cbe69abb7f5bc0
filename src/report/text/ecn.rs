//! The ECN column of the text report (docs/ecn.md): a UDP receiver's datagrams per
//! codepoint on each interval row, and the whole test's counts with their shares after
//! the end table. Shown with `-V`, or wherever ECN-capable or CE-marked datagrams
//! arrived (which `--ecn` on the sender makes so): a test with no marks at all stays in
//! iperf3's layout.

use super::TextCtx;
use crate::report::{End, StreamInterval, SumInterval, TcpEcn};
use crate::stats::{EcnCounts, EcnFigures};
use std::fmt::Write;

fn shown(ctx: &TextCtx, c: &EcnCounts) -> bool {
    ctx.verbose || c.total() > c.not_ect
}

/// The row's ECN suffix: `  ECN 0/980/0/20 (CE 2%)`, counts in the order Not-ECT,
/// ECT(1), ECT(0), CE; for a TCP sender that negotiated ECN, the CE it was echoed
/// (`  ECN CE 12 (3%)`); for a TCP receiver on a kernel with the AccECN counters, the
/// CE-marked segments and bytes it received (`  ECN CE received 12 (17376 bytes)`).
pub fn row_suffix(ctx: &TextCtx, r: &StreamInterval) -> String {
    let Some(x) = r.netmeter.as_deref() else {
        return String::new();
    };
    if let Some(e) = x.udp.and_then(|u| u.ecn).filter(|e| shown(ctx, &e.counts)) {
        return udp_suffix(&e);
    }
    if let Some(r) = x.tcp_received_ecn {
        return format!(
            "  ECN CE received {} ({} bytes)",
            r.received_ce, r.received_ce_bytes
        );
    }
    match x.tcp.and_then(|t| t.ecn) {
        Some(TcpEcn {
            ce_delivered,
            ce_percent,
            ..
        }) => format!("  ECN CE {ce_delivered} ({}%)", short_pct(ce_percent)),
        None => String::new(),
    }
}

/// A `[SUM]` row's ECN suffix: the receivers' counts added up, as on a stream's row.
pub fn sum_suffix(ctx: &TextCtx, s: &SumInterval) -> String {
    match s
        .netmeter
        .as_deref()
        .and_then(|x| x.udp)
        .and_then(|u| u.ecn)
    {
        Some(e) if shown(ctx, &e.counts) => udp_suffix(&e),
        _ => String::new(),
    }
}

fn udp_suffix(e: &EcnFigures) -> String {
    let c = e.counts;
    format!(
        "  ECN {}/{}/{}/{} (CE {}%)",
        c.not_ect,
        c.ect1,
        c.ect0,
        c.ce,
        short_pct(e.ce_percent)
    )
}

/// The header's words for the suffix, when the first interval's rows carry it.
pub fn header_suffix(ctx: &TextCtx, rows: &[StreamInterval]) -> &'static str {
    if rows.iter().any(|r| !row_suffix(ctx, r).is_empty()) {
        "  ECN N/E1/E0/CE"
    } else {
        ""
    }
}

/// After the end table: each UDP receiver's codepoint counts with their shares.
pub fn end_lines(ctx: &TextCtx, e: &End) -> String {
    let mut t = String::new();
    for u in e.streams.iter().filter_map(|s| s.udp.as_ref()) {
        let Some(f) = u.netmeter.as_ref().and_then(|n| n.ecn) else {
            continue;
        };
        if !shown(ctx, &f.counts) {
            continue;
        }
        let _ = writeln!(
            t,
            "[{:>3}] ECN at the receiver: {}",
            u.socket,
            counts_text(&f)
        );
    }
    // With several streams, their sum (the receivers' sum, else the test's).
    let sum = [&e.sum_received, &e.sum]
        .into_iter()
        .find_map(|s| s.as_ref().and_then(|s| s.netmeter).and_then(|n| n.ecn));
    if let Some(f) = sum.filter(|f| shown(ctx, &f.counts) && !t.is_empty() && e.streams.len() > 1) {
        let _ = writeln!(t, "[SUM] ECN at the receivers: {}", counts_text(&f));
    }
    t
}

fn counts_text(f: &EcnFigures) -> String {
    let c = f.counts;
    format!(
        "Not-ECT {} ({}%), ECT(1) {} ({}%), ECT(0) {} ({}%), CE {} ({}%)",
        c.not_ect,
        short_pct(f.not_ect_percent),
        c.ect1,
        short_pct(f.ect1_percent),
        c.ect0,
        short_pct(f.ect0_percent),
        c.ce,
        short_pct(f.ce_percent)
    )
}

fn short_pct(p: f64) -> String {
    let s = format!("{p:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{StreamExt, UdpExtra};
    use crate::spec::Protocol;
    use crate::units::Format;

    fn ctx(verbose: bool) -> TextCtx {
        TextCtx {
            format: Format::Auto,
            protocol: Protocol::Udp,
            bidir: false,
            client: true,
            verbose,
            title: None,
            bounceback: false,
            connect_only: false,
            histogram_bin_ms: None,
        }
    }

    fn row(c: EcnCounts) -> StreamInterval {
        StreamInterval {
            netmeter: Some(Box::new(StreamExt {
                udp: Some(UdpExtra {
                    ecn: Some(c.figures()),
                    ..UdpExtra::default()
                }),
                ..StreamExt::default()
            })),
            ..StreamInterval::default()
        }
    }

    #[test]
    fn marked_rows_show_the_column_unmarked_ones_only_with_v() {
        let marked = row(EcnCounts {
            not_ect: 0,
            ect1: 980,
            ect0: 0,
            ce: 20,
        });
        assert_eq!(row_suffix(&ctx(false), &marked), "  ECN 0/980/0/20 (CE 2%)");
        let plain = row(EcnCounts {
            not_ect: 50,
            ..EcnCounts::default()
        });
        assert_eq!(row_suffix(&ctx(false), &plain), "");
        assert_eq!(row_suffix(&ctx(true), &plain), "  ECN 50/0/0/0 (CE 0%)");
        assert_eq!(header_suffix(&ctx(false), &[plain]), "");
        assert_eq!(row_suffix(&ctx(true), &StreamInterval::default()), "");
    }

    #[test]
    fn tcp_rows_show_the_echoed_ce() {
        let r = StreamInterval {
            netmeter: Some(Box::new(StreamExt {
                tcp: Some(crate::report::TcpExtra {
                    ecn: Some(TcpEcn::new(400, 10)),
                    ..Default::default()
                }),
                ..StreamExt::default()
            })),
            ..StreamInterval::default()
        };
        assert_eq!(row_suffix(&ctx(false), &r), "  ECN CE 10 (2.5%)");
    }

    #[test]
    fn sum_rows_and_the_end_show_the_summed_counts() {
        let c = EcnCounts {
            not_ect: 0,
            ect1: 1960,
            ect0: 0,
            ce: 40,
        };
        let s = SumInterval {
            netmeter: row(c).netmeter,
            ..SumInterval::default()
        };
        assert_eq!(sum_suffix(&ctx(false), &s), "  ECN 0/1960/0/40 (CE 2%)");
        assert_eq!(sum_suffix(&ctx(true), &SumInterval::default()), "");
        let half = EcnCounts {
            ect1: 980,
            ce: 20,
            ..EcnCounts::default()
        };
        let stream = |socket| crate::report::EndStream {
            udp: Some(crate::report::EndUdp {
                socket,
                netmeter: Some(crate::report::UdpEndExtra {
                    ecn: Some(half.figures()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let e = End {
            streams: vec![stream(5), stream(7)],
            sum_received: Some(crate::report::EndSum {
                netmeter: Some(crate::report::EndSumExtra {
                    spurious_retransmits: None,
                    ecn: Some(c.figures()),
                }),
                ..Default::default()
            }),
            ..End::default()
        };
        let text = end_lines(&ctx(false), &e);
        assert!(
            text.ends_with(
                "[SUM] ECN at the receivers: Not-ECT 0 (0%), ECT(1) 1960 (98%), ECT(0) 0 (0%), CE 40 (2%)\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_tcp_receiver_row_shows_its_received_ce() {
        use crate::report::TcpReceivedEcn;
        let receiver = StreamInterval {
            netmeter: Some(Box::new(StreamExt {
                tcp_received_ecn: Some(TcpReceivedEcn {
                    received_ce: 12,
                    received_ce_bytes: 17_376,
                    ..TcpReceivedEcn::default()
                }),
                ..StreamExt::default()
            })),
            ..StreamInterval::default()
        };
        assert_eq!(
            row_suffix(&ctx(false), &receiver),
            "  ECN CE received 12 (17376 bytes)"
        );
    }
}
