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
use super::{ArgsError, Command};
use clap::{CommandFactory, Parser, ValueEnum};
use std::io::Write;

/// What to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Asset {
    /// netmeter(1)
    Man,
    /// netmeter-plot(1)
    ManPlot,
    /// netmeter-report(1)
    ManReport,
    /// netmeter-csv(1)
    ManCsv,
    /// netmeter-compare(1)
    ManCompare,
    /// netmeter-sweep(1)
    ManSweep,
    /// netmeter-mesh(1)
    ManMesh,
    /// netmeter-scenario(1)
    ManScenario,
    /// netmeter-rpm(1)
    ManRpm,
    /// netmeter-doctor(1)
    ManDoctor,
    /// netmeter-rpm-server(1)
    ManRpmServer,
    /// netmeter-generate(1)
    ManGenerate,
    /// netmeter-iperf2(1)
    ManIperf2,
    Bash,
    Zsh,
    Fish,
    /// A fresh pre-shared key for --psk-file (256 random bits, base64)
    Psk,
}

/// Every man page: the asset, the page's name and the subcommand it documents
/// (`None`: netmeter(1)). `scripts/build-deb.sh` installs each (a test checks it does).
pub const MAN_PAGES: &[(Asset, &str, Option<&str>)] = &[
    (Asset::Man, "netmeter", None),
    (Asset::ManPlot, "netmeter-plot", Some("plot")),
    (Asset::ManReport, "netmeter-report", Some("report")),
    (Asset::ManCsv, "netmeter-csv", Some("csv")),
    (Asset::ManCompare, "netmeter-compare", Some("compare")),
    (Asset::ManSweep, "netmeter-sweep", Some("sweep")),
    (Asset::ManMesh, "netmeter-mesh", Some("mesh")),
    (Asset::ManScenario, "netmeter-scenario", Some("scenario")),
    (Asset::ManRpm, "netmeter-rpm", Some("rpm")),
    (Asset::ManDoctor, "netmeter-doctor", Some("doctor")),
    (
        Asset::ManRpmServer,
        "netmeter-rpm-server",
        Some("rpm-server"),
    ),
    (Asset::ManGenerate, "netmeter-generate", Some("generate")),
    (Asset::ManIperf2, "netmeter-iperf2", Some("iperf2")),
];

/// Write a man page or a shell completion script to standard output.
#[derive(Debug, Parser)]
#[command(
    name = "netmeter generate",
    bin_name = "netmeter generate",
    disable_version_flag = true,
    after_help = "Examples:\n  netmeter generate man > netmeter.1 && man -l netmeter.1\n  netmeter generate bash > /etc/bash_completion.d/netmeter"
)]
struct GenerateArgs {
    /// What to write: a man page (man for netmeter(1), man-SUBCOMMAND for each
    /// subcommand's page) or a completion script (bash, zsh, fish).
    #[arg(value_enum, value_name = "WHAT")]
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
    super::help::command()
        .version(env!("CARGO_PKG_VERSION"))
        .disable_help_subcommand(true)
        .subcommands(super::tools::commands())
        .subcommand(csv_command())
        .subcommand(compare_command())
        .subcommand(sweep_command())
        .subcommand(
            super::mesh_cmd::MeshArgs::command()
                .name("mesh")
                .bin_name("netmeter mesh")
                .version(env!("CARGO_PKG_VERSION")),
        )
        .subcommand(
            super::scenario_cmd::ScenarioArgs::command()
                .name("scenario")
                .bin_name("netmeter scenario")
                .version(env!("CARGO_PKG_VERSION")),
        )
        .subcommand(
            super::rpm_cmd::RpmArgs::command()
                .name("rpm")
                .bin_name("netmeter rpm")
                .version(env!("CARGO_PKG_VERSION")),
        )
        .subcommand(doctor_command())
        .subcommand(
            super::rpm_server_cmd::RpmServerArgs::command()
                .name("rpm-server")
                .bin_name("netmeter rpm-server")
                .version(env!("CARGO_PKG_VERSION")),
        )
        .subcommand(
            super::iperf2::Iperf2Args::command()
                .name("iperf2")
                .bin_name("netmeter iperf2")
                .about("iperf 2's command line and output (also as a link named iperf); see docs/iperf2.md")
                .version(env!("CARGO_PKG_VERSION")),
        )
        .subcommand(
            GenerateArgs::command()
                .name("generate")
                .bin_name("netmeter generate")
                .version(env!("CARGO_PKG_VERSION")),
        )
}

fn compare_command() -> clap::Command {
    super::compare_cmd::CompareArgs::command()
        .name("compare")
        .bin_name("netmeter compare")
        .version(env!("CARGO_PKG_VERSION"))
}

fn sweep_command() -> clap::Command {
    super::sweep_cmd::sweep_command().version(env!("CARGO_PKG_VERSION"))
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
        _ => return out.write_all(man_page(asset).as_bytes()),
    };
    clap_complete::generate(shell, &mut command(), "netmeter", out);
    Ok(())
}

/// The man page `asset` (netmeter(1) for a completion), as roff text.
pub fn man_page(asset: Asset) -> String {
    let whole = command();
    let page = MAN_PAGES.iter().find(|p| p.0 == asset);
    // MAN_PAGES names only subcommands of command() (a unit test renders each).
    match page.and_then(|&(_, name, sub)| Some((name, whole.find_subcommand(sub?)?))) {
        Some((name, c)) => {
            super::manpage::render(c.clone().name(name), page.and_then(|p| p.2), &[])
        }
        None => {
            let subpages: Vec<&str> = MAN_PAGES
                .iter()
                .filter(|p| p.2.is_some())
                .map(|p| p.1)
                .collect();
            super::manpage::render(whole, None, &subpages)
        }
    }
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
        let longs: Vec<String> = super::super::Args::command()
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

    /// Issue 19 item 12: every page has its sections; every netmeter page a page names
    /// is one `generate` writes (and build-deb.sh installs); the synopsis names the
    /// values; examples are kept verbatim, not filled into one paragraph.
    #[test]
    fn man_pages_are_whole_and_refer_only_to_pages_that_exist() {
        let script = include_str!("../../scripts/build-deb.sh");
        let produced: Vec<String> = MAN_PAGES.iter().map(|p| format!("{}(1)", p.1)).collect();
        for &(asset, name, _) in MAN_PAGES {
            let page = text(asset);
            assert!(page.contains(&format!(".TH {name} 1")), "{name}");
            for section in [
                "NAME",
                "SYNOPSIS",
                "DESCRIPTION",
                "OPTIONS",
                "EXAMPLES",
                "EXIT STATUS",
                "SEE ALSO",
            ] {
                let sh = match section.contains(' ') {
                    true => format!(".SH \"{section}\"\n"),
                    false => format!(".SH {section}\n"),
                };
                assert!(page.contains(&sh), "{name}: no {section}");
            }
            assert!(!page.contains(".SH EXTRA"), "{name}");
            // roff writes netmeter-mesh(1) as netmeter\-mesh(1).
            let plain = page.replace("\\-", "-");
            for (i, _) in plain.match_indices("netmeter-") {
                let rest = &plain[i..];
                let Some(end) = rest.find("(1)") else {
                    continue;
                };
                let reference = &rest[..end + 3];
                if reference[..end]
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '-')
                {
                    assert!(
                        produced.contains(&reference.to_string()),
                        "{name} refers to {reference}"
                    );
                }
            }
            // The .deb installs it.
            let value = asset.to_possible_value().unwrap();
            let line = format!("generate {} ", value.get_name());
            assert!(
                script.contains(&line),
                "build-deb.sh does not install {name}: {line}"
            );
            // Examples: command lines in no-fill mode.
            let ex = &page[page.find(".SH EXAMPLES").unwrap()..];
            let ex = &ex[..ex.find(".SH \"EXIT STATUS\"").unwrap()];
            if name != "netmeter" {
                assert!(ex.contains(".nf\n") && ex.contains(".fi\n"), "{name}: {ex}");
            }
        }
        // netmeter(1) names every subcommand's page.
        let main = text(Asset::Man).replace("\\-", "-");
        for p in &produced[1..] {
            assert!(main.contains(p.as_str()), "netmeter(1) does not name {p}");
        }
        // Synopses with the values' names.
        assert!(main.contains("netmeter\\fR -c HOST [OPTIONS]"), "{main}");
        let csv = text(Asset::ManCsv).replace("\\-", "-");
        assert!(
            csv.contains("\\fI--fields\\fR") || csv.contains("--fields\\fR \\fIa,b,c"),
            "{csv}"
        );
        assert!(csv.contains("\\fIFILE\\fR"), "{csv}");
        let mesh = text(Asset::ManMesh).replace("\\-", "-");
        assert!(mesh.contains("[-- \\fITEST OPTIONS\\fR...]"), "{mesh}");
        // The mesh example is one line, as typed.
        assert!(
            mesh.contains("\nnetmeter mesh --psk-file key --hosts hosts.txt -J -o mesh.json --plot mesh.svg -- -t 10 -P 4\n"),
            "{mesh}"
        );
    }
}
