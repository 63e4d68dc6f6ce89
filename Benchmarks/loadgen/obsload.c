/*
 * obsload: a second, minimal load generator for `obsbench redis --client` (docs/performance.md,
 * "A second client"), written in C so that the cost of the Swift client is not what the comparison
 * measures. It speaks obsd's line protocol and Redis's RESP2, drives every connection from one
 * thread with epoll, and runs the same rows as obsbench's own client, with the same requests, keys,
 * values, windows and pacing:
 *
 *   obsload requests --socket PATH --proto obsd|redis --op set|get|eset --clients N --depth D
 *                    --seconds S [--total N] [--keys K] [--prefix P] [--pid PID]
 *       N connections, each keeping D requests in flight; 0.2 s of warm-up, then S seconds
 *       measured (or, with --total, until that many requests are answered, however long that
 *       takes, no warm-up). Request n
 *       names key P(n mod K) (P: "k.", K: 10,000; K 0: a new key for every request).
 *       Prints `ops_per_s=X server_cpu=Y` (Y: the server's CPU seconds per second, from
 *       /proc/PID/stat, over the measured window). `--op eset` (obsd): sets with
 *       `"ephemeral": true`, owned by the connection that sent them.
 *   obsload fanout --socket PATH --proto obsd|redis [--socket2 PATH --proto2 obsd|redis]
 *                  --shape key|computed|chain|fan [--watchers W] --seconds S --runs R [--block B]
 *       One publisher, W watchers (key: W; computed: 100; chain and fan: 1). Sets the shape up,
 *       then R times: the delivery rate with at most 64 updates incomplete, and the latency of
 *       updates paced at 1,000 per second. Prints one line per run:
 *       `deliveries_per_s=X p50_ms=Y p99_ms=Z`. With --updates N instead: N updates (at most 64
 *       incomplete), then `deliveries=X` (for Benchmarks/allocations.sh, which counts the
 *       daemon's allocations per update). With --socket2, the same shape on a second server too,
 *       and each run measures the two in turns of B seconds (the server that goes first
 *       alternating turn by turn: 1, 2, 2, 1, ...), as obsbench's own client does; each run
 *       prints a line per server, `server=1 ...` and `server=2 ...`.
 *
 * Built by Benchmarks/loadgen/build.sh (cc -O2); nothing else is needed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum proto { OBSD, REDIS };
enum item { ITEM_NONE, ITEM_REPLY, ITEM_DELIVERY, ITEM_OTHER };

static void die(const char *format, ...) {
    va_list args;
    va_start(args, format);
    fprintf(stderr, "obsload: ");
    vfprintf(stderr, format, args);
    fprintf(stderr, "\n");
    va_end(args);
    exit(1);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A growable byte buffer with a read position. */
struct buffer {
    char *data;
    size_t start, end, capacity;
};

static void reserve(struct buffer *b, size_t more) {
    if (b->end + more <= b->capacity) return;
    if (b->start > 0) {
        memmove(b->data, b->data + b->start, b->end - b->start);
        b->end -= b->start;
        b->start = 0;
        if (b->end + more <= b->capacity) return;
    }
    size_t capacity = b->capacity ? b->capacity : 65536;
    while (b->end + more > capacity) capacity *= 2;
    b->data = realloc(b->data, capacity);
    if (!b->data) die("out of memory");
    b->capacity = capacity;
}

static void append(struct buffer *b, const char *bytes, size_t count) {
    reserve(b, count);
    memcpy(b->data + b->end, bytes, count);
    b->end += count;
}

struct fanout;

struct connection {
    int fd;
    enum proto proto;
    struct buffer in, out;
    long in_flight;
    long replies, deliveries;
    int wants_output;
    long completed; /* fan-out watchers: updates completed */
    struct fanout *owner; /* fan-out connections: their run */
};

static int epoll_fd;

static struct connection *connect_to(const char *path, enum proto proto) {
    struct connection *c = calloc(1, sizeof *c);
    c->proto = proto;
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0) die("socket: %s", strerror(errno));
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, path, sizeof address.sun_path - 1);
    /* Blocking connect: it waits for room in the listen backlog instead of failing. */
    if (connect(c->fd, (struct sockaddr *)&address, sizeof address) != 0) die("connect %s: %s", path, strerror(errno));
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    struct epoll_event event = {.events = EPOLLIN, .data.ptr = c};
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c->fd, &event);
    return c;
}

static void queue(struct connection *c, const char *bytes, size_t count, long replies) {
    append(&c->out, bytes, count);
    c->in_flight += replies;
}

/* Writes what the socket takes; registers for EPOLLOUT while some is left. */
static void flush(struct connection *c) {
    while (c->out.start < c->out.end) {
        ssize_t n = send(c->fd, c->out.data + c->out.start, c->out.end - c->out.start, MSG_NOSIGNAL);
        if (n <= 0) break;
        c->out.start += (size_t)n;
    }
    if (c->out.start == c->out.end) c->out.start = c->out.end = 0;
    int left = c->out.start < c->out.end;
    if (left == c->wants_output) return;
    c->wants_output = left;
    struct epoll_event event = {.events = EPOLLIN | (left ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c->fd, &event);
}

/* RESP: the end of the reply at `p` (NULL when incomplete); `kind` tells a pub/sub push. */
static const char *resp_line_end(const char *p, const char *end) {
    const char *cr = memchr(p, '\r', (size_t)(end - p));
    if (!cr || cr + 1 >= end) return NULL;
    return cr + 2;
}

static const char *resp_skip(const char *p, const char *end) {
    if (p >= end) return NULL;
    const char *next = resp_line_end(p, end);
    if (!next) return NULL;
    long number = strtol(p + 1, NULL, 10);
    switch (*p) {
    case '$':
        if (number < 0) return next;
        return next + number + 2 <= end ? next + number + 2 : NULL;
    case '*':
        for (long i = 0; i < number; i++) {
            next = resp_skip(next, end);
            if (!next) return NULL;
        }
        return next;
    default:
        return next;
    }
}

/* The first complete item in `p..end`: its kind, and where it ends (`*after`). */
static enum item scan(enum proto proto, const char *p, const char *end, const char **after) {
    if (proto == OBSD) {
        const char *newline = memchr(p, '\n', (size_t)(end - p));
        if (!newline) return ITEM_NONE;
        *after = newline + 1;
        size_t length = (size_t)(newline - p);
        if (length >= 17 && memcmp(p, "{\"event\":\"change\"", 17) == 0) return ITEM_DELIVERY;
        if (length >= 9 && memcmp(p, "{\"event\":", 9) == 0) return ITEM_OTHER;
        return ITEM_REPLY;
    }
    const char *next = resp_skip(p, end);
    if (!next) return ITEM_NONE;
    *after = next;
    if (*p == '*') {
        const char *header = resp_line_end(p, end);
        if (header < end && *header == '$') {
            const char *body = resp_line_end(header, end);
            long length = strtol(header + 1, NULL, 10);
            if ((length == 7 && memcmp(body, "message", 7) == 0) || (length == 8 && memcmp(body, "pmessage", 8) == 0))
                return ITEM_DELIVERY;
        }
    }
    return ITEM_REPLY;
}

/* Reads what arrived and counts complete items. Returns 0 at end of stream. */
static int read_available(struct connection *c, long *new_replies, long *new_deliveries) {
    *new_replies = *new_deliveries = 0;
    for (;;) {
        reserve(&c->in, 262144);
        ssize_t n = read(c->fd, c->in.data + c->in.end, c->in.capacity - c->in.end);
        if (n == 0) return 0;
        if (n < 0) break;
        c->in.end += (size_t)n;
        if ((size_t)n < 262144) break;
    }
    const char *p = c->in.data + c->in.start, *end = c->in.data + c->in.end, *after;
    enum item item;
    while (p < end && (item = scan(c->proto, p, end, &after)) != ITEM_NONE) {
        if (item == ITEM_REPLY) (*new_replies)++;
        else if (item == ITEM_DELIVERY) (*new_deliveries)++;
        p = after;
    }
    c->in.start = (size_t)(p - c->in.data);
    if (c->in.start == c->in.end) c->in.start = c->in.end = 0;
    c->replies += *new_replies;
    c->deliveries += *new_deliveries;
    c->in_flight -= *new_replies;
    return 1;
}

/* The benchmark's values: a 64-byte string that differs for each seed (16 digits, zero-padded,
 * then 48 'x'), the same bytes as obsbench's WireValue.payload. */
static void payload(char out[65], long seed) {
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%ld", seed);
    int pad = n < 16 ? 16 - n : 0;
    memset(out, '0', (size_t)pad);
    memcpy(out + pad, digits, (size_t)n);
    memset(out + pad + n, 'x', 48);
    out[pad + n + 48] = 0;
}

static struct buffer scratch;

static void resp_command(struct buffer *b, int count, ...) {
    char header[32];
    va_list args;
    va_start(args, count);
    append(b, header, (size_t)snprintf(header, sizeof header, "*%d\r\n", count));
    for (int i = 0; i < count; i++) {
        const char *part = va_arg(args, const char *);
        size_t length = strlen(part);
        append(b, header, (size_t)snprintf(header, sizeof header, "$%zu\r\n", length));
        append(b, part, length);
        append(b, "\r\n", 2);
    }
    va_end(args);
}

/* A set of `key` to a string value (quoted for obsd) or a number. */
static void set_command(struct buffer *b, enum proto proto, const char *key, const char *value, int quoted) {
    if (proto == REDIS) {
        resp_command(b, 3, "SET", key, value);
        return;
    }
    char line[512];
    int n = snprintf(line, sizeof line, quoted ? "{\"op\":\"set\",\"key\":\"%s\",\"value\":\"%s\"}\n" : "{\"op\":\"set\",\"key\":\"%s\",\"value\":%s}\n", key, value);
    append(b, line, (size_t)n);
}

static void request(struct buffer *b, enum proto proto, int is_set, const char *prefix, long n, long keys) {
    char key[64], value[65];
    snprintf(key, sizeof key, "%s%ld", prefix, keys > 0 ? n % keys : n);
    if (is_set == 2) {
        /* --op eset: an ephemeral set (obsd only): a key the connection owns, gone when it closes. */
        char line[256];
        payload(value, n);
        append(b, line, (size_t)snprintf(line, sizeof line, "{\"op\":\"set\",\"key\":\"%s\",\"value\":\"%s\",\"ephemeral\":true}\n", key, value));
    } else if (is_set) {
        payload(value, n);
        set_command(b, proto, key, value, 1);
    } else if (proto == REDIS) {
        resp_command(b, 2, "GET", key);
    } else {
        char line[128];
        append(b, line, (size_t)snprintf(line, sizeof line, "{\"op\":\"get\",\"key\":\"%s\"}\n", key));
    }
}

static double cpu_seconds(int pid) {
    if (pid <= 0) return 0;
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *file = fopen(path, "r");
    if (!file) return 0;
    size_t n = fread(text, 1, sizeof text - 1, file);
    fclose(file);
    text[n] = 0;
    char *close = strrchr(text, ')');
    if (!close) return 0;
    unsigned long user = 0, system = 0;
    /* After the command: state (field 3) ... utime (14), stime (15). */
    if (sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &user, &system) != 2) return 0;
    return (double)(user + system) / (double)sysconf(_SC_CLK_TCK);
}

static struct epoll_event events[1024];

/* Waits up to `ms` and calls `readable` for each connection with input; flushes blocked output. */
static int poll_once(int ms, int (*readable)(struct connection *, void *), void *context) {
    int count = epoll_wait(epoll_fd, events, 1024, ms);
    for (int i = 0; i < count; i++) {
        struct connection *c = events[i].data.ptr;
        if (events[i].events & EPOLLOUT) flush(c);
        if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
            if (!readable(c, context)) return 0;
        }
    }
    return 1;
}

/* --- requests --- */

struct request_run {
    enum proto proto;
    int is_set;
    const char *prefix;
    long keys, sent, total, answered;
    double end, time;
};

static int on_request_readable(struct connection *c, void *context) {
    struct request_run *run = context;
    long replies, deliveries;
    if (!read_available(c, &replies, &deliveries)) return 0;
    run->answered += replies;
    if (replies == 0 || run->time >= run->end) return 1;
    for (long i = 0; i < replies && run->sent < run->total; i++) {
        request(&scratch, run->proto, run->is_set, run->prefix, run->sent, run->keys);
        queue(c, scratch.data, scratch.end, 1);
        scratch.end = 0;
        run->sent++;
    }
    flush(c);
    return 1;
}

static void run_requests(const char *path, enum proto proto, int is_set, int clients, int depth, double seconds, long total,
                         long keys, int pid, const char *prefix) {
    struct connection **connections = calloc((size_t)clients, sizeof *connections);
    for (int i = 0; i < clients; i++) connections[i] = connect_to(path, proto);
    struct request_run run = {.proto = proto, .is_set = is_set, .prefix = prefix, .keys = keys,
                              .total = total > 0 ? total : INT64_MAX};
    for (int i = 0; i < clients; i++) {
        for (int j = 0; j < depth && run.sent < run.total; j++) {
            request(&scratch, proto, is_set, prefix, run.sent, run.keys);
            queue(connections[i], scratch.data, scratch.end, 1);
            scratch.end = 0;
            run.sent++;
        }
        flush(connections[i]);
    }
    double warmup = total > 0 ? 0 : 0.2;
    if (total > 0) seconds = 1e9;
    double start = now();
    run.end = start + warmup + seconds;
    run.time = start;
    int measuring = 0;
    double from_time = 0, from_cpu = 0;
    long from_answered = 0;
    while (run.time < run.end && run.answered < run.total) {
        if (!poll_once(10, on_request_readable, &run)) die("the server closed a connection during the run");
        run.time = now();
        if (!measuring && run.time >= start + warmup) {
            measuring = 1;
            from_time = run.time;
            from_answered = run.answered;
            from_cpu = cpu_seconds(pid);
        }
    }
    double elapsed = run.time - from_time;
    printf("ops_per_s=%.3f server_cpu=%.6f\n", elapsed > 0 ? (double)(run.answered - from_answered) / elapsed : 0,
           elapsed > 0 ? (cpu_seconds(pid) - from_cpu) / elapsed : 0);
    for (int i = 0; i < clients; i++) close(connections[i]->fd);
}

/* --- fan-out --- */

#define WINDOW 64

struct fanout {
    enum proto proto;
    const char *shape;
    int watchers, events_per_update;
    struct connection *publisher;
    long sent, complete, deliveries;
    long ring[WINDOW];
    double start_times[WINDOW];
    double *latencies;
    long latency_count, latency_capacity;
    int recording;
};

/* The n-th update of the shape, and the replies it gets. */
static long update(struct fanout *f, struct buffer *b, long n) {
    char value[65], text[32];
    if (strcmp(f->shape, "key") == 0) {
        payload(value, n);
        if (f->proto == REDIS) resp_command(b, 3, "PUBLISH", "hot", value);
        else set_command(b, OBSD, "hot", value, 1);
        return 1;
    }
    long v = n + 1;
    snprintf(text, sizeof text, "%ld", v);
    if (f->proto == OBSD) {
        set_command(b, OBSD, "src", text, 0);
        return 1;
    }
    resp_command(b, 3, "SET", "src", text);
    if (strcmp(f->shape, "computed") == 0) {
        snprintf(text, sizeof text, "%ld", v + 1);
        resp_command(b, 3, "PUBLISH", "c", text);
        return 2;
    }
    if (strcmp(f->shape, "chain") == 0) {
        snprintf(text, sizeof text, "%ld", v + 50);
        resp_command(b, 3, "PUBLISH", "c50", text);
        return 2;
    }
    char channel[32];
    for (int i = 1; i <= 1000; i++) {
        snprintf(channel, sizeof channel, "f.%d", i);
        snprintf(text, sizeof text, "%ld", v + i);
        resp_command(b, 3, "PUBLISH", channel, text);
    }
    return 1001;
}

static int send_if_room(struct fanout *f, double start_time) {
    if (f->sent - f->complete >= WINDOW) return 0;
    f->start_times[f->sent % WINDOW] = start_time;
    long replies = update(f, &scratch, f->sent);
    queue(f->publisher, scratch.data, scratch.end, replies);
    scratch.end = 0;
    f->sent++;
    return 1;
}

static int on_fanout_readable(struct connection *c, void *context) {
    (void)context;
    struct fanout *f = c->owner;
    long replies, delivered;
    if (!read_available(c, &replies, &delivered)) return 0;
    if (c == f->publisher || delivered == 0) return 1;
    f->deliveries += delivered;
    long before = c->completed, after = c->deliveries / f->events_per_update;
    if (after <= before) return 1;
    c->completed = after;
    for (long u = before; u < after; u++) f->ring[u % WINDOW]++;
    double time = now();
    while (f->complete < f->sent && f->ring[f->complete % WINDOW] == f->watchers) {
        f->ring[f->complete % WINDOW] = 0;
        double start = f->start_times[f->complete % WINDOW];
        if (f->recording && start > 0) {
            if (f->latency_count == f->latency_capacity) {
                f->latency_capacity = f->latency_capacity ? f->latency_capacity * 2 : 4096;
                f->latencies = realloc(f->latencies, (size_t)f->latency_capacity * sizeof *f->latencies);
            }
            f->latencies[f->latency_count++] = time - start;
        }
        f->complete++;
    }
    return 1;
}

static void pump(struct fanout *f) {
    flush(f->publisher);
    if (!poll_once(1, on_fanout_readable, f)) die("the server closed a connection during the run");
}

static void drain(struct fanout *f) {
    double deadline = now() + 30;
    while (f->complete < f->sent || f->publisher->in_flight > 0) {
        if (now() > deadline) die("updates still undelivered after 30 s");
        pump(f);
    }
}

/* Sends `lines` on `c` and waits for their replies. */
static void round_trip(struct connection **cs, int count) {
    double deadline = now() + 30;
    for (;;) {
        int waiting = 0;
        for (int i = 0; i < count; i++) waiting |= cs[i]->in_flight > 0;
        if (!waiting) return;
        if (now() > deadline) die("no reply within 30 s");
        long replies, deliveries;
        int n = epoll_wait(epoll_fd, events, 1024, 10);
        for (int i = 0; i < n; i++) {
            struct connection *c = events[i].data.ptr;
            if (events[i].events & EPOLLOUT) flush(c);
            if ((events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !read_available(c, &replies, &deliveries))
                die("the server closed a connection during setup");
        }
    }
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Connects to the server at `path`, sets the shape up and starts the watchers. */
static void setup_fanout(struct fanout *f, const char *path, enum proto proto, const char *shape, int watchers) {
    *f = (struct fanout){.proto = proto, .shape = shape, .watchers = watchers, .events_per_update = 1};
    const char *watched = "hot";
    if (strcmp(shape, "computed") == 0) f->watchers = 100, watched = "c";
    else if (strcmp(shape, "chain") == 0) f->watchers = 1, watched = "c50";
    else if (strcmp(shape, "fan") == 0) f->watchers = 1, f->events_per_update = 1000, watched = "f.*";
    else if (strcmp(shape, "key") != 0) die("unknown shape %s", shape);
    f->publisher = connect_to(path, proto);
    f->publisher->owner = f;
    if (proto == OBSD) {
        char line[256], value[65];
        long setup = 1;
        if (strcmp(shape, "key") == 0) {
            payload(value, -1);
            set_command(&scratch, OBSD, "hot", value, 1);
        } else {
            set_command(&scratch, OBSD, "src", "0", 0);
            int count = strcmp(shape, "computed") == 0 ? 1 : strcmp(shape, "chain") == 0 ? 50 : 1000;
            for (int i = 1; i <= count; i++) {
                int n;
                if (strcmp(shape, "computed") == 0) n = snprintf(line, sizeof line, "{\"op\":\"define\",\"key\":\"c\",\"expr\":\"$src + 1\"}\n");
                else if (strcmp(shape, "chain") == 0 && i == 1) n = snprintf(line, sizeof line, "{\"op\":\"define\",\"key\":\"c1\",\"expr\":\"$src + 1\"}\n");
                else if (strcmp(shape, "chain") == 0) n = snprintf(line, sizeof line, "{\"op\":\"define\",\"key\":\"c%d\",\"expr\":\"$c%d + 1\"}\n", i, i - 1);
                else n = snprintf(line, sizeof line, "{\"op\":\"define\",\"key\":\"f.%d\",\"expr\":\"$src + %d\"}\n", i, i);
                append(&scratch, line, (size_t)n);
                setup++;
            }
        }
        queue(f->publisher, scratch.data, scratch.end, setup);
        scratch.end = 0;
        flush(f->publisher);
        round_trip(&f->publisher, 1);
    }
    struct connection **all = calloc((size_t)f->watchers, sizeof *all);
    for (int i = 0; i < f->watchers; i++) {
        all[i] = connect_to(path, proto);
        all[i]->owner = f;
        if (proto == OBSD) {
            char line[128];
            int n = snprintf(line, sizeof line, "{\"op\":\"watch\",\"keys\":[\"%s\"],\"initial\":false}\n", watched);
            queue(all[i], line, (size_t)n, 1);
        } else {
            resp_command(&scratch, 2, strcmp(shape, "fan") == 0 ? "PSUBSCRIBE" : "SUBSCRIBE", watched);
            queue(all[i], scratch.data, scratch.end, 1);
            scratch.end = 0;
        }
        flush(all[i]);
    }
    round_trip(all, f->watchers);
    free(all);
}

/* The rate for `seconds` after `warmup` seconds not counted, at most WINDOW updates incomplete:
 * adds the deliveries counted and the time they took to `deliveries` and `elapsed`. */
static void fanout_rate(struct fanout *f, double seconds, double warmup, long *deliveries, double *elapsed) {
    double start = now(), warm = start + warmup, end = warm + seconds, time = start;
    long from_deliveries = -1;
    while (time < end) {
        while (send_if_room(f, 0)) {}
        pump(f);
        time = now();
        if (from_deliveries < 0 && time >= warm) from_deliveries = f->deliveries;
    }
    /* Counted up to the end of the window: what the drain then receives took time not counted. */
    *deliveries += f->deliveries - from_deliveries;
    *elapsed += time - warm;
    drain(f);
}

/* Updates paced at 1,000 per second for `seconds`; their latencies (from the send or, after the
 * window was full, from when the update was due) are added to f->latencies. */
static void fanout_paced(struct fanout *f, double seconds) {
    long first = f->sent, total = (long)(1000 * seconds);
    double paced_start = now() + 0.01;
    int held_back = 0;
    f->recording = 1;
    while (f->sent - first < total) {
        double t = now();
        long due = (long)((t - paced_start) * 1000) + 1;
        if (due > total) due = total;
        while (f->sent - first < due) {
            double scheduled = paced_start + (double)(f->sent - first) / 1000;
            if (!send_if_room(f, held_back ? scheduled : t)) break;
        }
        held_back = f->sent - first < due;
        pump(f);
    }
    drain(f);
    f->recording = 0;
}

static double quantile(struct fanout *f, double p) {
    if (f->latency_count == 0) return 1e9;
    qsort(f->latencies, (size_t)f->latency_count, sizeof(double), compare_doubles);
    long i = (long)((double)f->latency_count * p);
    if (i >= f->latency_count) i = f->latency_count - 1;
    return f->latencies[i];
}

/* `count` servers (1 or 2) with the same shape; each run measures them in turns of `block`
 * seconds (the whole run's `seconds` in one turn with one server). */
static void run_fanout(const char **paths, const enum proto *protos, int count, const char *shape, int watchers,
                       double seconds, double block, int runs, long updates) {
    struct fanout f[2];
    for (int i = 0; i < count; i++) setup_fanout(&f[i], paths[i], protos[i], shape, watchers);
    if (updates > 0) {
        while (f[0].sent < updates) {
            while (f[0].sent < updates && send_if_room(&f[0], 0)) {}
            pump(&f[0]);
        }
        drain(&f[0]);
        printf("deliveries=%ld\n", f[0].deliveries);
        return;
    }
    int blocks = count == 1 || block <= 0 ? 1 : (int)(seconds / block + 0.5);
    if (blocks < 1) blocks = 1;
    double turn = seconds / blocks, warmup = blocks == 1 ? 0.2 : (turn / 4 < 0.2 ? turn / 4 : 0.2);
    for (int r = 0; r < runs; r++) {
        long deliveries[2] = {0, 0};
        double elapsed[2] = {0, 0};
        for (int b = 0; b < blocks; b++) {
            for (int k = 0; k < count; k++) {
                int i = b % 2 == 0 ? k : count - 1 - k;
                fanout_rate(&f[i], turn, warmup, &deliveries[i], &elapsed[i]);
            }
        }
        for (int i = 0; i < count; i++) f[i].latency_count = 0;
        for (int b = 0; b < blocks; b++) {
            for (int k = 0; k < count; k++) fanout_paced(&f[b % 2 == 0 ? k : count - 1 - k], turn);
        }
        for (int i = 0; i < count; i++) {
            if (count > 1) printf("server=%d ", i + 1);
            printf("deliveries_per_s=%.3f p50_ms=%.6f p99_ms=%.6f\n", elapsed[i] > 0 ? (double)deliveries[i] / elapsed[i] : 0,
                   quantile(&f[i], 0.5) * 1000, quantile(&f[i], 0.99) * 1000);
        }
        fflush(stdout);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) die("usage: obsload requests|fanout --socket PATH --proto obsd|redis ...");
    const char *mode = argv[1], *path = NULL, *path2 = NULL, *op = "set", *shape = "key", *prefix = "k.";
    enum proto proto = OBSD, proto2 = OBSD;
    int clients = 50, depth = 1, watchers = 1, runs = 1, pid = 0;
    double seconds = 1, block = 0;
    long total = 0, keys = 10000, updates = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *flag = argv[i], *value = argv[i + 1];
        if (!strcmp(flag, "--socket")) path = value;
        else if (!strcmp(flag, "--proto")) proto = !strcmp(value, "redis") ? REDIS : OBSD;
        else if (!strcmp(flag, "--socket2")) path2 = value;
        else if (!strcmp(flag, "--proto2")) proto2 = !strcmp(value, "redis") ? REDIS : OBSD;
        else if (!strcmp(flag, "--block")) block = atof(value);
        else if (!strcmp(flag, "--op")) op = value;
        else if (!strcmp(flag, "--clients")) clients = atoi(value);
        else if (!strcmp(flag, "--depth")) depth = atoi(value);
        else if (!strcmp(flag, "--seconds")) seconds = atof(value);
        else if (!strcmp(flag, "--total")) total = atol(value);
        else if (!strcmp(flag, "--pid")) pid = atoi(value);
        else if (!strcmp(flag, "--prefix")) prefix = value;
        else if (!strcmp(flag, "--shape")) shape = value;
        else if (!strcmp(flag, "--watchers")) watchers = atoi(value);
        else if (!strcmp(flag, "--runs")) runs = atoi(value);
        else if (!strcmp(flag, "--keys")) keys = atol(value);
        else if (!strcmp(flag, "--updates")) updates = atol(value);
        else die("unknown option %s", flag);
    }
    if (!path) die("--socket is required");
    epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (!strcmp(op, "eset") && proto != OBSD) die("--op eset is obsd's (an ephemeral set)");
    if (!strcmp(mode, "requests")) run_requests(path, proto, !strcmp(op, "eset") ? 2 : !strcmp(op, "set"), clients, depth, seconds, total, keys, pid, prefix);
    else if (!strcmp(mode, "fanout")) {
        const char *paths[2] = {path, path2};
        enum proto protos[2] = {proto, proto2};
        run_fanout(paths, protos, path2 ? 2 : 1, shape, watchers, seconds, block, runs, updates);
    }
    else die("unknown mode %s", mode);
    return 0;
}
