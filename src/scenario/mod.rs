//! `netmeter scenario FILE` (issue 24): many named flows, each with its own client
//! options, started together at one epoch instant from this host ("local") or from
//! other hosts' netmeter servers as third-party tests, and reported per flow and in
//! total. docs/scenarios.md.
//!
//! This module is the file format, pure: TOML text in, a typed [`Scenario`] out (or one
//! sentence naming the line and the key), and the plan of what each flow runs
//! ([`Scenario::plan`]) for a given start instant. Reading the file, checking each
//! flow's options with the command line's parser (`cli::scenario_cmd`) and running the
//! flows (`scenario::run`) are elsewhere.

pub mod clocks;
pub mod judge;
pub mod output;
pub mod run;
pub mod words;

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use toml::Spanned;

/// The most flows one scenario may hold (each is at least one thread and one test).
pub const MAX_FLOWS: usize = 64;
/// The most hosts one scenario may name.
pub const MAX_HOSTS: usize = 64;
/// The latest a flow may start after the scenario's start instant, seconds.
pub const MAX_START_S: f64 = 3600.0;
/// The largest scenario file read, bytes.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// One host: a netmeter server, reached by the controller (and by the other hosts, as
/// a test target) at `host`:`port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The name the flows use (`[hosts.NAME]`).
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// Where a flow's client runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// In the controller's own process.
    Local,
    /// On a host (index into [`Scenario::hosts`]), as a third-party test.
    Host(usize),
}

/// One `[[flow]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    pub name: String,
    pub from: Origin,
    /// The target host (index into [`Scenario::hosts`]).
    pub to: usize,
    /// The client options, split shell-style.
    pub args: Vec<String>,
    /// Seconds after the scenario's start instant.
    pub start_s: f64,
    /// The line of the `[[flow]]` table, for messages about its options.
    pub line: usize,
}

/// A whole scenario file.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// The key the hosts' servers were started with (`psk_file`), relative paths as
    /// written (the caller resolves them against the file's folder).
    pub psk_file: Option<PathBuf>,
    pub hosts: Vec<Host>,
    pub flows: Vec<Flow>,
}

/// What one flow runs: its client options with the start instant added.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowPlan {
    pub flow: usize,
    /// `--txstart-time`, seconds since the Unix epoch.
    pub txstart: f64,
    pub args: Vec<String>,
}

/// A mistake in a scenario file, as one sentence naming the line and the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScenarioError(pub String);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    psk_file: Option<Spanned<String>>,
    #[serde(default)]
    hosts: BTreeMap<String, Spanned<RawHost>>,
    #[serde(default)]
    flow: Vec<Spanned<RawFlow>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHost {
    address: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlow {
    name: Spanned<String>,
    from: Spanned<String>,
    to: Spanned<String>,
    #[serde(default)]
    args: Option<Spanned<String>>,
    start: Option<Spanned<f64>>,
}

/// The 1-based line holding byte `at` of `text`.
fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

fn err_at(text: &str, at: usize, key: &str, why: impl std::fmt::Display) -> ScenarioError {
    ScenarioError(format!("line {}: {key}: {why}", line_of(text, at)))
}

/// `HOST` or `HOST:PORT` (`[v6]:PORT` for an IPv6 address with a port), default 5201.
pub fn host_port(s: &str) -> Option<(String, u16)> {
    let port = |p: &str| p.parse::<u16>().ok().filter(|&p| p > 0);
    if let Some(rest) = s.strip_prefix('[') {
        let (h, tail) = rest.split_once(']')?;
        return match tail.strip_prefix(':') {
            Some(p) => Some((h.to_string(), port(p)?)),
            None if tail.is_empty() => Some((h.to_string(), 5201)),
            None => None,
        };
    }
    match s.rsplit_once(':') {
        Some((h, _)) if h.contains(':') => Some((s.to_string(), 5201)),
        Some((h, p)) if !h.is_empty() => Some((h.to_string(), port(p)?)),
        Some(_) => None,
        None if s.trim().is_empty() || s.contains(char::is_whitespace) => None,
        None => Some((s.to_string(), 5201)),
    }
}

impl Scenario {
    /// Parse a scenario file's text.
    pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let at = e.span().map_or(0, |s| s.start);
            // toml's message is one line ("unknown field `x`, expected ...").
            let msg = e.message().trim().replace('\n', " ");
            ScenarioError(format!("line {}: {msg}", line_of(text, at)))
        })?;
        if raw.hosts.len() > MAX_HOSTS {
            return Err(ScenarioError(format!(
                "a scenario names at most {MAX_HOSTS} hosts"
            )));
        }
        let mut hosts = Vec::new();
        for (name, h) in &raw.hosts {
            let a = h.get_ref().address.get_ref();
            let at = h.get_ref().address.span().start;
            if name == "local" {
                return Err(err_at(
                    text,
                    h.span().start,
                    "hosts.local",
                    "\"local\" is the controller itself; give the host another name",
                ));
            }
            let (host, port) = host_port(a).ok_or_else(|| {
                err_at(
                    text,
                    at,
                    &format!("hosts.{name}.address"),
                    format!("'{a}' is not HOST or HOST:PORT"),
                )
            })?;
            hosts.push(Host {
                name: name.clone(),
                host,
                port,
            });
        }
        if raw.flow.is_empty() {
            return Err(ScenarioError(
                "the scenario has no [[flow]]: nothing would run".into(),
            ));
        }
        if raw.flow.len() > MAX_FLOWS {
            return Err(err_at(
                text,
                raw.flow[MAX_FLOWS].span().start,
                "flow",
                format!("a scenario holds at most {MAX_FLOWS} flows"),
            ));
        }
        let mut flows: Vec<Flow> = Vec::new();
        for f in &raw.flow {
            flows.push(flow(text, f.get_ref(), f.span().start, &hosts, &flows)?);
        }
        let psk_file = raw.psk_file.map(|p| PathBuf::from(p.into_inner()));
        if psk_file.is_none()
            && let Some(f) = flows.iter().find(|f| f.from != Origin::Local)
        {
            return Err(ScenarioError(format!(
                "line {}: psk_file: flow '{}' runs from a host, which takes third-party tests only from a controller holding its key; give psk_file",
                f.line, f.name
            )));
        }
        Ok(Scenario {
            psk_file,
            hosts,
            flows,
        })
    }

    /// The index of the host named `name`.
    pub fn host_index(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h.name == name)
    }

    /// What each flow runs when the scenario starts at `epoch` (seconds since the Unix
    /// epoch): its options and `--txstart-time epoch + start`.
    pub fn plan(&self, epoch: f64) -> Vec<FlowPlan> {
        self.flows
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let txstart = epoch + f.start_s;
                let mut args = f.args.clone();
                args.extend(["--txstart-time".to_string(), format!("{txstart:.3}")]);
                FlowPlan {
                    flow: i,
                    txstart,
                    args,
                }
            })
            .collect()
    }

    /// The name of the host a flow's client runs on ("local" for the controller).
    pub fn from_name(&self, f: &Flow) -> &str {
        match f.from {
            Origin::Local => "local",
            Origin::Host(h) => &self.hosts[h].name,
        }
    }
}

fn flow(
    text: &str,
    f: &RawFlow,
    at: usize,
    hosts: &[Host],
    earlier: &[Flow],
) -> Result<Flow, ScenarioError> {
    let find = |name: &str| hosts.iter().position(|h| h.name == name);
    let name = f.name.get_ref().trim().to_string();
    if name.is_empty() || name.len() > 64 || name.chars().any(char::is_control) {
        return Err(err_at(
            text,
            f.name.span().start,
            "name",
            "a flow's name is 1 to 64 printable characters",
        ));
    }
    if earlier.iter().any(|e| e.name == name) {
        return Err(err_at(
            text,
            f.name.span().start,
            "name",
            format!("two flows are named '{name}'"),
        ));
    }
    let from = match f.from.get_ref().as_str() {
        "local" => Origin::Local,
        h => Origin::Host(find(h).ok_or_else(|| {
            err_at(
                text,
                f.from.span().start,
                "from",
                format!("'{h}' is neither \"local\" nor a [hosts.{h}] table"),
            )
        })?),
    };
    let to_name = f.to.get_ref();
    let to = find(to_name).ok_or_else(|| {
        err_at(
            text,
            f.to.span().start,
            "to",
            format!("'{to_name}' is not a [hosts.{to_name}] table (a flow's target is a host)"),
        )
    })?;
    if from == Origin::Host(to) {
        return Err(err_at(
            text,
            f.to.span().start,
            "to",
            format!("flow '{name}' goes from {to_name} to itself"),
        ));
    }
    let args = match &f.args {
        Some(a) => {
            let words =
                words::split(a.get_ref()).map_err(|e| err_at(text, a.span().start, "args", e))?;
            if let Some(w) = words
                .iter()
                .find(|w| ["-s", "--server", "-D", "--daemon"].contains(&w.as_str()))
            {
                return Err(err_at(
                    text,
                    a.span().start,
                    "args",
                    format!(
                        "{w} runs a server, but a flow is a client test toward `to`; leave it out of args"
                    ),
                ));
            }
            if let Some(w) = words
                .iter()
                .find(|w| ["-c", "--client", "-p", "--port"].contains(&w.as_str()))
            {
                return Err(err_at(
                    text,
                    a.span().start,
                    "args",
                    format!("{w} is set by the scenario from `to`; leave it out of args"),
                ));
            }
            if words.iter().any(|w| w.starts_with("--txstart-time")) {
                return Err(err_at(
                    text,
                    a.span().start,
                    "args",
                    "--txstart-time is set by the scenario; use the flow's start offset",
                ));
            }
            words
        }
        None => Vec::new(),
    };
    let start_s = match &f.start {
        Some(s) if (0.0..=MAX_START_S).contains(s.get_ref()) => *s.get_ref(),
        Some(s) => {
            return Err(err_at(
                text,
                s.span().start,
                "start",
                format!("a flow starts 0 to {MAX_START_S} seconds after the scenario's start"),
            ));
        }
        None => 0.0,
    };
    Ok(Flow {
        name,
        from,
        to,
        args,
        start_s,
        line: line_of(text, at),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
psk_file = "key"

[hosts.a]
address = "10.0.0.1"
[hosts.b]
address = "[fd00::2]:5300"

[[flow]]
name = "video"
from = "a"
to = "b"
args = "-u --isochronous 30:600K,0 --dscp ac_vi -T 'the video'"

[[flow]]
name = "bulk"
from = "local"
to = "a"
start = 1.5
"#;

    fn err(text: &str) -> String {
        Scenario::parse(text).unwrap_err().0
    }

    #[test]
    fn every_key_is_read() {
        let s = Scenario::parse(GOOD).unwrap();
        assert_eq!(s.psk_file, Some(PathBuf::from("key")));
        assert_eq!(
            s.hosts,
            vec![
                Host {
                    name: "a".into(),
                    host: "10.0.0.1".into(),
                    port: 5201
                },
                Host {
                    name: "b".into(),
                    host: "fd00::2".into(),
                    port: 5300
                }
            ]
        );
        let v = &s.flows[0];
        assert_eq!(
            (v.name.as_str(), v.from, v.to),
            ("video", Origin::Host(0), 1)
        );
        assert_eq!(
            v.args,
            [
                "-u",
                "--isochronous",
                "30:600K,0",
                "--dscp",
                "ac_vi",
                "-T",
                "the video"
            ]
        );
        assert_eq!((v.start_s, v.line), (0.0, 9));
        let b = &s.flows[1];
        assert_eq!((b.from, b.to, b.start_s), (Origin::Local, 0, 1.5));
        assert!(b.args.is_empty());
        assert_eq!(s.from_name(v), "a");
        assert_eq!(s.from_name(b), "local");
        assert_eq!(s.host_index("b"), Some(1));
    }

    #[test]
    fn an_integer_start_and_a_local_only_file_without_a_key() {
        let s = Scenario::parse(
            "[hosts.x]\naddress = \"h:7\"\n[[flow]]\nname = \"f\"\nfrom = \"local\"\nto = \"x\"\nstart = 2\n",
        )
        .unwrap();
        assert_eq!(s.flows[0].start_s, 2.0);
        assert_eq!(s.psk_file, None);
    }

    #[test]
    fn the_plan_adds_each_flows_start_instant() {
        let s = Scenario::parse(GOOD).unwrap();
        let p = s.plan(1_700_000_000.25);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].txstart, 1_700_000_000.25);
        assert_eq!(
            p[0].args[p[0].args.len() - 2..],
            ["--txstart-time", "1700000000.250"]
        );
        assert_eq!(p[1].txstart, 1_700_000_001.75);
        assert_eq!(p[1].args, ["--txstart-time", "1700000001.750"]);
    }

    #[test]
    fn every_mistake_names_its_line_and_key() {
        let flow = |body: &str| {
            format!(
                "psk_file = \"k\"\n[hosts.a]\naddress = \"a\"\n[hosts.b]\naddress = \"b\"\n[[flow]]\n{body}"
            )
        };
        for (text, says) in [
            ("psk_file = 3".to_string(), "line 1: invalid type"),
            ("[[flow]\n".to_string(), "line 1"),
            (
                "colour = \"red\"".to_string(),
                "line 1: unknown field `colour`",
            ),
            ("psk_file = \"k\"\n".to_string(), "no [[flow]]"),
            (
                "[hosts.a]\naddress = \"a:0\"".to_string(),
                "line 2: hosts.a.address: 'a:0' is not HOST or HOST:PORT",
            ),
            (
                "[hosts.a]\naddr = \"a\"".to_string(),
                "line 2: unknown field `addr`",
            ),
            ("[hosts.a]\n".to_string(), "missing field `address`"),
            (
                "[hosts.local]\naddress = \"a\"".to_string(),
                "hosts.local: \"local\" is the controller",
            ),
            (
                flow("name = \"f\"\nfrom = \"a\"\nto = \"b\"\nspeed = 1"),
                "line 10: unknown field `speed`",
            ),
            (flow("from = \"a\"\nto = \"b\""), "missing field `name`"),
            (flow("name = \"f\"\nto = \"b\""), "missing field `from`"),
            (flow("name = \"f\"\nfrom = \"a\""), "missing field `to`"),
            (
                flow("name = \"\"\nfrom = \"a\"\nto = \"b\""),
                "line 7: name: a flow's name is 1 to 64",
            ),
            (
                flow("name = \"f\"\nfrom = \"c\"\nto = \"b\""),
                "line 8: from: 'c' is neither",
            ),
            (
                flow("name = \"f\"\nfrom = \"a\"\nto = \"local\""),
                "line 9: to: 'local' is not a [hosts.local] table",
            ),
            (
                flow("name = \"f\"\nfrom = \"a\"\nto = \"a\""),
                "line 9: to: flow 'f' goes from a to itself",
            ),
            (
                flow("name = \"f\"\nfrom = \"a\"\nto = \"b\"\nargs = \"-T 'open\""),
                "line 10: args: a ' quote is not closed",
            ),
            (
                flow("name = \"f\"\nfrom = \"a\"\nto = \"b\"\nargs = \"-t 3 -p 7\""),
                "line 10: args: -p is set by the scenario",
            ),
            (
                flow("name = \"f\"\nfrom = \"a\"\nto = \"b\"\nargs = \"-t 3 -s\""),
                "line 10: args: -s runs a server, but a flow is a client test",
            ),
            (
                flow("name = \"f\"\nfrom = \"a\"\nto = \"b\"\nargs = \"--server -1\""),
                "line 10: args: --server runs a server",
            ),
            (
                flow("name = \"f\"\nfrom = \"a\"\nto = \"b\"\nargs = \"--txstart-time 5\""),
                "line 10: args: --txstart-time is set by the scenario",
            ),
            (
                flow("name = \"f\"\nfrom = \"a\"\nto = \"b\"\nargs = 5"),
                "line 10: invalid type",
            ),
            (
                flow("name = \"f\"\nfrom = \"a\"\nto = \"b\"\nstart = -1"),
                "line 10: start: a flow starts 0 to 3600",
            ),
            (
                flow("name = \"f\"\nfrom = \"a\"\nto = \"b\"\nstart = nan"),
                "line 10: start:",
            ),
            (
                flow(
                    "name = \"f\"\nfrom = \"a\"\nto = \"b\"\n[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"",
                ),
                "line 11: name: two flows are named 'f'",
            ),
            (
                "[hosts.a]\naddress = \"a\"\n[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"local\""
                    .to_string(),
                "line 6: to:",
            ),
        ] {
            let e = err(&text);
            assert!(e.contains(says), "{text}\n → {e}");
        }
        // A flow from a host needs the key.
        let e = err(
            "[hosts.a]\naddress = \"a\"\n[hosts.b]\naddress = \"b\"\n[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"",
        );
        assert!(e.starts_with("line 5: psk_file:"), "{e}");
        let many: String = (0..=MAX_FLOWS)
            .map(|i| format!("[[flow]]\nname = \"f{i}\"\nfrom = \"local\"\nto = \"a\"\n"))
            .collect();
        let e = err(&format!("[hosts.a]\naddress = \"a\"\n{many}"));
        assert!(e.contains("at most 64 flows"), "{e}");
    }

    #[test]
    fn host_port_forms() {
        assert_eq!(host_port("a"), Some(("a".into(), 5201)));
        assert_eq!(host_port("a:7"), Some(("a".into(), 7)));
        assert_eq!(host_port("[::1]:7"), Some(("::1".into(), 7)));
        assert_eq!(host_port("[::1]"), Some(("::1".into(), 5201)));
        assert_eq!(host_port("fd00::1"), Some(("fd00::1".into(), 5201)));
        for bad in ["a:x", ":7", "", "a b", "[::1]x", "a:70000"] {
            assert_eq!(host_port(bad), None, "{bad}");
        }
    }

    /// The keys the parser takes at each level of the file, as it names them itself
    /// when it refuses an unknown one ("unknown field `x`, expected one of `a`, `b`").
    fn parser_keys() -> Vec<String> {
        let host = "[hosts.a]\naddress = \"a\"\n";
        let mut keys = Vec::new();
        for text in [
            "zz_unknown = 1\n".to_string(),
            "[hosts.a]\nzz_unknown = 1\n".to_string(),
            format!("{host}[[flow]]\nzz_unknown = 1\n"),
        ] {
            let e = Scenario::parse(&text).err().unwrap().0;
            let expected = e.split_once("expected").map(|x| x.1).unwrap_or_default();
            let named: Vec<String> = expected
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect();
            assert!(!named.is_empty(), "{e}");
            keys.extend(named);
        }
        keys.sort();
        keys
    }

    /// The keys a document's "The file" table names in its first column: `key`, or
    /// `[hosts.NAME]` / `[[flow]]` for the tables.
    fn documented_keys(doc: &str, heading: &str) -> Vec<String> {
        let path = format!("{}/docs/{doc}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        let section = text
            .split("\n#")
            .find(|s| s.trim_start_matches('#').trim_start().starts_with(heading))
            .unwrap_or_else(|| panic!("{doc} has no section {heading}"));
        let mut keys: Vec<String> = section
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split_once('`').map(|x| x.0))
            .map(|k| {
                let k = k.trim_start_matches('[').trim_end_matches(']');
                k.split('.').next().unwrap_or(k).to_string()
            })
            .collect();
        keys.sort();
        keys
    }

    /// docs/scenarios.md's table lists every key the parser takes, and no other; so
    /// does docs/python.md's list for `run_scenario`.
    #[test]
    fn the_docs_name_every_key_the_parser_takes() {
        let parser = parser_keys();
        assert_eq!(
            parser,
            [
                "address", "args", "flow", "from", "hosts", "name", "psk_file", "start", "to"
            ]
        );
        assert_eq!(documented_keys("scenarios.md", "The file"), parser);
        assert_eq!(documented_keys("python.md", "The scenario file"), parser);
    }
}
