#ifndef LOCATIOND_CSYSTEMD_SHIM_H
#define LOCATIOND_CSYSTEMD_SHIM_H
// libsystemd. Debian: libsystemd-dev. Variadic functions cannot be called from Swift,
// so each one we use gets a fixed-arity static inline wrapper here.
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>

static inline int locationd_sd_notify(int unset_environment, const char *state) {
    return sd_notify(unset_environment, state);
}
#endif
