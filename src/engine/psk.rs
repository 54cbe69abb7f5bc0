//! The pre-shared-key exchange on a control connection (`--psk-file`): the I/O around
//! the pure proofs of `auth::psk`. The client's nonce travels in its parameters; the
//! server answers with state 0x41 and a challenge, the client with its proof
//! (docs/protocol.md, "Pre-shared key").

use super::CTRL_TIMEOUT;
use super::ctrl::{Ctrl, CtrlError};
use crate::auth::psk::{self, Nonce, Psk, PskError};
use crate::wire::{self, Cookie, PskChallenge, PskHello, PskResponse, State};
use std::time::Duration;

/// How long a client may take to answer the challenge.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the exchange did not authenticate.
#[derive(Debug, thiserror::Error)]
pub enum PskFailure {
    #[error("{0}")]
    Proof(#[from] PskError),
    #[error("the client sent no pre-shared-key nonce (it was started without --psk-file)")]
    NoHello,
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
    };
    Ok((cn, hello))
}

/// Client, after state 0x41: read the challenge, check the server's proof, answer with
/// ours (vouching for `bound`, see `auth::psk::bind_request`).
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
    let sn = psk::from_hex(&ch.server_nonce).ok_or(PskError::Malformed)?;
    key.verify_server(&cookie.0, cn, &sn, &ch.server_proof)?;
    let proof = key.client_proof(&cookie.0, cn, &sn, bound);
    ctrl.send_json(
        &PskResponse {
            client_proof: psk::to_hex(&proof),
        },
        "the pre-shared-key proof",
    )?;
    Ok(())
}

/// Server: challenge the client (a fresh nonce for this test) and check its answer.
pub fn server_challenge(
    ctrl: &mut Ctrl,
    key: &Psk,
    cookie: &Cookie,
    hello: Option<&PskHello>,
    bound: &Nonce,
) -> Result<(), PskFailure> {
    let hello = hello.ok_or(PskFailure::NoHello)?;
    let cn = psk::from_hex(&hello.client_nonce).ok_or(PskError::Malformed)?;
    let sn = fresh_nonce().map_err(PskFailure::Random)?;
    ctrl.send_state(State::NetmeterAuth)?;
    ctrl.send_json(
        &PskChallenge {
            server_nonce: psk::to_hex(&sn),
            server_proof: psk::to_hex(&key.server_proof(&cookie.0, &cn, &sn)),
        },
        "the pre-shared-key challenge",
    )?;
    let r: PskResponse = ctrl.read_json(
        wire::MAX_EXT_LEN,
        RESPONSE_TIMEOUT,
        "the pre-shared-key proof",
    )?;
    key.verify_client(&cookie.0, &cn, &sn, bound, &r.client_proof)?;
    Ok(())
}
