//! iperf 2 clients on netmeter's port. iperf 2 has no control connection: a TCP test's
//! settings are the connection's first bytes, a UDP test's ride in every datagram
//! (`wire::iperf2`). The door tells an iperf 2 header from an iperf3 cookie
//! (`wire::classify_tcp`), the UDP listener an iperf 2 datagram from iperf3's connect
//! datagram (`wire::classify_udp`); both come here.
//!
//! Decisions written down:
//! * One iperf 2 test is one *group*: the `-P N` connections (or UDP flows) one source
//!   opens with the same thread count within [`JOIN_WINDOW`] of the first. The group
//!   takes one `--max-tests` slot and one `--max-tests-per-source` slot, writes one
//!   audit line and one log line when its last member ends.
//! * Limits are checked on the header, before a byte of data is read: `--max-streams`
//!   (threads, twice with `--full-duplex`), `--server-max-duration` (a `-t` test longer
//!   is refused; a `-n` test is ended at the limit), `--server-bitrate-limit` (a `-b`
//!   above it is refused; an unpaced sender is ended when its mean rate goes over; this
//!   server's own sending is paced under it), `--psk-file` (iperf 2 cannot prove a key:
//!   refused, logged). iperf 2 has no way to tell a client why: it is closed and the
//!   server's log says why.
//! * `-d`/`-r` (TCP and UDP): this server connects back to the client's own address,
//!   at the port its header names, and sends (at once, or after the client's test);
//!   never to another address. Not served (refused with a logged reason):
//!   `--permit-key`. A bounceback test (`iperf2/bounce.rs`) is judged as a
//!   one-thread TCP test of its run time.
//!
//! [`plan`] is pure (header and policy in, what to do out); `iperf2/tcp.rs` and
//! `iperf2/udp.rs` are the I/O.

pub mod bounce;
pub mod print;
pub mod tcp;
pub mod udp;

use super::audit::{self, TestParams};
use super::policy::{Answer, MAX_DURATION_GRACE, Policy, Reason, Refusal, TEST_GRACE};
use super::{LiveSession, Shared, SlotGuard, canon, shown};
use crate::report::iperf2::server::SumRows;
use crate::wire::iperf2::{Amount, BB_HDR_LEN, BbHdr, HEADER_EXTEND, Legacy, TestHdr};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How long after a group's first connection its other `-P` members may join.
pub const JOIN_WINDOW: Duration = Duration::from_secs(5);
/// A test with no end of its own (`-n` without `--server-max-duration`) still ends when
/// no byte moves for this long (or `--test-idle-timeout`).
pub const IDLE_LIMIT: Duration = Duration::from_secs(30);
/// iperf 2 threads one test may have (iperf3's stream cap).
pub const MAX_THREADS: u32 = crate::wire::MAX_STREAMS;
/// The block this server sends with `-R`/`--full-duplex` when the client named none
/// (iperf 2's TCP default, 128 KiB).
pub const DEFAULT_TCP_BLOCK: usize = 128 * 1024;

/// Who sends in an iperf 2 test, as this server sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// The client sends (iperf 2's default).
    Receive,
    /// `-R`: this server sends.
    Send,
    /// `--full-duplex`: both.
    Both,
}

impl Flow {
    fn label(self) -> &'static str {
        match self {
            Flow::Receive => "upload",
            Flow::Send => "reverse",
            Flow::Both => "bidir",
        }
    }
}

/// What this server does for one iperf 2 connection or flow.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub flow: Flow,
    /// The client's `-t`, when it gave one.
    pub time: Option<Duration>,
    /// The client's `-n`, when it gave one.
    pub bytes: Option<u64>,
    /// After this long the server ends the test whatever the client does.
    pub deadline: Option<Duration>,
    /// No byte moved for this long: the test is over.
    pub idle: Duration,
    /// This server's sending rate per connection (bits/s; `None`: as fast as it can).
    pub send_bps: Option<u64>,
    /// The mean rate over which a test is ended (`--server-bitrate-limit`), per group.
    pub limit_bps: Option<u64>,
    /// Bytes per write when sending.
    pub block: usize,
    /// `-d`/`-r`: this server connects back to the client's port and sends, at once
    /// or after the client's test.
    pub legacy: Option<Legacy>,
}

fn refusal(reason: Reason, message: String) -> Refusal {
    // iperf 2 has no way to hear an answer: the connection is closed.
    Refusal {
        reason,
        answer: Answer::Busy,
        message,
    }
}

/// Decide from the header alone whether and how to serve an iperf 2 test.
pub fn plan(h: &TestHdr, policy: &Policy, psk_required: bool) -> Result<Plan, Refusal> {
    if psk_required {
        return Err(refusal(
            Reason::Auth,
            "an iperf 2 client cannot prove the pre-shared key this server requires (--psk-file)"
                .into(),
        ));
    }
    if h.keyed() {
        return Err(refusal(
            Reason::Params,
            "iperf 2's --permit-key is not supported".into(),
        ));
    }
    if let Some(l) = h.legacy
        && h.port == 0
    {
        let flag = if l == Legacy::Dual { "-d" } else { "-r" };
        return Err(refusal(
            Reason::Params,
            format!("iperf 2's {flag} header names no port to connect back to"),
        ));
    }
    let flow = if h.full_duplex() {
        Flow::Both
    } else if h.reverse() {
        Flow::Send
    } else {
        Flow::Receive
    };
    let threads = h.threads.max(1);
    let both_ways = flow == Flow::Both || h.legacy.is_some();
    let streams = threads.saturating_mul(if both_ways { 2 } else { 1 });
    if threads > MAX_THREADS || policy.max_streams.is_some_and(|m| streams > m) {
        let max = policy.max_streams.unwrap_or(MAX_THREADS).min(MAX_THREADS);
        return Err(refusal(
            Reason::Streams,
            format!(
                "the iperf 2 client asked for {streams} data streams and this server allows at most {max} (--max-streams)"
            ),
        ));
    }
    let (time, bytes) = match h.amount {
        Amount::TimeCentis(c) => (Some(Duration::from_millis(u64::from(c) * 10)), None),
        Amount::Bytes(n) => (None, Some(n)),
    };
    // -r: the server's test follows the client's, twice the time in all.
    let legs = if h.legacy == Some(Legacy::Tradeoff) {
        2
    } else {
        1
    };
    let whole = time.map(|t| t * legs);
    if let (Some(t), Some(max)) = (whole, policy.max_duration_s)
        && t.as_secs_f64() > max as f64
    {
        return Err(refusal(
            Reason::Duration,
            format!(
                "the iperf 2 client asked for {} s and this server allows at most {max} s (--server-max-duration)",
                t.as_secs_f64()
            ),
        ));
    }
    let limit_bps = policy.bitrate_limit.map(|l| l.0);
    let asked_bps = if h.rate_is_pps() {
        // Packets per second: at the client's datagram size (or iperf 2's 1470).
        let len = if h.buf_len > 0 { h.buf_len } else { 1470 };
        h.rate.saturating_mul(u64::from(len) * 8)
    } else {
        h.rate
    };
    let total_bps = asked_bps.saturating_mul(u64::from(threads));
    if let Some(limit) = limit_bps
        && total_bps > limit
    {
        return Err(refusal(
            Reason::Bitrate,
            format!(
                "the iperf 2 client asked for {total_bps} bit/s and this server allows at most {limit} bit/s (--server-bitrate-limit)"
            ),
        ));
    }
    let own = whole.map(|t| t + TEST_GRACE);
    let cap = policy
        .max_duration_s
        .map(|m| Duration::from_secs(m) + MAX_DURATION_GRACE);
    let deadline = match (own, cap) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let idle = if policy.test_idle_s > 0 {
        Duration::from_secs(policy.test_idle_s)
    } else {
        IDLE_LIMIT
    };
    let block = match h.buf_len {
        0 => DEFAULT_TCP_BLOCK,
        n => (n as usize).clamp(1, crate::wire::TCP_MAX_BLOCK),
    };
    // With -R the client's -b is the rate it wants this server to send at.
    let mut send_bps = (asked_bps > 0).then_some(asked_bps);
    if let Some(limit) = limit_bps {
        let share = (limit / u64::from(threads)).max(1);
        send_bps = Some(send_bps.map_or(share, |b| b.min(share)));
    }
    Ok(Plan {
        flow,
        time,
        bytes,
        deadline,
        idle,
        send_bps,
        limit_bps,
        block,
        legacy: h.legacy,
    })
}

/// The test header a bounceback request stands for (its run time, one thread), so that
/// [`plan`] and [`Groups`] judge it as any other TCP test.
pub fn bounceback_as_test(bb: &BbHdr) -> TestHdr {
    TestHdr {
        flags: HEADER_EXTEND,
        udp: false,
        threads: 1,
        port: 0,
        buf_len: bb.size,
        win_band: 0,
        amount: if bb.run_time_centis > 0 {
            Amount::TimeCentis(bb.run_time_centis)
        } else {
            Amount::Bytes(0)
        },
        upper: 0,
        lower: 0,
        version: None,
        tos: bb.tos,
        rate: 0,
        start: None,
        legacy: None,
        len: BB_HDR_LEN,
    }
}

/// The audit log's view of an iperf 2 test.
pub fn audit_params(h: &TestHdr, plan: &Plan) -> TestParams {
    TestParams {
        protocol: if h.udp { "udp" } else { "tcp" },
        parallel: h.threads.max(1),
        time_s: plan.time.map(|t| t.as_secs_f64()),
        bytes: plan.bytes,
        blocks: None,
        bitrate_bps: h.rate,
        direction: plan.flow.label(),
    }
}

/// The log's words for a test: "iperf 2.1.8 client, TCP, -P 2, -t 10 s, reverse".
pub fn describe(h: &TestHdr, plan: &Plan) -> String {
    let who = match h.version {
        Some(v) => format!("iperf {v} client"),
        None => "iperf 2 client (version not sent)".to_string(),
    };
    let mut s = format!("{who}, {}", if h.udp { "UDP" } else { "TCP" });
    if h.threads > 1 {
        s += &format!(", -P {}", h.threads);
    }
    if let Some(t) = plan.time {
        s += &format!(", -t {} s", t.as_secs_f64());
    }
    if let Some(n) = plan.bytes {
        s += &format!(", -n {n} bytes");
    }
    if h.rate > 0 {
        s += &format!(
            ", -b {}{}",
            h.rate,
            if h.rate_is_pps() { " pps" } else { " bit/s" }
        );
    }
    match plan.flow {
        Flow::Receive => {}
        Flow::Send => s += ", -R",
        Flow::Both => s += ", --full-duplex",
    }
    match plan.legacy {
        Some(Legacy::Dual) => s += &format!(", -d (back to its port {})", h.port),
        Some(Legacy::Tradeoff) => s += &format!(", -r (back to its port {})", h.port),
        None => {}
    }
    if h.trip_times() {
        s += ", --trip-times";
    }
    s
}

/// Whether a group's mean rate so far is over `limit_bps` (judged after a second, with
/// a tenth of slack for the first burst of a window's worth).
pub fn over_limit(bytes: u64, elapsed: Duration, limit_bps: u64) -> bool {
    let s = elapsed.as_secs_f64();
    s >= 1.0 && bytes as f64 * 8.0 / s > limit_bps as f64 * 1.1
}

/// One iperf 2 test: its `-P` members share the slot, the counts and the audit line.
pub(super) struct Group {
    shared: Arc<Shared>,
    pub peer: SocketAddr,
    pub started: Instant,
    pub sent: AtomicU64,
    pub received: AtomicU64,
    entry: Mutex<audit::Entry>,
    error: Mutex<Option<String>>,
    /// `netmeter iperf2 -s` and a `-P N` test (TCP or UDP) this server receives or
    /// sends (`-R`): the group's sum rows, which its members' printers feed.
    pub(super) sum: Option<Arc<Mutex<SumRows>>>,
    source: IpAddr,
    _slot: SlotGuard,
    _live: LiveSession,
    _running: super::metrics::ActiveGuard,
}

impl Group {
    /// Record an error of one member (the group's audit line says "error").
    pub fn failed(&self, why: String) {
        if let Ok(mut e) = self.error.lock() {
            e.get_or_insert(why);
        }
    }

    pub(super) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The server's monotonic time (its config's `Clock`): every deadline, interval
    /// and pacing decision of an iperf 2 test reads it, so a virtual clock drives them.
    pub fn now(&self) -> Instant {
        self.shared.now()
    }

    /// The server's wall clock (its config's `Clock`): the time stamps iperf 2 puts on
    /// the wire and the one-way delays measured against the client's.
    pub fn wall(&self) -> std::time::SystemTime {
        self.shared.cfg.clock.wall()
    }

    /// Both ways' bytes so far.
    pub fn total(&self) -> u64 {
        self.sent.load(Ordering::Relaxed) + self.received.load(Ordering::Relaxed)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let (sent, received) = (
            self.sent.load(Ordering::Relaxed),
            self.received.load(Ordering::Relaxed),
        );
        let secs = self
            .now()
            .saturating_duration_since(self.started)
            .as_secs_f64();
        let error = self.error.lock().ok().and_then(|mut e| e.take());
        self.shared.log(&format!(
            "iperf 2 test from {} ended: received {received} bytes, sent {sent} bytes in {secs:.2} s{}",
            shown(self.peer),
            error.as_ref().map(|e| format!(" ({e})")).unwrap_or_default()
        ));
        if let Ok(mut entry) = self.entry.lock() {
            entry.bytes_sent = sent;
            entry.bytes_received = received;
            let outcome = match error {
                Some(e) => audit::Outcome::Error(e),
                None => audit::Outcome::Ok,
            };
            self.shared.record(&entry, &outcome);
        }
        if let Ok(mut s) = self.shared.source_slots.lock() {
            s.give_back(self.source);
        }
        self.shared.tests_done.fetch_add(1, Ordering::Relaxed);
    }
}

/// A group still open to members.
struct Open {
    group: Weak<Group>,
    threads: u32,
    udp: bool,
    joined: u32,
    until: Instant,
}

/// The iperf 2 groups open to new members, by source address.
#[derive(Default)]
pub(super) struct Groups {
    open: Mutex<HashMap<IpAddr, Vec<Open>>>,
    /// iperf 2's transfer ids, one per connection or flow (`netmeter iperf2 -s`).
    transfers: std::sync::atomic::AtomicUsize,
}

impl Groups {
    /// The group a new connection or flow from `peer` belongs to: an open one of the
    /// same thread count and protocol, else a new one (which takes the test slots).
    pub(super) fn join(
        &self,
        shared: &Arc<Shared>,
        peer: SocketAddr,
        h: &TestHdr,
        plan: &Plan,
        now: Instant,
    ) -> Result<Arc<Group>, Refusal> {
        let ip = canon(peer.ip());
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|_, v| {
            v.retain(|o| o.until > now && o.group.strong_count() > 0);
            !v.is_empty()
        });
        if let Some(o) = open.get_mut(&ip).and_then(|v| {
            v.iter_mut()
                .find(|o| o.threads == h.threads && o.udp == h.udp && o.joined < o.threads)
        }) && let Some(g) = o.group.upgrade()
        {
            o.joined += 1;
            return Ok(g);
        }
        let g = Arc::new(new_group(shared, peer, h, plan)?);
        if h.threads > 1 {
            open.entry(ip).or_default().push(Open {
                group: Arc::downgrade(&g),
                threads: h.threads,
                udp: h.udp,
                joined: 1,
                until: now + JOIN_WINDOW,
            });
        }
        Ok(g)
    }
}

/// Take the slots of a new test (`--max-tests`, `--max-tests-per-source`).
fn new_group(
    shared: &Arc<Shared>,
    peer: SocketAddr,
    h: &TestHdr,
    plan: &Plan,
) -> Result<Group, Refusal> {
    let taken = shared.active.fetch_add(1, Ordering::AcqRel);
    let slot = SlotGuard(shared.clone());
    if let Some(r) = shared.cfg.policy.busy(taken) {
        return Err(r);
    }
    let source = shared
        .source_slots
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take(peer.ip(), shared.cfg.policy.max_tests_per_source)?;
    let mut entry = audit::Entry::begun(shown(peer), shared.now(), shared.cfg.clock.wall());
    entry.test = Some(audit_params(h, plan));
    shared.touch();
    let sum = match &shared.cfg.iperf2_layout {
        Some(l) if h.threads > 1 && plan.flow != Flow::Both && plan.legacy.is_none() => {
            let mut ctx = l.ctx.clone();
            ctx.client = false;
            ctx.udp = h.udp;
            let sum = match plan.flow {
                // `-u -R -P`: iperf 2.2.1 prints no sum, one column header.
                Flow::Send if h.udp => SumRows::headers_only(ctx, h.threads),
                Flow::Send => SumRows::new(ctx, h.threads, shared.cfg.interval_s).of_senders(),
                _ => SumRows::new(ctx, h.threads, shared.cfg.interval_s),
            };
            Some(Arc::new(Mutex::new(sum)))
        }
        // `-d`: the client's test and the connection back, summed as iperf 2 does.
        Some(l) if h.threads == 1 && plan.legacy == Some(Legacy::Dual) => {
            let mut ctx = l.ctx.clone();
            ctx.client = false;
            ctx.udp = h.udp;
            let sum = SumRows::new(ctx, 2, shared.cfg.interval_s);
            Some(Arc::new(Mutex::new(sum)))
        }
        _ => None,
    };
    Ok(Group {
        shared: shared.clone(),
        peer,
        started: shared.now(),
        sent: AtomicU64::new(0),
        received: AtomicU64::new(0),
        entry: Mutex::new(entry),
        error: Mutex::new(None),
        sum,
        source,
        _slot: slot,
        _live: LiveSession::new(shared, peer.ip()),
        _running: shared.counters.running(),
    })
}

/// A refused iperf 2 test: logged (or counted, as `refusal_log` decides) and audited.
pub(super) fn refused(shared: &Shared, peer: SocketAddr, h: Option<&TestHdr>, r: Refusal) {
    let mut entry = audit::Entry::begun(shown(peer), shared.now(), shared.cfg.clock.wall());
    if let Some(h) = h
        && let Ok(p) = plan(h, &Policy::default(), false)
    {
        entry.test = Some(audit_params(h, &p));
    }
    let r = Refusal {
        message: format!("iperf 2 client: {}", r.message),
        ..r
    };
    shared.log_refusal(&mut entry, &r);
    shared.record(&entry, &audit::Outcome::Refused(r.reason, r.message));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::iperf2::{HEADER_EXTEND, HEADER_VERSION1, HEADER_VERSION2, TestHdr};

    fn hdr(amount: Amount) -> TestHdr {
        TestHdr {
            flags: HEADER_EXTEND,
            udp: false,
            threads: 1,
            port: 5001,
            buf_len: 0,
            win_band: 0,
            amount,
            upper: 0,
            lower: 0,
            version: None,
            tos: 0,
            rate: 0,
            start: None,
            legacy: None,
            len: 60,
        }
    }

    #[test]
    fn a_plain_test_is_received_until_its_time_and_grace() {
        let p = plan(&hdr(Amount::TimeCentis(1000)), &Policy::default(), false).unwrap();
        assert_eq!(p.flow, Flow::Receive);
        assert_eq!(p.time, Some(Duration::from_secs(10)));
        assert_eq!(p.deadline, Some(Duration::from_secs(10) + TEST_GRACE));
        assert_eq!((p.send_bps, p.block), (None, DEFAULT_TCP_BLOCK));
    }

    #[test]
    fn reverse_and_full_duplex_need_version2_flags() {
        let mut h = hdr(Amount::TimeCentis(100));
        h.upper = crate::wire::iperf2::UPPER_REVERSE;
        let p = plan(&h, &Policy::default(), false).unwrap();
        assert_eq!(
            p.flow,
            Flow::Receive,
            "without HEADER_VERSION2 iperf 2 ignores it"
        );
        h.flags |= HEADER_VERSION2;
        assert_eq!(
            plan(&h, &Policy::default(), false).unwrap().flow,
            Flow::Send
        );
        h.upper = crate::wire::iperf2::UPPER_FULLDUPLEX;
        assert_eq!(
            plan(&h, &Policy::default(), false).unwrap().flow,
            Flow::Both
        );
    }

    #[test]
    fn limits_refuse_on_the_header() {
        let policy = Policy {
            max_duration_s: Some(5),
            bitrate_limit: Some((1_000_000, 1.0)),
            max_streams: Some(4),
            ..Policy::default()
        };
        let long = plan(&hdr(Amount::TimeCentis(1000)), &policy, false).unwrap_err();
        assert_eq!(long.reason, Reason::Duration);
        let mut fast = hdr(Amount::TimeCentis(100));
        fast.rate = 2_000_000;
        assert_eq!(
            plan(&fast, &policy, false).unwrap_err().reason,
            Reason::Bitrate
        );
        let mut many = hdr(Amount::TimeCentis(100));
        many.threads = 5;
        assert_eq!(
            plan(&many, &policy, false).unwrap_err().reason,
            Reason::Streams
        );
        many.threads = u32::MAX;
        let r = plan(&many, &Policy::default(), false).unwrap_err();
        assert_eq!(r.reason, Reason::Streams);
        assert_eq!(
            plan(&hdr(Amount::TimeCentis(100)), &policy, true)
                .unwrap_err()
                .reason,
            Reason::Auth
        );
        // A -n test is allowed and ended at the limit; this server's own sending is
        // paced under the rate limit, shared by the threads.
        let mut n = hdr(Amount::Bytes(1 << 30));
        n.threads = 2;
        let p = plan(&n, &policy, false).unwrap();
        assert_eq!(
            p.deadline,
            Some(Duration::from_secs(5) + MAX_DURATION_GRACE)
        );
        assert_eq!(p.send_bps, Some(500_000));
    }

    #[test]
    fn legacy_dual_and_tradeoff_connect_back_over_tcp_and_udp() {
        let mut h = hdr(Amount::TimeCentis(300));
        h.flags |= HEADER_VERSION1;
        h.legacy = Some(Legacy::Dual);
        let p = plan(&h, &Policy::default(), false).unwrap();
        assert_eq!(p.legacy, Some(Legacy::Dual));
        assert_eq!(p.deadline, Some(Duration::from_secs(3) + TEST_GRACE));
        h.legacy = Some(Legacy::Tradeoff);
        let policy = Policy {
            max_duration_s: Some(5),
            ..Policy::default()
        };
        let r = plan(&h, &policy, false).unwrap_err();
        assert_eq!(
            r.reason,
            Reason::Duration,
            "-r runs twice the time: {}",
            r.message
        );
        h.udp = true;
        let p = plan(&h, &Policy::default(), false).unwrap();
        assert_eq!(p.legacy, Some(Legacy::Tradeoff), "-r over UDP is served");
        h.port = 0;
        let r = plan(&h, &Policy::default(), false).unwrap_err();
        assert!(r.message.contains("names no port"), "{}", r.message);
    }

    #[test]
    fn pps_rates_count_at_the_datagram_size() {
        let mut h = hdr(Amount::TimeCentis(100));
        h.udp = true;
        h.upper = crate::wire::iperf2::UPPER_UNITS_PPS;
        h.rate = 1000;
        h.buf_len = 1000;
        let policy = Policy {
            bitrate_limit: Some((7_000_000, 1.0)),
            ..Policy::default()
        };
        assert_eq!(
            plan(&h, &policy, false).unwrap_err().reason,
            Reason::Bitrate
        );
    }

    #[test]
    fn the_mean_rate_is_judged_after_a_second() {
        assert!(!over_limit(
            10_000_000,
            Duration::from_millis(500),
            1_000_000
        ));
        assert!(over_limit(1_000_000, Duration::from_secs(2), 1_000_000));
        assert!(!over_limit(250_000, Duration::from_secs(2), 1_000_000));
    }
}
