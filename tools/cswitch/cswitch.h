/* yard-cswitch internals: the kinds of switch, the work unit, and the probes
 * (pinning, SCHED_FIFO, /proc switch counts, hardware counters).
 *
 * Every kind is a pair of "sides" on one CPU that hand a token back and forth
 * (the ping-pong), plus a single-side baseline that does the same message
 * passing and the same work with nobody to switch to. See docs/cswitch.md. */
#ifndef YARD_CSWITCH_H
#define YARD_CSWITCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One measured configuration of a kind: the working-set array each side
 * traverses after every token it receives. stride_bytes == 0: no array work. */
typedef struct yard_cswitch_bench {
    size_t array_bytes;
    size_t stride_bytes;
    double *array;     /* the measuring side's own array (also used by the single baseline) */
    pid_t self_tid;    /* the measuring thread */
    pid_t partner_tid; /* the other side's kernel task; 0 for user-level kinds */
    pid_t partner_pid; /* its process (== partner_tid for process-pipe, getpid() for threads) */
    void *state;       /* the kind's own */
} yard_cswitch_bench_t;

typedef struct yard_cswitch_kind {
    const char *name;
    const char *what; /* one line for --help */
    bool kernel;      /* switches go through the kernel scheduler (countable in /proc) */
    /* Creates the partner (process, thread or context) and its array; the
     * partner then waits for the first token. Returns 0 or -1 with err set. */
    int (*start)(yard_cswitch_bench_t *b, char *err, size_t errlen);
    /* n round trips: 2n switches, 2n messages, 2n work units (n per side). */
    int (*pingpong)(yard_cswitch_bench_t *b, uint64_t n, char *err, size_t errlen);
    /* n iterations of the same message passing and work on one side alone. */
    int (*single)(yard_cswitch_bench_t *b, uint64_t n, char *err, size_t errlen);
    void (*stop)(yard_cswitch_bench_t *b);
} yard_cswitch_kind_t;

extern const yard_cswitch_kind_t yard_cswitch_process_pipe;
extern const yard_cswitch_kind_t yard_cswitch_thread_pipe;
extern const yard_cswitch_kind_t yard_cswitch_thread_futex;
extern const yard_cswitch_kind_t yard_cswitch_ucontext;
extern const yard_cswitch_kind_t yard_cswitch_ucontext_sigmask;
extern const yard_cswitch_kind_t yard_cswitch_coro;

/* The work unit (the study's Algorithm 1 with a real stride): one pass over
 * the array touching every stride_bytes-th byte's double. */
void yard_cswitch_work(double *a, size_t array_bytes, size_t stride_bytes);
/* A page-aligned, zero-filled (and pre-touched) array; NULL on failure.
 * Size 0 gives a valid one-page array that work never touches. */
double *yard_cswitch_array_new(size_t bytes);
void yard_cswitch_array_free(double *a, size_t bytes);
pid_t yard_cswitch_gettid(void);

/* ---- probes (probe.c) ---- */

/* Pins the calling thread (and so everything it creates later) to cpu. */
int yard_cswitch_pin(int cpu, char *err, size_t errlen);
/* The first CPU of the affinity mask; -1 on error. allowed gets "0-1"-style text. */
int yard_cswitch_default_cpu(char *allowed, size_t len);
bool yard_cswitch_cpu_allowed(int cpu);
/* SCHED_FIFO at the highest priority for the calling thread (inherited by
 * threads and processes it creates). Returns the priority, or -1 with err. */
int yard_cswitch_sched_fifo(char *err, size_t errlen);

/* Voluntary + involuntary switches of one task, from
 * /proc/PID/task/TID/status. Returns 0 or -1. */
typedef struct yard_cswitch_ctxsw {
    uint64_t voluntary, involuntary;
} yard_cswitch_ctxsw_t;
int yard_cswitch_read_ctxsw(pid_t pid, pid_t tid, yard_cswitch_ctxsw_t *out);

/* Hardware counters (perf_event_open), one group per task. */
enum {
    YARD_CSWITCH_EV_INSTRUCTIONS,
    YARD_CSWITCH_EV_CYCLES,
    YARD_CSWITCH_EV_L1D_MISS,
    YARD_CSWITCH_EV_L1I_MISS,
    YARD_CSWITCH_EV_DTLB_MISS,
    YARD_CSWITCH_EV_ITLB_MISS,
    YARD_CSWITCH_NEV
};
extern const char *const yard_cswitch_ev_names[YARD_CSWITCH_NEV];

typedef struct yard_cswitch_perf {
    int fd[YARD_CSWITCH_NEV]; /* -1: event not available */
    int nopen;
} yard_cswitch_perf_t;

typedef struct yard_cswitch_counts {
    bool have[YARD_CSWITCH_NEV];
    double v[YARD_CSWITCH_NEV];
} yard_cswitch_counts_t;

/* Opens the group on task tid. -1 with why set when the machine exposes no
 * usable hardware counters (the leader, instructions, cannot be opened). */
int yard_cswitch_perf_open(yard_cswitch_perf_t *p, pid_t tid, char *why, size_t len);
void yard_cswitch_perf_close(yard_cswitch_perf_t *p);
void yard_cswitch_perf_start(yard_cswitch_perf_t *p); /* reset + enable */
void yard_cswitch_perf_stop(yard_cswitch_perf_t *p);
/* Adds the group's values (scaled for multiplexing) into acc. */
void yard_cswitch_perf_accumulate(yard_cswitch_perf_t *p, yard_cswitch_counts_t *acc);

#endif
