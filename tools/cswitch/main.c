/* yard-cswitch: the context-switch lab. Reproduces "Deep Dive Into the Cost
 * of Context Switch" (two processes ping-ponging a byte over pipes on one
 * CPU under SCHED_FIFO; t_avg = (t_switch/2 - t_single)/N) and puts every
 * kind of switch side by side: processes, threads over pipes, threads over a
 * futex, ucontext with and without the signal-mask dance of a user-level
 * thread library, and our coroutine runtime's own switch. See docs/cswitch.md. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cswitch.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "yard/cli.h"

#define PROG "yard-cswitch"
#define MAX_LIST 64
#define MAX_BYTES (1ull << 30)

/* The study's grid: arrays of 2^10..2^20 bytes, strides 2^3..2^8 bytes, plus
 * stride 0 (no array work) as each size's no-work reference. */
static const uint64_t sweep_sizes[] = {1u << 10, 1u << 11, 1u << 12, 1u << 13,
                                       1u << 14, 1u << 15, 1u << 16, 1u << 17,
                                       1u << 18, 1u << 19, 1u << 20};
static const uint64_t sweep_strides[] = {0, 8, 16, 32, 64, 128, 256};

struct kind_entry {
    const char *name;
    const yard_cswitch_kind_t *kind;
};

static const struct kind_entry kinds[] = {
    {"process-pipe", &yard_cswitch_process_pipe},
    {"thread-pipe", &yard_cswitch_thread_pipe},
    {"thread-futex", &yard_cswitch_thread_futex},
    {"coro", &yard_cswitch_coro},
    {"ucontext", &yard_cswitch_ucontext},
    {"ucontext-sigmask", &yard_cswitch_ucontext_sigmask},
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

enum output { OUT_TABLE, OUT_JSON, OUT_CSV };

struct opts {
    bool kind_selected[NKINDS];
    uint64_t switches;
    uint64_t groups, iterations;
    uint64_t warmup;
    bool warmup_set;
    int cpu; /* -1: first CPU of the affinity mask */
    bool sweep;
    uint64_t sizes[MAX_LIST], strides[MAX_LIST];
    size_t nsizes, nstrides;
    bool sizes_set, strides_set;
    enum output out;
    bool list_points;
    bool no_fifo, no_counters;
};

/* What the whole run knows about the machine, shown with every point. */
struct env {
    int cpu;
    bool fifo;
    int fifo_priority;
    bool counters; /* hardware counters usable */
};

struct result {
    const char *kind;
    uint64_t array_bytes, stride_bytes;
    double direct_median, direct_min, direct_max;
    double t_switch_ns, t_single_ns; /* one run of N round trips / N single iterations */
    uint64_t switches_expected;
    int64_t switches_measured; /* -1: not countable (user-level switch) */
    uint64_t involuntary;      /* involuntary switches of the measuring task(s) */
    bool flagged;
    char flag_reason[160];
    bool have_counters;
    yard_cswitch_counts_t sw, single;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " [--kind LIST] [--switches N] [--groups G] [--iterations I]\n"
            "                    [--warmup W] [--cpu N] [--sweep] [--sizes LIST] [--strides LIST]\n"
            "                    [--json | --csv] [--list-points] [--no-fifo] [--no-counters]\n"
            "\n"
            "Measures the cost of one context switch, as in \"Deep Dive Into the Cost of\n"
            "Context Switch\": two sides on one CPU pass a token N times each way; after\n"
            "every token the receiver traverses its own array (the work unit). A single\n"
            "side does the same message passing and work alone (t_single). The cost of\n"
            "one switch is  direct = (t_switch/2 - t_single) / N.\n"
            "\n"
            "  --kind LIST        kinds to measure, comma-separated (default: all):\n");
    for (size_t i = 0; i < NKINDS; i++)
        fprintf(f, "                       %-17s %s\n", kinds[i].name,
                kinds[i].kind->what);
    fprintf(f,
            "  --switches N       N round trips per run (2N switches; default 100000)\n"
            "  --groups G         G groups of measurements (default 20); the reported cost\n"
            "                     is the median across groups, with the minimum\n"
            "  --iterations I     runs per group, averaged (default 10)\n"
            "  --warmup W         untimed round trips before measuring (default N/10)\n"
            "  --cpu N            the CPU to pin every side to (default: the first CPU of\n"
            "                     the affinity mask)\n"
            "  --sweep            the study's working-set grid: arrays of 2^10..2^20 bytes\n"
            "                     x strides 0,8,16,32,64,128,256 bytes (stride 0: no work)\n"
            "  --sizes LIST       array sizes in bytes, restricting the sweep (implies\n"
            "                     --sweep): 4096, 4K, 1M, 2^12, or a range of powers of\n"
            "                     two 2^10..2^14; multiples of 8, at most 1G\n"
            "  --strides LIST     strides in bytes (implies --sweep): 0 or multiples of 8\n"
            "  --json             a JSON list, one object per measured point\n"
            "  --csv              CSV with a header line, one row per point\n"
            "  --list-points      print the points that would be measured, measure nothing\n"
            "                     (alias --dry-run); honours --json/--csv\n"
            "  --no-fifo          do not ask for SCHED_FIFO (default: highest priority)\n"
            "  --no-counters      do not read hardware counters\n"
            "  --help             this text\n"
            "\n"
            "Without --sweep one point is measured per kind: no array work.\n"
            "Exit status: 0 ok, 1 runtime error, 2 usage error.\n");
}


/* A byte count: 4096, 4K, 1M, 1G, 2^12. Returns false if malformed. */
static bool parse_bytes(const char *s, size_t len, uint64_t *out)
{
    char buf[32];
    if (len == 0 || len >= sizeof(buf))
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (buf[0] < '0' || buf[0] > '9')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (errno)
        return false;
    if (end[0] == '^') {
        if (v != 2 || end[1] < '0' || end[1] > '9')
            return false;
        unsigned long long e = strtoull(end + 1, &end, 10);
        if (*end || e > 30)
            return false;
        *out = 1ull << e;
        return true;
    }
    unsigned long long mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1ull << 10;
    else if (*end == 'M' || *end == 'm')
        mul = 1ull << 20;
    else if (*end == 'G' || *end == 'g')
        mul = 1ull << 30;
    else if (*end)
        return false;
    if (mul != 1 && end[1])
        return false;
    if (v > MAX_BYTES / mul)
        return false;
    *out = v * mul;
    return true;
}

static void add_to_list(const char *flag, uint64_t *list, size_t *n, uint64_t v)
{
    for (size_t i = 0; i < *n; i++)
        if (list[i] == v)
            return;
    if (*n >= MAX_LIST)
        yard_usage_exit(PROG, "%s: at most %d values", flag, MAX_LIST);
    list[(*n)++] = v;
}

/* LIST: comma-separated byte counts or A..B ranges of powers of two. Every
 * value must be 0 or a multiple of 8 (whole doubles), at most 1G. */
static void parse_byte_list(const char *flag, const char *s, bool zero_ok, uint64_t *list,
                            size_t *n)
{
    *n = 0;
    const char *p = s;
    if (!*p)
        yard_usage_exit(PROG, "%s: expected a comma-separated list of byte counts, got ''", flag);
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *dots = NULL;
        for (size_t i = 0; i + 1 < len; i++)
            if (p[i] == '.' && p[i + 1] == '.')
                dots = p + i;
        uint64_t lo, hi;
        if (dots) {
            size_t l1 = (size_t)(dots - p);
            if (!parse_bytes(p, l1, &lo) || !parse_bytes(dots + 2, len - l1 - 2, &hi) || lo == 0 ||
                (lo & (lo - 1)) || (hi & (hi - 1)) || hi < lo)
                yard_usage_exit(PROG, "%s: bad range '%.*s' (expected powers of two A..B, e.g. "
                            "2^10..2^14)",
                            flag, (int)len, p);
            for (uint64_t v = lo; v <= hi; v *= 2) {
                if (v % 8)
                    yard_usage_exit(PROG, "%s: %" PRIu64 " is not a multiple of 8", flag, v);
                add_to_list(flag, list, n, v);
            }
        } else {
            uint64_t v;
            if (!parse_bytes(p, len, &v))
                yard_usage_exit(PROG, "%s: bad value '%.*s' (expected bytes such as 4096, 4K, 1M, 2^12, "
                            "at most 1G)",
                            flag, (int)len, p);
            if (v % 8 || (v == 0 && !zero_ok))
                yard_usage_exit(PROG, "%s: %" PRIu64 " is not %sa multiple of 8 (whole doubles)", flag, v,
                            zero_ok ? "0 or " : "a positive ");
            add_to_list(flag, list, n, v);
        }
        if (!comma)
            break;
        p = comma + 1;
    }
}

static void parse_kinds(const char *s, struct opts *o)
{
    memset(o->kind_selected, 0, sizeof(o->kind_selected));
    const char *p = s;
    bool any = false;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        bool found = false;
        for (size_t i = 0; i < NKINDS; i++) {
            if (strlen(kinds[i].name) == len && strncmp(kinds[i].name, p, len) == 0) {
                o->kind_selected[i] = true;
                found = any = true;
            }
        }
        if (len == 3 && strncmp(p, "all", 3) == 0) {
            for (size_t i = 0; i < NKINDS; i++)
                o->kind_selected[i] = true;
            found = any = true;
        }
        if (!found) {
            char accepted[256] = "";
            for (size_t i = 0; i < NKINDS; i++) {
                strcat(accepted, kinds[i].name);
                strcat(accepted, ", ");
            }
            strcat(accepted, "all");
            yard_usage_exit(PROG, "--kind: unknown kind '%.*s' (accepted: %s)", (int)len, p, accepted);
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    if (!any)
        yard_usage_exit(PROG, "--kind: empty list");
}

static void parse_args(int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof(*o));
    for (size_t i = 0; i < NKINDS; i++)
        o->kind_selected[i] = true;
    o->switches = 100000;
    o->groups = 20;
    o->iterations = 10;
    o->cpu = -1;
    bool json = false, csv = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        char flag[64];
        const char *val = NULL;
        const char *eq = strchr(arg, '=');
        if (strncmp(arg, "--", 2) == 0 && eq && (size_t)(eq - arg) < sizeof(flag)) {
            memcpy(flag, arg, (size_t)(eq - arg));
            flag[eq - arg] = '\0';
            val = eq + 1;
        } else {
            snprintf(flag, sizeof(flag), "%s", arg);
        }
        static const char *const with_value[] = {"--kind",  "--switches", "--groups",
                                                  "--iterations", "--warmup", "--cpu",
                                                  "--sizes", "--strides"};
        bool wants = false;
        for (size_t k = 0; k < sizeof(with_value) / sizeof(with_value[0]); k++)
            if (strcmp(flag, with_value[k]) == 0)
                wants = true;
        if (wants && !val) {
            if (i + 1 >= argc)
                yard_usage_exit(PROG, "%s: missing value", flag);
            val = argv[++i];
        } else if (!wants && val) {
            yard_usage_exit(PROG, "%s: takes no value", flag);
        }

        if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(flag, "--kind") == 0) {
            parse_kinds(val, o);
        } else if (strcmp(flag, "--switches") == 0) {
            o->switches = yard_int_flag(PROG, flag, val, 1, 10000000000ull);
        } else if (strcmp(flag, "--groups") == 0) {
            o->groups = yard_int_flag(PROG, flag, val, 1, 10000);
        } else if (strcmp(flag, "--iterations") == 0) {
            o->iterations = yard_int_flag(PROG, flag, val, 1, 10000);
        } else if (strcmp(flag, "--warmup") == 0) {
            o->warmup = yard_int_flag(PROG, flag, val, 0, 10000000000ull);
            o->warmup_set = true;
        } else if (strcmp(flag, "--cpu") == 0) {
            o->cpu = (int)yard_int_flag(PROG, flag, val, 0, 1023);
        } else if (strcmp(flag, "--sweep") == 0) {
            o->sweep = true;
        } else if (strcmp(flag, "--sizes") == 0) {
            parse_byte_list(flag, val, false, o->sizes, &o->nsizes);
            o->sizes_set = o->sweep = true;
        } else if (strcmp(flag, "--strides") == 0) {
            parse_byte_list(flag, val, true, o->strides, &o->nstrides);
            o->strides_set = o->sweep = true;
        } else if (strcmp(flag, "--json") == 0) {
            json = true;
        } else if (strcmp(flag, "--csv") == 0) {
            csv = true;
        } else if (strcmp(flag, "--list-points") == 0 || strcmp(flag, "--dry-run") == 0) {
            o->list_points = true;
        } else if (strcmp(flag, "--no-fifo") == 0) {
            o->no_fifo = true;
        } else if (strcmp(flag, "--no-counters") == 0) {
            o->no_counters = true;
        } else {
            yard_usage_exit(PROG, "unknown flag '%s'", arg);
        }
    }
    if (json && csv)
        yard_usage_exit(PROG, "--json and --csv: choose one output format");
    o->out = json ? OUT_JSON : csv ? OUT_CSV : OUT_TABLE;
    if (!o->warmup_set)
        o->warmup = o->switches / 10 ? o->switches / 10 : 1;
    if (o->sweep) {
        if (!o->sizes_set) {
            o->nsizes = sizeof(sweep_sizes) / sizeof(sweep_sizes[0]);
            memcpy(o->sizes, sweep_sizes, sizeof(sweep_sizes));
        }
        if (!o->strides_set) {
            o->nstrides = sizeof(sweep_strides) / sizeof(sweep_strides[0]);
            memcpy(o->strides, sweep_strides, sizeof(sweep_strides));
        }
    } else {
        o->nsizes = o->nstrides = 1;
        o->sizes[0] = o->strides[0] = 0;
    }
}

/* ------------------------------------------------------------------------ */
/* measurement                                                               */

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The kernel tasks whose switches a run causes: the measuring thread and,
 * for kernel kinds, the partner. */
static int read_switches(const yard_cswitch_bench_t *b, bool partner, yard_cswitch_ctxsw_t *self,
                         yard_cswitch_ctxsw_t *other)
{
    if (yard_cswitch_read_ctxsw(getpid(), b->self_tid, self) != 0)
        return -1;
    if (partner && yard_cswitch_read_ctxsw(b->partner_pid, b->partner_tid, other) != 0)
        return -1;
    return 0;
}

static uint64_t delta(const yard_cswitch_ctxsw_t *a, const yard_cswitch_ctxsw_t *b)
{
    return (b->voluntary - a->voluntary) + (b->involuntary - a->involuntary);
}

static int measure_point(const struct opts *o, const struct env *env,
                         const yard_cswitch_kind_t *kind, uint64_t array_bytes,
                         uint64_t stride_bytes, struct result *r)
{
    char err[256] = "";
    memset(r, 0, sizeof(*r));
    r->kind = kind->name;
    r->array_bytes = array_bytes;
    r->stride_bytes = stride_bytes;

    yard_cswitch_bench_t b = {.array_bytes = array_bytes, .stride_bytes = stride_bytes};
    b.self_tid = yard_cswitch_gettid();
    b.array = yard_cswitch_array_new(array_bytes);
    if (!b.array) {
        fprintf(stderr, PROG ": %s: array of %" PRIu64 " bytes: %s\n", kind->name, array_bytes,
                strerror(errno));
        return -1;
    }
    if (kind->start(&b, err, sizeof(err)) != 0) {
        fprintf(stderr, PROG ": %s: %s\n", kind->name, err);
        yard_cswitch_array_free(b.array, array_bytes);
        return -1;
    }
    bool countable = kind->kernel && b.partner_tid > 0;

    yard_cswitch_perf_t perf_self, perf_partner;
    bool perf = env->counters;
    bool perf_partner_ok = false;
    if (perf) {
        char why[160];
        if (yard_cswitch_perf_open(&perf_self, b.self_tid, why, sizeof(why)) != 0) {
            perf = false;
        } else if (b.partner_tid > 0) {
            perf_partner_ok =
                yard_cswitch_perf_open(&perf_partner, b.partner_tid, why, sizeof(why)) == 0;
        }
    }

    double *group_direct = calloc(o->groups, sizeof(double));
    double *group_switch = calloc(o->groups, sizeof(double));
    double *group_single = calloc(o->groups, sizeof(double));
    int rc = -1;
    if (!group_direct || !group_switch || !group_single) {
        fprintf(stderr, PROG ": out of memory\n");
        goto out;
    }

    if (kind->pingpong(&b, o->warmup, err, sizeof(err)) != 0 ||
        kind->single(&b, o->warmup, err, sizeof(err)) != 0) {
        fprintf(stderr, PROG ": %s: warm-up: %s\n", kind->name, err);
        goto out;
    }

    uint64_t measured = 0;
    for (uint64_t g = 0; g < o->groups; g++) {
        double sum_switch = 0, sum_single = 0;
        for (uint64_t it = 0; it < o->iterations; it++) {
            yard_cswitch_ctxsw_t s0, s1, p0 = {0}, p1 = {0};
            if (read_switches(&b, countable, &s0, &p0) != 0)
                countable = false;
            double t0 = now_ns();
            int e = kind->pingpong(&b, o->switches, err, sizeof(err));
            double t1 = now_ns();
            if (e != 0) {
                fprintf(stderr, PROG ": %s: %s\n", kind->name, err);
                goto out;
            }
            if (read_switches(&b, countable, &s1, &p1) != 0)
                countable = false;
            measured += delta(&s0, &s1) + (countable ? delta(&p0, &p1) : 0);
            r->involuntary += s1.involuntary - s0.involuntary;
            if (countable)
                r->involuntary += p1.involuntary - p0.involuntary;

            double t2 = now_ns();
            e = kind->single(&b, o->switches, err, sizeof(err));
            double t3 = now_ns();
            if (e != 0) {
                fprintf(stderr, PROG ": %s: single: %s\n", kind->name, err);
                goto out;
            }
            sum_switch += t1 - t0;
            sum_single += t3 - t2;
        }
        group_switch[g] = sum_switch / (double)o->iterations;
        group_single[g] = sum_single / (double)o->iterations;
        group_direct[g] = (group_switch[g] / 2 - group_single[g]) / (double)o->switches;
    }

    /* Counters come from one extra, untimed run of each: per-task counters
     * are switched in and out with the task, which slows the very switch
     * being timed (by about 2x on the machine of docs/cswitch.md). */
    if (perf) {
        yard_cswitch_perf_start(&perf_self);
        if (perf_partner_ok)
            yard_cswitch_perf_start(&perf_partner);
        int e = kind->pingpong(&b, o->switches, err, sizeof(err));
        yard_cswitch_perf_stop(&perf_self);
        if (perf_partner_ok)
            yard_cswitch_perf_stop(&perf_partner);
        yard_cswitch_perf_accumulate(&perf_self, &r->sw);
        if (perf_partner_ok)
            yard_cswitch_perf_accumulate(&perf_partner, &r->sw);
        yard_cswitch_perf_start(&perf_self);
        if (e == 0)
            e = kind->single(&b, o->switches, err, sizeof(err));
        yard_cswitch_perf_stop(&perf_self);
        yard_cswitch_perf_accumulate(&perf_self, &r->single);
        if (e != 0) {
            fprintf(stderr, PROG ": %s: counted run: %s\n", kind->name, err);
            goto out;
        }
    }

    r->direct_min = INFINITY;
    r->direct_max = -INFINITY;
    for (uint64_t g = 0; g < o->groups; g++) {
        if (group_direct[g] < r->direct_min)
            r->direct_min = group_direct[g];
        if (group_direct[g] > r->direct_max)
            r->direct_max = group_direct[g];
    }
    r->direct_median = median(group_direct, o->groups);
    r->t_switch_ns = median(group_switch, o->groups);
    r->t_single_ns = median(group_single, o->groups);
    r->switches_expected = 2 * o->switches * o->groups * o->iterations;
    r->switches_measured = countable ? (int64_t)measured : -1;
    if (countable) {
        double diff = fabs((double)measured - (double)r->switches_expected);
        if (diff > 0.01 * (double)r->switches_expected) {
            r->flagged = true;
            snprintf(r->flag_reason, sizeof(r->flag_reason),
                     "kernel counted %" PRIu64 " switches, expected %" PRIu64 " (off by %.1f%%)",
                     measured, r->switches_expected,
                     100.0 * diff / (double)r->switches_expected);
        }
    }
    r->have_counters = perf && r->sw.have[YARD_CSWITCH_EV_INSTRUCTIONS];
    rc = 0;
out:
    free(group_direct);
    free(group_switch);
    free(group_single);
    if (perf) {
        yard_cswitch_perf_close(&perf_self);
        if (perf_partner_ok)
            yard_cswitch_perf_close(&perf_partner);
    }
    kind->stop(&b);
    yard_cswitch_array_free(b.array, array_bytes);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* output                                                                    */

static void json_num(double v)
{
    if (isfinite(v))
        printf("%.3f", v);
    else
        printf("null");
}

/* Misses per 1000 instructions, or NaN when either count is missing. */
static double pki(const yard_cswitch_counts_t *c, int ev)
{
    if (!c->have[ev] || !c->have[YARD_CSWITCH_EV_INSTRUCTIONS] ||
        c->v[YARD_CSWITCH_EV_INSTRUCTIONS] <= 0)
        return NAN;
    return 1000.0 * c->v[ev] / c->v[YARD_CSWITCH_EV_INSTRUCTIONS];
}

static double ipc(const yard_cswitch_counts_t *c)
{
    if (!c->have[YARD_CSWITCH_EV_CYCLES] || !c->have[YARD_CSWITCH_EV_INSTRUCTIONS] ||
        c->v[YARD_CSWITCH_EV_CYCLES] <= 0)
        return NAN;
    return c->v[YARD_CSWITCH_EV_INSTRUCTIONS] / c->v[YARD_CSWITCH_EV_CYCLES];
}

static void json_counters(const yard_cswitch_counts_t *c, bool have)
{
    if (!have) {
        printf("null");
        return;
    }
    printf("{\"instructions\": ");
    json_num(c->have[YARD_CSWITCH_EV_INSTRUCTIONS] ? c->v[YARD_CSWITCH_EV_INSTRUCTIONS] : NAN);
    printf(", \"cycles\": ");
    json_num(c->have[YARD_CSWITCH_EV_CYCLES] ? c->v[YARD_CSWITCH_EV_CYCLES] : NAN);
    printf(", \"ipc\": ");
    json_num(ipc(c));
    for (int ev = YARD_CSWITCH_EV_L1D_MISS; ev < YARD_CSWITCH_NEV; ev++) {
        printf(", \"%s_pki\": ", yard_cswitch_ev_names[ev]);
        json_num(pki(c, ev));
    }
    printf("}");
}

static void print_json(const struct opts *o, const struct env *env, const struct result *r,
                       bool first)
{
    printf("%s\n  {\"kind\": \"%s\", \"array_bytes\": %" PRIu64 ", \"stride_bytes\": %" PRIu64
           ", \"direct_ns\": ",
           first ? "" : ",", r->kind, r->array_bytes, r->stride_bytes);
    json_num(r->direct_median);
    printf(", \"direct_ns_median\": ");
    json_num(r->direct_median);
    printf(", \"direct_ns_min\": ");
    json_num(r->direct_min);
    printf(", \"direct_ns_max\": ");
    json_num(r->direct_max);
    printf(", \"t_switch_ns\": ");
    json_num(r->t_switch_ns);
    printf(", \"t_single_ns\": ");
    json_num(r->t_single_ns);
    printf(", \"switches_per_run\": %" PRIu64 ", \"switches_expected\": %" PRIu64
           ", \"switches_measured\": ",
           2 * o->switches, r->switches_expected);
    if (r->switches_measured >= 0)
        printf("%" PRId64, r->switches_measured);
    else
        printf("null");
    printf(", \"involuntary_switches\": %" PRIu64 ", \"flagged\": %s, \"flag_reason\": ",
           r->involuntary, r->flagged ? "true" : "false");
    if (r->flagged)
        printf("\"%s\"", r->flag_reason);
    else
        printf("null");
    printf(", \"n\": %" PRIu64 ", \"groups\": %" PRIu64 ", \"iterations\": %" PRIu64
           ", \"warmup\": %" PRIu64 ", \"cpu\": %d, \"sched_fifo\": %s, \"counters\": ",
           o->switches, o->groups, o->iterations, o->warmup, env->cpu,
           env->fifo ? "true" : "false");
    json_counters(&r->sw, r->have_counters);
    printf(", \"counters_single\": ");
    json_counters(&r->single, r->have_counters && r->single.have[YARD_CSWITCH_EV_INSTRUCTIONS]);
    printf("}");
    fflush(stdout);
}

static void csv_num(double v)
{
    if (isfinite(v))
        printf(",%.3f", v);
    else
        printf(",");
}

static void print_csv_header(void)
{
    printf("kind,array_bytes,stride_bytes,direct_ns,direct_ns_median,direct_ns_min,direct_ns_max,"
           "t_switch_ns,t_single_ns,switches_per_run,switches_expected,switches_measured,"
           "involuntary_switches,flagged,n,groups,iterations,warmup,cpu,sched_fifo,ipc");
    for (int ev = YARD_CSWITCH_EV_L1D_MISS; ev < YARD_CSWITCH_NEV; ev++)
        printf(",%s_pki", yard_cswitch_ev_names[ev]);
    printf("\n");
}

static void print_csv(const struct opts *o, const struct env *env, const struct result *r)
{
    printf("%s,%" PRIu64 ",%" PRIu64, r->kind, r->array_bytes, r->stride_bytes);
    csv_num(r->direct_median);
    csv_num(r->direct_median);
    csv_num(r->direct_min);
    csv_num(r->direct_max);
    csv_num(r->t_switch_ns);
    csv_num(r->t_single_ns);
    printf(",%" PRIu64 ",%" PRIu64 ",", 2 * o->switches, r->switches_expected);
    if (r->switches_measured >= 0)
        printf("%" PRId64, r->switches_measured);
    printf(",%" PRIu64 ",%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%d,%s",
           r->involuntary, r->flagged ? "true" : "false", o->switches, o->groups, o->iterations,
           o->warmup, env->cpu, env->fifo ? "true" : "false");
    csv_num(r->have_counters ? ipc(&r->sw) : NAN);
    for (int ev = YARD_CSWITCH_EV_L1D_MISS; ev < YARD_CSWITCH_NEV; ev++)
        csv_num(r->have_counters ? pki(&r->sw, ev) : NAN);
    printf("\n");
    fflush(stdout);
}

static void print_table_header(const struct opts *o, const struct env *env)
{
    printf("# " PROG ": cpu %d, ", env->cpu);
    if (env->fifo)
        printf("SCHED_FIFO priority %d", env->fifo_priority);
    else
        printf("default scheduling (no SCHED_FIFO)");
    printf(", N = %" PRIu64 " round trips (%" PRIu64 " switches) per run, %" PRIu64
           " groups x %" PRIu64 " iterations, warm-up %" PRIu64 "\n",
           o->switches, 2 * o->switches, o->groups, o->iterations, o->warmup);
    printf("# direct = (t_switch/2 - t_single)/N: cost of one switch, median (min) across "
           "groups; rt = t_switch/N, single = t_single/N\n");
    printf("%-17s %8s %6s %11s %11s %10s %10s %21s %6s", "kind", "array", "stride", "direct ns",
           "min ns", "rt ns", "single ns", "switches meas/exp", "invol");
    if (env->counters)
        printf(" %5s %8s %8s %8s %8s", "ipc", "L1d/ki", "L1i/ki", "dTLB/ki", "iTLB/ki");
    printf("  flag\n");
    fflush(stdout);
}

static void table_num(int width, double v)
{
    if (isfinite(v))
        printf(" %*.2f", width, v);
    else
        printf(" %*s", width, "-");
}

static void print_table_row(const struct opts *o, const struct env *env, const struct result *r)
{
    char sw[48];
    if (r->switches_measured >= 0)
        snprintf(sw, sizeof(sw), "%" PRId64 "/%" PRIu64, r->switches_measured,
                 r->switches_expected);
    else
        snprintf(sw, sizeof(sw), "-/%" PRIu64, r->switches_expected);
    printf("%-17s %8" PRIu64 " %6" PRIu64 " %11.2f %11.2f %10.2f %10.2f %21s %6" PRIu64, r->kind,
           r->array_bytes, r->stride_bytes, r->direct_median, r->direct_min,
           r->t_switch_ns / (double)o->switches, r->t_single_ns / (double)o->switches, sw,
           r->involuntary);
    if (env->counters) {
        table_num(5, r->have_counters ? ipc(&r->sw) : NAN);
        for (int ev = YARD_CSWITCH_EV_L1D_MISS; ev < YARD_CSWITCH_NEV; ev++)
            table_num(8, r->have_counters ? pki(&r->sw, ev) : NAN);
    }
    printf("  %s\n", r->flagged ? r->flag_reason : "");
    fflush(stdout);
}

static void list_points(const struct opts *o)
{
    bool first = true;
    if (o->out == OUT_JSON)
        printf("[");
    else if (o->out == OUT_CSV)
        printf("kind,array_bytes,stride_bytes\n");
    for (size_t k = 0; k < NKINDS; k++) {
        if (!o->kind_selected[k])
            continue;
        for (size_t si = 0; si < o->nsizes; si++) {
            for (size_t ti = 0; ti < o->nstrides; ti++) {
                if (o->out == OUT_JSON)
                    printf("%s\n  {\"kind\": \"%s\", \"array_bytes\": %" PRIu64
                           ", \"stride_bytes\": %" PRIu64 "}",
                           first ? "" : ",", kinds[k].name, o->sizes[si], o->strides[ti]);
                else if (o->out == OUT_CSV)
                    printf("%s,%" PRIu64 ",%" PRIu64 "\n", kinds[k].name, o->sizes[si],
                           o->strides[ti]);
                else
                    printf("%-17s %8" PRIu64 " %6" PRIu64 "\n", kinds[k].name, o->sizes[si],
                           o->strides[ti]);
                first = false;
            }
        }
    }
    if (o->out == OUT_JSON)
        printf("\n]\n");
}

int main(int argc, char **argv)
{
    struct opts o;
    parse_args(argc, argv, &o);

    /* A partner that dies must show up as an error on write, not kill us. */
    signal(SIGPIPE, SIG_IGN);

    if (o.list_points) {
        list_points(&o);
        return 0;
    }

    struct env env = {0};
    char allowed[256], err[256];
    int first_cpu = yard_cswitch_default_cpu(allowed, sizeof(allowed));
    if (first_cpu < 0) {
        fprintf(stderr, PROG ": sched_getaffinity: %s\n", strerror(errno));
        return 1;
    }
    if (o.cpu >= 0 && !yard_cswitch_cpu_allowed(o.cpu))
        yard_usage_exit(PROG, "--cpu: CPU %d is not in this process's affinity mask (allowed: %s)", o.cpu,
                    allowed);
    env.cpu = o.cpu >= 0 ? o.cpu : first_cpu;
    if (yard_cswitch_pin(env.cpu, err, sizeof(err)) != 0) {
        fprintf(stderr, PROG ": %s\n", err);
        return 1;
    }
    if (!o.no_fifo) {
        int prio = yard_cswitch_sched_fifo(err, sizeof(err));
        if (prio < 0) {
            fprintf(stderr, PROG ": SCHED_FIFO not permitted (%s); continuing with the default "
                            "policy\n", err);
        } else {
            env.fifo = true;
            env.fifo_priority = prio;
        }
    }
    if (!o.no_counters) {
        yard_cswitch_perf_t probe;
        char why[160];
        if (yard_cswitch_perf_open(&probe, 0, why, sizeof(why)) == 0) {
            env.counters = true;
            yard_cswitch_perf_close(&probe);
        } else {
            fprintf(stderr, PROG ": hardware counters: not supported (%s); continuing without\n",
                    why);
        }
    }

    if (o.out == OUT_JSON)
        printf("[");
    else if (o.out == OUT_CSV)
        print_csv_header();
    else
        print_table_header(&o, &env);

    bool first = true;
    int status = 0;
    for (size_t k = 0; k < NKINDS; k++) {
        if (!o.kind_selected[k])
            continue;
        for (size_t si = 0; si < o.nsizes; si++) {
            for (size_t ti = 0; ti < o.nstrides; ti++) {
                struct result r;
                if (measure_point(&o, &env, kinds[k].kind, o.sizes[si], o.strides[ti], &r) != 0) {
                    status = 1;
                    continue;
                }
                if (o.out == OUT_JSON)
                    print_json(&o, &env, &r, first);
                else if (o.out == OUT_CSV)
                    print_csv(&o, &env, &r);
                else
                    print_table_row(&o, &env, &r);
                first = false;
            }
        }
    }
    if (o.out == OUT_JSON)
        printf("\n]\n");
    return status;
}
