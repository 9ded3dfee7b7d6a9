/* The connection driver (include/yard/conn.h), shared by every model: a
 * connection's life, from its allocation and the app's open, through the
 * one decision of what it waits for next (yard_conn_next), to its close
 * and the server's farewell; and the sets of live connections a model
 * shuts down. Input: conn_input.c; the app's callbacks and effects:
 * conn_effects.c; output: conn_output.c; TLS: conn_tls.c; what they share:
 * conn_int.h. */
#include "conn_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "yard/clock.h"
#include "yard/log.h"
#include "yard/tls.h"

/* The session follows the connection in the same allocation, and the
 * model's own state follows the session. */
struct conn_alloc {
    yard_conn_t conn;
    max_align_t session[];
};

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

/* Nothing more will happen on this connection. A connection waiting for
 * its job or its timer is not finished, even when the peer has half-closed
 * (its answer is still to come); a timer that only watches for idleness
 * does not hold it. */
static bool conn_finished(const yard_conn_t *c)
{
    return c->failed || ((c->read_eof || c->closing) && c->out.len == 0 && c->tx.len == 0 &&
                         !c->job_pending && !(c->wake_at && !c->wake_idle));
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
        conn_tls_overdue(c);
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
        .store = c->policy->completion && conn_store_due(c, false),
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
