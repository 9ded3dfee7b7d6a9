/* Shared between the runtime's files; not a public interface. */
#ifndef YARD_CORO_INTERNAL_H
#define YARD_CORO_INTERNAL_H

#include "yard/coro.h"
#include "yard/heap.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

/* Coroutine life cycle. A wake that races with a park in progress is
 * resolved with these states instead of a lock: see coro_ready in sched.c. */
enum coro_state { CS_RUNNABLE, CS_RUNNING, CS_PARKING, CS_PARKED, CS_DONE };

struct yard_coro {
    yard_coro_ctx_t ctx;
    yard_coro_stack_t stack;
    void (*fn)(void *);
    void *arg;
    atomic_int state;
    /* Each park is ended by exactly one waker: every potential waker (an fd
     * event, a timer, a wait-queue wake) first wins this flag with a CAS,
     * while holding the lock of the structure that references the coroutine.
     * The coroutine resets it before it registers for its next park. */
    atomic_int claim;
    int wake_result; /* written by the winning waker before coro_ready */
    atomic_int refs;
    atomic_uint done;
    yard_coro_waitq_t joinq;
    yard_coro_t *next; /* run queue link; while run inline, the host's chain */
    /* The list of every coroutine that has a stack (for the scheduler's
     * exit: coroutines still parked are freed there). One that never ran
     * is in some run queue instead, and one run inline hangs off its host's
     * inline_top chain: neither costs a list insertion. */
    yard_coro_t *all_prev, *all_next;
    unsigned all_stripe;
    bool listed;
    yard_coro_t *inline_top; /* the children running inline on this one's stack */
    yard_heap_node_t timer; /* in the netpoller's heap; key: the deadline */
};

struct yard_coro_waiter {
    yard_coro_t *c;
    struct yard_coro_waiter *next, *prev;
    void *value;
    int result;
    bool linked;
};

/* Parks the current coroutine until coro_ready is called for it (by the
 * waker that won its claim). The caller reset the claim and registered
 * itself in some structure beforehand. */
void yard_coro__park(void);
bool yard_coro__claim(yard_coro_t *c);
/* Makes a parked (or parking) coroutine runnable; from any thread. */
void yard_coro__ready(yard_coro_t *c, int result);
/* Begins a park: resets the claim. Must precede registration. */
void yard_coro__prepare_park(yard_coro_t *c);
/* timers.c: one timer per coroutine; cancel is a no-op once fired. */
void yard_coro__timer_add(yard_coro_t *c, uint64_t deadline);
void yard_coro__timer_cancel(yard_coro_t *c);
/* interrupt: breaks the sleep of whoever sleeps until the earliest timer
 * (the netpoller's wake). */
void yard_coro__timers_init(void (*interrupt)(void));
void yard_coro__timers_fini(void);
/* Readies every coroutine whose timer is due; how many. try_only: give up
 * at once if another thread holds the timers. */
int yard_coro__timers_fire(bool try_only);
/* For the one who is about to sleep: the earliest deadline (UINT64_MAX:
 * none); a timer added for earlier interrupts the sleep until ..._awake. */
uint64_t yard_coro__timers_sleep_until(void);
void yard_coro__timers_awake(void);

/* A sequentially consistent fence. GCC's ThreadSanitizer refuses
 * atomic_thread_fence; there a seq_cst read-modify-write of a thread's own
 * word stands in (a full barrier on the hardware too; TSan checks data
 * races, not this ordering). */
#if defined(__SANITIZE_THREAD__)
static inline void yard_coro__fence(void)
{
    static _Thread_local atomic_int word;
    atomic_fetch_add_explicit(&word, 0, memory_order_seq_cst);
}
#else
static inline void yard_coro__fence(void)
{
    atomic_thread_fence(memory_order_seq_cst);
}
#endif

/* A test-and-test-and-set lock for the runtime's short critical sections;
 * it yields the CPU when it cannot get the lock quickly, because a holder
 * may have been preempted on this oversubscribed machine. */
static inline void yard_coro__spin_lock(atomic_int *l)
{
    unsigned spins = 0;
    for (;;) {
        if (!atomic_exchange_explicit(l, 1, memory_order_acquire))
            return;
        while (atomic_load_explicit(l, memory_order_relaxed)) {
            if (++spins > 64)
                sched_yield();
#if defined(__x86_64__)
            else
                __builtin_ia32_pause();
#endif
        }
    }
}

static inline void yard_coro__spin_unlock(atomic_int *l)
{
    atomic_store_explicit(l, 0, memory_order_release);
}

#endif

/* netpoll.c: epoll and the offload pool. */
int yard_coro__netpoll_start(unsigned offload_threads);
void yard_coro__netpoll_stop(void);
/* Non-blocking poll from a worker: readies what is due (fds and timers) on
 * the caller's queues; returns how many. */
int yard_coro__netpoll_poll_now(void);
/* For the one worker that may block: sleeps in epoll_wait until an fd
 * event, the earliest timer or a wake, unless has_work() says there is work
 * once the sleep is announced; readies what it finds. Returns how many. */
int yard_coro__netpoll_block(bool (*has_work)(void));
/* Breaks the blocked worker's sleep, if any: new work was published. */
void yard_coro__netpoll_wake(void);
/* The same for a caller that has just made a seq_cst fence itself. */
void yard_coro__netpoll_wake_fenced(void);
/* sched.c: for a joiner about to wait: pops the bottom of the calling
 * worker's deque if it is a coroutine that never ran and want(c, ctx)
 * accepts it, and the current coroutine has half its stack left; else NULL
 * and the deque is as it was. The caller then runs it with run_inline: on
 * its own stack, to the end (the host parks if the child parks). Only for
 * what the caller is about to wait for anyway, so that no new waiting
 * (and no deadlock) is introduced. */
yard_coro_t *yard_coro__take_unstarted(bool (*want)(const yard_coro_t *c, void *ctx), void *ctx);
void yard_coro__run_inline(yard_coro_t *c);
/* sched.c: blocks of YARD_CORO_SMALL bytes from the calling worker's cache
 * (malloc/free elsewhere, and always under ASan): a task's record. */
#define YARD_CORO_SMALL 128
void *yard_coro__small_alloc(void);
void yard_coro__small_free(void *b);
/* sched.c: whether the calling thread is a worker of the running scheduler. */
bool yard_coro__on_worker(void);
/* Counted in the stats. */
void yard_coro__count_stack_mapped(void);
