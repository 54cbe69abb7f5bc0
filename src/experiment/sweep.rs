//! `netmeter sweep`: the client's options, some given as comma-separated lists
//! (`-P 1,2,4 -l 8K,64K`), run as a grid in order, with a progress line per point and
//! an ETA, a table (rows: the first swept option's values, columns: the second's) and
//! one `-J` document holding every run.
//!
//! Every grid point's command line is resolved by the client's own flag parser before
//! the first test runs, so an invalid value in any list fails at once, worded as the
//! client words it. That parser is the caller's ([`ResolvePoint`]: `cli::sweep_cmd`
//! passes the client's), so the sweep imports nothing of `cli`. The grid
//! ([`super::grid`]), the ETA and the table are pure; [`run`] does the tests.
//! With `--repeat N` each point is a series of runs and the table shows the mean ± the
//! confidence interval's half width. The table and the charts show the figures
//! `--figure` names, else the test type's ([`super::figures::default_keys`]);
//! `--csv` writes every figure of every run and point instead ([`super::csv`]).

use super::grid::{PROTO, Settings, Swept, grid};
use super::grid::{point_args, settings_text};
use super::repeat::{self, FigureStats, Plan};
use crate::report::Report;
use crate::{TestConfig, TestError};

use serde::Serialize;
use std::ffi::OsString;
use std::fmt::Write as _;

/// The options a sweep can take a list for: (short, long).
pub const SWEEPABLE: &[(&str, &str)] = &[
    ("-P", "--parallel"),
    ("-l", "--length"),
    ("-b", "--bitrate"),
    ("-w", "--window"),
    ("-C", "--congestion"),
];

/// The user's arguments split into the swept options and everything else.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepArgs {
    pub swept: Vec<Swept>,
    pub rest: Vec<OsString>,
    /// `--plot FILE.svg|FILE.png|FILE.html`: the sweep's chart (or page), drawn at the end.
    pub plot: Option<std::path::PathBuf>,
    /// `--figure a,b`: the figures the table and the charts show (`None`: the test
    /// type's, [`super::figures::default_keys`]).
    pub figures: Option<Vec<String>>,
    /// `--csv [--fields a,b]`: the sweep as CSV ([`super::csv`]) instead of the table.
    pub csv: Option<super::csv::Columns>,
}

/// A sweep-only option's value: `--name VALUE` or `--name=VALUE`; `Ok(None)` when `a`
/// is not `--name`.
fn own_value(
    name: &str,
    a: &OsString,
    it: &mut std::slice::Iter<'_, OsString>,
) -> Result<Option<String>, String> {
    let Some(s) = a.to_str() else {
        return Ok(None);
    };
    if let Some(v) = s.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
        return Ok(Some(v.to_string()));
    }
    if s != name {
        return Ok(None);
    }
    it.next()
        .and_then(|v| v.to_str())
        .map(|v| Some(v.to_string()))
        .ok_or_else(|| format!("{name} needs a value"))
}

/// Which sweepable option `arg` is, and its value if attached (`-P4`, `--parallel=4`).
fn sweepable(arg: &str) -> Option<(&'static str, Option<String>)> {
    if arg == PROTO {
        return Some((PROTO, None));
    }
    if let Some(v) = arg.strip_prefix("--proto=") {
        return Some((PROTO, Some(v.to_string())));
    }
    for &(short, long) in SWEEPABLE {
        if arg == short || arg == long {
            return Some((short, None));
        }
        if let Some(v) = arg.strip_prefix(long).and_then(|r| r.strip_prefix('=')) {
            return Some((short, Some(v.to_string())));
        }
        if let Some(v) = arg.strip_prefix(short).filter(|v| !v.is_empty()) {
            return Some((short, Some(v.to_string())));
        }
    }
    None
}

/// Split the arguments after `sweep`. A sweepable option whose value holds a comma is
/// swept; given once without a comma it is an ordinary option.
pub fn split_args(args: &[OsString]) -> Result<SweepArgs, String> {
    let mut swept: Vec<Swept> = Vec::new();
    let mut rest = Vec::new();
    let mut plot = None;
    let mut figures = None;
    let mut csv = false;
    let mut fields = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if let Some(v) = own_value("--figure", a, &mut it)? {
            figures = Some(super::figures::parse_keys(&v)?);
            continue;
        }
        if let Some(v) = own_value("--fields", a, &mut it)? {
            fields = Some(v);
            continue;
        }
        if a == "--csv" {
            csv = true;
            continue;
        }
        if let Some(p) = a.to_str().and_then(|s| s.strip_prefix("--plot=")) {
            plot = Some(super::sweep_plot::sweep_plot_file(p)?);
            continue;
        }
        if a == "--plot" {
            let p = it.next().and_then(|v| v.to_str()).unwrap_or_default();
            plot = Some(super::sweep_plot::sweep_plot_file(p)?);
            continue;
        }
        let Some((flag, attached)) = a.to_str().and_then(sweepable) else {
            rest.push(a.clone());
            continue;
        };
        let value = match attached {
            Some(v) => v,
            None => it
                .next()
                .and_then(|v| v.to_str())
                .map(str::to_string)
                .ok_or_else(|| format!("{flag} needs a value (a list such as 1,2,4)"))?,
        };
        if flag == PROTO
            && let Some(bad) = value
                .split(',')
                .map(str::trim)
                .find(|v| !PROTOCOLS.contains(v))
        {
            return Err(format!(
                "--proto {value}: '{bad}' is not a protocol (give tcp, udp or tcp,udp)"
            ));
        }
        if !value.contains(',') {
            rest.extend(point_args(flag, &value));
            continue;
        }
        if swept.iter().any(|s| s.flag == flag) {
            return Err(format!("{flag} is swept twice; give one list"));
        }
        let values: Vec<String> = value.split(',').map(|v| v.trim().to_string()).collect();
        if values.iter().any(String::is_empty) {
            return Err(format!("{flag} {value}: an empty value in the list"));
        }
        swept.push(Swept {
            flag: flag.to_string(),
            values,
        });
    }
    let lone_u = rest.iter().any(|a| a == "-u" || a == "--udp");
    if lone_u && swept.iter().any(|s| s.flag == PROTO) {
        return Err("-u and --proto tcp,udp: give one (the list sweeps the protocol)".to_string());
    }
    if swept.is_empty() {
        return Err(
            "netmeter sweep needs at least one list, e.g. -P 1,2,4 or -l 8K,64K,1M".to_string(),
        );
    }
    let csv = match (csv, fields) {
        (false, Some(_)) => {
            return Err("--fields chooses the sweep's CSV columns; use it with --csv".to_string());
        }
        (false, None) => None,
        (true, f) => {
            if rest
                .iter()
                .any(|a| a == "-J" || a == "--json" || a == "--json-stream")
            {
                return Err("--csv and -J/--json-stream cannot be used together".to_string());
            }
            Some(match f {
                Some(f) => super::csv::Columns::parse(&f)?,
                None => super::csv::Columns::default(),
            })
        }
    };
    Ok(SweepArgs {
        swept,
        rest,
        plot,
        figures,
        csv,
    })
}

/// The protocols `--proto` takes.
const PROTOCOLS: &[&str] = &["tcp", "udp"];

/// Why the client's flag parser refused one point's command line.
#[derive(Debug, Clone, PartialEq)]
pub enum PointError {
    /// The parser's sentence (the sweep puts the point's settings before it).
    Usage(String),
    /// A valid command line, but not a client test (`-s`, `--loopback`,
    /// `--find-max-rate`).
    NotClient,
}

/// The client's flag parser, as the sweep uses it: one point's whole command line
/// (program name first) → its test configuration and, with `--repeat`, its runs' plan.
/// (`C` is a parameter only so the tests can resolve without building configurations.)
pub type ResolvePoint<'a, C = TestConfig> =
    &'a dyn Fn(Vec<OsString>) -> Result<(C, Option<Plan>), PointError>;

/// Resolve every point's command line with the client's parser `parse`; the first
/// invalid one is the error. Returns each point's configuration and its runs' plan (one
/// run unless `--repeat` was given).
pub fn resolve<C>(
    a: &SweepArgs,
    parse: ResolvePoint<'_, C>,
) -> Result<Vec<(Settings, C, Plan)>, String> {
    grid(&a.swept)
        .into_iter()
        .map(|point| {
            let mut argv: Vec<OsString> = vec!["netmeter".into()];
            argv.extend(a.rest.iter().cloned());
            for (f, v) in &point {
                argv.extend(point_args(f, v));
            }
            match parse(argv) {
                Ok((cfg, plan)) => Ok((point, cfg, plan.unwrap_or(ONE_RUN))),
                Err(PointError::NotClient) => Err(
                    "netmeter sweep runs client tests: give -c HOST, and not -s, \
                     --loopback or --find-max-rate"
                        .to_string(),
                ),
                Err(PointError::Usage(e)) => Err(format!("{}: {e}", settings_text(&point))),
            }
        })
        .collect()
}

/// Each congestion control algorithm a sweep's points name is set on a fresh TCP
/// socket here (no connection, no traffic), as each test's data sockets will be: an
/// algorithm this kernel lacks fails before the first test, not at its grid point.
pub fn check_congestion(points: &[(Settings, TestConfig, Plan)]) -> Result<(), String> {
    let mut seen: Vec<&str> = Vec::new();
    for (settings, cfg, _) in points {
        let Some(cc) = cfg.spec.congestion.as_deref() else {
            continue;
        };
        if seen.contains(&cc) {
            continue;
        }
        seen.push(cc);
        let probe = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .and_then(|s| crate::sock::set_congestion(std::os::fd::AsFd::as_fd(&s), cc));
        if let Err(e) = probe {
            return Err(format!(
                "{}: congestion control '{cc}' is not available here: {e}",
                settings_text(settings)
            ));
        }
    }
    Ok(())
}

/// A point without `--repeat`: one run.
pub const ONE_RUN: Plan = Plan {
    max_runs: 1,
    gap_s: 0.0,
    level: 0.95,
    stop_width_pct: None,
};

/// Seconds left, from the time the finished points took on average.
pub fn eta_s(elapsed_s: f64, done: usize, total: usize) -> Option<f64> {
    (done > 0).then(|| elapsed_s / done as f64 * (total - done) as f64)
}

/// One grid point's result.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Flag → value, e.g. `{"-P": "2", "-l": "64K"}`.
    pub settings: std::collections::BTreeMap<String, String>,
    /// Its runs: one, or as many as `--repeat` made.
    pub runs: Vec<Report>,
    /// Each key figure over the runs (mean, stdev, min/max, CI from two runs on).
    pub statistics: Vec<FigureStats>,
}

/// The `-J` document of a sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SweepDocument {
    pub netmeter_sweep: SweepInfo,
    pub points: Vec<Point>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SweepInfo {
    pub swept: Vec<Swept>,
    /// The figures the table and the charts show (`--figure`, else the test type's).
    pub figures: Vec<String>,
    /// Grid points in all.
    pub grid: usize,
    /// Points completed (each in `points`).
    pub completed: usize,
    /// "all points", "interrupted" or "failed: ...".
    pub ended: String,
}

/// A figure of a point as a table cell: `key`'s (the first figure, throughput for bulk
/// tests, transactions/s for bounceback, connections/s for connect-only, when `None`),
/// as its mean, with the confidence interval's half width when the point was repeated.
fn headline(st: &[FigureStats], key: Option<&str>) -> Option<(String, String)> {
    let f = match key {
        Some(k) => st.iter().find(|f| f.key == k)?,
        None => st.first()?,
    };
    let mean = super::compare::format_value(f.summary.mean, f.unit);
    let text = match f.ci.as_ref().and_then(|c| c.half_width_pct()) {
        Some(pct) => format!("{mean} ±{pct:.1}%"),
        None => mean,
    };
    Some((f.label.clone(), text))
}

/// The figures a sweep shows: `asked` (`--figure`), else the test type's among the
/// figures its points have ([`super::figures::default_keys`]).
pub fn shown_keys(asked: Option<&[String]>, done: &[Point]) -> Vec<String> {
    if let Some(k) = asked {
        return k.to_vec();
    }
    let mut have: Vec<&str> = Vec::new();
    for p in done {
        for f in &p.statistics {
            if !have.contains(&f.key.as_str()) {
                have.push(&f.key);
            }
        }
    }
    super::figures::default_keys(&have)
}

/// The tables, one per figure of `keys`: rows are the first swept option's values,
/// columns the second's (one column when only one option is swept); one table per
/// combination of any further swept options. A figure no point has says so in a line.
pub fn table(swept: &[Swept], done: &[(Settings, Vec<FigureStats>)], keys: &[String]) -> String {
    let mut t = String::new();
    for key in keys {
        let label = done.iter().find_map(|(_, st)| headline(st, Some(key)));
        match label {
            Some((label, _)) => t.push_str(&figure_table(swept, done, key, &label)),
            None => {
                let _ = write!(t, "\n{key}: no point measured it\n");
            }
        }
    }
    t
}

/// One figure's table(s).
fn figure_table(
    swept: &[Swept],
    done: &[(Settings, Vec<FigureStats>)],
    key: &str,
    label: &str,
) -> String {
    let mut t = String::new();
    let rows = &swept[0];
    let cols = swept.get(1);
    let col_values: Vec<String> = cols.map_or(vec![String::new()], |c| c.values.clone());
    let others: Vec<Settings> = grid(swept.get(2..).unwrap_or(&[]));
    for other in &others {
        let _ = write!(t, "\n{label}");
        if !other.is_empty() {
            let _ = write!(t, " ({})", settings_text(other));
        }
        let _ = write!(t, "\n{:>12}", rows.flag);
        for c in &col_values {
            let head = cols.map_or(String::new(), |cs| format!("{} {c}", cs.flag));
            let _ = write!(t, " {head:>26}");
        }
        t.push('\n');
        for rv in &rows.values {
            let _ = write!(t, "{rv:>12}");
            for cv in &col_values {
                let cell = done
                    .iter()
                    .find(|(p, _)| {
                        p.iter().all(|(f, v)| {
                            (f == &rows.flag && v == rv)
                                || cols.is_some_and(|c| &c.flag == f && v == cv)
                                || other.iter().any(|(of, ov)| of == f && ov == v)
                        })
                    })
                    .and_then(|(_, st)| headline(st, Some(key)))
                    .map_or("-".to_string(), |h| h.1);
                let _ = write!(t, " {cell:>26}");
            }
            t.push('\n');
        }
    }
    t
}

/// Run the sweep, each point resolved by `parse` ([`resolve`]): progress (text: on the
/// output; `-J`: on stderr), then the table or the document. With `--repeat`, each
/// point is a series ([`repeat::series`]). A stop signal ends the sweep with what
/// completed; a failed test ends it too, reporting what completed, then returning the
/// error.
pub fn run(
    a: &SweepArgs,
    parse: ResolvePoint<'_>,
    out: &mut dyn std::io::Write,
) -> Result<(), SweepError> {
    let mut points = resolve(a, parse).map_err(SweepError::Usage)?;
    check_congestion(&points).map_err(SweepError::Usage)?;
    // `--line-rate memcpy`: measured once, so every point is judged against one peak.
    if let Some(l) = points.first().and_then(|p| p.1.line_rate) {
        let l = crate::host::probe::measure_line_rate(l);
        for p in &mut points {
            p.1.line_rate = Some(l);
        }
    }
    let json = points
        .first()
        .is_some_and(|(_, c, _)| c.mode != crate::engine::output::Mode::Text);
    // Progress beside a document (JSON, CSV) goes to stderr.
    let progress_aside = json || a.csv.is_some();
    let first_key = a
        .figures
        .as_ref()
        .and_then(|k| k.first())
        .map(String::as_str);
    let total = points.len();
    let clock = points
        .first()
        .map_or_else(crate::clock::system, |(_, c, _)| c.clock.clone());
    let started = clock.now();
    let mut done: Vec<Point> = Vec::new();
    let mut ended = "all points".to_string();
    let mut failure = None;
    for (i, (point, cfg, plan)) in points.into_iter().enumerate() {
        let series = repeat::series(&cfg, &plan, |_, _| {});
        let statistics = repeat::statistics(&series.runs, plan.level);
        if !series.runs.is_empty() {
            let eta = eta_s(
                clock.now().saturating_duration_since(started).as_secs_f64(),
                i + 1,
                total,
            )
            .unwrap_or(0.0);
            let runs = match series.runs.len() {
                1 => String::new(),
                n => format!(", {n} runs"),
            };
            let line = format!(
                "[{}/{total}] {}: {}{runs} (ETA {eta:.0} s)\n",
                i + 1,
                settings_text(&point),
                headline(&statistics, first_key)
                    .map_or("no figures".to_string(), |h| format!("{} {}", h.0, h.1)),
            );
            if progress_aside {
                eprint!("{line}");
            } else {
                out.write_all(line.as_bytes())?;
                out.flush()?;
            }
            done.push(Point {
                settings: point.into_iter().collect(),
                runs: series.runs,
                statistics,
            });
        }
        if series.ended == "interrupted" || series.failure.is_some() {
            (ended, failure) = (series.ended, series.failure);
            break;
        }
    }
    let keys = shown_keys(a.figures.as_deref(), &done);
    let plotted: Vec<super::sweep_plot::Cell> = done
        .iter()
        .flat_map(|p| super::sweep_plot::cells(&p.settings, &p.statistics, &keys))
        .collect();
    if let Some(cols) = &a.csv {
        let points: Vec<super::csv::Point> = done
            .iter()
            .map(|p| super::csv::Point::new(p.settings.clone(), &p.runs, &p.statistics))
            .collect();
        out.write_all(super::csv::rows(&points, cols).as_bytes())?;
        out.flush()?;
    } else if json {
        let doc = SweepDocument {
            netmeter_sweep: SweepInfo {
                swept: a.swept.clone(),
                figures: keys.clone(),
                grid: total,
                completed: done.len(),
                ended,
            },
            points: done,
        };
        let s = serde_json::to_string_pretty(&doc).map_err(std::io::Error::other)?;
        writeln!(out, "{s}")?;
    } else {
        writeln!(out, "\n{} of {total} points ({ended}):", done.len())?;
        let cells: Vec<(Settings, Vec<FigureStats>)> = done
            .into_iter()
            .map(|p| (p.settings.into_iter().collect(), p.statistics))
            .collect();
        out.write_all(table(&a.swept, &cells, &keys).as_bytes())?;
    }
    if let Some(path) = &a.plot {
        super::sweep_plot::write(&a.swept, &plotted, path)?;
    }
    failure.map_or(Ok(()), |e| Err(SweepError::Test(e)))
}

/// Why a sweep failed.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Test(#[from] TestError),
    #[error("cannot write the output: {0}")]
    Write(#[from] std::io::Error),
    #[error(transparent)]
    Plot(#[from] crate::report::plot::PlotError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn lists_are_split_from_the_rest() {
        let a = split_args(&args(
            "-c 10.0.0.1 -P 1,2,4 --length=8K,64K -t 1 -b 10M -C4",
        ))
        .unwrap();
        assert_eq!(
            a.swept,
            vec![
                Swept {
                    flag: "-P".into(),
                    values: vec!["1".into(), "2".into(), "4".into()]
                },
                Swept {
                    flag: "-l".into(),
                    values: vec!["8K".into(), "64K".into()]
                },
            ]
        );
        assert_eq!(a.rest, args("-c 10.0.0.1 -t 1 -b 10M -C 4"));
        assert!(
            split_args(&args("-c h -t 1"))
                .unwrap_err()
                .contains("at least one list")
        );
        assert!(
            split_args(&args("-c h -P 1,,2"))
                .unwrap_err()
                .contains("empty value")
        );
        assert!(
            split_args(&args("-c h -P 1,2 -P 3,4"))
                .unwrap_err()
                .contains("twice")
        );
        assert!(
            split_args(&args("-c h -P"))
                .unwrap_err()
                .contains("needs a value")
        );
    }

    /// The caller's parser sees each point's whole command line, the point's settings
    /// last; its refusals come back named by the point, `--repeat`'s plan kept.
    #[test]
    fn each_point_goes_through_the_callers_parser() {
        let seen = std::cell::RefCell::new(Vec::new());
        let plan = Plan {
            max_runs: 3,
            ..ONE_RUN
        };
        let parse = |argv: Vec<OsString>| {
            seen.borrow_mut().push(argv.clone());
            if argv.iter().any(|a| a == "-s") {
                return Err(PointError::NotClient);
            }
            if argv.iter().any(|a| a == "999") {
                return Err(PointError::Usage("too many".to_string()));
            }
            let repeat = argv.iter().any(|a| a == "--repeat");
            Ok(((), repeat.then_some(plan)))
        };
        let a = split_args(&args("-c h -t 1 --proto tcp,udp -P 1,2")).unwrap();
        let points = resolve(&a, &parse).unwrap();
        assert_eq!(points.len(), 4);
        assert_eq!(points[3].2, ONE_RUN);
        assert_eq!(
            seen.borrow()[..2],
            [
                args("netmeter -c h -t 1 -P 1"),
                args("netmeter -c h -t 1 -P 2")
            ]
        );
        assert_eq!(seen.borrow()[3], args("netmeter -c h -t 1 -u -P 2"));
        let a = split_args(&args("-c h -P 1,999")).unwrap();
        assert_eq!(resolve(&a, &parse).unwrap_err(), "-P 999: too many");
        let a = split_args(&args("-c h -P 1,2 --repeat 3")).unwrap();
        assert_eq!(resolve(&a, &parse).unwrap()[1].2, plan);
        let a = split_args(&args("-s -P 1,2")).unwrap();
        assert!(
            resolve(&a, &parse)
                .unwrap_err()
                .starts_with("netmeter sweep runs client tests")
        );
    }

    #[test]
    fn grid_in_order_last_fastest() {
        let a = split_args(&args("-P 1,2 -l 8K,64K,1M")).unwrap();
        let g = grid(&a.swept);
        assert_eq!(g.len(), 6);
        assert_eq!(settings_text(&g[0]), "-P 1 -l 8K");
        assert_eq!(settings_text(&g[2]), "-P 1 -l 1M");
        assert_eq!(settings_text(&g[3]), "-P 2 -l 8K");
    }

    #[test]
    fn eta_from_the_average_point() {
        assert_eq!(eta_s(10.0, 2, 6), Some(20.0));
        assert_eq!(eta_s(0.0, 0, 6), None);
        assert_eq!(eta_s(9.0, 3, 3), Some(0.0));
    }

    #[test]
    fn table_rows_and_columns() {
        let path = format!(
            "{}/src/report/testdata/tcp.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let r = Report::from_document(&std::fs::read_to_string(path).unwrap()).unwrap();
        let at = |bps: f64| {
            let mut x = r.clone();
            if let Some(s) = x.end.sum_received.as_mut() {
                s.bits_per_second = bps;
            }
            x
        };
        let a = split_args(&args("-P 1,2 -l 8K,64K")).unwrap();
        let done: Vec<_> = grid(&a.swept)
            .into_iter()
            .take(3)
            .enumerate()
            .map(|(i, p)| {
                // The third point was repeated: 2.9, 3.0 and 3.1 Gbit/s.
                let runs: Vec<Report> = if i == 2 {
                    vec![at(2.9e9), at(3.0e9), at(3.1e9)]
                } else {
                    vec![at((i + 1) as f64 * 1e9)]
                };
                (p, repeat::statistics(&runs, 0.95))
            })
            .collect();
        let t = table(&a.swept, &done, &["receiver_bits_per_second".to_string()]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[1], "Receiver throughput");
        assert!(
            lines[2].contains("-l 8K") && lines[2].contains("-l 64K"),
            "{t}"
        );
        assert!(lines[3].trim_start().starts_with('1'), "{t}");
        assert!(
            lines[3].contains("1.00 Gbits/sec") && lines[3].contains("2.00 Gbits/sec"),
            "{t}"
        );
        // Mean ± the 95 % half width: 4.302652729749462 · 0.1/√3 / 3.0 = 8.3 %.
        assert!(lines[4].contains("3.00 Gbits/sec ±8.3%"), "{t}");
        // The missing fourth point shows as "-".
        assert!(lines[4].trim_end().ends_with('-'), "{t}");
    }

    #[test]
    fn a_table_per_figure_and_the_figure_option() {
        let path = format!(
            "{}/src/report/testdata/udp.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let r = Report::from_document(&std::fs::read_to_string(path).unwrap()).unwrap();
        let a = split_args(&args("-c h -u -b 1M,2M")).unwrap();
        assert_eq!((a.figures.as_ref(), a.csv.as_ref()), (None, None));
        let points: Vec<Point> = grid(&a.swept)
            .into_iter()
            .map(|p| Point {
                settings: p.into_iter().collect(),
                runs: vec![r.clone()],
                statistics: repeat::statistics(std::slice::from_ref(&r), 0.95),
            })
            .collect();
        // UDP: throughput, loss, jitter and CPU unless --figure says.
        let keys = shown_keys(None, &points);
        assert_eq!(
            keys,
            [
                "receiver_bits_per_second",
                "lost_percent",
                "jitter_ms",
                "cpu_local_percent",
                "cpu_remote_percent"
            ]
        );
        let done: Vec<(Settings, Vec<FigureStats>)> = points
            .iter()
            .map(|p| {
                (
                    p.settings.clone().into_iter().collect(),
                    p.statistics.clone(),
                )
            })
            .collect();
        let t = table(&a.swept, &done, &keys);
        for label in [
            "\nReceiver throughput\n",
            "\nLoss\n",
            "\nJitter\n",
            "\nCPU (local)\n",
        ] {
            assert!(t.contains(label), "{label}: {t}");
        }
        assert!(t.contains("0.002 ms"), "{t}");
        let a = split_args(&args("-c h -u -b 1M,2M --figure jitter_ms,rtt_p99_ms")).unwrap();
        let keys = shown_keys(a.figures.as_deref(), &points);
        assert_eq!(keys, ["jitter_ms", "rtt_p99_ms"]);
        let t = table(&a.swept, &done, &keys);
        assert!(t.starts_with("\nJitter\n"), "{t}");
        assert!(!t.contains("Receiver throughput"), "{t}");
        assert!(t.ends_with("\nrtt_p99_ms: no point measured it\n"), "{t}");
        let e = split_args(&args("-c h -P 1,2 --figure=loss")).unwrap_err();
        assert!(
            e.starts_with("--figure loss: 'loss' is not a figure"),
            "{e}"
        );
        assert!(
            split_args(&args("-c h -P 1,2 --figure"))
                .unwrap_err()
                .contains("needs a value")
        );
    }

    #[test]
    fn csv_and_fields_are_the_sweeps_own() {
        let a = split_args(&args("-c h -P 1,2 --csv --fields=point,figure,value -t 1")).unwrap();
        assert_eq!(
            a.csv,
            Some(super::super::csv::Columns::parse("point,figure,value").unwrap())
        );
        assert_eq!(a.rest, args("-c h -t 1"));
        let a = split_args(&args("-c h -P 1,2 --csv")).unwrap();
        assert_eq!(a.csv, Some(super::super::csv::Columns::default()));
        let e = split_args(&args("-c h -P 1,2 --fields point")).unwrap_err();
        assert!(e.contains("use it with --csv"), "{e}");
        let e = split_args(&args("-c h -P 1,2 --csv -J")).unwrap_err();
        assert!(e.contains("cannot be used together"), "{e}");
        let e = split_args(&args("-c h -P 1,2 --csv --fields bytes")).unwrap_err();
        assert!(e.starts_with("--fields: unknown column 'bytes'"), "{e}");
    }
}
