"""Constants shared by every part of the harness, and its log line."""

from __future__ import annotations

import os
import sys
from pathlib import Path


REPO = Path(__file__).resolve().parent.parent.parent
HOST = "127.0.0.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1
PAUSE_BETWEEN_RUNS = 0.05  # seconds, lets TIME_WAIT sockets and softirq backlog settle
ALL_CASES = ["tcp1", "tcp2", "tcpR", "tcpbest", "udp1448", "udp64", "udpecn", "rr", "crr", "tcpP", "mem", "growth", "plot"]

CASE_TITLES = {
    "tcp1": "TCP, 1 stream, default options",
    "tcp2": "TCP, 2 parallel streams (-P 2)",
    "tcpR": "TCP, reverse (-R: the server sends)",
    "tcpbest": "TCP, 1 stream, each tool's best zero-copy options",
    "udp1448": "UDP, 1448-byte datagrams, unlimited rate",
    "udp64": "UDP, 64-byte datagrams, unlimited rate",
    "udpecn": "UDP, 1448-byte datagrams: netmeter's receiver with and without ECN counting (IP_RECVTOS)",
    "rr": "TCP request/response rate (1-byte where the tool allows it)",
    "crr": "TCP connection rate (connect, 1-byte request/response, close)",
    "tcpP": "TCP, parallel streams (-P 2/8/32) and --bidir, netmeter and the newest iperf3",
    "growth": "how cost grows: 1/8/32/128 streams, 1/4/16 concurrent tests on one server",
    "mem": "netmeter server memory: idle, and after a -P 128 test",
    "plot": "netmeter plot / report of 10,000 intervals (a 10 s test at -i 0.001)",
}


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)
