#!/usr/bin/env python3
"""netmeter benchmark harness: `python3 bench/run.py [--runs 5] [--seconds 1] [--smoke] ...`.

The harness is the package beside this file, `bench/nmbench/` (its docstring is the
full usage): `tools` (the netmeter build and the peers), `system` (processes, host
counters), `parsers` (each tool's output), `cases` (command lines, one run), `goals`
(summaries and the goals), `report` (docs/benchmarks.md, bench/results.json), `cli`.
The parsers' tests: `python3 -m unittest discover -s bench -p 'test_*.py'`.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nmbench.cli import main  # noqa: E402 (after the path it is found on)

if __name__ == "__main__":
    sys.exit(main())
