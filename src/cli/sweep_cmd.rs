//! `netmeter sweep`'s side of the command line: its `--help` text ([`SWEEP_HELP`]), its
//! clap command for the man page and the completions ([`sweep_command`]), and
//! [`resolve_point`], the client's flag parser as `experiment::sweep` resolves each
//! grid point with it (passed in by `main.rs`, so the sweep imports nothing of `cli`).
//! The sweep's own options and lists are split by `experiment::sweep::split_args`.

use super::{ArgsError, Command};
use crate::TestConfig;
use crate::experiment::repeat::Plan;
use crate::experiment::sweep::PointError;
use std::ffi::OsString;

/// `netmeter sweep --help`.
pub const SWEEP_HELP: &str = "\
Run a client test over a grid of option values, in order, and tabulate the results

Usage: netmeter sweep -c HOST [client options] LIST...

Any of -P, -l, -b, -w, -C given a comma-separated list is swept (the last list varies
fastest); every other option is passed to each test as given. Every point's options are
checked before the first test runs.
  --proto tcp,udp
       sweep the protocol: each point over TCP, then over UDP (-u; its -b as given,
       else UDP's 1 Mbit/s default)
  --plot FILE.svg|FILE.png|FILE.html
       draw each figure shown against the first swept option, one line per value
       of the second, error bars (the confidence interval) when repeated; the same
       chart as `netmeter plot SWEEP.json -o FILE` from the -J document. .html: one
       page with a table of the points and the charts (as `netmeter report SWEEP.json`)
  --figure KEY[,KEY...]
       the figures the tables and charts show, in order (default: the test type's:
       throughput, loss and jitter for UDP, retransmits for TCP, RTT p50/p99 for
       --bounceback, share of the peak with --line-rate, CPU of each side); KEYs as
       in the -J document's statistics, e.g. jitter_ms,rtt_p99_ms,cpu_local_percent
  -J   print one JSON document with every point's settings, runs and statistics
       (progress lines then go to stderr)
  --csv [--fields a,b,c]
       print every figure of every run and point as CSV instead of the tables
       (columns: docs/csv.md; progress lines then go to stderr); netmeter csv
       SWEEP.json writes the same rows from the -J document
  --repeat N [--repeat-gap SEC] [--confidence L,W%]
       each point is a series; the table shows mean ± CI half width

Examples:
  netmeter sweep -c HOST -t 5 -P 1,2,4,8 -l 128K,1M --plot sweep.png
  netmeter sweep -c HOST -t 5 --proto tcp,udp -b 100M,500M --repeat 3 -J > sweep.json
";

/// `netmeter sweep` as a clap command, for the man page and the completions only (the
/// sweep's own parsing is [`split_args`](crate::experiment::sweep::split_args) and the client's parser,
/// [`resolve_point`]): the client's flags, `--proto` and the help text above.
pub fn sweep_command() -> clap::Command {
    let (about, rest) = SWEEP_HELP.split_once('\n').unwrap_or((SWEEP_HELP, ""));
    super::args_command()
        .name("sweep")
        .bin_name("netmeter sweep")
        .about(about)
        .override_usage("netmeter sweep -c HOST [client options] LIST...")
        .after_help(
            rest.split_once("\n\n")
                .map_or(rest, |x| x.1)
                .trim()
                .to_string(),
        )
        .arg(
            clap::Arg::new("figure")
                .long("figure")
                .value_name("KEY,...")
                .help("The figures the tables and charts show (default: the test type's)"),
        )
        .arg(
            clap::Arg::new("proto")
                .long("proto")
                .value_name("tcp,udp")
                .help("Sweep the protocol: each point over TCP, then over UDP (-u)"),
        )
}

/// One grid point's whole command line (program name first) through the client's parser
/// ([`super::parse_args`], then its resolution): a client test's configuration, with its
/// plan under `--repeat`; anything else is [`PointError::NotClient`]. Its type is
/// [`ResolvePoint`](crate::experiment::sweep::ResolvePoint).
pub fn resolve_point(argv: Vec<OsString>) -> Result<(TestConfig, Option<Plan>), PointError> {
    let args = super::parse_args(argv).map_err(|e| {
        PointError::Usage(match e {
            ArgsError::Usage(u) => u.to_string(),
            ArgsError::Clap(c) => c.kind().to_string(),
        })
    })?;
    match args.resolve() {
        Ok(Command::Client { cfg, .. }) => Ok((cfg, None)),
        Ok(Command::Repeat { cfg, plan, .. }) => Ok((cfg, Some(plan))),
        Ok(_) => Err(PointError::NotClient),
        Err(e) => Err(PointError::Usage(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::grid::{PROTO, Settings};
    use crate::experiment::sweep::{self, ONE_RUN, check_congestion, split_args};

    fn args(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    /// The sweep's points resolved by the client's parser, as `main.rs` runs them.
    fn resolve(a: &sweep::SweepArgs) -> Result<Vec<(Settings, TestConfig, Plan)>, String> {
        sweep::resolve(a, &resolve_point)
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
}
