/* The chat harness (chat_harness.h): yard_app_chat driven without sockets,
 * the engine's order of calls (src/core/conn*.c) kept step by step. */
#define _DEFAULT_SOURCE /* mkdtemp */
#define _XOPEN_SOURCE 700 /* nftw */

#include "chat_harness.h"

#include <arpa/inet.h>
#include <ftw.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../apps/apps.h"
#include "yard/clock.h"
#include "../../apps/chat/chat.h"
#include "yard/bus.h"
#include "yard/chat_accounts.h"
#include "yard/chatlog.h"
#include "yard/conn.h"

struct ch_client {
    bool used, gone;      /* connected once; app->close has run */
    bool closing, read_eof;
    void *session;
    yard_buf_t in;        /* input the app has not taken, or may not take yet */
    yard_buf_t out;       /* the transcript */
    yard_buf_t call_out;  /* one callback's output, added to out by apply */
    size_t taken;         /* bytes of out read back as lines */
    uint64_t wake_at;
    bool wake_idle;
    bool job_pending;
    void (*job)(void *arg);
    void *job_arg;
    unsigned long jobs;   /* jobs run for it so far */
    bool watching;
    yard_bus_t *bus;
    uint32_t topic;
    uint64_t seen;
    char line[8192];      /* the line ch_line returned */
};

struct chat_harness {
    const yard_app_t *app;
    char dir[64];
    yard_shm_t *shm;
    yard_config_t cfg;
    void *settings;
    void *state;
    uint64_t now;
    int64_t wall;
    yard_addr_t peer;
    struct ch_client c[CH_CLIENTS_MAX];
    unsigned store_jobs[CH_STORE_OPS]; /* the store's requests run, by op */
};

static void die(const char *what)
{
    fprintf(stderr, "chat harness: %s\n", what);
    abort();
}

chat_harness_t *ch_start(const char *const *flags)
{
    return ch_start_files(flags, NULL);
}

static void put_file(const char *dir, const char *name, const char *content)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(content, f) < 0 || fclose(f) != 0)
        die(path);
}

chat_harness_t *ch_start_files(const char *const *flags, const char *const *files)
{
    chat_harness_t *h = calloc(1, sizeof *h);
    if (!h)
        die("out of memory");
    h->app = &yard_app_chat;
    /* In memory where there is a tmpfs: the log's and the accounts' fsyncs
     * cost nothing there, which the fuzz target's speed depends on. */
    struct stat st;
    bool shm = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0;
    const char *base = shm ? "/dev/shm" : "/tmp";
    snprintf(h->dir, sizeof h->dir, "%s/yard-chat-harness-XXXXXX", base);
    if (!mkdtemp(h->dir))
        die("mkdtemp");
    char err[1024] = "";
    h->settings = calloc(1, h->app->settings_size);
    if (!h->settings || yard_opt_defaults(h->app->opts, h->settings, err, sizeof err) < 0 ||
        yard_opt_set(yard_opt_find(h->app->opts, "data"), h->settings, h->dir, err, sizeof err) <
            0 ||
        /* The tests' transcripts name the server "yard" wherever it runs
         * (without the flag it would be the host's name); a flag overrides it. */
        yard_opt_set(yard_opt_find(h->app->opts, "server-name"), h->settings, "yard", err,
                     sizeof err) < 0)
        die(err[0] ? err : "settings");
    for (const char *const *f = flags; f && *f; f++) {
        char name[64];
        const char *eq = strchr(*f, '=');
        size_t n = eq ? (size_t)(eq - *f) : strlen(*f);
        snprintf(name, sizeof name, "%.*s", (int)n, *f);
        const yard_opt_t *opt = yard_opt_find(h->app->opts, name);
        if (!opt || yard_opt_set(opt, h->settings, eq ? eq + 1 : NULL, err, sizeof err) < 0) {
            fprintf(stderr, "chat harness: --%s: %s\n", name, opt ? err : "no such flag");
            abort();
        }
    }
    for (const char *const *f = files; f && f[0] && f[1]; f += 2)
        put_file(h->dir, f[0], f[1]);
    h->cfg.max_conns = 64; /* the members' table: small, as the harness is */
    int rc = yard_shm_create(&h->shm, (size_t)256 << 20);
    if (rc < 0)
        die(strerror(-rc));
    if (h->app->init(&h->state, &h->cfg, h->settings, h->shm, err, sizeof err) < 0)
        die(err);
    h->now = 1000 * (uint64_t)1000000000; /* any start: the app only sees differences */
    h->wall = yard_wall_ns();
    struct sockaddr_in *sin = (struct sockaddr_in *)&h->peer.ss;
    sin->sin_family = AF_INET;
    sin->sin_port = htons(40000);
    sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    h->peer.len = sizeof *sin;
    return h;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* The connection is gone: app->close, then its buffers (yard_conn_close). */
static void client_gone(chat_harness_t *h, struct ch_client *c)
{
    if (c->gone)
        return;
    c->gone = true;
    if (h->app->close)
        h->app->close(h->state, c->session, &(yard_fx_t){.now_ns = h->now, .wall_ns = h->wall});
    free(c->session);
    c->session = NULL;
    yard_buf_free(&c->in);
    c->watching = false;
    c->wake_at = 0;
}

void ch_stop(chat_harness_t *h)
{
    for (int i = 0; i < CH_CLIENTS_MAX; i++) {
        if (h->c[i].used)
            client_gone(h, &h->c[i]);
        yard_buf_free(&h->c[i].out);
        yard_buf_free(&h->c[i].call_out);
    }
    h->app->fini(h->state);
    yard_bus_stop_wakers();
    yard_shm_destroy(h->shm);
    nftw(h->dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    free(h->settings);
    free(h);
}

void ch_account(chat_harness_t *h, const char *name, const char *password)
{
    char err[512];
    if (yard_accounts_add(h->dir, name, password, 4, err, sizeof err) < 0)
        die(err);
}

void ch_oper(chat_harness_t *h, const char *name, const char *password)
{
    char err[512];
    if (yard_opers_add(h->dir, name, password, 4, err, sizeof err) < 0)
        die(err);
}

const char *ch_data_dir(const chat_harness_t *h) { return h->dir; }

unsigned ch_store_jobs(const chat_harness_t *h, int op)
{
    return op >= 0 && op < CH_STORE_OPS ? h->store_jobs[op] : 0;
}

static struct ch_client *client(chat_harness_t *h, int id)
{
    if (id < 0 || id >= CH_CLIENTS_MAX || !h->c[id].used)
        die("no such client");
    return &h->c[id];
}

/* A callback's output goes to a buffer of its own, so that what it has
 * sent (yard_fx_pending) is its own: nothing earlier waits, the transcript
 * having been "sent". */
static yard_fx_t fx_for(chat_harness_t *h, struct ch_client *c)
{
    yard_buf_clear(&c->call_out);
    return (yard_fx_t){.out = &c->call_out, .now_ns = h->now, .wall_ns = h->wall,
                       .peer = &h->peer};
}

/* conn_apply: what the callback recorded; its output joins the
 * transcript. */
static void apply(chat_harness_t *h, struct ch_client *c, yard_fx_t *fx)
{
    (void)h;
    if (c->call_out.len && yard_buf_append(&c->out, yard_buf_head(&c->call_out),
                                           c->call_out.len) < 0)
        fx->nomem = true;
    yard_buf_clear(&c->call_out);
    if (fx->nomem)
        die("the app ran out of memory");
    if (fx->store && fx->store->len)
        die("the chat wrote to --out");
    if (fx->close)
        c->closing = true;
    if (fx->wake_at) {
        c->wake_at = fx->wake_at == UINT64_MAX ? 0 : fx->wake_at;
        c->wake_idle = fx->wake_idle;
    }
    if (c->closing)
        c->wake_at = 0;
    if (fx->watch_set) {
        c->watching = fx->watch_bus && fx->watch_seen != UINT64_MAX;
        c->bus = fx->watch_bus;
        c->topic = fx->watch_topic;
        c->seen = fx->watch_seen;
    }
    if (fx->job) {
        if (c->job_pending)
            die("the app offloaded a second job before the first finished");
        c->job_pending = true;
        c->job = fx->job;
        c->job_arg = fx->job_arg;
        if (fx->job == yard_chat_store_run) {
            enum yard_chat_op op = *(const enum yard_chat_op *)fx->job_arg;
            if ((unsigned)op < CH_STORE_OPS)
                h->store_jobs[op]++;
        }
    }
}

/* conn_feed: offer what waits in c->in (the bytes of a feed are appended
 * there first: the same bytes the driver's scratch view would offer). */
static void offer(chat_harness_t *h, struct ch_client *c, bool eof)
{
    yard_fx_t fx = fx_for(h, c);
    fx.eof = eof;
    size_t used = h->app->data(h->state, c->session, yard_buf_head(&c->in), c->in.len, &fx);
    if (used > c->in.len)
        die("the app consumed more than it was offered");
    yard_buf_consume(&c->in, eof && !fx.job ? c->in.len : used);
    if (c->in.len > YARD_IN_LIMIT)
        c->closing = true; /* the driver fails it ("request larger than the 1 MiB limit") */
    apply(h, c, &fx);
    /* Input held back for output that waits: none waits here (the
     * transcript is sent), so it is offered again at once, as the driver
     * does once the output drains, while the app takes some of it. */
    if (fx.hold_input && used && c->in.len && !c->job_pending && !c->closing)
        offer(h, c, eof);
}

/* conn_reoffer */
static void reoffer(chat_harness_t *h, struct ch_client *c)
{
    if (c->in.len && !c->job_pending && !c->closing)
        offer(h, c, c->read_eof);
}

/* conn_settle with no pool: every job runs here, then job_done, then the
 * input that waited behind it. */
static void settle_jobs(chat_harness_t *h, struct ch_client *c)
{
    while (c->job_pending) {
        c->job(c->job_arg);
        c->jobs++;
        c->job_pending = false;
        yard_fx_t fx = fx_for(h, c);
        h->app->job_done(h->state, c->session, c->job_arg, &fx);
        apply(h, c, &fx);
        reoffer(h, c);
    }
}

/* conn_call: open, timer, news. */
static void call(chat_harness_t *h, struct ch_client *c, void (*cb)(void *, void *, yard_fx_t *))
{
    yard_fx_t fx = fx_for(h, c);
    cb(h->state, c->session, &fx);
    apply(h, c, &fx);
    reoffer(h, c);
    settle_jobs(h, c);
}

/* conn_finished, then yard_conn_close. */
static void reap(chat_harness_t *h, struct ch_client *c)
{
    if (!c->gone && (c->closing || c->read_eof) && !c->job_pending &&
        !(c->wake_at && !c->wake_idle))
        client_gone(h, c);
}

/* What the writer thread and the bus's waker do in the server, at a fixed
 * point: deferred presence is written and published, and every client
 * whose watch is due hears of it, until nobody has news. */
static void pump(chat_harness_t *h)
{
    struct chat_app *app = h->state;
    for (int round = 0; round < 1000; round++) {
        /* Published whoever wrote them: the writer thread may have written
         * them (write_deferred waits for it and finds nothing left) and not
         * yet published them itself. */
        yard_chatlog_write_deferred(app->log);
        yard_bus_publish(app->bus, 0, yard_chatlog_last_id(app->log));
        bool any = false;
        for (int i = 0; i < CH_CLIENTS_MAX; i++) {
            struct ch_client *c = &h->c[i];
            if (!c->used || c->gone || c->closing || c->job_pending || !c->watching ||
                yard_bus_seq(c->bus, c->topic) <= c->seen)
                continue;
            uint64_t before = c->seen;
            call(h, c, h->app->news);
            reap(h, c);
            any = any || c->seen != before || c->gone;
        }
        for (int i = 0; i < CH_CLIENTS_MAX; i++)
            if (h->c[i].used)
                reap(h, &h->c[i]);
        if (!any)
            return;
    }
    die("news never settles");
}

int ch_connect(chat_harness_t *h)
{
    for (int i = 0; i < CH_CLIENTS_MAX; i++) {
        struct ch_client *c = &h->c[i];
        if (c->used)
            continue;
        c->used = true;
        c->session = calloc(1, h->app->session_size);
        if (!c->session)
            die("out of memory");
        call(h, c, h->app->open);
        pump(h);
        return i;
    }
    die("too many clients");
    return -1;
}

void ch_feed_n(chat_harness_t *h, int id, const void *bytes, size_t n)
{
    struct ch_client *c = client(h, id);
    if (c->gone || c->read_eof || !n)
        return; /* nobody reads a closed connection; a read of nothing is no input */
    if (yard_buf_append(&c->in, bytes, n) < 0)
        die("out of memory");
    if (!c->job_pending && !c->closing)
        offer(h, c, false);
    settle_jobs(h, c);
    reap(h, c);
    pump(h);
}

void ch_feed(chat_harness_t *h, int id, const char *text) { ch_feed_n(h, id, text, strlen(text)); }

void ch_eof(chat_harness_t *h, int id)
{
    struct ch_client *c = client(h, id);
    if (c->gone || c->read_eof)
        return;
    c->read_eof = true;
    if (c->in.len && !c->job_pending)
        offer(h, c, true);
    settle_jobs(h, c);
    reap(h, c);
    pump(h);
}

void ch_drop(chat_harness_t *h, int id)
{
    client_gone(h, client(h, id));
    pump(h);
}

uint64_t ch_next_wake(const chat_harness_t *h)
{
    uint64_t next = 0;
    for (int i = 0; i < CH_CLIENTS_MAX; i++) {
        const struct ch_client *c = &h->c[i];
        if (c->used && !c->gone && c->wake_at && (!next || c->wake_at < next))
            next = c->wake_at;
    }
    return next;
}

uint64_t ch_now(const chat_harness_t *h) { return h->now; }

unsigned long ch_jobs(chat_harness_t *h, int id) { return client(h, id)->jobs; }

int64_t ch_wall(const chat_harness_t *h) { return h->wall; }

void ch_advance(chat_harness_t *h, uint64_t ns)
{
    h->now += ns;
    h->wall += (int64_t)ns;
    for (bool fired = true; fired;) {
        fired = false;
        for (int i = 0; i < CH_CLIENTS_MAX; i++) {
            struct ch_client *c = &h->c[i];
            if (!c->used || c->gone || !c->wake_at || c->wake_at > h->now)
                continue;
            c->wake_at = 0; /* yard_conn_on_timer */
            call(h, c, h->app->timer);
            reap(h, c);
            fired = true;
        }
        pump(h);
    }
}

bool ch_closed(const chat_harness_t *h, int id)
{
    return h->c[id].gone || h->c[id].closing;
}

const char *ch_line(chat_harness_t *h, int id)
{
    struct ch_client *c = client(h, id);
    if (c->taken == c->out.len)
        return NULL; /* nothing (and maybe no buffer yet) */
    const char *start = (const char *)yard_buf_head(&c->out) + c->taken;
    size_t left = c->out.len - c->taken;
    const char *nl = memchr(start, '\n', left);
    if (!nl)
        return NULL;
    size_t n = (size_t)(nl - start);
    c->taken += n + 1;
    if (n && start[n - 1] == '\r')
        n--;
    if (n >= sizeof c->line)
        n = sizeof c->line - 1;
    memcpy(c->line, start, n);
    c->line[n] = 0;
    return c->line;
}

int ch_pending(const chat_harness_t *h, int id)
{
    const struct ch_client *c = &h->c[id];
    int n = 0;
    if (!c->out.len)
        return 0;
    for (size_t i = c->taken; i < c->out.len; i++)
        n += yard_buf_head(&c->out)[i] == '\n';
    return n;
}

char *ch_take_all(chat_harness_t *h, int id)
{
    size_t cap = h->c[id].out.len - h->c[id].taken + 1, len = 0;
    char *all = malloc(cap);
    if (!all)
        die("out of memory");
    for (const char *l; (l = ch_line(h, id));) {
        size_t n = strlen(l);
        memcpy(all + len, l, n);
        all[len + n] = '\n';
        len += n + 1;
    }
    all[len] = 0;
    return all;
}

void ch_discard(chat_harness_t *h, int id)
{
    free(ch_take_all(h, id));
}

static void fail_with_transcript(chat_harness_t *h, int id, const char *file, int line,
                                 const char *what, const char *want)
{
    fprintf(stderr, "%s:%d: client %d: %s '%s'\nwhat it was sent (>> marks the unread):\n", file,
            line, id, what, want);
    struct ch_client *c = &h->c[id];
    const char *all = c->out.len ? (const char *)yard_buf_head(&c->out) : "";
    for (size_t i = 0; i < c->out.len;) {
        const char *nl = memchr(all + i, '\n', c->out.len - i);
        size_t n = nl ? (size_t)(nl - (all + i)) + 1 : c->out.len - i;
        fprintf(stderr, "%s %.*s", i >= c->taken ? ">>" : "  ", (int)n, all + i);
        i += n;
    }
    fputc('\n', stderr);
    exit(1);
}

const char *ch_expect_at(chat_harness_t *h, int id, const char *want, int how, const char *file,
                         int line)
{
    size_t before = client(h, id)->taken;
    for (const char *l; (l = ch_line(h, id));) {
        if (how == CH_EXACT ? strcmp(l, want) == 0 : strncmp(l, want, strlen(want)) == 0)
            return l;
        if (how != CH_SKIP) {
            h->c[id].taken = before;
            fail_with_transcript(h, id, file, line,
                                 how == CH_EXACT ? "the next line is not"
                                                 : "the next line does not start with",
                                 want);
        }
    }
    h->c[id].taken = before;
    fail_with_transcript(h, id, file, line, "no line starting with", want);
    return NULL;
}

void ch_expect_none_at(chat_harness_t *h, int id, const char *file, int line)
{
    if (ch_pending(h, id))
        fail_with_transcript(h, id, file, line, "expected nothing more, got", "");
}

int ch_login(chat_harness_t *h, const char *account, const char *password, const char *caps)
{
    int id = ch_connect(h);
    char line[512];
    if (caps) {
        snprintf(line, sizeof line, "CAP REQ :%s\r\n", caps);
        ch_feed(h, id, line);
    }
    snprintf(line, sizeof line, "PASS %s\r\nNICK %s\r\nUSER %s 0 * :%s\r\n%s", password, account,
             account, account, caps ? "CAP END\r\n" : "");
    ch_feed(h, id, line);
    for (const char *l; (l = ch_line(h, id));)
        if (strstr(l, " 376 ") || strstr(l, " 422 "))
            return id;
    fail_with_transcript(h, id, __FILE__, __LINE__, "no end of the welcome for", account);
    return -1;
}
