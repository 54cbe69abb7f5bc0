//! Turning per-stream samples into report values: interval rows (`build/interval.rs`)
//! and the end summary (`build/end.rs`), with the extension summaries and the results
//! message here.
//!
//! Pure functions: the engine hands over cumulative counters and times, and the peer's
//! results message; these functions apply iperf3's definitions (see `docs/metrics.md`)
//! and return typed report values.

use super::TcpFigures;
use super::{BouncebackEnd, TripTimesEnd, WorkingLoadEnd};
use crate::clocksync::ClockEstimate;
use crate::latency::Hist;
use crate::latency::{OwdRecord, OwdSummary};
use crate::stats::{UdpCounts, bits_per_second};
use crate::wire::Bounceback;
use crate::wire::WorkingLoad;
use crate::wire::{Results, StreamResult};

pub mod accountant;
pub mod connect;
mod end;
pub mod figures;
mod interval;
pub mod profile;
pub use end::{EndInputs, end, end_stream, end_sums};
pub use interval::{Sample, interval, stream_interval, sum_interval};

/// TCP summary figures kept by a sending stream over the whole test.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpTotals {
    pub retransmits: u64,
    /// Of `retransmits`, those the receiver D-SACKed (not needed).
    pub spurious_retransmits: u64,
    pub max_snd_cwnd: u64,
    pub max_snd_wnd: u64,
    pub max_rtt: u64,
    pub min_rtt: u64,
    pub rtt_sum: u64,
    pub rtt_samples: u64,
    /// `tcpi_reord_seen` at the last sample (a running count in the kernel).
    pub reorder: u64,
}

impl TcpTotals {
    /// Fold in one interval's TCP_INFO sample.
    pub fn add(&mut self, f: &TcpFigures) {
        self.retransmits += f.retransmits;
        self.reorder = f.reorder;
        self.max_snd_cwnd = self.max_snd_cwnd.max(f.snd_cwnd);
        self.max_snd_wnd = self.max_snd_wnd.max(f.snd_wnd);
        self.max_rtt = self.max_rtt.max(f.rtt);
        self.min_rtt = if self.rtt_samples == 0 {
            f.rtt
        } else {
            self.min_rtt.min(f.rtt)
        };
        self.rtt_sum += f.rtt;
        self.rtt_samples += 1;
    }

    /// Mean of the sampled smoothed RTTs, microseconds.
    pub fn mean_rtt(&self) -> u64 {
        self.rtt_sum.checked_div(self.rtt_samples).unwrap_or(0)
    }
}

/// A local stream's figures at the end of the test (after the omit period).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LocalFinal {
    pub id: i64,
    pub socket: i64,
    pub sender: bool,
    /// True for streams flowing client → server.
    pub forward: bool,
    pub bytes: u64,
    pub seconds: f64,
    /// UDP datagrams sent (sender) — receivers use `udp`.
    pub packets: u64,
    /// UDP, counted during the omit period and not in the figures above: datagrams
    /// sent (sender) or the highest sequence number seen (receiver). iperf3 3.20+
    /// results carry totals with these beside them (`omitted_packets`).
    pub omitted_packets: u64,
    /// UDP receivers: datagrams lost during the omit period (`omitted_errors`).
    pub omitted_errors: u64,
    pub tcp: Option<TcpTotals>,
    pub udp: Option<UdpCounts>,
    /// UDP receivers: datagrams this host's kernel dropped for a full receive buffer.
    pub host_drops: Option<u64>,
    /// `-Z` senders using MSG_ZEROCOPY: (sends the kernel released, of which it copied).
    pub zerocopy: Option<(u64, u64)>,
    /// UDP streams: datagrams and the kernel messages that carried them.
    pub udp_io: Option<crate::stats::UdpIo>,
    /// Paced UDP senders: the furthest behind the `-b` schedule the stream fell, ms.
    pub pacing_lag_ms: Option<f64>,
    /// Paced UDP senders: sends that found the socket's buffer full for 50 ms.
    pub send_blocked: Option<u64>,
    /// Bounceback clients: the round-trip histogram and UDP requests never answered.
    pub rtt: Option<(Hist, u64)>,
    /// `--trip-times` receivers: one-way delays.
    pub owd: Option<OwdRecord>,
    /// `--connect-only` clients: the stream's connections.
    pub conn: Option<super::connect::ConnFinal>,
    /// Profiled senders (`--burst-size`, `--isochronous`): the stream's units.
    pub units: Option<crate::profile::UnitFigures>,
    /// Isochronous UDP receivers: whole frames.
    pub frames: Option<crate::profile::FrameSummary>,
    /// `--working-load` probe: round trips before the load started.
    pub rtt_idle: Option<Hist>,
    /// The stream's socket calls in the measured part (netmeter data loops).
    pub calls: Option<crate::stats::SocketCalls>,
    /// Bounceback clients with the server's timestamps: replies whose timestamps
    /// contradict their round trip.
    pub clock_sync_errors: Option<u64>,
}

/// The working-load summary on the client (`None` unless it ran one).
pub fn working_load_end(
    w: &WorkingLoad,
    locals: &[LocalFinal],
    peer: &Results,
) -> Option<WorkingLoadEnd> {
    let probe = locals.iter().find(|l| l.rtt.is_some())?;
    let (loaded, _) = probe.rtt.as_ref()?;
    let idle = probe.rtt_idle.clone().unwrap_or_default();
    let idle_s = w.idle_ms as f64 / 1000.0;
    // What the receivers counted: a sender's count includes data still queued in its
    // socket buffer and the path, which overstates a short loaded phase.
    let bulk = |client_sends: bool| -> f64 {
        let (bytes, secs) = locals
            .iter()
            .filter(|l| l.rtt.is_none() && l.sender == client_sends)
            .map(|l| {
                if client_sends {
                    let p = peer.streams.iter().find(|p| p.id == l.id);
                    p.map_or((0, 0.0), |p| (p.bytes, p.end_time - p.start_time))
                } else {
                    (l.bytes, l.seconds)
                }
            })
            .fold((0u64, 0f64), |(b, s), (pb, ps)| (b + pb, s.max(ps)));
        bits_per_second(bytes, (secs - idle_s).max(0.0))
    };
    Some(WorkingLoadEnd {
        direction: match (w.up, w.down) {
            (true, true) => "bidir",
            (false, true) => "down",
            _ => "up",
        }
        .into(),
        streams: w.streams,
        idle_seconds: idle_s,
        idle_rtt: idle.stats(),
        loaded_rtt: loaded.stats(),
        idle_rpm: idle.rpm(),
        loaded_rpm: loaded.rpm(),
        up_bits_per_second: if w.up { bulk(true) } else { 0.0 },
        down_bits_per_second: if w.down { bulk(false) } else { 0.0 },
        idle_rtt_histogram_us: idle.buckets_us(),
        loaded_rtt_histogram_us: loaded.buckets_us(),
    })
}

/// One-way delays per direction, from the local receivers and the peer's results.
pub fn trip_times_end(
    clock: &ClockEstimate,
    clock_name: &str,
    locals: &[LocalFinal],
    peer: &Results,
    client: bool,
) -> TripTimesEnd {
    // Local receivers' records, split by direction.
    let local = |forward: bool| -> Vec<OwdSummary> {
        locals
            .iter()
            .filter(|l| !l.sender && l.forward == forward)
            .filter_map(|l| l.owd.as_ref().map(|o| o.summary()))
            .collect()
    };
    // The peer measured the streams this side sends on.
    let remote = |forward: bool| -> Vec<OwdSummary> {
        locals
            .iter()
            .filter(|l| l.sender && l.forward == forward)
            .filter_map(|l| peer.streams.iter().find(|p| p.id == l.id))
            .filter_map(|p| p.netmeter_owd.clone())
            .collect()
    };
    // The server receives client → server streams; the client the others.
    let side = |forward: bool| {
        let parts = if forward != client {
            local(forward)
        } else {
            remote(forward)
        };
        OwdSummary::merge(&parts)
    };
    TripTimesEnd {
        clock: clock_name.to_string(),
        offset_ms: clock.offset_ns as f64 / 1e6,
        offset_uncertainty_ms: clock.uncertainty_ns as f64 / 1e6,
        client_to_server: side(true),
        server_to_client: side(false),
    }
}

/// The bounceback summary over a client's streams (`None` unless it ran one).
pub fn bounceback_end(b: &Bounceback, locals: &[LocalFinal]) -> Option<BouncebackEnd> {
    let mut all = Hist::default();
    let mut lost = 0;
    let mut any = false;
    for (h, l) in locals.iter().filter_map(|l| l.rtt.as_ref()) {
        all.merge(h);
        lost += l;
        any = true;
    }
    if !any {
        return None;
    }
    let seconds = locals.iter().map(|l| l.seconds).fold(0.0, f64::max);
    let transactions = all.len();
    Some(BouncebackEnd {
        request_bytes: b.request_len,
        reply_bytes: b.reply_len,
        hold_ms: b.hold_us as f64 / 1000.0,
        burst: b.burst,
        busy_poll_us: b.busy_poll_us,
        streams: locals.len() as u32,
        transactions,
        seconds,
        transactions_per_second: if seconds > 0.0 {
            transactions as f64 / seconds
        } else {
            0.0
        },
        lost,
        clock_sync_errors: locals
            .iter()
            .filter_map(|l| l.clock_sync_errors)
            .reduce(|a, b| a.saturating_add(b)),
        rtt: all.stats().unwrap_or_default(),
        rtt_histogram_us: all.buckets_us(),
    })
}

/// The results message this side sends to its peer.
pub fn local_results(
    locals: &[LocalFinal],
    cpu: (f64, f64, f64),
    has_retransmits: bool,
    congestion: Option<String>,
) -> Results {
    let any_sender = locals.iter().any(|l| l.sender);
    Results {
        cpu_util_total: cpu.0,
        cpu_util_user: cpu.1,
        cpu_util_system: cpu.2,
        sender_has_retransmits: if !any_sender {
            -1
        } else if has_retransmits {
            1
        } else {
            0
        },
        congestion_used: congestion,
        streams: locals
            .iter()
            .map(|l| {
                let (packets, errors, jitter, ooo, dup) = match (&l.udp, l.sender) {
                    (Some(u), false) => (
                        u.highest_seq as i64,
                        u.lost as i64,
                        u.jitter_s,
                        Some(u.out_of_order),
                        Some(u.duplicates),
                    ),
                    _ => (l.packets as i64, 0, 0.0, None, None),
                };
                // iperf3 (3.20+ reads the omitted_* keys) sends whole-test counts
                // with the omit period's part beside them; a 3.20+ peer that finds
                // no omitted_* keys takes all errors (receiver) or all packets
                // (sender, seen from a receiving client) as omitted and shows 0.
                StreamResult {
                    id: l.id,
                    bytes: l.bytes,
                    retransmits: l.tcp.map(|t| t.retransmits as i64).unwrap_or(-1),
                    netmeter_spurious_retransmits: l.tcp.map(|t| t.spurious_retransmits),
                    jitter,
                    errors: errors + l.omitted_errors as i64,
                    omitted_errors: Some(l.omitted_errors as i64),
                    packets: packets + l.omitted_packets as i64,
                    omitted_packets: Some(l.omitted_packets as i64),
                    start_time: 0.0,
                    end_time: l.seconds,
                    netmeter_out_of_order: ooo,
                    netmeter_duplicates: dup,
                    netmeter_host_drops: l.host_drops,
                    netmeter_udp_io: l.udp_io,
                    netmeter_ecn: l.udp.filter(|_| !l.sender).and_then(|u| u.ecn),
                    netmeter_pacing_lag_ms: l.pacing_lag_ms,
                    netmeter_send_blocked: l.send_blocked,
                    // Filled in by the engine, which measured the threads.
                    netmeter_cpu_percent: None,
                    netmeter_cpu_wait_percent: None,
                    netmeter_owd: l.owd.as_ref().map(|o| o.summary()),
                    netmeter_frames: l.frames.clone(),
                    netmeter_calls: l.calls,
                }
            })
            .collect(),
        server_output_json: None,
        server_output_text: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Protocol;

    #[test]
    fn a_direction_without_one_way_delay_samples_is_absent_in_every_rendering() {
        // `--bidir --isochronous 30:600K,0 --trip-times -u`: the client's receiver and
        // the peer's both recorded nothing; the report printed 1.797e308 as the minimum.
        let peer = Results {
            streams: vec![StreamResult {
                id: 1,
                netmeter_owd: Some(OwdRecord::default().summary()),
                ..StreamResult::default()
            }],
            ..Results::default()
        };
        let locals = [
            LocalFinal {
                id: 1,
                sender: true,
                forward: true,
                ..LocalFinal::default()
            },
            LocalFinal {
                id: 2,
                forward: false,
                owd: Some(OwdRecord::default()),
                ..LocalFinal::default()
            },
        ];
        let t = trip_times_end(
            &ClockEstimate::default(),
            "CLOCK_REALTIME",
            &locals,
            &peer,
            true,
        );
        assert_eq!((&t.client_to_server, &t.server_to_client), (&None, &None));
        let json = serde_json::to_string(&t).unwrap();
        assert!(!json.contains("e308"), "{json}");
        let text = crate::report::text::trip_times_summary(&t, false);
        assert_eq!(
            text,
            "One-way delay: no samples; server clock - client clock estimated +0.000 ms +/- 0.000 ms\n"
        );
    }

    #[test]
    fn tcp_end_merges_peer_receiver() {
        let l = LocalFinal {
            id: 1,
            socket: 5,
            sender: true,
            forward: true,
            bytes: 1000,
            seconds: 2.0,
            tcp: Some(TcpTotals {
                retransmits: 3,
                ..TcpTotals::default()
            }),
            ..LocalFinal::default()
        };
        let peer = StreamResult {
            id: 1,
            bytes: 900,
            end_time: 2.0,
            retransmits: -1,
            ..StreamResult::default()
        };
        let e = end_stream(Protocol::Tcp, &l, Some(&peer));
        assert_eq!(e.sender.as_ref().unwrap().bytes, 1000);
        assert_eq!(e.sender.as_ref().unwrap().retransmits, Some(3));
        assert_eq!(e.receiver.as_ref().unwrap().bytes, 900);
        assert_eq!(e.receiver.as_ref().unwrap().bits_per_second, 3600.0);
        let (_, sent, recv) = end_sums(Protocol::Tcp, &[&e], true);
        assert_eq!(sent.unwrap().retransmits, Some(3));
        assert_eq!(recv.unwrap().bytes, 900);
    }

    #[test]
    fn udp_end_uses_sender_packets_and_receiver_loss() {
        let l = LocalFinal {
            id: 1,
            socket: 5,
            sender: true,
            forward: true,
            bytes: 100 * 1000,
            seconds: 1.0,
            packets: 100,
            ..LocalFinal::default()
        };
        let peer = StreamResult {
            id: 1,
            bytes: 98 * 1000,
            packets: 99,
            errors: 2,
            jitter: 0.0005,
            end_time: 1.0,
            ..StreamResult::default()
        };
        let e = end_stream(Protocol::Udp, &l, Some(&peer));
        let u = e.udp.unwrap();
        assert_eq!((u.packets, u.lost_packets, u.lost_percent), (100, 2, 2.0));
        assert!((u.jitter_ms - 0.5).abs() < 1e-12);
    }

    #[test]
    fn udp_sender_without_peer_results_reports_nothing_received() {
        // Interrupted: the server's results never came.
        let l = LocalFinal {
            id: 1,
            sender: true,
            forward: true,
            bytes: 500_000,
            seconds: 2.0,
            packets: 500,
            ..LocalFinal::default()
        };
        let e = end_stream(Protocol::Udp, &l, None);
        let (_, sent, recv) = end_sums(Protocol::Udp, &[&e], true);
        assert_eq!(sent.unwrap().bytes, 500_000);
        let recv = recv.unwrap();
        assert_eq!((recv.bytes, recv.udp_recv.unwrap().packets), (0, 0));
    }

    #[test]
    fn udp_sum_received_uses_receiver_time() {
        // The sender stopped at 4 s; the receiver counted until 4.1 s (queued data).
        let l = LocalFinal {
            id: 1,
            sender: true,
            forward: true,
            bytes: 500_000,
            seconds: 4.0,
            packets: 500,
            ..LocalFinal::default()
        };
        let peer = StreamResult {
            id: 1,
            bytes: 410_000,
            packets: 500,
            end_time: 4.1,
            ..StreamResult::default()
        };
        let e = end_stream(Protocol::Udp, &l, Some(&peer));
        let (_, sent, recv) = end_sums(Protocol::Udp, &[&e], true);
        let (sent, recv) = (sent.unwrap(), recv.unwrap());
        assert_eq!((sent.seconds, sent.bits_per_second), (4.0, 1_000_000.0));
        assert_eq!(recv.seconds, 4.1);
        assert!((recv.bits_per_second - 800_000.0).abs() < 1e-6);
    }

    #[test]
    fn udp_interval_loss_from_deltas() {
        let prev = Sample {
            bytes: 0,
            packets: 0,
            udp: Some(UdpCounts::default()),
            calls: None,
        };
        let now = Sample {
            bytes: 4800,
            packets: 0,
            udp: Some(UdpCounts {
                highest_seq: 50,
                received: 49,
                lost: 1,
                ..UdpCounts::default()
            }),
            calls: None,
        };
        let r = stream_interval(Protocol::Udp, 5, false, 0.0, 1.0, &prev, &now, None, false);
        let f = r.udp_recv.unwrap();
        assert_eq!((f.lost_packets, f.packets, f.lost_percent), (1, 50, 2.0));
        assert_eq!(r.bits_per_second, 38400.0);
    }

    #[test]
    fn results_message_roles() {
        let recv = LocalFinal {
            id: 1,
            udp: Some(UdpCounts {
                highest_seq: 10,
                lost: 1,
                ..UdpCounts::default()
            }),
            ..LocalFinal::default()
        };
        let r = local_results(&[recv], (1.0, 0.5, 0.5), false, None);
        assert_eq!(r.sender_has_retransmits, -1);
        assert_eq!((r.streams[0].packets, r.streams[0].errors), (10, 1));
    }

    /// iperf3 3.20+ reads `omitted_packets`/`omitted_errors` beside whole-test counts;
    /// without them it shows 0 lost (receiving server) or 0 packets (sending server).
    #[test]
    fn results_carry_whole_test_counts_and_the_omitted_share() {
        let recv = LocalFinal {
            id: 1,
            udp: Some(UdpCounts {
                highest_seq: 10,
                lost: 1,
                ..UdpCounts::default()
            }),
            omitted_packets: 5,
            omitted_errors: 2,
            ..LocalFinal::default()
        };
        let send = LocalFinal {
            id: 3,
            sender: true,
            packets: 20,
            omitted_packets: 7,
            ..LocalFinal::default()
        };
        let r = local_results(&[recv, send], (1.0, 0.5, 0.5), false, None);
        let s = &r.streams[0];
        assert_eq!((s.packets, s.omitted_packets), (15, Some(5)));
        assert_eq!((s.errors, s.omitted_errors), (3, Some(2)));
        assert_eq!((s.measured_packets(0), s.measured_errors()), (10, 1));
        let s = &r.streams[1];
        assert_eq!((s.packets, s.omitted_packets), (27, Some(7)));
        assert_eq!((s.errors, s.omitted_errors), (0, Some(0)));
        // No -O: the keys are still there, as 0 (3.20+ needs both or neither).
        let plain = local_results(&[LocalFinal::default()], (0.0, 0.0, 0.0), false, None);
        assert_eq!(
            (
                plain.streams[0].omitted_packets,
                plain.streams[0].omitted_errors
            ),
            (Some(0), Some(0))
        );
        // A pre-3.20 peer's whole-test count less this side's own omit-period count.
        let old = StreamResult {
            packets: 27,
            ..StreamResult::default()
        };
        assert_eq!(old.measured_packets(7), 20);
    }

    /// Spurious retransmits travel from a sending netmeter to its peer in the results,
    /// land in the receiving side's end summary, and are summed with the retransmits;
    /// an iperf3 sender's results (no such key) leave them unknown, not 0.
    #[test]
    fn spurious_retransmits_reach_the_peer_and_the_sums() {
        let tcp = TcpTotals {
            retransmits: 12,
            spurious_retransmits: 9,
            ..TcpTotals::default()
        };
        let sender = LocalFinal {
            id: 1,
            sender: true,
            tcp: Some(tcp),
            ..LocalFinal::default()
        };
        let results = local_results(std::slice::from_ref(&sender), (1.0, 0.5, 0.5), true, None);
        let wire = serde_json::to_string(&results).unwrap();
        let back: Results = serde_json::from_str(&wire).unwrap();
        assert_eq!(back.streams[0].retransmits, 12);
        assert_eq!(back.streams[0].netmeter_spurious_retransmits, Some(9));

        let receiver = LocalFinal {
            id: 1,
            ..LocalFinal::default()
        };
        let e = end_stream(Protocol::Tcp, &receiver, Some(&back.streams[0]));
        let s = e.sender.as_ref().unwrap();
        assert_eq!(s.retransmits, Some(12));
        assert_eq!(s.netmeter.map(|n| n.spurious_retransmits), Some(9));
        let local = end_stream(Protocol::Tcp, &sender, None);
        let (_, sent, received) = end_sums(Protocol::Tcp, &[&e, &local], false);
        let sent = sent.unwrap();
        assert_eq!(sent.retransmits, Some(24));
        assert_eq!(sent.netmeter.and_then(|n| n.spurious_retransmits), Some(18));
        assert_eq!(received.unwrap().netmeter, None);

        let mut iperf3 = back.streams[0].clone();
        iperf3.netmeter_spurious_retransmits = None;
        let e = end_stream(Protocol::Tcp, &receiver, Some(&iperf3));
        assert_eq!(e.sender.unwrap().netmeter, None);
    }
}
