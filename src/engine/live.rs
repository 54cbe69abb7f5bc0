//! One test's live data streams on this side: each stream's `Worker` and shared state
//! set up from the test (`make_worker`, the capability probe), the sockets kept open
//! until the end, and stopping, draining and joining the threads (`LiveStreams`); plus
//! what the `start` record says about them (data path, UDP offloads, `connected`).
//! `test_run` drives them.

use super::record::{FrameRecord, ProfileRecord, StreamError, StreamShared};
use super::stream::{self, Budget, Worker};
use crate::clock::Clock;
use crate::report::{Connected, build, text};
use crate::sock;
use crate::spec::{EndCondition, Protocol, TestSpec};
use crate::stats::UdpRecv;
use crate::wire;
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Live data streams of one test, with the sockets kept open until the end so that
/// their descriptors (used for TCP_INFO) cannot be reused under us.
#[derive(Default)]
pub struct LiveStreams {
    pub shared: Vec<Arc<StreamShared>>,
    pub handles: Vec<(bool, JoinHandle<()>)>,
    /// The TCP sockets, in the order of `shared` (both are pushed per stream). Shared
    /// with the streams' `StreamShared::tcp` (weakly) for TCP_INFO.
    pub keep_tcp: Vec<Arc<TcpStream>>,
    pub keep_udp: Vec<UdpSocket>,
    pub stop_send: Arc<AtomicBool>,
    pub stop_recv: Arc<AtomicBool>,
}

/// The end-of-test drain's decision (`LiveStreams::drain_receivers`): the receivers
/// keep counting until nothing has arrived for `idle`, all of them finished, or `max`
/// passed since the drain began. Pure: the byte totals and `now` are given.
#[derive(Debug)]
struct Drain {
    began: Instant,
    idle: Duration,
    max: Duration,
    last_total: u64,
    /// When the byte total last moved during the drain.
    arrived: Option<Instant>,
}

impl Drain {
    fn new(total: u64, idle: Duration, max: Duration, now: Instant) -> Drain {
        Drain {
            began: now,
            idle,
            max,
            last_total: total,
            arrived: None,
        }
    }

    /// The receivers counted `total` bytes by `now`: is the drain over?
    fn over(&mut self, total: u64, all_done: bool, now: Instant) -> bool {
        if total != self.last_total {
            (self.last_total, self.arrived) = (total, Some(now));
        }
        let quiet = now.saturating_duration_since(self.arrived.unwrap_or(self.began)) >= self.idle;
        all_done || quiet || now.saturating_duration_since(self.began) >= self.max
    }
}

/// A test that ends early (an error, a vanished peer) still stops and joins its
/// threads: none outlives its test, blocked on a socket nobody reads.
impl Drop for LiveStreams {
    fn drop(&mut self) {
        self.stop(true, true);
    }
}

impl LiveStreams {
    /// Tell the sending threads to stop, without waiting for them: a paced sender
    /// asleep until its next block (up to `STOP_POLL`) must not delay `TEST_END`.
    pub fn signal_senders(&self) {
        self.stop_send.store(true, Ordering::Relaxed);
    }

    /// Stop and join the sending threads, then the receiving ones.
    pub fn stop(&mut self, senders_too: bool, receivers_too: bool) {
        if senders_too {
            self.signal_senders();
        }
        if receivers_too {
            self.stop_recv.store(true, Ordering::Relaxed);
        }
        // Wake threads blocked in a read without a timeout (request/response streams):
        // a socket shut down for reading returns end-of-file at once. Nothing is sent.
        // A sender awaiting its peer's close is woken only when everything stops (an
        // early stop): at the test's end (the senders alone) its bounded read goes on.
        let stopping = |sh: &StreamShared| {
            let awaits = sh.awaits_peer_close.load(Ordering::Relaxed) && !receivers_too;
            (sh.sender && senders_too && !awaits) || (!sh.sender && receivers_too)
        };
        for (s, sh) in self.keep_tcp.iter().zip(&self.shared) {
            if stopping(sh) {
                let _ = s.shutdown(std::net::Shutdown::Read);
            }
        }
        for (s, sh) in self.keep_udp.iter().zip(&self.shared) {
            if stopping(sh) {
                let _ = socket2::SockRef::from(s).shutdown(std::net::Shutdown::Read);
            }
        }
        let mut keep = Vec::new();
        for (sender, h) in self.handles.drain(..) {
            if (sender && senders_too) || (!sender && receivers_too) {
                let _ = h.join();
            } else {
                keep.push((sender, h));
            }
        }
        self.handles = keep;
    }

    /// Once the senders were told to stop, keep the receivers reading until nothing has
    /// arrived for `idle` (at most `max`), so data still in flight when the test ended
    /// is counted instead of being mistaken for loss. Returns when data last arrived
    /// during the drain, in seconds since `t0` (to the 2 ms poll), or `None` if none
    /// did: the wait itself is not test time (`meter::receiver_end_s`).
    pub fn drain_receivers(
        &mut self,
        t0: Instant,
        idle: Duration,
        max: Duration,
        clock: &dyn Clock,
    ) -> Option<f64> {
        let receivers: Vec<Arc<StreamShared>> =
            self.shared.iter().filter(|s| !s.sender).cloned().collect();
        if receivers.is_empty() {
            return None;
        }
        let total = || -> u64 {
            receivers
                .iter()
                .map(|s| s.bytes.load(Ordering::Relaxed))
                .sum()
        };
        let mut drain = Drain::new(total(), idle, max, clock.now());
        loop {
            std::thread::sleep(Duration::from_millis(2));
            let all_done = receivers.iter().all(|s| s.finished.load(Ordering::Acquire));
            if drain.over(total(), all_done, clock.now()) {
                break;
            }
        }
        self.stop(false, true);
        drain.arrived.map(|a| a.duration_since(t0).as_secs_f64())
    }

    /// Read each UDP receiver's kernel drop counter, each UDP stream's messages, each
    /// paced UDP sender's lag and each MSG_ZEROCOPY sender's completions into the final
    /// figures.
    pub fn record_kernel_counts(&self, locals: &mut [build::LocalFinal]) {
        for l in locals.iter_mut().filter(|l| !l.sender) {
            if let Some(s) = self
                .keep_udp
                .iter()
                .find(|s| sock::socket_number(s) == l.socket)
            {
                l.host_drops = sock::socket_drops(s.as_fd());
            }
        }
        for l in locals.iter_mut() {
            let Some(s) = self.shared.iter().find(|s| s.socket == l.socket) else {
                continue;
            };
            let sends = s.zc_sends.load(Ordering::Relaxed);
            if l.sender && sends > 0 {
                l.zerocopy = Some((sends, s.zc_copied.load(Ordering::Relaxed)));
            }
            let lag_us = s.pacing_lag_us.load(Ordering::Relaxed);
            if l.sender && lag_us > 0 {
                l.pacing_lag_ms = Some(lag_us as f64 / 1e3);
                l.send_blocked = Some(s.send_blocked.load(Ordering::Relaxed));
            }
            let messages = s.messages.load(Ordering::Relaxed);
            if messages > 0 {
                l.udp_io = Some(crate::stats::UdpIo {
                    datagrams: s.packets.load(Ordering::Relaxed),
                    messages,
                });
            }
        }
    }

    /// Each ended stream thread's CPU use, in stream order.
    pub fn thread_cpu(&self) -> Vec<crate::host::facts::ThreadCpu> {
        self.shared
            .iter()
            .filter_map(|s| s.thread_cpu.lock().ok().and_then(|t| t.clone()))
            .collect()
    }

    /// First error reported by any stream thread.
    pub fn first_error(&self) -> Option<StreamError> {
        self.shared.iter().find_map(|s| s.error())
    }
}

/// Prepare per-stream state and the data threads' common settings.
#[allow(clippy::too_many_arguments)]
pub(super) fn make_worker(
    spec: &TestSpec,
    id: i64,
    socket: i64,
    tcp: Weak<TcpStream>,
    sender: bool,
    forward: bool,
    live: &LiveStreams,
    payload: &Arc<Vec<u8>>,
    budget: &Option<Arc<Budget>>,
    zerocopy: &Option<Arc<std::fs::File>>,
) -> Worker {
    // Stream ids are 1, 3, 4, ... in creation order (iperf3 skips 2).
    let index = if id == 1 { 0 } else { (id - 2) as u32 };
    // With --working-load only the last stream is a request/response probe.
    let bounce = match spec.working_load {
        Some(_) if !spec.is_probe(index) => None,
        _ => spec.bounceback,
    };
    // A profile shapes the client's streams; with `--bidir` between netmeter peers that
    // agreed (`Profile::both_ways`) the server's streams too, and the client's
    // receivers then count frames as the server's do.
    let both_ways = spec.profile.is_some_and(|p| p.both_ways());
    let profiled = spec.profile.is_some() && sender && (forward || both_ways);
    let shared = Arc::new(StreamShared {
        id,
        socket,
        tcp,
        sender,
        forward,
        bytes: Default::default(),
        packets: Default::default(),
        messages: Default::default(),
        udp: (spec.protocol == Protocol::Udp && !sender && spec.bounceback.is_none())
            .then(|| Box::new(Mutex::new(UdpRecv::default()))),
        rtt: (bounce.is_some() && sender).then(|| Box::new(Mutex::new(Default::default()))),
        owd: (spec.trip_times && !sender && spec.bounceback.is_none() && !spec.skip_rx_copy)
            .then(|| Box::new(Mutex::new(Default::default()))),
        conn: (spec.connect_only && sender).then(|| Box::new(Mutex::new(Default::default()))),
        profile: profiled.then(|| {
            Box::new(Mutex::new(ProfileRecord {
                frames: spec.profile.is_some_and(|p| p.isochronous().is_some()),
                ..Default::default()
            }))
        }),
        frames: (spec.profile.is_some_and(|p| p.framed())
            && spec.protocol == Protocol::Udp
            && !sender
            && (forward || both_ways))
            .then(|| Box::new(Mutex::new(FrameRecord::new(spec.trip_times)))),
        zc_sends: AtomicU64::new(0),
        zc_copied: AtomicU64::new(0),
        pacing_lag_us: AtomicU64::new(0),
        send_blocked: AtomicU64::new(0),
        calls: Default::default(),
        awaits_peer_close: AtomicBool::new(false),
        finished: AtomicBool::new(false),
        thread_cpu: Mutex::new(None),
        error: Mutex::new(None),
    });
    Worker {
        shared,
        // The run's own clock replaces it at the start (`TestRun::start`).
        clock: crate::clock::system(),
        stop: if sender {
            live.stop_send.clone()
        } else {
            live.stop_recv.clone()
        },
        block_len: spec.block_len,
        rate_bps: spec.rate_bps,
        burst: spec.burst,
        budget: if sender { budget.clone() } else { None },
        payload: payload.clone(),
        udp_seq64: spec.udp_seq64,
        zerocopy: if sender { zerocopy.clone() } else { None },
        skip_rx_copy: spec.skip_rx_copy && !sender,
        caps: sock::Capabilities::default(),
        bounceback: bounce,
        ts_ns: spec.trip_times,
        owd_correction_ns: 0,
        load_start: None,
        file: None,
        profile: spec.profile.filter(|_| profiled),
        ecn_feedback: spec.ecn_responsive && spec.protocol == Protocol::Udp,
        schedule_origin: None,
        pace_origin: None,
        schedule_end: None,
    }
}

/// With `--working-load`: when the bulk streams start (after the idle phase).
pub(super) fn load_start(spec: &TestSpec, t0: Instant) -> Option<Instant> {
    spec.working_load
        .map(|w| t0 + Duration::from_millis(w.idle_ms as u64))
}

/// Probe the stream's socket for what its data loop can use, as far as the test allows
/// it, and record what was granted in `w.caps` (for the loop, the JSON record and `-V`):
/// - UDP bulk streams: GSO when sending (unless `--no-gso`; carried to the server in the
///   extension request), GRO and kernel receive timestamps when receiving (GRO unless
///   `--no-gro`). Request/response and profiled datagrams stay single datagrams.
/// - `-Z` TCP senders: `MSG_ZEROCOPY` where the socket accepts SO_ZEROCOPY (it measured
///   faster than `sendfile` here, docs/benchmarks.md), else `sendfile`.
///   `NETMETER_ZEROCOPY=sendfile` forces `sendfile`.
/// - Request/response streams with `--busy-poll`: SO_BUSY_POLL.
pub(super) fn probe_capabilities(w: &mut Worker, spec: &TestSpec, fd: BorrowedFd<'_>) {
    let sender = w.shared.sender;
    let mut want = sock::Wanted {
        busy_poll_us: w.bounceback.map(|b| b.busy_poll_us).filter(|&us| us > 0),
        ..Default::default()
    };
    match spec.protocol {
        Protocol::Udp if w.bounceback.is_none() && w.profile.is_none() => {
            let len = w.block_len;
            if sender {
                want.gso_segment = (!spec.no_gso && stream::gso_segments(len) > 1)
                    .then(|| u16::try_from(len).ok())
                    .flatten();
            } else {
                want.gro = !spec.no_gro;
            }
        }
        Protocol::Udp => {}
        Protocol::Tcp => {
            let forced_sendfile =
                std::env::var_os("NETMETER_ZEROCOPY").is_some_and(|v| v == "sendfile");
            want.msg_zerocopy = w.zerocopy.is_some() && sender && !forced_sendfile;
        }
    }
    // The bulk UDP receive loop (`stream::udp_recv`) is the one that reads the stamps.
    want.rx_timestamps = spec.protocol == Protocol::Udp
        && !sender
        && w.bounceback.is_none()
        && w.shared.udp.is_some();
    // The same loop counts ECN codepoints (`stats::ecn`): always on, as the kernel
    // hands the TOS byte over in the control message it already fills. The benchmark
    // turns it off with NETMETER_ECN_COUNTING=off to measure what counting costs
    // (bench case `udpecn`, docs/ecn.md).
    let counting_off = std::env::var_os("NETMETER_ECN_COUNTING").is_some_and(|v| v == "off");
    want.recv_tos = want.rx_timestamps && !counting_off;
    w.caps = sock::Capabilities::probe(fd, &want);
}

/// What this side's UDP streams do about segmentation offload, for the `-V` text.
pub(super) fn udp_offload_note(
    spec: &TestSpec,
    workers: &[&Worker],
) -> Option<text::UdpOffloadNote> {
    if spec.protocol != Protocol::Udp {
        return None;
    }
    let why_not = |used: bool, refused: bool| match () {
        _ if used => text::Offload::On,
        _ if spec.bounceback.is_some() || spec.profile.is_some() => text::Offload::OneByOne,
        _ if refused => text::Offload::Refused,
        _ => text::Offload::Unavailable,
    };
    let senders: Vec<_> = workers.iter().filter(|w| w.shared.sender).collect();
    let receivers: Vec<_> = workers.iter().filter(|w| !w.shared.sender).collect();
    let len = spec.block_len.max(wire::UdpHeader::len(spec.udp_seq64));
    Some(text::UdpOffloadNote {
        datagram_len: len,
        batch: stream::UDP_BATCH,
        gso: (!senders.is_empty()).then(|| {
            let on = senders.iter().any(|w| w.caps.gso);
            (
                why_not(on, spec.no_gso),
                if on { stream::gso_segments(len) } else { 1 },
            )
        }),
        gro: (!receivers.is_empty())
            .then(|| why_not(receivers.iter().any(|w| w.caps.gro), spec.no_gro)),
    })
}

/// The budget shared by a direction's senders in `-n` / `-k` tests.
pub(super) fn budget_for(spec: &TestSpec) -> Option<Arc<Budget>> {
    match spec.end {
        EndCondition::Time(_) => None,
        EndCondition::Bytes(n) => Some(Arc::new(Budget {
            remaining: AtomicI64::new(n.min(i64::MAX as u64) as i64),
            blocks: false,
        })),
        EndCondition::Blocks(k) => Some(Arc::new(Budget {
            remaining: AtomicI64::new(k.min(i64::MAX as u64) as i64),
            blocks: true,
        })),
    }
}

/// Whether this side's streams use UDP segmentation offload and UDP_GRO (0 or 1
/// each, `start.test_start.gso`/`gro` as iperf3 3.22 writes them).
pub(super) fn udp_offloads(workers: &[&Worker]) -> (u8, u8) {
    (
        workers.iter().any(|w| w.caps.gso) as u8,
        workers.iter().any(|w| w.caps.gro) as u8,
    )
}

/// What the data path is, for the JSON record.
pub(super) fn data_path(spec: &TestSpec, workers: &[&Worker]) -> String {
    match spec.protocol {
        Protocol::Tcp if spec.connect_only => "tcp connect/request/response/close".into(),
        Protocol::Tcp if spec.zerocopy && workers.iter().any(|w| w.caps.msg_zerocopy) => {
            "tcp send(MSG_ZEROCOPY)".into()
        }
        // -Z is a sending method: a side that only receives reports its reads.
        Protocol::Tcp if workers.iter().any(|w| w.zerocopy.is_some()) => "tcp sendfile".into(),
        Protocol::Tcp if spec.skip_rx_copy => "tcp write/recv(MSG_TRUNC)".into(),
        Protocol::Tcp => "tcp write/read".into(),
        Protocol::Udp => {
            let gso = workers.iter().any(|w| w.caps.gso);
            let gro = workers.iter().any(|w| w.caps.gro);
            format!(
                "udp sendmmsg{}/recvmmsg{}",
                if gso { "+GSO" } else { "" },
                if gro { "+GRO" } else { "" }
            )
        }
    }
}

fn host_text(ip: IpAddr) -> String {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(|v4| v4.to_string())
            .unwrap_or_else(|| v6.to_string()),
        v4 => v4.to_string(),
    }
}

/// A `start.connected` entry for a socket.
pub(super) fn connected_entry(fd: i64, local: SocketAddr, remote: SocketAddr) -> Connected {
    Connected {
        socket: fd,
        local_host: host_text(local.ip()),
        local_port: local.port(),
        remote_host: host_text(remote.ip()),
        remote_port: remote.port(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::bounce;
    use crate::engine::stream::DataSock;
    use std::io::Read;

    #[test]
    fn the_drain_ends_when_quiet_for_idle_or_at_max_and_says_when_data_last_came() {
        let clock = crate::clock::ManualClock::at_unix(1_700_000_000);
        let ms = Duration::from_millis;
        let (idle, max) = (ms(50), ms(1000));
        // Nothing arrives: over once idle has passed since the drain began.
        let mut d = Drain::new(100, idle, max, clock.now());
        clock.advance(ms(48));
        assert!(!d.over(100, false, clock.now()));
        clock.advance(ms(2));
        assert!(d.over(100, false, clock.now()));
        assert_eq!(d.arrived, None);
        // Data keeps trickling in every 40 ms: only max ends it, and the last arrival
        // is the one recorded.
        let began = clock.now();
        let mut d = Drain::new(0, idle, max, began);
        let mut total = 0;
        let mut turns = 0;
        loop {
            clock.advance(ms(40));
            total += 1;
            turns += 1;
            if d.over(total, false, clock.now()) {
                break;
            }
        }
        assert_eq!(turns, 25, "ended at max, 1000 ms after it began");
        assert_eq!(d.arrived, Some(began + ms(1000)));
        // Every receiver finished: over at once.
        let mut d = Drain::new(0, idle, max, clock.now());
        assert!(d.over(0, true, clock.now()));
    }

    /// A bounceback spec of `len`-byte messages over `protocol`.
    fn rr_spec(protocol: Protocol, len: u32) -> TestSpec {
        TestSpec {
            protocol,
            bounceback: Some(crate::wire::Bounceback {
                request_len: len,
                reply_len: len,
                hold_us: 0,
                burst: 1,
                busy_poll_us: 0,
            }),
            ..Default::default()
        }
    }

    /// Start one stream thread on `sock`, wait until `reached_read` has seen the
    /// evidence that the thread is at its blocking read on a silent peer, then require
    /// `stop` for its role to end it within 2 s.
    fn assert_stop_ends_blocked_thread(
        spec: &TestSpec,
        sender: bool,
        sock: Sock,
        reached_read: impl FnOnce(),
    ) {
        let mut live = LiveStreams::default();
        let payload = Arc::new(vec![0u8; 16]);
        let (fd, kind) = match &sock {
            Sock::Tcp(t) => (sock::socket_number(t), "TCP"),
            Sock::Udp(u) => (sock::socket_number(u), "UDP"),
        };
        let sock = match sock {
            Sock::Tcp(t) => Ok(Arc::new(t)),
            Sock::Udp(u) => Err(u),
        };
        let tcp = sock.as_ref().map_or_else(|_| Weak::new(), Arc::downgrade);
        let w = make_worker(
            spec, 1, fd, tcp, sender, true, &live, &payload, &None, &None,
        );
        live.shared.push(w.shared.clone());
        let b = w.bounceback.expect("a bounceback spec");
        let handle = match sock {
            Ok(t) => {
                let dup = t.try_clone().unwrap();
                live.keep_tcp.push(t);
                bounce::spawn(w, b, DataSock::Tcp(dup))
            }
            Err(u) => {
                let dup = u.try_clone().unwrap();
                live.keep_udp.push(u);
                bounce::spawn(w, b, DataSock::Udp(dup))
            }
        };
        live.handles.push((sender, handle.unwrap()));
        reached_read();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            live.stop(sender, !sender);
            let _ = tx.send(());
        });
        assert!(
            rx.recv_timeout(Duration::from_secs(2)).is_ok(),
            "stop() did not end a {kind} thread blocked on a silent peer"
        );
    }

    enum Sock {
        Tcp(TcpStream),
        Udp(UdpSocket),
    }

    /// A sender awaiting its peer's close (iperf 2's client after its shutdown) keeps
    /// its reading side at the test's end (the senders stop alone): a shutdown there
    /// would end its read at once and close the socket with the server's last bytes
    /// unread, which Linux answers with a reset that throws away the unsent data. An
    /// early stop (everything at once) still wakes it.
    #[test]
    fn the_tests_end_leaves_a_sender_awaiting_its_peers_close_reading() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_peer, _) = listener.accept().unwrap();
        let read = ours.try_clone().unwrap();
        read.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let still_open = |r: &TcpStream| match (&*r).read(&mut [0u8; 8]) {
            Ok(n) => panic!("the read ended ({n} bytes): its side was shut down"),
            Err(e) => assert!(stream::is_transient(&e), "{e}"),
        };
        let mut live = LiveStreams::default();
        let shared = StreamShared {
            sender: true,
            ..Default::default()
        };
        shared.awaits_peer_close.store(true, Ordering::Relaxed);
        live.shared.push(Arc::new(shared));
        live.keep_tcp.push(Arc::new(ours));
        live.stop(true, false);
        still_open(&read);
        live.stop(true, true);
        assert_eq!(
            (&read).read(&mut [0u8; 8]).unwrap(),
            0,
            "an early stop wakes it"
        );
    }

    /// A request/response read has no timeout; stopping the test must still end the
    /// thread at once when the peer never answers (TCP client, UDP server).
    #[test]
    fn stop_wakes_bounceback_reads_that_have_no_timeout() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tcp = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (silent_server, _) = listener.accept().unwrap();
        // The client writes its request, then blocks reading the reply that never comes:
        // the request's arrival is the evidence (10 s only bounds a failure).
        let request_written = || {
            silent_server
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            assert_eq!(silent_server.peek(&mut [0u8; 1]).unwrap(), 1, "no request");
        };
        let spec = rr_spec(Protocol::Tcp, 1);
        assert_stop_ends_blocked_thread(&spec, true, Sock::Tcp(tcp), request_written);

        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.connect(client.local_addr().unwrap()).unwrap();
        client.connect(udp.local_addr().unwrap()).unwrap();
        // The server answers one request and goes back to its read; the client then
        // stays silent. The reply is the evidence.
        let answered = || {
            client
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            client.send(&[1u8; 8]).unwrap();
            assert_eq!(client.recv(&mut [0u8; 64]).unwrap(), 8, "no reply");
        };
        let spec = rr_spec(Protocol::Udp, 8);
        assert_stop_ends_blocked_thread(&spec, false, Sock::Udp(udp), answered);
    }

    #[test]
    fn ipv4_mapped_addresses_print_as_ipv4() {
        let ip: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert_eq!(host_text(ip), "127.0.0.1");
    }
}
