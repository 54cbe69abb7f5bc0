//! The TLS side of `netmeter rpm-server`: its certificate and key from PEM files
//! (`--cert`, `--key`), or a self-signed certificate made at start (rcgen) whose SHA-256
//! fingerprint, and its public key's pin, the server prints for clients to check
//! (`netmeter rpm --insecure`, curl `-k --pinnedpubkey`); and the rustls configuration:
//! TLS 1.2 and 1.3 as the reference nginx configuration allows, ALPN `h2` then
//! `http/1.1`.

use base64::Engine;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

/// A PEM file larger than this is not a certificate chain or a key.
const MAX_PEM_BYTES: u64 = 1 << 20;

/// What went wrong with the certificate or key.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {option} {path}: {reason}")]
    File {
        option: &'static str,
        path: String,
        reason: String,
    },
    #[error("cannot make a self-signed certificate: {0}")]
    Generate(String),
    #[error("the certificate and key do not make a TLS configuration: {0}")]
    Config(String),
}

/// The server's certificate chain and key, with what it prints about them.
#[derive(Debug)]
pub struct ServerCert {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    /// SHA-256 of the leaf certificate, `AB:CD:...` as `openssl x509 -fingerprint` shows it.
    pub fingerprint: String,
    /// `sha256//BASE64` of the public key, for curl's `--pinnedpubkey` (self-signed only).
    pub key_pin: Option<String>,
    /// The names a self-signed certificate was made for (empty for files).
    pub names: Vec<String>,
}

/// SHA-256 of `der` as colon-separated upper-case hex pairs.
pub fn fingerprint(der: &[u8]) -> String {
    let d = Sha256::digest(der);
    let hex: Vec<String> = d.iter().map(|b| format!("{b:02X}")).collect();
    hex.join(":")
}

/// curl's `--pinnedpubkey` form of a SubjectPublicKeyInfo: `sha256//` and the base64 of
/// its SHA-256.
pub fn key_pin(spki_der: &[u8]) -> String {
    format!(
        "sha256//{}",
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(spki_der))
    )
}

fn read_capped(path: &Path, option: &'static str) -> Result<Vec<u8>, TlsError> {
    let bad = |reason: String| TlsError::File {
        option,
        path: path.display().to_string(),
        reason,
    };
    let f = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let mut buf = Vec::new();
    f.take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| bad(e.to_string()))?;
    if buf.len() as u64 > MAX_PEM_BYTES {
        return Err(bad(format!("larger than {} KiB", MAX_PEM_BYTES / 1024)));
    }
    Ok(buf)
}

/// `--cert FILE --key FILE`: a PEM certificate chain (leaf first) and its private key
/// (PKCS#8, PKCS#1 or SEC1).
pub fn load(cert: &Path, key: &Path) -> Result<ServerCert, TlsError> {
    let bad = |option: &'static str, path: &Path, reason: &str| TlsError::File {
        option,
        path: path.display().to_string(),
        reason: reason.to_string(),
    };
    let pem = read_capped(cert, "--cert")?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| bad("--cert", cert, &format!("not PEM certificates ({e})")))?;
    let Some(leaf) = chain.first() else {
        return Err(bad("--cert", cert, "no CERTIFICATE block in it"));
    };
    let fingerprint = fingerprint(leaf);
    let pem = read_capped(key, "--key")?;
    let key = PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|e| bad("--key", key, &format!("no private key in it ({e})")))?;
    Ok(ServerCert {
        chain,
        key,
        fingerprint,
        key_pin: None,
        names: Vec::new(),
    })
}

/// A self-signed certificate for `names` (host names or IP addresses), made now.
pub fn self_signed(names: &[String]) -> Result<ServerCert, TlsError> {
    let made = rcgen::generate_simple_self_signed(names.to_vec())
        .map_err(|e| TlsError::Generate(e.to_string()))?;
    let der = made.cert.der().clone();
    Ok(ServerCert {
        fingerprint: fingerprint(&der),
        key_pin: Some(key_pin(&made.key_pair.public_key_der())),
        chain: vec![der],
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.key_pair.serialize_der())),
        names: names.to_vec(),
    })
}

/// The rustls server configuration for `cert`: ring's primitives, TLS 1.2 and 1.3, ALPN
/// `h2` and `http/1.1`.
pub fn server_config(cert: ServerCert) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(cert.chain, cert.key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_read_as_openssl_prints_them() {
        // SHA-256 of "abc" (FIPS 180-2, appendix B.1).
        assert_eq!(
            fingerprint(b"abc"),
            "BA:78:16:BF:8F:01:CF:EA:41:41:40:DE:5D:AE:22:23:B0:03:61:A3:96:17:7A:9C:B4:10:FF:61:F2:00:15:AD"
        );
        assert_eq!(
            key_pin(b"abc"),
            "sha256//ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="
        );
    }

    #[test]
    fn a_self_signed_certificate_makes_a_configuration_and_files_load_back() {
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let made = self_signed(&names).unwrap();
        assert_eq!(made.fingerprint.len(), 32 * 3 - 1);
        let dir = std::env::temp_dir().join(format!("nm-rpm-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (c, k) = (dir.join("c.pem"), dir.join("k.pem"));
        let pem = |label: &str, der: &[u8]| {
            let b = base64::engine::general_purpose::STANDARD.encode(der);
            let lines: Vec<&str> = b
                .as_bytes()
                .chunks(64)
                .map(|l| std::str::from_utf8(l).unwrap())
                .collect();
            format!(
                "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
                lines.join("\n")
            )
        };
        std::fs::write(&c, pem("CERTIFICATE", &made.chain[0])).unwrap();
        std::fs::write(&k, pem("PRIVATE KEY", made.key.secret_der())).unwrap();
        let loaded = load(&c, &k).unwrap();
        assert_eq!(loaded.fingerprint, made.fingerprint);
        server_config(loaded).unwrap();
        server_config(made).unwrap();
        let e = load(&k, &k).unwrap_err().to_string();
        assert!(e.starts_with("cannot read --cert"), "{e}");
        let e = load(&c, &c).unwrap_err().to_string();
        assert!(e.starts_with("cannot read --key"), "{e}");
        let e = load(&dir.join("none"), &k).unwrap_err().to_string();
        assert!(e.starts_with("cannot read --cert"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
