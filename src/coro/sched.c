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

#include "internal.h"

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

enum after_switch { ACT_NONE, ACT_YIELD, ACT_PARK, ACT_EXIT };

#define STACK_CACHE_LOCAL 16
/* Finished descriptors a worker keeps for its next spawns (none under ASan,
 * so that a use after free is still caught). */
#ifdef YARD_CORO_ASAN
#define DESC_CACHE 0u
#else
#define DESC_CACHE 64u
#endif
#define STACK_CACHE_GLOBAL 256
#define ALL_STRIPES 16
#define GLOBAL_QUEUE_EVERY 61
#define POLL_EVERY_NS 1000000ull /* a busy worker's own look at the network */
/* ... and a worker that keeps running joined children inline: it passes no
 * scheduling point at all, so it looks more often (measured: echo p50 under
 * a fib(35) background, docs/results.md). */
#define INLINE_POLL_EVERY_NS 200000ull

/* Relaxed per-worker counters: each written by its own worker only. */
#define COUNT(w, field)                                                                            \
    atomic_store_explicit(&(w)->field,                                                             \
                          atomic_load_explicit(&(w)->field, memory_order_relaxed) + 1,             \
                          memory_order_relaxed)

struct worker {
    unsigned id;
    pthread_t thread;
    yard_coro_ctx_t sched_ctx;
    struct deque dq;
    yard_coro_t *runnext;
    /* Coroutines that yielded, FIFO, owner only: the deque's owner end is
     * LIFO, so a yielder pushed there would run again before older work. */
    yard_coro_t *yq_head, *yq_tail;
    yard_coro_t *current;
    yard_coro_t *prev; /* the coroutine just switched away from ... */
    int prev_action;   /* ... and what to do with it */
    unsigned tick, inline_tick;
    uint64_t last_poll_ns;
    uint64_t rng;
    _Alignas(64) atomic_uint futex; /* 1 while asleep */
    struct worker *idle_next;
    bool in_idle_list;
    unsigned ncache;
    yard_coro_stack_t cache[STACK_CACHE_LOCAL];
    yard_coro_t *free_desc; /* linked through next */
    unsigned nfree_desc;
    void *free_small; /* YARD_CORO_SMALL-byte blocks, linked through their first word */
    unsigned nfree_small;
    _Atomic uint64_t n_spawned, n_finished, n_steals, n_parks, n_sleeps, n_polls, n_inlined;
};

struct all_list {
    pthread_mutex_t lock;
    yard_coro_t *head;
};

struct sched {
    unsigned n;
    struct worker *w;
    size_t stack_size;
    bool guard;
    atomic_bool stopping;

    pthread_mutex_t gq_lock;
    yard_coro_t *gq_head, *gq_tail;
    atomic_size_t gq_len;

    pthread_mutex_t idle_lock;
    struct worker *idle;
    atomic_uint nidle;
    atomic_bool polling; /* a worker blocks in the netpoller (not in nidle) */

    pthread_mutex_t cache_lock;
    unsigned ncache;
    yard_coro_stack_t cache[STACK_CACHE_GLOBAL];

    struct all_list all[ALL_STRIPES];
    atomic_uint all_seq;
    _Atomic uint64_t n_external_spawned, n_stacks;
};

static struct sched *g_sched;
static atomic_flag g_running = ATOMIC_FLAG_INIT;
static __thread struct worker *tls_worker;

/* Not inlined, and opaque to the optimiser: code that resumes after a
 * context switch may be on another thread, so a thread-local address
 * computed before the switch must never be reused after it. */
__attribute__((noinline)) static struct worker *cur_worker(void)
{
    struct worker *w = tls_worker;
    __asm__ volatile("" : "+r"(w));
    return w;
}

bool yard_coro__on_worker(void)
{
    return cur_worker() != NULL;
}

static void futex_wait(atomic_uint *addr, unsigned val)
{
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(atomic_uint *addr)
{
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void die(const char *what)
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
    if (g_sched)
        atomic_fetch_add_explicit(&g_sched->n_stacks, 1, memory_order_relaxed);
}

static void stack_get(struct worker *w, yard_coro_stack_t *st)
{
    struct sched *s = g_sched;
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
    struct sched *s = g_sched;
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
/* run queues                                                                */

static void gq_push(struct sched *s, yard_coro_t *c)
{
    c->next = NULL;
    pthread_mutex_lock(&s->gq_lock);
    if (s->gq_tail)
        s->gq_tail->next = c;
    else
        s->gq_head = c;
    s->gq_tail = c;
    atomic_fetch_add_explicit(&s->gq_len, 1, memory_order_relaxed);
    pthread_mutex_unlock(&s->gq_lock);
}

/* Takes one coroutine for the caller and moves up to `batch` more into the
 * worker's deque, so a burst from the netpoller spreads out in one lock. */
static yard_coro_t *gq_pop(struct sched *s, struct worker *w, unsigned batch)
{
    if (atomic_load_explicit(&s->gq_len, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_lock(&s->gq_lock);
    yard_coro_t *c = s->gq_head;
    if (c) {
        s->gq_head = c->next;
        size_t taken = 1;
        while (w && batch-- && s->gq_head) {
            yard_coro_t *more = s->gq_head;
            s->gq_head = more->next;
            if (deque_push(&w->dq, more) != 0) {
                more->next = s->gq_head;
                s->gq_head = more;
                break;
            }
            taken++;
        }
        if (!s->gq_head)
            s->gq_tail = NULL;
        atomic_fetch_sub_explicit(&s->gq_len, taken, memory_order_relaxed);
    }
    pthread_mutex_unlock(&s->gq_lock);
    return c;
}

/* Wakes one sleeping worker if there is one. The read-modify-write on nidle
 * (instead of a plain load) orders our earlier publication of work with a
 * worker's registration as idle: either it sees our work when it rechecks,
 * or we see it in the idle count. */
static void wake_idle_worker(struct sched *s)
{
    /* A fence and a plain load, not a read-modify-write: this runs on
     * every spawn, and an RMW would move nidle's cache line to this core
     * each time (two busy workers spawning pass it back and forth). The
     * idle side fences too (worker_idle), so one of the two sees the other:
     * the store-buffering pattern with a seq_cst fence on each side. */
    yard_coro__fence();
    if (atomic_load_explicit(&s->nidle, memory_order_relaxed) == 0) {
        /* Maybe a worker sleeps in the netpoller instead: it takes the work. */
        yard_coro__netpoll_wake_fenced();
        return;
    }
    pthread_mutex_lock(&s->idle_lock);
    struct worker *w = s->idle;
    if (w) {
        s->idle = w->idle_next;
        w->in_idle_list = false;
        atomic_fetch_sub_explicit(&s->nidle, 1, memory_order_seq_cst);
    }
    pthread_mutex_unlock(&s->idle_lock);
    if (w) {
        atomic_store_explicit(&w->futex, 0, memory_order_release);
        futex_wake(&w->futex);
    }
}

static void wake_all_workers(struct sched *s)
{
    yard_coro__fence(); /* the caller's store (stopping) before the idle count's load */
    while (atomic_load(&s->nidle))
        wake_idle_worker(s);
    yard_coro__netpoll_wake();
}

static void local_push(struct sched *s, struct worker *w, yard_coro_t *c)
{
    if (deque_push(&w->dq, c) != 0)
        gq_push(s, c); /* out of memory growing the deque: the global queue has no limit */
    wake_idle_worker(s);
}

/* Makes c runnable on the calling thread's worker, or globally. */
static void enqueue(yard_coro_t *c, bool as_next)
{
    struct sched *s = g_sched;
    struct worker *w = cur_worker();
    if (!w) {
        gq_push(s, c);
        wake_idle_worker(s);
        return;
    }
    if (as_next) {
        yard_coro_t *old = w->runnext;
        w->runnext = c;
        if (!old) {
            wake_idle_worker(s);
            return;
        }
        c = old;
    }
    local_push(s, w, c);
}

static yard_coro_t *steal_work(struct sched *s, struct worker *w)
{
    if (s->n < 2)
        return NULL;
    for (int round = 0; round < 2; round++) {
        w->rng ^= w->rng << 13;
        w->rng ^= w->rng >> 7;
        w->rng ^= w->rng << 17;
        unsigned start = (unsigned)(w->rng % s->n);
        for (unsigned i = 0; i < s->n; i++) {
            struct worker *v = &s->w[(start + i) % s->n];
            if (v == w)
                continue;
            yard_coro_t *c = deque_steal(&v->dq);
            if (c) {
                COUNT(w, n_steals);
                return c;
            }
        }
    }
    return NULL;
}

static yard_coro_t *yq_pop(struct worker *w)
{
    yard_coro_t *c = w->yq_head;
    if (c) {
        w->yq_head = c->next;
        if (!w->yq_head)
            w->yq_tail = NULL;
    }
    return c;
}

static void yq_push(struct worker *w, yard_coro_t *c)
{
    c->next = NULL;
    if (w->yq_tail)
        w->yq_tail->next = c;
    else
        w->yq_head = c;
    w->yq_tail = c;
}

/* The cheap part of the search: what a parking coroutine may switch to
 * directly. */
static yard_coro_t *find_local(struct sched *s, struct worker *w)
{
    yard_coro_t *c;
    if (++w->tick % GLOBAL_QUEUE_EVERY == 0) {
        /* Fairness: the global queue, the yielders and the network get a
         * turn even when the local queue never runs dry; the network at
         * most once a millisecond, so that a yield stays a switch and not a
         * system call. */
        uint64_t now = yard_coro_now_ns();
        if (now - w->last_poll_ns >= POLL_EVERY_NS) {
            w->last_poll_ns = now;
            yard_coro__netpoll_poll_now();
        }
        if ((c = gq_pop(s, w, 0)) || (c = yq_pop(w)))
            return c;
    }
    if ((c = w->runnext)) {
        w->runnext = NULL;
        return c;
    }
    if ((c = deque_pop(&w->dq)) || (c = yq_pop(w)))
        return c;
    return gq_pop(s, w, s->n > 1 ? 8 : 32);
}

static yard_coro_t *find_any(struct sched *s, struct worker *w)
{
    yard_coro_t *c = find_local(s, w);
    if (c)
        return c;
    if (yard_coro__netpoll_poll_now() > 0 && (c = find_local(s, w)))
        return c;
    return steal_work(s, w);
}

static bool work_visible(struct sched *s)
{
    if (atomic_load_explicit(&s->gq_len, memory_order_seq_cst))
        return true;
    for (unsigned i = 0; i < s->n; i++)
        if (deque_size(&s->w[i].dq))
            return true;
    return false;
}

static bool sched_has_work(void)
{
    struct sched *s = g_sched;
    return work_visible(s) || atomic_load(&s->stopping);
}

/* Sleeps until there is work (or the scheduler stops): in the netpoller if
 * no other worker does, else on the futex until another thread publishes
 * work. */
static void worker_idle(struct sched *s, struct worker *w)
{
    if (!atomic_exchange_explicit(&s->polling, true, memory_order_acq_rel)) {
        COUNT(w, n_polls);
        yard_coro__netpoll_block(sched_has_work);
        atomic_store_explicit(&s->polling, false, memory_order_release);
        return;
    }
    atomic_store_explicit(&w->futex, 1, memory_order_relaxed);
    pthread_mutex_lock(&s->idle_lock);
    w->idle_next = s->idle;
    s->idle = w;
    w->in_idle_list = true;
    atomic_fetch_add_explicit(&s->nidle, 1, memory_order_seq_cst);
    pthread_mutex_unlock(&s->idle_lock);

    yard_coro__fence(); /* pairs with wake_idle_worker's */
    if (work_visible(s) || atomic_load(&s->stopping)) {
        pthread_mutex_lock(&s->idle_lock);
        if (w->in_idle_list) {
            struct worker **pp = &s->idle;
            while (*pp != w)
                pp = &(*pp)->idle_next;
            *pp = w->idle_next;
            w->in_idle_list = false;
            atomic_fetch_sub_explicit(&s->nidle, 1, memory_order_seq_cst);
            atomic_store_explicit(&w->futex, 0, memory_order_relaxed);
        }
        pthread_mutex_unlock(&s->idle_lock);
    }
    if (atomic_load_explicit(&w->futex, memory_order_acquire))
        COUNT(w, n_sleeps);
    while (atomic_load_explicit(&w->futex, memory_order_acquire))
        futex_wait(&w->futex, 1);
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
        all_remove(g_sched, c);
    struct worker *w = cur_worker();
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
    struct worker *w = cur_worker();
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
    struct worker *w = cur_worker();
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
static yard_coro_t *desc_new(struct worker *w)
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

static void coro_unref(yard_coro_t *c)
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
        yq_push(w, p);
        break;
    case ACT_PARK: {
        int expected = CS_PARKING;
        if (!atomic_compare_exchange_strong_explicit(&p->state, &expected, CS_PARKED,
                                                     memory_order_acq_rel, memory_order_acquire))
            enqueue(p, true); /* woken while it was still switching away */
        break;
    }
    case ACT_EXIT:
        stack_put(w, &p->stack);
        yard_coro_ctx_destroy(&p->ctx);
        COUNT(w, n_finished);
        atomic_store_explicit(&p->state, CS_DONE, memory_order_relaxed);
        atomic_store_explicit(&p->done, 1, memory_order_release);
        yard_coro_waitq_wake(&p->joinq, INT_MAX);
        coro_unref(p);
        break;
    }
}

/* Gives `to` a stack on first run and marks it running on w. */
static void prepare_run(struct worker *w, yard_coro_t *to)
{
    if (!to->stack.base) {
        stack_get(w, &to->stack);
        yard_coro_ctx_make(&to->ctx, to->stack.lo, to->stack.size, coro_main, to);
        all_insert(g_sched, w, to);
    }
    atomic_store_explicit(&to->state, CS_RUNNING, memory_order_relaxed);
    w->current = to;
}

/* Leaves the current coroutine: `action` says what becomes of it. */
static void schedule(int action)
{
    struct sched *s = g_sched;
    struct worker *w = cur_worker();
    yard_coro_t *self = w->current;
    yard_coro_t *next = NULL;
    if (!atomic_load_explicit(&s->stopping, memory_order_relaxed))
        next = find_local(s, w);
    if (!next && action == ACT_YIELD) {
        /* Check a little further before deciding to keep running. */
        if (yard_coro__netpoll_poll_now() > 0)
            next = find_local(s, w);
        if (!next)
            next = steal_work(s, w);
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
    post_switch(cur_worker());
}

static void coro_main(void *arg)
{
    yard_coro_t *c = arg;
    post_switch(cur_worker());
    c->fn(c->arg);
    schedule(ACT_EXIT);
}

static void worker_loop(struct sched *s, struct worker *w)
{
    while (!atomic_load_explicit(&s->stopping, memory_order_acquire)) {
        yard_coro_t *c = find_any(s, w);
        if (!c) {
            worker_idle(s, w);
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
    worker_loop(g_sched, w);
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
                enqueue(c, true);
                return;
            }
        } else if (st == CS_RUNNING || st == CS_PARKING) {
            if (atomic_compare_exchange_weak_explicit(&c->state, &st, CS_RUNNABLE,
                                                      memory_order_acq_rel, memory_order_acquire))
                return;
        } else {
            die("ready: coroutine in an impossible state");
        }
    }
}

void yard_coro__park(void)
{
    struct worker *w = cur_worker();
    if (!w || !w->current)
        die("a parking call was made outside a coroutine");
    yard_coro_t *self = w->current;
    COUNT(w, n_parks);
    int expected = CS_RUNNING;
    if (!atomic_compare_exchange_strong_explicit(&self->state, &expected, CS_PARKING,
                                                 memory_order_acq_rel, memory_order_acquire)) {
        /* Already woken: no need to leave. */
        atomic_store_explicit(&self->state, CS_RUNNING, memory_order_relaxed);
        return;
    }
    schedule(ACT_PARK);
}

/* ------------------------------------------------------------------------ */
/* running a child inline                                                    */

/* Whether the current coroutine has at least half its stack left: a child
 * run inline gets what is left of its host's stack instead of a fresh one. */
static bool room_to_inline(const struct worker *w)
{
    const yard_coro_t *self = w->current;
    if (!self || !self->stack.base)
        return false;
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0), lo = (uintptr_t)self->stack.lo;
    return sp > lo && sp - lo <= self->stack.size && sp - lo >= self->stack.size / 2;
}

yard_coro_t *yard_coro__take_unstarted(bool (*want)(const yard_coro_t *c, void *ctx), void *ctx)
{
    struct worker *w = cur_worker();
    if (!w || !room_to_inline(w))
        return NULL;
    /* An inline run is no scheduling point: a worker inlining a big tree
     * would never look at the network. So every 16th join looks at the
     * clock, and past INLINE_POLL_EVERY_NS since this worker last polled, polls;
     * if that readied anyone (or the global queue has work), the join
     * parks instead, and the woken run first. */
    if ((++w->inline_tick & 15) == 0) {
        uint64_t now = yard_coro_now_ns();
        if (now - w->last_poll_ns >= INLINE_POLL_EVERY_NS) {
            w->last_poll_ns = now;
            if (yard_coro__netpoll_poll_now() > 0 ||
                atomic_load_explicit(&g_sched->gq_len, memory_order_relaxed))
                return NULL;
        }
    }
    yard_coro_t *c = deque_pop(&w->dq);
    if (!c)
        return NULL;
    if (c->stack.base || !want(c, ctx)) {
        if (deque_push(&w->dq, c) != 0) /* cannot fail: the pop freed a slot */
            gq_push(g_sched, c);
        return NULL;
    }
    return c;
}

void yard_coro__run_inline(yard_coro_t *c)
{
    yard_coro_t *host = cur_worker()->current;
    c->next = host->inline_top; /* for the scheduler's exit, should the host be abandoned */
    host->inline_top = c;
    atomic_store_explicit(&c->state, CS_RUNNING, memory_order_relaxed);
    c->fn(c->arg);
    host->inline_top = c->next;
    struct worker *w = cur_worker(); /* fn may have parked the host: maybe another worker */
    COUNT(w, n_finished);
    COUNT(w, n_inlined);
    atomic_store_explicit(&c->state, CS_DONE, memory_order_relaxed);
    /* No wake of c->joinq: the only joiner of a spawned coroutine is the
     * holder of its one handle, who is running it now, and a task (go) has
     * none. */
    atomic_store_explicit(&c->done, 1, memory_order_release);
    coro_unref(c);
}

/* ------------------------------------------------------------------------ */
/* public API                                                                */

static yard_coro_t *coro_new(void (*fn)(void *), void *arg, int refs)
{
    struct sched *s = g_sched;
    if (!s) {
        errno = EINVAL;
        return NULL;
    }
    struct worker *w = cur_worker();
    yard_coro_t *c = desc_new(w);
    if (!c)
        return NULL;
    c->fn = fn;
    c->arg = arg;
    yard_heap_node_init(&c->timer);
    atomic_init(&c->state, CS_RUNNABLE);
    atomic_init(&c->refs, refs);
    if (w)
        COUNT(w, n_spawned);
    else
        atomic_fetch_add_explicit(&s->n_external_spawned, 1, memory_order_relaxed);
    enqueue(c, false);
    return c;
}

yard_coro_t *yard_coro_spawn(void (*fn)(void *), void *arg)
{
    return coro_new(fn, arg, 2);
}

int yard_coro_go(void (*fn)(void *), void *arg)
{
    if (!g_sched)
        return -EINVAL;
    return coro_new(fn, arg, 1) ? 0 : -ENOMEM;
}

static bool is_coro(const yard_coro_t *c, void *want)
{
    return c == want;
}

void yard_coro_join(yard_coro_t *c)
{
    /* Not started and still at the bottom of our deque (the last one we
     * spawned, as in a LIFO join): nobody stole it, so run it here, on our
     * stack, instead of parking to let the worker run it on a stack of its
     * own. We would wait for it anyway: only the order of work changes. */
    if (!atomic_load_explicit(&c->done, memory_order_acquire)) {
        yard_coro_t *t = yard_coro__take_unstarted(is_coro, c);
        if (t)
            yard_coro__run_inline(t);
    }
    while (!atomic_load_explicit(&c->done, memory_order_acquire))
        yard_coro_waitq_wait(&c->joinq, &c->done, 0, 0);
    coro_unref(c);
}

yard_coro_t *yard_coro_self(void)
{
    struct worker *w = cur_worker();
    return w ? w->current : NULL;
}

int yard_coro_worker_id(void)
{
    struct worker *w = cur_worker();
    return w ? (int)w->id : -1;
}

void yard_coro_yield(void)
{
    struct worker *w = cur_worker();
    if (w && w->current)
        schedule(ACT_YIELD);
}

void yard_coro_sleep_until(uint64_t deadline_ns)
{
    yard_coro_t *self = yard_coro_self();
    if (!self)
        die("yard_coro_sleep called outside a coroutine");
    while (yard_coro_now_ns() < deadline_ns) {
        yard_coro__prepare_park(self);
        yard_coro__timer_add(self, deadline_ns);
        yard_coro__park();
        yard_coro__timer_cancel(self);
    }
}

void yard_coro_sleep_ns(uint64_t ns)
{
    yard_coro_sleep_until(yard_coro_now_ns() + ns);
}

void yard_coro_get_stats(yard_coro_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    struct sched *s = g_sched;
    if (!s)
        return;
    out->spawned = atomic_load_explicit(&s->n_external_spawned, memory_order_relaxed);
    out->stacks_mapped = atomic_load_explicit(&s->n_stacks, memory_order_relaxed);
    for (unsigned i = 0; i < s->n; i++) {
        struct worker *w = &s->w[i];
        out->spawned += atomic_load_explicit(&w->n_spawned, memory_order_relaxed);
        out->finished += atomic_load_explicit(&w->n_finished, memory_order_relaxed);
        out->steals += atomic_load_explicit(&w->n_steals, memory_order_relaxed);
        out->parks += atomic_load_explicit(&w->n_parks, memory_order_relaxed);
        out->futex_sleeps += atomic_load_explicit(&w->n_sleeps, memory_order_relaxed);
        out->netpoll_blocks += atomic_load_explicit(&w->n_polls, memory_order_relaxed);
        out->inlined += atomic_load_explicit(&w->n_inlined, memory_order_relaxed);
    }
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
    atomic_store(&g_sched->stopping, true); /* seq_cst: pairs with worker_idle's recheck */
    wake_all_workers(g_sched);
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
    g_sched = s;
    err = yard_coro__netpoll_start(o.offload_threads ? o.offload_threads : 2);
    if (err)
        goto err_sched;

    struct main_arg m = {main_fn, arg};
    tls_worker = &s->w[0];
    if (!coro_new(main_coro, &m, 1)) {
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
    wake_all_workers(s);
    for (unsigned i = 1; i < started; i++)
        pthread_join(s->w[i].thread, NULL);
    yard_coro__netpoll_stop();
    g_sched = NULL;
    sched_free(s);
    atomic_flag_clear(&g_running);
    return 0;

err_poll:
    yard_coro__netpoll_stop();
err_sched:
    g_sched = NULL;
    if (s->w)
        for (unsigned i = 0; i < made; i++)
            deque_destroy(&s->w[i].dq);
    free(s->w);
    free(s);
err_flag:
    atomic_flag_clear(&g_running);
    return err;
}
