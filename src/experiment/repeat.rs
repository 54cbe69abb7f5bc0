//! `--repeat N`: the same client test N times, a pause between runs, and each key
//! figure summarized over the runs (mean, standard deviation, min/max, Student-t
//! confidence interval). `--confidence LEVEL,WIDTH%` stops early once the receiver
//! throughput's interval is that tight (netperf's `-I`/`-i`). The plan and the
//! statistics are pure ([`Plan`], [`statistics`]); [`run`] calls [`crate::run`] in a loop.

use super::figures::{self, Better};
use super::stats::{self, ConfInterval, Summary};
use crate::clock::Clock;
use crate::engine::output::{Mode, Sink};
use crate::report::Report;
use crate::{TestConfig, TestError};
use serde::Serialize;
use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{Duration, Instant};

/// The early stop waits for at least this many runs: two runs give a t quantile of
/// 12.7 at 95 %, an interval that says little about the spread it was made from.
pub const MIN_RUNS_FOR_EARLY_STOP: usize = 3;

/// The key figure `--confidence` watches.
pub const WATCHED: &str = "receiver_bits_per_second";

/// What `--repeat`, `--repeat-gap` and `--confidence` ask for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Plan {
    /// Runs at most (`--repeat N`).
    pub max_runs: u32,
    /// Pause between runs, seconds.
    pub gap_s: f64,
    /// Confidence level of the reported intervals (0.95 unless `--confidence` says).
    pub level: f64,
    /// `--confidence`: stop once the watched figure's half width is within this
    /// percentage of its mean.
    pub stop_width_pct: Option<f64>,
}

impl Plan {
    /// Resolve the flags; one sentence when a value is out of range.
    pub fn from_flags(runs: u32, gap_s: f64, confidence: Option<&str>) -> Result<Plan, String> {
        if !(1..=1000).contains(&runs) {
            return Err(format!("--repeat needs 1 to 1000 runs, not {runs}"));
        }
        if !(gap_s.is_finite() && (0.0..=3600.0).contains(&gap_s)) {
            return Err("--repeat-gap must be between 0 and 3600 seconds".to_string());
        }
        let (level, stop_width_pct) = match confidence {
            None => (0.95, None),
            Some(c) => {
                let bad = || {
                    format!(
                        "--confidence needs LEVEL,WIDTH% such as 95,5 (95 % confidence, \
                         interval within ±5 % of the mean), not '{c}'"
                    )
                };
                let (l, w) = c.split_once(',').ok_or_else(bad)?;
                let l: f64 = l.trim().trim_end_matches('%').parse().map_err(|_| bad())?;
                let w: f64 = w.trim().trim_end_matches('%').parse().map_err(|_| bad())?;
                // 95 or 0.95 both mean 95 %.
                let level = if l > 1.0 { l / 100.0 } else { l };
                if !(level > 0.5 && level < 1.0 && w > 0.0 && w < 100.0) {
                    return Err(bad());
                }
                (level, Some(w))
            }
        };
        Ok(Plan {
            max_runs: runs,
            gap_s,
            level,
            stop_width_pct,
        })
    }

    /// Whether the runs so far are enough: the watched figure's interval is within
    /// the asked width (never before [`MIN_RUNS_FOR_EARLY_STOP`] runs).
    pub fn tight_enough(&self, watched: &[f64]) -> bool {
        let Some(width) = self.stop_width_pct else {
            return false;
        };
        if watched.len() < MIN_RUNS_FOR_EARLY_STOP {
            return false;
        }
        stats::summarize(watched)
            .and_then(|s| stats::confidence_interval(&s, self.level))
            .and_then(|ci| ci.half_width_pct())
            .is_some_and(|pct| pct <= width)
    }
}

/// One figure over the runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FigureStats {
    pub key: String,
    pub label: String,
    pub unit: &'static str,
    pub better: Better,
    #[serde(flatten)]
    pub summary: Summary,
    /// `None` for a single run.
    pub ci: Option<ConfInterval>,
}

/// Every key figure of the first run, summarized over all runs that have it.
pub fn statistics(runs: &[Report], level: f64) -> Vec<FigureStats> {
    let all: Vec<Vec<figures::Figure>> = runs.iter().map(figures::summary_figures).collect();
    let Some(first) = all.first() else {
        return Vec::new();
    };
    first
        .iter()
        .filter_map(|f| {
            let xs: Vec<f64> = all
                .iter()
                .filter_map(|r| r.iter().find(|g| g.key == f.key).map(|g| g.value))
                .collect();
            let summary = stats::summarize(&xs)?;
            Some(FigureStats {
                key: f.key.clone(),
                label: f.label.clone(),
                unit: f.unit,
                better: f.better,
                ci: stats::confidence_interval(&summary, level).map(|ci| {
                    let (min, max) = figures::bounds(f.unit);
                    ci.within(min, max)
                }),
                summary,
            })
        })
        .collect()
}

/// How the repetitions ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RepeatInfo {
    #[serde(flatten)]
    pub plan: Plan,
    /// Runs completed (each in `runs`).
    pub runs: usize,
    /// "all runs", "confidence reached", "interrupted" or "failed: ...".
    pub ended: String,
}

/// The `-J` document of a repetition: every run's whole report and the statistics.
/// `netmeter compare` reads it (its `runs`).
#[derive(Debug, Clone, Serialize)]
pub struct RepeatDocument {
    pub netmeter_repeat: RepeatInfo,
    pub runs: Vec<Report>,
    pub statistics: Vec<FigureStats>,
}

/// One run's summary line: every key figure, e.g.
/// `run 2/5: Receiver throughput 941.23 Mbits/sec, Retransmits 0, TCP mean RTT 0.120 ms`.
pub fn run_line(i: usize, max: u32, r: &Report) -> String {
    let figs: Vec<String> = figures::summary_figures(r)
        .iter()
        .map(|f| {
            format!(
                "{} {}",
                f.label,
                super::compare::format_value(f.value, f.unit)
            )
        })
        .collect();
    format!("run {i}/{max}: {}", figs.join(", "))
}

/// The statistics as a text table.
pub fn table(info: &RepeatInfo, st: &[FigureStats]) -> String {
    let mut t = format!(
        "\n{} run{} ({}):\n",
        info.runs,
        if info.runs == 1 { "" } else { "s" },
        info.ended
    );
    let level = format!("{:.0} % CI", info.plan.level * 100.0);
    let _ = writeln!(
        t,
        "{:<28} {:>18} {:>14} {:>18} {:>18}  {}",
        "Figure", "Mean", "Stdev", "Min", "Max", level
    );
    let v = super::compare::format_value;
    for f in st {
        let ci = match &f.ci {
            Some(c) => format!(
                "{} .. {} (±{})",
                v(c.low, f.unit),
                v(c.high, f.unit),
                c.half_width_pct()
                    .map_or("n/a".to_string(), |p| format!("{p:.1} %"))
            ),
            None => "n/a (one run)".to_string(),
        };
        let _ = writeln!(
            t,
            "{:<28} {:>18} {:>14} {:>18} {:>18}  {}",
            f.label,
            v(f.summary.mean, f.unit),
            v(f.summary.stdev, f.unit),
            v(f.summary.min, f.unit),
            v(f.summary.max, f.unit),
            ci
        );
    }
    t
}

/// The runs of one series and how it ended.
pub struct Series {
    pub runs: Vec<Report>,
    /// "all runs", "confidence reached", "interrupted" or "failed: ...".
    pub ended: String,
    /// The error that ended it, if a run failed (not for an interrupt).
    pub failure: Option<TestError>,
}

/// Run `cfg` up to `plan.max_runs` times, `plan.gap_s` apart, stopping early as
/// `--confidence` says, at a stop signal (the partial run is dropped) or at a failed
/// run. `on_run(i, report)` is told of each completed run (1-based).
pub fn series(cfg: &TestConfig, plan: &Plan, on_run: impl FnMut(usize, &Report)) -> Series {
    series_of(plan, &*cfg.clock, || super::series_step(cfg), on_run)
}

/// [`series`] with the test run by `step` (the engine's test, or a test's fixed reports):
/// the pause, the early stop and how the series ended, decided on what `step` returned.
fn series_of(
    plan: &Plan,
    clock: &dyn Clock,
    mut step: impl FnMut() -> Result<Report, (String, Option<TestError>)>,
    mut on_run: impl FnMut(usize, &Report),
) -> Series {
    let mut runs: Vec<Report> = Vec::new();
    let mut failure = None;
    let mut ended = "all runs".to_string();
    for i in 1..=plan.max_runs as usize {
        if i > 1 && !pause(Duration::from_secs_f64(plan.gap_s), clock) {
            ended = "interrupted".to_string();
            break;
        }
        match step() {
            Ok(r) => {
                on_run(i, &r);
                runs.push(r);
            }
            Err((why, e)) => {
                (ended, failure) = (why, e);
                break;
            }
        }
        let watched: Vec<f64> = runs
            .iter()
            .filter_map(|r| {
                figures::figures(r)
                    .into_iter()
                    .find(|f| f.key == WATCHED)
                    .map(|f| f.value)
            })
            .collect();
        if plan.tight_enough(&watched) {
            ended = "confidence reached".to_string();
            break;
        }
    }
    Series {
        runs,
        ended,
        failure,
    }
}

/// Run `cfg` as `plan` says: text mode prints each run's line, then the table; `-J`
/// prints one [`RepeatDocument`] (each run's line then goes to stderr). A stop signal
/// ends the current run and the series; what completed is reported. A failed run ends
/// the series too: what completed is reported, then the error is returned.
pub fn run(cfg: &TestConfig, plan: &Plan, sink: &Sink) -> Result<(), TestError> {
    // `--line-rate memcpy`: measured once, so every run is judged against one peak.
    let mut measured = cfg.clone();
    measured.line_rate = cfg.line_rate.map(crate::host::probe::measure_line_rate);
    let cfg = &measured;
    let say = |s: &str| {
        if let Ok(mut w) = sink.lock() {
            let _ = w.write_all(s.as_bytes());
            let _ = w.flush();
        }
    };
    let done = series(cfg, plan, |i, r| {
        let line = run_line(i, plan.max_runs, r);
        if cfg.mode == Mode::Text {
            say(&format!("{line}\n"));
        } else {
            // Progress beside the one -J document, not in it.
            eprintln!("{line}");
        }
    });
    let info = RepeatInfo {
        plan: *plan,
        runs: done.runs.len(),
        ended: done.ended,
    };
    let st = statistics(&done.runs, plan.level);
    if cfg.mode == Mode::Text {
        say(&table(&info, &st));
    } else {
        let doc = RepeatDocument {
            netmeter_repeat: info,
            runs: done.runs,
            statistics: st,
        };
        let s = serde_json::to_string_pretty(&doc).unwrap_or_else(|e| {
            format!("{{\"error\": \"netmeter could not serialize its report: {e}\"}}")
        });
        say(&format!("{s}\n"));
    }
    done.failure.map_or(Ok(()), Err)
}

/// Sleep `gap` in short steps on `clock`; false when a stop signal came.
pub(crate) fn pause(gap: Duration, clock: &dyn Clock) -> bool {
    let until = clock.now() + gap;
    loop {
        if crate::sock::stop_signal().is_some() {
            return false;
        }
        match nap(until, clock.now()) {
            Some(d) => std::thread::sleep(d),
            None => return true,
        }
    }
}

/// The next sleep of a pause that ends at `until`, at `now`: short enough to notice a
/// stop signal within 50 ms; `None` once it is over.
pub(crate) fn nap(until: Instant, now: Instant) -> Option<Duration> {
    let left = until.saturating_duration_since(now);
    (!left.is_zero()).then(|| left.min(Duration::from_millis(50)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_naps_in_short_steps_until_its_end() {
        let clock = crate::clock::ManualClock::at_unix(1_700_000_000);
        let until = clock.now() + Duration::from_millis(120);
        let mut naps = Vec::new();
        while let Some(d) = nap(until, clock.now()) {
            naps.push(d.as_millis());
            clock.advance(d);
        }
        assert_eq!(naps, [50, 50, 20]);
        assert_eq!(clock.elapsed(), Duration::from_millis(120));
        // A pause of nothing does not sleep at all.
        assert_eq!(nap(clock.now(), clock.now()), None);
    }

    #[test]
    fn flags_resolve() {
        let p = Plan::from_flags(5, 1.0, None).unwrap();
        assert_eq!((p.max_runs, p.level, p.stop_width_pct), (5, 0.95, None));
        let p = Plan::from_flags(10, 0.0, Some("99,2%")).unwrap();
        assert_eq!((p.level, p.stop_width_pct), (0.99, Some(2.0)));
        let p = Plan::from_flags(10, 0.5, Some("0.9,5")).unwrap();
        assert_eq!((p.level, p.stop_width_pct), (0.9, Some(5.0)));
        assert!(Plan::from_flags(0, 1.0, None).is_err());
        assert!(Plan::from_flags(3, -1.0, None).is_err());
        for bad in ["95", "95,0", "150,5", "x,5", "95,y"] {
            let e = Plan::from_flags(3, 1.0, Some(bad)).unwrap_err();
            assert!(
                e.starts_with("--confidence needs LEVEL,WIDTH%"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn early_stop_needs_three_runs_and_a_tight_interval() {
        let p = Plan::from_flags(10, 0.0, Some("95,5")).unwrap();
        // Identical runs: zero width, but only from the third run on.
        assert!(!p.tight_enough(&[100.0, 100.0]));
        assert!(p.tight_enough(&[100.0, 100.0, 100.0]));
        // [100, 104, 96]: s = 4, half width = 4.302652729749462 · 4/√3 = 9.94 → 9.9 %.
        assert!(!p.tight_enough(&[100.0, 104.0, 96.0]));
        let wide = Plan::from_flags(10, 0.0, Some("95,10")).unwrap();
        assert!(wide.tight_enough(&[100.0, 104.0, 96.0]));
        assert!(
            !Plan::from_flags(10, 0.0, None)
                .unwrap()
                .tight_enough(&[1.0; 5])
        );
    }

    /// Reports of the tcp.json fixture whose receiver throughput is each of `bps`.
    fn runs_at(bps: &[f64]) -> Vec<Report> {
        let path = format!(
            "{}/src/report/testdata/tcp.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let r = Report::from_document(&std::fs::read_to_string(path).unwrap()).unwrap();
        bps.iter()
            .map(|&b| {
                let mut x = r.clone();
                if let Some(s) = x.end.sum_received.as_mut() {
                    s.bits_per_second = b;
                }
                x
            })
            .collect()
    }

    /// The series as `--repeat 10 --confidence LEVEL,WIDTH` runs it, on fixed reports
    /// instead of real tests: how many runs it took and how it ended.
    fn series_over(bps: &[f64], confidence: &str) -> (usize, String) {
        let plan = Plan::from_flags(10, 0.0, Some(confidence)).unwrap();
        let mut fixed = runs_at(bps).into_iter();
        let mut told = Vec::new();
        let clock = crate::clock::ManualClock::at_unix(1_700_000_000);
        let s = series_of(
            &plan,
            &clock,
            || fixed.next().ok_or(("no more fixed runs".to_string(), None)),
            |i, _| told.push(i),
        );
        assert_eq!(told, (1..=s.runs.len()).collect::<Vec<_>>());
        (s.runs.len(), s.ended)
    }

    /// `--confidence 95,50` on steady runs (what the integration test's paced 10 Mbit/s
    /// UDP gives): the interval is within ±50 % at the third run, the first that may
    /// stop; a spread series goes on until its interval is tight, and one that never is
    /// runs them all.
    #[test]
    fn confidence_stops_the_series_at_the_first_tight_interval() {
        let steady = [10.0e6, 9.9e6, 10.1e6, 10.0e6, 10.0e6];
        assert_eq!(
            series_over(&steady, "95,50"),
            (3, "confidence reached".into())
        );
        // [10, 20, 5] Mbit/s: mean 11.67, s = 7.64, half width 4.303 · 7.64/√3 = 18.97
        // (163 %); a fourth run at 10: mean 11.25, s = 6.29, 3.182 · 6.29/2 = 10.01
        // (89 %); a fifth: mean 11, s = 5.48, 2.776 · 5.48/√5 = 6.80 (62 %); a sixth:
        // mean 10.83, s = 4.92, 2.571 · 4.92/√6 = 5.16 (47.6 %): stops at six.
        let spread = [10e6, 20e6, 5e6, 10e6, 10e6, 10e6, 10e6];
        assert_eq!(
            series_over(&spread, "95,50"),
            (6, "confidence reached".into())
        );
        // Never tight within ±1 %: every run of the fixed ones, then the step's end.
        let (n, ended) = series_over(&[10e6, 12e6, 8e6, 11e6, 9e6], "95,1");
        assert_eq!((n, ended.as_str()), (5, "no more fixed runs"));
    }

    #[test]
    fn statistics_over_runs() {
        let path = format!(
            "{}/src/report/testdata/tcp.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let r = Report::from_document(&std::fs::read_to_string(path).unwrap()).unwrap();
        let runs: Vec<Report> = [90e6, 100e6, 110e6]
            .iter()
            .map(|&b| {
                let mut x = r.clone();
                if let Some(s) = x.end.sum_received.as_mut() {
                    s.bits_per_second = b;
                }
                x
            })
            .collect();
        let st = statistics(&runs, 0.95);
        let t = &st[0];
        assert_eq!(t.key, WATCHED);
        assert_eq!(
            (t.summary.n, t.summary.mean, t.summary.stdev),
            (3, 100e6, 10e6)
        );
        // scipy.stats.t.ppf(0.975, 2) · 10e6/√3
        let hw = 4.302652729749462 * 10e6 / 3f64.sqrt();
        assert!((t.ci.unwrap().half_width - hw).abs() < 1e-3);
        let info = RepeatInfo {
            plan: Plan::from_flags(3, 1.0, None).unwrap(),
            runs: 3,
            ended: "all runs".to_string(),
        };
        let text = table(&info, &st);
        assert!(text.contains("3 runs (all runs)"), "{text}");
        assert!(text.contains("100.00 Mbits/sec"), "{text}");
        assert!(text.contains("(±24.8 %)"), "{text}");
        assert!(
            run_line(2, 3, &runs[1]).starts_with("run 2/3: Receiver throughput 100.00 Mbits/sec")
        );
        assert!(statistics(&runs[..1], 0.95)[0].ci.is_none());
    }

    /// Retransmits of 0, 0 and 12 over three runs gave a 95 % interval of "-5 .. 13"
    /// (mean 4 ± 22): a count cannot be negative, so the interval stops at 0.
    #[test]
    fn a_count_s_interval_is_never_negative() {
        let path = format!(
            "{}/src/report/testdata/tcp.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let r = Report::from_document(&std::fs::read_to_string(path).unwrap()).unwrap();
        let runs: Vec<Report> = [0, 0, 12]
            .iter()
            .map(|&n| {
                let mut x = r.clone();
                if let Some(s) = x.end.sum_sent.as_mut() {
                    s.retransmits = Some(n);
                }
                x
            })
            .collect();
        let st = statistics(&runs, 0.95);
        let retr = st.iter().find(|f| f.key == "retransmits").unwrap();
        let ci = retr.ci.unwrap();
        assert_eq!(retr.summary.mean, 4.0);
        assert_eq!(ci.low, 0.0);
        assert!((ci.high - (4.0 + ci.half_width)).abs() < 1e-9);
        // The half width still says how wide the spread is, against the true mean.
        assert!((ci.half_width_pct().unwrap() - ci.half_width / 4.0 * 100.0).abs() < 1e-9);
        let info = RepeatInfo {
            plan: Plan::from_flags(3, 1.0, None).unwrap(),
            runs: 3,
            ended: "all runs".to_string(),
        };
        let text = table(&info, &st);
        let line = text.lines().find(|l| l.starts_with("Retransmits")).unwrap();
        assert!(!line.contains("-"), "{line}");
        // A share stops at 100 %.
        let wide = stats::ConfInterval {
            level: 0.95,
            low: 90.0,
            high: 130.0,
            half_width: 20.0,
            mean: 110.0,
        };
        assert_eq!(wide.within(0.0, 100.0).high, 100.0);
    }
}
