"""Tests of the growth case's summaries (no processes): `python3 -m unittest discover -s bench -p 'test_*.py'`."""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nmbench.growth import growth_section, per_stream_kib, summarize_growth  # noqa: E402


def rec(tool, streams, tests, gbps, rss, rep=0, ok=True, **kw):
    r = {"case": "growth", "tool": tool, "label": tool, "streams": streams, "tests": tests, "rep": rep,
         "port": 5201, "server_cmd": ["timeout", "-k", "2", "40", "/x/" + tool, "-s", "-p", "5201"],
         "client_cmd": ["timeout", "-k", "2", "20", "/x/" + tool, "-c", "127.0.0.1", "-p", "5201", "-P",
                        str(streams)],
         "ok": ok, "rx_gbps": gbps, "peak_rss_kib": rss, "peak_threads": streams + 3, "tests_ok": tests}
    r.update(kw)
    return r


class Growth(unittest.TestCase):
    def test_medians_and_ranges_per_tool_and_load(self):
        s = summarize_growth([rec("a", 1, 1, 10.0, 1000, 0), rec("a", 1, 1, 20.0, 3000, 1),
                              rec("a", 1, 1, 12.0, 2000, 2), rec("b", 1, 1, 5.0, 500)])
        a = next(x for x in s if x["tool"] == "a")
        self.assertEqual(a["runs"], 3)
        self.assertEqual(a["rx_gbps"], {"median": 12.0, "min": 10.0, "max": 20.0})
        self.assertEqual(a["peak_rss_kib"]["median"], 2000)
        self.assertEqual(len(s), 2)

    def test_memory_per_extra_stream(self):
        s = summarize_growth([rec("a", 1, 1, 1.0, 4000), rec("a", 128, 1, 1.0, 4000 + 127 * 100)])
        self.assertAlmostEqual(per_stream_kib(s, "a"), 100.0)
        self.assertIsNone(per_stream_kib(s, "b"))  # not measured: no figure, no crash

    def test_section_counts_refused_tests(self):
        recs = [rec("a", 1, 1, 1.0, 4000), rec("a", 128, 1, 1.0, 16700),
                rec("b", 1, 4, 1.0, 4000, ok=False, tests_ok=1, errors=["tool error: busy"])]
        text = growth_section(recs, "t")
        self.assertIn("| b | 4 tests × 1 stream |", text)
        self.assertIn("0/1 (tests ok per run: 1)", text)
        self.assertIn("a 100 KiB", text)
        self.assertIn("`tool error: busy`", text)
        self.assertIn("-p $PORT", text)


class TcpPRatioTest(unittest.TestCase):
    """The summary table pairs each tcpP row with the peer's row of the same layout: the
    full run of 2026-11-23 divided every netmeter -P row by iperf3's fastest (-P 8)."""

    def test_rows_pair_by_layout(self):
        from nmbench.cases import make_rows
        from nmbench.report import parallel_variant, ratio_section
        from nmbench.tools import Tool
        tools = {"netmeter": Tool("netmeter", "netmeter", "netmeter", "/x/netmeter"),
                 "iperf3-3.22": Tool("iperf3-3.22", "iperf3 3.22", "iperf3", "/x/iperf3")}
        rows, _ = make_rows("tcpP", tools, False)
        speed = {("1", True): 20.0, ("2", False): 30.0, ("8", False): 40.0, ("32", False): 35.0}
        summ = {}
        for r in rows:
            v = speed[parallel_variant(r)] * (1.1 if r.is_netmeter else 1.0)
            summ[("tcpP", r.key)] = {"tool": r.tool.key, "rx_gbps": {"median": v, "min": v, "max": v}}
        text = ratio_section(summ, {"tcpP": rows})
        lines = [l for l in text.splitlines() if l.startswith("| tcpP")]
        self.assertEqual(len(lines), 4, text)
        for l in lines:
            self.assertIn("| 1.10× |", l)


if __name__ == "__main__":
    unittest.main()
