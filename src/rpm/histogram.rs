//! `netmeter rpm`'s text histograms: each kind of probe time (foreign TCP connect, TLS
//! handshake, HTTP GET; self GET), idle and loaded, as rows of `#` over buckets spaced
//! 1-2-5 per decade, so that a 2 ms idle path and a 500 ms bloated queue read on the same
//! scale. Only the rows from the first to the last bucket that holds a probe are
//! printed, so a kind whose times stay within one decade takes three or four lines; a
//! row is at most [`WIDTH`] columns. Pure: records in, text out. `-J` carries every
//! probe for finer views.

use super::summary::ProbeRecord;
use std::fmt::Write as _;

/// The widest line a histogram prints.
pub const WIDTH: usize = 78;
/// The longest bar, in `#`s: the bucket with the most probes.
const BAR: usize = 48;

/// The buckets' upper bounds in ms, 1-2-5 per decade from 0.1 ms to 10 s; a last
/// bucket holds everything above.
const BOUNDS_MS: [f64; 16] = [
    0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0,
    10000.0,
];

/// The bucket of `ms`: the first whose upper bound is above it (a time exactly on a
/// bound goes up one, as `[lo, hi)`).
fn bucket(ms: f64) -> usize {
    BOUNDS_MS
        .iter()
        .position(|&b| ms < b)
        .unwrap_or(BOUNDS_MS.len())
}

/// A bound as the label prints it: `0.5`, `20`, `1k`.
fn bound(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{}k", ms / 1000.0)
    } else {
        format!("{ms}")
    }
}

/// The label of bucket `i`, such as `10-20` (`<0.1` below the first, `10k+` above the
/// last).
fn label(i: usize) -> String {
    match i {
        0 => format!("<{}", bound(BOUNDS_MS[0])),
        i if i == BOUNDS_MS.len() => format!("{}+", bound(BOUNDS_MS[i - 1])),
        i => format!("{}-{}", bound(BOUNDS_MS[i - 1]), bound(BOUNDS_MS[i])),
    }
}

/// Probes per bucket.
pub fn counts(times_ms: &[f64]) -> [u64; BOUNDS_MS.len() + 1] {
    let mut c = [0u64; BOUNDS_MS.len() + 1];
    for &t in times_ms.iter().filter(|t| t.is_finite()) {
        c[bucket(t.max(0.0))] += 1;
    }
    c
}

/// One histogram: a heading with the count, then a row per bucket from the first
/// non-empty one to the last; nothing when there is no time.
pub fn render(title: &str, times_ms: &[f64]) -> String {
    let c = counts(times_ms);
    let (Some(first), Some(last)) = (
        c.iter().position(|&n| n > 0),
        c.iter().rposition(|&n| n > 0),
    ) else {
        return String::new();
    };
    let total: u64 = c.iter().sum();
    let most = c.iter().copied().max().unwrap_or(1).max(1);
    let mut out = String::new();
    let _ = writeln!(out, "  {title} (ms), {total} probes");
    for (i, &n) in c.iter().enumerate().take(last + 1).skip(first) {
        // Rounded up, so that a bucket with one probe among thousands still shows.
        let len = (n as usize * BAR).div_ceil(most as usize);
        let _ = writeln!(out, "  {:>11} |{:<BAR$} {n}", label(i), "#".repeat(len));
    }
    out
}

/// The histograms of every kind of probe time in `probes`, titled after `phase`.
pub fn render_kinds(phase: &str, probes: &[&ProbeRecord]) -> String {
    let foreign: Vec<&&ProbeRecord> = probes.iter().filter(|p| p.tcp_ms.is_some()).collect();
    let pick = |f: &dyn Fn(&ProbeRecord) -> Option<f64>, set: &[&&ProbeRecord]| -> Vec<f64> {
        set.iter().filter_map(|p| f(p)).collect()
    };
    let own: Vec<&&ProbeRecord> = probes.iter().filter(|p| p.tcp_ms.is_none()).collect();
    let mut out = String::new();
    for (name, times) in [
        ("foreign TCP", pick(&|p| p.tcp_ms, &foreign)),
        ("foreign TLS", pick(&|p| p.tls_ms, &foreign)),
        ("foreign GET", pick(&|p| Some(p.http_ms), &foreign)),
        ("self GET", pick(&|p| Some(p.http_ms), &own)),
    ] {
        out.push_str(&render(&format!("{phase} {name}"), &times));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_half_open_and_cover_everything() {
        assert_eq!(bucket(0.0), 0);
        assert_eq!(bucket(0.1), 1);
        assert_eq!(bucket(9.99), 6);
        assert_eq!(bucket(10.0), 7);
        assert_eq!(bucket(1e9), BOUNDS_MS.len());
        assert_eq!(label(0), "<0.1");
        assert_eq!(label(7), "10-20");
        assert_eq!(label(13), "1k-2k");
        assert_eq!(label(BOUNDS_MS.len()), "10k+");
        let c = counts(&[1.0, 1.5, 15.0, f64::NAN, -3.0]);
        assert_eq!(c[4], 2);
        assert_eq!(c[7], 1);
        assert_eq!(c[0], 1, "a negative time counts as 0");
        assert_eq!(c.iter().sum::<u64>(), 4, "NaN is not counted");
    }

    #[test]
    fn rows_span_the_filled_buckets_with_bars_to_scale() {
        let mut times = vec![12.0; 96];
        times.extend([3.0, 25.0, 26.0]);
        let text = render("loaded self GET", &times);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "  loaded self GET (ms), 99 probes");
        // 2-5, 5-10 (empty, kept: the rows are contiguous), 10-20, 20-50: each row its
        // label, its bar and its count.
        let row = |l: &str| -> (String, usize, u64) {
            let (label, rest) = l.split_once(" |").unwrap();
            let (bar, n) = rest.rsplit_once(' ').unwrap();
            (
                label.trim().to_string(),
                bar.trim_end().chars().filter(|&c| c == '#').count(),
                n.parse().unwrap(),
            )
        };
        let rows: Vec<_> = lines[1..].iter().map(|l| row(l)).collect();
        assert_eq!(
            rows,
            [
                ("2-5".to_string(), 1, 1),
                ("5-10".to_string(), 0, 0),
                ("10-20".to_string(), BAR, 96),
                // 2 of 96 probes: rounded up to one #.
                ("20-50".to_string(), 1, 2),
            ],
            "{text}"
        );
        for l in &lines {
            assert!(l.chars().count() <= WIDTH, "{l:?}");
        }
        assert_eq!(render("none", &[]), "");
    }

    #[test]
    fn each_kind_has_its_own_histogram() {
        let rec = |tcp: Option<f64>, http| ProbeRecord {
            kind: if tcp.is_some() { "foreign" } else { "self" },
            start_s: 0.0,
            tcp_ms: tcp,
            tls_ms: tcp.map(|t| t * 2.0),
            http_ms: http,
        };
        let probes = [rec(Some(1.5), 3.0), rec(Some(1.6), 3.5), rec(None, 150.0)];
        let refs: Vec<&ProbeRecord> = probes.iter().collect();
        let text = render_kinds("idle", &refs);
        for want in [
            "idle foreign TCP (ms), 2 probes",
            "idle foreign TLS (ms), 2 probes",
            "idle foreign GET (ms), 2 probes",
            "idle self GET (ms), 1 probes",
            "100-200 |",
        ] {
            assert!(text.contains(want), "{want:?} not in\n{text}");
        }
        // TCP 1.5 and 1.6 ms in 1-2; TLS 3.0 and 3.2 ms in 2-5.
        assert!(text.contains("1-2 |"), "{text}");
    }
}
