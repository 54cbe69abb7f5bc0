//! `--connect-only`'s decisions: connect again at once, pause after a refusal so a
//! vanished listener is not hammered, and leave out a connection that ended after the
//! test did.

use std::time::{Duration, Instant};

/// Pause after a refused connection.
pub const REFUSED_PAUSE: Duration = Duration::from_millis(10);

/// How one short connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Answered; `connect()` took `connect_ns`, the whole transaction `total_ns`.
    Answered { connect_ns: u64, total_ns: u64 },
    /// The server refused the connection.
    Refused(String),
    /// Anything else (timeout, reset, no answer).
    Failed(String),
}

/// What to record for a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Answered { connect_ns: u64, total_ns: u64 },
    Failed(String),
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnStep {
    /// Open the next short connection.
    Connect,
    /// Wait until this instant first.
    Pause(Instant),
    /// The test is over.
    Stop,
}

/// One connect-only stream's state.
#[derive(Debug, Default)]
pub struct ConnectLoop {
    pause_until: Option<Instant>,
    answered: u64,
    failed: u64,
}

impl ConnectLoop {
    pub fn new() -> ConnectLoop {
        ConnectLoop::default()
    }

    /// The next step at `now`; `stopped`: the test has ended.
    pub fn poll(&mut self, now: Instant, stopped: bool) -> ConnStep {
        if stopped {
            return ConnStep::Stop;
        }
        match self.pause_until {
            Some(t) if now < t => ConnStep::Pause(t),
            _ => {
                self.pause_until = None;
                ConnStep::Connect
            }
        }
    }

    /// A connection ended at `now` with `outcome`; `stopped`: the test ended meanwhile
    /// (then it is not part of the test). What to record, if anything.
    pub fn on_outcome(&mut self, outcome: Outcome, now: Instant, stopped: bool) -> Option<Record> {
        if stopped {
            return None;
        }
        Some(match outcome {
            Outcome::Answered {
                connect_ns,
                total_ns,
            } => {
                self.answered += 1;
                Record::Answered {
                    connect_ns,
                    total_ns,
                }
            }
            Outcome::Refused(e) => {
                self.failed += 1;
                self.pause_until = Some(now + REFUSED_PAUSE);
                Record::Failed(e)
            }
            Outcome::Failed(e) => {
                self.failed += 1;
                Record::Failed(e)
            }
        })
    }

    /// Connections answered and failed so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.answered, self.failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_pauses_and_a_late_end_is_not_counted() {
        let t0 = crate::clock::mono_now();
        let mut c = ConnectLoop::new();
        assert_eq!(c.poll(t0, false), ConnStep::Connect);
        let r = c.on_outcome(Outcome::Refused("refused".into()), t0, false);
        assert_eq!(r, Some(Record::Failed("refused".into())));
        assert_eq!(c.poll(t0, false), ConnStep::Pause(t0 + REFUSED_PAUSE));
        assert_eq!(c.poll(t0 + REFUSED_PAUSE, false), ConnStep::Connect);
        let ok = Outcome::Answered {
            connect_ns: 1,
            total_ns: 2,
        };
        assert!(c.on_outcome(ok.clone(), t0, false).is_some());
        assert_eq!(c.on_outcome(ok, t0, true), None);
        assert_eq!(c.counts(), (1, 1));
        assert_eq!(c.poll(t0, true), ConnStep::Stop);
    }
}
