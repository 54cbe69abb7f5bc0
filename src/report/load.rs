//! Reading a saved `-J` document back into the [`Report`](super::Report) types.
//!
//! Most types deserialize with their derived `Deserialize`; the `start` and `end`
//! objects default what is missing (`#[serde(default)]`), so an iperf3 document, which
//! has no `netmeter` keys and a few others fewer, loads into the same types (tested on
//! iperf3 3.22's TCP and UDP `--bidir` documents). Interval rows cannot: a UDP
//! receiver's `packets` belongs to its receive figures (`jitter_ms`, `lost_packets`,
//! `packets`, `lost_percent`, flattened), a sender's to the row itself, and serde's
//! flattening cannot tell them apart. The row is read into a plain shape first and
//! sorted out here: receive figures are present exactly when `jitter_ms` is.

use super::{StreamExt, StreamInterval, SumInterval, TcpFigures, UdpRecvFigures};
use serde::Deserialize;

/// The keys a UDP receiver's row carries beside the common ones.
#[derive(Deserialize)]
pub(super) struct RecvKeys {
    jitter_ms: Option<f64>,
    #[serde(default)]
    lost_packets: u64,
    packets: Option<u64>,
    #[serde(default)]
    lost_percent: f64,
}

impl RecvKeys {
    /// (receive figures, the row's own `packets`).
    fn split(self) -> (Option<UdpRecvFigures>, Option<u64>) {
        match self.jitter_ms {
            Some(jitter_ms) => (
                Some(UdpRecvFigures {
                    jitter_ms,
                    lost_packets: self.lost_packets,
                    packets: self.packets.unwrap_or(0),
                    lost_percent: self.lost_percent,
                }),
                None,
            ),
            None => (None, self.packets),
        }
    }
}

/// `intervals[].streams[]` as written.
#[derive(Deserialize)]
pub(super) struct StreamIntervalDoc {
    socket: i64,
    start: f64,
    end: f64,
    seconds: f64,
    bytes: u64,
    bits_per_second: f64,
    #[serde(flatten)]
    tcp: Option<TcpFigures>,
    #[serde(flatten)]
    recv: RecvKeys,
    #[serde(default)]
    omitted: bool,
    #[serde(default)]
    sender: bool,
    netmeter: Option<StreamExt>,
}

impl From<StreamIntervalDoc> for StreamInterval {
    fn from(d: StreamIntervalDoc) -> StreamInterval {
        let (udp_recv, packets) = d.recv.split();
        StreamInterval {
            socket: d.socket,
            start: d.start,
            end: d.end,
            seconds: d.seconds,
            bytes: d.bytes,
            bits_per_second: d.bits_per_second,
            tcp: d.tcp,
            udp_recv,
            packets,
            omitted: d.omitted,
            sender: d.sender,
            netmeter: d.netmeter.map(Box::new),
        }
    }
}

/// `intervals[].sum` (and `sum_bidir_reverse`) as written.
#[derive(Deserialize)]
pub(super) struct SumIntervalDoc {
    start: f64,
    end: f64,
    seconds: f64,
    bytes: u64,
    bits_per_second: f64,
    retransmits: Option<u64>,
    #[serde(flatten)]
    recv: RecvKeys,
    #[serde(default)]
    omitted: bool,
    #[serde(default)]
    sender: bool,
    netmeter: Option<StreamExt>,
}

impl From<SumIntervalDoc> for SumInterval {
    fn from(d: SumIntervalDoc) -> SumInterval {
        let (udp_recv, packets) = d.recv.split();
        SumInterval {
            start: d.start,
            end: d.end,
            seconds: d.seconds,
            bytes: d.bytes,
            bits_per_second: d.bits_per_second,
            retransmits: d.retransmits,
            udp_recv,
            packets,
            omitted: d.omitted,
            sender: d.sender,
            netmeter: d.netmeter.map(Box::new),
        }
    }
}

impl super::Report {
    /// Read a saved `-J` document. What the document does not say about this side's
    /// roles ([`super::LocalRoles`]) is inferred: which streams it sent on from the
    /// interval rows (`sender` per socket; without intervals, the client sends unless
    /// the test was reversed), and the Retr column from the senders' retransmit counts.
    ///
    /// A document the typed structs refuse is read again through a `serde_json::Value`,
    /// where a repeated key keeps its last value: iperf3 3.12 writes `sock_bufsize`,
    /// `sndbuf_actual` and `rcvbuf_actual` into `start` once per TCP stream
    /// (`iperf_tcp_connect`; later versions check first), and the typed structs refuse a
    /// duplicate field. (Only then: a `Value` of a 10,000-interval document takes
    /// several times the memory of the typed `Report`.)
    pub fn from_document(json: &str) -> serde_json::Result<super::Report> {
        let mut r: super::Report = match serde_json::from_str(json) {
            Ok(r) => r,
            Err(_) => serde_json::from_value(serde_json::from_str(json)?)?,
        };
        r.end.local = roles_of(&r);
        Ok(r)
    }
}

pub(super) fn roles_of(r: &super::Report) -> super::LocalRoles {
    let client = r.start.connecting_to.is_some();
    let default_sender = client == (r.start.test_start.reverse == 0);
    let rows = r.intervals.last().map(|iv| &iv.streams[..]).unwrap_or(&[]);
    let senders = r
        .end
        .streams
        .iter()
        .map(|s| {
            let socket = s
                .sender
                .as_ref()
                .or(s.receiver.as_ref())
                .map(|x| x.socket)
                .or(s.udp.as_ref().map(|u| u.socket));
            match s.udp.as_ref() {
                Some(u) => u.sender,
                None => rows
                    .iter()
                    .find(|row| Some(row.socket) == socket)
                    .map_or(default_sender, |row| row.sender),
            }
        })
        .collect();
    let sender_retransmits = r.start.test_start.protocol == "TCP"
        && r.end
            .streams
            .iter()
            .any(|s| s.sender.as_ref().is_some_and(|x| x.retransmits.is_some()));
    super::LocalRoles {
        senders,
        sender_retransmits,
    }
}
