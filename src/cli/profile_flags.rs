//! Flags of the iperf 2 traffic profiles (`--burst-size`, `--burst-period`,
//! `--isochronous`) and of `--txstart-time`, resolved and checked.

use super::{Args, UsageError, usage};
use crate::clock::{Clock, SystemClock};
use crate::profile::{self, Profile};
use crate::spec::{Direction, Protocol, TestSpec};
use crate::units;
use crate::wire::IsochHeader;

/// Smallest `-l` for isochronous UDP: the UDP header with 64-bit sequence numbers and
/// the frame header.
pub const MIN_ISOCH_UDP_LEN: usize = 16 + IsochHeader::LEN;

impl Args {
    /// The sending profile, if one was asked for, applied to `spec`.
    pub(super) fn with_profile(&self, mut spec: TestSpec) -> Result<TestSpec, UsageError> {
        let burst = self.latency.burst_size.is_some() || self.latency.burst_period.is_some();
        let (name, p) = match (burst, &self.latency.isochronous) {
            (false, None) => return Ok(spec),
            (true, Some(_)) => {
                return Err(usage(
                    "use either --burst-size/--burst-period or --isochronous, not both",
                ));
            }
            (true, None) => {
                let bytes = match &self.latency.burst_size {
                    Some(s) => {
                        units::parse_bytes(s).map_err(|e| usage(format!("--burst-size: {e}")))?
                    }
                    None => profile::DEFAULT_BURST_BYTES,
                };
                if !(1..=profile::MAX_BURST_BYTES).contains(&bytes) {
                    return Err(usage("--burst-size must be between 1 byte and 1G"));
                }
                let period_s = self
                    .latency
                    .burst_period
                    .unwrap_or(profile::DEFAULT_BURST_PERIOD_S);
                if !(profile::MIN_PERIOD_S..=profile::MAX_PERIOD_S).contains(&period_s) {
                    return Err(usage(
                        "--burst-period must be between 0.001 and 3600 seconds",
                    ));
                }
                ("--burst-size", Profile::Burst { bytes, period_s })
            }
            (false, Some(s)) => {
                let params = profile::parse_isochronous(s)
                    .map_err(|e| usage(format!("--isochronous: {e}")))?;
                if spec.protocol == Protocol::Udp
                    && self.client.length.is_some()
                    && spec.block_len < MIN_ISOCH_UDP_LEN
                {
                    return Err(usage(format!(
                        "-l must be at least {MIN_ISOCH_UDP_LEN} bytes with --isochronous over UDP (room for the frame header)"
                    )));
                }
                (
                    "--isochronous",
                    Profile::Isochronous {
                        params,
                        framed: false,
                        both_ways: false,
                    },
                )
            }
        };
        let clash: &[(bool, &str)] = &[
            (
                spec.direction == Direction::Reverse,
                "-R (the profile shapes what the client sends)",
            ),
            (
                self.client.bitrate.is_some(),
                "-b (the profile sets the sending schedule)",
            ),
            (spec.bounceback.is_some(), "--bounceback"),
            (spec.connect_only, "--connect-only"),
            (spec.zerocopy, "-Z"),
            (self.common.loopback, "--loopback"),
            (self.experiments.find_max_rate, "--find-max-rate"),
        ];
        if let Some((_, f)) = clash.iter().find(|(used, _)| *used) {
            return Err(usage(format!("{name} cannot be combined with {f}")));
        }
        if spec.direction == Direction::Upload {
            // The profile paces the client's streams; no -b default on top of it.
            spec.rate_bps = 0;
        }
        spec.profile = Some(p);
        Ok(spec)
    }

    /// `--txstart-time EPOCH`, checked against the clock now.
    pub(super) fn txstart(&self) -> Result<Option<f64>, UsageError> {
        let Some(t) = self.hosts.txstart_time else {
            return Ok(None);
        };
        if self.common.loopback || self.experiments.find_max_rate {
            return Err(usage(
                "--txstart-time cannot be combined with --loopback or --find-max-rate",
            ));
        }
        // The CLI is the driver: it checks against the clock the test will run on.
        let now = SystemClock.wall_ns() as f64 / 1e9;
        profile::check_txstart(t, now).map_err(usage)?;
        Ok(Some(t))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Args, Command};
    use crate::profile::Profile;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<Command, String> {
        let mut v = vec!["netmeter", "-c", "h"];
        v.extend_from_slice(args);
        Args::try_parse_from(v)
            .map_err(|e| e.to_string())?
            .resolve()
            .map_err(|e| e.0)
    }

    fn profile_of(args: &[&str]) -> Option<Profile> {
        match parse(args).unwrap() {
            Command::Client { cfg, .. } => cfg.spec.profile,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn burst_flags_and_defaults() {
        assert_eq!(
            profile_of(&["--burst-size", "64K", "--burst-period", "0.1"]),
            Some(Profile::Burst {
                bytes: 65536,
                period_s: 0.1
            })
        );
        assert_eq!(
            profile_of(&["--burst-period", "2"]),
            Some(Profile::Burst {
                bytes: 1 << 20,
                period_s: 2.0
            })
        );
        match parse(&["-u", "--burst-size", "10K"]).unwrap() {
            Command::Client { cfg, .. } => assert_eq!(cfg.spec.rate_bps, 0),
            other => panic!("{other:?}"),
        }
        assert_eq!(profile_of(&[]), None);
    }

    #[test]
    fn isochronous_flag() {
        match profile_of(&["-u", "--isochronous", "30:10m,1m"]) {
            Some(Profile::Isochronous { params, framed, .. }) => {
                assert_eq!(
                    (params.fps, params.mean_bps, params.stdev_bps),
                    (30, 10_000_000, 1_000_000)
                );
                assert!(!framed, "framed only once the server accepts");
            }
            other => panic!("{other:?}"),
        }
        // iperf 2's default when the value is left out.
        match profile_of(&["--isochronous"]) {
            Some(Profile::Isochronous { params, .. }) => {
                assert_eq!((params.fps, params.mean_bps), (60, 20_000_000))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_values_are_one_sentence_errors() {
        // The parser checks --txstart-time against the host's clock: so must this.
        let now = crate::clock::wall_now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let far = format!("{}", now + 7200.0);
        let past = format!("{}", now - 10.0);
        for args in [
            vec!["--burst-size", "0"],
            vec!["--burst-size", "2G"],
            vec!["--burst-size", "lots"],
            vec!["--burst-period", "0"],
            vec!["--burst-period", "4000"],
            vec!["--burst-size", "1M", "--isochronous", "60:1m"],
            vec!["--burst-size", "1M", "-R"],
            vec!["--burst-size", "1M", "-b", "10M"],
            vec!["--burst-size", "1M", "--bounceback"],
            vec!["--burst-size", "1M", "-Z"],
            vec!["--isochronous", "60"],
            vec!["--isochronous", "0:1m"],
            vec!["--isochronous", "60:1m", "-u", "-l", "20"],
            vec!["--txstart-time", far.as_str()],
            vec!["--txstart-time", past.as_str()],
        ] {
            let e = parse(&args).unwrap_err();
            assert!(!e.is_empty() && !e.contains('\n'), "{args:?}: {e}");
        }
        assert!(parse(&["--txstart-time", &format!("{}", now + 5.0)]).is_ok());
    }
}
