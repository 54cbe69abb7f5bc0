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
        s.bytes += r.bytes;
        s.packets += r.packets;
        s.lost += r.lost;
        s.out_of_order += r.out_of_order;
        s.jitter_s = s.jitter_s.max(r.jitter_s);
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

fn row_text(name: &str, f: &ReceiverFigures, fmt: Format) -> String {
    let r = &f.sum;
    let mut line = format!(
        "{name:<20}  {}  {}  {:.3} ms  {}/{} ({:.2}%)  {}",
        format_bytes(r.bytes as f64, fmt),
        format_rate(bps(r), fmt),
        r.jitter_s * 1e3,
        r.lost,
        r.packets + r.lost,
        pct(r),
        r.out_of_order,
    );
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

/// The text: the header, a row per receiver (or its reason), the sum.
pub fn text(results: &[Receiver], fmt: Format) -> Vec<String> {
    let mut out = vec![HEADER.to_string()];
    for r in results {
        let name =
            crate::report::escape::escape_controls(&r.name, crate::report::escape::Lines::One);
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
    serde_json::json!({
        "receivers": list,
        "receivers_sum": total.map(|t| serde_json::json!({
            "sum": json_row(&t.sum),
            "owd": t.owd,
        })),
    })
}

/// The CSV columns of the receivers' rows.
pub const CSV_HEADER: &str = "receiver,reason,bytes,bits_per_second,packets,lost,lost_percent,out_of_order,jitter_ms,owd_min_ms,owd_mean_ms,owd_max_ms";

fn csv_line(name: &str, reason: Option<&str>, f: Option<&ReceiverFigures>) -> String {
    let mut out = String::new();
    crate::report::csv::text(&mut out, name);
    out.push(',');
    crate::report::csv::text(&mut out, reason.unwrap_or(""));
    if let Some(f) = f {
        let r = &f.sum;
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
        match f.owd {
            Some(o) => out.push_str(&format!(
                ",{:.3},{:.3},{:.3}",
                o.min_s * 1e3,
                o.mean_s * 1e3,
                o.max_s * 1e3
            )),
            None => out.push_str(",,,"),
        }
    } else {
        out.push_str(",,,,,,,,,,");
    }
    out
}

/// CSV: the header, a line per receiver, then `[SUM]`.
pub fn csv(results: &[Receiver]) -> String {
    let mut out = format!("{CSV_HEADER}\n");
    for r in results {
        let why = reason(&r.standing);
        out.push_str(&csv_line(&r.name, why.as_deref(), figures(&r.standing)));
        out.push('\n');
    }
    if let Some(s) = sum(results) {
        out.push_str(&csv_line("[SUM]", None, Some(&s)));
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
            intervals: vec![FigureRow::default(); 2],
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
    fn every_receiver_is_a_row_and_the_sum_adds_the_reported_ones() {
        let lines = text(&results(), Format::Auto);
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
        let nobody = json(&results()[2..4]);
        assert!(nobody["receivers_sum"].is_null());
    }

    #[test]
    fn csv_has_a_line_per_receiver_and_the_sum() {
        let c = csv(&results());
        let lines: Vec<&str> = c.lines().collect();
        assert_eq!(lines[0], CSV_HEADER);
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
            "h5,\"joined, no datagrams\",0,0,0,0,0.000,0,0.000,,,"
        );
        assert_eq!(
            lines[2],
            "h2:5202,,1125000,4500000,900,100,10.000,0,0.200,3.000,3.000,3.000"
        );
        assert_eq!(lines[4], "h4,refused: not a multicast group,,,,,,,,,,");
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
