//! `netmeter rpm-server`: the responsiveness server's own parser, reached when
//! `rpm-server` is the first argument (`cli::subcommand`). Sizes are read as the client's
//! (`units::parse_bytes`), each value checked here with the option named; the server is
//! `rpm::server`'s. docs/rpm-server.md.

use super::{ArgsError, Command, UsageError, usage};
use crate::engine::server::audit::Target as AuditTarget;
use crate::rpm::net::SendLimit;
use crate::rpm::server_config::origin_from_authority;
use crate::rpm::server_policy::Limits;
use clap::Parser;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// Serve the IETF responsiveness test (draft-ietf-ippm-responsiveness) over HTTP/2 and
/// TLS: the configuration at /.well-known/nq, a 1-byte and a large object, an upload
/// sink, as Apple's reference server does.
#[derive(Debug, Parser)]
#[command(
    name = "netmeter rpm-server",
    bin_name = "netmeter rpm-server",
    disable_version_flag = true,
    after_help = "Paths: /.well-known/nq and /config (the configuration, its URLs built from the name the client used, or --public-name), /files/small (1 byte), /files/large (--large-size bytes, made on the fly), /slurp (POST: the body read and discarded). Without --cert/--key a self-signed certificate is made at start and its SHA-256 fingerprint and public key pin printed. See docs/rpm-server.md.\n\nExamples:\n  netmeter rpm-server\n  netmeter rpm-server -p 4443 --public-name rpm.example.net:4443 --cert cert.pem --key key.pem\n  netmeter rpm-server --max-connections 64 --audit-log rpm-audit.jsonl\n  curl -k https://localhost:8443/.well-known/nq"
)]
pub struct RpmServerArgs {
    /// Listen on this address.
    #[arg(
        short = 'B',
        long = "bind",
        value_name = "ADDR",
        default_value = "0.0.0.0"
    )]
    pub bind: IpAddr,
    /// Listen on this port (0: any free port, printed at start).
    #[arg(
        short = 'p',
        long = "port",
        value_name = "PORT",
        default_value_t = 8443
    )]
    pub port: u16,
    /// The certificate chain (PEM, leaf first); with --key.
    #[arg(long = "cert", value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,
    /// The certificate's private key (PEM); with --cert.
    #[arg(long = "key", value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    /// The host name, with a port if given, that the configuration's URLs name, whatever
    /// name a client used (also put in the self-signed certificate).
    #[arg(long = "public-name", value_name = "HOST[:PORT]")]
    pub public_name: Option<String>,
    /// Connections open at once; one more is closed at accept [default: 256].
    #[arg(long = "max-connections", value_name = "N")]
    pub max_connections: Option<usize>,
    /// Connections open at once from one address [default: 64].
    #[arg(long = "max-connections-per-host", value_name = "N")]
    pub max_per_host: Option<usize>,
    /// A request's header block, at most (8K to 1M) [default: 16K].
    #[arg(long = "max-header-size", value_name = "SIZE")]
    pub max_header_size: Option<String>,
    /// Seconds for the TLS handshake, and for an HTTP/1.1 request's header, to arrive
    /// [default: 10].
    #[arg(long = "header-timeout", value_name = "SEC")]
    pub header_timeout: Option<f64>,
    /// Close a connection on which no byte moved for SEC seconds [default: 60].
    #[arg(long = "idle-timeout", value_name = "SEC")]
    pub idle_timeout: Option<f64>,
    /// Bytes one connection may move, both ways, TLS included; past it the connection is
    /// closed [default: 64G].
    #[arg(long = "max-transfer", value_name = "SIZE")]
    pub max_transfer: Option<String>,
    /// The large object's size (at least 1M) [default: 8G, 8 GiB].
    #[arg(long = "large-size", value_name = "SIZE")]
    pub large_size: Option<String>,
    /// Only these sources may connect (addresses or CIDR networks, comma-separated), as
    /// `netmeter -s --allow`.
    #[arg(long = "allow", value_name = "CIDR,...", value_delimiter = ',')]
    pub allow: Vec<String>,
    /// These sources may not connect (wins over --allow).
    #[arg(long = "deny", value_name = "CIDR,...", value_delimiter = ',')]
    pub deny: Vec<String>,
    /// Let one source address open at most N connections per period (N, N/s, N/min,
    /// N/h; a bare N is per minute). A responsiveness test opens one connection per
    /// foreign probe, up to 100 a second.
    #[arg(long = "max-conn-rate", value_name = "N[/PERIOD]")]
    pub max_conn_rate: Option<String>,
    /// Append one JSON line per connection to FILE (peer, bytes each way, duration, how
    /// it ended).
    #[arg(long = "audit-log", value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
    /// The TCP congestion control of every connection it accepts (e.g. cubic, bbr): a
    /// download's load is this server's sending [default: the system's].
    #[arg(short = 'C', long = "congestion", value_name = "ALGO")]
    pub congestion: Option<String>,
    /// What each connection may hold unsent ahead of the path, which a download's self
    /// probe waits behind, as `netmeter rpm --notsent-lowat` for an upload: `auto` (the
    /// default) holds the kernel's unsent bytes (with MSG_EOR), rustls's records and
    /// the large object's chunks each to 1 ms of the connection's delivery rate; BYTES
    /// fixes TCP_NOTSENT_LOWAT at that; 0 leaves the kernel's default.
    #[arg(long = "notsent-lowat", value_name = "auto|BYTES", default_value = "auto", value_parser = super::rpm_cmd::parse_send_limit)]
    pub notsent_lowat: SendLimit,
    /// Experimental: also serve HTTP/3 (QUIC, ALPN h3) on UDP at the same port, with the
    /// same paths and limits, advertised by Alt-Svc on the HTTP/2 answers.
    #[arg(long = "http3")]
    pub http3: bool,
}

/// Where the certificate comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum CertSource {
    /// `--cert FILE --key FILE`.
    Files { cert: PathBuf, key: PathBuf },
    /// Made at start for these names.
    SelfSigned(Vec<String>),
}

/// What `netmeter rpm-server` runs.
#[derive(Debug, Clone, PartialEq)]
pub struct RpmServerCommand {
    pub listen: SocketAddr,
    pub cert: CertSource,
    pub public_name: Option<String>,
    pub limits: Limits,
    pub large_bytes: u64,
    /// `--audit-log FILE` (no rotation), or `netmeter -s`'s audit log with its rotation
    /// when the server runs inside `netmeter -s --rpm`.
    pub audit_log: Option<AuditTarget>,
    /// `--http3` (experimental).
    pub http3: bool,
    /// `-C`: every accepted connection's congestion control.
    pub congestion: Option<String>,
    /// `--notsent-lowat`.
    pub send_limit: SendLimit,
    /// Inside `netmeter -s -J --rpm`: the banner and log lines go out as the `-s`
    /// server's JSON `server_log` events, so stdout stays JSON.
    pub json_log: bool,
}

/// Parse `rpm-server ...` (the arguments after the program name).
pub fn parse(args: &[std::ffi::OsString]) -> Result<Command, ArgsError> {
    let a = RpmServerArgs::try_parse_from(args).map_err(ArgsError::Clap)?;
    resolve(&a)
        .map(Command::RpmServer)
        .map_err(ArgsError::Usage)
}

fn size(opt: &str, v: &Option<String>, default: u64, range: (u64, u64)) -> Result<u64, UsageError> {
    let Some(s) = v else { return Ok(default) };
    let n = crate::units::parse_bytes(s).map_err(|e| usage(format!("{opt} {s}: {e}")))?;
    if !(range.0..=range.1).contains(&n) {
        return Err(usage(format!(
            "{opt} must be {} to {} bytes, not {s}",
            range.0, range.1
        )));
    }
    Ok(n)
}

fn seconds(opt: &str, v: Option<f64>, default: f64) -> Result<Duration, UsageError> {
    let s = v.unwrap_or(default);
    if !(0.1..=86_400.0).contains(&s) {
        return Err(usage(format!(
            "{opt} must be 0.1 to 86400 seconds, not {s}"
        )));
    }
    Ok(Duration::from_secs_f64(s))
}

fn count(opt: &str, v: Option<usize>, default: usize) -> Result<usize, UsageError> {
    let n = v.unwrap_or(default);
    if !(1..=1 << 20).contains(&n) {
        return Err(usage(format!("{opt} must be 1 to 1048576, not {n}")));
    }
    Ok(n)
}

/// The options checked and resolved.
pub fn resolve(a: &RpmServerArgs) -> Result<RpmServerCommand, UsageError> {
    let d = Limits::default();
    let limits = Limits {
        max_connections: count("--max-connections", a.max_connections, d.max_connections)?,
        max_per_host: count("--max-connections-per-host", a.max_per_host, d.max_per_host)?,
        max_header_bytes: size(
            "--max-header-size",
            &a.max_header_size,
            d.max_header_bytes as u64,
            // hyper's HTTP/1.1 read buffer cannot be smaller than 8 KiB.
            (8 << 10, 1 << 20),
        )? as usize,
        header_timeout: seconds("--header-timeout", a.header_timeout, 10.0)?,
        idle_timeout: seconds("--idle-timeout", a.idle_timeout, 60.0)?,
        max_transfer_bytes: size(
            "--max-transfer",
            &a.max_transfer,
            d.max_transfer_bytes,
            (64 << 10, u64::MAX),
        )?,
        // The netmeter server's own readers: the same lists and rates mean the same.
        allow: super::resolve::networks("--allow", &a.allow)?,
        deny: super::resolve::networks("--deny", &a.deny)?,
        conn_rate: a
            .max_conn_rate
            .as_deref()
            .map(crate::engine::server::policy::ConnRate::parse)
            .transpose()
            .map_err(usage)?,
    };
    let large_bytes = size("--large-size", &a.large_size, 8 << 30, (1 << 20, 1 << 50))?;
    super::rpm_cmd::check_congestion(&a.congestion)?;
    if let Some(p) = &a.public_name
        && origin_from_authority(p).is_none()
    {
        return Err(usage(format!(
            "--public-name takes HOST[:PORT] (an IPv6 address in brackets), not {p}"
        )));
    }
    let cert = match (&a.cert, &a.key) {
        (Some(cert), Some(key)) => CertSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        },
        _ => CertSource::SelfSigned(self_signed_names(a)),
    };
    Ok(RpmServerCommand {
        listen: SocketAddr::new(a.bind, a.port),
        cert,
        public_name: a.public_name.clone(),
        limits,
        large_bytes,
        audit_log: a.audit_log.clone().map(|path| AuditTarget {
            path,
            rotation: None,
        }),
        http3: a.http3,
        congestion: a.congestion.clone(),
        send_limit: a.notsent_lowat,
        json_log: false,
    })
}

/// `netmeter -s --rpm [PORT]`: the responsiveness server inside the iperf3-compatible
/// one, on `-B`'s address (all IPv4 addresses without it), with `-s`'s `--allow`/`--deny`
/// lists and audit log and `--rpm-cert`/`--rpm-key`; its other limits are
/// `rpm-server`'s defaults. `-s`'s `--max-conn-rate` counts tests, not connections (a
/// responsiveness test opens one per foreign probe), so it is not applied here.
pub fn alongside(
    bind: Option<IpAddr>,
    port: u16,
    cert: Option<(PathBuf, PathBuf)>,
    allow: &[String],
    deny: &[String],
    audit_log: Option<AuditTarget>,
    json_log: bool,
) -> Result<RpmServerCommand, UsageError> {
    let (cert, key) = cert.unzip();
    let args = RpmServerArgs {
        bind: bind.unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)),
        port,
        cert,
        key,
        public_name: None,
        max_connections: None,
        max_per_host: None,
        max_header_size: None,
        header_timeout: None,
        idle_timeout: None,
        max_transfer: None,
        large_size: None,
        allow: allow.to_vec(),
        deny: deny.to_vec(),
        max_conn_rate: None,
        audit_log: None,
        congestion: None,
        notsent_lowat: SendLimit::Auto,
        http3: false,
    };
    Ok(RpmServerCommand {
        audit_log,
        json_log,
        ..resolve(&args)?
    })
}

/// The names a self-signed certificate is made for: localhost and the loopback
/// addresses, the bound address when it is a specific one, and --public-name's host.
fn self_signed_names(a: &RpmServerArgs) -> Vec<String> {
    let mut names: Vec<String> = ["localhost", "127.0.0.1", "::1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if !a.bind.is_unspecified() {
        names.push(a.bind.to_string());
    }
    if let Some(p) = &a.public_name {
        let host = match p.strip_prefix('[') {
            Some(rest) => rest.split(']').next().unwrap_or(rest),
            None => p.split(':').next().unwrap_or(p),
        };
        names.push(host.to_string());
    }
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.clone()));
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_words(words: &[&str]) -> Result<RpmServerCommand, String> {
        let a = RpmServerArgs::try_parse_from(
            std::iter::once("rpm-server").chain(words.iter().copied()),
        )
        .map_err(|e| e.to_string())?;
        resolve(&a).map_err(|e| e.0)
    }

    #[test]
    fn defaults_and_options_resolve() {
        let c = parse_words(&[]).unwrap();
        assert!(!c.http3);
        assert!(parse_words(&["--http3"]).unwrap().http3);
        assert_eq!(c.congestion, None);
        assert_eq!(c.send_limit, SendLimit::Auto);
        let c2 = parse_words(&["-C", "cubic", "--notsent-lowat", "16384"]).unwrap();
        assert_eq!(c2.congestion.as_deref(), Some("cubic"));
        assert_eq!(c2.send_limit, SendLimit::Fixed(16384));
        assert_eq!(
            parse_words(&["--notsent-lowat", "0"]).unwrap().send_limit,
            SendLimit::Kernel
        );
        assert_eq!(c.listen, "0.0.0.0:8443".parse().unwrap());
        assert_eq!(c.limits, Limits::default());
        assert_eq!(c.large_bytes, 8 << 30);
        assert_eq!(
            c.cert,
            CertSource::SelfSigned(vec!["localhost".into(), "127.0.0.1".into(), "::1".into()])
        );
        let c = parse_words(&[
            "-B",
            "127.0.0.2",
            "-p",
            "0",
            "--public-name",
            "[2001:db8::1]:4443",
            "--max-connections",
            "3",
            "--max-connections-per-host",
            "2",
            "--max-header-size",
            "32K",
            "--header-timeout",
            "1.5",
            "--idle-timeout",
            "2",
            "--max-transfer",
            "1M",
            "--large-size",
            "16G",
            "--allow",
            "127.0.0.0/8,::1",
            "--deny",
            "127.0.0.9",
            "--max-conn-rate",
            "600/min",
        ])
        .unwrap();
        assert_eq!(c.listen, "127.0.0.2:0".parse().unwrap());
        assert_eq!(c.limits.max_connections, 3);
        assert_eq!(c.limits.max_per_host, 2);
        assert_eq!(c.limits.max_header_bytes, 32 << 10);
        assert_eq!(c.limits.header_timeout, Duration::from_millis(1500));
        assert_eq!(c.limits.idle_timeout, Duration::from_secs(2));
        assert_eq!(c.limits.max_transfer_bytes, 1 << 20);
        assert_eq!(c.large_bytes, 16 << 30);
        assert_eq!(
            c.limits.allow,
            vec!["127.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()]
        );
        assert_eq!(c.limits.deny, vec!["127.0.0.9/32".parse().unwrap()]);
        assert_eq!(
            c.limits.conn_rate,
            Some(crate::engine::server::policy::ConnRate {
                burst: 600,
                period: Duration::from_secs(60)
            })
        );
        assert_eq!(
            c.cert,
            CertSource::SelfSigned(vec![
                "localhost".into(),
                "127.0.0.1".into(),
                "::1".into(),
                "127.0.0.2".into(),
                "2001:db8::1".into()
            ])
        );
        let c = parse_words(&["--cert", "c.pem", "--key", "k.pem"]).unwrap();
        assert_eq!(
            c.cert,
            CertSource::Files {
                cert: "c.pem".into(),
                key: "k.pem".into()
            }
        );
    }

    #[test]
    fn mistakes_name_the_option() {
        for (words, says) in [
            (&["--max-connections", "0"][..], "--max-connections must be"),
            (
                &["--max-connections-per-host", "0"],
                "--max-connections-per-host",
            ),
            (&["--max-header-size", "1K"], "--max-header-size must be"),
            (&["--max-header-size", "lots"], "--max-header-size lots"),
            (&["--header-timeout", "0"], "--header-timeout must be"),
            (&["--idle-timeout", "100000"], "--idle-timeout must be"),
            (&["--max-transfer", "1K"], "--max-transfer must be"),
            (&["--large-size", "10"], "--large-size must be"),
            (&["--public-name", "evil/x"], "--public-name takes"),
            (&["--allow", "10.0.0.0/33"], "--allow: '10.0.0.0/33' is not"),
            (&["--allow", ""], "--allow needs at least one"),
            (&["--deny", "evil"], "--deny: 'evil' is not"),
            (&["--max-conn-rate", "0"], "--max-conn-rate: '0'"),
            (
                &["--max-conn-rate", "5/fortnight"],
                "--max-conn-rate: 'fortnight'",
            ),
            (&["--cert", "c.pem"], "--key"),
            (&["-C", "no such"], "--congestion no such"),
            (&["--notsent-lowat", "lots"], "--notsent-lowat"),
        ] {
            let e = parse_words(words).unwrap_err();
            assert!(e.contains(says), "{words:?} → {e}");
        }
    }

    /// `netmeter -s --rpm`: the responsiveness server resolved from `-s`'s flags.
    #[test]
    fn s_with_rpm_takes_the_servers_lists_and_audit_log() {
        use crate::cli::{Command, parse_args};
        let server = |words: &[&str]| {
            let argv = std::iter::once("netmeter").chain(words.iter().copied());
            match parse_args(argv.collect::<Vec<_>>()).map(|a| a.resolve()) {
                Ok(Ok(Command::Server { cfg, rpm, .. })) => Ok((cfg, rpm)),
                Ok(Ok(other)) => panic!("{other:?}"),
                Ok(Err(e)) => Err(e.0),
                Err(e) => Err(format!("{e:?}")),
            }
        };
        let (_, rpm) = server(&["-s"]).unwrap();
        assert_eq!(rpm, None);
        let (cfg, rpm) = server(&[
            "-s",
            "-B",
            "127.0.0.1",
            "--rpm",
            "--deny",
            "10.0.0.0/8",
            "--max-conn-rate",
            "5/min",
            "--audit-log",
            "/x/a.jsonl",
        ])
        .unwrap();
        let rpm = rpm.expect("--rpm");
        assert_eq!(rpm.listen, "127.0.0.1:8443".parse().unwrap());
        assert_eq!(rpm.limits.deny, vec!["10.0.0.0/8".parse().unwrap()]);
        // -s's rate counts tests: not the responsiveness server's connections.
        assert_eq!(rpm.limits.conn_rate, None);
        assert_eq!(rpm.send_limit, SendLimit::Auto);
        assert_eq!(rpm.congestion, None);
        assert_eq!(rpm.audit_log, cfg.audit_log);
        assert!(matches!(rpm.cert, CertSource::SelfSigned(_)));
        let (_, rpm) = server(&[
            "-s",
            "--rpm",
            "9443",
            "--rpm-cert",
            "c.pem",
            "--rpm-key",
            "k.pem",
        ])
        .unwrap();
        let rpm = rpm.expect("--rpm 9443");
        assert_eq!(rpm.listen, "0.0.0.0:9443".parse().unwrap());
        assert_eq!(
            rpm.cert,
            CertSource::Files {
                cert: "c.pem".into(),
                key: "k.pem".into()
            }
        );
        let e = server(&["-c", "h", "--rpm"]).unwrap_err();
        assert!(e.contains("--rpm is a server option"), "{e}");
        let e = server(&["-s", "--rpm", "70000"]).unwrap_err();
        assert!(e.contains("--rpm"), "{e}");
        assert!(server(&["-s", "--rpm", "--rpm-cert", "c.pem"]).is_err());
    }
}
