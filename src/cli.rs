//! The command line's face: [`Args`] (the flags as the user typed them), the [`Command`]
//! they resolve into, the usage errors, and the small value parsers every group shares.
//!
//! Options, short letters, units and defaults follow iperf3 (`iperf3 --help`), so a
//! command line that works there means the same here. Every invalid combination ends
//! in one sentence naming the problem.
//!
//! The flags are defined by group, one file each, in the groups `--help` shows
//! (`common_flags.rs` for the untitled first group, then `server_flags.rs`,
//! `client_flags.rs`, `output_flags.rs`, `udp_flags.rs`, `latency_flags.rs`,
//! `experiment_flags.rs`, `auth_flags.rs`, `hosts_flags.rs`; `multicast_flags.rs` holds
//! its group and its resolution); [`Args`] flattens them. A
//! new flag goes into its group's file, its id into `help::SECTIONS`.
//!
//! As ripgrep keeps its low-level arguments apart from the resolved ones: [`Args`] is
//! what the user said, typed but not judged; the resolution turns it into what runs,
//! one function per side (`Args::client_config` in `resolve/client.rs`,
//! `Args::server_config` in `resolve/server.rs`), with `Args::resolve` (`resolve.rs`)
//! choosing the role and the experiment plans around them. Each takes an `Args` a
//! test builds from [`Args::default`] (the empty command line) without any argv.

use crate::engine::client::{ClientConfig, Family};
use crate::engine::output::Mode;
use crate::engine::server::ServerConfig;
use crate::engine::server::audit::{Rotation, Target as AuditTarget};
use crate::engine::server::policy::{ConnRate, Policy};
use crate::engine::test_common::{Keepalive, SideOpts};
use crate::spec::{Direction, EndCondition, Protocol, TestSpec};
use crate::units::{self, Format};
use crate::wire;
use clap::Parser;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

mod auth_flags;
mod client_flags;
mod common_flags;
pub mod compare_cmd;
pub mod csv_cmd;
pub mod doctor_cmd;
mod experiment_flags;
pub mod generate;
mod help;
mod hosts_flags;
pub mod iperf2;
mod latency_flags;
mod manpage;
pub mod mesh_cmd;
mod multicast_flags;
mod output_flags;
mod parse_error;
mod profile_flags;
mod resolve;
pub mod rpm_cmd;
pub mod rpm_server_cmd;
pub mod scenario_cmd;
mod server_flags;
pub mod sweep_cmd;
pub mod third_party;
mod tools;
mod udp_flags;

// The value parsers the resolution and iperf 2's translation share, beside their groups.
use client_flags::{MIN_MSS, parse_dscp, parse_int, parse_tos};
use common_flags::{libc_ifnamsiz, split_dev};

/// netmeter: TCP and UDP throughput, loss and jitter, wire-compatible with iperf3.
#[derive(Debug, Parser)]
#[command(
    name = "netmeter",
    disable_version_flag = true,
    // `-P -1` is a value (refused as out of range), not an unknown flag `-1`.
    allow_negative_numbers = true,
    about = "Network performance measurement, wire-compatible with iperf3",
    // The groups, usage forms, subcommands and examples: `cli/help.rs`.
)]
pub struct Args {
    #[command(flatten)]
    pub common: common_flags::CommonFlags,
    #[command(flatten)]
    pub server: server_flags::ServerFlags,
    #[command(flatten)]
    pub client: client_flags::ClientFlags,
    #[command(flatten)]
    pub output: output_flags::OutputFlags,
    #[command(flatten)]
    pub udp: udp_flags::UdpFlags,
    #[command(flatten)]
    pub multicast: multicast_flags::MulticastFlags,
    #[command(flatten)]
    pub latency: latency_flags::LatencyFlags,
    #[command(flatten)]
    pub experiments: experiment_flags::ExperimentFlags,
    #[command(flatten)]
    pub auth: auth_flags::AuthFlags,
    #[command(flatten)]
    pub hosts: hosts_flags::HostsFlags,
}

/// What the user says by saying nothing: every flag at its default, clap's
/// `default_value`s included (`-p 5201`, `-i 1`, `--max-tests 1`), read from the same
/// definitions the parser uses. A test states the flags it means on top of it and
/// resolves them (`Args::client_config`, `Args::server_config`) without an argv.
impl Default for Args {
    fn default() -> Self {
        use clap::FromArgMatches;
        help::command()
            .try_get_matches_from(["netmeter"])
            .ok()
            .and_then(|m| Args::from_arg_matches(&m).ok())
            // No flag is required, so the empty command line always parses; were one
            // ever required, each group's own (zero) defaults stand in.
            .unwrap_or_else(|| Args {
                common: Default::default(),
                server: Default::default(),
                client: Default::default(),
                output: Default::default(),
                udp: Default::default(),
                latency: Default::default(),
                experiments: Default::default(),
                auth: Default::default(),
                hosts: Default::default(),
                multicast: Default::default(),
            })
    }
}

/// What to run.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // built once per process
pub enum Command {
    Version,
    Server {
        cfg: ServerConfig,
        daemon: bool,
        pidfile: Option<PathBuf>,
        logfile: Option<PathBuf>,
        /// `--timestamps`: the strftime format each text line starts with.
        stamps: Option<String>,
    },
    Client {
        cfg: ClientConfig,
        logfile: Option<PathBuf>,
        /// `--plot FILE`: the test's charts, drawn when it ends.
        plot: Option<PathBuf>,
        /// `--csv`: CSV with these columns instead of text.
        csv: Option<crate::report::csv::Columns>,
        stamps: Option<String>,
    },
    FindMaxRate {
        cfg: ClientConfig,
        loss_target: f64,
        start_bps: u64,
        logfile: Option<PathBuf>,
        stamps: Option<String>,
    },
    Loopback {
        tcp: ClientConfig,
        udp: ClientConfig,
        logfile: Option<PathBuf>,
        stamps: Option<String>,
    },
    /// `--repeat N`: the client test several times, with statistics.
    Repeat {
        cfg: ClientConfig,
        plan: crate::experiment::repeat::Plan,
        logfile: Option<PathBuf>,
        stamps: Option<String>,
    },
    /// `netmeter plot RESULT.json... -o FILE` (see `cli/tools.rs`).
    Plot {
        inputs: Vec<PathBuf>,
        output: PathBuf,
    },
    /// `netmeter report RESULT.json... -o FILE.html`.
    Report {
        inputs: Vec<PathBuf>,
        output: PathBuf,
    },
    /// `netmeter mesh HOST...`: every pair's test, run by its source host.
    Mesh(mesh_cmd::MeshCommand),
    /// `netmeter scenario FILE`: named flows started together (`cli/scenario_cmd.rs`).
    Scenario(scenario_cmd::ScenarioCommand),
    /// `netmeter rpm-server`: the responsiveness server (`cli/rpm_server_cmd.rs`).
    RpmServer(rpm_server_cmd::RpmServerCommand),
    /// `netmeter rpm URL`: the IETF responsiveness test (`cli/rpm_cmd.rs`).
    Rpm(rpm_cmd::RpmCommand),
    /// `netmeter generate KIND`: a man page or a shell completion, to stdout.
    Generate(generate::Asset),
    /// `netmeter doctor [-c HOST] [--json]`: this host's ceilings (see `cli/doctor_cmd.rs`).
    Doctor {
        target: Option<String>,
        json: bool,
        /// `--line-rate RATE`: bits/s.
        line_rate: Option<u64>,
    },
    /// `netmeter csv RESULT`: a saved result as CSV, to `output` or stdout.
    Csv {
        input: PathBuf,
        columns: csv_cmd::CsvColumns,
        output: Option<PathBuf>,
    },
    /// `netmeter iperf2 ARGS` or a netmeter run as `iperf`: iperf 2's command line.
    Iperf2(iperf2::Iperf2Command),
    /// `netmeter compare ...` / `netmeter sweep ...` (see `cli/compare_cmd.rs`).
    Experiment(compare_cmd::Subcommand),
    /// `netmeter -c B --via A`: a third-party test (see `cli/third_party.rs`).
    Via(third_party::ViaCommand),
    /// `-s -u -B GROUP`: a multicast receiver (`cli/multicast_flags.rs`).
    MulticastReceive {
        cfg: crate::engine::multicast::ReceiverConfig,
        logfile: Option<PathBuf>,
    },
    /// `-c GROUP -u`: a multicast sender.
    MulticastSend {
        cfg: crate::engine::multicast::SenderConfig,
        /// `--receivers`: ask them, and print their rows (`receivers::run`).
        receivers: Option<crate::engine::multicast::receivers::run::ReceiversPlan>,
        logfile: Option<PathBuf>,
    },
}

/// CPUs this process may run on (1 when unknown).
fn host_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// [`subcommand`] of `netmeter ARGS...` (the subcommands' parser tests).
#[cfg(test)]
pub(crate) fn subcommand_of(args: &[&str]) -> Option<Result<Command, ArgsError>> {
    let argv: Vec<std::ffi::OsString> = std::iter::once("netmeter")
        .chain(args.iter().copied())
        .map(Into::into)
        .collect();
    subcommand(&argv)
}

/// A subcommand's own parser when the first argument names one (`plot`, `report`, `csv`, `generate`, `doctor`); `None` for
/// iperf3's flat command line.
pub fn subcommand(argv: &[std::ffi::OsString]) -> Option<Result<Command, ArgsError>> {
    match argv.get(1)?.to_str()? {
        "plot" | "report" => tools::parse_tool(argv),
        "csv" => Some(csv_cmd::parse(&argv[1..])),
        "generate" => Some(generate::parse(&argv[1..])),
        "doctor" => Some(doctor_cmd::parse(&argv[1..])),
        "mesh" => Some(mesh_cmd::parse(&argv[1..])),
        "scenario" => Some(scenario_cmd::parse(&argv[1..])),
        "rpm-server" => Some(rpm_server_cmd::parse(&argv[1..])),
        "rpm" => Some(rpm_cmd::parse(&argv[1..])),
        _ => None,
    }
}

/// The whole command line (program name first), read once into the [`Command`] to
/// run: iperf 2's personality (`netmeter iperf2 ARGS`, or netmeter run as `iperf`),
/// then the experiment subcommands (`compare`, `sweep`), the other subcommands
/// ([`subcommand`]), a `--via` third-party test, and last iperf3's flat command line,
/// parsed into [`Args`] and resolved.
pub fn parse(argv: &[std::ffi::OsString]) -> Result<Command, ArgsError> {
    if let Some(i2) = iperf2::invoked(argv) {
        return i2.map(Command::Iperf2).map_err(ArgsError::Usage);
    }
    if let Some(exp) = compare_cmd::subcommand(argv) {
        return exp.map(Command::Experiment).map_err(ArgsError::Clap);
    }
    if let Some(sub) = subcommand(argv) {
        return sub;
    }
    if let Some(via) = third_party::parse_via(argv) {
        return via.map(Command::Via).map_err(ArgsError::Usage);
    }
    parse_args(argv)?.resolve().map_err(ArgsError::Usage)
}

/// A user mistake, as one sentence.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

fn usage(msg: impl Into<String>) -> UsageError {
    UsageError(msg.into())
}

/// Why the command line could not be parsed.
#[derive(Debug)]
pub enum ArgsError {
    /// A user mistake netmeter words itself: print it as one line, exit 1.
    Usage(UsageError),
    /// Help, or an error clap formats (unknown option, missing value): `clap::Error::print`.
    Clap(clap::Error),
}

/// Parse the command line. A value that does not parse, an unknown option or a stray
/// word comes back as one sentence naming it (`cli/parse_error.rs`); help and the rest
/// are clap's own. (Every iperf3 3.22 option parses; `--sctp` is refused later, in one
/// sentence, because this kernel has no SCTP.)
pub fn parse_args<I, T>(args: I) -> Result<Args, ArgsError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::FromArgMatches;
    let argv: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let mut cmd = help::command();
    let mut m = cmd
        .try_get_matches_from_mut(&argv)
        .map_err(|e| parse_error::reword(e, &argv, &cmd))?;
    let port_given = m.value_source("port") == Some(clap::parser::ValueSource::CommandLine);
    let mut args =
        Args::from_arg_matches_mut(&mut m).map_err(|e| ArgsError::Clap(e.format(&mut cmd)))?;
    args.common.port_given = port_given;
    Ok(args)
}

/// The flat command line's clap command, grouped as `--help` shows it.
pub fn args_command() -> clap::Command {
    help::command()
}

/// A number flag value (`-t 2.5`), refused in one sentence naming the flag and the
/// value, `what` saying what it wants ("a number of seconds").
fn number(
    flag: &'static str,
    what: &'static str,
) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("{flag} needs {what}, not '{s}'"))
    }
}

/// A whole-number flag value in `lo..=hi`, refused in one sentence otherwise (a negative
/// number included: clap would otherwise call `-1` a missing value).
fn ranged<T>(
    flag: &'static str,
    lo: i128,
    hi: i128,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: TryFrom<i128>,
{
    move |s: &str| {
        let v: i128 = s
            .trim()
            .parse()
            .map_err(|_| format!("{flag} needs a whole number, not '{s}'"))?;
        if !(lo..=hi).contains(&v) {
            return Err(format!("{flag} must be between {lo} and {hi}"));
        }
        T::try_from(v).map_err(|_| format!("{flag} must be between {lo} and {hi}"))
    }
}

/// Quantities (`-n 10M`, `-b 1G`) are strings parsed later; a leading minus is a value
/// out of range, said as `range` with the value, not an unreadable quantity.
fn not_negative(s: &str, range: impl FnOnce() -> String) -> Result<(), UsageError> {
    if s.trim_start().starts_with('-') {
        return Err(usage(format!("{}, not '{s}'", range())));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
