/* Eve-style tasks with access permissions.
 *
 * A task holds, for the whole of its run, a READ or FULL permission on each
 * object it declared. Grants are decided under one lock for the whole
 * permission table, and all of a task's permissions are granted together or
 * not at all, so there is no lock ordering and no deadlock between tasks.
 *
 * A task that cannot start is queued on one object it conflicts with and is
 * retried when that object is released (never spun on). Invariant: a task
 * sits only in the queue of an object that is currently held in a mode that
 * conflicts with it, so every queued task is retried eventually. A new task
 * also queues behind an object's non-empty queue even if its mode would be
 * compatible, so that a stream of readers cannot starve a queued writer. */
#include "internal.h"

#include <errno.h>
#include <sched.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

struct yard_coro_task {
    void (*fn)(void *);
    void *arg;
    yard_coro_finish_t *finish;
    size_t n;
    yard_coro_perm_t perms[YARD_CORO_MAX_PERMS];
    struct yard_coro_task *wait_next;
};

static atomic_int g_perm_lock;

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

/* Under the permission lock: grants everything and returns NULL, or returns
 * the object to wait on. `fresh` applies the no-overtaking rule. */
static yard_coro_obj_t *try_grant(struct yard_coro_task *t, bool fresh)
{
    for (size_t i = 0; i < t->n; i++) {
        if (!compatible(&t->perms[i]) || (fresh && t->perms[i].obj->wait_head))
            return t->perms[i].obj;
    }
    for (size_t i = 0; i < t->n; i++) {
        if (t->perms[i].mode == YARD_PERM_READ)
            t->perms[i].obj->readers++;
        else
            t->perms[i].obj->full = 1;
    }
    return NULL;
}

static void task_main(void *arg);

static void start_tasks(struct yard_coro_task *list)
{
    while (list) {
        struct yard_coro_task *t = list;
        list = t->wait_next;
        if (yard_coro_go(task_main, t) != 0) {
            fprintf(stderr, "yard_coro: out of memory starting a task\n");
            abort();
        }
    }
}

/* Under the permission lock: retries o's queue in order. Tasks that still
 * conflict on o stay (in order); tasks that conflict elsewhere move to that
 * object's queue; granted ones are added to *ready. */
static void retry_queue(yard_coro_obj_t *o, struct yard_coro_task **ready)
{
    struct yard_coro_task *t = o->wait_head;
    o->wait_head = o->wait_tail = NULL;
    while (t) {
        struct yard_coro_task *next = t->wait_next;
        yard_coro_obj_t *blocker = try_grant(t, false);
        if (blocker) {
            obj_enqueue(blocker, t);
        } else {
            t->wait_next = *ready;
            *ready = t;
        }
        t = next;
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
    struct yard_coro_task *ready = NULL;
    yard_coro__spin_lock(&g_perm_lock);
    for (size_t i = 0; i < t->n; i++) {
        if (t->perms[i].mode == YARD_PERM_READ)
            t->perms[i].obj->readers--;
        else
            t->perms[i].obj->full = 0;
    }
    for (size_t i = 0; i < t->n; i++)
        retry_queue(t->perms[i].obj, &ready);
    yard_coro__spin_unlock(&g_perm_lock);
    start_tasks(ready);
    yard_coro_finish_t *f = t->finish;
    free(t);
    finish_release(f);
}

void yard_coro_finish_init(yard_coro_finish_t *f)
{
    atomic_init(&f->pending, 1);
    atomic_init(&f->released, 0);
    f->q = (yard_coro_waitq_t){0};
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
    struct yard_coro_task *t = malloc(sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->fn = fn;
    t->arg = arg;
    t->finish = f;
    t->n = nperms;
    for (size_t i = 0; i < nperms; i++)
        t->perms[i] = perms[i];
    t->wait_next = NULL;
    atomic_fetch_add_explicit(&f->pending, 1, memory_order_relaxed);

    yard_coro__spin_lock(&g_perm_lock);
    yard_coro_obj_t *blocker = try_grant(t, true);
    if (blocker)
        obj_enqueue(blocker, t);
    yard_coro__spin_unlock(&g_perm_lock);
    if (!blocker)
        start_tasks(t);
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
    while (atomic_load_explicit(&f->pending, memory_order_acquire) > 1 &&
           (c = yard_coro__take_unstarted(is_task_of, f)))
        yard_coro__run_inline(c);
    finish_release(f); /* the scope's own count */
    unsigned v;
    while ((v = atomic_load_explicit(&f->pending, memory_order_acquire)) != 0)
        yard_coro_waitq_wait(&f->q, &f->pending, v, 0);
    /* Short: the releaser never parks between its decrement and its store, but its thread may
     * be preempted on an oversubscribed machine, hence the yield. */
    for (unsigned spins = 0; !atomic_load_explicit(&f->released, memory_order_acquire);)
        if (++spins > 64)
            sched_yield();
}
