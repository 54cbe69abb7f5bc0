//! The human report, in the layout a daily iperf3 user reads without thinking.
//!
//! Column layout follows iperf3's format strings (`src/iperf_locale.c`): `[ ID]`,
//! `Interval`, `Transfer`, `Bitrate`, then `Retr  Cwnd` for TCP senders or
//! `Jitter    Lost/Total Datagrams` for UDP receivers. Every function returns the lines
//! to print; nothing here writes to a terminal.

pub mod connect;
mod ecn;
mod end;
mod figures;
pub mod profile;

pub use end::{
    bounceback_summary, cpu, end, end_summary, histogram, spurious_retransmits, trip_times_summary,
    working_load_summary,
};

use super::{Connected, Interval, StreamInterval, SumInterval};
use crate::spec::Protocol;
use crate::units::{Format, format_bytes, format_rate};
use std::fmt::Write;

/// What the text renderer needs to know besides the numbers.
#[derive(Debug, Clone)]
pub struct TextCtx {
    pub format: Format,
    pub protocol: Protocol,
    pub bidir: bool,
    /// Rendering for the client (true) or the server.
    pub client: bool,
    pub verbose: bool,
    /// `-T` prefix for every line.
    pub title: Option<String>,
    /// A bounceback (request/response) test.
    pub bounceback: bool,
    /// A connect-only (connection rate) test: rows of `super::connect` instead.
    pub connect_only: bool,
    /// `--histograms[=BIN_MS]`: print latency histograms with this bin width.
    pub histogram_bin_ms: Option<f64>,
}

/// iperf3's separator before the end summary.
pub const SEPARATOR: &str = "- - - - - - - - - - - - - - - - - - - - - - - - -";

impl TextCtx {
    /// Prefix every line of `s` with the title, if any.
    pub fn titled(&self, s: String) -> String {
        match &self.title {
            None => s,
            Some(t) => s.lines().fold(String::new(), |mut out, l| {
                let _ = writeln!(out, "{t}:  {l}");
                out
            }),
        }
    }

    fn tag(&self, sender: bool) -> &'static str {
        if !self.bidir {
            return "";
        }
        match (sender, self.client) {
            (true, true) => "[TX-C]",
            (false, true) => "[RX-C]",
            (true, false) => "[TX-S]",
            (false, false) => "[RX-S]",
        }
    }

    fn id(&self, socket: i64, sender: bool) -> String {
        format!("[{socket:>3}]{}", self.tag(sender))
    }

    fn sum_id(&self, sender: bool) -> String {
        format!("[SUM]{}", self.tag(sender))
    }
}

fn span(start: f64, end: f64) -> String {
    format!("{start:6.2}-{end:<6.2} sec")
}

fn omitted(o: bool) -> &'static str {
    if o { "  (omitted)" } else { "" }
}

/// `-V` before the client connects, as iperf3 prints it: the version, the system
/// (`uname`) and the time.
pub fn verbose_preamble(version: &str, system_info: &str, time: &str) -> String {
    format!("{version}\n{system_info}\nTime: {time}\n")
}

/// `-V` once the client has sent its cookie, as iperf3's `iperf_on_connect`: the
/// cookie, for TCP the MSS (iperf3 marks the kernel's own "(default)"), and the target
/// bitrate when there is one.
pub fn verbose_connected(start: &super::Start, tcp: bool) -> String {
    let mut s = format!("      Cookie: {}\n", start.cookie);
    if tcp {
        match (start.tcp_mss, start.tcp_mss_default) {
            (Some(m), _) => {
                let _ = writeln!(s, "      TCP MSS: {m}");
            }
            (None, Some(m)) => {
                let _ = writeln!(s, "      TCP MSS: {m} (default)");
            }
            (None, None) => {}
        }
    }
    if start.target_bitrate > 0 {
        let _ = writeln!(s, "      Target Bitrate: {}", start.target_bitrate);
    }
    s
}

/// `Connecting to host H, port P`.
pub fn connecting(host: &str, port: u16) -> String {
    format!("Connecting to host {host}, port {port}\n")
}

/// The server's banner before each test it waits for.
pub fn listening(port: u16, test: u64) -> String {
    let dash = "-".repeat(59);
    format!("{dash}\nServer listening on {port} (test #{test})\n{dash}\n")
}

/// A server's log line in text mode.
pub fn server_log(msg: &str) -> String {
    format!("netmeter: {msg}\n")
}

/// The server's line for a client's control connection.
pub fn accepted(host: &str, port: u16) -> String {
    format!("Accepted connection from {host}, port {port}\n")
}

/// `[  5] local A port N connected to B port M`.
pub fn connected(c: &Connected) -> String {
    format!(
        "[{:>3}] local {} port {} connected to {} port {}\n",
        c.socket, c.local_host, c.local_port, c.remote_host, c.remote_port
    )
}

/// The column header printed before the first interval of a direction.
pub fn interval_header(ctx: &TextCtx, sender: bool) -> String {
    if ctx.connect_only {
        return connect::header(ctx);
    }
    let id = if ctx.bidir { "[ ID][Role]" } else { "[ ID]" };
    let cols = match (ctx.protocol, sender) {
        _ if ctx.bounceback && sender == ctx.client => {
            "Interval           Transfer     Bitrate           Trans/s  RTT min/avg/p99/max"
        }
        (Protocol::Tcp, true) => "Interval           Transfer     Bitrate         Retr  Cwnd",
        (Protocol::Tcp, false) => "Interval           Transfer     Bitrate",
        (Protocol::Udp, true) => "Interval           Transfer     Bitrate         Total Datagrams",
        (Protocol::Udp, false) => {
            "Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams"
        }
    };
    format!("{id} {cols}\n")
}

// As in iperf3, `-f` sets the Bitrate unit only; Transfer is always adaptive
// (`unit_snprintf(..., 'A')` in `src/iperf_api.c`).
fn row_line(ctx: &TextCtx, id: String, r: &StreamInterval) -> String {
    let head = format!(
        "{id} {}  {}  {}",
        span(r.start, r.end),
        format_bytes(r.bytes as f64, Format::Auto),
        format_rate(r.bits_per_second, ctx.format)
    );
    let tail = if let Some(x) = r
        .netmeter
        .as_deref()
        .copied()
        .filter(|n| n.transactions.is_some())
    {
        bounce_tail(&x, r.seconds)
    } else if let Some(t) = &r.tcp {
        format!(
            "  {:>3}   {}",
            t.retransmits,
            format_bytes(t.snd_cwnd as f64, Format::Auto)
        )
    } else if let Some(u) = &r.udp_recv {
        format!(
            "  {:5.3} ms  {}/{} ({}%)",
            u.jitter_ms,
            u.lost_packets,
            u.packets,
            pct(u.lost_percent)
        )
    } else if let Some(p) = r.packets {
        udp_sent_packets(ctx, p)
    } else {
        String::new()
    };
    let owd = match r.netmeter.as_ref().and_then(|n| n.owd) {
        Some(o) => format!("  OWD {:.3}/{:.3}/{:.3} ms", o.min_ms, o.mean_ms, o.max_ms),
        None => String::new(),
    };
    let profile = profile::row_suffix(r.netmeter.as_deref().copied());
    let ecn = ecn::row_suffix(ctx, r);
    format!("{head}{tail}{owd}{profile}{ecn}{}\n", omitted(r.omitted))
}

fn sum_line(ctx: &TextCtx, s: &SumInterval, mixed: bool) -> String {
    let head = format!(
        "{} {}  {}  {}",
        ctx.sum_id(s.sender),
        span(s.start, s.end),
        format_bytes(s.bytes as f64, Format::Auto),
        format_rate(s.bits_per_second, ctx.format)
    );
    // `--working-load` mixes bulk rows with the probe's: its [SUM] is bulk figures.
    let tail = if let Some(x) = s
        .netmeter
        .as_deref()
        .copied()
        .filter(|n| n.transactions.is_some() && !mixed)
    {
        bounce_tail(&x, s.seconds)
    } else if let Some(u) = &s.udp_recv {
        format!(
            "  {:5.3} ms  {}/{} ({}%)",
            u.jitter_ms,
            u.lost_packets,
            u.packets,
            pct(u.lost_percent)
        )
    } else if let Some(r) = s.retransmits {
        format!("  {r:>3}")
    } else if let Some(p) = s.packets {
        udp_sent_packets(ctx, p)
    } else {
        String::new()
    };
    let profile = profile::row_suffix(s.netmeter.as_deref().copied());
    let ecn = ecn::sum_suffix(ctx, s);
    format!("{head}{tail}{profile}{ecn}{}\n", omitted(s.omitted))
}

/// A UDP sender's datagram count. Under `--bidir`'s single header (iperf3's
/// `report_bw_udp_sender_format_bidir`) it sits under "Lost/Total Datagrams".
fn udp_sent_packets(ctx: &TextCtx, packets: u64) -> String {
    if ctx.bidir {
        format!("            {packets}")
    } else {
        format!("  {packets}")
    }
}

/// Transactions per second and RTT figures of a bounceback interval.
fn bounce_tail(x: &super::StreamExt, seconds: f64) -> String {
    let n = x.transactions.unwrap_or(0);
    let rate = if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    };
    match &x.rtt {
        Some(r) => format!(
            "  {rate:>9.0} trans/s  {:.3}/{:.3}/{:.3}/{:.3} ms",
            r.min_ms, r.mean_ms, r.p99_ms, r.max_ms
        ),
        None => format!("  {rate:>9.0} trans/s"),
    }
}

/// Loss percentages the way iperf3's `%.2g` shows them ("0", "2", "0.15", "1e+02").
fn pct(p: f64) -> String {
    if p == 0.0 {
        return "0".into();
    }
    if p >= 100.0 {
        return "100".into();
    }
    let digits = if p >= 10.0 {
        0
    } else if p >= 1.0 {
        1
    } else {
        (1 - p.log10().floor() as i32).max(0) as usize
    };
    let s = format!("{p:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The column header printed above a test's first interval. One header, as iperf3: with
/// --bidir the one whose columns cover both directions' rows (TCP: the sender's
/// Retr/Cwnd; UDP: Jitter and Lost/Total, under which a sender's count sits).
pub fn first_interval_header(ctx: &TextCtx, iv: &Interval) -> String {
    let sender = if ctx.bidir {
        ctx.protocol == Protocol::Tcp
    } else {
        iv.streams.first().map(|r| r.sender).unwrap_or(true)
    };
    // `--working-load`: bulk rows first, the probe's last; the header is the
    // bulk streams' (the probe row carries its own trans/s and RTT).
    let mut ctx = ctx.clone();
    ctx.bounceback &= iv
        .streams
        .first()
        .is_none_or(|r| r.netmeter.as_ref().and_then(|n| n.transactions).is_some());
    let h = interval_header(&ctx, sender);
    let ecn = ecn::header_suffix(&ctx, &iv.streams);
    // `--trip-times` receivers end each row with the interval's one-way delays.
    if iv
        .streams
        .iter()
        .any(|r| r.netmeter.as_ref().is_some_and(|n| n.owd.is_some()))
    {
        return format!("{}  OWD min/mean/max{ecn}\n", h.trim_end());
    }
    if !ecn.is_empty() {
        return format!("{}{ecn}\n", h.trim_end());
    }
    h
}

/// One interval: its stream rows, then `[SUM]` rows when several streams share a direction.
pub fn interval(ctx: &TextCtx, iv: &Interval) -> String {
    if ctx.connect_only {
        return ctx.titled(connect::interval_text(ctx, iv));
    }
    let mut out = String::new();
    let per_dir = if ctx.bidir {
        iv.streams.len() / 2
    } else {
        iv.streams.len()
    };
    if ctx.bidir {
        // As iperf3: one direction's streams and their [SUM], then the other's. The
        // client-to-server direction is this side's sending one on the client.
        for (local_sender, sum) in [
            (ctx.client, Some(&iv.sum)),
            (!ctx.client, iv.sum_bidir_reverse.as_deref()),
        ] {
            for r in iv.streams.iter().filter(|r| r.sender == local_sender) {
                out.push_str(&row_line(ctx, ctx.id(r.socket, r.sender), r));
            }
            if let Some(s) = sum.filter(|_| per_dir > 1) {
                out.push_str(&sum_line(ctx, s, false));
            }
        }
    } else {
        for r in &iv.streams {
            out.push_str(&row_line(ctx, ctx.id(r.socket, r.sender), r));
        }
        if per_dir > 1 {
            let mixed = ctx.bounceback
                && iv
                    .streams
                    .iter()
                    .any(|r| r.netmeter.as_ref().and_then(|n| n.transactions).is_none());
            out.push_str(&sum_line(ctx, &iv.sum, mixed));
        }
    }
    if ctx.verbose {
        out.push_str(&figures::interval_lines(ctx, iv));
    }
    if let Some(bin) = ctx.histogram_bin_ms {
        // The delays this side received: on a server the client's, on a client the
        // server's.
        let dir = if ctx.client {
            "server->client"
        } else {
            "client->server"
        };
        let title = format!(
            "One-way delay {dir} {:.2}-{:.2} sec",
            iv.sum.start, iv.sum.end
        );
        out.push_str(&end::histogram(&title, &iv.owd_histogram_us, bin));
        let title = format!(
            "Frame latency {dir} {:.2}-{:.2} sec",
            iv.sum.start, iv.sum.end
        );
        out.push_str(&end::histogram(&title, &iv.frame_latency_histogram_us, bin));
    }
    ctx.titled(out)
}

/// What goes between two intervals' rows: iperf3's separator when several streams
/// share a direction (`iperf_print_intermediate`: before every interval but the first;
/// the end summary brings its own), else nothing.
pub fn between_intervals(ctx: &TextCtx, iv: &Interval) -> String {
    let per_dir = if ctx.bidir {
        iv.streams.len() / 2
    } else {
        iv.streams.len()
    };
    if per_dir > 1 {
        ctx.titled(format!("{SEPARATOR}\n"))
    } else {
        String::new()
    }
}

/// Whether a UDP offload is in use on this side, and if not, why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offload {
    On,
    /// Switched off with `--no-gso` / `--no-gro`.
    Refused,
    /// Request/response and profiled datagrams are sent and read one by one.
    OneByOne,
    /// The kernel refused it for this socket, or a datagram this large fills a message.
    Unavailable,
}

/// What one side's UDP streams do per system call, for `-V`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpOffloadNote {
    /// Bytes per datagram (`-l`).
    pub datagram_len: usize,
    /// Messages per `sendmmsg` / `recvmmsg`.
    pub batch: usize,
    /// This side sends: GSO and datagrams per message.
    pub gso: Option<(Offload, usize)>,
    /// This side receives: GRO.
    pub gro: Option<Offload>,
}

/// `-V`: the data path (`start.netmeter.data_path`) and, for UDP, what segmentation and
/// receive offload did, so a rate far above iperf3's (which sends one datagram per
/// system call) explains itself.
pub fn data_path(path: &str, udp: Option<&UdpOffloadNote>) -> String {
    let mut s = format!("Data path: {path}\n");
    let Some(u) = udp else {
        return s;
    };
    let why = |o: Offload, flag: &str| match o {
        Offload::On => String::new(),
        Offload::Refused => flag.to_string(),
        Offload::OneByOne => "request/response and profiled datagrams go one by one".into(),
        Offload::Unavailable => "not available for this socket and datagram size".into(),
    };
    let (len, batch) = (u.datagram_len, u.batch);
    if let Some((g, per)) = u.gso {
        let _ = match g {
            Offload::On => writeln!(
                s,
                "  send: GSO on, {len}-byte datagrams, up to {per} per message, {batch} messages per sendmmsg"
            ),
            _ => writeln!(
                s,
                "  send: GSO off ({}), one {len}-byte datagram per message, {batch} messages per sendmmsg",
                why(g, "--no-gso")
            ),
        };
    }
    if let Some(g) = u.gro {
        let _ = match g {
            Offload::On => writeln!(
                s,
                "  receive: GRO on, up to 64 KiB of datagrams per message, {batch} messages per recvmmsg"
            ),
            _ => writeln!(
                s,
                "  receive: GRO off ({}), one datagram per message, {batch} messages per recvmmsg",
                why(g, "--no-gro")
            ),
        };
    }
    s
}

/// A whole saved report as the client printed it: interval rows, separator, end
/// summary (`netmeter -c B --via A` prints the report A sent back this way).
pub fn whole(r: &super::Report) -> String {
    let ts = &r.start.test_start;
    let ctx = TextCtx {
        format: Format::Auto,
        protocol: if ts.protocol.eq_ignore_ascii_case("udp") {
            Protocol::Udp
        } else {
            Protocol::Tcp
        },
        bidir: ts.bidir != 0,
        client: true,
        verbose: false,
        title: r.title.clone(),
        bounceback: r.end.netmeter.bounceback.is_some(),
        connect_only: r.end.netmeter.connect_only.is_some(),
        histogram_bin_ms: None,
    };
    let mut t = String::new();
    if let Some(first) = r.intervals.first() {
        t.push_str(&first_interval_header(&ctx, first));
    }
    for (n, iv) in r.intervals.iter().enumerate() {
        if n > 0 {
            t.push_str(&between_intervals(&ctx, iv));
        }
        t.push_str(&interval(&ctx, iv));
    }
    t.push_str(&end_summary(&ctx, &r.end));
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{End, EndSum};

    #[test]
    fn data_path_says_what_offload_did() {
        assert_eq!(
            data_path("tcp write/read", None),
            "Data path: tcp write/read\n"
        );
        let on = UdpOffloadNote {
            datagram_len: 1448,
            batch: 32,
            gso: Some((Offload::On, 44)),
            gro: None,
        };
        assert_eq!(
            data_path("udp sendmmsg+GSO/recvmmsg", Some(&on)),
            "Data path: udp sendmmsg+GSO/recvmmsg\n  send: GSO on, 1448-byte datagrams, up to 44 per message, 32 messages per sendmmsg\n"
        );
        let off = UdpOffloadNote {
            datagram_len: 1448,
            batch: 32,
            gso: Some((Offload::Refused, 1)),
            gro: Some(Offload::Refused),
        };
        assert_eq!(
            data_path("udp sendmmsg/recvmmsg", Some(&off)),
            "Data path: udp sendmmsg/recvmmsg\n  send: GSO off (--no-gso), one 1448-byte datagram per message, 32 messages per sendmmsg\n  receive: GRO off (--no-gro), one datagram per message, 32 messages per recvmmsg\n"
        );
        let gro = UdpOffloadNote {
            gso: None,
            gro: Some(Offload::On),
            ..off
        };
        assert!(
            data_path("udp sendmmsg/recvmmsg+GRO", Some(&gro))
                .ends_with("  receive: GRO on, up to 64 KiB of datagrams per message, 32 messages per recvmmsg\n")
        );
    }
    use crate::report::{EndStream, EndUdp, TcpFigures, UdpRecvFigures};

    pub(super) fn ctx(protocol: Protocol) -> TextCtx {
        TextCtx {
            bounceback: false,
            connect_only: false,
            histogram_bin_ms: None,
            format: Format::Auto,
            protocol,
            bidir: false,
            client: true,
            verbose: false,
            title: None,
        }
    }

    /// `-V` lacked iperf3's version, system, time, cookie, TCP MSS and target bitrate.
    #[test]
    fn verbose_start_lines_are_iperf3s() {
        assert_eq!(
            verbose_preamble(
                "netmeter 0.1.0",
                "Linux vm 6.18 x86_64",
                "Thu, 26 Nov 2026 15:42:46 GMT"
            ),
            "netmeter 0.1.0\nLinux vm 6.18 x86_64\nTime: Thu, 26 Nov 2026 15:42:46 GMT\n"
        );
        let mut start = crate::report::Start {
            cookie: "6aacfi3lqtkuk5cthdklztmi4ah4to5t66yf".into(),
            tcp_mss_default: Some(32768),
            ..Default::default()
        };
        assert_eq!(
            verbose_connected(&start, true),
            "      Cookie: 6aacfi3lqtkuk5cthdklztmi4ah4to5t66yf\n      TCP MSS: 32768 (default)\n"
        );
        start.tcp_mss = Some(1400);
        start.target_bitrate = 10_000_000;
        assert_eq!(
            verbose_connected(&start, true),
            "      Cookie: 6aacfi3lqtkuk5cthdklztmi4ah4to5t66yf\n      TCP MSS: 1400\n      Target Bitrate: 10000000\n"
        );
        assert!(!verbose_connected(&start, false).contains("MSS"));
    }

    /// The server's `--trip-times` rows end in "OWD a/b/c ms" under no header.
    #[test]
    fn one_way_delay_column_has_a_header() {
        let c = TextCtx {
            client: false,
            ..ctx(Protocol::Udp)
        };
        let owd = crate::latency::LatencyStats {
            count: 10,
            min_ms: 0.002,
            mean_ms: 0.010,
            max_ms: 1.175,
            ..Default::default()
        };
        let iv = Interval {
            streams: vec![StreamInterval {
                socket: 7,
                end: 1.0,
                seconds: 1.0,
                udp_recv: Some(UdpRecvFigures::default()),
                netmeter: Some(Box::new(crate::report::StreamExt {
                    owd: Some(owd),
                    ..Default::default()
                })),
                ..StreamInterval::default()
            }],
            ..Interval::default()
        };
        assert_eq!(
            first_interval_header(&c, &iv),
            "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams  OWD min/mean/max\n"
        );
        assert!(interval(&c, &iv).contains("  OWD 0.002/0.010/1.175 ms"));
        let plain = Interval {
            streams: vec![StreamInterval {
                netmeter: None,
                ..iv.streams[0].clone()
            }],
            ..Interval::default()
        };
        assert!(!first_interval_header(&c, &plain).contains("OWD"));
    }

    #[test]
    fn tcp_interval_line_snapshot() {
        let iv = Interval {
            streams: vec![StreamInterval {
                socket: 5,
                start: 0.0,
                end: 1.0,
                seconds: 1.0,
                bytes: 3_758_096_384,
                bits_per_second: 30.06e9,
                tcp: Some(TcpFigures {
                    retransmits: 0,
                    snd_cwnd: 1_698_693,
                    ..TcpFigures::default()
                }),
                sender: true,
                ..StreamInterval::default()
            }],
            ..Interval::default()
        };
        assert_eq!(
            interval(&ctx(Protocol::Tcp), &iv),
            "[  5]   0.00-1.00   sec  3.50 GBytes  30.1 Gbits/sec    0   1.62 MBytes\n"
        );
    }

    #[test]
    fn udp_receiver_line_snapshot() {
        let iv = Interval {
            streams: vec![StreamInterval {
                socket: 5,
                start: 1.0,
                end: 2.0,
                seconds: 1.0,
                bytes: 1_310_720,
                bits_per_second: 10_485_760.0,
                udp_recv: Some(UdpRecvFigures {
                    jitter_ms: 0.0123,
                    lost_packets: 18,
                    packets: 898,
                    lost_percent: 2.0044,
                }),
                ..StreamInterval::default()
            }],
            ..Interval::default()
        };
        assert_eq!(
            interval(&ctx(Protocol::Udp), &iv),
            "[  5]   1.00-2.00   sec  1.25 MBytes  10.5 Mbits/sec  0.012 ms  18/898 (2%)\n"
        );
    }

    /// `--bidir -u -P 1` on the client: iperf3 3.18's layout, one direction at a time,
    /// each with its [SUM] sender and receiver lines.
    #[test]
    fn udp_bidir_snapshot() {
        let c = TextCtx {
            bidir: true,
            ..ctx(Protocol::Udp)
        };
        let row = |socket, sender: bool| StreamInterval {
            socket,
            start: 0.0,
            end: 1.0,
            seconds: 1.0,
            bytes: 1_250_000,
            bits_per_second: 10e6,
            packets: sender.then_some(856),
            udp_recv: (!sender).then_some(UdpRecvFigures {
                jitter_ms: 0.018,
                lost_packets: 0,
                packets: 856,
                lost_percent: 0.0,
            }),
            sender,
            ..StreamInterval::default()
        };
        let iv = Interval {
            // Received rows may come first: the renderer orders by direction.
            streams: vec![row(6, false), row(4, true)],
            ..Interval::default()
        };
        assert_eq!(
            interval(&c, &iv),
            "\
[  4][TX-C]   0.00-1.00   sec  1.19 MBytes  10.0 Mbits/sec            856
[  6][RX-C]   0.00-1.00   sec  1.19 MBytes  10.0 Mbits/sec  0.018 ms  0/856 (0%)
"
        );
        // -P 1: iperf3 separates intervals only when several streams share a direction.
        assert_eq!(between_intervals(&c, &iv), "");
        let udp = |socket, sender| EndUdp {
            socket,
            end: 1.0,
            seconds: 1.0,
            bytes: 1_250_000,
            bits_per_second: 10e6,
            jitter_ms: 0.018,
            packets: 856,
            sender,
            ..EndUdp::default()
        };
        let sum = |sender: bool, jitter_ms| {
            Some(EndSum {
                end: 1.0,
                seconds: 1.0,
                bytes: 1_250_000,
                bits_per_second: 10e6,
                udp_recv: Some(UdpRecvFigures {
                    jitter_ms,
                    lost_packets: 0,
                    packets: 856,
                    lost_percent: 0.0,
                }),
                sender,
                ..EndSum::default()
            })
        };
        let e = End {
            streams: vec![
                EndStream {
                    udp: Some(udp(4, true)),
                    ..EndStream::default()
                },
                EndStream {
                    udp: Some(udp(6, false)),
                    ..EndStream::default()
                },
            ],
            sum_sent: sum(true, 0.0),
            sum_received: sum(false, 0.018),
            sum_sent_bidir_reverse: sum(true, 0.0),
            sum_received_bidir_reverse: sum(false, 0.018),
            ..End::default()
        };
        let want = "\
- - - - - - - - - - - - - - - - - - - - - - - - -
[ ID][Role] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams
[  4][TX-C]   0.00-1.00   sec  1.19 MBytes  10.0 Mbits/sec  0.000 ms  0/856 (0%)  sender
[  4][TX-C]   0.00-1.00   sec  1.19 MBytes  10.0 Mbits/sec  0.018 ms  0/856 (0%)  receiver
[SUM][TX-C]   0.00-1.00   sec  1.19 MBytes  10.0 Mbits/sec  0.000 ms  0/856 (0%)  sender
[SUM][TX-C]   0.00-1.00   sec  1.19 MBytes  10.0 Mbits/sec  0.018 ms  0/856 (0%)  receiver
[  6][RX-C]   0.00-1.00   sec  1.19 MBytes  10.0 Mbits/sec  0.000 ms  0/856 (0%)  sender
[  6][RX-C]   0.00-1.00   sec  1.19 MBytes  10.0 Mbits/sec  0.018 ms  0/856 (0%)  receiver
[SUM][RX-C]   0.00-1.00   sec  1.19 MBytes  10.0 Mbits/sec  0.000 ms  0/856 (0%)  sender
[SUM][RX-C]   0.00-1.00   sec  1.19 MBytes  10.0 Mbits/sec  0.018 ms  0/856 (0%)  receiver
";
        assert_eq!(end(&c, &e, false, &[true, false]), want);
    }

    /// With -P 2 each interval ended with a separator and the end summary began with
    /// its own: two separator lines in a row. As iperf3, one between intervals, one
    /// before the summary.
    #[test]
    fn several_streams_never_print_two_separators_in_a_row() {
        let r = crate::report::input::parse_result(include_str!("testdata/tcp.json")).unwrap();
        assert_eq!(r.start.test_start.num_streams, 2);
        let t = whole(&r);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines
                .windows(2)
                .all(|w| !(w[0] == SEPARATOR && w[1] == SEPARATOR)),
            "{t}"
        );
        let seps = lines.iter().filter(|l| **l == SEPARATOR).count();
        assert_eq!(seps, r.intervals.len(), "{t}");
        assert!(
            lines
                .iter()
                .all(|l| !l.starts_with("- ") || *l == SEPARATOR)
        );
    }

    #[test]
    fn percent_like_printf_g() {
        assert_eq!(pct(0.0), "0");
        assert_eq!(pct(2.0), "2");
        assert_eq!(pct(2.0044), "2");
        assert_eq!(pct(0.15), "0.15");
        assert_eq!(pct(12.6), "13");
        assert_eq!(pct(100.0), "100");
    }

    #[test]
    fn title_prefixes_every_line() {
        let mut c = ctx(Protocol::Tcp);
        c.title = Some("lab".into());
        assert_eq!(c.titled("a\nb\n".into()), "lab:  a\nlab:  b\n");
    }
}
