//! A datagram link for the UDP machines until they run on the shared simulator: rate
//! (exact nanoseconds a byte), one-way delay, seeded Bernoulli loss, and its own record
//! of what it dropped, which the tests judge the receivers' counts against.

use netmeter::profile::Rng;
use std::collections::VecDeque;

/// One direction.
#[derive(Debug)]
pub struct DgramLink {
    pub ns_per_byte: u64,
    pub delay_ns: u64,
    /// Drop probability, in parts per million.
    loss_ppm: u64,
    rng: Rng,
    busy_until: u64,
    in_flight: VecDeque<(u64, Vec<u8>)>,
    /// Every datagram offered, in order: dropped or not.
    pub record: Vec<bool>,
}

impl DgramLink {
    pub fn new(ns_per_byte: u64, delay_ns: u64, loss_ppm: u64, seed: u64) -> DgramLink {
        DgramLink {
            ns_per_byte,
            delay_ns,
            loss_ppm,
            rng: Rng::new(seed),
            busy_until: 0,
            in_flight: VecDeque::new(),
            record: Vec::new(),
        }
    }

    /// Send `d` at `now`: serialized after what is queued, delivered `delay_ns` after,
    /// unless the draw drops it (after serialization: it used the link). Whether it
    /// was dropped.
    pub fn send(&mut self, now: u64, d: &[u8]) -> bool {
        let left = self.busy_until.max(now) + d.len() as u64 * self.ns_per_byte;
        self.busy_until = left;
        let dropped = self.loss_ppm > 0 && self.rng.next_u64() % 1_000_000 < self.loss_ppm;
        self.record.push(dropped);
        if !dropped {
            self.in_flight.push_back((left + self.delay_ns, d.to_vec()));
        }
        dropped
    }

    /// The next datagram arrived by `now`, with its arrival time.
    pub fn recv(&mut self, now: u64) -> Option<(u64, Vec<u8>)> {
        if self.in_flight.front().is_some_and(|d| d.0 <= now) {
            self.in_flight.pop_front()
        } else {
            None
        }
    }

    /// When the next datagram arrives.
    pub fn next_arrival(&self) -> Option<u64> {
        self.in_flight.front().map(|d| d.0)
    }
}
