#ifndef LOCATIOND_CSYSTEMD_SHIM_H
#define LOCATIOND_CSYSTEMD_SHIM_H
// libsystemd. Debian: libsystemd-dev. Variadic functions cannot be called from Swift,
// so each one we use gets a fixed-arity static inline wrapper here. The journal is written
// over its native protocol by our own code (JournalLogHandler), so its socket path can be
// overridden; sd_notify, sd_watchdog_enabled and sd_listen_fds come from libsystemd.
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>

static inline int locationd_sd_notify(int unset_environment, const char *state) {
    return sd_notify(unset_environment, state);
}

/// SD_LISTEN_FDS_START is a macro; Swift sees it as a constant only if it is a plain literal.
static inline int locationd_sd_listen_fds_start(void) { return SD_LISTEN_FDS_START; }
#endif
