#ifndef LOCATIOND_CDAEMONSUPPORT_H
#define LOCATIOND_CDAEMONSUPPORT_H
// The few calls of systemd's protocols that Swift cannot make through Glibc: memfd_create and
// its seals need _GNU_SOURCE, and descriptor passing needs the CMSG_* macros, which do not
// import. Everything else of the protocols is Swift (Sources/LocationDaemon/Systemd).
// No system header here: its declarations would then belong to this module, and Swift files
// that do not import it would lose them (SOCK_STREAM, …); hence `void *` addresses.
#include <stddef.h>

/// A memfd holding `count` bytes, sealed against any change (journald refuses an unsealed one).
/// Returns the descriptor, or -1 with errno set.
int locationd_sealed_memfd(const char *name, const void *bytes, size_t count);

/// Sends a datagram with an empty payload carrying `fd` (SCM_RIGHTS) to `address`, with
/// `flags` (MSG_DONTWAIT, or 0) besides MSG_NOSIGNAL. Returns 0, or -1 with errno set.
/// `address` is a `struct sockaddr` of `length` bytes.
int locationd_send_descriptor(int socket, const void *address, unsigned int length, int fd, int flags);

/// Receives one datagram into `buffer`; `*fd` is the descriptor that came with it, or -1.
/// Returns the payload's length, or -1 with errno set. (The tests' side of the journal.)
long locationd_receive_with_descriptor(int socket, void *buffer, size_t capacity, int *fd);
#endif
