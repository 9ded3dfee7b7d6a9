/* yard-tasks internals (issue 22, docs/tasks.md): the Eve study's Program 1,
 * a parallel Fibonacci, written once per task runtime. Each runtime file
 * (rt_coro.c, rt_threads.c, rt_openmp.c, rt_tbb.cpp) fills in one or more
 * yard_tasks_runtime_t; main.c parses the command line, runs the
 * repetitions, checks the result and prints the report.
 *
 * The program, the same in every runtime:
 *
 *     fib(n): if n < 2: return n
 *             if n <= cutoff: return yard_tasks_fib_seq(n)      (plain C)
 *             spawn a task computing fib(n-1) into slot a
 *             spawn a task computing fib(n-2) into slot b
 *             wait for both (a finish scope / join / taskwait)
 *             return a + b
 *
 * "tasks" counts the spawns below the root: T(n) = 0 when n < 2 or
 * n <= cutoff, else 2 + T(n-1) + T(n-2). Every runtime counts them itself,
 * carried up through the result slots (no shared counter to contend on), and
 * main.c checks the count against that formula.
 *
 * Plain C types only: rt_tbb.cpp includes this header too. */
#ifndef YARD_TASKS_H
#define YARD_TASKS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define YARD_TASKS_MAX_N 92 /* fib(92) is the largest that fits an int64_t */

typedef struct yard_tasks_params {
    int n;
    int cutoff;
    unsigned workers;
} yard_tasks_params_t;

/* What one repetition measured. */
typedef struct yard_tasks_rep {
    int64_t result;
    uint64_t tasks;            /* spawns below the root */
    double time_s;             /* root task started -> root task joined, inside the runtime */
    double wall_s;             /* the same plus the runtime's start-up and shut-down */
    int64_t steals;            /* -1: this runtime cannot tell */
    uint64_t inline_fallbacks; /* spawns that could not get a thread/task and ran inline */
    int64_t stacks_mapped;     /* coroutine stacks mmap'd during the run; -1 if not coro */
    int64_t inlined;           /* coro: children a join ran on its own stack; -1 if not coro */
} yard_tasks_rep_t;

typedef struct yard_tasks_runtime {
    const char *name;
    const char *summary; /* one line for --help and --list-runtimes */
    /* NULL when this build can run it here, else why not. */
    const char *(*unavailable)(void);
    /* One repetition: 0, or -1 with err set (a runtime error: exit 1). */
    int (*run)(const yard_tasks_params_t *p, yard_tasks_rep_t *out, char *err, size_t errlen);
} yard_tasks_runtime_t;

/* The sequential part below the cutoff: plain recursive C, the same code
 * (one out-of-line copy in main.c) for every C and C++ runtime. */
int64_t yard_tasks_fib_seq(int n);
/* CLOCK_MONOTONIC in seconds. */
double yard_tasks_now(void);

extern const yard_tasks_runtime_t yard_tasks_rt_coro_perms;
extern const yard_tasks_runtime_t yard_tasks_rt_coro;
extern const yard_tasks_runtime_t yard_tasks_rt_threads;
extern const yard_tasks_runtime_t yard_tasks_rt_openmp;
#ifdef YARD_TASKS_HAVE_TBB
extern const yard_tasks_runtime_t yard_tasks_rt_tbb;
#endif

#ifdef __cplusplus
}
#endif

#endif
