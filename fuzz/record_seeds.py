#!/usr/bin/env python3
"""Record the fuzz targets' seed corpus from real sessions over loopback.

A recording proxy sits between a client and a server (TCP and UDP on one port, both
on 127.0.0.1): every TCP connection's bytes in each direction and every UDP datagram
are kept, then cut into the inputs each fuzz target reads (see docs/fuzzing.md). The
sessions: netmeter and iperf3 3.12/3.18/3.22 (from scripts/setup-peers.sh's
peers.env) as client and server, TCP and UDP, forward/reverse/bidir, --trip-times,
--udp-counters-64bit, --isochronous, bounceback, a refused test (--server-max-duration),
--psk-file. Each test is 1-2 s at a low rate; the whole run takes about a minute.

Usage: fuzz/record_seeds.py NETMETER_BINARY [PEERS_ENV]
Writes fuzz/corpus/<target>/<name> (existing files of the same name are replaced).
"""

import json
import os
import select
import socket
import struct
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
CAP = 64 * 1024  # bytes kept per direction of one TCP connection
DGRAMS = 64  # UDP datagrams kept per session


class Proxy:
    """TCP and UDP relay from 127.0.0.1:listen to 127.0.0.1:target, recording."""

    def __init__(self, listen, target):
        self.listen, self.target = listen, target
        self.conns = []  # [c2s bytearray, s2c bytearray] per TCP connection, in order
        self.dgrams = []  # (direction, bytes): 'c2s' or 's2c'
        self.stop = False
        self.tl = socket.socket()
        self.tl.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tl.bind(("127.0.0.1", listen))
        self.tl.listen(64)
        self.ul = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.ul.bind(("127.0.0.1", listen))
        self.threads = [threading.Thread(target=self.accept_loop, daemon=True),
                        threading.Thread(target=self.udp_loop, daemon=True)]
        for t in self.threads:
            t.start()

    def accept_loop(self):
        self.tl.settimeout(0.2)
        while not self.stop:
            try:
                c, _ = self.tl.accept()
            except socket.timeout:
                continue
            try:
                s = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                c.close()
                continue
            rec = [bytearray(), bytearray()]
            self.conns.append(rec)
            threading.Thread(target=self.pipe, args=(c, s, rec), daemon=True).start()

    def pipe(self, c, s, rec):
        socks = {c: (s, rec[0]), s: (c, rec[1])}
        deadline = time.time() + 30
        while socks and time.time() < deadline and not self.stop:
            r, _, _ = select.select(list(socks), [], [], 0.2)
            for a in r:
                b, buf = socks[a]
                try:
                    d = a.recv(65536)
                except OSError:
                    d = b""
                if not d:
                    try:
                        b.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    del socks[a]
                    continue
                if len(buf) < CAP:
                    buf.extend(d[: CAP - len(buf)])
                try:
                    b.sendall(d)
                except OSError:
                    socks.pop(a, None)
        c.close()
        s.close()

    def udp_loop(self):
        ups = {}  # client address -> socket toward the server
        back = {}
        while not self.stop:
            r, _, _ = select.select([self.ul] + list(back), [], [], 0.2)
            for a in r:
                d, addr = a.recvfrom(65536)
                if a is self.ul:
                    u = ups.get(addr)
                    if u is None:
                        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                        u.connect(("127.0.0.1", self.target))
                        ups[addr], back[u] = u, addr
                    if len(self.dgrams) < DGRAMS:
                        self.dgrams.append(("c2s", d))
                    u.send(d)
                else:
                    if len(self.dgrams) < DGRAMS:
                        self.dgrams.append(("s2c", d))
                    self.ul.sendto(d, back[a])

    def close(self):
        self.stop = True
        for t in self.threads:
            t.join(1)
        self.tl.close()
        self.ul.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def messages(buf, start):
    """Length-prefixed JSON messages found in buf from start: (offset, body)."""
    out, i = [], start
    while i + 4 <= len(buf):
        n = struct.unpack(">I", buf[i : i + 4])[0]
        body = bytes(buf[i + 4 : i + 4 + n])
        if 0 < n <= len(buf) - i - 4 and body[:1] == b"{":
            try:
                json.loads(body)
                out.append((i, body))
                i += 4 + n
                continue
            except ValueError:
                pass
        i += 1
    return out


def cut(name, p, shape):
    """The inputs of each target from one recorded session."""
    if not p.conns:
        return
    c2s, s2c = p.conns[0]
    write("control_server", name, bytes(c2s))
    write("control_client", name, bytes([shape]) + bytes(s2c))
    for _, body in messages(c2s, 37)[:1]:
        write("params", name, body)
        req = json.loads(body).get("netmeter")
        if req is not None:
            write("ext", name + "-request", b"\x00" + json.dumps(req).encode())
    for off, body in messages(s2c, 0):
        if off > 0 and s2c[off - 1] == 0x40:
            write("ext", name + "-answer", b"\x01" + body)
            # The clock probe answers follow the answer when --trip-times is on.
            after = bytes(s2c[off + 4 + len(body) : off + 4 + len(body) + 24 * 8 + 1])
            if len(after) > 24 and "trip" in name:
                write("ext", name + "-clock", b"\x02" + after[1:])
        if b"cpu_util_total" in body:
            write("results", name + "-server", bytes([shape]) + body)
    for _, body in messages(c2s, 37):
        if b"cpu_util_total" in body:
            write("results", name + "-client", bytes([shape | 128]) + body)
    # A trip-times TCP data connection: the cookie, then frames.
    for i, (d, _) in enumerate(p.conns[1:3]):
        if len(d) > 37 + 16 and d[37:41] == b"NMTT":
            write("tcp_frames", f"{name}-{i}", bytes([i * 7 + 3]) + bytes(d[37 : 37 + 4096]))
    data = [d for (w, d) in p.dgrams if len(d) >= 16]
    if data:
        flags = (1 if "64" in name else 0) | (2 if "trip" in name else 0)
        flags |= 4 | 8 if "isoch" in name else 0
        rx = struct.pack(">q", 1_790_000_000_000_000_000)
        body = b"".join(bytes([min(len(d), 255)]) + d[:255] for d in data[:32])
        write("udp_datagram", name, bytes([flags]) + rx + struct.pack(">q", -1500) + body)


def run(name, server_cmd, client_cmd, shape, outfile=None):
    sport, pport = free_port(), free_port()
    srv = subprocess.Popen(server_cmd + ["-s", "-1", "-p", str(sport)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.4)
    p = Proxy(pport, sport)
    try:
        cl = subprocess.run(client_cmd + ["-c", "127.0.0.1", "-p", str(pport)],
                            capture_output=True, timeout=20)
        if outfile and len(cl.stdout) <= 64 * 1024:  # -max_len of scripts/fuzz.sh
            write("report_load", outfile, cl.stdout)
        time.sleep(0.3)
    except subprocess.TimeoutExpired:
        print(f"{name}: client timed out", file=sys.stderr)
    finally:
        p.close()
        srv.kill()
        srv.wait()
    cut(name, p, shape)
    print(f"{name}: {len(p.conns)} connections, {len(p.dgrams)} datagrams")


def main():
    nm = [os.path.abspath(sys.argv[1])]
    env = {}
    peers = sys.argv[2] if len(sys.argv) > 2 else "/opt/netmeter-peers/peers.env"
    if os.path.exists(peers):
        for line in open(peers):
            k, _, v = line.strip().partition("=")
            env[k] = v
    t = ["-t", "1"]
    udp = ["-u", "-b", "200K", "-l", "200"]
    # shape byte of the results/control_client targets: bit 0 UDP, bits 1-2 direction
    # (1 reverse, 2 bidir), bits 3-4 streams - 1, bit 5 trip-times, bit 6 extension.
    run("nm-tcp", nm, nm + t + ["-J"], 64, "nm-tcp.json")
    run("nm-tcp-rev-p2", nm, nm + t + ["-R", "-P", "2"], 64 | 2 | 8)
    run("nm-tcp-bidir-trip", nm, nm + t + ["--bidir", "--trip-times", "-l", "1K", "-b", "1M"],
        64 | 32 | 4)
    run("nm-tcp-trip", nm, nm + t + ["--trip-times", "-l", "1K", "-b", "1M",
                                     "--json-stream"], 64 | 32, "nm-tcp-trip.jsonl")
    run("nm-udp-64-trip", nm, nm + t + udp + ["--udp-counters-64bit", "--trip-times", "-J"],
        64 | 32 | 1, "nm-udp-trip.json")
    run("nm-udp-rev", nm, nm + t + udp + ["-R", "-J"], 64 | 1 | 2, "nm-udp-rev.json")
    run("nm-udp-isoch", nm, nm + t + ["-u", "--isochronous", "30:200K,20K", "-J"],
        64 | 1, "nm-udp-isoch.json")
    run("nm-bounceback", nm, nm + t + ["--bounceback", "-J"], 64, "nm-bounceback.json")
    run("nm-refused-duration", nm + ["--server-max-duration", "5"], nm + ["-t", "10"], 64)
    key = os.path.join(CORPUS, "..", "psk-seed.key")
    with open(key, "w") as f:
        f.write("fuzz-seed-key-0123456789abcdef0123456789\n")
    os.chmod(key, 0o600)
    try:
        run("nm-psk", nm + ["--psk-file", key], nm + t + ["--psk-file", key], 64)
    finally:
        os.remove(key)
    for ver in ("312", "318", "322"):
        ip = env.get(f"NETMETER_IPERF3_{ver}")
        if not ip or not os.path.exists(ip):
            print(f"iperf3 {ver}: not installed, skipped", file=sys.stderr)
            continue
        ip = [ip]
        run(f"ip{ver}-tcp-to-nm", nm, ip + t + ["-J"], 0, f"ip{ver}-tcp.json")
        run(f"ip{ver}-udp-64-to-nm", nm, ip + t + udp + ["--udp-counters-64bit", "-J"], 1,
            f"ip{ver}-udp.json")
        run(f"nm-to-ip{ver}-tcp-rev", ip, nm + t + ["-R", "-P", "2"], 64 | 2 | 8)
        run(f"nm-to-ip{ver}-udp-bidir", ip, nm + t + udp + ["--bidir"], 64 | 1 | 4)
        if ver != "312":
            run(f"ip{ver}-json-stream", nm, ip + t + ["--json-stream"], 0,
                f"ip{ver}-tcp.jsonl")


if __name__ == "__main__":
    main()
