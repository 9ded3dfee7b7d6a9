/* Eve-style tasks with access permissions.
 *
 * A task holds, for the whole of its run, a READ or FULL permission on each
 * object it declared. All of a task's permissions are granted together or
 * not at all, decided while it holds the locks of all its objects, taken in
 * address order (its permissions are sorted by object when it is made), so
 * there is no deadlock between tasks and no lock shared by unrelated ones:
 * two workers granting tasks on different objects touch no common line.
 *
 * A task that cannot start is queued on one object it conflicts with and is
 * retried when that object is released (never spun on). Invariant: a task
 * sits only in the queue of an object that is held in a mode that conflicts
 * with it, or behind such a task, so every queued task is retried
 * eventually: the check and the enqueue happen under that object's lock,
 * and a release takes the lock. A new task also queues behind an object's
 * non-empty queue even if its mode would be compatible, so that a stream of
 * readers cannot starve a queued writer. */
#include "internal.h"

#include <errno.h>
#include <sched.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

struct yard_coro_task {
    void (*fn)(void *);
    void *arg;
    yard_coro_finish_t *finish;
    struct yard_coro_task *wait_next;
    size_t n;
    yard_coro_perm_t perms[]; /* n of them, sorted by object address */
};

static void lock_all(const struct yard_coro_task *t)
{
    for (size_t i = 0; i < t->n; i++)
        yard_coro__spin_lock(&t->perms[i].obj->lock);
}

static void unlock_all(const struct yard_coro_task *t)
{
    for (size_t i = t->n; i-- > 0;)
        yard_coro__spin_unlock(&t->perms[i].obj->lock);
}

static bool compatible(const yard_coro_perm_t *p)
{
    if (p->mode == YARD_PERM_READ)
        return !p->obj->full;
    return !p->obj->full && p->obj->readers == 0;
}

static void obj_enqueue(yard_coro_obj_t *o, struct yard_coro_task *t)
{
    t->wait_next = NULL;
    if (o->wait_tail)
        o->wait_tail->wait_next = t;
    else
        o->wait_head = t;
    o->wait_tail = t;
}

/* Grants all of t's permissions and returns true, or queues t on an object
 * it must wait for and returns false. `fresh` applies the no-overtaking
 * rule. */
static bool try_grant(struct yard_coro_task *t, bool fresh)
{
    lock_all(t);
    for (size_t i = 0; i < t->n; i++) {
        yard_coro_obj_t *o = t->perms[i].obj;
        if (!compatible(&t->perms[i]) || (fresh && o->wait_head)) {
            obj_enqueue(o, t);
            unlock_all(t);
            return false;
        }
    }
    for (size_t i = 0; i < t->n; i++) {
        if (t->perms[i].mode == YARD_PERM_READ)
            t->perms[i].obj->readers++;
        else
            t->perms[i].obj->full = 1;
    }
    unlock_all(t);
    return true;
}

static void task_main(void *arg);

static void start_task(struct yard_coro_task *t)
{
    if (yard_coro_go(task_main, t) != 0) {
        fprintf(stderr, "yard_coro: out of memory starting a task\n");
        abort();
    }
}

/* The last release wakes the waiter and then says it is done with the scope: a waiter that
 * sees pending reach 0 without parking must not return (and let its caller reuse or free the
 * scope) while the releasing task is still inside waitq_wake on another worker. */
static void finish_release(yard_coro_finish_t *f)
{
    if (atomic_fetch_sub_explicit(&f->pending, 1, memory_order_acq_rel) == 1) {
        yard_coro_waitq_wake(&f->q, INT_MAX);
        atomic_store_explicit(&f->released, 1, memory_order_release);
    }
}

static void task_main(void *arg)
{
    struct yard_coro_task *t = arg;
    t->fn(t->arg);
    /* Release each object and take the tasks queued on it; then retry them
     * in order (each takes its own objects' locks). */
    struct yard_coro_task *retry = NULL, **tail = &retry;
    for (size_t i = 0; i < t->n; i++) {
        yard_coro_obj_t *o = t->perms[i].obj;
        yard_coro__spin_lock(&o->lock);
        if (t->perms[i].mode == YARD_PERM_READ)
            o->readers--;
        else
            o->full = 0;
        if (o->wait_head) {
            *tail = o->wait_head;
            tail = &o->wait_tail->wait_next;
            o->wait_head = o->wait_tail = NULL;
        }
        yard_coro__spin_unlock(&o->lock);
    }
    while (retry) {
        struct yard_coro_task *w = retry;
        retry = w->wait_next;
        if (try_grant(w, false))
            start_task(w);
    }
    yard_coro_finish_t *f = t->finish;
    if (offsetof(struct yard_coro_task, perms) + t->n * sizeof(yard_coro_perm_t) <= YARD_CORO_SMALL)
        yard_coro__small_free(t);
    else
        free(t);
    finish_release(f);
}

/* The scope's own share of pending until its wait: tasks that finish
 * before the owner has added its spawns cannot bring pending to 0. */
#define FINISH_BIAS (1u << 30)

void yard_coro_finish_init(yard_coro_finish_t *f)
{
    atomic_init(&f->pending, FINISH_BIAS);
    atomic_init(&f->released, 0);
    f->q = (yard_coro_waitq_t){0};
    f->owner = yard_coro_self();
    f->local = 0;
}

int yard_coro_task(yard_coro_finish_t *f, const yard_coro_perm_t *perms, size_t nperms,
                   void (*fn)(void *), void *arg)
{
    if (!f || !fn || nperms > YARD_CORO_MAX_PERMS || (nperms && !perms))
        return -EINVAL;
    for (size_t i = 0; i < nperms; i++) {
        if (!perms[i].obj ||
            (perms[i].mode != YARD_PERM_READ && perms[i].mode != YARD_PERM_FULL))
            return -EINVAL;
        for (size_t j = 0; j < i; j++)
            if (perms[j].obj == perms[i].obj)
                return -EINVAL; /* one entry per object: FULL already implies READ */
    }
    size_t size = offsetof(struct yard_coro_task, perms) + nperms * sizeof(yard_coro_perm_t);
    struct yard_coro_task *t = size <= YARD_CORO_SMALL ? yard_coro__small_alloc() : malloc(size);
    if (!t)
        return -ENOMEM;
    t->fn = fn;
    t->arg = arg;
    t->finish = f;
    t->n = nperms;
    t->wait_next = NULL;
    /* Sorted by object address (insertion sort: at most 16): the lock order. */
    for (size_t i = 0; i < nperms; i++) {
        size_t j = i;
        for (; j > 0 && (uintptr_t)t->perms[j - 1].obj > (uintptr_t)perms[i].obj; j--)
            t->perms[j] = t->perms[j - 1];
        t->perms[j] = perms[i];
    }
    if (f->owner && f->owner == yard_coro_self())
        f->local++; /* added to pending by the owner's wait */
    else
        atomic_fetch_add_explicit(&f->pending, 1, memory_order_relaxed);
    if (try_grant(t, true))
        start_task(t);
    return 0;
}

static bool is_task_of(const yard_coro_t *c, void *f)
{
    return c->fn == task_main && ((const struct yard_coro_task *)c->arg)->finish == f;
}

void yard_coro_finish_wait(yard_coro_finish_t *f)
{
    /* Tasks of this scope that nobody has started yet, at the bottom of our
     * deque (the last ones spawned): run them here, on our stack. The scope
     * waits for them anyway. */
    yard_coro_t *c;
    for (unsigned tries = 0; tries < f->local && (c = yard_coro__take_unstarted(is_task_of, f));
         tries++)
        yard_coro__run_inline(c);
    /* Remove the scope's bias and add the owner's spawns in one step. If
     * that leaves 0, every task has finished and, having decremented to a
     * non-zero count, touches f no more: nobody to wake, nothing to wait
     * for. Otherwise the task that brings it to 0 wakes us. */
    unsigned sub = FINISH_BIAS - f->local;
    if (atomic_fetch_sub_explicit(&f->pending, sub, memory_order_acq_rel) == sub)
        return;
    unsigned v;
    while ((v = atomic_load_explicit(&f->pending, memory_order_acquire)) != 0)
        yard_coro_waitq_wait(&f->q, &f->pending, v, 0);
    /* Short: the releaser never parks between its decrement and its store, but its thread may
     * be preempted on an oversubscribed machine, hence the yield. */
    for (unsigned spins = 0; !atomic_load_explicit(&f->released, memory_order_acquire);)
        if (++spins > 64)
            sched_yield();
}
