/* yard-load: the load generator. `yard-load MODE --target HOST:PORT ...`;
 * see --help and docs/load.md. This file holds what every mode shares: the
 * common flags, the list of modes, the threads and the run. What a mode
 * accepts, checks, measures and reports is in its own file. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "load.h"
#include "yard/clock.h"

#define EXIT_USAGE 2

/* The modes, in the order --help lists them; adding one is its file, one
 * line here and one in CMakeLists.txt. */
extern const load_mode_t load_mode_echo, load_mode_counter, load_mode_rate, load_mode_http,
    load_mode_chat;
static const load_mode_t *const modes[] = {
    &load_mode_echo,
    &load_mode_counter,
    &load_mode_rate,
    &load_mode_http,
    &load_mode_chat,
};
#define NMODES (sizeof modes / sizeof modes[0])

static _Noreturn void usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "yard-load: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'yard-load --help'.\n");
    exit(EXIT_USAGE);
}

unsigned long long load_parse_count(const char *flag, const char *s, unsigned long long min,
                                    unsigned long long max)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
        fprintf(stderr, "yard-load: %s: expected a whole number from %llu to %llu, got '%s'\n",
                flag, min, max, s);
        exit(EXIT_USAGE);
    }
    return v;
}

static void pin_cpus(const char *list)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    char *copy = strdup(list), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        CPU_SET((int)load_parse_count("--cpu", tok, 0, CPU_SETSIZE - 1), &set);
    free(copy);
    if (sched_setaffinity(0, sizeof set, &set) < 0) {
        fprintf(stderr, "yard-load: --cpu %s: sched_setaffinity: %s\n", list, strerror(errno));
        exit(1);
    }
}

/* The common flags' parsers. */

static int parse_target(load_opts_t *o, const char *arg, char *err, size_t errlen)
{
    o->target_text = arg;
    return 0;
}

static int parse_connections(load_opts_t *o, const char *arg, char *err, size_t errlen)
{
    o->connections = (int)load_parse_count("--connections", arg, 1, 1000000);
    return 0;
}

static int parse_messages(load_opts_t *o, const char *arg, char *err, size_t errlen)
{
    o->messages = load_parse_count("--messages", arg, 0, ULLONG_MAX / 2);
    return 0;
}

static int parse_duration(load_opts_t *o, const char *arg, char *err, size_t errlen)
{
    if (yard_parse_duration_ns(arg, YARD_NS_PER_S, &o->duration_ns) < 0 || !o->duration_ns) {
        snprintf(err, errlen, "--duration: expected a duration such as 5s or 500ms, got '%s'", arg);
        return -1;
    }
    return 0;
}

static int parse_rate(load_opts_t *o, const char *arg, char *err, size_t errlen)
{
    char *end;
    o->rate = strtod(arg, &end);
    if (end == arg || *end || !(o->rate > 0) || o->rate > 1e9) {
        snprintf(err, errlen,
                 "--rate: expected requests per second over all connections (> 0), got '%s'", arg);
        return -1;
    }
    return 0;
}

static int parse_pipeline(load_opts_t *o, const char *arg, char *err, size_t errlen)
{
    o->pipeline = (size_t)load_parse_count("--pipeline", arg, 1, 4096);
    return 0;
}

static int parse_threads(load_opts_t *o, const char *arg, char *err, size_t errlen)
{
    o->threads = (int)load_parse_count("--threads", arg, 1, 256);
    return 0;
}

static int parse_timeout(load_opts_t *o, const char *arg, char *err, size_t errlen)
{
    if (yard_parse_duration_ns(arg, YARD_NS_PER_S, &o->timeout_ns) < 0 || !o->timeout_ns) {
        snprintf(err, errlen, "--timeout: expected a duration such as 10s or 500ms, got '%s'", arg);
        return -1;
    }
    return 0;
}

static int parse_cpu(load_opts_t *o, const char *arg, char *err, size_t errlen)
{
    pin_cpus(arg);
    return 0;
}

static int parse_hist_out(load_opts_t *o, const char *arg, char *err, size_t errlen)
{
    o->hist_out = arg;
    return 0;
}

static int parse_json(load_opts_t *o, const char *arg, char *err, size_t errlen)
{
    o->json = true;
    return 0;
}

/* Every mode takes these; a mode's prepare hook may refuse some of them
 * (rate: --rate, --pipeline) or need them (chat: --rate). */
static const load_flag_t common_flags[] = {
    {"target", "HOST:PORT", "the server (numeric IPv4, [IPv6] or localhost)", parse_target},
    {"connections", "N", "concurrent connections (default 1)", parse_connections},
    {"users", "N", "the same as --connections", parse_connections},
    {"messages", "M", "requests per connection (default 1000); --ops is the same",
     parse_messages},
    {"ops", "M", "the same as --messages", parse_messages},
    {"duration", "DUR", "run for DUR instead of --messages", parse_duration},
    {"rate", "R",
     "open loop, R requests/s over all connections; latency\n"
     "counts from each request's due time (no coordinated\n"
     "omission). Default: closed loop",
     parse_rate},
    {"pipeline", "K", "up to K requests outstanding per connection (default 1)", parse_pipeline},
    {"threads", "T",
     "generator threads, each with its own epoll loop and\n"
     "share of the connections (default 1)",
     parse_threads},
    {"timeout", "DUR", "give up after DUR without progress (default 10s)", parse_timeout},
    {"cpu", "LIST", "pin the generator to these CPUs (e.g. 1 or 1,2)", parse_cpu},
    {"hist-out", "FILE",
     "write the latency histogram in HdrHistogram's\n"
     "percentile-distribution format (microseconds)",
     parse_hist_out},
    {"json", NULL, "print one JSON object instead of the summary", parse_json},
    {NULL, NULL, NULL, NULL},
};

static const load_flag_t *find_flag(const load_flag_t *table, const char *name)
{
    for (const load_flag_t *f = table; f && f->name; f++)
        if (f->parse && !strcmp(f->name, name))
            return f;
    return NULL;
}

/* "  --name ARG          help", the help's continuation lines aligned. */
static void print_flags(FILE *f, const load_flag_t *table)
{
    for (const load_flag_t *fl = table; fl->name; fl++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", fl->name, fl->arg ? " " : "",
                 fl->arg ? fl->arg : "");
        fprintf(f, "  %-19s ", left);
        for (const char *h = fl->help; *h; h++) {
            fputc(*h, f);
            if (*h == '\n')
                fprintf(f, "%22s", "");
        }
        fputc('\n', f);
    }
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: yard-load MODE --target HOST:PORT [options]\n"
            "\n"
            "Modes:\n");
    for (size_t i = 0; i < NMODES; i++)
        fprintf(f, "  %-8s %s\n", modes[i]->name, modes[i]->summary);
    fprintf(f, "\nCommon options (a mode's section below says where it differs):\n");
    print_flags(f, common_flags);
    fprintf(f, "  -h, --help          show this help\n");
    for (size_t i = 0; i < NMODES; i++) {
        if (!modes[i]->flags || !modes[i]->flags->name)
            continue;
        fprintf(f, "\n%s options:\n", modes[i]->name);
        print_flags(f, modes[i]->flags);
    }
    fprintf(f,
            "\n"
            "Exit status: 0 when every round trip succeeded, 1 on errors or when the\n"
            "target cannot be reached, 2 on a usage error.\n");
}

/* A flag of other modes only: say whose it is, and the owner's flags when
 * it is one mode's (the user may have mixed up the modes). */
static _Noreturn void misplaced(const char *name, const load_mode_t *mode)
{
    const load_mode_t *owners[NMODES];
    size_t n = 0;
    for (size_t i = 0; i < NMODES; i++)
        if (find_flag(modes[i]->flags, name))
            owners[n++] = modes[i];
    char msg[512];
    size_t len = 0, count = 0;
    if (n == 1) {
        const load_flag_t *fl;
        for (fl = owners[0]->flags; fl->name; fl++)
            count += fl->parse != NULL;
        size_t k = 0;
        for (fl = owners[0]->flags; fl->name; fl++) {
            if (!fl->parse)
                continue;
            len += (size_t)snprintf(msg + len, sizeof msg - len, "%s--%s",
                                    k == 0 ? "" : k + 1 == count ? " and " : ", ", fl->name);
            k++;
        }
        snprintf(msg + len, sizeof msg - len, " belong%s to the %s mode, not %s",
                 count == 1 ? "s" : "", owners[0]->name, mode->name);
    } else {
        len = (size_t)snprintf(msg, sizeof msg, "--%s belongs to the ", name);
        for (size_t k = 0; k < n; k++)
            len += (size_t)snprintf(msg + len, sizeof msg - len, "%s%s",
                                    k == 0 ? "" : k + 1 == n ? " and " : ", ", owners[k]->name);
        snprintf(msg + len, sizeof msg - len, " modes, not %s", mode->name);
    }
    usage_error("%s", msg);
}

/* getopt_long's table: the common flags and every mode's, each name once
 * (a flag of another mode is parsed so that it can be named). */
static struct option *long_options(void)
{
    size_t cap = 2;
    for (const load_flag_t *f = common_flags; f->name; f++)
        cap++;
    for (size_t i = 0; i < NMODES; i++)
        for (const load_flag_t *f = modes[i]->flags; f && f->name; f++)
            cap++;
    struct option *opts = calloc(cap, sizeof *opts);
    if (!opts) {
        fprintf(stderr, "yard-load: out of memory\n");
        exit(1);
    }
    size_t n = 0;
    opts[n++] = (struct option){"help", no_argument, NULL, 'h'};
    for (size_t i = 0; i <= NMODES; i++) {
        const load_flag_t *table = i == 0 ? common_flags : modes[i - 1]->flags;
        for (const load_flag_t *f = table; f && f->name; f++) {
            bool seen = false;
            for (size_t k = 0; k < n; k++)
                seen = seen || !strcmp(opts[k].name, f->name);
            if (seen || !f->parse)
                continue;
            opts[n] = (struct option){f->name, f->arg ? required_argument : no_argument, NULL,
                                      (int)(0x100 + n)};
            n++;
        }
    }
    return opts;
}

/* Parse argv[2..] into o (the mode's flags into the mode's options). */
static void parse_flags(int argc, char **argv, const load_mode_t *mode, load_opts_t *o)
{
    struct option *opts = long_options();
    const char *foreign = NULL; /* the first flag of another mode */
    char err[256];
    optind = 2;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            exit(0);
        }
        if (c == ':')
            usage_error("%s needs a value", argv[optind - 1]);
        if (c < 0x100)
            usage_error("unknown option '%s'", argv[optind - 1]);
        const char *name = opts[c - 0x100].name;
        const load_flag_t *f = find_flag(common_flags, name);
        if (!f)
            f = find_flag(mode->flags, name);
        if (!f) {
            if (!foreign)
                foreign = name;
            continue;
        }
        err[0] = 0;
        if (f->parse(o, optarg, err, sizeof err) < 0)
            usage_error("%s", err);
    }
    if (optind < argc)
        usage_error("unexpected argument '%s'", argv[optind]);
    if (!o->target_text)
        usage_error("--target HOST:PORT is required%s", "");
    if (yard_addr_parse(o->target_text, &o->target, err, sizeof err) < 0)
        usage_error("--target: %s", err);
    if (foreign)
        misplaced(foreign, mode);
    free(opts);
}

static load_result_t *result_new(const load_mode_t *mode)
{
    load_result_t *r = calloc(1, sizeof *r);
    void *part = mode->result_size ? calloc(1, mode->result_size) : NULL;
    if (!r || (mode->result_size && !part)) {
        free(r);
        free(part);
        return NULL;
    }
    yard_hist_init(&r->latency);
    r->mode = part;
    if (part && mode->result_init)
        mode->result_init(part);
    return r;
}

static void result_free(load_result_t *r)
{
    if (r)
        free(r->mode);
    free(r);
}

struct share {
    pthread_t tid;
    const load_mode_t *mode;
    load_opts_t o;
    load_result_t *r;
    int rc;
};

static void *share_main(void *arg)
{
    struct share *sh = arg;
    sh->rc = sh->mode->run(&sh->o, sh->r);
    return NULL;
}

static void merge(const load_mode_t *mode, load_result_t *into, const load_result_t *from,
                  bool first)
{
    into->messages += from->messages;
    into->errors += from->errors;
    into->bytes_sent += from->bytes_sent;
    into->bytes_received += from->bytes_received;
    if (first || from->start_ns < into->start_ns)
        into->start_ns = from->start_ns;
    if (from->end_ns > into->end_ns)
        into->end_ns = from->end_ns;
    yard_hist_merge(&into->latency, &from->latency);
    if (!into->first_error[0])
        memcpy(into->first_error, from->first_error, sizeof into->first_error);
    if (from->behind_max_ms > into->behind_max_ms)
        into->behind_max_ms = from->behind_max_ms;
    into->target_rate += from->target_rate;
    if (mode->merge)
        mode->merge(into->mode, from->mode, first);
}

/* --threads T: each thread gets its own loop and a contiguous share of the
 * connections (and of --rate, in proportion); the results are merged, the
 * histograms by adding counts. One thread runs on the main thread. */
static int run_threads(const load_mode_t *mode, const load_opts_t *o, load_result_t *r)
{
    if (o->threads == 1)
        return mode->run(o, r);
    int T = o->threads;
    struct share *sh = calloc((size_t)T, sizeof *sh);
    if (!sh) {
        load_error(r, "out of memory for %d threads", T);
        return -1;
    }
    int base = 0, rc = 0, started = 0;
    for (int t = 0; t < T; t++) {
        sh[t].mode = mode;
        sh[t].o = *o;
        sh[t].o.conn_base = base;
        sh[t].o.connections = o->connections / T + (t < o->connections % T);
        sh[t].o.rate = o->rate * sh[t].o.connections / o->connections;
        base += sh[t].o.connections;
        sh[t].r = result_new(mode);
        if (!sh[t].r) {
            load_error(r, "out of memory for %d threads", T);
            rc = -1;
            break;
        }
    }
    for (int t = 1; rc == 0 && t < T; t++) {
        int err = pthread_create(&sh[t].tid, NULL, share_main, &sh[t]);
        if (err) {
            load_error(r, "pthread_create: %s", strerror(err));
            rc = -1;
            break;
        }
        started = t;
    }
    if (rc == 0)
        share_main(&sh[0]);
    for (int t = 1; t <= started; t++)
        pthread_join(sh[t].tid, NULL);
    for (int t = 0; t < T; t++) {
        if (!sh[t].r)
            continue;
        merge(mode, r, sh[t].r, t == 0);
        if (sh[t].rc < 0)
            rc = -1;
        result_free(sh[t].r);
    }
    free(sh);
    return rc;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
    load_opts_t o = {.connections = 1, .messages = 1000, .size = 16,
                     .timeout_ns = 10 * YARD_NS_PER_S, .pipeline = 1, .threads = 1};
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 2 || argv[1][0] == '-')
        usage_error("a MODE comes first (%s)", "echo");
    o.mode = argv[1];
    const load_mode_t *mode = NULL;
    for (size_t i = 0; i < NMODES; i++)
        if (!strcmp(modes[i]->name, o.mode))
            mode = modes[i];
    if (!mode)
        usage_error("unknown mode '%s' (try --help)", o.mode);
    parse_flags(argc, argv, mode, &o);
    char err[512];
    err[0] = 0;
    if (mode->prepare && mode->prepare(&o, err, sizeof err) < 0)
        usage_error("%s", err);
    if (o.threads > o.connections)
        usage_error("--threads: more threads than connections (%s)", "give fewer threads");
    o.total_connections = o.connections;
    o.total_rate = o.rate;
    signal(SIGPIPE, SIG_IGN);

    load_result_t *r = result_new(mode);
    if (!r)
        return 1;
    int rc = mode->before ? mode->before(&o, r) : 0;
    if (rc == 0)
        rc = run_threads(mode, &o, r);
    if (rc == 0 && mode->after)
        rc = mode->after(&o, r);
    double cpu_s = cpu_seconds();
    if (rc < 0) {
        fprintf(stderr, "yard-load: %s\n", r->first_error);
        result_free(r);
        return 1;
    }
    load_report(mode, &o, r, cpu_s);
    if (r->errors && !o.json)
        fprintf(stderr, "yard-load: %llu errors; first: %s\n", (unsigned long long)r->errors,
                r->first_error);
    int status = r->errors ? 1 : 0;
    result_free(r);
    return status;
}
