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
} load_opts_t;

typedef struct load_result {
    uint64_t messages; /* round trips completed */
    uint64_t errors;
    uint64_t bytes_sent, bytes_received;
    uint64_t start_ns, end_ns; /* the measured window */
    yard_hist_t latency;       /* nanoseconds */
    char first_error[256];
} load_result_t;

/* Returns 0 when the run happened (errors are counted in r), -1 when it
 * could not (the message is in r->first_error). */
int load_run_echo(const load_opts_t *o, load_result_t *r);
void load_error(load_result_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void load_report(const load_opts_t *o, const load_result_t *r, double cpu_s);

#endif
