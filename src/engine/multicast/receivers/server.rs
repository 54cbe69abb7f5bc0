//! A netmeter server's side of `--receivers`, pure: whether it takes a join request
//! ([`check`]: a multicast group, a source of the group's family, a duration within the
//! server's cap), how long the membership lasts ([`Membership`]: the test's duration
//! plus [`GRACE`] from the join, then it is dropped; at once on an error or the
//! client's disconnect), and what it reports ([`figures_for`]: the streams heard from
//! the requesting client's address, summed). The I/O (the test slot, the socket, the
//! accounting with `account::Receiver`) asks these.

use crate::engine::multicast::account::{Owd, Row, Summary};
use crate::engine::multicast::target::{Group, parse_group};
use crate::wire::mcast_join::{FigureRow, JoinRequest, OwdFigures, ReceiverFigures};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How long a receiver stays joined after the sender's duration (the sender waits up
/// to `receivers::JOIN_WAIT` before it starts, and its FIN comes last).
pub const GRACE: Duration = Duration::from_secs(10);
/// The longest membership a server grants when it has no `--server-max-duration`.
pub const DEFAULT_MAX: Duration = Duration::from_secs(24 * 3600);
/// The shortest interval a request may ask for (as the client's `-i`).
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// A request the server takes: what to join and for how long.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub group: Group,
    pub source: Option<IpAddr>,
    pub port: u16,
    pub duration: Duration,
    pub interval: Option<Duration>,
    pub trip_times: bool,
    /// Where the datagrams come from, when the request said (else the control
    /// connection's peer).
    pub sender: Option<IpAddr>,
}

/// A unicast address of `group`'s family, or the sentence naming `what` and `s`.
fn unicast_of(s: &str, what: &str, group: &Group) -> Result<IpAddr, String> {
    let ip: IpAddr = s
        .parse()
        .map_err(|_| format!("--receivers: the {what} '{s}' is not an address"))?;
    if ip.is_multicast() || ip.is_unspecified() || ip.is_ipv4() != group.addr.is_ipv4() {
        return Err(format!(
            "--receivers: the {what} {ip} is not a unicast address of group {}'s family",
            group.addr
        ));
    }
    Ok(ip)
}

/// Whether this server takes `req` (its cap `max_duration`: `--server-max-duration`,
/// else [`DEFAULT_MAX`]); the refusal is one sentence for the requesting client.
pub fn check(req: &JoinRequest, max_duration: Option<Duration>) -> Result<Plan, String> {
    let spec = match &req.dev {
        Some(d) => format!("{}%{d}", req.group),
        None => req.group.clone(),
    };
    let group = parse_group(&spec).map_err(|e| format!("--receivers: {e}"))?;
    let source = match &req.source {
        None => None,
        Some(s) => Some(unicast_of(s, "source", &group)?),
    };
    let sender = match &req.sender {
        None => None,
        Some(s) => Some(unicast_of(s, "sender", &group)?),
    };
    if req.port == 0 {
        return Err("--receivers: the port must not be 0".into());
    }
    let duration = Duration::from_millis(req.duration_ms);
    let cap = max_duration.unwrap_or(DEFAULT_MAX);
    if duration.is_zero() || duration > cap {
        return Err(format!(
            "--receivers: a join for {:.1} s is outside this server's limit (up to {:.0} s)",
            duration.as_secs_f64(),
            cap.as_secs_f64()
        ));
    }
    let interval = match Duration::from_millis(req.interval_ms) {
        d if d.is_zero() => None,
        d if d < MIN_INTERVAL => {
            return Err(format!(
                "--receivers: an interval of {} ms is below {} ms",
                req.interval_ms,
                MIN_INTERVAL.as_millis()
            ));
        }
        d => Some(d),
    };
    Ok(Plan {
        group,
        source,
        port: req.port,
        duration,
        interval,
        trip_times: req.trip_times,
        sender,
    })
}

/// Why a membership ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Left {
    /// Its time (the duration plus the grace) ran out, or the client's FIN ended it:
    /// send the figures.
    Ended,
    /// The client closed its control connection: nobody to report to.
    ClientGone,
    /// The socket failed (why): the client gets the sentence.
    Failed(String),
}

/// What the server's driver does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Keep receiving until `until` (or a datagram, or a control message).
    Receive { until: Instant },
    /// Leave the group now; [`Left`] says whether figures or an error are owed.
    Leave(Left),
    /// Left already: nothing more.
    Over,
}

/// One join's lifetime at the server.
#[derive(Debug, Clone)]
pub struct Membership {
    until: Instant,
    left: Option<Left>,
    reported: bool,
}

impl Membership {
    /// Joined at `now` for `plan`: it lasts the plan's duration plus [`GRACE`].
    pub fn joined(plan: &Plan, now: Instant) -> Membership {
        Membership {
            until: now + plan.duration + GRACE,
            left: None,
            reported: false,
        }
    }

    /// The sender's FIN arrived: the test is over.
    pub fn on_fin(&mut self) {
        self.left.get_or_insert(Left::Ended);
    }

    /// The client's control connection closed.
    pub fn on_client_gone(&mut self) {
        self.left.get_or_insert(Left::ClientGone);
    }

    /// Receiving failed (`why`).
    pub fn on_error(&mut self, why: String) {
        self.left.get_or_insert(Left::Failed(why));
    }

    /// What to do at `now`. [`Step::Leave`] comes once; then [`Step::Over`].
    pub fn poll(&mut self, now: Instant) -> Step {
        if self.reported {
            return Step::Over;
        }
        if self.left.is_none() && now >= self.until {
            self.left = Some(Left::Ended);
        }
        match &self.left {
            None => Step::Receive { until: self.until },
            Some(l) => {
                self.reported = true;
                Step::Leave(l.clone())
            }
        }
    }
}

pub fn figure_row(r: &Row) -> FigureRow {
    FigureRow {
        start_s: r.start_s,
        end_s: r.end_s,
        bytes: r.bytes,
        packets: r.packets,
        lost: r.lost,
        out_of_order: r.out_of_order,
        jitter_s: r.jitter_s,
    }
}

fn owd_figures(o: &Owd) -> Option<OwdFigures> {
    (o.count > 0).then_some(OwdFigures {
        min_s: o.min_s,
        mean_s: o.mean_s,
        max_s: o.max_s,
        count: o.count,
    })
}

/// The figures owed to the client at `client`: its stream's, from the ended streams
/// the group's receiver accounted (another sender on the same group is not the
/// client's). Several streams from the client's address (a restarted sender) are
/// summed, their rows kept in order; none: an empty sum (the client renders it as
/// "joined, no datagrams").
pub fn figures_for(summaries: &[Summary], client: IpAddr, trip_times: bool) -> ReceiverFigures {
    let mut out = ReceiverFigures::default();
    let mut owd: Option<OwdFigures> = None;
    for s in summaries.iter().filter(|s| s.source.ip() == client) {
        let r = figure_row(&s.sum);
        let sum = &mut out.sum;
        sum.end_s += r.end_s - r.start_s;
        sum.bytes += r.bytes;
        sum.packets += r.packets;
        sum.lost += r.lost;
        sum.out_of_order += r.out_of_order;
        // Jitter does not add: the worst stream's.
        sum.jitter_s = sum.jitter_s.max(r.jitter_s);
        out.intervals.extend(s.intervals.iter().map(figure_row));
        if let Some(o) = owd_figures(&s.owd) {
            owd = Some(match owd {
                None => o,
                Some(a) => {
                    let count = a.count + o.count;
                    OwdFigures {
                        min_s: a.min_s.min(o.min_s),
                        max_s: a.max_s.max(o.max_s),
                        mean_s: (a.mean_s * a.count as f64 + o.mean_s * o.count as f64)
                            / count as f64,
                        count,
                    }
                }
            });
        }
    }
    out.intervals
        .truncate(crate::wire::mcast_join::MAX_FIGURE_ROWS);
    out.owd = if trip_times { owd } else { None };
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use crate::engine::multicast::account::EndReason;

    fn req(group: &str) -> JoinRequest {
        JoinRequest {
            group: group.into(),
            dev: None,
            source: None,
            port: 5201,
            duration_ms: 2000,
            interval_ms: 1000,
            trip_times: false,
            sender: None,
            live: false,
        }
    }

    #[test]
    fn a_multicast_group_is_taken() {
        let mut r = req("232.1.1.1");
        r.source = Some("10.0.0.1".into());
        r.dev = Some("veth1".into());
        let p = check(&r, None).unwrap();
        assert_eq!(p.group.dev.as_deref(), Some("veth1"));
        assert_eq!(p.source, Some("10.0.0.1".parse().unwrap()));
        assert_eq!(p.interval, Some(Duration::from_secs(1)));
        assert!(check(&req("ff3e::8000:1"), None).is_ok());
    }

    #[test]
    fn a_unicast_group_is_refused_with_a_sentence() {
        let e = check(&req("10.0.0.2"), None).unwrap_err();
        assert_eq!(
            e,
            "--receivers: '10.0.0.2' is not a multicast group (224.0.0.0/4 or ff00::/8)"
        );
        assert!(check(&req("not-an-address"), None).is_err());
    }

    #[test]
    fn sources_ports_durations_and_intervals_are_bounded() {
        let mut r = req("239.1.1.1");
        r.source = Some("fd00::1".into());
        assert!(check(&r, None).unwrap_err().contains("family"));
        r.source = Some("239.1.1.2".into());
        assert!(check(&r, None).is_err());
        let mut r = req("239.1.1.1");
        r.sender = Some("fd00::1".into());
        assert!(check(&r, None).unwrap_err().contains("the sender fd00::1"));
        r.sender = Some("10.0.0.1".into());
        assert_eq!(
            check(&r, None).unwrap().sender,
            r.sender.unwrap().parse().ok()
        );
        let mut r = req("239.1.1.1");
        r.port = 0;
        assert!(check(&r, None).is_err());
        let mut r = req("239.1.1.1");
        r.duration_ms = 20_000;
        let e = check(&r, Some(Duration::from_secs(10))).unwrap_err();
        assert!(e.contains("20.0 s") && e.contains("up to 10 s"), "{e}");
        r.duration_ms = 0;
        assert!(check(&r, None).is_err());
        r.duration_ms = u64::MAX;
        assert!(check(&r, None).is_err());
        let mut r = req("239.1.1.1");
        r.interval_ms = 5;
        assert!(check(&r, None).is_err());
        r.interval_ms = 0;
        assert_eq!(check(&r, None).unwrap().interval, None);
    }

    #[test]
    fn the_membership_ends_at_its_time_on_error_and_on_disconnect() {
        let p = check(&req("239.1.1.1"), None).unwrap();
        let t0 = ManualClock::at_unix(0).now();
        let mut m = Membership::joined(&p, t0);
        let end = t0 + Duration::from_secs(2) + GRACE;
        assert_eq!(m.poll(t0), Step::Receive { until: end });
        assert_eq!(m.poll(end), Step::Leave(Left::Ended));
        assert_eq!(m.poll(end), Step::Over);

        let mut m = Membership::joined(&p, t0);
        m.on_client_gone();
        m.on_fin();
        assert_eq!(m.poll(t0), Step::Leave(Left::ClientGone));

        let mut m = Membership::joined(&p, t0);
        m.on_error("ENODEV".into());
        assert_eq!(m.poll(t0), Step::Leave(Left::Failed("ENODEV".into())));

        let mut m = Membership::joined(&p, t0);
        m.on_fin();
        assert_eq!(m.poll(t0), Step::Leave(Left::Ended));
    }

    fn summary(src: &str, lost: u64, owd_ms: f64) -> Summary {
        let row = Row {
            id: 1,
            start_s: 0.0,
            end_s: 2.0,
            bytes: 1470 * 90,
            packets: 90,
            lost,
            out_of_order: 1,
            jitter_s: 0.0001,
        };
        Summary {
            source: src.parse().unwrap(),
            reason: EndReason::Fin,
            sum: row,
            owd: Owd {
                min_s: owd_ms / 1e3,
                mean_s: owd_ms / 1e3,
                max_s: owd_ms / 1e3,
                count: 90,
            },
            intervals: vec![row, row],
        }
    }

    #[test]
    fn the_figures_are_the_clients_streams_only() {
        let heard = [
            summary("10.0.0.1:4000", 10, 1.0),
            summary("10.0.0.9:4000", 50, 9.0),
            summary("10.0.0.1:4001", 0, 3.0),
        ];
        let f = figures_for(&heard, "10.0.0.1".parse().unwrap(), true);
        assert_eq!(f.sum.packets, 180);
        assert_eq!(f.sum.lost, 10);
        assert_eq!(f.sum.out_of_order, 2);
        assert_eq!(f.sum.end_s, 4.0);
        assert_eq!(f.intervals.len(), 4);
        let o = f.owd.unwrap();
        assert_eq!((o.min_s, o.max_s, o.count), (0.001, 0.003, 180));
        assert!((o.mean_s - 0.002).abs() < 1e-12);
        assert!(f.clone().checked().is_ok());
        assert_eq!(
            figures_for(&heard, "10.0.0.1".parse().unwrap(), false).owd,
            None
        );
        let none = figures_for(&heard, "10.0.0.5".parse().unwrap(), true);
        assert_eq!((none.sum.packets, none.owd), (0, None));
    }
}
