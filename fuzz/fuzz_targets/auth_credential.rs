//! The RSA credential path of a server that authenticates (`--rsa-private-key-path`,
//! `--authorized-users-path`), as `auth::ServerAuth::check` runs it on a test's
//! `authtoken`: the authorized users file (`Users::parse`), then `Verifier::admit`
//! (length cap, base64, RSA decryption with OAEP or PKCS#1 v1.5, iperf3's `sscanf`-style
//! credential reading, the time-skew check, the users lookup) and the replay check
//! (`ReplayGuard::first_use`), with `now` from the input.
//!
//! Input: a flags byte (bit 0: PKCS#1 v1.5 padding; bit 1: the rest is a credential's
//! plain text, sealed here with the key's public half so that the decryption succeeds
//! and the checks after it are reached; else the rest is the token as a client sent it),
//! 8 bytes of `now` (Unix seconds, little-endian), a length byte and that many bytes of
//! users file, then the token or the credential text.
//!
//! Invariants: a credential read from text reads back from its own text when both
//! fields can travel in it; a token that passed is refused as a replay the second time;
//! a sealed credential whose user is in the file, inside the skew window, passes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netmeter::auth::{
    AuthError, Credential, Padding, PrivateKey, PublicKey, ReplayGuard, Users, Verifier,
    fits_credential,
};
use std::path::Path;
use std::sync::OnceLock;

/// The test-only key of the unit tests (2048 bits), parsed once.
const KEY_PEM: &str = include_str!("../../src/auth/testdata/test-only-key.pem");
const SKEW_S: u32 = 10;

fn verifier(padding: Padding) -> &'static Verifier {
    static OAEP: OnceLock<Verifier> = OnceLock::new();
    static PKCS1: OnceLock<Verifier> = OnceLock::new();
    let cell = match padding {
        Padding::Oaep => &OAEP,
        Padding::Pkcs1v15 => &PKCS1,
    };
    cell.get_or_init(|| Verifier {
        key: PrivateKey::from_pem(KEY_PEM, Path::new("test-only-key.pem")).expect("test key"),
        padding,
        threshold_s: SKEW_S,
    })
}

fn public() -> &'static PublicKey {
    static KEY: OnceLock<PublicKey> = OnceLock::new();
    KEY.get_or_init(|| {
        let pem = verifier(Padding::Oaep).key.public_pem();
        PublicKey::from_pem(&pem, Path::new("public.pem")).expect("its public half")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let Some((now, rest)) = rest.split_first_chunk::<8>() else {
        return;
    };
    let now = i64::from_le_bytes(*now);
    let Some((&users_len, rest)) = rest.split_first() else {
        return;
    };
    let Some((users, body)) = rest.split_at_checked(usize::from(users_len)) else {
        return;
    };
    let users = Users::parse(&String::from_utf8_lossy(users));
    let padding = match flags & 1 {
        0 => Padding::Oaep,
        _ => Padding::Pkcs1v15,
    };
    let v = verifier(padding);
    let mut seen = ReplayGuard::default();
    let token = if flags & 2 == 0 {
        // The token as a client sent it (the parameters' `authtoken` is a JSON string).
        let Ok(token) = std::str::from_utf8(body) else {
            return;
        };
        token.to_string()
    } else {
        let Ok(cred) = Credential::parse(body) else {
            return;
        };
        if fits_credential(&cred.user) && fits_credential(&cred.password) {
            let again = Credential::parse(cred.text().as_bytes()).expect("its own text reads");
            assert_eq!(again, cred, "a credential reads back from its own text");
        }
        let token = match public().encrypt(&cred, padding) {
            Ok(t) => t,
            Err(AuthError::TooLongForKey { .. }) => return,
            Err(e) => panic!("sealing a credential that fits failed: {e}"),
        };
        let inside = now.saturating_sub(cred.ts).saturating_abs() <= i64::from(SKEW_S);
        if inside && users.allows(&cred.user, &cred.password) {
            let r = v.verify(Some(&token), &users, now, &mut seen);
            assert_eq!(
                r.ok().as_deref(),
                Some(cred.user.as_str()),
                "a good credential"
            );
            assert!(matches!(
                v.verify(Some(&token), &users, now, &mut seen),
                Err(AuthError::Replayed { .. })
            ));
            return;
        }
        token
    };
    if let Ok(user) = v.verify(Some(&token), &users, now, &mut seen) {
        let again = v.verify(Some(&token), &users, now, &mut seen);
        assert!(
            matches!(again, Err(AuthError::Replayed { .. })),
            "{user}: a replayed token passed"
        );
    }
    let _ = v.verify(None, &users, now, &mut seen);
});
