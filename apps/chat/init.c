/* The chat app (docs/chat.md): its flags, its start and end, and its entry
 * in the apps' registry (yard_app_chat). Its modules are in this directory,
 * one concern each; chat.h says how they fit together, and
 * docs/architecture.md how a line travels through them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../apps.h"
#include "commands.h"
#include "kline.h"
#include "register.h"
#include "relay.h"
#include "session.h"
#include "yard/clock.h"
#include "yard/log.h"

/* The log's writer thread wrote deferred presence: everyone hears of it. */
static void presence_published(void *arg, uint64_t last_id)
{
    struct chat_app *app = arg;
    yard_bus_publish(app->bus, 0, last_id);
}

static int chat_init(void **state, const yard_config_t *cfg, const void *settings,
                     yard_shm_t *shm, char *err, size_t errlen)
{
    const struct chat_settings *set = settings;
    if (chat_commands_check() < 0) { /* a row out of place: bsearch would miss commands */
        snprintf(err, errlen, "the chat's command table is not sorted by name");
        return -1;
    }
    bool own_max = set->sendq_max != 0;
    if ((own_max && set->sendq_hold >= set->sendq_max) ||
        set->guests_sendq_hold >= set->guests_sendq_max) {
        bool guests = !(own_max && set->sendq_hold >= set->sendq_max);
        snprintf(err, errlen, "--%ssendq-hold must be below --%ssendq-max (%zu bytes)",
                 guests ? "guests-" : "", guests ? "guests-" : "",
                 guests ? set->guests_sendq_max : set->sendq_max);
        return -1;
    }
    struct chat_app *app = yard_shm_alloc(shm, sizeof *app);
    if (!app) {
        snprintf(err, errlen, "shared region too small");
        return -1;
    }
    app->set = set;
    if (set->sts_duration_ns && cfg->tls_listen.n == 0) {
        snprintf(err, errlen, "--sts-duration points clients to TLS: add --tls-listen");
        return -1;
    }
    size_t engine_max = cfg->max_sendq ? cfg->max_sendq : YARD_OUT_LIMIT;
    app->max = set->sendq_max; /* 0: the engine's */
    app->hold = own_max || set->sendq_hold < engine_max / 2 ? set->sendq_hold : engine_max / 2;
    /* A guest never gets more room than an account. */
    size_t account_max = own_max ? set->sendq_max : engine_max;
    app->guests_max = set->guests_sendq_max < account_max ? set->guests_sendq_max : account_max;
    app->guests_hold = set->guests_sendq_hold < app->guests_max / 2 ? set->guests_sendq_hold
                                                                    : app->guests_max / 2;
    app->cs = yard_shm_alloc(shm, sizeof *app->cs);
    /* Topic 0: the log's last id. Topic 1 + i: unregistered slot i was
     * shed (its holder is to close). */
    app->bus = yard_bus_create(shm, 1 + set->max_unregistered);
    unsigned members =
        cfg->max_conns > 0 && cfg->max_conns < 100000 ? (unsigned)cfg->max_conns : 16384;
    if (!app->cs || !app->bus ||
        chat_state_init(app->cs, shm, set->max_channels, members, err, errlen) < 0) {
        if (!err[0])
            snprintf(err, errlen, "shared region too small");
        return -1;
    }
    chat_guard_opts_t go = CHAT_GUARD_DEFAULT_OPTS;
    go.max_pending = set->login_max_pending;
    go.pending_per_addr = set->login_pending_per_addr;
    go.max_unregistered = set->max_unregistered;
    go.unregistered_per_addr = set->unregistered_per_addr;
    go.open_share = set->unregistered_guest_share;
    go.addr_failures = (chat_rate_t){set->login_fail_addr.burst, set->login_fail_addr.per_s};
    go.account_failures = (chat_rate_t){set->login_fail_account.burst,
                                        set->login_fail_account.per_s};
    /* No connection stays unregistered past its timeout; a slot older than
     * that (its process was killed) is free again. */
    go.unregistered_ttl_ns = set->register_timeout_ns + 10 * YARD_NS_PER_S;
    app->guard = chat_guard_create(shm, &go, err, errlen);
    if (!app->guard)
        return -1;
    yard_chat_table_t tables[CHAT_TABLES];
    chat_state_tables(tables);
    yard_chat_store_opts_t so = {.tables = tables, .ntables = CHAT_TABLES,
                                 .appended = presence_published, .appended_arg = app};
    yard_chatlog_opts_default(&so.log);
    so.log.fsync = set->fsync_mode;
    so.log.fsync_interval_ns = set->fsync_interval_ns;
    so.log.retain_s = set->retain_s;
    so.server_password = set->server_password;
    char warn[800];
    if (yard_chat_store_open(set->data_dir, &so, &app->store, warn, sizeof warn, err, errlen) <
        0)
        return -1;
    if (warn[0])
        yard_log_warn("chat: %s", warn);
    chat_state_attach(app->cs, tables);
    app->log = yard_chat_store_log(app->store);
    if (chat_klines_init(app, shm, err, errlen) < 0)
        return -1;
    yard_bus_publish(app->bus, 0, yard_chatlog_last_id(app->log));
    if (chat_server_name_init(app, set->server_name, err, errlen) < 0)
        return -1;
    *state = app;
    return 0;
}

static void chat_fini(void *state)
{
    struct chat_app *app = state;
    yard_chat_store_close(app->store);
}

/* --retain: a duration, with whole days (30d) up to a century besides
 * what yard_parse_duration_ns reads; kept in seconds. */
static int parse_retain(const char *text, void *field, char *err, size_t errlen)
{
    uint64_t *retain_s = field;
    size_t n = strlen(text);
    uint64_t ns;
    if (n > 1 && text[n - 1] == 'd') {
        char *end;
        errno = 0;
        long days = strtol(text, &end, 10);
        if (errno == 0 && end == text + n - 1 && days >= 0 && days <= 36500) {
            *retain_s = (uint64_t)days * 86400;
            return 0;
        }
    } else if (yard_parse_duration_ns(text, YARD_NS_PER_S, &ns) == 0) {
        *retain_s = ns / YARD_NS_PER_S;
        return 0;
    }
    snprintf(err, errlen,
             "expected a duration such as 30d (up to 36500d), 12h or 0 (keep everything), got '%s'",
             text);
    return -1;
}

static const yard_opt_choice_t chat_fsyncs[] = {
    YARD_OPT_CHOICE("always", YARD_CHATLOG_FSYNC_ALWAYS),
    YARD_OPT_CHOICE("interval", YARD_CHATLOG_FSYNC_INTERVAL),
    YARD_OPT_CHOICE("never", YARD_CHATLOG_FSYNC_NEVER), YARD_OPT_CHOICES_END};

static const yard_opt_choice_t chat_onoff[] = {YARD_OPT_CHOICE("on", 1), YARD_OPT_CHOICE("off", 0),
                                               YARD_OPT_CHOICES_END};

static const yard_opt_choice_t chat_plaintext[] = {
    YARD_OPT_CHOICE("allow", 1), YARD_OPT_CHOICE("refuse", 0), YARD_OPT_CHOICES_END};

#define CHAT_FIELD(member) YARD_OPT_FIELD(struct chat_settings, member)

static const yard_opt_t chat_opts[] = {
    {.name = "data", .form = "DIR", .type = YARD_OPT_STRING, CHAT_FIELD(data_dir),
     .help = "the data directory: accounts (yard-chat account), the message log, read positions",
     .required = "accounts, the message log, read positions"},
    {.name = "server-name", .form = "NAME", .type = YARD_OPT_STRING, CHAT_FIELD(server_name),
     .help = "the server's name in the welcome (002, 004), PONG, TIME, VERSION, WHO, WHOIS and "
             "WHOWAS: letters, digits, '-' and dots, as a host name (default: the host name)"},
    {.name = "fsync", .form = "MODE", .type = YARD_OPT_ENUM, CHAT_FIELD(fsync_mode),
     .choices = chat_fsyncs, .def = "interval",
     .help = "when the message log reaches the disk: 'always' (before a message is relayed), "
             "'interval' or 'never'"},
    {.name = "fsync-interval-ms", .form = "N", .type = YARD_OPT_MS, CHAT_FIELD(fsync_interval_ns),
     .min = 1, .max = 3600000, .def = "100", .help = "with --fsync interval: every N ms"},
    {.name = "replay-max", .form = "N", .type = YARD_OPT_INT, CHAT_FIELD(replay_max), .min = 0,
     .max = 1000000, .def = "1000", .help = "on JOIN, replay at most N missed messages"},
    {.name = "retain", .form = "DUR", .type = YARD_OPT_CUSTOM, CHAT_FIELD(retain_s),
     .parse = parse_retain, .def = "0",
     .help = "delete log segments older than DUR, e.g. 30d; 0 keeps everything"},
    {.name = "registration-timeout-ms", .form = "N", .type = YARD_OPT_MS,
     CHAT_FIELD(register_timeout_ns), .min = 1, .max = 3600000, .def = "10000",
     .help = "time to log in; a client that has not is closed"},
    {.name = "login-fail-delay-ms", .form = "N", .type = YARD_OPT_MS,
     CHAT_FIELD(login_fail_delay_ns), .min = 0, .max = 60000, .def = "1000",
     .help = "a failed login or OPER is answered after N ms per failure of its connection so "
             "far (at most 10 N), nothing else read meanwhile; 0: at once"},
    {.name = "flood-rate", .form = "N", .type = YARD_OPT_INT, CHAT_FIELD(flood_rate), .min = 0,
     .max = 1000000, .def = "100",
     .help = "tokens per second one client may spend, sustained: a line costs one, a list of "
             "targets one each, a LIST, WHO or NAMES one per 10 lines of its answer (docs/chat.md "
             "lists every price); a faster client is not read until it is due; 0: no limit "
             "(benchmarks of the log)"},
    {.name = "flood-burst", .form = "N", .type = YARD_OPT_INT, CHAT_FIELD(flood_burst), .min = 1,
     .max = 1000000, .def = "200",
     .help = "tokens one client may spend at once (a line is one) before --flood-rate applies"},
    {.name = "ping-interval-ms", .form = "N", .type = YARD_OPT_MS, CHAT_FIELD(ping_interval_ns),
     .min = 0, .max = 86400000, .def = "120000",
     .help = "PING a logged-in client that has sent nothing for N ms; 0: never"},
    {.name = "ping-timeout-ms", .form = "N", .type = YARD_OPT_MS, CHAT_FIELD(ping_timeout_ns),
     .min = 1, .max = 3600000, .def = "60000",
     .help = "close a client that sends nothing for N ms after the server's PING "
             "('ERROR :... Ping timeout')"},
    {.name = "max-channels", .form = "N", .type = YARD_OPT_INT, CHAT_FIELD(max_channels), .min = 1,
     .max = 4096, .def = "1024",
     .help = "channels the server holds at once; a channel nobody is in gives its slot back"},
    {.name = "max-channels-per-account", .form = "N", .type = YARD_OPT_INT,
     CHAT_FIELD(channels_per_account), .min = 1, .max = 4096, .def = "50",
     .help = "channels one account may be in, over all its connections; announced as CHANLIMIT"},
    {.name = "login-max-pending", .form = "N", .type = YARD_OPT_INT,
     CHAT_FIELD(login_max_pending), .min = 1, .max = 4096, .def = "16",
     .help = "password checks in flight, server-wide; past it a login is told to try again, "
             "nothing is hashed"},
    {.name = "login-max-pending-per-addr", .form = "N", .type = YARD_OPT_INT,
     CHAT_FIELD(login_pending_per_addr), .min = 1, .max = 4096, .def = "2",
     .help = "checks in flight from one source address (an IPv4 address or an IPv6 /64); more "
             "wait"},
    {.name = "login-failures-per-addr", .form = "N/DUR", .type = YARD_OPT_RATE,
     CHAT_FIELD(login_fail_addr), .def = "30/10m",
     .help = "failed logins allowed from one address: N at once, then N per DUR"},
    {.name = "login-failures-per-account", .form = "N/DUR", .type = YARD_OPT_RATE,
     CHAT_FIELD(login_fail_account), .def = "10/10m",
     .help = "the same per account, whether or not it exists"},
    {.name = "max-unregistered", .form = "N", .type = YARD_OPT_INT, CHAT_FIELD(max_unregistered),
     .min = 1, .max = 65536, .def = "1024", .help = "connections not logged in yet"},
    {.name = "max-unregistered-per-addr", .form = "N", .type = YARD_OPT_INT,
     CHAT_FIELD(unregistered_per_addr), .min = 1, .max = 65536, .def = "64",
     .help = "the same from one address"},
    {.name = "unregistered-guest-share", .form = "PCT", .type = YARD_OPT_INT,
     CHAT_FIELD(unregistered_guest_share), .min = 1, .max = 100, .def = "50",
     .help = "the percentage of --max-unregistered that connections which have offered no "
             "credentials yet (no PASS, no SASL: would-be guests) may hold; when it or the total "
             "is reached, a newcomer takes the place of the oldest of those of the address "
             "holding the most, which is closed (a login in progress is never)"},
    {.name = "server-password-required", .type = YARD_OPT_SWITCH, CHAT_FIELD(server_password),
     .help = "every client gives the server's password (yard-chat server-password set: "
             "DIR/server-password) with PASS before it registers (464 and closed otherwise); "
             "accounts then log in with SASL only"},
    {.name = "guests", .type = YARD_OPT_SWITCH, CHAT_FIELD(guests),
     .help = "a public server: a client that registers with NICK and USER and no credentials is "
             "a guest (accounts' names stay theirs); off: logging in is required"},
    {.name = "guests-may-create-channels", .form = "on|off", .type = YARD_OPT_ENUM,
     CHAT_FIELD(guests_create), .choices = chat_onoff, .def = "on",
     .help = "with --guests: whether a guest's JOIN may create a channel"},
    {.name = "guests-channel-share", .form = "PCT", .type = YARD_OPT_INT,
     CHAT_FIELD(guests_channel_share), .min = 0, .max = 100, .def = "50",
     .help = "with --guests: the percentage of --max-channels that channels guests created (and "
             "no account has joined) may take; past it a guest's JOIN of a new channel is "
             "refused (405), so that accounts always find room"},
    {.name = "guests-per-addr", .form = "N", .type = YARD_OPT_INT, CHAT_FIELD(guests_per_addr),
     .min = 1, .max = 65536, .def = "16",
     .help = "with --guests: guests connected from one address (an IPv4 address or an IPv6 /64)"},
    {.name = "plaintext-login", .form = "allow|refuse", .type = YARD_OPT_ENUM,
     CHAT_FIELD(plaintext_login), .choices = chat_plaintext, .def = "refuse",
     .help = "with --tls-listen: whether a password (PASS or SASL) is taken over a plain "
             "connection; refused, the client is told the TLS port (docs/tls.md)"},
    {.name = "sts-duration", .form = "DUR", .type = YARD_OPT_DURATION,
     CHAT_FIELD(sts_duration_ns), .unit_ns = YARD_NS_PER_S, .def = "0",
     .help = "with --tls-listen: advertise IRCv3 strict transport security (sts) for DUR, so "
             "that clients that know it move to TLS and stay there (e.g. 30d); 0: off"},
    {.name = "sendq-hold", .form = "BYTES", .type = YARD_OPT_SIZE, CHAT_FIELD(sendq_hold),
     .min = 4096, .max = 1L << 30, .def = "256K",
     .help = "output waiting for an account's connection past which its input is not read (its "
             "further lines wait until the output drains)"},
    {.name = "sendq-max", .form = "BYTES", .type = YARD_OPT_SIZE, CHAT_FIELD(sendq_max),
     .min = 0, .max = 1L << 30, .def = "0",
     .help = "output waiting for an account's connection past which it is closed ('send queue "
             "exceeded'); 0: yard-serve's --max-sendq (8 MiB)"},
    {.name = "guests-sendq-hold", .form = "BYTES", .type = YARD_OPT_SIZE,
     CHAT_FIELD(guests_sendq_hold), .min = 4096, .max = 1L << 30, .def = "64K",
     .help = "--sendq-hold for a guest's connection and one not logged in yet"},
    {.name = "guests-sendq-max", .form = "BYTES", .type = YARD_OPT_SIZE,
     CHAT_FIELD(guests_sendq_max), .min = 8192, .max = 1L << 30, .def = "1M",
     .help = "--sendq-max for a guest's connection and one not logged in yet"},
    YARD_OPT_END,
};

const yard_app_t yard_app_chat = {
    .name = "chat",
    .summary = "a chat service speaking an IRC subset: accounts, durable history, offline "
               "catch-up",
    .session_size = sizeof(struct session),
    .idle_exempt = "a client that never logs in is closed after --registration-timeout-ms, and a "
                   "silent one is PINGed (--ping-interval-ms) and closed if it does not answer "
                   "(--ping-timeout-ms)",
    .farewell = "ERROR :Server shutting down\r\n",
    .opts = chat_opts,
    .settings_size = sizeof(struct chat_settings),
    .init = chat_init,
    .fini = chat_fini,
    .open = chat_open,
    .data = chat_data,
    .timer = chat_timer,
    .job_done = chat_job_done,
    .close = chat_close,
    .news = chat_news,
};
