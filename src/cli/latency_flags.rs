//! Latency modes, as typed: bounceback, trip times, connect-only, histograms, working
//! load and iperf 2's traffic profiles (their resolution: `cli/profile_flags.rs`).

use super::{number, ranged};
use crate::wire;

/// Latency-mode options, as typed.
#[derive(Debug, Default, clap::Args)]
pub struct LatencyFlags {
    /// Request/response test (like iperf 2 --bounceback, netperf TCP_RR/UDP_RR): round-trip
    /// times and transactions per second. Needs a netmeter server.
    #[arg(long = "bounceback")]
    pub bounceback: bool,
    /// Bounceback request size in bytes.
    #[arg(
        long = "bounceback-request",
        value_name = "BYTES",
        default_value = "100"
    )]
    pub bounceback_request: String,
    /// Bounceback reply size in bytes (default: the request size).
    #[arg(
        long = "bounceback-reply",
        value_name = "BYTES",
        allow_hyphen_values = true
    )]
    pub bounceback_reply: Option<String>,
    /// Server delay before each reply, in milliseconds.
    #[arg(long = "bounceback-hold", value_name = "MS", default_value_t = 0.0, value_parser = number("--bounceback-hold", "a number of milliseconds"))]
    pub bounceback_hold: f64,
    /// Requests sent back to back before waiting for their replies.
    #[arg(long = "bounceback-burst", value_name = "N", default_value_t = 1, value_parser = ranged::<u32>("--bounceback-burst", 1, wire::MAX_BOUNCEBACK_BURST as i128))]
    pub bounceback_burst: u32,
    /// Bounceback: both ends poll the socket for up to USEC microseconds before
    /// sleeping in a blocking read (user-space spin, plus SO_BUSY_POLL where the kernel
    /// allows it). Trades CPU for the wake-up latency; off by default.
    #[arg(long = "busy-poll", value_name = "USEC", value_parser = ranged::<u32>("--busy-poll", 0, wire::MAX_BUSY_POLL_US as i128))]
    pub busy_poll: Option<u32>,
    /// Measure one-way delay (needs a netmeter server): datagrams carry the sender's
    /// wall-clock time; the clock offset is estimated on the control connection.
    #[arg(long = "trip-times")]
    pub trip_times: bool,
    /// The server is an iperf 2 server (iperf 2.1 or 2.2, `iperf -s`): speak iperf 2's
    /// wire instead of iperf3's, on port 5001 unless -p. TCP and UDP uploads (-l, -P,
    /// -t/-n, -b); UDP shows the server's report (loss, out-of-order, jitter).
    #[arg(long = "iperf2")]
    pub iperf2: bool,
    /// With --iperf2: the iperf 2 server's version, 2.1 or 2.2 (default 2.2). Only UDP
    /// --isochronous depends on it: the two read the frame fields at different places,
    /// and a UDP server answers nothing that would tell.
    #[arg(long = "iperf2-version", value_name = "VERSION", value_parser = iperf2_version)]
    pub iperf2_version: Option<wire::iperf2::IsochLayout>,
    /// TCP connection rate (like netperf TCP_CRR, iperf 2 --connect-only): each stream
    /// opens, uses and closes short connections for -t seconds; reports connections/s and
    /// handshake times. Needs a netmeter server.
    #[arg(long = "connect-only")]
    pub connect_only: bool,
    /// Print latency histograms (bounceback RTT, one-way delay) in the text report, with
    /// bins of BIN_MS milliseconds (default 0.1): at the end, and with -i the one-way
    /// delays of each interval. A server prints those it received (--trip-times
    /// clients). JSON always carries the whole test's histograms.
    #[arg(long = "histograms", value_name = "BIN_MS", num_args = 0..=1, default_missing_value = "0.1", value_parser = number("--histograms", "a bin width in milliseconds such as 0.1"))]
    pub histograms: Option<f64>,
    /// Latency under working load: N bulk TCP streams (default 4) up, down or both, plus a
    /// round-trip probe; reports idle and loaded RTT and responsiveness (RPM).
    #[arg(long = "working-load", value_name = "up|down|bidir[,N]", num_args = 0..=1, default_missing_value = "up")]
    pub working_load: Option<String>,
    /// iperf 2 burst mode: every --burst-period, send BYTES as fast as possible, then idle
    /// (default 1M); reports per-burst transfer times.
    #[arg(long = "burst-size", value_name = "BYTES", allow_hyphen_values = true)]
    pub burst_size: Option<String>,
    /// Seconds between the starts of bursts (default 1).
    #[arg(long = "burst-period", value_name = "SEC", value_parser = number("--burst-period", "a number of seconds"))]
    pub burst_period: Option<f64>,
    /// iperf 2 isochronous frames: FPS frames/s, sizes drawn log-normally for a per-frame
    /// rate of MEAN and STDEV bits/s (default 60:20m,0); with UDP to a netmeter server
    /// also frame loss and jitter.
    #[arg(
        long = "isochronous",
        value_name = "FPS:MEAN,STDEV",
        num_args = 0..=1,
        default_missing_value = "60:20m,0"
    )]
    pub isochronous: Option<String>,
}

/// `--iperf2-version`: `2.0`/`2.1` (a patch level allowed, `2.1.8`) or `2.2`.
fn iperf2_version(v: &str) -> Result<wire::iperf2::IsochLayout, String> {
    let mut parts = v.trim().split('.');
    let (major, minor) = (parts.next(), parts.next());
    match (major, minor.map(str::parse::<u32>)) {
        (Some("2"), Some(Ok(0 | 1))) => Ok(wire::iperf2::IsochLayout::Iperf21),
        (Some("2"), Some(Ok(2))) => Ok(wire::iperf2::IsochLayout::Iperf22),
        _ => Err(format!(
            "--iperf2-version {v} is not an iperf 2 version netmeter knows: give 2.1 or 2.2"
        )),
    }
}
