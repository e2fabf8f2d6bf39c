"""What of a running locationd is resident, and whose code it is.

Usage (as root: /proc/PID/pagemap hides page frames, not presence, from others, but reading
another user's pagemap needs ptrace rights):

    python3 Benchmarks/resident.py PID [--symbols N]
    python3 Benchmarks/resident.py --start PATH/TO/locationd [--symbols N]

`--start` runs the daemon idle the way Benchmarks/footprint.py does (`--gpsd 127.0.0.1:1`,
no subscriber, `--database none`, log level error), waits 3 s, reports and stops it.

Prints:
1. every mapping with resident memory (Rss, Pss, Anonymous from /proc/PID/smaps);
2. for the executable's own mappings, resident KiB per ELF section (pages present in
   /proc/PID/pagemap, bit 63);
3. resident KiB of .text/.rodata/.data.rel.ro per module: each resident page is split among
   the symbols it overlaps (`nm -n -S`), and a symbol's module is read from its Swift mangling
   (`$s7NIOCore…` → NIOCore, `$sS…` standard substitutions → Swift); C and C++ symbols are
   grouped by prefix (`swift_`/`_ZN5swift` → Swift runtime, `_dispatch`/`dispatch_` →
   libdispatch, …). A file-backed code page is mapped in 64 KiB blocks (the kernel's
   fault-around), so a module that is touched once shows at least that much.
"""
import bisect
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

PAGE = os.sysconf("SC_PAGE_SIZE")


def smaps(pid):
    """[(start, end, perms, offset, path, {field: kB})]"""
    out = []
    cur = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) ([0-9a-f]+) \S+ \d+\s*(.*)$", line)
            if m:
                cur = (int(m[1], 16), int(m[2], 16), m[3], int(m[4], 16), m[5].strip(), {})
                out.append(cur)
            elif cur is not None:
                k = re.match(r"^(\w+):\s+(\d+) kB", line)
                if k:
                    cur[5][k[1]] = int(k[2])
    return out


def present_pages(pid, start, end):
    """Addresses of the pages in [start, end) that are present (mapped in the page table)."""
    pages = []
    with open(f"/proc/{pid}/pagemap", "rb") as f:
        f.seek(start // PAGE * 8)
        data = f.read((end - start) // PAGE * 8)
    for i, (entry,) in enumerate(struct.iter_unpack("<Q", data)):
        if entry >> 63 & 1:
            pages.append(start + i * PAGE)
    return pages


def sections(binary):
    out = subprocess.run(["readelf", "-SW", binary], capture_output=True, text=True, check=True).stdout
    secs = []
    for line in out.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", line)
        if m and int(m[2], 16):
            secs.append((int(m[2], 16), int(m[2], 16) + int(m[3], 16), m[1]))
    return sorted(secs)


STD_SUBST = "Swift"  # $sS… (Sa Array, SS String, Si Int, …) and $ss… are the standard library


def read_ident(s, i):
    """A mangled identifier at s[i:] (decimal length, then the name; `0` starts a word-substituted one)."""
    m = re.match(r"(\d+)", s[i:])
    if not m:
        return None
    n = int(m[1])
    j = i + len(m[1])
    return s[j:j + n] if n else None


def module_of(name):
    """A best-effort module name for a symbol (mangled, as nm prints it without --demangle)."""
    for prefix in ("$s", "_$s", "$S", "_T0"):
        if name.startswith(prefix):
            rest = name[len(prefix):]
            break
    else:
        return c_module(name)
    if rest.startswith(("S", "s")):
        return STD_SUBST
    if rest.startswith("So") or rest.startswith("SC"):
        return "C types (__C)"
    ident = read_ident(rest, 0)
    if ident:
        return ident
    return "Swift (other mangling)"


C_PREFIXES = [
    ("_ZN5swift", "Swift runtime (C++)"), ("_ZNK5swift", "Swift runtime (C++)"),
    ("_ZN12_GLOBAL__N_1", "C++ anonymous namespace (runtime)"),
    ("swift_task", "Concurrency runtime"), ("swift_job", "Concurrency runtime"),
    ("swift_continuation", "Concurrency runtime"), ("swift_async", "Concurrency runtime"),
    ("_swift_task", "Concurrency runtime"), ("swift_", "Swift runtime"), ("_swift_stdlib_", "Swift stdlib C (Unicode data …)"),
    ("_swift_", "Swift runtime"), ("__swift", "Swift runtime"), ("_dispatch", "libdispatch"),
    ("dispatch_", "libdispatch"), ("_os_", "libdispatch"), ("_Block", "BlocksRuntime"),
    ("_ZN", "C++ other"), ("_ZNK", "C++ other"), ("_ZT", "C++ other"), ("CNIO", "NIO C shims"),
    ("c_nio", "NIO C shims"), ("locationd_", "our C shims"), ("sqlite3", "sqlite (static?)"),
]


def c_module(name):
    for p, m in C_PREFIXES:
        if name.startswith(p):
            return m
    return "C (other)"


def symbols(binary):
    """Sorted [(address, size, name)] of defined symbols with an address."""
    out = subprocess.run(["nm", "-n", "-S", "--defined-only", binary], capture_output=True, text=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4:
            addr, size, _, name = parts
            syms.append((int(addr, 16), int(size, 16), name))
        elif len(parts) == 3:
            addr, _, name = parts
            syms.append((int(addr, 16), 0, name))
    syms.sort()
    # Symbols without a size extend to the next one.
    fixed = []
    for i, (a, s, n) in enumerate(syms):
        if s == 0 and i + 1 < len(syms):
            s = syms[i + 1][0] - a
        fixed.append((a, s, n))
    return fixed


def attribute(pages, syms, lo, hi):
    """{module: bytes} and {symbol: bytes} for resident pages within [lo, hi) (virtual addresses)."""
    starts = [s[0] for s in syms]
    by_module, by_symbol = defaultdict(int), defaultdict(int)
    for p in pages:
        a, b = max(p, lo), min(p + PAGE, hi)
        if a >= b:
            continue
        i = max(bisect.bisect_right(starts, a) - 1, 0)
        covered = 0
        while i < len(syms) and syms[i][0] < b:
            s0, s1 = syms[i][0], syms[i][0] + syms[i][1]
            o = min(s1, b) - max(s0, a)
            if o > 0:
                by_module[module_of(syms[i][2])] += o
                by_symbol[syms[i][2]] += o
                covered += o
            i += 1
        if covered < b - a:
            by_module["(no symbol)"] += b - a - covered
    return by_module, by_symbol


def kib(n):
    return f"{n / 1024:8.0f}"


def report(pid, nsymbols):
    maps = smaps(pid)
    exe = os.path.realpath(f"/proc/{pid}/exe")
    with open(f"/proc/{pid}/status") as f:
        status = {l.split(":")[0]: l.split(":", 1)[1].strip() for l in f}
    print(f"pid {pid} {exe}")
    print(f"VmRSS {status['VmRSS']}, Threads {status['Threads']}")
    total = defaultdict(int)
    for m in maps:
        for k in ("Rss", "Pss", "Anonymous"):
            total[k] += m[5].get(k, 0)
    print(f"Rss {total['Rss']} kB, Pss {total['Pss']} kB, Anonymous {total['Anonymous']} kB\n")

    print("== mappings with resident memory (KiB): Rss Pss Anon perms path")
    grouped = defaultdict(lambda: [0, 0, 0])
    for s, e, perms, off, path, f in maps:
        key = (os.path.basename(path) or "[anon]", perms)
        g = grouped[key]
        g[0] += f.get("Rss", 0); g[1] += f.get("Pss", 0); g[2] += f.get("Anonymous", 0)
    by_lib = defaultdict(int)
    for (name, perms), (rss, pss, anon) in sorted(grouped.items(), key=lambda kv: -kv[1][0]):
        by_lib[name] += rss
        if rss:
            print(f"{rss:8} {pss:8} {anon:8} {perms} {name}")
    print("\n== Rss per file (KiB)")
    for name, rss in sorted(by_lib.items(), key=lambda kv: -kv[1]):
        if rss:
            print(f"{rss:8} {name}")

    mine = [m for m in maps if m[4] == exe]
    base = min(m[0] for m in mine if m[3] == 0)
    secs = sections(exe)
    sec_starts = [s[0] for s in secs]
    per_section = defaultdict(int)
    resident = []  # virtual addresses (relative to the ELF's)
    for s, e, perms, off, path, f in mine:
        for p in present_pages(pid, s, e):
            v = p - base
            resident.append(v)
            i = bisect.bisect_right(sec_starts, v + PAGE - 1) - 1
            # A page may hold several sections: split it.
            j = max(bisect.bisect_right(sec_starts, v) - 1, 0)
            hit = 0
            while j < len(secs) and secs[j][0] < v + PAGE:
                o = min(secs[j][1], v + PAGE) - max(secs[j][0], v)
                if o > 0:
                    per_section[secs[j][2]] += o
                    hit += o
                j += 1
            if hit < PAGE:
                per_section["(between sections)"] += PAGE - hit
    print(f"\n== {os.path.basename(exe)}: resident KiB per section (of its size)")
    sizes = {n: e - s for s, e, n in secs}
    for name, n in sorted(per_section.items(), key=lambda kv: -kv[1]):
        size = sizes.get(name)
        print(f"{kib(n)} {name}" + (f"  (of {size / 1024:.0f})" if size else ""))

    syms = symbols(exe)
    for sec in (".text", ".rodata", ".data.rel.ro", ".data"):
        span = [s for s in secs if s[2] == sec]
        if not span:
            continue
        lo, hi, _ = span[0]
        by_module, by_symbol = attribute(resident, syms, lo, hi)
        print(f"\n== {sec}: resident KiB per module ({sum(by_module.values()) / 1024:.0f} KiB)")
        for mod, n in sorted(by_module.items(), key=lambda kv: -kv[1]):
            if n >= 1024:
                print(f"{kib(n)} {mod}")
        if nsymbols and sec == ".text":
            print(f"\n== .text: the {nsymbols} symbols with the most resident bytes")
            for name, n in sorted(by_symbol.items(), key=lambda kv: -kv[1])[:nsymbols]:
                print(f"{kib(n)} {module_of(name):24} {name[:140]}")


def main():
    args = sys.argv[1:]
    nsymbols = 0
    if "--symbols" in args:
        i = args.index("--symbols")
        nsymbols = int(args[i + 1])
        del args[i:i + 2]
    if args and args[0] == "--start":
        daemon = args[1]
        work = tempfile.mkdtemp(prefix="resident-")
        sock = os.path.join(work, "idle.sock")
        p = subprocess.Popen([daemon, "--socket", sock, "--database", "none", "--log-level", "error",
                              "--gpsd", "127.0.0.1:1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while not os.path.exists(sock):
                if time.monotonic() > deadline or p.poll() is not None:
                    raise SystemExit("resident.py: the daemon did not create its socket within 10 s")
                time.sleep(0.02)
            time.sleep(3)  # the same settling as footprint.py; nothing is synchronised on it
            report(p.pid, nsymbols)
        finally:
            p.terminate()
            p.wait()
            for name in os.listdir(work):
                os.unlink(os.path.join(work, name))
            os.rmdir(work)
    elif args:
        report(int(args[0]), nsymbols)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
