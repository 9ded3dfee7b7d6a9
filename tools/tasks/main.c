/* Linux-only: sched_getaffinity. What a port uses instead: docs/portability.md. */
/* yard-tasks: the Eve study's Program 1, a parallel Fibonacci, under several
 * task runtimes, timed and checked (issue 22, docs/tasks.md).
 *
 *   yard-tasks fib N --runtime R --workers W [--cutoff C] [--repeat K] [--json]
 *   yard-tasks --list-runtimes [--json]
 *
 * Exit status: 0 ok, 1 a wrong result or a runtime error, 2 a usage error
 * (including a runtime this build or machine cannot run). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "tasks.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "yard/cli.h"

#define PROG "yard-tasks"
#define MAX_WORKERS 1024
#define MAX_REPEAT 1000
#define DEFAULT_CUTOFF 20
#define DEFAULT_REPEAT 5

#if defined(__SANITIZE_THREAD__)
#define SANITIZER "thread"
#elif defined(__SANITIZE_ADDRESS__)
#define SANITIZER "address"
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SANITIZER "thread"
#elif __has_feature(address_sanitizer)
#define SANITIZER "address"
#endif
#endif

/* ------------------------------------------------------------------------ */
/* shared by the runtimes                                                    */

__attribute__((noinline)) int64_t yard_tasks_fib_seq(int n)
{
    if (n < 2)
        return n;
    return yard_tasks_fib_seq(n - 1) + yard_tasks_fib_seq(n - 2);
}

double yard_tasks_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------ */
/* the runtimes                                                              */

#ifndef YARD_TASKS_HAVE_TBB
static const char *tbb_missing(void)
{
#ifdef YARD_TASKS_TBB_MISSING
    return "not built: " YARD_TASKS_TBB_MISSING;
#else
    return "not built: CMake found no TBB";
#endif
}

static int tbb_run_missing(const yard_tasks_params_t *p, yard_tasks_rep_t *out, char *err,
                           size_t errlen)
{
    (void)p;
    (void)out;
    snprintf(err, errlen, "%s", tbb_missing());
    return -1;
}

static const yard_tasks_runtime_t yard_tasks_rt_tbb = {
    .name = "tbb",
    .summary = "oneTBB tbb::task_group (run / wait) in a task_arena of W slots",
    .unavailable = tbb_missing,
    .run = tbb_run_missing,
};
#endif

static const yard_tasks_runtime_t *const runtimes[] = {
    &yard_tasks_rt_coro_perms, &yard_tasks_rt_coro, &yard_tasks_rt_threads,
    &yard_tasks_rt_openmp,     &yard_tasks_rt_tbb,
};
#define NRUNTIMES (sizeof(runtimes) / sizeof(runtimes[0]))

static const yard_tasks_runtime_t *find_runtime(const char *name)
{
    for (size_t i = 0; i < NRUNTIMES; i++)
        if (strcmp(runtimes[i]->name, name) == 0)
            return runtimes[i];
    return NULL;
}

static const char *unavailable(const yard_tasks_runtime_t *rt)
{
    return rt->unavailable ? rt->unavailable() : NULL;
}

/* ------------------------------------------------------------------------ */
/* the command line                                                          */

struct opts {
    const char *program;
    int n;
    const char *runtime;
    unsigned workers;
    int cutoff;
    unsigned repeat;
    bool json, list, help;
};

static unsigned cpus_in_mask(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return (unsigned)CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

static void runtime_names(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < NRUNTIMES && used < len; i++) {
        int w = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", runtimes[i]->name);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

static void usage(FILE *f)
{
    char names[128];
    runtime_names(names, sizeof names);
    fprintf(f,
            "usage: " PROG " fib N --runtime R [--workers W] [--cutoff C] [--repeat K] [--json]\n"
            "       " PROG " --list-runtimes [--json]\n"
            "       " PROG " --help\n"
            "\n"
            "The Eve study's Program 1, a parallel Fibonacci, under one task runtime:\n"
            "\n"
            "  fib(n): if n < 2 return n; if n <= C compute it sequentially (plain recursive C);\n"
            "          otherwise spawn two tasks computing fib(n-1) and fib(n-2) into two result\n"
            "          slots, wait for both (a finish scope / join), return their sum.\n"
            "\n"
            "The result is checked against the exact value (computed iteratively); each of the\n"
            "K repetitions is timed with CLOCK_MONOTONIC and the min and median are reported.\n"
            "\n"
            "Arguments and flags:\n"
            "  fib N            the program (the only one) and its argument, 0 to %d\n"
            "                   (fib(%d) is the largest that fits a signed 64-bit integer)\n"
            "  --runtime R      one of: %s (see below)\n"
            "  --workers W      worker threads, 1 to %d (default: CPUs in the affinity mask,\n"
            "                   here %u); 'threads' records it but is not bounded by it\n"
            "  --cutoff C       compute fib(n) sequentially when n <= C, 0 to %d (default %d);\n"
            "                   0 makes a task of every call with n >= 2: the cost of a task\n"
            "  --repeat K       repetitions, 1 to %d (default %d)\n"
            "  --json           print one JSON object instead of the summary (docs/tasks.md)\n"
            "  --list-runtimes  list the runtimes and whether this build can run them\n"
            "  -h, --help       this text\n"
            "\n"
            "Runtimes:\n",
            YARD_TASKS_MAX_N, YARD_TASKS_MAX_N, names, MAX_WORKERS, cpus_in_mask(),
            YARD_TASKS_MAX_N, DEFAULT_CUTOFF, MAX_REPEAT, DEFAULT_REPEAT);
    for (size_t i = 0; i < NRUNTIMES; i++) {
        const char *why = unavailable(runtimes[i]);
        fprintf(f, "  %-12s %s\n", runtimes[i]->name, runtimes[i]->summary);
        if (why)
            fprintf(f, "  %-12s (unavailable here: %s)\n", "", why);
    }
    fprintf(f,
            "\n"
            "Reported (the JSON fields): result and expected; times_s, each repetition from\n"
            "the root task's start to its join, inside the runtime, with min_s and median_s;\n"
            "wall_s, the same plus the runtime's start-up and shut-down (for coro and\n"
            "coro-perms a whole yard_coro_run); tasks, the tasks spawned below the root in\n"
            "one repetition (0 when n < 2 or n <= C, else 2 + tasks(n-1) + tasks(n-2), the\n"
            "same for every runtime); steals, the median per repetition where the runtime\n"
            "can tell (coro, coro-perms), else null; ns_per_task = median_s * 1e9 / tasks\n"
            "(null when there are none); inline_fallbacks, spawns that got no thread or task\n"
            "(pthread_create failed) and ran inline; cpus, the CPUs in the affinity mask.\n"
            "\n"
            "Exit status: 0 ok, 1 a wrong result or a runtime error, 2 a usage error\n"
            "(including a runtime that this build or machine cannot run).\n");
}


static void parse(int argc, char **argv, struct opts *o)
{
    const char *positional[2];
    int npos = 0;
    bool workers_given = false, cutoff_given = false, repeat_given = false;
    const char *n_text = NULL;
    o->cutoff = DEFAULT_CUTOFF;
    o->repeat = DEFAULT_REPEAT;
    o->workers = cpus_in_mask();
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        /* A negative number is an argument (N out of range), not a flag. */
        if (arg[0] != '-' || arg[1] == '\0' || (arg[1] >= '0' && arg[1] <= '9')) {
            if (npos == 2)
                yard_usage_exit(PROG, "unexpected argument '%s'", arg);
            positional[npos++] = arg;
            continue;
        }
        if (strcmp(arg, "-h") == 0) {
            o->help = true;
            continue;
        }
        if (arg[1] != '-')
            yard_usage_exit(PROG, "unknown flag '%s'", arg);
        /* --flag VALUE or --flag=VALUE */
        char name[32];
        const char *value = NULL;
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        if (len >= sizeof name)
            yard_usage_exit(PROG, "unknown flag '%s'", arg);
        memcpy(name, arg, len);
        name[len] = '\0';
        bool takes_value = strcmp(name, "--runtime") == 0 || strcmp(name, "--workers") == 0 ||
                           strcmp(name, "--cutoff") == 0 || strcmp(name, "--repeat") == 0;
        bool is_switch = strcmp(name, "--json") == 0 || strcmp(name, "--list-runtimes") == 0 ||
                         strcmp(name, "--help") == 0;
        if (!takes_value && !is_switch)
            yard_usage_exit(PROG, "unknown flag '%s'", name);
        if (takes_value) {
            if (eq)
                value = eq + 1;
            else if (i + 1 < argc)
                value = argv[++i];
            else
                yard_usage_exit(PROG, "%s: missing value", name);
        } else if (eq) {
            yard_usage_exit(PROG, "%s takes no value", name);
        }
        if (strcmp(name, "--runtime") == 0) {
            o->runtime = value;
        } else if (strcmp(name, "--workers") == 0) {
            o->workers = (unsigned)yard_int_flag(PROG, name, value, 1, MAX_WORKERS);
            workers_given = true;
        } else if (strcmp(name, "--cutoff") == 0) {
            o->cutoff = (int)yard_int_flag(PROG, name, value, 0, YARD_TASKS_MAX_N);
            cutoff_given = true;
        } else if (strcmp(name, "--repeat") == 0) {
            o->repeat = (unsigned)yard_int_flag(PROG, name, value, 1, MAX_REPEAT);
            repeat_given = true;
        } else if (strcmp(name, "--json") == 0) {
            o->json = true;
        } else if (strcmp(name, "--list-runtimes") == 0) {
            o->list = true;
        } else {
            o->help = true;
        }
    }
    if (o->help)
        return;
    if (o->list) {
        if (npos || o->runtime || workers_given || cutoff_given || repeat_given)
            yard_usage_exit(PROG, "--list-runtimes takes no program, --runtime or other flags "
                        "(only --json)");
        return;
    }
    if (npos == 0)
        yard_usage_exit(PROG, "missing the program: expected 'fib N'");
    o->program = positional[0];
    if (strcmp(o->program, "fib") != 0)
        yard_usage_exit(PROG, "unknown program '%s' (the only one is 'fib')", o->program);
    if (npos < 2)
        yard_usage_exit(PROG, "fib: missing N (a whole number from 0 to %d)", YARD_TASKS_MAX_N);
    n_text = positional[1];
    long long n;
    if (yard_parse_int(n_text, LLONG_MIN, LLONG_MAX, &n) < 0)
        yard_usage_exit(PROG, "fib: N must be a whole number from 0 to %d, got '%s'", YARD_TASKS_MAX_N,
                    n_text);
    if (n < 0 || n > YARD_TASKS_MAX_N)
        yard_usage_exit(PROG, "fib: N must be from 0 to %d (fib(%d) is the largest that fits a signed "
                    "64-bit integer), got %lld",
                    YARD_TASKS_MAX_N, YARD_TASKS_MAX_N, n);
    o->n = (int)n;
    if (!o->runtime) {
        char names[128];
        runtime_names(names, sizeof names);
        yard_usage_exit(PROG, "missing --runtime R (one of: %s)", names);
    }
}

/* ------------------------------------------------------------------------ */
/* expectations and statistics                                               */

static int64_t fib_exact(int n)
{
    int64_t a = 0, b = 1; /* fib(i), fib(i + 1) */
    for (int i = 0; i < n; i++) {
        int64_t t = a + b;
        a = b;
        b = t;
    }
    return a;
}

/* T(n) = 0 when n < 2 or n <= cutoff, else 2 + T(n-1) + T(n-2). Wraps
 * modulo 2^64 for the largest trees, as the runtimes' own counts do. */
static uint64_t tasks_expected(int n, int cutoff)
{
    uint64_t t[YARD_TASKS_MAX_N + 1];
    for (int i = 0; i <= n; i++)
        t[i] = (i < 2 || i <= cutoff) ? 0 : 2 + t[i - 1] + t[i - 2];
    return t[n];
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double median_d(const double *v, unsigned k)
{
    double s[MAX_REPEAT];
    memcpy(s, v, k * sizeof *v);
    qsort(s, k, sizeof *s, cmp_double);
    return k % 2 ? s[k / 2] : (s[k / 2 - 1] + s[k / 2]) / 2;
}

static double min_d(const double *v, unsigned k)
{
    double m = v[0];
    for (unsigned i = 1; i < k; i++)
        if (v[i] < m)
            m = v[i];
    return m;
}

static int64_t median_i64(const int64_t *v, unsigned k)
{
    int64_t s[MAX_REPEAT];
    memcpy(s, v, k * sizeof *v);
    qsort(s, k, sizeof *s, cmp_i64);
    return k % 2 ? s[k / 2] : (s[k / 2 - 1] + s[k / 2]) / 2;
}

/* ------------------------------------------------------------------------ */
/* listing                                                                   */

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void list_runtimes(bool json)
{
    if (!json) {
        for (size_t i = 0; i < NRUNTIMES; i++) {
            const char *why = unavailable(runtimes[i]);
            printf("%-12s %s\n", runtimes[i]->name, runtimes[i]->summary);
            if (why)
                printf("%-12s (unavailable here: %s)\n", "", why);
        }
        return;
    }
    printf("{\"tool\":\"yard-tasks\",\"cpus\":%u,\"sanitizer\":", cpus_in_mask());
#ifdef SANITIZER
    json_string(SANITIZER);
#else
    printf("null");
#endif
    printf(",\"runtimes\":[");
    for (size_t i = 0; i < NRUNTIMES; i++) {
        const char *why = unavailable(runtimes[i]);
        printf("%s\n  {\"name\":", i ? "," : "");
        json_string(runtimes[i]->name);
        printf(",\"available\":%s,\"reason\":", why ? "false" : "true");
        if (why)
            json_string(why);
        else
            printf("null");
        printf(",\"summary\":");
        json_string(runtimes[i]->summary);
        printf("}");
    }
    printf("\n]}\n");
}

/* ------------------------------------------------------------------------ */
/* a run                                                                     */

static void print_doubles(const double *v, unsigned k)
{
    putchar('[');
    for (unsigned i = 0; i < k; i++)
        printf("%s%.9f", i ? "," : "", v[i]);
    putchar(']');
}

static int run(const struct opts *o)
{
    const yard_tasks_runtime_t *rt = find_runtime(o->runtime);
    if (!rt) {
        char names[128];
        runtime_names(names, sizeof names);
        yard_usage_exit(PROG, "--runtime: unknown runtime '%s' (one of: %s)", o->runtime, names);
    }
    const char *why = unavailable(rt);
    if (why)
        yard_usage_exit(PROG, "--runtime %s: not available: %s", rt->name, why);

    yard_tasks_params_t p = {.n = o->n, .cutoff = o->cutoff, .workers = o->workers};
    int64_t expected = fib_exact(o->n);
    uint64_t tasks_formula = tasks_expected(o->n, o->cutoff);
    static double times[MAX_REPEAT], walls[MAX_REPEAT];
    static int64_t steals[MAX_REPEAT];
    bool has_steals = true, correct = true;
    int64_t result = 0, stacks_mapped = -1, inlined = -1;
    uint64_t tasks = 0, fallbacks = 0;
    for (unsigned k = 0; k < o->repeat; k++) {
        yard_tasks_rep_t rep = {.steals = -1, .stacks_mapped = -1, .inlined = -1};
        char err[256] = "";
        if (rt->run(&p, &rep, err, sizeof err) != 0) {
            fprintf(stderr, PROG ": %s: %s\n", rt->name, err);
            return 1;
        }
        times[k] = rep.time_s;
        walls[k] = rep.wall_s;
        steals[k] = rep.steals;
        if (rep.steals < 0)
            has_steals = false;
        if (k == 0 || rep.result != expected)
            result = rep.result;
        if (rep.result != expected)
            correct = false;
        if (rep.tasks != tasks_formula) {
            fprintf(stderr,
                    PROG ": %s: repetition %u counted %" PRIu64 " tasks, the program spawns "
                         "%" PRIu64 "\n",
                    rt->name, k + 1, rep.tasks, tasks_formula);
            return 1;
        }
        tasks = rep.tasks;
        if (rep.inline_fallbacks > fallbacks)
            fallbacks = rep.inline_fallbacks;
        if (rep.stacks_mapped > stacks_mapped)
            stacks_mapped = rep.stacks_mapped;
        if (rep.inlined > inlined)
            inlined = rep.inlined;
    }
    double min_s = min_d(times, o->repeat), median_s = median_d(times, o->repeat);
    double wall_median = median_d(walls, o->repeat);
    int64_t steals_median = has_steals ? median_i64(steals, o->repeat) : -1;
    unsigned cpus = cpus_in_mask();

    if (o->json) {
        printf("{\"tool\":\"yard-tasks\",\"program\":\"fib\",\"n\":%d,\"runtime\":", o->n);
        json_string(rt->name);
        printf(",\"workers\":%u,\"cutoff\":%d,\"repeat\":%u,\"result\":%" PRId64
               ",\"expected\":%" PRId64 ",\"correct\":%s,\"times_s\":",
               o->workers, o->cutoff, o->repeat, result, expected, correct ? "true" : "false");
        print_doubles(times, o->repeat);
        printf(",\"min_s\":%.9f,\"median_s\":%.9f,\"wall_s\":", min_s, median_s);
        print_doubles(walls, o->repeat);
        printf(",\"tasks\":%" PRIu64 ",\"steals\":", tasks);
        if (has_steals)
            printf("%" PRId64, steals_median);
        else
            printf("null");
        printf(",\"ns_per_task\":");
        if (tasks)
            printf("%.3f", median_s * 1e9 / (double)tasks);
        else
            printf("null");
        printf(",\"inline_fallbacks\":%" PRIu64 ",\"cpus\":%u}\n", fallbacks, cpus);
    } else {
        printf("fib(%d) = %" PRId64 " %s; runtime %s, %u worker%s, cutoff %d, %u repetition%s, "
               "%u CPUs\n",
               o->n, result, correct ? "(correct)" : "(WRONG)", rt->name, o->workers,
               o->workers == 1 ? "" : "s", o->cutoff, o->repeat, o->repeat == 1 ? "" : "s",
               cpus);
        printf("  time   median %.6f s  min %.6f s  (wall median %.6f s, with the runtime's "
               "start-up)\n",
               median_s, min_s, wall_median);
        printf("  tasks  %" PRIu64 " per repetition", tasks);
        if (tasks)
            printf(", %.1f ns per task (median)", median_s * 1e9 / (double)tasks);
        printf("\n");
        if (has_steals)
            printf("  steals %" PRId64 " (median per repetition)\n", steals_median);
        if (stacks_mapped >= 0)
            printf("  stacks %" PRId64 " coroutine stacks mapped (most in one repetition)\n",
                   stacks_mapped);
        if (inlined >= 0)
            printf("  inlined %" PRId64 " children run by their join on its own stack, never "
                   "started as coroutines (most in one repetition)\n",
                   inlined);
        if (fallbacks)
            printf("  fallbacks %" PRIu64 " spawns ran inline: no thread or task could be made "
                   "(most in one repetition)\n",
                   fallbacks);
    }
    fflush(stdout);
    if (!correct) {
        fprintf(stderr, PROG ": %s: wrong result: fib(%d) is %" PRId64 ", got %" PRId64 "\n",
                rt->name, o->n, expected, result);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o = {0};
    parse(argc, argv, &o);
    if (o.help) {
        usage(stdout);
        return 0;
    }
    if (o.list) {
        list_runtimes(o.json);
        return 0;
    }
    return run(&o);
}
