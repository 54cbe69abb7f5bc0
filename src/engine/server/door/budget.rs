//! The budget of connections that have not finished their handshake: how many may
//! wait at once, in total and per source, which to drop when a cap is hit, and when
//! each one's time is up. Pure bookkeeping: the event loop (`door`) owns the sockets,
//! tells this what arrived and when (`now` passed in), and closes what it is told to.
//!
//! Decisions written down:
//! * A source is an IPv4 address, or an IPv6 /64 (one host, or one customer of a
//!   provider, usually holds a whole /64, so counting single IPv6 addresses would let
//!   one host take the whole budget from 2^64 addresses).
//! * When a cap is hit the newcomer is kept and one waiting connection is dropped: the
//!   least advanced (a refused connection being closed, then one still owing its
//!   cookie, then one owing its parameters, then its key proof), the oldest among
//!   those. A flood of stalled connections therefore pushes out its own oldest members,
//!   while a client that answers at once is through before it becomes the oldest.
//! * A source with a test running on this server (whose data streams and connect-only
//!   connections arrive in bursts) is not held to the per-source cap, only to the total.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::time::Instant;

/// Connections in their handshake at once, from all sources (`door::MAX_PENDING`).
pub const MAX_PENDING: usize = 256;
/// Connections in their handshake at once from one source.
pub const MAX_PENDING_PER_SOURCE: usize = 16;

/// Where a connection comes from, as the per-source cap counts it: an IPv4 address
/// (v4-mapped IPv6 included), or the /64 of an IPv6 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    V4([u8; 4]),
    V6Prefix([u8; 8]),
}

impl Source {
    pub fn of(ip: IpAddr) -> Source {
        match ip {
            IpAddr::V4(v4) => Source::V4(v4.octets()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Source::V4(v4.octets()),
                None => {
                    let o = v6.octets();
                    let mut p = [0u8; 8];
                    p.copy_from_slice(&o[..8]);
                    Source::V6Prefix(p)
                }
            },
        }
    }
}

/// How far a connection got; the lower, the sooner it is dropped under pressure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// Refused: the answer is written, waiting for the peer to close.
    Closing,
    /// Owes its 37-byte cookie.
    Cookie,
    /// Owes its parameters.
    Params,
    /// Owes its pre-shared-key proof.
    Proof,
}

#[derive(Debug, Clone, Copy)]
struct Waiting {
    source: Source,
    stage: Stage,
    deadline: Instant,
}

/// The waiting connections, by id (the accept order, so a lower id is older).
#[derive(Debug)]
pub struct Budget {
    total: usize,
    per_source: usize,
    waiting: BTreeMap<u64, Waiting>,
    by_source: HashMap<Source, usize>,
}

impl Budget {
    pub fn new(total: usize, per_source: usize) -> Budget {
        Budget {
            total: total.max(1),
            per_source: per_source.max(1),
            waiting: BTreeMap::new(),
            by_source: HashMap::new(),
        }
    }

    /// How many connections wait.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Take in connection `id` from `source`, owing `stage` until `deadline`. Returns
    /// the ids to drop to make room (never `id` itself). `exempt`: the source has a
    /// test running here, so only the total cap applies.
    pub fn admit(
        &mut self,
        id: u64,
        source: Source,
        stage: Stage,
        deadline: Instant,
        exempt: bool,
    ) -> Vec<u64> {
        let mut dropped = Vec::new();
        if !exempt
            && self.by_source.get(&source).copied().unwrap_or(0) >= self.per_source
            && let Some(v) = self.victim(Some(source))
        {
            self.remove(v);
            dropped.push(v);
        }
        while self.waiting.len() >= self.total {
            let Some(v) = self.victim(None) else { break };
            self.remove(v);
            dropped.push(v);
        }
        self.waiting.insert(
            id,
            Waiting {
                source,
                stage,
                deadline,
            },
        );
        *self.by_source.entry(source).or_insert(0) += 1;
        dropped
    }

    /// The least advanced, then oldest, waiting connection (of `source`, if given).
    fn victim(&self, source: Option<Source>) -> Option<u64> {
        self.waiting
            .iter()
            .filter(|(_, w)| source.is_none_or(|s| w.source == s))
            .min_by_key(|(id, w)| (w.stage, **id))
            .map(|(id, _)| *id)
    }

    /// Connection `id` moved on to `stage`, which it owes until `deadline`.
    pub fn advance(&mut self, id: u64, stage: Stage, deadline: Instant) {
        if let Some(w) = self.waiting.get_mut(&id) {
            w.stage = stage;
            w.deadline = deadline;
        }
    }

    /// Connection `id` is done with (handed on, or closed).
    pub fn remove(&mut self, id: u64) {
        if let Some(w) = self.waiting.remove(&id)
            && let Some(n) = self.by_source.get_mut(&w.source)
        {
            *n -= 1;
            if *n == 0 {
                self.by_source.remove(&w.source);
            }
        }
    }

    /// The connections whose time is up at `now`.
    pub fn expired(&self, now: Instant) -> Vec<u64> {
        self.waiting
            .iter()
            .filter(|(_, w)| w.deadline <= now)
            .map(|(id, _)| *id)
            .collect()
    }

    /// The earliest deadline of a waiting connection.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.waiting.values().map(|w| w.deadline).min()
    }

    /// The stage connection `id` is in.
    pub fn stage(&self, id: u64) -> Option<Stage> {
        self.waiting.get(&id).map(|w| w.stage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use std::time::Duration;

    fn src(s: &str) -> Source {
        Source::of(s.parse().unwrap())
    }

    #[test]
    fn sources_are_v4_addresses_and_v6_slash_64s() {
        assert_eq!(src("192.0.2.1"), src("::ffff:192.0.2.1"));
        assert_ne!(src("192.0.2.1"), src("192.0.2.2"));
        assert_eq!(src("2001:db8:1:2::1"), src("2001:db8:1:2:ffff::9"));
        assert_ne!(src("2001:db8:1:2::1"), src("2001:db8:1:3::1"));
    }

    /// A flood from one source pushes out its own oldest connections and nobody
    /// else's; the count per source never passes the cap.
    #[test]
    fn a_source_over_its_cap_loses_its_own_oldest() {
        let now = ManualClock::at_unix(1_700_000_000).now();
        let later = now + Duration::from_secs(5);
        let mut b = Budget::new(100, 3);
        assert!(
            b.admit(1, src("10.0.0.9"), Stage::Cookie, later, false)
                .is_empty()
        );
        for id in 2..=4 {
            assert!(
                b.admit(id, src("10.0.0.1"), Stage::Cookie, later, false)
                    .is_empty()
            );
        }
        assert_eq!(
            b.admit(5, src("10.0.0.1"), Stage::Cookie, later, false),
            [2]
        );
        assert_eq!(
            b.admit(6, src("10.0.0.1"), Stage::Cookie, later, false),
            [3]
        );
        assert_eq!(b.len(), 4);
        assert_eq!(
            b.stage(1),
            Some(Stage::Cookie),
            "the other source keeps its place"
        );
        // The same /64 is one source.
        for id in 10..13 {
            b.admit(id, src("2001:db8::1"), Stage::Cookie, later, false);
        }
        assert_eq!(
            b.admit(13, src("2001:db8::ffff"), Stage::Cookie, later, false),
            [10]
        );
    }

    /// Under pressure the least advanced connection goes first, then the oldest: a
    /// refused one being closed, then one owing its cookie, before one owing its
    /// parameters, whatever their age.
    #[test]
    fn the_least_advanced_then_the_oldest_is_dropped() {
        let now = ManualClock::at_unix(1_700_000_000).now();
        let later = now + Duration::from_secs(5);
        let mut b = Budget::new(3, 10);
        b.admit(1, src("10.0.0.1"), Stage::Cookie, later, false);
        b.advance(1, Stage::Params, later);
        b.admit(2, src("10.0.0.2"), Stage::Cookie, later, false);
        b.admit(3, src("10.0.0.3"), Stage::Closing, later, false);
        assert_eq!(
            b.admit(4, src("10.0.0.4"), Stage::Cookie, later, false),
            [3]
        );
        assert_eq!(
            b.admit(5, src("10.0.0.5"), Stage::Cookie, later, false),
            [2]
        );
        assert_eq!(
            b.admit(6, src("10.0.0.6"), Stage::Cookie, later, false),
            [4]
        );
        assert_eq!(b.stage(1), Some(Stage::Params));
    }

    #[test]
    fn a_source_with_a_running_test_is_held_to_the_total_only() {
        let later = ManualClock::at_unix(1_700_000_000).now() + Duration::from_secs(5);
        let mut b = Budget::new(5, 2);
        for id in 0..5 {
            assert!(
                b.admit(id, src("10.0.0.1"), Stage::Cookie, later, true)
                    .is_empty()
            );
        }
        assert_eq!(b.admit(5, src("10.0.0.1"), Stage::Cookie, later, true), [0]);
        assert_eq!(b.len(), 5);
    }

    #[test]
    fn deadlines_expire_in_order_and_removal_frees_the_source() {
        let now = ManualClock::at_unix(1_700_000_000).now();
        let mut b = Budget::new(10, 2);
        let s = src("10.0.0.1");
        b.admit(1, s, Stage::Cookie, now + Duration::from_secs(5), false);
        b.admit(2, s, Stage::Cookie, now + Duration::from_secs(1), false);
        assert_eq!(b.next_deadline(), Some(now + Duration::from_secs(1)));
        assert!(b.expired(now).is_empty());
        assert_eq!(b.expired(now + Duration::from_secs(1)), [2]);
        b.advance(2, Stage::Params, now + Duration::from_secs(10));
        assert_eq!(b.expired(now + Duration::from_secs(6)), [1]);
        b.remove(1);
        b.remove(2);
        assert!(b.is_empty());
        // Both slots of the source are free again.
        assert!(b.admit(3, s, Stage::Cookie, now, false).is_empty());
        assert!(b.admit(4, s, Stage::Cookie, now, false).is_empty());
    }
}
