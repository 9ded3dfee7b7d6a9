/* The event loop: level-triggered epoll, one read per readiness event.
 *
 * Level-triggered because it makes backpressure simple and fair: a
 * connection whose output queue is over the high-water mark just drops
 * EPOLLIN from its interest set, and one that has more to read than one
 * chunk is served again on the next round instead of starving the others.
 * The steady state of a ping-pong costs epoll_wait + read + send: the reply
 * is written directly from the app's output, and EPOLLOUT is only
 * registered while a reply is partly unsent. */
#include "loop.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "yard/clock.h"
#include "yard/log.h"

#define LOOP_EVENTS 256
#define ACCEPT_BATCH 64

static void lru_unlink(yard_conn_t *c);
static void lru_push(yard_loop_t *loop, yard_conn_t *c, uint64_t now);
static void loop_close(yard_loop_t *loop, yard_conn_t *c, const char *reason);
static void loop_accept(yard_loop_t *loop, uint64_t now);
static void loop_conn_event(yard_loop_t *loop, yard_conn_t *c, uint32_t ev, uint64_t now);
static int loop_timeout_ms(const yard_loop_t *loop, uint64_t now);
static void loop_expire(yard_loop_t *loop, uint64_t now);

int yard_loop_init(yard_loop_t *loop, yard_server_t *srv, int listen_fd, int stop_fd,
                   bool stop_is_sigfd)
{
    memset(loop, 0, sizeof *loop);
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
    if (loop->epfd > 0)
        close(loop->epfd);
    if (loop->reserve_fd >= 0)
        close(loop->reserve_fd);
    loop->epfd = loop->reserve_fd = -1;
    yard_scratch_free(&loop->scratch);
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
    lru_unlink(c);
    /* close() removes the fd from the epoll set: no EPOLL_CTL_DEL needed. */
    yard_conn_close(c, reason);
    yard_server_release(loop->srv);
    loop->nconns--;
}

/* Bring the registered events in line with what the connection wants. */
static int loop_rearm(yard_loop_t *loop, yard_conn_t *c)
{
    uint32_t want = (yard_conn_wants_read(c) ? EPOLLIN : 0) | (c->out.len ? EPOLLOUT : 0);
    if (want == c->events)
        return 0;
    struct epoll_event ev = {.events = want, .data.ptr = c};
    if (epoll_ctl(loop->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
        return -1;
    c->events = want;
    return 0;
}

static void loop_accept(yard_loop_t *loop, uint64_t now)
{
    yard_server_t *srv = loop->srv;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        int fd = yard_server_accept(srv, loop->listen_fd, true, &loop->reserve_fd);
        if (fd < 0)
            return;
        char peer[YARD_ADDR_STRLEN] = "(unknown peer)";
        yard_addr_t pa;
        if (yard_peer_name(fd, &pa) == 0)
            yard_addr_format(&pa, peer, sizeof peer);
        if (!yard_server_admit(srv, peer)) {
            close(fd);
            continue;
        }
        yard_conn_t *c = yard_conn_open(srv, fd, false);
        if (!c) {
            yard_log_err("%s: out of memory for a connection", peer);
            close(fd);
            yard_server_release(srv);
            continue;
        }
        lru_push(loop, c, now);
        loop->nconns++;
        c->events = EPOLLIN | (c->out.len ? EPOLLOUT : 0);
        struct epoll_event ev = {.events = c->events, .data.ptr = c};
        if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            yard_log_err("%s: epoll_ctl: %s", peer, strerror(errno));
            loop_close(loop, c, NULL);
        } else if (yard_conn_finished(c)) {
            loop_close(loop, c, NULL);
        }
    }
}

static void loop_conn_event(yard_loop_t *loop, yard_conn_t *c, uint32_t ev, uint64_t now)
{
    if ((ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) && yard_conn_wants_read(c))
        yard_conn_on_readable(c, &loop->scratch);
    if ((ev & (EPOLLOUT | EPOLLERR)) && c->out.len && !c->failed)
        yard_conn_on_writable(c);
    if (yard_conn_finished(c) || ((ev & EPOLLERR) && !c->out.len && !yard_conn_wants_read(c))) {
        loop_close(loop, c, NULL);
        return;
    }
    if (loop_rearm(loop, c) < 0) {
        loop_close(loop, c, "epoll_ctl failed");
        return;
    }
    if (loop->srv->cfg->idle_timeout_ns) {
        lru_unlink(c);
        lru_push(loop, c, now);
    }
}

static int loop_timeout_ms(const yard_loop_t *loop, uint64_t now)
{
    uint64_t idle = loop->srv->cfg->idle_timeout_ns;
    if (!idle || loop->lru.lru_next == &loop->lru)
        return -1;
    uint64_t due = loop->lru.lru_next->last_active + idle;
    if (due <= now)
        return 0;
    return (int)((due - now + YARD_NS_PER_MS - 1) / YARD_NS_PER_MS);
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
    bool timed = loop->srv->cfg->idle_timeout_ns != 0;
    uint64_t now = timed ? yard_now_ns() : 0;
    for (;;) {
        int n = epoll_wait(loop->epfd, events, LOOP_EVENTS, loop_timeout_ms(loop, now));
        if (n < 0 && errno != EINTR) {
            yard_log_err("epoll_wait: %s", strerror(errno));
            break;
        }
        if (timed)
            now = yard_now_ns();
        bool stop = false;
        for (int i = 0; i < n; i++) {
            void *p = events[i].data.ptr;
            if (p == &loop->listen_fd)
                loop_accept(loop, now);
            else if (p == &loop->stop_fd)
                stop = stop || loop_stop_requested(loop);
            else
                loop_conn_event(loop, p, events[i].events, now);
        }
        if (stop)
            break;
        if (timed)
            loop_expire(loop, now);
    }
    while (loop->lru.lru_next != &loop->lru)
        loop_close(loop, loop->lru.lru_next, NULL);
}
