#ifndef LOCATIOND_CINETDIAG_H
#define LOCATIOND_CINETDIAG_H
// The kernel's record of a TCP socket's owner: inet_diag's structures do not import into Swift.
// No system header here: its declarations would then belong to this module, and Swift files
// that do not import it would lose them; hence `void *` addresses.

/// The owner of a TCP socket on this host, as the kernel records it (NETLINK_SOCK_DIAG,
/// inet_diag: what `ss -e` shows as uid and ino). The socket is the one whose local end is
/// `local`:`local_port` and remote end `remote`:`remote_port`: for a connection accepted here,
/// the peer's own socket is found with the peer's address as `local`. `family` is AF_INET (4-byte
/// addresses) or AF_INET6 (16 bytes); ports in host order. Returns 0 with `*uid` and `*inode`
/// set, or -1 with errno set (ENOENT: no such socket, it is gone).
int locationd_tcp_socket_owner(int family, const void *local, unsigned short local_port,
                               const void *remote, unsigned short remote_port,
                               unsigned int *uid, unsigned long *inode);
#endif
