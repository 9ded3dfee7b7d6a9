/* Linux-only: epoll. What a port uses instead: docs/portability.md. */
/* rate mode: the papayaChat benchmark (tcpkali --channel-bandwidth-upstream
 * 1Mbps -em 'message\n'). Each connection sends its message over and over
 * at a constant bandwidth for --duration, after a ramp-up during which the
 * connections start one after another and which is not measured. Every
 * millisecond each connection sends, in one write, the whole messages its
 * schedule says are due; a connection that cannot keep up is behind
 * schedule, and the run says by how much. Anything the server sends back is
 * read and dropped.
 *
 * The traffic's shape is a variable of its own (issue 20): --write-size N
 * sends the same bandwidth in writes of exactly N bytes, --nodelay turns
 * Nagle off, and --pacing tcpkali reproduces the study's generator: one
 * loop that wakes on a 1 ms timer and writes, on every connection, every
 * byte due (message boundaries ignored), its cycle lengthened by its
 * per-connection cost (docs/load.md, "Traffic shape").
 *
 * --tls: a connection's handshake comes first (timed and counted in the
 * report's tls figures), and its schedule runs meanwhile, so a slow one
 * makes it late. Bytes and writes are then plaintext: each write is sealed
 * into records and sent; records the socket does not take wait, and
 * nothing more is sealed until they have gone (the same backpressure as a
 * plain send). What comes back is opened and dropped. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "load.h"
#include "yard/clock.h"
#include "yard/tls.h"

#define REPEAT_BYTES (64u * 1024u)

enum { PACING_TICK, PACING_TCPKALI };

/* tcpkali 1.2's cycle at 1 Mbit/s on the development machine: its loop
 * sleeps on a 1 ms libev timer (about 1.08 ms from wake to wake with one
 * connection), then writes on each connection, costing it about 5 us per
 * connection per cycle; measured from its write(2) counts (docs/load.md). */
#define TCPKALI_CYCLE_NS 1080000u
#define TCPKALI_PER_CONN_NS 5000u

/* Its settings: filled by its flags, completed by rate_prepare; read-only
 * while threads run. */
struct rate_settings {
    double byte_rate;    /* bytes/s per connection (--bandwidth, or from --msg-rate) */
    double msg_rate;     /* --msg-rate: messages/s per connection, or 0 */
    const char *message; /* --message as given, escapes and all */
    uint64_t ramp_ns;    /* connections start over this long, excluded */
    size_t write_size;   /* --write-size: bytes per write, or 0 (the messages due per tick) */
    int nodelay;         /* --nodelay on|off: TCP_NODELAY on the connections */
    int pacing;          /* --pacing tick|tcpkali */
    /* Derived by prepare. */
    char text[4096];     /* what is sent, repeated: the message with its escapes as bytes */
    size_t len;
};

/* Its part of a result: bits per second, aggregate and per connection, in
 * the window. */
struct rate_result {
    double target_bps, achieved_bps, conn_min_bps, conn_max_bps;
    uint64_t window_bytes;
    uint64_t window_writes; /* send() calls that moved bytes, in the window */
};

struct rconn {
    int id, fd;
    bool connected, blocked;
    uint64_t start_ns;    /* when its schedule begins */
    uint64_t sent;        /* bytes */
    uint64_t at_window;   /* bytes sent when the window opened */
    uint64_t at_close;    /* bytes sent when it closed */
    uint64_t writes;      /* send() calls that moved bytes */
    uint64_t writes_at_window, writes_at_close;
    yard_tls_t *tls;      /* --tls */
    yard_buf_t wire;      /* --tls: records the socket has not taken yet */
    bool secured;         /* --tls: the handshake is done */
    uint64_t connect_at;  /* --tls: when the TCP connect started */
};

/* "1Mbps" (bits), "125kBps" (bytes), ...: bytes per second, or -1. */
static double parse_bandwidth(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v <= 0)
        return -1;
    double mult = 1;
    switch (*end) {
    case 'k':
    case 'K': mult = 1e3; end++; break;
    case 'M': mult = 1e6; end++; break;
    case 'G': mult = 1e9; end++; break;
    }
    if (strcmp(end, "bps") == 0)
        return v * mult / 8.0; /* bits */
    if (strcmp(end, "Bps") == 0)
        return v * mult; /* bytes */
    return -1;
}

/* Bytes due by now. By default whole messages only, the first one at once;
 * with --write-size N whole writes of N bytes, the first one at once; with
 * --pacing tcpkali every byte the bandwidth allows by now, as tcpkali's
 * --channel-bandwidth does (its unit of movement is one byte). */
static uint64_t due_bytes(const struct rate_settings *s, const struct rconn *c, uint64_t now)
{
    if (now < c->start_ns)
        return 0;
    double secs = (double)(now - c->start_ns) / 1e9;
    if (s->pacing == PACING_TCPKALI)
        return (uint64_t)(secs * s->byte_rate);
    size_t unit = s->write_size ? s->write_size : s->len;
    uint64_t units = (uint64_t)(secs * s->byte_rate / (double)unit) + 1;
    return units * unit;
}

/* A full socket: wait for EPOLLOUT too (blocked), or no longer. */
static void set_blocked(int ep, struct rconn *c, bool blocked)
{
    if (c->blocked == blocked)
        return;
    struct epoll_event ev = {.events = blocked ? EPOLLIN | EPOLLOUT : EPOLLIN, .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->blocked = blocked;
}

/* --tls: send the records waiting: 1 when all went, 0 when the socket is
 * full (blocked), -1 when it failed (the error recorded). */
static int tls_send(load_result_t *r, int ep, struct rconn *c)
{
    int rc = load_tls_flush(c->tls, &c->wire, c->fd);
    if (rc < 0) {
        load_error(r, "connection %d: %s", c->id,
                   rc == -ENOMEM ? "out of memory for TLS records" : strerror(-rc));
        return -1;
    }
    set_blocked(ep, c, rc == 0);
    return rc;
}

/* --tls: move c's handshake on (counted and timed once done); -1 when it
 * failed. */
static int tls_step(load_result_t *r, int ep, struct rconn *c)
{
    int h = yard_tls_handshake(c->tls);
    if (h < 0) {
        r->tls_failures++;
        load_error(r, "connection %d: %s", c->id, yard_tls_why(c->tls));
        return -1;
    }
    if (tls_send(r, ep, c) < 0) {
        r->tls_failures++;
        return -1;
    }
    if (h == 1) {
        c->secured = true;
        load_tls_established(r, c->tls, c->connect_at);
    }
    return 0;
}

/* Hand n bytes to the socket (sealed first with --tls): the plaintext
 * bytes it took, 0 when it is full, -1 when it failed. */
static ssize_t send_some(load_result_t *r, int ep, struct rconn *c, const uint8_t *p, size_t n)
{
    if (c->tls) {
        if (yard_tls_write(c->tls, p, n) < 0) {
            load_error(r, "connection %d: %s", c->id, yard_tls_why(c->tls));
            return -1;
        }
        return tls_send(r, ep, c) < 0 ? -1 : (ssize_t)n; /* the rest waits in c->wire */
    }
    for (;;) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w >= 0)
            return w;
        if (errno == EAGAIN) {
            set_blocked(ep, c, true);
            return 0;
        }
        if (errno != EINTR) {
            load_error(r, "connection %d: send: %s", c->id, strerror(errno));
            return -1;
        }
    }
}

static int pump(const load_opts_t *o, load_result_t *r, int ep, struct rconn *c,
                const uint8_t *repeat, uint64_t now)
{
    const struct rate_settings *s = o->settings;
    /* --tls: records left from before go first (nothing is sealed before the
     * handshake is done, or while they wait). */
    if (c->tls) {
        int sent = c->secured ? tls_send(r, ep, c) : 0;
        if (sent <= 0)
            return sent;
    }
    uint64_t due = due_bytes(s, c, now);
    while (c->sent < due) {
        size_t off = (size_t)(c->sent % s->len);
        size_t n = (size_t)(due - c->sent);
        size_t most = s->write_size ? s->write_size : REPEAT_BYTES;
        if (n > most)
            n = most;
        ssize_t w = send_some(r, ep, c, repeat + off, n);
        if (w < 0)
            return -1;
        if (w > 0) {
            c->sent += (uint64_t)w;
            c->writes++;
            r->bytes_sent += (uint64_t)w;
        }
        if (w == 0 || (c->tls && c->blocked)) /* full: the rest when EPOLLOUT comes */
            return 0;
    }
    set_blocked(ep, c, false);
    return 0;
}

/* --tls: ciphertext arrived: fed to TLS, the handshake moved on, what it
 * opens counted and dropped. */
static int tls_arrived(load_result_t *r, int ep, struct rconn *c, const uint8_t *p, size_t n)
{
    if (yard_tls_feed(c->tls, p, n) < 0) {
        load_error(r, "connection %d: out of memory for TLS records", c->id);
        return -1;
    }
    if (!c->secured)
        return tls_step(r, ep, c);
    uint8_t plain[16384];
    for (;;) {
        long got = yard_tls_read(c->tls, plain, sizeof plain);
        if (got == 0)
            return 0;
        if (got < 0) {
            load_error(r, "connection %d: %s", c->id,
                       got == -ESHUTDOWN ? "the server ended the TLS session"
                                         : yard_tls_why(c->tls));
            return -1;
        }
        r->bytes_received += (uint64_t)got;
    }
}

static int drain(load_result_t *r, int ep, struct rconn *c)
{
    uint8_t buf[16384];
    for (;;) {
        ssize_t n = read(c->fd, buf, sizeof buf);
        if (n > 0 && c->tls) {
            if (tls_arrived(r, ep, c, buf, (size_t)n) < 0)
                return -1;
            continue;
        }
        if (n > 0) {
            r->bytes_received += (uint64_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        if (c->tls && !c->secured)
            r->tls_failures++;
        load_error(r, "connection %d: %s", c->id,
                   n == 0 ? (c->tls && !c->secured
                                 ? "the server closed it during the TLS handshake (does this port "
                                   "speak TLS?)"
                                 : "the server closed it")
                          : strerror(errno));
        return -1;
    }
}

static int rate_run(const load_opts_t *o, load_result_t *r)
{
    const struct rate_settings *s = o->settings;
    struct rate_result *rr = r->mode;
    size_t span = s->write_size > REPEAT_BYTES ? s->write_size : REPEAT_BYTES;
    size_t reps = span / s->len + 2;
    uint8_t *repeat = malloc(reps * s->len);
    struct rconn *conns = calloc((size_t)o->connections, sizeof *conns);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (!repeat || !conns || ep < 0) {
        load_error(r, "out of memory or descriptors");
        free(repeat);
        free(conns);
        if (ep >= 0)
            close(ep);
        return -1;
    }
    for (size_t i = 0; i < reps; i++)
        memcpy(repeat + i * s->len, s->text, s->len);

    int status = 0;
    for (int i = 0; i < o->connections; i++) {
        struct rconn *c = &conns[i];
        c->id = i;
        c->connect_at = yard_now_ns();
        c->fd = load_connect(o, r, ep, c);
        if (c->fd < 0) {
            status = -1;
            break;
        }
    }
    uint64_t t0 = yard_now_ns();
    uint64_t window_start = t0 + s->ramp_ns, window_end = window_start + o->duration_ns;
    for (int i = 0; i < o->connections; i++)
        conns[i].start_ns = t0 + s->ramp_ns * (uint64_t)i / (uint64_t)o->connections;
    bool window_open = false;
    struct epoll_event events[256];
    /* --pacing tcpkali: cycles of fixed length from t0, each one writing
     * what is due on every connection. */
    uint64_t cycle_ns = TCPKALI_CYCLE_NS + TCPKALI_PER_CONN_NS * (uint64_t)o->connections;
    uint64_t next_cycle = t0;
    while (status == 0) {
        int n;
        if (s->pacing == PACING_TCPKALI || s->write_size) {
            /* Sleep to the next cycle (tcpkali), or to the next write any
             * connection has due (--write-size: writes spread evenly, not
             * bunched on a tick), at most 1 ms. */
            uint64_t before = yard_now_ns();
            uint64_t wake = s->pacing == PACING_TCPKALI ? next_cycle : before + 1000000u;
            for (int i = 0; s->write_size && i < o->connections; i++) {
                const struct rconn *c = &conns[i];
                if (c->fd < 0 || !c->connected || c->blocked)
                    continue;
                uint64_t at = c->start_ns + (uint64_t)((double)c->sent * 1e9 / s->byte_rate);
                if (at < wake)
                    wake = at;
            }
            uint64_t wait = wake > before ? wake - before : 0;
            struct timespec ts = {.tv_sec = (time_t)(wait / 1000000000u),
                                  .tv_nsec = (long)(wait % 1000000000u)};
            n = epoll_pwait2(ep, events, 256, &ts, NULL);
        } else {
            n = epoll_wait(ep, events, 256, 1);
        }
        uint64_t now = yard_now_ns();
        bool write_now = true;
        if (s->pacing == PACING_TCPKALI) {
            write_now = now >= next_cycle;
            while (next_cycle <= now)
                next_cycle += cycle_ns;
        }
        for (int i = 0; i < n && status == 0; i++) {
            struct rconn *c = events[i].data.ptr;
            if (c->fd < 0)
                continue;
            if (!c->connected) {
                /* Nagle stays on by default: the papayaChat load is a byte
                 * stream (--nodelay on turns it off). */
                if (load_connected(o, r, ep, c->fd, c, s->nodelay != 0) < 0) {
                    status = -1;
                    break;
                }
                c->connected = true;
                if (o->tls && !(c->tls = yard_tls_client_new(o->tls_ctx, o->tls_host))) {
                    load_error(r, "out of memory for TLS");
                    status = -1;
                } else if (o->tls && tls_step(r, ep, c) < 0) {
                    status = -1; /* as a failed connect: nothing to measure */
                }
                continue;
            }
            bool was_secured = c->secured;
            int rc = 0;
            if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                rc = drain(r, ep, c);
            if (rc == 0 && c->tls && !c->secured && (events[i].events & EPOLLOUT))
                rc = tls_step(r, ep, c); /* the handshake's records, once the socket took more */
            if (rc < 0 && c->tls && !was_secured) {
                status = -1; /* a failed handshake: as a failed connect */
            } else if (rc < 0) {
                r->errors++;
                c->at_close = c->sent;
                c->writes_at_close = c->writes;
                close(c->fd);
                c->fd = -1;
            }
        }
        if (!window_open && now >= window_start) {
            window_open = true;
            for (int i = 0; i < o->connections; i++) {
                conns[i].at_window = conns[i].sent;
                conns[i].writes_at_window = conns[i].writes;
            }
        }
        bool done = now >= window_end;
        for (int i = 0; i < o->connections && status == 0; i++) {
            struct rconn *c = &conns[i];
            if (c->fd < 0 || !c->connected)
                continue;
            if (!done && (write_now || c->blocked) && pump(o, r, ep, c, repeat, now) < 0) {
                r->errors++;
                c->at_close = c->sent;
                c->writes_at_close = c->writes;
                close(c->fd);
                c->fd = -1;
            }
        }
        /* How late the generator is, on a fresh clock after its writes: the
         * age of the oldest byte due and not sent (byte k of a connection is
         * due k / rate after its start; whole messages or writes fall due
         * with their first byte). A generator too slow to keep up falls
         * further behind with every pass and shows it here, although each
         * pass catches up with the time at which it began. Between tcpkali
         * cycles bytes wait by design, and at the end what falls due is not
         * sent: neither counts. */
        if (window_open && write_now && !done) {
            uint64_t late_now = yard_now_ns(), behind_ns = 0;
            for (int i = 0; i < o->connections; i++) {
                const struct rconn *c = &conns[i];
                if (c->fd < 0 || !c->connected)
                    continue;
                uint64_t due_at = c->start_ns + (uint64_t)((double)c->sent * 1e9 / s->byte_rate);
                if (due_at < late_now && late_now - due_at > behind_ns)
                    behind_ns = late_now - due_at;
            }
            if ((double)behind_ns / 1e6 > r->behind_max_ms)
                r->behind_max_ms = (double)behind_ns / 1e6;
        }
        if (done)
            break;
    }
    r->start_ns = window_start;
    r->end_ns = window_end;
    double secs = (double)o->duration_ns / 1e9;
    rr->conn_min_bps = -1;
    for (int i = 0; i < o->connections; i++) {
        struct rconn *c = &conns[i];
        uint64_t end = c->fd >= 0 ? c->sent : c->at_close;
        uint64_t wend = c->fd >= 0 ? c->writes : c->writes_at_close;
        rr->window_writes += wend > c->writes_at_window ? wend - c->writes_at_window : 0;
        uint64_t in_window = end > c->at_window ? end - c->at_window : 0;
        rr->window_bytes += in_window;
        double bps = (double)in_window * 8.0 / secs;
        if (rr->conn_min_bps < 0 || bps < rr->conn_min_bps)
            rr->conn_min_bps = bps;
        if (bps > rr->conn_max_bps)
            rr->conn_max_bps = bps;
        if (status == 0 && c->fd >= 0 && c->tls && !c->secured) {
            r->tls_failures++;
            load_error(r, "connection %d: its TLS handshake did not finish within the run", c->id);
        }
        if (c->fd >= 0 && c->secured) { /* a clean end, if the socket takes it */
            yard_tls_close_notify(c->tls);
            load_tls_flush(c->tls, &c->wire, c->fd);
        }
        if (c->fd >= 0)
            close(c->fd);
        yard_tls_free(c->tls);
        yard_buf_free(&c->wire);
    }
    rr->target_bps = s->byte_rate * 8.0 * o->connections;
    rr->achieved_bps = (double)rr->window_bytes * 8.0 / secs;
    r->messages = rr->window_bytes / s->len;
    free(repeat);
    free(conns);
    close(ep);
    return status;
}

/* The message, with its escapes (\n, \t, \r, \\) turned into bytes. */
static int unescape_message(struct rate_settings *s, char *err, size_t errlen)
{
    const char *m = s->message;
    size_t n = 0;
    for (; *m && n < sizeof s->text; m++) {
        if (*m == '\\' && (m[1] == 'n' || m[1] == 't' || m[1] == '\\' || m[1] == 'r')) {
            m++;
            s->text[n++] = *m == 'n' ? '\n' : *m == 't' ? '\t' : *m == 'r' ? '\r' : '\\';
        } else {
            s->text[n++] = *m;
        }
    }
    if (!n) {
        snprintf(err, errlen, "--message: must not be empty");
        return -1;
    }
    s->len = n;
    return 0;
}

static int rate_prepare(load_opts_t *o, char *err, size_t errlen)
{
    struct rate_settings *s = o->settings;
    if (unescape_message(s, err, errlen) < 0)
        return -1;
    if (!o->duration_ns) {
        snprintf(err, errlen, "rate needs --duration (the measured window)");
        return -1;
    }
    if ((s->byte_rate > 0) == (s->msg_rate > 0)) {
        snprintf(err, errlen, "rate needs exactly one of --bandwidth and --msg-rate");
        return -1;
    }
    if (s->msg_rate > 0)
        s->byte_rate = s->msg_rate * (double)s->len;
    if (s->write_size && s->pacing == PACING_TCPKALI) {
        snprintf(err, errlen, "--write-size: not with --pacing tcpkali, whose writes carry the "
                              "bytes due each cycle");
        return -1;
    }
    /* It paces bytes, not requests: no open loop of requests, no pipeline. */
    if (o->rate > 0 || o->pipeline != 1) {
        snprintf(err, errlen, "--rate and --pipeline belong to the request/response modes, not "
                              "rate");
        return -1;
    }
    return 0;
}

static void rate_merge(void *into, const void *from, bool first)
{
    struct rate_result *a = into;
    const struct rate_result *b = from;
    a->target_bps += b->target_bps;
    a->achieved_bps += b->achieved_bps;
    if (first || b->conn_min_bps < a->conn_min_bps)
        a->conn_min_bps = b->conn_min_bps;
    if (b->conn_max_bps > a->conn_max_bps)
        a->conn_max_bps = b->conn_max_bps;
    a->window_bytes += b->window_bytes;
    a->window_writes += b->window_writes;
}

/* Bandwidth, not round trips; the CPU is measured over the whole run, the
 * ramp-up included. */
static void rate_figures(load_report_t *rep)
{
    const struct rate_settings *s = rep->o->settings;
    const struct rate_result *rr = rep->r->mode;
    rep->wall_s = rep->secs + (double)s->ramp_ns / 1e9;
    rep->loop = "rate";
    rep->target = rr->target_bps;
    rep->achieved = rr->achieved_bps;
    rep->unit = "bit/s";
    rep->on_schedule = true;
    rep->round_trips = false;
}

static void rate_text_head(const load_report_t *rep)
{
    const load_opts_t *o = rep->o;
    const struct rate_settings *s = o->settings;
    const struct rate_result *rr = rep->r->mode;
    printf("rate %s: %d connections x %.3f Mbit/s for %.1f s (ramp-up %.1f s not measured)\n",
           o->target_text, o->connections, s->byte_rate * 8e-6, rep->secs,
           (double)s->ramp_ns / 1e9);
    printf("  achieved      %.3f Mbit/s of %.3f (%.2f%%); per connection %.3f..%.3f Mbit/s\n",
           rr->achieved_bps * 1e-6, rr->target_bps * 1e-6,
           rr->target_bps > 0 ? 100.0 * rr->achieved_bps / rr->target_bps : 0,
           rr->conn_min_bps * 1e-6, rr->conn_max_bps * 1e-6);
    printf("  writes        %.1f per connection per second (%s%s%s)\n",
           o->connections > 0 && rep->secs > 0
               ? (double)rr->window_writes / o->connections / rep->secs
               : 0.0,
           s->pacing == PACING_TCPKALI ? "tcpkali's pacing" : "1 ms tick",
           s->write_size ? ", fixed-size writes" : "", s->nodelay ? ", TCP_NODELAY" : "");
    printf("  behind        at most %.2f ms behind schedule%s\n", rep->r->behind_max_ms,
           rep->behind ? " -- more than 1% of the run: INVALID" : "");
}

static void rate_json(const load_report_t *rep)
{
    const struct rate_settings *s = rep->o->settings;
    const struct rate_result *rr = rep->r->mode;
    printf("\"per_connection_bps\": {\"target\": %.1f, \"min\": %.1f, \"max\": %.1f}, "
           "\"ramp_up_s\": %.3f, \"write_size\": %zu, \"nodelay\": %s, \"pacing\": \"%s\", "
           "\"writes_per_conn_per_s\": %.1f, ",
           s->byte_rate * 8.0, rr->conn_min_bps, rr->conn_max_bps,
           (double)s->ramp_ns / 1e9, s->write_size, s->nodelay ? "true" : "false",
           s->pacing == PACING_TCPKALI ? "tcpkali" : "tick",
           rep->o->connections > 0 && rep->secs > 0
               ? (double)rr->window_writes / rep->o->connections / rep->secs
               : 0.0);
}

static int parse_bandwidth_flag(const char *text, void *field, char *err, size_t errlen)
{
    double v = parse_bandwidth(text);
    if (v <= 0) {
        snprintf(err, errlen,
                 "expected e.g. 1Mbps, 500kbps (bits/s) or 125kBps (bytes/s), got '%s'", text);
        return -1;
    }
    *(double *)field = v;
    return 0;
}

static int parse_msg_rate(const char *text, void *field, char *err, size_t errlen)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !(v > 0)) {
        snprintf(err, errlen, "expected messages per second (> 0), got '%s'", text);
        return -1;
    }
    *(double *)field = v;
    return 0;
}

#define RATE(member) YARD_OPT_FIELD(struct rate_settings, member)

static const yard_opt_choice_t on_off[] = {
    YARD_OPT_CHOICE("on", 1),
    YARD_OPT_CHOICE("off", 0),
    YARD_OPT_CHOICES_END,
};

static const yard_opt_choice_t pacings[] = {
    YARD_OPT_CHOICE("tick", PACING_TICK),
    YARD_OPT_CHOICE("tcpkali", PACING_TCPKALI),
    YARD_OPT_CHOICES_END,
};

static const yard_opt_t rate_opts[] = {
    {.name = "bandwidth", .form = "BW", .type = YARD_OPT_CUSTOM, RATE(byte_rate),
     .parse = parse_bandwidth_flag,
     .help = "per connection, e.g. 1Mbps, 500kbps (bits) or 125kBps, 1MBps (bytes)"},
    {.name = "msg-rate", .form = "R", .type = YARD_OPT_CUSTOM, RATE(msg_rate),
     .parse = parse_msg_rate,
     .help = "messages per second per connection (instead of --bandwidth)"},
    {.name = "message", .form = "TEXT", .type = YARD_OPT_STRING, RATE(message),
     .def = "message\\n", .help = "what is sent; \\n, \\t, \\r and \\\\ are escapes"},
    {.name = "ramp-up", .form = "DUR", .type = YARD_OPT_DURATION, RATE(ramp_ns),
     .unit_ns = YARD_NS_PER_S, .def = "1s",
     .help = "connections start over DUR, excluded from the measurement"},
    {.name = "write-size", .form = "BYTES", .type = YARD_OPT_SIZE, RATE(write_size), .min = 1,
     .max = 16 << 20,
     .help = "send the bandwidth in writes of exactly BYTES each, each one when it falls due "
             "(spread evenly; default: every millisecond, the whole messages due, in one write)"},
    {.name = "nodelay", .form = "on|off", .type = YARD_OPT_ENUM, RATE(nodelay),
     .choices = on_off, .def = "off",
     .help = "TCP_NODELAY on every connection (off: Nagle's algorithm coalesces small writes)"},
    {.name = "pacing", .form = "MODE", .type = YARD_OPT_ENUM, RATE(pacing), .choices = pacings,
     .def = "tick",
     .help = "tick: a 1 ms tick; tcpkali: tcpkali 1.2's writes, byte-granular, about 925/s per "
             "connection at 1 connection, fewer with more (docs/load.md)"},
    YARD_OPT_END,
};

/* What common flags mean here. */
static const yard_opt_t rate_notes[] = {
    {.name = "duration", .form = "DUR", .help = "the measured window (required)"},
    {.name = "rate", .form = "R", .help = "not taken, nor --pipeline: --bandwidth sets the pace"},
    YARD_OPT_END,
};

const load_mode_t load_mode_rate = {
    .name = "rate",
    .summary = "the papayaChat load: each connection sends its message at a constant bandwidth",
    .opts = rate_opts,
    .settings_size = sizeof(struct rate_settings),
    .notes = rate_notes,
    .prepare = rate_prepare,
    .run = rate_run,
    .result_size = sizeof(struct rate_result),
    .merge = rate_merge,
    .figures = rate_figures,
    .text_head = rate_text_head,
    .json = rate_json,
};
