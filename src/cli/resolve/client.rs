//! The client side's resolution: `-c HOST` and its options into a
//! [`ClientConfig`](crate::engine::client::ClientConfig), with the checks of which options
//! go together; also `--loopback` and `--find-max-rate`.

use crate::cli::*;

impl Args {
    /// `--loopback`: a TCP and a UDP test of `cfg` against an in-process server.
    pub(in crate::cli) fn loopback_command(&self, cfg: ClientConfig) -> Command {
        let mut tcp = cfg.clone();
        tcp.host = "127.0.0.1".into();
        if self.client.time.is_none()
            && self.client.bytes.is_none()
            && self.client.blockcount.is_none()
        {
            tcp.spec.end = EndCondition::Time(3.0);
        }
        tcp.spec.protocol = Protocol::Tcp;
        let mut udp = tcp.clone();
        udp.spec.protocol = Protocol::Udp;
        if self.client.length.is_none() {
            tcp.spec.block_len = wire::bulk_tcp_block(tcp.spec.parallel, host_cpus());
            udp.len_given = false;
        }
        if self.client.bitrate.is_none() {
            // A rate that shows pacing, loss and jitter figures without flooding.
            udp.spec.rate_bps = 100_000_000;
        }
        Command::Loopback {
            tcp,
            udp,
            logfile: self.output.logfile.clone(),
            stamps: self.text_timestamps().map(str::to_string),
        }
    }

    /// `--find-max-rate`: UDP trials of `cfg`, timed.
    pub(in crate::cli) fn find_max_rate_command(
        &self,
        mut cfg: ClientConfig,
    ) -> Result<Command, UsageError> {
        if !(0.0..=100.0).contains(&self.experiments.loss_target) {
            return Err(usage(
                "--loss-target must be a percentage between 0 and 100",
            ));
        }
        if self.client.bytes.is_some() || self.client.blockcount.is_some() {
            return Err(usage(
                "--find-max-rate runs timed trials; use -t, not -n or -k",
            ));
        }
        if cfg.spec.until_interrupted() {
            return Err(usage(
                "--find-max-rate needs a trial length; -t 0 (until interrupted) is not one",
            ));
        }
        cfg.spec.protocol = Protocol::Udp;
        if self.client.length.is_none() {
            cfg.spec.block_len = wire::UDP_DEFAULT_LEN;
        }
        if self.client.time.is_none() {
            cfg.spec.end = EndCondition::Time(2.0);
        }
        let start_bps = if self.client.bitrate.is_some() && cfg.spec.rate_bps > 0 {
            cfg.spec.rate_bps
        } else {
            100_000_000
        };
        Ok(Command::FindMaxRate {
            cfg,
            loss_target: self.experiments.loss_target,
            start_bps,
            logfile: self.output.logfile.clone(),
            stamps: self.text_timestamps().map(str::to_string),
        })
    }

    /// `--csv [--fields a,b,c]`: the columns, or `None` without `--csv`.
    pub(in crate::cli) fn csv_columns(
        &self,
    ) -> Result<Option<crate::report::csv::Columns>, UsageError> {
        use crate::report::csv::Columns;
        if !self.output.csv {
            return match self.output.fields {
                Some(_) => Err(usage("--fields chooses CSV columns; use it with --csv")),
                None => Ok(None),
            };
        }
        if self.output.json || self.output.json_stream {
            return Err(usage("--csv and -J/--json-stream cannot be used together"));
        }
        match &self.output.fields {
            Some(f) => Columns::parse(f).map(Some).map_err(usage),
            None => Ok(Some(Columns::default())),
        }
    }

    /// `--sctp`, `--nstreams`, `-X`: one sentence, whether this kernel has SCTP or not.
    pub(in crate::cli) fn sctp_check(&self) -> Result<(), UsageError> {
        let flag = if self.client.sctp {
            "--sctp"
        } else if self.client.nstreams.is_some() {
            "--nstreams"
        } else if !self.client.xbind.is_empty() {
            "-X/--xbind"
        } else {
            return Ok(());
        };
        Err(usage(
            match crate::sock::stream_protocol_available(libc::IPPROTO_SCTP) {
                Err(e) => format!(
                    "{flag} needs SCTP, which this kernel does not have ({e}); use TCP or UDP (-u)"
                ),
                Ok(()) => format!(
                    "{flag}: this kernel has SCTP, but netmeter does not run SCTP tests yet; use TCP or UDP (-u)"
                ),
            },
        ))
    }

    /// `-A N[,M]`: local CPU and the server's.
    pub(in crate::cli) fn affinity(&self) -> Result<(Option<u32>, Option<u32>), UsageError> {
        let Some(a) = &self.common.affinity else {
            return Ok((None, None));
        };
        let cpu = |s: &str| {
            s.trim()
                .parse::<u32>()
                .ok()
                .filter(|&c| c < 1024)
                .ok_or_else(|| usage(format!("-A needs CPU numbers like 0 or 0,1, not '{a}'")))
        };
        Ok(match a.split_once(',') {
            None => (Some(cpu(a)?), None),
            Some((n, m)) => (Some(cpu(n)?), Some(cpu(m)?)),
        })
    }

    /// `--working-load[=up|down|bidir][,N]`: N bulk TCP streams (default 4) in the given
    /// direction (default up) plus one request/response probe that uses the bounceback
    /// settings. The first quarter of the test (0.5 to 2 s) probes the idle path.
    /// Unpaced bulk TCP, where the block size only sets the write size: netmeter then
    /// writes `TCP_BULK_BLOCK`s. Everything whose meaning depends on the block (-b pacing,
    /// -k counts, --trip-times frames, bursts, frames, request sizes) keeps iperf3's
    /// 128 KiB so that the same flags ask for the same traffic as with iperf3.
    pub(in crate::cli) fn bulk_tcp(&self, spec: &TestSpec) -> bool {
        spec.protocol == Protocol::Tcp
            && spec.rate_bps == 0
            && self.client.blockcount.is_none()
            && !spec.trip_times
            && spec.profile.is_none()
            && spec.bounceback.is_none()
            && !spec.connect_only
    }

    pub(in crate::cli) fn with_working_load(
        &self,
        mut spec: TestSpec,
    ) -> Result<TestSpec, UsageError> {
        let Some(arg) = &self.latency.working_load else {
            return Ok(spec);
        };
        let bad = || {
            usage(format!(
                "--working-load takes up, down or bidir and an optional stream count, e.g. --working-load=down,8; not '{arg}'"
            ))
        };
        let (dir, n) = match arg.split_once(',') {
            Some((d, n)) => (d.trim(), n.trim().parse::<u32>().map_err(|_| bad())?),
            None if arg.trim().parse::<u32>().is_ok() => ("up", arg.trim().parse().unwrap_or(4)),
            None => (arg.trim(), 4),
        };
        let (up, down) = match dir {
            "" | "up" => (true, false),
            "down" => (false, true),
            "bidir" => (true, true),
            _ => return Err(bad()),
        };
        if !(1..=wire::MAX_STREAMS / 2).contains(&n) {
            return Err(usage(format!(
                "--working-load takes 1 to {} streams",
                wire::MAX_STREAMS / 2
            )));
        }
        if spec.protocol != Protocol::Tcp || spec.direction != Direction::Upload {
            return Err(usage(
                "--working-load runs TCP load in its own direction; drop -u, -R and --bidir",
            ));
        }
        if spec.connect_only {
            return Err(usage(
                "--working-load and --connect-only cannot be combined",
            ));
        }
        let EndCondition::Time(t) = spec.end else {
            return Err(usage(
                "--working-load runs for a time; use -t, not -n or -k",
            ));
        };
        if t < 2.0 {
            return Err(usage("--working-load needs at least -t 2"));
        }
        if spec.bounceback.is_none() {
            // The probe: iperf 2's default bounceback sizes.
            spec.bounceback = Some(wire::Bounceback {
                request_len: 100,
                reply_len: 100,
                hold_us: 0,
                burst: 1,
                busy_poll_us: 0,
            });
        }
        spec.working_load = Some(wire::WorkingLoad {
            up,
            down,
            streams: n,
            idle_ms: ((t / 4.0).clamp(0.5, 2.0) * 1000.0) as u32,
        });
        Ok(spec)
    }

    pub(in crate::cli) fn bounceback_spec(
        &self,
        protocol: Protocol,
        direction: Direction,
    ) -> Result<Option<wire::Bounceback>, UsageError> {
        if !self.latency.bounceback {
            if self.latency.busy_poll.is_some() {
                return Err(usage("--busy-poll applies to --bounceback tests"));
            }
            return Ok(None);
        }
        if direction != Direction::Upload {
            return Err(usage("--bounceback cannot be combined with -R or --bidir"));
        }
        let size = |s: &str, what: &str| -> Result<u32, UsageError> {
            let v = units::parse_bytes(s).map_err(|e| usage(format!("{what}: {e}")))?;
            u32::try_from(v).map_err(|_| usage(format!("{what} is too large")))
        };
        let request_len = size(&self.latency.bounceback_request, "--bounceback-request")?;
        let reply_len = match &self.latency.bounceback_reply {
            Some(r) => size(r, "--bounceback-reply")?,
            None => request_len,
        };
        if !(0.0..=1000.0).contains(&self.latency.bounceback_hold) {
            return Err(usage("--bounceback-hold must be between 0 and 1000 ms"));
        }
        let b = wire::Bounceback {
            request_len,
            reply_len,
            hold_us: (self.latency.bounceback_hold * 1000.0).round() as u32,
            burst: self.latency.bounceback_burst,
            busy_poll_us: self.latency.busy_poll.unwrap_or(0),
        };
        crate::spec::check_bounceback(&b, protocol).map_err(|e| usage(e.message))?;
        Ok(Some(b))
    }

    /// `--connect-only` is a TCP, client-to-server, timed test of its own.
    pub(in crate::cli) fn connect_only_check(&self) -> Result<bool, UsageError> {
        if !self.latency.connect_only {
            return Ok(false);
        }
        let clash: &[(bool, &str)] = &[
            (self.udp.udp, "-u"),
            (self.client.reverse, "-R"),
            (self.client.bidir, "--bidir"),
            (self.latency.bounceback, "--bounceback"),
            (self.latency.trip_times, "--trip-times"),
            (self.client.bytes.is_some(), "-n (it runs for -t seconds)"),
            (
                self.client.blockcount.is_some(),
                "-k (it runs for -t seconds)",
            ),
            (self.common.loopback, "--loopback"),
            (self.experiments.find_max_rate, "--find-max-rate"),
            (
                self.common.no_extensions,
                "--no-extensions (it needs a netmeter server)",
            ),
        ];
        match clash.iter().find(|(used, _)| *used) {
            Some((_, f)) => Err(usage(format!("--connect-only cannot be combined with {f}"))),
            None => Ok(true),
        }
    }

    pub(in crate::cli) fn reject_client_only(&self) -> Result<(), UsageError> {
        if self.experiments.repeat.is_some() || self.experiments.confidence.is_some() {
            return Err(usage(
                "--repeat and --confidence repeat a client test: netmeter -c HOST --repeat N",
            ));
        }
        let used: &[(bool, &str)] = &[
            (self.client.time.is_some(), "-t"),
            (self.client.bytes.is_some(), "-n"),
            (self.client.blockcount.is_some(), "-k"),
            (self.client.parallel.is_some(), "-P"),
            (self.client.reverse, "-R"),
            (self.client.bidir, "--bidir"),
            (self.udp.udp, "-u"),
            (self.client.bitrate.is_some(), "-b"),
            (self.client.length.is_some(), "-l"),
            (self.client.window.is_some(), "-w"),
            (self.output.title.is_some(), "-T"),
            (self.experiments.line_rate.is_some(), "--line-rate"),
            (self.output.get_server_output, "--get-server-output"),
            (self.latency.connect_only, "--connect-only"),
            (self.latency.burst_size.is_some(), "--burst-size"),
            (self.latency.burst_period.is_some(), "--burst-period"),
            (self.latency.isochronous.is_some(), "--isochronous"),
            (self.hosts.txstart_time.is_some(), "--txstart-time"),
            (self.udp.no_gso, "--no-gso"),
            (self.udp.no_gro, "--no-gro"),
            (self.udp.gsro, "--gsro"),
            (self.client.flowlabel.is_some(), "-L"),
            (self.udp.dont_fragment, "--dont-fragment"),
            (self.client.pacing_timer.is_some(), "--pacing-timer"),
            (self.client.no_fq_socket_pacing, "--no-fq-socket-pacing"),
        ];
        if let Some((_, f)) = used.iter().find(|(u, _)| *u) {
            return Err(usage(format!(
                "{f} is a client option; the client sends it to the server"
            )));
        }
        Ok(())
    }

    /// `-t`/`-n`/`-k` (one at most) or `-F`'s size: when the test ends.
    pub(in crate::cli) fn end_condition(
        &self,
        protocol: Protocol,
        direction: Direction,
    ) -> Result<EndCondition, UsageError> {
        let ends = [
            self.client.time.is_some(),
            self.client.bytes.is_some(),
            self.client.blockcount.is_some(),
        ]
        .iter()
        .filter(|&&b| b)
        .count();
        if ends > 1 {
            return Err(usage(
                "only one test end condition (-t, -n, -k) may be given",
            ));
        }
        if self.common.file.is_some() && protocol == Protocol::Udp {
            return Err(usage(
                "-F: cannot transfer a file over UDP (iperf3 cannot either)",
            ));
        }
        // -F without an end condition: the file's size, as iperf3.
        let file_len = match &self.common.file {
            Some(f) if ends == 0 && direction != Direction::Reverse => Some(
                std::fs::metadata(f)
                    .map_err(|e| usage(format!("-F: cannot read {}: {e}", f.display())))?
                    .len(),
            ),
            _ => None,
        };
        Ok(if let Some(n) = file_len.filter(|&n| n > 0) {
            EndCondition::Bytes(n)
        } else if let Some(n) = &self.client.bytes {
            not_negative(n, || "-n must be more than 0 bytes".into())?;
            let n = units::parse_bytes(n).map_err(|e| usage(format!("-n: {e}")))?;
            if n == 0 {
                return Err(usage("-n must be more than 0 bytes"));
            }
            EndCondition::Bytes(n)
        } else if let Some(k) = &self.client.blockcount {
            not_negative(k, || "-k must be more than 0 blocks".into())?;
            let k = units::parse_bytes(k).map_err(|e| usage(format!("-k: {e}")))?;
            if k == 0 {
                return Err(usage("-k must be more than 0 blocks"));
            }
            EndCondition::Blocks(k)
        } else {
            let t = self.client.time.unwrap_or(10.0);
            if !(0.0..=wire::MAX_TIME as f64).contains(&t) || t.is_nan() {
                return Err(usage(format!(
                    "-t must be between 0 and {} seconds",
                    wire::MAX_TIME
                )));
            }
            EndCondition::Time(t)
        })
    }

    /// `-P`, `-l` and `-b RATE[/BURST]`, each checked against iperf3's limits.
    pub(in crate::cli) fn streams_and_rate(
        &self,
        protocol: Protocol,
    ) -> Result<(u32, usize, u64, Option<u32>), UsageError> {
        let parallel = self.client.parallel.unwrap_or(1);
        if parallel == 0 || parallel > wire::MAX_STREAMS {
            return Err(usage(format!(
                "-P {parallel} is out of range; use 1 to {} parallel streams",
                wire::MAX_STREAMS
            )));
        }
        let block_len = match &self.client.length {
            Some(l) => {
                not_negative(l, || match protocol {
                    Protocol::Tcp => "-l for TCP must be between 1 byte and 1M".into(),
                    Protocol::Udp => "-l for UDP must be between 16 and 65507 bytes".into(),
                })?;
                let l = units::parse_bytes(l).map_err(|e| usage(format!("-l: {e}")))? as usize;
                match protocol {
                    Protocol::Tcp if l == 0 || l > wire::TCP_MAX_BLOCK => {
                        return Err(usage("-l for TCP must be between 1 byte and 1M"));
                    }
                    Protocol::Udp if !(wire::UDP_MIN_LEN..=wire::UDP_MAX_LEN).contains(&l) => {
                        return Err(usage("-l for UDP must be between 16 and 65507 bytes"));
                    }
                    _ => l,
                }
            }
            None => match protocol {
                Protocol::Tcp => wire::TCP_DEFAULT_BLOCK,
                Protocol::Udp => wire::UDP_DEFAULT_LEN,
            },
        };
        let (rate_bps, burst) = match &self.client.bitrate {
            Some(b) => {
                not_negative(b, || "-b must be 0 (unlimited) or a positive rate".into())?;
                units::parse_rate_burst(b).map_err(|e| usage(format!("-b: {e}")))?
            }
            None => (
                if protocol == Protocol::Udp {
                    1_048_576 // iperf3's UDP_RATE
                } else {
                    0
                },
                None,
            ),
        };
        if let Some(b) = burst
            && (b == 0 || b > wire::MAX_BURST)
        {
            return Err(usage(format!("burst {b} is out of range; use 1 to 1000")));
        }
        Ok((parallel, block_len, rate_bps, burst))
    }

    /// `-w`, `-M`, `-S`/`--dscp`, `-O` and `--fq-rate`.
    #[allow(clippy::type_complexity)]
    pub(in crate::cli) fn socket_and_timing(
        &self,
    ) -> Result<(Option<u64>, Option<u8>, f64, Option<u64>), UsageError> {
        let window = self
            .client
            .window
            .as_ref()
            .map(|w| {
                not_negative(w, || "-w must be between 0 and 512M".into())?;
                units::parse_bytes(w).map_err(|e| usage(format!("-w: {e}")))
            })
            .transpose()?;
        if window.is_some_and(|w| w > wire::MAX_WINDOW) {
            return Err(usage("-w is larger than the 512M maximum"));
        }
        // The kernel refuses TCP_MAXSEG below TCP_MIN_MSS (88) with EINVAL; iperf3 caps
        // at MAX_MSS and treats 0 as "not set".
        if self
            .client
            .mss
            .is_some_and(|m| m != 0 && !(MIN_MSS..=wire::MAX_MSS).contains(&m))
        {
            return Err(usage(format!(
                "-M must be between {MIN_MSS} and {} bytes (the kernel refuses a smaller MSS)",
                wire::MAX_MSS
            )));
        }
        let tos = match (&self.client.tos, &self.client.dscp) {
            (Some(_), Some(_)) => return Err(usage("use either -S or --dscp, not both")),
            (Some(t), None) => Some(parse_tos(t)?),
            (None, Some(d)) => Some(parse_dscp(d)? << 2),
            _ => None,
        };
        let omit = self.client.omit.unwrap_or(0.0);
        if !(0.0..=wire::MAX_OMIT as f64).contains(&omit) {
            return Err(usage("-O must be between 0 and 600 seconds"));
        }
        let fq_rate_bps = self
            .client
            .fq_rate
            .as_ref()
            .map(|r| {
                not_negative(r, || "--fq-rate must be 0 or a positive rate".into())?;
                units::parse_rate(r).map_err(|e| usage(format!("--fq-rate: {e}")))
            })
            .transpose()?;
        let fq_rate_bps = match (self.client.no_fq_socket_pacing, fq_rate_bps) {
            (false, r) => r,
            (true, None) => Some(0),
            (true, Some(_)) => {
                return Err(usage(
                    "--no-fq-socket-pacing means --fq-rate 0; give one of them, not both",
                ));
            }
        };
        Ok((window, tos, omit, fq_rate_bps))
    }

    /// Switches that apply only to one protocol or direction.
    pub(in crate::cli) fn check_switches(
        &self,
        protocol: Protocol,
        direction: Direction,
    ) -> Result<(), UsageError> {
        // iperf3 3.22 runs a TCP test with --gsro (it only touches UDP), so netmeter
        // accepts it too; the netmeter-only switches say they do nothing there.
        if (self.udp.no_gso || self.udp.no_gro)
            && protocol == Protocol::Tcp
            && !self.common.loopback
            && !self.experiments.find_max_rate
        {
            return Err(usage("--no-gso and --no-gro apply to UDP tests (-u)"));
        }
        if self.udp.no_gso && self.udp.gsro {
            return Err(usage("--gsro asks for GSO and GRO; drop it or --no-gso"));
        }
        if self.udp.no_gro && self.udp.gsro {
            return Err(usage("--gsro asks for GSO and GRO; drop it or --no-gro"));
        }
        if self.common.rcv_timeout.is_some()
            && direction == Direction::Upload
            && !self.common.loopback
        {
            return Err(usage(
                "--rcv-timeout applies to a receiving client: use it with -R or --bidir (or on the server)",
            ));
        }
        if self.common.file.is_some() && self.client.skip_rx_copy {
            return Err(usage(
                "-F writes the received bytes to the file; --skip-rx-copy would discard them",
            ));
        }
        if self.client.mptcp && protocol == Protocol::Udp {
            return Err(usage("-m (MPTCP) applies to TCP tests; drop -u"));
        }
        if self.client.zerocopy && protocol == Protocol::Udp {
            return Err(usage("-Z (zero-copy) applies to TCP only"));
        }
        Ok(())
    }

    /// The client side resolved: the flags as typed into a [`ClientConfig`] (its
    /// `TestSpec` and the client's own settings), or the one sentence saying which
    /// option does not go. `--loopback`, `--find-max-rate` and `--repeat` build on it.
    pub(in crate::cli) fn client_config(&self, format: Format) -> Result<ClientConfig, UsageError> {
        let protocol = if self.udp.udp {
            Protocol::Udp
        } else {
            Protocol::Tcp
        };
        let direction = match (self.client.reverse, self.client.bidir) {
            (true, true) => return Err(usage("-R and --bidir cannot be used together")),
            (true, false) => Direction::Reverse,
            (false, true) => Direction::Bidir,
            _ => Direction::Upload,
        };
        let end = self.end_condition(protocol, direction)?;
        let (parallel, block_len, rate_bps, burst) = self.streams_and_rate(protocol)?;
        let (window, tos, omit, fq_rate_bps) = self.socket_and_timing()?;
        let ecn = self
            .client
            .ecn
            .as_deref()
            .map(|e| {
                crate::stats::EcnMark::parse(e)
                    .ok_or_else(|| usage(format!("--ecn takes ect0 or ect1, not '{e}'")))
            })
            .transpose()?;
        let responsive = self.client.ecn_responsive;
        if responsive && protocol != Protocol::Udp {
            return Err(usage("--ecn-responsive paces UDP data: add -u".to_string()));
        }
        if responsive && rate_bps == 0 {
            return Err(usage(
                "--ecn-responsive needs a ceiling for its rate: -b RATE above 0, not -b 0"
                    .to_string(),
            ));
        }
        // A responsive sender marks its datagrams ECT(1), the L4S identifier, unless
        // --ecn chose: unmarked ones would never be marked CE.
        let ecn = ecn.or(responsive.then_some(crate::stats::EcnMark::Ect1));
        let tos = ecn.map_or(tos, |m| Some(m.on_tos(tos)));
        self.check_switches(protocol, direction)?;
        let spec = TestSpec {
            protocol,
            direction,
            end,
            parallel,
            block_len,
            rate_bps,
            burst,
            omit_s: omit,
            window,
            mss: self.client.mss.filter(|&m| m != 0),
            nodelay: self.client.nodelay,
            tos,
            ecn,
            congestion: self.client.congestion.clone(),
            fq_rate_bps,
            udp_seq64: self.udp.udp_counters_64bit,
            repeating_payload: self.client.repeating_payload,
            zerocopy: self.client.zerocopy,
            skip_rx_copy: self.client.skip_rx_copy,
            get_server_output: self.output.get_server_output,
            title: self.output.title.clone(),
            extra_data: self.output.extra_data.clone(),
            bounceback: self.bounceback_spec(protocol, direction)?,
            server_affinity: self.affinity()?.1,
            trip_times: self.latency.trip_times,
            connect_only: self.connect_only_check()?,
            profile: None,
            working_load: None,
            no_gso: self.udp.no_gso,
            no_gro: self.udp.no_gro,
            ecn_responsive: responsive,
            dont_fragment: self.udp.dont_fragment,
            mptcp: self.client.mptcp,
            flowlabel: self
                .client
                .flowlabel
                .as_deref()
                .map(|l| {
                    parse_int(l)
                        .filter(|v| (1..=wire::MAX_FLOWLABEL).contains(v))
                        .ok_or_else(|| {
                            usage(format!(
                                "-L needs a flow label from 1 to 0xfffff, not '{l}'"
                            ))
                        })
                })
                .transpose()?,
            pacing_timer_us: match &self.client.pacing_timer {
                None => wire::DEFAULT_PACING_TIMER_US,
                Some(t) => {
                    not_negative(t, || "--pacing-timer must be 0 or more microseconds".into())?;
                    let v =
                        units::parse_bytes(t).map_err(|e| usage(format!("--pacing-timer: {e}")))?;
                    u32::try_from(v).map_err(|_| usage("--pacing-timer is too large"))?
                }
            },
        };
        let spec = self.with_working_load(spec)?;
        let mut spec = self.with_profile(spec)?;
        if self.client.length.is_none() && self.bulk_tcp(&spec) {
            spec.block_len = wire::bulk_tcp_block(spec.parallel, host_cpus());
        }
        Ok(ClientConfig {
            in_process_server: false,
            host: self
                .client
                .client
                .as_deref()
                .map(|c| split_dev(c).0.to_string())
                .unwrap_or_default(),
            port: match self.latency.iperf2 && !self.common.port_given {
                true => crate::engine::iperf2_client::IPERF2_PORT,
                false => self.common.port,
            },
            spec,
            len_given: self.client.length.is_some(),
            interval_s: self.interval()?,
            format,
            mode: self.mode(),
            verbose: self.output.verbose,
            family: self.family()?,
            bind: self.bind_ip()?,
            cport: self.client.cport,
            connect_timeout: Duration::from_millis(self.client.connect_timeout.unwrap_or(10_000)),
            extensions: !self.common.no_extensions,
            affinity: self.affinity()?.0,
            histograms: self.histograms()?,
            txstart: self.txstart()?,
            auth: self.auth.client(std::env::var("IPERF3_PASSWORD").ok())?,
            psk: self.auth.psk()?,
            side: self.side_opts()?,
            line_rate: self
                .experiments
                .line_rate
                .as_deref()
                .map(crate::host::facts::LineRate::parse)
                .transpose()
                .map_err(usage)?,
            clock: crate::clock::system(),
            iperf2: self
                .latency
                .iperf2
                .then(|| crate::engine::client::Iperf2Opts {
                    isoch_layout: self.latency.iperf2_version.unwrap_or_default(),
                    ..Default::default()
                }),
            stop: None,
        })
    }
}

impl Args {
    /// `--iperf2`: what an iperf 2 server cannot serve, refused in one sentence
    /// (`engine::iperf2_client::unsupported`).
    pub(in crate::cli) fn check_iperf2(&self, cfg: &ClientConfig) -> Result<(), UsageError> {
        if !self.latency.iperf2 {
            return match self.latency.iperf2_version {
                Some(_) => Err(usage(
                    "--iperf2-version names an iperf 2 server's version: it goes with --iperf2",
                )),
                None => Ok(()),
            };
        }
        if self.common.loopback || self.experiments.find_max_rate {
            return Err(usage(
                "--iperf2 runs a test against an iperf 2 server; it does not go with --loopback or --find-max-rate",
            ));
        }
        match crate::engine::iperf2_client::unsupported(cfg) {
            Some(why) => Err(usage(why)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::cli::Args;
    use crate::spec::{Direction, Protocol};
    use crate::units::Format;

    /// The client side resolves from the flags as typed, no argv: stated flags land in
    /// the spec, unstated ones take the command line's defaults, and a combination that
    /// cannot work is refused in one sentence.
    #[test]
    fn client_config_from_typed_flags() {
        let mut a = Args::default();
        a.client.client = Some("192.0.2.1".into());
        a.udp.udp = true;
        a.client.parallel = Some(3);
        a.client.bitrate = Some("20M".into());
        a.client.reverse = true;
        let cfg = a.client_config(Format::Auto).unwrap();
        assert_eq!(cfg.host, "192.0.2.1");
        assert_eq!(cfg.port, 5201, "-p's default");
        assert_eq!(cfg.spec.protocol, Protocol::Udp);
        assert_eq!(cfg.spec.direction, Direction::Reverse);
        assert_eq!(cfg.spec.parallel, 3);
        assert_eq!(cfg.spec.rate_bps, 20_000_000);

        a.client.bidir = true;
        let e = a.client_config(Format::Auto).unwrap_err().0;
        assert_eq!(e, "-R and --bidir cannot be used together");
    }
}
