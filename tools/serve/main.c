/* yard-serve: run one app under one concurrency model.
 *
 * The engine's flags are declared below; each model and each app declares
 * its own in its table (yard_model_t.opts, yard_app_t.opts), and parsing,
 * usage errors, --help and the --list-* listings all come from the tables.
 *
 * Start-up order matters: signals are blocked and the shared region is
 * mapped before anything forks or spawns, the output file is opened once so
 * that every process appends to the same open file, and "listening" is
 * printed only once the socket accepts connections. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "yard/cli.h"
#include "yard/bus.h"
#include "yard/app.h"
#include "yard/background.h"
#include "yard/clock.h"
#include "yard/log.h"
#include "yard/model.h"
#include "yard/opt.h"
#include "yard/server.h"
#include "yard/tls.h"


static const char *progname = "yard-serve";

/* Why an app that declares idle_exempt refuses --idle-timeout; its own text
 * follows, saying what it offers instead. */
#define IDLE_EXEMPT_WHY                                                                            \
    "it never closes a connection for silence alone (its clients may rightly stay silent for "    \
    "hours);"

/* What the engine's own flags fill: its configuration (the models' flags
 * fill that too) and what only this program acts on. */
struct serve_args {
    yard_config_t cfg;
    int log_level;
    bool list_apps, list_models, json, version, help;
};

static int parse_listen(const char *text, void *field, char *err, size_t errlen)
{
    return yard_addr_resolve(text, field, err, errlen) < 0 ? -1 : 0;
}

/* Each --tls-listen adds a group of addresses (on one port). */
static int parse_tls_listen(const char *text, void *field, char *err, size_t errlen)
{
    struct yard_listen_groups *g = field;
    if (g->n == YARD_MAX_LISTEN) {
        snprintf(err, errlen, "at most %d TLS listeners", YARD_MAX_LISTEN);
        return -1;
    }
    if (yard_addr_resolve(text, &g->group[g->n], err, errlen) < 0)
        return -1;
    g->n++;
    return 0;
}

static const yard_opt_choice_t handshake_places[] = {
    YARD_OPT_CHOICE("offload", 0), YARD_OPT_CHOICE("inline", 1), YARD_OPT_CHOICES_END};

static const yard_opt_choice_t flush_modes[] = {YARD_OPT_CHOICE("each", YARD_FLUSH_EACH),
                                                YARD_OPT_CHOICE("buffered", YARD_FLUSH_BUFFERED),
                                                YARD_OPT_CHOICES_END};

static const yard_opt_choice_t log_levels[] = {
    YARD_OPT_CHOICE("error", YARD_LOG_ERROR), YARD_OPT_CHOICE("warning", YARD_LOG_WARN),
    YARD_OPT_CHOICE("info", YARD_LOG_INFO),   YARD_OPT_CHOICE("debug", YARD_LOG_DEBUG),
    YARD_OPT_CHOICE_ALIAS("warn", YARD_LOG_WARN), YARD_OPT_CHOICES_END};

#define ARG(member) YARD_OPT_FIELD(struct serve_args, member)

static const yard_opt_t engine_opts[] = {
    {.name = "app", .form = "APP", .type = YARD_OPT_STRING, ARG(cfg.app),
     .help = "the app to run (see --list-apps); its flags are listed below"},
    {.name = "model", .form = "MODEL", .type = YARD_OPT_STRING, ARG(cfg.model),
     .help = "the concurrency model to run it under (see --list-models); its flags are listed "
             "below"},
    {.name = "listen", .form = "HOST:PORT", .type = YARD_OPT_CUSTOM, ARG(cfg.listen),
     .parse = parse_listen, .def = "127.0.0.1:7000",
     .help = "address to listen on; HOST is a numeric IPv4 address, [IPv6] or a name such as "
             "localhost, which is resolved and listened on at every address it names; port 0 "
             "picks a free port. With --tls-listen and no --listen, there is no plain listener"},
    {.name = "tls-listen", .form = "HOST:PORT", .type = YARD_OPT_CUSTOM, ARG(cfg.tls_listen),
     .parse = parse_tls_listen,
     .help = "also listen for TLS connections here (docs/tls.md), as --listen does for plain "
             "ones; may be given several times. Needs --tls-cert and --tls-key"},
    {.name = "tls-cert", .form = "FILE", .type = YARD_OPT_STRING, ARG(cfg.tls_cert),
     .help = "PEM: the server's certificate, then its chain; SIGHUP reloads it"},
    {.name = "tls-key", .form = "FILE", .type = YARD_OPT_STRING, ARG(cfg.tls_key),
     .help = "PEM: the certificate's private key; SIGHUP reloads it"},
    {.name = "tls-handshake-timeout", .form = "DUR", .type = YARD_OPT_DURATION,
     ARG(cfg.tls_handshake_timeout_ns), .unit_ns = YARD_NS_PER_S, .def = "10s",
     .help = "close a TLS connection whose handshake has not ended within DUR"},
    {.name = "tls-handshake", .form = "WHERE", .type = YARD_OPT_ENUM,
     ARG(cfg.tls_handshake_inline), .choices = handshake_places, .def = "offload",
     .help = "loop models with an offload pool (epoll, reactors, coro, uring; --offload-threads "
             "> 0): run each handshake's private-key work on the pool ('offload') or on the loop "
             "itself ('inline'); fork and thread run it in the connection's own process or "
             "thread either way"},
    {.name = "max-conns", .form = "N", .type = YARD_OPT_INT, ARG(cfg.max_conns), .min = 0,
     .max = LONG_MAX, .def = "0",
     .help = "close connection N+1 at once (logged); 0 = no limit"},
    {.name = "idle-timeout", .form = "DUR", .type = YARD_OPT_DURATION, ARG(cfg.idle_timeout_ns),
     .unit_ns = YARD_NS_PER_S,
     .help = "close a connection that has been silent for DUR (e.g. 30s, 500ms, 2m); 0 turns the "
             "app's default off. Each app declares its default:"},
    {.name = "out", .form = "PATH", .type = YARD_OPT_STRING, ARG(cfg.out),
     .help = "apps that write a file (sink): the file to write received bytes to (default "
             "/dev/null); truncated at start, appended to by every connection"},
    {.name = "flush", .form = "MODE", .type = YARD_OPT_ENUM, ARG(cfg.flush),
     .choices = flush_modes, .def = "each",
     .help = "apps that write a file (sink): 'each' writes every chunk as it arrives; 'buffered' "
             "collects 64 KiB per connection before writing"},
    {.name = "backlog", .form = "N", .type = YARD_OPT_INT, ARG(cfg.backlog), .min = 1,
     .max = 1 << 20, .def = "4096", .help = "listen(2) backlog"},
    {.name = "ipv6-only", .type = YARD_OPT_SWITCH, ARG(cfg.ipv6_only),
     .help = "with --listen [IPv6]:PORT: IPv6 clients only (IPV6_V6ONLY 1); without it, "
             "--listen [::]:PORT takes IPv4 clients too (dual-stack, IPV6_V6ONLY 0, set "
             "explicitly on every platform); --listen 0.0.0.0:PORT is IPv4 only"},
    {.name = "max-sendq", .form = "BYTES", .type = YARD_OPT_SIZE, ARG(cfg.max_sendq),
     .min = 4096, .max = (long long)1 << 34, .def = "8M",
     .help = "disconnect a peer that lets more than this wait for it ('send queue exceeded')"},
    {.name = "background-fib", .form = "N", .type = YARD_OPT_INT, ARG(cfg.background_fib),
     .min = 0, .max = YARD_BACKGROUND_MAX_N, .def = "0",
     .help = "compute fib(N) over and over beside the connections, as the Eve study's Program "
             "1 (two tasks per call down to fib(20)), each result checked, and report how many "
             "at exit: coro runs the tasks on its own workers, every other model on an offload "
             "pool of --workers (default: CPUs) threads; 0 = off"},
    {.name = "log-level", .form = "LEVEL", .type = YARD_OPT_ENUM, ARG(log_level),
     .choices = log_levels, .def = "warning", .help = "error | warning | info | debug"},
    {.name = "list-apps", .type = YARD_OPT_SWITCH, ARG(list_apps),
     .help = "list the apps and exit (--json for JSON, with each app's flags)"},
    {.name = "list-models", .type = YARD_OPT_SWITCH, ARG(list_models),
     .help = "list the models and their traits and exit (--json for JSON, with each model's "
             "flags)"},
    {.name = "json", .type = YARD_OPT_SWITCH, ARG(json), .help = "with --list-*: print JSON"},
    {.name = "version", .type = YARD_OPT_SWITCH, ARG(version),
     .help = "print the version and exit"},
    {.name = "help", .type = YARD_OPT_SWITCH, ARG(help), .short_name = 'h',
     .help = "show this help"},
    YARD_OPT_END,
};

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

/* ---- help and listings ------------------------------------------------- */

/* "echo, counter, ..." or "fork | thread | ...": the registries' names. */
static void app_names(char *buf, size_t len, const char *sep)
{
    size_t used = 0;
    buf[0] = 0;
    for (const yard_app_t *const *a = yard_apps; *a && used < len; a++) {
        int w = snprintf(buf + used, len - used, "%s%s", a == yard_apps ? "" : sep, (*a)->name);
        used += w > 0 ? (size_t)w : 0;
    }
}

static void model_names(char *buf, size_t len, const char *sep)
{
    size_t used = 0;
    buf[0] = 0;
    for (const yard_model_t *const *m = yard_models; *m && used < len; m++) {
        int w = snprintf(buf + used, len - used, "%s%s", m == yard_models ? "" : sep, (*m)->name);
        used += w > 0 ? (size_t)w : 0;
    }
}

/* --idle-timeout's default of each app, read from the app's descriptor so
 * the help cannot drift from what the apps declare. */
static void help_idle_defaults(FILE *f)
{
    for (const yard_app_t *const *a = yard_apps; *a; a++) {
        fprintf(f, "                         %-9s ", (*a)->name);
        if ((*a)->idle_exempt) {
            char text[512];
            snprintf(text, sizeof text, "not accepted: %s %s", IDLE_EXEMPT_WHY, (*a)->idle_exempt);
            yard_opt_print_wrapped(f, text, 35, 35);
        } else if ((*a)->default_idle_timeout_ns) {
            char d[32];
            format_duration((*a)->default_idle_timeout_ns, d, sizeof d);
            fprintf(f, "%s\n", d);
        } else {
            fprintf(f, "off\n");
        }
    }
}

/* What the engine's table cannot know: the names in the registries. */
static void help_engine_after(FILE *f, const yard_opt_t *opt)
{
    char names[256], text[300];
    if (strcmp(opt->name, "app") == 0) {
        app_names(names, sizeof names, " | ");
        snprintf(text, sizeof text, "one of: %s", names);
        fprintf(f, "%23s", "");
        yard_opt_print_wrapped(f, text, 23, 23);
    } else if (strcmp(opt->name, "model") == 0) {
        model_names(names, sizeof names, " | ");
        snprintf(text, sizeof text, "one of: %s", names);
        fprintf(f, "%23s", "");
        yard_opt_print_wrapped(f, text, 23, 23);
    } else if (strcmp(opt->name, "idle-timeout") == 0) {
        help_idle_defaults(f);
    }
}

static void help_section(FILE *f, const char *kind, const char *name, const yard_opt_t *opts)
{
    fprintf(f, "\n%s %s:\n", kind, name);
    if (yard_opt_count(opts) == 0)
        fprintf(f, "  (no flags of its own)\n");
    yard_opt_help(f, opts, NULL);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: yard-serve --app APP --model MODEL [--listen HOST:PORT] [options]\n"
            "\n"
            "Runs one sans-I/O app under one concurrency model. Once the sockets accept\n"
            "connections the first line on stdout is exactly 'listening HOST:PORT', with\n"
            "one more ' HOST:PORT' for each further address (--listen localhost:P can name\n"
            "127.0.0.1 and ::1).\n"
            "SIGTERM or SIGINT stops accepting, closes every connection, reaps every\n"
            "child process and exits 0.\n"
            "\n"
            "Engine flags (any app, any model):\n");
    yard_opt_help(f, engine_opts, help_engine_after);
    fprintf(f,
            "\n"
            "Each model and each app accepts the flags listed in its section; a flag of\n"
            "another one is a usage error. --workers defaults to the CPUs in the affinity\n"
            "mask, %d here.\n",
            yard_cpus_available());
    for (const yard_model_t *const *m = yard_models; *m; m++)
        help_section(f, "--model", (*m)->name, (*m)->opts);
    for (const yard_app_t *const *a = yard_apps; *a; a++)
        help_section(f, "--app", (*a)->name, (*a)->opts);
    fprintf(f, "\n"
               "Exit status: 0 after a clean stop, 1 on a runtime error (e.g. the port is in use),\n"
               "2 on a usage error.\n");
}

static void json_bool(const char *key, bool v)
{
    printf("\"%s\": %s", key, v ? "true" : "false");
}

static void list_models(bool json)
{
    char why[256];
    if (!json) {
        for (const yard_model_t *const *m = yard_models; *m; m++) {
            printf("%-10s %s\n", (*m)->name, (*m)->summary);
            if ((*m)->unavailable && (*m)->unavailable(why, sizeof why))
                printf("%-10s (unavailable here: %s)\n", "", why);
        }
        return;
    }
    printf("[");
    for (const yard_model_t *const *m = yard_models; *m; m++) {
        const yard_model_traits_t *t = &(*m)->traits;
        const char *unavailable = (*m)->unavailable ? (*m)->unavailable(why, sizeof why) : NULL;
        printf("%s\n  {\"name\": ", m == yard_models ? "" : ",");
        yard_json_string(stdout, (*m)->name);
        printf(", \"summary\": ");
        yard_json_string(stdout, (*m)->summary);
        printf(", ");
        json_bool("available", unavailable == NULL);
        printf(", \"unavailable_reason\": ");
        if (unavailable)
            yard_json_string(stdout, unavailable);
        else
            printf("null");
        /* The harness reads these two; they follow from the table. */
        printf(", \"flags\": {");
        json_bool("workers", yard_opt_find((*m)->opts, "workers") != NULL);
        printf(", ");
        json_bool("procs", yard_opt_find((*m)->opts, "procs") != NULL);
        printf("},\n   \"traits\": {");
        json_bool("multi_threaded", t->multi_threaded);
        printf(", ");
        json_bool("multi_process", t->multi_process);
        printf(", ");
        json_bool("lightweight_threads", t->lightweight_threads);
        printf(", ");
        json_bool("event_based", t->event_based);
        printf(", ");
        json_bool("completion_based", t->completion_based);
        printf(", ");
        json_bool("explicit_concurrency", t->explicit_concurrency);
        printf(", \"shared_state\": ");
        yard_json_string(stdout, t->shared_state);
        printf(", \"ipc\": ");
        yard_json_string(stdout, t->ipc);
        printf(", \"error_isolation\": ");
        yard_json_string(stdout, t->error_isolation);
        printf("},\n   \"options\": ");
        yard_opt_json(stdout, (*m)->opts);
        printf("}");
    }
    printf("\n]\n");
}

static void list_apps(bool json)
{
    if (json)
        printf("[");
    for (const yard_app_t *const *a = yard_apps; *a; a++) {
        if (!json) {
            printf("%-10s %s\n", (*a)->name, (*a)->summary);
            continue;
        }
        printf("%s\n  {\"name\": ", a == yard_apps ? "" : ",");
        yard_json_string(stdout, (*a)->name);
        printf(", \"summary\": ");
        yard_json_string(stdout, (*a)->summary);
        printf(", ");
        json_bool("uses_out", (*a)->uses_out);
        printf(",\n   \"options\": ");
        yard_opt_json(stdout, (*a)->opts);
        printf("}");
    }
    if (json)
        printf("\n]\n");
}

/* --help, --version, --list-apps or --list-models: what was asked for. */
static void print_info(const struct serve_args *a)
{
    if (a->help)
        usage(stdout);
    else if (a->version)
        printf("yard-serve 0.1.0\n");
    else if (a->list_apps)
        list_apps(a->json);
    else
        list_models(a->json);
}

/* ---- the command line --------------------------------------------------- */


/* Sets opt from text in settings, or exits naming the flag and the form. */
static void set_or_exit(const yard_opt_t *opt, void *settings, const char *text)
{
    char why[512];
    if (yard_opt_set(opt, settings, text, why, sizeof why) < 0)
        yard_usage_exit(progname, "--%s: %s", opt->name, why);
}

static void defaults_or_exit(const yard_opt_t *opts, void *settings)
{
    char err[512];
    if (yard_opt_defaults(opts, settings, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", progname, err); /* a mistake in a table */
        exit(1);
    }
}

/* Appends "name" to a list of owners, "a, b". */
static void add_owner(char *buf, size_t len, const char *name)
{
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "%s%s", used ? ", " : "", name);
}

/* A flag that belongs to other models or apps than the chosen ones: the
 * error says whose it is. */
static _Noreturn void misplaced(const yard_opt_t *opt, const yard_app_t *app,
                                const yard_model_t *model)
{
    char models[256] = "", apps[256] = "";
    for (const yard_model_t *const *m = yard_models; *m; m++) {
        const yard_opt_t *o = yard_opt_find((*m)->opts, opt->name);
        if (o && o->misplaced)
            yard_usage_exit(progname, "%s", o->misplaced);
        if (o)
            add_owner(models, sizeof models, (*m)->name);
    }
    for (const yard_app_t *const *a = yard_apps; *a; a++) {
        const yard_opt_t *o = yard_opt_find((*a)->opts, opt->name);
        if (o && o->misplaced)
            yard_usage_exit(progname, "%s", o->misplaced);
        if (o)
            add_owner(apps, sizeof apps, (*a)->name);
    }
    if (models[0] && apps[0])
        yard_usage_exit(progname, "--%s applies to --model %s and to --app %s, not to --model %s with --app %s",
                    opt->name, models, apps, model->name, app->name);
    if (models[0])
        yard_usage_exit(progname, "--%s has no meaning for --model %s (it is a flag of --model %s)", opt->name,
                    model->name, models);
    yard_usage_exit(progname, "--%s applies to --app %s, not --app %s", opt->name, apps, app->name);
}

static void check_required(const yard_opt_t *opts, const bool *given, const char *kind,
                           const char *name)
{
    for (size_t i = 0; opts && opts[i].name; i++)
        if (opts[i].required && !given[i])
            yard_usage_exit(progname, "%s %s needs --%s %s (%s)", kind, name, opts[i].name,
                        opts[i].form ? opts[i].form : "", opts[i].required);
}

/* Every table yard_opt_scan should know: the engine's, every model's and
 * every app's, so that a flag of another app is told apart from a typo. */
static size_t all_tables(const yard_opt_t **tables, size_t cap)
{
    size_t n = 0;
    tables[n++] = engine_opts;
    for (const yard_model_t *const *m = yard_models; *m && n < cap; m++)
        tables[n++] = (*m)->opts;
    for (const yard_app_t *const *a = yard_apps; *a && n < cap; a++)
        tables[n++] = (*a)->opts;
    return n;
}

static bool engine_given(const yard_opt_arg_t *args, size_t nargs, const char *name)
{
    for (size_t i = 0; i < nargs; i++)
        if (strcmp(args[i].opt->name, name) == 0)
            return true;
    return false;
}

static void check_app_and_model(const struct serve_args *a, const yard_app_t **app,
                                const yard_model_t **model)
{
    char names[256];
    if (!a->cfg.app) {
        app_names(names, sizeof names, ", ");
        yard_usage_exit(progname, "--app is required (one of %s)", names);
    }
    if (!a->cfg.model) {
        model_names(names, sizeof names, ", ");
        yard_usage_exit(progname, "--model is required (one of %s)", names);
    }
    *app = yard_app_find(a->cfg.app);
    if (!*app)
        yard_usage_exit(progname, "--app: unknown app '%s' (try --list-apps)", a->cfg.app);
    *model = yard_model_find(a->cfg.model);
    if (!*model)
        yard_usage_exit(progname, "--model: unknown model '%s' (try --list-models)", a->cfg.model);
}

/* The flags that are not the engine's go to the chosen model (into the
 * engine's config) or the chosen app (into its settings); anything else is
 * another one's. */
static void apply_model_and_app(const yard_opt_arg_t *args, size_t nargs, yard_config_t *cfg,
                                const yard_app_t *app, const yard_model_t *model, void *settings)
{
    bool model_given[yard_opt_count(model->opts) + 1], app_given[yard_opt_count(app->opts) + 1];
    memset(model_given, 0, sizeof model_given);
    memset(app_given, 0, sizeof app_given);
    defaults_or_exit(model->opts, cfg);
    defaults_or_exit(app->opts, settings);
    for (size_t i = 0; i < nargs; i++) {
        const char *name = args[i].opt->name;
        const yard_opt_t *o;
        if (yard_opt_find(engine_opts, name)) {
            continue;
        } else if ((o = yard_opt_find(model->opts, name))) {
            set_or_exit(o, cfg, args[i].value);
            model_given[o - model->opts] = true;
        } else if ((o = yard_opt_find(app->opts, name))) {
            set_or_exit(o, settings, args[i].value);
            app_given[o - app->opts] = true;
        } else {
            misplaced(args[i].opt, app, model);
        }
    }
    check_required(model->opts, model_given, "--model", model->name);
    check_required(app->opts, app_given, "--app", app->name);
}

/* --tls-listen needs its certificate and key, and they need it; TLS only
 * (no --listen) leaves no plain listener. */
static void check_tls_flags(const yard_opt_arg_t *args, size_t nargs, yard_config_t *cfg)
{
    bool tls = cfg->tls_listen.n > 0;
    if (!tls && (cfg->tls_cert || cfg->tls_key || engine_given(args, nargs, "tls-handshake-timeout") ||
                 engine_given(args, nargs, "tls-handshake")))
        yard_usage_exit(progname, "--tls-cert, --tls-key, --tls-handshake-timeout and "
                        "--tls-handshake apply to TLS listeners: add --tls-listen HOST:PORT%s", "");
    if (tls && (!cfg->tls_cert || !cfg->tls_key))
        yard_usage_exit(progname, "--tls-listen needs --tls-cert FILE and --tls-key FILE%s", "");
    if (tls && cfg->tls_handshake_timeout_ns == 0)
        yard_usage_exit(progname, "--tls-handshake-timeout must be above 0%s", "");
    if (tls && cfg->pair)
        yard_usage_exit(progname, "--pair cannot carry TLS: its two processes would share one "
                        "TLS session (docs/tls.md)%s", "");
    if (tls && !engine_given(args, nargs, "listen"))
        cfg->listen.n = 0;
}

/* What combines the engine's flags with the chosen app and model. */
static void check_engine_flags(const yard_opt_arg_t *args, size_t nargs, yard_config_t *cfg,
                               const yard_app_t *app, const yard_model_t *model)
{
    if ((engine_given(args, nargs, "out") || engine_given(args, nargs, "flush")) && !app->uses_out)
        yard_usage_exit(progname, "--out and --flush apply to apps that write a file (sink), not --app %s",
                    app->name);
    if (app->uses_out && !cfg->out)
        cfg->out = "/dev/null";
    bool any_v6 = false;
    for (int i = 0; i < cfg->listen.n; i++)
        any_v6 = any_v6 || cfg->listen.a[i].ss.ss_family == AF_INET6;
    if (cfg->ipv6_only && !any_v6)
        yard_usage_exit(progname, "--ipv6-only applies to an IPv6 --listen ([ADDR]:PORT, e.g. [::]:6667)%s", "");
    check_tls_flags(args, nargs, cfg);
    bool idle_given = engine_given(args, nargs, "idle-timeout");
    if (idle_given && app->idle_exempt)
        yard_usage_exit(progname, "--idle-timeout does not apply to --app %s: " IDLE_EXEMPT_WHY " %s", app->name,
                    app->idle_exempt);
    if (!idle_given)
        cfg->idle_timeout_ns = app->default_idle_timeout_ns;
    char err[512];
    if (model->check && model->check(cfg, app, err, sizeof err) < 0)
        yard_usage_exit(progname, "%s", err);
}

/* ---- serving ---------------------------------------------------------- */

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

static int serve(const yard_config_t *cfg, const yard_app_t *app, const yard_model_t *model,
                 const void *settings, int log_level, bool idle_given)
{
    char err[256];
    yard_log_init(progname, log_level);
    yard_server_t srv = {.cfg = cfg, .app = app, .model = model, .out_fd = -1};
    int status = 1;
    bool inited = false;
    srv.sig_fd = yard_signals_setup(err, sizeof err);
    if (srv.sig_fd < 0) {
        fprintf(stderr, "%s: %s\n", progname, err);
        return 1;
    }
    int rc = yard_shm_create(&srv.shm, cfg->shm_bytes);
    if (rc < 0) {
        fprintf(stderr, "%s: mmap shared region of %zu bytes: %s\n", progname,
                cfg->shm_bytes < 4096 ? (size_t)4096 : cfg->shm_bytes, strerror(-rc));
        goto out;
    }
    srv.shared = yard_shm_alloc(srv.shm, sizeof *srv.shared);
    yard_stopping_attach(srv.shared);
    if (app->init && app->init(&srv.app_state, cfg, settings, srv.shm, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", progname, err);
        goto out;
    }
    inited = true;
    if (app->uses_out) {
        srv.out_fd = open(cfg->out, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
        if (srv.out_fd < 0) {
            fprintf(stderr, "%s: cannot open --out %s: %s\n", progname, cfg->out, strerror(errno));
            goto out;
        }
    }
    if (cfg->tls_listen.n) {
        if (yard_tls_ctx_new(&srv.tls, cfg->tls_cert, cfg->tls_key, err, sizeof err) < 0) {
            fprintf(stderr, "%s: %s\n", progname, err);
            goto out;
        }
        yard_server_reload_on_hup(srv.tls);
    }
    if (yard_server_listen(&srv, model->reuseport, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", progname, err);
        goto out;
    }
    char where[YARD_MAX_LISTEN * YARD_ADDR_STRLEN];
    yard_server_format_bound(&srv, where, sizeof where);
    printf("listening %s\n", where);
    fflush(stdout);
    yard_log_info("serving app %s with model %s on %s", app->name, model->name, where);
    log_idle_timeout(app, cfg, idle_given);
    yard_background_t *bg = NULL;
    if (cfg->background_fib && !model->own_background) {
        int threads = cfg->workers > 0 ? cfg->workers : yard_cpus_available();
        bg = yard_background_pool_start(cfg->background_fib, threads, err, sizeof err);
        if (!bg) {
            fprintf(stderr, "%s: %s\n", progname, err);
            goto out;
        }
    }
    status = model->serve(&srv);
    if (bg) {
        yard_background_stats_t st;
        yard_background_pool_stop(bg, &st);
        yard_background_log(cfg->background_fib, "on an offload pool", &st);
    }
    yard_log_info("stopped: %lu connections accepted, %lu refused",
                  atomic_load(&srv.shared->accepted), atomic_load(&srv.shared->rejected));
out:
    yard_listen_set_close(&srv.ls);
    yard_server_reload_on_hup(NULL);
    yard_tls_ctx_free(srv.tls);
    if (srv.out_fd >= 0 && close(srv.out_fd) < 0) {
        fprintf(stderr, "%s: closing --out %s: %s\n", progname, cfg->out, strerror(errno));
        status = 1;
    }
    yard_bus_stop_wakers(); /* they read buses in the shared region */
    if (app->fini && inited) /* an init that failed released what it had */
        app->fini(srv.app_state);
    yard_shm_destroy(srv.shm);
    close(srv.sig_fd);
    return status;
}

int main(int argc, char **argv)
{
    /* The shared region is reserved, and touched only as it is used. */
    static struct serve_args a = {.cfg = {.shm_bytes = (size_t)512 << 20}};
    const yard_opt_t *tables[64];
    size_t ntables = all_tables(tables, sizeof tables / sizeof tables[0]);
    yard_opt_arg_t *args = calloc((size_t)argc + 1, sizeof *args);
    size_t nargs;
    char err[512];
    if (!args) {
        fprintf(stderr, "%s: out of memory\n", progname);
        return 1;
    }
    defaults_or_exit(engine_opts, &a);
    if (yard_opt_scan(argc, argv, tables, ntables, args, &nargs, err, sizeof err) < 0)
        yard_usage_exit(progname, "%s", err);
    for (size_t i = 0; i < nargs; i++) {
        const yard_opt_t *o = yard_opt_find(engine_opts, args[i].opt->name);
        if (o)
            set_or_exit(o, &a, args[i].value);
    }
    if (a.help || a.version || a.list_apps || a.list_models) {
        free(args);
        print_info(&a);
        return 0;
    }
    const yard_app_t *app;
    const yard_model_t *model;
    check_app_and_model(&a, &app, &model);
    /* Lives as long as the process: the app keeps pointers into it. */
    void *settings = calloc(1, app->settings_size ? app->settings_size : 1);
    if (!settings) {
        fprintf(stderr, "%s: out of memory\n", progname);
        return 1;
    }
    apply_model_and_app(args, nargs, &a.cfg, app, model, settings);
    check_engine_flags(args, nargs, &a.cfg, app, model);
    char why[256];
    if (model->unavailable && model->unavailable(why, sizeof why)) {
        fprintf(stderr, "%s: --model %s is unavailable on this machine: %s\n", progname,
                model->name, why);
        free(args);
        free(settings);
        return 1;
    }
    bool idle_given = engine_given(args, nargs, "idle-timeout");
    free(args);
    int status = serve(&a.cfg, app, model, settings, a.log_level, idle_given);
    free(settings);
    return status;
}
