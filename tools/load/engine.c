/* Linux-only: epoll, timerfd, io_uring. What a port uses instead: docs/portability.md. */
/* The request/response engine behind echo, counter and http: one epoll loop
 * drives a share of the connections through a protocol's callbacks.
 *
 * - Closed loop (no --rate): each connection keeps up to --pipeline K
 *   requests outstanding and sends the next one as soon as a reply frees a
 *   slot; latency runs from the moment a request starts to be written.
 * - Open loop (--rate R): request j of connection c is *due* at
 *   t0 + phase(c) + j * N/R, whatever the server does. It leaves at its due
 *   time when the connection has a free slot, later when it does not, and
 *   its latency runs from the due time (wrk2's correction for coordinated
 *   omission): a server that stalls for a second shows a second of latency
 *   in every request that was due during the stall. The generator's own
 *   lateness, the time between a request becoming sendable (due and a slot
 *   free) and its first byte leaving, is behind_max_ms; a run where it
 *   exceeds 1% of the run is invalid, because the load was not what it says.
 *
 * All connections are established before the clock starts, so connection
 * set-up is not in any latency. The loop wakes at the next due time (a
 * min-heap of connections waiting for one): a timerfd in the epoll set, or
 * the timeout of the ring's wait.
 *
 * Two ways to do the I/O (--io). epoll: wait for readiness, read() and
 * send() per round trip. uring: once connected, the sockets leave the
 * epoll set and become the ring's registered files; a multishot receive
 * per connection into buffers the kernel picks from a ring of provided
 * buffers, sends as submissions (one in flight per connection; requests
 * started meanwhile queue behind it in the connection's buffer), and each
 * loop turn submits everything and waits for the next completions or due
 * time in one io_uring_enter. The protocol callbacks, the schedule and
 * every check are the same code for both.
 *
 * Either way most of a round trip's cost is the kernel's loopback TCP path
 * (a send also runs the server socket's receive processing), which no
 * interface removes: see docs/load.md for what the ring saves.
 *
 * --tls (epoll only): each connection's handshake is part of connecting,
 * timed from the TCP connect's start; then each request is sealed as it
 * starts (include/yard/tls.h) and what arrives is opened before the
 * protocol sees it, so latency includes both. */
#include <math.h>
#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "load.h"
#include "yard/buf.h"
#include "yard/clock.h"
#include "yard/tls.h"
#include "yard/uring.h"

struct lconn {
    int id, fd;
    bool connected, done;
    uint32_t events;             /* registered with epoll (EPOLLIN after the connect) */
    uint64_t sent, completed;    /* requests started, replies complete */
    uint64_t slot_free_at;       /* when the number outstanding last fell below K */
    uint64_t ready_at;           /* closed loop with --think-time: not before this */
    uint64_t *start;             /* ring of K: each outstanding request's start time */
    uint32_t *tag;               /* ring of K: what the protocol said about it */
    uint8_t *tx;                 /* epoll: the request being written; uring: requests not
                                  * yet acknowledged by a send completion, oldest first */
    size_t tx_len, tx_off;       /* uring: tx_off is unused */
    bool sending, recv_armed;    /* uring: a send / a multishot receive in flight */
    void *priv;
    yard_tls_t *tls;             /* --tls */
    yard_buf_t wire;             /* --tls: records the socket has not taken yet */
    bool secured;                /* --tls: the handshake is done */
    uint64_t connect_at;         /* --tls: when the TCP connect started */
};

struct due {
    uint64_t at, seq;
    struct lconn *c;
};

struct engine {
    const load_opts_t *o;
    const load_proto_t *p;
    load_result_t *r;
    int ep, tfd;
    struct lconn *conns;
    bool open;                  /* open loop */
    uint64_t t0, stop_at, armed;
    double cpu_at_start;        /* this thread's CPU when the run began (s) */
    double interval;            /* open loop: ns between two requests of one connection */
    int active;
    uint64_t outstanding;       /* over all connections */
    uint64_t last_progress;
    struct due *heap;
    size_t nheap, capheap;
    /* --io uring */
    bool ring_on;
    bool fixed;                 /* the sockets are the ring's registered files */
    struct io_uring ring;
    yard_bufring_t bufs; /* the receives' provided buffers */
    uint8_t rbuf[65536];
};

#define RING_BUF_SIZE 4096u
#define RING_BGID 0
enum { UD_RECV = 1, UD_SEND = 2, UD_MASK = 3 };

static int heap_push(struct engine *e, struct due d)
{
    if (e->nheap == e->capheap) {
        size_t cap = e->capheap ? e->capheap * 2 : 256;
        struct due *h = realloc(e->heap, cap * sizeof *h);
        if (!h)
            return -1;
        e->heap = h;
        e->capheap = cap;
    }
    size_t i = e->nheap++;
    while (i > 0 && e->heap[(i - 1) / 2].at > d.at) {
        e->heap[i] = e->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    e->heap[i] = d;
    return 0;
}

static struct due heap_pop(struct engine *e)
{
    struct due top = e->heap[0], last = e->heap[--e->nheap];
    size_t i = 0;
    for (;;) {
        size_t k = 2 * i + 1;
        if (k >= e->nheap)
            break;
        if (k + 1 < e->nheap && e->heap[k + 1].at < e->heap[k].at)
            k++;
        if (e->heap[k].at >= last.at)
            break;
        e->heap[i] = e->heap[k];
        i = k;
    }
    if (e->nheap)
        e->heap[i] = last;
    return top;
}

static uint64_t due_time(const struct engine *e, const struct lconn *c, uint64_t seq)
{
    /* Connections are spread evenly over one interval, so N connections at
     * R/s together send one request every 1/R s, not N at once. */
    double phase = (double)(c - e->conns) / (double)e->o->connections;
    return e->t0 + (uint64_t)((phase + (double)seq) * e->interval);
}

static bool behind_too_far(const struct engine *e)
{
    return e->r->behind_max_ms > 0.01 * (double)e->o->duration_ns / 1e6;
}

/* Open loop with a duration: the requests of c due before the window ends. */
static uint64_t due_in_window(const struct engine *e, const struct lconn *c)
{
    double phase = (double)(c - e->conns) / (double)e->o->connections;
    double n = ceil((double)(e->stop_at - e->t0) / e->interval - phase);
    uint64_t k = n > 0 ? (uint64_t)n : 0;
    while (k > 0 && due_time(e, c, k - 1) >= e->stop_at) /* rounding, both ways */
        k--;
    while (due_time(e, c, k) < e->stop_at)
        k++;
    return k;
}

static bool has_more(const struct engine *e, const struct lconn *c, uint64_t now)
{
    if (!e->o->duration_ns)
        return c->sent < e->o->messages;
    if (e->open) {
        if (due_time(e, c, c->sent) >= e->stop_at)
            return false;
        /* What fell due in the window still leaves after it, so a stalled
         * server's backlog is measured, for at most one more window: a rate
         * the server (or connections x pipeline) cannot carry must not
         * stretch the run without bound. A generator itself behind by over
         * 1% of the window (the run is invalid already) stops at its end.
         * What never left is counted (unsent). */
        if (now < e->stop_at)
            return true;
        return now - e->stop_at < e->o->duration_ns && !behind_too_far(e);
    }
    return now < e->stop_at;
}

static void finish(struct engine *e, struct lconn *c)
{
    if (c->done)
        return;
    c->done = true;
    e->outstanding -= c->sent - c->completed;
    if (e->ring_on) {
        shutdown(c->fd, SHUT_RDWR); /* ends what the ring has armed on it */
        if (e->fixed) { /* the ring's reference goes too, so close() releases it */
            int none = -1;
            io_uring_register_files_update(&e->ring, (unsigned)(c - e->conns), &none, 1);
        }
    } else {
        epoll_ctl(e->ep, EPOLL_CTL_DEL, c->fd, NULL);
    }
    close(c->fd);
    yard_tls_free(c->tls);
    c->tls = NULL;
    yard_buf_free(&c->wire);
    e->active--;
}

static void fail(struct engine *e, struct lconn *c)
{
    e->r->errors++;
    finish(e, c);
}

/* Register exactly these events; no system call when they already are
 * (the steady state of a round trip: EPOLLIN). */
static int want(struct engine *e, struct lconn *c, uint32_t events)
{
    if (c->events == events)
        return 0;
    struct epoll_event ev = {.events = events, .data.ptr = c};
    c->events = events;
    return epoll_ctl(e->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* ---- --io uring ---------------------------------------------------------- */

/* An operation on connection c's socket: its index in the registered files
 * (no file lookup and reference count per operation), or its descriptor. */
static void ring_target(const struct engine *e, const struct lconn *c, struct io_uring_sqe *sqe)
{
    if (e->fixed) {
        sqe->fd = (int)(c - e->conns);
        sqe->flags |= IOSQE_FIXED_FILE;
    }
}

static struct io_uring_sqe *ring_sqe(struct engine *e)
{
    struct io_uring_sqe *sqe;
    while (!(sqe = io_uring_get_sqe(&e->ring)))
        io_uring_submit(&e->ring); /* full: what is in it goes first */
    return sqe;
}

/* Send what is queued, unless a send is already in flight (its completion
 * sends the rest). */
static void ring_send(struct engine *e, struct lconn *c)
{
    if (c->sending || !c->tx_len)
        return;
    struct io_uring_sqe *sqe = ring_sqe(e);
    io_uring_prep_send(sqe, c->fd, c->tx, c->tx_len, MSG_NOSIGNAL);
    ring_target(e, c, sqe);
    io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)c | UD_SEND);
    c->sending = true;
}

static void ring_recv(struct engine *e, struct lconn *c)
{
    struct io_uring_sqe *sqe = ring_sqe(e);
    io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
    ring_target(e, c, sqe);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = RING_BGID;
    io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)c | UD_RECV);
    c->recv_armed = true;
}

/* A ring with a provided-buffer ring for the receives: 0, or -errno (the
 * ring is then not used). */
static int ring_setup(struct engine *e)
{
    bool defer;
    int rc = yard_ring_init(&e->ring, 1024, 16 * 1024, &defer);
    if (rc < 0)
        return rc;
    e->ring_on = true;
    io_uring_register_ring_fd(&e->ring);
    /* Two buffers per connection, at least 64, a power of two. */
    unsigned want = (unsigned)e->o->connections * 2, n = 64;
    while (n < want && n < 32768)
        n *= 2;
    return yard_bufring_init(&e->bufs, &e->ring, n, RING_BUF_SIZE, RING_BGID);
}

/* The connections are up: from now on the ring alone watches them. Out of
 * the epoll set, so the server's sends do not also run an epoll callback per
 * reply; and registered as the ring's files when the kernel takes them (else
 * the operations name the descriptors). */
static void ring_adopt(struct engine *e)
{
    int n = e->o->connections;
    int *fds = malloc((size_t)n * sizeof *fds);
    for (int i = 0; i < n; i++) {
        epoll_ctl(e->ep, EPOLL_CTL_DEL, e->conns[i].fd, NULL);
        if (fds)
            fds[i] = e->conns[i].fd;
    }
    e->fixed = fds && io_uring_register_files(&e->ring, fds, (unsigned)n) == 0;
    free(fds);
}

static void ring_teardown(struct engine *e)
{
    if (e->ring_on)
        io_uring_queue_exit(&e->ring);
    e->ring_on = false;
    yard_bufring_fini(&e->bufs);
}

static void after_io(struct engine *e, struct lconn *c, uint64_t now);
static int consume(struct engine *e, struct lconn *c, const uint8_t *p, size_t left);
static void closed_early(struct engine *e, struct lconn *c);

static void ring_on_recv(struct engine *e, struct lconn *c, int res, unsigned flags)
{
    int bid = yard_bufring_bid(flags);
    if (bid >= 0) {
        if (res > 0 && !c->done)
            consume(e, c, yard_bufring_buf(&e->bufs, (unsigned)bid), (size_t)res);
        yard_bufring_return(&e->bufs, (unsigned)bid);
    }
    if (!(flags & IORING_CQE_F_MORE))
        c->recv_armed = false;
    if (c->done)
        return;
    if (res == 0) {
        closed_early(e, c);
        return;
    }
    if (res < 0 && res != -ENOBUFS) {
        load_error(e->r, "connection %d: read: %s", c->id, strerror(-res));
        fail(e, c);
        return;
    }
    if (!c->recv_armed)
        ring_recv(e, c); /* it ended: every buffer was in use */
}

static void ring_on_send(struct engine *e, struct lconn *c, int res)
{
    c->sending = false;
    if (c->done)
        return;
    if (res < 0) {
        load_error(e->r, "connection %d: send: %s", c->id, strerror(-res));
        fail(e, c);
        return;
    }
    /* What went leaves the queue; the rest (and what was queued behind it)
     * goes next. */
    size_t n = (size_t)res;
    memmove(c->tx, c->tx + n, c->tx_len - n);
    c->tx_len -= n;
    e->r->bytes_sent += n;
}

/* Submit what the turn prepared, wait for a completion (or the next due
 * time, or 100 ms for the no-progress check) and handle every completion. */
static int ring_turn(struct engine *e)
{
    uint64_t now = yard_now_ns(), wait = 100 * YARD_NS_PER_MS;
    if (e->nheap)
        wait = e->heap[0].at > now ? e->heap[0].at - now : 0;
    if (wait > 100 * YARD_NS_PER_MS)
        wait = 100 * YARD_NS_PER_MS;
    struct __kernel_timespec ts = {.tv_sec = (long long)(wait / YARD_NS_PER_S),
                                   .tv_nsec = (long long)(wait % YARD_NS_PER_S)};
    struct io_uring_cqe *cqe;
    int rc = io_uring_submit_and_wait_timeout(&e->ring, &cqe, 1, &ts, NULL);
    if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EBUSY && rc != -EAGAIN) {
        load_error(e->r, "io_uring_enter: %s", strerror(-rc));
        return -1;
    }
    struct io_uring_cqe *cqes[256];
    unsigned n;
    while ((n = io_uring_peek_batch_cqe(&e->ring, cqes, 256)) > 0) {
        for (unsigned i = 0; i < n; i++) {
            uint64_t ud = cqes[i]->user_data;
            struct lconn *c = (struct lconn *)(uintptr_t)(ud & ~(uint64_t)UD_MASK);
            if ((ud & UD_MASK) == UD_RECV)
                ring_on_recv(e, c, cqes[i]->res, cqes[i]->flags);
            else
                ring_on_send(e, c, cqes[i]->res);
            if (!c->done)
                after_io(e, c, yard_now_ns());
        }
        io_uring_cq_advance(&e->ring, n);
    }
    return 0;
}

/* ---- --tls ----------------------------------------------------------------- */

/* Send the records waiting (after taking what TLS wrote): 1 when all went,
 * 0 when the socket is full (EPOLLOUT is wanted), -1 when it failed. */
static int tls_send(struct engine *e, struct lconn *c)
{
    int rc = load_tls_flush(c->tls, &c->wire, c->fd);
    if (rc == -ENOMEM)
        load_error(e->r, "connection %d: out of memory for TLS records", c->id);
    else if (rc < 0)
        load_error(e->r, "connection %d: send: %s", c->id, strerror(-rc));
    return rc < 0 ? -1 : rc;
}

/* Move c's handshake on: 1 when it is done (counted and timed), 0 while it
 * waits for the server, -1 when it failed (the run's error). */
static int tls_step(struct engine *e, struct lconn *c)
{
    int h = yard_tls_handshake(c->tls);
    int sent = tls_send(e, c);
    if (h < 0 || sent < 0) {
        e->r->tls_failures++;
        if (h < 0)
            load_error(e->r, "connection %d: %s", c->id, yard_tls_why(c->tls));
        return -1;
    }
    want(e, c, sent ? EPOLLIN : EPOLLIN | EPOLLOUT);
    if (h == 0)
        return 0;
    c->secured = true;
    load_tls_established(e->r, c->tls, c->connect_at);
    return 1;
}

/* During the handshake: what arrived, fed to TLS. -1 when the server closed. */
static int tls_read_handshake(struct engine *e, struct lconn *c)
{
    for (;;) {
        ssize_t n = read(c->fd, e->rbuf, sizeof e->rbuf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        if (n <= 0 || yard_tls_feed(c->tls, e->rbuf, (size_t)n) < 0) {
            e->r->tls_failures++;
            load_error(e->r, "connection %d: the server closed it during the TLS handshake%s",
                       c->id, n == 0 ? " (does this port speak TLS?)" : "");
            return -1;
        }
        if ((size_t)n < sizeof e->rbuf)
            return 0;
    }
}

static int consume(struct engine *e, struct lconn *c, const uint8_t *p, size_t left);

/* Records arrived: open them and hand the plaintext to the protocol. */
static int tls_consume(struct engine *e, struct lconn *c, const uint8_t *p, size_t n)
{
    if (yard_tls_feed(c->tls, p, n) < 0) {
        load_error(e->r, "connection %d: out of memory for TLS records", c->id);
        fail(e, c);
        return -1;
    }
    uint8_t plain[16384];
    for (;;) {
        long got = yard_tls_read(c->tls, plain, sizeof plain);
        if (got > 0) {
            if (consume(e, c, plain, (size_t)got) < 0)
                return -1;
            continue;
        }
        if (got == 0)
            return tls_send(e, c) < 0 ? (fail(e, c), -1) : 0;
        load_error(e->r, "connection %d: %s", c->id,
                   got == -ESHUTDOWN ? "the server ended the TLS session" : yard_tls_why(c->tls));
        fail(e, c);
        return -1;
    }
}

/* Write what is pending and start every request that may start now.
 * Returns -1 when the connection failed (counted, closed). */
static int pump(struct engine *e, struct lconn *c, uint64_t now)
{
    const load_opts_t *o = e->o;
    for (;;) {
        if (c->tls && c->tx_off < c->tx_len) { /* sealed, then sent as records */
            if (yard_tls_write(c->tls, c->tx + c->tx_off, c->tx_len - c->tx_off) < 0) {
                load_error(e->r, "connection %d: %s", c->id, yard_tls_why(c->tls));
                fail(e, c);
                return -1;
            }
            e->r->bytes_sent += c->tx_len - c->tx_off;
            c->tx_off = c->tx_len;
        }
        if (c->tls) {
            int sent = tls_send(e, c);
            if (sent < 0) {
                fail(e, c);
                return -1;
            }
            if (sent == 0)
                return want(e, c, EPOLLIN | EPOLLOUT);
        }
        while (!e->ring_on && c->tx_off < c->tx_len) {
            ssize_t w = send(c->fd, c->tx + c->tx_off, c->tx_len - c->tx_off, MSG_NOSIGNAL);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == EAGAIN)
                    return want(e, c, EPOLLIN | EPOLLOUT);
                load_error(e->r, "connection %d: send: %s", c->id, strerror(errno));
                fail(e, c);
                return -1;
            }
            c->tx_off += (size_t)w;
            e->r->bytes_sent += (uint64_t)w;
        }
        if (c->sent - c->completed >= o->pipeline || !has_more(e, c, now))
            break;
        uint64_t start = now;
        if (!e->open && c->ready_at > now) {
            if (heap_push(e, (struct due){c->ready_at, c->sent, c}) < 0) {
                load_error(e->r, "out of memory for the schedule");
                fail(e, c);
                return -1;
            }
            break;
        }
        if (e->open) {
            uint64_t due = due_time(e, c, c->sent);
            if (due > now) {
                if (heap_push(e, (struct due){due, c->sent, c}) < 0) {
                    load_error(e->r, "out of memory for the schedule");
                    fail(e, c);
                    return -1;
                }
                break;
            }
            uint64_t ready = due > c->slot_free_at ? due : c->slot_free_at;
            double late_ms = (double)(now - ready) / 1e6;
            if (late_ms > e->r->behind_max_ms)
                e->r->behind_max_ms = late_ms;
            start = due;
        }
        size_t k = (size_t)(c->sent % o->pipeline);
        uint32_t tag = 0;
        if (e->ring_on) {
            /* Behind whatever is not acknowledged yet (at most K requests). */
            c->tx_len += e->p->request(c->priv, c->sent, c->tx + c->tx_len, &tag, e->r);
        } else {
            c->tx_len = e->p->request(c->priv, c->sent, c->tx, &tag, e->r);
            c->tx_off = 0;
        }
        c->start[k] = start;
        c->tag[k] = tag;
        if (e->outstanding++ == 0)
            e->last_progress = now; /* the no-progress clock runs while something waits */
        c->sent++;
    }
    if (e->ring_on) {
        ring_send(e, c);
        return 0;
    }
    return want(e, c, EPOLLIN);
}

/* Hand reply bytes to the protocol, one reply at a time. -1 when the
 * connection failed (counted, closed). */
static int consume(struct engine *e, struct lconn *c, const uint8_t *p, size_t left)
{
    const load_opts_t *o = e->o;
    e->r->bytes_received += left;
    while (left > 0) {
        if (c->completed == c->sent) {
            load_error(e->r, "connection %d: %zu bytes arrived with no request outstanding",
                       c->id, left);
            fail(e, c);
            return -1;
        }
        size_t k = (size_t)(c->completed % o->pipeline), used = 0;
        int rc = e->p->reply(c->priv, c->completed, c->tag[k], p, left, &used, e->r);
        if (rc < 0) {
            fail(e, c);
            return -1;
        }
        p += used;
        left -= used;
        if (rc == 0)
            continue;
        uint64_t now = yard_now_ns();
        uint64_t lat = now > c->start[k] ? now - c->start[k] : 0;
        yard_hist_record(&e->r->latency, lat);
        if (o->hist_log && load_interval_record(e->r, now - e->t0, lat) < 0) {
            load_error(e->r, "out of memory for the interval log");
            fail(e, c);
            return -1;
        }
        if (e->p->completed)
            e->p->completed(c->priv, c->tag[k], lat, e->r);
        if (c->sent - c->completed == o->pipeline)
            c->slot_free_at = now;
        c->completed++;
        e->outstanding--;
        if (e->p->think_ns)
            c->ready_at = now + e->p->think_ns;
        e->r->messages++;
        e->r->end_ns = e->last_progress = now;
    }
    return 0;
}

static void closed_early(struct engine *e, struct lconn *c)
{
    load_error(e->r, "connection %d: the server closed it after %llu replies", c->id,
               (unsigned long long)c->completed);
    fail(e, c);
}

/* Read and hand the bytes to the protocol. */
static int drain(struct engine *e, struct lconn *c)
{
    for (;;) {
        ssize_t n = read(c->fd, e->rbuf, sizeof e->rbuf);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return 0;
            load_error(e->r, "connection %d: read: %s", c->id, strerror(errno));
            fail(e, c);
            return -1;
        }
        if (n == 0) {
            closed_early(e, c);
            return -1;
        }
        if ((c->tls ? tls_consume : consume)(e, c, e->rbuf, (size_t)n) < 0)
            return -1;
        if ((size_t)n < sizeof e->rbuf)
            return 0;
    }
}

static void after_io(struct engine *e, struct lconn *c, uint64_t now)
{
    if (c->done)
        return;
    if (pump(e, c, now) < 0)
        return;
    if (c->completed == c->sent && !has_more(e, c, now))
        finish(e, c);
}

static void arm(struct engine *e)
{
    uint64_t at = e->nheap ? e->heap[0].at : 0;
    if (at == e->armed)
        return;
    struct itimerspec its = {0};
    if (at) {
        its.it_value.tv_sec = (time_t)(at / YARD_NS_PER_S);
        its.it_value.tv_nsec = (long)(at % YARD_NS_PER_S);
    }
    timerfd_settime(e->tfd, TFD_TIMER_ABSTIME, &its, NULL);
    e->armed = at;
}

/* Connect every connection before the clock starts. */
static int connect_all(struct engine *e)
{
    int pending = 0;
    for (int i = 0; i < e->o->connections; i++) {
        struct lconn *c = &e->conns[i];
        c->connect_at = yard_now_ns();
        c->fd = load_connect(e->o, e->r, e->ep, c);
        if (c->fd < 0)
            return -1;
        pending++;
    }
    struct epoll_event events[256];
    uint64_t deadline = yard_now_ns() + e->o->timeout_ns;
    while (pending > 0) {
        int n = epoll_wait(e->ep, events, 256, 100);
        if (n < 0 && errno != EINTR) {
            load_error(e->r, "epoll_wait: %s", strerror(errno));
            return -1;
        }
        for (int i = 0; i < n; i++) {
            struct lconn *c = events[i].data.ptr;
            int step = 1;
            if (c->connected && c->tls && !c->secured) {
                if ((events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) &&
                    tls_read_handshake(e, c) < 0)
                    return -1;
                step = tls_step(e, c);
            } else if (c->connected) {
                continue;
            } else {
                if (load_connected(e->o, e->r, e->ep, c->fd, c, true) < 0)
                    return -1; /* the target is not there: nothing to measure */
                c->connected = true;
                c->events = EPOLLIN; /* what load_connected registered */
                if (e->o->tls) {
                    c->tls = yard_tls_client_new(e->o->tls_ctx, e->o->tls_host);
                    if (!c->tls) {
                        load_error(e->r, "out of memory for TLS");
                        return -1;
                    }
                    step = tls_step(e, c);
                }
            }
            if (step < 0)
                return -1;
            pending -= step;
        }
        if (pending > 0 && yard_now_ns() > deadline) {
            load_error(e->r, "%d of %d connections to %s not established within --timeout",
                       pending, e->o->connections, e->o->target_text);
            return -1;
        }
    }
    e->active = e->o->connections;
    return 0;
}

/* --start-at: sleep until that CLOCK_REALTIME instant (every thread, and
 * every host given the same instant, leaves its sleep together). */
static void wait_for_start(double at)
{
    struct timespec ts = {.tv_sec = (time_t)at,
                          .tv_nsec = (long)((at - (double)(time_t)at) * 1e9)};
    while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* This thread's CPU time, in seconds. */
static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int loop(struct engine *e)
{
    const load_opts_t *o = e->o;
    /* Connecting (and TLS handshakes) is set-up, not the measured run. */
    e->r->setup_cpu_s += thread_cpu_s() - e->cpu_at_start;
    if (o->start_at > 0)
        wait_for_start(o->start_at);
    struct timespec real;
    clock_gettime(CLOCK_REALTIME, &real);
    e->t0 = yard_now_ns();
    e->r->t0_real = (double)real.tv_sec + (double)real.tv_nsec / 1e9;
    e->r->start_ns = e->t0;
    e->stop_at = o->duration_ns ? e->t0 + o->duration_ns : UINT64_MAX;
    e->last_progress = e->t0;
    for (int i = 0; i < o->connections; i++) {
        if (e->ring_on)
            ring_recv(e, &e->conns[i]);
        after_io(e, &e->conns[i], e->t0);
    }
    struct epoll_event events[256];
    while (e->active > 0) {
        if (e->ring_on) {
            if (ring_turn(e) < 0)
                return -1;
            goto timers;
        }
        arm(e);
        int n = epoll_wait(e->ep, events, 256, 100);
        if (n < 0 && errno != EINTR) {
            load_error(e->r, "epoll_wait: %s", strerror(errno));
            return -1;
        }
        for (int i = 0; i < n; i++) {
            if (events[i].data.ptr == NULL) { /* the timer */
                uint64_t ticks;
                if (read(e->tfd, &ticks, sizeof ticks) < 0 && errno != EAGAIN)
                    load_error(e->r, "timerfd read: %s", strerror(errno));
                e->armed = 0;
                continue;
            }
            struct lconn *c = events[i].data.ptr;
            if (c->done)
                continue;
            if ((events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && drain(e, c) < 0)
                continue;
            after_io(e, c, yard_now_ns());
        }
    timers:;
        uint64_t now = yard_now_ns();
        while (e->nheap && e->heap[0].at <= now) {
            struct due d = heap_pop(e);
            if (!d.c->done && d.c->sent == d.seq) /* else: stale, already sent */
                after_io(e, d.c, now);
        }
        if (e->active > 0 && e->outstanding > 0 && now - e->last_progress > o->timeout_ns) {
            load_error(e->r, "no reply for %.1f s (--timeout): %llu requests on %d connections "
                             "still waiting",
                       (double)o->timeout_ns / 1e9, (unsigned long long)e->outstanding,
                       e->active);
            e->r->errors += (uint64_t)e->active;
            break;
        }
    }
    return 0;
}

int load_engine_run(const load_opts_t *o, const load_proto_t *p, load_result_t *r)
{
    struct engine *e = calloc(1, sizeof *e);
    int status = -1;
    if (!e) {
        load_error(r, "out of memory");
        return -1;
    }
    e->o = o;
    e->p = p;
    e->r = r;
    e->cpu_at_start = thread_cpu_s();
    e->open = o->rate > 0;
    if (e->open)
        e->interval = (double)o->connections * 1e9 / o->rate;
    size_t K = o->pipeline;
    e->ep = epoll_create1(EPOLL_CLOEXEC);
    e->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    e->conns = calloc((size_t)o->connections, sizeof *e->conns);
    /* One block per connection: start times, tags, the request buffer, the protocol's state;
     * each part 16-byte aligned. */
    size_t ring = (K * (sizeof(uint64_t) + sizeof(uint32_t)) + 15) & ~(size_t)15;
    uint8_t *mem = NULL;
    /* --io: the ring unless the kernel refuses it (auto) or epoll was asked
     * for. A refusal of --io uring is the run's error. */
    int ring_err = o->io == LOAD_IO_EPOLL ? -EPERM : ring_setup(e);
    if (ring_err < 0 && e->ring_on)
        ring_teardown(e);
    if (ring_err < 0 && o->io == LOAD_IO_URING) {
        load_error(r, "--io uring: io_uring cannot be set up here: %s%s", strerror(-ring_err),
                   ring_err == -EPERM ? " (disabled by kernel.io_uring_disabled or refused by a "
                                        "seccomp profile); --io epoll works without it"
                                      : "");
        goto out;
    }
    r->io = e->ring_on ? "uring" : "epoll";
    /* The ring queues up to K requests behind an unacknowledged send. */
    size_t txcap = ((e->ring_on ? K : 1) * p->max_request + 15) & ~(size_t)15;
    size_t per = ring + txcap + ((p->priv_size + 15) & ~(size_t)15);
    mem = calloc((size_t)o->connections, per);
    if (e->ep < 0 || e->tfd < 0 || !e->conns || !mem) {
        load_error(r, "out of memory or descriptors for %d connections", o->connections);
        goto out;
    }
    /* CLOCK_MONOTONIC is what yard_now_ns reads, so due times arm it directly. */
    struct epoll_event tev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(e->ep, EPOLL_CTL_ADD, e->tfd, &tev);
    for (int i = 0; i < o->connections; i++) {
        struct lconn *c = &e->conns[i];
        uint8_t *m = mem + (size_t)i * per;
        c->id = o->conn_base + i;
        c->fd = -1;
        c->start = (uint64_t *)(void *)m;
        c->tag = (uint32_t *)(void *)(m + K * sizeof(uint64_t));
        c->tx = m + ring;
        c->priv = m + ring + txcap;
        if (p->conn_init && p->conn_init(c->priv, c->id, o, r) < 0)
            goto out;
    }
    if (connect_all(e) == 0) {
        if (e->ring_on)
            ring_adopt(e);
        status = loop(e);
    }
out:
    if (e->conns)
        for (int i = 0; i < o->connections; i++) {
            if (e->conns[i].fd >= 0 && !e->conns[i].done)
                close(e->conns[i].fd);
            if (!e->conns[i].done) {
                yard_tls_free(e->conns[i].tls);
                yard_buf_free(&e->conns[i].wire);
            }
        }
    if (!r->end_ns)
        r->end_ns = yard_now_ns();
    if (!r->start_ns)
        r->start_ns = r->end_ns;
    if (e->open)
        r->target_rate = o->rate;
    if (e->open && o->duration_ns && e->conns && e->t0)
        for (int i = 0; i < o->connections; i++) {
            uint64_t due = due_in_window(e, &e->conns[i]);
            r->unsent += due > e->conns[i].sent ? due - e->conns[i].sent : 0;
        }
    ring_teardown(e); /* before the buffers it may still read go */
    free(mem);
    free(e->conns);
    free(e->heap);
    if (e->ep >= 0)
        close(e->ep);
    if (e->tfd >= 0)
        close(e->tfd);
    free(e);
    return status;
}
