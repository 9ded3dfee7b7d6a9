/* Linux-only: sched_getaffinity. What a port uses instead: docs/portability.md. */
/* yard-load: the load generator. `yard-load MODE --target HOST:PORT ...`;
 * see --help and docs/load.md. This file holds what every mode shares: the
 * common flags, the list of modes, the threads and the run. What a mode
 * accepts, checks, measures and reports is in its own file. */
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET */

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "load.h"
#include "yard/cli.h"
#include "yard/tls.h"
#include "yard/clock.h"


/* The modes, in the order --help lists them; adding one is its file, one
 * line here and one in CMakeLists.txt. */
extern const load_mode_t load_mode_echo, load_mode_counter, load_mode_rate, load_mode_http,
    load_mode_chat, load_mode_handshake;
static const load_mode_t *const modes[] = {
    &load_mode_echo,
    &load_mode_counter,
    &load_mode_rate,
    &load_mode_http,
    &load_mode_chat,
    &load_mode_handshake,
};
#define NMODES (sizeof modes / sizeof modes[0])


/* "1" or "1,2": the CPUs of --cpu, each a whole number below CPU_SETSIZE.
 * On an error, err says what was expected (without the flag's name). */
static int cpu_list_parse(const char *list, cpu_set_t *set, char *err, size_t errlen)
{
    char *copy = strdup(list), *save = NULL;
    if (!copy) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    CPU_ZERO(set);
    int rc = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && rc == 0;
         tok = strtok_r(NULL, ",", &save)) {
        long long v;
        if (yard_parse_int(tok, 0, CPU_SETSIZE - 1, &v) < 0) {
            snprintf(err, errlen, "expected a whole number from 0 to %d, got '%s'",
                     CPU_SETSIZE - 1, tok);
            rc = -1;
        } else {
            CPU_SET((int)v, set);
        }
    }
    free(copy);
    return rc;
}

static void pin_cpus(const char *list)
{
    cpu_set_t set;
    char err[256];
    if (cpu_list_parse(list, &set, err, sizeof err) < 0)
        yard_usage_exit("yard-load", "--cpu: %s", err); /* checked when parsed: not reached */
    if (sched_setaffinity(0, sizeof set, &set) < 0) {
        fprintf(stderr, "yard-load: --cpu %s: sched_setaffinity: %s\n", list, strerror(errno));
        exit(1);
    }
}

/* The common flags' checks that a plain type cannot say. */

/* --cpu: the list is checked now, so that a typo is a usage error, but the
 * pinning waits until every flag has passed. */
static int parse_cpu(const char *text, void *field, char *err, size_t errlen)
{
    cpu_set_t set;
    if (cpu_list_parse(text, &set, err, errlen) < 0)
        return -1;
    *(const char **)field = text;
    return 0;
}

/* --duration and --timeout: a run of no time, or a timeout that fires at
 * once, is a mistake, not a request. */
static int parse_positive_duration(const char *text, void *field, char *err, size_t errlen)
{
    uint64_t ns;
    if (yard_parse_duration_ns(text, YARD_NS_PER_S, &ns) < 0 || !ns) {
        snprintf(err, errlen, "expected a duration above 0 such as 10s or 500ms, got '%s'", text);
        return -1;
    }
    *(uint64_t *)field = ns;
    return 0;
}

static int parse_rate(const char *text, void *field, char *err, size_t errlen)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !(v > 0) || v > 1e9) {
        snprintf(err, errlen, "expected requests per second over all connections (> 0), got '%s'",
                 text);
        return -1;
    }
    *(double *)field = v;
    return 0;
}

/* --start-at: seconds since the epoch (a fraction allowed); whether it is
 * near enough is checked once every flag has passed. */
static int parse_start_at(const char *text, void *field, char *err, size_t errlen)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !(v > 0)) {
        snprintf(err, errlen, "expected seconds since the epoch such as 1795480000.5, got '%s'",
                 text);
        return -1;
    }
    *(double *)field = v;
    return 0;
}

#define COMMON(member) YARD_OPT_FIELD(load_opts_t, member)

static const yard_opt_choice_t io_modes[] = {
    {.name = "auto", .value = LOAD_IO_AUTO},
    {.name = "epoll", .value = LOAD_IO_EPOLL},
    {.name = "uring", .value = LOAD_IO_URING},
    {.name = NULL}};
#define MAX_CONNECTIONS 1000000

/* Every mode takes these; a mode's prepare hook may refuse some of them
 * (rate: --rate, --pipeline) or need them (chat: --rate). --users and --ops
 * are other names of --connections and --messages: entries of their own
 * that fill the same fields. */
static const yard_opt_t common_opts[] = {
    {.name = "target", .form = "HOST:PORT", .type = YARD_OPT_STRING, COMMON(target_text),
     .required = "the server to load",
     .help = "the server: a numeric IPv4 address, [IPv6] or localhost; tls:HOST:PORT (as "
             "yard-serve writes a TLS listener) is the same as --tls"},
    {.name = "connections", .form = "N", .type = YARD_OPT_INT, COMMON(connections), .min = 1,
     .max = MAX_CONNECTIONS, .def = "1", .help = "concurrent connections"},
    {.name = "users", .form = "N", .type = YARD_OPT_INT, COMMON(connections), .min = 1,
     .max = MAX_CONNECTIONS, .help = "the same as --connections"},
    {.name = "messages", .form = "M", .type = YARD_OPT_INT, COMMON(messages), .min = 0,
     .max = LLONG_MAX, .def = "1000", .help = "requests per connection; --ops is the same"},
    {.name = "ops", .form = "M", .type = YARD_OPT_INT, COMMON(messages), .min = 0,
     .max = LLONG_MAX, .help = "the same as --messages"},
    {.name = "duration", .form = "DUR", .type = YARD_OPT_CUSTOM, COMMON(duration_ns),
     .parse = parse_positive_duration, .help = "run for DUR instead of --messages"},
    {.name = "rate", .form = "R", .type = YARD_OPT_CUSTOM, COMMON(rate), .parse = parse_rate,
     .help = "open loop, R requests/s over all connections; latency counts from each request's "
             "due time (no coordinated omission). Default: closed loop"},
    {.name = "pipeline", .form = "K", .type = YARD_OPT_INT, COMMON(pipeline), .min = 1,
     .max = 4096, .def = "1", .help = "up to K requests outstanding per connection"},
    {.name = "threads", .form = "T", .type = YARD_OPT_INT, COMMON(threads), .min = 1, .max = 256,
     .def = "1",
     .help = "generator threads, each with its own epoll loop and share of the connections"},
    {.name = "io", .form = "MODE", .type = YARD_OPT_ENUM, COMMON(io), .choices = io_modes,
     .def = "auto",
     .help = "echo, counter, http: 'uring' submits sends and takes replies through an io_uring "
             "(multishot receive, one system call per loop turn), 'epoll' waits for readiness "
             "and reads and sends itself, 'auto' uses uring where the kernel allows it"},
    {.name = "timeout", .form = "DUR", .type = YARD_OPT_CUSTOM, COMMON(timeout_ns),
     .parse = parse_positive_duration, .def = "10s",
     .help = "give up after DUR without progress"},
    {.name = "cpu", .form = "LIST", .type = YARD_OPT_CUSTOM, COMMON(cpu), .parse = parse_cpu,
     .help = "pin the generator to these CPUs (e.g. 1 or 1,2)"},
    {.name = "hist-out", .form = "FILE", .type = YARD_OPT_STRING, COMMON(hist_out),
     .help = "write the latency histogram in HdrHistogram's percentile-distribution format "
             "(microseconds)"},
    {.name = "hist-log", .form = "FILE", .type = YARD_OPT_STRING, COMMON(hist_log),
     .help = "echo, counter, http: write an HdrHistogram interval log of the window's "
             "latencies (one histogram per second, nanoseconds), which logs from other "
             "generators add to exactly"},
    {.name = "start-at", .form = "EPOCH_S", .type = YARD_OPT_CUSTOM, COMMON(start_at),
     .parse = parse_start_at,
     .help = "echo, counter, http: connect, then start the window at this wall-clock time "
             "(seconds since the epoch), so that generators on several hosts start together"},
    {.name = "tls", .type = YARD_OPT_SWITCH, COMMON(tls),
     .help = "every mode: speak TLS (a --tls-listen port, docs/tls.md); each connection's "
             "handshake is part of connecting, timed and counted in the report's tls figures"},
    {.name = "tls-ca", .form = "FILE", .type = YARD_OPT_STRING, COMMON(tls_ca),
     .help = "a TLS target: trust its certificate when FILE's CA signed it (default: the "
             "system's CAs); its name must be the target's HOST. No effect on a plain target"},
    {.name = "tls-insecure", .type = YARD_OPT_SWITCH, COMMON(tls_insecure),
     .help = "a TLS target: do not check its certificate. No effect on a plain target"},
    {.name = "json", .type = YARD_OPT_SWITCH, COMMON(json),
     .help = "print one JSON object instead of the summary"},
    {.name = "help", .type = YARD_OPT_SWITCH, COMMON(help), .short_name = 'h',
     .help = "show this help"},
    YARD_OPT_END,
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: yard-load MODE --target HOST:PORT [options]\n"
            "\n"
            "Modes:\n");
    for (size_t i = 0; i < NMODES; i++)
        fprintf(f, "  %-8s %s\n", modes[i]->name, modes[i]->summary);
    fprintf(f, "\nCommon options (a mode's section below says where it differs):\n");
    yard_opt_help(f, common_opts, NULL);
    for (size_t i = 0; i < NMODES; i++) {
        if (!yard_opt_count(modes[i]->notes) && !yard_opt_count(modes[i]->opts))
            continue;
        fprintf(f, "\n%s options:\n", modes[i]->name);
        yard_opt_help(f, modes[i]->notes, NULL);
        yard_opt_help(f, modes[i]->opts, NULL);
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
        if (yard_opt_find(modes[i]->opts, name))
            owners[n++] = modes[i];
    char msg[512];
    size_t len = 0;
    if (n == 1) {
        size_t count = yard_opt_count(owners[0]->opts);
        for (size_t k = 0; k < count; k++)
            len += (size_t)snprintf(msg + len, sizeof msg - len, "%s--%s",
                                    k == 0 ? "" : k + 1 == count ? " and " : ", ",
                                    owners[0]->opts[k].name);
        snprintf(msg + len, sizeof msg - len, " belong%s to the %s mode, not %s",
                 count == 1 ? "s" : "", owners[0]->name, mode->name);
    } else {
        len = (size_t)snprintf(msg, sizeof msg, "--%s belongs to the ", name);
        for (size_t k = 0; k < n; k++)
            len += (size_t)snprintf(msg + len, sizeof msg - len, "%s%s",
                                    k == 0 ? "" : k + 1 == n ? " and " : ", ", owners[k]->name);
        snprintf(msg + len, sizeof msg - len, " modes, not %s", mode->name);
    }
    yard_usage_exit("yard-load", "%s", msg);
}

static void defaults_or_exit(const yard_opt_t *opts, void *settings)
{
    char err[512];
    if (yard_opt_defaults(opts, settings, err, sizeof err) < 0) {
        fprintf(stderr, "yard-load: %s\n", err); /* a mistake in a table */
        exit(1);
    }
}

static void check_required(const yard_opt_t *opts, const bool *given)
{
    for (size_t i = 0; opts && opts[i].name; i++)
        if (opts[i].required && !given[i])
            yard_usage_exit("yard-load", "--%s %s is required (%s)", opts[i].name, opts[i].form ? opts[i].form : "",
                        opts[i].required);
}

/* Parse the flags after the mode (argv[0] is the mode) into o and the
 * mode's settings. Every mode's table is scanned, so that another mode's
 * flag is told apart from a typo; such a flag is reported only once every
 * value and the target have passed their checks. */
static void parse_flags(int argc, char **argv, const load_mode_t *mode, load_opts_t *o)
{
    const yard_opt_t *tables[NMODES + 1];
    tables[0] = common_opts;
    for (size_t i = 0; i < NMODES; i++)
        tables[i + 1] = modes[i]->opts;
    o->settings = calloc(1, mode->settings_size ? mode->settings_size : 1);
    yard_opt_arg_t *args = calloc((size_t)argc + 1, sizeof *args);
    if (!o->settings || !args) {
        fprintf(stderr, "yard-load: out of memory\n");
        exit(1);
    }
    defaults_or_exit(common_opts, o);
    defaults_or_exit(mode->opts, o->settings);
    char err[512];
    size_t nargs;
    if (yard_opt_scan(argc, argv, tables, NMODES + 1, args, &nargs, err, sizeof err) < 0)
        yard_usage_exit("yard-load", "%s", err);
    bool given[yard_opt_count(common_opts) + 1];
    memset(given, 0, sizeof given);
    const char *foreign = NULL; /* the first flag of another mode */
    for (size_t i = 0; i < nargs; i++) {
        const yard_opt_t *opt = yard_opt_find(common_opts, args[i].opt->name);
        void *settings = o;
        if (opt) {
            given[opt - common_opts] = true;
        } else if ((opt = yard_opt_find(mode->opts, args[i].opt->name))) {
            settings = o->settings;
        } else {
            if (!foreign)
                foreign = args[i].opt->name;
            continue;
        }
        if (yard_opt_set(opt, settings, args[i].value, err, sizeof err) < 0)
            yard_usage_exit("yard-load", "--%s: %s", opt->name, err);
        /* As soon as it comes: help for whatever follows it. */
        if (o->help) {
            usage(stdout);
            exit(0);
        }
    }
    free(args);
    check_required(common_opts, given);
    /* "tls:HOST:PORT", as yard-serve's first line writes a TLS listener:
     * the same as --tls. */
    if (!strncmp(o->target_text, "tls:", 4)) {
        o->target_text += 4;
        o->tls = true;
    }
    if (yard_addr_parse(o->target_text, &o->target, err, sizeof err) < 0)
        yard_usage_exit("yard-load", "--target: %s", err);
    if (foreign)
        misplaced(foreign, mode);
}

/* --tls (every mode takes it): its flags together, and the context
 * every thread's connections share (exit 1 when a file does not load). */
static void check_tls(load_opts_t *o)
{
    if (!o->tls) /* --tls-ca and --tls-insecure say how to trust a TLS target: none here */
        return;
    if (o->io == LOAD_IO_URING)
        yard_usage_exit("yard-load", "--tls runs on --io epoll (the ring does not carry TLS)%s",
                        "");
    o->io = LOAD_IO_EPOLL;
    if (o->tls_ca && o->tls_insecure)
        yard_usage_exit("yard-load", "--tls-ca and --tls-insecure exclude each other%s", "");
    /* HOST of HOST:PORT, without an IPv6 address's brackets. */
    const char *t = o->target_text, *colon = strrchr(t, ':');
    size_t n = colon ? (size_t)(colon - t) : strlen(t);
    if (n >= 2 && t[0] == '[' && t[n - 1] == ']')
        t++, n -= 2;
    snprintf(o->tls_host, sizeof o->tls_host, "%.*s", (int)n, t);
    char err[512];
    if (yard_tls_client_ctx_new(&o->tls_ctx, o->tls_ca, o->tls_insecure, NULL, NULL, err,
                                sizeof err) < 0) {
        fprintf(stderr, "yard-load: --tls: %s\n", err);
        exit(1);
    }
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
    yard_hist_init(&r->tls_handshake);
    r->mode = part;
    if (part && mode->result_init)
        mode->result_init(part);
    return r;
}

static void result_free(load_result_t *r)
{
    if (r) {
        free(r->mode);
        load_intervals_free(r);
    }
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

static void merge(const load_mode_t *mode, load_result_t *into, load_result_t *from, bool first)
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
    into->unsent += from->unsent;
    if (first || (from->t0_real > 0 && from->t0_real < into->t0_real))
        into->t0_real = from->t0_real;
    if (load_intervals_merge(into, (load_result_t *)from) < 0)
        load_error(into, "out of memory merging the interval logs");
    if (!into->io)
        into->io = from->io;
    into->tls_full += from->tls_full;
    into->tls_resumed += from->tls_resumed;
    into->tls_failures += from->tls_failures;
    into->setup_cpu_s += from->setup_cpu_s;
    yard_hist_merge(&into->tls_handshake, &from->tls_handshake);
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
    /* The common table's defaults fill the rest; size is what a report
     * shows for the modes without --size. Static: the mode's settings, and
     * what they point to, live as long as the process. */
    static load_opts_t o = {.size = 16};
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 2 || argv[1][0] == '-')
        yard_usage_exit("yard-load", "a MODE comes first (echo)");
    o.mode = argv[1];
    const load_mode_t *mode = NULL;
    for (size_t i = 0; i < NMODES; i++)
        if (!strcmp(modes[i]->name, o.mode))
            mode = modes[i];
    if (!mode)
        yard_usage_exit("yard-load", "unknown mode '%s' (try --help)", o.mode);
    parse_flags(argc - 1, argv + 1, mode, &o);
    char err[512];
    err[0] = 0;
    if (o.io != LOAD_IO_AUTO && !mode->engine)
        yard_usage_exit("yard-load", "--io applies to echo, counter and http, not to %s", mode->name);
    check_tls(&o);
    if ((o.hist_log || o.start_at > 0) && !mode->engine)
        yard_usage_exit("yard-load", "--%s applies to echo, counter and http, not to %s",
                    o.hist_log ? "hist-log" : "start-at", mode->name);
    if (o.start_at > 0) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        double ahead = o.start_at - ((double)now.tv_sec + (double)now.tv_nsec / 1e9);
        if (ahead < -1.0)
            yard_usage_exit("yard-load", "--start-at %.3f is %.1f s in the past", o.start_at, -ahead);
        if (ahead > 3600.0)
            yard_usage_exit("yard-load", "--start-at %.3f is %.0f s ahead (more than an hour)", o.start_at, ahead);
    }
    /* Opened now, so that an unwritable path fails before the run, not after. */
    FILE *hist_log = NULL;
    char hist_tmp[4096];
    if (o.hist_log) {
        snprintf(hist_tmp, sizeof hist_tmp, "%s.tmp", o.hist_log);
        hist_log = fopen(hist_tmp, "w");
        if (!hist_log) {
            fprintf(stderr, "yard-load: --hist-log %s: %s\n", o.hist_log, strerror(errno));
            return 1;
        }
    }
    if (mode->prepare && mode->prepare(&o, err, sizeof err) < 0)
        yard_usage_exit("yard-load", "%s", err);
    if (o.threads > o.connections)
        yard_usage_exit("yard-load", "--threads: more threads than connections (give fewer threads)");
    if (o.cpu)
        pin_cpus(o.cpu);
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
    /* The window's CPU: what connecting (TLS handshakes included) cost
     * before it is reported apart (generator_setup_cpu_s). */
    double cpu_s = cpu_seconds() - r->setup_cpu_s;
    if (rc < 0) {
        fprintf(stderr, "yard-load: %s\n", r->first_error);
        if (hist_log) {
            fclose(hist_log);
            unlink(hist_tmp);
        }
        result_free(r);
        return 1;
    }
    if (hist_log) {
        int bad = load_hist_log_write(hist_log, r, err, sizeof err);
        if (!bad && (fflush(hist_log) != 0 || ferror(hist_log))) {
            snprintf(err, sizeof err, "%s", strerror(errno));
            bad = -1;
        }
        if (fclose(hist_log) != 0 && !bad) {
            snprintf(err, sizeof err, "%s", strerror(errno));
            bad = -1;
        }
        if (!bad && rename(hist_tmp, o.hist_log) < 0) {
            snprintf(err, sizeof err, "rename: %s", strerror(errno));
            bad = -1;
        }
        if (bad) {
            fprintf(stderr, "yard-load: --hist-log %s: %s\n", o.hist_log, err);
            unlink(hist_tmp);
            result_free(r);
            return 1;
        }
    }
    load_report(mode, &o, r, cpu_s);
    if (r->errors && !o.json)
        fprintf(stderr, "yard-load: %llu errors; first: %s\n", (unsigned long long)r->errors,
                r->first_error);
    int status = r->errors || r->tls_failures ? 1 : 0;
    result_free(r);
    yard_tls_ctx_free(o.tls_ctx);
    return status;
}
