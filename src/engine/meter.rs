//! Sampling running streams into interval rows and final figures.
//!
//! Owned by the control thread of a test (client or server). It only takes snapshots:
//! the streams' cumulative atomics, UDP receive counts and TCP_INFO once per tick, handed
//! to the pure `report::build::accountant` (omit period, baselines, deltas, sums), and
//! the extension recorders' interval figures added to the rows it returns.

use super::record::StreamShared;
use crate::latency::Hist;
use crate::report::build::accountant::{Accountant, Snapshot, StreamKey, TcpSnapshot};
use crate::report::build::{LocalFinal, Sample};
use crate::report::{Interval, StreamExt, TcpFigures};
use crate::sock;
use crate::spec::Protocol;
use crate::stats::AccEcnCounters;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

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

/// A TCP sender's TCP_INFO as the accountant takes it.
fn tcp_snapshot(i: sock::TcpInfo) -> TcpSnapshot {
    TcpSnapshot {
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
        ecn: i.ecn(),
        delivered: i.delivered as u64,
        delivered_ce: i.delivered_ce as u64,
        accecn: i.accecn,
    }
}

/// Per-test interval sampling: reads the streams and feeds the [`Accountant`].
pub struct Meter {
    pub protocol: Protocol,
    pub streams: Vec<Arc<StreamShared>>,
    acct: Accountant,
    /// `--connect-only` server: connections answered for this test.
    pub answered: Option<super::connect::Answered>,
    /// `--histograms`: keep each interval's one-way delay and frame latency buckets for
    /// the text (`Interval::owd_histogram_us`, `frame_latency_histogram_us`); otherwise
    /// they are not built.
    pub interval_histograms: bool,
}

impl Meter {
    pub fn new(
        protocol: Protocol,
        bidir: bool,
        streams: Vec<Arc<StreamShared>>,
        omit_s: f64,
    ) -> Meter {
        let keys = streams
            .iter()
            .map(|s| StreamKey {
                id: s.id,
                socket: s.socket,
                sender: s.sender,
                forward: s.forward,
            })
            .collect();
        let first: Vec<Option<TcpSnapshot>> =
            streams.iter().map(|s| Self::tcp_of(protocol, s)).collect();
        Meter {
            acct: Accountant::new(protocol, bidir, keys, omit_s, &first),
            protocol,
            streams,
            answered: None,
            interval_histograms: false,
        }
    }

    /// Still inside the omit period.
    pub fn omitting(&self) -> bool {
        self.acct.omitting()
    }

    /// TCP_INFO of a TCP sender while its socket is open.
    fn tcp_of(protocol: Protocol, s: &StreamShared) -> Option<TcpSnapshot> {
        if protocol == Protocol::Tcp && s.sender {
            s.tcp_info().map(tcp_snapshot)
        } else {
            None
        }
    }

    /// A TCP receiver's AccECN counters while its socket is open, where its connection
    /// negotiated ECN, on kernels that have them (6.18+).
    fn tcp_received_ecn_of(protocol: Protocol, s: &StreamShared) -> Option<AccEcnCounters> {
        if protocol == Protocol::Tcp && !s.sender {
            s.tcp_info().filter(|i| i.ecn()).and_then(|i| i.accecn)
        } else {
            None
        }
    }

    fn sample(s: &StreamShared) -> Sample {
        // The calls first: a loop counts a read after the data it returned, so the data
        // loaded next holds at least what those reads returned (never more reads than
        // datagrams, though the loop may be reading while the end of a test samples).
        let calls = s.calls.snapshot();
        Sample {
            bytes: s.bytes.load(Ordering::Relaxed),
            packets: s.packets.load(Ordering::Relaxed),
            udp: s.udp_counts(),
            calls,
        }
    }

    fn snapshots(&self) -> Vec<Snapshot> {
        self.streams
            .iter()
            .map(|s| Snapshot {
                sample: Self::sample(s),
                tcp: Self::tcp_of(self.protocol, s),
                tcp_received_ecn: Self::tcp_received_ecn_of(self.protocol, s),
            })
            .collect()
    }

    /// Total bytes moved so far in the measured part, per direction (sent, received).
    pub fn totals(&self) -> (u64, u64, u64, u64) {
        let now: Vec<Sample> = self.streams.iter().map(|s| Self::sample(s)).collect();
        self.acct.totals(&now)
    }

    /// Produce the interval ending at test time `now_s`. Also ends the omit period
    /// when it is due, re-basing the counters as iperf3 does.
    pub fn tick(&mut self, now_s: f64) -> Interval {
        self.tick_cut(now_s, None)
    }

    /// [`Meter::tick`], with the round trips a bounceback loop stamped
    /// (`RttRecord::on_round_trip`) counted up to `cut` only (the interval's nominal
    /// end; `None`: all of them), their transactions and bytes in the row with them;
    /// the later ones wait for the next interval.
    pub fn tick_cut(&mut self, now_s: f64, cut: Option<Instant>) -> Interval {
        let mut snaps = self.snapshots();
        for (snap, s) in snaps.iter_mut().zip(&self.streams) {
            let Some(rec) = &s.rtt else { continue };
            let r = rec.lock().unwrap_or_else(|p| p.into_inner()).cut(cut);
            if let Some((transactions, bytes)) = r {
                snap.sample.packets = transactions;
                snap.sample.bytes = bytes;
            }
        }
        let omitting = self.acct.omitting();
        // Built on first use: an empty histogram is ~250 KB of counts, which a test
        // without round trips or one-way delays would allocate twice per interval.
        let mut merged: Option<Hist> = None;
        let mut merged_owd: Option<Hist> = None;
        let mut merged_frames: Option<Hist> = None;
        let frame_histograms = self.interval_histograms;
        let mut conn_sum = super::connect::IntervalSum::default();
        let mut profile_sum = super::profile::IntervalSum::default();
        let streams = &self.streams;
        let mut iv = self.acct.tick(now_s, &snaps, |i, row, packets| {
            let s = &streams[i];
            if let Some(rec) = &s.owd {
                let mut o = rec.lock().unwrap_or_else(|p| p.into_inner());
                merged_owd
                    .get_or_insert_with(Hist::default)
                    .merge(&o.interval);
                let ext = row.netmeter.get_or_insert_with(Default::default);
                ext.owd = o.interval.stats();
                o.interval.clear();
            }
            if let Some(rec) = &s.rtt {
                let mut r = rec.lock().unwrap_or_else(|p| p.into_inner());
                merged.get_or_insert_with(Hist::default).merge(&r.interval);
                let mut ext = StreamExt {
                    udp: None,
                    transactions: Some(packets),
                    rtt: r.interval.stats(),
                    owd: None,
                    ..StreamExt::default()
                };
                if let Some((interval, _)) = r.clock_sync_errors.as_mut() {
                    ext.iperf2.clock_sync_errors = Some(std::mem::take(interval));
                }
                row.netmeter = Some(Box::new(ext));
                r.interval.clear();
            }
            if let Some(rec) = &s.conn {
                let ext = row.netmeter.get_or_insert_with(Default::default);
                conn_sum.take(rec, omitting, ext);
            }
            if frame_histograms && let Some(rec) = &s.frames {
                // Before `take` clears the interval's frame latencies.
                let r = rec.lock().unwrap_or_else(|p| p.into_inner());
                merged_frames
                    .get_or_insert_with(Hist::default)
                    .merge(&r.interval_latency);
            }
            profile_sum.take(s, omitting, row);
        });
        if self.streams.iter().any(|s| s.rtt.is_some()) {
            let transactions = iv
                .streams
                .iter()
                .filter_map(|r| r.netmeter.as_ref().and_then(|n| n.transactions))
                .sum();
            let sum = iv.sum.netmeter.get_or_insert_with(Default::default);
            sum.transactions = Some(transactions);
            sum.rtt = merged.as_ref().and_then(Hist::stats);
        }
        conn_sum.finish(&mut iv, self.answered.as_mut());
        profile_sum.finish(&mut iv);
        if let Some(m) = merged_owd.filter(|m| !m.is_empty()) {
            iv.sum.netmeter.get_or_insert_with(Default::default).owd = m.stats();
            if self.interval_histograms {
                iv.owd_histogram_us = m.buckets_us();
            }
        }
        if let Some(m) = merged_frames.filter(|m| !m.is_empty()) {
            iv.frame_latency_histogram_us = m.buckets_us();
        }
        iv
    }

    /// Whether a tick at `now_s` would cover a meaningful span (iperf3 drops a trailing
    /// interval shorter than 10 % of the interval length).
    pub fn worth_reporting(&self, now_s: f64, interval_s: f64) -> bool {
        self.acct.worth_reporting(now_s, interval_s)
    }

    /// Final figures of every stream, measured part only: senders stopped at test time
    /// `send_end_s`, receivers counted until `recv_end_s` (after the end-of-test drain).
    pub fn finals(&self, send_end_s: f64, recv_end_s: f64) -> Vec<LocalFinal> {
        let omitting = self.acct.omitting();
        let mut locals = self.acct.finals(send_end_s, recv_end_s, &self.snapshots());
        for (l, s) in locals.iter_mut().zip(&self.streams) {
            let (units, frames) = super::profile::finals(s, omitting);
            l.owd = s
                .owd
                .as_ref()
                .map(|o| o.lock().unwrap_or_else(|p| p.into_inner()).clone());
            l.rtt = s.rtt.as_ref().map(|r| {
                let r = r.lock().unwrap_or_else(|p| p.into_inner());
                (r.total.clone(), r.lost)
            });
            l.rtt_idle = s.rtt.as_ref().and_then(|r| {
                let r = r.lock().unwrap_or_else(|p| p.into_inner());
                (!r.idle.is_empty()).then(|| r.idle.clone())
            });
            l.clock_sync_errors = s.rtt.as_ref().and_then(|r| {
                let r = r.lock().unwrap_or_else(|p| p.into_inner());
                r.clock_sync_errors.map(|(_, total)| total)
            });
            l.conn = s
                .conn
                .as_ref()
                .map(|r| super::connect::final_of(r, omitting));
            l.units = units;
            l.frames = frames;
        }
        locals
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
