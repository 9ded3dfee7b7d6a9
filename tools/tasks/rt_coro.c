/* yard-tasks on our coroutine runtime (src/coro, docs/coro.md), two ways:
 *
 *   coro-perms  the Eve study's Program 1 as written: each child is an
 *               Eve-style task (yard_coro_task) of its parent's finish
 *               scope, holding a FULL permission on its own result object
 *               and a READ permission on the object standing for the
 *               parent's n (both children read it, so the two READs are
 *               granted together); the parent waits in
 *               yard_coro_finish_wait. The permission machinery runs for
 *               every task.
 *   coro        the same tree with plain yard_coro_spawn / yard_coro_join:
 *               what the tasks cost without permissions.
 *
 * Each repetition is one yard_coro_run with `workers` workers. The main
 * coroutine starts the root task and joins it; time_s is that interval,
 * wall_s the whole yard_coro_run (thread start-up and shut-down included).
 * Steals, mapped stacks and inlined children (a join that finds its child
 * not started runs it on its own stack) are yard_coro_get_stats deltas over
 * the same interval. A spawn that fails (out of memory) runs its subtree inline and
 * is counted as an inline fallback. */
#include "tasks.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "yard/coro.h"

/* ------------------------------------------------------------------------ */
/* coro: spawn / join                                                        */

struct cfib {
    int n;
    int cutoff;
    int64_t result;
    uint64_t tasks, fallbacks;
};

static void cfib_compute(struct cfib *f);

static void cfib_task(void *arg)
{
    cfib_compute(arg);
}

static void cfib_compute(struct cfib *f)
{
    int n = f->n;
    if (n < 2) {
        f->result = n;
        return;
    }
    if (n <= f->cutoff) {
        f->result = yard_tasks_fib_seq(n);
        return;
    }
    struct cfib a = {.n = n - 1, .cutoff = f->cutoff};
    struct cfib b = {.n = n - 2, .cutoff = f->cutoff};
    yard_coro_t *ca = yard_coro_spawn(cfib_task, &a);
    yard_coro_t *cb = yard_coro_spawn(cfib_task, &b);
    uint64_t fallbacks = 0;
    if (!ca) {
        cfib_compute(&a);
        fallbacks++;
    }
    if (!cb) {
        cfib_compute(&b);
        fallbacks++;
    }
    /* Last spawned, first joined (as a work-stealing deque pops): a child
     * nobody stole is then at the bottom of our deque and the join runs it
     * on our stack (docs/coro.md). */
    if (cb)
        yard_coro_join(cb);
    if (ca)
        yard_coro_join(ca);
    f->result = a.result + b.result;
    f->tasks = 2 + a.tasks + b.tasks;
    f->fallbacks = fallbacks + a.fallbacks + b.fallbacks;
}

/* ------------------------------------------------------------------------ */
/* coro-perms: Eve tasks in finish scopes                                    */

/* The shared object standing for a call's n: its children read it. */
struct pn {
    int n;
    yard_coro_obj_t obj;
};

/* A result slot: written only by the task holding FULL on obj. */
struct pslot {
    int64_t value;
    uint64_t tasks, fallbacks;
    yard_coro_obj_t obj;
};

struct parg {
    const struct pn *parent; /* held READ */
    int minus;               /* this task computes fib(parent->n - minus) */
    int cutoff;
    struct pslot *out; /* held FULL */
};

static void pfib_task(void *arg)
{
    struct parg *a = arg;
    struct pslot *out = a->out;
    int n = a->parent->n - a->minus;
    out->tasks = out->fallbacks = 0;
    if (n < 2) {
        out->value = n;
        return;
    }
    if (n <= a->cutoff) {
        out->value = yard_tasks_fib_seq(n);
        return;
    }
    struct pn mine = {.n = n};
    struct pslot s1 = {0}, s2 = {0};
    struct parg a1 = {.parent = &mine, .minus = 1, .cutoff = a->cutoff, .out = &s1};
    struct parg a2 = {.parent = &mine, .minus = 2, .cutoff = a->cutoff, .out = &s2};
    yard_coro_finish_t fin;
    yard_coro_finish_init(&fin);
    uint64_t fallbacks = 0;
    if (yard_coro_task(&fin,
                       (yard_coro_perm_t[]){{&s1.obj, YARD_PERM_FULL}, {&mine.obj, YARD_PERM_READ}},
                       2, pfib_task, &a1) != 0) {
        pfib_task(&a1);
        fallbacks++;
    }
    if (yard_coro_task(&fin,
                       (yard_coro_perm_t[]){{&s2.obj, YARD_PERM_FULL}, {&mine.obj, YARD_PERM_READ}},
                       2, pfib_task, &a2) != 0) {
        pfib_task(&a2);
        fallbacks++;
    }
    yard_coro_finish_wait(&fin); /* finish { ... } */
    out->value = s1.value + s2.value;
    out->tasks = 2 + s1.tasks + s2.tasks;
    out->fallbacks = fallbacks + s1.fallbacks + s2.fallbacks;
}

/* ------------------------------------------------------------------------ */
/* one repetition                                                            */

struct crun {
    const yard_tasks_params_t *p;
    bool perms;
    yard_tasks_rep_t *out;
    bool failed;
};

static void crun_main(void *arg)
{
    struct crun *r = arg;
    yard_tasks_rep_t *out = r->out;
    yard_coro_stats_t s0, s1;
    yard_coro_get_stats(&s0);
    double t0 = yard_tasks_now();
    if (r->perms) {
        /* The root is a task like the others: [+root] and [n]. */
        struct pn input = {.n = r->p->n};
        struct pslot root = {0};
        struct parg ra = {.parent = &input, .minus = 0, .cutoff = r->p->cutoff, .out = &root};
        yard_coro_finish_t fin;
        yard_coro_finish_init(&fin);
        if (yard_coro_task(&fin,
                           (yard_coro_perm_t[]){{&root.obj, YARD_PERM_FULL},
                                                {&input.obj, YARD_PERM_READ}},
                           2, pfib_task, &ra) != 0) {
            r->failed = true;
            return;
        }
        yard_coro_finish_wait(&fin);
        out->result = root.value;
        out->tasks = root.tasks;
        out->inline_fallbacks = root.fallbacks;
    } else {
        struct cfib root = {.n = r->p->n, .cutoff = r->p->cutoff};
        yard_coro_t *c = yard_coro_spawn(cfib_task, &root);
        if (!c) {
            r->failed = true;
            return;
        }
        yard_coro_join(c);
        out->result = root.result;
        out->tasks = root.tasks;
        out->inline_fallbacks = root.fallbacks;
    }
    double t1 = yard_tasks_now();
    yard_coro_get_stats(&s1);
    out->time_s = t1 - t0;
    out->steals = (int64_t)(s1.steals - s0.steals);
    out->stacks_mapped = (int64_t)(s1.stacks_mapped - s0.stacks_mapped);
    out->inlined = (int64_t)(s1.inlined - s0.inlined);
}

static int crun(const yard_tasks_params_t *p, bool perms, yard_tasks_rep_t *out, char *err,
                size_t errlen)
{
    struct crun r = {.p = p, .perms = perms, .out = out};
    yard_coro_opts_t opts = {.workers = p->workers};
    double t0 = yard_tasks_now();
    int rc = yard_coro_run(&opts, crun_main, &r);
    out->wall_s = yard_tasks_now() - t0;
    if (rc != 0) {
        snprintf(err, errlen, "yard_coro_run: %s", strerror(-rc));
        return -1;
    }
    if (r.failed) {
        snprintf(err, errlen, "cannot spawn the root task (out of memory)");
        return -1;
    }
    return 0;
}

static int run_coro(const yard_tasks_params_t *p, yard_tasks_rep_t *out, char *err, size_t errlen)
{
    return crun(p, false, out, err, errlen);
}

static int run_coro_perms(const yard_tasks_params_t *p, yard_tasks_rep_t *out, char *err,
                          size_t errlen)
{
    return crun(p, true, out, err, errlen);
}

const yard_tasks_runtime_t yard_tasks_rt_coro_perms = {
    .name = "coro-perms",
    .summary = "our runtime as the study's Program 1: yard_coro_task with [+result] [n], "
               "finish scopes",
    .run = run_coro_perms,
};

const yard_tasks_runtime_t yard_tasks_rt_coro = {
    .name = "coro",
    .summary = "our runtime's plain yard_coro_spawn / yard_coro_join, no permissions",
    .run = run_coro,
};
