/* The M:N scheduler's insides, shared by its files (yard/coro.h is the API,
 * internal.h what the rest of the coroutine runtime shares): sched.c owns
 * the workers, stacks and descriptors, switching, parking, and start and
 * stop; sched_queues.c the run queues, stealing and idle workers;
 * sched_api.c the public API and children run inline. Not a public
 * interface. */
#ifndef YARD_CORO_SCHED_INT_H
#define YARD_CORO_SCHED_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "deque.h"
#include "internal.h"
#include "sanitizer.h" /* YARD_CORO_ASAN, before DESC_CACHE below */

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

/* sched.c */
/* The worker this thread is, or NULL: not inlined, and opaque to the
 * optimiser (see its definition). */
__attribute__((noinline)) struct worker *sched_cur_worker(void);
extern struct sched *sched_active; /* the scheduler yard_coro_run runs, NULL outside it */
void sched_futex_wait(atomic_uint *addr, unsigned val);
void sched_futex_wake(atomic_uint *addr);
void sched_die(const char *what);
yard_coro_t *sched_desc_new(struct worker *w);
void sched_coro_unref(yard_coro_t *c);
void sched_schedule(int action);

/* sched_queues.c */
void sched_gq_push(struct sched *s, yard_coro_t *c);
void sched_wake_all_workers(struct sched *s);
void sched_enqueue(yard_coro_t *c, bool as_next);
yard_coro_t *sched_steal_work(struct sched *s, struct worker *w);
void sched_yq_push(struct worker *w, yard_coro_t *c);
yard_coro_t *sched_find_local(struct sched *s, struct worker *w);
yard_coro_t *sched_find_any(struct sched *s, struct worker *w);
void sched_worker_idle(struct sched *s, struct worker *w);

/* sched_api.c */
yard_coro_t *sched_coro_new(void (*fn)(void *), void *arg, int refs);

#endif
