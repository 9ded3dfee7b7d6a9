/* The event loop: level-triggered readiness, one read per readiness event,
 * over a poller (poller.h: epoll by default, poll with --poller poll).
 *
 * Level-triggered because it makes backpressure simple and fair: a
 * connection whose output queue is over the high-water mark just drops
 * IN from its interest set, and one that has more to read than one
 * chunk is served again on the next round instead of starving the others.
 * The steady state of a ping-pong costs epoll_wait + read + send: the reply
 * is written directly from the app's output, and OUT is only
 * registered while a reply is partly unsent.
 *
 * App timers live in a binary min-heap; jobs go to the offload pool and come
 * back through a completion queue whose eventfd is in the poller's set. */
#include "loop.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "poller.h"

#include "yard/clock.h"
#include "yard/log.h"

#define LOOP_EVENTS 256
/* A connection's news eventfd is in the epoll set with the connection's
 * address + 1 as its data (connections are aligned, so bit 0 tells them
 * apart from the socket's entry). */
#define NEWS_TAG ((uintptr_t)1)
#define ACCEPT_BATCH 64

/* The loop's own state of a connection (yard_conn_model). */
struct loop_conn {
    yard_evconn_t ev;       /* first: timers, idle order, the pool */
    uint32_t events;        /* registered for the socket */
    bool polled;            /* the socket is in the poller's set */
    bool news_polled;       /* the news eventfd is in the poller's set */
};

#define LC(c) ((struct loop_conn *)yard_conn_model(c))

static void loop_close(yard_loop_t *loop, yard_conn_t *c, const char *reason);
static void loop_after(yard_loop_t *loop, yard_conn_t *c, uint64_t now);

/* The pool's completion queue is in the epoll set, told apart by its data
 * pointer. */
static int loop_watch_done(void *arg, int efd)
{
    yard_loop_t *loop = arg;
    int rc = loop->poller->ops->add(loop->poller, efd, YARD_POLL_IN, &loop->b.done);
    if (rc < 0) {
        yard_log_err("%s: watching the completions: %s", loop->poller->ops->name, strerror(-rc));
        return -1;
    }
    return 0;
}

int yard_loop_init(yard_loop_t *loop, yard_server_t *srv, const yard_listen_set_t *ls,
                   int stop_fd, bool stop_is_sigfd)
{
    memset(loop, 0, sizeof *loop);
    yard_evbase_init(&loop->b, srv);
    loop->ls = *ls;
    loop->stop_fd = stop_fd;
    loop->stop_is_sigfd = stop_is_sigfd;
    loop->policy = (yard_conn_policy_t){.job_pool = srv->cfg->offload_threads > 0,
                                        .model_size = sizeof(struct loop_conn)};
    loop->reserve_fd = yard_reserve_fd_open();
    const yard_poller_ops_t *ops = yard_poller_ops(srv->cfg->poller);
    int rc = ops->create(&loop->poller);
    if (rc < 0) {
        yard_log_err("%s: creating the poller: %s", ops->name, strerror(-rc));
        goto err;
    }
    /* The listeners and the stop descriptor are told apart from
     * connections by their pointer, which points into the loop itself. */
    for (int i = 0; i < ls->n; i++)
        if ((rc = ops->add(loop->poller, ls->fd[i], YARD_POLL_IN, &loop->ls.fd[i])) < 0) {
            yard_log_err("%s: watching a listener: %s", ops->name, strerror(-rc));
            goto err;
        }
    if ((rc = ops->add(loop->poller, stop_fd, YARD_POLL_IN, &loop->stop_fd)) < 0) {
        yard_log_err("%s: watching the stop descriptor: %s", ops->name, strerror(-rc));
        goto err;
    }
    return 0;
err:
    yard_loop_fini(loop);
    return -1;
}

void yard_loop_fini(yard_loop_t *loop)
{
    yard_evbase_fini(&loop->b); /* the pool is idle by now: yard_loop_run waited for its jobs */
    if (loop->poller)
        loop->poller->ops->destroy(loop->poller);
    loop->poller = NULL;
    if (loop->reserve_fd >= 0)
        close(loop->reserve_fd);
    loop->reserve_fd = -1;
}

static void loop_close(yard_loop_t *loop, yard_conn_t *c, const char *reason)
{
    if (LC(c)->ev.in_pool) {
        /* A pool thread still has its job: close when the job comes back. */
        yard_conn_fail(c, reason, YARD_CLOSE_INFO);
        return;
    }
    yard_evbase_remove(&loop->b, c);
    for (int j = loop->batch_i + 1; j < loop->batch_n; j++) {
        void *p = loop->batch[j].ptr;
        if (p == c || p == (void *)((uintptr_t)c | NEWS_TAG))
            loop->batch[j].ptr = NULL;
    }
    /* The descriptors are about to close: epoll drops them by itself (no
     * system call), poll must forget them. */
    struct loop_conn *lc = LC(c);
    if (lc->polled)
        loop->poller->ops->forget(loop->poller, c->fd);
    if (lc->news_polled)
        loop->poller->ops->forget(loop->poller, yard_conn_news_fd(c));
    yard_conn_close(c, reason);
    yard_server_release(loop->b.srv);
}

/* Bring the registered events in line with what the connection wants. */
static int loop_rearm(yard_loop_t *loop, yard_conn_t *c, const yard_wait_t *w)
{
    struct loop_conn *lc = LC(c);
    uint32_t want = (w->read ? YARD_POLL_IN : 0u) | (w->write ? YARD_POLL_OUT : 0u);
    if (lc->polled && want == lc->events)
        return 0;
    yard_poller_t *p = loop->poller;
    if ((lc->polled ? p->ops->mod : p->ops->add)(p, c->fd, want, c) < 0)
        return -1;
    lc->events = want;
    lc->polled = true;
    return 0;
}

/* Whether an event's pointer is one of the loop's listener slots (compared
 * as integers: p may point anywhere). */
static bool is_listener(const yard_loop_t *loop, const void *p)
{
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)loop->ls.fd;
    return a >= lo && a < lo + (uintptr_t)loop->ls.n * sizeof loop->ls.fd[0];
}

static void loop_accept(yard_loop_t *loop, int listen_fd, uint64_t now)
{
    yard_server_t *srv = loop->b.srv;
    char peer[YARD_ADDR_STRLEN];
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        int fd = yard_server_accept_admitted(srv, listen_fd, true, &loop->reserve_fd, peer,
                                             sizeof peer);
        if (fd < 0)
            return;
        yard_conn_t *c = yard_evbase_open(&loop->b, fd, &loop->policy, peer, now);
        if (c)
            loop_after(loop, c, now);
    }
}

/* After anything happened to a connection: ask the driver what it waits
 * for now and arrange for exactly that. */
static void loop_after(yard_loop_t *loop, yard_conn_t *c, uint64_t now)
{
    struct loop_conn *lc = LC(c);
    if (lc->ev.in_pool)
        return; /* in the pool's hands until the job comes back */
    const char *why;
    yard_wait_t w = yard_evbase_next(&loop->b, c, loop_watch_done, loop, &why);
    if (w.next == YARD_NEXT_JOB) {
        /* Out of the poller's set while a pool thread has the job: a peer
         * that resets meanwhile must not spin a level-triggered loop. */
        if (lc->polled) {
            loop->poller->ops->del(loop->poller, c->fd);
            lc->polled = false;
        }
        return;
    }
    if (w.next == YARD_NEXT_CLOSE) {
        loop_close(loop, c, why);
        return;
    }
    if (loop_rearm(loop, c, &w) < 0) {
        loop_close(loop, c, "the poller refused the socket");
        return;
    }
    if (w.news && !lc->news_polled) {
        if (loop->poller->ops->add(loop->poller, yard_conn_news_fd(c), YARD_POLL_IN,
                                   (void *)((uintptr_t)c | NEWS_TAG)) < 0) {
            loop_close(loop, c, "the poller refused the news descriptor");
            return;
        }
        lc->news_polled = true;
    }
    if (loop->b.srv->cfg->idle_timeout_ns)
        yard_evbase_touch(&loop->b, c, now);
}

static void loop_news_event(yard_loop_t *loop, yard_conn_t *c, uint64_t now)
{
    yard_conn_on_news(c, &loop->b.scratch);
    loop_after(loop, c, now);
}

static void loop_conn_event(yard_loop_t *loop, yard_conn_t *c, uint32_t ev, uint64_t now)
{
    struct loop_conn *lc = LC(c);
    if ((ev & (YARD_POLL_IN | YARD_POLL_HUP | YARD_POLL_ERR)) && (lc->events & YARD_POLL_IN))
        yard_conn_read(c, &loop->b.scratch);
    if ((ev & (YARD_POLL_OUT | YARD_POLL_ERR)) && (lc->events & YARD_POLL_OUT) && !c->failed)
        yard_conn_on_writable(c);
    if ((ev & YARD_POLL_ERR) && !(lc->events & YARD_POLL_IN) && !c->out.len)
        yard_conn_fail(c, "socket error", YARD_CLOSE_QUIET); /* nobody will read it */
    loop_after(loop, c, now);
}

static void loop_after_cb(void *loop, yard_conn_t *c, uint64_t now)
{
    loop_after(loop, c, now);
}

/* True when the stop descriptor says the loop must end. */
static bool loop_stop_requested(yard_loop_t *loop)
{
    return !loop->stop_is_sigfd || yard_signals_stop(loop->stop_fd, NULL, NULL) != 0;
}

void yard_loop_run(yard_loop_t *loop)
{
    yard_poll_event_t events[LOOP_EVENTS];
    yard_evbase_t *b = &loop->b;
    yard_poller_t *poller = loop->poller;
    uint64_t now = yard_now_ns();
    for (;;) {
        int n = poller->ops->wait(poller, events, LOOP_EVENTS, yard_evbase_timeout_ms(b, now));
        if (n < 0 && n != -EINTR) {
            yard_log_err("%s: waiting for events: %s", poller->ops->name, strerror(-n));
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
            void *p = events[i].ptr;
            if (!p)
                continue; /* its connection was closed earlier in this batch */
            if ((uintptr_t)p & NEWS_TAG)
                loop_news_event(loop, (yard_conn_t *)((uintptr_t)p & ~NEWS_TAG), now);
            else if (is_listener(loop, p))
                loop_accept(loop, *(int *)p, now);
            else if (p == &loop->stop_fd)
                stop = stop || loop_stop_requested(loop);
            else if (p == &b->done)
                yard_evbase_jobs_done(b, loop_after_cb, loop, now);
            else
                loop_conn_event(loop, p, events[i].events, now);
        }
        loop->batch_n = 0;
        if (stop)
            break;
        yard_evbase_fire_timers(b, loop_after_cb, loop, now);
        yard_conn_t *c;
        while ((c = yard_evbase_expired(b, now)))
            loop_close(loop, c, "idle timeout");
    }
    yard_evbase_wait_jobs(b);
    yard_conn_t *c;
    while ((c = yard_evbase_oldest(b)))
        loop_close(loop, c, NULL);
}
