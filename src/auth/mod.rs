//! RSA authentication of a test, as iperf3 does it (`src/iperf_auth.c`, 3.12–3.22), so
//! that either end can be iperf3.
//!
//! The client writes a credential text — `user: {user}\npwd:  {password}\nts:   {unix
//! seconds}`, iperf3's `auth_text_format` — encrypts it with the server's RSA public key
//! and sends it base64-encoded as `authtoken` in the parameters JSON. The server decrypts
//! it with its private key, checks that the time stamp is within `--time-skew-threshold`
//! seconds of its own clock (default 10) and looks the user up in the authorized users
//! file: lines `user,sha256hex("{user}password")`. Padding is OAEP (OpenSSL's default
//! parameters: SHA-1 for the label hash and MGF1) unless both ends use
//! `--use-pkcs1-padding` (PKCS#1 v1.5; the only padding iperf3 3.12 knows).
//!
//! Everything here is pure except [`ServerAuth::check`] (reads the users file again for
//! each test, as iperf3 does, and the clock) and the key-file readers; the decisions are
//! in [`Verifier::verify`], which takes `now` as an argument.
//!
//! Decisions beyond iperf3 (docs/authentication.md lists them):
//! * A credential that passed once is refused if it comes again while its time stamp is
//!   still inside the skew window (iperf3 accepts such a replay). Legitimate clients
//!   never repeat one: both paddings are randomised, so each test's token differs.
//! * Unknown user and wrong password take the same path: the entered user name and the
//!   password hash are compared, through their SHA-256 digests and in constant time,
//!   with every line of the file; no early exit. Only one rejection reaches the client
//!   (iperf3's `IEAUTHTEST`) and the server's log line does not tell the two apart.
//! * The RSA decryption uses blinding (RustCrypto `rsa` 0.9 is not constant-time:
//!   RUSTSEC-2023-0071, "Marvin"); docs/authentication.md says what that means here.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use rsa::pkcs1::{DecodeRsaPrivateKey, DecodeRsaPublicKey};
use rsa::pkcs8::{DecodePrivateKey, DecodePublicKey};
use rsa::rand_core::OsRng;
use rsa::traits::PublicKeyParts;
use rsa::{Oaep, Pkcs1v15Encrypt, RsaPrivateKey, RsaPublicKey};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use subtle::ConstantTimeEq;

/// iperf3's default `--time-skew-threshold`, seconds.
pub const DEFAULT_SKEW_S: u32 = 10;

/// Longest `authtoken` read: the base64 of a 16384-bit RSA block is 2732 characters.
/// Longer is refused before decoding.
pub const MAX_TOKEN_LEN: usize = 2732;

/// RSA padding of the credential (`--use-pkcs1-padding` picks PKCS#1 v1.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    /// OAEP with SHA-1 and MGF1-SHA-1, OpenSSL's `RSA_PKCS1_OAEP_PADDING` (iperf3 ≥ 3.17's default).
    Oaep,
    /// PKCS#1 v1.5 (`RSA_PKCS1_PADDING`), iperf3 3.12's only padding.
    Pkcs1v15,
}

/// Why a key file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read {what} {path}: {source}")]
    Read {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is not a PEM RSA public key (expected \"BEGIN PUBLIC KEY\" or \"BEGIN RSA PUBLIC KEY\")"
    )]
    NotPublicKey { path: PathBuf },
    #[error(
        "{path} is an encrypted private key; netmeter reads only unencrypted ones (openssl rsa -in KEY -out PLAIN.pem)"
    )]
    EncryptedPrivateKey { path: PathBuf },
    #[error(
        "{path} is not a PEM RSA private key (expected \"BEGIN PRIVATE KEY\" or \"BEGIN RSA PRIVATE KEY\")"
    )]
    NotPrivateKey { path: PathBuf },
}

/// Why a credential was refused, or could not be made. Every refusal reaches the client
/// as iperf3's `IEAUTHTEST` ("test authorization failed"); the variant is for the
/// server's log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("no credential in the parameters")]
    Missing,
    #[error("a credential of {0} characters, longer than any RSA key makes")]
    TooLong(usize),
    #[error("a credential that is not base64")]
    NotBase64,
    #[error("a credential of {got} bytes for a {want}-byte key (truncated, or another key)")]
    WrongLength { got: usize, want: usize },
    #[error("a credential that does not decrypt with this key and padding")]
    Undecryptable,
    #[error("a decrypted credential not in iperf3's format")]
    Malformed,
    #[error(
        "user '{user}': credential time {ts} is {skew_s} s from this host's clock (threshold {threshold_s} s)"
    )]
    Skewed {
        user: String,
        ts: i64,
        skew_s: i64,
        threshold_s: u32,
    },
    #[error("user '{user}': unknown user or wrong password")]
    NotAuthorized { user: String },
    #[error("user '{user}': a credential already used (replayed)")]
    Replayed { user: String },
    #[error("cannot read the authorized users file {path}: {reason}")]
    UsersFile { path: PathBuf, reason: String },
    #[error("the credential of {len} bytes is too long for a {key_bytes}-byte RSA key")]
    TooLongForKey { len: usize, key_bytes: usize },
    #[error("RSA encryption failed: {0}")]
    Encrypt(String),
}

/// What the credential says: iperf3's `user`, `pwd` and `ts` (Unix seconds).
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    pub user: String,
    pub password: String,
    pub ts: i64,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("user", &self.user)
            .field("password", &"<hidden>")
            .field("ts", &self.ts)
            .finish()
    }
}

impl Credential {
    /// iperf3's `auth_text_format`: `"user: %s\npwd:  %s\nts:   %" PRId64`.
    pub fn text(&self) -> String {
        format!(
            "user: {}\npwd:  {}\nts:   {}",
            self.user, self.password, self.ts
        )
    }

    /// Read a decrypted credential the way iperf3's `sscanf(plaintext, auth_text_format,
    /// ...)` does: whitespace in the format matches any run of whitespace (none
    /// included), `%s` takes a run of non-whitespace, `%ld` an optionally signed decimal
    /// after optional whitespace; whatever follows the number is ignored. So a user name
    /// or password with a space in it cannot authenticate, with iperf3 as with netmeter.
    pub fn parse(plain: &[u8]) -> Result<Credential, AuthError> {
        let mut s = Scan { b: plain, i: 0 };
        s.literal(b"user:")?;
        s.skip_ws();
        let user = s.word()?;
        s.skip_ws();
        s.literal(b"pwd:")?;
        s.skip_ws();
        let password = s.word()?;
        s.skip_ws();
        s.literal(b"ts:")?;
        s.skip_ws();
        let ts = s.integer()?;
        Ok(Credential { user, password, ts })
    }
}

/// C's `isspace` in the C locale, which `sscanf` skips: Rust's `is_ascii_whitespace`
/// leaves out the vertical tab.
pub fn c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Whether `s` can travel in iperf3's credential text: not empty, no whitespace (`%s`
/// stops there) and no NUL (the C string ends there).
pub fn fits_credential(s: &str) -> bool {
    !s.is_empty() && !s.bytes().any(|c| c_space(c) || c == 0)
}

/// A cursor for [`Credential::parse`].
struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scan<'_> {
    fn skip_ws(&mut self) {
        while self.b.get(self.i).is_some_and(|&c| c_space(c)) {
            self.i += 1;
        }
    }
    fn literal(&mut self, lit: &[u8]) -> Result<(), AuthError> {
        if self.b[self.i..].starts_with(lit) {
            self.i += lit.len();
            Ok(())
        } else {
            Err(AuthError::Malformed)
        }
    }
    fn word(&mut self) -> Result<String, AuthError> {
        let start = self.i;
        while self.b.get(self.i).is_some_and(|&c| !c_space(c) && c != 0) {
            self.i += 1;
        }
        if self.i == start {
            return Err(AuthError::Malformed);
        }
        String::from_utf8(self.b[start..self.i].to_vec()).map_err(|_| AuthError::Malformed)
    }
    fn integer(&mut self) -> Result<i64, AuthError> {
        let start = self.i;
        if matches!(self.b.get(self.i), Some(b'+' | b'-')) {
            self.i += 1;
        }
        while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        std::str::from_utf8(&self.b[start..self.i])
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or(AuthError::Malformed)
    }
}

/// The users file's hash of a password: lowercase hex SHA-256 of `{user}password`
/// (iperf3's `check_authentication`; `echo -n "{user}password" | sha256sum`).
pub fn password_hash(user: &str, password: &str) -> String {
    hex(&Sha256::digest(format!("{{{user}}}{password}").as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An RSA public key (the client's `--rsa-public-key-path`).
#[derive(Clone)]
pub struct PublicKey(RsaPublicKey);

impl PublicKey {
    /// A PEM `PUBLIC KEY` (what `openssl rsa -pubout` writes, and all iperf3 reads) or
    /// `RSA PUBLIC KEY`.
    pub fn from_pem(text: &str, path: &Path) -> Result<PublicKey, KeyError> {
        RsaPublicKey::from_public_key_pem(text.trim())
            .or_else(|_| RsaPublicKey::from_pkcs1_pem(text.trim()))
            .map(PublicKey)
            .map_err(|_| KeyError::NotPublicKey { path: path.into() })
    }

    pub fn read(path: &Path) -> Result<PublicKey, KeyError> {
        let text = read_key(path, "the RSA public key")?;
        PublicKey::from_pem(&text, path)
    }

    /// Encrypt `cred` with this key: the `authtoken` value.
    pub fn encrypt(&self, cred: &Credential, padding: Padding) -> Result<String, AuthError> {
        let text = cred.text();
        let key_bytes = self.0.size();
        let room = match padding {
            Padding::Oaep => key_bytes.saturating_sub(2 * 20 + 2),
            Padding::Pkcs1v15 => key_bytes.saturating_sub(11),
        };
        if text.len() > room {
            return Err(AuthError::TooLongForKey {
                len: text.len(),
                key_bytes,
            });
        }
        let sealed = match padding {
            Padding::Oaep => self.0.encrypt(&mut OsRng, oaep(), text.as_bytes()),
            Padding::Pkcs1v15 => self.0.encrypt(&mut OsRng, Pkcs1v15Encrypt, text.as_bytes()),
        }
        .map_err(|e| AuthError::Encrypt(e.to_string()))?;
        Ok(B64.encode(sealed))
    }
}

/// OpenSSL's OAEP defaults, which iperf3 does not change: SHA-1, MGF1 with SHA-1, no label.
fn oaep() -> Oaep {
    Oaep::new::<sha1::Sha1>()
}

/// An RSA private key (the server's `--rsa-private-key-path`).
#[derive(Clone)]
pub struct PrivateKey(RsaPrivateKey);

impl PrivateKey {
    /// A PEM `PRIVATE KEY` (PKCS#8, what OpenSSL 3 writes) or `RSA PRIVATE KEY` (PKCS#1,
    /// OpenSSL 1.1's `genrsa`), unencrypted.
    pub fn from_pem(text: &str, path: &Path) -> Result<PrivateKey, KeyError> {
        if text.contains("ENCRYPTED") {
            return Err(KeyError::EncryptedPrivateKey { path: path.into() });
        }
        RsaPrivateKey::from_pkcs8_pem(text.trim())
            .or_else(|_| RsaPrivateKey::from_pkcs1_pem(text.trim()))
            .map(PrivateKey)
            .map_err(|_| KeyError::NotPrivateKey { path: path.into() })
    }

    pub fn read(path: &Path) -> Result<PrivateKey, KeyError> {
        let text = read_key(path, "the RSA private key")?;
        PrivateKey::from_pem(&text, path)
    }

    /// The public half as PEM (`PUBLIC KEY`), what a client's `--rsa-public-key-path` reads.
    pub fn public_pem(&self) -> String {
        use rsa::pkcs8::{EncodePublicKey, LineEnding};
        RsaPublicKey::from(&self.0)
            .to_public_key_pem(LineEnding::LF)
            .unwrap_or_default()
    }

    /// Decode and decrypt an `authtoken` into the credential it carries.
    pub fn decrypt(&self, token: &str, padding: Padding) -> Result<Credential, AuthError> {
        self.open(&self.sealed(token)?, padding)
    }

    /// Decrypt a ciphertext of the key's size (blinded: see the module notes).
    fn open(&self, sealed: &[u8], padding: Padding) -> Result<Credential, AuthError> {
        let plain = match padding {
            Padding::Oaep => self.0.decrypt_blinded(&mut OsRng, oaep(), sealed),
            Padding::Pkcs1v15 => self.0.decrypt_blinded(&mut OsRng, Pkcs1v15Encrypt, sealed),
        }
        .map_err(|_| AuthError::Undecryptable)?;
        Credential::parse(&plain)
    }

    /// The ciphertext of a token, its length checked against the key.
    fn sealed(&self, token: &str) -> Result<Vec<u8>, AuthError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(AuthError::TooLong(token.len()));
        }
        let sealed = B64.decode(token).map_err(|_| AuthError::NotBase64)?;
        let want = self.0.size();
        if sealed.len() != want {
            return Err(AuthError::WrongLength {
                got: sealed.len(),
                want,
            });
        }
        Ok(sealed)
    }
}

fn read_key(path: &Path, what: &'static str) -> Result<String, KeyError> {
    std::fs::read_to_string(path).map_err(|source| KeyError::Read {
        what,
        path: path.into(),
        source,
    })
}

/// The authorized users file, as iperf3 reads it: per line (up to the first `\r` or
/// `\n`), skip empty lines, lines without a comma and lines starting with `#`; the user
/// is the first comma-separated field and the hash the second (C's `strtok`: leading
/// and repeated commas are skipped, fields after the second ignored). Both are kept as
/// SHA-256 digests so that every comparison takes the same time whatever the lengths.
#[derive(Debug, Default)]
pub struct Users {
    entries: Vec<([u8; 32], [u8; 32])>,
}

impl Users {
    pub fn parse(text: &str) -> Users {
        let mut entries = Vec::new();
        for line in text.split('\n') {
            let line = line.split('\r').next().unwrap_or("");
            if line.is_empty() || !line.contains(',') || line.starts_with('#') {
                continue;
            }
            let mut fields = line.split(',').filter(|f| !f.is_empty());
            // iperf3 would dereference a missing hash (`user,`); such a line matches nothing.
            if let (Some(user), Some(hash)) = (fields.next(), fields.next()) {
                entries.push((digest(user), digest(hash)));
            }
        }
        Users { entries }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `user` with `password` is in the file. Visits every line and compares in
    /// constant time, so an unknown user costs what a wrong password costs.
    pub fn allows(&self, user: &str, password: &str) -> bool {
        let user_d = digest(user);
        let hash_d = digest(&password_hash(user, password));
        let mut found = subtle::Choice::from(0u8);
        for (u, h) in &self.entries {
            found |= u.ct_eq(&user_d) & h.ct_eq(&hash_d);
        }
        found.into()
    }
}

fn digest(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

/// Credentials already accepted, kept while their time stamp is inside the skew window
/// (after that the skew check refuses them anyway). Keyed by the ciphertext's digest.
#[derive(Debug, Default)]
pub struct ReplayGuard {
    seen: HashMap<[u8; 32], i64>,
}

impl ReplayGuard {
    /// Let `a` through (at `now`) if its credential was not used before, and remember it.
    pub fn first_use(
        &mut self,
        a: Admitted,
        now: i64,
        threshold_s: u32,
    ) -> Result<String, AuthError> {
        let window = i64::from(threshold_s);
        self.seen
            .retain(|_, t| now.saturating_sub(*t).abs() <= window);
        match self.seen.insert(a.sealed, a.ts) {
            None => Ok(a.user),
            Some(_) => Err(AuthError::Replayed { user: a.user }),
        }
    }

    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

/// The server's decision: key, padding and skew threshold.
#[derive(Debug)]
pub struct Verifier {
    pub key: PrivateKey,
    pub padding: Padding,
    pub threshold_s: u32,
}

impl Verifier {
    /// Decide on the `authtoken` of a test's parameters at `now` (Unix seconds); the
    /// authenticated user name on success. Order as iperf3's: decrypt, time stamp, users
    /// file; then the replay check against `seen`, which remembers the credential.
    pub fn verify(
        &self,
        token: Option<&str>,
        users: &Users,
        now: i64,
        seen: &mut ReplayGuard,
    ) -> Result<String, AuthError> {
        let a = self.admit(token, users, now)?;
        seen.first_use(a, now, self.threshold_s)
    }

    /// Everything but the replay check, which needs the shared memory: the expensive
    /// part, done without holding it.
    pub fn admit(
        &self,
        token: Option<&str>,
        users: &Users,
        now: i64,
    ) -> Result<Admitted, AuthError> {
        let token = token.ok_or(AuthError::Missing)?;
        let sealed = self.key.sealed(token)?;
        let cred = self.key.open(&sealed, self.padding)?;
        let skew_s = now.saturating_sub(cred.ts);
        if skew_s.saturating_abs() > i64::from(self.threshold_s) {
            return Err(AuthError::Skewed {
                user: cred.user,
                ts: cred.ts,
                skew_s,
                threshold_s: self.threshold_s,
            });
        }
        if !users.allows(&cred.user, &cred.password) {
            return Err(AuthError::NotAuthorized { user: cred.user });
        }
        Ok(Admitted {
            user: cred.user,
            ts: cred.ts,
            sealed: Sha256::digest(&sealed).into(),
        })
    }
}

/// A credential that passed every check but the replay check.
#[derive(Debug)]
pub struct Admitted {
    user: String,
    ts: i64,
    /// SHA-256 of the ciphertext.
    sealed: [u8; 32],
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PrivateKey({} bits)", self.0.size() * 8)
    }
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({} bits)", self.0.size() * 8)
    }
}

/// A server's authentication settings (`--rsa-private-key-path`,
/// `--authorized-users-path`, `--time-skew-threshold`, `--use-pkcs1-padding`), shared
/// by its sessions.
#[derive(Debug)]
pub struct ServerAuth {
    pub users_path: PathBuf,
    verifier: Verifier,
    /// Credentials already accepted, shared by all sessions.
    seen: Mutex<ReplayGuard>,
}

impl ServerAuth {
    /// Load the key and check that the users file can be read (iperf3 checks both at
    /// start: `IESETSERVERAUTH`, `IESERVERAUTHUSERS`).
    pub fn load(
        key_path: &Path,
        users_path: &Path,
        threshold_s: u32,
        padding: Padding,
    ) -> Result<ServerAuth, String> {
        let key = PrivateKey::read(key_path).map_err(|e| e.to_string())?;
        std::fs::read_to_string(users_path).map_err(|e| {
            format!(
                "cannot access the authorized users file {}: {e}",
                users_path.display()
            )
        })?;
        Ok(ServerAuth {
            users_path: users_path.into(),
            verifier: Verifier {
                key,
                padding,
                threshold_s,
            },
            seen: Mutex::new(ReplayGuard::default()),
        })
    }

    /// Check a test's `authtoken` now, on the host's wall clock ([`ServerAuth::check_at`]
    /// takes the time from the caller's clock instead).
    pub fn check(&self, token: Option<&str>) -> Result<String, AuthError> {
        self.check_at(token, unix_secs(crate::clock::wall_now()))
    }

    /// Check a test's `authtoken` at `now` (Unix seconds). The users file is read again
    /// for each test (as iperf3 does), so edits apply without a restart. Sessions
    /// decrypt side by side; only the replay check takes the shared lock.
    pub fn check_at(&self, token: Option<&str>, now: i64) -> Result<String, AuthError> {
        let users = std::fs::read_to_string(&self.users_path)
            .map(|t| Users::parse(&t))
            .map_err(|e| AuthError::UsersFile {
                path: self.users_path.clone(),
                reason: e.to_string(),
            })?;
        let admitted = self.verifier.admit(token, &users, now)?;
        // A poisoned lock only means another session panicked while holding it; the
        // replay memory stays consistent between calls.
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.first_use(admitted, now, self.verifier.threshold_s)
    }
}

/// A client's authentication settings (`--username`, `--rsa-public-key-path`,
/// `--use-pkcs1-padding`, and the password from `IPERF3_PASSWORD` or the terminal).
#[derive(Clone)]
pub struct ClientAuth {
    pub user: String,
    pub password: String,
    pub key: PublicKey,
    pub padding: Padding,
}

impl std::fmt::Debug for ClientAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientAuth")
            .field("user", &self.user)
            .field("key", &self.key)
            .field("padding", &self.padding)
            .finish_non_exhaustive()
    }
}

impl ClientAuth {
    /// The `authtoken` for a test starting now, on the host's wall clock
    /// ([`ClientAuth::token_at`] is given the time).
    pub fn token(&self) -> Result<String, AuthError> {
        self.token_at(unix_secs(crate::clock::wall_now()))
    }

    /// The `authtoken` stamped `ts` (Unix seconds).
    pub fn token_at(&self, ts: i64) -> Result<String, AuthError> {
        let cred = Credential {
            user: self.user.clone(),
            password: self.password.clone(),
            ts,
        };
        self.key.encrypt(&cred, self.padding)
    }
}

/// A wall-clock time in Unix seconds (iperf3 stamps `mktime(localtime(time()))`,
/// which is the same).
pub fn unix_secs(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

pub mod psk;

#[cfg(test)]
mod tests;
