"""Footprint of a locationd binary: size, shared libraries, idle RSS, CPU per hour at 1 Hz.

Usage: python3 footprint.py [--as-built] [--database none|file] PATH/TO/locationd [SECONDS]
- what runs: by default a copy written with `install -m 755` (as `make install` does) into a
  temporary directory under .build-bench and synced, since that is what users run; with
  `--as-built`, the binary where the linker wrote it. Their resident code can differ: a file
  just written with write(2) (install, cp) sits in the page cache in large folios (64 KiB
  here), which a fault maps whole, so with 4 KiB segment alignment the installed copy idled
  0.4–0.6 MiB above the linker's output (docs/benchmarks.md, "Footprint").
- `--database none` (default): the daemon's tables in memory; `--database file`: a new database
  file in the temporary directory for each run, as an installed daemon has one.
- idle: `--gpsd 127.0.0.1:1` (nothing there: disconnected, retrying), no subscribers; VmRSS and
  VmHWM from /proc after 3 s.
- busy: `--replay .build-bench/day-24h.nmea --speed 1` (1 Hz) with 10 subscribers reading
  everything, for SECONDS (default 30); CPU (utime+stime from /proc/PID/stat) scaled to an hour,
  VmRSS at the end.
Prints markdown table rows; the idle row says which binary ran (installed copy or as built) and
whether with a database file.
"""
import argparse
import os
import shutil
import socket
import subprocess
import tempfile
import time

parser = argparse.ArgumentParser(description="Footprint of a locationd binary (docs/benchmarks.md).")
parser.add_argument("binary")
parser.add_argument("seconds", nargs="?", type=float, default=30.0)
parser.add_argument("--as-built", action="store_true",
                    help="measure the binary where it is, not a freshly installed copy")
parser.add_argument("--database", choices=["none", "file"], default="none",
                    help="none: tables in memory (default); file: a new database file")
opts = parser.parse_args()
built = opts.binary
seconds = opts.seconds
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


def start(args, sock, database="none"):
    p = subprocess.Popen([daemon, "--socket", sock, "--database", database, "--log-level", "error"] + args,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not os.path.exists(sock):
        if time.monotonic() > deadline:
            p.kill()
            raise RuntimeError("no socket")
        time.sleep(0.02)
    return p


os.makedirs(".build-bench", exist_ok=True)
work = tempfile.mkdtemp(prefix="footprint-", dir=".build-bench")
try:
    if opts.as_built:
        daemon, which = built, "as built"
    else:
        # What users run: `make install` writes the binary with install(1). Synced, as an
        # installed binary has long been written back (dirty pages would count differently).
        daemon, which = os.path.join(work, "locationd"), "installed copy"
        subprocess.run(["install", "-m", "755", built, daemon], check=True)
        fd = os.open(daemon, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    size = os.path.getsize(daemon)
    libs = subprocess.run(["ldd", daemon], capture_output=True, text=True).stdout
    swiftlibs = sorted({l.split()[0] for l in libs.splitlines() if "swift" in l or "Foundation" in l or "dispatch" in l.lower()})
    nlibs = len([l for l in libs.splitlines() if "=>" in l])
    print(f"| binary size, shared libraries | locationd | {size / 1048576:.1f} MiB; {nlibs} libraries"
          f"{'; Swift runtime: ' + ', '.join(swiftlibs) if swiftlibs else '; Swift runtime static'} | — | — |")

    database = "none" if opts.database == "none" else os.path.join(work, "idle.sqlite")
    p = start(["--gpsd", "127.0.0.1:1"], os.path.join(work, "idle.sock"), database)
    time.sleep(3)  # settling before a one-off reading; nothing is synchronised on it
    rss, hwm = status(p.pid, "VmRSS"), status(p.pid, "VmHWM")
    anon, pss = rollup(p.pid, "Anonymous"), rollup(p.pid, "Pss")
    p.terminate(); p.wait()
    # RSS counts every mapped page, shared library text included; Pss splits shared pages
    # among their users; Anonymous is the daemon's own heap, stacks and relocated data.
    dbnote = ", database file" if opts.database == "file" else ""
    setup = which + dbnote
    print(f"| idle memory ({setup}, no gpsd, no subscribers) | VmRSS / VmHWM / Pss / Anonymous"
          f" | {rss / 1024:.1f} / {hwm / 1024:.1f} / {pss / 1024:.1f} / {anon / 1024:.1f} MiB | — | target RSS ≤ 10 MiB |")

    if os.path.exists(log):
        sock = os.path.join(work, "busy.sock")
        p = start(["--replay", log, "--speed", "1"], sock,
                  "none" if opts.database == "none" else os.path.join(work, "busy.sqlite"))
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
        print(f"| CPU at 1 Hz, 10 subscribers | replay --speed 1, {span:.0f} s{dbnote} | {used / span * 3600:.1f} s CPU per hour"
              f" ({used / span * 100:.2f} %); VmRSS {rss / 1024:.1f} MiB; {received} events | — | — |")
finally:
    shutil.rmtree(work, ignore_errors=True)
