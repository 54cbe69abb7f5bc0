//! What an iperf 2.2.1 server prints for one test, as `netmeter iperf2 -s` prints it:
//! the connection line, then (with `-i`) a row per interval and the whole test's row,
//! in the plain, `-e` or `-y C` layout (`lines`, `csv`).
//!
//! Pure: the server's loops tell a [`ServerTest`] what they read and when (`t`, seconds
//! since the test's first byte, on the server's clock) and print the lines it returns.
//! An interval's row is due when the first read (or tick) at or after its end comes, as
//! iperf 2's reporter rolls its intervals on the packets' times; a last part-interval
//! with data gets its row before the whole test's, as iperf 2's does.

use super::lines::{self, Facts};
use super::{Iperf2Ctx, Layout, Row};
use crate::latency::LatencyStats;
use crate::report::{Connected, Iperf2Figures, Start, UdpRecvFigures};
use crate::stats::{READ_BINS, read_bin};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// The settings header an iperf 2 server prints once, when it starts listening: `blk`
/// is its read length, `rcvbuf` its sockets' receive buffer (bytes, 0: not known).
/// With `--histograms`, the line saying so before the buffer size's.
pub fn banner(ctx: &Iperf2Ctx, blk: u64, rcvbuf: u64, hist: Option<&HistSpec>) -> Vec<String> {
    if ctx.layout == Layout::Csv || ctx.exclude.settings {
        return Vec::new();
    }
    let mut s = Start::default();
    s.test_start.blksize = blk;
    s.rcvbuf_actual = rcvbuf;
    let mut out = lines::header(ctx, &s);
    if let Some(h) = hist {
        let at = out.len() - if rcvbuf > 0 { 2 } else { 1 };
        out.insert(at, h.header_line());
    }
    out
}

/// What `netmeter iperf2 -s` prints with: the layout and `--histograms`.
#[derive(Debug, Clone)]
pub struct ServerLayout {
    pub ctx: Iperf2Ctx,
    pub histograms: Option<HistSpec>,
}

/// A UDP receiver's counts over an interval or the whole test, as its accounting has
/// them (cumulative: [`ServerTest::udp`] takes the differences).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UdpCounts {
    /// Datagrams received (each counted once).
    pub received: u64,
    /// Datagrams the sequence numbers say were sent (received + lost).
    pub expected: u64,
    pub lost: u64,
    pub out_of_order: u64,
    pub jitter_ms: f64,
}

/// iperf 2's `--histograms[=WIDTH[u|m][,BINS[,LOWER[,UPPER]]]]` on a server: the bin
/// width in microseconds or milliseconds, the bin count and the two percentiles its
/// lines name (`Settings.cpp`; a bare `--histograms` is 100 µs bins, 100000 of them,
/// 5 and 95, as iperf 2.2.1's server prints it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistSpec {
    /// Bin width in `per_s` units.
    pub width: u32,
    /// 1e6 (µs bins) or 1e3 (ms bins).
    pub per_s: f64,
    pub bins: u32,
    pub ci_lower: f64,
    pub ci_upper: f64,
}

/// The most bins a histogram may have (iperf 2 allocates them all; here they are kept
/// sparse, but a line lists each bin that counted, so the count is bounded).
pub const MAX_HIST_BINS: u32 = 1_000_000;

impl Default for HistSpec {
    fn default() -> Self {
        HistSpec {
            width: 100,
            per_s: 1e6,
            bins: 100_000,
            ci_lower: 5.0,
            ci_upper: 95.0,
        }
    }
}

impl HistSpec {
    /// The option's value (`""`: the defaults); `Err` names what is wrong.
    pub fn parse(v: &str) -> Result<HistSpec, String> {
        let mut h = HistSpec::default();
        if v.is_empty() {
            return Ok(h);
        }
        let mut parts = v.split(',').map(str::trim);
        let first = parts.next().unwrap_or("");
        let (num, per_s) = match (first.strip_suffix('m'), first.strip_suffix('u')) {
            (Some(n), _) => (n, 1e3),
            (_, Some(n)) => (n, 1e6),
            _ => (first, 1e6),
        };
        h.per_s = per_s;
        h.width = num.parse().ok().filter(|&w| w > 0).ok_or_else(|| {
            format!("bin width {first:?} is not a whole number of u or m above 0")
        })?;
        if let Some(b) = parts.next() {
            h.bins = b
                .parse()
                .ok()
                .filter(|&n| n > 0 && n <= MAX_HIST_BINS)
                .ok_or_else(|| format!("bin count {b:?} is not 1..={MAX_HIST_BINS}"))?;
        }
        let pct = |p: Option<&str>, d: f64| -> Result<f64, String> {
            match p {
                None => Ok(d),
                Some(p) => p
                    .parse::<f64>()
                    .ok()
                    .filter(|x| (0.0..=100.0).contains(x))
                    .ok_or_else(|| format!("percentile {p:?} is not 0..100")),
            }
        };
        h.ci_lower = pct(parts.next(), h.ci_lower)?;
        h.ci_upper = pct(parts.next(), h.ci_upper)?;
        Ok(h)
    }

    /// The settings header's line.
    pub fn header_line(&self) -> String {
        format!(
            "Enabled receive histograms bin-width={:.3} ms, bins={} (clients should use --trip-times)",
            f64::from(self.width) / self.per_s * 1e3,
            self.bins
        )
    }
}

/// The histogram lines of `text` (which `shape::shapes` leaves out), masked: numbers
/// and the list of bins that counted (whose length is the run's, not the layout's)
/// become `#`; a run of the same shape once.
pub fn pdf_shapes(text: &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for l in text.lines().filter(|l| l.contains("-PDF:")) {
        let mut l = l.to_string();
        if let (Some(a), Some(b)) = (l.find(")="), l.rfind(" ("))
            && a + 2 <= b
        {
            l.replace_range(a + 2..b, "#");
        }
        let m = super::shape::mask(&l);
        if v.last() != Some(&m) {
            v.push(m);
        }
    }
    v
}

/// One span's delays in bins (sparse), as iperf 2's `histogram_insert` counts them.
#[derive(Debug, Clone, Default)]
struct Hist {
    bins: std::collections::BTreeMap<u32, u64>,
    population: u64,
    below: u64,
    above: u64,
    /// The largest delay (seconds) and the client's send time of its write (µs since
    /// the epoch).
    max: Option<(f64, i64)>,
}

impl Hist {
    fn add(&mut self, spec: &HistSpec, owd_s: f64, sent_us: i64) {
        self.population += 1;
        if self.max.is_none_or(|(m, _)| owd_s > m) {
            self.max = Some((owd_s, sent_us));
        }
        let bin = (spec.per_s * owd_s / f64::from(spec.width)).floor();
        if bin < 0.0 {
            self.below += 1;
        } else if bin >= f64::from(spec.bins) {
            self.above += 1;
        } else {
            *self.bins.entry(bin as u32).or_insert(0) += 1;
        }
    }

    /// iperf 2's `histogram_print`: `[  1] 0.0000-1.0000 sec T8-PDF: bin(w=100us):
    /// cnt(875)=1:875 (5.00/95.00/99.7%=1/1/1,Outliers=0,obl/obu=0/0) (0.082 ms/S.US)`.
    fn line(&self, spec: &HistSpec, prefix: &str, name: &str, fin: bool) -> String {
        let pop = self.population;
        let (mut lower, mut upper, mut upper3) = (0u32, 0u32, 0u32);
        let (mut fence_lower, mut fence_upper, mut outside, mut outliers) =
            (0u32, 0u32, 0u32, 0u64);
        let mut running = 0u64;
        let mut listed = Vec::new();
        for (&ix, &n) in &self.bins {
            running += n;
            let share = running as f64 / pop.max(1) as f64;
            if lower == 0 && share > spec.ci_lower / 100.0 {
                lower = ix + 1;
            }
            // 10% and 90% are the inner fences; three times their distance past the
            // upper one, a bin's delays are outliers.
            if share < 0.1 {
                fence_lower = ix + 1;
            }
            if share < 0.9 {
                fence_upper = ix + 1;
            } else if outside == 0 {
                outside = fence_upper + 3 * (fence_upper - fence_lower.min(fence_upper));
            } else if ix > outside {
                outliers += n;
            }
            if upper == 0 && share > spec.ci_upper / 100.0 {
                upper = ix + 1;
            }
            if upper3 == 0 && share > 0.997 {
                upper3 = ix + 1;
            }
            listed.push(format!("{}:{n}", ix + 1));
        }
        if upper == 0 {
            upper = spec.bins;
        }
        if upper3 == 0 {
            upper3 = spec.bins;
        }
        let unit = if spec.per_s == 1e3 { "ms" } else { "us" };
        let cis = if spec.ci_upper > 99.7 {
            format!(
                "{:.2}/99.7/{:.2}/%={lower}/{upper3}/{upper}",
                spec.ci_lower, spec.ci_upper
            )
        } else {
            format!(
                "{:.2}/{:.2}/99.7%={lower}/{upper}/{upper3}",
                spec.ci_lower, spec.ci_upper
            )
        };
        let mut l = format!(
            "{prefix} {name}{}-PDF: bin(w={}{unit}):cnt({pop})={} ({cis},Outliers={outliers},obl/obu={}/{})",
            if fin { "(f)" } else { "" },
            spec.width,
            listed.join(","),
            self.below,
            self.above
        );
        if let Some((m, ts)) = self.max.filter(|(m, _)| *m > 0.0) {
            l.push_str(&format!(
                " ({:.3} ms/{}.{:06})",
                m * 1e3,
                ts.div_euclid(1_000_000),
                ts.rem_euclid(1_000_000)
            ));
        }
        l
    }
}

/// What was read over one span.
#[derive(Debug, Clone, Default)]
struct Tally {
    bytes: u64,
    reads: u64,
    /// A sending test's send calls that succeeded and failed.
    writes: u64,
    write_errors: u64,
    bins: [u64; READ_BINS],
    delays: Delays,
    hist: Option<Hist>,
    /// UDP `--isochronous`: frames counted and lost, iperf 2.2.1's way
    /// ([`ServerTest::frame`]), and the latencies of the frames timed.
    frames: u64,
    frames_lost: u64,
    frame_delays: Delays,
}

/// One-way delays over one span, seconds (Welford's running mean and square sum).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Delays {
    n: u64,
    mean: f64,
    m2: f64,
    min: f64,
    max: f64,
}

impl Delays {
    fn add(&mut self, s: f64) {
        if self.n == 0 {
            (self.min, self.max) = (s, s);
        }
        self.n += 1;
        let d = s - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (s - self.mean);
        self.min = self.min.min(s);
        self.max = self.max.max(s);
    }

    /// Another span's delays added to these (Chan's pairwise update of the mean and
    /// the square sum), as a `-P` sum pools its members' datagrams.
    fn merge(&mut self, o: &Delays) {
        if o.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *o;
            return;
        }
        let n = (self.n + o.n) as f64;
        let d = o.mean - self.mean;
        self.m2 += o.m2 + d * d * self.n as f64 * o.n as f64 / n;
        self.mean += d * o.n as f64 / n;
        self.n += o.n;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    /// In milliseconds, as the rows print them (none without a delay).
    fn stats(&self) -> Option<LatencyStats> {
        let sd = if self.n > 1 {
            (self.m2 / (self.n - 1) as f64).sqrt()
        } else {
            0.0
        };
        (self.n > 0).then(|| LatencyStats {
            count: self.n,
            min_ms: self.min * 1e3,
            mean_ms: self.mean * 1e3,
            stdev_ms: sd * 1e3,
            max_ms: self.max * 1e3,
            ..LatencyStats::default()
        })
    }
}

/// One test's rows on an iperf 2 server.
pub struct ServerTest {
    ctx: Iperf2Ctx,
    /// The connection (its one `connected` entry) and when it was accepted.
    start: Start,
    /// iperf 2's transfer id.
    no: usize,
    /// `-i` seconds (0: no interval rows).
    interval_s: f64,
    /// The read length (`Reads=Dist`'s bins are its eighths).
    blk: u64,
    begun: f64,
    next_end: f64,
    cur: Tally,
    total: Tally,
    /// UDP: the counts at the start of the current interval, and the latest.
    udp_mark: UdpCounts,
    udp_now: Option<UdpCounts>,
    header_done: bool,
    /// `--histograms`: the delays' T8 (UDP) or F8 (TCP writes) lines.
    hist: Option<HistSpec>,
    /// The server sends in this test (`-R`): its rows are a sender's.
    sending: bool,
    /// `-P`: the group's sum, told each row's span; its rows follow this one's.
    sum: Option<Arc<Mutex<SumRows>>>,
    /// This test's key among the sum's members (its transfer id; the sending half of a
    /// `--full-duplex` test has one of its own).
    sum_key: usize,
    /// The row label when not `[  N] ` (`[ *N] `: a `--full-duplex` test's sending half).
    label: Option<String>,
    /// The receiving half of a `--full-duplex` test: its connection line says so.
    full_duplex: bool,
    /// The sending half of a `--full-duplex` test: no connection line of its own.
    fd_sending: bool,
    /// A UDP sender's datagrams (its end included), printed after its whole-test row.
    sent_n: Option<u64>,
    /// The `-d`/`-r` connection back to the client's listener: the settings header
    /// iperf 2 prints for it (as a client's).
    back: Option<BackHeader>,
    /// UDP `--isochronous`: the last frame id counted (0: none yet).
    last_frame: u32,
    /// A TCP sender's segments retransmitted since its connection opened, latest
    /// ([`ServerTest::retransmits`]), and at the current interval's start.
    retrans: Option<u64>,
    retrans_mark: u64,
}

/// What the settings header of a `-d`/`-r` connection back names: the client's
/// listener, the write size and the socket's send buffer (bytes; 0: not known).
#[derive(Debug, Clone)]
pub struct BackHeader {
    pub host: String,
    pub port: u16,
    pub write_len: u64,
    pub sndbuf: u64,
    /// UDP: the rate it sends at, bits/s (the header's IPG target).
    pub rate_bps: u64,
    /// TCP: the connection's congestion control (`TCP congestion control using X`).
    pub congestion: Option<String>,
}

/// What one member's row counted, for the `-P` sum.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Span {
    pub begin: f64,
    pub end: f64,
    pub bytes: u64,
    pub reads: u64,
    pub bins: [u64; READ_BINS],
    /// The member's whole test (its last span).
    pub whole: bool,
    /// UDP: the span's datagrams lost, expected (received + lost) and out of order.
    pub lost: u64,
    pub expected: u64,
    pub out_of_order: u64,
    /// UDP: the span's one-way delays (the sum's `Latency avg/min/max`).
    pub delays: Delays,
    /// A TCP sender's segments retransmitted in the span (0: not known).
    pub retransmits: u64,
}

/// One interval's sum so far.
#[derive(Debug, Clone, Default)]
struct Slot {
    span: Span,
    started: bool,
}

impl Slot {
    fn add(&mut self, x: &Span) {
        let s = &mut self.span;
        if !self.started {
            s.begin = x.begin;
            s.end = x.end;
            self.started = true;
        }
        s.begin = s.begin.min(x.begin);
        s.end = s.end.max(x.end);
        s.bytes = s.bytes.saturating_add(x.bytes);
        s.reads = s.reads.saturating_add(x.reads);
        for (a, b) in s.bins.iter_mut().zip(x.bins) {
            *a = a.saturating_add(b);
        }
        s.lost = s.lost.saturating_add(x.lost);
        s.expected = s.expected.saturating_add(x.expected);
        s.out_of_order = s.out_of_order.saturating_add(x.out_of_order);
        s.delays.merge(&x.delays);
        s.retransmits = s.retransmits.saturating_add(x.retransmits);
    }
}

/// The sum rows of a `-P N` test an iperf 2 server receives, TCP or UDP (or, TCP,
/// sends: [`SumRows::of_senders`]): an interval's
/// once every member's row of it came (a member whose next row is a later interval's,
/// or who ended, had none), and the whole test's once every member ended, as iperf
/// 2.2.1's server prints them: with `-e` `[SUM-N]` rows under a `[SUM-cnt]` header
/// (UDP: lost/total, the latency's avg/min/max, PPS), plain `[SUM]` rows (UDP: under
/// the plain `[ ID]` header, with lost/total), in CSV a line of transfer id -1 (the
/// client's address with port 0, then the server's, `0.0.0.0` for UDP); after a UDP
/// test's whole sum the datagrams out of order, when any were.
/// Pure: the members' [`Span`]s in, lines out.
#[derive(Debug, Clone)]
pub struct SumRows {
    ctx: Iperf2Ctx,
    members: usize,
    interval_s: f64,
    /// Per member (its transfer id): the last interval it had a row of, and whether
    /// it ended.
    progress: HashMap<usize, (Option<u64>, bool)>,
    slots: BTreeMap<u64, Slot>,
    whole: Slot,
    header_done: bool,
    /// The members' column headers printed (each once for the group, as iperf 2 does).
    member_headers: Vec<&'static str>,
    /// A `--full-duplex` test's halves, transfer id N: `[FDN]` rows (`-e` only).
    fd: Option<usize>,
    /// The first member's connection and its time (seconds since the epoch): the CSV
    /// sum line's addresses.
    conn: Option<(Connected, u64)>,
    /// A `-R -P` test's: the members are this server's sending connections.
    senders: bool,
    /// Rows are not printed, only the members' column header shared ([`SumRows::headers_only`]).
    quiet: bool,
}

impl SumRows {
    /// The sum of `members` connections' rows, `-i interval_s`.
    pub fn new(ctx: Iperf2Ctx, members: u32, interval_s: f64) -> SumRows {
        SumRows {
            ctx,
            members: members as usize,
            interval_s: if interval_s.is_finite() && interval_s > 0.0 {
                interval_s
            } else {
                0.0
            },
            progress: HashMap::new(),
            slots: BTreeMap::new(),
            whole: Slot::default(),
            header_done: false,
            member_headers: Vec::new(),
            fd: None,
            conn: None,
            senders: false,
            quiet: false,
        }
    }

    /// The sum of a `-R -P N` test's members, the connections this server sends on, as
    /// iperf 2.2.1's server prints it: its receiver's sum layout (its sum report is
    /// made before the client's header says `-R`), the members' writes in the count
    /// (`-e`: `[SUM-N]` under `[SUM-cnt] ... Reads=Dist`, the bins what iperf 2 prints
    /// there: its TCP retry counters, which share the bins' memory, `sender_bins`), plain
    /// `[SUM]` rows; the CSV line names this server first, then the client with port 0
    /// (`testdata/iperf2/tcp_rev_p2*.server.txt`).
    pub fn of_senders(mut self) -> SumRows {
        self.senders = true;
        self
    }

    /// A `-P N` group iperf 2.2.1's server prints no sum of, whose members still share
    /// one column header: a UDP `-R -P` test's (with the flows' first datagrams at the
    /// same time its listener serves only one flow; served both, as from a client that
    /// sends its header again, it printed each flow's rows and no sum:
    /// `testdata/iperf2/udp_rev_p2*.server.txt`).
    pub fn headers_only(ctx: Iperf2Ctx, members: u32) -> SumRows {
        SumRows {
            quiet: true,
            ..SumRows::new(ctx, members, 0.0)
        }
    }

    /// The `[FDn]` rows of a `--full-duplex` test (transfer id `no`): its two halves'
    /// bytes (UDP: and datagrams, with PPS) added up, with `-e` only, as iperf 2.2.1's
    /// server prints them (plain and CSV have none).
    pub fn full_duplex(ctx: Iperf2Ctx, no: usize, interval_s: f64) -> SumRows {
        SumRows {
            fd: Some(no),
            ..SumRows::new(ctx, 2, interval_s)
        }
    }

    /// A member's connection (the first one told names the CSV sum line's addresses).
    fn note_member(&mut self, c: &Connected, timesecs: u64) {
        self.conn.get_or_insert_with(|| (c.clone(), timesecs));
    }

    /// Whether a member is the first to print this column header (the others do not).
    fn claim_member_header(&mut self, header: &'static str) -> bool {
        if self.member_headers.contains(&header) {
            return false;
        }
        self.member_headers.push(header);
        true
    }

    /// Member `no`'s row counted `x`: the sum rows now due.
    pub fn add(&mut self, no: usize, x: &Span) -> Vec<String> {
        if self.members < 2
            || (!self.progress.contains_key(&no) && self.progress.len() >= self.members)
        {
            return Vec::new();
        }
        let entry = self.progress.entry(no).or_insert((None, false));
        // A member's last part-interval row (its test ended inside the interval): iperf
        // 2.2.1 prints that interval's sum after the member's whole-test row, which
        // comes next.
        let mut part = false;
        if x.whole {
            entry.1 = true;
            self.whole.add(x);
        } else if self.interval_s > 0.0 {
            let k = (x.begin / self.interval_s + 1e-6).floor().max(0.0) as u64;
            entry.0 = Some(entry.0.map_or(k, |l| l.max(k)));
            part = x.end < (k + 1) as f64 * self.interval_s - 1e-6;
            self.slots.entry(k).or_default().add(x);
        }
        let mut out = Vec::new();
        while let Some((&k, _)) = self.slots.first_key_value().filter(|_| !part) {
            let complete = self.progress.len() == self.members
                && self
                    .progress
                    .values()
                    .all(|&(last, ended)| ended || last.is_some_and(|l| l >= k));
            if !complete {
                break;
            }
            if let Some(slot) = self.slots.remove(&k) {
                out.extend(self.row(&slot.span));
            }
        }
        let all_ended = self.progress.len() == self.members && self.progress.values().all(|p| p.1);
        if x.whole && all_ended && self.slots.is_empty() {
            let whole = Span {
                whole: true,
                ..self.whole.span
            };
            out.extend(self.row(&whole));
        }
        out
    }

    fn row(&mut self, x: &Span) -> Vec<String> {
        if self.ctx.exclude.data || self.quiet {
            return Vec::new();
        }
        if let Some(no) = self.fd {
            return self.fd_row(no, x);
        }
        let udp = self.ctx.udp;
        let seconds = x.end - x.begin;
        let recv = UdpRecvFigures {
            jitter_ms: 0.0,
            lost_packets: x.lost,
            packets: x.expected,
            lost_percent: if x.expected > 0 {
                100.0 * x.lost as f64 / x.expected as f64
            } else {
                0.0
            },
        };
        let row = Row {
            start: x.begin,
            end: x.end,
            seconds,
            bytes: x.bytes,
            udp_recv: udp.then_some(recv),
            out_of_order: udp.then_some(x.out_of_order),
            figures: Iperf2Figures {
                reads: Some(x.reads),
                read_bins: Some(match self.senders {
                    true => sender_bins(x),
                    false => x.bins,
                }),
                ..Iperf2Figures::default()
            },
            ..Row::default()
        };
        let mut out = Vec::new();
        match (self.ctx.layout, udp) {
            (Layout::Csv, _) => return vec![self.csv_line(&row)],
            (Layout::Enhanced, false) => {
                let kind = lines::Kind::TcpRead;
                if !std::mem::replace(&mut self.header_done, true) {
                    out.push(lines::column_header(kind).replacen("[ ID]", "[SUM-cnt]", 1));
                }
                let facts = Facts {
                    sum: true,
                    at_end: x.whole,
                    ..Facts::default()
                };
                let prefix = format!("[SUM-{}] ", self.members);
                out.push(lines::row(kind, &prefix, &row, &facts));
            }
            (Layout::Enhanced, true) => {
                if !std::mem::replace(&mut self.header_done, true) {
                    out.push(UDP_SUM_HEADER.to_string());
                }
                let l = x.delays.stats().unwrap_or_default();
                let pps = if seconds > 0.0 {
                    x.reads as f64 / seconds
                } else {
                    0.0
                };
                out.push(format!(
                    "[SUM-{}] {}  {}  {}/{} ({}%)  {:.3}/{:.3}/{:.3}  {pps:.0} pps",
                    self.members,
                    super::span(x.begin, x.end),
                    super::transfer(x.bytes, seconds),
                    x.lost,
                    x.expected,
                    super::g2(recv.lost_percent),
                    l.mean_ms,
                    l.min_ms,
                    l.max_ms
                ));
            }
            (Layout::Plain, false) => {
                out.push(lines::row(
                    lines::Kind::Plain,
                    "[SUM] ",
                    &row,
                    &Facts::default(),
                ));
            }
            (Layout::Plain, true) => {
                if !std::mem::replace(&mut self.header_done, true) {
                    out.push(lines::column_header(lines::Kind::Plain).to_string());
                }
                out.push(format!(
                    "{}   {}/{} ({}%)",
                    lines::row(lines::Kind::Plain, "[SUM] ", &row, &Facts::default()),
                    x.lost,
                    x.expected,
                    super::g2(recv.lost_percent)
                ));
            }
        }
        if udp && x.whole && x.out_of_order > 0 {
            out.push(format!(
                "[SUM] {}  {} datagrams received out-of-order",
                super::span(x.begin, x.end),
                x.out_of_order
            ));
        }
        out
    }

    /// A `--full-duplex` test's `[FDn]` row (`-e` only), under its header printed once.
    fn fd_row(&mut self, no: usize, x: &Span) -> Vec<String> {
        if self.ctx.layout != Layout::Enhanced {
            return Vec::new();
        }
        let mut out = Vec::new();
        if !std::mem::replace(&mut self.header_done, true) {
            out.push(if self.ctx.udp {
                UDP_FD_HEADER.to_string()
            } else {
                lines::column_header(lines::Kind::Plain).to_string()
            });
        }
        let seconds = x.end - x.begin;
        let head = format!(
            "[FD{no}] {}  {}",
            super::span(x.begin, x.end),
            super::transfer(x.bytes, seconds)
        );
        out.push(if self.ctx.udp {
            let pps = if seconds > 0.0 {
                x.reads as f64 / seconds
            } else {
                0.0
            };
            format!("{head} {}{pps:8.0} pps", x.reads)
        } else {
            head
        });
        out
    }

    /// The CSV sum line: transfer id -1, the client's address with port 0 and the
    /// server's (`0.0.0.0` for UDP), as iperf 2.2.1's server writes it.
    fn csv_line(&self, row: &Row) -> String {
        let mut start = Start::default();
        if let Some((c, secs)) = &self.conn {
            start.timestamp.timesecs = *secs;
            start.connected.push(if self.senders {
                // This server sent: its address first, then the client's with port 0.
                Connected {
                    socket: -1,
                    local_host: c.remote_host.clone(),
                    local_port: 0,
                    remote_host: c.local_host.clone(),
                    remote_port: c.local_port,
                }
            } else {
                Connected {
                    socket: -1,
                    local_host: if self.ctx.udp {
                        "0.0.0.0".to_string()
                    } else {
                        c.local_host.clone()
                    },
                    local_port: c.local_port,
                    remote_host: c.remote_host.clone(),
                    remote_port: 0,
                }
            });
        }
        super::csv::line(&self.ctx, Some(&start), -1, -1, row)
    }
}

impl ServerTest {
    /// A UDP `--isochronous --trip-times` client's test, received, in `-e`: iperf
    /// 2.2.1's frame columns (`udp_output_read_triptime_isoch`).
    fn isoch_trip(&self) -> bool {
        let c = &self.ctx;
        c.layout == Layout::Enhanced
            && c.udp
            && c.trip_times
            && c.isochronous.is_some()
            && !self.sending
    }
}

/// iperf 2.2.1's UDP isochronous trip-time receiver's header
/// (`report_bw_jitter_loss_enhanced_isoch_triptime_header`).
const UDP_ISOCH_TRIP_HEADER: &str = "[ ID] Interval            Transfer     Bandwidth        Jitter   Lost/Total Latency avg/min/max/stdev  PPS  Frame:rx/lost  Frame-latency avg/min/max/stdev  NetPwr";

/// Its row (`report_bw_jitter_loss_enhanced_isoch_format`): `... 0/882 (0%)
/// 0.133/0.000/7.198/0.959 ms 889 pps  61/0 0.294/0.060/7.217/0.995 ms 9380`; without
/// delays (`report_bw_jitter_loss_suppress_isoch_format`) the latencies are `-/-/-/-`.
fn isoch_trip_row(prefix: &str, r: &Row, x: &Tally) -> String {
    let head = format!(
        "{prefix}{}  {}",
        super::span(r.start, r.end),
        super::transfer(r.bytes, r.seconds)
    );
    let pps = r.figures.packets_per_second.unwrap_or(0.0);
    let frames = format!("{}/{}", x.frames, x.frames_lost);
    let jl = lines::jitter_loss(r);
    match (&r.owd, x.frame_delays.stats()) {
        (Some(l), frame) => format!(
            "{head}  {jl} {} ms {pps:.0} pps  {frames} {} ms {}",
            super::latency4(l),
            frame.map_or("-/-/-/-".to_string(), |f| super::latency4(&f)),
            lines::owd_power(r)
        ),
        (None, _) => format!("{head}  {jl} -/-/-/- ms {pps:.0} pps  {frames} -/-/-/- ms  -"),
    }
}

/// What iperf 2.2.1's server prints as the `Reads=Dist` bins of a `-R -P` sum: its sum
/// report keeps a receiver's layout, and a sender's call counters share the bins'
/// memory (`union SendReadStats` in `Reporter.h`: `ReadStats.bins[8]` lies over
/// `WriteStats.tcpstats` from `cwnd_packets` on), so the interval rows' bins are the
/// members' TCP retry counters summed: bin 2 `retry` and bin 4 `retry_tot`, both the
/// interval's retransmits (the sum resets its bins after each row), the others 0
/// (fields the sum does not add up); the whole test's row prints `totbins`, which lie
/// over fields the sum never sets: all 0. Retransmits not known count 0.
fn sender_bins(x: &Span) -> [u64; READ_BINS] {
    let mut b = [0; READ_BINS];
    if !x.whole {
        (b[2], b[4]) = (x.retransmits, x.retransmits);
    }
    b
}

/// The share of `-i` a test's last part-interval must exceed for iperf 2 to print its
/// row (`PARTIALPERCENT` in iperf 2.1.8 and 2.2.1).
const PARTIAL_SHARE: f64 = 0.25;

/// iperf 2.2.1's `[FDn]` header over UDP (`report_udp_fullduplex_header`).
const UDP_FD_HEADER: &str = "[ ID] Interval       Transfer     Bandwidth    Datagrams   PPS";

/// iperf 2.2.1's server's `[SUM-cnt]` header over UDP sums (`report_sumcnt_udp_enhanced_header`).
const UDP_SUM_HEADER: &str =
    "[SUM-cnt] Interval     Transfer     Bandwidth       Lost/Total  Latency avg/min/max  PPS";

impl ServerTest {
    /// A test on connection `c` (iperf 2's transfer id `no`), accepted at
    /// `accepted_ms` (milliseconds since the epoch, the connection line's time).
    pub fn new(ctx: Iperf2Ctx, no: usize, c: Connected, accepted_ms: u64, interval_s: f64) -> Self {
        let mut start = Start::default();
        start.connected.push(c);
        start.timestamp.timesecs = accepted_ms / 1000;
        start.timestamp.timemillisecs = accepted_ms % 1000;
        let blk = if ctx.datagram_len > 0 {
            ctx.datagram_len
        } else {
            128 * 1024
        };
        start.test_start.blksize = blk;
        let interval_s = if interval_s.is_finite() && interval_s > 0.0 {
            interval_s
        } else {
            0.0
        };
        ServerTest {
            ctx,
            start,
            no,
            interval_s,
            blk,
            begun: 0.0,
            next_end: interval_s,
            cur: Tally::default(),
            total: Tally::default(),
            udp_mark: UdpCounts::default(),
            udp_now: None,
            header_done: false,
            hist: None,
            sending: false,
            sum: None,
            sum_key: no,
            label: None,
            full_duplex: false,
            fd_sending: false,
            sent_n: None,
            back: None,
            last_frame: 0,
            retrans: None,
            retrans_mark: 0,
        }
    }

    /// The `-d`/`-r` connection this server opened back to the client's listener, on
    /// which it sends: iperf 2's client settings header (`Client connecting to`), the
    /// connection line with `(reverse)` and a sender's rows labelled `[ *N]`, as iperf
    /// 2.2.1's server prints them.
    pub fn connect_back(mut self, back: BackHeader) -> Self {
        self.sending = true;
        self.label = Some(format!("[{:>3}] ", format!("*{}", self.no)));
        self.back = Some(back);
        self
    }

    /// The receiving half of a `--full-duplex` test: the connection line says
    /// `(full-duplex)` (UDP: and `(no-udp-fin)`), and its rows and the sending half's
    /// feed `fd`, the test's `[FDn]` rows ([`SumRows::full_duplex`]).
    pub fn full_duplex(mut self, fd: Arc<Mutex<SumRows>>) -> Self {
        self.full_duplex = true;
        self.with_sum(fd)
    }

    /// The sending half of a `--full-duplex` test (the same transfer id as its
    /// receiving half): a sender's rows labelled `[ *N]`, no connection line, feeding
    /// the test's `[FDn]` rows, as iperf 2.2.1's server prints them.
    pub fn full_duplex_sending(mut self, fd: Arc<Mutex<SumRows>>) -> Self {
        self.sending = true;
        self.fd_sending = true;
        self.label = Some(format!("[{:>3}] ", format!("*{}", self.no)));
        self.sum_key = usize::MAX - self.no;
        self.with_sum(fd)
    }

    /// A member of a `-P` test: its rows are told to the group's `sum`, whose rows
    /// follow them, and the column header is the group's first member's only.
    pub fn with_sum(mut self, sum: Arc<Mutex<SumRows>>) -> Self {
        if let Ok(mut s) = sum.lock() {
            s.note_member(&self.start.connected[0], self.start.timestamp.timesecs);
        }
        self.sum = Some(sum);
        self
    }

    /// A test in which this server sends (the client's `-R`): the connection line says
    /// `(reverse)` (and for UDP `(no-udp-fin)`) without its time, as iperf 2.2.1's
    /// server prints it, and the rows are a sender's: with `-e` TCP's
    /// `Write/Err  Rtry  InF/Cwnd/RTT  NetPwr` (the TCP state `NA`: this server does
    /// not read it), UDP's `Write/Err/Timeo  PPS`.
    pub fn sending(mut self) -> Self {
        self.sending = true;
        self
    }

    /// With `--histograms`: a histogram line after each row, when the test's client
    /// sent its times (`--trip-times`), as iperf 2's server prints them.
    pub fn with_histograms(mut self, spec: Option<HistSpec>) -> Self {
        self.hist = spec.filter(|_| self.ctx.trip_times);
        if self.hist.is_some() {
            self.cur.hist = Some(Hist::default());
            self.total.hist = Some(Hist::default());
        }
        self
    }

    /// The connection line (none in CSV or with `-x C`).
    pub fn opening(&self) -> Vec<String> {
        if self.ctx.layout == Layout::Csv || self.ctx.exclude.connections {
            return Vec::new();
        }
        let c = &self.start.connected[0];
        if self.fd_sending {
            return Vec::new();
        }
        if let Some(b) = &self.back {
            let mut ctx = self.ctx.clone();
            ctx.client = true;
            ctx.host = b.host.clone();
            ctx.port = b.port;
            ctx.parallel = 1;
            let mut start = Start::default();
            start.test_start.blksize = b.write_len;
            start.sndbuf_actual = b.sndbuf;
            start.target_bitrate = b.rate_bps;
            start.netmeter.tcp_congestion = b.congestion.clone();
            let mut out = if self.ctx.exclude.settings {
                Vec::new()
            } else {
                lines::header(&ctx, &start)
            };
            let mut untimed = self.start.clone();
            untimed.timestamp = Default::default();
            let line = lines::connection(&self.ctx, self.no, c, &untimed);
            let label = self.label.as_deref().unwrap_or_default().trim_end();
            let id = super::id(self.no);
            out.push(format!(
                "{} (reverse)",
                line.replacen(id.trim_end(), label, 1)
            ));
            return out;
        }
        if self.full_duplex {
            let mut line = lines::connection(&self.ctx, self.no, c, &self.start);
            let mut fd = " (full-duplex)".to_string();
            if self.ctx.udp {
                fd.push_str(" (no-udp-fin)");
            }
            let at = line.rfind(" on ").unwrap_or(line.len());
            line.insert_str(at, &fd);
            return vec![line];
        }
        if !self.sending {
            return vec![lines::connection(&self.ctx, self.no, c, &self.start)];
        }
        let mut untimed = self.start.clone();
        untimed.timestamp = Default::default();
        let mut line = lines::connection(&self.ctx, self.no, c, &untimed);
        line.push_str(" (reverse)");
        if self.ctx.udp {
            line.push_str(" (no-udp-fin)");
        }
        vec![line]
    }

    /// A send call at `t` that sent `len` bytes (`ok`) or failed: the rows of the
    /// intervals that ended before it, then the call counted.
    pub fn write(&mut self, len: usize, ok: bool, t: f64) -> Vec<String> {
        let out = self.tick(t);
        for x in [&mut self.cur, &mut self.total] {
            if ok {
                x.bytes = x.bytes.saturating_add(len as u64);
                x.writes += 1;
            } else {
                x.write_errors += 1;
            }
        }
        out
    }

    /// A UDP sender's test ended at `t` having sent `n` datagrams (its end included):
    /// its last rows, the `Sent N datagrams` line after its whole-test row (before the
    /// `[FDn]` row a `--full-duplex` test's whole ends with).
    pub fn finish_sent(&mut self, t: f64, n: u64) -> Vec<String> {
        self.sent_n = Some(n);
        self.finish(t)
    }

    /// A UDP `-d`/`-r` connection back: the report the client's listener answered its
    /// end with (`server`), as iperf 2.2.1's server prints it (`[  N] Server Report:`,
    /// the header, the row labelled `[ *N]`; none in CSV or with `-x V`).
    pub fn listener_report(&self, server: &Row) -> Vec<String> {
        if self.ctx.layout == Layout::Csv || self.ctx.exclude.server_reports {
            return Vec::new();
        }
        let mut out = lines::server_report(self.no, None, self.ctx.layout, Some(server));
        if let (Some(last), Some(label)) = (out.last_mut(), self.label.as_deref()) {
            *last = last.replacen(super::id(self.no).as_str(), label, 1);
        }
        out
    }

    /// A UDP sender's last line, after the whole test's row: the datagrams it sent,
    /// its end included (`[  1] Sent N datagrams`; none in CSV).
    pub fn sent_datagrams(&self, n: u64) -> Vec<String> {
        if self.ctx.layout == Layout::Csv || self.ctx.exclude.data {
            return Vec::new();
        }
        vec![format!("{}Sent {n} datagrams", super::id(self.no))]
    }

    /// A read of `len` bytes (asking for `asked`) at `t`: the rows of the intervals that
    /// ended before it, then the read counted.
    pub fn read(&mut self, len: usize, asked: usize, t: f64) -> Vec<String> {
        let out = self.tick(t);
        let bin = read_bin(len, asked);
        for x in [&mut self.cur, &mut self.total] {
            x.bytes = x.bytes.saturating_add(len as u64);
            x.reads += 1;
            x.bins[bin] += 1;
        }
        out
    }

    /// A UDP receiver's datagram of `len` bytes at `t`, with its accounting's counts
    /// after it.
    pub fn udp(&mut self, len: usize, counts: UdpCounts, t: f64) -> Vec<String> {
        let out = self.read(len, len, t);
        self.udp_now = Some(counts);
        out
    }

    /// A one-way delay (seconds: this host's wall clock at arrival minus the client's
    /// time stamp) measured at the last read: a UDP datagram's, or a `--trip-times`
    /// TCP write's.
    /// `sent_us`: the client's send time, µs since the epoch (a histogram line names
    /// its largest delay's).
    pub fn delay(&mut self, owd_s: f64, sent_us: i64) {
        if !owd_s.is_finite() {
            return;
        }
        for x in [&mut self.cur, &mut self.total] {
            x.delays.add(owd_s);
            if let (Some(h), Some(spec)) = (x.hist.as_mut(), self.hist.as_ref()) {
                h.add(spec, owd_s, sent_us);
            }
        }
    }

    /// A UDP `--isochronous` datagram that completed frame `frame_id` (its last, the
    /// frame following the one before it: `wire::iperf2::IsochPayload::ends_frame`),
    /// `latency_s` after the frame was due (`IsochPayload::frame_latency_s`), counted as
    /// iperf 2.2.1's server counts frames (`Reporter.c`,
    /// `reporter_handle_isoch_oneway_transit_udp`), so the `Frame:rx/lost` column
    /// matches the client's `isoch:tx` as between two iperf 2s: the count starts at one
    /// and each frame adds one (the first frame is counted twice, as the client counts
    /// its first too); a frame one after the last counted is timed; a jump of n ids
    /// counts n lost (not n - 1).
    pub fn frame(&mut self, frame_id: u32, latency_s: f64) {
        let first = self.last_frame == 0;
        let jump = frame_id.wrapping_sub(self.last_frame);
        for x in [&mut self.cur, &mut self.total] {
            // Saturating: the ids are the client's to choose.
            x.frames = x.frames.saturating_add(1 + u64::from(first));
            if jump == 1 && latency_s.is_finite() {
                x.frame_delays.add(latency_s);
            } else if jump > 1 && jump < u32::MAX / 2 {
                x.frames_lost = x.frames_lost.saturating_add(u64::from(jump));
            }
        }
        self.last_frame = frame_id;
    }

    /// A TCP sender's segments retransmitted since its connection opened (TCP_INFO's
    /// `tcpi_total_retrans`), told before the call that ends an interval: its rows'
    /// `Rtry`, and a `-R -P` sum's bins as iperf 2 prints them ([`SumRows::of_senders`]).
    pub fn retransmits(&mut self, total: u64) {
        self.retrans = Some(total);
    }

    /// Whether something told at `t` ends an interval (its row may be due).
    pub fn row_due(&self, t: f64) -> bool {
        self.interval_s > 0.0 && t >= self.next_end
    }

    /// The rows of the intervals that ended by `t`.
    pub fn tick(&mut self, t: f64) -> Vec<String> {
        let mut out = Vec::new();
        // Bounded: a test idle for a long time gets one row per interval it skipped,
        // at most this many at once.
        let mut left = 10_000;
        while self.interval_s > 0.0 && t >= self.next_end && left > 0 {
            let (b, e) = (self.begun, self.next_end);
            // An interval in which nothing arrived has no row (iperf 2's reporter
            // rolls its intervals on arrivals).
            let cur = std::mem::take(&mut self.cur);
            self.cur.hist = cur.hist.as_ref().map(|_| Hist::default());
            if cur.reads + cur.writes + cur.write_errors > 0 {
                out.extend(self.row_of(b, e, &cur, false));
            }
            self.udp_mark = self.udp_now.unwrap_or_default();
            self.retrans_mark = self.retrans.unwrap_or(self.retrans_mark);
            self.begun = e;
            self.next_end = e + self.interval_s;
            left -= 1;
        }
        out
    }

    /// The test ended at `t`: the last part-interval's row (when it read anything and
    /// lasted over a quarter of `-i`, iperf 2's `PARTIALPERCENT`: a shorter one it
    /// leaves out, its bytes counted in the whole test's only) and the whole test's.
    pub fn finish(&mut self, t: f64) -> Vec<String> {
        let mut out = self.tick(t);
        let t = t.max(self.begun);
        let moved = self.cur.reads + self.cur.writes + self.cur.write_errors > 0;
        let significant = t - self.begun > PARTIAL_SHARE * self.interval_s;
        if self.interval_s > 0.0 && moved && significant {
            let cur = self.cur.clone();
            out.extend(self.row_of(self.begun, t, &cur, false));
        }
        let total = self.total.clone();
        out.extend(self.row_of(0.0, t, &total, true));
        out
    }

    fn row_of(&mut self, begin: f64, end: f64, x: &Tally, whole: bool) -> Vec<String> {
        let udp = self.udp_span(whole);
        let span = Span {
            begin,
            end,
            bytes: x.bytes,
            reads: x.reads + x.writes,
            bins: x.bins,
            whole,
            lost: udp.map_or(0, |(u, _)| u.lost_packets),
            expected: udp.map_or(0, |(u, _)| u.packets),
            out_of_order: udp.map_or(0, |(_, o)| o),
            delays: x.delays,
            retransmits: self.retrans_in(whole).unwrap_or(0),
        };
        let mut out = self.member_row(begin, end, x, whole);
        if let Some(n) = self
            .sent_n
            .filter(|_| whole && self.sending && self.ctx.udp)
        {
            out.extend(self.sent_datagrams(n));
        }
        if let Some(mut sum) = self.sum.as_ref().and_then(|s| s.lock().ok()) {
            out.extend(sum.add(self.sum_key, &span));
        }
        out
    }

    /// A TCP sender's retransmits over the current interval or the whole test; `None`
    /// when not told.
    fn retrans_in(&self, whole: bool) -> Option<u64> {
        let mark = if whole { 0 } else { self.retrans_mark };
        self.retrans.map(|n| n.saturating_sub(mark))
    }

    /// A UDP receiver's figures over the current interval or the whole test (`whole`)
    /// and its datagrams out of order; `None` before any datagram (or not UDP).
    fn udp_span(&self, whole: bool) -> Option<(UdpRecvFigures, u64)> {
        let now = self.udp_now?;
        let mark = if whole {
            UdpCounts::default()
        } else {
            self.udp_mark
        };
        let expected = now.expected.saturating_sub(mark.expected);
        let lost = now.lost.saturating_sub(mark.lost);
        let figures = UdpRecvFigures {
            jitter_ms: now.jitter_ms,
            lost_packets: lost,
            packets: expected,
            lost_percent: if expected > 0 {
                100.0 * lost as f64 / expected as f64
            } else {
                0.0
            },
        };
        Some((figures, now.out_of_order.saturating_sub(mark.out_of_order)))
    }

    fn member_row(&mut self, begin: f64, end: f64, x: &Tally, whole: bool) -> Vec<String> {
        if self.ctx.exclude.data {
            return Vec::new();
        }
        let seconds = end - begin;
        let udp_span = self.udp_span(whole);
        let udp = udp_span.map(|(u, _)| u);
        let ooo = udp_span.map(|(_, o)| o);
        let owd = x.delays.stats();
        let rate = |n: f64| (seconds > 0.0).then(|| n / seconds);
        let calls = if self.sending { x.writes } else { x.reads };
        let pps = rate(calls as f64).filter(|_| self.ctx.udp);
        // Little's law: what was on the way, at this span's rate and mean delay.
        let in_progress = |per_s: Option<f64>| {
            owd.zip(per_s)
                .map(|(l, r)| r * l.mean_ms / 1e3)
                .filter(|_| self.ctx.trip_times)
        };
        let row = Row {
            start: begin,
            end,
            seconds,
            bytes: x.bytes,
            packets: if self.sending {
                Some(x.writes).filter(|_| self.ctx.udp)
            } else {
                udp.map(|_| x.reads)
            },
            udp_recv: udp,
            out_of_order: ooo,
            owd,
            retransmits: self
                .retrans_in(whole)
                .filter(|_| self.sending && !self.ctx.udp),
            figures: Iperf2Figures {
                reads: (!self.sending).then_some(x.reads),
                writes: self.sending.then_some(x.writes),
                write_errors: self.sending.then_some(x.write_errors),
                read_bins: (!self.ctx.udp && !self.sending).then_some(x.bins),
                packets_per_second: pps,
                in_progress_bytes: in_progress(rate(x.bytes as f64)),
                in_progress_packets: in_progress(pps),
                ..Iperf2Figures::default()
            },
            ..Row::default()
        };
        if self.ctx.layout == Layout::Csv {
            let socket = self.start.connected[0].socket;
            // iperf 2 names the sender's address first: a sending server's own.
            let mut start = self.start.clone();
            if self.sending {
                let c = &mut start.connected[0];
                std::mem::swap(&mut c.local_host, &mut c.remote_host);
                std::mem::swap(&mut c.local_port, &mut c.remote_port);
            }
            return vec![super::csv::line(
                &self.ctx,
                Some(&start),
                socket,
                self.no as i64,
                &row,
            )];
        }
        let kind = lines::kind(&self.ctx, self.sending);
        let isoch_trip = self.isoch_trip();
        let header = match isoch_trip {
            true => UDP_ISOCH_TRIP_HEADER,
            false => lines::column_header(kind),
        };
        let mut out = Vec::new();
        if !self.header_done {
            self.header_done = true;
            let first = match self.sum.as_ref().map(|s| s.lock()) {
                Some(Ok(mut s)) => s.claim_member_header(header),
                _ => true,
            };
            if first {
                out.push(header.to_string());
            }
        }
        let facts = Facts {
            len: self.blk,
            at_end: whole,
            ..Facts::default()
        };
        let prefix = self.label.clone().unwrap_or_else(|| super::id(self.no));
        out.push(match isoch_trip {
            true => isoch_trip_row(&prefix, &row, x),
            false => lines::row(kind, &prefix, &row, &facts),
        });
        if let Some(n) = ooo.filter(|&n| n > 0 && !self.sending) {
            out.push(format!(
                "{prefix}{}  {n} datagrams received out-of-order",
                super::span(begin, end)
            ));
        }
        if let (Some(h), Some(spec)) = (x.hist.as_ref(), self.hist.as_ref()) {
            let name = if self.ctx.udp { "T8" } else { "F8" };
            let at = format!("{prefix}{}", super::span(begin, end));
            out.push(h.line(spec, &at, name, whole));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::iperf2::shape::shapes;

    fn conn() -> Connected {
        Connected {
            socket: 1,
            local_host: "127.0.0.1".into(),
            local_port: 5001,
            remote_host: "127.0.0.1".into(),
            remote_port: 40000,
        }
    }

    fn ctx(layout: Layout, udp: bool) -> Iperf2Ctx {
        Iperf2Ctx {
            layout,
            udp,
            port: 25101,
            pid: 7,
            datagram_len: if udp { 1470 } else { 128 * 1024 },
            ..Iperf2Ctx::default()
        }
    }

    fn capture(name: &str) -> String {
        let p = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join(format!("src/report/testdata/iperf2/{name}.txt"));
        std::fs::read_to_string(p).unwrap()
    }

    /// Two seconds of reads with `-i 1`, as the captures ran.
    fn tcp_run(layout: Layout) -> String {
        tcp_run_with(ctx(layout, false), 1.9989)
    }

    fn tcp_run_with(c: Iperf2Ctx, end: f64) -> String {
        let mut out = banner(&c, 128 * 1024, 131072, None);
        let mut t = ServerTest::new(c, 1, conn(), 1_764_184_214_054, 1.0);
        out.extend(t.opening());
        for i in 0..200 {
            let len = if i % 3 == 0 { 100 } else { 128 * 1024 };
            out.extend(t.read(len, 128 * 1024, f64::from(i) * 0.01));
            t.delay(0.002 + f64::from(i % 5) * 1e-4, 0);
        }
        out.extend(t.finish(end));
        out.join("\n")
    }

    fn udp_run(layout: Layout) -> String {
        udp_run_with(ctx(layout, true))
    }

    fn udp_run_with(c: Iperf2Ctx) -> String {
        let mut out = banner(&c, 1470, 212_992, None);
        let mut t = ServerTest::new(c, 1, conn(), 1_764_184_214_054, 1.0);
        out.extend(t.opening());
        for i in 1..=200u64 {
            let counts = UdpCounts {
                received: i,
                expected: i + i / 50,
                lost: i / 50,
                out_of_order: 0,
                jitter_ms: 0.001,
            };
            out.extend(t.udp(1470, counts, i as f64 * 0.01));
            t.delay(0.00004 + (i % 7) as f64 * 1e-6, 0);
        }
        out.extend(t.finish(2.0021));
        out.join("\n")
    }

    fn same_shape(capture_name: &str, ours: &str) {
        let want = shapes(&capture(capture_name));
        let got = shapes(ours);
        assert_eq!(want, got, "{capture_name}; netmeter printed:\n{ours}");
    }

    #[test]
    fn tcp_server_matches_iperf2() {
        same_shape("tcp.server", &tcp_run(Layout::Enhanced));
        same_shape("tcp_plain.server", &tcp_run(Layout::Plain));
        same_shape("tcp_csv.server", &tcp_run(Layout::Csv));
    }

    #[test]
    fn udp_server_matches_iperf2() {
        same_shape("udp.server", &udp_run(Layout::Enhanced));
        same_shape("udp_plain.server", &udp_run(Layout::Plain));
        same_shape("udp_csv.server", &udp_run(Layout::Csv));
    }

    /// A UDP `--isochronous --trip-times` test, 60 frames a second of 15 datagrams
    /// each for 2 s, as iperf 2.2.1's own client sent it to the captured 2.2.1 server:
    /// the frame columns, the frames counted as iperf 2.2.1 counts them.
    fn isoch_trip_run() -> (String, Vec<String>) {
        let mut c = ctx(Layout::Enhanced, true);
        c.trip_times = true;
        c.isochronous = Some(crate::wire::Isochronous {
            fps: 0,
            mean_bps: 0,
            stdev_bps: 0,
        });
        let mut out = banner(&c, 1470, 212_992, None);
        let mut t = ServerTest::new(c, 1, conn(), 1_764_184_214_054, 1.0);
        out.extend(t.opening());
        let mut rows = Vec::new();
        for frame in 1..=120u32 {
            for k in 1..=15u64 {
                let i = u64::from(frame - 1) * 15 + k;
                let counts = UdpCounts {
                    received: i,
                    expected: i,
                    jitter_ms: 0.001,
                    ..UdpCounts::default()
                };
                let at = f64::from(frame - 1) / 60.0 + k as f64 * 1e-5;
                let lines = t.udp(1400, counts, at);
                rows.extend(lines.clone());
                out.extend(lines);
                t.delay(0.00004, 0);
            }
            t.frame(frame, 0.0008);
        }
        let lines = t.finish(2.0002);
        rows.extend(lines.clone());
        out.extend(lines);
        (out.join("\n"), rows)
    }

    #[test]
    fn an_isochronous_trip_times_server_matches_iperf2() {
        let (out, rows) = isoch_trip_run();
        same_shape("iso_tt.server", &out);
        // 120 frames: the first counted twice, as the 2.2.1 client's `isoch:tx` counts.
        let frames = |r: &String| {
            r.split(" pps  ")
                .nth(1)
                .and_then(|x| x.split(' ').next())
                .map(String::from)
        };
        let got: Vec<_> = rows.iter().filter_map(frames).collect();
        assert_eq!(got, ["61/0", "60/0", "121/0"], "{out}");
        assert!(rows[2].contains(" 0.800/0.800/0.800/0.000 ms "), "{out}");
    }

    /// iperf 2.2.1's frame arithmetic on a server: the count starts at one, a frame
    /// following the last one counted is timed, a jump of n ids counts n lost.
    #[test]
    fn frames_count_as_iperf2_counts_them() {
        let mut t = ServerTest::new(ctx(Layout::Enhanced, true), 1, conn(), 0, 0.0);
        for id in [1, 2, 3, 6, 7] {
            t.frame(id, 0.001 * f64::from(id));
        }
        assert_eq!((t.total.frames, t.total.frames_lost), (6, 3));
        let timed = t.total.frame_delays.stats().expect("timed frames");
        assert_eq!(timed.count, 4);
        assert!((timed.max_ms - 7.0).abs() < 1e-9 && (timed.min_ms - 1.0).abs() < 1e-9);
    }

    #[test]
    fn trip_times_servers_match_iperf2() {
        let mut c = ctx(Layout::Enhanced, false);
        c.trip_times = true;
        same_shape("tcp_tt.server", &tcp_run_with(c.clone(), 2.0082));
        c.udp = true;
        c.datagram_len = 1470;
        same_shape("udp_tt.server", &udp_run_with(c));
    }

    #[test]
    fn a_bounceback_server_matches_iperf2() {
        let mut c = ctx(Layout::Enhanced, false);
        c.bounceback = Some(super::super::Bounceback {
            request_len: 100,
            reply_len: 100,
            hold_us: 0,
            ..Default::default()
        });
        let mut out = banner(&c, 128 * 1024, 131072, None);
        let mut t = ServerTest::new(c, 1, conn(), 1_764_184_214_054, 1.0);
        out.extend(t.opening());
        for i in 0..40 {
            out.extend(t.read(100, 128 * 1024, f64::from(i) * 0.02));
        }
        out.extend(t.finish(2.0863));
        same_shape("bb.server", &out.join("\n"));
    }

    /// A sending test (`-R`): `n` sends over two seconds with `-i 1`, the UDP
    /// sender's `Sent` line last.
    fn send_run(c: Iperf2Ctx, n: u32, len: usize, end: f64) -> String {
        let udp = c.udp;
        let mut out = banner(&c, c.datagram_len, if udp { 212_992 } else { 131072 }, None);
        let mut t = ServerTest::new(c, 1, conn(), 1_764_184_214_054, 1.0).sending();
        out.extend(t.opening());
        for i in 0..n {
            out.extend(t.write(len, true, f64::from(i) * 2.0 / f64::from(n)));
        }
        out.extend(t.finish(end));
        if udp {
            out.extend(t.sent_datagrams(u64::from(n) + 1));
        }
        out.join("\n")
    }

    /// `-R`: the server's rows are a sender's, in each layout, as iperf 2.2.1's server
    /// printed them (captured in `testdata/iperf2/*_rev*.server.txt`).
    #[test]
    fn a_sending_server_matches_iperf2() {
        let tcp = |l| send_run(ctx(l, false), 400, 128 * 1024, 2.0621);
        same_shape("tcp_rev.server", &tcp(Layout::Enhanced));
        same_shape("tcp_rev_plain.server", &tcp(Layout::Plain));
        same_shape("tcp_rev_csv.server", &tcp(Layout::Csv));
        let udp = |l| send_run(ctx(l, true), 181, 1470, 2.0189);
        same_shape("udp_rev.server", &udp(Layout::Enhanced));
        same_shape("udp_rev_plain.server", &udp(Layout::Plain));
    }

    /// The counts in a sender's rows are its own: writes, errors, bytes, PPS; in CSV
    /// the sender (this server) first and its datagrams as the total (iperf 2.2.1
    /// writes `-nan,0,-1` in the whole test's line, `testdata/iperf2/udp_rev_csv`).
    #[test]
    fn a_sending_servers_rows_count_its_writes() {
        let mut t = ServerTest::new(ctx(Layout::Enhanced, true), 1, conn(), 0, 1.0).sending();
        let mut out = Vec::new();
        for i in 0..10 {
            out.extend(t.write(1470, i != 3, f64::from(i) * 0.1));
        }
        out.extend(t.write(1470, true, 1.5));
        out.extend(t.finish(2.0));
        let rows: Vec<&String> = out.iter().filter(|l| l.starts_with("[  1]")).collect();
        assert_eq!(rows.len(), 3, "{out:#?}");
        assert!(
            rows[0].contains(" 9/1/NA ") && rows[0].ends_with("9 pps"),
            "{}",
            rows[0]
        );
        assert!(rows[1].contains(" 1/0/NA "), "{}", rows[1]);
        assert!(
            rows[2].contains("14.4 KBytes") && rows[2].contains(" 10/1/NA "),
            "{}",
            rows[2]
        );
        assert_eq!(
            t.sent_datagrams(11),
            vec!["[  1] Sent 11 datagrams".to_string()]
        );
        let mut c = ctx(Layout::Csv, true);
        c.exclude = Default::default();
        let mut t = ServerTest::new(c, 1, conn(), 0, 0.0).sending();
        for i in 0..4 {
            t.write(1000, true, f64::from(i) * 0.25);
        }
        let line = t.finish(1.0).join("");
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(
            &f[1..5],
            ["127.0.0.1", "5001", "127.0.0.1", "40000"],
            "{line}"
        );
        assert_eq!((f[7], f[11]), ("4000", "4"), "{line}");
        assert!(t.sent_datagrams(5).is_empty(), "no Sent line in CSV");
        let tcp = ServerTest::new(ctx(Layout::Plain, false), 1, conn(), 0, 1.0).sending();
        assert!(
            tcp.opening()[0].ends_with("port 40000 (reverse)"),
            "{:?}",
            tcp.opening()
        );
    }

    /// `-P 2`: the members' rows and the `[SUM-2]` rows in the order iperf 2.2.1's
    /// server printed them (`testdata/iperf2/tcp_p2.server.txt`): an interval's sum
    /// once both members' rows of it came, the last member's part-interval summed with
    /// the other's interval, the whole test's sum last; the sums add the members up.
    #[test]
    fn p2_sum_rows_match_iperf2() {
        let c = ctx(Layout::Enhanced, false);
        let mut out = banner(&c, 128 * 1024, 131072, None);
        let sum = Arc::new(Mutex::new(SumRows::new(c.clone(), 2, 1.0)));
        let mut tests: Vec<ServerTest> = (1..=2)
            .map(|no| {
                let mut cn = conn();
                cn.socket = no as i64;
                ServerTest::new(c.clone(), no, cn, 1_764_184_214_054, 1.0).with_sum(sum.clone())
            })
            .collect();
        for t in &tests {
            out.extend(t.opening());
        }
        // Member 2 reads first in each second, as in the capture; member 1 ends last.
        for i in 0..199u32 {
            let at = f64::from(i) * 0.01;
            for t in [1usize, 0] {
                out.extend(tests[t].read(128 * 1024, 128 * 1024, at));
            }
        }
        out.extend(tests[1].finish(1.9981));
        out.extend(tests[0].finish(2.0016));
        let text = out.join("\n");
        same_shape("tcp_p2.server", &text);
        let sums: Vec<&String> = out.iter().filter(|l| l.starts_with("[SUM-2]")).collect();
        assert_eq!(sums.len(), 3, "{text}");
        assert!(
            sums[2].contains("0.0000-2.0016") && sums[2].contains(" 398="),
            "{text}"
        );
        assert!(sums[1].contains("1.0000-2.0000"), "{text}");
    }

    /// A `-P 2` test's members, their connection lines printed, sharing one sum.
    fn p2_members(c: &Iperf2Ctx) -> (Vec<String>, Vec<ServerTest>) {
        let mut out = banner(
            c,
            c.datagram_len,
            if c.udp { 212_992 } else { 131072 },
            None,
        );
        let sum = Arc::new(Mutex::new(SumRows::new(c.clone(), 2, 1.0)));
        let tests: Vec<ServerTest> = (1..=2)
            .map(|no| {
                let mut cn = conn();
                cn.socket = no as i64;
                cn.remote_port = 40000 + no as u16;
                ServerTest::new(c.clone(), no, cn, 1_764_184_214_054, 1.0).with_sum(sum.clone())
            })
            .collect();
        for t in &tests {
            out.extend(t.opening());
        }
        (out, tests)
    }

    /// A UDP `-P 2` test: each member 100 datagrams a second for two seconds, member 1
    /// first, one datagram in 50 lost; `ooo`: member 1's second datagram came out of
    /// order (as iperf 2.2.1's listener handing over its socket makes one).
    fn udp_p2_run(layout: Layout, ooo: bool) -> (String, Vec<String>) {
        let c = ctx(layout, true);
        let (mut out, mut tests) = p2_members(&c);
        // Datagrams at 5, 15, … 1995 ms, then the second's end ticked: no part-interval
        // rows (iperf 2's last datagram before the FIN closes the second interval).
        for i in 1..=200u64 {
            for (k, t) in tests.iter_mut().enumerate() {
                let counts = UdpCounts {
                    received: i,
                    expected: i + i / 50,
                    lost: i / 50,
                    out_of_order: u64::from(ooo && k == 0 && i >= 2),
                    jitter_ms: 0.002,
                };
                out.extend(t.udp(1470, counts, i as f64 * 0.01 - 0.005));
                t.delay(0.00001 * (k + 1) as f64, 0);
            }
        }
        for t in &mut tests {
            out.extend(t.tick(2.0));
        }
        out.extend(tests[0].finish(2.0224));
        out.extend(tests[1].finish(2.0110));
        (out.join("\n"), out)
    }

    /// A last part-interval of a quarter of `-i` or less has no row, member's or sum's
    /// (iperf 2's `PARTIALPERCENT`), its datagrams counted in the whole test's rows; a
    /// longer one has both.
    #[test]
    fn a_short_last_part_interval_has_no_row() {
        for (end, rows) in [(2.0225, false), (2.25, false), (2.2501, true), (2.6, true)] {
            let c = ctx(Layout::Plain, true);
            let (_, mut tests) = p2_members(&c);
            let mut out = Vec::new();
            for i in 1..=210u64 {
                for t in tests.iter_mut() {
                    let counts = UdpCounts {
                        received: i,
                        expected: i,
                        ..UdpCounts::default()
                    };
                    out.extend(t.udp(1470, counts, i as f64 * 0.01 - 0.005));
                }
            }
            for t in &mut tests {
                out.extend(t.finish(end));
            }
            let text = out.join("\n");
            let part = format!("2.0000-{end:.4} sec");
            let parts = out.iter().filter(|l| l.contains(&part)).count();
            assert_eq!(parts, if rows { 3 } else { 0 }, "{end}: {text}");
            let whole = format!("0.0000-{end:.4} sec");
            let wholes: Vec<&String> = out.iter().filter(|l| l.contains(&whole)).collect();
            assert_eq!(wholes.len(), 3, "{end}: {text}");
            assert!(wholes[2].contains(" 0/420 (0%)"), "{end}: {text}");
        }
    }

    /// UDP `-P 2`: iperf 2.2.1's server's sums in each layout (`testdata/iperf2/
    /// udp_p2*.server.txt`): `-e`'s `[SUM-cnt]` header and `[SUM-2]` rows with
    /// lost/total, latency and PPS, the out-of-order lines (a member's, and `[SUM]`'s
    /// after the whole sum); plain `[SUM]` rows under the plain header.
    #[test]
    fn udp_p2_sum_rows_match_iperf2() {
        let (text, out) = udp_p2_run(Layout::Enhanced, true);
        same_shape("udp_p2.server", &text);
        let sums: Vec<&String> = out.iter().filter(|l| l.starts_with("[SUM-2]")).collect();
        assert_eq!(sums.len(), 3, "{text}");
        // 2 × 200 datagrams received, 2 × 4 lost; delays 10 and 20 µs, mean 15.
        assert!(
            sums[2].contains("  8/408 (2%)  0.015/0.010/0.020  "),
            "{text}"
        );
        assert_eq!(
            out.last().map(String::as_str),
            Some("[SUM] 0.0000-2.0224 sec  1 datagrams received out-of-order"),
            "{text}"
        );
        let (text, _) = udp_p2_run(Layout::Plain, false);
        same_shape("udp_p2_plain.server", &text);
        assert!(
            text.contains("\n[SUM] 0.0000-2.0224 sec   574 KBytes  2.33 Mbits/sec   8/408 (2%)"),
            "{text}"
        );
    }

    /// TCP `-P 2 -t 2.5` without `-e`: plain `[SUM]` rows, no header of their own, the
    /// last part-interval's sum after both members' whole-test rows
    /// (`testdata/iperf2/tcp_p2_plain.server.txt`).
    #[test]
    fn tcp_p2_plain_sum_rows_match_iperf2() {
        let (mut out, mut tests) = p2_members(&ctx(Layout::Plain, false));
        for i in 0..250u32 {
            for t in [1usize, 0] {
                out.extend(tests[t].read(1000, 128 * 1024, f64::from(i) * 0.01));
            }
        }
        out.extend(tests[1].finish(2.5005));
        out.extend(tests[0].finish(2.5007));
        let text = out.join("\n");
        same_shape("tcp_p2_plain.server", &text);
        assert!(
            text.ends_with(
                "\n[SUM] 2.0000-2.5007 sec  97.7 KBytes  1.60 Mbits/sec\n[SUM] 0.0000-2.5007 sec   488 KBytes  1.60 Mbits/sec"
            ),
            "{text}"
        );
    }

    /// `-y C` with `-P 2`: after the members' lines of a span, the sum's line with
    /// transfer id -1, the client's address with port 0, the server's (`0.0.0.0`
    /// for UDP) and the members' bytes (and UDP counts) added, as iperf 2.2.1's server
    /// writes it (`testdata/iperf2/{tcp,udp}_p2_csv.server.txt`).
    #[test]
    fn p2_csv_sum_lines_match_iperf2() {
        let ids = |text: &str| -> Vec<String> {
            text.lines()
                .map(|l| l.split(',').nth(5).unwrap_or("").to_string())
                .collect()
        };
        let (text, out) = udp_p2_run(Layout::Csv, false);
        same_shape("udp_p2_csv.server", &text);
        assert_eq!(
            ids(&text).iter().filter(|i| *i == "-1").count(),
            3,
            "{text}"
        );
        assert_eq!(
            ids(&capture("udp_p2_csv.server"))
                .iter()
                .filter(|i| *i == "-1")
                .count(),
            3
        );
        let whole: Vec<&str> = out
            .last()
            .map(|l| l.split(',').collect())
            .unwrap_or_default();
        assert_eq!(
            &whole[1..6],
            ["127.0.0.1", "0", "0.0.0.0", "5001", "-1"],
            "{text}"
        );
        assert_eq!(
            (whole[7], whole[10], whole[11]),
            ("588000", "8", "408"),
            "{text}"
        );
        let captured = capture("udp_p2_csv.server");
        let want: Vec<&str> = captured
            .lines()
            .last()
            .map(|l| l.split(',').collect())
            .unwrap_or_default();
        assert_eq!((want[2], want[3], want[5]), ("0", "0.0.0.0", "-1"));

        let (mut out, mut tests) = p2_members(&ctx(Layout::Csv, false));
        for i in 0..200u32 {
            for t in &mut tests {
                out.extend(t.read(1000, 1000, f64::from(i) * 0.01));
            }
        }
        for t in &mut tests {
            out.extend(t.tick(2.0));
        }
        out.extend(tests[0].finish(2.0));
        out.extend(tests[1].finish(2.0));
        let text = out.join("\n");
        same_shape("tcp_p2_csv.server", &text);
        assert_eq!(
            ids(&text),
            ids(&capture("tcp_p2_csv.server")),
            "the members' and the sum's lines in iperf 2.2.1's order:\n{text}"
        );
        let whole: Vec<&str> = out
            .last()
            .map(|l| l.split(',').collect())
            .unwrap_or_default();
        assert_eq!(
            &whole[1..8],
            [
                "127.0.0.1",
                "0",
                "127.0.0.1",
                "5001",
                "-1",
                "0.0-2.0",
                "400000"
            ],
            "{text}"
        );
    }

    /// A `--full-duplex` test's two halves over two seconds: each second's reads and
    /// writes, then the halves' rows of it in the order `ticks` names (`r` the
    /// receiving half, `s` the sending one) for the first second and for the second,
    /// then the halves end in the order `ends` names.
    fn fd_run(layout: Layout, udp: bool, ticks: [&str; 2], ends: &str) -> Vec<String> {
        let c = ctx(layout, udp);
        let mut out = banner(&c, c.datagram_len, if udp { 212_992 } else { 131072 }, None);
        let fd = Arc::new(Mutex::new(SumRows::full_duplex(c.clone(), 1, 1.0)));
        let mut r =
            ServerTest::new(c.clone(), 1, conn(), 1_764_184_214_054, 1.0).full_duplex(fd.clone());
        let mut w = ServerTest::new(c, 1, conn(), 1_764_184_214_054, 1.0).full_duplex_sending(fd);
        out.extend(r.opening());
        out.extend(w.opening());
        let len = if udp { 1470 } else { 128 * 1024 };
        for (k, order) in ticks.iter().enumerate() {
            for i in 0..100u64 {
                let at = k as f64 + 0.005 + i as f64 * 0.0099;
                out.extend(w.write(len, true, at));
                if udp {
                    let n = k as u64 * 100 + i + 1;
                    let counts = UdpCounts {
                        received: n,
                        expected: n,
                        ..UdpCounts::default()
                    };
                    out.extend(r.udp(len, counts, at));
                    r.delay(0.00001, 0);
                } else {
                    out.extend(r.read(len, len, at));
                }
            }
            for half in order.chars() {
                let t = if half == 'r' { &mut r } else { &mut w };
                out.extend(t.tick(k as f64 + 1.0));
            }
        }
        for half in ends.chars() {
            if half == 'r' {
                out.extend(r.finish(2.0233));
            } else if udp {
                out.extend(w.finish_sent(2.0229, 201));
            } else {
                out.extend(w.finish(2.0061));
            }
        }
        out
    }

    /// `--full-duplex`: the sending half's `[ *1]` rows beside the receiving half's, the
    /// connection line's `(full-duplex)`, with `-e` the `[FD1]` rows adding both halves
    /// up, as iperf 2.2.1's server printed them (`testdata/iperf2/*_fd*.server.txt`; the
    /// halves' order within an interval is as each capture had it).
    #[test]
    fn full_duplex_halves_match_iperf2() {
        let out = fd_run(Layout::Enhanced, false, ["sr", "sr"], "sr");
        same_shape("tcp_fd.server", &out.join("\n"));
        let fds: Vec<&String> = out.iter().filter(|l| l.starts_with("[FD1]")).collect();
        assert_eq!(fds.len(), 3, "{out:#?}");
        // 200 writes and 200 reads of 128 KiB: 50 MiB over the whole test.
        assert!(
            fds[2].starts_with("[FD1] 0.0000-2.0233 sec  50.0 MBytes  "),
            "{out:#?}"
        );
        assert!(
            out.iter()
                .any(|l| l.starts_with("[ *1] 0.0000-2.0061 sec  25.0 MBytes ")),
            "{out:#?}"
        );
        let plain = fd_run(Layout::Plain, false, ["sr", ""], "rs");
        same_shape("tcp_fd_plain.server", &plain.join("\n"));
        let out = fd_run(Layout::Enhanced, true, ["rs", "rs"], "rs");
        same_shape("udp_fd.server", &out.join("\n"));
        let fd_whole = out.last().unwrap();
        assert!(
            fd_whole.starts_with("[FD1] 0.0000-2.0233 sec   574 KBytes  2.32 Mbits/sec 400 "),
            "{out:#?}"
        );
        assert_eq!(out[out.len() - 2], "[  1] Sent 201 datagrams", "{out:#?}");
        let plain = fd_run(Layout::Plain, true, ["rs", "sr"], "sr");
        same_shape("udp_fd_plain.server", &plain.join("\n"));
        for (udp, name) in [(false, "tcp_fd_csv.server"), (true, "udp_fd_csv.server")] {
            let csv = fd_run(Layout::Csv, udp, ["rs", "rs"], "rs");
            same_shape(name, &csv.join("\n"));
            // The receiving half's lines name the client first, the sending half's
            // this server, as iperf 2.2.1's.
            let firsts: Vec<&str> = csv.iter().filter_map(|l| l.split(',').nth(2)).collect();
            assert_eq!(
                firsts,
                ["40000", "5001", "40000", "5001", "40000", "5001"],
                "{csv:#?}"
            );
        }
    }

    /// A TCP `-d` (`dual`) or `-r` test: the client's test this server reads (its
    /// transfer 1) and the connection back on which it sends (its transfer 2), each
    /// second's reads and writes, the halves' rows of a second in the order the
    /// captures had them (the sending one first); `-d`'s rows share a sum.
    fn legacy_run(layout: Layout, dual: bool) -> Vec<String> {
        let c = ctx(layout, false);
        let mut out = banner(&c, 128 * 1024, 131072, None);
        let sum = Arc::new(Mutex::new(SumRows::new(c.clone(), 2, 1.0)));
        let mut r = ServerTest::new(c.clone(), 1, conn(), 1_764_184_214_054, 1.0);
        let mut back = conn();
        back.socket = 2;
        (back.local_port, back.remote_port) = (41796, 25231);
        let mut w = ServerTest::new(c, 2, back, 1_764_184_214_054, 1.0).connect_back(BackHeader {
            host: "127.0.0.1".into(),
            port: 25231,
            write_len: 131_072,
            sndbuf: 4 << 20,
            rate_bps: 0,
            congestion: Some("cubic".into()),
        });
        if dual {
            r = r.with_sum(sum.clone());
            w = w.with_sum(sum);
        }
        out.extend(r.opening());
        let len = 128 * 1024;
        let second = |t: &mut ServerTest, k: u32, out: &mut Vec<String>, send: bool| {
            for i in 0..100u32 {
                let at = f64::from(k) + 0.005 + f64::from(i) * 0.0099;
                out.extend(if send {
                    t.write(len, true, at)
                } else {
                    t.read(len, len, at)
                });
            }
        };
        if dual {
            out.extend(w.opening());
            for k in 0..2 {
                second(&mut w, k, &mut out, true);
                second(&mut r, k, &mut out, false);
                out.extend(w.tick(f64::from(k) + 1.0));
                out.extend(r.tick(f64::from(k) + 1.0));
            }
            out.extend(w.finish(2.0042));
            out.extend(r.finish(2.0006));
        } else {
            for k in 0..2 {
                second(&mut r, k, &mut out, false);
            }
            out.extend(r.finish(2.0032));
            out.extend(w.opening());
            for k in 0..2 {
                second(&mut w, k, &mut out, true);
            }
            out.extend(w.finish(2.0013));
        }
        out
    }

    /// `-d` and `-r`: the connection back's settings header (`Client connecting to`,
    /// its write size, TOS and window with `-e`), its `(reverse)` connection line and
    /// `[ *2]` sender's rows, and with `-d` the sum of both (`[SUM-2]`, Reads=Dist
    /// counting the writes too, as iperf 2's), as iperf 2.2.1's server printed them
    /// (`testdata/iperf2/tcp_{dual,tradeoff}*.server.txt`).
    #[test]
    fn connect_back_rows_match_iperf2() {
        let dual = legacy_run(Layout::Enhanced, true);
        same_shape("tcp_dual.server", &dual.join("\n"));
        assert!(
            dual.contains(
                &"Client connecting to 127.0.0.1, TCP port 25231 with pid 7 (1/0 flows/load)"
                    .to_string()
            ),
            "{dual:#?}"
        );
        assert!(
            dual.contains(
                &"[ *2] local 127.0.0.1 port 41796 connected with 127.0.0.1 port 25231 (reverse)"
                    .to_string()
            ),
            "{dual:#?}"
        );
        // 200 writes and 200 reads of 128 KiB, 400 calls.
        let last = dual.last().unwrap();
        assert!(
            last.starts_with("[SUM-2] 0.0000-2.0042 sec  50.0 MBytes ") && last.contains(" 400="),
            "{dual:#?}"
        );
        same_shape(
            "tcp_dual_plain.server",
            &legacy_run(Layout::Plain, true).join("\n"),
        );
        same_shape(
            "tcp_tradeoff.server",
            &legacy_run(Layout::Enhanced, false).join("\n"),
        );
        let plain = legacy_run(Layout::Plain, false);
        same_shape("tcp_tradeoff_plain.server", &plain.join("\n"));
        assert!(!plain.iter().any(|l| l.starts_with("[SUM")), "{plain:#?}");
    }

    /// UDP `-d`: the connection back's UDP settings header, its `[ *2]` sender's rows
    /// and `Sent` line, the `[SUM-2]` rows of both halves, then the report the
    /// client's listener answered with, as iperf 2.2.1's server printed them
    /// (`testdata/iperf2/udp_dual.server.txt`).
    #[test]
    fn a_udp_connect_back_matches_iperf2() {
        let c = ctx(Layout::Enhanced, true);
        let mut out = banner(&c, 1470, 212_992, None);
        let sum = Arc::new(Mutex::new(SumRows::new(c.clone(), 2, 1.0)));
        let mut r =
            ServerTest::new(c.clone(), 1, conn(), 1_764_184_214_054, 1.0).with_sum(sum.clone());
        let mut back = conn();
        back.socket = 2;
        (back.local_port, back.remote_port) = (49177, 25233);
        let mut w = ServerTest::new(c, 2, back, 1_764_184_214_054, 1.0)
            .connect_back(BackHeader {
                host: "127.0.0.1".into(),
                port: 25233,
                write_len: 1470,
                sndbuf: 212_992,
                rate_bps: 1_000_000,
                congestion: None,
            })
            .with_sum(sum);
        out.extend(r.opening());
        out.extend(w.opening());
        for k in 0..2u64 {
            for i in 0..85u64 {
                let at = k as f64 + 0.005 + i as f64 * 0.0116;
                out.extend(w.write(1470, true, at));
                let n = k * 85 + i + 1;
                let counts = UdpCounts {
                    received: n,
                    expected: n,
                    ..UdpCounts::default()
                };
                out.extend(r.udp(1470, counts, at));
                r.delay(0.000015, 0);
            }
            out.extend(w.tick(k as f64 + 1.0));
            out.extend(r.tick(k as f64 + 1.0));
        }
        out.extend(w.finish_sent(2.0228, 171));
        out.extend(r.finish(2.0230));
        let report = Row {
            end: 2.0228,
            seconds: 2.0228,
            bytes: 170 * 1470,
            udp_recv: Some(UdpRecvFigures {
                jitter_ms: 0.001,
                packets: 170,
                ..UdpRecvFigures::default()
            }),
            // An iperf 2.2.1 listener's report carries its transit.
            owd: Some(LatencyStats {
                count: 170,
                min_ms: 0.002,
                mean_ms: 0.004,
                max_ms: 0.015,
                stdev_ms: 0.002,
                ..LatencyStats::default()
            }),
            ..Row::default()
        };
        out.extend(w.listener_report(&report));
        same_shape("udp_dual.server", &out.join("\n"));
        assert!(
            out.contains(
                &"Client connecting to 127.0.0.1, UDP port 25233 with pid 7 (1/0 flows/load)"
                    .to_string()
            ),
            "{out:#?}"
        );
        assert!(
            out.contains(&"[  2] Sent 171 datagrams".to_string()),
            "{out:#?}"
        );
        assert!(
            out.last()
                .unwrap()
                .starts_with("[ *2] 0.0000-2.0228 sec   244 KBytes "),
            "{out:#?}"
        );
    }

    /// UDP `-r`: the client's test this server reads (transfer 1), then the connection
    /// back on which it sends (transfer 2): its UDP settings header, `[ *2]` sender's
    /// rows and `Sent` line, then the report the client's listener answered with; no
    /// sum (as TCP `-r`).
    fn udp_tradeoff_run(layout: Layout) -> Vec<String> {
        let c = ctx(layout, true);
        let mut out = banner(&c, 1470, 212_992, None);
        let mut r = ServerTest::new(c.clone(), 1, conn(), 1_764_184_214_054, 1.0);
        let mut back = conn();
        back.socket = 2;
        (back.local_port, back.remote_port) = (40862, 25331);
        let mut w = ServerTest::new(c, 2, back, 1_764_184_216_290, 1.0).connect_back(BackHeader {
            host: "127.0.0.1".into(),
            port: 25331,
            write_len: 1470,
            sndbuf: 212_992,
            rate_bps: 1_000_000,
            congestion: None,
        });
        out.extend(r.opening());
        for i in 1..=172u64 {
            let counts = UdpCounts {
                received: i,
                expected: i,
                ..UdpCounts::default()
            };
            out.extend(r.udp(1470, counts, i as f64 * 0.0116));
            r.delay(0.000018, 0);
        }
        out.extend(r.finish(2.0232));
        out.extend(w.opening());
        for i in 0..173u32 {
            out.extend(w.write(1470, true, f64::from(i) * 0.0116));
        }
        out.extend(w.finish_sent(2.0230, 174));
        let report = Row {
            end: 2.0229,
            seconds: 2.0229,
            bytes: 173 * 1470,
            udp_recv: Some(UdpRecvFigures {
                jitter_ms: 0.004,
                packets: 173,
                ..UdpRecvFigures::default()
            }),
            owd: Some(LatencyStats {
                count: 173,
                min_ms: 0.009,
                mean_ms: 0.018,
                max_ms: 0.082,
                stdev_ms: 0.008,
                ..LatencyStats::default()
            }),
            ..Row::default()
        };
        out.extend(w.listener_report(&report));
        out
    }

    /// UDP `-r` (`-e` and plain): the client's test's rows, then the connection back's
    /// settings header, `(reverse)` line, `[ *2]` rows, `Sent` line and the listener's
    /// report, no sum, as iperf 2.2.1's server printed them
    /// (`testdata/iperf2/udp_tradeoff*.server.txt`).
    #[test]
    fn a_udp_tradeoff_matches_iperf2() {
        let out = udp_tradeoff_run(Layout::Enhanced);
        same_shape("udp_tradeoff.server", &out.join("\n"));
        assert!(!out.iter().any(|l| l.starts_with("[SUM")), "{out:#?}");
        assert!(
            out.contains(
                &"Client connecting to 127.0.0.1, UDP port 25331 with pid 7 (1/0 flows/load)"
                    .to_string()
            ),
            "{out:#?}"
        );
        assert!(
            out.contains(&"[  2] Sent 174 datagrams".to_string()),
            "{out:#?}"
        );
        let plain = udp_tradeoff_run(Layout::Plain);
        same_shape("udp_tradeoff_plain.server", &plain.join("\n"));
        assert!(
            plain
                .last()
                .unwrap()
                .starts_with("[ *2] 0.0000-2.0229 sec   248 KBytes "),
            "{plain:#?}"
        );
    }

    /// A `-R -P 2` test's two sending members over two seconds, `per_s` writes of `len`
    /// bytes a second each, with the group's sum as `netmeter iperf2 -s` makes it
    /// (TCP: [`SumRows::of_senders`]; UDP: [`SumRows::headers_only`]).
    fn rev_p2_run(layout: Layout, udp: bool, per_s: u32, len: usize) -> Vec<String> {
        let c = ctx(layout, udp);
        let mut out = banner(&c, c.datagram_len, if udp { 212_992 } else { 131072 }, None);
        let sum = if udp {
            SumRows::headers_only(c.clone(), 2)
        } else {
            SumRows::new(c.clone(), 2, 1.0).of_senders()
        };
        let sum = Arc::new(Mutex::new(sum));
        let mut tests: Vec<ServerTest> = (1..=2)
            .map(|no| {
                let mut cn = conn();
                cn.socket = no as i64;
                cn.remote_port = 40000 + no as u16;
                ServerTest::new(c.clone(), no, cn, 1_764_184_214_054, 1.0)
                    .sending()
                    .with_sum(sum.clone())
            })
            .collect();
        for t in &tests {
            out.extend(t.opening());
        }
        let n = 2 * per_s;
        for i in 0..n {
            let at = f64::from(i) / f64::from(per_s);
            for t in [1usize, 0] {
                out.extend(tests[t].write(len, true, at));
            }
        }
        for t in [1usize, 0] {
            out.extend(tests[t].tick(2.0));
        }
        for (t, end) in [(1usize, 2.0053), (0, 2.0071)] {
            out.extend(if udp {
                tests[t].finish_sent(end, u64::from(n) + 1)
            } else {
                tests[t].finish(end)
            });
        }
        out
    }

    /// TCP `-R -P 2` with retransmits, as iperf 2.2.1's captured server had them
    /// (member 1: one each second; member 2: none): the `[SUM-2]` rows' `Reads=Dist`
    /// bins are what iperf 2 prints there (its retry counters, [`sender_bins`]), word
    /// for word against the capture, and the members' `Rtry` the retransmits.
    #[test]
    fn tcp_rev_p2_sum_bins_are_iperf2s() {
        let c = ctx(Layout::Enhanced, false);
        let sum = Arc::new(Mutex::new(SumRows::new(c.clone(), 2, 1.0).of_senders()));
        let mut tests: Vec<ServerTest> = (1..=2)
            .map(|no| {
                ServerTest::new(c.clone(), no, conn(), 0, 1.0)
                    .sending()
                    .with_sum(sum.clone())
            })
            .collect();
        let mut out = Vec::new();
        for i in 0..200u32 {
            let at = f64::from(i) / 100.0;
            for t in [1usize, 0] {
                if tests[t].row_due(at) {
                    // Member 1's cumulative retransmits: one in each second.
                    tests[t].retransmits(if t == 0 { u64::from(i / 100) } else { 0 });
                }
                out.extend(tests[t].write(128 * 1024, true, at));
            }
        }
        for t in [1usize, 0] {
            tests[t].retransmits(if t == 0 { 2 } else { 0 });
            out.extend(tests[t].tick(2.0));
        }
        for (t, end) in [(1usize, 2.0053), (0, 2.0071)] {
            out.extend(tests[t].finish(end));
        }
        let bins = |lines: &mut dyn Iterator<Item = &str>| -> Vec<String> {
            lines
                .filter(|l| l.starts_with("[SUM-2]"))
                .filter_map(|l| l.rsplit_once('=').map(|(_, b)| b.to_string()))
                .collect()
        };
        let want = bins(&mut capture("tcp_rev_p2.server").lines());
        assert_eq!(
            want,
            ["0:0:1:0:1:0:0:0", "0:0:1:0:1:0:0:0", "0:0:0:0:0:0:0:0"]
        );
        assert_eq!(bins(&mut out.iter().map(String::as_str)), want, "{out:#?}");
        let rtry: Vec<&str> = out
            .iter()
            .filter(|l| l.starts_with("[  1]"))
            .map(|l| l.split_whitespace().nth(9).unwrap())
            .collect();
        assert_eq!(rtry, ["1", "1", "2"], "{out:#?}");
    }

    /// TCP `-R -P 2`: the sending members' rows under one header, then iperf 2.2.1's
    /// server's sum rows for them (`-e`: `[SUM-2]` under its receiver's `[SUM-cnt]
    /// ... Reads=Dist` header, the count the members' writes; plain `[SUM]`; CSV: the
    /// line of id -1 naming this server first, the client with port 0), per interval
    /// and for the whole test, last (`testdata/iperf2/tcp_rev_p2*.server.txt`); the
    /// sums add the members up.
    #[test]
    fn tcp_rev_p2_sum_rows_match_iperf2() {
        let out = rev_p2_run(Layout::Enhanced, false, 100, 128 * 1024);
        same_shape("tcp_rev_p2.server", &out.join("\n"));
        let sums: Vec<&String> = out.iter().filter(|l| l.starts_with("[SUM-2]")).collect();
        assert_eq!(sums.len(), 3, "{out:#?}");
        // 2 x 100 writes of 128 KiB a second: 25 MiB a second, 50 MiB in all.
        assert!(
            sums[0].starts_with("[SUM-2] 0.0000-1.0000 sec  25.0 MBytes ")
                && sums[0].contains(" 200="),
            "{out:#?}"
        );
        assert!(
            sums[2].starts_with("[SUM-2] 0.0000-2.0071 sec  50.0 MBytes ")
                && sums[2].ends_with(" 400=0:0:0:0:0:0:0:0"),
            "{out:#?}"
        );
        assert_eq!(out.last(), Some(sums[2]), "the whole test's sum last");
        let plain = rev_p2_run(Layout::Plain, false, 100, 128 * 1024);
        same_shape("tcp_rev_p2_plain.server", &plain.join("\n"));
        assert!(
            plain
                .last()
                .unwrap()
                .starts_with("[SUM] 0.0000-2.0071 sec  50.0 MBytes "),
            "{plain:#?}"
        );
        let csv = rev_p2_run(Layout::Csv, false, 100, 1000);
        same_shape("tcp_rev_p2_csv.server", &csv.join("\n"));
        let f: Vec<Vec<&str>> = csv.iter().map(|l| l.split(',').collect()).collect();
        let whole = f.last().unwrap();
        assert_eq!(
            &whole[1..7],
            ["127.0.0.1", "5001", "127.0.0.1", "0", "-1", "0.0-2.0"],
            "{csv:#?}"
        );
        let members: u64 = f
            .iter()
            .filter(|l| l[5] != "-1" && l[6] == "0.0-2.0")
            .map(|l| l[7].parse::<u64>().unwrap())
            .sum();
        assert_eq!((whole[7], members), ("400000", 400_000), "{csv:#?}");
        let captured = capture("tcp_rev_p2_csv.server");
        let want: Vec<&str> = captured.lines().last().unwrap().split(',').collect();
        assert_eq!((want[2], want[4], want[5]), ("25381", "0", "-1"));
    }

    /// UDP `-R -P 2`: each sending member's rows and `Sent` line, one column header and
    /// no sum, as iperf 2.2.1's server printed when it served both flows
    /// (`testdata/iperf2/udp_rev_p2_both*.server.txt`, its connection lines where the
    /// late flow joined); given the flows' first datagrams at once it serves one
    /// (`udp_rev_p2*.server.txt`), whose lines are the same shapes.
    #[test]
    fn udp_rev_p2_rows_match_iperf2() {
        use std::collections::BTreeSet;
        let set = |t: &str| -> BTreeSet<String> { shapes(t).into_iter().collect() };
        for (layout, names) in [
            (
                Layout::Enhanced,
                ["udp_rev_p2.server", "udp_rev_p2_both.server"],
            ),
            (
                Layout::Plain,
                ["udp_rev_p2_plain.server", "udp_rev_p2_both_plain.server"],
            ),
        ] {
            let out = rev_p2_run(layout, true, 86, 1470);
            let text = out.join("\n");
            for name in names {
                assert_eq!(set(&capture(name)), set(&text), "{name}:\n{text}");
            }
            assert!(!text.contains("[SUM"), "{text}");
            assert_eq!(text.matches("[ ID]").count(), 1, "{text}");
            assert_eq!(text.matches("] Sent 173 datagrams").count(), 2, "{text}");
        }
    }

    /// `--histograms` with `--trip-times` clients: T8 (UDP) and F8 (TCP) lines after
    /// each row, the whole test's with `(f)`, as iperf 2.2.1's server printed them.
    #[test]
    fn histogram_lines_match_iperf2() {
        let spec = HistSpec::default();
        for udp in [false, true] {
            let mut c = ctx(Layout::Enhanced, udp);
            c.trip_times = true;
            let mut out = banner(&c, c.datagram_len, 131072, Some(&spec));
            let mut t =
                ServerTest::new(c, 1, conn(), 1_764_184_214_054, 1.0).with_histograms(Some(spec));
            out.extend(t.opening());
            for i in 0..200u64 {
                let at = i as f64 * 0.01;
                if udp {
                    let counts = UdpCounts {
                        received: i + 1,
                        expected: i + 1,
                        ..UdpCounts::default()
                    };
                    out.extend(t.udp(1470, counts, at));
                } else {
                    out.extend(t.read(128 * 1024, 128 * 1024, at));
                }
                t.delay(0.0001 + (i % 4) as f64 * 1e-4, 1_795_744_642_066_825);
            }
            out.extend(t.finish(2.001));
            let name = if udp {
                "udp_hist.server"
            } else {
                "tcp_hist.server"
            };
            same_shape(name, &out.join("\n"));
        }
    }

    #[test]
    fn a_histogram_line_has_iperf2s_percentiles_and_outliers() {
        // iperf 2.2.1's server printed `1:9,2:87,3:3,5:1 (5.00/95.00/99.7%=1/2/5,
        // Outliers=4,obl/obu=0/0) (0.456 ms/...)` for these delays.
        let spec = HistSpec::default();
        let mut h = Hist::default();
        for (bin, n) in [(0, 9), (1, 87), (2, 3)] {
            for _ in 0..n {
                h.add(&spec, (f64::from(bin) * 100.0 + 50.0) / 1e6, 1);
            }
        }
        h.add(&spec, 456e-6, 1_795_744_642_066_825);
        let l = h.line(&spec, "[  1] 0.0000-1.0000 sec", "F8", false);
        assert_eq!(
            l,
            "[  1] 0.0000-1.0000 sec F8-PDF: bin(w=100us):cnt(100)=1:9,2:87,3:3,5:1 (5.00/95.00/99.7%=1/2/5,Outliers=4,obl/obu=0/0) (0.456 ms/1795744642.066825)"
        );
        // Out of the bins: counted in the population and below or above.
        h.add(&spec, -1e-3, 5);
        h.add(&spec, 11.0, 5);
        let l = h.line(&spec, "[  1] 0.0000-1.0000 sec", "F8", false);
        assert!(l.contains(":cnt(102)="), "{l}");
        assert!(l.contains(",obl/obu=1/1) (11000.000 ms/0.000005)"), "{l}");
        let fin = h.line(&spec, "[  1] 0.0000-2.0000 sec", "T8", true);
        assert!(fin.contains(" T8(f)-PDF: "), "{fin}");
    }

    #[test]
    fn histogram_options_parse_as_iperf2s() {
        assert_eq!(HistSpec::parse(""), Ok(HistSpec::default()));
        let h = HistSpec::parse("1m,500,10,90").unwrap();
        assert_eq!((h.width, h.per_s, h.bins), (1, 1e3, 500));
        assert_eq!((h.ci_lower, h.ci_upper), (10.0, 90.0));
        assert_eq!(HistSpec::parse("20u").unwrap().width, 20);
        for bad in ["0u", "x", "10u,0", "10u,99999999", "10u,10,101"] {
            assert!(HistSpec::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            HistSpec::default().header_line(),
            "Enabled receive histograms bin-width=0.100 ms, bins=100000 (clients should use --trip-times)"
        );
    }

    #[test]
    fn rows_count_what_each_interval_read() {
        let mut t = ServerTest::new(ctx(Layout::Csv, false), 3, conn(), 0, 1.0);
        let mut rows = Vec::new();
        rows.extend(t.read(1000, 1000, 0.1));
        rows.extend(t.read(500, 1000, 0.9));
        rows.extend(t.read(2000, 2000, 1.5));
        rows.extend(t.finish(1.75));
        let cols: Vec<Vec<String>> = rows
            .iter()
            .map(|l| l.split(',').map(String::from).collect())
            .collect();
        let spans: Vec<(&str, &str)> = cols
            .iter()
            .map(|c| (c[6].as_str(), c[7].as_str()))
            .collect();
        assert_eq!(
            spans,
            [
                ("0.0-1.0", "1500"),
                ("1.0-1.8", "2000"),
                ("0.0-1.8", "3500")
            ]
        );
        assert!(cols.iter().all(|c| c[5] == "3"), "{rows:?}");
    }

    /// `row_due` says when something told would end an interval (the printer then
    /// holds its output's lock while the row and a `-P` group's header are made).
    #[test]
    fn a_row_is_due_at_each_intervals_end() {
        let mut t = ServerTest::new(ctx(Layout::Plain, false), 1, conn(), 0, 1.0);
        assert!(!t.row_due(0.999) && t.row_due(1.0));
        assert!(t.read(10, 10, 0.5).is_empty());
        assert!(!t.read(10, 10, 1.2).is_empty(), "the first second's row");
        assert!(!t.row_due(1.999) && t.row_due(2.0));
        let none = ServerTest::new(ctx(Layout::Plain, false), 1, conn(), 0, 0.0);
        assert!(!none.row_due(1e9), "no -i: no interval rows");
    }

    #[test]
    fn without_an_interval_only_the_whole_test_row() {
        let mut t = ServerTest::new(ctx(Layout::Plain, false), 1, conn(), 0, 0.0);
        assert!(t.read(10, 10, 5.0).is_empty());
        let out = t.finish(10.0);
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(out[1].starts_with("[  1] 0.0000-10.0000 sec"), "{out:?}");
    }

    #[test]
    fn udp_loss_is_the_intervals_own() {
        let mut t = ServerTest::new(ctx(Layout::Csv, true), 1, conn(), 0, 1.0);
        let c = |expected, lost| UdpCounts {
            received: expected - lost,
            expected,
            lost,
            out_of_order: 0,
            jitter_ms: 0.5,
        };
        let mut rows = t.udp(100, c(10, 2), 0.5);
        rows.extend(t.udp(100, c(20, 3), 1.5));
        rows.extend(t.finish(2.0));
        let lost_total: Vec<String> = rows
            .iter()
            .map(|l| {
                let v: Vec<&str> = l.split(',').collect();
                format!("{}/{}", v[10], v[11])
            })
            .collect();
        assert_eq!(lost_total, ["2/10", "1/10", "3/20"], "{rows:?}");
    }
}
