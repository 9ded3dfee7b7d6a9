/* The M:N scheduler (sched.c): the public API of coroutines (spawn, go,
 * join, self, worker id, yield, sleep, stats) and running a joined child
 * inline on its parent's worker. */
#include "sched_int.h"

#include <errno.h>
#include <string.h>

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
    struct worker *w = sched_cur_worker();
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
                atomic_load_explicit(&sched_active->gq_len, memory_order_relaxed))
                return NULL;
        }
    }
    yard_coro_t *c = deque_pop(&w->dq);
    if (!c)
        return NULL;
    if (c->stack.base || !want(c, ctx)) {
        if (deque_push(&w->dq, c) != 0) /* cannot fail: the pop freed a slot */
            sched_gq_push(sched_active, c);
        return NULL;
    }
    return c;
}

void yard_coro__run_inline(yard_coro_t *c)
{
    yard_coro_t *host = sched_cur_worker()->current;
    c->next = host->inline_top; /* for the scheduler's exit, should the host be abandoned */
    host->inline_top = c;
    atomic_store_explicit(&c->state, CS_RUNNING, memory_order_relaxed);
    c->fn(c->arg);
    host->inline_top = c->next;
    struct worker *w = sched_cur_worker(); /* fn may have parked the host: maybe another worker */
    COUNT(w, n_finished);
    COUNT(w, n_inlined);
    atomic_store_explicit(&c->state, CS_DONE, memory_order_relaxed);
    /* No wake of c->joinq: the only joiner of a spawned coroutine is the
     * holder of its one handle, who is running it now, and a task (go) has
     * none. */
    atomic_store_explicit(&c->done, 1, memory_order_release);
    sched_coro_unref(c);
}

/* ------------------------------------------------------------------------ */
/* public API                                                                */

yard_coro_t *sched_coro_new(void (*fn)(void *), void *arg, int refs)
{
    struct sched *s = sched_active;
    if (!s) {
        errno = EINVAL;
        return NULL;
    }
    struct worker *w = sched_cur_worker();
    yard_coro_t *c = sched_desc_new(w);
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
    sched_enqueue(c, false);
    return c;
}

yard_coro_t *yard_coro_spawn(void (*fn)(void *), void *arg)
{
    return sched_coro_new(fn, arg, 2);
}

int yard_coro_go(void (*fn)(void *), void *arg)
{
    if (!sched_active)
        return -EINVAL;
    return sched_coro_new(fn, arg, 1) ? 0 : -ENOMEM;
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
    sched_coro_unref(c);
}

yard_coro_t *yard_coro_self(void)
{
    struct worker *w = sched_cur_worker();
    return w ? w->current : NULL;
}

int yard_coro_worker_id(void)
{
    struct worker *w = sched_cur_worker();
    return w ? (int)w->id : -1;
}

void yard_coro_yield(void)
{
    struct worker *w = sched_cur_worker();
    if (w && w->current)
        sched_schedule(ACT_YIELD);
}

void yard_coro_sleep_until(uint64_t deadline_ns)
{
    yard_coro_t *self = yard_coro_self();
    if (!self)
        sched_die("yard_coro_sleep called outside a coroutine");
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
    struct sched *s = sched_active;
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
