//! A live status line on a terminal, for work that prints nothing for a while: a test
//! run with `-i 0` and each `--find-max-rate` trial.
//!
//! [`Progress`] wraps the observer that prints the real output. The engine is run with
//! a short reporting interval ([`TICK_S`]) so that there is something to show; those
//! interval events update the status line (elapsed/total, the current rate, and loss
//! and jitter or RTT where this side measures them) and are not passed on, so the
//! wrapped observer sees the `-i 0` test it was made for. Every other event clears the
//! line, is passed on, and the line comes back; the end summary clears it for good.
//!
//! A renderer, but one that draws on a terminal, so it lives with the engine's other
//! writers ([`super::output`]) rather than in the pure `report`.
//!
//! Drawing is indicatif's, on standard output (where the summary goes), which it skips
//! when standard output is not a terminal or the terminal is dumb (`TERM` unset or
//! `dumb`: no cursor control); [`wanted`] decides whether to wrap at all: a
//! terminal, text output, no interval lines, no `--logfile`, `-J` or `--csv`.

use crate::report::observe::{Event, Observer};
use crate::report::{Interval, SumInterval};
use crate::units::{Format, format_rate};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The engine's reporting interval while a status line is shown, seconds.
pub const TICK_S: f64 = 0.5;

/// Whether to show a status line: text output to a terminal, with no interval lines
/// (`-i 0`) to show progress instead, and not into a `--logfile`.
pub fn wanted(text_output: bool, interval_s: f64, logfile: bool, stdout_is_terminal: bool) -> bool {
    text_output && interval_s == 0.0 && !logfile && stdout_is_terminal
}

/// The status line for one interval. `total_s`: the test's length (`-t` plus `-O`),
/// when it has one; `label` leads (a `--find-max-rate` step).
pub fn status_line(label: Option<&str>, total_s: Option<f64>, iv: &Interval) -> String {
    let mut parts: Vec<String> = label.map(str::to_string).into_iter().collect();
    let elapsed = iv.sum.end;
    parts.push(match total_s {
        Some(t) if t > 0.0 => format!("{elapsed:.1}/{t:.1} s"),
        _ => format!("{elapsed:.1} s"),
    });
    let bidir = iv.sum_bidir_reverse.is_some();
    for s in std::iter::once(&iv.sum).chain(iv.sum_bidir_reverse.as_deref()) {
        parts.push(sum_status(s, bidir));
    }
    // The sender's smoothed RTT, averaged over its streams (TCP_INFO, this side only).
    let rtts: Vec<u64> = iv
        .streams
        .iter()
        .filter(|s| s.sender)
        .filter_map(|s| s.tcp.map(|t| t.rtt))
        .collect();
    if !rtts.is_empty() {
        let mean_us = rtts.iter().sum::<u64>() as f64 / rtts.len() as f64;
        parts.push(format!("rtt {:.2} ms", mean_us / 1000.0));
    }
    if iv.sum.omitted {
        parts.push("(omitted)".into());
    }
    parts.join("  ")
}

fn sum_status(s: &SumInterval, bidir: bool) -> String {
    let way = match (bidir, s.sender) {
        (false, _) => "",
        (true, true) => "sending ",
        (true, false) => "receiving ",
    };
    let mut out = format!(
        "{way}{}",
        format_rate(s.bits_per_second, Format::Auto).trim()
    );
    if let Some(u) = s.udp_recv {
        out.push_str(&format!(
            " loss {:.2}% jitter {:.3} ms",
            u.lost_percent, u.jitter_ms
        ));
    }
    if let Some(r) = s.retransmits {
        out.push_str(&format!(" retr {r}"));
    }
    out
}

/// Wraps the observer that prints the output; see the module comment.
pub struct Progress<O: Observer> {
    inner: O,
    bar: ProgressBar,
    label: Option<String>,
    total_s: Option<f64>,
}

impl<O: Observer> Progress<O> {
    /// Draws on standard output (nothing when it is not a terminal).
    pub fn new(inner: O, label: Option<String>) -> Progress<O> {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stdout());
        // A template without placeholders but the message cannot fail to parse; should
        // it ever, the default spinner style shows the same message.
        if let Ok(style) = ProgressStyle::with_template("{msg}") {
            bar.set_style(style);
        }
        Progress {
            inner,
            bar,
            label,
            total_s: None,
        }
    }
}

impl<O: Observer> Observer for Progress<O> {
    fn on(&mut self, event: Event<'_>) {
        match event {
            Event::Started(start) => {
                let ts = &start.test_start;
                self.total_s = (ts.bytes == 0 && ts.blocks == 0 && ts.duration > 0.0)
                    .then_some(ts.duration + ts.omit);
                let inner = &mut self.inner;
                self.bar.suspend(|| inner.on(event));
            }
            Event::Interval(iv) => {
                let line = status_line(self.label.as_deref(), self.total_s, iv);
                self.bar.set_message(line);
            }
            Event::End(_) | Event::Error(_) | Event::Finished(_) => {
                self.bar.finish_and_clear();
                self.inner.on(event);
            }
            _ => {
                let inner = &mut self.inner;
                self.bar.suspend(|| inner.on(event));
            }
        }
    }
}

impl<O: Observer> Drop for Progress<O> {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{StreamInterval, TcpFigures, UdpRecvFigures};

    #[test]
    fn shown_only_for_quiet_text_on_a_terminal() {
        assert!(wanted(true, 0.0, false, true));
        assert!(
            !wanted(true, 1.0, false, true),
            "interval lines show progress"
        );
        assert!(!wanted(false, 0.0, false, true), "-J, --json-stream, --csv");
        assert!(!wanted(true, 0.0, true, true), "--logfile");
        assert!(!wanted(true, 0.0, false, false), "piped");
    }

    fn tcp_interval() -> Interval {
        let stream = |rtt| StreamInterval {
            sender: true,
            tcp: Some(TcpFigures {
                rtt,
                ..TcpFigures::default()
            }),
            ..StreamInterval::default()
        };
        Interval {
            streams: vec![stream(100), stream(300)],
            sum: SumInterval {
                end: 3.5,
                bits_per_second: 9.43e8,
                retransmits: Some(2),
                sender: true,
                ..SumInterval::default()
            },
            sum_bidir_reverse: None,
            owd_histogram_us: Vec::new(),
            frame_latency_histogram_us: Vec::new(),
        }
    }

    #[test]
    fn tcp_sender_line() {
        assert_eq!(
            status_line(None, Some(10.0), &tcp_interval()),
            "3.5/10.0 s  943 Mbits/sec retr 2  rtt 0.20 ms"
        );
        assert_eq!(
            status_line(Some("step 2"), None, &tcp_interval()),
            "step 2  3.5 s  943 Mbits/sec retr 2  rtt 0.20 ms"
        );
    }

    #[test]
    fn udp_receiver_and_bidir_lines() {
        let mut iv = Interval::default();
        iv.sum.end = 1.0;
        iv.sum.bits_per_second = 1e8;
        iv.sum.udp_recv = Some(UdpRecvFigures {
            jitter_ms: 0.0123,
            lost_percent: 0.5,
            ..UdpRecvFigures::default()
        });
        assert_eq!(
            status_line(None, Some(2.0), &iv),
            "1.0/2.0 s  100 Mbits/sec loss 0.50% jitter 0.012 ms"
        );
        let mut b = tcp_interval();
        b.sum_bidir_reverse = Some(Box::new(SumInterval {
            bits_per_second: 5e8,
            ..SumInterval::default()
        }));
        assert!(
            status_line(None, Some(10.0), &b)
                .starts_with("3.5/10.0 s  sending 943 Mbits/sec retr 2  receiving 500 Mbits/sec")
        );
    }
}
