#ifndef LOCATIOND_CMOSQUITTO_SHIM_H
#define LOCATIOND_CMOSQUITTO_SHIM_H
// libmosquitto 2.0 (Debian 12: libmosquitto-dev 2.0.11), the Eclipse reference MQTT client,
// for locationd-mqtt (docs/mqtt.md). Its API has no variadic functions.
#include <mosquitto.h>
#endif
