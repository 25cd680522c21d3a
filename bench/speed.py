#!/usr/bin/env python3
"""Median table of bench/speed.sh's runs: throughput, server CPU per request,
fill and catch-up rates, fan-out latency, and the ratio of each server to the
Rust peer (and of the 1 MiB fill to the disk's dd limit) in the same run."""
import glob
import json
import os
import statistics
import sys

out = sys.argv[1]


def runs(kind, name):
    found = []
    for f in sorted(glob.glob(os.path.join(out, f"{kind}-{name}-*.json"))):
        with open(f) as fh:
            found.append(json.load(fh))
        disk = f[: -len(".json")] + ".disk"
        if os.path.exists(disk):
            found[-1]["disk_written"] = int(open(disk).read())
    return found


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def per_core(r):
    cores = r.get("server_cpu_cores") or 0
    return r["ops_per_sec"] / cores if cores > 0 else None


def disk_per_byte(r):
    """Bytes the disk wrote during a fill run (the whole device) per byte stored."""
    return r["disk_written"] / r["filled_bytes"] if r.get("disk_written") and r.get("filled_bytes") else None


def fill_mb(r):
    return r["filled_bytes"] / r["fill_secs"] / 1e6 if r.get("fill_secs") else None


dd = []
for f in sorted(glob.glob(os.path.join(out, "dd-*.txt"))):
    value, unit = open(f).read().split()[1:3]
    dd.append(float(value) * {"GB/s": 1000, "MB/s": 1, "kB/s": 0.001}[unit])
dd_mb = med(dd)

kinds = [k for k in ("before", "sluice", "rust") if runs(k, "write")]
rows = [
    ("write: appends/s (500 conns, 1 stream each)", "write", lambda r: r["ops_per_sec"], "{:,.0f}"),
    ("write: requests per server core-second", "write", per_core, "{:,.0f}"),
    ("write: p99 ms", "write", lambda r: r["latency"]["p99_ms"], "{:.2f}"),
    ("pool: appends/s (500 conns over 500 streams)", "pool", lambda r: r["ops_per_sec"], "{:,.0f}"),
    ("pool: requests per server core-second", "pool", per_core, "{:,.0f}"),
    ("pool: p99 ms", "pool", lambda r: r["latency"]["p99_ms"], "{:.2f}"),
    ("1 MiB durable appends, a 256 MiB burst: MB/s", "fill-1m", fill_mb, "{:,.0f}"),
    ("... disk bytes written per byte stored during it", "fill-1m", disk_per_byte, "{:.2f}"),
    ("1 MiB durable appends, sustained (1 GiB): MB/s", "fill-1g", fill_mb, "{:,.0f}"),
    ("... disk bytes written per byte stored during it", "fill-1g", disk_per_byte, "{:.2f}"),
    ("64 KiB durable appends: MB/s", "fill-64k", fill_mb, "{:,.0f}"),
    ("catch-up 256 MiB of 1 MiB messages: GB/s", "fill-1m", lambda r: r["read_gb_per_sec_median"], "{:.2f}"),
    ("catch-up 64 MiB of 4 KiB messages: GB/s", "catchup-4k", lambda r: r["read_gb_per_sec_median"], "{:.2f}"),
    ("fan-out 1000 SSE: publish->receive p99 ms", "fanout", lambda r: r["latency"]["p99_ms"], "{:.2f}"),
    ("fan-out 1000 SSE: append p99 ms", "fanout", lambda r: r["append_latency"]["p99_ms"], "{:.2f}"),
]
print(f"medians of {len(dd)} rounds; dd oflag=dsync bs=1M into a preallocated file: {dd_mb:,.0f} MB/s\n")
print("| measure | " + " | ".join(kinds) + " | sluice / rust |")
print("|---" * (len(kinds) + 2) + "|")
for label, name, get, fmt in rows:
    values = {k: med([get(r) for r in runs(k, name)]) for k in kinds}
    cells = [fmt.format(values[k]) if values[k] is not None else "-" for k in kinds]
    ratio = values.get("sluice") / values["rust"] if values.get("sluice") and values.get("rust") else None
    suffix = f"{ratio:.2f}" if ratio else "-"
    print(f"| {label} | " + " | ".join(cells) + f" | {suffix} |")
fill = med([fill_mb(r) for r in runs("sluice", "fill-1m")])
if fill and dd_mb:
    print(f"\n1 MiB durable appends against dd: {fill / dd_mb:.2f} of the disk's limit")
