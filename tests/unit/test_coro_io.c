/* Unit tests of the coroutine runtime's I/O: the netpoller (a socketpair,
 * echo pairs) and offload to core's pool. */
#define _DEFAULT_SOURCE /* usleep, sigaltstack */

#include "coro_test.h"

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

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"netpoll_socketpair", test_netpoll_socketpair},
        {"netpoll_echo", test_netpoll_echo},
        {"offload", test_offload},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
