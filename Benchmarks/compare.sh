#!/usr/bin/env bash
# Benchmarks against peers on the same inputs (docs/benchmarks.md). Builds release, generates a
# 24 h 1 Hz log, then runs:
#   NMEA → JSON   locationd-bench json / locationctl replay   vs  gpsdecode -j
#   NMEA parse    locationd-bench decode                      vs  pynmea2 (venv under .build-bench)
#   pipeline      100 subscribers, 10,000 regions (20 active), visits, significant change
#   cold          locationd-bench cold: one fix through engine + encoder with nothing cached
#   rotation      bench-regions 100000
#   latency       gpsd → subscriber (1/100/1000) vs gpspipe -w, and Benchmarks/relay.c as a
#                 reference relay (Benchmarks/latency.py; the installed, static build)
#   footprint     idle RSS, CPU per hour with 10 subscribers at 1 Hz, binary size (footprint.py,
#                 which runs a freshly installed copy of each build)
# and prints one table. Environment: MIN_SECONDS (per measurement, default 1), SKIP="latency
# footprint pynmea2" to leave parts out. The gpsd corpus (../shared/corpus/gpsd) is used when
# present and skipped otherwise: its logs are joined, at run time, into one input file in the
# bench build folder (never committed), since each tool is timed on one file.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
export MIN_SECONDS="${MIN_SECONDS:-1}"
SKIP="${SKIP:-}"
OUT=.build-bench
mkdir -p "$OUT"
skip() { [[ " $SKIP " == *" $1 "* ]]; }

echo "== building release" >&2
swift build -c release >&2
BIN="$(swift build -c release --show-bin-path)"

LOG="$OUT/day-24h.nmea"
[ -s "$LOG" ] || "$BIN/locationctl" simulate Benchmarks/day-24h.json -o "$LOG"
inputs=("$LOG")
CORPUS_DIR=../shared/corpus/gpsd
if compgen -G "$CORPUS_DIR/*.log" >/dev/null; then
    cat "$CORPUS_DIR"/*.log > "$OUT/corpus.nmea"
    inputs+=("$OUT/corpus.nmea")
else
    echo "(corpus $CORPUS_DIR absent: corpus rows skipped)" >&2
fi

# Seconds per run of a command (stdout discarded), repeated until MIN_SECONDS have passed.
# The clock is bash's own (no process per reading) and the bound is computed once: a helper
# process inside the loop would add its start-up (≈ 30 ms of python3) to every run, 3 % of
# gpsdecode's second but 40 % of a 70 ms replay.
time_cmd() {
    local start end n=0 min_us
    min_us=$(python3 -c "print(int($MIN_SECONDS*1e6))")
    "$@" >/dev/null 2>&1 || true   # warm-up (page cache)
    start=${EPOCHREALTIME/./}
    while :; do
        "$@" >/dev/null 2>&1 || true
        n=$((n + 1)); end=${EPOCHREALTIME/./}
        [ $((end - start)) -ge "$min_us" ] && break
    done
    python3 -c "print(($end - $start) / 1e6 / $n)"
}
field() { tr '\t' '\n' | sed -n "s/^$1=//p" | head -1; }
ratio() { python3 -c "print(f'{$1 / $2:.1f}×')"; }
mbs() { python3 -c "print(f'{$1 / $2 / 1e6:.1f}')"; }
rate() { python3 -c "print(f'{$1 / $2:,.0f}')"; }

if ! skip pynmea2; then
    if [ ! -x "$OUT/venv/bin/python" ]; then
        python3 -m venv "$OUT/venv" >&2 && "$OUT/venv/bin/pip" install -q pynmea2 >&2 || echo "(pynmea2 unavailable)" >&2
    fi
fi

rows=()
row() { rows+=("| $1 | $2 | $3 | $4 | $5 |"); }

for in in "${inputs[@]}"; do
    name=$(basename "$in")
    size=$(stat -c %s "$in")
    bench=$("$BIN/locationd-bench" decode "$in")
    dec=$(grep '^decode' <<<"$bench"); js=$(grep '^json' <<<"$bench")
    fixes=$(field fixes <<<"$dec")
    dec_s=$(python3 -c "print($fixes / $(field fixes_per_s <<<"$dec"))")
    js_s=$(python3 -c "print($fixes / $(field fixes_per_s <<<"$js"))")
    # gpsdecode -j: every report as JSON (TPV, SKY, …); we count its TPVs with a position.
    gd_s=$(time_cmd sh -c "gpsdecode -j < '$in'")
    gd_tpv=$(gpsdecode -j < "$in" | grep '"class":"TPV"' | grep -c '"lat":' || true)
    rp_s=$(time_cmd sh -c "'$BIN/locationctl' replay '$in' --events location")
    rp_n=$("$BIN/locationctl" replay "$in" --events location | grep -c '"type":"location"' || true)
    row "NMEA → JSON, in-process (bench json) vs gpsdecode -j" "$name ($(mbs "$size" 1) MB)" \
        "$(rate "$fixes" "$js_s") fixes/s, $(mbs "$size" "$js_s") MB/s ($fixes fixes)" \
        "$(rate "$gd_tpv" "$gd_s") TPV/s, $(mbs "$size" "$gd_s") MB/s ($gd_tpv TPVs)" "$(ratio "$gd_s" "$js_s")"
    row "NMEA → JSON, whole process (locationctl replay) vs gpsdecode -j" "$name" \
        "$(rate "$rp_n" "$rp_s") events/s, $(mbs "$size" "$rp_s") MB/s ($rp_n events)" \
        "$(rate "$gd_tpv" "$gd_s") TPV/s, $(mbs "$size" "$gd_s") MB/s" "$(ratio "$gd_s" "$rp_s")"
    if [ -x "$OUT/venv/bin/python" ] && ! skip pynmea2; then
        py=$("$OUT/venv/bin/python" Benchmarks/pynmea2_parse.py "$in" "$MIN_SECONDS")
        py_s=$(field seconds <<<"$py"); py_f=$(field fixes <<<"$py")
        row "NMEA parse (bench decode) vs pynmea2.parse" "$name" \
            "$(rate "$fixes" "$dec_s") fixes/s, $(mbs "$size" "$dec_s") MB/s" \
            "$(rate "$py_f" "$py_s") fixes/s, $(mbs "$size" "$py_s") MB/s ($py_f fixes)" "$(ratio "$py_s" "$dec_s")"
    fi
done

pl=$("$BIN/locationd-bench" pipeline "$LOG" 100 10000)
row "pipeline: 100 subscribers, 10,000 regions (20 active), visits, significant" "$(basename "$LOG")" \
    "$(field fixes_per_s <<<"$pl") fixes/s ($(field us_per_fix <<<"$pl") µs/fix, $(field deliveries <<<"$pl") events)" "—" "—"
cold=$("$BIN/locationd-bench" cold 2000)
row "one fix through engine + encoder, cold (caches and TLBs flushed) vs warm, p50 / p99" "2,000 fixes, 1 subscriber" \
    "cold $(field cold_p50_ns <<<"$cold") ns / $(field cold_p99_ns <<<"$cold") ns; warm $(field warm_p50_ns <<<"$cold") ns / $(field warm_p99_ns <<<"$cold") ns" "—" "—"
rr=$("$BIN/bench-regions" 100000)
row "rotation: re-rank query, 100,000 regions" "bench-regions" \
    "$(sed -n 's/^re-rank query.*: \(.*\) µs/\1 µs/p' <<<"$rr" | cut -c1-8) µs/query; $(sed -n 's/^monitor per fix.*: \([0-9.]*\) µs.*/\1/p' <<<"$rr" | cut -c1-6) µs/fix in monitor" "—" "—"

# The installed daemon (make install: static Swift runtime) is what latency is measured on;
# footprint measures it and the dynamic release build.
if ! skip latency || ! skip footprint; then
    swift build -c release --static-swift-stdlib --scratch-path .build-install --product locationd >&2
    STATIC="$(swift build -c release --static-swift-stdlib --scratch-path .build-install --show-bin-path)/locationd"
    sync  # freshly written binaries' page-cache pages would otherwise show as dirty
fi
if ! skip latency; then
    while IFS= read -r line; do rows+=("$line"); done < <(python3 Benchmarks/latency.py "$STATIC" 1000 || echo "| latency | failed | | | |")
fi
if ! skip footprint; then
    for b in "$BIN/locationd" "$STATIC"; do
        kind=$([ "$b" = "$STATIC" ] && echo "static runtime (make install)" || echo "dynamic runtime")
        while IFS= read -r line; do rows+=("${line/| locationd |/| locationd, $kind |}"); done \
            < <(python3 Benchmarks/footprint.py "$b" "${FOOTPRINT_SECONDS:-30}" | sed "s/^| idle memory/| idle memory, $kind/; s/^| CPU at 1 Hz/| CPU at 1 Hz, $kind/" || echo "| footprint | failed | | | |")
    done
fi

echo
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(. /etc/os-release; echo "$PRETTY_NAME"); $(swift --version 2>&1 | head -1)"
echo "gpsd $(gpsd -V 2>&1 | awk '{print $2}'); pynmea2 $("$OUT/venv/bin/python" -c 'import pynmea2; print(pynmea2.__version__)' 2>/dev/null || echo absent); MIN_SECONDS=$MIN_SECONDS"
echo
echo "| benchmark | input | locationd | peer | ratio (peer time / ours) |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
