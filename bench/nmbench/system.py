"""Processes (spawned, reaped, stopped by PID, their CPU time and peak RSS) and host counters (CPU, loopback, UDP, load)."""

from __future__ import annotations

import os
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from .common import CLK_TCK, HOST, NCPU


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
