/* The connection driver's input (include/yard/conn.h): where bytes read
 * from the socket go, what the app is offered and what it leaves on the
 * connection (the 1 MiB limit), input that waited offered again, the end
 * of input, and the read a readiness or blocking model does. */
#include "conn_int.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "yard/log.h"

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
void conn_reoffer(yard_conn_t *c, yard_scratch_t *s)
{
    if (c->in.len && !c->job_pending && !c->closing && !c->failed)
        conn_feed(c, &c->in, s, c->read_eof);
}

/* Where bytes read from the socket go: after input that waits, or in the
 * scratch buffer. TLS: always the scratch buffer, since c->in holds
 * plaintext and these are records (conn_tls_input takes them at once). */
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
void conn_input(yard_conn_t *c, yard_buf_t *ib, yard_scratch_t *s)
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
        conn_tls_input(c, s, yard_buf_head(ib), ib->len);
        return;
    }
    conn_input(c, ib, s);
}

void yard_conn_on_bytes(yard_conn_t *c, yard_scratch_t *s, const uint8_t *p, size_t n)
{
    if (c->secure) {
        conn_tls_input(c, s, p, n);
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
    /* recv, not read: a connection is a socket, and read() on one passes through the
     * VFS (its permission and fsnotify hooks) first: about 2% of a coro echo server's
     * CPU at 150 x 16 B (perf; docs/results.md, issue 43). */
    ssize_t n = recv(c->fd, p, room, 0);
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
