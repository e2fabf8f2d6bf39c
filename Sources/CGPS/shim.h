#ifndef LOCATIOND_CGPS_SHIM_H
#define LOCATIOND_CGPS_SHIM_H
// libgps (gpsd 3.22, API major 11). Debian: libgps-dev.
#include <gps.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#endif
