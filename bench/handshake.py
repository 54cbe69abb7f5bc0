#!/usr/bin/env python3
"""What the server's handshake costs: a -P 128 test's setup and teardown time, and the
--connect-only connection rate, for two netmeter servers in the same run.

Issue 20 asked that serving handshakes in the accept loop (src/engine/server/door.rs),
instead of a thread per connection, cost nothing measurable. This script runs, on
127.0.0.1, alternating between the two servers (BASE, e.g. a build of b145838, and NEW,
this tree's release build), --runs times each:

  NEW -c 127.0.0.1 -P 128 -t 1 -J      (the client is always NEW: the door is the server's)
      overhead = the client's wall time - the test's own seconds (end.sum_sent.seconds):
      the 129 connections' handshakes, the stream setup, the results exchange, teardown
  X -c 127.0.0.1 --connect-only -t 2 -J  (client and server the same build X)
      connections per second, from end.netmeter.connect_only

and prints medians with ranges and the NEW/BASE ratio. Loopback swings run to run for
every build, so only the ratio in one run means anything.

Run: python3 bench/handshake.py --base OLD/netmeter [--new target/release/netmeter] [--runs 5]

Measured (2026-11-26, release builds, idle 2-CPU VM, 5 runs each, alternating; BASE b145838,
a thread per connection; NEW the door): -P 128 setup+teardown 0.193 s (0.140-0.221) against
0.175 s (0.121-0.190), NEW/BASE 0.91x; --connect-only 9290/s (6672-10163) against 9432/s
(7643-9993), 1.02x: no cost measurable against loopback's own spread.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(binary, port):
    cmd = [binary, "-s", "-p", str(port)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Evidence, not a sleep: the listening banner.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if "listening" in line.lower():
            # Keep reading what it prints, so its pipe never fills and blocks it.
            threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()
            return p
        if not line and p.poll() is not None:
            break
    p.kill()
    sys.exit(f"server {binary} did not start")


def p128_overhead(client, port):
    t0 = time.monotonic()
    r = subprocess.run([client, "-c", "127.0.0.1", "-p", str(port), "-P", "128", "-t", "1", "-J"],
                       capture_output=True, text=True, timeout=60)
    wall = time.monotonic() - t0
    doc = json.loads(r.stdout)
    if doc.get("error"):
        sys.exit(f"-P 128 test failed: {doc['error']}")
    return wall - doc["end"]["sum_sent"]["seconds"]


def crr_rate(binary, port):
    r = subprocess.run([binary, "-c", "127.0.0.1", "-p", str(port), "--connect-only", "-t", "2", "-J"],
                       capture_output=True, text=True, timeout=60)
    doc = json.loads(r.stdout)
    if doc.get("error"):
        sys.exit(f"--connect-only test failed: {doc['error']}")
    return doc["end"]["netmeter"]["connect_only"]["connections_per_second"]


def summary(xs):
    return f"{statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--new", default=os.path.join(ROOT, "target/release/netmeter"))
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    builds = {"base": a.base, "new": a.new}
    servers = {}
    try:
        for name, b in builds.items():
            port = free_port()
            servers[name] = (start_server(b, port), port)
        over = {n: [] for n in builds}
        rate = {n: [] for n in builds}
        for i in range(a.runs):
            order = list(builds) if i % 2 == 0 else list(reversed(builds))
            for n in order:
                over[n].append(p128_overhead(a.new, servers[n][1]))
                rate[n].append(crr_rate(builds[n], servers[n][1]))
        print(f"-P 128 -t 1 setup+teardown, s (client {a.new}), median (range) of {a.runs}:")
        for n in builds:
            print(f"  {n:4} server {builds[n]}: {summary(over[n])}")
        print(f"  new/base: {statistics.median(over['new']) / statistics.median(over['base']):.2f}x")
        print(f"--connect-only -t 2, connections/s, median (range) of {a.runs}:")
        for n in builds:
            print(f"  {n:4} {builds[n]}: {summary(rate[n])}")
        print(f"  new/base: {statistics.median(rate['new']) / statistics.median(rate['base']):.2f}x")
    finally:
        for p, _ in servers.values():
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    main()
