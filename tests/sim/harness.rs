//! One UDP test's whole data path on virtual time: the sender machine, a simulated link,
//! the receiver machine, and each side's meter (the engine's own, over the pure
//! `report::build::accountant`) building interval rows and the end summary with
//! `report::build::end`. What the engine's threads and control conversation do around
//! them is played here in a fixed order: at one instant, arrivals first, then the
//! interval ticks, then the sender.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use netmeter::clocksync::ClockEstimate;
use netmeter::engine::machine::Budget;
use netmeter::engine::machine::udp::{
    RecvSinks, SendAction, UdpReceiver, UdpSender, UdpSenderConfig,
};
use netmeter::engine::meter::{Meter, receiver_end_s};
use netmeter::engine::record::StreamShared;
use netmeter::engine::test_common::end_inputs;
use netmeter::report::build::local_results;
use netmeter::report::{Report, Start};
use netmeter::sim::{Ecn, HostConfig, LinkConfig, PacketRecord, Sim};
use netmeter::spec::{EndCondition, Protocol, TestSpec};
use netmeter::stats::UdpRecv;
use netmeter::wire::UdpHeader;

/// What to run.
#[derive(Debug, Clone)]
pub struct UdpTest {
    pub seed: u64,
    /// The data link, client → server.
    pub link: LinkConfig,
    pub client_clock: HostConfig,
    pub server_clock: HostConfig,
    /// `-l`.
    pub len: usize,
    /// `-b` (0: unpaced, limited by `nic_bps`).
    pub rate_bps: u64,
    pub burst: Option<u32>,
    /// `-t`, `-n` or `-k`.
    pub end: EndCondition,
    /// `-O`: the first part of the test, not counted (a `-t` test runs this much longer).
    pub omit: Duration,
    /// `-i` (None: `-i 0`).
    pub interval: Option<Duration>,
    /// How fast the sender's host puts datagrams on the wire.
    pub nic_bps: u64,
    /// `--trip-times`: one-way delays recorded by the receiver.
    pub trip_times: bool,
    /// Removed from each one-way delay (the clock offset estimate's correction).
    pub owd_correction_ns: i64,
    /// How long the receiver keeps counting after the sender stopped (TEST_END on the
    /// control connection, then the drain).
    pub drain: Duration,
    /// Datagrams the sender may be granted at once (a `sendmmsg` batch).
    pub max_batch: usize,
    /// The clock estimate the control connection made (`start.netmeter.clock`), which
    /// the trip-times summary and the rate search's round trip come from.
    pub clock: Option<ClockEstimate>,
}

impl Default for UdpTest {
    fn default() -> UdpTest {
        UdpTest {
            seed: 1,
            link: LinkConfig::default(),
            client_clock: HostConfig::default(),
            server_clock: HostConfig::default(),
            len: 1460,
            rate_bps: 1_000_000,
            burst: None,
            end: EndCondition::Time(10.0),
            omit: Duration::ZERO,
            interval: Some(Duration::from_secs(1)),
            nic_bps: 1_000_000_000,
            trip_times: false,
            owd_correction_ns: 0,
            drain: Duration::from_millis(500),
            max_batch: 32,
            clock: None,
        }
    }
}

/// A datagram the receiver took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arrived {
    /// Its number in the simulator's record.
    pub id: u64,
    pub seq: u64,
    /// Virtual time of arrival.
    pub at: Duration,
    /// The receiver's wall clock at arrival and the sender's stamp, ns.
    pub rx_ns: i64,
    pub tx_ns: i64,
}

/// What came of it.
pub struct UdpOutcome {
    pub client: Report,
    pub server: Report,
    /// The simulator's record, by packet number.
    pub record: Vec<PacketRecord>,
    /// Each packet's sequence number, by packet number.
    pub seqs: Vec<u64>,
    /// What the receiver counted, in order.
    pub arrived: Vec<Arrived>,
    /// When the sender stopped and the receiver stopped counting, virtual time.
    pub send_end: Duration,
    pub recv_end: Duration,
}

impl UdpOutcome {
    /// The client's and server's reports as JSON, for byte comparisons.
    pub fn json(&self) -> String {
        let c = serde_json::to_string_pretty(&self.client).expect("report serialises");
        let s = serde_json::to_string_pretty(&self.server).expect("report serialises");
        format!("{c}\n{s}\n")
    }
}

fn spec_of(t: &UdpTest) -> TestSpec {
    TestSpec {
        protocol: Protocol::Udp,
        end: t.end,
        omit_s: t.omit.as_secs_f64(),
        block_len: t.len,
        rate_bps: t.rate_bps,
        burst: t.burst,
        trip_times: t.trip_times,
        ..TestSpec::default()
    }
}

fn shared(sender: bool, t: &UdpTest) -> Arc<StreamShared> {
    Arc::new(StreamShared {
        id: 1,
        socket: 5,
        sender,
        forward: true,
        udp: (!sender).then(|| Box::new(Mutex::new(UdpRecv::default()))),
        owd: (!sender && t.trip_times).then(|| Box::new(Mutex::new(Default::default()))),
        ..StreamShared::default()
    })
}

fn sender_of(t: &UdpTest) -> UdpSender {
    let (budget, end) = match t.end {
        EndCondition::Time(s) => (None, Some(Duration::from_secs_f64(s) + t.omit)),
        EndCondition::Bytes(n) => (Some(Arc::new(Budget::new(n, false))), None),
        EndCondition::Blocks(k) => (Some(Arc::new(Budget::new(k, true))), None),
    };
    let cfg = UdpSenderConfig {
        len: t.len,
        seq64: false,
        ts_ns: t.trip_times,
        rate_bps: t.rate_bps,
        burst: t.burst,
        pace_end: end,
        stop_at: end,
    };
    UdpSender::new(cfg, budget)
}

/// Both sides' state during the run.
struct Sides {
    sender: UdpSender,
    receiver: UdpReceiver,
    tx: Arc<StreamShared>,
    rx: Arc<StreamShared>,
    client: Meter,
    server: Meter,
    client_rows: Vec<netmeter::report::Interval>,
    server_rows: Vec<netmeter::report::Interval>,
}

/// Run `t` to its end.
pub fn run(t: &UdpTest) -> UdpOutcome {
    let mut sim = Sim::new(t.seed);
    let a = sim.add_host(t.client_clock);
    let b = sim.add_host(t.server_clock);
    let link = sim.add_link(a, b, t.link.clone());
    let (tx, rx) = (shared(true, t), shared(false, t));
    let mut s = Sides {
        sender: sender_of(t),
        receiver: UdpReceiver::new(false, t.trip_times, t.owd_correction_ns),
        client: Meter::new(Protocol::Udp, false, vec![tx.clone()], t.omit.as_secs_f64()),
        server: Meter::new(Protocol::Udp, false, vec![rx.clone()], t.omit.as_secs_f64()),
        tx,
        rx,
        client_rows: Vec::new(),
        server_rows: Vec::new(),
    };
    let mut seqs = Vec::new();
    let mut arrived = Vec::new();
    let mut buf = vec![0u8; t.len * t.max_batch];
    let mut next_send = Some(Duration::ZERO);
    let mut next_tick = t.interval;
    // Without interval rows a silent tick ends the omit period, as in `test_run`.
    let mut omit_end = (t.interval.is_none() && !t.omit.is_zero()).then_some(t.omit);
    let mut send_end = None;
    // Bounded: a test that never ends is a harness bug, not a hang.
    for _ in 0..50_000_000u64 {
        let recv_stop = send_end.map(|e: Duration| e + t.drain);
        let now = [next_send, sim.next_event(), next_tick, omit_end, recv_stop]
            .into_iter()
            .flatten()
            .min()
            .expect("the run always has a next step");
        if recv_stop.is_some_and(|r| now >= r) {
            break;
        }
        sim.advance_to(now);
        while let Some(d) = sim.pop_delivery() {
            let rx_ns = sim.wall_ns(b, d.at);
            let h = UdpHeader::read(&d.payload, false).expect("the harness sends headers");
            arrived.push(Arrived {
                id: d.id,
                seq: h.seq,
                at: d.at,
                rx_ns,
                tx_ns: h.send_ns(t.trip_times, rx_ns),
            });
            receive(&mut s, &d.payload, rx_ns);
        }
        if omit_end == Some(now) {
            let now_s = now.as_secs_f64();
            s.client.tick(now_s);
            s.server.tick(now_s);
            omit_end = None;
        }
        if next_tick == Some(now) {
            let now_s = now.as_secs_f64();
            if send_end.is_none() {
                s.client_rows.push(s.client.tick(now_s));
            }
            s.server_rows.push(s.server.tick(now_s));
            next_tick = t.interval.map(|i| now + i);
        }
        if next_send == Some(now) {
            next_send = None;
            match s.sender.poll(now, t.max_batch) {
                SendAction::Send(n) => {
                    let wall = sim.wall_ns(a, now);
                    s.sender.write_headers(&mut buf, 0, n, wall);
                    let first = s.sender.datagrams();
                    for (j, d) in buf.chunks(t.len).take(n).enumerate() {
                        sim.send(link, d.to_vec(), Ecn::NotEct);
                        seqs.push(first + 1 + j as u64);
                    }
                    s.sender.on_sent(n, n);
                    s.tx.bytes.store(s.sender.bytes(), Ordering::Relaxed);
                    s.tx.packets.store(s.sender.datagrams(), Ordering::Relaxed);
                    let wire_ns = (n * t.len) as u128 * 8 * 1_000_000_000 / t.nic_bps as u128;
                    next_send = Some(now + Duration::from_nanos(wire_ns.max(1) as u64));
                }
                SendAction::Wait(d) => next_send = Some(now + d.max(Duration::from_nanos(1))),
                SendAction::Stop => {
                    send_end = Some(now);
                    // The client's last interval ends with its sender.
                    if t.interval.is_some()
                        && s.client.worth_reporting(now.as_secs_f64(), interval_s(t))
                    {
                        s.client_rows.push(s.client.tick(now.as_secs_f64()));
                    }
                }
            }
        }
    }
    let send_end = send_end.expect("the sender stopped");
    finish(t, s, sim, seqs, arrived, send_end)
}

fn interval_s(t: &UdpTest) -> f64 {
    t.interval.map_or(0.0, |i| i.as_secs_f64())
}

fn receive(s: &mut Sides, payload: &[u8], rx_ns: i64) {
    let mut acc = s.rx.udp.as_ref().expect("a receiver").lock().expect("lock");
    let mut owd = s.rx.owd.as_ref().map(|o| o.lock().expect("lock"));
    let mut sinks = RecvSinks {
        acc: &mut acc,
        owd: owd.as_deref_mut(),
        frames: None,
    };
    s.receiver.on_message(payload, 0, rx_ns, &mut sinks);
    drop(owd);
    drop(acc);
    s.rx.bytes.store(s.receiver.bytes(), Ordering::Relaxed);
    s.rx.packets
        .store(s.receiver.datagrams(), Ordering::Relaxed);
}

fn finish(
    t: &UdpTest,
    mut s: Sides,
    sim: Sim,
    seqs: Vec<u64>,
    arrived: Vec<Arrived>,
    send_end: Duration,
) -> UdpOutcome {
    let spec = spec_of(t);
    let send_s = send_end.as_secs_f64();
    let last = arrived.last().map(|a| a.at.as_secs_f64());
    let recv_s = receiver_end_s(send_s, last);
    if t.interval.is_some() && s.server.worth_reporting(recv_s, interval_s(t)) {
        s.server_rows.push(s.server.tick(recv_s));
    }
    let client_locals = s.client.finals(send_s, send_s);
    let server_locals = s.server.finals(send_s, recv_s);
    let mut start = Start::default();
    start.netmeter.clock = t.clock;
    let server_results = local_results(&server_locals, (0.0, 0.0, 0.0), false, None);
    let client_results = local_results(&client_locals, (0.0, 0.0, 0.0), false, None);
    let client_end = netmeter::report::build::end(&end_inputs(
        &start,
        &spec,
        &client_locals,
        &server_results,
        (0.0, 0.0, 0.0),
        None,
        true,
        false,
    ));
    let server_end = netmeter::report::build::end(&end_inputs(
        &start,
        &spec,
        &server_locals,
        &client_results,
        (0.0, 0.0, 0.0),
        None,
        false,
        false,
    ));
    let report = |intervals, end| Report {
        start: start.clone(),
        intervals,
        end,
        error: None,
        title: None,
        extra_data: None,
        server_output_json: None,
        server_output_text: None,
        tradeoff: None,
    };
    UdpOutcome {
        client: report(s.client_rows, client_end),
        server: report(s.server_rows, server_end),
        record: sim.record().to_vec(),
        seqs,
        arrived,
        send_end,
        recv_end: Duration::from_secs_f64(recv_s),
    }
}
