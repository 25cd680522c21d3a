"""Reader latency while a trickle of appends flows: GETs a small stream every
5 ms over one keep-alive connection while a second connection appends to two
streams twice a second (none named: no trickle); prints p50/p99/p999/max in
ms (bench/idle-probe.sh, bench/burst-stall.sh).

    python3 bench/probe.py PORT SECONDS [APPEND_STREAM_A APPEND_STREAM_B]
"""
import http.client
import sys
import threading
import time

port, secs, targets = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:5]
reader = http.client.HTTPConnection("127.0.0.1", port)
reader.request("PUT", "/v1/stream/probe", body=b"x", headers={"Content-Type": "text/plain"})
reader.getresponse().read()
stop = time.time() + secs


def trickle():
    w = http.client.HTTPConnection("127.0.0.1", port)
    i = 0
    while time.time() < stop:
        w.request("POST", "/v1/stream/" + targets[i % 2], body=b"tick", headers={"Content-Type": "text/plain"})
        status = w.getresponse()
        status.read()
        assert status.status == 204, f"append to {targets[i % 2]}: {status.status}"
        i += 1
        time.sleep(0.5)


if targets:
    threading.Thread(target=trickle, daemon=True).start()
lat = []
while time.time() < stop:
    t = time.perf_counter()
    reader.request("GET", "/v1/stream/probe?offset=-1")
    reader.getresponse().read()
    lat.append((time.perf_counter() - t) * 1000)
    time.sleep(0.005)
lat.sort()
n = len(lat)
print(f"probes {n} p50 {lat[n // 2]:.2f} p99 {lat[int(n * 0.99)]:.2f} p999 {lat[int(n * 0.999)]:.2f} max {lat[-1]:.2f} ms")
