#!/usr/bin/env python3
"""Is a new connection served while 1,000 subscribers receive events? (docs/benchmarks.md, "Overload")

Starts LOCATIOND replaying LOG at SPEED× to N subscribers (raw Unix sockets, each with a
session and a subscription; the last SILENT of them never read), reads the others for SECONDS,
and every 0.25 s opens a new connection and times connect→hello and status→reply.

    locationctl simulate Scenarios/delivery.json -o delivery.nmea     # a fix in 92 % of epochs
    Benchmarks/overload.py .build/release/locationd delivery.nmea 200 [N=1000] [SILENT=100] [SECONDS=10]

Needs RLIMIT_NOFILE above N (this process holds the other ends). One Python process reads every
subscriber: from a few hundred thousand lines/s on it is the bottleneck itself.
"""
import os, selectors, shutil, socket, statistics, subprocess, sys, tempfile, time

exe, log, speed = sys.argv[1], sys.argv[2], sys.argv[3]
n = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
silent = int(sys.argv[5]) if len(sys.argv) > 5 else 100
seconds = float(sys.argv[6]) if len(sys.argv) > 6 else 10.0

work = tempfile.mkdtemp(prefix="ld-overload-")
path = os.path.join(work, "s.sock")
daemon = subprocess.Popen([exe, "--replay", log, "--speed", speed, "--socket", path, "--database", "none",
                           "--log-level", "warning"], stderr=open(os.path.join(work, "stderr"), "w"))


def line(s, deadline):
    got = b""
    while b"\n" not in got:
        s.settimeout(max(0.001, deadline - time.monotonic()))
        chunk = s.recv(65536)
        if not chunk:
            raise EOFError("closed")
        got += chunk
    return got


def connect():
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    return s


try:
    deadline = time.monotonic() + 10
    while not os.path.exists(path):  # the daemon's startup, not pacing
        if time.monotonic() > deadline or daemon.poll() is not None:
            sys.exit("locationd did not start: " + open(os.path.join(work, "stderr")).read())
        time.sleep(0.02)
    clients = []
    for _ in range(n):
        s = connect()
        line(s, time.monotonic() + 10)
        clients.append(s)
    for s in clients:  # the first subscription starts the replay
        s.sendall(b'{"type":"session.start","id":0}\n{"type":"subscribe","id":1}\n')
    sel = selectors.DefaultSelector()
    for s in clients[:n - silent]:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    hello, reply, failed, lines = [], [], 0, 0
    end = time.monotonic() + seconds
    probe_at = time.monotonic() + 1
    while time.monotonic() < end:
        for key, _ in sel.select(timeout=0.01):
            try:
                while True:
                    chunk = key.fileobj.recv(1 << 16)
                    if not chunk:
                        sel.unregister(key.fileobj)
                        break
                    lines += chunk.count(b"\n")
            except BlockingIOError:
                pass
        if time.monotonic() >= probe_at:
            probe_at = time.monotonic() + 0.25
            a = time.monotonic()
            try:
                s = connect()
                line(s, a + 30)
                b = time.monotonic()
                s.sendall(b'{"type":"status","id":"probe"}\n')
                line(s, b + 30)
                c = time.monotonic()
                hello.append(b - a)
                reply.append(c - b)
                s.close()
            except (OSError, EOFError):
                failed += 1
    rss = open(f"/proc/{daemon.pid}/status").read().split("VmRSS:")[1].split("\n")[0].strip()

    def q(v):
        return f"p50 {statistics.median(v) * 1000:.1f} ms, max {max(v) * 1000:.1f} ms" if v else "none"

    print(f"speed {speed}, {n} subscribers ({silent} silent): {len(hello)} probes ({failed} failed); "
          f"hello {q(hello)}; status reply {q(reply)}; readers got {lines / seconds:.0f} lines/s; VmRSS {rss}")
finally:
    daemon.kill()
    daemon.wait()
    shutil.rmtree(work, ignore_errors=True)
