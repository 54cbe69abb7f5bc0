//! The shape of iperf 2 output: each line with its numbers masked, for comparing
//! netmeter's iperf 2 layouts with iperf 2's own output (the snapshot tests here and
//! the end-to-end test `tests/integration/iperf2_ui.rs` use it).

/// Lines of iperf 2's output built from facts a netmeter report does not hold, and the
/// parts of the connection line netmeter leaves out for the same reason (docs/iperf2.md).
pub const NOT_RENDERED: &[&str] = &[
    // A server's congestion control default (its banner is printed before any socket
    // it would read it from). A client's is printed (`start.netmeter.tcp_congestion`).
    "TCP congestion control default",
    // iperf 2's advice about --tcp-write-prefetch, an option netmeter does not have.
    "Warn: Send side bloat",
    // Histogram lines (`BB8(f)-PDF`, `T8-PDF`): not rendered in iperf 2's layout yet.
    "-PDF:",
    // The isochronous sender's schedule errors: netmeter keeps slips, not the errors.
    "Isoch schedule errors",
];

fn drop_parts(line: &str) -> String {
    let mut l = line.replace("%lo ", " ");
    // (icwnd/mss/irtt=…), (ct=… ms), (peer 2.2.1-rc): TCP_INFO at connect, the connect
    // time and the peer's version, which the report does not carry.
    for open in ["(icwnd", "(ct=", "(peer "] {
        while let Some(a) = l.find(open) {
            let b = l[a..].find(')').map_or(l.len(), |b| a + b + 1);
            let end = if l[b..].starts_with(' ') { b + 1 } else { b };
            l.replace_range(a..end, "");
        }
    }
    // A part dropped at the line's end leaves the space before it.
    l.trim_end().to_string()
}

/// Numbers (with the spaces that pad them) become `#`, units lose their prefix, and
/// `NA`/`NAN`/`nan` count as numbers: the shape of the line is left.
pub fn mask(line: &str) -> String {
    let l = line
        .replace("-nan", "#")
        .replace("NAN", "#")
        .replace("NA", "#")
        .replace("nan", "#");
    let mut out = String::new();
    let b = l.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if c == ' ' {
            let j = b[i..]
                .iter()
                .position(|&x| x != b' ')
                .map_or(b.len(), |k| i + k);
            if j < b.len() && (b[j].is_ascii_digit() || b[j] == b'#') {
                out.push(' ');
                i = j;
                continue;
            }
            out.push_str(&l[i..j]);
            i = j;
        } else if c.is_ascii_digit() {
            let mut j = i;
            while j < b.len() && (b[j].is_ascii_digit() || b[j] == b'.') {
                j += 1;
            }
            if j + 1 < b.len() && b[j] == b'e' && (b[j + 1] == b'-' || b[j + 1] == b'+') {
                j += 2;
                while j < b.len() && b[j].is_ascii_digit() {
                    j += 1;
                }
            }
            out.push('#');
            i = j;
        } else {
            out.push(c);
            i += 1;
        }
    }
    // The retry count and the congestion window run together when the window outgrows
    // its width (iperf 2's own `%4u%4dK` prints 0 and 1151K as `01151K`).
    out = out.replace("# #K/(", "#K/(");
    // iperf 2's UDP client ends its CSV with `-nan,0,-1,-0.000`: a sign is no shape.
    out = out.replace(",-#", ",#");
    for p in ["K", "M", "G", "T"] {
        out = out
            .replace(&format!("{p}Byte"), "Byte")
            .replace(&format!("{p}bit"), "bit");
    }
    out
}

/// The masked lines of `text` in order, a run of lines of the same shape once, without
/// the lines in [`NOT_RENDERED`].
pub fn shapes(text: &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for l in text.lines() {
        if NOT_RENDERED.iter().any(|p| l.contains(p)) {
            continue;
        }
        let mut m = mask(&drop_parts(l));
        // The kernel's algorithm is the host's, not the layout's.
        if let Some(at) = m.find("TCP congestion control using ") {
            m.replace_range(at + "TCP congestion control using ".len().., "#");
        }
        // iperf 2 pads a small count after `=` (`Tx= 500 Byte`, `Tx=1.46 KByte`): how
        // many spaces depends on the value, not on the layout.
        while m.contains("= #") {
            m = m.replace("= #", "=#");
        }
        if v.last() != Some(&m) {
            v.push(m);
        }
    }
    v
}
