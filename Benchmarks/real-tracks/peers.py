#!/usr/bin/env python3
"""Stay detection side by side: locationd's visits (`locationctl evaluate`), scikit-mobility's
`stay_locations` and movingpandas' `TrajectoryStopDetector`, scored the same way against the
same labels (docs/visits.md, "Evaluation"; table in docs/benchmarks.md).

    peers.py --dataset dev.list --logs DIR [--locationctl PATH]
    peers.py --scenario NAME [--locationctl PATH]

The peers run in their own Python environments (scikit-mobility 1.3.1 needs pandas < 2 and
shapely < 2, movingpandas current ones): --skmob-python and --movingpandas-python name them;
a peer whose interpreter cannot import it is reported as such. The peers see what locationd
sees: the NMEA logs' fixes (time, position). Parameters as close to locationd's as each
allows: a stay is 5 minutes within 100 m (scikit-mobility: 100 m from the stay's first point;
movingpandas: 150 m diameter).
"""
import argparse, datetime as dt, json, os, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

PEER = r'''
import json, sys, datetime as dt
import pandas as pd
kind, path = sys.argv[1], sys.argv[2]
rows = json.load(open(path))
df = pd.DataFrame(rows, columns=["t", "lat", "lng"])
df["datetime"] = pd.to_datetime(df["t"], unit="s")
out = []
if kind == "skmob":
    import skmob
    from skmob.preprocessing import detection
    tdf = skmob.TrajDataFrame(df[["lat", "lng", "datetime"]].assign(uid=1), latitude="lat", longitude="lng", datetime="datetime", user_id="uid")
    st = detection.stay_locations(tdf, minutes_for_a_stop=5.0, spatial_radius_km=0.1, leaving_time=True)
    for _, r in st.iterrows():
        out.append([r["datetime"].timestamp(), r["leaving_datetime"].timestamp()])
else:
    import movingpandas as mpd, geopandas as gpd
    from datetime import timedelta
    g = gpd.GeoDataFrame(df, geometry=gpd.points_from_xy(df["lng"], df["lat"]), crs="EPSG:4326").set_index("datetime")
    traj = mpd.Trajectory(g, 1)
    for r in mpd.TrajectoryStopDetector(traj).get_stop_time_ranges(max_diameter=150, min_duration=timedelta(minutes=5)):
        out.append([pd.Timestamp(r.t_0).timestamp(), pd.Timestamp(r.t_n).timestamp()])
print(json.dumps(out))
'''


def read_nmea(path):
    """(unix time, lat, lon) of each RMC with status A (the logs have one per epoch)."""
    points = []
    for line in open(path, errors="replace"):
        f = line.strip().split("*")[0].split(",")
        if len(f) < 10 or not f[0].endswith("RMC") or f[2] != "A" or not f[3] or not f[9]:
            continue
        hms, date = f[1], f[9]
        t = dt.datetime(2000 + int(date[4:6]), int(date[2:4]), int(date[0:2]), int(hms[0:2]), int(hms[2:4]),
                        tzinfo=dt.timezone.utc).timestamp() + float(hms[4:])
        lat = int(f[3][:2]) + float(f[3][2:]) / 60
        lon = int(f[5][:3]) + float(f[5][3:]) / 60
        points.append((t, -lat if f[4] == "S" else lat, -lon if f[6] == "W" else lon))
    return points


def parse_time(s):
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() if s else None


def score(detected, truth, end):
    """Time-overlap matching, largest overlap first (Sources/Simulation/Evaluation.swift)."""
    pairs = []
    for di, (da, dd) in enumerate(detected):
        for ti, (ta, td) in enumerate(truth):
            overlap = min(dd if dd is not None else end, td if td is not None else end) - max(da, ta)
            if overlap > 0:
                pairs.append((overlap, di, ti))
    pairs.sort(reverse=True)
    used_d, used_t, arrival, departure = set(), set(), [], []
    for _, di, ti in pairs:
        if di in used_d or ti in used_t:
            continue
        used_d.add(di); used_t.add(ti)
        arrival.append(abs(detected[di][0] - truth[ti][0]))
        if detected[di][1] is not None and truth[ti][1] is not None:
            departure.append(abs(detected[di][1] - truth[ti][1]))
    return {"true": len(truth), "detected": len(detected), "matched": len(used_d), "arrival": arrival, "departure": departure}


def total(scores):
    t = {"true": 0, "detected": 0, "matched": 0, "arrival": [], "departure": []}
    for s in scores:
        for k in t:
            t[k] += s[k]
    return t


def median(xs):
    xs = sorted(xs)
    return xs[(len(xs) + 1) // 2 - 1] if xs else None  # nearest rank, as evaluate


def row(name, s):
    p = s["matched"] / s["detected"] if s["detected"] else (1.0 if not s["true"] else 0.0)
    r = s["matched"] / s["true"] if s["true"] else 1.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    fmt = lambda v: "–" if v is None else f"{round(v)} s"
    return f"| {name} | {s['true']} | {s['detected']} | {s['matched']} | {p:.3f} | {r:.3f} | {f:.3f} | {fmt(median(s['arrival']))} | {fmt(median(s['departure']))} |"


def run_peer(python, kind, points):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(points, f)
    try:
        out = subprocess.run([python, "-c", PEER, kind, f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed")
    return [tuple(x) for x in json.loads(out.stdout)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset")
    ap.add_argument("--logs")
    ap.add_argument("--scenario")
    ap.add_argument("--locationctl", default=os.path.join(HERE, "../../.build/release/locationctl"))
    ap.add_argument("--skmob-python", default=sys.executable)
    ap.add_argument("--movingpandas-python", default=sys.executable)
    a = ap.parse_args()
    tracks = []  # (nmea path, truth path)
    tmp = tempfile.mkdtemp()
    if a.scenario:
        nmea, truth = os.path.join(tmp, "s.nmea"), os.path.join(tmp, "s.truth")
        subprocess.run([a.locationctl, "simulate", a.scenario, "-o", nmea, "--truth", truth], check=True)
        tracks.append((nmea, truth))
        ours = subprocess.run([a.locationctl, "evaluate", a.scenario], capture_output=True, text=True, check=True).stdout
    else:
        names = [l.split("#")[0].strip() for l in open(a.dataset)]
        labels = os.path.join(os.path.dirname(os.path.abspath(a.dataset)), "labels")
        tracks = [(os.path.join(a.logs, n + ".nmea"), os.path.join(labels, n + ".truth")) for n in names if n]
        ours = subprocess.run([a.locationctl, "evaluate", "--dataset", a.dataset, "--logs", a.logs],
                              capture_output=True, text=True, check=True).stdout
    # locationd's own line, from evaluate's summary
    lines = ours.splitlines()
    counts = next(l for l in lines if l.startswith("true visits")).replace(",", "").split()
    med = lambda key: next(l for l in lines if l.startswith(key)).split("median")[1].split("p90")[0].strip()
    tv, dv, mv = int(counts[2]), int(counts[4]), int(counts[6])
    p = mv / dv if dv else 1.0; r = mv / tv if tv else 1.0; f = 2 * p * r / (p + r) if p + r else 0
    print(f"| locationd (streaming) | {tv} | {dv} | {mv} | {p:.3f} | {r:.3f} | {f:.3f} | {med('arrival error')} | {med('departure error')} |")
    for kind, python, label in [("skmob", a.skmob_python, "scikit-mobility stay_locations (offline)"),
                                ("movingpandas", a.movingpandas_python, "movingpandas TrajectoryStopDetector (offline)")]:
        scores = []
        try:
            for nmea, truth in tracks:
                points = read_nmea(nmea)
                visits = [json.loads(l) for l in open(truth) if l.strip()]
                truth_iv = [(parse_time(v["arrival"]), parse_time(v["departure"])) for v in visits]
                scores.append(score(run_peer(python, kind, points), truth_iv, points[-1][0]))
        except RuntimeError as e:
            print(f"| {label} | not run: {e} |")
            continue
        print(row(label, total(scores)))


if __name__ == "__main__":
    main()
