#ifndef LOCATIOND_CSYSTEMD_SHIM_H
#define LOCATIOND_CSYSTEMD_SHIM_H
// libsystemd (Debian: libsystemd-dev): sd_notify, sd_watchdog_enabled,
// sd_listen_fds_with_names, sd_is_socket_unix and sd_journal_sendv. None of these is variadic;
// a variadic call (sd_notifyf, sd_journal_send) would need a `static inline` wrapper here.
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <sys/uio.h>
#endif
