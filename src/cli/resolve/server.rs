//! The server side's resolution: `-s` and its limits, policy and audit log into a
//! [`ServerConfig`](crate::engine::server::ServerConfig).

use crate::cli::*;

/// `--allow`/`--deny CIDR,...` as typed (after clap split the commas): addresses and
/// networks. Shared by `netmeter -s` and `netmeter rpm-server`, so both read the lists
/// alike.
pub(in crate::cli) fn networks(
    flag: &str,
    list: &[String],
) -> Result<Vec<ipnet::IpNet>, UsageError> {
    // An empty --allow would allow everyone: a list that came out empty (say from an
    // unset shell variable) is a mistake, not "no restriction".
    if !list.is_empty() && list.iter().all(|n| n.trim().is_empty()) {
        return Err(usage(format!(
            "{flag} needs at least one address or network, such as 10.0.0.0/8"
        )));
    }
    list.iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .map(|n| {
            n.parse::<ipnet::IpNet>()
                .or_else(|_| n.parse::<IpAddr>().map(ipnet::IpNet::from))
                .map_err(|_| {
                    usage(format!(
                        "{flag}: '{n}' is not an address or a network such as 10.0.0.0/8"
                    ))
                })
        })
        .collect()
}

impl Args {
    /// The server's [`Policy`] from its flags.
    pub(in crate::cli) fn server_policy(&self) -> Result<Policy, UsageError> {
        Ok(Policy {
            max_tests: self.server.max_tests,
            max_duration_s: self.server.server_max_duration.filter(|&d| d > 0),
            bitrate_limit: self.server_bitrate_limit()?,
            max_streams: self.server.max_streams,
            max_tests_per_source: self
                .server
                .max_tests_per_source
                .unwrap_or_else(|| Policy::default_per_source(self.server.max_tests)),
            test_idle_s: self
                .server
                .test_idle_timeout
                .unwrap_or(crate::engine::server::policy::DEFAULT_TEST_IDLE_S),
            conn_rate: self
                .server
                .max_conn_rate
                .as_deref()
                .map(ConnRate::parse)
                .transpose()
                .map_err(usage)?,
            allow: networks("--allow", &self.server.allow)?,
            deny: networks("--deny", &self.server.deny)?,
        })
    }

    /// `--server-bitrate-limit RATE[/SEC]`: bits/s (0 = none) and the averaging window
    /// (iperf3's default 5 s; 0 or 0.1 to 60 s, as iperf3 checks it).
    pub(in crate::cli) fn server_bitrate_limit(&self) -> Result<Option<(u64, f64)>, UsageError> {
        let Some(arg) = &self.server.server_bitrate_limit else {
            return Ok(None);
        };
        let (rate, window) = match arg.split_once('/') {
            Some((r, w)) => {
                let w: f64 = w
                    .trim()
                    .parse()
                    .ok()
                    .filter(|w: &f64| w.is_finite())
                    .ok_or_else(|| {
                        usage(format!(
                            "--server-bitrate-limit: '{w}' is not a number of seconds"
                        ))
                    })?;
                if w != 0.0 && !(0.1..=60.0).contains(&w) {
                    return Err(usage(
                        "--server-bitrate-limit's averaging interval must be 0 or 0.1 to 60 seconds",
                    ));
                }
                (r, w)
            }
            None => (arg.as_str(), 5.0),
        };
        not_negative(rate, || {
            "--server-bitrate-limit must be 0 or a positive rate".into()
        })?;
        let bps =
            units::parse_rate(rate).map_err(|e| usage(format!("--server-bitrate-limit: {e}")))?;
        Ok((bps > 0).then_some((bps, window)))
    }

    /// `--server-max-file-size SIZE`: what `-F` may write per test (0 = no limit).
    pub(in crate::cli) fn server_max_file_size(&self) -> Result<Option<u64>, UsageError> {
        let Some(arg) = &self.server.server_max_file_size else {
            return Ok(Some(
                crate::engine::disk_file::DEFAULT_SERVER_MAX_FILE_BYTES,
            ));
        };
        not_negative(arg, || {
            "--server-max-file-size must be 0 (no limit) or a size such as 10G".into()
        })?;
        let n =
            units::parse_bytes(arg).map_err(|e| usage(format!("--server-max-file-size: {e}")))?;
        Ok((n > 0).then_some(n))
    }

    /// `--audit-log` with its rotation (`--audit-log-max-size`, `--audit-log-keep`).
    pub(in crate::cli) fn audit_target(&self) -> Result<Option<AuditTarget>, UsageError> {
        let Some(path) = &self.server.audit_log else {
            if self.server.audit_log_max_size.is_some() || self.server.audit_log_keep.is_some() {
                return Err(usage(
                    "--audit-log-max-size and --audit-log-keep need --audit-log FILE",
                ));
            }
            return Ok(None);
        };
        let max_bytes = match self.server.audit_log_max_size.as_deref() {
            None => Rotation::DEFAULT.max_bytes,
            Some(s) => crate::units::parse_bytes(s).map_err(|_| {
                usage(format!(
                    "--audit-log-max-size takes a size such as 16M (0 = never rotate), not '{s}'"
                ))
            })?,
        };
        let keep = self.server.audit_log_keep.unwrap_or(Rotation::DEFAULT.keep);
        Ok(Some(AuditTarget {
            path: path.clone(),
            rotation: (max_bytes > 0).then_some(Rotation { max_bytes, keep }),
        }))
    }

    /// `-s` with its options: the server's checks in one sentence each, then its
    /// `Command` (the config, `-D`, `-I`, `--logfile`, `--timestamps`).
    pub(in crate::cli) fn server_command(
        &self,
        format: Format,
        csv: Option<&crate::report::csv::Columns>,
    ) -> Result<Command, UsageError> {
        if csv.is_some() {
            return Err(usage("--csv writes a client test's rows; use it with -c"));
        }
        let cfg = self.server_config(format)?;
        let rpm = match self.server.rpm {
            Some(port) => Some(crate::cli::rpm_server_cmd::alongside(
                cfg.bind,
                port,
                self.server
                    .rpm_cert
                    .clone()
                    .zip(self.server.rpm_key.clone()),
                &self.server.allow,
                &self.server.deny,
                cfg.audit_log.clone(),
                cfg.mode != crate::engine::output::Mode::Text,
            )?),
            None => None,
        };
        Ok(Command::Server {
            cfg,
            rpm,
            daemon: self.server.daemon,
            pidfile: self.server.pidfile.clone(),
            logfile: self.output.logfile.clone(),
            stamps: self.text_timestamps().map(str::to_string),
        })
    }

    /// The server side resolved: the flags as typed into a [`ServerConfig`], or the
    /// one sentence saying which option does not go (a client-only option, a limit out
    /// of range, `-F` with tests side by side).
    pub(in crate::cli) fn server_config(&self, format: Format) -> Result<ServerConfig, UsageError> {
        self.reject_client_only()?;
        if self.server.max_tests == 0 {
            return Err(usage("--max-tests must be at least 1"));
        }
        if let Some(t) = self.server.idle_timeout
            && !(1..=86400).contains(&t)
        {
            return Err(usage("--idle-timeout must be between 1 and 86400 seconds"));
        }
        // iperf3 also uses it to restart a server stuck in a test; netmeter's sessions
        // end a stuck test by their own deadlines (ARCHITECTURE.md, "Robustness"), so
        // without -1 the option would do nothing: say so rather than ignore it.
        if self.server.idle_timeout.is_some() && !self.server.one_off {
            return Err(usage(
                "--idle-timeout needs -1 (exit after that many idle seconds); without -1 netmeter already ends a stuck test by its own deadlines",
            ));
        }
        // -F is one file per test: tests side by side would write over each other.
        if self.common.file.is_some() && self.server.max_tests > 1 {
            return Err(usage(
                "-F gives every test one file; with --max-tests above 1 tests at once would write over each other (run one server per file)",
            ));
        }
        Ok(ServerConfig {
            port: self.common.port,
            bind: self.bind_ip()?,
            family: self.family()?,
            one_off: self.server.one_off,
            policy: self.server_policy()?,
            audit_log: self.audit_target()?,
            metrics: self
                .server.metrics
                .as_deref()
                .map(|m| {
                    m.parse::<std::net::SocketAddr>().map_err(|_| {
                        usage(format!(
                            "--metrics takes ADDR:PORT such as 127.0.0.1:9201 or [::]:9201, not '{m}'"
                        ))
                    })
                })
                .transpose()?,
            idle_timeout: self.server.idle_timeout.map(Duration::from_secs),
            mode: self.mode(),
            verbose: self.output.verbose,
            format,
            interval_s: self.interval()?,
            histograms: self.histograms()?,
            auth: self.auth.server()?,
            psk: self.auth.psk()?.map(std::sync::Arc::new),
            third_party: self.third_party_policy()?,
            side: SideOpts {
                file_max_bytes: self.server_max_file_size()?,
                ..self.side_opts()?
            },
            clock: crate::clock::system(),
            iperf2_layout: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::cli::Args;
    use crate::units::Format;

    /// The server side resolves from the flags as typed, no argv: what is stated is
    /// what the config holds, the defaults are the command line's, and a combination
    /// that cannot work is refused in one sentence.
    #[test]
    fn server_config_from_typed_flags() {
        let mut a = Args::default();
        a.server.server = true;
        a.common.port = 6001;
        a.server.one_off = true;
        a.server.idle_timeout = Some(30);
        let cfg = a.server_config(Format::Auto).unwrap();
        assert_eq!(cfg.port, 6001);
        assert!(cfg.one_off);
        assert_eq!(cfg.idle_timeout, Some(std::time::Duration::from_secs(30)));
        assert_eq!(cfg.interval_s, 1.0, "-i's default");

        let mut a = Args::default();
        a.server.server = true;
        assert_eq!(a.server_config(Format::Auto).unwrap().port, 5201);
        a.server.max_tests = 2;
        a.common.file = Some("/tmp/x".into());
        let e = a.server_config(Format::Auto).unwrap_err().0;
        assert!(e.starts_with("-F gives every test one file"), "{e}");
    }
}
