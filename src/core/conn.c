#include "yard/conn.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "yard/access.h"
#include "yard/clock.h"
#include "yard/log.h"
#include "yard/tls.h"

/* The session follows the connection in the same allocation, and the
 * model's own state follows the session. */
struct conn_alloc {
    yard_conn_t conn;
    max_align_t session[];
};

static int conn_send(yard_conn_t *c, const uint8_t *p, size_t n, size_t *sent);
static void conn_store(yard_conn_t *c);
static void conn_apply(yard_conn_t *c, yard_fx_t *fx);
static void conn_feed(yard_conn_t *c, yard_buf_t *ib, yard_scratch_t *s, bool eof);
static void conn_settle(yard_conn_t *c, yard_scratch_t *s);
static void conn_flush(yard_conn_t *c, yard_scratch_t *s);
static void conn_reoffer(yard_conn_t *c, yard_scratch_t *s);
static void conn_call(yard_conn_t *c, yard_scratch_t *s, void (*cb)(void *, void *, yard_fx_t *));
static void conn_input(yard_conn_t *c, yard_buf_t *ib, yard_scratch_t *s);
static void tls_input(yard_conn_t *c, yard_scratch_t *s, const uint8_t *p, size_t n);
static void tls_seal(yard_conn_t *c, yard_scratch_t *s);

/* A fresh effect record. Output goes through the scratch buffer (and from
 * there straight to the socket) unless older output is still queued, which
 * must leave first. On a TLS connection c->out holds records, so plaintext
 * waits in the scratch buffer (or c->pout) until conn_flush seals it. */
static yard_buf_t *conn_fx_out(yard_conn_t *c, yard_scratch_t *s)
{
    if (c->secure)
        return s ? &s->out : &c->pout;
    return (c->out.len || !s) ? &c->out : &s->out;
}

static yard_fx_t conn_fx(yard_conn_t *c, yard_scratch_t *s)
{
    return (yard_fx_t){.out = conn_fx_out(c, s),
                       .store = &c->store,
                       .now_ns = yard_now_ns(),
                       .wall_ns = yard_wall_ns(),
                       .peer = c->peer_addr.len ? &c->peer_addr : NULL,
                       .tls = c->secure,
                       .tls_port = c->srv->tls_port,
                       .certfp = c->certfp[0] ? c->certfp : NULL,
                       /* c->out is *out or empty; on a TLS connection it holds
                        * records the socket has not taken yet */
                       .queued = c->tx.len + (c->secure ? c->out.len : 0)};
}

#define APP_LOCK(c)                                                                               \
    do {                                                                                           \
        if ((c)->app_lock)                                                                         \
            yard_shm_mutex_lock((c)->app_lock);                                                    \
    } while (0)
#define APP_UNLOCK(c)                                                                             \
    do {                                                                                           \
        if ((c)->app_lock)                                                                         \
            pthread_mutex_unlock((c)->app_lock);                                                   \
    } while (0)

static size_t round_up(size_t n)
{
    const size_t a = _Alignof(max_align_t);
    return (n + a - 1) & ~(a - 1);
}

static yard_conn_t *conn_new(yard_server_t *srv, int fd, const yard_conn_policy_t *policy,
                             void *session)
{
    size_t own = session ? 0 : round_up(srv->app->session_size);
    struct conn_alloc *a = calloc(1, sizeof *a + own + policy->model_size);
    if (!a)
        return NULL;
    yard_conn_t *c = &a->conn;
    c->srv = srv;
    c->policy = policy;
    c->fd = fd;
    c->session = session ? session : (void *)a->session;
    c->model = (char *)a->session + own;
    if (yard_peer_name(fd, &c->peer_addr) == 0) {
        yard_addr_format(&c->peer_addr, c->peer, sizeof c->peer);
    } else {
        c->peer_addr.len = 0;
        strcpy(c->peer, "(unknown peer)");
    }
    /* Request/response protocols want every reply on the wire at once. */
    yard_set_nodelay(fd);
    if (yard_server_fd_is_tls(srv, fd)) {
        /* Its TLS state waits for its first whole record (tls_feed_whole):
         * a connection that sends nothing costs no OpenSSL object. */
        c->secure = true;
        c->tls_deadline = yard_now_ns() + srv->cfg->tls_handshake_timeout_ns;
    }
    if (policy->blocking && srv->cfg->idle_timeout_ns) {
        struct timeval tv = {.tv_sec = (time_t)(srv->cfg->idle_timeout_ns / 1000000000ull),
                             .tv_usec = (suseconds_t)(srv->cfg->idle_timeout_ns % 1000000000ull /
                                                      1000)};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    return c;
}

yard_conn_t *yard_conn_open(yard_server_t *srv, int fd, const yard_conn_policy_t *policy)
{
    yard_conn_t *c = conn_new(srv, fd, policy, NULL);
    if (!c || c->secure)
        return c; /* TLS: opened when the handshake is done (tls_opened) */
    c->opened = true;
    if (srv->app->open)
        conn_call(c, NULL, srv->app->open);
    return c;
}

yard_conn_t *yard_conn_open_pair(yard_server_t *srv, int fd, const yard_conn_policy_t *policy,
                                 void *session, pthread_mutex_t *app_lock, bool sender)
{
    yard_conn_t *c = conn_new(srv, fd, policy, session);
    if (!c)
        return NULL;
    c->shared = true;
    c->sender = sender;
    c->app_lock = app_lock;
    c->opened = !sender;
    if (!sender && srv->app->open)
        conn_call(c, NULL, srv->app->open);
    return c;
}

void yard_conn_fail(yard_conn_t *c, const char *reason, enum yard_close_level level)
{
    if (!c->failed) {
        c->failed = true;
        c->close_reason = reason;
        c->close_level = (int)level;
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
            if (c->policy->blocking) {
                yard_conn_fail(c, "send timed out (--idle-timeout)", YARD_CLOSE_INFO);
                *sent = off;
                return -1;
            }
            break;
        }
        yard_conn_fail(c, strerror(errno), YARD_CLOSE_QUIET);
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
    if (c->policy->completion ||
        (srv->cfg->flush == YARD_FLUSH_BUFFERED && c->store.len < YARD_STORE_CHUNK))
        return; /* the model takes it (yard_conn_store_take), or more is to come */
    int rc = yard_write_all(srv->out_fd, yard_buf_head(&c->store), c->store.len);
    if (rc < 0) {
        yard_log_err("%s: writing %s: %s", c->peer, srv->cfg->out, strerror(-rc));
        yard_conn_fail(c, "output file not writable", YARD_CLOSE_WARN);
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
    if (c->secure)
        tls_seal(c, s);
    bool defer = c->job_pending && c->job_access;
    if (c->policy->completion) {
        /* Queued for the model to take; the scratch buffer stays with the
         * thread. */
        if (s && s->out.len && !c->failed &&
            yard_buf_append(&c->out, yard_buf_head(&s->out), s->out.len) < 0)
            yard_conn_fail(c, "out of memory", YARD_CLOSE_WARN);
        if (s)
            yard_buf_clear(&s->out);
    } else if (s && s->out.len) {
        size_t sent = 0;
        if (!c->failed && !defer)
            conn_send(c, yard_buf_head(&s->out), s->out.len, &sent);
        if (!c->failed && sent < s->out.len &&
            yard_buf_append(&c->out, yard_buf_head(&s->out) + sent, s->out.len - sent) < 0)
            yard_conn_fail(c, "out of memory", YARD_CLOSE_WARN);
        yard_buf_clear(&s->out); /* never left for the next connection */
    } else if (!c->failed && !defer && c->out.len) {
        yard_conn_on_writable(c);
    }
    size_t limit = c->out_max              ? c->out_max
                   : c->srv->cfg->max_sendq ? c->srv->cfg->max_sendq
                                            : YARD_OUT_LIMIT;
    if (c->out.len + c->tx.len > limit)
        yard_conn_fail(c, "send queue exceeded", YARD_CLOSE_WARN);
}

/* Carry out the effects an app callback recorded; output is left for
 * conn_flush. */
static void conn_apply(yard_conn_t *c, yard_fx_t *fx)
{
    if (fx->nomem)
        yard_conn_fail(c, "out of memory", YARD_CLOSE_WARN);
    if (fx->close && !c->closing) {
        c->closing = true;
        c->close_reason = fx->close_reason;
    }
    if (c->store.len)
        conn_store(c);
    if (fx->hold_input)
        c->in_held = true;
    if (fx->pause_input)
        c->in_paused = true;
    if (fx->bounds_set) {
        c->out_hold = fx->out_hold;
        c->out_max = fx->out_max;
    }
    if (fx->wake_at) {
        c->wake_at = fx->wake_at == UINT64_MAX ? 0 : fx->wake_at;
        c->wake_idle = fx->wake_idle;
    }
    if (c->closing)
        c->wake_at = 0; /* nothing left to wake up for */
    if (fx->watch_set && !c->failed && !c->shared) {
        if (!c->watch && fx->watch_bus) {
            c->watch = malloc(sizeof *c->watch);
            int err = c->watch ? yard_watch_open(c->watch, fx->watch_bus) : -ENOMEM;
            if (err < 0) {
                free(c->watch);
                c->watch = NULL;
                yard_log_err("%s: news watch: %s", c->peer, strerror(-err));
                yard_conn_fail(c, "no descriptor for the news watch", YARD_CLOSE_WARN);
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
        c->job = (yard_job_t){.fn = fx->job, .arg = fx->job_arg, .owner = c, .lane = fx->job_lane};
        c->job_access = fx->access_obj;
        c->job_access_mode = fx->access_mode;
    }
}

/* Input the app has not consumed, or may not be offered yet, stays on the
 * connection (a request larger than the limit closes it); the scratch
 * buffer is left empty for the next connection. */
static void conn_keep(yard_conn_t *c, yard_buf_t *ib)
{
    bool nomem = false;
    if (ib != &c->in) {
        nomem = ib->len && yard_buf_append(&c->in, yard_buf_head(ib), ib->len) < 0;
        yard_buf_clear(ib);
    } else {
        yard_buf_shrink(&c->in, 0);
    }
    if (c->in.len > YARD_IN_LIMIT)
        yard_conn_fail(c, "request larger than the 1 MiB limit", YARD_CLOSE_WARN);
    if (nomem)
        yard_conn_fail(c, "out of memory", YARD_CLOSE_WARN);
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
    /* At the end of input what the app left is dropped, unless it left it
     * for after a job (a message behind a log append). */
    yard_buf_consume(ib, eof && !fx.job ? ib->len : used);
    conn_keep(c, ib);
    conn_apply(c, &fx);
}

/* Input that waited while a job ran or a timer was armed is offered to the
 * app again once that is over (a pipelined request behind a long poll). */
static void conn_reoffer(yard_conn_t *c, yard_scratch_t *s)
{
    if (c->in.len && !c->job_pending && !c->closing && !c->failed)
        conn_feed(c, &c->in, s, c->read_eof);
}

static void tls_job_done(yard_conn_t *c, yard_scratch_t *s);

static void conn_job_done(yard_conn_t *c, yard_scratch_t *s)
{
    if (c->tls_job) {
        tls_job_done(c, s);
        return;
    }
    c->job_pending = false;
    c->job_access = NULL;
    if (c->failed)
        return; /* closed meanwhile: the app hears of it in app->close */
    yard_fx_t fx = conn_fx(c, s);
    APP_LOCK(c);
    c->srv->app->job_done(c->srv->app_state, c->session, c->job.arg, &fx);
    APP_UNLOCK(c);
    conn_apply(c, &fx);
    conn_reoffer(c, s);
    if (c->watch)
        yard_watch_poke(c->watch); /* news that came while the job ran */
}

/* Run job(arg) here, holding its permission under the object's
 * process-shared rwlock if it needs one. */
static void conn_run_job_here(yard_conn_t *c)
{
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
}

/* Is the pending job the model's to run (a pool, a permission task)? */
static bool conn_job_for_model(const yard_conn_t *c)
{
    return c->job_access ? c->policy->perm_tasks : c->policy->job_pool;
}

/* Run the jobs that belong on this thread: every job under a blocking
 * model or without a pool, permission jobs unless the model grants
 * permissions itself. */
static void conn_settle(yard_conn_t *c, yard_scratch_t *s)
{
    while (c->job_pending && !c->failed && !conn_job_for_model(c)) {
        conn_run_job_here(c);
        conn_job_done(c, s);
    }
}

void yard_conn_run_job(yard_conn_t *c, yard_scratch_t *s)
{
    conn_run_job_here(c);
    yard_conn_on_job_done(c, s);
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

/* The handshake's time is up: the app never heard of this connection. */
static bool tls_overdue(yard_conn_t *c)
{
    /* Not while a pool thread holds the handshake: its end closes it. */
    if (!c->tls_deadline || c->job_pending || yard_now_ns() < c->tls_deadline)
        return false;
    yard_conn_fail(c, "TLS handshake timed out (--tls-handshake-timeout)", YARD_CLOSE_INFO);
    return true;
}

void yard_conn_on_timer(yard_conn_t *c, yard_scratch_t *s)
{
    if (c->tls_deadline) { /* the only deadline before the app is opened */
        tls_overdue(c);
        return;
    }
    c->wake_at = 0;
    c->in_paused = false;
    if (c->failed || !c->srv->app->timer)
        return;
    conn_call(c, s, c->srv->app->timer);
}

void yard_conn_on_news(yard_conn_t *c, yard_scratch_t *s)
{
    if (!c->watch)
        return;
    yard_watch_drain(c->watch);
    yard_conn_on_news_read(c, s);
}

void yard_conn_on_news_read(yard_conn_t *c, yard_scratch_t *s)
{
    if (!c->watch)
        return;
    /* While a job runs the app is not called; the news waits (the watch
     * stays due, the job's completion pokes it, and yard_conn_next looks). */
    if (c->failed || c->closing || c->job_pending || !yard_watch_due(c->watch) ||
        !c->srv->app->news)
        return;
    conn_call(c, s, c->srv->app->news);
}

void yard_conn_on_wakeup(yard_conn_t *c, yard_scratch_t *s)
{
    if (c->failed || c->closing || c->job_pending || !c->srv->app->news)
        return;
    conn_call(c, s, c->srv->app->news);
}

/* Where bytes read from the socket go: after input that waits, or in the
 * scratch buffer. TLS: always the scratch buffer, since c->in holds
 * plaintext and these are records (tls_input takes them at once). */
static yard_buf_t *conn_rx_target(yard_conn_t *c, yard_scratch_t *s)
{
    return c->in.len && !c->secure ? &c->in : &s->in;
}

uint8_t *yard_conn_rx_buf(yard_conn_t *c, yard_scratch_t *s, size_t *room)
{
    yard_buf_t *ib = conn_rx_target(c, s);
    uint8_t *p = yard_buf_reserve(ib, YARD_READ_CHUNK);
    if (!p)
        yard_conn_fail(c, "out of memory", YARD_CLOSE_WARN);
    *room = p ? YARD_READ_CHUNK : 0;
    return p;
}

/* Input in ib (the scratch buffer or c->in) for the app, or kept in c->in
 * while the app may not be called (a job runs, it is closing). */
static void conn_input(yard_conn_t *c, yard_buf_t *ib, yard_scratch_t *s)
{
    if (!c->job_pending && !c->closing && !c->failed)
        conn_feed(c, ib, s, false);
    else
        conn_keep(c, ib);
    conn_settle(c, s);
    conn_flush(c, s);
}

void yard_conn_rx_commit(yard_conn_t *c, yard_scratch_t *s, size_t n)
{
    yard_buf_t *ib = conn_rx_target(c, s);
    yard_buf_commit(ib, n);
    if (c->secure) {
        /* OpenSSL copies them; the scratch buffer is free again at once. */
        tls_input(c, s, yard_buf_head(ib), ib->len);
        return;
    }
    conn_input(c, ib, s);
}

void yard_conn_on_bytes(yard_conn_t *c, yard_scratch_t *s, const uint8_t *p, size_t n)
{
    if (c->secure) {
        tls_input(c, s, p, n);
        return;
    }
    if (!c->in.len) {
        /* Nothing waits before these bytes: the app reads them where they
         * are, and only what it leaves is copied (into c->in). */
        yard_buf_t view = {.data = (uint8_t *)p, .len = n, .cap = n};
        conn_input(c, &view, s);
        return;
    }
    yard_buf_t *ib = &c->in;
    if (yard_buf_append(ib, p, n) < 0) {
        yard_conn_fail(c, "out of memory", YARD_CLOSE_WARN);
        return;
    }
    conn_input(c, ib, s);
}

void yard_conn_on_eof(yard_conn_t *c, yard_scratch_t *s)
{
    if (c->secure && !c->opened) {
        yard_conn_fail(c, "closed during the TLS handshake", YARD_CLOSE_QUIET);
        return;
    }
    c->read_eof = true;
    if (c->in.len && !c->job_pending)
        conn_feed(c, &c->in, s, true);
    conn_settle(c, s);
    conn_flush(c, s);
}

int yard_conn_read(yard_conn_t *c, yard_scratch_t *s)
{
    bool drained;
    return yard_conn_read_drained(c, s, &drained);
}

int yard_conn_read_drained(yard_conn_t *c, yard_scratch_t *s, bool *drained)
{
    size_t room;
    *drained = false;
    uint8_t *p = yard_conn_rx_buf(c, s, &room);
    if (!p)
        return YARD_IO_DONE;
    ssize_t n = read(c->fd, p, room);
    if (n > 0) {
        *drained = (size_t)n < room;
        yard_conn_rx_commit(c, s, (size_t)n);
        return YARD_IO_OK;
    }
    if (n == 0) {
        *drained = true;
        yard_conn_on_eof(c, s);
        return YARD_IO_OK;
    }
    if (errno == EINTR)
        return YARD_IO_AGAIN;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!c->policy->blocking)
            return YARD_IO_AGAIN;
        yard_conn_fail(c, "idle timeout", YARD_CLOSE_INFO); /* SO_RCVTIMEO */
        return YARD_IO_DONE;
    }
    yard_conn_fail(c, strerror(errno), YARD_CLOSE_QUIET);
    return YARD_IO_DONE;
}

/* Nothing more will happen on this connection. A connection waiting for
 * its job or its timer is not finished, even when the peer has half-closed
 * (its answer is still to come); a timer that only watches for idleness
 * does not hold it. */
static bool conn_finished(const yard_conn_t *c)
{
    return c->failed || ((c->read_eof || c->closing) && c->out.len == 0 && c->tx.len == 0 &&
                         !c->job_pending && !(c->wake_at && !c->wake_idle));
}

/* Completion models: file bytes ready to be taken (one write at a time
 * per connection, so that its bytes reach the file in order). */
static bool store_due(const yard_conn_t *c, bool final)
{
    if (c->stx.len)
        return true; /* the rest of a short write */
    if (!c->store.len)
        return false;
    return final || c->srv->cfg->flush != YARD_FLUSH_BUFFERED || c->store.len >= YARD_STORE_CHUNK;
}

/* Swap the queue and the in-flight buffer: the queue's bytes become the
 * in-flight ones, and the queue starts over in the other's memory. */
static void buf_swap(yard_buf_t *a, yard_buf_t *b)
{
    yard_buf_t t = *a;
    *a = *b;
    *b = t;
}

const uint8_t *yard_conn_tx_take(yard_conn_t *c, size_t *n)
{
    if (!c->tx.len) {
        if (!c->out.len || c->failed)
            return NULL;
        buf_swap(&c->out, &c->tx);
    }
    *n = c->tx.len;
    return yard_buf_head(&c->tx);
}

void yard_conn_tx_done(yard_conn_t *c, long res)
{
    if (res < 0) {
        yard_buf_clear(&c->tx);
        yard_conn_fail(c, strerror((int)-res), YARD_CLOSE_QUIET);
        return;
    }
    yard_buf_consume(&c->tx, (size_t)res);
    /* An idle connection gives its output memory back. */
    yard_buf_shrink(&c->tx, 0);
    yard_buf_shrink(&c->out, 0);
}

const uint8_t *yard_conn_store_take(yard_conn_t *c, size_t *n, bool final)
{
    if (c->srv->out_fd < 0 || !store_due(c, final))
        return NULL;
    if (!c->stx.len)
        buf_swap(&c->store, &c->stx);
    *n = c->stx.len;
    return yard_buf_head(&c->stx);
}

void yard_conn_store_done(yard_conn_t *c, long res)
{
    if (res <= 0) {
        /* A regular file that takes nothing is full. */
        const char *why = strerror(res < 0 ? (int)-res : ENOSPC);
        yard_log_err("%s: writing %s: %s", c->peer, c->srv->cfg->out, why);
        yard_conn_fail(c, "output file not writable", YARD_CLOSE_WARN);
        yard_buf_clear(&c->stx);
        yard_buf_clear(&c->store);
        return;
    }
    yard_buf_consume(&c->stx, (size_t)res);
    yard_buf_shrink(&c->stx, 0);
}

/* How many callbacks yard_conn_next runs before it lets the model wait (an
 * app that keeps re-arming a timer in the past must not hold a thread). */
#define NEXT_STEPS 8

/* Output waiting for the peer, and the bound past which its input waits. */
static size_t conn_queued(const yard_conn_t *c) { return c->out.len + c->tx.len; }
static size_t conn_hold(const yard_conn_t *c)
{
    return c->out_hold ? c->out_hold : YARD_OUT_HIGH_WATER;
}

yard_wait_t yard_conn_next(yard_conn_t *c, yard_scratch_t *s)
{
    bool news_tried = false;
    for (int step = 0;; step++) {
        tls_overdue(c);
        if (conn_finished(c))
            return (yard_wait_t){.next = YARD_NEXT_CLOSE};
        if (c->job_pending)
            return (yard_wait_t){.next = c->job_access ? YARD_NEXT_PERM : YARD_NEXT_JOB};
        if (c->in_held && conn_queued(c) < conn_hold(c) && step < NEXT_STEPS) {
            /* The output that held the input back has drained: offer it
             * again. Not counted as a step while it makes progress (it
             * takes a line at least each time), so none is left behind. */
            size_t before = c->in.len;
            c->in_held = false;
            conn_reoffer(c, s);
            conn_settle(c, s);
            conn_flush(c, s);
            if (c->in.len < before && step > 0)
                step--;
            continue;
        }
        if (step == NEXT_STEPS)
            break;
        if (c->wake_at && !c->sender && yard_now_ns() >= c->wake_at) {
            yard_conn_on_timer(c, s);
            continue;
        }
        /* News the app can take now; once per call: an app that leaves it
         * pending (its peer does not read) waits for writable instead. */
        if (!news_tried && c->watch && !c->closing && yard_watch_due(c->watch)) {
            news_tried = true;
            yard_conn_on_news(c, s);
            continue;
        }
        break;
    }
    return (yard_wait_t){
        .next = YARD_NEXT_WAIT,
        /* Not while output is backed up past the hold bound: input the
         * app held back for it waits with the rest (yard_fx_hold_input);
         * nor while the app waits for its timer to take more
         * (yard_fx_pause_input): the peer's bytes wait in the kernel. */
        .read = !c->read_eof && !c->closing && !c->sender && conn_queued(c) < conn_hold(c) &&
                !(c->in_paused && c->wake_at),
        .write = c->out.len > 0,
        .store = c->policy->completion && store_due(c, false),
        .news = c->watch != NULL,
        .deadline = c->tls_deadline ? c->tls_deadline : c->wake_at,
    };
}

void yard_conn_farewell_fd(const yard_app_t *app, int fd)
{
    if (app->farewell && yard_stopping())
        send(fd, app->farewell, strlen(app->farewell), MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* The server is stopping: what is queued for the peer, if the socket takes
 * it now, then the app's farewell (never after a part of a line). Not with
 * a send in flight (a completion model's), whose end is not known here. */
static void conn_farewell(yard_conn_t *c)
{
    const char *farewell = c->srv->app->farewell;
    if (!farewell || c->sender || c->tx.len || !yard_stopping() || !c->opened)
        return;
    if (c->secure) { /* sealed behind what is queued, then the end of the session */
        if (yard_tls_write(c->tls, (const uint8_t *)farewell, strlen(farewell)) < 0)
            return;
        yard_tls_close_notify(c->tls);
        if (yard_tls_take(c->tls, &c->out) < 0)
            return;
    }
    while (c->out.len) {
        ssize_t n = send(c->fd, yard_buf_head(&c->out), c->out.len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n <= 0)
            return;
        yard_buf_consume(&c->out, (size_t)n);
    }
    if (!c->secure)
        yard_conn_farewell_fd(c->srv->app, c->fd);
}

void yard_conn_close(yard_conn_t *c, const char *reason)
{
    yard_server_t *srv = c->srv;
    int level = c->close_level;
    if (reason) {
        c->close_reason = reason;
        level = YARD_CLOSE_INFO;
    } else if (c->closing && !c->failed) {
        level = YARD_CLOSE_WARN; /* the app closed it: a protocol violation */
    }
    if (c->store.len && srv->out_fd >= 0) {
        int rc = yard_write_all(srv->out_fd, yard_buf_head(&c->store), c->store.len);
        if (rc < 0)
            yard_log_err("%s: writing %s: %s", c->peer, srv->cfg->out, strerror(-rc));
    }
    if (srv->app->close && c->opened) {
        yard_fx_t fx = conn_fx(c, NULL);
        APP_LOCK(c);
        srv->app->close(srv->app_state, c->session, &fx);
        APP_UNLOCK(c);
    }
    /* Log before the peer can see the close, so the log is never behind.
     * Rate-limited: a flood of bad clients must not flood the log. */
    if (c->close_reason) {
        if (level == YARD_CLOSE_WARN)
            yard_log_limited(YARD_LOG_WARN, "%s: connection closed: %s", c->peer, c->close_reason);
        else if (level == YARD_CLOSE_INFO)
            yard_log_limited(YARD_LOG_INFO, "%s: connection closed: %s", c->peer, c->close_reason);
        else
            yard_log_debug("%s: connection closed: %s", c->peer, c->close_reason);
    }
    if (c->watch) {
        yard_watch_close(c->watch);
        free(c->watch);
    }
    conn_farewell(c);
    /* fork --pair: a SEND half that could not write ends the connection for
     * its RECV half too. (When the app closed it from news, the chat's KILL
     * relayed, the SEND process has already handed the end over to RECV:
     * pair_hand_over in src/model/fork.c.) */
    if (c->sender && c->failed)
        shutdown(c->fd, SHUT_RDWR);
    close(c->fd);
    yard_buf_free(&c->in);
    yard_buf_free(&c->out);
    yard_buf_free(&c->store);
    yard_buf_free(&c->tx);
    yard_buf_free(&c->stx);
    yard_buf_free(&c->pout);
    yard_buf_free(&c->hs_in);
    yard_tls_free(c->tls);
    free(c);
}

void yard_scratch_free(yard_scratch_t *s)
{
    yard_buf_free(&s->in);
    yard_buf_free(&s->out);
}

void yard_conn_set_init(yard_conn_set_t *set)
{
    pthread_mutex_init(&set->mu, NULL);
    yard_conn_list_init(&set->head);
}

void yard_conn_set_add(yard_conn_set_t *set, yard_conn_link_t *link, yard_conn_t *c)
{
    link->conn = c;
    pthread_mutex_lock(&set->mu);
    yard_conn_list_append(&set->head, link);
    pthread_mutex_unlock(&set->mu);
}

void yard_conn_set_remove(yard_conn_set_t *set, yard_conn_link_t *link)
{
    pthread_mutex_lock(&set->mu);
    yard_conn_list_remove(link);
    pthread_mutex_unlock(&set->mu);
}

void yard_conn_set_shutdown_all(yard_conn_set_t *set)
{
    pthread_mutex_lock(&set->mu);
    for (yard_conn_link_t *l = set->head.next; l != &set->head; l = l->next) {
        if (l->conn->secure) { /* conn_farewell seals it, once the read returns */
            shutdown(l->conn->fd, SHUT_RD);
            continue;
        }
        if (!l->conn->sender)
            yard_conn_farewell_fd(l->conn->srv->app, l->conn->fd);
        shutdown(l->conn->fd, SHUT_RDWR);
    }
    pthread_mutex_unlock(&set->mu);
}

void yard_conn_set_cut_all(yard_conn_set_t *set)
{
    pthread_mutex_lock(&set->mu);
    for (yard_conn_link_t *l = set->head.next; l != &set->head; l = l->next)
        shutdown(l->conn->fd, SHUT_RDWR);
    pthread_mutex_unlock(&set->mu);
}

/* ---- TLS: records in and out around the same paths (yard/tls.h) ---------- */

/* The peer broke the protocol (plain text on a TLS port, a bad record, no
 * common version): the alert OpenSSL wrote leaves, then the connection
 * closes, logged once (rate-limited) with the reason. */
static void tls_failed(yard_conn_t *c)
{
    c->closing = true;
    c->close_reason = yard_tls_why(c->tls);
    c->close_level = YARD_CLOSE_WARN;
}

/* The handshake is done: now the app hears of the connection. */
static void tls_opened(yard_conn_t *c, yard_scratch_t *s)
{
    if (c->opened || !yard_tls_established(c->tls))
        return;
    /* The start of a record after the handshake's: OpenSSL's to finish. */
    if (c->hs_in.len && yard_tls_feed(c->tls, yard_buf_head(&c->hs_in), c->hs_in.len) < 0)
        yard_conn_fail(c, "out of memory", YARD_CLOSE_WARN);
    yard_buf_free(&c->hs_in);
    c->opened = true;
    c->tls_deadline = 0;
    if (yard_tls_peer_fingerprint(c->tls, c->certfp) < 0)
        c->certfp[0] = 0;
    if (c->srv->app->open)
        conn_call(c, s, c->srv->app->open);
}

/* The handshake's step, on a pool thread: the private-key work of a full
 * handshake (a signature, a key exchange) off the event loop, so a burst
 * of handshakes does not stall established connections. Only this thread
 * touches the connection meanwhile (the model waits for the job). */
static void tls_handshake_job(void *arg)
{
    yard_conn_t *c = arg;
    c->tls_step = yard_tls_handshake(c->tls);
}

/* Whether this step of the handshake goes to the model's pool: on the loop
 * models that have one, unless --tls-handshake inline. */
static bool tls_offloads(const yard_conn_t *c)
{
    return !c->opened && c->policy->job_pool && !c->srv->cfg->tls_handshake_inline;
}

static void tls_pump(yard_conn_t *c, yard_scratch_t *s);

/* The length of the whole TLS records at the start of b (type 20..24, a
 * 5-byte header with the length), or SIZE_MAX when b does not start
 * records at all (plain text on a TLS port): even one byte can say so,
 * where OpenSSL would wait for a header's five. */
static size_t whole_records(const uint8_t *b, size_t n)
{
    size_t off = 0;
    while (off < n) {
        if (b[off] < 20 || b[off] > 24)
            return SIZE_MAX;
        if (n - off < 5)
            break;
        size_t len = (size_t)b[off + 3] << 8 | b[off + 4];
        if (len > 18432)
            return SIZE_MAX;
        if (n - off < 5 + len)
            break;
        off += 5 + len;
    }
    return off;
}

/* Before the handshake is done, OpenSSL gets whole records only: a record
 * it has the start of costs it a 16 KiB read buffer, and a crowd of clients
 * that stop half-way through a ClientHello must not cost that (42 KiB per
 * connection measured, bench/tls_flood.py). The start of a record waits
 * in c->hs_in, its own bytes only. The bytes OpenSSL got (0: nothing for
 * it to do yet), or -1 when out of memory. */
static long tls_feed_whole(yard_conn_t *c, const uint8_t *p, size_t n)
{
    bool held = c->hs_in.len > 0;
    if (held && yard_buf_append(&c->hs_in, p, n) < 0)
        return -1;
    const uint8_t *b = held ? yard_buf_head(&c->hs_in) : p;
    size_t len = held ? c->hs_in.len : n, whole = whole_records(b, len);
    if (whole == SIZE_MAX) { /* closed now, logged once (rate-limited) with the reason */
        c->closing = true;
        c->close_reason = "TLS: not a TLS record (plain text on a TLS port?)";
        c->close_level = YARD_CLOSE_WARN;
        yard_buf_free(&c->hs_in);
        return 0;
    }
    if (whole && !c->tls && !(c->tls = yard_tls_new(c->srv->tls)))
        return -1;
    if (whole && yard_tls_feed(c->tls, b, whole) < 0)
        return -1;
    if (held) {
        yard_buf_consume(&c->hs_in, whole);
        yard_buf_shrink(&c->hs_in, 0);
    } else if (whole < n && yard_buf_append(&c->hs_in, p + whole, n - whole) < 0) {
        return -1;
    }
    return (long)whole;
}

/* Records arrived: decrypt everything they hold (the model will not be
 * told again about bytes OpenSSL already has) and hand it to the app in
 * pieces of at most a read's size, then send what the handshake wrote. */
static void tls_input(yard_conn_t *c, yard_scratch_t *s, const uint8_t *p, size_t n)
{
    long fed = c->opened ? yard_tls_feed(c->tls, p, n) : tls_feed_whole(c, p, n);
    yard_buf_clear(&s->in); /* p may have been in it: OpenSSL (or hs_in) has its copy */
    if (fed < 0) {
        yard_conn_fail(c, "out of memory", YARD_CLOSE_WARN);
        return;
    }
    if (fed == 0 && !c->opened)
        return; /* the start of a record: nothing for the handshake yet */
    if (tls_offloads(c)) {
        c->job_pending = c->tls_job = true;
        c->job = (yard_job_t){.fn = tls_handshake_job, .arg = c, .owner = c};
        c->job_access = NULL;
        return; /* yard_conn_next hands it out; tls_job_done goes on */
    }
    tls_pump(c, s);
}

/* The pool ran the handshake's step: its records leave, a failure closes,
 * and what the records held beyond the handshake goes to the app. */
static void tls_job_done(yard_conn_t *c, yard_scratch_t *s)
{
    c->job_pending = c->tls_job = false;
    if (c->failed)
        return;
    if (c->tls_step < 0 && c->tls_step != -EPROTO)
        yard_conn_fail(c, "out of memory", YARD_CLOSE_WARN);
    else if (c->tls_step < 0)
        tls_failed(c);
    else
        tls_pump(c, s);
    conn_flush(c, s);
}

static void tls_pump(yard_conn_t *c, yard_scratch_t *s)
{
    while (!c->failed && !c->closing) {
        yard_buf_t *ib = c->in.len ? &c->in : &s->in;
        uint8_t *dst = yard_buf_reserve(ib, YARD_READ_CHUNK);
        if (!dst) {
            yard_conn_fail(c, "out of memory", YARD_CLOSE_WARN);
            break;
        }
        long r = yard_tls_read(c->tls, dst, YARD_READ_CHUNK);
        tls_opened(c, s);
        if (r > 0) {
            yard_buf_commit(ib, (size_t)r);
            conn_input(c, ib, s);
            continue;
        }
        if (r == -ESHUTDOWN) /* close_notify: the end of input */
            yard_conn_on_eof(c, s);
        else if (r == -EPROTO)
            tls_failed(c);
        else if (r < 0)
            yard_conn_fail(c, "out of memory", YARD_CLOSE_WARN);
        break;
    }
    conn_flush(c, s);
}

/* Seal the plaintext the app wrote into records, and put the records due
 * (the app's, the handshake's, an alert, close_notify) where conn_flush
 * sends from: the scratch buffer when nothing older waits. */
static void tls_seal(yard_conn_t *c, yard_scratch_t *s)
{
    if (!c->tls) /* no record has come yet: nothing to seal, nothing to send */
        return;
    yard_buf_t *plain[2] = {&c->pout, s ? &s->out : NULL};
    for (int i = 0; i < 2; i++) {
        yard_buf_t *b = plain[i];
        if (!b || !b->len)
            continue;
        if (!c->failed && yard_tls_write(c->tls, yard_buf_head(b), b->len) < 0)
            yard_conn_fail(c, yard_tls_why(c->tls), YARD_CLOSE_WARN);
        yard_buf_clear(b);
    }
    if (c->failed)
        return;
    if (c->closing)
        yard_tls_close_notify(c->tls);
    if (yard_tls_take(c->tls, s && !c->out.len ? &s->out : &c->out) < 0)
        yard_conn_fail(c, "out of memory", YARD_CLOSE_WARN);
}
