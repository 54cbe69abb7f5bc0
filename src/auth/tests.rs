//! Unit tests of the authentication module, without sockets. The fixtures in `testdata/`
//! are a key made for these tests only and two tokens real iperf3 clients made with its
//! public half (`iperf3 -c ... -d --username alice --rsa-public-key-path`, password
//! `secret`): 3.12 (PKCS#1 v1.5) and 3.22 (OAEP). See `testdata/README.md`.

// Test code only (its unwraps are assertions): compiled for tests, whatever the
// parent module declares.
#![cfg(test)]

use super::*;
use proptest::prelude::*;
use std::sync::OnceLock;

const KEY_PEM: &str = include_str!("testdata/test-only-key.pem");
const TOKEN_312: &str = include_str!("testdata/token-iperf3-3.12-pkcs1.txt");
const TOKEN_322: &str = include_str!("testdata/token-iperf3-3.22-oaep.txt");
/// The time stamps those two clients wrote.
const TS_312: i64 = 1795392776;
const TS_322: i64 = 1795392768;
/// `printf '%s' '{alice}secret' | sha256sum`
const ALICE_SECRET: &str = "27b307f21eb6137ab56a3c80a93a5db840e79a697f80f3381c87edaa79a83f6f";

fn key() -> &'static PrivateKey {
    static KEY: OnceLock<PrivateKey> = OnceLock::new();
    KEY.get_or_init(|| PrivateKey::from_pem(KEY_PEM, Path::new("fixture")).unwrap())
}

fn public() -> PublicKey {
    PublicKey(RsaPublicKey::from(&key().0))
}

fn users() -> Users {
    Users::parse(&format!("# test users\nalice,{ALICE_SECRET}\n"))
}

fn client(password: &str, padding: Padding) -> ClientAuth {
    ClientAuth {
        user: "alice".into(),
        password: password.into(),
        key: public(),
        padding,
    }
}

/// A verifier with its own replay memory, as one server has.
struct Server {
    v: Verifier,
    seen: ReplayGuard,
}

impl Server {
    fn verify(
        &mut self,
        token: Option<&str>,
        users: &Users,
        now: i64,
    ) -> Result<String, AuthError> {
        self.v.verify(token, users, now, &mut self.seen)
    }
}

fn verifier(padding: Padding) -> Server {
    Server {
        v: Verifier {
            key: key().clone(),
            padding,
            threshold_s: DEFAULT_SKEW_S,
        },
        seen: ReplayGuard::default(),
    }
}

#[test]
fn decrypts_the_tokens_real_iperf3_clients_made() {
    let c = key().decrypt(TOKEN_322.trim(), Padding::Oaep).unwrap();
    assert_eq!(
        (c.user.as_str(), c.password.as_str(), c.ts),
        ("alice", "secret", TS_322)
    );
    let c = key().decrypt(TOKEN_312.trim(), Padding::Pkcs1v15).unwrap();
    assert_eq!(
        (c.user.as_str(), c.password.as_str(), c.ts),
        ("alice", "secret", TS_312)
    );
    // And the server accepts them at the time they were made.
    let mut v = verifier(Padding::Oaep);
    assert_eq!(
        v.verify(Some(TOKEN_322.trim()), &users(), TS_322 + 3),
        Ok("alice".into())
    );
}

#[test]
fn the_other_padding_does_not_decrypt() {
    assert_eq!(
        key().decrypt(TOKEN_322.trim(), Padding::Pkcs1v15),
        Err(AuthError::Undecryptable)
    );
    assert_eq!(
        key().decrypt(TOKEN_312.trim(), Padding::Oaep),
        Err(AuthError::Undecryptable)
    );
}

#[test]
fn our_tokens_round_trip_with_both_paddings() {
    for padding in [Padding::Oaep, Padding::Pkcs1v15] {
        let a = client("secret", padding);
        let t1 = a.token_at(1_700_000_000).unwrap();
        let t2 = a.token_at(1_700_000_000).unwrap();
        assert_ne!(t1, t2, "{padding:?}: encryption must be randomised");
        assert_eq!(t1.len(), 344, "base64 of a 256-byte block, with padding");
        let mut v = verifier(padding);
        assert_eq!(
            v.verify(Some(&t1), &users(), 1_700_000_005),
            Ok("alice".into())
        );
    }
}

/// The other direction of the cross-check: OpenSSL (what iperf3 decrypts with) reads
/// what we encrypted. Needs the `openssl` command; the iperf3 interop tests
/// (tests/integration/auth.rs) check the same through iperf3 itself.
#[test]
fn openssl_decrypts_our_tokens() {
    if std::process::Command::new("openssl")
        .arg("version")
        .output()
        .is_err()
    {
        eprintln!(
            "openssl_decrypts_our_tokens: no openssl command; covered by auth:: interop tests"
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("netmeter-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key_path = dir.join("key.pem");
    std::fs::write(&key_path, KEY_PEM).unwrap();
    for (padding, mode) in [(Padding::Oaep, "oaep"), (Padding::Pkcs1v15, "pkcs1")] {
        let token = client("s3cret!", padding).token_at(42).unwrap();
        let sealed = dir.join(format!("{mode}.bin"));
        std::fs::write(&sealed, B64.decode(token).unwrap()).unwrap();
        let out = std::process::Command::new("openssl")
            .args(["pkeyutl", "-decrypt", "-inkey"])
            .arg(&key_path)
            .arg("-in")
            .arg(&sealed)
            .args(["-pkeyopt", &format!("rsa_padding_mode:{mode}")])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "user: alice\npwd:  s3cret!\nts:   42"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn credential_text_is_iperf3s_format() {
    let c = Credential {
        user: "alice".into(),
        password: "secret".into(),
        ts: 1795392768,
    };
    assert_eq!(c.text(), "user: alice\npwd:  secret\nts:   1795392768");
    assert_eq!(Credential::parse(c.text().as_bytes()), Ok(c));
}

#[test]
fn credential_parse_follows_sscanf() {
    let ok = |s: &str| Credential::parse(s.as_bytes()).map(|c| (c.user, c.password, c.ts));
    // Any whitespace run (or none) where the format has whitespace; trailing bytes ignored.
    assert_eq!(
        ok("user:bob\tpwd:x ts:-5 tail"),
        Ok(("bob".into(), "x".into(), -5))
    );
    assert_eq!(
        ok("user: a\npwd:  b\nts:   +7\n"),
        Ok(("a".into(), "b".into(), 7))
    );
    // A vertical tab is whitespace to sscanf too.
    assert_eq!(
        ok("user:\x0bbob\x0bpwd:x\x0bts:1"),
        Ok(("bob".into(), "x".into(), 1))
    );
    // A password with a space ends the %s early: "ts:" does not follow.
    assert_eq!(ok("user: a\npwd:  b c\nts:   7"), Err(AuthError::Malformed));
    for bad in [
        "",
        "user: a",
        "user: a\npwd:  b",
        "user: a\npwd:  b\nts:   x",
        "usr: a\npwd: b\nts: 1",
    ] {
        assert_eq!(ok(bad), Err(AuthError::Malformed), "{bad:?}");
    }
    assert_eq!(
        ok("user: a\npwd:  b\nts:   99999999999999999999"),
        Err(AuthError::Malformed)
    );
}

#[test]
fn password_hash_is_sha256_of_braced_user_and_password() {
    assert_eq!(password_hash("alice", "secret"), ALICE_SECRET);
}

#[test]
fn users_file_is_read_as_iperf3_reads_it() {
    let text = format!(
        "# comment,with comma\r\n\nnocomma\n,,alice,{ALICE_SECRET},extra\r\nbob,\n#carol,{}\ndave,{}\r",
        password_hash("carol", "pw"),
        password_hash("dave", "pw")
    );
    let u = Users::parse(&text);
    assert_eq!(
        u.len(),
        2,
        "alice and dave; comments, blanks and 'bob,' skipped"
    );
    assert!(u.allows("alice", "secret"));
    assert!(u.allows("dave", "pw"));
    assert!(!u.allows("carol", "pw"), "commented out");
    assert!(!u.allows("bob", ""));
    assert!(!u.allows("alice", "Secret"));
    assert!(!u.allows("Alice", "secret"));
    // iperf3 compares the hash as text: upper-case hex never matches.
    let upper = Users::parse(&format!("alice,{}\n", ALICE_SECRET.to_uppercase()));
    assert!(!upper.allows("alice", "secret"));
}

#[test]
fn unknown_user_and_wrong_password_are_one_rejection() {
    let mut v = verifier(Padding::Oaep);
    let now = 1_700_000_000;
    let wrong = client("wrong", Padding::Oaep).token_at(now).unwrap();
    let mut unknown = client("secret", Padding::Oaep);
    unknown.user = "mallory".into();
    let unknown = unknown.token_at(now).unwrap();
    assert_eq!(
        v.verify(Some(&wrong), &users(), now),
        Err(AuthError::NotAuthorized {
            user: "alice".into()
        })
    );
    assert_eq!(
        v.verify(Some(&unknown), &users(), now),
        Err(AuthError::NotAuthorized {
            user: "mallory".into()
        })
    );
    assert!(v.seen.is_empty(), "refused credentials are not remembered");
}

#[test]
fn time_stamps_outside_the_threshold_are_refused_both_ways() {
    let a = client("secret", Padding::Oaep);
    let now = 1_700_000_000;
    for (ts, ok) in [
        (now - 10, true),
        (now + 10, true),
        (now - 11, false),
        (now + 11, false),
    ] {
        let mut v = verifier(Padding::Oaep);
        let r = v.verify(Some(&a.token_at(ts).unwrap()), &users(), now);
        if ok {
            assert_eq!(r, Ok("alice".into()), "ts {}", ts - now);
        } else {
            assert!(
                matches!(r, Err(AuthError::Skewed { skew_s, .. }) if skew_s == now - ts),
                "{r:?}"
            );
        }
    }
    let mut v = verifier(Padding::Oaep);
    v.v.threshold_s = 60;
    assert!(
        v.verify(Some(&a.token_at(now - 59).unwrap()), &users(), now)
            .is_ok()
    );
}

#[test]
fn a_replayed_credential_is_refused_and_forgotten_after_the_window() {
    let mut v = verifier(Padding::Oaep);
    let now = 1_700_000_000;
    let t = client("secret", Padding::Oaep).token_at(now).unwrap();
    assert_eq!(v.verify(Some(&t), &users(), now), Ok("alice".into()));
    assert_eq!(
        v.verify(Some(&t), &users(), now + 1),
        Err(AuthError::Replayed {
            user: "alice".into()
        })
    );
    // A fresh token from the same client at the same second is fine.
    let t2 = client("secret", Padding::Oaep).token_at(now).unwrap();
    assert_eq!(v.verify(Some(&t2), &users(), now + 1), Ok("alice".into()));
    assert_eq!(v.seen.len(), 2);
    // Later the skew check refuses the old token, and the memory lets it go.
    assert!(matches!(
        v.verify(Some(&t), &users(), now + 11),
        Err(AuthError::Skewed { .. })
    ));
    let t3 = client("secret", Padding::Oaep).token_at(now + 11).unwrap();
    assert!(v.verify(Some(&t3), &users(), now + 11).is_ok());
    assert_eq!(v.seen.len(), 1, "entries outside the window are dropped");
}

#[test]
fn missing_truncated_and_garbage_tokens_are_refused() {
    let mut v = verifier(Padding::Oaep);
    let now = 1_700_000_000;
    let good = client("secret", Padding::Oaep).token_at(now).unwrap();
    let u = users();
    assert_eq!(v.verify(None, &u, now), Err(AuthError::Missing));
    assert_eq!(
        v.verify(Some(""), &u, now),
        Err(AuthError::WrongLength { got: 0, want: 256 })
    );
    assert_eq!(
        v.verify(Some(&good[..good.len() - 1]), &u, now),
        Err(AuthError::NotBase64)
    );
    assert_eq!(
        v.verify(Some(&good[..good.len() - 4]), &u, now),
        Err(AuthError::WrongLength {
            got: 255,
            want: 256
        })
    );
    assert_eq!(
        v.verify(Some("not base64 at all!"), &u, now),
        Err(AuthError::NotBase64)
    );
    let noise = B64.encode([0x5a; 256]);
    assert_eq!(
        v.verify(Some(&noise), &u, now),
        Err(AuthError::Undecryptable)
    );
    let long = "A".repeat(MAX_TOKEN_LEN + 4);
    assert_eq!(
        v.verify(Some(&long), &u, now),
        Err(AuthError::TooLong(MAX_TOKEN_LEN + 4))
    );
    // One flipped bit in the ciphertext.
    let mut sealed = B64.decode(&good).unwrap();
    sealed[100] ^= 1;
    assert_eq!(
        v.verify(Some(&B64.encode(&sealed)), &u, now),
        Err(AuthError::Undecryptable)
    );
    // Still good after all that.
    assert_eq!(v.verify(Some(&good), &u, now), Ok("alice".into()));
}

#[test]
fn key_files_in_either_pem_form_load_and_others_say_what_is_wrong() {
    use rsa::pkcs1::{EncodeRsaPrivateKey, EncodeRsaPublicKey};
    use rsa::pkcs8::{EncodePublicKey, LineEnding};
    let p = Path::new("k.pem");
    let pkcs1 = key().0.to_pkcs1_pem(LineEnding::LF).unwrap();
    assert!(PrivateKey::from_pem(&pkcs1, p).is_ok());
    let spki = RsaPublicKey::from(&key().0)
        .to_public_key_pem(LineEnding::LF)
        .unwrap();
    let rsa_pub = RsaPublicKey::from(&key().0)
        .to_pkcs1_pem(LineEnding::LF)
        .unwrap();
    assert!(PublicKey::from_pem(&spki, p).is_ok());
    assert!(PublicKey::from_pem(&rsa_pub, p).is_ok());
    assert!(matches!(
        PublicKey::from_pem(KEY_PEM, p),
        Err(KeyError::NotPublicKey { .. })
    ));
    assert!(matches!(
        PrivateKey::from_pem(&spki, p),
        Err(KeyError::NotPrivateKey { .. })
    ));
    let enc = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n";
    assert!(matches!(
        PrivateKey::from_pem(enc, p),
        Err(KeyError::EncryptedPrivateKey { .. })
    ));
    let e = PublicKey::read(Path::new("/nonexistent/pub.pem"))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("cannot read the RSA public key /nonexistent/pub.pem:"),
        "{e}"
    );
}

#[test]
fn a_credential_too_long_for_the_key_is_an_error_not_a_truncation() {
    let mut a = client(&"x".repeat(200), Padding::Oaep);
    assert!(matches!(
        a.token_at(1),
        Err(AuthError::TooLongForKey { key_bytes: 256, .. })
    ));
    a.padding = Padding::Pkcs1v15;
    assert!(a.token_at(1).is_ok(), "PKCS#1 v1.5 leaves 245 bytes");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn credential_parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = Credential::parse(&bytes);
    }

    #[test]
    fn users_parse_never_panics(text in "(?s).{0,300}") {
        let u = Users::parse(&text);
        let _ = u.allows("a", "b");
    }

    #[test]
    fn any_token_text_is_refused_without_panic(token in "[A-Za-z0-9+/=]{0,400}|(?s).{0,64}") {
        let mut v = verifier(Padding::Oaep);
        prop_assert!(v.verify(Some(&token), &users(), 0).is_err());
    }
}
