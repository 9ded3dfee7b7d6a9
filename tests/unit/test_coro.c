/* Unit tests of the coroutine runtime's foundations: the raw context switch
 * (both backends), the guard page under a stack, and the Chase-Lev deque.
 * The scheduler, the netpoller and offload, synchronisation and inline
 * joins have test files of their own (test_coro_sched.c, test_coro_io.c,
 * test_coro_sync.c, test_coro_inline.c); coro_test.h holds what they share. */
#define _DEFAULT_SOURCE /* usleep, sigaltstack */

#include "coro_test.h"
#include "../../src/coro/deque.h"

/* ------------------------------------------------------------------------ */
/* raw context switch                                                        */

static yard_coro_ctx_t raw_main, raw_a;
static int raw_log[8];
static int raw_n;

static void raw_entry(void *arg)
{
    int base = *(int *)arg;
    raw_log[raw_n++] = base + 1;
    yard_coro_ctx_switch(&raw_a, &raw_main);
    raw_log[raw_n++] = base + 2;
    yard_coro_ctx_switch_final(&raw_a, &raw_main);
}

static void test_ctx_switch(void)
{
    yard_coro_stack_t st;
    ASSERT_EQ(yard_coro_stack_alloc(&st, 0, true), 0);
    int base = 10;
    yard_coro_ctx_make(&raw_a, st.lo, st.size, raw_entry, &base);
    raw_log[raw_n++] = 1;
    yard_coro_ctx_switch(&raw_main, &raw_a);
    raw_log[raw_n++] = 2;
    yard_coro_ctx_switch(&raw_main, &raw_a);
    raw_log[raw_n++] = 3;
    ASSERT_EQ(raw_n, 5);
    int want[] = {1, 11, 2, 12, 3};
    for (int i = 0; i < 5; i++)
        ASSERT_EQ(raw_log[i], want[i]);
    yard_coro_ctx_destroy(&raw_a);
    yard_coro_stack_free(&st);
}

/* Callee-saved registers and floating point must survive a switch. */
static yard_coro_uctx_t u_main, u_a;
static void uctx_entry(void *arg)
{
    double *d = arg;
    *d *= 2.5;
    yard_coro_uctx_switch(&u_a, &u_main);
    *d += 1.0;
    yard_coro_uctx_switch_final(&u_a, &u_main);
}

static void test_uctx_switch(void)
{
    yard_coro_stack_t st;
    ASSERT_EQ(yard_coro_stack_alloc(&st, 0, true), 0);
    double d = 2.0;
    volatile double keep = 3.25;
    yard_coro_uctx_make(&u_a, st.lo, st.size, uctx_entry, &d);
    yard_coro_uctx_switch(&u_main, &u_a);
    ASSERT(d == 5.0);
    yard_coro_uctx_switch(&u_main, &u_a);
    ASSERT(d == 6.0);
    ASSERT(keep == 3.25);
    yard_coro_uctx_destroy(&u_a);
    yard_coro_stack_free(&st);
}

/* ------------------------------------------------------------------------ */
/* guard page: a child overflows a coroutine stack and must die of SIGSEGV  */

static yard_coro_ctx_t g_main, g_co;

/* Bounded only by a limit far beyond the stack: 64 KiB of stack holds a few
 * hundred 256-byte frames, the limit is a million. */
static volatile int recurse_limit = 1000000;

__attribute__((noinline)) static int recurse(volatile char *prev, int depth)
{
    volatile char frame[256];
    frame[0] = (char)depth;
    frame[255] = prev ? prev[0] : 0;
    if (depth >= recurse_limit)
        return frame[0];
    return recurse(frame, depth + 1) + frame[255];
}

static void overflow_entry(void *arg)
{
    (void)arg;
    recurse(NULL, 0);
    yard_coro_ctx_switch_final(&g_co, &g_main);
}

static void test_guard_page(void)
{
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        /* The fault happens on the coroutine stack; the handler (ASan's, if
         * any) needs another stack to run on, which sigaltstack gives. */
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 2); /* ASan's report of the expected overflow is noise here */
        /* Let the fault kill the process, even where a sanitizer installed
         * its own SIGSEGV handler. */
        signal(SIGSEGV, SIG_DFL);
        static char alt[1 << 16];
        stack_t ss = {.ss_sp = alt, .ss_size = sizeof(alt)};
        sigaltstack(&ss, NULL);
        yard_coro_stack_t st;
        if (yard_coro_stack_alloc(&st, 64 * 1024, true) != 0)
            _exit(3);
        yard_coro_ctx_make(&g_co, st.lo, st.size, overflow_entry, NULL);
        yard_coro_ctx_switch(&g_main, &g_co);
        _exit(4); /* the recursion never ends without a fault */
    }
    int status;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (!WIFSIGNALED(status))
        TEST_FAIL("child exited with status %d instead of dying of SIGSEGV", WEXITSTATUS(status));
    ASSERT_EQ(WTERMSIG(status), SIGSEGV);
}

/* ------------------------------------------------------------------------ */
/* Chase-Lev deque: one owner, several thieves, every item taken once        */

#define DQ_ITEMS (200000 / SCALE)
#define DQ_THIEVES 3
static struct deque dq;
static atomic_uchar dq_seen[DQ_ITEMS + 1];
static atomic_bool dq_done;
static atomic_long dq_taken;

static void dq_take(void *p)
{
    uintptr_t v = (uintptr_t)p;
    if (v < 1 || v > DQ_ITEMS)
        TEST_FAIL("deque returned a bad item %lu", (unsigned long)v);
    if (atomic_fetch_add(&dq_seen[v], 1) != 0)
        TEST_FAIL("item %lu taken twice", (unsigned long)v);
    atomic_fetch_add(&dq_taken, 1);
}

static void *dq_thief(void *arg)
{
    (void)arg;
    while (!atomic_load(&dq_done) || deque_size(&dq)) {
        void *p = deque_steal(&dq);
        if (p)
            dq_take(p);
    }
    return NULL;
}

static void test_deque_stress(void)
{
    ASSERT_EQ(deque_init(&dq, 4), 0); /* tiny ring: exercise growth */
    pthread_t th[DQ_THIEVES];
    for (int i = 0; i < DQ_THIEVES; i++)
        ASSERT_EQ(pthread_create(&th[i], NULL, dq_thief, NULL), 0);
    uintptr_t next = 1;
    unsigned r = 12345;
    while (next <= DQ_ITEMS) {
        /* Push a burst, then pop some: owner and thieves race on both ends. */
        r = r * 1103515245 + 12345;
        unsigned burst = 1 + (r >> 16) % 64;
        for (unsigned i = 0; i < burst && next <= DQ_ITEMS; i++)
            ASSERT_EQ(deque_push(&dq, (void *)next++), 0);
        unsigned pops = (r >> 8) % 48;
        for (unsigned i = 0; i < pops; i++) {
            void *p = deque_pop(&dq);
            if (!p)
                break;
            dq_take(p);
        }
    }
    void *p;
    while ((p = deque_pop(&dq)))
        dq_take(p);
    atomic_store(&dq_done, true);
    for (int i = 0; i < DQ_THIEVES; i++)
        pthread_join(th[i], NULL);
    ASSERT_EQ(atomic_load(&dq_taken), DQ_ITEMS);
    for (int i = 1; i <= DQ_ITEMS; i++)
        ASSERT_EQ(atomic_load(&dq_seen[i]), 1);
    deque_destroy(&dq);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"ctx_switch", test_ctx_switch},
        {"uctx_switch", test_uctx_switch},
        {"guard_page", test_guard_page},
        {"deque_stress", test_deque_stress},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
