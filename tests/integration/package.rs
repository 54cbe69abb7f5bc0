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
    assert!(available(&text, "authentication"), "{text}");
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
    let page = generate(&dir, "man-compare", "netmeter-compare.1");
    assert_man_renders(&page, &["--fail-if-worse", "Welch"]);
    let page = generate(&dir, "man-sweep", "netmeter-sweep.1");
    assert_man_renders(&page, &["--proto", "netmeter sweep -c HOST"]);
    let page = generate(&dir, "man-doctor", "netmeter-doctor.1");
    assert_man_renders(&page, &["--json", "HOST"]);
    let page = generate(&dir, "man-mesh", "netmeter-mesh.1");
    assert_man_renders(&page, &["--psk-file", "TEST OPTIONS"]);
    let page = generate(&dir, "man-plot", "netmeter-plot.1");
    assert_man_renders(&page, &["--output", "RESULT.json"]);
    let page = generate(&dir, "man-report", "netmeter-report.1");
    assert_man_renders(&page, &["--output", "FILE.html"]);
    let page = generate(&dir, "man-generate", "netmeter-generate.1");
    assert_man_renders(&page, &["man-mesh", "EXIT STATUS"]);
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

/// The zsh completion parses (`zsh -n`) and compinit registers it for `netmeter` (its
/// `#compdef` line) and loads it as a function; fish's completes `netmeter --bit` and `netmeter csv --fi`.
#[test]
#[cfg_attr(not(feature = "full-tests"), ignore = "full tier: needs zsh and fish")]
fn generated_zsh_and_fish_completions_work() {
    let dir = scratch("zshfish");
    let zsh = generate(&dir, "zsh", "_netmeter");
    let syntax = run(
        Command::new("zsh").args(["-n", zsh.to_str().unwrap()]),
        Duration::from_secs(10),
    );
    assert!(syntax.status.success(), "{}", show(&syntax));
    let load = format!(
        "fpath=({} $fpath); autoload -U compinit && compinit -u -D; print -r -- comps=$_comps[netmeter]; autoload -U +X _netmeter; whence -w _netmeter",
        dir.display()
    );
    let out = run(
        Command::new("zsh").args(["-f", "-c", &load]),
        Duration::from_secs(20),
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("comps=_netmeter\n") && said.contains("_netmeter: function"),
        "{}",
        show(&out)
    );

    let fish = generate(&dir, "fish", "netmeter.fish");
    let cmd = format!(
        "source {}; complete -C 'netmeter --bit'; complete -C 'netmeter csv --fi'",
        fish.display()
    );
    let out = run(
        Command::new("fish").args(["--no-config", "-c", &cmd]),
        Duration::from_secs(20),
    );
    assert!(out.status.success(), "{}", show(&out));
    let words: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').next().unwrap_or("").to_string())
        .collect();
    assert_eq!(words, ["--bitrate", "--fields"], "{}", show(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Build the `.deb` of the binary under test with `scripts/build-deb.sh`; its path.
fn build_deb(out: &std::path::Path) -> std::path::PathBuf {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-deb.sh");
    let built = run_bounded(
        Command::new(script).args(["--binary", netmeter(), "--out", out.to_str().unwrap()]),
        Duration::from_secs(120),
        "build-deb.sh",
    );
    assert!(built.status.success(), "{}", show(&built));
    let path = String::from_utf8_lossy(&built.stdout).trim().to_string();
    std::path::PathBuf::from(path)
}

fn field(deb: &std::path::Path, name: &str) -> String {
    let out = run(
        Command::new("dpkg-deb").args(["--field", deb.to_str().unwrap(), name]),
        Duration::from_secs(10),
    );
    assert!(out.status.success(), "{}", show(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The package: its control fields; its dependencies resolve on this system (apt-get's
/// simulation, which changes nothing); `dpkg -i` into a throwaway root with its own dpkg
/// database (never the system's) installs the binary, every man page and the three
/// completions; the installed binary runs a loopback test, its pages render and its bash
/// completion completes; `dpkg -r` takes every file away again.
#[test]
#[cfg_attr(
    not(feature = "full-tests"),
    ignore = "full tier: needs root, dpkg-dev and man-db"
)]
fn deb_installs_runs_and_removes() {
    let dir = scratch("deb");
    let deb = build_deb(&dir.join("out"));
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(field(&deb, "Package"), "netmeter");
    assert_eq!(field(&deb, "Version"), format!("{version}-1"));
    assert!(
        field(&deb, "Depends").contains("libc6 (>="),
        "{}",
        field(&deb, "Depends")
    );

    let sim = run(
        Command::new("apt-get").args(["-s", "-q", "install", deb.to_str().unwrap()]),
        Duration::from_secs(60),
    );
    assert!(
        sim.status.success() && String::from_utf8_lossy(&sim.stdout).contains("Inst netmeter"),
        "{}",
        show(&sim)
    );

    let root = dir.join("root");
    for d in ["var/lib/dpkg/info", "var/lib/dpkg/updates"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(root.join("var/lib/dpkg/status"), "").unwrap();
    let dpkg = |args: &[&str]| {
        let root_arg = format!("--root={}", root.display());
        // The throwaway database knows no libc6: dependencies were checked above.
        run_bounded(
            Command::new("dpkg")
                .args([root_arg.as_str(), "--log=/dev/null", "--force-depends"])
                .args(args),
            Duration::from_secs(60),
            "dpkg",
        )
    };
    let inst = dpkg(&["-i", deb.to_str().unwrap()]);
    assert!(inst.status.success(), "{}", show(&inst));
    let files = [
        "usr/bin/netmeter",
        "usr/share/man/man1/netmeter.1.gz",
        "usr/share/man/man1/netmeter-csv.1.gz",
        "usr/share/man/man1/netmeter-compare.1.gz",
        "usr/share/man/man1/netmeter-sweep.1.gz",
        "usr/share/man/man1/netmeter-doctor.1.gz",
        "usr/share/man/man1/netmeter-mesh.1.gz",
        "usr/share/man/man1/netmeter-plot.1.gz",
        "usr/share/man/man1/netmeter-report.1.gz",
        "usr/share/man/man1/netmeter-generate.1.gz",
        "usr/share/bash-completion/completions/netmeter",
        "usr/share/zsh/vendor-completions/_netmeter",
        "usr/share/fish/vendor_completions.d/netmeter.fish",
        "usr/share/doc/netmeter/copyright",
    ];
    for f in files {
        assert!(root.join(f).is_file(), "{f} not installed");
    }
    let installed = root.join("usr/bin/netmeter");
    let v = run(
        Command::new(&installed).arg("--version"),
        Duration::from_secs(10),
    );
    assert!(
        String::from_utf8_lossy(&v.stdout).starts_with(&format!("netmeter {version} ")),
        "{}",
        show(&v)
    );
    let lo = run_bounded(
        Command::new(&installed).args(["--loopback", "-t", "1"]),
        Duration::from_secs(60),
        "installed netmeter --loopback",
    );
    let text = String::from_utf8_lossy(&lo.stdout);
    assert!(
        lo.status.success() && text.matches("receiver").count() >= 2,
        "{}",
        show(&lo)
    );
    assert_man_renders(
        &root.join("usr/share/man/man1/netmeter.1.gz"),
        &["--bitrate", "netmeter-csv(1)"],
    );
    assert_man_renders(
        &root.join("usr/share/man/man1/netmeter-csv.1.gz"),
        &["--fields"],
    );
    assert_man_renders(
        &root.join("usr/share/man/man1/netmeter-mesh.1.gz"),
        &["--psk-file", "EXIT STATUS"],
    );
    assert_eq!(
        bash_completes(&root.join("usr/share/bash-completion/completions/netmeter")),
        ["--bitrate", "--fields"]
    );
    let zsh =
        std::fs::read_to_string(root.join("usr/share/zsh/vendor-completions/_netmeter")).unwrap();
    assert!(zsh.starts_with("#compdef netmeter"), "{}", &zsh[..40]);
    let fish =
        std::fs::read_to_string(root.join("usr/share/fish/vendor_completions.d/netmeter.fish"))
            .unwrap();
    assert!(fish.contains("complete -c netmeter"));

    let rm = dpkg(&["-r", "netmeter"]);
    assert!(rm.status.success(), "{}", show(&rm));
    for f in files {
        assert!(!root.join(f).exists(), "{f} left after dpkg -r");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
