/* epoll: one thread, one non-blocking event loop (see loop.c). */
#include "loop.h"
#include "models.h"

static int epoll_serve(yard_server_t *srv)
{
    yard_loop_t loop;
    if (yard_loop_init(&loop, srv, srv->listen_fd, srv->sig_fd, true) < 0)
        return 1;
    yard_loop_run(&loop);
    yard_loop_fini(&loop);
    return 0;
}

const yard_model_t yard_model_epoll = {
    .name = "epoll",
    .summary = "one thread, one non-blocking event loop (level-triggered epoll); CPU-heavy jobs "
               "on a small offload pool",
    .traits = {.event_based = true,
               .shared_state = "plain memory, one thread",
               .ipc = "none",
               .error_isolation = "none: a crash ends every connection"},
    .serve = epoll_serve,
};
