"""bench/scenario20.py's section of docs/benchmarks.md: written between its markers,
replaced on the next run, and kept by bench/run.py's report when it rewrites the file.
`python3 -m unittest discover -s bench -p 'test_*.py'`."""

import tempfile
import unittest
from pathlib import Path

import scenario20
from nmbench.report import KEPT_BEGIN, KEPT_END, kept_section


def run(spread):
    return {
        "flows": 20, "ran": 20, "complete_reports": 20, "start_spread_ms": spread,
        "late_ms_max": 3.0, "controller_cpu_s": 1.5, "controller_cpu_share_of_wall": 0.2,
        "controller_max_rss_mib": 30.0, "wall_s": 9.0, "seconds": 5.0, "rate": "2M",
        "netmeter": "target/release/netmeter",
    }


class Scenario20Section(unittest.TestCase):
    def test_the_section_is_replaced_and_kept(self):
        self.assertEqual((scenario20.BEGIN, scenario20.END), (KEPT_BEGIN, KEPT_END))
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "benchmarks.md"
            p.write_text("# generated\n\nrows\n")
            scenario20.write_doc(p, [run(12.5)])
            self.assertIn("| 1 | 20/20 | 20/20 | 12.5 |", p.read_text())
            scenario20.write_doc(p, [run(7.25), run(None)])
            text = p.read_text()
            self.assertTrue(text.startswith("# generated\n\nrows\n"))
            self.assertNotIn("| 12.5 |", text)
            self.assertIn("| 1 | 20/20 | 20/20 | 7.2 |", text)
            self.assertIn("| 2 | 20/20 | 20/20 | – |", text)
            self.assertEqual(text.count(KEPT_BEGIN), 1)
            kept = kept_section(p)
            self.assertTrue(kept.startswith(KEPT_BEGIN) and kept.endswith(KEPT_END))
            self.assertIn("machine was shared", kept)


if __name__ == "__main__":
    unittest.main()
