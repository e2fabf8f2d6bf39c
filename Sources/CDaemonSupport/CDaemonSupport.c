#define _GNU_SOURCE
#include "CDaemonSupport.h"
#include <errno.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int locationd_sealed_memfd(const char *name, const void *bytes, size_t count) {
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -1;
    const char *p = bytes;
    size_t left = count;
    while (left > 0) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) goto fail;
        p += n;
        left -= (size_t)n;
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) goto fail;
    return fd;
fail:;
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

int locationd_send_descriptor(int socket, const void *address, unsigned int length, int fd, int flags) {
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(sizeof(int))];
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr message = {
        .msg_name = (void *)address,
        .msg_namelen = length,
        .msg_control = control.space,
        .msg_controllen = sizeof control.space,
    };
    struct cmsghdr *c = CMSG_FIRSTHDR(&message);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    ssize_t n;
    do { n = sendmsg(socket, &message, MSG_NOSIGNAL | flags); } while (n < 0 && errno == EINTR);
    return n < 0 ? -1 : 0;
}

long locationd_receive_with_descriptor(int socket, void *buffer, size_t capacity, int *fd) {
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(sizeof(int))];
    } control;
    struct iovec v = { .iov_base = buffer, .iov_len = capacity };
    struct msghdr message = {
        .msg_iov = &v,
        .msg_iovlen = 1,
        .msg_control = control.space,
        .msg_controllen = sizeof control.space,
    };
    *fd = -1;
    ssize_t n;
    do { n = recvmsg(socket, &message, MSG_CMSG_CLOEXEC); } while (n < 0 && errno == EINTR);
    if (n < 0) return -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&message); c; c = CMSG_NXTHDR(&message, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
            memcpy(fd, CMSG_DATA(c), sizeof(int));
    }
    return n;
}
