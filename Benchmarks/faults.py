"""Which code made each page of locationd's binary resident: the page faults of an idle start.

Usage (root, perf installed: apt-get install linux-perf):

    python3 Benchmarks/faults.py PATH/TO/locationd [SECONDS]

Runs the daemon idle as Benchmarks/footprint.py does, under `perf record -e page-faults -c 1
-d` for SECONDS (default 4), then lists every fault inside the binary: the faulting address
(its section, and the symbol there for code) and the instruction that faulted (its symbol).
A fault maps a whole 64 KiB block of file-backed memory (the kernel's fault-around), so each
line stands for up to 16 resident pages; resident.py shows the pages, this shows the causes.
Totals at the end: faults by section of the address, and by module of the faulting code.
"""
import bisect
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resident import module_of, sections, symbols  # noqa: E402

daemon = os.path.realpath(sys.argv[1])
seconds = sys.argv[2] if len(sys.argv) > 2 else "4"
work = tempfile.mkdtemp(prefix="faults-")
data = os.path.join(work, "pf.data")
sock = os.path.join(work, "idle.sock")
subprocess.run(["timeout", "-s", "INT", seconds, "perf", "record", "-q", "-e", "page-faults", "-c", "1", "-d",
                "-o", data, "--", daemon, "--socket", sock, "--database", "none", "--log-level", "error",
                "--gpsd", "127.0.0.1:1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
out = subprocess.run(["perf", "script", "-i", data, "--show-mmap-events", "-F", "tid,addr,ip"],
                     capture_output=True, text=True).stdout
for name in os.listdir(work):
    os.unlink(os.path.join(work, name))
os.rmdir(work)

base = None
faults = []  # (tid, addr, ip)
for line in out.splitlines():
    m = re.search(r"PERF_RECORD_MMAP2 .*\[0x([0-9a-f]+)\(0x[0-9a-f]+\) @ 0 .*\]: \S+ (\S+)$", line)
    if m and os.path.realpath(m[2]) == daemon and base is None:
        base = int(m[1], 16)
        continue
    m = re.match(r"\s*(\d+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s*$", line)
    if m:
        faults.append((int(m[1]), int(m[2], 16), int(m[3], 16)))
if base is None:
    raise SystemExit("faults.py: no mapping of the binary in the perf data (did it start?)")

secs = sections(daemon)
sec_starts = [s[0] for s in secs]
syms = symbols(daemon)
sym_starts = [s[0] for s in syms]
size = max(s[1] for s in secs)


def section(v):
    i = bisect.bisect_right(sec_starts, v) - 1
    return secs[i][2] if i >= 0 and v < secs[i][1] else "?"


def symbol(v):
    i = bisect.bisect_right(sym_starts, v) - 1
    return syms[i][2] if i >= 0 else "?"


by_section, by_cause = Counter(), Counter()
for tid, addr, ip in faults:
    v = addr - base
    if not 0 <= v < size:
        continue
    sec = section(v)
    inside = 0 <= ip - base < size
    cause = symbol(ip - base) if inside else f"outside the binary ({ip:#x})"
    what = symbol(v) if sec == ".text" else ""
    by_section[sec] += 1
    by_cause[module_of(cause) if inside else "ld.so / libraries / kernel"] += 1
    print(f"{tid:7} {v:#10x} {sec:24} {what[:70]:70} <- {cause[:90]}")
print("\nfaults by section:", ", ".join(f"{s} {n}" for s, n in by_section.most_common()))
print("faults by module of the faulting code:", ", ".join(f"{s} {n}" for s, n in by_cause.most_common()))
