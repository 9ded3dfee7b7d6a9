/* The connection driver's output (include/yard/conn.h): sends, the output
 * queue and its limit, the bytes bound for --out (at once, or in chunks),
 * and what a completion model takes to send or write and hands back. */
#include "conn_int.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "yard/log.h"

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
void conn_store(yard_conn_t *c)
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
void conn_flush(yard_conn_t *c, yard_scratch_t *s)
{
    if (c->secure)
        conn_tls_seal(c, s);
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

/* Completion models: file bytes ready to be taken (one write at a time
 * per connection, so that its bytes reach the file in order). */
bool conn_store_due(const yard_conn_t *c, bool final)
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
    if (c->srv->out_fd < 0 || !conn_store_due(c, final))
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
