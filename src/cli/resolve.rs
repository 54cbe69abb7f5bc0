//! The flags resolved: [`Args::resolve`] turns what the user typed into the [`Command`]
//! to run, and the resolutions both roles share (address family, binding, keepalive,
//! the output mode and interval). Each side's own resolution is in `resolve/client.rs`
//! and `resolve/server.rs`.

mod client;
mod server;
pub(in crate::cli) use server::networks;

use crate::cli::*;

impl Args {
    pub(in crate::cli) fn family(&self) -> Result<Family, UsageError> {
        match (self.common.v4, self.common.v6) {
            (true, true) => Err(usage("-4 and -6 cannot be used together")),
            (true, false) => Ok(Family::V4),
            (false, true) => Ok(Family::V6),
            _ => Ok(Family::Any),
        }
    }

    pub(in crate::cli) fn mode(&self) -> Mode {
        if self.output.json_stream {
            Mode::JsonStream
        } else if self.output.json {
            Mode::Json
        } else {
            Mode::Text
        }
    }

    pub(in crate::cli) fn bind_ip(&self) -> Result<Option<IpAddr>, UsageError> {
        self.common
            .bind
            .as_ref()
            .map(|b| {
                let (addr, _) = split_dev(b);
                addr.parse::<IpAddr>()
                    .map_err(|_| usage(format!("-B needs an IP address, not '{b}'")))
            })
            .transpose()
    }

    /// The interface to bind to: `--bind-dev`, else `-B ADDR%DEV`, else `-c HOST%DEV`
    /// (the last given wins in iperf3; here `--bind-dev` is the explicit one).
    pub(in crate::cli) fn bind_dev(&self) -> Result<Option<String>, UsageError> {
        let dev = self
            .common
            .bind_dev
            .clone()
            .or_else(|| self.common.bind.as_deref().and_then(|b| split_dev(b).1))
            .or_else(|| self.client.client.as_deref().and_then(|c| split_dev(c).1));
        if let Some(d) = &dev
            && (d.is_empty() || d.len() >= libc_ifnamsiz() || d.contains(['/', ' ']))
        {
            return Err(usage(format!("'{d}' is not a network interface name")));
        }
        Ok(dev)
    }

    /// `--cntl-ka[=IDLE/INTV/CNT]`, checked as iperf3 checks it: given an idle time,
    /// it must exceed INTV × CNT.
    pub(in crate::cli) fn cntl_ka(&self) -> Result<Option<Keepalive>, UsageError> {
        let Some(arg) = &self.common.cntl_ka else {
            return Ok(None);
        };
        let mut f = arg.splitn(3, '/');
        let mut field = |name: &str| -> Result<Option<u32>, UsageError> {
            match f.next().map(str::trim).filter(|v| !v.is_empty()) {
                None => Ok(None),
                Some(v) => v
                    .parse::<u32>()
                    .ok()
                    .filter(|&n| n > 0 && n <= 32767)
                    .map(Some)
                    .ok_or_else(|| {
                        usage(format!(
                            "--cntl-ka: {name} must be a whole number from 1 to 32767, not '{v}'"
                        ))
                    }),
            }
        };
        let ka = Keepalive {
            idle_s: field("IDLE")?,
            interval_s: field("INTV")?,
            count: field("CNT")?,
        };
        if let Some(idle) = ka.idle_s
            && idle <= ka.interval_s.unwrap_or(0) * ka.count.unwrap_or(0)
        {
            return Err(usage(format!(
                "--cntl-ka: the idle time ({idle} s) must be longer than INTV × CNT"
            )));
        }
        Ok(Some(ka))
    }

    /// The `--timestamps` format when output is text (iperf3 stamps only its text).
    pub fn text_timestamps(&self) -> Option<&str> {
        match self.mode() {
            Mode::Text => self.output.timestamps.as_deref(),
            _ => None,
        }
    }

    /// The options that belong to this side only.
    pub(in crate::cli) fn side_opts(&self) -> Result<SideOpts, UsageError> {
        Ok(SideOpts {
            json_stream_full: self.output.json_stream_full_output,
            bind_dev: self.bind_dev()?,
            snd_timeout_ms: self.common.snd_timeout.filter(|&t| t > 0),
            rcv_timeout: self.common.rcv_timeout.map(Duration::from_millis),
            file: self.common.file.clone(),
            file_max_bytes: None,
            // iperf3: a level below 0 means all (4); netmeter has one level.
            debug: self
                .output
                .debug
                .as_deref()
                .map(|l| {
                    l.trim()
                        .parse::<i32>()
                        .map(|v| v.clamp(0, 4) as u8)
                        .map_err(|_| {
                            usage(format!("-d takes a debug level such as -d=4, not '{l}'"))
                        })
                })
                .transpose()?,
            cntl_ka: self.cntl_ka()?,
        })
    }

    pub(in crate::cli) fn interval(&self) -> Result<f64, UsageError> {
        let i = self.output.interval;
        // iperf3 stops at 0.1 s; netmeter reports down to 1 ms.
        if i != 0.0 && !(0.001..=60.0).contains(&i) {
            return Err(usage(format!(
                "invalid report interval {i}; use 0 (off) or 0.001 to 60 seconds"
            )));
        }
        Ok(i)
    }

    pub(in crate::cli) fn histograms(&self) -> Result<Option<f64>, UsageError> {
        match self.latency.histograms {
            Some(b) if !(b > 0.0 && b <= 1000.0) => Err(usage(
                "--histograms bin width must be between 0 and 1000 ms",
            )),
            h => Ok(h),
        }
    }

    /// Resolve the flags into what to run: a multicast test when `-B` (with `-s`) or
    /// `-c` names a group (`multicast_flags.rs`), else the rest.
    pub fn resolve(&self) -> Result<Command, UsageError> {
        super::multicast_flags::command(self).unwrap_or_else(|| self.resolve_unicast())
    }

    /// A server option given to a client is a mistake named in one sentence.
    fn no_server_only_flags(&self) -> Result<(), UsageError> {
        for (used, f) in [
            (
                self.server.server_max_duration.is_some(),
                "--server-max-duration",
            ),
            (
                self.server.server_bitrate_limit.is_some(),
                "--server-bitrate-limit",
            ),
            (self.server.max_streams.is_some(), "--max-streams"),
            (
                self.server.max_tests_per_source.is_some(),
                "--max-tests-per-source",
            ),
            (
                self.server.test_idle_timeout.is_some(),
                "--test-idle-timeout",
            ),
            (
                self.server.server_max_file_size.is_some(),
                "--server-max-file-size",
            ),
            (self.server.max_conn_rate.is_some(), "--max-conn-rate"),
            (!self.server.allow.is_empty(), "--allow"),
            (!self.server.deny.is_empty(), "--deny"),
            (self.server.audit_log.is_some(), "--audit-log"),
            (
                self.server.audit_log_max_size.is_some(),
                "--audit-log-max-size",
            ),
            (self.server.audit_log_keep.is_some(), "--audit-log-keep"),
            (self.server.metrics.is_some(), "--metrics"),
            (self.server.rpm.is_some(), "--rpm"),
            (self.server.rpm_cert.is_some(), "--rpm-cert"),
        ] {
            if used {
                return Err(usage(format!("{f} is a server option (use with -s)")));
            }
        }
        Ok(())
    }

    fn resolve_unicast(&self) -> Result<Command, UsageError> {
        if self.common.version {
            return Ok(Command::Version);
        }
        if let Some(p) = &self.output.plot {
            if self.client.client.is_none() || self.experiments.find_max_rate {
                return Err(usage(
                    "--plot draws the charts of one client test; use it with -c HOST",
                ));
            }
            tools::check_plot_file(p, "--plot")?;
        }
        let roles = [
            self.server.server,
            self.client.client.is_some(),
            self.common.loopback,
        ]
        .iter()
        .filter(|&&b| b)
        .count();
        if roles == 0 {
            return Err(usage(
                "choose a role: -s (server), -c HOST (client) or --loopback; see --help",
            ));
        }
        if roles > 1 {
            return Err(usage("use only one of -s, -c and --loopback"));
        }
        self.sctp_check()?;
        let format = match &self.output.format {
            Some(f) => Format::parse(f).map_err(usage)?,
            None => Format::Auto,
        };
        let csv = self.csv_columns()?;
        if self.server.server {
            return self.server_command(format, csv.as_ref());
        }
        if self.server.one_off || self.server.daemon || self.server.idle_timeout.is_some() {
            return Err(usage(
                "-1, -D and --idle-timeout are server options (use with -s)",
            ));
        }
        if self.hosts.allow_third_party.is_some() {
            return Err(usage(
                "--allow-third-party is a server option (use with -s)",
            ));
        }
        if self.auth.psk_file.is_some() && (self.common.loopback || self.common.no_extensions) {
            return Err(usage(
                "--psk-file authenticates to a netmeter server with -c; it does not go with --loopback or --no-extensions",
            ));
        }
        if self.common.loopback && (self.auth.username.is_some() || self.auth.use_pkcs1_padding) {
            return Err(usage(
                "--loopback's in-process server does not authenticate; --username and --use-pkcs1-padding are for -c",
            ));
        }
        self.no_server_only_flags()?;
        let cfg = self.client_config(format)?;
        self.check_iperf2(&cfg)?;
        if self.experiments.repeat.is_some()
            && (self.common.loopback || self.experiments.find_max_rate)
        {
            return Err(usage(
                "--repeat repeats one client test; it does not go with --loopback or --find-max-rate",
            ));
        }
        if csv.is_some() && (self.common.loopback || self.experiments.find_max_rate) {
            return Err(usage(
                "--csv writes one client test's rows; it cannot be used with --loopback or --find-max-rate",
            ));
        }
        if self.common.loopback {
            return Ok(self.loopback_command(cfg));
        }
        if self.experiments.find_max_rate {
            return self.find_max_rate_command(cfg);
        }
        if let Some(n) = self.experiments.repeat {
            if cfg.spec.until_interrupted() {
                return Err(usage(
                    "--repeat needs tests that end; -t 0 runs until interrupted",
                ));
            }
            if cfg.mode == Mode::JsonStream || csv.is_some() || self.output.plot.is_some() {
                return Err(usage(
                    "--repeat prints text or one -J document, not --json-stream, --csv or --plot (for CSV: netmeter csv REPEAT.json)",
                ));
            }
            let plan = crate::experiment::repeat::Plan::from_flags(
                n,
                self.experiments.repeat_gap,
                self.experiments.confidence.as_deref(),
            )
            .map_err(usage)?;
            return Ok(Command::Repeat {
                cfg,
                plan,
                logfile: self.output.logfile.clone(),
                stamps: self.text_timestamps().map(str::to_string),
            });
        }
        if self.experiments.confidence.is_some() {
            return Err(usage(
                "--confidence needs --repeat N (the most runs to make)",
            ));
        }
        Ok(Command::Client {
            cfg,
            logfile: self.output.logfile.clone(),
            stamps: self.text_timestamps().map(str::to_string),
            plot: self.output.plot.clone(),
            csv,
        })
    }
}
