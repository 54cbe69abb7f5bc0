//! `--find-max-rate`: runs short UDP tests at the rates `search::RateSearch` picks and
//! reports each step and the highest rate whose loss stayed within the target.

use super::client::{self, ClientConfig};
use super::output::{Mode, Sink};
use super::progress::{self, Progress};
use super::{Stopped, TestError};
use crate::report::Report;
use crate::report::observe::Quiet;
use crate::search::{Figures, Outcome, RateSearch, Trial};
use crate::units::{Format, format_rate};
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
    verdict: String,
    /// One-way delay growth over the trial, ms (netmeter servers only).
    #[serde(skip_serializing_if = "Option::is_none")]
    owd_growth_ms: Option<f64>,
    /// How far the received rate fell short of the sent one, percent.
    received_short_percent: f64,
    /// The furthest a sender fell behind its schedule, ms (netmeter senders).
    #[serde(skip_serializing_if = "Option::is_none")]
    sender_lag_ms: Option<f64>,
}

#[derive(Serialize)]
struct SearchJson {
    loss_target_percent: f64,
    trial_seconds: f64,
    streams: u32,
    steps: Vec<StepJson>,
    /// Trials measured again, not judged: their queue was the sender's own lag's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    repeated_steps: Vec<StepJson>,
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
        owd_growth_ms: t.owd_growth_ms,
        sender_lag_ms: t.sender_lag_ms,
        received_short_percent: if t.sent_bps > 0.0 {
            (1.0 - t.received_bps / t.sent_bps) * 100.0
        } else {
            100.0
        },
    }
}

/// The judge's figures from one trial's report.
pub fn figures(report: &Report, rate: u64, streams: u32, seconds: f64) -> Figures {
    let e = &report.end;
    let tt = e.netmeter.trip_times.as_ref();
    let growth = tt
        .into_iter()
        .flat_map(|t| [&t.client_to_server, &t.server_to_client])
        .filter_map(|o| o.as_ref().and_then(|o| o.growth_ms))
        .fold(None, |a: Option<f64>, g| Some(a.map_or(g, |a| a.max(g))));
    Figures {
        offered_bps: rate,
        streams,
        seconds,
        sent_bps: e.sum_sent.as_ref().map_or(0.0, |s| s.bits_per_second),
        received_bps: e.sum_received.as_ref().map_or(0.0, |s| s.bits_per_second),
        lost_percent: e
            .sum
            .as_ref()
            .and_then(|s| s.udp_recv)
            .map_or(100.0, |u| u.lost_percent),
        owd_growth_ms: growth,
        rtt_ms: report.start.netmeter.clock.map(|c| c.rtt_ns as f64 / 1e6),
        sender_lag_ms: [
            e.netmeter.local_pacing_lag_ms,
            e.netmeter.remote_pacing_lag_ms,
        ]
        .into_iter()
        .flatten()
        .reduce(f64::max),
    }
}

fn say(sink: &Sink, s: &str) {
    if let Ok(mut w) = sink.lock() {
        let _ = w.write_all(s.as_bytes());
        let _ = w.flush();
    }
}

/// Run the search. `start_bps` is the first rate tried, per stream.
pub fn run(
    cfg: &ClientConfig,
    loss_target: f64,
    start_bps: u64,
    sink: Sink,
    progress: bool,
) -> Result<(), TestError> {
    let mut search = RateSearch::new(start_bps, loss_target);
    let streams = cfg.spec.parallel;
    let secs = match cfg.spec.end {
        crate::spec::EndCondition::Time(t) => t,
        _ => {
            return Err(TestError::Usage(
                "--find-max-rate runs timed trials; use -t, not -n or -k",
            ));
        }
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
    // Ctrl-C ends the search where it is; the best rate so far is still reported.
    let mut interrupted = false;
    // Against a netmeter server every trial measures one-way delay, whose growth shows
    // a queue building up. Whether the server is one shows in the first trial's
    // report; that trial is then run again with the measurement.
    let mut owd = false;
    while let Some(rate) = search.next_rate() {
        let mut trial = cfg.clone();
        trial.spec.rate_bps = rate;
        trial.spec.trip_times = owd;
        trial.mode = Mode::Json;
        trial.interval_s = 0.0;
        // The trial's figures come back in its report; nothing is printed but, on a
        // terminal, a status line while it runs (fed by intervals only it sees).
        let run = if progress {
            trial.interval_s = progress::TICK_S;
            let label = format!(
                "step {:>2}: offered {}/stream",
                search.steps.len() + 1,
                format_rate(rate as f64, fmt).trim()
            );
            client::run(&trial, &mut Progress::new(Quiet, Some(label)))
        } else {
            client::run(&trial, &mut Quiet)
        };
        let report = match run {
            Ok(r) => r,
            Err(e) if matches!(e.stopped(), Some(Stopped::ClientInterrupted(_))) => {
                interrupted = true;
                break;
            }
            Err(e) => return Err(e),
        };
        if !owd && cfg.extensions && report.start.netmeter.peer == "netmeter" {
            owd = true;
            std::thread::sleep(Duration::from_millis(300));
            continue;
        }
        let f = figures(&report, rate, streams, secs);
        let t = Trial::of(&f, search.judge(&f));
        if search.should_repeat(&t, secs) {
            if text {
                say(&sink, &repeat_line(search.steps.len() + 1, &t, fmt));
            }
            search.record_repeated(t);
        } else {
            search.record(t);
            if text {
                say(&sink, &step_line(search.steps.len(), &t, fmt));
            }
        }
        // Let the server finish the previous test before the next one connects.
        std::thread::sleep(Duration::from_millis(300));
        if crate::sock::stop_signal().is_some() {
            interrupted = true;
            break;
        }
    }
    let outcome = if interrupted {
        search.finish_interrupted()
    } else {
        search.outcome()
    };
    let best = match outcome {
        Outcome::Found(b) => Some(b),
        Outcome::Stopped(b) => b,
        Outcome::NothingPassed => None,
    };
    let stopped = matches!(outcome, Outcome::Stopped(_));
    let summary = Summary {
        loss_target,
        secs,
        streams,
        stopped,
    };
    print_outcome(&sink, text, &summary, &search, best.as_ref(), fmt)?;
    if interrupted {
        return Err(Stopped::client_interrupted().into());
    }
    if best.is_none() {
        return Err(TestError::NoRatePassed { loss_target });
    }
    Ok(())
}

/// One trial's text line.
fn step_line(n: usize, t: &Trial, fmt: Format) -> String {
    format!(
        "step {:>2}: offered {}/stream  sent {}  received {}  loss {:.3}%{}  {}\n",
        n,
        format_rate(t.offered_bps as f64, fmt).trim(),
        format_rate(t.sent_bps, fmt).trim(),
        format_rate(t.received_bps, fmt).trim(),
        t.lost_percent,
        t.owd_growth_ms
            .map_or(String::new(), |g| format!("  delay growth {g:.1} ms")),
        if t.verdict.pass() {
            "pass".to_string()
        } else {
            format!("FAIL: {}", t.verdict.reason())
        }
    )
}

/// A trial measured again because the sender made its queue.
fn repeat_line(n: usize, t: &Trial, fmt: Format) -> String {
    format!(
        "step {:>2}: offered {}/stream  {}, but the sender fell {:.1} ms behind its schedule (this host stalled it): measuring again\n",
        n,
        format_rate(t.offered_bps as f64, fmt).trim(),
        t.verdict.reason(),
        t.sender_lag_ms.unwrap_or(0.0),
    )
}

/// What the search was, for its closing lines or JSON document.
struct Summary {
    loss_target: f64,
    secs: f64,
    streams: u32,
    stopped: bool,
}

/// The search's result: text lines, or the JSON document with every step.
fn print_outcome(
    sink: &Sink,
    text: bool,
    s: &Summary,
    search: &RateSearch,
    best: Option<&Trial>,
    fmt: Format,
) -> Result<(), TestError> {
    let Summary {
        loss_target,
        secs,
        streams,
        stopped,
    } = *s;
    if text {
        if stopped {
            say(
                sink,
                "Search interrupted: the result is the best rate so far.\n",
            );
        }
        match best {
            Some(b) => say(
                sink,
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
                sink,
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
                repeated_steps: search.repeated.iter().map(step_json).collect(),
                result: best.map(step_json),
                stopped,
            }
        });
        say(sink, &format!("{}\n", serde_json::to_string_pretty(&doc)?));
    }
    Ok(())
}
