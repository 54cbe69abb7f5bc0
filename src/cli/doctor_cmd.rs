//! `netmeter doctor [--json] [-c HOST]`: this host's ceilings (interface, line rate,
//! MTU, offloads, socket-buffer limits, congestion control, CPUs, memory copy rate) and
//! what to change. Its own parser, reached when `doctor` is the first argument
//! (`cli::subcommand`); the facts come from `host::doctor::collect`.

use super::{ArgsError, Command};
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
                  Examples:\n  netmeter doctor\n  netmeter doctor -c 192.0.2.7\n  netmeter doctor --json > host.json"
)]
pub struct DoctorArgs {
    /// The host a test would reach: show the interface that leads to it.
    #[arg(short = 'c', long = "client", value_name = "HOST")]
    pub client: Option<String>,
    /// Write the facts as JSON.
    #[arg(short = 'J', long = "json")]
    pub json: bool,
}

/// Parse `doctor ...` (the arguments after the program name).
pub fn parse<I, T>(args: I) -> Result<Command, ArgsError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let a = DoctorArgs::try_parse_from(args).map_err(ArgsError::Clap)?;
    Ok(Command::Doctor {
        target: a.client,
        json: a.json,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::subcommand_of as run;

    #[test]
    fn doctor_is_a_subcommand() {
        match run(&["doctor", "-c", "peer", "--json"]) {
            Some(Ok(Command::Doctor { target, json })) => {
                assert_eq!(target.as_deref(), Some("peer"));
                assert!(json);
            }
            other => panic!("{other:?}"),
        }
        match run(&["doctor"]) {
            Some(Ok(Command::Doctor { target, json })) => assert!(target.is_none() && !json),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            run(&["doctor", "--bogus"]),
            Some(Err(ArgsError::Clap(_)))
        ));
        // `-c doctor` is a client test against a host named doctor.
        assert!(run(&["-c", "doctor"]).is_none());
    }
}
