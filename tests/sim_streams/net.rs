//! Two hosts and a link each way on the shared simulator (`netmeter::sim`): the
//! datagram path of the UDP machines, whose record of every packet is the truth the
//! tests judge the receivers' counts against.

use crate::world::Host;
use netmeter::sim::{Arrival, Ecn, Fate, HostConfig, HostId, LinkConfig, LinkId, Sim};
use std::time::Duration;

/// A client host `a`, a server host `b`, `fwd` from a to b, `rev` back.
pub struct Net {
    pub sim: Sim,
    pub a: HostId,
    pub b: HostId,
    pub fwd: LinkId,
    pub rev: LinkId,
    /// Monotonic clocks of the two hosts for the machines (virtual time).
    pub ca: Host,
    pub cb: Host,
}

impl Net {
    pub fn new(seed: u64, fwd: LinkConfig, rev: LinkConfig) -> Net {
        let mut sim = Sim::new(seed);
        let a = sim.add_host(HostConfig::default());
        let b = sim.add_host(HostConfig::default());
        let (f, r) = (sim.add_link(a, b, fwd), sim.add_link(b, a, rev));
        Net {
            sim,
            a,
            b,
            fwd: f,
            rev: r,
            ca: Host::new(0),
            cb: Host::new(0),
        }
    }

    /// Virtual time, ns.
    pub fn now(&self) -> u64 {
        self.sim.now().as_nanos() as u64
    }

    pub fn advance_to(&mut self, ns: u64) {
        self.sim.advance_to(Duration::from_nanos(ns));
    }

    /// Send on `link` now; the packet's number in the record.
    pub fn send(&mut self, link: LinkId, d: &[u8]) -> u64 {
        self.sim.send(link, d.to_vec(), Ecn::NotEct)
    }

    /// The next arrival by now.
    pub fn recv(&mut self) -> Option<Arrival> {
        self.sim.pop_delivery()
    }

    /// When the next packet arrives, ns.
    pub fn next_arrival(&self) -> Option<u64> {
        self.sim.next_event().map(|t| t.as_nanos() as u64)
    }

    /// Whether packet `id` was lost or dropped.
    pub fn dropped(&self, id: u64) -> bool {
        !matches!(self.sim.record()[id as usize].fate, Fate::Delivered(_))
    }

    /// When packet `id` (first copy) arrived, ns.
    pub fn arrived_at(&self, id: u64) -> Option<u64> {
        match &self.sim.record()[id as usize].fate {
            Fate::Delivered(c) => c.first().map(|d| d.at.as_nanos() as u64),
            _ => None,
        }
    }
}

/// A link of `rate_bps` and `delay`, losing each packet with probability `loss`.
pub fn link(rate_bps: u64, delay: Duration, loss: f64) -> LinkConfig {
    LinkConfig {
        rate_bps,
        delay,
        loss: if loss > 0.0 {
            netmeter::sim::Loss::Bernoulli { p: loss }
        } else {
            netmeter::sim::Loss::None
        },
        ..LinkConfig::default()
    }
}
