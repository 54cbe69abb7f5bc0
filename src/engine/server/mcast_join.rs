//! The server's side of multicast `--receivers` (issue 23 item 3): a netmeter client
//! asks this server, on a control connection like a test's (the pre-shared key proved
//! by the door when this server has one), to join its group for its test. The request
//! is judged as a test is (`receivers::server::check` against `--server-max-duration`;
//! a test slot under `--max-tests`), the join is made with `engine::multicast`'s
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

/// Serve one join request on `ctrl` from `peer`. Returns whether a membership ran.
pub(super) fn serve(
    shared: &Arc<Shared>,
    mut ctrl: Ctrl,
    entry: &mut Entry,
    req: &JoinRequest,
    peer: SocketAddr,
) -> bool {
    let cap = shared.cfg.policy.max_duration_s.map(Duration::from_secs);
    let plan = match check(req, cap) {
        Ok(p) => p,
        Err(why) => {
            refuse(shared, ctrl, entry, not_taken(why));
            return false;
        }
    };
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
            refuse(shared, ctrl, entry, not_taken(format!("{e:#}")));
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
    if !answer(
        &mut ctrl,
        &JoinAnswer {
            joined: true,
            ..Default::default()
        },
    ) {
        return true;
    }
    // The client says nothing more until it closes: any word or the end of the
    // connection means it is gone.
    let mut gone = || !matches!(ctrl.poll_state(Duration::ZERO, "the sender"), Ok(None));
    let (left, figures) = listen(&plan, &sock, client, &*shared.cfg.clock, &mut gone);
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
