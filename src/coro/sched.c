/* Linux-only: futex, sched_getaffinity. What a port uses instead: docs/portability.md. */
/* The M:N scheduler.
 *
 * M workers (OS threads; the thread calling yard_coro_run is worker 0) run
 * coroutines. Each worker has a Chase-Lev deque of runnable coroutines and a
 * "run next" slot holding the coroutine it woke last, so that a wake-up
 * handed from one coroutine to another runs next, on a warm cache (Go's
 * runnext). Coroutines made runnable from outside the workers (the offload
 * pool, a plain thread calling yard_coro_go or waking a wait queue) go to a
 * global queue, which workers also check every 61 schedules so it cannot
 * starve. A worker with nothing local polls the network without blocking,
 * then steals from random victims. When there is nothing anywhere, the
 * first such worker blocks in the netpoller until an fd event, a timer or
 * new work (readying what it finds onto its own queues: no hand-off to
 * another thread), and any other sleeps on its own futex word, woken only
 * when work is published and it is the first idle worker. Every 61
 * schedules a busy worker also polls (at most once a millisecond), so that
 * a worker that always has something to run still sees the network and
 * the timers.
 *
 * A coroutine that parks or yields switches directly to the next runnable
 * coroutine of its worker (one switch, not two through a scheduler stack);
 * the worker's own stack is only used when there is nothing local to run.
 * What must happen to the coroutine we left (requeue it, complete its park,
 * free its stack) is done by whoever runs next, after the switch, once
 * nothing executes on the old stack any more: see post_switch. */
#define _GNU_SOURCE /* syscall (futex), sched_getaffinity, CPU_COUNT */

#include "sched_int.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "deque.h"
#include "sanitizer.h"

struct sched *sched_active;
static atomic_flag g_running = ATOMIC_FLAG_INIT;
static __thread struct worker *tls_worker;

/* Not inlined, and opaque to the optimiser: code that resumes after a
 * context switch may be on another thread, so a thread-local address
 * computed before the switch must never be reused after it. */
__attribute__((noinline)) struct worker *sched_cur_worker(void)
{
    struct worker *w = tls_worker;
    __asm__ volatile("" : "+r"(w));
    return w;
}

bool yard_coro__on_worker(void)
{
    return sched_cur_worker() != NULL;
}

void sched_futex_wait(atomic_uint *addr, unsigned val)
{
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

void sched_futex_wake(atomic_uint *addr)
{
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void sched_die(const char *what)
{
    fprintf(stderr, "yard_coro: %s\n", what);
    abort();
}

uint64_t yard_coro_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* stacks                                                                    */

void yard_coro__count_stack_mapped(void)
{
    if (sched_active)
        atomic_fetch_add_explicit(&sched_active->n_stacks, 1, memory_order_relaxed);
}

static void stack_get(struct worker *w, yard_coro_stack_t *st)
{
    struct sched *s = sched_active;
    if (w->ncache) {
        *st = w->cache[--w->ncache];
        return;
    }
    pthread_mutex_lock(&s->cache_lock);
    /* Refill half the local cache at once to amortise the lock. */
    while (s->ncache && w->ncache < STACK_CACHE_LOCAL / 2)
        w->cache[w->ncache++] = s->cache[--s->ncache];
    pthread_mutex_unlock(&s->cache_lock);
    if (w->ncache) {
        *st = w->cache[--w->ncache];
        return;
    }
    int err = yard_coro_stack_alloc(st, s->stack_size, s->guard);
    if (err) {
        /* A coroutine that cannot get a stack cannot run at all: like Go's
         * "out of memory", this is fatal. vm.max_map_count is the usual
         * cause with guard pages (two mappings per live stack). */
        fprintf(stderr,
                "yard_coro: cannot map a coroutine stack: %s (live guarded stacks are "
                "limited by vm.max_map_count)\n",
                strerror(-err));
        abort();
    }
    atomic_fetch_add_explicit(&s->n_stacks, 1, memory_order_relaxed);
}

static void stack_put(struct worker *w, yard_coro_stack_t *st)
{
    struct sched *s = sched_active;
    if (w->ncache == STACK_CACHE_LOCAL) {
        pthread_mutex_lock(&s->cache_lock);
        while (s->ncache < STACK_CACHE_GLOBAL && w->ncache > STACK_CACHE_LOCAL / 2)
            s->cache[s->ncache++] = w->cache[--w->ncache];
        pthread_mutex_unlock(&s->cache_lock);
    }
    if (w->ncache < STACK_CACHE_LOCAL)
        w->cache[w->ncache++] = *st;
    else
        yard_coro_stack_free(st);
    st->base = NULL;
}

/* ------------------------------------------------------------------------ */
/* switching                                                                 */

static void coro_main(void *arg);

static void all_remove(struct sched *s, yard_coro_t *c)
{
    struct all_list *l = &s->all[c->all_stripe];
    pthread_mutex_lock(&l->lock);
    if (c->all_prev)
        c->all_prev->all_next = c->all_next;
    else
        l->head = c->all_next;
    if (c->all_next)
        c->all_next->all_prev = c->all_prev;
    pthread_mutex_unlock(&l->lock);
}

static void all_insert(struct sched *s, struct worker *w, yard_coro_t *c)
{
    c->all_stripe = w->id % ALL_STRIPES;
    struct all_list *l = &s->all[c->all_stripe];
    pthread_mutex_lock(&l->lock);
    c->all_prev = NULL;
    c->all_next = l->head;
    if (l->head)
        l->head->all_prev = c;
    l->head = c;
    pthread_mutex_unlock(&l->lock);
    c->listed = true;
}

static void coro_free(yard_coro_t *c)
{
    if (c->listed)
        all_remove(sched_active, c);
    struct worker *w = sched_cur_worker();
    if (w && w->nfree_desc + 1 <= DESC_CACHE) {
        c->next = w->free_desc;
        w->free_desc = c;
        w->nfree_desc++;
        return;
    }
    free(c);
}

void *yard_coro__small_alloc(void)
{
    struct worker *w = sched_cur_worker();
    if (w && w->free_small) {
        void *b = w->free_small;
        w->free_small = *(void **)b;
        w->nfree_small--;
        return b;
    }
    return malloc(YARD_CORO_SMALL);
}

void yard_coro__small_free(void *b)
{
    struct worker *w = sched_cur_worker();
    if (w && w->nfree_small + 1 <= DESC_CACHE) {
        *(void **)b = w->free_small;
        w->free_small = b;
        w->nfree_small++;
        return;
    }
    free(b);
}

/* A zeroed descriptor: the worker's cache first (malloc and free were the
 * largest part of a task's cost once joins ran children inline). */
yard_coro_t *sched_desc_new(struct worker *w)
{
    if (w && w->free_desc) {
        yard_coro_t *c = w->free_desc;
        w->free_desc = c->next;
        w->nfree_desc--;
        memset(c, 0, sizeof *c);
        return c;
    }
    return calloc(1, sizeof(yard_coro_t));
}

void sched_coro_unref(yard_coro_t *c)
{
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
        coro_free(c);
}

/* Runs on the new context right after every switch: completes what the
 * previous coroutine asked for, now that its stack is no longer in use. */
static void post_switch(struct worker *w)
{
    yard_coro_t *p = w->prev;
    if (!p)
        return;
    w->prev = NULL;
    switch (w->prev_action) {
    case ACT_YIELD:
        atomic_store_explicit(&p->state, CS_RUNNABLE, memory_order_relaxed);
        sched_yq_push(w, p);
        break;
    case ACT_PARK: {
        int expected = CS_PARKING;
        if (!atomic_compare_exchange_strong_explicit(&p->state, &expected, CS_PARKED,
                                                     memory_order_acq_rel, memory_order_acquire))
            sched_enqueue(p, true); /* woken while it was still switching away */
        break;
    }
    case ACT_EXIT:
        stack_put(w, &p->stack);
        yard_coro_ctx_destroy(&p->ctx);
        COUNT(w, n_finished);
        atomic_store_explicit(&p->state, CS_DONE, memory_order_relaxed);
        atomic_store_explicit(&p->done, 1, memory_order_release);
        yard_coro_waitq_wake(&p->joinq, INT_MAX);
        sched_coro_unref(p);
        break;
    }
}

/* Gives `to` a stack on first run and marks it running on w. */
static void prepare_run(struct worker *w, yard_coro_t *to)
{
    if (!to->stack.base) {
        stack_get(w, &to->stack);
        yard_coro_ctx_make(&to->ctx, to->stack.lo, to->stack.size, coro_main, to);
        all_insert(sched_active, w, to);
    }
    atomic_store_explicit(&to->state, CS_RUNNING, memory_order_relaxed);
    w->current = to;
}

/* Leaves the current coroutine: `action` says what becomes of it. */
void sched_schedule(int action)
{
    struct sched *s = sched_active;
    struct worker *w = sched_cur_worker();
    yard_coro_t *self = w->current;
    yard_coro_t *next = NULL;
    if (!atomic_load_explicit(&s->stopping, memory_order_relaxed))
        next = sched_find_local(s, w);
    if (!next && action == ACT_YIELD) {
        /* Check a little further before deciding to keep running. */
        if (yard_coro__netpoll_poll_now() > 0)
            next = sched_find_local(s, w);
        if (!next)
            next = sched_steal_work(s, w);
        if (!next)
            return;
    }
    w->prev = self;
    w->prev_action = action;
    yard_coro_ctx_t *to;
    if (next) {
        prepare_run(w, next);
        to = &next->ctx;
    } else {
        w->current = NULL;
        to = &w->sched_ctx;
    }
    if (action == ACT_EXIT) {
        yard_coro_ctx_switch_final(&self->ctx, to);
        return; /* not reached */
    }
    yard_coro_ctx_switch(&self->ctx, to);
    post_switch(sched_cur_worker());
}

static void coro_main(void *arg)
{
    yard_coro_t *c = arg;
    post_switch(sched_cur_worker());
    c->fn(c->arg);
    sched_schedule(ACT_EXIT);
}

static void worker_loop(struct sched *s, struct worker *w)
{
    while (!atomic_load_explicit(&s->stopping, memory_order_acquire)) {
        yard_coro_t *c = sched_find_any(s, w);
        if (!c) {
            sched_worker_idle(s, w);
            continue;
        }
        prepare_run(w, c);
        yard_coro_ctx_switch(&w->sched_ctx, &c->ctx);
        post_switch(w);
    }
}

static void *worker_thread(void *arg)
{
    struct worker *w = arg;
    tls_worker = w;
    worker_loop(sched_active, w);
    tls_worker = NULL;
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* parking                                                                   */

void yard_coro__prepare_park(yard_coro_t *c)
{
    atomic_store_explicit(&c->claim, 0, memory_order_release);
    c->wake_result = 0;
}

bool yard_coro__claim(yard_coro_t *c)
{
    int expected = 0;
    return atomic_compare_exchange_strong_explicit(&c->claim, &expected, 1, memory_order_acq_rel,
                                                   memory_order_relaxed);
}

/* The waker that won the claim makes c runnable. If c is still on its way
 * to sleep (RUNNING before park, or PARKING during the switch) we only mark
 * it RUNNABLE: park() then returns at once, or post_switch requeues it. */
void yard_coro__ready(yard_coro_t *c, int result)
{
    c->wake_result = result;
    for (;;) {
        int st = atomic_load_explicit(&c->state, memory_order_acquire);
        if (st == CS_PARKED) {
            if (atomic_compare_exchange_weak_explicit(&c->state, &st, CS_RUNNABLE,
                                                      memory_order_acq_rel, memory_order_acquire)) {
                sched_enqueue(c, true);
                return;
            }
        } else if (st == CS_RUNNING || st == CS_PARKING) {
            if (atomic_compare_exchange_weak_explicit(&c->state, &st, CS_RUNNABLE,
                                                      memory_order_acq_rel, memory_order_acquire))
                return;
        } else {
            sched_die("ready: coroutine in an impossible state");
        }
    }
}

void yard_coro__park(void)
{
    struct worker *w = sched_cur_worker();
    if (!w || !w->current)
        sched_die("a parking call was made outside a coroutine");
    yard_coro_t *self = w->current;
    COUNT(w, n_parks);
    int expected = CS_RUNNING;
    if (!atomic_compare_exchange_strong_explicit(&self->state, &expected, CS_PARKING,
                                                 memory_order_acq_rel, memory_order_acquire)) {
        /* Already woken: no need to leave. */
        atomic_store_explicit(&self->state, CS_RUNNING, memory_order_relaxed);
        return;
    }
    sched_schedule(ACT_PARK);
}

/* ------------------------------------------------------------------------ */
/* start and stop                                                            */

struct main_arg {
    void (*fn)(void *);
    void *arg;
};

static void main_coro(void *arg)
{
    struct main_arg *m = arg;
    m->fn(m->arg);
    atomic_store(&sched_active->stopping, true); /* seq_cst: pairs with worker_idle's recheck */
    sched_wake_all_workers(sched_active);
}

static unsigned cpus_in_mask(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return (unsigned)CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

/* At exit: a coroutine that never ran (it has no stack and is on no list). */
static void free_if_unstarted(yard_coro_t *c)
{
    if (c && !c->listed)
        free(c);
}

static void sched_free(struct sched *s)
{
    /* Coroutines that never ran are in the run queues (first: a queue may
     * also hold a started one, which the list below frees). */
    for (yard_coro_t *c = s->gq_head, *next; c; c = next) {
        next = c->next;
        free_if_unstarted(c);
    }
    for (unsigned i = 0; i < s->n; i++) {
        struct worker *w = &s->w[i];
        yard_coro_t *c;
        while ((c = deque_pop(&w->dq)))
            free_if_unstarted(c);
        free_if_unstarted(w->runnext);
    }
    for (unsigned i = 0; i < ALL_STRIPES; i++) {
        yard_coro_t *c = s->all[i].head;
        while (c) {
            yard_coro_t *next = c->all_next;
            for (yard_coro_t *in = c->inline_top, *up; in; in = up) {
                up = in->next;
                free(in);
            }
            yard_coro_stack_free(&c->stack);
            yard_coro_ctx_destroy(&c->ctx);
            free(c);
            c = next;
        }
        pthread_mutex_destroy(&s->all[i].lock);
    }
    for (unsigned i = 0; i < s->n; i++) {
        struct worker *w = &s->w[i];
        for (yard_coro_t *c = w->free_desc, *next; c; c = next) {
            next = c->next;
            free(c);
        }
        for (void *b = w->free_small, *next; b; b = next) {
            next = *(void **)b;
            free(b);
        }
        while (w->ncache)
            yard_coro_stack_free(&w->cache[--w->ncache]);
        deque_destroy(&w->dq);
        yard_coro_ctx_destroy(&w->sched_ctx);
    }
    while (s->ncache)
        yard_coro_stack_free(&s->cache[--s->ncache]);
    pthread_mutex_destroy(&s->gq_lock);
    pthread_mutex_destroy(&s->idle_lock);
    pthread_mutex_destroy(&s->cache_lock);
    free(s->w);
    free(s);
}

int yard_coro_run(const yard_coro_opts_t *opts, void (*main_fn)(void *), void *arg)
{
    yard_coro_opts_t o = {0};
    if (opts)
        o = *opts;
    if (atomic_flag_test_and_set(&g_running))
        return -EBUSY;
    int err = -ENOMEM;
    unsigned made = 0; /* workers whose deque exists */
    struct sched *s = calloc(1, sizeof(*s));
    if (!s)
        goto err_flag;
    s->n = o.workers ? o.workers : cpus_in_mask();
    s->stack_size = o.stack_size ? o.stack_size : YARD_CORO_DEFAULT_STACK;
#ifdef YARD_CORO_ASAN
    if (!o.stack_size)
        s->stack_size *= 4;
#endif
    s->guard = !o.no_stack_guard;
    pthread_mutex_init(&s->gq_lock, NULL);
    pthread_mutex_init(&s->idle_lock, NULL);
    pthread_mutex_init(&s->cache_lock, NULL);
    for (unsigned i = 0; i < ALL_STRIPES; i++)
        pthread_mutex_init(&s->all[i].lock, NULL);
    s->w = calloc(s->n, sizeof(*s->w));
    if (!s->w)
        goto err_sched;
    for (; made < s->n; made++) {
        struct worker *w = &s->w[made];
        w->id = made;
        w->rng = 0x9e3779b97f4a7c15ull * (made + 1);
        if (deque_init(&w->dq, 256) != 0)
            goto err_sched;
    }
    sched_active = s;
    err = yard_coro__netpoll_start(o.offload_threads ? o.offload_threads : 2);
    if (err)
        goto err_sched;

    struct main_arg m = {main_fn, arg};
    tls_worker = &s->w[0];
    if (!sched_coro_new(main_coro, &m, 1)) {
        err = -ENOMEM;
        tls_worker = NULL;
        goto err_poll;
    }
    unsigned started = 1;
    for (; started < s->n; started++) {
        int rc = pthread_create(&s->w[started].thread, NULL, worker_thread, &s->w[started]);
        if (rc) {
            fprintf(stderr, "yard_coro: pthread_create: %s (running with %u workers)\n",
                    strerror(rc), started);
            break;
        }
    }
    worker_loop(s, &s->w[0]);
    tls_worker = NULL;
    sched_wake_all_workers(s);
    for (unsigned i = 1; i < started; i++)
        pthread_join(s->w[i].thread, NULL);
    yard_coro__netpoll_stop();
    sched_active = NULL;
    sched_free(s);
    atomic_flag_clear(&g_running);
    return 0;

err_poll:
    yard_coro__netpoll_stop();
err_sched:
    sched_active = NULL;
    if (s->w)
        for (unsigned i = 0; i < made; i++)
            deque_destroy(&s->w[i].dq);
    free(s->w);
    free(s);
err_flag:
    atomic_flag_clear(&g_running);
    return err;
}
