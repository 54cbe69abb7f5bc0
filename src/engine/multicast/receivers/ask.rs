//! The sender's control connections to its `--receivers`: one thread per receiver
//! (at most `MAX_RECEIVERS`) opens a control connection to the receiver's netmeter
//! server as a test would (cookie, parameters, the pre-shared key when the sender has
//! one), asks it to join (`mcast_join` in the extension request), and reports each
//! word it hears as a [`Word`] on a channel: joined or why not, then the figures, or
//! the connection's end. [`Conversation`](super::Conversation) decides what the words
//! mean; [`Asking::close`] ends every connection (a receiver then leaves the group).

use super::super::target::ReceiverHost;
use crate::auth::psk::{self, Psk};
use crate::control::{ClientFailure, ClientMachine, ClientStep};
use crate::engine::client::{ctrl_err, resolve, server_error};
use crate::engine::ctrl::{Ctrl, CtrlError};
use crate::engine::{CTRL_TIMEOUT, Family, TestError};
use crate::wire::mcast_join::{JoinAnswer, JoinRequest, LiveRow, ReceiverFigures};
use crate::wire::{self, Cookie, ExtRequest, Params, State};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a connection waiting for its receiver's figures looks whether the
/// conversation is over.
const LOOK: Duration = Duration::from_millis(100);

/// What one receiver's connection said.
#[derive(Debug, Clone, PartialEq)]
pub enum Word {
    Joined(usize),
    Refused(usize, String),
    Figures(usize, ReceiverFigures),
    /// The connection could not open, failed or closed: why.
    Closed(usize, String),
    /// Receiver `i` will send its interval rows live (before its `Joined`).
    Live(usize),
    /// One of receiver `i`'s live rows.
    Row(usize, LiveRow),
}

/// The connections being held.
pub struct Asking {
    pub words: Receiver<Word>,
    done: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Asking {
    /// Close every connection and wait for their threads (each looks at most
    /// `LOOK` apart, or ends its current bounded read).
    pub fn close(self) {
        self.done.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// Ask every receiver in `hosts` to join for `req`, with `psk` when the sender has a
/// key; `connect_timeout` bounds each connection's opening.
pub fn ask(
    hosts: &[ReceiverHost],
    req: &JoinRequest,
    psk: Option<&Psk>,
    connect_timeout: Duration,
) -> Asking {
    let (tx, words) = channel();
    let done = Arc::new(AtomicBool::new(false));
    let threads = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let (h, mut req, psk) = (h.clone(), req.clone(), psk.cloned());
            // `HOST%DEV`: this receiver joins on its interface DEV (else as asked).
            if h.dev.is_some() {
                req.dev.clone_from(&h.dev);
            }
            let (tx, done) = (tx.clone(), done.clone());
            std::thread::Builder::new()
                .name(format!("nm-rcv-{i}"))
                .spawn(move || {
                    let word = match talk(i, &h, &req, psk.as_ref(), connect_timeout, &tx, &done) {
                        Ok(()) => return,
                        // An iperf3 server (or an older netmeter) does not take joins.
                        Err(TestError::Client(e @ ClientFailure::NotMcastReceiver)) => {
                            Word::Refused(i, e.to_string())
                        }
                        Err(e) => Word::Closed(i, e.to_string()),
                    };
                    let _ = tx.send(word);
                })
        })
        .filter_map(Result::ok)
        .collect::<Vec<_>>();
    // A thread that could not start never says a word: the join wait settles it.
    Asking {
        words,
        done,
        threads,
    }
}

fn talk(
    i: usize,
    h: &ReceiverHost,
    req: &JoinRequest,
    key: Option<&Psk>,
    connect_timeout: Duration,
    tx: &Sender<Word>,
    done: &AtomicBool,
) -> Result<(), TestError> {
    let addr = resolve(&h.host, h.port, Family::Any)?;
    let sock = TcpStream::connect_timeout(&addr, connect_timeout).map_err(|e| match e.kind() {
        std::io::ErrorKind::ConnectionRefused => TestError::ConnectRefused(addr),
        _ => TestError::io_while(format!("unable to connect to {addr}"), e),
    })?;
    let mut ctrl = Ctrl::new(sock);
    let mut rnd = [0u8; wire::COOKIE_LEN - 1];
    crate::sock::random_bytes(&mut rnd)?;
    let cookie = Cookie::from_random(&rnd);
    ctrl.write(&cookie.0, "sending the cookie")
        .map_err(ctrl_err)?;
    let hello = match key {
        Some(_) => Some(super::super::super::psk::client_hello()?),
        None => None,
    };
    let ext = ExtRequest {
        version: wire::EXT_VERSION,
        psk: hello.as_ref().map(|(_, h)| h.clone()),
        mcast_join: Some(req.clone()),
        ..ExtRequest::default()
    };
    let mut machine = ClientMachine::new(Some(&ext));
    let mut joined = false;
    loop {
        // Before the join each word is due within CTRL_TIMEOUT; after it the figures
        // come when the test ended, which the conversation's own waits bound.
        let due = (!joined).then(|| crate::clock::mono_now() + CTRL_TIMEOUT);
        let Some(st) = wait_state(&mut ctrl, done, due)? else {
            return Ok(());
        };
        let now = crate::clock::mono_now();
        // After the join answer every 0x43 is a live row or the end's answer: the
        // control machine takes only the first two, so they are read here.
        let step = if joined && st == State::NetmeterMcast {
            Ok(ClientStep::ReadMcastAnswer)
        } else {
            machine.on_state(st, now)
        };
        match step {
            Ok(ClientStep::SendParams) => {
                let params = Params {
                    udp: Some(true),
                    parallel: 1.0,
                    netmeter: Some(ext.clone()),
                    client_version: Some(format!("netmeter {}", env!("CARGO_PKG_VERSION"))),
                    ..Params::default()
                };
                ctrl.send_json(&params, "sending the parameters")
                    .map_err(ctrl_err)?;
            }
            Ok(ClientStep::Authenticate) => {
                let (Some(key), Some((cn, _))) = (key, hello.as_ref()) else {
                    return Err(TestError::Client(ClientFailure::Unexpected {
                        got: State::NetmeterAuth,
                        expected: "the join answer",
                    }));
                };
                let bound = psk::bind_request(None);
                super::super::super::psk::client_answer(&mut ctrl, key, &cookie, cn, &bound)
                    .map_err(TestError::Psk)?;
            }
            Ok(ClientStep::ReadExtAnswer) => {
                // An older netmeter server answers the extension, then goes on to a
                // test: the machine refuses that next.
                let _: wire::ExtAnswer = ctrl
                    .read_json(wire::MAX_EXT_LEN, CTRL_TIMEOUT, "the extension answer")
                    .map_err(ctrl_err)?;
            }
            Ok(ClientStep::ReadMcastAnswer) => {
                let a: JoinAnswer = ctrl
                    .read_json(wire::MAX_RESULTS_LEN, CTRL_TIMEOUT, "the receiver's answer")
                    .map_err(ctrl_err)?;
                if let (Some(row), true, None, None) = (a.row, joined, &a.error, &a.figures) {
                    let _ = tx.send(Word::Row(i, row));
                    continue;
                }
                if a.live && a.joined && !joined {
                    // Said before `Joined`, so the sender knows it when it starts.
                    let _ = tx.send(Word::Live(i));
                }
                let word = match (a.error, a.figures, joined) {
                    (Some(why), _, false) => Word::Refused(i, why),
                    (Some(why), _, true) => Word::Closed(i, why),
                    (None, Some(f), true) => Word::Figures(i, f),
                    (None, _, false) if a.joined => Word::Joined(i),
                    _ => Word::Closed(i, "it sent an answer with nothing in it".into()),
                };
                let last = !matches!(word, Word::Joined(_));
                let _ = tx.send(word);
                if last {
                    ctrl.close_quietly();
                    return Ok(());
                }
                joined = true;
            }
            Ok(ClientStep::ReadServerError) => return Err(server_error(&mut ctrl)),
            Ok(step) => {
                return Err(TestError::UnexpectedStep {
                    step,
                    when: "in a multicast join",
                });
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Wait for the receiver's next state byte until `due` (then an error) or until the
/// conversation is over (`None`: the connection closes, and a joined receiver leaves
/// the group), looking at both at most [`LOOK`] apart.
fn wait_state(
    ctrl: &mut Ctrl,
    done: &AtomicBool,
    due: Option<std::time::Instant>,
) -> Result<Option<State>, TestError> {
    loop {
        if done.load(Ordering::Relaxed) {
            ctrl.close_quietly();
            return Ok(None);
        }
        if due.is_some_and(|d| crate::clock::mono_now() >= d) {
            return Err(TestError::Ctrl(CtrlError::Timeout(
                CTRL_TIMEOUT.as_secs_f64(),
                "the receiver's answer",
            )));
        }
        match ctrl.poll_state(LOOK, "the receiver's figures") {
            Ok(Some(st)) => return Ok(Some(st)),
            Ok(None) => {}
            Err(CtrlError::Interrupted(_)) => {}
            Err(e) => return Err(ctrl_err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    /// A receiver that accepts and never answers does not hold the sender: closing the
    /// conversation closes its connection at once (the listener sees the end well
    /// before its own 20 s read timeout, and before the 30 s the answer was due).
    #[test]
    fn a_silent_receivers_connection_closes_with_the_conversation() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let host = ReceiverHost {
            name: "silent".into(),
            host: "127.0.0.1".into(),
            port,
            dev: None,
        };
        let req = JoinRequest {
            group: "239.1.1.1".into(),
            dev: None,
            source: None,
            port: 5001,
            duration_ms: 1000,
            interval_ms: 0,
            trip_times: false,
            sender: None,
            live: false,
        };
        let asking = ask(&[host], &req, None, Duration::from_secs(10));
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut cookie = [0u8; wire::COOKIE_LEN];
        s.read_exact(&mut cookie).unwrap();
        asking.close();
        let mut rest = Vec::new();
        // EOF, not a timeout: the sender closed the connection.
        assert_eq!(s.read_to_end(&mut rest).unwrap(), 0);
    }
}
