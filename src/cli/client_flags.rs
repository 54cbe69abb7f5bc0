//! Client options (`-c HOST`, how long and how much, streams, rate, socket options,
//! TOS/DSCP), as typed, and the value parsers only they use.

use super::{UsageError, number, ranged, usage};
use crate::wire;

/// Client options, as typed.
#[derive(Debug, Default, clap::Args)]
pub struct ClientFlags {
    /// Run as a client connecting to HOST.
    #[arg(short = 'c', long = "client", value_name = "HOST")]
    pub client: Option<String>,
    /// Time in seconds to transmit for (default 10 secs; 0 = until interrupted).
    #[arg(short = 't', long = "time", value_name = "SEC", value_parser = number("-t", "a number of seconds such as 10 or 0.5"))]
    pub time: Option<f64>,
    /// Bytes to transmit per direction (instead of -t), e.g. 100M.
    #[arg(short = 'n', long = "bytes", allow_hyphen_values = true)]
    pub bytes: Option<String>,
    /// Blocks (TCP writes or UDP datagrams) to transmit (instead of -t).
    #[arg(
        short = 'k',
        long = "blockcount",
        value_name = "N",
        allow_hyphen_values = true
    )]
    pub blockcount: Option<String>,
    /// Parallel streams (1..128).
    #[arg(short = 'P', long = "parallel", value_name = "N", value_parser = ranged::<u32>("-P", 1, wire::MAX_STREAMS as i128))]
    pub parallel: Option<u32>,
    /// Reverse: the server sends, the client receives.
    #[arg(short = 'R', long = "reverse")]
    pub reverse: bool,
    /// Both directions at once.
    #[arg(long = "bidir")]
    pub bidir: bool,
    /// Target rate per stream in bits/s, optional /BURST datagrams per tick (UDP default 1M).
    #[arg(
        short = 'b',
        long = "bitrate",
        alias = "bandwidth",
        value_name = "RATE[/BURST]",
        allow_hyphen_values = true
    )]
    pub bitrate: Option<String>,
    /// Kernel pacing rate (SO_MAX_PACING_RATE) in bits/s.
    #[arg(long = "fq-rate", value_name = "RATE", allow_hyphen_values = true)]
    pub fq_rate: Option<String>,
    /// No kernel pacing: iperf3's deprecated spelling of --fq-rate 0.
    #[arg(long = "no-fq-socket-pacing")]
    pub no_fq_socket_pacing: bool,
    /// TCP read/write block (default 1M for unpaced bulk TCP, 128K when -P exceeds the
    /// CPU count or with -b, -k, --trip-times or a traffic profile) or UDP datagram size
    /// (default: path MSS, at most 1460).
    #[arg(
        short = 'l',
        long = "length",
        value_name = "BYTES",
        allow_hyphen_values = true
    )]
    pub length: Option<String>,
    /// Socket buffer size (SO_SNDBUF/SO_RCVBUF) on both ends.
    #[arg(
        short = 'w',
        long = "window",
        value_name = "BYTES",
        allow_hyphen_values = true
    )]
    pub window: Option<String>,
    /// TCP maximum segment size (88..32767 bytes; 0 = the system's).
    #[arg(short = 'M', long = "set-mss", value_name = "BYTES", value_parser = ranged::<u32>("-M", 0, wire::MAX_MSS as i128))]
    pub mss: Option<u32>,
    /// TCP_NODELAY.
    #[arg(short = 'N', long = "no-delay")]
    pub nodelay: bool,
    /// TCP congestion control algorithm.
    #[arg(
        short = 'C',
        long = "congestion",
        value_name = "ALGO",
        alias = "linux-congestion"
    )]
    pub congestion: Option<String>,
    /// IP type-of-service byte (decimal, 0x hex or 0 octal), or a DSCP name as iperf 2
    /// takes it (af11 is TOS 0x28).
    #[arg(short = 'S', long = "tos", allow_hyphen_values = true)]
    pub tos: Option<String>,
    /// DSCP value (0..63) or name (ef, af11..af43, cs0..cs7).
    #[arg(long = "dscp", allow_hyphen_values = true)]
    pub dscp: Option<String>,
    /// ECN codepoint for UDP data (ect0 or ect1), kept beside -S/--dscp (docs/ecn.md).
    #[arg(long = "ecn", value_name = "ect0|ect1")]
    pub ecn: Option<String>,
    /// UDP: lower and raise the rate under -b from the CE marks the receiver returns,
    /// L4S-style (marks ECT(1) unless --ecn says otherwise; netmeter server; docs/ecn.md).
    #[arg(long = "ecn-responsive")]
    pub ecn_responsive: bool,
    /// Bind data streams to this client port (stream k uses PORT+k).
    #[arg(long = "cport", value_name = "PORT", value_parser = ranged::<u16>("--cport", 1, 65535))]
    pub cport: Option<u16>,
    /// Omit the first SEC seconds from the results.
    #[arg(short = 'O', long = "omit", value_name = "SEC", value_parser = number("-O", "a number of seconds such as 2"))]
    pub omit: Option<f64>,
    /// Timeout for connecting to the server, in milliseconds.
    #[arg(long = "connect-timeout", value_name = "MS", value_parser = ranged::<u64>("--connect-timeout", 1, 3_600_000))]
    pub connect_timeout: Option<u64>,
    /// Zero-copy send: MSG_ZEROCOPY where the kernel allows it, sendfile otherwise.
    #[arg(short = 'Z', long = "zerocopy")]
    pub zerocopy: bool,
    /// Receive without copying payload to user space (MSG_TRUNC).
    #[arg(long = "skip-rx-copy")]
    pub skip_rx_copy: bool,
    /// Payload of repeating '0'..'9' instead of random bytes.
    #[arg(long = "repeating-payload")]
    pub repeating_payload: bool,
    /// Client: TCP data streams over MPTCP rather than plain TCP. (A server always
    /// accepts MPTCP where the kernel has it; -m there changes nothing.)
    #[arg(short = 'm', long = "mptcp")]
    pub mptcp: bool,
    /// IPv6 flow label N (1..0xfffff; decimal, 0x hex or 0 octal) on the client's data
    /// streams.
    #[arg(short = 'L', long = "flowlabel", value_name = "N")]
    pub flowlabel: Option<String>,
    /// iperf3's pacing tick in microseconds (default 1000), sent to the server for iperf3
    /// servers that pace by it; netmeter paces without a tick.
    #[arg(long = "pacing-timer", value_name = "USEC")]
    pub pacing_timer: Option<String>,
    /// iperf3's SCTP test. netmeter does not run SCTP: it says whether this kernel has
    /// SCTP and stops.
    #[arg(long = "sctp")]
    pub sctp: bool,
    /// Number of SCTP streams (with --sctp; see there).
    #[arg(long = "nstreams", value_name = "N")]
    pub nstreams: Option<String>,
    /// Bind SCTP associations to this address too (with --sctp; see there).
    #[arg(short = 'X', long = "xbind", value_name = "NAME")]
    pub xbind: Vec<String>,
}

/// Linux's smallest TCP_MAXSEG (`TCP_MIN_MSS`, include/net/tcp.h).
pub(super) const MIN_MSS: u32 = 88;

/// A DSCP name (RFC 2474, RFC 4594, RFC 5865), as iperf 2's `-S` and iperf3's `--dscp`
/// take them: ef, va, le, cs0..cs7, af11..af43.
pub(super) fn dscp_name(s: &str) -> Option<u8> {
    let l = s.trim().to_ascii_lowercase();
    let b = l.as_bytes();
    let digit = |i: usize| b.get(i).map(|d| d.wrapping_sub(b'0'));
    match (l.as_str(), b.len()) {
        ("ef", _) => Some(46),
        ("va", _) => Some(44),
        ("le", _) => Some(1),
        (_, 3) if l.starts_with("cs") => digit(2).filter(|&n| n <= 7).map(|n| n * 8),
        (_, 4) if l.starts_with("af") => match (digit(2), digit(3)) {
            (Some(c @ 1..=4), Some(d @ 1..=3)) => Some(c * 8 + d * 2),
            _ => None,
        },
        _ => None,
    }
}

/// DSCP names and values.
pub(super) fn parse_dscp(s: &str) -> Result<u8, UsageError> {
    let v = match dscp_name(s) {
        Some(v) => v as u32,
        None => parse_int(s).ok_or_else(|| usage(bad_dscp(s)))?,
    };
    if v > 63 {
        return Err(usage(bad_dscp(s)));
    }
    Ok(v as u8)
}

/// `-S`: iperf3's TOS byte (decimal, 0x hex or 0 octal), or a DSCP name as iperf 2
/// takes it (`-S af11` is TOS 0x28: the DSCP in the upper six bits).
pub(super) fn parse_tos(s: &str) -> Result<u8, UsageError> {
    if let Some(v) = parse_int(s).filter(|&v| v <= 255) {
        return Ok(v as u8);
    }
    dscp_name(s).map(|d| d << 2).ok_or_else(|| {
        usage(format!(
            "-S takes a TOS byte 0..255 or a DSCP name such as af11 or ef, not '{s}' (--dscp takes DSCP values 0..63)"
        ))
    })
}

pub(super) fn bad_dscp(s: &str) -> String {
    format!("'{s}' is not a valid DSCP; use 0..63 or a name such as ef, af41 or cs1")
}

/// Decimal, 0x-hex or 0-octal, as iperf3 accepts for -S.
pub(super) fn parse_int(s: &str) -> Option<u32> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u32::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u32::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}
