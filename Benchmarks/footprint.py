"""Footprint of a locationd binary: size, shared libraries, idle RSS, CPU per hour at 1 Hz.

Usage: python3 footprint.py PATH/TO/locationd [SECONDS]
- idle: `--gpsd 127.0.0.1:1` (nothing there: disconnected, retrying), no subscribers; VmRSS and
  VmHWM from /proc after 3 s.
- busy: `--replay .build-bench/day-24h.nmea --speed 1` (1 Hz) with 10 subscribers reading
  everything, for SECONDS (default 30); CPU (utime+stime from /proc/PID/stat) scaled to an hour,
  VmRSS at the end.
Prints markdown table rows.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

daemon = sys.argv[1]
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
log = ".build-bench/day-24h.nmea"
tick = os.sysconf("SC_CLK_TCK")


def status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])  # kB


def rollup(pid, key):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])  # kB


def cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick


def start(args, sock):
    p = subprocess.Popen([daemon, "--socket", sock, "--database", "none", "--log-level", "error"] + args,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not os.path.exists(sock):
        if time.monotonic() > deadline:
            p.kill()
            raise RuntimeError("no socket")
        time.sleep(0.02)
    return p


work = tempfile.mkdtemp(prefix="footprint-", dir=".build-bench")
try:
    size = os.path.getsize(daemon)
    libs = subprocess.run(["ldd", daemon], capture_output=True, text=True).stdout
    swiftlibs = sorted({l.split()[0] for l in libs.splitlines() if "swift" in l or "Foundation" in l or "dispatch" in l.lower()})
    nlibs = len([l for l in libs.splitlines() if "=>" in l])
    print(f"| binary size, shared libraries | locationd | {size / 1048576:.1f} MiB; {nlibs} libraries"
          f"{'; Swift runtime: ' + ', '.join(swiftlibs) if swiftlibs else '; Swift runtime static'} | — | — |")

    p = start(["--gpsd", "127.0.0.1:1"], os.path.join(work, "idle.sock"))
    time.sleep(3)  # settling before a one-off reading; nothing is synchronised on it
    rss, hwm = status(p.pid, "VmRSS"), status(p.pid, "VmHWM")
    anon, pss = rollup(p.pid, "Anonymous"), rollup(p.pid, "Pss")
    p.terminate(); p.wait()
    # RSS counts every mapped page, shared library text included; Pss splits shared pages
    # among their users; Anonymous is the daemon's own heap, stacks and relocated data.
    print(f"| idle memory (no gpsd, no subscribers) | VmRSS / VmHWM / Pss / Anonymous"
          f" | {rss / 1024:.1f} / {hwm / 1024:.1f} / {pss / 1024:.1f} / {anon / 1024:.1f} MiB | — | target RSS ≤ 8 MiB |")

    if os.path.exists(log):
        sock = os.path.join(work, "busy.sock")
        p = start(["--replay", log, "--speed", "1"], sock)
        clients = []
        for _ in range(10):
            c = socket.socket(socket.AF_UNIX)
            c.connect(sock)
            c.sendall(b'{"type":"session.start","id":1,"authorization":"always"}\n'
                      b'{"type":"subscribe","id":2,"events":["location","visits","significant"]}\n')
            c.setblocking(False)
            clients.append(c)
        c0, t0 = cpu(p.pid), time.monotonic()
        received = 0
        while time.monotonic() - t0 < seconds:
            time.sleep(0.2)  # the clients' reading pace; the daemon's CPU is what is measured
            for c in clients:
                try:
                    while True:
                        d = c.recv(65536)
                        if not d:
                            break
                        received += d.count(b'"type":"location"')
                except BlockingIOError:
                    pass
        used, span = cpu(p.pid) - c0, time.monotonic() - t0
        rss = status(p.pid, "VmRSS")
        p.terminate(); p.wait()
        for c in clients:
            c.close()
        print(f"| CPU at 1 Hz, 10 subscribers | replay --speed 1, {span:.0f} s | {used / span * 3600:.1f} s CPU per hour"
              f" ({used / span * 100:.2f} %); VmRSS {rss / 1024:.1f} MiB; {received} events | — | — |")
finally:
    shutil.rmtree(work, ignore_errors=True)
