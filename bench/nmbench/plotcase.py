"""The `plot` case: how long `netmeter plot` and `netmeter report` take on a big result.

A real 10 s loopback TCP test with a 1 ms report interval (`-i 0.001`: ~10,000 interval
rows, a ~6 MB -J document) is drawn to SVG and PNG and reported to HTML, PLOT_RUNS times
each; the median wall time, the peak RSS (GNU time) and the size of what was written
are the figures. Goal (issue 12): under a second, and a few MB.
"""

from __future__ import annotations

import json
import signal
import statistics
import time
from pathlib import Path

from .common import HOST, log
from .system import free_port, listening, reap, read_time_rss, spawn, stop
from .tools import Tool

PLOT_SECONDS = 10
PLOT_INTERVAL = "0.001"
PLOT_RUNS = 3
OUTPUTS = [("plot", "svg"), ("plot", "png"), ("report", "html")]
MAX_WALL_S = 1.0
MAX_OUTPUT_MIB = 5.0


def run_plot_case(nm: Tool, tmp: Path) -> dict:
    """The -J document of one long run at 1 ms intervals, then each output PLOT_RUNS times."""
    rec: dict = {"case": "plot", "ok": False, "outputs": []}
    port = free_port()
    sargv = ["timeout", "-k", "2", "60", nm.path, "-s", "-1", "-B", HOST, "-p", str(port)]
    cargv = ["timeout", "-k", "2", str(PLOT_SECONDS + 30), nm.path, "-c", HOST, "-p", str(port),
             "-t", str(PLOT_SECONDS), "-i", PLOT_INTERVAL, "-J"]
    rec["server_cmd"], rec["client_cmd"] = sargv, cargv
    srv = spawn(sargv, tmp / "plot.server.out", tmp / "plot.server.err")
    t0 = time.monotonic()
    while not listening(port, False) and time.monotonic() - t0 < 5:
        time.sleep(0.01)
    doc = tmp / "plot-run.json"
    cli = spawn(cargv, doc, tmp / "plot.client.err")
    if not reap(cli, time.monotonic() + PLOT_SECONDS + 35):
        stop(cli, [(signal.SIGTERM, 2.0)])
    stop(srv, [(signal.SIGTERM, 2.0)])
    try:
        intervals = len(json.loads(doc.read_text())["intervals"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        rec["error"] = f"the {PLOT_SECONDS} s -i {PLOT_INTERVAL} run gave no -J document: {e}"
        return rec
    rec["intervals"] = intervals
    rec["input_mib"] = doc.stat().st_size / 1048576
    errors = []
    for cmd, ext in OUTPUTS:
        out = tmp / f"plot-out.{ext}"
        walls, rss = [], []
        for i in range(PLOT_RUNS):
            rss_file = tmp / f"plot-{cmd}-{ext}-{i}.rss"
            argv = ["timeout", "-k", "2", "60", "/usr/bin/time", "-q", "-o", str(rss_file), "-f", "%M",
                    nm.path, cmd, str(doc), "-o", str(out)]
            t = time.monotonic()
            p = spawn(argv, tmp / "plot-cmd.out", tmp / "plot-cmd.err", rss_file=rss_file)
            done = reap(p, time.monotonic() + 65)
            walls.append(time.monotonic() - t)
            rss.append(read_time_rss(rss_file))
            if not done or p.exit_code() != 0 or not out.exists():
                err = (tmp / "plot-cmd.err").read_text(errors="replace").strip()
                errors.append(f"netmeter {cmd} -o .{ext} failed: {err[:200]}")
                break
        o = {"command": f"netmeter {cmd} RUN.json -o OUT.{ext}", "wall_s": walls,
             "median_wall_s": statistics.median(walls), "peak_rss_kib": max(rss) if rss else None,
             "output_mib": out.stat().st_size / 1048576 if out.exists() else None}
        rec["outputs"].append(o)
        log(f"  plot: {o['command']}: {o['median_wall_s']:.3f} s, {o['output_mib'] or 0:.2f} MiB")
        out.unlink(missing_ok=True)
    rec["ok"] = not errors
    if errors:
        rec["error"] = "; ".join(errors)
    return rec


def plot_goals(rec: dict) -> list[dict]:
    """One goal per output: under MAX_WALL_S and MAX_OUTPUT_MIB."""
    goals = []
    for o in rec.get("outputs", []):
        met = o["median_wall_s"] < MAX_WALL_S and (o["output_mib"] or 0) < MAX_OUTPUT_MIB
        goals.append({"goal": f"{o['command']} of {rec.get('intervals')} intervals < {MAX_WALL_S:g} s and "
                              f"< {MAX_OUTPUT_MIB:g} MiB",
                      "detail": f"{o['median_wall_s']:.3f} s (median of {len(o['wall_s'])}), "
                                f"{o['output_mib'] or 0:.2f} MiB written, peak RSS "
                                f"{(o['peak_rss_kib'] or 0) / 1024:.1f} MiB",
                      "met": bool(met) and rec.get("ok", False), "within_spread": False, "rows": [],
                      "other_load_worst_row_median": None})
    if not rec.get("outputs"):
        goals.append({"goal": "netmeter plot of 10,000 intervals < 1 s", "detail": rec.get("error", "not measured"),
                      "met": None, "within_spread": False, "rows": [], "other_load_worst_row_median": None})
    return goals


def plot_section(rec: dict, title: str) -> str:
    L = [f"## plot: {title}", ""]
    if rec.get("intervals") is None:
        L += [f"Not measured: {rec.get('error')}", ""]
        return "\n".join(L)
    L.append(f"Input: a {PLOT_SECONDS} s loopback TCP test at `-i {PLOT_INTERVAL}`: {rec['intervals']} intervals, "
             f"a {rec['input_mib']:.1f} MiB -J document. Each command {PLOT_RUNS} times; median wall time "
             "(process start to exit), peak RSS (GNU time), size of the file written.")
    L.append("")
    L.append("| command | median s | runs s | peak RSS MiB | output MiB |")
    L.append("|---|---|---|---|---|")
    for o in rec["outputs"]:
        runs = " / ".join(f"{w:.3f}" for w in o["wall_s"])
        L.append(f"| `{o['command']}` | {o['median_wall_s']:.3f} | {runs} | "
                 f"{(o['peak_rss_kib'] or 0) / 1024:.1f} | {o['output_mib'] or 0:.2f} |")
    if rec.get("error"):
        L += ["", f"Failed: {rec['error']}"]
    L.append("")
    return "\n".join(L)
