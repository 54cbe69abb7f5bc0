//! The responsiveness reference server (nginx, laid out by
//! `scripts/setup-rpm-reference.sh` after Apple's network-quality/server configuration),
//! started on a free loopback port under a temporary prefix and stopped by its PID when
//! dropped; its access log read back as the truth a client's byte and request counts
//! are judged against.

use super::{Proc, await_tcp_listening, free_port};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

/// The env file the setup script writes.
pub fn env_path() -> PathBuf {
    std::env::var_os("NETMETER_RPM_REF_ENV").map_or_else(
        || PathBuf::from("/opt/netmeter-rpm-reference/rpm-reference.env"),
        PathBuf::from,
    )
}

fn env() -> HashMap<String, String> {
    let path = env_path();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {} ({e}); run scripts/setup-rpm-reference.sh first (scripts/test.sh does)",
            path.display()
        )
    });
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A running reference server.
pub struct RpmReference {
    proc: Option<Proc>,
    pub port: u16,
    pub prefix: PathBuf,
    /// The address it listens on.
    pub addr: String,
}

impl RpmReference {
    /// Starts nginx on 127.0.0.1 (a free port) and waits until it listens.
    pub fn start() -> RpmReference {
        RpmReference::start_with("127.0.0.1", None, |nginx| Command::new(nginx))
    }

    /// Starts nginx listening on `addr` (an IPv4 address) at a free port, with the
    /// `cert.pem` and `key.pem` of `certs` (default: the setup script's self-signed
    /// ones), its command made by `command` from nginx's path (`Netbed::cmd` to run it
    /// in a namespace, which execs nginx itself: the PID stays nginx's).
    pub fn start_with(
        addr: &str,
        certs: Option<&std::path::Path>,
        command: impl FnOnce(&str) -> Command,
    ) -> RpmReference {
        let env = env();
        let port = free_port();
        let prefix = std::env::temp_dir().join(format!("nm-rpmref-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&prefix);
        std::fs::create_dir_all(&prefix).expect("prefix");
        let template = std::fs::read_to_string(&env["TEMPLATE"]).expect("template");
        let conf = template
            .replace("@PREFIX@", prefix.to_str().expect("utf-8 temp dir"))
            .replace("@ADDR@", addr)
            .replace("@PORT@", &port.to_string())
            .replace(
                "@CERTS@",
                certs.map_or(env["CERTS"].as_str(), |c| c.to_str().expect("utf-8 path")),
            )
            .replace("@ROOT@", &env["ROOT"]);
        std::fs::write(prefix.join("nginx.conf"), conf).expect("nginx.conf");
        let base = format!("https://{addr}:{port}");
        let config = format!(
            r#"{{"version":1,"urls":{{"small_https_download_url":"{base}/files/small","large_https_download_url":"{base}/files/large","https_upload_url":"{base}/slurp","small_download_url":"{base}/files/small","large_download_url":"{base}/files/large","upload_url":"{base}/slurp"}}}}"#
        );
        std::fs::write(prefix.join("config"), config).expect("config");
        let proc = Proc::spawn(
            "nginx",
            command(&env["NGINX"])
                .arg("-p")
                .arg(&prefix)
                .arg("-c")
                .arg(prefix.join("nginx.conf")),
        );
        await_tcp_listening(proc.pid(), port);
        RpmReference {
            proc: Some(proc),
            port,
            prefix,
            addr: addr.to_string(),
        }
    }

    /// The configuration URL.
    pub fn config_url(&self) -> String {
        format!("https://{}:{}/.well-known/nq", self.addr, self.port)
    }

    /// The access log's entries so far.
    pub fn log(&self) -> Vec<LogEntry> {
        let text = std::fs::read_to_string(self.prefix.join("access.log")).unwrap_or_default();
        text.lines().filter_map(LogEntry::parse).collect()
    }

    /// nginx's error log, for a failing test's message.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.prefix.join("error.log")).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.proc.as_ref().expect("running").pid()
    }
}

impl Drop for RpmReference {
    fn drop(&mut self) {
        // nginx first (killed by its PID as its `Proc` drops), then its prefix.
        drop(self.proc.take());
        let _ = std::fs::remove_dir_all(&self.prefix);
    }
}

/// One access-log line, in the template's `rpm` format.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEntry {
    pub method: String,
    pub uri: String,
    pub status: u16,
    /// All bytes sent (headers and body).
    pub sent: u64,
    pub body_sent: u64,
    /// The request's length, body included.
    pub received: u64,
    pub connection: u64,
}

impl LogEntry {
    fn parse(line: &str) -> Option<LogEntry> {
        let q1 = line.find('"')?;
        let q2 = q1 + 1 + line[q1 + 1..].find('"')?;
        let (method, uri) = line[q1 + 1..q2].split_once(' ')?;
        let mut rest = line[q2 + 1..].split_whitespace();
        let status = rest.next()?.parse().ok()?;
        let kv: HashMap<&str, &str> = rest.filter_map(|f| f.split_once('=')).collect();
        Some(LogEntry {
            method: method.to_string(),
            uri: uri.to_string(),
            status,
            sent: kv.get("sent")?.parse().ok()?,
            body_sent: kv.get("body_sent")?.parse().ok()?,
            received: kv.get("received")?.parse().ok()?,
            connection: kv.get("conn")?.parse().ok()?,
        })
    }
}
