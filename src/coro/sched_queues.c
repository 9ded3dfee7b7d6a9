/* The M:N scheduler (sched.c): where runnable coroutines wait and how a
 * worker finds one: the global queue, each worker's deque, its run-next
 * slot and yield queue, stealing from random victims; idle workers asleep
 * on their futex words and woken when work is published, and the one that
 * blocks in the netpoller. */
#include "sched_int.h"

/* ------------------------------------------------------------------------ */
/* run queues                                                                */

void sched_gq_push(struct sched *s, yard_coro_t *c)
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
        sched_futex_wake(&w->futex);
    }
}

void sched_wake_all_workers(struct sched *s)
{
    yard_coro__fence(); /* the caller's store (stopping) before the idle count's load */
    while (atomic_load(&s->nidle))
        wake_idle_worker(s);
    yard_coro__netpoll_wake();
}

static void local_push(struct sched *s, struct worker *w, yard_coro_t *c)
{
    if (deque_push(&w->dq, c) != 0)
        sched_gq_push(s, c); /* out of memory growing the deque: the global queue has no limit */
    wake_idle_worker(s);
}

/* Makes c runnable on the calling thread's worker, or globally. */
void sched_enqueue(yard_coro_t *c, bool as_next)
{
    struct sched *s = sched_active;
    struct worker *w = sched_cur_worker();
    if (!w) {
        sched_gq_push(s, c);
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

yard_coro_t *sched_steal_work(struct sched *s, struct worker *w)
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

void sched_yq_push(struct worker *w, yard_coro_t *c)
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
yard_coro_t *sched_find_local(struct sched *s, struct worker *w)
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

yard_coro_t *sched_find_any(struct sched *s, struct worker *w)
{
    yard_coro_t *c = sched_find_local(s, w);
    if (c)
        return c;
    if (yard_coro__netpoll_poll_now() > 0 && (c = sched_find_local(s, w)))
        return c;
    return sched_steal_work(s, w);
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
    struct sched *s = sched_active;
    return work_visible(s) || atomic_load(&s->stopping);
}

/* Sleeps until there is work (or the scheduler stops): in the netpoller if
 * no other worker does, else on the futex until another thread publishes
 * work. */
void sched_worker_idle(struct sched *s, struct worker *w)
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
        sched_futex_wait(&w->futex, 1);
}
