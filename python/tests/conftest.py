"""Fixtures: a netmeter server on loopback, started by the test and ended by its PID.

The server is the binary from the checkout's target/ (release if built, else debug),
or NETMETER_BIN. Tests wait for the server's own lines (its "Server listening" banner),
never for a fixed time; every wait has a deadline that only bounds a failure.
"""

import os
import pathlib
import queue
import signal
import socket
import subprocess
import threading
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

#: Bounds a failure only: a healthy server says it listens within a second.
SERVER_READY_S = 60


def netmeter_bin() -> pathlib.Path:
    env = os.environ.get("NETMETER_BIN")
    if env:
        return pathlib.Path(env)
    for profile in ("release", "debug"):
        p = REPO / "target" / profile / "netmeter"
        if p.exists():
            return p
    pytest.fail("no netmeter binary: run `cargo build` first or set NETMETER_BIN")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A `netmeter -s` on 127.0.0.1:port whose output lines are collected as they come."""

    def __init__(self, port: int):
        self.port = port
        self.proc = subprocess.Popen(
            [str(netmeter_bin()), "-s", "-B", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        self.lines: "queue.Queue[str]" = queue.Queue()
        self.listening = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def wait_listening(self, count: int = 1) -> None:
        """Wait until the server has said "Server listening" `count` times in all."""
        deadline = time.monotonic() + SERVER_READY_S
        while self.listening < count:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                pytest.fail(f"netmeter server on port {self.port} is not listening")
            try:
                line = self.lines.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if "Server listening" in line:
                self.listening += 1

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)


@pytest.fixture
def server():
    srv = Server(free_port())
    try:
        srv.wait_listening()
        yield srv
    finally:
        srv.stop()
