//! Running a scenario: every flow in its own thread, all given one `--txstart-time`
//! (the scenario's start instant plus the flow's `start`), a flow from "local" as a
//! client test in this process (`engine::client`), a flow from a host as a third-party
//! test through that host's netmeter server (`engine::third_party::request`). A flow
//! that cannot run (a host down, a refusal, a failed test) is an outcome with its
//! error; the others run on.

use super::clocks::{HostClock, IPERF3_NOT_CHECKED};
use super::{FlowPlan, Origin, Scenario};
use crate::auth::psk::Psk;
use crate::clock::Clock;
use crate::clocksync::ClockEstimate;
use crate::control::ClientFailure;
use crate::engine::TestError;
use crate::engine::client::{ClientConfig, run_keeping_report};
use crate::engine::third_party::{Controller, request_keeping_partial};
use crate::report::Report;
use crate::report::observe::Quiet;
use crate::wire::ThirdPartyRequest;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Everything a run needs, resolved (`cli::scenario_cmd`).
#[derive(Debug, Clone)]
pub struct RunPlan {
    pub scenario: Scenario,
    /// Per flow: the client test a local flow runs toward its target (`None` for a
    /// flow from a host); its `txstart` is set at the start.
    pub local: Vec<Option<ClientConfig>>,
    /// Per flow: how long its test may take (setup, the test, the results).
    pub waits: Vec<Duration>,
    /// The hosts' key (`psk_file`).
    pub psk: Option<Psk>,
    /// From the moment the flows are handed out to the scenario's start instant: time
    /// for every host to set its test up.
    pub lead: Duration,
    pub connect_timeout: Duration,
    pub clock: Arc<dyn Clock>,
    /// Per host: the test that measures its clock against this controller's (one
    /// `--trip-times` block of 1 KiB toward its server; its setup holds the probes).
    pub probes: Vec<ClientConfig>,
    /// `--clock-tolerance`: the most a host that starts flows may be off, seconds
    /// (never beyond the lead: [`super::clocks::limit_s`]).
    pub clock_tolerance_s: f64,
    /// `--ignore-clock`: run even when a host's clock is beyond the limit.
    pub ignore_clock: bool,
}

impl RunPlan {
    /// The most a host that starts flows may be off, seconds.
    pub fn clock_limit_s(&self) -> f64 {
        super::clocks::limit_s(self.clock_tolerance_s, self.lead.as_secs_f64())
    }

    /// Why the run must not start (a host's clock beyond the limit, without
    /// `--ignore-clock`), as one sentence.
    pub fn clock_refusal(&self, clocks: &[HostClock]) -> Option<String> {
        if self.ignore_clock {
            return None;
        }
        super::clocks::refusal(clocks, self.clock_limit_s())
    }
}

/// One flow's outcome: its report, its error, or both (a test that failed part way).
#[derive(Debug, Clone, Serialize)]
pub struct FlowOutcome {
    pub name: String,
    /// Where its client ran: "local" or a host name.
    pub from: String,
    /// The target host's name and address.
    pub to: String,
    pub address: String,
    /// Seconds after the scenario's start instant.
    pub start_offset_s: f64,
    /// The `--txstart-time` it was given, seconds since the Unix epoch.
    pub txstart: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<Report>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The scenario's start instant: `lead` after wall time `wall` (epoch seconds, to the
/// millisecond that `--txstart-time` carries).
pub fn start_instant(lead: Duration, wall: SystemTime) -> f64 {
    let now = wall.duration_since(UNIX_EPOCH).unwrap_or_default();
    ((now + lead).as_secs_f64() * 1000.0).round() / 1000.0
}

/// What one host's clock probe found.
#[derive(Debug, Clone, PartialEq)]
enum Probe {
    Measured(ClockEstimate),
    /// The host answered as iperf3: no clock exchange to measure.
    Iperf3,
    Failed(String),
}

/// Judge a probe test: its report's clock estimate, an iperf3 server (the probe's
/// `--trip-times` refused because the server answered as iperf3, or a report naming
/// iperf3 its peer), or why there is neither.
fn probe_outcome(report: &Report, r: Result<(), TestError>) -> Probe {
    match (report.start.netmeter.clock, r) {
        (Some(est), _) => Probe::Measured(est),
        (None, r) if answered_as_iperf3(report, &r) => Probe::Iperf3,
        (None, Err(e)) => Probe::Failed(e.to_string()),
        (None, Ok(())) => Probe::Failed("its server sent no clock estimate".into()),
    }
}

/// The control connection reset or closed by the server before the test: what a
/// server still busy with the attempt just dropped may do to the next one.
fn reset_early(e: &TestError) -> bool {
    use crate::engine::ctrl::CtrlError;
    match e {
        TestError::Ctrl(CtrlError::Closed(_)) => true,
        TestError::Ctrl(CtrlError::Io(io, _)) => matches!(
            io.kind(),
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
        ),
        _ => false,
    }
}

/// Whether the server answered as iperf3 does (no netmeter extensions).
fn answered_as_iperf3(report: &Report, r: &Result<(), TestError>) -> bool {
    report.start.netmeter.peer == "iperf3" || matches!(r, Err(TestError::NeedsNetmeter { .. }))
}

/// The server went on without asking for the key: it has none, or it is iperf3.
fn no_key_challenge(r: &Result<(), TestError>) -> bool {
    matches!(r, Err(TestError::Client(ClientFailure::NoPskChallenge)))
}

/// Run a client test; when the server did not ask for the key, run it again without
/// it, and keep that run only if the server turned out to be iperf3 (which has no key
/// exchange); a netmeter server without the key stays the key error it is. The first
/// attempt ends before any data (the challenge comes before the streams), and the
/// server frees the slot it took once it sees the connection closed: a moment of
/// "busy", or (iperf3 3.22, still cleaning up) a reset of the next connection, is
/// that, not a rival test.
fn run_dropping_key_for_iperf3(cfg: &ClientConfig) -> (Report, Result<(), TestError>) {
    let first = run_keeping_report(cfg, &mut Quiet);
    if cfg.psk.is_none() || !no_key_challenge(&first.1) {
        return first;
    }
    let mut plain = cfg.clone();
    plain.psk = None;
    let mut again = run_keeping_report(&plain, &mut Quiet);
    for _ in 0..20 {
        match &again.1 {
            Err(e) if e.is_busy() || reset_early(e) => {
                std::thread::sleep(Duration::from_millis(100));
                again = run_keeping_report(&plain, &mut Quiet);
            }
            _ => break,
        }
    }
    if answered_as_iperf3(&again.0, &again.1) {
        again
    } else {
        first
    }
}

/// Measure every host's clock against this controller's, all hosts at once: each
/// host's [`RunPlan::probes`] test, whose setup sends netmeter's clock probes. A host
/// whose server is iperf3 is [`HostClock::not_checked`].
pub fn probe_clocks(plan: &RunPlan) -> Vec<HostClock> {
    let s = &plan.scenario;
    std::thread::scope(|sc| {
        let running: Vec<_> = plan
            .probes
            .iter()
            .map(|cfg| {
                let mut cfg = cfg.clone();
                if cfg.psk.is_none() {
                    cfg.psk = plan.psk.clone();
                }
                std::thread::Builder::new()
                    .name("nm-clock".into())
                    .spawn_scoped(sc, move || {
                        let (report, r) = run_dropping_key_for_iperf3(&cfg);
                        probe_outcome(&report, r)
                    })
            })
            .collect();
        s.hosts
            .iter()
            .enumerate()
            .zip(running)
            .map(|((i, h), t)| {
                let address = crate::mesh::Host {
                    host: h.host.clone(),
                    port: h.port,
                }
                .to_string();
                let starts = s.flows.iter().any(|f| f.from == Origin::Host(i));
                let r = match t {
                    Ok(t) => t
                        .join()
                        .unwrap_or_else(|_| Probe::Failed("the probe's thread failed".into())),
                    Err(e) => Probe::Failed(format!("cannot start a thread: {e}")),
                };
                match r {
                    Probe::Measured(est) => HostClock::measured(&h.name, &address, starts, &est),
                    Probe::Iperf3 => {
                        HostClock::not_checked(&h.name, &address, starts, IPERF3_NOT_CHECKED)
                    }
                    Probe::Failed(e) => HostClock::failed(&h.name, &address, starts, e),
                }
            })
            .collect()
    })
}

/// Run every flow; the start instant and the outcomes, in the file's order. `clocks`
/// is what [`probe_clocks`] found: a local flow toward a host it saw as iperf3 runs
/// without the key (iperf3 has no key exchange).
pub fn run(plan: &RunPlan, clocks: &[HostClock]) -> (f64, Vec<FlowOutcome>) {
    let epoch = start_instant(plan.lead, plan.clock.wall());
    let plans = plan.scenario.plan(epoch);
    let outcomes = std::thread::scope(|s| {
        let running: Vec<_> = plans
            .iter()
            .map(|p| {
                std::thread::Builder::new()
                    .name("nm-flow".into())
                    .spawn_scoped(s, move || one_flow(plan, clocks, p))
            })
            .collect();
        running
            .into_iter()
            .zip(&plans)
            .map(|(h, p)| match h {
                Ok(h) => h.join().unwrap_or_else(|_| {
                    outcome(plan, p, None, Some("the flow's thread failed".into()))
                }),
                Err(e) => outcome(plan, p, None, Some(format!("cannot start a thread: {e}"))),
            })
            .collect()
    });
    (epoch, outcomes)
}

fn outcome(
    plan: &RunPlan,
    p: &FlowPlan,
    report: Option<Report>,
    error: Option<String>,
) -> FlowOutcome {
    let s = &plan.scenario;
    let f = &s.flows[p.flow];
    let to = &s.hosts[f.to];
    FlowOutcome {
        name: f.name.clone(),
        from: s.from_name(f).to_string(),
        to: to.name.clone(),
        address: crate::mesh::Host {
            host: to.host.clone(),
            port: to.port,
        }
        .to_string(),
        start_offset_s: f.start_s,
        txstart: p.txstart,
        report,
        error,
    }
}

fn one_flow(plan: &RunPlan, clocks: &[HostClock], p: &FlowPlan) -> FlowOutcome {
    let s = &plan.scenario;
    let f = &s.flows[p.flow];
    let to = &s.hosts[f.to];
    match f.from {
        Origin::Local => {
            let Some(Some(cfg)) = plan.local.get(p.flow) else {
                return outcome(plan, p, None, Some("no client test was prepared".into()));
            };
            let mut cfg = cfg.clone();
            cfg.txstart = Some(p.txstart);
            let iperf3 = clocks
                .iter()
                .any(|c| c.name == to.name && c.clock_not_checked.is_some());
            if cfg.psk.is_none() && !iperf3 {
                cfg.psk = plan.psk.clone();
            }
            let (report, r) = run_keeping_report(&cfg, &mut Quiet);
            let ran = r.is_ok() || !report.intervals.is_empty();
            let error = r.err().map(|e| e.to_string()).or(report.error.clone());
            outcome(plan, p, ran.then_some(report), error)
        }
        Origin::Host(h) => {
            let Some(psk) = plan.psk.clone() else {
                return outcome(plan, p, None, Some("no psk_file for the hosts".into()));
            };
            let ctl = Controller {
                host: s.hosts[h].host.clone(),
                port: s.hosts[h].port,
                psk,
                connect_timeout: plan.connect_timeout,
                wait: plan.waits.get(p.flow).copied().unwrap_or_default()
                    + plan.lead
                    + Duration::from_secs_f64(f.start_s),
                stop_on_signal: true,
                clock: plan.clock.clone(),
            };
            let req = ThirdPartyRequest {
                target: to.host.clone(),
                port: to.port,
                args: p.args.clone(),
            };
            match request_keeping_partial(&ctl, &req) {
                Ok(r) => {
                    let error = r.error.clone();
                    outcome(plan, p, Some(r), error)
                }
                Err(e) => outcome(plan, p, None, Some(e.to_string())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_instant_is_the_lead_after_the_wall_clock_to_the_millisecond() {
        let wall = UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
        assert_eq!(
            start_instant(Duration::from_secs(3), wall),
            1_700_000_003.123
        );
        assert_eq!(start_instant(Duration::ZERO, UNIX_EPOCH), 0.0);
    }

    #[test]
    fn a_probe_is_an_estimate_an_iperf3_server_or_an_error() {
        let mut r = Report::default();
        r.start.netmeter.peer = "iperf3".into();
        // iperf3 ran the test and sent no estimate: not an error.
        assert_eq!(probe_outcome(&r, Ok(())), Probe::Iperf3);
        // A netmeter server that sent no estimate is one.
        r.start.netmeter.peer = "netmeter".into();
        assert!(
            matches!(probe_outcome(&r, Ok(())), Probe::Failed(e) if e.contains("no clock estimate"))
        );
        // The probe's --trip-times refused: the server answered as iperf3.
        let needs = Err(TestError::NeedsNetmeter {
            flag: "--trip-times",
            host: "h".into(),
        });
        assert_eq!(probe_outcome(&r, needs), Probe::Iperf3);
        let refused = Err(TestError::Client(ClientFailure::NoPskChallenge));
        assert!(no_key_challenge(&refused));
        assert!(
            matches!(probe_outcome(&r, refused), Probe::Failed(e) if e.contains("pre-shared key"))
        );
        let est = ClockEstimate {
            offset_ns: 5,
            uncertainty_ns: 1,
            rtt_ns: 2,
            probes: 8,
        };
        r.start.netmeter.clock = Some(est);
        assert_eq!(probe_outcome(&r, Ok(())), Probe::Measured(est));
    }
}
