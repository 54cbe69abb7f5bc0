//! `netmeter plot` and `netmeter report`: subcommands that read saved results.
//!
//! The main command line is iperf3's flat option set, so a subcommand is recognised by
//! its first word alone ([`parse_tool`]) and parsed by its own small clap parser here;
//! everything else goes to [`super::Args`] unchanged.

use super::{ArgsError, Command, UsageError, usage};
use crate::report::plot;
use clap::Parser;
use std::ffi::OsString;
use std::path::PathBuf;

/// `netmeter plot`: draw a result's charts into an SVG or PNG file.
#[derive(Debug, Parser)]
#[command(
    name = "netmeter plot",
    bin_name = "netmeter plot",
    about = "Draw the charts of saved results (netmeter or iperf3 -J files) into one SVG or PNG",
    after_help = "One input: throughput over time per direction, UDP loss/jitter, TCP cwnd/RTT, latency \
CDFs and histograms, working load, whichever apply, one chart under the other.\n\
Several inputs: the same measures compared on shared charts, the legend naming each \
input (its -T title, else the file name).\nA netmeter sweep -J document (alone): the sweep's chart, as `netmeter sweep --plot` draws it.\n\n\
Examples:\n  netmeter -c HOST -J > run.json && netmeter plot run.json -o run.svg\n  \
netmeter plot before.json after.json -o compare.png"
)]
struct PlotArgs {
    /// Result files: -J documents or --json-stream lines of netmeter or iperf3 3.12 and later.
    #[arg(value_name = "RESULT.json", required = true)]
    inputs: Vec<PathBuf>,
    /// The file to write; its ending (.svg or .png) picks the format.
    #[arg(short = 'o', long = "output", value_name = "FILE.svg|FILE.png")]
    output: PathBuf,
}

/// `netmeter report`: one self-contained HTML page.
#[derive(Debug, Parser)]
#[command(
    name = "netmeter report",
    bin_name = "netmeter report",
    about = "Write one self-contained HTML report (settings, hosts, summary, warnings, charts) of saved results",
    after_help = "Several inputs add a side-by-side table and comparison charts.\n\
A netmeter sweep -J document (alone): a table of its points and the sweep's chart.\n\n\
Example:\n  netmeter report run1.json run2.json -o report.html"
)]
struct ReportArgs {
    /// Result files: -J documents or --json-stream lines of netmeter or iperf3 3.12 and later.
    #[arg(value_name = "RESULT.json", required = true)]
    inputs: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(short = 'o', long = "output", value_name = "FILE.html")]
    output: PathBuf,
}

/// `plot` and `report` as clap commands, for the man page and the completions.
pub fn commands() -> [clap::Command; 2] {
    use clap::CommandFactory;
    [
        PlotArgs::command().name("plot").bin_name("netmeter plot"),
        ReportArgs::command()
            .name("report")
            .bin_name("netmeter report"),
    ]
}

/// The command line's subcommand, when its first word names one; `None` for the
/// ordinary iperf3-style command line.
pub fn parse_tool(args: &[OsString]) -> Option<Result<Command, ArgsError>> {
    let word = args.get(1)?.to_str()?;
    let rest = args.iter().skip(1).cloned();
    let clap_err = ArgsError::Clap;
    Some(match word {
        "plot" => PlotArgs::try_parse_from(rest)
            .map_err(clap_err)
            .and_then(|a| plot_command(a).map_err(ArgsError::Usage)),
        "report" => ReportArgs::try_parse_from(rest)
            .map_err(clap_err)
            .map(|a| Command::Report {
                inputs: a.inputs,
                output: a.output,
            }),
        _ => return None,
    })
}

fn plot_command(a: PlotArgs) -> Result<Command, UsageError> {
    check_plot_file(&a.output, "-o")?;
    Ok(Command::Plot {
        inputs: a.inputs,
        output: a.output,
    })
}

/// A plot file name must say its format.
pub(super) fn check_plot_file(p: &std::path::Path, flag: &str) -> Result<(), UsageError> {
    match plot::Format::of(p) {
        Some(_) => Ok(()),
        None => Err(usage(format!(
            "{flag} {} needs a file name ending in .svg or .png",
            p.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Option<Result<Command, ArgsError>> {
        let v: Vec<OsString> = std::iter::once("netmeter")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect();
        parse_tool(&v)
    }

    #[test]
    fn first_word_picks_the_subcommand() {
        assert!(parse(&["-c", "host"]).is_none());
        assert!(parse(&[]).is_none());
        match parse(&["plot", "a.json", "b.json", "-o", "x.PNG"]) {
            Some(Ok(Command::Plot { inputs, output })) => {
                assert_eq!(inputs.len(), 2);
                assert_eq!(output, PathBuf::from("x.PNG"));
            }
            other => panic!("{other:?}"),
        }
        match parse(&["report", "a.json", "-o", "r.html"]) {
            Some(Ok(Command::Report { inputs, .. })) => assert_eq!(inputs.len(), 1),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn mistakes_are_refused() {
        match parse(&["plot", "a.json", "-o", "x.jpg"]) {
            Some(Err(ArgsError::Usage(e))) => assert_eq!(
                e.to_string(),
                "-o x.jpg needs a file name ending in .svg or .png"
            ),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(&["plot", "-o", "x.svg"]),
            Some(Err(ArgsError::Clap(_)))
        ));
        assert!(matches!(
            parse(&["report", "a.json"]),
            Some(Err(ArgsError::Clap(_)))
        ));
    }
}
