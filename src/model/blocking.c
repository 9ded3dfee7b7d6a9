/* The blocking models' way of waiting (fork, thread): a blocking read on
 * the socket, or poll() on the socket, the news eventfd and the app's timer
 * when there is more than the socket to wait for. Output is written in full
 * by the driver (the socket is blocking), so backpressure is the kernel's: a
 * peer that does not read blocks only the thread or process that serves it,
 * and an armed timer is the paradigm's sleeping handler. */
#include <poll.h>

#include "models.h"
#include "yard/clock.h"

/* A poll is bounded so that a stop request is seen. */
#define POLL_MAX_MS 1000

const yard_conn_policy_t yard_blocking_policy = {.blocking = true};

void yard_blocking_serve(yard_conn_t *c, yard_scratch_t *s, const _Atomic int *stop)
{
    while (!atomic_load_explicit(stop, memory_order_relaxed)) {
        yard_wait_t w = yard_conn_next(c, s);
        if (w.next == YARD_NEXT_CLOSE)
            break;
        if (w.next != YARD_NEXT_WAIT) { /* not with this policy, but be whole */
            yard_conn_run_job(c, s);
            continue;
        }
        if (w.write) { /* only after a failed send, which next() reports */
            if (yard_conn_on_writable(c) == YARD_IO_DONE)
                break;
            continue;
        }
        if (!w.news && !w.deadline) {
            if (!w.read)
                break; /* nothing can move this connection any more */
            yard_conn_read(c, s);
            continue;
        }
        /* A socket that is not to be read (its peer closed, or output is
         * backed up) stays out of the poll: poll reports POLLHUP and POLLERR
         * whatever the events asked, and a half-closed peer would turn the
         * wait for a timer or news into a spin. */
        struct pollfd pfd[2] = {{.fd = w.read ? c->fd : -1, .events = POLLIN},
                                {.fd = yard_conn_news_fd(c), .events = POLLIN}};
        uint64_t ms = POLL_MAX_MS;
        if (w.deadline) {
            uint64_t now = yard_now_ns();
            ms = w.deadline > now ? (w.deadline - now + YARD_NS_PER_MS - 1) / YARD_NS_PER_MS : 0;
        }
        int r = poll(pfd, w.news ? 2 : 1, ms > POLL_MAX_MS ? POLL_MAX_MS : (int)ms);
        if (r <= 0)
            continue; /* the timer (next() runs it), a signal, or a stop check */
        if (w.news && (pfd[1].revents & POLLIN))
            yard_conn_on_news(c, s);
        else if (w.read && (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)))
            yard_conn_read(c, s);
    }
}
