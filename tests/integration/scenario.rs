//! `netmeter scenario FILE` over loopback: two servers on two ports with the key and
//! third-party tests allowed; flows local and third-party started together (judged
//! from the start times the reports recorded), a host down, the JSON shape and the
//! text; and every shipped example parsed.

use crate::support::*;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!("nm-scen-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("key"), "6b1d0e0f3a7c4c2b9e8d7f6a5b4c3d2e\n").unwrap();
        Dir(dir)
    }
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn flows(v: &serde_json::Value) -> &Vec<serde_json::Value> {
    v["flows"].as_array().expect("flows")
}

#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: slow (seconds of traffic; the quick tier stays under 90 s)"
)]
fn local_and_third_party_flows_start_together_and_report_per_flow() {
    let dir = Dir::new("together");
    let (pa, pb) = (free_port(), free_port());
    // The servers read the key relative to their own working directory.
    let key = dir.0.join("key").display().to_string();
    let srv = |p: u16| {
        netmeter_server(
            p,
            &[
                "--psk-file",
                &key,
                "--allow-third-party",
                "127.0.0.0/8",
                "--max-tests",
                "4",
            ],
        )
    };
    let (_a, _b) = (srv(pa), srv(pb));
    let file = dir.write(
        "s.toml",
        &format!(
            "psk_file = \"key\"\n[hosts.a]\naddress = \"127.0.0.1:{pa}\"\n[hosts.b]\naddress = \"127.0.0.1:{pb}\"\n\
             [[flow]]\nname = \"up\"\nfrom = \"local\"\nto = \"a\"\nargs = \"-t 1\"\n\
             [[flow]]\nname = \"third\"\nfrom = \"a\"\nto = \"b\"\nargs = \"-u -b 2M -t 1\"\n\
             [[flow]]\nname = \"down\"\nfrom = \"local\"\nto = \"b\"\nargs = \"-t 1 -R -T 'down link'\"\n"
        ),
    );
    let out = run(
        Command::new(netmeter())
            .arg("scenario")
            .arg(&file)
            .arg("-J"),
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", show(&out));
    let v = json_of(&out, "scenario");
    let f = flows(&v);
    assert_eq!(f.len(), 3, "{v:#}");
    let names: Vec<&str> = f.iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["up", "third", "down"]);
    assert_eq!(f[1]["from"], "a");
    let epoch = f64_at(&v, "/start_epoch");
    for x in f {
        assert!(x["error"].is_null(), "{x:#}");
        assert!(
            f64_at(x, "/report/end/sum_received/bytes") > 0.0,
            "{}: {x:#}",
            x["name"]
        );
        // Every flow was asked for the one start instant, and its report says when
        // its data began: on this loopback every client reads the same clock.
        assert_eq!(f64_at(x, "/report/start/netmeter/txstart/requested"), epoch);
        let started = f64_at(x, "/report/start/netmeter/txstart/started");
        assert!(
            (started - epoch) > -0.05 && (started - epoch) < 2.0,
            "{}: started {started}, asked {epoch}",
            x["name"]
        );
    }
    assert_eq!(f[2]["report"]["title"], "down link");
    assert_eq!(v["total"]["flows"], 3);
    assert_eq!(v["total"]["failed"], 0);
    assert!(f64_at(&v, "/total/receiver_bits_per_second") > 0.0);
    assert!(f64_at(&v, "/total/start_spread_ms") < 2000.0);
}

#[test]
fn a_host_down_is_a_flow_with_its_error_and_the_text_labels_each_flow() {
    let dir = Dir::new("down");
    let live = free_port();
    let key = dir.0.join("key").display().to_string();
    let _srv = netmeter_server(
        live,
        &[
            "--psk-file",
            &key,
            "--allow-third-party",
            "127.0.0.0/8",
            "--max-tests",
            "4",
        ],
    );
    let down = free_port();
    let file = dir.write(
        "s.toml",
        &format!(
            "psk_file = \"key\"\n[hosts.live]\naddress = \"127.0.0.1:{live}\"\n[hosts.gone]\naddress = \"127.0.0.1:{down}\"\n\
             [[flow]]\nname = \"ok\"\nfrom = \"local\"\nto = \"live\"\nargs = \"-t 0.3\"\n\
             [[flow]]\nname = \"to-gone\"\nfrom = \"local\"\nto = \"gone\"\nargs = \"-t 0.3\"\n\
             [[flow]]\nname = \"from-gone\"\nfrom = \"gone\"\nto = \"live\"\nargs = \"-t 0.3\"\n"
        ),
    );
    let json = dir.0.join("run.json");
    let out = run(
        Command::new(netmeter())
            .arg("scenario")
            .arg(&file)
            .args(["--lead", "1", "-o"])
            .arg(&json),
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("Flow ok (from local to live 127.0.0.1:{live}")),
        "{text}"
    );
    assert!(text.contains("Flow from-gone (from gone to live"), "{text}");
    assert!(text.contains("1 of 3 flows ran"), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let f = flows(&v);
    assert!(f[0]["error"].is_null(), "{v:#}");
    assert!(f64_at(&f[0], "/report/end/sum_received/bytes") > 0.0);
    for x in &f[1..] {
        let e = x["error"].as_str().unwrap_or_default();
        assert!(e.contains("refused"), "{x:#}");
        assert!(x.get("report").is_none(), "{x:#}");
    }
    assert_eq!(v["total"]["failed"], 2);
    // No flow at all ran: the exit status says so.
    let file = dir.write(
        "gone.toml",
        &format!(
            "[hosts.gone]\naddress = \"127.0.0.1:{down}\"\n[[flow]]\nname = \"x\"\nfrom = \"local\"\nto = \"gone\"\nargs = \"-t 0.3\"\n"
        ),
    );
    let out = run(
        Command::new(netmeter())
            .arg("scenario")
            .arg(&file)
            .args(["--lead", "0.5"]),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no flow of the scenario ran"));
}

#[test]
fn a_bad_file_is_one_sentence_naming_the_line_and_the_key() {
    let dir = Dir::new("bad");
    let file = dir.write(
        "bad.toml",
        "[hosts.a]\naddress = \"127.0.0.1\"\n\n[[flow]]\nname = \"v\"\nfrom = \"local\"\nto = \"a\"\nstart = -2\n",
    );
    let out = run(
        Command::new(netmeter()).arg("scenario").arg(&file),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("line 8: start:"), "{err}");
}
