//! Request/response decisions (`--bounceback`, and the `--working-load` probe): when
//! the client sends its next burst of requests, which reply completes which request
//! and what its round trip was, when a UDP reply counts as lost; how long the server
//! holds a request before it answers.
//!
//! A round trip runs from the start of its request's write to the arrival of its
//! reply's last byte (TCP) or its datagram (UDP), both on the client's monotonic clock.

use std::time::{Duration, Instant};

/// Time between round-trip probes under `--working-load` (100 probes per second): a
/// probe measures the path, it must not load it.
pub const PROBE_PERIOD: Duration = Duration::from_millis(10);
/// How long a UDP bounceback client waits for the replies of a burst.
pub const UDP_REPLY_TIMEOUT: Duration = Duration::from_secs(1);

/// What a bounceback client is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BounceConfig {
    /// Requests per burst (written back to back, then their replies read).
    pub burst: u32,
    /// Bytes of one reply (TCP: where one reply ends in the byte stream).
    pub reply_len: usize,
    /// Bursts at most this often (`--working-load`: [`PROBE_PERIOD`]); `None`: back to
    /// back.
    pub period: Option<Duration>,
    /// `--working-load`: bursts sent before this instant measure the idle path.
    pub load_start: Option<Instant>,
    /// UDP: replies not in this long after the burst are lost. `None` (TCP): wait.
    pub reply_timeout: Option<Duration>,
}

/// One measured round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rtt {
    pub ns: u64,
    /// Its burst started before the load did (`--working-load`'s idle phase).
    pub idle: bool,
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BounceStep {
    /// Nothing to do before this instant.
    Wait(Instant),
    /// Write `count` requests, calling [`BounceClient::on_sent`] before each.
    Send { count: u32 },
    /// Read replies, until this instant if there is one.
    Await(Option<Instant>),
    /// The burst's deadline passed with `lost` replies missing; ask again.
    Lost(u64),
}

/// A bounceback client's state.
#[derive(Debug)]
pub struct BounceClient {
    cfg: BounceConfig,
    next: Option<Instant>,
    /// The burst under way: each request's sequence number and send time, in order.
    outstanding: Vec<(u64, Instant)>,
    /// TCP: reply bytes of the burst in so far.
    reply_bytes: usize,
    deadline: Option<Instant>,
    idle: bool,
    awaiting: bool,
    seq: u64,
    done: u64,
}

impl BounceClient {
    pub fn new(cfg: BounceConfig) -> BounceClient {
        BounceClient {
            cfg: BounceConfig {
                burst: cfg.burst.max(1),
                reply_len: cfg.reply_len.max(1),
                ..cfg
            },
            next: None,
            outstanding: Vec::with_capacity(cfg.burst.max(1) as usize),
            reply_bytes: 0,
            deadline: None,
            idle: false,
            awaiting: false,
            seq: 0,
            done: 0,
        }
    }

    /// The next step at `now`.
    pub fn poll(&mut self, now: Instant) -> BounceStep {
        if self.awaiting {
            match self.deadline {
                Some(d) if now >= d => {
                    self.awaiting = false;
                    let lost = self.outstanding.len() as u64;
                    self.outstanding.clear();
                    return BounceStep::Lost(lost);
                }
                d if !self.outstanding.is_empty() => return BounceStep::Await(d),
                _ => self.awaiting = false,
            }
        }
        if let Some(p) = self.cfg.period {
            let next = *self.next.get_or_insert(now);
            if now < next {
                return BounceStep::Wait(next);
            }
            self.next = Some((next + p).max(now));
        }
        self.outstanding.clear();
        self.reply_bytes = 0;
        self.idle = self.cfg.load_start.is_some_and(|at| now < at);
        BounceStep::Send {
            count: self.cfg.burst,
        }
    }

    /// A request is about to be written at `now`: its sequence number (UDP carries it
    /// in its first 8 bytes; the reply echoes it).
    pub fn on_sent(&mut self, now: Instant) -> u64 {
        self.seq += 1;
        if self.outstanding.is_empty() {
            self.idle = self.cfg.load_start.is_some_and(|at| now < at);
        }
        self.outstanding.push((self.seq, now));
        self.awaiting = true;
        self.deadline = self.cfg.reply_timeout.map(|t| now + t);
        self.seq
    }

    /// A request could not be sent (a UDP send failed): no reply is awaited for it.
    pub fn on_send_failed(&mut self, seq: u64) {
        self.outstanding.retain(|o| o.0 != seq);
    }

    /// The burst is written: its reply deadline counts from `now`.
    pub fn burst_sent(&mut self, now: Instant) {
        self.deadline = self.cfg.reply_timeout.map(|t| now + t);
    }

    /// TCP: `n` more reply bytes arrived at `now`; each reply they complete is timed
    /// into `out`.
    pub fn on_reply_bytes(&mut self, n: usize, now: Instant, out: &mut Vec<Rtt>) {
        let before = self.reply_bytes / self.cfg.reply_len;
        self.reply_bytes += n;
        let after = (self.reply_bytes / self.cfg.reply_len).min(before + self.outstanding.len());
        for _ in before..after {
            let (_, t) = self.outstanding.remove(0);
            out.push(self.rtt(t, now));
        }
    }

    /// UDP: the reply echoing `seq` arrived at `now` (`None`: not one awaited).
    pub fn on_reply(&mut self, seq: u64, now: Instant) -> Option<Rtt> {
        let i = self.outstanding.iter().position(|o| o.0 == seq)?;
        let (_, t) = self.outstanding.swap_remove(i);
        Some(self.rtt(t, now))
    }

    fn rtt(&mut self, sent: Instant, now: Instant) -> Rtt {
        self.done += 1;
        Rtt {
            ns: now.saturating_duration_since(sent).as_nanos() as u64,
            idle: self.idle,
        }
    }

    /// Requests sent so far.
    pub fn sent(&self) -> u64 {
        self.seq
    }

    /// Round trips completed so far.
    pub fn done(&self) -> u64 {
        self.done
    }
}

/// A bounceback server's state: hold each request, then answer it.
#[derive(Debug, Clone)]
pub struct BounceServer {
    hold: Duration,
    bytes: u64,
    done: u64,
}

impl BounceServer {
    /// A server holding each request `hold` before its reply.
    pub fn new(hold: Duration) -> BounceServer {
        BounceServer {
            hold,
            bytes: 0,
            done: 0,
        }
    }

    /// A whole request of `len` bytes arrived at `now`: when to send its reply.
    pub fn on_request(&mut self, len: usize, now: Instant) -> Instant {
        self.bytes += len as u64;
        self.done += 1;
        now + self.hold
    }

    /// Request bytes and requests answered so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.bytes, self.done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> BounceConfig {
        BounceConfig {
            burst: 2,
            reply_len: 10,
            period: None,
            load_start: None,
            reply_timeout: None,
        }
    }

    #[test]
    fn tcp_replies_complete_requests_in_order() {
        let t0 = crate::clock::mono_now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut c = BounceClient::new(cfg());
        assert_eq!(c.poll(t0), BounceStep::Send { count: 2 });
        c.on_sent(t0);
        c.on_sent(ms(1));
        c.burst_sent(ms(1));
        assert_eq!(c.poll(ms(1)), BounceStep::Await(None));
        let mut out = Vec::new();
        c.on_reply_bytes(15, ms(5), &mut out);
        c.on_reply_bytes(5, ms(8), &mut out);
        let ns: Vec<u64> = out.iter().map(|r| r.ns).collect();
        assert_eq!(ns, vec![5_000_000, 7_000_000]);
        assert_eq!(c.poll(ms(8)), BounceStep::Send { count: 2 });
        assert_eq!(c.done(), 2);
    }

    #[test]
    fn udp_replies_by_sequence_and_lost_after_the_timeout() {
        let t0 = crate::clock::mono_now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut c = BounceClient::new(BounceConfig {
            reply_timeout: Some(UDP_REPLY_TIMEOUT),
            ..cfg()
        });
        assert_eq!(c.poll(t0), BounceStep::Send { count: 2 });
        let (a, b) = (c.on_sent(t0), c.on_sent(t0));
        c.burst_sent(t0);
        assert_eq!(c.on_reply(b, ms(3)).map(|r| r.ns), Some(3_000_000));
        assert_eq!(c.on_reply(b, ms(4)), None, "a duplicate reply");
        assert_eq!(c.poll(ms(999)), BounceStep::Await(Some(ms(1000))));
        assert_eq!(c.poll(ms(1000)), BounceStep::Lost(1));
        assert_eq!(c.on_reply(a, ms(1001)), None, "too late");
        assert_eq!(c.poll(ms(1001)), BounceStep::Send { count: 2 });
    }

    #[test]
    fn probes_keep_their_period_and_know_the_idle_phase() {
        let t0 = crate::clock::mono_now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut c = BounceClient::new(BounceConfig {
            burst: 1,
            period: Some(PROBE_PERIOD),
            load_start: Some(ms(15)),
            ..cfg()
        });
        let mut out = Vec::new();
        for at in [0, 10, 20] {
            assert_eq!(c.poll(ms(at)), BounceStep::Send { count: 1 });
            c.on_sent(ms(at));
            c.on_reply_bytes(10, ms(at + 2), &mut out);
            assert_eq!(c.poll(ms(at + 2)), BounceStep::Wait(ms(at + 10)));
        }
        let idle: Vec<bool> = out.iter().map(|r| r.idle).collect();
        assert_eq!(idle, vec![true, true, false]);
    }

    #[test]
    fn the_server_holds_each_request() {
        let t0 = crate::clock::mono_now();
        let mut s = BounceServer::new(Duration::from_micros(250));
        assert_eq!(s.on_request(100, t0), t0 + Duration::from_micros(250));
        assert_eq!(s.counts(), (100, 1));
    }
}
