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
ones: a stale list costs memory, never correctness. Regenerate it (`make orderfile`) when the daemon's code paths
change much.

What runs is recorded with callgrind (every executed function) over three runs of the release
binary, each with a database file as installed daemons have (a file store runs more of SQLite
than `--database none` does): (1) the daemon idle against an absent gpsd, stopped by SIGTERM; (2) the production path:
a subscriber served from gpsd reports (a stand-in gpsd in this script speaks gpsd's protocol on
a local TCP port: the watch request, then VERSION/DEVICES/WATCH, then a TPV and a SKY every
50 ms), then SIGTERM; (3) a replay of a small generated NMEA log to a subscriber that also asks
for `status`, a SIGHUP reload, then SIGTERM. The functions of run 1 come first (the idle
daemon's working set stays in the fewest blocks), then the others of run 2 (what each gpsd
report runs stays together too), then the rest of run 3; each group sorted by name so the file
is stable. lld moves whole
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
                          stripped, "--socket", sock, "--database", os.path.join(work, f"{name}.sqlite"),
                          "--log-level", "info"] + args,
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


def subscriber(sock):
    """A connected client; the file exists from bind() on, under valgrind listen() may come later."""
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
    return c


def read_locations(c, count=20):
    """Reads from `c` until `count` location events have arrived (or it closes)."""
    received = b""
    while received.count(b'"type":"location"') < count:
        data = c.recv(65536)
        if not data:
            break
        received += data


def drain_and_close(c):
    """Reads `c` until the daemon closes it (it flushes subscribers when it stops)."""
    try:
        while c.recv(65536):
            pass
    except OSError:
        pass
    c.close()


def serve_gpsd(listener, stop):
    """A stand-in gpsd: answers the watch request as gpsd 3.22 does, then reports until `stop`."""
    conn, _ = listener.accept()
    conn.settimeout(60)
    conn.recv(4096)  # ?WATCH={"enable":true,"json":true};
    conn.sendall(b'{"class":"VERSION","release":"3.22","rev":"3.22","proto_major":3,"proto_minor":14}\r\n'
                 b'{"class":"DEVICES","devices":[{"class":"DEVICE","path":"/dev/ttyACM0","driver":"NMEA0183",'
                 b'"activated":"2026-05-04T08:30:00.000Z","flags":1,"native":0,"bps":9600,"parity":"N",'
                 b'"stopbits":1,"cycle":1.00}]}\r\n'
                 b'{"class":"WATCH","enable":true,"json":true,"nmea":false,"raw":0,"scaled":false,'
                 b'"timing":false,"split24":false,"pps":false}\r\n')
    i = 0
    while not stop.is_set():
        t = f"2026-05-04T08:{30 + i // 60:02d}:{i % 60:02d}.000Z"
        tpv = (f'{{"class":"TPV","device":"/dev/ttyACM0","mode":3,"time":"{t}","ept":0.005,'
               f'"lat":{52.5 + i * 1e-4:.7f},"lon":{13.4 + i * 1e-4:.7f},"altHAE":74.600,"altMSL":35.100,'
               f'"alt":35.100,"epx":3.2,"epy":4.1,"epv":8.7,"track":45.6,"magtrack":49.8,"magvar":4.2,'
               f'"speed":6.328,"climb":0.000,"eps":8.21,"epc":17.40,"geoidSep":39.500,"eph":5.4,'
               f'"sep":10.3}}\r\n')
        sky = (f'{{"class":"SKY","device":"/dev/ttyACM0","time":"{t}","xdop":0.66,"ydop":0.83,'
               f'"vdop":1.30,"tdop":0.79,"hdop":0.90,"gdop":2.10,"pdop":1.60,"nSat":9,"uSat":9}}\r\n')
        try:
            conn.sendall(tpv.encode())
            conn.sendall(sky.encode())
        except OSError:
            break
        i += 1
        stop.wait(0.05)
    conn.close()


def gpsd_serving(listener):
    def drive(p, sock):
        import threading
        stop = threading.Event()
        feeder = threading.Thread(target=serve_gpsd, args=(listener, stop))
        feeder.start()
        c = subscriber(sock)
        c.sendall(b'{"type":"session.start","id":1}\n{"type":"subscribe","id":2}\n')
        read_locations(c)
        p.send_signal(signal.SIGTERM)
        stop.set()
        drain_and_close(c)
        feeder.join()
    return drive


def busy(p, sock):
    c = subscriber(sock)
    c.sendall(b'{"type":"status","id":1}\n{"type":"session.start","id":2,"authorization":"always"}\n'
              b'{"type":"subscribe","id":3,"events":["location","visits","significant"]}\n')
    read_locations(c)
    p.send_signal(signal.SIGHUP)
    time.sleep(3)  # the reload runs meanwhile; its log line is not waited for under valgrind
    p.send_signal(signal.SIGTERM)
    drain_and_close(c)


try:
    # valgrind cannot read the DWARF lld writes for Swift; the symbol table is enough.
    stripped = os.path.join(work, "locationd")
    subprocess.run(["strip", "-g", "-o", stripped, daemon], check=True)
    log = os.path.join(work, "drive.nmea")
    make_log(log)
    first = callgrind("idle", ["--gpsd", "127.0.0.1:1"], idle)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(120)
    serving = callgrind("gpsd", ["--gpsd", f"127.0.0.1:{listener.getsockname()[1]}"], gpsd_serving(listener))
    listener.close()
    second = callgrind("busy", ["--replay", log, "--speed", "20"], busy)
    defined = set(subprocess.run(["nm", "--defined-only", "-j", daemon], capture_output=True, text=True).stdout.split())
    sizes = section_sizes(linkmap)
    small = {n for n in defined if sizes.get(n, LARGE) < LARGE}
    ordered = (sorted(first & small) + sorted((serving - first) & small)
               + sorted((second - first - serving) & small)
               + sorted((first | serving | second) & (defined - small)))
    with open(output, "w") as f:
        f.write("".join(name + "\n" for name in ordered))
    print(f"{output}: {len(ordered)} functions ({len(first & defined)} of the idle daemon first,"
          f" then {len((serving - first) & defined)} more of serving from gpsd)")
finally:
    shutil.rmtree(work, ignore_errors=True)
