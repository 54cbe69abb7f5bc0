//! The flat command line's parse-and-resolve tests: each case from argv to the
//! [`Command`] or the one sentence it ends in.

use super::*;

fn parse(args: &[&str]) -> Result<Command, UsageError> {
    let mut v = vec!["netmeter"];
    v.extend_from_slice(args);
    match parse_args(v) {
        Ok(a) => a.resolve(),
        Err(ArgsError::Usage(e)) => Err(e),
        Err(ArgsError::Clap(e)) => Err(usage(e.to_string())),
    }
}

/// The one-sentence error for `args`, which must fail in netmeter's own words.
fn sentence(args: &[&str]) -> String {
    let mut v = vec!["netmeter"];
    v.extend_from_slice(args);
    let e = match parse_args(v) {
        Ok(a) => a.resolve().unwrap_err(),
        Err(ArgsError::Usage(e)) => e,
        Err(ArgsError::Clap(e)) => panic!("{args:?}: clap's message, not ours: {e}"),
    };
    assert!(!e.0.contains('\n'), "{args:?}: {e}");
    e.0
}

#[test]
fn negative_values_are_out_of_range_not_missing() {
    for (args, want) in [
        (&["-c", "h", "-P", "-1"][..], "-P must be between 1 and 128"),
        (
            &["-c", "h", "-t", "-1"],
            "-t must be between 0 and 86400 seconds",
        ),
        (
            &["-c", "h", "-b", "-5"],
            "-b must be 0 (unlimited) or a positive rate",
        ),
        (
            &["-c", "h", "-l", "-1"],
            "-l for TCP must be between 1 byte and 1M",
        ),
        (
            &["-c", "h", "-u", "-l", "-1"],
            "-l for UDP must be between 16",
        ),
        (&["-c", "h", "-n", "-1"], "-n must be more than 0 bytes"),
        (&["-c", "h", "-k", "-1"], "-k must be more than 0 blocks"),
        (&["-c", "h", "-w", "-1"], "-w must be between 0 and 512M"),
        (&["-c", "h", "-O", "-1"], "-O must be between 0 and 600"),
        (&["-c", "h", "-M", "-1"], "-M must be between"),
        (&["-c", "h", "-p", "-1"], "-p must be between 0 and 65535"),
        (
            &["-c", "h", "--cport", "-1"],
            "--cport must be between 1 and 65535",
        ),
        (
            &["-c", "h", "--fq-rate", "-1"],
            "--fq-rate must be 0 or a positive rate",
        ),
        (
            &["-s", "--idle-timeout", "-1"],
            "--idle-timeout must be between 1",
        ),
        (&["-c", "h", "-P", "0"], "-P must be between 1 and 128"),
        (&["-c", "h", "-P", "x"], "-P needs a whole number, not 'x'"),
    ] {
        let e = sentence(args);
        assert!(e.starts_with(want), "{args:?}: {e}");
    }
}

#[test]
fn file_and_skip_rx_copy_are_refused_together() {
    assert_eq!(
        sentence(&["-c", "h", "-R", "-F", "/dev/null", "--skip-rx-copy"]),
        "-F writes the received bytes to the file; --skip-rx-copy would discard them"
    );
}

#[test]
fn no_fq_socket_pacing_is_fq_rate_zero() {
    let cfg = |args: &[&str]| client(&[&["-c", "h"], args].concat());
    assert_eq!(cfg(&["--no-fq-socket-pacing"]).spec.fq_rate_bps, Some(0));
    assert_eq!(cfg(&[]).spec.fq_rate_bps, None);
    assert_eq!(
        sentence(&["-c", "h", "--no-fq-socket-pacing", "--fq-rate", "1G"]),
        "--no-fq-socket-pacing means --fq-rate 0; give one of them, not both"
    );
}

/// Issue 19 item 8: a value that does not parse is refused naming the option and
/// the value (not "invalid float literal"), a negative quantity is a value out of
/// range (not an unknown flag `-5`), and an unknown option gets a tip only when the
/// tip is close.
#[test]
fn parse_errors_name_the_option_and_the_value() {
    for (args, want) in [
        (
            &["-c", "h", "-t", "abc"][..],
            "-t needs a number of seconds such as 10 or 0.5, not 'abc'",
        ),
        (
            &["-c", "h", "-t", "1s"],
            "-t needs a number of seconds such as 10 or 0.5, not '1s'",
        ),
        (
            &["-c", "h", "-O", "abc"],
            "-O needs a number of seconds such as 2, not 'abc'",
        ),
        (
            &["-c", "h", "-i", "abc"],
            "-i needs a number of seconds such as 1 or 0.5, not 'abc'",
        ),
        (
            &["-c", "h", "--histograms", "x"],
            "--histograms needs a bin width in milliseconds such as 0.1, not 'x'",
        ),
        (
            &["-c", "h", "-b", "-5M"],
            "-b must be 0 (unlimited) or a positive rate, not '-5M'",
        ),
        (
            &["-c", "h", "-n", "-1K"],
            "-n must be more than 0 bytes, not '-1K'",
        ),
        (
            &["-c", "h", "--no-such-option"],
            "unknown option '--no-such-option'; netmeter --help lists the options",
        ),
        (
            &["-c", "h", "--servr"],
            "unknown option '--servr'; did you mean '--server'?",
        ),
        (
            &["-c", "h", "-J", "csv", "r.json"],
            "'csv' is a subcommand: give it first, as in netmeter csv --help",
        ),
    ] {
        assert_eq!(sentence(args), want, "{args:?}");
    }
    // Every number option names itself and the value, whatever its parser.
    for flag in [
        "-i",
        "-t",
        "-O",
        "--bounceback-hold",
        "--loss-target",
        "--burst-period",
        "--txstart-time",
        "--repeat-gap",
        "-P",
        "-p",
    ] {
        let e = sentence(&["-c", "h", flag, "zz"]);
        assert!(e.starts_with(flag) && e.contains("'zz'"), "{flag}: {e}");
    }
}

/// Issue 19 item 9: `-s ADDR` (iperf3 ignores the address) is refused pointing to
/// -B; `-s -B ADDR` is the server on that address.
#[test]
fn server_address_points_to_bind() {
    assert_eq!(
        sentence(&["-s", "10.0.0.1", "-p", "12345"]),
        "-s takes no address ('10.0.0.1'); to listen on 10.0.0.1 only, use -s -B 10.0.0.1"
    );
    assert_eq!(
        sentence(&["-p", "12345", "--server", "fe80::1"]),
        "-s takes no address ('fe80::1'); to listen on fe80::1 only, use -s -B fe80::1"
    );
    assert!(sentence(&["-s", "node1"]).contains("use -s -B ADDR"));
    match parse(&["-s", "-B", "10.0.0.1", "-p", "12345"]) {
        Ok(Command::Server { cfg, .. }) => {
            assert_eq!(cfg.bind, Some("10.0.0.1".parse().unwrap()));
            assert_eq!(cfg.port, 12345);
        }
        other => panic!("{other:?}"),
    }
    assert!(sentence(&["-c", "h", "extra"]).starts_with("unexpected argument 'extra'"));
    assert_eq!(
        sentence(&["-c", "h", "--timestamps", "%T"]),
        "--timestamps takes its value after '=': --timestamps=%T"
    );
    assert_eq!(
        sentence(&["-c", "h", "-t"]),
        "--time <SEC> needs a value; none was given"
    );
    assert_eq!(
        sentence(&["-c", "h", "-d", "4"]),
        "-d takes its value after '=': -d=4"
    );
}

/// Issue 19 item 10: `-S` takes iperf 2's DSCP names as their TOS byte; anything
/// else is refused naming --dscp.
#[test]
fn tos_takes_dscp_names_as_iperf2() {
    let tos = |v: &str| client(&["-c", "h", "-S", v]).spec.tos;
    assert_eq!(tos("af11"), Some(0x28));
    assert_eq!(tos("AF43"), Some(38 << 2));
    assert_eq!(tos("cs1"), Some(0x20));
    assert_eq!(tos("ef"), Some(0xb8));
    assert_eq!(tos("va"), Some(44 << 2));
    assert_eq!(tos("le"), Some(4));
    assert_eq!(tos("0x28"), Some(0x28));
    assert_eq!(tos("255"), Some(255));
    for bad in ["af14", "af51", "cs8", "256", "xx", "-1"] {
        let e = sentence(&["-c", "h", "-S", bad]);
        assert_eq!(
            e,
            format!(
                "-S takes a TOS byte 0..255 or a DSCP name such as af11 or ef, not '{bad}' (--dscp takes DSCP values 0..63)"
            )
        );
    }
    assert_eq!(
        client(&["-c", "h", "--dscp", "cs7"]).spec.tos,
        Some(56 << 2)
    );
    assert!(sentence(&["-c", "h", "--dscp", "cs8"]).contains("not a valid DSCP"));
}

#[test]
fn ecn_marks_the_low_bits_beside_the_dscp() {
    let c = client(&["-c", "h", "-u", "--dscp", "ef", "--ecn", "ect1"]);
    assert_eq!(c.spec.tos, Some(0xb9));
    assert_eq!(c.spec.ecn, Some(crate::stats::EcnMark::Ect1));
    assert_eq!(
        client(&["-c", "h", "-u", "--ecn", "ect0"]).spec.tos,
        Some(2)
    );
    let e = sentence(&["-c", "h", "--ecn", "ce"]);
    assert!(e.starts_with("--ecn takes ect0 or ect1"), "{e}");
}

#[test]
fn ecn_responsive_marks_ect1_and_needs_udp_with_a_ceiling() {
    let c = client(&["-c", "h", "-u", "-b", "20M", "--ecn-responsive"]);
    assert!(c.spec.ecn_responsive);
    assert_eq!(c.spec.ecn, Some(crate::stats::EcnMark::Ect1));
    assert_eq!(c.spec.tos, Some(0x01));
    let c = client(&["-c", "h", "-u", "--ecn", "ect0", "--ecn-responsive"]);
    assert_eq!(c.spec.ecn, Some(crate::stats::EcnMark::Ect0));
    assert!(c.spec.ext_request().ecn_feedback);
    let e = sentence(&["-c", "h", "--ecn-responsive"]);
    assert!(e.starts_with("--ecn-responsive paces UDP data"), "{e}");
    let e = sentence(&["-c", "h", "-u", "-b", "0", "--ecn-responsive"]);
    assert!(e.starts_with("--ecn-responsive needs a ceiling"), "{e}");
}

#[test]
fn idle_timeout_without_one_off_is_refused_not_ignored() {
    let e = sentence(&["-s", "--idle-timeout", "5"]);
    assert!(e.starts_with("--idle-timeout needs -1"), "{e}");
    assert!(matches!(
        parse(&["-s", "-1", "--idle-timeout", "5"]),
        Ok(Command::Server { .. })
    ));
}

#[test]
fn mss_is_checked_against_the_kernel_minimum() {
    let e = sentence(&["-c", "h", "-M", "10"]);
    assert!(
        e.starts_with("-M must be between 88 and 32767 bytes"),
        "{e}"
    );
    assert_eq!(client(&["-c", "h", "-M", "88"]).spec.mss, Some(88));
    assert_eq!(client(&["-c", "h", "-M", "0"]).spec.mss, None);
    assert!(sentence(&["-c", "h", "-M", "32768"]).starts_with("-M must be between"));
}

#[test]
fn help_states_what_the_options_do() {
    use clap::CommandFactory;
    let help = Args::command().render_long_help().to_string();
    let line = |flag: &str| {
        let i = help.find(flag).unwrap_or_else(|| panic!("{flag} missing"));
        let rest = &help[i..];
        // The option's paragraph ends at the next blank line.
        rest[..rest.find("\n\n").unwrap_or(rest.len())].replace('\n', " ")
    };
    let t = line("-t, --time");
    assert!(t.contains("default 10 secs; 0 = until interrupted"), "{t}");
    let l = line("-l, --length");
    assert!(l.contains("1M") && !l.contains("TCP, default 128K"), "{l}");
    let z = line("-Z, --zerocopy");
    assert!(
        z.contains("MSG_ZEROCOPY") && z.contains("sendfile otherwise"),
        "{z}"
    );
}

/// iperf3 3.22's options that issue 10 added: each is in `--help`, and none is in the
/// "not supported yet" list any more.
const IPERF3_322_ADDED: &[&str] = &["--timestamps", "--forceflush", "--json-stream-full-output"];

#[test]
fn iperf3_322_options_are_in_the_help() {
    use clap::CommandFactory;
    let help = Args::command().render_long_help().to_string();
    for o in IPERF3_322_ADDED {
        // A short flag is shown as "-F, --file".
        let shown = if o.starts_with("--") {
            o.to_string()
        } else {
            format!("{o}, --")
        };
        assert!(help.contains(&shown), "{o} missing from --help");
    }
}

#[test]
fn timestamps_default_to_iperf3s_format_in_text_only() {
    let a = |args: &[&str]| {
        let mut v = vec!["netmeter", "-c", "h"];
        v.extend_from_slice(args);
        match parse_args(v) {
            Ok(a) => a,
            Err(_) => panic!("{args:?}"),
        }
    };
    assert_eq!(a(&["--timestamps"]).text_timestamps(), Some("%c "));
    assert_eq!(a(&["--timestamps=%T "]).text_timestamps(), Some("%T "));
    assert_eq!(a(&["--timestamps", "-J"]).text_timestamps(), None);
    assert_eq!(a(&[]).text_timestamps(), None);
    assert!(
        client(&["-c", "h", "--json-stream-full-output"])
            .side
            .json_stream_full
    );
}

#[test]
fn server_file_size_cap_and_one_test_at_a_time() {
    let side = |args: &[&str]| match parse(args).unwrap() {
        Command::Server { cfg, .. } => cfg.side,
        other => panic!("{other:?}"),
    };
    assert_eq!(side(&["-s", "-F", "x"]).file_max_bytes, Some(1 << 30));
    let capped = side(&["-s", "-F", "x", "--server-max-file-size", "10M"]);
    assert_eq!(capped.file_max_bytes, Some(10 << 20));
    let none = side(&["-s", "-F", "x", "--server-max-file-size", "0"]);
    assert_eq!(none.file_max_bytes, None);
    assert!(sentence(&["-s", "--server-max-file-size", "-1"]).contains("--server-max-file-size"));
    assert!(sentence(&["-s", "-F", "x", "--max-tests", "2"]).contains("--max-tests above 1"));
    // A client writes what its own test receives: no cap.
    assert_eq!(
        client(&["-c", "h", "-R", "-F", "x"]).side.file_max_bytes,
        None
    );
}

#[test]
fn server_limits_parse_as_iperf3s() {
    let side = |args: &[&str]| match parse(args).unwrap() {
        Command::Server { cfg, .. } => cfg.policy,
        other => panic!("{other:?}"),
    };
    let s = side(&[
        "-s",
        "--server-bitrate-limit",
        "10M/2",
        "--server-max-duration",
        "30",
    ]);
    assert_eq!(s.bitrate_limit, Some((10_000_000, 2.0)));
    assert_eq!(s.max_duration_s, Some(30));
    assert_eq!(
        side(&["-s", "--server-bitrate-limit", "1G"]).bitrate_limit,
        Some((1_000_000_000, 5.0))
    );
    assert_eq!(
        side(&["-s", "--server-max-duration", "0"]).max_duration_s,
        None
    );
    for (args, want) in [
        (
            &["-s", "--server-bitrate-limit", "1M/0.05"][..],
            "--server-bitrate-limit's averaging interval",
        ),
        (
            &["-s", "--server-bitrate-limit", "1M/x"],
            "--server-bitrate-limit: 'x'",
        ),
        (
            &["-s", "--server-bitrate-limit", "-1"],
            "--server-bitrate-limit must be 0",
        ),
        (
            &["-s", "--server-max-duration", "-1"],
            "--server-max-duration must be between 0 and 86400",
        ),
        (
            &["-c", "h", "--server-max-duration", "5"],
            "--server-max-duration is a server option",
        ),
        (
            &["-c", "h", "--server-bitrate-limit", "5M"],
            "--server-bitrate-limit is a server option",
        ),
    ] {
        let e = sentence(args);
        assert!(e.starts_with(want), "{args:?}: {e}");
    }
}

#[test]
fn server_policy_flags_parse_into_one_policy() {
    let policy = |args: &[&str]| match parse(args).unwrap() {
        Command::Server { cfg, .. } => cfg.policy,
        other => panic!("{other:?}"),
    };
    let p = policy(&[
        "-s",
        "--allow",
        "10.0.0.0/8, 127.0.0.1",
        "--allow",
        "::1",
        "--deny",
        "10.9.0.0/16",
        "--max-streams",
        "8",
        "--max-conn-rate",
        "5/s",
        "--max-tests",
        "3",
    ]);
    let nets = |v: &[ipnet::IpNet]| v.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    assert_eq!(nets(&p.allow), ["10.0.0.0/8", "127.0.0.1/32", "::1/128"]);
    assert_eq!(nets(&p.deny), ["10.9.0.0/16"]);
    assert_eq!((p.max_streams, p.max_tests), (Some(8), 3));
    assert_eq!(
        p.conn_rate,
        Some(ConnRate {
            burst: 5,
            period: Duration::from_secs(1)
        })
    );
    let open = policy(&["-s"]);
    assert!(open.allow.is_empty() && open.deny.is_empty() && open.conn_rate.is_none());
    // Per-source cap: all slots but one by default; the idle timeout 10 s.
    assert_eq!((p.max_tests_per_source, p.test_idle_s), (2, 10));
    assert_eq!((open.max_tests_per_source, open.test_idle_s), (1, 10));
    let q = policy(&[
        "-s",
        "--max-tests",
        "4",
        "--max-tests-per-source",
        "4",
        "--test-idle-timeout",
        "0",
    ]);
    assert_eq!((q.max_tests_per_source, q.test_idle_s), (4, 0));
    for (args, want) in [
        (
            &["-s", "--deny", "10.0.0.0/33"][..],
            "--deny: '10.0.0.0/33'",
        ),
        (&["-s", "--allow", "example.com"], "--allow: 'example.com'"),
        (&["-s", "--allow", ""], "--allow needs at least one"),
        (&["-s", "--deny", " , "], "--deny needs at least one"),
        (&["-s", "--max-conn-rate", "0/s"], "--max-conn-rate: '0'"),
        (&["-s", "--max-streams", "0"], "--max-streams must be"),
        (
            &["-s", "--max-tests-per-source", "0"],
            "--max-tests-per-source must be",
        ),
        (
            &["-c", "h", "--test-idle-timeout", "5"],
            "--test-idle-timeout is a server option",
        ),
        (&["-s", "--metrics", "9201"], "--metrics takes ADDR:PORT"),
        (
            &["-c", "h", "--allow", "10.0.0.0/8"],
            "--allow is a server option",
        ),
        (
            &["-c", "h", "--audit-log", "x"],
            "--audit-log is a server option",
        ),
        (
            &["-c", "h", "--metrics", "127.0.0.1:1"],
            "--metrics is a server option",
        ),
    ] {
        let e = sentence(args);
        assert!(e.starts_with(want), "{args:?}: {e}");
    }
}

#[test]
fn the_audit_log_rotates_by_default_and_as_told() {
    let target = |args: &[&str]| match parse(args).unwrap() {
        Command::Server { cfg, .. } => cfg.audit_log,
        other => panic!("{other:?}"),
    };
    assert_eq!(target(&["-s"]), None);
    let t = target(&["-s", "--audit-log", "/x/a.jsonl"]).unwrap();
    assert_eq!(t.path, PathBuf::from("/x/a.jsonl"));
    assert_eq!(t.rotation, Some(Rotation::DEFAULT));
    let t = target(&[
        "-s",
        "--audit-log",
        "a",
        "--audit-log-max-size",
        "12M",
        "--audit-log-keep",
        "0",
    ])
    .unwrap();
    assert_eq!(
        t.rotation,
        Some(Rotation {
            max_bytes: 12 << 20,
            keep: 0
        })
    );
    let t = target(&["-s", "--audit-log", "a", "--audit-log-max-size", "0"]).unwrap();
    assert_eq!(t.rotation, None);
    for (args, want) in [
        (
            &["-s", "--audit-log-max-size", "1M"][..],
            "--audit-log-max-size and --audit-log-keep need --audit-log",
        ),
        (
            &["-s", "--audit-log", "a", "--audit-log-max-size", "big"],
            "--audit-log-max-size takes a size",
        ),
        (
            &["-s", "--audit-log", "a", "--audit-log-keep", "101"],
            "--audit-log-keep",
        ),
        (
            &["-c", "h", "--audit-log-keep", "2"],
            "--audit-log-keep is a server option",
        ),
    ] {
        let e = sentence(args);
        assert!(e.starts_with(want), "{args:?}: {e}");
    }
}

#[test]
fn bind_dev_comes_from_the_flag_or_a_percent_suffix() {
    let c = client(&["-c", "h%eth1"]);
    assert_eq!(
        (c.host.as_str(), c.side.bind_dev.as_deref()),
        ("h", Some("eth1"))
    );
    let c = client(&["-c", "h", "-B", "10.0.0.1%eth2"]);
    assert_eq!(c.bind, Some("10.0.0.1".parse().unwrap()));
    assert_eq!(c.side.bind_dev.as_deref(), Some("eth2"));
    let c = client(&["-c", "h%eth1", "--bind-dev", "eth3"]);
    assert_eq!(c.side.bind_dev.as_deref(), Some("eth3"));
    // An IPv6 link-local literal keeps its zone: it is not a device to bind to.
    let c = client(&["-c", "fe80::1%eth0"]);
    assert_eq!((c.host.as_str(), c.side.bind_dev), ("fe80::1%eth0", None));
    assert!(
        sentence(&["-c", "h", "--bind-dev", "a-name-far-too-long"])
            .contains("not a network interface")
    );
}

#[test]
fn socket_options_resolve() {
    let c = client(&[
        "-c",
        "h",
        "-u",
        "--dont-fragment",
        "--snd-timeout",
        "500",
        "--cntl-ka=60//3",
    ]);
    assert!(c.spec.dont_fragment);
    assert_eq!(c.side.snd_timeout_ms, Some(500));
    assert_eq!(
        c.side.cntl_ka,
        Some(Keepalive {
            idle_s: Some(60),
            interval_s: None,
            count: Some(3)
        })
    );
    assert_eq!(
        client(&["-c", "h", "--cntl-ka"]).side.cntl_ka,
        Some(Keepalive::default())
    );
    assert_eq!(
        client(&["-c", "h", "--snd-timeout", "0"])
            .side
            .snd_timeout_ms,
        None
    );
    assert!(
        sentence(&["-c", "h", "--snd-timeout", "-1"])
            .starts_with("--snd-timeout must be between 0")
    );
    assert!(sentence(&["-c", "h", "--cntl-ka=5/1/5"]).contains("must be longer than INTV"));
}

#[test]
fn sctp_options_say_what_is_missing_in_one_sentence() {
    let have = crate::sock::stream_protocol_available(libc::IPPROTO_SCTP).is_ok();
    for (args, flag) in [
        (&["-c", "h", "--sctp"][..], "--sctp"),
        (&["-c", "h", "--nstreams", "4"], "--nstreams"),
        (&["-s", "-X", "10.0.0.1"], "-X/--xbind"),
    ] {
        let e = sentence(args);
        assert!(e.starts_with(flag), "{e}");
        if have {
            assert!(e.contains("does not run SCTP tests yet"), "{e}");
        } else {
            assert!(
                e.contains("needs SCTP, which this kernel does not have"),
                "{e}"
            );
        }
    }
}

#[test]
fn flowlabel_and_pacing_timer_parse_as_iperf3s() {
    assert_eq!(
        client(&["-c", "h", "-L", "0x12345"]).spec.flowlabel,
        Some(0x12345)
    );
    assert_eq!(client(&["-c", "h", "-L", "17"]).spec.flowlabel, Some(17));
    for bad in ["0", "0x100000", "x"] {
        assert!(
            sentence(&["-c", "h", "-L", bad]).starts_with("-L needs a flow label"),
            "{bad}"
        );
    }
    assert_eq!(client(&["-c", "h"]).spec.pacing_timer_us, 1000);
    assert_eq!(
        client(&["-c", "h", "--pacing-timer", "2K"])
            .spec
            .pacing_timer_us,
        2048
    );
    assert!(sentence(&["-c", "h", "--pacing-timer", "-1"]).starts_with("--pacing-timer must be"));
}

#[test]
fn gsro_is_accepted_for_tcp_too_as_iperf3_does() {
    assert_eq!(client(&["-c", "h", "--gsro"]).spec.protocol, Protocol::Tcp);
    assert!(sentence(&["-c", "h", "--no-gso"]).starts_with("--no-gso and --no-gro apply to UDP"));
    assert!(sentence(&["-s", "--gsro"]).starts_with("--gsro is a client option"));
    for f in [
        &["-L", "5"][..],
        &["--dont-fragment"],
        &["--pacing-timer", "10"],
    ] {
        let e = sentence(&[&["-s"], f].concat());
        assert!(e.contains("is a client option"), "{f:?}: {e}");
    }
}

fn client(args: &[&str]) -> ClientConfig {
    match parse(args).unwrap() {
        Command::Client { cfg, .. } => cfg,
        other => panic!("{other:?}"),
    }
}

#[test]
fn iperf2_port_and_refusals() {
    assert_eq!(client(&["-c", "h", "--iperf2"]).port, 5001);
    assert_eq!(client(&["-c", "h", "--iperf2", "-p", "5201"]).port, 5201);
    assert!(client(&["-c", "h", "--iperf2"]).iperf2.is_some());
    let r = client(&["-c", "h", "--iperf2", "-u", "-R"]);
    assert_eq!(r.spec.direction, crate::spec::Direction::Reverse);
    let e = parse(&["-c", "h", "--iperf2", "-u", "-l", "40"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("-l must be at least 76"), "{e}");
    let e = parse(&["-c", "h", "--iperf2", "--loopback"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("--loopback"), "{e}");
}

/// `--iperf2-version` chooses where UDP `--isochronous` writes its frame fields:
/// 2.2's layout unless told, 2.1's for 2.0/2.1 servers; anything else, or without
/// `--iperf2`, is one sentence naming the option.
#[test]
fn iperf2_version_chooses_the_isochronous_layout() {
    use crate::wire::iperf2::IsochLayout;
    let layout = |extra: &[&str]| {
        let argv = [&["-c", "h", "--iperf2"][..], extra].concat();
        client(&argv).iperf2.expect("--iperf2").isoch_layout
    };
    assert_eq!(layout(&[]), IsochLayout::Iperf22);
    assert_eq!(layout(&["--iperf2-version", "2.1"]), IsochLayout::Iperf21);
    assert_eq!(layout(&["--iperf2-version", "2.1.8"]), IsochLayout::Iperf21);
    assert_eq!(layout(&["--iperf2-version", "2.2.1"]), IsochLayout::Iperf22);
    for bad in [
        &["-c", "h", "--iperf2", "--iperf2-version", "3"][..],
        &["-c", "h", "--iperf2-version", "2.1"][..],
    ] {
        let e = parse(bad).unwrap_err().to_string();
        assert!(
            e.contains("--iperf2-version") && e.lines().count() == 1,
            "{e}"
        );
    }
}

#[test]
fn iperf3_defaults() {
    let c = client(&["-c", "h"]);
    assert_eq!(c.port, 5201);
    assert_eq!(c.spec.end, EndCondition::Time(10.0));
    assert_eq!(c.spec.rate_bps, 0);
    let u = client(&["-c", "h", "-u"]);
    assert_eq!(u.spec.rate_bps, 1_048_576);
}

#[test]
fn tcp_block_default_depends_on_what_the_block_means() {
    let len = |a: &[&str]| {
        let mut v = vec!["-c", "h"];
        v.extend_from_slice(a);
        client(&v).spec.block_len
    };
    // Unpaced bulk TCP writes 1 MiB blocks while each stream can have a CPU, else
    // 128 KiB (chosen by measurement).
    assert_eq!(len(&[]), wire::TCP_BULK_BLOCK);
    assert_eq!(
        len(&["-R", "-P", "4"]),
        wire::bulk_tcp_block(4, host_cpus())
    );
    assert_eq!(len(&["-P", "128"]), wire::TCP_DEFAULT_BLOCK);
    assert_eq!(len(&["-n", "10M"]), wire::TCP_BULK_BLOCK);
    // Where the block has a meaning, iperf3's 128 KiB.
    assert_eq!(len(&["-b", "10M"]), 128 * 1024);
    assert_eq!(len(&["-k", "10"]), 128 * 1024);
    assert_eq!(len(&["--trip-times"]), 128 * 1024);
    assert_eq!(
        len(&["--burst-size", "64K", "--burst-period", "0.1"]),
        128 * 1024
    );
    // An explicit -l always wins.
    assert_eq!(len(&["-l", "64K"]), 64 * 1024);
    assert_eq!(len(&["-u"]), wire::UDP_DEFAULT_LEN);
}

#[test]
fn units_and_options() {
    let c = client(&[
        "-c", "h", "-u", "-b", "10M/8", "-l", "1448", "-P", "4", "--dscp", "ef",
    ]);
    assert_eq!(c.spec.rate_bps, 10_000_000);
    assert_eq!(c.spec.burst, Some(8));
    assert_eq!(c.spec.block_len, 1448);
    assert_eq!(c.spec.parallel, 4);
    assert_eq!(c.spec.tos, Some(46 << 2));
    assert_eq!(client(&["-c", "h", "-S", "0x10"]).spec.tos, Some(16));
    assert_eq!(
        client(&["-c", "h", "--dscp", "af41"]).spec.tos,
        Some(34 << 2)
    );
    assert_eq!(
        client(&["-c", "h", "-n", "1M"]).spec.end,
        EndCondition::Bytes(1 << 20)
    );
}

#[test]
fn invalid_combinations_are_one_sentence_errors() {
    for args in [
        vec!["-c", "h", "-R", "--bidir"],
        vec!["-c", "h", "-t", "5", "-n", "1M"],
        vec!["-c", "h", "-n", "1M", "-k", "10"],
        vec!["-c", "h", "-P", "0"],
        vec!["-c", "h", "-P", "129"],
        vec!["-c", "h", "-b", "fast"],
        vec!["-c", "h", "-u", "-l", "8"],
        vec!["-c", "h", "--dscp", "af55"],
        vec!["-s", "-t", "5"],
        vec!["-s", "-c", "h"],
        vec![],
    ] {
        let e = parse(&args).unwrap_err().0;
        assert!(!e.is_empty() && !e.contains('\n'), "{args:?}: {e}");
    }
}

#[test]
fn loopback_runs_tcp_then_udp() {
    match parse(&["--loopback"]).unwrap() {
        Command::Loopback { tcp, udp, .. } => {
            assert_eq!(tcp.spec.protocol, Protocol::Tcp);
            assert_eq!(udp.spec.protocol, Protocol::Udp);
            assert_eq!(tcp.host, "127.0.0.1");
        }
        other => panic!("{other:?}"),
    }
}

/// `cli::parse` reads every personality of the command line into one `Command`:
/// iperf 2's, the experiment subcommands, the other subcommands, `--via` and the flat
/// iperf3 line (with its `--timestamps`); a mistake is a usage sentence, help clap's.
#[test]
fn one_parse_reads_every_personality() {
    let run = |args: &[&str]| {
        let argv: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
        super::parse(&argv)
    };
    assert!(matches!(
        run(&["netmeter", "iperf2", "-s"]),
        Ok(Command::Iperf2(_))
    ));
    assert!(matches!(
        run(&["/usr/bin/iperf", "-s"]),
        Ok(Command::Iperf2(_))
    ));
    assert!(matches!(
        run(&["netmeter", "compare", "a.json", "b.json"]),
        Ok(Command::Experiment(compare_cmd::Subcommand::Compare(_)))
    ));
    assert!(matches!(
        run(&["netmeter", "sweep", "--help"]),
        Ok(Command::Experiment(compare_cmd::Subcommand::Sweep(None)))
    ));
    assert!(matches!(
        run(&["netmeter", "csv", "run.json"]),
        Ok(Command::Csv { .. })
    ));
    // --via without --psk-file: the --via parser's own sentence, not clap's.
    match run(&["netmeter", "-c", "b", "--via", "a"]) {
        Err(ArgsError::Usage(e)) => assert!(e.0.contains("--via needs --psk-file"), "{e}"),
        other => panic!("{other:?}"),
    }
    match run(&["netmeter", "-c", "h", "--timestamps=%T "]) {
        Ok(Command::Client { stamps, .. }) => assert_eq!(stamps.as_deref(), Some("%T ")),
        other => panic!("{other:?}"),
    }
    match run(&["netmeter", "-s"]) {
        Ok(Command::Server { stamps, .. }) => assert_eq!(stamps, None),
        other => panic!("{other:?}"),
    }
    match run(&["netmeter"]) {
        Err(ArgsError::Usage(e)) => assert!(e.0.starts_with("choose a role"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        run(&["netmeter", "--help"]),
        Err(ArgsError::Clap(e)) if !e.use_stderr()
    ));
}
