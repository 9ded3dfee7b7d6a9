/* Linux-only: eventfd, futex. What a port uses instead: docs/portability.md. */
/* The news bus: shared sequence numbers, a futex-woken waker thread per
 * process, and eventfd watches (include/yard/bus.h explains the design). */
#define _DEFAULT_SOURCE /* syscall (futex) */

#include "yard/bus.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "yard/log.h"

yard_bus_t *yard_bus_create(yard_shm_t *shm, uint32_t ntopics)
{
    yard_bus_t *bus = yard_shm_alloc(shm, sizeof *bus + ntopics * sizeof bus->seq[0]);
    if (bus)
        bus->ntopics = ntopics;
    return bus;
}

static void futex_wake_all(_Atomic uint32_t *word)
{
    /* Not FUTEX_PRIVATE: the word is in a MAP_SHARED region and the
     * waiters may be other processes. */
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void (*publish_hook)(void);

void yard_bus_on_publish(void (*hook)(void)) { publish_hook = hook; }

void yard_bus_publish(yard_bus_t *bus, uint32_t topic, uint64_t seq)
{
    uint64_t cur = atomic_load_explicit(&bus->seq[topic], memory_order_relaxed);
    while (cur < seq && !atomic_compare_exchange_weak_explicit(
                            &bus->seq[topic], &cur, seq, memory_order_release,
                            memory_order_relaxed)) {
    }
    atomic_fetch_add_explicit(&bus->gen, 1, memory_order_release);
    futex_wake_all(&bus->gen);
    if (publish_hook)
        publish_hook();
}

/* The process's watches and its waker. A child of fork() starts with none:
 * the watches it inherited belong to the parent and the waker thread was
 * not copied (pthread_atfork resets the registry in the child). */
#define MAX_BUSES 16
static struct {
    pthread_mutex_t mu;
    yard_watch_t *head;
    yard_bus_t *bus[MAX_BUSES]; /* the buses with a waker in this process */
    pthread_t waker[MAX_BUSES];
    int nbus;
    bool stopping;
} reg = {.mu = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;

static void reg_atfork_child(void)
{
    pthread_mutex_init(&reg.mu, NULL);
    reg.head = NULL;
    reg.nbus = 0;
    reg.stopping = false;
}

static void reg_install(void) { pthread_atfork(NULL, NULL, reg_atfork_child); }

static void reg_lock(void)
{
    pthread_once(&reg_once, reg_install);
    pthread_mutex_lock(&reg.mu);
}

static void signal_efd(int efd)
{
    uint64_t one = 1;
    /* EAGAIN only when the counter is saturated: a wake-up is pending anyway. */
    while (write(efd, &one, sizeof one) < 0 && errno == EINTR) {
    }
}

static void *waker_main(void *arg)
{
    yard_bus_t *bus = arg;
    uint32_t g = atomic_load_explicit(&bus->gen, memory_order_acquire);
    for (;;) {
        pthread_mutex_lock(&reg.mu);
        if (reg.stopping) {
            pthread_mutex_unlock(&reg.mu);
            return NULL;
        }
        for (yard_watch_t *w = reg.head; w; w = w->next)
            if (w->bus == bus && yard_watch_due(w))
                signal_efd(w->efd);
        pthread_mutex_unlock(&reg.mu);
        /* Sleeps only while gen is still g: a publish after the scan above
         * changed it, so the futex returns at once. */
        syscall(SYS_futex, (uint32_t *)&bus->gen, FUTEX_WAIT, g, NULL, NULL, 0);
        g = atomic_load_explicit(&bus->gen, memory_order_acquire);
    }
    return NULL;
}

int yard_watch_open(yard_watch_t *w, yard_bus_t *bus)
{
    memset(w, 0, sizeof *w);
    atomic_init(&w->seen, UINT64_MAX);
    w->bus = bus;
    w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->efd < 0)
        return -errno;
    reg_lock();
    bool have = false;
    for (int i = 0; i < reg.nbus; i++)
        have = have || reg.bus[i] == bus;
    if (!have) {
        /* The first watch on this bus in this process: start its waker. */
        int err = reg.nbus == MAX_BUSES ? EMFILE : 0;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 64 * 1024);
        if (!err)
            err = pthread_create(&reg.waker[reg.nbus], &attr, waker_main, bus);
        pthread_attr_destroy(&attr);
        if (err) {
            pthread_mutex_unlock(&reg.mu);
            close(w->efd);
            w->efd = -1;
            return -err;
        }
        reg.bus[reg.nbus++] = bus;
    }
    w->next = reg.head;
    if (reg.head)
        reg.head->prev = w;
    reg.head = w;
    pthread_mutex_unlock(&reg.mu);
    return 0;
}

bool yard_watch_due(const yard_watch_t *w)
{
    uint64_t seen = atomic_load_explicit(&((yard_watch_t *)w)->seen, memory_order_acquire);
    return seen != UINT64_MAX && yard_bus_seq(w->bus, w->topic) > seen;
}

void yard_watch_set(yard_watch_t *w, uint32_t topic, uint64_t seen)
{
    /* topic is only read by the waker after it sees seen change. */
    pthread_mutex_lock(&reg.mu);
    w->topic = topic;
    pthread_mutex_unlock(&reg.mu);
    atomic_store_explicit(&w->seen, seen, memory_order_release);
    if (yard_watch_due(w))
        signal_efd(w->efd);
}

void yard_watch_poke(yard_watch_t *w)
{
    if (yard_watch_due(w))
        signal_efd(w->efd);
}

void yard_watch_drain(yard_watch_t *w)
{
    uint64_t v;
    while (read(w->efd, &v, sizeof v) < 0 && errno == EINTR) {
    }
}

void yard_watch_close(yard_watch_t *w)
{
    if (w->efd < 0)
        return;
    pthread_mutex_lock(&reg.mu);
    if (w->prev)
        w->prev->next = w->next;
    else if (reg.head == w)
        reg.head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    pthread_mutex_unlock(&reg.mu);
    close(w->efd);
    w->efd = -1;
}

void yard_bus_stop_wakers(void)
{
    pthread_once(&reg_once, reg_install);
    pthread_mutex_lock(&reg.mu);
    reg.stopping = true;
    int n = reg.nbus;
    pthread_mutex_unlock(&reg.mu);
    for (int i = 0; i < n; i++) {
        /* A wake, not a publish: other processes' wakers are not ours to stop. */
        futex_wake_all(&reg.bus[i]->gen);
        pthread_join(reg.waker[i], NULL);
    }
    pthread_mutex_lock(&reg.mu);
    reg.nbus = 0;
    reg.stopping = false;
    pthread_mutex_unlock(&reg.mu);
}
