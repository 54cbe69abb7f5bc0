//! The `--receivers` report, pure: the conversation's results in, a row per receiver
//! (its name as given, bytes, bitrate, lost/total, out-of-order, jitter, one-way delay
//! with `--trip-times`) and their sum out, as text, as the `receivers` list of `-J`'s
//! `end` object, and as CSV. A receiver without figures is a row with its reason.

use super::{Receiver, Standing};
use crate::units::{Format, format_bytes, format_rate};
use crate::wire::mcast_join::{FigureRow, OwdFigures, ReceiverFigures};
use serde::Serialize;

/// Why a receiver's row holds no figures, in words; `None` when it has figures.
pub fn reason(s: &Standing) -> Option<String> {
    match s {
        Standing::Reported(f) if f.sum.packets == 0 && f.sum.lost == 0 => {
            Some("joined, no datagrams".into())
        }
        Standing::Reported(_) => None,
        Standing::Asked | Standing::NoAnswer => Some("no answer".into()),
        Standing::Joined | Standing::NoFigures => Some("joined, no figures sent".into()),
        Standing::Refused(why) => Some(format!("refused: {why}")),
        Standing::Gone(why) => Some(format!("lost: {why}")),
    }
}

fn figures(s: &Standing) -> Option<&ReceiverFigures> {
    match s {
        Standing::Reported(f) => Some(f),
        _ => None,
    }
}

/// The sum over the receivers that reported: bytes, datagrams, losses and
/// out-of-order added, the span and jitter the largest, the one-way delay merged.
pub fn sum(results: &[Receiver]) -> Option<ReceiverFigures> {
    let reported: Vec<&ReceiverFigures> = results
        .iter()
        .filter_map(|r| figures(&r.standing))
        .collect();
    if reported.is_empty() {
        return None;
    }
    let mut out = ReceiverFigures::default();
    for f in &reported {
        let (s, r) = (&mut out.sum, &f.sum);
        s.end_s = s.end_s.max(r.end_s - r.start_s);
        add_counts(s, r);
        out.owd = match (out.owd, f.owd) {
            (a, None) => a,
            (None, b) => b,
            (Some(a), Some(b)) => {
                let count = a.count + b.count;
                Some(OwdFigures {
                    min_s: a.min_s.min(b.min_s),
                    max_s: a.max_s.max(b.max_s),
                    mean_s: (a.mean_s * a.count as f64 + b.mean_s * b.count as f64)
                        / count.max(1) as f64,
                    count,
                })
            }
        };
    }
    Some(out)
}

/// Bytes, datagrams, losses and out-of-order added; the jitter the largest (it does
/// not add).
fn add_counts(to: &mut FigureRow, r: &FigureRow) {
    to.bytes += r.bytes;
    to.packets += r.packets;
    to.lost += r.lost;
    to.out_of_order += r.out_of_order;
    to.jitter_s = to.jitter_s.max(r.jitter_s);
}

/// The interval rows side by side: for interval `k` (each receiver's `k`-th row,
/// counted from its own first datagram of the sender's, so the spans agree but for the
/// path's delay), every reporting receiver's row with its index in `results`, and
/// their sum (the span the widest of them). At most
/// `wire::mcast_join::MAX_FIGURE_ROWS` intervals, as each receiver's rows are.
pub fn intervals(results: &[Receiver]) -> Vec<(Vec<(usize, FigureRow)>, FigureRow)> {
    let rows: Vec<(usize, &[FigureRow])> = results
        .iter()
        .enumerate()
        .filter_map(|(i, r)| figures(&r.standing).map(|f| (i, f.intervals.as_slice())))
        .collect();
    let n = rows.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
    (0..n)
        .map(|k| {
            let these: Vec<(usize, FigureRow)> = rows
                .iter()
                .filter_map(|(i, v)| v.get(k).map(|r| (*i, *r)))
                .collect();
            let mut total = FigureRow {
                start_s: f64::MAX,
                ..FigureRow::default()
            };
            for (_, r) in &these {
                total.start_s = total.start_s.min(r.start_s);
                total.end_s = total.end_s.max(r.end_s);
                add_counts(&mut total, r);
            }
            (these, total)
        })
        .collect()
}

fn bps(r: &FigureRow) -> f64 {
    let d = r.end_s - r.start_s;
    if d > 0.0 {
        r.bytes as f64 * 8.0 / d
    } else {
        0.0
    }
}

fn pct(r: &FigureRow) -> f64 {
    let total = r.packets + r.lost;
    if total > 0 {
        r.lost as f64 * 100.0 / total as f64
    } else {
        0.0
    }
}

/// The column header of the text rows.
pub const HEADER: &str = "Receiver              Transfer     Bitrate         Jitter    Lost/Total Datagrams   Out-of-order";

/// A row's figures: transfer, bitrate, jitter, lost/total, out-of-order.
fn cells(r: &FigureRow, fmt: Format) -> String {
    format!(
        "{}  {}  {:.3} ms  {}/{} ({:.2}%)  {}",
        format_bytes(r.bytes as f64, fmt),
        format_rate(bps(r), fmt),
        r.jitter_s * 1e3,
        r.lost,
        r.packets + r.lost,
        pct(r),
        r.out_of_order,
    )
}

fn row_text(name: &str, f: &ReceiverFigures, fmt: Format) -> String {
    let mut line = format!("{name:<20}  {}", cells(&f.sum, fmt));
    if let Some(o) = f.owd {
        line.push_str(&format!(
            "  owd {:.3}/{:.3}/{:.3} ms",
            o.min_s * 1e3,
            o.mean_s * 1e3,
            o.max_s * 1e3
        ));
    }
    line
}

/// The column header of the interval rows.
pub const INTERVAL_HEADER: &str = "Receiver              Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams   Out-of-order";

/// The line between the interval rows and the end's.
pub const SEPARATOR: &str =
    "- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -";

fn interval_text(name: &str, r: &FigureRow, fmt: Format) -> String {
    format!(
        "{name:<20}  {:>6.2}-{:<6.2} sec  {}",
        r.start_s,
        r.end_s,
        cells(r, fmt)
    )
}

/// One live block (`receivers::live`): a row per expected receiver (`names` by index),
/// its figures or why not, and `[SUM]`.
pub fn block_text(names: &[String], b: &super::live::Block, fmt: Format) -> Vec<String> {
    let mut out = Vec::new();
    for (i, r) in &b.rows {
        let name = names.get(*i).map_or("?", String::as_str);
        let name = crate::report::escape::escape_controls(name, crate::report::escape::Lines::One);
        out.push(match r {
            Ok(r) => interval_text(&name, r, fmt),
            Err(why) => format!(
                "{name:<20}  {:>6.2}-{:<6.2} sec  {why}",
                b.sum.start_s, b.sum.end_s
            ),
        });
    }
    out.push(interval_text("[SUM]", &b.sum, fmt));
    out
}

fn shown_name(r: &Receiver) -> String {
    crate::report::escape::escape_controls(&r.name, crate::report::escape::Lines::One).into_owned()
}

/// The text: the interval rows (for each interval a row per receiver that reported
/// one and `[SUM]`, as iperf3 prints its streams), then the header, a row per receiver
/// (or its reason) and the sum over the whole test.
pub fn text(results: &[Receiver], fmt: Format) -> Vec<String> {
    let mut out = Vec::new();
    let table = intervals(results);
    if !table.is_empty() {
        out.push(INTERVAL_HEADER.to_string());
        for (rows, total) in &table {
            for (i, r) in rows {
                out.push(interval_text(&shown_name(&results[*i]), r, fmt));
            }
            out.push(interval_text("[SUM]", total, fmt));
        }
        out.push(SEPARATOR.to_string());
    }
    out.push(HEADER.to_string());
    for r in results {
        let name = shown_name(r);
        out.push(match (figures(&r.standing), reason(&r.standing)) {
            (Some(f), None) => row_text(&name, f, fmt),
            (_, why) => format!("{name:<20}  {}", why.unwrap_or_default()),
        });
    }
    if let Some(s) = sum(results) {
        out.push(row_text("[SUM]", &s, fmt));
    }
    out
}

/// One receiver in `-J`'s `end.receivers`.
#[derive(Debug, Serialize)]
pub struct ReceiverJson<'a> {
    pub name: &'a str,
    /// Why there are no figures ("no answer", "refused: ...", "joined, no datagrams").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum: Option<JsonRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owd: Option<OwdFigures>,
    pub intervals: Vec<JsonRow>,
}

/// A row in `-J`: the figures with the bitrate and the loss percentage worked out.
#[derive(Debug, Serialize)]
pub struct JsonRow {
    #[serde(flatten)]
    pub row: FigureRow,
    pub bits_per_second: f64,
    pub lost_percent: f64,
}

fn json_row(r: &FigureRow) -> JsonRow {
    JsonRow {
        row: *r,
        bits_per_second: bps(r),
        lost_percent: pct(r),
    }
}

/// `-J`: the `receivers` list (one entry per receiver, in the order named) and the
/// `receivers_sum` (absent when nobody reported).
pub fn json(results: &[Receiver]) -> serde_json::Value {
    let list: Vec<ReceiverJson> = results
        .iter()
        .map(|r| {
            let f = figures(&r.standing);
            ReceiverJson {
                name: &r.name,
                reason: reason(&r.standing),
                sum: f.map(|f| json_row(&f.sum)),
                owd: f.and_then(|f| f.owd),
                intervals: f
                    .map(|f| f.intervals.iter().map(json_row).collect())
                    .unwrap_or_default(),
            }
        })
        .collect();
    let total = sum(results);
    let sums: Vec<JsonRow> = intervals(results)
        .iter()
        .map(|(_, t)| json_row(t))
        .collect();
    serde_json::json!({
        "receivers": list,
        "receivers_sum": total.map(|t| serde_json::json!({
            "sum": json_row(&t.sum),
            "owd": t.owd,
            "intervals": sums,
        })),
    })
}

/// The CSV columns of the receivers' rows: the end's first (as before the interval
/// rows were added), then the span and whether the line is an interval's or the end's.
pub const CSV_HEADER: &str = "receiver,reason,bytes,bits_per_second,packets,lost,lost_percent,out_of_order,jitter_ms,owd_min_ms,owd_mean_ms,owd_max_ms,start_s,end_s,row";

/// One CSV line: `r` (an interval's span, or the end's `f.sum`), the one-way delay
/// from `f` on the end's lines only.
fn csv_line(
    name: &str,
    reason: Option<&str>,
    f: Option<&ReceiverFigures>,
    interval: Option<&FigureRow>,
) -> String {
    let mut out = String::new();
    crate::report::csv::text(&mut out, name);
    out.push(',');
    crate::report::csv::text(&mut out, reason.unwrap_or(""));
    let row = interval.or(f.map(|f| &f.sum));
    if let Some(r) = row {
        out.push_str(&format!(
            ",{},{:.0},{},{},{:.3},{},{:.3}",
            r.bytes,
            bps(r),
            r.packets,
            r.lost,
            pct(r),
            r.out_of_order,
            r.jitter_s * 1e3
        ));
        match f.and_then(|f| f.owd).filter(|_| interval.is_none()) {
            Some(o) => out.push_str(&format!(
                ",{:.3},{:.3},{:.3}",
                o.min_s * 1e3,
                o.mean_s * 1e3,
                o.max_s * 1e3
            )),
            None => out.push_str(",,,"),
        }
        out.push_str(&format!(",{:.3},{:.3}", r.start_s, r.end_s));
    } else {
        out.push_str(",,,,,,,,,,,,");
    }
    out.push_str(if interval.is_some() {
        ",interval"
    } else {
        ",end"
    });
    out
}

/// CSV: the header, the interval lines (for each interval a line per receiver that
/// reported one and `[SUM]`), then a line per receiver and `[SUM]` for the end.
pub fn csv(results: &[Receiver]) -> String {
    let mut out = format!("{CSV_HEADER}\n");
    for (rows, total) in intervals(results) {
        for (i, r) in &rows {
            out.push_str(&csv_line(&results[*i].name, None, None, Some(r)));
            out.push('\n');
        }
        out.push_str(&csv_line("[SUM]", None, None, Some(&total)));
        out.push('\n');
    }
    for r in results {
        let why = reason(&r.standing);
        out.push_str(&csv_line(
            &r.name,
            why.as_deref(),
            figures(&r.standing),
            None,
        ));
        out.push('\n');
    }
    if let Some(s) = sum(results) {
        out.push_str(&csv_line("[SUM]", None, Some(&s), None));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reported(lost: u64, owd_ms: Option<f64>) -> Standing {
        Standing::Reported(ReceiverFigures {
            sum: FigureRow {
                start_s: 0.0,
                end_s: 2.0,
                bytes: 1250 * (1000 - lost),
                packets: 1000 - lost,
                lost,
                out_of_order: 0,
                jitter_s: 0.0002,
            },
            owd: owd_ms.map(|m| OwdFigures {
                min_s: m / 1e3,
                mean_s: m / 1e3,
                max_s: m / 1e3,
                count: 1000 - lost,
            }),
            intervals: (0..2)
                .map(|k| FigureRow {
                    start_s: f64::from(k),
                    end_s: f64::from(k) + 1.0,
                    bytes: 1250 * (500 - lost / 2),
                    packets: 500 - lost / 2,
                    lost: lost / 2,
                    out_of_order: 0,
                    jitter_s: 0.0001 * f64::from(k + 1),
                })
                .collect(),
        })
    }

    fn results() -> Vec<Receiver> {
        let r = |name: &str, standing| Receiver {
            name: name.into(),
            standing,
        };
        vec![
            r("h1", reported(0, Some(1.0))),
            r("h2:5202", reported(100, Some(3.0))),
            r("h3", Standing::NoAnswer),
            r("h4", Standing::Refused("not a multicast group".into())),
            r("h5", Standing::Reported(ReceiverFigures::default())),
        ]
    }

    #[test]
    fn each_interval_is_a_row_per_receiver_and_their_sum() {
        let lines = text(&results(), Format::Auto);
        assert_eq!(lines[0], INTERVAL_HEADER);
        // Two intervals of h1 and h2:5202 (h5 heard nothing, the others no figures).
        assert!(lines[1].starts_with("h1  "), "{lines:#?}");
        assert!(lines[2].starts_with("h2:5202  "), "{lines:#?}");
        assert_eq!(
            lines[2],
            "h2:5202                 0.00-1.00   sec   549 KBytes  4.50 Mbits/sec  0.100 ms  50/500 (10.00%)  0"
        );
        let sum0 = &lines[3];
        assert!(
            sum0.starts_with("[SUM]")
                && sum0.contains(" 0.00-1.00 ")
                && sum0.contains("50/1000 (5.00%)"),
            "{sum0}"
        );
        assert!(sum0.contains("9.50 Mbits/sec"), "{sum0}");
        assert!(lines[4].starts_with("h1  ") && lines[4].contains(" 1.00-2.00 "));
        assert!(lines[6].starts_with("[SUM]") && lines[6].contains("0.200 ms"));
        assert_eq!(lines[7], SEPARATOR);
        assert_eq!(lines[8], HEADER);
        // Nobody with interval rows: the end only, as before.
        let mut bare = results();
        for r in &mut bare {
            if let Standing::Reported(f) = &mut r.standing {
                f.intervals.clear();
            }
        }
        assert_eq!(text(&bare, Format::Auto)[0], HEADER);
    }

    #[test]
    fn every_receiver_is_a_row_and_the_sum_adds_the_reported_ones() {
        let all = text(&results(), Format::Auto);
        let lines = &all[8..];
        assert_eq!(lines.len(), 7, "{lines:#?}");
        assert_eq!(lines[0], HEADER);
        assert_eq!(
            lines[2],
            "h2:5202               1.07 MBytes  4.50 Mbits/sec  0.200 ms  100/1000 (10.00%)  0  owd 3.000/3.000/3.000 ms"
        );
        assert_eq!(lines[3], "h3                    no answer");
        assert_eq!(
            lines[4],
            "h4                    refused: not a multicast group"
        );
        assert_eq!(lines[5], "h5                    joined, no datagrams");
        assert!(
            lines[6].starts_with("[SUM]") && lines[6].contains("100/2000 (5.00%)"),
            "{}",
            lines[6]
        );
        assert!(
            lines[6].contains("owd 1.000/1.947/3.000 ms"),
            "{}",
            lines[6]
        );
    }

    #[test]
    fn json_lists_every_receiver_with_its_intervals_or_reason() {
        let j = json(&results());
        let list = j["receivers"].as_array().unwrap();
        assert_eq!(list.len(), 5);
        assert_eq!(list[1]["name"], "h2:5202");
        assert_eq!(list[1]["sum"]["lost"], 100);
        assert_eq!(list[1]["sum"]["lost_percent"], 10.0);
        assert_eq!(list[1]["intervals"].as_array().unwrap().len(), 2);
        assert_eq!(list[2]["reason"], "no answer");
        assert!(list[2].get("sum").is_none());
        assert_eq!(j["receivers_sum"]["sum"]["packets"], 1900);
        let sums = j["receivers_sum"]["intervals"].as_array().unwrap();
        assert_eq!(sums.len(), 2);
        assert_eq!(
            (sums[1]["packets"].clone(), sums[1]["lost"].clone()),
            (950.into(), 50.into())
        );
        assert_eq!(sums[1]["start_s"], 1.0);
        let nobody = json(&results()[2..4]);
        assert!(nobody["receivers_sum"].is_null());
    }

    #[test]
    fn csv_has_a_line_per_receiver_and_the_sum() {
        let c = csv(&results());
        let all: Vec<&str> = c.lines().collect();
        assert_eq!(all[0], CSV_HEADER);
        // Two intervals of two receivers and their sum, then the end.
        assert_eq!(
            all[2],
            "h2:5202,,562500,4500000,450,50,10.000,0,0.100,,,,0.000,1.000,interval"
        );
        assert!(
            all[3].starts_with("[SUM],,1187500,9500000,950,50,"),
            "{}",
            all[3]
        );
        assert!(all[6].ends_with(",1.000,2.000,interval"), "{}", all[6]);
        let mut lines = vec![all[0]];
        lines.extend(&all[7..]);
        assert_eq!(lines.len(), 7);
        let cols = CSV_HEADER.split(',').count();
        // The quoted reason of h5 holds a comma: count the others' cells.
        assert!(
            lines
                .iter()
                .filter(|l| !l.contains('"'))
                .all(|l| l.split(',').count() == cols),
            "{c}"
        );
        assert_eq!(
            lines[5],
            "h5,\"joined, no datagrams\",0,0,0,0,0.000,0,0.000,,,,0.000,0.000,end"
        );
        assert_eq!(
            lines[2],
            "h2:5202,,1125000,4500000,900,100,10.000,0,0.200,3.000,3.000,3.000,0.000,2.000,end"
        );
        assert_eq!(
            lines[4],
            "h4,refused: not a multicast group,,,,,,,,,,,,,end"
        );
        assert!(lines[6].starts_with("[SUM],,"));
    }

    #[test]
    fn a_hostile_name_is_escaped() {
        let r = vec![Receiver {
            name: "=evil\nname".into(),
            standing: Standing::NoAnswer,
        }];
        assert!(!text(&r, Format::Auto)[1].contains('\n'));
        assert!(csv(&r).lines().nth(1).unwrap().starts_with("\"'=evil"));
    }
}
