/* The model interface: a concurrency model is an ops table that serves the
 * listening socket until SIGTERM or SIGINT. Models also declare what kind of
 * paradigm they are, which the harness turns into the report's feature table. */
#ifndef YARD_MODEL_H
#define YARD_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "yard/config.h"
#include "yard/opt.h"

typedef struct yard_server yard_server_t;
struct yard_app;

typedef struct yard_model_traits {
    bool multi_threaded;       /* several kernel threads run app code at once */
    bool multi_process;        /* app code runs in several processes */
    bool lightweight_threads;  /* user-level threads (coroutines) */
    bool event_based;          /* events drive the app */
    bool completion_based;     /* the kernel reports finished I/O (io_uring), not readiness */
    bool explicit_concurrency; /* the programmer states concurrency (spawn, tasks) */
    const char *shared_state;  /* how connections share app state */
    const char *ipc;           /* how execution units talk to each other */
    const char *error_isolation; /* what a crash in one connection takes down */
} yard_model_traits_t;

typedef struct yard_model {
    const char *name;
    const char *summary;
    yard_model_traits_t traits;
    bool reuseport;    /* its listeners share one port (SO_REUSEPORT) */
    /* The model's own flags (--workers, --procs, ...): they fill fields of
     * the engine's yard_config_t, which is what the table's offsets are
     * relative to. A flag of another model is a usage error. */
    const yard_opt_t *opts;
    /* Optional: a usage error (0 or -1 with err set) in what the flags and
     * the app ask of the model together, checked before anything starts. */
    int (*check)(const yard_config_t *cfg, const struct yard_app *app, char *err, size_t errlen);
    /* Optional: NULL when the model can run on this machine, else why not
     * (written into buf): the kernel refuses what it is built on. */
    const char *(*unavailable)(char *buf, size_t len);
    /* Runs --background-fib on its own workers (coro); for the others the
     * engine runs it on an offload pool beside the model. */
    bool own_background;
    /* Serve the listeners (srv->ls) until srv->sig_fd reports SIGTERM or SIGINT, then
     * close every connection, reap every child and return the exit status. */
    int (*serve)(yard_server_t *srv);
} yard_model_t;

extern const yard_model_t *const yard_models[]; /* NULL-terminated */
const yard_model_t *yard_model_find(const char *name);

#endif
