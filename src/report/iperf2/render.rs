//! The observer printing a test in iperf 2's layout as it runs: the settings header and
//! connection lines once the `start` is known, a row per stream per interval (and the
//! `[SUM-N]` row with several streams), the whole test's rows at the end, and on a UDP
//! client what the server reported. A `-r` client's events are two tests one after the
//! other (`engine::iperf2_client::tradeoff`): its listener's banner first (the
//! `Listening` event), then the client's test, then the server's test back as iperf
//! 2's client prints it (the accepted connections numbered on from the client's own,
//! their rows a receiver's).

use super::csv;
use super::lines;
use super::rows::end_row;
use super::{Iperf2Ctx, Layout, Row};
use crate::latency::LatencyStats;
use crate::report::observe::{Event, Observer};
use crate::report::{Connected, End, Interval, Start};
use std::collections::HashMap;

/// Writes iperf 2's lines through `write` (one call per line, newline included).
pub struct Iperf2Renderer {
    ctx: Iperf2Ctx,
    write: Box<dyn FnMut(&str) + Send>,
    start: Option<Start>,
    /// Column headers already printed (iperf 2 prints each once).
    headers: Vec<&'static str>,
    /// Each stream's last interval row: its TCP state is the end row's.
    last: HashMap<i64, Row>,
    /// Each receiving stream's one-way delays over its intervals so far: the whole
    /// test's row when the end summary has none (an iperf 2 server's `-R` datagrams:
    /// no clock estimate, so no end summary of one-way delays).
    owd_run: HashMap<i64, LatencyStats>,
    /// `-r`: the receive buffer its listener's banner reports (0: the line is left out).
    listen_window: u64,
    /// `-r`: the first test's connections once the server's test back has started (its
    /// own follow them in `start`, so their numbers go on from the first's).
    first: Option<Vec<Connected>>,
    /// UDP `-d`: the two directions summed in `[SUM-2]` (plain `[SUM]`) rows, and the
    /// Server Report after the whole test's sum, as iperf 2.2.1's client prints them.
    dual_udp: bool,
}

impl Iperf2Renderer {
    pub fn new(ctx: Iperf2Ctx, write: Box<dyn FnMut(&str) + Send>) -> Iperf2Renderer {
        Iperf2Renderer {
            ctx,
            write,
            start: None,
            headers: Vec::new(),
            last: HashMap::new(),
            owd_run: HashMap::new(),
            listen_window: 0,
            first: None,
            dual_udp: false,
        }
    }

    /// UDP `-d`: the sending and the receiving stream summed as iperf 2.2.1's dual
    /// client sums them.
    pub fn with_dual_udp(mut self) -> Iperf2Renderer {
        self.dual_udp = true;
        self
    }

    /// UDP `-d`: an interval's (or with `at_end` the whole test's) sum of both
    /// directions: `[SUM-2]` under iperf 2's `[SUM-cnt] ... Write/Err  PPS` header
    /// with `-e` (the writes and reads, the datagrams both ways a second), plain `[SUM]`.
    fn dual_sum(&mut self, rows: &[Row], at_end: bool) {
        if rows.len() < 2 {
            return;
        }
        let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        let mut sum = Row {
            start: rows.iter().map(|r| r.start).fold(f64::INFINITY, f64::min),
            end: rows.iter().map(|r| r.end).fold(0.0, f64::max),
            seconds: rows.iter().map(|r| r.seconds).fold(0.0, f64::max),
            ..Row::default()
        };
        for r in rows {
            sum.bytes += r.bytes;
            let (f, g) = (&mut sum.figures, &r.figures);
            f.writes = add(add(f.writes, g.writes), g.reads);
            f.write_errors = add(f.write_errors, g.write_errors);
            f.packets_per_second = match (f.packets_per_second, g.packets_per_second) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
            };
        }
        let facts = self.facts(true, at_end);
        let l = match self.ctx.layout {
            Layout::Enhanced => {
                self.header_once(lines::sum_header(lines::Kind::UdpWrite));
                lines::row(lines::Kind::UdpWrite, "[SUM-2] ", &sum, &facts)
            }
            _ => lines::row(lines::Kind::Plain, "[SUM] ", &sum, &facts),
        };
        self.line(&l);
    }

    /// `-r`: the receive buffer of a socket as the listener gets it (its banner's "TCP
    /// window size").
    pub fn with_listen_window(mut self, bytes: u64) -> Iperf2Renderer {
        self.listen_window = bytes;
        self
    }

    /// `-r`: the listener iperf 2's client opens for the server's test back, announced
    /// as iperf 2 announces a server, before anything else.
    fn listening(&mut self, port: u16) {
        if !self.ctx.client || self.start.is_some() {
            return;
        }
        let ctx = Iperf2Ctx {
            client: false,
            port,
            ..self.ctx.clone()
        };
        let blk = self.ctx.datagram_len;
        for l in super::server::banner(&ctx, blk, self.listen_window, None) {
            self.line(&l);
        }
    }

    /// `-r`: the server's test back begins (a second `Started`): its connection lines,
    /// numbered on from the first test's, and its own column headers.
    fn started_back(&mut self, s: &Start) {
        let first = self.start.take().map(|f| f.connected).unwrap_or_default();
        let mut merged = s.clone();
        // Not a `-R` test: iperf 2 labels these rows as any test's.
        merged.test_start.reverse = 0;
        merged.connected = first.iter().chain(&s.connected).cloned().collect();
        let offset = first.len();
        self.first = Some(first);
        self.start = Some(merged.clone());
        (self.headers, self.last, self.owd_run) = Default::default();
        if self.ctx.layout == Layout::Csv || self.ctx.exclude.connections {
            return;
        }
        for (i, c) in merged.connected.iter().enumerate().skip(offset) {
            let l = lines::connection(&self.ctx, i + 1, c, &merged);
            self.line(&l);
        }
    }

    /// The context of the CSV lines: for the server's test back (`-r`) the iperf 2
    /// server is that connection's client, so its address comes first and the sums are
    /// of what this side received, as a server's.
    fn csv_ctx(&self) -> Iperf2Ctx {
        Iperf2Ctx {
            client: self.client_sends(),
            ..self.ctx.clone()
        }
    }

    /// Whether this side sends in the test being rendered: the client, but for the
    /// server's test back (`-r`).
    fn client_sends(&self) -> bool {
        self.ctx.client && self.first.is_none()
    }

    fn line(&mut self, s: &str) {
        (self.write)(&format!("{s}\n"));
    }

    /// A column header, the first time it is due.
    fn header_once(&mut self, h: &'static str) {
        if !h.is_empty() && !self.headers.contains(&h) {
            self.headers.push(h);
            self.line(h);
        }
    }

    fn mss(&self) -> Option<u32> {
        self.start
            .as_ref()
            .and_then(|s| s.tcp_mss.or(s.tcp_mss_default))
    }

    fn no(&self, socket: i64) -> usize {
        super::stream_no(self.start.as_ref(), socket)
    }

    /// A stream row's `[  1] `, or for what a `-R` client receives `[ *1] `, as iperf
    /// 2.2.1's client labels its reverse reader's rows.
    fn row_id(&self, socket: i64, sender: bool) -> String {
        let reverse = self
            .start
            .as_ref()
            .is_some_and(|s| s.test_start.reverse != 0);
        let no = self.no(socket);
        match self.ctx.client && reverse && !sender {
            true => format!("[{:>3}] ", format!("*{no}")),
            false => super::id(no),
        }
    }

    fn started(&mut self, s: &Start) {
        if self.ctx.client && self.start.is_some() {
            return self.started_back(s);
        }
        self.start = Some(s.clone());
        if self.ctx.layout == Layout::Csv {
            return;
        }
        if !self.ctx.exclude.settings {
            for l in lines::header(&self.ctx, s) {
                self.line(&l);
            }
        }
        if self.ctx.exclude.connections {
            return;
        }
        for (i, c) in s.connected.iter().enumerate() {
            let l = lines::connection(&self.ctx, i + 1, c, s);
            self.line(&l);
        }
    }

    fn interval(&mut self, iv: &Interval) {
        for s in &iv.streams {
            let row = Row::of_stream(s);
            if let (Some(o), false, false) = (row.owd, s.sender, s.omitted) {
                let run = self.owd_run.get(&s.socket).copied();
                self.owd_run.insert(s.socket, merge_latency(run, o));
            }
            self.last.insert(s.socket, row);
        }
        if iv.streams.iter().all(|s| s.omitted) || self.ctx.exclude.data {
            return;
        }
        if self.ctx.layout == Layout::Csv {
            let ls = csv::interval(&self.csv_ctx(), self.start.as_ref(), iv);
            for l in ls {
                self.line(&l);
            }
            return;
        }
        let hide_streams = self.ctx.sum_only && iv.streams.len() > 1;
        for s in iv.streams.iter().filter(|_| !hide_streams) {
            let kind = lines::kind(&self.ctx, s.sender);
            self.header_once(lines::column_header(kind));
            let l = lines::row(
                kind,
                &self.row_id(s.socket, s.sender),
                &Row::of_stream(s),
                &self.facts(false, false),
            );
            self.line(&l);
        }
        let n = iv
            .streams
            .iter()
            .filter(|s| s.sender == iv.sum.sender)
            .count();
        if n > 1 {
            let kind = lines::kind(&self.ctx, iv.sum.sender);
            self.header_once(lines::sum_header(kind));
            let l = lines::row(
                kind,
                &format!("[SUM-{n}] "),
                &Row::of_sum(&iv.sum),
                &self.facts(true, false),
            );
            self.line(&l);
        }
        if self.dual_udp && !hide_streams {
            let rows: Vec<Row> = iv.streams.iter().map(Row::of_stream).collect();
            self.dual_sum(&rows, false);
        }
    }

    fn facts(&self, sum: bool, at_end: bool) -> lines::Facts {
        lines::Facts {
            sum,
            at_end,
            mss: self.mss(),
            len: self
                .start
                .as_ref()
                .map_or(self.ctx.datagram_len, |s| s.test_start.blksize),
            bounceback: self.ctx.bounceback,
        }
    }

    fn end(&mut self, end: &End) {
        if self.ctx.layout == Layout::Csv {
            for l in csv::end(&self.csv_ctx(), self.start.as_ref(), end) {
                self.line(&l);
            }
            return;
        }
        if self.ctx.exclude.data {
            return;
        }
        let mut sent_streams = 0;
        let streams_shown = !(self.ctx.sum_only && end.streams.len() > 1);
        // UDP -d: the whole test's rows of both directions (for their sum), the
        // datagrams both ways, and the Server Report, which follows the sum.
        let (mut dual_rows, mut dual_sent, mut report) = (Vec::new(), 0, Vec::new());
        for (i, st) in end.streams.iter().enumerate() {
            let sends = end
                .local
                .senders
                .get(i)
                .copied()
                .unwrap_or(self.client_sends());
            sent_streams += usize::from(sends);
            // The client sends on this stream when this side is the client and sends,
            // or the server and receives.
            let client_sends = sends == self.ctx.client;
            let Some((socket, mut row)) = end_row(end, i, st, (sends, client_sends), &self.last)
            else {
                continue;
            };
            if row.owd.is_none() && !sends {
                row.owd = self.owd_run.get(&socket).copied();
            }
            let kind = lines::kind(&self.ctx, sends);
            if streams_shown {
                self.header_once(lines::column_header(kind));
                let id = self.row_id(socket, sends);
                let l = lines::row(kind, &id, &row, &self.facts(false, true));
                self.line(&l);
            }
            if self.dual_udp {
                dual_sent += match (sends, row.udp_recv) {
                    (false, Some(u)) => u.packets,
                    _ => 0,
                };
                dual_rows.push(row);
            }
            if self.ctx.udp && sends {
                // -x V leaves the server's part out, not what this side sent.
                // A client prints the Server Report only when one came (the stream's
                // receiver figures are the server's): without one, iperf 2's client
                // warns on stderr and prints none, and netmeter's figures would be
                // its own sender's.
                let reported =
                    !self.ctx.client || st.udp.as_ref().is_some_and(|u| u.netmeter.is_some());
                let server = end_row(end, i, st, (false, client_sends), &self.last)
                    .map(|(_, r)| r)
                    .filter(|_| !self.ctx.exclude.server_reports && reported);
                // iperf 2's client counts its FIN (which netmeter's count holds) and
                // then its reporter's end-of-test record as datagrams: `EndJob` pushes a
                // packet (id -1, not empty) that `reporter_compute_packet_pps` counts
                // (2.1.8 and 2.2.1's `src/Reporter.c`). Its "Sent N" is one more.
                let sent = st
                    .udp
                    .as_ref()
                    .map(|u| u.packets + u64::from(self.ctx.client));
                let no = self.no(socket);
                let mut ls = lines::server_report(no, sent, self.ctx.layout, server.as_ref());
                if self.dual_udp {
                    dual_sent += sent.unwrap_or(0);
                    report.extend(ls.split_off(usize::from(sent.is_some()).min(ls.len())));
                }
                for l in ls {
                    self.line(&l);
                }
            }
        }
        if self.dual_udp {
            self.dual_sum(&dual_rows, true);
            if dual_rows.len() > 1 {
                self.line(&format!(
                    "[SUM-{}] Sent {dual_sent} datagrams",
                    dual_rows.len()
                ));
            }
            for l in report {
                self.line(&l);
            }
        }
        let n = if self.client_sends() {
            sent_streams
        } else {
            end.streams.len() - sent_streams
        };
        if n > 1 {
            let sends = self.client_sends();
            if let Some(row) = end_sum_row(end, sends) {
                let kind = lines::kind(&self.ctx, sends);
                self.header_once(lines::sum_header(kind));
                let l = lines::row(kind, &format!("[SUM-{n}] "), &row, &self.facts(true, true));
                self.line(&l);
            }
        }
    }
}

/// Two spans' one-way delay figures as one (`run` so far, then `next`): counts added,
/// the extremes kept, the mean weighted by count and the standard deviation pooled
/// (each part's spread about its own mean plus its mean's distance from the whole's).
/// The percentiles, which iperf 2's rows do not print, are the larger part's.
fn merge_latency(run: Option<LatencyStats>, next: LatencyStats) -> LatencyStats {
    let Some(a) = run.filter(|a| a.count > 0) else {
        return next;
    };
    if next.count == 0 {
        return a;
    }
    let (na, nb) = (a.count as f64, next.count as f64);
    let n = na + nb;
    let mean = (a.mean_ms * na + next.mean_ms * nb) / n;
    let ss = |l: &LatencyStats, k: f64| {
        (k - 1.0).max(0.0) * l.stdev_ms.powi(2) + k * (l.mean_ms - mean).powi(2)
    };
    let stdev = if n > 1.0 {
        ((ss(&a, na) + ss(&next, nb)) / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    let big = if a.count >= next.count { a } else { next };
    LatencyStats {
        count: a.count + next.count,
        min_ms: a.min_ms.min(next.min_ms),
        mean_ms: mean,
        stdev_ms: stdev,
        max_ms: a.max_ms.max(next.max_ms),
        ..big
    }
}

/// The whole test's sum row of one direction.
fn end_sum_row(end: &End, sender: bool) -> Option<Row> {
    let f = end.netmeter.iperf2_figures.as_ref();
    let (sum, figs) = if sender {
        (end.sum_sent.as_ref(), f.and_then(|f| f.sum_sent))
    } else {
        (end.sum_received.as_ref(), f.and_then(|f| f.sum_received))
    };
    let s = sum.or(end.sum.as_ref())?;
    Some(Row {
        start: s.start,
        end: s.end,
        seconds: s.seconds,
        bytes: s.bytes,
        retransmits: s.retransmits,
        udp_recv: s.udp_recv,
        figures: figs.unwrap_or_default(),
        ..Row::default()
    })
}

impl Observer for Iperf2Renderer {
    fn on(&mut self, event: Event<'_>) {
        match event {
            Event::Listening { port, .. } => self.listening(port),
            Event::Started(s) => self.started(s),
            Event::Interval(iv) => self.interval(iv),
            Event::End(e) => self.end(e),
            _ => {}
        }
    }
}

#[cfg(test)]
mod merge_tests {
    use super::*;

    fn stats(v: &[f64]) -> LatencyStats {
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
        LatencyStats {
            count: v.len() as u64,
            min_ms: v.iter().copied().fold(f64::INFINITY, f64::min),
            mean_ms: mean,
            stdev_ms: var.sqrt(),
            max_ms: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            ..LatencyStats::default()
        }
    }

    /// Merging two spans' figures gives the figures of all their samples.
    #[test]
    fn merged_spans_are_the_whole() {
        let (a, b) = ([1.0, 2.0, 4.0], [10.0, 11.0]);
        let all: Vec<f64> = a.iter().chain(b.iter()).copied().collect();
        let m = merge_latency(Some(stats(&a)), stats(&b));
        let w = stats(&all);
        assert_eq!((m.count, m.min_ms, m.max_ms), (5, 1.0, 11.0));
        assert!((m.mean_ms - w.mean_ms).abs() < 1e-9, "{m:?} {w:?}");
        assert!((m.stdev_ms - w.stdev_ms).abs() < 1e-9, "{m:?} {w:?}");
        assert_eq!(merge_latency(None, stats(&b)).count, 2);
    }
}
