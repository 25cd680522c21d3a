#!/usr/bin/env python3
"""Tabulates bench/compare.sh results (files SERVER-RUN-ROUND.json, medians
over rounds) as one Markdown table with a column per server, and draws
DIR/pool.svg: pooled-write throughput and p99 against connections.

usage: bench/compare.py DIR SERVER...
"""
import glob
import json
import os
import re
import statistics
import sys

NAMES = {
    "sluice": "sluice",
    "rust": "Rust durable-streams 0.1.5 (WAL)",
    "node": "Node reference 0.3.7 (memory)",
    "node-file": "Node reference 0.3.7 (file-backed)",
}
COLORS = {"sluice": "#1f77b4", "rust": "#d62728", "node": "#2ca02c", "node-file": "#9467bd"}


def load(out, servers):
    """Runs by (server, scenario) from files named SERVER-SCENARIO-ROUND.json."""
    runs = {}
    kinds = "|".join(re.escape(s) for s in sorted(servers, key=len, reverse=True))
    for path in glob.glob(os.path.join(out, "*.json")):
        m = re.match(rf"({kinds})-(.+)-(\d+)\.json$", os.path.basename(path))
        if m:
            with open(path) as fh:
                runs.setdefault((m.group(1), m.group(2)), []).append(json.load(fh))
    return runs


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def pick(rs, *keys):
    vals = []
    for r in rs:
        for k in keys:
            r = r.get(k) if isinstance(r, dict) else None
        vals.append(r)
    return med(vals)


def cell(runs, server, run):
    rs = runs.get((server, run))
    if not rs:
        return "-"
    sc = rs[0].get("scenario")
    if sc in ("write", "pool"):
        return f"{pick(rs, 'ops_per_sec'):,.0f} /s, p99 {pick(rs, 'latency', 'p99_ms'):.1f} ms"
    if sc == "batch":
        return f"{pick(rs, 'records_per_sec'):,.0f} records/s"
    if sc == "fanout":
        got = med([r["delivered"] / r["expected_deliveries"] * 100 if r.get("expected_deliveries") else None for r in rs])
        return (f"p99 {pick(rs, 'latency', 'p99_ms'):.1f} ms, append p99 {pick(rs, 'append_latency', 'p99_ms'):.1f} ms, "
                f"{pick(rs, 'achieved_rate'):.0f} appends/s, {got:.0f}% delivered")
    if sc == "catchup":
        return f"{pick(rs, 'read_gb_per_sec_median'):.2f} GB/s"
    return "?"


def table(runs, servers):
    names = sorted({run for _, run in runs}, key=order)
    print()
    print("| scenario | " + " | ".join(NAMES.get(s, s) for s in servers) + " |")
    print("|---|" + "---|" * len(servers))
    for run in names:
        counts = "/".join(str(len(runs.get((s, run), []))) for s in servers)
        print(f"| {label(run)} (runs {counts}) | " + " | ".join(cell(runs, s, run) for s in servers) + " |")
    base = "sluice"
    for run in names:
        rs = runs.get((base, run))
        if not rs or rs[0].get("scenario") not in ("write", "pool"):
            continue
        ratios = []
        for s in servers:
            o = runs.get((s, run))
            if s != base and o:
                ratios.append(f"x{pick(rs, 'ops_per_sec') / pick(o, 'ops_per_sec'):.2f} {s}")
        if ratios:
            print(f"- {label(run)}: sluice ops/s " + ", ".join(ratios))


def order(run):
    kinds = ["write", "pool", "fanout", "batch", "catchup"]
    kind = run.split("-")[0]
    n = re.findall(r"\d+", run)
    return (kinds.index(kind) if kind in kinds else 99, int(n[0]) if n else 0)


def label(run):
    kind, _, n = run.partition("-")
    return {
        "write": f"write, {n} streams, one connection each",
        "pool": f"write pooled, {n} connections rotating over the streams",
        "fanout": f"SSE fan-out, {n} subscribers, 50 appends/s",
        "batch": f"append-batch, {n} streams, 512 x 16 B frames",
        "catchup": "catch-up read",
    }.get(kind, run)


def chart(runs, servers, path):
    """Two panels side by side: ops/s and p99 against pooled connections."""
    series = {}
    for s in servers:
        pts = []
        for (srv, run), rs in runs.items():
            m = re.match(r"pool-(\d+)$", run)
            if srv == s and m:
                pts.append((int(m.group(1)), pick(rs, "ops_per_sec"), pick(rs, "latency", "p99_ms")))
        series[s] = sorted(pts)
    xs = sorted({p[0] for pts in series.values() for p in pts})
    if not xs:
        return
    w, h, pad = 420, 300, 60
    panels = [("throughput (ops/s)", 1), ("p99 latency (ms)", 2)]
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * w + 40}" height="{h + 80}" font-family="sans-serif" font-size="12">',
           f'<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{w + 20}" y="18" text-anchor="middle" font-size="14">Pooled durable writes (256 B): each connection rotating over every stream, medians</text>']
    for i, (title, k) in enumerate(panels):
        ox, oy = 20 + i * (w + 20), 40
        top = max((p[k] for pts in series.values() for p in pts if p[k] is not None), default=1) * 1.1 or 1
        px = lambda x: ox + pad + (xs.index(x) / max(len(xs) - 1, 1)) * (w - pad - 20)
        py = lambda y: oy + h - 40 - (y / top) * (h - 60)
        svg.append(f'<text x="{ox + w / 2}" y="{oy}" text-anchor="middle">{title}</text>')
        svg.append(f'<line x1="{ox + pad}" y1="{oy + h - 40}" x2="{ox + w - 20}" y2="{oy + h - 40}" stroke="black"/>')
        svg.append(f'<line x1="{ox + pad}" y1="{oy + 20}" x2="{ox + pad}" y2="{oy + h - 40}" stroke="black"/>')
        for t in range(5):
            v = top * t / 4
            svg.append(f'<text x="{ox + pad - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v:,.0f}</text>')
            svg.append(f'<line x1="{ox + pad}" y1="{py(v):.1f}" x2="{ox + w - 20}" y2="{py(v):.1f}" stroke="#ddd"/>')
        for x in xs:
            svg.append(f'<text x="{px(x):.1f}" y="{oy + h - 24}" text-anchor="middle">{x}</text>')
        svg.append(f'<text x="{ox + w / 2}" y="{oy + h - 6}" text-anchor="middle">connections</text>')
        for s, pts in series.items():
            line = [(p[0], p[k]) for p in pts if p[k] is not None]
            if not line:
                continue
            d = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in line)
            svg.append(f'<polyline points="{d}" fill="none" stroke="{COLORS.get(s, "black")}" stroke-width="2"/>')
            for x, y in line:
                svg.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{COLORS.get(s, "black")}"/>')
    for j, s in enumerate(servers):
        y = h + 62
        x = 40 + j * 280
        svg.append(f'<rect x="{x}" y="{y - 9}" width="12" height="12" fill="{COLORS.get(s, "black")}"/>')
        svg.append(f'<text x="{x + 18}" y="{y + 2}">{NAMES.get(s, s)}</text>')
    svg.append("</svg>")
    with open(path, "w") as fh:
        fh.write("\n".join(svg) + "\n")


def main(out, servers):
    runs = load(out, servers)
    table(runs, servers)
    chart(runs, servers, os.path.join(out, "pool.svg"))
    with open(os.path.join(out, "machine.txt")) as fh:
        print()
        print(fh.read().strip())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or ["sluice", "rust", "node"])
