//! A seeded network simulator on virtual time, so whole tests run in milliseconds and
//! give the same answer every run (issue 21; smoltcp's seeded `PacketQueue` is the model).
//!
//! A [`Sim`] holds hosts and one-way links between them. Each link ([`LinkConfig`]) has a
//! rate (a token bucket with a tail-drop queue limit in bytes), a base delay with seeded
//! jitter, Bernoulli or Gilbert-Elliott loss, reordering, duplication and ECN marking;
//! each host has a clock offset and drift, so its wall clock reads true time × (1 + drift)
//! + offset. Every link draws from its own random source derived from the run's seed.
//!
//! Pure: no sockets, threads or host clock. Time is a `Duration` since the start of the
//! run and moves only when the caller moves it ([`Sim::advance_to`]); the caller (a test
//! driving sans-IO machines) sends at [`Sim::now`], asks [`Sim::next_event`] when the
//! next packet arrives, and takes arrivals with [`Sim::pop_delivery`]. Arrivals at the
//! same instant come out in the order they were scheduled, so ties are deterministic.
//!
//! The simulator keeps its own record of what it did to every packet ([`Sim::record`]):
//! sent when, lost or dropped by the queue, delivered when, how often, marked or not.
//! That record is the truth tests judge the measurement against.

mod link;
mod rng;

pub use link::{Delivery, Ecn, EcnMark, Fate, Jitter, LinkConfig, Loss};
pub use rng::Rng;

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use link::Link;

/// A host in the simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct HostId(pub usize);

/// A one-way link in the simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct LinkId(pub usize);

/// A host's clock: its wall clock reads `true time × (1 + drift_ppb / 10⁹) + offset_ns`,
/// where true time is the run's wall clock ([`Sim::with_epoch`]) plus the virtual time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HostConfig {
    /// How far the host's wall clock is ahead of true time at the start, ns.
    pub offset_ns: i64,
    /// How fast the host's clock runs against true time, parts per billion.
    pub drift_ppb: i64,
}

/// What the simulator did to one packet, in the order packets were sent.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PacketRecord {
    /// The packet's number: its index in [`Sim::record`].
    pub id: u64,
    /// The link it was sent on.
    pub link: LinkId,
    /// Its size, bytes.
    pub bytes: u64,
    /// When it was sent, virtual time.
    pub sent: Duration,
    /// What the link did with it.
    pub fate: Fate,
}

/// A packet arriving at a host.
#[derive(Debug, Clone, PartialEq)]
pub struct Arrival {
    /// When it arrived, virtual time.
    pub at: Duration,
    /// The packet's number in [`Sim::record`].
    pub id: u64,
    /// The link it came over.
    pub link: LinkId,
    /// The host it arrived at.
    pub to: HostId,
    /// Its bytes, as sent.
    pub payload: Vec<u8>,
    /// Its ECN field on arrival.
    pub ecn: Ecn,
    /// The extra copy of a duplicated packet.
    pub duplicate: bool,
}

#[derive(Debug)]
struct Event {
    at_ns: u64,
    seq: u64,
    arrival: Arrival,
}

impl PartialEq for Event {
    fn eq(&self, o: &Event) -> bool {
        (self.at_ns, self.seq) == (o.at_ns, o.seq)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Event) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    // Reversed: `BinaryHeap` is a max-heap and the earliest event must come out first.
    fn cmp(&self, o: &Event) -> Ordering {
        (o.at_ns, o.seq).cmp(&(self.at_ns, self.seq))
    }
}

#[derive(Debug)]
struct LinkSlot {
    from: HostId,
    to: HostId,
    link: Link,
}

/// The simulation: hosts, links, the event queue and the record.
#[derive(Debug)]
pub struct Sim {
    seed: u64,
    now_ns: u64,
    epoch: SystemTime,
    hosts: Vec<HostConfig>,
    links: Vec<LinkSlot>,
    events: BinaryHeap<Event>,
    seq: u64,
    record: Vec<PacketRecord>,
}

/// The run's true wall clock at virtual time zero unless told otherwise
/// (2026-01-01T00:00:00Z): fixed, so reports carrying timestamps are reproducible.
pub const DEFAULT_EPOCH_S: u64 = 1_767_225_600;

impl Sim {
    /// An empty simulation seeded with `seed`, at virtual time zero.
    pub fn new(seed: u64) -> Sim {
        Sim::with_epoch(seed, UNIX_EPOCH + Duration::from_secs(DEFAULT_EPOCH_S))
    }

    /// As [`Sim::new`], with true wall time `epoch` at virtual time zero.
    pub fn with_epoch(seed: u64, epoch: SystemTime) -> Sim {
        Sim {
            seed,
            now_ns: 0,
            epoch,
            hosts: Vec::new(),
            links: Vec::new(),
            events: BinaryHeap::new(),
            seq: 0,
            record: Vec::new(),
        }
    }

    /// Add a host.
    pub fn add_host(&mut self, cfg: HostConfig) -> HostId {
        self.hosts.push(cfg);
        HostId(self.hosts.len() - 1)
    }

    /// Add a one-way link from `from` to `to`; its random source is the `n`th derived
    /// from the seed, for the `n`th link added.
    pub fn add_link(&mut self, from: HostId, to: HostId, cfg: LinkConfig) -> LinkId {
        let rng = Rng::derive(self.seed, self.links.len() as u64);
        self.links.push(LinkSlot {
            from,
            to,
            link: Link::new(cfg, rng),
        });
        LinkId(self.links.len() - 1)
    }

    /// The host a link starts at and the host it ends at.
    pub fn ends(&self, link: LinkId) -> (HostId, HostId) {
        let l = &self.links[link.0];
        (l.from, l.to)
    }

    /// Virtual time since the start.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.now_ns)
    }

    /// Move virtual time to `t` (no change if `t` is not later than now). Arrivals due by
    /// then wait in [`Sim::pop_delivery`].
    pub fn advance_to(&mut self, t: Duration) {
        self.now_ns = self.now_ns.max(t.as_nanos() as u64);
    }

    /// Send `payload` over `link` now; returns the packet's number in the record.
    pub fn send(&mut self, link: LinkId, payload: Vec<u8>, ecn: Ecn) -> u64 {
        let id = self.record.len() as u64;
        let bytes = payload.len() as u64;
        let slot = &mut self.links[link.0];
        let fate = slot.link.offer(self.now_ns, bytes, ecn);
        let to = slot.to;
        if let Fate::Delivered(copies) = &fate {
            for c in copies {
                self.seq += 1;
                self.events.push(Event {
                    at_ns: c.at.as_nanos() as u64,
                    seq: self.seq,
                    arrival: Arrival {
                        at: c.at,
                        id,
                        link,
                        to,
                        payload: payload.clone(),
                        ecn: c.ecn,
                        duplicate: c.duplicate,
                    },
                });
            }
        }
        self.record.push(PacketRecord {
            id,
            link,
            bytes,
            sent: self.now(),
            fate,
        });
        id
    }

    /// When the next packet arrives anywhere, if one is in flight.
    pub fn next_event(&self) -> Option<Duration> {
        self.events.peek().map(|e| Duration::from_nanos(e.at_ns))
    }

    /// The next packet that has arrived by now, earliest first (ties in sending order).
    pub fn pop_delivery(&mut self) -> Option<Arrival> {
        if self.events.peek()?.at_ns > self.now_ns {
            return None;
        }
        self.events.pop().map(|e| e.arrival)
    }

    /// What the simulator did to every packet so far, in sending order.
    pub fn record(&self) -> &[PacketRecord] {
        &self.record
    }

    /// Host `h`'s wall clock at virtual time `t`, ns since the Unix epoch.
    pub fn wall_ns(&self, h: HostId, t: Duration) -> i64 {
        let c = self.hosts[h.0];
        let epoch = self
            .epoch
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        let t = t.as_nanos() as i128;
        let drift = t * c.drift_ppb as i128 / 1_000_000_000;
        (epoch + t + drift + c.offset_ns as i128) as i64
    }

    /// Host `h`'s wall clock at virtual time `t`.
    pub fn wall(&self, h: HostId, t: Duration) -> SystemTime {
        let ns = self.wall_ns(h, t);
        if ns >= 0 {
            UNIX_EPOCH + Duration::from_nanos(ns as u64)
        } else {
            UNIX_EPOCH
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn run(seed: u64, cfg: LinkConfig, n: u64) -> (Vec<PacketRecord>, Vec<(Duration, u64, bool)>) {
        let mut sim = Sim::new(seed);
        let a = sim.add_host(HostConfig::default());
        let b = sim.add_host(HostConfig::default());
        let l = sim.add_link(a, b, cfg);
        let mut got = Vec::new();
        for i in 0..n {
            sim.advance_to(Duration::from_micros(100 * i));
            while let Some(d) = sim.pop_delivery() {
                got.push((d.at, d.id, d.duplicate));
            }
            sim.send(l, i.to_be_bytes().to_vec(), Ecn::Ect);
        }
        while let Some(t) = sim.next_event() {
            sim.advance_to(t);
            while let Some(d) = sim.pop_delivery() {
                assert_eq!(d.payload, d.id.to_be_bytes());
                got.push((d.at, d.id, d.duplicate));
            }
        }
        (sim.record().to_vec(), got)
    }

    fn rough() -> LinkConfig {
        LinkConfig {
            // 8-byte packets every 100 µs are 640 kbit/s: the queue fills.
            rate_bps: 500_000,
            queue_limit_bytes: 64,
            delay: ms(5),
            jitter: Jitter::Normal { sd: ms(1) },
            loss: Loss::Bernoulli { p: 0.05 },
            reorder_p: 0.05,
            reorder_delay: ms(3),
            duplicate_p: 0.05,
            ecn: EcnMark::Prob { p: 0.1 },
            ..LinkConfig::default()
        }
    }

    #[test]
    fn one_seed_gives_one_run() {
        assert_eq!(run(11, rough(), 2000), run(11, rough(), 2000));
        assert_ne!(run(11, rough(), 2000).0, run(12, rough(), 2000).0);
    }

    #[test]
    fn arrivals_match_the_record_in_time_order() {
        let (record, got) = run(3, rough(), 3000);
        let mut want: Vec<(Duration, u64, bool)> = record
            .iter()
            .flat_map(|r| match &r.fate {
                Fate::Delivered(c) => c.iter().map(|c| (c.at, r.id, c.duplicate)).collect(),
                _ => Vec::new(),
            })
            .collect();
        want.sort_by_key(|w| w.0);
        assert_eq!(got.len(), want.len());
        assert!(got.windows(2).all(|w| w[0].0 <= w[1].0));
        let mut sorted = got.clone();
        sorted.sort();
        want.sort();
        assert_eq!(sorted, want);
        let lost = record.iter().filter(|r| r.fate == Fate::Lost).count();
        let dropped = record
            .iter()
            .filter(|r| r.fate == Fate::QueueDropped)
            .count();
        assert!(lost > 100 && lost < 200, "{lost}");
        assert!(dropped > 0);
    }

    #[test]
    fn ties_come_out_in_sending_order() {
        let mut sim = Sim::new(0);
        let a = sim.add_host(HostConfig::default());
        let b = sim.add_host(HostConfig::default());
        let l = sim.add_link(
            a,
            b,
            LinkConfig {
                delay: ms(1),
                ..LinkConfig::default()
            },
        );
        for i in 0..50u8 {
            sim.send(l, vec![i], Ecn::NotEct);
        }
        assert_eq!(sim.next_event(), Some(ms(1)));
        assert_eq!(sim.pop_delivery(), None);
        sim.advance_to(ms(1));
        let order: Vec<u8> = std::iter::from_fn(|| sim.pop_delivery())
            .map(|d| d.payload[0])
            .collect();
        assert_eq!(order, (0..50).collect::<Vec<u8>>());
    }

    #[test]
    fn host_clocks_apply_offset_and_drift() {
        let mut sim = Sim::with_epoch(0, UNIX_EPOCH + Duration::from_secs(100));
        let h = sim.add_host(HostConfig {
            offset_ns: -2_000_000,
            drift_ppb: 50_000,
        });
        assert_eq!(sim.wall_ns(h, Duration::ZERO), 100_000_000_000 - 2_000_000);
        // 10 s at +50 ppm gains 500 µs.
        assert_eq!(
            sim.wall_ns(h, Duration::from_secs(10)),
            110_000_000_000 - 2_000_000 + 500_000
        );
    }
}
