/* The event loops' poller over POSIX poll(2) (src/model/poller.h): the
 * same level-triggered paradigm as epoll, with the interest set kept here
 * and handed to the kernel whole on every wait. That is its cost: each
 * wait is O(descriptors watched), where epoll_wait is O(ready ones). */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "poller.h"

struct pl_poller {
    yard_poller_t base;
    struct pollfd *fds; /* the interest set, dense */
    void **ptrs;        /* beside each entry */
    int n, cap;
    int *at;            /* descriptor -> its entry, or -1 */
    int at_cap;
    int start;          /* where the next wait starts handing out events (fairness) */
};

static short to_poll(uint32_t e)
{
    return (short)((e & YARD_POLL_IN ? POLLIN : 0) | (e & YARD_POLL_OUT ? POLLOUT : 0));
}

static int pl_create(yard_poller_t **out)
{
    struct pl_poller *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->base.ops = &yard_poller_poll;
    *out = &p->base;
    return 0;
}

static int entry_of(struct pl_poller *p, int fd)
{
    return fd >= 0 && fd < p->at_cap ? p->at[fd] : -1;
}

static int pl_add(yard_poller_t *base, int fd, uint32_t events, void *ptr)
{
    struct pl_poller *p = (struct pl_poller *)base;
    if (fd < 0)
        return -EBADF;
    if (entry_of(p, fd) >= 0)
        return -EEXIST;
    if (fd >= p->at_cap) {
        int ncap = p->at_cap ? p->at_cap : 64;
        while (ncap <= fd)
            ncap *= 2;
        int *g = realloc(p->at, (size_t)ncap * sizeof *g);
        if (!g)
            return -ENOMEM;
        for (int i = p->at_cap; i < ncap; i++)
            g[i] = -1;
        p->at = g;
        p->at_cap = ncap;
    }
    if (p->n == p->cap) {
        int ncap = p->cap ? 2 * p->cap : 64;
        struct pollfd *f = realloc(p->fds, (size_t)ncap * sizeof *f);
        if (!f)
            return -ENOMEM;
        p->fds = f;
        void **q = realloc(p->ptrs, (size_t)ncap * sizeof *q);
        if (!q)
            return -ENOMEM;
        p->ptrs = q;
        p->cap = ncap;
    }
    p->fds[p->n] = (struct pollfd){.fd = fd, .events = to_poll(events)};
    p->ptrs[p->n] = ptr;
    p->at[fd] = p->n++;
    return 0;
}

static int pl_mod(yard_poller_t *base, int fd, uint32_t events, void *ptr)
{
    struct pl_poller *p = (struct pl_poller *)base;
    int i = entry_of(p, fd);
    if (i < 0)
        return -ENOENT;
    p->fds[i].events = to_poll(events);
    p->ptrs[i] = ptr;
    return 0;
}

static int pl_del(yard_poller_t *base, int fd)
{
    struct pl_poller *p = (struct pl_poller *)base;
    int i = entry_of(p, fd);
    if (i < 0)
        return -ENOENT;
    /* The last entry takes its place: the set stays dense. */
    p->n--;
    if (i != p->n) {
        p->fds[i] = p->fds[p->n];
        p->ptrs[i] = p->ptrs[p->n];
        p->at[p->fds[i].fd] = i;
    }
    p->at[fd] = -1;
    return 0;
}

static void pl_forget(yard_poller_t *p, int fd) { pl_del(p, fd); }

static int pl_wait(yard_poller_t *base, yard_poll_event_t *out, int max, int timeout_ms)
{
    struct pl_poller *p = (struct pl_poller *)base;
    int ready = poll(p->fds, (nfds_t)p->n, timeout_ms);
    if (ready < 0)
        return -errno;
    /* Hand out at most max, starting past where the last wait stopped, so
     * that descriptors late in the set are not starved when many are
     * ready. */
    int got = 0;
    if (p->start >= p->n)
        p->start = 0;
    for (int k = 0; k < p->n && got < max && ready > 0; k++) {
        int i = (p->start + k) % p->n;
        short r = p->fds[i].revents;
        if (!r)
            continue;
        ready--;
        out[got].ptr = p->ptrs[i];
        out[got].events = (r & POLLIN ? YARD_POLL_IN : 0u) | (r & POLLOUT ? YARD_POLL_OUT : 0u) |
                          (r & (POLLERR | POLLNVAL) ? YARD_POLL_ERR : 0u) |
                          (r & POLLHUP ? YARD_POLL_HUP : 0u);
        got++;
        if (got == max)
            p->start = (i + 1) % p->n;
    }
    return got;
}

static void pl_destroy(yard_poller_t *base)
{
    struct pl_poller *p = (struct pl_poller *)base;
    if (!p)
        return;
    free(p->fds);
    free(p->ptrs);
    free(p->at);
    free(p);
}

const yard_poller_ops_t yard_poller_poll = {
    .name = "poll", .create = pl_create, .add = pl_add,   .mod = pl_mod,
    .del = pl_del,  .forget = pl_forget, .wait = pl_wait, .destroy = pl_destroy,
};
