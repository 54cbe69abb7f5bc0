"""Tests of the benchmark's output parsers (bench/nmbench/parsers.py), on output captured
from the real tools (iperf 2.2.1, netperf 2.7, iperf3/netmeter -J).

Run: python3 -m unittest discover -s bench -p 'test_*.py'   (scripts/test.sh does)
"""

import json
import unittest

from nmbench.parsers import (
    NP_RR,
    NP_STREAM,
    iperf2_csv_rows,
    iperf2_sum,
    netperf_omni,
    parse_iperf2,
    parse_iperf2_bounceback,
    parse_iperf3_json,
    parse_netmeter_rate,
    parse_netperf,
)

# iperf 2.2.1 -y C, TCP: client and server lines of one test.
IPERF2_TCP_CLIENT = "20261122214910,127.0.0.1,59662,127.0.0.1,25111,1,0.0-1.0,355598400,2809494332\n"
IPERF2_TCP_SERVER = "20261122214910,127.0.0.1,59662,127.0.0.1,25111,1,0.0-1.0,355598400,2820734794\n"
# iperf 2.2.1 -y C, UDP client (jitter, lost, total, ... after the rate), then its stderr.
IPERF2_UDP_CLIENT = (
    "20261122214911,127.0.0.1,55274,127.0.0.1,25111,1,0.0-1.0,1308300,10428731,-nan,0,-1,-0.000,0\n"
    "[  1] Read UDP fin failed: Connection refused\n"
)
# iperf 2.2.1 -e --bounceback, the result line.
IPERF2_BOUNCEBACK = (
    "[ ID] Interval            Transfer    Bandwidth         BB cnt=avg/min/max/stdev"
    "         Rtry  Cwnd(pkts)/RTT(var)   Tx/Rx bytes  RPS(avg)\n"
    "[  1] 0.0000-1.0011 sec  1018 KBytes  8.33 Mbits/sec    5211=0.187/0.020/11.340/0.731 ms"
    "    0   -(-)/-(-)    Tx= 509 KByte Rx= 509 KByte  RPS=5350\n"
)
# netperf -P 0 -- -o <NP_STREAM> and -o <NP_RR>.
NETPERF_STREAM = "1252.12,1.04,162758656,162773669\n"
NETPERF_RR = "28222.25,1.00,35.35,21,77\n"


def iperf3_doc() -> str:
    return json.dumps({
        "start": {},
        "end": {
            "sum_sent": {"bytes": 1_000_000, "seconds": 1.0, "retransmits": 3},
            "sum_received": {"bytes": 900_000, "seconds": 0.5},
        },
    })


class Iperf3Json(unittest.TestCase):
    def test_rates_from_the_end_sums(self):
        m = parse_iperf3_json(iperf3_doc())
        self.assertEqual(m["rx_bytes"], 900_000)
        self.assertEqual(m["rx_bps"], 900_000 * 8 / 0.5)
        self.assertEqual(m["tx_bps"], 1_000_000 * 8 / 1.0)
        self.assertEqual(m["seconds"], 0.5)
        self.assertEqual(m["retransmits"], 3)
        self.assertNotIn("data_path", m)

    def test_bidir_adds_the_reverse_direction(self):
        doc = json.loads(iperf3_doc())
        doc["end"]["sum_sent_bidir_reverse"] = {"bytes": 2_000_000, "seconds": 1.0}
        doc["end"]["sum_received_bidir_reverse"] = {"bytes": 1_800_000, "seconds": 0.5}
        m = parse_iperf3_json(json.dumps(doc))
        self.assertEqual(m["rx_bytes"], 2_700_000)
        self.assertEqual(m["rx_bps"], 2_700_000 * 8 / 0.5)
        self.assertEqual(m["tx_bytes"], 3_000_000)

    def test_netmeter_data_path_and_warnings_from_start_and_end(self):
        doc = json.loads(iperf3_doc())
        doc["start"]["netmeter"] = {"data_path": "sendmmsg+gso", "warnings": ["a"]}
        doc["end"]["netmeter"] = {"warnings": ["b"]}
        m = parse_iperf3_json(json.dumps(doc))
        self.assertEqual(m["data_path"], "sendmmsg+gso")
        self.assertEqual(m["netmeter_warnings"], ["a", "b"])

    def test_errors(self):
        with self.assertRaisesRegex(ValueError, "no JSON"):
            parse_iperf3_json("iperf3: error - unable to connect")
        with self.assertRaisesRegex(ValueError, "tool error: refused"):
            parse_iperf3_json(json.dumps({"error": "refused"}))
        with self.assertRaisesRegex(ValueError, "no end.sum_received"):
            parse_iperf3_json(json.dumps({"end": {}}))


class Iperf2(unittest.TestCase):
    def test_classic_tcp_lines(self):
        rows = iperf2_csv_rows(IPERF2_TCP_CLIENT)
        self.assertEqual(rows, [{"id": 1, "bytes": 355598400, "bps": 2809494332.0}])

    def test_classic_udp_line_has_loss_fields_and_stderr_is_ignored(self):
        rows = iperf2_csv_rows(IPERF2_UDP_CLIENT)
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]["bytes"], 1308300)
        self.assertEqual((rows[0]["lost"], rows[0]["total"]), (0, -1))

    def test_enhanced_format_with_header(self):
        text = (
            "time,srcaddress,srcport,dstaddr,dstport,transferid,istart,iend,bytes,speed\n"
            "+0.5,127.0.0.1,1,127.0.0.1,2,3,0.0,1.0,1000,8000\n"
        )
        self.assertEqual(iperf2_csv_rows(text), [{"id": 3, "bytes": 1000, "bps": 8000.0}])

    def test_sum_takes_one_line_per_stream_first_or_last(self):
        rows = [
            {"id": 1, "bytes": 10, "bps": 1.0},
            {"id": 2, "bytes": 20, "bps": 2.0},
            {"id": 1, "bytes": 100, "bps": 10.0},
            {"id": -1, "bytes": 999, "bps": 99.0},  # the [SUM] line
        ]
        self.assertEqual(iperf2_sum(rows, first=True), (30, 3.0))
        self.assertEqual(iperf2_sum(rows, first=False), (120, 12.0))
        with self.assertRaisesRegex(ValueError, "no iperf 2 report line"):
            iperf2_sum([], first=True)

    def test_receiver_is_the_server_unless_reversed(self):
        up = parse_iperf2(IPERF2_TCP_CLIENT, IPERF2_TCP_SERVER, reverse=False)
        self.assertEqual((up["rx_bps"], up["tx_bps"]), (2820734794.0, 2809494332.0))
        rev = parse_iperf2(IPERF2_TCP_CLIENT, IPERF2_TCP_SERVER, reverse=True)
        self.assertEqual((rev["rx_bps"], rev["tx_bps"]), (2809494332.0, 2820734794.0))

    def test_bounceback_rate_and_mean_latency(self):
        m = parse_iperf2_bounceback(IPERF2_BOUNCEBACK)
        self.assertEqual(m["trans_per_s"], 5350.0)
        self.assertAlmostEqual(m["mean_latency_us"], 187.0)
        with self.assertRaisesRegex(ValueError, "no bounceback rate"):
            parse_iperf2_bounceback("RPS=0")


class Netperf(unittest.TestCase):
    def test_omni_last_line_by_name(self):
        v = netperf_omni("some banner\n" + NETPERF_STREAM, NP_STREAM)
        self.assertEqual(v["THROUGHPUT"], 1252.12)
        self.assertEqual(v["REMOTE_BYTES_RECVD"], 162773669.0)
        with self.assertRaisesRegex(ValueError, "unexpected netperf output"):
            netperf_omni(NETPERF_STREAM, NP_RR)
        with self.assertRaisesRegex(ValueError, "no netperf output"):
            netperf_omni("\n", NP_RR)

    def test_tcp_stream(self):
        m = parse_netperf("TCP_STREAM", NETPERF_STREAM)
        self.assertAlmostEqual(m["rx_bps"], 1252.12e6)
        self.assertEqual(m["tx_bytes"], 162758656.0)
        self.assertAlmostEqual(m["tx_bps"], 162758656 * 8 / 1.04)

    def test_tcp_rr(self):
        m = parse_netperf("TCP_RR", NETPERF_RR)
        self.assertEqual(m["trans_per_s"], 28222.25)
        self.assertEqual((m["mean_latency_us"], m["p50_latency_us"], m["p99_latency_us"]), (35.35, 21.0, 77.0))

    def test_tcp_sendfile_classic_table(self):
        text = (
            "Recv   Send    Send\n"
            "Socket Socket  Message  Elapsed\n"
            "131072  16384  16384    1.00     9000.50\n"
        )
        m = parse_netperf("TCP_SENDFILE", text)
        self.assertAlmostEqual(m["rx_bps"], 9000.5e6)
        self.assertAlmostEqual(m["rx_bytes"], 9000.5e6 / 8)


class NetmeterRates(unittest.TestCase):
    def test_bounceback(self):
        doc = {"end": {"netmeter": {"bounceback": {
            "transactions_per_second": 40000.0, "seconds": 1.0,
            "rtt": {"mean_ms": 0.025, "p50_ms": 0.02, "p99_ms": 0.05}}}}}
        m = parse_netmeter_rate(json.dumps(doc), "bounceback")
        self.assertEqual(m["trans_per_s"], 40000.0)
        self.assertAlmostEqual(m["mean_latency_us"], 25.0)
        self.assertAlmostEqual(m["p99_latency_us"], 50.0)

    def test_connect_only(self):
        doc = {"end": {"netmeter": {"connect_only": {
            "connections_per_second": 9000.0, "seconds": 1.0, "failed": 0,
            "transaction": {"mean_ms": 0.1, "p99_ms": 0.4}}}}}
        m = parse_netmeter_rate(json.dumps(doc), "connect")
        self.assertEqual((m["trans_per_s"], m["failed"]), (9000.0, 0))
        self.assertAlmostEqual(m["mean_latency_us"], 100.0)
        self.assertAlmostEqual(m["p99_latency_us"], 400.0)

    def test_missing_rate_and_tool_error(self):
        with self.assertRaisesRegex(ValueError, "no connect rate"):
            parse_netmeter_rate(json.dumps({"end": {}}), "connect")
        with self.assertRaisesRegex(ValueError, "tool error"):
            parse_netmeter_rate(json.dumps({"error": "x"}), "bounceback")


if __name__ == "__main__":
    unittest.main()
