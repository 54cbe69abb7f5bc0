//! The end of a test in text: iperf3's summary table (per stream and `[SUM]`, sender
//! and receiver rows, TCP and UDP), the lines under it (CPU, spurious retransmits) and
//! netmeter's extension summaries (bounceback, working load, one-way delay, latency
//! histograms). Reads only the `End`.

use super::{SEPARATOR, TextCtx, connect, pct, profile, span};
use crate::report::{End, EndSum};
use crate::spec::Protocol;
use crate::units::{Format, format_bytes, format_rate};
use std::fmt::Write;

fn end_row(ctx: &TextCtx, id: String, s: &EndSum, extra: &str, role: &str) -> String {
    format!(
        "{id} {}  {}  {}{extra}  {role}\n",
        span(s.start, s.end),
        format_bytes(s.bytes as f64, Format::Auto),
        format_rate(s.bits_per_second, ctx.format)
    )
}

/// iperf3's 16-character column between Bitrate and the role: `  %3u` and padding for
/// a sender with retransmits, blanks otherwise.
fn retr_column(retransmits: Option<u64>) -> String {
    match retransmits {
        Some(r) => format!("  {r:>3}{}", " ".repeat(11)),
        None => " ".repeat(16),
    }
}

fn tcp_sum(s: &crate::report::EndSide) -> EndSum {
    EndSum {
        start: s.start,
        end: s.end,
        seconds: s.seconds,
        bytes: s.bytes,
        bits_per_second: s.bits_per_second,
        retransmits: s.retransmits,
        udp_recv: None,
        sender: s.sender,
        netmeter: s.netmeter.map(|n| crate::report::EndSumExtra {
            spurious_retransmits: Some(n.spurious_retransmits),
            ecn: None,
        }),
    }
}

/// iperf3's `-F` line under a stream's sender row: what this side sent from the file
/// or wrote into it, against the file's size.
fn diskfile_line(f: &crate::report::DiskFile, local_sender: bool) -> String {
    let (bytes, pct) = if local_sender {
        (f.sent, f.percent_sent)
    } else {
        (f.received, f.percent_received)
    };
    format!(
        "        Sent {} / {} ({pct}%) of {}\n",
        format_bytes(bytes as f64, Format::Auto),
        format_bytes(f.size as f64, Format::Auto),
        f.filename
    )
}

/// A UDP stream's end lines: what its sender sent, what its receiver counted.
fn udp_end_stream(ctx: &TextCtx, u: &crate::report::EndUdp) -> String {
    let id = ctx.id(u.socket, u.sender);
    let sent = EndSum {
        start: 0.0,
        end: u.seconds,
        seconds: u.seconds,
        bytes: u.bytes,
        bits_per_second: u.bits_per_second,
        ..EndSum::default()
    };
    let mut out = end_row(
        ctx,
        id.clone(),
        &sent,
        &format!("  {:5.3} ms  0/{} (0%)", 0.0, u.packets),
        "sender",
    );
    let (rb, rs) = u
        .netmeter
        .map(|n| (n.receiver_bytes, n.receiver_seconds))
        .unwrap_or((u.bytes, u.seconds));
    let recv = EndSum {
        start: 0.0,
        end: rs,
        seconds: rs,
        bytes: rb,
        bits_per_second: crate::stats::bits_per_second(rb, rs),
        ..EndSum::default()
    };
    out.push_str(&end_row(
        ctx,
        id,
        &recv,
        &format!(
            "  {:5.3} ms  {}/{} ({}%)",
            u.jitter_ms,
            u.lost_packets,
            u.packets,
            pct(u.lost_percent)
        ),
        "receiver",
    ));
    out
}

/// The end summary: per-stream sender and receiver lines, then `[SUM]` lines.
/// `local_senders[i]` tells whether this side sends on `e.streams[i]` (for bidir tags).
pub fn end(ctx: &TextCtx, e: &End, sender_retransmits: bool, local_senders: &[bool]) -> String {
    let mut out = String::new();
    out.push_str(SEPARATOR);
    out.push('\n');
    if ctx.verbose && !ctx.connect_only {
        // iperf3's `report_summary`, printed with -V only.
        out.push_str("Test Complete. Summary Results:\n");
    }
    if ctx.connect_only {
        // The data streams stayed idle: the connect-only summary follows instead.
        return out;
    }
    let id_col = if ctx.bidir { "[ ID][Role]" } else { "[ ID]" };
    match ctx.protocol {
        Protocol::Tcp => {
            let retr_col = if sender_retransmits {
                "         Retr"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "{id_col} Interval           Transfer     Bitrate{retr_col}"
            );
            for (i, s) in e.streams.iter().enumerate() {
                let local_sender = local_senders.get(i).copied().unwrap_or(ctx.client);
                for (side, role) in [(&s.sender, "sender"), (&s.receiver, "receiver")] {
                    if let Some(x) = side {
                        let extra = retr_column(x.retransmits.filter(|_| role == "sender"));
                        out.push_str(&end_row(
                            ctx,
                            ctx.id(x.socket, local_sender),
                            &tcp_sum(x),
                            &extra,
                            role,
                        ));
                    }
                    if let (Some(f), "sender") = (&s.diskfile, role) {
                        out.push_str(&diskfile_line(f, local_sender));
                    }
                }
            }
            let sums = [
                (&e.sum_sent, &e.sum_received, true),
                (
                    &e.sum_sent_bidir_reverse,
                    &e.sum_received_bidir_reverse,
                    false,
                ),
            ];
            let per_dir = if ctx.bidir {
                e.streams.len() / 2
            } else {
                e.streams.len()
            };
            if per_dir > 1 || ctx.bidir {
                for (sent, recv, fwd) in sums {
                    let local_sender = fwd == ctx.client;
                    for (x, role) in [(sent, "sender"), (recv, "receiver")] {
                        if let Some(x) = x {
                            let extra = retr_column(x.retransmits);
                            out.push_str(&end_row(ctx, ctx.sum_id(local_sender), x, &extra, role));
                        }
                    }
                }
            }
        }
        Protocol::Udp => {
            let _ = writeln!(
                out,
                "{id_col} Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams"
            );
            let per_dir = if ctx.bidir {
                e.streams.len() / 2
            } else {
                e.streams.len()
            };
            // As iperf3: each direction's streams, then its [SUM] sender and receiver
            // lines (with --bidir: four [SUM] lines in all).
            let dirs = if ctx.bidir {
                vec![
                    (Some(ctx.client), &e.sum_sent, &e.sum_received),
                    (
                        Some(!ctx.client),
                        &e.sum_sent_bidir_reverse,
                        &e.sum_received_bidir_reverse,
                    ),
                ]
            } else {
                vec![(None, &e.sum_sent, &e.sum_received)]
            };
            for (local_sender, sum_sent, sum_received) in dirs {
                for s in &e.streams {
                    let Some(u) = &s.udp else { continue };
                    if local_sender.is_some_and(|l| l != u.sender) {
                        continue;
                    }
                    out.push_str(&udp_end_stream(ctx, u));
                }
                if per_dir > 1 || ctx.bidir {
                    let tag = local_sender.unwrap_or(ctx.client);
                    for (x, role) in [(sum_sent, "sender"), (sum_received, "receiver")] {
                        let Some(x) = x else { continue };
                        let extra = match &x.udp_recv {
                            Some(u) => format!(
                                "  {:5.3} ms  {}/{} ({}%)",
                                u.jitter_ms,
                                u.lost_packets,
                                u.packets,
                                pct(u.lost_percent)
                            ),
                            None => String::new(),
                        };
                        let id = if ctx.bidir {
                            ctx.sum_id(tag)
                        } else {
                            ctx.sum_id(x.sender)
                        };
                        out.push_str(&end_row(ctx, id, x, &extra, role));
                    }
                }
            }
        }
    }
    // No `-T` prefix here: the caller prints this through `Output::text`, which adds it.
    out
}

/// Everything printed after the last interval: the end table, spurious retransmits,
/// `-V` CPU and congestion lines, the netmeter summaries (bounceback, connect-only,
/// working load, trip times, profiles), `--histograms` and the host warnings.
/// `e.local` tells on which streams this side sends and whether the end table has a
/// Retr column.
pub fn end_summary(ctx: &TextCtx, e: &End) -> String {
    let local_senders = &e.local.senders[..];
    let mut t = end(ctx, e, e.local.sender_retransmits, local_senders);
    t.push_str(&spurious_retransmits(e, local_senders));
    if ctx.verbose {
        t.push_str(&cpu(e, local_senders.iter().any(|&s| s)));
        if let Some(cc) = &e.sender_tcp_congestion {
            let _ = writeln!(t, "snd_tcp_congestion {cc}");
        }
        if let Some(cc) = &e.receiver_tcp_congestion {
            let _ = writeln!(t, "rcv_tcp_congestion {cc}");
        }
    }
    let x = &e.netmeter;
    if let Some(b) = &x.bounceback {
        t.push_str(&bounceback_summary(b));
    }
    if let Some(c) = &x.connect_only {
        t.push_str(&connect::summary_text(c));
    }
    if let Some(a) = &x.connect_only_answered {
        t.push_str(&connect::answered_text(a));
    }
    if let Some(wl) = &x.working_load {
        t.push_str(&working_load_summary(wl, ctx.format));
    }
    if let Some(tt) = &x.trip_times {
        t.push_str(&trip_times_summary(tt, x.bounceback.is_some()));
    }
    t.push_str(&profile::summary_text(x));
    t.push_str(&super::ecn::end_lines(ctx, e));
    if let Some(f) = x.iperf2_figures.as_ref().filter(|_| ctx.verbose) {
        t.push_str(&super::figures::end_lines(ctx, f, local_senders));
    }
    if let Some(bin) = ctx.histogram_bin_ms {
        if let Some(b) = &x.bounceback {
            t.push_str(&histogram("Bounceback RTT", &b.rtt_histogram_us, bin));
        }
        // Frames go client -> server, and back too with `--bidir` between netmeter
        // peers (`isochronous.reverse`); against an iperf3 server the reverse half is
        // a bulk stream.
        if let Some(i) = &x.isochronous {
            let back = i.reverse.as_ref().and_then(|r| r.receiver.as_ref());
            for (name, f) in [
                ("Frame latency client->server", i.receiver.as_ref()),
                ("Frame latency server->client", back),
            ] {
                if let Some(f) = f {
                    t.push_str(&histogram(name, &f.latency_histogram_us, bin));
                }
            }
        }
        if let Some(tt) = &x.trip_times {
            for (name, o) in [
                ("One-way delay client->server", &tt.client_to_server),
                ("One-way delay server->client", &tt.server_to_client),
            ] {
                if let Some(o) = o {
                    t.push_str(&histogram(name, &o.histogram_us, bin));
                }
            }
        }
    }
    t.push_str(&host_summary(x, ctx.verbose, ctx.format));
    for w in &x.warnings {
        let _ = writeln!(t, "warning: {w}");
    }
    t
}

/// `sent 1000 in 16 messages (62.5 per message); received 1000 in 1000 messages (1.0 per
/// message)`: how many datagrams each kernel message carried (GSO/GRO batching).
fn udp_io_line(io: &crate::report::UdpIoSides) -> Option<String> {
    let part = |what: &str, d: &Option<crate::stats::UdpIo>| {
        d.map(|d| {
            let per = d
                .per_message()
                .map_or(String::new(), |p| format!(" ({p:.1} per message)"));
            format!("{what} {} in {} messages{per}", d.datagrams, d.messages)
        })
    };
    let parts: Vec<String> = [part("sent", &io.sent), part("received", &io.received)]
        .into_iter()
        .flatten()
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The efficiency line (when the line rate is known) and, with `-V`, this side's host
/// and stream threads:
/// `Efficiency: 941 Mbits/sec received = 94.1% of eth0's 1 Gbit/s line rate`.
pub fn host_summary(x: &crate::report::EndExt, verbose: bool, fmt: Format) -> String {
    use crate::host::facts::{interface_line, limits_line};
    let mut t = String::new();
    if verbose && let Some(h) = &x.host {
        if let Some(i) = &h.interface {
            let _ = writeln!(t, "Host interface: {}", interface_line(i));
        }
        let _ = writeln!(
            t,
            "Host limits: {}; congestion control {}; {} CPU(s), governor {}",
            limits_line(h),
            h.congestion_control.as_deref().unwrap_or("unknown"),
            h.cpus,
            h.governor.as_deref().unwrap_or("unknown")
        );
    }
    if verbose && !x.stream_threads.is_empty() {
        let each: Vec<String> = x
            .stream_threads
            .iter()
            .map(|s| {
                let wait = s
                    .wait_percent
                    .map_or(String::new(), |w| format!(", {w:.0}% waiting for one"));
                let role = if s.sender { "sender" } else { "receiver" };
                let name = match s.socket {
                    Some(n) => format!("[{n:>3}]"),
                    None => format!("stream {}", s.id),
                };
                format!("{name} {role} {:.0}% of a CPU{wait}", s.cpu_percent)
            })
            .collect();
        let _ = writeln!(t, "Stream threads: {}", each.join("; "));
    }
    if verbose {
        for (who, io) in [("", &x.local_udp_io), (" (remote)", &x.remote_udp_io)] {
            if let Some(line) = io.as_ref().and_then(udp_io_line) {
                let _ = writeln!(t, "UDP datagrams{who}: {line}");
            }
        }
        for (who, lag) in [
            ("", x.local_pacing_lag_ms),
            (" (remote)", x.remote_pacing_lag_ms),
        ] {
            if let Some(ms) = lag {
                let _ = writeln!(t, "Pacing{who}: at most {ms:.1} ms behind the -b schedule");
            }
        }
    }
    if let Some(e) = &x.efficiency {
        let rate = |b: f64| format_rate(b, fmt).trim().to_string();
        let line = crate::host::facts::Interface {
            line_rate_bps: Some(e.line_rate_bps),
            ..Default::default()
        };
        let line = crate::host::facts::line_rate_text(&line);
        use crate::host::facts::PeakSource;
        let of = match e.peak {
            PeakSource::Interface => format!("{}'s {line} line rate", e.interface),
            PeakSource::Given => format!("the {line} line rate given with --line-rate"),
            PeakSource::MemoryCopy => format!(
                "this host's memory copy rate ({} on one thread, --line-rate memcpy)",
                rate(e.line_rate_bps as f64)
            ),
        };
        let _ = write!(
            t,
            "Efficiency: {} received = {:.1}% of {of}",
            rate(e.bits_per_second),
            e.percent,
        );
        if let (Some(b), Some(p)) = (e.reverse_bits_per_second, e.reverse_percent) {
            let _ = write!(t, "; reverse {} = {p:.1}%", rate(b));
        }
        t.push('\n');
    }
    t
}

/// A line per sending side (this host's streams, the peer's) whose retransmissions
/// include spurious ones: `Retransmits (local sender): 271 segments, 270 of them
/// spurious (...)`. Nothing when none were spurious, or when the sender could not tell
/// (an iperf3 peer). `local_senders[i]` tells whether this side sends on `e.streams[i]`.
pub fn spurious_retransmits(e: &End, local_senders: &[bool]) -> String {
    let mut out = String::new();
    for (local, who) in [(true, "local sender"), (false, "remote sender")] {
        let (mut total, mut spurious) = (0, 0);
        for (i, s) in e.streams.iter().enumerate() {
            if local_senders.get(i).copied() != Some(local) {
                continue;
            }
            if let Some(x) = &s.sender
                && let Some(n) = x.netmeter
            {
                total += x.retransmits.unwrap_or(0);
                spurious += n.spurious_retransmits;
            }
        }
        if spurious > 0 {
            let _ = writeln!(
                out,
                "Retransmits ({who}): {total} segments, {spurious} of them spurious (the \
                 receiver already had them: D-SACK; reordering or early timers, not loss)"
            );
        }
    }
    out
}

/// `CPU Utilization: local/sender 99.3% (1.1%u/98.2%s), remote/receiver ...`.
pub fn cpu(e: &End, local_sender: bool) -> String {
    let c = &e.cpu_utilization_percent;
    let (l, r) = if local_sender {
        ("sender", "receiver")
    } else {
        ("receiver", "sender")
    };
    format!(
        "CPU Utilization: local/{l} {:.1}% ({:.1}%u/{:.1}%s), remote/{r} {:.1}% ({:.1}%u/{:.1}%s)\n",
        c.host_total, c.host_user, c.host_system, c.remote_total, c.remote_user, c.remote_system
    )
}

/// The bounceback summary under the end table.
pub fn bounceback_summary(b: &crate::report::BouncebackEnd) -> String {
    let r = &b.rtt;
    let mut s = format!(
        "Bounceback: {} transactions in {:.2} s = {:.0} trans/s over {} stream(s); {} byte requests, {} byte replies, hold {} ms, burst {}\n",
        b.transactions,
        b.seconds,
        b.transactions_per_second,
        b.streams,
        b.request_bytes,
        b.reply_bytes,
        b.hold_ms,
        b.burst
    );
    s.push_str(&format!(
        "RTT (ms): min {:.3}  mean {:.3}  stdev {:.3}  p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}\n",
        r.min_ms, r.mean_ms, r.stdev_ms, r.p50_ms, r.p90_ms, r.p99_ms, r.p999_ms, r.max_ms
    ));
    if b.busy_poll_us > 0 {
        s.push_str(&format!(
            "Busy polling: each end polled up to {} µs before a blocking read\n",
            b.busy_poll_us
        ));
    }
    if b.lost > 0 {
        s.push_str(&format!("{} requests got no reply within 1 s\n", b.lost));
    }
    if let Some(n) = b.clock_sync_errors.filter(|&n| n > 0) {
        s.push_str(&format!(
            "Clock sync errors: {n} replies whose server timestamps contradict their round trip (the clocks disagree by more than it)\n"
        ));
    }
    s
}

/// The working-load lines under the end table.
pub fn working_load_summary(w: &crate::report::WorkingLoadEnd, fmt: Format) -> String {
    let mut s = format!(
        "Working load ({}, {} TCP stream(s) per direction; first {:.1} s idle):\n",
        w.direction, w.streams, w.idle_seconds
    );
    for (name, r, rpm) in [
        ("idle", &w.idle_rtt, w.idle_rpm),
        ("loaded", &w.loaded_rtt, w.loaded_rpm),
    ] {
        match r {
            Some(r) => s.push_str(&format!(
                "  {name:<6} RTT ms: min {:.3}  p50 {:.3}  mean {:.3}  p90 {:.3}  p99 {:.3}  max {:.3}  ({} probes)  responsiveness {:.0} RPM\n",
                r.min_ms, r.p50_ms, r.mean_ms, r.p90_ms, r.p99_ms, r.max_ms, r.count, rpm.unwrap_or(0.0)
            )),
            None => s.push_str(&format!("  {name:<6} RTT: no probes completed\n")),
        }
    }
    if let (Some(idle), Some(loaded)) = (w.idle_rpm, w.loaded_rpm)
        && loaded > idle
    {
        s.push_str(
            "  loaded responsiveness is higher than idle: the load added no measurable queueing delay, and busy CPUs answer probes faster than idle ones that sleep between them (typical on loopback and fast LANs)\n",
        );
    }
    if w.up_bits_per_second > 0.0 {
        s.push_str(&format!(
            "  load up:   {}\n",
            format_rate(w.up_bits_per_second, fmt).trim()
        ));
    }
    if w.down_bits_per_second > 0.0 {
        s.push_str(&format!(
            "  load down: {}\n",
            format_rate(w.down_bits_per_second, fmt).trim()
        ));
    }
    s
}

/// A latency histogram re-binned to `bin_ms`-wide rows (`--histograms`): each row's
/// range, count, share and a bar. Empty rows between occupied ones are left out.
pub fn histogram(title: &str, buckets_us: &[(f64, u64)], bin_ms: f64) -> String {
    let total: u64 = buckets_us.iter().map(|b| b.1).sum();
    if total == 0 || bin_ms <= 0.0 {
        return String::new();
    }
    let mut bins: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
    for &(us, n) in buckets_us {
        // A bucket's upper bound decides its bin; the HDR resolution is 0.1 %.
        let bin = ((us / 1000.0) / bin_ms).ceil().max(1.0) as u64 - 1;
        *bins.entry(bin).or_default() += n;
    }
    let max = bins.values().copied().max().unwrap_or(1);
    let mut s = format!("{title} histogram ({bin_ms} ms bins, {total} samples):\n");
    for (bin, n) in bins {
        let lo = bin as f64 * bin_ms;
        let bar = "#".repeat(((n as f64 / max as f64) * 40.0).ceil() as usize);
        s.push_str(&format!(
            "  {:>10.3}-{:<10.3} ms {n:>10} {:>6.2}%  {bar}\n",
            lo,
            lo + bin_ms,
            100.0 * n as f64 / total as f64
        ));
    }
    s
}

/// One-way delay lines under the end table.
/// A direction without samples is absent from `t` and is not printed.
pub fn trip_times_summary(t: &crate::report::TripTimesEnd, bounceback: bool) -> String {
    if t.client_to_server.is_none() && t.server_to_client.is_none() {
        // Bounceback: requests and replies carry no send times, so only the round trip
        // is measured. A heading with nothing under it would read like a failure.
        let why = if bounceback {
            " (bounceback requests and replies carry no send times; their RTT is the round trip)"
        } else {
            ""
        };
        return format!(
            "One-way delay: no samples{why}; server clock - client clock estimated {:+.3} ms +/- {:.3} ms\n",
            t.offset_ms, t.offset_uncertainty_ms
        );
    }
    let mut s = format!(
        "One-way delay ({}; server clock - client clock estimated {:+.3} ms +/- {:.3} ms):\n",
        t.clock, t.offset_ms, t.offset_uncertainty_ms
    );
    for (name, o) in [
        ("client->server", &t.client_to_server),
        ("server->client", &t.server_to_client),
    ] {
        let Some(o) = o else { continue };
        if let Some(d) = &o.owd {
            s.push_str(&format!(
                "  {name}: corrected min {:.3}  mean {:.3}  p50 {:.3}  p90 {:.3}  p99 {:.3}  max {:.3} ms ({} samples)\n",
                d.min_ms, d.mean_ms, d.p50_ms, d.p90_ms, d.p99_ms, d.max_ms, d.count
            ));
        }
        s.push_str(&format!(
            "  {name}: raw min {:.3}  mean {:.3}  max {:.3} ms; clock errors {} (negative raw delay), {} still negative after correction\n",
            o.raw_min_ms, o.raw_mean_ms, o.raw_max_ms, o.clock_errors, o.negative_corrected
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::EndSide;
    use crate::report::EndStream;
    use crate::report::Interval;
    use crate::report::StreamInterval;
    use crate::report::SumInterval;
    use crate::report::TcpFigures;
    use crate::report::text::interval;
    use crate::report::text::tests::ctx;

    #[test]
    fn trip_times_without_samples_says_why_instead_of_an_empty_heading() {
        let t = crate::report::TripTimesEnd {
            clock: "CLOCK_REALTIME".into(),
            offset_ms: 0.001,
            offset_uncertainty_ms: 0.014,
            client_to_server: None,
            server_to_client: None,
        };
        assert_eq!(
            trip_times_summary(&t, true),
            "One-way delay: no samples (bounceback requests and replies carry no send times; their RTT is the round trip); server clock - client clock estimated +0.001 ms +/- 0.014 ms\n"
        );
    }

    #[test]
    fn working_load_sum_is_bulk_figures_and_a_faster_loaded_path_is_explained() {
        let c = TextCtx {
            bounceback: true,
            ..ctx(Protocol::Tcp)
        };
        let bulk = StreamInterval {
            socket: 4,
            end: 1.0,
            seconds: 1.0,
            bytes: 1 << 30,
            bits_per_second: 8.6e9,
            tcp: Some(TcpFigures::default()),
            sender: true,
            ..StreamInterval::default()
        };
        let probe = StreamInterval {
            socket: 6,
            netmeter: Some(Box::new(crate::report::StreamExt {
                transactions: Some(100),
                ..Default::default()
            })),
            ..bulk.clone()
        };
        let iv = Interval {
            streams: vec![bulk.clone(), probe],
            sum: SumInterval {
                end: 1.0,
                seconds: 1.0,
                bytes: 2 << 30,
                bits_per_second: 17.2e9,
                retransmits: Some(3),
                netmeter: Some(Box::new(crate::report::StreamExt {
                    transactions: Some(100),
                    ..Default::default()
                })),
                ..SumInterval::default()
            },
            ..Interval::default()
        };
        let text = interval(&c, &iv);
        let sum = text.lines().find(|l| l.starts_with("[SUM]")).unwrap_or("");
        assert!(sum.ends_with("GBytes  17.2 Gbits/sec    3"), "{text}");
        let w = crate::report::WorkingLoadEnd {
            idle_rpm: Some(600_000.0),
            loaded_rpm: Some(633_000.0),
            ..Default::default()
        };
        assert!(working_load_summary(&w, Format::Auto).contains(
            "loaded responsiveness is higher than idle: the load added no measurable queueing delay"
        ));
        let w = crate::report::WorkingLoadEnd {
            loaded_rpm: Some(6_000.0),
            ..w
        };
        assert!(!working_load_summary(&w, Format::Auto).contains("higher than idle"));
    }

    #[test]
    fn tcp_end_snapshot() {
        let e = End {
            streams: vec![EndStream {
                sender: Some(EndSide {
                    socket: 5,
                    end: 10.0,
                    seconds: 10.0,
                    bytes: 37_580_963_840,
                    bits_per_second: 30.06e9,
                    retransmits: Some(8),
                    max_snd_cwnd: Some(1),
                    sender: true,
                    ..EndSide::default()
                }),
                receiver: Some(EndSide {
                    socket: 5,
                    end: 10.04,
                    seconds: 10.04,
                    bytes: 37_580_963_840,
                    bits_per_second: 29.94e9,
                    sender: false,
                    ..EndSide::default()
                }),
                udp: None,
                diskfile: None,
            }],
            ..End::default()
        };
        let text = end(&ctx(Protocol::Tcp), &e, true, &[true]);
        let want = "\
- - - - - - - - - - - - - - - - - - - - - - - - -
[ ID] Interval           Transfer     Bitrate         Retr
[  5]   0.00-10.00  sec  35.0 GBytes  30.1 Gbits/sec    8             sender
[  5]   0.00-10.04  sec  35.0 GBytes  29.9 Gbits/sec                  receiver
";
        assert_eq!(text, want);
        // -F: iperf3's line under the sender row, this side's share of the file.
        let mut e = e;
        e.streams[0].diskfile = Some(crate::report::DiskFile::new(
            37_580_963_840,
            30_000_000_000,
            40_000_000_000,
            "/tmp/big".into(),
        ));
        let text = end(&ctx(Protocol::Tcp), &e, true, &[true]);
        assert!(
            text.contains(
                "sender\n        Sent 35.0 GBytes / 37.3 GBytes (93%) of /tmp/big\n[  5]"
            ),
            "{text}"
        );
        let text = end(&ctx(Protocol::Tcp), &e, true, &[false]);
        assert!(
            text.contains("Sent 27.9 GBytes / 37.3 GBytes (75%) of /tmp/big"),
            "{text}"
        );
    }

    #[test]
    fn spurious_retransmits_line_per_sending_side() {
        let sender = |retr: u64, spurious: Option<u64>| EndStream {
            sender: Some(EndSide {
                retransmits: Some(retr),
                sender: true,
                netmeter: spurious.map(|n| crate::report::TcpEndExtra {
                    spurious_retransmits: n,
                }),
                ..EndSide::default()
            }),
            receiver: None,
            udp: None,
            diskfile: None,
        };
        let e = End {
            streams: vec![sender(10, Some(7)), sender(5, Some(1)), sender(4, Some(4))],
            ..End::default()
        };
        // Streams 0 and 1 are this host's, stream 2 the peer's (a bidirectional test).
        let text = spurious_retransmits(&e, &[true, true, false]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].starts_with("Retransmits (local sender): 15 segments, 8 of them spurious")
        );
        assert!(
            lines[1].starts_with("Retransmits (remote sender): 4 segments, 4 of them spurious")
        );
        // Nothing spurious, or a sender that cannot tell (an iperf3 peer): no line.
        let quiet = End {
            streams: vec![sender(10, Some(0)), sender(3, None)],
            ..End::default()
        };
        assert_eq!(spurious_retransmits(&quiet, &[true, false]), "");
    }

    #[test]
    fn histogram_rebins_and_counts() {
        // 10 samples at 0.05 ms, 5 at 0.15 ms, 5 at 0.151 ms: two 0.1 ms rows.
        let h = histogram("RTT", &[(50.0, 10), (150.0, 5), (151.0, 5)], 0.1);
        let rows: Vec<&str> = h.lines().collect();
        assert_eq!(rows.len(), 3, "{h}");
        assert!(rows[0].contains("20 samples"));
        assert!(
            rows[1].contains("0.000-0.100")
                && rows[1].contains(" 10 ")
                && rows[1].contains("50.00%")
        );
        assert!(rows[2].contains("0.100-0.200") && rows[2].contains(" 10 "));
        assert_eq!(histogram("x", &[], 0.1), "");
    }

    #[test]
    fn udp_datagram_lines_only_with_verbose() {
        use crate::report::UdpIoSides;
        use crate::stats::UdpIo;
        let x = crate::report::EndExt {
            local_udp_io: Some(UdpIoSides {
                sent: Some(UdpIo {
                    datagrams: 1000,
                    messages: 16,
                }),
                received: None,
            }),
            remote_udp_io: Some(UdpIoSides {
                sent: None,
                received: Some(UdpIo {
                    datagrams: 998,
                    messages: 0,
                }),
            }),
            local_pacing_lag_ms: Some(23.46),
            ..crate::report::EndExt::default()
        };
        assert_eq!(host_summary(&x, false, Format::Auto), "");
        assert_eq!(
            host_summary(&x, true, Format::Auto),
            "UDP datagrams: sent 1000 in 16 messages (62.5 per message)\n\
             UDP datagrams (remote): received 998 in 0 messages\n\
             Pacing: at most 23.5 ms behind the -b schedule\n"
        );
    }

    #[test]
    fn host_lines_verbose_and_efficiency_always() {
        use crate::host::facts::{Efficiency, HostInfo, Interface, ThreadCpu};
        let x = crate::report::EndExt {
            host: Some(HostInfo {
                interface: Some(Interface {
                    name: "eth0".into(),
                    addresses: vec!["10.0.0.2".into()],
                    mtu: Some(1500),
                    line_rate_bps: Some(1_000_000_000),
                    gso: Some(true),
                    gro: Some(true),
                    tso: Some(false),
                    ..Interface::default()
                }),
                rmem_max: Some(212_992),
                wmem_max: Some(212_992),
                tcp_rmem: Some([4096, 131_072, 6_291_456]),
                tcp_wmem: None,
                congestion_control: Some("cubic".into()),
                cpus: 4,
                ..HostInfo::default()
            }),
            efficiency: Some(Efficiency {
                interface: "eth0".into(),
                line_rate_bps: 1_000_000_000,
                bits_per_second: 941e6,
                percent: 94.1,
                ..Efficiency::default()
            }),
            stream_threads: vec![ThreadCpu {
                id: 5,
                socket: Some(8),
                sender: true,
                seconds: 10.0,
                cpu_percent: 37.4,
                wait_percent: Some(1.2),
            }],
            ..crate::report::EndExt::default()
        };
        let eff = "Efficiency: 941 Mbits/sec received = 94.1% of eth0's 1 Gbit/s line rate\n";
        assert_eq!(host_summary(&x, false, Format::Auto), eff);
        // A peak the user gave, or this host's memory copy rate.
        use crate::host::facts::PeakSource;
        let mut given = x.clone();
        let e = given.efficiency.as_mut().unwrap();
        (e.peak, e.line_rate_bps, e.percent) = (PeakSource::Given, 2_500_000_000, 37.64);
        assert_eq!(
            host_summary(&given, false, Format::Auto),
            "Efficiency: 941 Mbits/sec received = 37.6% of the 2.5 Gbit/s line rate given with --line-rate\n"
        );
        let e = given.efficiency.as_mut().unwrap();
        (e.peak, e.line_rate_bps, e.percent) = (PeakSource::MemoryCopy, 80_000_000_000, 1.18);
        assert_eq!(
            host_summary(&given, false, Format::Auto),
            "Efficiency: 941 Mbits/sec received = 1.2% of this host's memory copy rate (80.0 Gbits/sec on one thread, --line-rate memcpy)\n"
        );
        assert_eq!(
            host_summary(&x, true, Format::Auto),
            format!(
                "Host interface: eth0 10.0.0.2: line rate 1 Gbit/s, MTU 1500, GSO on, GRO on, TSO off\n\
                 Host limits: rmem_max 208 KBytes, wmem_max 208 KBytes, tcp_rmem max 6.00 MBytes, tcp_wmem max unknown; congestion control cubic; 4 CPU(s), governor unknown\n\
                 Stream threads: [  8] sender 37% of a CPU, 1% waiting for one\n{eff}"
            )
        );
        assert_eq!(
            host_summary(&crate::report::EndExt::default(), true, Format::Auto),
            ""
        );
    }
}
