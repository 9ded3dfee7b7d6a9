/* counter: the Eve study's shared atomic counter. The count lives in the
 * shared region, so it is exact under the process models too. */
#include <stdatomic.h>
#include <stdio.h>

#include "apps.h"
#include "yard/proto_counter.h"

struct counter_state {
    _Atomic uint64_t value;
};

static int counter_init(void **state, const yard_config_t *cfg, yard_shm_t *shm, char *err,
                        size_t errlen)
{
    struct counter_state *st = yard_shm_alloc(shm, sizeof *st);
    if (!st) {
        snprintf(err, errlen, "counter: shared region exhausted");
        return -1;
    }
    *state = st;
    return 0;
}

static size_t counter_data(void *state, void *session, const uint8_t *in, size_t n,
                           yard_fx_t *fx)
{
    struct counter_state *st = state;
    size_t valid = yard_counter_valid_prefix(in, n);
    uint8_t *out = yard_fx_send_reserve(fx, valid * YARD_COUNTER_REPLY_LEN);
    if (!out)
        return n;
    for (size_t i = 0; i < valid; i++) {
        uint64_t v = in[i] == YARD_COUNTER_INCR
                         ? atomic_fetch_add_explicit(&st->value, 1, memory_order_relaxed) + 1
                         : atomic_load_explicit(&st->value, memory_order_relaxed);
        yard_counter_encode(v, out + i * YARD_COUNTER_REPLY_LEN);
    }
    yard_fx_send_commit(fx, valid * YARD_COUNTER_REPLY_LEN);
    if (valid < n) {
        /* Requests before the bad byte are answered; the rest is dropped. */
        yard_fx_close(fx, "counter: unknown request byte (expected 0x00 read or 0x01 increment)");
    }
    return n;
}

const yard_app_t yard_app_counter = {
    .name = "counter",
    .summary = "shared atomic counter: 0x00 reads, 0x01 increments, 8-byte big-endian replies",
    .init = counter_init,
    .data = counter_data,
};
