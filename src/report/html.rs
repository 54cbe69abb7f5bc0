//! `netmeter report`: one self-contained HTML file for one or more results.
//!
//! Everything is inline (CSS in a `<style>`, each chart an `<svg>` from
//! [`super::plot`]); nothing is fetched and no script runs, so the file can be mailed,
//! archived or opened offline. Sections, each with a stable `id` the tests look for:
//! `compare` (several inputs: a side-by-side table and the comparison charts), then per
//! input `result-N` holding `settings-N`, `hosts-N`, `summary-N`, `warnings-N` and
//! `plots-N`. Tables scroll sideways inside their box and charts scale to the page (on a
//! phone-width screen down to 640 px, then they scroll sideways too, so their text stays
//! legible). A sweep's page (`experiment::sweep_plot::html`) uses `head` and
//! `figures` too.

use super::input::Input;
use super::plot::{self, Chart};
use super::{EndSum, Report, advice};
use crate::units::{Format, format_bytes, format_rate};
use std::fmt::Write as _;

const STYLE: &str = "
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 0 auto;
  max-width: 1000px; padding: 12px; color: #1b1b1b; line-height: 1.4; }
h1 { font-size: 1.5em; margin: 0.3em 0; }
h2 { font-size: 1.25em; border-bottom: 2px solid #0072b2; padding-bottom: 2px; margin-top: 1.6em; }
h3 { font-size: 1.05em; margin: 1.2em 0 0.4em; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.92em; margin: 4px 0; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th { background: #eef3f8; }
ul.warnings li { color: #9b1c1c; }
figure { margin: 10px 0; overflow-x: auto; }
figure svg { width: 100%; height: auto; display: block; border: 1px solid #e4e4e4;
  box-sizing: border-box; }
.muted { color: #666; }
@media (max-width: 600px) { body { padding: 6px; } table { font-size: 0.8em; }
  figure svg { min-width: 640px; } }
";

/// The whole HTML document for these inputs.
pub fn render(inputs: &[Input]) -> Result<String, plot::DrawError> {
    let mut h = String::new();
    let title = match inputs {
        [one] => format!("netmeter report: {}", one.name),
        _ => format!("netmeter report: {} results", inputs.len()),
    };
    head(&mut h, &title);
    let _ = writeln!(
        h,
        "<p class=\"muted\">Made by netmeter {} from {}.</p>",
        env!("CARGO_PKG_VERSION"),
        inputs
            .iter()
            .map(|i| esc(&i.path.display().to_string()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if inputs.len() > 1 {
        h.push_str("<section id=\"compare\">\n<h2>Side by side</h2>\n");
        compare_table(&mut h, inputs);
        figures(&mut h, &plot::charts(inputs))?;
        h.push_str("</section>\n");
    }
    for (n, i) in inputs.iter().enumerate() {
        result_section(&mut h, n + 1, i)?;
    }
    h.push_str("</body>\n</html>\n");
    Ok(h)
}

/// A page's start: the doctype, the head with the inline style, and `title` as its
/// heading (also for pages other than [`render`]'s, such as a sweep's).
pub(crate) fn head(h: &mut String, title: &str) {
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        esc(title),
        esc(title)
    );
}

fn result_section(h: &mut String, n: usize, i: &Input) -> Result<(), plot::DrawError> {
    let r = &i.report;
    let _ = writeln!(h, "<section id=\"result-{n}\">\n<h2>{}</h2>", esc(&i.name));
    let _ = writeln!(h, "<h3 id=\"settings-{n}\">Test settings</h3>");
    table(h, &settings(r));
    let _ = writeln!(h, "<h3 id=\"hosts-{n}\">Hosts</h3>");
    table(h, &hosts(r));
    let _ = writeln!(h, "<h3 id=\"summary-{n}\">Summary</h3>");
    summary_table(h, r);
    let _ = writeln!(h, "<h3 id=\"warnings-{n}\">Warnings</h3>");
    let warns = warnings(r);
    if warns.is_empty() {
        let _ = writeln!(h, "<p class=\"muted\">{}</p>", esc(&no_warnings(r)));
    } else {
        h.push_str("<ul class=\"warnings\">\n");
        for w in &warns {
            let _ = writeln!(h, "<li>{}</li>", esc(w));
        }
        h.push_str("</ul>\n");
    }
    let _ = writeln!(h, "<h3 id=\"plots-{n}\">Plots</h3>");
    let charts = plot::charts(std::slice::from_ref(i));
    if charts.is_empty() {
        h.push_str("<p class=\"muted\">No chart applies: the test has no intervals and no latency histograms.</p>\n");
    }
    figures(h, &charts)?;
    h.push_str("</section>\n");
    Ok(())
}

/// What an empty warnings list means. A netmeter result checked the hosts; iperf3
/// records no host limits, socket-buffer drops or clock problems, so its silence says
/// nothing about them.
fn no_warnings(r: &Report) -> String {
    if r.start.version.starts_with("netmeter") {
        "None: no host limits, buffer or clock problems were recorded.".into()
    } else {
        let who = if r.start.version.is_empty() {
            "this result's program"
        } else {
            &r.start.version
        };
        format!(
            "None recorded, but {who} does not record host limits, socket-buffer drops or \
             clock problems: only netmeter checks for them (its CPU-bound rule was applied here)."
        )
    }
}

/// A size in bytes as the user gave it: `-l 1400` reads "1400 bytes" (not "1.37
/// KBytes"), whole KiB and MiB also in iperf3's units.
fn exact_size(b: u64) -> String {
    if b >= 1024 && b.is_multiple_of(1024) {
        format!(
            "{} ({b} bytes)",
            format_bytes(b as f64, Format::Auto).trim()
        )
    } else {
        format!("{b} bytes")
    }
}

/// The first direction of a test: the one `sum_sent`/`sum_received` hold, named the
/// same way in the settings and the summary.
fn first_direction(r: &Report) -> &'static str {
    let t = &r.start.test_start;
    if t.reverse != 0 && t.bidir == 0 {
        "server → client"
    } else {
        "client → server"
    }
}

/// Each chart inline as its own `<svg>` in a `<figure>`.
pub(crate) fn figures(h: &mut String, charts: &[Chart]) -> Result<(), plot::DrawError> {
    for c in charts {
        let svg = plot::render_svg(std::slice::from_ref(c))?;
        // The XML declaration plotters may write is not allowed inside HTML.
        let svg = match svg.find("<svg") {
            Some(at) => &svg[at..],
            None => &svg[..],
        };
        let _ = writeln!(
            h,
            "<figure class=\"chart\" data-kind=\"{}\" aria-label=\"{}\">\n{svg}\n</figure>",
            c.kind,
            esc(&c.title)
        );
    }
    Ok(())
}

/// HTML-escape text.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// A two-column table of (name, value).
fn table(h: &mut String, rows: &[(String, String)]) {
    h.push_str("<div class=\"scroll\"><table>\n");
    for (k, v) in rows {
        let _ = writeln!(h, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
    }
    h.push_str("</table></div>\n");
}

fn rate(bps: f64) -> String {
    format_rate(bps, Format::Auto)
}

fn settings(r: &Report) -> Vec<(String, String)> {
    let t = &r.start.test_start;
    let mut v = vec![
        ("Protocol".into(), t.protocol.clone()),
        ("Streams".into(), t.num_streams.to_string()),
    ];
    let mode = if t.bidir != 0 {
        "client → server and server → client (--bidir)"
    } else if t.reverse != 0 {
        "server → client (-R: the server sends)"
    } else {
        "client → server (the client sends)"
    };
    v.push(("Direction".into(), mode.into()));
    if t.bytes > 0 {
        v.push(("Amount".into(), format_bytes(t.bytes as f64, Format::Auto)));
    } else if t.blocks > 0 {
        v.push(("Blocks".into(), t.blocks.to_string()));
    } else {
        v.push(("Duration".into(), format!("{} s", t.duration)));
    }
    if t.omit > 0.0 {
        v.push(("Omitted".into(), format!("first {} s", t.omit)));
    }
    v.push(("Block size".into(), exact_size(t.blksize)));
    if t.target_bitrate > 0 {
        v.push((
            "Target rate per stream".into(),
            rate(t.target_bitrate as f64),
        ));
    }
    v.push(("Interval".into(), format!("{} s", t.interval)));
    if t.tos != 0 {
        v.push(("TOS".into(), format!("0x{:02x}", t.tos)));
    }
    if let Some(cc) = &r.end.sender_tcp_congestion {
        v.push(("Congestion control (sender)".into(), cc.clone()));
    }
    if let Some(title) = &r.title {
        v.push(("Title".into(), title.clone()));
    }
    if !r.start.netmeter.features.is_empty() {
        v.push((
            "netmeter features".into(),
            r.start.netmeter.features.join(", "),
        ));
    }
    v.push(("Started".into(), r.start.timestamp.time.clone()));
    v
}

fn hosts(r: &Report) -> Vec<(String, String)> {
    let s = &r.start;
    let mut v = Vec::new();
    let side = if s.connecting_to.is_some() {
        "client"
    } else {
        "server"
    };
    v.push(("This side".into(), format!("{side}, {}", s.version)));
    v.push(("System".into(), s.system_info.clone()));
    if let Some(c) = &s.connecting_to {
        v.push(("Server".into(), format!("{} port {}", c.host, c.port)));
    }
    if let Some(a) = &s.accepted_connection {
        v.push(("Client".into(), format!("{} port {}", a.host, a.port)));
    }
    if !s.netmeter.peer.is_empty() {
        v.push(("Peer".into(), s.netmeter.peer.clone()));
    }
    for c in s.connected.iter().take(16) {
        v.push((
            format!("Stream (socket {})", c.socket),
            format!(
                "{} port {} → {} port {}",
                c.local_host, c.local_port, c.remote_host, c.remote_port
            ),
        ));
    }
    if s.connected.len() > 16 {
        v.push((
            "Streams".into(),
            format!("{} more not listed", s.connected.len() - 16),
        ));
    }
    let cpu = &r.end.cpu_utilization_percent;
    v.push((
        "CPU (this side)".into(),
        format!(
            "{:.1} % (user {:.1} %, system {:.1} %)",
            cpu.host_total, cpu.host_user, cpu.host_system
        ),
    ));
    v.push((
        "CPU (peer)".into(),
        format!(
            "{:.1} % (user {:.1} %, system {:.1} %)",
            cpu.remote_total, cpu.remote_user, cpu.remote_system
        ),
    ));
    if s.sndbuf_actual > 0 || s.rcvbuf_actual > 0 {
        v.push((
            "Socket buffers".into(),
            format!(
                "send {}, receive {}",
                format_bytes(s.sndbuf_actual as f64, Format::Auto),
                format_bytes(s.rcvbuf_actual as f64, Format::Auto)
            ),
        ));
    }
    v
}

/// The end sums by direction: (label, sender's sum, receiver's sum); the labels are
/// the settings' ("client → server", "server → client").
fn end_rows(r: &Report) -> Vec<(&'static str, Option<&EndSum>, Option<&EndSum>)> {
    let e = &r.end;
    let first = first_direction(r);
    let mut rows = Vec::new();
    if e.sum_sent.is_some() || e.sum_received.is_some() {
        rows.push((first, e.sum_sent.as_ref(), e.sum_received.as_ref()));
    } else if let Some(s) = &e.sum {
        rows.push((first, Some(s), Some(s)));
    }
    let second = "server → client";
    if e.sum_sent_bidir_reverse.is_some() || e.sum_received_bidir_reverse.is_some() {
        rows.push((
            second,
            e.sum_sent_bidir_reverse.as_ref(),
            e.sum_received_bidir_reverse.as_ref(),
        ));
    } else if let Some(s) = &e.sum_bidir_reverse {
        rows.push((second, Some(s), Some(s)));
    }
    rows
}

fn summary_table(h: &mut String, r: &Report) {
    let udp = r.start.test_start.protocol == "UDP";
    h.push_str("<div class=\"scroll\"><table>\n<tr><th>Direction</th><th>Seconds</th><th>Sent</th><th>Sender rate</th><th>Received</th><th>Receiver rate</th>");
    h.push_str(if udp {
        "<th>Jitter</th><th>Lost / total</th></tr>\n"
    } else {
        "<th>Retransmits</th></tr>\n"
    });
    for (label, sent, recv) in end_rows(r) {
        let cell = |s: Option<&EndSum>, f: &dyn Fn(&EndSum) -> String| s.map_or("-".into(), f);
        let _ = write!(
            h,
            "<tr><td>{label}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
            cell(sent.or(recv), &|s| format!("{:.2}", s.seconds)),
            cell(sent, &|s| format_bytes(s.bytes as f64, Format::Auto)),
            cell(sent, &|s| rate(s.bits_per_second)),
            cell(recv, &|s| format_bytes(s.bytes as f64, Format::Auto)),
            cell(recv, &|s| rate(s.bits_per_second)),
        );
        if udp {
            let u = recv.and_then(|s| s.udp_recv);
            let _ = writeln!(
                h,
                "<td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                u.map_or("-".into(), |u| format!("{:.3} ms", u.jitter_ms)),
                u.map_or("-".into(), |u| format!(
                    "{}/{} ({:.2} %)",
                    u.lost_packets, u.packets, u.lost_percent
                )),
            );
        } else {
            let _ = writeln!(
                h,
                "<td class=\"num\">{}</td></tr>",
                sent.and_then(|s| s.retransmits)
                    .map_or("-".into(), |n| n.to_string())
            );
        }
    }
    h.push_str("</table></div>\n");
    let lat = latency_rows(r);
    if !lat.is_empty() {
        table(h, &lat);
    }
}

/// Latency and rate figures beyond the throughput table.
fn latency_rows(r: &Report) -> Vec<(String, String)> {
    let n = &r.end.netmeter;
    let mut v = Vec::new();
    let pct = |s: &crate::latency::LatencyStats| {
        format!(
            "min {:.3} / p50 {:.3} / p90 {:.3} / p99 {:.3} / p99.9 {:.3} / max {:.3} ms ({} samples)",
            s.min_ms, s.p50_ms, s.p90_ms, s.p99_ms, s.p999_ms, s.max_ms, s.count
        )
    };
    if let Some(b) = &n.bounceback {
        v.push((
            "Bounceback".into(),
            format!(
                "{} transactions, {:.0}/s, {} lost",
                b.transactions, b.transactions_per_second, b.lost
            ),
        ));
        v.push(("Bounceback RTT".into(), pct(&b.rtt)));
    }
    if let Some(t) = &n.trip_times {
        for (name, s) in [
            ("One-way delay client → server", &t.client_to_server),
            ("One-way delay server → client", &t.server_to_client),
        ] {
            if let Some(o) = s.as_ref().and_then(|s| s.owd) {
                v.push((name.into(), pct(&o)));
            }
        }
        v.push((
            "Clock offset".into(),
            format!(
                "{:.3} ms ± {:.3} ms ({})",
                t.offset_ms, t.offset_uncertainty_ms, t.clock
            ),
        ));
    }
    if let Some(c) = &n.connect_only {
        v.push((
            "Connections".into(),
            format!(
                "{} in {:.2} s, {:.0}/s, {} failed",
                c.connections, c.seconds, c.connections_per_second, c.failed
            ),
        ));
        v.push(("Handshake (connect)".into(), pct(&c.connect)));
    }
    if let Some(w) = &n.working_load {
        let rpm = |x: Option<f64>| x.map_or("-".into(), |x| format!("{x:.0}"));
        v.push((
            "Responsiveness (RPM)".into(),
            format!("idle {}, loaded {}", rpm(w.idle_rpm), rpm(w.loaded_rpm)),
        ));
        if let Some(s) = &w.idle_rtt {
            v.push(("RTT idle".into(), pct(s)));
        }
        if let Some(s) = &w.loaded_rtt {
            v.push(("RTT loaded".into(), pct(s)));
        }
    }
    v
}

/// The document's own warnings, and for documents that carry none (iperf3's) the
/// CPU-bound rule netmeter applies to its own tests.
fn warnings(r: &Report) -> Vec<String> {
    let mut v: Vec<String> = r
        .start
        .netmeter
        .warnings
        .iter()
        .chain(&r.end.netmeter.warnings)
        .cloned()
        .collect();
    let cpu = &r.end.cpu_utilization_percent;
    for (side, total) in [
        ("this side", cpu.host_total),
        ("the peer", cpu.remote_total),
    ] {
        if total >= advice::CPU_BOUND_PERCENT && !v.iter().any(|w| w.contains("CPU")) {
            v.push(format!(
                "CPU: {side} used {total:.0} % of a core; the result may show the host's limit, not the network's"
            ));
        }
    }
    v
}

fn compare_table(h: &mut String, inputs: &[Input]) {
    let mut rows: Vec<(&str, Vec<String>)> = vec![
        ("Protocol", vec![]),
        ("Streams", vec![]),
        ("Duration (s)", vec![]),
        ("Sender rate", vec![]),
        ("Receiver rate", vec![]),
        ("Retransmits", vec![]),
        ("Jitter / loss", vec![]),
        ("Latency p50 / p99", vec![]),
        ("Warnings", vec![]),
    ];
    for i in inputs {
        let r = &i.report;
        let fwd = end_rows(r).into_iter().next();
        let sent = fwd.and_then(|f| f.1);
        let recv = fwd.and_then(|f| f.2);
        let udp = recv.and_then(|s| s.udp_recv);
        let lat = first_latency(r);
        let vals = [
            r.start.test_start.protocol.clone(),
            r.start.test_start.num_streams.to_string(),
            sent.or(recv)
                .map_or("-".into(), |s| format!("{:.2}", s.seconds)),
            sent.map_or("-".into(), |s| rate(s.bits_per_second)),
            recv.map_or("-".into(), |s| rate(s.bits_per_second)),
            sent.and_then(|s| s.retransmits)
                .map_or("-".into(), |n| n.to_string()),
            udp.map_or("-".into(), |u| {
                format!("{:.3} ms / {:.2} %", u.jitter_ms, u.lost_percent)
            }),
            lat.map_or("-".into(), |(what, s)| {
                format!("{what}: {:.3} / {:.3} ms", s.p50_ms, s.p99_ms)
            }),
            warnings(r).len().to_string(),
        ];
        for (row, v) in rows.iter_mut().zip(vals) {
            row.1.push(v);
        }
    }
    h.push_str("<div class=\"scroll\"><table>\n<tr><th></th>");
    for i in inputs {
        let _ = write!(h, "<th>{}</th>", esc(&i.name));
    }
    h.push_str("</tr>\n");
    for (name, vals) in rows {
        let _ = write!(h, "<tr><th>{name}</th>");
        for v in vals {
            let _ = write!(h, "<td class=\"num\">{}</td>", esc(&v));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table></div>\n");
}

fn first_latency(r: &Report) -> Option<(&'static str, crate::latency::LatencyStats)> {
    let n = &r.end.netmeter;
    if let Some(b) = &n.bounceback {
        return Some(("RTT", b.rtt));
    }
    if let Some(w) = &n.working_load
        && let Some(s) = w.loaded_rtt
    {
        return Some(("loaded RTT", s));
    }
    if let Some(c) = &n.connect_only {
        return Some(("connect", c.connect));
    }
    let t = n.trip_times.as_ref()?;
    t.client_to_server
        .as_ref()
        .or(t.server_to_client.as_ref())
        .and_then(|o| o.owd)
        .map(|s| ("one-way", s))
}

/// Why the report was not written.
#[derive(Debug, thiserror::Error)]
pub enum HtmlError {
    #[error("cannot draw the charts: {0}")]
    Draw(plot::DrawError),
    #[error("cannot write {}: {err}", path.display())]
    Write {
        path: std::path::PathBuf,
        err: std::io::Error,
    },
}

/// Write the report of these inputs to `path`, whole or not at all.
pub fn write_file(inputs: &[Input], path: &std::path::Path) -> Result<(), HtmlError> {
    let html = render(inputs).map_err(HtmlError::Draw)?;
    plot::write_whole(path, html.as_bytes()).map_err(|err| HtmlError::Write {
        path: path.to_path_buf(),
        err,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::input::parse_result as read_document;

    fn input(name: &str, text: &str) -> Input {
        Input {
            name: name.into(),
            path: format!("{name}.json").into(),
            report: read_document(text).unwrap(),
        }
    }

    #[test]
    fn one_result_has_every_section_inline() {
        let h = render(&[input(
            "udp <bidir>",
            include_str!("testdata/udp_bidir.json"),
        )])
        .unwrap();
        for id in [
            "result-1",
            "settings-1",
            "hosts-1",
            "summary-1",
            "warnings-1",
            "plots-1",
        ] {
            assert!(h.contains(&format!("id=\"{id}\"")), "{id}");
        }
        assert!(!h.contains("id=\"compare\""));
        assert!(h.contains("<h2>udp &lt;bidir&gt;</h2>"));
        // Self-contained: no script, no stylesheet or image fetched.
        for no in ["<script", "<link", "<img", "src=", "@import", "url("] {
            assert!(!h.contains(no), "{no}");
        }
        let charts = plot::charts(&[input("x", include_str!("testdata/udp_bidir.json"))]);
        assert_eq!(h.matches("<figure class=\"chart\"").count(), charts.len());
        assert_eq!(h.matches("<svg ").count(), charts.len());
        assert!(!h.contains("<?xml"));
        // The summary: both directions, named as in the settings, the receiver's loss.
        assert!(h.contains("<td>client → server</td>") && h.contains("<td>server → client</td>"));
        assert!(h.contains(
            "<tr><th>Direction</th><td>client → server and server → client (--bidir)</td></tr>"
        ));
        assert!(h.contains("Lost / total"));
        assert!(h.contains("name=\"viewport\""));
    }

    /// The page said "normal (client sends)" in the settings and "forward" in the
    /// summary, showed `-l 1400` as "1.37 KBytes", and said of an iperf3 result that no
    /// host limits, buffer or clock problems were recorded, which iperf3 cannot record.
    #[test]
    fn settings_and_summary_name_things_alike_and_iperf3_silence_is_explained() {
        let mut i = input("iperf3", include_str!("testdata/iperf3_322_tcp.json"));
        i.report.start.test_start.blksize = 1400;
        let h = render(std::slice::from_ref(&i)).unwrap();
        assert!(
            h.contains("<tr><th>Direction</th><td>client → server (the client sends)</td></tr>")
        );
        assert!(h.contains("<tr><td>client → server</td>"), "summary row");
        assert!(!h.contains("forward") && !h.contains("normal ("));
        assert!(h.contains("<tr><th>Block size</th><td>1400 bytes</td></tr>"));
        let warn = &h[h.find("id=\"warnings-1\"").unwrap()..h.find("id=\"plots-1\"").unwrap()];
        assert!(!warn.contains("were recorded"), "{warn}");
        assert!(warn.contains("does not record host limits"), "{warn}");
        assert!(warn.contains(&i.report.start.version), "{warn}");
        // netmeter's own result: nothing recorded means nothing found.
        let mut r = input("nm", include_str!("testdata/tcp_reverse.json"));
        r.report.end.netmeter.warnings.clear();
        r.report.start.netmeter.warnings.clear();
        r.report.end.cpu_utilization_percent = Default::default();
        let h = render(&[r]).unwrap();
        assert!(h.contains("None: no host limits, buffer or clock problems were recorded."));
        assert!(h.contains("server → client (-R: the server sends)"));
        assert!(h.contains("<tr><td>server → client</td>"));
        assert!(h.contains("<td>128 KBytes (131072 bytes)</td>"));
    }

    #[test]
    fn several_results_get_a_side_by_side_table() {
        let h = render(&[
            input("tcp", include_str!("testdata/tcp.json")),
            input("iperf3", include_str!("testdata/iperf3_322_tcp.json")),
        ])
        .unwrap();
        let compare = &h[h.find("id=\"compare\"").unwrap()..h.find("id=\"result-1\"").unwrap()];
        assert!(compare.contains("<th>tcp</th><th>iperf3</th>"));
        assert!(compare.contains("<tr><th>Sender rate</th>"));
        assert!(compare.contains("data-kind=\"throughput\""));
        assert!(h.contains("id=\"result-2\""));
    }

    #[test]
    fn warnings_are_listed_and_cpu_bound_iperf3_results_get_one() {
        let mut i = input("w", include_str!("testdata/iperf3_322_tcp.json"));
        assert!(warnings(&i.report).is_empty());
        i.report.end.cpu_utilization_percent.remote_total = 97.0;
        let w = warnings(&i.report);
        assert_eq!(w.len(), 1);
        assert!(w[0].starts_with("CPU: the peer used 97 %"), "{}", w[0]);
        i.report.end.netmeter.warnings = vec!["socket buffer <small>".into()];
        let h = render(&[i]).unwrap();
        assert!(h.contains("<li>socket buffer &lt;small&gt;</li>"));
    }
}
