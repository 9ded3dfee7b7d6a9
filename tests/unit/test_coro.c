/* Unit tests of the coroutine runtime: raw context switch, guard page,
 * deque, scheduler, timers, netpoller, offload, mutex, channel, wait queue. */
#define _DEFAULT_SOURCE /* usleep, sigaltstack */

#include "yard/coro.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/coro/deque.h"
#include "test.h"

/* Sanitized builds are several times slower: scale the counts down. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SCALE 10
#else
#define SCALE 1
#endif

static uint64_t now_ns(void)
{
    return yard_coro_now_ns();
}

/* For a plain thread that acts on a coroutine's cue: until *stage is want,
 * or 5 s (the assertion after it then says what went wrong). */
static void wait_stage(atomic_int *stage, int want)
{
    uint64_t t0 = now_ns();
    while (atomic_load(stage) != want && now_ns() - t0 < 5000000000ull)
        usleep(1000);
}

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

/* ------------------------------------------------------------------------ */
/* netpoller                                                                 */

static int np_sv[2];
static atomic_int np_state; /* 1: reader is about to park, 2: got the bytes */
static char np_buf[16];

static void np_reader(void *arg)
{
    (void)arg;
    atomic_store(&np_state, 1);
    ssize_t n = yard_coro_read(np_sv[0], np_buf, sizeof(np_buf), 0);
    ASSERT_EQ(n, 5);
    atomic_store(&np_state, 2);
}

static void *np_writer_thread(void *arg)
{
    (void)arg;
    /* Wait until the reader has run (and so parks, nothing being there). */
    wait_stage(&np_state, 1);
    usleep(20000); /* not a correctness wait: gives the reader time to park first */
    ASSERT_EQ(atomic_load(&np_state), 1);
    ASSERT_EQ(write(np_sv[1], "hello", 5), 5);
    return NULL;
}

static void np_main(void *arg)
{
    (void)arg;
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, np_sv), 0);
    yard_coro_stats_t s0, s1;
    yard_coro_get_stats(&s0);
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, np_writer_thread, NULL), 0);
    yard_coro_t *r = yard_coro_spawn(np_reader, NULL);
    yard_coro_join(r);
    pthread_join(th, NULL);
    yard_coro_get_stats(&s1);
    ASSERT_EQ(atomic_load(&np_state), 2);
    ASSERT_MEM_EQ(np_buf, "hello", 5);
    ASSERT_GT(s1.parks, s0.parks); /* the reader did park rather than block */
    yard_coro_close(np_sv[0]);
    close(np_sv[1]);
}

static void test_netpoll_socketpair(void)
{
    /* One worker: if the read blocked the thread, nothing else could run,
     * and the join would never complete. */
    ASSERT_EQ(yard_coro_run(&(yard_coro_opts_t){.workers = 1}, np_main, NULL), 0);
}

/* Echo over many socketpairs at once, both ends coroutines. */
#define ECHO_PAIRS 64
#define ECHO_ROUNDS (200 / SCALE)
static void echo_server(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[64];
    for (;;) {
        ssize_t n = yard_coro_read(fd, buf, sizeof(buf), 0);
        if (n <= 0)
            break;
        ASSERT_EQ(yard_coro_write(fd, buf, (size_t)n, 0), n);
    }
    yard_coro_close(fd);
}

static atomic_int echo_ok;
static void echo_client(void *arg)
{
    int fd = (int)(intptr_t)arg;
    for (int i = 0; i < ECHO_ROUNDS; i++) {
        char msg[16], got[16];
        int len = snprintf(msg, sizeof(msg), "m%d-%d", fd, i);
        ASSERT_EQ(yard_coro_write(fd, msg, (size_t)len, 0), len);
        int have = 0;
        while (have < len) {
            ssize_t n = yard_coro_read(fd, got + have, (size_t)(len - have), 0);
            ASSERT_GT(n, 0);
            have += (int)n;
        }
        ASSERT_MEM_EQ(got, msg, (size_t)len);
    }
    yard_coro_close(fd);
    atomic_fetch_add(&echo_ok, 1);
}

static void echo_main(void *arg)
{
    (void)arg;
    yard_coro_t *h[ECHO_PAIRS * 2];
    for (int i = 0; i < ECHO_PAIRS; i++) {
        int sv[2];
        ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        h[2 * i] = yard_coro_spawn(echo_server, (void *)(intptr_t)sv[0]);
        h[2 * i + 1] = yard_coro_spawn(echo_client, (void *)(intptr_t)sv[1]);
    }
    for (int i = 0; i < ECHO_PAIRS * 2; i++)
        yard_coro_join(h[i]);
}

static void test_netpoll_echo(void)
{
    ASSERT_EQ(yard_coro_run(&(yard_coro_opts_t){.workers = 2}, echo_main, NULL), 0);
    ASSERT_EQ(atomic_load(&echo_ok), ECHO_PAIRS);
}

/* ------------------------------------------------------------------------ */
/* offload                                                                   */

static void *offload_fn(void *arg)
{
    usleep(2000); /* a genuinely blocking call */
    return (void *)((uintptr_t)arg * 2);
}

static atomic_int offload_ok;
static void offload_child(void *arg)
{
    uintptr_t v = (uintptr_t)arg;
    ASSERT_EQ((uintptr_t)yard_coro_offload(offload_fn, (void *)v), v * 2);
    atomic_fetch_add(&offload_ok, 1);
}

static void offload_main(void *arg)
{
    (void)arg;
    yard_coro_t *h[16];
    for (int i = 0; i < 16; i++)
        h[i] = yard_coro_spawn(offload_child, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < 16; i++)
        yard_coro_join(h[i]);
}

static void test_offload(void)
{
    ASSERT_EQ(yard_coro_run(&(yard_coro_opts_t){.workers = 1}, offload_main, NULL), 0);
    ASSERT_EQ(atomic_load(&offload_ok), 16);
}

/* ------------------------------------------------------------------------ */
/* mutex                                                                     */

#define MX_COROS 16
#define MX_ITERS (5000 / SCALE)
static yard_coro_mutex_t mx;
static long mx_counter; /* plain: only the mutex protects it */
static atomic_int mx_inside;

static void mx_child(void *arg)
{
    (void)arg;
    for (int i = 0; i < MX_ITERS; i++) {
        yard_coro_mutex_lock(&mx);
        if (atomic_fetch_add(&mx_inside, 1) != 0)
            TEST_FAIL("two coroutines inside the mutex");
        long v = mx_counter;
        if (i % 7 == 0)
            yard_coro_yield(); /* hold the mutex across a switch */
        mx_counter = v + 1;
        atomic_fetch_sub(&mx_inside, 1);
        yard_coro_mutex_unlock(&mx);
    }
}

static void mx_main(void *arg)
{
    (void)arg;
    yard_coro_t *h[MX_COROS];
    for (int i = 0; i < MX_COROS; i++)
        h[i] = yard_coro_spawn(mx_child, NULL);
    for (int i = 0; i < MX_COROS; i++)
        yard_coro_join(h[i]);
}

static void test_mutex(void)
{
    ASSERT_EQ(yard_coro_run(&(yard_coro_opts_t){.workers = 2}, mx_main, NULL), 0);
    ASSERT_EQ(mx_counter, (long)MX_COROS * MX_ITERS);
}

/* ------------------------------------------------------------------------ */
/* channel: every value sent is received exactly once, in order per sender  */

#define CH_SENDERS 4
#define CH_PER (5000 / SCALE)
static atomic_long ch_sum;

struct ch_arg {
    yard_coro_chan_t *ch;
    int id;
};

static void ch_sender(void *arg)
{
    struct ch_arg *a = arg;
    for (int i = 1; i <= CH_PER; i++)
        ASSERT_EQ(yard_coro_chan_send(a->ch, (void *)(uintptr_t)(a->id * 1000000 + i)), 0);
}

static void ch_receiver(void *arg)
{
    yard_coro_chan_t *ch = arg;
    int last[CH_SENDERS] = {0};
    void *v;
    while (yard_coro_chan_recv(ch, &v) == 0) {
        uintptr_t x = (uintptr_t)v;
        int id = (int)(x / 1000000), seq = (int)(x % 1000000);
        ASSERT(id >= 0 && id < CH_SENDERS);
        ASSERT_EQ(seq, last[id] + 1); /* FIFO per sender */
        last[id] = seq;
        atomic_fetch_add(&ch_sum, 1);
    }
    for (int i = 0; i < CH_SENDERS; i++)
        ASSERT_EQ(last[i], CH_PER);
}

static void ch_run(size_t cap)
{
    yard_coro_chan_t *ch = yard_coro_chan_new(cap);
    ASSERT(ch);
    struct ch_arg a[CH_SENDERS];
    yard_coro_t *s[CH_SENDERS];
    yard_coro_t *r = yard_coro_spawn(ch_receiver, ch);
    for (int i = 0; i < CH_SENDERS; i++) {
        a[i] = (struct ch_arg){ch, i};
        s[i] = yard_coro_spawn(ch_sender, &a[i]);
    }
    for (int i = 0; i < CH_SENDERS; i++)
        yard_coro_join(s[i]);
    yard_coro_chan_close(ch);
    yard_coro_join(r);
    void *v;
    ASSERT_EQ(yard_coro_chan_send(ch, NULL), -EPIPE);
    ASSERT_EQ(yard_coro_chan_recv(ch, &v), -EPIPE);
    yard_coro_chan_free(ch);
}

static void ch_main(void *arg)
{
    (void)arg;
    ch_run(0);
    ch_run(1);
    ch_run(64);
}

static void test_channel(void)
{
    ASSERT_EQ(yard_coro_run(&(yard_coro_opts_t){.workers = 2}, ch_main, NULL), 0);
    ASSERT_EQ(atomic_load(&ch_sum), 3L * CH_SENDERS * CH_PER);
}

/* ------------------------------------------------------------------------ */
/* wait queue with a deadline                                                */

static yard_coro_waitq_t wq;
static atomic_uint wq_word;

static void wq_waker(void *arg)
{
    (void)arg;
    yard_coro_sleep_ns(5000000);
    atomic_store(&wq_word, 1);
    yard_coro_waitq_wake(&wq, 1);
}

static void wq_main(void *arg)
{
    (void)arg;
    uint64_t t0 = now_ns();
    ASSERT_EQ(yard_coro_waitq_wait(&wq, &wq_word, 0, t0 + 10000000), -ETIMEDOUT);
    ASSERT_GE(now_ns(), t0 + 10000000);
    ASSERT_EQ(yard_coro_waitq_wait(&wq, &wq_word, 7, 0), -EAGAIN);
    yard_coro_t *w = yard_coro_spawn(wq_waker, NULL);
    while (atomic_load(&wq_word) == 0)
        yard_coro_waitq_wait(&wq, &wq_word, 0, 0);
    yard_coro_join(w);
}

static void test_waitq(void)
{
    ASSERT_EQ(yard_coro_run(&(yard_coro_opts_t){.workers = 2}, wq_main, NULL), 0);
    ASSERT_EQ(atomic_load(&wq_word), 1);
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
        {"ctx_switch", test_ctx_switch},
        {"uctx_switch", test_uctx_switch},
        {"guard_page", test_guard_page},
        {"deque_stress", test_deque_stress},
        {"spawn_join_many", test_spawn_join_many},
        {"yield_one_worker", test_yield_one_worker},
        {"sleep_and_deadline", test_sleep_and_deadline},
        {"netpoll_socketpair", test_netpoll_socketpair},
        {"netpoll_echo", test_netpoll_echo},
        {"offload", test_offload},
        {"mutex", test_mutex},
        {"channel", test_channel},
        {"waitq", test_waitq},
        {"run_twice", test_run_twice},
        {"steal_skewed", test_steal_skewed},
        {"no_poller_thread", test_no_poller_thread},
        {"wait_fd2", test_wait_fd2},
        {"drained_read_parks", test_drained_read_parks},
        {"join_runs_inline", test_join_runs_inline},
        {"inline_child_parks", test_inline_child_parks},
        {"inline_bounded_by_stack", test_inline_bounded_by_stack},
        {"inline_abandoned_at_exit", test_inline_abandoned_at_exit},
        {"finish_runs_tasks_inline", test_finish_runs_tasks_inline},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
