/* yard-load: shared options, results and the report. Each mode is a file
 * with one run function; main.c parses the common flags and picks it. */
#ifndef YARD_LOAD_H
#define YARD_LOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "yard/hist.h"
#include "yard/net.h"

typedef struct load_opts {
    const char *mode;
    const char *target_text;
    yard_addr_t target;
    int connections;
    uint64_t messages; /* per connection */
    size_t size;
    bool json;
    uint64_t timeout_ns; /* abort after this long without progress */
    const char *hist_out;
    uint64_t duration_ns; /* instead of a message count (counter, rate) */
    double read_ratio;    /* counter */
    double byte_rate;     /* rate: bytes/s per connection */
    const char *message;  /* rate: what is sent, repeated */
    size_t message_len;
    uint64_t ramp_ns;     /* rate: connections start over this long, excluded */
    double rate;          /* echo, counter, http: requests/s over this loop's connections;
                           * 0 = closed loop */
    size_t pipeline;      /* requests outstanding per connection (>= 1) */
    int threads;          /* generator threads, each its own loop and connection share */
    int conn_base;        /* id of this loop's first connection (threads) */
    int total_connections; /* over all threads */
    double total_rate;    /* over all threads */
    const char *scenario; /* http */
    const char *users_csv; /* http: username;password lines */
    uint64_t think_ns;    /* http closed loop: pause between a reply and the next request */
    uint64_t count_initial; /* counter: the count before the run (replies never go below it) */
    const char *user_prefix;     /* chat: accounts are <prefix><i> */
    const char *password_prefix; /* chat: passwords are <password_prefix><prefix><i> */
} load_opts_t;

/* http mode: one endpoint's counts (merged across threads like the rest). */
#define LOAD_HTTP_ENDPOINTS 6
#define LOAD_STATUS_SLOTS 8
typedef struct load_endpoint {
    uint64_t requests, ok, failed;
    int status_code[LOAD_STATUS_SLOTS];
    uint64_t status_count[LOAD_STATUS_SLOTS];
    uint64_t status_other; /* codes beyond the slots */
    yard_hist_t latency;
} load_endpoint_t;

typedef struct load_result {
    uint64_t messages; /* round trips completed */
    uint64_t errors;
    uint64_t bytes_sent, bytes_received;
    uint64_t start_ns, end_ns; /* the measured window */
    yard_hist_t latency;       /* nanoseconds */
    char first_error[256];
    /* counter */
    uint64_t increments, count_initial, count_final;
    bool count_checked;
    /* rate: bits per second, aggregate and per connection, in the window */
    double target_bps, achieved_bps, conn_min_bps, conn_max_bps;
    double behind_max_ms;
    uint64_t window_bytes;
    double target_rate; /* open loop: requests/s asked for */
    uint64_t sent_msgs; /* chat: messages sent (r->messages counts deliveries) */
    load_endpoint_t ep[LOAD_HTTP_ENDPOINTS]; /* http */
} load_result_t;

/* A request/response protocol for the engine (engine.c). Per connection the
 * engine keeps priv_size bytes of protocol state and a max_request buffer. */
typedef struct load_proto {
    size_t priv_size, max_request;
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
/* counter: the count, read on a fresh connection (before and after a run). */
int load_counter_read(const load_opts_t *o, load_result_t *r, uint64_t *value);
int load_counter_before(load_opts_t *o, load_result_t *r);
int load_counter_after(const load_opts_t *o, load_result_t *r);

/* Returns 0 when the run happened (errors are counted in r), -1 when it
 * could not (the message is in r->first_error). */
int load_run_echo(const load_opts_t *o, load_result_t *r);
int load_run_counter(const load_opts_t *o, load_result_t *r);
int load_run_rate(const load_opts_t *o, load_result_t *r);
int load_run_http(const load_opts_t *o, load_result_t *r);
int load_run_chat(const load_opts_t *o, load_result_t *r);
/* http: check the scenario and weights, read --users-csv; once, before the
 * threads start. -1 with a message naming the flag. */
int load_http_prepare(load_opts_t *o, const char *weights, char *err, size_t errlen);
const char *load_http_endpoint_name(int i);
void load_count_status(load_endpoint_t *e, int status, uint64_t n);
/* "1Mbps" (bits), "125kBps" (bytes), ...: bytes per second, or -1. */
double load_parse_bandwidth(const char *s);
/* Start a non-blocking connect, registered with ep (EPOLLOUT, data ptr):
 * the fd, or -1 with the error recorded. */
int load_connect(const load_opts_t *o, load_result_t *r, int ep, void *ptr);
/* The connect finished: 0 when it succeeded (the fd then waits for EPOLLIN),
 * -1 with the error recorded when it failed. */
int load_connected(const load_opts_t *o, load_result_t *r, int ep, int fd, void *ptr,
                   bool nodelay);
void load_error(load_result_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void load_report(const load_opts_t *o, const load_result_t *r, double cpu_s);

#endif
