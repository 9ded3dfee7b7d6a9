/* The connection driver's TLS (include/yard/conn.h, yard/tls.h): records in
 * and out around the same paths as plain bytes; the handshake (whole
 * records only, on the model's pool where it has one, its deadline), then
 * the app's open; plaintext sealed before conn_flush sends it. */
#include "conn_int.h"

#include <errno.h>
#include <stdint.h>

#include "yard/clock.h"
#include "yard/log.h"
#include "yard/tls.h"

/* The handshake's time is up: the app never heard of this connection. */
bool conn_tls_overdue(yard_conn_t *c)
{
    /* Not while a pool thread holds the handshake: its end closes it. */
    if (!c->tls_deadline || c->job_pending || yard_now_ns() < c->tls_deadline)
        return false;
    yard_conn_fail(c, "TLS handshake timed out (--tls-handshake-timeout)", YARD_CLOSE_INFO);
    return true;
}

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
void conn_tls_input(yard_conn_t *c, yard_scratch_t *s, const uint8_t *p, size_t n)
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
        return; /* yard_conn_next hands it out; conn_tls_job_done goes on */
    }
    tls_pump(c, s);
}

/* The pool ran the handshake's step: its records leave, a failure closes,
 * and what the records held beyond the handshake goes to the app. */
void conn_tls_job_done(yard_conn_t *c, yard_scratch_t *s)
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
void conn_tls_seal(yard_conn_t *c, yard_scratch_t *s)
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
