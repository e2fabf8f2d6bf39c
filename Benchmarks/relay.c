/* The least a daemon between gpsd and its clients can do, as a reference row for
 * Benchmarks/latency.py: one thread, poll(2), read gpsd's socket, decode each TPV with libgps
 * (as locationd must), write the line to every connected client with write(2). No engine, no
 * privacy, no protocol beyond a greeting the benchmark's subscribers wait for.
 *
 * Usage: relay HOST PORT SOCKET_PATH      (cc -O2 relay.c -lgps -o relay)
 */
#include <fcntl.h>
#include <gps.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_CLIENTS 1100

static int connect_gpsd(const char *host, const char *port) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    if (getaddrinfo(host, port, &hints, &res) != 0) return -1;
    int fd = socket(res->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0) { freeaddrinfo(res); return -1; }
    freeaddrinfo(res);
    const char *watch = "?WATCH={\"enable\":true,\"json\":true};\n";
    if (write(fd, watch, strlen(watch)) < 0) return -1;
    return fd;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: relay HOST PORT SOCKET_PATH\n"); return 2; }
    signal(SIGPIPE, SIG_IGN); /* a client that went away is an EPIPE, not the relay's end */
    int gpsd = connect_gpsd(argv[1], argv[2]);
    if (gpsd < 0) { perror("relay: gpsd"); return 1; }
    int listener = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strncpy(addr.sun_path, argv[3], sizeof addr.sun_path - 1);
    unlink(argv[3]);
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(listener, 1024) != 0) {
        perror("relay: socket"); return 1;
    }
    static struct pollfd fds[MAX_CLIENTS + 2];
    int nclients = 0;
    static char buf[65536];
    size_t have = 0;
    static struct gps_data_t data;
    fds[0] = (struct pollfd){.fd = gpsd, .events = POLLIN};
    fds[1] = (struct pollfd){.fd = listener, .events = POLLIN};
    for (;;) {
        if (poll(fds, 2, -1) < 0) return 1;
        if (fds[1].revents & POLLIN) {
            int c = accept(listener, NULL, NULL);
            if (c >= 0 && nclients < MAX_CLIENTS) {
                const char *hello = "{\"type\":\"subscribed\"}\n";
                fcntl(c, F_SETFL, O_NONBLOCK);
                if (write(c, hello, strlen(hello)) < 0) close(c);
                else fds[2 + nclients++].fd = c;
            }
        }
        if (!(fds[0].revents & POLLIN)) continue;
        ssize_t n = read(gpsd, buf + have, sizeof buf - 1 - have);
        if (n <= 0) return 0;
        have += (size_t)n;
        char *line = buf, *end;
        while ((end = memchr(line, '\n', have - (size_t)(line - buf))) != NULL) {
            size_t len = (size_t)(end - line) + 1;
            if (strncmp(line, "{\"class\":\"TPV\"", 14) == 0) {
                char saved = end[1];
                end[1] = '\0';
                data.set = 0;
                gps_unpack(line, &data);
                end[1] = saved;
                if (data.fix.mode >= MODE_2D)
                    for (int i = 0; i < nclients; i++)
                        if (write(fds[2 + i].fd, line, len) < 0) { /* a slow client misses it */ }
            }
            line += len;
        }
        have -= (size_t)(line - buf);
        memmove(buf, line, have);
        if (have == sizeof buf - 1) have = 0; /* not gpsd's protocol: drop it */
    }
}
