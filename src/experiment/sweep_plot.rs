//! The charts of a sweep: each figure the table shows (`--figure`, else the test
//! type's: [`super::figures::default_keys`]) against the first swept option's values,
//! one line per value of the second, error bars (the confidence interval of the mean)
//! at repeated points, one chart per figure and combination of any further swept
//! options. Drawn by `netmeter sweep ... --plot FILE` at the end of the sweep
//! and by `netmeter plot SWEEP.json -o FILE` from its `-J` document. Pure apart from
//! [`sweep_charts_of`], which reads files.

use super::grid::{PROTO, Swept, grid};
use super::repeat::FigureStats;
use crate::report::plot::{self, Axis, Chart, Series, Shape};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One figure of one grid point: what a chart draws.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Flag → value, e.g. `{"-P": "2", "-l": "64K"}`.
    pub settings: BTreeMap<String, String>,
    /// The figure's key (`receiver_bits_per_second`).
    pub key: String,
    pub label: String,
    /// The figure's unit ("bits/s", "%", "ms", "1/s").
    pub unit: String,
    pub mean: f64,
    /// The confidence interval of the mean, when the point was repeated.
    pub ci: Option<Ci>,
}

/// A confidence interval: its level (0.95) and bounds.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct Ci {
    pub level: f64,
    pub low: f64,
    pub high: f64,
}

/// A point's cells from its statistics: one per figure of `keys` it has, in their order.
pub fn cells(
    settings: &BTreeMap<String, String>,
    st: &[FigureStats],
    keys: &[String],
) -> Vec<Cell> {
    keys.iter()
        .filter_map(|k| st.iter().find(|f| &f.key == k))
        .map(|f| Cell {
            settings: settings.clone(),
            key: f.key.clone(),
            label: f.label.clone(),
            unit: f.unit.to_string(),
            mean: f.summary.mean,
            ci: f.ci.as_ref().map(|c| Ci {
                level: c.level,
                low: c.low,
                high: c.high,
            }),
        })
        .collect()
}

/// The parts of a sweep's `-J` document the chart needs.
#[derive(Deserialize)]
struct Doc {
    netmeter_sweep: Info,
    points: Vec<DocPoint>,
}

#[derive(Deserialize)]
struct Info {
    swept: Vec<Swept>,
    /// The figures the sweep showed (`--figure`, or the test type's); absent in
    /// documents of older versions, which showed the first figure only.
    #[serde(default)]
    figures: Vec<String>,
}

#[derive(Deserialize)]
struct DocPoint {
    settings: BTreeMap<String, String>,
    statistics: Vec<DocStat>,
}

#[derive(Deserialize)]
struct DocStat {
    #[serde(default)]
    key: String,
    label: String,
    unit: String,
    mean: f64,
    ci: Option<Ci>,
}

/// A sweep read back: its swept options and each completed point's cell.
pub type SweepData = (Vec<Swept>, Vec<Cell>);

/// A sweep document's swept options and cells; `Ok(None)` when `text` is not a sweep
/// document (no `netmeter_sweep` key), an error sentence when it is one but damaged.
pub fn read_document(text: &str) -> Result<Option<SweepData>, String> {
    read_document_from(&mut std::io::Cursor::new(text.as_bytes()))
}

/// [`read_document`] from a reader (rewound first). A first pass that builds nothing
/// looks for the `netmeter_sweep` key; only a sweep document is read, straight into
/// the parts the chart needs (its runs are skipped, never held).
pub fn read_document_from<R: std::io::BufRead + std::io::Seek>(
    r: &mut R,
) -> Result<Option<SweepData>, String> {
    #[derive(Deserialize)]
    struct Probe {
        netmeter_sweep: Option<serde::de::IgnoredAny>,
    }
    let rewind = |r: &mut R| {
        r.seek(std::io::SeekFrom::Start(0))
            .map_err(|e| e.to_string())
    };
    rewind(r)?;
    match serde_json::from_reader::<_, Probe>(r.by_ref()) {
        Ok(Probe {
            netmeter_sweep: Some(_),
        }) => {}
        _ => return Ok(None),
    }
    rewind(r)?;
    let doc: Doc = serde_json::from_reader(r.by_ref())
        .map_err(|e| format!("it is a netmeter sweep document but not a whole one: {e}"))?;
    if doc.netmeter_sweep.swept.is_empty() {
        return Err("it is a netmeter sweep document with no swept option".to_string());
    }
    let mut keys = doc.netmeter_sweep.figures;
    if keys.is_empty() {
        let first: Vec<&str> = doc
            .points
            .iter()
            .flat_map(|p| p.statistics.iter().map(|f| f.key.as_str()))
            .collect();
        keys = super::figures::default_keys(&first);
    }
    let cells = doc
        .points
        .into_iter()
        .flat_map(|p| {
            let settings = p.settings;
            let mut stats = p.statistics;
            // In `keys`' order, as the sweep showed them.
            stats.sort_by_key(|f| keys.iter().position(|k| k == &f.key));
            stats
                .into_iter()
                .filter(|f| keys.contains(&f.key))
                .map(move |f| Cell {
                    settings: settings.clone(),
                    key: f.key,
                    label: f.label,
                    unit: f.unit,
                    mean: f.mean,
                    ci: f.ci,
                })
        })
        .collect();
    Ok(Some((doc.netmeter_sweep.swept, cells)))
}

/// What a swept option is, for the axis and the legend.
fn describe(flag: &str) -> &'static str {
    match flag {
        "-P" => "parallel streams",
        "-l" => "buffer length",
        "-b" => "target bitrate",
        "-w" => "socket buffer",
        "-C" => "congestion control",
        PROTO => "protocol",
        _ => "",
    }
}

/// A series' or a title's name for one setting: `-l 64K`, or just `udp`.
fn setting_name(flag: &str, value: &str) -> String {
    if flag == PROTO {
        value.to_string()
    } else {
        format!("{flag} {value}")
    }
}

/// The figures among `cells`, in order of first appearance: (key, label).
fn figure_keys(cells: &[Cell]) -> Vec<(&str, &str)> {
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for c in cells {
        if !keys.iter().any(|k| k.0 == c.key) {
            keys.push((&c.key, &c.label));
        }
    }
    keys
}

/// The charts: for each figure, one per combination of the third and further swept
/// options (one in all for one or two). Points that did not complete (an interrupted
/// sweep) are gaps.
pub fn charts(swept: &[Swept], cells: &[Cell]) -> Vec<Chart> {
    figure_keys(cells)
        .into_iter()
        .flat_map(|(key, _)| {
            let of_key: Vec<Cell> = cells.iter().filter(|c| c.key == key).cloned().collect();
            charts_of_one(swept, &of_key)
        })
        .collect()
}

/// The charts of one figure's cells.
fn charts_of_one(swept: &[Swept], cells: &[Cell]) -> Vec<Chart> {
    let (Some(rows), Some(first)) = (swept.first(), cells.first()) else {
        return Vec::new();
    };
    let lines = swept.get(1);
    let line_values: Vec<Option<&String>> =
        lines.map_or(vec![None], |l| l.values.iter().map(Some).collect());
    let rates = cells.iter().all(|c| c.unit == "bits/s");
    let top = cells
        .iter()
        .map(|c| c.ci.map_or(c.mean, |ci| ci.high.max(c.mean)))
        .fold(0.0f64, f64::max);
    let (scale, unit) = if rates {
        plot::rate_unit(top)
    } else {
        (
            1.0,
            if first.unit == "1/s" {
                "/s"
            } else {
                &first.unit
            },
        )
    };
    let level = cells.iter().find_map(|c| c.ci.map(|ci| ci.level));
    let mut out = Vec::new();
    for other in grid(swept.get(2..).unwrap_or(&[])) {
        let mut series = Vec::new();
        for lv in &line_values {
            let mut points = Vec::new();
            let mut bars = Vec::new();
            for (i, rv) in rows.values.iter().enumerate() {
                let at = |c: &&Cell| {
                    c.settings.get(&rows.flag) == Some(rv)
                        && lines.is_none_or(|l| c.settings.get(&l.flag) == *lv)
                        && other.iter().all(|(f, v)| c.settings.get(f) == Some(v))
                };
                let Some(c) = cells.iter().find(at) else {
                    continue;
                };
                let x = (i + 1) as f64;
                points.push((x, c.mean / scale));
                if let Some(ci) = c.ci {
                    bars.push((x, ci.low / scale, ci.high / scale));
                }
            }
            if points.is_empty() {
                continue;
            }
            let name = match (lines, lv) {
                (Some(l), Some(v)) => setting_name(&l.flag, v),
                _ => String::new(),
            };
            // A dot per point (the x axis is categorical); bars where repeated.
            series.push(Series {
                name,
                shape: Shape::LineWithErrors(bars),
                points,
            });
        }
        if series.is_empty() {
            continue;
        }
        let mut title = format!("{} by {}", first.label, rows.flag);
        if let Some(l) = lines {
            title.push_str(&format!(" and {}", l.flag));
        }
        if !other.is_empty() {
            let o: Vec<String> = other.iter().map(|(f, v)| setting_name(f, v)).collect();
            title.push_str(&format!(" ({})", o.join(", ")));
        }
        if let Some(l) = level {
            title.push_str(&format!(" — bars: {:.0} % confidence interval", l * 100.0));
        }
        let what = describe(&rows.flag);
        let x_label = if what.is_empty() {
            rows.flag.clone()
        } else {
            format!("{} ({what})", rows.flag)
        };
        out.push(Chart {
            kind: "sweep",
            title,
            x: Axis {
                label: x_label,
                log: false,
                categories: rows.values.clone(),
            },
            y: Axis {
                label: format!("{} ({unit})", first.label),
                log: false,
                categories: Vec::new(),
            },
            series,
            markers: Vec::new(),
        });
    }
    out
}

/// A file name for a chart: it must say its format (.svg or .png).
pub fn plot_file(p: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(p);
    if p.is_empty() || plot::Format::of(&path).is_none() {
        return Err(format!(
            "--plot {p} needs a file name ending in .svg or .png"
        ));
    }
    Ok(path)
}

/// A sweep's `--plot` file: a chart (.svg, .png) or a page (.html).
pub fn sweep_plot_file(p: &str) -> Result<PathBuf, String> {
    if is_html(Path::new(p)) {
        return Ok(PathBuf::from(p));
    }
    plot_file(p).map_err(|_| format!("--plot {p} needs a file name ending in .svg, .png or .html"))
}

fn is_html(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm"))
}

/// The sweep as one self-contained HTML page: a table of every completed point
/// (section `sweep-table`: its settings, the figure's mean and confidence interval)
/// and the charts inline (section `sweep-plots`). `source` names where it came from.
pub fn html(swept: &[Swept], cells: &[Cell], source: &str) -> Result<String, plot::DrawError> {
    use crate::report::html::esc;
    use std::fmt::Write as _;
    let mut h = String::new();
    let title = format!(
        "netmeter sweep: {}",
        swept
            .iter()
            .map(|s| format!("{} {}", s.flag, s.values.join(",")))
            .collect::<Vec<_>>()
            .join(" ")
    );
    crate::report::html::head(&mut h, &title);
    let _ = writeln!(
        h,
        "<p class=\"muted\">Made by netmeter {} from {}: {} points.</p>",
        env!("CARGO_PKG_VERSION"),
        esc(source),
        {
            let mut seen: Vec<&BTreeMap<String, String>> = Vec::new();
            for c in cells {
                if !seen.contains(&&c.settings) {
                    seen.push(&c.settings);
                }
            }
            seen.len()
        }
    );
    let keys = figure_keys(cells);
    h.push_str(
        "<section id=\"sweep-table\">\n<h2>Points</h2>\n<div class=\"scroll\"><table>\n<tr>",
    );
    for s in swept {
        let _ = write!(h, "<th>{}</th>", esc(&s.flag));
    }
    for (_, label) in &keys {
        let _ = write!(h, "<th>{}</th><th>confidence interval</th>", esc(label));
    }
    h.push_str("</tr>\n");
    // A row per point, in the order the points ran.
    let mut points: Vec<&BTreeMap<String, String>> = Vec::new();
    for c in cells {
        if !points.contains(&&c.settings) {
            points.push(&c.settings);
        }
    }
    for settings in points {
        h.push_str("<tr>");
        for s in swept {
            let v = settings.get(&s.flag).map_or("", String::as_str);
            let _ = write!(h, "<td>{}</td>", esc(v));
        }
        for (key, _) in &keys {
            let Some(c) = cells
                .iter()
                .find(|c| &c.settings == settings && c.key == *key)
            else {
                h.push_str("<td class=\"num\">-</td><td class=\"num\">-</td>");
                continue;
            };
            let fmt = |v: f64| super::compare::format_value(v, &c.unit);
            let ci = c.ci.map_or("single run".to_string(), |ci| {
                format!(
                    "{:.0} %: {} .. {}",
                    ci.level * 100.0,
                    fmt(ci.low),
                    fmt(ci.high)
                )
            });
            let _ = write!(
                h,
                "<td class=\"num\">{}</td><td class=\"num\">{}</td>",
                esc(&fmt(c.mean)),
                esc(&ci)
            );
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table></div>\n</section>\n<section id=\"sweep-plots\">\n<h2>Plots</h2>\n");
    crate::report::html::figures(&mut h, &charts(swept, cells))?;
    h.push_str("</section>\n</body>\n</html>\n");
    Ok(h)
}

/// `netmeter report` inputs that are a sweep document: its page; `Ok(None)` when no
/// input is one.
pub fn sweep_page_of(paths: &[PathBuf]) -> Result<Option<String>, String> {
    let Some((path, (swept, cells))) = sweep_of(paths)? else {
        return Ok(None);
    };
    html(&swept, &cells, &path.display().to_string())
        .map(Some)
        .map_err(|e| format!("cannot draw the charts: {e}"))
}

/// `netmeter plot` inputs that are a sweep document: its charts; `Ok(None)` when no
/// input is one (or one does not read: the ordinary loader says why).
pub fn sweep_charts_of(paths: &[PathBuf]) -> Result<Option<Vec<Chart>>, String> {
    let Some((path, (swept, cells))) = sweep_of(paths)? else {
        return Ok(None);
    };
    let charts = charts(&swept, &cells);
    if charts.is_empty() {
        return Err(format!(
            "nothing to plot in {}: the sweep completed no point",
            path.display()
        ));
    }
    Ok(Some(charts))
}

/// The sweep document among `paths`, read; an error when it is not the only input.
fn sweep_of(paths: &[PathBuf]) -> Result<Option<(&Path, SweepData)>, String> {
    let mut found = None;
    for p in paths {
        // One that does not open (or is over the size limit) is the ordinary
        // loader's to report.
        let Ok(mut r) = crate::report::input::open_result(p) else {
            continue;
        };
        let doc = read_document_from(&mut r).map_err(|e| format!("{}: {e}", p.display()))?;
        if let Some(d) = doc {
            if paths.len() > 1 {
                return Err(format!(
                    "{} is a sweep document: plot it alone (its runs share one chart)",
                    p.display()
                ));
            }
            found = Some((p.as_path(), d));
        }
    }
    Ok(found)
}

/// Draw a sweep's charts into `path`: an SVG or PNG, or an HTML page ([`html`]).
pub fn write(swept: &[Swept], cells: &[Cell], path: &Path) -> Result<(), plot::PlotError> {
    let charts = charts(swept, cells);
    if is_html(path) {
        let page =
            html(swept, cells, "this sweep").map_err(|e| plot::PlotError::Draw(e.to_string()))?;
        return plot::write_whole(path, page.as_bytes()).map_err(|err| plot::PlotError::Write {
            path: path.to_path_buf(),
            err,
        });
    }
    if charts.is_empty() {
        return Err(plot::PlotError::Draw(
            "the sweep completed no point".to_string(),
        ));
    }
    plot::write_charts(&charts, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn swept(flag: &str, values: &[&str]) -> Swept {
        Swept {
            flag: flag.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    fn at(settings: &[(&str, &str)], mean: f64, ci: Option<(f64, f64)>) -> Cell {
        Cell {
            settings: settings
                .iter()
                .map(|(f, v)| (f.to_string(), v.to_string()))
                .collect(),
            key: "receiver_bits_per_second".into(),
            label: "Receiver throughput".into(),
            unit: "bits/s".into(),
            mean,
            ci: ci.map(|(low, high)| Ci {
                level: 0.95,
                low,
                high,
            }),
        }
    }

    #[test]
    fn one_line_per_second_option_value_x_by_the_first() {
        let sw = [swept("-P", &["1", "2", "4"]), swept(PROTO, &["tcp", "udp"])];
        let cells = vec![
            at(&[("-P", "1"), (PROTO, "tcp")], 1e9, None),
            at(&[("-P", "1"), (PROTO, "udp")], 0.5e9, None),
            at(&[("-P", "2"), (PROTO, "tcp")], 2e9, None),
            // -P 2 over UDP and -P 4 over TCP did not complete.
            at(&[("-P", "4"), (PROTO, "udp")], 2.5e9, None),
        ];
        let c = charts(&sw, &cells);
        assert_eq!(c.len(), 1);
        let c = &c[0];
        assert_eq!(c.kind, "sweep");
        assert_eq!(c.title, "Receiver throughput by -P and --proto");
        assert_eq!(c.x.label, "-P (parallel streams)");
        assert_eq!(c.x.categories, vec!["1", "2", "4"]);
        assert_eq!(c.y.label, "Receiver throughput (Gbit/s)");
        assert_eq!(c.series.len(), 2);
        assert_eq!(c.series[0].name, "tcp");
        assert_eq!(c.series[0].points, vec![(1.0, 1.0), (2.0, 2.0)]);
        assert_eq!(c.series[1].name, "udp");
        assert_eq!(c.series[1].points, vec![(1.0, 0.5), (3.0, 2.5)]);
        // Single runs: dots and a line, no bars.
        assert_eq!(c.series[0].shape, Shape::LineWithErrors(Vec::new()));
    }

    #[test]
    fn repeated_points_get_error_bars_and_further_options_their_own_chart() {
        let sw = [
            swept("-l", &["8K", "64K"]),
            swept("-b", &["100M"]),
            swept("-C", &["cubic", "reno"]),
        ];
        let cells = vec![
            at(
                &[("-l", "8K"), ("-b", "100M"), ("-C", "cubic")],
                90e6,
                Some((85e6, 95e6)),
            ),
            at(
                &[("-l", "64K"), ("-b", "100M"), ("-C", "cubic")],
                99e6,
                Some((98e6, 100e6)),
            ),
            at(
                &[("-l", "8K"), ("-b", "100M"), ("-C", "reno")],
                80e6,
                Some((70e6, 90e6)),
            ),
        ];
        let c = charts(&sw, &cells);
        assert_eq!(c.len(), 2);
        assert_eq!(
            c[0].title,
            "Receiver throughput by -l and -b (-C cubic) — bars: 95 % confidence interval"
        );
        assert!(c[1].title.contains("(-C reno)"));
        assert_eq!(c[0].y.label, "Receiver throughput (Mbit/s)");
        assert_eq!(c[0].series[0].name, "-b 100M");
        assert_eq!(
            c[0].series[0].shape,
            Shape::LineWithErrors(vec![(1.0, 85.0, 95.0), (2.0, 98.0, 100.0)])
        );
        assert_eq!(c[1].series[0].points, vec![(1.0, 80.0)]);
        assert!(charts(&sw, &[]).is_empty());
    }

    #[test]
    fn a_sweep_document_reads_back() {
        let doc = r#"{"netmeter_sweep": {"swept": [{"flag": "-P", "values": ["1", "2"]}],
            "grid": 2, "completed": 2, "ended": "all points"},
            "points": [
              {"settings": {"-P": "1"}, "runs": [], "statistics": [
                {"key": "receiver_bits_per_second", "label": "Receiver throughput",
                 "unit": "bits/s", "better": "higher", "n": 3, "mean": 1e9, "stdev": 1e7,
                 "min": 0.99e9, "max": 1.01e9,
                 "ci": {"level": 0.9, "low": 0.98e9, "high": 1.02e9, "half_width": 2e7}}]},
              {"settings": {"-P": "2"}, "runs": [], "statistics": []}]}"#;
        let (sw, cells) = read_document(doc).unwrap().unwrap();
        assert_eq!(sw, vec![swept("-P", &["1", "2"])]);
        assert_eq!(
            cells,
            vec![Cell {
                ci: Some(Ci {
                    level: 0.9,
                    low: 0.98e9,
                    high: 1.02e9
                }),
                ..at(&[("-P", "1")], 1e9, None)
            }]
        );
        let c = charts(&sw, &cells);
        assert!(
            c[0].title.ends_with("bars: 90 % confidence interval"),
            "{}",
            c[0].title
        );
        assert_eq!(c[0].series[0].name, "", "one line: no legend");
        // Not a sweep document, or a damaged one.
        assert_eq!(read_document(r#"{"start": {}}"#), Ok(None));
        assert_eq!(read_document("not json"), Ok(None));
        let e = read_document(r#"{"netmeter_sweep": {"swept": []}, "points": []}"#);
        assert!(e.unwrap_err().contains("no swept option"));
        let e = read_document(r#"{"netmeter_sweep": 3}"#).unwrap_err();
        assert!(
            e.starts_with("it is a netmeter sweep document but not a whole one"),
            "{e}"
        );
    }

    #[test]
    fn the_page_tables_every_point_and_inlines_the_chart() {
        let sw = [swept("-P", &["1", "2"]), swept(PROTO, &["tcp", "udp"])];
        let cells = vec![
            at(&[("-P", "1"), (PROTO, "tcp")], 1e9, Some((0.9e9, 1.1e9))),
            at(&[("-P", "2"), (PROTO, "udp")], 2e9, None),
        ];
        let h = html(&sw, &cells, "s<1>.json").unwrap();
        assert!(h.starts_with("<!DOCTYPE html>"));
        assert!(h.contains("<title>netmeter sweep: -P 1,2 --proto tcp,udp</title>"));
        assert!(h.contains("from s&lt;1&gt;.json: 2 points"), "escaped");
        assert!(h.contains("<tr><th>-P</th><th>--proto</th><th>Receiver throughput</th>"));
        assert!(
            h.contains(
                "<tr><td>1</td><td>tcp</td><td class=\"num\">1.00 Gbits/sec</td>\
             <td class=\"num\">95 %: 900.00 Mbits/sec .. 1.10 Gbits/sec</td></tr>"
            ),
            "{h}"
        );
        assert!(h.contains("<td class=\"num\">single run</td>"));
        assert_eq!(h.matches("<svg").count(), 1);
        assert!(h.contains("data-kind=\"sweep\""));
        assert!(h.trim_end().ends_with("</html>"));
    }

    #[test]
    fn the_chart_draws_categories_and_bars() {
        let sw = [swept("-P", &["1", "2", "4"])];
        let cells = vec![
            at(&[("-P", "1")], 1e9, Some((0.9e9, 1.1e9))),
            at(&[("-P", "2")], 2e9, Some((1.9e9, 2.1e9))),
            at(&[("-P", "4")], 3e9, Some((2.5e9, 3.5e9))),
        ];
        let svg = plot::render_svg(&charts(&sw, &cells)).unwrap();
        let texts: Vec<&str> = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| t.split_once('>').map(|x| x.1))
            .filter_map(|t| t.split_once("</text>").map(|x| x.0.trim()))
            .collect();
        // The x ticks (the last texts, at 0.5, 1, ..., 3.5): the categories at
        // their positions (-P 4 at 3), blank between.
        assert!(
            texts.ends_with(&["", "1", "", "2", "", "4", ""]),
            "{texts:?}"
        );
        // A dot per point.
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(
            plot_file("x.jpg")
                .unwrap_err()
                .contains("ending in .svg or .png")
        );
        assert_eq!(sweep_plot_file("p.HTML").unwrap(), PathBuf::from("p.HTML"));
        assert!(
            sweep_plot_file("p.pdf")
                .unwrap_err()
                .contains(".svg, .png or .html")
        );
        assert!(plot_file("").is_err());
        assert_eq!(plot_file("a.PNG").unwrap(), PathBuf::from("a.PNG"));
    }

    #[test]
    fn a_chart_per_figure_and_the_documents_figures() {
        let sw = [swept("-b", &["1M", "2M"])];
        let loss = |settings: &[(&str, &str)], v: f64| Cell {
            key: "lost_percent".into(),
            label: "Loss".into(),
            unit: "%".into(),
            ..at(settings, v, None)
        };
        let cells = vec![
            at(&[("-b", "1M")], 1e6, None),
            loss(&[("-b", "1M")], 0.5),
            at(&[("-b", "2M")], 2e6, None),
            loss(&[("-b", "2M")], 1.5),
        ];
        let c = charts(&sw, &cells);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].title, "Receiver throughput by -b");
        assert_eq!(c[1].title, "Loss by -b");
        assert_eq!(c[1].y.label, "Loss (%)");
        assert_eq!(c[1].series[0].points, vec![(1.0, 0.5), (2.0, 1.5)]);
        let h = html(&sw, &cells, "s.json").unwrap();
        assert!(h.contains("from s.json: 2 points"), "{h}");
        assert!(
            h.contains("<th>Receiver throughput</th><th>confidence interval</th><th>Loss</th>")
        );
        assert_eq!(h.matches("<svg").count(), 2);
        // A document names the figures it showed; an older one gets the test type's.
        let stat = |key: &str, label: &str, unit: &str, mean: f64| {
            format!(
                r#"{{"key": "{key}", "label": "{label}", "unit": "{unit}", "better": "lower",
                "n": 1, "mean": {mean}, "stdev": 0, "min": {mean}, "max": {mean}, "ci": null}}"#
            )
        };
        let stats = [
            stat(
                "receiver_bits_per_second",
                "Receiver throughput",
                "bits/s",
                1e6,
            ),
            stat("lost_percent", "Loss", "%", 0.5),
            stat("jitter_ms", "Jitter", "ms", 0.1),
        ]
        .join(",");
        let doc = |figures: &str| {
            format!(
                r#"{{"netmeter_sweep": {{"swept": [{{"flag": "-b", "values": ["1M"]}}]{figures}}},
                "points": [{{"settings": {{"-b": "1M"}}, "runs": [], "statistics": [{stats}]}}]}}"#
            )
        };
        let (_, cells) = read_document(&doc(r#", "figures": ["jitter_ms"]"#))
            .unwrap()
            .unwrap();
        let keys: Vec<&str> = cells.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys, ["jitter_ms"]);
        let (_, cells) = read_document(&doc("")).unwrap().unwrap();
        let keys: Vec<&str> = cells.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(
            keys,
            ["receiver_bits_per_second", "lost_percent", "jitter_ms"]
        );
    }
}
