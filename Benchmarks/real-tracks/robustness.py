#!/usr/bin/env python3
"""Robustness check of visit detection on the dev split (docs/visits.md, "Robustness").

    robustness.py perturb [--cache DIR] --out DIR             perturbed variants of the dev tracks
    robustness.py score   --out DIR [--locationctl PATH] [--tracks]   P/R/F1 per variant (per track)

`perturb` writes, for each variant V, DIR/V/NAME.nmea for every dev track, DIR/V/dev.list and
DIR/V/labels (a link to the dev labels): the perturbations keep every labelled stay where and
when it was, so the labels hold unchanged and `locationctl evaluate --dataset DIR/V/dev.list
--logs DIR/V` scores a variant as it scores dev. Deterministic: each track's noise and
dropouts come from a generator seeded with the variant's and the track's names.
"""
import argparse, math, os, random, subprocess, sys
import datetime as dt

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tracks  # noqa: E402

EARTH = 6371008.8


def every_nth(n):
    """Every n-th fix, from the first: a logger n times slower."""
    return lambda points, rng, labels: points[::n]


def one_per(seconds):
    """The first fix of each `seconds` of time: a logger with that cadence."""
    def thin(points, rng, labels):
        out = []
        for p in points:
            if not out or p[0] - out[-1][0] >= seconds:
                out.append(p)
        return out
    return thin


def noise(sigma):
    """White position noise, `sigma` m per axis (1 σ), added to each fix."""
    def add(points, rng, labels):
        out = []
        for t, lat, lon in points:
            north, east = rng.gauss(0, sigma), rng.gauss(0, sigma)
            out.append((t, lat + math.degrees(north / EARTH),
                        lon + math.degrees(east / (EARTH * math.cos(math.radians(lat))))))
        return out
    return add


def jitter(low, high):
    """A phone's noise: white noise per axis whose σ wanders between `low` and `high` m (a
    random walk, a step per fix), as a phone's fix quality changes with what it sees."""
    def add(points, rng, labels):
        out, sigma = [], (low + high) / 2
        for t, lat, lon in points:
            sigma = min(high, max(low, sigma + rng.gauss(0, (high - low) / 20)))
            north, east = rng.gauss(0, sigma), rng.gauss(0, sigma)
            out.append((t, lat + math.degrees(north / EARTH),
                        lon + math.degrees(east / (EARTH * math.cos(math.radians(lat))))))
        return out
    return add


def on_movement(metres):
    """A distance logger: a fix written only when `metres` from the last written one (none
    while still), and the last fix of the track."""
    def thin(points, rng, labels):
        out = []
        for p in points:
            if not out or tracks_distance(out[-1], p) >= metres:
                out.append(p)
        if points and out[-1] is not points[-1]:
            out.append(points[-1])
        return out
    return thin


def tracks_distance(a, b):
    dlat = math.radians(b[1] - a[1])
    dlon = math.radians(b[2] - a[2]) * math.cos(math.radians((a[1] + b[1]) / 2))
    return EARTH * math.hypot(dlat, dlon)


def dropouts(points, rng, labels):
    """A gap of 1–5 minutes per half hour of track (2 to 8): every fix inside it removed.
    A gap never holds a labelled arrival or departure nor more than half of a labelled stay,
    so each stay keeps its first and last fixes and its label holds."""
    if len(points) < 2:
        return points
    start, end = points[0][0], points[-1][0]
    stays = [(a, end if d is None else d) for a, d in labels]
    count = min(8, max(2, int((end - start) // 1800)))
    gaps = []
    for _ in range(200):
        if len(gaps) == count:
            break
        length = rng.uniform(60, 300)
        begin = rng.uniform(start, max(start, end - length))
        stop = begin + length
        if any(begin - 1 <= edge <= stop + 1 for a, d in stays for edge in (a, d)):  # labels are whole seconds
            continue
        if any(max(a, begin) < min(d, stop) and length > (d - a) / 2 for a, d in stays):
            continue
        if any(begin < g1 + 60 and g0 < stop + 60 for g0, g1 in gaps):  # a fix or more between gaps
            continue
        gaps.append((begin, stop))
    return [p for p in points if not any(g0 < p[0] < g1 for g0, g1 in gaps)]


# variant -> perturbations applied in order (dropouts before thinning, noise last)
VARIANTS = {
    "every-2nd": [every_nth(2)],
    "every-5th": [every_nth(5)],
    "every-10th": [every_nth(10)],
    "per-5s": [one_per(5)],
    "per-10s": [one_per(10)],
    "per-30s": [one_per(30)],
    "per-60s": [one_per(60)],
    "per-120s": [one_per(120)],
    "noise-5m": [noise(5)],
    "noise-15m": [noise(15)],
    "jitter-5-30m": [jitter(5, 30)],
    "on-movement-10m": [on_movement(10)],
    "on-movement-25m": [on_movement(25)],
    "dropouts": [dropouts],
    "per-10s+noise-5m": [one_per(10), noise(5)],
    "every-5th+noise-15m": [every_nth(5), noise(15)],
    "dropouts+noise-15m": [dropouts, noise(15)],
    "dropouts+per-30s": [dropouts, one_per(30)],
    "dropouts+per-10s+noise-15m": [dropouts, one_per(10), noise(15)],
    "per-10s+jitter-5-30m": [one_per(10), jitter(5, 30)],
    "dropouts+per-60s": [dropouts, one_per(60)],
    "dropouts+on-movement-10m": [dropouts, on_movement(10)],
}


def dev_names():
    names = []
    for line in open(os.path.join(HERE, "dev.list")):
        name = line.split("#")[0].strip()
        if name:
            names.append(name)
    return names


def read_labels(name):
    """(arrival, departure or None) of each labelled stay, unix seconds."""
    import json
    out = []
    for line in open(os.path.join(HERE, "labels", name + ".truth")):
        if line.strip():
            v = json.loads(line)
            t = lambda s: dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
            out.append((t(v["arrival"]), None if v["departure"] is None else t(v["departure"])))
    return out


def labels_hold(points, labels, dwell=300):
    """Whether every labelled stay is still one by the labelling guide's clock: its fixes
    (those from its arrival to its departure) span at least the dwell. Thinning a logger that
    knows a stay from a few fixes can leave it shorter, or with none: no label, and no
    detector, can then call it a visit, so such a track is left out of the variant."""
    end = points[-1][0] if points else 0
    for arrival, departure in labels:
        inside = [p[0] for p in points if arrival - 1 < p[0] < (end if departure is None else departure) + 1]  # whole seconds
        if len(inside) < 2 or inside[-1] - inside[0] < dwell:
            return False
    return True


def perturb(cache, out):
    tracks.fetch(cache)
    names = dev_names()
    for variant, steps in VARIANTS.items():
        folder = os.path.join(out, variant)
        os.makedirs(folder, exist_ok=True)
        kept, left = [], []
        for name in names:
            points = tracks.track_points(cache, name)
            labels = read_labels(name)
            rng = random.Random(f"{variant}/{name}")
            for step in steps:
                points = step(points, rng, labels)
            path = os.path.join(folder, name + ".nmea")
            if not labels_hold(points, labels):
                left.append(name)
                if os.path.exists(path):
                    os.remove(path)
                continue
            kept.append(name)
            with open(path, "w") as f:
                f.write(tracks.nmea(points))
        with open(os.path.join(folder, "dev.list"), "w") as f:
            f.write("".join(f"# left out, a labelled stay shorter than the dwell: {n}\n" for n in left))
            f.write("".join(n + "\n" for n in kept))
        link = os.path.join(folder, "labels")
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.join(HERE, "labels"), link)
    with open(os.path.join(out, "variants.list"), "w") as f:
        f.write("".join(["unperturbed\n"] + [v + "\n" for v in VARIANTS]))


def prf(true, detected, matched):
    p = matched / detected if detected else 1.0
    r = matched / true if true else 1.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def score(out, locationctl, per_track, real):
    rows = []
    for variant in ["unperturbed"] + list(VARIANTS):
        if variant == "unperturbed":
            args = ["--dataset", os.path.join(HERE, "dev.list"), "--logs", real]
        else:
            folder = os.path.join(out, variant)
            args = ["--dataset", os.path.join(folder, "dev.list"), "--logs", folder]
        text = subprocess.run([locationctl, "evaluate", *args, "--verbose"], check=True,
                              capture_output=True, text=True).stdout
        totals, tracks_ = [0, 0, 0], []
        count = sum(1 for line in text.splitlines() if ": true " in line)
        for line in text.splitlines():
            if ": true " in line:
                name, rest = line.split(": true ")
                f = rest.replace(",", "").split()
                t, d, m = int(f[0]), int(f[2]), int(f[4])
                totals = [totals[0] + t, totals[1] + d, totals[2] + m]
                if t != m or d != m:
                    tracks_.append(f"{name} {t}/{d}/{m}")
        p, r, f1 = prf(*totals)
        rows.append((variant, count, *totals, p, r, f1, tracks_))
    print("| variant | tracks | true | detected | matched | precision | recall | F1 |")
    print("|---|---|---|---|---|---|---|---|")
    for variant, n, t, d, m, p, r, f1, _ in rows:
        print(f"| {variant} | {n} | {t} | {d} | {m} | {p:.3f} | {r:.3f} | {f1:.3f} |")
    if per_track:
        print("\ntracks not exact (true/detected/matched):")
        for variant, *_, tracks_ in rows:
            print(f"{variant}: {', '.join(tracks_) or '-'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["perturb", "score"])
    ap.add_argument("--cache", default=tracks.DEFAULT_CACHE)
    ap.add_argument("--out", required=True, help="folder of the variants")
    ap.add_argument("--real", default="/tmp/real", help="folder of the unperturbed NMEA (tracks.py nmea --out)")
    ap.add_argument("--locationctl", default=".build/debug/locationctl")
    ap.add_argument("--tracks", action="store_true", help="also list each variant's tracks not scored exactly")
    a = ap.parse_args()
    if a.command == "perturb":
        perturb(a.cache, a.out)
    else:
        score(a.out, a.locationctl, a.tracks, a.real)


if __name__ == "__main__":
    main()
