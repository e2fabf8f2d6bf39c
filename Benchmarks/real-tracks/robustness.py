#!/usr/bin/env python3
"""Robustness check of visit detection on the dev split (docs/visits.md, "Robustness").

    robustness.py perturb [--cache DIR] --out DIR [--variants V,…]    perturbed variants of the dev tracks
    robustness.py score   --out DIR [--locationctl PATH] [--tracks] [--variants V,…]   P/R/F1 per variant (per track)

`perturb` writes, for each variant V, DIR/V/NAME.nmea for every dev track, DIR/V/dev.list and
DIR/V/labels (a link to the dev labels; for stop-and-go, which inserts time, a folder of them
shifted): the perturbations keep every labelled stay where the person was, so the labels
hold and `locationctl evaluate --dataset DIR/V/dev.list --logs DIR/V` scores a variant as
it scores dev. Deterministic: each track's perturbations come from a generator seeded with
the variant's and the track's names.
"""
import argparse, math, os, random, shutil, subprocess, sys
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


def offset(lat, lon, north, east):
    """The position `north` and `east` metres from (lat, lon)."""
    return (lat + math.degrees(north / EARTH),
            lon + math.degrees(east / (EARTH * math.cos(math.radians(lat)))))


def stay_spans(points, labels):
    end = points[-1][0] if points else 0
    return [(a, end if d is None else d) for a, d in labels]


def indoor(low, high):
    """A receiver under a roof, inside each labelled stay (its first and last fix kept): an
    offset per axis wandering as a Gauss–Markov process (σ drawn per stay from `low`–`high`
    m, 90 s correlation time, from 0 at the arrival), 5 m of white noise, and about every 5
    minutes an excursion of 1–4 fixes 60–120 m off in a random direction (a reflection). The
    person stays where the label says; only the receiver's fixes wander (at 25–40 m, 100–115
    m off now and then, as in the `indoor-jitter` scenario)."""
    def add(points, rng, labels):
        stays = stay_spans(points, labels)
        out, current, north, east, last, excursion, jump, sigma = [], None, 0.0, 0.0, 0.0, 0, (0, 0), 0.0
        for t, lat, lon in points:
            stay = next((s for s in stays if s[0] < t < s[1]), None)
            if stay is None:
                current = None
                out.append((t, lat, lon))
                continue
            if stay is not current:
                current, north, east, last, excursion = stay, 0.0, 0.0, t, 0
                sigma = rng.uniform(low, high)
            phi = math.exp(-(t - last) / 90)
            spread = sigma * math.sqrt(1 - phi * phi)
            north, east = phi * north + rng.gauss(0, spread), phi * east + rng.gauss(0, spread)
            if excursion == 0 and rng.random() < min(1.0, (t - last) / 300):
                excursion = rng.randint(1, 4)
                bearing, far = rng.uniform(0, 2 * math.pi), rng.uniform(60, 120)
                jump = (far * math.cos(bearing), far * math.sin(bearing))
            last = t
            dn, de = jump if excursion else (north, east)
            excursion = max(0, excursion - 1)
            out.append((t, *offset(lat, lon, dn + rng.gauss(0, 5), de + rng.gauss(0, 5))))
        return out
    return add


def reacquisition(points, rng, labels):
    """Dropouts whose first fixes after the gap land 100–300 m off in a random direction, the
    offset shrinking linearly to nothing over 20 s (a receiver re-acquiring with a poor
    solution): a gap of 1–3 minutes inside each labelled stay of 10 minutes or more (at most
    a third of it, a minute or more from its edges), and 2 to 8 gaps of 1–5 minutes (one per
    half hour of track) anywhere else, none over a third of a stay. No gap or settling holds
    a labelled arrival or departure, so each stay keeps its first and last fixes."""
    if len(points) < 2:
        return points
    start, end = points[0][0], points[-1][0]
    stays = stay_spans(points, labels)
    edges = [e for s in stays for e in s]
    gaps = []

    def free(begin, stop):
        if any(begin - 1 <= e <= stop + 21 for e in edges):  # labels are whole seconds; 20 s settling
            return False
        return not any(begin < g1 + 60 and g0 < stop + 60 for g0, g1 in gaps)

    long_stays = [(a, d) for a, d in stays if d - a >= 600]
    for a, d in long_stays:
        for _ in range(50):
            length = rng.uniform(60, min(180, (d - a) / 3))
            begin = rng.uniform(a + 60, d - 81 - length)
            if free(begin, begin + length):
                gaps.append((begin, begin + length))
                break
    count = min(8, max(2, int((end - start) // 1800)))
    for _ in range(200):
        if len(gaps) >= count + len(long_stays):
            break
        length = rng.uniform(60, 300)
        begin = rng.uniform(start, max(start, end - length))
        if any(max(a, begin) < min(d, begin + length) and length > (d - a) / 3 for a, d in stays):
            continue
        if free(begin, begin + length):
            gaps.append((begin, begin + length))
    spikes = []
    for g0, g1 in sorted(gaps):
        bearing, far = rng.uniform(0, 2 * math.pi), rng.uniform(100, 300)
        spikes.append((g0, g1, far * math.cos(bearing), far * math.sin(bearing)))
    out = []
    for t, lat, lon in points:
        if any(g0 < t < g1 for g0, g1, _, _ in spikes):
            continue
        for g0, g1, dn, de in spikes:
            if g1 <= t < g1 + 20:
                k = 1 - (t - g1) / 20
                lat, lon = offset(lat, lon, dn * k, de * k)
        out.append((t, lat, lon))
    return out


def three_minute_progress(points, i):
    """The labelling guide's rule 2: net progress (m/s) between the fixes 90 s either side."""
    t, j, k = points[i][0], i, i
    while j > 0 and points[j][0] > t - 90:
        j -= 1
    while k < len(points) - 1 and points[k][0] < t + 90:
        k += 1
    span = points[k][0] - points[j][0]
    return tracks_distance(points[j], points[k]) / span if span > 0 else 0.0


def crawl_along(path, rng, step, start):
    """Fixes every `step` s from `start` along `path` (its whole length) at a crawl: legs of
    60–120 s at 0.4–0.6 m/s between halts of 20–45 s; 2 m of white noise. None when the crawl
    would last over 8 minutes."""
    along = [0.0]
    for a, b in zip(path, path[1:]):
        along.append(along[-1] + tracks_distance(a, b))
    total, profile, t, d = along[-1], [(0.0, 0.0)], 0.0, 0.0  # (time, distance) corners
    while d < total:
        leg, speed = rng.uniform(60, 120), rng.uniform(0.4, 0.6)
        leg = min(leg, (total - d) / speed)
        t, d = t + leg, d + leg * speed
        profile.append((t, d))
        if d < total:
            t += rng.uniform(20, 45)
            profile.append((t, d))
    if t > 480:
        return None
    out, k, s = [], 0, 0.0
    while s <= t:
        while k + 1 < len(profile) - 1 and profile[k + 1][0] <= s:
            k += 1
        (t0, d0), (t1, d1) = profile[k], profile[min(k + 1, len(profile) - 1)]
        dist = d0 if t1 == t0 else d0 + (d1 - d0) * min(1.0, (s - t0) / (t1 - t0))
        m = max(0, min(len(path) - 2, next((i for i in range(len(along) - 1) if along[i + 1] >= dist), len(path) - 2)))
        seg = along[m + 1] - along[m]
        f = 0.0 if seg == 0 else min(1.0, max(0.0, (dist - along[m]) / seg))
        lat = path[m][1] + (path[m + 1][1] - path[m][1]) * f
        lon = path[m][2] + (path[m + 1][2] - path[m][2]) * f
        out.append((start + s, *offset(lat, lon, rng.gauss(0, 2), rng.gauss(0, 2))))
        s += step
    return out


def stop_and_go(points, rng, labels):
    """Slow stop-and-go on the move (a queue, a car park, a market street): at one to three
    places (one per hour of track) at least 10 minutes and 300 m from every labelled stay,
    the recorded path is followed for 150–180 m at a crawl (crawl_along; 4–8 minutes), at
    the track's own cadence there (1–10 s); the rest of the track comes that much later, the
    labels after it too. Each crawl is checked against the labelling guide with the fixes
    around it: every fix of it makes 0.3 m/s or more of net progress over 3 minutes (rule 2:
    walking, whatever its 30 s speed) and its ends are 150 m or more apart, so no label could
    call it a stay. Returns the points and the labels, shifted."""
    if len(points) < 10:
        return points, labels
    stays = stay_spans(points, labels)
    near = [p for p in points if any(a <= p[0] <= d for a, d in stays)]
    near = near[::max(1, len(near) // 500)]
    wanted = min(3, max(1, int((points[-1][0] - points[0][0]) // 3600)))
    picks = []
    for _ in range(300):
        if len(picks) == wanted:
            break
        i = rng.randrange(len(points) - 2)
        t0 = points[i][0]
        if any(a - 600 < t0 < d + 600 for a, d in stays) or any(abs(t0 - q[0]) < 1200 for q in picks):
            continue
        length, walked, j = rng.uniform(150, 180), 0.0, i
        while j + 1 < len(points) and walked < length and points[j + 1][0] - points[j][0] <= 30:
            walked += tracks_distance(points[j], points[j + 1])
            j += 1
        path = points[i:j + 1]
        if walked < length or tracks_distance(path[0], path[-1]) < 150:
            continue
        if any(a - 600 < points[j][0] < d + 600 for a, d in stays):
            continue
        if any(tracks_distance(q, p) < 300 for q in path[::max(1, len(path) // 20)] + [path[-1]] for p in near):
            continue
        steps = sorted(b[0] - a[0] for a, b in zip(points[max(0, i - 60):i + 60], points[max(1, i - 59):i + 61]))
        picks.append((t0, i, j, max(1, min(10, round(steps[len(steps) // 2])))))
    out, shift, cursor, shifts = [], 0.0, 0, []
    for t0, i, j, step in sorted(picks):
        out.extend((t + shift, lat, lon) for t, lat, lon in points[cursor:i])
        for _ in range(100):
            crawl = crawl_along(points[i:j + 1], rng, step, t0 + shift)
            if crawl is None:
                continue
            added = round(crawl[-1][0] - (points[j][0] + shift))  # the crawl replaces points i…j (whole seconds)
            after = [(t + shift + added, lat, lon) for t, lat, lon in points[j + 1:j + 200] if t < points[j][0] + 200]
            before = [p for p in out[-200:] if p[0] > t0 + shift - 200]
            context = before + crawl + after
            if all(three_minute_progress(context, k) >= 0.3 for k in range(len(before), len(before) + len(crawl))) \
                    and tracks_distance(crawl[0], crawl[-1]) >= 150:
                break
        else:
            crawl = None
        if crawl is None:
            cursor = i
            continue
        out.extend(crawl)
        shift += added
        shifts.append((points[j][0], shift))
        cursor = j + 1
    out.extend((t + shift, lat, lon) for t, lat, lon in points[cursor:])

    def moved(t):
        return None if t is None else t + next((s for since, s in reversed(shifts) if t > since), 0.0)
    return out, [(moved(a), moved(d)) for a, d in labels]


# Auto-pause thresholds (m/s): a bike computer's "when stopped" pause, and a watch's on foot.
RIDING_PAUSE, ON_FOOT_PAUSE = 1.0, 0.25
RIDING = ("ride", "lap", "car", "drive")  # names of tracks by bike or by car; the others are on foot
DENSE_STEP = 5  # s: a track whose median step is longer has no speed of a few seconds to pause on
PAUSE_WINDOW = 5  # s: the speed a device pauses on, from its positions over this long


def auto_pause(points, rng, labels, name=""):
    """A logger that pauses while still (a bike computer's or a sports watch's auto-pause): a
    fix is written only when the speed over the last PAUSE_WINDOW seconds (its distance from
    the earliest fix that recent) is at least the threshold — RIDING_PAUSE for a ride or a
    drive, ON_FOOT_PAUSE on foot — and the track's first and last fixes always. A stop is then
    a silence between fixes a few metres apart; walking about at a stop writes bursts of fixes
    between silences. Computed on the recorded positions, before any noise (a device judges
    its speed by Doppler, which position noise barely touches). A track with fixes further
    apart than DENSE_STEP (median) is returned empty: a sparse logger has no speed of a few
    seconds to pause on, and the variant leaves it out."""
    if len(points) < 3:
        return []
    steps = sorted(b[0] - a[0] for a, b in zip(points, points[1:]))
    if steps[len(steps) // 2] > DENSE_STEP:
        return []
    threshold = RIDING_PAUSE if any(k in name for k in RIDING) else ON_FOOT_PAUSE
    out, j = [points[0]], 0
    for i in range(1, len(points) - 1):
        t = points[i][0]
        while points[j][0] < t - PAUSE_WINDOW:
            j += 1
        if j < i and tracks_distance(points[j], points[i]) >= threshold * (t - points[j][0]):
            out.append(points[i])
    out.append(points[-1])
    return out


# variant -> perturbations applied in order (stop-and-go first, then dropouts, thinning, noise)
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
    "indoor-10-20m": [indoor(10, 20)],
    "indoor-25-40m": [indoor(25, 40)],
    "per-10s+indoor-25-40m": [one_per(10), indoor(25, 40)],
    "indoor-25-40m+noise-15m": [indoor(25, 40), noise(15)],
    "reacquisition": [reacquisition],
    "reacquisition+per-10s": [reacquisition, one_per(10)],
    "reacquisition+noise-15m": [reacquisition, noise(15)],
    "stop-and-go": [stop_and_go],
    "stop-and-go+per-10s": [stop_and_go, one_per(10)],
    "stop-and-go+noise-15m": [stop_and_go, noise(15)],
    "auto-pause": [auto_pause],
    "auto-pause+noise-5m": [auto_pause, noise(5)],
}
NAMED_STEPS = {auto_pause}  # steps that take the track's name (its activity)
PAUSED_STEPS = {auto_pause}  # steps after which a silence in a stay is the stay (labels_hold_paused)


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


def write_labels(name, times, path):
    """dev's labels of `name` with their arrival and departure times replaced by `times`."""
    import json
    iso = lambda t: dt.datetime.fromtimestamp(round(t), dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = [json.loads(line) for line in open(os.path.join(HERE, "labels", name + ".truth")) if line.strip()]
    with open(path, "w") as f:
        for v, (arrival, departure) in zip(lines, times):
            v["arrival"], v["departure"] = iso(arrival), None if departure is None else iso(departure)
            f.write(json.dumps(v) + "\n")


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


def labels_hold_paused(points, labels, dwell=300, edge=150):
    """labels_hold for a logger that pauses while still, as the labelling guide reads its
    tracks: a stop with recording paused is still from the slowing before it to the rolling
    off after it, so a stay is seen from the last fix at or before its arrival to the first
    at or after its departure (or the track's last). Each must exist, within `edge` seconds
    of the label's time (a silence mostly the stay's), and the two span the dwell."""
    if not points:
        return False
    end = points[-1][0]
    for arrival, departure in labels:
        departure = end if departure is None else departure
        before = [p[0] for p in points if p[0] < arrival + 1]  # labels are whole seconds
        after = [p[0] for p in points if p[0] > departure - 1]
        if not before or not after or arrival - before[-1] > edge or after[0] - departure > edge \
                or after[0] - before[-1] < dwell:
            return False
    return True


def perturb(cache, out, only=None):
    tracks.fetch(cache)
    names = dev_names()
    for variant, steps in VARIANTS.items():
        if only and variant not in only:
            continue
        folder = os.path.join(out, variant)
        os.makedirs(folder, exist_ok=True)
        kept, left, sparse, moved = [], [], [], {}
        for name in names:
            points = tracks.track_points(cache, name)
            labels = read_labels(name)
            rng = random.Random(f"{variant}/{name}")
            for step in steps:
                points = step(points, rng, labels, name) if step in NAMED_STEPS else step(points, rng, labels)
                if isinstance(points, tuple):  # a step that moves time (stop_and_go) moves the labels
                    points, labels = points
            path = os.path.join(folder, name + ".nmea")
            hold = labels_hold_paused if PAUSED_STEPS & set(steps) else labels_hold
            if not points or not hold(points, labels):
                (left if points else sparse).append(name)
                if os.path.exists(path):
                    os.remove(path)
                continue
            kept.append(name)
            with open(path, "w") as f:
                f.write(tracks.nmea(points))
            moved[name] = labels
        with open(os.path.join(folder, "dev.list"), "w") as f:
            f.write("".join(f"# left out, a labelled stay shorter than the dwell: {n}\n" for n in left))
            f.write("".join(f"# left out, fixes too far apart to pause on: {n}\n" for n in sparse))
            f.write("".join(n + "\n" for n in kept))
        link = os.path.join(folder, "labels")
        if os.path.islink(link):
            os.remove(link)
        elif os.path.isdir(link):
            shutil.rmtree(link)
        if all(moved[n] == read_labels(n) for n in kept):
            os.symlink(os.path.join(HERE, "labels"), link)
        else:
            os.makedirs(link)
            for n in kept:
                write_labels(n, moved[n], os.path.join(link, n + ".truth"))
    if not only:
        with open(os.path.join(out, "variants.list"), "w") as f:
            f.write("".join(["unperturbed\n"] + [v + "\n" for v in VARIANTS]))


def prf(true, detected, matched):
    p = matched / detected if detected else 1.0
    r = matched / true if true else 1.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def score(out, locationctl, per_track, real, only=None):
    rows = []
    for variant in ["unperturbed"] + [v for v in VARIANTS if not only or v in only]:
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
    ap.add_argument("--variants", help="only these variants (comma-separated)")
    a = ap.parse_args()
    only = set(a.variants.split(",")) - {""} if a.variants else None
    if only and only - set(VARIANTS):
        ap.error(f"no such variant: {', '.join(sorted(only - set(VARIANTS)))}")
    if a.command == "perturb":
        perturb(a.cache, a.out, only)
    else:
        score(a.out, a.locationctl, a.tracks, a.real, only)


if __name__ == "__main__":
    main()
