/* Linux-only: epoll. What a port uses instead: docs/portability.md. */
/* The event loops' poller over Linux epoll (src/model/poller.h). */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "models.h"
#include "poller.h"
#include "yard/config.h"
#include "yard/opt.h"

#define EP_BATCH 256 /* the loop asks for at most this many at once */

struct ep_poller {
    yard_poller_t base;
    int epfd;
    struct epoll_event ev[EP_BATCH];
};

static uint32_t to_epoll(uint32_t e)
{
    return (e & YARD_POLL_IN ? EPOLLIN : 0u) | (e & YARD_POLL_OUT ? EPOLLOUT : 0u);
}

static int ep_create(yard_poller_t **out)
{
    struct ep_poller *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->base.ops = &yard_poller_epoll;
    p->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (p->epfd < 0) {
        int e = errno;
        free(p);
        return -e;
    }
    *out = &p->base;
    return 0;
}

static int ep_ctl(yard_poller_t *base, int op, int fd, uint32_t events, void *ptr)
{
    struct ep_poller *p = (struct ep_poller *)base;
    struct epoll_event ev = {.events = to_epoll(events), .data.ptr = ptr};
    return epoll_ctl(p->epfd, op, fd, &ev) < 0 ? -errno : 0;
}

static int ep_add(yard_poller_t *p, int fd, uint32_t events, void *ptr)
{
    return ep_ctl(p, EPOLL_CTL_ADD, fd, events, ptr);
}

static int ep_mod(yard_poller_t *p, int fd, uint32_t events, void *ptr)
{
    return ep_ctl(p, EPOLL_CTL_MOD, fd, events, ptr);
}

static int ep_del(yard_poller_t *p, int fd) { return ep_ctl(p, EPOLL_CTL_DEL, fd, 0, NULL); }

static void ep_forget(yard_poller_t *p, int fd)
{
    (void)p, (void)fd; /* close() takes the descriptor out of the epoll set */
}

static int ep_wait(yard_poller_t *base, yard_poll_event_t *out, int max, int timeout_ms)
{
    struct ep_poller *p = (struct ep_poller *)base;
    int n = epoll_wait(p->epfd, p->ev, max < EP_BATCH ? max : EP_BATCH, timeout_ms);
    if (n < 0)
        return -errno;
    for (int i = 0; i < n; i++) {
        uint32_t e = p->ev[i].events;
        out[i].ptr = p->ev[i].data.ptr;
        out[i].events = (e & EPOLLIN ? YARD_POLL_IN : 0u) | (e & EPOLLOUT ? YARD_POLL_OUT : 0u) |
                        (e & EPOLLERR ? YARD_POLL_ERR : 0u) | (e & EPOLLHUP ? YARD_POLL_HUP : 0u);
    }
    return n;
}

static void ep_destroy(yard_poller_t *base)
{
    struct ep_poller *p = (struct ep_poller *)base;
    if (!p)
        return;
    close(p->epfd);
    free(p);
}

const yard_poller_ops_t yard_poller_epoll = {
    .name = "epoll", .create = ep_create, .add = ep_add,   .mod = ep_mod,
    .del = ep_del,   .forget = ep_forget, .wait = ep_wait, .destroy = ep_destroy,
};

const yard_opt_choice_t yard_poller_choices[] = {YARD_OPT_CHOICE("epoll", YARD_POLLER_EPOLL),
                                                 YARD_OPT_CHOICE("poll", YARD_POLLER_POLL),
                                                 YARD_OPT_CHOICES_END};

const yard_poller_ops_t *yard_poller_ops(int which)
{
    return which == YARD_POLLER_POLL ? &yard_poller_poll : &yard_poller_epoll;
}
