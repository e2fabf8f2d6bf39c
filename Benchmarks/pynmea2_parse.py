"""Peer benchmark: pynmea2 parsing an NMEA log (every line, as a Python program would).

Usage: python pynmea2_parse.py LOG [MIN_SECONDS]
Reads the file into memory first; times only parsing (interpreter start-up excluded), repeating
until MIN_SECONDS have passed. Prints: sentences, position fixes (RMC status A / GGA quality > 0),
seconds per pass, MB/s.
"""
import sys
import time

import pynmea2

path = sys.argv[1]
min_seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
with open(path, "rb") as f:
    lines = f.read().decode("ascii", "replace").splitlines()
size = sum(len(l) + 1 for l in lines)


def one_pass():
    sentences = fixes = 0
    for line in lines:
        try:
            msg = pynmea2.parse(line, check=False)
        except (pynmea2.ParseError, ValueError, AttributeError, TypeError):
            continue
        sentences += 1
        # A fix, as for the other tools: an RMC with status A whose position converts to degrees.
        if getattr(msg, "sentence_type", "") == "RMC" and msg.status == "A":
            try:
                msg.latitude, msg.longitude
                fixes += 1
            except (ValueError, TypeError):
                pass
    return sentences, fixes


one_pass()
passes, start = 0, time.perf_counter()
while True:
    sentences, fixes = one_pass()
    passes += 1
    elapsed = time.perf_counter() - start
    if elapsed >= min_seconds:
        break
per = elapsed / passes
print(f"pynmea2\tsentences={sentences}\tfixes={fixes}\tseconds={per:.6f}\tmb_per_s={size / per / 1e6:.2f}\tpasses={passes}")
