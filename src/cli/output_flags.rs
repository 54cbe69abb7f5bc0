//! Output options (intervals, units, JSON, CSV, log file, plot, verbosity, title,
//! timestamps, debug), as typed.

use super::number;
use std::path::PathBuf;

/// Output options, as typed.
#[derive(Debug, Default, clap::Args)]
pub struct OutputFlags {
    /// Seconds between interval reports (0 disables).
    #[arg(short = 'i', long = "interval", value_name = "SEC", default_value_t = 1.0, value_parser = number("-i", "a number of seconds such as 1 or 0.5"))]
    pub interval: f64,
    /// Report format: k m g t (bits) or K M G T (bytes).
    #[arg(short = 'f', long = "format")]
    pub format: Option<String>,
    /// Output JSON (iperf3 schema) at the end.
    #[arg(short = 'J', long = "json")]
    pub json: bool,
    /// Output one JSON object per event, line by line.
    #[arg(long = "json-stream")]
    pub json_stream: bool,
    /// Output CSV instead of text: a row per stream per interval, the sums and the end
    /// summary, under a header of column names (docs/csv.md).
    #[arg(long = "csv")]
    pub csv: bool,
    /// With --csv: the columns to write, comma-separated, in order (default: all).
    #[arg(long = "fields", value_name = "a,b,c")]
    pub fields: Option<String>,
    /// Send output to a file (appended).
    #[arg(long = "logfile", value_name = "FILE")]
    pub logfile: Option<PathBuf>,
    /// Client: draw the test's charts into FILE (.svg or .png) when it ends.
    #[arg(long = "plot", value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// More detail: CPU utilisation, congestion control, test settings, iperf 2's
    /// figures (packets/s, Write/Err, Reads, inP, NetPwr).
    #[arg(short = 'V', long = "verbose")]
    pub verbose: bool,
    /// Prefix every output line with this string.
    #[arg(short = 'T', long = "title", value_name = "STR")]
    pub title: Option<String>,
    /// A string carried into both sides' JSON output.
    #[arg(long = "extra-data", value_name = "STR")]
    pub extra_data: Option<String>,
    /// Fetch the server's output at the end.
    #[arg(long = "get-server-output")]
    pub get_server_output: bool,
    /// Start every text output line with the local time, in strftime(3) FORMAT (default
    /// "%c "), as iperf3. Write it as --timestamps=FORMAT.
    #[arg(long = "timestamps", value_name = "FORMAT", num_args = 0..=1, require_equals = true, default_missing_value = crate::engine::output::TIMESTAMP_FORMAT)]
    pub timestamps: Option<String>,
    /// Flush the output at every line (netmeter always does; accepted for iperf3's
    /// command lines).
    #[arg(long = "forceflush")]
    pub forceflush: bool,
    /// With --json-stream: also print the whole -J document at the end.
    #[arg(long = "json-stream-full-output")]
    pub json_stream_full_output: bool,
    /// Debug output: each control message (state bytes and JSON) on stderr. iperf3's
    /// levels 1-4 are accepted and print the same. Write a level as -d=N.
    #[arg(short = 'd', long = "debug", value_name = "LEVEL", num_args = 0..=1, require_equals = true, default_missing_value = "4")]
    pub debug: Option<String>,
}
