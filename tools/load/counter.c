/* Linux-only: epoll. What a port uses instead: docs/portability.md. */
/* counter mode: the Eve atomic counter, through the engine (closed loop, or
 * open loop at --rate; --pipeline outstanding per connection): 0x00 reads
 * with probability --read-ratio, 0x01 increments otherwise. Every reply is checked: on one connection a read
 * never sees the count go back and an increment always sees it go up. At
 * the end the count must equal its start plus the increments sent, which
 * assumes yard-load is the only writer while it runs. With --tls the
 * engine seals and opens every request (engine.c), and the two reads of
 * the count speak TLS too. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "load.h"
#include "yard/clock.h"
#include "yard/proto_counter.h"

/* Its settings: filled by its flags and, before the run, the count;
 * read-only while threads run. */
struct counter_settings {
    double read_ratio;      /* share of reads */
    uint64_t count_initial; /* the count before the run (replies never go below it) */
};

/* Its part of a result. */
struct counter_result {
    uint64_t increments; /* sent */
    uint64_t count_initial, count_final;
    bool count_checked;  /* the count was read after the run (the merged result) */
};

struct cconn {
    int id;
    double read_ratio;
    uint64_t last, rng;
    size_t rx_off;
    uint8_t rx[YARD_COUNTER_REPLY_LEN];
};

/* xorshift64*: reproducible per connection, cheap. */
static double next_uniform(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (double)((*s * 2685821657736338717ull) >> 11) / (double)(1ull << 53);
}

/* One blocking request on a fresh connection (over TLS with --tls): the
 * count now. */
static int counter_read(const load_opts_t *o, load_result_t *r, uint64_t *value)
{
    const char *call = "";
    int fd = yard_connect(&o->target, false, &call);
    if (fd < 0) {
        char err[256];
        yard_net_message(err, sizeof err, &o->target, call, fd);
        load_error(r, "%s", err);
        return -1;
    }
    /* A server that answers short must not hang us: --timeout bounds it. */
    struct timeval tv = {.tv_sec = (time_t)(o->timeout_ns / YARD_NS_PER_S),
                         .tv_usec = (suseconds_t)(o->timeout_ns % YARD_NS_PER_S / 1000)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    uint8_t req = YARD_COUNTER_READ, rep[YARD_COUNTER_REPLY_LEN];
    size_t got = 0;
    if (o->tls) {
        char why[256];
        int rc = load_tls_request(o, fd, &req, 1, rep, sizeof rep, why, sizeof why);
        close(fd);
        if (rc < 0) {
            load_error(r, "reading the counter from %s over TLS: %s", o->target_text, why);
            return -1;
        }
        *value = yard_counter_reply_value(rep);
        return 0;
    }
    errno = 0;
    int rc = yard_write_all(fd, &req, 1);
    if (rc < 0) {
        errno = -rc; /* what the message below tells */
        goto fail;
    }
    while (got < sizeof rep) {
        ssize_t n = read(fd, rep + got, sizeof rep - got);
        /* EINTR: the ring's task work can interrupt a read that has a
         * timeout (SO_RCVTIMEO reads are not restarted): read again. */
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            goto fail;
        got += (size_t)n;
    }
    close(fd);
    *value = yard_counter_reply_value(rep);
    return 0;
fail:
    load_error(r, "reading the counter from %s: %s", o->target_text,
               errno == EAGAIN ? "no complete reply within --timeout"
               : errno         ? strerror(errno)
                               : "connection closed");
    close(fd);
    return -1;
}

static int counter_init(void *priv, int id, const load_opts_t *o, load_result_t *r)
{
    const struct counter_settings *s = o->settings;
    struct cconn *c = priv;
    c->id = id;
    c->read_ratio = s->read_ratio;
    c->last = s->count_initial;
    c->rng = 0x9E3779B97F4A7C15ull * (uint64_t)(id + 1);
    return 0;
}

static size_t counter_request(void *priv, uint64_t seq, uint8_t *buf, uint32_t *tag,
                              load_result_t *r)
{
    struct cconn *c = priv;
    uint8_t op = next_uniform(&c->rng) < c->read_ratio ? YARD_COUNTER_READ : YARD_COUNTER_INCR;
    if (op == YARD_COUNTER_INCR)
        ((struct counter_result *)r->mode)->increments++;
    buf[0] = op;
    *tag = op;
    return 1;
}

/* Replies come in request order: a read never sees the count go back, an
 * increment always sees it go up (other connections only add). */
static int counter_reply(void *priv, uint64_t seq, uint32_t op, const uint8_t *p, size_t n,
                         size_t *used, load_result_t *r)
{
    struct cconn *c = priv;
    size_t take = sizeof c->rx - c->rx_off < n ? sizeof c->rx - c->rx_off : n;
    memcpy(c->rx + c->rx_off, p, take);
    *used = take;
    c->rx_off += take;
    if (c->rx_off < sizeof c->rx)
        return 0;
    c->rx_off = 0;
    uint64_t v = yard_counter_reply_value(c->rx);
    if (op == YARD_COUNTER_INCR ? v <= c->last : v < c->last) {
        load_error(r, "connection %d: %s answered %llu after %llu was seen", c->id,
                   op == YARD_COUNTER_INCR ? "an increment" : "a read", (unsigned long long)v,
                   (unsigned long long)c->last);
        return -1;
    }
    c->last = v;
    return 1;
}

static int counter_run(const load_opts_t *o, load_result_t *r)
{
    load_proto_t p = {.priv_size = sizeof(struct cconn), .max_request = 1,
                      .conn_init = counter_init, .request = counter_request,
                      .reply = counter_reply};
    return load_engine_run(o, &p, r);
}

/* Around the whole run (every thread): the count before, and after it the
 * exact check, which assumes yard-load is the only writer while it runs. */
static int counter_before(load_opts_t *o, load_result_t *r)
{
    struct counter_settings *s = o->settings;
    return counter_read(o, r, &s->count_initial);
}

static int counter_after(const load_opts_t *o, load_result_t *r)
{
    const struct counter_settings *s = o->settings;
    struct counter_result *cr = r->mode;
    uint64_t final;
    if (counter_read(o, r, &final) < 0)
        return -1;
    cr->count_initial = s->count_initial;
    cr->count_final = final;
    cr->count_checked = true;
    /* A request that failed may or may not have been counted: the exact
     * check holds for error-free runs. */
    if (!r->errors && final != s->count_initial + cr->increments) {
        load_error(r, "the count is %llu, expected %llu (start) + %llu (increments sent)",
                   (unsigned long long)final, (unsigned long long)s->count_initial,
                   (unsigned long long)cr->increments);
        r->errors++;
    }
    return 0;
}

static void counter_merge(void *into, const void *from, bool first)
{
    ((struct counter_result *)into)->increments +=
        ((const struct counter_result *)from)->increments;
}

static void counter_text_head(const load_report_t *rep)
{
    const struct counter_settings *s = rep->o->settings;
    const struct counter_result *cr = rep->r->mode;
    load_text_head(rep);
    if (cr->count_checked)
        printf("  count         %llu -> %llu with %llu increments (read ratio %.2f)\n",
               (unsigned long long)cr->count_initial, (unsigned long long)cr->count_final,
               (unsigned long long)cr->increments, s->read_ratio);
}

static void counter_json(const load_report_t *rep)
{
    const struct counter_settings *s = rep->o->settings;
    const struct counter_result *cr = rep->r->mode;
    if (cr->count_checked)
        printf("\"read_ratio\": %.4f, \"increments\": %llu, \"count_initial\": %llu, "
               "\"count_final\": %llu, ",
               s->read_ratio, (unsigned long long)cr->increments,
               (unsigned long long)cr->count_initial, (unsigned long long)cr->count_final);
}

static int parse_read_ratio(const char *text, void *field, char *err, size_t errlen)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !(v >= 0 && v <= 1)) {
        snprintf(err, errlen, "expected a number from 0 to 1, got '%s'", text);
        return -1;
    }
    *(double *)field = v;
    return 0;
}

static const yard_opt_t counter_opts[] = {
    {.name = "read-ratio", .form = "R", .type = YARD_OPT_CUSTOM,
     YARD_OPT_FIELD(struct counter_settings, read_ratio), .parse = parse_read_ratio, .def = "0.5",
     .help = "share of reads, 0..1"},
    YARD_OPT_END,
};

const load_mode_t load_mode_counter = {
    .name = "counter",
    .engine = true,
    .summary = "the Eve atomic counter: reads and increments, every reply and the final count "
               "checked",
    .opts = counter_opts,
    .settings_size = sizeof(struct counter_settings),
    .run = counter_run,
    .before = counter_before,
    .after = counter_after,
    .result_size = sizeof(struct counter_result),
    .merge = counter_merge,
    .text_head = counter_text_head,
    .json = counter_json,
};
