/* --tls, what every mode's connections share (load.h): sending the records
 * TLS wrote, counting a finished handshake, and one request on a blocking
 * socket. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "load.h"
#include "yard/clock.h"
#include "yard/tls.h"

int load_tls_flush(struct yard_tls *t, yard_buf_t *wire, int fd)
{
    if (t && yard_tls_take(t, wire) < 0)
        return -ENOMEM;
    while (wire->len) {
        ssize_t w = send(fd, yard_buf_head(wire), wire->len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return errno == EAGAIN ? 0 : -errno;
        yard_buf_consume(wire, (size_t)w);
    }
    return 1;
}

void load_tls_established(load_result_t *r, const struct yard_tls *t, uint64_t began_ns)
{
    yard_hist_record(&r->tls_handshake, yard_now_ns() - began_ns);
    if (yard_tls_resumed(t))
        r->tls_resumed++;
    else
        r->tls_full++;
}

/* Plaintext of the reply into rep[*got, replen): 1 when complete, 0 when
 * more ciphertext is needed, -1 with why. */
static int take_reply(struct yard_tls *t, uint8_t *rep, size_t replen, size_t *got, char *why,
                      size_t whylen)
{
    while (*got < replen) {
        long n = yard_tls_read(t, rep + *got, replen - *got);
        if (n == 0)
            return 0;
        if (n < 0) {
            snprintf(why, whylen, "%s",
                     n == -ESHUTDOWN ? "the server ended the TLS session" : yard_tls_why(t));
            return -1;
        }
        *got += (size_t)n;
    }
    return 1;
}

/* The exchange itself; the caller frees t and wire. */
static int exchange(struct yard_tls *t, yard_buf_t *wire, int fd, const uint8_t *req,
                    size_t reqlen, uint8_t *rep, size_t replen, char *why, size_t whylen)
{
    bool sent = false;
    size_t got = 0;
    for (;;) {
        int h = yard_tls_handshake(t);
        if (h < 0) {
            snprintf(why, whylen, "%s", yard_tls_why(t));
            return -1;
        }
        if (h == 1 && !sent) {
            if (yard_tls_write(t, req, reqlen) < 0) {
                snprintf(why, whylen, "%s", yard_tls_why(t));
                return -1;
            }
            sent = true;
        }
        int f = load_tls_flush(t, wire, fd);
        if (f <= 0) {
            snprintf(why, whylen, "send: %s", f == 0 ? "timed out" : strerror(-f));
            return -1;
        }
        int done = sent ? take_reply(t, rep, replen, &got, why, whylen) : 0;
        if (done != 0)
            return done > 0 ? 0 : -1;
        uint8_t raw[16384];
        ssize_t n = read(fd, raw, sizeof raw);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            snprintf(why, whylen, "%s",
                     n == 0                ? "connection closed"
                     : errno == EAGAIN     ? "no complete reply within --timeout"
                                           : strerror(errno));
            return -1;
        }
        if (yard_tls_feed(t, raw, (size_t)n) < 0) {
            snprintf(why, whylen, "out of memory for TLS records");
            return -1;
        }
    }
}

int load_tls_request(const load_opts_t *o, int fd, const uint8_t *req, size_t reqlen,
                     uint8_t *rep, size_t replen, char *why, size_t whylen)
{
    struct yard_tls *t = yard_tls_client_new(o->tls_ctx, o->tls_host);
    if (!t) {
        snprintf(why, whylen, "out of memory for TLS");
        return -1;
    }
    yard_buf_t wire = YARD_BUF_INIT;
    int rc = exchange(t, &wire, fd, req, reqlen, rep, replen, why, whylen);
    if (rc == 0) { /* a clean end: close_notify, as the handshake mode's rounds send */
        yard_tls_close_notify(t);
        load_tls_flush(t, &wire, fd);
    }
    yard_tls_free(t);
    yard_buf_free(&wire);
    return rc;
}
