//! The server's policy: every limit on who may test and what they may ask for, in one
//! object, and the decisions it makes, apart from the sockets.
//!
//! The server asks it at two moments. When a connection arrives (after its cookie): is
//! the source address allowed (`--allow`/`--deny`), and has this address not opened
//! tests faster than `--max-conn-rate`? When the test's parameters arrive: does the
//! test fit `--max-streams`, `--server-max-duration` and `--server-bitrate-limit`?
//! `--max-tests` is judged where the slots are counted (the session), by
//! [`Policy::busy`]. Each "no" is a [`Refusal`]: a reason (a short label for the audit
//! log and the metrics), a sentence for the server's log, and what the client is told —
//! an iperf3 error code an iperf3 client prints, or `ACCESS_DENIED` ("the server is
//! busy ... try again later").
//!
//! Checks that later features add (a third-party request's target, say) belong here too,
//! as one more method returning `Result<(), Refusal>`.

use crate::spec::TestSpec;
use crate::wire::ErrCode;
use ipnet::IpNet;
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// What the server allows (from the flags). `Default` allows everything but one test
/// at a time (iperf3's server).
#[derive(Debug, Clone)]
pub struct Policy {
    /// `--max-tests`: tests running at once.
    pub max_tests: usize,
    /// `--server-max-duration SECS` (refuse longer or open-ended tests).
    pub max_duration_s: Option<u64>,
    /// `--server-bitrate-limit RATE[/SECONDS]`: bits/s and the averaging window.
    pub bitrate_limit: Option<(u64, f64)>,
    /// `--max-streams N`: data streams one test may open (-P, twice with --bidir).
    pub max_streams: Option<u32>,
    /// `--max-conn-rate N/PERIOD`: tests one source address may start.
    pub conn_rate: Option<ConnRate>,
    /// `--allow CIDR,...`: when not empty, only these sources may test.
    pub allow: Vec<IpNet>,
    /// `--deny CIDR,...`: these sources may not test (wins over `--allow`).
    pub deny: Vec<IpNet>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            max_tests: 1,
            max_duration_s: None,
            bitrate_limit: None,
            max_streams: None,
            conn_rate: None,
            allow: Vec::new(),
            deny: Vec::new(),
        }
    }
}

/// Why a test was refused: the label the audit log and the metrics use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The source address is not allowed (`--allow`/`--deny`).
    Address,
    /// The source address started tests too fast (`--max-conn-rate`).
    Rate,
    /// The credential was refused (`--authorized-users-path`).
    Auth,
    /// `--max-tests` tests were running already.
    Busy,
    /// `--max-streams`.
    Streams,
    /// `--server-max-duration`.
    Duration,
    /// `--server-bitrate-limit` (the rate asked for).
    Bitrate,
    /// Parameters this server cannot run (invalid or unsupported).
    Params,
    /// A third-party request this server does not take (no key, target not allowed,
    /// options it cannot forward).
    ThirdParty,
}

impl Reason {
    /// Every reason, in the order the metrics list them.
    pub const ALL: [Reason; 9] = [
        Reason::Address,
        Reason::Rate,
        Reason::Auth,
        Reason::Busy,
        Reason::Streams,
        Reason::Duration,
        Reason::Bitrate,
        Reason::Params,
        Reason::ThirdParty,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Reason::Address => "address",
            Reason::Rate => "rate",
            Reason::Auth => "auth",
            Reason::Busy => "busy",
            Reason::Streams => "streams",
            Reason::Duration => "duration",
            Reason::Bitrate => "bitrate",
            Reason::Params => "params",
            Reason::ThirdParty => "third_party",
        }
    }
}

/// What a refused client is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// `SERVER_ERROR` with this iperf3 error code.
    Error(ErrCode),
    /// `ACCESS_DENIED`: iperf3 clients print "the server is busy running a test. try
    /// again later".
    Busy,
}

/// One "no" from the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: Reason,
    pub answer: Answer,
    /// For the server's log, after "refused a test from ADDR: ".
    pub message: String,
}

impl Policy {
    /// Whether `ip` may test at all. A `--deny` match refuses; otherwise a non-empty
    /// `--allow` list must match. iperf3 has no code for "not allowed here": the client
    /// is told `IEAUTHTEST` ("test authorization failed"), the closest it prints.
    pub fn check_address(&self, ip: IpAddr) -> Result<(), Refusal> {
        let refuse = |why: String| Refusal {
            reason: Reason::Address,
            answer: Answer::Error(ErrCode::AuthTest),
            message: why,
        };
        if let Some(net) = self.deny.iter().find(|n| n.contains(&ip)) {
            return Err(refuse(format!("{ip} is in {net} (--deny)")));
        }
        if !self.allow.is_empty() && !self.allow.iter().any(|n| n.contains(&ip)) {
            return Err(refuse(format!("{ip} is not in any --allow network")));
        }
        Ok(())
    }

    /// The limits on what a test asks for, checked when its parameters arrive.
    pub fn check_test(&self, spec: &TestSpec) -> Result<(), Refusal> {
        if let Some(max) = self.max_streams {
            let n = spec.total_streams();
            if n > max {
                return Err(Refusal {
                    reason: Reason::Streams,
                    // iperf3's own "too many streams" code; its client prints "invalid
                    // number of parallel streams".
                    answer: Answer::Error(ErrCode::NumStreams),
                    message: format!(
                        "the client asked for {n} data streams and this server allows at most {max} (--max-streams)"
                    ),
                });
            }
        }
        if let Some(e) =
            spec.server_limits_refusal(self.max_duration_s, self.bitrate_limit.map(|l| l.0))
        {
            let reason = if e.code == ErrCode::TotalRate {
                Reason::Bitrate
            } else {
                Reason::Duration
            };
            return Err(Refusal {
                reason,
                answer: Answer::Error(e.code),
                message: e.message,
            });
        }
        Ok(())
    }

    /// The refusal when `running` tests already hold every slot.
    pub fn busy(&self, running: usize) -> Option<Refusal> {
        (running >= self.max_tests).then(|| Refusal {
            reason: Reason::Busy,
            answer: Answer::Busy,
            message: format!(
                "{running} test(s) already running (--max-tests {})",
                self.max_tests
            ),
        })
    }
}

/// `--max-conn-rate N/PERIOD`: a token bucket per source address holding up to `burst`
/// tests, refilled at `burst` per `period`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConnRate {
    pub burst: u32,
    pub period: Duration,
}

impl ConnRate {
    /// Parse `N`, `N/s`, `N/min` or `N/h` (a bare `N` is per minute).
    pub fn parse(s: &str) -> Result<ConnRate, String> {
        let (n, unit) = s.trim().split_once('/').unwrap_or((s.trim(), "min"));
        let burst: u32 = n
            .trim()
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("--max-conn-rate: '{n}' is not a whole number above 0"))?;
        let period = match unit.trim() {
            "s" | "sec" => Duration::from_secs(1),
            "m" | "min" => Duration::from_secs(60),
            "h" | "hour" => Duration::from_secs(3600),
            u => {
                return Err(format!(
                    "--max-conn-rate: '{u}' is not a period; use N/s, N/min or N/h"
                ));
            }
        };
        Ok(ConnRate { burst, period })
    }
}

/// The buckets of [`ConnRate`], one per source address. Time comes in as `now`.
#[derive(Debug)]
pub struct RateGate {
    rate: ConnRate,
    /// Tokens left and when they were counted, per address.
    buckets: HashMap<IpAddr, (f64, Instant)>,
}

/// Above this many addresses, full buckets (addresses quiet for a whole period) are
/// forgotten, so a scan from many addresses cannot grow the table without bound.
const GATE_PRUNE_AT: usize = 4096;

impl RateGate {
    pub fn new(rate: ConnRate) -> RateGate {
        RateGate {
            rate,
            buckets: HashMap::new(),
        }
    }

    /// Give back the token `admit` took for `ip`: the connection closed before it sent
    /// a byte (a port probe, a health check), so it was no test attempt.
    pub fn refund(&mut self, ip: IpAddr) {
        let burst = f64::from(self.rate.burst);
        if let Some((tokens, _)) = self.buckets.get_mut(&ip) {
            *tokens = (*tokens + 1.0).min(burst);
        }
    }

    /// Take one token for `ip` at `now`; the refusal when its bucket is empty.
    pub fn admit(&mut self, ip: IpAddr, now: Instant) -> Result<(), Refusal> {
        let burst = f64::from(self.rate.burst);
        let per_s = burst / self.rate.period.as_secs_f64();
        if self.buckets.len() >= GATE_PRUNE_AT {
            self.buckets.retain(|_, (t, at)| {
                *t + now.saturating_duration_since(*at).as_secs_f64() * per_s < burst
            });
        }
        let (tokens, at) = self.buckets.entry(ip).or_insert((burst, now));
        let refilled =
            (*tokens + now.saturating_duration_since(*at).as_secs_f64() * per_s).min(burst);
        *at = now;
        if refilled >= 1.0 {
            *tokens = refilled - 1.0;
            return Ok(());
        }
        *tokens = refilled;
        let wait_s = (1.0 - refilled) / per_s;
        Err(Refusal {
            reason: Reason::Rate,
            answer: Answer::Busy,
            message: format!(
                "{ip} started more than {} test(s) per {} s (--max-conn-rate); next one in {wait_s:.1} s",
                self.rate.burst,
                self.rate.period.as_secs()
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refunded_token_can_be_taken_again_but_never_above_the_burst() {
        let rate = ConnRate::parse("2/min").unwrap();
        let mut g = RateGate::new(rate);
        let now = Instant::now();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        g.admit(ip, now).unwrap();
        g.admit(ip, now).unwrap();
        assert!(g.admit(ip, now).is_err());
        g.refund(ip);
        g.admit(ip, now).unwrap();
        assert!(g.admit(ip, now).is_err());
        // Refunds beyond the burst are not kept.
        for _ in 0..5 {
            g.refund(ip);
        }
        g.admit(ip, now).unwrap();
        g.admit(ip, now).unwrap();
        assert!(g.admit(ip, now).is_err());
    }
    use crate::spec::{Direction, EndCondition};

    fn nets(s: &[&str]) -> Vec<IpNet> {
        s.iter().map(|n| n.parse().unwrap()).collect()
    }

    #[test]
    fn deny_wins_over_allow_and_an_empty_allow_list_allows_all() {
        let p = Policy {
            allow: nets(&["127.0.0.0/8", "::1/128"]),
            deny: nets(&["127.0.0.2/32"]),
            ..Default::default()
        };
        assert!(p.check_address("127.0.0.1".parse().unwrap()).is_ok());
        assert!(p.check_address("::1".parse().unwrap()).is_ok());
        let r = p.check_address("127.0.0.2".parse().unwrap()).unwrap_err();
        assert_eq!(r.reason, Reason::Address);
        assert_eq!(r.answer, Answer::Error(ErrCode::AuthTest));
        assert!(r.message.contains("--deny"), "{}", r.message);
        let r = p.check_address("10.1.2.3".parse().unwrap()).unwrap_err();
        assert!(r.message.contains("--allow"), "{}", r.message);
        let open = Policy::default();
        assert!(open.check_address("10.1.2.3".parse().unwrap()).is_ok());
        let deny_only = Policy {
            deny: nets(&["10.0.0.0/8"]),
            ..Default::default()
        };
        assert!(
            deny_only
                .check_address("10.1.2.3".parse().unwrap())
                .is_err()
        );
        assert!(deny_only.check_address("11.1.2.3".parse().unwrap()).is_ok());
    }

    #[test]
    fn max_streams_counts_both_directions_of_bidir() {
        let p = Policy {
            max_streams: Some(4),
            ..Default::default()
        };
        let spec = |parallel, direction| TestSpec {
            parallel,
            direction,
            end: EndCondition::Time(1.0),
            ..Default::default()
        };
        assert!(p.check_test(&spec(4, Direction::Upload)).is_ok());
        let r = p.check_test(&spec(5, Direction::Reverse)).unwrap_err();
        assert_eq!(r.reason, Reason::Streams);
        assert_eq!(r.answer, Answer::Error(ErrCode::NumStreams));
        assert!(r.message.contains("5 data streams"), "{}", r.message);
        assert!(p.check_test(&spec(2, Direction::Bidir)).is_ok());
        assert!(p.check_test(&spec(3, Direction::Bidir)).is_err());
        assert!(
            Policy::default()
                .check_test(&spec(128, Direction::Bidir))
                .is_ok()
        );
    }

    #[test]
    fn duration_and_bitrate_limits_keep_their_iperf3_codes() {
        let p = Policy {
            max_duration_s: Some(5),
            bitrate_limit: Some((1_000_000, 5.0)),
            ..Default::default()
        };
        let long = TestSpec {
            end: EndCondition::Time(10.0),
            ..Default::default()
        };
        let r = p.check_test(&long).unwrap_err();
        assert_eq!(r.reason, Reason::Duration);
        assert_eq!(
            r.answer,
            Answer::Error(ErrCode::MaxServerTestDurationExceeded)
        );
        let fast = TestSpec {
            end: EndCondition::Time(2.0),
            rate_bps: 2_000_000,
            ..Default::default()
        };
        let r = p.check_test(&fast).unwrap_err();
        assert_eq!(r.reason, Reason::Bitrate);
        assert_eq!(r.answer, Answer::Error(ErrCode::TotalRate));
    }

    #[test]
    fn busy_only_when_every_slot_is_taken() {
        let p = Policy {
            max_tests: 2,
            ..Default::default()
        };
        assert!(p.busy(0).is_none());
        assert!(p.busy(1).is_none());
        let r = p.busy(2).unwrap();
        assert_eq!((r.reason, r.answer), (Reason::Busy, Answer::Busy));
    }

    #[test]
    fn conn_rate_parses_counts_and_periods() {
        let r = ConnRate::parse("10").unwrap();
        assert_eq!((r.burst, r.period), (10, Duration::from_secs(60)));
        assert_eq!(
            ConnRate::parse("3/s").unwrap().period,
            Duration::from_secs(1)
        );
        assert_eq!(
            ConnRate::parse("100/h").unwrap().period,
            Duration::from_secs(3600)
        );
        for bad in ["0", "-1", "x/min", "5/day", ""] {
            assert!(ConnRate::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rate_gate_allows_a_burst_then_refills_per_address() {
        let mut g = RateGate::new(ConnRate {
            burst: 2,
            period: Duration::from_secs(10),
        });
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.3".parse().unwrap();
        let t0 = Instant::now();
        assert!(g.admit(a, t0).is_ok());
        assert!(g.admit(a, t0).is_ok());
        let r = g.admit(a, t0).unwrap_err();
        assert_eq!((r.reason, r.answer), (Reason::Rate, Answer::Busy));
        assert!(r.message.contains("next one in 5.0 s"), "{}", r.message);
        // Another address has its own bucket.
        assert!(g.admit(b, t0).is_ok());
        // One token comes back every 5 s; a refused attempt takes none.
        assert!(g.admit(a, t0 + Duration::from_secs(4)).is_err());
        assert!(g.admit(a, t0 + Duration::from_secs(5)).is_ok());
        assert!(g.admit(a, t0 + Duration::from_secs(5)).is_err());
        // Never more than the burst, however long the pause.
        let later = t0 + Duration::from_secs(1000);
        assert!(g.admit(a, later).is_ok());
        assert!(g.admit(a, later).is_ok());
        assert!(g.admit(a, later).is_err());
    }

    #[test]
    fn rate_gate_forgets_quiet_addresses_when_the_table_is_large() {
        let mut g = RateGate::new(ConnRate {
            burst: 1,
            period: Duration::from_secs(1),
        });
        let t0 = Instant::now();
        for i in 0..GATE_PRUNE_AT as u32 {
            let _ = g.admit(IpAddr::from(i.to_be_bytes()), t0);
        }
        assert_eq!(g.buckets.len(), GATE_PRUNE_AT);
        let _ = g.admit("10.0.0.1".parse().unwrap(), t0 + Duration::from_secs(2));
        assert_eq!(g.buckets.len(), 1);
    }
}
