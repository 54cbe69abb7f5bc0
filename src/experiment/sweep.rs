//! `netmeter sweep`: the client's options, some given as comma-separated lists
//! (`-P 1,2,4 -l 8K,64K`), run as a grid in order, with a progress line per point and
//! an ETA, a table (rows: the first swept option's values, columns: the second's) and
//! one `-J` document holding every run.
//!
//! Every grid point's command line is resolved by the client's own flag parser before
//! the first test runs, so an invalid value in any list fails at once, worded as the
//! client words it. The grid, the ETA and the table are pure; [`run`] does the tests.
//! With `--repeat N` each point is a series of runs and the table shows the mean ± the
//! confidence interval's half width. (The sweep plot waits for the plotting work of
//! issue 12.)

use super::repeat::{self, FigureStats, Plan};
use crate::cli::{self, Command};
use crate::report::Report;
use crate::{TestConfig, TestError};

use serde::Serialize;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::time::Instant;

/// The options a sweep can take a list for: (short, long).
pub const SWEEPABLE: &[(&str, &str)] = &[
    ("-P", "--parallel"),
    ("-l", "--length"),
    ("-b", "--bitrate"),
    ("-w", "--window"),
    ("-C", "--congestion"),
];

/// Sweep-only: `--proto tcp,udp` runs each point over TCP and over UDP (`-u`). (`-u`
/// itself takes no value, so it cannot hold a list.)
pub const PROTO: &str = "--proto";

/// One swept option and its values, in the order given.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Swept {
    /// The short flag, e.g. `-P`.
    pub flag: String,
    pub values: Vec<String>,
}

/// One grid point's settings: (short flag, value) per swept option.
pub type Settings = Vec<(String, String)>;

/// The user's arguments split into the swept options and everything else.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepArgs {
    pub swept: Vec<Swept>,
    pub rest: Vec<OsString>,
    /// `--plot FILE.svg|FILE.png|FILE.html`: the sweep's chart (or page), drawn at the end.
    pub plot: Option<std::path::PathBuf>,
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
    let mut it = args.iter();
    while let Some(a) = it.next() {
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
    Ok(SweepArgs { swept, rest, plot })
}

/// The protocols `--proto` takes.
const PROTOCOLS: &[&str] = &["tcp", "udp"];

/// The client arguments one swept setting stands for: `-P 4`, or for `--proto`
/// nothing (TCP) or `-u`.
fn point_args(flag: &str, value: &str) -> Vec<OsString> {
    match (flag, value.trim()) {
        (PROTO, "udp") => vec!["-u".into()],
        (PROTO, _) => Vec::new(),
        _ => vec![flag.into(), value.into()],
    }
}

/// The grid in order: the last option varies fastest. Each point: (flag, value) pairs.
pub fn grid(swept: &[Swept]) -> Vec<Settings> {
    let mut points: Vec<Settings> = vec![Vec::new()];
    for s in swept {
        points = points
            .into_iter()
            .flat_map(|p| {
                s.values.iter().map(move |v| {
                    let mut q = p.clone();
                    q.push((s.flag.clone(), v.clone()));
                    q
                })
            })
            .collect();
    }
    points
}

/// Resolve every point's command line with the client's parser; the first invalid
/// one is the error. Returns each point's configuration and its runs' plan (one run
/// unless `--repeat` was given).
pub fn resolve(a: &SweepArgs) -> Result<Vec<(Settings, TestConfig, Plan)>, String> {
    grid(&a.swept)
        .into_iter()
        .map(|point| {
            let mut argv: Vec<OsString> = vec!["netmeter".into()];
            argv.extend(a.rest.iter().cloned());
            for (f, v) in &point {
                argv.extend(point_args(f, v));
            }
            let settings = settings_text(&point);
            let args = cli::parse_args(argv).map_err(|e| match e {
                cli::ArgsError::Usage(u) => format!("{settings}: {u}"),
                cli::ArgsError::Clap(c) => format!("{settings}: {}", c.kind()),
            })?;
            match args.resolve() {
                Ok(Command::Client { cfg, .. }) => Ok((point, cfg, ONE_RUN)),
                Ok(Command::Repeat { cfg, plan, .. }) => Ok((point, cfg, plan)),
                Ok(_) => Err(
                    "netmeter sweep runs client tests: give -c HOST, and not -s, \
                     --loopback or --find-max-rate"
                        .to_string(),
                ),
                Err(e) => Err(format!("{settings}: {e}")),
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
const ONE_RUN: Plan = Plan {
    max_runs: 1,
    gap_s: 0.0,
    level: 0.95,
    stop_width_pct: None,
};

fn settings_text(point: &[(String, String)]) -> String {
    point
        .iter()
        .map(|(f, v)| format!("{f} {v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

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
    /// Grid points in all.
    pub grid: usize,
    /// Points completed (each in `points`).
    pub completed: usize,
    /// "all points", "interrupted" or "failed: ...".
    pub ended: String,
}

/// The key figure a sweep table shows: the first (throughput for bulk tests,
/// transactions/s for bounceback, connections/s for connect-only), as its mean, with
/// the confidence interval's half width when the point was repeated.
fn headline(st: &[FigureStats]) -> Option<(String, String)> {
    let f = st.first()?;
    let mean = super::compare::format_value(f.summary.mean, f.unit);
    let text = match f.ci.as_ref().and_then(|c| c.half_width_pct()) {
        Some(pct) => format!("{mean} ±{pct:.1}%"),
        None => mean,
    };
    Some((f.label.clone(), text))
}

/// The table: rows are the first swept option's values, columns the second's (one
/// column when only one option is swept); one table per combination of any further
/// swept options.
pub fn table(swept: &[Swept], done: &[(Settings, Vec<FigureStats>)]) -> String {
    let mut t = String::new();
    let label = done
        .iter()
        .find_map(|(_, st)| headline(st))
        .map_or("Result".to_string(), |h| h.0);
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
                    .and_then(|(_, st)| headline(st))
                    .map_or("-".to_string(), |h| h.1);
                let _ = write!(t, " {cell:>26}");
            }
            t.push('\n');
        }
    }
    t
}

/// Run the sweep: progress (text: on the output; `-J`: on stderr), then the table or
/// the document. With `--repeat`, each point is a series ([`repeat::series`]). A stop
/// signal ends the sweep with what completed; a failed test ends it too, reporting
/// what completed, then returning the error.
pub fn run(a: &SweepArgs, out: &mut dyn std::io::Write) -> Result<(), SweepError> {
    let points = resolve(a).map_err(SweepError::Usage)?;
    check_congestion(&points).map_err(SweepError::Usage)?;
    let json = points
        .first()
        .is_some_and(|(_, c, _)| c.mode != crate::engine::output::Mode::Text);
    let total = points.len();
    let started = Instant::now();
    let mut done: Vec<Point> = Vec::new();
    let mut ended = "all points".to_string();
    let mut failure = None;
    for (i, (point, cfg, plan)) in points.into_iter().enumerate() {
        let series = repeat::series(&cfg, &plan, |_, _| {});
        let statistics = repeat::statistics(&series.runs, plan.level);
        if !series.runs.is_empty() {
            let eta = eta_s(started.elapsed().as_secs_f64(), i + 1, total).unwrap_or(0.0);
            let runs = match series.runs.len() {
                1 => String::new(),
                n => format!(", {n} runs"),
            };
            let line = format!(
                "[{}/{total}] {}: {}{runs} (ETA {eta:.0} s)\n",
                i + 1,
                settings_text(&point),
                headline(&statistics)
                    .map_or("no figures".to_string(), |h| format!("{} {}", h.0, h.1)),
            );
            if json {
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
    let plotted: Vec<super::sweep_plot::Cell> = done
        .iter()
        .filter_map(|p| super::sweep_plot::cell(&p.settings, &p.statistics))
        .collect();
    if json {
        let doc = SweepDocument {
            netmeter_sweep: SweepInfo {
                swept: a.swept.clone(),
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
        out.write_all(table(&a.swept, &cells).as_bytes())?;
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

    #[test]
    fn proto_sweeps_tcp_and_udp() {
        let a = split_args(&args("-c h -t 1 --proto tcp,udp -b 10M --plot s.svg")).unwrap();
        assert_eq!(a.swept[0].flag, PROTO);
        assert_eq!(a.plot, Some("s.svg".into()));
        assert_eq!(a.rest, args("-c h -t 1 -b 10M"));
        let points = resolve(&a).unwrap();
        assert_eq!(points.len(), 2);
        assert_eq!(points[0].1.spec.protocol, crate::spec::Protocol::Tcp);
        assert_eq!(points[1].1.spec.protocol, crate::spec::Protocol::Udp);
        // One protocol without a comma is an ordinary option.
        let a = split_args(&args("-c h --proto=udp -P 1,2")).unwrap();
        assert_eq!(a.rest, args("-c h -u"));
        let e = split_args(&args("-c h --proto tcp,sctp")).unwrap_err();
        assert_eq!(
            e,
            "--proto tcp,sctp: 'sctp' is not a protocol (give tcp, udp or tcp,udp)"
        );
        let e = split_args(&args("-c h -u --proto tcp,udp")).unwrap_err();
        assert!(e.starts_with("-u and --proto tcp,udp: give one"), "{e}");
        let e = split_args(&args("-c h -P 1,2 --plot s.jpg")).unwrap_err();
        assert!(e.contains("ending in .svg, .png or .html"), "{e}");
    }

    #[test]
    fn a_congestion_control_this_kernel_lacks_fails_first() {
        let a = split_args(&args("-c 127.0.0.1 -C reno,no-such-cc")).unwrap();
        let points = resolve(&a).unwrap();
        let e = check_congestion(&points).unwrap_err();
        assert!(
            e.starts_with("-C no-such-cc: congestion control 'no-such-cc' is not available here"),
            "{e}"
        );
        let a = split_args(&args("-c 127.0.0.1 -P 1,2")).unwrap();
        assert!(check_congestion(&resolve(&a).unwrap()).is_ok());
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
    fn an_invalid_value_fails_before_any_test() {
        let a = split_args(&args("-c 127.0.0.1 -t 1 -P 1,2,999")).unwrap();
        let e = resolve(&a).unwrap_err();
        assert!(e.starts_with("-P 999: "), "{e}");
        let a = split_args(&args("-c 127.0.0.1 -t 1 -b 10M,fast")).unwrap();
        assert!(resolve(&a).unwrap_err().starts_with("-b fast: "));
        let a = split_args(&args("-s -P 1,2")).unwrap();
        assert!(resolve(&a).is_err());
        let a = split_args(&args("-c 127.0.0.1 -P 1,2 --loopback")).unwrap();
        assert!(resolve(&a).unwrap_err().contains("--loopback"));
        let a = split_args(&args("-c 127.0.0.1 -P 1,2 --repeat 3 --repeat-gap 0")).unwrap();
        let rep = resolve(&a).unwrap();
        assert_eq!((rep[1].2.max_runs, rep[1].2.gap_s), (3, 0.0));
        let ok = resolve(&split_args(&args("-c 127.0.0.1 -P 1,2 -l 8K,64K")).unwrap()).unwrap();
        assert_eq!(ok.len(), 4);
        assert_eq!(ok[3].1.spec.block_len, 65536);
        assert_eq!(ok[3].2, ONE_RUN);
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
        let t = table(&a.swept, &done);
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
}
