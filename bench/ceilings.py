#!/usr/bin/env python3
"""Median tables of bench/catchup-ceiling.sh and bench/append-ceiling.sh
from their `sluice-bench --scenario catchup` JSON files (NAME-ROUND.json).

    bench/ceilings.py read DIR    # read passes: GB/s, server core-s per GB read
    bench/ceilings.py fill DIR    # fills: MB/s, server core-s per GB stored
"""
import glob
import json
import os
import statistics
import sys


def read_run(j):
    """(GB/s, server core-seconds per GB) of a run's read passes."""
    secs = sum(p["secs"] for p in j["passes"])
    gb = sum(p["bytes"] for p in j["passes"]) / 1e9
    return j["read_gb_per_sec_median"], j.get("server_cpu_cores", 0) * secs / gb


def fill_run(j):
    """(MB/s, server core-seconds per GB) of a run's fill."""
    gb = j["filled_bytes"] / 1e9
    return gb * 1e3 / j["fill_secs"], j.get("fill_server_cpu_cores", 0) * j["fill_secs"] / gb


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("read", "fill"):
        sys.exit(__doc__)
    kind, out = sys.argv[1], sys.argv[2]
    measure, unit = (read_run, "GB/s") if kind == "read" else (fill_run, "MB/s")
    runs = {}
    for f in sorted(glob.glob(os.path.join(out, "*.json"))):
        name = os.path.basename(f)[: -len(".json")].rsplit("-", 1)[0]
        with open(f) as fh:
            runs.setdefault(name, []).append(measure(json.load(fh)))
    dd = sorted(glob.glob(os.path.join(out, "dd-*.txt")))
    if dd:
        limits = ", ".join(open(f).read().strip() for f in dd)
        print(f"\ndd oflag=dsync bs=1M (into a written file, into a new one): {limits}")
    print(f"\n{'run':<22} {'rounds':>6} {unit + ' (median)':>14} {'per round':>24} {'server core-s per GB':>21}")
    for name, v in sorted(runs.items()):
        rates = [r for r, _ in v]
        each = ", ".join(f"{r:.2f}" if kind == "read" else f"{r:.0f}" for r in rates)
        med = statistics.median(rates)
        shown = f"{med:.2f}" if kind == "read" else f"{med:.0f}"
        print(f"{name:<22} {len(v):>6} {shown:>14} {each:>24} {statistics.median(c for _, c in v):>21.3f}")


if __name__ == "__main__":
    main()
