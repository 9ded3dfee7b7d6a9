/* yard-load: shared options, results and the report. Each mode is one file
 * that defines its load_mode_t: its flags (a yard_opt_t table filling its
 * settings), their checks, its run, how its per-thread results merge and
 * what it adds to the report. main.c parses the common flags, lists the
 * modes and runs the chosen one. */
#ifndef YARD_LOAD_H
#define YARD_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "yard/buf.h"
#include "yard/hist.h"
#include "yard/net.h"
#include "yard/opt.h"

/* --io: the request/response engine's I/O. */
enum load_io { LOAD_IO_AUTO, LOAD_IO_EPOLL, LOAD_IO_URING };

/* The common options: what every mode's run is shaped by, filled by the
 * common flags' table in main.c. A mode's own options are its settings. */
typedef struct load_opts {
    const char *mode;
    const char *target_text;
    yard_addr_t target;
    int connections;
    uint64_t messages; /* per connection */
    size_t size;       /* echo's --size (echo's prepare copies it); every report shows it */
    bool json;
    bool help;
    uint64_t timeout_ns; /* abort after this long without progress */
    const char *hist_out;
    const char *hist_log;  /* --hist-log: the interval log's path */
    double start_at;       /* --start-at: CLOCK_REALTIME seconds; 0 = at once */
    const char *cpu;      /* --cpu's list, checked when parsed; pinned after the usage checks */
    uint64_t duration_ns; /* instead of a message count */
    double rate;          /* requests/s over this loop's connections; 0 = closed loop */
    size_t pipeline;      /* requests outstanding per connection (>= 1) */
    int threads;          /* generator threads, each its own loop and connection share */
    int io;               /* enum load_io: how the engine waits and sends */
    int conn_base;        /* id of this loop's first connection (threads) */
    /* --tls: the engine's modes speak TLS (tls_ctx made once, shared by the
     * threads; tls_host the name the server's certificate must carry). */
    bool tls, tls_insecure;
    const char *tls_ca;
    struct yard_tls_ctx *tls_ctx;
    char tls_host[256];
    int total_connections; /* over all threads */
    double total_rate;    /* over all threads */
    /* The mode's settings (load_mode_t.settings_size bytes): filled by its
     * table, completed by its prepare hook, read-only while threads run.
     * Every thread's copy of the options points at the same ones. */
    void *settings;
} load_opts_t;

/* One run's common results (of one thread, or merged). What only one mode
 * measures is in its own part, r->mode (load_mode_t.result_size bytes). */
typedef struct load_result {
    uint64_t messages; /* round trips completed */
    uint64_t errors;
    uint64_t bytes_sent, bytes_received;
    uint64_t start_ns, end_ns; /* the measured window */
    yard_hist_t latency;       /* nanoseconds */
    char first_error[256];
    double behind_max_ms; /* the generator's worst lateness against its schedule */
    double target_rate;   /* open loop: requests/s asked for */
    uint64_t unsent;      /* open loop with a duration: requests due that never left */
    double t0_real;       /* CLOCK_REALTIME of the window's start (seconds) */
    /* --hist-log: iv[i] the latencies completed in second i of the window
     * (NULL when none); niv intervals used, ivcap allocated. */
    yard_hist_t **iv;
    size_t niv, ivcap;
    const char *io;       /* the I/O the run used: "epoll" or "uring" */
    /* --tls: handshakes completed (full or resumed), failed, and how long
     * each took from the TCP connect's start (ns). */
    uint64_t tls_full, tls_resumed, tls_failures;
    yard_hist_t tls_handshake;
    /* The generator's CPU before the window (connecting, TLS handshakes):
     * not part of the run's CPU figures, which are the window's. */
    double setup_cpu_s;
    void *mode;           /* the mode's part */
} load_result_t;

/* The report's common figures, given to the mode's report hooks. The mode's
 * figures hook may change the ones marked so before the rest are derived
 * from them. */
typedef struct load_report {
    const load_opts_t *o;
    const load_result_t *r;
    double secs, tput, cpu_s;
    bool open; /* an open loop ran (r->target_rate > 0) */
    /* The mode may change these. */
    double wall_s;     /* what the CPU share is of (default: the window) */
    const char *loop;  /* "closed" or "open" */
    double target, achieved;
    const char *unit;  /* of target and achieved: "requests/s" */
    bool on_schedule;  /* behind_max_ms can make the run invalid (default: open) */
    bool round_trips;  /* it has a latency line and a CPU cost per 100k */
    /* Derived. */
    double cpu_pct, cpu_per_100k;
    bool saturated, behind, invalid;
} load_report_t;

typedef struct load_mode {
    const char *name;
    const char *summary;
    bool engine; /* runs on the request/response engine (takes --io) */
    /* Its own flags, filling its settings (settings_size bytes, zeroed,
     * then the table's defaults). A flag of another mode's table is a usage
     * error that names its owner. */
    const yard_opt_t *opts;
    size_t settings_size;
    /* Help only: what common flags mean in this mode (--help lists these
     * first in its section). Never parsed: the common table takes them. */
    const yard_opt_t *notes;
    /* Check the mode's settings (and the common flags it restricts) and
     * derive what its run needs; once, after parsing. -1 with err (exit 2). */
    int (*prepare)(load_opts_t *o, char *err, size_t errlen);
    /* The run: 0 when it happened (errors counted in r), -1 when it could
     * not (the message in r->first_error). Once per thread. */
    int (*run)(const load_opts_t *o, load_result_t *r);
    int (*before)(load_opts_t *o, load_result_t *r);      /* optional: once, before every thread */
    int (*after)(const load_opts_t *o, load_result_t *r); /* optional: once, on the merged result */
    size_t result_size;                                   /* bytes of r->mode (may be 0) */
    void (*result_init)(void *part);                      /* optional: after zeroing */
    /* --threads: add a thread's part into the total (first: the first one). */
    void (*merge)(void *into, const void *from, bool first);
    void (*figures)(load_report_t *rep); /* optional: its rate, unit, loop, wall time */
    /* Text: the lines before the latency line (NULL: load_text_head) and
     * after it; JSON: its keys, each followed by ", ". All optional. */
    void (*text_head)(const load_report_t *rep);
    void (*text_tail)(const load_report_t *rep);
    void (*json)(const load_report_t *rep);
} load_mode_t;

/* A request/response protocol for the engine (engine.c). Per connection the
 * engine keeps priv_size bytes of protocol state and a max_request buffer. */
typedef struct load_proto {
    size_t priv_size, max_request;
    uint64_t think_ns; /* closed loop: pause between a reply and the next request */
    /* Set up one connection's state; -1 with the error recorded. */
    int (*conn_init)(void *priv, int conn_id, const load_opts_t *o, load_result_t *r);
    /* Write request number seq into buf; returns its length. *tag is kept
     * with the request and given back with its reply. */
    size_t (*request)(void *priv, uint64_t seq, uint8_t *buf, uint32_t *tag, load_result_t *r);
    /* Consume reply bytes of request seq: 1 when its reply is complete
     * (*used bytes were its), 0 when all n were used and more are needed,
     * -1 on a wrong reply (the error recorded). */
    int (*reply)(void *priv, uint64_t seq, uint32_t tag, const uint8_t *p, size_t n, size_t *used,
                 load_result_t *r);
    /* Optional: a reply completed after latency_ns. */
    void (*completed)(void *priv, uint32_t tag, uint64_t latency_ns, load_result_t *r);
} load_proto_t;

int load_engine_run(const load_opts_t *o, const load_proto_t *p, load_result_t *r);

/* --hist-log (histlog.c): HdrHistogram's layout for lowest 1 ns and 2
 * digits; values above an hour are counted in its bucket. */
#define LOAD_HIST_DIGITS 2
#define LOAD_HIST_HIGHEST_NS 3600000000000ull
int load_interval_record(load_result_t *r, uint64_t since_t0_ns, uint64_t latency_ns);
int load_intervals_merge(load_result_t *into, load_result_t *from);
void load_intervals_free(load_result_t *r);
size_t load_hist_log_intervals(const load_result_t *r);
/* The interval log (text) of r to f; -1 with err on a failure. */
int load_hist_log_write(FILE *f, const load_result_t *r, char *err, size_t errlen);

/* Start a non-blocking connect, registered with ep (EPOLLOUT, data ptr):
 * the fd, or -1 with the error recorded. */
int load_connect(const load_opts_t *o, load_result_t *r, int ep, void *ptr);
/* The connect finished: 0 when it succeeded (the fd then waits for EPOLLIN),
 * -1 with the error recorded when it failed. */
int load_connected(const load_opts_t *o, load_result_t *r, int ep, int fd, void *ptr,
                   bool nodelay);
void load_error(load_result_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* --tls (tls.c), for every mode's connections. Take the records t wrote
 * (t may be NULL: only what wire holds) and send them: 1 when all went, 0
 * when the socket is full (wait for EPOLLOUT), -errno when it failed. */
struct yard_tls;
int load_tls_flush(struct yard_tls *t, yard_buf_t *wire, int fd);
/* A handshake that began at began_ns finished: timed, counted full or
 * resumed. */
void load_tls_established(load_result_t *r, const struct yard_tls *t, uint64_t began_ns);
/* One request on a blocking socket fd (its receive timeout set) to the
 * target: the handshake (neither timed nor counted: it is no part of the
 * run), req sealed and sent, exactly replen bytes of plaintext read into
 * rep, close_notify. 0, or -1 with why. */
int load_tls_request(const load_opts_t *o, int fd, const uint8_t *req, size_t reqlen,
                     uint8_t *rep, size_t replen, char *why, size_t whylen);

/* The report (report.c): the common parts, and the mode's hooks for the rest. */
void load_report(const load_mode_t *mode, const load_opts_t *o, const load_result_t *r,
                 double cpu_s);
/* The request/response modes' head: "MODE TARGET: N connections, ..." */
void load_text_header(const load_report_t *rep);
/* "  behind ..." when an open loop ran. */
void load_text_behind(const load_report_t *rep);
/* The default head: the header, the round trips and the behind line. */
void load_text_head(const load_report_t *rep);

#endif
