/* counter mode: the Eve atomic counter. Each connection sends one request
 * at a time (closed loop): 0x00 reads with probability --read-ratio, 0x01
 * increments otherwise. Every reply is checked: on one connection a read
 * never sees the count go back and an increment always sees it go up. At
 * the end the count must equal its start plus the increments sent, which
 * assumes yard-load is the only writer while it runs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "load.h"
#include "yard/clock.h"
#include "yard/proto_counter.h"

struct cconn {
    int id, fd;
    bool connected, done;
    uint8_t op;
    uint64_t sent_at, last, ops;
    size_t rx_off;
    uint8_t rx[YARD_COUNTER_REPLY_LEN];
    uint64_t rng;
};

/* xorshift64*: reproducible per connection, cheap. */
static double next_uniform(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (double)((*s * 2685821657736338717ull) >> 11) / (double)(1ull << 53);
}

/* One blocking request on a fresh connection: the count now. */
static int read_count(const load_opts_t *o, load_result_t *r, uint64_t *value)
{
    char err[256];
    int fd = yard_connect(&o->target, false, err, sizeof err);
    if (fd < 0) {
        load_error(r, "%s", err);
        return -1;
    }
    /* A server that answers short must not hang us: --timeout bounds it. */
    struct timeval tv = {.tv_sec = (time_t)(o->timeout_ns / YARD_NS_PER_S),
                         .tv_usec = (suseconds_t)(o->timeout_ns % YARD_NS_PER_S / 1000)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    uint8_t req = YARD_COUNTER_READ, rep[YARD_COUNTER_REPLY_LEN];
    size_t got = 0;
    errno = 0;
    if (yard_write_all(fd, &req, 1) < 0)
        goto fail;
    while (got < sizeof rep) {
        ssize_t n = read(fd, rep + got, sizeof rep - got);
        if (n <= 0)
            goto fail;
        got += (size_t)n;
    }
    close(fd);
    *value = yard_counter_reply_value(rep);
    return 0;
fail:
    load_error(r, "reading the counter from %s: %s", o->target_text,
               errno == EAGAIN ? "no complete reply within --timeout"
               : errno         ? strerror(errno)
                               : "connection closed");
    close(fd);
    return -1;
}

static int send_op(const load_opts_t *o, load_result_t *r, struct cconn *c)
{
    c->op = next_uniform(&c->rng) < o->read_ratio ? YARD_COUNTER_READ : YARD_COUNTER_INCR;
    c->rx_off = 0;
    c->sent_at = yard_now_ns();
    ssize_t w;
    do
        w = send(c->fd, &c->op, 1, MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    if (w != 1) {
        /* One byte into an empty socket buffer cannot be EAGAIN. */
        load_error(r, "connection %d: send: %s", c->id, strerror(errno));
        return -1;
    }
    r->bytes_sent++;
    if (c->op == YARD_COUNTER_INCR)
        r->increments++;
    return 0;
}

/* 1: reply complete and valid, 0: more to come, -1: error. */
static int read_reply(load_result_t *r, struct cconn *c)
{
    ssize_t n = read(c->fd, c->rx + c->rx_off, sizeof c->rx - c->rx_off);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return 0;
        load_error(r, "connection %d: read: %s", c->id, strerror(errno));
        return -1;
    }
    if (n == 0) {
        load_error(r, "connection %d: the server closed it after %llu requests", c->id,
                   (unsigned long long)c->ops);
        return -1;
    }
    r->bytes_received += (uint64_t)n;
    c->rx_off += (size_t)n;
    if (c->rx_off < sizeof c->rx)
        return 0;
    uint64_t v = yard_counter_reply_value(c->rx);
    if (c->op == YARD_COUNTER_INCR ? v <= c->last : v < c->last) {
        load_error(r, "connection %d: %s answered %llu after %llu was seen", c->id,
                   c->op == YARD_COUNTER_INCR ? "an increment" : "a read", (unsigned long long)v,
                   (unsigned long long)c->last);
        return -1;
    }
    c->last = v;
    return 1;
}

int load_run_counter(const load_opts_t *o, load_result_t *r)
{
    uint64_t initial;
    if (read_count(o, r, &initial) < 0)
        return -1;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct cconn *conns = calloc((size_t)o->connections, sizeof *conns);
    if (ep < 0 || !conns) {
        load_error(r, "out of memory or descriptors");
        free(conns);
        if (ep >= 0)
            close(ep);
        return -1;
    }
    int active = 0, status = 0;
    for (int i = 0; i < o->connections && status == 0; i++) {
        struct cconn *c = &conns[i];
        c->id = i;
        c->last = initial;
        c->rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
        c->fd = load_connect(o, r, ep, c);
        if (c->fd < 0) {
            status = -1;
            break;
        }
        active++;
    }
    struct epoll_event events[256];
    uint64_t last_progress = yard_now_ns();
    uint64_t stop_at = o->duration_ns ? yard_now_ns() + o->duration_ns : UINT64_MAX;
    r->start_ns = yard_now_ns();
    while (status == 0 && active > 0) {
        int n = epoll_wait(ep, events, 256, 100);
        for (int i = 0; i < n && status == 0; i++) {
            struct cconn *c = events[i].data.ptr;
            if (c->done)
                continue;
            int rc;
            if (!c->connected) {
                if (load_connected(o, r, ep, c->fd, c, true) < 0) {
                    status = -1;
                    break;
                }
                c->connected = true;
                rc = send_op(o, r, c);
            } else {
                rc = read_reply(r, c);
                if (rc == 1) {
                    uint64_t now = yard_now_ns();
                    yard_hist_record(&r->latency, now - c->sent_at);
                    r->messages++;
                    c->ops++;
                    r->end_ns = last_progress = now;
                    bool more = o->duration_ns ? now < stop_at : c->ops < o->messages;
                    rc = more ? send_op(o, r, c) : 1;
                    if (!more) {
                        c->done = true;
                        close(c->fd);
                        active--;
                    }
                    continue;
                }
            }
            if (rc < 0) {
                r->errors++;
                c->done = true;
                close(c->fd);
                active--;
            }
        }
        if (status == 0 && active > 0 && yard_now_ns() - last_progress > o->timeout_ns) {
            load_error(r, "no progress for %.1f s (--timeout)", (double)o->timeout_ns / 1e9);
            r->errors += (uint64_t)active;
            break;
        }
    }
    for (int i = 0; i < o->connections; i++)
        if (conns[i].fd > 0 && !conns[i].done)
            close(conns[i].fd);
    free(conns);
    close(ep);
    if (!r->end_ns)
        r->end_ns = yard_now_ns();
    if (status < 0)
        return -1;
    uint64_t final;
    if (read_count(o, r, &final) < 0)
        return -1;
    r->count_initial = initial;
    r->count_final = final;
    r->count_checked = true;
    /* A request that failed may or may not have been counted: the exact
     * check holds for error-free runs. */
    if (!r->errors && final != initial + r->increments) {
        load_error(r, "the count is %llu, expected %llu (start) + %llu (increments sent)",
                   (unsigned long long)final, (unsigned long long)initial,
                   (unsigned long long)r->increments);
        r->errors++;
    }
    return 0;
}
