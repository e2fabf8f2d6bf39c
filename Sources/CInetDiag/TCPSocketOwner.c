// One inet_diag lookup (SOCK_DIAG_BY_FAMILY with an exact 4-tuple, no dump): the kernel answers
// with the one socket's inet_diag_msg, whose idiag_uid and idiag_inode say who made it.
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "CInetDiag.h"

int locationd_tcp_socket_owner(int family, const void *local, unsigned short local_port,
                               const void *remote, unsigned short remote_port,
                               unsigned int *uid, unsigned long *inode) {
    if (family != AF_INET && family != AF_INET6) { errno = EAFNOSUPPORT; return -1; }
    size_t length = family == AF_INET ? 4 : 16;
    struct {
        struct nlmsghdr header;
        struct inet_diag_req_v2 request;
    } message;
    memset(&message, 0, sizeof message);
    message.header.nlmsg_len = sizeof message;
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST;
    message.header.nlmsg_seq = 1;
    message.request.sdiag_family = (unsigned char)family;
    message.request.sdiag_protocol = IPPROTO_TCP;
    message.request.idiag_states = ~0U;
    message.request.id.idiag_sport = htons(local_port);
    message.request.id.idiag_dport = htons(remote_port);
    memcpy(message.request.id.idiag_src, local, length);
    memcpy(message.request.id.idiag_dst, remote, length);
    message.request.id.idiag_if = 0;
    message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;

    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0) return -1;
    struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
    if (sendto(fd, &message, sizeof message, 0, (struct sockaddr *)&kernel, sizeof kernel) != (ssize_t)sizeof message) {
        int saved = errno; close(fd); errno = saved; return -1;
    }
    long reply[1024];  // aligned for nlmsghdr; one inet_diag_msg and its attributes fit
    ssize_t n;
    do { n = recv(fd, reply, sizeof reply, 0); } while (n < 0 && errno == EINTR);
    int saved = errno;
    close(fd);
    if (n < 0) { errno = saved; return -1; }
    for (struct nlmsghdr *h = (struct nlmsghdr *)reply; NLMSG_OK(h, (unsigned int)n); h = NLMSG_NEXT(h, n)) {
        if (h->nlmsg_type == NLMSG_ERROR) {
            struct nlmsgerr *e = NLMSG_DATA(h);
            errno = e->error ? -e->error : ENOENT;
            return -1;
        }
        if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY && h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
            struct inet_diag_msg *m = NLMSG_DATA(h);
            *uid = m->idiag_uid;
            *inode = m->idiag_inode;
            return 0;
        }
    }
    errno = ENOENT;
    return -1;
}
