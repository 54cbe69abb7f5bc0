//! How `netmeter --help` (and the man page, and the completions) present the flat
//! iperf3 command line: the options in groups, the subcommands, the examples.
//!
//! The groups are a table of argument ids ([`SECTIONS`]) applied to the clap command
//! that [`super::Args`] derives, rather than attributes on each field. Each heading's
//! flags are defined in their group's own file (`cli/server_flags.rs` for "Server
//! options", ...); a new flag is a field there and one line here (a unit test fails
//! until it has its group). Each group's options keep the order they are declared in.
//!
//! `-h` prints each option's first sentence, `--help` the whole text.

use super::Args;
use clap::CommandFactory;

/// The help headings, each with the ids (field names) of its options. Options of the
/// first entry get no heading: clap lists them first, under "Options".
pub const SECTIONS: &[(Option<&str>, &[&str])] = &[
    (
        None,
        &[
            "loopback",
            "port",
            "bind",
            "v4",
            "v6",
            "bind_dev",
            "affinity",
            "file",
            "rcv_timeout",
            "snd_timeout",
            "cntl_ka",
            "version",
            "no_extensions",
        ],
    ),
    (
        Some("Server options"),
        &[
            "server",
            "one_off",
            "daemon",
            "pidfile",
            "idle_timeout",
            "server_max_duration",
            "server_bitrate_limit",
            "max_tests",
            "max_tests_per_source",
            "test_idle_timeout",
            "server_max_file_size",
            "max_streams",
            "max_conn_rate",
            "allow",
            "deny",
            "audit_log",
            "audit_log_max_size",
            "audit_log_keep",
            "metrics",
            "rpm",
            "rpm_cert",
            "rpm_key",
        ],
    ),
    (
        Some("Client options"),
        &[
            "client",
            "time",
            "bytes",
            "blockcount",
            "parallel",
            "reverse",
            "bidir",
            "bitrate",
            "fq_rate",
            "no_fq_socket_pacing",
            "length",
            "window",
            "mss",
            "nodelay",
            "congestion",
            "tos",
            "dscp",
            "ecn",
            "ecn_responsive",
            "cport",
            "omit",
            "connect_timeout",
            "zerocopy",
            "skip_rx_copy",
            "repeating_payload",
            "mptcp",
            "flowlabel",
            "pacing_timer",
            "sctp",
            "nstreams",
            "xbind",
        ],
    ),
    (
        Some("Output"),
        &[
            "interval",
            "format",
            "json",
            "json_stream",
            "json_stream_full_output",
            "csv",
            "fields",
            "logfile",
            "plot",
            "verbose",
            "title",
            "extra_data",
            "get_server_output",
            "timestamps",
            "forceflush",
            "debug",
        ],
    ),
    (
        Some("UDP"),
        &[
            "udp",
            "udp_counters_64bit",
            "no_gso",
            "no_gro",
            "gsro",
            "dont_fragment",
        ],
    ),
    (
        Some("Multicast (docs/multicast.md)"),
        &["ssm_host", "ttl", "receivers"],
    ),
    (
        Some("Latency modes"),
        &[
            "bounceback",
            "bounceback_request",
            "bounceback_reply",
            "bounceback_hold",
            "bounceback_burst",
            "busy_poll",
            "trip_times",
            "iperf2",
            "iperf2_version",
            "connect_only",
            "histograms",
            "working_load",
            "burst_size",
            "burst_period",
            "isochronous",
        ],
    ),
    (
        Some("Experiments"),
        &[
            "find_max_rate",
            "loss_target",
            "repeat",
            "repeat_gap",
            "confidence",
            "line_rate",
        ],
    ),
    (
        Some("Authentication"),
        &[
            "username",
            "rsa_public_key_path",
            "rsa_private_key_path",
            "authorized_users_path",
            "time_skew_threshold",
            "use_pkcs1_padding",
            "psk_file",
        ],
    ),
    (
        Some("Many hosts"),
        &["allow_third_party", "via", "txstart_time"],
    ),
];

/// The subcommands, each with its one line for `--help` (the first argument names one;
/// `netmeter SUBCOMMAND --help` shows its own options).
pub const SUBCOMMANDS: &[(&str, &str)] = &[
    ("plot", "draw saved results' charts into an SVG or PNG file"),
    (
        "report",
        "write saved results as one self-contained HTML page",
    ),
    ("csv", "write a saved -J or --json-stream result as CSV"),
    (
        "compare",
        "compare two saved results figure by figure, with a verdict",
    ),
    ("sweep", "run a client test over a grid of option values"),
    ("mesh", "test every pair of a list of netmeter servers"),
    (
        "scenario",
        "run named flows together, locally and from netmeter servers",
    ),
    (
        "rpm",
        "measure responsiveness (RPM) against a web server, IETF draft",
    ),
    (
        "rpm-server",
        "serve the IETF responsiveness test (HTTP/2, TLS)",
    ),
    (
        "doctor",
        "show this host's limits, with the sysctls to change",
    ),
    ("generate", "write a man page or a shell completion script"),
    (
        "iperf2",
        "iperf 2's options and output (also as a link named iperf)",
    ),
];

/// `--help`'s examples and the man page's: the command, what it does.
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "netmeter --loopback",
        "short TCP and UDP tests against an in-process server",
    ),
    ("netmeter -s", "serve tests on port 5201"),
    (
        "netmeter -s -B 10.0.0.1 -p 12345",
        "serve on one address and port only",
    ),
    (
        "netmeter -c HOST -t 10 -P 4",
        "four TCP streams to HOST for 10 seconds",
    ),
    (
        "netmeter -s -u -B 239.1.1.1%eth0",
        "a multicast receiver: a report for every sender it hears",
    ),
    (
        "netmeter -c 239.1.1.1 -u -b 10M --ttl 8",
        "send to a multicast group (iperf 2's datagrams)",
    ),
    (
        "netmeter -c 239.1.1.1 -u -p 5001 --receivers h1,h2",
        "multicast, with a row for each netmeter server asked to join",
    ),
    (
        "netmeter -c HOST -u -b 100M",
        "UDP at 100 Mbit/s per stream",
    ),
    (
        "netmeter -c HOST -J > run.json",
        "the result as one JSON document (iperf3's schema)",
    ),
    ("netmeter csv run.json", "that result as CSV"),
    (
        "netmeter doctor -c HOST",
        "this host's limits for a test to HOST, with the sysctls to change",
    ),
];

/// The ways to call netmeter, one a line (clap's usage line and the man page's
/// synopsis).
pub const USAGE: &str = "netmeter -s [OPTIONS]
       netmeter -c HOST [OPTIONS]
       netmeter --loopback [OPTIONS]
       netmeter SUBCOMMAND [ARGS]";

/// Two columns, the first padded to a common width.
fn columns(rows: &[(&str, &str)]) -> String {
    let w = rows.iter().map(|(a, _)| a.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(a, b)| format!("  {a:w$}  {b}\n"))
        .collect()
}

/// The text after the options: the subcommands, then the examples.
fn after_help() -> String {
    format!(
        "Subcommands (netmeter SUBCOMMAND --help for each):\n{}\nExamples:\n{}",
        columns(SUBCOMMANDS),
        columns(EXAMPLES).trim_end()
    )
}

/// A paragraph's first sentence, when more follow: a period, a space, then a capital
/// letter or the like ([`starts_sentence`]), outside parentheses and not after "e.g" or
/// "i.e".
fn first_sentence(text: &str) -> Option<&str> {
    let b = text.as_bytes();
    let mut depth = 0i32;
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'(' => depth += 1,
            b')' => depth -= 1,
            b'.' if depth == 0
                && b.get(i + 1) == Some(&b' ')
                && starts_sentence(&text[i + 2..])
                && !text[..i].ends_with("e.g")
                && !text[..i].ends_with("i.e") =>
            {
                return Some(&text[..i]);
            }
            _ => {}
        }
    }
    None
}

/// Whether `rest` (after ". ") begins a sentence: a capital letter, a parenthesis, or
/// a name written in lower case (netmeter, iperf3).
fn starts_sentence(rest: &str) -> bool {
    rest.starts_with(|c: char| c.is_ascii_uppercase() || c == '(')
        || ["netmeter", "iperf"].iter().any(|n| rest.starts_with(n))
}

/// The flat command line as clap parses and shows it: [`Args`] with the groups, the
/// short `-h` texts, the usage forms, the subcommands and the examples.
pub fn command() -> clap::Command {
    let mut cmd = Args::command()
        .override_usage(USAGE)
        .after_help(after_help());
    for (heading, ids) in SECTIONS {
        // An id no field has any more is skipped (mut_arg would panic); the tests
        // refuse one.
        let known: Vec<&str> = ids
            .iter()
            .copied()
            .filter(|id| cmd.get_arguments().any(|a| a.get_id() == *id))
            .collect();
        for id in known {
            cmd = cmd.mut_arg(id, |a| {
                let a = a.help_heading(*heading);
                match a.get_help().map(ToString::to_string) {
                    Some(full) if a.get_long_help().is_none() => match first_sentence(&full) {
                        Some(short) => {
                            let short = short.to_string();
                            a.help(short).long_help(full)
                        }
                        None => a,
                    },
                    _ => a,
                }
            });
        }
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every option has its group, once: a new flag needs its line in SECTIONS.
    #[test]
    fn every_option_is_in_one_section() {
        let cmd = Args::command();
        let listed: Vec<&str> = SECTIONS
            .iter()
            .flat_map(|(_, ids)| ids.iter().copied())
            .collect();
        for a in cmd.get_arguments() {
            let id = a.get_id().as_str();
            let n = listed.iter().filter(|&&l| l == id).count();
            assert_eq!(n, 1, "--{id} is in {n} sections of cli/help.rs SECTIONS");
        }
        // And nothing listed is unknown.
        for id in listed {
            assert!(
                cmd.get_arguments().any(|a| a.get_id() == id),
                "cli/help.rs SECTIONS lists {id}, which is no option"
            );
        }
    }

    #[test]
    fn first_sentences() {
        assert_eq!(
            first_sentence("Request/response test (like iperf 2). Needs a netmeter server"),
            Some("Request/response test (like iperf 2)")
        );
        assert_eq!(first_sentence("Run as a server"), None);
        assert_eq!(
            first_sentence("Stop within ±WIDTH % (netperf -I), e.g. 95,5"),
            None
        );
        assert_eq!(first_sentence("A (b. C) d"), None);
        assert_eq!(first_sentence("Bytes, e.g. 100M"), None);
        assert_eq!(
            first_sentence("iperf3's SCTP test. netmeter does not run SCTP"),
            Some("iperf3's SCTP test")
        );
        assert_eq!(
            first_sentence("Client: over MPTCP. (A server always accepts.)"),
            Some("Client: over MPTCP")
        );
        assert_eq!(first_sentence("Blocks, e.g. Ten"), None);
    }

    fn headings(help: &str) -> Vec<&str> {
        help.lines()
            .filter(|l| !l.starts_with(' ') && l.ends_with(':'))
            .collect()
    }

    /// `--help` groups the options under the headings, in order, lists every
    /// subcommand, and `-h` is the same with each option's first sentence only.
    #[test]
    fn help_is_grouped_and_lists_the_subcommands() {
        let long = command().render_long_help().to_string();
        let short = command().render_help().to_string();
        let want = [
            "Options:",
            "Server options:",
            "Client options:",
            "Output:",
            "UDP:",
            "Multicast (docs/multicast.md):",
            "Latency modes:",
            "Experiments:",
            "Authentication:",
            "Many hosts:",
            "Subcommands (netmeter SUBCOMMAND --help for each):",
            "Examples:",
        ];
        assert_eq!(headings(&long), want, "{long}");
        assert_eq!(headings(&short), want, "{short}");
        // An option sits under its own heading.
        let under = |help: &str, flag: &str| {
            let i = help.find(flag).unwrap_or_else(|| panic!("{flag} missing"));
            help[..i]
                .lines()
                .rev()
                .find(|l| !l.starts_with(' ') && l.ends_with(':'))
                .unwrap_or("")
                .to_string()
        };
        assert_eq!(under(&long, "--max-streams <N>"), "Server options:");
        assert_eq!(under(&long, "-b, --bitrate"), "Client options:");
        assert_eq!(under(&long, "--no-gso"), "UDP:");
        assert_eq!(under(&long, "--bounceback-hold"), "Latency modes:");
        assert_eq!(under(&long, "--psk-file"), "Authentication:");
        assert_eq!(under(&long, "--via"), "Many hosts:");
        assert_eq!(under(&long, "--csv"), "Output:");
        for (name, _) in SUBCOMMANDS {
            let line = format!("\n  {name} ");
            assert!(long.contains(&line) && short.contains(&line), "{name}");
        }
        // -h: first sentences, pointing to --help; --help: the whole text.
        assert!(long.contains("Needs a netmeter server"), "{long}");
        assert!(!short.contains("Needs a netmeter server"), "{short}");
        assert!(short.contains("(see more with '--help')"), "{short}");
        assert!(short.lines().count() < long.lines().count());
        assert!(long.contains("Usage: netmeter -s [OPTIONS]\n       netmeter -c HOST"));
    }

    /// Every subcommand listed is one netmeter parses (here or in cli::compare_cmd).
    #[test]
    fn listed_subcommands_are_parsed() {
        for (name, _) in SUBCOMMANDS {
            let argv: Vec<std::ffi::OsString> = ["netmeter", name, "--help"]
                .iter()
                .map(Into::into)
                .collect();
            let known = super::super::subcommand(&argv).is_some()
                || super::super::compare_cmd::subcommand(&argv).is_some()
                || super::super::iperf2::invoked(&argv).is_some();
            assert!(known, "{name} is listed but not parsed");
        }
    }
}
