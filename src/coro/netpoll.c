/* The netpoller, the timers and the offload pool.
 *
 * Every fd a coroutine waits on is registered once with epoll, edge-
 * triggered, for both directions. Its poll descriptor remembers "an edge
 * arrived that nobody consumed" per direction and the coroutine waiting for
 * it, if any, under a small lock; a waiter that finds the flag set returns at
 * once, so an edge that arrives between the failed read and the park is not
 * lost. Descriptors live in a two-level table indexed by fd, allocated on
 * demand and never moved, so lookups take no lock.
 *
 * A dedicated poller thread blocks in epoll_wait with a timeout equal to the
 * earliest timer; idle workers also poll without blocking before they go to
 * sleep, so under load most wake-ups are handled on a worker, where the
 * woken coroutine goes into that worker's run-next slot. Timers are the
 * engine's min-heap (yard/heap.h), one node per coroutine: its sleep or its
 * deadline. An eventfd interrupts the poller when a timer earlier than its
 * current timeout is added, or when the scheduler stops. Calls that must
 * block run on the engine's offload pool (yard/offload.h), whose thread
 * readies the parked coroutine when the call returns. */
#include "internal.h"

#include "yard/heap.h"
#include "yard/offload.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define PD_CHUNK 1024
#define PD_CHUNKS 1024 /* up to 1,048,576 fds */

struct pdesc {
    atomic_int lock;
    atomic_bool registered; /* written under lock; read without it on the fast path */
    bool ready[2]; /* [0] readable edge not consumed, [1] writable */
    yard_coro_t *waiter[2];
};

/* A blocking call on the pool, on the stack of the coroutine parked on it. */
struct offload_job {
    yard_job_t job;
    void *(*fn)(void *);
    void *arg;
    void *result;
    yard_coro_t *c;
};

struct netpoll {
    int epfd;    /* the fds coroutines wait on; workers poll it without blocking */
    int outerfd; /* epfd + evfd: what the poller thread sleeps on */
    int evfd;
    pthread_t poller;
    bool poller_started;
    atomic_bool stopping;
    _Atomic(struct pdesc *) dir[PD_CHUNKS];

    pthread_mutex_t timer_lock;
    yard_heap_t timers; /* of yard_coro_t.timer, keyed by deadline */
    uint64_t poller_wakes_at; /* deadline the poller currently sleeps until */
    bool poller_asleep;

    yard_pool_t *pool; /* noff CPU threads and an I/O lane */
    unsigned noff;
};

static struct netpoll g_np = {.epfd = -1, .outerfd = -1, .evfd = -1};

/* ------------------------------------------------------------------------ */
/* timers                                                                    */

static yard_coro_t *timer_coro(yard_heap_node_t *node)
{
    return (yard_coro_t *)(void *)((char *)node - offsetof(yard_coro_t, timer));
}

static void poller_interrupt(void)
{
    uint64_t one = 1;
    if (write(g_np.evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        perror("yard_coro: eventfd write");
}

void yard_coro__timer_add(yard_coro_t *c, uint64_t deadline)
{
    pthread_mutex_lock(&g_np.timer_lock);
    if (yard_heap_push(&g_np.timers, &c->timer, deadline) < 0) {
        fprintf(stderr, "yard_coro: out of memory for timers\n");
        abort();
    }
    bool interrupt = g_np.poller_asleep && deadline < g_np.poller_wakes_at;
    if (interrupt)
        g_np.poller_wakes_at = deadline;
    pthread_mutex_unlock(&g_np.timer_lock);
    if (interrupt)
        poller_interrupt();
}

void yard_coro__timer_cancel(yard_coro_t *c)
{
    pthread_mutex_lock(&g_np.timer_lock);
    if (yard_heap_contains(&c->timer))
        yard_heap_remove(&g_np.timers, &c->timer);
    pthread_mutex_unlock(&g_np.timer_lock);
}

/* Fires every due timer; returns how many coroutines it woke. The claim is
 * taken under the timer lock: the coroutine removes itself from the heap
 * under the same lock before it parks again, so a stale timer can never
 * wake a later park. */
static int timers_fire(bool try_only)
{
    if (try_only) {
        if (pthread_mutex_trylock(&g_np.timer_lock) != 0)
            return 0;
    } else {
        pthread_mutex_lock(&g_np.timer_lock);
    }
    yard_coro_t *fired = NULL;
    int n = 0;
    yard_heap_node_t *min = yard_heap_min(&g_np.timers);
    if (min) {
        uint64_t now = yard_coro_now_ns();
        for (; min && min->key <= now; min = yard_heap_min(&g_np.timers)) {
            yard_coro_t *c = timer_coro(min);
            yard_heap_remove(&g_np.timers, min);
            if (yard_coro__claim(c)) {
                c->next = fired;
                fired = c;
            }
        }
    }
    pthread_mutex_unlock(&g_np.timer_lock);
    while (fired) {
        yard_coro_t *c = fired;
        fired = c->next;
        yard_coro__ready(c, -ETIMEDOUT);
        n++;
    }
    return n;
}

/* ------------------------------------------------------------------------ */
/* poll descriptors                                                          */

static struct pdesc *pd_lookup(int fd, bool create)
{
    if (fd < 0 || fd >= PD_CHUNK * PD_CHUNKS)
        return NULL;
    _Atomic(struct pdesc *) *slot = &g_np.dir[fd / PD_CHUNK];
    struct pdesc *chunk = atomic_load_explicit(slot, memory_order_acquire);
    if (!chunk) {
        if (!create)
            return NULL;
        struct pdesc *fresh = calloc(PD_CHUNK, sizeof(*fresh));
        if (!fresh)
            return NULL;
        struct pdesc *expected = NULL;
        if (atomic_compare_exchange_strong_explicit(slot, &expected, fresh, memory_order_acq_rel,
                                                    memory_order_acquire)) {
            chunk = fresh;
        } else {
            free(fresh);
            chunk = expected;
        }
    }
    return &chunk[fd % PD_CHUNK];
}

/* Records an edge and wakes the waiter of that direction, if any. */
static int pd_signal(struct pdesc *pd, int dir)
{
    yard_coro__spin_lock(&pd->lock);
    yard_coro_t *c = pd->waiter[dir];
    if (c && yard_coro__claim(c)) {
        pd->waiter[dir] = NULL;
        pd->ready[dir] = false;
    } else {
        pd->ready[dir] = true;
        c = NULL;
    }
    yard_coro__spin_unlock(&pd->lock);
    if (c)
        yard_coro__ready(c, 0);
    return c ? 1 : 0;
}

static int handle_events(struct epoll_event *ev, int n)
{
    int woken = 0;
    for (int i = 0; i < n; i++) {
        struct pdesc *pd = ev[i].data.ptr;
        uint32_t e = ev[i].events;
        if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            woken += pd_signal(pd, 0);
        if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR))
            woken += pd_signal(pd, 1);
    }
    return woken;
}

int yard_coro__netpoll_poll_now(void)
{
    struct epoll_event ev[64];
    int woken = timers_fire(true);
    int n = epoll_wait(g_np.epfd, ev, 64, 0);
    if (n > 0)
        woken += handle_events(ev, n);
    return woken;
}

/* The poller sleeps on an outer epoll set holding the main one and the
 * eventfd. It cannot sleep on the main set directly: a worker polling that
 * set could consume the eventfd's readiness, and a blocked epoll_wait whose
 * event vanished goes back to sleep, losing the interruption. */
static void *poller_thread(void *arg)
{
    (void)arg;
    struct epoll_event ev[128];
    while (!atomic_load_explicit(&g_np.stopping, memory_order_acquire)) {
        pthread_mutex_lock(&g_np.timer_lock);
        yard_heap_node_t *first = yard_heap_min(&g_np.timers);
        uint64_t wake_at = first ? first->key : UINT64_MAX;
        g_np.poller_wakes_at = wake_at;
        g_np.poller_asleep = true;
        pthread_mutex_unlock(&g_np.timer_lock);
        int timeout = -1;
        if (wake_at != UINT64_MAX) {
            uint64_t now = yard_coro_now_ns();
            /* Round up: a timer must never fire early. */
            uint64_t ms = wake_at > now ? (wake_at - now + 999999) / 1000000 : 0;
            timeout = ms > 60000 ? 60000 : (int)ms;
        }
        struct epoll_event outer[2];
        int n = epoll_wait(g_np.outerfd, outer, 2, timeout);
        pthread_mutex_lock(&g_np.timer_lock);
        g_np.poller_asleep = false;
        pthread_mutex_unlock(&g_np.timer_lock);
        if (n < 0 && errno != EINTR)
            perror("yard_coro: epoll_wait");
        for (int i = 0; i < n; i++) {
            if (outer[i].data.fd == g_np.evfd) {
                uint64_t v;
                if (read(g_np.evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                    perror("yard_coro: eventfd read");
            } else {
                int m = epoll_wait(g_np.epfd, ev, 128, 0);
                if (m > 0)
                    handle_events(ev, m);
            }
        }
        timers_fire(false);
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* offload pool                                                              */

static void offload_run(void *arg)
{
    struct offload_job *j = arg;
    j->result = j->fn(j->arg);
}

/* On the pool's thread: j lives on c's stack, so nothing touches it after
 * the coroutine is ready. */
static void offload_complete(yard_job_t *job)
{
    yard_coro_t *c = ((struct offload_job *)(void *)job)->c;
    if (yard_coro__claim(c))
        yard_coro__ready(c, 0);
}

static void *offload_on(bool io, void *(*fn)(void *), void *arg)
{
    yard_coro_t *self = yard_coro_self();
    if (!self || !g_np.pool || (!io && !g_np.noff))
        return fn(arg);
    struct offload_job j = {.job = {.fn = offload_run, .io = io, .complete = offload_complete},
                            .fn = fn,
                            .arg = arg,
                            .c = self};
    j.job.arg = &j;
    yard_coro__prepare_park(self);
    yard_pool_submit(g_np.pool, &j.job);
    yard_coro__park();
    return j.result;
}

void *yard_coro_offload(void *(*fn)(void *), void *arg) { return offload_on(false, fn, arg); }

void *yard_coro_offload_io(void *(*fn)(void *), void *arg) { return offload_on(true, fn, arg); }

/* ------------------------------------------------------------------------ */
/* start / stop                                                              */

int yard_coro__netpoll_start(unsigned offload_threads)
{
    int err;
    memset(&g_np, 0, sizeof(g_np));
    g_np.epfd = g_np.outerfd = g_np.evfd = -1;
    g_np.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (g_np.epfd < 0)
        return -errno;
    g_np.outerfd = epoll_create1(EPOLL_CLOEXEC);
    if (g_np.outerfd < 0) {
        err = -errno;
        goto err_ep;
    }
    g_np.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (g_np.evfd < 0) {
        err = -errno;
        goto err_outer;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = g_np.evfd};
    if (epoll_ctl(g_np.outerfd, EPOLL_CTL_ADD, g_np.evfd, &ev) != 0) {
        err = -errno;
        goto err_ev;
    }
    ev.data.fd = g_np.epfd;
    if (epoll_ctl(g_np.outerfd, EPOLL_CTL_ADD, g_np.epfd, &ev) != 0) {
        err = -errno;
        goto err_ev;
    }
    pthread_mutex_init(&g_np.timer_lock, NULL);
    err = -pthread_create(&g_np.poller, NULL, poller_thread, NULL);
    if (err)
        goto err_locks;
    g_np.poller_started = true;
    /* Without a pool every call runs on the coroutine's own worker. */
    g_np.pool = yard_pool_create((int)offload_threads);
    g_np.noff = g_np.pool ? offload_threads : 0;
    return 0;

err_locks:
    pthread_mutex_destroy(&g_np.timer_lock);
err_ev:
    close(g_np.evfd);
err_outer:
    close(g_np.outerfd);
err_ep:
    close(g_np.epfd);
    g_np.epfd = g_np.outerfd = g_np.evfd = -1;
    return err;
}

void yard_coro__netpoll_stop(void)
{
    if (g_np.epfd < 0)
        return;
    atomic_store(&g_np.stopping, true);
    yard_pool_destroy(g_np.pool); /* finishes what was submitted */
    if (g_np.poller_started) {
        poller_interrupt();
        pthread_join(g_np.poller, NULL);
    }
    for (unsigned i = 0; i < PD_CHUNKS; i++)
        free(atomic_load(&g_np.dir[i]));
    yard_heap_free(&g_np.timers);
    pthread_mutex_destroy(&g_np.timer_lock);
    close(g_np.evfd);
    close(g_np.outerfd);
    close(g_np.epfd);
    memset(&g_np, 0, sizeof(g_np));
    g_np.epfd = g_np.outerfd = g_np.evfd = -1;
}

/* ------------------------------------------------------------------------ */
/* waiting on fds                                                            */

static int pd_register(int fd, struct pdesc *pd)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0)
        return -errno;
    if (!(flags & O_NONBLOCK) && fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
        return -errno;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = pd};
    if (epoll_ctl(g_np.epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        if (errno != EEXIST || epoll_ctl(g_np.epfd, EPOLL_CTL_MOD, fd, &ev) != 0)
            return -errno;
    }
    return 0;
}

/* Registers fd with epoll (and makes it non-blocking) unless done already:
 * the I/O helpers call this before their first syscall so that a blocking fd
 * never blocks a worker. */
static int ensure_registered(int fd)
{
    struct pdesc *pd = pd_lookup(fd, true);
    if (!pd)
        return fd < 0 ? -EBADF : -ENOMEM;
    if (atomic_load_explicit(&pd->registered, memory_order_acquire))
        return 0;
    int err = 0;
    yard_coro__spin_lock(&pd->lock);
    if (!atomic_load_explicit(&pd->registered, memory_order_relaxed)) {
        err = pd_register(fd, pd);
        if (!err) {
            pd->ready[0] = pd->ready[1] = false;
            atomic_store_explicit(&pd->registered, true, memory_order_release);
        }
    }
    yard_coro__spin_unlock(&pd->lock);
    return err;
}

int yard_coro_wait_fd(int fd, unsigned events, uint64_t deadline_ns)
{
    yard_coro_t *self = yard_coro_self();
    if (!self)
        return -EPERM;
    int dir = (events & YARD_CORO_IN) ? 0 : 1;
    if (!(events & (YARD_CORO_IN | YARD_CORO_OUT)) ||
        (events & (YARD_CORO_IN | YARD_CORO_OUT)) == (YARD_CORO_IN | YARD_CORO_OUT))
        return -EINVAL; /* one direction per wait: each has its own waiter slot */
    struct pdesc *pd = pd_lookup(fd, true);
    if (!pd)
        return fd < 0 ? -EBADF : -ENOMEM;
    if (deadline_ns && yard_coro_now_ns() >= deadline_ns)
        return -ETIMEDOUT;
    if (!atomic_load_explicit(&pd->registered, memory_order_acquire)) {
        /* Freshly registered: readiness is unknown, so let the caller try. */
        return ensure_registered(fd);
    }
    yard_coro__prepare_park(self);
    yard_coro__spin_lock(&pd->lock);
    if (pd->ready[dir]) {
        pd->ready[dir] = false;
        yard_coro__spin_unlock(&pd->lock);
        return 0;
    }
    if (pd->waiter[dir]) {
        yard_coro__spin_unlock(&pd->lock);
        return -EBUSY;
    }
    pd->waiter[dir] = self;
    yard_coro__spin_unlock(&pd->lock);
    if (deadline_ns)
        yard_coro__timer_add(self, deadline_ns);
    yard_coro__park();
    if (deadline_ns)
        yard_coro__timer_cancel(self);
    yard_coro__spin_lock(&pd->lock);
    if (pd->waiter[dir] == self)
        pd->waiter[dir] = NULL;
    yard_coro__spin_unlock(&pd->lock);
    return self->wake_result;
}

int yard_coro_forget_fd(int fd)
{
    struct pdesc *pd = pd_lookup(fd, false);
    yard_coro_t *woken[2] = {NULL, NULL};
    if (!pd)
        return 0;
    yard_coro__spin_lock(&pd->lock);
    if (atomic_load_explicit(&pd->registered, memory_order_relaxed))
        epoll_ctl(g_np.epfd, EPOLL_CTL_DEL, fd, NULL);
    atomic_store_explicit(&pd->registered, false, memory_order_release);
    for (int d = 0; d < 2; d++) {
        pd->ready[d] = false;
        if (pd->waiter[d] && yard_coro__claim(pd->waiter[d]))
            woken[d] = pd->waiter[d];
        pd->waiter[d] = NULL;
    }
    yard_coro__spin_unlock(&pd->lock);
    for (int d = 0; d < 2; d++)
        if (woken[d])
            yard_coro__ready(woken[d], -EBADF);
    return 0;
}

int yard_coro_close(int fd)
{
    yard_coro_forget_fd(fd);
    return close(fd) == 0 ? 0 : -errno;
}

ssize_t yard_coro_read(int fd, void *buf, size_t len, uint64_t deadline_ns)
{
    int reg = yard_coro_self() ? ensure_registered(fd) : 0;
    if (reg && reg != -EPERM) /* EPERM: a regular file, never EAGAIN */
        return reg;
    for (;;) {
        ssize_t n = read(fd, buf, len);
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        int err = yard_coro_wait_fd(fd, YARD_CORO_IN, deadline_ns);
        if (err)
            return err;
    }
}

ssize_t yard_coro_write(int fd, const void *buf, size_t len, uint64_t deadline_ns)
{
    int reg = yard_coro_self() ? ensure_registered(fd) : 0;
    if (reg && reg != -EPERM) /* EPERM: a regular file, never EAGAIN */
        return reg;
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, (const char *)buf + done, len - done);
        if (n >= 0) {
            done += (size_t)n;
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        int err = yard_coro_wait_fd(fd, YARD_CORO_OUT, deadline_ns);
        if (err)
            return err;
    }
    return (ssize_t)done;
}
