//! Emulated-link test bed so accuracy tests can check netmeter's figures against a
//! link whose rate, loss, delay and reordering are known exactly.
//!
//! Topology, all in network namespaces created (and deleted) by this module:
//!
//! ```text
//!   h1 [nb-h1] ==veth== [nb-r1] r [nb-r2] ==veth== [nb-h2] h2
//!                         \__ nb-d12 / nb-d21 (TUN delay line, optional)
//! ```
//!
//! * rate shaping: `tbf` on the router's egress veths (never on a host's own
//!   interface, where a shaper would back-pressure the sender instead of dropping);
//! * loss: nftables in the router's forward hook (`numgen inc` every Nth packet,
//!   `numgen random` for random loss), per direction and protocol, with counters;
//! * delay / delay variation / reordering: a userspace delay line on TUN devices in
//!   the router (see `delay_line`), because the kernel has no netem.
//!
//! Namespaces are named `nmb{pid}x{n}{h1|r|h2}`; interfaces are created directly in
//! their namespaces, so their (fixed, short) names never meet in the root namespace.
//! Dropping a [`Netbed`] (also while unwinding from a panic, or when `new` fails half
//! way) stops the delay line, kills processes left in the namespaces and deletes them;
//! beds leaked by a killed test process are swept by the next process that builds one.
//!
//! ```ignore
//! let bed = Netbed::new(LinkConfig::new().rate_mbit(100.0).delay_ms(10.0).drop_every_nth(10))?;
//! let server = bed.spawn_in(Side::H2, env!("CARGO_BIN_EXE_netmeter"), &["-s", "-1"])?;
//! ```
//!
//! Semantics worth knowing when computing expected figures:
//! * the veths run with segmentation and receive offloads off (`ethtool -K`), as a
//!   wire: a sender's TSO or UDP GSO (UDP_SEGMENT) super-packet is cut into single
//!   datagrams before it leaves the host, so every counter below sees one packet per
//!   datagram (`NftCounters::udp_12`/`udp_21` count them);
//! * the shaper counts L2 bytes (IP packet + 14-byte Ethernet header), see
//!   [`udp_goodput_fraction`];
//! * loss rules see each packet once, on arrival at the router, before the delay line
//!   (so reordering/variation counts only include surviving packets); every-Nth counts
//!   separately per direction, starting at 1 (the Nth, 2Nth, ... packet is dropped,
//!   never the first); random loss uses the kernel PRNG, so read the exact count from
//!   [`Netbed::counters`];
//! * with a delay line a packet is forwarded twice in the router (TTL/hop limit -2);
//! * timing-sensitive tests should hold [`timing_lock`] (tests of one binary run in
//!   parallel) and check [`Netbed::delay_line_losses`] is 0.

mod delay_line;

#[allow(unused_imports)] // re-exported for tests; not every test module names them all
pub use delay_line::{DelayLineStats, DelayRecord, DirStats, Reorder, Variation};

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::ops::{Deref, DerefMut};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::drain_into;
use anyhow::{Context, Result, anyhow, bail, ensure};
use delay_line::{DelayLine, DirConfig};

/// IP protocol numbers as found in [`DelayRecord::proto`].
pub const IPPROTO_ICMP: u8 = 1;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;
pub const IPPROTO_ICMPV6: u8 = 58;

/// h1's interface (towards the router).
pub const H1_IF: &str = "nb-h1";
/// The router's interface towards h1.
pub const R_H1_IF: &str = "nb-r1";
/// The router's interface towards h2.
pub const R_H2_IF: &str = "nb-r2";
/// h2's interface (towards the router).
pub const H2_IF: &str = "nb-h2";
/// Delay-line TUN devices in the router, per direction.
pub const TUN_H1_TO_H2: &str = "nb-d12";
pub const TUN_H2_TO_H1: &str = "nb-d21";

const NS_PREFIX: &str = "nmb";
const NFT_TABLE: &str = "netbed";
const RT_TABLE_12: &str = "112";
const RT_TABLE_21: &str = "121";
/// Offloads turned off on every veth of a bed (`ethtool -k` name, `ethtool -K` name),
/// see `Netbed::disable_offloads`.
const OFFLOADS: [(&str, &str); 7] = [
    ("tcp-segmentation-offload", "tso"),
    ("generic-segmentation-offload", "gso"),
    ("generic-receive-offload", "gro"),
    ("large-receive-offload", "lro"),
    ("tx-udp-segmentation", "tx-udp-segmentation"),
    ("rx-gro-list", "rx-gro-list"),
    ("rx-udp-gro-forwarding", "rx-udp-gro-forwarding"),
];
/// Upper bound for any single external command (ip, tc, nft, ethtool).
const CMD_TIMEOUT: Duration = Duration::from_secs(20);

static BED_COUNTER: AtomicU32 = AtomicU32::new(0);
static PING_COUNTER: AtomicU32 = AtomicU32::new(0);
static SWEEP: Once = Once::new();

/// One of the three namespaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    H1,
    R,
    H2,
}

/// Traffic direction through the router.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    H1ToH2,
    H2ToH1,
    Both,
}

impl Dir {
    pub fn has_h1_to_h2(self) -> bool {
        matches!(self, Dir::H1ToH2 | Dir::Both)
    }
    pub fn has_h2_to_h1(self) -> bool {
        matches!(self, Dir::H2ToH1 | Dir::Both)
    }
    /// `[h1→h2, h2→h1]` membership.
    fn mask(self) -> [bool; 2] {
        [self.has_h1_to_h2(), self.has_h2_to_h1()]
    }
}

/// Protocol filter for loss, delay variation and reordering.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Proto {
    Any,
    Udp,
    Tcp,
    /// ICMP and ICMPv6.
    Icmp,
}

impl Proto {
    /// Whether IP protocol number `ipproto` passes this filter.
    pub fn matches(self, ipproto: u8) -> bool {
        match self {
            Proto::Any => true,
            Proto::Udp => ipproto == IPPROTO_UDP,
            Proto::Tcp => ipproto == IPPROTO_TCP,
            Proto::Icmp => ipproto == IPPROTO_ICMP || ipproto == IPPROTO_ICMPV6,
        }
    }

    fn nft(self) -> &'static str {
        match self {
            Proto::Any => "",
            Proto::Udp => "meta l4proto udp ",
            Proto::Tcp => "meta l4proto tcp ",
            Proto::Icmp => "meta l4proto { icmp, ipv6-icmp } ",
        }
    }
}

/// What the emulated link does. Build with `LinkConfig::new()` and the chained setters.
#[derive(Clone, Debug)]
pub struct LinkConfig {
    /// Shaper rate (tbf on the router egress; counts L2 bytes incl. the 14-byte
    /// Ethernet header, see [`udp_goodput_fraction`]).
    pub rate_mbit: Option<f64>,
    pub rate_dir: Dir,
    /// Shaper queue depth in milliseconds at `rate_mbit` (plus the burst).
    pub queue_ms: f64,
    /// Shaper bucket depth in milliseconds at `rate_mbit` (at least two full frames):
    /// the most it sends back to back after an idle moment, and so also how much
    /// servicing delay it can make up. The router forwards and shapes in softirq
    /// context, which a busy machine defers to ksoftirqd; a deeper bucket keeps the
    /// long-term rate exact through such delays, at the price of bigger bursts.
    pub burst_ms: f64,
    /// Drop the Nth, 2Nth, ... packet (counted from 1 per direction) matching `loss_proto`.
    pub drop_every_nth: Option<u32>,
    /// Random loss in percent (resolution 0.01 %), nftables `numgen random`.
    pub random_loss_pct: Option<f64>,
    pub loss_dir: Dir,
    pub loss_proto: Proto,
    /// Fixed one-way delays (delay line).
    pub delay_h1_to_h2: Duration,
    pub delay_h2_to_h1: Duration,
    /// Extra per-packet delay on top of the fixed delay.
    pub variation: Option<Variation>,
    pub variation_dir: Dir,
    pub variation_proto: Proto,
    /// With variation, never let a packet overtake an earlier one of the same
    /// direction (the logged `scheduled` delay includes that clamp).
    pub preserve_order: bool,
    pub reorder: Option<Reorder>,
    /// Hold back (reorder) only packets with this source or destination port: one
    /// flow among others of the same protocol and direction.
    pub reorder_port: Option<u16>,
    /// Maximum packets held by the delay line; more are dropped and counted.
    pub delay_queue_limit: usize,
    /// Packets per direction whose delays are logged.
    pub delay_log_limit: usize,
    /// Route both directions through the delay line even with nothing to delay.
    pub force_delay_line: bool,
    /// SCHED_FIFO priority of the delay-line thread (`None`: normal scheduling).
    pub delay_rt_priority: Option<i32>,
    /// Also configure IPv6 ULA addresses.
    pub ipv6: bool,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            rate_mbit: None,
            rate_dir: Dir::Both,
            queue_ms: 25.0,
            burst_ms: 2.0,
            drop_every_nth: None,
            random_loss_pct: None,
            loss_dir: Dir::Both,
            loss_proto: Proto::Udp,
            delay_h1_to_h2: Duration::ZERO,
            delay_h2_to_h1: Duration::ZERO,
            variation: None,
            variation_dir: Dir::Both,
            variation_proto: Proto::Udp,
            preserve_order: true,
            reorder: None,
            reorder_port: None,
            delay_queue_limit: 16_384,
            delay_log_limit: 100_000,
            force_delay_line: false,
            delay_rt_priority: Some(10),
            ipv6: true,
        }
    }
}

impl LinkConfig {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn rate_mbit(mut self, mbit: f64) -> Self {
        self.rate_mbit = Some(mbit);
        self
    }
    pub fn rate_dir(mut self, dir: Dir) -> Self {
        self.rate_dir = dir;
        self
    }
    pub fn queue_ms(mut self, ms: f64) -> Self {
        self.queue_ms = ms;
        self
    }
    pub fn burst_ms(mut self, ms: f64) -> Self {
        self.burst_ms = ms;
        self
    }
    pub fn drop_every_nth(mut self, n: u32) -> Self {
        self.drop_every_nth = Some(n);
        self
    }
    pub fn random_loss_pct(mut self, pct: f64) -> Self {
        self.random_loss_pct = Some(pct);
        self
    }
    pub fn loss_dir(mut self, dir: Dir) -> Self {
        self.loss_dir = dir;
        self
    }
    pub fn loss_proto(mut self, proto: Proto) -> Self {
        self.loss_proto = proto;
        self
    }
    /// Same fixed one-way delay in both directions.
    pub fn delay(mut self, one_way: Duration) -> Self {
        self.delay_h1_to_h2 = one_way;
        self.delay_h2_to_h1 = one_way;
        self
    }
    pub fn delay_ms(self, one_way_ms: f64) -> Self {
        self.delay(Duration::from_secs_f64(one_way_ms / 1e3))
    }
    /// Fixed one-way delay for the direction(s) in `dir` only.
    pub fn delay_dir(mut self, dir: Dir, one_way: Duration) -> Self {
        if dir.has_h1_to_h2() {
            self.delay_h1_to_h2 = one_way;
        }
        if dir.has_h2_to_h1() {
            self.delay_h2_to_h1 = one_way;
        }
        self
    }
    pub fn variation(mut self, v: Variation) -> Self {
        self.variation = Some(v);
        self
    }
    pub fn variation_dir(mut self, dir: Dir) -> Self {
        self.variation_dir = dir;
        self
    }
    pub fn variation_proto(mut self, proto: Proto) -> Self {
        self.variation_proto = proto;
        self
    }
    pub fn preserve_order(mut self, on: bool) -> Self {
        self.preserve_order = on;
        self
    }
    /// Hold back every `n`th UDP packet (both directions) by `extra`.
    pub fn reorder_every_nth(mut self, n: u32, extra: Duration) -> Self {
        self.reorder = Some(Reorder {
            every_nth: n,
            extra,
            dir: Dir::Both,
            proto: Proto::Udp,
        });
        self
    }
    pub fn reorder(mut self, r: Reorder) -> Self {
        self.reorder = Some(r);
        self
    }
    /// [`Self::reorder`] only for packets from or to `port`.
    pub fn reorder_port(mut self, port: u16) -> Self {
        self.reorder_port = Some(port);
        self
    }
    pub fn delay_queue_limit(mut self, packets: usize) -> Self {
        self.delay_queue_limit = packets;
        self
    }
    pub fn delay_log_limit(mut self, packets: usize) -> Self {
        self.delay_log_limit = packets;
        self
    }
    pub fn force_delay_line(mut self, on: bool) -> Self {
        self.force_delay_line = on;
        self
    }
    pub fn delay_rt_priority(mut self, prio: Option<i32>) -> Self {
        self.delay_rt_priority = prio;
        self
    }
    pub fn ipv6(mut self, on: bool) -> Self {
        self.ipv6 = on;
        self
    }

    fn validate(&self) -> Result<()> {
        if let Some(r) = self.rate_mbit {
            ensure!(r.is_finite() && r > 0.0, "rate_mbit must be > 0, got {r}");
        }
        ensure!(
            self.queue_ms.is_finite() && self.queue_ms >= 0.0,
            "queue_ms must be >= 0"
        );
        ensure!(
            self.burst_ms.is_finite() && self.burst_ms >= 0.0,
            "burst_ms must be >= 0"
        );
        if let Some(n) = self.drop_every_nth {
            ensure!(n >= 1, "drop_every_nth must be >= 1");
        }
        if let Some(p) = self.random_loss_pct {
            ensure!(
                (0.0..=100.0).contains(&p),
                "random_loss_pct must be within 0..=100, got {p}"
            );
        }
        if let Some(r) = &self.reorder {
            ensure!(r.every_nth >= 1, "reorder every_nth must be >= 1");
        }
        if let Some(Variation::Cycle(list)) = &self.variation {
            ensure!(
                !list.is_empty(),
                "Variation::Cycle needs at least one entry"
            );
        }
        ensure!(
            self.delay_queue_limit >= 1,
            "delay_queue_limit must be >= 1"
        );
        Ok(())
    }

    /// Largest hold time the delay line can give a packet in direction `d`.
    fn max_delay(&self, d: usize) -> Duration {
        let base = [self.delay_h1_to_h2, self.delay_h2_to_h1][d];
        let var = match &self.variation {
            Some(Variation::Cycle(l)) => l.iter().copied().max().unwrap_or_default(),
            Some(Variation::Uniform { max, .. }) => *max,
            None => Duration::ZERO,
        };
        let re = self.reorder.as_ref().map_or(Duration::ZERO, |r| r.extra);
        base + var + re
    }

    /// Delay-line settings for direction `d` (0 = h1→h2), or `None` if that direction
    /// needs no delay line.
    fn dir_config(&self, d: usize) -> Option<DirConfig> {
        let base = [self.delay_h1_to_h2, self.delay_h2_to_h1][d];
        let variation = self
            .variation
            .clone()
            .filter(|_| self.variation_dir.mask()[d])
            .map(|v| (v, self.variation_proto));
        let reorder = self
            .reorder
            .as_ref()
            .filter(|r| r.dir.mask()[d])
            .map(|r| (r.every_nth, r.extra, r.proto, self.reorder_port));
        let needed =
            self.force_delay_line || !base.is_zero() || variation.is_some() || reorder.is_some();
        needed.then_some(DirConfig {
            base,
            variation,
            reorder,
            preserve_order: self.preserve_order,
        })
    }
}

/// Builds a bed for a test; fails the test, saying why, if beds cannot be built here.
pub fn bed(cfg: LinkConfig) -> Netbed {
    Netbed::require();
    let t = Instant::now();
    let b = Netbed::new(cfg).expect("building netbed");
    eprintln!("bed {} built in {:?}", b.id(), t.elapsed());
    b
}

/// UDP receive-buffer overflows (`RcvbufErrors`) in `side`'s namespace so far: loss
/// on the receiving host, not on the link.
pub fn udp_rcvbuf_errors(bed: &Netbed, side: Side) -> u64 {
    bed.in_ns(side, || {
        let snmp = std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap();
        let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
        let (names, values) = (udp.next().unwrap(), udp.next().unwrap());
        names
            .split_whitespace()
            .zip(values.split_whitespace())
            .find(|(n, _)| *n == "RcvbufErrors")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0)
    })
    .unwrap()
}

/// Process-wide lock for timing-sensitive tests: tests in one binary run in parallel
/// threads, and on a small machine CPU contention distorts measured delays and rates.
/// Hold the guard for the measuring part of such a test.
pub fn timing_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sets a socket's send and receive buffers to `bytes`, ignoring `net.core.*mem_max`
/// (SO_*BUFFORCE, root), so bursts at high rates are not dropped by the receiver.
pub fn force_socket_buffers(sock: &impl AsRawFd, bytes: usize) -> Result<()> {
    let val: libc::c_int = bytes.min(i32::MAX as usize / 2) as libc::c_int;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_SNDBUFFORCE] {
        // SAFETY: passes a pointer to a live c_int and its exact size.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&val as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            bail!(
                "setsockopt(SO_*BUFFORCE, {bytes}): {}",
                std::io::Error::last_os_error()
            );
        }
    }
    Ok(())
}

/// Makes the kernel stamp every datagram received on `sock` (SO_TIMESTAMPNS,
/// CLOCK_REALTIME), read with [`recv_timestamped`]. Kernel stamps exclude the
/// receiving thread's scheduling delay, which on a busy VM can reach milliseconds.
pub fn enable_rx_timestamps(sock: &impl AsRawFd) -> Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: passes a pointer to a live c_int and its exact size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        bail!(
            "setsockopt(SO_TIMESTAMPNS): {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// `recv` that also returns the kernel receive time (if [`enable_rx_timestamps`] was
/// called). Honours the socket's read timeout.
pub fn recv_timestamped(
    sock: &impl AsRawFd,
    buf: &mut [u8],
) -> std::io::Result<(usize, Option<std::time::SystemTime>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; 16]; // 128 bytes, 8-byte aligned as cmsghdr requires
    // SAFETY: msghdr is plain old data; all-zero is a valid (empty) value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` points at `iov` (covering `buf`) and `control`, all live and
    // exclusively borrowed for the duration of the call.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the CMSG_* helpers walk the control buffer the kernel just filled,
    // bounded by `msg.msg_controllen`; the timespec is read unaligned from a cmsg of
    // the type that carries one.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SO_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                stamp = Some(
                    std::time::UNIX_EPOCH + Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32),
                );
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}

/// Fraction of the shaper's L2 rate that arrives as UDP payload of `payload` bytes
/// (Ethernet 14 + IP 20/40 + UDP 8 bytes of overhead per datagram).
pub fn udp_goodput_fraction(payload: usize, ipv6: bool) -> f64 {
    let ip = if ipv6 { 40 } else { 20 };
    payload as f64 / (payload + 8 + ip + 14) as f64
}

/// RFC 3550 interarrival jitter (J += (|D| - J) / 16) over a sequence of one-way
/// transit times (or injected delays) in arrival order; the final J.
pub fn rfc3550_jitter(transits: &[Duration]) -> Duration {
    let mut j = 0.0f64;
    for w in transits.windows(2) {
        let d = (w[1].as_secs_f64() - w[0].as_secs_f64()).abs();
        j += (d - j) / 16.0;
    }
    Duration::from_secs_f64(j)
}

/// One per-connection counter of [`Netbed::add_port_counters`].
pub struct PortCounter {
    /// The nftables set (and chain `count_SET`) name.
    pub set: &'static str,
    /// Forward-hook priority: below 0 counts before the bed's loss rules, above after.
    pub priority: i32,
    /// nftables match expression selecting the packets.
    pub matching: String,
    /// Port expression the counts are kept by (`tcp sport`, `tcp dport`).
    pub key: &'static str,
}

/// nftables counters in the router (packets). `*_12` = h1→h2, `*_21` = h2→h1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NftCounters {
    /// All packets arriving at the router from h1 / from h2.
    pub fwd_12: u64,
    pub fwd_21: u64,
    /// UDP packets (IPv4 and IPv6) arriving at the router from h1 / from h2, before
    /// any loss rule; with the bed's offloads off, one per datagram.
    pub udp_12: u64,
    pub udp_21: u64,
    /// Packets subject to the loss rules (matching `loss_proto`), before dropping.
    pub seen_12: u64,
    pub seen_21: u64,
    /// Dropped by `drop_every_nth`.
    pub nth_12: u64,
    pub nth_21: u64,
    /// Dropped by `random_loss_pct`.
    pub rand_12: u64,
    pub rand_21: u64,
}

impl NftCounters {
    pub fn dropped(&self) -> u64 {
        self.nth_12 + self.nth_21 + self.rand_12 + self.rand_21
    }
    pub fn dropped_dir(&self, dir: Dir) -> u64 {
        let [a, b] = dir.mask();
        (if a { self.nth_12 + self.rand_12 } else { 0 })
            + (if b { self.nth_21 + self.rand_21 } else { 0 })
    }
}

/// Statistics of a router shaper qdisc (`tc -s`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShaperStats {
    pub sent_bytes: u64,
    pub sent_packets: u64,
    pub drops: u64,
    pub overlimits: u64,
}

/// Result of [`Netbed::ping`].
#[derive(Clone, Debug, Default)]
pub struct PingStats {
    pub sent: u32,
    pub received: u32,
    /// Round-trip times of the answered requests, in sequence order.
    pub rtts: Vec<Duration>,
    /// Sequence numbers (0-based) without reply.
    pub lost: Vec<u16>,
}

impl PingStats {
    pub fn min(&self) -> Option<Duration> {
        self.rtts.iter().copied().min()
    }
    pub fn max(&self) -> Option<Duration> {
        self.rtts.iter().copied().max()
    }
    pub fn avg(&self) -> Option<Duration> {
        (!self.rtts.is_empty()).then(|| self.rtts.iter().sum::<Duration>() / self.rtts.len() as u32)
    }
}

/// A process running inside a bed namespace; killed and reaped on drop.
///
/// Piped stdout/stderr are drained by background threads from the start, so a chatty
/// process never blocks on a full pipe; peek with [`NsChild::stdout_now`] or wait for
/// a line with [`NsChild::wait_for_output`].
#[derive(Debug)]
pub struct NsChild {
    child: Child,
    what: String,
    out: Arc<Mutex<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
    readers: Vec<JoinHandle<()>>,
}

impl Deref for NsChild {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.child
    }
}
impl DerefMut for NsChild {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl NsChild {
    fn new(mut child: Child, what: String) -> NsChild {
        let out = Arc::new(Mutex::new(Vec::new()));
        let err = Arc::new(Mutex::new(Vec::new()));
        let mut readers = Vec::new();
        if let Some(o) = child.stdout.take() {
            readers.push(drain_into(o, out.clone()));
        }
        if let Some(e) = child.stderr.take() {
            readers.push(drain_into(e, err.clone()));
        }
        NsChild {
            child,
            what,
            out,
            err,
            readers,
        }
    }

    /// The command line, for messages.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// Everything the process wrote to stdout so far.
    pub fn stdout_now(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }

    /// Everything the process wrote to stderr so far.
    pub fn stderr_now(&self) -> String {
        String::from_utf8_lossy(&self.err.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }

    /// Waits until stdout or stderr contains `needle` (e.g. a server's "listening"
    /// line). Fails if the process exits first or after `timeout`.
    pub fn wait_for_output(&mut self, needle: &str, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.stdout_now().contains(needle) || self.stderr_now().contains(needle) {
                return Ok(());
            }
            if let Some(st) = self.child.try_wait()? {
                bail!(
                    "`{}` exited ({st}) before printing {needle:?}; stdout: {} stderr: {}",
                    self.what,
                    self.stdout_now(),
                    self.stderr_now()
                );
            }
            if Instant::now() >= deadline {
                bail!(
                    "`{}` did not print {needle:?} within {timeout:?}; stdout: {} stderr: {}",
                    self.what,
                    self.stdout_now(),
                    self.stderr_now()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits up to `timeout` for exit; kills the process and errors if it is still running.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.child.try_wait()? {
                return Ok(st);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                bail!(
                    "`{}` still running after {timeout:?}; killed. stderr: {}",
                    self.what,
                    self.stderr_now()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for exit (killing the process after `timeout`) and returns its status and
    /// complete output. Does not check the exit status.
    pub fn finish(mut self, timeout: Duration) -> Result<Output> {
        let status = self.wait_timeout(timeout)?;
        // The pipes reach EOF once the process is gone, unless it handed them to a
        // still-running descendant; wait a bounded time for the drains.
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.readers.iter().any(|r| !r.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        for r in self.readers.drain(..) {
            if r.is_finished() {
                let _ = r.join();
            }
        }
        let take = |b: &Arc<Mutex<Vec<u8>>>| {
            std::mem::take(&mut *b.lock().unwrap_or_else(|e| e.into_inner()))
        };
        Ok(Output {
            status,
            stdout: take(&self.out),
            stderr: take(&self.err),
        })
    }

    /// Sends SIGTERM (gentler than `kill`, lets e.g. iperf3 print its summary).
    pub fn terminate(&self) {
        // SAFETY: kill(2) with the pid of our child, which is not reaped yet (we hold
        // the `Child` and only reap in `wait*`/drop), so the pid cannot be reused.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
    }
}

impl Drop for NsChild {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// The test bed. See the module documentation.
pub struct Netbed {
    id: u32,
    ns: [String; 3],
    /// Namespaces actually created, for cleanup.
    created: Vec<String>,
    v4: [Ipv4Addr; 4],
    v6: [Ipv6Addr; 4],
    /// Prefix strings "10.a.b.0/24" and "fd6e:6d00:s:N::/64" of the h1 and h2 links.
    nets4: [String; 2],
    nets6: [String; 2],
    cfg: LinkConfig,
    delay: Option<DelayLine>,
}

impl std::fmt::Debug for Netbed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Netbed")
            .field("ns", &self.ns)
            .field("v4", &self.v4)
            .field("cfg", &self.cfg)
            .finish()
    }
}

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `cmd` to completion (bounded by CMD_TIMEOUT) with optional stdin, checking the
/// exit code; returns stdout.
fn run_checked(cmd: &mut Command, stdin: Option<&str>) -> Result<String> {
    let what = describe(cmd);
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot start `{what}`"))?;
    let mut child = NsChild::new(child, what.clone());
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .with_context(|| format!("writing stdin of `{what}`"))?;
    } // dropping `pipe` closes stdin
    let out = child.finish(CMD_TIMEOUT)?;
    if !out.status.success() {
        bail!(
            "`{what}` failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            stdin
                .map(|s| format!("\n--- input ---\n{s}"))
                .unwrap_or_default()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `f` on a fresh thread that has joined network namespace `ns` (setns affects
/// only that thread). Sockets created there stay in `ns` and can be used from any
/// thread afterwards. A panic in `f` is propagated.
pub fn in_netns<T: Send, F: FnOnce() -> T + Send>(ns: &str, f: F) -> Result<T> {
    let path = format!("/run/netns/{ns}");
    let file = File::open(&path).with_context(|| format!("opening {path}"))?;
    std::thread::scope(|s| {
        let h = s.spawn(move || -> Result<T> {
            // SAFETY: setns with a valid namespace fd; CLONE_NEWNET changes only the
            // network namespace of the calling thread, which ends after `f`.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            if rc != 0 {
                bail!("setns({path}): {}", std::io::Error::last_os_error());
            }
            Ok(f())
        });
        match h.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

fn ns_pids(ns: &str) -> Vec<i32> {
    Command::new("ip")
        .args(["netns", "pids", ns])
        .stderr(Stdio::null())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Kills the processes left inside bed namespace `ns` (all started by tests through
/// this bed) and deletes the namespace. Best effort, never panics.
fn destroy_ns(ns: &str) {
    let me = std::process::id() as i32;
    for pid in ns_pids(ns) {
        if pid != me {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
    for attempt in 0..5 {
        let ok = Command::new("ip")
            .args(["netns", "del", ns])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok || !Path::new(&format!("/run/netns/{ns}")).exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20 * (attempt + 1)));
    }
    eprintln!("netbed: could not delete namespace {ns}");
}

/// Deletes beds left behind by test processes that no longer exist (killed before
/// their `Drop` ran). Runs automatically once per process before the first bed.
pub fn sweep_stale_beds() {
    sweep(false);
}

/// `include_own`: also beds named with this process's pid, which can only be stale
/// (a dead process with the same pid) before this process built its first bed.
fn sweep(include_own: bool) {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(NS_PREFIX) else {
            continue;
        };
        let Some((pid, tail)) = rest.split_once('x') else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        let digits = tail.trim_start_matches(|c: char| c.is_ascii_digit());
        let well_formed = digits.len() < tail.len() && matches!(digits, "h1" | "r" | "h2");
        let dead = if pid == me {
            include_own
        } else {
            !Path::new(&format!("/proc/{pid}")).exists()
        };
        if well_formed && dead {
            destroy_ns(&name);
        }
    }
}

/// Progress messages on stderr when `NETBED_DEBUG` is set.
fn debug(msg: &str) {
    if std::env::var_os("NETBED_DEBUG").is_some() {
        eprintln!("netbed: {msg}");
    }
}

fn icmp_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for c in data.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from(c[0]) << 8
        };
        sum += u32::from(w);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl Netbed {
    /// `Ok` if beds can be built here (root, `ip`/`tc`/`nft`/`ethtool`, /dev/net/tun),
    /// else why not.
    pub fn available() -> std::result::Result<(), String> {
        static CACHE: std::sync::OnceLock<std::result::Result<(), String>> =
            std::sync::OnceLock::new();
        CACHE.get_or_init(Self::check_available).clone()
    }

    fn check_available() -> std::result::Result<(), String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("netbed needs root (network namespaces, veth, tc, nftables, TUN)".into());
        }
        for (tool, arg) in [
            ("ip", "-V"),
            ("tc", "-V"),
            ("nft", "--version"),
            ("ethtool", "--version"),
        ] {
            let ok = Command::new(tool)
                .arg(arg)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                return Err(format!(
                    "netbed needs `{tool}` in PATH (Debian packages iproute2, nftables, ethtool)"
                ));
            }
        }
        if !Path::new("/dev/net/tun").exists() {
            return Err("netbed needs /dev/net/tun for its delay line".into());
        }
        Ok(())
    }

    /// Panics with a clear message if [`Netbed::available`] fails.
    pub fn require() {
        if let Err(why) = Self::available() {
            panic!("netbed test bed unavailable: {why}");
        }
    }

    /// Builds a bed. On error everything created so far is removed again.
    pub fn new(cfg: LinkConfig) -> Result<Netbed> {
        cfg.validate()?;
        Self::available().map_err(|e| anyhow!(e))?;
        // Before this process's first bed (other callers wait here until it is done).
        SWEEP.call_once(|| sweep(true));
        let pid = std::process::id();
        let n = BED_COUNTER.fetch_add(1, Ordering::SeqCst);
        let s = ((u64::from(pid) * 131 + u64::from(n)) % 32_768) as u16;
        let net = |k: u16| -> (Ipv4Addr, String) {
            let idx = 2 * s + k;
            let (a, b) = ((idx >> 8) as u8, (idx & 0xff) as u8);
            (Ipv4Addr::new(10, a, b, 0), format!("10.{a}.{b}.0/24"))
        };
        let (n1, p1) = net(0);
        let (n2, p2) = net(1);
        let host4 = |n: Ipv4Addr, h: u8| {
            let o = n.octets();
            Ipv4Addr::new(o[0], o[1], o[2], h)
        };
        let host6 = |link: u16, h: u16| Ipv6Addr::new(0xfd6e, 0x6d00, s, link, 0, 0, 0, h);
        let mut bed = Netbed {
            id: n,
            ns: ["h1", "r", "h2"].map(|sfx| format!("{NS_PREFIX}{pid}x{n}{sfx}")),
            created: Vec::new(),
            v4: [host4(n1, 2), host4(n1, 1), host4(n2, 1), host4(n2, 2)],
            v6: [host6(1, 2), host6(1, 1), host6(2, 1), host6(2, 2)],
            nets4: [p1, p2],
            nets6: [
                format!("fd6e:6d00:{s:x}:1::/64"),
                format!("fd6e:6d00:{s:x}:2::/64"),
            ],
            cfg,
            delay: None,
        };
        // If any step fails (or panics), dropping `bed` removes what exists.
        bed.setup()
            .with_context(|| format!("building netbed {:?}", bed.ns))?;
        Ok(bed)
    }

    fn setup(&mut self) -> Result<()> {
        for i in 0..3 {
            let ns = self.ns[i].clone();
            run_checked(Command::new("ip").args(["netns", "add", &ns]), None)?;
            self.created.push(ns);
        }
        let r = self.ns[1].clone();
        // No IPv6 duplicate address detection: otherwise the automatic link-local
        // addresses stay tentative for ~2 s and neighbour discovery cannot start.
        // Set before the interfaces exist so that they inherit it.
        for side in [Side::H1, Side::R, Side::H2] {
            self.sysctls(
                side,
                &[
                    ("net/ipv6/conf/all/accept_dad", "0"),
                    ("net/ipv6/conf/default/accept_dad", "0"),
                ],
            )?;
        }
        // Router sysctls first so that interfaces inherit `default` values.
        self.sysctls(
            Side::R,
            &[
                ("net/ipv4/ip_forward", "1"),
                ("net/ipv4/conf/all/rp_filter", "0"),
                ("net/ipv4/conf/default/rp_filter", "0"),
                ("net/ipv4/conf/all/send_redirects", "0"),
                ("net/ipv4/conf/default/send_redirects", "0"),
                ("net/ipv6/conf/all/forwarding", "1"),
            ],
        )?;
        // Created directly inside the namespaces: names never exist in the root namespace.
        // Explicit, distinct ifindexes: a veth whose ifindex equals its peer's (easy
        // when each namespace numbers from 2) gets its carrier-up event delayed by the
        // kernel's link-watch rate limit (up to 1 s) instead of handled at once.
        self.ip(
            Side::H1,
            &[
                "link", "add", H1_IF, "index", "10", "type", "veth", "peer", "name", R_H1_IF,
                "index", "11", "netns", &r,
            ],
        )?;
        self.ip(
            Side::H2,
            &[
                "link", "add", H2_IF, "index", "13", "type", "veth", "peer", "name", R_H2_IF,
                "index", "12", "netns", &r,
            ],
        )?;
        for side in [Side::H1, Side::R, Side::H2] {
            self.ip(side, &["link", "set", "lo", "up"])?;
        }
        self.disable_offloads()?;
        let [a_h1, a_r1, a_r2, a_h2] = self.v4.map(|a| a.to_string());
        let [s_h1, s_r1, s_r2, s_h2] = self.v6.map(|a| a.to_string());
        for (side, dev, a4, a6, ll) in [
            (Side::H1, H1_IF, &a_h1, &s_h1, "fe80::2/64"),
            (Side::R, R_H1_IF, &a_r1, &s_r1, "fe80::1/64"),
            (Side::R, R_H2_IF, &a_r2, &s_r2, "fe80::1/64"),
            (Side::H2, H2_IF, &a_h2, &s_h2, "fe80::2/64"),
        ] {
            self.ip(side, &["addr", "add", &format!("{a4}/24"), "dev", dev])?;
            if self.cfg.ipv6 {
                // Static link-local addresses: the automatic ones appear only after the
                // kernel's (rate-limited, up to 1 s) carrier event, and the router
                // cannot resolve neighbours for forwarded packets without one.
                self.ip(side, &["link", "set", "dev", dev, "addrgenmode", "none"])?;
                self.ip(side, &["-6", "addr", "add", ll, "dev", dev, "nodad"])?;
                self.ip(
                    side,
                    &[
                        "-6",
                        "addr",
                        "add",
                        &format!("{a6}/64"),
                        "dev",
                        dev,
                        "nodad",
                    ],
                )?;
            }
            self.ip(side, &["link", "set", dev, "up"])?;
        }
        self.ip(Side::H1, &["route", "add", "default", "via", &a_r1])?;
        self.ip(Side::H2, &["route", "add", "default", "via", &a_r2])?;
        if self.cfg.ipv6 {
            self.ip(Side::H1, &["-6", "route", "add", "default", "via", &s_r1])?;
            self.ip(Side::H2, &["-6", "route", "add", "default", "via", &s_r2])?;
        }
        // Links become usable asynchronously (linkwatch); wait until packets flow,
        // before any counter or delay-line state exists that the probes would disturb.
        let t = Instant::now();
        self.wait_reachable(Duration::from_millis(200))?;
        debug(&format!("reachable after {:?}", t.elapsed()));
        self.setup_delay_line()?;
        debug(&format!("delay line after {:?}", t.elapsed()));
        self.setup_nft()?;
        self.setup_shaper()?;
        Ok(())
    }

    /// Makes the veths behave like a real wire: every packet on it is one IP datagram
    /// of at most the MTU. veth otherwise advertises TSO/GSO/UDP segmentation, so a
    /// sender's TCP TSO or UDP GSO (UDP_SEGMENT) super-packet of up to 64 KiB would
    /// cross the veth pair and the router's forward path in one piece: nftables'
    /// `numgen` would count (and drop) 44 datagrams as one packet, and tbf would see
    /// bursts. With the offloads off the kernel segments in software before the first
    /// veth, and with GRO off nothing is coalesced again on the way.
    fn disable_offloads(&self) -> Result<()> {
        for (side, dev) in [
            (Side::H1, H1_IF),
            (Side::R, R_H1_IF),
            (Side::R, R_H2_IF),
            (Side::H2, H2_IF),
        ] {
            let ethtool_k = || run_checked(self.cmd(side, "ethtool").args(["-k", dev]), None);
            let state = |shown: &str, long: &str| -> Option<String> {
                shown.lines().find_map(|l| {
                    l.trim()
                        .strip_prefix(long)
                        .and_then(|r| r.strip_prefix(':'))
                        .map(|r| r.trim().to_string())
                })
            };
            // Only the features this kernel has (ethtool -K rejects unknown names).
            let before = ethtool_k()?;
            let mut args = vec!["-K", dev];
            for (long, short) in OFFLOADS {
                if state(&before, long).is_some() {
                    args.extend([short, "off"]);
                }
            }
            run_checked(self.cmd(side, "ethtool").args(&args), None)?;
            let after = ethtool_k()?;
            for (long, _) in OFFLOADS {
                if let Some(st) = state(&after, long) {
                    ensure!(
                        st.starts_with("off"),
                        "{dev} in {side:?}: offload {long} still {st:?} after ethtool -K"
                    );
                }
            }
        }
        Ok(())
    }

    /// Probes h1→h2 (ICMP echo, v4 and v6) until answered; bounded.
    fn wait_reachable(&self, per_try: Duration) -> Result<()> {
        let mut targets = vec![IpAddr::V4(self.h2_addr())];
        if self.cfg.ipv6 {
            targets.push(IpAddr::V6(self.h2_addr6()));
        }
        for t in targets {
            let mut ok = false;
            for attempt in 0..20 {
                let p = self.ping(Side::H1, t, 1, Duration::ZERO, per_try)?;
                debug(&format!("probe {t} attempt {attempt}: {p:?}"));
                if p.received == 1 {
                    ok = true;
                    break;
                }
            }
            ensure!(ok, "{t} not reachable from h1 through the router");
            debug(&format!("{t} reachable"));
        }
        Ok(())
    }

    fn setup_delay_line(&mut self) -> Result<()> {
        let cfgs = [self.cfg.dir_config(0), self.cfg.dir_config(1)];
        if cfgs.iter().all(Option::is_none) {
            return Ok(());
        }
        let names = [TUN_H1_TO_H2, TUN_H2_TO_H1];
        let want = [cfgs[0].is_some(), cfgs[1].is_some()];
        let fds = self.in_ns(Side::R, || -> Result<[Option<OwnedFd>; 2]> {
            let a = if want[0] {
                Some(delay_line::open_tun(names[0])?)
            } else {
                None
            };
            let b = if want[1] {
                Some(delay_line::open_tun(names[1])?)
            } else {
                None
            };
            Ok([a, b])
        })??;
        let [c0, c1] = cfgs;
        self.delay = Some(DelayLine::start(
            fds,
            [c0.unwrap_or_default(), c1.unwrap_or_default()],
            self.cfg.delay_queue_limit,
            self.cfg.delay_log_limit,
            self.cfg.delay_rt_priority,
        )?);
        // (iif, tun, table, destination prefix index)
        let routes = [
            (R_H1_IF, names[0], RT_TABLE_12, 1usize),
            (R_H2_IF, names[1], RT_TABLE_21, 0usize),
        ];
        for (d, (iif, tun, table, dst)) in routes.into_iter().enumerate() {
            if !want[d] {
                continue;
            }
            // No link-local address on the TUN: keeps the router's own IPv6 chatter
            // (router solicitations) out of the line; the line also discards any
            // link-local or multicast packet (e.g. MLD reports) it reads.
            self.ip(Side::R, &["link", "set", "dev", tun, "addrgenmode", "none"])?;
            self.ip(
                Side::R,
                &[
                    "link",
                    "set",
                    "dev",
                    tun,
                    "mtu",
                    "1500",
                    "txqueuelen",
                    "4096",
                    "up",
                ],
            )?;
            self.sysctls(Side::R, &[(&format!("net/ipv4/conf/{tun}/rp_filter"), "0")])?;
            self.ip(
                Side::R,
                &["rule", "add", "iif", iif, "lookup", table, "pref", "1000"],
            )?;
            let net4 = self.nets4[dst].clone();
            self.ip(
                Side::R,
                &["route", "add", &net4, "dev", tun, "table", table],
            )?;
            if self.cfg.ipv6 {
                let net6 = self.nets6[dst].clone();
                self.ip(
                    Side::R,
                    &[
                        "-6", "rule", "add", "iif", iif, "lookup", table, "pref", "1000",
                    ],
                )?;
                self.ip(
                    Side::R,
                    &["-6", "route", "add", &net6, "dev", tun, "table", table],
                )?;
            }
        }
        // Prove the path through the line, then forget the probes' traffic.
        let slowest = self.cfg.max_delay(0) + self.cfg.max_delay(1);
        self.wait_reachable(slowest + Duration::from_millis(200))?;
        if let Some(d) = &self.delay {
            ensure!(d.is_running(), "delay-line thread died");
            d.reset();
        }
        Ok(())
    }

    fn setup_nft(&self) -> Result<()> {
        let mut rules = vec![
            format!("iifname \"{R_H1_IF}\" counter comment \"fwd_12\""),
            format!("iifname \"{R_H2_IF}\" counter comment \"fwd_21\""),
            format!("iifname \"{R_H1_IF}\" meta l4proto udp counter comment \"udp_12\""),
            format!("iifname \"{R_H2_IF}\" meta l4proto udp counter comment \"udp_21\""),
        ];
        let c = &self.cfg;
        if c.drop_every_nth.is_some() || c.random_loss_pct.is_some() {
            let p = c.loss_proto.nft();
            for (d, (iif, tag)) in [(R_H1_IF, "12"), (R_H2_IF, "21")].into_iter().enumerate() {
                if !c.loss_dir.mask()[d] {
                    continue;
                }
                rules.push(format!(
                    "iifname \"{iif}\" {p}counter comment \"seen_{tag}\""
                ));
                if let Some(n) = c.drop_every_nth {
                    // numgen counts from 0: value n-1 is the Nth matching packet.
                    rules.push(format!(
                        "iifname \"{iif}\" {p}numgen inc mod {n} == {} counter drop comment \"nth_{tag}\"",
                        n - 1
                    ));
                }
                if let Some(pct) = c.random_loss_pct {
                    let x = (pct * 100.0).round() as u32;
                    if x > 0 {
                        rules.push(format!(
                            "iifname \"{iif}\" {p}numgen random mod 10000 < {x} counter drop comment \"rand_{tag}\""
                        ));
                    }
                }
            }
        }
        let script = format!(
            "table inet {NFT_TABLE} {{\n  chain netbed_fwd {{\n    type filter hook forward priority 0; policy accept;\n    {}\n  }}\n}}\n",
            rules.join("\n    ")
        );
        run_checked(self.cmd(Side::R, "nft").args(["-f", "-"]), Some(&script))?;
        Ok(())
    }

    fn setup_shaper(&self) -> Result<()> {
        let Some(mbit) = self.cfg.rate_mbit else {
            return Ok(());
        };
        let bits = (mbit * 1e6).round() as u64;
        let bytes_per_s = bits / 8;
        // `burst_ms` (default 2 ms) at the rate, at least two full frames.
        let burst = ((bytes_per_s as f64 * self.cfg.burst_ms / 1e3) as u64).max(3028);
        let limit = burst + (bytes_per_s as f64 * self.cfg.queue_ms / 1e3) as u64;
        for (d, dev) in [R_H2_IF, R_H1_IF].into_iter().enumerate() {
            if self.cfg.rate_dir.mask()[d] {
                self.tc(&[
                    "qdisc",
                    "replace",
                    "dev",
                    dev,
                    "root",
                    "tbf",
                    "rate",
                    &format!("{bits}bit"),
                    "burst",
                    &burst.to_string(),
                    "limit",
                    &limit.to_string(),
                ])?;
            }
        }
        Ok(())
    }

    fn ip(&self, side: Side, args: &[&str]) -> Result<()> {
        run_checked(
            Command::new("ip").args(["-n", self.ns(side)]).args(args),
            None,
        )
        .map(|_| ())
    }

    fn tc(&self, args: &[&str]) -> Result<String> {
        run_checked(
            Command::new("tc").args(["-n", self.ns(Side::R)]).args(args),
            None,
        )
    }

    /// Writes `/proc/sys/<key>` values inside the namespace of `side`.
    pub fn sysctls(&self, side: Side, kv: &[(&str, &str)]) -> Result<()> {
        self.in_ns(side, || -> Result<()> {
            for (k, v) in kv {
                let path = format!("/proc/sys/{k}");
                std::fs::write(&path, v).with_context(|| format!("writing {v} to {path}"))?;
            }
            Ok(())
        })?
    }

    // ----- names and addresses -----

    /// Sequence number of this bed within the process.
    pub fn id(&self) -> u32 {
        self.id
    }
    pub fn ns(&self, side: Side) -> &str {
        match side {
            Side::H1 => &self.ns[0],
            Side::R => &self.ns[1],
            Side::H2 => &self.ns[2],
        }
    }
    pub fn h1_ns(&self) -> &str {
        &self.ns[0]
    }
    pub fn r_ns(&self) -> &str {
        &self.ns[1]
    }
    pub fn h2_ns(&self) -> &str {
        &self.ns[2]
    }
    pub fn h1_addr(&self) -> Ipv4Addr {
        self.v4[0]
    }
    pub fn h2_addr(&self) -> Ipv4Addr {
        self.v4[3]
    }
    /// The router's addresses on the h1 link and on the h2 link.
    pub fn router_addrs(&self) -> (Ipv4Addr, Ipv4Addr) {
        (self.v4[1], self.v4[2])
    }
    /// ULA addresses (only configured when `LinkConfig::ipv6` is on, the default).
    pub fn h1_addr6(&self) -> Ipv6Addr {
        self.v6[0]
    }
    pub fn h2_addr6(&self) -> Ipv6Addr {
        self.v6[3]
    }
    /// The host's own interface name (`H1_IF` / `H2_IF`; for `R` the one towards h2).
    pub fn ifname(&self, side: Side) -> &'static str {
        match side {
            Side::H1 => H1_IF,
            Side::R => R_H2_IF,
            Side::H2 => H2_IF,
        }
    }
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    // ----- running things inside the namespaces -----

    /// `ip netns exec <ns> <program>`; add arguments and stdio as needed.
    pub fn cmd(&self, side: Side, program: impl AsRef<OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.ns(side)]).arg(program);
        c
    }

    /// Starts `program args` inside `side` with stdin null and stdout/stderr piped
    /// (read them with [`NsChild::finish`]). The process is killed when the returned
    /// handle or the bed is dropped.
    pub fn spawn_in<S: AsRef<OsStr>>(
        &self,
        side: Side,
        program: impl AsRef<OsStr>,
        args: &[S],
    ) -> Result<NsChild> {
        let mut c = self.cmd(side, program);
        c.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let what = describe(&c);
        let child = c
            .spawn()
            .with_context(|| format!("cannot start `{what}`"))?;
        Ok(NsChild::new(child, what))
    }

    /// Runs `program args` inside `side` to completion (bounded by `timeout`),
    /// fails on a non-zero exit; returns stdout.
    pub fn run_in<S: AsRef<OsStr>>(
        &self,
        side: Side,
        program: impl AsRef<OsStr>,
        args: &[S],
        timeout: Duration,
    ) -> Result<String> {
        let child = self.spawn_in(side, program, args)?;
        let what = child.what.clone();
        let out = child.finish(timeout)?;
        ensure!(
            out.status.success(),
            "`{what}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Runs `f` on a thread inside the namespace of `side` (see [`in_netns`]).
    pub fn in_ns<T: Send, F: FnOnce() -> T + Send>(&self, side: Side, f: F) -> Result<T> {
        in_netns(self.ns(side), f)
    }

    /// A UDP socket bound to `bind` inside `side`, usable from any thread.
    pub fn udp_socket(&self, side: Side, bind: SocketAddr) -> Result<UdpSocket> {
        self.in_ns(side, || UdpSocket::bind(bind))?
            .with_context(|| format!("binding UDP {bind} in {side:?}"))
    }

    pub fn tcp_listener(&self, side: Side, bind: SocketAddr) -> Result<TcpListener> {
        self.in_ns(side, || TcpListener::bind(bind))?
            .with_context(|| format!("listening on TCP {bind} in {side:?}"))
    }

    pub fn tcp_connect(&self, side: Side, to: SocketAddr, timeout: Duration) -> Result<TcpStream> {
        self.in_ns(side, || TcpStream::connect_timeout(&to, timeout))?
            .with_context(|| format!("connecting TCP to {to} from {side:?}"))
    }

    /// ICMP echo from `from` to `to`: `count` requests `interval` apart, then waits up
    /// to `timeout` after the last one. Raw socket, no external `ping` needed.
    pub fn ping(
        &self,
        from: Side,
        to: IpAddr,
        count: u16,
        interval: Duration,
        timeout: Duration,
    ) -> Result<PingStats> {
        use socket2::{Domain, Protocol, SockAddr, Socket, Type};
        let v6 = to.is_ipv6();
        let sock = self
            .in_ns(from, || {
                if v6 {
                    Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::ICMPV6))
                } else {
                    Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4))
                }
            })?
            .context("raw ICMP socket")?;
        let ident =
            ((std::process::id() << 8) ^ PING_COUNTER.fetch_add(1, Ordering::Relaxed)) as u16;
        let dest = SockAddr::from(SocketAddr::new(to, 0));
        let mut sent_at: Vec<Instant> = Vec::with_capacity(usize::from(count));
        let mut rtt: Vec<Option<Duration>> = vec![None; usize::from(count)];
        let mut received = 0u32;
        let start = Instant::now();
        let mut buf = [0u8; 2048];
        // Bounded: every pass either sends one of `count` requests or waits for a reply
        // with a timeout that ends at the deadline after the last request.
        loop {
            let now = Instant::now();
            let sent = sent_at.len();
            if sent < usize::from(count) && now >= start + interval * sent as u32 {
                let mut pkt = vec![0u8; 64];
                pkt[0] = if v6 { 128 } else { 8 };
                pkt[4..6].copy_from_slice(&ident.to_be_bytes());
                pkt[6..8].copy_from_slice(&(sent as u16).to_be_bytes());
                for (i, b) in pkt[8..].iter_mut().enumerate() {
                    *b = i as u8;
                }
                if !v6 {
                    let ck = icmp_checksum(&pkt); // the kernel fills it in for ICMPv6
                    pkt[2..4].copy_from_slice(&ck.to_be_bytes());
                }
                sent_at.push(Instant::now());
                sock.send_to(&pkt, &dest)
                    .with_context(|| format!("sending echo to {to}"))?;
                continue;
            }
            let wait_until = if sent < usize::from(count) {
                start + interval * sent as u32
            } else {
                if received as usize == sent {
                    break;
                }
                *sent_at.last().unwrap_or(&start) + timeout
            };
            let wait = wait_until.saturating_duration_since(now);
            if wait.is_zero() {
                if sent < usize::from(count) {
                    continue;
                }
                break;
            }
            sock.set_read_timeout(Some(wait.max(Duration::from_micros(50))))?;
            let n = match (&sock).read(&mut buf) {
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    continue;
                }
                Err(e) => return Err(e).context("receiving echo reply"),
            };
            let got = Instant::now();
            let icmp = if v6 {
                &buf[..n]
            } else {
                let ihl = usize::from(buf[0] & 0x0f) * 4;
                buf.get(ihl..n).unwrap_or(&[])
            };
            let reply_type = if v6 { 129 } else { 0 };
            if icmp.len() < 8
                || icmp[0] != reply_type
                || u16::from_be_bytes([icmp[4], icmp[5]]) != ident
            {
                continue;
            }
            let seq = usize::from(u16::from_be_bytes([icmp[6], icmp[7]]));
            if seq < sent_at.len() && rtt[seq].is_none() {
                rtt[seq] = Some(got - sent_at[seq]);
                received += 1;
            }
        }
        Ok(PingStats {
            sent: sent_at.len() as u32,
            received,
            lost: (0..count)
                .filter(|&i| rtt[usize::from(i)].is_none())
                .collect(),
            rtts: rtt.into_iter().flatten().collect(),
        })
    }

    // ----- observing the link -----

    /// The router's nftables counters.
    pub fn counters(&self) -> Result<NftCounters> {
        let out = run_checked(
            self.cmd(Side::R, "nft")
                .args(["-j", "list", "table", "inet", NFT_TABLE]),
            None,
        )?;
        let v: serde_json::Value = serde_json::from_str(&out).context("parsing `nft -j` output")?;
        let mut by_name: HashMap<String, u64> = HashMap::new();
        for item in v["nftables"].as_array().into_iter().flatten() {
            let rule = &item["rule"];
            let Some(comment) = rule["comment"].as_str() else {
                continue;
            };
            let packets = rule["expr"]
                .as_array()
                .into_iter()
                .flatten()
                .find_map(|e| e["counter"]["packets"].as_u64())
                .ok_or_else(|| anyhow!("rule {comment} has no counter: {rule}"))?;
            by_name.insert(comment.to_string(), packets);
        }
        let g = |k: &str| by_name.get(k).copied().unwrap_or(0);
        Ok(NftCounters {
            fwd_12: g("fwd_12"),
            fwd_21: g("fwd_21"),
            udp_12: g("udp_12"),
            udp_21: g("udp_21"),
            seen_12: g("seen_12"),
            seen_21: g("seen_21"),
            nth_12: g("nth_12"),
            nth_21: g("nth_21"),
            rand_12: g("rand_12"),
            rand_21: g("rand_21"),
        })
    }

    /// Adds per-connection packet counters in the router, in table `inet TABLE` (beside
    /// the bed's own): for each counter, a chain at `priority` on the forward hook
    /// (the bed's loss rules sit at 0: below counts before them, above after) that
    /// counts the packets matching `matching` in a set keyed by the port expression
    /// `key` (`tcp sport`, `tcp dport`). Read them with [`Netbed::port_counts`].
    pub fn add_port_counters(&self, table: &str, counters: &[PortCounter]) -> Result<()> {
        let mut script = format!("table inet {table} {{\n");
        for c in counters {
            let PortCounter {
                set,
                priority,
                matching,
                key,
            } = c;
            script.push_str(&format!(
                "  set {set} {{ type inet_service; size 1024; flags dynamic; counter; }}\n  \
                 chain count_{set} {{\n    type filter hook forward priority {priority}; \
                 policy accept;\n    {matching} update @{set} {{ {key} }}\n  }}\n"
            ));
        }
        script.push_str("}\n");
        run_checked(self.cmd(Side::R, "nft").args(["-f", "-"]), Some(&script))?;
        Ok(())
    }

    /// Packets per port counted so far by the set `set` of [`Netbed::add_port_counters`].
    pub fn port_counts(&self, table: &str, set: &str) -> Result<HashMap<u16, u64>> {
        let out = run_checked(
            self.cmd(Side::R, "nft")
                .args(["-j", "list", "set", "inet", table, set]),
            None,
        )?;
        let v: serde_json::Value = serde_json::from_str(&out).context("parsing `nft -j` output")?;
        let mut counts = HashMap::new();
        for item in v["nftables"].as_array().into_iter().flatten() {
            for e in item["set"]["elem"].as_array().into_iter().flatten() {
                let port = e["elem"]["val"]
                    .as_u64()
                    .and_then(|p| u16::try_from(p).ok());
                let packets = e["elem"]["counter"]["packets"].as_u64();
                if let (Some(port), Some(packets)) = (port, packets) {
                    counts.insert(port, packets);
                }
            }
        }
        Ok(counts)
    }

    /// Starts counting the UDP packets that arrive at `side`'s host (its input hook:
    /// after the router, its loss rules and its shaper). With the bed's offloads off
    /// that is one per datagram, however the sender batched them; compared with
    /// [`NftCounters::udp_12`] / `udp_21` it gives what the link dropped, which tbf's
    /// own drop counter does not (it counts skbs).
    pub fn add_input_udp_counter(&self, side: Side, table: &str) -> Result<()> {
        let script = format!(
            "table inet {table} {{\n  counter udp_in {{ }}\n  chain input {{\n    \
             type filter hook input priority -300; policy accept;\n    \
             meta l4proto udp counter name udp_in\n  }}\n}}\n"
        );
        run_checked(self.cmd(side, "nft").args(["-f", "-"]), Some(&script))?;
        Ok(())
    }

    /// UDP packets counted so far by [`Netbed::add_input_udp_counter`].
    pub fn input_udp_count(&self, side: Side, table: &str) -> Result<u64> {
        let v = self.nft_json(side, &["list", "counter", "inet", table, "udp_in"])?;
        v["nftables"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|i| i["counter"]["packets"].as_u64())
            .context("no udp_in counter in `nft -j` output")
    }

    /// `nft -j ARGS` in `side`'s namespace, parsed.
    fn nft_json(&self, side: Side, args: &[&str]) -> Result<serde_json::Value> {
        let out = run_checked(self.cmd(side, "nft").arg("-j").args(args), None)?;
        serde_json::from_str(&out).context("parsing `nft -j` output")
    }

    /// Loads the nftables `script` (`nft -f -`) in `side`'s namespace: a test's own
    /// table beside the bed's (marking, counting), read back with
    /// [`Netbed::nft_rule_counter`].
    pub fn nft_apply(&self, side: Side, script: &str) -> Result<()> {
        run_checked(self.cmd(side, "nft").args(["-f", "-"]), Some(script))?;
        Ok(())
    }

    /// The counter (packets, bytes) of the rule commented `comment` in table
    /// `inet TABLE` of `side`'s namespace. nftables counts `sk_buff`s: where offloads
    /// batch segments (GSO, GRO) one packet is many, and the bytes tell how many.
    pub fn nft_rule_counter(&self, side: Side, table: &str, comment: &str) -> Result<(u64, u64)> {
        let v = self.nft_json(side, &["list", "table", "inet", table])?;
        v["nftables"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|i| i["rule"]["comment"].as_str() == Some(comment))
            .find_map(|i| {
                i["rule"]["expr"].as_array()?.iter().find_map(|e| {
                    let c = &e["counter"];
                    Some((c["packets"].as_u64()?, c["bytes"].as_u64()?))
                })
            })
            .ok_or_else(|| anyhow!("no counter on rule {comment} in table {table}: {v}"))
    }

    /// Packets dropped by the loss rules (every-Nth plus random), both directions.
    pub fn dropped_packets(&self) -> Result<u64> {
        Ok(self.counters()?.dropped())
    }

    /// Statistics of the shaper for traffic in `dir` (`H1ToH2` or `H2ToH1`), if any.
    pub fn shaper_stats(&self, dir: Dir) -> Result<Option<ShaperStats>> {
        let dev = if dir == Dir::H2ToH1 { R_H1_IF } else { R_H2_IF };
        let out = self.tc(&["-s", "-j", "qdisc", "show", "dev", dev])?;
        let v: serde_json::Value = serde_json::from_str(&out).context("parsing `tc -j` output")?;
        Ok(v.as_array()
            .into_iter()
            .flatten()
            .find(|q| q["kind"] == "tbf")
            .map(|q| ShaperStats {
                sent_bytes: q["bytes"].as_u64().unwrap_or(0),
                sent_packets: q["packets"].as_u64().unwrap_or(0),
                drops: q["drops"].as_u64().unwrap_or(0),
                overlimits: q["overlimits"].as_u64().unwrap_or(0),
            }))
    }

    /// Delay-line counters and delay logs, `None` if the bed has no delay line.
    pub fn delay_stats(&self) -> Option<DelayLineStats> {
        self.delay.as_ref().map(DelayLine::stats)
    }

    /// Packets the delay line lost although nothing asked for it: drops in the TUN
    /// devices' queues (the worker fell behind), beyond `delay_queue_limit`, and write
    /// errors. Accuracy tests should check this is 0. 0 without a delay line.
    pub fn delay_line_losses(&self) -> Result<u64> {
        let Some(st) = self.delay_stats() else {
            return Ok(0);
        };
        let mut lost = 0;
        for d in [&st.h1_to_h2, &st.h2_to_h1] {
            lost += d.overflow_drops + d.write_errors;
        }
        for (d, tun) in [TUN_H1_TO_H2, TUN_H2_TO_H1].into_iter().enumerate() {
            if self.cfg.dir_config(d).is_none() {
                continue;
            }
            let out = run_checked(
                Command::new("ip").args([
                    "-n",
                    self.ns(Side::R),
                    "-s",
                    "-j",
                    "link",
                    "show",
                    "dev",
                    tun,
                ]),
                None,
            )?;
            let v: serde_json::Value =
                serde_json::from_str(&out).context("parsing `ip -j` output")?;
            lost += v[0]["stats64"]["tx"]["dropped"].as_u64().unwrap_or(0);
        }
        Ok(lost)
    }

    /// Restarts delay-line counting: counters, logs, variation cycle and reorder count.
    pub fn reset_delay_stats(&self) {
        if let Some(d) = &self.delay {
            d.reset();
        }
    }

    /// Whether the delay-line thread is alive (false if there is none).
    pub fn delay_line_running(&self) -> bool {
        self.delay.as_ref().is_some_and(DelayLine::is_running)
    }

    /// Tears the bed down now (what `Drop` does).
    pub fn destroy(mut self) {
        self.cleanup();
    }

    fn cleanup(&mut self) {
        self.delay = None; // stops and joins the delay-line thread, closing the TUN fds
        for ns in self.created.drain(..).rev() {
            destroy_ns(&ns);
        }
    }
}

impl Drop for Netbed {
    fn drop(&mut self) {
        self.cleanup();
    }
}

/// Whether TCP `port` is in LISTEN state in the calling thread's network namespace
/// (run it inside `Netbed::in_ns` to ask about a bed host).
pub fn tcp_listening(port: u16) -> bool {
    let want = format!(":{port:04X} ");
    ["tcp", "tcp6"].iter().any(|f| {
        std::fs::read_to_string(format!("/proc/thread-self/net/{f}"))
            .unwrap_or_default()
            .lines()
            .skip(1)
            .any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && format!("{} ", cols[1]).ends_with(&want) && cols[3] == "0A"
            })
    })
}
