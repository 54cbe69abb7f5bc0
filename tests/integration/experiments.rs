//! The experiment subcommands through the binary: `netmeter compare` on fixed result
//! files (the renderers' testdata: netmeter's and iperf3 3.22's `-J` documents, and
//! repetition documents made from them), its exit codes and its JSON.

use crate::support::netmeter;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/report/testdata")
        .join(name)
}

/// A scratch directory for this test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("nm-exp-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A repetition document (`{"runs": [...]}`) of `tcp.json` with these receiver rates.
fn repetitions(dir: &Path, name: &str, rates: &[f64]) -> PathBuf {
    let base: Value =
        serde_json::from_str(&std::fs::read_to_string(testdata("tcp.json")).unwrap()).unwrap();
    let runs: Vec<Value> = rates
        .iter()
        .map(|&bps| {
            let mut r = base.clone();
            r["end"]["sum_received"]["bits_per_second"] = bps.into();
            r
        })
        .collect();
    let path = dir.join(name);
    std::fs::write(&path, serde_json::json!({ "runs": runs }).to_string()).unwrap();
    path
}

fn compare(args: &[&str]) -> Output {
    Command::new(netmeter())
        .arg("compare")
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn compare_repetitions_gates_on_a_significant_drop() {
    let s = Scratch::new("gate");
    let base = repetitions(
        &s.0,
        "base.json",
        &[100.1e6, 99.8e6, 100.3e6, 99.9e6, 100.0e6],
    );
    let same = repetitions(
        &s.0,
        "same.json",
        &[100.2e6, 99.7e6, 100.0e6, 100.1e6, 99.9e6],
    );
    let slow = repetitions(&s.0, "slow.json", &[80.1e6, 79.8e6, 80.3e6, 79.9e6, 80.0e6]);
    let p = |x: &PathBuf| x.to_str().unwrap().to_string();

    let o = compare(&[&p(&base), &p(&same), "--fail-if-worse", "10"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("(5 runs)"), "{out}");
    assert!(out.contains("no significant change (Welch"), "{out}");

    let o = compare(&[&p(&base), &p(&slow), "--fail-if-worse", "10"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    assert!(out.contains("-20.0 %  worse, significant (Welch"), "{out}");
    assert_eq!(
        err.trim(),
        "netmeter: Receiver throughput got worse by more than 10 % with significance"
    );
    // Worse, but not by more than the limit: passes.
    let o = compare(&[&p(&base), &p(&slow), "--fail-if-worse", "25"]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));

    let o = compare(&[&p(&base), &p(&slow), "-J"]);
    assert_eq!(o.status.code(), Some(0));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = &j["comparison"]["figures"][0];
    assert_eq!(row["key"], "receiver_bits_per_second");
    assert_eq!(row["verdict"], "worse");
    assert_eq!(row["test"]["test"], "welch");
    assert_eq!(row["base"]["n"], 5);
    assert!((row["change_pct"].as_f64().unwrap() + 20.0).abs() < 0.1);
}

#[test]
fn compare_single_runs_and_iperf3_documents() {
    let tcp = testdata("tcp.json");
    let o = compare(&[
        tcp.to_str().unwrap(),
        tcp.to_str().unwrap(),
        "--fail-if-worse",
        "0",
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("single run, no significance"), "{out}");
    // iperf3's own document against netmeter's: the same kind of test, compared.
    let o = compare(&[
        testdata("iperf3_322_udp_bidir.json").to_str().unwrap(),
        testdata("udp_bidir.json").to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(out.contains("Reverse receiver throughput"), "{out}");
    assert!(out.contains("Jitter"), "{out}");
}

#[test]
fn compare_refuses_mismatched_or_bad_files() {
    let o = compare(&[
        testdata("tcp.json").to_str().unwrap(),
        testdata("tcp_reverse.json").to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(out.is_empty(), "{out}");
    assert_eq!(
        err.trim(),
        "netmeter: the base result is a TCP bulk test (client to server) but the new one \
         is a TCP bulk test (server to client, -R): compare needs two results of the same \
         kind of test"
    );
    let o = compare(&[
        "/nonexistent/base.json",
        testdata("tcp.json").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o)
            .1
            .starts_with("netmeter: cannot read /nonexistent/base.json")
    );
    let o = compare(&[
        testdata("tcp.txt").to_str().unwrap(),
        testdata("tcp.json").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o)
            .1
            .contains("is not a netmeter or iperf3 -J document"),
        "{:?}",
        text(&o)
    );
    let o = compare(&["a.json"]);
    assert_eq!(o.status.code(), Some(1));
}
