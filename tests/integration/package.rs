//! What an installed netmeter comes with: `--version`'s feature list (probed), the man
//! pages and shell completions it generates, and the `.deb` that carries them.

use crate::support::*;
use std::process::Command;
use std::time::Duration;

fn version_text() -> String {
    let out = run(
        Command::new(netmeter()).arg("--version"),
        Duration::from_secs(10),
    );
    assert!(out.status.success(), "{}", show(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The line (available or not) a feature is on: each is on exactly one.
fn available(text: &str, feature: &str) -> bool {
    let line = |prefix: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no '{prefix}' line in {text}"))
            .to_string()
    };
    let yes = line("Optional features available: ");
    let no = line("Optional features not available: ");
    let listed = |l: &str| {
        l.split(", ")
            .any(|f| f == feature || f.starts_with(&format!("{feature} (")))
    };
    assert!(
        listed(&yes) != listed(&no),
        "{feature} in both or neither: {text}"
    );
    listed(&yes)
}

/// `--version` says what the kernel has, checked against the kernel's own account
/// (sysctl and procfs), not against the probe's method.
#[test]
fn version_lists_what_this_kernel_has() {
    let text = version_text();
    assert!(text.starts_with("netmeter "), "{text}");
    let mptcp =
        std::fs::read_to_string("/proc/sys/net/mptcp/enabled").is_ok_and(|v| v.trim() == "1");
    assert_eq!(available(&text, "MPTCP"), mptcp, "{text}");
    // The probe loads the sctp module where the kernel has one; /proc/net/sctp exists
    // exactly when SCTP is there.
    let sctp = std::path::Path::new("/proc/net/sctp").exists();
    assert_eq!(available(&text, "SCTP"), sctp, "{text}");
    // UDP GSO since Linux 4.18, GRO since 5.0, MSG_ZEROCOPY since 4.14.
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut nums = release
        .trim()
        .split(['.', '-'])
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let v = (nums.next().unwrap_or(0), nums.next().unwrap_or(0));
    assert_eq!(available(&text, "UDP GSO"), v >= (4, 18), "{text}");
    assert_eq!(available(&text, "UDP GRO"), v >= (5, 0), "{text}");
    assert_eq!(available(&text, "MSG_ZEROCOPY"), v >= (4, 14), "{text}");
    assert!(!available(&text, "authentication"), "{text}");
    // -v is the same.
    let out = run(Command::new(netmeter()).arg("-v"), Duration::from_secs(10));
    assert_eq!(String::from_utf8_lossy(&out.stdout), text);
}

/// `netmeter generate ASSET` into a file of `dir`.
fn generate(dir: &std::path::Path, asset: &str, file: &str) -> std::path::PathBuf {
    let out = run(
        Command::new(netmeter()).args(["generate", asset]),
        Duration::from_secs(10),
    );
    assert!(out.status.success(), "{}", show(&out));
    let path = dir.join(file);
    std::fs::write(&path, &out.stdout).unwrap();
    path
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("netmeter-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// man(1) renders a page: NAME, SYNOPSIS, options and the csv subcommand's page name.
fn assert_man_renders(page: &std::path::Path, wants: &[&str]) {
    let man = run(
        Command::new("man")
            .args(["-l", page.to_str().unwrap()])
            .env("MANWIDTH", "100")
            .env("MANPAGER", "cat")
            .env("PAGER", "cat"),
        Duration::from_secs(20),
    );
    let text = String::from_utf8_lossy(&man.stdout);
    assert!(man.status.success(), "{}", show(&man));
    assert!(man.stderr.is_empty(), "man warns: {}", show(&man));
    for want in ["NAME", "SYNOPSIS"].iter().chain(wants) {
        assert!(
            text.contains(want),
            "{want} not in the rendered page:\n{text}"
        );
    }
}

/// The generated man pages render with man(1) (man-db: `scripts/setup-package-tools.sh`).
#[test]
#[cfg_attr(not(feature = "full-tests"), ignore = "full tier: needs man-db")]
fn generated_man_pages_render() {
    let dir = scratch("man");
    let page = generate(&dir, "man", "netmeter.1");
    assert_man_renders(&page, &["--bitrate", "--find-max-rate", "netmeter-csv(1)"]);
    let page = generate(&dir, "man-csv", "netmeter-csv.1");
    assert_man_renders(&page, &["--fields", "RESULT"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ask a bash completion script what follows `netmeter --bit` and `netmeter csv --fi`.
fn bash_completes(script: &std::path::Path) -> Vec<String> {
    let cmd = format!(
        "source {}\n\
         COMP_WORDS=(netmeter --bit); COMP_CWORD=1; _netmeter netmeter --bit netmeter; echo \"${{COMPREPLY[*]}}\"\n\
         COMP_WORDS=(netmeter csv --fi); COMP_CWORD=2; _netmeter netmeter --fi csv; echo \"${{COMPREPLY[*]}}\"\n",
        script.display()
    );
    let out = run(
        Command::new("bash").args(["--norc", "-c", &cmd]),
        Duration::from_secs(10),
    );
    assert!(out.status.success(), "{}", show(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

/// The bash completion loads and completes netmeter's options and its csv subcommand's.
#[test]
fn generated_bash_completion_completes() {
    let dir = scratch("bash");
    let script = generate(&dir, "bash", "netmeter.bash");
    assert_eq!(bash_completes(&script), ["--bitrate", "--fields"]);
    let _ = std::fs::remove_dir_all(&dir);
}
