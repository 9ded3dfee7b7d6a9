/* The bookkeeping every event loop shares, whatever it waits with (epoll in
 * loop.c, io_uring in uring.c): the connections in idle-timeout order, the
 * apps' timers in a min-heap, and the offload pool with its completion
 * queue. A loop's per-connection state starts with a yard_evconn_t. */
#ifndef YARD_MODEL_EVBASE_H
#define YARD_MODEL_EVBASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "yard/conn.h"
#include "yard/heap.h"
#include "yard/offload.h"

typedef struct yard_evconn {
    yard_conn_link_t lru;   /* idle-timeout order; lru.conn is the connection */
    uint64_t last_active;
    yard_heap_node_t timer; /* in timers while the app's timer is armed */
    bool in_pool;           /* a pool thread has its job */
} yard_evconn_t;

typedef struct yard_evbase {
    yard_server_t *srv;
    yard_scratch_t scratch;
    yard_conn_link_t lru; /* sentinel of the idle-timeout list, oldest first */
    size_t nconns;
    yard_heap_t timers;   /* the connections' app timers */
    yard_pool_t *pool;    /* started on the first offloaded job */
    bool pool_failed;     /* could not start one: jobs run inline */
    yard_completions_t done;
    size_t jobs_in_flight;
} yard_evbase_t;

/* The loop's own state of connection c starts with its yard_evconn_t. */
static inline yard_evconn_t *yard_evconn(const yard_conn_t *c)
{
    return (yard_evconn_t *)yard_conn_model(c);
}

void yard_evbase_init(yard_evbase_t *b, yard_server_t *srv);
/* After yard_evbase_wait_jobs: the pool is idle. */
void yard_evbase_fini(yard_evbase_t *b);

/* Open a connection on an admitted fd and add it; NULL when out of memory
 * (logged; the fd is closed and its admission released). */
yard_conn_t *yard_evbase_open(yard_evbase_t *b, int fd, const yard_conn_policy_t *policy,
                              const char *peer, uint64_t now);
/* The connection leaves the lists (before it is closed). */
void yard_evbase_remove(yard_evbase_t *b, yard_conn_t *c);
/* It was active now: to the young end of the idle-timeout list (only kept
 * when an idle timeout is set). */
void yard_evbase_touch(yard_evbase_t *b, yard_conn_t *c, uint64_t now);
yard_conn_t *yard_evbase_oldest(const yard_evbase_t *b);

/* When the loop must wake next for a timer or an idle timeout
 * (UINT64_MAX: never), and the same as an epoll_wait timeout from now. */
uint64_t yard_evbase_due(const yard_evbase_t *b);
int yard_evbase_timeout_ms(const yard_evbase_t *b, uint64_t now);
/* One connection silent for the idle timeout (the caller closes it), or
 * NULL. A connection waiting for its own job is not silent: its clock
 * starts again. */
yard_conn_t *yard_evbase_expired(yard_evbase_t *b, uint64_t now);

/* After anything happened to connection c (not in the pool): what the
 * driver says it waits for, with what needs no waiting settled here. A job
 * goes to the pool (YARD_NEXT_JOB: the loop stops watching the socket until
 * the job is back), started on the first job actually offloaded so that a
 * loop whose app never offloads stays one thread (watch(arg, efd) makes the
 * loop wait on its completion queue's eventfd), or, when no
 * pool can be had, runs on this thread, as with --offload-threads 0; the
 * app's timer goes into the heap. YARD_NEXT_CLOSE with *why the loop's
 * reason, NULL when it is the driver's own. */
yard_wait_t yard_evbase_next(yard_evbase_t *b, yard_conn_t *c, int (*watch)(void *arg, int efd),
                             void *arg, const char **why);
/* What a loop does after anything happened to a connection. */
typedef void (*yard_evbase_after_fn)(void *loop, yard_conn_t *c, uint64_t now);
/* The jobs that came back: each connection's job_done, then after. */
void yard_evbase_jobs_done(yard_evbase_t *b, yard_evbase_after_fn after, void *loop, uint64_t now);
/* The app timers that are due: each connection's timer, then after. */
void yard_evbase_fire_timers(yard_evbase_t *b, yard_evbase_after_fn after, void *loop,
                             uint64_t now);
/* At the end: wait until every job in the pool has come back. */
void yard_evbase_wait_jobs(yard_evbase_t *b);

#endif
