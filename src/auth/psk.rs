//! Pre-shared-key authentication between two netmeters (`--psk-file`): an HMAC-SHA256
//! challenge-response on the control connection, bound to the test's cookie, so that no
//! key and no password ever crosses the wire (docs/protocol.md, "Pre-shared key").
//!
//! The exchange (version 2), after the client's parameters (which carry its nonce `cn`
//! and `"version": 2`):
//!
//! ```text
//! server → client   0x41, {"version": 2, "server_nonce": sn}
//! client → server   {"client_proof": HMAC(K, "netmeter-psk-v2 client" | cookie | cn | sn | bound)}
//! server → client   0x41, {"server_proof": HMAC(K, "netmeter-psk-v2 server" | cookie | cn | sn | bound)}
//!                   (or SERVER_ERROR / IEAUTHTEST when the client's proof is wrong)
//! ```
//!
//! * The client proves first. Until it has, the server sends nothing that depends on
//!   the key (a random nonce only), so a connection that does not hold the key gets no
//!   material to test guesses against offline. Version 1 sent the server's proof
//!   first, which let anyone who connected check key guesses at leisure.
//! * The server's nonce is fresh for every test (32 bytes from the kernel), so a client
//!   proof captured from one test is worth nothing in the next: it answers another
//!   challenge. The cookie ties the proof to this control connection's test.
//! * Both ends prove the key: a client does not run a test, or take a third-party
//!   report, from a server that cannot answer its nonce.
//! * The two proofs carry different labels, so one side's proof can never be reflected
//!   back as the other's.
//! * `bound` is SHA-256 of a third-party request ([`bind_request`]; 32 zero bytes for
//!   a plain test): the key holder vouches for exactly that request, which an
//!   on-path attacker cannot swap for another.
//! * Proofs are compared in constant time (`hmac`'s `verify_slice`, built on `subtle`).
//! * A key must hold at least 128 bits of randomness ([`strength_problem`]): with the
//!   client proving first an eavesdropper, not just anyone who connects, could still
//!   test guesses against a captured exchange, so a guessable key is refused.
//!
//! Crates: `hmac` (RustCrypto) over the `sha2` already used for the users file; both
//! well kept, no unsafe of their own, and constant-time verification built in. Pure:
//! the nonces come in as arguments; only [`Psk::read`] touches a file.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::path::Path;

type HmacSha256 = Hmac<Sha256>;

/// Bytes of a nonce and of a proof.
pub const NONCE_LEN: usize = 32;
/// The shortest binary key accepted (128 bits).
pub const MIN_KEY_LEN: usize = 16;
/// The shortest hex or base64 key accepted (hex: 128 bits; base64: 192).
pub const MIN_TEXT_KEY_LEN: usize = 32;
/// The version of the exchange this build speaks (`PskHello`/`PskChallenge.version`);
/// peers without it speak version 1 (the server proved first).
pub const VERSION: u32 = 2;
/// The command that makes a good key, given in every refusal of a weak one.
pub const MAKE_KEY: &str = "netmeter generate psk > FILE";
/// The longest key file read.
const MAX_KEY_FILE: u64 = 4096;

const SERVER_LABEL: &[u8] = b"netmeter-psk-v2 server";
const CLIENT_LABEL: &[u8] = b"netmeter-psk-v2 client";

/// A nonce or a proof.
pub type Nonce = [u8; NONCE_LEN];

/// Why an exchange failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PskError {
    #[error("the peer's proof is not {NONCE_LEN} bytes of hex")]
    Malformed,
    #[error("the peer does not have the same pre-shared key")]
    WrongKey,
}

/// Why `key` cannot hold 128 bits of randomness, or `None` when it can. A key is
/// hex (at least 32 digits), base64 (at least 32 characters, standard or URL-safe
/// alphabet, `=` padding allowed) or raw bytes that are not text (at least 16); a
/// printable phrase (anything else that is valid UTF-8) is refused whatever its
/// length, and so is a key of fewer than 8 distinct characters ("0000…", "abab…").
pub fn strength_problem(key: &[u8]) -> Option<String> {
    let is_hex = |b: &u8| b.is_ascii_hexdigit();
    let is_b64 = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_');
    let body = key
        .strip_suffix(b"==")
        .or_else(|| key.strip_suffix(b"="))
        .unwrap_or(key);
    let text = std::str::from_utf8(key).is_ok();
    let distinct = {
        let mut seen = [false; 256];
        key.iter().for_each(|&b| seen[b as usize] = true);
        seen.iter().filter(|&&s| s).count()
    };
    if !key.is_empty() && key.iter().all(is_hex) {
        if key.len() < MIN_TEXT_KEY_LEN {
            return Some(format!(
                "{} hex digits (at least {MIN_TEXT_KEY_LEN} are needed)",
                key.len()
            ));
        }
    } else if !body.is_empty() && body.iter().all(is_b64) {
        if key.len() < MIN_TEXT_KEY_LEN {
            return Some(format!(
                "{} base64 characters (at least {MIN_TEXT_KEY_LEN} are needed)",
                key.len()
            ));
        }
    } else if text {
        return Some("a printable phrase, not random bytes in hex or base64".into());
    } else if key.len() < MIN_KEY_LEN {
        return Some(format!(
            "{} bytes (at least {MIN_KEY_LEN} random bytes are needed)",
            key.len()
        ));
    }
    (distinct < 8).then(|| format!("made of only {distinct} distinct characters"))
}

/// The pre-shared key.
#[derive(Clone)]
pub struct Psk(Vec<u8>);

impl std::fmt::Debug for Psk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Psk(<{} bytes>)", self.0.len())
    }
}

impl Psk {
    /// A key from its bytes, refused unless it can hold 128 bits of randomness
    /// ([`strength_problem`]).
    pub fn new(key: &[u8]) -> Result<Psk, String> {
        if let Some(why) = strength_problem(key) {
            return Err(format!(
                "the pre-shared key is {why}; a key needs 128 random bits: make one with `{MAKE_KEY}` (or `head -c 32 /dev/urandom | base64 > FILE`)"
            ));
        }
        Ok(Psk(key.to_vec()))
    }

    /// The key file's contents, without trailing whitespace (a newline an editor adds
    /// must not make two copies of one key differ).
    pub fn read(path: &Path) -> Result<Psk, String> {
        let shown = path.display();
        let meta = std::fs::metadata(path)
            .map_err(|e| format!("cannot read the pre-shared key file {shown}: {e}"))?;
        if meta.len() > MAX_KEY_FILE {
            return Err(format!(
                "the pre-shared key file {shown} is larger than {MAX_KEY_FILE} bytes; is it the right file?"
            ));
        }
        let bytes = std::fs::read(path)
            .map_err(|e| format!("cannot read the pre-shared key file {shown}: {e}"))?;
        let end = bytes
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .map_or(0, |i| i + 1);
        Psk::new(&bytes[..end]).map_err(|e| format!("{shown}: {e}"))
    }

    fn mac(&self, label: &[u8], parts: &[&[u8]]) -> HmacSha256 {
        // Invariant: HMAC takes a key of any length (`new_from_slice` never fails for it).
        let mut m = HmacSha256::new_from_slice(&self.0).expect("HMAC accepts any key length");
        m.update(label);
        for p in parts {
            // Length-prefixed, so no two different part lists hash the same.
            m.update(&(p.len() as u32).to_be_bytes());
            m.update(p);
        }
        m
    }

    /// The server's proof for one test, sent only once the client's has checked.
    pub fn server_proof(&self, cookie: &[u8], cn: &Nonce, sn: &Nonce, bound: &Nonce) -> Nonce {
        self.mac(SERVER_LABEL, &[cookie, cn, sn, bound])
            .finalize()
            .into_bytes()
            .into()
    }

    /// The client's proof for one test (`bound`: [`bind_request`] or zeros).
    pub fn client_proof(&self, cookie: &[u8], cn: &Nonce, sn: &Nonce, bound: &Nonce) -> Nonce {
        self.mac(CLIENT_LABEL, &[cookie, cn, sn, bound])
            .finalize()
            .into_bytes()
            .into()
    }

    /// Check the server's proof (hex) in constant time.
    pub fn verify_server(
        &self,
        cookie: &[u8],
        cn: &Nonce,
        sn: &Nonce,
        bound: &Nonce,
        proof_hex: &str,
    ) -> Result<(), PskError> {
        let got = from_hex(proof_hex).ok_or(PskError::Malformed)?;
        self.mac(SERVER_LABEL, &[cookie, cn, sn, bound])
            .verify_slice(&got)
            .map_err(|_| PskError::WrongKey)
    }

    /// Check the client's proof (hex) in constant time.
    pub fn verify_client(
        &self,
        cookie: &[u8],
        cn: &Nonce,
        sn: &Nonce,
        bound: &Nonce,
        proof_hex: &str,
    ) -> Result<(), PskError> {
        let got = from_hex(proof_hex).ok_or(PskError::Malformed)?;
        self.mac(CLIENT_LABEL, &[cookie, cn, sn, bound])
            .verify_slice(&got)
            .map_err(|_| PskError::WrongKey)
    }
}

/// SHA-256 over a third-party request's fields, each length-prefixed: what the client's
/// proof vouches for. `None` (a plain test) binds 32 zero bytes.
pub fn bind_request(fields: Option<&[&str]>) -> Nonce {
    let Some(fields) = fields else {
        return [0; NONCE_LEN];
    };
    let mut h = Sha256::new();
    h.update(b"netmeter-third-party-v1");
    for f in fields {
        h.update((f.len() as u32).to_be_bytes());
        h.update(f.as_bytes());
    }
    h.finalize().into()
}

/// Lower-case hex.
pub fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A nonce or proof from hex: exactly [`NONCE_LEN`] bytes, else `None`.
pub fn from_hex(s: &str) -> Option<Nonce> {
    let s = s.as_bytes();
    if s.len() != NONCE_LEN * 2 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16);
    let mut out = [0u8; NONCE_LEN];
    for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
        *o = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const COOKIE: &[u8] = b"abcdefghijklmnopqrstuvwxyz234567abcde";

    fn key() -> Psk {
        Psk::new(b"q3Vt9XkPz1L0mWc7Rb2Ya8NdHe5Jf4Gs").unwrap()
    }

    #[test]
    fn both_proofs_check_with_the_same_key() {
        let (cn, sn, bound) = ([1; 32], [2; 32], bind_request(None));
        let k = key();
        let sp = to_hex(&k.server_proof(COOKIE, &cn, &sn, &bound));
        let cp = to_hex(&k.client_proof(COOKIE, &cn, &sn, &bound));
        assert_eq!(k.verify_server(COOKIE, &cn, &sn, &bound, &sp), Ok(()));
        assert_eq!(k.verify_client(COOKIE, &cn, &sn, &bound, &cp), Ok(()));
        // The labels differ: a server proof is no client proof (no reflection).
        assert_ne!(sp, cp);
        assert_eq!(
            k.verify_client(COOKIE, &cn, &sn, &bound, &sp),
            Err(PskError::WrongKey)
        );
    }

    #[test]
    fn another_key_is_refused() {
        let (cn, sn, bound) = ([1; 32], [2; 32], [0; 32]);
        let other = Psk::new(b"0f1e2d3c4b5a69788796a5b4c3d2e1f0").unwrap();
        let cp = to_hex(&other.client_proof(COOKIE, &cn, &sn, &bound));
        assert_eq!(
            key().verify_client(COOKIE, &cn, &sn, &bound, &cp),
            Err(PskError::WrongKey)
        );
    }

    /// A response captured from one test, replayed against the next test's challenge
    /// (a fresh server nonce), or on another cookie, or for another request, fails.
    #[test]
    fn a_captured_response_does_not_replay() {
        let k = key();
        let (cn, sn1, sn2) = ([7; 32], [8; 32], [9; 32]);
        let bound = bind_request(None);
        let captured = to_hex(&k.client_proof(COOKIE, &cn, &sn1, &bound));
        assert_eq!(
            k.verify_client(COOKIE, &cn, &sn1, &bound, &captured),
            Ok(())
        );
        assert_eq!(
            k.verify_client(COOKIE, &cn, &sn2, &bound, &captured),
            Err(PskError::WrongKey)
        );
        let other_cookie = b"bbcdefghijklmnopqrstuvwxyz234567abcde";
        assert_eq!(
            k.verify_client(other_cookie, &cn, &sn1, &bound, &captured),
            Err(PskError::WrongKey)
        );
        let asked = bind_request(Some(&["10.0.0.2", "5201", "-t", "5"]));
        assert_eq!(
            k.verify_client(COOKIE, &cn, &sn1, &asked, &captured),
            Err(PskError::WrongKey)
        );
    }

    #[test]
    fn request_binding_separates_fields() {
        // "ab"+"c" and "a"+"bc" must not bind the same.
        assert_ne!(
            bind_request(Some(&["ab", "c"])),
            bind_request(Some(&["a", "bc"]))
        );
        assert_ne!(bind_request(Some(&[])), bind_request(None));
    }

    #[test]
    fn malformed_proofs_are_refused_without_panic() {
        let k = key();
        for bad in ["", "zz", &"0".repeat(63), &"g".repeat(64), &"é".repeat(32)] {
            assert_eq!(
                k.verify_server(COOKIE, &[0; 32], &[0; 32], &[0; 32], bad),
                Err(PskError::Malformed),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn hex_round_trips() {
        let n: Nonce = std::array::from_fn(|i| (i * 37) as u8);
        assert_eq!(from_hex(&to_hex(&n)), Some(n));
        assert_eq!(from_hex(&to_hex(&n).to_uppercase()), Some(n));
    }

    #[test]
    fn short_keys_and_trailing_newlines() {
        assert!(Psk::new(b"short").unwrap_err().contains(MAKE_KEY));
        let dir = std::env::temp_dir().join(format!("nm-psk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::write(&a, "q3Vt9XkPz1L0mWc7Rb2Ya8NdHe5Jf4Gs\n").unwrap();
        std::fs::write(&b, "q3Vt9XkPz1L0mWc7Rb2Ya8NdHe5Jf4Gs").unwrap();
        let (ka, kb) = (Psk::read(&a).unwrap(), Psk::read(&b).unwrap());
        let p = ka.server_proof(COOKIE, &[0; 32], &[1; 32], &[0; 32]);
        assert_eq!(p, kb.server_proof(COOKIE, &[0; 32], &[1; 32], &[0; 32]));
        assert!(
            Psk::read(&dir.join("missing"))
                .unwrap_err()
                .contains("cannot read")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Keys that cannot hold 128 random bits are refused with the command that makes
    /// one; what that command (and `openssl rand -hex 16`, raw random bytes) makes is
    /// taken.
    #[test]
    fn weak_keys_are_refused_and_random_ones_taken() {
        for weak in [
            &b"0123456789abcdef0123456789abcde"[..], // 31 hex digits
            b"c2hvcnQgYmFzZTY0IGtleQ==",             // 24 base64 characters
            b"correct horse battery staple and more words", // a phrase
            b"a shared key of 32 bytes, at least",
            b"00000000000000000000000000000000000000", // one distinct character
            b"abababababababababababababababababab",
            b"\xff\xfe\x01\x02", // 4 random bytes
        ] {
            let e = Psk::new(weak).unwrap_err();
            assert!(e.contains("128 random bits") && e.contains(MAKE_KEY), "{e}");
        }
        let b64 = "7y0Y1hQ3u7m0o2a8v5cXg7J4e0LrT+Kq9s/ZpD6bWfE="; // head -c 32 | base64
        let hex = "9f86d081884c7d659a2feaa0c55ad015"; // openssl rand -hex 16
        let url = "7y0Y1hQ3u7m0o2a8v5cXg7J4e0LrT-Kq9s_ZpD6bWfE";
        let raw: Vec<u8> = (0u8..16).map(|i| i.wrapping_mul(97) ^ 0xa5).collect();
        for good in [b64.as_bytes(), hex.as_bytes(), url.as_bytes(), &raw] {
            assert_eq!(strength_problem(good), None, "{good:?}");
        }
    }
}
