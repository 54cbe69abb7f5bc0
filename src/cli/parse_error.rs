//! clap's parse errors of the flat command line, reworded as one sentence that names
//! the option and the value: a value that does not parse, an option that does not
//! exist (with clap's suggestion only when it is close), a stray word (`-s 10.0.0.1`,
//! which iperf3 ignores: here it points to `-B`), an option given no value. Help and
//! the rest keep clap's own text.

use super::{ArgsError, usage};
use clap::error::{ContextKind, ContextValue, ErrorKind};
use std::ffi::OsString;

/// One sentence for `e`, an error of parsing `argv` (the whole command line), or
/// clap's own message.
pub(super) fn reword(e: clap::Error, argv: &[OsString], cmd: &clap::Command) -> ArgsError {
    let text = |k: ContextKind| match e.get(k) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        Some(ContextValue::Strings(v)) => v.first().cloned(),
        _ => None,
    };
    let sentence = match e.kind() {
        ErrorKind::ValueValidation => {
            let why = std::error::Error::source(&e).map(ToString::to_string);
            match (
                why,
                text(ContextKind::InvalidArg),
                text(ContextKind::InvalidValue),
            ) {
                // netmeter's own parsers name the flag first.
                (Some(why), _, _) if why.starts_with('-') => why,
                (Some(why), Some(arg), Some(value)) => {
                    format!("{}: '{value}' is not valid ({why})", flag_of(&arg))
                }
                _ => return ArgsError::Clap(e),
            }
        }
        // `-t` last on the line.
        ErrorKind::InvalidValue => match (
            text(ContextKind::InvalidArg),
            text(ContextKind::InvalidValue),
        ) {
            (Some(arg), Some(v)) if v.is_empty() => format!("{arg} needs a value; none was given"),
            _ => return ArgsError::Clap(e),
        },
        ErrorKind::UnknownArgument => match text(ContextKind::InvalidArg) {
            Some(arg) => unknown(&arg, text(ContextKind::SuggestedArg).as_deref(), argv, cmd),
            None => return ArgsError::Clap(e),
        },
        _ => return ArgsError::Clap(e),
    };
    ArgsError::Usage(usage(sentence))
}

/// `--time <SEC>` → `--time`.
fn flag_of(arg: &str) -> &str {
    arg.split([' ', '=']).next().unwrap_or(arg)
}

/// An argument clap did not expect: an option that does not exist, or a word where
/// none belongs.
fn unknown(arg: &str, suggested: Option<&str>, argv: &[OsString], cmd: &clap::Command) -> String {
    // `--timestamps %T`: an option whose value must follow '=' (iperf3's optional
    // values), given its value as the next word.
    let before = argv
        .iter()
        .position(|a| a == arg)
        .and_then(|i| argv.get(i.checked_sub(1)?))
        .and_then(|p| p.to_str());
    if let Some(prev) = before
        && cmd.get_arguments().any(|a| {
            a.is_require_equals_set()
                && (a
                    .get_long()
                    .is_some_and(|l| prev.strip_prefix("--") == Some(l))
                    || a.get_short().is_some_and(|s| prev == format!("-{s}")))
        })
    {
        return format!("{prev} takes its value after '=': {prev}={arg}");
    }
    if arg.starts_with('-') {
        return match suggested.map(flag_of).filter(|s| close(arg, s)) {
            Some(s) => format!("unknown option '{arg}'; did you mean '{s}'?"),
            None => format!("unknown option '{arg}'; netmeter --help lists the options"),
        };
    }
    if super::help::SUBCOMMANDS
        .iter()
        .any(|(name, _)| *name == arg)
    {
        return format!("'{arg}' is a subcommand: give it first, as in netmeter {arg} --help");
    }
    let server = argv.iter().skip(1).any(|a| a == "-s" || a == "--server");
    if server {
        // iperf3 ignores the word and listens on every address; netmeter does not
        // guess: the user meant one address, which is -B.
        return match arg.parse::<std::net::IpAddr>() {
            Ok(_) => {
                format!("-s takes no address ('{arg}'); to listen on {arg} only, use -s -B {arg}")
            }
            Err(_) => format!(
                "-s takes no value ('{arg}'); to listen on one address only, use -s -B ADDR"
            ),
        };
    }
    format!("unexpected argument '{arg}': every value follows its option (netmeter --help)")
}

/// Whether `typed` is a plausible typo of `known` (both options): clap suggests the
/// most similar option however far it is, and `--no-such-option` → `--no-gso` helps
/// nobody. Close: at most one edit per four letters of the option (at least one).
fn close(typed: &str, known: &str) -> bool {
    let a: Vec<char> = typed.trim_start_matches('-').chars().collect();
    let b: Vec<char> = known.trim_start_matches('-').chars().collect();
    edit_distance(&a, &b) <= (b.len() / 4).max(1)
}

/// Levenshtein distance (insertions, deletions, substitutions).
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A parser netmeter did not write (here clap's u8) still gets the option and the
    /// value named.
    #[test]
    fn any_value_error_names_the_option_and_value() {
        let cmd = clap::Command::new("t").arg(
            clap::Arg::new("n")
                .long("count")
                .value_name("N")
                .value_parser(clap::value_parser!(u8)),
        );
        let argv: Vec<OsString> = ["t", "--count", "x"].iter().map(Into::into).collect();
        let e = cmd.clone().try_get_matches_from(&argv).unwrap_err();
        match reword(e, &argv, &cmd) {
            ArgsError::Usage(u) => assert_eq!(
                u.0,
                "--count: 'x' is not valid (invalid digit found in string)"
            ),
            ArgsError::Clap(e) => panic!("{e}"),
        }
    }

    #[test]
    fn close_means_a_typo() {
        assert!(close("--servr", "--server"));
        assert!(close("--paralel", "--parallel"));
        assert!(close("--udp-counters-64", "--udp-counters-64bit"));
        assert!(!close("--no-such-option", "--no-gso"));
        assert!(!close("--no-such-option", "--no-fq-socket-pacing"));
        assert!(!close("--abc", "--bidir"));
        let d = |a: &str, b: &str| {
            edit_distance(
                &a.chars().collect::<Vec<_>>(),
                &b.chars().collect::<Vec<_>>(),
            )
        };
        assert_eq!(d("kitten", "sitting"), 3);
        assert_eq!(d("", "abc"), 3);
        assert_eq!(d("abc", "abc"), 0);
    }
}
