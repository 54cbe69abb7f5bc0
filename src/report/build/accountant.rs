//! The interval accountant: per-stream cumulative snapshots in, interval rows and final
//! figures out.
//!
//! Pure: the engine's meter reads the counters (atomics, UDP receive state, TCP_INFO)
//! and the test clock, and hands them over as [`Snapshot`]s with `now`; this module keeps
//! everything that needs remembering between ticks:
//! - the previous snapshot of each stream (interval deltas, UDP counts subtracted),
//! - the omit period (`-O`): its intervals are marked omitted; at its end the counters
//!   are re-based, the test's time restarts at 0 and the final figures count from there,
//!   as iperf3 does;
//! - the TCP retransmit and D-SACK (spurious retransmit) counters at the last tick and
//!   where the measured part began, and the TCP summary figures ([`TcpTotals`]);
//! - the `[SUM]` rows per direction (`sum`, and with `--bidir` `sum_bidir_reverse`);
//! - iperf 2's figures of each row (`figures::fill_row`: packets per second, socket
//!   calls, and inP and net power from the one-way delays the extras put in).
//!
//! The extension recorders (round trips, one-way delays, connections, profile units and
//! frames) keep their own interval and total state in the engine; the meter adds their
//! figures to the rows this module builds (see [`Accountant::tick`]'s `extras`).

use super::{LocalFinal, Sample, TcpTotals, figures, interval, stream_interval};
use crate::report::{Interval, StreamInterval, TcpEcn, TcpExtra, TcpFigures, TcpReceivedEcn};
use crate::spec::Protocol;
use crate::stats::AccEcnCounters;
use crate::stats::UdpCounts;

/// What a stream is, fixed for the test.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StreamKey {
    /// iperf3 stream id (1, 3, 4, ...).
    pub id: i64,
    /// Socket number as iperf3 shows it (`[  5]`).
    pub socket: i64,
    /// This side sends on the stream.
    pub sender: bool,
    /// The stream flows client → server.
    pub forward: bool,
}

/// A TCP sender's TCP_INFO as the accountant uses it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpSnapshot {
    /// The report's interval figures; `retransmits` is ignored (the accountant takes it
    /// from the running total).
    pub figures: TcpFigures,
    /// `tcpi_total_retrans`, cumulative since the connection opened.
    pub total_retrans: u64,
    /// Unacknowledged segments times MSS: bytes in flight.
    pub bytes_in_flight: u64,
    /// `tcpi_dsack_dups`, cumulative: retransmissions the receiver reported as not
    /// needed (0 where the kernel is too old to say).
    pub dsack_dups: u64,
    /// ECN was negotiated on the connection (`tcpi_options`).
    pub ecn: bool,
    /// `tcpi_delivered`, cumulative: segments delivered.
    pub delivered: u64,
    /// `tcpi_delivered_ce`, cumulative: of those, echoed as CE-marked.
    pub delivered_ce: u64,
    /// The AccECN counters (Linux 6.18+), cumulative.
    pub accecn: Option<AccEcnCounters>,
}

/// One stream's cumulative counters at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub sample: Sample,
    /// TCP senders whose socket is still open: TCP_INFO.
    pub tcp: Option<TcpSnapshot>,
    /// TCP receivers whose socket is still open and whose connection negotiated ECN, on
    /// kernels with them (6.18+): the AccECN counters of TCP_INFO, cumulative.
    pub tcp_received_ecn: Option<AccEcnCounters>,
}

/// Interval bookkeeping of one test on one side.
#[derive(Debug, Clone)]
pub struct Accountant {
    protocol: Protocol,
    bidir: bool,
    streams: Vec<StreamKey>,
    omit_s: f64,
    omitting: bool,
    /// Test time (seconds since TEST_START) where the current reporting epoch began:
    /// 0, or the end of the omit period.
    epoch_s: f64,
    last_s: f64,
    prev: Vec<Sample>,
    /// Samples at the end of the omit period, subtracted from final figures.
    base: Vec<Sample>,
    /// (`tcpi_total_retrans`, `tcpi_dsack_dups`) at the last interval's end.
    prev_retrans: Vec<(u64, u64)>,
    /// The same where the measured part began.
    retrans_base: Vec<(u64, u64)>,
    /// (`tcpi_delivered`, `tcpi_delivered_ce`) at the last interval's end.
    prev_delivered: Vec<(u64, u64)>,
    /// The AccECN counters (sender's or receiver's) at the last interval's end.
    prev_accecn: Vec<Option<AccEcnCounters>>,
    tcp_totals: Vec<TcpTotals>,
}

fn retrans_of(t: &Option<TcpSnapshot>) -> (u64, u64) {
    t.map_or((0, 0), |i| (i.total_retrans, i.dsack_dups))
}

impl Accountant {
    /// Start accounting at test time 0. `first_tcp` is each stream's TCP_INFO when the
    /// test starts (retransmits before it, during the handshake, are not the test's).
    pub fn new(
        protocol: Protocol,
        bidir: bool,
        streams: Vec<StreamKey>,
        omit_s: f64,
        first_tcp: &[Option<TcpSnapshot>],
    ) -> Accountant {
        let n = streams.len();
        let prev_retrans: Vec<(u64, u64)> = (0..n)
            .map(|i| retrans_of(first_tcp.get(i).unwrap_or(&None)))
            .collect();
        let prev_delivered = (0..n)
            .map(|i| {
                first_tcp
                    .get(i)
                    .copied()
                    .flatten()
                    .map_or((0, 0), |t| (t.delivered, t.delivered_ce))
            })
            .collect();
        let prev_accecn = (0..n)
            .map(|i| first_tcp.get(i).copied().flatten().and_then(|t| t.accecn))
            .collect();
        Accountant {
            retrans_base: prev_retrans.clone(),
            prev_delivered,
            prev_accecn,
            protocol,
            bidir,
            streams,
            omit_s,
            omitting: omit_s > 0.0,
            epoch_s: 0.0,
            last_s: 0.0,
            prev: vec![Sample::default(); n],
            base: vec![Sample::default(); n],
            prev_retrans,
            tcp_totals: vec![TcpTotals::default(); n],
        }
    }

    /// The streams, in the order snapshots are given.
    pub fn streams(&self) -> &[StreamKey] {
        &self.streams
    }

    /// Still inside the omit period.
    pub fn omitting(&self) -> bool {
        self.omitting
    }

    /// Produce the interval ending at test time `now_s` from one snapshot per stream.
    /// `extras(i, row, packets)` is called for each stream's row before it is summed,
    /// with the stream's packet (block, datagram, transaction) count in the interval, so
    /// the caller can add the extension recorders' figures. Also ends the omit period
    /// when it is due, re-basing the counters as iperf3 does.
    pub fn tick(
        &mut self,
        now_s: f64,
        snaps: &[Snapshot],
        mut extras: impl FnMut(usize, &mut StreamInterval, u64),
    ) -> Interval {
        let start = self.last_s - self.epoch_s;
        let end = now_s - self.epoch_s;
        let mut rows = Vec::with_capacity(self.streams.len());
        for (i, (key, snap)) in self.streams.iter().zip(snaps).enumerate() {
            let now = &snap.sample;
            // The interval's retransmits and, of those, the D-SACKed (spurious) ones.
            let (tcp, spurious) = match snap.tcp {
                Some(info) => {
                    let (prev_total, prev_dsack) = self.prev_retrans[i];
                    self.prev_retrans[i] = (info.total_retrans, info.dsack_dups);
                    let figures = TcpFigures {
                        retransmits: info.total_retrans.saturating_sub(prev_total),
                        ..info.figures
                    };
                    (Some(figures), info.dsack_dups.saturating_sub(prev_dsack))
                }
                None => (None, 0),
            };
            if let Some(t) = &tcp
                && !self.omitting
            {
                self.tcp_totals[i].add(t);
                self.tcp_totals[i].spurious_retransmits += spurious;
            }
            let mut row = stream_interval(
                self.protocol,
                key.socket,
                key.sender,
                start,
                end,
                &self.prev[i],
                now,
                tcp,
                self.omitting,
            );
            if let Some(info) = snap.tcp {
                let rtt_s = info.figures.rtt as f64 / 1e6;
                let bps = row.bits_per_second;
                let (prev_delivered, prev_ce) = self.prev_delivered[i];
                self.prev_delivered[i] = (info.delivered, info.delivered_ce);
                let prev_accecn = std::mem::replace(&mut self.prev_accecn[i], info.accecn);
                row.netmeter.get_or_insert_with(Default::default).tcp = Some(TcpExtra {
                    bytes_in_flight: info.bytes_in_flight,
                    inp_bytes: bps / 8.0 * rtt_s,
                    net_power: if rtt_s > 0.0 { bps / rtt_s } else { 0.0 },
                    spurious_retransmits: spurious,
                    ecn: info.ecn.then(|| TcpEcn {
                        accecn: info.accecn.map(|a| a.since(prev_accecn.as_ref())),
                        ..TcpEcn::new(
                            info.delivered.saturating_sub(prev_delivered),
                            info.delivered_ce.saturating_sub(prev_ce),
                        )
                    }),
                });
            }
            if let Some(a) = snap.tcp_received_ecn {
                let prev = self.prev_accecn[i].replace(a);
                let d = a.since(prev.as_ref());
                row.netmeter
                    .get_or_insert_with(Default::default)
                    .tcp_received_ecn = Some(TcpReceivedEcn {
                    received_ce: d.received_ce,
                    received_ect1_bytes: d.received_ect1_bytes,
                    received_ect0_bytes: d.received_ect0_bytes,
                    received_ce_bytes: d.received_ce_bytes,
                });
            }
            extras(
                i,
                &mut row,
                now.packets.saturating_sub(self.prev[i].packets),
            );
            figures::fill_row(self.protocol, &mut row, &self.prev[i], now);
            rows.push((row, key.forward));
            self.prev[i] = *now;
        }
        self.last_s = now_s;
        if self.omitting && now_s + 1e-9 >= self.omit_s {
            self.omitting = false;
            self.epoch_s = now_s;
            self.base = self.prev.clone();
            self.retrans_base = self.prev_retrans.clone();
        }
        interval(rows, start, end, self.bidir)
    }

    /// Whether a tick at `now_s` would cover a meaningful span (iperf3 drops a trailing
    /// interval shorter than 10 % of the interval length).
    pub fn worth_reporting(&self, now_s: f64, interval_s: f64) -> bool {
        now_s - self.last_s >= 0.1 * interval_s
    }

    /// Bytes and packets moved so far in the measured part, per direction: (sent bytes,
    /// received bytes, sent packets, received packets). `now` holds one sample per stream.
    pub fn totals(&self, now: &[Sample]) -> (u64, u64, u64, u64) {
        let (mut sb, mut rb, mut sp, mut rp) = (0, 0, 0, 0);
        for ((key, now), b) in self.streams.iter().zip(now).zip(&self.base) {
            let bytes = now.bytes - b.bytes.min(now.bytes);
            let packets = now.packets - b.packets.min(now.packets);
            if key.sender {
                sb += bytes;
                sp += packets;
            } else {
                rb += bytes;
                rp += packets;
            }
        }
        (sb, rb, sp, rp)
    }

    /// Final figures of every stream, measured part only: senders stopped at test time
    /// `send_end_s`, receivers counted until `recv_end_s` (after the end-of-test drain).
    /// The extension recorders' fields are left empty for the caller.
    pub fn finals(&self, send_end_s: f64, recv_end_s: f64, snaps: &[Snapshot]) -> Vec<LocalFinal> {
        self.streams
            .iter()
            .zip(snaps)
            .enumerate()
            .map(|(i, (key, snap))| {
                let now = &snap.sample;
                let b = &self.base[i];
                let udp = now.udp.map(|u| {
                    let bu = b.udp.unwrap_or_default();
                    UdpCounts {
                        highest_seq: u.highest_seq.saturating_sub(bu.highest_seq),
                        received: u.received.saturating_sub(bu.received),
                        lost: u.lost.saturating_sub(bu.lost),
                        out_of_order: u.out_of_order.saturating_sub(bu.out_of_order),
                        duplicates: u.duplicates.saturating_sub(bu.duplicates),
                        jitter_s: u.jitter_s,
                        ecn: u.ecn.map(|e| e.since(&bu.ecn.unwrap_or_default())),
                    }
                });
                let end = if key.sender { send_end_s } else { recv_end_s };
                LocalFinal {
                    id: key.id,
                    socket: key.socket,
                    sender: key.sender,
                    forward: key.forward,
                    bytes: now.bytes.saturating_sub(b.bytes),
                    seconds: (end - self.epoch_s).max(0.0),
                    packets: now.packets.saturating_sub(b.packets),
                    omitted_packets: match (&b.udp, key.sender) {
                        (Some(bu), false) => bu.highest_seq,
                        _ => b.packets,
                    },
                    omitted_errors: b.udp.map_or(0, |bu| bu.lost),
                    tcp: (self.protocol == Protocol::Tcp && key.sender).then(|| {
                        let mut t = self.tcp_totals[i];
                        if let Some(info) = snap.tcp {
                            let (base_total, base_dsack) = self.retrans_base[i];
                            t.retransmits = info.total_retrans.saturating_sub(base_total);
                            t.spurious_retransmits = info.dsack_dups.saturating_sub(base_dsack);
                        }
                        t
                    }),
                    udp,
                    calls: now.calls.map(|c| c.since(&b.calls.unwrap_or_default())),
                    ..LocalFinal::default()
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: i64, sender: bool, forward: bool) -> StreamKey {
        StreamKey {
            id,
            socket: id + 4,
            sender,
            forward,
        }
    }

    fn bulk(bytes: u64, packets: u64) -> Snapshot {
        Snapshot {
            sample: Sample {
                bytes,
                packets,
                udp: None,
                calls: None,
            },
            tcp: None,
            tcp_received_ecn: None,
        }
    }

    fn tcp(bytes: u64, total_retrans: u64, dsack_dups: u64, rtt_us: u64) -> Snapshot {
        Snapshot {
            sample: Sample {
                bytes,
                packets: 0,
                udp: None,
                calls: None,
            },
            tcp: Some(TcpSnapshot {
                figures: TcpFigures {
                    snd_cwnd: 10_000,
                    rtt: rtt_us,
                    ..TcpFigures::default()
                },
                total_retrans,
                bytes_in_flight: 5_000,
                dsack_dups,
                ..TcpSnapshot::default()
            }),
            tcp_received_ecn: None,
        }
    }

    fn udp_rx(bytes: u64, highest_seq: u64, lost: u64, jitter_s: f64) -> Snapshot {
        Snapshot {
            sample: Sample {
                bytes,
                packets: highest_seq - lost,
                udp: Some(UdpCounts {
                    highest_seq,
                    received: highest_seq - lost,
                    lost,
                    out_of_order: 0,
                    duplicates: 0,
                    jitter_s,
                    ecn: None,
                }),
                calls: None,
            },
            tcp: None,
            tcp_received_ecn: None,
        }
    }

    fn no_extras(_: usize, _: &mut StreamInterval, _: u64) {}

    #[test]
    fn intervals_are_deltas_of_cumulative_snapshots() {
        let mut a = Accountant::new(Protocol::Tcp, false, vec![key(1, true, true)], 0.0, &[None]);
        let iv = a.tick(1.0, &[bulk(1_000_000, 8)], no_extras);
        assert_eq!((iv.sum.start, iv.sum.end), (0.0, 1.0));
        assert_eq!(iv.streams[0].bytes, 1_000_000);
        assert_eq!(iv.streams[0].bits_per_second, 8e6);
        let iv = a.tick(2.5, &[bulk(2_500_000, 20)], no_extras);
        assert_eq!((iv.streams[0].start, iv.streams[0].end), (1.0, 2.5));
        assert_eq!(iv.streams[0].bytes, 1_500_000);
        assert_eq!(iv.sum.bits_per_second, 8e6);
        assert!(!iv.sum.omitted);
    }

    #[test]
    fn omit_period_marks_rows_and_rebases_time_and_totals() {
        let mut a = Accountant::new(Protocol::Tcp, false, vec![key(1, true, true)], 2.0, &[None]);
        assert!(a.omitting());
        let iv = a.tick(1.0, &[bulk(100, 1)], no_extras);
        assert!(iv.sum.omitted && iv.streams[0].omitted);
        let iv = a.tick(2.0, &[bulk(300, 3)], no_extras);
        assert!(iv.sum.omitted);
        assert_eq!(iv.streams[0].bytes, 200);
        // The omit period ended at 2.0: time restarts at 0, the base moves.
        assert!(!a.omitting());
        let iv = a.tick(3.0, &[bulk(1300, 13)], no_extras);
        assert!(!iv.sum.omitted);
        assert_eq!((iv.sum.start, iv.sum.end), (0.0, 1.0));
        assert_eq!(iv.sum.bytes, 1000);
        assert_eq!(a.totals(&[bulk(1500, 15).sample]), (1200, 0, 12, 0));
        let f = a.finals(4.0, 4.0, &[bulk(2300, 23)]);
        assert_eq!(f[0].bytes, 2000);
        assert_eq!(f[0].packets, 20);
        assert_eq!(f[0].seconds, 2.0);
        assert_eq!(f[0].omitted_packets, 3);
    }

    #[test]
    fn retransmits_count_from_the_start_and_after_the_omit_period() {
        // 4 retransmits (1 spurious) happened before the test started: not the test's.
        let first = [tcp(0, 4, 1, 0).tcp];
        let mut a = Accountant::new(Protocol::Tcp, false, vec![key(1, true, true)], 1.0, &first);
        let iv = a.tick(1.0, &[tcp(100, 6, 1, 2000)], no_extras);
        assert!(iv.sum.omitted);
        assert_eq!(iv.streams[0].tcp.map(|t| t.retransmits), Some(2));
        let iv = a.tick(2.0, &[tcp(200, 9, 3, 1000)], no_extras);
        let row = &iv.streams[0];
        assert_eq!(row.tcp.map(|t| t.retransmits), Some(3));
        assert_eq!(iv.sum.retransmits, Some(3));
        let ext = row.netmeter.as_ref().and_then(|n| n.tcp).unwrap();
        assert_eq!(ext.spurious_retransmits, 2);
        assert_eq!(ext.bytes_in_flight, 5_000);
        // 800 bit/s over a 1 ms round trip: 0.1 bytes in the pipe.
        assert!((ext.inp_bytes - 0.1).abs() < 1e-9);
        let f = a.finals(3.0, 3.0, &[tcp(300, 10, 3, 1000)]);
        let t = f[0].tcp.unwrap();
        // Counted from the end of the omit period (6 retransmits, 1 D-SACKed), so the
        // one after the last tick is included.
        assert_eq!(t.retransmits, 4);
        assert_eq!(t.spurious_retransmits, 2);
        // The omitted interval's RTT is not in the totals.
        assert_eq!(t.rtt_samples, 1);
        assert_eq!(t.max_rtt, 1000);
        // The socket was closed before the end: the totals the ticks saw.
        let f = a.finals(3.0, 3.0, &[bulk(300, 0)]);
        assert_eq!(f[0].tcp.unwrap().retransmits, 3);
    }

    #[test]
    fn udp_loss_is_per_interval_and_the_final_counts_skip_the_omit_period() {
        let mut a = Accountant::new(
            Protocol::Udp,
            false,
            vec![key(1, false, true)],
            1.0,
            &[None],
        );
        let iv = a.tick(1.0, &[udp_rx(1000, 10, 2, 0.001)], no_extras);
        assert_eq!(iv.streams[0].udp_recv.map(|u| u.lost_packets), Some(2));
        let iv = a.tick(2.0, &[udp_rx(3000, 30, 3, 0.002)], no_extras);
        let u = iv.streams[0].udp_recv.unwrap();
        assert_eq!((u.packets, u.lost_packets), (20, 1));
        assert_eq!(u.lost_percent, 5.0);
        assert_eq!(u.jitter_ms, 2.0);
        // Late datagrams filled a gap: lost shrank; the interval shows 0, not a wrap.
        let iv = a.tick(3.0, &[udp_rx(4000, 40, 2, 0.002)], no_extras);
        assert_eq!(iv.streams[0].udp_recv.map(|u| u.lost_packets), Some(0));
        let f = a.finals(3.0, 3.0, &[udp_rx(4000, 40, 2, 0.002)]);
        let u = f[0].udp.unwrap();
        assert_eq!((u.highest_seq, u.lost), (30, 0));
        assert_eq!((f[0].omitted_packets, f[0].omitted_errors), (10, 2));
        assert_eq!(f[0].bytes, 3000);
    }

    #[test]
    fn sums_add_streams_of_one_direction() {
        let keys = vec![key(1, false, true), key(3, false, true)];
        let mut a = Accountant::new(Protocol::Udp, false, keys, 0.0, &[None, None]);
        let iv = a.tick(
            1.0,
            &[udp_rx(1000, 10, 1, 0.001), udp_rx(2000, 20, 3, 0.003)],
            no_extras,
        );
        assert_eq!(iv.streams.len(), 2);
        assert_eq!(iv.sum.bytes, 3000);
        let u = iv.sum.udp_recv.unwrap();
        assert_eq!((u.packets, u.lost_packets), (30, 4));
        assert_eq!(u.jitter_ms, 2.0);
        assert!(!iv.sum.sender);
        assert!(iv.sum_bidir_reverse.is_none());
    }

    #[test]
    fn reverse_and_bidir_roles() {
        // -R on the client: it receives; the sum is a receiver's.
        let mut a = Accountant::new(
            Protocol::Tcp,
            false,
            vec![key(1, false, false)],
            0.0,
            &[None],
        );
        let iv = a.tick(1.0, &[bulk(500, 4)], no_extras);
        assert!(!iv.sum.sender && iv.sum.retransmits.is_none());
        assert!(iv.streams[0].tcp.is_none());
        assert_eq!(a.totals(&[bulk(500, 4).sample]), (0, 500, 0, 4));
        // --bidir: the forward streams make `sum`, the reverse ones `sum_bidir_reverse`.
        let keys = vec![key(1, true, true), key(3, false, false)];
        let mut a = Accountant::new(Protocol::Tcp, true, keys, 0.0, &[None, None]);
        let iv = a.tick(1.0, &[tcp(100, 1, 0, 10), bulk(700, 0)], no_extras);
        assert_eq!(iv.sum.bytes, 100);
        assert!(iv.sum.sender);
        assert_eq!(iv.sum.retransmits, Some(1));
        let r = iv.sum_bidir_reverse.unwrap();
        assert_eq!(r.bytes, 700);
        assert!(!r.sender);
        let f = a.finals(1.0, 1.5, &[tcp(100, 1, 0, 10), bulk(800, 0)]);
        assert_eq!((f[0].seconds, f[1].seconds), (1.0, 1.5));
        assert!(f[0].tcp.is_some() && f[1].tcp.is_none());
    }

    #[test]
    fn extras_see_each_row_and_its_packet_delta() {
        let mut a = Accountant::new(Protocol::Tcp, false, vec![key(1, true, true)], 0.0, &[None]);
        a.tick(1.0, &[bulk(10, 7)], no_extras);
        let mut seen = Vec::new();
        let iv = a.tick(2.0, &[bulk(30, 12)], |i, row, packets| {
            seen.push((i, packets));
            row.netmeter
                .get_or_insert_with(Default::default)
                .transactions = Some(packets);
        });
        assert_eq!(seen, [(0, 5)]);
        assert_eq!(
            iv.streams[0].netmeter.as_ref().and_then(|n| n.transactions),
            Some(5)
        );
    }

    #[test]
    fn a_short_trailing_interval_is_not_worth_reporting() {
        let mut a = Accountant::new(Protocol::Tcp, false, vec![key(1, true, true)], 0.0, &[None]);
        a.tick(1.0, &[bulk(10, 1)], no_extras);
        assert!(!a.worth_reporting(1.05, 1.0));
        assert!(a.worth_reporting(1.1, 1.0));
    }

    #[test]
    fn accecn_counters_become_interval_deltas_on_both_ends() {
        let acc = |ce: u32, ce_bytes: u32| AccEcnCounters {
            received_ce: ce,
            received_ce_bytes: ce_bytes,
            delivered_ce_bytes: ce_bytes,
            ..AccEcnCounters::default()
        };
        let sender = |bytes: u64, delivered: u64, ce: u64, a: Option<AccEcnCounters>| {
            let mut s = tcp(bytes, 0, 0, 100);
            if let Some(t) = s.tcp.as_mut() {
                (t.ecn, t.delivered, t.delivered_ce, t.accecn) = (true, delivered, ce, a);
            }
            s
        };
        let receiver = |bytes: u64, a: Option<AccEcnCounters>| Snapshot {
            tcp_received_ecn: a,
            ..bulk(bytes, 0)
        };
        // The rows' TCP ECN figures: the sender's, the receiver's.
        let sent = |iv: &Interval| iv.streams[0].netmeter.as_ref().and_then(|n| n.tcp?.ecn);
        let received = |iv: &Interval| {
            iv.streams[1]
                .netmeter
                .as_ref()
                .and_then(|n| n.tcp_received_ecn)
        };
        let first = sender(0, 10, 1, Some(acc(1, 1448)));
        let mut a = Accountant::new(
            Protocol::Tcp,
            false,
            vec![key(1, true, true), key(2, false, false)],
            0.0,
            &[first.tcp, None],
        );
        let iv = a.tick(
            1.0,
            &[
                sender(1_000_000, 710, 8, Some(acc(8, 8 * 1448))),
                receiver(1_000_000, Some(acc(5, 5 * 1448))),
            ],
            no_extras,
        );
        let e = sent(&iv).unwrap();
        assert_eq!((e.delivered, e.ce_delivered), (700, 7));
        assert_eq!(e.accecn.unwrap().delivered_ce_bytes, 7 * 1448);
        let r = received(&iv).unwrap();
        assert_eq!((r.received_ce, r.received_ce_bytes), (5, 5 * 1448));
        let iv = a.tick(
            2.0,
            &[
                sender(2_000_000, 1410, 9, Some(acc(9, 9 * 1448))),
                receiver(2_000_000, Some(acc(9, 9 * 1448))),
            ],
            no_extras,
        );
        let r = received(&iv).unwrap();
        assert_eq!(r.received_ce, 4);
        // An older kernel: no AccECN figures on the sender, nothing on the receiver
        // (absent, not zero).
        let iv = a.tick(
            3.0,
            &[sender(3_000_000, 2110, 10, None), receiver(3_000_000, None)],
            no_extras,
        );
        let e = sent(&iv).unwrap();
        assert_eq!((e.accecn, e.ce_delivered), (None, 1));
        assert_eq!(received(&iv), None);
    }

    proptest::proptest! {
        /// Whatever the counts and the omit period, each interval is its delta and the
        /// measured intervals add up to the final figures.
        #[test]
        fn measured_intervals_add_up_to_the_finals(
            steps in proptest::collection::vec((0u64..1_000_000, 0u64..100), 1..30),
            omit_ticks in 0usize..5,
        ) {
            let mut a = Accountant::new(
                Protocol::Tcp, false, vec![key(1, true, true)], omit_ticks as f64, &[None],
            );
            let (mut bytes, mut packets, mut measured) = (0u64, 0u64, 0u64);
            for (k, (b, p)) in steps.iter().enumerate() {
                bytes += b;
                packets += p;
                let iv = a.tick((k + 1) as f64, &[bulk(bytes, packets)], no_extras);
                proptest::prop_assert_eq!(iv.sum.bytes, *b);
                proptest::prop_assert_eq!(iv.sum.omitted, k < omit_ticks);
                if !iv.sum.omitted {
                    measured += b;
                }
            }
            // A test that ended inside its omit period was never re-based: it counts all.
            let expected = if a.omitting() { bytes } else { measured };
            let f = a.finals(steps.len() as f64, steps.len() as f64, &[bulk(bytes, packets)]);
            proptest::prop_assert_eq!(f[0].bytes, expected);
            proptest::prop_assert_eq!(a.totals(&[bulk(bytes, packets).sample]).0, expected);
        }
    }
}
