"""The benchmark cases: one row per tool and case (its command lines), one run of a row, the memory case, waiting for a quiet host."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from .common import HOST, log, NCPU, PAUSE_BETWEEN_RUNS
from .tools import Tool
from .system import child_pid, cpu_times, free_port, host_busy_fraction, ksoftirqd_cpu, listening, lo_counters, loadavg, proc_status_kib, reap, spawn, stop, tool_pid, udp_snmp
from .parsers import iperf2_csv_rows, NP_MAERTS, NP_RR, NP_STREAM, NP_UDP, parse_iperf2, parse_iperf2_bounceback, parse_iperf3_json, parse_netmeter_rate, parse_netperf


def wrap(argv: list[str], cpu: int | None, limit: int, rss_file: Path | None) -> list[str]:
    """timeout -k 2 LIMIT /usr/bin/time -q -o RSS_FILE -f %M [taskset -c CPU] argv..."""
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    tm = ["/usr/bin/time", "-q", "-o", str(rss_file), "-f", "%M"] if rss_file else []
    return ["timeout", "-k", "2", str(limit)] + tm + pin + argv


@dataclass
class Row:
    case: str
    tool: Tool
    label: str  # display label, e.g. "iperf3 3.18 -Z"
    client_args: list[str]
    server_args: list[str] = field(default_factory=list)
    env: dict = field(default_factory=dict)
    udp_server: bool = False  # readiness check on UDP (iperf 2 UDP server)
    udp_len: int | None = None
    reverse: bool = False
    netperf_test: str = ""
    mode: str = "stream"  # stream | rr (iperf2 bounceback) | nm_bounceback | nm_connect
    placement: tuple[int, int] | None = None  # (client cpu, server cpu)
    note: str = ""

    @property
    def key(self) -> str:
        p = f" @{self.placement[0]}/{self.placement[1]}" if self.placement else ""
        return f"{self.label}{p}"

    @property
    def is_netmeter(self) -> bool:
        return self.tool.kind == "netmeter"

    def placement_text(self) -> str:
        if not self.placement:
            return "unpinned"
        c, s = self.placement
        return f"same core (client cpu{c}, server cpu{s})" if c == s else f"different cores (client cpu{c}, server cpu{s})"

    def server_argv(self, port: int) -> list[str]:
        t = self.tool
        if t.kind in ("iperf3", "netmeter"):
            return [t.path, "-s", "-1", "-B", HOST, "-p", str(port)] + self.server_args
        if t.kind == "iperf2":
            fmt = ["-e"] if self.mode == "rr" else ["-y", "C"]
            return [t.path, "-s", "-B", HOST, "-p", str(port)] + fmt + self.server_args
        # -f: no child process per test, so wait4() on netserver covers the test's CPU and memory.
        return [t.server_path, "-D", "-f", "-4", "-L", HOST, "-p", str(port)]

    def client_argv(self, port: int, seconds: int) -> list[str]:
        t = self.tool
        if t.kind in ("iperf3", "netmeter"):
            return [t.path, "-c", HOST, "-p", str(port), "-t", str(seconds), "-J"] + self.client_args
        if t.kind == "iperf2":
            fmt = ["-e"] if self.mode == "rr" else ["-y", "C"]
            return [t.path, "-c", HOST, "-p", str(port), "-t", str(seconds)] + fmt + self.client_args
        argv = [t.path, "-H", HOST, "-p", str(port), "-t", self.netperf_test, "-l", str(seconds), "-P", "0", "--"]
        argv += self.client_args
        sel = {"TCP_STREAM": NP_STREAM, "TCP_MAERTS": NP_MAERTS, "UDP_STREAM": NP_UDP,
               "TCP_RR": NP_RR, "TCP_CRR": NP_RR, "UDP_RR": NP_RR}.get(self.netperf_test)
        if sel:
            argv += ["-o", ",".join(sel)]
        return argv

    def wrap(self, argv: list[str], cpu: int | None, limit: int, rss_file: Path | None = None) -> list[str]:
        return wrap(argv, cpu, limit, rss_file)

    def stop_signals(self) -> list[tuple[int, float]]:
        if self.tool.kind in ("iperf3", "netmeter"):  # -1: exits by itself after the test
            return [(0, 3.0), (signal.SIGTERM, 3.0)]
        if self.tool.kind == "iperf2":
            # iperf 2 servers take ~1 s to exit after SIGINT (the first one waits for threads, a
            # second forces). Its report is written when the test ends; run_once waits for it,
            # so a quick stop (SIGKILL after 0.3 s) loses nothing and GNU time still reports.
            return [(signal.SIGINT, 0.05)]
        return [(signal.SIGTERM, 3.0)]

    def expected_server_lines(self) -> int:
        """iperf 2 (CSV) report lines the server writes at the end of the test."""
        if self.tool.kind != "iperf2" or self.mode == "rr":
            return 0
        if "-P" in self.client_args:
            return int(self.client_args[self.client_args.index("-P") + 1])
        return 1

    def parse(self, cout: str, sout: str) -> dict:
        k = self.tool.kind
        if self.mode == "nm_bounceback":
            return parse_netmeter_rate(cout, "bounceback")
        if self.mode == "nm_connect":
            return parse_netmeter_rate(cout, "connect")
        if k in ("iperf3", "netmeter"):
            return parse_iperf3_json(cout)
        if k == "iperf2":
            if self.mode == "rr":
                return parse_iperf2_bounceback(cout)
            return parse_iperf2(cout, sout, self.reverse)
        return parse_netperf(self.netperf_test, cout)

    def commands_text(self, seconds: int) -> tuple[str, str]:
        """Server and client command lines for the report ($PORT = a free port)."""
        def show(argv: list[str], cpu: int | None, limit: int) -> str:
            # The harness also wraps each in `timeout -k 2 LIMIT /usr/bin/time -q -o FILE -f %M`.
            a = (["taskset", "-c", str(cpu)] if cpu is not None else []) + argv
            a = ["target/release/netmeter" if x == self.tool.path and self.is_netmeter else x for x in a]
            a = ["$PORT" if x == "65535" else x for x in a]
            envs = " ".join(f"{k}={v}" for k, v in self.env.items())
            return (envs + " " if envs else "") + " ".join(a)
        c, s = self.placement if self.placement else (None, None)
        return (show(self.server_argv(65535), s, seconds + 30),
                show(self.client_argv(65535, seconds), c, seconds + 8))


def make_rows(case: str, tools: dict[str, Tool], smoke: bool) -> tuple[list[Row], list[str]]:
    """Rows for one case, and notes about tools skipped."""
    rows: list[Row] = []
    skipped: list[str] = []
    T = tools
    # Oldest to newest: the last one is "the newest iperf3" where one is picked.
    i3 = [T[k] for k in ("iperf3-3.12", "iperf3-3.18", "iperf3-3.22") if k in T]
    i2 = [T[k] for k in ("iperf2-2.1.8", "iperf2-2.2.1") if k in T]
    nm = T["netmeter"]
    npf = T.get("netperf")
    for k, lab in [("iperf3-3.12", "iperf3 3.12"), ("iperf3-3.18", "iperf3 3.18"), ("iperf3-3.22", "iperf3 3.22"),
                   ("iperf2-2.1.8", "iperf 2.1.8"), ("iperf2-2.2.1", "iperf 2.2.1"), ("netperf", "netperf")]:
        if k not in T and case != "mem":
            skipped.append(f"{lab}: not installed (empty or missing in peers.env)")

    if smoke:
        if case == "tcp1":
            rows = [Row(case, nm, "netmeter", [])]
            if "iperf3-3.12" in T:
                rows.insert(0, Row(case, T["iperf3-3.12"], "iperf3 3.12", []))
        elif case == "udp1448":
            rows = [Row(case, nm, "netmeter", ["-u", "-b", "0", "-l", "1448"], udp_len=1448)]
            if "iperf3-3.12" in T:
                rows.insert(0, Row(case, T["iperf3-3.12"], "iperf3 3.12", ["-u", "-b", "0", "-l", "1448"], udp_len=1448))
        return rows, []

    if case in ("tcp1", "tcp2", "tcpR"):
        extra = {"tcp1": [], "tcp2": ["-P", "2"], "tcpR": ["-R"]}[case]
        for t in i3:
            rows.append(Row(case, t, t.label, list(extra), reverse=case == "tcpR"))
        for t in i2:
            rows.append(Row(case, t, t.label, list(extra), reverse=case == "tcpR"))
        rows.append(Row(case, nm, "netmeter", list(extra), reverse=case == "tcpR"))
        if case == "tcp1":
            # Where the default-flags difference comes from: the write size. Each tool with
            # the other's default block, so the table shows parity at equal settings.
            rows.append(Row(case, nm, "netmeter -l 128K", ["-l", "128K"],
                            note="iperf3's default 128 KiB writes instead of netmeter's 1 MiB"))
            if i3:
                t = i3[-1]
                rows.append(Row(case, t, f"{t.label} -l 1M", ["-l", "1M"],
                                note="netmeter's default 1 MiB writes instead of iperf3's 128 KiB"))
        if npf:
            if case == "tcp1":
                rows.append(Row(case, npf, "netperf TCP_STREAM", [], netperf_test="TCP_STREAM"))
            elif case == "tcpR":
                rows.append(Row(case, npf, "netperf TCP_MAERTS", [], netperf_test="TCP_MAERTS", reverse=True,
                                note="TCP_MAERTS is netperf's reverse TCP_STREAM"))
            else:
                skipped.append("netperf: no parallel streams in one test (-P) -> skipped")
    elif case == "tcpbest":
        for t in i3:
            rows.append(Row(case, t, f"{t.label} -Z", ["-Z"], note="sendfile" + (
                "" if "--skip-rx-copy" in t.features else "; this iperf3 has no receive-side option")))
            if "--skip-rx-copy" in t.features:
                rows.append(Row(case, t, f"{t.label} --skip-rx-copy", ["--skip-rx-copy"],
                                note="the receiver reads with MSG_TRUNC (no copy), plain writes"))
        for t in i2:
            if "--skip-rx-copy" in t.features:
                rows.append(Row(case, t, f"{t.label} (server --skip-rx-copy)", [], server_args=["--skip-rx-copy"],
                                note="iperf 2 has no zero-copy send; its server can skip the receive copy"))
            else:
                rows.append(Row(case, t, f"{t.label} (default)", [], note="iperf 2.1.8 has no zero-copy option"))
        variants = []
        if "--zerocopy" in nm.features:
            variants.append(["-Z"])
        if "--skip-rx-copy" in nm.features:
            variants.append(["--skip-rx-copy"])
        if len(variants) == 2:
            variants.append(["-Z", "--skip-rx-copy"])
        for v in variants:
            rows.append(Row(case, nm, "netmeter " + " ".join(v), v))
        if "--zerocopy" in nm.features:
            rows.append(Row(case, nm, "netmeter -Z NETMETER_ZEROCOPY=sendfile", ["-Z"],
                            env={"NETMETER_ZEROCOPY": "sendfile"},
                            note="netmeter -Z sends with MSG_ZEROCOPY where the socket allows it; this row "
                                 "forces sendfile, iperf3's -Z method"))
        if npf:
            rows.append(Row(case, npf, "netperf TCP_SENDFILE", [], netperf_test="TCP_SENDFILE"))
    elif case in ("udp1448", "udp64"):
        n = 1448 if case == "udp1448" else 64
        for t in i3:
            rows.append(Row(case, t, t.label, ["-u", "-b", "0", "-l", str(n)], udp_len=n))
        for t in i2:
            rows.append(Row(case, t, t.label, ["-u", "-b", "100G", "-l", str(n)], server_args=["-u"],
                            udp_server=True, udp_len=n, note="iperf 2: -b 0 is not 'unlimited', 100G is"))
        for t in i3:
            if "--gsro" in t.features:
                rows.append(Row(case, t, f"{t.label} --gsro", ["-u", "-b", "0", "-l", str(n), "--gsro"], udp_len=n,
                                note="UDP GSO on send and GRO on receive"))
        rows.append(Row(case, nm, "netmeter", ["-u", "-b", "0", "-l", str(n)], udp_len=n))
        rows.append(Row(case, nm, "netmeter --no-gso --no-gro",
                        ["-u", "-b", "0", "-l", str(n), "--no-gso", "--no-gro"], udp_len=n))
        if npf:
            rows.append(Row(case, npf, "netperf UDP_STREAM", ["-m", str(n)], netperf_test="UDP_STREAM", udp_len=n))
    elif case == "udpecn":
        # What counting ECN codepoints costs the receiver: the same netmeter with the TOS
        # byte read (IP_RECVTOS, the default) and not (NETMETER_ECN_COUNTING=off), with
        # GRO and without; the rows alternate run by run.
        args = ["-u", "-b", "0", "-l", "1448"]
        for extra, what in (([], "GRO"), (["--no-gso", "--no-gro"], "no GSO/GRO")):
            rows.append(Row(case, nm, f"netmeter {' '.join(extra)}".strip() + " (counting)", args + extra,
                            udp_len=1448, note=f"{what}; the receiver reads each message's TOS byte"))
            rows.append(Row(case, nm, f"netmeter {' '.join(extra)}".strip() + " NETMETER_ECN_COUNTING=off",
                            args + extra, env={"NETMETER_ECN_COUNTING": "off"}, udp_len=1448,
                            note=f"{what}; no IP_RECVTOS, no ECN counts"))
    elif case == "tcpP":
        # netmeter and the newest iperf3 only (the older ones are in tcp2): -P 2/8/32, --bidir.
        peers = [i3[-1]] if i3 else []
        for load in (["-P", "2"], ["-P", "8"], ["-P", "32"], ["--bidir"]):
            for t in peers + [nm]:
                rows.append(Row(case, t, f"{t.label} {' '.join(load)}", list(load),
                                note="received = both directions added" if load == ["--bidir"] else ""))
    elif case in ("rr", "crr"):
        placements = [(0, 0), (0, 1)] if NCPU >= 2 else [(0, 0)]
        for pl in placements:
            if npf:
                test = "TCP_RR" if case == "rr" else "TCP_CRR"
                note = ("1-byte request and reply, graceful close (the client's side keeps TIME_WAIT); the harness "
                        "sends netserver SIGALRM 0.5 s after the test so that it answers at once instead of "
                        "after its own test-length + 4 s timer") if case == "crr" else "1-byte request and reply"
                rows.append(Row(case, npf, f"netperf {test}", ["-r", "1,1"], netperf_test=test, placement=pl,
                                note=note))
            if case == "rr":
                for t in i2:
                    rows.append(Row(case, t, f"{t.label} --bounceback", ["--bounceback", "--bounceback-period", "0"],
                                    mode="rr", placement=pl,
                                    note="100-byte messages: iperf 2 bounceback fails below ~80 bytes (-l 1 hangs)"))
                if "--bounceback" in nm.features:
                    if "--bounceback-request" in nm.features:
                        rows.append(Row(case, nm, "netmeter --bounceback (1 B)",
                                        ["--bounceback", "--bounceback-request", "1"], mode="nm_bounceback",
                                        placement=pl, note="1-byte request and reply, like netperf -r 1,1"))
                    if "--busy-poll" in nm.features:
                        rows.append(Row(case, nm, "netmeter --bounceback --busy-poll 50 (1 B, polling)",
                                        ["--bounceback", "--bounceback-request", "1", "--busy-poll", "50"],
                                        mode="nm_bounceback", placement=pl,
                                        note="optional: both ends poll up to 50 µs before a blocking read"))
                    # UDP request/response, 8 bytes each way (netmeter's UDP requests carry an
                    # 8-byte sequence number, so that is its smallest).
                    if npf:
                        rows.append(Row(case, npf, "netperf UDP_RR (8 B)", ["-r", "8,8"], netperf_test="UDP_RR",
                                        placement=pl, note="8-byte request and reply over UDP"))
                    rows.append(Row(case, nm, "netmeter -u --bounceback (8 B)",
                                    ["-u", "--bounceback", "--bounceback-request", "8"], mode="nm_bounceback",
                                    placement=pl, note="8-byte UDP request and reply, like netperf UDP_RR -r 8,8"))
                    rows.append(Row(case, nm, "netmeter --bounceback (100 B default)", ["--bounceback"],
                                    mode="nm_bounceback", placement=pl,
                                    note="netmeter's default 100-byte messages, like iperf 2's bounceback"))
            elif "--connect-only" in nm.features:
                rows.append(Row(case, nm, "netmeter --connect-only", ["--connect-only"], mode="nm_connect",
                                placement=pl,
                                note="request = the 37-byte test cookie, reply 1 byte, close with RST "
                                     "(SO_LINGER 0, no TIME_WAIT); figures from end.netmeter.connect_only"))
        if case == "rr" and "--bounceback" not in nm.features:
            skipped.append("netmeter: `netmeter --help` lists no --bounceback -> no RR row")
        if case == "rr" and i2:
            skipped.append("iperf 2 --bounceback with -l 1 fails ('bounceback read failed') or hangs, "
                           "so it runs with its default 100-byte messages")
        if case == "crr":
            skipped.append("note: netperf TCP_CRR leaves every connection in TIME_WAIT on the client side; at "
                           "these rates the host's TIME_WAIT table (net.ipv4.tcp_max_tw_buckets) fills up, "
                           "and a run can fail to connect")
            if "--connect-only" not in nm.features:
                skipped.append("netmeter: `netmeter --help` lists no --connect-only -> no connection-rate row")
            skipped.append("iperf3 has no request/response or connection-rate test; iperf 2 --connect-only "
                           "measures connect time, not a rate -> not run")
    base = T.get("netmeter-base")
    if base:
        # The same netmeter rows with the baseline binary, interleaved right after each.
        with_base: list[Row] = []
        for r in rows:
            with_base.append(r)
            if r.tool is nm and all(f in base.features for f in r.client_args if f.startswith("--")):
                with_base.append(Row(r.case, base, "base: " + r.label, list(r.client_args), list(r.server_args),
                                     dict(r.env), r.udp_server, r.udp_len, r.reverse, r.netperf_test, r.mode,
                                     r.placement, r.note))
        rows = with_base
    return rows, [s for s in skipped if s not in ("",)]


# --------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------


def run_once(row: Row, seconds: int, rep: int, tmp: Path) -> dict:
    port = free_port()
    ccpu, scpu = row.placement if row.placement else (None, None)
    tag = f"{row.case}-{re.sub(r'[^A-Za-z0-9]+', '_', row.key)}-{rep}"
    sargv = row.wrap(row.server_argv(port), scpu, seconds + 30, tmp / f"{tag}.server.rss")
    cargv = row.wrap(row.client_argv(port, seconds), ccpu, seconds + 8, tmp / f"{tag}.client.rss")
    rec = {
        "case": row.case, "row": row.key, "label": row.label, "tool": row.tool.key, "rep": rep,
        "placement": row.placement_text(), "env": row.env, "port": port,
        "server_cmd": sargv, "client_cmd": cargv, "seconds": seconds, "ok": False,
    }
    srv = spawn(sargv, tmp / f"{tag}.server.out", tmp / f"{tag}.server.err", row.env, tmp / f"{tag}.server.rss")
    t0 = time.monotonic()
    while not listening(port, row.udp_server):
        reap(srv, time.monotonic())
        if srv.status is not None or time.monotonic() - t0 > 5:
            stop(srv, [(signal.SIGTERM, 2.0)])
            rec["error"] = "server did not start: " + srv.err.read_text(errors="replace")[-300:]
            return rec
        time.sleep(0.01)
    if row.udp_server:
        time.sleep(0.05)  # the iperf 2 UDP listener thread binds before it is ready to read
    c0, w0, n0, u0, k0 = cpu_times(), time.monotonic(), lo_counters(), udp_snmp(), ksoftirqd_cpu()
    cli = spawn(cargv, tmp / f"{tag}.client.out", tmp / f"{tag}.client.err", row.env, tmp / f"{tag}.client.rss")
    finished = False
    if row.tool.kind == "netperf":
        # netserver only answers a TCP_CRR (and sometimes a UDP_STREAM) test when its own timer,
        # test length + 4 s, fires: it sits in accept()/recv() meanwhile and the client waits.
        # SIGALRM is that timer's signal; sending it 0.5 s after the test ended gives the same
        # result 4 s sooner (the figures are the client's: transactions / client elapsed time).
        finished = reap(cli, w0 + seconds + 0.5)
        if not finished:
            rec["netserver_sigalrm"] = True
            try:
                os.kill(tool_pid(srv), signal.SIGALRM)
            except ProcessLookupError:
                pass
    if not finished:
        finished = reap(cli, time.monotonic() + seconds + 12)
    if not finished:
        stop(cli, [(signal.SIGTERM, 2.0)])
    wall = time.monotonic() - w0
    c1, n1, u1, k1 = cpu_times(), lo_counters(), udp_snmp(), ksoftirqd_cpu()
    want = row.expected_server_lines()
    if want:  # wait (up to 3 s) for the iperf 2 server's end-of-test report
        t1 = time.monotonic()
        while time.monotonic() - t1 < 3:
            try:
                if len([r for r in iperf2_csv_rows(srv.out.read_text(errors="replace")) if r["id"] > 0]) >= want:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.01)
    stop(srv, row.stop_signals())
    rec["lo_bytes"] = n1[0] - n0[0]
    rec["lo_packets"] = n1[1] - n0[1]
    rec["udp_snmp_delta"] = {k: u1[k] - u0.get(k, 0) for k in u1}
    rec.update(
        wall_s=round(wall, 4),
        client_exit=cli.exit_code(), server_exit=srv.exit_code(),
        client_cpu_s=round(cli.cpu, 4), client_user_s=round(cli.cpu_user, 4), client_sys_s=round(cli.cpu_sys, 4),
        server_cpu_s=round(srv.cpu, 4), server_user_s=round(srv.cpu_user, 4), server_sys_s=round(srv.cpu_sys, 4),
        client_maxrss_kib=cli.maxrss_kib, server_maxrss_kib=srv.maxrss_kib,
        host_busy_s=round(c1["busy"] - c0["busy"], 3), host_irq_s=round(c1["irq"] - c0["irq"], 3),
        host_steal_s=round(c1["steal"] - c0["steal"], 3), ksoftirqd_s=round(k1 - k0, 3),
    )
    # CPU used during the run by everything else on the host (other people's builds...).
    # Loopback softirq work is counted as irq time, or as ksoftirqd's time when the kernel
    # defers it to those threads, not in the two processes: leave both out.
    rec["other_busy_frac"] = round(max(
        0.0, rec["host_busy_s"] - rec["host_irq_s"] - rec["ksoftirqd_s"] - cli.cpu - srv.cpu) / (wall * NCPU), 3)
    cout = cli.out.read_text(errors="replace")
    sout = srv.out.read_text(errors="replace")
    if not finished:
        rec["error"] = f"client timed out after {seconds + 12}s and was killed"
        return rec
    try:
        m = row.parse(cout, sout)
    except (ValueError, KeyError, TypeError, json.JSONDecodeError) as e:
        err = cli.err.read_text(errors="replace").strip()[-600:]
        rec["error"] = f"{e}; client exit {cli.exit_code()}; stderr: {err}"
        return rec
    if cli.exit_code() not in (0, None) and "trans_per_s" not in m:
        rec["error"] = f"client exit status {cli.exit_code()}"
        return rec
    rec.update(m)
    if "rx_bps" in m:
        rec["rx_gbps"] = m["rx_bps"] / 1e9
        rec["tx_gbps"] = m["tx_bps"] / 1e9
        gbit = m["rx_bytes"] * 8 / 1e9
        rec["gbit_moved"] = round(gbit, 4)
        if gbit > 0:
            rec["cpu_s_per_gbit"] = (cli.cpu + srv.cpu) / gbit
            rec["cpu_s_per_gbit_incl_softirq"] = (cli.cpu + srv.cpu + rec["host_irq_s"] + rec["ksoftirqd_s"]) / gbit
            rec["client_cpu_s_per_gbit"] = cli.cpu / gbit
            rec["server_cpu_s_per_gbit"] = srv.cpu / gbit
        if m.get("tx_bytes") and row.udp_len:
            rec["loss_pct"] = max(0.0, 100.0 * (1 - m["rx_bytes"] / m["tx_bytes"]))
        if m.get("tx_bytes"):
            rec["lo_over_sent"] = rec["lo_bytes"] / m["tx_bytes"]
        if row.udp_len:
            rec["rx_pps"] = m["rx_bps"] / (8 * row.udp_len)
            rec["tx_pps"] = m["tx_bps"] / (8 * row.udp_len)
            # What the network carried: packets on lo (a GSO super-packet is one), per
            # second of the test, and sent datagrams per lo packet.
            if m.get("seconds") and rec["lo_packets"] > 0:
                rec["lo_pps"] = rec["lo_packets"] / m["seconds"]
                rec["datagrams_per_lo_packet"] = m["tx_bytes"] / row.udp_len / rec["lo_packets"]
    if "trans_per_s" in m:
        secs = m.get("seconds") or seconds
        n = m["trans_per_s"] * secs
        if n > 0:
            rec["cpu_us_per_trans"] = (cli.cpu + srv.cpu) / n * 1e6
    rec["ok"] = True
    return rec


MEM_P128_TESTS = 3


def run_mem_case(tools: dict[str, Tool], tmp: Path) -> list[dict]:
    """Server RSS: idle after start; idle after a 1-stream warm-up test (what any first test
    maps for good: code pages, a cached thread stack); then after each of MEM_P128_TESTS
    -P 128 tests (0.5 s and 2 s after), so a server that keeps memory shows it growing."""
    out = []
    for key in ("netmeter", "iperf3-3.12", "iperf3-3.18", "iperf3-3.22"):
        if key not in tools:
            continue
        t = tools[key]
        port = free_port()
        rec = {"case": "mem", "row": t.label, "label": t.label, "tool": key, "ok": False}
        sargv = wrap([t.path, "-s", "-B", HOST, "-p", str(port)], None, 60, None)
        cargv = wrap([t.path, "-c", HOST, "-p", str(port), "-t", "1", "-P", "128", "-J"], None, 30, None)
        wargv = wrap([t.path, "-c", HOST, "-p", str(port), "-t", "1", "-J"], None, 30, None)
        rec["server_cmd"], rec["client_cmd"] = sargv, cargv
        srv = spawn(sargv, tmp / f"mem-{key}.server.out", tmp / f"mem-{key}.server.err")
        t0 = time.monotonic()
        while not listening(port, False) and time.monotonic() - t0 < 5:
            time.sleep(0.01)
        time.sleep(0.5)
        real = child_pid(srv.pid)  # timeout -> tool
        if real is None:
            stop(srv, [(signal.SIGTERM, 2.0)])
            rec["error"] = "server did not start"
            out.append(rec)
            continue
        rec["idle_rss_kib"] = proc_status_kib(real, "VmRSS")
        warm = spawn(wargv, tmp / f"mem-{key}.warm.out", tmp / f"mem-{key}.warm.err")
        if not reap(warm, time.monotonic() + 30):
            stop(warm, [(signal.SIGTERM, 2.0)])
        time.sleep(2.0)
        rec["warm_idle_rss_kib"] = proc_status_kib(real, "VmRSS")
        rec["after_p128_0_5s_rss_kib"], rec["after_p128_2s_rss_kib"] = [], []
        errors = []
        for i in range(MEM_P128_TESTS):
            cli = spawn(cargv, tmp / f"mem-{key}.client{i}.out", tmp / f"mem-{key}.client{i}.err")
            if not reap(cli, time.monotonic() + 30):
                stop(cli, [(signal.SIGTERM, 2.0)])
            time.sleep(0.5)
            rec["after_p128_0_5s_rss_kib"].append(proc_status_kib(real, "VmRSS"))
            time.sleep(1.5)
            rec["after_p128_2s_rss_kib"].append(proc_status_kib(real, "VmRSS"))
            try:
                parse_iperf3_json(cli.out.read_text(errors="replace"))
            except ValueError as e:
                errors.append(f"-P 128 test {i + 1} failed: {e}")
        rec["peak_rss_kib"] = proc_status_kib(real, "VmHWM")
        stop(srv, [(signal.SIGTERM, 3.0)])
        rec["ok"] = not errors
        if errors:
            rec["error"] = "; ".join(errors)
        out.append(rec)
        time.sleep(PAUSE_BETWEEN_RUNS)
    return out


def wait_for_quiet(max_wait: float) -> dict:
    info = {"loadavg_before_wait": loadavg()}
    t0 = time.monotonic()
    busy = host_busy_fraction()
    while busy > 0.25 and time.monotonic() - t0 < max_wait:
        log(f"host is busy ({busy:.0%} of {NCPU} CPUs, load {loadavg()[0]:.2f}); waiting for it to calm down")
        time.sleep(8)
        busy = host_busy_fraction()
    info.update(waited_s=round(time.monotonic() - t0, 1), busy_frac_at_start=round(busy, 3),
                loadavg_at_start=loadavg())
    return info
