//! The responsiveness configuration a server publishes at `/.well-known/nq` (and `/config`,
//! as Apple's reference nginx configuration also serves it): its JSON shape, and the
//! origin its URLs are built from. Shared with the client's parser at merge.
//!
//! Source: github.com/network-quality/server, `nginx/root/config` and
//! `swift/Sources/networkQualityd/NetworkQualityConfig.swift`: version 1, six URL keys
//! (the `*_https_*` ones are the legacy names of the same three URLs).

use serde::{Deserialize, Serialize};

/// Where the configuration is served (the draft's well-known URI).
pub const WELL_KNOWN_PATH: &str = "/.well-known/nq";
/// The reference nginx configuration's second name for it.
pub const CONFIG_PATH: &str = "/config";
/// The 1-byte object.
pub const SMALL_PATH: &str = "/files/small";
/// The large object (at least 8 GB).
pub const LARGE_PATH: &str = "/files/large";
/// The upload sink.
pub const UPLOAD_PATH: &str = "/slurp";

/// The configuration document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NqConfig {
    pub version: u32,
    pub urls: NqUrls,
}

/// Its URLs: the three the draft names and their legacy `*_https_*` twins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NqUrls {
    pub small_https_download_url: String,
    pub large_https_download_url: String,
    pub https_upload_url: String,
    pub small_download_url: String,
    pub large_download_url: String,
    pub upload_url: String,
}

impl NqConfig {
    /// The configuration for a server reached as `https://{origin}` (`host[:port]`, an
    /// IPv6 address in brackets).
    pub fn for_origin(origin: &str) -> NqConfig {
        let url = |path: &str| format!("https://{origin}{path}");
        NqConfig {
            version: 1,
            urls: NqUrls {
                small_https_download_url: url(SMALL_PATH),
                large_https_download_url: url(LARGE_PATH),
                https_upload_url: url(UPLOAD_PATH),
                small_download_url: url(SMALL_PATH),
                large_download_url: url(LARGE_PATH),
                upload_url: url(UPLOAD_PATH),
            },
        }
    }

    /// The document as served (pretty, as the reference file is, newline-terminated).
    pub fn to_body(&self) -> String {
        // Serializing plain strings and an integer cannot fail.
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// The origin (`host[:port]`) a client named in its request (`:authority` or `Host`),
/// when it is one a URL can carry: letters, digits, `.-_:`, an IPv6 literal in
/// brackets, at most 255 bytes. Anything else (`None`) is replaced by the address the
/// connection arrived at, so a client cannot make the server publish another host's
/// URLs with odd characters in them.
pub fn origin_from_authority(authority: &str) -> Option<&str> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':');
    let plain = |s: &str| !s.is_empty() && s.chars().all(ok_char);
    let fine = match authority.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((ip, port)) => {
                ip.parse::<std::net::Ipv6Addr>().is_ok()
                    && (port.is_empty()
                        || port
                            .strip_prefix(':')
                            .is_some_and(|p| p.parse::<u16>().is_ok()))
            }
            None => false,
        },
        None => plain(authority) && authority.matches(':').count() <= 1,
    };
    (fine && authority.len() <= 255).then_some(authority)
}

/// `host[:port]` for a socket address, the way a URL writes it.
pub fn origin_of_addr(addr: std::net::SocketAddr) -> String {
    match addr {
        std::net::SocketAddr::V4(a) => a.to_string(),
        std::net::SocketAddr::V6(a) => format!("[{}]:{}", a.ip(), a.port()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_has_the_reference_keys_and_paths() {
        let c = NqConfig::for_origin("nq.example:8443");
        let v: serde_json::Value = serde_json::from_str(&c.to_body()).unwrap();
        assert_eq!(v["version"], 1);
        let urls = v["urls"].as_object().unwrap();
        let mut keys: Vec<&str> = urls.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "https_upload_url",
                "large_download_url",
                "large_https_download_url",
                "small_download_url",
                "small_https_download_url",
                "upload_url"
            ]
        );
        assert_eq!(
            v["urls"]["small_download_url"],
            "https://nq.example:8443/files/small"
        );
        assert_eq!(
            v["urls"]["large_https_download_url"],
            "https://nq.example:8443/files/large"
        );
        assert_eq!(v["urls"]["upload_url"], "https://nq.example:8443/slurp");
        let back: NqConfig = serde_json::from_str(&c.to_body()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn only_a_plain_authority_becomes_the_origin() {
        for good in [
            "localhost",
            "nq.example:8443",
            "127.0.0.1:1",
            "[::1]:8443",
            "[::1]",
        ] {
            assert_eq!(origin_from_authority(good), Some(good), "{good}");
        }
        for bad in [
            "",
            "evil.example/x",
            "a b",
            "host:1:2",
            "[::1",
            "[nothost]:1",
            "[::1]:x",
            "h\"ost",
            "user@host",
            &"a".repeat(256),
        ] {
            assert_eq!(origin_from_authority(bad), None, "{bad}");
        }
        let v6: std::net::SocketAddr = "[::1]:8443".parse().unwrap();
        assert_eq!(origin_of_addr(v6), "[::1]:8443");
        let v4: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert_eq!(origin_of_addr(v4), "127.0.0.1:9");
    }
}
