//! `netmeter doctor [--json] [-c HOST]`: this host's ceilings (interface, line rate,
//! MTU, offloads, socket-buffer limits, congestion control, CPUs, memory copy rate) and
//! what to change. Its own parser, reached when `doctor` is the first argument
//! (`cli::subcommand`); the facts come from `host::doctor::collect`.

use super::{ArgsError, Command, usage};
use crate::host::facts::LineRate;
use clap::Parser;

/// Show this host's limits for network tests, with warnings that name the sysctl or
/// command to change them.
#[derive(Debug, Parser)]
#[command(
    name = "netmeter doctor",
    bin_name = "netmeter doctor",
    disable_version_flag = true,
    after_help = "With -c HOST, the interface shown is the one the kernel routes HOST through \
                  (no packet is sent). The memory copy measurement takes about 100 ms.\n\n\
                  Examples:\n  netmeter doctor\n  netmeter doctor -c 192.0.2.7\n  netmeter doctor -c 192.0.2.7 --line-rate 25G\n  netmeter doctor --json > host.json"
)]
pub struct DoctorArgs {
    /// The host a test would reach: show the interface that leads to it.
    #[arg(short = 'c', long = "client", value_name = "HOST")]
    pub client: Option<String>,
    /// Write the facts as JSON.
    #[arg(short = 'J', long = "json")]
    pub json: bool,
    /// The line rate to size buffers and judge the memory copy rate by, in bits/s (25G),
    /// instead of the interface's link speed (unknown for virtual devices).
    #[arg(long = "line-rate", value_name = "RATE")]
    pub line_rate: Option<String>,
}

/// Parse `doctor ...` (the arguments after the program name).
pub fn parse<I, T>(args: I) -> Result<Command, ArgsError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let a = DoctorArgs::try_parse_from(args).map_err(ArgsError::Clap)?;
    let line_rate = match a.line_rate.as_deref().map(LineRate::parse) {
        None => None,
        Some(Ok(LineRate::Given(r))) => Some(r),
        // The doctor always measures the memory copy rate; as its own peak it says nothing.
        Some(Ok(LineRate::MemoryCopy(_))) => {
            return Err(ArgsError::Usage(usage(
                "netmeter doctor --line-rate takes a rate such as 25G; the memory copy rate is always measured and shown",
            )));
        }
        Some(Err(e)) => return Err(ArgsError::Usage(usage(e))),
    };
    Ok(Command::Doctor {
        target: a.client,
        json: a.json,
        line_rate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::subcommand_of as run;

    #[test]
    fn doctor_is_a_subcommand() {
        match run(&["doctor", "-c", "peer", "--json", "--line-rate", "25G"]) {
            Some(Ok(Command::Doctor {
                target,
                json,
                line_rate,
            })) => {
                assert_eq!(target.as_deref(), Some("peer"));
                assert!(json);
                assert_eq!(line_rate, Some(25_000_000_000));
            }
            other => panic!("{other:?}"),
        }
        match run(&["doctor"]) {
            Some(Ok(Command::Doctor {
                target,
                json,
                line_rate,
            })) => assert!(target.is_none() && !json && line_rate.is_none()),
            other => panic!("{other:?}"),
        }
        for bad in ["fast", "memcpy"] {
            assert!(
                matches!(
                    run(&["doctor", "--line-rate", bad]),
                    Some(Err(ArgsError::Usage(_)))
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            run(&["doctor", "--bogus"]),
            Some(Err(ArgsError::Clap(_)))
        ));
        // `-c doctor` is a client test against a host named doctor.
        assert!(run(&["-c", "doctor"]).is_none());
    }
}
