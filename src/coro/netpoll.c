/* Linux-only: epoll, eventfd. What a port uses instead: docs/portability.md. */
/* The netpoller and the offload pool.
 *
 * Every fd a coroutine waits on is registered once with epoll, edge-
 * triggered, for both directions. Its poll descriptor remembers "an edge
 * arrived that nobody consumed" per direction and the coroutine waiting for
 * it, if any, under a small lock; a waiter that finds the flag set returns at
 * once, so an edge that arrives between the failed read and the park is not
 * lost. Descriptors live in a two-level table indexed by fd, allocated on
 * demand and never moved, so lookups take no lock.
 *
 * There is no poller thread: the scheduler polls (Go's findRunnable). A
 * worker looking for work polls without blocking; when no worker has
 * anything to do, exactly one of them blocks here in epoll_wait until the
 * earliest timer (yard_coro__netpoll_block) and readies what it finds itself,
 * onto its own queues, with no hand-off to another thread. An eventfd in the
 * same epoll set (level-triggered; only the blocked worker drains it) breaks
 * that sleep when a timer earlier than its timeout is added, when work is
 * published and no other worker sleeps, or when the scheduler stops; at
 * most one write per sleep. Calls that must block run on the engine's
 * offload pool (yard/offload.h), whose thread readies the parked coroutine
 * when the call returns. */
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
    /* The peer closed (or the socket failed): no edge will come again, so
     * a short read no longer means "wait for the next edge". */
    bool hup;
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
    /* Every fd coroutines wait on (edge-triggered), and evfd (level-
     * triggered, data.ptr NULL): workers poll it without blocking, and one
     * worker at a time blocks on it. */
    int epfd;
    int evfd;
    /* 1 while a worker blocks in epoll_wait and nobody has broken its sleep
     * yet: whoever swaps it to 0 writes the eventfd (once per sleep). */
    atomic_int blocked;
    _Atomic(struct pdesc *) dir[PD_CHUNKS];

    yard_pool_t *pool; /* noff CPU threads and an I/O lane */
    unsigned noff;
};

static struct netpoll g_np = {.epfd = -1, .evfd = -1};

static void evfd_write(void)
{
    uint64_t one = 1;
    if (write(g_np.evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        perror("yard_coro: eventfd write");
}

/* Breaks the blocked worker's sleep, if there is one (and nobody did yet).
 * The read-modify-write orders the caller's publication of work with the
 * sleeper's recheck, as wake_idle_worker does with nidle. */
void yard_coro__netpoll_wake_fenced(void)
{
    /* Load first: called on every spawn, and an exchange would take the
     * line from the other cores each time. */
    if (atomic_load_explicit(&g_np.blocked, memory_order_relaxed) &&
        atomic_exchange_explicit(&g_np.blocked, 0, memory_order_seq_cst))
        evfd_write();
}

void yard_coro__netpoll_wake(void)
{
    yard_coro__fence(); /* pairs with netpoll_block's */
    yard_coro__netpoll_wake_fenced();
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
static int pd_signal(struct pdesc *pd, int dir, bool hup)
{
    yard_coro__spin_lock(&pd->lock);
    if (hup)
        pd->hup = true;
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
        if (!pd)
            continue; /* the eventfd: the blocked worker drains it */
        uint32_t e = ev[i].events;
        if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            woken += pd_signal(pd, 0, e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR));
        if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR))
            woken += pd_signal(pd, 1, false);
    }
    return woken;
}

int yard_coro__netpoll_poll_now(void)
{
    struct epoll_event ev[64];
    int woken = yard_coro__timers_fire(true);
    int n = epoll_wait(g_np.epfd, ev, 64, 0);
    if (n > 0)
        woken += handle_events(ev, n);
    return woken;
}

int yard_coro__netpoll_block(bool (*has_work)(void))
{
    /* Announce the sleep, then look once more: work published before the
     * announcement is seen here; work published after it finds blocked set
     * and writes the eventfd, which ends the sleep at once. The same holds
     * for timers: one added before the timeout is read is in it, one added
     * after interrupts (blocked is already set for its interruption). */
    atomic_store_explicit(&g_np.blocked, 1, memory_order_seq_cst);
    yard_coro__fence(); /* the wakers fence before they look */
    uint64_t until = yard_coro__timers_sleep_until();
    struct epoll_event ev[128];
    int n = 0;
    if (!has_work()) {
        int timeout = -1;
        if (until != UINT64_MAX) {
            uint64_t now = yard_coro_now_ns();
            /* Round up: a timer must never fire early. */
            uint64_t ms = until > now ? (until - now + 999999) / 1000000 : 0;
            timeout = ms > 60000 ? 60000 : (int)ms;
        }
        n = epoll_wait(g_np.epfd, ev, 128, timeout);
        if (n < 0 && errno != EINTR)
            perror("yard_coro: epoll_wait");
    }
    /* Awake: nobody needs to break the sleep any more. Cleared before the
     * events are handled, or readying a coroutine here would write the
     * eventfd for nothing. */
    atomic_store_explicit(&g_np.blocked, 0, memory_order_seq_cst);
    yard_coro__timers_awake();
    for (int i = 0; i < n; i++) {
        if (!ev[i].data.ptr) {
            uint64_t v;
            if (read(g_np.evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                perror("yard_coro: eventfd read");
        }
    }
    int woken = n > 0 ? handle_events(ev, n) : 0;
    return woken + yard_coro__timers_fire(false);
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

void *yard_coro_offload_lane(int lane, void *(*fn)(void *), void *arg)
{
    yard_coro_t *self = yard_coro_self();
    if (!self || !g_np.pool || (lane == YARD_LANE_CPU && !g_np.noff))
        return fn(arg);
    struct offload_job j = {.job = {.fn = offload_run, .lane = lane, .complete = offload_complete},
                            .fn = fn,
                            .arg = arg,
                            .c = self};
    j.job.arg = &j;
    yard_coro__prepare_park(self);
    yard_pool_submit(g_np.pool, &j.job);
    yard_coro__park();
    return j.result;
}

void *yard_coro_offload(void *(*fn)(void *), void *arg)
{
    return yard_coro_offload_lane(YARD_LANE_CPU, fn, arg);
}

void *yard_coro_offload_io(void *(*fn)(void *), void *arg)
{
    return yard_coro_offload_lane(YARD_LANE_IO, fn, arg);
}

/* ------------------------------------------------------------------------ */
/* start / stop                                                              */

int yard_coro__netpoll_start(unsigned offload_threads)
{
    int err;
    memset(&g_np, 0, sizeof(g_np));
    g_np.epfd = g_np.evfd = -1;
    g_np.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (g_np.epfd < 0)
        return -errno;
    g_np.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (g_np.evfd < 0) {
        err = -errno;
        goto err_ep;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(g_np.epfd, EPOLL_CTL_ADD, g_np.evfd, &ev) != 0) {
        err = -errno;
        goto err_ev;
    }
    yard_coro__timers_init(yard_coro__netpoll_wake);
    /* Without a pool every call runs on the coroutine's own worker. */
    g_np.pool = yard_pool_create((int)offload_threads);
    g_np.noff = g_np.pool ? offload_threads : 0;
    return 0;

err_ev:
    close(g_np.evfd);
err_ep:
    close(g_np.epfd);
    g_np.epfd = g_np.evfd = -1;
    return err;
}

void yard_coro__netpoll_stop(void)
{
    if (g_np.epfd < 0)
        return;
    yard_pool_destroy(g_np.pool); /* finishes what was submitted */
    for (unsigned i = 0; i < PD_CHUNKS; i++)
        free(atomic_load(&g_np.dir[i]));
    yard_coro__timers_fini();
    close(g_np.evfd);
    close(g_np.epfd);
    memset(&g_np, 0, sizeof(g_np));
    g_np.epfd = g_np.evfd = -1;
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
            pd->ready[0] = pd->ready[1] = pd->hup = false;
            atomic_store_explicit(&pd->registered, true, memory_order_release);
        }
    }
    yard_coro__spin_unlock(&pd->lock);
    return err;
}

int yard_coro_register_fd(int fd) { return ensure_registered(fd); }

static int event_dir(unsigned events)
{
    if (!(events & (YARD_CORO_IN | YARD_CORO_OUT)) ||
        (events & (YARD_CORO_IN | YARD_CORO_OUT)) == (YARD_CORO_IN | YARD_CORO_OUT))
        return -1; /* one direction per wait: each has its own waiter slot */
    return (events & YARD_CORO_IN) ? 0 : 1;
}

bool yard_coro_fd_consume(int fd, unsigned events)
{
    int dir = event_dir(events);
    struct pdesc *pd = dir < 0 ? NULL : pd_lookup(fd, false);
    if (!pd)
        return true;
    yard_coro__spin_lock(&pd->lock);
    pd->ready[dir] = false;
    bool hup = pd->hup;
    yard_coro__spin_unlock(&pd->lock);
    return hup;
}

/* Takes self out of the waiter slots of the first n descriptors. */
static void unwait(yard_coro_t *self, struct pdesc *const *pd, const int *dir, int n)
{
    for (int i = 0; i < n; i++) {
        yard_coro__spin_lock(&pd[i]->lock);
        if (pd[i]->waiter[dir[i]] == self)
            pd[i]->waiter[dir[i]] = NULL;
        yard_coro__spin_unlock(&pd[i]->lock);
    }
}

/* Parks until one of n fds is ready in its direction or the deadline. A
 * coroutine waits in several waiter slots at once; the waker that wins its
 * claim readies it, and a waker that loses records its edge as usual. */
static int wait_fds(const int *fds, const unsigned *events, int n, uint64_t deadline_ns)
{
    yard_coro_t *self = yard_coro_self();
    if (!self)
        return -EPERM;
    struct pdesc *pd[2];
    int dir[2];
    for (int i = 0; i < n; i++) {
        if ((dir[i] = event_dir(events[i])) < 0)
            return -EINVAL;
        if (!(pd[i] = pd_lookup(fds[i], true)))
            return fds[i] < 0 ? -EBADF : -ENOMEM;
    }
    if (deadline_ns && yard_coro_now_ns() >= deadline_ns)
        return -ETIMEDOUT;
    for (int i = 0; i < n; i++)
        if (!atomic_load_explicit(&pd[i]->registered, memory_order_acquire))
            return ensure_registered(fds[i]); /* readiness unknown: let the caller try */
    yard_coro__prepare_park(self);
    for (int i = 0; i < n; i++) {
        yard_coro__spin_lock(&pd[i]->lock);
        int busy = pd[i]->waiter[dir[i]] != NULL;
        int ready = !busy && pd[i]->ready[dir[i]];
        if (ready)
            pd[i]->ready[dir[i]] = false;
        else if (!busy)
            pd[i]->waiter[dir[i]] = self;
        yard_coro__spin_unlock(&pd[i]->lock);
        if (ready || busy) {
            /* Not parking after all. A descriptor we already wait on may
             * have claimed us meanwhile: then take its wake-up now. */
            if (i > 0 && !yard_coro__claim(self))
                yard_coro__park();
            unwait(self, pd, dir, i);
            return busy ? -EBUSY : 0;
        }
    }
    if (deadline_ns)
        yard_coro__timer_add(self, deadline_ns);
    yard_coro__park();
    if (deadline_ns)
        yard_coro__timer_cancel(self);
    unwait(self, pd, dir, n);
    return self->wake_result;
}

int yard_coro_wait_fd(int fd, unsigned events, uint64_t deadline_ns)
{
    return wait_fds(&fd, &events, 1, deadline_ns);
}

int yard_coro_wait_fd2(int a, unsigned events_a, int b, unsigned events_b, uint64_t deadline_ns)
{
    const int fds[2] = {a, b};
    const unsigned events[2] = {events_a, events_b};
    return wait_fds(fds, events, 2, deadline_ns);
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
