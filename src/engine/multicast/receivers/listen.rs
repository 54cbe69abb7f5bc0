//! A `--receivers` membership's receive loop at the server: the socket already bound
//! and joined (as `engine::multicast`'s receiver joins), this accounts what arrives
//! with `account::Receiver` until [`Membership`] says to leave (the requesting
//! client's FIN, its duration plus grace, an error, the client gone) and returns why
//! and the figures owed to the client. The driver (the server's control session)
//! answers with them and drops the membership by dropping the socket.

use super::server::{Left, Membership, Plan, Step, figure_row, figures_for};
use crate::clock::Clock;
use crate::engine::multicast::account::{EndReason, Event, Receiver, Summary};
use crate::engine::multicast::{TICK, arrival_s};
use crate::wire::mcast_join::{LiveRow, ReceiverFigures};
use std::net::{IpAddr, UdpSocket};

/// Receive for `plan` on `sock` from `client`, joined at `clock.now()`. `client_gone`
/// is asked once per wait (at most [`TICK`] apart) whether the client's control
/// connection closed. The socket's read timeout is set here.
pub fn listen(
    plan: &Plan,
    sock: &UdpSocket,
    client: IpAddr,
    clock: &dyn Clock,
    client_gone: &mut dyn FnMut() -> bool,
    on_row: &mut dyn FnMut(LiveRow),
) -> (Left, ReceiverFigures) {
    let t0 = clock.now();
    let secs = || clock.now().saturating_duration_since(t0).as_secs_f64();
    let mut m = Membership::joined(plan, t0);
    let interval_s = plan.interval.map_or(0.0, |d| d.as_secs_f64());
    // The idle end is the membership's: a sender silent until then is accounted whole.
    let mut r = Receiver::new(interval_s, f64::MAX);
    let mut ended: Vec<Summary> = Vec::new();
    let mut k = 0u64;
    let mut buf = vec![0u8; 65536];
    if let Err(e) = sock.set_read_timeout(Some(TICK)) {
        m.on_error(format!("cannot set the socket's read timeout: {e}"));
    }
    loop {
        let left = match m.poll(clock.now()) {
            Step::Receive { .. } => None,
            Step::Leave(l) => Some(l),
            Step::Over => Some(Left::Ended),
        };
        if let Some(l) = left {
            keep(&mut ended, r.stop(secs()));
            return (l, figures_for(&ended, client, plan.trip_times));
        }
        if client_gone() {
            m.on_client_gone();
            continue;
        }
        let ev = match crate::sock::multicast::recv_stamped(sock, &mut buf) {
            Ok(d) => r.on_datagram(d.from, &buf[..d.len], secs(), arrival_s(&d, clock)),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                r.on_tick(secs())
            }
            Err(e) => {
                m.on_error(format!("receiving on the group failed: {e}"));
                continue;
            }
        };
        let fin = ev.iter().any(|e| {
            matches!(e, Event::Ended(s) if s.source.ip() == client && s.reason == EndReason::Fin)
        });
        for e in &ev {
            if let Event::Interval { source, row } = e
                && source.ip() == client
            {
                on_row(LiveRow {
                    k,
                    row: figure_row(row),
                });
                k += 1;
            }
        }
        keep(&mut ended, ev);
        if fin {
            m.on_fin();
        }
    }
}

/// Keep the ended streams (at most `account::MAX_SENDERS` are open at once; ended
/// ones of other senders are dropped here, only the client's are owed).
fn keep(ended: &mut Vec<Summary>, ev: Vec<Event>) {
    ended.extend(ev.into_iter().filter_map(|e| match e {
        Event::Ended(s) => Some(s),
        _ => None,
    }));
    // A sender restarting without end could grow this: the client's streams are few.
    if ended.len() > crate::engine::multicast::account::MAX_SENDERS {
        ended.drain(..ended.len() - crate::engine::multicast::account::MAX_SENDERS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::multicast::receivers::server::check;
    use crate::wire::iperf2::write_datagram_id;
    use crate::wire::mcast_join::JoinRequest;
    use std::time::UNIX_EPOCH;

    fn plan(port: u16) -> Plan {
        // A group to satisfy the checks; the loop itself only reads `sock`.
        check(
            &JoinRequest {
                group: "239.1.1.1".into(),
                dev: None,
                source: None,
                port,
                duration_ms: 30_000,
                interval_ms: 0,
                trip_times: true,
                sender: None,
                live: false,
            },
            None,
        )
        .unwrap()
    }

    fn send(from: &UdpSocket, to: std::net::SocketAddr, seq: i64) {
        let mut d = vec![0u8; 100];
        let now = crate::clock::system().wall();
        let t = now.duration_since(UNIX_EPOCH).unwrap();
        write_datagram_id(&mut d, seq, t.as_secs() as u32, t.subsec_micros());
        from.send_to(&d, to).unwrap();
    }

    /// Over loopback: the client's datagrams with every 5th missing, then its FIN,
    /// and another sender's on the same socket. The figures are the client's only,
    /// and the FIN ends the membership (not the 30 s plus grace).
    #[test]
    fn the_clients_fin_ends_it_and_the_figures_are_the_clients() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = sock.local_addr().unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        let other = UdpSocket::bind("127.0.0.2:0").unwrap();
        for seq in 1..=50 {
            if seq % 5 != 0 {
                send(&client, to, seq);
            }
            send(&other, to, seq);
        }
        send(&client, to, -51);
        let clock = crate::clock::system();
        let (left, f) = listen(
            &plan(to.port()),
            &sock,
            "127.0.0.1".parse().unwrap(),
            &*clock,
            &mut || false,
            &mut |_| {},
        );
        assert_eq!(left, Left::Ended);
        // The FIN counts as the last datagram, as iperf 2's receiver counts it.
        assert_eq!((f.sum.packets, f.sum.lost), (41, 10));
        assert_eq!(f.sum.bytes, 41 * 100);
        assert_eq!(f.owd.map(|o| o.count), Some(41));
    }

    #[test]
    fn the_clients_disconnect_ends_it() {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = sock.local_addr().unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        send(&client, to, 1);
        let clock = crate::clock::system();
        let mut asked = 0;
        let (left, f) = listen(
            &plan(to.port()),
            &sock,
            "127.0.0.1".parse().unwrap(),
            &*clock,
            &mut || {
                asked += 1;
                asked > 3
            },
            &mut |_| {},
        );
        assert_eq!(left, Left::ClientGone);
        assert!(f.sum.packets <= 1);
    }
}
