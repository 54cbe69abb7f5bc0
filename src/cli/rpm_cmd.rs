//! `netmeter rpm URL`: its own parser, reached when `rpm` is the first argument
//! (`cli::subcommand`). The URLs and options become an `rpm::client::RpmOptions`; the
//! run is `rpm::client`'s. docs/rpm.md.

use super::{ArgsError, Command, UsageError, usage};
use crate::rpm::algo::Params;
use crate::rpm::client::{Direction, RpmOptions, Source};
use crate::rpm::config::HttpsUrl;
use crate::rpm::net::SendLimit;
use clap::{Parser, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// The longest `--max-duration` (per phase) netmeter takes.
pub const MAX_DURATION_S: f64 = 600.0;

/// Measure responsiveness (round trips per minute under working conditions) against
/// a web server, as the IETF draft draft-ietf-ippm-responsiveness defines it: HTTP/2
/// over TLS, load-generating connections added until the capacity and the
/// responsiveness are stable, foreign and self probes.
#[derive(Debug, Parser)]
#[command(
    name = "netmeter rpm",
    bin_name = "netmeter rpm",
    disable_version_flag = true,
    after_help = "URL is the server's configuration (https://HOST/.well-known/nq, Apple's /config), or give --large, --small and --upload instead.\nPrints the capacity each way, the responsiveness (RPM) with its confidence, the idle latency, the percentiles and a histogram of every kind of probe time; -J prints every probe. Ctrl-C ends the run with what was measured. See docs/rpm.md.\n\nExamples:\n  netmeter rpm https://example.net/.well-known/nq\n  netmeter rpm --insecure -d down -J https://127.0.0.1:8443/.well-known/nq\n  netmeter rpm --sequential --plot probes.svg https://example.net/.well-known/nq"
)]
pub struct RpmArgs {
    /// The server's configuration URL (https).
    #[arg(value_name = "URL", required_unless_present_all = ["large", "small", "upload"])]
    pub url: Option<String>,
    /// The large object to download, instead of a configuration.
    #[arg(long, value_name = "URL", requires_all = ["small", "upload"], conflicts_with = "url")]
    pub large: Option<String>,
    /// The small (1-byte) object the probes fetch.
    #[arg(long, value_name = "URL", requires_all = ["large", "upload"])]
    pub small: Option<String>,
    /// The upload sink.
    #[arg(long, value_name = "URL", requires_all = ["large", "small"])]
    pub upload: Option<String>,
    /// Accept any server certificate (for a test server with a self-signed one).
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// Also trust the certificates of this PEM file.
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    pub cacert: Option<PathBuf>,
    /// Which way to load the path.
    #[arg(short = 'd', long, value_enum, default_value_t = DirArg::Both)]
    pub direction: DirArg,
    /// With --direction both: download first, then upload (default: both at once).
    #[arg(short = 's', long)]
    pub sequential: bool,
    /// The longest each phase runs, seconds, before it ends with what it measured.
    #[arg(short = 'm', long, value_name = "SEC", default_value_t = 20.0)]
    pub max_duration: f64,
    /// The TCP congestion control of every connection (e.g. cubic, bbr).
    #[arg(short = 'C', long = "congestion", value_name = "ALGO")]
    pub congestion: Option<String>,
    /// Print the run as one JSON document, every probe included.
    #[arg(short = 'J', long = "json")]
    pub json: bool,
    /// Draw the probe times over the run (.svg or .png).
    #[arg(long = "plot", value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Experimental: run the test over HTTP/3 (QUIC) instead of HTTP/2 over TLS; the
    /// foreign probe's TCP and TLS times are then each the QUIC handshake (QUIC's own
    /// congestion control, CUBIC: -C does not apply).
    #[arg(long = "http3", conflicts_with = "congestion")]
    pub http3: bool,
    /// What each TCP connection may hold unsent ahead of the path, which a self probe
    /// waits behind (draft -09's advice): `auto` (the default) holds the kernel's
    /// unsent bytes (TCP_NOTSENT_LOWAT, with MSG_EOR), rustls's records and the body's
    /// chunks each to 1 ms of the connection's delivery rate; BYTES fixes
    /// TCP_NOTSENT_LOWAT at that (16384 was the default before auto); 0 leaves the
    /// kernel's default (no limit).
    #[arg(long = "notsent-lowat", value_name = "auto|BYTES", default_value = "auto", value_parser = parse_send_limit)]
    pub notsent_lowat: SendLimit,
}

/// `--notsent-lowat auto|BYTES|0` (`rpm` and `rpm-server`).
pub(super) fn parse_send_limit(v: &str) -> Result<SendLimit, String> {
    match v {
        "auto" => Ok(SendLimit::Auto),
        "0" => Ok(SendLimit::Kernel),
        _ => match v.parse::<u32>() {
            Ok(n) => Ok(SendLimit::Fixed(n)),
            Err(_) => Err(format!("'{v}' is neither auto nor a number of bytes")),
        },
    }
}

/// `-C ALGO` (`rpm` and `rpm-server`): a name the kernel could know (it says at the
/// first socket whether it does).
pub(super) fn check_congestion(cc: &Option<String>) -> Result<(), UsageError> {
    match cc {
        Some(cc) if cc.is_empty() || cc.len() > 15 || !cc.bytes().all(|b| b.is_ascii_graphic()) => {
            Err(usage(format!(
                "--congestion {cc}: not a congestion control name"
            )))
        }
        _ => Ok(()),
    }
}

/// `--direction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DirArg {
    Down,
    Up,
    Both,
}

/// What `netmeter rpm` runs.
#[derive(Debug)]
pub struct RpmCommand {
    pub opts: RpmOptions,
    pub json: bool,
    pub plot: Option<PathBuf>,
}

/// Parse `rpm ...` (the arguments after the program name).
pub fn parse(args: &[std::ffi::OsString]) -> Result<Command, ArgsError> {
    let a = RpmArgs::try_parse_from(args).map_err(ArgsError::Clap)?;
    resolve(&a).map(Command::Rpm).map_err(ArgsError::Usage)
}

fn url(option: &str, s: &str) -> Result<HttpsUrl, UsageError> {
    HttpsUrl::parse(s).map_err(|why| usage(format!("{option} {s}: {why}")))
}

/// The typed options of `a`.
pub fn resolve(a: &RpmArgs) -> Result<RpmCommand, UsageError> {
    let source = match (&a.url, &a.large, &a.small, &a.upload) {
        (Some(u), None, None, None) => Source::Config(url("URL", u)?),
        (None, Some(l), Some(s), Some(u)) => Source::Urls {
            large: url("--large", l)?,
            small: url("--small", s)?,
            upload: url("--upload", u)?,
        },
        _ => {
            return Err(usage(
                "give the configuration URL, or all of --large, --small and --upload",
            ));
        }
    };
    if !(a.max_duration.is_finite() && a.max_duration >= 1.0 && a.max_duration <= MAX_DURATION_S) {
        return Err(usage(format!(
            "--max-duration {}: give seconds from 1 to {MAX_DURATION_S}",
            a.max_duration
        )));
    }
    if a.sequential && a.direction != DirArg::Both {
        return Err(usage(
            "--sequential: only with --direction both (one direction is one phase)",
        ));
    }
    if let Some(p) = &a.plot
        && crate::report::plot::Format::of(p).is_none()
    {
        return Err(usage(format!(
            "--plot {}: the file name must end in .svg or .png",
            p.display()
        )));
    }
    check_congestion(&a.congestion)?;
    let params = Params {
        max_duration: Duration::from_secs_f64(a.max_duration),
        ..Params::default()
    };
    Ok(RpmCommand {
        opts: RpmOptions {
            source,
            insecure: a.insecure,
            cacert: a.cacert.clone(),
            direction: match a.direction {
                DirArg::Down => Direction::Down,
                DirArg::Up => Direction::Up,
                DirArg::Both => Direction::Both,
            },
            sequential: a.sequential,
            params,
            congestion: a.congestion.clone(),
            http3: a.http3,
            send_limit: a.notsent_lowat,
        },
        json: a.json,
        plot: a.plot.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_of(args: &[&str]) -> Result<RpmCommand, String> {
        let argv: Vec<std::ffi::OsString> = std::iter::once("rpm")
            .chain(args.iter().copied())
            .map(Into::into)
            .collect();
        match parse(&argv) {
            Ok(Command::Rpm(c)) => Ok(c),
            Ok(_) => Err("another command".into()),
            Err(ArgsError::Usage(u)) => Err(u.0),
            Err(ArgsError::Clap(e)) => Err(e.to_string()),
        }
    }

    #[test]
    fn http3_is_asked_for_and_refuses_a_tcp_congestion_control() {
        let url = "https://h/.well-known/nq";
        assert!(!parse_of(&[url]).unwrap().opts.http3);
        assert!(parse_of(&["--http3", url]).unwrap().opts.http3);
        let e = parse_of(&["--http3", "-C", "cubic", url]).unwrap_err();
        assert!(e.contains("--http3") && e.contains("--congestion"), "{e}");
    }

    #[test]
    fn a_configuration_url_and_the_defaults() {
        let c = parse_of(&["https://127.0.0.1:8443/.well-known/nq", "-k"]).unwrap();
        assert!(matches!(&c.opts.source, Source::Config(u) if u.port == 8443));
        assert!(c.opts.insecure);
        assert_eq!(c.opts.direction, Direction::Both);
        assert!(!c.opts.sequential);
        assert_eq!(c.opts.params.max_duration, Duration::from_secs(20));
        assert_eq!(c.opts.params.interval, Duration::from_secs(1));
        assert_eq!(c.opts.send_limit, SendLimit::Auto);
    }

    #[test]
    fn notsent_lowat_is_auto_by_default_a_number_fixes_it_and_zero_leaves_the_kernels() {
        let url = "https://h/.well-known/nq";
        let at = |v: &str| parse_of(&["--notsent-lowat", v, url]).map(|c| c.opts.send_limit);
        assert_eq!(at("auto"), Ok(SendLimit::Auto));
        assert_eq!(at("4096"), Ok(SendLimit::Fixed(4096)));
        assert_eq!(at("16384"), Ok(SendLimit::Fixed(16384)));
        assert_eq!(at("0"), Ok(SendLimit::Kernel));
        let e = at("lots").unwrap_err();
        assert!(e.contains("--notsent-lowat"), "{e}");
    }

    #[test]
    fn urls_given_one_by_one() {
        let c = parse_of(&[
            "--large",
            "https://h/large",
            "--small",
            "https://h/small",
            "--upload",
            "https://h/slurp",
            "-d",
            "down",
            "-m",
            "5",
            "-C",
            "cubic",
        ])
        .unwrap();
        assert!(matches!(&c.opts.source, Source::Urls { small, .. } if small.path == "/small"));
        assert_eq!(c.opts.direction, Direction::Down);
        assert_eq!(c.opts.params.max_duration, Duration::from_secs(5));
        assert_eq!(c.opts.congestion.as_deref(), Some("cubic"));
    }

    #[test]
    fn mistakes_are_one_sentence_naming_the_option() {
        let e = parse_of(&["http://h/.well-known/nq"]).unwrap_err();
        assert!(e.starts_with("URL http://h/.well-known/nq:"), "{e}");
        let e = parse_of(&["https://h/nq", "-m", "0"]).unwrap_err();
        assert!(e.starts_with("--max-duration 0:"), "{e}");
        let e = parse_of(&["https://h/nq", "-d", "up", "--sequential"]).unwrap_err();
        assert!(e.starts_with("--sequential:"), "{e}");
        let e = parse_of(&["https://h/nq", "--plot", "x.pdf"]).unwrap_err();
        assert!(e.starts_with("--plot x.pdf:"), "{e}");
        assert!(parse_of(&["--large", "https://h/l"]).is_err());
        assert!(parse_of(&[]).is_err());
    }
}
