//! `netmeter csv RESULT [--fields a,b,c] [-o FILE]`: a saved result (a `-J` document or
//! `--json-stream` lines, netmeter's or iperf3's, or a sweep's or `--repeat`'s `-J`
//! document) as CSV. Its own parser, reached when `csv` is the first argument
//! (`cli::subcommand`).

use super::{ArgsError, Command, usage};
use crate::report::csv::Columns;

/// The columns `--fields` names: a single test's ([`Columns`]) or an experiment's
/// (`experiment::csv`); which applies is known once the file is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CsvColumns {
    /// Every column of whichever kind the file is.
    All,
    /// `--fields` as given, valid for at least one kind.
    Named(String),
}

impl CsvColumns {
    /// The columns of a single test's CSV.
    pub fn test(&self) -> Result<Columns, String> {
        match self {
            CsvColumns::All => Ok(Columns::default()),
            CsvColumns::Named(f) => Columns::parse(f),
        }
    }

    /// The columns of a sweep's or a repetition's CSV.
    pub fn experiment(&self) -> Result<crate::experiment::csv::Columns, String> {
        match self {
            CsvColumns::All => Ok(crate::experiment::csv::Columns::default()),
            CsvColumns::Named(f) => crate::experiment::csv::Columns::parse(f),
        }
    }
}
use clap::Parser;
use std::path::PathBuf;

/// Write a saved netmeter or iperf3 result as CSV: a row per stream per interval, the
/// interval sums and the end summary's rows; for a sweep's or a --repeat's -J document,
/// a row per figure of each run and of each point's summary (columns: docs/csv.md).
#[derive(Debug, Parser)]
#[command(
    name = "netmeter csv",
    bin_name = "netmeter csv",
    disable_version_flag = true,
    after_help = "Examples:\n  netmeter csv result.json > result.csv\n  netmeter csv --fields end_s,stream,bits_per_second,rtt_us run.jsonl -o run.csv\n  iperf3 -c HOST -J > r.json && netmeter csv r.json\n  netmeter csv sweep.json --fields point,parallel,figure,value,ci_low,ci_high"
)]
pub struct CsvArgs {
    /// A `-J` document or `--json-stream` lines, written by netmeter or iperf3; or the
    /// `-J` document of `netmeter sweep` or `--repeat`.
    #[arg(value_name = "RESULT")]
    pub input: PathBuf,
    /// The columns to write, comma-separated, in order (default: all).
    #[arg(long = "fields", value_name = "a,b,c")]
    pub fields: Option<String>,
    /// Write to FILE (created whole or not at all) instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Parse `csv ...` (the arguments after the program name).
pub fn parse<I, T>(args: I) -> Result<Command, ArgsError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let a = CsvArgs::try_parse_from(args).map_err(ArgsError::Clap)?;
    let columns = match &a.fields {
        // A name neither kind has is wrong whatever the file holds.
        Some(f) => match Columns::parse(f) {
            Err(e) if crate::experiment::csv::Columns::parse(f).is_err() => {
                return Err(ArgsError::Usage(usage(e)));
            }
            _ => CsvColumns::Named(f.clone()),
        },
        None => CsvColumns::All,
    };
    Ok(Command::Csv {
        input: a.input,
        columns,
        output: a.output,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::subcommand_of as run;

    #[test]
    fn csv_is_a_subcommand() {
        match run(&["csv", "r.json", "--fields", "kind,bytes", "-o", "x.csv"]) {
            Some(Ok(Command::Csv {
                input,
                columns,
                output,
            })) => {
                assert_eq!(input, PathBuf::from("r.json"));
                assert_eq!(columns.test(), Columns::parse("kind,bytes"));
                assert!(columns.experiment().is_err(), "bytes is a test's column");
                assert_eq!(output, Some(PathBuf::from("x.csv")));
            }
            other => panic!("{other:?}"),
        }
        // Flags first, or no subcommand at all: the flat iperf3 parser's business.
        assert!(run(&["-c", "csv"]).is_none());
        assert!(run(&[]).is_none());
    }

    #[test]
    fn csv_mistakes() {
        assert!(matches!(
            run(&["csv", "r.json", "--fields", "nope"]),
            Some(Err(ArgsError::Usage(_)))
        ));
        assert!(matches!(run(&["csv"]), Some(Err(ArgsError::Clap(_)))));
        // An experiment's columns pass the parser; the file decides.
        match run(&["csv", "s.json", "--fields", "point,figure,value"]) {
            Some(Ok(Command::Csv { columns, .. })) => {
                assert!(columns.test().is_err());
                assert!(columns.experiment().is_ok());
            }
            other => panic!("{other:?}"),
        }
    }
}
