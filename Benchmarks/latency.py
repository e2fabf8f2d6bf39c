"""End-to-end latency through a real gpsd: locationd's subscribers vs gpspipe -w.

Usage: python3 latency.py PATH/TO/locationd [EPOCHS]   (SUBSCRIBERS="1 100 1000" by default)

Set-up (all on this machine): this script serves NMEA on a local TCP "feed" port; a real gpsd
(`gpsd -N -b -S PORT tcp://127.0.0.1:FEED`) reads it; `gpspipe -w` and locationd (`--gpsd`)
are both gpsd clients; N subscribers (1, 100, 1000) are connected to locationd's socket with
no filter. For each epoch (RMC+GGA+GST, a new whole second each, written every 50 ms) it
records, with one monotonic clock:
  t_feed  the write of the epoch's last sentence to gpsd,
  t_pipe  when gpspipe's TPV line for that second is read from its stdout (a pipe),
  t_sub   when each subscriber's location event for that second is read.
Reported, p50/p99: gpsd (t_pipe - t_feed; gpsd + gpspipe, the peer's own path), locationd
end to end (t_sub - t_feed) and added by locationd (t_sub - t_pipe for the same epoch).
The subscribers are Benchmarks/loadreader.c (built here with cc): epoll threads, one per core,
a line's time the return of the read that brought it (CLOCK_MONOTONIC, this script's clock
too); its own ceiling is printed first (`loadreader selftest N`, `selftest-tcp N` for
PROTOCOL=gpsd: a trivial writer process and
the reader, lines/s and first-write-to-arrival per epoch), so a row can be told from the
reader's limit. Each row also gives the daemon's VmRSS before the subscribers connect, with
them connected and idle, and its peak (VmHWM) under load, and its CPU time per epoch (user and
system, all its threads, /proc/PID/stat from the first epoch to the end of the run). Without a C compiler the subscribers
are read by this Python process (one timestamp per epoll batch; an upper bound at 1,000).
SUBSCRIBERS (default "1 100 1000 10000") and EPOCH_GAP (seconds between epochs, default 0.05).
PROTOCOL=gpsd makes the subscribers gpsd-protocol clients of locationd's gpsd listener
(`--gpsd-listen` on a free loopback port; `loadreader tcp`: `?WATCH`, TPV lines) instead of
its own protocol on the Unix socket (PROTOCOL=locationd, the default); it needs the native
reader.
For one subscriber it also runs each client alone (gpspipe without locationd, then locationd
without gpspipe, in three alternating rounds) and reports the difference of the two
distributions: on a two-core machine the side-by-side run makes the two clients, gpsd and the
reader queue for a CPU. In the same rounds it runs Benchmarks/relay.c, the least any process
between gpsd and a client can do (read, libgps decode, write), as a reference row.
First it runs two gpspipe clients and reports the second one's lag behind the first: the floor
under any side-by-side "added" figure on this machine (gpsd serves its clients in turn).
Prints markdown table rows; the ratio column is gpspipe's end-to-end time over the subscribers'
(peer time / ours, p50 / p99), so below 1× means the hop through locationd costs time.
"""
import os
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def nmea(body):
    c = 0
    for ch in body.encode():
        c ^= ch
    return f"${body}*{c:02X}\r\n"


def epoch(k):
    s = 36000 + k
    hh, mm, ss = s // 3600, s // 60 % 60, s % 60
    t = f"{hh:02d}{mm:02d}{ss:02d}.00"
    lat = f"4806.{72008 + k:05d}"
    return (nmea(f"GPRMC,{t},A,{lat},N,01132.22306,E,0.500,45.0,100326,,,A")
            + nmea(f"GPGGA,{t},{lat},N,01132.22306,E,1,09,0.9,36.3,M,39.5,M,,")
            + nmea(f"GPGST,{t},3.1,2.5,2.5,0.0,2.5,2.5,3.8")).encode()


def second_of(line):
    i = line.find(b'"time":"')
    if i < 0:
        return None
    ts = line[i + 8:i + 27].decode()          # 2026-03-10T10:00:05
    h, m, s = int(ts[11:13]), int(ts[14:16]), int(ts[17:19])
    return h * 3600 + m * 60 + s - 36000


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(p / 100 * len(v)))]


def us(x):
    return f"{x * 1e6:,.0f} µs"


def ratios(peer, ours):
    """The table's ratio column, peer time / ours, at p50 and p99 (< 1: locationd is slower)."""
    return f"{pct(peer, 50) / pct(ours, 50):.2f}× / {pct(peer, 99) / pct(ours, 99):.2f}×"


def vm_kib(pid, field):
    """VmRSS / VmHWM of a process, in KiB (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_seconds(pid):
    """(user, system) CPU seconds of a process and all its threads (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def read_records(path):
    """loadreader's OUT: {second of the day: [arrival, …]} in time.monotonic() seconds."""
    import array
    import struct
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"LRD1":
        raise RuntimeError(f"{path}: not a loadreader record file")
    _, base = struct.unpack_from("<Iq", data, 4)
    records = array.array("i")
    records.frombytes(data[16:])
    arrivals = {}
    for i in range(0, len(records), 3):
        arrivals.setdefault(records[i], []).append(base / 1e9 + records[i + 2] / 1e6)
    return arrivals


def run(locationd, subscribers, epochs, with_pipe=True, second_pipe=False, reader=None, memory=None):
    """One run; with `second_pipe` (and no locationd) a second gpspipe stands where locationd
    would: gpsd writes to its clients in turn, so the second one's lag behind the first is the
    floor under any "added" figure measured side by side on this machine."""
    work = tempfile.mkdtemp(prefix="latency-", dir=".build-bench")
    feed = socket.socket()
    feed.bind(("127.0.0.1", 0))
    feed.listen(1)
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    gport = probe.getsockname()[1]
    probe.close()
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    listen_port = probe.getsockname()[1]  # locationd's gpsd listener (PROTOCOL=gpsd)
    probe.close()
    procs = []
    try:
        gpsd = subprocess.Popen(["gpsd", "-N", "-b", "-n", "-S", str(gport), f"tcp://127.0.0.1:{feed.getsockname()[1]}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(gpsd)
        time.sleep(0.5)  # set-up only (gpsd binding its port); nothing is timed across it
        sock_path = os.path.join(work, "l.sock")
        if locationd:
            if os.path.basename(locationd) == "relay":  # Benchmarks/relay.c: the least a relay does
                argv = [locationd, "127.0.0.1", str(gport), sock_path]
            else:
                argv = [locationd, "--gpsd", f"127.0.0.1:{gport}", "--socket", sock_path,
                        "--database", "none", "--log-level", "error"]
                if gpsd_protocol(reader):
                    argv += ["--gpsd-listen", f"127.0.0.1:{listen_port}"]
            daemon = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(daemon)
        pipes = []
        for _ in range((1 if with_pipe else 0) + (1 if second_pipe else 0)):
            pipes.append(subprocess.Popen(["gpspipe", "-w", f"127.0.0.1:{gport}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
            procs.append(pipes[-1])
            time.sleep(0.2)  # set-up only: the first gpspipe is gpsd's first client
        deadline = time.monotonic() + 60  # a daemon under valgrind starts slowly
        while locationd and not os.path.exists(sock_path):
            if time.monotonic() > deadline:
                raise RuntimeError("locationd socket did not appear")
            time.sleep(0.02)
        # The TCP listener opens after the Unix socket (seconds later under valgrind).
        while locationd and gpsd_protocol(reader):
            try:
                socket.create_connection(("127.0.0.1", listen_port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("locationd's gpsd-protocol listener did not open")
                time.sleep(0.02)
        sel = selectors.DefaultSelector()
        subs = []
        native = None
        if memory is not None and locationd:
            memory["before"] = vm_kib(daemon.pid, "VmRSS")
        if reader and subscribers:
            out_path = os.path.join(work, "arrivals")
            server = ["tcp", f"127.0.0.1:{listen_port}"] if gpsd_protocol(reader) else ["unix", sock_path]
            native = subprocess.Popen([reader, *server, str(subscribers), out_path],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            procs.append(native)
            ready = native.stdout.readline()
            if not ready.startswith(b"ready"):
                raise RuntimeError(f"loadreader did not get its subscribers ready: {ready!r}")
            subscribers_here = 0
        else:
            subscribers_here = subscribers
        if memory is not None and locationd:
            memory["idle"] = vm_kib(daemon.pid, "VmRSS")
        for i in range(subscribers_here):
            c = socket.socket(socket.AF_UNIX)
            c.connect(sock_path)
            c.sendall(b'{"type":"session.start","id":0}\n{"type":"subscribe","id":1}\n')
            subs.append(c)
        for c in subs:
            buf = b""
            while b'"subscribed"' not in buf:
                data = c.recv(65536)
                if not data or b'"type":"error"' in data:
                    raise RuntimeError(f"subscribing failed: {(buf + data).decode(errors='replace')}")
                buf += data
            c.setblocking(False)
            sel.register(c, selectors.EVENT_READ, ("sub", bytearray()))
        for i, pipe in enumerate(pipes):
            os.set_blocking(pipe.stdout.fileno(), False)
            sel.register(pipe.stdout, selectors.EVENT_READ, ("pipe" if i == 0 else "sub", bytearray()))
        feed.settimeout(10)
        conn, _ = feed.accept()   # gpsd opens the feed once a client watches
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t_feed, t_pipe, t_sub = {}, {}, {}
        warm = 5  # gpsd learns the cycle's last sentence in the first epochs; not counted

        def drain(until):
            while time.monotonic() < until:
                ready = sel.select(max(0.0, until - time.monotonic()))
                now = time.monotonic()  # readiness time, shared by the whole batch
                for key, _ in ready:
                    kind, buf = key.data
                    try:
                        data = os.read(key.fd, 1 << 20)
                    except BlockingIOError:
                        continue
                    buf += data
                    while True:
                        nl = buf.find(b"\n")
                        if nl < 0:
                            break
                        line = bytes(buf[:nl])
                        del buf[:nl + 1]
                        if kind == "pipe" and b'"class":"TPV"' in line and b'"lat"' in line:
                            k = second_of(line)
                            if k is not None:
                                t_pipe.setdefault(k, now)
                        elif kind == "sub" and (b'"type":"location"' in line or b'"class":"TPV"' in line and b'"lat"' in line):
                            k = second_of(line)
                            if k is not None:
                                t_sub.setdefault(k, []).append(now)

        gap = float(os.environ.get("EPOCH_GAP", "0.05"))
        cpu_start = cpu_seconds(daemon.pid) if memory is not None and locationd else None
        for k in range(epochs + warm):
            data = epoch(k)
            conn.sendall(data)
            t_feed[k] = time.monotonic()
            drain(time.monotonic() + gap)
        drain(time.monotonic() + 1.0)
        if cpu_start:
            cpu_end = cpu_seconds(daemon.pid)
            if cpu_end:
                memory["cpu"] = tuple((b - a) / (epochs + warm) for a, b in zip(cpu_start, cpu_end))
        if memory is not None and locationd:
            memory["peak"] = vm_kib(daemon.pid, "VmHWM")
            memory["load"] = vm_kib(daemon.pid, "VmRSS")
        if native:
            native.stdin.close()
            summary = native.stdout.read().decode().strip()
            native.wait(60)
            if memory is not None:
                memory["reader"] = summary
            for k, times in read_records(out_path).items():
                t_sub.setdefault(k - 36000, []).extend(times)
        gpsd_lat = [t_pipe[k] - t_feed[k] for k in range(warm, epochs + warm) if k in t_pipe]
        e2e = [t - t_feed[k] for k in range(warm, epochs + warm) for t in t_sub.get(k, [])]
        added = [t - t_pipe[k] for k in range(warm, epochs + warm) if k in t_pipe for t in t_sub.get(k, [])]
        missing = max(subscribers, 1 if second_pipe else 0) * epochs - len(e2e)
        conn.close()
        for c in subs:
            c.close()
        return gpsd_lat, e2e, added, missing
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
        feed.close()
        shutil.rmtree(work, ignore_errors=True)


def build_relay():
    """Benchmarks/relay.c built into .build-bench (None without a C compiler or libgps-dev)."""
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "relay.c")
    out = os.path.join(".build-bench", "relay")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or subprocess.run([cc, "-O2", source, "-lgps", "-o", out],
                                    stderr=subprocess.DEVNULL).returncode != 0:
        print("(no C compiler or libgps-dev: the minimal relay row is left out)", file=sys.stderr)
        return None
    return out


def gpsd_protocol(reader):
    """Whether locationd's subscribers are gpsd-protocol clients (PROTOCOL=gpsd, native reader only)."""
    return reader is not None and PROTOCOL == "gpsd"


PROTOCOL = os.environ.get("PROTOCOL", "locationd")


def build_reader():
    """Benchmarks/loadreader.c built into .build-bench (None without a C compiler)."""
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loadreader.c")
    out = os.path.join(".build-bench", "loadreader")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or subprocess.run([cc, "-O2", "-pthread", source, "-o", out]).returncode != 0:
        print("(no C compiler: the subscribers are read by this Python process, an upper bound at 1,000)", file=sys.stderr)
        return None
    return out


def mib(kib):
    return "?" if kib is None else f"{kib / 1024:.1f}"


def main():
    # SIGTERM (e.g. from `timeout`) unwinds through run()'s cleanup instead of leaving gpsd,
    # gpspipe and locationd running.
    import signal
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    locationd = sys.argv[1]
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    counts = [int(n) for n in os.environ.get("SUBSCRIBERS", "1 100 1000 10000").split()]
    relay = build_relay()
    reader = build_reader()
    if PROTOCOL not in ("locationd", "gpsd") or (PROTOCOL == "gpsd" and reader is None):
        sys.exit(f"PROTOCOL={PROTOCOL}: locationd or gpsd (gpsd needs a C compiler for the native reader)")
    if reader:
        for n in counts:
            if n > 1:
                mode = "selftest-tcp" if gpsd_protocol(reader) else "selftest"
                test = subprocess.run([reader, mode, str(n), "2"], capture_output=True, text=True)
                fields = dict(f.split("=", 1) for line in test.stdout.splitlines() for f in line.split() if "=" in f and "flood" in line)
                paced = [line for line in test.stdout.splitlines() if "paced" in line]
                p = dict(f.split("=", 1) for f in paced[0].split() if "=" in f) if paced else {}
                print(f"| reader's own ceiling (loadreader {mode}: a trivial writer process), {n} connections | 2 s flood; 200 epochs 50 ms apart"
                      f" | {int(fields.get('lines_per_s', 0)):,} lines/s; first write → arrival p50 {int(p.get('first_write_to_arrival_us_p50', 0)):,} µs"
                      f" / p99 {int(p.get('p99', 0)):,} µs | — | — |")
    g, second, a, _ = run(None, 0, epochs, second_pipe=True)
    if a and g and second:
        print(f"| floor: a second gpspipe -w where locationd would be, p50 / p99 | {epochs} epochs via real gpsd"
              f" | its lag behind the first gpspipe {us(pct(a, 50))} / {us(pct(a, 99))}"
              f" | gpspipe -w (gpsd + client) {us(pct(g, 50))} / {us(pct(g, 99))} | {ratios(g, second)} |")
    for n in counts:
        if n == 1:
            # The same path with one gpsd client at a time: on two cores, gpspipe, locationd,
            # gpsd and this reader running at once queue for a CPU, and that wait lands on
            # whichever client gpsd writes to second. Separate runs compare the distributions,
            # in three alternating rounds so that drift in the machine's load falls on all.
            # The minimal relay (relay.c) shows what any process between gpsd and a client costs.
            g, e, r, missing = [], [], [], 0
            for _ in range(3):
                g += run(None, 0, epochs // 3)[0]
                _, e1, _, m = run(locationd, 1, epochs // 3, with_pipe=False, reader=reader)
                e += e1; missing += m
                if relay:
                    r += run(relay, 1, epochs // 3, with_pipe=False)[1]
            if e and g:
                print(f"| latency gpsd → subscriber, 1 subscriber, one gpsd client at a time, p50 / p99 | {len(g)} epochs via real gpsd"
                      f" | end to end {us(pct(e, 50))} / {us(pct(e, 99))}; difference {us(pct(e, 50) - pct(g, 50))} / {us(pct(e, 99) - pct(g, 99))}"
                      f"{'' if missing == 0 else f'; {missing} events missing'}"
                      f" | gpspipe -w alone {us(pct(g, 50))} / {us(pct(g, 99))} | {ratios(g, e)} |")
            if r and g:
                print(f"| reference: minimal C relay (Benchmarks/relay.c), one gpsd client at a time, p50 / p99 | same rounds"
                      f" | end to end {us(pct(r, 50))} / {us(pct(r, 99))}; difference {us(pct(r, 50) - pct(g, 50))} / {us(pct(r, 99) - pct(g, 99))}"
                      f" | gpspipe -w alone {us(pct(g, 50))} / {us(pct(g, 99))} | {ratios(g, r)} |")
        memory = {}
        g, e, a, missing = run(locationd, n, epochs, reader=reader, memory=memory)
        if not e or not g:
            print(f"| latency, {n} subscriber(s) | {epochs} epochs | no events received | | |")
            continue
        per = (memory["idle"] - memory["before"]) / n if memory.get("idle") and memory.get("before") else None
        cpu = f"; daemon CPU per epoch {us(memory['cpu'][0])} user + {us(memory['cpu'][1])} system" if "cpu" in memory else ""
        kind = "gpsd-protocol client(s)" if gpsd_protocol(reader) else "subscriber(s)"
        print(f"| latency gpsd → subscriber, {n} {kind}, p50 / p99 | {epochs} epochs via real gpsd"
              f" | end to end {us(pct(e, 50))} / {us(pct(e, 99))}; added vs gpspipe {us(pct(a, 50))} / {us(pct(a, 99))}; max {us(max(a))}"
              f"{'' if missing == 0 else f'; {missing} events missing'}"
              f"; daemon VmRSS {mib(memory.get('before'))} MiB alone, {mib(memory.get('idle'))} with them idle"
              f"{'' if per is None else f' ({per:.1f} KiB each)'}, peak {mib(memory.get('peak'))} under load"
              f"{cpu}"
              f" | gpspipe -w (gpsd + client) {us(pct(g, 50))} / {us(pct(g, 99))} | {ratios(g, e)} |")


if __name__ == "__main__":
    main()
