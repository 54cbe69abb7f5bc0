use super::*;

fn cmd(args: &[&str]) -> Result<Iperf2Command, UsageError> {
    let v: Vec<OsString> = args.iter().map(OsString::from).collect();
    parse(&v)
}

fn client(args: &[&str]) -> (ClientConfig, Iperf2Ctx) {
    match cmd(args) {
        Ok(Iperf2Command::Client { cfg, ctx, .. }) => (cfg, ctx),
        other => panic!("{args:?}: {other:?}"),
    }
}

fn refused(args: &[&str]) -> String {
    match cmd(args) {
        Err(e) => e.0,
        Ok(c) => panic!("{args:?} was taken: {c:?}"),
    }
}

#[test]
fn iperf2_defaults_port_5001_no_intervals_and_its_lengths() {
    let (cfg, ctx) = client(&["-c", "127.0.0.1"]);
    assert_eq!(cfg.port, 5001);
    assert_eq!(cfg.interval_s, 0.0);
    assert_eq!(cfg.spec.block_len, 128 * 1024);
    assert_eq!(ctx.layout, Layout::Plain);
    let (cfg, ctx) = client(&["-c", "h", "-u", "-e", "-i", "1"]);
    assert_eq!(cfg.spec.block_len, 1470);
    assert_eq!(cfg.interval_s, 1.0);
    assert_eq!(ctx.layout, Layout::Enhanced);
    assert!(ctx.udp);
}

#[test]
fn invoked_by_subcommand_or_by_the_name_iperf() {
    let argv = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
    assert!(invoked(&argv(&["netmeter", "iperf2", "-c", "h"])).is_some());
    assert!(invoked(&argv(&["/usr/bin/iperf", "-c", "h"])).is_some());
    assert!(invoked(&argv(&["netmeter", "-c", "h"])).is_none());
    assert!(invoked(&argv(&["/usr/bin/iperf3", "-c", "h"])).is_none());
}

#[test]
fn bandwidth_in_packets_per_second_is_packets_times_length() {
    let (cfg, _) = client(&["-c", "h", "-u", "-b", "100pps"]);
    assert_eq!(cfg.spec.rate_bps, 100 * 1470 * 8);
    let (cfg, _) = client(&["-c", "h", "-u", "-l", "1000", "-b", "2kpps"]);
    assert_eq!(cfg.spec.rate_bps, 2000 * 1000 * 8);
    // iperf 2's units: lower case 10³, upper case 2¹⁰.
    let (cfg, _) = client(&["-c", "h", "-u", "-b", "10m"]);
    assert_eq!(cfg.spec.rate_bps, 10_000_000);
    let (cfg, _) = client(&["-c", "h", "-u", "-b", "10M"]);
    assert_eq!(cfg.spec.rate_bps, 10 * 1024 * 1024);
}

#[test]
fn mean_stdev_bandwidth_is_refused_naming_the_option() {
    let e = refused(&["-c", "h", "-u", "-b", "10M,1M"]);
    assert!(e.contains("-b 10M,1M"), "{e}");
}

#[test]
fn full_duplex_runs_both_directions_on_iperf2s_wire() {
    use crate::spec::Direction;
    let (cfg, _) = client(&["-c", "h", "--full-duplex"]);
    assert_eq!(cfg.spec.direction, Direction::Bidir);
    assert!(
        cfg.iperf2.is_some(),
        "netmeter iperf2 -c speaks iperf 2's wire"
    );
    let (cfg, _) = client(&["-c", "h", "-R"]);
    assert_eq!(cfg.spec.direction, Direction::Reverse);
    // -d is iperf 2's other test: both ways too, the server connecting back.
    let (cfg, _) = client(&["-c", "h", "-d"]);
    assert_eq!(cfg.spec.direction, Direction::Bidir);
    assert!(cfg.iperf2.is_some_and(|o| o.dual));
    let e = refused(&["-c", "h", "-d", "--full-duplex"]);
    assert!(e.contains("-d") && e.contains("--full-duplex"), "{e}");
    // Over UDP one stream, the receiving half's latency from the send times (as
    // iperf 2.2.1's client prints it); -P and --trip-times are refused with it.
    let (cfg, _) = client(&["-c", "h", "-d", "-u"]);
    assert!(cfg.iperf2.is_some_and(|o| o.dual && o.send_time_latency));
    assert!(refused(&["-c", "h", "-d", "-u", "-P", "2"]).contains("-P"));
    assert!(refused(&["-c", "h", "-d", "-u", "--trip-times"]).contains("--trip-times"));
}

#[test]
fn bounceback_period_in_seconds_zero_back_to_back() {
    use std::time::Duration;
    let period = |p: &str| {
        client(&["-c", "h", "--bounceback", "--bounceback-period", p])
            .0
            .iperf2
            .and_then(|o| o.bounceback_period)
    };
    assert_eq!(period("0.25"), Some(Duration::from_millis(250)));
    assert_eq!(period("0"), Some(Duration::ZERO));
    assert!(refused(&["-c", "h", "--bounceback", "--bounceback-period", "-1"]).contains("-1"));
    assert!(refused(&["-c", "h", "--bounceback-period", "1"]).contains("--bounceback"));
}

#[test]
fn tos_takes_dscp_names() {
    let (cfg, _) = client(&["-c", "h", "-S", "af11"]);
    assert_eq!(cfg.spec.tos, Some(0x28));
    let (cfg, _) = client(&["-c", "h", "-S", "0x10"]);
    assert_eq!(cfg.spec.tos, Some(0x10));
    let (cfg, _) = client(&["-c", "h", "-S", "ac_vo"]);
    assert_eq!(cfg.spec.tos, Some(0xc0));
    let (cfg, _) = client(&["-c", "h", "-S", "EF"]);
    assert_eq!(cfg.spec.tos, Some(0xb8));
    assert!(refused(&["-c", "h", "-S", "gold"]).contains("-S gold"));
}

#[test]
fn modes_not_yet_on_iperf2s_wire_are_refused_naming_them() {
    for (args, name) in [
        (&["-c", "h", "-u", "--bounceback"][..], "--bounceback"),
        (
            &["-c", "h", "--isochronous", "--full-duplex"][..],
            "--full-duplex",
        ),
        (&["-c", "h", "--trip-times", "-l", "80"][..], "at least 92"),
        (
            &["-c", "h", "-u", "--burst-size", "10K"][..],
            "--burst-size",
        ),
        (&["-c", "h", "--isochronous", "-l", "80"][..], "at least 92"),
    ] {
        let e = refused(args);
        assert!(e.contains(name) && !e.contains('\n'), "{args:?}: {e}");
        assert!(
            !e.contains("--iperf2") && !e.contains("--bidir"),
            "{args:?}: {e}"
        );
    }
}

/// `--isochronous` runs on iperf 2's wire over UDP and TCP (iperf 2's default
/// 60:20m,0 without a value).
#[test]
fn isochronous_is_taken_over_udp_and_tcp() {
    for udp in [true, false] {
        let args: &[&str] = if udp {
            &["-c", "h", "-u", "--isochronous"]
        } else {
            &["-c", "h", "--isochronous"]
        };
        let (cfg, ctx) = client(args);
        let iso = cfg.spec.profile.as_ref().and_then(|p| p.isochronous());
        assert_eq!(iso.map(|i| (i.fps, i.mean_bps)), Some((60, 20_000_000)));
        assert!(ctx.isochronous.is_some());
    }
}

/// iperf 2's `--burst-size` (its units: `40K` is 40 × 1024) and `--burst-period`
/// become netmeter's burst profile, over TCP.
#[test]
fn bursts_take_iperf2s_names_and_units() {
    let (cfg, _) = client(&["-c", "h", "--burst-size", "40K", "--burst-period", "0.05"]);
    assert_eq!(
        cfg.spec.profile,
        Some(crate::profile::Profile::Burst {
            bytes: 40 * 1024,
            period_s: 0.05
        })
    );
    let (cfg, _) = client(&["-c", "h", "--burst-size", "40k"]);
    assert!(matches!(
        cfg.spec.profile,
        Some(crate::profile::Profile::Burst { bytes: 40_000, .. })
    ));
}

/// UDP `-R` and `--full-duplex` run on iperf 2's wire.
#[test]
fn udp_reverse_is_taken() {
    let (cfg, ctx) = client(&["-c", "h", "-u", "-R"]);
    assert_eq!(cfg.spec.direction, crate::spec::Direction::Reverse);
    assert!(ctx.udp && cfg.iperf2.is_some());
    // iperf 2's -R client prints latency from the send times without --trip-times.
    assert!(cfg.iperf2.is_some_and(|o| o.send_time_latency));
    assert!(!cfg.spec.trip_times, "the header asks for no trip times");
    let (cfg, _) = client(&["-c", "h", "-R"]);
    assert!(cfg.iperf2.is_some_and(|o| !o.send_time_latency));
    let (cfg, _) = client(&["-c", "h", "-u", "--full-duplex"]);
    assert_eq!(cfg.spec.direction, crate::spec::Direction::Bidir);
}

#[test]
fn bounceback_takes_iperf2s_burst_count() {
    let (cfg, ctx) = client(&["-c", "h", "--bounceback"]);
    assert_eq!(cfg.spec.bounceback.unwrap().burst, 10);
    assert!(ctx.nodelay);
    let (cfg, _) = client(&["-c", "h", "--bounceback=3", "--bounceback-hold", "2"]);
    let b = cfg.spec.bounceback.unwrap();
    assert_eq!((b.burst, b.hold_us), (3, 2000));
}

#[test]
fn csv_and_trip_times_layouts() {
    let (_, ctx) = client(&["-c", "h", "-y", "C"]);
    assert_eq!(ctx.layout, Layout::Csv);
    // As iperf 2, --histograms selects the enhanced layout.
    let (_, ctx) = client(&["-c", "h", "--histograms"]);
    assert_eq!(ctx.layout, Layout::Enhanced);
    assert!(refused(&["-c", "h", "-y", "J"]).contains("-y J"));
}

#[test]
fn unsupported_options_are_one_sentence_naming_them() {
    for (args, name) in [
        (&["-c", "h", "-T", "4"][..], "-T 4"),
        (&["-c", "h", "-x", "SQ"][..], "-x SQ"),
        (&["-c", "h", "--no-such"][..], "--no-such"),
    ] {
        let e = refused(args);
        assert!(e.contains(name) && !e.contains('\n'), "{args:?}: {e}");
    }
}

#[test]
fn report_exclusions_and_sum_only_reach_the_renderer() {
    let (_, ctx) = client(&["-c", "h", "-x", "SCv", "--sum-only", "-P", "2"]);
    assert!(ctx.exclude.settings && ctx.exclude.connections && ctx.exclude.server_reports);
    assert!(!ctx.exclude.data && ctx.sum_only);
}

#[test]
fn a_role_is_needed_and_only_one() {
    assert!(refused(&[]).contains("-s"));
    assert!(refused(&["-s", "-c", "h"]).contains("-c HOST"));
}

#[test]
fn help_version_and_server() {
    assert!(matches!(cmd(&["-h"]), Ok(Iperf2Command::Help)));
    assert!(matches!(cmd(&["-v"]), Ok(Iperf2Command::Version)));
    assert!(version_text().starts_with("iperf version 2"));
    match cmd(&["-s", "-u", "-p", "5002", "-e", "-i", "1"]) {
        Ok(Iperf2Command::Server { cfg, .. }) => assert_eq!(cfg.port, 5002),
        other => panic!("{other:?}"),
    }
}

#[test]
fn histogram_bin_widths_in_iperf2s_units() {
    assert_eq!(histogram_bin_ms("100u").unwrap(), 0.1);
    assert_eq!(histogram_bin_ms("1m,1000").unwrap(), 1.0);
    assert!(histogram_bin_ms("x").is_err());
}

#[test]
fn tcp_trip_times_runs_on_iperf2s_wire() {
    let (cfg, _) = client(&["-c", "h", "-e", "--trip-times"]);
    assert!(cfg.spec.trip_times);
    assert_eq!(crate::engine::iperf2_client::unsupported(&cfg), None);
}

/// `-r`, iperf 2's tradeoff test: an upload, then the server's test back (over UDP
/// one stream; not with the other two-way tests), each refusal one sentence naming
/// the option.
#[test]
fn tradeoff_is_an_upload_then_the_server_connecting_back() {
    use crate::spec::Direction;
    let (cfg, _) = client(&["-c", "h", "-r", "-t", "3"]);
    assert_eq!(cfg.spec.direction, Direction::Upload);
    assert!(cfg.iperf2.is_some_and(|o| o.tradeoff && !o.dual));
    let (cfg, _) = client(&["-c", "h", "-r", "-u"]);
    assert_eq!(cfg.spec.direction, Direction::Upload);
    assert!(
        cfg.iperf2
            .is_some_and(|o| o.tradeoff && o.send_time_latency)
    );
    for (args, name) in [
        (&["-c", "h", "-r", "-u", "-P", "2"][..], "-P"),
        (&["-c", "h", "-r", "-d"][..], "-d"),
        (&["-c", "h", "-r", "-R"][..], "-R"),
        (&["-c", "h", "-r", "--full-duplex"][..], "--full-duplex"),
        (&["-c", "h", "-r", "--bounceback"][..], "--bounceback"),
        (&["-c", "h", "-r", "--trip-times"][..], "--trip-times"),
    ] {
        let e = refused(args);
        assert!(e.contains(name) && !e.contains('\n'), "{args:?}: {e}");
    }
}

/// TCP `-R --trip-times` runs on iperf 2's wire (the server times its writes, this
/// client reads their send times), and so does `--full-duplex` (both time each
/// other's writes on the one connection).
#[test]
fn tcp_reverse_trip_times_is_taken() {
    use crate::spec::Direction;
    let (cfg, ctx) = client(&["-c", "h", "-R", "--trip-times"]);
    assert_eq!(cfg.spec.direction, Direction::Reverse);
    assert!(cfg.spec.trip_times && ctx.trip_times);
    let (cfg, ctx) = client(&["-c", "h", "--full-duplex", "--trip-times"]);
    assert_eq!(cfg.spec.direction, Direction::Bidir);
    assert!(cfg.spec.trip_times && ctx.trip_times);
}
