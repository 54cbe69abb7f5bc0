"""The tools under test: the netmeter build, the peers of scripts/setup-peers.sh, their versions and features."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .common import log, REPO


@dataclass
class Tool:
    key: str  # "iperf3-3.12", "iperf2-2.2.1", "netmeter", "netperf"
    label: str  # as shown in tables
    kind: str  # iperf3 | iperf2 | netmeter | netperf
    path: str
    server_path: str = ""  # netserver for netperf
    version: str = ""
    features: set = field(default_factory=set)


def read_peers_env(smoke: bool) -> dict:
    env_path = Path(
        os.environ.get("NETMETER_PEERS_ENV")
        or Path(os.environ.get("NETMETER_PEERS_DIR", "/opt/netmeter-peers")) / "peers.env"
    )
    if not env_path.exists():
        log(f"{env_path} missing: running scripts/setup-peers.sh")
        r = subprocess.run([str(REPO / "scripts" / "setup-peers.sh")], cwd=REPO)
        if r.returncode != 0 or not env_path.exists():
            log("scripts/setup-peers.sh failed; cannot run the peers")
            sys.exit(2)
    peers = {}
    for line in env_path.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, v = line.split("=", 1)
            peers[k.strip()] = v.strip()
    peers["_file"] = str(env_path)
    return peers


def first_line(argv: list[str]) -> str:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        out = (r.stdout + r.stderr).strip().splitlines()
        return out[0].strip() if out else ""
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unavailable ({e})"


def build_netmeter(no_build: bool) -> tuple[str, dict]:
    """Build in release mode; return the path of a private copy of the binary."""
    exe = None
    if not no_build:
        log("cargo build --release --locked")
        r = subprocess.run(
            ["cargo", "build", "--release", "--locked", "--message-format=json-render-diagnostics"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        if r.returncode != 0:
            log("cargo build --release --locked failed")
            sys.exit(2)
        for line in r.stdout.splitlines():
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            if (
                msg.get("reason") == "compiler-artifact"
                and msg.get("target", {}).get("name") == "netmeter"
                and msg.get("executable")
            ):
                exe = msg["executable"]
    if exe is None:
        target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
        if not target.is_absolute():
            target = REPO / target
        exe = str(target / "release" / "netmeter")
    if not os.access(exe, os.X_OK):
        log(f"no netmeter binary at {exe}")
        sys.exit(2)
    # Other people rebuild target/release/netmeter concurrently: benchmark a frozen copy.
    dest_dir = REPO / "target" / "bench-bin"
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / f"netmeter-{os.getpid()}"
    shutil.copy2(exe, dest)
    sha = hashlib.sha256(dest.read_bytes()).hexdigest()
    info = {"built_from": exe, "copy": str(dest), "sha256": sha}
    try:
        info["git_head"] = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src", "Cargo.toml", "Cargo.lock"],
            cwd=REPO,
            capture_output=True,
            text=True,
        ).stdout.strip()
        info["uncommitted_src_changes"] = bool(dirty)
    except OSError:
        pass
    return str(dest), info


def netmeter_tool(key: str, label: str, path: str) -> Tool:
    nm = Tool(key, label, "netmeter", path)
    nm.version = first_line([path, "--version"])
    helptext = subprocess.run([path, "--help"], capture_output=True, text=True).stdout
    for flag in ("--bounceback", "--bounceback-request", "--connect-only", "--skip-rx-copy", "--zerocopy",
                 "--busy-poll"):
        if flag in helptext:
            nm.features.add(flag)
    return nm


def discover_tools(nm_path: str, peers: dict, baseline: str | None = None) -> dict[str, Tool]:
    tools: dict[str, Tool] = {"netmeter": netmeter_tool("netmeter", "netmeter", nm_path)}
    if baseline:
        if not os.access(baseline, os.X_OK):
            log(f"--baseline {baseline}: not an executable file")
            sys.exit(2)
        # A frozen copy, like the build under test.
        dest = Path(nm_path).with_name(Path(nm_path).name + "-base")
        shutil.copy2(baseline, dest)
        tools["netmeter-base"] = netmeter_tool("netmeter-base", "base", str(dest))
    for key, label, kind, var in [
        ("iperf3-3.12", "iperf3 3.12", "iperf3", "NETMETER_IPERF3_312"),
        ("iperf3-3.18", "iperf3 3.18", "iperf3", "NETMETER_IPERF3_318"),
        ("iperf3-3.22", "iperf3 3.22", "iperf3", "NETMETER_IPERF3_322"),
        ("iperf2-2.1.8", "iperf 2.1.8", "iperf2", "NETMETER_IPERF2_218"),
        ("iperf2-2.2.1", "iperf 2.2.1", "iperf2", "NETMETER_IPERF2_221"),
    ]:
        p = peers.get(var, "")
        if p and os.access(p, os.X_OK):
            t = Tool(key, label, kind, p)
            t.version = first_line([p, "-v"])
            if kind == "iperf3":
                # Best-option flags of the newer iperf3 (--skip-rx-copy 3.19, --gsro 3.21).
                h = subprocess.run([p, "--help"], capture_output=True, text=True)
                for flag in ("--skip-rx-copy", "--gsro"):
                    if flag in h.stdout + h.stderr:
                        t.features.add(flag)
            if kind == "iperf2":
                h = subprocess.run([p, "--help"], capture_output=True, text=True)
                if "--skip-rx-copy" in h.stdout + h.stderr:
                    t.features.add("--skip-rx-copy")
            tools[key] = t
    np_, ns = peers.get("NETMETER_NETPERF", ""), peers.get("NETMETER_NETSERVER", "")
    if np_ and ns and os.access(np_, os.X_OK) and os.access(ns, os.X_OK):
        t = Tool("netperf", "netperf 2.7", "netperf", np_, server_path=ns)
        t.version = first_line([np_, "-V"])
        tools["netperf"] = t
    return tools
