/* echo mode: request/response round trips of --size bytes through the
 * engine (closed loop, or open loop at --rate; --pipeline outstanding).
 * Every echoed byte is checked: message seq of connection id carries the
 * pattern (id*131 + seq*7 + i*13) mod 256, so a reply that is stale,
 * shifted, duplicated or corrupt is caught at its first wrong byte. */
#include <string.h>

#include "load.h"

struct echo_conn {
    int id;
    size_t size, rx_off;
};

static uint8_t pattern(int id, uint64_t seq, size_t i)
{
    return (uint8_t)((uint64_t)id * 131u + seq * 7u + i * 13u);
}

static int echo_init(void *priv, int id, const load_opts_t *o, load_result_t *r)
{
    struct echo_conn *c = priv;
    c->id = id;
    c->size = o->size;
    return 0;
}

static size_t echo_request(void *priv, uint64_t seq, uint8_t *buf, uint32_t *tag, load_result_t *r)
{
    struct echo_conn *c = priv;
    for (size_t i = 0; i < c->size; i++)
        buf[i] = pattern(c->id, seq, i);
    return c->size;
}

static int echo_reply(void *priv, uint64_t seq, uint32_t tag, const uint8_t *p, size_t n,
                      size_t *used, load_result_t *r)
{
    struct echo_conn *c = priv;
    size_t take = c->size - c->rx_off < n ? c->size - c->rx_off : n;
    for (size_t j = 0; j < take; j++) {
        uint8_t want = pattern(c->id, seq, c->rx_off + j);
        if (p[j] != want) {
            load_error(r, "connection %d: message %llu: echoed byte %zu differs (0x%02x, "
                          "expected 0x%02x)",
                       c->id, (unsigned long long)seq, c->rx_off + j, p[j], want);
            return -1;
        }
    }
    *used = take;
    c->rx_off += take;
    if (c->rx_off < c->size)
        return 0;
    c->rx_off = 0;
    return 1;
}

static int echo_run(const load_opts_t *o, load_result_t *r)
{
    /* The request buffer holds one message; big messages are rare, and a
     * 64 MiB cap keeps connections x size sane. */
    load_proto_t p = {.priv_size = sizeof(struct echo_conn), .max_request = o->size,
                      .conn_init = echo_init, .request = echo_request, .reply = echo_reply};
    return load_engine_run(o, &p, r);
}

/* Its settings. */
struct echo_settings {
    size_t size; /* bytes per message */
};

static const yard_opt_t echo_opts[] = {
    {.name = "size", .form = "S", .type = YARD_OPT_INT,
     YARD_OPT_FIELD(struct echo_settings, size), .min = 1, .max = 64 << 20, .def = "16",
     .help = "bytes per message"},
    YARD_OPT_END,
};

/* The run reads the size from the common options, where every report
 * shows it. */
static int echo_prepare(load_opts_t *o, char *err, size_t errlen)
{
    o->size = ((const struct echo_settings *)o->settings)->size;
    return 0;
}

const load_mode_t load_mode_echo = {
    .name = "echo",
    .engine = true,
    .summary = "request/response round trips (closed or open loop), every echoed byte checked",
    .opts = echo_opts,
    .settings_size = sizeof(struct echo_settings),
    .prepare = echo_prepare,
    .run = echo_run,
};
