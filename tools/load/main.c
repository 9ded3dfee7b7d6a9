/* yard-load: the load generator. `yard-load MODE --target HOST:PORT ...`;
 * see --help and docs/load.md. */
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

static const struct load_mode {
    const char *name;
    const char *summary;
    int (*run)(const load_opts_t *o, load_result_t *r);
    int (*before)(load_opts_t *o, load_result_t *r);      /* once, before every thread */
    int (*after)(const load_opts_t *o, load_result_t *r); /* once, after, on the merged result */
    bool request_response;                                /* --rate, --pipeline apply */
} modes[] = {
    {"echo", "request/response round trips (closed or open loop), every echoed byte checked",
     load_run_echo, NULL, NULL, true},
    {"counter", "the Eve atomic counter: reads and increments, every reply and the final count "
                "checked",
     load_run_counter, load_counter_before, load_counter_after, true},
    {"rate", "the papayaChat load: each connection sends its message at a constant bandwidth",
     load_run_rate, NULL, NULL, false},
    {"http", "the REST study's scenarios over keep-alive HTTP/1.1 (open or closed loop)",
     load_run_http, NULL, NULL, true},
    {"chat", "the chat service's fan-out: N logged-in members of one channel, --rate "
             "messages/s in total, delivery latency at every other member",
     load_run_chat, NULL, NULL, false},
};

static void init_result(load_result_t *r)
{
    yard_hist_init(&r->latency);
    for (int i = 0; i < LOAD_HTTP_ENDPOINTS; i++)
        yard_hist_init(&r->ep[i].latency);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: yard-load MODE --target HOST:PORT [options]\n"
            "\n"
            "Modes:\n");
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        fprintf(f, "  %-8s %s\n", modes[i].name, modes[i].summary);
    fprintf(f,
            "\n"
            "  --target HOST:PORT  the server (numeric IPv4, [IPv6] or localhost)\n"
            "  --connections N     concurrent connections (default 1)\n"
            "  --messages M        echo, counter: requests per connection (default 1000);\n"
            "                      --ops is the same\n"
            "  --duration DUR      echo, counter: run for DUR instead of --messages;\n"
            "                      rate: the measured window (required)\n"
            "  --rate R            echo, counter: open loop, R requests/s over all\n"
            "                      connections; latency counts from each request's\n"
            "                      due time (no coordinated omission). Default: closed\n"
            "                      loop\n"
            "  --pipeline K        echo, counter: up to K requests outstanding per\n"
            "                      connection (default 1)\n"
            "  --threads T         generator threads, each with its own epoll loop and\n"
            "                      share of the connections (default 1)\n"
            "  --scenario S        http: password, userinfo, longpoll, root or mix\n"
            "                      (default root)\n"
            "  --weights LIST      http mix: e.g. userinfo=3,password=1 (default: password,\n"
            "                      userinfo and root equally)\n"
            "  --users N           http: the same as --connections (one user each)\n"
            "  --users-csv FILE    http: 'username;password' per line (the study's file);\n"
            "                      default user<N> / pw<N>-secret\n"
            "  --think-time DUR    http, closed loop: pause after each reply (default 0)\n"
            "  --user-prefix P     chat: accounts are P0, P1, ... (default u)\n"
            "  --password-prefix Q chat: passwords are QP0, QP1, ... (default pw-)\n"
            "  --size S            echo: bytes per message (default 16)\n"
            "  --read-ratio R      counter: share of reads, 0..1 (default 0.5)\n"
            "  --bandwidth BW      rate: per connection, e.g. 1Mbps, 500kbps (bits) or\n"
            "                      125kBps, 1MBps (bytes)\n"
            "  --msg-rate R        rate: messages per second per connection (instead of\n"
            "                      --bandwidth)\n"
            "  --message TEXT      rate: what is sent (default 'message\\n'; \\n, \\t, \\\\\n"
            "                      are escapes)\n"
            "  --ramp-up DUR       rate: connections start over DUR, excluded from the\n"
            "                      measurement (default 1s)\n"
            "  --timeout DUR       give up after DUR without progress (default 10s)\n"
            "  --cpu LIST          pin the generator to these CPUs (e.g. 1 or 1,2)\n"
            "  --hist-out FILE     write the latency histogram in HdrHistogram's\n"
            "                      percentile-distribution format (microseconds)\n"
            "  --json              print one JSON object instead of the summary\n"
            "  -h, --help          show this help\n"
            "\n"
            "Exit status: 0 when every round trip succeeded, 1 on errors or when the\n"
            "target cannot be reached, 2 on a usage error.\n");
}

static _Noreturn void usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "yard-load: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'yard-load --help'.\n");
    exit(EXIT_USAGE);
}

static unsigned long long parse_count(const char *flag, const char *s, unsigned long long min,
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
        CPU_SET((int)parse_count("--cpu", tok, 0, CPU_SETSIZE - 1), &set);
    free(copy);
    if (sched_setaffinity(0, sizeof set, &set) < 0) {
        fprintf(stderr, "yard-load: --cpu %s: sched_setaffinity: %s\n", list, strerror(errno));
        exit(1);
    }
}

struct share {
    pthread_t tid;
    const struct load_mode *mode;
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

static void merge(load_result_t *into, const load_result_t *from, bool first)
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
    into->increments += from->increments;
    into->target_bps += from->target_bps;
    into->achieved_bps += from->achieved_bps;
    if (first || from->conn_min_bps < into->conn_min_bps)
        into->conn_min_bps = from->conn_min_bps;
    if (from->conn_max_bps > into->conn_max_bps)
        into->conn_max_bps = from->conn_max_bps;
    if (from->behind_max_ms > into->behind_max_ms)
        into->behind_max_ms = from->behind_max_ms;
    into->window_bytes += from->window_bytes;
    into->target_rate += from->target_rate;
    into->sent_msgs += from->sent_msgs;
    for (int i = 0; i < LOAD_HTTP_ENDPOINTS; i++) {
        load_endpoint_t *a = &into->ep[i];
        const load_endpoint_t *b = &from->ep[i];
        a->requests += b->requests;
        a->ok += b->ok;
        a->failed += b->failed;
        a->status_other += b->status_other;
        for (int k = 0; k < LOAD_STATUS_SLOTS && b->status_code[k]; k++)
            load_count_status(a, b->status_code[k], b->status_count[k]);
        yard_hist_merge(&a->latency, &b->latency);
    }
}

/* --threads T: each thread gets its own loop and a contiguous share of the
 * connections (and of --rate, in proportion); the results are merged, the
 * histograms by adding counts. One thread runs on the main thread. */
static int run_threads(const struct load_mode *mode, const load_opts_t *o, load_result_t *r)
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
        sh[t].r = calloc(1, sizeof *sh[t].r);
        if (!sh[t].r) {
            load_error(r, "out of memory for %d threads", T);
            rc = -1;
            break;
        }
        init_result(sh[t].r);
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
        merge(r, sh[t].r, t == 0);
        if (sh[t].rc < 0)
            rc = -1;
        free(sh[t].r);
    }
    free(sh);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"target", required_argument, NULL, 't'},  {"connections", required_argument, NULL, 'c'},
        {"messages", required_argument, NULL, 'm'}, {"size", required_argument, NULL, 's'},
        {"timeout", required_argument, NULL, 'T'}, {"cpu", required_argument, NULL, 'C'},
        {"hist-out", required_argument, NULL, 'H'}, {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},          {"ops", required_argument, NULL, 'm'},
        {"duration", required_argument, NULL, 'D'}, {"read-ratio", required_argument, NULL, 'R'},
        {"bandwidth", required_argument, NULL, 'B'}, {"msg-rate", required_argument, NULL, 'M'},
        {"message", required_argument, NULL, 'E'}, {"ramp-up", required_argument, NULL, 'U'},
        {"rate", required_argument, NULL, 'r'},    {"pipeline", required_argument, NULL, 'P'},
        {"threads", required_argument, NULL, 'N'}, {"scenario", required_argument, NULL, 'S'},
        {"weights", required_argument, NULL, 'W'}, {"users", required_argument, NULL, 'c'},
        {"users-csv", required_argument, NULL, 'F'}, {"think-time", required_argument, NULL, 'K'},
        {"user-prefix", required_argument, NULL, 'X'},
        {"password-prefix", required_argument, NULL, 'Y'},
        {NULL, 0, NULL, 0},
    };
    double msg_rate = 0;
    char *message = NULL;
    const char *weights = NULL;
    load_opts_t o = {.connections = 1, .messages = 1000, .size = 16, .read_ratio = 0.5,
                     .timeout_ns = 10 * YARD_NS_PER_S, .ramp_ns = YARD_NS_PER_S, .pipeline = 1,
                     .threads = 1};
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 2 || argv[1][0] == '-')
        usage_error("a MODE comes first (%s)", "echo");
    o.mode = argv[1];
    const struct load_mode *mode = NULL;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (!strcmp(modes[i].name, o.mode))
            mode = &modes[i];
    if (!mode)
        usage_error("unknown mode '%s' (try --help)", o.mode);
    optind = 2;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't': o.target_text = optarg; break;
        case 'c': o.connections = (int)parse_count("--connections", optarg, 1, 1000000); break;
        case 'm': o.messages = parse_count("--messages", optarg, 0, ULLONG_MAX / 2); break;
        case 's': o.size = (size_t)parse_count("--size", optarg, 1, 64u << 20); break;
        case 'T':
            if (yard_parse_duration_ns(optarg, YARD_NS_PER_S, &o.timeout_ns) < 0 || !o.timeout_ns)
                usage_error("--timeout: expected a duration such as 10s or 500ms, got '%s'",
                            optarg);
            break;
        case 'C': pin_cpus(optarg); break;
        case 'H': o.hist_out = optarg; break;
        case 'j': o.json = true; break;
        case 'D':
            if (yard_parse_duration_ns(optarg, YARD_NS_PER_S, &o.duration_ns) < 0 ||
                !o.duration_ns)
                usage_error("--duration: expected a duration such as 5s or 500ms, got '%s'",
                            optarg);
            break;
        case 'U':
            if (yard_parse_duration_ns(optarg, YARD_NS_PER_S, &o.ramp_ns) < 0)
                usage_error("--ramp-up: expected a duration such as 1s or 0s, got '%s'", optarg);
            break;
        case 'R': {
            char *end;
            o.read_ratio = strtod(optarg, &end);
            if (end == optarg || *end || o.read_ratio < 0 || o.read_ratio > 1)
                usage_error("--read-ratio: expected a number from 0 to 1, got '%s'", optarg);
            break;
        }
        case 'B':
            o.byte_rate = load_parse_bandwidth(optarg);
            if (o.byte_rate <= 0)
                usage_error("--bandwidth: expected e.g. 1Mbps, 500kbps (bits/s) or 125kBps "
                            "(bytes/s), got '%s'",
                            optarg);
            break;
        case 'M': {
            char *end;
            msg_rate = strtod(optarg, &end);
            if (end == optarg || *end || msg_rate <= 0)
                usage_error("--msg-rate: expected messages per second (> 0), got '%s'", optarg);
            break;
        }
        case 'E': message = optarg; break;
        case 'r': {
            char *end;
            o.rate = strtod(optarg, &end);
            if (end == optarg || *end || !(o.rate > 0) || o.rate > 1e9)
                usage_error("--rate: expected requests per second over all connections (> 0), "
                            "got '%s'",
                            optarg);
            break;
        }
        case 'P': o.pipeline = (size_t)parse_count("--pipeline", optarg, 1, 4096); break;
        case 'N': o.threads = (int)parse_count("--threads", optarg, 1, 256); break;
        case 'S': o.scenario = optarg; break;
        case 'W': weights = optarg; break;
        case 'F': o.users_csv = optarg; break;
        case 'X': o.user_prefix = optarg; break;
        case 'Y': o.password_prefix = optarg; break;
        case 'K':
            if (yard_parse_duration_ns(optarg, YARD_NS_PER_S, &o.think_ns) < 0)
                usage_error("--think-time: expected a duration such as 1s or 100ms, got '%s'",
                            optarg);
            break;
        case 'h': usage(stdout); return 0;
        case ':': usage_error("%s needs a value", argv[optind - 1]);
        default: usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        usage_error("unexpected argument '%s'", argv[optind]);
    if (!o.target_text)
        usage_error("--target HOST:PORT is required%s", "");
    char err[256];
    if (yard_addr_parse(o.target_text, &o.target, err, sizeof err) < 0)
        usage_error("--target: %s", err);
    /* The message, with its escapes turned into bytes. */
    static char msgbuf[4096];
    const char *m = message ? message : "message\\n";
    size_t ml = 0;
    for (; *m && ml < sizeof msgbuf; m++) {
        if (*m == '\\' && (m[1] == 'n' || m[1] == 't' || m[1] == '\\' || m[1] == 'r')) {
            m++;
            msgbuf[ml++] = *m == 'n' ? '\n' : *m == 't' ? '\t' : *m == 'r' ? '\r' : '\\';
        } else {
            msgbuf[ml++] = *m;
        }
    }
    if (!ml)
        usage_error("--message: must not be empty%s", "");
    o.message = msgbuf;
    o.message_len = ml;
    if (!strcmp(o.mode, "rate")) {
        if (!o.duration_ns)
            usage_error("rate needs --duration (the measured window)%s", "");
        if ((o.byte_rate > 0) == (msg_rate > 0))
            usage_error("rate needs exactly one of --bandwidth and --msg-rate%s", "");
        if (msg_rate > 0)
            o.byte_rate = msg_rate * (double)o.message_len;
    } else if (o.byte_rate > 0 || msg_rate > 0 || message) {
        usage_error("--bandwidth, --msg-rate and --message belong to the rate mode, not %s",
                    o.mode);
    }
    bool is_chat = !strcmp(o.mode, "chat");
    if (is_chat) {
        if (!(o.rate > 0))
            usage_error("chat needs --rate (messages per second over all connections)%s", "");
        if (o.connections < 2)
            usage_error("chat needs --connections 2 or more (senders are also receivers)%s", "");
        if (o.threads != 1)
            usage_error("chat runs on one thread (--threads 1)%s", "");
        if (!o.user_prefix)
            o.user_prefix = "u";
        if (!o.password_prefix)
            o.password_prefix = "pw-";
    } else if (o.user_prefix || o.password_prefix) {
        usage_error("--user-prefix and --password-prefix belong to the chat mode, not %s",
                    o.mode);
    }
    if (!mode->request_response && !is_chat && (o.rate > 0 || o.pipeline != 1))
        usage_error("--rate and --pipeline belong to the request/response modes, not %s", o.mode);
    if (strcmp(o.mode, "http") != 0 && (o.scenario || weights || o.users_csv || o.think_ns))
        usage_error("--scenario, --weights, --users-csv and --think-time belong to the http "
                    "mode, not %s",
                    o.mode);
    if (o.think_ns && o.rate > 0)
        usage_error("--think-time is for the closed loop; --rate sets the open loop's pace%s", "");
    if (!strcmp(o.mode, "http") && load_http_prepare(&o, weights, err, sizeof err) < 0)
        usage_error("%s", err);
    if (o.threads > o.connections)
        usage_error("--threads: more threads than connections (%s)", "give fewer threads");
    o.total_connections = o.connections;
    o.total_rate = o.rate;
    signal(SIGPIPE, SIG_IGN);

    load_result_t *r = calloc(1, sizeof *r);
    if (!r)
        return 1;
    init_result(r);
    int rc = mode->before ? mode->before(&o, r) : 0;
    if (rc == 0)
        rc = run_threads(mode, &o, r);
    if (rc == 0 && mode->after)
        rc = mode->after(&o, r);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                   (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    if (rc < 0) {
        fprintf(stderr, "yard-load: %s\n", r->first_error);
        free(r);
        return 1;
    }
    load_report(&o, r, cpu_s);
    if (r->errors && !o.json)
        fprintf(stderr, "yard-load: %llu errors; first: %s\n", (unsigned long long)r->errors,
                r->first_error);
    int status = r->errors ? 1 : 0;
    free(r);
    return status;
}
