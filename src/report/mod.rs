//! Everything a test found out, as typed values, and the renderers that print it.
//!
//! The engine fills a [`Report`] (start facts, one [`Interval`] per tick, the [`End`]
//! summary); renderers only read it. The field names and units of these types are
//! iperf3's `-J` schema (`start` / `intervals` / `end`), so serializing them *is* the
//! JSON output; netmeter's additions sit under keys named `netmeter`. Text and JSON are
//! both produced from these same values, which is what keeps them consistent.

pub mod advice;
pub mod build;
pub mod connect;
pub mod csv;
pub mod escape;
pub mod html;
pub mod input;
pub mod iperf2;
pub mod json;
mod load;
pub mod load_stream;
pub mod observe;
pub mod plot;
pub mod profile;
pub mod text;

#[cfg(test)]
mod snapshots;

use crate::clocksync::ClockEstimate;
use crate::latency::{LatencyStats, OwdSummary};
use serde::{Deserialize, Serialize};

/// A connected data stream, for `start.connected`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Connected {
    pub socket: i64,
    pub local_host: String,
    pub local_port: u16,
    pub remote_host: String,
    pub remote_port: u16,
}

/// `start.timestamp`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct Timestamp {
    pub time: String,
    pub timesecs: u64,
    pub timemillisecs: u64,
}

/// `start.connecting_to` / `start.accepted_connection`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HostPort {
    pub host: String,
    pub port: u16,
}

/// `start.test_start`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct TestStart {
    pub protocol: String,
    pub num_streams: u32,
    pub blksize: u64,
    pub omit: f64,
    pub duration: f64,
    pub bytes: u64,
    pub blocks: u64,
    pub reverse: u8,
    pub tos: u8,
    pub target_bitrate: u64,
    pub bidir: u8,
    pub fqrate: u64,
    pub interval: f64,
    /// 1 when this side's UDP streams send with segmentation offload (UDP_SEGMENT), as
    /// iperf3 3.22 records its own `--gsro` sends.
    #[serde(default)]
    pub gso: u8,
    /// 1 when this side's UDP streams receive with UDP_GRO.
    #[serde(default)]
    pub gro: u8,
}

/// netmeter's additions to `start`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct StartExt {
    /// "netmeter" when the peer answered the extension request, else "iperf3".
    pub peer: String,
    /// Extension features in use for this test.
    pub features: Vec<String>,
    /// How data moves on this side (e.g. "tcp write", "udp sendmmsg").
    #[serde(default)]
    pub data_path: String,
    /// Host-side warnings (undersized buffers, CPU-bound sides).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// `--trip-times`: the estimated clock offset (server − client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockEstimate>,
    /// `--txstart-time`: requested and actual start (client).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txstart: Option<profile::TxStart>,
    /// The congestion control of this side's first TCP stream at the start (iperf 2's
    /// `-e` header prints it; iperf3's JSON has only the end's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_congestion: Option<String>,
}

/// The `start` object.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct Start {
    pub connected: Vec<Connected>,
    pub version: String,
    pub system_info: String,
    pub timestamp: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connecting_to: Option<HostPort>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted_connection: Option<HostPort>,
    pub cookie: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_mss_default: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_mss: Option<u32>,
    pub target_bitrate: u64,
    pub fq_rate: u64,
    pub sock_bufsize: u64,
    pub sndbuf_actual: u64,
    pub rcvbuf_actual: u64,
    pub test_start: TestStart,
    pub netmeter: StartExt,
}

/// TCP_INFO figures of a sending TCP stream.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct TcpFigures {
    pub retransmits: u64,
    pub snd_cwnd: u64,
    pub snd_wnd: u64,
    /// Smoothed RTT, microseconds.
    pub rtt: u64,
    /// RTT variance, microseconds.
    pub rttvar: u64,
    pub pmtu: u64,
    /// Absent from some iperf3 documents (Debian's 3.12 writes no `reorder`): 0 when a
    /// loaded row lacks it; the other keys decide whether a row has TCP figures at all.
    #[serde(default)]
    pub reorder: u64,
}

/// Receive-side UDP figures of one interval or of the whole test.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct UdpRecvFigures {
    pub jitter_ms: f64,
    pub lost_packets: u64,
    pub packets: u64,
    pub lost_percent: f64,
}

/// One stream over one interval (an element of `intervals[].streams`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(from = "load::StreamIntervalDoc")]
pub struct StreamInterval {
    pub socket: i64,
    pub start: f64,
    pub end: f64,
    pub seconds: f64,
    pub bytes: u64,
    pub bits_per_second: f64,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpFigures>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub udp_recv: Option<UdpRecvFigures>,
    /// UDP datagrams sent in the interval (sender side).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets: Option<u64>,
    pub omitted: bool,
    pub sender: bool,
    /// netmeter: out-of-order and duplicate datagrams (UDP receiver), transactions and
    /// round-trip times (bounceback client), iperf 2's figures in this interval. Boxed:
    /// the extras are 944 bytes and rows loaded from iperf3's documents (and a plain
    /// TCP receiver's rows before issue 22) have none, and a report keeps a row per
    /// stream per interval (1120 bytes a row inline, 184 boxed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netmeter: Option<Box<StreamExt>>,
}

/// netmeter's per-stream interval extras.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct StreamExt {
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpExtra>,
    /// Completed request/response transactions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transactions: Option<u64>,
    /// Round-trip times of those transactions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt: Option<LatencyStats>,
    /// One-way delays (offset-corrected) of what this stream received (`--trip-times`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owd: Option<LatencyStats>,
    /// TCP sender state beyond iperf3's keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpExtra>,
    /// A TCP receiver's ECN counts, where the kernel has them (Linux 6.18+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_received_ecn: Option<TcpReceivedEcn>,
    /// `--connect-only`: completed short connections (client), or connections answered
    /// (server, `[SUM]` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections: Option<u64>,
    /// `--connect-only`: failed connection attempts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<u64>,
    /// `--connect-only`: `connect()` durations (the 3-way handshake).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect: Option<LatencyStats>,
    /// `--connect-only`: connect + request + response + close durations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transaction: Option<LatencyStats>,
    /// `--burst-size`/`--burst-period` sender: bursts completed in the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bursts: Option<profile::UnitsInterval>,
    /// `--isochronous` sender: frames completed in the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames: Option<profile::UnitsInterval>,
    /// `--isochronous` UDP receiver (netmeter peers): whole frames in the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames_received: Option<profile::FramesInterval>,
    /// iperf 2's figures (packets per second, inP, NetPwr, socket calls, clock-sync
    /// errors), each where it applies; its keys sit directly in this object.
    #[serde(flatten)]
    pub iperf2: Iperf2Figures,
}

/// The figures iperf 2 prints that iperf3 has no key for (issue 22), of one stream or a
/// direction's sum, over an interval (flattened into the row's `netmeter` object) or the
/// whole test (`end.netmeter.iperf2_figures`). Each is present only where it applies;
/// definitions and iperf 2's own columns in docs/json.md.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct Iperf2Figures {
    /// UDP: datagrams sent (sender) or received (receiver) per second (iperf 2's PPS).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets_per_second: Option<f64>,
    /// Receivers with one-way delays (`--trip-times`): bytes in progress on the path by
    /// Little's law, receive rate (bytes/s) × mean one-way delay (s) (iperf 2's inP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_progress_bytes: Option<f64>,
    /// UDP receivers with one-way delays: the same in datagrams, datagrams received per
    /// second × mean one-way delay (iperf 2's UDP `inP` column, "pkts").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_progress_packets: Option<f64>,
    /// Receivers with one-way delays: network power, receive rate (bits/s) ÷ mean
    /// one-way delay (s), as `netmeter.tcp.net_power` is for the RTT (iperf 2's NetPwr
    /// column is bytes/s ÷ s × 10⁻⁶: this value ÷ 8·10⁶).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net_power: Option<f64>,
    /// Senders: send calls that succeeded (iperf 2's Write).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writes: Option<u64>,
    /// Senders: send calls that failed (iperf 2's Err).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_errors: Option<u64>,
    /// Receivers: receive calls that returned data (iperf 2's Reads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reads: Option<u64>,
    /// TCP receivers: the reads by the share of the asked-for length they returned, in
    /// eighths (iperf 2's `Reads=Dist`, `n=b0:b1:...:b7`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_bins: Option<[u64; crate::stats::READ_BINS]>,
    /// Bounceback with the server's timestamps (`--trip-times` to an iperf 2 server):
    /// replies whose timestamps contradict their round trip, the clocks being out of
    /// sync by more than it (iperf 2's `bb_clocksync_error`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_sync_errors: Option<u64>,
}

impl Iperf2Figures {
    /// No figure applies.
    pub fn is_empty(&self) -> bool {
        *self == Iperf2Figures::default()
    }
}

/// `end.netmeter.iperf2_figures`: [`Iperf2Figures`] over the whole test, per stream (in
/// `end.streams` order) and per direction.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct Iperf2End {
    pub streams: Vec<Iperf2EndStream>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_sent: Option<Iperf2Figures>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_received: Option<Iperf2Figures>,
    /// `--bidir`: the other direction's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_sent_bidir_reverse: Option<Iperf2Figures>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_received_bidir_reverse: Option<Iperf2Figures>,
}

/// One stream's [`Iperf2Figures`] over the whole test: its sender's (this side's or, from
/// a netmeter peer's results, the peer's) and its receiver's.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct Iperf2EndStream {
    pub socket: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender: Option<Iperf2Figures>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receiver: Option<Iperf2Figures>,
}

/// A TCP sender's state at the end of an interval (from TCP_INFO) and the figures
/// derived from it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct TcpExtra {
    /// Unacknowledged bytes in flight (`tcpi_unacked × tcpi_snd_mss`).
    pub bytes_in_flight: u64,
    /// In-progress bytes by Little's law: interval throughput × smoothed RTT.
    pub inp_bytes: f64,
    /// Kleinrock's network power: throughput (bits/s) ÷ smoothed RTT (s).
    pub net_power: f64,
    /// Of the interval's retransmitted segments, those the receiver reported as
    /// duplicates (D-SACK, `tcpi_dsack_dups`): retransmissions that were not needed.
    #[serde(default)]
    pub spurious_retransmits: u64,
    /// ECN on this connection, where it was negotiated (docs/ecn.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<TcpEcn>,
}

/// A TCP sender's ECN feedback over an interval, from TCP_INFO: present only when the
/// handshake negotiated ECN (`tcpi_options`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct TcpEcn {
    /// Segments delivered in the interval (`tcpi_delivered`).
    pub delivered: u64,
    /// Of those, the ones the receiver echoed as CE-marked (`tcpi_delivered_ce`; with
    /// classic ECN the echo repeats until the sender's CWR, so an upper bound).
    pub ce_delivered: u64,
    pub ce_percent: f64,
    /// The AccECN counters' interval deltas (Linux 6.18+; absent before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accecn: Option<crate::stats::AccEcnFigures>,
}

impl TcpEcn {
    /// The figures from the interval's deltas.
    pub fn new(delivered: u64, ce_delivered: u64) -> TcpEcn {
        TcpEcn {
            delivered,
            ce_delivered,
            ce_percent: if delivered > 0 {
                100.0 * ce_delivered as f64 / delivered as f64
            } else {
                0.0
            },
            accecn: None,
        }
    }
}

/// A TCP receiver's ECN over an interval, from its TCP_INFO (Linux 6.18+, where the
/// connection negotiated ECN): the CE-marked segments and the bytes per codepoint it
/// received (`netmeter.tcp_received_ecn`, docs/ecn.md).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct TcpReceivedEcn {
    pub received_ce: u64,
    pub received_ect1_bytes: u64,
    pub received_ect0_bytes: u64,
    pub received_ce_bytes: u64,
}

/// netmeter's extras for a TCP sender's end summary (`end.streams[].sender.netmeter`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct TcpEndExtra {
    /// Of `retransmits`, the segments the receiver reported as duplicates (D-SACK):
    /// retransmissions that were not needed (reordering taken for loss, early timers).
    pub spurious_retransmits: u64,
}

/// netmeter's receiver extras for UDP.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct UdpExtra {
    pub out_of_order: u64,
    pub duplicates: u64,
    /// Datagrams per ECN codepoint in the interval, with their shares (docs/ecn.md);
    /// present where the receiver read the TOS byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<crate::stats::EcnFigures>,
}

/// Sum over the streams of one direction in one interval.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(from = "load::SumIntervalDoc")]
pub struct SumInterval {
    pub start: f64,
    pub end: f64,
    pub seconds: f64,
    pub bytes: u64,
    pub bits_per_second: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub udp_recv: Option<UdpRecvFigures>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets: Option<u64>,
    pub omitted: bool,
    pub sender: bool,
    /// netmeter: transactions and round-trip times of all streams (bounceback), iperf 2's
    /// figures summed. Boxed, as `StreamInterval::netmeter`: an iperf3 document's sums
    /// have none (128 bytes a sum, not 1064).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netmeter: Option<Box<StreamExt>>,
}

/// One element of `intervals`. The reverse sum is boxed: only `--bidir` has one, and a
/// report keeps an interval per `-i` for the whole test (read back from a large `-J`
/// file, the typed report should not outgrow the file).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Interval {
    pub streams: Vec<StreamInterval>,
    pub sum: SumInterval,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_bidir_reverse: Option<Box<SumInterval>>,
    /// The one-way delays this side received in the interval (all streams merged):
    /// `[upper bound µs, count]` per non-empty bucket, for the text's per-interval
    /// `--histograms`. Not in the JSON (the end object carries the whole test's).
    #[serde(skip)]
    pub owd_histogram_us: Vec<(f64, u64)>,
    /// The same for the latency of the isochronous frames this side completed in the
    /// interval (`--isochronous --trip-times` receivers; iperf 2's per-interval F8-PDF).
    #[serde(skip)]
    pub frame_latency_histogram_us: Vec<(f64, u64)>,
}

/// One side (sender or receiver) of a TCP stream's end summary.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct EndSide {
    pub socket: i64,
    pub start: f64,
    pub end: f64,
    pub seconds: f64,
    pub bytes: u64,
    pub bits_per_second: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// The sender's `tcpi_reord_seen` at its last sample (reordering events seen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_snd_cwnd: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_snd_wnd: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rtt: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_rtt: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_rtt: Option<u64>,
    pub sender: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netmeter: Option<TcpEndExtra>,
}

/// A UDP stream's merged end summary (`end.streams[].udp`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct EndUdp {
    pub socket: i64,
    pub start: f64,
    pub end: f64,
    pub seconds: f64,
    pub bytes: u64,
    pub bits_per_second: f64,
    pub jitter_ms: f64,
    pub lost_packets: u64,
    pub packets: u64,
    pub lost_percent: f64,
    pub out_of_order: u64,
    pub sender: bool,
    /// netmeter: what the receiver saw itself, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netmeter: Option<UdpEndExtra>,
}

/// netmeter's extra UDP end figures.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct UdpEndExtra {
    pub duplicates: u64,
    /// Bytes the receiver counted (iperf3's UDP summary shows the sender's bytes).
    pub receiver_bytes: u64,
    pub receiver_bits_per_second: f64,
    /// The receiver's measured duration, seconds.
    pub receiver_seconds: f64,
    /// Datagrams the receiver counted.
    pub receiver_packets: u64,
    /// The receiver's datagrams per ECN codepoint with their shares (docs/ecn.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<crate::stats::EcnFigures>,
    /// The transit (one-way delay, sender clock to receiver clock) an iperf 2 server
    /// reported in its server report datagram (`--iperf2` clients).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transit: Option<TransitSummary>,
}

/// One-way transit as an iperf 2 server reports it: count, min, mean, max and standard
/// deviation, no distribution (its `server_hdr_extension`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct TransitSummary {
    pub count: u64,
    pub min_ms: f64,
    pub mean_ms: f64,
    pub max_ms: f64,
    pub stdev_ms: f64,
}

/// One element of `end.streams`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct EndStream {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender: Option<EndSide>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receiver: Option<EndSide>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp: Option<EndUdp>,
    /// `-F FILE` on this side: how much of the file went over the stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diskfile: Option<DiskFile>,
}

/// `end.streams[].diskfile`, iperf3's `-F` summary: the stream's bytes sent and
/// received against the file's size when the test ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct DiskFile {
    pub sent: u64,
    pub received: u64,
    pub size: u64,
    /// Whole percent, truncated as iperf3 does (100 for an empty file).
    pub percent_sent: u64,
    pub percent_received: u64,
    pub filename: String,
}

impl DiskFile {
    pub fn new(sent: u64, received: u64, size: u64, filename: String) -> DiskFile {
        let pct = |b: u64| {
            if size == 0 {
                100
            } else {
                (b as f64 / size as f64 * 100.0) as u64
            }
        };
        DiskFile {
            sent,
            received,
            size,
            percent_sent: pct(sent),
            percent_received: pct(received),
            filename,
        }
    }
}

/// An end-of-test sum (`sum_sent`, `sum_received`, `sum`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct EndSum {
    pub start: f64,
    pub end: f64,
    pub seconds: f64,
    pub bytes: u64,
    pub bits_per_second: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub udp_recv: Option<UdpRecvFigures>,
    pub sender: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netmeter: Option<EndSumExtra>,
}

/// netmeter's extras for an end-of-test sum (`end.sum_sent.netmeter`,
/// `end.sum_received.netmeter`, `end.sum.netmeter`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct EndSumExtra {
    /// TCP senders: the streams' spurious retransmits ([`TcpEndExtra`]) added up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spurious_retransmits: Option<u64>,
    /// UDP receivers: the streams' datagrams per ECN codepoint added up, with their
    /// shares (docs/ecn.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<crate::stats::EcnFigures>,
}

/// `end.cpu_utilization_percent`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct CpuUtil {
    pub host_total: f64,
    pub host_user: f64,
    pub host_system: f64,
    pub remote_total: f64,
    pub remote_user: f64,
    pub remote_system: f64,
}

/// The `end` object.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct End {
    pub streams: Vec<EndStream>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum: Option<EndSum>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_sent: Option<EndSum>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_received: Option<EndSum>,
    /// UDP `--bidir`: the reverse direction's legacy `sum` (iperf3 3.22 writes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sum_bidir_reverse: Option<EndSum>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_sent_bidir_reverse: Option<EndSum>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sum_received_bidir_reverse: Option<EndSum>,
    pub cpu_utilization_percent: CpuUtil,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender_tcp_congestion: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receiver_tcp_congestion: Option<String>,
    /// netmeter's end-of-test host facts and warnings.
    #[serde(default)]
    pub netmeter: EndExt,
    /// What this side did on each stream, for the text renderer. Not part of the JSON
    /// document (iperf3's schema has no such key); [`Report::from_document`] infers it.
    #[serde(skip)]
    pub local: LocalRoles,
}

/// This side's part in each of `end.streams`, which the end table's tags and columns
/// depend on.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LocalRoles {
    /// `senders[i]`: this side sends on `end.streams[i]`.
    pub senders: Vec<bool>,
    /// The TCP sender's retransmissions are known (the end table has a Retr column).
    pub sender_retransmits: bool,
}

/// One side's paced UDP senders that ended more than
/// [`advice::SHORTFALL_PERCENT`] below their `-b` (and more than one datagram short):
/// `end.netmeter.rate_shortfall[]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct RateShortfall {
    /// "local" or "remote": whose senders.
    pub side: String,
    /// `-b`, per stream.
    pub target_bits_per_second: u64,
    /// The streams that fell short, by id.
    pub streams: Vec<i64>,
    /// How many sending streams the side had.
    pub of_streams: u32,
    /// The smallest and largest shortfall among them, % of `-b` over each stream's time.
    pub min_short_percent: f64,
    pub max_short_percent: f64,
    /// What all the side's senders sent, and `-b` times their time, bits/s summed.
    pub sent_bits_per_second: f64,
    pub target_sum_bits_per_second: f64,
    /// Why, as far as the figures tell.
    pub cause: ShortfallCause,
    /// The furthest the side's senders fell behind their schedule, ms (netmeter senders).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_lag_ms: Option<f64>,
    /// Of the short streams' threads: the most CPU one used, and the most time one
    /// waited for a CPU, % (netmeter senders on Linux).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_thread_cpu_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_thread_wait_percent: Option<f64>,
    /// Sends that found the socket's buffer full for the whole send timeout (50 ms),
    /// summed over the short streams.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked_sends: Option<u64>,
}

/// Why a paced sender fell short of `-b` ([`RateShortfall::cause`]).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum ShortfallCause {
    /// The socket: sends blocked on a full send buffer.
    Socket,
    /// The sender's CPU: its thread was busy all the time.
    SenderCpu,
    /// A stall: the thread waited for a CPU (other work) or fell far behind its
    /// schedule, too late in the test to make it up.
    Stall,
    /// Not recorded (an iperf3 peer), or nothing the figures show.
    #[default]
    Unknown,
}

/// netmeter's additions to `end`: what the hosts themselves did to the measurement.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct EndExt {
    /// UDP datagrams this side's kernel dropped because a receive buffer was full
    /// (SO_MEMINFO drops), summed over its receiving streams.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_host_drops: Option<u64>,
    /// The same figure from the peer, when the peer is netmeter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_host_drops: Option<u64>,
    /// Plain-language warnings with the fix, also printed in the text report.
    pub warnings: Vec<String>,
    /// This side's host: the interface the test's local address is on, its line rate,
    /// MTU and offloads, the socket-buffer sysctls, CPUs (read when the test ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<crate::host::facts::HostInfo>,
    /// Receiver throughput as a share of that interface's line rate (when known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efficiency: Option<crate::host::facts::Efficiency>,
    /// This side's stream threads' CPU use (the CPU-bound rule's input).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stream_threads: Vec<crate::host::facts::ThreadCpu>,
    /// The same from a netmeter peer's results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remote_stream_threads: Vec<crate::host::facts::ThreadCpu>,
    /// UDP: this side's datagrams and the kernel messages (GSO/GRO) that carried them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_udp_io: Option<UdpIoSides>,
    /// The same from a netmeter peer's results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_udp_io: Option<UdpIoSides>,
    /// Paced UDP senders on this side: the furthest any fell behind its `-b` schedule,
    /// ms. A stall of that length on a path at its capacity queues as much there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_pacing_lag_ms: Option<f64>,
    /// The same from a netmeter peer's results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_pacing_lag_ms: Option<f64>,
    /// Paced UDP senders that ended more than 1 % below `-b`, per side (issue 19):
    /// how far and why. Also a warning line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_shortfall: Vec<RateShortfall>,
    /// Request/response results (`--bounceback`), client side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bounceback: Option<BouncebackEnd>,
    /// One-way delays (`--trip-times`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trip_times: Option<TripTimesEnd>,
    /// Latency under working load (`--working-load`), client side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_load: Option<WorkingLoadEnd>,
    /// Connection-rate results (`--connect-only`), client side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_only: Option<connect::ConnectOnlyEnd>,
    /// Connections a `--connect-only` test opened and this server answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_only_answered: Option<connect::ConnectOnlyAnswered>,
    /// Burst-mode results (`--burst-size`/`--burst-period`), client side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<profile::BurstEnd>,
    /// Isochronous results (`--isochronous`): sender (client) and receiver figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isochronous: Option<profile::IsochEnd>,
    /// iperf 2's figures over the whole test, per stream and direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iperf2_figures: Option<Iperf2End>,
}

/// The end of a `--working-load` test: the probe's round trips before and during load.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct WorkingLoadEnd {
    /// "up", "down" or "bidir".
    pub direction: String,
    /// Bulk TCP streams per loaded direction.
    pub streams: u32,
    pub idle_seconds: f64,
    pub idle_rtt: Option<LatencyStats>,
    pub loaded_rtt: Option<LatencyStats>,
    /// Round trips per minute (60 s / trimmed mean RTT) idle and under load.
    pub idle_rpm: Option<f64>,
    pub loaded_rpm: Option<f64>,
    /// The load's throughput over the loaded phase, client → server and back.
    pub up_bits_per_second: f64,
    pub down_bits_per_second: f64,
    /// The probe's idle and loaded RTT histograms: `[upper bound µs, count]` per
    /// non-empty bucket (the plots' distributions; absent from older documents).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub idle_rtt_histogram_us: Vec<(f64, u64)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loaded_rtt_histogram_us: Vec<(f64, u64)>,
}

/// The end of a `--trip-times` test: one-way delays per direction.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct TripTimesEnd {
    /// The clock the timestamps come from.
    pub clock: String,
    /// Estimated server clock − client clock, and its uncertainty (±).
    pub offset_ms: f64,
    pub offset_uncertainty_ms: f64,
    /// Client → server delays, measured by the server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_to_server: Option<OwdSummary>,
    /// Server → client delays, measured by the client.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_to_client: Option<OwdSummary>,
}

/// One side's UDP datagrams and messages, summed over the streams it sent and received.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct UdpIoSides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent: Option<crate::stats::UdpIo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<crate::stats::UdpIo>,
}

impl UdpIoSides {
    /// Add one stream's counts to the side it was sent or received on.
    pub fn add(&mut self, sender: bool, io: crate::stats::UdpIo) {
        let slot = if sender {
            &mut self.sent
        } else {
            &mut self.received
        };
        *slot = Some(slot.map_or(io, |a| a.plus(io)));
    }
}

/// The end of a bounceback test.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct BouncebackEnd {
    pub request_bytes: u32,
    pub reply_bytes: u32,
    pub hold_ms: f64,
    pub burst: u32,
    /// `--busy-poll`: µs each end polled before a blocking read (0: plain reads).
    #[serde(default)]
    pub busy_poll_us: u32,
    pub streams: u32,
    pub transactions: u64,
    pub seconds: f64,
    pub transactions_per_second: f64,
    /// UDP requests whose reply never came (within a second).
    pub lost: u64,
    /// Replies whose server timestamps contradict their round trip (iperf 2's
    /// `bb_clocksync_error`); only where the server stamps its replies (iperf 2 with
    /// `--trip-times`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_sync_errors: Option<u64>,
    /// Round-trip time distribution over all streams.
    pub rtt: LatencyStats,
    /// The full RTT histogram: `[upper bound µs, count]` per non-empty bucket.
    pub rtt_histogram_us: Vec<(f64, u64)>,
}

/// A whole test as iperf3's `-J` document.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Report {
    pub start: Start,
    pub intervals: Vec<Interval>,
    pub end: End,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_data: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_output_json: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_output_text: Option<String>,
    /// iperf 2's `-r` (tradeoff) from `netmeter iperf2 -c`: this report is the first
    /// half, the test this client sent; this is the second, the iperf 2 server's test
    /// on the connections it opened back to this client once the first had ended (its
    /// own start, intervals timed from its own start, and end summary: this client's
    /// receiving figures).
    #[serde(
        rename = "netmeter_tradeoff",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub tradeoff: Option<Box<Report>>,
}
