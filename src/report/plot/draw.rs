//! Drawing [`Chart`]s with `plotters`: SVG as a string, PNG as bytes.
//!
//! plotters measures text with a font even for SVG (the SVG itself names
//! `sans-serif` and leaves the glyphs to the viewer). netmeter embeds DejaVu Sans
//! (`assets/fonts/`, Bitstream Vera licence) so a PNG looks the same on every machine
//! and no system font or fontconfig is needed.

use super::{Chart, HEIGHT, Shape, WIDTH};
use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::ops::Range;
use std::sync::OnceLock;

static DEJAVU_SANS: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");

/// Line colours, in order (Okabe–Ito, readable by colour-blind readers), then repeated.
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
    RGBColor(0, 0, 0),
    RGBColor(150, 150, 150),
];

/// Series with more points than this are drawn one pixel wide.
const DENSE_POINTS: usize = 300;

/// The embedded font could not be loaded (a damaged build).
#[derive(Debug, Clone, thiserror::Error)]
#[error("the embedded font does not load")]
pub struct FontError;

/// Why drawing failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct DrawError(String);

impl From<FontError> for DrawError {
    fn from(e: FontError) -> DrawError {
        DrawError(e.to_string())
    }
}

fn font() -> Result<(), FontError> {
    static DONE: OnceLock<bool> = OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, DEJAVU_SANS).is_ok()
    });
    if ok { Ok(()) } else { Err(FontError) }
}

fn err(e: impl std::fmt::Display) -> DrawError {
    DrawError(e.to_string())
}

/// The charts one under the other, as one SVG document.
pub fn render_svg(charts: &[Chart]) -> Result<String, DrawError> {
    font()?;
    let mut out = String::new();
    {
        let size = (WIDTH, HEIGHT * charts.len().max(1) as u32);
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        draw_all(&root, charts)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// The charts one under the other, as PNG bytes.
pub fn render_png(charts: &[Chart]) -> Result<Vec<u8>, DrawError> {
    font()?;
    let (w, h) = (WIDTH, HEIGHT * charts.len().max(1) as u32);
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let backend =
            BitMapBackend::<plotters::backend::RGBPixel>::with_buffer_and_format(&mut rgb, (w, h))
                .map_err(err)?;
        let root = backend.into_drawing_area();
        draw_all(&root, charts)?;
        root.present().map_err(err)?;
    }
    let mut png_bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut png_bytes, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        // Charts are mostly flat white and a few colours: the adaptive filter with the
        // best compression makes files 5 to 7 times smaller (measured: 443 KB -> 63 KB for
        // two charts) for ~0.06 s more.
        enc.set_compression(png::Compression::Best);
        enc.set_adaptive_filter(png::AdaptiveFilterType::Adaptive);
        let mut writer = enc.write_header().map_err(err)?;
        writer.write_image_data(&rgb).map_err(err)?;
    }
    Ok(png_bytes)
}

fn draw_all<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    charts: &[Chart],
) -> Result<(), DrawError> {
    root.fill(&WHITE).map_err(err)?;
    let areas = root.split_evenly((charts.len().max(1), 1));
    for (area, c) in areas.iter().zip(charts) {
        let (x, y) = ranges(c);
        if c.x.log {
            draw_in(area, c, x.log_scale(), y)?;
        } else {
            draw_in(area, c, x, y)?;
        }
    }
    Ok(())
}

/// The axes' ranges: every point, bar and marker inside, some room above for the
/// legend; a log axis starts above zero.
fn ranges(c: &Chart) -> (Range<f64>, Range<f64>) {
    let mut xs: Vec<f64> = Vec::new();
    let mut ymax = 0.0f64;
    for s in &c.series {
        for p in &s.points {
            xs.push(p.0);
            ymax = ymax.max(p.1);
        }
        if let Shape::Bars(b) = &s.shape {
            for &(lo, hi, v) in b {
                xs.extend([lo, hi]);
                ymax = ymax.max(v);
            }
        }
        if let Shape::LineWithErrors(e) = &s.shape {
            ymax = e.iter().map(|b| b.2).fold(ymax, f64::max);
        }
    }
    xs.extend(c.markers.iter().map(|m| m.x));
    xs.retain(|x| x.is_finite() && (!c.x.log || *x > 0.0));
    let mut x0 = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let mut x1 = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !x0.is_finite() || !x1.is_finite() {
        (x0, x1) = if c.x.log { (0.1, 10.0) } else { (0.0, 1.0) };
    }
    if !c.x.categories.is_empty() {
        // Category i at x = i + 1, half a step of room on each side.
        (x0, x1) = (0.5, c.x.categories.len() as f64 + 0.5);
    } else if c.x.log {
        (x0, x1) = (x0 * 0.9, x1 * 1.1);
    } else if c.kind.starts_with("latency") || c.kind == "working_load" {
        let pad = (x1 - x0).max(x1.abs() * 0.01) * 0.03;
        (x0, x1) = ((x0 - pad).max(0.0), x1 + pad);
    } else {
        x0 = x0.min(0.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y1 = if c.kind == "latency_cdf" || c.kind == "working_load" {
        1.02
    } else if ymax > 0.0 && ymax.is_finite() {
        // Room above the data for the legend, one line per entry.
        let entries = c.series.iter().filter(|s| !s.name.is_empty()).count();
        ymax * (1.12 + 0.07 * entries as f64).min(2.0)
    } else {
        1.0
    };
    (x0..x1, 0.0..y1)
}

fn draw_in<DB, X>(
    area: &DrawingArea<DB, Shift>,
    c: &Chart,
    x: X,
    y: Range<f64>,
) -> Result<(), DrawError>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let ytop = y.end;
    let mut chart = ChartBuilder::on(area)
        .caption(&c.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(70)
        .build_cartesian_2d(x, y)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(c.x.label.as_str())
        .y_desc(c.y.label.as_str())
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(225, 225, 225))
        .x_labels(if c.x.log {
            24
        } else if c.x.categories.is_empty() {
            12
        } else {
            // Ticks every half or whole step: each category's position among them.
            2 * c.x.categories.len() + 2
        })
        .y_labels(8)
        .x_label_formatter(&|v| {
            if !c.x.categories.is_empty() {
                category_tick(&c.x.categories, *v)
            } else if c.x.log {
                log_tick(*v)
            } else {
                tick(*v)
            }
        })
        .y_label_formatter(&|v| tick(*v))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    let mut labelled = 0;
    for (i, s) in c.series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        // plotters joins the segments of a wide line with unlimited miters: a dense,
        // jagged series would grow spikes past its own values. One pixel has no joins.
        let line = color.stroke_width(if s.points.len() > DENSE_POINTS { 1 } else { 2 });
        let drawn = match &s.shape {
            Shape::Line => chart
                .draw_series(LineSeries::new(s.points.iter().copied(), line))
                .map_err(err)?,
            Shape::Dashed => chart
                .draw_series(DashedLineSeries::new(s.points.iter().copied(), 8, 5, line))
                .map_err(err)?,
            Shape::Markers => chart
                .draw_series(
                    s.points
                        .iter()
                        .map(|&p| TriangleMarker::new(p, 6, RGBColor(200, 0, 0).filled())),
                )
                .map_err(err)?,
            Shape::Bars(bars) => chart
                .draw_series(bars.iter().filter(|b| b.2 > 0.0).map(|&(lo, hi, v)| {
                    Rectangle::new([(lo, 0.0), (hi, v)], color.mix(0.75).filled())
                }))
                .map_err(err)?,
            Shape::LineWithErrors(bars) => {
                // Each bar: the whisker and its caps, a tenth of a category wide,
                // shifted a little per series so the bars of equal x do not overlap.
                let shift = (i as f64 - (c.series.len() as f64 - 1.0) / 2.0) * 0.03;
                let whisker = color.stroke_width(2);
                for &(x, lo, hi) in bars {
                    let x = x + shift;
                    let cap = |y: f64| vec![(x - 0.05, y), (x + 0.05, y)];
                    chart
                        .draw_series([
                            PathElement::new(vec![(x, lo), (x, hi)], whisker),
                            PathElement::new(cap(lo), whisker),
                            PathElement::new(cap(hi), whisker),
                        ])
                        .map_err(err)?;
                }
                let shifted = s.points.iter().map(move |&(x, y)| (x + shift, y));
                chart
                    .draw_series(shifted.clone().map(|p| Circle::new(p, 4, color.filled())))
                    .map_err(err)?;
                chart
                    .draw_series(LineSeries::new(shifted, line))
                    .map_err(err)?
            }
        };
        if !s.name.is_empty() {
            labelled += 1;
            if matches!(s.shape, Shape::Markers) {
                drawn.label(s.name.as_str()).legend(|(lx, ly)| {
                    TriangleMarker::new((lx + 10, ly), 6, RGBColor(200, 0, 0).filled())
                });
            } else if let Shape::Bars(_) = s.shape {
                drawn.label(s.name.as_str()).legend(move |(lx, ly)| {
                    Rectangle::new([(lx, ly - 5), (lx + 20, ly + 5)], color.mix(0.75).filled())
                });
            } else {
                drawn
                    .label(s.name.as_str())
                    .legend(move |(lx, ly)| PathElement::new(vec![(lx, ly), (lx + 20, ly)], line));
            }
        }
    }
    draw_overlays(&mut chart, c, ytop, labelled > 0)
}

/// Over the series: the vertical markers (dashed, labelled at the top) and, when
/// `labelled` (a series has a name), the legend.
fn draw_overlays<'a, DB, XC>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<XC, RangedCoordf64>>,
    c: &Chart,
    ytop: f64,
    labelled: bool,
) -> Result<(), DrawError>
where
    DB: DrawingBackend + 'a,
    XC: Ranged<ValueType = f64>,
{
    for (i, m) in c.markers.iter().enumerate() {
        let style = RGBColor(90, 90, 90).stroke_width(1);
        chart
            .draw_series(DashedLineSeries::new(
                [(m.x, 0.0), (m.x, ytop)],
                4,
                4,
                style,
            ))
            .map_err(err)?;
        let ty = ytop * (0.96 - 0.07 * i as f64);
        chart
            .draw_series(std::iter::once(Text::new(
                format!(" {}", m.label),
                (m.x, ty),
                ("sans-serif", 12).into_font().color(&RGBColor(60, 60, 60)),
            )))
            .map_err(err)?;
    }
    if labelled {
        let pos = if c.kind == "latency_cdf" || c.kind == "working_load" {
            SeriesLabelPosition::LowerRight
        } else {
            SeriesLabelPosition::UpperRight
        };
        chart
            .configure_series_labels()
            .position(pos)
            .label_font(("sans-serif", 13))
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(180, 180, 180))
            .draw()
            .map_err(err)?;
    }
    Ok(())
}

/// An axis tick: no more decimals than its size needs, no trailing zeros.
fn tick(v: f64) -> String {
    let a = v.abs();
    let s = if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.5}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A categorical axis tick: the category's name at its position (x = i + 1), blank
/// between.
fn category_tick(categories: &[String], v: f64) -> String {
    let i = v.round();
    if (v - i).abs() > 1e-6 || i < 1.0 {
        return String::new();
    }
    categories.get(i as usize - 1).cloned().unwrap_or_default()
}

/// A log axis tick: labelled at 1, 2 and 5 times a power of ten, blank between.
fn log_tick(v: f64) -> String {
    if v <= 0.0 {
        return String::new();
    }
    let mantissa = v / 10f64.powf(v.log10().floor());
    if [1.0, 2.0, 5.0, 10.0]
        .iter()
        .any(|m| (mantissa - m).abs() < 0.01)
    {
        tick(v)
    } else {
        String::new()
    }
}

/// A square matrix of figures (row: source, column: target), drawn as a heatmap:
/// `netmeter mesh --plot`. An empty cell (the test failed) is grey and says "error".
#[derive(Debug, Clone, PartialEq)]
pub struct Heatmap {
    pub title: String,
    pub labels: Vec<String>,
    /// `values[row][col]`; the diagonal and failed pairs are `None`.
    pub values: Vec<Vec<Option<f64>>>,
    /// How each cell's number is written, e.g. `"{} Mbit/s"` → the value and unit.
    pub unit: String,
}

/// Cell colour: white (lowest) to the palette's blue (highest).
fn heat(v: f64, lo: f64, hi: f64) -> RGBColor {
    let t = if hi > lo { (v - lo) / (hi - lo) } else { 1.0 };
    let t = t.clamp(0.0, 1.0);
    let mix = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * t).round() as u8;
    RGBColor(mix(235, 0), mix(243, 90), mix(250, 160))
}

/// The heatmap as one SVG document (`png`: PNG bytes instead, see [`render_png`]).
pub fn render_heatmap(h: &Heatmap, png_out: bool) -> Result<Vec<u8>, DrawError> {
    font()?;
    let n = h.labels.len().max(1) as u32;
    let cell = 110u32;
    let (w, ht) = (160 + n * cell + 20, 80 + n * cell + 20);
    if png_out {
        let mut rgb = vec![0u8; w as usize * ht as usize * 3];
        {
            let backend = BitMapBackend::<plotters::backend::RGBPixel>::with_buffer_and_format(
                &mut rgb,
                (w, ht),
            )
            .map_err(err)?;
            let root = backend.into_drawing_area();
            draw_heatmap(&root, h, cell)?;
            root.present().map_err(err)?;
        }
        let mut out = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut out, w, ht);
            enc.set_color(png::ColorType::Rgb);
            enc.set_depth(png::BitDepth::Eight);
            let mut writer = enc.write_header().map_err(err)?;
            writer.write_image_data(&rgb).map_err(err)?;
        }
        return Ok(out);
    }
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, (w, ht)).into_drawing_area();
        draw_heatmap(&root, h, cell)?;
        root.present().map_err(err)?;
    }
    Ok(s.into_bytes())
}

fn draw_heatmap<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    h: &Heatmap,
    cell: u32,
) -> Result<(), DrawError> {
    root.fill(&WHITE).map_err(err)?;
    let text = |size: u32| ("sans-serif", size).into_font().color(&BLACK);
    root.draw(&Text::new(h.title.clone(), (10, 10), text(18)))
        .map_err(err)?;
    root.draw(&Text::new("source ↓  target →", (10, 50), text(12)))
        .map_err(err)?;
    let vals: Vec<f64> = h.values.iter().flatten().flatten().copied().collect();
    let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (x0, y0, c) = (160i32, 80i32, cell as i32);
    let short = |s: &str| s.chars().take(16).collect::<String>();
    for (i, l) in h.labels.iter().enumerate() {
        let i = i as i32;
        root.draw(&Text::new(short(l), (x0 + i * c + 4, y0 - 18), text(12)))
            .map_err(err)?;
        root.draw(&Text::new(short(l), (10, y0 + i * c + c / 2 - 6), text(12)))
            .map_err(err)?;
    }
    for (r, row) in h.values.iter().enumerate() {
        for (col, v) in row.iter().enumerate() {
            let (x, y) = (x0 + col as i32 * c, y0 + r as i32 * c);
            let (fill, label) = match v {
                _ if r == col => (RGBColor(255, 255, 255), String::new()),
                Some(v) => (heat(*v, lo, hi), h.unit.replace("{}", &format!("{v:.3}"))),
                None => (RGBColor(190, 190, 190), "error".to_string()),
            };
            root.draw(&Rectangle::new(
                [(x, y), (x + c - 2, y + c - 2)],
                fill.filled(),
            ))
            .map_err(err)?;
            let dark = matches!(v, Some(v) if r != col && heat(*v, lo, hi).0 < 120);
            let color = if dark { WHITE } else { BLACK };
            root.draw(&Text::new(
                label,
                (x + 6, y + c / 2 - 6),
                ("sans-serif", 12).into_font().color(&color),
            ))
            .map_err(err)?;
        }
    }
    Ok(())
}
