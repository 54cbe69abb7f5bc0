//! From a [`Report`] to [`Chart`]s: which charts apply and their numbers. Pure.
//!
//! One function per chart kind (throughput, UDP, TCP, the profiled modes, comparisons),
//! with their unit tests, kept together because they share the series-building helpers
//! and the rules for which charts apply.

use super::latency::{Dist, Distribution, cdf_chart, distributions, histogram_chart, working_load};
use super::{Axis, Chart, MAX_POINTS, Series, Shape, thin};
use crate::report::input::Input;
use crate::report::{Interval, Report, StreamInterval, SumInterval};

/// Per-stream lines are drawn for at most this many streams (beyond, the sum only).
const MAX_STREAM_LINES: usize = 16;

/// A chart of `series` against test time, on linear axes.
fn over_time(
    kind: &'static str,
    title: impl Into<String>,
    y: impl Into<String>,
    series: Vec<Series>,
) -> Chart {
    Chart {
        kind,
        title: title.into(),
        x: Axis::linear("time (s)"),
        y: Axis::linear(y),
        series,
        markers: Vec::new(),
    }
}

/// One input's own charts.
pub fn single(r: &Report) -> Vec<Chart> {
    let peer = peer_report(r);
    let mut out = Vec::new();
    for dir in directions(r) {
        out.push(throughput(r, peer.as_ref(), &dir));
    }
    for dir in directions(r) {
        out.extend(udp(r, peer.as_ref(), &dir));
    }
    out.extend(tcp(r));
    // The peer's sending streams (-R, --bidir), when it sent its own document along.
    out.extend(peer.as_ref().map(tcp).unwrap_or_default());
    for d in distributions(r) {
        out.push(cdf_chart(&d.title, std::slice::from_ref(&d.dist), true));
        out.push(histogram_chart(&d.title, &d.dist));
    }
    out.extend(working_load(r, None));
    out
}

/// Several inputs on shared charts, each series named after its input.
pub fn compare(inputs: &[Input]) -> Vec<Chart> {
    let mut out = Vec::new();
    let mut lines = Vec::new();
    for i in inputs {
        for dir in directions(&i.report) {
            let name = if dir.reverse {
                format!("{} ({})", i.name, dir.label)
            } else {
                i.name.clone()
            };
            lines.push(Series {
                name,
                shape: Shape::Line,
                points: sum_points(&i.report.intervals, &dir, |s| s.bits_per_second),
            });
        }
    }
    if lines.iter().any(|s| !s.points.is_empty()) {
        out.push(rate_chart(
            "throughput",
            "Throughput (sum of streams)",
            lines,
        ));
    }
    out.extend(compare_udp(inputs));
    // Each kind of distribution any input recorded: one CDF with every input's.
    let mut titles: Vec<String> = Vec::new();
    let all: Vec<Vec<Distribution>> = inputs.iter().map(|i| distributions(&i.report)).collect();
    for d in all.iter().flatten() {
        if !titles.contains(&d.title) {
            titles.push(d.title.clone());
        }
    }
    for title in titles {
        let dists: Vec<Dist> = inputs
            .iter()
            .zip(&all)
            .filter_map(|(i, ds)| {
                ds.iter().find(|d| d.title == title).map(|d| Dist {
                    name: i.name.clone(),
                    ..d.dist.clone()
                })
            })
            .collect();
        out.push(cdf_chart(&title, &dists, dists.len() == 1));
    }
    for i in inputs {
        out.extend(working_load(&i.report, Some(&i.name)));
    }
    out
}

/// Each input's UDP loss and jitter (the sum of its receiving streams) on shared
/// charts, when any input has them.
fn compare_udp(inputs: &[Input]) -> Vec<Chart> {
    let mut loss = Vec::new();
    let mut jitter = Vec::new();
    for i in inputs {
        let peer = peer_report(&i.report);
        for dir in directions(&i.report) {
            let name = if dir.reverse {
                format!("{} ({})", i.name, dir.label)
            } else {
                i.name.clone()
            };
            for c in udp(&i.report, peer.as_ref(), &dir) {
                let Some(mut sum) = c.series.into_iter().find(|s| s.name == "sum") else {
                    continue;
                };
                sum.name = name.clone();
                match c.kind {
                    "udp_loss" => loss.push(sum),
                    "udp_jitter" => {
                        // Back to ms: each input's chart chose its own unit.
                        if c.y.label.contains("µs") {
                            sum.points.iter_mut().for_each(|p| p.1 /= 1000.0);
                        }
                        jitter.push(sum);
                    }
                    _ => {}
                }
            }
        }
    }
    if loss.is_empty() {
        return Vec::new();
    }
    let unit = small_ms_in_us(&mut jitter);
    let chart = |kind, title: &str, y: String, series| over_time(kind, title, y, series);
    vec![
        chart("udp_loss", "UDP loss", "lost datagrams (%)".into(), loss),
        chart(
            "udp_jitter",
            "UDP jitter",
            format!("jitter ({unit})"),
            jitter,
        ),
    ]
}

/// The server's own report, when the client asked for it (`--get-server-output`): its
/// `-J` document, or else its UDP receiver rows read back from its text output. A
/// server document that does not load is left out (its charts with it).
fn peer_report(r: &Report) -> Option<Report> {
    if let Some(json) = &r.server_output_json {
        return serde_json::from_value(json.clone()).ok();
    }
    super::server_text::udp_receiver_report(r.server_output_text.as_deref()?)
}

/// One direction of data: the interval rows whose `sender` flag is `sender`.
#[derive(Clone, Copy)]
struct Direction {
    /// This document's rows in this direction are the sending side's.
    sender: bool,
    /// The second direction of a `--bidir` test.
    reverse: bool,
    /// "client → server" or "server → client".
    label: &'static str,
}

fn directions(r: &Report) -> Vec<Direction> {
    let client = r.start.connecting_to.is_some();
    let first = r
        .intervals
        .iter()
        .find(|iv| !iv.sum.omitted)
        .or(r.intervals.first());
    let Some(iv) = first else { return Vec::new() };
    let label = |sender: bool| {
        if sender == client {
            "client → server"
        } else {
            "server → client"
        }
    };
    let mut out = vec![Direction {
        sender: iv.sum.sender,
        reverse: false,
        label: label(iv.sum.sender),
    }];
    if let Some(rev) = &iv.sum_bidir_reverse {
        out.push(Direction {
            sender: rev.sender,
            reverse: true,
            label: label(rev.sender),
        });
    }
    out
}

/// The interval's sum in this direction.
fn sum_of<'a>(iv: &'a Interval, dir: &Direction) -> Option<&'a SumInterval> {
    if dir.reverse {
        iv.sum_bidir_reverse.as_deref()
    } else {
        Some(&iv.sum)
    }
}

/// A per-interval figure as steps: flat over each interval, from its start to its end.
fn sum_points(
    intervals: &[Interval],
    dir: &Direction,
    f: impl Fn(&SumInterval) -> f64,
) -> Vec<(f64, f64)> {
    let pts = intervals
        .iter()
        .filter_map(|iv| sum_of(iv, dir))
        .filter(|s| !s.omitted)
        .flat_map(|s| {
            let v = f(s);
            [(s.start, v), (s.end, v)]
        })
        .collect();
    thin(pts, MAX_POINTS)
}

/// Sockets of the streams in a direction, in the order they appear.
fn sockets(intervals: &[Interval], sender: bool) -> Vec<i64> {
    let mut out = Vec::new();
    for row in intervals.iter().flat_map(|iv| &iv.streams) {
        if row.sender == sender && !out.contains(&row.socket) {
            out.push(row.socket);
        }
    }
    out
}

/// One stream's per-interval figure as steps, flat over each interval from its start
/// to its end. TCP_INFO state (cwnd, RTT), read once at each interval's end, is drawn
/// the same way, so every series of a test covers the same span: a sample only at the
/// ends started the cwnd and RTT lines at t = 1 beside a throughput line from 0.
fn stream_points(
    intervals: &[Interval],
    socket: i64,
    sender: bool,
    f: impl Fn(&StreamInterval) -> Option<f64>,
) -> Vec<(f64, f64)> {
    let mut pts = Vec::new();
    for s in intervals.iter().flat_map(|iv| &iv.streams) {
        if s.socket != socket || s.sender != sender || s.omitted {
            continue;
        }
        if let Some(v) = f(s) {
            pts.push((s.start, v));
            pts.push((s.end, v));
        }
    }
    thin(pts, MAX_POINTS)
}

fn throughput(r: &Report, peer: Option<&Report>, dir: &Direction) -> Chart {
    let side = if dir.sender { "sender" } else { "receiver" };
    let mut series = Vec::new();
    let socks = sockets(&r.intervals, dir.sender);
    if (2..=MAX_STREAM_LINES).contains(&socks.len()) {
        for (n, s) in socks.iter().enumerate() {
            series.push(Series {
                name: format!("stream {}", n + 1),
                shape: Shape::Line,
                points: stream_points(&r.intervals, *s, dir.sender, |s| Some(s.bits_per_second)),
            });
        }
    }
    series.push(Series {
        name: format!("sum ({side})"),
        shape: Shape::Line,
        points: sum_points(&r.intervals, dir, |s| s.bits_per_second),
    });
    if let Some(p) = peer
        && let Some(pdir) = peer_direction(p, dir)
    {
        let pside = if pdir.sender { "sender" } else { "receiver" };
        series.push(Series {
            name: format!("sum ({pside}, counted by the server)"),
            shape: Shape::Dashed,
            points: sum_points(&p.intervals, &pdir, |s| s.bits_per_second),
        });
    }
    let many = if socks.len() > MAX_STREAM_LINES {
        format!(", {} streams", socks.len())
    } else {
        String::new()
    };
    let mut c = rate_chart(
        "throughput",
        &format!("Throughput, {}{many}", dir.label),
        series,
    );
    c.series.retain(|s| !s.points.is_empty());
    c
}

/// The same direction in the peer's report: its rows have the opposite `sender` flag.
fn peer_direction(p: &Report, dir: &Direction) -> Option<Direction> {
    directions(p)
        .into_iter()
        .find(|d| d.sender != dir.sender && d.label == dir.label)
        .or_else(|| {
            // A server's report labels directions from its own side.
            directions(p).into_iter().find(|d| d.sender != dir.sender)
        })
}

/// Bits per second scaled to one unit for a whole chart.
fn rate_chart(kind: &'static str, title: &str, mut series: Vec<Series>) -> Chart {
    let max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max);
    let (div, unit) = rate_unit(max);
    for s in &mut series {
        for p in &mut s.points {
            p.1 /= div;
        }
    }
    Chart {
        kind,
        title: title.to_string(),
        x: Axis::linear("time (s)"),
        y: Axis::linear(unit),
        series,
        markers: Vec::new(),
    }
}

/// The unit a rate axis is labelled in, and its divisor.
pub fn rate_unit(max_bps: f64) -> (f64, &'static str) {
    if max_bps >= 1e9 {
        (1e9, "Gbit/s")
    } else if max_bps >= 1e6 {
        (1e6, "Mbit/s")
    } else if max_bps >= 1e3 {
        (1e3, "Kbit/s")
    } else {
        (1.0, "bit/s")
    }
}

/// UDP loss and jitter (and out-of-order/duplicates when any) in one direction, from
/// whichever report holds that direction's receiver rows.
fn udp(r: &Report, peer: Option<&Report>, dir: &Direction) -> Vec<Chart> {
    let recv_rows = |rep: &Report, d: &Direction| {
        rep.intervals
            .iter()
            .filter_map(|iv| sum_of(iv, d))
            .any(|s| s.udp_recv.is_some())
    };
    let (rep, d) = if recv_rows(r, dir) {
        (r, *dir)
    } else {
        match peer.and_then(|p| peer_direction(p, dir).map(|d| (p, d))) {
            Some((p, d)) if recv_rows(p, &d) => (p, d),
            _ => return udp_end(r, dir),
        }
    };
    let per_stream = |f: &dyn Fn(&StreamInterval) -> Option<f64>| -> Vec<Series> {
        let socks = sockets(&rep.intervals, d.sender);
        if !(2..=MAX_STREAM_LINES).contains(&socks.len()) {
            return Vec::new();
        }
        socks
            .iter()
            .enumerate()
            .map(|(n, s)| Series {
                name: format!("stream {}", n + 1),
                shape: Shape::Line,
                points: stream_points(&rep.intervals, *s, d.sender, f),
            })
            .collect()
    };
    let with_sum = |mut v: Vec<Series>, f: &dyn Fn(&SumInterval) -> f64| {
        v.push(Series {
            name: "sum".into(),
            shape: Shape::Line,
            points: sum_points(&rep.intervals, &d, f),
        });
        v
    };
    let loss = with_sum(per_stream(&|s| s.udp_recv.map(|u| u.lost_percent)), &|s| {
        s.udp_recv.map_or(0.0, |u| u.lost_percent)
    });
    let mut jitter = with_sum(per_stream(&|s| s.udp_recv.map(|u| u.jitter_ms)), &|s| {
        s.udp_recv.map_or(0.0, |u| u.jitter_ms)
    });
    let jitter_unit = small_ms_in_us(&mut jitter);
    let chart = |kind, title: String, y: &str, series| over_time(kind, title, y, series);
    let mut out = vec![
        chart(
            "udp_loss",
            format!("UDP loss, {}", dir.label),
            "lost datagrams (%)",
            loss,
        ),
        chart(
            "udp_jitter",
            format!("UDP jitter, {}", dir.label),
            &format!("jitter ({jitter_unit})"),
            jitter,
        ),
    ];
    let extra = |f: fn(&crate::report::UdpExtra) -> u64| {
        sum_points(&rep.intervals, &d, |s| {
            s.netmeter
                .as_deref()
                .and_then(|n| n.udp)
                .map_or(0.0, |u| f(&u) as f64)
        })
    };
    let ooo = extra(|u| u.out_of_order);
    let dup = extra(|u| u.duplicates);
    if ooo.iter().chain(&dup).any(|p| p.1 > 0.0) {
        out.push(chart(
            "udp_order",
            format!("UDP out-of-order and duplicate datagrams, {}", dir.label),
            "datagrams per interval",
            vec![
                Series {
                    name: "out of order".into(),
                    shape: Shape::Line,
                    points: ooo,
                },
                Series {
                    name: "duplicates".into(),
                    shape: Shape::Dashed,
                    points: dup,
                },
            ],
        ));
    }
    // The marking over time (docs/ecn.md), where the receiver counted ECN-capable or
    // CE-marked datagrams: beside the throughput chart it shows what
    // `--ecn-responsive` answered.
    let ecn_of = |s: &SumInterval| {
        s.netmeter
            .as_deref()
            .and_then(|n| n.udp)
            .and_then(|u| u.ecn)
    };
    let marked = rep
        .intervals
        .iter()
        .filter_map(|iv| sum_of(iv, &d))
        .filter_map(ecn_of)
        .any(|e| e.counts.total() > e.counts.not_ect);
    if marked {
        let ce = with_sum(
            per_stream(&|s| {
                s.netmeter
                    .as_deref()
                    .and_then(|n| n.udp)
                    .and_then(|u| u.ecn)
                    .map(|e| e.ce_percent)
            }),
            &|s| ecn_of(s).map_or(0.0, |e| e.ce_percent),
        );
        out.push(chart(
            "ecn_ce",
            format!("ECN: CE-marked datagrams, {}", dir.label),
            "CE-marked (% of datagrams)",
            ce,
        ));
    }
    out
}

/// UDP loss and jitter in one direction over the whole test, from the end results the
/// peer's receiver sent (`end.streams[].udp` in this direction), when no interval rows
/// of that receiver are at hand: a lossy run is never charted without its loss.
fn udp_end(r: &Report, dir: &Direction) -> Vec<Chart> {
    let ends: Vec<&crate::report::EndUdp> = r
        .end
        .streams
        .iter()
        .filter_map(|s| s.udp.as_ref())
        .filter(|u| u.sender == dir.sender)
        .collect();
    if ends.is_empty() {
        return Vec::new();
    }
    let flat = |u: &crate::report::EndUdp, v: f64| vec![(u.start, v), (u.end, v)];
    let per_stream = |f: &dyn Fn(&crate::report::EndUdp) -> f64| -> Vec<Series> {
        if !(2..=MAX_STREAM_LINES).contains(&ends.len()) {
            return Vec::new();
        }
        ends.iter()
            .enumerate()
            .map(|(n, u)| Series {
                name: format!("stream {}", n + 1),
                shape: Shape::Line,
                points: flat(u, f(u)),
            })
            .collect()
    };
    let start = ends.iter().map(|u| u.start).fold(f64::INFINITY, f64::min);
    let end = ends.iter().map(|u| u.end).fold(0.0f64, f64::max);
    let lost: u64 = ends.iter().map(|u| u.lost_packets).sum();
    let packets: u64 = ends.iter().map(|u| u.packets).sum();
    let lost_percent = if packets == 0 {
        0.0
    } else {
        lost as f64 * 100.0 / packets as f64
    };
    // iperf3's sum: the streams' mean jitter.
    let jitter = ends.iter().map(|u| u.jitter_ms).sum::<f64>() / ends.len() as f64;
    let sum = |v: f64| Series {
        name: "sum".into(),
        shape: Shape::Line,
        points: vec![(start, v), (end, v)],
    };
    let mut loss = per_stream(&|u| u.lost_percent);
    loss.push(sum(lost_percent));
    let mut jit = per_stream(&|u| u.jitter_ms);
    jit.push(sum(jitter));
    let unit = small_ms_in_us(&mut jit);
    let whole = "whole test, from the receiver's end results";
    vec![
        over_time(
            "udp_loss",
            format!("UDP loss, {} ({whole}: {lost} lost)", dir.label),
            "lost datagrams (%)",
            loss,
        ),
        over_time(
            "udp_jitter",
            format!("UDP jitter, {} ({whole})", dir.label),
            format!("jitter ({unit})"),
            jit,
        ),
    ]
}

/// Values in ms all below 0.1 ms (loopback, LANs) rescaled to µs, so the axis reads
/// "20" rather than "0.00002"; the unit to label the axis with.
pub(super) fn small_ms_in_us(series: &mut [Series]) -> &'static str {
    let max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max);
    if max >= 0.1 {
        return "ms";
    }
    for p in series.iter_mut().flat_map(|s| s.points.iter_mut()) {
        p.1 *= 1000.0;
    }
    "µs"
}

/// Congestion window and RTT of each TCP stream this report's side sent on,
/// retransmissions marked.
fn tcp(r: &Report) -> Vec<Chart> {
    let dir = if r.start.connecting_to.is_some() {
        "client → server"
    } else {
        "server → client"
    };
    let socks = sockets(&r.intervals, true);
    let has_tcp = r
        .intervals
        .iter()
        .flat_map(|iv| &iv.streams)
        .any(|s| s.sender && s.tcp.is_some_and(|t| t.snd_cwnd > 0 || t.rtt > 0));
    if !has_tcp || socks.is_empty() {
        return Vec::new();
    }
    let shown = &socks[..socks.len().min(MAX_STREAM_LINES)];
    let name = |n: usize| {
        if socks.len() == 1 {
            "stream".to_string()
        } else {
            format!("stream {}", n + 1)
        }
    };
    let mut cwnd = Vec::new();
    let mut rtt = Vec::new();
    let mut retr = Vec::new();
    let cwnd_max = r
        .intervals
        .iter()
        .flat_map(|iv| &iv.streams)
        .filter_map(|s| s.tcp.map(|t| t.snd_cwnd))
        .max()
        .unwrap_or(0);
    let (div, unit) = if cwnd_max >= 1 << 20 {
        ((1u64 << 20) as f64, "congestion window (MiB)")
    } else {
        (1024.0, "congestion window (KiB)")
    };
    for (n, &s) in shown.iter().enumerate() {
        cwnd.push(Series {
            name: name(n),
            shape: Shape::Line,
            points: stream_points(&r.intervals, s, true, |x| {
                x.tcp.map(|t| t.snd_cwnd as f64 / div)
            }),
        });
        rtt.push(Series {
            name: name(n),
            shape: Shape::Line,
            points: stream_points(&r.intervals, s, true, |x| {
                x.tcp.map(|t| t.rtt as f64 / 1000.0)
            }),
        });
        let marks: Vec<(f64, f64)> = r
            .intervals
            .iter()
            .flat_map(|iv| &iv.streams)
            .filter(|x| x.socket == s && x.sender && !x.omitted)
            // Mid-interval: the retransmissions happened somewhere in it.
            .filter_map(|x| {
                x.tcp
                    .filter(|t| t.retransmits > 0)
                    .map(|t| ((x.start + x.end) / 2.0, t))
            })
            .map(|(t, f)| (t, f.snd_cwnd as f64 / div))
            .collect();
        retr.extend(marks);
    }
    let total: u64 = r
        .intervals
        .iter()
        .flat_map(|iv| &iv.streams)
        .filter(|x| x.sender && !x.omitted)
        .filter_map(|x| x.tcp.map(|t| t.retransmits))
        .sum();
    if !retr.is_empty() {
        cwnd.push(Series {
            name: format!("retransmits ({total})"),
            shape: Shape::Markers,
            points: thin(retr, MAX_POINTS),
        });
    }
    let chart = |kind, title: &str, y: &str, series| over_time(kind, title, y, series);
    vec![
        chart(
            "tcp_cwnd",
            &format!("TCP congestion window, {dir} (intervals with retransmissions marked)"),
            unit,
            cwnd,
        ),
        chart(
            "tcp_rtt",
            &format!("TCP smoothed RTT, {dir}"),
            "RTT (ms)",
            rtt,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::input::parse_result as read_document;

    fn doc(text: &str) -> Report {
        read_document(text).unwrap()
    }

    fn kinds(c: &[Chart]) -> Vec<&'static str> {
        c.iter().map(|c| c.kind).collect()
    }

    fn names(c: &Chart) -> Vec<&str> {
        c.series.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn tcp_throughput_per_stream_and_cwnd_rtt() {
        let r = doc(include_str!("../testdata/tcp.json"));
        let c = single(&r);
        assert_eq!(kinds(&c), ["throughput", "tcp_cwnd", "tcp_rtt"]);
        assert_eq!(names(&c[0]), ["stream 1", "stream 2", "sum (sender)"]);
        assert_eq!(c[0].title, "Throughput, client → server");
        // Steps: each interval from its start to its end, in the chart's unit.
        let sum = &c[0].series[2].points;
        let iv = &r.intervals[0].sum;
        assert_eq!(sum.len(), 2 * r.intervals.len());
        let (div, unit) = rate_unit(iv.bits_per_second);
        assert_eq!(c[0].y.label, unit);
        assert_eq!(sum[0], (iv.start, iv.bits_per_second / div));
        assert_eq!(sum[1], (iv.end, iv.bits_per_second / div));
        assert_eq!(c[2].y.label, "RTT (ms)");
        let rtt0 = r.intervals[0].streams[0].tcp.unwrap().rtt as f64 / 1000.0;
        assert_eq!(c[2].series[0].points[0].1, rtt0);
        // Every series starts where the test does: cwnd and RTT were sampled only at
        // each interval's end, so their lines began at t = 1 beside throughput's 0.
        for chart in &c {
            for s in &chart.series {
                assert_eq!(s.points[0].0, iv.start, "{}: {}", chart.kind, s.name);
                assert_eq!(
                    s.points.last().unwrap().0,
                    r.intervals.last().unwrap().sum.end
                );
            }
        }
    }

    #[test]
    fn retransmissions_are_marked_where_they_happened() {
        let r = doc(include_str!("../testdata/working_load.json"));
        let c = single(&r);
        let cwnd = c.iter().find(|c| c.kind == "tcp_cwnd").unwrap();
        let marks = cwnd
            .series
            .iter()
            .find(|s| s.shape == Shape::Markers)
            .unwrap();
        let with_retr: Vec<f64> = r
            .intervals
            .iter()
            .flat_map(|iv| &iv.streams)
            .filter(|s| s.sender && s.tcp.is_some_and(|t| t.retransmits > 0))
            .map(|s| (s.start + s.end) / 2.0)
            .collect();
        let total: u64 = r
            .intervals
            .iter()
            .flat_map(|iv| &iv.streams)
            .filter_map(|s| s.tcp.map(|t| t.retransmits))
            .sum();
        assert!(!with_retr.is_empty());
        assert_eq!(marks.points.len(), with_retr.len());
        let mut at: Vec<f64> = marks.points.iter().map(|p| p.0).collect();
        let mut want = with_retr.clone();
        at.sort_by(f64::total_cmp);
        want.sort_by(f64::total_cmp);
        assert_eq!(at, want);
        assert_eq!(marks.name, format!("retransmits ({total})"));
    }

    #[test]
    fn udp_bidir_has_both_directions_and_the_receivers_loss_and_jitter() {
        for text in [
            include_str!("../testdata/udp_bidir.json"),
            include_str!("../testdata/iperf3_322_udp_bidir.json"),
        ] {
            let r = doc(text);
            let c = single(&r);
            assert_eq!(
                kinds(&c),
                [
                    "throughput",
                    "throughput",
                    "udp_loss",
                    "udp_jitter",
                    "udp_loss",
                    "udp_jitter"
                ]
            );
            assert_eq!(c[1].title, "Throughput, server → client");
            assert!(names(&c[1]).contains(&"sum (receiver)"));
            // The client's own sending direction: the server's end results.
            assert!(
                c[2].title
                    .starts_with("UDP loss, client → server (whole test")
            );
            // The direction the client received: its interval rows.
            let c = &c[2..];
            assert_eq!(c[2].title, "UDP loss, server → client");
            // Jitter below 0.1 ms (loopback) is shown in µs rather than "0.00002 ms".
            let max = r
                .intervals
                .iter()
                .flat_map(|iv| {
                    iv.streams.iter().map(|s| s.udp_recv).chain([iv
                        .sum_bidir_reverse
                        .as_ref()
                        .unwrap()
                        .udp_recv])
                })
                .filter_map(|u| u.map(|u| u.jitter_ms))
                .fold(0.0f64, f64::max);
            let (unit, scale) = if max < 0.1 {
                ("µs", 1000.0)
            } else {
                ("ms", 1.0)
            };
            assert_eq!(c[3].y.label, format!("jitter ({unit})"));
            let jit = r.intervals[1].sum_bidir_reverse.as_ref().unwrap();
            let jit = jit.udp_recv.unwrap().jitter_ms;
            let shown = c[3].series.last().unwrap().points[2].1;
            assert!((shown - jit * scale).abs() < 1e-9, "{shown} vs {jit} ms");
            assert!(
                c[3].series
                    .last()
                    .unwrap()
                    .points
                    .iter()
                    .all(|p| p.1 >= 0.0)
            );
        }
    }

    /// A lossy client-side UDP run (the server's loss only in its results and its
    /// text output) was charted as one flat throughput line.
    #[test]
    fn a_lossy_udp_run_charts_its_loss_from_the_servers_figures() {
        let mut r = doc(include_str!("../testdata/udp_lossy.json"));
        assert!(r.server_output_json.is_none() && r.server_output_text.is_some());
        // Per interval, from the server's text rows.
        let c = single(&r);
        assert_eq!(kinds(&c), ["throughput", "udp_loss", "udp_jitter"]);
        assert_eq!(names(&c[1]), ["stream 1", "stream 2", "sum"]);
        // The server's rows: 573/46785 then 837/46874.
        let sum = &c[1].series[2].points;
        assert_eq!(sum.len(), 4);
        assert!((sum[0].1 - 573.0 * 100.0 / 46785.0).abs() < 1e-9, "{sum:?}");
        assert!((sum[2].1 - 837.0 * 100.0 / 46874.0).abs() < 1e-9, "{sum:?}");
        assert!(names(&c[0]).contains(&"sum (receiver, counted by the server)"));
        // Without the server's output: each stream over the whole test, from the end
        // results the server sent.
        r.server_output_text = None;
        let c = single(&r);
        assert_eq!(kinds(&c), ["throughput", "udp_loss", "udp_jitter"]);
        assert!(c[1].title.contains("1410 lost"), "{}", c[1].title);
        let lost: Vec<f64> = r
            .end
            .streams
            .iter()
            .map(|s| s.udp.as_ref().unwrap().lost_percent)
            .collect();
        assert!(lost.iter().all(|&l| l > 0.0));
        for (n, l) in lost.iter().enumerate() {
            assert!(c[1].series[n].points.iter().all(|p| p.1 == *l));
        }
        let sum = &c[1].series[2].points;
        assert!(
            (sum[0].1 - 1410.0 * 100.0 / 93673.0).abs() < 1e-9,
            "{sum:?}"
        );
        assert_eq!(
            (sum[0].0, sum[1].0),
            (0.0, r.end.streams[0].udp.as_ref().unwrap().end)
        );
    }

    #[test]
    fn out_of_order_chart_only_when_seen() {
        let mut r = doc(include_str!("../testdata/udp_bidir.json"));
        assert!(!kinds(&single(&r)).contains(&"udp_order"));
        let rev = r.intervals[1].sum_bidir_reverse.as_mut().unwrap();
        rev.netmeter = Some(Box::new(crate::report::StreamExt {
            udp: Some(crate::report::UdpExtra {
                out_of_order: 7,
                duplicates: 2,
                ecn: None,
            }),
            ..Default::default()
        }));
        let c = single(&r);
        let o = c.iter().find(|c| c.kind == "udp_order").unwrap();
        assert_eq!(names(o), ["out of order", "duplicates"]);
        assert!(o.series[0].points.iter().any(|p| p.1 == 7.0));
    }

    #[test]
    fn several_inputs_share_charts_named_after_each() {
        let input = |name: &str, text: &str| Input {
            name: name.into(),
            path: format!("{name}.json").into(),
            report: doc(text),
        };
        let c = compare(&[
            input("before", include_str!("../testdata/tcp.json")),
            input("after", include_str!("../testdata/tcp_bidir.json")),
            input("rr", include_str!("../testdata/bounceback.json")),
        ]);
        assert_eq!(c[0].kind, "throughput");
        assert_eq!(
            names(&c[0]),
            ["before", "after", "after (server → client)", "rr"]
        );
        assert_eq!(kinds(&c)[1..], ["latency_cdf"]);
        let c = compare(&[
            input("tcp", include_str!("../testdata/tcp.json")),
            input("netmeter", include_str!("../testdata/udp_bidir.json")),
            input(
                "iperf3",
                include_str!("../testdata/iperf3_322_udp_bidir.json"),
            ),
        ]);
        assert_eq!(kinds(&c), ["throughput", "udp_loss", "udp_jitter"]);
        // Each input's sending direction over the whole test (its end results), the
        // direction it received per interval.
        let want = [
            "netmeter",
            "netmeter (server → client)",
            "iperf3",
            "iperf3 (server → client)",
        ];
        assert_eq!(names(&c[1]), want);
        assert_eq!(names(&c[2]), want);
        // One unit for all: iperf3's jitter is above 0.1 ms, so ms.
        assert_eq!(c[2].y.label, "jitter (ms)");
        let r = doc(include_str!("../testdata/udp_bidir.json"));
        let j = r.intervals[1].sum_bidir_reverse.as_ref().unwrap();
        let shown = c[2].series[1].points[2].1;
        assert!(
            (shown - j.udp_recv.unwrap().jitter_ms).abs() < 1e-12,
            "{shown}"
        );
    }

    #[test]
    fn thinning_keeps_extremes_and_ends() {
        let pts: Vec<(f64, f64)> = (0..10_000)
            .map(|i| (i as f64, if i == 4321 { 99.0 } else { (i % 7) as f64 }))
            .collect();
        let t = thin(pts.clone(), 2000);
        assert!(t.len() <= 2002, "{}", t.len());
        assert_eq!(t.first(), pts.first());
        assert_eq!(t.last(), pts.last());
        assert!(t.contains(&(4321.0, 99.0)));
        assert!(t.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(thin(pts[..10].to_vec(), 2000), pts[..10]);
    }

    #[test]
    fn ecn_marks_get_a_chart_over_time_where_counted() {
        use crate::report::{StreamExt, UdpExtra, UdpRecvFigures};
        use crate::stats::EcnCounts;
        let iv = |start: f64, ce: u64| {
            let ecn = EcnCounts {
                ect1: 100 - ce,
                ce,
                ..EcnCounts::default()
            };
            let sum = SumInterval {
                start,
                end: start + 1.0,
                seconds: 1.0,
                udp_recv: Some(UdpRecvFigures::default()),
                netmeter: Some(Box::new(StreamExt {
                    udp: Some(UdpExtra {
                        ecn: Some(ecn.figures()),
                        ..UdpExtra::default()
                    }),
                    ..StreamExt::default()
                })),
                ..SumInterval::default()
            };
            Interval {
                sum,
                ..Interval::default()
            }
        };
        let r = Report {
            intervals: vec![iv(0.0, 0), iv(1.0, 10), iv(2.0, 50)],
            ..Report::default()
        };
        let charts = single(&r);
        let c = charts
            .iter()
            .find(|c| c.kind == "ecn_ce")
            .expect("an ECN chart");
        let sum = c.series.iter().find(|s| s.name == "sum").expect("the sum");
        assert_eq!(
            sum.points,
            vec![
                (0.0, 0.0),
                (1.0, 0.0),
                (1.0, 10.0),
                (2.0, 10.0),
                (2.0, 50.0),
                (3.0, 50.0)
            ]
        );
        // Unmarked datagrams only: no chart.
        let mut plain = r.clone();
        for i in &mut plain.intervals {
            let u = i
                .sum
                .netmeter
                .as_mut()
                .and_then(|n| n.udp.as_mut())
                .expect("udp");
            u.ecn = Some(
                EcnCounts {
                    not_ect: 100,
                    ..EcnCounts::default()
                }
                .figures(),
            );
        }
        assert!(single(&plain).iter().all(|c| c.kind != "ecn_ce"));
    }
}
