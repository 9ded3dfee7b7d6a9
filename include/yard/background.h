/* A CPU-bound computation beside a server (yard-serve --background-fib N):
 * the Eve study's claim that one runtime serves I/O and parallel tasks at
 * once, measured by the echo latency a server keeps while it computes.
 *
 * The computation is the study's Program 1, fib(N) split into two tasks
 * per call down to YARD_BACKGROUND_CUTOFF, computed over and over, each
 * result checked, until the server stops. Two ways to run it:
 * - on the coroutine runtime's own workers, as permission tasks in finish
 *   scopes, beside the connection coroutines (the coro model:
 *   yard_background_coro);
 * - on an offload pool of kernel threads beside the event loops (every
 *   other model: yard_background_pool_start), the leaves of the same tree
 *   as jobs. */
#ifndef YARD_BACKGROUND_H
#define YARD_BACKGROUND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define YARD_BACKGROUND_CUTOFF 20
#define YARD_BACKGROUND_MAX_N 60

uint64_t yard_fib_exact(int n); /* iterative: the value every round is checked against */
uint64_t yard_fib_seq(int n);   /* plain recursion: what a leaf computes */

typedef struct yard_background_stats {
    uint64_t rounds; /* fib(N) computed and checked */
    uint64_t leaves; /* jobs or tasks that computed a leaf */
    double seconds;  /* from start to stop */
} yard_background_stats_t;

/* Logs what the computation did ("background fib(35): 12 computed in 10.0 s, ..."). */
void yard_background_log(int n, const char *where, const yard_background_stats_t *st);

/* The pool flavour: a driver thread submits each round's leaves to an
 * offload pool of `threads` threads and waits for them. NULL (err set) when
 * a thread cannot start. */
typedef struct yard_background yard_background_t;
yard_background_t *yard_background_pool_start(int n, int threads, char *err, size_t errlen);
/* Stops after the leaves in flight (each a fraction of a millisecond). */
void yard_background_pool_stop(yard_background_t *b, yard_background_stats_t *st);

/* The coroutine flavour, for a coroutine of a running scheduler: computes
 * rounds until *stop is set (checked by every task, so a round in progress
 * ends within a leaf's time), then returns. */
void yard_background_coro(int n, const atomic_int *stop, yard_background_stats_t *st);

#endif
