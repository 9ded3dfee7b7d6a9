/* Unit tests of joins that run the child inline on its parent's worker:
 * the child parking, the stack's bound, children abandoned at exit, and
 * finish running its tasks inline. */
#define _DEFAULT_SOURCE /* usleep, sigaltstack */

#include "coro_test.h"

/* ------------------------------------------------------------------------ */
/* joins that run the child inline                                           */

struct inl {
    int n;
    long result;
    yard_coro_t *ran_as; /* yard_coro_self() inside the child */
    int worker;
};

static void inl_child(void *arg)
{
    struct inl *x = arg;
    x->ran_as = yard_coro_self();
    x->result = x->n * 2;
}

/* The last spawned, joined first: nobody stole it (one worker), so the join
 * runs it on the joiner's stack: it sees the joiner as itself, and the
 * stats count it. The first spawned is not at the bottom of the deque when
 * its join comes... it is then, since the other one left: inlined too. */
static void inl_main(void *arg)
{
    uint64_t *inlined = arg;
    yard_coro_stats_t before, after;
    yard_coro_get_stats(&before);
    struct inl a = {.n = 1}, b = {.n = 2};
    yard_coro_t *ca = yard_coro_spawn(inl_child, &a);
    yard_coro_t *cb = yard_coro_spawn(inl_child, &b);
    yard_coro_join(cb);
    ASSERT_EQ(b.result, 4);
    ASSERT(b.ran_as == yard_coro_self());
    yard_coro_join(ca);
    ASSERT_EQ(a.result, 2);
    ASSERT(a.ran_as == yard_coro_self());
    /* Joined in spawn order: the first join finds the other child at the
     * bottom, so it parks; the worker runs both on stacks of their own. */
    struct inl c = {.n = 3}, d = {.n = 4};
    yard_coro_t *cc = yard_coro_spawn(inl_child, &c);
    yard_coro_t *cd = yard_coro_spawn(inl_child, &d);
    yard_coro_join(cc);
    ASSERT(c.ran_as == cc && c.result == 6);
    yard_coro_join(cd); /* done by now: ran while we were parked */
    ASSERT(d.ran_as == cd && d.result == 8);
    yard_coro_get_stats(&after);
    *inlined = after.inlined - before.inlined;
}

static void test_join_runs_inline(void)
{
    uint64_t inlined = 0;
    ASSERT_EQ(yard_coro_run(&(yard_coro_opts_t){.workers = 1}, inl_main, &inlined), 0);
    ASSERT_U64_EQ(inlined, 2);
}

/* A child run inline that parks parks its host, which resumes with it. */
static yard_coro_chan_t *inl_ch;
static void inl_receiver(void *arg)
{
    void *v = NULL;
    ASSERT_EQ(yard_coro_chan_recv(inl_ch, &v), 0);
    *(intptr_t *)arg = (intptr_t)v;
}

static void inl_sender(void *arg)
{
    yard_coro_sleep_ns(2000000);
    ASSERT_EQ(yard_coro_chan_send(inl_ch, arg), 0);
}

static void inl_park_main(void *arg)
{
    inl_ch = yard_coro_chan_new(0);
    intptr_t got = 0;
    yard_coro_t *s = yard_coro_spawn(inl_sender, (void *)(intptr_t)42);
    yard_coro_t *r = yard_coro_spawn(inl_receiver, &got);
    yard_coro_join(r); /* inline: parks on the channel until the sender sends */
    ASSERT_EQ(got, 42);
    yard_coro_join(s);
    yard_coro_chan_free(inl_ch);
    yard_coro_stats_t st;
    yard_coro_get_stats(&st);
    *(uint64_t *)arg = st.inlined;
}

static void test_inline_child_parks(void)
{
    for (unsigned workers = 1; workers <= 2; workers++) {
        uint64_t inlined = 0;
        ASSERT_EQ(yard_coro_run(&(yard_coro_opts_t){.workers = workers}, inl_park_main,
                                &inlined),
                  0);
        if (workers == 1)
            ASSERT(inlined >= 1);
    }
}

/* Recursion through inline joins on a small stack: once half of it is
 * used, joins stop inlining and children get stacks of their own, so this
 * does not overflow (the guard page would fault). */
static long inl_fib(int n);
static void inl_fib_child(void *arg)
{
    long *x = arg;
    *x = inl_fib((int)*x);
}

static long inl_fib(int n)
{
    char pad[1024]; /* a fat frame: the stack fills quickly */
    memset(pad, n, sizeof pad);
    if (n < 2)
        return n + (pad[0] - n);
    long a = n - 1, b = n - 2;
    yard_coro_t *ca = yard_coro_spawn(inl_fib_child, &a);
    yard_coro_t *cb = yard_coro_spawn(inl_fib_child, &b);
    yard_coro_join(cb);
    yard_coro_join(ca);
    return a + b;
}

static void inl_fib_main(void *arg)
{
    *(long *)arg = inl_fib(20);
}

static void test_inline_bounded_by_stack(void)
{
    long r = 0;
    yard_coro_opts_t o = {.workers = 2, .stack_size = 16 * 1024};
    ASSERT_EQ(yard_coro_run(&o, inl_fib_main, &r), 0);
    ASSERT_EQ(r, 6765);
}

/* A host abandoned at exit while parked inside an inline child: the
 * scheduler frees the child's descriptor too (ASan's leak check). */
static yard_coro_waitq_t inl_never_q;
static atomic_uint inl_never_word;
static void inl_forever(void *arg)
{
    (void)arg;
    yard_coro_waitq_wait(&inl_never_q, &inl_never_word, 0, 0);
}

static void inl_host(void *arg)
{
    yard_coro_t *c = yard_coro_spawn(inl_forever, NULL);
    yard_coro_join(c); /* never returns */
}

static void inl_abandon_main(void *arg)
{
    atomic_int *spawned = arg;
    yard_coro_go(inl_host, NULL);
    yard_coro_t *never_run = yard_coro_spawn(inl_forever, NULL); /* never started */
    (void)never_run;
    yard_coro_sleep_ns(2000000);
    atomic_store(spawned, 1);
}

static void test_inline_abandoned_at_exit(void)
{
    atomic_int done = 0;
    ASSERT_EQ(yard_coro_run(&(yard_coro_opts_t){.workers = 1}, inl_abandon_main, &done), 0);
    ASSERT_EQ(atomic_load(&done), 1);
}

/* A finish scope's wait runs its own unstarted tasks inline, not another
 * scope's. */
static void inl_task(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
}

static void inl_finish_main(void *arg)
{
    uint64_t *inlined = arg;
    atomic_int count = 0;
    yard_coro_finish_t outer, inner;
    yard_coro_finish_init(&outer);
    yard_coro_finish_init(&inner);
    ASSERT_EQ(yard_coro_task(&outer, NULL, 0, inl_task, &count), 0);
    for (int i = 0; i < 3; i++)
        ASSERT_EQ(yard_coro_task(&inner, NULL, 0, inl_task, &count), 0);
    yard_coro_stats_t before, after;
    yard_coro_get_stats(&before);
    yard_coro_finish_wait(&inner); /* its three are at the bottom: inline */
    yard_coro_get_stats(&after);
    ASSERT_EQ(atomic_load(&count) >= 3, 1);
    *inlined = after.inlined - before.inlined;
    yard_coro_finish_wait(&outer); /* below the others: it was run or is inlined now */
    ASSERT_EQ(atomic_load(&count), 4);
}

static void test_finish_runs_tasks_inline(void)
{
    uint64_t inlined = 0;
    ASSERT_EQ(yard_coro_run(&(yard_coro_opts_t){.workers = 1}, inl_finish_main, &inlined), 0);
    ASSERT_U64_EQ(inlined, 3);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"join_runs_inline", test_join_runs_inline},
        {"inline_child_parks", test_inline_child_parks},
        {"inline_bounded_by_stack", test_inline_bounded_by_stack},
        {"inline_abandoned_at_exit", test_inline_abandoned_at_exit},
        {"finish_runs_tasks_inline", test_finish_runs_tasks_inline},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
