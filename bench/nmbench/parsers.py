"""Parsers of each tool's output: iperf3 and netmeter JSON, iperf 2 CSV and text, netperf omni output.

Pure functions of text, unit-tested in bench/test_parsers.py."""

from __future__ import annotations

import json
import re


def parse_iperf3_json(text: str) -> dict:
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"no JSON in output ({e})") from None
    if d.get("error"):
        raise ValueError(f"tool error: {d['error']}")
    e = d.get("end", {})
    sr, ss = e.get("sum_received"), e.get("sum_sent")
    if not sr or not ss or not sr.get("seconds"):
        raise ValueError("JSON has no end.sum_received/sum_sent")
    rx, tx = sr["bytes"], ss["bytes"]
    # --bidir: the reverse direction has sums of its own; received/sent = both directions.
    rr, rs = e.get("sum_received_bidir_reverse"), e.get("sum_sent_bidir_reverse")
    if rr and rs:
        rx, tx = rx + rr["bytes"], tx + rs["bytes"]
    m = {
        "rx_bytes": rx,
        "rx_bps": rx * 8 / sr["seconds"],
        "tx_bytes": tx,
        "tx_bps": tx * 8 / ss["seconds"],
        "seconds": sr["seconds"],
    }
    if "retransmits" in ss:
        m["retransmits"] = ss["retransmits"]
    nm = d.get("start", {}).get("netmeter")
    if nm:
        m["data_path"] = nm.get("data_path")
        warnings = list(nm.get("warnings", [])) + list(e.get("netmeter", {}).get("warnings", []))
        if warnings:
            m["netmeter_warnings"] = warnings
    return m


def iperf2_csv_rows(text: str) -> list[dict]:
    """iperf 2 -y C lines, classic (2.1.8, 2.2.1) or enhanced (header lines) format."""
    rows, header = [], None
    for line in text.splitlines():
        f = line.strip().split(",")
        if len(f) < 9:
            continue
        if f[0] == "time":
            header = f
            continue
        if header and len(f) == len(header) and f[0].startswith("+"):
            r = dict(zip(header, f))
            rows.append({"id": int(r["transferid"]), "bytes": int(r["bytes"]), "bps": float(r["speed"])})
            continue
        if "-" in f[6]:  # classic: ts,src,sport,dst,dport,id,start-end,bytes,bps[,udp fields]
            r = {"id": int(f[5]), "bytes": int(f[7]), "bps": float(f[8])}
            if len(f) >= 13:
                r.update(jitter=f[9], lost=int(f[10]), total=int(f[11]))
            rows.append(r)
    return rows


def iperf2_sum(rows: list[dict], first: bool) -> tuple[int, float]:
    """Sum bytes and bits/s over the per-stream lines (id > 0), one line per id."""
    per_id: dict[int, dict] = {}
    for r in rows:
        if r["id"] > 0 and (not first or r["id"] not in per_id):
            per_id[r["id"]] = r
    if not per_id:
        raise ValueError("no iperf 2 report line")
    return sum(r["bytes"] for r in per_id.values()), sum(r["bps"] for r in per_id.values())


def parse_iperf2(client_out: str, server_out: str, reverse: bool) -> dict:
    c, s = iperf2_csv_rows(client_out), iperf2_csv_rows(server_out)
    rx_rows, tx_rows = (c, s) if reverse else (s, c)
    rx_bytes, rx_bps = iperf2_sum(rx_rows, first=False)
    tx_bytes, tx_bps = iperf2_sum(tx_rows, first=True)
    return {"rx_bytes": rx_bytes, "rx_bps": rx_bps, "tx_bytes": tx_bytes, "tx_bps": tx_bps}


def parse_iperf2_bounceback(text: str) -> dict:
    m = re.search(r"RPS=([\d.]+)", text) or re.search(r"([\d.]+) rps", text)
    if not m or float(m.group(1)) <= 0:
        raise ValueError("no bounceback rate in output")
    out = {"trans_per_s": float(m.group(1))}
    lat = re.search(r"(\d+)=([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms", text)
    if lat:
        out["mean_latency_us"] = float(lat.group(2)) * 1000
    return out


def netperf_omni(text: str, names: list[str]) -> dict:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        raise ValueError("no netperf output")
    vals = lines[-1].split(",")
    if len(vals) != len(names):
        raise ValueError(f"unexpected netperf output: {lines[-1]!r}")
    return {n: float(v) for n, v in zip(names, vals)}


NP_STREAM = ["THROUGHPUT", "ELAPSED_TIME", "LOCAL_BYTES_SENT", "REMOTE_BYTES_RECVD"]
NP_MAERTS = ["THROUGHPUT", "ELAPSED_TIME", "REMOTE_BYTES_SENT", "LOCAL_BYTES_RECVD"]
NP_UDP = ["ELAPSED_TIME", "LOCAL_BYTES_SENT", "REMOTE_BYTES_RECVD", "LOCAL_SEND_THROUGHPUT", "REMOTE_RECV_THROUGHPUT"]
NP_RR = ["THROUGHPUT", "ELAPSED_TIME", "MEAN_LATENCY", "P50_LATENCY", "P99_LATENCY"]


def parse_netperf(test: str, text: str) -> dict:
    if test == "TCP_SENDFILE":  # no omni output: classic table, last line
        nums = [ln.split() for ln in text.splitlines() if re.match(r"^\s*\d", ln)]
        if not nums or len(nums[-1]) < 5:
            raise ValueError("no netperf TCP_SENDFILE result line")
        elapsed, mbps = float(nums[-1][3]), float(nums[-1][4])
        b = mbps * 1e6 * elapsed / 8
        return {"rx_bps": mbps * 1e6, "tx_bps": mbps * 1e6, "rx_bytes": b, "tx_bytes": b, "seconds": elapsed}
    if test == "TCP_STREAM":
        v = netperf_omni(text, NP_STREAM)
        return {"rx_bps": v["THROUGHPUT"] * 1e6, "rx_bytes": v["REMOTE_BYTES_RECVD"],
                "tx_bytes": v["LOCAL_BYTES_SENT"],
                "tx_bps": v["LOCAL_BYTES_SENT"] * 8 / v["ELAPSED_TIME"], "seconds": v["ELAPSED_TIME"]}
    if test == "TCP_MAERTS":
        v = netperf_omni(text, NP_MAERTS)
        return {"rx_bps": v["THROUGHPUT"] * 1e6, "rx_bytes": v["LOCAL_BYTES_RECVD"],
                "tx_bytes": v["REMOTE_BYTES_SENT"],
                "tx_bps": v["REMOTE_BYTES_SENT"] * 8 / v["ELAPSED_TIME"], "seconds": v["ELAPSED_TIME"]}
    if test == "UDP_STREAM":
        v = netperf_omni(text, NP_UDP)
        return {"rx_bps": v["REMOTE_RECV_THROUGHPUT"] * 1e6, "tx_bps": v["LOCAL_SEND_THROUGHPUT"] * 1e6,
                "rx_bytes": v["REMOTE_BYTES_RECVD"], "tx_bytes": v["LOCAL_BYTES_SENT"],
                "seconds": v["ELAPSED_TIME"]}
    v = netperf_omni(text, NP_RR)
    return {"trans_per_s": v["THROUGHPUT"], "seconds": v["ELAPSED_TIME"],
            "mean_latency_us": v["MEAN_LATENCY"], "p50_latency_us": v["P50_LATENCY"],
            "p99_latency_us": v["P99_LATENCY"]}


def find_key(d, names: tuple[str, ...]):
    if isinstance(d, dict):
        for k, v in d.items():
            if k in names and isinstance(v, (int, float)):
                return v
            r = find_key(v, names)
            if r is not None:
                return r
    return None


def parse_netmeter_rate(text: str, what: str) -> dict:
    d = json.loads(text)
    if d.get("error"):
        raise ValueError(f"tool error: {d['error']}")
    nm = d.get("end", {}).get("netmeter", {})
    if what == "bounceback":
        bb = nm.get("bounceback", {})
        v = bb.get("transactions_per_second")
        if v and bb.get("rtt", {}).get("mean_ms") is not None:
            return {"trans_per_s": float(v), "mean_latency_us": bb["rtt"]["mean_ms"] * 1000,
                    "p50_latency_us": bb["rtt"].get("p50_ms", 0) * 1000,
                    "p99_latency_us": bb["rtt"].get("p99_ms", 0) * 1000, "seconds": bb.get("seconds")}
    else:
        co = nm.get("connect_only") or {}
        v = co.get("connections_per_second") or find_key(nm, ("connections_per_second",))
        if v:
            out = {"trans_per_s": float(v), "seconds": co.get("seconds"), "failed": co.get("failed")}
            tr = co.get("transaction") or {}
            if tr.get("mean_ms") is not None:
                out["mean_latency_us"] = tr["mean_ms"] * 1000
            if tr.get("p99_ms") is not None:
                out["p99_latency_us"] = tr["p99_ms"] * 1000
            return out
    if not v:
        raise ValueError(f"no {what} rate in end.netmeter")
    return {"trans_per_s": float(v)}
