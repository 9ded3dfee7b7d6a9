/* yard_coro_perms_acquire / yard_coro_perms_release: a coroutine taking
 * permissions for itself, by the same rules as a task's grant, and queued
 * together with tasks. */
#include "yard/coro.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "test.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SCALE 10
#else
#define SCALE 1
#endif

static void run(unsigned workers, void (*fn)(void *), void *arg)
{
    yard_coro_opts_t o = {.workers = workers};
    ASSERT_EQ(yard_coro_run(&o, fn, arg), 0);
}

/* Parks (sleeping 1 ms at a time) until *flag is want, at most 5 s. */
static bool wait_flag(atomic_int *flag, int want)
{
    for (int i = 0; i < 5000; i++) {
        if (atomic_load(flag) == want)
            return true;
        yard_coro_sleep_ns(1000000);
    }
    return atomic_load(flag) == want;
}

/* Whether a request is queued on o, read under o's lock (the field the
 * runtime guards it with); parks up to 5 s for one to be. */
static bool wait_queued(yard_coro_obj_t *o)
{
    for (int i = 0; i < 5000; i++) {
        while (atomic_exchange_explicit(&o->lock, 1, memory_order_acquire))
            ;
        bool queued = o->wait_head != NULL;
        atomic_store_explicit(&o->lock, 0, memory_order_release);
        if (queued)
            return true;
        yard_coro_sleep_ns(1000000);
    }
    return false;
}

/* ------------------------------------------------------------------------ */
/* bad lists                                                                 */

static yard_coro_obj_t o1, o2;

static void invalid_main(void *arg)
{
    (void)arg;
    yard_coro_perm_t dup[2] = {{&o1, YARD_PERM_READ}, {&o1, YARD_PERM_FULL}};
    ASSERT_EQ(yard_coro_perms_acquire(dup, 2), -EINVAL);
    yard_coro_perm_t null_obj = {NULL, YARD_PERM_READ};
    ASSERT_EQ(yard_coro_perms_acquire(&null_obj, 1), -EINVAL);
    yard_coro_perm_t bad_mode = {&o1, (enum yard_coro_perm_mode)7};
    ASSERT_EQ(yard_coro_perms_acquire(&bad_mode, 1), -EINVAL);
    yard_coro_perm_t many[YARD_CORO_MAX_PERMS + 1];
    static yard_coro_obj_t objs[YARD_CORO_MAX_PERMS + 1];
    for (int i = 0; i <= YARD_CORO_MAX_PERMS; i++)
        many[i] = (yard_coro_perm_t){&objs[i], YARD_PERM_FULL};
    ASSERT_EQ(yard_coro_perms_acquire(many, YARD_CORO_MAX_PERMS + 1), -EINVAL);
    ASSERT_EQ(yard_coro_perms_acquire(NULL, 0), 0);
    /* The most there may be, given in descending address order. */
    for (int i = 0; i < YARD_CORO_MAX_PERMS; i++)
        many[i] = (yard_coro_perm_t){&objs[YARD_CORO_MAX_PERMS - 1 - i], YARD_PERM_FULL};
    ASSERT_EQ(yard_coro_perms_acquire(many, YARD_CORO_MAX_PERMS), 0);
    for (int i = 0; i < YARD_CORO_MAX_PERMS; i++)
        ASSERT_EQ(objs[i].full, 1);
    yard_coro_perms_release(many, YARD_CORO_MAX_PERMS);
    for (int i = 0; i < YARD_CORO_MAX_PERMS; i++)
        ASSERT_EQ(objs[i].full, 0);
}

static void test_invalid(void)
{
    yard_coro_perm_t p = {&o1, YARD_PERM_READ};
    ASSERT_EQ(yard_coro_perms_acquire(&p, 1), -EINVAL); /* not a coroutine */
    run(1, invalid_main, NULL);
}

/* ------------------------------------------------------------------------ */
/* FULL excludes, READ shares                                                */

static atomic_int got, released;

static void second_full(void *arg)
{
    yard_coro_perm_t *p = arg;
    ASSERT_EQ(yard_coro_perms_acquire(p, 1), 0);
    /* The holder released before we got in. */
    ASSERT_EQ(atomic_load(&released), 1);
    atomic_store(&got, 1);
    yard_coro_perms_release(p, 1);
}

static void full_main(void *arg)
{
    (void)arg;
    atomic_store(&got, 0);
    atomic_store(&released, 0);
    yard_coro_perm_t p = {&o1, YARD_PERM_FULL};
    ASSERT_EQ(yard_coro_perms_acquire(&p, 1), 0);
    yard_coro_t *c = yard_coro_spawn(second_full, &p);
    yard_coro_sleep_ns(30 * 1000000ull); /* it has started and is waiting */
    ASSERT_EQ(atomic_load(&got), 0);
    atomic_store(&released, 1);
    yard_coro_perms_release(&p, 1);
    ASSERT(wait_flag(&got, 1));
    yard_coro_join(c);
    ASSERT_EQ(o1.full, 0);
    ASSERT_EQ(o1.readers, 0);
}

static void test_full_blocks(void)
{
    run(2, full_main, NULL);
    run(1, full_main, NULL);
}

static void second_reader(void *arg)
{
    yard_coro_perm_t *p = arg;
    ASSERT_EQ(yard_coro_perms_acquire(p, 1), 0);
    atomic_store(&got, 1);
    yard_coro_perms_release(p, 1);
}

static void read_main(void *arg)
{
    (void)arg;
    atomic_store(&got, 0);
    yard_coro_perm_t p = {&o1, YARD_PERM_READ};
    ASSERT_EQ(yard_coro_perms_acquire(&p, 1), 0);
    yard_coro_t *c = yard_coro_spawn(second_reader, &p);
    ASSERT(wait_flag(&got, 1)); /* it got in while we hold READ */
    yard_coro_join(c);
    ASSERT_EQ(o1.readers, 1);
    yard_coro_perms_release(&p, 1);
    ASSERT_EQ(o1.readers, 0);
}

static void test_readers_share(void)
{
    run(2, read_main, NULL);
}

/* ------------------------------------------------------------------------ */
/* queued together with tasks, FIFO                                          */

static atomic_int order_log[4];
static atomic_int order_n;

static void log_step(int who)
{
    order_log[atomic_fetch_add(&order_n, 1)] = who;
}

static void reader_task(void *arg)
{
    (void)arg;
    log_step(3);
}

static void queued_acquirer(void *arg)
{
    yard_coro_perm_t *p = arg;
    ASSERT_EQ(yard_coro_perms_acquire(p, 1), 0);
    log_step(2);
    yard_coro_sleep_ns(10 * 1000000ull); /* the task must still wait */
    yard_coro_perms_release(p, 1);
}

static void queue_main(void *arg)
{
    (void)arg;
    atomic_store(&order_n, 0);
    yard_coro_perm_t full = {&o2, YARD_PERM_FULL};
    yard_coro_perm_t read = {&o2, YARD_PERM_READ};
    ASSERT_EQ(yard_coro_perms_acquire(&full, 1), 0);
    yard_coro_t *c = yard_coro_spawn(queued_acquirer, &full);
    ASSERT(wait_queued(&o2)); /* the acquirer waits on o2 */
    yard_coro_finish_t f;
    yard_coro_finish_init(&f);
    /* A reader task: queued behind the acquirer, not before it. */
    ASSERT_EQ(yard_coro_task(&f, &read, 1, reader_task, NULL), 0);
    log_step(1);
    yard_coro_perms_release(&full, 1);
    yard_coro_finish_wait(&f);
    yard_coro_join(c);
    ASSERT_EQ(atomic_load(&order_n), 3);
    ASSERT_EQ(order_log[0], 1);
    ASSERT_EQ(order_log[1], 2);
    ASSERT_EQ(order_log[2], 3);
    ASSERT_EQ(o2.full, 0);
    ASSERT_EQ(o2.readers, 0);
    ASSERT(o2.wait_head == NULL);
}

static atomic_int task_running, task_done;

static void holding_task(void *arg)
{
    (void)arg;
    atomic_store(&task_running, 1);
    yard_coro_sleep_ns(20 * 1000000ull);
    atomic_store(&task_done, 1);
}

/* A task holds the object; the acquirer waits for it to finish. */
static void behind_task_main(void *arg)
{
    (void)arg;
    atomic_store(&task_running, 0);
    atomic_store(&task_done, 0);
    yard_coro_perm_t full = {&o2, YARD_PERM_FULL};
    yard_coro_finish_t f;
    yard_coro_finish_init(&f);
    ASSERT_EQ(yard_coro_task(&f, &full, 1, holding_task, NULL), 0);
    ASSERT(wait_flag(&task_running, 1));
    ASSERT_EQ(yard_coro_perms_acquire(&full, 1), 0);
    ASSERT_EQ(atomic_load(&task_done), 1);
    yard_coro_perms_release(&full, 1);
    yard_coro_finish_wait(&f);
}

static void test_queue_with_tasks(void)
{
    run(2, queue_main, NULL);
    run(1, queue_main, NULL);
    run(2, behind_task_main, NULL);
}

/* ------------------------------------------------------------------------ */
/* stress: acquirers and tasks on a few objects, plain counters               */

#define NOBJ 4
static yard_coro_obj_t sobj[NOBJ];
static long counter[NOBJ]; /* written only under FULL: TSan would see a race */
static atomic_long want[NOBJ];
static atomic_long read_sum;

static unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 16;
}

/* A random list: each object absent, READ or FULL. */
static size_t pick(unsigned *seed, yard_coro_perm_t *out)
{
    size_t n = 0;
    for (int i = 0; i < NOBJ; i++) {
        unsigned r = rnd(seed) % 3;
        if (r)
            out[n++] = (yard_coro_perm_t){&sobj[i], r == 1 ? YARD_PERM_READ : YARD_PERM_FULL};
    }
    /* Not always in address order: acquire sorts a copy. */
    if (n > 1 && rnd(seed) % 2) {
        yard_coro_perm_t t = out[0];
        out[0] = out[n - 1];
        out[n - 1] = t;
    }
    return n;
}

static void touch(const yard_coro_perm_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int k = (int)(p[i].obj - sobj);
        if (p[i].mode == YARD_PERM_FULL) {
            counter[k]++;
            atomic_fetch_add(&want[k], 1);
        } else {
            atomic_fetch_add(&read_sum, counter[k] >= 0 ? 1 : 0);
        }
    }
}

struct stress_task {
    yard_coro_perm_t p[NOBJ];
    size_t n;
};

static void stress_task_fn(void *arg)
{
    struct stress_task *t = arg;
    touch(t->p, t->n);
}

#define STRESS_COROS 16

static void stress_coro(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1u;
    int rounds = 2000 / SCALE;
    struct stress_task tasks[8];
    for (int r = 0; r < rounds; r++) {
        yard_coro_perm_t p[NOBJ];
        size_t n = pick(&seed, p);
        ASSERT_EQ(yard_coro_perms_acquire(p, n), 0);
        touch(p, n);
        if (rnd(&seed) % 4 == 0)
            yard_coro_yield(); /* hold it across a switch now and then */
        yard_coro_perms_release(p, n);
        if (r % 50 == 0) {
            /* A few tasks on the same objects, queued with the acquirers. */
            yard_coro_finish_t f;
            yard_coro_finish_init(&f);
            for (int i = 0; i < 8; i++) {
                tasks[i].n = pick(&seed, tasks[i].p);
                ASSERT_EQ(yard_coro_task(&f, tasks[i].p, tasks[i].n, stress_task_fn, &tasks[i]),
                          0);
            }
            yard_coro_finish_wait(&f);
        }
    }
}

static void stress_main(void *arg)
{
    (void)arg;
    yard_coro_t *c[STRESS_COROS];
    for (int i = 0; i < STRESS_COROS; i++)
        c[i] = yard_coro_spawn(stress_coro, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < STRESS_COROS; i++)
        yard_coro_join(c[i]);
}

static void test_stress(void)
{
    memset(counter, 0, sizeof counter);
    for (int i = 0; i < NOBJ; i++)
        atomic_store(&want[i], 0);
    run(4, stress_main, NULL);
    long total = 0;
    for (int i = 0; i < NOBJ; i++) {
        ASSERT_EQ(counter[i], atomic_load(&want[i]));
        ASSERT_EQ(sobj[i].full, 0);
        ASSERT_EQ(sobj[i].readers, 0);
        ASSERT(sobj[i].wait_head == NULL);
        total += counter[i];
    }
    ASSERT_GT(total, 0);
    ASSERT_GT(atomic_load(&read_sum), 0);
}

/* ------------------------------------------------------------------------ */
/* a task giving its permissions back before its body ends                   */

static yard_coro_obj_t o_early;
static atomic_int early_second_ran, early_first_done;

static void early_second(void *arg)
{
    (void)arg;
    ASSERT_EQ(o_early.full, 1); /* FULL: its own, granted after the first gave it back */
    atomic_store(&early_second_ran, 1);
}

static void early_first(void *arg)
{
    yard_coro_finish_t *f = arg;
    ASSERT_EQ(o_early.full, 1);
    yard_coro_perm_t p = {&o_early, YARD_PERM_FULL};
    ASSERT_EQ(yard_coro_task(f, &p, 1, early_second, NULL), 0);
    /* queued behind us until we give FULL back: not before */
    ASSERT(wait_queued(&o_early));
    ASSERT_EQ(atomic_load(&early_second_ran), 0);
    ASSERT_EQ(yard_coro_task_release_perms(), 0);
    ASSERT_EQ(yard_coro_task_release_perms(), 0); /* once: a second call changes nothing */
    ASSERT(wait_flag(&early_second_ran, 1)); /* it ran while this body still runs */
    atomic_store(&early_first_done, 1);
}

static void early_main(void *arg)
{
    (void)arg;
    atomic_store(&early_second_ran, 0);
    atomic_store(&early_first_done, 0);
    ASSERT_EQ(yard_coro_task_release_perms(), -EINVAL); /* not a task's body */
    yard_coro_finish_t f;
    yard_coro_finish_init(&f);
    yard_coro_perm_t p = {&o_early, YARD_PERM_FULL};
    ASSERT_EQ(yard_coro_task(&f, &p, 1, early_first, &f), 0);
    yard_coro_finish_wait(&f);
    ASSERT_EQ(atomic_load(&early_first_done), 1);
    /* nobody holds it, and the end of the first task did not give it back twice */
    ASSERT_EQ(o_early.full, 0);
    ASSERT_EQ(o_early.readers, 0);
}

static void test_task_releases_early(void)
{
    run(2, early_main, NULL);
    run(1, early_main, NULL);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"invalid", test_invalid},
        {"full_blocks", test_full_blocks},
        {"readers_share", test_readers_share},
        {"queue_with_tasks", test_queue_with_tasks},
        {"stress", test_stress},
        {"task_releases_early", test_task_releases_early},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
