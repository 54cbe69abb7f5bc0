//! Each host's clock against the controller's, judged before a scenario starts (pure).
//!
//! A flow from a host starts when the host's own wall clock reaches the scenario's
//! start instant (`--txstart-time`), which the controller computed on its clock. A host
//! whose clock is off by `d` starts its flows `d` early or late, and its report cannot
//! tell (it records the start on the same wrong clock), so the start spread a scenario
//! reports is only as good as the hosts' clocks. Before the start the controller
//! measures each host's offset with netmeter's clock probes (`clocksync`, the
//! `--trip-times` estimate: the best of 8 probes, ± half its round trip) and applies
//! this rule:
//!
//! **A host that starts a flow may be off by at most the limit: the bound on its
//! offset (`|offset| + uncertainty`) must not exceed `--clock-tolerance` (default
//! 100 ms) nor the `--lead`** (a host ahead by more than the lead would find the start
//! instant already past when its test is set up). Hosts that are only targets start
//! nothing, and a flow's one-way delays are corrected by the estimate its own test
//! makes, so their offsets are measured and recorded but not judged. A host that could
//! not be reached is not judged either: its flows will fail with the reason. A host
//! whose server is iperf3 has no clock exchange to measure: its clock is *not checked*
//! ([`HostClock::not_checked`], a field and a sentence, not an error), and as an
//! iperf3 server runs no third-party tests it can only be a target, whose clock
//! nothing depends on.

use crate::clocksync::ClockEstimate;
use serde::Serialize;

/// `--clock-tolerance`'s default, seconds.
pub const DEFAULT_TOLERANCE_S: f64 = 0.1;

/// One host's clock as the controller measured it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostClock {
    /// The host's name (`[hosts.NAME]`).
    pub name: String,
    pub address: String,
    /// Whether a flow runs from this host (its clock starts that flow).
    pub starts_flows: bool,
    /// The host's clock less the controller's, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_offset_s: Option<f64>,
    /// The most the host's clock can be off: `|offset| + uncertainty`, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_offset_bound_s: Option<f64>,
    /// Why the offset could not be measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_error: Option<String>,
    /// Why the offset was not measured although the host answered (its server is
    /// iperf3, which has no clock exchange): a note, not an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_not_checked: Option<String>,
}

/// The note of a host whose server is iperf3.
pub const IPERF3_NOT_CHECKED: &str =
    "its server is iperf3, which has no netmeter clock exchange: its clock is not checked";

impl HostClock {
    /// A host measured: `est` is its server's estimate of host − controller.
    pub fn measured(name: &str, address: &str, starts_flows: bool, est: &ClockEstimate) -> Self {
        let offset = est.offset_ns as f64 / 1e9;
        HostClock {
            name: name.into(),
            address: address.into(),
            starts_flows,
            clock_offset_s: Some(offset),
            clock_offset_bound_s: Some(offset.abs() + est.uncertainty_ns.max(0) as f64 / 1e9),
            clock_error: None,
            clock_not_checked: None,
        }
    }

    /// A host that answered but has no clock exchange (an iperf3 server): not
    /// measured, not judged, and not an error; `why` says so.
    pub fn not_checked(name: &str, address: &str, starts_flows: bool, why: &str) -> Self {
        HostClock {
            name: name.into(),
            address: address.into(),
            starts_flows,
            clock_offset_s: None,
            clock_offset_bound_s: None,
            clock_error: None,
            clock_not_checked: Some(why.into()),
        }
    }

    /// A host whose offset could not be measured, and why.
    pub fn failed(name: &str, address: &str, starts_flows: bool, why: String) -> Self {
        HostClock {
            name: name.into(),
            address: address.into(),
            starts_flows,
            clock_offset_s: None,
            clock_offset_bound_s: None,
            clock_error: Some(why),
            clock_not_checked: None,
        }
    }
}

/// The most a starting host's clock may be off, seconds: the smaller of the tolerance
/// and the lead.
pub fn limit_s(tolerance_s: f64, lead_s: f64) -> f64 {
    tolerance_s.min(lead_s)
}

/// The hosts that start flows with a clock off by more than `limit_s`.
pub fn beyond(hosts: &[HostClock], limit_s: f64) -> Vec<&HostClock> {
    hosts
        .iter()
        .filter(|h| h.starts_flows && h.clock_offset_bound_s.is_some_and(|b| b > limit_s))
        .collect()
}

/// The one sentence refusing the run, naming the first host beyond the limit and its
/// offset, or `None` when every starting host is within it.
pub fn refusal(hosts: &[HostClock], limit_s: f64) -> Option<String> {
    let off = beyond(hosts, limit_s);
    let h = off.first()?;
    let offset = h.clock_offset_s.unwrap_or_default();
    let others = match off.len() {
        1 => String::new(),
        2 => ", as is 1 other host's".into(),
        n => format!(", as are {} other hosts'", n - 1),
    };
    Some(format!(
        "host {}'s clock is {:.3} s {} this controller's (within ± {:.3} s), more than the {:.3} s its flows' start alignment allows (--clock-tolerance, at most --lead){others}; synchronise its clock (NTP, PTP) or give --ignore-clock",
        h.name,
        offset.abs(),
        if offset >= 0.0 { "ahead of" } else { "behind" },
        h.clock_offset_bound_s.unwrap_or_default() - offset.abs(),
        limit_s,
    ))
}

/// One line per host for the text and `--check`: its offset and whether it is within
/// the limit.
pub fn text(hosts: &[HostClock], limit_s: f64) -> String {
    let mut out = format!("Clocks against this controller (limit {limit_s:.3} s):\n");
    let w = hosts.iter().map(|h| h.name.len()).max().unwrap_or(4).max(4);
    for h in hosts {
        let what = match (h.clock_offset_s, h.clock_offset_bound_s, &h.clock_error) {
            (Some(o), Some(b), _) => {
                let verdict = if !h.starts_flows {
                    "a target only, not judged"
                } else if b > limit_s {
                    "beyond the limit"
                } else {
                    "ok"
                };
                format!("{:+.6} s (± {:.6} s)  {verdict}", o, b - o.abs())
            }
            (_, _, Some(e)) => format!("not measured: {e}"),
            _ => match &h.clock_not_checked {
                Some(why) => format!("not checked: {why}"),
                None => "not measured".into(),
            },
        };
        out.push_str(&format!("  {:<w$}  {:<22}  {what}\n", h.name, h.address));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(offset_ms: f64, unc_ms: f64) -> ClockEstimate {
        ClockEstimate {
            offset_ns: (offset_ms * 1e6) as i64,
            uncertainty_ns: (unc_ms * 1e6) as i64,
            rtt_ns: (2.0 * unc_ms * 1e6) as i64,
            probes: 8,
        }
    }

    #[test]
    fn the_bound_is_the_offset_and_its_uncertainty() {
        let h = HostClock::measured("a", "a:5201", true, &est(-30.0, 2.0));
        assert_eq!(h.clock_offset_s, Some(-0.03));
        assert!((h.clock_offset_bound_s.unwrap() - 0.032).abs() < 1e-12);
        let j = serde_json::to_value(&h).unwrap();
        assert_eq!(j["clock_offset_s"], -0.03);
        assert!(j.get("clock_error").is_none());
        let f = HostClock::failed("b", "b:5201", true, "connection refused".into());
        let j = serde_json::to_value(&f).unwrap();
        assert!(j.get("clock_offset_s").is_none());
        assert_eq!(j["clock_error"], "connection refused");
    }

    #[test]
    fn the_limit_is_the_tolerance_but_never_beyond_the_lead() {
        assert_eq!(limit_s(0.1, 3.0), 0.1);
        assert_eq!(limit_s(10.0, 3.0), 3.0);
    }

    #[test]
    fn only_hosts_that_start_flows_beyond_the_limit_refuse_the_run() {
        let hosts = [
            HostClock::measured("near", "n", true, &est(40.0, 5.0)),
            // A target only: its clock starts nothing.
            HostClock::measured("target", "t", false, &est(9_000.0, 1.0)),
            // Not reached: its flows fail with the reason, the clock check stays silent.
            HostClock::failed("down", "d", true, "refused".into()),
        ];
        assert_eq!(refusal(&hosts, 0.1), None);
        // Within the offset alone, beyond once the uncertainty is added.
        assert!(refusal(&hosts, 0.044).is_some());
        assert_eq!(refusal(&hosts, 0.045), None);
        let mut late = hosts.to_vec();
        late.push(HostClock::measured("late", "l", true, &est(-5_000.0, 1.0)));
        late.push(HostClock::measured("early", "e", true, &est(2_000.0, 0.5)));
        let e = refusal(&late, 0.1).unwrap();
        assert!(
            e.starts_with("host late's clock is 5.000 s behind this controller's (within ± 0.001 s), more than the 0.100 s"),
            "{e}"
        );
        assert!(e.contains("--lead), as is 1 other host's;"), "{e}");
        assert!(e.ends_with("or give --ignore-clock"), "{e}");
        assert_eq!(e.lines().count(), 1);
        assert_eq!(
            beyond(&late, 0.1)
                .iter()
                .map(|h| h.name.as_str())
                .collect::<Vec<_>>(),
            ["late", "early"]
        );
        let early = refusal(&late[4..], 0.1).unwrap();
        assert!(early.contains("2.000 s ahead of"), "{early}");
    }

    #[test]
    fn the_text_says_each_hosts_offset_and_verdict() {
        let hosts = [
            HostClock::measured("alice", "10.0.0.1:5201", true, &est(0.25, 0.05)),
            HostClock::measured("bob", "10.0.0.2:5201", false, &est(800.0, 0.05)),
            HostClock::measured("carol", "10.0.0.3:5201", true, &est(800.0, 0.05)),
            HostClock::failed("dave", "10.0.0.4:5201", true, "refused".into()),
        ];
        let t = text(&hosts, 0.1);
        assert!(
            t.starts_with("Clocks against this controller (limit 0.100 s):\n"),
            "{t}"
        );
        assert!(t.contains("+0.000250 s (± 0.000050 s)  ok"), "{t}");
        assert!(t.contains("a target only, not judged"), "{t}");
        assert!(
            t.contains("+0.800000 s (± 0.000050 s)  beyond the limit"),
            "{t}"
        );
        assert!(t.contains("not measured: refused"), "{t}");
    }

    #[test]
    fn an_iperf3_host_is_not_checked_rather_than_an_error() {
        let h = HostClock::not_checked("i3", "10.0.0.9:5201", false, IPERF3_NOT_CHECKED);
        let j = serde_json::to_value(&h).unwrap();
        assert!(j.get("clock_error").is_none(), "{j}");
        assert!(j.get("clock_offset_s").is_none(), "{j}");
        assert_eq!(j["clock_not_checked"], IPERF3_NOT_CHECKED);
        // Nothing to judge: it never refuses a run.
        assert_eq!(refusal(std::slice::from_ref(&h), 0.1), None);
        let t = text(&[h], 0.1);
        assert!(
            t.contains("not checked: its server is iperf3, which has no netmeter clock exchange"),
            "{t}"
        );
        assert!(!t.contains("not measured"), "{t}");
    }
}
