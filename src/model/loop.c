/* The event loop: level-triggered epoll, one read per readiness event.
 *
 * Level-triggered because it makes backpressure simple and fair: a
 * connection whose output queue is over the high-water mark just drops
 * EPOLLIN from its interest set, and one that has more to read than one
 * chunk is served again on the next round instead of starving the others.
 * The steady state of a ping-pong costs epoll_wait + read + send: the reply
 * is written directly from the app's output, and EPOLLOUT is only
 * registered while a reply is partly unsent.
 *
 * App timers live in a binary min-heap; jobs go to the offload pool and come
 * back through a completion queue whose eventfd is in the epoll set. */
#include "loop.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "yard/clock.h"
#include "yard/log.h"

#define LOOP_EVENTS 256
/* A connection's news eventfd is in the epoll set with the connection's
 * address + 1 as its data (connections are aligned, so bit 0 tells them
 * apart from the socket's entry). */
#define NEWS_TAG ((uintptr_t)1)
#define ACCEPT_BATCH 64

static void lru_unlink(yard_conn_t *c);
static void lru_push(yard_loop_t *loop, yard_conn_t *c, uint64_t now);
static void loop_close(yard_loop_t *loop, yard_conn_t *c, const char *reason);
static void loop_accept(yard_loop_t *loop, uint64_t now);
static void loop_conn_event(yard_loop_t *loop, yard_conn_t *c, uint32_t ev, uint64_t now);
static int loop_timeout_ms(const yard_loop_t *loop, uint64_t now);
static void loop_after(yard_loop_t *loop, yard_conn_t *c, uint64_t now);
static void loop_expire(yard_loop_t *loop, uint64_t now);

/* The loop's offload pool and its completion queue, started on the first
 * job actually offloaded, so a loop whose app never offloads stays one
 * thread. Returns false when no pool can be had (the job then runs inline). */
static bool loop_pool_start(yard_loop_t *loop)
{
    if (loop->pool)
        return true;
    if (loop->pool_failed)
        return false;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &loop->done};
    if (yard_completions_init(&loop->done) < 0) {
        yard_log_err("eventfd: %s", strerror(errno));
        goto err;
    }
    if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->done.efd, &ev) < 0) {
        yard_log_err("epoll_ctl completions: %s", strerror(errno));
        goto err;
    }
    loop->pool = yard_pool_create(loop->srv->cfg->offload_threads);
    if (loop->pool)
        return true;
err:
    yard_log_warn("no offload pool: jobs run inline on the event loop");
    loop->pool_failed = true;
    return false;
}

int yard_loop_init(yard_loop_t *loop, yard_server_t *srv, int listen_fd, int stop_fd,
                   bool stop_is_sigfd)
{
    memset(loop, 0, sizeof *loop);
    loop->done.efd = -1;
    loop->srv = srv;
    loop->listen_fd = listen_fd;
    loop->stop_fd = stop_fd;
    loop->stop_is_sigfd = stop_is_sigfd;
    loop->lru.lru_next = loop->lru.lru_prev = &loop->lru;
    loop->reserve_fd = yard_reserve_fd_open();
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (loop->epfd < 0) {
        yard_log_err("epoll_create1: %s", strerror(errno));
        goto err;
    }
    /* The listener and the stop descriptor are told apart from connections
     * by their data pointer, which points into the loop itself. */
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &loop->listen_fd};
    if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, listen_fd, &ev) < 0) {
        yard_log_err("epoll_ctl listener: %s", strerror(errno));
        goto err;
    }
    ev.data.ptr = &loop->stop_fd;
    if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, stop_fd, &ev) < 0) {
        yard_log_err("epoll_ctl stop descriptor: %s", strerror(errno));
        goto err;
    }
    return 0;
err:
    yard_loop_fini(loop);
    return -1;
}

void yard_loop_fini(yard_loop_t *loop)
{
    yard_pool_destroy(loop->pool); /* idle by now: yard_loop_run waited for its jobs */
    loop->pool = NULL;
    if (loop->epfd > 0)
        close(loop->epfd);
    if (loop->reserve_fd >= 0)
        close(loop->reserve_fd);
    loop->epfd = loop->reserve_fd = -1;
    if (loop->done.efd >= 0)
        yard_completions_fini(&loop->done);
    free(loop->timers);
    loop->timers = NULL;
    yard_scratch_free(&loop->scratch);
}

/* --- the timer heap ------------------------------------------------------- */

static void heap_set(yard_loop_t *loop, size_t i, yard_conn_t *c)
{
    loop->timers[i] = c;
    c->timer_idx = i;
}

static void heap_up(yard_loop_t *loop, size_t i)
{
    yard_conn_t *c = loop->timers[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (loop->timers[parent]->timer_key <= c->timer_key)
            break;
        heap_set(loop, i, loop->timers[parent]);
        i = parent;
    }
    heap_set(loop, i, c);
}

static void heap_down(yard_loop_t *loop, size_t i)
{
    yard_conn_t *c = loop->timers[i];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        uint64_t key = c->timer_key;
        if (l < loop->ntimers && loop->timers[l]->timer_key < key) {
            m = l;
            key = loop->timers[l]->timer_key;
        }
        if (r < loop->ntimers && loop->timers[r]->timer_key < key)
            m = r;
        if (m == i)
            break;
        heap_set(loop, i, loop->timers[m]);
        i = m;
    }
    heap_set(loop, i, c);
}

static void heap_remove(yard_loop_t *loop, yard_conn_t *c)
{
    size_t i = c->timer_idx;
    c->timer_idx = YARD_TIMER_NONE;
    yard_conn_t *last = loop->timers[--loop->ntimers];
    if (i == loop->ntimers)
        return;
    heap_set(loop, i, last);
    heap_down(loop, i);
    heap_up(loop, last->timer_idx);
}

/* Make the heap agree with the timer the app has armed (or not). */
static int loop_sync_timer(yard_loop_t *loop, yard_conn_t *c)
{
    if (c->timer_idx != YARD_TIMER_NONE) {
        if (c->wake_at == c->timer_key)
            return 0;
        heap_remove(loop, c);
    }
    if (!c->wake_at)
        return 0;
    if (loop->ntimers == loop->timers_cap) {
        size_t cap = loop->timers_cap ? loop->timers_cap * 2 : 64;
        yard_conn_t **t = realloc(loop->timers, cap * sizeof *t);
        if (!t)
            return -1;
        loop->timers = t;
        loop->timers_cap = cap;
    }
    c->timer_key = c->wake_at;
    heap_set(loop, loop->ntimers++, c);
    heap_up(loop, loop->ntimers - 1);
    return 0;
}

static void lru_unlink(yard_conn_t *c)
{
    c->lru_prev->lru_next = c->lru_next;
    c->lru_next->lru_prev = c->lru_prev;
}

static void lru_push(yard_loop_t *loop, yard_conn_t *c, uint64_t now)
{
    c->last_active = now;
    c->lru_prev = loop->lru.lru_prev;
    c->lru_next = &loop->lru;
    loop->lru.lru_prev->lru_next = c;
    loop->lru.lru_prev = c;
}

static void loop_close(yard_loop_t *loop, yard_conn_t *c, const char *reason)
{
    if (c->job.done) {
        /* A pool thread still has its job: close when the job comes back. */
        if (!c->failed) {
            c->failed = true;
            c->close_reason = reason;
        }
        return;
    }
    if (c->timer_idx != YARD_TIMER_NONE)
        heap_remove(loop, c);
    lru_unlink(c);
    for (int j = loop->batch_i + 1; j < loop->batch_n; j++) {
        void *p = loop->batch[j].data.ptr;
        if (p == c || p == (void *)((uintptr_t)c | NEWS_TAG))
            loop->batch[j].data.ptr = NULL;
    }
    /* close() removes the fd from the epoll set: no EPOLL_CTL_DEL needed. */
    yard_conn_close(c, reason);
    yard_server_release(loop->srv);
    loop->nconns--;
}

/* Bring the registered events in line with what the connection wants. */
static int loop_rearm(yard_loop_t *loop, yard_conn_t *c)
{
    uint32_t want = (yard_conn_wants_read(c) ? EPOLLIN : 0) | (c->out.len ? EPOLLOUT : 0);
    if (c->polled && want == c->events)
        return 0;
    struct epoll_event ev = {.events = want, .data.ptr = c};
    if (epoll_ctl(loop->epfd, c->polled ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev) < 0)
        return -1;
    c->events = want;
    c->polled = true;
    return 0;
}

static void loop_accept(yard_loop_t *loop, uint64_t now)
{
    yard_server_t *srv = loop->srv;
    char peer[YARD_ADDR_STRLEN];
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        int fd = yard_server_accept_admitted(srv, loop->listen_fd, true, &loop->reserve_fd, peer,
                                             sizeof peer);
        if (fd < 0)
            return;
        yard_conn_t *c = yard_conn_open(srv, fd, false);
        if (!c) {
            yard_log_err("%s: out of memory for a connection", peer);
            close(fd);
            yard_server_release(srv);
            continue;
        }
        lru_push(loop, c, now);
        loop->nconns++;
        loop_after(loop, c, now);
    }
}

/* After anything happened to a connection: close it if it is finished,
 * hand its job to the pool, and bring its timer and events up to date. */
static void loop_after(yard_loop_t *loop, yard_conn_t *c, uint64_t now)
{
    if (c->job.done)
        return; /* in the pool's hands until the job comes back */
    if (c->job_pending && !loop_pool_start(loop)) {
        /* No pool could be had: the job runs here, as with
         * --offload-threads 0. */
        c->jobs_inline = true;
        c->job.fn(c->job.arg);
        yard_conn_on_job_done(c, &loop->scratch);
    }
    if (yard_conn_finished(c)) {
        loop_close(loop, c, NULL);
        return;
    }
    if (c->job_pending) {
        /* Out of the epoll set while a pool thread has the job: a peer that
         * resets meanwhile must not spin a level-triggered loop. */
        if (c->polled) {
            epoll_ctl(loop->epfd, EPOLL_CTL_DEL, c->fd, NULL);
            c->polled = false;
        }
        c->job.done = &loop->done;
        loop->jobs_in_flight++;
        yard_pool_submit(loop->pool, &c->job);
        return;
    }
    if (loop_sync_timer(loop, c) < 0) {
        loop_close(loop, c, "out of memory for a timer");
        return;
    }
    if (loop_rearm(loop, c) < 0) {
        loop_close(loop, c, "epoll_ctl failed");
        return;
    }
    if (c->watch && !c->watch_polled) {
        struct epoll_event ev = {.events = EPOLLIN,
                                 .data.ptr = (void *)((uintptr_t)c | NEWS_TAG)};
        if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, c->watch->efd, &ev) < 0) {
            loop_close(loop, c, "epoll_ctl (news) failed");
            return;
        }
        c->watch_polled = true;
    }
    if (loop->srv->cfg->idle_timeout_ns) {
        lru_unlink(c);
        lru_push(loop, c, now);
    }
}

static void loop_news_event(yard_loop_t *loop, yard_conn_t *c, uint64_t now)
{
    if (c->job.done) {
        /* A pool thread has the connection: just consume the wake-up; the
         * job's completion re-signals the watch if it is still due. */
        yard_watch_drain(c->watch);
        return;
    }
    yard_conn_on_news(c, &loop->scratch);
    loop_after(loop, c, now);
}

static void loop_conn_event(yard_loop_t *loop, yard_conn_t *c, uint32_t ev, uint64_t now)
{
    if ((ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) && yard_conn_wants_read(c))
        yard_conn_on_readable(c, &loop->scratch);
    if ((ev & (EPOLLOUT | EPOLLERR)) && c->out.len && !c->failed)
        yard_conn_on_writable(c);
    if ((ev & EPOLLERR) && !c->out.len && !yard_conn_wants_read(c) && !c->job_pending &&
        !c->failed) {
        c->failed = true; /* an error nobody will read: nothing more can happen */
    }
    loop_after(loop, c, now);
}

static void loop_completions(yard_loop_t *loop, uint64_t now)
{
    yard_job_t *job = yard_completions_take(&loop->done);
    while (job) {
        yard_job_t *next = job->next;
        yard_conn_t *c = job->owner;
        loop->jobs_in_flight--;
        if (c->failed) {
            c->job.done = NULL;
            c->job_pending = false;
            loop_close(loop, c, NULL);
        } else {
            yard_conn_on_job_done(c, &loop->scratch);
            loop_after(loop, c, now);
        }
        job = next;
    }
}

static void loop_fire_timers(yard_loop_t *loop, uint64_t now)
{
    while (loop->ntimers && loop->timers[0]->timer_key <= now) {
        yard_conn_t *c = loop->timers[0];
        heap_remove(loop, c);
        yard_conn_on_timer(c, &loop->scratch);
        loop_after(loop, c, now);
    }
}

static int loop_timeout_ms(const yard_loop_t *loop, uint64_t now)
{
    uint64_t idle = loop->srv->cfg->idle_timeout_ns;
    uint64_t due = UINT64_MAX;
    if (idle && loop->lru.lru_next != &loop->lru)
        due = loop->lru.lru_next->last_active + idle;
    if (loop->ntimers && loop->timers[0]->timer_key < due)
        due = loop->timers[0]->timer_key;
    if (due == UINT64_MAX)
        return -1;
    if (due <= now)
        return 0;
    uint64_t ms = (due - now + YARD_NS_PER_MS - 1) / YARD_NS_PER_MS;
    return ms > 60000 ? 60000 : (int)ms;
}

static void loop_expire(yard_loop_t *loop, uint64_t now)
{
    uint64_t idle = loop->srv->cfg->idle_timeout_ns;
    while (loop->lru.lru_next != &loop->lru && loop->lru.lru_next->last_active + idle <= now)
        loop_close(loop, loop->lru.lru_next, "idle timeout");
}

/* True when the stop descriptor says the loop must end. */
static bool loop_stop_requested(yard_loop_t *loop)
{
    if (!loop->stop_is_sigfd)
        return true;
    for (;;) {
        int sig = yard_signal_take(loop->stop_fd);
        if (sig == SIGTERM || sig == SIGINT || sig < 0)
            return true;
        if (sig == 0)
            return false;
    }
}

void yard_loop_run(yard_loop_t *loop)
{
    struct epoll_event events[LOOP_EVENTS];
    bool idle_timed = loop->srv->cfg->idle_timeout_ns != 0;
    uint64_t now = yard_now_ns();
    for (;;) {
        int n = epoll_wait(loop->epfd, events, LOOP_EVENTS, loop_timeout_ms(loop, now));
        if (n < 0 && errno != EINTR) {
            yard_log_err("epoll_wait: %s", strerror(errno));
            break;
        }
        /* Always a fresh reading: a timer armed after an idle spell must
         * not be measured against the time before it. */
        now = yard_now_ns();
        bool stop = false;
        loop->batch = events;
        loop->batch_n = n;
        for (int i = 0; i < n; i++) {
            loop->batch_i = i;
            void *p = events[i].data.ptr;
            if (!p)
                continue; /* its connection was closed earlier in this batch */
            if ((uintptr_t)p & NEWS_TAG)
                loop_news_event(loop, (yard_conn_t *)((uintptr_t)p & ~NEWS_TAG), now);
            else if (p == &loop->listen_fd)
                loop_accept(loop, now);
            else if (p == &loop->stop_fd)
                stop = stop || loop_stop_requested(loop);
            else if (p == &loop->done)
                loop_completions(loop, now);
            else
                loop_conn_event(loop, p, events[i].events, now);
        }
        loop->batch_n = 0;
        if (stop)
            break;
        if (loop->ntimers)
            loop_fire_timers(loop, now);
        if (idle_timed)
            loop_expire(loop, now);
    }
    /* Jobs still in the pool refer to their connections: wait for them. */
    while (loop->jobs_in_flight) {
        struct pollfd pfd = {.fd = loop->done.efd, .events = POLLIN};
        poll(&pfd, 1, 100);
        for (yard_job_t *job = yard_completions_take(&loop->done); job; job = job->next) {
            yard_conn_t *c = job->owner;
            c->job.done = NULL;
            loop->jobs_in_flight--;
        }
    }
    while (loop->lru.lru_next != &loop->lru)
        loop_close(loop, loop->lru.lru_next, NULL);
}
