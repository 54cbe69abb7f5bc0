//! The experiment subcommands, `netmeter compare` and `netmeter sweep`: which one the
//! first argument names ([`subcommand`], which `cli::parse` asks before the flat
//! command line; the client and server flags never see these), and `compare` itself:
//! its flags, reading the result files, what it prints and its exit status. `sweep`'s
//! help, clap command and per-point parser are [`super::sweep_cmd`]; its list syntax
//! is `experiment::sweep::split_args`.

use crate::experiment::compare::{self, Comparison, Mismatch};
use crate::experiment::sweep::{self, SweepArgs};
use crate::report::{Report, input};
use clap::Parser;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Exit status of `compare --fail-if-worse` when a figure got worse beyond the limit
/// (1 stays "error", as everywhere in netmeter).
pub const EXIT_WORSE: u8 = 2;

/// Compare two results: each key figure, the change in percent and a verdict.
#[derive(Debug, Parser)]
#[command(
    name = "netmeter compare",
    bin_name = "netmeter compare",
    allow_negative_numbers = true,
    about = "Compare two saved -J results (netmeter or iperf3; single runs or --repeat documents): each key figure, the change and a verdict at 95 %",
    after_help = "Verdicts: repetitions (two or more runs on each side) are judged by Welch's t-test; latency percentiles with histograms by a two-sample Kolmogorov-Smirnov test; a single run gets no verdict (\"single run, no significance\").\nExit status: 0, or 2 with --fail-if-worse when a figure got worse beyond PCT with significance, 1 on error.\n\nExamples:\n  netmeter -c HOST --repeat 5 -J > base.json\n  netmeter compare base.json new.json --plot compare.svg\n  netmeter compare --fail-if-worse 5 base.json new.json"
)]
pub struct CompareArgs {
    /// The baseline result (`-J` output or a `--repeat` document).
    #[arg(value_name = "BASE.json")]
    pub base: PathBuf,
    /// The result to judge against the baseline.
    #[arg(value_name = "NEW.json")]
    pub new: PathBuf,
    /// Print the comparison as JSON.
    #[arg(short = 'J', long = "json")]
    pub json: bool,
    /// Exit with status 2 when any figure got worse by more than PCT percent with
    /// significance (throughput down, loss/jitter/latency up).
    #[arg(long = "fail-if-worse", value_name = "PCT", value_parser = percent)]
    pub fail_if_worse: Option<f64>,
    /// Draw both results on shared charts into FILE (.svg or .png): throughput per
    /// interval, UDP loss and jitter, latency CDFs where both have histograms; each
    /// run of a repetition document is its own line.
    #[arg(long = "plot", value_name = "FILE.svg|FILE.png", value_parser = plot_path)]
    pub plot: Option<PathBuf>,
}

fn plot_path(s: &str) -> Result<PathBuf, String> {
    crate::experiment::sweep_plot::plot_file(s)
        .map_err(|_| format!("'{s}' must end in .svg or .png"))
}

/// The inputs of a comparison's plot: every run of each side, named `base: NAME` and
/// `new: NAME` (NAME: the document's -T title, else the file name without `.json`),
/// with ` #k` after each run of a repetition document.
pub fn plot_inputs(side: &str, path: &Path, runs: &[Report]) -> Vec<input::Input> {
    let file = input::file_label(path);
    runs.iter()
        .enumerate()
        .map(|(k, r)| {
            let title = match r.title.as_deref().map(str::trim) {
                Some(t) if !t.is_empty() => t.to_string(),
                _ => file.clone(),
            };
            // "base: base" says it twice.
            let mut name = if title == side {
                side.to_string()
            } else {
                format!("{side}: {title}")
            };
            if runs.len() > 1 {
                name.push_str(&format!(" #{}", k + 1));
            }
            input::Input {
                name,
                path: path.to_path_buf(),
                report: r.clone(),
            }
        })
        .collect()
}

fn percent(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("'{s}' is not a percentage (a number ≥ 0, e.g. 10)")),
    }
}

/// A subcommand and its parsed flags.
#[derive(Debug)]
pub enum Subcommand {
    Compare(CompareArgs),
    /// The arguments after `sweep`, or `None` for `--help`.
    Sweep(Option<SweepArgs>),
}

/// The subcommand `args` (the whole command line, program name first) names, parsed;
/// `None` when the first argument is not a subcommand (a client or server run).
pub fn subcommand(args: &[OsString]) -> Option<Result<Subcommand, clap::Error>> {
    match args.get(1)?.to_str()? {
        "compare" => Some(CompareArgs::try_parse_from(&args[1..]).map(Subcommand::Compare)),
        "sweep" => {
            let rest = &args[2..];
            if rest.is_empty() || rest.iter().any(|a| a == "-h" || a == "--help") {
                return Some(Ok(Subcommand::Sweep(None)));
            }
            Some(
                sweep::split_args(rest)
                    .map(|a| Subcommand::Sweep(Some(a)))
                    .map_err(|e| {
                        clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{e}\n"))
                    }),
            )
        }
        _ => None,
    }
}

/// What went wrong in a subcommand, worded for the user.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    #[error(transparent)]
    Input(input::FileError),
    #[error("{} holds no key figure netmeter compare knows", path.display())]
    NoResults { path: PathBuf },
    #[error("{0}")]
    Mismatch(#[from] Mismatch),
    #[error("cannot write the output: {0}")]
    Write(#[from] std::io::Error),
    #[error(transparent)]
    Plot(#[from] crate::report::plot::PlotError),
    /// `--fail-if-worse`: not a failure to run, the answer the user asked to gate on.
    #[error("{} got worse by more than {pct} % with significance", names.join(", "))]
    Worse { names: Vec<String>, pct: f64 },
}

/// Read a result file: one result (netmeter's or iperf3's `-J` document or
/// `--json-stream` lines, checked by [`crate::report::input`]) or a repetition document
/// (`{"runs": [document, ...], ...}`, from `--repeat`): its runs. Without
/// `keep_intervals` (a comparison draws nothing) each run keeps only its last interval
/// row: the figures come from the end summary, and the file is read run by run, so
/// memory stays near one run's size rather than the whole file's.
pub fn load_runs(path: &Path, keep_intervals: bool) -> Result<Vec<Report>, ExperimentError> {
    let file_error = |why| {
        ExperimentError::Input(input::FileError {
            path: path.to_path_buf(),
            why,
        })
    };
    let mut r = input::open_result(path).map_err(file_error)?;
    let runs = runs_from(&mut r, keep_intervals).map_err(file_error)?;
    if runs.is_empty()
        || runs
            .iter()
            .any(|r| crate::experiment::figures::figures(r).is_empty())
    {
        return Err(ExperimentError::NoResults {
            path: path.to_path_buf(),
        });
    }
    Ok(runs)
}

/// The runs of a result read from `r`, as [`load_runs`] reads a file.
pub fn runs_from<R: std::io::BufRead + std::io::Seek>(
    r: &mut R,
    keep_intervals: bool,
) -> Result<Vec<Report>, input::InputError> {
    match input::read_runs(r, keep_intervals)? {
        input::Runs::Repetition(runs) => Ok(runs),
        input::Runs::NotRepetition => {
            let mut run = input::parse_result_from(r)?;
            if !keep_intervals {
                let last = run.intervals.pop();
                run.intervals = last.into_iter().collect();
            }
            Ok(vec![run])
        }
    }
}

/// `netmeter compare`: print the comparison; `Err(Worse)` for `--fail-if-worse`.
pub fn run_compare(a: &CompareArgs, out: &mut dyn Write) -> Result<(), ExperimentError> {
    // Only a plot needs the runs' interval rows.
    let base = load_runs(&a.base, a.plot.is_some())?;
    let new = load_runs(&a.new, a.plot.is_some())?;
    let c: Comparison = compare::compare(&base, &new)?;
    if a.json {
        let doc = serde_json::json!({
            "base": a.base.display().to_string(),
            "new": a.new.display().to_string(),
            "fail_if_worse_pct": a.fail_if_worse,
            "comparison": c,
        });
        let s = serde_json::to_string_pretty(&doc).map_err(std::io::Error::other)?;
        writeln!(out, "{s}")?;
    } else {
        let t = compare::text(
            &c,
            &a.base.display().to_string(),
            &a.new.display().to_string(),
        );
        write!(out, "{t}")?;
    }
    if let Some(path) = &a.plot {
        let mut inputs = plot_inputs("base", &a.base, &base);
        inputs.extend(plot_inputs("new", &a.new, &new));
        crate::report::plot::write_file(&inputs, path)?;
    }
    if let Some(pct) = a.fail_if_worse {
        let worse = c.worse_beyond(pct);
        if !worse.is_empty() {
            return Err(ExperimentError::Worse {
                names: worse.iter().map(|r| r.label.clone()).collect(),
                pct,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn only_the_first_argument_names_a_subcommand() {
        assert!(subcommand(&argv("netmeter -c compare")).is_none());
        assert!(subcommand(&argv("netmeter")).is_none());
        let Some(Ok(Subcommand::Compare(a))) =
            subcommand(&argv("netmeter compare a.json b.json --fail-if-worse 10%"))
        else {
            panic!("not parsed");
        };
        assert_eq!(a.fail_if_worse, Some(10.0));
        assert!(!a.json);
        assert!(
            subcommand(&argv("netmeter compare a.json"))
                .unwrap()
                .is_err()
        );
        let e = subcommand(&argv("netmeter compare a b --fail-if-worse -3"))
            .unwrap()
            .unwrap_err();
        assert!(e.to_string().contains("not a percentage"), "{e}");
    }

    /// Dropping the interval rows (`compare` without `--plot`) changes no figure, for a
    /// single result of either tool and for a repetition document.
    #[test]
    fn runs_without_their_rows_give_the_same_figures() {
        let dir = std::env::temp_dir().join(format!("nm-compare-rows-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/report/testdata");
        let tcp: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(testdata.join("tcp.json")).unwrap())
                .unwrap();
        let repeat = dir.join("repeat.json");
        let doc = serde_json::json!({"netmeter_repeat": {}, "runs": [tcp, tcp, tcp]});
        std::fs::write(&repeat, doc.to_string()).unwrap();
        let mut paths = vec![repeat];
        for f in [
            "tcp.json",
            "udp_bidir.json",
            "iperf3_322_tcp.json",
            "iperf3_312_tcp_p2.json",
        ] {
            paths.push(testdata.join(f));
        }
        for p in &paths {
            let all = load_runs(p, true).unwrap();
            let cut = load_runs(p, false).unwrap();
            assert_eq!(all.len(), cut.len(), "{}", p.display());
            for (a, c) in all.iter().zip(&cut) {
                assert!(c.intervals.len() <= 1, "{}", p.display());
                use crate::experiment::figures::{Figure, figures};
                let (fa, fc) = (figures(a), figures(c));
                let key = |f: &[Figure]| -> Vec<(String, u64)> {
                    f.iter()
                        .map(|f| (f.key.clone(), f.value.to_bits()))
                        .collect()
                };
                assert_eq!(key(&fa), key(&fc), "{}", p.display());
                assert_eq!(a.end, c.end, "{}", p.display());
            }
        }
        assert_eq!(load_runs(&paths[0], false).unwrap().len(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unreadable_and_empty_files_say_so() {
        let dir = std::env::temp_dir().join(format!("nm-compare-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.json");
        let e = load_runs(&missing, false).unwrap_err();
        assert!(
            e.to_string().contains("missing.json: cannot read it: "),
            "{e}"
        );
        let garbage = dir.join("garbage.json");
        std::fs::write(&garbage, "not json").unwrap();
        let e = load_runs(&garbage, false).unwrap_err();
        assert!(
            e.to_string().contains("garbage.json: it is not JSON"),
            "{e}"
        );
        let failed = dir.join("failed.json");
        std::fs::write(
            &failed,
            r#"{"start": {}, "intervals": [], "end": {}, "error": "unable to connect to server"}"#,
        )
        .unwrap();
        let e = load_runs(&failed, true).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("the test it records failed: unable to connect to server"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
