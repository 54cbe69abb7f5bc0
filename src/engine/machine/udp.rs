//! The UDP stream machines: a bulk or `-b`-paced sender and a receiver.
//!
//! [`UdpSender`] decides how many datagrams go now (the pacer's grant, within the
//! `-n`/`-k` budget and the `-t` end), numbers them and writes their headers with the
//! wall time it is given; the driver makes the system calls (`sendmmsg` batches, GSO
//! super-buffers) and tells it how many went. [`UdpReceiver`] takes each received
//! message's bytes with its arrival time and feeds the receive accounting, the one-way
//! delay and frame recorders. Neither reads a clock or touches a socket.

use std::sync::Arc;
use std::time::Duration;

use super::Budget;
use crate::engine::record::FrameRecord;
use crate::latency::OwdRecord;
use crate::pacing::Pacer;
use crate::stats::UdpRecv;
use crate::wire::{UdpHeader, udp_connect_cookie};

/// What a UDP sender is asked to do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UdpSenderConfig {
    /// Datagram length, bytes (`-l`; at least the header).
    pub len: usize,
    /// 64-bit sequence numbers (`--udp-counters-64bit`).
    pub seq64: bool,
    /// The header's second field carries nanoseconds (netmeter `--trip-times`), else
    /// microseconds (iperf3).
    pub ts_ns: bool,
    /// `-b`, bits per second (0: as fast as allowed).
    pub rate_bps: u64,
    /// `-b RATE/BURST`: datagrams that may leave back to back.
    pub burst: Option<u32>,
    /// When a timed test ends, after the schedule's origin: the pacer makes up what it
    /// owes before it ([`Pacer::ending_at`]).
    pub pace_end: Option<Duration>,
    /// Stop at this time after the origin (`-t` when the machine owns the end; the
    /// engine's threads are stopped by the control thread instead).
    pub stop_at: Option<Duration>,
}

/// A sender's next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendAction {
    /// Send this many datagrams now: write their headers ([`UdpSender::write_headers`]),
    /// send, and report what went ([`UdpSender::on_sent`]).
    Send(usize),
    /// Nothing may go for this long.
    Wait(Duration),
    /// The test is over for this sender (`-t` reached or the `-n`/`-k` budget spent).
    Stop,
}

/// The sender half of a UDP stream.
#[derive(Debug)]
pub struct UdpSender {
    cfg: UdpSenderConfig,
    pacer: Option<Pacer>,
    budget: Option<Arc<Budget>>,
    seq: u64,
    bytes: u64,
    messages: u64,
}

/// The UDP header's time fields for wall time `wall_ns`: seconds and microseconds
/// (iperf3's format), or seconds and nanoseconds (`ns`).
pub fn header_time(wall_ns: i64, ns: bool) -> (u32, u32) {
    let (sec, sub) = (
        wall_ns.div_euclid(1_000_000_000),
        wall_ns.rem_euclid(1_000_000_000),
    );
    (
        sec as u32,
        if ns { sub as u32 } else { (sub / 1000) as u32 },
    )
}

impl UdpSender {
    /// A sender whose schedule starts at time zero (the origin the driver measures `now`
    /// from), taking its `-n`/`-k` allowance from `budget` if any.
    pub fn new(cfg: UdpSenderConfig, budget: Option<Arc<Budget>>) -> UdpSender {
        let len = cfg.len.max(UdpHeader::len(cfg.seq64));
        let cfg = UdpSenderConfig { len, ..cfg };
        let pacer = (cfg.rate_bps > 0).then(|| {
            let p = Pacer::new(cfg.rate_bps, len, cfg.burst, 0.0);
            match cfg.pace_end {
                Some(e) => p.ending_at(e.as_secs_f64()),
                None => p,
            }
        });
        UdpSender {
            cfg,
            pacer,
            budget,
            seq: 0,
            bytes: 0,
            messages: 0,
        }
    }

    /// Pace at `rate_bps` from `now` on (`--ecn-responsive`); an unpaced sender stays
    /// unpaced.
    pub fn set_rate(&mut self, now: Duration, rate_bps: u64) {
        if let Some(p) = self.pacer.as_mut() {
            p.set_rate(now.as_secs_f64(), rate_bps);
        }
    }

    /// The datagram length.
    pub fn datagram_len(&self) -> usize {
        self.cfg.len
    }

    /// What to do at `now` (since the origin), sending at most `max` datagrams.
    pub fn poll(&mut self, now: Duration, max: usize) -> SendAction {
        let left = match self.cfg.stop_at {
            Some(end) if now >= end => return SendAction::Stop,
            Some(end) => end - now,
            None => Duration::MAX,
        };
        let len = self.cfg.len;
        let burst = self.cfg.burst.map_or(1, |b| b as usize).max(1);
        let mut n = match self.pacer.as_mut() {
            Some(p) => match p.grant(now.as_secs_f64(), len, burst, max) {
                Ok(k) => k,
                // Wake at the end if that comes first (stop on time, not a wait late).
                Err(wait) => return SendAction::Wait(wait.min(left)),
            },
            None => max,
        };
        if let Some(b) = &self.budget {
            let mut allowed = 0;
            while allowed < n {
                if b.take(len) != len {
                    // Less than a datagram is left: put back what the attempt took,
                    // so a refused send's `unsend` restores the budget exactly.
                    b.give_back(1, len);
                    break;
                }
                allowed += 1;
            }
            if allowed == 0 {
                return SendAction::Stop;
            }
            n = allowed;
        }
        SendAction::Send(n)
    }

    /// Write the headers of the `count` datagrams after the first `first` of a granted
    /// send into `buf`, one every `len` bytes from its start, stamped `wall_ns`.
    /// `buf` must hold `count * len` bytes.
    pub fn write_headers(&self, buf: &mut [u8], first: usize, count: usize, wall_ns: i64) {
        let (sec, usec) = header_time(wall_ns, self.cfg.ts_ns);
        let len = self.cfg.len;
        for j in 0..count {
            UdpHeader {
                sec,
                usec,
                seq: self.seq + 1 + (first + j) as u64,
            }
            .write(&mut buf[j * len..], self.cfg.seq64);
        }
    }

    /// `datagrams` of the last grant went out, in `messages` system-call messages.
    pub fn on_sent(&mut self, datagrams: usize, messages: usize) {
        self.seq += datagrams as u64;
        self.bytes += (datagrams * self.cfg.len) as u64;
        self.messages += messages as u64;
    }

    /// None of the last grant's `n` datagrams went out and they will be granted again
    /// (the kernel refused the segmentation): give their budget back.
    pub fn unsend(&mut self, n: usize) {
        if let Some(b) = &self.budget {
            b.give_back(n, self.cfg.len);
        }
    }

    /// Datagrams sent (the last sequence number used).
    pub fn datagrams(&self) -> u64 {
        self.seq
    }

    /// Bytes sent.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Send messages (system-call units) used.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    /// The most the pacer was ever behind, µs (at least 1, so 0 means unpaced).
    pub fn pacing_lag_us(&self) -> Option<u64> {
        self.pacer
            .as_ref()
            .map(|p| ((p.max_lag_s() * 1e6) as u64).max(1))
    }
}

/// What a receiver feeds: the receive accounting and, when kept, the recorders.
pub struct RecvSinks<'a> {
    pub acc: &'a mut UdpRecv,
    pub owd: Option<&'a mut OwdRecord>,
    pub frames: Option<&'a mut FrameRecord>,
}

/// The receiver half of a UDP stream.
#[derive(Debug, Clone, Default)]
pub struct UdpReceiver {
    seq64: bool,
    ts_ns: bool,
    correction_ns: i64,
    bytes: u64,
    datagrams: u64,
    messages: u64,
}

impl UdpReceiver {
    /// A receiver of headers with 64-bit sequence numbers (`seq64`) and nanosecond
    /// stamps (`ts_ns`), removing `correction_ns` (the estimated clock offset) from each
    /// one-way delay.
    pub fn new(seq64: bool, ts_ns: bool, correction_ns: i64) -> UdpReceiver {
        UdpReceiver {
            seq64,
            ts_ns,
            correction_ns,
            ..UdpReceiver::default()
        }
    }

    /// One received message `buf` that arrived at `rx_ns` (this host's wall clock, ns):
    /// one datagram, or with GRO several of `segment` bytes each (0: one). Returns how
    /// many data datagrams it held (for the ECN counts, which the message's TOS byte
    /// gives for all of them).
    pub fn on_message(
        &mut self,
        buf: &[u8],
        segment: usize,
        rx_ns: i64,
        sinks: &mut RecvSinks,
    ) -> u64 {
        let hdr_len = UdpHeader::len(self.seq64);
        let stride = if segment > 0 {
            segment
        } else {
            buf.len().max(1)
        };
        let before = self.datagrams;
        for d in buf.chunks(stride) {
            // Short datagrams are repeated connect messages, not data; so is a repeated
            // netmeter connect datagram with its cookie (long enough for a header).
            let Ok(h) = UdpHeader::read(d, self.seq64) else {
                continue;
            };
            if udp_connect_cookie(d).is_some() {
                continue;
            }
            self.bytes += d.len() as u64;
            self.datagrams += 1;
            let raw_ns = rx_ns.saturating_sub(h.send_ns(self.ts_ns, rx_ns));
            sinks.acc.on_datagram(h.seq, raw_ns as f64 / 1e9);
            if let Some(o) = sinks.owd.as_deref_mut() {
                o.record_at(rx_ns, raw_ns, self.correction_ns);
            }
            if let Some(f) = sinks.frames.as_deref_mut() {
                f.on_datagram(&d[hdr_len..], rx_ns, self.correction_ns);
            }
        }
        // A message that held only repeated connect datagrams carried no data.
        if self.datagrams > before {
            self.messages += 1;
        }
        self.datagrams - before
    }

    /// Data bytes received.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Data datagrams received (duplicates included).
    pub fn datagrams(&self) -> u64 {
        self.datagrams
    }

    /// Messages that carried data.
    pub fn messages(&self) -> u64 {
        self.messages
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(rate_bps: u64) -> UdpSenderConfig {
        UdpSenderConfig {
            len: 1000,
            seq64: false,
            ts_ns: false,
            rate_bps,
            burst: None,
            pace_end: None,
            stop_at: None,
        }
    }

    #[test]
    fn unpaced_sender_fills_each_batch_and_numbers_from_one() {
        let mut s = UdpSender::new(cfg(0), None);
        assert_eq!(s.poll(Duration::ZERO, 32), SendAction::Send(32));
        let mut buf = vec![0u8; 32 * 1000];
        s.write_headers(&mut buf, 0, 32, 1_500_000_123_456);
        let h = UdpHeader::read(&buf[31_000..], false).unwrap();
        assert_eq!((h.sec, h.usec, h.seq), (1500, 123, 32));
        s.on_sent(32, 1);
        assert_eq!((s.datagrams(), s.bytes(), s.messages()), (32, 32_000, 1));
        assert_eq!(s.pacing_lag_us(), None);
    }

    #[test]
    fn paced_sender_waits_and_stops_at_its_end() {
        // 8 Mbit/s of 1000-byte datagrams: one per ms.
        let mut s = UdpSender::new(
            UdpSenderConfig {
                stop_at: Some(Duration::from_millis(10)),
                ..cfg(8_000_000)
            },
            None,
        );
        let mut sent = 0;
        let mut now = Duration::ZERO;
        loop {
            match s.poll(now, 64) {
                SendAction::Send(n) => {
                    s.on_sent(n, n);
                    sent += n;
                }
                SendAction::Wait(d) => {
                    assert!(!d.is_zero());
                    now += d;
                }
                SendAction::Stop => break,
            }
        }
        assert_eq!(now, Duration::from_millis(10));
        // The bucket starts with one send's worth: the one at 0 plus one per ms after.
        assert!((10..=11).contains(&sent), "{sent}");
    }

    #[test]
    fn budget_ends_the_sender_and_a_refused_send_gives_its_bytes_back() {
        let b = Arc::new(Budget::new(2500, false));
        let mut s = UdpSender::new(cfg(0), Some(b.clone()));
        assert_eq!(s.poll(Duration::ZERO, 32), SendAction::Send(2));
        // The kernel refused the segmentation: the two datagrams are granted again.
        s.unsend(2);
        assert_eq!(s.poll(Duration::ZERO, 32), SendAction::Send(2));
        s.on_sent(2, 1);
        assert_eq!(s.poll(Duration::ZERO, 32), SendAction::Stop);
        let k = Arc::new(Budget::new(3, true));
        let mut s = UdpSender::new(cfg(0), Some(k));
        assert_eq!(s.poll(Duration::ZERO, 2), SendAction::Send(2));
        assert_eq!(s.poll(Duration::ZERO, 2), SendAction::Send(1));
        assert_eq!(s.poll(Duration::ZERO, 2), SendAction::Stop);
    }

    #[test]
    fn receiver_walks_gro_segments_and_skips_connect_messages() {
        let s = UdpSender::new(cfg(0), None);
        let mut buf = vec![0u8; 3000];
        s.write_headers(&mut buf, 0, 3, 2_000_000_000);
        let mut r = UdpReceiver::new(false, false, 0);
        let mut acc = UdpRecv::default();
        let mut owd = OwdRecord::default();
        let mut sinks = RecvSinks {
            acc: &mut acc,
            owd: Some(&mut owd),
            frames: None,
        };
        assert_eq!(r.on_message(&buf, 1000, 2_001_000_000, &mut sinks), 3);
        assert_eq!(r.on_message(b"9876", 0, 2_001_000_000, &mut sinks), 0);
        // A repeated netmeter connect datagram is long enough for a header: still none.
        let cookie = crate::wire::Cookie::from_random(&[7; 36]);
        let hello = crate::wire::udp_connect_with_cookie(&cookie);
        assert_eq!(r.on_message(&hello, 0, 2_001_000_000, &mut sinks), 0);
        assert_eq!((r.datagrams(), r.bytes(), r.messages()), (3, 3000, 1));
        let c = acc.counts();
        assert_eq!((c.highest_seq, c.received, c.lost), (3, 3, 0));
        assert_eq!(owd.samples, 3);
    }
}
