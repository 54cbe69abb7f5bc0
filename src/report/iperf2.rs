//! iperf 2's output, so scripts written for iperf 2 read netmeter's (`netmeter iperf2`,
//! netmeter invoked as `iperf`): its plain layout, its enhanced (`-e`) layout and its
//! CSV (`-y C`), line for line with iperf 2.2.1 (`src/Locale.c`'s format strings,
//! `src/ReportOutputs.c`), rendered from a [`Report`](crate::report::Report)'s parts.
//!
//! Pure: every line is a function of the report and of an [`Iperf2Ctx`] holding the few
//! facts the report does not (the process id, the command line's host). A figure
//! iperf 2 prints that the report does not hold is printed `NA`, never invented (iperf 2
//! itself prints `NA` where its kernel gives no figure). The observer that prints these
//! lines as a test runs is [`render::Iperf2Renderer`]; the captures of iperf 2.2.1 the
//! snapshot tests compare against are in `report/testdata/iperf2/`.

use super::{
    Connected, Iperf2Figures, Start, StreamExt, StreamInterval, SumInterval, TcpExtra, TcpFigures,
    UdpRecvFigures,
};
use crate::latency::LatencyStats;

pub mod csv;
pub mod lines;
pub mod render;
pub mod rows;
pub mod server;
pub mod shape;
#[cfg(test)]
mod tests;

/// Which of iperf 2's layouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// iperf 2 without `-e`.
    #[default]
    Plain,
    /// `-e`: the enhanced columns.
    Enhanced,
    /// `-y C`: comma-separated values.
    Csv,
}

/// What the lines need beyond the report.
#[derive(Debug, Clone, Default)]
pub struct Iperf2Ctx {
    pub layout: Layout,
    /// This side is the client.
    pub client: bool,
    pub udp: bool,
    /// Client: the host as typed (`-c HOST`).
    pub host: String,
    pub port: u16,
    /// This process's id (iperf 2 prints it in the `-e` header).
    pub pid: u32,
    /// `-N`: TCP_NODELAY (the header's "Nagle off").
    pub nodelay: bool,
    /// `-P`: parallel streams (the header's flows count).
    pub parallel: u32,
    /// `--trip-times`: the connection line says so, and UDP receivers use the
    /// trip-time columns.
    pub trip_times: bool,
    /// `-u` client: the datagram size it sends (`-l`).
    pub datagram_len: u64,
    /// `--bounceback`: the request and reply sizes and the server's hold, µs.
    pub bounceback: Option<Bounceback>,
    /// `--isochronous`: frames per second and the per-frame rate's mean and deviation.
    pub isochronous: Option<crate::wire::Isochronous>,
    /// TCP periodic bursts (`--burst-size`, `--burst-period`): bytes and seconds.
    pub burst: Option<(u64, f64)>,
    /// `-x`: the report types left out.
    pub exclude: Exclude,
    /// `--sum-only`: with several streams, only the `[SUM-N]` rows.
    pub sum_only: bool,
}

/// iperf 2's `-x [CDMSV]`: report types left out (M, multicast, has nothing to leave out
/// here).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exclude {
    /// `C`: the connection lines.
    pub connections: bool,
    /// `D`: the data rows (intervals and the whole test's).
    pub data: bool,
    /// `S`: the settings header.
    pub settings: bool,
    /// `V`: the server's report a UDP client prints.
    pub server_reports: bool,
}

/// A bounceback test's sizes, as its header and rows print them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bounceback {
    pub request_len: u32,
    pub reply_len: u32,
    pub hold_us: u32,
    /// A client's requests per burst (iperf 2's `--bounceback=N`).
    pub burst: u32,
    /// A client's time between bursts, µs (0: back to back, or not known).
    pub period_us: u32,
}

/// iperf 2's `byte_snprintf`: `v` bytes in `fmt`'s unit (`A`/`a` adaptive bytes/bits,
/// `K`/`k`, `M`/`m`, `G`/`g`, `T`/`t`, `B`/`b` units), four places, unit name after a
/// space ("1.87 GByte", " 862 MByte", "16.1 Gbit"); the caller appends "s" or "s/sec".
pub fn byte_fmt(v: f64, fmt: char) -> String {
    const BYTE: [&str; 6] = ["Byte", "KByte", "MByte", "GByte", "TByte", "PByte"];
    const BIT: [&str; 6] = ["bit", "Kbit", "Mbit", "Gbit", "Tbit", "Pbit"];
    let bits = fmt.is_ascii_lowercase();
    let mut n = if bits { v * 8.0 } else { v };
    let base = if bits { 1000.0 } else { 1024.0 };
    let conv = match fmt.to_ascii_uppercase() {
        'B' => 0,
        'K' => 1,
        'M' => 2,
        'G' => 3,
        'T' => 4,
        'P' => 5,
        _ => {
            let mut t = n.abs();
            let mut c = 0;
            while t >= base && c < 5 {
                t /= base;
                c += 1;
            }
            c
        }
    };
    n /= base.powi(conv as i32);
    let unit = if bits { BIT[conv] } else { BYTE[conv] };
    let a = n.abs();
    if a < 0.9995 {
        format!("{n:4.3} {unit}")
    } else if a < 9.995 {
        format!("{n:4.2} {unit}")
    } else if a < 99.95 {
        format!("{n:4.1} {unit}")
    } else {
        format!("{n:4.0} {unit}")
    }
}

/// C's `%.2g`: two significant digits, trailing zeros dropped, exponent form outside
/// 1e-4..100 (iperf 2's loss percent).
pub fn g2(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v.is_nan() { "nan".into() } else { "0".into() };
    }
    let s = format!("{v:.1e}");
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..2).contains(&exp) {
        let mant = mant.trim_end_matches('0').trim_end_matches('.');
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mant}e{sign}{:02}", exp.abs());
    }
    let decimals = (1 - exp).max(0) as usize;
    let f = format!("{v:.decimals$}");
    if f.contains('.') {
        f.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        f
    }
}

/// `[  1] `: iperf 2's transfer id column.
pub fn id(n: usize) -> String {
    format!("[{n:3}] ")
}

/// `0.0000-1.0000 sec` (`IPERFTimeFrmt`).
pub fn span(start: f64, end: f64) -> String {
    format!("{start:4.4}-{end:4.4} sec")
}

/// The transfer and bandwidth columns, `_print_stats_common`: "1.87 GBytes  16.1 Gbits/sec".
pub fn transfer(bytes: u64, seconds: f64) -> String {
    let rate = if seconds > 0.0 {
        bytes as f64 / seconds
    } else {
        0.0
    };
    format!(
        "{}s  {}s/sec",
        byte_fmt(bytes as f64, 'A'),
        byte_fmt(rate, 'a')
    )
}

/// iperf 2's `set_netpowerbuf`: bytes/s over a delay in seconds, × 10⁻⁶; `NAN` without a
/// delay.
pub fn net_power(bytes: u64, seconds: f64, delay_s: f64) -> String {
    if delay_s <= 0.0 || seconds <= 0.0 {
        return "NAN".into();
    }
    let p = 1e-6 * (bytes as f64 / seconds / delay_s);
    if p < -1e7 {
        "OBL".into()
    } else if p > 100.0 {
        format!("{p:.0}")
    } else if p > 10.0 {
        format!("{p:.2}")
    } else {
        format!("{p:.6}")
    }
}

/// `avg/min/max/stdev` in milliseconds, `%.3f` each.
pub fn latency4(l: &LatencyStats) -> String {
    format!(
        "{:.3}/{:.3}/{:.3}/{:.3}",
        l.mean_ms, l.min_ms, l.max_ms, l.stdev_ms
    )
}

/// A number, or `NA` when the report does not hold it.
pub fn or_na<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "NA".to_string(), |v| v.to_string())
}

/// iperf 2's stream number of a report stream: its place among the connected streams,
/// from 1 (iperf 2 numbers its transfers 1, 2, …; iperf3's socket numbers mean nothing
/// to its scripts).
pub fn stream_no(start: Option<&Start>, socket: i64) -> usize {
    start
        .and_then(|s| s.connected.iter().position(|c| c.socket == socket))
        .map_or(socket.max(0) as usize, |i| i + 1)
}

/// The connection a stream number stands for.
pub fn connection(start: Option<&Start>, socket: i64) -> Option<&Connected> {
    start.and_then(|s| s.connected.iter().find(|c| c.socket == socket))
}

/// A stream's row or the sum's (an interval's, or the whole test's at the end), as
/// the line functions read it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Row {
    pub start: f64,
    pub end: f64,
    pub seconds: f64,
    pub bytes: u64,
    pub packets: Option<u64>,
    pub tcp: Option<TcpFigures>,
    pub tcp_extra: Option<TcpExtra>,
    pub udp_recv: Option<UdpRecvFigures>,
    pub owd: Option<LatencyStats>,
    pub retransmits: Option<u64>,
    /// UDP receivers: datagrams that arrived out of order.
    pub out_of_order: Option<u64>,
    /// Bounceback: requests answered, and their round trips.
    pub transactions: Option<u64>,
    pub rtt: Option<LatencyStats>,
    /// Isochronous senders: frames sent and schedule slips.
    pub frames: Option<(u64, u64)>,
    pub figures: Iperf2Figures,
}

impl Row {
    pub fn of_stream(s: &StreamInterval) -> Row {
        let ext = s.netmeter.as_deref();
        Row {
            tcp: s.tcp,
            tcp_extra: ext.and_then(|e| e.tcp),
            retransmits: s.tcp.map(|t| t.retransmits),
            ..Row::common(
                (s.start, s.end, s.seconds),
                (s.bytes, s.packets),
                s.udp_recv,
                ext,
            )
        }
    }

    pub fn of_sum(s: &SumInterval) -> Row {
        let ext = s.netmeter.as_deref();
        Row {
            retransmits: s.retransmits,
            ..Row::common(
                (s.start, s.end, s.seconds),
                (s.bytes, s.packets),
                s.udp_recv,
                ext,
            )
        }
    }

    /// What a stream's and a sum's rows share: the span, the counts, the UDP receive
    /// figures and netmeter's extension (no TCP figures).
    fn common(
        (start, end, seconds): (f64, f64, f64),
        (bytes, packets): (u64, Option<u64>),
        udp_recv: Option<UdpRecvFigures>,
        ext: Option<&StreamExt>,
    ) -> Row {
        Row {
            start,
            end,
            seconds,
            bytes,
            packets,
            tcp: None,
            tcp_extra: None,
            udp_recv,
            owd: ext.and_then(|e| e.owd),
            retransmits: None,
            out_of_order: ext.and_then(|e| e.udp).map(|u| u.out_of_order),
            transactions: ext.and_then(|e| e.transactions),
            rtt: ext.and_then(|e| e.rtt),
            frames: ext.and_then(|e| e.frames).map(|f| (f.sent, f.slips)),
            figures: ext.map(|e| e.iperf2).unwrap_or_default(),
        }
    }
}

/// `YYYYMMDDHHMMSS` in UTC of `secs` since the epoch (iperf 2's CSV time column, which
/// iperf 2 writes in local time).
pub fn csv_time(secs: u64) -> String {
    let days = secs / 86400;
    let rem = secs % 86400;
    // Howard Hinnant's civil-from-days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
