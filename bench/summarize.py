#!/usr/bin/env python3
"""Summarizes sluice-bench JSON results: one Markdown row per run name
(files NAME-ROUND.json), medians over rounds. Used by bench/suite.sh and
bench/ab.sh; with BASE, each run's median ops/s is also given as a ratio to
run BASE's.

usage: bench/summarize.py DIR [BASE]
"""
import glob
import json
import os
import re
import statistics
import sys


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def f(x, spec):
    return "-" if x is None else format(x, spec)


def main(out, base=None):
    groups = {}
    for path in sorted(glob.glob(os.path.join(out, "*.json"))):
        m = re.match(r"(.+)-(\d+)\.json$", os.path.basename(path))
        if not m:
            continue
        with open(path) as fh:
            groups.setdefault(m.group(1), []).append(json.load(fh))

    def get(rs, *keys):
        vals = []
        for r in rs:
            v = r
            for k in keys:
                v = v.get(k) if isinstance(v, dict) else None
            vals.append(v)
        return vals

    print()
    print("| run | rounds | result (median) | p50 ms | p99 ms | p999 ms | errors | server cores | client cores | other cores | server RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    order = ["write", "pool", "batch", "healthz", "fanout", "catchup", "idle", "restart"]

    def key(item):
        name, rs = item
        sc = rs[0].get("scenario", "")
        n = re.findall(r"\d+", name)
        return (name.startswith("shards"), order.index(sc) if sc in order else 99, "bucket" in name,
                int(n[0]) if n else 0, name)

    for name, rs in sorted(groups.items(), key=key):
        sc = rs[0].get("scenario")
        lat = "latency"
        if sc in ("write", "pool", "healthz"):
            result = f"{f(med(get(rs, 'ops_per_sec')), ',.0f')} ops/s"
        elif sc == "batch":
            result = (f"{f(med(get(rs, 'records_per_sec')), ',.0f')} records/s "
                      f"({f(med(get(rs, 'ops_per_sec')), ',.0f')} requests/s)")
        elif sc == "fanout":
            d = [r["delivered"] / r["expected_deliveries"] * 100 if r.get("expected_deliveries") else None for r in rs]
            result = (f"{f(med(get(rs, 'delivered')), ',.0f')} deliveries ({f(med(d), '.1f')}%), "
                      f"{f(med(get(rs, 'achieved_rate')), '.1f')} appends/s, append p99 {f(med(get(rs, 'append_latency', 'p99_ms')), '.1f')} ms")
        elif sc == "catchup":
            passes = ", ".join(f(p["gb_per_sec"], ".2f") for r in rs for p in r.get("passes", []))
            result = (f"{f(med(get(rs, 'read_gb_per_sec_median')), '.2f')} GB/s read (passes {passes}), "
                      f"fill {f(med([r['filled_bytes'] / r['fill_secs'] / 1e6 for r in rs]), '.0f')} MB/s")
            lat = None
        elif sc == "idle":
            result = (f"{f(med(get(rs, 'rss_after_kib')), ',.0f')} KiB RSS after "
                      f"{f(med(get(rs, 'created')), ',.0f')} streams ({f(med(get(rs, 'bytes_per_stream')), '.0f')} B/stream, "
                      f"{f(med([r['created'] / r['create_secs'] for r in rs]), ',.0f')} creates/s)")
            lat = None
        elif sc == "restart":
            result = f"{f(med(get(rs, 'ready_secs')), '.3f')} s to healthz 200 (runs: {', '.join(f(x, '.3f') for x in get(rs, 'ready_secs'))})"
            lat = None
        else:
            result = "?"
            lat = None
        p50 = med(get(rs, lat, "p50_ms")) if lat else None
        p99 = med(get(rs, lat, "p99_ms")) if lat else None
        p999 = med(get(rs, lat, "p999_ms")) if lat else None
        errors = sum(x or 0 for x in get(rs, "errors"))
        rss = med([x / 1024 if x else None for x in get(rs, "server_rss_kib")])
        print(f"| {name} | {len(rs)} | {result} | {f(p50, '.2f')} | {f(p99, '.2f')} | {f(p999, '.2f')} | {errors} "
              f"| {f(med(get(rs, 'server_cpu_cores')), '.2f')} | {f(med(get(rs, 'client_cpu_cores')), '.2f')} "
              f"| {f(med(get(rs, 'other_cpu_cores')), '.2f')} | {f(rss, '.0f')} |")

    sweep = {}
    for name, rs in groups.items():
        m = re.match(r"shards(\d+)-(write|pool)-", name)
        if m:
            sweep.setdefault(int(m.group(1)), {})[m.group(2)] = rs
    if sweep:
        cores = os.cpu_count()
        print()
        print(f"| shards (on {cores} cores) | one connection per stream ops/s (p99 ms) | pooled ops/s (p99 ms) | pooled / per-stream |")
        print("|---|---|---|---|")
        for n in sorted(sweep):
            w, p = sweep[n].get("write", []), sweep[n].get("pool", [])
            wo, po = med(get(w, "ops_per_sec")), med(get(p, "ops_per_sec"))
            ratio = f"{po / wo:.2f}" if wo and po else "-"
            over = f" ({n / cores:g}x oversubscribed)" if cores and n > cores else ""
            print(f"| {n}{over} | {f(wo, ',.0f')} ({f(med(get(w, 'latency', 'p99_ms')), '.1f')}) "
                  f"| {f(po, ',.0f')} ({f(med(get(p, 'latency', 'p99_ms')), '.1f')}) | {ratio} |")

    if base:
        base_ops = med(get(groups[base], "ops_per_sec"))
        print()
        for name, rs in sorted(groups.items()):
            print(f"- {name}: ops/s x{med(get(rs, 'ops_per_sec')) / base_ops:.3f} of {base}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "target/bench-suite", sys.argv[2] if len(sys.argv) > 2 else None)
