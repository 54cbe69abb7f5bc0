//! netmeter's man pages as roff: clap_mangen's sections (title, NAME, DESCRIPTION, the
//! options under their `--help` headings, SUBCOMMANDS) around netmeter's own parts: a
//! SYNOPSIS that names every option's value, the after-help text as NOTES and EXAMPLES
//! with the command lines kept verbatim (roff would fill them into one paragraph),
//! EXIT STATUS and SEE ALSO.
//!
//! Every page another page names (`netmeter-mesh(1)`) is one `netmeter generate` writes:
//! the caller passes the subcommands' pages in (`generate::MAN_PAGES`; the tests check
//! it), so this module reads nothing of `generate`.

use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, italic, roman};

/// The roff text of `cmd`'s page; `sub` is the subcommand it documents (`None`:
/// netmeter(1), whose SEE ALSO names `subpages`, the subcommands' pages, e.g.
/// `netmeter-mesh`; a subcommand's page names netmeter(1) only).
pub(super) fn render(mut cmd: clap::Command, sub: Option<&str>, subpages: &[&str]) -> String {
    cmd.build();
    let man = Man::new(cmd.clone());
    let preamble = Roff::new().render();
    let mut out = String::new();
    let mut part = |f: &dyn Fn(&mut dyn std::io::Write) -> std::io::Result<()>| {
        let mut v = Vec::new();
        // Writing into a Vec cannot fail.
        let _ = f(&mut v);
        let text = String::from_utf8_lossy(&v).into_owned();
        // Each clap_mangen and roff rendering starts with the same preamble; once is
        // enough.
        match text.strip_prefix(&preamble) {
            Some(body) if !out.is_empty() => out.push_str(body),
            _ => out.push_str(&text),
        }
    };
    part(&|w| man.render_title(w));
    part(&|w| man.render_name_section(w));
    part(&|w| synopsis(&cmd).to_writer(w));
    part(&|w| man.render_description_section(w));
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        part(&|w| man.render_options_section(w));
    }
    if cmd.has_subcommands() {
        part(&|w| man.render_subcommands_section(w));
    }
    part(&|w| after_help(&cmd, sub).to_writer(w));
    part(&|w| closing(sub, subpages).to_writer(w));
    if cmd.get_version().is_some() {
        part(&|w| man.render_version_section(w));
    }
    out
}

/// SYNOPSIS: the usage forms a command declares (netmeter's roles, `sweep`'s), else
/// every option with its value's name.
fn synopsis(cmd: &clap::Command) -> Roff {
    let mut r = Roff::new();
    r.control("SH", ["SYNOPSIS"]);
    if let Some(usage) = cmd.get_overridden_usage() {
        for (i, form) in usage.to_string().lines().map(str::trim).enumerate() {
            if i > 0 {
                r.control("br", []);
            }
            match form.split_once(' ') {
                Some((name, rest)) => r.text([bold(name), roman(format!(" {rest}"))]),
                None => r.text([bold(form)]),
            };
        }
        return r;
    }
    let name = cmd.get_bin_name().unwrap_or_else(|| cmd.get_name());
    let mut line = vec![bold(name)];
    for a in cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_positional())
    {
        let flags: Vec<String> = a
            .get_short()
            .map(|s| format!("-{s}"))
            .into_iter()
            .chain(a.get_long().map(|l| format!("--{l}")))
            .collect();
        line.push(roman(" ["));
        line.push(bold(flags.join("|")));
        if let Some(v) = value(a) {
            let optional = a.get_num_args().is_some_and(|n| n.min_values() == 0);
            let sep = if a.is_require_equals_set() { "=" } else { " " };
            match optional {
                true => line.extend([roman(format!("[{sep}")), italic(v), roman("]")]),
                false => line.extend([roman(sep), italic(v)]),
            }
        }
        line.push(roman("]"));
    }
    for a in cmd.get_positionals().filter(|a| !a.is_hide_set()) {
        let v = value(a).unwrap_or_else(|| a.get_id().to_string());
        let many = a.get_num_args().is_some_and(|n| n.max_values() > 1);
        let dots = if many { "..." } else { "" };
        match (a.is_last_set(), a.is_required_set()) {
            (true, _) => line.extend([roman(" [-- "), italic(v), roman(format!("{dots}]"))]),
            (false, true) => line.extend([roman(" "), italic(v), roman(dots)]),
            (false, false) => line.extend([roman(" ["), italic(v), roman(format!("{dots}]"))]),
        }
    }
    r.text(line);
    r
}

/// An argument's value name(s) (`FILE`), or its id in capitals when it takes a value
/// without a name; `None` for a switch.
fn value(a: &clap::Arg) -> Option<String> {
    if !a.get_num_args().is_some_and(|n| n.takes_values()) {
        return None;
    }
    Some(match a.get_value_names() {
        Some(names) => names
            .iter()
            .map(|n| n.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        None => a.get_id().as_str().to_uppercase(),
    })
}

/// NOTES and EXAMPLES from the text `--help` shows after the options: a line
/// "Examples:" starts the examples; indented lines (command lines, option lists) are
/// kept as they are, the rest is filled prose. netmeter(1) takes its examples from
/// `help::EXAMPLES` (its after-help text lists the subcommands, which SUBCOMMANDS has).
fn after_help(cmd: &clap::Command, sub: Option<&str>) -> Roff {
    let mut r = Roff::new();
    if sub.is_none() {
        r.control("SH", ["EXAMPLES"]);
        for (line, what) in super::help::EXAMPLES {
            r.control("TP", []);
            r.text([bold(*line)]);
            r.text([roman(*what)]);
        }
        return r;
    }
    let text = cmd
        .get_after_long_help()
        .or_else(|| cmd.get_after_help())
        .map(|t| t.to_string())
        .unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let split = lines
        .iter()
        .position(|l| matches!(l.trim(), "Examples:" | "Example:"))
        .unwrap_or(lines.len());
    for (title, part) in [("NOTES", &lines[..split]), ("EXAMPLES", &lines[split..])] {
        // "Exit status:" is the EXIT STATUS section's.
        let part: Vec<&str> = part
            .iter()
            .copied()
            .filter(|l| {
                !l.starts_with("Exit status:") && !matches!(l.trim(), "Examples:" | "Example:")
            })
            .collect();
        if part.iter().all(|l| l.trim().is_empty()) {
            continue;
        }
        r.control("SH", [title]);
        let mut verbatim = false;
        for l in part {
            let indented = l.starts_with(' ');
            if indented != verbatim {
                if indented {
                    r.control("RS", ["4"]).control("nf", []);
                } else {
                    r.control("fi", []).control("RE", []);
                }
                verbatim = indented;
            }
            match (verbatim, l.trim().is_empty()) {
                (false, true) => r.control("PP", []),
                (true, _) => r.text([roman(l.strip_prefix("  ").unwrap_or(l))]),
                (false, false) => r.text([roman(l)]),
            };
        }
        if verbatim {
            r.control("fi", []).control("RE", []);
        }
    }
    r
}

/// What each exit status means for `sub`'s command.
fn exit_status(sub: Option<&str>) -> &'static [(&'static str, &'static str)] {
    match sub {
        None => &[
            (
                "0",
                "Success: the test ran to its end, or was stopped by SIGINT, SIGTERM or SIGHUP after it began and printed the results so far (as iperf3 3.19 and later); a server was stopped by a signal; the help or the version was printed.",
            ),
            (
                "1",
                "An error, said in one line on standard error: a usage mistake (naming the option and its value), a server that cannot be reached or refuses the test, a test that failed.",
            ),
        ],
        Some("compare") => &[
            (
                "0",
                "The comparison was printed (with --fail-if-worse: no figure got worse beyond PCT with significance).",
            ),
            (
                "1",
                "An error: a usage mistake, a result that cannot be read, results that cannot be compared.",
            ),
            (
                "2",
                "With --fail-if-worse: a figure got worse beyond PCT with significance.",
            ),
        ],
        Some("mesh") => &[
            (
                "0",
                "The mesh ran (a pair that failed is a cell with its error), or was stopped by a signal and wrote what ran.",
            ),
            (
                "1",
                "An error: a usage mistake, or no pair of the mesh ran a test.",
            ),
        ],
        Some("rpm-server") => &[
            ("0", "The server was stopped by SIGINT, SIGTERM or SIGHUP."),
            (
                "1",
                "An error: a usage mistake, a certificate or key that cannot be read, an address that cannot be listened on.",
            ),
        ],
        Some("rpm") => &[
            (
                "0",
                "The test ran, or was stopped by a signal and printed what it measured.",
            ),
            (
                "1",
                "An error: a usage mistake, a configuration that is not usable, a server that cannot be reached or refuses, a load-generating connection that failed.",
            ),
        ],
        Some("scenario") => &[
            (
                "0",
                "The scenario ran (a flow that failed is a flow with its error).",
            ),
            (
                "1",
                "An error: a usage mistake, a bad scenario file, or no flow of the scenario ran a test.",
            ),
            (
                "2",
                "With --fail-if-worse: a flow's figure got worse than the baseline's beyond PCT with significance.",
            ),
        ],
        Some("sweep") => &[
            ("0", "Every point of the sweep ran."),
            (
                "1",
                "An error: a usage mistake (found before the first test), a test that failed, an output that cannot be written.",
            ),
        ],
        Some(_) => &[
            ("0", "Success."),
            (
                "1",
                "An error: a usage mistake, an input that cannot be read, an output that cannot be written.",
            ),
        ],
    }
}

/// EXIT STATUS and SEE ALSO.
fn closing(sub: Option<&str>, subpages: &[&str]) -> Roff {
    let mut r = Roff::new();
    r.control("SH", ["EXIT STATUS"]);
    for (code, what) in exit_status(sub) {
        r.control("TP", []);
        r.text([bold(*code)]);
        r.text([roman(*what)]);
    }
    r.control("SH", ["SEE ALSO"]);
    // Page names are not to be hyphenated at a line's end.
    r.control("nh", []);
    let mut pages: Vec<String> = match sub {
        // The subcommands' pages, then the peers netmeter speaks to.
        None => subpages
            .iter()
            .map(|p| format!("{p}(1)"))
            .chain(["iperf3(1)".to_string(), "iperf(1)".to_string()])
            .collect(),
        Some(_) => vec!["netmeter(1)".to_string()],
    };
    if let Some(last) = pages.pop() {
        let mut line: Vec<_> = pages
            .iter()
            .flat_map(|p| [bold(p.clone()), roman(", ")])
            .collect();
        line.push(bold(last));
        r.text(line);
    }
    r
}
