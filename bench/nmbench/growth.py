"""The growth case: how cost grows with streams (-P 1/8/32/128) and with concurrent tests on
one server (1/4/16; netmeter `--max-tests`), netmeter and the newest iperf3 side by side.

Per run: one server (not `-1`), sampled every 20 ms from /proc/PID/status while the test runs
(peak VmRSS and Threads), client(s) with `-J`; CPU seconds of server and clients from wait4()
(exact, like every other case); throughput = the clients' `end.sum_received` added up. The
tools alternate within each repetition (the order rotates), like the other cases."""

from __future__ import annotations

import functools
import signal
import statistics
import subprocess
import time
from pathlib import Path

from .cases import wrap
from .common import HOST, log, PAUSE_BETWEEN_RUNS
from .parsers import parse_iperf3_json
from .common import NCPU
from .system import child_pid, cpu_times, free_port, listening, proc_status_kib, reap, spawn, stop
from .tools import Tool

STREAMS = (1, 8, 32, 128)
TESTS = (1, 4, 16)


def growth_tools(tools: dict[str, Tool]) -> list[Tool]:
    """netmeter (and its `--baseline` build, if given) and the newest iperf3 installed."""
    out = [tools["netmeter"]] + [tools[k] for k in ("netmeter-base",) if k in tools]
    for k in ("iperf3-3.22", "iperf3-3.18", "iperf3-3.12"):
        if k in tools:
            out.append(tools[k])
            break
    return out


@functools.lru_cache(maxsize=None)
def has_per_source_cap(path: str) -> bool:
    """Whether this netmeter caps tests per source (`--max-tests-per-source`, default
    `--max-tests` minus 1): every client here comes from one address, so it must be
    lifted. A `--baseline` build from before the flag has no cap."""
    try:
        out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--max-tests-per-source" in out.stdout


def run_point(t: Tool, streams: int, tests: int, seconds: int, tmp: Path, tag: str) -> dict:
    """One server, `tests` concurrent clients of `streams` streams each."""
    port = free_port()
    extra = ["--max-tests", str(tests)] if t.kind == "netmeter" and tests > 1 else []
    if extra and has_per_source_cap(str(t.path)):
        extra += ["--max-tests-per-source", str(tests)]
    sargv = wrap([t.path, "-s", "-B", HOST, "-p", str(port)] + extra, None, seconds + 40, None)
    cargv = wrap([t.path, "-c", HOST, "-p", str(port), "-t", str(seconds), "-P", str(streams), "-J"],
                 None, seconds + 20, None)
    rec = {"case": "growth", "tool": t.key, "label": t.label, "streams": streams, "tests": tests,
           "port": port, "server_cmd": sargv, "client_cmd": cargv, "ok": False}
    srv = spawn(sargv, tmp / f"{tag}.server.out", tmp / f"{tag}.server.err")
    t0 = time.monotonic()
    while not listening(port, False) and time.monotonic() - t0 < 5:
        time.sleep(0.01)
    time.sleep(0.2)
    real = child_pid(srv.pid)
    if real is None:
        stop(srv, [(signal.SIGTERM, 2.0)])
        rec["error"] = "server did not start"
        return rec
    rec["idle_rss_kib"] = proc_status_kib(real, "VmRSS")
    rec["idle_threads"] = proc_status_kib(real, "Threads")
    c0, w0 = cpu_times(), time.monotonic()
    clis = [spawn(cargv, tmp / f"{tag}.c{i}.out", tmp / f"{tag}.c{i}.err") for i in range(tests)]
    peak_rss, peak_thr = rec["idle_rss_kib"] or 0, rec["idle_threads"] or 0
    deadline = time.monotonic() + seconds + 20
    while time.monotonic() < deadline:
        peak_rss = max(peak_rss, proc_status_kib(real, "VmRSS") or 0)
        peak_thr = max(peak_thr, proc_status_kib(real, "Threads") or 0)
        if all(reap(c, time.monotonic()) for c in clis):
            break
        time.sleep(0.02)
    for c in clis:
        if c.status is None:
            stop(c, [(signal.SIGTERM, 2.0)])
    c1, wall = cpu_times(), time.monotonic() - w0
    stop(srv, [(signal.SIGINT, 3.0), (signal.SIGTERM, 2.0)])
    mine = srv.cpu + sum(c.cpu for c in clis)  # the server's CPU includes its idle start: ~0
    rec["other_busy_frac"] = round(max(0.0, (c1["busy"] - c0["busy"]) - (c1["irq"] - c0["irq"]) - mine)
                                   / (wall * NCPU), 3)
    rec.update(peak_rss_kib=peak_rss, peak_threads=peak_thr, server_cpu_s=round(srv.cpu, 4),
               client_cpu_s=round(sum(c.cpu for c in clis), 4))
    gbit, secs, ok, errors = 0.0, [], 0, []
    for c in clis:
        try:
            m = parse_iperf3_json(c.out.read_text(errors="replace"))
            gbit += m["rx_bytes"] * 8 / 1e9
            secs.append(m["seconds"])
            ok += 1
        except ValueError as e:
            errors.append(str(e)[:120])
    rec["tests_ok"] = ok
    if errors:
        rec["errors"] = sorted(set(errors))
    if ok:
        rec["gbit_moved"] = round(gbit, 4)
        rec["rx_gbps"] = gbit / max(secs)
        if gbit > 0:
            rec["cpu_s_per_gbit"] = (srv.cpu + sum(c.cpu for c in clis)) / gbit
        rec["ok"] = ok == tests
        if not rec["ok"]:
            rec["error"] = f"{tests - ok} of {tests} tests failed: {'; '.join(rec['errors'])}"
    else:
        rec["error"] = "; ".join(errors) or "no client output"
    return rec


def run_growth_case(tools: dict[str, Tool], tmp: Path, seconds: int, runs: int) -> list[dict]:
    points = [(n, 1) for n in STREAMS] + [(1, k) for k in TESTS if k > 1]
    gt = growth_tools(tools)
    out = []
    for rep in range(runs):
        for streams, tests in points:
            order = gt[rep % len(gt):] + gt[:rep % len(gt)]
            for t in order:
                rec = run_point(t, streams, tests, seconds, tmp, f"growth-{t.key}-{streams}-{tests}-{rep}")
                rec["rep"] = rep
                out.append(rec)
                shown = f"{rec['rx_gbps']:.2f} Gbit/s" if rec.get("rx_gbps") else "FAILED"
                log(f"  growth rep {rep} {t.label} -P {streams} x {tests} tests: {shown}, "
                    f"server peak {(rec.get('peak_rss_kib') or 0) / 1024:.1f} MiB, {rec.get('peak_threads')} threads"
                    + (f" ({rec['error']})" if rec.get("error") else ""))
                time.sleep(PAUSE_BETWEEN_RUNS)
    return out


def summarize_growth(recs: list[dict]) -> list[dict]:
    """Per (tool, streams, tests): medians and ranges over the repetitions."""
    keys = []
    for r in recs:
        k = (r["tool"], r["label"], r["streams"], r["tests"])
        if k not in keys:
            keys.append(k)
    out = []
    for tool, label, streams, tests in keys:
        rs = [r for r in recs if (r["tool"], r["streams"], r["tests"]) == (tool, streams, tests)]
        s = {"tool": tool, "label": label, "streams": streams, "tests": tests, "runs": len(rs),
             "ok": sum(1 for r in rs if r.get("ok")),
             "tests_ok": [r.get("tests_ok", 0) for r in rs], "errors": sorted({e for r in rs for e in r.get("errors", [])})}
        for f in ("rx_gbps", "cpu_s_per_gbit", "peak_rss_kib", "peak_threads", "idle_rss_kib", "other_busy_frac"):
            v = [r[f] for r in rs if r.get(f) is not None]
            if v:
                s[f] = {"median": statistics.median(v), "min": min(v), "max": max(v)}
        out.append(s)
    return out


def per_stream_kib(summ: list[dict], tool: str) -> float | None:
    """Server peak memory per extra stream: (peak at -P 128 - peak at -P 1) / 127, medians."""
    one = next((s for s in summ if s["tool"] == tool and s["streams"] == 1 and s["tests"] == 1), None)
    big = next((s for s in summ if s["tool"] == tool and s["streams"] == max(STREAMS) and s["tests"] == 1), None)
    if not one or not big or "peak_rss_kib" not in one or "peak_rss_kib" not in big:
        return None
    return (big["peak_rss_kib"]["median"] - one["peak_rss_kib"]["median"]) / (max(STREAMS) - 1)


def growth_section(recs: list[dict], title: str) -> str:
    summ = summarize_growth(recs)
    L = [f"## growth: {title}", ""]

    def rng(s, f, fmt):
        v = s.get(f)
        return ("–", "–") if not v else (fmt(v["median"]), f"{fmt(v['min'])}–{fmt(v['max'])}")
    body = []
    for s in summ:
        g, gr = rng(s, "rx_gbps", lambda x: f"{x:.2f}")
        c, _ = rng(s, "cpu_s_per_gbit", lambda x: f"{x:.3f}")
        m, mr = rng(s, "peak_rss_kib", lambda x: f"{x / 1024:.1f}")
        th, _ = rng(s, "peak_threads", lambda x: f"{x:.0f}")
        ob, _ = rng(s, "other_busy_frac", lambda x: f"{x:.0%}")
        what = f"-P {s['streams']}" if s["tests"] == 1 else f"{s['tests']} tests × 1 stream"
        oks = f"{s['ok']}/{s['runs']}"
        if s["tests"] > 1:
            oks += f" (tests ok per run: {', '.join(str(x) for x in s['tests_ok'])})"
        body.append([s["label"], what, g, gr, c, m, mr, th, ob, oks])
    L.append(md_table(["Tool", "load", "received Gbit/s (sum) median", "min–max", "CPU s/Gbit",
                       "server peak RSS MiB", "min–max", "server threads (peak)", "other load", "runs ok"], body))
    L.append("")
    tools = []
    for s in summ:
        if s["tool"] not in tools:
            tools.append(s["tool"])
    per = {t: per_stream_kib(summ, t) for t in tools}
    labels = {s["tool"]: s["label"] for s in summ}
    L.append("Server memory per extra stream ((peak RSS at -P 128 − peak at -P 1) / 127, medians): "
             + "; ".join(f"{labels[t]} {v:.0f} KiB" if v is not None else f"{labels[t]} –" for t, v in per.items())
             + ".")
    errs = sorted({e for s in summ for e in s["errors"]})
    if errs:
        L.append("")
        L.append("Client errors seen: " + "; ".join(f"`{e}`" for e in errs))
    L.append("")
    L.append("Per run: a fresh server (no `-1`; netmeter with `--max-tests K` for K concurrent tests), "
             "VmRSS and Threads of the server read from /proc/PID/status every 20 ms while the clients "
             "run (peak kept), CPU of server and clients from wait4(). Commands (`$N` streams):")
    L.append("")
    L.append("```sh")
    seen = set()
    for r in recs:
        if r["tool"] in seen:
            continue
        seen.add(r["tool"])
        show = [("target/release/netmeter" if "bench-bin" in x else x) for x in r["server_cmd"][4:]]
        L.append(" ".join(show).replace(f"-p {r['port']}", "-p $PORT") + " &")
        c = ["target/release/netmeter" if "bench-bin" in x else x for x in r["client_cmd"][4:]]
        L.append(" ".join(c).replace(f"-p {r['port']}", "-p $PORT").replace(f"-P {r['streams']}", "-P $N"))
    L.append("# K concurrent tests: netmeter -s --max-tests K, then K clients at once (iperf3 serves one at a time)")
    L.append("```")
    L.append("")
    return "\n".join(L)


def md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)
