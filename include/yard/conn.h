/* The connection driver that every model shares. It owns the buffers of one
 * connection, calls the app and carries out its effects; models only decide
 * when to call it (after a blocking read, on a readiness event, when a
 * coroutine is resumed). This is what keeps the app code identical. */
#ifndef YARD_CONN_H
#define YARD_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "yard/buf.h"
#include "yard/bus.h"
#include "yard/net.h"
#include "yard/offload.h"
#include "yard/server.h"

/* Reads are at most this big: the unit of fairness between connections. */
#define YARD_READ_CHUNK (64u * 1024u)
/* Stop reading from a peer while this much output waits for it
 * (backpressure); resume when the queue drains. */
#define YARD_OUT_HIGH_WATER (256u * 1024u)
/* A peer that lets more than this pile up is disconnected ("send queue
 * exceeded"; --max-sendq changes it); reachable only by data pushed to a
 * client that does not read (chat). */
#define YARD_OUT_LIMIT (8u * 1024u * 1024u)
/* A partial request larger than this closes the connection. */
#define YARD_IN_LIMIT (1u * 1024u * 1024u)
/* --flush buffered: write the output file in chunks of this size. */
#define YARD_STORE_CHUNK (64u * 1024u)

/* Per-thread buffers the common case goes through, so an idle connection
 * holds no buffer memory at all. */
typedef struct yard_scratch {
    yard_buf_t in;
    yard_buf_t out;
} yard_scratch_t;

enum yard_io {
    YARD_IO_OK = 0,   /* progress */
    YARD_IO_AGAIN,    /* nothing to do now (EAGAIN, EINTR, timeout on a blocking fd) */
    YARD_IO_DONE,     /* the connection is finished: close it */
};

typedef struct yard_conn {
    yard_server_t *srv;
    int fd;
    bool blocking;    /* fd is blocking (fork, thread) */
    bool read_eof;    /* the peer sent FIN */
    bool closing;     /* the app asked to close after the queued output */
    bool failed;      /* an I/O error: close now, drop output */
    const char *close_reason;
    int close_level;  /* how loudly the close is logged (conn.c) */
    void *session;
    yard_buf_t in;    /* a partial request the app has not consumed */
    yard_buf_t out;   /* output the socket has not taken yet */
    yard_buf_t store; /* bytes on their way to the output file */
    char peer[YARD_ADDR_STRLEN];
    yard_addr_t peer_addr; /* len 0 when unknown */
    uint64_t wake_at;  /* the app's timer, 0 when none is armed */
    bool jobs_inline;  /* run offloaded jobs on the connection's own thread */
    bool job_pending;  /* a job was requested and job_done has not run yet */
    yard_job_t job;    /* job.done is set while a pool thread has it */
    yard_access_obj_t *job_access; /* the job needs a permission on this object */
    int job_access_mode;
    bool access_by_model; /* the model runs permission jobs (coro); else a rwlock here */
    yard_watch_t *watch;  /* the app's news watch, from its first yard_fx_watch */
    bool no_watch;        /* fork --pair RECV: news is the SEND process's business */
    pthread_mutex_t *app_lock; /* fork --pair: held around every app callback (the
                                * session is shared with the SEND process) */
    bool watch_polled;    /* the model waits on watch->efd (event loops) */
    /* Event-loop bookkeeping: idle-timeout list, timer heap, registered events. */
    struct yard_conn *lru_prev, *lru_next;
    uint64_t last_active;
    uint64_t timer_key;
    size_t timer_idx;
    uint32_t events;
    bool polled;       /* in the loop's epoll set */
} yard_conn_t;

#define YARD_TIMER_NONE ((size_t)-1)

/* Allocate a connection for an accepted fd and let the app open it. */
yard_conn_t *yard_conn_open(yard_server_t *srv, int fd, bool blocking);
/* The same with the session at a given place (fork --pair: a shared page),
 * whose callbacks run holding app_lock, and without news watches. */
yard_conn_t *yard_conn_open_shared(yard_server_t *srv, int fd, void *session,
                                   pthread_mutex_t *app_lock);
/* Lock a process-shared robust mutex (taking it over from a dead holder). */
void yard_conn_app_lock(pthread_mutex_t *mu);
/* Read once, hand the bytes to the app and carry out its effects. */
int yard_conn_on_readable(yard_conn_t *c, yard_scratch_t *s);
/* Send queued output. */
int yard_conn_on_writable(yard_conn_t *c);
/* The armed timer is due: run app->timer. */
void yard_conn_on_timer(yard_conn_t *c, yard_scratch_t *s);
/* A job a pool thread ran has come back: run app->job_done. */
void yard_conn_on_job_done(yard_conn_t *c, yard_scratch_t *s);
/* The watch's eventfd is readable: drain it and, if the topic has news,
 * run app->news. */
void yard_conn_on_news(yard_conn_t *c, yard_scratch_t *s);
/* The descriptor a model waits on for news, or -1. */
static inline int yard_conn_news_fd(const yard_conn_t *c) { return c->watch ? c->watch->efd : -1; }
static inline bool yard_conn_wants_read(const yard_conn_t *c)
{
    return !c->read_eof && !c->closing && !c->failed && !c->job_pending &&
           c->out.len < YARD_OUT_HIGH_WATER;
}
/* Nothing more will happen on this connection: close it. A connection
 * that is waiting for its job or its timer is not finished, even when the
 * peer has half-closed (its answer is still to come). */
static inline bool yard_conn_finished(const yard_conn_t *c)
{
    return c->failed ||
           ((c->read_eof || c->closing) && c->out.len == 0 && !c->job_pending && !c->wake_at);
}
/* Serve a blocking connection until it ends or *stop becomes true; timers
 * are waited for with poll(), jobs run inline. */
void yard_conn_run_blocking(yard_conn_t *c, yard_scratch_t *s, const _Atomic int *stop);
/* Flush what is bound for the output file, let the app release the session,
 * close the fd, log an abnormal close and free the connection. */
void yard_conn_close(yard_conn_t *c, const char *reason);
void yard_scratch_free(yard_scratch_t *s);

/* The live connections of a model whose connections block or park (thread,
 * coro), so that a stop can shutdown() every socket and wake them all. A
 * connection leaves the set before its fd is closed, so a stop never shuts
 * down a descriptor number that has been reused. Thread-safe. */
typedef struct yard_conn_set {
    pthread_mutex_t mu;
    yard_conn_t **v;
    size_t n, cap;
} yard_conn_set_t;

#define YARD_CONN_SET_INIT {.mu = PTHREAD_MUTEX_INITIALIZER}
/* 0, or -ENOMEM (the connection is not in the set). */
int yard_conn_set_add(yard_conn_set_t *set, yard_conn_t *c);
void yard_conn_set_remove(yard_conn_set_t *set, yard_conn_t *c);
void yard_conn_set_shutdown_all(yard_conn_set_t *set);
/* Free the array (the set must be empty of running connections). */
void yard_conn_set_free(yard_conn_set_t *set);

#endif
