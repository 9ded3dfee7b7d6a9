/* Timers: one per coroutine (its sleep, or the deadline of its park), kept
 * in the engine's min-heap (yard/heap.h) under one lock.
 *
 * Whoever polls fires them: a worker that looks for work fires what is due
 * without blocking (yard_coro__timers_fire), and the one worker that blocks
 * in the netpoller sleeps until the earliest deadline (it asks
 * yard_coro__timers_sleep_until first, which records how long it sleeps).
 * A timer added for earlier than that interrupts the sleeper through the
 * hook the netpoller registers, so no timer waits for an unrelated event.
 * Nothing here knows about file descriptors: the scheduler and this file
 * can be tested without the netpoller. */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "yard/heap.h"

static struct {
    pthread_mutex_t lock;
    yard_heap_t heap;     /* of yard_coro_t.timer, keyed by deadline */
    uint64_t sleeper_until; /* when the blocked poller wakes by itself ... */
    bool sleeper;           /* ... while there is one */
    void (*interrupt)(void);
} g_tm = {.lock = PTHREAD_MUTEX_INITIALIZER};

static yard_coro_t *timer_coro(yard_heap_node_t *node)
{
    return (yard_coro_t *)(void *)((char *)node - offsetof(yard_coro_t, timer));
}

void yard_coro__timers_init(void (*interrupt)(void))
{
    pthread_mutex_lock(&g_tm.lock);
    g_tm.interrupt = interrupt;
    g_tm.sleeper = false;
    pthread_mutex_unlock(&g_tm.lock);
}

void yard_coro__timers_fini(void)
{
    pthread_mutex_lock(&g_tm.lock);
    yard_heap_free(&g_tm.heap);
    g_tm.interrupt = NULL;
    pthread_mutex_unlock(&g_tm.lock);
}

void yard_coro__timer_add(yard_coro_t *c, uint64_t deadline)
{
    pthread_mutex_lock(&g_tm.lock);
    if (yard_heap_push(&g_tm.heap, &c->timer, deadline) < 0) {
        fprintf(stderr, "yard_coro: out of memory for timers\n");
        abort();
    }
    void (*interrupt)(void) = NULL;
    if (g_tm.sleeper && deadline < g_tm.sleeper_until) {
        g_tm.sleeper_until = deadline; /* one interruption is enough */
        interrupt = g_tm.interrupt;
    }
    pthread_mutex_unlock(&g_tm.lock);
    if (interrupt)
        interrupt();
}

void yard_coro__timer_cancel(yard_coro_t *c)
{
    pthread_mutex_lock(&g_tm.lock);
    if (yard_heap_contains(&c->timer))
        yard_heap_remove(&g_tm.heap, &c->timer);
    pthread_mutex_unlock(&g_tm.lock);
}

/* The claim is taken under the timer lock: the coroutine removes itself
 * from the heap under the same lock before it parks again, so a stale
 * timer can never wake a later park. */
int yard_coro__timers_fire(bool try_only)
{
    if (try_only) {
        if (pthread_mutex_trylock(&g_tm.lock) != 0)
            return 0;
    } else {
        pthread_mutex_lock(&g_tm.lock);
    }
    yard_coro_t *fired = NULL;
    yard_heap_node_t *min = yard_heap_min(&g_tm.heap);
    if (min) {
        uint64_t now = yard_coro_now_ns();
        for (; min && min->key <= now; min = yard_heap_min(&g_tm.heap)) {
            yard_coro_t *c = timer_coro(min);
            yard_heap_remove(&g_tm.heap, min);
            if (yard_coro__claim(c)) {
                c->next = fired;
                fired = c;
            }
        }
    }
    pthread_mutex_unlock(&g_tm.lock);
    int n = 0;
    while (fired) {
        yard_coro_t *c = fired;
        fired = c->next;
        yard_coro__ready(c, -ETIMEDOUT);
        n++;
    }
    return n;
}

uint64_t yard_coro__timers_sleep_until(void)
{
    pthread_mutex_lock(&g_tm.lock);
    yard_heap_node_t *first = yard_heap_min(&g_tm.heap);
    uint64_t until = first ? first->key : UINT64_MAX;
    g_tm.sleeper = true;
    g_tm.sleeper_until = until;
    pthread_mutex_unlock(&g_tm.lock);
    return until;
}

void yard_coro__timers_awake(void)
{
    pthread_mutex_lock(&g_tm.lock);
    g_tm.sleeper = false;
    pthread_mutex_unlock(&g_tm.lock);
}
