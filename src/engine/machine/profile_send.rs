//! The profiled sender's decisions (`--burst-size`/`--burst-period`, `--isochronous`):
//! when the next unit is due on the grid, how large it is, how it is cut into writes
//! (TCP) or datagrams (UDP), and what it cost once sent.
//!
//! The grid and the sizes are `crate::profile`'s [`Schedule`] and [`UnitSizer`]; this
//! machine adds the loop around them: the origin the grid counts from, frame ids, the
//! split, and a unit's transfer time.

use crate::profile::{Due, Profile, Schedule, UnitSizer, split_datagrams};
use std::time::{Duration, Instant};

/// How units travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carrier {
    /// TCP writes of at most `block_len` bytes.
    Tcp { block_len: usize },
    /// UDP datagrams of `len` bytes (the last shorter, but at least `min_len`: the
    /// headers).
    Udp { len: usize, min_len: usize },
}

/// One unit (burst or frame) to send now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unit {
    /// Frames are numbered 1, 2, … (the isochronous header's `frame_id`).
    pub id: u64,
    /// Its grid slot and when it was due (ns after the origin).
    pub slot: u64,
    pub due_ns: u64,
    /// Slots before it that passed entirely (slips).
    pub skipped: u64,
    /// The size drawn for it.
    pub size: u64,
    /// Writes or datagrams, each `piece_len` bytes but the last, `last_len`.
    pub pieces: u64,
    pub piece_len: usize,
    pub last_len: usize,
}

impl Unit {
    /// Bytes on the wire (a UDP unit's last datagram is padded to its headers).
    pub fn bytes(&self) -> u64 {
        (self.pieces - 1) * self.piece_len as u64 + self.last_len as u64
    }

    /// Length of piece `i` (0-based).
    pub fn piece(&self, i: u64) -> usize {
        if i + 1 == self.pieces {
            self.last_len
        } else {
            self.piece_len
        }
    }
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileStep {
    /// Nothing is due before this instant.
    Wait(Instant),
    /// Send this unit, all its pieces, then call [`ProfileSender::unit_done`].
    Send(Unit),
    /// No unit is due before the end of the test.
    Over,
}

/// A profiled sender's state.
#[derive(Debug)]
pub struct ProfileSender {
    sched: Schedule,
    sizer: UnitSizer,
    carrier: Carrier,
    origin: Instant,
    next_id: u64,
    /// When the unit under way started.
    started: Option<Instant>,
}

impl ProfileSender {
    /// A sender of `p` for stream `stream_id` (which seeds the frame sizes), its grid
    /// starting at `origin` and ending `end` after it (`-t`).
    pub fn new(
        p: &Profile,
        stream_id: i64,
        carrier: Carrier,
        origin: Instant,
        end: Option<Duration>,
    ) -> ProfileSender {
        let (num, den) = p.grid();
        let sched = Schedule::every(num, den);
        ProfileSender {
            sched: match end {
                Some(e) => sched.ending_at(e.as_nanos() as u64),
                None => sched,
            },
            sizer: p.sizer(stream_id),
            carrier,
            origin,
            next_id: 1,
            started: None,
        }
    }

    /// The next step at `now`.
    pub fn poll(&mut self, now: Instant) -> ProfileStep {
        let since = now.saturating_duration_since(self.origin).as_nanos() as u64;
        match self.sched.poll(since) {
            Due::Wait(ns) => ProfileStep::Wait(now + Duration::from_nanos(ns)),
            Due::Over => ProfileStep::Over,
            Due::Send {
                slot,
                due_ns,
                skipped,
            } => {
                let size = self.sizer.next_bytes();
                let (piece_len, min_len) = match self.carrier {
                    Carrier::Tcp { block_len } => (block_len.max(1), 1),
                    Carrier::Udp { len, min_len } => (len.max(min_len), min_len),
                };
                let (pieces, last_len) = split_datagrams(size, piece_len, min_len);
                let id = self.next_id;
                self.next_id += 1;
                self.started = Some(now);
                ProfileStep::Send(Unit {
                    id,
                    slot,
                    due_ns,
                    skipped,
                    size,
                    pieces,
                    piece_len,
                    last_len,
                })
            }
        }
    }

    /// The unit under way was sent completely at `now`: its transfer time, ns (from
    /// the poll that gave it).
    pub fn unit_done(&mut self, now: Instant) -> u64 {
        self.started
            .take()
            .map_or(0, |t| now.saturating_duration_since(t).as_nanos() as u64)
    }

    /// Grid slots skipped so far.
    pub fn slips(&self) -> u64 {
        self.sched.slips
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Isochronous;

    #[test]
    fn bursts_on_the_grid_cut_into_blocks() {
        let t0 = crate::clock::mono_now();
        let p = Profile::Burst {
            bytes: 2500,
            period_s: 0.1,
        };
        let c = Carrier::Tcp { block_len: 1000 };
        let mut s = ProfileSender::new(&p, 1, c, t0, Some(Duration::from_millis(300)));
        let ProfileStep::Send(u) = s.poll(t0) else {
            panic!("the first burst is due at once")
        };
        assert_eq!((u.id, u.pieces, u.piece(2), u.bytes()), (1, 3, 500, 2500));
        assert_eq!(s.unit_done(t0 + Duration::from_millis(4)), 4_000_000);
        assert_eq!(
            s.poll(t0),
            ProfileStep::Wait(t0 + Duration::from_millis(100))
        );
        // Asked again only at 250 ms: slot 1 passed entirely, slot 2 goes now.
        let ProfileStep::Send(u) = s.poll(t0 + Duration::from_millis(250)) else {
            panic!()
        };
        assert_eq!((u.id, u.slot, u.skipped), (2, 2, 1));
        assert_eq!(s.poll(t0 + Duration::from_millis(300)), ProfileStep::Over);
    }

    #[test]
    fn frames_split_into_datagrams_no_shorter_than_the_headers() {
        let t0 = crate::clock::mono_now();
        let p = Profile::Isochronous {
            params: Isochronous {
                fps: 10,
                mean_bps: 80_000, // 1000 bytes a frame
                stdev_bps: 0,
            },
            framed: true,
            both_ways: false,
        };
        let c = Carrier::Udp {
            len: 400,
            min_len: 36,
        };
        let mut s = ProfileSender::new(&p, 1, c, t0, None);
        let ProfileStep::Send(u) = s.poll(t0) else {
            panic!()
        };
        assert_eq!(
            (u.size, u.pieces, u.last_len, u.bytes()),
            (1000, 3, 200, 1000)
        );
    }
}
