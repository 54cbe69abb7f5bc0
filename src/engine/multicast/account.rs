//! A multicast receiver's accounting, pure: datagrams and `now` in, interval rows and
//! end summaries out. A multicast receiver has no control connection from its senders
//! (as with iperf 2), so every sender it hears (source address and port) is a stream of
//! its own: the first datagram with a positive sequence number starts it, its FIN (a
//! negative sequence number, iperf 2's end; counted as the last datagram, as iperf 2's
//! receiver counts it) or [`Receiver::idle_s`] without a datagram ends it.
//!
//! Datagrams carry iperf 2's `struct UDP_datagram` (`wire::iperf2::DatagramId`), which
//! netmeter's multicast sender writes too. Bounded: at most [`MAX_SENDERS`] senders at
//! once per group (more are dropped and counted), at most [`MAX_ROWS`] interval rows
//! kept per sender for `-J`.

use crate::stats::UdpRecv;
use crate::wire::iperf2::DatagramId;
use serde::Serialize;
use std::collections::HashMap;
use std::net::SocketAddr;

/// Senders accounted at once, per group.
pub const MAX_SENDERS: usize = 256;
/// Interval rows kept per sender for the JSON summary (an hour of 1 s rows); the text
/// lines are printed as they come, whatever the count.
pub const MAX_ROWS: usize = 3600;

/// One interval's (or the whole stream's) figures for one sender.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Row {
    /// The sender's stream number at this receiver (from 1, in order heard).
    pub id: u32,
    /// Seconds since the sender's first datagram arrived.
    pub start_s: f64,
    pub end_s: f64,
    pub bytes: u64,
    /// Datagrams received (distinct).
    pub packets: u64,
    pub lost: u64,
    pub out_of_order: u64,
    /// RFC 3550 jitter at the row's end, seconds.
    pub jitter_s: f64,
}

impl Row {
    /// Datagrams the sender sent in the row's span, as the receiver infers them.
    pub fn total(&self) -> u64 {
        self.packets + self.lost
    }

    pub fn bits_per_second(&self) -> f64 {
        let d = self.end_s - self.start_s;
        if d > 0.0 {
            self.bytes as f64 * 8.0 / d
        } else {
            0.0
        }
    }
}

/// One-way delay (receiver wall clock minus the sender's timestamp): meaningful when
/// the two clocks agree (the same host, or synchronised ones).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Owd {
    pub min_s: f64,
    pub mean_s: f64,
    pub max_s: f64,
    pub count: u64,
}

impl Owd {
    fn add(&mut self, t: f64) {
        self.count += 1;
        if self.count == 1 {
            (self.min_s, self.max_s) = (t, t);
        }
        self.min_s = self.min_s.min(t);
        self.max_s = self.max_s.max(t);
        self.mean_s += (t - self.mean_s) / self.count as f64;
    }
}

/// Why a sender's stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// Its FIN arrived.
    Fin,
    /// No datagram for the idle time.
    Idle,
    /// The receiver stopped (a signal, or its `-t`).
    Stopped,
}

/// A sender's whole stream, when it ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub source: SocketAddr,
    pub reason: EndReason,
    pub sum: Row,
    pub owd: Owd,
    pub intervals: Vec<Row>,
}

/// What the receiver has to say.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A sender was heard for the first time.
    Started {
        id: u32,
        source: SocketAddr,
    },
    Interval {
        source: SocketAddr,
        row: Row,
    },
    Ended(Summary),
}

#[derive(Debug, Clone, Copy, Default)]
struct Mark {
    at_s: f64,
    bytes: u64,
    packets: u64,
    lost: u64,
    out_of_order: u64,
}

struct Heard {
    id: u32,
    first_s: f64,
    last_s: f64,
    seq64: bool,
    recv: UdpRecv,
    bytes: u64,
    owd: Owd,
    mark: Mark,
    rows: Vec<Row>,
}

impl Heard {
    fn now_mark(&self, at_s: f64) -> Mark {
        let c = self.recv.counts();
        Mark {
            at_s,
            bytes: self.bytes,
            packets: c.received,
            lost: c.lost,
            out_of_order: c.out_of_order,
        }
    }

    fn row_since(&self, from: Mark, to: Mark) -> Row {
        Row {
            id: self.id,
            start_s: from.at_s,
            end_s: to.at_s,
            bytes: to.bytes - from.bytes,
            packets: to.packets - from.packets,
            lost: to.lost.saturating_sub(from.lost),
            out_of_order: to.out_of_order - from.out_of_order,
            jitter_s: self.recv.counts().jitter_s,
        }
    }
}

/// One group's receiver: every sender it hears.
pub struct Receiver {
    /// Interval length, seconds (0: no interval rows).
    pub interval_s: f64,
    /// A sender silent this long has ended.
    pub idle_s: f64,
    senders: HashMap<SocketAddr, Heard>,
    next_id: u32,
    /// Datagrams no stream took (too short, a stray FIN, over [`MAX_SENDERS`]).
    pub ignored: u64,
    /// Senders heard so far.
    pub heard: u32,
}

impl Receiver {
    pub fn new(interval_s: f64, idle_s: f64) -> Receiver {
        Receiver {
            interval_s,
            idle_s,
            senders: HashMap::new(),
            next_id: 1,
            ignored: 0,
            heard: 0,
        }
    }

    /// Senders being accounted now.
    pub fn active(&self) -> usize {
        self.senders.len()
    }

    /// Datagram `d` from `from`, at monotonic `now_s` and wall-clock `wall_s`.
    pub fn on_datagram(
        &mut self,
        from: SocketAddr,
        d: &[u8],
        now_s: f64,
        wall_s: f64,
    ) -> Vec<Event> {
        let mut out = self.on_tick(now_s);
        let Some(first) = DatagramId::parse(d, DatagramId::flags_seq64(d)) else {
            self.ignored += 1;
            return out;
        };
        if !self.senders.contains_key(&from) {
            if first.seq <= 0 || self.senders.len() >= MAX_SENDERS {
                // A FIN repeated after its stream ended, or one too many senders.
                self.ignored += 1;
                return out;
            }
            let id = self.next_id;
            self.next_id += 1;
            self.heard += 1;
            self.senders.insert(
                from,
                Heard {
                    id,
                    first_s: now_s,
                    last_s: now_s,
                    seq64: DatagramId::flags_seq64(d),
                    recv: UdpRecv::default(),
                    bytes: 0,
                    owd: Owd::default(),
                    mark: Mark::default(),
                    rows: Vec::new(),
                },
            );
            out.push(Event::Started { id, source: from });
        }
        let Some(h) = self.senders.get_mut(&from) else {
            return out;
        };
        let Some(id) = DatagramId::parse(d, h.seq64) else {
            return out;
        };
        let transit = wall_s - (f64::from(id.sec) + f64::from(id.usec) / 1e6);
        h.recv.on_datagram(id.seq.unsigned_abs(), transit);
        h.bytes += d.len() as u64;
        h.owd.add(transit);
        h.last_s = now_s;
        if id.seq < 0 {
            out.extend(self.end(from, now_s, EndReason::Fin));
        }
        out
    }

    /// Interval rows due and idle senders ended, at `now_s`.
    pub fn on_tick(&mut self, now_s: f64) -> Vec<Event> {
        let mut out = Vec::new();
        let idle: Vec<SocketAddr> = self
            .senders
            .iter()
            .filter(|(_, h)| now_s - h.last_s >= self.idle_s)
            .map(|(a, _)| *a)
            .collect();
        for a in idle {
            let at = self.senders.get(&a).map_or(now_s, |h| h.last_s);
            out.extend(self.end(a, at, EndReason::Idle));
        }
        if self.interval_s > 0.0 {
            for (a, h) in &mut self.senders {
                while now_s - h.first_s >= h.mark.at_s + self.interval_s {
                    let to = h.now_mark(h.mark.at_s + self.interval_s);
                    let row = h.row_since(h.mark, to);
                    h.mark = to;
                    if h.rows.len() < MAX_ROWS {
                        h.rows.push(row);
                    }
                    out.push(Event::Interval { source: *a, row });
                }
            }
        }
        out
    }

    /// The earliest monotonic time something is due (an interval, an idle end).
    pub fn next_due_s(&self) -> Option<f64> {
        self.senders
            .values()
            .flat_map(|h| {
                let iv =
                    (self.interval_s > 0.0).then_some(h.first_s + h.mark.at_s + self.interval_s);
                [Some(h.last_s + self.idle_s), iv]
            })
            .flatten()
            .reduce(f64::min)
    }

    /// The receiver stops: every sender's stream ends here.
    pub fn stop(&mut self, now_s: f64) -> Vec<Event> {
        let mut out = self.on_tick(now_s);
        let all: Vec<SocketAddr> = self.senders.keys().copied().collect();
        for a in all {
            out.extend(self.end(a, now_s, EndReason::Stopped));
        }
        out
    }

    fn end(&mut self, from: SocketAddr, now_s: f64, reason: EndReason) -> Vec<Event> {
        let Some(mut h) = self.senders.remove(&from) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let end = h.now_mark((now_s - h.first_s).max(h.mark.at_s));
        if end.packets > h.mark.packets || end.at_s > h.mark.at_s {
            let row = h.row_since(h.mark, end);
            if h.rows.len() < MAX_ROWS {
                h.rows.push(row);
            }
            if self.interval_s > 0.0 {
                out.push(Event::Interval { source: from, row });
            }
        }
        let sum = h.row_since(Mark::default(), end);
        out.push(Event::Ended(Summary {
            source: from,
            reason,
            sum,
            owd: h.owd,
            intervals: h.rows,
        }));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::iperf2::write_datagram_id;

    fn dgram(seq: i64, wall_s: f64) -> Vec<u8> {
        let mut d = vec![0u8; 100];
        write_datagram_id(&mut d, seq, wall_s as u32, (wall_s.fract() * 1e6) as u32);
        d
    }

    fn ended(ev: &[Event]) -> Vec<Summary> {
        ev.iter()
            .filter_map(|e| match e {
                Event::Ended(s) => Some(s.clone()),
                _ => None,
            })
            .collect()
    }

    const A: &str = "10.0.0.1:4000";
    const B: &str = "10.0.0.2:4000";

    #[test]
    fn each_sender_is_its_own_stream_with_its_own_loss() {
        let mut r = Receiver::new(1.0, 10.0);
        let (a, b) = (A.parse().unwrap(), B.parse().unwrap());
        let mut ev = Vec::new();
        for s in 1..=10i64 {
            let t = s as f64 * 0.01;
            if s != 4 && s != 7 {
                ev.extend(r.on_datagram(a, &dgram(s, 1000.0 + t), t, 1000.0 + t + 0.002));
            }
            ev.extend(r.on_datagram(b, &dgram(s, 1000.0 + t), t, 1000.0 + t + 0.002));
        }
        ev.extend(r.on_datagram(a, &dgram(-11, 1000.2), 0.2, 1000.202));
        ev.extend(r.on_datagram(b, &dgram(-11, 1000.2), 0.2, 1000.202));
        let s = ended(&ev);
        assert_eq!(s.len(), 2);
        let sa = s.iter().find(|x| x.source == a).unwrap();
        let sb = s.iter().find(|x| x.source == b).unwrap();
        assert_eq!((sa.sum.lost, sa.sum.packets, sa.sum.total()), (2, 9, 11));
        assert_eq!((sb.sum.lost, sb.sum.packets), (0, 11));
        assert_eq!(sa.reason, EndReason::Fin);
        assert!((sa.owd.mean_s - 0.002).abs() < 1e-4, "{:?}", sa.owd);
        assert_eq!(sa.sum.bytes, 900);
        assert_eq!(r.active(), 0);
        // The FIN repeated after the end starts nothing.
        assert!(
            r.on_datagram(a, &dgram(-11, 1000.2), 0.3, 1000.3)
                .is_empty()
        );
        assert_eq!(r.ignored, 1);
    }

    #[test]
    fn intervals_split_the_stream_and_add_up() {
        let mut r = Receiver::new(1.0, 10.0);
        let a = A.parse().unwrap();
        let mut ev = Vec::new();
        for s in 1..=30i64 {
            if s == 15 {
                continue;
            }
            let t = 5.0 + s as f64 * 0.1;
            ev.extend(r.on_datagram(a, &dgram(s, t), t, t));
        }
        ev.extend(r.on_datagram(a, &dgram(-31, 8.2), 8.2, 8.2));
        let rows: Vec<Row> = ev
            .iter()
            .filter_map(|e| match e {
                Event::Interval { row, .. } => Some(*row),
                _ => None,
            })
            .collect();
        assert_eq!(rows.len(), 4, "{rows:?}");
        assert_eq!((rows[0].start_s, rows[0].end_s), (0.0, 1.0));
        assert_eq!(rows.iter().map(|r| r.lost).sum::<u64>(), 1);
        assert_eq!(rows.iter().map(|r| r.packets).sum::<u64>(), 30);
        let s = &ended(&ev)[0];
        assert_eq!(s.intervals, rows);
        assert_eq!(s.sum.packets, 30);
    }

    #[test]
    fn a_silent_sender_ends_on_idle_and_stop_ends_the_rest() {
        let mut r = Receiver::new(0.0, 2.0);
        let (a, b) = (A.parse().unwrap(), B.parse().unwrap());
        r.on_datagram(a, &dgram(1, 1.0), 1.0, 1.0);
        r.on_datagram(b, &dgram(1, 2.5), 2.5, 2.5);
        assert_eq!(r.next_due_s(), Some(3.0));
        let s = ended(&r.on_tick(3.0));
        assert_eq!((s.len(), s[0].source, s[0].reason), (1, a, EndReason::Idle));
        let s = ended(&r.stop(3.5));
        assert_eq!(
            (s.len(), s[0].source, s[0].reason),
            (1, b, EndReason::Stopped)
        );
        assert_eq!(r.heard, 2);
    }

    #[test]
    fn junk_and_strays_start_nothing_and_senders_are_capped() {
        let mut r = Receiver::new(1.0, 10.0);
        assert!(
            r.on_datagram(A.parse().unwrap(), &[0u8; 8], 0.0, 0.0)
                .is_empty()
        );
        assert!(
            r.on_datagram(A.parse().unwrap(), &dgram(-5, 0.0), 0.0, 0.0)
                .is_empty()
        );
        for p in 0..MAX_SENDERS as u16 + 3 {
            r.on_datagram(
                SocketAddr::new("10.0.0.9".parse().unwrap(), 1000 + p),
                &dgram(1, 0.0),
                0.0,
                0.0,
            );
        }
        assert_eq!(r.active(), MAX_SENDERS);
        assert_eq!(r.ignored, 5);
    }

    proptest::proptest! {
        /// Whatever arrives (any bytes, from a few senders, at rising times), nothing
        /// panics, and each ended sender's interval rows add up to its summary.
        #[test]
        fn rows_add_up_to_the_summary(
            arrivals in proptest::collection::vec(
                (0u16..3, proptest::collection::vec(proptest::num::u8::ANY, 0..40), 0u32..400),
                0..300,
            ),
            seqs in proptest::collection::vec(-3i64..200, 0..300),
        ) {
            let mut r = Receiver::new(0.5, 3.0);
            let mut now = 0.0;
            let mut ev = Vec::new();
            for (k, (port, mut d, dt_ms)) in arrivals.into_iter().enumerate() {
                now += f64::from(dt_ms) / 1000.0;
                // Half the time a well-formed datagram with one of the sequence numbers.
                if let Some(&seq) = seqs.get(k).filter(|_| k % 2 == 0) {
                    d.resize(d.len().max(20), 0);
                    write_datagram_id(&mut d, seq, 100, 0);
                }
                let from = SocketAddr::new("10.0.0.1".parse().unwrap(), 4000 + port);
                ev.extend(r.on_datagram(from, &d, now, now + 100.0));
            }
            ev.extend(r.stop(now + 1.0));
            for s in ended(&ev) {
                let sum = |f: fn(&Row) -> u64| s.intervals.iter().map(f).sum::<u64>();
                proptest::prop_assert_eq!(sum(|r| r.bytes), s.sum.bytes);
                proptest::prop_assert_eq!(sum(|r| r.packets), s.sum.packets);
                proptest::prop_assert_eq!(sum(|r| r.out_of_order), s.sum.out_of_order);
                proptest::prop_assert!(sum(|r| r.lost) >= s.sum.lost);
            }
            proptest::prop_assert_eq!(r.active(), 0);
        }
    }
}
