//! Multicast on the command line: its flags as typed ([`MulticastFlags`], the
//! "Multicast" group of `--help`) and their resolution. A server whose `-B` names a
//! multicast group (with `-u`) is a multicast receiver, a client whose `-c` names one
//! is a multicast sender (as iperf 2 decides, `Settings.cpp`); `-H/--ssm-host` and
//! `--ttl` go with them. Resolved into `engine::multicast`'s configurations
//! (docs/multicast.md).

use super::{Args, Command, UsageError, usage};
use crate::engine::multicast::receivers::run::{ReceiversPlan, Rows};
use crate::engine::multicast::{self, ReceiverConfig, SenderConfig, target};
use crate::spec::{Direction, EndCondition, Protocol};
use crate::units::Format;
use std::time::Duration;

/// Multicast options, as typed.
#[derive(Debug, Default, clap::Args)]
pub struct MulticastFlags {
    /// Multicast receiver: hear only this source (source-specific join, -B GROUP).
    #[arg(short = 'H', long = "ssm-host", value_name = "SOURCE")]
    pub ssm_host: Option<String>,
    /// Multicast sender: the TTL / hop limit (default 1).
    #[arg(long = "ttl", value_name = "N")]
    pub ttl: Option<u32>,
    /// Multicast sender: ask these netmeter servers to join the group and report what
    /// they received, a row each (HOST or HOST:PORT, port 5201 unless given).
    #[arg(long = "receivers", value_name = "H1,H2,...")]
    pub receivers: Option<String>,
}

/// The control port of a `--receivers` host that names none: a netmeter server's
/// default. Not the client's `-p`, which is the group's port, and a server refuses a
/// group on its own port.
pub const RECEIVERS_PORT: u16 = 5201;

/// iperf 2's default multicast TTL (`-T`, 1: the local link).
pub const DEFAULT_TTL: u32 = 1;

/// A multicast command when the flags ask for one; `None` leaves them to the rest.
pub(super) fn command(a: &Args) -> Option<Result<Command, UsageError>> {
    if a.common.version {
        return None;
    }
    let recv = a.server.server && a.common.bind.as_deref().is_some_and(target::is_multicast);
    let send = a.client.client.as_deref().is_some_and(target::is_multicast);
    if !recv && !send {
        if a.multicast.ssm_host.is_some() {
            return Some(Err(usage(
                "--ssm-host names the source a multicast receiver hears; use it with -s -u -B GROUP",
            )));
        }
        if a.multicast.ttl.is_some() {
            return Some(Err(usage(
                "--ttl sets a multicast sender's TTL; use it with -c GROUP -u",
            )));
        }
        if a.multicast.receivers.is_some() {
            return Some(Err(usage(
                "--receivers names the netmeter servers a multicast sender asks to join; use it with -c GROUP -u",
            )));
        }
        return None;
    }
    Some(roles(a).and_then(|format| {
        if recv {
            receiver(a, format)
        } else {
            sender(a, format)
        }
    }))
}

/// The checks every command line's resolution makes first: one role, the format.
fn roles(a: &Args) -> Result<Format, UsageError> {
    if a.server.server && (a.client.client.is_some() || a.common.loopback) {
        return Err(usage("use only one of -s, -c and --loopback"));
    }
    let rows = a.client.client.is_some() && a.multicast.receivers.is_some();
    if a.output.plot.is_some() || (a.output.csv && !rows) {
        return Err(usage(
            "--plot and --csv draw a unicast test; a multicast test prints its rows (-J: JSON lines)",
        ));
    }
    match &a.output.format {
        Some(f) => Format::parse(f).map_err(usage),
        None => Ok(Format::Auto),
    }
}

fn receiver(a: &Args, format: Format) -> Result<Command, UsageError> {
    if !a.udp.udp {
        return Err(usage("a multicast group with -B (-s) receives UDP; add -u"));
    }
    if a.multicast.ttl.is_some() {
        return Err(usage("--ttl is a multicast sender's option (-c GROUP)"));
    }
    if a.multicast.receivers.is_some() {
        return Err(usage(
            "--receivers is a multicast sender's option (-c GROUP -u); a receiver is a netmeter server (-s)",
        ));
    }
    let list = a.common.bind.as_deref().unwrap_or_default();
    let (groups, source) =
        target::parse_groups(list, a.multicast.ssm_host.as_deref()).map_err(usage)?;
    let duration = match a.client.time {
        Some(t) if !(t > 0.0 && t <= 86400.0) => {
            return Err(usage(format!(
                "-t {t}: a multicast receiver runs 0.001 to 86400 seconds (leave -t out to run until stopped)"
            )));
        }
        t => t.map(Duration::from_secs_f64),
    };
    Ok(Command::MulticastReceive {
        cfg: ReceiverConfig {
            groups,
            source,
            port: a.common.port,
            interval_s: a.output.interval,
            idle_s: multicast::DEFAULT_IDLE_S,
            one_off: a.server.one_off,
            duration,
            json: a.output.json,
            format,
            clock: crate::clock::system(),
        },
        logfile: a.output.logfile.clone(),
    })
}

fn sender(a: &Args, format: Format) -> Result<Command, UsageError> {
    if !a.udp.udp {
        return Err(usage("a multicast group with -c takes UDP; add -u"));
    }
    if a.multicast.ssm_host.is_some() && a.multicast.receivers.is_none() {
        return Err(usage(
            "--ssm-host is a multicast receiver's option (-s -u -B GROUP), or with --receivers the source they join; a sender's source is its -B address",
        ));
    }
    let ttl = a.multicast.ttl.unwrap_or(DEFAULT_TTL);
    if ttl > 255 {
        return Err(usage(format!("--ttl {ttl}: a TTL is 0 to 255")));
    }
    let group =
        target::parse_group(a.client.client.as_deref().unwrap_or_default()).map_err(usage)?;
    let group_v4 = group.addr.is_ipv4();
    let c = a.client_config(format)?;
    if c.spec.protocol != Protocol::Udp
        || c.spec.parallel > 1
        || c.spec.direction != Direction::Upload
    {
        return Err(usage(
            "a multicast sender sends one UDP stream one way: no -P, -R or --bidir",
        ));
    }
    let (time, bytes) = match c.spec.end {
        EndCondition::Time(t) if t > 0.0 => (Duration::from_secs_f64(t), None),
        EndCondition::Bytes(n) => (Duration::from_secs(86400), Some(n)),
        _ => {
            return Err(usage(
                "a multicast sender needs an end: -t SECONDS (above 0) or -n BYTES",
            ));
        }
    };
    Ok(Command::MulticastSend {
        cfg: SenderConfig {
            group,
            port: a.common.port,
            bind: c.bind,
            ttl,
            looped: false,
            rate_bps: c.spec.rate_bps,
            len: if c.len_given {
                c.spec.block_len
            } else {
                multicast::DEFAULT_LEN
            },
            time,
            bytes,
            tos: c.spec.tos.unwrap_or(0),
            json: a.output.json,
            clock: crate::clock::system(),
        },
        receivers: receivers_plan(a, &c, format, group_v4)?,
        logfile: a.output.logfile.clone(),
    })
}

/// `--receivers` resolved: the hosts (each at [`RECEIVERS_PORT`] unless it names one), `-H` as
/// the source they join, the key, `--trip-times`, `-i` and how the rows print.
fn receivers_plan(
    a: &Args,
    c: &crate::engine::client::ClientConfig,
    format: Format,
    group_v4: bool,
) -> Result<Option<ReceiversPlan>, UsageError> {
    let Some(list) = a.multicast.receivers.as_deref() else {
        return Ok(None);
    };
    let hosts = target::parse_receivers(list, RECEIVERS_PORT).map_err(usage)?;
    let ssm_source = match a.multicast.ssm_host.as_deref() {
        None => None,
        Some(s) => match s.parse::<std::net::IpAddr>() {
            Ok(ip) if ip.is_ipv4() == group_v4 && !ip.is_multicast() => Some(ip),
            _ => {
                return Err(usage(format!(
                    "-H {s}: with --receivers it is the source the receivers join, a unicast address of the group's family"
                )));
            }
        },
    };
    let rows = if a.output.json {
        Rows::Json
    } else if a.output.csv {
        Rows::Csv
    } else {
        Rows::Text(format)
    };
    Ok(Some(ReceiversPlan {
        hosts,
        ssm_source,
        psk: c.psk.clone(),
        trip_times: c.spec.trip_times,
        interval: (a.output.interval > 0.0).then(|| Duration::from_secs_f64(a.output.interval)),
        connect_timeout: c.connect_timeout,
        rows,
    }))
}

#[cfg(test)]
mod tests {
    use super::super::{ArgsError, parse_args};
    use super::*;

    fn resolve(args: &[&str]) -> Result<Command, UsageError> {
        let mut v = vec!["netmeter"];
        v.extend_from_slice(args);
        match parse_args(v) {
            Ok(a) => a.resolve(),
            Err(ArgsError::Usage(e)) => Err(e),
            Err(ArgsError::Clap(e)) => Err(usage(e.to_string())),
        }
    }

    fn err(args: &[&str]) -> String {
        let e = resolve(args).expect_err("a usage error").0;
        assert!(!e.contains('\n'), "{e}");
        e
    }

    #[test]
    fn a_group_makes_a_receiver_or_a_sender() {
        match resolve(&[
            "-s",
            "-u",
            "-B",
            "232.1.1.1%eth0,232.1.1.2",
            "-H",
            "10.0.0.1",
            "-p",
            "5001",
            "-t",
            "5",
        ]) {
            Ok(Command::MulticastReceive { cfg, .. }) => {
                assert_eq!(cfg.groups.len(), 2);
                assert_eq!(cfg.source, Some("10.0.0.1".parse().unwrap()));
                assert_eq!(
                    (cfg.port, cfg.duration),
                    (5001, Some(Duration::from_secs(5)))
                );
            }
            other => panic!("{other:?}"),
        }
        match resolve(&[
            "-c",
            "239.1.1.1",
            "-u",
            "-b",
            "10M",
            "--ttl",
            "8",
            "-t",
            "3",
            "-B",
            "10.0.0.1",
        ]) {
            Ok(Command::MulticastSend { cfg, .. }) => {
                assert_eq!((cfg.ttl, cfg.rate_bps, cfg.len), (8, 10_000_000, 1470));
                assert_eq!(cfg.bind, Some("10.0.0.1".parse().unwrap()));
                assert!(!cfg.looped);
            }
            other => panic!("{other:?}"),
        }
        // A unicast -B or -c is the usual server and client.
        assert!(matches!(
            resolve(&["-s", "-B", "127.0.0.1"]),
            Ok(Command::Server { .. })
        ));
    }

    #[test]
    fn mistakes_name_the_option() {
        assert!(err(&["-s", "-B", "239.1.1.1"]).contains("-u"));
        assert!(err(&["-c", "239.1.1.1", "-t", "1"]).contains("-u"));
        assert!(err(&["-c", "239.1.1.1", "-u", "--ttl", "300"]).contains("--ttl 300"));
        assert!(err(&["-c", "239.1.1.1", "-u", "-P", "2"]).contains("-P"));
        assert!(err(&["-c", "127.0.0.1", "--ttl", "3"]).contains("--ttl"));
        assert!(err(&["-s", "-H", "10.0.0.1"]).contains("--ssm-host"));
        assert!(err(&["-s", "-u", "-B", "232.1.1.1", "-H", "fd00::1"]).contains("families"));
        assert!(err(&["-s", "-u", "-B", "239.1.1.1", "-t", "-1"]).contains("-t"));
        assert!(err(&["-s", "-u", "-B", "239.1.1.1", "-c", "h"]).contains("only one of"));
        assert!(err(&["-c", "239.1.1.1", "-u", "--csv"]).contains("--csv"));
        assert!(matches!(
            resolve(&["-v", "-c", "239.1.1.1"]),
            Ok(Command::Version)
        ));
        assert!(err(&["-c", "127.0.0.1", "--receivers", "h1"]).contains("--receivers"));
        assert!(err(&["-s", "-u", "-B", "239.1.1.1", "--receivers", "h1"]).contains("--receivers"));
        assert!(err(&["-c", "239.1.1.1", "-u", "--receivers", "h1,,h2"]).contains("--receivers"));
        assert!(
            err(&[
                "-c",
                "239.1.1.1",
                "-u",
                "--receivers",
                "h1",
                "-H",
                "fd00::1"
            ])
            .contains("-H fd00::1")
        );
    }

    #[test]
    fn receivers_resolve_into_the_senders_plan() {
        match resolve(&[
            "-c",
            "232.1.1.1",
            "-u",
            "-p",
            "5301",
            "--receivers",
            "h1,h2:5202",
            "-H",
            "10.0.0.1",
            "--trip-times",
            "--csv",
            "-i",
            "0.5",
        ]) {
            Ok(Command::MulticastSend { receivers, .. }) => {
                let p = receivers.expect("a plan");
                let hosts: Vec<(String, u16)> =
                    p.hosts.iter().map(|h| (h.host.clone(), h.port)).collect();
                // -p is the group's port; a host without one is at a server's default.
                assert_eq!(hosts, [("h1".into(), 5201), ("h2".into(), 5202)]);
                assert_eq!(p.ssm_source, Some("10.0.0.1".parse().unwrap()));
                assert!(p.trip_times);
                assert_eq!(p.rows, Rows::Csv);
                assert_eq!(p.interval, Some(Duration::from_millis(500)));
            }
            other => panic!("{other:?}"),
        }
    }
}
