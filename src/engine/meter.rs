//! Sampling running streams into interval rows and final figures.
//!
//! Owned by the control thread of a test (client or server). It reads the streams'
//! cumulative atomics and TCP_INFO once per tick and hands the deltas to the pure
//! builders in `report::build`.

use super::stream::StreamShared;
use crate::latency::Hist;
use crate::report::build::{self, LocalFinal, Sample, TcpTotals};
use crate::report::{Interval, StreamExt, TcpExtra, TcpFigures};
use crate::sock;
use crate::spec::Protocol;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Where a side's receiving figures end, in test seconds: where the test ended
/// (`ended_s`: the client's end of test, or TEST_END's arrival at the server), or later
/// only as far as data still in flight then kept arriving during the end-of-test drain
/// (`last_arrival_s`, `None` when nothing arrived). The drain's wait for silence, and the
/// wait for paced senders to notice the stop, are not test time: a paced test's receiver
/// ends with its sender. Data queued on the path (a deep buffer) still extends the
/// receiver's time, so the queue does not inflate the received rate (iperf3's
/// `receiver_time` is likewise the receiver's own).
pub fn receiver_end_s(ended_s: f64, last_arrival_s: Option<f64>) -> f64 {
    last_arrival_s.map_or(ended_s, |a| a.max(ended_s))
}

/// A TCP sender's TCP_INFO as the meter uses it: the report's interval figures
/// (`retransmits` left 0: the meter takes it from the running total) and the running
/// totals.
#[derive(Debug, Clone, Copy)]
struct TcpSample {
    figures: TcpFigures,
    /// `tcpi_total_retrans`, cumulative since the connection opened.
    total_retrans: u64,
    /// Unacknowledged segments times MSS: bytes in flight.
    bytes_in_flight: u64,
    /// `tcpi_dsack_dups`, cumulative: retransmissions the receiver reported as not
    /// needed (0 where the kernel is too old to say).
    dsack_dups: u64,
}

impl From<sock::TcpInfo> for TcpSample {
    fn from(i: sock::TcpInfo) -> TcpSample {
        TcpSample {
            figures: TcpFigures {
                retransmits: 0,
                snd_cwnd: i.snd_cwnd_bytes(),
                snd_wnd: i.snd_wnd as u64,
                rtt: i.rtt_us as u64,
                rttvar: i.rttvar_us as u64,
                pmtu: i.pmtu as u64,
                reorder: i.reord_seen as u64,
            },
            total_retrans: i.total_retrans as u64,
            bytes_in_flight: i.bytes_in_flight(),
            dsack_dups: i.dsack_dups as u64,
        }
    }
}

/// Per-test interval bookkeeping.
pub struct Meter {
    pub protocol: Protocol,
    pub bidir: bool,
    pub streams: Vec<Arc<StreamShared>>,
    omit_s: f64,
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
    tcp_totals: Vec<TcpTotals>,
    pub omitting: bool,
    /// `--connect-only` server: connections answered for this test.
    pub answered: Option<super::connect::Answered>,
}

impl Meter {
    pub fn new(
        protocol: Protocol,
        bidir: bool,
        streams: Vec<Arc<StreamShared>>,
        omit_s: f64,
    ) -> Meter {
        let n = streams.len();
        let prev_retrans: Vec<(u64, u64)> = streams
            .iter()
            .map(|s| {
                if s.sender && protocol == Protocol::Tcp {
                    s.tcp_info()
                        .map(TcpSample::from)
                        .map(|i| (i.total_retrans, i.dsack_dups))
                        .unwrap_or((0, 0))
                } else {
                    (0, 0)
                }
            })
            .collect();
        Meter {
            retrans_base: prev_retrans.clone(),
            protocol,
            bidir,
            streams,
            omit_s,
            epoch_s: 0.0,
            last_s: 0.0,
            prev: vec![Sample::default(); n],
            base: vec![Sample::default(); n],
            prev_retrans,
            tcp_totals: vec![TcpTotals::default(); n],
            omitting: omit_s > 0.0,
            answered: None,
        }
    }

    fn sample(s: &StreamShared) -> Sample {
        Sample {
            bytes: s.bytes.load(Ordering::Relaxed),
            packets: s.packets.load(Ordering::Relaxed),
            udp: s.udp_counts(),
        }
    }

    /// Total bytes moved so far in the measured part, per direction (sent, received).
    pub fn totals(&self) -> (u64, u64, u64, u64) {
        let (mut sb, mut rb, mut sp, mut rp) = (0, 0, 0, 0);
        for (s, b) in self.streams.iter().zip(&self.base) {
            let now = Self::sample(s);
            if s.sender {
                sb += now.bytes - b.bytes.min(now.bytes);
                sp += now.packets - b.packets.min(now.packets);
            } else {
                rb += now.bytes - b.bytes.min(now.bytes);
                rp += now.packets - b.packets.min(now.packets);
            }
        }
        (sb, rb, sp, rp)
    }

    /// Produce the interval ending at test time `now_s`. Also ends the omit period
    /// when it is due, re-basing the counters as iperf3 does.
    pub fn tick(&mut self, now_s: f64) -> Interval {
        let start = self.last_s - self.epoch_s;
        let end = now_s - self.epoch_s;
        let mut rows = Vec::with_capacity(self.streams.len());
        let mut merged = Hist::default();
        let mut merged_owd = Hist::default();
        let mut conn_sum = super::connect::IntervalSum::default();
        let mut profile_sum = super::profile::IntervalSum::default();
        for (i, s) in self.streams.iter().enumerate() {
            let now = Self::sample(s);
            let tcp_info_now = (self.protocol == Protocol::Tcp && s.sender)
                .then(|| s.tcp_info().map(TcpSample::from))
                .flatten();
            // The interval's retransmits and, of those, the D-SACKed (spurious) ones.
            let (tcp, spurious) = match tcp_info_now {
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
            let mut row = build::stream_interval(
                self.protocol,
                s.socket,
                s.sender,
                start,
                end,
                &self.prev[i],
                &now,
                tcp,
                self.omitting,
            );
            if let Some(info) = tcp_info_now {
                let rtt_s = info.figures.rtt as f64 / 1e6;
                let bps = row.bits_per_second;
                row.netmeter.get_or_insert_with(StreamExt::default).tcp = Some(TcpExtra {
                    bytes_in_flight: info.bytes_in_flight,
                    inp_bytes: bps / 8.0 * rtt_s,
                    net_power: if rtt_s > 0.0 { bps / rtt_s } else { 0.0 },
                    spurious_retransmits: spurious,
                });
            }
            if let Some(rec) = &s.owd {
                let mut o = rec.lock().unwrap_or_else(|p| p.into_inner());
                merged_owd.merge(&o.interval);
                let ext = row.netmeter.get_or_insert_with(StreamExt::default);
                ext.owd = o.interval.stats();
                o.interval.clear();
            }
            if let Some(rec) = &s.rtt {
                let mut r = rec.lock().unwrap_or_else(|p| p.into_inner());
                merged.merge(&r.interval);
                row.netmeter = Some(StreamExt {
                    udp: None,
                    transactions: Some(now.packets.saturating_sub(self.prev[i].packets)),
                    rtt: r.interval.stats(),
                    owd: None,
                    ..StreamExt::default()
                });
                r.interval.clear();
            }
            if let Some(rec) = &s.conn {
                let ext = row.netmeter.get_or_insert_with(StreamExt::default);
                conn_sum.take(rec, self.omitting, ext);
            }
            profile_sum.take(s, self.omitting, &mut row);
            rows.push((row, s.forward));
            self.prev[i] = now;
        }
        self.last_s = now_s;
        if self.omitting && now_s + 1e-9 >= self.omit_s {
            self.omitting = false;
            self.epoch_s = now_s;
            self.base = self.prev.clone();
            self.retrans_base = self.prev_retrans.clone();
        }
        let mut iv = build::interval(rows, start, end, self.bidir);
        if self.streams.iter().any(|s| s.rtt.is_some()) {
            let transactions = iv
                .streams
                .iter()
                .filter_map(|r| r.netmeter.and_then(|n| n.transactions))
                .sum();
            iv.sum.netmeter = Some(StreamExt {
                udp: None,
                transactions: Some(transactions),
                rtt: merged.stats(),
                owd: None,
                ..StreamExt::default()
            });
        }
        conn_sum.finish(&mut iv, self.answered.as_mut());
        profile_sum.finish(&mut iv);
        if !merged_owd.is_empty() {
            iv.sum.netmeter.get_or_insert_with(StreamExt::default).owd = merged_owd.stats();
        }
        iv
    }

    /// Whether a tick at `now_s` would cover a meaningful span (iperf3 drops a trailing
    /// interval shorter than 10 % of the interval length).
    pub fn worth_reporting(&self, now_s: f64, interval_s: f64) -> bool {
        now_s - self.last_s >= 0.1 * interval_s
    }

    /// Final figures of every stream, measured part only: senders stopped at test time
    /// `send_end_s`, receivers counted until `recv_end_s` (after the end-of-test drain).
    pub fn finals(&self, send_end_s: f64, recv_end_s: f64) -> Vec<LocalFinal> {
        self.streams
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let now = Self::sample(s);
                let b = &self.base[i];
                let udp = now.udp.map(|u| {
                    let bu = b.udp.unwrap_or_default();
                    crate::stats::UdpCounts {
                        highest_seq: u.highest_seq.saturating_sub(bu.highest_seq),
                        received: u.received.saturating_sub(bu.received),
                        lost: u.lost.saturating_sub(bu.lost),
                        out_of_order: u.out_of_order.saturating_sub(bu.out_of_order),
                        duplicates: u.duplicates.saturating_sub(bu.duplicates),
                        jitter_s: u.jitter_s,
                    }
                });
                let end = if s.sender { send_end_s } else { recv_end_s };
                let seconds = (end - self.epoch_s).max(0.0);
                let (units, frames) = super::profile::finals(s, self.omitting);
                LocalFinal {
                    id: s.id,
                    socket: s.socket,
                    sender: s.sender,
                    forward: s.forward,
                    bytes: now.bytes.saturating_sub(b.bytes),
                    seconds,
                    packets: now.packets.saturating_sub(b.packets),
                    omitted_packets: match (&b.udp, s.sender) {
                        (Some(bu), false) => bu.highest_seq,
                        _ => b.packets,
                    },
                    omitted_errors: b.udp.map_or(0, |bu| bu.lost),
                    tcp: (self.protocol == Protocol::Tcp && s.sender).then(|| {
                        let mut t = self.tcp_totals[i];
                        if let Some(info) = s.tcp_info().map(TcpSample::from) {
                            let (base_total, base_dsack) = self.retrans_base[i];
                            t.retransmits = info.total_retrans.saturating_sub(base_total);
                            t.spurious_retransmits = info.dsack_dups.saturating_sub(base_dsack);
                        }
                        t
                    }),
                    udp,
                    host_drops: None,
                    zerocopy: None,
                    owd: s
                        .owd
                        .as_ref()
                        .map(|o| o.lock().unwrap_or_else(|p| p.into_inner()).clone()),
                    rtt: s.rtt.as_ref().map(|r| {
                        let r = r.lock().unwrap_or_else(|p| p.into_inner());
                        (r.total.clone(), r.lost)
                    }),
                    rtt_idle: s.rtt.as_ref().and_then(|r| {
                        let r = r.lock().unwrap_or_else(|p| p.into_inner());
                        (!r.idle.is_empty()).then(|| r.idle.clone())
                    }),
                    conn: s
                        .conn
                        .as_ref()
                        .map(|r| super::connect::final_of(r, self.omitting)),
                    units,
                    frames,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receiver_ends_with_the_test_unless_data_kept_arriving() {
        // Nothing arrived during the drain (its 50 ms wait for silence): the test's end.
        assert_eq!(receiver_end_s(1.0, None), 1.0);
        // The last datagram arrived 3 ms after the end (still in flight, or queued).
        assert_eq!(receiver_end_s(1.0, Some(1.003)), 1.003);
        // An arrival stamped before the end (clock granularity) never shortens it.
        assert_eq!(receiver_end_s(1.0, Some(0.999)), 1.0);
    }
}
