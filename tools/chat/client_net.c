/* yard-chat connect (client.c): the connection: connecting, TLS (the
 * handshake, records in and out), lines sent, what arrives read and split
 * into lines, and the connection dropped. */
#include "client_int.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "yard/buf.h"
#include "yard/proto_ircline.h"

/* ---- the connection ------------------------------------------------------ */

yard_tls_ctx_t *client_tls_ctx;
yard_tls_t *client_tls;
char client_tls_host[256];

void client_drop_connection(void)
{
    yard_tls_free(client_tls);
    client_tls = NULL;
    if (client.fd >= 0)
        close(client.fd);
    client.fd = -1;
}

/* The records TLS has written, to the socket: 0, or -1. */
int client_tls_flush(void)
{
    yard_buf_t b = YARD_BUF_INIT;
    int rc = yard_tls_take(client_tls, &b) < 0 ? -1 : 0;
    if (rc == 0 && b.len)
        rc = yard_write_all(client.fd, yard_buf_head(&b), b.len) < 0 ? -1 : 0;
    yard_buf_free(&b);
    return rc;
}

/* Bytes for the server, sealed with --tls: 0, or -1. */
static int wire_write(const char *p, size_t n)
{
    if (!client_tls)
        return yard_write_all(client.fd, p, n) < 0 ? -1 : 0;
    return yard_tls_write(client_tls, (const uint8_t *)p, n) < 0 ? -1 : client_tls_flush();
}

/* The handshake, before anything is said: true once the server is who it
 * should be (or --tls-insecure). Bounded by 15 s. */
static bool tls_start(void)
{
    client_tls = yard_tls_client_new(client_tls_ctx, client_tls_host);
    if (!client_tls) {
        client_show("* out of memory");
        return false;
    }
    time_t until = time(NULL) + 15;
    for (;;) {
        int r = yard_tls_handshake(client_tls);
        if (client_tls_flush() < 0) {
            client_show("* %s: the connection failed during the TLS handshake", client.target_text);
            return false;
        }
        if (r == 1)
            return true;
        if (r < 0) {
            client_show("* %s: %s", client.target_text, yard_tls_why(client_tls));
            return false;
        }
        if (time(NULL) >= until) {
            client_show("* %s: no TLS handshake within 15 s", client.target_text);
            return false;
        }
        struct pollfd p = {.fd = client.fd, .events = POLLIN};
        if (poll(&p, 1, 1000) <= 0)
            continue;
        char buf[16384];
        ssize_t n = read(client.fd, buf, sizeof buf);
        if (n <= 0 || yard_tls_feed(client_tls, (const uint8_t *)buf, (size_t)n) < 0) {
            client_show("* %s closed the connection during the TLS handshake (a plain-text port?)",
                 client.target_text);
            return false;
        }
    }
}

void client_send_line(const char *fmt, ...)
{
    if (client.fd < 0)
        return;
    char line[600];
    bool cut;
    va_list ap;
    va_start(ap, fmt);
    size_t n = yard_irc_vline(line, sizeof line, &cut, fmt, ap);
    va_end(ap);
    if (n && wire_write(line, n) < 0)
        client_drop_connection();
}

bool client_try_connect(void)
{
    char err[256];
    const char *call = "";
    client.fd = yard_connect(&client.addr, false, &call);
    if (client.fd < 0) {
        yard_net_message(err, sizeof err, &client.addr, call, client.fd);
        client.fd = -1;
        client_show("* cannot connect to %s: %s", client.target_text, err);
        return false;
    }
    if (client_tls_ctx && !tls_start()) {
        client_drop_connection();
        return false;
    }
    client.in_len = 0;
    client.logged_in = false;
    client_send_line("CAP LS 302");
    client_send_line("NICK %s", client.user);
    client_send_line("USER %s 0 * :%s", client.user, client.user);
    client_send_line("CAP REQ :sasl server-time echo-message");
    /* asked apart: a server without them still logs us in */
    client_send_line("CAP REQ :batch message-tags draft/chathistory draft/read-marker away-notify");
    client.history = false;
    client.hist_chan[0] = client.hist_ref[0] = 0;
    return client.fd >= 0;
}

static int on_line_cb(char *line, void *arg)
{
    (void)arg;
    client_on_line(line);
    return 0;
}

/* The complete lines of client.in, handled; the rest kept. */
static void take_lines(void)
{
    size_t off = (size_t)yard_irc_each_line(client.in, client.in_len, on_line_cb, NULL);
    memmove(client.in, client.in + off, client.in_len - off);
    client.in_len -= off;
}

/* With --tls: every plaintext byte the records fed so far hold. */
static bool tls_drain(void)
{
    for (;;) {
        long r = yard_tls_read(client_tls, (uint8_t *)client.in + client.in_len, sizeof client.in - client.in_len);
        if (r > 0) {
            client.in_len += (size_t)r;
            take_lines();
            if (client.in_len == sizeof client.in)
                return false; /* a line longer than any the server sends */
            continue;
        }
        if (r == -EPROTO)
            client_show("* %s: %s", client.target_text, yard_tls_why(client_tls));
        return r == 0 && client_tls_flush() == 0;
    }
}

bool client_on_readable(void)
{
    char buf[sizeof client.in];
    size_t room = client_tls ? sizeof buf : sizeof client.in - client.in_len;
    ssize_t n = read(client.fd, client_tls ? buf : client.in + client.in_len, room);
    if (n <= 0 || (client_tls && yard_tls_feed(client_tls, (const uint8_t *)buf, (size_t)n) < 0)) {
        client_drop_connection();
        return false;
    }
    if (client_tls) {
        if (!tls_drain()) {
            client_drop_connection();
            return false;
        }
        return true;
    }
    client.in_len += (size_t)n;
    take_lines();
    return true;
}
