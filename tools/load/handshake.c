/* Linux-only: epoll. What a port uses instead: docs/portability.md. */
/* handshake mode: what a new connection costs. A round is: connect, the TLS
 * handshake (with --tls), one echo round trip of --size bytes, close. Closed
 * loop: --connections rounds in flight, each followed by the next. Open loop
 * (--rate R): a round starts every 1/R s whatever the server does, at most
 * --connections in flight; its latency runs from its due time, and a round
 * that could not start for want of a slot makes the generator late (as the
 * engine's open loop does). --tls-resume on offers the last session a round
 * received to the next rounds (resumed handshakes: no certificate, no
 * private-key work on the server). Every echoed byte is checked. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "load.h"
#include "yard/buf.h"
#include "yard/clock.h"
#include "yard/tls.h"

enum phase { IDLE, CONNECTING, HANDSHAKE, ECHO };

struct round {
    enum phase phase;
    int fd;
    yard_tls_t *tls;
    yard_buf_t wire; /* records or bytes the socket has not taken yet */
    uint64_t started, connect_at;
    size_t got;      /* echoed bytes checked */
    uint64_t seq;
};

struct hs_settings {
    size_t size;
    int resume;
};

struct hs {
    const load_opts_t *o;
    const struct hs_settings *set;
    load_result_t *r;
    int ep;
    struct round *rounds;
    int inflight;
    uint64_t t0, stop_at, started, next_seq;
    double interval; /* open loop: ns between two rounds */
    yard_tls_session_t *session;
    uint8_t buf[65536];
};

static uint8_t pattern(uint64_t seq, size_t i) { return (uint8_t)(seq * 7u + i * 13u + 1u); }

static void end_round(struct hs *h, struct round *c)
{
    if (c->fd >= 0) {
        epoll_ctl(h->ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
    }
    yard_tls_free(c->tls);
    yard_buf_free(&c->wire);
    *c = (struct round){.phase = IDLE, .fd = -1};
    h->inflight--;
}

static void failed(struct hs *h, struct round *c, const char *why)
{
    if (!h->r->first_error[0])
        load_error(h->r, "round %llu: %s", (unsigned long long)c->seq, why);
    h->r->errors++;
    if (c->tls && c->phase == HANDSHAKE)
        h->r->tls_failures++;
    end_round(h, c);
}

/* Whether more rounds start: a count per slot, or a duration. */
static bool more(const struct hs *h, uint64_t now)
{
    if (h->o->duration_ns)
        return now < h->stop_at;
    return h->started < h->o->messages * (uint64_t)h->o->connections;
}

static void watch(struct hs *h, struct round *c, uint32_t events, int op)
{
    struct epoll_event ev = {.events = events, .data.ptr = c};
    epoll_ctl(h->ep, op, c->fd, &ev);
}

static void start_round(struct hs *h, struct round *c, uint64_t due)
{
    const char *call = "";
    *c = (struct round){.phase = CONNECTING, .fd = -1, .started = due,
                        .connect_at = yard_now_ns(), .seq = h->next_seq++};
    h->started++;
    h->inflight++;
    c->fd = yard_connect(&h->o->target, true, &call);
    if (c->fd < 0) {
        char err[256];
        yard_net_message(err, sizeof err, &h->o->target, call, c->fd);
        failed(h, c, err);
        return;
    }
    watch(h, c, EPOLLOUT, EPOLL_CTL_ADD);
}

/* Send what waits: 1 all gone, 0 the socket is full, -1 failed. */
static int flush(struct hs *h, struct round *c)
{
    int rc = load_tls_flush(c->tls, &c->wire, c->fd);
    return rc < 0 ? -1 : rc;
}

/* The echo request, sealed with TLS, queued. */
static int send_request(struct hs *h, struct round *c)
{
    size_t n = h->set->size;
    uint8_t *p = c->tls ? h->buf : yard_buf_reserve(&c->wire, n);
    if (!p)
        return -1;
    for (size_t i = 0; i < n; i++)
        p[i] = pattern(c->seq, i);
    h->r->bytes_sent += n;
    if (c->tls)
        return yard_tls_write(c->tls, p, n) < 0 ? -1 : 0;
    yard_buf_commit(&c->wire, n);
    return 0;
}

/* The round's echo came back whole: timed, its session kept to resume. */
static void round_done(struct hs *h, struct round *c)
{
    uint64_t now = yard_now_ns();
    yard_hist_record(&h->r->latency, now - c->started);
    h->r->messages++;
    h->r->end_ns = now;
    if (c->tls && h->set->resume) {
        yard_tls_session_t *s = yard_tls_session_take(c->tls);
        if (s) {
            yard_tls_session_free(h->session);
            h->session = s;
        }
    }
    /* A clean end (close_notify): OpenSSL marks the session of a connection
     * freed without one as not to be resumed. */
    if (c->tls) {
        yard_tls_close_notify(c->tls);
        flush(h, c);
    }
    end_round(h, c);
}

/* Plaintext (or bytes) of the echo: checked. -1 on a wrong byte. */
static int check(struct hs *h, struct round *c, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++, c->got++)
        if (c->got >= h->set->size || p[i] != pattern(c->seq, c->got))
            return -1;
    h->r->bytes_received += n;
    return 0;
}

static void handshake_step(struct hs *h, struct round *c)
{
    int st = yard_tls_handshake(c->tls);
    if (st < 0) {
        failed(h, c, yard_tls_why(c->tls));
        return;
    }
    if (st == 1) {
        load_tls_established(h->r, c->tls, c->connect_at);
        c->phase = ECHO;
        if (send_request(h, c) < 0) {
            failed(h, c, "out of memory");
            return;
        }
    }
    int f = flush(h, c);
    if (f < 0)
        failed(h, c, "send failed");
    else
        watch(h, c, f ? EPOLLIN : EPOLLIN | EPOLLOUT, EPOLL_CTL_MOD);
}

static void on_event(struct hs *h, struct round *c, uint32_t events)
{
    if (c->phase == CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err) {
            failed(h, c, strerror(err));
            return;
        }
        yard_set_nodelay(c->fd);
        if (h->o->tls) {
            c->tls = yard_tls_client_new(h->o->tls_ctx, h->o->tls_host);
            if (!c->tls) {
                failed(h, c, "out of memory");
                return;
            }
            yard_tls_session_offer(c->tls, h->session);
            c->phase = HANDSHAKE;
            handshake_step(h, c);
            return;
        }
        c->phase = ECHO;
        if (send_request(h, c) < 0) {
            failed(h, c, "out of memory");
            return;
        }
    }
    if (events & EPOLLOUT) {
        int f = flush(h, c);
        if (f < 0) {
            failed(h, c, "send failed");
            return;
        }
        watch(h, c, f ? EPOLLIN : EPOLLIN | EPOLLOUT, EPOLL_CTL_MOD);
    }
    if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
        return;
    ssize_t n = read(c->fd, h->buf, sizeof h->buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        failed(h, c, c->phase == HANDSHAKE ? "the server closed it during the TLS handshake"
                                           : "the server closed it before the echo");
        return;
    }
    if (!c->tls) {
        if (check(h, c, h->buf, (size_t)n) < 0)
            failed(h, c, "the echo differs");
        else if (c->got == h->set->size)
            round_done(h, c);
        return;
    }
    if (yard_tls_feed(c->tls, h->buf, (size_t)n) < 0) {
        failed(h, c, "out of memory");
        return;
    }
    if (c->phase == HANDSHAKE) {
        handshake_step(h, c);
        if (c->phase != ECHO)
            return;
    }
    for (;;) {
        long got = yard_tls_read(c->tls, h->buf, sizeof h->buf);
        if (got == 0)
            break;
        if (got < 0 || check(h, c, h->buf, (size_t)got) < 0) {
            failed(h, c, got < 0 ? yard_tls_why(c->tls) : "the echo differs");
            return;
        }
        if (c->got == h->set->size) {
            round_done(h, c);
            return;
        }
    }
}

static struct round *free_slot(struct hs *h)
{
    for (int i = 0; i < h->o->connections; i++)
        if (h->rounds[i].phase == IDLE)
            return &h->rounds[i];
    return NULL;
}

/* Start what is due: every free slot (closed loop), or the rounds whose
 * time has come (open loop). The time of the next due round, or 0. */
static uint64_t start_due(struct hs *h, uint64_t now)
{
    struct round *c;
    if (h->interval <= 0) {
        while (more(h, now) && (c = free_slot(h)))
            start_round(h, c, now);
        return 0;
    }
    for (;;) {
        uint64_t due = h->t0 + (uint64_t)((double)h->started * h->interval);
        if (!more(h, due) || due > now)
            return more(h, due) ? due : 0;
        if (!(c = free_slot(h))) {
            double late = (double)(now - due) / 1e6;
            if (late > h->r->behind_max_ms)
                h->r->behind_max_ms = late;
            return 0;
        }
        start_round(h, c, due);
    }
}

static int hs_run(const load_opts_t *o, load_result_t *r)
{
    struct hs *h = calloc(1, sizeof *h);
    if (!h) {
        load_error(r, "out of memory");
        return -1;
    }
    h->o = o;
    h->set = o->settings;
    h->r = r;
    h->ep = epoll_create1(EPOLL_CLOEXEC);
    h->rounds = calloc((size_t)o->connections, sizeof *h->rounds);
    int status = -1;
    if (h->ep < 0 || !h->rounds) {
        load_error(r, "out of memory or descriptors");
        goto out;
    }
    for (int i = 0; i < o->connections; i++)
        h->rounds[i] = (struct round){.phase = IDLE, .fd = -1};
    if (o->rate > 0) {
        h->interval = 1e9 / o->rate;
        r->target_rate = o->rate;
    }
    h->t0 = r->start_ns = r->end_ns = yard_now_ns();
    h->stop_at = o->duration_ns ? h->t0 + o->duration_ns : UINT64_MAX;
    uint64_t last_progress = h->t0;
    struct epoll_event ev[256];
    for (;;) {
        uint64_t now = yard_now_ns(), next = start_due(h, now);
        if (!h->inflight && !next && !more(h, now))
            break;
        int ms = 100;
        if (next)
            ms = next > now ? (int)((next - now) / 1000000) : 0;
        int n = epoll_wait(h->ep, ev, 256, ms > 100 ? 100 : ms);
        if (n < 0 && errno != EINTR) {
            load_error(r, "epoll_wait: %s", strerror(errno));
            goto out;
        }
        for (int i = 0; i < n; i++)
            on_event(h, ev[i].data.ptr, ev[i].events);
        if (n > 0)
            last_progress = yard_now_ns();
        else if (h->inflight && yard_now_ns() - last_progress > o->timeout_ns) {
            load_error(r, "no progress for %.1f s (--timeout): %d rounds in flight",
                       (double)o->timeout_ns / 1e9, h->inflight);
            r->errors += (uint64_t)h->inflight;
            break;
        }
    }
    status = 0;
out:
    for (int i = 0; h->rounds && i < o->connections; i++)
        if (h->rounds[i].phase != IDLE)
            end_round(h, &h->rounds[i]);
    yard_tls_session_free(h->session);
    if (h->ep >= 0)
        close(h->ep);
    free(h->rounds);
    free(h);
    return status;
}

static const yard_opt_choice_t on_off[] = {YARD_OPT_CHOICE("on", 1), YARD_OPT_CHOICE("off", 0),
                                           YARD_OPT_CHOICES_END};

static const yard_opt_t hs_opts[] = {
    {.name = "size", .form = "S", .type = YARD_OPT_INT, YARD_OPT_FIELD(struct hs_settings, size),
     .min = 1, .max = 1 << 20, .def = "16", .help = "bytes of each round's echo"},
    {.name = "tls-resume", .form = "on|off", .type = YARD_OPT_ENUM,
     YARD_OPT_FIELD(struct hs_settings, resume), .choices = on_off, .def = "off",
     .help = "with --tls: offer the session the last round received to the next ones "
             "(resumed handshakes), or make every handshake a full one"},
    YARD_OPT_END,
};

static const yard_opt_t hs_notes[] = {
    {.name = "connections", .form = "N",
     .help = "rounds in flight at most (closed loop: always; open loop: a cap)"},
    {.name = "messages", .form = "M", .help = "rounds per connection slot (or --duration)"},
    {.name = "rate", .form = "R", .help = "open loop: R rounds started per second"},
    YARD_OPT_END,
};

static int hs_prepare(load_opts_t *o, char *err, size_t errlen)
{
    const struct hs_settings *s = o->settings;
    o->size = s->size;
    if (s->resume && !o->tls) {
        snprintf(err, errlen, "--tls-resume goes with --tls");
        return -1;
    }
    if (o->pipeline > 1 || o->threads > 1) {
        snprintf(err, errlen, "handshake: one round per slot, one thread (--pipeline 1, "
                              "--threads 1)");
        return -1;
    }
    return 0;
}

static void hs_figures(load_report_t *rep)
{
    rep->unit = "rounds/s";
}

const load_mode_t load_mode_handshake = {
    .name = "handshake",
    .summary = "connect, TLS handshake (--tls), one echo, close: rounds/s and their latency",
    .opts = hs_opts,
    .notes = hs_notes,
    .settings_size = sizeof(struct hs_settings),
    .prepare = hs_prepare,
    .run = hs_run,
    .figures = hs_figures,
};
