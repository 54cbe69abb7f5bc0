//! The pre-shared-key exchange on a control connection (`--psk-file`) around the pure
//! proofs of `auth::psk`. The client's nonce travels in its parameters; the server
//! answers with state 0x41 and its nonce, the client with its proof, and only then the
//! server, with state 0x41 again, with its own (docs/protocol.md, "Pre-shared key").
//! The client's side is blocking I/O here; the server's side is two steps
//! (`server_opening`, `server_verdict`) that the server's door drives without a thread.

use super::CTRL_TIMEOUT;
use super::ctrl::{Ctrl, CtrlError};
use crate::auth::psk::{self, Nonce, Psk, PskError};
use crate::wire::{self, Cookie, ErrCode, PskChallenge, PskConfirm, PskHello, PskResponse, State};
use std::time::Duration;

/// How long a client may take to answer the challenge.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest proof message read (a proof is 64 hex digits in a small object).
pub const MAX_PROOF_LEN: u32 = 1024;

/// Why the exchange did not authenticate.
#[derive(Debug, thiserror::Error)]
pub enum PskFailure {
    #[error("{0}")]
    Proof(#[from] PskError),
    #[error("the client sent no pre-shared-key nonce (it was started without --psk-file)")]
    NoHello,
    /// The two ends speak different versions of the exchange (`auth::psk::VERSION`).
    #[error(
        "the {peer} speaks version {theirs} of the pre-shared-key exchange and this netmeter version {ours}: update netmeter on the {peer}"
    )]
    Version {
        peer: &'static str,
        theirs: u32,
        ours: u32,
    },
    /// The server checked our proof and refused it.
    #[error("the server refused our proof: it does not have the same pre-shared key")]
    Refused,
    /// The server answered our proof with something else than its own.
    #[error("the server answered our proof with {0} instead of its own proof")]
    Unexpected(String),
    #[error(transparent)]
    Ctrl(#[from] CtrlError),
    #[error("no random bytes for the nonce: {0}")]
    Random(std::io::Error),
}

/// 32 fresh random bytes.
pub fn fresh_nonce() -> std::io::Result<Nonce> {
    let mut n = [0u8; psk::NONCE_LEN];
    crate::sock::random_bytes(&mut n)?;
    Ok(n)
}

/// The client's opening: its nonce, and the hello the parameters carry.
pub fn client_hello() -> std::io::Result<(Nonce, PskHello)> {
    let cn = fresh_nonce()?;
    let hello = PskHello {
        client_nonce: psk::to_hex(&cn),
        version: psk::VERSION,
    };
    Ok((cn, hello))
}

/// Client, after state 0x41: read the server's nonce, answer with our proof (vouching
/// for `bound`, see `auth::psk::bind_request`), then check the server's proof.
pub fn client_answer(
    ctrl: &mut Ctrl,
    key: &Psk,
    cookie: &Cookie,
    cn: &Nonce,
    bound: &Nonce,
) -> Result<(), PskFailure> {
    let ch: PskChallenge = ctrl.read_json(
        wire::MAX_EXT_LEN,
        CTRL_TIMEOUT,
        "the pre-shared-key challenge",
    )?;
    if ch.version != psk::VERSION {
        return Err(PskFailure::Version {
            peer: "server",
            theirs: ch.version.max(1),
            ours: psk::VERSION,
        });
    }
    let sn = psk::from_hex(&ch.server_nonce).ok_or(PskError::Malformed)?;
    let proof = key.client_proof(&cookie.0, cn, &sn, bound);
    ctrl.send_json(
        &PskResponse {
            client_proof: psk::to_hex(&proof),
        },
        "the pre-shared-key proof",
    )?;
    match ctrl.read_state(RESPONSE_TIMEOUT, "the server's pre-shared-key proof")? {
        State::NetmeterAuth => {}
        State::ServerError => {
            let (code, _) = ctrl.read_error_trailer(CTRL_TIMEOUT)?;
            return Err(if code == ErrCode::AuthTest {
                PskFailure::Refused
            } else {
                PskFailure::Unexpected(format!("the error \"{}\"", code.describe()))
            });
        }
        other => return Err(PskFailure::Unexpected(format!("state {other:?}"))),
    }
    let c: PskConfirm = ctrl.read_json(
        MAX_PROOF_LEN,
        CTRL_TIMEOUT,
        "the server's pre-shared-key proof",
    )?;
    key.verify_server(&cookie.0, cn, &sn, bound, &c.server_proof)?;
    Ok(())
}

/// Server, on the parameters' hello: the client's nonce, a fresh nonce of ours and the
/// challenge that carries it (nothing in it depends on the key). A client of another
/// version of the exchange is refused here, before anything is sent.
pub fn server_opening(
    hello: Option<&PskHello>,
) -> Result<(Nonce, Nonce, PskChallenge), PskFailure> {
    let hello = hello.ok_or(PskFailure::NoHello)?;
    if hello.version != psk::VERSION {
        return Err(PskFailure::Version {
            peer: "client",
            theirs: hello.version.max(1),
            ours: psk::VERSION,
        });
    }
    let cn = psk::from_hex(&hello.client_nonce).ok_or(PskError::Malformed)?;
    let sn = fresh_nonce().map_err(PskFailure::Random)?;
    let ch = PskChallenge {
        version: psk::VERSION,
        server_nonce: psk::to_hex(&sn),
        server_proof: None,
    };
    Ok((cn, sn, ch))
}

/// Server, on the client's response: check its proof and, only if it holds, our own
/// proof to send back.
pub fn server_verdict(
    key: &Psk,
    cookie: &Cookie,
    (cn, sn): (&Nonce, &Nonce),
    bound: &Nonce,
    r: &PskResponse,
) -> Result<PskConfirm, PskFailure> {
    key.verify_client(&cookie.0, cn, sn, bound, &r.client_proof)?;
    Ok(PskConfirm {
        server_proof: psk::to_hex(&key.server_proof(&cookie.0, cn, sn, bound)),
    })
}
