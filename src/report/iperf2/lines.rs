//! iperf 2.2.1's text lines, one function per kind of line: the settings header, the
//! connection line, the column headers, a stream's or a sum's row (`Locale.c`'s
//! `report_bw_*` formats as `ReportOutputs.c` fills them), and the UDP client's
//! "Server Report".

use super::{Iperf2Ctx, Layout, Row, byte_fmt, g2, latency4, net_power, or_na, span, transfer};
use crate::report::{Connected, Start};

/// iperf 2's separator around the settings header.
pub const SEPARATOR: &str = "------------------------------------------------------------";

/// The settings header, separators included (iperf 2's `reporter_print_settings`).
pub fn header(ctx: &Iperf2Ctx, start: &Start) -> Vec<String> {
    let proto = if ctx.udp { "UDP" } else { "TCP" };
    let enhanced = ctx.layout == Layout::Enhanced;
    let mut out = vec![SEPARATOR.to_string()];
    match (ctx.client, enhanced) {
        (true, true) => out.push(format!(
            "Client connecting to {}, {proto} port {} with pid {} ({}/0 flows/load)",
            ctx.host,
            ctx.port,
            ctx.pid,
            ctx.parallel.max(1)
        )),
        (true, false) => out.push(format!(
            "Client connecting to {}, {proto} port {}",
            ctx.host, ctx.port
        )),
        (false, true) => out.push(format!(
            "Server listening on {proto} port {} with pid {}",
            ctx.port, ctx.pid
        )),
        (false, false) => out.push(format!("Server listening on {proto} port {}", ctx.port)),
    }
    let blk = start.test_start.blksize;
    if let (Some(b), true, true) = (ctx.bounceback, enhanced, ctx.client) {
        out.push(format!(
            "Bounceback test (req/reply size ={}/{}) (server hold req={} usecs & tcp_quickack)",
            byte_fmt(f64::from(b.request_len), 'A'),
            byte_fmt(f64::from(b.reply_len), 'A'),
            b.hold_us
        ));
        // iperf 2.2.1 prints it when bursts are paced (`client_bbburstperiodcount`).
        if b.period_us > 0 {
            out.push(format!(
                "Bursting request {} times every {:.2} second(s)",
                b.burst,
                f64::from(b.period_us) / 1e6
            ));
        }
    }
    let isoch = isochronous_line(ctx).filter(|_| enhanced);
    // UDP: first; TCP: after the write size, as iperf 2 orders them.
    if ctx.udp {
        out.extend(isoch.clone());
    }
    if enhanced {
        if ctx.client && !ctx.udp && ctx.bounceback.is_none() {
            out.extend(write_size_lines(ctx, blk));
            out.extend(isoch);
        } else if !ctx.client && ctx.udp {
            out.push(format!("Read buffer size: {} ", byte_fmt(blk as f64, 'B')));
        } else if !ctx.client {
            out.push(format!(
                "Read buffer size: {} (Dist bin width={})",
                byte_fmt(blk as f64, 'A'),
                byte_fmt(blk as f64 / 8.0, 'A')
            ));
        }
        // iperf 2.2.1 reads the socket's at the start with -e (`TCP_CONGESTION`).
        if let (true, false, Some(cc)) = (ctx.client, ctx.udp, &start.netmeter.tcp_congestion) {
            out.push(format!("TCP congestion control using {cc}"));
        }
        if ctx.client {
            let tos = start.test_start.tos;
            let nagle = if ctx.nodelay {
                "and nodelay (Nagle off)"
            } else {
                "(Nagle on)"
            };
            let verb = if tos == 0 { "defaults to" } else { "set to" };
            out.push(format!(
                "TOS {verb} 0x{tos:x} (dscp={},ecn={}) {nagle}",
                tos >> 2,
                tos & 3
            ));
        }
    }
    // Also without -e.
    if ctx.client && ctx.udp && ctx.isochronous.is_none() {
        out.push(format!(
            "Sending {} byte datagrams, IPG target: {:.2} us (kalman adjust)",
            blk,
            ipg_us(blk, start.target_bitrate)
        ));
    }
    let buf = if ctx.client {
        start.sndbuf_actual
    } else {
        start.rcvbuf_actual
    };
    let what = if ctx.udp {
        "UDP buffer size"
    } else {
        "TCP window size"
    };
    if buf > 0 {
        out.push(format!("{what}: {} (default)", byte_fmt(buf as f64, 'A')));
    }
    out.push(SEPARATOR.to_string());
    out
}

/// A TCP client's write size, and with periodic bursts their size and period
/// (`Write buffer size: 10240 Byte  Burst size: 40960 Byte`, `Bursting: 40.0 KByte
/// every 0.100 second(s)`).
fn write_size_lines(ctx: &Iperf2Ctx, blk: u64) -> Vec<String> {
    match ctx.burst {
        None => vec![format!("Write buffer size: {blk} Byte")],
        Some((bytes, period_s)) => vec![
            format!("Write buffer size: {blk} Byte  Burst size: {bytes} Byte"),
            format!(
                "Bursting: {} every {period_s:.3} second(s)",
                byte_fmt(bytes as f64, 'A')
            ),
        ],
    }
}

/// An isochronous client's settings line (`Isochronous: 60.00 frames/sec …`).
fn isochronous_line(ctx: &Iperf2Ctx) -> Option<String> {
    let i = ctx.isochronous.filter(|_| ctx.client)?;
    Some(format!(
        "Isochronous: {:.2} frames/sec mean={}/s, stddev={}/s, Period/IPG={:.2}/0.000 ms",
        f64::from(i.fps),
        byte_fmt(i.mean_bps as f64 / 8.0, 'a'),
        byte_fmt(i.stdev_bps as f64 / 8.0, 'a'),
        1e3 / f64::from(i.fps.max(1))
    ))
}

/// The UDP client's gap between datagrams for its rate, microseconds (0 unpaced).
fn ipg_us(len: u64, bits_per_second: u64) -> f64 {
    if bits_per_second == 0 {
        return 0.0;
    }
    len as f64 * 8.0 / bits_per_second as f64 * 1e6
}

/// `[  1] local A port P connected with B port Q`, with `-e` the test's features and
/// the time it connected. (iperf 2 adds TCP's icwnd/mss/irtt and the connect time,
/// which the report does not hold: left out rather than invented.)
pub fn connection(ctx: &Iperf2Ctx, no: usize, c: &Connected, start: &Start) -> String {
    let mut s = format!(
        "{}local {} port {} connected with {} port {}",
        super::id(no),
        c.local_host,
        c.local_port,
        c.remote_host,
        c.remote_port
    );
    // A `-R` client says so in every layout, before the enhanced layout's features.
    if ctx.client && start.test_start.reverse != 0 {
        s.push_str(" (reverse)");
    }
    if ctx.layout == Layout::Enhanced {
        // iperf 2.2.1's order: `(isoch) (trip-times)`.
        if ctx.isochronous.is_some() {
            s.push_str(" (isoch)");
        }
        if ctx.trip_times {
            s.push_str(" (trip-times)");
        }
        if let Some(b) = ctx.bounceback {
            s.push_str(&format!(
                " (bb w/quickack req/reply/hold={}/{}/{})",
                b.request_len, b.reply_len, b.hold_us
            ));
        }
        let t = &start.timestamp;
        if let Some(ts) = utc_ms(t.timesecs, t.timemillisecs % 1000) {
            s.push_str(&format!(" on {ts} (UTC)"));
        }
    }
    s
}

/// `2026-11-26 19:10:14.051` from seconds since the epoch and milliseconds.
fn utc_ms(secs: u64, ms: u64) -> Option<String> {
    if secs == 0 {
        return None;
    }
    let t = super::csv_time(secs);
    Some(format!(
        "{}-{}-{} {}:{}:{}.{ms:03}",
        &t[0..4],
        &t[4..6],
        &t[6..8],
        &t[8..10],
        &t[10..12],
        &t[12..14]
    ))
}

/// Which of iperf 2's row kinds this side prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Plain,
    PlainUdpRecv,
    TcpWrite,
    TcpRead,
    TcpReadTrip,
    UdpWrite,
    UdpRead,
    UdpReadTrip,
    BounceClient,
    UdpWriteIsoch,
    TcpWriteIsoch,
}

/// The row kind of a side: what it does on the stream (`sender`) in which layout.
pub fn kind(ctx: &Iperf2Ctx, sender: bool) -> Kind {
    match (ctx.layout, ctx.udp, sender) {
        (Layout::Enhanced, false, true) if ctx.client && ctx.bounceback.is_some() => {
            Kind::BounceClient
        }
        (Layout::Enhanced, false, true) if ctx.client && ctx.isochronous.is_some() => {
            Kind::TcpWriteIsoch
        }
        (Layout::Enhanced, false, true) => Kind::TcpWrite,
        (Layout::Enhanced, false, false) if ctx.trip_times => Kind::TcpReadTrip,
        (Layout::Enhanced, false, false) => Kind::TcpRead,
        (Layout::Enhanced, true, true) if ctx.client && ctx.isochronous.is_some() => {
            Kind::UdpWriteIsoch
        }
        (Layout::Enhanced, true, true) => Kind::UdpWrite,
        (Layout::Enhanced, true, false) if ctx.trip_times => Kind::UdpReadTrip,
        (Layout::Enhanced, true, false) => Kind::UdpRead,
        (_, true, false) => Kind::PlainUdpRecv,
        _ => Kind::Plain,
    }
}

/// The column header of a row kind.
pub fn column_header(kind: Kind) -> &'static str {
    match kind {
        Kind::Plain => "[ ID] Interval       Transfer     Bandwidth",
        Kind::PlainUdpRecv => {
            "[ ID] Interval       Transfer     Bandwidth        Jitter   Lost/Total Datagrams"
        }
        Kind::TcpWrite => {
            "[ ID] Interval            Transfer    Bandwidth       Write/Err  Rtry     InF(pkts)/Cwnd(pkts)/RTT(var)        NetPwr"
        }
        Kind::TcpRead => "[ ID] Interval            Transfer    Bandwidth       Reads=Dist",
        Kind::TcpReadTrip => {
            "[ ID] Interval            Transfer    Bandwidth    Burst Latency avg/min/max/stdev (cnt/size) inP NetPwr  Reads=Dist"
        }
        Kind::UdpWrite => {
            "[ ID] Interval            Transfer     Bandwidth      Write/Err/Timeo  PPS"
        }
        Kind::UdpRead => {
            "[ ID] Interval            Transfer     Bandwidth        Jitter   Lost/Total  Latency avg/min/max/stdev PPS Read/Timeo/NA NetPwr"
        }
        Kind::UdpReadTrip => UDP_TRIP_HEADER,
        Kind::UdpWriteIsoch => {
            "[ ID] Interval            Transfer     Bandwidth      Write/Err  PPS  isoch:tx/miss/slip"
        }
        Kind::BounceClient => {
            "[ ID] Interval            Transfer    Bandwidth         BB cnt=avg/min/max/stdev         Rtry  Cwnd(pkts)/RTT(var)   Tx/Rx bytes  RPS(avg)"
        }
        Kind::TcpWriteIsoch => {
            "[ ID] Interval            Transfer     Bandwidth      Write/Err  Rtry     Cwnd(pkts)/RTT(var)     isoch:tx/miss/slip  NetPwr"
        }
    }
}

/// The trip-time receiver's header, also the UDP client's "Server Report" header.
const UDP_TRIP_HEADER: &str = "[ ID] Interval            Transfer     Bandwidth        Jitter   Lost/Total  Latency avg/min/max/stdev PPS  Rx/inP  Read/Timeo/Trunc  NetPwr";

/// The `[SUM-cnt]` header of a row kind (`-P` above 1), where iperf 2 has one.
pub fn sum_header(kind: Kind) -> &'static str {
    match kind {
        Kind::TcpWrite | Kind::TcpWriteIsoch => {
            "[SUM-cnt] Interval            Transfer    Bandwidth       Write/Err  Rtry"
        }
        Kind::TcpRead | Kind::TcpReadTrip => {
            "[SUM-cnt] Interval            Transfer    Bandwidth       Reads=Dist"
        }
        Kind::UdpWrite | Kind::UdpWriteIsoch => {
            "[SUM-cnt] Interval            Transfer     Bandwidth      Write/Err  PPS"
        }
        Kind::UdpRead | Kind::UdpReadTrip => {
            "[SUM-cnt] Interval            Transfer     Bandwidth      Lost/Total  PPS"
        }
        Kind::Plain | Kind::PlainUdpRecv | Kind::BounceClient => "",
    }
}

/// What a row needs beyond its figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Facts {
    /// iperf 2's shorter sum format (`[SUM-N]` rows).
    pub sum: bool,
    /// The whole test's row (a bounceback client's has no TCP state).
    pub at_end: bool,
    /// Turns TCP's window bytes into packets.
    pub mss: Option<u32>,
    /// The write size (the trip-time reader's "size").
    pub len: u64,
    pub bounceback: Option<super::Bounceback>,
}

/// One row: `prefix` is `[  1] ` for a stream, `[SUM-2] ` or `[SUM] ` for a sum.
pub fn row(kind: Kind, prefix: &str, r: &Row, facts: &Facts) -> String {
    let Facts { sum, mss, len, .. } = *facts;
    let head = format!(
        "{prefix}{}  {}",
        span(r.start, r.end),
        transfer(r.bytes, r.seconds)
    );
    let f = r.figures;
    let pps = |w: usize| match f.packets_per_second {
        Some(p) => format!("{p:w$.0}"),
        None => format!("{:>w$}", "NA"),
    };
    match kind {
        Kind::Plain => head,
        Kind::PlainUdpRecv => format!("{head}  {}", jitter_loss(r)),
        Kind::TcpWriteIsoch if !sum => tcp_isoch(&head, r, mss),
        Kind::TcpWrite | Kind::TcpWriteIsoch => {
            let we = format!("{}/{}", or_na(f.writes), or_na(f.write_errors));
            let retry = or_na(r.retransmits);
            if sum {
                return format!("{head}  {we}{retry:>10}");
            }
            format!("{head}  {we}{retry:>10} {}", tcp_window(r, mss))
        }
        Kind::TcpRead => format!("{head}  {}", reads(r)),
        Kind::TcpReadTrip if !sum => {
            let (lat, cnt) = match &r.owd {
                Some(l) => (latency4(l), l.count.to_string()),
                None => ("-/-/-/-".to_string(), "NA".to_string()),
            };
            let inp = f
                .in_progress_bytes
                .map_or_else(|| "NA".to_string(), |b| byte_fmt(b, 'A'));
            format!(
                "{head}  {lat} ms ({cnt}/{len}) {inp} {}  {}",
                owd_power(r),
                reads(r)
            )
        }
        Kind::TcpReadTrip => format!("{head}  {}", reads(r)),
        Kind::UdpWrite | Kind::UdpWriteIsoch if sum => format!(
            "{head}  {}/{} {} pps",
            or_na(f.writes),
            or_na(f.write_errors),
            pps(8)
        ),
        Kind::UdpWrite => format!(
            "{head}  {}/{}/NA{} pps",
            or_na(f.writes),
            or_na(f.write_errors),
            pps(8)
        ),
        Kind::UdpRead | Kind::UdpReadTrip if sum => {
            let (lost, total) = r.udp_recv.map_or((0, 0), |u| (u.lost_packets, u.packets));
            format!("{head}  {lost}/{total} {} pps", pps(8))
        }
        Kind::UdpRead => match &r.owd {
            Some(l) => format!(
                "{head}  {} {} ms {} pps {}/NA/NA {}",
                jitter_loss(r),
                latency4(l),
                pps(0),
                or_na(f.reads),
                owd_power(r)
            ),
            None => format!(
                "{head}  {} -/-/-/- ms {} pps {}/NA/NA",
                jitter_loss(r),
                pps(0),
                or_na(f.reads)
            ),
        },
        Kind::UdpReadTrip => udp_trip(&head, r),
        Kind::BounceClient => bounce(&head, r, facts),
        // `miss` (frames whose writes overran the next frame's start) is not counted.
        Kind::UdpWriteIsoch => format!(
            "{head}  {}/{}{} pps  {}",
            or_na(f.writes),
            or_na(f.write_errors),
            pps(8),
            r.frames
                .map_or("NA/NA/NA".into(), |(tx, slip)| format!("{tx:3}/NA/{slip}"))
        ),
    }
}

/// A bounceback client's row: `    10=0.148/0.008/1.325/0.414 ms    0   0K/(0)/0(0) us
/// Tx=1000 Byte Rx=1000 Byte  RPS=6739`; the whole test's row has no TCP state.
fn bounce(head: &str, r: &Row, facts: &Facts) -> String {
    let b = facts.bounceback.unwrap_or_default();
    let (req, reply) = (u64::from(b.request_len), u64::from(b.reply_len));
    let (last, mss) = (facts.at_end, facts.mss);
    let (cnt, lat, rps) = match (&r.rtt, r.transactions) {
        (Some(l), Some(n)) => (
            n.to_string(),
            latency4(l),
            if l.mean_ms > 0.0 {
                format!("{:.0}", 1e3 / l.mean_ms)
            } else {
                "NA".into()
            },
        ),
        _ => ("NA".into(), "-/-/-/-".into(), "NA".into()),
    };
    let bytes = |each: u64| {
        r.transactions.map_or("NA".into(), |n| {
            byte_fmt(n.saturating_mul(each) as f64, 'A')
        })
    };
    let tcp = match (r.tcp, mss.filter(|&m| m > 0).map(u64::from)) {
        _ if last => "   -(-)/-(-)  ".to_string(),
        (Some(t), Some(mss)) => format!(
            "{:>4}K/({})/{}({}) us",
            t.snd_cwnd / 1024,
            t.snd_cwnd / mss,
            t.rtt,
            t.rttvar
        ),
        _ => "  NAK/(NA)/NA(NA) us".to_string(),
    };
    format!(
        "{head}    {cnt}={lat} ms {:>4}{tcp}  Tx={} Rx={}  RPS={rps}",
        or_na(r.retransmits),
        bytes(req),
        bytes(reply)
    )
}

/// An isochronous TCP client's row (iperf 2.2.1's `tcp_output_write_enhanced_isoch`):
/// `61/0        0     1151K(18)/170(243) us         61/0/0       7345`, the frames
/// sent and slipped; `miss` (frames whose writes overran the next frame's start) is
/// `NA`, as for UDP.
fn tcp_isoch(head: &str, r: &Row, mss: Option<u32>) -> String {
    let f = r.figures;
    let tcp = match (r.tcp, mss.filter(|&m| m > 0).map(u64::from)) {
        (Some(t), Some(mss)) => format!(
            "{}K({})/{}({}) us",
            t.snd_cwnd / 1024,
            t.snd_cwnd / mss,
            t.rtt,
            t.rttvar
        ),
        _ => "NAK(NA)/NA(NA) us".to_string(),
    };
    let power = r.tcp.map_or_else(
        || "NAN".to_string(),
        |t| net_power(r.bytes, r.seconds, t.rtt as f64 * 1e-6),
    );
    format!(
        "{head}  {}/{}{:>9}     {tcp}  {:>9}  {power}",
        or_na(f.writes),
        or_na(f.write_errors),
        or_na(r.retransmits),
        r.frames
            .map_or("NA/NA/NA".into(), |(tx, slip)| format!("{tx}/NA/{slip}"))
    )
}

/// `15347/0        35` is before this: `     127K(2)/1534K(24)/196(293) us  10262403`.
fn tcp_window(r: &Row, mss: Option<u32>) -> String {
    let (Some(t), Some(mss)) = (r.tcp, mss.filter(|&m| m > 0).map(u64::from)) else {
        return format!("{:>8}K(NA)/NAK(NA)/NA(NA) us  NAN", "NA");
    };
    let (infk, infp) = match r.tcp_extra {
        Some(x) => (
            (x.bytes_in_flight / 1024).to_string(),
            (x.bytes_in_flight / mss).to_string(),
        ),
        None => ("NA".to_string(), "NA".to_string()),
    };
    format!(
        "{infk:>8}K({infp})/{}K({})/{}({}) us  {}",
        t.snd_cwnd / 1024,
        t.snd_cwnd / mss,
        t.rtt,
        t.rttvar,
        net_power(r.bytes, r.seconds, t.rtt as f64 * 1e-6)
    )
}

/// `Reads=Dist`: `16250=349:3:3:518:585:2:2:14788`.
fn reads(r: &Row) -> String {
    let f = r.figures;
    match f.read_bins {
        Some(b) => format!(
            "{}={}",
            or_na(f.reads),
            b.iter().map(u64::to_string).collect::<Vec<_>>().join(":")
        ),
        None => format!("{}=NA:NA:NA:NA:NA:NA:NA:NA", or_na(f.reads)),
    }
}

/// `  0.001 ms 0/892 (0%)`: jitter, lost/total and the loss percent.
pub(super) fn jitter_loss(r: &Row) -> String {
    let u = r.udp_recv.unwrap_or_default();
    let pct = if u.packets > 0 {
        100.0 * u.lost_packets as f64 / u.packets as f64
    } else {
        0.0
    };
    format!(
        "{:6.3} ms {}/{} ({}%)",
        u.jitter_ms,
        u.lost_packets,
        u.packets,
        g2(pct)
    )
}

/// NetPwr over the mean one-way delay.
pub(super) fn owd_power(r: &Row) -> String {
    let mean_s = r.owd.map_or(0.0, |l| l.mean_ms / 1e3);
    net_power(r.bytes, r.seconds, mean_s)
}

/// The trip-time UDP receiver's row: `... 892 pps 891/0(0) pkts 891/0/0 229500`.
fn udp_trip(head: &str, r: &Row) -> String {
    let f = r.figures;
    let u = r.udp_recv.unwrap_or_default();
    let Some(l) = &r.owd else {
        return format!(
            "{head}  {} -/-/-/- ms {} pps {}/NA/NA",
            jitter_loss(r),
            f.packets_per_second
                .map_or("NA".into(), |p| format!("{p:.0}")),
            or_na(f.reads)
        );
    };
    let pps = f.packets_per_second;
    let inp = match (f.in_progress_packets, pps) {
        (Some(i), Some(p)) => format!("{i:.0}({:.0}) pkts", p * l.stdev_ms / 1e3),
        _ => "NA(NA) pkts".to_string(),
    };
    format!(
        "{head}  {} {} ms {} pps {}/{inp} {}/NA/NA {}",
        jitter_loss(r),
        latency4(l),
        pps.map_or("NA".into(), |p| format!("{p:.0}")),
        u.packets.saturating_sub(u.lost_packets),
        or_na(f.reads),
        owd_power(r)
    )
}

/// The UDP client's lines after its own final row: what it sent, then what the server
/// reported (`Sent N datagrams`, `Server Report:`, a header and a row), when known.
pub fn server_report(
    no: usize,
    sent: Option<u64>,
    layout: Layout,
    server: Option<&Row>,
) -> Vec<String> {
    let id = super::id(no);
    let mut out = Vec::new();
    if let Some(n) = sent {
        out.push(format!("{id}Sent {n} datagrams"));
    }
    let Some(server) = server else {
        return out;
    };
    out.push(format!("[{no:3}] Server Report:"));
    let kind = if layout == Layout::Enhanced {
        Kind::UdpReadTrip
    } else {
        Kind::PlainUdpRecv
    };
    out.push(column_header(kind).to_string());
    out.push(row(kind, &id, server, &Facts::default()));
    out
}
