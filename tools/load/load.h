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
} load_opts_t;

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
} load_result_t;

/* Returns 0 when the run happened (errors are counted in r), -1 when it
 * could not (the message is in r->first_error). */
int load_run_echo(const load_opts_t *o, load_result_t *r);
int load_run_counter(const load_opts_t *o, load_result_t *r);
int load_run_rate(const load_opts_t *o, load_result_t *r);
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
