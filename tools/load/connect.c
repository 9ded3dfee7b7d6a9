/* Linux-only: epoll. What a port uses instead: docs/portability.md. */
/* Connection set-up shared by the modes: non-blocking connects registered
 * with the mode's epoll set, and their completion. */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "load.h"

int load_connect(const load_opts_t *o, load_result_t *r, int ep, void *ptr)
{
    const char *call = "";
    int fd = yard_connect(&o->target, true, &call);
    if (fd < 0) {
        char err[256];
        yard_net_message(err, sizeof err, &o->target, call, fd);
        load_error(r, "%s", err);
        return -1;
    }
    struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = ptr};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    return fd;
}

int load_connected(const load_opts_t *o, load_result_t *r, int ep, int fd, void *ptr,
                   bool nodelay)
{
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err) {
        load_error(r, "connect to %s: %s", o->target_text, strerror(err));
        return -1;
    }
    if (nodelay)
        yard_set_nodelay(fd);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ptr};
    epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
    return 0;
}
