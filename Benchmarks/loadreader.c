/* A load reader for Benchmarks/latency.py: N subscribers of one server, spread over epoll
 * threads (one per core), each event line timestamped with CLOCK_MONOTONIC when the read that
 * brought it returns. Python's reader (one process, one timestamp per epoll batch) was itself
 * the bottleneck at 1,000 subscribers; this one measures its own ceiling (--selftest) so that a
 * result can be known to be the server's.
 *
 *   loadreader unix PATH N OUT      locationd subscribers: session.start + subscribe each
 *   loadreader tcp HOST:PORT N OUT  gpsd-protocol clients: ?WATCH={"enable":true,"json":true};
 *   loadreader selftest N [SECONDS] the reader's ceiling against a trivial in-process writer
 *   loadreader selftest-tcp N [SECONDS]  the same over loopback TCP (gpsd-protocol clients' ceiling)
 *
 * unix/tcp: connects all N, waits until each is subscribed (locationd's "subscribed" reply,
 * gpsd's WATCH), prints "ready N" on stdout, then records every event line (locationd
 * "type":"location", gpsd "class":"TPV" with "lat") until stdin closes or SIGTERM. OUT gets
 * the records, then a summary line goes to stdout.
 *   OUT: a 16-byte header ("LRD1", uint32 N, int64 base: CLOCK_MONOTONIC ns at "ready"), then
 *   one 12-byte record per event line: uint32 key (the event's "time" as seconds of the day),
 *   uint32 subscriber, int32 arrival in µs after base (all little-endian, native on x86-64).
 *   CLOCK_MONOTONIC is Python's time.monotonic(), so latency.py compares these with its own.
 * selftest: a writer process writes one ~200-byte location line to each of N connections (Unix, or TCP over 127.0.0.1 with TCP_NODELAY for selftest-tcp) in
 * turn; the reader threads read them as they read a server's. Two phases: as fast as the
 * writer goes for SECONDS (lines/s absorbed: the ceiling), then 200 epochs 50 ms apart (the
 * time from the epoch's first write to each arrival, p50/p99/max: the reader's and a minimal
 * server's own share of a fan-out to N).
 *
 *   cc -O2 -pthread loadreader.c -o loadreader
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { LINE_MAX_BYTES = 65536 + 2, MAX_THREADS = 64 };

typedef struct { uint32_t key, sub; int32_t us; } Record;

typedef struct {
    int fd;
    int ready;           /* subscribed (locationd) / watching (gpsd) */
    int closed;
    size_t have;         /* bytes of an unfinished line in buf */
    char *buf;           /* LINE_MAX_BYTES, allocated on first partial line */
    uint64_t events;
} Conn;

typedef struct {
    int epoll;
    int stop;            /* eventfd */
    Record *records;
    size_t count, capacity;
    uint64_t lines, bytes;
    atomic_int done;
} Worker;

static Conn *conns;
static uint32_t nconns;
static Worker workers[MAX_THREADS];
static int nworkers;
static int gpsd_protocol;
static atomic_uint ready_count;
static atomic_int recording;       /* lines before "ready" (status, hello) are not events */
static int64_t base_ns;

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void die(const char *what) { perror(what); exit(1); }

/* "time":"YYYY-MM-DDTHH:MM:SS → seconds of the day, or -1. */
static int64_t second_of_day(const char *line, size_t len) {
    const char *t = memmem(line, len, "\"time\":\"", 8);
    if (t == NULL || (size_t)(line + len - t) < 8 + 19) return -1;
    t += 8 + 11;
    return ((t[0] - '0') * 10 + (t[1] - '0')) * 3600 + ((t[3] - '0') * 10 + (t[4] - '0')) * 60
           + (t[6] - '0') * 10 + (t[7] - '0');
}

static int is_event(const char *line, size_t len) {
    if (gpsd_protocol)
        return memmem(line, len, "\"class\":\"TPV\"", 13) != NULL && memmem(line, len, "\"lat\"", 5) != NULL;
    return len > 18 && memcmp(line, "{\"type\":\"location\"", 18) == 0;
}

static int is_ready_reply(const char *line, size_t len) {
    if (gpsd_protocol) return memmem(line, len, "\"class\":\"WATCH\"", 15) != NULL;
    if (memmem(line, len, "\"type\":\"error\"", 14) != NULL) {
        fprintf(stderr, "loadreader: %.*s\n", (int)len, line);
        exit(1);
    }
    return len > 20 && memcmp(line, "{\"type\":\"subscribed\"", 20) == 0;
}

static void line_arrived(Worker *w, uint32_t index, const char *line, size_t len, int64_t t) {
    Conn *c = &conns[index];
    w->lines++;
    if (!c->ready) {
        if (is_ready_reply(line, len)) { c->ready = 1; atomic_fetch_add(&ready_count, 1); }
        return;
    }
    if (!atomic_load_explicit(&recording, memory_order_relaxed) || !is_event(line, len)) return;
    c->events++;
    if (w->count == w->capacity) {
        w->capacity = w->capacity ? w->capacity * 2 : 1 << 16;
        w->records = realloc(w->records, w->capacity * sizeof(Record));
        if (w->records == NULL) die("loadreader: records");
    }
    int64_t key = second_of_day(line, len);
    w->records[w->count++] = (Record){(uint32_t)key, index, (int32_t)((t - base_ns) / 1000)};
}

/* Reads what the socket has; every whole line gets the time the read returned. */
static void drain(Worker *w, uint32_t index) {
    static __thread char chunk[1 << 16];
    Conn *c = &conns[index];
    for (;;) {
        ssize_t n = read(c->fd, chunk, sizeof chunk);
        int64_t t = now_ns();
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        if (n <= 0) {
            c->closed = 1;
            epoll_ctl(w->epoll, EPOLL_CTL_DEL, c->fd, NULL);
            return;
        }
        w->bytes += (uint64_t)n;
        const char *p = chunk, *end = chunk + n;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t part = (size_t)((nl ? nl : end) - p);
            if (c->have == 0 && nl) {
                line_arrived(w, index, p, part, t);
            } else {
                if (c->buf == NULL && (c->buf = malloc(LINE_MAX_BYTES)) == NULL) die("loadreader: line");
                size_t take = part < LINE_MAX_BYTES - c->have ? part : LINE_MAX_BYTES - c->have;
                memcpy(c->buf + c->have, p, take);
                c->have += take;
                if (nl) { line_arrived(w, index, c->buf, c->have, t); c->have = 0; }
            }
            p += part + (nl ? 1 : 0);
        }
        if (n < (ssize_t)sizeof chunk) return;  /* the socket is empty; epoll is edge-triggered */
    }
}

static void *worker_main(void *arg) {
    Worker *w = arg;
    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(w->epoll, events, 256, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) die("loadreader: epoll_wait");
        for (int i = 0; i < n; i++) {
            if (events[i].data.u32 == UINT32_MAX) { atomic_store(&w->done, 1); return NULL; }
            drain(w, events[i].data.u32);
        }
    }
}

static void start_workers(void) {
    for (int i = 0; i < nworkers; i++) {
        Worker *w = &workers[i];
        if ((w->epoll = epoll_create1(EPOLL_CLOEXEC)) < 0) die("loadreader: epoll_create1");
        if ((w->stop = eventfd(0, EFD_CLOEXEC)) < 0) die("loadreader: eventfd");
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
        epoll_ctl(w->epoll, EPOLL_CTL_ADD, w->stop, &e);
        pthread_t thread;
        if (pthread_create(&thread, NULL, worker_main, w) != 0) die("loadreader: pthread_create");
        pthread_detach(thread);
    }
}

static void stop_workers(void) {
    for (int i = 0; i < nworkers; i++) {
        uint64_t one = 1;
        if (write(workers[i].stop, &one, sizeof one) < 0) die("loadreader: eventfd write");
    }
    for (int i = 0; i < nworkers; i++)
        while (!atomic_load(&workers[i].done)) { struct timespec d = {0, 1000000}; nanosleep(&d, NULL); }
}

/* Hands connection `index` (fd non-blocking) to worker index % nworkers. */
static void add_conn(uint32_t index, int fd) {
    if (fcntl(fd, F_SETFL, O_NONBLOCK) != 0) die("loadreader: fcntl");
    conns[index].fd = fd;
    struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.u32 = index};
    if (epoll_ctl(workers[index % (uint32_t)nworkers].epoll, EPOLL_CTL_ADD, fd, &e) != 0) die("loadreader: epoll_ctl");
}

static void write_all(int fd, const char *s, size_t n) {
    while (n > 0) {
        ssize_t k = write(fd, s, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) die("loadreader: write");
        s += k; n -= (size_t)k;
    }
}

static int connect_unix(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path, path, sizeof a.sun_path - 1);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) die("loadreader: connect");
    return fd;
}

static int connect_tcp(const char *hostport) {
    char host[256];
    const char *colon = strrchr(hostport, ':');
    if (colon == NULL || (size_t)(colon - hostport) >= sizeof host) { fprintf(stderr, "loadreader: HOST:PORT\n"); exit(2); }
    memcpy(host, hostport, (size_t)(colon - hostport));
    host[colon - hostport] = 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0) { fprintf(stderr, "loadreader: %s: no address\n", hostport); exit(1); }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0) die("loadreader: connect");
    freeaddrinfo(res);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void raise_nofile(uint32_t n) {
    struct rlimit r;
    getrlimit(RLIMIT_NOFILE, &r);
    if (r.rlim_cur < n + 64) {
        r.rlim_cur = r.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur < n + 64) {
            fprintf(stderr, "loadreader: RLIMIT_NOFILE %llu is too low for %u connections\n", (unsigned long long)r.rlim_cur, n);
            exit(1);
        }
    }
}

static void wait_ready(uint32_t n) {
    int64_t deadline = now_ns() + 120 * (int64_t)1000000000;
    while (atomic_load(&ready_count) < n) {
        if (now_ns() > deadline) { fprintf(stderr, "loadreader: %u of %u subscribed after 120 s\n", atomic_load(&ready_count), n); exit(1); }
        struct timespec d = {0, 2000000};
        nanosleep(&d, NULL);
    }
}

static void summary(const char *prefix, double seconds) {
    uint64_t lines = 0, bytes = 0, events = 0, least = UINT64_MAX, most = 0, closed = 0;
    for (int i = 0; i < nworkers; i++) { lines += workers[i].lines; bytes += workers[i].bytes; }
    for (uint32_t i = 0; i < nconns; i++) {
        events += conns[i].events;
        if (conns[i].events < least) least = conns[i].events;
        if (conns[i].events > most) most = conns[i].events;
        closed += (uint64_t)conns[i].closed;
    }
    printf("%sconnections=%u threads=%d lines=%llu bytes=%llu events=%llu events_per_connection_min=%llu max=%llu closed=%llu",
           prefix, nconns, nworkers, (unsigned long long)lines, (unsigned long long)bytes, (unsigned long long)events,
           (unsigned long long)least, (unsigned long long)most, (unsigned long long)closed);
    if (seconds > 0) printf(" seconds=%.3f lines_per_s=%.0f", seconds, (double)lines / seconds);
    printf("\n");
    fflush(stdout);
}

static void write_records(const char *path) {
    FILE *f = fopen(path, "wb");
    if (f == NULL) die(path);
    fwrite("LRD1", 1, 4, f);
    fwrite(&nconns, 4, 1, f);
    fwrite(&base_ns, 8, 1, f);
    for (int i = 0; i < nworkers; i++) fwrite(workers[i].records, sizeof(Record), workers[i].count, f);
    if (fclose(f) != 0) die(path);
}

static volatile sig_atomic_t terminated;
static void on_term(int sig) { (void)sig; terminated = 1; }

static int serve(const char *mode, const char *where, uint32_t n, const char *out) {
    gpsd_protocol = strcmp(mode, "tcp") == 0;
    const char *request = gpsd_protocol ? "?WATCH={\"enable\":true,\"json\":true};\n"
                                        : "{\"type\":\"session.start\",\"id\":0}\n{\"type\":\"subscribe\",\"id\":1}\n";
    for (uint32_t i = 0; i < n; i++) {
        int fd = gpsd_protocol ? connect_tcp(where) : connect_unix(where);
        write_all(fd, request, strlen(request));
        add_conn(i, fd);
    }
    wait_ready(n);
    base_ns = now_ns();
    atomic_store(&recording, 1);
    printf("ready %u\n", n);
    fflush(stdout);
    struct sigaction sa = {.sa_handler = on_term};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    char c;
    while (!terminated && read(0, &c, 1) > 0) {}
    double seconds = (double)(now_ns() - base_ns) / 1e9;
    stop_workers();
    write_records(out);
    summary("", seconds);
    return 0;
}

/* --- selftest: a trivial writer in a child process (so each process holds N descriptors) --- */

enum { PACED_EPOCHS = 200, PACED_KEY = 80000 };

static int format_line(char *line, size_t size, uint32_t key) {
    return snprintf(line, size,
                    "{\"type\":\"location\",\"time\":\"2026-03-10T%02u:%02u:%02u.00Z\",\"latitude\":48.112,"
                    "\"longitude\":11.537038,\"horizontalAccuracy\":3.1,\"altitude\":36.3,\"speed\":0.25,\"course\":45,\"mode\":\"3d\"}\n",
                    key / 3600 % 24, key / 60 % 60, key % 60);
}

/* The child: N connections; as fast as it can for `seconds`, then 200 epochs 50 ms apart; the
 * epochs' start times go to `report`. */
static void writer_process(const char *where, int tcp, uint32_t n, double seconds, int report) {
    int *fds = calloc(n, sizeof(int));
    for (uint32_t i = 0; i < n; i++) fds[i] = tcp ? connect_tcp(where) : connect_unix(where);
    char ok;
    if (read(report, &ok, 1) != 1) _exit(1);  /* the parent has accepted them all */
    char line[256];
    int64_t until = now_ns() + (int64_t)(seconds * 1e9);
    for (uint32_t k = 0; now_ns() < until; k = (k + 1) % PACED_KEY) {
        int len = format_line(line, sizeof line, k);
        for (uint32_t i = 0; i < n; i++) write_all(fds[i], line, (size_t)len);
    }
    struct timespec settle = {0, 500000000};
    nanosleep(&settle, NULL);
    int64_t starts[PACED_EPOCHS];
    for (uint32_t k = 0; k < PACED_EPOCHS; k++) {
        int len = format_line(line, sizeof line, PACED_KEY + k);
        starts[k] = now_ns();
        for (uint32_t i = 0; i < n; i++) write_all(fds[i], line, (size_t)len);
        struct timespec gap = {0, 50000000};
        nanosleep(&gap, NULL);
    }
    write_all(report, (const char *)starts, sizeof starts);
    _exit(0);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int selftest(uint32_t n, double seconds, int tcp) {
    char path[64];
    int listener;
    if (tcp) {
        listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof a;
        if (listener < 0 || bind(listener, (struct sockaddr *)&a, sizeof a) != 0 || listen(listener, 4096) != 0
            || getsockname(listener, (struct sockaddr *)&a, &len) != 0) die("loadreader: listen");
        snprintf(path, sizeof path, "127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
    } else {
        snprintf(path, sizeof path, "/tmp/loadreader-%d.sock", (int)getpid());
        unlink(path);
        listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        strncpy(a.sun_path, path, sizeof a.sun_path - 1);
        if (listener < 0 || bind(listener, (struct sockaddr *)&a, sizeof a) != 0 || listen(listener, 4096) != 0) die("loadreader: listen");
    }
    int report[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, report) != 0) die("loadreader: socketpair");
    base_ns = now_ns();
    pid_t child = fork();
    if (child == 0) { close(report[0]); writer_process(path, tcp, n, seconds, report[1]); }
    close(report[1]);
    for (uint32_t i = 0; i < n; i++) {
        int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) die("loadreader: accept");
        conns[i].ready = 1;
        add_conn(i, fd);
    }
    close(listener);
    if (!tcp) unlink(path);
    atomic_store(&recording, 1);
    write_all(report[0], "g", 1);
    int64_t starts[PACED_EPOCHS];
    size_t got = 0;
    while (got < sizeof starts) {
        ssize_t k = read(report[0], (char *)starts + got, sizeof starts - got);
        if (k <= 0) { fprintf(stderr, "loadreader: the writer ended early\n"); return 1; }
        got += (size_t)k;
    }
    /* The last epoch's lines may still be on their way: wait until every connection has seen EOF. */
    int64_t deadline = now_ns() + 10 * (int64_t)1000000000;
    for (uint32_t i = 0; i < n && now_ns() < deadline; i++)
        while (!conns[i].closed && now_ns() < deadline) { struct timespec d = {0, 1000000}; nanosleep(&d, NULL); }
    stop_workers();
    size_t total = 0, flood = 0;
    for (int i = 0; i < nworkers; i++) total += workers[i].count;
    int64_t *lat = malloc((total ? total : 1) * sizeof(int64_t));
    int32_t first = INT32_MAX, last = 0;
    size_t m = 0;
    for (int i = 0; i < nworkers; i++)
        for (size_t r = 0; r < workers[i].count; r++) {
            Record rec = workers[i].records[r];
            if (rec.key >= PACED_KEY && rec.key < PACED_KEY + PACED_EPOCHS) {
                lat[m++] = base_ns + (int64_t)rec.us * 1000 - starts[rec.key - PACED_KEY];
            } else {
                flood++;
                if (rec.us < first) first = rec.us;
                if (rec.us > last) last = rec.us;
            }
        }
    double span = (double)(last - first) / 1e6;
    printf("selftest flood: connections=%u threads=%d lines=%zu seconds=%.3f lines_per_s=%.0f\n",
           n, nworkers, flood, span, span > 0 ? (double)flood / span : 0.0);
    if (m == 0) { printf("selftest paced: no lines\n"); return 1; }
    qsort(lat, m, sizeof(int64_t), cmp_i64);
    printf("selftest paced: connections=%u threads=%d epochs=%d lines=%zu of %llu first_write_to_arrival_us_p50=%lld p99=%lld max=%lld\n",
           n, nworkers, PACED_EPOCHS, m, (unsigned long long)n * PACED_EPOCHS,
           (long long)lat[m / 2] / 1000, (long long)lat[m * 99 / 100] / 1000, (long long)lat[m - 1] / 1000);
    waitpid(child, NULL, 0);
    return m == (size_t)n * PACED_EPOCHS ? 0 : 1;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    const char *threads_env = getenv("LOADREADER_THREADS");
    nworkers = threads_env ? atoi(threads_env) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (nworkers < 1) nworkers = 1;
    if (nworkers > MAX_THREADS) nworkers = MAX_THREADS;
    int tcp_selftest = argc >= 3 && strcmp(argv[1], "selftest-tcp") == 0;
    int selftest_mode = tcp_selftest || (argc >= 3 && strcmp(argv[1], "selftest") == 0);
    if (!selftest_mode && (argc != 5 || (strcmp(argv[1], "unix") != 0 && strcmp(argv[1], "tcp") != 0))) {
        fprintf(stderr, "usage: loadreader unix PATH N OUT | tcp HOST:PORT N OUT | selftest[-tcp] N [SECONDS]\n");
        return 2;
    }
    nconns = (uint32_t)strtoul(selftest_mode ? argv[2] : argv[3], NULL, 10);
    if (nconns == 0) { fprintf(stderr, "loadreader: N must be positive\n"); return 2; }
    raise_nofile(nconns);
    conns = calloc(nconns, sizeof(Conn));
    start_workers();
    if (selftest_mode) return selftest(nconns, argc > 3 ? atof(argv[3]) : 2.0, tcp_selftest);
    return serve(argv[1], argv[2], nconns, argv[4]);
}
