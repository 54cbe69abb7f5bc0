//! iperf 2's command line: `netmeter iperf2 ARGS…`, or netmeter invoked under the name
//! `iperf` (a link named so), takes iperf 2's options with iperf 2's meanings and
//! prints iperf 2's layouts (`report::iperf2`).
//!
//! The options (2.2.1's `Settings.cpp` table) are read by their own clap command, then
//! written into netmeter's flat flags ([`Args`]) and resolved by the same code as
//! netmeter's own command line, so an iperf 2 option means what its netmeter
//! counterpart means, checked the same way. An option netmeter cannot honour is
//! refused in one sentence naming it (docs/iperf2.md lists each option and why).

use super::{Args, Command, UsageError, usage};
use crate::engine::client::ClientConfig;
use crate::engine::client::Iperf2Opts;
use crate::engine::output;
use crate::engine::server::{self, ServerConfig};
use crate::report::iperf2::render::Iperf2Renderer;
use crate::report::iperf2::server::{HistSpec, ServerLayout};
use crate::report::iperf2::{Bounceback, Exclude, Iperf2Ctx, Layout};
use clap::Parser;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// iperf 2's options, as `iperf --help` (2.2.1) names them.
#[derive(Debug, Parser, Default)]
#[command(
    name = "iperf",
    disable_help_flag = true,
    disable_version_flag = true,
    allow_negative_numbers = true,
    after_help = "iperf 2's defaults and units: port 5001, no interval reports without -i, \
1470-byte datagrams and 128 KByte writes; in -b, -l, -n and -w k m g are powers of ten and \
K M G powers of two. -e, --trip-times, --bounceback and --histograms print iperf 2's \
enhanced layout, -y C its CSV. Run under the name iperf (a link), netmeter takes the same \
command line. Every iperf 2 option, supported or not: docs/iperf2.md.\n\n\
Examples:\n  netmeter iperf2 -s\n  netmeter iperf2 -c HOST -e -i 1 -t 10\n  \
netmeter iperf2 -c HOST -u -b 100pps -e --trip-times\n  netmeter iperf2 -c HOST -y C -i 1\n\n\
Exit status: 0 when the test ran, 1 on a usage error or a failed test."
)]
pub struct Iperf2Args {
    /// Run as a client connecting to HOST.
    #[arg(short = 'c', long = "client", value_name = "HOST")]
    client: Option<String>,
    /// Run as a server (a netmeter server: it serves TCP and UDP at once).
    #[arg(short = 's', long = "server")]
    server: bool,
    /// Port to listen on or connect to.
    #[arg(short = 'p', long = "port", default_value_t = 5001)]
    port: u16,
    /// Use UDP rather than TCP.
    #[arg(short = 'u', long = "udp")]
    udp: bool,
    /// Rate in bits/s (k m g = 10^3, K M G = 2^10), or N pps: datagrams (writes) per second. MEAN,STDEV is refused.
    #[arg(short = 'b', long = "bandwidth", allow_hyphen_values = true)]
    bandwidth: Option<String>,
    /// Read/write length (default 128K, UDP 1470).
    #[arg(short = 'l', long = "len")]
    len: Option<String>,
    /// Seconds to transmit for (default 10).
    #[arg(short = 't', long = "time", allow_hyphen_values = true)]
    time: Option<f64>,
    /// Bytes to transmit (instead of -t).
    #[arg(short = 'n', long = "num")]
    num: Option<String>,
    /// Seconds between interval reports (default none).
    #[arg(short = 'i', long = "interval")]
    interval: Option<f64>,
    /// Parallel streams.
    #[arg(short = 'P', long = "parallel")]
    parallel: Option<u32>,
    /// Reverse: the server sends, the client receives.
    #[arg(short = 'R', long = "reverse")]
    reverse: bool,
    /// Both directions at once on each connection (TCP).
    #[arg(long = "full-duplex")]
    full_duplex: bool,
    /// Dual test: both directions at once, the server connecting back to the client (TCP).
    #[arg(short = 'd', long = "dualtest")]
    dualtest: bool,
    /// Tradeoff test: this client's test, then the server connecting back and sending the same (TCP).
    #[arg(short = 'r', long = "tradeoff")]
    tradeoff: bool,
    /// Enhanced reports: iperf 2's -e columns.
    #[arg(short = 'e', long = "enhanced")]
    enhanced: bool,
    /// Detect the peer's version (netmeter always does).
    #[arg(short = 'X', long = "peer-detect")]
    peer_detect: bool,
    /// IP TOS byte, or a name: af11..af43, cs0..cs7, ef, le, nqb, nqb2, ac_be, ac_bk, ac_vi, ac_vo, lowdelay, throughput, reliability.
    #[arg(short = 'S', long = "tos")]
    tos: Option<String>,
    /// Multicast TTL: refused here (the flat command line's --ttl, docs/multicast.md).
    #[arg(short = 'T', long = "ttl")]
    ttl: Option<String>,
    /// Leave report types out: C connections, D data, M multicast, S settings, V server.
    #[arg(short = 'x', long = "reportexclude")]
    exclude: Option<String>,
    /// Report style: C for comma-separated values.
    #[arg(short = 'y', long = "reportstyle")]
    style: Option<String>,
    /// Append the output to FILE.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Report format letter (accepted; the rows keep iperf 2's adaptive units).
    #[arg(short = 'f', long = "format")]
    format: Option<String>,
    /// One-way delays (the latency columns); needs synchronised clocks.
    #[arg(long = "trip-times")]
    trip_times: bool,
    /// Bounceback test, N requests a burst (default 10); bursts follow each other.
    #[arg(long = "bounceback", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    bounceback: Option<String>,
    /// Seconds between bounceback bursts (default 1; 0: back to back).
    #[arg(long = "bounceback-period")]
    bounceback_period: Option<String>,
    /// Server delay before each reply, milliseconds.
    #[arg(long = "bounceback-hold")]
    bounceback_hold: Option<f64>,
    /// Bounceback request size.
    #[arg(long = "bounceback-request")]
    bounceback_request: Option<String>,
    /// Bounceback reply size (default: the request size).
    #[arg(long = "bounceback-reply")]
    bounceback_reply: Option<String>,
    /// Isochronous frames: FPS:MEAN,STDEV (default 60:20m,0).
    #[arg(long = "isochronous", num_args = 0..=1, require_equals = true, default_missing_value = "60:20m,0")]
    isochronous: Option<String>,
    /// TCP periodic bursts: bytes a burst (k m g = 10^3, K M G = 2^10).
    #[arg(long = "burst-size")]
    burst_size: Option<String>,
    /// TCP periodic bursts: seconds between bursts.
    #[arg(long = "burst-period")]
    burst_period: Option<f64>,
    /// Start sending at this Unix time (seconds).
    #[arg(long = "txstart-time")]
    txstart_time: Option<f64>,
    /// Latency histograms, bin width as 100u or 1m (default 100u).
    #[arg(long = "histograms", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    histograms: Option<String>,
    /// With several streams, only the sum rows.
    #[arg(long = "sum-only")]
    sum_only: bool,
    /// Socket buffer size (TCP window).
    #[arg(short = 'w', long = "window")]
    window: Option<String>,
    /// TCP maximum segment size.
    #[arg(short = 'M', long = "mss")]
    mss: Option<u32>,
    /// TCP_NODELAY: Nagle's algorithm off.
    #[arg(short = 'N', long = "nodelay")]
    nodelay: bool,
    /// Bind to this local address.
    #[arg(short = 'B', long = "bind", value_name = "HOST")]
    bind: Option<String>,
    /// IPv6 only.
    #[arg(short = 'V', long = "ipv6_domain")]
    ipv6: bool,
    /// Print the version and exit.
    #[arg(short = 'v', long = "version")]
    version: bool,
    /// Print iperf 2's usage and exit.
    #[arg(short = 'h', long = "help")]
    help: bool,
}

/// What `netmeter iperf2` runs.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // built once per process
pub enum Iperf2Command {
    Help,
    Version,
    Client {
        cfg: ClientConfig,
        ctx: Iperf2Ctx,
        output: Option<PathBuf>,
    },
    Server {
        cfg: ServerConfig,
        output: Option<PathBuf>,
    },
}

/// iperf 2's command line when netmeter was asked for it: `netmeter iperf2 ARGS…`, or
/// `argv[0]` names `iperf`. `None`: netmeter's own command line.
pub fn invoked(argv: &[OsString]) -> Option<Result<Iperf2Command, UsageError>> {
    let name = argv.first().map(Path::new).and_then(Path::file_name)?;
    let rest = if name == "iperf" {
        &argv[1..]
    } else if argv.get(1).is_some_and(|a| a == "iperf2") {
        &argv[2..]
    } else {
        return None;
    };
    Some(parse(rest))
}

/// Parse iperf 2's arguments (without the program name).
pub fn parse(args: &[OsString]) -> Result<Iperf2Command, UsageError> {
    let argv = std::iter::once(OsString::from("iperf")).chain(args.iter().cloned());
    let a = Iperf2Args::try_parse_from(argv).map_err(|e| {
        let text = e.to_string();
        let first = text
            .lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("error: ");
        usage(format!("iperf2: {first} (see netmeter iperf2 -h)"))
    })?;
    a.resolve()
}

/// `-b`: `N`, `Npps`/`N pps` (datagrams or writes per second, times the length), or
/// iperf 2's `MEAN,STDEV`, which netmeter does not vary.
fn bandwidth(b: &str, len_bytes: u64) -> Result<String, UsageError> {
    let t = b.trim();
    if t.contains(',') {
        return Err(usage(format!(
            "iperf2: -b {b} asks for a rate varying around a mean (MEAN,STDEV), which netmeter does not send; give one rate such as -b 10M"
        )));
    }
    if let Some(n) = t.strip_suffix("pps").map(str::trim) {
        let pps = quantity(n).ok_or_else(|| {
            usage(format!(
                "iperf2: -b {b} is not a packet rate such as 100pps"
            ))
        })?;
        return Ok(format!("{}", (pps * len_bytes as f64 * 8.0).round() as u64));
    }
    whole(
        "-b",
        t,
        "a rate such as 10m (10^6 bits/s) or 10M (10 x 2^20)",
    )
}

/// iperf 2's `byte_atoi`: a number with an optional unit letter, lower case 10³-based
/// (`k`, `m`, `g`), upper case 2¹⁰-based (`K`, `M`, `G`): `-b 10M` is 10·2²⁰ bits/s in
/// iperf 2, unlike iperf3. `None` for anything else.
pub fn quantity(s: &str) -> Option<f64> {
    let t = s.trim();
    let (num, mult) = match t.chars().last()? {
        'k' => (&t[..t.len() - 1], 1e3),
        'm' => (&t[..t.len() - 1], 1e6),
        'g' => (&t[..t.len() - 1], 1e9),
        'K' => (&t[..t.len() - 1], 1024.0),
        'M' => (&t[..t.len() - 1], 1024.0 * 1024.0),
        'G' => (&t[..t.len() - 1], 1024.0 * 1024.0 * 1024.0),
        _ => (t, 1.0),
    };
    let v: f64 = num.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some(v * mult)
}

/// An iperf 2 quantity option's value as the whole number netmeter's flag takes.
fn whole(flag: &str, v: &str, what: &str) -> Result<String, UsageError> {
    quantity(v)
        .filter(|q| *q <= u64::MAX as f64)
        .map(|q| (q.round() as u64).to_string())
        .ok_or_else(|| usage(format!("iperf2: {flag} {v} is not {what}")))
}

/// [`whole`] of an option given or not.
fn whole_opt(flag: &str, v: &Option<String>, what: &str) -> Result<Option<String>, UsageError> {
    v.as_deref().map(|v| whole(flag, v, what)).transpose()
}

/// iperf 2's `-S` names (`src/dscp.c`, `ipqos[]`): the TOS byte each stands for;
/// otherwise a number (decimal, 0x hex, 0 octal) up to 255.
fn tos_byte(s: &str) -> Result<u8, UsageError> {
    const NAMES: &[(&str, u8)] = &[
        ("af11", 0x28),
        ("af12", 0x30),
        ("af13", 0x38),
        ("af21", 0x48),
        ("af22", 0x50),
        ("af23", 0x58),
        ("af31", 0x68),
        ("af32", 0x70),
        ("af33", 0x78),
        ("af41", 0x88),
        ("af42", 0x90),
        ("af43", 0x98),
        ("cs0", 0x00),
        ("cs1", 0x20),
        ("cs2", 0x40),
        ("cs3", 0x60),
        ("cs4", 0x80),
        ("cs5", 0xa0),
        ("cs6", 0xc0),
        ("cs7", 0xe0),
        ("ef", 0xb8),
        ("le", 0x04),
        ("nqb", 0x2c),
        ("nqb2", 0x14),
        ("ac_be", 0x00),
        ("ac_bk", 0x20),
        ("ac_vi", 0xa0),
        ("ac_vo", 0xc0),
        ("lowdelay", 0x10),
        ("throughput", 0x08),
        ("reliability", 0x04),
    ];
    if let Some(&(_, v)) = NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(s.trim())) {
        return Ok(v);
    }
    super::parse_int(s)
        .filter(|&v| v <= 255)
        .map(|v| v as u8)
        .ok_or_else(|| {
            usage(format!(
                "iperf2: -S {s} is not a TOS byte 0..255 or a name such as af11, ef or ac_vo"
            ))
        })
}

impl Iperf2Args {
    fn resolve(&self) -> Result<Iperf2Command, UsageError> {
        if self.help {
            return Ok(Iperf2Command::Help);
        }
        if self.version {
            return Ok(Iperf2Command::Version);
        }
        if self.server == self.client.is_some() {
            return Err(usage(
                "iperf2: choose one of -s (server) and -c HOST (client); see netmeter iperf2 -h",
            ));
        }
        self.refuse_unsupported()?;
        let layout = match self.style.as_deref() {
            None => Layout::Plain,
            Some("C") | Some("c") => Layout::Csv,
            Some(s) => {
                return Err(usage(format!(
                    "iperf2: -y {s} is not a report style netmeter prints; -y C (CSV) is"
                )));
            }
        };
        let layout = match layout {
            // As iperf 2: these turn the enhanced layout on.
            Layout::Plain
                if self.enhanced
                    || self.trip_times
                    || self.bounceback.is_some()
                    || self.histograms.is_some() =>
            {
                Layout::Enhanced
            }
            l => l,
        };
        let n = netmeter_args(self)?;
        match n.resolve()? {
            Command::Client { mut cfg, .. } => {
                // iperf 2's wire (`engine::iperf2_client`): a real iperf 2 server, or a
                // netmeter server, which serves iperf 2 clients too.
                cfg.iperf2 = Some(self.iperf2_opts()?);
                if let Some(why) = crate::engine::iperf2_client::unsupported(&cfg) {
                    return Err(usage(format!("iperf2: {}", iperf2_words(why))));
                }
                cfg.interval_s = self.interval.unwrap_or(0.0);
                let ctx = Iperf2Ctx {
                    layout,
                    client: true,
                    udp: self.udp,
                    host: cfg.host.clone(),
                    port: cfg.port,
                    pid: std::process::id(),
                    nodelay: self.nodelay || self.bounceback.is_some(),
                    parallel: self.parallel.unwrap_or(1),
                    trip_times: self.trip_times,
                    datagram_len: cfg.spec.block_len as u64,
                    bounceback: cfg.spec.bounceback.map(|b| Bounceback {
                        request_len: b.request_len,
                        reply_len: b.reply_len,
                        hold_us: b.hold_us,
                        burst: b.burst,
                        // The header's "Bursting request" line: iperf 2's second
                        // unless --bounceback-period said otherwise.
                        period_us: cfg
                            .iperf2
                            .and_then(|o| o.bounceback_period)
                            .unwrap_or(std::time::Duration::from_secs(1))
                            .as_micros()
                            .min(u128::from(u32::MAX)) as u32,
                    }),
                    isochronous: cfg.spec.profile.as_ref().and_then(|p| p.isochronous()),
                    burst: match cfg.spec.profile {
                        Some(crate::profile::Profile::Burst { bytes, period_s }) => {
                            Some((bytes, period_s))
                        }
                        _ => None,
                    },
                    exclude: self.excluded(),
                    sum_only: self.sum_only,
                };
                Ok(Iperf2Command::Client {
                    cfg,
                    ctx,
                    output: self.output.clone(),
                })
            }
            Command::Server { mut cfg, .. } => {
                // iperf 2 clients' tests print in iperf 2's server layout
                // (`engine::server::iperf2::print`).
                let histograms = match self.histograms.as_deref() {
                    None => None,
                    Some(h) => Some(
                        HistSpec::parse(h)
                            .map_err(|e| usage(format!("iperf2: --histograms={h}: {e}")))?,
                    ),
                };
                let ctx = Iperf2Ctx {
                    layout,
                    client: false,
                    udp: self.udp,
                    port: cfg.port,
                    pid: std::process::id(),
                    datagram_len: if self.udp { 1470 } else { 128 * 1024 },
                    exclude: self.excluded(),
                    sum_only: self.sum_only,
                    ..Iperf2Ctx::default()
                };
                cfg.iperf2_layout = Some(ServerLayout { ctx, histograms });
                cfg.interval_s = self.interval.unwrap_or(0.0);
                Ok(Iperf2Command::Server {
                    cfg,
                    output: self.output.clone(),
                })
            }
            _ => Err(usage("iperf2: choose -s (server) or -c HOST (client)")),
        }
    }

    /// The options only iperf 2's client has (`engine::iperf2_client::Iperf2Opts`).
    fn iperf2_opts(&self) -> Result<Iperf2Opts, UsageError> {
        let bounceback_period = match self.bounceback_period.as_deref() {
            None => None,
            Some(p) => {
                let s: f64 = p.trim().parse().ok().filter(|s: &f64| s.is_finite() && *s >= 0.0 && *s <= 3600.0).ok_or_else(|| {
                    usage(format!(
                        "iperf2: --bounceback-period {p} is not a number of seconds between 0 and 3600"
                    ))
                })?;
                // As iperf 2: a period under 10 µs means bursts back to back.
                Some(if s > 1e-5 {
                    std::time::Duration::from_secs_f64(s)
                } else {
                    std::time::Duration::ZERO
                })
            }
        };
        Ok(Iperf2Opts {
            dual: self.dualtest,
            tradeoff: self.tradeoff,
            bounceback_period,
            // iperf 2's -R client prints the datagrams' latency without --trip-times,
            // and so does its listener for -d and -r.
            send_time_latency: self.udp && (self.reverse || self.dualtest || self.tradeoff),
            // As iperf 2.2.1's own client lays out its frame fields.
            ..Iperf2Opts::default()
        })
    }

    /// `-x`'s letters (checked by `refuse_unsupported`).
    fn excluded(&self) -> Exclude {
        let x = self.exclude.as_deref().unwrap_or("").to_ascii_uppercase();
        Exclude {
            connections: x.contains('C'),
            data: x.contains('D'),
            settings: x.contains('S'),
            server_reports: x.contains('V'),
        }
    }

    /// Options netmeter cannot honour, each in one sentence.
    fn refuse_unsupported(&self) -> Result<(), UsageError> {
        if self.tradeoff && (self.dualtest || self.full_duplex || self.reverse) {
            return Err(usage(
                "iperf2: -r (the tradeoff test: this client's test, then the server's back) goes with none of -d, --full-duplex and -R",
            ));
        }
        if self.dualtest && (self.full_duplex || self.reverse) {
            return Err(usage(
                "iperf2: -d (the dual test: the server connects back to the client) goes with neither --full-duplex nor -R",
            ));
        }
        if let Some(t) = &self.ttl {
            return Err(usage(format!(
                "iperf2: -T {t} sets a multicast TTL, which netmeter iperf2 does not take yet; use netmeter -c GROUP -u --ttl {t} (docs/multicast.md)"
            )));
        }
        if self.bounceback_period.is_some() && self.bounceback.is_none() {
            return Err(usage("iperf2: --bounceback-period goes with --bounceback"));
        }
        if let Some((x, c)) = self.exclude.as_ref().and_then(|x| {
            x.chars()
                .find(|c| !"CDMSVcdmsv".contains(*c))
                .map(|c| (x, c))
        }) {
            return Err(usage(format!(
                "iperf2: -x {x}: '{c}' is not a report type (C, D, M, S or V)"
            )));
        }
        Ok(())
    }
}

/// A refusal of `engine::iperf2_client::unsupported`, which names netmeter's own
/// options, in the words of iperf 2's command line.
fn iperf2_words(why: &str) -> String {
    why.replace("--iperf2 cannot ", "this client cannot ")
        .replace("--bidir", "--full-duplex")
        .replace("with --iperf2, ", "")
        .replace(" with --iperf2", "")
        .replace(", not --iperf2", "")
}

/// The netmeter flags an iperf 2 command line stands for.
fn netmeter_args(a: &Iperf2Args) -> Result<Args, UsageError> {
    let mut n = super::parse_args(["netmeter"])
        .map_err(|_| usage("iperf2: netmeter's defaults did not parse"))?;
    n.client.client = a.client.clone();
    n.server.server = a.server;
    n.common.port = a.port;
    // A netmeter server serves TCP and UDP clients at once: -s -u needs nothing more.
    n.udp.udp = a.udp && a.client.is_some();
    n.common.bind = a.bind.clone();
    n.common.v6 = a.ipv6;
    n.output.interval = a.interval.unwrap_or(0.0);
    n.output.format = a.format.clone();
    n.client.time = a.time;
    n.client.bytes = whole_opt("-n", &a.num, "a byte count such as 10M")?;
    n.client.parallel = a.parallel;
    n.client.reverse = a.reverse;
    // --full-duplex: both directions at once on each connection (netmeter's --bidir on
    // iperf 2's wire); -d: both directions at once too, the server's on a connection of
    // its own.
    n.client.bidir = a.full_duplex || a.dualtest;
    // iperf 2's default lengths: 1470-byte datagrams, 128 KiB writes.
    let len = a
        .len
        .clone()
        .unwrap_or_else(|| if a.udp { "1470" } else { "128K" }.to_string());
    let len = whole("-l", &len, "a length such as 1470 or 128K")?;
    let len_bytes: u64 = len.parse().unwrap_or(0);
    // A server reads what the client sends (netmeter's server takes no length).
    n.client.length = a.client.is_some().then_some(len);
    n.client.bitrate = a
        .bandwidth
        .as_deref()
        .map(|b| bandwidth(b, len_bytes))
        .transpose()?;
    n.client.tos = a
        .tos
        .as_deref()
        .map(|t| tos_byte(t).map(|v| v.to_string()))
        .transpose()?;
    n.client.window = whole_opt("-w", &a.window, "a window size such as 256K")?;
    n.client.mss = a.mss;
    n.client.nodelay = a.nodelay;
    n.output.logfile = None;
    n.latency.trip_times = a.trip_times;
    if let Some(b) = &a.bounceback {
        n.latency.bounceback = true;
        // iperf 2's --bounceback=N: N requests a burst (10 without N).
        n.latency.bounceback_burst = if b.is_empty() {
            10
        } else {
            b.parse().ok().filter(|&v| v > 0).ok_or_else(|| {
                usage(format!(
                    "iperf2: --bounceback={b} needs a whole number of requests per burst"
                ))
            })?
        };
    }
    if let Some(h) = a.bounceback_hold {
        n.latency.bounceback_hold = h;
    }
    if let Some(r) = &a.bounceback_request {
        n.latency.bounceback_request = r.clone();
    }
    n.latency.bounceback_reply = a.bounceback_reply.clone();
    n.latency.isochronous = a.isochronous.clone();
    n.latency.burst_size = whole_opt("--burst-size", &a.burst_size, "a byte count such as 40K")?;
    n.latency.burst_period = a.burst_period;
    n.hosts.txstart_time = a.txstart_time;
    n.latency.histograms = match a.histograms.as_deref() {
        None => None,
        Some("") => Some(0.1),
        // iperf 2's --histograms=BINWIDTH[u|m],...: the bin width is netmeter's.
        Some(h) => Some(histogram_bin_ms(h)?),
    };
    Ok(n)
}

/// `--histograms=10u` (µs), `=1m` (ms), or a bare number of µs (iperf 2's default
/// unit), as netmeter's bin width in milliseconds.
fn histogram_bin_ms(h: &str) -> Result<f64, UsageError> {
    let first = h.split(',').next().unwrap_or("").trim();
    let bad = || {
        usage(format!(
            "iperf2: --histograms={h} needs a bin width such as 100u or 1m"
        ))
    };
    let (num, scale) = if let Some(n) = first.strip_suffix('m') {
        (n, 1.0)
    } else if let Some(n) = first.strip_suffix('u') {
        (n, 1e-3)
    } else {
        (first, 1e-3)
    };
    let v: f64 = num.parse().map_err(|_| bad())?;
    if !(v > 0.0 && v.is_finite()) {
        return Err(bad());
    }
    Ok(v * scale)
}

/// iperf 2's `-h` text, for the options netmeter takes.
pub const HELP: &str = "\
Usage: iperf [-s|-c host] [options]
       iperf [-h|--help] [-v|--version]
       (netmeter iperf2 [-s|-c host] [options]: the same)

Client/Server:
  -b, --bandwidth #[kmgKMG | pps]  bandwidth to read/send at in bits/sec or packets/sec
  -e, --enhanced           use enhanced reporting giving more tcp/udp and traffic information
  -f, --format    [kmgKMG] format to report: Kbits, Mbits, KBytes, MBytes
  -i, --interval  #        seconds between periodic bandwidth reports
  -l, --len       #[kmKM]  length of buffer to read or write (default 128 KB, UDP 1470)
  -M, --mss       #        set TCP maximum segment size
  -N, --nodelay            set TCP no delay, disabling Nagle's Algorithm
  -o, --output    <file>   output the report or error message to this specified file
  -p, --port      #        client/server port to listen/send on and to connect (default 5001)
  -S, --tos       #        set the socket's IP_TOS (byte) field, or a name such as af11, ef
  -u, --udp                use UDP rather than TCP
  -w, --window    #[KM]    TCP window size (socket buffer size)
  -B, --bind      <host>   bind to <host>, an interface address
  -V, --ipv6_domain        set the domain to IPv6
  -x, --reportexclude [CDMSV]  exclude C(connection) D(data) M(multicast) S(settings) V(server) reports
  -y, --reportstyle C      report as a Comma-Separated Values
      --sum-only           output sum only reports
      --histograms[=binwidth]  latency histograms (with --trip-times)
      --trip-times         enable end to end measurements (requires client and server clock sync)

Server specific:
  -s, --server             run in server mode

Client specific:
  -c, --client    <host>   run in client mode, connecting to <host>
  -d, --dualtest           do a bidirectional test simultaneously (the server connects back)
  -r, --tradeoff           do a bidirectional test individually (the server connects back after)
      --full-duplex        run full duplex test using same socket
  -n, --num       #[kmgKMG]    number of bytes to transmit (instead of -t)
  -P, --parallel  #        number of parallel client threads to run
  -R, --reverse            reverse the test (client receives, server sends)
  -t, --time      #        time in seconds to transmit for (default 10 secs)
      --bounceback[=n]     run a TCP bounceback test with n requests a burst (default 10)
      --bounceback-hold #  request the server to insert a delay of n milliseconds
      --bounceback-period #  seconds between bursts (default 1, 0: back to back)
      --bounceback-request #  bounceback request size
      --bounceback-reply #   bounceback reply size
      --isochronous[=fps:mean,stdev]  send isochronous traffic
      --burst-size #       bytes a burst (TCP periodic bursts)
      --burst-period #     seconds between bursts (TCP periodic bursts)
      --txstart-time       unix epoch time to schedule first write and start traffic

Miscellaneous:
  -h, --help               print this message and quit
  -v, --version            print version information and quit
  -X, --peer-detect        detect the peer's version (netmeter always does)

The client speaks iperf 2's wire: it runs against iperf 2 servers and netmeter servers.
Not supported (refused with the reason): -T, -b MEAN,STDEV;
not yet on iperf 2's wire: --isochronous with -R/--full-duplex, UDP bursts.
See docs/iperf2.md.
";

/// iperf 2's `-v` line, then netmeter's.
pub fn version_text() -> String {
    format!(
        "iperf version 2.2.1 (compatible; netmeter {}) pthreads\n",
        env!("CARGO_PKG_VERSION")
    )
}

/// Run what [`parse`] resolved: help, the version, a client test or a server, in
/// iperf 2's layout.
pub fn run(cmd: Iperf2Command) -> Result<(), crate::engine::TestError> {
    match cmd {
        Iperf2Command::Help => {
            print!("{HELP}");
            Ok(())
        }
        Iperf2Command::Version => {
            print!("{}", version_text());
            Ok(())
        }
        Iperf2Command::Client { cfg, ctx, output } => {
            let _ = crate::sock::catch_stop_signals();
            let w = writer(output.as_deref())?;
            let write = move |s: &str| {
                if let Ok(mut w) = w.lock() {
                    let _ = w.write_all(s.as_bytes());
                    let _ = w.flush();
                }
            };
            let mut r = Iperf2Renderer::new(ctx, Box::new(write));
            let udp = cfg.spec.protocol == crate::spec::Protocol::Udp;
            if cfg.iperf2.is_some_and(|o| o.tradeoff || (o.dual && udp)) {
                r = r.with_listen_window(default_rcvbuf(udp));
            }
            if cfg.iperf2.is_some_and(|o| o.dual) && udp {
                r = r.with_dual_udp();
            }
            crate::run(&cfg, &mut StderrWarnings(r)).map(|_| ())
        }
        Iperf2Command::Server { cfg, output } => {
            crate::sock::use_one_malloc_arena();
            let _ = crate::sock::catch_stop_signals();
            // iperf 2 clients' tests print iperf 2's server layout (the settings
            // header once, here; each test's lines from engine::server::iperf2::print);
            // the server's log goes to stderr, as iperf 2's server has none on stdout.
            // iperf3 and netmeter clients' tests print netmeter's layout.
            let w = writer(output.as_deref())?;
            let banner = cfg.iperf2_layout.as_ref().map(|l| {
                let (ctx, blk) = (&l.ctx, l.ctx.datagram_len);
                let hist = l.histograms.as_ref();
                crate::report::iperf2::server::banner(ctx, blk, default_rcvbuf(ctx.udp), hist)
            });
            let sink = output::sink(Box::new(OutWriter(w.clone())));
            let srv = server::Server::bind(cfg, sink, Arc::new(AtomicBool::new(false)))?;
            let events = ServerEvents {
                banner,
                out: OutWriter(w),
            };
            srv.observed_by(Box::new(events)).stop_on_signals().serve()
        }
    }
}

type Shared = Arc<std::sync::Mutex<Box<dyn Write + Send>>>;

/// A socket's default receive buffer (the settings header's "window size"), 0 when it
/// cannot be read.
fn default_rcvbuf(udp: bool) -> u64 {
    use socket2::{Domain, Socket, Type};
    let ty = if udp { Type::DGRAM } else { Type::STREAM };
    Socket::new(Domain::IPV4, ty, None)
        .and_then(|s| s.recv_buffer_size())
        .map_or(0, |b| b as u64)
}

/// The client's iperf 2 layout with the engine's warnings (a server that sent no
/// report, or nothing back for `-d`/`-r`; datagrams dropped from another host) on
/// stderr, apart from the report, where iperf 2 writes its own warnings; the layout
/// itself has no line for them.
struct StderrWarnings(Iperf2Renderer);

impl crate::report::observe::Observer for StderrWarnings {
    fn on(&mut self, event: crate::report::observe::Event<'_>) {
        if let crate::report::observe::Event::Warning(w) = &event {
            use crate::report::escape::{Lines, escape_controls};
            eprintln!("netmeter: warning - {}", escape_controls(w, Lines::One));
        }
        self.0.on(event);
    }
}

/// The server's own events under `netmeter iperf2 -s`: iperf 2's settings header when
/// it first listens, its log lines on stderr.
struct ServerEvents {
    banner: Option<Vec<String>>,
    out: OutWriter,
}

impl crate::report::observe::Observer for ServerEvents {
    fn on(&mut self, event: crate::report::observe::Event<'_>) {
        use crate::report::observe::Event;
        match event {
            Event::Listening { .. } => {
                for l in self.banner.take().unwrap_or_default() {
                    let _ = writeln!(self.out, "{l}");
                }
                let _ = self.out.flush();
            }
            Event::ServerLog(l) => eprintln!("{l}"),
            _ => {}
        }
    }
}

/// stdout, or `-o FILE` (appended, as iperf 2 does).
fn writer(path: Option<&Path>) -> Result<Shared, crate::engine::TestError> {
    let w: Box<dyn Write + Send> = match path {
        Some(p) => Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)?,
        ),
        None => Box::new(std::io::stdout()),
    };
    Ok(Arc::new(std::sync::Mutex::new(w)))
}

struct OutWriter(Shared);

impl Write for OutWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().map_or(Ok(b.len()), |mut w| w.write(b))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.lock().map_or(Ok(()), |mut w| w.flush())
    }
}

#[cfg(test)]
mod tests;
