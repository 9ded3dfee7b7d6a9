/* Linux-only: epoll, timerfd. What a port uses instead: docs/portability.md. */
/* chat mode: the chat service's fan-out under load. N connections log in
 * (PASS with NICK = account: <prefix><i> / <password-prefix><prefix><i>,
 * the accounts bench/chat_serve creates), join one channel, and then send
 * --rate messages per second in total, open loop: message k is due at
 * t0 + k/R and is sent by connection k mod N, carrying its due time. Every
 * other member must receive it; the delivery latency, from the due time to
 * the receipt at each member, goes into the histogram (so a stalled server
 * shows in full). At the end the run waits (--timeout) for what is still
 * on its way and counts what never arrived as lost: errors.
 *
 * --tls: each connection's handshake comes first (timed and counted in the
 * report's tls figures); the lines are then sealed on the way out and
 * opened on the way in. */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "load.h"
#include "yard/clock.h"
#include "yard/net.h"
#include "yard/proto_ircline.h"
#include "yard/tls.h"

#define CHAN "#bench"

/* Its settings, filled by its flags. */
struct chat_settings {
    const char *user_prefix;     /* accounts are <prefix><i> */
    const char *password_prefix; /* passwords are <password_prefix><prefix><i> */
};

/* Its part of a result: r->messages counts deliveries, this the messages. */
struct chat_result {
    uint64_t sent;
};

struct cconn {
    int id, fd;
    bool connected, joined;
    char in[65536];
    size_t in_len;
    char out[8192]; /* lines not sent yet (with --tls: not sealed yet) */
    size_t out_len;
    yard_tls_t *tls;     /* --tls */
    yard_buf_t wire;     /* --tls: records the socket has not taken yet */
    bool secured;        /* --tls: the handshake is done */
    uint64_t connect_at; /* --tls: when the TCP connect started */
};

struct chat_run {
    const load_opts_t *o;
    load_result_t *r;
    int ep, tfd;
    struct cconn *c;
    int joined;
    uint64_t delivered, expected;
    uint64_t t0, sent, total; /* the schedule: message k is due at t0 + k * interval */
    double interval;
};

static void queue_line(struct chat_run *cr, struct cconn *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void queue_line(struct chat_run *cr, struct cconn *c, const char *fmt, ...)
{
    bool cut = true;
    size_t n = 0;
    if (sizeof c->out - c->out_len >= 3) {
        va_list ap;
        va_start(ap, fmt);
        n = yard_irc_vline(c->out + c->out_len, sizeof c->out - c->out_len, &cut, fmt, ap);
        va_end(ap);
    }
    if (!n || cut) {
        load_error(cr->r, "connection %d: output queue full (the server does not read)", c->id);
        return;
    }
    c->out_len += n;
}

/* --tls: seal what waits once the handshake is done (moving it on first),
 * and send the records: 0, or -1 when the connection failed. */
static int tls_flush(struct chat_run *cr, struct cconn *c)
{
    if (!c->secured) {
        int h = yard_tls_handshake(c->tls);
        if (h < 0) {
            cr->r->tls_failures++;
            load_error(cr->r, "connection %d: %s", c->id, yard_tls_why(c->tls));
            return -1;
        }
        if (h == 1) {
            c->secured = true;
            load_tls_established(cr->r, c->tls, c->connect_at);
        }
    }
    if (c->secured && c->out_len) {
        if (yard_tls_write(c->tls, (const uint8_t *)c->out, c->out_len) < 0) {
            load_error(cr->r, "connection %d: %s", c->id, yard_tls_why(c->tls));
            return -1;
        }
        cr->r->bytes_sent += c->out_len;
        c->out_len = 0;
    }
    int rc = load_tls_flush(c->tls, &c->wire, c->fd);
    if (rc < 0) {
        load_error(cr->r, "connection %d: send: %s", c->id, strerror(-rc));
        return -1;
    }
    struct epoll_event ev = {.events = EPOLLIN | (rc == 0 ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(cr->ep, EPOLL_CTL_MOD, c->fd, &ev);
    return 0;
}

static int flush(struct chat_run *cr, struct cconn *c)
{
    if (c->tls)
        return tls_flush(cr, c);
    while (c->out_len) {
        ssize_t w = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            break;
        if (w <= 0) {
            load_error(cr->r, "connection %d: send: %s", c->id, strerror(errno));
            return -1;
        }
        cr->r->bytes_sent += (uint64_t)w;
        memmove(c->out, c->out + w, c->out_len - (size_t)w);
        c->out_len -= (size_t)w;
    }
    struct epoll_event ev = {.events = EPOLLIN | (c->out_len ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(cr->ep, EPOLL_CTL_MOD, c->fd, &ev);
    return 0;
}

static int on_line(struct chat_run *cr, struct cconn *c, char *line)
{
    yard_irc_msg_t m;
    char *p = line;
    if (*p == '@') {
        p = strchr(p, ' ');
        if (!p)
            return 0;
    }
    if (!yard_irc_parse(p, &m))
        return 0;
    if (!strcmp(m.cmd, "PING")) {
        queue_line(cr, c, "PONG :%s", m.n ? m.params[0] : "");
    } else if (!strcmp(m.cmd, "001")) {
        queue_line(cr, c, "JOIN " CHAN);
    } else if (!strcmp(m.cmd, "366") && !c->joined) {
        c->joined = true;
        cr->joined++;
    } else if (!strcmp(m.cmd, "464") || !strcmp(m.cmd, "ERROR")) {
        load_error(cr->r, "connection %d: the server refused the login: %s", c->id,
                   m.n ? m.params[m.n - 1] : "");
        return -1;
    } else if (!strcmp(m.cmd, "PRIVMSG") && m.n == 2) {
        unsigned long long due;
        int from;
        unsigned long long k;
        if (sscanf(m.params[1], "%d %llu %llu", &from, &k, &due) == 3) {
            uint64_t now = yard_now_ns();
            yard_hist_record(&cr->r->latency, now > due ? now - due : 0);
            cr->delivered++;
            cr->r->messages++;
            cr->r->end_ns = now;
        }
    }
    return 0;
}

struct line_ctx {
    struct chat_run *cr;
    struct cconn *c;
};

static int line_cb(char *line, void *arg)
{
    struct line_ctx *lc = arg;
    return on_line(lc->cr, lc->c, line);
}

/* Lines that arrived in c->in (n new bytes): handled, and the rest kept. */
static int take_lines(struct chat_run *cr, struct cconn *c, size_t n)
{
    cr->r->bytes_received += n;
    c->in_len += n;
    struct line_ctx lc = {cr, c};
    long off = yard_irc_each_line(c->in, c->in_len, line_cb, &lc);
    if (off < 0)
        return -1;
    memmove(c->in, c->in + off, c->in_len - (size_t)off);
    c->in_len -= (size_t)off;
    return 0;
}

/* --tls: records arrived; what they hold goes to the lines (after the
 * handshake, which tls_flush moves on). */
static int tls_readable(struct chat_run *cr, struct cconn *c)
{
    uint8_t raw[16384];
    for (;;) {
        ssize_t n = read(c->fd, raw, sizeof raw);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0) {
            if (!c->secured)
                cr->r->tls_failures++;
            load_error(cr->r, "connection %d: the server closed it%s", c->id,
                       c->secured ? "" : " during the TLS handshake (does this port speak TLS?)");
            return -1;
        }
        if (yard_tls_feed(c->tls, raw, (size_t)n) < 0) {
            load_error(cr->r, "connection %d: out of memory for TLS records", c->id);
            return -1;
        }
    }
    if (!c->secured && tls_flush(cr, c) < 0)
        return -1;
    while (c->secured) {
        long got = yard_tls_read(c->tls, (uint8_t *)c->in + c->in_len, sizeof c->in - c->in_len);
        if (got == 0)
            break;
        if (got < 0) {
            load_error(cr->r, "connection %d: %s", c->id,
                       got == -ESHUTDOWN ? "the server ended the TLS session"
                                         : yard_tls_why(c->tls));
            return -1;
        }
        if (take_lines(cr, c, (size_t)got) < 0)
            return -1;
    }
    return 0;
}

static int on_readable(struct chat_run *cr, struct cconn *c)
{
    if (c->tls)
        return tls_readable(cr, c);
    for (;;) {
        ssize_t n = read(c->fd, c->in + c->in_len, sizeof c->in - c->in_len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        if (n <= 0) {
            load_error(cr->r, "connection %d: the server closed it", c->id);
            return -1;
        }
        if (take_lines(cr, c, (size_t)n) < 0)
            return -1;
    }
}

static void arm(struct chat_run *cr, uint64_t at)
{
    struct itimerspec its = {.it_value = {.tv_sec = (time_t)(at / YARD_NS_PER_S),
                                          .tv_nsec = (long)(at % YARD_NS_PER_S)}};
    timerfd_settime(cr->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* Wait for events until cond holds or the deadline passes; the timer
 * callback (when given) runs on every timer tick. */
static int pump(struct chat_run *cr, uint64_t deadline, int (*tick)(struct chat_run *, uint64_t),
                bool (*done)(struct chat_run *))
{
    struct epoll_event ev[256];
    while (!done(cr)) {
        uint64_t now = yard_now_ns();
        if (now >= deadline)
            return 1;
        int timeout = (int)((deadline - now) / YARD_NS_PER_MS) + 1;
        int n = epoll_wait(cr->ep, ev, 256, timeout > 100 ? 100 : timeout);
        for (int i = 0; i < n; i++) {
            if (!ev[i].data.ptr) {
                uint64_t ticks;
                if (read(cr->tfd, &ticks, sizeof ticks) < 0 && errno != EAGAIN)
                    return -1;
                if (tick && tick(cr, yard_now_ns()) < 0)
                    return -1;
                continue;
            }
            struct cconn *c = ev[i].data.ptr;
            if (!c->connected) {
                if (load_connected(cr->o, cr->r, cr->ep, c->fd, c, true) < 0)
                    return -1;
                const struct chat_settings *s = cr->o->settings;
                c->connected = true;
                if (cr->o->tls && !(c->tls = yard_tls_client_new(cr->o->tls_ctx,
                                                                 cr->o->tls_host))) {
                    load_error(cr->r, "out of memory for TLS");
                    return -1;
                }
                queue_line(cr, c, "PASS %s%s%d", s->password_prefix, s->user_prefix, c->id);
                queue_line(cr, c, "NICK %s%d", s->user_prefix, c->id);
                queue_line(cr, c, "USER %s%d 0 * :load", s->user_prefix, c->id);
            } else if ((ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && on_readable(cr, c) < 0) {
                return -1;
            }
            if (flush(cr, c) < 0)
                return -1;
        }
    }
    return 0;
}

static bool all_joined(struct chat_run *cr) { return cr->joined == cr->o->connections; }
static bool all_delivered(struct chat_run *cr) { return cr->delivered >= cr->expected; }
static bool never(struct chat_run *cr) { (void)cr; return false; }

/* Send every message that is due. */
static int send_due(struct chat_run *cr, uint64_t now)
{
    while (cr->sent < cr->total) {
        uint64_t due = cr->t0 + (uint64_t)((double)cr->sent * cr->interval);
        if (due > now) {
            arm(cr, due);
            return 0;
        }
        double late = (double)(now - due) / 1e6;
        if (late > cr->r->behind_max_ms)
            cr->r->behind_max_ms = late;
        struct cconn *c = &cr->c[cr->sent % (uint64_t)cr->o->connections];
        queue_line(cr, c, "PRIVMSG " CHAN " :%d %" PRIu64 " %" PRIu64, c->id, cr->sent, due);
        if (flush(cr, c) < 0)
            return -1;
        cr->sent++;
        ((struct chat_result *)cr->r->mode)->sent++;
    }
    return 0;
}

static int chat_run(const load_opts_t *o, load_result_t *r)
{
    struct chat_run cr = {.o = o, .r = r};
    cr.ep = epoll_create1(EPOLL_CLOEXEC);
    cr.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    cr.c = calloc((size_t)o->connections, sizeof *cr.c);
    int status = -1;
    if (cr.ep < 0 || cr.tfd < 0 || !cr.c) {
        load_error(r, "out of memory or descriptors");
        goto out;
    }
    struct epoll_event tev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(cr.ep, EPOLL_CTL_ADD, cr.tfd, &tev);
    for (int i = 0; i < o->connections; i++)
        cr.c[i].fd = -1;
    for (int i = 0; i < o->connections; i++) {
        cr.c[i].id = i;
        cr.c[i].connect_at = yard_now_ns();
        cr.c[i].fd = load_connect(o, r, cr.ep, &cr.c[i]);
        if (cr.c[i].fd < 0)
            goto out;
    }
    /* Log in and join, before the clock starts. */
    int rc = pump(&cr, yard_now_ns() + o->timeout_ns, NULL, all_joined);
    if (rc != 0) {
        if (rc > 0)
            load_error(r, "only %d of %d connections logged in and joined within --timeout",
                       cr.joined, o->connections);
        goto out;
    }
    cr.total = o->duration_ns ? (uint64_t)(o->rate * (double)o->duration_ns / 1e9) : o->messages;
    cr.interval = 1e9 / o->rate;
    cr.sent = 0;
    cr.expected = cr.total * (uint64_t)(o->connections - 1);
    cr.t0 = r->start_ns = yard_now_ns();
    r->target_rate = o->rate;
    if (send_due(&cr, cr.t0) < 0)
        goto out;
    uint64_t window_end = cr.t0 + (uint64_t)((double)cr.total * cr.interval);
    if (pump(&cr, window_end, send_due, never) < 0)
        goto out;
    if (send_due(&cr, yard_now_ns()) < 0)
        goto out;
    /* What is still on its way. */
    rc = pump(&cr, yard_now_ns() + o->timeout_ns, NULL, all_delivered);
    if (rc < 0)
        goto out;
    if (cr.delivered < cr.expected) {
        load_error(r, "%" PRIu64 " of %" PRIu64 " deliveries never arrived within --timeout",
                   cr.expected - cr.delivered, cr.expected);
        r->errors += cr.expected - cr.delivered;
    }
    if (!r->end_ns)
        r->end_ns = yard_now_ns();
    status = 0;
out:
    if (cr.c)
        for (int i = 0; i < o->connections; i++) {
            if (cr.c[i].fd >= 0)
                close(cr.c[i].fd);
            yard_tls_free(cr.c[i].tls);
            yard_buf_free(&cr.c[i].wire);
        }
    free(cr.c);
    if (cr.ep >= 0)
        close(cr.ep);
    if (cr.tfd >= 0)
        close(cr.tfd);
    return status;
}

static int chat_prepare(load_opts_t *o, char *err, size_t errlen)
{
    if (!(o->rate > 0)) {
        snprintf(err, errlen, "chat needs --rate (messages per second over all connections)");
        return -1;
    }
    if (o->connections < 2) {
        snprintf(err, errlen, "chat needs --connections 2 or more (senders are also receivers)");
        return -1;
    }
    if (o->threads != 1) {
        snprintf(err, errlen, "chat runs on one thread (--threads 1)");
        return -1;
    }
    /* Each message is sent when it is due, whatever the replies: there is
     * nothing to pipeline. */
    if (o->pipeline != 1) {
        snprintf(err, errlen, "--pipeline belongs to the request/response modes (echo, counter, "
                              "http), not chat");
        return -1;
    }
    return 0;
}

static void chat_merge(void *into, const void *from, bool first)
{
    ((struct chat_result *)into)->sent += ((const struct chat_result *)from)->sent;
}

/* Its achieved rate is of messages sent, not of deliveries. */
static void chat_figures(load_report_t *rep)
{
    const struct chat_result *cr = rep->r->mode;
    rep->achieved = rep->secs > 0 ? (double)cr->sent / rep->secs : 0;
}

static void chat_text_head(const load_report_t *rep)
{
    const struct chat_result *cr = rep->r->mode;
    load_text_header(rep);
    printf("  sent          %llu messages = %.0f/s (asked for %.0f/s); %llu deliveries = %.0f/s\n",
           (unsigned long long)cr->sent, rep->achieved, rep->r->target_rate,
           (unsigned long long)rep->r->messages, rep->tput);
    load_text_behind(rep);
}

static void chat_json(const load_report_t *rep)
{
    const struct chat_result *cr = rep->r->mode;
    printf("\"messages_sent\": %llu, \"deliveries\": %llu, ", (unsigned long long)cr->sent,
           (unsigned long long)rep->r->messages);
}

static const yard_opt_t chat_opts[] = {
    {.name = "user-prefix", .form = "P", .type = YARD_OPT_STRING,
     YARD_OPT_FIELD(struct chat_settings, user_prefix), .def = "u",
     .help = "accounts are P0, P1, ..."},
    {.name = "password-prefix", .form = "Q", .type = YARD_OPT_STRING,
     YARD_OPT_FIELD(struct chat_settings, password_prefix), .def = "pw-",
     .help = "passwords are QP0, QP1, ..."},
    YARD_OPT_END,
};

/* What common flags mean here. */
static const yard_opt_t chat_notes[] = {
    {.name = "rate", .form = "R", .help = "messages per second over all connections (required)"},
    {.name = "messages", .form = "M", .help = "messages in all (instead of --duration)"},
    {.name = "pipeline", .form = "K", .help = "not taken: each message leaves when it is due"},
    {.name = "threads", .form = "T", .help = "1 only"},
    YARD_OPT_END,
};

const load_mode_t load_mode_chat = {
    .name = "chat",
    .summary = "the chat service's fan-out: N logged-in members of one channel, --rate "
               "messages/s in total, delivery latency at every other member",
    .opts = chat_opts,
    .settings_size = sizeof(struct chat_settings),
    .notes = chat_notes,
    .prepare = chat_prepare,
    .run = chat_run,
    .result_size = sizeof(struct chat_result),
    .merge = chat_merge,
    .figures = chat_figures,
    .text_head = chat_text_head,
    .json = chat_json,
};
