/* epoll: one thread, one non-blocking event loop (see loop.c). */
#include "loop.h"
#include "models.h"

static int epoll_serve(yard_server_t *srv)
{
    yard_loop_t loop;
    if (yard_loop_init(&loop, srv, &srv->ls, srv->sig_fd, true) < 0)
        return 1;
    yard_loop_run(&loop);
    yard_loop_fini(&loop);
    return 0;
}

static const yard_opt_t epoll_opts[] = {
    {.name = "offload-threads", .form = "N", .type = YARD_OPT_INT,
     YARD_OPT_FIELD(yard_config_t, offload_threads), .min = 0, .max = 256, .def = "2",
     .help = "threads that run CPU-heavy jobs such as bcrypt, started on the first job; 0 runs "
             "them inline, blocking the loop"},
    YARD_POLLER_OPT,
    YARD_OPT_END,
};

const yard_model_t yard_model_epoll = {
    .name = "epoll",
    .summary = "one thread, one non-blocking event loop (level-triggered epoll); CPU-heavy jobs "
               "on a small offload pool",
    .traits = {.event_based = true,
               .shared_state = "plain memory, one thread",
               .ipc = "none",
               .error_isolation = "none: a crash ends every connection"},
    .opts = epoll_opts,
    .serve = epoll_serve,
};
