//! `netmeter rpm-server`: the responsiveness server's own parser, reached when
//! `rpm-server` is the first argument (`cli::subcommand`). Sizes are read as the client's
//! (`units::parse_bytes`), each value checked here with the option named; the server is
//! `rpm::server`'s. docs/rpm-server.md.

use super::{ArgsError, Command, UsageError, usage};
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
    /// Append one JSON line per connection to FILE (peer, bytes each way, duration, how
    /// it ended).
    #[arg(long = "audit-log", value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
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
    pub audit_log: Option<PathBuf>,
    /// `--http3` (experimental).
    pub http3: bool,
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
    };
    let large_bytes = size("--large-size", &a.large_size, 8 << 30, (1 << 20, 1 << 50))?;
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
        audit_log: a.audit_log.clone(),
        http3: a.http3,
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
            (&["--cert", "c.pem"], "--key"),
        ] {
            let e = parse_words(words).unwrap_err();
            assert!(e.contains(says), "{words:?} → {e}");
        }
    }
}
