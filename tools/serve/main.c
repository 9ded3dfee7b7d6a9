/* yard-serve: run one app under one concurrency model.
 *
 * Start-up order matters: signals are blocked and the shared region is
 * mapped before anything forks or spawns, the output file is opened once so
 * that every process appends to the same open file, and "listening" is
 * printed only once the socket accepts connections. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "yard/bus.h"
#include "yard/app.h"
#include "yard/clock.h"
#include "yard/log.h"
#include "yard/model.h"
#include "yard/server.h"

#define EXIT_USAGE 2

static const char *progname = "yard-serve";

/* Why an app that declares idle_exempt refuses --idle-timeout; its own text
 * follows, saying what it offers instead. */
#define IDLE_EXEMPT_WHY                                                                            \
    "it never closes a connection for silence alone (its clients may rightly stay silent for "    \
    "hours);"

/* A duration as the shortest exact "<n><unit>" (60s, 500ms), for --help and
 * the start-up log. */
static void format_duration(uint64_t ns, char *buf, size_t len)
{
    if (ns % YARD_NS_PER_S == 0)
        snprintf(buf, len, "%llus", (unsigned long long)(ns / YARD_NS_PER_S));
    else if (ns % YARD_NS_PER_MS == 0)
        snprintf(buf, len, "%llums", (unsigned long long)(ns / YARD_NS_PER_MS));
    else if (ns % YARD_NS_PER_US == 0)
        snprintf(buf, len, "%lluus", (unsigned long long)(ns / YARD_NS_PER_US));
    else
        snprintf(buf, len, "%lluns", (unsigned long long)ns);
}

/* Prints text word-wrapped before column 88, the help's width; col is the
 * column the cursor is at, continuation lines start at column indent. */
static void print_wrapped(FILE *f, const char *text, int col, int indent)
{
    const char *p = text;
    while (*p) {
        int word = (int)strcspn(p, " ");
        if (col > indent && col + 1 + word > 88) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        fprintf(f, "%.*s", word, p);
        col += word;
        p += word;
        p += strspn(p, " ");
    }
    fputc('\n', f);
}

/* --idle-timeout's help, with each app's default read from its table, so
 * the help cannot drift from what the apps declare. */
static void usage_idle_timeout(FILE *f)
{
    fprintf(f, "  --idle-timeout DUR   close a connection that has been silent for DUR (e.g. 30s,\n"
               "                       500ms, 2m); 0 turns the app's default off. Each app\n"
               "                       declares its default:\n");
    for (const yard_app_t *const *a = yard_apps; *a; a++) {
        fprintf(f, "                         %-9s ", (*a)->name);
        if ((*a)->idle_exempt) {
            char text[512];
            snprintf(text, sizeof text, "not accepted: %s %s", IDLE_EXEMPT_WHY, (*a)->idle_exempt);
            print_wrapped(f, text, 35, 35);
        } else if ((*a)->default_idle_timeout_ns) {
            char d[32];
            format_duration((*a)->default_idle_timeout_ns, d, sizeof d);
            fprintf(f, "%s\n", d);
        } else {
            fprintf(f, "off\n");
        }
    }
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: yard-serve --app APP --model MODEL [--listen HOST:PORT] [options]\n"
            "\n"
            "Runs one sans-I/O app under one concurrency model. Once the socket accepts\n"
            "connections the first line on stdout is exactly 'listening HOST:PORT'.\n"
            "SIGTERM or SIGINT stops accepting, closes every connection, reaps every\n"
            "child process and exits 0.\n"
            "\n"
            "  --app APP            echo | counter | sink | rest | chat (see --list-apps)\n"
            "  --model MODEL        fork | thread | epoll | reactors | coro (see --list-models)\n"
            "  --listen HOST:PORT   address to listen on (default 127.0.0.1:7000); HOST is a\n"
            "                       numeric IPv4 address, [IPv6] or localhost; port 0 picks a\n"
            "                       free port\n"
            "  --workers N          reactors: number of event loops; coro: number of worker\n"
            "                       threads (default: the CPUs in the affinity mask, %d here)\n"
            "  --procs              reactors: run the loops as processes, not threads\n"
            "  --pair               fork + chat: papayaChat's design, a RECV and a SEND process\n"
            "                       per client, woken by SIGUSR1 sent to the process group\n"
            "  --max-conns N        close connection N+1 at once (logged); 0 = no limit (default)"
            "\n",
            yard_cpus_available());
    usage_idle_timeout(f);
    fprintf(f,
            "  --out PATH           sink: file to write received bytes to (default /dev/null);\n"
            "                       truncated at start, appended to by every connection\n"
            "  --flush MODE         sink: 'each' writes every chunk as it arrives (default);\n"
            "                       'buffered' collects 64 KiB per connection before writing\n"
            "  --counter-sync MODE  counter: 'atomic' (default) updates the count with an atomic\n"
            "                       instruction; 'perms' runs each read as a task holding a read\n"
            "                       permission and each increment holding a full one (Eve-style\n"
            "                       tasks under --model coro, a process-shared rwlock otherwise)\n"
            "  --longpoll-ms N      rest: GET /longPoll answers after N ms (default 5000)\n"
            "  --request-timeout-ms N  rest: a request must be complete N ms after its first\n"
            "                       byte, else 408 (default 10000)\n"
            "  --bcrypt-cost N      rest: bcrypt cost, log2 of the rounds, 4..31 (default 10)\n"
            "  --offload-threads N  event-loop models: threads that run CPU-heavy jobs such as\n"
            "                       bcrypt (default 2); 0 runs them inline, blocking the loop\n"
            "  --store-entries N    rest: capacity of each shared store (default 65536)\n"
            "  --data DIR           chat: the data directory: accounts (yard-chat account),\n"
            "                       the message log, read positions (required)\n"
            "  --fsync MODE         chat: 'always' (before a message is relayed), 'interval'\n"
            "                       (default) or 'never'\n"
            "  --fsync-interval-ms N  chat: with --fsync interval (default 100)\n"
            "  --replay-max N       chat: on JOIN, replay at most N missed messages (1000)\n"
            "  --retain DUR         chat: delete log segments older than DUR, e.g. 30d\n"
            "                       (default 0: keep everything)\n"
            "  --registration-timeout-ms N  chat: time to log in (default 10000)\n"
            "  --max-channels N     chat: channels the server holds at once (default 1024); a\n"
            "                       channel nobody is in gives its slot back\n"
            "  --max-channels-per-account N  chat: channels one account may be in, over all\n"
            "                       its connections; announced as CHANLIMIT (default 50)\n"
            "  --login-max-pending N  chat: password checks in flight, server-wide; past it a\n"
            "                       login is told to try again, nothing is hashed (default 16)\n"
            "  --login-max-pending-per-addr N  chat: checks in flight from one source address\n"
            "                       (an IPv4 address or an IPv6 /64); more wait (default 2)\n"
            "  --login-failures-per-addr N/DUR  chat: failed logins allowed from one address:\n"
            "                       N at once, then N per DUR (default 30/10m)\n"
            "  --login-failures-per-account N/DUR  chat: the same per account, whether or not\n"
            "                       it exists (default 10/10m)\n"
            "  --max-unregistered N  chat: connections not logged in yet (default 1024)\n"
            "  --max-unregistered-per-addr N  chat: the same from one address (default 64)\n"
            "  --backlog N          listen(2) backlog (default 4096)\n"
            "  --max-sendq BYTES    disconnect a peer that lets more than this wait for it\n"
            "                       ('send queue exceeded'; default 8388608)\n"
            "  --log-level LEVEL    error | warning | info | debug (default warning)\n"
            "  --list-apps          list the apps and exit (--json for JSON)\n"
            "  --list-models        list the models and their traits and exit (--json for JSON)\n"
            "  --json               with --list-*: print JSON\n"
            "  --version            print the version and exit\n"
            "  -h, --help           show this help\n"
            "\n"
            "Exit status: 0 after a clean stop, 1 on a runtime error (e.g. the port is in use),\n"
            "2 on a usage error.\n");
}

static _Noreturn __attribute__((format(printf, 1, 2))) void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", progname);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'yard-serve --help'.\n");
    exit(EXIT_USAGE);
}

static long parse_count(const char *flag, const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) {
        fprintf(stderr, "%s: %s: expected a whole number from %ld to %ld, got '%s'\n", progname,
                flag, min, max, s);
        exit(EXIT_USAGE);
    }
    return v;
}

/* "N/DUR": N at once, then N per DUR (a token bucket). */
static void parse_rate(const char *flag, const char *s, double *burst, double *per_s)
{
    if (yard_parse_rate(s, burst, per_s) < 0) {
        fprintf(stderr, "%s: %s: expected N/DURATION such as 10/10m (N at once, then N per "
                        "DURATION), got '%s'\n",
                progname, flag, s);
        exit(EXIT_USAGE);
    }
}

static void json_string(const char *s)
{
    putchar('"');
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

static void list_models(int json)
{
    if (!json) {
        for (const yard_model_t *const *m = yard_models; *m; m++)
            printf("%-10s %s\n", (*m)->name, (*m)->summary);
        return;
    }
    printf("[");
    for (const yard_model_t *const *m = yard_models; *m; m++) {
        const yard_model_traits_t *t = &(*m)->traits;
        printf("%s\n  {\"name\": ", m == yard_models ? "" : ",");
        json_string((*m)->name);
        printf(", \"summary\": ");
        json_string((*m)->summary);
        printf(", \"flags\": {\"workers\": %s, \"procs\": %s}", (*m)->uses_workers ? "true" : "false",
               (*m)->uses_procs ? "true" : "false");
        printf(",\n   \"traits\": {\"multi_threaded\": %s, \"multi_process\": %s, "
               "\"lightweight_threads\": %s, \"event_based\": %s, \"explicit_concurrency\": %s, ",
               t->multi_threaded ? "true" : "false", t->multi_process ? "true" : "false",
               t->lightweight_threads ? "true" : "false", t->event_based ? "true" : "false",
               t->explicit_concurrency ? "true" : "false");
        printf("\"shared_state\": ");
        json_string(t->shared_state);
        printf(", \"ipc\": ");
        json_string(t->ipc);
        printf(", \"error_isolation\": ");
        json_string(t->error_isolation);
        printf("}}");
    }
    printf("\n]\n");
}

static void list_apps(int json)
{
    if (json)
        printf("[");
    for (const yard_app_t *const *a = yard_apps; *a; a++) {
        if (!json) {
            printf("%-10s %s\n", (*a)->name, (*a)->summary);
            continue;
        }
        printf("%s\n  {\"name\": ", a == yard_apps ? "" : ",");
        json_string((*a)->name);
        printf(", \"summary\": ");
        json_string((*a)->summary);
        printf(", \"uses_out\": %s}", (*a)->uses_out ? "true" : "false");
    }
    if (json)
        printf("\n]\n");
}

/* States the effective idle timeout and where it came from, so that an
 * operator (and a test) can see a default without waiting for it to fire. */
static void log_idle_timeout(const yard_app_t *app, const yard_config_t *cfg, bool given)
{
    char d[32];
    format_duration(cfg->idle_timeout_ns, d, sizeof d);
    if (given && cfg->idle_timeout_ns)
        yard_log_info("idle timeout %s (from --idle-timeout)", d);
    else if (given)
        yard_log_info("idle timeout off (--idle-timeout 0)");
    else if (cfg->idle_timeout_ns)
        yard_log_info("idle timeout %s (the default of --app %s; --idle-timeout changes it)", d,
                      app->name);
    else if (app->idle_exempt)
        yard_log_info("idle timeout off (--app %s never closes a connection for silence alone)",
                      app->name);
    else
        yard_log_info("idle timeout off (--app %s has no default; --idle-timeout sets one)",
                      app->name);
}

static int parse_log_level(const char *s)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    if (strcmp(s, "warn") == 0)
        return YARD_LOG_WARN;
    usage_error("--log-level: expected error, warning, info or debug, got '%s'", s);
}

int main(int argc, char **argv)
{
    enum { OPT_APP = 256, OPT_MODEL, OPT_LISTEN, OPT_WORKERS, OPT_PROCS, OPT_MAX_CONNS,
           OPT_IDLE, OPT_OUT, OPT_FLUSH, OPT_BACKLOG, OPT_LOG, OPT_LIST_APPS, OPT_LIST_MODELS,
           OPT_JSON, OPT_VERSION, OPT_LONGPOLL, OPT_BCRYPT, OPT_OFFLOAD, OPT_STORE, OPT_COUNTER_SYNC, OPT_REQ_TIMEOUT,
           OPT_DATA, OPT_FSYNC, OPT_FSYNC_MS, OPT_REPLAY_MAX, OPT_RETAIN, OPT_REG_TIMEOUT,
           OPT_CHANNELS, OPT_PAIR, OPT_SENDQ, OPT_CHANLIMIT, OPT_LOGIN_PENDING,
           OPT_LOGIN_PENDING_ADDR, OPT_LOGIN_FAIL_ADDR, OPT_LOGIN_FAIL_ACCOUNT, OPT_UNREG,
           OPT_UNREG_ADDR };
    static const struct option opts[] = {
        {"app", required_argument, NULL, OPT_APP},
        {"model", required_argument, NULL, OPT_MODEL},
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"workers", required_argument, NULL, OPT_WORKERS},
        {"procs", no_argument, NULL, OPT_PROCS},
        {"max-conns", required_argument, NULL, OPT_MAX_CONNS},
        {"idle-timeout", required_argument, NULL, OPT_IDLE},
        {"out", required_argument, NULL, OPT_OUT},
        {"flush", required_argument, NULL, OPT_FLUSH},
        {"backlog", required_argument, NULL, OPT_BACKLOG},
        {"log-level", required_argument, NULL, OPT_LOG},
        {"list-apps", no_argument, NULL, OPT_LIST_APPS},
        {"list-models", no_argument, NULL, OPT_LIST_MODELS},
        {"json", no_argument, NULL, OPT_JSON},
        {"counter-sync", required_argument, NULL, OPT_COUNTER_SYNC},
        {"longpoll-ms", required_argument, NULL, OPT_LONGPOLL},
        {"bcrypt-cost", required_argument, NULL, OPT_BCRYPT},
        {"request-timeout-ms", required_argument, NULL, OPT_REQ_TIMEOUT},
        {"offload-threads", required_argument, NULL, OPT_OFFLOAD},
        {"store-entries", required_argument, NULL, OPT_STORE},
        {"data", required_argument, NULL, OPT_DATA},
        {"fsync", required_argument, NULL, OPT_FSYNC},
        {"fsync-interval-ms", required_argument, NULL, OPT_FSYNC_MS},
        {"replay-max", required_argument, NULL, OPT_REPLAY_MAX},
        {"retain", required_argument, NULL, OPT_RETAIN},
        {"registration-timeout-ms", required_argument, NULL, OPT_REG_TIMEOUT},
        {"max-channels", required_argument, NULL, OPT_CHANNELS},
        {"max-channels-per-account", required_argument, NULL, OPT_CHANLIMIT},
        {"login-max-pending", required_argument, NULL, OPT_LOGIN_PENDING},
        {"login-max-pending-per-addr", required_argument, NULL, OPT_LOGIN_PENDING_ADDR},
        {"login-failures-per-addr", required_argument, NULL, OPT_LOGIN_FAIL_ADDR},
        {"login-failures-per-account", required_argument, NULL, OPT_LOGIN_FAIL_ACCOUNT},
        {"max-unregistered", required_argument, NULL, OPT_UNREG},
        {"max-unregistered-per-addr", required_argument, NULL, OPT_UNREG_ADDR},
        {"pair", no_argument, NULL, OPT_PAIR},
        {"max-sendq", required_argument, NULL, OPT_SENDQ},
        {"version", no_argument, NULL, OPT_VERSION},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    yard_config_t cfg = {.backlog = 4096,
                         .shm_bytes = (size_t)512 << 20, /* reserved, touched on use */
                         .flush = YARD_FLUSH_EACH,
                         .longpoll_ns = 5000 * YARD_NS_PER_MS,
                         .bcrypt_cost = 10,
                         .offload_threads = 2,
                         .store_entries = 65536,
                         .fsync_mode = YARD_FSYNC_INTERVAL,
                         .fsync_interval_ns = 100 * YARD_NS_PER_MS,
                         .replay_max = 1000,
                         .register_timeout_ns = 10 * YARD_NS_PER_S,
                         .max_channels = 1024,
                         .channels_per_account = 50,
                         .login_max_pending = 16,
                         .login_pending_per_addr = 2,
                         .max_unregistered = 1024,
                         .unregistered_per_addr = 64,
                         .login_fail_addr_burst = 30,
                         .login_fail_addr_per_s = 30.0 / 600,
                         .login_fail_account_burst = 10,
                         .login_fail_account_per_s = 10.0 / 600};
    const char *listen_text = "127.0.0.1:7000";
    int log_level = YARD_LOG_WARN, list = 0, json = 0;
    bool flush_given = false, counter_sync_given = false, chat_given = false;
    bool idle_given = false;
    char err[256];

    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case OPT_APP: cfg.app = optarg; break;
        case OPT_MODEL: cfg.model = optarg; break;
        case OPT_LISTEN: listen_text = optarg; break;
        case OPT_WORKERS: cfg.workers = (int)parse_count("--workers", optarg, 1, 1024); break;
        case OPT_PROCS: cfg.procs = true; break;
        case OPT_MAX_CONNS: cfg.max_conns = parse_count("--max-conns", optarg, 0, LONG_MAX); break;
        case OPT_BACKLOG: cfg.backlog = (int)parse_count("--backlog", optarg, 1, 1 << 20); break;
        case OPT_IDLE:
            idle_given = true;
            if (yard_parse_duration_ns(optarg, YARD_NS_PER_S, &cfg.idle_timeout_ns) < 0)
                usage_error("--idle-timeout: expected a duration such as 30s, 500ms or 2m, got '%s'",
                            optarg);
            break;
        case OPT_OUT: cfg.out = optarg; break;
        case OPT_FLUSH:
            flush_given = true;
            if (strcmp(optarg, "each") == 0)
                cfg.flush = YARD_FLUSH_EACH;
            else if (strcmp(optarg, "buffered") == 0)
                cfg.flush = YARD_FLUSH_BUFFERED;
            else
                usage_error("--flush: expected 'each' or 'buffered', got '%s'", optarg);
            break;
        case OPT_LOG: log_level = parse_log_level(optarg); break;
        case OPT_COUNTER_SYNC:
            if (strcmp(optarg, "atomic") == 0)
                cfg.counter_perms = false;
            else if (strcmp(optarg, "perms") == 0)
                cfg.counter_perms = true;
            else
                usage_error("--counter-sync: expected 'atomic' or 'perms', got '%s'", optarg);
            counter_sync_given = true;
            break;
        case OPT_LONGPOLL:
            cfg.longpoll_ns =
                (uint64_t)parse_count("--longpoll-ms", optarg, 0, 86400000) * YARD_NS_PER_MS;
            break;
        case OPT_REQ_TIMEOUT:
            cfg.request_timeout_ns =
                (uint64_t)parse_count("--request-timeout-ms", optarg, 1, 3600000) * YARD_NS_PER_MS;
            break;
        case OPT_BCRYPT: cfg.bcrypt_cost = (int)parse_count("--bcrypt-cost", optarg, 4, 31); break;
        case OPT_OFFLOAD:
            cfg.offload_threads = (int)parse_count("--offload-threads", optarg, 0, 256);
            break;
        case OPT_STORE:
            cfg.store_entries = (size_t)parse_count("--store-entries", optarg, 16, 1 << 24);
            break;
        case OPT_DATA: cfg.data_dir = optarg; break;
        case OPT_PAIR: cfg.pair = true; break;
        case OPT_SENDQ:
            cfg.max_sendq = (size_t)parse_count("--max-sendq", optarg, 4096, (size_t)1 << 34);
            break;
        case OPT_FSYNC:
            chat_given = true;
            if (strcmp(optarg, "always") == 0)
                cfg.fsync_mode = YARD_FSYNC_ALWAYS;
            else if (strcmp(optarg, "interval") == 0)
                cfg.fsync_mode = YARD_FSYNC_INTERVAL;
            else if (strcmp(optarg, "never") == 0)
                cfg.fsync_mode = YARD_FSYNC_NEVER;
            else
                usage_error("--fsync: expected 'always', 'interval' or 'never', got '%s'", optarg);
            break;
        case OPT_FSYNC_MS:
            chat_given = true;
            cfg.fsync_interval_ns =
                (uint64_t)parse_count("--fsync-interval-ms", optarg, 1, 3600000) * YARD_NS_PER_MS;
            break;
        case OPT_REPLAY_MAX:
            chat_given = true;
            cfg.replay_max = (unsigned)parse_count("--replay-max", optarg, 0, 1000000);
            break;
        case OPT_RETAIN: {
            chat_given = true;
            /* A duration with d (days) allowed besides s, m, h. */
            size_t n = strlen(optarg);
            uint64_t ns = 0;
            if (n > 1 && optarg[n - 1] == 'd') {
                char num[32];
                snprintf(num, sizeof num, "%.*s", (int)(n - 1), optarg);
                cfg.retain_s = parse_count("--retain", num, 0, 36500) * 86400;
            } else if (yard_parse_duration_ns(optarg, YARD_NS_PER_S, &ns) == 0) {
                cfg.retain_s = ns / YARD_NS_PER_S;
            } else {
                usage_error("--retain: expected a duration such as 30d, 12h or 0 (keep "
                            "everything), got '%s'",
                            optarg);
            }
            break;
        }
        case OPT_REG_TIMEOUT:
            chat_given = true;
            cfg.register_timeout_ns = (uint64_t)parse_count("--registration-timeout-ms", optarg,
                                                            1, 3600000) *
                                      YARD_NS_PER_MS;
            break;
        case OPT_CHANNELS:
            chat_given = true;
            cfg.max_channels = (unsigned)parse_count("--max-channels", optarg, 1, 4096);
            break;
        case OPT_CHANLIMIT:
            chat_given = true;
            cfg.channels_per_account =
                (unsigned)parse_count("--max-channels-per-account", optarg, 1, 4096);
            break;
        case OPT_LOGIN_PENDING:
            chat_given = true;
            cfg.login_max_pending = (unsigned)parse_count("--login-max-pending", optarg, 1, 4096);
            break;
        case OPT_LOGIN_PENDING_ADDR:
            chat_given = true;
            cfg.login_pending_per_addr =
                (unsigned)parse_count("--login-max-pending-per-addr", optarg, 1, 4096);
            break;
        case OPT_LOGIN_FAIL_ADDR:
            chat_given = true;
            parse_rate("--login-failures-per-addr", optarg, &cfg.login_fail_addr_burst,
                       &cfg.login_fail_addr_per_s);
            break;
        case OPT_LOGIN_FAIL_ACCOUNT:
            chat_given = true;
            parse_rate("--login-failures-per-account", optarg, &cfg.login_fail_account_burst,
                       &cfg.login_fail_account_per_s);
            break;
        case OPT_UNREG:
            chat_given = true;
            cfg.max_unregistered = (unsigned)parse_count("--max-unregistered", optarg, 1, 65536);
            break;
        case OPT_UNREG_ADDR:
            chat_given = true;
            cfg.unregistered_per_addr =
                (unsigned)parse_count("--max-unregistered-per-addr", optarg, 1, 65536);
            break;
        case OPT_LIST_APPS: list = 1; break;
        case OPT_LIST_MODELS: list = 2; break;
        case OPT_JSON: json = 1; break;
        case OPT_VERSION: printf("yard-serve 0.1.0\n"); return 0;
        case 'h': usage(stdout); return 0;
        case ':': usage_error("%s needs a value", argv[optind - 1]);
        default:
            if (optopt && optopt < 256)
                usage_error("unknown option '-%c'", optopt);
            usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        usage_error("unexpected argument '%s'", argv[optind]);
    if (list == 1) {
        list_apps(json);
        return 0;
    }
    if (list == 2) {
        list_models(json);
        return 0;
    }
    if (!cfg.app)
        usage_error("--app is required (one of echo, counter, sink, rest, chat)%s", "");
    if (!cfg.model)
        usage_error("--model is required (one of fork, thread, epoll, reactors, coro)%s", "");
    const yard_app_t *app = yard_app_find(cfg.app);
    if (!app)
        usage_error("--app: unknown app '%s' (try --list-apps)", cfg.app);
    const yard_model_t *model = yard_model_find(cfg.model);
    if (!model)
        usage_error("--model: unknown model '%s' (try --list-models)", cfg.model);
    if (cfg.workers && !model->uses_workers)
        usage_error("--workers has no meaning for --model %s", model->name);
    if (cfg.procs && !model->uses_procs)
        usage_error("--procs has no meaning for --model %s", model->name);
    if ((cfg.out || flush_given) && !app->uses_out)
        usage_error("--out and --flush apply to apps that write a file (sink), not --app %s",
                    app->name);
    if (counter_sync_given && strcmp(app->name, "counter") != 0)
        usage_error("--counter-sync applies to --app counter, not --app %s", app->name);
    bool is_chat = strcmp(app->name, "chat") == 0;
    if (cfg.pair && (strcmp(model->name, "fork") != 0 || !app->news))
        usage_error("--pair is papayaChat's process pair: it needs --model fork and an app "
                    "that relays news (chat)%s",
                    "");
    if ((chat_given || cfg.data_dir) && !is_chat)
        usage_error("--data, --fsync, --fsync-interval-ms, --replay-max, --retain, "
                    "--registration-timeout-ms, --max-channels, --max-channels-per-account, "
                    "--login-* and --max-unregistered* apply to --app chat, not --app %s",
                    app->name);
    if (is_chat && !cfg.data_dir)
        usage_error("--app chat needs --data DIR (accounts, the message log, read "
                    "positions)%s",
                    "");
    if (idle_given && app->idle_exempt)
        usage_error("--idle-timeout does not apply to --app %s: " IDLE_EXEMPT_WHY " %s", app->name,
                    app->idle_exempt);
    if (!idle_given)
        cfg.idle_timeout_ns = app->default_idle_timeout_ns;
    if (yard_addr_parse(listen_text, &cfg.listen, err, sizeof err) < 0)
        usage_error("--listen: %s", err);
    if (app->uses_out && !cfg.out)
        cfg.out = "/dev/null";

    yard_log_init(progname, log_level);
    yard_server_t srv = {.cfg = &cfg, .app = app, .model = model, .listen_fd = -1, .out_fd = -1};
    int status = 1;
    srv.sig_fd = yard_signals_setup(err, sizeof err);
    if (srv.sig_fd < 0) {
        fprintf(stderr, "%s: %s\n", progname, err);
        return 1;
    }
    srv.shm = yard_shm_create(cfg.shm_bytes, err, sizeof err);
    if (!srv.shm) {
        fprintf(stderr, "%s: %s\n", progname, err);
        goto out;
    }
    srv.shared = yard_shm_alloc(srv.shm, sizeof *srv.shared);
    if (app->init && app->init(&srv.app_state, &cfg, srv.shm, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", progname, err);
        goto out;
    }
    if (app->uses_out) {
        srv.out_fd = open(cfg.out, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
        if (srv.out_fd < 0) {
            fprintf(stderr, "%s: cannot open --out %s: %s\n", progname, cfg.out, strerror(errno));
            goto out;
        }
    }
    srv.listen_fd = yard_listen(&cfg.listen, cfg.backlog, model->reuseport, err, sizeof err);
    if (srv.listen_fd < 0) {
        fprintf(stderr, "%s: %s\n", progname, err);
        goto out;
    }
    yard_sock_name(srv.listen_fd, &srv.bound);
    char where[YARD_ADDR_STRLEN];
    yard_addr_format(&srv.bound, where, sizeof where);
    printf("listening %s\n", where);
    fflush(stdout);
    yard_log_info("serving app %s with model %s on %s", app->name, model->name, where);
    log_idle_timeout(app, &cfg, idle_given);
    status = model->serve(&srv);
    yard_log_info("stopped: %lu connections accepted, %lu refused",
                  atomic_load(&srv.shared->accepted), atomic_load(&srv.shared->rejected));
out:
    if (srv.listen_fd >= 0)
        close(srv.listen_fd);
    if (srv.out_fd >= 0 && close(srv.out_fd) < 0) {
        fprintf(stderr, "%s: closing --out %s: %s\n", progname, cfg.out, strerror(errno));
        status = 1;
    }
    yard_bus_stop_wakers(); /* they read buses in the shared region */
    if (app->fini)
        app->fini(srv.app_state);
    yard_shm_destroy(srv.shm);
    close(srv.sig_fd);
    return status;
}
