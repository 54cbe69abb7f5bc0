//! Flags as the user typed them, and their resolution into a client or server config.
//!
//! Options, short letters, units and defaults follow iperf3 (`iperf3 --help`), so a
//! command line that works there means the same here. Every invalid combination ends
//! in one sentence naming the problem.
//!
//! It is one long file on purpose: one flag table whose help,
//! parsing and resolution must agree; a group of flags that stands alone has its own
//! file (`cli/profile_flags.rs`).

use crate::engine::client::{ClientConfig, Family};
use crate::engine::output::Mode;
use crate::engine::server::ServerConfig;
use crate::engine::server::audit::{Rotation, Target as AuditTarget};
use crate::engine::server::policy::{ConnRate, Policy};
use crate::engine::test_common::{Keepalive, SideOpts};
use crate::spec::{Direction, EndCondition, Protocol, TestSpec};
use crate::units::{self, Format};
use crate::wire;
use clap::Parser;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

mod auth_flags;
pub mod compare_cmd;
pub mod csv_cmd;
pub mod doctor_cmd;
pub mod generate;
mod help;
pub mod iperf2;
mod manpage;
pub mod mesh_cmd;
mod multicast_flags;
mod parse_error;
mod profile_flags;
pub mod sweep_cmd;
pub mod third_party;
mod tools;

/// netmeter: TCP and UDP throughput, loss and jitter, wire-compatible with iperf3.
#[derive(Debug, Parser, Default)]
#[command(
    name = "netmeter",
    disable_version_flag = true,
    // `-P -1` is a value (refused as out of range), not an unknown flag `-1`.
    allow_negative_numbers = true,
    about = "Network performance measurement, wire-compatible with iperf3",
    // The groups, usage forms, subcommands and examples: `cli/help.rs`.
)]
pub struct Args {
    /// Run as a server.
    #[arg(short = 's', long = "server")]
    pub server: bool,
    /// Run as a client connecting to HOST.
    #[arg(short = 'c', long = "client", value_name = "HOST")]
    pub client: Option<String>,
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
    /// Seconds between interval reports (0 disables).
    #[arg(short = 'i', long = "interval", value_name = "SEC", default_value_t = 1.0, value_parser = number("-i", "a number of seconds such as 1 or 0.5"))]
    pub interval: f64,
    /// Report format: k m g t (bits) or K M G T (bytes).
    #[arg(short = 'f', long = "format")]
    pub format: Option<String>,
    /// Output JSON (iperf3 schema) at the end.
    #[arg(short = 'J', long = "json")]
    pub json: bool,
    /// Output one JSON object per event, line by line.
    #[arg(long = "json-stream")]
    pub json_stream: bool,
    /// Output CSV instead of text: a row per stream per interval, the sums and the end
    /// summary, under a header of column names (docs/csv.md).
    #[arg(long = "csv")]
    pub csv: bool,
    /// With --csv: the columns to write, comma-separated, in order (default: all).
    #[arg(long = "fields", value_name = "a,b,c")]
    pub fields: Option<String>,
    /// Send output to a file (appended).
    #[arg(long = "logfile", value_name = "FILE")]
    pub logfile: Option<PathBuf>,
    /// Client: draw the test's charts into FILE (.svg or .png) when it ends.
    #[arg(long = "plot", value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Client: the peak to judge the received throughput against, in bits/s (10G), or
    /// memcpy (this host's one-thread memory copy rate, for loopback); the end says
    /// "N% of" it, and -J's end.netmeter.efficiency holds it. Default: the interface's
    /// link speed where the kernel knows it.
    #[arg(long = "line-rate", value_name = "RATE|memcpy")]
    pub line_rate: Option<String>,
    /// More detail: CPU utilisation, congestion control, test settings, iperf 2's
    /// figures (packets/s, Write/Err, Reads, inP, NetPwr).
    #[arg(short = 'V', long = "verbose")]
    pub verbose: bool,
    /// Print the version and exit.
    #[arg(short = 'v', long = "version")]
    pub version: bool,

    // Server options.
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

    // Multicast options (docs/multicast.md).
    /// Multicast receiver: hear only this source (source-specific join, -B GROUP).
    #[arg(short = 'H', long = "ssm-host", value_name = "SOURCE")]
    pub ssm_host: Option<String>,
    /// Multicast sender: the TTL / hop limit (default 1).
    #[arg(long = "ttl", value_name = "N")]
    pub ttl: Option<u32>,

    // Client options.
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
    /// Use UDP.
    #[arg(short = 'u', long = "udp")]
    pub udp: bool,
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
    /// Bind data streams to this client port (stream k uses PORT+k).
    #[arg(long = "cport", value_name = "PORT", value_parser = ranged::<u16>("--cport", 1, 65535))]
    pub cport: Option<u16>,
    /// Omit the first SEC seconds from the results.
    #[arg(short = 'O', long = "omit", value_name = "SEC", value_parser = number("-O", "a number of seconds such as 2"))]
    pub omit: Option<f64>,
    /// Prefix every output line with this string.
    #[arg(short = 'T', long = "title", value_name = "STR")]
    pub title: Option<String>,
    /// A string carried into both sides' JSON output.
    #[arg(long = "extra-data", value_name = "STR")]
    pub extra_data: Option<String>,
    /// Fetch the server's output at the end.
    #[arg(long = "get-server-output")]
    pub get_server_output: bool,
    /// Timeout for connecting to the server, in milliseconds.
    #[arg(long = "connect-timeout", value_name = "MS", value_parser = ranged::<u64>("--connect-timeout", 1, 3_600_000))]
    pub connect_timeout: Option<u64>,
    /// Zero-copy send: MSG_ZEROCOPY where the kernel allows it, sendfile otherwise.
    #[arg(short = 'Z', long = "zerocopy")]
    pub zerocopy: bool,
    /// Receive without copying payload to user space (MSG_TRUNC).
    #[arg(long = "skip-rx-copy")]
    pub skip_rx_copy: bool,
    /// 64-bit UDP sequence numbers.
    #[arg(long = "udp-counters-64bit")]
    pub udp_counters_64bit: bool,
    /// Payload of repeating '0'..'9' instead of random bytes.
    #[arg(long = "repeating-payload")]
    pub repeating_payload: bool,
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
    /// Pin to CPU N; with N,M also ask the server to pin this test to CPU M.
    #[arg(short = 'A', long = "affinity", value_name = "N[,M]")]
    pub affinity: Option<String>,
    /// Latency under working load: N bulk TCP streams (default 4) up, down or both, plus a
    /// round-trip probe; reports idle and loaded RTT and responsiveness (RPM).
    #[arg(long = "working-load", value_name = "up|down|bidir[,N]", num_args = 0..=1, default_missing_value = "up")]
    pub working_load: Option<String>,
    /// Search for the highest UDP rate whose loss stays within --loss-target (RFC 2544
    /// style); each trial runs -t seconds (default 2 here).
    #[arg(long = "find-max-rate")]
    pub find_max_rate: bool,
    /// Loss allowed by --find-max-rate, in percent.
    #[arg(long = "loss-target", value_name = "PCT", default_value_t = 0.1, value_parser = number("--loss-target", "a percentage such as 0.1"))]
    pub loss_target: f64,
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
    /// Set up first, then start sending at this wall-clock time in seconds since the Unix
    /// epoch (e.g. $(( $(date +%s) + 10 ))), so several clients start together.
    #[arg(long = "txstart-time", value_name = "EPOCH", value_parser = number("--txstart-time", "seconds since the Unix epoch"))]
    pub txstart_time: Option<f64>,
    /// UDP: the sending side (this one, the server with -R, both with --bidir) sends one
    /// datagram per message instead of using segmentation offload (UDP_SEGMENT), as
    /// iperf3 does by default. Compare with iperf3 this way.
    #[arg(long = "no-gso")]
    pub no_gso: bool,
    /// UDP: the receiving side reads one datagram per message instead of using receive
    /// offload (UDP_GRO).
    #[arg(long = "no-gro")]
    pub no_gro: bool,
    /// iperf3 3.21's switch for UDP GSO and GRO. netmeter uses both by default where the
    /// kernel offers them, so this changes nothing (see --no-gso, --no-gro).
    #[arg(long = "gsro")]
    pub gsro: bool,
    /// Run the test N times (at most N with --confidence) and report each key figure's
    /// mean, standard deviation, min/max and confidence interval.
    #[arg(long = "repeat", value_name = "N")]
    pub repeat: Option<u32>,
    /// Seconds to wait between --repeat runs.
    #[arg(long = "repeat-gap", value_name = "SEC", default_value_t = 1.0, value_parser = number("--repeat-gap", "a number of seconds"))]
    pub repeat_gap: f64,
    /// With --repeat: stop once the receiver throughput's LEVEL % confidence interval is
    /// within ±WIDTH % of its mean (netperf -I), e.g. 95,5.
    #[arg(long = "confidence", value_name = "LEVEL,WIDTH%")]
    pub confidence: Option<String>,
    #[command(flatten)]
    pub auth: auth_flags::AuthFlags,
    /// Server: run third-party tests (a controller with the --psk-file key asks this
    /// server to test toward another) to targets in these address blocks,
    /// e.g. 10.0.0.0/8,fd00::/64.
    #[arg(long = "allow-third-party", value_name = "CIDR,...")]
    pub allow_third_party: Option<String>,
    /// Client: have HOST (a netmeter server with --allow-third-party, default port
    /// 5201) run this test toward -c's server and send its report here; needs
    /// --psk-file with HOST's key. Only the test's own options go to HOST.
    #[arg(long = "via", value_name = "HOST[:PORT]")]
    pub via: Option<String>,
    /// Start every text output line with the local time, in strftime(3) FORMAT (default
    /// "%c "), as iperf3. Write it as --timestamps=FORMAT.
    #[arg(long = "timestamps", value_name = "FORMAT", num_args = 0..=1, require_equals = true, default_missing_value = crate::engine::output::TIMESTAMP_FORMAT)]
    pub timestamps: Option<String>,
    /// Flush the output at every line (netmeter always does; accepted for iperf3's
    /// command lines).
    #[arg(long = "forceflush")]
    pub forceflush: bool,
    /// With --json-stream: also print the whole -J document at the end.
    #[arg(long = "json-stream-full-output")]
    pub json_stream_full_output: bool,
    /// TCP: send FILE's bytes instead of generated data (the test ends at its end; without
    /// -t, -n or -k, -n is its size), or write what is received to FILE (created or
    /// truncated).
    #[arg(short = 'F', long = "file", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Debug output: each control message (state bytes and JSON) on stderr. iperf3's
    /// levels 1-4 are accepted and print the same. Write a level as -d=N.
    #[arg(short = 'd', long = "debug", value_name = "LEVEL", num_args = 0..=1, require_equals = true, default_missing_value = "4")]
    pub debug: Option<String>,
    /// Bind every socket to this network interface (SO_BINDTODEVICE). `-B ADDR%DEV` and
    /// `-c HOST%DEV` say the same.
    #[arg(long = "bind-dev", value_name = "DEV")]
    pub bind_dev: Option<String>,
    /// UDP over IPv4: set the Don't Fragment bit (IP_PMTUDISC_DO) on both ends' data
    /// sockets; a datagram larger than the path MTU then fails instead of fragmenting.
    #[arg(long = "dont-fragment")]
    pub dont_fragment: bool,
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
    /// Do not ask a netmeter server for extensions (behave exactly like an iperf3 client).
    #[arg(long = "no-extensions", hide = true)]
    pub no_extensions: bool,
}

/// What to run.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // built once per process
pub enum Command {
    Version,
    Server {
        cfg: ServerConfig,
        daemon: bool,
        pidfile: Option<PathBuf>,
        logfile: Option<PathBuf>,
    },
    Client {
        cfg: ClientConfig,
        logfile: Option<PathBuf>,
        /// `--plot FILE`: the test's charts, drawn when it ends.
        plot: Option<PathBuf>,
        /// `--csv`: CSV with these columns instead of text.
        csv: Option<crate::report::csv::Columns>,
    },
    FindMaxRate {
        cfg: ClientConfig,
        loss_target: f64,
        start_bps: u64,
        logfile: Option<PathBuf>,
    },
    Loopback {
        tcp: ClientConfig,
        udp: ClientConfig,
        logfile: Option<PathBuf>,
    },
    /// `--repeat N`: the client test several times, with statistics.
    Repeat {
        cfg: ClientConfig,
        plan: crate::experiment::repeat::Plan,
        logfile: Option<PathBuf>,
    },
    /// `netmeter plot RESULT.json... -o FILE` (see `cli/tools.rs`).
    Plot {
        inputs: Vec<PathBuf>,
        output: PathBuf,
    },
    /// `netmeter report RESULT.json... -o FILE.html`.
    Report {
        inputs: Vec<PathBuf>,
        output: PathBuf,
    },
    /// `netmeter mesh HOST...`: every pair's test, run by its source host.
    Mesh(mesh_cmd::MeshCommand),
    /// `netmeter generate KIND`: a man page or a shell completion, to stdout.
    Generate(generate::Asset),
    /// `netmeter doctor [-c HOST] [--json]`: this host's ceilings (see `cli/doctor_cmd.rs`).
    Doctor {
        target: Option<String>,
        json: bool,
        /// `--line-rate RATE`: bits/s.
        line_rate: Option<u64>,
    },
    /// `netmeter csv RESULT`: a saved result as CSV, to `output` or stdout.
    Csv {
        input: PathBuf,
        columns: csv_cmd::CsvColumns,
        output: Option<PathBuf>,
    },
    /// `-s -u -B GROUP`: a multicast receiver (`cli/multicast_flags.rs`).
    MulticastReceive {
        cfg: crate::engine::multicast::ReceiverConfig,
        logfile: Option<PathBuf>,
    },
    /// `-c GROUP -u`: a multicast sender.
    MulticastSend {
        cfg: crate::engine::multicast::SenderConfig,
        logfile: Option<PathBuf>,
    },
}

/// CPUs this process may run on (1 when unknown).
fn host_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// [`subcommand`] of `netmeter ARGS...` (the subcommands' parser tests).
#[cfg(test)]
pub(crate) fn subcommand_of(args: &[&str]) -> Option<Result<Command, ArgsError>> {
    let argv: Vec<std::ffi::OsString> = std::iter::once("netmeter")
        .chain(args.iter().copied())
        .map(Into::into)
        .collect();
    subcommand(&argv)
}

/// A subcommand's own parser when the first argument names one (`plot`, `report`, `csv`, `generate`, `doctor`); `None` for
/// iperf3's flat command line.
pub fn subcommand(argv: &[std::ffi::OsString]) -> Option<Result<Command, ArgsError>> {
    match argv.get(1)?.to_str()? {
        "plot" | "report" => tools::parse_tool(argv),
        "csv" => Some(csv_cmd::parse(&argv[1..])),
        "generate" => Some(generate::parse(&argv[1..])),
        "doctor" => Some(doctor_cmd::parse(&argv[1..])),
        "mesh" => Some(mesh_cmd::parse(&argv[1..])),
        _ => None,
    }
}

/// Linux's smallest TCP_MAXSEG (`TCP_MIN_MSS`, include/net/tcp.h).
const MIN_MSS: u32 = 88;

/// A user mistake, as one sentence.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

fn usage(msg: impl Into<String>) -> UsageError {
    UsageError(msg.into())
}

/// Why the command line could not be parsed.
#[derive(Debug)]
pub enum ArgsError {
    /// A user mistake netmeter words itself: print it as one line, exit 1.
    Usage(UsageError),
    /// Help, or an error clap formats (unknown option, missing value): `clap::Error::print`.
    Clap(clap::Error),
}

/// Parse the command line. A value that does not parse, an unknown option or a stray
/// word comes back as one sentence naming it (`cli/parse_error.rs`); help and the rest
/// are clap's own. (Every iperf3 3.22 option parses; `--sctp` is refused later, in one
/// sentence, because this kernel has no SCTP.)
pub fn parse_args<I, T>(args: I) -> Result<Args, ArgsError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::FromArgMatches;
    let argv: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let mut cmd = help::command();
    let mut m = cmd
        .try_get_matches_from_mut(&argv)
        .map_err(|e| parse_error::reword(e, &argv, &cmd))?;
    Args::from_arg_matches_mut(&mut m).map_err(|e| ArgsError::Clap(e.format(&mut cmd)))
}

/// The flat command line's clap command, grouped as `--help` shows it.
pub fn args_command() -> clap::Command {
    help::command()
}

/// A number flag value (`-t 2.5`), refused in one sentence naming the flag and the
/// value, `what` saying what it wants ("a number of seconds").
fn number(
    flag: &'static str,
    what: &'static str,
) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("{flag} needs {what}, not '{s}'"))
    }
}

/// A whole-number flag value in `lo..=hi`, refused in one sentence otherwise (a negative
/// number included: clap would otherwise call `-1` a missing value).
fn ranged<T>(
    flag: &'static str,
    lo: i128,
    hi: i128,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: TryFrom<i128>,
{
    move |s: &str| {
        let v: i128 = s
            .trim()
            .parse()
            .map_err(|_| format!("{flag} needs a whole number, not '{s}'"))?;
        if !(lo..=hi).contains(&v) {
            return Err(format!("{flag} must be between {lo} and {hi}"));
        }
        T::try_from(v).map_err(|_| format!("{flag} must be between {lo} and {hi}"))
    }
}

/// Quantities (`-n 10M`, `-b 1G`) are strings parsed later; a leading minus is a value
/// out of range, said as `range` with the value, not an unreadable quantity.
fn not_negative(s: &str, range: impl FnOnce() -> String) -> Result<(), UsageError> {
    if s.trim_start().starts_with('-') {
        return Err(usage(format!("{}, not '{s}'", range())));
    }
    Ok(())
}

/// `ADDR%DEV` → (`ADDR`, `DEV`), as iperf3's `iperf_parse_hostname`; an IPv6
/// link-local literal keeps its `%scope` (it names the zone, not a bind device).
fn split_dev(s: &str) -> (&str, Option<String>) {
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
fn libc_ifnamsiz() -> usize {
    16
}

/// A DSCP name (RFC 2474, RFC 4594, RFC 5865), as iperf 2's `-S` and iperf3's `--dscp`
/// take them: ef, va, le, cs0..cs7, af11..af43.
fn dscp_name(s: &str) -> Option<u8> {
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
fn parse_dscp(s: &str) -> Result<u8, UsageError> {
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
fn parse_tos(s: &str) -> Result<u8, UsageError> {
    if let Some(v) = parse_int(s).filter(|&v| v <= 255) {
        return Ok(v as u8);
    }
    dscp_name(s).map(|d| d << 2).ok_or_else(|| {
        usage(format!(
            "-S takes a TOS byte 0..255 or a DSCP name such as af11 or ef, not '{s}' (--dscp takes DSCP values 0..63)"
        ))
    })
}

fn bad_dscp(s: &str) -> String {
    format!("'{s}' is not a valid DSCP; use 0..63 or a name such as ef, af41 or cs1")
}

/// Decimal, 0x-hex or 0-octal, as iperf3 accepts for -S.
fn parse_int(s: &str) -> Option<u32> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u32::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u32::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

impl Args {
    fn family(&self) -> Result<Family, UsageError> {
        match (self.v4, self.v6) {
            (true, true) => Err(usage("-4 and -6 cannot be used together")),
            (true, false) => Ok(Family::V4),
            (false, true) => Ok(Family::V6),
            _ => Ok(Family::Any),
        }
    }

    fn mode(&self) -> Mode {
        if self.json_stream {
            Mode::JsonStream
        } else if self.json {
            Mode::Json
        } else {
            Mode::Text
        }
    }

    fn bind_ip(&self) -> Result<Option<IpAddr>, UsageError> {
        self.bind
            .as_ref()
            .map(|b| {
                let (addr, _) = split_dev(b);
                addr.parse::<IpAddr>()
                    .map_err(|_| usage(format!("-B needs an IP address, not '{b}'")))
            })
            .transpose()
    }

    /// The interface to bind to: `--bind-dev`, else `-B ADDR%DEV`, else `-c HOST%DEV`
    /// (the last given wins in iperf3; here `--bind-dev` is the explicit one).
    fn bind_dev(&self) -> Result<Option<String>, UsageError> {
        let dev = self
            .bind_dev
            .clone()
            .or_else(|| self.bind.as_deref().and_then(|b| split_dev(b).1))
            .or_else(|| self.client.as_deref().and_then(|c| split_dev(c).1));
        if let Some(d) = &dev
            && (d.is_empty() || d.len() >= libc_ifnamsiz() || d.contains(['/', ' ']))
        {
            return Err(usage(format!("'{d}' is not a network interface name")));
        }
        Ok(dev)
    }

    /// `--cntl-ka[=IDLE/INTV/CNT]`, checked as iperf3 checks it: given an idle time,
    /// it must exceed INTV × CNT.
    fn cntl_ka(&self) -> Result<Option<Keepalive>, UsageError> {
        let Some(arg) = &self.cntl_ka else {
            return Ok(None);
        };
        let mut f = arg.splitn(3, '/');
        let mut field = |name: &str| -> Result<Option<u32>, UsageError> {
            match f.next().map(str::trim).filter(|v| !v.is_empty()) {
                None => Ok(None),
                Some(v) => v
                    .parse::<u32>()
                    .ok()
                    .filter(|&n| n > 0 && n <= 32767)
                    .map(Some)
                    .ok_or_else(|| {
                        usage(format!(
                            "--cntl-ka: {name} must be a whole number from 1 to 32767, not '{v}'"
                        ))
                    }),
            }
        };
        let ka = Keepalive {
            idle_s: field("IDLE")?,
            interval_s: field("INTV")?,
            count: field("CNT")?,
        };
        if let Some(idle) = ka.idle_s
            && idle <= ka.interval_s.unwrap_or(0) * ka.count.unwrap_or(0)
        {
            return Err(usage(format!(
                "--cntl-ka: the idle time ({idle} s) must be longer than INTV × CNT"
            )));
        }
        Ok(Some(ka))
    }

    /// The `--timestamps` format when output is text (iperf3 stamps only its text).
    pub fn text_timestamps(&self) -> Option<&str> {
        match self.mode() {
            Mode::Text => self.timestamps.as_deref(),
            _ => None,
        }
    }

    /// The options that belong to this side only.
    fn side_opts(&self) -> Result<SideOpts, UsageError> {
        Ok(SideOpts {
            json_stream_full: self.json_stream_full_output,
            bind_dev: self.bind_dev()?,
            snd_timeout_ms: self.snd_timeout.filter(|&t| t > 0),
            rcv_timeout: self.rcv_timeout.map(Duration::from_millis),
            file: self.file.clone(),
            file_max_bytes: None,
            // iperf3: a level below 0 means all (4); netmeter has one level.
            debug: self
                .debug
                .as_deref()
                .map(|l| {
                    l.trim()
                        .parse::<i32>()
                        .map(|v| v.clamp(0, 4) as u8)
                        .map_err(|_| {
                            usage(format!("-d takes a debug level such as -d=4, not '{l}'"))
                        })
                })
                .transpose()?,
            cntl_ka: self.cntl_ka()?,
        })
    }

    /// The server's [`Policy`] from its flags.
    fn server_policy(&self) -> Result<Policy, UsageError> {
        let nets = |flag: &str, list: &[String]| -> Result<Vec<ipnet::IpNet>, UsageError> {
            // An empty --allow would allow everyone: a list that came out empty (say
            // from an unset shell variable) is a mistake, not "no restriction".
            if !list.is_empty() && list.iter().all(|n| n.trim().is_empty()) {
                return Err(usage(format!(
                    "{flag} needs at least one address or network, such as 10.0.0.0/8"
                )));
            }
            list.iter()
                .map(|n| n.trim())
                .filter(|n| !n.is_empty())
                .map(|n| {
                    n.parse::<ipnet::IpNet>()
                        .or_else(|_| n.parse::<IpAddr>().map(ipnet::IpNet::from))
                        .map_err(|_| {
                            usage(format!(
                                "{flag}: '{n}' is not an address or a network such as 10.0.0.0/8"
                            ))
                        })
                })
                .collect()
        };
        Ok(Policy {
            max_tests: self.max_tests,
            max_duration_s: self.server_max_duration.filter(|&d| d > 0),
            bitrate_limit: self.server_bitrate_limit()?,
            max_streams: self.max_streams,
            max_tests_per_source: self
                .max_tests_per_source
                .unwrap_or_else(|| Policy::default_per_source(self.max_tests)),
            test_idle_s: self
                .test_idle_timeout
                .unwrap_or(crate::engine::server::policy::DEFAULT_TEST_IDLE_S),
            conn_rate: self
                .max_conn_rate
                .as_deref()
                .map(ConnRate::parse)
                .transpose()
                .map_err(usage)?,
            allow: nets("--allow", &self.allow)?,
            deny: nets("--deny", &self.deny)?,
        })
    }

    /// `--server-bitrate-limit RATE[/SEC]`: bits/s (0 = none) and the averaging window
    /// (iperf3's default 5 s; 0 or 0.1 to 60 s, as iperf3 checks it).
    fn server_bitrate_limit(&self) -> Result<Option<(u64, f64)>, UsageError> {
        let Some(arg) = &self.server_bitrate_limit else {
            return Ok(None);
        };
        let (rate, window) = match arg.split_once('/') {
            Some((r, w)) => {
                let w: f64 = w
                    .trim()
                    .parse()
                    .ok()
                    .filter(|w: &f64| w.is_finite())
                    .ok_or_else(|| {
                        usage(format!(
                            "--server-bitrate-limit: '{w}' is not a number of seconds"
                        ))
                    })?;
                if w != 0.0 && !(0.1..=60.0).contains(&w) {
                    return Err(usage(
                        "--server-bitrate-limit's averaging interval must be 0 or 0.1 to 60 seconds",
                    ));
                }
                (r, w)
            }
            None => (arg.as_str(), 5.0),
        };
        not_negative(rate, || {
            "--server-bitrate-limit must be 0 or a positive rate".into()
        })?;
        let bps =
            units::parse_rate(rate).map_err(|e| usage(format!("--server-bitrate-limit: {e}")))?;
        Ok((bps > 0).then_some((bps, window)))
    }

    /// `--server-max-file-size SIZE`: what `-F` may write per test (0 = no limit).
    fn server_max_file_size(&self) -> Result<Option<u64>, UsageError> {
        let Some(arg) = &self.server_max_file_size else {
            return Ok(Some(
                crate::engine::disk_file::DEFAULT_SERVER_MAX_FILE_BYTES,
            ));
        };
        not_negative(arg, || {
            "--server-max-file-size must be 0 (no limit) or a size such as 10G".into()
        })?;
        let n =
            units::parse_bytes(arg).map_err(|e| usage(format!("--server-max-file-size: {e}")))?;
        Ok((n > 0).then_some(n))
    }

    fn interval(&self) -> Result<f64, UsageError> {
        let i = self.interval;
        // iperf3 stops at 0.1 s; netmeter reports down to 1 ms.
        if i != 0.0 && !(0.001..=60.0).contains(&i) {
            return Err(usage(format!(
                "invalid report interval {i}; use 0 (off) or 0.001 to 60 seconds"
            )));
        }
        Ok(i)
    }

    fn histograms(&self) -> Result<Option<f64>, UsageError> {
        match self.histograms {
            Some(b) if !(b > 0.0 && b <= 1000.0) => Err(usage(
                "--histograms bin width must be between 0 and 1000 ms",
            )),
            h => Ok(h),
        }
    }

    /// Resolve the flags into what to run.
    pub fn resolve(&self) -> Result<Command, UsageError> {
        if self.version {
            return Ok(Command::Version);
        }
        if let Some(p) = &self.plot {
            if self.client.is_none() || self.find_max_rate {
                return Err(usage(
                    "--plot draws the charts of one client test; use it with -c HOST",
                ));
            }
            tools::check_plot_file(p, "--plot")?;
        }
        let roles = [self.server, self.client.is_some(), self.loopback]
            .iter()
            .filter(|&&b| b)
            .count();
        if roles == 0 {
            return Err(usage(
                "choose a role: -s (server), -c HOST (client) or --loopback; see --help",
            ));
        }
        if roles > 1 {
            return Err(usage("use only one of -s, -c and --loopback"));
        }
        self.sctp_check()?;
        let format = match &self.format {
            Some(f) => Format::parse(f).map_err(usage)?,
            None => Format::Auto,
        };
        let csv = self.csv_columns()?;
        if let Some(c) = multicast_flags::command(self, format) {
            return c;
        }
        if self.server {
            return self.server_command(format, csv.as_ref());
        }
        if self.one_off || self.daemon || self.idle_timeout.is_some() {
            return Err(usage(
                "-1, -D and --idle-timeout are server options (use with -s)",
            ));
        }
        if self.allow_third_party.is_some() {
            return Err(usage(
                "--allow-third-party is a server option (use with -s)",
            ));
        }
        if self.auth.psk_file.is_some() && (self.loopback || self.no_extensions) {
            return Err(usage(
                "--psk-file authenticates to a netmeter server with -c; it does not go with --loopback or --no-extensions",
            ));
        }
        if self.loopback && (self.auth.username.is_some() || self.auth.use_pkcs1_padding) {
            return Err(usage(
                "--loopback's in-process server does not authenticate; --username and --use-pkcs1-padding are for -c",
            ));
        }
        for (used, f) in [
            (self.server_max_duration.is_some(), "--server-max-duration"),
            (
                self.server_bitrate_limit.is_some(),
                "--server-bitrate-limit",
            ),
            (self.max_streams.is_some(), "--max-streams"),
            (
                self.max_tests_per_source.is_some(),
                "--max-tests-per-source",
            ),
            (self.test_idle_timeout.is_some(), "--test-idle-timeout"),
            (
                self.server_max_file_size.is_some(),
                "--server-max-file-size",
            ),
            (self.max_conn_rate.is_some(), "--max-conn-rate"),
            (!self.allow.is_empty(), "--allow"),
            (!self.deny.is_empty(), "--deny"),
            (self.audit_log.is_some(), "--audit-log"),
            (self.audit_log_max_size.is_some(), "--audit-log-max-size"),
            (self.audit_log_keep.is_some(), "--audit-log-keep"),
            (self.metrics.is_some(), "--metrics"),
        ] {
            if used {
                return Err(usage(format!("{f} is a server option (use with -s)")));
            }
        }
        let cfg = self.client_config(format)?;
        if self.repeat.is_some() && (self.loopback || self.find_max_rate) {
            return Err(usage(
                "--repeat repeats one client test; it does not go with --loopback or --find-max-rate",
            ));
        }
        if csv.is_some() && (self.loopback || self.find_max_rate) {
            return Err(usage(
                "--csv writes one client test's rows; it cannot be used with --loopback or --find-max-rate",
            ));
        }
        if self.loopback {
            return Ok(self.loopback_command(cfg));
        }
        if self.find_max_rate {
            return self.find_max_rate_command(cfg);
        }
        if let Some(n) = self.repeat {
            if cfg.spec.until_interrupted() {
                return Err(usage(
                    "--repeat needs tests that end; -t 0 runs until interrupted",
                ));
            }
            if cfg.mode == Mode::JsonStream || csv.is_some() || self.plot.is_some() {
                return Err(usage(
                    "--repeat prints text or one -J document, not --json-stream, --csv or --plot (for CSV: netmeter csv REPEAT.json)",
                ));
            }
            let plan = crate::experiment::repeat::Plan::from_flags(
                n,
                self.repeat_gap,
                self.confidence.as_deref(),
            )
            .map_err(usage)?;
            return Ok(Command::Repeat {
                cfg,
                plan,
                logfile: self.logfile.clone(),
            });
        }
        if self.confidence.is_some() {
            return Err(usage(
                "--confidence needs --repeat N (the most runs to make)",
            ));
        }
        Ok(Command::Client {
            cfg,
            logfile: self.logfile.clone(),
            plot: self.plot.clone(),
            csv,
        })
    }

    /// `--audit-log` with its rotation (`--audit-log-max-size`, `--audit-log-keep`).
    fn audit_target(&self) -> Result<Option<AuditTarget>, UsageError> {
        let Some(path) = &self.audit_log else {
            if self.audit_log_max_size.is_some() || self.audit_log_keep.is_some() {
                return Err(usage(
                    "--audit-log-max-size and --audit-log-keep need --audit-log FILE",
                ));
            }
            return Ok(None);
        };
        let max_bytes = match self.audit_log_max_size.as_deref() {
            None => Rotation::DEFAULT.max_bytes,
            Some(s) => crate::units::parse_bytes(s).map_err(|_| {
                usage(format!(
                    "--audit-log-max-size takes a size such as 16M (0 = never rotate), not '{s}'"
                ))
            })?,
        };
        let keep = self.audit_log_keep.unwrap_or(Rotation::DEFAULT.keep);
        Ok(Some(AuditTarget {
            path: path.clone(),
            rotation: (max_bytes > 0).then_some(Rotation { max_bytes, keep }),
        }))
    }

    /// `-s`: the server's configuration.
    fn server_command(
        &self,
        format: Format,
        csv: Option<&crate::report::csv::Columns>,
    ) -> Result<Command, UsageError> {
        if csv.is_some() {
            return Err(usage("--csv writes a client test's rows; use it with -c"));
        }
        self.reject_client_only()?;
        if self.max_tests == 0 {
            return Err(usage("--max-tests must be at least 1"));
        }
        if let Some(t) = self.idle_timeout
            && !(1..=86400).contains(&t)
        {
            return Err(usage("--idle-timeout must be between 1 and 86400 seconds"));
        }
        // iperf3 also uses it to restart a server stuck in a test; netmeter's sessions
        // end a stuck test by their own deadlines (ARCHITECTURE.md, "Robustness"), so
        // without -1 the option would do nothing: say so rather than ignore it.
        if self.idle_timeout.is_some() && !self.one_off {
            return Err(usage(
                "--idle-timeout needs -1 (exit after that many idle seconds); without -1 netmeter already ends a stuck test by its own deadlines",
            ));
        }
        // -F is one file per test: tests side by side would write over each other.
        if self.file.is_some() && self.max_tests > 1 {
            return Err(usage(
                "-F gives every test one file; with --max-tests above 1 tests at once would write over each other (run one server per file)",
            ));
        }
        Ok(Command::Server {
            cfg: ServerConfig {
                port: self.port,
                bind: self.bind_ip()?,
                family: self.family()?,
                one_off: self.one_off,
                policy: self.server_policy()?,
                audit_log: self.audit_target()?,
                metrics: self
                    .metrics
                    .as_deref()
                    .map(|m| {
                        m.parse::<std::net::SocketAddr>().map_err(|_| {
                            usage(format!(
                                "--metrics takes ADDR:PORT such as 127.0.0.1:9201 or [::]:9201, not '{m}'"
                            ))
                        })
                    })
                    .transpose()?,
                idle_timeout: self.idle_timeout.map(Duration::from_secs),
                mode: self.mode(),
                verbose: self.verbose,
                format,
                interval_s: self.interval()?,
                histograms: self.histograms()?,
                auth: self.auth.server()?,
                psk: self.auth.psk()?.map(std::sync::Arc::new),
                third_party: self.third_party_policy()?,
                side: SideOpts {
                    file_max_bytes: self.server_max_file_size()?,
                    ..self.side_opts()?
                },
                clock: crate::clock::system(),
            },
            daemon: self.daemon,
            pidfile: self.pidfile.clone(),
            logfile: self.logfile.clone(),
        })
    }

    /// `--loopback`: a TCP and a UDP test of `cfg` against an in-process server.
    fn loopback_command(&self, cfg: ClientConfig) -> Command {
        let mut tcp = cfg.clone();
        tcp.host = "127.0.0.1".into();
        if self.time.is_none() && self.bytes.is_none() && self.blockcount.is_none() {
            tcp.spec.end = EndCondition::Time(3.0);
        }
        tcp.spec.protocol = Protocol::Tcp;
        let mut udp = tcp.clone();
        udp.spec.protocol = Protocol::Udp;
        if self.length.is_none() {
            tcp.spec.block_len = wire::bulk_tcp_block(tcp.spec.parallel, host_cpus());
            udp.len_given = false;
        }
        if self.bitrate.is_none() {
            // A rate that shows pacing, loss and jitter figures without flooding.
            udp.spec.rate_bps = 100_000_000;
        }
        Command::Loopback {
            tcp,
            udp,
            logfile: self.logfile.clone(),
        }
    }

    /// `--find-max-rate`: UDP trials of `cfg`, timed.
    fn find_max_rate_command(&self, mut cfg: ClientConfig) -> Result<Command, UsageError> {
        if !(0.0..=100.0).contains(&self.loss_target) {
            return Err(usage(
                "--loss-target must be a percentage between 0 and 100",
            ));
        }
        if self.bytes.is_some() || self.blockcount.is_some() {
            return Err(usage(
                "--find-max-rate runs timed trials; use -t, not -n or -k",
            ));
        }
        if cfg.spec.until_interrupted() {
            return Err(usage(
                "--find-max-rate needs a trial length; -t 0 (until interrupted) is not one",
            ));
        }
        cfg.spec.protocol = Protocol::Udp;
        if self.length.is_none() {
            cfg.spec.block_len = wire::UDP_DEFAULT_LEN;
        }
        if self.time.is_none() {
            cfg.spec.end = EndCondition::Time(2.0);
        }
        let start_bps = if self.bitrate.is_some() && cfg.spec.rate_bps > 0 {
            cfg.spec.rate_bps
        } else {
            100_000_000
        };
        Ok(Command::FindMaxRate {
            cfg,
            loss_target: self.loss_target,
            start_bps,
            logfile: self.logfile.clone(),
        })
    }

    /// `--csv [--fields a,b,c]`: the columns, or `None` without `--csv`.
    fn csv_columns(&self) -> Result<Option<crate::report::csv::Columns>, UsageError> {
        use crate::report::csv::Columns;
        if !self.csv {
            return match self.fields {
                Some(_) => Err(usage("--fields chooses CSV columns; use it with --csv")),
                None => Ok(None),
            };
        }
        if self.json || self.json_stream {
            return Err(usage("--csv and -J/--json-stream cannot be used together"));
        }
        match &self.fields {
            Some(f) => Columns::parse(f).map(Some).map_err(usage),
            None => Ok(Some(Columns::default())),
        }
    }

    /// `--sctp`, `--nstreams`, `-X`: one sentence, whether this kernel has SCTP or not.
    fn sctp_check(&self) -> Result<(), UsageError> {
        let flag = if self.sctp {
            "--sctp"
        } else if self.nstreams.is_some() {
            "--nstreams"
        } else if !self.xbind.is_empty() {
            "-X/--xbind"
        } else {
            return Ok(());
        };
        Err(usage(
            match crate::sock::stream_protocol_available(libc::IPPROTO_SCTP) {
                Err(e) => format!(
                    "{flag} needs SCTP, which this kernel does not have ({e}); use TCP or UDP (-u)"
                ),
                Ok(()) => format!(
                    "{flag}: this kernel has SCTP, but netmeter does not run SCTP tests yet; use TCP or UDP (-u)"
                ),
            },
        ))
    }

    /// `-A N[,M]`: local CPU and the server's.
    fn affinity(&self) -> Result<(Option<u32>, Option<u32>), UsageError> {
        let Some(a) = &self.affinity else {
            return Ok((None, None));
        };
        let cpu = |s: &str| {
            s.trim()
                .parse::<u32>()
                .ok()
                .filter(|&c| c < 1024)
                .ok_or_else(|| usage(format!("-A needs CPU numbers like 0 or 0,1, not '{a}'")))
        };
        Ok(match a.split_once(',') {
            None => (Some(cpu(a)?), None),
            Some((n, m)) => (Some(cpu(n)?), Some(cpu(m)?)),
        })
    }

    /// `--working-load[=up|down|bidir][,N]`: N bulk TCP streams (default 4) in the given
    /// direction (default up) plus one request/response probe that uses the bounceback
    /// settings. The first quarter of the test (0.5 to 2 s) probes the idle path.
    /// Unpaced bulk TCP, where the block size only sets the write size: netmeter then
    /// writes `TCP_BULK_BLOCK`s. Everything whose meaning depends on the block (-b pacing,
    /// -k counts, --trip-times frames, bursts, frames, request sizes) keeps iperf3's
    /// 128 KiB so that the same flags ask for the same traffic as with iperf3.
    fn bulk_tcp(&self, spec: &TestSpec) -> bool {
        spec.protocol == Protocol::Tcp
            && spec.rate_bps == 0
            && self.blockcount.is_none()
            && !spec.trip_times
            && spec.profile.is_none()
            && spec.bounceback.is_none()
            && !spec.connect_only
    }

    fn with_working_load(&self, mut spec: TestSpec) -> Result<TestSpec, UsageError> {
        let Some(arg) = &self.working_load else {
            return Ok(spec);
        };
        let bad = || {
            usage(format!(
                "--working-load takes up, down or bidir and an optional stream count, e.g. --working-load=down,8; not '{arg}'"
            ))
        };
        let (dir, n) = match arg.split_once(',') {
            Some((d, n)) => (d.trim(), n.trim().parse::<u32>().map_err(|_| bad())?),
            None if arg.trim().parse::<u32>().is_ok() => ("up", arg.trim().parse().unwrap_or(4)),
            None => (arg.trim(), 4),
        };
        let (up, down) = match dir {
            "" | "up" => (true, false),
            "down" => (false, true),
            "bidir" => (true, true),
            _ => return Err(bad()),
        };
        if !(1..=wire::MAX_STREAMS / 2).contains(&n) {
            return Err(usage(format!(
                "--working-load takes 1 to {} streams",
                wire::MAX_STREAMS / 2
            )));
        }
        if spec.protocol != Protocol::Tcp || spec.direction != Direction::Upload {
            return Err(usage(
                "--working-load runs TCP load in its own direction; drop -u, -R and --bidir",
            ));
        }
        if spec.connect_only {
            return Err(usage(
                "--working-load and --connect-only cannot be combined",
            ));
        }
        let EndCondition::Time(t) = spec.end else {
            return Err(usage(
                "--working-load runs for a time; use -t, not -n or -k",
            ));
        };
        if t < 2.0 {
            return Err(usage("--working-load needs at least -t 2"));
        }
        if spec.bounceback.is_none() {
            // The probe: iperf 2's default bounceback sizes.
            spec.bounceback = Some(wire::Bounceback {
                request_len: 100,
                reply_len: 100,
                hold_us: 0,
                burst: 1,
                busy_poll_us: 0,
            });
        }
        spec.working_load = Some(wire::WorkingLoad {
            up,
            down,
            streams: n,
            idle_ms: ((t / 4.0).clamp(0.5, 2.0) * 1000.0) as u32,
        });
        Ok(spec)
    }

    fn bounceback_spec(
        &self,
        protocol: Protocol,
        direction: Direction,
    ) -> Result<Option<wire::Bounceback>, UsageError> {
        if !self.bounceback {
            if self.busy_poll.is_some() {
                return Err(usage("--busy-poll applies to --bounceback tests"));
            }
            return Ok(None);
        }
        if direction != Direction::Upload {
            return Err(usage("--bounceback cannot be combined with -R or --bidir"));
        }
        let size = |s: &str, what: &str| -> Result<u32, UsageError> {
            let v = units::parse_bytes(s).map_err(|e| usage(format!("{what}: {e}")))?;
            u32::try_from(v).map_err(|_| usage(format!("{what} is too large")))
        };
        let request_len = size(&self.bounceback_request, "--bounceback-request")?;
        let reply_len = match &self.bounceback_reply {
            Some(r) => size(r, "--bounceback-reply")?,
            None => request_len,
        };
        if !(0.0..=1000.0).contains(&self.bounceback_hold) {
            return Err(usage("--bounceback-hold must be between 0 and 1000 ms"));
        }
        let b = wire::Bounceback {
            request_len,
            reply_len,
            hold_us: (self.bounceback_hold * 1000.0).round() as u32,
            burst: self.bounceback_burst,
            busy_poll_us: self.busy_poll.unwrap_or(0),
        };
        crate::spec::check_bounceback(&b, protocol).map_err(|e| usage(e.message))?;
        Ok(Some(b))
    }

    /// `--connect-only` is a TCP, client-to-server, timed test of its own.
    fn connect_only_check(&self) -> Result<bool, UsageError> {
        if !self.connect_only {
            return Ok(false);
        }
        let clash: &[(bool, &str)] = &[
            (self.udp, "-u"),
            (self.reverse, "-R"),
            (self.bidir, "--bidir"),
            (self.bounceback, "--bounceback"),
            (self.trip_times, "--trip-times"),
            (self.bytes.is_some(), "-n (it runs for -t seconds)"),
            (self.blockcount.is_some(), "-k (it runs for -t seconds)"),
            (self.loopback, "--loopback"),
            (self.find_max_rate, "--find-max-rate"),
            (
                self.no_extensions,
                "--no-extensions (it needs a netmeter server)",
            ),
        ];
        match clash.iter().find(|(used, _)| *used) {
            Some((_, f)) => Err(usage(format!("--connect-only cannot be combined with {f}"))),
            None => Ok(true),
        }
    }

    fn reject_client_only(&self) -> Result<(), UsageError> {
        if self.repeat.is_some() || self.confidence.is_some() {
            return Err(usage(
                "--repeat and --confidence repeat a client test: netmeter -c HOST --repeat N",
            ));
        }
        let used: &[(bool, &str)] = &[
            (self.time.is_some(), "-t"),
            (self.bytes.is_some(), "-n"),
            (self.blockcount.is_some(), "-k"),
            (self.parallel.is_some(), "-P"),
            (self.reverse, "-R"),
            (self.bidir, "--bidir"),
            (self.udp, "-u"),
            (self.bitrate.is_some(), "-b"),
            (self.length.is_some(), "-l"),
            (self.window.is_some(), "-w"),
            (self.title.is_some(), "-T"),
            (self.line_rate.is_some(), "--line-rate"),
            (self.get_server_output, "--get-server-output"),
            (self.connect_only, "--connect-only"),
            (self.burst_size.is_some(), "--burst-size"),
            (self.burst_period.is_some(), "--burst-period"),
            (self.isochronous.is_some(), "--isochronous"),
            (self.txstart_time.is_some(), "--txstart-time"),
            (self.no_gso, "--no-gso"),
            (self.no_gro, "--no-gro"),
            (self.gsro, "--gsro"),
            (self.flowlabel.is_some(), "-L"),
            (self.dont_fragment, "--dont-fragment"),
            (self.pacing_timer.is_some(), "--pacing-timer"),
            (self.no_fq_socket_pacing, "--no-fq-socket-pacing"),
        ];
        if let Some((_, f)) = used.iter().find(|(u, _)| *u) {
            return Err(usage(format!(
                "{f} is a client option; the client sends it to the server"
            )));
        }
        Ok(())
    }

    /// `-t`/`-n`/`-k` (one at most) or `-F`'s size: when the test ends.
    fn end_condition(
        &self,
        protocol: Protocol,
        direction: Direction,
    ) -> Result<EndCondition, UsageError> {
        let ends = [
            self.time.is_some(),
            self.bytes.is_some(),
            self.blockcount.is_some(),
        ]
        .iter()
        .filter(|&&b| b)
        .count();
        if ends > 1 {
            return Err(usage(
                "only one test end condition (-t, -n, -k) may be given",
            ));
        }
        if self.file.is_some() && protocol == Protocol::Udp {
            return Err(usage(
                "-F: cannot transfer a file over UDP (iperf3 cannot either)",
            ));
        }
        // -F without an end condition: the file's size, as iperf3.
        let file_len = match &self.file {
            Some(f) if ends == 0 && direction != Direction::Reverse => Some(
                std::fs::metadata(f)
                    .map_err(|e| usage(format!("-F: cannot read {}: {e}", f.display())))?
                    .len(),
            ),
            _ => None,
        };
        Ok(if let Some(n) = file_len.filter(|&n| n > 0) {
            EndCondition::Bytes(n)
        } else if let Some(n) = &self.bytes {
            not_negative(n, || "-n must be more than 0 bytes".into())?;
            let n = units::parse_bytes(n).map_err(|e| usage(format!("-n: {e}")))?;
            if n == 0 {
                return Err(usage("-n must be more than 0 bytes"));
            }
            EndCondition::Bytes(n)
        } else if let Some(k) = &self.blockcount {
            not_negative(k, || "-k must be more than 0 blocks".into())?;
            let k = units::parse_bytes(k).map_err(|e| usage(format!("-k: {e}")))?;
            if k == 0 {
                return Err(usage("-k must be more than 0 blocks"));
            }
            EndCondition::Blocks(k)
        } else {
            let t = self.time.unwrap_or(10.0);
            if !(0.0..=wire::MAX_TIME as f64).contains(&t) || t.is_nan() {
                return Err(usage(format!(
                    "-t must be between 0 and {} seconds",
                    wire::MAX_TIME
                )));
            }
            EndCondition::Time(t)
        })
    }

    /// `-P`, `-l` and `-b RATE[/BURST]`, each checked against iperf3's limits.
    fn streams_and_rate(
        &self,
        protocol: Protocol,
    ) -> Result<(u32, usize, u64, Option<u32>), UsageError> {
        let parallel = self.parallel.unwrap_or(1);
        if parallel == 0 || parallel > wire::MAX_STREAMS {
            return Err(usage(format!(
                "-P {parallel} is out of range; use 1 to {} parallel streams",
                wire::MAX_STREAMS
            )));
        }
        let block_len = match &self.length {
            Some(l) => {
                not_negative(l, || match protocol {
                    Protocol::Tcp => "-l for TCP must be between 1 byte and 1M".into(),
                    Protocol::Udp => "-l for UDP must be between 16 and 65507 bytes".into(),
                })?;
                let l = units::parse_bytes(l).map_err(|e| usage(format!("-l: {e}")))? as usize;
                match protocol {
                    Protocol::Tcp if l == 0 || l > wire::TCP_MAX_BLOCK => {
                        return Err(usage("-l for TCP must be between 1 byte and 1M"));
                    }
                    Protocol::Udp if !(wire::UDP_MIN_LEN..=wire::UDP_MAX_LEN).contains(&l) => {
                        return Err(usage("-l for UDP must be between 16 and 65507 bytes"));
                    }
                    _ => l,
                }
            }
            None => match protocol {
                Protocol::Tcp => wire::TCP_DEFAULT_BLOCK,
                Protocol::Udp => wire::UDP_DEFAULT_LEN,
            },
        };
        let (rate_bps, burst) = match &self.bitrate {
            Some(b) => {
                not_negative(b, || "-b must be 0 (unlimited) or a positive rate".into())?;
                units::parse_rate_burst(b).map_err(|e| usage(format!("-b: {e}")))?
            }
            None => (
                if protocol == Protocol::Udp {
                    1_048_576 // iperf3's UDP_RATE
                } else {
                    0
                },
                None,
            ),
        };
        if let Some(b) = burst
            && (b == 0 || b > wire::MAX_BURST)
        {
            return Err(usage(format!("burst {b} is out of range; use 1 to 1000")));
        }
        Ok((parallel, block_len, rate_bps, burst))
    }

    /// `-w`, `-M`, `-S`/`--dscp`, `-O` and `--fq-rate`.
    #[allow(clippy::type_complexity)]
    fn socket_and_timing(&self) -> Result<(Option<u64>, Option<u8>, f64, Option<u64>), UsageError> {
        let window = self
            .window
            .as_ref()
            .map(|w| {
                not_negative(w, || "-w must be between 0 and 512M".into())?;
                units::parse_bytes(w).map_err(|e| usage(format!("-w: {e}")))
            })
            .transpose()?;
        if window.is_some_and(|w| w > wire::MAX_WINDOW) {
            return Err(usage("-w is larger than the 512M maximum"));
        }
        // The kernel refuses TCP_MAXSEG below TCP_MIN_MSS (88) with EINVAL; iperf3 caps
        // at MAX_MSS and treats 0 as "not set".
        if self
            .mss
            .is_some_and(|m| m != 0 && !(MIN_MSS..=wire::MAX_MSS).contains(&m))
        {
            return Err(usage(format!(
                "-M must be between {MIN_MSS} and {} bytes (the kernel refuses a smaller MSS)",
                wire::MAX_MSS
            )));
        }
        let tos = match (&self.tos, &self.dscp) {
            (Some(_), Some(_)) => return Err(usage("use either -S or --dscp, not both")),
            (Some(t), None) => Some(parse_tos(t)?),
            (None, Some(d)) => Some(parse_dscp(d)? << 2),
            _ => None,
        };
        let omit = self.omit.unwrap_or(0.0);
        if !(0.0..=wire::MAX_OMIT as f64).contains(&omit) {
            return Err(usage("-O must be between 0 and 600 seconds"));
        }
        let fq_rate_bps = self
            .fq_rate
            .as_ref()
            .map(|r| {
                not_negative(r, || "--fq-rate must be 0 or a positive rate".into())?;
                units::parse_rate(r).map_err(|e| usage(format!("--fq-rate: {e}")))
            })
            .transpose()?;
        let fq_rate_bps = match (self.no_fq_socket_pacing, fq_rate_bps) {
            (false, r) => r,
            (true, None) => Some(0),
            (true, Some(_)) => {
                return Err(usage(
                    "--no-fq-socket-pacing means --fq-rate 0; give one of them, not both",
                ));
            }
        };
        Ok((window, tos, omit, fq_rate_bps))
    }

    /// Switches that apply only to one protocol or direction.
    fn check_switches(&self, protocol: Protocol, direction: Direction) -> Result<(), UsageError> {
        // iperf3 3.22 runs a TCP test with --gsro (it only touches UDP), so netmeter
        // accepts it too; the netmeter-only switches say they do nothing there.
        if (self.no_gso || self.no_gro)
            && protocol == Protocol::Tcp
            && !self.loopback
            && !self.find_max_rate
        {
            return Err(usage("--no-gso and --no-gro apply to UDP tests (-u)"));
        }
        if self.no_gso && self.gsro {
            return Err(usage("--gsro asks for GSO and GRO; drop it or --no-gso"));
        }
        if self.no_gro && self.gsro {
            return Err(usage("--gsro asks for GSO and GRO; drop it or --no-gro"));
        }
        if self.rcv_timeout.is_some() && direction == Direction::Upload && !self.loopback {
            return Err(usage(
                "--rcv-timeout applies to a receiving client: use it with -R or --bidir (or on the server)",
            ));
        }
        if self.file.is_some() && self.skip_rx_copy {
            return Err(usage(
                "-F writes the received bytes to the file; --skip-rx-copy would discard them",
            ));
        }
        if self.mptcp && protocol == Protocol::Udp {
            return Err(usage("-m (MPTCP) applies to TCP tests; drop -u"));
        }
        if self.zerocopy && protocol == Protocol::Udp {
            return Err(usage("-Z (zero-copy) applies to TCP only"));
        }
        Ok(())
    }

    fn client_config(&self, format: Format) -> Result<ClientConfig, UsageError> {
        let protocol = if self.udp {
            Protocol::Udp
        } else {
            Protocol::Tcp
        };
        let direction = match (self.reverse, self.bidir) {
            (true, true) => return Err(usage("-R and --bidir cannot be used together")),
            (true, false) => Direction::Reverse,
            (false, true) => Direction::Bidir,
            _ => Direction::Upload,
        };
        let end = self.end_condition(protocol, direction)?;
        let (parallel, block_len, rate_bps, burst) = self.streams_and_rate(protocol)?;
        let (window, tos, omit, fq_rate_bps) = self.socket_and_timing()?;
        self.check_switches(protocol, direction)?;
        let spec = TestSpec {
            protocol,
            direction,
            end,
            parallel,
            block_len,
            rate_bps,
            burst,
            omit_s: omit,
            window,
            mss: self.mss.filter(|&m| m != 0),
            nodelay: self.nodelay,
            tos,
            congestion: self.congestion.clone(),
            fq_rate_bps,
            udp_seq64: self.udp_counters_64bit,
            repeating_payload: self.repeating_payload,
            zerocopy: self.zerocopy,
            skip_rx_copy: self.skip_rx_copy,
            get_server_output: self.get_server_output,
            title: self.title.clone(),
            extra_data: self.extra_data.clone(),
            bounceback: self.bounceback_spec(protocol, direction)?,
            server_affinity: self.affinity()?.1,
            trip_times: self.trip_times,
            connect_only: self.connect_only_check()?,
            profile: None,
            working_load: None,
            no_gso: self.no_gso,
            no_gro: self.no_gro,
            dont_fragment: self.dont_fragment,
            mptcp: self.mptcp,
            flowlabel: self
                .flowlabel
                .as_deref()
                .map(|l| {
                    parse_int(l)
                        .filter(|v| (1..=wire::MAX_FLOWLABEL).contains(v))
                        .ok_or_else(|| {
                            usage(format!(
                                "-L needs a flow label from 1 to 0xfffff, not '{l}'"
                            ))
                        })
                })
                .transpose()?,
            pacing_timer_us: match &self.pacing_timer {
                None => wire::DEFAULT_PACING_TIMER_US,
                Some(t) => {
                    not_negative(t, || "--pacing-timer must be 0 or more microseconds".into())?;
                    let v =
                        units::parse_bytes(t).map_err(|e| usage(format!("--pacing-timer: {e}")))?;
                    u32::try_from(v).map_err(|_| usage("--pacing-timer is too large"))?
                }
            },
        };
        let spec = self.with_working_load(spec)?;
        let mut spec = self.with_profile(spec)?;
        if self.length.is_none() && self.bulk_tcp(&spec) {
            spec.block_len = wire::bulk_tcp_block(spec.parallel, host_cpus());
        }
        Ok(ClientConfig {
            in_process_server: false,
            host: self
                .client
                .as_deref()
                .map(|c| split_dev(c).0.to_string())
                .unwrap_or_default(),
            port: self.port,
            spec,
            len_given: self.length.is_some(),
            interval_s: self.interval()?,
            format,
            mode: self.mode(),
            verbose: self.verbose,
            family: self.family()?,
            bind: self.bind_ip()?,
            cport: self.cport,
            connect_timeout: Duration::from_millis(self.connect_timeout.unwrap_or(10_000)),
            extensions: !self.no_extensions,
            affinity: self.affinity()?.0,
            histograms: self.histograms()?,
            txstart: self.txstart()?,
            auth: self.auth.client(std::env::var("IPERF3_PASSWORD").ok())?,
            psk: self.auth.psk()?,
            side: self.side_opts()?,
            line_rate: self
                .line_rate
                .as_deref()
                .map(crate::host::facts::LineRate::parse)
                .transpose()
                .map_err(usage)?,
            clock: crate::clock::system(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Command, UsageError> {
        let mut v = vec!["netmeter"];
        v.extend_from_slice(args);
        match parse_args(v) {
            Ok(a) => a.resolve(),
            Err(ArgsError::Usage(e)) => Err(e),
            Err(ArgsError::Clap(e)) => Err(usage(e.to_string())),
        }
    }

    /// The one-sentence error for `args`, which must fail in netmeter's own words.
    fn sentence(args: &[&str]) -> String {
        let mut v = vec!["netmeter"];
        v.extend_from_slice(args);
        let e = match parse_args(v) {
            Ok(a) => a.resolve().unwrap_err(),
            Err(ArgsError::Usage(e)) => e,
            Err(ArgsError::Clap(e)) => panic!("{args:?}: clap's message, not ours: {e}"),
        };
        assert!(!e.0.contains('\n'), "{args:?}: {e}");
        e.0
    }

    #[test]
    fn negative_values_are_out_of_range_not_missing() {
        for (args, want) in [
            (&["-c", "h", "-P", "-1"][..], "-P must be between 1 and 128"),
            (
                &["-c", "h", "-t", "-1"],
                "-t must be between 0 and 86400 seconds",
            ),
            (
                &["-c", "h", "-b", "-5"],
                "-b must be 0 (unlimited) or a positive rate",
            ),
            (
                &["-c", "h", "-l", "-1"],
                "-l for TCP must be between 1 byte and 1M",
            ),
            (
                &["-c", "h", "-u", "-l", "-1"],
                "-l for UDP must be between 16",
            ),
            (&["-c", "h", "-n", "-1"], "-n must be more than 0 bytes"),
            (&["-c", "h", "-k", "-1"], "-k must be more than 0 blocks"),
            (&["-c", "h", "-w", "-1"], "-w must be between 0 and 512M"),
            (&["-c", "h", "-O", "-1"], "-O must be between 0 and 600"),
            (&["-c", "h", "-M", "-1"], "-M must be between"),
            (&["-c", "h", "-p", "-1"], "-p must be between 0 and 65535"),
            (
                &["-c", "h", "--cport", "-1"],
                "--cport must be between 1 and 65535",
            ),
            (
                &["-c", "h", "--fq-rate", "-1"],
                "--fq-rate must be 0 or a positive rate",
            ),
            (
                &["-s", "--idle-timeout", "-1"],
                "--idle-timeout must be between 1",
            ),
            (&["-c", "h", "-P", "0"], "-P must be between 1 and 128"),
            (&["-c", "h", "-P", "x"], "-P needs a whole number, not 'x'"),
        ] {
            let e = sentence(args);
            assert!(e.starts_with(want), "{args:?}: {e}");
        }
    }

    #[test]
    fn file_and_skip_rx_copy_are_refused_together() {
        assert_eq!(
            sentence(&["-c", "h", "-R", "-F", "/dev/null", "--skip-rx-copy"]),
            "-F writes the received bytes to the file; --skip-rx-copy would discard them"
        );
    }

    #[test]
    fn no_fq_socket_pacing_is_fq_rate_zero() {
        let cfg = |args: &[&str]| client(&[&["-c", "h"], args].concat());
        assert_eq!(cfg(&["--no-fq-socket-pacing"]).spec.fq_rate_bps, Some(0));
        assert_eq!(cfg(&[]).spec.fq_rate_bps, None);
        assert_eq!(
            sentence(&["-c", "h", "--no-fq-socket-pacing", "--fq-rate", "1G"]),
            "--no-fq-socket-pacing means --fq-rate 0; give one of them, not both"
        );
    }

    /// Issue 19 item 8: a value that does not parse is refused naming the option and
    /// the value (not "invalid float literal"), a negative quantity is a value out of
    /// range (not an unknown flag `-5`), and an unknown option gets a tip only when the
    /// tip is close.
    #[test]
    fn parse_errors_name_the_option_and_the_value() {
        for (args, want) in [
            (
                &["-c", "h", "-t", "abc"][..],
                "-t needs a number of seconds such as 10 or 0.5, not 'abc'",
            ),
            (
                &["-c", "h", "-t", "1s"],
                "-t needs a number of seconds such as 10 or 0.5, not '1s'",
            ),
            (
                &["-c", "h", "-O", "abc"],
                "-O needs a number of seconds such as 2, not 'abc'",
            ),
            (
                &["-c", "h", "-i", "abc"],
                "-i needs a number of seconds such as 1 or 0.5, not 'abc'",
            ),
            (
                &["-c", "h", "--histograms", "x"],
                "--histograms needs a bin width in milliseconds such as 0.1, not 'x'",
            ),
            (
                &["-c", "h", "-b", "-5M"],
                "-b must be 0 (unlimited) or a positive rate, not '-5M'",
            ),
            (
                &["-c", "h", "-n", "-1K"],
                "-n must be more than 0 bytes, not '-1K'",
            ),
            (
                &["-c", "h", "--no-such-option"],
                "unknown option '--no-such-option'; netmeter --help lists the options",
            ),
            (
                &["-c", "h", "--servr"],
                "unknown option '--servr'; did you mean '--server'?",
            ),
            (
                &["-c", "h", "-J", "csv", "r.json"],
                "'csv' is a subcommand: give it first, as in netmeter csv --help",
            ),
        ] {
            assert_eq!(sentence(args), want, "{args:?}");
        }
        // Every number option names itself and the value, whatever its parser.
        for flag in [
            "-i",
            "-t",
            "-O",
            "--bounceback-hold",
            "--loss-target",
            "--burst-period",
            "--txstart-time",
            "--repeat-gap",
            "-P",
            "-p",
        ] {
            let e = sentence(&["-c", "h", flag, "zz"]);
            assert!(e.starts_with(flag) && e.contains("'zz'"), "{flag}: {e}");
        }
    }

    /// Issue 19 item 9: `-s ADDR` (iperf3 ignores the address) is refused pointing to
    /// -B; `-s -B ADDR` is the server on that address.
    #[test]
    fn server_address_points_to_bind() {
        assert_eq!(
            sentence(&["-s", "10.0.0.1", "-p", "12345"]),
            "-s takes no address ('10.0.0.1'); to listen on 10.0.0.1 only, use -s -B 10.0.0.1"
        );
        assert_eq!(
            sentence(&["-p", "12345", "--server", "fe80::1"]),
            "-s takes no address ('fe80::1'); to listen on fe80::1 only, use -s -B fe80::1"
        );
        assert!(sentence(&["-s", "node1"]).contains("use -s -B ADDR"));
        match parse(&["-s", "-B", "10.0.0.1", "-p", "12345"]) {
            Ok(Command::Server { cfg, .. }) => {
                assert_eq!(cfg.bind, Some("10.0.0.1".parse().unwrap()));
                assert_eq!(cfg.port, 12345);
            }
            other => panic!("{other:?}"),
        }
        assert!(sentence(&["-c", "h", "extra"]).starts_with("unexpected argument 'extra'"));
        assert_eq!(
            sentence(&["-c", "h", "--timestamps", "%T"]),
            "--timestamps takes its value after '=': --timestamps=%T"
        );
        assert_eq!(
            sentence(&["-c", "h", "-t"]),
            "--time <SEC> needs a value; none was given"
        );
        assert_eq!(
            sentence(&["-c", "h", "-d", "4"]),
            "-d takes its value after '=': -d=4"
        );
    }

    /// Issue 19 item 10: `-S` takes iperf 2's DSCP names as their TOS byte; anything
    /// else is refused naming --dscp.
    #[test]
    fn tos_takes_dscp_names_as_iperf2() {
        let tos = |v: &str| client(&["-c", "h", "-S", v]).spec.tos;
        assert_eq!(tos("af11"), Some(0x28));
        assert_eq!(tos("AF43"), Some(38 << 2));
        assert_eq!(tos("cs1"), Some(0x20));
        assert_eq!(tos("ef"), Some(0xb8));
        assert_eq!(tos("va"), Some(44 << 2));
        assert_eq!(tos("le"), Some(4));
        assert_eq!(tos("0x28"), Some(0x28));
        assert_eq!(tos("255"), Some(255));
        for bad in ["af14", "af51", "cs8", "256", "xx", "-1"] {
            let e = sentence(&["-c", "h", "-S", bad]);
            assert_eq!(
                e,
                format!(
                    "-S takes a TOS byte 0..255 or a DSCP name such as af11 or ef, not '{bad}' (--dscp takes DSCP values 0..63)"
                )
            );
        }
        assert_eq!(
            client(&["-c", "h", "--dscp", "cs7"]).spec.tos,
            Some(56 << 2)
        );
        assert!(sentence(&["-c", "h", "--dscp", "cs8"]).contains("not a valid DSCP"));
    }

    #[test]
    fn idle_timeout_without_one_off_is_refused_not_ignored() {
        let e = sentence(&["-s", "--idle-timeout", "5"]);
        assert!(e.starts_with("--idle-timeout needs -1"), "{e}");
        assert!(matches!(
            parse(&["-s", "-1", "--idle-timeout", "5"]),
            Ok(Command::Server { .. })
        ));
    }

    #[test]
    fn mss_is_checked_against_the_kernel_minimum() {
        let e = sentence(&["-c", "h", "-M", "10"]);
        assert!(
            e.starts_with("-M must be between 88 and 32767 bytes"),
            "{e}"
        );
        assert_eq!(client(&["-c", "h", "-M", "88"]).spec.mss, Some(88));
        assert_eq!(client(&["-c", "h", "-M", "0"]).spec.mss, None);
        assert!(sentence(&["-c", "h", "-M", "32768"]).starts_with("-M must be between"));
    }

    #[test]
    fn help_states_what_the_options_do() {
        use clap::CommandFactory;
        let help = Args::command().render_long_help().to_string();
        let line = |flag: &str| {
            let i = help.find(flag).unwrap_or_else(|| panic!("{flag} missing"));
            let rest = &help[i..];
            // The option's paragraph ends at the next blank line.
            rest[..rest.find("\n\n").unwrap_or(rest.len())].replace('\n', " ")
        };
        let t = line("-t, --time");
        assert!(t.contains("default 10 secs; 0 = until interrupted"), "{t}");
        let l = line("-l, --length");
        assert!(l.contains("1M") && !l.contains("TCP, default 128K"), "{l}");
        let z = line("-Z, --zerocopy");
        assert!(
            z.contains("MSG_ZEROCOPY") && z.contains("sendfile otherwise"),
            "{z}"
        );
    }

    /// iperf3 3.22's options that issue 10 added: each is in `--help`, and none is in the
    /// "not supported yet" list any more.
    const IPERF3_322_ADDED: &[&str] =
        &["--timestamps", "--forceflush", "--json-stream-full-output"];

    #[test]
    fn iperf3_322_options_are_in_the_help() {
        use clap::CommandFactory;
        let help = Args::command().render_long_help().to_string();
        for o in IPERF3_322_ADDED {
            // A short flag is shown as "-F, --file".
            let shown = if o.starts_with("--") {
                o.to_string()
            } else {
                format!("{o}, --")
            };
            assert!(help.contains(&shown), "{o} missing from --help");
        }
    }

    #[test]
    fn timestamps_default_to_iperf3s_format_in_text_only() {
        let a = |args: &[&str]| {
            let mut v = vec!["netmeter", "-c", "h"];
            v.extend_from_slice(args);
            match parse_args(v) {
                Ok(a) => a,
                Err(_) => panic!("{args:?}"),
            }
        };
        assert_eq!(a(&["--timestamps"]).text_timestamps(), Some("%c "));
        assert_eq!(a(&["--timestamps=%T "]).text_timestamps(), Some("%T "));
        assert_eq!(a(&["--timestamps", "-J"]).text_timestamps(), None);
        assert_eq!(a(&[]).text_timestamps(), None);
        assert!(
            client(&["-c", "h", "--json-stream-full-output"])
                .side
                .json_stream_full
        );
    }

    #[test]
    fn server_file_size_cap_and_one_test_at_a_time() {
        let side = |args: &[&str]| match parse(args).unwrap() {
            Command::Server { cfg, .. } => cfg.side,
            other => panic!("{other:?}"),
        };
        assert_eq!(side(&["-s", "-F", "x"]).file_max_bytes, Some(1 << 30));
        let capped = side(&["-s", "-F", "x", "--server-max-file-size", "10M"]);
        assert_eq!(capped.file_max_bytes, Some(10 << 20));
        let none = side(&["-s", "-F", "x", "--server-max-file-size", "0"]);
        assert_eq!(none.file_max_bytes, None);
        assert!(
            sentence(&["-s", "--server-max-file-size", "-1"]).contains("--server-max-file-size")
        );
        assert!(sentence(&["-s", "-F", "x", "--max-tests", "2"]).contains("--max-tests above 1"));
        // A client writes what its own test receives: no cap.
        assert_eq!(
            client(&["-c", "h", "-R", "-F", "x"]).side.file_max_bytes,
            None
        );
    }

    #[test]
    fn server_limits_parse_as_iperf3s() {
        let side = |args: &[&str]| match parse(args).unwrap() {
            Command::Server { cfg, .. } => cfg.policy,
            other => panic!("{other:?}"),
        };
        let s = side(&[
            "-s",
            "--server-bitrate-limit",
            "10M/2",
            "--server-max-duration",
            "30",
        ]);
        assert_eq!(s.bitrate_limit, Some((10_000_000, 2.0)));
        assert_eq!(s.max_duration_s, Some(30));
        assert_eq!(
            side(&["-s", "--server-bitrate-limit", "1G"]).bitrate_limit,
            Some((1_000_000_000, 5.0))
        );
        assert_eq!(
            side(&["-s", "--server-max-duration", "0"]).max_duration_s,
            None
        );
        for (args, want) in [
            (
                &["-s", "--server-bitrate-limit", "1M/0.05"][..],
                "--server-bitrate-limit's averaging interval",
            ),
            (
                &["-s", "--server-bitrate-limit", "1M/x"],
                "--server-bitrate-limit: 'x'",
            ),
            (
                &["-s", "--server-bitrate-limit", "-1"],
                "--server-bitrate-limit must be 0",
            ),
            (
                &["-s", "--server-max-duration", "-1"],
                "--server-max-duration must be between 0 and 86400",
            ),
            (
                &["-c", "h", "--server-max-duration", "5"],
                "--server-max-duration is a server option",
            ),
            (
                &["-c", "h", "--server-bitrate-limit", "5M"],
                "--server-bitrate-limit is a server option",
            ),
        ] {
            let e = sentence(args);
            assert!(e.starts_with(want), "{args:?}: {e}");
        }
    }

    #[test]
    fn server_policy_flags_parse_into_one_policy() {
        let policy = |args: &[&str]| match parse(args).unwrap() {
            Command::Server { cfg, .. } => cfg.policy,
            other => panic!("{other:?}"),
        };
        let p = policy(&[
            "-s",
            "--allow",
            "10.0.0.0/8, 127.0.0.1",
            "--allow",
            "::1",
            "--deny",
            "10.9.0.0/16",
            "--max-streams",
            "8",
            "--max-conn-rate",
            "5/s",
            "--max-tests",
            "3",
        ]);
        let nets = |v: &[ipnet::IpNet]| v.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(nets(&p.allow), ["10.0.0.0/8", "127.0.0.1/32", "::1/128"]);
        assert_eq!(nets(&p.deny), ["10.9.0.0/16"]);
        assert_eq!((p.max_streams, p.max_tests), (Some(8), 3));
        assert_eq!(
            p.conn_rate,
            Some(ConnRate {
                burst: 5,
                period: Duration::from_secs(1)
            })
        );
        let open = policy(&["-s"]);
        assert!(open.allow.is_empty() && open.deny.is_empty() && open.conn_rate.is_none());
        // Per-source cap: all slots but one by default; the idle timeout 10 s.
        assert_eq!((p.max_tests_per_source, p.test_idle_s), (2, 10));
        assert_eq!((open.max_tests_per_source, open.test_idle_s), (1, 10));
        let q = policy(&[
            "-s",
            "--max-tests",
            "4",
            "--max-tests-per-source",
            "4",
            "--test-idle-timeout",
            "0",
        ]);
        assert_eq!((q.max_tests_per_source, q.test_idle_s), (4, 0));
        for (args, want) in [
            (
                &["-s", "--deny", "10.0.0.0/33"][..],
                "--deny: '10.0.0.0/33'",
            ),
            (&["-s", "--allow", "example.com"], "--allow: 'example.com'"),
            (&["-s", "--allow", ""], "--allow needs at least one"),
            (&["-s", "--deny", " , "], "--deny needs at least one"),
            (&["-s", "--max-conn-rate", "0/s"], "--max-conn-rate: '0'"),
            (&["-s", "--max-streams", "0"], "--max-streams must be"),
            (
                &["-s", "--max-tests-per-source", "0"],
                "--max-tests-per-source must be",
            ),
            (
                &["-c", "h", "--test-idle-timeout", "5"],
                "--test-idle-timeout is a server option",
            ),
            (&["-s", "--metrics", "9201"], "--metrics takes ADDR:PORT"),
            (
                &["-c", "h", "--allow", "10.0.0.0/8"],
                "--allow is a server option",
            ),
            (
                &["-c", "h", "--audit-log", "x"],
                "--audit-log is a server option",
            ),
            (
                &["-c", "h", "--metrics", "127.0.0.1:1"],
                "--metrics is a server option",
            ),
        ] {
            let e = sentence(args);
            assert!(e.starts_with(want), "{args:?}: {e}");
        }
    }

    #[test]
    fn the_audit_log_rotates_by_default_and_as_told() {
        let target = |args: &[&str]| match parse(args).unwrap() {
            Command::Server { cfg, .. } => cfg.audit_log,
            other => panic!("{other:?}"),
        };
        assert_eq!(target(&["-s"]), None);
        let t = target(&["-s", "--audit-log", "/x/a.jsonl"]).unwrap();
        assert_eq!(t.path, PathBuf::from("/x/a.jsonl"));
        assert_eq!(t.rotation, Some(Rotation::DEFAULT));
        let t = target(&[
            "-s",
            "--audit-log",
            "a",
            "--audit-log-max-size",
            "12M",
            "--audit-log-keep",
            "0",
        ])
        .unwrap();
        assert_eq!(
            t.rotation,
            Some(Rotation {
                max_bytes: 12 << 20,
                keep: 0
            })
        );
        let t = target(&["-s", "--audit-log", "a", "--audit-log-max-size", "0"]).unwrap();
        assert_eq!(t.rotation, None);
        for (args, want) in [
            (
                &["-s", "--audit-log-max-size", "1M"][..],
                "--audit-log-max-size and --audit-log-keep need --audit-log",
            ),
            (
                &["-s", "--audit-log", "a", "--audit-log-max-size", "big"],
                "--audit-log-max-size takes a size",
            ),
            (
                &["-s", "--audit-log", "a", "--audit-log-keep", "101"],
                "--audit-log-keep",
            ),
            (
                &["-c", "h", "--audit-log-keep", "2"],
                "--audit-log-keep is a server option",
            ),
        ] {
            let e = sentence(args);
            assert!(e.starts_with(want), "{args:?}: {e}");
        }
    }

    #[test]
    fn bind_dev_comes_from_the_flag_or_a_percent_suffix() {
        let c = client(&["-c", "h%eth1"]);
        assert_eq!(
            (c.host.as_str(), c.side.bind_dev.as_deref()),
            ("h", Some("eth1"))
        );
        let c = client(&["-c", "h", "-B", "10.0.0.1%eth2"]);
        assert_eq!(c.bind, Some("10.0.0.1".parse().unwrap()));
        assert_eq!(c.side.bind_dev.as_deref(), Some("eth2"));
        let c = client(&["-c", "h%eth1", "--bind-dev", "eth3"]);
        assert_eq!(c.side.bind_dev.as_deref(), Some("eth3"));
        // An IPv6 link-local literal keeps its zone: it is not a device to bind to.
        let c = client(&["-c", "fe80::1%eth0"]);
        assert_eq!((c.host.as_str(), c.side.bind_dev), ("fe80::1%eth0", None));
        assert!(
            sentence(&["-c", "h", "--bind-dev", "a-name-far-too-long"])
                .contains("not a network interface")
        );
    }

    #[test]
    fn socket_options_resolve() {
        let c = client(&[
            "-c",
            "h",
            "-u",
            "--dont-fragment",
            "--snd-timeout",
            "500",
            "--cntl-ka=60//3",
        ]);
        assert!(c.spec.dont_fragment);
        assert_eq!(c.side.snd_timeout_ms, Some(500));
        assert_eq!(
            c.side.cntl_ka,
            Some(Keepalive {
                idle_s: Some(60),
                interval_s: None,
                count: Some(3)
            })
        );
        assert_eq!(
            client(&["-c", "h", "--cntl-ka"]).side.cntl_ka,
            Some(Keepalive::default())
        );
        assert_eq!(
            client(&["-c", "h", "--snd-timeout", "0"])
                .side
                .snd_timeout_ms,
            None
        );
        assert!(
            sentence(&["-c", "h", "--snd-timeout", "-1"])
                .starts_with("--snd-timeout must be between 0")
        );
        assert!(sentence(&["-c", "h", "--cntl-ka=5/1/5"]).contains("must be longer than INTV"));
    }

    #[test]
    fn sctp_options_say_what_is_missing_in_one_sentence() {
        let have = crate::sock::stream_protocol_available(libc::IPPROTO_SCTP).is_ok();
        for (args, flag) in [
            (&["-c", "h", "--sctp"][..], "--sctp"),
            (&["-c", "h", "--nstreams", "4"], "--nstreams"),
            (&["-s", "-X", "10.0.0.1"], "-X/--xbind"),
        ] {
            let e = sentence(args);
            assert!(e.starts_with(flag), "{e}");
            if have {
                assert!(e.contains("does not run SCTP tests yet"), "{e}");
            } else {
                assert!(
                    e.contains("needs SCTP, which this kernel does not have"),
                    "{e}"
                );
            }
        }
    }

    #[test]
    fn flowlabel_and_pacing_timer_parse_as_iperf3s() {
        assert_eq!(
            client(&["-c", "h", "-L", "0x12345"]).spec.flowlabel,
            Some(0x12345)
        );
        assert_eq!(client(&["-c", "h", "-L", "17"]).spec.flowlabel, Some(17));
        for bad in ["0", "0x100000", "x"] {
            assert!(
                sentence(&["-c", "h", "-L", bad]).starts_with("-L needs a flow label"),
                "{bad}"
            );
        }
        assert_eq!(client(&["-c", "h"]).spec.pacing_timer_us, 1000);
        assert_eq!(
            client(&["-c", "h", "--pacing-timer", "2K"])
                .spec
                .pacing_timer_us,
            2048
        );
        assert!(
            sentence(&["-c", "h", "--pacing-timer", "-1"]).starts_with("--pacing-timer must be")
        );
    }

    #[test]
    fn gsro_is_accepted_for_tcp_too_as_iperf3_does() {
        assert_eq!(client(&["-c", "h", "--gsro"]).spec.protocol, Protocol::Tcp);
        assert!(
            sentence(&["-c", "h", "--no-gso"]).starts_with("--no-gso and --no-gro apply to UDP")
        );
        assert!(sentence(&["-s", "--gsro"]).starts_with("--gsro is a client option"));
        for f in [
            &["-L", "5"][..],
            &["--dont-fragment"],
            &["--pacing-timer", "10"],
        ] {
            let e = sentence(&[&["-s"], f].concat());
            assert!(e.contains("is a client option"), "{f:?}: {e}");
        }
    }

    fn client(args: &[&str]) -> ClientConfig {
        match parse(args).unwrap() {
            Command::Client { cfg, .. } => cfg,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn iperf3_defaults() {
        let c = client(&["-c", "h"]);
        assert_eq!(c.port, 5201);
        assert_eq!(c.spec.end, EndCondition::Time(10.0));
        assert_eq!(c.spec.rate_bps, 0);
        let u = client(&["-c", "h", "-u"]);
        assert_eq!(u.spec.rate_bps, 1_048_576);
    }

    #[test]
    fn tcp_block_default_depends_on_what_the_block_means() {
        let len = |a: &[&str]| {
            let mut v = vec!["-c", "h"];
            v.extend_from_slice(a);
            client(&v).spec.block_len
        };
        // Unpaced bulk TCP writes 1 MiB blocks while each stream can have a CPU, else
        // 128 KiB (chosen by measurement).
        assert_eq!(len(&[]), wire::TCP_BULK_BLOCK);
        assert_eq!(
            len(&["-R", "-P", "4"]),
            wire::bulk_tcp_block(4, host_cpus())
        );
        assert_eq!(len(&["-P", "128"]), wire::TCP_DEFAULT_BLOCK);
        assert_eq!(len(&["-n", "10M"]), wire::TCP_BULK_BLOCK);
        // Where the block has a meaning, iperf3's 128 KiB.
        assert_eq!(len(&["-b", "10M"]), 128 * 1024);
        assert_eq!(len(&["-k", "10"]), 128 * 1024);
        assert_eq!(len(&["--trip-times"]), 128 * 1024);
        assert_eq!(
            len(&["--burst-size", "64K", "--burst-period", "0.1"]),
            128 * 1024
        );
        // An explicit -l always wins.
        assert_eq!(len(&["-l", "64K"]), 64 * 1024);
        assert_eq!(len(&["-u"]), wire::UDP_DEFAULT_LEN);
    }

    #[test]
    fn units_and_options() {
        let c = client(&[
            "-c", "h", "-u", "-b", "10M/8", "-l", "1448", "-P", "4", "--dscp", "ef",
        ]);
        assert_eq!(c.spec.rate_bps, 10_000_000);
        assert_eq!(c.spec.burst, Some(8));
        assert_eq!(c.spec.block_len, 1448);
        assert_eq!(c.spec.parallel, 4);
        assert_eq!(c.spec.tos, Some(46 << 2));
        assert_eq!(client(&["-c", "h", "-S", "0x10"]).spec.tos, Some(16));
        assert_eq!(
            client(&["-c", "h", "--dscp", "af41"]).spec.tos,
            Some(34 << 2)
        );
        assert_eq!(
            client(&["-c", "h", "-n", "1M"]).spec.end,
            EndCondition::Bytes(1 << 20)
        );
    }

    #[test]
    fn invalid_combinations_are_one_sentence_errors() {
        for args in [
            vec!["-c", "h", "-R", "--bidir"],
            vec!["-c", "h", "-t", "5", "-n", "1M"],
            vec!["-c", "h", "-n", "1M", "-k", "10"],
            vec!["-c", "h", "-P", "0"],
            vec!["-c", "h", "-P", "129"],
            vec!["-c", "h", "-b", "fast"],
            vec!["-c", "h", "-u", "-l", "8"],
            vec!["-c", "h", "--dscp", "af55"],
            vec!["-s", "-t", "5"],
            vec!["-s", "-c", "h"],
            vec![],
        ] {
            let e = parse(&args).unwrap_err().0;
            assert!(!e.is_empty() && !e.contains('\n'), "{args:?}: {e}");
        }
    }

    #[test]
    fn loopback_runs_tcp_then_udp() {
        match parse(&["--loopback"]).unwrap() {
            Command::Loopback { tcp, udp, .. } => {
                assert_eq!(tcp.spec.protocol, Protocol::Tcp);
                assert_eq!(udp.spec.protocol, Protocol::Udp);
                assert_eq!(tcp.host, "127.0.0.1");
            }
            other => panic!("{other:?}"),
        }
    }
}
