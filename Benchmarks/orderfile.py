"""Writes scripts/locationd.order: the functions locationd runs, for the linker to place together.

Usage (valgrind installed: apt-get install valgrind), with the release binary and its link map:

    swift build -c release --static-swift-stdlib --scratch-path .build-install --product locationd \
        -Xlinker -Map=/tmp/locationd.map
    python3 Benchmarks/orderfile.py .build-install/release/locationd /tmp/locationd.map [OUTPUT]

Why: a page of code becomes resident in 64 KiB blocks (the kernel's fault-around), and the
functions a daemon runs are scattered over its 9 MiB of text — by module, then by source order
— so touching a few hundred of them made ≈ 100 blocks (6–7 MiB) resident. lld places the
functions named in `--symbol-ordering-file` first, in that order, so they share blocks
(docs/benchmarks.md, "Footprint"). The same code runs; only the layout changes. A name the
binary no longer has is skipped, a function missing from the list is placed after the listed
ones: a stale list costs memory, never correctness. Regenerate it when the daemon's code paths
change much.

What runs is recorded with callgrind (every executed function) over two runs of the release
binary: (1) the daemon idle against an absent gpsd, stopped by SIGTERM; (2) a replay of a small
generated NMEA log to a subscriber that also asks for `status`, a SIGHUP reload, then SIGTERM.
The functions of run 1 come first (the idle daemon's working set stays in the fewest blocks),
then the others of run 2; each group sorted by name so the file is stable. lld moves whole
input sections: most Swift functions have their own (`-function-sections`), but some objects
keep many functions in one large `.text` (the standard library's has 1.6 MB); a function there
would drag its whole section into the cluster, so functions in sections of 64 KiB or more are
listed last (the link map gives each symbol's section).
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

daemon = os.path.realpath(sys.argv[1])
linkmap = sys.argv[2]
output = sys.argv[3] if len(sys.argv) > 3 else os.path.join(os.path.dirname(__file__), "..", "scripts", "locationd.order")
LARGE = 64 * 1024
work = tempfile.mkdtemp(prefix="orderfile-")


def nmea(body):
    checksum = 0
    for c in body.encode():
        checksum ^= c
    return f"${body}*{checksum:02X}\r\n"


def make_log(path, epochs=120):
    """A drive of `epochs` seconds, RMC + GGA + GSA + GST each second."""
    with open(path, "w") as f:
        for i in range(epochs):
            t = f"08{30 + i // 60:02d}{i % 60:02d}.00"
            lat = 5231.0 + i * 0.01
            lon = 1324.0 + i * 0.01
            f.write(nmea(f"GPRMC,{t},A,{lat:.4f},N,0{lon:.4f},E,12.3,45.6,040526,,,A"))
            f.write(nmea(f"GPGGA,{t},{lat:.4f},N,0{lon:.4f},E,1,09,0.9,35.1,M,39.5,M,,"))
            f.write(nmea("GPGSA,A,3,01,02,03,04,05,06,07,08,09,,,,1.6,0.9,1.3"))
            f.write(nmea(f"GPGST,{t},1.2,3.4,2.1,45.0,2.5,2.9,4.1"))


def callgrind(name, args, drive):
    """Runs the daemon under callgrind with `args`, `drive(process, socket_path)` in between."""
    out = os.path.join(work, f"{name}.callgrind")
    sock = os.path.join(work, f"{name}.sock")
    p = subprocess.Popen(["valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={out}",
                          stripped, "--socket", sock, "--database", "none", "--log-level", "info"] + args,
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, f"{name}.log"), "w"))
    deadline = time.monotonic() + 120
    while not os.path.exists(sock):
        if time.monotonic() > deadline or p.poll() is not None:
            p.kill()
            raise SystemExit(f"orderfile.py: run '{name}' did not create {sock}; see {work}/{name}.log")
        time.sleep(0.1)
    drive(p, sock)
    try:
        p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        raise SystemExit(f"orderfile.py: run '{name}' did not stop within 120 s after SIGTERM")
    names = set()
    with open(out) as f:
        for line in f:
            m = re.match(r"^c?fn=\(\d+\) (.+)$", line.rstrip("\n"))
            if m:
                names.add(m[1])
    return names


def section_sizes(path):
    """{symbol: size of the input section holding it}, from an lld link map."""
    sizes, current = {}, None
    with open(path) as f:
        for line in f:
            m = re.match(r"^\s*[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+(\s+)(.*)$", line.rstrip("\n"))
            if not m:
                continue
            if len(m[2]) <= 1:  # an output section
                current = None
            elif ":(" in m[3]:  # an input section: file:(name)
                current = int(m[1], 16)
            elif current is not None:
                sizes[m[3].strip()] = current
    return sizes


def idle(p, sock):
    time.sleep(5)  # the idle daemon's steady state: retrying gpsd, nobody connected
    p.send_signal(signal.SIGTERM)


def busy(p, sock):
    # The file exists from bind() on; under valgrind listen() may come a while later.
    deadline = time.monotonic() + 60
    while True:
        c = socket.socket(socket.AF_UNIX)
        try:
            c.connect(sock)
            break
        except ConnectionRefusedError:
            c.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    c.settimeout(60)
    c.sendall(b'{"type":"status","id":1}\n{"type":"session.start","id":2,"authorization":"always"}\n'
              b'{"type":"subscribe","id":3,"events":["location","visits","significant"]}\n')
    received = b""
    while received.count(b'"type":"location"') < 20:
        data = c.recv(65536)
        if not data:
            break
        received += data
    p.send_signal(signal.SIGHUP)
    time.sleep(3)  # the reload runs meanwhile; its log line is not waited for under valgrind
    p.send_signal(signal.SIGTERM)
    try:
        while c.recv(65536):
            pass
    except OSError:
        pass
    c.close()


try:
    # valgrind cannot read the DWARF lld writes for Swift; the symbol table is enough.
    stripped = os.path.join(work, "locationd")
    subprocess.run(["strip", "-g", "-o", stripped, daemon], check=True)
    log = os.path.join(work, "drive.nmea")
    make_log(log)
    first = callgrind("idle", ["--gpsd", "127.0.0.1:1"], idle)
    second = callgrind("busy", ["--replay", log, "--speed", "20"], busy)
    defined = set(subprocess.run(["nm", "--defined-only", "-j", daemon], capture_output=True, text=True).stdout.split())
    sizes = section_sizes(linkmap)
    small = {n for n in defined if sizes.get(n, LARGE) < LARGE}
    ordered = (sorted(first & small) + sorted((second - first) & small)
               + sorted((first | second) & (defined - small)))
    with open(output, "w") as f:
        f.write("".join(name + "\n" for name in ordered))
    print(f"{output}: {len(ordered)} functions ({len(first & defined)} of the idle daemon first)")
finally:
    shutil.rmtree(work, ignore_errors=True)
