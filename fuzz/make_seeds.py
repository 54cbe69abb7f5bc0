#!/usr/bin/env python3
"""Seeds written by hand (docs/fuzzing.md), beside the recorded ones of record_seeds.py:
inputs no recorded session has, and inputs at or just over the size caps.

- auth_credential: iperf3 3.22's OAEP and 3.12's PKCS#1 tokens (src/auth/testdata) with
  the users line and the time that admit them; credential texts to seal; a token over
  auth::MAX_TOKEN_LEN; a token of the wrong length; a users file of odd lines.
- compare_runs: --repeat documents of netmeter's -J fixtures (one with a failed run, one
  of mixed tests, one near the 64 KiB that scripts/fuzz.sh lets an input have), single
  results of both tools, --json-stream lines, a sweep document.
- control_server: a third-party request (its PSK proof after it), one with more options
  than wire::ext::MAX_THIRD_PARTY_ARGS, parameters one byte over wire::MAX_PARAMS_LEN,
  and a results length one over wire::MAX_RESULTS_LEN after TEST_END.
- iperf2: hostile iperf 2 header shapes beside the captured real ones (cap-*): a
  255-byte header with 2^31-1 threads, rates and a length at their caps, each field a
  real client never sends (an unknown flag bit, version 7, port 0, a wide TOS, uRate's
  low byte, a start time's microseconds at a million), a UDP datagram cut before its
  version (-l 40), a small trip-times header with its padding set, a bounceback
  request carrying server time stamps, and one with a 4 GiB size.

Run from the repository root: python3 fuzz/make_seeds.py (rewrites these seeds only).
"""

import hashlib
import json
import os
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")
TESTDATA = os.path.join(ROOT, "src", "report", "testdata")

MAX_TOKEN_LEN = 2732  # src/auth/mod.rs
MAX_PARAMS_LEN = 8192  # src/wire.rs
MAX_RESULTS_LEN = 16 * 1024 * 1024  # src/wire.rs
MAX_THIRD_PARTY_ARGS = 64  # src/wire/ext.rs
TEST_END = 0x04


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def fixture(name):
    with open(os.path.join(TESTDATA, name)) as f:
        return f.read()


def auth_seed(flags, now, users, body):
    users = users.encode()
    assert len(users) < 256
    return bytes([flags]) + struct.pack("<q", now) + bytes([len(users)]) + users + body


def auth_credential():
    def token(name):
        with open(os.path.join(ROOT, "src", "auth", "testdata", name)) as f:
            return f.read().strip().encode()

    alice = "alice," + hashlib.sha256(b"{alice}secret").hexdigest() + "\n"
    write("auth_credential", "iperf3-322-oaep", auth_seed(0, 1795392768, alice, token("token-iperf3-3.22-oaep.txt")))
    write("auth_credential", "iperf3-312-pkcs1", auth_seed(1, 1795392776, alice, token("token-iperf3-3.12-pkcs1.txt")))
    cred = b"user: alice\npwd:  secret\nts:   1795392768"
    write("auth_credential", "sealed-oaep", auth_seed(2, 1795392768, alice, cred))
    write("auth_credential", "sealed-pkcs1-skewed", auth_seed(3, 1795392768 + 11, alice, cred))
    write("auth_credential", "sealed-odd-spacing", auth_seed(2, 7, "#c\n,,bob,,x,y\r\nalice,\n", b"user:\tbob \x0bpwd: x\n ts:+7 tail"))
    write("auth_credential", "token-over-cap", auth_seed(0, 0, alice, b"A" * (MAX_TOKEN_LEN + 1)))
    write("auth_credential", "token-wrong-length", auth_seed(0, 0, alice, b"QUFBQQ=="))


def compare_runs():
    tcp = json.loads(fixture("tcp.json"))
    udp = json.loads(fixture("udp_bidir.json"))

    def repeat(runs):
        doc = {"netmeter_repeat": {"runs": len(runs)}, "runs": runs, "statistics": []}
        return json.dumps(doc).encode()

    write("compare_runs", "repeat-3", b"\x00" + repeat([tcp] * 3))
    write("compare_runs", "repeat-3-keep", b"\x01" + repeat([tcp] * 3))
    failed = dict(tcp, error="the server has terminated")
    write("compare_runs", "repeat-failed-run", b"\x00" + repeat([tcp, failed]))
    write("compare_runs", "repeat-mixed", b"\x00" + repeat([tcp, udp]))
    big = [tcp]
    while len(repeat(big + [tcp])) < 63 * 1024:
        big.append(tcp)
    write("compare_runs", "repeat-near-64k", b"\x00" + repeat(big))
    for name in ["tcp.json", "iperf3_322_tcp.json", "iperf3_312_tcp_p2.json", "tcp.jsonl"]:
        write("compare_runs", "single-" + name, b"\x00" + fixture(name).encode())
    sweep = {
        "netmeter_sweep": {
            "swept": [{"flag": "-P", "values": ["1", "2"]}],
            "grid": 2,
            "completed": 2,
            "ended": "all points",
        },
        "points": [
            {
                "settings": {"-P": p},
                "runs": [tcp],
                "statistics": [
                    {"label": "Receiver throughput", "unit": "bits/s", "mean": m, "ci": None}
                ],
            }
            for p, m in [("1", 4e8), ("2", 7e8)]
        ],
    }
    write("compare_runs", "sweep", b"\x00" + json.dumps(sweep).encode())


def framed(obj):
    body = json.dumps(obj, separators=(",", ":")).encode()
    return struct.pack(">I", len(body)) + body


def control_server():
    with open(os.path.join(CORPUS, "control_server", "nm-psk"), "rb") as f:
        seed = f.read()
    cookie = seed[:37]
    (n,) = struct.unpack(">I", seed[37:41])
    params = json.loads(seed[41 : 41 + n])
    request = {"target": "192.0.2.7", "port": 5201, "args": ["-t", "2", "-R", "-P", "2", "-b", "10M"]}
    params["netmeter"]["third_party"] = request
    proof = {"client_proof": "00" * 32}
    write("control_server", "third-party-request", cookie + framed(params) + framed(proof))
    params["netmeter"]["third_party"] = dict(request, args=["-V"] * (MAX_THIRD_PARTY_ARGS + 1))
    write("control_server", "third-party-too-many-args", cookie + framed(params) + framed(proof))
    over = b"{" + b" " * (MAX_PARAMS_LEN - 1) + b"}"
    write("control_server", "params-over-cap", cookie + struct.pack(">I", len(over)) + over)
    del params["netmeter"]
    write(
        "control_server",
        "results-over-cap",
        cookie + framed(params) + bytes([TEST_END]) + struct.pack(">I", MAX_RESULTS_LEN + 1) + b"{}",
    )


def iperf2_header(flags=0x40010078, length=60, udp=False):
    """A header as iperf 2.2.1 writes it (wire::iperf2_plausible's facts); `udp` puts
    a datagram id (sequence 1) before it."""
    h = bytearray(length)
    struct.pack_into(">IIIIIi", h, 0, flags, 1, 5001, 0, 0, -1000)
    struct.pack_into(">II", h, 36, 0x00020002, 0x00010001)
    if udp:
        return struct.pack(">IIII", 1, 0x6B088500, 1, 0) + bytes(h)
    return bytes(h)


def iperf2():
    def field(at, value, base=None):
        h = bytearray(base or iperf2_header())
        struct.pack_into(">I", h, at, value)
        return bytes(h)

    absurd = field(4, 0x7FFFFFFF, iperf2_header(0x400101FE, 255))
    write("iperf2", "hostile-threads-len255", absurd)
    fast = field(48, 0xFFFFFFFF, field(52, 0xFFFFFF00))
    write("iperf2", "hostile-rate-max", fast)
    write("iperf2", "implausible-flag-bit", field(0, 0x40410078))
    write("iperf2", "implausible-version7", field(36, 0x00070000))
    write("iperf2", "implausible-port0", field(8, 0))
    write("iperf2", "implausible-wide-tos", field(44, 0x000100B8))
    write("iperf2", "implausible-urate-low-byte", field(52, 1))
    tt = iperf2_header(0x400100A0, 80)
    tt = field(32, 0x00100000, tt)
    write("iperf2", "implausible-start-usec", field(68, 1000000, tt))
    udp = iperf2_header(0x48010098, 76, udp=True)
    write("iperf2", "udp-plausible", udp)
    write("iperf2", "udp-cut-before-version", udp[:40])
    write("iperf2", "udp-small-tt-padding", struct.pack(">IIIII", 1, 0x6B088684, 0, 0, 0x00020001))
    bb = bytearray(64)
    struct.pack_into(">IIIHHI", bb, 0, 0x00800000, 100, 1, 0x8000, 0, 0)
    struct.pack_into(">IIIIII", bb, 20, 0x6B08873E, 5, 0x6B08873E, 6, 0x6B08873E, 7)
    write("iperf2", "implausible-bb-server-stamps", bytes(bb))
    struct.pack_into(">I", bb, 4, 0xFFFFFFFF)
    write("iperf2", "hostile-bb-size-4g", bytes(bb))


if __name__ == "__main__":
    auth_credential()
    compare_runs()
    control_server()
    iperf2()
