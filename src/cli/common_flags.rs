//! The options of every role (`--help` lists them first, under "Options"): the port,
//! addresses and interface, the address family, CPU affinity, the file to send or
//! write, the timeouts and keepalive of the connections, and the version.

use super::ranged;
use crate::wire;
use std::path::PathBuf;

/// The options of every role, as typed.
#[derive(Debug, Default, clap::Args)]
pub struct CommonFlags {
    /// Run a short TCP test and a short UDP test against an in-process server on 127.0.0.1.
    #[arg(long)]
    pub loopback: bool,
    /// Server port to listen on / connect to.
    #[arg(short = 'p', long = "port", default_value_t = 5201, value_parser = ranged::<u16>("-p", 0, 65535))]
    pub port: u16,
    /// Bind to this local address.
    #[arg(short = 'B', long = "bind", value_name = "HOST")]
    pub bind: Option<String>,
    /// Use IPv4 only.
    #[arg(short = '4', long = "version4")]
    pub v4: bool,
    /// Use IPv6 only.
    #[arg(short = '6', long = "version6")]
    pub v6: bool,
    /// Print the version and exit.
    #[arg(short = 'v', long = "version")]
    pub version: bool,
    /// Pin to CPU N; with N,M also ask the server to pin this test to CPU M.
    #[arg(short = 'A', long = "affinity", value_name = "N[,M]")]
    pub affinity: Option<String>,
    /// TCP: send FILE's bytes instead of generated data (the test ends at its end; without
    /// -t, -n or -k, -n is its size), or write what is received to FILE (created or
    /// truncated).
    #[arg(short = 'F', long = "file", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Bind every socket to this network interface (SO_BINDTODEVICE). `-B ADDR%DEV` and
    /// `-c HOST%DEV` say the same.
    #[arg(long = "bind-dev", value_name = "DEV")]
    pub bind_dev: Option<String>,
    /// Give up when no data arrives for MS milliseconds (100 ms to 24 h; a receiving
    /// side: the server, or a client with -R or --bidir). Default: iperf3's 120000 for
    /// a -t 0 test; other tests end by their own deadlines.
    #[arg(long = "rcv-timeout", value_name = "MS", value_parser = ranged::<u64>("--rcv-timeout", 100, wire::MAX_TIME as i128 * 1000))]
    pub rcv_timeout: Option<u64>,
    /// Abort when sent TCP data stays unacknowledged for MS milliseconds
    /// (TCP_USER_TIMEOUT on this side's control and data connections; default: the
    /// system's).
    #[arg(long = "snd-timeout", value_name = "MS", value_parser = ranged::<u32>("--snd-timeout", 0, wire::MAX_TIME as i128 * 1000))]
    pub snd_timeout: Option<u32>,
    /// TCP keepalive on the control connection; optional IDLE/INTERVAL/COUNT (seconds,
    /// seconds, probes; an empty field keeps the system's), e.g. --cntl-ka=60/5/3.
    #[arg(long = "cntl-ka", value_name = "IDLE/INTV/CNT", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub cntl_ka: Option<String>,
    /// Do not ask a netmeter server for extensions (behave exactly like an iperf3 client).
    #[arg(long = "no-extensions", hide = true)]
    pub no_extensions: bool,
}

/// `ADDR%DEV` → (`ADDR`, `DEV`), as iperf3's `iperf_parse_hostname`; an IPv6
/// link-local literal keeps its `%scope` (it names the zone, not a bind device).
pub(super) fn split_dev(s: &str) -> (&str, Option<String>) {
    match s.split_once('%') {
        Some((a, _))
            if a.parse::<std::net::Ipv6Addr>()
                .is_ok_and(|v6| v6.segments()[0] & 0xffc0 == 0xfe80) =>
        {
            (s, None)
        }
        Some((a, d)) => (a, Some(d.to_string())),
        None => (s, None),
    }
}

/// Interface names are shorter than IFNAMSIZ (16) bytes, the NUL included.
pub(super) fn libc_ifnamsiz() -> usize {
    16
}
