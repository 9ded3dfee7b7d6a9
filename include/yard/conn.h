/* The connection driver: the one state machine of a connection, which every
 * model shares. It owns the connection's buffers, calls the app and carries
 * out its effects. A model only waits, each in its own way (a blocking read,
 * poll(), epoll, a parked coroutine, a completion queue), and then feeds what
 * happened to one entry point:
 *
 *   bytes arrived     yard_conn_rx_commit (read into yard_conn_rx_buf) or
 *                     yard_conn_on_bytes (bytes the model read elsewhere)
 *   end of input      yard_conn_on_eof
 *   writable          yard_conn_on_writable
 *   timer due         yard_conn_on_timer
 *   job done          yard_conn_on_job_done
 *   news              yard_conn_on_news (a watch's eventfd) or
 *                     yard_conn_on_wakeup (a wake-up without a watch)
 *   error             yard_conn_fail
 *
 * and then asks yard_conn_next what the connection waits for now: closed, a
 * job for a pool, a permission, or some of readable / writable / news / a
 * deadline. That function is the only place that decides; docs/architecture.md
 * draws the states. This is what keeps the app code identical under every
 * model. */
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
/* YARD_OUT_HIGH_WATER and YARD_OUT_LIMIT: app.h (an app may set its own). */
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

/* How a model carries out what the driver cannot do alone. One per model
 * (or per event loop), fixed for the connections it opens. */
typedef struct yard_conn_policy {
    /* The socket is blocking (fork, thread): output leaves in full before
     * the next read, and a send that times out is an idle timeout. */
    bool blocking;
    /* Offloaded jobs go to the model's pool (yard_conn_next says
     * YARD_NEXT_JOB); otherwise the driver runs them inline. */
    bool job_pool;
    /* The model grants permissions itself (YARD_NEXT_PERM; coro's tasks);
     * otherwise the driver runs permission jobs inline under the object's
     * process-shared rwlock. */
    bool perm_tasks;
    /* Completion-based I/O (uring): the model sends and writes the output
     * file itself, the driver never calls send() or write(). Output waits in
     * c->out and file bytes in c->store until the model takes them
     * (yard_conn_tx_take, yard_conn_store_take); what it took stays put
     * until it reports how much went (yard_conn_tx_done,
     * yard_conn_store_done), so the kernel may read it meanwhile. */
    bool completion;
    /* Bytes of the model's own per-connection state (yard_conn_model),
     * allocated with the connection, zeroed. */
    size_t model_size;
} yard_conn_policy_t;

/* What a connection waits for next. */
enum yard_next {
    YARD_NEXT_WAIT,  /* the events in yard_wait_t */
    YARD_NEXT_JOB,   /* run yard_conn_job() on a pool, then yard_conn_on_job_done */
    YARD_NEXT_PERM,  /* run it holding its permission (yard_conn_perm), then on_job_done */
    YARD_NEXT_CLOSE, /* nothing more can happen: yard_conn_close it */
};

typedef struct yard_wait {
    enum yard_next next;
    bool read;         /* readable (or end of input) */
    bool write;        /* writable: output is queued (completion: output the model
                        * has not taken yet) */
    bool store;        /* completion: file bytes the model should take now */
    bool news;         /* the news eventfd, yard_conn_news_fd */
    uint64_t deadline; /* the app's timer (yard_conn_on_timer), 0: none */
} yard_wait_t;

/* Close reasons are logged by how routine they are. */
enum yard_close_level {
    YARD_CLOSE_QUIET, /* resets and the like: debug */
    YARD_CLOSE_INFO,  /* timeouts: info, rate-limited */
    YARD_CLOSE_WARN,  /* protocol violations, resource limits: warning, rate-limited */
};

typedef struct yard_conn {
    yard_server_t *srv;
    const yard_conn_policy_t *policy;
    int fd;
    bool read_eof;    /* the peer sent FIN */
    bool closing;     /* the app asked to close after the queued output */
    bool failed;      /* an error: close now, drop output */
    bool sender;      /* fork --pair SEND: never reads; news by wake-up */
    bool shared;      /* fork --pair: the session is shared; no news watch */
    const char *close_reason;
    int close_level;  /* enum yard_close_level */
    void *session;
    void *model;      /* policy->model_size bytes of the model's own state */
    yard_buf_t in;    /* a partial request the app has not consumed */
    yard_buf_t out;   /* output the socket has not taken yet */
    yard_buf_t store; /* bytes on their way to the output file */
    yard_buf_t tx;    /* completion: output the model took, being sent */
    yard_buf_t stx;   /* completion: file bytes the model took, being written */
    char peer[YARD_ADDR_STRLEN];
    yard_addr_t peer_addr; /* len 0 when unknown */
    bool in_held;      /* input waits for the output to drain (yard_fx_hold_input) */
    bool in_paused;    /* input waits for the app's timer (yard_fx_pause_input) */
    size_t out_hold;   /* the app's bounds on queued output (yard_fx_out_bounds), */
    size_t out_max;    /* 0: YARD_OUT_HIGH_WATER, --max-sendq or YARD_OUT_LIMIT */
    uint64_t wake_at;  /* the app's timer, 0 when none is armed */
    bool wake_idle;    /* it only watches an idle connection (yard_fx_wake_idle) */
    bool job_pending;  /* a job was requested and job_done has not run yet */
    yard_job_t job;
    yard_access_obj_t *job_access; /* the job needs a permission on this object */
    int job_access_mode;
    yard_watch_t *watch;       /* the app's news watch, from its first yard_fx_watch */
    pthread_mutex_t *app_lock; /* fork --pair: held around every app callback */
    /* TLS (a connection from a --tls-listen listener): in, out and what the
     * socket carries are ciphertext; c->in and the app's output plaintext.
     * The app is opened once the handshake is done (opened), which must be
     * within tls_deadline. */
    bool secure;           /* it came through a TLS listener */
    struct yard_tls *tls;  /* its TLS state, made when its first whole record arrives */
    yard_buf_t pout;       /* TLS: plaintext an app wrote without a scratch buffer */
    yard_buf_t hs_in;      /* TLS: during the handshake, the start of a record not
                            * yet whole (OpenSSL would hold a 16 KiB buffer for it) */
    uint64_t tls_deadline; /* the handshake's end, 0 once it is done */
    bool opened;           /* app->open ran (app->close is owed) */
    char certfp[65];       /* TLS: the client certificate's SHA-256, "" when none */
    bool tls_job;          /* the pending job is the handshake's (the engine's, not the app's) */
    int tls_step;          /* its result: yard_tls_handshake's */
} yard_conn_t;

/* Allocate a connection for an accepted fd and let the app open it (on a
 * TLS listener's fd: once the handshake is done). NULL when out of memory
 * (the fd is then still the caller's). */
yard_conn_t *yard_conn_open(yard_server_t *srv, int fd, const yard_conn_policy_t *policy);
/* fork --pair: one of the two connections of a process pair over the same
 * socket, with the session at a shared place and its callbacks under
 * app_lock. The RECV one (sender false) reads and runs the app without
 * news watches; the SEND one (sender true) never reads and runs app->news
 * on each yard_conn_on_wakeup. Only RECV runs app->open and app->close. */
yard_conn_t *yard_conn_open_pair(yard_server_t *srv, int fd, const yard_conn_policy_t *policy,
                                 void *session, pthread_mutex_t *app_lock, bool sender);
/* The model's own per-connection state. */
static inline void *yard_conn_model(const yard_conn_t *c) { return c->model; }

/* What the connection waits for now. First runs what needs no waiting: an
 * app timer that is due, news the app can take. Call it after every entry. */
yard_wait_t yard_conn_next(yard_conn_t *c, yard_scratch_t *s);

/* Bytes arrived. Either read them into the driver's buffer (up to *room
 * bytes at the returned place; NULL when out of memory, the connection then
 * failed) and commit how many came, or hand over bytes read elsewhere. */
uint8_t *yard_conn_rx_buf(yard_conn_t *c, yard_scratch_t *s, size_t *room);
void yard_conn_rx_commit(yard_conn_t *c, yard_scratch_t *s, size_t n);
void yard_conn_on_bytes(yard_conn_t *c, yard_scratch_t *s, const uint8_t *p, size_t n);
/* The peer closed its side. */
void yard_conn_on_eof(yard_conn_t *c, yard_scratch_t *s);
/* For readiness models: read once into the driver's buffer and feed what
 * came (bytes, end of input or an error). Returns YARD_IO_OK when bytes or
 * the end came, YARD_IO_AGAIN when nothing was there (EAGAIN, EINTR). */
enum yard_io { YARD_IO_OK = 0, YARD_IO_AGAIN, YARD_IO_DONE };
int yard_conn_read(yard_conn_t *c, yard_scratch_t *s);
/* The same, and *drained: the read took everything the socket had (it got
 * less than it had room for, or the end of input), so an edge-triggered
 * model may wait for the next edge without another read. */
int yard_conn_read_drained(yard_conn_t *c, yard_scratch_t *s, bool *drained);
/* Send queued output: YARD_IO_OK when all of it left, YARD_IO_AGAIN when
 * some is left, YARD_IO_DONE when the connection failed. */
int yard_conn_on_writable(yard_conn_t *c);
/* Completion models. The output to send now: the rest of what was taken
 * before, else everything queued (moved aside, so that new output can
 * queue behind it while the kernel reads this); NULL when there is none.
 * The bytes stay valid and unchanged until yard_conn_tx_done. */
const uint8_t *yard_conn_tx_take(yard_conn_t *c, size_t *n);
/* A send of taken output completed: res bytes went, or -errno. */
void yard_conn_tx_done(yard_conn_t *c, long res);
/* The file bytes to write now (final: the connection is closing, take
 * what --flush buffered would still hold back); NULL when none. Valid
 * until yard_conn_store_done. */
const uint8_t *yard_conn_store_take(yard_conn_t *c, size_t *n, bool final);
/* A write of taken file bytes completed: res bytes went, or -errno. */
void yard_conn_store_done(yard_conn_t *c, long res);
/* The armed timer is due: run app->timer. */
void yard_conn_on_timer(yard_conn_t *c, yard_scratch_t *s);
/* The job handed out by YARD_NEXT_JOB or _PERM has run: run app->job_done. */
void yard_conn_on_job_done(yard_conn_t *c, yard_scratch_t *s);
/* The news eventfd is readable: drain it and, if the topic has news the
 * app can take now, run app->news. */
void yard_conn_on_news(yard_conn_t *c, yard_scratch_t *s);
/* The same when the model has already read the eventfd (through a ring). */
void yard_conn_on_news_read(yard_conn_t *c, yard_scratch_t *s);
/* A wake-up that may mean news, without a watch (fork --pair SEND): run
 * app->news. */
void yard_conn_on_wakeup(yard_conn_t *c, yard_scratch_t *s);
/* Something went wrong that ends the connection now (output is dropped). */
void yard_conn_fail(yard_conn_t *c, const char *reason, enum yard_close_level level);

/* YARD_NEXT_JOB: the job to hand to a pool (its owner is the connection). */
static inline yard_job_t *yard_conn_job(yard_conn_t *c) { return &c->job; }
/* YARD_NEXT_JOB or _PERM when the model cannot do it after all (no pool
 * could be started): run it here, then app->job_done. */
void yard_conn_run_job(yard_conn_t *c, yard_scratch_t *s);
/* YARD_NEXT_PERM: the object and mode (enum yard_access_mode) to hold. */
static inline yard_access_obj_t *yard_conn_perm(const yard_conn_t *c, int *mode)
{
    *mode = c->job_access_mode;
    return c->job_access;
}
/* The descriptor a model waits on for news, or -1. */
static inline int yard_conn_news_fd(const yard_conn_t *c) { return c->watch ? c->watch->efd : -1; }

/* Flush what is bound for the output file, let the app release the session,
 * close the fd, log an abnormal close and free the connection. A non-NULL
 * reason is the model's (a stop, an idle timeout) and is logged as info. */
void yard_conn_close(yard_conn_t *c, const char *reason);
/* When the server is stopping: the app's farewell to fd, without blocking
 * (async-signal-safe; for the blocking models' stop paths, which shut the
 * socket down before the connection closes). */
void yard_conn_farewell_fd(const yard_app_t *app, int fd);
void yard_scratch_free(yard_scratch_t *s);

/* A list link a model keeps in its per-connection state: a circular
 * doubly-linked list around a head link (whose conn is unused). */
typedef struct yard_conn_link {
    struct yard_conn_link *prev, *next;
    yard_conn_t *conn;
} yard_conn_link_t;

static inline void yard_conn_list_init(yard_conn_link_t *head) { head->prev = head->next = head; }
/* Append link at the tail (before head). */
static inline void yard_conn_list_append(yard_conn_link_t *head, yard_conn_link_t *link)
{
    link->next = head;
    link->prev = head->prev;
    head->prev->next = link;
    head->prev = link;
}
static inline void yard_conn_list_remove(yard_conn_link_t *link)
{
    link->prev->next = link->next;
    link->next->prev = link->prev;
    link->prev = link->next = link;
}

/* The live connections of a model whose connections block or park (thread,
 * coro), so that a stop can shutdown() every socket and wake them all. A
 * connection leaves the set before its fd is closed, so a stop never shuts
 * down a descriptor number that has been reused. O(1), thread-safe. */
typedef struct yard_conn_set {
    pthread_mutex_t mu;
    yard_conn_link_t head;
} yard_conn_set_t;

void yard_conn_set_init(yard_conn_set_t *set);
void yard_conn_set_add(yard_conn_set_t *set, yard_conn_link_t *link, yard_conn_t *c);
void yard_conn_set_remove(yard_conn_set_t *set, yard_conn_link_t *link);
/* Stop every connection of the set: a plain one gets the app's farewell
 * (when stopping) and loses both directions; a TLS one loses its read side
 * only, so that its own thread, woken from its read, seals the farewell
 * and the close_notify on its way out (yard_conn_close). */
void yard_conn_set_shutdown_all(yard_conn_set_t *set);
/* Both directions of every socket still in the set: for a TLS connection
 * whose thread could not get out (blocked sending to a peer that does not
 * read). */
void yard_conn_set_cut_all(yard_conn_set_t *set);

#endif
