//! A multicast receiver's and sender's lines, pure: the accounting's rows in, text (in
//! iperf3's UDP receiver layout, one stream per sender) or one JSON object per ended
//! sender out. Kept beside the accounting rather than in `report` because its types are
//! the accounting's, and `report` does not import the engine.

use super::account::{EndReason, Event, Row, Summary};
use crate::units::{Format, format_bytes, format_rate};
use serde::Serialize;
use std::net::{IpAddr, SocketAddr};

/// The column header, printed once before the first row.
pub const HEADER: &str = "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams   Out-of-order";

fn row_text(r: &Row, fmt: Format) -> String {
    let pct = if r.total() > 0 {
        r.lost as f64 * 100.0 / r.total() as f64
    } else {
        0.0
    };
    format!(
        "[{:>3}] {:>6.2}-{:<6.2} sec  {}  {}  {:.3} ms  {}/{} ({:.2}%)  {}",
        r.id,
        r.start_s,
        r.end_s,
        format_bytes(r.bytes as f64, fmt),
        format_rate(r.bits_per_second(), fmt),
        r.jitter_s * 1e3,
        r.lost,
        r.total(),
        pct,
        r.out_of_order,
    )
}

fn reason_text(r: EndReason) -> &'static str {
    match r {
        EndReason::Fin => "its FIN arrived",
        EndReason::Idle => "it went silent",
        EndReason::Stopped => "this receiver stopped",
    }
}

/// The text lines for one event at the receiver of `group`.
pub fn event_text(group: IpAddr, ev: &Event, fmt: Format) -> Vec<String> {
    match ev {
        Event::Started { id, source } => vec![format!(
            "[{id:>3}] multicast {group} from {} port {}",
            source.ip(),
            source.port()
        )],
        Event::Interval { row, .. } => vec![row_text(row, fmt)],
        Event::Ended(s) => {
            let mut v = vec![format!(
                "[{:>3}] sender {} ended ({}): summary",
                s.sum.id,
                s.source,
                reason_text(s.reason)
            )];
            v.push(format!("{}  receiver", row_text(&s.sum, fmt)));
            if s.owd.count > 0 {
                v.push(format!(
                    "[{:>3}] one-way delay min/avg/max {:.3}/{:.3}/{:.3} ms ({} datagrams; sender's and receiver's clocks)",
                    s.sum.id,
                    s.owd.min_s * 1e3,
                    s.owd.mean_s * 1e3,
                    s.owd.max_s * 1e3,
                    s.owd.count
                ));
            }
            v
        }
    }
}

/// What a receiver that heard no sender says when it stops.
pub fn nobody_text(group: IpAddr, source: Option<IpAddr>, port: u16) -> String {
    match source {
        Some(s) => format!(
            "multicast {group} port {port}: no datagram from source {s} (source-specific join); nothing to report"
        ),
        None => {
            format!("multicast {group} port {port}: no datagram from any sender; nothing to report")
        }
    }
}

/// `-J`: one object per ended sender, a line each (JSON Lines).
#[derive(Debug, Serialize)]
pub struct SenderJson<'a> {
    pub multicast: &'a str,
    pub group: IpAddr,
    pub port: u16,
    pub source_host: IpAddr,
    pub source_port: u16,
    #[serde(flatten)]
    pub summary: &'a Summary,
}

/// `-J` when no sender was heard: the reason, never a missing object.
#[derive(Debug, Serialize)]
pub struct NobodyJson {
    pub multicast: &'static str,
    pub group: IpAddr,
    pub port: u16,
    pub ssm_source: Option<IpAddr>,
    pub error: String,
}

/// The JSON line for an ended sender.
pub fn summary_json(group: IpAddr, port: u16, s: &Summary) -> String {
    let src: SocketAddr = s.source;
    serde_json::to_string(&SenderJson {
        multicast: "receiver",
        group,
        port,
        source_host: src.ip(),
        source_port: src.port(),
        summary: s,
    })
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::multicast::account::Owd;

    fn summary() -> Summary {
        let sum = Row {
            id: 2,
            start_s: 0.0,
            end_s: 2.0,
            bytes: 2_500_000,
            packets: 1800,
            lost: 200,
            out_of_order: 3,
            jitter_s: 0.000125,
        };
        Summary {
            source: "10.0.0.1:40000".parse().unwrap(),
            reason: EndReason::Fin,
            sum,
            owd: Owd {
                min_s: 0.001,
                mean_s: 0.002,
                max_s: 0.004,
                count: 1800,
            },
            intervals: vec![sum],
        }
    }

    #[test]
    fn the_summary_reads_as_a_udp_receiver_row() {
        let lines = event_text(
            "239.1.1.1".parse().unwrap(),
            &Event::Ended(summary()),
            Format::Auto,
        );
        assert_eq!(
            lines[0],
            "[  2] sender 10.0.0.1:40000 ended (its FIN arrived): summary"
        );
        assert_eq!(
            lines[1],
            "[  2]   0.00-2.00   sec  2.38 MBytes  10.0 Mbits/sec  0.125 ms  200/2000 (10.00%)  3  receiver"
        );
        assert!(lines[2].contains("1.000/2.000/4.000 ms"), "{}", lines[2]);
    }

    #[test]
    fn json_carries_the_figures_and_the_reason() {
        let j: serde_json::Value = serde_json::from_str(&summary_json(
            "239.1.1.1".parse().unwrap(),
            5001,
            &summary(),
        ))
        .unwrap();
        assert_eq!(j["sum"]["lost"], 200);
        assert_eq!(j["reason"], "fin");
        assert_eq!(j["source_host"], "10.0.0.1");
        assert_eq!(j["intervals"].as_array().unwrap().len(), 1);
        let n = nobody_text(
            "232.1.1.1".parse().unwrap(),
            Some("10.0.0.9".parse().unwrap()),
            5001,
        );
        assert!(n.contains("no datagram from source 10.0.0.9"));
    }
}
