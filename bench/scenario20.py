#!/usr/bin/env python3
"""The 20-flow scenario bench (issue 24): 20 flows over 4 netmeter servers on loopback.

    python3 bench/scenario20.py [--netmeter PATH] [--seconds 5] [--rate 2M] [--runs 3]
                                [--json OUT] [--doc docs/benchmarks.md]

Starts four `netmeter -s` on 127.0.0.1 (free ports, `--max-tests 8`), writes a scenario
of 20 local TCP flows, five to each server (every fifth a --bounceback flow, the others
paced with -b RATE and --trip-times), all starting at one instant, runs
`netmeter scenario -J` and reports, from the document and the kernel's accounting of the
controller process (wait4's rusage: user and system CPU, peak RSS):

- start spread: the document's total.start_spread_ms (the flows' recorded starts, each
  less its offset; all on this host's clock);
- completeness: flows with a report and no error, and flows whose report has every
  interval row the test length asks for;
- the controller's CPU seconds (user + system) and its CPU share of the run's wall time,
  and its peak resident memory.

With --doc, the figures of every run replace this script's section of
docs/benchmarks.md (between its markers; `bench/run.py` keeps that section when it
rewrites the file). The servers are ended by their PIDs. Every wait is bounded.
"""

import argparse
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"no server listening on {port}")


def scenario_text(ports, seconds: float, rate: str) -> str:
    out = []
    for i, p in enumerate(ports):
        out.append(f'[hosts.s{i}]\naddress = "127.0.0.1:{p}"\n')
    for n in range(20):
        host = n % len(ports)
        if n % 5 == 4:
            args = f"--bounceback -t {seconds}"
        else:
            args = f"--trip-times -b {rate} -t {seconds}"
        out.append(f'[[flow]]\nname = "f{n:02}"\nfrom = "local"\nto = "s{host}"\nargs = "{args}"\n')
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--netmeter", default=str(REPO / "target" / "release" / "netmeter"))
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rate", default="2M")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--doc", help="write the figures into this file's scenario20 section")
    a = ap.parse_args()
    runs = [one_run(a) for _ in range(max(1, a.runs))]
    print(json.dumps(runs, indent=2))
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(runs, indent=2) + "\n")
    if a.doc:
        write_doc(pathlib.Path(a.doc), runs)
    return 0 if all(r["complete_reports"] == r["flows"] for r in runs) else 1


BEGIN = "<!-- scenario20: begin (bench/scenario20.py writes this section) -->"
END = "<!-- scenario20: end -->"


def write_doc(path: pathlib.Path, runs) -> None:
    """Replace (or append) this script's section of `path`."""
    r0 = runs[0]
    load = os.getloadavg()
    lines = [
        BEGIN,
        "## scenario20: 20 flows over 4 servers (netmeter scenario, issue 24)",
        "",
        f"`python3 bench/scenario20.py --seconds {r0['seconds']:g} --rate {r0['rate']} --runs {len(runs)} "
        "--doc docs/benchmarks.md`, "
        f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, binary `{r0['netmeter']}`. "
        "Four `netmeter -s` on 127.0.0.1, a scenario of 20 local flows (five per server: four "
        f"TCP `--trip-times -b {r0['rate']}`, one `--bounceback`), all started at one instant "
        f"with `--lead 3`. **The machine was shared** (2 CPUs, other people compiling; load "
        f"average {load[0]:.1f} at the end): the start spread and CPU figures are upper bounds "
        "of what an idle host shows.",
        "",
        "| run | flows ran | complete reports | start spread (ms) | latest start (ms late) "
        "| controller CPU (s) | CPU / wall | controller peak RSS (MiB) | wall (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(runs, 1):
        spread = r["start_spread_ms"]
        late = r["late_ms_max"]
        lines.append(
            f"| {i} | {r['ran']}/{r['flows']} | {r['complete_reports']}/{r['flows']} | "
            f"{'–' if spread is None else f'{spread:.1f}'} | {'–' if late is None else f'{late:.1f}'} | "
            f"{r['controller_cpu_s']:.2f} | {r['controller_cpu_share_of_wall']:.2f} | "
            f"{r['controller_max_rss_mib']:.1f} | {r['wall_s']:.1f} |"
        )
    lines += [
        "",
        "Start spread: the document's `total.start_spread_ms` (each flow's recorded start less its "
        "offset; one clock). Complete: a report with no error and an interval row for every "
        "second. Controller CPU: user + system seconds of the `netmeter scenario` process "
        "(wait4), which runs all 20 local flows' clients itself, and the hosts' clock probes "
        "before the start; its wall time includes the 3 s lead.",
        END,
    ]
    section = "\n".join(lines)
    text = path.read_text() if path.exists() else ""
    i, j = text.find(BEGIN), text.find(END)
    if 0 <= i < j:
        text = text[:i] + section + text[j + len(END):]
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    path.write_text(text)


def one_run(a) -> dict:
    nm = a.netmeter
    if not os.access(nm, os.X_OK):
        nm = str(REPO / "target" / "debug" / "netmeter")
    ports = [free_port() for _ in range(4)]
    servers = [
        subprocess.Popen(
            [nm, "-s", "-B", "127.0.0.1", "-p", str(p), "--max-tests", "8"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        for p in ports
    ]
    try:
        deadline = time.monotonic() + 30
        for p in ports:
            wait_listening(p, deadline)
        with tempfile.TemporaryDirectory() as d:
            path = pathlib.Path(d) / "twenty.toml"
            path.write_text(scenario_text(ports, a.seconds, a.rate))
            t0 = time.monotonic()
            ctl = subprocess.Popen(
                [nm, "scenario", str(path), "-J", "--lead", "3"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            # wait4 gives the controller's own rusage (not the servers').
            out_chunks = []
            import threading

            reader = threading.Thread(target=lambda: out_chunks.append(ctl.stdout.read()))
            err_chunks = []
            ereader = threading.Thread(target=lambda: err_chunks.append(ctl.stderr.read()))
            reader.start()
            ereader.start()
            _, status, ru = os.wait4(ctl.pid, 0)
            wall = time.monotonic() - t0
            reader.join(30)
            ereader.join(30)
            ctl.returncode = os.waitstatus_to_exitcode(status)
        if ctl.returncode != 0:
            print("".join(err_chunks), file=sys.stderr)
            raise SystemExit(f"netmeter scenario exited {ctl.returncode}")
        doc = json.loads("".join(out_chunks))
    finally:
        for s in servers:
            if s.poll() is None:
                os.kill(s.pid, signal.SIGTERM)
        for s in servers:
            try:
                s.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(s.pid, signal.SIGKILL)
                s.wait(timeout=30)
    flows = doc["flows"]
    ran = [f for f in flows if "report" in f and "error" not in f]
    want_rows = int(a.seconds)  # -i 1: one row per whole second
    complete = [f for f in ran if len(f["report"].get("intervals", [])) >= want_rows]
    cpu = ru.ru_utime + ru.ru_stime
    figures = {
        "flows": len(flows),
        "ran": len(ran),
        "complete_reports": len(complete),
        "start_spread_ms": doc["total"].get("start_spread_ms"),
        "late_ms_max": max(
            (f["report"]["start"]["netmeter"]["txstart"]["late_ms"] for f in ran), default=None
        ),
        "controller_cpu_s": round(cpu, 3),
        "controller_cpu_share_of_wall": round(cpu / wall, 3),
        "controller_max_rss_mib": round(ru.ru_maxrss / 1024, 1),
        "wall_s": round(wall, 2),
        "seconds": a.seconds,
        "rate": a.rate,
        "netmeter": nm,
    }
    return figures


if __name__ == "__main__":
    sys.exit(main())
