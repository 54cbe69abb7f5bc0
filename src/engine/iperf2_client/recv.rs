//! The receiving half of an iperf 2 UDP test as pure logic (`-R`, and `--bidir`'s
//! second half): what an iperf 2 server sends is iperf 2's datagram (`UDP_datagram`:
//! 64-bit sequence number split low/high around the send time), not iperf3's, so this
//! reads it, feeds the stream's receive accounting (loss, out-of-order, jitter, and the
//! one-way delay with `--trip-times`), and recognises the server's end: a negative
//! sequence number, which iperf 2's sender sends once (`Client::FinishTrafficActions`).
//!
//! The FIN counts as the last datagram of the test, as iperf 2's receiver counts it
//! (its bytes, its sequence number closing any gap before it): the iperf 2 server's
//! "Sent N datagrams" includes it. Only the first FIN counts; copies do not.
//!
//! [`RecvWatch`] decides when the client stops listening: at the FIN, or when the
//! server has gone quiet ([`RecvWatch::idle_bound`]), so a silent server never hangs
//! the client. Time comes in as arguments; the loop (`loops::udp_recv`) does the I/O.

use crate::engine::machine::udp::RecvSinks;
use crate::wire::iperf2::{DatagramId, ServerReport, Transit};
use std::time::Duration;

/// What one datagram was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Data, accounted.
    Data,
    /// The server's end (the first FIN), accounted as the last datagram.
    Fin(DatagramId),
    /// A FIN repeated, or a datagram too short to carry a sequence number: ignored.
    Ignored,
}

/// Transit times (receiver wall clock minus the sender's send time): Welford's running
/// mean and sum of squares, as iperf 2's report datagram carries them.
#[derive(Debug, Default, Clone, Copy)]
struct TransitRun {
    count: u32,
    min_s: f64,
    max_s: f64,
    mean_s: f64,
    m2_s2: f64,
}

impl TransitRun {
    fn add(&mut self, t: f64) {
        self.count = self.count.saturating_add(1);
        if self.count == 1 {
            (self.min_s, self.max_s) = (t, t);
        }
        self.min_s = self.min_s.min(t);
        self.max_s = self.max_s.max(t);
        let d = t - self.mean_s;
        self.mean_s += d / f64::from(self.count);
        self.m2_s2 += d * (t - self.mean_s);
    }
}

/// One stream's receiving half.
#[derive(Debug, Default, Clone)]
pub struct UdpRecvHalf {
    bytes: u64,
    datagrams: u64,
    fin: Option<DatagramId>,
    transit: TransitRun,
    first_rx_ns: Option<i64>,
    last_rx_ns: i64,
}

impl UdpRecvHalf {
    /// Datagram `d`, arrived at `rx_ns` (this host's wall clock, ns): accounted into
    /// `sinks` (the one-way delay: sender clock to receiver clock, `correction_ns`
    /// applied as the delay record applies it).
    pub fn on_datagram(
        &mut self,
        d: &[u8],
        rx_ns: i64,
        correction_ns: i64,
        sinks: &mut RecvSinks,
    ) -> Arrival {
        if self.fin.is_some() {
            return Arrival::Ignored;
        }
        // iperf 2's senders write `id2` (the high word) always: 64-bit numbers.
        let Some(id) = DatagramId::parse(d, true) else {
            return Arrival::Ignored;
        };
        // Sequence 0: a sender's start datagram (netmeter's server writes one before the
        // data of a `-R --trip-times` test, as iperf 2's reverse readers expect), no data:
        // iperf 2 numbers data from 1, and its own readers count none of it.
        if id.seq == 0 {
            return Arrival::Ignored;
        }
        let sent_ns = i64::from(id.sec) * 1_000_000_000 + i64::from(id.usec) * 1000;
        let raw_ns = rx_ns.saturating_sub(sent_ns);
        let seq = id.seq.unsigned_abs();
        sinks.acc.on_datagram(seq, raw_ns as f64 / 1e9);
        if let Some(o) = sinks.owd.as_deref_mut() {
            o.record_at(rx_ns, raw_ns, correction_ns);
        }
        self.bytes += d.len() as u64;
        self.datagrams += 1;
        self.transit.add(raw_ns as f64 / 1e9);
        self.first_rx_ns.get_or_insert(rx_ns);
        self.last_rx_ns = rx_ns;
        if id.seq < 0 {
            self.fin = Some(id);
            return Arrival::Fin(id);
        }
        Arrival::Data
    }

    /// Bytes received (the FIN's included).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Datagrams received (the FIN included).
    pub fn datagrams(&self) -> u64 {
        self.datagrams
    }

    /// The report datagram iperf 2's receiver answers a FIN with
    /// (`write_UDP_AckFIN`), from this half's figures and the stream's accounting
    /// (`counts`); the transit only with `trip_times`, as iperf 2 sends it.
    pub fn report(&self, counts: &crate::stats::UdpCounts, trip_times: bool) -> ServerReport {
        let t = &self.transit;
        let span_ns = self.last_rx_ns - self.first_rx_ns.unwrap_or(self.last_rx_ns);
        ServerReport {
            bytes: self.bytes,
            stop_s: span_ns.max(0) as f64 / 1e9,
            lost: counts.lost,
            out_of_order: counts.out_of_order,
            datagrams: counts.highest_seq,
            jitter_s: counts.jitter_s,
            transit: (trip_times && t.count > 0).then_some(Transit {
                min_s: t.min_s,
                max_s: t.max_s,
                mean_s: t.mean_s,
                m2_s2: t.m2_s2,
                count: t.count,
            }),
        }
    }
}

/// `-R`: when to send the test header again. An iperf 2 server's UDP listener hands
/// each new client the socket it listened on and binds another, and a header that
/// arrives in between (the second of `-P 2`, often) is lost; until the server's first
/// datagram comes the header goes again every [`Self::EVERY`], at most [`Self::TRIES`]
/// times in all. A copy reaching a server already sending lands on the socket it sends
/// from, which does not read it.
#[derive(Debug, Clone, Default)]
pub struct HeaderRetry {
    sent: u32,
}

impl HeaderRetry {
    pub const EVERY: Duration = Duration::from_millis(200);
    pub const TRIES: u32 = 25;

    /// The header went out once when the stream opened; `since` is the time since.
    /// Whether to send it again now (`answered`: a datagram came from the server).
    pub fn due(&mut self, since: Duration, answered: bool) -> bool {
        let next = Self::EVERY * (self.sent + 1);
        if answered || since < next || self.sent + 1 >= Self::TRIES {
            return false;
        }
        self.sent += 1;
        true
    }
}

/// `-d`/`-r` over UDP: which datagrams the client's listening socket takes. iperf 2's
/// server sends back from a socket of its own (a port the client cannot know), so the
/// listener takes the first datagram from the server's address and from then on only
/// that sender's (the loop connects the socket to it); anything else is dropped, as
/// iperf 2's client listener refuses a peer that is not its server
/// (`Listener.cpp`: `clientListener` and `SockAddr_Hostare_Equal`).
#[derive(Debug, Clone, Copy)]
pub struct BackFilter {
    server: std::net::IpAddr,
    sender: Option<std::net::SocketAddr>,
}

/// What to do with a datagram that reached the listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// The server's first: take it and connect the socket to its sender.
    Connect(std::net::SocketAddr),
    /// The server's sender again: take it.
    Take,
    /// Anyone else: drop it.
    Drop,
}

impl BackFilter {
    /// Datagrams from `server`'s address only.
    pub fn new(server: std::net::IpAddr) -> BackFilter {
        BackFilter {
            server: server.to_canonical(),
            sender: None,
        }
    }

    /// A datagram from `from`.
    pub fn admit(&mut self, from: std::net::SocketAddr) -> Admit {
        let ip = from.ip().to_canonical();
        match self.sender {
            Some(s) if s.port() == from.port() && s.ip().to_canonical() == ip => Admit::Take,
            Some(_) => Admit::Drop,
            None if ip == self.server => {
                self.sender = Some(from);
                Admit::Connect(from)
            }
            None => Admit::Drop,
        }
    }
}

/// How long the client listens on after its own end (`-t` passed, `-n` received)
/// with nothing arriving: the server started its clock when the header reached it,
/// so it ends a little after the client, and its FIN may be lost.
pub const TAIL_QUIET: Duration = Duration::from_secs(1);
/// The least silence that counts as a server gone quiet before the end.
pub const MIN_IDLE: Duration = Duration::from_secs(3);

/// When the client's receiving halves are over, fed the bytes received so far.
#[derive(Debug, Clone)]
pub struct RecvWatch {
    idle_s: f64,
    last_bytes: u64,
    moved_s: f64,
}

impl RecvWatch {
    /// `idle`: how long a silence ends the test before its end ([`Self::idle_bound`]).
    pub fn new(idle: Duration) -> RecvWatch {
        RecvWatch {
            idle_s: idle.as_secs_f64(),
            last_bytes: 0,
            moved_s: 0.0,
        }
    }

    /// The silence that means the server is gone: four gaps between datagrams at the
    /// rate the header asked for (`rate_bps`, 0: iperf 2's default 1 Mbit/s) of `len`
    /// bytes, and at least [`MIN_IDLE`].
    pub fn idle_bound(rate_bps: u64, len: usize) -> Duration {
        let bps = if rate_bps == 0 { 1 << 20 } else { rate_bps };
        let gap_s = (len as f64 * 8.0 / bps as f64).min(3600.0);
        MIN_IDLE.max(Duration::from_secs_f64(4.0 * gap_s))
    }

    /// At `now_s` (test seconds), with `bytes` received in all, `all_fin`: every
    /// receiving half saw its FIN, `end_reached`: this side's own end condition is met.
    /// Whether to stop listening.
    pub fn over(&mut self, now_s: f64, bytes: u64, all_fin: bool, end_reached: bool) -> bool {
        if bytes != self.last_bytes {
            (self.last_bytes, self.moved_s) = (bytes, now_s);
        }
        let quiet = now_s - self.moved_s;
        all_fin || quiet >= self.idle_s || (end_reached && quiet >= TAIL_QUIET.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::OwdRecord;
    use crate::stats::UdpRecv;
    use crate::wire::iperf2::write_datagram_id;

    fn dgram(seq: i64, sec: u32, usec: u32, len: usize) -> Vec<u8> {
        let mut d = vec![0u8; len];
        write_datagram_id(&mut d, seq, sec, usec);
        d
    }

    fn feed(h: &mut UdpRecvHalf, acc: &mut UdpRecv, d: &[u8], rx_ns: i64) -> Arrival {
        let mut sinks = RecvSinks {
            acc,
            owd: None,
            frames: None,
        };
        h.on_datagram(d, rx_ns, 0, &mut sinks)
    }

    /// Loss, reordering and the FIN counted as iperf 2's receiver counts them: the FIN
    /// closes the gap before it and counts once.
    #[test]
    fn the_fin_is_the_last_datagram_and_counts_once() {
        let (mut h, mut acc) = (UdpRecvHalf::default(), UdpRecv::default());
        let at = 100 * 1_000_000_000 + 1_000_000;
        for s in [1, 2, 4, 3, 6] {
            assert_eq!(
                feed(&mut h, &mut acc, &dgram(s, 100, 0, 1000), at),
                Arrival::Data
            );
        }
        let fin = feed(&mut h, &mut acc, &dgram(-9, 100, 0, 1000), at);
        assert!(matches!(fin, Arrival::Fin(id) if id.seq == -9));
        assert_eq!(
            feed(&mut h, &mut acc, &dgram(-10, 100, 0, 1000), at),
            Arrival::Ignored
        );
        let c = acc.counts();
        assert_eq!(
            (c.highest_seq, c.received, c.lost, c.out_of_order),
            (9, 6, 3, 1)
        );
        assert_eq!((h.bytes(), h.datagrams()), (6000, 6));
        let r = h.report(&c, true);
        assert_eq!(
            (r.datagrams, r.lost, r.out_of_order, r.bytes),
            (9, 3, 1, 6000)
        );
        let t = r.transit.expect("transit with --trip-times");
        assert_eq!(t.count, 6);
        assert!((t.mean_s - 0.001).abs() < 1e-9, "{t:?}");
        assert_eq!(h.report(&c, false).transit, None);
    }

    /// netmeter's server's start datagram (sequence 0) before the data is not counted.
    #[test]
    fn a_start_datagram_numbered_0_is_not_data() {
        let (mut h, mut acc) = (UdpRecvHalf::default(), UdpRecv::default());
        let at = 100 * 1_000_000_000;
        assert_eq!(
            feed(&mut h, &mut acc, &dgram(0, 100, 0, 1000), at),
            Arrival::Ignored
        );
        for s in [1, 2] {
            feed(&mut h, &mut acc, &dgram(s, 100, 0, 1000), at);
        }
        feed(&mut h, &mut acc, &dgram(-3, 100, 0, 1000), at);
        let c = acc.counts();
        assert_eq!(
            (c.highest_seq, c.received, c.lost, c.out_of_order),
            (3, 3, 0, 0)
        );
        assert_eq!((h.bytes(), h.datagrams()), (3000, 3));
    }

    #[test]
    fn a_sequence_number_past_32_bits_and_scraps() {
        let (mut h, mut acc) = (UdpRecvHalf::default(), UdpRecv::default());
        let big = (1i64 << 32) + 5;
        feed(&mut h, &mut acc, &dgram(big, 1, 0, 100), 2_000_000_000);
        assert_eq!(acc.counts().highest_seq, big as u64);
        assert_eq!(feed(&mut h, &mut acc, &[0u8; 10], 0), Arrival::Ignored);
        assert_eq!(h.datagrams(), 1);
    }

    /// With --trip-times the one-way delay goes to the stream's delay record.
    #[test]
    fn the_one_way_delay_is_recorded() {
        let (mut h, mut acc, mut owd) = (
            UdpRecvHalf::default(),
            UdpRecv::default(),
            OwdRecord::default(),
        );
        let mut sinks = RecvSinks {
            acc: &mut acc,
            owd: Some(&mut owd),
            frames: None,
        };
        let d = dgram(1, 50, 0, 200);
        h.on_datagram(&d, 50 * 1_000_000_000 + 2_500_000, 0, &mut sinks);
        assert_eq!((owd.raw_min_ns, owd.raw_max_ns), (2_500_000, 2_500_000));
    }

    #[test]
    fn the_header_goes_again_until_the_server_answers() {
        let ms = Duration::from_millis;
        let mut r = HeaderRetry::default();
        assert!(!r.due(ms(100), false));
        assert!(r.due(ms(200), false));
        assert!(!r.due(ms(250), false), "once per period");
        assert!(
            r.due(ms(1000), false),
            "late: one copy, not the missed ones"
        );
        assert!(!r.due(ms(1500), true), "answered");
        let mut r = HeaderRetry::default();
        let sent = (1..=200).filter(|i| r.due(ms(100 * i), false)).count() as u32;
        assert_eq!(
            sent + 1,
            HeaderRetry::TRIES,
            "the first send and the copies"
        );
    }

    /// The listener takes the server's first sender and only it: another host, and
    /// another port of the server's host once one is chosen, are dropped.
    #[test]
    fn the_listener_takes_the_servers_sender_only() {
        let server: std::net::IpAddr = "10.0.0.2".parse().unwrap();
        let at = |s: &str| -> std::net::SocketAddr { s.parse().unwrap() };
        let mut f = BackFilter::new(server);
        assert_eq!(f.admit(at("10.0.0.9:4000")), Admit::Drop);
        assert_eq!(
            f.admit(at("10.0.0.2:4001")),
            Admit::Connect(at("10.0.0.2:4001"))
        );
        assert_eq!(f.admit(at("10.0.0.2:4001")), Admit::Take);
        assert_eq!(f.admit(at("10.0.0.2:4002")), Admit::Drop);
        assert_eq!(f.admit(at("10.0.0.9:4001")), Admit::Drop);
        // An IPv4 server seen through an IPv6 socket.
        let mut f = BackFilter::new(server);
        assert!(matches!(
            f.admit(at("[::ffff:10.0.0.2]:5000")),
            Admit::Connect(_)
        ));
    }

    #[test]
    fn listening_ends_at_the_fin_after_a_quiet_tail_or_a_long_silence() {
        let idle = RecvWatch::idle_bound(1 << 20, 1470);
        assert_eq!(idle, MIN_IDLE);
        // 1 kbit/s of 1470-byte datagrams: 11.76 s apart, so 47 s of silence.
        assert!(RecvWatch::idle_bound(1000, 1470) > Duration::from_secs(40));
        let mut w = RecvWatch::new(idle);
        assert!(!w.over(0.5, 1000, false, false));
        assert!(w.over(0.6, 2000, true, false), "the FIN ends it");
        let mut w = RecvWatch::new(idle);
        assert!(!w.over(1.0, 1000, false, false));
        assert!(!w.over(2.0, 2000, false, true), "data still flows after -t");
        assert!(!w.over(2.9, 2000, false, true));
        assert!(w.over(3.0, 2000, false, true), "a quiet second after -t");
        let mut w = RecvWatch::new(idle);
        assert!(!w.over(1.0, 1000, false, false));
        assert!(!w.over(3.9, 1000, false, false));
        assert!(w.over(4.0, 1000, false, false), "a silent server");
        let mut w = RecvWatch::new(idle);
        assert!(w.over(3.0, 0, false, false), "a server that never sent");
    }
}
