#!/usr/bin/env python3
"""What `netmeter rpm` costs its own host: the client's CPU at about 1 Gbit/s of load,
next to the same load from `netmeter -c ... -P 4` (issue 25).

Both run on loopback inside a network namespace this script makes (`nmrpmcpu<pid>`,
deleted at the end, also on failure), whose `lo` has a tbf at --rate (default 1 Gbit/s),
so that both clients move the same load whatever they could do unshaped, and the host's
own loopback is never touched. In that namespace `netmeter rpm-server` and `netmeter -s`
listen on 127.0.0.1; --runs times, alternating which goes first:

  netmeter rpm -k -d DIR -m SECONDS -J https://127.0.0.1:P/.well-known/nq
      (HTTP/2 over TLS, one load connection more each second, up to 16, probes)
  netmeter -c 127.0.0.1 -p Q -P 4 -t SECONDS -J [-R for DIR down]
      (four plain TCP streams, the same direction)

The client's CPU is user + system time from wait4() on its process (`ip netns exec`
execs the program, so the PID is netmeter's), divided by the run's wall time: the share
of one CPU it kept busy. The rate is what the client reported (rpm: the phase's bytes
over its length; -P 4: end.sum_received). Printed: medians and ranges per tool, and
CPU seconds per Gbit moved (the whole run's CPU, its idle probes and start included,
over the bits the load moved: a fair comparison even where one falls short of the
rate, and the ramp of one connection a second is part of what rpm costs).

Needs root (a namespace, tc). Figures mean something only on a quiet host: run it where
nothing else compiles, not under `nice` beside other work (the load average at the
start and end is printed so a reader can tell).

Run: sudo python3 bench/rpm_cpu.py [--binary target/release/netmeter] [--runs 5]
     [--seconds 10] [--rate 1gbit] [--direction down|up]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RPM_PORT = 8443
NM_PORT = 5201


def sh(*argv):
    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30)


def make_ns(name, rate):
    sh("ip", "netns", "add", name)
    sh("ip", "-n", name, "link", "set", "lo", "up")
    # Loopback sends 64 KiB GSO packets: the bucket must hold several, or tbf drops them.
    sh("tc", "-n", name, "qdisc", "replace", "dev", "lo", "root", "tbf",
       "rate", rate, "burst", "1mb", "latency", "20ms")


def listening(ns, port):
    r = subprocess.run(["ip", "netns", "exec", ns, "ss", "-Htln", f"sport = :{port}"],
                       capture_output=True, text=True, timeout=10)
    return bool(r.stdout.strip())


def start_server(ns, argv, port, tmp, name):
    out = open(os.path.join(tmp, f"{name}.out"), "w")
    p = subprocess.Popen(["ip", "netns", "exec", ns] + argv, stdout=out, stderr=subprocess.STDOUT)
    # Evidence, not a sleep: the listening socket, within a bound.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if listening(ns, port):
            return p
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.kill()
    p.wait()
    out.close()
    sys.exit(f"{name} did not start listening on {port}: {open(out.name).read()[-500:]}")


def run_client(ns, argv, limit, tmp, name):
    """Runs argv in ns; returns (stdout, wall s, CPU s) with the CPU from wait4()."""
    path = os.path.join(tmp, f"{name}.json")
    with open(path, "w") as out, open(path + ".err", "w") as err:
        t0 = time.monotonic()
        p = subprocess.Popen(["ip", "netns", "exec", ns] + argv, stdout=out, stderr=err)
        deadline = t0 + limit
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid == p.pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                os.wait4(p.pid, 0)
                sys.exit(f"{name} did not end within {limit} s")
            time.sleep(0.02)
        wall = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({p.returncode}): {open(path + '.err').read()[-500:]}")
    return open(path).read(), wall, ru.ru_utime + ru.ru_stime


def rpm_run(a, ns, tmp, i):
    url = f"https://127.0.0.1:{RPM_PORT}/.well-known/nq"
    argv = [a.binary, "rpm", "-k", "-d", a.direction, "-m", str(a.seconds), "-J", *a.rpm_args,
            url]
    out, wall, cpu = run_client(ns, argv, a.seconds + 60, tmp, f"rpm{i}")
    doc = json.loads(out)
    ph = doc["phases"][0]
    secs = ph["end_s"] - ph["start_s"]
    moved = ph["directions"][0]["bytes"] * 8 / 1e9
    return {"gbit": moved / secs, "gbits": moved, "cpu": cpu, "wall": wall,
            "conns": ph["directions"][0]["connections_opened"]}


def p4_run(a, ns, tmp, i):
    argv = [a.binary, "-c", "127.0.0.1", "-p", str(NM_PORT), "-P", "4", "-t", str(a.seconds), "-J"]
    if a.direction == "down":
        argv.append("-R")
    out, wall, cpu = run_client(ns, argv, a.seconds + 60, tmp, f"p4_{i}")
    doc = json.loads(out)
    if doc.get("error"):
        sys.exit(f"-P 4 run failed: {doc['error']}")
    got = doc["end"]["sum_received"]
    return {"gbit": got["bits_per_second"] / 1e9, "gbits": got["bytes"] * 8 / 1e9, "cpu": cpu,
            "wall": wall, "conns": 4}


def spread(xs, fmt="{:.2f}"):
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}-{fmt.format(max(xs))})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "target/release/netmeter"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--direction", choices=["down", "up"], default="down")
    ap.add_argument("rpm_args", nargs="*", help="more `netmeter rpm` options (after --)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root: it makes a network namespace and a tbf on its loopback")
    a.binary = os.path.abspath(a.binary)
    ns = f"nmrpmcpu{os.getpid()}"
    servers = []
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="rpmcpu") as tmp:
        try:
            make_ns(ns, a.rate)
            servers.append(start_server(ns, [a.binary, "rpm-server", "-B", "127.0.0.1", "-p", str(RPM_PORT)],
                                        RPM_PORT, tmp, "rpm-server"))
            servers.append(start_server(ns, [a.binary, "-s", "-B", "127.0.0.1", "-p", str(NM_PORT)],
                                        NM_PORT, tmp, "server"))
            res = {"rpm": [], "p4": []}
            for i in range(a.runs):
                order = ["rpm", "p4"] if i % 2 == 0 else ["p4", "rpm"]
                for t in order:
                    r = (rpm_run if t == "rpm" else p4_run)(a, ns, tmp, i)
                    res[t].append(r)
                    print(f"run {i + 1} {t:3}: {r['gbit']:.3f} Gbit/s, client CPU {r['cpu']:.2f} s "
                          f"in {r['wall']:.1f} s ({100 * r['cpu'] / r['wall']:.0f} % of a CPU), "
                          f"{r['conns']} connections", flush=True)
        finally:
            for p in servers:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
    load1 = os.getloadavg()[0]
    print(f"\n{a.binary}, -d {a.direction}, {a.seconds} s, tbf {a.rate} on the namespace's lo, "
          f"{a.runs} runs each alternating; load average {load0:.1f} at the start, {load1:.1f} at the end")
    print(f"{'client':28} {'Gbit/s':20} {'CPU % of one':20} {'CPU s per Gbit':20}")
    for t, label in (("rpm", "netmeter rpm (HTTP/2, TLS)"), ("p4", "netmeter -c -P 4 (TCP)")):
        rs = res[t]
        print(f"{label:28} {spread([r['gbit'] for r in rs], '{:.3f}'):20} "
              f"{spread([100 * r['cpu'] / r['wall'] for r in rs], '{:.0f}'):20} "
              f"{spread([r['cpu'] / r['gbits'] for r in rs], '{:.3f}'):20}")


if __name__ == "__main__":
    main()
