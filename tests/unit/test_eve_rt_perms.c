/* The Eve runtime library (src/eve_rt, eve_rt.h): permissions acquired
 * and released on the coro runtime, tasks, and finish's hand-over. */
#define _DEFAULT_SOURCE /* kill, setenv */

#include "eve_rt_test.h"

/* ---- permissions, tasks and finish ------------------------------------------------------------ */

static void run(unsigned workers, void (*fn)(void *), void *arg)
{
    yard_coro_opts_t o = {.workers = workers};
    ASSERT_EQ(yard_coro_run(&o, fn, arg), 0);
}

struct counter_obj {
    eve_obj_t h;
    long value;
};

static struct counter_obj X, Y;

static void acquire_main(void *arg)
{
    (void)arg;
    eve_cx_t cx;
    eve_cx_init(&cx);
    yard_coro_perm_t p[5] = {
        {&Y.h.perm, YARD_PERM_READ},
        {NULL, YARD_PERM_FULL},
        {&X.h.perm, YARD_PERM_READ},
        {&Y.h.perm, YARD_PERM_FULL},
        {&X.h.perm, YARD_PERM_READ},
    };
    eve_acquire(&cx, p, 5, NULL);
    ASSERT_EQ(cx.nheld, 2);
    yard_coro_obj_t *lo = &X.h.perm < &Y.h.perm ? &X.h.perm : &Y.h.perm;
    ASSERT(cx.held[0].obj == lo);
    ASSERT_EQ(X.h.perm.readers, 1);
    ASSERT_EQ(Y.h.perm.full, 1);
    eve_release_held(&cx);
    ASSERT_EQ(cx.nheld, 0);
    ASSERT_EQ(X.h.perm.readers, 0);
    ASSERT_EQ(Y.h.perm.full, 0);
    eve_acquire(&cx, NULL, 0, NULL); /* nothing: no work */
    ASSERT_EQ(cx.nheld, 0);
    eve_cx_done(&cx);
}

static void fail_too_many(void *arg)
{
    (void)arg;
    static struct counter_obj objs[YARD_CORO_MAX_PERMS + 1];
    yard_coro_perm_t p[YARD_CORO_MAX_PERMS + 1];
    for (int i = 0; i <= YARD_CORO_MAX_PERMS; i++)
        p[i] = (yard_coro_perm_t){&objs[i].h.perm, YARD_PERM_READ};
    eve_cx_t cx;
    eve_cx_init(&cx);
    eve_acquire(&cx, p, YARD_CORO_MAX_PERMS + 1, "p.eve:5:5");
}

/* The hand-over: a task holding FULL on X whose finish child asks FULL on
 * X too. Without it the child would wait for the parent, which waits for
 * the child. */
struct child_env {
    struct counter_obj *x;
    int depth;
};

static void child_fn(eve_cx_t *cx, void *env)
{
    struct child_env *e = env;
    ASSERT_EQ(cx->nheld, 1);
    ASSERT(cx->held[0].obj == &e->x->h.perm);
    e->x->value += 10;
    if (e->depth > 0) {
        /* Again one level down: the child is a parent in turn. */
        yard_coro_finish_t f;
        eve_finish_begin(cx, &f);
        for (int i = 0; i < 2; i++) {
            struct child_env *c = eve_task_env(sizeof *c, child_fn);
            c->x = e->x;
            c->depth = e->depth - 1;
            yard_coro_perm_t p = {&e->x->h.perm, YARD_PERM_FULL};
            eve_task_spawn(cx, &f, c, &p, 1, "h.eve:2:2");
        }
        eve_finish_end(cx, &f);
        ASSERT_EQ(cx->nheld, 1); /* taken back */
    }
}

static void parent_fn(eve_cx_t *cx, void *env)
{
    struct child_env *e = env;
    ASSERT_EQ(cx->nheld, 1);
    e->x->value = 1;
    yard_coro_finish_t f;
    eve_finish_begin(cx, &f);
    for (int i = 0; i < 3; i++) {
        struct child_env *c = eve_task_env(sizeof *c, child_fn);
        c->x = e->x;
        c->depth = 2;
        yard_coro_perm_t p = {&e->x->h.perm, YARD_PERM_FULL};
        eve_task_spawn(cx, &f, c, &p, 1, "h.eve:1:1");
    }
    eve_finish_end(cx, &f);
    /* 3 children, each with 2 + 4 descendants: 21 tasks of 10. */
    ASSERT_EQ(e->x->value, 1 + 21 * 10);
    ASSERT_EQ(cx->nheld, 1);
    ASSERT(cx->held[0].obj == &e->x->h.perm);
    ASSERT_EQ(e->x->h.perm.full, 1); /* held again */
}

static void handover_main(void *arg)
{
    (void)arg;
    eve_cx_t cx;
    eve_cx_init(&cx);
    yard_coro_finish_t f;
    eve_finish_begin(&cx, &f);
    struct child_env *e = eve_task_env(sizeof *e, parent_fn);
    e->x = &X;
    yard_coro_perm_t p[2] = {{&X.h.perm, YARD_PERM_FULL}, {&X.h.perm, YARD_PERM_READ}};
    eve_task_spawn(&cx, &f, e, p, 2, "h.eve:0:0");
    eve_finish_end(&cx, &f); /* holds nothing: a plain wait */
    ASSERT_EQ(X.value, 211);
    ASSERT_EQ(X.h.perm.full, 0);
    eve_cx_done(&cx);
}

static void test_permissions(void)
{
    run(2, acquire_main, NULL);
    expect_fail(fail_too_many, NULL,
                "p.eve:5:5: run-time error: permissions on more than 16 objects at once\n");
    run(2, handover_main, NULL);
    run(1, handover_main, NULL);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"permissions", test_permissions},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
