#include "yard/conn.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "yard/clock.h"
#include "yard/log.h"

/* How loudly a close is logged: protocol violations are the app's news,
 * resets and timeouts are routine. */
enum { CLOSE_QUIET, CLOSE_INFO, CLOSE_WARN };

/* The session follows the connection in the same allocation. */
struct conn_alloc {
    yard_conn_t conn;
    max_align_t session[];
};

static void conn_fail(yard_conn_t *c, const char *reason, int level);
static int conn_send(yard_conn_t *c, const uint8_t *p, size_t n, size_t *sent);
static void conn_store(yard_conn_t *c);
static void conn_apply(yard_conn_t *c, yard_fx_t *fx);
static void conn_feed(yard_conn_t *c, yard_buf_t *ib, yard_scratch_t *s, bool eof);
static void conn_settle(yard_conn_t *c, yard_scratch_t *s);
static void conn_flush(yard_conn_t *c, yard_scratch_t *s);
static void conn_reoffer(yard_conn_t *c, yard_scratch_t *s);
static void conn_call(yard_conn_t *c, yard_scratch_t *s, void (*cb)(void *, void *, yard_fx_t *));

/* A fresh effect record. Output goes through the scratch buffer (and from
 * there straight to the socket) unless older output is still queued, which
 * must leave first. */
static yard_fx_t conn_fx(yard_conn_t *c, yard_scratch_t *s)
{
    return (yard_fx_t){.out = (c->out.len || !s) ? &c->out : &s->out,
                       .store = &c->store,
                       .now_ns = yard_now_ns(),
                       .peer = c->peer_addr.len ? &c->peer_addr : NULL};
}

void yard_conn_app_lock(pthread_mutex_t *mu)
{
    yard_shm_mutex_lock(mu);
}

#define APP_LOCK(c)                                                                               \
    do {                                                                                           \
        if ((c)->app_lock)                                                                         \
            yard_conn_app_lock((c)->app_lock);                                                     \
    } while (0)
#define APP_UNLOCK(c)                                                                             \
    do {                                                                                           \
        if ((c)->app_lock)                                                                         \
            pthread_mutex_unlock((c)->app_lock);                                                   \
    } while (0)

static yard_conn_t *conn_open(yard_server_t *srv, int fd, bool blocking, void *session,
                              pthread_mutex_t *app_lock);

yard_conn_t *yard_conn_open(yard_server_t *srv, int fd, bool blocking)
{
    return conn_open(srv, fd, blocking, NULL, NULL);
}

yard_conn_t *yard_conn_open_shared(yard_server_t *srv, int fd, void *session,
                                   pthread_mutex_t *app_lock)
{
    return conn_open(srv, fd, true, session, app_lock);
}

static yard_conn_t *conn_open(yard_server_t *srv, int fd, bool blocking, void *session,
                              pthread_mutex_t *app_lock)
{
    struct conn_alloc *a = calloc(1, sizeof *a + (session ? 0 : srv->app->session_size));
    if (!a)
        return NULL;
    yard_conn_t *c = &a->conn;
    c->app_lock = app_lock;
    c->no_watch = session != NULL;
    c->srv = srv;
    c->fd = fd;
    c->blocking = blocking;
    c->jobs_inline = blocking || srv->cfg->offload_threads == 0;
    c->timer_idx = YARD_TIMER_NONE;
    c->session = session ? session : (void *)a->session;
    if (yard_peer_name(fd, &c->peer_addr) == 0) {
        yard_addr_format(&c->peer_addr, c->peer, sizeof c->peer);
    } else {
        c->peer_addr.len = 0;
        strcpy(c->peer, "(unknown peer)");
    }
    /* Request/response protocols want every reply on the wire at once. */
    yard_set_nodelay(fd);
    if (blocking && srv->cfg->idle_timeout_ns) {
        struct timeval tv = {.tv_sec = (time_t)(srv->cfg->idle_timeout_ns / 1000000000ull),
                             .tv_usec = (suseconds_t)(srv->cfg->idle_timeout_ns % 1000000000ull /
                                                      1000)};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    if (srv->app->open)
        conn_call(c, NULL, srv->app->open);
    return c;
}

static void conn_fail(yard_conn_t *c, const char *reason, int level)
{
    if (!c->failed) {
        c->failed = true;
        c->close_reason = reason;
        c->close_level = level;
    }
}

/* Send as much as the socket takes now (all of it, for a blocking socket).
 * Returns 0, or -1 after marking the connection failed. */
static int conn_send(yard_conn_t *c, const uint8_t *p, size_t n, size_t *sent)
{
    size_t off = 0;
    while (off < n) {
        ssize_t w = send(c->fd, p + off, n - off, MSG_NOSIGNAL);
        if (w >= 0) {
            off += (size_t)w;
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (c->blocking) {
                conn_fail(c, "send timed out (--idle-timeout)", CLOSE_INFO);
                *sent = off;
                return -1;
            }
            break;
        }
        conn_fail(c, strerror(errno), CLOSE_QUIET);
        *sent = off;
        return -1;
    }
    *sent = off;
    return 0;
}

int yard_conn_on_writable(yard_conn_t *c)
{
    size_t sent = 0;
    int rc = conn_send(c, yard_buf_head(&c->out), c->out.len, &sent);
    yard_buf_consume(&c->out, sent);
    if (rc < 0)
        return YARD_IO_DONE;
    /* An idle connection gives its output memory back. */
    yard_buf_shrink(&c->out, 0);
    return c->out.len ? YARD_IO_AGAIN : YARD_IO_OK;
}

/* Carry the bytes bound for the output file to it: at once with --flush
 * each, in YARD_STORE_CHUNK pieces with --flush buffered. */
static void conn_store(yard_conn_t *c)
{
    const yard_server_t *srv = c->srv;
    if (srv->out_fd < 0) {
        yard_buf_clear(&c->store);
        return;
    }
    if (srv->cfg->flush == YARD_FLUSH_BUFFERED && c->store.len < YARD_STORE_CHUNK)
        return;
    if (yard_write_all(srv->out_fd, yard_buf_head(&c->store), c->store.len) < 0) {
        yard_log_err("%s: writing %s: %s", c->peer, srv->cfg->out, strerror(errno));
        conn_fail(c, "output file not writable", CLOSE_WARN);
    }
    yard_buf_clear(&c->store);
}

/* Send the output the callbacks of one engine entry point produced, in one
 * go: several pipelined requests answered in a chain of callbacks leave in
 * one send(). It goes from the scratch buffer straight to the socket; what
 * the socket does not take is kept on the connection. While a permission
 * task is next in line (short by design), the output waits on the
 * connection so that its reply leaves together with this one. */
static void conn_flush(yard_conn_t *c, yard_scratch_t *s)
{
    bool defer = c->job_pending && c->job_access;
    if (s && s->out.len) {
        size_t sent = 0;
        if (!c->failed && !defer)
            conn_send(c, yard_buf_head(&s->out), s->out.len, &sent);
        if (!c->failed && sent < s->out.len &&
            yard_buf_append(&c->out, yard_buf_head(&s->out) + sent, s->out.len - sent) < 0)
            conn_fail(c, "out of memory", CLOSE_WARN);
        yard_buf_clear(&s->out); /* never left for the next connection */
    } else if (!c->failed && !defer && c->out.len) {
        yard_conn_on_writable(c);
    }
    size_t limit = c->srv->cfg->max_sendq ? c->srv->cfg->max_sendq : YARD_OUT_LIMIT;
    if (c->out.len > limit)
        conn_fail(c, "send queue exceeded", CLOSE_WARN);
}

/* Carry out the effects an app callback recorded; output is left for
 * conn_flush. */
static void conn_apply(yard_conn_t *c, yard_fx_t *fx)
{
    if (fx->nomem)
        conn_fail(c, "out of memory", CLOSE_WARN);
    if (fx->close && !c->closing) {
        c->closing = true;
        c->close_reason = fx->close_reason;
    }
    if (c->store.len)
        conn_store(c);
    if (fx->wake_at)
        c->wake_at = fx->wake_at == UINT64_MAX ? 0 : fx->wake_at;
    if (c->closing)
        c->wake_at = 0; /* nothing left to wake up for */
    if (fx->watch_set && !c->failed && !c->no_watch) {
        if (!c->watch && fx->watch_bus) {
            c->watch = malloc(sizeof *c->watch);
            int err = c->watch ? yard_watch_open(c->watch, fx->watch_bus) : -ENOMEM;
            if (err < 0) {
                free(c->watch);
                c->watch = NULL;
                yard_log_err("%s: news watch: %s", c->peer, strerror(-err));
                conn_fail(c, "no descriptor for the news watch", CLOSE_WARN);
            }
        }
        if (c->watch)
            yard_watch_set(c->watch, fx->watch_topic, fx->watch_bus ? fx->watch_seen : UINT64_MAX);
    }
    if (fx->job) {
        if (c->job_pending)
            yard_fatal("app %s offloaded a second job before the first finished",
                       c->srv->app->name);
        c->job_pending = true;
        c->job = (yard_job_t){.fn = fx->job, .arg = fx->job_arg, .owner = c};
        c->job_access = fx->access_obj;
        c->job_access_mode = fx->access_mode;
    }
}

static void conn_feed(yard_conn_t *c, yard_buf_t *ib, yard_scratch_t *s, bool eof)
{
    const yard_app_t *app = c->srv->app;
    yard_fx_t fx = conn_fx(c, s);
    fx.eof = eof;
    APP_LOCK(c);
    size_t used = app->data(c->srv->app_state, c->session, yard_buf_head(ib), ib->len, &fx);
    APP_UNLOCK(c);
    if (used > ib->len)
        yard_fatal("app %s consumed %zu of %zu bytes", app->name, used, ib->len);
    yard_buf_consume(ib, eof ? ib->len : used);
    if (ib == &s->in) {
        if (ib->len && yard_buf_append(&c->in, yard_buf_head(ib), ib->len) < 0)
            fx.nomem = true;
        yard_buf_clear(&s->in);
    } else {
        yard_buf_shrink(&c->in, 0);
    }
    if (c->in.len > YARD_IN_LIMIT)
        conn_fail(c, "request larger than the 1 MiB limit", CLOSE_WARN);
    conn_apply(c, &fx);
}

/* Input that waited while a job ran or a timer was armed is offered to the
 * app again once that is over (a pipelined request behind a long poll). */
static void conn_reoffer(yard_conn_t *c, yard_scratch_t *s)
{
    if (c->in.len && !c->job_pending && !c->closing && !c->failed)
        conn_feed(c, &c->in, s, c->read_eof);
}

static void conn_job_done(yard_conn_t *c, yard_scratch_t *s)
{
    c->job_pending = false;
    c->job.done = NULL;
    c->job_access = NULL;
    yard_fx_t fx = conn_fx(c, s);
    APP_LOCK(c);
    c->srv->app->job_done(c->srv->app_state, c->session, c->job.arg, &fx);
    APP_UNLOCK(c);
    conn_apply(c, &fx);
    conn_reoffer(c, s);
    if (c->watch)
        yard_watch_poke(c->watch); /* news that came while the job ran */
}

/* Run the jobs that belong on this thread: offloaded jobs in the blocking
 * models (or without a pool), and permission jobs under a process-shared
 * rwlock unless the model schedules them itself (coro). */
static void conn_settle(yard_conn_t *c, yard_scratch_t *s)
{
    while (c->job_pending && !c->failed &&
           (c->job_access ? !c->access_by_model : c->jobs_inline)) {
        if (c->job_access) {
            pthread_rwlock_t *lock = &c->job_access->lock;
            if (c->job_access_mode == YARD_ACCESS_FULL)
                pthread_rwlock_wrlock(lock);
            else
                pthread_rwlock_rdlock(lock);
            c->job.fn(c->job.arg);
            pthread_rwlock_unlock(lock);
        } else {
            c->job.fn(c->job.arg);
        }
        conn_job_done(c, s);
    }
}

void yard_conn_on_job_done(yard_conn_t *c, yard_scratch_t *s)
{
    conn_job_done(c, s);
    conn_settle(c, s);
    conn_flush(c, s);
}

/* An app callback of the (state, session, fx) kind (open, timer, news) and
 * everything after it: its effects, input that waited, inline jobs, output. */
static void conn_call(yard_conn_t *c, yard_scratch_t *s, void (*cb)(void *, void *, yard_fx_t *))
{
    yard_fx_t fx = conn_fx(c, s);
    APP_LOCK(c);
    cb(c->srv->app_state, c->session, &fx);
    APP_UNLOCK(c);
    conn_apply(c, &fx);
    conn_reoffer(c, s);
    conn_settle(c, s);
    conn_flush(c, s);
}

void yard_conn_on_timer(yard_conn_t *c, yard_scratch_t *s)
{
    c->wake_at = 0;
    if (c->failed || !c->srv->app->timer)
        return;
    conn_call(c, s, c->srv->app->timer);
}

void yard_conn_on_news(yard_conn_t *c, yard_scratch_t *s)
{
    if (!c->watch)
        return;
    yard_watch_drain(c->watch);
    /* While a job runs the app is not called; the news waits (the watch
     * stays due and its eventfd is signalled again on the next publish, and
     * the models re-check after the job). */
    if (c->failed || c->closing || c->job_pending || !yard_watch_due(c->watch) ||
        !c->srv->app->news)
        return;
    conn_call(c, s, c->srv->app->news);
}

int yard_conn_on_readable(yard_conn_t *c, yard_scratch_t *s)
{
    yard_buf_t *ib = c->in.len ? &c->in : &s->in;
    uint8_t *p = yard_buf_reserve(ib, YARD_READ_CHUNK);
    if (!p) {
        conn_fail(c, "out of memory", CLOSE_WARN);
        return YARD_IO_DONE;
    }
    ssize_t n = read(c->fd, p, YARD_READ_CHUNK);
    if (n < 0) {
        if (errno == EINTR)
            return YARD_IO_AGAIN;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (!c->blocking)
                return YARD_IO_AGAIN;
            conn_fail(c, "idle timeout", CLOSE_INFO);
            return YARD_IO_DONE;
        }
        conn_fail(c, strerror(errno), CLOSE_QUIET);
        return YARD_IO_DONE;
    }
    if (n == 0) {
        c->read_eof = true;
        if (c->in.len)
            conn_feed(c, &c->in, s, true);
    } else {
        yard_buf_commit(ib, (size_t)n);
        conn_feed(c, ib, s, false);
    }
    conn_settle(c, s);
    conn_flush(c, s);
    return yard_conn_finished(c) ? YARD_IO_DONE : YARD_IO_OK;
}

void yard_conn_run_blocking(yard_conn_t *c, yard_scratch_t *s, const _Atomic int *stop)
{
    /* Output is written in full before the next read (conn_send blocks), so
     * backpressure is the kernel's: a peer that does not read blocks only the
     * thread or process that serves it. An armed timer is the paradigm's
     * sleeping handler: the thread waits in poll() until it is due. */
    while (!atomic_load_explicit(stop, memory_order_relaxed) && !yard_conn_finished(c)) {
        if (c->wake_at || c->watch) {
            uint64_t now = yard_now_ns();
            if (c->wake_at && now >= c->wake_at) {
                yard_conn_on_timer(c, s);
                continue;
            }
            /* Wait for the socket, the news eventfd and the timer at once;
             * the poll is bounded so a stop request is seen. */
            struct pollfd pfd[2] = {{.fd = c->fd, .events = c->read_eof ? 0 : POLLIN},
                                    {.fd = yard_conn_news_fd(c), .events = POLLIN}};
            uint64_t ms = c->wake_at ? (c->wake_at - now + YARD_NS_PER_MS - 1) / YARD_NS_PER_MS
                                     : 1000;
            int r = poll(pfd, c->watch ? 2 : 1, ms > 1000 ? 1000 : (int)ms);
            if (r > 0 && c->watch && (pfd[1].revents & POLLIN)) {
                yard_conn_on_news(c, s);
                continue;
            }
            if (r <= 0 || c->read_eof || !(pfd[0].revents & (POLLIN | POLLHUP | POLLERR)))
                continue; /* timeout, signal, or only the timer to wait for */
        }
        if (yard_conn_on_readable(c, s) == YARD_IO_DONE)
            break;
    }
}

void yard_conn_close(yard_conn_t *c, const char *reason)
{
    yard_server_t *srv = c->srv;
    int level = c->close_level;
    if (reason) {
        c->close_reason = reason;
        level = CLOSE_INFO;
    } else if (c->closing && !c->failed) {
        level = CLOSE_WARN; /* the app closed it: a protocol violation */
    }
    if (c->store.len && srv->out_fd >= 0 &&
        yard_write_all(srv->out_fd, yard_buf_head(&c->store), c->store.len) < 0)
        yard_log_err("%s: writing %s: %s", c->peer, srv->cfg->out, strerror(errno));
    if (srv->app->close) {
        APP_LOCK(c);
        srv->app->close(srv->app_state, c->session);
        APP_UNLOCK(c);
    }
    /* Log before the peer can see the close, so the log is never behind.
     * Rate-limited: a flood of bad clients must not flood the log. */
    if (c->close_reason) {
        if (level == CLOSE_WARN)
            yard_log_limited(YARD_LOG_WARN, "%s: connection closed: %s", c->peer, c->close_reason);
        else if (level == CLOSE_INFO)
            yard_log_limited(YARD_LOG_INFO, "%s: connection closed: %s", c->peer, c->close_reason);
        else
            yard_log_debug("%s: connection closed: %s", c->peer, c->close_reason);
    }
    if (c->watch) {
        yard_watch_close(c->watch);
        free(c->watch);
    }
    close(c->fd);
    yard_buf_free(&c->in);
    yard_buf_free(&c->out);
    yard_buf_free(&c->store);
    free(c);
}

void yard_scratch_free(yard_scratch_t *s)
{
    yard_buf_free(&s->in);
    yard_buf_free(&s->out);
}

int yard_conn_set_add(yard_conn_set_t *set, yard_conn_t *c)
{
    int rc = 0;
    pthread_mutex_lock(&set->mu);
    if (set->n == set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 64;
        yard_conn_t **v = realloc(set->v, cap * sizeof *v);
        if (v) {
            set->v = v;
            set->cap = cap;
        }
    }
    if (set->n < set->cap)
        set->v[set->n++] = c;
    else
        rc = -ENOMEM;
    pthread_mutex_unlock(&set->mu);
    return rc;
}

void yard_conn_set_remove(yard_conn_set_t *set, yard_conn_t *c)
{
    pthread_mutex_lock(&set->mu);
    for (size_t i = 0; i < set->n; i++)
        if (set->v[i] == c) {
            set->v[i] = set->v[--set->n];
            break;
        }
    pthread_mutex_unlock(&set->mu);
}

void yard_conn_set_shutdown_all(yard_conn_set_t *set)
{
    pthread_mutex_lock(&set->mu);
    for (size_t i = 0; i < set->n; i++)
        shutdown(set->v[i]->fd, SHUT_RDWR);
    pthread_mutex_unlock(&set->mu);
}

void yard_conn_set_free(yard_conn_set_t *set)
{
    pthread_mutex_lock(&set->mu);
    free(set->v);
    set->v = NULL;
    set->n = set->cap = 0;
    pthread_mutex_unlock(&set->mu);
}
