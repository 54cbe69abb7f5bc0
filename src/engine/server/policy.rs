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
//!
//! A third moment is the running test: [`RunningJudge`], made by
//! [`Policy::running_judge`] when the data starts, is asked at each check with the test
//! time and the data moved so far, and says when the server must end the test itself
//! (`--server-max-duration` plus [`MAX_DURATION_GRACE`] whatever the client does, no
//! data for `--test-idle-timeout`, `--server-bitrate-limit` from the first second).
//! [`SourceSlots`] counts the tests each source runs (`--max-tests-per-source`: an IPv4
//! address, or an IPv6 /64, which one host or one subscriber usually holds whole).

use crate::spec::{EndCondition, Protocol, TestSpec};
use crate::stats::BitrateLimit;
use crate::wire::ErrCode;
use ipnet::IpNet;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
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
    /// `--max-tests-per-source N`: tests one source (IPv4 address, IPv6 /64) may run at
    /// once (default [`Policy::default_per_source`]).
    pub max_tests_per_source: usize,
    /// `--test-idle-timeout SEC`: a running test that moves no data for this long is
    /// ended (0 = never).
    pub test_idle_s: u64,
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
            max_tests_per_source: 1,
            test_idle_s: DEFAULT_TEST_IDLE_S,
            conn_rate: None,
            allow: Vec::new(),
            deny: Vec::new(),
        }
    }
}

/// The largest block a server sends in when it paces itself for
/// `--server-bitrate-limit` (iperf3's TCP block, which it keeps for paced tests).
pub const PACED_TCP_BLOCK: usize = 128 * 1024;
/// The smallest block a server paces itself in (a very low `--server-bitrate-limit`).
const MIN_OWN_BLOCK: usize = 64;
/// `--test-idle-timeout`'s default: a test that moves no data for this long ends.
pub const DEFAULT_TEST_IDLE_S: u64 = 10;
/// How long after `--server-max-duration` the server ends a test its client has not
/// ended (a client's `TEST_END` comes a little after its `-t`: its last interval, the
/// control round trip).
pub const MAX_DURATION_GRACE: Duration = Duration::from_secs(2);
/// Without `--server-max-duration`: how long beyond `-t` + `-O` a running test may go
/// before it is declared stuck (iperf3's 40 s).
pub const TEST_GRACE: Duration = Duration::from_secs(40);

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
    /// The source already ran `--max-tests-per-source` tests.
    Source,
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
    pub const ALL: [Reason; 10] = [
        Reason::Address,
        Reason::Rate,
        Reason::Auth,
        Reason::Busy,
        Reason::Source,
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
            Reason::Source => "source",
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

    /// `--max-tests-per-source`'s default for `max_tests` slots: all but one, so that
    /// one source can never hold every slot (one when there is only one).
    pub fn default_per_source(max_tests: usize) -> usize {
        max_tests.saturating_sub(1).max(1)
    }

    /// The rate this server sends at, per stream, when the client asked for none (`-b 0`
    /// or TCP without `-b`) and `--server-bitrate-limit` is set: the limit shared by
    /// all the test's streams. `None` when the client asked for a rate (checked against
    /// the limit when the parameters arrived) or this server sends nothing. The client's
    /// own sending cannot be paced from here: [`RunningJudge`] ends it when it is over.
    ///
    /// A paced sender sends whole blocks, the first at once, so each stream is up to a
    /// block ahead of its rate: a TCP test's block is cut to a tenth of a second of the
    /// stream's rate (at least 64 bytes, at most iperf3's paced 128 KiB), so that the
    /// server's own pacing stays within [`RunningJudge`]'s slack whatever `-P` is (an
    /// unpaced netmeter client asks for 1 MiB blocks: four streams of them would be
    /// 32 Mbit in the first second under a 1 Mbit/s limit). A UDP test keeps its
    /// datagram size.
    pub fn own_side(&self, spec: &TestSpec) -> Option<TestSpec> {
        let (limit, _) = self.bitrate_limit?;
        let server_sends = (0..spec.total_streams()).any(|i| !spec.client_sends(i));
        if spec.rate_bps != 0 || !server_sends {
            return None;
        }
        let mut own = spec.clone();
        own.rate_bps = (limit / u64::from(spec.total_streams().max(1))).max(1);
        if spec.protocol == Protocol::Tcp {
            let tenth = usize::try_from(own.rate_bps / 80).unwrap_or(usize::MAX);
            own.block_len = spec
                .block_len
                .min(PACED_TCP_BLOCK)
                .min(tenth.max(MIN_OWN_BLOCK));
        }
        Some(own)
    }

    /// The judge of a test that starts running now, with its limits.
    pub fn running_judge(&self, spec: &TestSpec) -> RunningJudge {
        let own = match spec.end {
            EndCondition::Time(t) if !spec.until_interrupted() => {
                Some(t + spec.omit_s.max(0.0) + TEST_GRACE.as_secs_f64())
            }
            _ => None,
        };
        let cap = self
            .max_duration_s
            .map(|m| m as f64 + MAX_DURATION_GRACE.as_secs_f64());
        let deadline_s = match (own, cap) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let rate = self.bitrate_limit.map(|(bps, window_s)| {
            // A paced sender is up to one block ahead per stream; at most one second
            // at the limit (but one block) so a client cannot buy a burst with -P.
            let block = spec.block_len.max(1) as u64;
            let slack = (block * u64::from(spec.total_streams().max(1))).min((bps / 8).max(block));
            (BitrateLimit::new(bps, window_s, slack), 1.0, bps)
        });
        RunningJudge {
            deadline_s,
            capped: cap.is_some() && deadline_s == cap,
            max_duration_s: self.max_duration_s,
            idle_s: (self.test_idle_s > 0).then_some(self.test_idle_s as f64),
            last_progress: (0, 0.0),
            rate,
        }
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

/// The source a test is counted against: an IPv4 address (a v4-mapped IPv6 address is
/// one), or an IPv6 address's /64 (one host usually holds a whole /64 and can pick any
/// address in it).
pub fn source_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        },
        v4 => v4,
    }
}

/// A source as the log names it: `2001:db8::/64`, or the IPv4 address.
fn source_text(src: IpAddr) -> String {
    match src {
        IpAddr::V6(_) => format!("{src}/64"),
        v4 => v4.to_string(),
    }
}

/// The tests each source runs (`--max-tests-per-source`). Only sources with a running
/// test have an entry, so the table holds at most `--max-tests` entries.
#[derive(Debug, Default)]
pub struct SourceSlots {
    running: HashMap<IpAddr, usize>,
}

impl SourceSlots {
    /// Take a slot for `ip` when its source runs fewer than `limit` tests: the source to
    /// give it back to ([`SourceSlots::give_back`]) when the test ends.
    pub fn take(&mut self, ip: IpAddr, limit: usize) -> Result<IpAddr, Refusal> {
        let src = source_of(ip);
        let n = self.running.entry(src).or_insert(0);
        if *n >= limit {
            let message = format!(
                "{} already runs {n} test(s) (--max-tests-per-source {limit})",
                source_text(src)
            );
            if *n == 0 {
                self.running.remove(&src);
            }
            return Err(Refusal {
                reason: Reason::Source,
                answer: Answer::Busy,
                message,
            });
        }
        *n += 1;
        Ok(src)
    }

    /// A test of `src` (as [`SourceSlots::take`] returned it) ended.
    pub fn give_back(&mut self, src: IpAddr) {
        if let Some(n) = self.running.get_mut(&src) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.running.remove(&src);
            }
        }
    }
}

/// Why the server ends a running test itself: the iperf3 code its client is sent
/// (and prints) and the server's sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stop {
    pub code: ErrCode,
    pub message: String,
}

/// The limits a running test is held to, judged at each check of the running test
/// with the test time (`now_s`, seconds since `TEST_RUNNING`) and the data moved so far.
#[derive(Debug, Clone)]
pub struct RunningJudge {
    /// Test time by which the test must be over.
    deadline_s: Option<f64>,
    /// Whether that deadline is `--server-max-duration`'s (else the stuck-test one).
    capped: bool,
    max_duration_s: Option<u64>,
    idle_s: Option<f64>,
    /// Progress at the last change, and when (test seconds).
    last_progress: (u64, f64),
    /// The rate judge, when it next samples (test seconds), and the limit.
    rate: Option<(BitrateLimit, f64, u64)>,
}

impl RunningJudge {
    /// The same limits without `--test-idle-timeout`: for a test whose silence is by
    /// design (this server's senders stop at the end of its `-F` file).
    pub fn without_idle_check(mut self) -> RunningJudge {
        self.idle_s = None;
        self
    }

    /// Judge the test at `now_s`: `progress` counts what it moved so far (data bytes both
    /// ways, plus the connections a `--connect-only` test had answered), `bytes` the
    /// data bytes alone (for the rate). `Some` when the server must end the test now.
    pub fn judge(&mut self, now_s: f64, progress: u64, bytes: u64) -> Option<Stop> {
        if let Some(d) = self.deadline_s
            && now_s > d
        {
            let message = match self.max_duration_s {
                Some(max) if self.capped => format!(
                    "the client had not ended its test {} s after this server's limit of {max} s (--server-max-duration)",
                    MAX_DURATION_GRACE.as_secs()
                ),
                _ => format!(
                    "the client had not ended its test {} s after its -t and -O",
                    TEST_GRACE.as_secs()
                ),
            };
            return Some(Stop {
                code: ErrCode::ServerTestDurationExpired,
                message,
            });
        }
        if let Some((judge, next_s, limit)) = self.rate.as_mut()
            && now_s >= *next_s
        {
            *next_s = now_s.floor() + 1.0;
            if let Some(bps) = judge.on_sample(now_s, bytes) {
                return Some(Stop {
                    code: ErrCode::TotalRate,
                    message: format!(
                        "the test's total rate of {bps} bit/s exceeded this server's limit of {limit} bit/s (--server-bitrate-limit)"
                    ),
                });
            }
        }
        if progress != self.last_progress.0 {
            self.last_progress = (progress, now_s);
        } else if let Some(idle) = self.idle_s
            && now_s - self.last_progress.1 > idle
        {
            return Some(Stop {
                code: ErrCode::NoMsg,
                message: format!(
                    "the test moved no data for {idle} s (--test-idle-timeout {idle})"
                ),
            });
        }
        None
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
    use crate::clock::{Clock, ManualClock};
    use crate::spec::Direction;

    #[test]
    fn a_refunded_token_can_be_taken_again_but_never_above_the_burst() {
        let rate = ConnRate::parse("2/min").unwrap();
        let mut g = RateGate::new(rate);
        let now = ManualClock::at_unix(1_700_000_000).now();
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
        let t0 = ManualClock::at_unix(1_700_000_000).now();
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
        let t0 = ManualClock::at_unix(1_700_000_000).now();
        for i in 0..GATE_PRUNE_AT as u32 {
            let _ = g.admit(IpAddr::from(i.to_be_bytes()), t0);
        }
        assert_eq!(g.buckets.len(), GATE_PRUNE_AT);
        let _ = g.admit("10.0.0.1".parse().unwrap(), t0 + Duration::from_secs(2));
        assert_eq!(g.buckets.len(), 1);
    }

    fn timed(t: f64, omit_s: f64) -> TestSpec {
        TestSpec {
            end: EndCondition::Time(t),
            omit_s,
            ..Default::default()
        }
    }

    #[test]
    fn a_running_test_ends_at_the_max_duration_plus_grace_whatever_the_client_does() {
        let p = Policy {
            max_duration_s: Some(2),
            ..Default::default()
        };
        let mut j = p.running_judge(&timed(2.0, 0.0));
        // Data keeps moving: only the clock ends it, 2 s after the limit.
        assert_eq!(j.judge(3.9, 1, 1), None);
        assert_eq!(j.judge(4.0, 2, 2), None);
        let stop = j.judge(4.01, 3, 3).unwrap();
        assert_eq!(stop.code, ErrCode::ServerTestDurationExpired);
        assert!(
            stop.message
                .contains("limit of 2 s (--server-max-duration)"),
            "{}",
            stop.message
        );
        // Without the limit, iperf3's -t + -O + 40 s.
        let mut j = Policy::default().running_judge(&timed(10.0, 2.0));
        assert_eq!(j.judge(51.9, 1, 1), None);
        let stop = j.judge(52.1, 2, 2).unwrap();
        assert_eq!(stop.code, ErrCode::ServerTestDurationExpired);
        assert!(
            stop.message.contains("40 s after its -t"),
            "{}",
            stop.message
        );
        // -t 0 and byte tests have no deadline of their own (the idle check remains).
        let open = Policy {
            test_idle_s: 0,
            ..Default::default()
        };
        let mut j = open.running_judge(&timed(0.0, 0.0));
        assert_eq!(j.judge(100_000.0, 1, 1), None);
        let bytes = TestSpec {
            end: EndCondition::Bytes(1 << 20),
            ..Default::default()
        };
        assert_eq!(open.running_judge(&bytes).judge(100_000.0, 1, 1), None);
    }

    #[test]
    fn a_judge_without_the_idle_check_lets_a_silent_test_run_to_its_deadline() {
        let p = Policy {
            test_idle_s: 3,
            ..Default::default()
        };
        let mut j = p.running_judge(&timed(20.0, 0.0)).without_idle_check();
        assert!(j.judge(0.5, 1000, 1000).is_none());
        for t in 1..=20 {
            assert!(
                j.judge(f64::from(t), 1000, 1000).is_none(),
                "stopped at {t} s"
            );
        }
    }

    #[test]
    fn a_test_that_moves_nothing_for_the_idle_timeout_ends() {
        let p = Policy {
            test_idle_s: 3,
            ..Default::default()
        };
        let mut j = p.running_judge(&timed(20.0, 0.0));
        // Nothing from the start.
        assert_eq!(j.judge(2.9, 0, 0), None);
        let stop = j.judge(3.1, 0, 0).unwrap();
        assert_eq!(stop.code, ErrCode::NoMsg);
        assert!(
            stop.message.contains("--test-idle-timeout 3"),
            "{}",
            stop.message
        );
        // Progress resets the clock; a stall later ends it.
        let mut j = p.running_judge(&timed(20.0, 0.0));
        assert_eq!(j.judge(2.0, 10, 10), None);
        assert_eq!(j.judge(4.9, 10, 10), None);
        assert_eq!(j.judge(5.1, 10, 10).map(|s| s.code), Some(ErrCode::NoMsg));
        // 0: never.
        let mut j = Policy {
            test_idle_s: 0,
            ..Default::default()
        }
        .running_judge(&timed(20.0, 0.0));
        assert_eq!(j.judge(19.0, 0, 0), None);
    }

    #[test]
    fn the_bitrate_limit_ends_a_test_at_its_first_second_over() {
        let p = Policy {
            bitrate_limit: Some((1_000_000, 5.0)),
            test_idle_s: 0,
            ..Default::default()
        };
        // -t 4, 40 Mbit/s: ended at the first sample, before any 5 s window is full.
        let mut j = p.running_judge(&timed(4.0, 0.0));
        assert_eq!(j.judge(0.5, 2_500_000, 2_500_000), None, "not sampled yet");
        let stop = j.judge(1.02, 5_100_000, 5_100_000).unwrap();
        assert_eq!(stop.code, ErrCode::TotalRate);
        assert!(
            stop.message.contains("--server-bitrate-limit"),
            "{}",
            stop.message
        );
        // A paced client at the limit, one 128 KiB block ahead, runs to its end.
        let spec = TestSpec {
            rate_bps: 1_000_000,
            block_len: 128 * 1024,
            ..timed(4.0, 0.0)
        };
        let mut j = p.running_judge(&spec);
        for s in 1..=5 {
            let sent = 128 * 1024 + 125_000 * (s - 1);
            assert_eq!(j.judge(s as f64, sent, sent), None, "second {s}");
        }
    }

    #[test]
    fn an_unpaced_test_gets_the_servers_share_of_the_bitrate_limit() {
        let p = Policy {
            bitrate_limit: Some((8_000_000, 5.0)),
            ..Default::default()
        };
        let spec = |direction, rate_bps| TestSpec {
            direction,
            rate_bps,
            parallel: 2,
            block_len: 1 << 20,
            ..timed(2.0, 0.0)
        };
        let own = |s: TestSpec| p.own_side(&s).map(|o| (o.rate_bps, o.block_len));
        // 4 Mbit/s a stream, in blocks of a tenth of a second of it.
        assert_eq!(own(spec(Direction::Reverse, 0)), Some((4_000_000, 50_000)));
        // --bidir -P 2 is four streams, two of them the server's.
        assert_eq!(own(spec(Direction::Bidir, 0)), Some((2_000_000, 25_000)));
        // Fast: iperf3's 128 KiB at most; very slow: 64 bytes at least.
        let fast = Policy {
            bitrate_limit: Some((10_000_000_000, 5.0)),
            ..Default::default()
        };
        assert_eq!(
            fast.own_side(&spec(Direction::Reverse, 0))
                .map(|o| o.block_len),
            Some(PACED_TCP_BLOCK)
        );
        let slow = Policy {
            bitrate_limit: Some((1000, 5.0)),
            ..Default::default()
        };
        assert_eq!(
            slow.own_side(&spec(Direction::Reverse, 0))
                .map(|o| o.block_len),
            Some(MIN_OWN_BLOCK)
        );
        // A smaller block stays; UDP keeps its datagram size.
        let small = TestSpec {
            block_len: 1000,
            ..spec(Direction::Reverse, 0)
        };
        assert_eq!(own(small).map(|o| o.1), Some(1000));
        let udp = TestSpec {
            protocol: Protocol::Udp,
            block_len: 60_000,
            ..spec(Direction::Reverse, 0)
        };
        assert_eq!(own(udp).map(|o| o.1), Some(60_000));
        // The server sends nothing in an upload; an asked-for rate was checked already.
        assert_eq!(own(spec(Direction::Upload, 0)), None);
        assert_eq!(own(spec(Direction::Reverse, 1_000_000)), None);
        assert!(
            Policy::default()
                .own_side(&spec(Direction::Reverse, 0))
                .is_none()
        );
    }

    /// The server's own pacing (blocks sent whole, the first of each stream at once)
    /// stays within the judge's slack, whatever the limit and `-P`.
    #[test]
    fn the_servers_own_pacing_never_trips_its_bitrate_judge() {
        for limit in [64_000, 1_000_000, 2_000_000, 100_000_000, 10_000_000_000] {
            for parallel in [1, 2, 4, 16, 128] {
                let p = Policy {
                    bitrate_limit: Some((limit, 5.0)),
                    test_idle_s: 0,
                    ..Default::default()
                };
                let asked = TestSpec {
                    direction: Direction::Reverse,
                    parallel,
                    block_len: 1 << 20,
                    ..timed(10.0, 0.0)
                };
                let spec = p.own_side(&asked).unwrap();
                let mut j = p.running_judge(&spec);
                let block = spec.block_len as u64;
                let per_s = spec.rate_bps as f64 / 8.0;
                for tenth in 1..=100 {
                    let t = tenth as f64 / 10.0;
                    // Each stream has sent every block due by t, plus the next one.
                    let blocks = (t * per_s / block as f64).floor() as u64 + 1;
                    let sent = blocks * block * u64::from(parallel);
                    assert_eq!(
                        j.judge(t, sent, sent),
                        None,
                        "limit {limit}, -P {parallel}, block {block}, t {t}"
                    );
                }
            }
        }
    }

    #[test]
    fn sources_are_addresses_for_ipv4_and_slash_64s_for_ipv6() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(source_of(ip("192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(source_of(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(source_of(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(
            source_of(ip("2001:db8:1:2:ffff:ffff:ffff:ffff")),
            source_of(ip("2001:db8:1:2::5"))
        );
        assert_ne!(
            source_of(ip("2001:db8:1:3::1")),
            source_of(ip("2001:db8:1:2::1"))
        );
    }

    #[test]
    fn source_slots_cap_each_source_and_come_back() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let mut slots = SourceSlots::default();
        let a = slots.take(ip("127.0.0.1"), 1).unwrap();
        let r = slots.take(ip("127.0.0.1"), 1).unwrap_err();
        assert_eq!((r.reason, r.answer), (Reason::Source, Answer::Busy));
        assert!(
            r.message
                .contains("127.0.0.1 already runs 1 test(s) (--max-tests-per-source 1)"),
            "{}",
            r.message
        );
        // Another source is not held up; another address of the same /64 is.
        assert!(slots.take(ip("127.0.0.2"), 1).is_ok());
        let six = slots.take(ip("2001:db8::1"), 1).unwrap();
        let r = slots.take(ip("2001:db8::2"), 1).unwrap_err();
        assert!(
            r.message.starts_with("2001:db8::/64 already"),
            "{}",
            r.message
        );
        slots.give_back(a);
        slots.give_back(six);
        assert!(slots.take(ip("127.0.0.1"), 1).is_ok());
        assert!(slots.take(ip("2001:db8::2"), 1).is_ok());
        // Only sources with a running test are kept.
        assert_eq!(slots.running.len(), 3);
        assert_eq!(Policy::default_per_source(1), 1);
        assert_eq!(Policy::default_per_source(2), 1);
        assert_eq!(Policy::default_per_source(16), 15);
    }
}
