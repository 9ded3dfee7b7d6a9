/* rate mode: the papayaChat benchmark (tcpkali --channel-bandwidth-upstream
 * 1Mbps -em 'message\n'). Each connection sends its message over and over
 * at a constant bandwidth for --duration, after a ramp-up during which the
 * connections start one after another and which is not measured. Every
 * millisecond each connection sends, in one write, the whole messages its
 * schedule says are due; a connection that cannot keep up is behind
 * schedule, and the run says by how much. Anything the server sends back is
 * read and dropped. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "load.h"
#include "yard/clock.h"

#define REPEAT_BYTES (64u * 1024u)

struct rconn {
    int id, fd;
    bool connected, blocked;
    uint64_t start_ns;    /* when its schedule begins */
    uint64_t sent;        /* bytes */
    uint64_t at_window;   /* bytes sent when the window opened */
    uint64_t at_close;    /* bytes sent when it closed */
};

double load_parse_bandwidth(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v <= 0)
        return -1;
    double mult = 1;
    switch (*end) {
    case 'k':
    case 'K': mult = 1e3; end++; break;
    case 'M': mult = 1e6; end++; break;
    case 'G': mult = 1e9; end++; break;
    }
    if (strcmp(end, "bps") == 0)
        return v * mult / 8.0; /* bits */
    if (strcmp(end, "Bps") == 0)
        return v * mult; /* bytes */
    return -1;
}

/* Bytes due by now: whole messages only, the first one at once. */
static uint64_t due_bytes(const load_opts_t *o, const struct rconn *c, uint64_t now)
{
    if (now < c->start_ns)
        return 0;
    double secs = (double)(now - c->start_ns) / 1e9;
    uint64_t msgs = (uint64_t)(secs * o->byte_rate / (double)o->message_len) + 1;
    return msgs * o->message_len;
}

static int pump(const load_opts_t *o, load_result_t *r, int ep, struct rconn *c,
                const uint8_t *repeat, uint64_t now)
{
    uint64_t due = due_bytes(o, c, now);
    while (c->sent < due) {
        size_t off = (size_t)(c->sent % o->message_len);
        size_t n = (size_t)(due - c->sent);
        if (n > REPEAT_BYTES)
            n = REPEAT_BYTES;
        ssize_t w = send(c->fd, repeat + off, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                if (!c->blocked) {
                    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                    c->blocked = true;
                }
                return 0;
            }
            load_error(r, "connection %d: send: %s", c->id, strerror(errno));
            return -1;
        }
        c->sent += (uint64_t)w;
        r->bytes_sent += (uint64_t)w;
    }
    if (c->blocked) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        c->blocked = false;
    }
    return 0;
}

static int drain(load_result_t *r, struct rconn *c)
{
    uint8_t buf[4096];
    for (;;) {
        ssize_t n = read(c->fd, buf, sizeof buf);
        if (n > 0) {
            r->bytes_received += (uint64_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        load_error(r, "connection %d: %s", c->id,
                   n == 0 ? "the server closed it" : strerror(errno));
        return -1;
    }
}

int load_run_rate(const load_opts_t *o, load_result_t *r)
{
    size_t reps = REPEAT_BYTES / o->message_len + 2;
    uint8_t *repeat = malloc(reps * o->message_len);
    struct rconn *conns = calloc((size_t)o->connections, sizeof *conns);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (!repeat || !conns || ep < 0) {
        load_error(r, "out of memory or descriptors");
        free(repeat);
        free(conns);
        if (ep >= 0)
            close(ep);
        return -1;
    }
    for (size_t i = 0; i < reps; i++)
        memcpy(repeat + i * o->message_len, o->message, o->message_len);

    int status = 0;
    for (int i = 0; i < o->connections; i++) {
        struct rconn *c = &conns[i];
        c->id = i;
        c->fd = load_connect(o, r, ep, c);
        if (c->fd < 0) {
            status = -1;
            break;
        }
    }
    uint64_t t0 = yard_now_ns();
    uint64_t window_start = t0 + o->ramp_ns, window_end = window_start + o->duration_ns;
    for (int i = 0; i < o->connections; i++)
        conns[i].start_ns = t0 + o->ramp_ns * (uint64_t)i / (uint64_t)o->connections;
    bool window_open = false;
    struct epoll_event events[256];
    while (status == 0) {
        int n = epoll_wait(ep, events, 256, 1);
        uint64_t now = yard_now_ns();
        for (int i = 0; i < n && status == 0; i++) {
            struct rconn *c = events[i].data.ptr;
            if (c->fd < 0)
                continue;
            if (!c->connected) {
                /* Nagle stays on: the papayaChat load is a byte stream. */
                if (load_connected(o, r, ep, c->fd, c, false) < 0) {
                    status = -1;
                    break;
                }
                c->connected = true;
                continue;
            }
            if ((events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && drain(r, c) < 0) {
                r->errors++;
                c->at_close = c->sent;
                close(c->fd);
                c->fd = -1;
            }
        }
        if (!window_open && now >= window_start) {
            window_open = true;
            for (int i = 0; i < o->connections; i++)
                conns[i].at_window = conns[i].sent;
        }
        bool done = now >= window_end;
        uint64_t behind = 0;
        for (int i = 0; i < o->connections && status == 0; i++) {
            struct rconn *c = &conns[i];
            if (c->fd < 0 || !c->connected)
                continue;
            if (!done && pump(o, r, ep, c, repeat, now) < 0) {
                r->errors++;
                c->at_close = c->sent;
                close(c->fd);
                c->fd = -1;
                continue;
            }
            uint64_t due = due_bytes(o, c, now);
            if (due > c->sent && due - c->sent > behind)
                behind = due - c->sent;
        }
        double behind_ms = (double)behind / o->byte_rate * 1e3;
        if (window_open && behind_ms > r->behind_max_ms)
            r->behind_max_ms = behind_ms;
        if (done)
            break;
    }
    r->start_ns = window_start;
    r->end_ns = window_end;
    double secs = (double)o->duration_ns / 1e9;
    r->conn_min_bps = -1;
    for (int i = 0; i < o->connections; i++) {
        struct rconn *c = &conns[i];
        uint64_t end = c->fd >= 0 ? c->sent : c->at_close;
        uint64_t in_window = end > c->at_window ? end - c->at_window : 0;
        r->window_bytes += in_window;
        double bps = (double)in_window * 8.0 / secs;
        if (r->conn_min_bps < 0 || bps < r->conn_min_bps)
            r->conn_min_bps = bps;
        if (bps > r->conn_max_bps)
            r->conn_max_bps = bps;
        if (c->fd >= 0)
            close(c->fd);
    }
    r->target_bps = o->byte_rate * 8.0 * o->connections;
    r->achieved_bps = (double)r->window_bytes * 8.0 / secs;
    r->messages = r->window_bytes / o->message_len;
    free(repeat);
    free(conns);
    close(ep);
    return status;
}
