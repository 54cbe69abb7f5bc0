//! The responsiveness reference server (nginx with the configuration written after
//! Apple's network-quality/server, `scripts/setup-rpm-reference.sh`) serves what the
//! draft asks of a responsiveness server, and netmeter's configuration reader takes its
//! document: checked with curl over HTTP/2 and against nginx's own access log.
//! (`netmeter rpm`, the client, is not built yet; its tests will use this server.)

use crate::support::rpm_reference::{LogEntry, RpmReference};
use crate::support::*;
use netmeter::rpm::config::NqConfig;
use std::process::Command;
use std::time::Duration;

/// `curl --http2 --insecure` with `-w FORMAT`; its stdout.
fn curl(args: &[&str], format: &str) -> String {
    let out = run_bounded(
        Command::new("curl")
            .args([
                "-sS",
                "--http2",
                "--insecure",
                "--max-time",
                "60",
                "-w",
                format,
            ])
            .args(args),
        Duration::from_secs(90),
        "curl",
    );
    assert!(out.status.success(), "{}", show(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs nginx from scripts/setup-rpm-reference.sh"
)]
fn reference_server_serves_config_objects_and_upload_sink() {
    let server = RpmReference::start();
    let base = format!("https://127.0.0.1:{}", server.port);

    // The configuration: netmeter's reader takes it, every URL on this server.
    let body = curl(&[&server.config_url()], "");
    let config = NqConfig::parse(body.as_bytes()).unwrap_or_else(|e| panic!("{e}: {body}"));
    config.require_host("127.0.0.1").expect("same host");
    for u in [&config.small, &config.large, &config.upload] {
        assert_eq!(u.port, server.port, "{}", u.url);
    }

    // The small object: 1 byte, over HTTP/2.
    let small = curl(
        &["-o", "/dev/null", &format!("{base}{}", config.small.path)],
        "%{http_version} %{size_download}",
    );
    assert_eq!(small, "2 1");

    // The large object: at least the draft's 8 GB.
    let head = curl(&["-I", &format!("{base}{}", config.large.path)], "");
    let len: u64 = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no content-length: {head}"));
    assert!(len >= 8_000_000_000, "{len}");

    // The upload sink takes a 5 MB body whole, and nginx's log counts every byte.
    let payload = server.prefix.join("payload");
    std::fs::write(&payload, vec![0u8; 5_000_000]).expect("payload");
    let up = curl(
        &[
            "-o",
            "/dev/null",
            "-X",
            "POST",
            "--data-binary",
            &format!("@{}", payload.display()),
            &format!("{base}{}", config.upload.path),
        ],
        "%{http_code} %{size_upload}",
    );
    assert_eq!(up, "200 5000000");

    // The access log: one line per request (config, small, HEAD large, upload), written
    // when each ends; wait for the evidence.
    let log = await_value("4 access-log lines", || {
        let log = server.log();
        (log.len() >= 4).then_some(log)
    });
    let find = |uri: &str| -> &LogEntry {
        log.iter()
            .find(|e| e.uri == uri)
            .unwrap_or_else(|| panic!("no {uri} in {log:?}"))
    };
    assert_eq!(find("/files/small").body_sent, 1);
    assert_eq!(find("/.well-known/nq").body_sent, body.len() as u64);
    let upload = find("/slurp");
    assert_eq!((upload.method.as_str(), upload.status), ("POST", 200));
    // The request's length is the body plus its (HPACK-compressed) header block.
    assert!(
        (5_000_000..5_004_096).contains(&upload.received),
        "{upload:?}"
    );
    assert!(
        server.error_log().lines().all(|l| !l.contains("[emerg]")),
        "{}",
        server.error_log()
    );
}
