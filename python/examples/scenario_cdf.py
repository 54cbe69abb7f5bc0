"""Run a scenario and plot each flow's latency CDF with matplotlib.

    python3 python/examples/scenario_cdf.py SCENARIO.toml [OUT.png]

Each flow's report holds its latency as a histogram, a list of [value_us, count]
pairs: one-way delays with --trip-times (end.netmeter.trip_times.client_to_server),
round trips with --bounceback (end.netmeter.bounceback), frame latency with
--isochronous (end.netmeter.isochronous.receiver). One chart per kind, one line per
flow; the CDF is the histogram's running sum. docs/python.md.
"""

import sys

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt

import netmeter


def latency(report):
    """(kind, histogram) of the first latency the report holds, or None."""
    n = report.get("end", {}).get("netmeter", {})
    tt = (n.get("trip_times") or {}).get("client_to_server") or {}
    bb = n.get("bounceback") or {}
    iso = (n.get("isochronous") or {}).get("receiver") or {}
    for kind, hist in (
        ("one-way delay, client to server", tt.get("histogram_us")),
        ("bounceback round trip", bb.get("rtt_histogram_us")),
        ("frame latency", iso.get("latency_histogram_us")),
    ):
        if hist and any(count for _, count in hist):
            return kind, hist
    return None


def cdf(histogram_us):
    """(latencies in ms, cumulative fractions) from [[value_us, count], ...]."""
    xs, ys, total, seen = [], [], sum(c for _, c in histogram_us), 0
    for value_us, count in histogram_us:
        seen += count
        xs.append(value_us / 1000)
        ys.append(seen / total)
    return xs, ys


def plot(doc, out):
    """Draw the flows of a scenario document into `out`; the number of lines drawn."""
    kinds = {}
    for flow in doc["flows"]:
        found = latency(flow["report"]) if "report" in flow else None
        if found:
            kind, hist = found
            kinds.setdefault(kind, []).append((flow["name"], hist))
    if not kinds:
        return 0
    fig, axes = plt.subplots(len(kinds), 1, squeeze=False, figsize=(7, 4 * len(kinds)))
    for ax, (kind, flows) in zip(axes[:, 0], kinds.items()):
        for name, hist in flows:
            xs, ys = cdf(hist)
            ax.step(xs, ys, where="post", label=name)
        ax.set_title(f"{kind} per flow")
        ax.set_xlabel("latency (ms)")
        ax.set_ylabel("fraction of samples")
        ax.set_xscale("log")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    return sum(len(f) for f in kinds.values())


if __name__ == "__main__":
    scenario = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else "scenario-cdf.png"
    doc = netmeter.run_scenario(scenario)
    lines = plot(doc, out)
    print(f"wrote {out}: {lines} flows")
