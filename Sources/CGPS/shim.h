#ifndef LOCATIOND_CGPS_SHIM_H
#define LOCATIOND_CGPS_SHIM_H
// libgps (gpsd 3.22, API major 11). Debian: libgps-dev.
#include <gps.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

// libgps's JSON decoder for one report object: what `gps_unpack` calls for each object of a
// line, without `gps_unpack`'s debug trace (whose arguments, `gps_maskdump`'s text, are built
// on every call). Exported by libgps (libgps.so.28 and libgps.a's libgps_json.o) and declared
// in gpsd's libgps.h, which libgps-dev does not install. The daemon links it from libgps.a:
// that brings in only the JSON decoders, not libgps_core.o, whose `gps_open` reaches the D-Bus
// transport and so loads libdbus, libsystemd, libgcrypt, … (docs/benchmarks.md, "Footprint").
int libgps_json_unpack(const char *buf, struct gps_data_t *gpsdata, const char **end);
// What a JSON error code of `libgps_json_unpack` means (gpsd's json.h, not installed either).
const char *json_error_string(int err);
#endif
