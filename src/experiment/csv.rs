//! CSV of an experiment: a sweep's points or a repetition's runs (`netmeter sweep
//! --csv`, `netmeter csv SWEEP.json|REPEAT.json`). One row per figure of each run and
//! one per figure of each point's summary over its runs, under stable column names
//! (docs/csv.md, "Sweeps and repetitions"). Long form, a row per figure, so that the
//! columns stay the same whatever the test type measures: a UDP sweep adds loss rows,
//! not loss columns. Pure: [`Point`]s in, text out; [`read_document`] reads a saved
//! `-J` document of either kind.

use super::figures;
use super::repeat::FigureStats;
use super::stats::{ConfInterval, Summary};
use crate::report::Report;
use crate::report::csv::{num, text};
use serde::Deserialize;
use std::collections::BTreeMap;

/// One column. The names (and their order in [`Field::ALL`]) are stable: add at the
/// end, never rename.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Kind,
    Point,
    Run,
    Parallel,
    Length,
    Bitrate,
    Window,
    Congestion,
    Protocol,
    Figure,
    Unit,
    Value,
    N,
    Stdev,
    Min,
    Max,
    CiLevel,
    CiLow,
    CiHigh,
}

impl Field {
    /// Every column, in the default order.
    pub const ALL: [Field; 19] = [
        Field::Kind,
        Field::Point,
        Field::Run,
        Field::Parallel,
        Field::Length,
        Field::Bitrate,
        Field::Window,
        Field::Congestion,
        Field::Protocol,
        Field::Figure,
        Field::Unit,
        Field::Value,
        Field::N,
        Field::Stdev,
        Field::Min,
        Field::Max,
        Field::CiLevel,
        Field::CiLow,
        Field::CiHigh,
    ];

    /// The header name.
    pub fn name(self) -> &'static str {
        match self {
            Field::Kind => "kind",
            Field::Point => "point",
            Field::Run => "run",
            Field::Parallel => "parallel",
            Field::Length => "length",
            Field::Bitrate => "bitrate",
            Field::Window => "window",
            Field::Congestion => "congestion",
            Field::Protocol => "protocol",
            Field::Figure => "figure",
            Field::Unit => "unit",
            Field::Value => "value",
            Field::N => "n",
            Field::Stdev => "stdev",
            Field::Min => "min",
            Field::Max => "max",
            Field::CiLevel => "ci_level",
            Field::CiLow => "ci_low",
            Field::CiHigh => "ci_high",
        }
    }

    /// The swept option a settings column holds (`-P` for `parallel`).
    fn swept_flag(self) -> Option<&'static str> {
        Some(match self {
            Field::Parallel => "-P",
            Field::Length => "-l",
            Field::Bitrate => "-b",
            Field::Window => "-w",
            Field::Congestion => "-C",
            Field::Protocol => super::grid::PROTO,
            _ => return None,
        })
    }
}

/// The columns to write, in order (`--fields a,b,c`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns(Vec<Field>);

impl Default for Columns {
    fn default() -> Columns {
        Columns(Field::ALL.to_vec())
    }
}

impl Columns {
    /// A comma-separated list of column names; an unknown or repeated name is refused
    /// in one sentence that lists the valid names.
    pub fn parse(list: &str) -> Result<Columns, String> {
        crate::report::csv::parse_fields(
            list,
            &Field::ALL,
            Field::name,
            " for a sweep or repetition",
        )
        .map(Columns)
    }

    fn header(&self) -> String {
        let names: Vec<&str> = self.0.iter().map(|f| f.name()).collect();
        format!("{}\n", names.join(","))
    }
}

/// One figure summarized over a point's runs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Stat {
    pub key: String,
    pub unit: String,
    #[serde(flatten)]
    pub summary: Summary,
    pub ci: Option<ConfInterval>,
}

/// One figure of one run: (key, unit, value).
pub type RunFigure = (String, String, f64);

/// One grid point (a repetition: the one point, without settings).
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Swept flag → value as given (`{"-P": "2"}`).
    pub settings: BTreeMap<String, String>,
    /// Each run's figures ([`figures::summary_figures`]).
    pub runs: Vec<Vec<RunFigure>>,
    pub statistics: Vec<Stat>,
}

impl Point {
    /// A point from its runs and their statistics.
    pub fn new(settings: BTreeMap<String, String>, runs: &[Report], st: &[FigureStats]) -> Point {
        Point {
            settings,
            runs: runs.iter().map(run_figures).collect(),
            statistics: st
                .iter()
                .map(|f| Stat {
                    key: f.key.clone(),
                    unit: f.unit.to_string(),
                    summary: f.summary,
                    ci: f.ci,
                })
                .collect(),
        }
    }
}

fn run_figures(r: &Report) -> Vec<RunFigure> {
    figures::summary_figures(r)
        .into_iter()
        .map(|f| (f.key, f.unit.to_string(), f.value))
        .collect()
}

/// One row before it is written.
struct Row<'a> {
    summary: bool,
    point: usize,
    run: Option<usize>,
    settings: &'a BTreeMap<String, String>,
    key: &'a str,
    unit: &'a str,
    value: f64,
    stats: Option<(&'a Summary, Option<&'a ConfInterval>)>,
}

fn render(out: &mut String, cols: &Columns, r: &Row) {
    for (i, f) in cols.0.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let st = r.stats.map(|s| s.0);
        let ci = r.stats.and_then(|s| s.1);
        match f {
            Field::Kind => out.push_str(if r.summary { "summary" } else { "run" }),
            Field::Point => out.push_str(&r.point.to_string()),
            Field::Run => {
                if let Some(k) = r.run {
                    out.push_str(&k.to_string());
                }
            }
            Field::Figure => text(out, r.key),
            Field::Unit => text(out, r.unit),
            Field::Value => num(out, r.value),
            Field::N => {
                if let Some(s) = st {
                    out.push_str(&s.n.to_string());
                }
            }
            Field::Stdev => st.into_iter().for_each(|s| num(out, s.stdev)),
            Field::Min => st.into_iter().for_each(|s| num(out, s.min)),
            Field::Max => st.into_iter().for_each(|s| num(out, s.max)),
            Field::CiLevel => ci.into_iter().for_each(|c| num(out, c.level)),
            Field::CiLow => ci.into_iter().for_each(|c| num(out, c.low)),
            Field::CiHigh => ci.into_iter().for_each(|c| num(out, c.high)),
            settings => {
                let flag = settings.swept_flag().unwrap_or_default();
                text(out, r.settings.get(flag).map_or("", String::as_str));
            }
        }
    }
    out.push('\n');
}

/// The header, then for each point (numbered from 1 in grid order) every run's
/// figures (`kind` `run`), then the point's summaries (`kind` `summary`).
pub fn rows(points: &[Point], cols: &Columns) -> String {
    let mut out = cols.header();
    for (p, point) in points.iter().enumerate() {
        for (k, run) in point.runs.iter().enumerate() {
            for (key, unit, value) in run {
                let row = Row {
                    summary: false,
                    point: p + 1,
                    run: Some(k + 1),
                    settings: &point.settings,
                    key,
                    unit,
                    value: *value,
                    stats: None,
                };
                render(&mut out, cols, &row);
            }
        }
        for s in &point.statistics {
            let row = Row {
                summary: true,
                point: p + 1,
                run: None,
                settings: &point.settings,
                key: &s.key,
                unit: &s.unit,
                value: s.summary.mean,
                stats: Some((&s.summary, s.ci.as_ref())),
            };
            render(&mut out, cols, &row);
        }
    }
    out
}

#[derive(Deserialize)]
struct DocPoint {
    #[serde(default)]
    settings: BTreeMap<String, String>,
    runs: Vec<serde_json::Value>,
    statistics: Vec<Stat>,
}

/// A sweep's (`netmeter_sweep`) or a repetition's (`netmeter_repeat`) `-J` document
/// as points; `Ok(None)` when `text` is neither, an error sentence when it is one but
/// damaged.
pub fn read_document(text: &str) -> Result<Option<Vec<Point>>, String> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
        return Ok(None);
    };
    let (what, points) = if v.get("netmeter_sweep").is_some() {
        let points = v.get("points").cloned().unwrap_or_default();
        let points: Vec<DocPoint> = serde_json::from_value(points)
            .map_err(|e| format!("it is a netmeter sweep document but not a whole one: {e}"))?;
        ("sweep", points)
    } else if v.get("netmeter_repeat").is_some() {
        let point: DocPoint = serde_json::from_value(v).map_err(|e| {
            format!("it is a netmeter repetition document but not a whole one: {e}")
        })?;
        ("repetition", vec![point])
    } else {
        return Ok(None);
    };
    points
        .into_iter()
        .enumerate()
        .map(|(p, d)| {
            let runs = d
                .runs
                .iter()
                .enumerate()
                .map(|(k, r)| {
                    crate::report::input::parse_result(&r.to_string())
                        .map(|r| run_figures(&r))
                        .map_err(|e| format!("the {what}'s point {} run {}: {e}", p + 1, k + 1))
                })
                .collect::<Result<Vec<_>, String>>()?;
            Ok(Point {
                settings: d.settings,
                runs,
                statistics: d.statistics,
            })
        })
        .collect::<Result<Vec<_>, String>>()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::repeat;

    fn tcp(bps: f64) -> Report {
        let path = format!(
            "{}/src/report/testdata/tcp.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut r = Report::from_document(&std::fs::read_to_string(path).unwrap()).unwrap();
        if let Some(s) = r.end.sum_received.as_mut() {
            s.bits_per_second = bps;
        }
        r
    }

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_row_per_run_figure_then_per_summary() {
        let runs = [tcp(90e6), tcp(110e6)];
        let st = repeat::statistics(&runs, 0.95);
        let p = Point::new(settings(&[("-P", "2"), ("--proto", "tcp")]), &runs, &st);
        let cols = Columns::parse(
            "kind,point,run,parallel,length,protocol,figure,unit,value,n,min,ci_level",
        )
        .unwrap();
        let csv = rows(&[p.clone(), p], &cols);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "kind,point,run,parallel,length,protocol,figure,unit,value,n,min,ci_level"
        );
        assert_eq!(
            lines[1],
            "run,1,1,2,,tcp,receiver_bits_per_second,bits/s,90000000,,,"
        );
        let figs = st.len();
        assert_eq!(
            lines[figs + 1],
            "run,1,2,2,,tcp,receiver_bits_per_second,bits/s,110000000,,,"
        );
        assert_eq!(
            lines[2 * figs + 1],
            "summary,1,,2,,tcp,receiver_bits_per_second,bits/s,100000000,2,90000000,0.95"
        );
        assert!(lines[3 * figs + 1].starts_with("run,2,1,"), "{csv}");
        assert_eq!(lines.len(), 1 + 2 * 3 * figs);
        // A unit with a slash is no reason to quote; every row has every column.
        assert!(lines.iter().all(|l| l.split(',').count() == 12), "{csv}");
    }

    #[test]
    fn documents_read_back_as_they_were_written() {
        let runs = [tcp(90e6), tcp(110e6)];
        let st = repeat::statistics(&runs, 0.95);
        let doc = serde_json::json!({
            "netmeter_repeat": {"runs": 2, "ended": "all runs"},
            "runs": runs,
            "statistics": st,
        });
        let back = read_document(&doc.to_string()).unwrap().unwrap();
        let live = Point::new(BTreeMap::new(), &runs, &st);
        let cols = Columns::default();
        assert_eq!(rows(&back, &cols), rows(&[live], &cols));
        let sweep = serde_json::json!({
            "netmeter_sweep": {"swept": [{"flag": "-P", "values": ["1", "2"]}]},
            "points": [{"settings": {"-P": "1"}, "runs": runs, "statistics": st}],
        });
        let back = read_document(&sweep.to_string()).unwrap().unwrap();
        assert_eq!(back[0].settings, settings(&[("-P", "1")]));
        // Neither kind: not ours to read; damaged: one sentence.
        assert_eq!(read_document("{\"start\": {}}").unwrap(), None);
        assert_eq!(read_document("not json").unwrap(), None);
        let e = read_document("{\"netmeter_sweep\": {}, \"points\": [{}]}").unwrap_err();
        assert!(
            e.starts_with("it is a netmeter sweep document but not a whole one"),
            "{e}"
        );
        let bad = serde_json::json!({
            "netmeter_repeat": {},
            "runs": [{"start": {}}],
            "statistics": [],
        });
        let e = read_document(&bad.to_string()).unwrap_err();
        assert!(e.starts_with("the repetition's point 1 run 1: "), "{e}");
    }

    #[test]
    fn unknown_columns_are_refused() {
        let e = Columns::parse("kind,speed").unwrap_err();
        assert!(
            e.starts_with("--fields: unknown column 'speed' for a sweep or repetition; the columns are kind,point,run,"),
            "{e}"
        );
        assert!(Columns::parse("kind,kind").is_err());
    }
}
