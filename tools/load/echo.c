/* echo mode: N connections each do M request/response round trips of S
 * bytes, closed loop (the next request leaves when the reply is complete),
 * on one epoll loop. Every echoed byte is checked: each message has its own
 * pattern, so a reply that is stale, shifted or corrupt is caught. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "load.h"
#include "yard/clock.h"

struct econn {
    int id;
    int fd;
    bool connected, done;
    uint64_t seq;     /* messages completed */
    uint64_t sent_at; /* when the current request started */
    size_t tx_off, rx_off;
    uint8_t *tx;      /* the current request (and expected reply) */
    uint8_t *rx;
};

static void fill_message(struct econn *c, size_t size)
{
    uint8_t base = (uint8_t)(c->id * 131 + c->seq * 7);
    for (size_t i = 0; i < size; i++)
        c->tx[i] = (uint8_t)(base + i * 13);
}

static int set_events(int ep, struct econn *c, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = c};
    return epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void finish(int ep, struct econn *c, int *active)
{
    if (c->done)
        return;
    c->done = true;
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    (*active)--;
}

/* Send what is left of the current request; returns -1 on error. */
static int send_rest(const load_opts_t *o, load_result_t *r, int ep, struct econn *c)
{
    while (c->tx_off < o->size) {
        ssize_t w = send(c->fd, c->tx + c->tx_off, o->size - c->tx_off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return set_events(ep, c, EPOLLIN | EPOLLOUT);
            load_error(r, "connection %d: send: %s", c->id, strerror(errno));
            return -1;
        }
        c->tx_off += (size_t)w;
        r->bytes_sent += (uint64_t)w;
    }
    return set_events(ep, c, EPOLLIN);
}

static int start_message(const load_opts_t *o, load_result_t *r, int ep, struct econn *c)
{
    fill_message(c, o->size);
    c->tx_off = c->rx_off = 0;
    c->sent_at = yard_now_ns();
    return send_rest(o, r, ep, c);
}

/* Read what the socket has; returns 1 when the reply is complete, 0 when
 * more is to come, -1 on error or a wrong byte. */
static int read_reply(const load_opts_t *o, load_result_t *r, struct econn *c)
{
    for (;;) {
        ssize_t n = read(c->fd, c->rx + c->rx_off, o->size - c->rx_off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return 0;
            load_error(r, "connection %d: read: %s", c->id, strerror(errno));
            return -1;
        }
        if (n == 0) {
            load_error(r, "connection %d: the server closed it after %llu of %llu messages", c->id,
                       (unsigned long long)c->seq, (unsigned long long)o->messages);
            return -1;
        }
        r->bytes_received += (uint64_t)n;
        if (memcmp(c->rx + c->rx_off, c->tx + c->rx_off, (size_t)n) != 0) {
            size_t at = c->rx_off;
            while (c->rx[at] == c->tx[at])
                at++;
            load_error(r, "connection %d: message %llu: echoed byte %zu differs (0x%02x, expected 0x%02x)",
                       c->id, (unsigned long long)c->seq, at, c->rx[at], c->tx[at]);
            return -1;
        }
        c->rx_off += (size_t)n;
        if (c->rx_off == o->size)
            return 1;
    }
}

int load_run_echo(const load_opts_t *o, load_result_t *r)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct econn *conns = calloc((size_t)o->connections, sizeof *conns);
    uint8_t *bufs = malloc((size_t)o->connections * o->size * 2);
    if (ep < 0 || !conns || !bufs) {
        load_error(r, "out of memory or descriptors for %d connections", o->connections);
        free(conns);
        free(bufs);
        if (ep >= 0)
            close(ep);
        return -1;
    }
    int active = 0, status = 0;
    for (int i = 0; i < o->connections; i++) {
        struct econn *c = &conns[i];
        c->id = i;
        c->tx = bufs + (size_t)i * o->size * 2;
        c->rx = c->tx + o->size;
        c->fd = load_connect(o, r, ep, c);
        if (c->fd < 0) {
            status = -1;
            break;
        }
        active++;
    }
    struct epoll_event events[256];
    uint64_t last_progress = yard_now_ns();
    uint64_t stop_at = o->duration_ns ? last_progress + o->duration_ns : UINT64_MAX;
    r->start_ns = 0;
    while (status == 0 && active > 0) {
        int n = epoll_wait(ep, events, 256, 100);
        if (n < 0 && errno != EINTR) {
            load_error(r, "epoll_wait: %s", strerror(errno));
            status = -1;
            break;
        }
        for (int i = 0; i < n; i++) {
            struct econn *c = events[i].data.ptr;
            if (c->done)
                continue;
            if (!c->connected) {
                if (load_connected(o, r, ep, c->fd, c, true) < 0) {
                    status = -1; /* the target is not there: nothing to measure */
                    break;
                }
                c->connected = true;
                if (!r->start_ns)
                    r->start_ns = yard_now_ns();
                if (o->messages == 0 || start_message(o, r, ep, c) < 0)
                    finish(ep, c, &active);
                continue;
            }
            int rc = 0;
            if (events[i].events & EPOLLOUT)
                rc = send_rest(o, r, ep, c);
            if (rc == 0 && (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                rc = read_reply(o, r, c);
            if (rc < 0) {
                r->errors++;
                finish(ep, c, &active);
            } else if (rc == 1) {
                uint64_t done_at = yard_now_ns();
                yard_hist_record(&r->latency, done_at - c->sent_at);
                r->messages++;
                r->end_ns = done_at;
                last_progress = done_at;
                bool more = o->duration_ns ? done_at < stop_at : ++c->seq < o->messages;
                if (o->duration_ns)
                    c->seq++;
                if (!more || start_message(o, r, ep, c) < 0)
                    finish(ep, c, &active);
            }
        }
        uint64_t now = yard_now_ns(); /* after the events: last_progress may be newer than
                                       * the wake-up */
        if (status == 0 && active > 0 && now - last_progress > o->timeout_ns) {
            load_error(r, "no progress for %.1f s (--timeout): %d connections still waiting",
                       (double)o->timeout_ns / 1e9, active);
            r->errors += (uint64_t)active;
            break;
        }
    }
    for (int i = 0; i < o->connections; i++)
        if (conns[i].fd > 0 && !conns[i].done)
            close(conns[i].fd);
    if (!r->end_ns)
        r->end_ns = yard_now_ns();
    if (!r->start_ns)
        r->start_ns = r->end_ns;
    free(conns);
    free(bufs);
    close(ep);
    return status;
}
