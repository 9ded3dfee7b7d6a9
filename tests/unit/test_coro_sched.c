/* Unit tests of the coroutine scheduler: spawn and join, yield, sleeps and
 * deadlines, running twice, stealing, no poller thread, waits on two fds,
 * drained reads that park. */
#define _DEFAULT_SOURCE /* usleep, sigaltstack */

#include "coro_test.h"

/* ------------------------------------------------------------------------ */
/* scheduler                                                                 */

#define MANY (100000 / SCALE)
static atomic_long many_count;

static void many_child(void *arg)
{
    atomic_fetch_add((atomic_long *)arg, 1);
}

static void many_main(void *arg)
{
    (void)arg;
    yard_coro_t **h = malloc(sizeof(*h) * MANY);
    ASSERT(h);
    for (int i = 0; i < MANY; i++) {
        h[i] = yard_coro_spawn(many_child, &many_count);
        ASSERT(h[i]);
    }
    for (int i = 0; i < MANY; i++)
        yard_coro_join(h[i]);
    ASSERT_EQ(atomic_load(&many_count), MANY);
    free(h);
}

static void test_spawn_join_many(void)
{
    yard_coro_opts_t o = {.workers = 2};
    ASSERT_EQ(yard_coro_run(&o, many_main, NULL), 0);
    ASSERT_EQ(atomic_load(&many_count), MANY);
}

/* Yield ping-pong: two coroutines alternate strictly on one worker. */
static int pp_turn = -1, pp_errors;
static void pp_child(void *arg)
{
    int me = (int)(intptr_t)arg;
    for (int i = 0; i < 1000; i++) {
        if (pp_turn == -1)
            pp_turn = me; /* whichever starts first */
        if (pp_turn != me)
            pp_errors++;
        pp_turn = !me;
        yard_coro_yield();
    }
}

static void pp_main(void *arg)
{
    (void)arg;
    yard_coro_t *a = yard_coro_spawn(pp_child, (void *)0);
    yard_coro_t *b = yard_coro_spawn(pp_child, (void *)1);
    yard_coro_join(a);
    yard_coro_join(b);
}

static void test_yield_one_worker(void)
{
    yard_coro_opts_t o = {.workers = 1};
    ASSERT_EQ(yard_coro_run(&o, pp_main, NULL), 0);
    ASSERT_EQ(pp_errors, 0);
}

/* ------------------------------------------------------------------------ */
/* timers                                                                    */

static atomic_int sleep_ok;
static void sleeper(void *arg)
{
    uint64_t ns = (uint64_t)(uintptr_t)arg;
    uint64_t t0 = now_ns();
    yard_coro_sleep_ns(ns);
    uint64_t t1 = now_ns();
    if (t1 - t0 < ns)
        TEST_FAIL("woke %llu ns early", (unsigned long long)(ns - (t1 - t0)));
    atomic_fetch_add(&sleep_ok, 1);
}

static void sleep_main(void *arg)
{
    (void)arg;
    yard_coro_t *h[20];
    for (int i = 0; i < 20; i++)
        h[i] = yard_coro_spawn(sleeper, (void *)(uintptr_t)((20 - i) * 1000000ull));
    for (int i = 0; i < 20; i++)
        yard_coro_join(h[i]);
    /* A deadline on a wait that never becomes ready. */
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    uint64_t t0 = now_ns();
    char c;
    ASSERT_EQ(yard_coro_read(sv[0], &c, 1, t0 + 30000000), -ETIMEDOUT);
    ASSERT_GE(now_ns(), t0 + 30000000);
    yard_coro_close(sv[0]);
    close(sv[1]);
}

static void test_sleep_and_deadline(void)
{
    ASSERT_EQ(yard_coro_run(&(yard_coro_opts_t){.workers = 2}, sleep_main, NULL), 0);
    ASSERT_EQ(atomic_load(&sleep_ok), 20);
}

static void busy_main(void *arg)
{
    (void)arg;
    int *flag = arg;
    *flag = 1;
}

/* ------------------------------------------------------------------------ */
/* scheduler v2: stealing, no poller thread, two-fd waits, drained reads     */

/* Every coroutine is spawned by one worker, so all land on its deque: the
 * other worker must steal to help. Each spins for a while and says where it
 * ran. */
#define SKEW_TASKS 64
static atomic_int skew_ran[2];

static void skew_task(void *arg)
{
    (void)arg;
    uint64_t until = now_ns() + 2000000; /* 2 ms of CPU */
    while (now_ns() < until) {
    }
    int w = yard_coro_worker_id();
    if (w >= 0 && w < 2)
        atomic_fetch_add(&skew_ran[w], 1);
}

static void skew_main(void *arg)
{
    yard_coro_stats_t *st = arg;
    yard_coro_t *h[SKEW_TASKS];
    for (int i = 0; i < SKEW_TASKS; i++)
        h[i] = yard_coro_spawn(skew_task, NULL);
    for (int i = 0; i < SKEW_TASKS; i++)
        yard_coro_join(h[i]);
    yard_coro_get_stats(st);
}

static void test_steal_skewed(void)
{
    yard_coro_stats_t st;
    ASSERT_EQ(yard_coro_run(&(yard_coro_opts_t){.workers = 2}, skew_main, &st), 0);
    ASSERT_EQ(atomic_load(&skew_ran[0]) + atomic_load(&skew_ran[1]), SKEW_TASKS);
    ASSERT_GT(st.steals, 0);
    ASSERT_GT(atomic_load(&skew_ran[0]), 0);
    ASSERT_GT(atomic_load(&skew_ran[1]), 0);
}

/* The runtime's threads are its workers and the offload pool (its CPU
 * threads, the I/O and scan lanes): no poller thread. Read from /proc while a
 * coroutine sleeps, that is while the one worker blocks in the netpoller. */
static int count_threads(void)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)getpid());
    FILE *f = fopen(path, "r");
    ASSERT(f);
    char line[256];
    int n = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    fclose(f);
    return n;
}

static int threads_during;
static uint64_t blocks_during;
static void threads_main(void *arg)
{
    (void)arg;
    yard_coro_stats_t s0, s1;
    yard_coro_get_stats(&s0);
    yard_coro_sleep_ns(20000000); /* 20 ms: the worker sleeps in epoll_wait */
    yard_coro_get_stats(&s1);
    threads_during = count_threads();
    blocks_during = s1.netpoll_blocks - s0.netpoll_blocks;
}

/* The thread count once the threads of earlier runs, joined but perhaps
 * not yet gone from /proc, have left: the same for 20 reads 1 ms apart
 * (at most 2 s). */
static int settled_thread_count(void)
{
    int n = count_threads(), same = 0;
    for (int i = 0; i < 2000 && same < 20; i++) {
        usleep(1000);
        int m = count_threads();
        same = m == n ? same + 1 : 0;
        n = m;
    }
    return n;
}

static void test_no_poller_thread(void)
{
    int before = settled_thread_count();
    ASSERT_EQ(yard_coro_run(&(yard_coro_opts_t){.workers = 1, .offload_threads = 1}, threads_main,
                            NULL),
              0);
    ASSERT_EQ(threads_during, before + 3); /* + one CPU thread, the I/O and scan lanes */
    ASSERT_GT(blocks_during, 0);           /* the sleep was spent in the netpoller */
}

/* yard_coro_wait_fd2: either of two fds wakes the coroutine. */
static int w2_a[2], w2_b[2];
static atomic_int w2_stage;

static void *w2_writer(void *arg)
{
    (void)arg;
    wait_stage(&w2_stage, 1);
    ASSERT_EQ(write(w2_b[1], "b", 1), 1); /* the second fd of the pair */
    return NULL;
}

static void w2_main(void *arg)
{
    (void)arg;
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, w2_a), 0);
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, w2_b), 0);
    ASSERT_EQ(yard_coro_register_fd(w2_a[0]), 0);
    ASSERT_EQ(yard_coro_register_fd(w2_b[0]), 0);
    /* Nothing on either: the deadline. */
    uint64_t t0 = now_ns();
    ASSERT_EQ(yard_coro_wait_fd2(w2_a[0], YARD_CORO_IN, w2_b[0], YARD_CORO_IN, t0 + 20000000),
              -ETIMEDOUT);
    ASSERT_GE(now_ns(), t0 + 20000000);
    /* A byte on the second while parked. */
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, w2_writer, NULL), 0);
    atomic_store(&w2_stage, 1);
    ASSERT_EQ(yard_coro_wait_fd2(w2_a[0], YARD_CORO_IN, w2_b[0], YARD_CORO_IN, 0), 0);
    pthread_join(th, NULL);
    char c;
    ASSERT_EQ(read(w2_b[0], &c, 1), 1);
    /* A byte already on the first: at once, without parking. */
    ASSERT_EQ(write(w2_a[1], "a", 1), 1);
    ASSERT_EQ(yard_coro_wait_fd2(w2_a[0], YARD_CORO_IN, w2_b[0], YARD_CORO_IN, 0), 0);
    ASSERT_EQ(read(w2_a[0], &c, 1), 1);
    /* The waiter slots were given back: single waits on each still work. */
    ASSERT_EQ(yard_coro_wait_fd(w2_a[0], YARD_CORO_IN, now_ns() + 5000000), -ETIMEDOUT);
    ASSERT_EQ(yard_coro_wait_fd(w2_b[0], YARD_CORO_IN, now_ns() + 5000000), -ETIMEDOUT);
    for (int i = 0; i < 2; i++) {
        yard_coro_close(w2_a[i]);
        yard_coro_close(w2_b[i]);
    }
}

static void test_wait_fd2(void)
{
    ASSERT_EQ(yard_coro_run(&(yard_coro_opts_t){.workers = 1}, w2_main, NULL), 0);
}

/* yard_coro_fd_consume: after a read that took everything, the next wait
 * parks until new data instead of returning for the edge the read used. */
static int dr_sv[2];
static atomic_int dr_stage;

static void *dr_writer(void *arg)
{
    (void)arg;
    wait_stage(&dr_stage, 1);
    usleep(20000); /* not a correctness wait: lets the reader park first */
    atomic_store(&dr_stage, 2);
    ASSERT_EQ(write(dr_sv[1], "second", 6), 6);
    return NULL;
}

static void dr_main(void *arg)
{
    (void)arg;
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, dr_sv), 0);
    ASSERT_EQ(yard_coro_register_fd(dr_sv[0]), 0);
    /* Data arrives while nobody waits: its edge is recorded. */
    ASSERT_EQ(write(dr_sv[1], "first", 5), 5);
    yard_coro_sleep_ns(5000000); /* the netpoller sees the edge meanwhile */
    yard_coro_fd_consume(dr_sv[0], YARD_CORO_IN);
    char buf[64];
    ASSERT_EQ(read(dr_sv[0], buf, sizeof buf), 5); /* less than asked: drained */
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, dr_writer, NULL), 0);
    atomic_store(&dr_stage, 1);
    ASSERT_EQ(yard_coro_wait_fd(dr_sv[0], YARD_CORO_IN, now_ns() + 5000000000ull), 0);
    /* Woken by the new data, not by the edge of the data already read. */
    ASSERT_EQ(atomic_load(&dr_stage), 2);
    ASSERT(!yard_coro_fd_consume(dr_sv[0], YARD_CORO_IN)); /* the peer is still there */
    ASSERT_EQ(read(dr_sv[0], buf, sizeof buf), 6);
    pthread_join(th, NULL);
    /* The peer closes: its edge says so, and from then on a short read no
     * longer means "wait" (no edge would come to end that wait). */
    close(dr_sv[1]);
    ASSERT_EQ(yard_coro_wait_fd(dr_sv[0], YARD_CORO_IN, now_ns() + 5000000000ull), 0);
    ASSERT(yard_coro_fd_consume(dr_sv[0], YARD_CORO_IN));
    ASSERT_EQ(read(dr_sv[0], buf, sizeof buf), 0);
    yard_coro_close(dr_sv[0]);
}

static void test_drained_read_parks(void)
{
    ASSERT_EQ(yard_coro_run(&(yard_coro_opts_t){.workers = 1}, dr_main, NULL), 0);
}

static void test_run_twice(void)
{
    int flag = 0;
    ASSERT_EQ(yard_coro_run(NULL, busy_main, &flag), 0);
    ASSERT_EQ(flag, 1);
    flag = 0;
    ASSERT_EQ(yard_coro_run(NULL, busy_main, &flag), 0);
    ASSERT_EQ(flag, 1);
    ASSERT(yard_coro_self() == NULL);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"spawn_join_many", test_spawn_join_many},
        {"yield_one_worker", test_yield_one_worker},
        {"sleep_and_deadline", test_sleep_and_deadline},
        {"run_twice", test_run_twice},
        {"steal_skewed", test_steal_skewed},
        {"no_poller_thread", test_no_poller_thread},
        {"wait_fd2", test_wait_fd2},
        {"drained_read_parks", test_drained_read_parks},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
