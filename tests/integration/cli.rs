//! The command line as a user meets it (issue 19 items 8-12): a mistake is one line on
//! standard error naming the option and the value, with exit status 1; `--help` and
//! `-h` group the options and list the subcommands; every man page renders with its
//! sections and names only pages that exist. Nothing here opens a socket.

use crate::support::*;
use std::process::Command;
use std::time::Duration;

/// `netmeter ARGS`, which must be refused: exit status 1 and one line on stderr
/// (nothing on stdout). The line, without the "netmeter: " prefix.
fn refused(args: &[&str]) -> String {
    let out = run(Command::new(netmeter()).args(args), Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(1), "{args:?}: {}", show(&out));
    assert!(out.stdout.is_empty(), "{args:?}: {}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err}");
    err.trim_end()
        .strip_prefix("netmeter: ")
        .unwrap_or_else(|| panic!("{args:?}: {err}"))
        .to_string()
}

/// Item 8: the option and the value, not "invalid float literal" or "unexpected
/// argument '-5'"; a tip only when it is close.
#[test]
fn parse_errors_name_the_option_and_value() {
    for (args, flag, value) in [
        (&["-c", "127.0.0.1", "-t", "abc"][..], "-t", "abc"),
        (&["-c", "127.0.0.1", "-t", "1s"], "-t", "1s"),
        (&["-c", "127.0.0.1", "-O", "abc"], "-O", "abc"),
        (&["-c", "127.0.0.1", "-i", "abc"], "-i", "abc"),
        (&["-c", "127.0.0.1", "-b", "-5M"], "-b", "-5M"),
    ] {
        let e = refused(args);
        assert!(
            e.starts_with(flag) && e.contains(&format!("'{value}'")),
            "{args:?}: {e}"
        );
        assert!(!e.contains("invalid float literal"), "{e}");
    }
    let e = refused(&["--no-such-option"]);
    assert_eq!(
        e,
        "unknown option '--no-such-option'; netmeter --help lists the options"
    );
    let e = refused(&["-c", "127.0.0.1", "--paralel", "2"]);
    assert_eq!(e, "unknown option '--paralel'; did you mean '--parallel'?");
}

/// Item 9: the HPC guide's `-s ADDR -p PORT` points to -B.
#[test]
fn server_with_an_address_points_to_bind() {
    let e = refused(&["-s", "10.0.0.1", "-p", "12345"]);
    assert_eq!(
        e,
        "-s takes no address ('10.0.0.1'); to listen on 10.0.0.1 only, use -s -B 10.0.0.1"
    );
}

/// Item 10: `-S af11` is iperf 2's DSCP name, sent as the TOS byte 0x28 (iperf3's
/// parameter `TOS` carries it); a bad value names --dscp.
#[test]
fn tos_takes_dscp_names() {
    let e = refused(&["-c", "127.0.0.1", "-S", "af99"]);
    assert!(
        e.starts_with("-S takes a TOS byte") && e.contains("--dscp"),
        "{e}"
    );
    // Accepted: the client gets as far as connecting (a closed port is refused there,
    // after the options were resolved).
    let port = free_port();
    let out = run(
        Command::new(netmeter()).args([
            "-c",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-S",
            "af11",
            "-t",
            "1",
        ]),
        Duration::from_secs(20),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("-S"), "{}", show(&out));
    assert!(err.contains("error - "), "{}", show(&out));
}

/// Item 11: `--help` and `-h` show the same groups, in order, and every subcommand
/// with its line; `-h` is the shorter; both exit 0.
#[test]
fn help_groups_the_options_and_lists_the_subcommands() {
    let help = |flag: &str| {
        let out = run(Command::new(netmeter()).arg(flag), Duration::from_secs(10));
        assert!(out.status.success(), "{}", show(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let (long, short) = (help("--help"), help("-h"));
    let headings = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with(' ') && l.ends_with(':'))
            .map(String::from)
            .collect()
    };
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
    for sub in [
        "plot",
        "report",
        "csv",
        "compare",
        "sweep",
        "mesh",
        "scenario",
        "doctor",
        "generate",
        "iperf2",
        "rpm-server",
        "rpm",
    ] {
        let line = long
            .lines()
            .find(|l| l.starts_with(&format!("  {sub} ")))
            .unwrap_or_else(|| panic!("{sub} not listed:\n{long}"));
        assert!(line.split_whitespace().count() > 2, "{line}");
        // And it is a subcommand: its own help, exit 0.
        let out = run(
            Command::new(netmeter()).args([sub, "--help"]),
            Duration::from_secs(10),
        );
        assert!(out.status.success(), "{sub} --help: {}", show(&out));
    }
    assert!(short.lines().count() < long.lines().count());
}

/// Item 12: every page `netmeter generate` writes renders without a warning, has its
/// sections, keeps the examples on their lines, and every netmeter-*(1) page it names
/// is one of them.
#[test]
#[cfg_attr(not(feature = "full-tests"), ignore = "full tier: needs man-db")]
fn man_pages_render_whole_with_no_dangling_reference() {
    let subs = [
        "plot",
        "report",
        "csv",
        "compare",
        "sweep",
        "mesh",
        "scenario",
        "doctor",
        "generate",
        "iperf2",
        "rpm-server",
        "rpm",
    ];
    let pages: Vec<(String, String)> = std::iter::once(("man".to_string(), "netmeter".to_string()))
        .chain(
            subs.iter()
                .map(|s| (format!("man-{s}"), format!("netmeter-{s}"))),
        )
        .collect();
    let dir = std::env::temp_dir().join(format!("netmeter-cli-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (asset, name) in &pages {
        let out = run(
            Command::new(netmeter()).args(["generate", asset]),
            Duration::from_secs(10),
        );
        assert!(out.status.success(), "{}", show(&out));
        let file = dir.join(format!("{name}.1"));
        std::fs::write(&file, &out.stdout).unwrap();
        let man = run(
            Command::new("man")
                .args(["-l", file.to_str().unwrap()])
                .env("MANWIDTH", "100")
                .env("MANPAGER", "cat")
                .env("PAGER", "cat"),
            Duration::from_secs(20),
        );
        assert!(
            man.status.success() && man.stderr.is_empty(),
            "{name}: {}",
            show(&man)
        );
        let text = String::from_utf8_lossy(&man.stdout).into_owned();
        for section in [
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "OPTIONS",
            "EXAMPLES",
            "EXIT STATUS",
            "SEE ALSO",
        ] {
            assert!(
                text.lines().any(|l| l == section),
                "{name}: no {section}:\n{text}"
            );
        }
        // References to netmeter pages (man may hyphenate a long one: join it first).
        let joined = text.replace("‐\n", "").replace("-\n", "");
        for w in joined.split(|c: char| c.is_whitespace() || c == ',') {
            if let Some(i) = w.find("netmeter-")
                && let Some(end) = w[i..].find("(1)")
            {
                let page = &w[i..i + end];
                assert!(
                    pages.iter().any(|(_, n)| n == page),
                    "{name} refers to {page}(1), which netmeter generate does not write"
                );
            }
        }
        // An example command line stays on one line.
        if *name == "netmeter-mesh" {
            assert!(
                text.contains(
                    "netmeter mesh --psk-file key --hosts hosts.txt -J -o mesh.json --plot mesh.svg -- -t 10 -P 4\n"
                ),
                "{text}"
            );
        }
    }
    // netmeter(1)'s synopsis names the client's HOST.
    let main = std::fs::read_to_string(dir.join("netmeter.1")).unwrap();
    assert!(main.replace("\\-", "-").contains("-c HOST"), "{main}");
    let _ = std::fs::remove_dir_all(&dir);
}
