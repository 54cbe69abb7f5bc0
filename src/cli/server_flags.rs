//! Server options (`-s` and the server's limits, policy, audit log and metrics), as
//! typed.

use super::ranged;
use crate::wire;
use std::path::PathBuf;

/// Server options, as typed.
#[derive(Debug, Default, clap::Args)]
pub struct ServerFlags {
    /// Run as a server.
    #[arg(short = 's', long = "server")]
    pub server: bool,
    /// Serve one test, then exit.
    #[arg(short = '1', long = "one-off")]
    pub one_off: bool,
    /// Run the server in the background.
    #[arg(short = 'D', long = "daemon")]
    pub daemon: bool,
    /// Write the process id to FILE.
    #[arg(short = 'I', long = "pidfile", value_name = "FILE")]
    pub pidfile: Option<PathBuf>,
    /// With -1: exit after this many seconds without a test (needs -1).
    #[arg(long = "idle-timeout", value_name = "SEC", value_parser = ranged::<u64>("--idle-timeout", 1, 86400))]
    pub idle_timeout: Option<u64>,
    /// Refuse tests whose -t plus -O exceeds SEC seconds (compared exactly), and tests
    /// without a time limit (-t 0, -n, -k); a test still running 2 s after SEC is ended,
    /// whatever the client does; 0 = no limit.
    #[arg(long = "server-max-duration", value_name = "SEC", value_parser = ranged::<u64>("--server-max-duration", 0, wire::MAX_TIME as i128))]
    pub server_max_duration: Option<u64>,
    /// Refuse tests that ask for more than RATE bits/s in total (-b × streams), send at
    /// most RATE in all when the client asks for no rate, and end a test whose total
    /// rate (both directions) goes over it, judged each second from the first, averaged
    /// over the last SEC seconds (default 5).
    #[arg(
        long = "server-bitrate-limit",
        value_name = "RATE[/SEC]",
        allow_hyphen_values = true
    )]
    pub server_bitrate_limit: Option<String>,
    /// With -F: write at most SIZE bytes of what clients send into the file (default
    /// 1G; 0 = no limit); past it the test goes on and the log says so.
    #[arg(long = "server-max-file-size", value_name = "SIZE")]
    pub server_max_file_size: Option<String>,
    /// Tests the server runs at once; beyond it a client is told the server is busy.
    #[arg(long = "max-tests", value_name = "N", default_value_t = 1, value_parser = ranged::<usize>("--max-tests", 1, 1 << 20))]
    pub max_tests: usize,
    /// Tests one source (an IPv4 address, an IPv6 /64) may run at once; beyond it the
    /// client is told the server is busy [default: --max-tests minus 1, at least 1].
    #[arg(long = "max-tests-per-source", value_name = "N", value_parser = ranged::<usize>("--max-tests-per-source", 1, 1 << 20))]
    pub max_tests_per_source: Option<usize>,
    /// End a running test that moves no data for SEC seconds (iperf3 clients print
    /// "idle timeout for receiving data"); 0 = never [default: 10].
    #[arg(long = "test-idle-timeout", value_name = "SEC", value_parser = ranged::<u64>("--test-idle-timeout", 0, 86400))]
    pub test_idle_timeout: Option<u64>,
    /// Refuse tests with more than N data streams in all (-P, twice with --bidir).
    #[arg(long = "max-streams", value_name = "N", value_parser = ranged::<u32>("--max-streams", 1, 2 * wire::MAX_STREAMS as i128))]
    pub max_streams: Option<u32>,
    /// Let one source address start at most N tests per period (N, N/s, N/min, N/h; a
    /// bare N is per minute); beyond it a client is told the server is busy.
    #[arg(long = "max-conn-rate", value_name = "N[/PERIOD]")]
    pub max_conn_rate: Option<String>,
    /// Only these sources may test (addresses or CIDR networks, comma-separated).
    #[arg(long = "allow", value_name = "CIDR,...", value_delimiter = ',')]
    pub allow: Vec<String>,
    /// These sources may not test (wins over --allow).
    #[arg(long = "deny", value_name = "CIDR,...", value_delimiter = ',')]
    pub deny: Vec<String>,
    /// Append one JSON line per test to FILE (- = stdout): who, when, what, result,
    /// bytes (docs/server.md).
    #[arg(long = "audit-log", value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
    /// Start a new audit file when it would pass SIZE (e.g. 16M; 0 = never), keeping
    /// the old ones as FILE.1 ... FILE.N (--audit-log-keep). Default 64M.
    #[arg(long = "audit-log-max-size", value_name = "SIZE")]
    pub audit_log_max_size: Option<String>,
    /// Old audit files kept when it rotates (0-100, default 3).
    #[arg(long = "audit-log-keep", value_name = "N", value_parser = ranged::<u32>("--audit-log-keep", 0, 100))]
    pub audit_log_keep: Option<u32>,
    /// Serve the server's counters for Prometheus at http://ADDR:PORT/metrics.
    #[arg(long = "metrics", value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
    /// Also serve the responsiveness test (`netmeter rpm-server`) on TCP PORT [default:
    /// 8443], with this server's --allow, --deny and --audit-log (docs/rpm-server.md).
    #[arg(long = "rpm", value_name = "PORT", num_args = 0..=1, default_missing_value = "8443", value_parser = ranged::<u16>("--rpm", 0, 65535))]
    pub rpm: Option<u16>,
    /// With --rpm: the responsiveness server's certificate chain (PEM; with --rpm-key;
    /// default: self-signed at start).
    #[arg(long = "rpm-cert", value_name = "FILE", requires = "rpm_key")]
    pub rpm_cert: Option<PathBuf>,
    /// With --rpm: the certificate's private key (PEM; with --rpm-cert).
    #[arg(long = "rpm-key", value_name = "FILE", requires = "rpm_cert")]
    pub rpm_key: Option<PathBuf>,
}
