//! The end of an iperf 2 UDP test as pure logic: the client sends a FIN (the next
//! sequence number, negated) and waits for the server report datagram, sending another
//! FIN (the number after, negated) every 10 ms it waits, for 2 s in all: iperf 2's
//! `Client::AwaitServerFinPacket` (RETRYTIMER 10 ms, RETRYCOUNT 200). Time comes in as
//! the duration since the wait began; the driver does the sends and reads.

use crate::wire::iperf2::ServerReport;
use std::time::Duration;

/// Between FINs while no report has come (iperf 2's RETRYTIMER).
pub const FIN_RETRY: Duration = Duration::from_millis(10);
/// FINs sent in all before giving up (the first and iperf 2's 200 retries).
pub const FIN_TRIES: u32 = 201;

/// What the driver does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinStep {
    /// Send a FIN datagram carrying this (negative) sequence number.
    Send(i64),
    /// Wait this long for a datagram, then ask again.
    Wait(Duration),
    /// No report came: the server's figures stay unknown.
    GiveUp,
}

/// One stream's FIN exchange.
#[derive(Debug, Clone)]
pub struct FinWait {
    /// The next sequence number a FIN negates.
    next_seq: i64,
    sent: u32,
    due: Duration,
}

impl FinWait {
    /// The exchange of a stream that sent sequence numbers `1..next_seq`: the first
    /// FIN is due at once.
    pub fn new(next_seq: i64) -> FinWait {
        FinWait {
            next_seq: next_seq.max(1),
            sent: 0,
            due: Duration::ZERO,
        }
    }

    /// What to do at `now` (since the wait began).
    pub fn poll(&mut self, now: Duration) -> FinStep {
        if now < self.due {
            return FinStep::Wait(self.due - now);
        }
        if self.sent >= FIN_TRIES {
            return FinStep::GiveUp;
        }
        let seq = -self.next_seq;
        self.next_seq = self.next_seq.saturating_add(1);
        self.sent += 1;
        self.due = now + FIN_RETRY;
        FinStep::Send(seq)
    }

    /// A datagram from the server: its report, or `None` for a stale header
    /// acknowledgement or a datagram too short to be one (keep waiting).
    pub fn on_datagram(&mut self, d: &[u8]) -> Option<ServerReport> {
        ServerReport::parse(d).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::iperf2::{CLIENTHDRACK, HDR_ACK_LEN, SERVER_REPORT_LEN};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn fins_count_on_from_the_next_sequence_every_10_ms() {
        let mut f = FinWait::new(101);
        assert_eq!(f.poll(ms(0)), FinStep::Send(-101));
        assert_eq!(f.poll(ms(4)), FinStep::Wait(ms(6)));
        assert_eq!(f.poll(ms(10)), FinStep::Send(-102));
        // A driver that overslept sends one FIN, not the ones it missed.
        assert_eq!(f.poll(ms(55)), FinStep::Send(-103));
        assert_eq!(f.poll(ms(60)), FinStep::Wait(ms(5)));
        assert_eq!(f.sent, 3);
    }

    #[test]
    fn gives_up_after_two_seconds_of_fins() {
        let mut f = FinWait::new(1);
        let mut now = ms(0);
        let mut sends = 0;
        loop {
            match f.poll(now) {
                FinStep::Send(s) => {
                    sends += 1;
                    assert_eq!(s, -sends);
                }
                FinStep::Wait(d) => now += d,
                FinStep::GiveUp => break,
            }
        }
        assert_eq!(sends, FIN_TRIES as i64);
        assert_eq!(now, ms(10 * u64::from(FIN_TRIES)));
    }

    #[test]
    fn a_header_ack_or_a_scrap_is_not_the_report() {
        let mut f = FinWait::new(1);
        let mut ack = vec![0u8; HDR_ACK_LEN];
        ack[..4].copy_from_slice(&CLIENTHDRACK.to_be_bytes());
        assert_eq!(f.on_datagram(&ack), None);
        assert_eq!(f.on_datagram(&[1, 2, 3]), None);
        let mut rep = vec![0u8; SERVER_REPORT_LEN];
        rep[16 + 28..16 + 32].copy_from_slice(&42u32.to_be_bytes());
        assert_eq!(f.on_datagram(&rep).map(|r| r.datagrams), Some(42));
    }
}
