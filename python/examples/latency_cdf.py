"""Latency CDFs from netmeter's returned data (docs/python.md): a UDP test with
--trip-times (one-way delay) and a --bounceback test (round trip) against a netmeter
server, drawn with matplotlib into latency-cdf.png.

    python3 python/examples/latency_cdf.py [HOST]    (a `netmeter -s` on HOST, default 127.0.0.1)
"""

import sys

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt

import netmeter

SERVER = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1"


def cdf(histogram_us):
    """(delays in ms, cumulative fractions) from [[value_us, count], ...]."""
    xs, ys, total, seen = [], [], sum(c for _, c in histogram_us), 0
    for value_us, count in histogram_us:
        seen += count
        xs.append(value_us / 1000)
        ys.append(seen / total)
    return xs, ys


owd = netmeter.run(client=SERVER, udp=True, bitrate="10M", trip_times=True, time=2)
rtt = netmeter.run(client=SERVER, bounceback=True, time=2)

curves = {
    "one-way delay, client to server": owd["end"]["netmeter"]["trip_times"]["client_to_server"]["histogram_us"],
    "bounceback round trip": rtt["end"]["netmeter"]["bounceback"]["rtt_histogram_us"],
}
fig, ax = plt.subplots()
for label, hist in curves.items():
    if hist:
        xs, ys = cdf(hist)
        ax.step(xs, ys, where="post", label=label)
ax.set_xlabel("latency (ms)")
ax.set_ylabel("fraction of samples")
ax.set_xscale("log")
ax.legend()
fig.savefig("latency-cdf.png", dpi=120)
print("wrote latency-cdf.png")
