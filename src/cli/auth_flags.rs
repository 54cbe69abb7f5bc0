//! iperf3's authentication flags (`--username`, `--rsa-public-key-path`,
//! `--rsa-private-key-path`, `--authorized-users-path`, `--time-skew-threshold`,
//! `--use-pkcs1-padding`), resolved into `auth::ClientAuth` / `auth::ServerAuth` with
//! iperf3's checks (`iperf_parse_arguments`), each failure one sentence.

use super::{UsageError, usage};
use crate::auth::{self, ClientAuth, Padding, PublicKey, ServerAuth};
use std::path::PathBuf;
use std::sync::Arc;

/// The flags as typed (flattened into `Args`).
#[derive(Debug, Default, clap::Args)]
pub struct AuthFlags {
    /// Client: authenticate as USER to a server that requires it (with
    /// --rsa-public-key-path); the password comes from IPERF3_PASSWORD or a prompt.
    #[arg(long = "username", value_name = "USER")]
    pub username: Option<String>,
    /// Client: the server's RSA public key (PEM) to encrypt the credential with.
    #[arg(long = "rsa-public-key-path", value_name = "FILE")]
    pub rsa_public_key_path: Option<PathBuf>,
    /// Server: require authentication; the RSA private key (PEM, unencrypted) that
    /// decrypts credentials (with --authorized-users-path).
    #[arg(long = "rsa-private-key-path", value_name = "FILE")]
    pub rsa_private_key_path: Option<PathBuf>,
    /// Server: the authorized users, lines of user,sha256("{user}password") in hex.
    #[arg(long = "authorized-users-path", value_name = "FILE")]
    pub authorized_users_path: Option<PathBuf>,
    /// Server: seconds a credential's time stamp may differ from this host's clock
    /// (default 10).
    #[arg(long = "time-skew-threshold", value_name = "SECONDS")]
    pub time_skew_threshold: Option<String>,
    /// Encrypt/decrypt the credential with PKCS#1 v1.5 padding instead of OAEP (iperf3
    /// 3.12 and older know only PKCS#1 v1.5); both ends must agree.
    #[arg(long = "use-pkcs1-padding")]
    pub use_pkcs1_padding: bool,
    /// netmeter to netmeter: prove the key in FILE (128 random bits or more: at least
    /// 32 hex or base64 characters, e.g. from `netmeter generate psk > FILE`;
    /// trailing whitespace ignored) with an HMAC challenge-response, no secret on the
    /// wire. A server with it refuses clients without the key.
    #[arg(long = "psk-file", value_name = "FILE")]
    pub psk_file: Option<PathBuf>,
}

impl AuthFlags {
    fn padding(&self) -> Padding {
        if self.use_pkcs1_padding {
            Padding::Pkcs1v15
        } else {
            Padding::Oaep
        }
    }

    /// The client's credential settings, if `--username` was given. `password` is
    /// `IPERF3_PASSWORD`'s value if set; otherwise the terminal is asked.
    pub fn client(&self, password: Option<String>) -> Result<Option<ClientAuth>, UsageError> {
        if self.rsa_private_key_path.is_some()
            || self.authorized_users_path.is_some()
            || self.time_skew_threshold.is_some()
        {
            return Err(usage(
                "--rsa-private-key-path, --authorized-users-path and --time-skew-threshold are server options (use with -s)",
            ));
        }
        let (user, key_path) = match (&self.username, &self.rsa_public_key_path) {
            (None, None) => return Ok(None),
            (Some(u), Some(k)) => (u, k),
            _ => {
                return Err(usage(
                    "authentication needs both --username and --rsa-public-key-path",
                ));
            }
        };
        // The server reads the credential with sscanf's %s: an empty user name, or one
        // with whitespace, can never match (iperf3 would find out only at the server).
        if !auth::fits_credential(user) {
            return Err(usage(
                "--username must be non-empty and without spaces (iperf3's credential format cannot carry them)",
            ));
        }
        let key = PublicKey::read(key_path).map_err(|e| usage(e.to_string()))?;
        let password = match password {
            Some(p) => p,
            None => crate::sock::process::read_password("Password: ").map_err(|e| {
                usage(format!(
                    "no password for --username: set IPERF3_PASSWORD or run from a terminal ({e})"
                ))
            })?,
        };
        if !auth::fits_credential(&password) {
            return Err(usage(
                "the password must be non-empty and without spaces (iperf3's credential format cannot carry them)",
            ));
        }
        Ok(Some(ClientAuth {
            user: user.clone(),
            password,
            key,
            padding: self.padding(),
        }))
    }

    /// `--psk-file`'s key, read now (a missing or short key is a usage error).
    pub fn psk(&self) -> Result<Option<auth::psk::Psk>, UsageError> {
        self.psk_file
            .as_deref()
            .map(|p| auth::psk::Psk::read(p).map_err(usage))
            .transpose()
    }

    /// The server's settings, if it requires authentication.
    pub fn server(&self) -> Result<Option<Arc<ServerAuth>>, UsageError> {
        if self.username.is_some() || self.rsa_public_key_path.is_some() {
            return Err(usage(
                "--username and --rsa-public-key-path are client options (use with -c)",
            ));
        }
        let threshold_s = match &self.time_skew_threshold {
            None => auth::DEFAULT_SKEW_S,
            Some(t) => match t.trim().parse::<u32>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(usage(format!(
                        "--time-skew-threshold must be a positive number of seconds, not '{t}'"
                    )));
                }
            },
        };
        match (&self.rsa_private_key_path, &self.authorized_users_path) {
            (None, None) => Ok(None),
            (Some(key), Some(users)) => ServerAuth::load(key, users, threshold_s, self.padding())
                .map(|a| Some(Arc::new(a)))
                .map_err(usage),
            _ => Err(usage(
                "a server with authentication needs both --rsa-private-key-path and --authorized-users-path",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Args, Command, parse_args};
    use crate::auth::Padding;

    const KEY: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/auth/testdata/test-only-key.pem"
    );

    fn args(a: &[&str]) -> Args {
        let mut v = vec!["netmeter"];
        v.extend_from_slice(a);
        parse_args(v).map_err(|_| "parse").unwrap()
    }

    fn sentence(a: &[&str]) -> String {
        args(a)
            .resolve()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn each_wrong_combination_is_one_sentence() {
        for (a, want) in [
            (
                &["-c", "h", "--username", "u"][..],
                "authentication needs both --username and --rsa-public-key-path",
            ),
            (
                &["-c", "h", "--rsa-public-key-path", KEY],
                "authentication needs both",
            ),
            (
                &["-c", "h", "--rsa-private-key-path", KEY],
                "are server options (use with -s)",
            ),
            (
                &["-c", "h", "--time-skew-threshold", "5"],
                "are server options (use with -s)",
            ),
            (
                &["-s", "--username", "u"],
                "are client options (use with -c)",
            ),
            (
                &["-s", "--rsa-private-key-path", KEY],
                "needs both --rsa-private-key-path and --authorized-users-path",
            ),
            (&["-s", "--authorized-users-path", KEY], "needs both"),
            (
                &["-s", "--time-skew-threshold", "0"],
                "must be a positive number of seconds, not '0'",
            ),
            (&["-s", "--time-skew-threshold", "-3"], "not '-3'"),
            (
                &[
                    "-s",
                    "--rsa-private-key-path",
                    KEY,
                    "--authorized-users-path",
                    "/nonexistent",
                ],
                "cannot access the authorized users file /nonexistent",
            ),
            (
                &[
                    "-s",
                    "--rsa-private-key-path",
                    "/nonexistent",
                    "--authorized-users-path",
                    KEY,
                ],
                "cannot read the RSA private key /nonexistent",
            ),
            (
                &["-c", "h", "--username", "u", "--rsa-public-key-path", KEY],
                "is not a PEM RSA public key",
            ),
            (
                &["--loopback", "--username", "u"],
                "in-process server does not authenticate",
            ),
        ] {
            let s = sentence(a);
            assert!(s.contains(want), "{a:?}: {s}");
        }
    }

    #[test]
    fn a_server_with_key_and_users_requires_authentication() {
        // The key file doubles as a users file here: it only has to be readable.
        let cmd = args(&[
            "-s",
            "--rsa-private-key-path",
            KEY,
            "--authorized-users-path",
            KEY,
            "--time-skew-threshold",
            "30",
            "--use-pkcs1-padding",
        ])
        .resolve();
        let Ok(Command::Server { cfg, .. }) = cmd else {
            panic!("{cmd:?}")
        };
        let auth = cfg.auth.expect("auth settings");
        assert!(format!("{auth:?}").contains("threshold_s: 30"), "{auth:?}");
        assert!(format!("{auth:?}").contains("Pkcs1v15"), "{auth:?}");
        let Ok(Command::Server { cfg, .. }) = args(&["-s"]).resolve() else {
            panic!()
        };
        assert!(cfg.auth.is_none());
    }

    #[test]
    fn a_client_takes_the_password_it_is_given() {
        let dir = std::env::temp_dir().join(format!("netmeter-cli-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pub_path = dir.join("pub.pem");
        let key = crate::auth::PrivateKey::read(std::path::Path::new(KEY)).unwrap();
        std::fs::write(&pub_path, key.public_pem()).unwrap();
        let a = args(&[
            "-c",
            "h",
            "--username",
            "alice",
            "--rsa-public-key-path",
            pub_path.to_str().unwrap(),
            "--use-pkcs1-padding",
        ]);
        let auth = a.auth.client(Some("pw".into())).unwrap().expect("auth");
        assert_eq!(
            (auth.user.as_str(), auth.password.as_str(), auth.padding),
            ("alice", "pw", Padding::Pkcs1v15)
        );
        assert!(
            !format!("{auth:?}").contains("pw\""),
            "the password never shows in Debug"
        );
        for (user, pw, want) in [
            (
                "al ice",
                "pw",
                "--username must be non-empty and without spaces",
            ),
            ("", "pw", "--username must be non-empty"),
            (
                "alice",
                "p w",
                "the password must be non-empty and without spaces",
            ),
            ("alice", "", "the password must be non-empty"),
            (
                "alice",
                "p\u{b}w",
                "the password must be non-empty and without spaces",
            ),
        ] {
            let a = args(&[
                "-c",
                "h",
                "--username",
                user,
                "--rsa-public-key-path",
                pub_path.to_str().unwrap(),
            ]);
            let e = a.auth.client(Some(pw.into())).unwrap_err().to_string();
            assert!(e.starts_with(want), "{user:?}/{pw:?}: {e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
