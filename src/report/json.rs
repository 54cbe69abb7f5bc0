//! iperf3's `-J` document and `--json-stream` events, serialized from the typed report.

use super::Report;
use serde::Serialize;

/// The whole document, pretty-printed as iperf3 does at the end of a test. Numbers
/// follow iperf3's cJSON: whole values as integers (`"start": 0`, `"omit": 0`).
pub fn document(r: &Report) -> String {
    let rendered = match (&r.error, r.start.timestamp.time.is_empty()) {
        // Failed before the test started (e.g. connection refused): iperf3 3.22 writes
        // only what it knows, not a start padded with empty values.
        (Some(error), true) => to_string(&EarlyError::of(r, error), true),
        _ => to_string(r, true),
    };
    let mut s = rendered.unwrap_or_else(|e| {
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
    let mut s = to_string(&Event { event: name, data }, false)
        .unwrap_or_else(|e| format!("{{\"event\":\"error\",\"data\":\"{e}\"}}"));
    s.push('\n');
    s
}

/// A server's log line outside text mode: one JSON object per line (its keys in
/// serde_json's sorted order, as netmeter has always written it).
pub fn server_log(msg: &str) -> String {
    format!(
        "{}\n",
        serde_json::json!({"event": "server_log", "data": msg})
    )
}

/// The document of a test that failed before it started, as iperf3 3.22 writes it:
/// `start` with `connected`, `version`, `system_info`; empty `intervals` and `end`.
#[derive(Serialize)]
struct EarlyError<'a> {
    start: EarlyStart<'a>,
    intervals: [(); 0],
    end: std::collections::BTreeMap<(), ()>,
    error: &'a str,
}

#[derive(Serialize)]
struct EarlyStart<'a> {
    connected: &'a [super::Connected],
    version: &'a str,
    system_info: &'a str,
}

impl<'a> EarlyError<'a> {
    fn of(r: &'a Report, error: &'a str) -> EarlyError<'a> {
        EarlyError {
            start: EarlyStart {
                connected: &r.start.connected,
                version: &r.start.version,
                system_info: &r.start.system_info,
            },
            intervals: [],
            end: Default::default(),
            error,
        }
    }
}

fn to_string<T: Serialize>(v: &T, pretty: bool) -> Result<String, String> {
    let bytes = crate::wire::to_cjson_vec(v, pretty).map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|e| e.to_string())
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

    /// The types iperf3 3.22 writes: whole numbers as integers (`start`, `omit`,
    /// `duration`, `interval`...), fractions as floats; its `gso`/`gro` and sender
    /// `reorder` keys are there.
    #[test]
    fn numbers_and_keys_as_iperf3_3_22_writes_them() {
        use crate::report::{EndSide, EndStream, SumInterval, TestStart};
        let mut r = Report::default();
        r.start.timestamp.time = "Sun, 22 Nov 2026 21:00:00 GMT".into();
        r.start.test_start = TestStart {
            protocol: "UDP".into(),
            omit: 0.0,
            duration: 10.0,
            interval: 1.0,
            gso: 1,
            ..TestStart::default()
        };
        r.intervals.push(Interval {
            sum: SumInterval {
                start: 0.0,
                end: 1.000123,
                seconds: 1.000123,
                bits_per_second: 1e9,
                ..SumInterval::default()
            },
            ..Interval::default()
        });
        r.end.streams.push(EndStream {
            sender: Some(EndSide {
                end: 10.0,
                seconds: 10.0,
                retransmits: Some(3),
                reorder: Some(7),
                sender: true,
                ..EndSide::default()
            }),
            ..EndStream::default()
        });
        let doc = document(&r);
        for want in [
            r#""omit": 0,"#,
            r#""duration": 10,"#,
            r#""interval": 1,"#,
            r#""gso": 1,"#,
            r#""gro": 0"#,
            r#""start": 0,"#,
            r#""end": 1.000123,"#,
            r#""bits_per_second": 1000000000,"#,
            r#""retransmits": 3,"#,
            r#""reorder": 7,"#,
        ] {
            assert!(doc.contains(want), "{want} not in {doc}");
        }
        assert!(!doc.contains(".0,") && !doc.contains(".0\n"), "{doc}");
        let back: Report = serde_json::from_str(&doc).unwrap();
        assert_eq!(back, r);
    }

    /// iperf 2's figures: keys directly in the rows' `netmeter` objects (beside a UDP
    /// receiver's flattened extras) and under `end.netmeter.iperf2_figures`, read back
    /// into the same values.
    #[test]
    fn iperf2_figure_keys_and_read_back() {
        use crate::report::{
            Iperf2End, Iperf2EndStream, Iperf2Figures, StreamExt, SumInterval, UdpExtra,
            UdpRecvFigures,
        };
        let rx = Iperf2Figures {
            packets_per_second: Some(961.5),
            in_progress_bytes: Some(12_500.25),
            in_progress_packets: Some(9.6),
            net_power: Some(1.5e9),
            reads: Some(40),
            ..Iperf2Figures::default()
        };
        let tx = Iperf2Figures {
            writes: Some(7),
            write_errors: Some(0),
            read_bins: Some([1, 2, 3, 4, 5, 6, 7, 8]),
            clock_sync_errors: Some(1),
            ..Iperf2Figures::default()
        };
        let mut r = Report::default();
        r.intervals.push(Interval {
            streams: vec![StreamInterval {
                socket: 5,
                udp_recv: Some(UdpRecvFigures {
                    packets: 10,
                    ..UdpRecvFigures::default()
                }),
                netmeter: Some(Box::new(StreamExt {
                    udp: Some(UdpExtra::default()),
                    iperf2: rx,
                    ..StreamExt::default()
                })),
                ..StreamInterval::default()
            }],
            sum: SumInterval {
                packets: Some(3),
                sender: true,
                netmeter: Some(Box::new(StreamExt {
                    iperf2: tx,
                    ..StreamExt::default()
                })),
                ..SumInterval::default()
            },
            ..Interval::default()
        });
        r.end.netmeter.iperf2_figures = Some(Iperf2End {
            streams: vec![Iperf2EndStream {
                socket: 5,
                sender: Some(tx),
                receiver: Some(rx),
            }],
            sum_received: Some(rx),
            ..Iperf2End::default()
        });
        let doc = document(&r);
        let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
        let row = &v["intervals"][0]["streams"][0]["netmeter"];
        assert_eq!(row["packets_per_second"], 961.5);
        assert_eq!(row["in_progress_bytes"], 12_500.25);
        assert_eq!(row["reads"], 40);
        assert_eq!(row["out_of_order"], 0);
        assert!(row.get("writes").is_none());
        let sum = &v["intervals"][0]["sum"]["netmeter"];
        assert_eq!(
            sum["read_bins"],
            serde_json::json!([1, 2, 3, 4, 5, 6, 7, 8])
        );
        assert_eq!(sum["clock_sync_errors"], 1);
        let end = &v["end"]["netmeter"]["iperf2_figures"];
        assert_eq!(end["streams"][0]["sender"]["writes"], 7);
        assert_eq!(end["sum_received"]["net_power"], 1.5e9);
        assert!(end.get("sum_sent").is_none());
        assert_eq!(Report::from_document(&doc).unwrap(), r);
    }

    /// A test that failed before it started (connection refused): iperf3 3.22's short
    /// document, not a start padded with empty values.
    #[test]
    fn early_error_document() {
        let mut r = Report::default();
        r.start.version = "netmeter 0.1.0".into();
        r.start.system_info = "Linux h 6.1 x86_64".into();
        r.error = Some("unable to connect to 127.0.0.1:9: connection refused".into());
        assert_eq!(
            document(&r),
            r#"{
  "start": {
    "connected": [],
    "version": "netmeter 0.1.0",
    "system_info": "Linux h 6.1 x86_64"
  },
  "intervals": [],
  "end": {},
  "error": "unable to connect to 127.0.0.1:9: connection refused"
}
"#
        );
        // Once the test started, the error goes into the whole document.
        r.start.timestamp.time = "Sun, 22 Nov 2026 21:00:00 GMT".into();
        let v: serde_json::Value = serde_json::from_str(&document(&r)).unwrap();
        assert!(v["start"]["test_start"].is_object() && v["error"].is_string());
    }

    #[test]
    fn stream_event_shape() {
        let line = event("interval", &serde_json::json!({"a": 1}));
        assert_eq!(line, "{\"event\":\"interval\",\"data\":{\"a\":1}}\n");
    }
}
