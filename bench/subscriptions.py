#!/usr/bin/env python3
"""Subscriptions under load (issue 30 item 6), A/B in one run.

1. Append throughput (the `write` scenario of sluice-bench, --fsync always)
   on a fresh server without subscriptions and on one with SUBS (10,000)
   pattern subscriptions `tenant-<i>/*` registered (pull-wake, so no webhook
   traffic: what is measured is the pattern index on the append path), in
   alternating order for ROUNDS rounds; prints each run and the ratio of the
   medians.
2. Publish-to-webhook latency on loopback: one webhook subscription answered
   `{"done": true}` by a receiver in this process; one append at a time to a
   matching stream, the time from sending the append to the receiver reading
   the notification; p50/p99/max over SAMPLES appends.

Knobs (environment): ROUNDS=3 DURATION=20s STREAMS=500 SUBS=10000 SAMPLES=500 PORT=4681
Usage: bench/subscriptions.py   (after cargo build --release -p sluice -p sluice-bench)
"""
import http.client
import http.server
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLUICE = os.path.join(ROOT, "target/release/sluice")
BENCH = os.path.join(ROOT, "target/release/sluice-bench")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
DURATION = os.environ.get("DURATION", "20s")
STREAMS = os.environ.get("STREAMS", "500")
SUBS = int(os.environ.get("SUBS", "10000"))
SAMPLES = int(os.environ.get("SAMPLES", "500"))
PORT = int(os.environ.get("PORT", "4681"))


def start_server(data):
    p = subprocess.Popen([SLUICE, "serve", "--listen", f"127.0.0.1:{PORT}", "--data-dir", data,
                          "--fsync", "always", "--allow-local-webhooks"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=2)
            c.request("GET", "/v1/healthz")
            if c.getresponse().status == 200:
                return p
        except OSError:
            time.sleep(0.05)
    p.kill()
    sys.exit("sluice did not start")


def stop(p):
    p.terminate()
    p.wait(timeout=30)


def request(conn, method, path, body=None, ctype="application/json"):
    conn.request(method, path, body=body, headers={"content-type": ctype})
    r = conn.getresponse()
    data = r.read()
    return r.status, data


def create_subscriptions(n, threads=8):
    def worker(k):
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
        for i in range(k, n, threads):
            body = json.dumps({"type": "pull-wake", "pattern": f"tenant-{i}/*", "wake_stream": f"wake/{i}"})
            status, data = request(c, "PUT", f"/v1/stream/__ds/subscriptions/bench-{i}", body)
            assert status == 201, (status, data)
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    started = time.time()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.time() - started


def write_run(with_subs, tag):
    data = tempfile.mkdtemp(prefix="sluice-subs-bench-")
    p = start_server(data)
    try:
        took = create_subscriptions(SUBS) if with_subs else 0.0
        out = os.path.join(data, "result.json")
        subprocess.run([BENCH, "--url", f"http://127.0.0.1:{PORT}", "--server-pid", str(p.pid), "--scenario",
                        "write", "--streams", STREAMS, "--duration", DURATION, "--json", out],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        r = json.load(open(out))
        return r["ops_per_sec"], took, r
    finally:
        stop(p)
        shutil.rmtree(data, ignore_errors=True)


class Receiver(http.server.BaseHTTPRequestHandler):
    arrivals = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["content-length"]))
        Receiver.arrivals.append((time.perf_counter(), json.loads(body)))
        reply = b'{"done":true}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


def webhook_latency():
    data = tempfile.mkdtemp(prefix="sluice-subs-bench-")
    p = start_server(data)
    rx = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=rx.serve_forever, daemon=True).start()
    try:
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
        url = f"http://127.0.0.1:{rx.server_address[1]}/hook"
        body = json.dumps({"type": "webhook", "pattern": "hot/*", "webhook": {"url": url}})
        assert request(c, "PUT", "/v1/stream/__ds/subscriptions/latency", body)[0] == 201
        assert request(c, "PUT", "/v1/stream/hot/1", "[]")[0] == 201
        lat = []
        for i in range(SAMPLES):
            seen = len(Receiver.arrivals)
            sent = time.perf_counter()
            assert request(c, "POST", "/v1/stream/hot/1", json.dumps({"n": i}))[0] == 204
            while len(Receiver.arrivals) == seen:
                time.sleep(0.0002)
            lat.append(Receiver.arrivals[seen][0] - sent)
            # Let the done answer close the wake before the next append (an
            # append while a wake is open is delivered when that wake ends).
            time.sleep(0.05)
        lat.sort()
        q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))] * 1000
        return q(0.5), q(0.99), lat[-1] * 1000
    finally:
        rx.shutdown()
        stop(p)
        shutil.rmtree(data, ignore_errors=True)


def main():
    for b in (SLUICE, BENCH):
        if not os.access(b, os.X_OK):
            sys.exit(f"build first: cargo build --release -p sluice -p sluice-bench ({b} missing)")
    without, with_ = [], []
    for rnd in range(ROUNDS):
        order = [False, True] if rnd % 2 == 0 else [True, False]
        for w in order:
            ops, took, _ = write_run(w, rnd)
            (with_ if w else without).append(ops)
            extra = f", {SUBS} subscriptions created in {took:.1f} s" if w else ""
            load = open("/proc/loadavg").read().split()[0]
            print(f"round {rnd} {'with' if w else 'without'}: {ops:,.0f} appends/s{extra} (load {load})", flush=True)
    a, b = statistics.median(without), statistics.median(with_)
    print(f"write, {STREAMS} streams, --fsync always: median without {a:,.0f}/s, with {SUBS} pattern subscriptions {b:,.0f}/s: x{b / a:.3f}")
    p50, p99, mx = webhook_latency()
    print(f"publish-to-webhook on loopback ({SAMPLES} appends, one at a time): p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {mx:.2f} ms")


if __name__ == "__main__":
    main()
