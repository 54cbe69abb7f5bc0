//! The responsiveness server's configuration (`/.well-known/nq`, draft-ietf-ippm-
//! responsiveness section "Server Configuration"; the same document Apple's
//! network-quality/server project serves at `/config`): where the small object, the
//! large object and the upload sink are.
//!
//! ```json
//! { "version": 1,
//!   "urls": { "small_download_url": "https://h/small",
//!             "large_download_url": "https://h/large",
//!             "upload_url": "https://h/slurp" },
//!   "test_endpoint": "host-to-connect-to.example" }
//! ```
//!
//! The keys with `https` in their names (`small_https_download_url`,
//! `large_https_download_url`, `https_upload_url`) are the older spelling, which Apple's
//! reference configuration still carries beside the new one: both are read, the new one
//! wins when both are there. The document comes from the network, so it is input: its
//! length is capped before it is parsed, every URL is checked to be an `https` URL with
//! a host and bounded in length, and a URL on a host other than the configuration's is
//! refused unless the caller allows it.

use serde::Deserialize;

/// The longest configuration document read, in bytes (Apple's is under 600).
pub const MAX_CONFIG_BYTES: usize = 64 * 1024;
/// The longest URL accepted, in bytes.
pub const MAX_URL_BYTES: usize = 2048;
/// The longest host name (RFC 1035's 253 characters plus brackets for IPv6).
const MAX_HOST_BYTES: usize = 255;

/// A configuration that cannot be used, said in one sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("the server's configuration is {len} bytes, over the {max}-byte limit")]
    TooLong { len: usize, max: usize },
    #[error("the server's configuration is not valid JSON: {0}")]
    NotJson(String),
    #[error("the server's configuration has no `{0}` URL")]
    Missing(&'static str),
    #[error("the server's configuration's `{key}` is not a usable URL: {why}")]
    BadUrl { key: &'static str, why: UrlError },
    #[error("the server's configuration's `test_endpoint` `{0}` is not a host name or address")]
    BadEndpoint(String),
    #[error(
        "the server's configuration points `{key}` at host `{host}`, not `{expected}` it came from (use --large/--small/--upload to name other hosts)"
    )]
    OtherHost {
        key: &'static str,
        host: String,
        expected: String,
    },
}

/// Why a string is not a URL netmeter uses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("longer than {MAX_URL_BYTES} bytes")]
    TooLong,
    #[error("not an https:// URL")]
    NotHttps,
    #[error("it has no host")]
    NoHost,
    #[error("its host `{0}` is not a host name or address")]
    BadHost(String),
    #[error("its port is not a number from 1 to 65535")]
    BadPort,
    #[error("it holds a user name, spaces or control characters")]
    BadCharacters,
}

/// An `https` URL taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpsUrl {
    /// The URL as given.
    pub url: String,
    /// The host: a name, an IPv4 address or an IPv6 address without its brackets.
    pub host: String,
    pub port: u16,
    /// The path and query, `/` at least.
    pub path: String,
}

impl HttpsUrl {
    /// Reads an `https://host[:port][/path]` URL.
    pub fn parse(s: &str) -> Result<HttpsUrl, UrlError> {
        if s.len() > MAX_URL_BYTES {
            return Err(UrlError::TooLong);
        }
        if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(UrlError::BadCharacters);
        }
        let rest = strip_prefix_ignore_case(s, "https://").ok_or(UrlError::NotHttps)?;
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        if authority.contains('@') {
            return Err(UrlError::BadCharacters);
        }
        let (host, port) = split_host_port(authority)?;
        check_host(host)?;
        let path = tail.split('#').next().unwrap_or("");
        let path = if path.is_empty() || path.starts_with('?') {
            format!("/{path}")
        } else {
            path.to_string()
        };
        Ok(HttpsUrl {
            url: s.to_string(),
            host: host.to_ascii_lowercase(),
            port,
            path,
        })
    }

    /// `host:port` as a socket address string (IPv6 in brackets).
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

fn split_host_port(authority: &str) -> Result<(&str, u16), UrlError> {
    if authority.is_empty() {
        return Err(UrlError::NoHost);
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let close = v6
            .find(']')
            .ok_or_else(|| UrlError::BadHost(authority.into()))?;
        let after = &v6[close + 1..];
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| UrlError::BadHost(authority.into()))?,
            ),
        };
        (&v6[..close], port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        None => 443,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
            .ok_or(UrlError::BadPort)?,
    };
    if host.is_empty() {
        return Err(UrlError::NoHost);
    }
    Ok((host, port))
}

/// A host name (letters, digits, `-`, `_`, dots), an IPv4 address, or an IPv6 address.
fn check_host(host: &str) -> Result<(), UrlError> {
    let bad = || UrlError::BadHost(host.chars().take(64).collect());
    if host.len() > MAX_HOST_BYTES {
        return Err(bad());
    }
    if host.contains(':') {
        return host
            .parse::<std::net::Ipv6Addr>()
            .map(|_| ())
            .map_err(|_| bad());
    }
    let ok = host.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    });
    if ok { Ok(()) } else { Err(bad()) }
}

/// A usable configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NqConfig {
    /// The document's `version` (1 today; absent reads as 1).
    pub version: u64,
    /// The small object (1 byte), for probes.
    pub small: HttpsUrl,
    /// The large object, for download load.
    pub large: HttpsUrl,
    /// The upload sink.
    pub upload: HttpsUrl,
    /// A host to connect to instead of the URLs' host (which stays the TLS name).
    pub test_endpoint: Option<String>,
}

#[derive(Deserialize)]
struct Raw {
    version: Option<u64>,
    urls: Option<RawUrls>,
    test_endpoint: Option<String>,
}

#[derive(Deserialize)]
struct RawUrls {
    small_download_url: Option<String>,
    large_download_url: Option<String>,
    upload_url: Option<String>,
    small_https_download_url: Option<String>,
    large_https_download_url: Option<String>,
    https_upload_url: Option<String>,
}

impl NqConfig {
    /// Reads a configuration document.
    pub fn parse(bytes: &[u8]) -> Result<NqConfig, ConfigError> {
        if bytes.len() > MAX_CONFIG_BYTES {
            return Err(ConfigError::TooLong {
                len: bytes.len(),
                max: MAX_CONFIG_BYTES,
            });
        }
        let raw: Raw =
            serde_json::from_slice(bytes).map_err(|e| ConfigError::NotJson(e.to_string()))?;
        let urls = raw.urls.ok_or(ConfigError::Missing("urls"))?;
        let pick = |key: &'static str, new: Option<String>, legacy: Option<String>| {
            let s = new.or(legacy).ok_or(ConfigError::Missing(key))?;
            HttpsUrl::parse(&s).map_err(|why| ConfigError::BadUrl { key, why })
        };
        let small = pick(
            "small_download_url",
            urls.small_download_url,
            urls.small_https_download_url,
        )?;
        let large = pick(
            "large_download_url",
            urls.large_download_url,
            urls.large_https_download_url,
        )?;
        let upload = pick("upload_url", urls.upload_url, urls.https_upload_url)?;
        let test_endpoint = match raw.test_endpoint {
            None => None,
            Some(e) => {
                let host = e.trim_start_matches('[').trim_end_matches(']');
                check_host(host)
                    .map_err(|_| ConfigError::BadEndpoint(e.chars().take(64).collect()))?;
                Some(host.to_ascii_lowercase())
            }
        };
        Ok(NqConfig {
            version: raw.version.unwrap_or(1),
            small,
            large,
            upload,
            test_endpoint,
        })
    }

    /// Refuses URLs on a host other than `host` (the configuration's own): a server's
    /// document should not send the load to a third party.
    pub fn require_host(&self, host: &str) -> Result<(), ConfigError> {
        for (key, u) in [
            ("small_download_url", &self.small),
            ("large_download_url", &self.large),
            ("upload_url", &self.upload),
        ] {
            if !u.host.eq_ignore_ascii_case(host) {
                return Err(ConfigError::OtherHost {
                    key,
                    host: u.host.chars().take(64).collect(),
                    expected: host.to_string(),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document of Apple's reference server (network-quality/server, nginx/root/config)
    /// with its host and port changed: both spellings of each key.
    const REFERENCE: &str = r#"{
      "version": 1,
      "urls": {
        "small_https_download_url": "https://127.0.0.1:8443/files/small",
        "large_https_download_url": "https://127.0.0.1:8443/files/large",
        "https_upload_url": "https://127.0.0.1:8443/slurp",
        "small_download_url": "https://127.0.0.1:8443/files/small",
        "large_download_url": "https://127.0.0.1:8443/files/large",
        "upload_url": "https://127.0.0.1:8443/slurp"
      }
    }"#;

    #[test]
    fn reads_the_reference_document() {
        let c = NqConfig::parse(REFERENCE.as_bytes()).unwrap();
        assert_eq!(c.version, 1);
        assert_eq!(c.small.host, "127.0.0.1");
        assert_eq!(c.small.port, 8443);
        assert_eq!(c.small.path, "/files/small");
        assert_eq!(c.large.path, "/files/large");
        assert_eq!(c.upload.path, "/slurp");
        assert_eq!(c.test_endpoint, None);
        assert!(c.require_host("127.0.0.1").is_ok());
    }

    #[test]
    fn legacy_keys_alone_are_read_and_new_keys_win() {
        let legacy = r#"{"version":1,"urls":{
            "small_https_download_url":"https://h.example/s",
            "large_https_download_url":"https://h.example/l",
            "https_upload_url":"https://h.example/u"}}"#;
        let c = NqConfig::parse(legacy.as_bytes()).unwrap();
        assert_eq!((c.small.path.as_str(), c.large.path.as_str()), ("/s", "/l"));
        assert_eq!(c.upload.port, 443);
        let both = r#"{"urls":{
            "small_https_download_url":"https://h.example/old",
            "small_download_url":"https://h.example/new",
            "large_download_url":"https://h.example/l",
            "upload_url":"https://h.example/u"},
            "test_endpoint":"Edge1.Example"}"#;
        let c = NqConfig::parse(both.as_bytes()).unwrap();
        assert_eq!(c.small.path, "/new");
        assert_eq!(c.version, 1);
        assert_eq!(c.test_endpoint.as_deref(), Some("edge1.example"));
    }

    #[test]
    fn hostile_documents_end_in_one_sentence() {
        let big = vec![b' '; MAX_CONFIG_BYTES + 1];
        let e = NqConfig::parse(&big).unwrap_err();
        assert!(matches!(e, ConfigError::TooLong { .. }), "{e}");
        let e = NqConfig::parse(b"<html>").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("the server's configuration is not valid JSON")
        );
        let e = NqConfig::parse(br#"{"version":1}"#).unwrap_err();
        assert_eq!(e, ConfigError::Missing("urls"));
        let e = NqConfig::parse(
            br#"{"urls":{"small_download_url":"https://h/s","upload_url":"https://h/u"}}"#,
        )
        .unwrap_err();
        assert_eq!(e, ConfigError::Missing("large_download_url"));
        let doc = r#"{"urls":{"small_download_url":"file:///etc/passwd",
            "large_download_url":"https://h/l","upload_url":"https://h/u"}}"#;
        let e = NqConfig::parse(doc.as_bytes()).unwrap_err();
        assert_eq!(
            e,
            ConfigError::BadUrl {
                key: "small_download_url",
                why: UrlError::NotHttps
            }
        );
        let long = format!("https://h/{}", "a".repeat(MAX_URL_BYTES));
        let doc = format!(
            r#"{{"urls":{{"small_download_url":"https://h/s","large_download_url":"{long}","upload_url":"https://h/u"}}}}"#
        );
        let e = NqConfig::parse(doc.as_bytes()).unwrap_err();
        assert_eq!(
            e,
            ConfigError::BadUrl {
                key: "large_download_url",
                why: UrlError::TooLong
            }
        );
        let doc = r#"{"urls":{"small_download_url":"https://h/s","large_download_url":"https://h/l",
            "upload_url":"https://h/u"},"test_endpoint":"h/evil path"}"#;
        assert!(matches!(
            NqConfig::parse(doc.as_bytes()),
            Err(ConfigError::BadEndpoint(_))
        ));
        for e in [
            ConfigError::Missing("urls"),
            ConfigError::TooLong { len: 1, max: 0 },
        ] {
            assert!(!e.to_string().contains('\n'));
        }
    }

    #[test]
    fn other_hosts_are_refused_by_name() {
        let doc = r#"{"urls":{"small_download_url":"https://a.example/s",
            "large_download_url":"https://victim.example/l","upload_url":"https://a.example/u"}}"#;
        let c = NqConfig::parse(doc.as_bytes()).unwrap();
        let e = c.require_host("a.example").unwrap_err();
        assert!(
            matches!(&e, ConfigError::OtherHost { key: "large_download_url", host, .. } if host == "victim.example")
        );
        assert!(e.to_string().contains("victim.example"));
        assert!(c.require_host("A.Example").is_err());
    }

    #[test]
    fn urls_are_taken_apart() {
        let u = HttpsUrl::parse("HTTPS://[::1]:4443/files/small?x=1#frag").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("::1", 4443, "/files/small?x=1")
        );
        assert_eq!(u.authority(), "[::1]:4443");
        let u = HttpsUrl::parse("https://Example.COM").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("example.com", 443, "/")
        );
        assert_eq!(u.authority(), "example.com:443");
        assert_eq!(HttpsUrl::parse("http://h/"), Err(UrlError::NotHttps));
        assert_eq!(HttpsUrl::parse("https:///x"), Err(UrlError::NoHost));
        assert_eq!(HttpsUrl::parse("https://h:0/"), Err(UrlError::BadPort));
        assert_eq!(HttpsUrl::parse("https://h:99999/"), Err(UrlError::BadPort));
        assert_eq!(
            HttpsUrl::parse("https://u:p@h/"),
            Err(UrlError::BadCharacters)
        );
        assert_eq!(
            HttpsUrl::parse("https://h/a b"),
            Err(UrlError::BadCharacters)
        );
        assert!(matches!(
            HttpsUrl::parse("https://h%2f/"),
            Err(UrlError::BadHost(_))
        ));
        assert!(matches!(
            HttpsUrl::parse("https://[::g]/"),
            Err(UrlError::BadHost(_))
        ));
        assert!(matches!(
            HttpsUrl::parse("https://a..b/"),
            Err(UrlError::BadHost(_))
        ));
    }
}
