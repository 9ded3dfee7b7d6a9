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
 * retried when that object is released (never spun on); a release grants the
 * head of the queue and the ones after it while they can run, and stops at
 * the first that cannot (retry_queue). Invariant: a task
 * sits only in the queue of an object that is held in a mode that conflicts
 * with it, or behind such a task, so every queued task is retried
 * eventually: the check and the enqueue happen under that object's lock,
 * and a release takes the lock. A new task also queues behind an object's
 * non-empty queue even if its mode would be compatible, so that a stream of
 * readers cannot starve a queued writer.
 *
 * A coroutine may also acquire permissions for itself, without a task
 * (yard_coro_perms_acquire): its request is the same record, on its own
 * stack, with no function; being granted wakes it instead of starting a
 * coroutine, and its release retries the queued requests as a finishing
 * task's does. */
#include "internal.h"

#include <errno.h>
#include <sched.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

struct yard_coro_task {
    void (*fn)(void *); /* NULL: a parked acquirer, arg is its coroutine */
    void *arg;
    yard_coro_finish_t *finish;
    struct yard_coro_task *wait_next;
    bool released;      /* its body gave its permissions back early (yard_coro_task_release_perms) */
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

/* t has been granted: start its coroutine, or wake the acquirer parked on
 * it (its only waker: the claim cannot be lost). */
static void start_task(struct yard_coro_task *t)
{
    if (!t->fn) {
        yard_coro_t *c = t->arg; /* t lives on c's stack: not touched after the wake */
        if (yard_coro__claim(c))
            yard_coro__ready(c, 0);
        return;
    }
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

/* t (taken off o's queue by the caller, so nobody else can reach it) is
 * granted, or queued again: at the head of o's queue when it conflicts
 * with o itself (it keeps its place), else at the tail of the queue of the
 * object it conflicts with. */
enum { GRANTED, BLOCKED_HERE, BLOCKED_ELSEWHERE };

static int regrant(struct yard_coro_task *t, yard_coro_obj_t *o)
{
    lock_all(t);
    for (size_t i = 0; i < t->n; i++) {
        yard_coro_obj_t *p = t->perms[i].obj;
        if (compatible(&t->perms[i]))
            continue;
        if (p == o) {
            t->wait_next = o->wait_head;
            o->wait_head = t;
            if (!o->wait_tail)
                o->wait_tail = t;
        } else {
            obj_enqueue(p, t);
        }
        unlock_all(t);
        return p == o ? BLOCKED_HERE : BLOCKED_ELSEWHERE;
    }
    for (size_t i = 0; i < t->n; i++) {
        if (t->perms[i].mode == YARD_PERM_READ)
            t->perms[i].obj->readers++;
        else
            t->perms[i].obj->full = 1;
    }
    unlock_all(t);
    return GRANTED;
}

/* Grants the requests at the head of o's queue, in order, while they can
 * run; stops at the first that must still wait for o. So a release costs
 * what it grants, not the length of the queue: with many requests queued
 * on one object (a counter every connection writes) retrying them all at
 * each release made it quadratic. Check and re-queue happen under o's
 * lock, so a release racing with this cannot be missed: either it sees the
 * request back in the queue, or the request sees it released. */
static void retry_queue(yard_coro_obj_t *o)
{
    for (;;) {
        yard_coro__spin_lock(&o->lock);
        struct yard_coro_task *w = o->wait_head;
        if (w) {
            o->wait_head = w->wait_next;
            if (!o->wait_head)
                o->wait_tail = NULL;
        }
        yard_coro__spin_unlock(&o->lock);
        if (!w)
            return;
        int r = regrant(w, o);
        if (r == GRANTED)
            start_task(w); /* an acquirer may return at once: w is not touched after this */
        else if (r == BLOCKED_HERE)
            return;
    }
}

/* Releases each permission, then retries the requests queued on each
 * object. One lock at a time, so perms need not be sorted. */
static void release_and_retry(const yard_coro_perm_t *perms, size_t n)
{
    uint32_t queued = 0; /* bit i: perms[i]'s object had requests waiting */
    for (size_t i = 0; i < n; i++) {
        yard_coro_obj_t *o = perms[i].obj;
        yard_coro__spin_lock(&o->lock);
        if (perms[i].mode == YARD_PERM_READ)
            o->readers--;
        else
            o->full = 0;
        if (o->wait_head)
            queued |= 1u << i;
        yard_coro__spin_unlock(&o->lock);
    }
    /* A request queued after our unlock found the object in the state we
     * left it: it was granted, or it queued behind a conflicting holder
     * whose release retries it. */
    for (size_t i = 0; queued && i < n; i++)
        if (queued & 1u << i)
            retry_queue(perms[i].obj);
}

static void task_main(void *arg)
{
    struct yard_coro_task *t = arg;
    t->fn(t->arg);
    if (!t->released)
        release_and_retry(t->perms, t->n);
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

/* A permission list a task or an acquirer may ask for: at most
 * YARD_CORO_MAX_PERMS entries, each on an object, one entry per object. */
static bool perms_valid(const yard_coro_perm_t *perms, size_t n)
{
    if (n > YARD_CORO_MAX_PERMS || (n && !perms))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!perms[i].obj || (perms[i].mode != YARD_PERM_READ && perms[i].mode != YARD_PERM_FULL))
            return false;
        for (size_t j = 0; j < i; j++)
            if (perms[j].obj == perms[i].obj)
                return false; /* one entry per object: FULL already implies READ */
    }
    return true;
}

/* Copies perms into t sorted by object address (insertion sort: at most
 * 16): the lock order. */
static void set_perms(struct yard_coro_task *t, const yard_coro_perm_t *perms, size_t n)
{
    t->n = n;
    for (size_t i = 0; i < n; i++) {
        size_t j = i;
        for (; j > 0 && (uintptr_t)t->perms[j - 1].obj > (uintptr_t)perms[i].obj; j--)
            t->perms[j] = t->perms[j - 1];
        t->perms[j] = perms[i];
    }
}

int yard_coro_task(yard_coro_finish_t *f, const yard_coro_perm_t *perms, size_t nperms,
                   void (*fn)(void *), void *arg)
{
    if (!f || !fn || !perms_valid(perms, nperms))
        return -EINVAL;
    size_t size = offsetof(struct yard_coro_task, perms) + nperms * sizeof(yard_coro_perm_t);
    struct yard_coro_task *t = size <= YARD_CORO_SMALL ? yard_coro__small_alloc() : malloc(size);
    if (!t)
        return -ENOMEM;
    t->fn = fn;
    t->arg = arg;
    t->finish = f;
    t->wait_next = NULL;
    t->released = false;
    set_perms(t, perms, nperms);
    if (f->owner && f->owner == yard_coro_self())
        f->local++; /* added to pending by the owner's wait */
    else
        atomic_fetch_add_explicit(&f->pending, 1, memory_order_relaxed);
    if (try_grant(t, true))
        start_task(t);
    return 0;
}

int yard_coro_task_release_perms(void)
{
    /* The task whose body runs here: the innermost one run inline on this
     * coroutine's stack (yard_coro_finish_wait), else the coroutine's own. */
    yard_coro_t *c = yard_coro_self();
    if (c && c->inline_top)
        c = c->inline_top;
    if (!c || c->fn != task_main)
        return -EINVAL;
    struct yard_coro_task *t = c->arg;
    if (!t->released) {
        t->released = true;
        release_and_retry(t->perms, t->n);
    }
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

/* An acquirer's request: a task record with room for the most permissions,
 * on the acquirer's stack (nothing to allocate). */
#define ACQUIRE_REQ_SIZE                                                                            \
    (offsetof(struct yard_coro_task, perms) + YARD_CORO_MAX_PERMS * sizeof(yard_coro_perm_t))

int yard_coro_perms_acquire(const yard_coro_perm_t *perms, size_t n)
{
    if (!perms_valid(perms, n))
        return -EINVAL;
    if (n == 0)
        return 0;
    yard_coro_t *self = yard_coro_self();
    if (!self)
        return -EINVAL; /* only a coroutine can wait */
    union {
        struct yard_coro_task t;
        unsigned char room[ACQUIRE_REQ_SIZE];
    } req;
    struct yard_coro_task *t = &req.t;
    t->fn = NULL;
    t->arg = self;
    t->finish = NULL;
    t->wait_next = NULL;
    set_perms(t, perms, n);
    /* Ready to be woken before the request is visible to a releaser. */
    yard_coro__prepare_park(self);
    if (try_grant(t, true))
        return 0;
    /* Queued: a release grants it (the no-overtaking rule no longer
     * applies once queued, as for a task) and wakes us. */
    yard_coro__park();
    return 0;
}

void yard_coro_perms_release(const yard_coro_perm_t *perms, size_t n)
{
    release_and_retry(perms, n);
}
