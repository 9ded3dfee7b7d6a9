/* The news bus: sequence numbers only grow, a watch that is already due
 * signals at once, a publish wakes watches in other threads and in other
 * processes (a forked child), and an unwatched connection is never due. */
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "yard/bus.h"

static yard_shm_t *shm;

static bool readable(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

static void test_seq_only_grows(void)
{
    yard_bus_t *bus = yard_bus_create(shm, 4);
    ASSERT(bus);
    ASSERT_EQ(bus->ntopics, 4);
    ASSERT_U64_EQ(yard_bus_seq(bus, 2), 0);
    uint32_t g = atomic_load(&bus->gen);
    yard_bus_publish(bus, 2, 10);
    yard_bus_publish(bus, 2, 7); /* late, lower: ignored */
    ASSERT_U64_EQ(yard_bus_seq(bus, 2), 10);
    ASSERT_U64_EQ(yard_bus_seq(bus, 1), 0);
    ASSERT_EQ(atomic_load(&bus->gen), g + 2);
}

static void test_due_watch_signals_at_once(void)
{
    yard_bus_t *bus = yard_bus_create(shm, 2);
    yard_bus_publish(bus, 0, 5);
    yard_watch_t w;
    ASSERT_EQ(yard_watch_open(&w, bus), 0);
    ASSERT(!readable(w.efd, 0));
    ASSERT(!yard_watch_due(&w)); /* not watching yet */
    yard_watch_set(&w, 0, 5);
    ASSERT(!yard_watch_due(&w));
    ASSERT(!readable(w.efd, 0));
    yard_watch_set(&w, 0, 4);
    ASSERT(yard_watch_due(&w));
    ASSERT(readable(w.efd, 0));
    yard_watch_drain(&w);
    yard_watch_poke(&w); /* still due: signalled again */
    ASSERT(readable(w.efd, 0));
    /* Caught up, and drained: nothing signals it any more. The bus's waker
     * thread (started by yard_watch_open, so its first scan may come at any
     * time: late under qemu) may have seen the watch due before this set and
     * not yet signalled; it signals holding the registry lock that
     * yard_watch_set takes, so setting again waits that signal out. */
    yard_watch_set(&w, 0, 5);
    yard_watch_set(&w, 0, 5);
    yard_watch_drain(&w);
    ASSERT(!readable(w.efd, 0));
    yard_watch_set(&w, 0, UINT64_MAX); /* unwatch */
    yard_bus_publish(bus, 0, 9);
    ASSERT(!yard_watch_due(&w));
    yard_watch_close(&w);
}

struct waiter {
    yard_bus_t *bus;
    yard_watch_t w;
    int woke;
};

static void *waiter_main(void *arg)
{
    struct waiter *x = arg;
    x->woke = readable(x->w.efd, 10000) && yard_watch_due(&x->w);
    return NULL;
}

static void test_publish_wakes_other_threads(void)
{
    yard_bus_t *bus = yard_bus_create(shm, 3);
    enum { N = 8 };
    struct waiter ws[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        ws[i].bus = bus;
        ws[i].woke = 0;
        ASSERT_EQ(yard_watch_open(&ws[i].w, bus), 0);
        /* Half watch topic 1, half topic 2: only topic 1 is published. */
        yard_watch_set(&ws[i].w, i % 2 ? 2 : 1, 0);
    }
    for (int i = 0; i < N; i += 2)
        ASSERT_EQ(pthread_create(&t[i], NULL, waiter_main, &ws[i]), 0);
    yard_bus_publish(bus, 1, 1);
    for (int i = 0; i < N; i += 2) {
        pthread_join(t[i], NULL);
        ASSERT_EQ(ws[i].woke, 1);
    }
    for (int i = 1; i < N; i += 2) {
        ASSERT(!readable(ws[i].w.efd, 0));
        ASSERT(!yard_watch_due(&ws[i].w));
    }
    for (int i = 0; i < N; i++)
        yard_watch_close(&ws[i].w);
}

static void test_publish_wakes_another_process(void)
{
    yard_bus_t *bus = yard_bus_create(shm, 1);
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        /* The child: its own waker, started by its first watch. */
        yard_watch_t w;
        if (yard_watch_open(&w, bus) < 0)
            _exit(2);
        yard_watch_set(&w, 0, 0);
        char b = 'r';
        if (write(ready[1], &b, 1) != 1)
            _exit(3);
        bool ok = readable(w.efd, 10000) && yard_watch_due(&w);
        yard_watch_close(&w);
        _exit(ok ? 0 : 1);
    }
    char b;
    ASSERT_EQ(read(ready[0], &b, 1), 1);
    yard_bus_publish(bus, 0, 1);
    int status;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
    close(ready[0]);
    close(ready[1]);
}

int main(void)
{
    ASSERT_EQ(yard_shm_create(&shm, 1 << 20), 0);
    ASSERT(shm);
    /* First, while this process has no thread: the child starts one, and
     * TSan does not support threads after a multi-threaded fork. */
    test_publish_wakes_another_process();
    test_seq_only_grows();
    test_due_watch_signals_at_once();
    test_publish_wakes_other_threads();
    yard_shm_destroy(shm);
    return 0;
}
