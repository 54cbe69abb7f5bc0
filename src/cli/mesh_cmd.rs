//! `netmeter mesh HOST[:PORT]... | --hosts FILE [-- TEST OPTIONS]`: its own parser,
//! reached when `mesh` is the first argument (`cli::subcommand`). The run is `mesh`'s.

use super::third_party::{check_forwarded, config_for, host_port, wait_for};
use super::{ArgsError, Command, UsageError, usage};
use crate::mesh::{Host, MeshPlan, all_pairs};
use clap::Parser;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Test every ordered pair of hosts: each test is run by its source host (a netmeter
/// server with --psk-file and --allow-third-party) toward the target, one test per
/// host at a time; prints a matrix (throughput, loss, RTT) or one JSON document.
#[derive(Debug, Parser)]
#[command(
    name = "netmeter mesh",
    bin_name = "netmeter mesh",
    disable_version_flag = true,
    after_help = "A host down or refusing is a cell with its error; Ctrl-C stops and writes what ran.\n\nExamples:\n  netmeter mesh --psk-file key 10.0.0.1 10.0.0.2 10.0.0.3 -- -t 5\n  netmeter mesh --psk-file key --hosts hosts.txt -J -o mesh.json --plot mesh.svg -- -t 10 -P 4"
)]
pub struct MeshArgs {
    /// The hosts, HOST or HOST:PORT (an IPv6 HOST in brackets), each a netmeter server; the same names
    /// are the targets the source hosts connect to.
    #[arg(value_name = "HOST[:PORT]")]
    pub hosts: Vec<String>,
    /// Read the hosts from FILE, one per line (# starts a comment).
    #[arg(long = "hosts", value_name = "FILE")]
    pub hosts_file: Option<PathBuf>,
    /// Test only these pairs: lines "SOURCE TARGET", each as written in the host list.
    #[arg(long = "pairs", value_name = "FILE")]
    pub pairs_file: Option<PathBuf>,
    /// The key the hosts were started with (--psk-file on each server).
    #[arg(long = "psk-file", value_name = "FILE")]
    pub psk_file: Option<PathBuf>,
    /// Most tests touching one host at once (as source or target); above 1, start the
    /// servers with --max-tests N or the extra tests find them busy.
    #[arg(long = "per-host", value_name = "N", default_value_t = 1)]
    pub per_host: usize,
    /// Start the tests that run at once together: the pairs handed out as one wave
    /// (as many as --per-host allows) all get --txstart-time SEC seconds later, and the
    /// next wave waits until the whole wave has ended.
    #[arg(long = "sync-start", value_name = "SEC")]
    pub sync_start: Option<f64>,
    /// Tries more for a pair whose server is busy.
    #[arg(long = "retries", value_name = "N", default_value_t = 5)]
    pub retries: u32,
    /// Seconds between tries of a busy pair.
    #[arg(long = "retry-gap", value_name = "SEC", default_value_t = 2.0)]
    pub retry_gap: f64,
    /// Print the whole run as one JSON document (every pair's report or error).
    #[arg(short = 'J', long = "json")]
    pub json: bool,
    /// Also write the JSON document to FILE.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Draw the throughput matrix as a heatmap (.svg or .png).
    #[arg(long = "plot", value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// The client options of every test, after `--` (e.g. `-- -t 5 -P 2`).
    #[arg(last = true, value_name = "TEST OPTIONS")]
    pub test: Vec<String>,
}

/// What `netmeter mesh` runs.
#[derive(Debug)]
pub struct MeshCommand {
    pub plan: MeshPlan,
    pub json: bool,
    pub output: Option<PathBuf>,
    pub plot: Option<PathBuf>,
}

/// Parse `mesh ...` (the arguments after the program name).
pub fn parse(args: &[std::ffi::OsString]) -> Result<Command, ArgsError> {
    let a = MeshArgs::try_parse_from(args).map_err(ArgsError::Clap)?;
    resolve(&a).map(Command::Mesh).map_err(ArgsError::Usage)
}

fn read_lines(path: &Path, what: &str) -> Result<Vec<String>, UsageError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        usage(format!(
            "cannot read the {what} file {}: {e}",
            path.display()
        ))
    })?;
    Ok(text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim().to_string())
        .filter(|l| !l.is_empty())
        .collect())
}

/// The hosts and pairs, the key, the test options checked as a source host will.
pub fn resolve(a: &MeshArgs) -> Result<MeshCommand, UsageError> {
    let mut typed = a.hosts.clone();
    if let Some(f) = &a.hosts_file {
        typed.extend(read_lines(f, "hosts")?);
    }
    if typed.len() < 2 {
        return Err(usage(
            "a mesh needs at least two hosts (HOST[:PORT]... or --hosts FILE)",
        ));
    }
    let mut hosts = Vec::new();
    for t in &typed {
        let (host, port) = host_port(t).map_err(usage)?;
        let h = Host { host, port };
        if hosts.contains(&h) {
            return Err(usage(format!("{t} is listed twice")));
        }
        hosts.push(h);
    }
    let pairs = match &a.pairs_file {
        None => all_pairs(hosts.len()),
        Some(f) => parse_pairs(&read_lines(f, "pairs")?, &typed, &hosts)?,
    };
    let psk_file = a.psk_file.as_deref().ok_or_else(|| {
        usage("netmeter mesh needs --psk-file: the hosts run tests only for a controller holding their key")
    })?;
    let psk = crate::auth::psk::Psk::read(psk_file).map_err(usage)?;
    if let Some(s) = a.sync_start {
        if !(0.5..=60.0).contains(&s) {
            return Err(usage("--sync-start must be 0.5 to 60 seconds"));
        }
        if a.test.iter().any(|t| t.starts_with("--txstart-time")) {
            return Err(usage(
                "--sync-start sets each test's --txstart-time; give one of them, not both",
            ));
        }
    }
    let sync_start = a.sync_start.map(Duration::from_secs_f64);
    check_forwarded(&a.test).map_err(usage)?;
    let probe = crate::wire::ThirdPartyRequest {
        target: "127.0.0.1".into(),
        port: 5201,
        args: a.test.clone(),
    };
    let cfg = config_for(&probe, std::net::IpAddr::from([127, 0, 0, 1])).map_err(usage)?;
    if !(0.0..=600.0).contains(&a.retry_gap) {
        return Err(usage("--retry-gap must be 0 to 600 seconds"));
    }
    if a.per_host == 0 {
        return Err(usage("--per-host must be at least 1"));
    }
    if let Some(p) = &a.plot {
        super::tools::check_plot_file(p, "--plot")?;
    }
    Ok(MeshCommand {
        plan: MeshPlan {
            hosts,
            pairs,
            args: a.test.clone(),
            psk,
            per_host: a.per_host,
            retries: a.retries,
            retry_gap: Duration::from_secs_f64(a.retry_gap),
            // A source host waits for the wave's start before its test begins.
            wait: Duration::from_secs_f64(wait_for(&cfg)) + sync_start.unwrap_or_default(),
            sync_start,
            clock: crate::clock::system(),
        },
        json: a.json,
        output: a.output.clone(),
        plot: a.plot.clone(),
    })
}

fn parse_pairs(
    lines: &[String],
    typed: &[String],
    hosts: &[Host],
) -> Result<Vec<(usize, usize)>, UsageError> {
    let find = |w: &str| {
        typed
            .iter()
            .position(|t| t == w)
            .or_else(|| hosts.iter().position(|h| h.host == w))
            .ok_or_else(|| {
                usage(format!(
                    "--pairs names '{w}', which is not in the host list"
                ))
            })
    };
    let mut pairs = Vec::new();
    for l in lines {
        let w: Vec<&str> = l.split_whitespace().collect();
        let [s, t] = w[..] else {
            return Err(usage(format!("--pairs: '{l}' is not \"SOURCE TARGET\"")));
        };
        let (s, t) = (find(s)?, find(t)?);
        if s == t {
            return Err(usage(format!("--pairs: '{l}' tests a host against itself")));
        }
        pairs.push((s, t));
    }
    if pairs.is_empty() {
        return Err(usage("--pairs lists no pair"));
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_words(s: &str) -> Result<MeshCommand, String> {
        let a = MeshArgs::try_parse_from(std::iter::once("mesh").chain(s.split_whitespace()))
            .map_err(|e| e.to_string())?;
        resolve(&a).map_err(|e| e.0)
    }

    #[test]
    fn hosts_pairs_and_test_options() {
        let dir = std::env::temp_dir().join(format!("nm-mesh-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join("key");
        std::fs::write(&key, "0123456789abcdef0123456789abcdef\n").unwrap();
        let k = key.display();
        let m = parse_words(&format!("--psk-file {k} a b:5300 c -- -t 3 -R")).unwrap();
        assert_eq!(m.plan.pairs.len(), 6);
        assert_eq!(
            m.plan.hosts[1],
            Host {
                host: "b".into(),
                port: 5300
            }
        );
        assert_eq!(m.plan.args, vec!["-t", "3", "-R"]);
        assert_eq!(m.plan.wait, Duration::from_secs(63));
        let pairs = dir.join("pairs");
        std::fs::write(&pairs, "# one way only\na b:5300\nc a\n").unwrap();
        let m = parse_words(&format!(
            "--psk-file {k} a b:5300 c --pairs {}",
            pairs.display()
        ))
        .unwrap();
        assert_eq!(m.plan.pairs, vec![(0, 1), (2, 0)]);
        for (line, says) in [
            (format!("--psk-file {k} a"), "at least two hosts"),
            ("a b".to_string(), "--psk-file"),
            (format!("--psk-file {k} a a"), "listed twice"),
            (format!("--psk-file {k} a b -- -F x"), "-F cannot"),
            (format!("--psk-file {k} a b -- -t -1"), "-t"),
            (format!("--psk-file {k} a b --per-host 0"), "--per-host"),
        ] {
            let e = parse_words(&line).err().unwrap_or_default();
            assert!(e.contains(says), "{line}: {e}");
        }
        std::fs::write(&pairs, "a z\n").unwrap();
        let e = parse_words(&format!("--psk-file {k} a b --pairs {}", pairs.display()));
        assert!(e.err().unwrap().contains("not in the host list"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
