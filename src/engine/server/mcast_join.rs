//! The server's side of multicast `--receivers` (issue 23 item 3): a netmeter client
//! asks this server, on a control connection like a test's (the pre-shared key proved
//! by the door when this server has one), to join its group for its test. The request
//! is judged as a test is (`receivers::server::check` against `--server-max-duration`;
//! a test slot under `--max-tests`), the join is made (on the interface the request
//! names, else the one the control connection came in on, else the route's) with `engine::multicast`'s
//! receiver socket, the answer is state 0x43 with `{"joined": true}` or the sentence
//! why not, and once the client's FIN, the duration plus grace, an error or the
//! client's disconnect ended it (`receivers::listen`), the figures follow with 0x43
//! again. The membership is dropped with the socket when this returns.

use super::audit::Entry;
use super::policy::{Answer, Reason, Refusal};
use super::{Shared, SlotGuard, canon, shown};
use crate::engine::ctrl::Ctrl;
use crate::engine::multicast::join_socket;
use crate::engine::multicast::receivers::listen::listen;
use crate::engine::multicast::receivers::server::{Left, check};
use crate::wire::mcast_join::{JoinAnswer, JoinRequest};
use crate::wire::{ErrCode, State};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

fn answer(ctrl: &mut Ctrl, a: &JoinAnswer) -> bool {
    ctrl.send_state(State::NetmeterMcast).is_ok()
        && ctrl.send_json(a, "the multicast receiver's answer").is_ok()
}

/// Refuse the join: the client gets `why` in the answer, the log a line, the audit log
/// and metrics the refusal.
fn refuse(shared: &Shared, mut ctrl: Ctrl, entry: &mut Entry, r: Refusal) {
    shared.log(&format!(
        "refused a multicast join from {}: {}",
        shown(entry.peer),
        r.message
    ));
    answer(
        &mut ctrl,
        &JoinAnswer {
            error: Some(r.message.clone()),
            ..Default::default()
        },
    );
    ctrl.close_gracefully(Duration::from_millis(500));
    entry.refused = Some(r);
}

/// A join this server does not take (its checks, or the join failing).
fn not_taken(why: String) -> Refusal {
    Refusal {
        reason: Reason::Params,
        answer: Answer::Error(ErrCode::RecvParams),
        message: why,
    }
}

/// The interface holding the control connection's local address, unless loopback.
fn control_interface(ctrl: &Ctrl) -> Option<String> {
    let local = canon(ctrl.sock.local_addr().ok()?.ip());
    if local.is_loopback() {
        return None;
    }
    crate::host::probe::interface_for(local).map(|i| i.name)
}

/// Serve one join request on `ctrl` from `peer`. Returns whether a membership ran.
pub(super) fn serve(
    shared: &Arc<Shared>,
    mut ctrl: Ctrl,
    entry: &mut Entry,
    req: &JoinRequest,
    peer: SocketAddr,
) -> bool {
    let cap = shared.cfg.policy.max_duration_s.map(Duration::from_secs);
    let mut plan = match check(req, cap) {
        Ok(p) => p,
        Err(why) => {
            refuse(shared, ctrl, entry, not_taken(why));
            return false;
        }
    };
    // The server's own UDP listener holds its port: a group there would reach it too.
    if plan.port == shared.local.port() {
        let why = format!(
            "--receivers: the group's port {} is this server's own port; send to another (-p) and name the receivers' control port as HOST:{}",
            plan.port, plan.port
        );
        refuse(shared, ctrl, entry, not_taken(why));
        return false;
    }
    // No interface asked for: the one the sender's control connection came in on
    // (a receiver's route to the group may not exist, or lead elsewhere).
    if plan.group.dev.is_none() {
        plan.group.dev = control_interface(&ctrl);
    }
    // A membership holds a test slot for its whole life, as a test does.
    let taken = shared.active.fetch_add(1, Ordering::AcqRel);
    let _slot = SlotGuard(shared.clone());
    if let Some(r) = shared.cfg.policy.busy(taken) {
        refuse(shared, ctrl, entry, r);
        return false;
    }
    let sock = match join_socket(&plan.group, plan.source, plan.port) {
        Ok(s) => s,
        Err(e) => {
            refuse(
                shared,
                ctrl,
                entry,
                not_taken(format!("--receivers: this receiver cannot join: {e:#}")),
            );
            return false;
        }
    };
    shared.touch();
    let client = plan.sender.unwrap_or_else(|| canon(peer.ip()));
    shared.log(&format!(
        "multicast receiver for {}: joined {} port {}{} for {:.1} s, hearing {client}",
        shown(peer),
        plan.group.addr,
        plan.port,
        plan.source
            .map_or(String::new(), |s| format!(" from source {s}")),
        plan.duration.as_secs_f64()
    ));
    // Live rows when asked and there are rows (`-i`); an older client never asks.
    let live = req.live && plan.interval.is_some();
    if !answer(
        &mut ctrl,
        &JoinAnswer {
            joined: true,
            live,
            ..Default::default()
        },
    ) {
        return true;
    }
    // The client says nothing more until it closes: any word or the end of the
    // connection means it is gone (as does a live row it cannot be sent).
    let ctrl_cell = std::cell::RefCell::new(&mut ctrl);
    let failed = std::cell::Cell::new(false);
    let mut gone = || {
        failed.get()
            || !matches!(
                ctrl_cell
                    .borrow_mut()
                    .poll_state(Duration::ZERO, "the sender"),
                Ok(None)
            )
    };
    let mut on_row = |row| {
        let a = JoinAnswer {
            row: Some(row),
            ..Default::default()
        };
        if live && !failed.get() && !answer(&mut ctrl_cell.borrow_mut(), &a) {
            failed.set(true);
        }
    };
    let (left, figures) = listen(
        &plan,
        &sock,
        client,
        &*shared.cfg.clock,
        &mut gone,
        &mut on_row,
    );
    drop(sock);
    let reply = match left {
        Left::Ended => JoinAnswer {
            figures: Some(figures),
            ..Default::default()
        },
        Left::Failed(why) => JoinAnswer {
            error: Some(why),
            ..Default::default()
        },
        Left::ClientGone => {
            shared.log(&format!(
                "multicast receiver for {}: the client left; the group is left",
                shown(peer)
            ));
            return true;
        }
    };
    answer(&mut ctrl, &reply);
    ctrl.close_gracefully(Duration::from_secs(2));
    shared.touch();
    true
}

#[cfg(test)]
mod tests {
    use super::super::{Server, ServerConfig};
    use crate::engine::Family;
    use crate::engine::multicast::receivers::ask::{Word, ask};
    use crate::engine::multicast::target::ReceiverHost;
    use crate::engine::output::Mode;
    use crate::wire::mcast_join::JoinRequest;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    fn server() -> (u16, Arc<AtomicBool>, std::thread::JoinHandle<bool>) {
        let cfg = ServerConfig {
            port: 0,
            bind: Some([127, 0, 0, 1].into()),
            family: Family::V4,
            one_off: false,
            policy: Default::default(),
            audit_log: None,
            metrics: None,
            idle_timeout: None,
            mode: Mode::Text,
            verbose: false,
            format: Default::default(),
            interval_s: 1.0,
            histograms: None,
            auth: None,
            psk: None,
            third_party: None,
            side: Default::default(),
            iperf2_layout: None,
            clock: crate::clock::system(),
        };
        let sink = crate::engine::output::sink(Box::new(std::io::sink()));
        let stop = Arc::new(AtomicBool::new(false));
        let server = Server::bind(cfg, sink, stop.clone()).unwrap();
        let port = server.port();
        (
            port,
            stop,
            std::thread::spawn(move || server.serve().is_ok()),
        )
    }

    /// Over loopback, the client's own connection code against the server: a group
    /// that is not multicast, or a join longer than this server allows, is refused
    /// with the server's sentence, and the server keeps serving.
    #[test]
    fn a_unicast_group_is_refused_with_a_sentence() {
        let (port, stop, serving) = server();
        let host = ReceiverHost {
            name: "r1".into(),
            host: "127.0.0.1".into(),
            port,
            dev: None,
        };
        let mut req = JoinRequest {
            group: "10.0.0.2".into(),
            dev: None,
            source: None,
            port: 5001,
            duration_ms: 1000,
            interval_ms: 0,
            trip_times: false,
            sender: None,
            live: false,
        };
        for (group, said) in [
            ("10.0.0.2", "'10.0.0.2' is not a multicast group"),
            ("239.1.1.1#own", "this server's own port"),
            ("239.1.1.1%no-such-dev0", "no-such-dev0"),
        ] {
            req.group = group.split('%').next().unwrap().into();
            req.dev = group.split_once('%').map(|(_, d)| d.into());
            req.port = if group.ends_with("#own") { port } else { 5001 };
            req.group = req.group.trim_end_matches("#own").into();
            let asking = ask(
                std::slice::from_ref(&host),
                &req,
                None,
                Duration::from_secs(10),
            );
            let w = asking.words.recv_timeout(Duration::from_secs(60)).unwrap();
            asking.close();
            match w {
                Word::Refused(0, why) => {
                    assert!(why.contains(said) && why.contains("--receivers"), "{why}");
                    assert!(!why.contains('\n'), "{why}");
                }
                other => panic!("{other:?}"),
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert!(serving.join().unwrap());
    }

    /// A membership holds a test slot (`--max-tests 1` here): while one sender's join
    /// stands (on `lo`), a second is refused as a busy test would be; once the first
    /// sender's connection closes, the server leaves the group and the slot is free.
    #[test]
    fn a_join_holds_a_test_slot_until_the_sender_leaves() {
        let (port, stop, serving) = server();
        let host = [ReceiverHost {
            name: "r1".into(),
            host: "127.0.0.1".into(),
            port,
            dev: None,
        }];
        let req = JoinRequest {
            group: "239.1.1.1".into(),
            dev: Some("lo".into()),
            source: None,
            port: 5001,
            duration_ms: 60_000,
            interval_ms: 0,
            trip_times: false,
            sender: None,
            live: false,
        };
        let wait = Duration::from_secs(60);
        let first = ask(&host, &req, None, Duration::from_secs(10));
        assert_eq!(first.words.recv_timeout(wait).unwrap(), Word::Joined(0));
        let second = ask(&host, &req, None, Duration::from_secs(10));
        match second.words.recv_timeout(wait).unwrap() {
            Word::Refused(0, why) => assert!(why.contains("--max-tests 1"), "{why}"),
            other => panic!("{other:?}"),
        }
        second.close();
        first.close();
        // The server notices the close at its next look (at most 100 ms apart).
        let deadline = crate::clock::mono_now() + wait;
        loop {
            let again = ask(&host, &req, None, Duration::from_secs(10));
            let w = again.words.recv_timeout(wait).unwrap();
            again.close();
            match w {
                Word::Joined(0) => break,
                Word::Refused(0, why) if why.contains("--max-tests") => {
                    assert!(crate::clock::mono_now() < deadline, "the slot stayed taken");
                    std::thread::sleep(Duration::from_millis(50));
                }
                other => panic!("{other:?}"),
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert!(serving.join().unwrap());
    }
}
