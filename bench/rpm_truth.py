#!/usr/bin/env python3
"""`netmeter rpm` against the ICMP truth, by hand, several runs (issue 25).

The bed is the one of tests/integration/rpm_truth.rs, made here with `ip` and `tc`: three
namespaces this script makes (`nmrt<pid>a`, `...r`, `...b`, deleted at the end, also on
failure), a client A and a server B joined through a router R, offloads off on every
veth, and a tbf on R's egress toward B (the upload's bottleneck; toward A with
--direction down) at --rate with 2 ms of burst and a queue of --queue-ms; with
--delay-ms, netem on R's other egress adds that much to every round trip (a kernel
without netem refuses it: the integration tests' delay line is a TUN device instead).

Each run starts `netmeter rpm -k -C cubic -d up -m SECONDS -J` in A against
`netmeter rpm-server` in B and, at the same moment, ICMP echo from A to B (this
script's own raw-socket pinger, 50 a second, no netmeter code in it). Both are reduced as the test does:
the probes and the echoes sent in the phase's last MAD (4) seconds, each kind's
trimmed mean (the fastest 95 %), 60000 over it. Printed per run and then as median
and range over the runs: ping's RPM, the foreign TCP connect's, the foreign RPM, the
self (loaded) RPM, the draft's RPM (the mean of the foreign and the self), each
against ping's, the self probe's trimmed mean in ms and the upload's goodput.

Needs root. A busy host makes the TLS and HTTP parts slower; compare figures within
one run (rpm and ping measured together), not absolute times across runs.

Run: sudo python3 bench/rpm_truth.py [--binary target/debug/netmeter] [--runs 5]
     [--seconds 12] [--rate-mbit 20] [--queue-ms 20] [--delay-ms 0] [--direction up|down]
     [-- RPM ARGS...]
"""

import argparse
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PORT = 8443
PING_EVERY = 0.02
MAD = 4


def sh(*argv):
    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30)


def make_bed(base, rate_mbit, queue_ms, delay_ms, direction):
    a, r, b = base + "a", base + "r", base + "b"
    for ns in (a, r, b):
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    sh("ip", "link", "add", "a0", "netns", a, "type", "veth", "peer", "name", "r0", "netns", r)
    sh("ip", "link", "add", "b0", "netns", b, "type", "veth", "peer", "name", "r1", "netns", r)
    for ns, dev, addr in ((a, "a0", "10.77.1.1/24"), (r, "r0", "10.77.1.2/24"),
                          (r, "r1", "10.77.2.2/24"), (b, "b0", "10.77.2.1/24")):
        sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
        sh("ip", "-n", ns, "link", "set", dev, "up")
        # One datagram a packet, as on a wire: tbf then counts and drops real frames.
        sh("ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off",
           "gro", "off")
    sh("ip", "-n", a, "route", "add", "default", "via", "10.77.1.2")
    sh("ip", "-n", b, "route", "add", "default", "via", "10.77.2.2")
    sh("ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    bps = rate_mbit * 1e6 / 8
    burst = max(int(bps * 0.002), 3028)
    limit = burst + int(bps * queue_ms / 1e3)
    # The loaded direction's bottleneck: toward B for an upload, toward A for a download.
    shaped, other = ("r1", "r0") if direction == "up" else ("r0", "r1")
    sh("tc", "-n", r, "qdisc", "replace", "dev", shaped, "root", "tbf", "rate",
       f"{int(rate_mbit * 1e6)}bit", "burst", str(burst), "limit", str(limit))
    if delay_ms > 0:
        sh("tc", "-n", r, "qdisc", "replace", "dev", other, "root", "netem", "delay",
           f"{delay_ms}ms", "limit", "100000")
    return a, r, b


def drop_bed(base):
    for s in "arb":
        subprocess.run(["ip", "netns", "del", base + s], capture_output=True, timeout=30)


def listening(ns, port):
    r = subprocess.run(["ip", "netns", "exec", ns, "ss", "-Htln", f"sport = :{port}"],
                       capture_output=True, text=True, timeout=10)
    return bool(r.stdout.strip())


def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def pinger(addr, count, out):
    """ICMP echo on a raw socket, PING_EVERY apart: one line per answer, "SENT_UNIX
    RTT_MS", written as it comes (this runs inside the client's namespace)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    ident = os.getpid() & 0xFFFF
    sent = {}
    f = open(out, "w")

    def receive():
        while True:
            data, _ = sock.recvfrom(2048)
            now = time.monotonic()
            icmp = data[(data[0] & 0x0F) * 4:]
            typ, _, _, rid, seq = struct.unpack("!BBHHH", icmp[:8])
            if typ == 0 and rid == ident and seq in sent:
                wall, mono = sent.pop(seq)
                f.write(f"{wall:.6f} {(now - mono) * 1e3:.3f}\n")
                f.flush()

    threading.Thread(target=receive, daemon=True).start()
    start = time.monotonic()
    for seq in range(count):
        due = start + seq * PING_EVERY
        time.sleep(max(0.0, due - time.monotonic()))
        head = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
        payload = b"netmeter" * 7
        pkt = struct.pack("!BBHHH", 8, 0, checksum(head + payload), ident, seq) + payload
        sent[seq] = (time.time(), time.monotonic())
        sock.sendto(pkt, (addr, 0))
    # The last replies: until every echo is answered, at most 2 s (a lost one never is).
    deadline = time.monotonic() + 2
    while sent and time.monotonic() < deadline:
        time.sleep(0.01)


def trimmed_mean(xs):
    xs = sorted(xs)
    keep = max(1, -(-len(xs) * 95 // 100))
    return sum(xs[:keep]) / keep


def one_run(a, binary, seconds, direction, extra, tmp, i):
    count = int((seconds + 8) / PING_EVERY)
    ping_path = os.path.join(tmp, f"ping{i}.txt")
    err = open(os.path.join(tmp, f"rpm{i}.err"), "w")
    argv = ["ip", "netns", "exec", a, binary, "rpm", "-k", "-C", "cubic", "-d", direction,
            "-m", str(seconds), "-J", *extra, f"https://10.77.2.1:{PORT}/.well-known/nq"]
    t0 = time.time()
    ping = subprocess.Popen(["ip", "netns", "exec", a, sys.executable,
                             os.path.abspath(__file__), "--pinger", "10.77.2.1", str(count),
                             ping_path])
    rpm = subprocess.run(argv, capture_output=False, stdout=subprocess.PIPE, stderr=err,
                         text=True, timeout=seconds + 90)
    ping.terminate()
    ping.wait(timeout=10)
    err.close()
    if rpm.returncode != 0:
        raise SystemExit(f"run {i}: netmeter rpm failed, see {err.name}")
    doc = json.loads(rpm.stdout)
    phase = doc["phases"][0]
    end_s = phase["end_s"]
    lo = end_s - MAD
    echoes = []
    for line in open(ping_path):
        wall, rtt = (float(x) for x in line.split())
        if lo <= wall - t0 <= end_s:
            echoes.append(rtt)
    win = [p for p in phase["probes"] if p.get("start_s", -1) >= lo]
    tcp = [p["tcp_ms"] for p in win if p.get("kind") == "foreign"]
    selfs = [p["http_ms"] for p in win if p.get("kind") == "self"]
    s = doc["summary"]
    ping_rpm = 60000 / trimmed_mean(echoes)
    return {
        "ping_rpm": ping_rpm,
        "tcp_rpm": 60000 / trimmed_mean(tcp),
        "foreign_rpm": s["foreign_rpm"],
        "self_rpm": s["self_rpm"],
        "rpm": s["rpm"],
        "self_ms": trimmed_mean(selfs),
        "mbit": s["uplink_bps" if direction == "up" else "downlink_bps"] / 1e6,
        "echoes": len(echoes),
        "conns": phase["directions"][0]["connections_opened"],
    }


def pct(x, truth):
    return f"{(x / truth - 1) * 100:+.1f} %"


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--pinger":
        return pinger(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "target/debug/netmeter"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=12)
    ap.add_argument("--rate-mbit", type=float, default=20)
    ap.add_argument("--queue-ms", type=float, default=20)
    ap.add_argument("--delay-ms", type=float, default=0)
    ap.add_argument("--direction", choices=("up", "down"), default="up")
    ap.add_argument("--server-arg", action="append", default=[],
                    help="one more `netmeter rpm-server` option (repeat)")
    ap.add_argument("rpm_args", nargs="*", help="more `netmeter rpm` options (after --)")
    args = ap.parse_args()
    base = f"nmrt{os.getpid()}"
    tmp = tempfile.mkdtemp(prefix="nmrt-")
    srv = None
    try:
        a, _, b = make_bed(base, args.rate_mbit, args.queue_ms, args.delay_ms,
                            args.direction)
        srv_err = open(os.path.join(tmp, "server.err"), "w")
        # The download's load is the server's sending: cubic too, as the client's -C.
        srv = subprocess.Popen(["ip", "netns", "exec", b, args.binary, "rpm-server", "-p",
                                str(PORT), "--large-size", "1G", "-C", "cubic",
                                *args.server_arg],
                               stdout=subprocess.DEVNULL, stderr=srv_err)
        deadline = time.time() + 20
        while not listening(b, PORT):
            if time.time() > deadline or srv.poll() is not None:
                raise SystemExit("rpm-server did not start")
            time.sleep(0.1)
        print(f"load average {os.getloadavg()[0]:.1f}; {args.direction}, {args.rate_mbit} Mbit/s, "
              f"{args.queue_ms} ms queue, {args.delay_ms} ms delay; files in {tmp}")
        runs = []
        for i in range(args.runs):
            f = one_run(a, args.binary, args.seconds, args.direction, args.rpm_args, tmp, i)
            runs.append(f)
            print(f"run {i}: ping {f['ping_rpm']:.0f} RPM ({f['echoes']} echoes); TCP connect "
                  f"{f['tcp_rpm']:.0f} ({pct(f['tcp_rpm'], f['ping_rpm'])}); foreign "
                  f"{f['foreign_rpm']:.0f} ({pct(f['foreign_rpm'], f['ping_rpm'])}); self "
                  f"{f['self_rpm']:.0f} ({f['self_ms']:.1f} ms); draft "
                  f"{f['rpm']:.0f} ({pct(f['rpm'], f['ping_rpm'])}); goodput {f['mbit']:.1f} "
                  f"Mbit/s, {f['conns']} connections", flush=True)
        print(f"over {len(runs)} runs, median (range), each against its own run's ping:")
        for k in ("tcp_rpm", "foreign_rpm", "self_rpm", "rpm"):
            r = [x[k] / x["ping_rpm"] - 1 for x in runs]
            print(f"  {k}: {statistics.median(r) * 100:+.1f} % "
                  f"({min(r) * 100:+.1f} to {max(r) * 100:+.1f} %)")
        for k in ("ping_rpm", "self_ms", "mbit"):
            r = [x[k] for x in runs]
            print(f"  {k}: {statistics.median(r):.1f} ({min(r):.1f} to {max(r):.1f})")
    finally:
        if srv is not None:
            srv.terminate()
            try:
                srv.wait(timeout=10)
            except subprocess.TimeoutExpired:
                srv.kill()
        drop_bed(base)


if __name__ == "__main__":
    sys.exit(main())
