#!/usr/bin/env python3
"""Peak memory of the commands that read saved results, against the size of the file.

Generates a large netmeter -J document (the intervals of src/report/testdata/tcp.json,
repeated with advancing times until the file has the size asked for, written indented as
netmeter -J writes it) and a --repeat document holding two such runs, then runs, each
under /usr/bin/time -v:

  netmeter plot BIG.json -o out.svg
  netmeter report BIG.json -o out.html
  netmeter csv BIG.json -o out.csv
  netmeter compare BIG.json BIG.json
  netmeter compare REPEAT.json REPEAT.json

and prints each one's maximum resident set size and its ratio to the size of the input
(for compare, to the size of one input: both are read). Issue 20 item 7's goal: peak at
most 3x the file. Memory, not time: the figures hold on a busy machine.

Run: python3 bench/result_memory.py [--mb 178] [--netmeter target/release/netmeter]

Measured (release builds, --mb 178: a 219 MB document, a 252 MB --repeat document), peak
over input: before (b145838) plot 6.67x, report 6.67x, csv 3.36x, compare 9.03x, compare
of --repeat documents 12.85x; after 1.45x, 1.45x, 1.72x, 1.43x, 0.63x.
"""

import argparse
import copy
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def big_document(target_bytes):
    """A -J document of about `target_bytes`, indented as netmeter writes it."""
    with open(os.path.join(ROOT, "src/report/testdata/tcp.json")) as f:
        doc = json.load(f)
    pattern = doc["intervals"]
    one = len(json.dumps(pattern[0], indent=2))
    count = max(len(pattern), target_bytes // one)
    step = pattern[0]["streams"][0]["seconds"]
    intervals = []
    for i in range(count):
        iv = copy.deepcopy(pattern[i % len(pattern)])
        t0 = i * step
        for row in iv["streams"] + [iv["sum"]]:
            row["start"], row["end"] = t0, t0 + step
        intervals.append(iv)
    doc["intervals"] = intervals
    return doc


def peak_kib(cmd):
    """Run `cmd` under /usr/bin/time -v: (exit code, max RSS in KiB, stderr tail)."""
    p = subprocess.run(
        ["/usr/bin/time", "-v"] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    tail = [l for l in p.stderr.splitlines() if "\t" not in l][-1:] if p.returncode else []
    return p.returncode, int(m.group(1)) if m else 0, " ".join(tail)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=178, help="size of the -J document, MB")
    ap.add_argument("--netmeter", default=os.path.join(ROOT, "target/release/netmeter"))
    ap.add_argument("--keep", action="store_true", help="keep the generated files")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="nm-result-memory-")
    big = os.path.join(work, "big.json")
    doc = big_document(int(a.mb * 1e6))
    with open(big, "w") as f:
        json.dump(doc, f, indent=2)
    rep = os.path.join(work, "repeat.json")
    half = copy.deepcopy(doc)
    half["intervals"] = half["intervals"][: len(half["intervals"]) // 2]
    with open(rep, "w") as f:
        json.dump({"netmeter_repeat": {"runs": 2}, "runs": [half, half], "statistics": []}, f, indent=2)
    del doc, half
    size = {p: os.path.getsize(p) for p in (big, rep)}
    nm = a.netmeter
    runs = [
        ("plot", [nm, "plot", big, "-o", os.path.join(work, "out.svg")], big),
        ("report", [nm, "report", big, "-o", os.path.join(work, "out.html")], big),
        ("csv", [nm, "csv", big, "-o", os.path.join(work, "out.csv")], big),
        ("compare (-J)", [nm, "compare", big, big], big),
        ("compare (--repeat)", [nm, "compare", rep, rep], rep),
    ]
    print(f"{'command':<22}{'input MB':>10}{'peak MB':>10}{'peak/input':>12}")
    worst = 0.0
    for name, cmd, inp in runs:
        rc, kib, err = peak_kib(cmd)
        ratio = kib * 1024 / size[inp]
        worst = max(worst, ratio)
        note = f"  (exit {rc}: {err})" if rc else ""
        print(f"{name:<22}{size[inp] / 1e6:>10.1f}{kib * 1024 / 1e6:>10.1f}{ratio:>11.2f}x{note}")
    if not a.keep:
        for f in os.listdir(work):
            os.remove(os.path.join(work, f))
        os.rmdir(work)
    else:
        print(f"files kept in {work}")
    print(f"worst: {worst:.2f}x the input (goal: at most 3x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
