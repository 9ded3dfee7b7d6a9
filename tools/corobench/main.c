/* yard-corobench: microbenchmarks of the coroutine runtime.
 *
 *   switch   raw context switch (yard_coro_ctx_switch), ping-pong between the
 *            thread and one coroutine; ns per switch
 *   symswitch raw switch between two coroutines running the same loop (the
 *            pattern of the scheduler, where the return predictor is right)
 *   uswitch  the same through the ucontext backend (yard_coro_uctx_switch)
 *   yield    scheduler yield ping-pong between two coroutines on one worker;
 *            ns per yield (one switch plus run-queue work)
 *   spawn    spawn + run + exit + join of empty coroutines; ns per coroutine
 *   idle     memory of N parked coroutines: RSS growth per coroutine
 *
 * Each timed figure is run --repeat times; the median and the minimum are
 * printed. Output: one line per figure, "name value unit (details)". */
#include "yard/cli.h"
#include "yard/coro.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: yard-corobench [options]\n"
    "  --bench LIST     comma-separated: switch,symswitch,uswitch,yield,spawn,idle or all\n"
    "                   (default all)\n"
    "  --iters N        iterations of the switch, uswitch and yield loops (default 10000000)\n"
    "  --spawns N       coroutines per spawn measurement (default 200000)\n"
    "  --coros N        parked coroutines for the idle measurement (default 100000)\n"
    "  --stack-size N   coroutine stack size in bytes for spawn/idle (default 65536)\n"
    "  --no-guard       idle: no guard pages (needed above ~32000 coroutines when\n"
    "                   vm.max_map_count is the default 65530; chosen automatically then)\n"
    "  --repeat N       runs per timed figure; median and min are printed (default 5)\n"
    "  --help           this text\n";

static uint64_t now_ns(void)
{
    return yard_coro_now_ns();
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *name, double *v, int n, const char *unit, const char *detail)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    printf("%-9s median %.2f %s  min %.2f %s  (%s, %d runs)\n", name, v[n / 2], unit, v[0], unit,
           detail, n);
    fflush(stdout);
}

/* ------------------------------------------------------------------------ */

static yard_coro_ctx_t sw_main, sw_co;
static uint64_t sw_iters;

static void sw_entry(void *arg)
{
    (void)arg;
    for (;;)
        yard_coro_ctx_switch(&sw_co, &sw_main);
}

static double bench_switch(void)
{
    yard_coro_stack_t st;
    if (yard_coro_stack_alloc(&st, 0, true) != 0) {
        perror("stack");
        exit(1);
    }
    yard_coro_ctx_make(&sw_co, st.lo, st.size, sw_entry, NULL);
    yard_coro_ctx_switch(&sw_main, &sw_co); /* warm up */
    uint64_t t0 = now_ns();
    for (uint64_t i = 0; i < sw_iters; i++)
        yard_coro_ctx_switch(&sw_main, &sw_co);
    uint64_t t1 = now_ns();
    /* The coroutine is left suspended forever; its stack is simply dropped. */
    yard_coro_ctx_destroy(&sw_co);
    yard_coro_stack_free(&st);
    return (double)(t1 - t0) / (double)(2 * sw_iters);
}

/* Symmetric ping-pong: two coroutines run the same loop and switch to each
 * other from the same call site, as coroutines do under the scheduler
 * (every suspended coroutine waits at the same place in schedule()). */
static yard_coro_ctx_t sym_ctx[2];
static uint64_t sym_left;

static void sym_entry(void *arg)
{
    int me = (int)(intptr_t)arg;
    for (;;) {
        if (sym_left-- == 0)
            yard_coro_ctx_switch(&sym_ctx[me], &sw_main);
        else
            yard_coro_ctx_switch(&sym_ctx[me], &sym_ctx[!me]);
    }
}

static double bench_symmetric(void)
{
    yard_coro_stack_t st[2];
    for (int i = 0; i < 2; i++) {
        if (yard_coro_stack_alloc(&st[i], 0, true) != 0) {
            perror("stack");
            exit(1);
        }
        yard_coro_ctx_make(&sym_ctx[i], st[i].lo, st[i].size, sym_entry, (void *)(intptr_t)i);
    }
    sym_left = 2 * sw_iters;
    uint64_t t0 = now_ns();
    yard_coro_ctx_switch(&sw_main, &sym_ctx[0]);
    uint64_t t1 = now_ns();
    for (int i = 0; i < 2; i++) {
        yard_coro_ctx_destroy(&sym_ctx[i]);
        yard_coro_stack_free(&st[i]);
    }
    return (double)(t1 - t0) / (double)(2 * sw_iters);
}

static yard_coro_uctx_t us_main, us_co;

static void us_entry(void *arg)
{
    (void)arg;
    for (;;)
        yard_coro_uctx_switch(&us_co, &us_main);
}

static double bench_uswitch(void)
{
    yard_coro_stack_t st;
    if (yard_coro_stack_alloc(&st, 0, true) != 0) {
        perror("stack");
        exit(1);
    }
    yard_coro_uctx_make(&us_co, st.lo, st.size, us_entry, NULL);
    yard_coro_uctx_switch(&us_main, &us_co);
    uint64_t iters = sw_iters / 10 ? sw_iters / 10 : 1; /* ~50x slower */
    uint64_t t0 = now_ns();
    for (uint64_t i = 0; i < iters; i++)
        yard_coro_uctx_switch(&us_main, &us_co);
    uint64_t t1 = now_ns();
    yard_coro_uctx_destroy(&us_co);
    yard_coro_stack_free(&st);
    return (double)(t1 - t0) / (double)(2 * iters);
}

/* ------------------------------------------------------------------------ */

static void yield_child(void *arg)
{
    (void)arg;
    for (uint64_t i = 0; i < sw_iters; i++)
        yard_coro_yield();
}

static double yield_result;
static void yield_main(void *arg)
{
    (void)arg;
    yard_coro_t *a = yard_coro_spawn(yield_child, NULL);
    yard_coro_t *b = yard_coro_spawn(yield_child, NULL);
    uint64_t t0 = now_ns();
    yard_coro_join(a);
    yard_coro_join(b);
    uint64_t t1 = now_ns();
    yield_result = (double)(t1 - t0) / (double)(2 * sw_iters);
}

static double bench_yield(void)
{
    yard_coro_opts_t o = {.workers = 1};
    if (yard_coro_run(&o, yield_main, NULL) != 0)
        exit(1);
    return yield_result;
}

/* ------------------------------------------------------------------------ */

static uint64_t n_spawns;
static size_t stack_size;
static double spawn_result;

static void empty(void *arg)
{
    (void)arg;
}

static void spawn_main(void *arg)
{
    (void)arg;
    yard_coro_t **h = malloc(sizeof(*h) * 1024);
    uint64_t t0 = now_ns();
    /* Batches of 1024: spawn all, then join all, so the cost includes the
     * queueing and a realistic number of stacks in flight. */
    for (uint64_t done = 0; done < n_spawns; done += 1024) {
        for (int i = 0; i < 1024; i++)
            h[i] = yard_coro_spawn(empty, NULL);
        for (int i = 0; i < 1024; i++)
            yard_coro_join(h[i]);
    }
    uint64_t t1 = now_ns();
    uint64_t total = (n_spawns + 1023) / 1024 * 1024;
    spawn_result = (double)(t1 - t0) / (double)total;
    free(h);
}

static double bench_spawn(void)
{
    yard_coro_opts_t o = {.workers = 1, .stack_size = stack_size};
    if (yard_coro_run(&o, spawn_main, NULL) != 0)
        exit(1);
    return spawn_result;
}

/* ------------------------------------------------------------------------ */

static uint64_t n_idle;
static bool no_guard;
static yard_coro_waitq_t idle_q;
static atomic_uint idle_word;
static atomic_uint idle_parked;

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
        rss = -1;
    fclose(f);
    return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static void idle_child(void *arg)
{
    (void)arg;
    char touch[512]; /* a small realistic frame */
    memset(touch, 1, sizeof(touch));
    __asm__ volatile("" ::"r"(touch) : "memory");
    atomic_fetch_add(&idle_parked, 1);
    while (atomic_load(&idle_word) == 0)
        yard_coro_waitq_wait(&idle_q, &idle_word, 0, 0);
}

static void idle_main(void *arg)
{
    (void)arg;
    yard_coro_t **h = malloc(sizeof(*h) * n_idle);
    long before = rss_kib();
    for (uint64_t i = 0; i < n_idle; i++)
        h[i] = yard_coro_spawn(idle_child, NULL);
    while (atomic_load(&idle_parked) < n_idle)
        yard_coro_sleep_ns(1000000);
    long after = rss_kib();
    yard_coro_stats_t st;
    yard_coro_get_stats(&st);
    printf("idle     %llu parked coroutines: RSS +%ld KiB = %.2f KiB per coroutine "
           "(stack %zu B virtual%s, %llu stacks mapped)\n",
           (unsigned long long)n_idle, after - before, (double)(after - before) / (double)n_idle,
           stack_size ? stack_size : (size_t)YARD_CORO_DEFAULT_STACK,
           no_guard ? ", no guard page" : " + 4 KiB guard", (unsigned long long)st.stacks_mapped);
    atomic_store(&idle_word, 1);
    yard_coro_waitq_wake(&idle_q, INT_MAX);
    for (uint64_t i = 0; i < n_idle; i++)
        yard_coro_join(h[i]);
    free(h);
}

static void bench_idle(void)
{
    long max_maps = 65530;
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    if (f) {
        if (fscanf(f, "%ld", &max_maps) != 1)
            max_maps = 65530;
        fclose(f);
    }
    if (!no_guard && (long)n_idle * 2 + 1000 > max_maps) {
        printf("idle     note: %llu guarded stacks need %llu mappings > vm.max_map_count %ld; "
               "measuring without guard pages\n",
               (unsigned long long)n_idle, (unsigned long long)n_idle * 2, max_maps);
        no_guard = true;
    }
    yard_coro_opts_t o = {.workers = 1, .stack_size = stack_size, .no_stack_guard = no_guard};
    if (yard_coro_run(&o, idle_main, NULL) != 0)
        exit(1);
}

/* ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    const char *list = "all";
    uint64_t iters = 10000000, spawns = 200000, coros = 100000, ssize = 0, repeat = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "--no-guard")) {
            no_guard = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "yard-corobench: unknown option or missing value: %s\n%s", a, usage);
            return 2;
        }
        if (!strcmp(a, "--bench"))
            list = v;
        else if (!strcmp(a, "--iters"))
            iters = (uint64_t)yard_int_flag("yard-corobench", a, v, 1, 1000000000000ull);
        else if (!strcmp(a, "--spawns"))
            spawns = (uint64_t)yard_int_flag("yard-corobench", a, v, 1, 100000000ull);
        else if (!strcmp(a, "--coros"))
            coros = (uint64_t)yard_int_flag("yard-corobench", a, v, 1, 10000000ull);
        else if (!strcmp(a, "--stack-size"))
            ssize = (uint64_t)yard_int_flag("yard-corobench", a, v, 4096, 1ull << 30);
        else if (!strcmp(a, "--repeat"))
            repeat = (uint64_t)yard_int_flag("yard-corobench", a, v, 1, 1000);
        else {
            fprintf(stderr, "yard-corobench: unknown option %s\n%s", a, usage);
            return 2;
        }
        i++;
    }
    bool all = !strcmp(list, "all");
    const char *names[] = {"switch", "uswitch", "yield", "spawn", "idle", "symswitch"};
    bool want[6] = {false};
    if (!all) {
        char *copy = strdup(list), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            int k = -1;
            for (int j = 0; j < 6; j++)
                if (!strcmp(t, names[j]))
                    k = j;
            if (k < 0) {
                fprintf(stderr,
                        "yard-corobench: --bench: unknown benchmark '%s' (switch, symswitch, "
                        "uswitch, yield, spawn, idle, all)\n",
                        t);
                free(copy);
                return 2;
            }
            want[k] = true;
        }
        free(copy);
    }
    sw_iters = iters;
    n_spawns = spawns;
    n_idle = coros;
    stack_size = (size_t)ssize;
    int reps = (int)repeat;
    double *v = calloc((size_t)reps, sizeof(double));
    char detail[128];
    printf("backend  %s\n", yard_coro_ctx_backend());
    if (all || want[0]) {
        for (int r = 0; r < reps; r++)
            v[r] = bench_switch();
        snprintf(detail, sizeof(detail), "%s, %llu round trips", yard_coro_ctx_backend(),
                 (unsigned long long)iters);
        report("switch", v, reps, "ns", detail);
    }
    if (all || want[5]) {
        for (int r = 0; r < reps; r++)
            v[r] = bench_symmetric();
        snprintf(detail, sizeof(detail), "%s, coroutine<->coroutine, same call site, %llu switches",
                 yard_coro_ctx_backend(), (unsigned long long)(2 * iters));
        report("symswitch", v, reps, "ns", detail);
    }
    if (all || want[1]) {
        for (int r = 0; r < reps; r++)
            v[r] = bench_uswitch();
        snprintf(detail, sizeof(detail), "ucontext swapcontext, %llu round trips",
                 (unsigned long long)(iters / 10 ? iters / 10 : 1));
        report("uswitch", v, reps, "ns", detail);
    }
    if (all || want[2]) {
        for (int r = 0; r < reps; r++)
            v[r] = bench_yield();
        snprintf(detail, sizeof(detail), "per yield, 2 coroutines x %llu yields, 1 worker",
                 (unsigned long long)iters);
        report("yield", v, reps, "ns", detail);
    }
    if (all || want[3]) {
        for (int r = 0; r < reps; r++)
            v[r] = bench_spawn();
        snprintf(detail, sizeof(detail), "spawn+run+exit+join, %llu coroutines, 1 worker",
                 (unsigned long long)spawns);
        report("spawn", v, reps, "ns", detail);
    }
    if (all || want[4])
        bench_idle();
    free(v);
    return 0;
}
