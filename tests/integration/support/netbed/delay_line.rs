//! Userspace delay line for the netbed router, because the test kernel has no netem.
//!
//! The router steers the forwarded packets of a direction into a TUN device with
//! policy routing (`ip rule add iif <veth> lookup <table>`, table route `dev <tun>`).
//! One thread reads those packets, holds each in a binary heap keyed by its release
//! time (`Instant`, i.e. CLOCK_MONOTONIC), sleeps in `ppoll` until the next release
//! (1 ns timer slack, no busy spin) and writes the packet back into the same TUN
//! device. The kernel then sees it arriving *from* the TUN device, so the policy
//! rule no longer matches and the main table routes it on to the destination.
//!
//! Everything the line does is deterministic given the packet order: fixed delay per
//! direction, optional delay variation (a cyclic list or seeded uniform numbers) and
//! optional reordering (every Nth matching packet held back by an extra time). Each
//! scheduled delay is logged so tests can compute expected jitter exactly.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::{Dir, Proto};

/// Longest single sleep of the worker; bounds how long a lost wake-up could delay stop.
const MAX_IDLE: Duration = Duration::from_millis(100);
/// Packets read from one TUN device before the worker looks at due releases again.
const READ_BATCH: usize = 256;
/// Largest packet a TUN device can hand us (no offloads are enabled, so MTU-sized in practice).
const BUF_LEN: usize = 65_536;

/// Extra per-packet delay on top of the fixed delay ("jitter"), deterministic.
#[derive(Clone, Debug, PartialEq)]
pub enum Variation {
    /// The i-th matching packet (0-based, per direction) gets `list[i % list.len()]`.
    Cycle(Vec<Duration>),
    /// The i-th matching packet gets a SplitMix64-derived value uniform in `[0, max]`
    /// (nanosecond granularity); the same seed gives the same sequence.
    Uniform { max: Duration, seed: u64 },
}

impl Variation {
    /// The extra delay of the `index`-th matching packet (0-based).
    pub fn extra_for(&self, index: u64) -> Duration {
        match self {
            Variation::Cycle(list) if list.is_empty() => Duration::ZERO,
            Variation::Cycle(list) => list[(index % list.len() as u64) as usize],
            Variation::Uniform { max, seed } => {
                let span = max.as_nanos() as u64;
                if span == 0 {
                    return Duration::ZERO;
                }
                let r = splitmix64(seed.wrapping_add(index.wrapping_mul(0x9E37_79B9_7F4A_7C15)));
                Duration::from_nanos(r % (span + 1))
            }
        }
    }
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Deterministic reordering: every `every_nth` matching packet (the Nth, 2Nth, ...,
/// counted from 1 per direction) is held back by `extra` on top of its normal delay.
/// It is overtaken only if a successor arrives within `extra`.
#[derive(Clone, Debug, PartialEq)]
pub struct Reorder {
    pub every_nth: u32,
    pub extra: Duration,
    pub dir: Dir,
    pub proto: Proto,
}

/// What the line does to one direction.
#[derive(Clone, Debug, Default)]
pub(super) struct DirConfig {
    pub base: Duration,
    pub variation: Option<(Variation, Proto)>,
    /// Every Nth packet of the protocol (and from or to the port, if one) held back.
    pub reorder: Option<(u32, Duration, Proto, Option<u16>)>,
    /// Variation never lets a packet overtake an earlier one (held packets excepted).
    pub preserve_order: bool,
}

/// One packet's passage through the line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DelayRecord {
    /// Arrival index within the direction, 0-based.
    pub index: u64,
    /// IP protocol number (17 = UDP, 6 = TCP, 1 = ICMP, 58 = ICMPv6).
    pub proto: u8,
    pub src_port: u16,
    pub dst_port: u16,
    /// IP packet length in bytes.
    pub len: u16,
    /// Planned hold time (release - arrival): base + variation + reorder extra,
    /// after the preserve-order clamp. This is the injected delay.
    pub scheduled: Duration,
    /// Measured hold time at write; `None` while queued or if the packet was lost.
    pub actual: Option<Duration>,
    /// Held back for reordering.
    pub held: bool,
    /// Position in the direction's output order (0-based, counting every packet
    /// written since the last reset); `None` while queued or if the packet was lost.
    /// A packet is delivered out of order iff a later arrival has a smaller value.
    pub written: Option<u64>,
    /// The first 8 bytes of a UDP packet's payload (an iperf3-format datagram's
    /// sender timestamp: seconds and microseconds, or nanoseconds with
    /// `--trip-times`, both big-endian); `None` for other packets.
    pub udp_head: Option<[u8; 8]>,
    /// CLOCK_REALTIME, in ns since the epoch, just before the line wrote the packet out:
    /// on the same clock as a sender's timestamp on this machine, so
    /// [`Self::transit_to_egress_ns`] is the packet's whole one-way delay from its
    /// sender's timestamp to the line's egress, including what happened before the
    /// line read it (the sender's stack, the line's own wake-up) that `actual` misses.
    pub written_wall_ns: Option<i64>,
}

impl DelayRecord {
    /// Sender timestamp (from `udp_head`) to egress, in ns; `stamp_ns` says the
    /// second field holds nanoseconds rather than microseconds.
    pub fn transit_to_egress_ns(&self, stamp_ns: bool) -> Option<i64> {
        let h = self.udp_head?;
        let sec = i64::from(u32::from_be_bytes([h[0], h[1], h[2], h[3]]));
        let frac = i64::from(u32::from_be_bytes([h[4], h[5], h[6], h[7]]));
        let sent = sec * 1_000_000_000 + if stamp_ns { frac } else { frac * 1000 };
        Some(self.written_wall_ns? - sent)
    }
}

/// Counters and log for one direction.
#[derive(Clone, Debug, Default)]
pub struct DirStats {
    pub packets_in: u64,
    pub bytes_in: u64,
    pub packets_out: u64,
    /// Dropped because the queue held `queue_limit` packets.
    pub overflow_drops: u64,
    pub write_errors: u64,
    /// Packets that matched the variation filter (and got `extra_for(i)`).
    pub variation_matched: u64,
    /// Packets that matched the reorder filter.
    pub reorder_matched: u64,
    /// Packets held back for reordering.
    pub held_for_reorder: u64,
    /// How late after its release time a packet was written, worst and summed.
    pub max_lateness: Duration,
    pub total_lateness: Duration,
    /// First `log_limit` packets, in arrival order.
    pub records: Vec<DelayRecord>,
    /// Packets not logged because the log was full.
    pub records_dropped: u64,
}

impl DirStats {
    pub fn mean_lateness(&self) -> Duration {
        if self.packets_out == 0 {
            Duration::ZERO
        } else {
            self.total_lateness / self.packets_out as u32
        }
    }

    /// Logged packets with IP protocol `proto` that were delivered out of order: written
    /// after a packet of the same protocol that arrived later (held back and overtaken),
    /// i.e. what a receiver counting "arrived after a higher sequence number" sees.
    /// Packets never written are ignored.
    pub fn reordered(&self, proto: u8) -> u64 {
        let mut late = vec![false; self.records.len()];
        // Scan in arrival order from the end: a packet is late iff some later arrival
        // was written before it.
        let mut min_later: Option<u64> = None;
        for (i, r) in self.records.iter().enumerate().rev() {
            if r.proto != proto {
                continue;
            }
            if let Some(w) = r.written {
                late[i] = min_later.is_some_and(|m| m < w);
                min_later = Some(min_later.map_or(w, |m| m.min(w)));
            }
        }
        late.iter().filter(|&&l| l).count() as u64
    }

    /// Scheduled delays of the logged packets with IP protocol `proto`, in arrival order.
    pub fn scheduled_delays(&self, proto: u8) -> Vec<Duration> {
        self.records
            .iter()
            .filter(|r| r.proto == proto)
            .map(|r| r.scheduled)
            .collect()
    }
}

/// Snapshot of the delay line.
#[derive(Clone, Debug, Default)]
pub struct DelayLineStats {
    pub h1_to_h2: DirStats,
    pub h2_to_h1: DirStats,
    /// Packets currently held.
    pub queued: usize,
    /// Link-scope packets of the router itself (e.g. MLD) read and discarded.
    pub ignored: u64,
    /// Whether the worker runs with SCHED_FIFO priority.
    pub realtime: bool,
}

impl DelayLineStats {
    pub fn dir(&self, dir: Dir) -> &DirStats {
        match dir {
            Dir::H2ToH1 => &self.h2_to_h1,
            _ => &self.h1_to_h2,
        }
    }
}

#[derive(Default)]
struct DirRuntime {
    arrivals: u64,
    last_release: Option<Instant>,
}

#[derive(Default)]
struct Shared {
    stats: [DirStats; 2],
    rt: [DirRuntime; 2],
    epoch: u64,
    queued: usize,
    ignored: u64,
    realtime: bool,
}

struct Entry {
    release: Instant,
    seq: u64,
    dir: usize,
    arrival: Instant,
    /// (epoch, index into `records`) if logged.
    record: Option<(u64, usize)>,
    data: Vec<u8>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Reversed so that `BinaryHeap` (a max-heap) pops the earliest release first;
    /// `seq` keeps FIFO order among equal release times.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .release
            .cmp(&self.release)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// A running delay line; stops and joins its thread on drop.
pub(super) struct DelayLine {
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    wake: Arc<OwnedFd>,
    thread: Option<JoinHandle<()>>,
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

impl DelayLine {
    /// Starts the worker on already opened TUN fds (index 0 = h1→h2, 1 = h2→h1).
    pub fn start(
        tuns: [Option<OwnedFd>; 2],
        cfg: [DirConfig; 2],
        queue_limit: usize,
        log_limit: usize,
        rt_priority: Option<i32>,
    ) -> Result<DelayLine> {
        // SAFETY: eventfd has no memory-safety preconditions; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            bail!("eventfd: {}", std::io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh, valid fd that nothing else owns.
        let wake = Arc::new(unsafe { OwnedFd::from_raw_fd(raw) });
        let shared = Arc::new(Mutex::new(Shared::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let worker = Worker {
            tuns,
            cfg,
            queue_limit: queue_limit.max(1),
            log_limit,
            rt_priority,
            shared: shared.clone(),
            stop: stop.clone(),
            wake: wake.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("netbed-delay".into())
            .spawn(move || worker.run())
            .context("spawning delay-line thread")?;
        Ok(DelayLine {
            shared,
            stop,
            wake,
            thread: Some(thread),
        })
    }

    pub fn stats(&self) -> DelayLineStats {
        let s = lock(&self.shared);
        DelayLineStats {
            h1_to_h2: s.stats[0].clone(),
            h2_to_h1: s.stats[1].clone(),
            queued: s.queued,
            ignored: s.ignored,
            realtime: s.realtime,
        }
    }

    /// Forgets counters, logs, cycle positions and reorder counts (packets still
    /// queued are released normally but no longer logged).
    pub fn reset(&self) {
        let mut s = lock(&self.shared);
        s.stats = Default::default();
        s.rt = Default::default();
        s.epoch += 1;
    }

    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

impl Drop for DelayLine {
    fn drop(&mut self) {
        self.stop.store(true, AtomicOrdering::SeqCst);
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our own eventfd.
        unsafe {
            libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8);
        }
        if let Some(t) = self.thread.take() {
            // The worker sleeps at most MAX_IDLE between stop checks, so this is bounded.
            let _ = t.join();
        }
    }
}

struct Worker {
    tuns: [Option<OwnedFd>; 2],
    cfg: [DirConfig; 2],
    queue_limit: usize,
    log_limit: usize,
    rt_priority: Option<i32>,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    wake: Arc<OwnedFd>,
}

/// Router-local link-scope traffic the kernel emits on the TUN device itself (MLD
/// reports, neighbour/router solicitations, IGMP): not forwarded traffic, so the line
/// discards it rather than delaying or counting it.
fn is_link_local_chatter(p: &[u8]) -> bool {
    match p.first().map(|b| b >> 4) {
        Some(4) if p.len() >= 20 => p[16] >= 224 || p[16..20] == [255; 4],
        Some(6) if p.len() >= 40 => {
            let src_ll = p[8] == 0xfe && p[9] & 0xc0 == 0x80;
            let dst_ll = p[24] == 0xfe && p[25] & 0xc0 == 0x80;
            src_ll || dst_ll || p[24] == 0xff
        }
        _ => true,
    }
}

/// The first 8 payload bytes of an unfragmented UDP packet, if it has them.
fn udp_head(p: &[u8]) -> Option<[u8; 8]> {
    let l4 = match p.first().map(|b| b >> 4) {
        Some(4) if p.len() >= 20 && p[9] == 17 => {
            let frag = u16::from_be_bytes([p[6], p[7]]) & 0x3fff;
            if frag != 0 {
                return None;
            }
            p.get(usize::from(p[0] & 0x0f) * 4..)?
        }
        Some(6) if p.len() >= 40 && p[6] == 17 => &p[40..],
        _ => return None,
    };
    l4.get(8..16)?.try_into().ok()
}

/// Now on CLOCK_REALTIME, in ns since the epoch.
fn wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// (protocol, source port, destination port) of an IP packet; ports 0 if none.
fn classify(p: &[u8]) -> (u8, u16, u16) {
    let (proto, l4) = match p.first().map(|b| b >> 4) {
        Some(4) if p.len() >= 20 => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            let frag_off = u16::from_be_bytes([p[6], p[7]]) & 0x1fff;
            let l4 = if frag_off == 0 {
                p.get(ihl..).unwrap_or(&[])
            } else {
                &[][..]
            };
            (p[9], l4)
        }
        Some(6) if p.len() >= 40 => (p[6], &p[40..]),
        _ => return (0, 0, 0),
    };
    if (proto == 6 || proto == 17) && l4.len() >= 4 {
        (
            proto,
            u16::from_be_bytes([l4[0], l4[1]]),
            u16::from_be_bytes([l4[2], l4[3]]),
        )
    } else {
        (proto, 0, 0)
    }
}

impl Worker {
    fn run(self) {
        // Wake-ups as exact as the hrtimer allows instead of the default 50 us slack.
        // SAFETY: PR_SET_TIMERSLACK takes a plain integer and only affects this thread.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
        }
        // Real-time priority keeps release times exact when the CPUs are busy (tests
        // run in parallel); the loop always sleeps until the next release, and the
        // kernel's RT throttling bounds it anyway.
        if let Some(prio) = self.rt_priority {
            let param = libc::sched_param {
                sched_priority: prio,
            };
            // SAFETY: `param` is a valid sched_param that lives across the call; the
            // policy change applies to this thread only.
            let rc = unsafe {
                libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param)
            };
            lock(&self.shared).realtime = rc == 0;
        }
        let mut buf = vec![0u8; BUF_LEN];
        let mut heap: BinaryHeap<Entry> = BinaryHeap::new();
        let mut seq: u64 = 0;
        let tun_fds: [Option<i32>; 2] = [
            self.tuns[0].as_ref().map(|f| f.as_raw_fd()),
            self.tuns[1].as_ref().map(|f| f.as_raw_fd()),
        ];
        // The loop ends when `stop` is set; each pass sleeps at most MAX_IDLE.
        while !self.stop.load(AtomicOrdering::SeqCst) {
            let timeout = heap
                .peek()
                .map_or(MAX_IDLE, |e| {
                    e.release.saturating_duration_since(Instant::now())
                })
                .min(MAX_IDLE);
            let mut pfds = [libc::pollfd {
                fd: self.wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }; 3];
            let mut n = 1;
            let mut slot = [usize::MAX; 2];
            for (d, fd) in tun_fds.iter().enumerate() {
                if let Some(fd) = fd {
                    pfds[n] = libc::pollfd {
                        fd: *fd,
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    slot[d] = n;
                    n += 1;
                }
            }
            let ts = libc::timespec {
                tv_sec: timeout.as_secs() as libc::time_t,
                tv_nsec: timeout.subsec_nanos() as libc::c_long,
            };
            // SAFETY: `pfds` holds `n` initialised pollfd entries and `ts` outlives the call.
            let rc =
                unsafe { libc::ppoll(pfds.as_mut_ptr(), n as libc::nfds_t, &ts, std::ptr::null()) };
            if rc < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                break;
            }
            if pfds[0].revents != 0 {
                break;
            }
            for d in 0..2 {
                if slot[d] != usize::MAX && pfds[slot[d]].revents != 0 {
                    self.read_dir(d, tun_fds[d].unwrap_or(-1), &mut buf, &mut heap, &mut seq);
                }
            }
            self.release_due(&mut heap, &tun_fds);
        }
        lock(&self.shared).queued = 0;
    }

    fn read_dir(
        &self,
        d: usize,
        fd: i32,
        buf: &mut [u8],
        heap: &mut BinaryHeap<Entry>,
        seq: &mut u64,
    ) {
        let mut s = lock(&self.shared);
        for _ in 0..READ_BATCH {
            // SAFETY: reads at most `buf.len()` bytes into a live, exclusively borrowed buffer.
            let got = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if got <= 0 {
                break; // EAGAIN (drained) or error; poll tells us when to come back
            }
            let now = Instant::now();
            let pkt = &buf[..got as usize];
            if is_link_local_chatter(pkt) {
                s.ignored += 1;
                continue;
            }
            let (proto, sport, dport) = classify(pkt);
            let cfg = &self.cfg[d];
            let epoch = s.epoch;
            let Shared { stats, rt, .. } = &mut *s;
            let st = &mut stats[d];
            let rtd = &mut rt[d];
            st.packets_in += 1;
            st.bytes_in += pkt.len() as u64;
            let index = rtd.arrivals;
            rtd.arrivals += 1;
            if heap.len() >= self.queue_limit {
                st.overflow_drops += 1;
                continue;
            }
            let mut delay = cfg.base;
            if let Some((var, vproto)) = &cfg.variation
                && vproto.matches(proto)
            {
                delay += var.extra_for(st.variation_matched);
                st.variation_matched += 1;
            }
            let mut held = false;
            if let Some((nth, extra, rproto, rport)) = cfg.reorder
                && rproto.matches(proto)
                && rport.is_none_or(|p| sport == p || dport == p)
            {
                st.reorder_matched += 1;
                if nth > 0 && st.reorder_matched.is_multiple_of(u64::from(nth)) {
                    held = true;
                    st.held_for_reorder += 1;
                    delay += extra;
                }
            }
            let mut release = now + delay;
            if cfg.preserve_order {
                if let Some(last) = rtd.last_release {
                    if held {
                        release = release.max(last + extra_of(cfg));
                    } else if release < last {
                        release = last;
                    }
                }
                if !held {
                    rtd.last_release = Some(release);
                }
            }
            let record = if st.records.len() < self.log_limit {
                st.records.push(DelayRecord {
                    index,
                    proto,
                    src_port: sport,
                    dst_port: dport,
                    len: pkt.len().min(usize::from(u16::MAX)) as u16,
                    scheduled: release - now,
                    actual: None,
                    held,
                    written: None,
                    udp_head: udp_head(pkt),
                    written_wall_ns: None,
                });
                Some((epoch, st.records.len() - 1))
            } else {
                st.records_dropped += 1;
                None
            };
            *seq += 1;
            heap.push(Entry {
                release,
                seq: *seq,
                dir: d,
                arrival: now,
                record,
                data: pkt.to_vec(),
            });
        }
        s.queued = heap.len();
    }

    fn release_due(&self, heap: &mut BinaryHeap<Entry>, tun_fds: &[Option<i32>; 2]) {
        if heap.peek().is_none_or(|e| e.release > Instant::now()) {
            return;
        }
        let mut s = lock(&self.shared);
        while heap.peek().is_some_and(|e| e.release <= Instant::now()) {
            let Some(e) = heap.pop() else { break };
            let fd = tun_fds[e.dir].unwrap_or(-1);
            // Before the write: the write itself can carry the packet through the
            // receiving stack to its socket's receive stamp before it returns.
            let egress_wall = wall_ns();
            // SAFETY: writes `e.data.len()` bytes from a live Vec to a TUN fd we own.
            let wrote = unsafe { libc::write(fd, e.data.as_ptr().cast(), e.data.len()) };
            let done = Instant::now();
            let epoch = s.epoch;
            let st = &mut s.stats[e.dir];
            if wrote != e.data.len() as isize {
                st.write_errors += 1;
                continue;
            }
            let written = st.packets_out;
            st.packets_out += 1;
            let late = done.saturating_duration_since(e.release);
            st.max_lateness = st.max_lateness.max(late);
            st.total_lateness += late;
            if let Some((ep, i)) = e.record
                && ep == epoch
                && let Some(r) = st.records.get_mut(i)
            {
                r.actual = Some(done - e.arrival);
                r.written = Some(written);
                r.written_wall_ns = Some(egress_wall);
            }
        }
        s.queued = heap.len();
    }
}

fn extra_of(cfg: &DirConfig) -> Duration {
    cfg.reorder.map_or(Duration::ZERO, |(_, extra, _, _)| extra)
}

/// Opens (creating if needed) TUN device `name` in the calling thread's network
/// namespace, non-blocking, without packet-info header.
pub(super) fn open_tun(name: &str) -> Result<OwnedFd> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        bail!("TUN name {name:?} must be 1..{} bytes", libc::IFNAMSIZ - 1);
    }
    // SAFETY: the path is a NUL-terminated literal; the result is checked.
    let raw = unsafe {
        libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        bail!("open /dev/net/tun: {}", std::io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh, valid fd that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    ifr.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes one `ifreq`, which `ifr` is, for the call's duration.
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::TUNSETIFF,
            &mut ifr as *mut libc::ifreq,
        )
    };
    if rc < 0 {
        bail!("TUNSETIFF {name}: {}", std::io::Error::last_os_error());
    }
    Ok(fd)
}
