//! `netmeter generate KIND`: the man pages and shell completions, rendered from the same
//! clap definitions that parse the command line (clap_mangen, clap_complete), so they
//! cannot drift from the options; and `netmeter generate psk`, a fresh `--psk-file` key
//! (32 random bytes from the kernel, base64). `scripts/build-deb.sh` runs it with the binary it
//! packages (ripgrep's `rg --generate` does the same).
//!
//! Not from `build.rs`: the flag definitions (`cli::Args`) sit beside their resolution
//! into engine configurations and would drag the whole crate into the build script.

use super::csv_cmd::CsvArgs;
use super::doctor_cmd::DoctorArgs;
use super::{Args, ArgsError, Command};
use clap::{CommandFactory, Parser, ValueEnum};
use std::io::Write;

/// What to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Asset {
    /// netmeter(1)
    Man,
    /// netmeter-csv(1)
    ManCsv,
    /// netmeter-compare(1)
    ManCompare,
    /// netmeter-sweep(1)
    ManSweep,
    /// netmeter-doctor(1)
    ManDoctor,
    Bash,
    Zsh,
    Fish,
    /// A fresh pre-shared key for --psk-file (256 random bits, base64)
    Psk,
}

/// Write a man page or a shell completion script to standard output.
#[derive(Debug, Parser)]
#[command(
    name = "netmeter generate",
    bin_name = "netmeter generate",
    disable_version_flag = true
)]
struct GenerateArgs {
    #[arg(value_enum)]
    asset: Asset,
}

/// Parse `generate ...` (the arguments after the program name).
pub fn parse<I, T>(args: I) -> Result<Command, ArgsError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let a = GenerateArgs::try_parse_from(args).map_err(ArgsError::Clap)?;
    Ok(Command::Generate(a.asset))
}

/// The whole command line as users see it: iperf3's flags and the subcommands.
pub fn command() -> clap::Command {
    Args::command()
        .version(env!("CARGO_PKG_VERSION"))
        .disable_help_subcommand(true)
        .subcommand(csv_command())
        .subcommand(compare_command())
        .subcommand(sweep_command())
        .subcommand(doctor_command())
        .subcommand(
            super::mesh_cmd::MeshArgs::command()
                .name("mesh")
                .bin_name("netmeter mesh")
                .version(env!("CARGO_PKG_VERSION")),
        )
        .subcommands(super::tools::commands())
}

fn compare_command() -> clap::Command {
    crate::experiment::cli::CompareArgs::command()
        .name("compare")
        .bin_name("netmeter compare")
        .version(env!("CARGO_PKG_VERSION"))
}

fn sweep_command() -> clap::Command {
    crate::experiment::cli::sweep_command().version(env!("CARGO_PKG_VERSION"))
}

fn doctor_command() -> clap::Command {
    DoctorArgs::command()
        .name("doctor")
        .bin_name("netmeter doctor")
        .version(env!("CARGO_PKG_VERSION"))
}

fn csv_command() -> clap::Command {
    CsvArgs::command()
        .name("csv")
        .bin_name("netmeter csv")
        .version(env!("CARGO_PKG_VERSION"))
}

/// Render `asset`.
pub fn render(asset: Asset, out: &mut dyn Write) -> std::io::Result<()> {
    use clap_complete::Shell;
    let shell = match asset {
        Asset::Man => return clap_mangen::Man::new(command()).render(out),
        Asset::ManCsv => {
            let csv = csv_command().name("netmeter-csv");
            return clap_mangen::Man::new(csv).render(out);
        }
        Asset::ManCompare => {
            let c = compare_command().name("netmeter-compare");
            return clap_mangen::Man::new(c).render(out);
        }
        Asset::ManSweep => {
            let c = sweep_command().name("netmeter-sweep");
            return clap_mangen::Man::new(c).render(out);
        }
        Asset::ManDoctor => {
            let doctor = doctor_command().name("netmeter-doctor");
            return clap_mangen::Man::new(doctor).render(out);
        }
        Asset::Psk => {
            use base64::Engine as _;
            let mut key = [0u8; 32];
            crate::sock::random_bytes(&mut key)?;
            let text = base64::engine::general_purpose::STANDARD.encode(key);
            return writeln!(out, "{text}");
        }
        Asset::Bash => Shell::Bash,
        Asset::Zsh => Shell::Zsh,
        Asset::Fish => Shell::Fish,
    };
    clap_complete::generate(shell, &mut command(), "netmeter", out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `generate psk` writes a key `--psk-file` takes, a new one each time.
    #[test]
    fn generated_keys_are_strong_and_fresh() {
        let (a, b) = (text(Asset::Psk), text(Asset::Psk));
        assert_ne!(a, b);
        assert_eq!(a.trim_end().len(), 44, "{a}");
        assert_eq!(
            crate::auth::psk::strength_problem(a.trim_end().as_bytes()),
            None
        );
        assert!(crate::auth::psk::Psk::new(a.trim_end().as_bytes()).is_ok());
    }

    fn text(asset: Asset) -> String {
        let mut v = Vec::new();
        render(asset, &mut v).unwrap();
        String::from_utf8(v).unwrap()
    }

    /// Every long option of the parser is in the man page and in each completion.
    #[test]
    fn every_option_is_documented_and_completed() {
        let man = text(Asset::Man);
        assert!(man.starts_with(".ie \\n(.g .ds Aq"), "{}", &man[..80]);
        assert!(man.contains(".TH netmeter 1"));
        let (bash, zsh, fish) = (text(Asset::Bash), text(Asset::Zsh), text(Asset::Fish));
        let longs: Vec<String> = Args::command()
            .get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_long().map(String::from))
            .collect();
        assert!(longs.len() > 60, "{}", longs.len());
        for l in &longs {
            // roff escapes '-' as '\-'.
            let in_man = man.contains(&format!("\\-\\-{}", l.replace('-', "\\-")));
            assert!(in_man, "--{l} not in the man page");
            assert!(bash.contains(&format!("--{l}")), "--{l} not in bash");
            assert!(zsh.contains(&format!("--{l}")), "--{l} not in zsh");
            assert!(fish.contains(&format!("-l {l}")), "--{l} not in fish");
        }
        // The csv subcommand and its flags.
        assert!(bash.contains("netmeter,csv)"), "bash");
        assert!(
            !bash.contains("netmeter,help)"),
            "no help subcommand: -h is the help"
        );
        assert!(
            fish.contains("__fish_netmeter_using_subcommand csv\" -l fields"),
            "fish"
        );
        let csv_man = text(Asset::ManCsv);
        assert!(csv_man.contains(".TH netmeter-csv 1"), "{csv_man}");
        assert!(csv_man.contains("\\-\\-fields"));
        // The doctor subcommand likewise.
        assert!(bash.contains("netmeter,doctor)"), "bash");
        assert!(
            fish.contains("__fish_netmeter_using_subcommand doctor\" -s J -l json"),
            "fish"
        );
        let doctor_man = text(Asset::ManDoctor);
        assert!(doctor_man.contains(".TH netmeter-doctor 1"), "{doctor_man}");
        assert!(doctor_man.contains("\\-\\-json"));
    }

    /// compare, sweep, plot and report are completed with their own flags, and
    /// compare and sweep have their own man pages.
    #[test]
    fn experiment_and_tool_subcommands_are_generated() {
        let (bash, zsh, fish) = (text(Asset::Bash), text(Asset::Zsh), text(Asset::Fish));
        for sub in ["compare", "sweep", "plot", "report"] {
            assert!(bash.contains(&format!("netmeter,{sub})")), "bash {sub}");
            assert!(zsh.contains(&format!("({sub})")), "zsh {sub}");
            assert!(
                fish.contains(&format!("using_subcommand {sub}")),
                "fish {sub}"
            );
        }
        assert!(
            fish.contains("using_subcommand compare\" -l fail-if-worse"),
            "fish"
        );
        assert!(fish.contains("using_subcommand sweep\" -l proto"), "fish");
        assert!(fish.contains("using_subcommand sweep\" -l repeat"), "fish");
        let man = text(Asset::ManCompare);
        assert!(man.contains(".TH netmeter-compare 1"), "{man}");
        for flag in ["fail\\-if\\-worse", "plot", "json"] {
            assert!(man.contains(&format!("\\-\\-{flag}")), "{flag}");
        }
        assert!(man.contains("Welch"), "the verdicts are explained");
        let man = text(Asset::ManSweep);
        assert!(man.contains(".TH netmeter-sweep 1"), "{man}");
        for flag in ["proto", "repeat", "parallel", "plot"] {
            assert!(man.contains(&format!("\\-\\-{flag}")), "{flag}");
        }
        assert!(man.contains("netmeter sweep \\-c HOST"), "the usage");
    }
}
