//! `netmeter scenario FILE`: its own parser, reached when `scenario` is the first
//! argument (`cli::subcommand`). The file format is `scenario`'s; here the file is read,
//! the key loaded, and every flow's options parsed and resolved by the client's own
//! command-line parser (a flow from a host also through the third-party allow list, as
//! that host will check it). The run is `scenario::run`'s. docs/scenarios.md.

use super::third_party::{check_forwarded, wait_for};
use super::{ArgsError, Command, UsageError, parse_args, usage};
use crate::engine::client::ClientConfig;
use crate::scenario::run::RunPlan;
use crate::scenario::{MAX_FILE_BYTES, Origin, Scenario};
use clap::Parser;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Run named flows together: each with its own client options, from this host
/// ("local") or from a netmeter server (a third-party test), all starting at one
/// instant; reported per flow and in total.
#[derive(Debug, Parser)]
#[command(
    name = "netmeter scenario",
    bin_name = "netmeter scenario",
    disable_version_flag = true,
    after_help = "The file is TOML: [hosts.NAME] address = \"HOST[:PORT]\"; psk_file = \"KEY\"; [[flow]] name, from (\"local\" or a host), to (a host), args (client options), start (seconds). See docs/scenarios.md.\nA host down or refusing is a flow with its error; the others still run. Before the start each host's clock is measured against this one; a host that starts flows off by more than --clock-tolerance refuses the run (--ignore-clock runs anyway). Exit status 1 when no flow ran or a clock refused it; 2 with --fail-if-worse when a flow got worse than the baseline.\n\nExamples:\n  netmeter scenario examples/scenarios/facetime.toml\n  netmeter scenario --check call.toml\n  netmeter scenario -J -o run.json call.toml\n  netmeter scenario --baseline run.json --fail-if-worse 10 call.toml"
)]
pub struct ScenarioArgs {
    /// The scenario file (TOML).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Print the whole run as one JSON document (a `flows` list, each flow's report or error).
    #[arg(short = 'J', long = "json")]
    pub json: bool,
    /// Also write the JSON document to FILE.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Seconds from handing the flows out to their shared start (time for every host to
    /// set its test up).
    #[arg(long = "lead", value_name = "SEC", default_value_t = 3.0)]
    pub lead: f64,
    /// Judge each flow against the same-named flow of a previous run of this scenario
    /// (its -J document), figure by figure as `netmeter compare` does.
    #[arg(long = "baseline", value_name = "OLD.json")]
    pub baseline: Option<PathBuf>,
    /// With --baseline: exit with status 2 when a flow's figure got worse than the
    /// baseline's by more than PCT percent, with significance.
    #[arg(long = "fail-if-worse", value_name = "PCT", requires = "baseline")]
    pub fail_if_worse: Option<f64>,
    /// Draw the flows' latency CDFs, one line per flow on a shared chart (.svg or .png).
    #[arg(long = "plot", value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Check the file, reach every host with the key and measure its clock against this
    /// one, print what would run; run no flow.
    #[arg(long = "check")]
    pub check: bool,
    /// The most a host that starts flows may be off this controller's clock, ms (its
    /// offset plus the estimate's uncertainty; never beyond --lead).
    #[arg(long = "clock-tolerance", value_name = "MS", default_value_t = crate::scenario::clocks::DEFAULT_TOLERANCE_S * 1e3)]
    pub clock_tolerance_ms: f64,
    /// Run even when a host's clock is off by more than --clock-tolerance.
    #[arg(long = "ignore-clock")]
    pub ignore_clock: bool,
}

/// What `netmeter scenario` runs.
#[derive(Debug)]
pub struct ScenarioCommand {
    pub plan: RunPlan,
    pub json: bool,
    pub output: Option<PathBuf>,
    /// `--baseline`: the previous run's flows that ran, by name.
    pub baseline: Option<Vec<(String, crate::report::Report)>>,
    pub fail_if_worse: Option<f64>,
    pub plot: Option<PathBuf>,
    /// `--check`: measure and print, run no flow.
    pub check: bool,
}

/// Parse `scenario ...` (the arguments after the program name).
pub fn parse(args: &[std::ffi::OsString]) -> Result<Command, ArgsError> {
    let a = ScenarioArgs::try_parse_from(args).map_err(ArgsError::Clap)?;
    resolve(&a).map(Command::Scenario).map_err(ArgsError::Usage)
}

/// Read a scenario file: its text, capped.
pub fn read_file(path: &Path) -> Result<String, UsageError> {
    let cant =
        |e: std::io::Error| usage(format!("cannot read the scenario {}: {e}", path.display()));
    let f = std::fs::File::open(path).map_err(cant)?;
    let mut text = String::new();
    f.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(cant)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(usage(format!(
            "the scenario {} is larger than {} KiB",
            path.display(),
            MAX_FILE_BYTES / 1024
        )));
    }
    Ok(text)
}

/// The client test `netmeter -c HOST -p PORT ARGS...` would run.
fn client_config(host: &str, port: u16, args: &[String]) -> Result<ClientConfig, String> {
    let mut argv: Vec<String> = vec![
        "netmeter".into(),
        "-c".into(),
        host.into(),
        "-p".into(),
        port.to_string(),
    ];
    argv.extend(args.iter().cloned());
    let parsed = parse_args(&argv).map_err(|e| match e {
        ArgsError::Usage(u) => u.0,
        ArgsError::Clap(c) => c
            .to_string()
            .lines()
            .next()
            .unwrap_or("unreadable options")
            .trim_start_matches("error: ")
            .to_string(),
    })?;
    match parsed.resolve().map_err(|e| e.0)? {
        Command::Client {
            cfg,
            logfile: None,
            plot: None,
            csv: None,
            stamps: None,
        } if !cfg.spec.until_interrupted() => Ok(cfg),
        Command::Client { cfg, .. } if cfg.spec.until_interrupted() => {
            Err("a flow must end by itself; -t 0 would run until stopped".into())
        }
        _ => {
            Err("a flow is one plain client test (no --logfile, --plot, --csv, --repeat...)".into())
        }
    }
}

/// Every flow's options parsed and resolved as its client will (a flow from a host also
/// through the third-party allow list): per flow, the local client test (`None` for a
/// flow from a host) and how long its test may take.
pub fn check_flows(s: &Scenario) -> Result<FlowChecks, String> {
    let mut local = Vec::new();
    let mut waits = Vec::new();
    for f in &s.flows {
        let to = &s.hosts[f.to];
        let bad = |e: String| format!("line {}: args of flow '{}': {e}", f.line, f.name);
        let cfg = match f.from {
            Origin::Local => client_config(&to.host, to.port, &f.args).map_err(bad)?,
            Origin::Host(_) => {
                check_forwarded(&f.args).map_err(bad)?;
                client_config("127.0.0.1", to.port, &f.args).map_err(bad)?
            }
        };
        waits.push(Duration::from_secs_f64(wait_for(&cfg)));
        local.push((f.from == Origin::Local).then_some(cfg));
    }
    Ok((local, waits))
}

/// Per flow: the local client test, and the longest its test may take.
pub type FlowChecks = (Vec<Option<ClientConfig>>, Vec<Duration>);

/// A parsed scenario checked flow by flow, its key read (`psk_file` relative to `base`,
/// the scenario's folder): the file's mistakes named by line.
pub fn plan_of(s: Scenario, base: &Path, lead: Duration) -> Result<RunPlan, String> {
    let (local, waits) = check_flows(&s)?;
    let probes = s
        .hosts
        .iter()
        .map(|h| client_config(&h.host, h.port, &PROBE_ARGS.map(String::from)))
        .collect::<Result<Vec<_>, _>>()?;
    let psk = match &s.psk_file {
        Some(p) => {
            Some(crate::auth::psk::Psk::read(&base.join(p)).map_err(|e| format!("psk_file: {e}"))?)
        }
        None => None,
    };
    Ok(RunPlan {
        scenario: s,
        local,
        waits,
        psk,
        lead,
        connect_timeout: Duration::from_secs(10),
        clock: crate::clock::system(),
        probes,
        clock_tolerance_s: crate::scenario::clocks::DEFAULT_TOLERANCE_S,
        ignore_clock: false,
    })
}

/// The test that measures a host's clock: its setup carries netmeter's clock probes
/// (`--trip-times`), its data is one block of 1 KiB.
const PROBE_ARGS: [&str; 5] = ["--trip-times", "-n", "1K", "-l", "1K"];

/// The file read and parsed, the key loaded, every flow's options checked.
pub fn resolve(a: &ScenarioArgs) -> Result<ScenarioCommand, UsageError> {
    if !(0.5..=60.0).contains(&a.lead) {
        return Err(usage("--lead must be 0.5 to 60 seconds"));
    }
    if let Some(p) = &a.plot {
        super::tools::check_plot_file(p, "--plot")?;
    }
    let text = read_file(&a.file)?;
    let at = |e: String| usage(format!("{}: {e}", a.file.display()));
    let s = Scenario::parse(&text).map_err(|e| at(e.0))?;
    let base = a.file.parent().unwrap_or(Path::new("."));
    if !(a.clock_tolerance_ms.is_finite() && a.clock_tolerance_ms > 0.0) {
        return Err(usage(format!(
            "--clock-tolerance must be a number of milliseconds above 0, not {}",
            a.clock_tolerance_ms
        )));
    }
    let mut plan = plan_of(s, base, Duration::from_secs_f64(a.lead)).map_err(at)?;
    plan.clock_tolerance_s = a.clock_tolerance_ms / 1e3;
    plan.ignore_clock = a.ignore_clock;
    if let Some(p) = a.fail_if_worse
        && !(0.0..=1000.0).contains(&p)
    {
        return Err(usage(format!(
            "--fail-if-worse must be a percentage from 0 to 1000, not {p}"
        )));
    }
    let baseline = match &a.baseline {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| usage(format!("--baseline: cannot read {}: {e}", p.display())))?;
            Some(
                crate::scenario::judge::baseline_flows(&text)
                    .map_err(|e| usage(format!("--baseline {}: {e}", p.display())))?,
            )
        }
        None => None,
    };
    Ok(ScenarioCommand {
        plan,
        json: a.json,
        output: a.output.clone(),
        baseline,
        fail_if_worse: a.fail_if_worse,
        plot: a.plot.clone(),
        check: a.check,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn parse_words(words: &[&str]) -> Result<ScenarioCommand, String> {
        let a =
            ScenarioArgs::try_parse_from(std::iter::once("scenario").chain(words.iter().copied()))
                .map_err(|e| e.to_string())?;
        resolve(&a).map_err(|e| e.0)
    }

    #[test]
    fn flows_are_parsed_like_command_lines_and_mistakes_name_the_line() {
        let dir = Dir(std::env::temp_dir().join(format!("nm-scenario-{}", std::process::id())));
        std::fs::create_dir_all(&dir.0).unwrap();
        std::fs::write(dir.0.join("key"), "0123456789abcdef0123456789abcdef\n").unwrap();
        let file = dir.0.join("s.toml");
        let head = "psk_file = \"key\"\n[hosts.a]\naddress = \"127.0.0.1:5300\"\n[hosts.b]\naddress = \"127.0.0.1:5400\"\n";
        let write = |flows: &str| std::fs::write(&file, format!("{head}{flows}")).unwrap();
        let f = file.to_str().unwrap();
        write(
            "[[flow]]\nname = \"v\"\nfrom = \"a\"\nto = \"b\"\nargs = \"-u -b 1M -t 2\"\n[[flow]]\nname = \"l\"\nfrom = \"local\"\nto = \"a\"\nargs = \"-t 1 -R\"\n",
        );
        let c = parse_words(&[f, "-J"]).unwrap();
        assert!(c.json);
        assert!(c.plan.psk.is_some());
        assert!(c.plan.local[0].is_none());
        let l = c.plan.local[1].as_ref().unwrap();
        assert_eq!((l.host.as_str(), l.port), ("127.0.0.1", 5300));
        assert_eq!(l.spec.direction, crate::spec::Direction::Reverse);
        assert_eq!(
            c.plan.waits,
            [Duration::from_secs(62), Duration::from_secs(61)]
        );
        let e = parse_words(&[f, "--fail-if-worse", "5"]).err().unwrap();
        assert!(e.contains("--baseline"), "{e}");
        let e = parse_words(&[f, "--baseline", f]).err().unwrap();
        assert!(e.contains("--baseline") && e.contains("not JSON"), "{e}");
        for (flows, says) in [
            (
                "[[flow]]\nname = \"v\"\nfrom = \"a\"\nto = \"b\"\nargs = \"-F /etc/passwd\"\n",
                "line 6: args of flow 'v': -F cannot",
            ),
            (
                "[[flow]]\nname = \"v\"\nfrom = \"local\"\nto = \"b\"\nargs = \"-t -1\"\n",
                "line 6: args of flow 'v': ",
            ),
            (
                "[[flow]]\nname = \"v\"\nfrom = \"local\"\nto = \"b\"\nargs = \"-t 0\"\n",
                "-t 0",
            ),
            (
                "[[flow]]\nname = \"v\"\nfrom = \"local\"\nto = \"b\"\nargs = \"--bogus\"\n",
                "--bogus",
            ),
            (
                "[[flow]]\nname = \"v\"\nfrom = \"local\"\nto = \"c\"\n",
                "line 9: to:",
            ),
        ] {
            write(flows);
            let e = parse_words(&[f]).err().unwrap_or_default();
            assert!(e.starts_with(f) && e.contains(says), "{flows}\n → {e}");
        }
        std::fs::write(&file, "psk_file = \"nokey\"\n[hosts.a]\naddress = \"a\"\n[[flow]]\nname = \"v\"\nfrom = \"local\"\nto = \"a\"\n").unwrap();
        assert!(parse_words(&[f]).err().unwrap().contains("psk_file"));
        let e = parse_words(&["/nonexistent/s.toml"]).err().unwrap();
        assert!(
            e.contains("cannot read the scenario /nonexistent/s.toml"),
            "{e}"
        );
        let e = parse_words(&[f, "--lead", "0"]).err().unwrap();
        assert!(e.contains("--lead"), "{e}");
    }

    /// Two UDP flows from one host to one server starting together run: the server
    /// tells their streams apart by cookie (they were refused while it matched them by
    /// address).
    #[test]
    fn udp_flows_sharing_a_server_and_a_start_are_accepted() {
        let s = Scenario::parse(
            "[hosts.b]\naddress = \"127.0.0.1:5400\"\n\
             [[flow]]\nname = \"video\"\nfrom = \"local\"\nto = \"b\"\nargs = \"-u -b 4M -t 2\"\n\
             [[flow]]\nname = \"audio\"\nfrom = \"local\"\nto = \"b\"\nargs = \"-u -b 200K -t 2\"\n",
        )
        .unwrap();
        let (local, _) = check_flows(&s).unwrap();
        assert!(local.iter().all(Option::is_some));
    }

    /// Every shipped example parses and each flow's options resolve (the keys they name
    /// are the user's, so they are not read here).
    #[test]
    fn every_example_scenario_parses() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/scenarios");
        let mut seen = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_none_or(|x| x != "toml") {
                continue;
            }
            let s = Scenario::parse(&read_file(&p).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            check_flows(&s).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            seen += 1;
        }
        assert!(seen >= 3, "{seen} examples in {}", dir.display());
    }
}
