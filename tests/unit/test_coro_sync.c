/* Unit tests of the coroutine runtime's synchronisation: mutex, channel,
 * wait queue with a deadline. */
#define _DEFAULT_SOURCE /* usleep, sigaltstack */

#include "coro_test.h"

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

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"mutex", test_mutex},
        {"channel", test_channel},
        {"waitq", test_waitq},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
