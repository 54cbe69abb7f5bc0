//! `--find-max-rate`: runs short UDP tests at the rates `search::RateSearch` picks and
//! reports each step and the highest rate whose loss stayed within the target.

use super::client::{self, ClientConfig};
use super::output::{self, Mode, Sink};
use crate::search::{Outcome, RateSearch, Trial};
use crate::units::{Format, format_rate};
use anyhow::{Result, bail};
use serde::Serialize;
use std::io::Write;
use std::time::Duration;

#[derive(Serialize)]
struct StepJson {
    offered_bits_per_second_per_stream: u64,
    sent_bits_per_second: f64,
    received_bits_per_second: f64,
    lost_percent: f64,
    pass: bool,
    /// "pass", or why the trial failed.
    verdict: &'static str,
}

#[derive(Serialize)]
struct SearchJson {
    loss_target_percent: f64,
    trial_seconds: f64,
    streams: u32,
    steps: Vec<StepJson>,
    /// The highest passing trial, if any.
    result: Option<StepJson>,
    /// The search was interrupted: `result` is the best so far.
    stopped: bool,
}

fn step_json(t: &Trial) -> StepJson {
    StepJson {
        offered_bits_per_second_per_stream: t.offered_bps,
        sent_bits_per_second: t.sent_bps,
        received_bits_per_second: t.received_bps,
        lost_percent: t.lost_percent,
        pass: t.pass(),
        verdict: t.verdict.reason(),
    }
}

fn say(sink: &Sink, s: &str) {
    if let Ok(mut w) = sink.lock() {
        let _ = w.write_all(s.as_bytes());
        let _ = w.flush();
    }
}

/// Run the search. `start_bps` is the first rate tried, per stream.
pub fn run(cfg: &ClientConfig, loss_target: f64, start_bps: u64, sink: Sink) -> Result<()> {
    let mut search = RateSearch::new(start_bps, loss_target);
    let streams = cfg.spec.parallel;
    let secs = match cfg.spec.end {
        crate::spec::EndCondition::Time(t) => t,
        _ => bail!("--find-max-rate runs timed trials; use -t, not -n or -k"),
    };
    let text = cfg.mode == Mode::Text;
    let fmt = Format::Auto;
    if text {
        say(
            &sink,
            &format!(
                "Searching for the highest UDP rate with loss <= {loss_target}% ({secs} s trials, {streams} stream(s), {} byte datagrams) against {} port {}\n",
                cfg.spec.block_len, cfg.host, cfg.port
            ),
        );
    }
    while let Some(rate) = search.next_rate() {
        let mut trial = cfg.clone();
        trial.spec.rate_bps = rate;
        trial.mode = Mode::Json;
        trial.interval_s = 0.0;
        let quiet = output::sink(Box::new(std::io::sink()));
        let report = client::run(&trial, quiet)?;
        let e = &report.end;
        let sent = e.sum_sent.as_ref().map_or(0.0, |s| s.bits_per_second);
        let received = e.sum_received.as_ref().map_or(0.0, |s| s.bits_per_second);
        let lost = e
            .sum
            .as_ref()
            .and_then(|s| s.udp_recv)
            .map_or(100.0, |u| u.lost_percent);
        let verdict = search.judge(rate, streams, sent, lost);
        let t = Trial {
            offered_bps: rate,
            sent_bps: sent,
            received_bps: received,
            lost_percent: lost,
            verdict,
        };
        search.record(t);
        if text {
            say(
                &sink,
                &format!(
                    "step {:>2}: offered {}/stream  sent {}  received {}  loss {:.3}%  {}\n",
                    search.steps.len(),
                    format_rate(rate as f64, fmt).trim(),
                    format_rate(sent, fmt).trim(),
                    format_rate(received, fmt).trim(),
                    lost,
                    if verdict.pass() {
                        "pass".to_string()
                    } else {
                        format!("FAIL: {}", verdict.reason())
                    }
                ),
            );
        }
        // Let the server finish the previous test before the next one connects.
        std::thread::sleep(Duration::from_millis(300));
    }
    let outcome = search.outcome();
    let best = match outcome {
        Outcome::Found(b) => Some(b),
        Outcome::Stopped(b) => b,
        Outcome::NothingPassed => None,
    };
    let stopped = matches!(outcome, Outcome::Stopped(_));
    if text {
        if stopped {
            say(
                &sink,
                "Search interrupted: the result is the best rate so far.\n",
            );
        }
        match &best {
            Some(b) => say(
                &sink,
                &format!(
                    "Maximum rate with loss <= {loss_target}%: {} per stream ({} in total), sent {}, received {}, loss {:.3}%\n",
                    format_rate(b.offered_bps as f64, fmt).trim(),
                    format_rate(b.offered_bps as f64 * streams as f64, fmt).trim(),
                    format_rate(b.sent_bps, fmt).trim(),
                    format_rate(b.received_bps, fmt).trim(),
                    b.lost_percent
                ),
            ),
            None => say(
                &sink,
                &format!("No rate tried kept the loss within {loss_target}%.\n"),
            ),
        }
    } else {
        let doc = serde_json::json!({
            "find_max_rate": SearchJson {
                loss_target_percent: loss_target,
                trial_seconds: secs,
                streams,
                steps: search.steps.iter().map(step_json).collect(),
                result: best.as_ref().map(step_json),
                stopped,
            }
        });
        say(&sink, &format!("{}\n", serde_json::to_string_pretty(&doc)?));
    }
    if best.is_none() && !stopped {
        bail!("no rate kept the loss within {loss_target}%");
    }
    Ok(())
}
