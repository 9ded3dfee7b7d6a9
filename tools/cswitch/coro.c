/* The coro kind: the context switch of our own coroutine runtime
 * (yard_coro_ctx_switch, src/coro/), measured raw, without the scheduler: two
 * contexts on one thread ping-pong exactly like the ucontext kinds. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cswitch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "yard/coro.h"

struct coro_state {
    yard_coro_ctx_t main, partner;
    yard_coro_stack_t stack;
    bool quit;
    size_t array_bytes, stride_bytes;
    double *partner_array;
};

static void coro_partner_entry(void *arg)
{
    struct coro_state *s = arg;
    while (!s->quit) {
        yard_cswitch_work(s->partner_array, s->array_bytes, s->stride_bytes);
        yard_coro_ctx_switch(&s->partner, &s->main);
    }
    yard_coro_ctx_switch_final(&s->partner, &s->main);
}

static int coro_start(yard_cswitch_bench_t *b, char *err, size_t errlen)
{
    struct coro_state *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "calloc: %s", strerror(errno));
        return -1;
    }
    s->array_bytes = b->array_bytes;
    s->stride_bytes = b->stride_bytes;
    s->partner_array = yard_cswitch_array_new(b->array_bytes);
    if (!s->partner_array) {
        snprintf(err, errlen, "mmap: %s", strerror(errno));
        free(s);
        return -1;
    }
    int rc = yard_coro_stack_alloc(&s->stack, 0, true);
    if (rc != 0) {
        snprintf(err, errlen, "yard_coro_stack_alloc: %s", strerror(-rc));
        yard_cswitch_array_free(s->partner_array, b->array_bytes);
        free(s);
        return -1;
    }
    yard_coro_ctx_make(&s->partner, s->stack.lo, s->stack.size, coro_partner_entry, s);
    b->partner_tid = 0;
    b->partner_pid = 0;
    b->state = s;
    return 0;
}

static int coro_pingpong(yard_cswitch_bench_t *b, uint64_t n, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    struct coro_state *s = b->state;
    for (uint64_t i = 0; i < n; i++) {
        yard_coro_ctx_switch(&s->main, &s->partner);
        yard_cswitch_work(b->array, b->array_bytes, b->stride_bytes);
    }
    return 0;
}

static int coro_single(yard_cswitch_bench_t *b, uint64_t n, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    for (uint64_t i = 0; i < n; i++)
        yard_cswitch_work(b->array, b->array_bytes, b->stride_bytes);
    return 0;
}

static void coro_stop(yard_cswitch_bench_t *b)
{
    struct coro_state *s = b->state;
    if (!s)
        return;
    s->quit = true;
    yard_coro_ctx_switch(&s->main, &s->partner); /* it leaves through switch_final */
    yard_coro_ctx_destroy(&s->partner);
    yard_coro_ctx_destroy(&s->main);
    yard_coro_stack_free(&s->stack);
    yard_cswitch_array_free(s->partner_array, s->array_bytes);
    free(s);
    b->state = NULL;
}

const yard_cswitch_kind_t yard_cswitch_coro = {
    .name = "coro",
    .what = "our runtime's raw switch, yard_coro_ctx_switch (no syscall)",
    .kernel = false,
    .start = coro_start,
    .pingpong = coro_pingpong,
    .single = coro_single,
    .stop = coro_stop,
};
