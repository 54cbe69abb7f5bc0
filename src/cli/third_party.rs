//! Third-party tests at the flag level: `netmeter -c B --via A [client options]` (the
//! controller), `--allow-third-party` (the server), and the one list of client options
//! a controller may have another host run ([`check_forwarded`]) — the same check on
//! both ends, so a controller learns of a refused option before it connects.
//!
//! Options are allowed by name, never refused by name: anything that reads or writes
//! files on the server (`-F`, `--logfile`, `--pidfile`), binds its sockets (`-B`,
//! `--bind-dev`, `--cport`), changes its process (`-A`, `-D`, `-d`), or is not a plain
//! client test (`-s`, `--loopback`, `--repeat`, `--find-max-rate`, `--plot`, `--csv`,
//! `--username`...) is simply not in the list.

use super::{Args, Command, UsageError, parse_args, usage};
use crate::engine::client::ClientConfig;
use crate::engine::server::third_party::{Cidr, ThirdPartyPolicy};
use crate::wire::{MAX_THIRD_PARTY_ARGS, ThirdPartyRequest};
use std::ffi::OsString;
use std::net::IpAddr;
use std::path::PathBuf;

/// Client options a third-party request may carry: (short, long, takes a value).
const ALLOWED: &[(Option<char>, &str, bool)] = &[
    (Some('t'), "time", true),
    (Some('n'), "bytes", true),
    (Some('k'), "blockcount", true),
    (Some('u'), "udp", false),
    (Some('b'), "bitrate", true),
    (Some('l'), "length", true),
    (Some('P'), "parallel", true),
    (Some('R'), "reverse", false),
    (None, "bidir", false),
    (Some('w'), "window", true),
    (Some('M'), "set-mss", true),
    (Some('N'), "no-delay", false),
    (Some('C'), "congestion", true),
    (Some('S'), "tos", true),
    (None, "dscp", true),
    (Some('O'), "omit", true),
    (Some('T'), "title", true),
    (None, "extra-data", true),
    (Some('Z'), "zerocopy", false),
    (Some('4'), "version4", false),
    (Some('6'), "version6", false),
    (Some('i'), "interval", true),
    (Some('L'), "flowlabel", true),
    (Some('m'), "mptcp", false),
    (None, "fq-rate", true),
    (None, "udp-counters-64bit", false),
    (None, "repeating-payload", false),
    (None, "get-server-output", false),
    (None, "skip-rx-copy", false),
    (None, "dont-fragment", false),
    (None, "connect-timeout", true),
    (None, "txstart-time", true),
    (None, "trip-times", false),
    (None, "no-gso", false),
    (None, "no-gro", false),
    (None, "gsro", false),
    (None, "bounceback", false),
    (None, "bounceback-request", true),
    (None, "bounceback-reply", true),
    (None, "bounceback-hold", true),
    (None, "bounceback-burst", true),
    (None, "busy-poll", true),
    (None, "connect-only", false),
    (None, "working-load", true),
    (None, "isochronous", true),
    (None, "burst-size", true),
    (None, "burst-period", true),
    (None, "pacing-timer", true),
    (None, "rcv-timeout", true),
];

fn refused(opt: &str) -> String {
    format!("{opt} cannot be part of a third-party test (only the test's own client options can)")
}

/// Check client options for a third-party request: every option is in the allowed
/// list, a value follows each that takes one; short options written separately.
pub fn check_forwarded(args: &[String]) -> Result<(), String> {
    if args.len() > MAX_THIRD_PARTY_ARGS {
        return Err(format!(
            "a third-party test takes at most {MAX_THIRD_PARTY_ARGS} option words"
        ));
    }
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        let takes_value = if let Some(long) = a.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, _)) => (n, true),
                None => (long, false),
            };
            match ALLOWED.iter().find(|o| o.1 == name) {
                // `--working-load` may stand alone or take `=VALUE` only.
                Some(&(_, "working-load", _)) => false,
                Some(o) => o.2 && !inline,
                None => return Err(refused(&format!("--{name}"))),
            }
        } else if let Some(short) = a.strip_prefix('-') {
            let mut chars = short.chars();
            let Some(c) = chars.next() else {
                return Err(refused("-"));
            };
            match ALLOWED.iter().find(|o| o.0 == Some(c)) {
                Some(o) if o.2 => chars.as_str().is_empty(),
                Some(_) if !chars.as_str().is_empty() => {
                    return Err(format!(
                        "write short options one by one in a third-party test ('{a}')"
                    ));
                }
                Some(_) => false,
                None => return Err(refused(&format!("-{c}"))),
            }
        } else {
            return Err(format!(
                "'{a}' is not an option; a third-party test takes client options only"
            ));
        };
        if takes_value {
            if i >= args.len() {
                return Err(format!("{a} needs a value"));
            }
            i += 1;
        }
    }
    Ok(())
}

/// The client test a third-party request asks for, toward `ip` (the server side's
/// `ThirdPartyPolicy::build`): the options checked, then parsed and resolved exactly as
/// the command line `netmeter -c IP -p PORT ARGS...` would be.
pub fn config_for(req: &ThirdPartyRequest, ip: IpAddr) -> Result<ClientConfig, String> {
    check_forwarded(&req.args)?;
    let mut argv: Vec<String> = vec![
        "netmeter".into(),
        "-c".into(),
        ip.to_string(),
        "-p".into(),
        req.port.to_string(),
    ];
    argv.extend(req.args.iter().cloned());
    let args = parse_args(&argv).map_err(|e| match e {
        super::ArgsError::Usage(u) => u.0,
        super::ArgsError::Clap(c) => c
            .to_string()
            .lines()
            .next()
            .unwrap_or("unreadable options")
            .trim_start_matches("error: ")
            .to_string(),
    })?;
    match args.resolve().map_err(|e| e.0)? {
        Command::Client {
            cfg,
            logfile: None,
            plot: None,
            csv: None,
        } if cfg.spec.until_interrupted() => Err(
            "a third-party test must end by itself; -t 0 would run until its host is stopped"
                .into(),
        ),
        Command::Client {
            cfg,
            logfile: None,
            plot: None,
            csv: None,
        } => Ok(cfg),
        _ => Err("a third-party test is one plain client test".into()),
    }
}

impl Args {
    /// `--allow-third-party` for a server (it needs `--psk-file`).
    pub(super) fn third_party_policy(&self) -> Result<Option<ThirdPartyPolicy>, UsageError> {
        let Some(list) = &self.hosts.allow_third_party else {
            return Ok(None);
        };
        if self.auth.psk_file.is_none() {
            return Err(usage(
                "--allow-third-party needs --psk-file: only a controller holding the key may ask for third-party tests",
            ));
        }
        let allowed =
            Cidr::parse_list(list).map_err(|e| usage(format!("--allow-third-party: {e}")))?;
        if allowed.is_empty() {
            return Err(usage(
                "--allow-third-party needs at least one address block",
            ));
        }
        Ok(Some(ThirdPartyPolicy {
            allowed,
            build: config_for,
        }))
    }
}

/// `netmeter -c B --via A[:PORT] ...`: what the controller was asked.
#[derive(Debug, Clone)]
pub struct ViaCommand {
    /// The host that runs the test (A) and its control port.
    pub via: String,
    pub via_port: u16,
    pub psk: crate::auth::psk::Psk,
    pub request: ThirdPartyRequest,
    /// `-J`: print A's report as its JSON document.
    pub json: bool,
    /// How long the test may take, for the controller's wait (its `-t`, `--omit` and
    /// setup; a byte or block test, or `-t 0`, gets a long bound).
    pub wait_s: f64,
}

/// `HOST[:PORT]` (`[v6]:PORT` for an IPv6 address with a port), default port 5201.
pub fn host_port(s: &str) -> Result<(String, u16), String> {
    let bad = || format!("'{s}' is not HOST or HOST:PORT");
    if let Some(rest) = s.strip_prefix('[') {
        let (h, tail) = rest.split_once(']').ok_or_else(bad)?;
        let port = match tail.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| bad())?,
            None if tail.is_empty() => 5201,
            None => return Err(bad()),
        };
        return Ok((h.to_string(), port));
    }
    match s.rsplit_once(':') {
        // More than one colon: a bare IPv6 address.
        Some((h, _)) if h.contains(':') => Ok((s.to_string(), 5201)),
        Some((h, p)) if !h.is_empty() => Ok((h.to_string(), p.parse().map_err(|_| bad())?)),
        Some(_) => Err(bad()),
        None if s.is_empty() => Err(bad()),
        None => Ok((s.to_string(), 5201)),
    }
}

/// How long a controller waits for the report of a test with these options: the
/// test's own length plus setup and the end exchange.
pub fn wait_for(cfg: &ClientConfig) -> f64 {
    match cfg.spec.end {
        crate::spec::EndCondition::Time(t) if t > 0.0 => t + cfg.spec.omit_s + 60.0,
        _ => 3600.0,
    }
}

/// The controller's command line, when it has `--via` (else `None`: not ours). The
/// controller's own flags (`-c`, `-p`, `--via`, `--psk-file`, `-J`) are taken out;
/// everything else is the test's, checked here as the server will check it.
pub fn parse_via(argv: &[OsString]) -> Option<Result<ViaCommand, UsageError>> {
    let words: Vec<String> = argv
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if !words
        .iter()
        .any(|w| w == "--via" || w.starts_with("--via="))
    {
        return None;
    }
    Some(split_via(&words))
}

fn split_via(words: &[String]) -> Result<ViaCommand, UsageError> {
    let (mut target, mut port, mut via, mut psk_file, mut json) =
        (None, 5201u16, None, None, false);
    let mut rest = Vec::new();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| usage(format!("{name} needs a value")))
        };
        match w.as_str() {
            "-c" | "--client" => target = Some(value(w)?),
            "-p" | "--port" => port = parse_port(&value(w)?)?,
            "--via" => via = Some(value(w)?),
            "--psk-file" => psk_file = Some(PathBuf::from(value(w)?)),
            "-J" | "--json" => json = true,
            _ => {
                if let Some(v) = w.strip_prefix("--via=") {
                    via = Some(v.to_string());
                } else if let Some(v) = w.strip_prefix("--client=") {
                    target = Some(v.to_string());
                } else if let Some(v) = w.strip_prefix("--port=") {
                    port = parse_port(v)?;
                } else if let Some(v) = w.strip_prefix("--psk-file=") {
                    psk_file = Some(PathBuf::from(v));
                } else if w.len() > 2 && w.starts_with("-c") && !w.starts_with("--") {
                    target = Some(w[2..].to_string());
                } else if w.len() > 2 && w.starts_with("-p") && !w.starts_with("--") {
                    port = parse_port(&w[2..])?;
                } else {
                    rest.push(w.clone());
                }
            }
        }
    }
    let target = target
        .ok_or_else(|| usage("--via runs a client test from another host: give it -c HOST"))?;
    let via = via.ok_or_else(|| usage("--via needs a value"))?;
    let (via, via_port) = host_port(&via).map_err(|e| usage(format!("--via: {e}")))?;
    let psk_file = psk_file.ok_or_else(|| {
        usage("--via needs --psk-file: the host running the test takes requests only from a controller holding its key")
    })?;
    let psk = crate::auth::psk::Psk::read(&psk_file).map_err(usage)?;
    check_forwarded(&rest).map_err(usage)?;
    let request = ThirdPartyRequest {
        target,
        port,
        args: rest,
    };
    // The same parse the server will make, so option mistakes show here.
    let probe = config_for(&request, IpAddr::from([127, 0, 0, 1])).map_err(usage)?;
    Ok(ViaCommand {
        via,
        via_port,
        psk,
        wait_s: wait_for(&probe),
        request,
        json,
    })
}

fn parse_port(s: &str) -> Result<u16, UsageError> {
    match s.trim().parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(usage(format!(
            "-p must be a port number (1-65535), not '{s}'"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn allowed_options_pass_and_the_rest_is_refused() {
        for ok in [
            "",
            "-t 5 -P 2 -R",
            "-u -b 100M -l 1200",
            "--bidir -t5 --title=x --working-load",
            "--trip-times -i 0.5 --txstart-time 1700000000",
        ] {
            assert_eq!(check_forwarded(&words(ok)), Ok(()), "{ok}");
        }
        for (bad, says) in [
            ("-F /etc/shadow", "-F cannot"),
            ("--logfile /tmp/x", "--logfile cannot"),
            ("--file=/etc/passwd", "--file cannot"),
            ("-B 10.0.0.1", "-B cannot"),
            ("-s", "-s cannot"),
            ("-uR", "one by one"),
            ("-t", "needs a value"),
            ("foo", "not an option"),
            ("--plot x.svg", "--plot cannot"),
        ] {
            let e = check_forwarded(&words(bad)).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    /// A value that looks like an option is taken as the value: `-T --logfile` is a
    /// title, but then `--logfile`'s own value would be a stray word, refused.
    #[test]
    fn values_are_skipped_not_checked() {
        assert_eq!(check_forwarded(&words("-T -F")), Ok(()));
        assert!(check_forwarded(&words("-T -F /etc/shadow")).is_err());
    }

    #[test]
    fn the_server_resolves_requests_like_a_command_line() {
        let req = ThirdPartyRequest {
            target: "b".into(),
            port: 5999,
            args: words("-t 3 -u -b 10M"),
        };
        let cfg = config_for(&req, "10.0.0.2".parse().unwrap()).unwrap();
        assert_eq!((cfg.host.as_str(), cfg.port), ("10.0.0.2", 5999));
        assert_eq!(cfg.spec.rate_bps, 10_000_000);
        assert_eq!(wait_for(&cfg), 63.0);
        let bad = ThirdPartyRequest {
            args: words("-t -3"),
            ..req.clone()
        };
        assert!(config_for(&bad, "10.0.0.2".parse().unwrap()).is_err());
        let endless = ThirdPartyRequest {
            args: words("-t 0"),
            ..req
        };
        let e = config_for(&endless, "10.0.0.2".parse().unwrap()).unwrap_err();
        assert!(e.contains("-t 0"), "{e}");
    }

    #[test]
    fn host_port_forms() {
        assert_eq!(host_port("a"), Ok(("a".into(), 5201)));
        assert_eq!(host_port("a:7"), Ok(("a".into(), 7)));
        assert_eq!(host_port("[::1]:7"), Ok(("::1".into(), 7)));
        assert_eq!(host_port("fd00::1"), Ok(("fd00::1".into(), 5201)));
        assert!(host_port("a:x").is_err());
        assert!(host_port(":7").is_err());
        assert!(host_port("").is_err());
    }

    #[test]
    fn the_controllers_own_flags_are_taken_out() {
        let dir = std::env::temp_dir().join(format!("nm-via-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join("k");
        std::fs::write(&key, "0123456789abcdef0123456789abcdef\n").unwrap();
        let line = format!(
            "-c b -p 6000 --via a:5300 --psk-file {} -J -t 2 -R",
            key.display()
        );
        let v = split_via(&words(&line)).unwrap();
        assert_eq!((v.via.as_str(), v.via_port), ("a", 5300));
        assert_eq!(v.request.target, "b");
        assert_eq!(v.request.port, 6000);
        assert_eq!(v.request.args, words("-t 2 -R"));
        assert!(v.json);
        let no_key = split_via(&words("-c b --via a")).unwrap_err();
        assert!(no_key.0.contains("--psk-file"), "{no_key}");
        let line = format!("-c b --via a --psk-file {} -F /etc/passwd", key.display());
        assert!(split_via(&words(&line)).unwrap_err().0.contains("-F"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
