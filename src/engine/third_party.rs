//! The controller's side of a third-party test: ask server A (over its control port,
//! proving the pre-shared key) to run a client test toward B, and take back A's whole
//! report. `netmeter -c B --via A` and `netmeter mesh` call [`request`], `netmeter
//! scenario` [`request_keeping_partial`] (on a stop signal it asks A to stop the test
//! and takes back what A measured until then); the server's side is
//! `server::third_party`. docs/protocol.md, "Third-party tests".

use super::client::{ctrl_err, resolve, server_error};
use super::ctrl::Ctrl;
use super::{CTRL_TIMEOUT, Family, Stopped, TestError};
use crate::auth::psk::{self, Psk};
use crate::clock::Clock;
use crate::control::{ClientFailure, ClientMachine, ClientStep};
use crate::report::Report;
use crate::wire::{self, Cookie, ExtRequest, Params, ThirdPartyAnswer, ThirdPartyRequest};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// Where to send a third-party request and how long to wait for its answer.
#[derive(Debug, Clone)]
pub struct Controller {
    /// The host that runs the test (A) and its control port.
    pub host: String,
    pub port: u16,
    pub psk: Psk,
    pub connect_timeout: Duration,
    /// How long the whole test may take (A's setup, the test, the results).
    pub wait: Duration,
    /// Give up a wait when a stop signal arrives (the CLI); off for library callers
    /// that stop by other means.
    pub stop_on_signal: bool,
    /// Where the conversation reads the time (`crate::clock::system()`).
    pub clock: Arc<dyn Clock>,
}

/// Ask `ctl.host` to run `req`; its report, or why there is none. A busy server (A's
/// slot, or B's, taken) is [`TestError::ThirdPartyBusy`] or iperf3's access denied:
/// see [`TestError::is_busy`]. Stopped by a signal, it tells A to stop
/// (`CLIENT_TERMINATE`) and returns the stop.
pub fn request(ctl: &Controller, req: &ThirdPartyRequest) -> Result<Report, TestError> {
    request_with(ctl, req, false)
}

/// How long a stopped controller waits for what A measured until it stopped: A stops
/// its test within a fraction of a second; a server older than the stop message runs
/// the test to its end, and then the stop is all there is.
pub const PARTIAL_WAIT: Duration = Duration::from_secs(5);

/// [`request`], but stopped by a signal it waits (at most [`PARTIAL_WAIT`]) for A's
/// partial report after telling it to stop: the report of what ran, with the stop
/// as its `error`. Without an answer in time, the stop.
pub fn request_keeping_partial(
    ctl: &Controller,
    req: &ThirdPartyRequest,
) -> Result<Report, TestError> {
    request_with(ctl, req, true)
}

fn request_with(
    ctl: &Controller,
    req: &ThirdPartyRequest,
    keep_partial: bool,
) -> Result<Report, TestError> {
    let addr = resolve(&ctl.host, ctl.port, Family::Any)?;
    let sock =
        TcpStream::connect_timeout(&addr, ctl.connect_timeout).map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused => TestError::ConnectRefused(addr),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
                TestError::ConnectTimeout {
                    server: addr,
                    secs: ctl.connect_timeout.as_secs_f64(),
                }
            }
            _ => TestError::io_while(format!("unable to connect to {addr}"), e),
        })?;
    let mut ctrl = Ctrl::new(sock);
    ctrl.stop_on_signal = ctl.stop_on_signal;
    let r = converse(ctl, req, &mut ctrl);
    if matches!(r, Err(TestError::Stopped(_))) {
        let _ = ctrl.send_state(wire::State::ClientTerminate);
        if keep_partial && let Some(partial) = partial_answer(&ctl.host, &mut ctrl) {
            return Ok(partial);
        }
    }
    r
}

/// After `CLIENT_TERMINATE`: A's answer with the report of what ran, if it comes
/// within [`PARTIAL_WAIT`] (further signals do not cut this bounded wait short).
fn partial_answer(host: &str, ctrl: &mut Ctrl) -> Option<Report> {
    ctrl.stop_on_signal = false;
    let st = ctrl
        .read_state(PARTIAL_WAIT, "the third-party server's partial report")
        .ok()?;
    if st != wire::State::NetmeterThirdParty {
        return None;
    }
    let a: ThirdPartyAnswer = ctrl
        .read_json(wire::MAX_RESULTS_LEN, PARTIAL_WAIT, "the partial report")
        .ok()?;
    ctrl.close_quietly();
    outcome(host, a).ok()
}

fn converse(
    ctl: &Controller,
    req: &ThirdPartyRequest,
    ctrl: &mut Ctrl,
) -> Result<Report, TestError> {
    let mut rnd = [0u8; wire::COOKIE_LEN - 1];
    crate::sock::random_bytes(&mut rnd)?;
    let cookie = Cookie::from_random(&rnd);
    ctrl.write(&cookie.0, "sending the cookie")
        .map_err(ctrl_err)?;
    let (cn, hello) = super::psk::client_hello()?;
    let ext = ExtRequest {
        version: wire::EXT_VERSION,
        psk: Some(hello),
        third_party: Some(req.clone()),
        ..ExtRequest::default()
    };
    let mut machine = ClientMachine::new(Some(&ext));
    let fields = req.bound_fields();
    let refs: Vec<&str> = fields.iter().map(String::as_str).collect();
    let bound = psk::bind_request(Some(&refs));
    let mut authenticated = false;
    loop {
        // After the proof the answer comes only once the test has run.
        let wait = if authenticated {
            ctl.wait
        } else {
            CTRL_TIMEOUT
        };
        let st = ctrl
            .read_state(wait, "the third-party server's answer")
            .map_err(ctrl_err)?;
        match machine.on_state(st, ctl.clock.now()) {
            Ok(ClientStep::SendParams) => {
                // A test-shaped parameter object: nothing here runs on the control
                // connection itself, the request is in `netmeter.third_party`.
                let params = Params {
                    tcp: Some(true),
                    parallel: 1.0,
                    netmeter: Some(ext.clone()),
                    client_version: Some(format!("netmeter {}", env!("CARGO_PKG_VERSION"))),
                    ..Params::default()
                };
                ctrl.send_json(&params, "sending the parameters")
                    .map_err(ctrl_err)?;
            }
            Ok(ClientStep::Authenticate) => {
                super::psk::client_answer(ctrl, &ctl.psk, &cookie, &cn, &bound)
                    .map_err(TestError::Psk)?;
                authenticated = true;
            }
            Ok(ClientStep::ReadThirdParty) => {
                let a: ThirdPartyAnswer = ctrl
                    .read_json(
                        wire::MAX_RESULTS_LEN,
                        CTRL_TIMEOUT,
                        "the third-party report",
                    )
                    .map_err(ctrl_err)?;
                ctrl.close_quietly();
                return outcome(&ctl.host, a);
            }
            Ok(ClientStep::ReadServerError) => return Err(server_error(ctrl)),
            Ok(step) => {
                return Err(TestError::UnexpectedStep {
                    step,
                    when: "in a third-party request",
                });
            }
            Err(ClientFailure::ServerTerminated) => return Err(Stopped::ServerTerminated.into()),
            Err(e) => return Err(e.into()),
        }
    }
}

/// The answer as a report or an error.
fn outcome(host: &str, a: ThirdPartyAnswer) -> Result<Report, TestError> {
    match (a.report, a.error) {
        (Some(doc), _) => {
            Report::from_document(&doc.to_string()).map_err(|e| TestError::ThirdParty {
                host: host.to_string(),
                why: format!("its report could not be read: {e}"),
            })
        }
        (None, Some(why)) if a.busy => Err(TestError::ThirdPartyBusy {
            host: host.to_string(),
            why,
        }),
        (None, Some(why)) => Err(TestError::ThirdParty {
            host: host.to_string(),
            why,
        }),
        (None, None) => Err(TestError::ThirdParty {
            host: host.to_string(),
            why: "it sent neither a report nor an error".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_become_reports_or_typed_errors() {
        let busy = outcome(
            "a",
            ThirdPartyAnswer {
                error: Some("the server is busy".into()),
                busy: true,
                report: None,
            },
        )
        .unwrap_err();
        assert!(busy.is_busy(), "{busy}");
        let refused = outcome(
            "a",
            ThirdPartyAnswer {
                error: Some("not allowed".into()),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(!refused.is_busy());
        assert_eq!(refused.to_string(), "a did not run the test: not allowed");
        assert!(outcome("a", ThirdPartyAnswer::default()).is_err());
        let doc = serde_json::json!({"start": {}, "intervals": [], "end": {}});
        assert!(
            outcome(
                "a",
                ThirdPartyAnswer {
                    report: Some(doc),
                    ..Default::default()
                }
            )
            .is_ok()
        );
    }
}
