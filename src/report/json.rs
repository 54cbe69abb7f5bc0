//! iperf3's `-J` document and `--json-stream` events, serialized from the typed report.

use super::Report;
use serde::Serialize;

/// The whole document, pretty-printed as iperf3 does at the end of a test.
pub fn document(r: &Report) -> String {
    let mut s = serde_json::to_string_pretty(r).unwrap_or_else(|e| {
        // Only a non-finite float could fail here; say so instead of printing garbage.
        format!("{{\"error\": \"netmeter could not serialize its report: {e}\"}}")
    });
    s.push('\n');
    s
}

/// One `--json-stream` line: `{"event": E, "data": X}`.
pub fn event<T: Serialize>(name: &str, data: &T) -> String {
    #[derive(Serialize)]
    struct Event<'a, T> {
        event: &'a str,
        data: &'a T,
    }
    let mut s = serde_json::to_string(&Event { event: name, data })
        .unwrap_or_else(|e| format!("{{\"event\":\"error\",\"data\":\"{e}\"}}"));
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Interval, StreamInterval, TcpFigures};

    #[test]
    fn iperf3_key_names_and_flattening() {
        let mut r = Report::default();
        r.intervals.push(Interval {
            streams: vec![StreamInterval {
                socket: 5,
                bytes: 10,
                tcp: Some(TcpFigures {
                    retransmits: 1,
                    snd_cwnd: 2,
                    ..TcpFigures::default()
                }),
                sender: true,
                ..StreamInterval::default()
            }],
            ..Interval::default()
        });
        let v: serde_json::Value = serde_json::from_str(&document(&r)).unwrap();
        let s = &v["intervals"][0]["streams"][0];
        assert_eq!(s["retransmits"], 1);
        assert_eq!(s["snd_cwnd"], 2);
        assert_eq!(s["sender"], true);
        assert!(s.get("jitter_ms").is_none());
        assert!(v["end"]["cpu_utilization_percent"]["host_total"].is_number());
        // The document reads back into the same types (for later `compare` tools).
        let back: Report = serde_json::from_str(&document(&r)).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn stream_event_shape() {
        let line = event("interval", &serde_json::json!({"a": 1}));
        assert_eq!(line, "{\"event\":\"interval\",\"data\":{\"a\":1}}\n");
    }
}
