//! Charts of a test: what `netmeter plot`, `--plot FILE` and the HTML report draw.
//!
//! Two steps, kept apart. [`charts`] reads one or more [`Input`]s and decides which
//! charts apply (pure: a [`Chart`] is a title, two axes and the series as numbers, so
//! tests check it without drawing); `draw` ([`render_svg`], [`render_png`]) hands them
//! to the `plotters` crate, which writes SVG or PNG.
//!
//! Which charts, from what the Report holds:
//! - throughput over time for each direction (one line per stream when there are 2–16,
//!   plus the sum; the peer's sum, dashed, when the document carries the server's output);
//! - UDP loss and jitter over time from the receiving side's rows (this side's, or the
//!   server's in `server_output_json`, or its interval rows read back from
//!   `server_output_text`: `server_text`), out-of-order and duplicates when any were
//!   seen; without any of them, each stream's loss and jitter over the whole test from
//!   the receiver's end results (a lossy run is never charted clean);
//! - TCP congestion window and smoothed RTT per sending stream (this side's, and the
//!   server's from `server_output_json`), intervals with retransmissions marked;
//! - latency CDF and histogram for each HDR histogram the test recorded (bounceback RTT,
//!   one-way delay each direction, connect-only handshakes, burst and frame transfer
//!   times, isochronous frame latency), with p50/p90/p99/p99.9
//!   markers and a log axis when the tail is long;
//! - working load: idle and loaded RTT on one chart, RPM in the title.
//!
//! With several inputs the charts compare them instead: each input's throughput sum,
//! UDP loss and jitter, and each latency distribution on shared axes, the legend naming
//! the input.
//!
//! A file gets every chart, one under the other (a single-column grid); the HTML report
//! inlines each chart as its own SVG.

mod draw;
mod latency;
mod series;
mod server_text;

pub use draw::{DrawError, Heatmap, render_heatmap, render_png, render_svg};
pub use series::rate_unit;

use super::input::Input;

/// Width of one chart, pixels.
pub const WIDTH: u32 = 960;
/// Height of one chart, pixels.
pub const HEIGHT: u32 = 400;
/// Most points a line keeps; longer ones are thinned keeping each bucket's extremes.
pub const MAX_POINTS: usize = 2000;

/// At most `max` points: the line split into buckets, each keeping its lowest and
/// highest point in time order (spikes survive), the first and last points kept.
fn thin(pts: Vec<(f64, f64)>, max: usize) -> Vec<(f64, f64)> {
    if pts.len() <= max || max < 4 {
        return pts;
    }
    let buckets = max / 2;
    let per = pts.len().div_ceil(buckets);
    let mut out = Vec::with_capacity(max + 2);
    for chunk in pts.chunks(per) {
        let lo = chunk
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.1.total_cmp(&b.1.1))
            .map(|x| x.0);
        let hi = chunk
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.1.total_cmp(&b.1.1))
            .map(|x| x.0);
        if let (Some(lo), Some(hi)) = (lo, hi) {
            let (a, b) = if lo <= hi { (lo, hi) } else { (hi, lo) };
            out.push(chunk[a]);
            if b != a {
                out.push(chunk[b]);
            }
        }
    }
    if out.last() != pts.last()
        && let Some(&l) = pts.last()
    {
        out.push(l);
    }
    if out.first() != pts.first() {
        out.insert(0, pts[0]);
    }
    out
}

/// One chart as numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// A short stable name (`throughput`, `udp_loss`, `latency_cdf`...).
    pub kind: &'static str,
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    /// Vertical lines with a label (percentiles).
    pub markers: Vec<Marker>,
}

/// An axis: its label and whether it is logarithmic.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub label: String,
    pub log: bool,
    /// A categorical axis (a sweep's option values): category i sits at x = i + 1 and
    /// is labelled with its name; empty for a numeric axis.
    pub categories: Vec<String>,
}

impl Axis {
    fn linear(label: impl Into<String>) -> Axis {
        Axis {
            label: label.into(),
            log: false,
            categories: Vec::new(),
        }
    }
}

/// How a series is drawn.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    Line,
    Dashed,
    /// Points only (retransmissions).
    Markers,
    /// Histogram bars: (lower edge, upper edge, height).
    Bars(Vec<(f64, f64, f64)>),
    /// A line with a dot at each point and error bars: (x, low, high) each.
    LineWithErrors(Vec<(f64, f64, f64)>),
}

/// One named series.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub shape: Shape,
    pub points: Vec<(f64, f64)>,
}

/// A vertical marker line.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    pub x: f64,
    pub label: String,
}

/// The charts for these inputs: one input's own charts, or for several a comparison.
pub fn charts(inputs: &[Input]) -> Vec<Chart> {
    match inputs {
        [one] => series::single(&one.report),
        _ => series::compare(inputs),
    }
}

/// Output formats, from the file name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Format {
    Svg,
    Png,
}

impl Format {
    /// The format a file name asks for, or `None` for an ending we cannot write.
    pub fn of(path: &std::path::Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "svg" => Some(Format::Svg),
            "png" => Some(Format::Png),
            _ => None,
        }
    }
}

/// Why a plot file was not written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("nothing to plot in {0}: it has no intervals and no latency histograms")]
    Nothing(String),
    #[error("{} must end in .svg or .png", .0.display())]
    Format(std::path::PathBuf),
    #[error("cannot draw the charts: {0}")]
    Draw(String),
    #[error("cannot write {}: {err}", path.display())]
    Write {
        path: std::path::PathBuf,
        err: std::io::Error,
    },
}

/// Draw these inputs' charts into `path` (.svg or .png), whole or not at all.
pub fn write_file(inputs: &[Input], path: &std::path::Path) -> Result<(), PlotError> {
    let charts = charts(inputs);
    if charts.is_empty() {
        let names: Vec<_> = inputs
            .iter()
            .map(|i| i.path.display().to_string())
            .collect();
        return Err(PlotError::Nothing(names.join(", ")));
    }
    write_charts(&charts, path)
}

/// CDFs of several latency distributions on one chart (`scenario --plot`: one line per
/// flow), each legend entry with its p50 and p99.
pub fn latency_cdfs(title: &str, dists: &[latency::Dist]) -> Chart {
    latency::cdf_chart(title, dists, false)
}

pub use latency::Dist;

/// Draw `charts` into `path` (.svg or .png), whole or not at all.
pub fn write_charts(charts: &[Chart], path: &std::path::Path) -> Result<(), PlotError> {
    let format = Format::of(path).ok_or_else(|| PlotError::Format(path.to_path_buf()))?;
    let bytes = match format {
        Format::Svg => render_svg(charts).map(String::into_bytes),
        Format::Png => render_png(charts),
    }
    .map_err(|e| PlotError::Draw(e.to_string()))?;
    write_whole(path, &bytes).map_err(|err| PlotError::Write {
        path: path.to_path_buf(),
        err,
    })
}

/// Write `bytes` to `path` so that the file appears whole or not at all: into a
/// temporary name beside it, then renamed; the temporary file removed on failure.
pub fn write_whole(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{file}.partial-{}", std::process::id()));
    let done = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::input::parse_result as read_document;

    fn input(text: &str) -> Input {
        Input {
            name: "t".into(),
            path: "t.json".into(),
            report: read_document(text).unwrap(),
        }
    }

    /// The text of every `<text>` element.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| t.split_once('>').map(|x| x.1))
            .filter_map(|t| t.split_once("</text>").map(|x| x.0.trim().to_string()))
            .collect()
    }

    #[test]
    fn svg_has_each_chart_its_axes_labels_and_series() {
        let charts = charts(&[input(include_str!("../testdata/tcp.json"))]);
        let svg = render_svg(&charts).unwrap();
        assert!(svg.starts_with("<svg "));
        assert!(svg.contains(&format!(
            "viewBox=\"0 0 {WIDTH} {}\"",
            HEIGHT * charts.len() as u32
        )));
        let t = texts(&svg);
        for c in &charts {
            assert!(t.contains(&c.title), "{} missing", c.title);
            assert!(t.contains(&c.y.label));
            for s in &c.series {
                assert!(t.contains(&s.name), "legend {} missing", s.name);
            }
        }
        assert_eq!(t.iter().filter(|x| *x == "time (s)").count(), 3);
        // Data lines and their legend samples are the only 2-pixel strokes: two per
        // series (all are plain lines here).
        let series: usize = charts.iter().map(|c| c.series.len()).sum();
        assert!(
            charts
                .iter()
                .flat_map(|c| &c.series)
                .all(|s| s.shape == Shape::Line)
        );
        assert_eq!(svg.matches("stroke-width=\"2\"").count(), 2 * series);
    }

    #[test]
    fn latency_svg_has_percentile_markers_and_bars() {
        let charts = charts(&[input(include_str!("../testdata/bounceback.json"))]);
        let svg = render_svg(&charts).unwrap();
        let t = texts(&svg);
        for label in ["p50", "p90", "p99", "p99.9"] {
            let n = t
                .iter()
                .filter(|x| x.starts_with(&format!("{label} ")))
                .count();
            assert_eq!(n, 2, "{label}: one marker on the CDF, one on the histogram");
        }
        assert!(t.contains(&"latency (ms)".to_string()));
        assert!(t.contains(&"samples".to_string()));
        let hist = charts
            .iter()
            .find(|c| c.kind == "latency_histogram")
            .unwrap();
        let Shape::Bars(bars) = &hist.series[0].shape else {
            panic!("bars")
        };
        let filled = bars.iter().filter(|b| b.2 > 0.0).count();
        // Each non-empty bar is a filled rect (plus the background, the legend box
        // and its sample, and the plotting areas' own).
        assert!(svg.matches("<rect").count() > filled);
    }

    #[test]
    fn png_is_a_png_of_the_grid() {
        let charts = charts(&[input(include_str!("../testdata/udp.json"))]);
        let png = render_png(&charts).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let dec = png::Decoder::new(&png[..]);
        let reader = dec.read_info().unwrap();
        let info = reader.info();
        assert_eq!(
            (info.width, info.height),
            (WIDTH, HEIGHT * charts.len() as u32)
        );
    }

    #[test]
    fn a_file_is_written_whole_or_not_at_all() {
        let dir = std::env::temp_dir().join(format!("nm-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = dir.join("a.svg");
        write_file(&[input(include_str!("../testdata/tcp.json"))], &ok).unwrap();
        assert!(std::fs::read_to_string(&ok).unwrap().ends_with("</svg>\n"));
        let missing = dir.join("no/such/dir/b.png");
        let e = write_file(&[input(include_str!("../testdata/tcp.json"))], &missing);
        assert!(matches!(e, Err(PlotError::Write { .. })));
        let bad = write_file(
            &[input(include_str!("../testdata/tcp.json"))],
            &dir.join("c.jpg"),
        );
        assert!(matches!(bad, Err(PlotError::Format(_))));
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "only a.svg: no partial files");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A jagged series of many points is drawn one pixel wide: plotters' wide lines join
    /// segments with unlimited miters, which drew spikes past the data (seen on a 1 ms
    /// -i run's RTT reaching 7 ms where the data's maximum was 6.2).
    #[test]
    fn dense_series_are_drawn_thin() {
        let pts: Vec<(f64, f64)> = (0..1000)
            .map(|i| (i as f64, if i % 2 == 0 { 1.0 } else { 5.0 }))
            .collect();
        let chart = |points: Vec<(f64, f64)>| Chart {
            kind: "tcp_rtt",
            title: "t".into(),
            x: Axis::linear("x"),
            y: Axis::linear("y"),
            series: vec![Series {
                name: "s".into(),
                shape: Shape::Line,
                points,
            }],
            markers: Vec::new(),
        };
        let svg = render_svg(&[chart(pts.clone())]).unwrap();
        assert_eq!(svg.matches("stroke-width=\"2\"").count(), 0);
        let svg = render_svg(&[chart(pts[..50].to_vec())]).unwrap();
        assert_eq!(svg.matches("stroke-width=\"2\"").count(), 2);
    }
}
