/* One non-blocking event loop, level-triggered, over a poller (poller.h:
 * epoll, or poll with --poller poll). The `epoll` model runs one;
 * `reactors` runs one per thread or process. */
#ifndef YARD_MODEL_LOOP_H
#define YARD_MODEL_LOOP_H

#include <stdbool.h>
#include <stddef.h>

#include "evbase.h"
#include "yard/conn.h"
#include "yard/server.h"

typedef struct yard_loop {
    yard_evbase_t b;   /* connections, timers, the offload pool */
    struct yard_poller *poller;
    yard_listen_set_t ls; /* its listeners (the loop does not close them) */
    int stop_fd;       /* readable when the loop must stop */
    bool stop_is_sigfd; /* stop_fd is a signalfd: only SIGTERM/SIGINT stop */
    int reserve_fd;
    /* The batch of events being dispatched: a connection closed mid-batch
     * has its later entries (socket or news eventfd) cleared. */
    struct yard_poll_event *batch;
    int batch_i, batch_n;
    yard_conn_policy_t policy; /* of the connections this loop opens */
} yard_loop_t;

int yard_loop_init(yard_loop_t *loop, yard_server_t *srv, const yard_listen_set_t *ls,
                   int stop_fd, bool stop_is_sigfd);
/* Serve until stop_fd fires; then close every connection. */
void yard_loop_run(yard_loop_t *loop);
void yard_loop_fini(yard_loop_t *loop);

#endif
