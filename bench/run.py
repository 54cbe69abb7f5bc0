#!/usr/bin/env python3
"""netmeter benchmark harness: netmeter against iperf3, iperf 2 and netperf on 127.0.0.1.

Usage (from anywhere; needs root only if scripts/setup-peers.sh has to run):

    python3 bench/run.py [--runs 5] [--seconds 1] [--cases tcp1,udp1448,...] [--smoke]

What one command does:
  1. `cargo build --release --locked`, then copies target/release/netmeter to
     target/bench-bin/ so that a concurrent rebuild cannot swap the binary mid-run;
  2. runs scripts/setup-peers.sh if /opt/netmeter-peers/peers.env (or
     $NETMETER_PEERS_ENV) is missing, and reads the peer paths from it;
  3. waits (up to --wait-load seconds, default 300) until the machine is quiet;
  4. runs every case for every tool, --runs times, alternating the tools within each
     repetition (the tool order is rotated by one per repetition). Each run starts a fresh
     server bound to 127.0.0.1 on a free port, then the client, both wrapped in
     `timeout -k 2 LIMIT /usr/bin/time -f %M`, and stops the server by its PID: wait4()
     gives the exact CPU time (user+system) of client and server, GNU time their peak RSS;
  5. writes bench/results.json (every run, raw) and docs/benchmarks.md (machine, date,
     exact commands, a table per case with median, min-max, CPU per Gbit and peak RSS,
     ratios netmeter / peer and the goals, marked met / not met).

Cases: tcp1 tcp2 tcpR tcpbest udp1448 udp64 rr crr mem (see docs/benchmarks.md).

Options:
  --runs N         repetitions per case and tool (default 5)
  --seconds S      length of each test in whole seconds (default 1; iperf3 and netperf
                   take whole seconds). The default run takes about 6.5 minutes on a 2-vCPU
                   VM (265 runs; most of it is test time), plus up to --retry-budget for
                   repeating noisy runs and --wait-load for a busy host to calm down;
                   --seconds 3 takes about 15 minutes.
  --cases a,b      run only these cases
  --smoke          CI mode: 1 run of 1 second of tcp1 (netmeter vs iperf3 3.12) and
                   udp1448 (netmeter vs iperf3 3.12), ~10 s; writes only
                   target/bench-smoke.json; exit status 1 if a tool failed to run
  --no-build       use the existing target/release/netmeter (no cargo build)
  --wait-load SEC  wait up to SEC seconds for the host to be idle before starting
                   (default 300, 0 with --smoke)
  --max-other-load F  repeat a run (at most twice) when other processes used more than
                   this share of the CPUs during it (default 0.15) ...
  --retry-budget SEC  ... within SEC seconds of repeats in all (default 60, 0 with --smoke)
  --json PATH      raw results (default bench/results.json)
  --doc PATH       report (default docs/benchmarks.md)

Exit status: 0 when every run succeeded, 1 when a run failed (its error is in the JSON and
the report), 2 on a setup error (build failed, peers missing).

Python 3.11 standard library only. Linux only (/proc, wait4, taskset, timeout, GNU time).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1
PAUSE_BETWEEN_RUNS = 0.05  # seconds, lets TIME_WAIT sockets and softirq backlog settle
ALL_CASES = ["tcp1", "tcp2", "tcpR", "tcpbest", "udp1448", "udp64", "rr", "crr", "mem"]

CASE_TITLES = {
    "tcp1": "TCP, 1 stream, default options",
    "tcp2": "TCP, 2 parallel streams (-P 2)",
    "tcpR": "TCP, reverse (-R: the server sends)",
    "tcpbest": "TCP, 1 stream, each tool's best zero-copy options",
    "udp1448": "UDP, 1448-byte datagrams, unlimited rate",
    "udp64": "UDP, 64-byte datagrams, unlimited rate",
    "rr": "TCP request/response rate (1-byte where the tool allows it)",
    "crr": "TCP connection rate (connect, 1-byte request/response, close)",
    "mem": "netmeter server memory: idle, and after a -P 128 test",
}


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------
# Tools
# --------------------------------------------------------------------------------------


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


def discover_tools(nm_path: str, peers: dict) -> dict[str, Tool]:
    tools: dict[str, Tool] = {}
    nm = Tool("netmeter", "netmeter", "netmeter", nm_path)
    nm.version = first_line([nm_path, "--version"])
    helptext = subprocess.run([nm_path, "--help"], capture_output=True, text=True).stdout
    for flag in ("--bounceback", "--bounceback-request", "--connect-only", "--skip-rx-copy", "--zerocopy",
                 "--busy-poll"):
        if flag in helptext:
            nm.features.add(flag)
    tools["netmeter"] = nm
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


# --------------------------------------------------------------------------------------
# Process handling: spawn, reap with rusage, /proc helpers
# --------------------------------------------------------------------------------------


@dataclass
class Proc:
    pid: int
    argv: list[str]
    out: Path
    err: Path
    status: int | None = None
    cpu_user: float = 0.0
    cpu_sys: float = 0.0
    maxrss_kib: int = 0  # of the tool itself, from GNU time's %M (see wrap())
    rss_file: Path | None = None
    killed: bool = False

    @property
    def cpu(self) -> float:
        return self.cpu_user + self.cpu_sys

    def exit_code(self) -> int | None:
        if self.status is None:
            return None
        return os.waitstatus_to_exitcode(self.status)


def spawn(argv: list[str], out: Path, err: Path, env: dict | None = None, rss_file: Path | None = None) -> Proc:
    fa = [
        (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, str(out), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
        (os.POSIX_SPAWN_OPEN, 2, str(err), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
    ]
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    pid = os.posix_spawnp(argv[0], argv, full_env, file_actions=fa)
    return Proc(pid, argv, out, err, rss_file=rss_file)


def reap(p: Proc, deadline: float | None) -> bool:
    """Wait for p until the monotonic deadline (None: forever). True if it exited."""
    while p.status is None:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid == p.pid:
            p.status = status
            # CPU: exact, from wait4() on `timeout`, which includes its reaped descendants (GNU
            # time and the tool; the two wrappers add about a millisecond).
            p.cpu_user, p.cpu_sys = ru.ru_utime, ru.ru_stime
            # Peak RSS: NOT ru_maxrss here. A child spawned from this Python process inherits
            # Python's high-water mark across execve, so `timeout`'s ru_maxrss is this harness's
            # RSS. GNU time forks the tool from a 1 MB process and reports its %M exactly.
            p.maxrss_kib = read_time_rss(p.rss_file)
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


def read_time_rss(path: Path | None) -> int:
    if not path:
        return 0
    try:
        lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
        return int(lines[-1].split()[0]) if lines else 0
    except (OSError, ValueError, IndexError):
        return 0


def tool_pid(p: Proc) -> int:
    """PID of the tool itself: timeout -> GNU time -> tool (taskset execs the tool)."""
    c = child_pid(p.pid)
    g = child_pid(c) if c else None
    return g or c or p.pid


def stop(p: Proc, sigs: list[tuple[int, float]]) -> None:
    """Send each (signal, grace seconds) in turn to the tool's own PID until `timeout` is reaped.

    Signal 0 means: just wait. Signals go to the tool itself, never to `timeout` or GNU time
    (SIGTERM would end GNU time without its report; SIGKILL to `timeout` would orphan the
    tool). SIGKILL to the tool comes last; `timeout` and GNU time then exit by themselves."""
    target = tool_pid(p)
    for sig, grace in sigs + [(signal.SIGKILL, 5.0)]:
        if p.status is not None:
            return
        if sig:
            try:
                os.kill(target, sig)
            except ProcessLookupError:
                pass
            p.killed = True
        reap(p, time.monotonic() + grace)
    if p.status is None:  # the tool is gone but the wrappers are not: should not happen
        for pid in (child_pid(p.pid), p.pid):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        reap(p, None)


def child_pid(pid: int) -> int | None:
    """The first child of pid (the tool started by `timeout`)."""
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return int(kids[0]) if kids else None
    except OSError:
        return None


def proc_status_kib(pid: int, key: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def listening(port: int, udp: bool) -> bool:
    hexport = f":{port:04X}"
    files = ["/proc/net/udp", "/proc/net/udp6"] if udp else ["/proc/net/tcp", "/proc/net/tcp6"]
    for f in files:
        try:
            lines = Path(f).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) > 3 and parts[1].endswith(hexport) and (udp or parts[3] == "0A"):
                return True
    return False


def free_port() -> int:
    """A port free for both TCP and UDP on 127.0.0.1."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                    u.bind((HOST, port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port")


def ksoftirqd_pids() -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "comm").read_text().startswith("ksoftirqd/"):
                    pids.append(int(d.name))
            except OSError:
                pass
    return pids


KSOFTIRQD = ksoftirqd_pids()


def ksoftirqd_cpu() -> float:
    """CPU seconds of the ksoftirqd threads: softirq work (loopback receive) deferred to them."""
    total = 0
    for pid in KSOFTIRQD:
        try:
            f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(f[11]) + int(f[12])  # utime, stime (fields 14 and 15)
        except (OSError, IndexError, ValueError):
            pass
    return total / CLK_TCK


def cpu_times() -> dict:
    """System-wide CPU times in seconds from /proc/stat."""
    f = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    v = [int(x) / CLK_TCK for x in f]
    user, nice, system, idle, iowait, irq, softirq, steal = (v + [0] * 8)[:8]
    return {
        "busy": user + nice + system + irq + softirq,
        "irq": irq + softirq,
        "steal": steal,
        "idle": idle + iowait,
    }


def lo_counters() -> tuple[int, int]:
    """Bytes and packets the loopback interface carried so far (a cross-check of tool figures)."""
    try:
        d = Path("/sys/class/net/lo/statistics")
        return int((d / "tx_bytes").read_text()), int((d / "tx_packets").read_text())
    except (OSError, ValueError):
        return 0, 0


def udp_snmp() -> dict:
    """Host-wide UDP counters from /proc/net/snmp (InDatagrams, RcvbufErrors, ...)."""
    try:
        lines = [ln.split() for ln in Path("/proc/net/snmp").read_text().splitlines() if ln.startswith("Udp:")]
        return {k: int(v) for k, v in zip(lines[0][1:], lines[1][1:])}
    except (OSError, ValueError, IndexError):
        return {}


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def host_busy_fraction(sample: float = 2.0) -> float:
    a = cpu_times()
    time.sleep(sample)
    b = cpu_times()
    return (b["busy"] - a["busy"]) / (sample * NCPU)


# --------------------------------------------------------------------------------------
# Output parsers. Each returns a dict of metrics or raises ValueError.
# --------------------------------------------------------------------------------------


def parse_iperf3_json(text: str) -> dict:
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"no JSON in output ({e})") from None
    if d.get("error"):
        raise ValueError(f"tool error: {d['error']}")
    e = d.get("end", {})
    sr, ss = e.get("sum_received"), e.get("sum_sent")
    if not sr or not ss or not sr.get("seconds"):
        raise ValueError("JSON has no end.sum_received/sum_sent")
    m = {
        "rx_bytes": sr["bytes"],
        "rx_bps": sr["bytes"] * 8 / sr["seconds"],
        "tx_bytes": ss["bytes"],
        "tx_bps": ss["bytes"] * 8 / ss["seconds"],
        "seconds": sr["seconds"],
    }
    if "retransmits" in ss:
        m["retransmits"] = ss["retransmits"]
    nm = d.get("start", {}).get("netmeter")
    if nm:
        m["data_path"] = nm.get("data_path")
        warnings = list(nm.get("warnings", [])) + list(e.get("netmeter", {}).get("warnings", []))
        if warnings:
            m["netmeter_warnings"] = warnings
    return m


def iperf2_csv_rows(text: str) -> list[dict]:
    """iperf 2 -y C lines, classic (2.1.8, 2.2.1) or enhanced (header lines) format."""
    rows, header = [], None
    for line in text.splitlines():
        f = line.strip().split(",")
        if len(f) < 9:
            continue
        if f[0] == "time":
            header = f
            continue
        if header and len(f) == len(header) and f[0].startswith("+"):
            r = dict(zip(header, f))
            rows.append({"id": int(r["transferid"]), "bytes": int(r["bytes"]), "bps": float(r["speed"])})
            continue
        if "-" in f[6]:  # classic: ts,src,sport,dst,dport,id,start-end,bytes,bps[,udp fields]
            r = {"id": int(f[5]), "bytes": int(f[7]), "bps": float(f[8])}
            if len(f) >= 13:
                r.update(jitter=f[9], lost=int(f[10]), total=int(f[11]))
            rows.append(r)
    return rows


def iperf2_sum(rows: list[dict], first: bool) -> tuple[int, float]:
    """Sum bytes and bits/s over the per-stream lines (id > 0), one line per id."""
    per_id: dict[int, dict] = {}
    for r in rows:
        if r["id"] > 0 and (not first or r["id"] not in per_id):
            per_id[r["id"]] = r
    if not per_id:
        raise ValueError("no iperf 2 report line")
    return sum(r["bytes"] for r in per_id.values()), sum(r["bps"] for r in per_id.values())


def parse_iperf2(client_out: str, server_out: str, reverse: bool) -> dict:
    c, s = iperf2_csv_rows(client_out), iperf2_csv_rows(server_out)
    rx_rows, tx_rows = (c, s) if reverse else (s, c)
    rx_bytes, rx_bps = iperf2_sum(rx_rows, first=False)
    tx_bytes, tx_bps = iperf2_sum(tx_rows, first=True)
    return {"rx_bytes": rx_bytes, "rx_bps": rx_bps, "tx_bytes": tx_bytes, "tx_bps": tx_bps}


def parse_iperf2_bounceback(text: str) -> dict:
    m = re.search(r"RPS=([\d.]+)", text) or re.search(r"([\d.]+) rps", text)
    if not m or float(m.group(1)) <= 0:
        raise ValueError("no bounceback rate in output")
    out = {"trans_per_s": float(m.group(1))}
    lat = re.search(r"(\d+)=([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms", text)
    if lat:
        out["mean_latency_us"] = float(lat.group(2)) * 1000
    return out


def netperf_omni(text: str, names: list[str]) -> dict:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        raise ValueError("no netperf output")
    vals = lines[-1].split(",")
    if len(vals) != len(names):
        raise ValueError(f"unexpected netperf output: {lines[-1]!r}")
    return {n: float(v) for n, v in zip(names, vals)}


NP_STREAM = ["THROUGHPUT", "ELAPSED_TIME", "LOCAL_BYTES_SENT", "REMOTE_BYTES_RECVD"]
NP_MAERTS = ["THROUGHPUT", "ELAPSED_TIME", "REMOTE_BYTES_SENT", "LOCAL_BYTES_RECVD"]
NP_UDP = ["ELAPSED_TIME", "LOCAL_BYTES_SENT", "REMOTE_BYTES_RECVD", "LOCAL_SEND_THROUGHPUT", "REMOTE_RECV_THROUGHPUT"]
NP_RR = ["THROUGHPUT", "ELAPSED_TIME", "MEAN_LATENCY", "P50_LATENCY", "P99_LATENCY"]


def parse_netperf(test: str, text: str) -> dict:
    if test == "TCP_SENDFILE":  # no omni output: classic table, last line
        nums = [ln.split() for ln in text.splitlines() if re.match(r"^\s*\d", ln)]
        if not nums or len(nums[-1]) < 5:
            raise ValueError("no netperf TCP_SENDFILE result line")
        elapsed, mbps = float(nums[-1][3]), float(nums[-1][4])
        b = mbps * 1e6 * elapsed / 8
        return {"rx_bps": mbps * 1e6, "tx_bps": mbps * 1e6, "rx_bytes": b, "tx_bytes": b, "seconds": elapsed}
    if test == "TCP_STREAM":
        v = netperf_omni(text, NP_STREAM)
        return {"rx_bps": v["THROUGHPUT"] * 1e6, "rx_bytes": v["REMOTE_BYTES_RECVD"],
                "tx_bytes": v["LOCAL_BYTES_SENT"],
                "tx_bps": v["LOCAL_BYTES_SENT"] * 8 / v["ELAPSED_TIME"], "seconds": v["ELAPSED_TIME"]}
    if test == "TCP_MAERTS":
        v = netperf_omni(text, NP_MAERTS)
        return {"rx_bps": v["THROUGHPUT"] * 1e6, "rx_bytes": v["LOCAL_BYTES_RECVD"],
                "tx_bytes": v["REMOTE_BYTES_SENT"],
                "tx_bps": v["REMOTE_BYTES_SENT"] * 8 / v["ELAPSED_TIME"], "seconds": v["ELAPSED_TIME"]}
    if test == "UDP_STREAM":
        v = netperf_omni(text, NP_UDP)
        return {"rx_bps": v["REMOTE_RECV_THROUGHPUT"] * 1e6, "tx_bps": v["LOCAL_SEND_THROUGHPUT"] * 1e6,
                "rx_bytes": v["REMOTE_BYTES_RECVD"], "tx_bytes": v["LOCAL_BYTES_SENT"],
                "seconds": v["ELAPSED_TIME"]}
    v = netperf_omni(text, NP_RR)
    return {"trans_per_s": v["THROUGHPUT"], "seconds": v["ELAPSED_TIME"],
            "mean_latency_us": v["MEAN_LATENCY"], "p50_latency_us": v["P50_LATENCY"],
            "p99_latency_us": v["P99_LATENCY"]}


def find_key(d, names: tuple[str, ...]):
    if isinstance(d, dict):
        for k, v in d.items():
            if k in names and isinstance(v, (int, float)):
                return v
            r = find_key(v, names)
            if r is not None:
                return r
    return None


def parse_netmeter_rate(text: str, what: str) -> dict:
    d = json.loads(text)
    if d.get("error"):
        raise ValueError(f"tool error: {d['error']}")
    nm = d.get("end", {}).get("netmeter", {})
    if what == "bounceback":
        bb = nm.get("bounceback", {})
        v = bb.get("transactions_per_second")
        if v and bb.get("rtt", {}).get("mean_ms") is not None:
            return {"trans_per_s": float(v), "mean_latency_us": bb["rtt"]["mean_ms"] * 1000,
                    "p50_latency_us": bb["rtt"].get("p50_ms", 0) * 1000,
                    "p99_latency_us": bb["rtt"].get("p99_ms", 0) * 1000, "seconds": bb.get("seconds")}
    else:
        co = nm.get("connect_only") or {}
        v = co.get("connections_per_second") or find_key(nm, ("connections_per_second",))
        if v:
            out = {"trans_per_s": float(v), "seconds": co.get("seconds"), "failed": co.get("failed")}
            tr = co.get("transaction") or {}
            if tr.get("mean_ms") is not None:
                out["mean_latency_us"] = tr["mean_ms"] * 1000
            if tr.get("p99_ms") is not None:
                out["p99_latency_us"] = tr["p99_ms"] * 1000
            return out
    if not v:
        raise ValueError(f"no {what} rate in end.netmeter")
    return {"trans_per_s": float(v)}


# --------------------------------------------------------------------------------------
# Rows: one tool with one set of options in one case
# --------------------------------------------------------------------------------------


def wrap(argv: list[str], cpu: int | None, limit: int, rss_file: Path | None) -> list[str]:
    """timeout -k 2 LIMIT /usr/bin/time -q -o RSS_FILE -f %M [taskset -c CPU] argv..."""
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    tm = ["/usr/bin/time", "-q", "-o", str(rss_file), "-f", "%M"] if rss_file else []
    return ["timeout", "-k", "2", str(limit)] + tm + pin + argv


@dataclass
class Row:
    case: str
    tool: Tool
    label: str  # display label, e.g. "iperf3 3.18 -Z"
    client_args: list[str]
    server_args: list[str] = field(default_factory=list)
    env: dict = field(default_factory=dict)
    udp_server: bool = False  # readiness check on UDP (iperf 2 UDP server)
    udp_len: int | None = None
    reverse: bool = False
    netperf_test: str = ""
    mode: str = "stream"  # stream | rr (iperf2 bounceback) | nm_bounceback | nm_connect
    placement: tuple[int, int] | None = None  # (client cpu, server cpu)
    note: str = ""

    @property
    def key(self) -> str:
        p = f" @{self.placement[0]}/{self.placement[1]}" if self.placement else ""
        return f"{self.label}{p}"

    @property
    def is_netmeter(self) -> bool:
        return self.tool.kind == "netmeter"

    def placement_text(self) -> str:
        if not self.placement:
            return "unpinned"
        c, s = self.placement
        return f"same core (client cpu{c}, server cpu{s})" if c == s else f"different cores (client cpu{c}, server cpu{s})"

    def server_argv(self, port: int) -> list[str]:
        t = self.tool
        if t.kind in ("iperf3", "netmeter"):
            return [t.path, "-s", "-1", "-B", HOST, "-p", str(port)] + self.server_args
        if t.kind == "iperf2":
            fmt = ["-e"] if self.mode == "rr" else ["-y", "C"]
            return [t.path, "-s", "-B", HOST, "-p", str(port)] + fmt + self.server_args
        # -f: no child process per test, so wait4() on netserver covers the test's CPU and memory.
        return [t.server_path, "-D", "-f", "-4", "-L", HOST, "-p", str(port)]

    def client_argv(self, port: int, seconds: int) -> list[str]:
        t = self.tool
        if t.kind in ("iperf3", "netmeter"):
            return [t.path, "-c", HOST, "-p", str(port), "-t", str(seconds), "-J"] + self.client_args
        if t.kind == "iperf2":
            fmt = ["-e"] if self.mode == "rr" else ["-y", "C"]
            return [t.path, "-c", HOST, "-p", str(port), "-t", str(seconds)] + fmt + self.client_args
        argv = [t.path, "-H", HOST, "-p", str(port), "-t", self.netperf_test, "-l", str(seconds), "-P", "0", "--"]
        argv += self.client_args
        sel = {"TCP_STREAM": NP_STREAM, "TCP_MAERTS": NP_MAERTS, "UDP_STREAM": NP_UDP,
               "TCP_RR": NP_RR, "TCP_CRR": NP_RR, "UDP_RR": NP_RR}.get(self.netperf_test)
        if sel:
            argv += ["-o", ",".join(sel)]
        return argv

    def wrap(self, argv: list[str], cpu: int | None, limit: int, rss_file: Path | None = None) -> list[str]:
        return wrap(argv, cpu, limit, rss_file)

    def stop_signals(self) -> list[tuple[int, float]]:
        if self.tool.kind in ("iperf3", "netmeter"):  # -1: exits by itself after the test
            return [(0, 3.0), (signal.SIGTERM, 3.0)]
        if self.tool.kind == "iperf2":
            # iperf 2 servers take ~1 s to exit after SIGINT (the first one waits for threads, a
            # second forces). Its report is written when the test ends; run_once waits for it,
            # so a quick stop (SIGKILL after 0.3 s) loses nothing and GNU time still reports.
            return [(signal.SIGINT, 0.05)]
        return [(signal.SIGTERM, 3.0)]

    def expected_server_lines(self) -> int:
        """iperf 2 (CSV) report lines the server writes at the end of the test."""
        if self.tool.kind != "iperf2" or self.mode == "rr":
            return 0
        if "-P" in self.client_args:
            return int(self.client_args[self.client_args.index("-P") + 1])
        return 1

    def parse(self, cout: str, sout: str) -> dict:
        k = self.tool.kind
        if self.mode == "nm_bounceback":
            return parse_netmeter_rate(cout, "bounceback")
        if self.mode == "nm_connect":
            return parse_netmeter_rate(cout, "connect")
        if k in ("iperf3", "netmeter"):
            return parse_iperf3_json(cout)
        if k == "iperf2":
            if self.mode == "rr":
                return parse_iperf2_bounceback(cout)
            return parse_iperf2(cout, sout, self.reverse)
        return parse_netperf(self.netperf_test, cout)

    def commands_text(self, seconds: int) -> tuple[str, str]:
        """Server and client command lines for the report ($PORT = a free port)."""
        def show(argv: list[str], cpu: int | None, limit: int) -> str:
            # The harness also wraps each in `timeout -k 2 LIMIT /usr/bin/time -q -o FILE -f %M`.
            a = (["taskset", "-c", str(cpu)] if cpu is not None else []) + argv
            a = ["target/release/netmeter" if x == self.tool.path and self.is_netmeter else x for x in a]
            a = ["$PORT" if x == "65535" else x for x in a]
            envs = " ".join(f"{k}={v}" for k, v in self.env.items())
            return (envs + " " if envs else "") + " ".join(a)
        c, s = self.placement if self.placement else (None, None)
        return (show(self.server_argv(65535), s, seconds + 30),
                show(self.client_argv(65535, seconds), c, seconds + 8))


def make_rows(case: str, tools: dict[str, Tool], smoke: bool) -> tuple[list[Row], list[str]]:
    """Rows for one case, and notes about tools skipped."""
    rows: list[Row] = []
    skipped: list[str] = []
    T = tools
    # Oldest to newest: the last one is "the newest iperf3" where one is picked.
    i3 = [T[k] for k in ("iperf3-3.12", "iperf3-3.18", "iperf3-3.22") if k in T]
    i2 = [T[k] for k in ("iperf2-2.1.8", "iperf2-2.2.1") if k in T]
    nm = T["netmeter"]
    npf = T.get("netperf")
    for k, lab in [("iperf3-3.12", "iperf3 3.12"), ("iperf3-3.18", "iperf3 3.18"), ("iperf3-3.22", "iperf3 3.22"),
                   ("iperf2-2.1.8", "iperf 2.1.8"), ("iperf2-2.2.1", "iperf 2.2.1"), ("netperf", "netperf")]:
        if k not in T and case != "mem":
            skipped.append(f"{lab}: not installed (empty or missing in peers.env)")

    if smoke:
        if case == "tcp1":
            rows = [Row(case, nm, "netmeter", [])]
            if "iperf3-3.12" in T:
                rows.insert(0, Row(case, T["iperf3-3.12"], "iperf3 3.12", []))
        elif case == "udp1448":
            rows = [Row(case, nm, "netmeter", ["-u", "-b", "0", "-l", "1448"], udp_len=1448)]
            if "iperf3-3.12" in T:
                rows.insert(0, Row(case, T["iperf3-3.12"], "iperf3 3.12", ["-u", "-b", "0", "-l", "1448"], udp_len=1448))
        return rows, []

    if case in ("tcp1", "tcp2", "tcpR"):
        extra = {"tcp1": [], "tcp2": ["-P", "2"], "tcpR": ["-R"]}[case]
        for t in i3:
            rows.append(Row(case, t, t.label, list(extra), reverse=case == "tcpR"))
        for t in i2:
            rows.append(Row(case, t, t.label, list(extra), reverse=case == "tcpR"))
        rows.append(Row(case, nm, "netmeter", list(extra), reverse=case == "tcpR"))
        if case == "tcp1":
            # Where the default-flags difference comes from: the write size. Each tool with
            # the other's default block, so the table shows parity at equal settings.
            rows.append(Row(case, nm, "netmeter -l 128K", ["-l", "128K"],
                            note="iperf3's default 128 KiB writes instead of netmeter's 1 MiB"))
            if i3:
                t = i3[-1]
                rows.append(Row(case, t, f"{t.label} -l 1M", ["-l", "1M"],
                                note="netmeter's default 1 MiB writes instead of iperf3's 128 KiB"))
        if npf:
            if case == "tcp1":
                rows.append(Row(case, npf, "netperf TCP_STREAM", [], netperf_test="TCP_STREAM"))
            elif case == "tcpR":
                rows.append(Row(case, npf, "netperf TCP_MAERTS", [], netperf_test="TCP_MAERTS", reverse=True,
                                note="TCP_MAERTS is netperf's reverse TCP_STREAM"))
            else:
                skipped.append("netperf: no parallel streams in one test (-P) -> skipped")
    elif case == "tcpbest":
        for t in i3:
            rows.append(Row(case, t, f"{t.label} -Z", ["-Z"], note="sendfile; iperf3 has no receive-side option"))
        for t in i2:
            if "--skip-rx-copy" in t.features:
                rows.append(Row(case, t, f"{t.label} (server --skip-rx-copy)", [], server_args=["--skip-rx-copy"],
                                note="iperf 2 has no zero-copy send; its server can skip the receive copy"))
            else:
                rows.append(Row(case, t, f"{t.label} (default)", [], note="iperf 2.1.8 has no zero-copy option"))
        variants = []
        if "--zerocopy" in nm.features:
            variants.append(["-Z"])
        if "--skip-rx-copy" in nm.features:
            variants.append(["--skip-rx-copy"])
        if len(variants) == 2:
            variants.append(["-Z", "--skip-rx-copy"])
        for v in variants:
            rows.append(Row(case, nm, "netmeter " + " ".join(v), v))
        if "--zerocopy" in nm.features:
            rows.append(Row(case, nm, "netmeter -Z NETMETER_ZEROCOPY=sendfile", ["-Z"],
                            env={"NETMETER_ZEROCOPY": "sendfile"},
                            note="netmeter -Z sends with MSG_ZEROCOPY where the socket allows it; this row "
                                 "forces sendfile, iperf3's -Z method"))
        if npf:
            rows.append(Row(case, npf, "netperf TCP_SENDFILE", [], netperf_test="TCP_SENDFILE"))
    elif case in ("udp1448", "udp64"):
        n = 1448 if case == "udp1448" else 64
        for t in i3:
            rows.append(Row(case, t, t.label, ["-u", "-b", "0", "-l", str(n)], udp_len=n))
        for t in i2:
            rows.append(Row(case, t, t.label, ["-u", "-b", "100G", "-l", str(n)], server_args=["-u"],
                            udp_server=True, udp_len=n, note="iperf 2: -b 0 is not 'unlimited', 100G is"))
        rows.append(Row(case, nm, "netmeter", ["-u", "-b", "0", "-l", str(n)], udp_len=n))
        rows.append(Row(case, nm, "netmeter --no-gso --no-gro",
                        ["-u", "-b", "0", "-l", str(n), "--no-gso", "--no-gro"], udp_len=n))
        if npf:
            rows.append(Row(case, npf, "netperf UDP_STREAM", ["-m", str(n)], netperf_test="UDP_STREAM", udp_len=n))
    elif case in ("rr", "crr"):
        placements = [(0, 0), (0, 1)] if NCPU >= 2 else [(0, 0)]
        for pl in placements:
            if npf:
                test = "TCP_RR" if case == "rr" else "TCP_CRR"
                note = ("1-byte request and reply, graceful close (the client's side keeps TIME_WAIT); the harness "
                        "sends netserver SIGALRM 0.5 s after the test so that it answers at once instead of "
                        "after its own test-length + 4 s timer") if case == "crr" else "1-byte request and reply"
                rows.append(Row(case, npf, f"netperf {test}", ["-r", "1,1"], netperf_test=test, placement=pl,
                                note=note))
            if case == "rr":
                for t in i2:
                    rows.append(Row(case, t, f"{t.label} --bounceback", ["--bounceback", "--bounceback-period", "0"],
                                    mode="rr", placement=pl,
                                    note="100-byte messages: iperf 2 bounceback fails below ~80 bytes (-l 1 hangs)"))
                if "--bounceback" in nm.features:
                    if "--bounceback-request" in nm.features:
                        rows.append(Row(case, nm, "netmeter --bounceback (1 B)",
                                        ["--bounceback", "--bounceback-request", "1"], mode="nm_bounceback",
                                        placement=pl, note="1-byte request and reply, like netperf -r 1,1"))
                    if "--busy-poll" in nm.features:
                        rows.append(Row(case, nm, "netmeter --bounceback --busy-poll 50 (1 B, polling)",
                                        ["--bounceback", "--bounceback-request", "1", "--busy-poll", "50"],
                                        mode="nm_bounceback", placement=pl,
                                        note="optional: both ends poll up to 50 µs before a blocking read"))
                    # UDP request/response, 8 bytes each way (netmeter's UDP requests carry an
                    # 8-byte sequence number, so that is its smallest).
                    if npf:
                        rows.append(Row(case, npf, "netperf UDP_RR (8 B)", ["-r", "8,8"], netperf_test="UDP_RR",
                                        placement=pl, note="8-byte request and reply over UDP"))
                    rows.append(Row(case, nm, "netmeter -u --bounceback (8 B)",
                                    ["-u", "--bounceback", "--bounceback-request", "8"], mode="nm_bounceback",
                                    placement=pl, note="8-byte UDP request and reply, like netperf UDP_RR -r 8,8"))
                    rows.append(Row(case, nm, "netmeter --bounceback (100 B default)", ["--bounceback"],
                                    mode="nm_bounceback", placement=pl,
                                    note="netmeter's default 100-byte messages, like iperf 2's bounceback"))
            elif "--connect-only" in nm.features:
                rows.append(Row(case, nm, "netmeter --connect-only", ["--connect-only"], mode="nm_connect",
                                placement=pl,
                                note="request = the 37-byte test cookie, reply 1 byte, close with RST "
                                     "(SO_LINGER 0, no TIME_WAIT); figures from end.netmeter.connect_only"))
        if case == "rr" and "--bounceback" not in nm.features:
            skipped.append("netmeter: `netmeter --help` lists no --bounceback -> no RR row")
        if case == "rr" and i2:
            skipped.append("iperf 2 --bounceback with -l 1 fails ('bounceback read failed') or hangs, "
                           "so it runs with its default 100-byte messages")
        if case == "crr":
            skipped.append("note: netperf TCP_CRR leaves every connection in TIME_WAIT on the client side; at "
                           "these rates the host's TIME_WAIT table (net.ipv4.tcp_max_tw_buckets) fills up, "
                           "and a run can fail to connect")
            if "--connect-only" not in nm.features:
                skipped.append("netmeter: `netmeter --help` lists no --connect-only -> no connection-rate row")
            skipped.append("iperf3 has no request/response or connection-rate test; iperf 2 --connect-only "
                           "measures connect time, not a rate -> not run")
    return rows, [s for s in skipped if s not in ("",)]


# --------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------


def run_once(row: Row, seconds: int, rep: int, tmp: Path) -> dict:
    port = free_port()
    ccpu, scpu = row.placement if row.placement else (None, None)
    tag = f"{row.case}-{re.sub(r'[^A-Za-z0-9]+', '_', row.key)}-{rep}"
    sargv = row.wrap(row.server_argv(port), scpu, seconds + 30, tmp / f"{tag}.server.rss")
    cargv = row.wrap(row.client_argv(port, seconds), ccpu, seconds + 8, tmp / f"{tag}.client.rss")
    rec = {
        "case": row.case, "row": row.key, "label": row.label, "tool": row.tool.key, "rep": rep,
        "placement": row.placement_text(), "env": row.env, "port": port,
        "server_cmd": sargv, "client_cmd": cargv, "seconds": seconds, "ok": False,
    }
    srv = spawn(sargv, tmp / f"{tag}.server.out", tmp / f"{tag}.server.err", row.env, tmp / f"{tag}.server.rss")
    t0 = time.monotonic()
    while not listening(port, row.udp_server):
        reap(srv, time.monotonic())
        if srv.status is not None or time.monotonic() - t0 > 5:
            stop(srv, [(signal.SIGTERM, 2.0)])
            rec["error"] = "server did not start: " + srv.err.read_text(errors="replace")[-300:]
            return rec
        time.sleep(0.01)
    if row.udp_server:
        time.sleep(0.05)  # the iperf 2 UDP listener thread binds before it is ready to read
    c0, w0, n0, u0, k0 = cpu_times(), time.monotonic(), lo_counters(), udp_snmp(), ksoftirqd_cpu()
    cli = spawn(cargv, tmp / f"{tag}.client.out", tmp / f"{tag}.client.err", row.env, tmp / f"{tag}.client.rss")
    finished = False
    if row.tool.kind == "netperf":
        # netserver only answers a TCP_CRR (and sometimes a UDP_STREAM) test when its own timer,
        # test length + 4 s, fires: it sits in accept()/recv() meanwhile and the client waits.
        # SIGALRM is that timer's signal; sending it 0.5 s after the test ended gives the same
        # result 4 s sooner (the figures are the client's: transactions / client elapsed time).
        finished = reap(cli, w0 + seconds + 0.5)
        if not finished:
            rec["netserver_sigalrm"] = True
            try:
                os.kill(tool_pid(srv), signal.SIGALRM)
            except ProcessLookupError:
                pass
    if not finished:
        finished = reap(cli, time.monotonic() + seconds + 12)
    if not finished:
        stop(cli, [(signal.SIGTERM, 2.0)])
    wall = time.monotonic() - w0
    c1, n1, u1, k1 = cpu_times(), lo_counters(), udp_snmp(), ksoftirqd_cpu()
    want = row.expected_server_lines()
    if want:  # wait (up to 3 s) for the iperf 2 server's end-of-test report
        t1 = time.monotonic()
        while time.monotonic() - t1 < 3:
            try:
                if len([r for r in iperf2_csv_rows(srv.out.read_text(errors="replace")) if r["id"] > 0]) >= want:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.01)
    stop(srv, row.stop_signals())
    rec["lo_bytes"] = n1[0] - n0[0]
    rec["lo_packets"] = n1[1] - n0[1]
    rec["udp_snmp_delta"] = {k: u1[k] - u0.get(k, 0) for k in u1}
    rec.update(
        wall_s=round(wall, 4),
        client_exit=cli.exit_code(), server_exit=srv.exit_code(),
        client_cpu_s=round(cli.cpu, 4), client_user_s=round(cli.cpu_user, 4), client_sys_s=round(cli.cpu_sys, 4),
        server_cpu_s=round(srv.cpu, 4), server_user_s=round(srv.cpu_user, 4), server_sys_s=round(srv.cpu_sys, 4),
        client_maxrss_kib=cli.maxrss_kib, server_maxrss_kib=srv.maxrss_kib,
        host_busy_s=round(c1["busy"] - c0["busy"], 3), host_irq_s=round(c1["irq"] - c0["irq"], 3),
        host_steal_s=round(c1["steal"] - c0["steal"], 3), ksoftirqd_s=round(k1 - k0, 3),
    )
    # CPU used during the run by everything else on the host (other people's builds...).
    # Loopback softirq work is counted as irq time, or as ksoftirqd's time when the kernel
    # defers it to those threads, not in the two processes: leave both out.
    rec["other_busy_frac"] = round(max(
        0.0, rec["host_busy_s"] - rec["host_irq_s"] - rec["ksoftirqd_s"] - cli.cpu - srv.cpu) / (wall * NCPU), 3)
    cout = cli.out.read_text(errors="replace")
    sout = srv.out.read_text(errors="replace")
    if not finished:
        rec["error"] = f"client timed out after {seconds + 12}s and was killed"
        return rec
    try:
        m = row.parse(cout, sout)
    except (ValueError, KeyError, TypeError, json.JSONDecodeError) as e:
        err = cli.err.read_text(errors="replace").strip()[-600:]
        rec["error"] = f"{e}; client exit {cli.exit_code()}; stderr: {err}"
        return rec
    if cli.exit_code() not in (0, None) and "trans_per_s" not in m:
        rec["error"] = f"client exit status {cli.exit_code()}"
        return rec
    rec.update(m)
    if "rx_bps" in m:
        rec["rx_gbps"] = m["rx_bps"] / 1e9
        rec["tx_gbps"] = m["tx_bps"] / 1e9
        gbit = m["rx_bytes"] * 8 / 1e9
        rec["gbit_moved"] = round(gbit, 4)
        if gbit > 0:
            rec["cpu_s_per_gbit"] = (cli.cpu + srv.cpu) / gbit
            rec["cpu_s_per_gbit_incl_softirq"] = (cli.cpu + srv.cpu + rec["host_irq_s"] + rec["ksoftirqd_s"]) / gbit
            rec["client_cpu_s_per_gbit"] = cli.cpu / gbit
            rec["server_cpu_s_per_gbit"] = srv.cpu / gbit
        if m.get("tx_bytes") and row.udp_len:
            rec["loss_pct"] = max(0.0, 100.0 * (1 - m["rx_bytes"] / m["tx_bytes"]))
        if m.get("tx_bytes"):
            rec["lo_over_sent"] = rec["lo_bytes"] / m["tx_bytes"]
        if row.udp_len:
            rec["rx_pps"] = m["rx_bps"] / (8 * row.udp_len)
            rec["tx_pps"] = m["tx_bps"] / (8 * row.udp_len)
    if "trans_per_s" in m:
        secs = m.get("seconds") or seconds
        n = m["trans_per_s"] * secs
        if n > 0:
            rec["cpu_us_per_trans"] = (cli.cpu + srv.cpu) / n * 1e6
    rec["ok"] = True
    return rec


MEM_P128_TESTS = 3


def run_mem_case(tools: dict[str, Tool], tmp: Path) -> list[dict]:
    """Server RSS: idle after start; idle after a 1-stream warm-up test (what any first test
    maps for good: code pages, a cached thread stack); then after each of MEM_P128_TESTS
    -P 128 tests (0.5 s and 2 s after), so a server that keeps memory shows it growing."""
    out = []
    for key in ("netmeter", "iperf3-3.12", "iperf3-3.18", "iperf3-3.22"):
        if key not in tools:
            continue
        t = tools[key]
        port = free_port()
        rec = {"case": "mem", "row": t.label, "label": t.label, "tool": key, "ok": False}
        sargv = wrap([t.path, "-s", "-B", HOST, "-p", str(port)], None, 60, None)
        cargv = wrap([t.path, "-c", HOST, "-p", str(port), "-t", "1", "-P", "128", "-J"], None, 30, None)
        wargv = wrap([t.path, "-c", HOST, "-p", str(port), "-t", "1", "-J"], None, 30, None)
        rec["server_cmd"], rec["client_cmd"] = sargv, cargv
        srv = spawn(sargv, tmp / f"mem-{key}.server.out", tmp / f"mem-{key}.server.err")
        t0 = time.monotonic()
        while not listening(port, False) and time.monotonic() - t0 < 5:
            time.sleep(0.01)
        time.sleep(0.5)
        real = child_pid(srv.pid)  # timeout -> tool
        if real is None:
            stop(srv, [(signal.SIGTERM, 2.0)])
            rec["error"] = "server did not start"
            out.append(rec)
            continue
        rec["idle_rss_kib"] = proc_status_kib(real, "VmRSS")
        warm = spawn(wargv, tmp / f"mem-{key}.warm.out", tmp / f"mem-{key}.warm.err")
        if not reap(warm, time.monotonic() + 30):
            stop(warm, [(signal.SIGTERM, 2.0)])
        time.sleep(2.0)
        rec["warm_idle_rss_kib"] = proc_status_kib(real, "VmRSS")
        rec["after_p128_0_5s_rss_kib"], rec["after_p128_2s_rss_kib"] = [], []
        errors = []
        for i in range(MEM_P128_TESTS):
            cli = spawn(cargv, tmp / f"mem-{key}.client{i}.out", tmp / f"mem-{key}.client{i}.err")
            if not reap(cli, time.monotonic() + 30):
                stop(cli, [(signal.SIGTERM, 2.0)])
            time.sleep(0.5)
            rec["after_p128_0_5s_rss_kib"].append(proc_status_kib(real, "VmRSS"))
            time.sleep(1.5)
            rec["after_p128_2s_rss_kib"].append(proc_status_kib(real, "VmRSS"))
            try:
                parse_iperf3_json(cli.out.read_text(errors="replace"))
            except ValueError as e:
                errors.append(f"-P 128 test {i + 1} failed: {e}")
        rec["peak_rss_kib"] = proc_status_kib(real, "VmHWM")
        stop(srv, [(signal.SIGTERM, 3.0)])
        rec["ok"] = not errors
        if errors:
            rec["error"] = "; ".join(errors)
        out.append(rec)
        time.sleep(PAUSE_BETWEEN_RUNS)
    return out


def wait_for_quiet(max_wait: float) -> dict:
    info = {"loadavg_before_wait": loadavg()}
    t0 = time.monotonic()
    busy = host_busy_fraction()
    while busy > 0.25 and time.monotonic() - t0 < max_wait:
        log(f"host is busy ({busy:.0%} of {NCPU} CPUs, load {loadavg()[0]:.2f}); waiting for it to calm down")
        time.sleep(8)
        busy = host_busy_fraction()
    info.update(waited_s=round(time.monotonic() - t0, 1), busy_frac_at_start=round(busy, 3),
                loadavg_at_start=loadavg())
    return info


# --------------------------------------------------------------------------------------
# Summaries, goals and the report
# --------------------------------------------------------------------------------------

PRIMARY = {"tcp1": "rx_gbps", "tcp2": "rx_gbps", "tcpR": "rx_gbps", "tcpbest": "rx_gbps",
           "udp1448": "rx_gbps", "udp64": "rx_pps", "rr": "trans_per_s", "crr": "trans_per_s"}


def med(xs):
    return statistics.median(xs) if xs else None


def summarize(runs: list[dict]) -> dict:
    """Per (case,row): median/min/max of the metrics over successful runs."""
    groups: dict[tuple[str, str], list[dict]] = {}
    noisy: dict[tuple[str, str], int] = {}
    for r in runs:
        if r["case"] == "mem":
            continue
        if r.get("discarded"):
            noisy[(r["case"], r["row"])] = noisy.get((r["case"], r["row"]), 0) + 1
            continue
        groups.setdefault((r["case"], r["row"]), []).append(r)
    out = {}
    for (case, row), rs in groups.items():
        ok = [r for r in rs if r.get("ok")]
        s = {"case": case, "row": row, "label": rs[0]["label"], "tool": rs[0]["tool"],
             "placement": rs[0]["placement"], "runs": len(rs), "ok": len(ok),
             "errors": [r.get("error") for r in rs if not r.get("ok")],
             "noisy_runs_repeated": noisy.get((case, row), 0)}
        for k in ("rx_gbps", "tx_gbps", "rx_pps", "tx_pps", "loss_pct", "trans_per_s", "cpu_s_per_gbit",
                  "cpu_s_per_gbit_incl_softirq", "p50_latency_us", "p99_latency_us",
                  "cpu_us_per_trans", "client_cpu_s", "server_cpu_s", "mean_latency_us", "other_busy_frac",
                  "retransmits", "lo_over_sent"):
            v = [r[k] for r in ok if r.get(k) is not None]
            if v:
                s[k] = {"median": med(v), "min": min(v), "max": max(v)}
        for k in ("client_maxrss_kib", "server_maxrss_kib"):
            v = [r[k] for r in ok if r.get(k)]
            if v:
                s[k] = max(v)
        dp = sorted({r.get("data_path") for r in ok if r.get("data_path")})
        if dp:
            s["data_path"] = dp
        out[(case, row)] = s
    return out


def fmt_rate(v: float | None, metric: str) -> str:
    if v is None:
        return "–"
    if metric in ("rx_gbps", "tx_gbps"):
        return f"{v:.2f}"
    if metric in ("rx_pps", "tx_pps", "trans_per_s"):
        if v < 1e3:
            return f"{v:.0f}"
        if v < 1e4:
            return f"{v / 1e3:.1f}k"
        return f"{v / 1e3:,.0f}k" if v < 1e6 else f"{v / 1e6:.2f}M"
    return f"{v:.3g}"


def ratio_text(a, b) -> str:
    if a is None or b is None or b == 0:
        return "–"
    return f"{a / b:.2f}×"


def best_row(summ: dict, case: str, pred) -> dict | None:
    cands = [s for (c, _), s in summ.items() if c == case and pred(s) and PRIMARY[case] in s]
    if not cands:
        return None
    return max(cands, key=lambda s: s[PRIMARY[case]]["median"])


def get(summ, case, row) -> dict | None:
    return summ.get((case, row))


def prim(s: dict | None, case: str) -> float | None:
    if not s or PRIMARY[case] not in s:
        return None
    return s[PRIMARY[case]]["median"]


def evaluate_goals(summ: dict, mem: list[dict]) -> list[dict]:
    goals = []

    def goal(name, detail, met, used=(), spread=()):
        noise = [u["other_busy_frac"]["median"] for u in used if u and "other_busy_frac" in u]
        goals.append({"goal": name, "detail": detail, "met": None if met is None else bool(met),
                      "within_spread": any(spread),
                      "rows": [u["row"] for u in used if u],
                      "other_load_worst_row_median": max(noise) if noise else None})

    def ratio(a: dict, b: dict, key: str, threshold: float) -> tuple[str, bool]:
        """'1.05× (runs 0.80–1.30)' and whether the threshold lies inside the runs' spread:
        the lowest and highest ratio any pair of runs could give (a's min / b's max ...)."""
        r = a[key]["median"] / b[key]["median"]
        lo, hi = a[key]["min"] / b[key]["max"], a[key]["max"] / b[key]["min"]
        return f"{r:.2f}× (runs {lo:.2f}–{hi:.2f})", lo < threshold < hi

    # 1. TCP one stream >= 1.0x newest iperf3 and >= iperf 2.
    nm = get(summ, "tcp1", "netmeter")
    parts, oks, spr = [], [], []
    for peer in ("iperf3 3.22", "iperf 2.1.8", "iperf 2.2.1"):
        p = get(summ, "tcp1", peer)
        if prim(nm, "tcp1") and prim(p, "tcp1"):
            txt, sp = ratio(nm, p, "rx_gbps", 1.0)
            parts.append(f"{txt} {peer}")
            oks.append(prim(nm, "tcp1") >= prim(p, "tcp1"))
            spr.append(sp)
    goal("TCP 1 stream: netmeter ≥ 1.0× newest iperf3 (3.22) and ≥ 1.0× iperf 2",
         ", ".join(parts) or "not measured", all(oks) if oks else None,
         [nm] + [get(summ, "tcp1", x) for x in ("iperf3 3.22", "iperf 2.1.8", "iperf 2.2.1")], spr)

    # 2. Best options >= 1.1x iperf3 (compared with each iperf3's -Z row).
    nmb = best_row(summ, "tcpbest", lambda s: s["tool"] == "netmeter")
    parts, oks, spr = [], [], []
    for peer in ("iperf3 3.12 -Z", "iperf3 3.18 -Z", "iperf3 3.22 -Z"):
        p = get(summ, "tcpbest", peer)
        if nmb and prim(p, "tcpbest"):
            txt, sp = ratio(nmb, p, "rx_gbps", 1.1)
            parts.append(f"{txt} {peer}")
            oks.append(prim(nmb, "tcpbest") / prim(p, "tcpbest") >= 1.1)
            spr.append(sp)
    goal("TCP best zero-copy options: netmeter (best variant) ≥ 1.1× iperf3 -Z",
         (f"best netmeter variant `{nmb['label']}`: " if nmb else "") + (", ".join(parts) or "not measured"),
         all(oks) if oks else None, [nmb] + [get(summ, "tcpbest", x) for x in ("iperf3 3.12 -Z", "iperf3 3.18 -Z", "iperf3 3.22 -Z")],
         spr)

    # 3. CPU per gigabit, TCP one stream, <= 0.9x iperf3.
    parts, oks, spr = [], [], []
    for peer in ("iperf3 3.12", "iperf3 3.18", "iperf3 3.22"):
        p = get(summ, "tcp1", peer)
        if nm and p and "cpu_s_per_gbit" in nm and "cpu_s_per_gbit" in p:
            r = nm["cpu_s_per_gbit"]["median"] / p["cpu_s_per_gbit"]["median"]
            txt, sp = ratio(nm, p, "cpu_s_per_gbit", 0.9)
            parts.append(f"{txt} {peer}")
            oks.append(r <= 0.9)
            spr.append(sp)
    goal("TCP 1 stream CPU per Gbit (client+server): netmeter ≤ 0.9× iperf3",
         ", ".join(parts) or "not measured", all(oks) if oks else None,
         [nm] + [get(summ, "tcp1", x) for x in ("iperf3 3.12", "iperf3 3.18", "iperf3 3.22")], spr)

    # 4. RR >= 1.0x netperf TCP_RR (per placement).
    nm_rr = [s for (c, _), s in summ.items() if c == "rr" and s["tool"] == "netmeter"]
    if any("(1 B)" in s["label"] for s in nm_rr):  # compare like with like: netperf runs -r 1,1
        nm_rr = [s for s in nm_rr if "(1 B)" in s["label"]]
    if not any(c == "rr" for (c, _) in summ):
        goal("TCP RR: netmeter ≥ 1.0× netperf TCP_RR", "not measured (case rr not run)", None)
    elif not nm_rr:
        goal("TCP RR: netmeter ≥ 1.0× netperf TCP_RR", "netmeter has no --bounceback (not in `netmeter --help`): "
             "no netmeter RR measurement", False)
    else:
        parts, oks, used, spr = [], [], [], []
        for s in nm_rr:
            p = next((x for (c, _), x in summ.items() if c == "rr" and x["label"] == "netperf TCP_RR"
                      and x["placement"] == s["placement"]), None)
            if prim(s, "rr") and prim(p, "rr"):
                r = prim(s, "rr") / prim(p, "rr")
                txt, sp = ratio(s, p, "trans_per_s", 1.0)
                parts.append(f"{txt} with {s['label']}, {s['placement']}")
                oks.append(r >= 1.0)
                spr.append(sp)
                used += [s, p]
        # The optional polling path, shown beside the goal (which judges the default path).
        for s in (x for (c, _), x in summ.items() if c == "rr" and "polling" in x["label"]):
            p = next((x for (c, _), x in summ.items() if c == "rr" and x["label"] == "netperf TCP_RR"
                      and x["placement"] == s["placement"]), None)
            if prim(s, "rr") and prim(p, "rr"):
                txt, _ = ratio(s, p, "trans_per_s", 1.0)
                parts.append(f"(optional --busy-poll 50: {txt}, {s['placement']})")
        goal("TCP RR: netmeter ≥ 1.0× netperf TCP_RR", ", ".join(parts) or "not measured",
             all(oks) if oks else None, used, spr)

    # 5. UDP 1448 received throughput >= 2x iperf3 3.12 default.  6. 64-byte pps >= 2x.
    for case, what in (("udp1448", "received throughput"), ("udp64", "received packets/s")):
        nmu, p = get(summ, case, "netmeter"), get(summ, case, "iperf3 3.12")
        if prim(nmu, case) and prim(p, case):
            r = prim(nmu, case) / prim(p, case)
            txt, sp = ratio(nmu, p, PRIMARY[case], 2.0)
            goal(f"UDP {case[3:]}-byte {what}: netmeter (default data path) ≥ 2× iperf3 3.12 `-u -b 0`",
                 f"{txt} iperf3 3.12", r >= 2.0, [nmu, p], [sp])
        else:
            goal(f"UDP {case[3:]}-byte {what}: netmeter ≥ 2× iperf3 3.12", "not measured", None)

    # 7. Server idle RSS <= 10 MiB; after -P 128 back to idle (within 0.5 MiB of the warm idle).
    m = next((r for r in mem if r["tool"] == "netmeter" and r.get("idle_rss_kib")), None)
    if m:
        goal("netmeter server idle RSS ≤ 10 MiB", f"{m['idle_rss_kib'] / 1024:.1f} MiB",
             m["idle_rss_kib"] <= 10 * 1024)
        after, warm = m.get("after_p128_2s_rss_kib") or [], m.get("warm_idle_rss_kib")
        if after and warm and m.get("ok"):
            goal("netmeter server RSS 2 s after each -P 128 test ≤ idle after a first test + 0.5 MiB",
                 f"idle {warm / 1024:.2f} MiB; after: " + ", ".join(f"{a / 1024:.2f}" for a in after) + " MiB",
                 max(after) <= warm + 512)
        else:
            goal("netmeter server RSS returns to idle after -P 128", m.get("error", "not measured"),
                 False if m.get("error") else None)
    else:
        goal("netmeter server idle RSS ≤ 10 MiB", "not measured", None)
    return goals


def machine_info() -> dict:
    info = {"uname": " ".join(platform.uname()), "cpus": NCPU}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        mm = re.search(r"model name\s*:\s*(.*)", cpuinfo)
        info["cpu_model"] = mm.group(1).strip() if mm else "?"
        info["threads_per_core"] = None
        mem = Path("/proc/meminfo").read_text()
        mt = re.search(r"MemTotal:\s*(\d+)", mem)
        info["mem_gib"] = round(int(mt.group(1)) / 1048576, 1) if mt else None
    except OSError:
        pass
    for k, p in [("tcp_congestion_control", "/proc/sys/net/ipv4/tcp_congestion_control"),
                 ("rmem_max", "/proc/sys/net/core/rmem_max"), ("wmem_max", "/proc/sys/net/core/wmem_max"),
                 ("tcp_rmem", "/proc/sys/net/ipv4/tcp_rmem"), ("tcp_wmem", "/proc/sys/net/ipv4/tcp_wmem")]:
        try:
            info[k] = Path(p).read_text().strip().replace("\t", " ")
        except OSError:
            pass
    try:
        info["os"] = re.search(r'PRETTY_NAME="(.*)"', Path("/etc/os-release").read_text()).group(1)
    except (OSError, AttributeError):
        pass
    return info


def md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def mib(kib) -> str:
    return f"{kib / 1024:.1f}" if kib else "–"


def mm(s: dict, k: str, f=lambda v: f"{v:.2f}") -> tuple[str, str]:
    if k not in s:
        return "–", "–"
    d = s[k]
    return f(d["median"]), f"{f(d['min'])}–{f(d['max'])}"


def write_report(path: Path, meta: dict, rows_by_case: dict, skipped: dict, summ: dict, mem: list[dict],
                 goals: list[dict], runs: list[dict]) -> None:
    L: list[str] = []
    a = meta["args"]
    L.append("# netmeter benchmarks (loopback, side by side with iperf3, iperf 2 and netperf)")
    L.append("")
    L.append("Generated by `bench/run.py`; do not edit by hand. Raw runs: `bench/results.json`.")
    L.append("")
    L.append("Reproduce (one command; builds netmeter in release mode, installs the peers with "
             "`scripts/setup-peers.sh` if `/opt/netmeter-peers/peers.env` is missing):")
    L.append("")
    L.append("```sh")
    L.append(f"python3 bench/run.py --runs {a['runs']} --seconds {a['seconds']}"
             + (f" --cases {','.join(a['cases'])}" if a['cases'] != ALL_CASES else ""))
    L.append("python3 bench/run.py --smoke        # CI: ~10 s, tcp1 and udp1448, netmeter vs iperf3 3.12")
    L.append("```")
    L.append("")
    L.append(f"This run: {meta['date_utc']} (UTC), {meta['elapsed_s'] / 60:.1f} minutes, "
             f"{a['runs']} runs × {a['seconds']} s per tool and case.")
    L.append("")
    L.append("## Machine")
    L.append("")
    mi = meta["machine"]
    L.append(f"- `{mi['uname']}`, {mi.get('os', '')}")
    L.append(f"- CPU: {mi.get('cpu_model')}, {mi['cpus']} CPUs online; RAM {mi.get('mem_gib')} GiB")
    L.append(f"- `tcp_congestion_control={mi.get('tcp_congestion_control')}`, `rmem_max={mi.get('rmem_max')}`, "
             f"`wmem_max={mi.get('wmem_max')}`, `tcp_rmem={mi.get('tcp_rmem')}`, `tcp_wmem={mi.get('tcp_wmem')}`")
    q = meta["quiet"]
    L.append(f"- Load before the run: load average {q['loadavg_before_wait']} (1/5/15 min); "
             f"waited {q['waited_s']} s for the host to calm down; at start: {q['busy_frac_at_start']:.0%} of "
             f"the CPUs busy, load average {q['loadavg_at_start']}. After the run: load average "
             f"{meta['loadavg_after']}.")
    ob = [r["other_busy_frac"] for r in runs if r.get("other_busy_frac") is not None]
    if ob:
        L.append(f"- CPU used by *other* processes during the runs (host busy time minus the two measured "
                 f"processes, softirq and ksoftirqd, per run, as a share of all CPUs): median {med(ob):.0%}, "
                 f"max {max(ob):.0%}"
                 + (". Other work (builds, tests) ran on this machine during the benchmark, so expect noise; "
                    "the per-case tables show this figure per row." if max(ob) > 0.1 else "."))
    nmi = meta["netmeter"]
    L.append(f"- netmeter: `{meta['tools']['netmeter']['version']}`, git `{nmi.get('git_head', '?')[:12]}`"
             + (" plus uncommitted changes in src/" if nmi.get("uncommitted_src_changes") else "")
             + f", release build, binary sha256 `{nmi['sha256'][:16]}…`")
    L.append("- Peers (from `" + meta["peers_env"] + "`): " + "; ".join(
        f"{t['label']} `{t['path']}` ({t['version']})" for k, t in meta["tools"].items() if k != "netmeter"))
    L.append("")
    L.append("## Method")
    L.append("")
    L.append(textwrap_method(a))
    L.append("")
    L.append("## Goals")
    L.append("")
    L.append(md_table(["Goal", "Measured (median / median)", "Status", "other load (worst row)"],
                      [[g["goal"], g["detail"],
                        {True: "**met**", False: "**not met**", None: "not measured"}[g["met"]]
                        + (" (within the runs' spread)" if g.get("within_spread") else ""),
                        "–" if g.get("other_load_worst_row_median") is None
                        else f"{g['other_load_worst_row_median']:.0%}"]
                       for g in goals]))
    L.append("")
    L.append("Ratios are median over median; *runs a–b* is the lowest and highest ratio that any pair of "
             "single runs gives (netmeter's worst run against the peer's best, and the reverse). When the goal's "
             "threshold lies inside that range the status says *within the runs' spread*: the verdict could "
             "flip on a re-run.")
    L.append("")
    L.append("*other load (worst row)*: the highest per-row median share of the CPUs that other processes used "
             "during the runs behind the goal. Above ~10% the result depends on other people's work on the "
             "host as much as on the tools (pinned request/response rates drop by up to 10× when another "
             "process shares the pinned core); re-run on a quiet machine before drawing conclusions.")
    L.append("")
    # Hand-written: what the profiles (bench/profile.sh) say about the goals.
    analysis = Path(__file__).with_name("analysis.md")
    if analysis.exists():
        L.append(analysis.read_text().rstrip())
        L.append("")
    L.append("## Ratios netmeter / peer (median over median of the case's main figure)")
    L.append("")
    L.append(ratio_section(summ, rows_by_case))
    L.append("")
    for case in a["cases"]:
        if case == "mem":
            L.append(mem_section(mem))
            continue
        if case not in rows_by_case:
            continue
        L.append(case_section(case, rows_by_case[case], skipped.get(case, []), summ, a["seconds"]))
    fails = [r for r in runs if not r.get("ok") and not r.get("discarded")]
    if fails:
        L.append("## Failed runs")
        L.append("")
        for r in fails:
            L.append(f"- {r['case']} / {r['row']} run {r.get('rep')}: {r.get('error')}")
        L.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(L).rstrip() + "\n")


def textwrap_method(a: dict) -> str:
    return "\n".join([
        f"- Every case runs each tool {a['runs']} times for {a['seconds']} s on 127.0.0.1. Within a repetition the "
        "tools run one after another, and the order is rotated by one tool per repetition, so drift and "
        "other people's load spread over all tools. Figures are the median and the min–max over the runs.",
        f"- Noise control: before starting, the harness waits up to {a.get('wait_load', 300):.0f} s for the host to be "
        f"idle. A run during which other processes used more than {a['max_other_load']:.0%} of the CPUs is repeated "
        f"(at most twice, within a budget of {a['retry_budget_s']:.0f} s for the whole run; this run used "
        f"{a['retry_spent_s']:.0f} s); the discarded attempts stay in the JSON (`\"discarded\": \"noisy\"`). "
        "The *other load* column gives, per row, the median share of the CPUs used by other processes.",
        "- Every run starts a fresh server bound to 127.0.0.1 on a free port (iperf3 and netmeter with `-1`; "
        "netserver with `-f`, so it does not fork per test), then runs the client, then stops the server by its "
        "PID. CPU time (user+system) of client and server comes from `wait4()` (exact); peak RSS is the tool "
        "process's `ru_maxrss`, reported by GNU time.",
        "- Throughput is the **receiver's** bytes / the receiver's time (iperf3/netmeter `end.sum_received`, "
        "iperf 2 the receiving side's report, netperf the remote receive figure). UDP loss = 1 − received/sent "
        "bytes. Packets/s = bytes/s ÷ datagram size.",
        "- CPU/Gbit (service demand) = (client + server CPU seconds) ÷ gigabits received. Softirq time that the "
        "kernel books as irq time rather than to a process (`/proc/stat` softirq; on loopback the receive "
        "path runs there) is not in it; the column *incl. softirq* adds the host-wide irq+softirq time and "
        "the ksoftirqd threads' CPU time of the run (which include any other network traffic on the host). "
        "For request/response rates the tables give CPU µs per transaction instead.",
        "- Latency-type cases (rr, crr) pin client and server with `taskset`, on the same core and on "
        "different cores; the placement is in each row. Throughput cases are not pinned.",
        "- Commands are printed per case; `$PORT` is a free port picked per run. The harness runs each of "
        "them as `timeout -k 2 LIMIT /usr/bin/time -q -o FILE -f %M COMMAND` (LIMIT = test length + 8 s for "
        "clients, + 30 s for servers): GNU time reports the tool's own peak RSS (a direct child of the Python "
        "harness would inherit the harness's RSS high-water mark across execve), and wait4() on `timeout` gives "
        "the CPU time of everything below it. Servers are stopped with SIGINT/SIGTERM to their own PID "
        "(iperf 2 servers: SIGINT, then SIGKILL 50 ms later, once their report has been written; "
        "netserver: SIGALRM 0.5 s after the test ends if the client is still waiting, see the crr notes).",
    ])


def case_section(case: str, rows: list[Row], skipped: list[str], summ: dict, seconds: int) -> str:
    L = [f"## {case}: {CASE_TITLES[case]}", ""]
    metric = PRIMARY[case]
    udp = case.startswith("udp")
    rr = case in ("rr", "crr")
    if udp:
        unit = "received Gbit/s" if case == "udp1448" else "received packets/s"
        hdr = ["Tool / options", f"{unit} median", "min–max", "sent " + ("Gbit/s" if case == "udp1448" else "packets/s"),
               "loss %", "lo bytes / sent", "CPU s/Gbit", "incl. softirq",
               "CPU s client / server", "peak RSS MiB client / server", "other load", "runs ok"]
    elif rr:
        hdr = ["Tool / options", "placement", "transactions/s median", "min–max", "mean / p99 latency µs",
               "CPU µs/transaction", "CPU s client / server", "peak RSS MiB client / server", "other load", "runs ok"]
    else:
        hdr = ["Tool / options", "received Gbit/s median", "min–max", "CPU s/Gbit", "incl. softirq",
               "CPU s client / server",
               "peak RSS MiB client / server", "other load", "runs ok"]
    body = []
    for r in rows:
        s = summ.get((case, r.key))
        if not s:
            continue
        m, rng = mm(s, metric, lambda v: fmt_rate(v, metric))
        cpu = f"{mm(s, 'client_cpu_s')[0]} / {mm(s, 'server_cpu_s')[0]}"
        rss = f"{mib(s.get('client_maxrss_kib'))} / {mib(s.get('server_maxrss_kib'))}"
        other = mm(s, "other_busy_frac", lambda v: f"{v:.0%}")[0]
        okc = f"{s['ok']}/{s['runs']}"
        label = r.label + (f" ({', '.join(s['data_path'])})" if s.get("data_path") else "")
        if udp:
            sent_metric = "tx_gbps" if case == "udp1448" else "tx_pps"
            body.append([label, m, rng, mm(s, sent_metric, lambda v: fmt_rate(v, sent_metric))[0],
                         mm(s, "loss_pct", lambda v: f"{v:.1f}")[0], mm(s, "lo_over_sent", lambda v: f"{v:.2f}")[0],
                         mm(s, "cpu_s_per_gbit", lambda v: f"{v:.3f}")[0],
                         mm(s, "cpu_s_per_gbit_incl_softirq", lambda v: f"{v:.3f}")[0],
                         cpu, rss, other, okc])
        elif rr:
            body.append([label, r.placement_text(), m, rng,
                         mm(s, "mean_latency_us", lambda v: f"{v:.1f}")[0] + " / "
                         + mm(s, "p99_latency_us", lambda v: f"{v:.0f}")[0],
                         mm(s, "cpu_us_per_trans", lambda v: f"{v:.1f}")[0], cpu, rss, other, okc])
        else:
            body.append([label, m, rng, mm(s, "cpu_s_per_gbit", lambda v: f"{v:.3f}")[0],
                         mm(s, "cpu_s_per_gbit_incl_softirq", lambda v: f"{v:.3f}")[0], cpu, rss, other, okc])
    L.append(md_table(hdr, body))
    L.append("")
    notes = [f"- {r.label}: {r.note}" for r in rows if r.note]
    notes = list(dict.fromkeys(notes))
    if udp:
        notes.append("- *lo bytes / sent*: bytes the loopback interface carried during the run ÷ the bytes the "
                     "tool reports as sent. A value ≥ 1 confirms the sent figure: lo counts 28 bytes of IP and UDP "
                     "headers per packet (≈1.02 for 1448-byte datagrams, ≈1.44 for 64-byte ones), while a GSO "
                     "super-packet carries one set of headers for up to 64 datagrams (≈1.0). Other loopback traffic on the "
                     "host can only raise it.")
    if skipped:
        notes += [f"- {x[6:]}" if x.startswith("note: ") else f"- skipped: {x}" for x in skipped]
    if notes:
        L += notes + [""]
    L.append("Commands:")
    L.append("")
    L.append("```sh")
    seen = set()
    for r in rows:
        sc, cc = r.commands_text(seconds)
        if (sc, cc) in seen:
            continue
        seen.add((sc, cc))
        L.append(f"# {r.key}")
        L.append(f"{sc} &")
        L.append(cc)
    L.append("```")
    L.append("")
    return "\n".join(L)


def row_is_udp(r: Row) -> bool:
    """A UDP row (compared only with UDP rows of the peers)."""
    return "-u" in r.client_args or r.netperf_test.startswith("UDP")


def ratio_section(summ: dict, rows_by_case: dict) -> str:
    peers = [("iperf3 3.12", "iperf3-3.12"), ("iperf3 3.18", "iperf3-3.18"),
             ("iperf3 3.22", "iperf3-3.22"), ("iperf 2.1.8", "iperf2-2.1.8"),
             ("iperf 2.2.1", "iperf2-2.2.1"), ("netperf", "netperf")]
    body = []
    for case, rows in rows_by_case.items():
        if case == "mem":
            continue
        placements = list(dict.fromkeys(r.placement_text() for r in rows))
        nm_rows = [r for r in rows if r.is_netmeter]
        if case == "tcpbest":
            b = best_row(summ, case, lambda s: s["tool"] == "netmeter")
            nm_rows = [r for r in nm_rows if b and r.key == b["row"]]
        if not nm_rows:
            body.append([case, "netmeter: not run (no such mode)"] + ["–"] * len(peers))
            continue
        for nr in nm_rows:
            for pl in placements:
                if nr.placement_text() != pl:
                    continue
                ns = summ.get((case, nr.key))
                line = [case, nr.label + ("" if pl == "unpinned" else f" [{pl}]")]
                for _, pk in peers:
                    cands = [summ.get((case, r.key)) for r in rows if r.tool.key == pk and r.placement_text() == pl
                             and row_is_udp(r) == row_is_udp(nr)]
                    cands = [c for c in cands if prim(c, case)]
                    if not cands:
                        line.append("–")
                        continue
                    best = max(cands, key=lambda c: prim(c, case))
                    line.append(ratio_text(prim(ns, case), prim(best, case)))
                body.append(line)
    # CPU per Gbit ratio for the TCP single stream case.
    ns = summ.get(("tcp1", "netmeter"))
    if ns and "cpu_s_per_gbit" in ns:
        line = ["tcp1 CPU/Gbit", "netmeter (lower is better)"]
        for _, pk in peers:
            c = next((s for (cc, _), s in summ.items() if cc == "tcp1" and s["tool"] == pk and "cpu_s_per_gbit" in s), None)
            line.append(ratio_text(ns["cpu_s_per_gbit"]["median"], c["cpu_s_per_gbit"]["median"]) if c else "–")
        body.append(line)
    txt = md_table(["Case", "netmeter row"] + [p for p, _ in peers], body)
    return txt + ("\n\nMain figure: received Gbit/s (tcp*, udp1448), received packets/s (udp64), "
                  "transactions/s (rr, crr). In tcpbest the best netmeter variant is compared with each peer's "
                  "best-options row. A ratio above 1 means netmeter is faster (for CPU/Gbit: uses more CPU).")


def mem_section(mem: list[dict]) -> str:
    L = [f"## mem: {CASE_TITLES['mem']}", ""]
    body = []
    for r in mem:
        if not r.get("idle_rss_kib"):
            body.append([r["label"], "–", "–", "–", "–", r.get("error", "")])
            continue
        def mibs(v):
            return " / ".join(mib(x) for x in v) if isinstance(v, list) else mib(v)
        body.append([r["label"], mib(r["idle_rss_kib"]), mib(r.get("warm_idle_rss_kib")),
                     mibs(r.get("after_p128_0_5s_rss_kib")), mibs(r.get("after_p128_2s_rss_kib")),
                     mib(r.get("peak_rss_kib")), "ok" if r.get("ok") else r.get("error", "")])
    L.append(md_table(["Server", "idle RSS MiB", "idle after a 1-stream test",
                       f"0.5 s after each of {MEM_P128_TESTS} -P 128 tests",
                       f"2 s after each -P 128 test", "peak (VmHWM)", "-P 128 tests"], body))
    L.append("")
    L.append("VmRSS of the server process from /proc/PID/status: 0.5 s after it started listening; 2 s after "
             "a `-t 1` one-stream warm-up test (a first test maps code pages and caches a thread stack for "
             f"good: that is the idle level to return to); then 0.5 s and 2 s after each of {MEM_P128_TESTS} "
             "`-t 1 -P 128` tests in a row. Commands:")
    L.append("")
    L.append("```sh")
    for r in mem:
        L.append(" ".join("target/release/netmeter" if "bench-bin" in x else x for x in r["server_cmd"])
                 .replace(f"-p {r['server_cmd'][-1]}", "-p $PORT") + " &")
        c = r["client_cmd"]
        L.append(" ".join("target/release/netmeter" if "bench-bin" in x else ("$PORT" if x == r['server_cmd'][-1] else x)
                          for x in c))
    L.append("```")
    L.append("")
    return "\n".join(L)


# --------------------------------------------------------------------------------------


def write_results(path: Path, doc: dict) -> None:
    """JSON with one run (or summary row) per line: readable, and small diffs between runs."""
    out = ["{"]
    keys = list(doc)
    for i, k in enumerate(keys):
        v = doc[k]
        end = "," if i < len(keys) - 1 else ""
        if isinstance(v, list):
            out.append(f"  {json.dumps(k)}: [")
            out += [f"    {json.dumps(x, ensure_ascii=False)}" + ("," if j < len(v) - 1 else "")
                    for j, x in enumerate(v)]
            out.append("  ]" + end)
        else:
            out.append(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}{end}")
    out.append("}")
    path.write_text("\n".join(out) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=1)  # see the docstring: 5 x 3 s would take ~13 min
    ap.add_argument("--cases", default=",".join(ALL_CASES))
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--max-other-load", type=float, default=0.15)
    ap.add_argument("--retry-budget", type=float, default=None)
    ap.add_argument("--wait-load", type=float, default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--doc", default=None)
    a = ap.parse_args()
    cases = [c.strip() for c in a.cases.split(",") if c.strip()]
    bad = [c for c in cases if c not in ALL_CASES]
    if bad:
        ap.error(f"unknown case(s) {bad}; known: {','.join(ALL_CASES)}")
    if a.smoke:
        a.runs, a.seconds, cases = 1, 1, ["tcp1", "udp1448"]
    if a.runs < 1 or a.seconds < 1:
        ap.error("--runs and --seconds must be >= 1")
    for exe in ("timeout", "taskset", "/usr/bin/time"):
        if not shutil.which(exe):
            log(f"{exe} not found")
            return 2
    json_path = Path(a.json) if a.json else (REPO / ("target/bench-smoke.json" if a.smoke else "bench/results.json"))
    doc_path = Path(a.doc) if a.doc else (None if a.smoke else REPO / "docs" / "benchmarks.md")
    wait_load = a.wait_load if a.wait_load is not None else (0 if a.smoke else 300)
    if a.retry_budget is None:
        a.retry_budget = 0 if a.smoke else 60

    t_start = time.monotonic()
    nm_path, nm_info = build_netmeter(a.no_build)
    peers = read_peers_env(a.smoke)
    tools = discover_tools(nm_path, peers)
    quiet = wait_for_quiet(wait_load) if wait_load > 0 else {
        "loadavg_before_wait": loadavg(), "waited_s": 0, "busy_frac_at_start": host_busy_fraction(0.5),
        "loadavg_at_start": loadavg()}
    log(f"load average {quiet['loadavg_at_start']}, {quiet['busy_frac_at_start']:.0%} busy; "
        f"cases {','.join(cases)}; {a.runs} runs x {a.seconds} s")

    tmp = REPO / "target" / "bench-tmp" / str(os.getpid())
    tmp.mkdir(parents=True, exist_ok=True)
    runs: list[dict] = []
    retry_spent = 0.0
    mem: list[dict] = []
    rows_by_case: dict[str, list[Row]] = {}
    skipped: dict[str, list[str]] = {}
    for case in cases:
        if case == "mem":
            log("case mem")
            mem = run_mem_case(tools, tmp)
            rows_by_case["mem"] = []
            continue
        rows, skip = make_rows(case, tools, a.smoke)
        rows_by_case[case], skipped[case] = rows, skip
        if not rows:
            continue
        log(f"case {case}: {len(rows)} rows x {a.runs} runs")
        for rep in range(a.runs):
            k = rep % len(rows)
            for order, row in enumerate(rows[k:] + rows[:k]):
                for attempt in range(3):
                    t_run = time.monotonic()
                    rec = run_once(row, a.seconds, rep, tmp)
                    rec["order"], rec["attempt"] = order, attempt
                    runs.append(rec)
                    noisy = rec.get("ok") and rec.get("other_busy_frac", 0) > a.max_other_load
                    if not noisy or attempt == 2 or retry_spent >= a.retry_budget:
                        break
                    # Other processes took a large share of the CPUs during this run: repeat it
                    # (within --retry-budget seconds in all); the discarded attempt stays in the JSON.
                    rec["discarded"] = "noisy"
                    retry_spent += time.monotonic() - t_run
                    log(f"  {case} rep {rep} {row.key}: other load {rec['other_busy_frac']:.0%}, repeating")
                metric = PRIMARY[case]
                shown = fmt_rate(rec.get(metric), metric) if rec.get("ok") else "FAILED: " + str(rec.get("error"))[:160]
                log(f"  {case} rep {rep} {row.key}: {shown}")
                time.sleep(PAUSE_BETWEEN_RUNS)
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        os.unlink(nm_path)
    except OSError:
        pass

    summ = summarize(runs)
    goals = evaluate_goals(summ, mem) if not a.smoke else []
    meta = {
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "elapsed_s": round(time.monotonic() - t_start, 1),
        "args": {"runs": a.runs, "seconds": a.seconds, "cases": cases, "smoke": a.smoke,
                 "max_other_load": a.max_other_load, "wait_load": wait_load, "retry_budget_s": a.retry_budget,
                 "retry_spent_s": round(retry_spent, 1)},
        "machine": machine_info(),
        "quiet": quiet,
        "loadavg_after": loadavg(),
        "netmeter": nm_info,
        "peers_env": peers.get("_file"),
        "tools": {k: {"label": t.label, "path": t.path, "version": t.version, "features": sorted(t.features)}
                  for k, t in tools.items()},
    }
    json_path.parent.mkdir(parents=True, exist_ok=True)
    write_results(json_path, {
        "meta": meta, "goals": goals,
        "summary": list(summ.values()), "mem": mem, "runs": runs,
        "skipped": skipped,
    })
    log(f"wrote {json_path}")
    if doc_path:
        write_report(doc_path, meta, rows_by_case, skipped, summ, mem, goals, runs)
        log(f"wrote {doc_path}")

    # Console summary.
    for (case, row), s in summ.items():
        metric = PRIMARY[case]
        m = s.get(metric)
        print(f"{case:8} {row:45} {fmt_rate(m['median'], metric) if m else 'FAILED':>10}"
              f"  ({s['ok']}/{s['runs']} ok)")
    for g in goals:
        print(f"goal {'MET    ' if g['met'] else 'NOT MET' if g['met'] is False else 'n/a    '} {g['goal']}: {g['detail']}")
    failed = [r for r in runs if not r.get("ok") and not r.get("discarded")] + [r for r in mem if not r.get("ok")]
    print(f"bench: {len(runs)} runs, {len(failed)} failed, {meta['elapsed_s']:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
