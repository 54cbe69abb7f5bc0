//! `netmeter -c GROUP -u --receivers H1,H2`: the sender's whole run. It opens its
//! socket (so the receivers can be told the address its datagrams come from), asks
//! every receiver over its control connection ([`ask`](super::ask)), lets the
//! [`Conversation`] decide when to send and how long to wait, sends as any multicast
//! sender does, collects the figures and prints a row per receiver and their sum
//! ([`render`]: text, `-J`'s `end.receivers`, CSV). `main.rs` calls
//! [`run_to_end`] in place of `multicast::run_sender` when `--receivers` is given.

use super::ask::{Word, ask};
use super::live::{Aligner, Block, LIVE_WAIT};
use super::{Action, Conversation, FIGURES_WAIT, JOIN_WAIT, Receiver, Standing, render};
use crate::auth::psk::Psk;
use crate::clock::Clock;
use crate::engine::multicast::target::ReceiverHost;
use crate::engine::multicast::{SenderConfig, Sent, TICK, say, send_on, sender_socket, sent_line};
use crate::engine::output::Sink;
use crate::units::Format;
use crate::wire::mcast_join::JoinRequest;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver as Receiver_, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// How the rows are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    Text(Format),
    /// One `-J` document (`SenderConfig::json`).
    Json,
    Csv,
}

/// `--receivers` and what goes with it.
#[derive(Debug, Clone)]
pub struct ReceiversPlan {
    pub hosts: Vec<ReceiverHost>,
    /// `-H SOURCE`: the receivers join (SOURCE, GROUP). Without it a group in the SSM
    /// ranges is joined with the sender's own address as the source.
    pub ssm_source: Option<IpAddr>,
    /// `--psk-file`: proved to each receiver that asks.
    pub psk: Option<Psk>,
    pub trip_times: bool,
    /// `-i`: the receivers' interval rows; none: no rows.
    pub interval: Option<Duration>,
    pub connect_timeout: Duration,
    pub rows: Rows,
}

/// How long the receivers are asked to stay: `-t`, or for `-n` the time the bytes
/// take at the rate, and a second more (the server adds its grace).
fn duration_of(cfg: &SenderConfig) -> Duration {
    match cfg.bytes {
        Some(n) if cfg.rate_bps > 0 => {
            let s = (n as f64 * 8.0 / cfg.rate_bps as f64).ceil() + 1.0;
            Duration::from_secs_f64(s.min(cfg.time.as_secs_f64()))
        }
        _ => cfg.time,
    }
}

/// The request every receiver gets, from the sender's configuration and its socket's
/// address `local`.
pub fn join_request(cfg: &SenderConfig, plan: &ReceiversPlan, local: IpAddr) -> JoinRequest {
    let source = plan
        .ssm_source
        .or_else(|| cfg.group.is_ssm_range().then_some(local));
    JoinRequest {
        group: cfg.group.addr.to_string(),
        dev: None,
        source: source.map(|s| s.to_string()),
        port: cfg.port,
        duration_ms: duration_of(cfg).as_millis().min(u64::MAX as u128) as u64,
        interval_ms: plan.interval.map_or(0, |d| d.as_millis() as u64),
        trip_times: plan.trip_times,
        sender: (!local.is_unspecified()).then(|| local.to_string()),
        live: live_text(plan).is_some(),
    }
}

/// The text format when the interval rows are printed live (text with `-i`).
fn live_text(plan: &ReceiversPlan) -> Option<Format> {
    match plan.rows {
        Rows::Text(fmt) if plan.interval.is_some() => Some(fmt),
        _ => None,
    }
}

/// The live rows: who promised them, and once sending began their alignment.
struct Live {
    fmt: Option<Format>,
    interval: Duration,
    names: Vec<String>,
    promised: Vec<usize>,
    aligner: Option<Aligner>,
    headed: bool,
}

impl Live {
    fn new(plan: &ReceiversPlan, names: Vec<String>) -> Live {
        Live {
            fmt: live_text(plan),
            interval: plan.interval.unwrap_or_default(),
            names,
            promised: Vec::new(),
            aligner: None,
            headed: false,
        }
    }

    /// Sending begins at `now`: the promised receivers that joined are expected.
    fn begin(&mut self, conv: &Conversation, now: Instant) {
        let joined: Vec<usize> = self
            .promised
            .iter()
            .copied()
            .filter(|&i| {
                conv.results()
                    .get(i)
                    .is_some_and(|r| r.standing == Standing::Joined)
            })
            .collect();
        if self.fmt.is_some() && !joined.is_empty() {
            self.aligner = Some(Aligner::new(joined, now, self.interval, LIVE_WAIT));
        }
    }

    /// Take a live word; any other is handed back.
    fn take(&mut self, w: Word) -> Option<Word> {
        match (w, self.aligner.as_mut()) {
            (Word::Live(i), _) => {
                self.promised.push(i);
                None
            }
            (Word::Row(i, r), Some(a)) => {
                a.on_row(i, r);
                None
            }
            (Word::Row(..), None) => None,
            (w @ Word::Closed(i, _), Some(a)) => {
                a.on_gone(i);
                Some(w)
            }
            (w, _) => Some(w),
        }
    }

    fn print(&mut self, blocks: Vec<Block>, out: &Sink) {
        let Some(fmt) = self.fmt else { return };
        if blocks.is_empty() {
            return;
        }
        let mut lines = Vec::new();
        if !self.headed {
            lines.push(render::INTERVAL_HEADER.to_string());
            self.headed = true;
        }
        for b in &blocks {
            lines.extend(render::block_text(&self.names, b, fmt));
        }
        say(out, &lines);
    }

    /// Print the blocks ready at `now`.
    fn show(&mut self, now: Instant, out: &Sink) {
        if let Some(b) = self.aligner.as_mut().map(|a| a.poll(now)) {
            self.print(b, out);
        }
    }

    /// The end: the blocks still held, and the results without the rows printed.
    fn finish(&mut self, out: &Sink, results: &[Receiver]) -> Vec<Receiver> {
        let Some(mut a) = self.aligner.take() else {
            return results.to_vec();
        };
        let blocks = a.finish();
        self.print(blocks, out);
        if self.headed {
            say(out, &[render::SEPARATOR.to_string()]);
        }
        let mut shown = results.to_vec();
        for &i in &self.promised {
            if let Some(Receiver {
                standing: Standing::Reported(f),
                ..
            }) = shown.get_mut(i)
            {
                f.intervals.clear();
            }
        }
        shown
    }
}

/// While the datagrams go out: read the words, print the blocks as they are ready,
/// hold the other words for the conversation; until `done`.
fn follow(
    words: Receiver_<Word>,
    live: &mut Live,
    out: &Sink,
    clock: &dyn Clock,
    done: &AtomicBool,
) -> (Receiver_<Word>, Vec<Word>) {
    let mut held = Vec::new();
    while !done.load(Ordering::Relaxed) {
        match words.recv_timeout(TICK) {
            Ok(w) => held.extend(live.take(w)),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(TICK),
        }
        live.show(clock.now(), out);
    }
    (words, held)
}

fn apply(conv: &mut Conversation, w: Word) {
    match w {
        Word::Live(_) | Word::Row(..) => {}
        Word::Joined(i) => conv.on_joined(i),
        Word::Refused(i, why) => conv.on_refused(i, &why),
        Word::Figures(i, f) => conv.on_figures(i, f),
        Word::Closed(i, why) => conv.on_closed(i, &why),
    }
}

/// Ask, send, collect, print. What was sent (nothing when nobody joined) and one entry
/// per receiver.
pub fn run(
    cfg: &SenderConfig,
    plan: &ReceiversPlan,
    out: &Sink,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<(Sent, Vec<Receiver>)> {
    let sock = sender_socket(cfg)?;
    let local = sock.local_addr()?.ip();
    let req = join_request(cfg, plan, local);
    let clock = &*cfg.clock;
    let names: Vec<String> = plan.hosts.iter().map(|h| h.name.clone()).collect();
    let mut asking = ask(&plan.hosts, &req, plan.psk.as_ref(), plan.connect_timeout);
    let mut live = Live::new(plan, names.clone());
    let mut conv = Conversation::new(&names, clock.now(), JOIN_WAIT, FIGURES_WAIT);
    let mut sent = Sent::default();
    let stopped = || stop.load(Ordering::Relaxed) || crate::sock::stop_signal().is_some();
    loop {
        let now = clock.now();
        match conv.poll(now) {
            Action::Done => break,
            Action::Send { joined } => {
                if plan.rows != Rows::Json {
                    say(
                        out,
                        &[format!(
                            "{joined} of {} receivers joined {} port {}",
                            names.len(),
                            cfg.group.addr,
                            cfg.port
                        )],
                    );
                }
                live.begin(&conv, clock.now());
                let words = std::mem::replace(&mut asking.words, channel().1);
                let done = AtomicBool::new(false);
                let (result, back) = std::thread::scope(|s| {
                    let (live, done) = (&mut live, &done);
                    let reader = s.spawn(move || follow(words, live, out, clock, done));
                    let result = send_on(cfg, &sock, out, &stop);
                    done.store(true, Ordering::Relaxed);
                    (result, reader.join())
                });
                let (words, held) = back.unwrap_or_else(|p| std::panic::resume_unwind(p));
                asking.words = words;
                sent = result?;
                // What the connections said meanwhile (a receiver gone mid-test).
                for w in held {
                    apply(&mut conv, w);
                }
                while let Ok(w) = asking.words.try_recv() {
                    if let Some(w) = live.take(w) {
                        apply(&mut conv, w);
                    }
                }
                conv.sending_ended(clock.now());
            }
            Action::Wait { until } => {
                // A stop while asking ends it; once the datagrams went out (a stop
                // ended them early, with the FIN) the figures are still collected,
                // within the figures wait.
                if stopped() && sent.datagrams == 0 {
                    break;
                }
                let wait = until.saturating_duration_since(now).min(TICK);
                match asking.words.recv_timeout(wait) {
                    Ok(w) => {
                        if let Some(w) = live.take(w) {
                            apply(&mut conv, w);
                        }
                        live.show(clock.now(), out);
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    // Every connection ended and said so: the waits settle the rest.
                    Err(RecvTimeoutError::Disconnected) => std::thread::sleep(wait),
                }
            }
        }
    }
    asking.close();
    let results = conv.results().to_vec();
    let shown = live.finish(out, &results);
    say(out, &rows(cfg, plan, &sent, &shown));
    Ok((sent, results))
}

/// The printed output: text lines, one `-J` document, or CSV lines.
fn rows(
    cfg: &SenderConfig,
    plan: &ReceiversPlan,
    sent: &Sent,
    results: &[Receiver],
) -> Vec<String> {
    match plan.rows {
        Rows::Text(fmt) => {
            let mut l = vec![sent_line(cfg, sent)];
            l.extend(render::text(results, fmt));
            l
        }
        Rows::Csv => vec![render::csv(results).trim_end().to_string()],
        Rows::Json => {
            let mut end = render::json(results);
            if let Some(o) = end.as_object_mut() {
                o.insert(
                    "sender".into(),
                    serde_json::json!({
                        "datagrams": sent.datagrams,
                        "bytes": sent.bytes,
                        "send_errors": sent.errors,
                        "seconds": sent.seconds,
                    }),
                );
            }
            let doc = serde_json::json!({
                "start": {
                    "multicast": "sender",
                    "group": cfg.group.addr,
                    "port": cfg.port,
                    "ttl": cfg.ttl,
                },
                "end": end,
            });
            vec![serde_json::to_string_pretty(&doc).unwrap_or_default()]
        }
    }
}

/// `netmeter -c GROUP -u --receivers ...` (`main.rs`): [`run`] until the conversation
/// ends or a stop signal, then an error when no receiver reported.
pub fn run_to_end(cfg: &SenderConfig, plan: &ReceiversPlan, out: Sink) -> anyhow::Result<()> {
    let (_, results) = run(cfg, plan, &out, Arc::default())?;
    outcome(&results)
}

/// An error sentence when no receiver reported (the rows are printed already).
pub fn outcome(results: &[Receiver]) -> anyhow::Result<()> {
    if results
        .iter()
        .any(|r| matches!(r.standing, Standing::Reported(_)))
    {
        return Ok(());
    }
    anyhow::bail!("--receivers: no receiver reported figures (each row above says why)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::multicast::target::parse_group;

    fn cfg(group: &str) -> SenderConfig {
        SenderConfig {
            group: parse_group(group).unwrap(),
            port: 5001,
            bind: None,
            ttl: 1,
            looped: false,
            rate_bps: 1_000_000,
            len: 1470,
            time: Duration::from_secs(3),
            bytes: None,
            tos: 0,
            json: false,
            clock: crate::clock::system(),
        }
    }

    fn plan() -> ReceiversPlan {
        ReceiversPlan {
            hosts: vec![],
            ssm_source: None,
            psk: None,
            trip_times: true,
            interval: Some(Duration::from_secs(1)),
            connect_timeout: Duration::from_secs(5),
            rows: Rows::Csv,
        }
    }

    #[test]
    fn the_request_carries_the_test_and_the_senders_address() {
        let local: IpAddr = "10.0.0.1".parse().unwrap();
        let r = join_request(&cfg("239.1.1.1"), &plan(), local);
        assert_eq!(
            (r.duration_ms, r.interval_ms, r.trip_times, r.port),
            (3000, 1000, true, 5001)
        );
        assert_eq!((r.source, r.sender.as_deref()), (None, Some("10.0.0.1")));
        // A group in the SSM range: the receivers hear this sender only.
        let ssm = join_request(&cfg("232.1.1.1"), &plan(), local);
        assert_eq!(ssm.source.as_deref(), Some("10.0.0.1"));
        let mut p = plan();
        p.ssm_source = Some("10.0.0.9".parse().unwrap());
        assert_eq!(
            join_request(&cfg("232.1.1.1"), &p, local).source.as_deref(),
            Some("10.0.0.9")
        );
        // -n: the bytes' time at the rate, and a second more.
        let mut c = cfg("239.1.1.1");
        c.bytes = Some(1_000_000);
        c.time = Duration::from_secs(86400);
        assert_eq!(join_request(&c, &p, local).duration_ms, 9000);
        // Every request a sender makes passes a server's checks.
        for c in [cfg("239.1.1.1"), cfg("232.1.1.1"), cfg("ff15::77")] {
            let l: IpAddr = if c.group.addr.is_ipv4() {
                local
            } else {
                "fd00::1".parse().unwrap()
            };
            let r = join_request(&c, &plan(), l);
            assert!(super::super::server::check(&r, None).is_ok(), "{r:?}");
        }
    }

    #[test]
    fn live_rows_are_asked_only_for_text_with_intervals() {
        let local: IpAddr = "10.0.0.1".parse().unwrap();
        let mut p = plan();
        assert!(!join_request(&cfg("239.1.1.1"), &p, local).live);
        p.rows = Rows::Text(Format::Auto);
        assert!(join_request(&cfg("239.1.1.1"), &p, local).live);
        p.interval = None;
        assert!(!join_request(&cfg("239.1.1.1"), &p, local).live);
    }

    /// An older server promises no live rows (its join answer lacks `live`): nothing is
    /// aligned or printed live, and its interval rows stay in the end's table; a
    /// receiver that printed live has them taken out of it.
    #[test]
    fn without_a_promise_the_end_keeps_the_rows() {
        use crate::wire::mcast_join::{FigureRow, ReceiverFigures};
        let t0 = crate::clock::ManualClock::at_unix(0).now();
        let mut p = plan();
        p.rows = Rows::Text(Format::Auto);
        let names = vec!["old".to_string(), "new".to_string()];
        let mut conv = Conversation::new(&names, t0, JOIN_WAIT, FIGURES_WAIT);
        let mut live = Live::new(&p, names.clone());
        let out = crate::engine::output::sink(Box::new(std::io::sink()));
        for w in [Word::Joined(0), Word::Live(1), Word::Joined(1)] {
            if let Some(w) = live.take(w) {
                apply(&mut conv, w);
            }
        }
        assert_eq!(conv.poll(t0), Action::Send { joined: 2 });
        live.begin(&conv, t0);
        let figures = ReceiverFigures {
            intervals: vec![FigureRow::default(); 2],
            ..Default::default()
        };
        conv.on_figures(0, figures.clone());
        conv.on_figures(1, figures);
        let shown = live.finish(&out, conv.results());
        let rows = |i: usize| match &shown[i].standing {
            Standing::Reported(f) => f.intervals.len(),
            other => panic!("{other:?}"),
        };
        assert_eq!((rows(0), rows(1)), (2, 0));
        // Nobody promised: the results as they are.
        let mut none = Live::new(&p, names);
        assert_eq!(none.finish(&out, conv.results()), conv.results().to_vec());
    }

    #[test]
    fn no_receiver_reporting_is_an_error_sentence() {
        let none = [Receiver {
            name: "h1".into(),
            standing: Standing::NoAnswer,
        }];
        let e = outcome(&none).unwrap_err().to_string();
        assert!(e.starts_with("--receivers:") && !e.contains('\n'), "{e}");
    }
}
