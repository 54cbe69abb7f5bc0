//! The responsiveness reference server (nginx with the configuration written after
//! Apple's network-quality/server, `scripts/setup-rpm-reference.sh`) serves what the
//! draft asks of a responsiveness server, and netmeter's configuration reader takes its
//! document: checked with curl over HTTP/2 and against nginx's own access log. Then
//! `netmeter rpm` against it: its byte and probe counts judged against what nginx
//! logged, and hostile configurations refused in one sentence.

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

/// `netmeter rpm ARGS` against `server`, bounded; its output.
fn rpm(args: &[&str]) -> std::process::Output {
    run_bounded(
        Command::new(netmeter()).arg("rpm").args(args),
        Duration::from_secs(120),
        "netmeter rpm",
    )
}

/// What the load connections of one direction moved, by the client's count: its bytes,
/// and connections opened.
fn direction(doc: &serde_json::Value, dir: &str) -> (u64, u64, f64, f64) {
    let d = doc["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .flat_map(|p| p["directions"].as_array().expect("directions").iter())
        .find(|d| d["direction"] == dir)
        .unwrap_or_else(|| panic!("no {dir} in {doc}"));
    (
        d["bytes"].as_u64().expect("bytes"),
        d["connections_opened"].as_u64().expect("opened"),
        d["outcome"]["goodput_bps"].as_f64().expect("goodput"),
        d["outcome"]["elapsed_s"].as_f64().expect("elapsed"),
    )
}

/// TCP connections on this host's loopback with local port `port` that are established
/// or waiting for their owner to close them (nginx's side of a client that left).
fn open_connections(port: u16) -> usize {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|t| t.lines().skip(1).map(str::to_string).collect::<Vec<_>>())
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let local_port = f
                .get(1)
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            // 01 ESTABLISHED, 08 CLOSE_WAIT.
            local_port == Some(port) && matches!(f.get(3), Some(&"01") | Some(&"08"))
        })
        .count()
}

/// The most a load connection can have in flight that one end counted and the other
/// did not: the HTTP/2 stream window (8 MiB) and both sockets' buffers.
const IN_FLIGHT_PER_CONN: u64 = 32 << 20;

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs nginx from scripts/setup-rpm-reference.sh"
)]
fn rpm_client_counts_agree_with_the_reference_servers_log() {
    let server = RpmReference::start();
    let out = rpm(&[
        &server.config_url(),
        "--insecure",
        "--sequential",
        "-m",
        "4",
        "-J",
    ]);
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--insecure"),
        "{}",
        show(&out)
    );
    let doc = json_of(&out, "netmeter rpm");
    let (down_bytes, down_conns, down_bps, down_s) = direction(&doc, "download");
    let (up_bytes, up_conns, up_bps, up_s) = direction(&doc, "upload");
    assert!(down_bytes > 0 && up_bytes > 0, "{doc}");

    // nginx logs a request when it ends, the load's when netmeter's exit closes their
    // connections: wait until nginx has closed every connection on its port.
    await_evidence(
        "nginx closing the client's connections",
        || open_connections(server.port) == 0,
        || server.error_log(),
    );
    let log = server.log();
    let n = |uri: &str| log.iter().filter(|e| e.uri == uri).count() as u64;
    // One line per GET of the large object (a connection asks again if one ends).
    assert!(n("/files/large") >= 1, "{log:?}");
    assert!((1..=up_conns).contains(&n("/slurp")), "{log:?}");
    let sum = |uri: &str, f: fn(&LogEntry) -> u64| -> u64 {
        log.iter().filter(|e| e.uri == uri).map(f).sum()
    };
    // Download: nginx sent at least what netmeter counted, and no more than what can
    // be in flight on the connections when the phase ended.
    let nginx_down = sum("/files/large", |e| e.body_sent);
    assert!(down_bytes <= nginx_down, "{down_bytes} > {nginx_down}");
    assert!(
        nginx_down - down_bytes <= down_conns * IN_FLIGHT_PER_CONN,
        "nginx {nginx_down}, netmeter {down_bytes}, {down_conns} connections"
    );
    // Upload: netmeter counts what nginx's TCP acknowledged when the phase ended; nginx
    // read that and what was still in flight then (and the requests' headers): the two
    // differ by no more than what can be in flight on the connections.
    let nginx_up = sum("/slurp", |e| e.received);
    assert!(
        nginx_up.abs_diff(up_bytes) <= up_conns * IN_FLIGHT_PER_CONN,
        "nginx {nginx_up}, netmeter {up_bytes}, {up_conns} connections"
    );
    // The capacity is the goodput's moving average over the (at most MAD = 4)
    // intervals: with the run no longer than those, it is the bytes over the time,
    // within what unequal intervals and the last in-flight bytes change.
    for (what, bps, bytes, secs) in [
        ("download", down_bps, down_bytes, down_s),
        ("upload", up_bps, up_bytes, up_s),
    ] {
        let whole = bytes as f64 * 8.0 / secs;
        assert!(
            (bps - whole).abs() <= 0.25 * whole,
            "{what}: capacity {bps} against {whole} from the bytes"
        );
    }

    // Probes: every completed one is a GET of the 1-byte object nginx answered with
    // 200; nginx answered no more than were started.
    let completed = doc["idle_probes"].as_array().expect("idle").len() as u64
        + doc["phases"]
            .as_array()
            .expect("phases")
            .iter()
            .map(|p| p["probes"].as_array().expect("probes").len() as u64)
            .sum::<u64>();
    let launched = doc["probes_launched"].as_u64().expect("launched");
    let failed = doc["probe_errors"].as_u64().expect("errors");
    assert!(completed + failed <= launched, "{doc}");
    let small_ok = log
        .iter()
        .filter(|e| e.uri == "/files/small" && e.status == 200 && e.body_sent == 1)
        .count() as u64;
    assert!(
        (completed..=launched).contains(&small_ok),
        "nginx answered {small_ok} small GETs; netmeter completed {completed} of {launched}"
    );
    assert!(completed >= 20, "{completed} probes");
    // Each probe kind and the summary are in the document.
    assert!(doc["summary"]["rpm"].as_f64().expect("rpm") > 0.0, "{doc}");
    assert!(doc["summary"]["idle_latency_ms"].as_f64().expect("idle") > 0.0);
    assert!(doc["loaded_probe_times"]["self_http"]["count"].as_u64() > Some(0));
    // The configuration was read once.
    assert_eq!(log.iter().filter(|e| e.uri == "/.well-known/nq").count(), 1);
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs nginx from scripts/setup-rpm-reference.sh"
)]
fn rpm_refuses_a_configuration_pointing_elsewhere_in_one_sentence() {
    let server = RpmReference::start();
    // nginx reads the file at each request: the document now sends the load to
    // another host.
    std::fs::write(
        server.prefix.join("config"),
        r#"{"version":1,"urls":{"small_download_url":"https://192.0.2.1/s","large_download_url":"https://192.0.2.1/l","upload_url":"https://192.0.2.1/u"}}"#,
    )
    .expect("config");
    let out = rpm(&[&server.config_url(), "--insecure"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.contains("is not usable") && last.contains("192.0.2.1"),
        "{}",
        show(&out)
    );
    // No load or probe went anywhere: only the configuration was asked for.
    let log = server.log();
    assert!(log.iter().all(|e| e.uri == "/.well-known/nq"), "{log:?}");
}

#[test]
fn rpm_usage_mistakes_are_one_sentence() {
    for (args, want) in [
        (&["http://127.0.0.1/.well-known/nq"][..], "URL http://"),
        (&["https://127.0.0.1/nq", "-m", "0"][..], "--max-duration 0"),
        (
            &["https://127.0.0.1/nq", "--plot", "x.pdf"][..],
            "--plot x.pdf",
        ),
    ] {
        let out = rpm(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", show(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// A 50 Mbit/s bottleneck (tbf, 100 ms of queue) with 5 ms each way, nginx behind it:
/// idle, a foreign probe's parts each take the 10 ms round trip; under a download the
/// queue fills and the responsiveness falls far below the idle one, while the capacity
/// is the tbf rate less the headers, and no more than the shaper itself passed.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces) and nginx"
)]
fn rpm_on_a_shaped_link_falls_below_idle_and_finds_the_rate() {
    use crate::support::netbed::{Dir, LinkConfig, Netbed, Side, timing_lock};
    let _t = timing_lock();
    Netbed::require();
    let rate_mbit = 50.0;
    let bed = Netbed::new(
        LinkConfig::new()
            .rate_mbit(rate_mbit)
            .queue_ms(100.0)
            .delay_ms(5.0),
    )
    .expect("building the bed");
    let h2 = bed.h2_addr().to_string();
    let server = RpmReference::start_with(&h2, None, |nginx| bed.cmd(Side::H2, nginx));
    let url = server.config_url();
    let out = bed
        .run_in(
            Side::H1,
            netmeter(),
            &[
                "rpm",
                url.as_str(),
                "--insecure",
                "-d",
                "down",
                "-m",
                "12",
                "-J",
            ],
            Duration::from_secs(90),
        )
        .expect("netmeter rpm");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let s = &doc["summary"];
    let idle_ms = s["idle_latency_ms"].as_f64().expect("idle latency");
    assert!(
        (9.0..=40.0).contains(&idle_ms),
        "idle latency {idle_ms} ms on a 10 ms path"
    );
    let idle_rpm = 60_000.0 / idle_ms;
    let rpm = s["rpm"].as_f64().expect("rpm");
    assert!(
        rpm < idle_rpm / 2.0,
        "loaded {rpm} RPM against {idle_rpm:.0} idle"
    );
    // The capacity against the link: the tbf rate counts Ethernet frames, of which
    // TCP/IP headers, TLS records and HTTP/2 frames take ~5 %.
    let bps = s["downlink_bps"].as_f64().expect("downlink");
    assert!(
        bps > 0.85 * rate_mbit * 1e6 && bps < rate_mbit * 1e6,
        "downlink {bps} bit/s on a {rate_mbit} Mbit/s tbf"
    );
    // What netmeter counted passed the shaper, and nginx sent it.
    let (bytes, conns, _, _) = direction(&doc, "download");
    let shaped = bed
        .shaper_stats(Dir::H2ToH1)
        .expect("tc")
        .expect("a tbf toward h1")
        .sent_bytes;
    assert!(
        bytes < shaped,
        "netmeter counted {bytes}, the tbf passed {shaped}"
    );
    let log = await_value("the download's log lines", || {
        let log = server.log();
        let n = log.iter().filter(|e| e.uri == "/files/large").count() as u64;
        (n >= conns).then_some(log)
    });
    let nginx: u64 = log
        .iter()
        .filter(|e| e.uri == "/files/large")
        .map(|e| e.body_sent)
        .sum();
    assert!(bytes <= nginx, "netmeter {bytes}, nginx {nginx}");
}

/// Ctrl-C in the middle of a run: netmeter stops at once with a summary of what it
/// measured, marked as interrupted, and exits 0.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs nginx from scripts/setup-rpm-reference.sh"
)]
fn rpm_interrupted_prints_what_it_measured() {
    let server = RpmReference::start();
    let c = Proc::spawn(
        "netmeter rpm",
        Command::new(netmeter()).args([
            "rpm",
            &server.config_url(),
            "--insecure",
            "-d",
            "down",
            "-m",
            "60",
        ]),
    )
    .watch();
    // Evidence the load runs: two interval lines.
    assert!(
        c.out.wait_for("[download]", 2, EVIDENCE_TIMEOUT),
        "{}",
        c.out.text()
    );
    let st = Command::new("kill")
        .args(["-s", "INT", &c.pid().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    // Bounds a process that ignores the signal, not the host's speed.
    let out = c.finish(Duration::from_secs(30));
    assert!(out.status.success(), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for want in [
        "Downlink capacity:",
        "Responsiveness:",
        "Idle Latency:",
        "(interrupted",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{}", show(&out));
    }
}

/// Hostile servers end in one sentence within the test's time: a server that accepts
/// the connection and never answers the TLS handshake (bounded by the 10 s step
/// limit), and a "small" object that is not small (capped at 64 KiB).
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs nginx from scripts/setup-rpm-reference.sh; waits 10 s"
)]
fn rpm_hostile_servers_end_in_one_sentence() {
    // The kernel completes the TCP handshake for the listener's backlog; nothing ever
    // answers the ClientHello.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let base = format!(
        "https://127.0.0.1:{}",
        silent.local_addr().expect("addr").port()
    );
    let (l, s, u) = (
        format!("{base}/large"),
        format!("{base}/small"),
        format!("{base}/slurp"),
    );
    let out = rpm(&["-k", "--large", &l, "--small", &s, "--upload", &u]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.contains("TLS handshake") && last.contains("more than 10 s"),
        "{}",
        show(&out)
    );
    drop(silent);

    // The large object given as the small one: the probe stops reading at the cap.
    let server = RpmReference::start();
    let base = format!("https://127.0.0.1:{}", server.port);
    let (l, s, u) = (
        format!("{base}/files/large"),
        format!("{base}/files/large"),
        format!("{base}/slurp"),
    );
    let out = rpm(&["-k", "--large", &l, "--small", &s, "--upload", &u]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err.lines().last().unwrap_or("");
    assert!(
        last.contains("more than 65536 bytes where a small object was expected"),
        "{}",
        show(&out)
    );
}

/// `openssl ARGS` in `dir`, which must succeed.
fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out = run_bounded(
        Command::new("openssl").current_dir(dir).args(args),
        Duration::from_secs(60),
        "openssl",
    );
    assert!(out.status.success(), "openssl {args:?}: {}", show(&out));
}

/// `--cacert`: a server whose certificate a test CA signed is trusted with that CA's
/// file (and `--plot` draws that run's probes), and refused without it (the default
/// roots do not know it) in one sentence.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs nginx from scripts/setup-rpm-reference.sh"
)]
fn rpm_trusts_a_cacert_file_and_refuses_an_unknown_issuer() {
    let dir = std::env::temp_dir().join(format!("nm-rpm-ca-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-subj",
        "/CN=netmeter test CA",
        "-days",
        "2",
    ]);
    openssl(&dir, &ca);
    let mut csr = vec!["req"];
    csr.extend(ec);
    csr.extend([
        "-keyout",
        "key.pem",
        "-out",
        "leaf.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    openssl(&dir, &csr);
    std::fs::write(
        dir.join("leaf.ext"),
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n",
    )
    .expect("ext");
    openssl(
        &dir,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "cert.pem",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
        ],
    );
    let server = RpmReference::start_with("127.0.0.1", Some(&dir), |nginx| Command::new(nginx));
    let ca_file = dir.join("ca.pem");
    let svg = dir.join("probes.svg");
    let out = rpm(&[
        &server.config_url(),
        "--cacert",
        ca_file.to_str().expect("utf-8"),
        "-d",
        "down",
        "-m",
        "2",
        "--plot",
        svg.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success(), "{}", show(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Downlink capacity:"));
    // --plot drew the probe times, a series per kind.
    let drawn = std::fs::read_to_string(&svg).expect("the --plot file");
    for name in [
        "<svg",
        "foreign TCP",
        "foreign TLS",
        "foreign GET",
        "self GET",
    ] {
        assert!(drawn.contains(name), "{name} not in the chart");
    }
    let out = rpm(&[&server.config_url(), "-d", "down", "-m", "2"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("TLS handshake") && err.contains("UnknownIssuer"),
        "{err}"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The configuration's URLs share its host but may name other ports: each load goes
/// where its URL says (here the large object on a second server).
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs nginx from scripts/setup-rpm-reference.sh"
)]
fn rpm_loads_go_to_each_urls_own_port() {
    let a = RpmReference::start();
    let b = RpmReference::start();
    let (pa, pb) = (a.port, b.port);
    std::fs::write(
        a.prefix.join("config"),
        format!(
            r#"{{"version":1,"urls":{{"small_download_url":"https://127.0.0.1:{pa}/files/small","large_download_url":"https://127.0.0.1:{pb}/files/large","upload_url":"https://127.0.0.1:{pa}/slurp"}}}}"#
        ),
    )
    .expect("config");
    let out = rpm(&[&a.config_url(), "--insecure", "-d", "down", "-m", "2"]);
    assert!(out.status.success(), "{}", show(&out));
    await_evidence(
        "both servers closing the client's connections",
        || open_connections(pa) == 0 && open_connections(pb) == 0,
        || format!("{}{}", a.error_log(), b.error_log()),
    );
    let large = |log: &[LogEntry]| log.iter().filter(|e| e.uri == "/files/large").count();
    assert!(large(&b.log()) >= 1, "{:?}", b.log());
    assert_eq!(large(&a.log()), 0, "{:?}", a.log());
    assert!(a.log().iter().any(|e| e.uri == "/files/small"));
}

/// The upload on the same kind of bed, netmeter's connections on cubic (`-C`): the
/// uplink capacity is the tbf rate less the headers, no more than nginx read and the
/// shaper passed toward it, and the responsiveness falls far below the idle one.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root (network namespaces) and nginx"
)]
fn rpm_upload_with_cubic_on_a_shaped_link_finds_the_rate() {
    use crate::support::netbed::{Dir, LinkConfig, Netbed, Side, timing_lock};
    let _t = timing_lock();
    Netbed::require();
    let rate_mbit = 50.0;
    let bed = Netbed::new(
        LinkConfig::new()
            .rate_mbit(rate_mbit)
            .queue_ms(100.0)
            .delay_ms(5.0),
    )
    .expect("building the bed");
    let h2 = bed.h2_addr().to_string();
    let server = RpmReference::start_with(&h2, None, |nginx| bed.cmd(Side::H2, nginx));
    let url = server.config_url();
    let out = bed
        .run_in(
            Side::H1,
            netmeter(),
            &[
                "rpm",
                url.as_str(),
                "--insecure",
                "-d",
                "up",
                "-C",
                "cubic",
                "-m",
                "12",
                "-J",
            ],
            Duration::from_secs(90),
        )
        .expect("netmeter rpm");
    let doc: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let s = &doc["summary"];
    let idle_rpm = 60_000.0 / s["idle_latency_ms"].as_f64().expect("idle latency");
    let rpm = s["rpm"].as_f64().expect("rpm");
    assert!(
        rpm < idle_rpm / 2.0,
        "loaded {rpm} RPM against {idle_rpm:.0} idle"
    );
    let bps = s["uplink_bps"].as_f64().expect("uplink");
    assert!(
        bps > 0.85 * rate_mbit * 1e6 && bps < rate_mbit * 1e6,
        "uplink {bps} bit/s on a {rate_mbit} Mbit/s tbf"
    );
    let (_, conns, _, _) = direction(&doc, "upload");
    let shaped = bed
        .shaper_stats(Dir::H1ToH2)
        .expect("tc")
        .expect("a tbf toward h2")
        .sent_bytes;
    let log = await_value("the upload's log lines", || {
        let log = server.log();
        let n = log.iter().filter(|e| e.uri == "/slurp").count() as u64;
        (n >= 1 && n <= conns).then_some(log)
    });
    let nginx: u64 = log
        .iter()
        .filter(|e| e.uri == "/slurp")
        .map(|e| e.received)
        .sum();
    assert!(
        nginx < shaped,
        "nginx read {nginx}, the tbf passed {shaped}"
    );
}

/// The default: download and upload at once, one phase with both directions sharing
/// the probes; the summary has both capacities and one responsiveness.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs nginx from scripts/setup-rpm-reference.sh"
)]
fn rpm_both_directions_at_once_is_one_phase() {
    let server = RpmReference::start();
    let out = rpm(&[&server.config_url(), "--insecure", "-m", "3", "-J"]);
    assert!(out.status.success(), "{}", show(&out));
    let doc = json_of(&out, "netmeter rpm");
    let phases = doc["phases"].as_array().expect("phases");
    assert_eq!(phases.len(), 1, "{doc}");
    let dirs: Vec<&str> = phases[0]["directions"]
        .as_array()
        .expect("directions")
        .iter()
        .map(|d| d["direction"].as_str().expect("direction"))
        .collect();
    assert_eq!(dirs, ["download", "upload"]);
    let s = &doc["summary"];
    for key in ["downlink_bps", "uplink_bps", "rpm"] {
        assert!(s[key].as_f64().is_some_and(|v| v > 0.0), "{key}: {doc}");
    }
    assert_eq!(s["rpm"], phases[0]["rpm"]);
}
