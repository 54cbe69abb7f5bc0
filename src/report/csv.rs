//! CSV rendering of a report: one row per stream per interval, one per interval sum,
//! then the end summary's rows (per stream and the sums), under a header of stable
//! column names that carry their units (`bits_per_second`, `rtt_us`).
//!
//! The column names are a documented interface (`docs/csv.md`): add columns at the end
//! of [`Field::ALL`], never rename one. Cells are plain numbers (`.` decimal point,
//! Rust's shortest round-trip form, never an exponent or a unit suffix) or empty when the
//! row has no such figure (a TCP row's `jitter_ms`, a receiver's `retransmits`). Text
//! cells are quoted as RFC 4180 says when they hold a comma, a quote or a line break,
//! and neutralised (a leading `'`, quoted) when they start like a spreadsheet formula.
//!
//! [`rows`] renders a whole [`Report`] (`netmeter csv RESULT.json`); [`CsvRenderer`] is
//! the same rendering as an [`Observer`] of a running client test (`--csv`): the header
//! when the test starts, interval rows as they come, the end rows at the end.
//!
//! One file, code and unit tests: the column list, the rows (interval and end), the
//! cell formatting and the live renderer change together whenever a column is added,
//! and the tests read the rendering back through the same column names.

use super::observe::{Event, Observer};
use super::{
    Connected, End, EndSide, EndSum, EndUdp, Interval, Iperf2Figures, Report, Start, StreamExt,
    StreamInterval, SumInterval, UdpRecvFigures,
};
use crate::latency::LatencyStats;
use std::fmt::Write as _;

/// One CSV column. The names (and their order in [`Field::ALL`]) are stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Kind,
    Direction,
    Role,
    Stream,
    StartS,
    EndS,
    Seconds,
    UnixTimeS,
    Bytes,
    BitsPerSecond,
    Omitted,
    Retransmits,
    SndCwndBytes,
    SndWndBytes,
    RttUs,
    RttvarUs,
    Packets,
    LostPackets,
    LostPercent,
    JitterMs,
    OutOfOrder,
    Duplicates,
    LocalHost,
    LocalPort,
    RemoteHost,
    RemotePort,
    Title,
    Transactions,
    TransactionRttMeanUs,
    TransactionRttP99Us,
    OwdMeanUs,
    OwdP99Us,
    Connections,
    ConnectMeanUs,
    PacketsPerSecond,
    Writes,
    WriteErrors,
    Reads,
    InProgressBytes,
    InProgressPackets,
    NetPower,
    ClockSyncErrors,
    EcnNotEct,
    EcnEct1,
    EcnEct0,
    EcnCe,
    TcpCeDelivered,
    TcpCeDeliveredBytes,
    TcpCeReceived,
    TcpCeReceivedBytes,
}

impl Field {
    /// Every column, in the default order.
    pub const ALL: [Field; 50] = [
        Field::Kind,
        Field::Direction,
        Field::Role,
        Field::Stream,
        Field::StartS,
        Field::EndS,
        Field::Seconds,
        Field::UnixTimeS,
        Field::Bytes,
        Field::BitsPerSecond,
        Field::Omitted,
        Field::Retransmits,
        Field::SndCwndBytes,
        Field::SndWndBytes,
        Field::RttUs,
        Field::RttvarUs,
        Field::Packets,
        Field::LostPackets,
        Field::LostPercent,
        Field::JitterMs,
        Field::OutOfOrder,
        Field::Duplicates,
        Field::LocalHost,
        Field::LocalPort,
        Field::RemoteHost,
        Field::RemotePort,
        Field::Title,
        Field::Transactions,
        Field::TransactionRttMeanUs,
        Field::TransactionRttP99Us,
        Field::OwdMeanUs,
        Field::OwdP99Us,
        Field::Connections,
        Field::ConnectMeanUs,
        Field::PacketsPerSecond,
        Field::Writes,
        Field::WriteErrors,
        Field::Reads,
        Field::InProgressBytes,
        Field::InProgressPackets,
        Field::NetPower,
        Field::ClockSyncErrors,
        Field::EcnNotEct,
        Field::EcnEct1,
        Field::EcnEct0,
        Field::EcnCe,
        Field::TcpCeDelivered,
        Field::TcpCeDeliveredBytes,
        Field::TcpCeReceived,
        Field::TcpCeReceivedBytes,
    ];

    /// The header name.
    pub fn name(self) -> &'static str {
        match self {
            Field::Kind => "kind",
            Field::Direction => "direction",
            Field::Role => "role",
            Field::Stream => "stream",
            Field::StartS => "start_s",
            Field::EndS => "end_s",
            Field::Seconds => "seconds",
            Field::UnixTimeS => "unix_time_s",
            Field::Bytes => "bytes",
            Field::BitsPerSecond => "bits_per_second",
            Field::Omitted => "omitted",
            Field::Retransmits => "retransmits",
            Field::SndCwndBytes => "snd_cwnd_bytes",
            Field::SndWndBytes => "snd_wnd_bytes",
            Field::RttUs => "rtt_us",
            Field::RttvarUs => "rttvar_us",
            Field::Packets => "packets",
            Field::LostPackets => "lost_packets",
            Field::LostPercent => "lost_percent",
            Field::JitterMs => "jitter_ms",
            Field::OutOfOrder => "out_of_order",
            Field::Duplicates => "duplicates",
            Field::LocalHost => "local_host",
            Field::LocalPort => "local_port",
            Field::RemoteHost => "remote_host",
            Field::RemotePort => "remote_port",
            Field::Title => "title",
            Field::Transactions => "transactions",
            Field::TransactionRttMeanUs => "transaction_rtt_mean_us",
            Field::TransactionRttP99Us => "transaction_rtt_p99_us",
            Field::OwdMeanUs => "owd_mean_us",
            Field::OwdP99Us => "owd_p99_us",
            Field::Connections => "connections",
            Field::ConnectMeanUs => "connect_mean_us",
            Field::PacketsPerSecond => "packets_per_second",
            Field::Writes => "writes",
            Field::WriteErrors => "write_errors",
            Field::Reads => "reads",
            Field::InProgressBytes => "in_progress_bytes",
            Field::InProgressPackets => "in_progress_packets",
            Field::NetPower => "net_power",
            Field::ClockSyncErrors => "clock_sync_errors",
            Field::EcnNotEct => "ecn_not_ect",
            Field::EcnEct1 => "ecn_ect1",
            Field::EcnEct0 => "ecn_ect0",
            Field::EcnCe => "ecn_ce",
            Field::TcpCeDelivered => "tcp_ce_delivered",
            Field::TcpCeDeliveredBytes => "tcp_ce_delivered_bytes",
            Field::TcpCeReceived => "tcp_ce_received",
            Field::TcpCeReceivedBytes => "tcp_ce_received_bytes",
        }
    }
}

/// The columns to write, in order (`--fields a,b,c`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns(Vec<Field>);

impl Default for Columns {
    fn default() -> Columns {
        Columns(Field::ALL.to_vec())
    }
}

impl Columns {
    /// A comma-separated list of column names; an unknown or repeated name, or an empty
    /// list, is refused in one sentence that lists the valid names.
    pub fn parse(list: &str) -> Result<Columns, String> {
        parse_fields(list, &Field::ALL, Field::name, "").map(Columns)
    }

    pub fn fields(&self) -> &[Field] {
        &self.0
    }

    /// The header line, with its line break.
    pub fn header(&self) -> String {
        let names: Vec<&str> = self.0.iter().map(|f| f.name()).collect();
        format!("{}\n", names.join(","))
    }
}

/// A `--fields a,b,c` list read against the columns `all` (named by `name`): an unknown,
/// repeated or empty name is refused in one sentence that lists the valid names
/// (`context` follows "unknown column 'x'", e.g. " for a sweep or repetition").
pub(crate) fn parse_fields<F: Copy + PartialEq>(
    list: &str,
    all: &[F],
    name: fn(F) -> &'static str,
    context: &str,
) -> Result<Vec<F>, String> {
    let mut cols = Vec::new();
    for given in list.split(',').map(str::trim) {
        let Some(f) = all.iter().copied().find(|&f| name(f) == given) else {
            let valid: Vec<&str> = all.iter().map(|&f| name(f)).collect();
            return Err(format!(
                "--fields: unknown column '{given}'{context}; the columns are {}",
                valid.join(",")
            ));
        };
        if cols.contains(&f) {
            return Err(format!("--fields: column '{given}' is listed twice"));
        }
        cols.push(f);
    }
    Ok(cols)
}

/// What every row of one report shares: which side wrote it, when the test started, the
/// stream addresses and the title.
#[derive(Debug, Clone, Default)]
pub struct RowCtx {
    /// The report is the client's (`start.connecting_to` is set).
    pub client: bool,
    /// `-R`: the server sends.
    pub reverse: bool,
    /// Wall-clock start of the test, seconds since the epoch (0: unknown).
    pub start_unix_s: f64,
    pub connected: Vec<Connected>,
    pub title: Option<String>,
}

impl RowCtx {
    pub fn new(start: &Start, title: Option<&str>) -> RowCtx {
        let ts = &start.timestamp;
        // iperf3 and netmeter write `timemillisecs` as milliseconds since the epoch.
        let start_unix_s = if ts.timemillisecs > 0 {
            ts.timemillisecs as f64 / 1000.0
        } else {
            ts.timesecs as f64
        };
        RowCtx {
            client: start.connecting_to.is_some(),
            reverse: start.test_start.reverse != 0,
            start_unix_s,
            connected: start.connected.clone(),
            title: title.map(str::to_string),
        }
    }

    /// "up" (client → server) or "down" for a flow this side sends on or not.
    fn direction(&self, this_side_sends: bool) -> &'static str {
        if this_side_sends == self.client {
            "up"
        } else {
            "down"
        }
    }
}

/// One row before it is written: every figure optional.
#[derive(Debug, Clone, Default, PartialEq)]
struct Row {
    kind: &'static str,
    direction: &'static str,
    role: &'static str,
    /// The stream's id (iperf3's socket number), or `None` for a sum.
    stream: Option<i64>,
    start_s: f64,
    end_s: f64,
    seconds: f64,
    bytes: u64,
    bits_per_second: f64,
    omitted: Option<bool>,
    retransmits: Option<u64>,
    snd_cwnd_bytes: Option<u64>,
    snd_wnd_bytes: Option<u64>,
    rtt_us: Option<u64>,
    rttvar_us: Option<u64>,
    packets: Option<u64>,
    lost_packets: Option<u64>,
    lost_percent: Option<f64>,
    jitter_ms: Option<f64>,
    out_of_order: Option<u64>,
    duplicates: Option<u64>,
    /// A UDP receiver's datagrams per ECN codepoint (docs/ecn.md).
    ecn: Option<crate::stats::EcnCounts>,
    /// netmeter's per-interval extras (bounceback, trip times, connect-only, iperf 2's
    /// figures).
    ext: Option<StreamExt>,
    /// End rows: iperf 2's figures (`end.netmeter.iperf2_figures`).
    fig: Option<Iperf2Figures>,
}

fn role(sender: bool) -> &'static str {
    if sender { "sender" } else { "receiver" }
}

impl Row {
    /// The UDP columns (the receive figures where this side received, else the datagrams
    /// sent) and netmeter's extras.
    fn with_udp(
        mut self,
        recv: Option<UdpRecvFigures>,
        sent: Option<u64>,
        ext: Option<StreamExt>,
    ) -> Row {
        let extra = ext.and_then(|n| n.udp);
        self.packets = recv.map(|u| u.packets).or(sent);
        self.lost_packets = recv.map(|u| u.lost_packets);
        self.lost_percent = recv.map(|u| u.lost_percent);
        self.jitter_ms = recv.map(|u| u.jitter_ms);
        self.out_of_order = extra.map(|u| u.out_of_order);
        self.duplicates = extra.map(|u| u.duplicates);
        self.ecn = extra.and_then(|u| u.ecn).map(|e| e.counts);
        self.ext = ext;
        self
    }
}

fn stream_row(ctx: &RowCtx, s: &StreamInterval) -> Row {
    Row {
        kind: "interval",
        direction: ctx.direction(s.sender),
        role: role(s.sender),
        stream: Some(s.socket),
        start_s: s.start,
        end_s: s.end,
        seconds: s.seconds,
        bytes: s.bytes,
        bits_per_second: s.bits_per_second,
        omitted: Some(s.omitted),
        retransmits: s.tcp.map(|t| t.retransmits),
        snd_cwnd_bytes: s.tcp.map(|t| t.snd_cwnd),
        snd_wnd_bytes: s.tcp.map(|t| t.snd_wnd),
        rtt_us: s.tcp.map(|t| t.rtt),
        rttvar_us: s.tcp.map(|t| t.rttvar),
        ..Row::default()
    }
    .with_udp(s.udp_recv, s.packets, s.netmeter.as_deref().copied())
}

fn sum_row(ctx: &RowCtx, s: &SumInterval) -> Row {
    Row {
        kind: "interval",
        direction: ctx.direction(s.sender),
        role: role(s.sender),
        stream: None,
        start_s: s.start,
        end_s: s.end,
        seconds: s.seconds,
        bytes: s.bytes,
        bits_per_second: s.bits_per_second,
        omitted: Some(s.omitted),
        retransmits: s.retransmits,
        ..Row::default()
    }
    .with_udp(s.udp_recv, s.packets, s.netmeter.as_deref().copied())
}

/// The rows of one interval: its streams, then its sum(s).
fn interval_rows(ctx: &RowCtx, iv: &Interval) -> Vec<Row> {
    let mut rows: Vec<Row> = iv.streams.iter().map(|s| stream_row(ctx, s)).collect();
    // A row-less sum (a test without streams) says nothing.
    if !iv.streams.is_empty() {
        rows.push(sum_row(ctx, &iv.sum));
    }
    if let Some(rev) = &iv.sum_bidir_reverse {
        rows.push(sum_row(ctx, rev));
    }
    rows
}

/// `sender` says which object of the stream this is: iperf3 writes the same `sender`
/// flag (this side's role) into both.
fn end_side_row(direction: &'static str, sender: bool, side: &EndSide, stream: Option<i64>) -> Row {
    Row {
        kind: "end",
        direction,
        role: role(sender),
        stream,
        start_s: side.start,
        end_s: side.end,
        seconds: side.seconds,
        bytes: side.bytes,
        bits_per_second: side.bits_per_second,
        retransmits: side.retransmits,
        ..Row::default()
    }
}

fn end_udp_row(direction: &'static str, u: &EndUdp) -> Row {
    Row {
        kind: "end",
        direction,
        role: role(u.sender),
        stream: Some(u.socket),
        start_s: u.start,
        end_s: u.end,
        seconds: u.seconds,
        bytes: u.bytes,
        bits_per_second: u.bits_per_second,
        packets: Some(u.packets),
        lost_packets: Some(u.lost_packets),
        lost_percent: Some(u.lost_percent),
        jitter_ms: Some(u.jitter_ms),
        out_of_order: Some(u.out_of_order),
        duplicates: u.netmeter.map(|n| n.duplicates),
        ecn: u.netmeter.and_then(|n| n.ecn).map(|e| e.counts),
        ..Row::default()
    }
}

fn end_sum_row(direction: &'static str, sender: bool, s: &EndSum) -> Row {
    let row = Row {
        kind: "end",
        direction,
        role: role(sender),
        stream: None,
        start_s: s.start,
        end_s: s.end,
        seconds: s.seconds,
        bytes: s.bytes,
        bits_per_second: s.bits_per_second,
        retransmits: s.retransmits,
        ..Row::default()
    }
    .with_udp(s.udp_recv, None, None);
    Row {
        ecn: s.netmeter.and_then(|n| n.ecn).map(|e| e.counts),
        ..row
    }
}

/// The end summary's rows: each stream's sender and receiver figures (UDP: iperf3's one
/// merged row per stream), then the sums of each direction, sender before receiver.
fn end_rows(ctx: &RowCtx, end: &End) -> Vec<Row> {
    let mut rows = Vec::new();
    let figs = end.netmeter.iperf2_figures.as_ref();
    // iperf 2's figures of stream `i`, its sender's or its receiver's.
    let fig = |i: usize, sender: bool| {
        let s = figs.and_then(|f| f.streams.get(i))?;
        if sender { s.sender } else { s.receiver }
    };
    for (i, s) in end.streams.iter().enumerate() {
        if let Some(u) = &s.udp {
            // One merged row per stream, in this side's role: this side's figures.
            rows.push(Row {
                fig: fig(i, u.sender),
                ..end_udp_row(ctx.direction(u.sender), u)
            });
            continue;
        }
        let socket = s.sender.as_ref().or(s.receiver.as_ref()).map(|x| x.socket);
        // Which way the stream flows: this side's role on it, as the report inferred it.
        let sends = end.local.senders.get(i).copied();
        let dir = sends.map_or("", |b| ctx.direction(b));
        for (sender, side) in [(true, &s.sender), (false, &s.receiver)] {
            if let Some(side) = side {
                rows.push(Row {
                    fig: fig(i, sender),
                    ..end_side_row(dir, sender, side, socket)
                });
            }
        }
    }
    // The forward direction is the client's upload unless the test was reversed; with
    // --bidir the `_bidir_reverse` sums are the download.
    let forward = if ctx.reverse { "down" } else { "up" };
    let sums = [
        (forward, true, &end.sum_sent, figs.and_then(|f| f.sum_sent)),
        (
            forward,
            false,
            &end.sum_received,
            figs.and_then(|f| f.sum_received),
        ),
        (
            "down",
            true,
            &end.sum_sent_bidir_reverse,
            figs.and_then(|f| f.sum_sent_bidir_reverse),
        ),
        (
            "down",
            false,
            &end.sum_received_bidir_reverse,
            figs.and_then(|f| f.sum_received_bidir_reverse),
        ),
    ];
    let any = sums.iter().any(|(_, _, s, _)| s.is_some());
    for (dir, sender, sum, fig) in sums {
        if let Some(s) = sum {
            rows.push(Row {
                fig,
                ..end_sum_row(dir, sender, s)
            });
        }
    }
    // Older UDP documents have only the merged `sum`.
    if !any && let Some(s) = &end.sum {
        rows.push(end_sum_row(forward, s.sender, s));
    }
    rows
}

pub(crate) fn num(out: &mut String, v: f64) {
    // Rust's `Display` for floats: shortest round-trip digits, `.` decimal point, never
    // an exponent. A non-finite figure has no honest value: the cell stays empty.
    if v.is_finite() {
        let _ = write!(out, "{v}");
    }
}

fn opt<T: std::fmt::Display>(out: &mut String, v: Option<T>) {
    if let Some(v) = v {
        let _ = write!(out, "{v}");
    }
}

/// A latency figure (kept in milliseconds) in microseconds; empty without samples.
fn us(out: &mut String, stats: Option<LatencyStats>, pick: impl Fn(&LatencyStats) -> f64) {
    if let Some(l) = stats.filter(|l| l.count > 0) {
        num(out, pick(&l) * 1000.0);
    }
}

/// A text cell, quoted when it must be (RFC 4180). A text that a spreadsheet would
/// take for a formula (OWASP's CSV injection: a first character of `=`, `+`, `-`, `@`,
/// tab or carriage return) gets a leading `'` and quotes, so it shows as the text it is;
/// a title or a host name from a result file is anyone's text. Numbers never come here.
pub(crate) fn text(out: &mut String, s: &str) {
    let formula = s.starts_with(['=', '+', '-', '@', '\t', '\r']);
    if formula || s.contains([',', '"', '\n', '\r']) {
        out.push('"');
        if formula {
            out.push('\'');
        }
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

fn render(out: &mut String, cols: &Columns, ctx: &RowCtx, row: &Row) {
    let conn = row
        .stream
        .and_then(|id| ctx.connected.iter().find(|c| c.socket == id));
    let fig = row.fig.or(row.ext.map(|e| e.iperf2)).unwrap_or_default();
    let float = |out: &mut String, v: Option<f64>| {
        if let Some(v) = v {
            num(out, v)
        }
    };
    for (i, f) in cols.fields().iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match f {
            Field::Kind => out.push_str(row.kind),
            Field::Direction => out.push_str(row.direction),
            Field::Role => out.push_str(row.role),
            Field::Stream => match row.stream {
                Some(id) => opt(out, Some(id)),
                None => out.push_str("sum"),
            },
            Field::StartS => num(out, row.start_s),
            Field::EndS => num(out, row.end_s),
            Field::Seconds => num(out, row.seconds),
            Field::UnixTimeS => {
                if ctx.start_unix_s > 0.0 {
                    // Milliseconds are all the start timestamp carries.
                    num(
                        out,
                        ((ctx.start_unix_s + row.end_s) * 1000.0).round() / 1000.0,
                    )
                }
            }
            Field::Bytes => opt(out, Some(row.bytes)),
            Field::BitsPerSecond => num(out, row.bits_per_second),
            Field::Omitted => opt(out, row.omitted.map(u8::from)),
            Field::Retransmits => opt(out, row.retransmits),
            Field::SndCwndBytes => opt(out, row.snd_cwnd_bytes),
            Field::SndWndBytes => opt(out, row.snd_wnd_bytes),
            Field::RttUs => opt(out, row.rtt_us),
            Field::RttvarUs => opt(out, row.rttvar_us),
            Field::Packets => opt(out, row.packets),
            Field::LostPackets => opt(out, row.lost_packets),
            Field::LostPercent => {
                if let Some(v) = row.lost_percent {
                    num(out, v)
                }
            }
            Field::JitterMs => {
                if let Some(v) = row.jitter_ms {
                    num(out, v)
                }
            }
            Field::OutOfOrder => opt(out, row.out_of_order),
            Field::Duplicates => opt(out, row.duplicates),
            Field::LocalHost => text(out, conn.map_or("", |c| c.local_host.as_str())),
            Field::LocalPort => opt(out, conn.map(|c| c.local_port)),
            Field::RemoteHost => text(out, conn.map_or("", |c| c.remote_host.as_str())),
            Field::RemotePort => opt(out, conn.map(|c| c.remote_port)),
            Field::Title => text(out, ctx.title.as_deref().unwrap_or("")),
            Field::Transactions => opt(out, row.ext.and_then(|e| e.transactions)),
            Field::TransactionRttMeanUs => us(out, row.ext.and_then(|e| e.rtt), |l| l.mean_ms),
            Field::TransactionRttP99Us => us(out, row.ext.and_then(|e| e.rtt), |l| l.p99_ms),
            Field::OwdMeanUs => us(out, row.ext.and_then(|e| e.owd), |l| l.mean_ms),
            Field::OwdP99Us => us(out, row.ext.and_then(|e| e.owd), |l| l.p99_ms),
            Field::Connections => opt(out, row.ext.and_then(|e| e.connections)),
            Field::ConnectMeanUs => us(out, row.ext.and_then(|e| e.connect), |l| l.mean_ms),
            Field::PacketsPerSecond => float(out, fig.packets_per_second),
            Field::Writes => opt(out, fig.writes),
            Field::WriteErrors => opt(out, fig.write_errors),
            Field::Reads => opt(out, fig.reads),
            Field::InProgressBytes => float(out, fig.in_progress_bytes),
            Field::InProgressPackets => float(out, fig.in_progress_packets),
            Field::NetPower => float(out, fig.net_power),
            Field::ClockSyncErrors => opt(out, fig.clock_sync_errors),
            Field::EcnNotEct => opt(out, row.ecn.map(|e| e.not_ect)),
            Field::EcnEct1 => opt(out, row.ecn.map(|e| e.ect1)),
            Field::EcnEct0 => opt(out, row.ecn.map(|e| e.ect0)),
            Field::EcnCe => opt(out, row.ecn.map(|e| e.ce)),
            Field::TcpCeDelivered => opt(out, tcp_ecn(row.ext.as_ref()).map(|e| e.ce_delivered)),
            Field::TcpCeDeliveredBytes => opt(
                out,
                tcp_ecn(row.ext.as_ref())
                    .and_then(|e| e.accecn)
                    .map(|a| a.delivered_ce_bytes),
            ),
            Field::TcpCeReceived => opt(
                out,
                row.ext
                    .and_then(|e| e.tcp_received_ecn)
                    .map(|r| r.received_ce),
            ),
            Field::TcpCeReceivedBytes => opt(
                out,
                row.ext
                    .and_then(|e| e.tcp_received_ecn)
                    .map(|r| r.received_ce_bytes),
            ),
        }
    }
    out.push('\n');
}

/// A TCP sender row's ECN figures, where the connection negotiated ECN.
fn tcp_ecn(ext: Option<&StreamExt>) -> Option<crate::report::TcpEcn> {
    ext.and_then(|e| e.tcp).and_then(|t| t.ecn)
}

fn render_all(cols: &Columns, ctx: &RowCtx, rows: &[Row]) -> String {
    let mut out = String::new();
    for r in rows {
        render(&mut out, cols, ctx, r);
    }
    out
}

/// A whole report: the header, every interval's rows, the end rows.
pub fn rows(report: &Report, cols: &Columns) -> String {
    let ctx = RowCtx::new(&report.start, report.title.as_deref());
    let mut out = cols.header();
    for iv in &report.intervals {
        out.push_str(&render_all(cols, &ctx, &interval_rows(&ctx, iv)));
    }
    out.push_str(&render_all(cols, &ctx, &end_rows(&ctx, &report.end)));
    out
}

/// `--csv`: a running test's rows as they become known. Warnings go elsewhere (the CLI
/// prints them on stderr), so the rows' destination holds nothing but CSV.
pub struct CsvRenderer {
    cols: Columns,
    sink: Box<dyn FnMut(&str)>,
    warn: Box<dyn FnMut(&str)>,
    title: Option<String>,
    ctx: Option<RowCtx>,
}

impl CsvRenderer {
    /// `write` receives whole lines (the header, then rows); `warn` each warning.
    pub fn new(
        cols: Columns,
        title: Option<String>,
        write: Box<dyn FnMut(&str)>,
        warn: Box<dyn FnMut(&str)>,
    ) -> CsvRenderer {
        CsvRenderer {
            cols,
            sink: write,
            warn,
            title,
            ctx: None,
        }
    }

    /// Render rows with the context from `start` (a default one if `start` never came).
    fn write_rows(&mut self, rows: impl FnOnce(&RowCtx) -> Vec<Row>) {
        let title = &self.title;
        let ctx = self.ctx.get_or_insert_with(|| RowCtx {
            title: title.clone(),
            ..RowCtx::default()
        });
        let s = render_all(&self.cols, ctx, &rows(ctx));
        (self.sink)(&s);
    }
}

impl Observer for CsvRenderer {
    fn on(&mut self, event: Event<'_>) {
        match event {
            Event::Started(start) => {
                self.ctx = Some(RowCtx::new(start, self.title.as_deref()));
                let h = self.cols.header();
                (self.sink)(&h);
            }
            Event::Interval(iv) => self.write_rows(|ctx| interval_rows(ctx, iv)),
            Event::End(end) => self.write_rows(|ctx| end_rows(ctx, end)),
            Event::Warning(w) => (self.warn)(w),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Report {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/report/testdata")
            .join(name);
        let text = std::fs::read_to_string(&p).unwrap();
        if name.ends_with(".jsonl") {
            Report::from_json_stream(&text).unwrap()
        } else {
            Report::from_document(&text).unwrap()
        }
    }

    /// Split rendered CSV into a header and rows of cells (no quoted cells here).
    fn table(csv: &str) -> (Vec<String>, Vec<Vec<String>>) {
        let mut lines = csv.lines();
        let head = lines.next().unwrap().split(',').map(String::from).collect();
        let rows = lines
            .map(|l| l.split(',').map(String::from).collect())
            .collect();
        (head, rows)
    }

    fn col<'a>(head: &[String], row: &'a [String], name: &str) -> &'a str {
        let i = head.iter().position(|h| h == name).unwrap();
        &row[i]
    }

    #[test]
    fn header_is_the_documented_names() {
        assert_eq!(
            Columns::default().header(),
            "kind,direction,role,stream,start_s,end_s,seconds,unix_time_s,bytes,\
             bits_per_second,omitted,retransmits,snd_cwnd_bytes,snd_wnd_bytes,rtt_us,\
             rttvar_us,packets,lost_packets,lost_percent,jitter_ms,out_of_order,duplicates,\
             local_host,local_port,remote_host,remote_port,title,transactions,\
             transaction_rtt_mean_us,transaction_rtt_p99_us,owd_mean_us,owd_p99_us,\
             connections,connect_mean_us,packets_per_second,writes,write_errors,reads,\
             in_progress_bytes,in_progress_packets,net_power,clock_sync_errors,\
             ecn_not_ect,ecn_ect1,ecn_ect0,ecn_ce,tcp_ce_delivered,\
             tcp_ce_delivered_bytes,tcp_ce_received,tcp_ce_received_bytes\n"
        );
    }

    #[test]
    fn ecn_columns_carry_a_receivers_counts() {
        let mut r = fixture("udp_bidir.json");
        let counts = crate::stats::EcnCounts {
            not_ect: 1,
            ect1: 2,
            ect0: 3,
            ce: 4,
        };
        let i = r.intervals[0]
            .streams
            .iter()
            .position(|s| s.udp_recv.is_some())
            .expect("a receiver row");
        let row = &mut r.intervals[0].streams[i];
        let ext = row.netmeter.get_or_insert_with(Default::default);
        ext.udp.get_or_insert_with(Default::default).ecn = Some(counts.figures());
        let socket = row.socket.to_string();
        let (head, rows) = table(&rows(&r, &Columns::default()));
        let got = rows
            .iter()
            .find(|x| {
                x[0] == "interval"
                    && col(&head, x, "stream") == socket
                    && col(&head, x, "role") == "receiver"
            })
            .expect("the row");
        let cells: Vec<_> = ["ecn_not_ect", "ecn_ect1", "ecn_ect0", "ecn_ce"]
            .iter()
            .map(|c| col(&head, got, c))
            .collect();
        assert_eq!(cells, ["1", "2", "3", "4"]);
        // A sender row has none.
        let sender = rows
            .iter()
            .find(|x| col(&head, x, "role") == "sender")
            .unwrap();
        assert_eq!(col(&head, sender, "ecn_ce"), "");
    }

    /// TCP with -P 2 (iperf3 3.22 lines): per interval two stream rows and a sum row,
    /// then per stream a sender and a receiver row and the two sums; every number parses
    /// and the figures are the report's.
    #[test]
    fn tcp_rows_per_stream_per_interval_plus_sums() {
        let r = fixture("iperf3_322_tcp.jsonl");
        let csv = rows(&r, &Columns::default());
        let (head, rows) = table(&csv);
        assert_eq!(rows.len(), 2 * 3 + 2 * 2 + 2, "{csv}");
        assert!(rows.iter().all(|row| row.len() == head.len()));
        let first = &rows[0];
        let s = &r.intervals[0].streams[0];
        assert_eq!(col(&head, first, "kind"), "interval");
        assert_eq!(col(&head, first, "direction"), "up");
        assert_eq!(col(&head, first, "role"), "sender");
        assert_eq!(col(&head, first, "stream"), s.socket.to_string());
        assert_eq!(col(&head, first, "bytes"), s.bytes.to_string());
        let bps: f64 = col(&head, first, "bits_per_second").parse().unwrap();
        assert_eq!(bps, s.bits_per_second);
        let tcp = s.tcp.unwrap();
        assert_eq!(col(&head, first, "rtt_us"), tcp.rtt.to_string());
        assert_eq!(
            col(&head, first, "snd_cwnd_bytes"),
            tcp.snd_cwnd.to_string()
        );
        assert_eq!(col(&head, first, "jitter_ms"), "");
        assert_eq!(col(&head, first, "local_host"), "127.0.0.1");
        let t: f64 = col(&head, first, "unix_time_s").parse().unwrap();
        assert!((t - (1795392741.001 + s.end)).abs() < 0.001, "{t}");
        assert_eq!(col(&head, &rows[2], "stream"), "sum");
        assert_eq!(
            col(&head, &rows[2], "retransmits"),
            r.intervals[0].sum.retransmits.unwrap().to_string()
        );
        let end: Vec<_> = rows.iter().filter(|r| r[0] == "end").collect();
        let roles: Vec<_> = end.iter().map(|r| col(&head, r, "role")).collect();
        assert_eq!(
            roles,
            [
                "sender", "receiver", "sender", "receiver", "sender", "receiver"
            ]
        );
        let last = end.last().unwrap();
        assert_eq!(col(&head, last, "stream"), "sum");
        assert_eq!(
            col(&head, last, "bytes"),
            r.end.sum_received.as_ref().unwrap().bytes.to_string()
        );
        // Machine-parseable: every numeric cell is a plain number.
        for row in &rows {
            for (h, c) in head.iter().zip(row) {
                let text_col = ["kind", "direction", "role", "stream", "local_host"]
                    .contains(&h.as_str())
                    || h.ends_with("host")
                    || h == "title";
                if !text_col && !c.is_empty() {
                    assert!(c.parse::<f64>().is_ok(), "{h}={c}");
                    assert!(!c.contains(['e', 'E']), "{h}={c}");
                }
            }
        }
    }

    /// UDP: receive figures on the receiver's rows, packets on the sender's; the
    /// --bidir test's reverse sums are the download.
    #[test]
    fn udp_bidir_rows() {
        let r = fixture("udp_bidir.json");
        let (head, rows) = table(&rows(&r, &Columns::default()));
        let iv: Vec<_> = rows.iter().filter(|r| r[0] == "interval").collect();
        let per = r.intervals[0].streams.len() + 2;
        assert_eq!(iv.len(), r.intervals.len() * per);
        let down_sum = iv[per - 1];
        assert_eq!(col(&head, down_sum, "stream"), "sum");
        assert_eq!(col(&head, down_sum, "direction"), "down");
        assert_eq!(col(&head, down_sum, "role"), "receiver");
        let rev = r.intervals[0].sum_bidir_reverse.as_ref().unwrap();
        let recv = rev.udp_recv.unwrap();
        assert_eq!(col(&head, down_sum, "packets"), recv.packets.to_string());
        let j: f64 = col(&head, down_sum, "jitter_ms").parse().unwrap();
        assert_eq!(j, recv.jitter_ms);
        let up_sum = iv[per - 2];
        assert_eq!(col(&head, up_sum, "direction"), "up");
        assert_eq!(col(&head, up_sum, "jitter_ms"), "");
        assert_eq!(
            col(&head, up_sum, "packets"),
            r.intervals[0].sum.packets.unwrap().to_string()
        );
        let end_dirs: Vec<_> = rows
            .iter()
            .filter(|r| r[0] == "end" && r[3] == "sum")
            .map(|r| (col(&head, r, "direction"), col(&head, r, "role")))
            .collect();
        assert_eq!(
            end_dirs,
            [
                ("up", "sender"),
                ("up", "receiver"),
                ("down", "sender"),
                ("down", "receiver")
            ]
        );
    }

    /// iperf3 3.18 writes no `reorder` key: its rows keep their TCP figures.
    #[test]
    fn iperf3_318_rows_have_tcp_figures() {
        let r = fixture("iperf3_318_tcp.jsonl");
        let (head, rows) = table(&rows(&r, &Columns::default()));
        let first = &rows[0];
        assert_eq!(col(&head, first, "role"), "sender");
        assert_eq!(
            col(&head, first, "rtt_us"),
            r.intervals[0].streams[0].tcp.unwrap().rtt.to_string()
        );
        assert_ne!(col(&head, first, "snd_cwnd_bytes"), "");
    }

    /// Bounceback and connect-only rows carry their transactions, connections and
    /// latencies (kept in ms in the report, written in µs).
    #[test]
    fn netmeter_mode_columns() {
        let r = fixture("bounceback.json");
        let cols = Columns::parse(
            "stream,transactions,transaction_rtt_mean_us,transaction_rtt_p99_us,owd_mean_us",
        )
        .unwrap();
        let (head, got) = table(&rows(&r, &cols));
        let ext = r.intervals[0].streams[0]
            .netmeter
            .as_deref()
            .copied()
            .unwrap();
        let rtt = ext.rtt.unwrap();
        assert_eq!(
            col(&head, &got[0], "transactions"),
            ext.transactions.unwrap().to_string()
        );
        let mean: f64 = col(&head, &got[0], "transaction_rtt_mean_us")
            .parse()
            .unwrap();
        assert!((mean - rtt.mean_ms * 1000.0).abs() < 1e-6, "{mean}");
        let p99: f64 = col(&head, &got[0], "transaction_rtt_p99_us")
            .parse()
            .unwrap();
        assert!((p99 - rtt.p99_ms * 1000.0).abs() < 1e-6, "{p99}");
        assert_eq!(col(&head, &got[0], "owd_mean_us"), "");
        let r = fixture("connect_only.json");
        let cols = Columns::parse("stream,connections,connect_mean_us,transactions").unwrap();
        let (head, got) = table(&rows(&r, &cols));
        let ext = r.intervals[0].sum.netmeter.as_deref().copied().unwrap();
        assert_eq!(col(&head, &got[1], "stream"), "sum");
        assert_eq!(
            col(&head, &got[1], "connections"),
            ext.connections.unwrap().to_string()
        );
        let c: f64 = col(&head, &got[1], "connect_mean_us").parse().unwrap();
        assert!((c - ext.connect.unwrap().mean_ms * 1000.0).abs() < 1e-6);
        assert_eq!(col(&head, &got[1], "transactions"), "");
    }

    #[test]
    fn fields_choose_and_order_columns() {
        let r = fixture("tcp.json");
        let cols = Columns::parse("bits_per_second, stream,kind").unwrap();
        let csv = rows(&r, &cols);
        let mut lines = csv.lines();
        assert_eq!(lines.next(), Some("bits_per_second,stream,kind"));
        let first: Vec<_> = lines.next().unwrap().split(',').collect();
        assert_eq!(first[1], r.intervals[0].streams[0].socket.to_string());
        assert_eq!(first[2], "interval");
        let e = Columns::parse("bytes,rtt").unwrap_err();
        assert!(e.starts_with("--fields: unknown column 'rtt'; the columns are kind,"));
        assert!(Columns::parse("bytes,bytes").is_err());
        assert!(Columns::parse("").is_err());
    }

    #[test]
    fn text_cells_are_quoted() {
        let mut r = fixture("tcp.json");
        r.title = Some("lab, \"run 2\"".into());
        let csv = rows(&r, &Columns::parse("kind,title").unwrap());
        assert_eq!(csv.lines().nth(1), Some("interval,\"lab, \"\"run 2\"\"\""));
    }

    #[test]
    fn text_that_looks_like_a_formula_stays_text_and_numbers_stay_numbers() {
        for (title, cell) in [
            (
                "=HYPERLINK(\"http://x\")",
                "\"'=HYPERLINK(\"\"http://x\"\")\"",
            ),
            ("+1+2", "\"'+1+2\""),
            ("-2+3", "\"'-2+3\""),
            ("@SUM(A1)", "\"'@SUM(A1)\""),
            ("\t=1", "\"'\t=1\""),
            ("lab 2 = ok", "lab 2 = ok"),
        ] {
            let mut r = fixture("tcp.json");
            r.title = Some(title.into());
            r.start.connected[0].remote_host = title.into();
            let csv = rows(&r, &Columns::parse("title,remote_host").unwrap());
            assert_eq!(
                csv.lines().nth(1),
                Some(format!("{cell},{cell}").as_str()),
                "{title}"
            );
        }
        // A negative number is a number: a non-finite or negative figure is never
        // quoted (the ones that can be negative are floats, e.g. a clock offset).
        let mut out = String::new();
        num(&mut out, -1.5);
        opt(&mut out, Some(-3i64));
        assert_eq!(out, "-1.5-3");
    }

    /// The live renderer writes what `rows` writes for the same report.
    #[test]
    fn renderer_matches_the_whole_report_rendering() {
        use std::sync::{Arc, Mutex};
        let r = fixture("tcp_bidir.json");
        let out = Arc::new(Mutex::new(String::new()));
        let o = out.clone();
        let mut rr = CsvRenderer::new(
            Columns::default(),
            None,
            Box::new(move |s| o.lock().unwrap().push_str(s)),
            Box::new(|w| panic!("no warning expected: {w}")),
        );
        rr.on(Event::Started(&r.start));
        for iv in &r.intervals {
            rr.on(Event::Interval(iv));
        }
        rr.on(Event::End(&r.end));
        rr.on(Event::Finished(&r));
        assert_eq!(*out.lock().unwrap(), rows(&r, &Columns::default()));
    }

    #[test]
    fn numbers_never_use_exponents() {
        let mut s = String::new();
        num(&mut s, 1e21);
        s.push(' ');
        num(&mut s, 1.5e-7);
        s.push(' ');
        num(&mut s, f64::NAN);
        assert_eq!(s, "1000000000000000000000 0.00000015 ");
    }
}
