//! TCP as the simulator tier models it: a reliable, in-order byte pipe with the link's
//! rate and one-way delay and a bounded send buffer; no congestion control, no loss.
//!
//! Virtual time is nanoseconds since the world's start. The rate is given as
//! nanoseconds per byte so serialization is exact: a chunk of `n` bytes leaves `n ×
//! ns_per_byte` after the link is free and arrives `delay_ns` after it left, all at
//! once (its last byte is what a reader waits for).

use std::collections::VecDeque;

/// One direction of a TCP connection.
#[derive(Debug)]
pub struct Pipe {
    pub ns_per_byte: u64,
    pub delay_ns: u64,
    /// Bytes written but not yet on the wire, at most (the send buffer).
    pub buffer: u64,
    busy_until: u64,
    /// Chunks on their way: (left the sender, arrives, bytes).
    chunks: VecDeque<(u64, u64, Vec<u8>)>,
    /// Arrived and not yet read (chunks; the first read from `read_off` on).
    arrived: VecDeque<Vec<u8>>,
    read_off: usize,
    closed: bool,
}

impl Pipe {
    pub fn new(ns_per_byte: u64, delay_ns: u64, buffer: u64) -> Pipe {
        Pipe {
            ns_per_byte,
            delay_ns,
            buffer,
            busy_until: 0,
            chunks: VecDeque::new(),
            arrived: VecDeque::new(),
            read_off: 0,
            closed: false,
        }
    }

    /// Bytes written that have not left by `now` (a chunk leaves when its last byte
    /// is serialized).
    fn backlog(&self, now: u64) -> u64 {
        self.chunks
            .iter()
            .filter(|c| c.0 > now)
            .map(|c| c.2.len() as u64)
            .sum()
    }

    /// Write as much of `data` as the send buffer takes at `now`; how much it took.
    pub fn write(&mut self, now: u64, data: &[u8]) -> usize {
        let room = self.buffer.saturating_sub(self.backlog(now)) as usize;
        let n = room.min(data.len());
        if n > 0 {
            let left = self.busy_until.max(now) + n as u64 * self.ns_per_byte;
            self.busy_until = left;
            self.chunks
                .push_back((left, left + self.delay_ns, data[..n].to_vec()));
        }
        n
    }

    /// The sender closed its end (after what it wrote).
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// Move what has arrived by `now` to the read side.
    fn deliver(&mut self, now: u64) {
        while self.chunks.front().is_some_and(|c| c.1 <= now) {
            let (_, _, b) = self.chunks.pop_front().unwrap();
            self.arrived.push_back(b);
        }
    }

    /// Read up to `max` bytes at `now`: `Some(empty)` at the end of the stream,
    /// `None` when nothing is there yet.
    pub fn read(&mut self, now: u64, max: usize) -> Option<Vec<u8>> {
        self.deliver(now);
        if self.arrived.is_empty() {
            return (self.closed && self.chunks.is_empty()).then(Vec::new);
        }
        let mut out = Vec::new();
        while out.len() < max
            && let Some(front) = self.arrived.front()
        {
            let take = (front.len() - self.read_off).min(max - out.len());
            out.extend_from_slice(&front[self.read_off..self.read_off + take]);
            self.read_off += take;
            if self.read_off == front.len() {
                self.arrived.pop_front();
                self.read_off = 0;
            }
        }
        Some(out)
    }

    /// The next time something changes: a chunk leaves (room) or arrives.
    pub fn next_event(&self, now: u64) -> Option<u64> {
        self.chunks
            .iter()
            .flat_map(|c| [c.0, c.1])
            .filter(|&t| t > now)
            .min()
    }
}
