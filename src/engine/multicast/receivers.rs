//! Multicast `--receivers H1,H2,...` (issue 23 item 3): the sender asks netmeter
//! servers to join its group for the test and send their figures back, so one run
//! reports what every receiver got. This is the sender's side of that conversation as
//! a pure machine (as `crate::control`'s are): the driver tells it what each receiver's
//! control connection said and when, with `now`; [`Conversation::poll`] says what to do
//! next; [`Conversation::results`] is one entry per receiver, each with its figures or
//! the reason it has none — never a missing receiver.
//!
//! The phases, and their bounded waits:
//!
//! | phase | ends when | or after |
//! |---|---|---|
//! | joining | every receiver answered (joined, refused, or its connection closed) | the join wait ([`JOIN_WAIT`]): the silent ones are "no answer" |
//! | sending | the driver's end condition (`-t`/`-n`): [`Conversation::sending_ended`] | |
//! | collecting | every joined receiver sent its figures or closed | the figures wait ([`FIGURES_WAIT`]) |
//!
//! Nobody joined: there is nobody to send to, the machine is done after joining.
//! The server's side (the join's checks and lifetime) is [`server`].

pub mod ask;
pub mod listen;
pub mod live;
pub mod render;
pub mod run;
pub mod server;

use crate::wire::mcast_join::{ReceiverFigures, printable_reason};
use std::time::{Duration, Instant};

/// How long the sender waits for every receiver's join answer (a server takes one of
/// its test slots, joins and answers: well under a second when it is there).
pub const JOIN_WAIT: Duration = Duration::from_secs(5);
/// How long the sender waits for the figures after its last datagram (the receivers
/// end their accounting at the FIN, or at their idle time when it was lost).
pub const FIGURES_WAIT: Duration = Duration::from_secs(15);
/// The most receivers one sender asks (`--receivers`' cap, where it is parsed).
pub use super::target::MAX_RECEIVERS;

/// Where one receiver stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Standing {
    /// Asked; no answer yet.
    Asked,
    /// It joined the group; its figures are due at the end.
    Joined,
    /// It refused (its sentence) or failed to join.
    Refused(String),
    /// It did not answer within the join wait.
    NoAnswer,
    /// Its control connection closed or failed (why) before its figures came.
    Gone(String),
    /// It joined and did not send figures within the figures wait.
    NoFigures,
    /// Its figures.
    Reported(ReceiverFigures),
}

impl Standing {
    /// Whether this receiver's conversation is over.
    fn settled(&self) -> bool {
        !matches!(self, Standing::Asked | Standing::Joined)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Joining { until: Instant },
    Sending,
    Collecting { until: Instant },
    Done,
}

/// What the driver does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Read the receivers' control connections until `until` (or a message).
    Wait { until: Instant },
    /// Send to the group (until the test's end, then [`Conversation::sending_ended`]);
    /// `joined` receivers are listening.
    Send { joined: usize },
    /// The conversation is over: render [`Conversation::results`].
    Done,
}

/// One receiver, as the user named it, and where it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct Receiver {
    pub name: String,
    pub standing: Standing,
}

/// The sender's conversation with all its receivers.
#[derive(Debug, Clone)]
pub struct Conversation {
    receivers: Vec<Receiver>,
    phase: Phase,
    figures_wait: Duration,
}

impl Conversation {
    /// Every receiver in `names` has been asked at `now` (a receiver whose connection
    /// could not even open is reported with [`Conversation::on_closed`] at once).
    pub fn new(
        names: &[String],
        now: Instant,
        join_wait: Duration,
        figures_wait: Duration,
    ) -> Conversation {
        Conversation {
            receivers: names
                .iter()
                .map(|n| Receiver {
                    name: n.clone(),
                    standing: Standing::Asked,
                })
                .collect(),
            phase: Phase::Joining {
                until: now + join_wait,
            },
            figures_wait,
        }
    }

    fn standing(&mut self, i: usize) -> Option<&mut Standing> {
        self.receivers.get_mut(i).map(|r| &mut r.standing)
    }

    /// Receiver `i` joined. Only an asked receiver can: a late answer (after the join
    /// wait) leaves it "no answer", since the datagrams went out without waiting.
    pub fn on_joined(&mut self, i: usize) {
        if let Some(s) = self.standing(i)
            && *s == Standing::Asked
        {
            *s = Standing::Joined;
        }
    }

    /// Receiver `i` refused or could not join: `why`, its sentence.
    pub fn on_refused(&mut self, i: usize, why: &str) {
        if let Some(s) = self.standing(i)
            && !s.settled()
        {
            *s = Standing::Refused(printable_reason(why));
        }
    }

    /// Receiver `i`'s control connection closed or failed (`why`).
    pub fn on_closed(&mut self, i: usize, why: &str) {
        if let Some(s) = self.standing(i)
            && !s.settled()
        {
            *s = Standing::Gone(printable_reason(why));
        }
    }

    /// Receiver `i` sent its figures. Figures from a receiver that never said it
    /// joined are a protocol error: it is [`Standing::Gone`] with that reason.
    pub fn on_figures(&mut self, i: usize, figures: ReceiverFigures) {
        let Some(s) = self.standing(i) else { return };
        *s = match s {
            Standing::Joined => match figures.checked() {
                Ok(f) => Standing::Reported(f),
                Err(why) => Standing::Gone(why),
            },
            Standing::Asked => Standing::Gone("it sent figures before joining".into()),
            _ => return,
        };
    }

    /// The sender sent its last datagram (its FIN) at `now`: the figures are due.
    pub fn sending_ended(&mut self, now: Instant) {
        if self.phase == Phase::Sending {
            self.phase = Phase::Collecting {
                until: now + self.figures_wait,
            };
        }
    }

    /// The receivers that joined.
    pub fn joined(&self) -> usize {
        self.receivers
            .iter()
            .filter(|r| matches!(r.standing, Standing::Joined | Standing::Reported(_)))
            .count()
    }

    /// What to do at `now`; a wait that ran out settles the silent receivers.
    pub fn poll(&mut self, now: Instant) -> Action {
        match self.phase {
            Phase::Joining { until } => {
                let waiting = self.waiting();
                if waiting && now < until {
                    return Action::Wait { until };
                }
                self.settle_all(&Standing::Asked, Standing::NoAnswer);
                if self.joined() == 0 {
                    self.phase = Phase::Done;
                    return Action::Done;
                }
                self.phase = Phase::Sending;
                Action::Send {
                    joined: self.joined(),
                }
            }
            Phase::Sending => Action::Send {
                joined: self.joined(),
            },
            Phase::Collecting { until } => {
                if self.waiting() && now < until {
                    return Action::Wait { until };
                }
                self.settle_all(&Standing::Joined, Standing::NoFigures);
                self.phase = Phase::Done;
                Action::Done
            }
            Phase::Done => Action::Done,
        }
    }

    /// Receivers whose connection is still worth reading.
    pub fn listening(&self) -> Vec<usize> {
        (0..self.receivers.len())
            .filter(|&i| !self.receivers[i].standing.settled())
            .collect()
    }

    fn waiting(&self) -> bool {
        self.receivers.iter().any(|r| match self.phase {
            Phase::Joining { .. } => r.standing == Standing::Asked,
            _ => r.standing == Standing::Joined,
        })
    }

    fn settle_all(&mut self, from: &Standing, to: Standing) {
        for r in &mut self.receivers {
            if r.standing == *from {
                r.standing = to.clone();
            }
        }
    }

    /// One entry per receiver, in the order named.
    pub fn results(&self) -> &[Receiver] {
        &self.receivers
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use crate::wire::mcast_join::FigureRow;

    fn names(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("h{i}")).collect()
    }

    fn figures(lost: u64) -> ReceiverFigures {
        ReceiverFigures {
            sum: FigureRow {
                end_s: 2.0,
                bytes: 1470 * (100 - lost),
                packets: 100 - lost,
                lost,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn start(n: usize) -> (Conversation, Instant) {
        let t0 = ManualClock::at_unix(0).now();
        (
            Conversation::new(&names(n), t0, JOIN_WAIT, FIGURES_WAIT),
            t0,
        )
    }

    #[test]
    fn all_answer_then_all_report() {
        let (mut c, t0) = start(3);
        assert_eq!(
            c.poll(t0),
            Action::Wait {
                until: t0 + JOIN_WAIT
            }
        );
        c.on_joined(0);
        c.on_joined(2);
        assert!(matches!(c.poll(t0), Action::Wait { .. }));
        c.on_joined(1);
        // Everyone answered: no need to wait out the join wait.
        assert_eq!(c.poll(t0), Action::Send { joined: 3 });
        let end = t0 + Duration::from_secs(3);
        c.sending_ended(end);
        c.on_figures(1, figures(10));
        assert_eq!(
            c.poll(end),
            Action::Wait {
                until: end + FIGURES_WAIT
            }
        );
        c.on_figures(0, figures(0));
        c.on_figures(2, figures(0));
        assert_eq!(c.poll(end), Action::Done);
        let r = c.results();
        assert_eq!(r[1].standing, Standing::Reported(figures(10)));
        assert_eq!(r[0].name, "h1");
    }

    #[test]
    fn a_silent_receiver_is_no_answer_after_the_join_wait() {
        let (mut c, t0) = start(2);
        c.on_joined(0);
        let before = t0 + JOIN_WAIT - Duration::from_millis(1);
        assert!(matches!(c.poll(before), Action::Wait { .. }));
        assert_eq!(c.poll(t0 + JOIN_WAIT), Action::Send { joined: 1 });
        // A late join answer does not make it a listener.
        c.on_joined(1);
        assert_eq!(c.results()[1].standing, Standing::NoAnswer);
        assert_eq!(c.listening(), vec![0]);
        let end = t0 + Duration::from_secs(9);
        c.sending_ended(end);
        c.on_figures(0, figures(0));
        assert_eq!(c.poll(end), Action::Done);
    }

    #[test]
    fn one_refuses_the_others_are_complete() {
        let (mut c, t0) = start(3);
        c.on_joined(0);
        c.on_refused(1, "'10.0.0.2' is not a multicast group\n");
        c.on_joined(2);
        assert_eq!(c.poll(t0), Action::Send { joined: 2 });
        c.sending_ended(t0);
        c.on_figures(0, figures(0));
        c.on_figures(2, figures(0));
        assert_eq!(c.poll(t0), Action::Done);
        assert_eq!(
            c.results()[1].standing,
            Standing::Refused("'10.0.0.2' is not a multicast group".into())
        );
    }

    #[test]
    fn one_disconnects_mid_test() {
        let (mut c, t0) = start(2);
        c.on_joined(0);
        c.on_joined(1);
        assert_eq!(c.poll(t0), Action::Send { joined: 2 });
        c.on_closed(1, "the connection was reset");
        let end = t0 + Duration::from_secs(2);
        c.sending_ended(end);
        c.on_figures(0, figures(3));
        // The gone receiver is not waited for.
        assert_eq!(c.poll(end), Action::Done);
        assert_eq!(
            c.results()[1].standing,
            Standing::Gone("the connection was reset".into())
        );
        // Nothing after the end changes a settled receiver.
        c.on_figures(1, figures(0));
        assert!(matches!(c.results()[1].standing, Standing::Gone(_)));
    }

    #[test]
    fn a_joined_receiver_without_figures_is_said_so_after_the_figures_wait() {
        let (mut c, t0) = start(1);
        c.on_joined(0);
        assert_eq!(c.poll(t0), Action::Send { joined: 1 });
        c.sending_ended(t0);
        assert!(matches!(c.poll(t0 + FIGURES_WAIT / 2), Action::Wait { .. }));
        assert_eq!(c.poll(t0 + FIGURES_WAIT), Action::Done);
        assert_eq!(c.results()[0].standing, Standing::NoFigures);
    }

    #[test]
    fn nobody_joined_nothing_is_sent() {
        let (mut c, t0) = start(2);
        c.on_closed(0, "connection refused");
        c.on_refused(1, "busy");
        assert_eq!(c.poll(t0), Action::Done);
        assert_eq!(c.joined(), 0);
    }

    #[test]
    fn figures_without_a_join_or_implausible_ones_are_a_protocol_error() {
        let (mut c, t0) = start(2);
        c.on_figures(0, figures(0));
        assert!(
            matches!(&c.results()[0].standing, Standing::Gone(w) if w.contains("before joining"))
        );
        c.on_joined(1);
        c.poll(t0);
        let mut bad = figures(0);
        bad.sum.end_s = f64::INFINITY;
        c.on_figures(1, bad);
        assert!(matches!(&c.results()[1].standing, Standing::Gone(w) if w.contains("non-finite")));
        // An index out of range is ignored, not a panic.
        c.on_joined(7);
        c.on_figures(7, figures(0));
    }

    proptest::proptest! {
        /// Whatever the receivers say, in any order and at any time, the conversation
        /// ends: each receiver named has exactly one entry, every one settled, and
        /// nothing is sent when nobody joined.
        #[test]
        fn every_receiver_ends_settled(
            n in 1usize..6,
            events in proptest::collection::vec((0u8..5, 0usize..7, 0u64..30_000), 0..40),
        ) {
            let t0 = ManualClock::at_unix(0).now();
            let mut c = Conversation::new(&names(n), t0, JOIN_WAIT, FIGURES_WAIT);
            let mut sent = false;
            for (kind, i, at_ms) in events {
                let now = t0 + Duration::from_millis(at_ms);
                match kind {
                    0 => c.on_joined(i),
                    1 => c.on_refused(i, "no"),
                    2 => c.on_closed(i, "reset"),
                    3 => c.on_figures(i, figures(i as u64)),
                    _ => {
                        if let Action::Send { joined } = c.poll(now) {
                            proptest::prop_assert!(joined > 0);
                            sent = true;
                            c.sending_ended(now);
                        }
                    }
                }
            }
            // Then nothing more is said: the waits run out one after the other.
            let mut now = t0 + Duration::from_secs(3600);
            let mut steps = 0;
            loop {
                steps += 1;
                proptest::prop_assert!(steps < 5, "the conversation did not end");
                match c.poll(now) {
                    Action::Done => break,
                    Action::Send { joined } => {
                        proptest::prop_assert!(joined > 0);
                        sent = true;
                        c.sending_ended(now);
                    }
                    Action::Wait { until } => {
                        proptest::prop_assert!(until > now);
                        now = until;
                    }
                }
            }
            proptest::prop_assert_eq!(c.results().len(), n);
            proptest::prop_assert!(c.results().iter().all(|r| r.standing.settled()));
            proptest::prop_assert!(c.listening().is_empty());
            if c.joined() > 0 {
                proptest::prop_assert!(sent);
            }
        }
    }
}
