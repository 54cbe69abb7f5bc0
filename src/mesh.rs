//! `netmeter mesh`: every ordered pair of hosts (or a given list), each test run by its
//! source host through a third-party request (`engine::third_party`), with at most
//! `per_host` tests touching any host at once (default one: tests do not disturb each
//! other), retries when a server is busy, and the results as one JSON document, a
//! matrix table (throughput, loss, RTT) and a heatmap.
//!
//! The plan, the scheduling decision, the matrix and the document are pure
//! ([`Scheduler`], [`matrix_text`], [`document`], [`heatmap`]); [`run`] drives them
//! with one thread per running test. A host that is down or refuses is a cell with its
//! error, never a failed run; a stop signal ends the run with what it has.

use crate::clock::Clock;
use crate::engine::TestError;
use crate::engine::third_party::{Controller, request};
use crate::experiment::figures::figures;
use crate::experiment::repeat::pause;
use crate::report::Report;
use crate::wire::ThirdPartyRequest;
use serde::Serialize;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One host of the mesh: as the controller reaches its control port, and the name its
/// peers use to reach it as a test target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Host {
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Every ordered pair `(source, target)` of `n` hosts, source-major.
pub fn all_pairs(n: usize) -> Vec<(usize, usize)> {
    (0..n)
        .flat_map(|s| (0..n).filter(move |&t| t != s).map(move |t| (s, t)))
        .collect()
}

/// Pick the next pairs to start: in plan order, each whose two hosts have fewer than
/// `per_host` tests running. Pure: the caller keeps `busy` (tests per host).
#[derive(Debug, Clone)]
pub struct Scheduler {
    pub per_host: usize,
    pub busy: Vec<usize>,
}

impl Scheduler {
    pub fn new(hosts: usize, per_host: usize) -> Scheduler {
        Scheduler {
            per_host: per_host.max(1),
            busy: vec![0; hosts],
        }
    }

    /// The position in `pending` of the first pair that may start now, marked busy.
    pub fn take(&mut self, pending: &[(usize, usize)]) -> Option<usize> {
        let i = pending
            .iter()
            .position(|&(s, t)| self.busy[s] < self.per_host && self.busy[t] < self.per_host)?;
        let (s, t) = pending[i];
        self.busy[s] += 1;
        self.busy[t] += 1;
        Some(i)
    }

    /// A pair's test ended.
    pub fn done(&mut self, (s, t): (usize, usize)) {
        self.busy[s] = self.busy[s].saturating_sub(1);
        self.busy[t] = self.busy[t].saturating_sub(1);
    }
}

/// One pair's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub source: String,
    pub target: String,
    /// Tries made (more than one when a server was busy).
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<Report>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A pair's key figures for the matrix: receiver throughput (bit/s), UDP loss (%), TCP
/// mean RTT (ms).
pub fn cell_figures(r: &Report) -> (Option<f64>, Option<f64>, Option<f64>) {
    let f = figures(r);
    let get = |k: &str| f.iter().find(|x| x.key == k).map(|x| x.value);
    (
        get("receiver_bits_per_second"),
        get("lost_percent"),
        get("tcp_mean_rtt_ms"),
    )
}

/// The matrix of one figure: `values[source][target]`.
fn matrix(
    n: usize,
    cells: &[Cell],
    pick: impl Fn(&Report) -> Option<f64>,
) -> Vec<Vec<Option<f64>>> {
    let mut m = vec![vec![None; n]; n];
    for c in cells {
        if let (Some(s), Some(t), Some(r)) = (idx(&c.source), idx(&c.target), &c.report)
            && s < n
            && t < n
        {
            m[s][t] = pick(r);
        }
    }
    m
}

/// Cells name hosts as `#i host:port`; the index comes back from the name.
fn idx(name: &str) -> Option<usize> {
    name.strip_prefix('#')?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The name of host `i` in cells and tables.
pub fn host_name(i: usize, h: &Host) -> String {
    format!("#{i} {h}")
}

/// The text tables: throughput (Mbit/s), loss (%) when any test was UDP, TCP RTT (ms)
/// when any was TCP; rows are sources, columns targets; `-` on the diagonal, `error`
/// where the pair has none (the errors are listed below the tables).
pub fn matrix_text(hosts: &[Host], cells: &[Cell]) -> String {
    use std::fmt::Write;
    let n = hosts.len();
    let mut out = String::new();
    let tables: [(&str, Vec<Vec<Option<f64>>>); 3] = [
        (
            "Receiver throughput, Mbit/s",
            matrix(n, cells, |r| cell_figures(r).0.map(|b| b / 1e6)),
        ),
        ("UDP loss, %", matrix(n, cells, |r| cell_figures(r).1)),
        ("TCP mean RTT, ms", matrix(n, cells, |r| cell_figures(r).2)),
    ];
    let names: Vec<String> = (0..n).map(|i| format!("#{i}")).collect();
    for (title, m) in tables {
        if m.iter().flatten().all(Option::is_none) && !title.starts_with("Receiver") {
            continue;
        }
        let _ = writeln!(out, "{title} (row: source, column: target)");
        let _ = write!(out, "{:>6}", "");
        for name in &names {
            let _ = write!(out, "{name:>11}");
        }
        let _ = writeln!(out);
        for (s, row) in m.iter().enumerate() {
            let _ = write!(out, "{:>6}", names[s]);
            for (t, v) in row.iter().enumerate() {
                let shown = match v {
                    _ if s == t => "-".to_string(),
                    Some(v) => format!("{v:.2}"),
                    None if has_error(cells, s, t) => "error".to_string(),
                    None => "".to_string(),
                };
                let _ = write!(out, "{shown:>11}");
            }
            let _ = writeln!(out);
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "Hosts:");
    for (i, h) in hosts.iter().enumerate() {
        let _ = writeln!(out, "  #{i} {h}");
    }
    let errors: Vec<&Cell> = cells.iter().filter(|c| c.error.is_some()).collect();
    if !errors.is_empty() {
        let _ = writeln!(out, "Errors:");
        for c in errors {
            let _ = writeln!(
                out,
                "  {} -> {}: {}",
                c.source,
                c.target,
                c.error.as_deref().unwrap_or("")
            );
        }
    }
    out
}

fn has_error(cells: &[Cell], s: usize, t: usize) -> bool {
    cells
        .iter()
        .any(|c| c.error.is_some() && idx(&c.source) == Some(s) && idx(&c.target) == Some(t))
}

/// The whole run as one JSON document.
#[derive(Debug, Serialize)]
pub struct MeshDocument<'a> {
    pub hosts: &'a [Host],
    /// The client options every test ran with.
    pub test_options: &'a [String],
    /// Pairs planned, and whether a stop signal ended the run before all ran.
    pub planned: usize,
    pub interrupted: bool,
    pub cells: &'a [Cell],
}

/// The document as text.
pub fn document(doc: &MeshDocument<'_>) -> String {
    serde_json::to_string_pretty(doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// The throughput matrix as a heatmap.
pub fn heatmap(hosts: &[Host], cells: &[Cell]) -> crate::report::plot::Heatmap {
    crate::report::plot::Heatmap {
        title: "netmeter mesh: receiver throughput".into(),
        labels: hosts
            .iter()
            .enumerate()
            .map(|(i, h)| host_name(i, h))
            .collect(),
        values: matrix(hosts.len(), cells, |r| cell_figures(r).0.map(|b| b / 1e9)),
        unit: "{} Gbit/s".into(),
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct MeshPlan {
    pub hosts: Vec<Host>,
    pub pairs: Vec<(usize, usize)>,
    pub args: Vec<String>,
    pub psk: crate::auth::psk::Psk,
    pub per_host: usize,
    pub retries: u32,
    pub retry_gap: Duration,
    /// How long one test may take (its `-t` and setup).
    pub wait: Duration,
    /// `--sync-start`: tests are handed out in waves, each test of a wave with the
    /// same `--txstart-time`, this long after the wave is handed out.
    pub sync_start: Option<Duration>,
    /// Where the mesh reads the time (`crate::clock::system()`).
    pub clock: Arc<dyn Clock>,
}

/// The `--txstart-time` of a wave handed out at wall time `wall`, `lead` later (epoch
/// seconds).
fn wave_start(lead: Duration, wall: SystemTime) -> f64 {
    let now = wall.duration_since(UNIX_EPOCH).unwrap_or_default();
    (now + lead).as_secs_f64()
}

/// Progress, one line per finished pair (stderr in the CLI).
pub trait Progress {
    fn done(&mut self, finished: usize, planned: usize, cell: &Cell);
}

/// Run the mesh; returns the cells (in plan order; pairs never started are absent)
/// and whether a stop signal cut it short.
pub fn run(plan: &MeshPlan, progress: &mut dyn Progress) -> (Vec<Cell>, bool) {
    let mut sched = Scheduler::new(plan.hosts.len(), plan.per_host);
    let mut pending: Vec<(usize, usize)> = plan.pairs.clone();
    let mut cells: Vec<(usize, Cell)> = Vec::new();
    let (tx, rx) = mpsc::channel::<((usize, usize), Cell)>();
    let mut running = 0usize;
    let mut interrupted = false;
    let order = |p: (usize, usize)| plan.pairs.iter().position(|&q| q == p).unwrap_or(0);
    loop {
        if crate::sock::stop_signal().is_some() {
            interrupted = true;
        }
        // With --sync-start, a new wave only once the last one has ended.
        let hand_out = !interrupted && (plan.sync_start.is_none() || running == 0);
        let at = plan
            .sync_start
            .map(|lead| wave_start(lead, plan.clock.wall()));
        while let Some(i) = hand_out.then(|| sched.take(&pending)).flatten() {
            let pair = pending.remove(i);
            running += 1;
            let (tx, mut mine) = (tx.clone(), plan.clone());
            if let Some(at) = at {
                mine.args
                    .extend(["--txstart-time".to_string(), format!("{at:.3}")]);
            }
            let spawned = std::thread::Builder::new()
                .name("nm-mesh".into())
                .spawn(move || {
                    let cell = one_pair(&mine, pair);
                    let _ = tx.send((pair, cell));
                });
            if let Err(e) = spawned {
                running -= 1;
                sched.done(pair);
                let cell = failed_cell(plan, pair, 0, format!("cannot start a thread: {e}"));
                cells.push((order(pair), cell));
            }
        }
        if running == 0 && (pending.is_empty() || interrupted) {
            break;
        }
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok((pair, cell)) => {
                running -= 1;
                sched.done(pair);
                cells.push((order(pair), cell));
                progress.done(cells.len(), plan.pairs.len(), &cells[cells.len() - 1].1);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    cells.sort_by_key(|(i, _)| *i);
    (cells.into_iter().map(|(_, c)| c).collect(), interrupted)
}

fn failed_cell(plan: &MeshPlan, (s, t): (usize, usize), attempts: u32, why: String) -> Cell {
    Cell {
        source: host_name(s, &plan.hosts[s]),
        target: host_name(t, &plan.hosts[t]),
        attempts,
        report: None,
        error: Some(why),
    }
}

/// One pair, with retries while a server is busy.
fn one_pair(plan: &MeshPlan, (s, t): (usize, usize)) -> Cell {
    let (src, dst) = (&plan.hosts[s], &plan.hosts[t]);
    let ctl = Controller {
        host: src.host.clone(),
        port: src.port,
        psk: plan.psk.clone(),
        connect_timeout: Duration::from_secs(5),
        wait: plan.wait,
        stop_on_signal: true,
        clock: plan.clock.clone(),
    };
    let req = ThirdPartyRequest {
        target: dst.host.clone(),
        port: dst.port,
        args: plan.args.clone(),
    };
    let mut attempts = 0;
    loop {
        attempts += 1;
        match request(&ctl, &req) {
            Ok(report) => {
                let mut c = failed_cell(plan, (s, t), attempts, String::new());
                c.error = report.error.clone();
                c.report = Some(report);
                return c;
            }
            Err(e) if e.is_busy() && attempts <= plan.retries => {
                if !pause(plan.retry_gap, &*plan.clock) {
                    return failed_cell(
                        plan,
                        (s, t),
                        attempts,
                        format!("{e:#} (stopped before a retry)"),
                    );
                }
            }
            Err(e) => {
                let why = describe(&e, attempts);
                // Errors of the request itself (connect, key, A's own slot) name A.
                let why = match e {
                    TestError::ThirdParty { .. } | TestError::ThirdPartyBusy { .. } => why,
                    _ => format!("{src}: {why}"),
                };
                return failed_cell(plan, (s, t), attempts, why);
            }
        }
    }
}

fn describe(e: &TestError, attempts: u32) -> String {
    if e.is_busy() && attempts > 1 {
        format!("{e:#} (still busy after {attempts} tries)")
    } else {
        format!("{e:#}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wave_starts_its_lead_after_the_wall_clock_it_was_handed_out_at() {
        use crate::clock::ManualClock;
        let clock = ManualClock::at_unix(1_700_000_000);
        clock.advance(Duration::from_millis(250));
        let at = wave_start(Duration::from_secs(3), clock.wall());
        assert_eq!(format!("{at:.3}"), "1700000003.250");
        // A host whose wall clock is behind hands out an earlier start, as it reads it.
        clock.set_wall_offset(-1_000_000_000);
        assert_eq!(
            format!("{:.3}", wave_start(Duration::from_secs(3), clock.wall())),
            "1700000002.250"
        );
    }

    fn hosts(n: usize) -> Vec<Host> {
        (0..n)
            .map(|i| Host {
                host: format!("10.0.0.{}", i + 1),
                port: 5201,
            })
            .collect()
    }

    #[test]
    fn four_hosts_make_twelve_ordered_pairs() {
        let p = all_pairs(4);
        assert_eq!(p.len(), 12);
        assert!(p.iter().all(|(s, t)| s != t));
        assert!(p.contains(&(0, 1)) && p.contains(&(1, 0)));
    }

    /// One test per host at a time: with 4 hosts at most 2 run at once, and a pair
    /// waits until both its hosts are free.
    #[test]
    fn the_scheduler_keeps_hosts_to_their_limit() {
        let mut s = Scheduler::new(4, 1);
        let mut pending = all_pairs(4);
        let a = pending.remove(s.take(&pending).unwrap());
        let b = pending.remove(s.take(&pending).unwrap());
        assert_eq!((a, b), ((0, 1), (2, 3)));
        assert_eq!(s.take(&pending), None);
        s.done(a);
        let c = pending.remove(s.take(&pending).unwrap());
        assert_eq!(c, (1, 0));
        // Two per host: plan order fills hosts 0, 1 and 2 (0-1, 0-2, 1-2); host 3 then
        // finds no partner with room, and no host is over its limit.
        let mut s = Scheduler::new(4, 2);
        let mut pending = all_pairs(4);
        let mut started = vec![];
        while let Some(i) = s.take(&pending) {
            started.push(pending.remove(i));
        }
        assert_eq!(started, vec![(0, 1), (0, 2), (1, 2)]);
        assert_eq!(s.busy, vec![2, 2, 2, 0]);
    }

    #[test]
    fn the_matrix_shows_figures_errors_and_the_diagonal() {
        let h = hosts(2);
        let doc = r#"{"start":{"test_start":{"protocol":"TCP"}},"intervals":[],"end":{"sum_received":{"start":0,"end":1,"seconds":1,"bytes":125000000,"bits_per_second":1e9},"sum_sent":{"start":0,"end":1,"seconds":1,"bytes":125000000,"bits_per_second":1e9,"retransmits":0}}}"#;
        let r = Report::from_document(doc).unwrap();
        let cells = vec![
            Cell {
                source: host_name(0, &h[0]),
                target: host_name(1, &h[1]),
                attempts: 1,
                report: Some(r),
                error: None,
            },
            Cell {
                source: host_name(1, &h[1]),
                target: host_name(0, &h[0]),
                attempts: 3,
                report: None,
                error: Some("unable to connect".into()),
            },
        ];
        let t = matrix_text(&h, &cells);
        assert!(t.contains("1000.00"), "{t}");
        assert!(t.contains("error"), "{t}");
        assert!(
            t.contains("#1 10.0.0.2:5201 -> #0 10.0.0.1:5201: unable to connect"),
            "{t}"
        );
        let hm = heatmap(&h, &cells);
        assert_eq!(hm.values[0][1], Some(1.0));
        assert_eq!(hm.values[1][0], None);
        let svg = crate::report::plot::render_heatmap(&hm, false).unwrap();
        assert!(String::from_utf8(svg).unwrap().contains("<svg"));
        let doc = document(&MeshDocument {
            hosts: &h,
            test_options: &[],
            planned: 2,
            interrupted: false,
            cells: &cells,
        });
        let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
        assert_eq!(v["cells"][1]["error"], "unable to connect");
        assert_eq!(
            v["cells"][0]["report"]["end"]["sum_received"]["bits_per_second"],
            1e9
        );
    }
}
