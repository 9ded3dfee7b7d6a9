/* The application interface. An app is a sans-I/O protocol handler: the
 * engine hands it the bytes that arrived on a connection and it answers with
 * effects recorded in a yard_fx_t. It never calls read, write, accept or
 * sleep; each concurrency model turns the effects into its own mechanism, so
 * the same app code runs unchanged under every model.
 *
 * Effects:
 *   yard_fx_send*    bytes to send to the peer, in order
 *   yard_fx_close    close the connection once the queued bytes are sent
 *   yard_fx_store    bytes for the server's output file (--out), written by the
 *                    engine according to --flush
 *   yard_fx_wake_at  call app->timer at (or soon after) a monotonic time: a
 *                    timer in the event loops, a bounded poll() in the
 *                    blocking models
 *   yard_fx_offload  run a CPU-heavy job away from the connection's event
 *                    loop (a pool thread, or inline with --offload-threads 0
 *                    and in the blocking models), then call app->job_done
 *   yard_fx_io       the same for blocking file I/O (a log append, an fsync,
 *                    a read of old data): inline in the blocking models, on
 *                    the offload pool's I/O lane (a thread of its own) in
 *                    the loop and coroutine models. App callbacks never do
 *                    I/O themselves; the engine's functions that do are
 *                    called from such a job
 *   yard_fx_scan     the same for a long read of old data (a history
 *                    lookup): on a lane of its own, so that it never
 *                    delays the short I/O others wait for (an append)
 *   yard_fx_access   run a function holding a read or full permission on a
 *                    shared object (Eve's [x] and [+x]), then call
 *                    app->job_done: an Eve-style permission task under the
 *                    coro model, a process-shared rwlock under the others
 *   yard_fx_watch    call app->news when a topic of a news bus (yard/bus.h)
 *                    has news past a sequence number, whoever published it:
 *                    an eventfd each model waits on beside the socket
 * See docs/architecture.md for how each model carries them out. */
#ifndef YARD_APP_H
#define YARD_APP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "yard/buf.h"
#include "yard/bus.h"
#include "yard/config.h"
#include "yard/net.h"
#include "yard/opt.h"
#include "yard/shm.h"

/* A shared object that tasks take read or full permissions on. Opaque to
 * apps: how a permission is granted is the model's business (a task under
 * the coro model, a process-shared rwlock under the others). Create it in
 * app->init; it lives in the shared region. NULL when the region is full. */
typedef struct yard_access_obj yard_access_obj_t;

enum yard_access_mode { YARD_ACCESS_READ = 1, YARD_ACCESS_FULL = 2 };

yard_access_obj_t *yard_access_obj_create(yard_shm_t *shm);

typedef struct yard_fx {
    yard_buf_t *out;          /* bytes queued for the peer */
    yard_buf_t *store;        /* bytes queued for the output file */
    const char *close_reason; /* why the app closed the connection (logged) */
    bool close;               /* close after the queued bytes are sent */
    bool nomem;               /* an effect could not be recorded: out of memory */
    bool eof; /* input, not an effect: the peer has closed its side, so these are
               * the last bytes; what the app does not consume is dropped */
    uint64_t now_ns;   /* input: the engine's monotonic clock when the call began */
    int64_t wall_ns;   /* input: the wall clock then (ns since 1970), for what people read */
    const yard_addr_t *peer; /* input: the peer's address (NULL when unknown) */
    bool tls;          /* input: the connection is encrypted (a --tls-listen listener) */
    uint16_t tls_port; /* input: the server's first TLS listener's port; 0: it has none */
    const char *certfp; /* input: TLS with a client certificate: its SHA-256 (64 hex
                         * digits); NULL: none */
    size_t queued; /* input: output waiting for the peer that is not in *out */
    uint64_t wake_at;  /* 0: no timer; UINT64_MAX: cancel the armed one */
    bool wake_idle;    /* with wake_at: the timer only watches an idle connection */
    void (*job)(void *arg);
    void *job_arg;
    int job_lane;                  /* where the job runs: enum yard_lane (yard/offload.h) */
    yard_access_obj_t *access_obj; /* with job: run it holding access_mode on it */
    int access_mode;
    bool watch_set;      /* the app (re)set its watch: */
    yard_bus_t *watch_bus;
    uint32_t watch_topic;
    uint64_t watch_seen; /* UINT64_MAX: stop watching */
    bool hold_input;     /* the app left input because output is past its hold bound */
    bool pause_input;    /* the app left input until its timer (yard_fx_pause_input) */
    bool bounds_set;     /* the app set this connection's output bounds: */
    size_t out_hold, out_max;
} yard_fx_t;

int yard_fx_send(yard_fx_t *fx, const void *p, size_t n);
/* Room for n bytes to send; fill them, then yard_fx_send_commit(fx, n). */
uint8_t *yard_fx_send_reserve(yard_fx_t *fx, size_t n);
void yard_fx_send_commit(yard_fx_t *fx, size_t n);
/* Close after the queued bytes are sent. A non-NULL reason marks an abnormal
 * close (a protocol violation) and is logged with the peer's address. */
void yard_fx_close(yard_fx_t *fx, const char *reason);
int yard_fx_store(yard_fx_t *fx, const void *p, size_t n);
/* Arm the connection's one timer (replacing any armed one); 0 cancels it.
 * app->timer runs once when it expires. A peer that half-closes while it is
 * armed still gets its answer: the connection waits for the timer. */
void yard_fx_wake_at(yard_fx_t *fx, uint64_t deadline_ns);
/* The same timer, for watching an idle connection (a keep-alive PING): it
 * does not hold a connection open once the peer has closed its side. */
void yard_fx_wake_idle(yard_fx_t *fx, uint64_t deadline_ns);
/* Stop reading from a peer while this much output waits for it
 * (backpressure); resume when the queue drains. */
#define YARD_OUT_HIGH_WATER (256u * 1024u)
/* A peer that lets more than this pile up is disconnected ("send queue
 * exceeded"; --max-sendq changes it); reachable only by data pushed to a
 * client that does not read (chat). */
#define YARD_OUT_LIMIT (8u * 1024u * 1024u)
/* This connection's bounds on output waiting for the peer, from now on:
 * past hold bytes its input is not read (backpressure), past max it is
 * closed ("send queue exceeded"). 0 keeps the engine's (YARD_OUT_HIGH_WATER,
 * and --max-sendq or YARD_OUT_LIMIT). Where output waits in the server:
 * under the blocking models it waits in the kernel's send buffer instead,
 * with the connection's own process or thread. */
void yard_fx_out_bounds(yard_fx_t *fx, size_t hold, size_t max);
/* The input this call left is to wait until the output waiting for the
 * peer is below the hold bound (yard_fx_out_bounds): it is not read
 * meanwhile, and then offered again with nothing new (app->data). */
void yard_fx_hold_input(yard_fx_t *fx);
/* The input this call left is to wait for the timer the app armed
 * (yard_fx_wake_at: a client over its rate): the socket is not read
 * meanwhile, so the client's further bytes wait in the kernel, not in the
 * server; when the timer has run, what waits is offered again. Without an
 * armed timer it has no effect. */
void yard_fx_pause_input(yard_fx_t *fx);
/* Output waiting for the peer now: what was queued before this call and
 * what this call sent. An app that answers requests stops taking them
 * while this is past its hold bound (and arms a timer to look again). */
static inline size_t yard_fx_pending(const yard_fx_t *fx)
{
    return fx->queued + (fx->out ? fx->out->len : 0);
}
/* Run job(arg) off the event loop, then app->job_done(..., arg, fx) on the
 * connection's own thread. One job per connection at a time; while it runs
 * the engine does not call app->data (input waits in the buffer). The job
 * must only touch arg: it may run on another thread. */
void yard_fx_offload(yard_fx_t *fx, void (*job)(void *arg), void *arg);
/* yard_fx_offload for a job that does blocking file I/O: the same contract
 * (one job at a time, app->job_done after it, no app->data meanwhile), run
 * on the pool's I/O lane so that CPU jobs never delay it. */
void yard_fx_io(yard_fx_t *fx, void (*job)(void *arg), void *arg);
/* yard_fx_io for a job that only reads and may take long (a lookup in old
 * data): the same contract, on the pool's scan lane, so that a queue of
 * such jobs never delays the I/O lane's short writes. Inline in the
 * blocking models, as yard_fx_io. */
void yard_fx_scan(yard_fx_t *fx, void (*job)(void *arg), void *arg);
/* Run fn(arg) holding a permission (YARD_ACCESS_READ or _FULL) on obj:
 * holders of a read permission may run together, a full permission runs
 * alone. Then app->job_done(..., arg, fx) runs, as for an offloaded job;
 * meanwhile app->data is not called. fn must only touch arg and obj's data. */
void yard_fx_access(yard_fx_t *fx, yard_access_obj_t *obj, int mode, void (*fn)(void *arg),
                    void *arg);

/* Call app->news once topic of bus has a sequence number above seen (at
 * once if it already has). One watch per connection; setting it again
 * replaces it. app->news is called until the app moves seen past the news
 * (normally: it reads what is new and watches from there). */
void yard_fx_watch(yard_fx_t *fx, yard_bus_t *bus, uint32_t topic, uint64_t seen);

/* The server is stopping (it took SIGTERM or SIGINT): a connection ending
 * now may be ending because of that, not because its peer left. Any
 * thread and any process of the server may ask. */
bool yard_stopping(void);

typedef struct yard_app {
    const char *name;
    const char *summary;
    size_t session_size; /* per-connection state the engine allocates, zeroed */
    bool uses_out;       /* the app writes to --out */
    /* Silent connections. A service whose clients may vanish without a word
     * (HTTP keep-alive) declares how long the engine keeps a silent
     * connection when --idle-timeout is not given; --idle-timeout DUR
     * replaces it and --idle-timeout 0 turns it off. 0: no default, as for
     * the benchmark apps, whose load must never be cut short. */
    uint64_t default_idle_timeout_ns;
    /* Non-NULL: the engine never closes this app's connections for silence,
     * because its clients may rightly stay silent for hours (the app judges
     * liveness itself), so --idle-timeout is a usage error. The text, shown
     * with that error and in --help, says what the app offers instead. */
    const char *idle_exempt;
    /* Non-NULL: bytes every connection gets when the server stops (SIGTERM,
     * SIGINT) just before it is closed, if they can go at once after what
     * was queued for it (IRC's "ERROR :Server shutting down\r\n"). */
    const char *farewell;

    /* The app's own flags: each fills a field of a settings struct of
     * settings_size bytes that the engine allocates (zeroed), sets to the
     * table's defaults, fills from the command line and hands to init. A
     * flag of another app is a usage error. NULL: no flags. */
    const yard_opt_t *opts;
    size_t settings_size;

    /* Once, before any fork or thread: allocate state that connections share
     * from the shared region so that process models share it too. settings
     * (NULL without opts) and cfg (the engine's settings) outlive the app. */
    int (*init)(void **state, const yard_config_t *cfg, const void *settings, yard_shm_t *shm,
                char *err, size_t errlen);
    void (*fini)(void *state);
    /* A connection opened (optional: a greeting goes here). */
    void (*open)(void *state, void *session, yard_fx_t *fx);
    /* Bytes arrived. Returns how many were consumed; the rest (a partial
     * request) is offered again, with more bytes after it, next time. When
     * the peer closes its side with bytes still unconsumed, they are offered
     * once more with fx->eof set; what that call leaves is dropped, unless
     * it started a job (then the rest is offered again after job_done). */
    size_t (*data)(void *state, void *session, const uint8_t *in, size_t n, yard_fx_t *fx);
    /* The connection's timer expired (needed by apps that call wake_at). */
    void (*timer)(void *state, void *session, yard_fx_t *fx);
    /* An offloaded job finished (needed by apps that call offload). */
    void (*job_done)(void *state, void *session, void *arg, yard_fx_t *fx);
    /* The connection is gone (optional): release what the session holds. A
     * job still running is waited for before this is called. fx carries the
     * inputs only (the clocks, the peer): nothing can be sent any more. */
    void (*close)(void *state, void *session, const yard_fx_t *fx);
    /* The watched topic has news (needed by apps that call watch). */
    void (*news)(void *state, void *session, yard_fx_t *fx);
} yard_app_t;

extern const yard_app_t *const yard_apps[]; /* NULL-terminated */
const yard_app_t *yard_app_find(const char *name);

#endif
