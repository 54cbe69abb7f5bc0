"""The command line: `python3 bench/run.py ...`."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import time
from pathlib import Path

from . import __doc__ as USAGE
from .common import ALL_CASES, log, PAUSE_BETWEEN_RUNS, REPO
from .tools import build_netmeter, discover_tools, read_peers_env
from .system import host_busy_fraction, loadavg
from .cases import make_rows, Row, run_mem_case, run_once, wait_for_quiet
from .goals import evaluate_goals, fmt_rate, PRIMARY, summarize
from .growth import run_growth_case
from .plotcase import plot_goals, run_plot_case
from .report import machine_info, write_report, write_results


def main() -> int:
    ap = argparse.ArgumentParser(description=USAGE.split("\n")[0])
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
    ap.add_argument("--baseline", default=None, metavar="NETMETER",
                    help="another netmeter binary (e.g. an older build): every netmeter row runs with it "
                         "too, in the same rotation, labelled 'base: ...'")
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
    tools = discover_tools(nm_path, peers, a.baseline)
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
    growth: list[dict] = []
    plot: dict | None = None
    rows_by_case: dict[str, list[Row]] = {}
    skipped: dict[str, list[str]] = {}
    for case in cases:
        if case == "mem":
            log("case mem")
            mem = run_mem_case(tools, tmp)
            rows_by_case["mem"] = []
            continue
        if case == "growth":
            log("case growth")
            growth = run_growth_case(tools, tmp, a.seconds, a.runs)
            rows_by_case["growth"] = []
            continue
        if case == "plot":
            log("case plot")
            plot = run_plot_case(tools["netmeter"], tmp)
            rows_by_case["plot"] = []
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
        if "netmeter-base" in tools:
            os.unlink(tools["netmeter-base"].path)
    except OSError:
        pass

    summ = summarize(runs)
    goals = evaluate_goals(summ, mem, growth) if not a.smoke else []
    if plot is not None:
        goals += plot_goals(plot)
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
        "summary": list(summ.values()), "mem": mem, "growth": growth, "plot": plot, "runs": runs,
        "skipped": skipped,
    })
    log(f"wrote {json_path}")
    if doc_path:
        write_report(doc_path, meta, rows_by_case, skipped, summ, mem, goals, runs, plot, growth)
        log(f"wrote {doc_path}")

    # Console summary.
    for (case, row), s in summ.items():
        metric = PRIMARY[case]
        m = s.get(metric)
        print(f"{case:8} {row:45} {fmt_rate(m['median'], metric) if m else 'FAILED':>10}"
              f"  ({s['ok']}/{s['runs']} ok)")
    for g in goals:
        print(f"goal {'MET    ' if g['met'] else 'NOT MET' if g['met'] is False else 'n/a    '} {g['goal']}: {g['detail']}")
    # growth: iperf3 refuses concurrent tests by design ("busy"); only netmeter's failures count.
    failed = [r for r in runs if not r.get("ok") and not r.get("discarded")] + [r for r in mem if not r.get("ok")] \
        + [r for r in growth if not r.get("ok") and (r["tool"] == "netmeter" or r["tests"] == 1)] \
        + ([plot] if plot is not None and not plot.get("ok") else [])
    print(f"bench: {len(runs)} runs, {len(failed)} failed, {meta['elapsed_s']:.0f} s")
    return 1 if failed else 0
