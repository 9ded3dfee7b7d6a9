/* The chat app: a self-hosted chat service speaking an IRC subset, so that
 * irssi, WeeChat and ii can use it (docs/chat.md lists what is supported).
 *
 * Every message is appended to a durable log (src/chat/chatlog.c) and the
 * log's last id is published on a news bus; every connection watches the
 * bus and, when there is news, reads the log from where it was and relays
 * what is for it: messages to channels it is in, and to its account. One
 * order for everyone (the log's), nothing lost while offline (a durable
 * read position per account and channel, replayed on JOIN), and the sender
 * of every message is the account that logged in, never what the client
 * claims.
 *
 * Logging in: SASL PLAIN (CAP REQ sasl, AUTHENTICATE) or PASS with
 * NICK = the account. The bcrypt check runs as an offloaded job; a failed
 * login is answered only after a delay that grows with the failures.
 *
 * No callback here touches a file: appends (with their account lookups and
 * syncs), replays on JOIN and reads of a log a connection has fallen
 * behind run as I/O jobs (yard_fx_io), which the engine runs inline in the
 * blocking models and on its I/O thread in the others. A connection that
 * keeps up reads new records from the log's tail in shared memory. */
#define _DEFAULT_SOURCE /* explicit_bzero, timegm; strptime (X/Open) */
#define _XOPEN_SOURCE 700

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "apps.h"
#include "chat_guard.h"
#include "chat_state.h"
#include "yard/bcrypt.h"
#include "yard/chat_accounts.h"
#include "yard/chatlog.h"
#include "yard/clock.h"
#include "yard/hash.h"
#include "yard/log.h"
#include "yard/proto_ircline.h"

#define SERVER "yard"
#define LINE_MAX_MSG YARD_IRC_MSG_MAX
#define LINE_MAX_TAGS YARD_IRC_TAGS_MAX
#define NEWS_BATCH 1024 /* records relayed per news call before yielding */
#define LOG_READ 8192u /* bytes of the log read at a time (the tail or the files) */
#define OWN_RING 1024
#define TARGMAX 4 /* targets of one PRIVMSG or NOTICE */
#define MODES_MAX 4 /* channel mode changes with a parameter in one MODE */
#define CLIENT_TAGS_MAX 512 /* a message's client-only tags kept and relayed (message-tags) */
#define KICK_REASON_MAX 200 /* what of a KICK's reason is kept (a deferred record's text) */
#define CHECK_RETRY_NS (50 * YARD_NS_PER_MS) /* a login waiting for its address's turn */
#define CHAT_REALNAME_MAX 100
#define DEFAULT_COST 12 /* yard-chat account add's, for a server without accounts */

/* Filled from the flags (chat_opts, at the bottom). */
struct chat_settings {
    const char *data_dir;         /* accounts, the message log, read positions */
    int fsync_mode;               /* YARD_CHATLOG_FSYNC_* */
    uint64_t fsync_interval_ns;
    unsigned replay_max;          /* messages replayed on JOIN at most */
    uint64_t retain_s;            /* prune log segments older than this; 0: keep */
    uint64_t register_timeout_ns;
    uint64_t ping_interval_ns;    /* PING a client silent this long (0: never) */
    uint64_t ping_timeout_ns;     /* ... and close it if it stays silent this much longer */
    unsigned max_channels;        /* channels the server can hold */
    unsigned channels_per_account; /* CHANLIMIT: channels one account may be in */
    unsigned flood_rate;          /* lines per second a client may send, sustained (0: any) */
    unsigned flood_burst;         /* ... and at once */
    bool guests;                  /* NICK + USER without credentials: a guest */
    int guests_create;            /* guests may create channels (1) or not (0) */
    unsigned guests_per_addr;     /* guests connected from one address at most */
    /* Login limits (chat_guard.h). */
    unsigned login_max_pending;      /* password checks in flight, server-wide */
    unsigned login_pending_per_addr; /* ... from one source address */
    unsigned max_unregistered;       /* connections not logged in yet, in total */
    unsigned unregistered_per_addr;  /* ... from one source address */
    yard_rate_t login_fail_addr;     /* failed logins per address */
    yard_rate_t login_fail_account;  /* ... per account */
};

struct chat_app {
    const struct chat_settings *set;
    chat_state_t *cs;
    yard_bus_t *bus;
    yard_chatlog_t *log;
    chat_guard_t *guard;
    /* A hash whose salt is used to check passwords of unknown accounts, at
     * the cost of the dearest account (yard_bcrypt_dummy). */
    char dummy_template[YARD_BCRYPT_LEN + 1];
    char motd[2048];
};

/* The IRCv3 capabilities, in CAP LS's order. */
enum {
    CAP_ACCOUNT_TAG = 1u << 0,   /* account=NAME on relayed lines */
    CAP_AWAY_NOTIFY = 1u << 1,   /* AWAY of the members one shares a channel with */
    CAP_BATCH = 1u << 2,         /* a JOIN's replay and CHATHISTORY as batches */
    CAP_ECHO = 1u << 3,          /* echo-message */
    CAP_EXTENDED_JOIN = 1u << 4, /* JOIN #chan account :realname */
    CAP_MESSAGE_TAGS = 1u << 5,  /* msgid=ID (the log's id) on relayed lines */
    CAP_SASL = 1u << 6,
    CAP_TIME = 1u << 7,          /* server-time */
    CAP_CHATHISTORY = 1u << 8,   /* draft/chathistory: CHATHISTORY is answered anyway */
    CAP_READ_MARKER = 1u << 9,   /* draft/read-marker: MARKREAD */
    CAP_MULTI_PREFIX = 1u << 10, /* every rank's prefix in NAMES and WHO ("@+alice") */
};
static const struct {
    const char *name;
    unsigned bit;
} cap_names[] = {
    {"account-tag", CAP_ACCOUNT_TAG}, {"away-notify", CAP_AWAY_NOTIFY},
    {"batch", CAP_BATCH},             {"draft/chathistory", CAP_CHATHISTORY},
    {"draft/read-marker", CAP_READ_MARKER}, {"echo-message", CAP_ECHO},
    {"extended-join", CAP_EXTENDED_JOIN}, {"message-tags", CAP_MESSAGE_TAGS},
    {"multi-prefix", CAP_MULTI_PREFIX},   {"sasl", CAP_SASL},               {"server-time", CAP_TIME},
};
#define NCAPS (sizeof cap_names / sizeof cap_names[0])

/* ST_WAIT: credentials are in, waiting for the address's turn to check. */
enum { ST_NEW, ST_WAIT, ST_AUTH, ST_READY };

struct auth_job {
    const char *dir;
    char dummy_template[YARD_BCRYPT_LEN + 1];
    char account[CHAT_NAME_MAX + 1];
    char canon[CHAT_NAME_MAX + 1];
    char password[YARD_ACCOUNT_PASSWORD_MAX + 1];
    bool ok;
    bool sasl;
    struct crypt_data cd;
};

/* The I/O jobs. Each lives in the session (one of each kind at most is in
 * flight, and with fork --pair each is started and finished by one process
 * of the pair), so none is lost when a connection ends before its
 * job_done. */

/* One PRIVMSG, NOTICE or TOPIC: its targets' accounts looked up, then one
 * append per target. */
enum { POST_NO_SUCH_NICK = 1 };
struct post_job {
    yard_chatlog_t *log;
    chat_state_t *cs;
    const char *dir;
    const char *sender;
    bool sync_state; /* --fsync always: read positions too */
    int type, n;
    char text[LINE_MAX_MSG + 1];
    char tags[CLIENT_TAGS_MAX + 1]; /* client-only tags, stored before a NUL in the text */
    size_t tags_len;
    struct {
        char name[CHAT_CHAN_MAX + 1]; /* the channel as shown, or the nick given */
        bool person;                  /* the account is looked up first */
        size_t text_len;              /* what fits the relayed line */
        int rc;                       /* 0, POST_NO_SUCH_NICK or -errno */
        uint64_t id;
    } t[TARGMAX];
};

/* Records a connection that fell behind the log's tail reads from the
 * files. Its buffer also takes reads of the tail (no job is in flight while
 * news is relayed). */
struct read_job {
    yard_chatlog_t *log;
    yard_chatlog_cursor_t cur;
    long n; /* bytes in buf, or -errno */
    uint8_t buf[LOG_READ];
};

/* A JOIN's replay: the channel's messages after the device's read position
 * up to what the connection had relayed, the newest max of them. */
struct replay_job {
    yard_chatlog_t *log;
    char name[CHAT_CHAN_MAX + 1], key[CHAT_CHAN_MAX + 1];
    uint64_t from, upto;
    unsigned max;
    /* out: */
    uint8_t *recs; /* the records to relay, encoded, back to back */
    size_t recs_len;
    uint64_t total, shown;
    int rc; /* 0, or -errno when (part of) the history could not be read */
};

/* CHATHISTORY: a lookup through the log's index. */
#define HISTORY_MAX 1000 /* messages one request returns at most (ISUPPORT CHATHISTORY) */
enum { HIST_LATEST, HIST_BEFORE, HIST_AFTER, HIST_AROUND, HIST_BETWEEN, HIST_TARGETS };
struct hist_ref {
    bool any;     /* "*" */
    bool by_time; /* timestamp=, else msgid= */
    uint64_t id;
    int64_t ts_ns;
};
struct hist_job {
    yard_chatlog_t *log;
    int sub;
    bool channel;                     /* else a private conversation with key */
    char name[CHAT_CHAN_MAX + 1];     /* the target as given */
    char key[CHAT_CHAN_MAX + 1];      /* casefolded */
    char me[CHAT_NAME_MAX + 1];       /* the asking account, casefolded */
    struct hist_ref a, b;
    unsigned limit;
    /* out: the records, encoded, and where each starts (in id order) */
    uint8_t *recs;
    size_t recs_len, recs_cap;
    size_t *at;
    unsigned n;
    bool down;  /* the walk in progress goes down (its records are reversed after) */
    /* TARGETS: the channels the asker is in (keys), and what was found:
     * each conversation once, with its latest message's time */
    char (*chans)[CHAT_CHAN_MAX + 1];
    unsigned nchans;
    struct hist_target {
        char name[CHAT_CHAN_MAX + 1], key[CHAT_CHAN_MAX + 1];
        int64_t latest_ns;
    } *targets;
    unsigned ntargets;
    uint64_t low_id; /* TARGETS: the walk ends below this id */
    uint64_t stop_id; /* the walk ends at this id (exclusive; 0: none) */
    unsigned want;    /* the walk takes this many */
    int rc;
};

struct session {
    int state;
    bool cap_active;   /* CAP LS/REQ seen: registration waits for CAP END */
    unsigned caps;     /* CAP_* negotiated */
    uint64_t batches;  /* batch references handed out */
    bool umode_i, umode_w; /* user modes: kept and shown, nothing more */
    bool sasl_plain;   /* AUTHENTICATE PLAIN accepted, payload expected */
    bool sasl_done;
    bool got_nick, got_user, have_pass;
    bool discarding;   /* inside an overlong line */
    char nick[CHAT_NAME_MAX + 1];
    char pass[YARD_ACCOUNT_PASSWORD_MAX + 1];
    char sasl_buf[1024];
    size_t sasl_len;
    char account[CHAT_NAME_MAX + 1];
    char account_key[CHAT_NAME_MAX + 1];
    char client[CHAT_CLIENT_MAX + 1]; /* the device: "alice@phone", or USER's name */
    char realname[CHAT_REALNAME_MAX + 1]; /* USER's, shown by extended-join */
    bool client_from_sasl;
    bool guest;              /* --guests: a nick, no account (s->account holds the nick) */
    char sender[CHAT_NAME_MAX + 2]; /* as the log names it: the account, or "~" and the guest's nick */
    bool nick_checking;      /* a nick job is in flight */
    struct nick_job {
        const char *dir;
        char nick[CHAT_NAME_MAX + 1];
        bool reserved; /* an account has that name */
    } nj;
    int slot;
    chat_addr_t addr;        /* the source address the login limits count */
    uint64_t enter_ticket;   /* counted as not logged in yet */
    uint64_t check_ticket;   /* a password check in flight */
    uint64_t check_at;       /* when it began (fx->now_ns) */
    char check_key[CHAT_NAME_MAX + 1]; /* its account, casefolded */
    uint64_t register_by;    /* the registration timeout */
    uint64_t heard_ns;       /* when the client last sent anything */
    char quit_reason[600]; /* what the others are told when it goes ("": the default) */
    /* The quit or away records relayed last: one departure's (or away
     * change's) records, one per channel, are consecutive, and a member who
     * shares several of those channels is told once. */
    uint64_t group_id;
    int group_type;
    uint64_t group_text; /* a hash of its text */
    char group_key[CHAT_NAME_MAX + 1];
    bool group_told;
    uint64_t pinged_ns;      /* when the server PINGed it, unanswered (0: none) */
    /* ST_WAIT: the login to check once the address has its turn. */
    char wait_account[CHAT_NAME_MAX + 1];
    char wait_password[YARD_ACCOUNT_PASSWORD_MAX + 1];
    bool wait_sasl;
    unsigned failures;
    uint64_t fail_until; /* a failed login's answer waits until then */
    int pending_fail;    /* 0, or 904 / 464: the answer to give at fail_until */
    struct auth_job *job;
    yard_chatlog_cursor_t cur; /* where relaying goes on (past seen) */
    uint64_t seen;       /* last log id relayed (or skipped) */
    bool posting;        /* a post job is in flight: news waits for its ids */
    struct post_job post;
    struct read_job rd;
    struct replay_job rp;
    struct hist_job hist;
    char join_rest[LINE_MAX_MSG + 1]; /* JOIN's channels still to join after a replay */
    char join_keys[LINE_MAX_MSG + 1]; /* ... and their keys */
    uint64_t own[OWN_RING]; /* ids this connection appended, oldest first */
    unsigned own_head, own_len;
    double tokens;
    uint64_t tokens_at;
};

/* ---- the I/O jobs (run by the engine: no session, no fx) ------------------ */

static bool is_presence(int type)
{
    return type == YARD_LOGREC_JOIN || type == YARD_LOGREC_PART || type == YARD_LOGREC_QUIT ||
           type == YARD_LOGREC_AWAY || type == YARD_LOGREC_NICK;
}

static void read_job_run(void *arg)
{
    struct read_job *j = arg;
    j->n = yard_chatlog_read(j->log, &j->cur, j->buf, sizeof j->buf);
}

static void post_job_run(void *arg)
{
    struct post_job *j = arg;
    bool appended = false;
    for (int i = 0; i < j->n; i++) {
        if (j->t[i].person) {
            char hash[YARD_BCRYPT_LEN + 1], canon[CHAT_NAME_MAX + 1];
            if (yard_accounts_lookup(j->dir, j->t[i].name, strlen(j->t[i].name), hash, canon,
                                     NULL) != 0) {
                j->t[i].rc = POST_NO_SUCH_NICK;
                continue;
            }
            snprintf(j->t[i].name, sizeof j->t[i].name, "%s", canon);
        }
        int64_t ts;
        const char *text = j->text;
        size_t len = j->t[i].text_len;
        char tagged[CLIENT_TAGS_MAX + 1 + LINE_MAX_MSG + 1];
        if (j->tags_len) { /* the tags, a NUL, the text (include/yard/proto_logrec.h) */
            memcpy(tagged, j->tags, j->tags_len);
            tagged[j->tags_len] = 0;
            memcpy(tagged + j->tags_len + 1, j->text, len);
            text = tagged;
            len += j->tags_len + 1;
        }
        j->t[i].rc = yard_chatlog_append(j->log, j->type, j->sender, strlen(j->sender),
                                         j->t[i].name, strlen(j->t[i].name), text, len,
                                         &j->t[i].id, &ts);
        appended |= j->t[i].rc == 0;
    }
    /* The log syncs itself per --fsync; read positions are a shared file
     * mapping (a crash of any process keeps them) flushed at shutdown, and
     * pushed along here when every message must be durable. */
    if (appended && j->sync_state)
        chat_state_sync(j->cs);
}

/* The newest max matching records of [from + 1, upto], found in one pass
 * that keeps their ids in a ring, then copied in a second. */
static void replay_job_run(void *arg)
{
    struct replay_job *j = arg;
    j->recs = NULL;
    j->recs_len = 0;
    j->total = j->shown = 0;
    j->rc = 0;
    uint64_t *ids = j->max ? calloc(j->max, sizeof *ids) : NULL;
    yard_chatlog_iter_t *it = NULL;
    if ((j->max && !ids) || yard_chatlog_iter_open(j->log, j->from + 1, &it) < 0) {
        free(ids);
        j->rc = -ENOMEM;
        return;
    }
    yard_chatlog_rec_t r;
    char target[CHAT_CHAN_MAX + 1];
    int rc;
    while ((rc = yard_chatlog_next(it, &r)) == 1 && r.id <= j->upto) {
        if (r.target_len > CHAT_CHAN_MAX ||
            (r.type != YARD_LOGREC_MESSAGE && r.type != YARD_LOGREC_NOTICE))
            continue;
        chat_casefold(target, r.target, r.target_len);
        if (strcmp(target, j->key) != 0)
            continue;
        if (j->max)
            ids[j->total % j->max] = r.id;
        j->total++;
    }
    yard_chatlog_iter_close(it);
    j->rc = rc < 0 ? rc : 0;
    j->shown = j->total < j->max ? j->total : j->max;
    uint64_t first = j->shown ? ids[(j->total - j->shown) % j->max] : 0;
    free(ids);
    if (!j->shown)
        return;
    size_t cap = 0;
    uint64_t got = 0;
    if (yard_chatlog_iter_open(j->log, first, &it) < 0) {
        j->shown = 0;
        j->rc = -ENOMEM;
        return;
    }
    while (got < j->shown && yard_chatlog_next(it, &r) == 1 && r.id <= j->upto) {
        if (r.target_len > CHAT_CHAN_MAX ||
            (r.type != YARD_LOGREC_MESSAGE && r.type != YARD_LOGREC_NOTICE))
            continue;
        chat_casefold(target, r.target, r.target_len);
        if (strcmp(target, j->key) != 0)
            continue;
        if (j->recs_len + r.len > cap) {
            size_t ncap = cap ? 2 * cap : 16 * YARD_LOGREC_MAX;
            while (ncap < j->recs_len + r.len)
                ncap *= 2;
            uint8_t *g = realloc(j->recs, ncap);
            if (!g) {
                j->rc = -ENOMEM;
                break;
            }
            j->recs = g;
            cap = ncap;
        }
        long w = yard_logrec_encode(&r, j->recs + j->recs_len, cap - j->recs_len);
        if (w < 0) {
            j->rc = (int)w;
            break;
        }
        j->recs_len += (size_t)w;
        got++;
    }
    yard_chatlog_iter_close(it);
    j->shown = got;
}

/* ---- output helpers ------------------------------------------------------ */

static void sendf(yard_fx_t *fx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sendf(yard_fx_t *fx, const char *fmt, ...)
{
    char line[LINE_MAX_MSG + LINE_MAX_TAGS + 4];
    bool cut;
    va_list ap;
    va_start(ap, fmt);
    size_t n = yard_irc_vline(line, sizeof line, &cut, fmt, ap);
    va_end(ap);
    if (n)
        yard_fx_send(fx, line, n);
}

static const char *who(const struct session *s) { return s->state == ST_READY ? s->account : s->got_nick ? s->nick : "*"; }

static void numeric(yard_fx_t *fx, const struct session *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void numeric(yard_fx_t *fx, const struct session *s, int code, const char *fmt, ...)
{
    char rest[LINE_MAX_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rest, sizeof rest, fmt, ap);
    va_end(ap);
    sendf(fx, ":" SERVER " %03d %s %s", code, who(s), rest);
}

static void format_time(char *out, size_t cap, int64_t ns)
{
    time_t secs = (time_t)(ns / 1000000000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, cap - n, ".%03dZ", (int)(ns / 1000000 % 1000));
}

static bool valid_channel(const char *c)
{
    size_t n = strlen(c);
    if (n < 2 || n > CHAT_CHAN_MAX || (c[0] != '#' && c[0] != '&'))
        return false;
    for (size_t i = 0; i < n; i++)
        if (c[i] == ' ' || c[i] == ',' || c[i] == 7 || c[i] == ':' || (unsigned char)c[i] < 32)
            return false;
    return true;
}

/* ---- the log and the news ------------------------------------------------ */

static void own_push(struct session *s, uint64_t id)
{
    if (s->own_len == OWN_RING) { /* forget the oldest: it will be relayed back once */
        s->own_head = (s->own_head + 1) % OWN_RING;
        s->own_len--;
    }
    s->own[(s->own_head + s->own_len) % OWN_RING] = id;
    s->own_len++;
}

/* Is id one this connection sent? Ids come in order, so the ring's front
 * is the only candidate (older fronts were passed). */
static bool own_pop(struct session *s, uint64_t id)
{
    while (s->own_len && s->own[s->own_head] < id) {
        s->own_head = (s->own_head + 1) % OWN_RING;
        s->own_len--;
    }
    if (s->own_len && s->own[s->own_head] == id) {
        s->own_head = (s->own_head + 1) % OWN_RING;
        s->own_len--;
        return true;
    }
    return false;
}

/* A message record's text may start with its sender's client-only tags,
 * ended by a NUL (a client's text never holds one: such a line gets 421):
 * *r is left with the text after it. */
static void split_client_tags(yard_chatlog_rec_t *r, const char **tags, size_t *tags_len)
{
    const char *nul = memchr(r->text, 0, r->text_len);
    *tags = NULL;
    *tags_len = 0;
    if (!nul)
        return;
    *tags = r->text;
    *tags_len = (size_t)(nul - r->text);
    r->text_len -= *tags_len + 1;
    r->text = nul + 1;
}

/* A guest's records name it "~nick" (include/yard/proto_logrec.h): take
 * the '~' off the record's sender, and say whether it was there. */
static bool unguest(yard_chatlog_rec_t *r)
{
    if (r->sender_len < 2 || r->sender[0] != '~')
        return false;
    r->sender++;
    r->sender_len--;
    return true;
}

/* The tags a connection asked for on a relayed record: server-time, msgid
 * (message-tags; the log's id, the same for everyone), account
 * (account-tag; every sender is an account), the batch it is part of, and
 * a message's client-only tags (message-tags): "" or "@... " ending in a
 * space. */
static void tags_with(const struct session *s, const yard_chatlog_rec_t *r, bool guest,
                      const char *batch, const char *ctags, size_t ctags_len, char *out,
                      size_t cap)
{
    size_t n = 0;
    out[0] = 0;
#define TAG(...) n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, __VA_ARGS__)
    if (s->caps & CAP_TIME) {
        char t[40];
        format_time(t, sizeof t, r->ts_ns);
        TAG("%ctime=%s", n ? ';' : '@', t);
    }
    if (s->caps & CAP_MESSAGE_TAGS)
        TAG("%cmsgid=%llu", n ? ';' : '@', (unsigned long long)r->id);
    if ((s->caps & CAP_ACCOUNT_TAG) && !guest) /* a guest has no account: no tag */
        TAG("%caccount=%.*s", n ? ';' : '@', (int)r->sender_len, r->sender);
    if (batch && batch[0])
        TAG("%cbatch=%s", n ? ';' : '@', batch);
    if (ctags_len && (s->caps & CAP_MESSAGE_TAGS))
        TAG("%c%.*s", n ? ';' : '@', (int)ctags_len, ctags);
    if (n)
        TAG(" ");
#undef TAG
    if (n >= cap)
        out[0] = 0; /* cannot happen with the sizes used: no tags rather than half */
}

/* tags_with, for a record without client-only tags. */
static void tags_for(const struct session *s, const yard_chatlog_rec_t *r, bool guest,
                     const char *batch, char *out, size_t cap)
{
    tags_with(s, r, guest, batch, NULL, 0, out, cap);
}

static void relay(yard_fx_t *fx, const struct session *s, const yard_chatlog_rec_t *r,
                  bool guest, const char *batch)
{
    const char *cmd = r->type == YARD_LOGREC_NOTICE  ? "NOTICE"
                      : r->type == YARD_LOGREC_TOPIC ? "TOPIC"
                                                     : "PRIVMSG";
    const char *ctags = NULL;
    size_t ctags_len = 0;
    yard_chatlog_rec_t msg;
    if (r->type != YARD_LOGREC_TOPIC) {
        msg = *r;
        split_client_tags(&msg, &ctags, &ctags_len);
        r = &msg;
    }
    char tags[CLIENT_TAGS_MAX + 300];
    if (r->type == YARD_LOGREC_TAGMSG) { /* only tags: for clients that take them */
        if (!(s->caps & CAP_MESSAGE_TAGS))
            return;
        tags_with(s, r, guest, batch, ctags, ctags_len, tags, sizeof tags);
        sendf(fx, "%s:%.*s!%.*s@" SERVER " TAGMSG %.*s", tags, (int)r->sender_len, r->sender,
              (int)r->sender_len, r->sender, (int)r->target_len, r->target);
        return;
    }
    /* Text is stored without control characters (chat_data removes them),
     * but a log written before that rule may hold some. */
    char clean[YARD_LOGREC_TEXT_MAX + 1];
    yard_chatlog_rec_t copy;
    if (yard_irc_has_controls(r->text, r->text_len)) {
        copy = *r;
        memcpy(clean, r->text, r->text_len);
        copy.text_len = yard_irc_strip_controls(clean, r->text_len);
        copy.text = clean;
        r = &copy;
    }
    tags_with(s, r, guest, batch, ctags, ctags_len, tags, sizeof tags);
    sendf(fx, "%s:%.*s!%.*s@" SERVER " %s %.*s :%.*s", tags, (int)r->sender_len, r->sender,
          (int)r->sender_len, r->sender, cmd, (int)r->target_len, r->target, (int)r->text_len,
          r->text);
}

/* Is this record for this connection, and through which channel? */
static bool for_me(struct chat_app *app, struct session *s, const yard_chatlog_rec_t *r,
                   char *chan_key)
{
    chan_key[0] = 0;
    char target[CHAT_CHAN_MAX + 1];
    if (r->target_len > CHAT_CHAN_MAX)
        return false;
    chat_casefold(target, r->target, r->target_len);
    if (target[0] == '#' || target[0] == '&') {
        chat_lock(app->cs);
        int c = chat_channel_find(app->cs, r->target, r->target_len, false);
        bool in = c >= 0 && chat_is_in(app->cs, s->slot, c);
        chat_unlock(app->cs);
        if (in)
            strcpy(chan_key, target);
        return in;
    }
    return strcmp(target, s->account_key) == 0;
}

/* A join, part or quit of another account in a channel this connection
 * is in. An account's own presence is never relayed to it: its connection
 * that joined or left was answered directly, and the log has a join only
 * when the account's first connection joins, a part or quit only when its
 * last one leaves. */
static void presence_relay(struct chat_app *app, struct session *s, yard_fx_t *fx,
                           const yard_chatlog_rec_t *r, bool guest)
{
    char sender[CHAT_NAME_MAX + 1], key[CHAT_CHAN_MAX + 1];
    if (r->sender_len > CHAT_NAME_MAX)
        return;
    chat_casefold(sender, r->sender, r->sender_len);
    bool grouped = r->type == YARD_LOGREC_QUIT || r->type == YARD_LOGREC_AWAY ||
                   r->type == YARD_LOGREC_NICK;
    if (grouped) { /* one record per channel: told once */
        /* Consecutive records of one sender, type and text: one change
         * (two changes in a row differ in their text: away, back) */
        uint64_t text_hash = yard_fnv1a(YARD_FNV1A_INIT, r->text, r->text_len);
        if (r->id != s->group_id + 1 || r->type != s->group_type ||
            text_hash != s->group_text || strcmp(sender, s->group_key) != 0) {
            strcpy(s->group_key, sender); /* a new departure or away change */
            s->group_type = r->type;
            s->group_text = text_hash;
            s->group_told = false;
        }
        s->group_id = r->id;
        if (s->group_told)
            return;
    }
    if (r->type == YARD_LOGREC_AWAY && !(s->caps & CAP_AWAY_NOTIFY))
        return;
    if (!strcmp(sender, s->account_key) || !for_me(app, s, r, key))
        return;
    if (r->type == YARD_LOGREC_NICK && r->text_len <= CHAT_NAME_MAX) {
        char to[CHAT_NAME_MAX + 1];
        chat_casefold(to, r->text, r->text_len);
        if (!strcmp(to, s->account_key))
            return; /* the guest that changed its nick: told at once */
    }
    char tags[200], why[YARD_CHATLOG_DEFER_TEXT];
    tags_for(s, r, guest, NULL, tags, sizeof tags);
    size_t wn = r->text_len < sizeof why ? r->text_len : sizeof why - 1;
    memcpy(why, r->text, wn);
    wn = yard_irc_strip_controls(why, wn);
    why[wn] = 0;
    int sn = (int)r->sender_len, tn = (int)r->target_len;
    if (r->type == YARD_LOGREC_JOIN && !wn) { /* no realname: the account's name */
        memcpy(why, r->sender, r->sender_len);
        why[r->sender_len] = 0;
    }
    s->group_told = grouped;
    /* extended-join: a join record's text is USER's realname */
    if (r->type == YARD_LOGREC_JOIN && (s->caps & CAP_EXTENDED_JOIN))
        sendf(fx, "%s:%.*s!%.*s@" SERVER " JOIN %.*s %.*s :%s", tags, sn, r->sender, sn,
              r->sender, tn, r->target, guest ? 1 : sn, guest ? "*" : r->sender, why);
    else if (r->type == YARD_LOGREC_JOIN)
        sendf(fx, "%s:%.*s!%.*s@" SERVER " JOIN %.*s", tags, sn, r->sender, sn, r->sender, tn,
              r->target);
    else if (r->type == YARD_LOGREC_PART)
        sendf(fx, "%s:%.*s!%.*s@" SERVER " PART %.*s%s%s", tags, sn, r->sender, sn, r->sender,
              tn, r->target, wn ? " :" : "", why);
    else if (r->type == YARD_LOGREC_AWAY)
        sendf(fx, "%s:%.*s!%.*s@" SERVER " AWAY%s%s", tags, sn, r->sender, sn, r->sender,
              wn ? " :" : "", why);
    else if (r->type == YARD_LOGREC_NICK)
        sendf(fx, "%s:%.*s!%.*s@" SERVER " NICK :%s", tags, sn, r->sender, sn, r->sender, why);
    else
        sendf(fx, "%s:%.*s!%.*s@" SERVER " QUIT :%s", tags, sn, r->sender, sn, r->sender, why);
}

/* A MODE or KICK in a channel this connection is in (its setter's
 * included), a KICK of its account, or an INVITE of its account. */
static void chanop_relay(struct chat_app *app, struct session *s, yard_fx_t *fx,
                         const yard_chatlog_rec_t *r, bool guest)
{
    char key[CHAT_CHAN_MAX + 1], tags[200], text[YARD_CHATLOG_DEFER_TEXT];
    bool to_me = for_me(app, s, r, key);
    size_t tn = r->text_len < sizeof text ? r->text_len : sizeof text - 1;
    memcpy(text, r->text, tn);
    tn = yard_irc_strip_controls(text, tn);
    text[tn] = 0;
    int sn = (int)r->sender_len;
    if (r->type == YARD_LOGREC_KICK) {
        /* "nick reason": the kicked account is out of the channel already,
         * so it hears the kick as its account's */
        size_t vn = strcspn(text, " ");
        char victim[CHAT_NAME_MAX + 1];
        if (vn > CHAT_NAME_MAX)
            return;
        chat_casefold(victim, text, vn);
        if (!to_me && strcmp(victim, s->account_key))
            return;
        tags_for(s, r, guest, NULL, tags, sizeof tags);
        sendf(fx, "%s:%.*s!%.*s@" SERVER " KICK %.*s %.*s :%s", tags, sn, r->sender, sn,
              r->sender, (int)r->target_len, r->target, (int)vn, text,
              text[vn] ? text + vn + 1 : "");
        return;
    }
    if (!to_me)
        return;
    tags_for(s, r, guest, NULL, tags, sizeof tags);
    if (r->type == YARD_LOGREC_MODE)
        sendf(fx, "%s:%.*s!%.*s@" SERVER " MODE %.*s %s", tags, sn, r->sender, sn, r->sender,
              (int)r->target_len, r->target, text);
    else
        sendf(fx, "%s:%.*s!%.*s@" SERVER " INVITE %s %s", tags, sn, r->sender, sn, r->sender,
              s->account, text);
}

/* ---- read markers (draft/read-marker) ------------------------------------- */

#define MARKER_CLIENT "~read" /* the read positions' client id for markers: no device has it */

/* A read marker of this connection's account moved: tell it (all its
 * connections with the capability, the one that moved it included). */
static void marker_relay(struct session *s, yard_fx_t *fx, const yard_chatlog_rec_t *r)
{
    char sender[CHAT_NAME_MAX + 1];
    if (!(s->caps & CAP_READ_MARKER) || r->sender_len > CHAT_NAME_MAX)
        return;
    chat_casefold(sender, r->sender, r->sender_len);
    if (!strcmp(sender, s->account_key))
        sendf(fx, ":" SERVER " MARKREAD %.*s timestamp=%.*s", (int)r->target_len, r->target,
              (int)r->text_len, r->text);
}

/* The account's marker of target (casefolded): "timestamp=..." or "*". */
static void marker_text(struct chat_app *app, struct session *s, const char *key, char *out,
                        size_t cap)
{
    bool known;
    uint64_t ns = chat_pos_get(app->cs, s->account_key, MARKER_CLIENT, key, &known);
    if (!known || !ns) {
        snprintf(out, cap, "*");
        return;
    }
    char t[40];
    format_time(t, sizeof t, (int64_t)ns);
    snprintf(out, cap, "timestamp=%s", t);
}

/* Read positions move once per channel per batch of relayed records, not
 * once per record: each move takes the shared lock. */
struct pos_batch {
    struct {
        char key[CHAT_CHAN_MAX + 1];
        uint64_t id;
    } at[8];
    int n;
};

static void pos_flush(struct chat_app *app, struct session *s, struct pos_batch *pb)
{
    for (int i = 0; i < pb->n; i++)
        chat_pos_set(app->cs, s->account, s->client, pb->at[i].key, pb->at[i].id);
    pb->n = 0;
}

static void pos_note(struct chat_app *app, struct session *s, struct pos_batch *pb,
                     const char *key, uint64_t id)
{
    for (int i = 0; i < pb->n; i++)
        if (strcmp(pb->at[i].key, key) == 0) {
            pb->at[i].id = id;
            return;
        }
    if (pb->n == (int)(sizeof pb->at / sizeof pb->at[0]))
        pos_flush(app, s, pb);
    strcpy(pb->at[pb->n].key, key);
    pb->at[pb->n++].id = id;
}

/* The log cannot be read for this connection: it cannot go on relaying,
 * and must not spin on the same record. `yard-chat log verify` says where. */
static void log_unreadable(struct session *s, yard_fx_t *fx, int err)
{
    yard_log_err("chat: reading the log for %s after id %llu: %s", s->account,
                 (unsigned long long)s->seen, strerror(-err));
    sendf(fx, "ERROR :Closing Link: the server cannot read its log");
    yard_fx_close(fx, NULL);
}

/* Relay the records of one read at s->cur; *count grows by those taken.
 * 0, or -EBADMSG on committed bytes that do not decode. */
static int relay_read(struct chat_app *app, struct session *s, yard_fx_t *fx, const uint8_t *buf,
                      size_t len, int *count)
{
    yard_chatlog_rec_t r;
    struct pos_batch pos = {0};
    size_t at = 0;
    int rc;
    while ((rc = yard_chatlog_take(&s->cur, buf, len, &at, &r)) == 1) {
        ++*count;
        if (r.id <= s->seen)
            continue;
        s->seen = r.id;
        bool guest = unguest(&r);
        if (r.type == YARD_LOGREC_READ) {
            marker_relay(s, fx, &r);
            continue;
        }
        if (is_presence(r.type)) {
            presence_relay(app, s, fx, &r, guest);
            continue;
        }
        if (r.type == YARD_LOGREC_MODE || r.type == YARD_LOGREC_KICK ||
            r.type == YARD_LOGREC_INVITE) {
            chanop_relay(app, s, fx, &r, guest);
            continue;
        }
        char key[CHAT_CHAN_MAX + 1];
        bool mine = own_pop(s, r.id);
        bool to_me = for_me(app, s, &r, key);
        /* echo-message: the sender sees its message, a private one too. A
         * topic change goes to every member, its setter included. */
        if (r.type == YARD_LOGREC_TOPIC ? to_me : mine ? (s->caps & CAP_ECHO) != 0 : to_me)
            relay(fx, s, &r, guest, NULL);
        if (to_me && key[0] && r.type != YARD_LOGREC_TAGMSG && !s->guest)
            pos_note(app, s, &pos, key, r.id);
    }
    pos_flush(app, s, &pos);
    return rc < 0 ? rc : 0;
}

/* Relay what the log's tail holds past s->seen, NEWS_BATCH records at
 * most: 0, -EAGAIN when the rest is not in the tail (a read job's work),
 * or -EBADMSG after closing the connection. */
static int relay_tail(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    int n = 0;
    while (n < NEWS_BATCH) {
        long got = yard_chatlog_read_tail(app->log, &s->cur, s->rd.buf, sizeof s->rd.buf);
        if (got == -EAGAIN)
            return -EAGAIN;
        if (got <= 0)
            break;
        int rc = relay_read(app, s, fx, s->rd.buf, (size_t)got, &n);
        if (rc < 0) {
            log_unreadable(s, fx, rc);
            return rc;
        }
    }
    return 0;
}

/* Before this connection joins or leaves a channel, it relays what is
 * already in the log: what happened before it joined is not news to it
 * afterwards (the NAMES it gets shows it), and what was said before it left
 * is still its to hear. */
static void catch_up(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    if (!s->posting)
        relay_tail(app, s, fx); /* a connection further behind reads on as before */
}

/* Relay what the log holds past s->seen, then watch from there. What is in
 * the log's tail is read from memory; a connection further behind reads
 * the files in a job (read_done goes on from there). */
static void chat_news(void *state, void *session, yard_fx_t *fx)
{
    struct chat_app *app = state;
    struct session *s = session;
    if (s->state != ST_READY || s->posting)
        return; /* after the post: its ids must be known as ours first */
    int rc = relay_tail(app, s, fx);
    if (rc == -EAGAIN) {
        s->rd.log = app->log;
        s->rd.cur = s->cur;
        yard_fx_io(fx, read_job_run, &s->rd);
        return;
    }
    if (rc == 0)
        yard_fx_watch(fx, app->bus, 0, s->seen);
}

static void read_done(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    struct read_job *j = &s->rd;
    s->cur = j->cur; /* the read placed it (or moved it to the next segment) */
    int n = 0, rc = j->n < 0 ? (int)j->n : relay_read(app, s, fx, j->buf, (size_t)j->n, &n);
    if (rc < 0) {
        log_unreadable(s, fx, rc);
        return;
    }
    yard_fx_watch(fx, app->bus, 0, s->seen); /* news goes on from here */
}

/* The length of text[0..len) cut to at most max bytes, never inside a UTF-8
 * sequence. */
static size_t utf8_cut(const char *text, size_t len, size_t max)
{
    if (len <= max)
        return len;
    len = max;
    while (len > 0 && ((unsigned char)text[len] & 0xC0) == 0x80)
        len--;
    return len;
}

/* ---- presence ------------------------------------------------------------ */

/* Presence (a member joining, leaving, quitting) goes through the log like
 * a message, so that everyone sees it in the log's one order. Callbacks
 * may not do I/O, so they defer the records (yard_chatlog_defer): the next
 * append, a post's included, writes them first, and the log's writer
 * thread writes them when nobody posts. */
static void presence_ev(yard_chatlog_entry_t *e, int type, const char *sender,
                        const char *target, const char *text)
{
    e->type = type;
    snprintf(e->sender, sizeof e->sender, "%s", sender);
    snprintf(e->target, sizeof e->target, "%s", target);
    e->text_len = (uint16_t)utf8_cut(text, strlen(text), sizeof e->text - 1);
    memcpy(e->text, text, e->text_len);
    e->text[e->text_len] = 0;
}

static void presence_put(struct chat_app *app, yard_chatlog_entry_t *ev, unsigned n)
{
    static const char *const what[] = {
        [YARD_LOGREC_JOIN] = "joined", [YARD_LOGREC_PART] = "left", [YARD_LOGREC_QUIT] = "left",
        [YARD_LOGREC_AWAY] = "went away or came back in", [YARD_LOGREC_MODE] = "changed the modes of",
        [YARD_LOGREC_KICK] = "kicked somebody out of", [YARD_LOGREC_INVITE] = "invited"};
    if (!yard_chatlog_defer(app->log, ev, n))
        yard_log_limited(YARD_LOG_WARN, "chat: that %s %s %s is not told: the queue for the log "
                                        "is full (is the disk stalled?)",
                         ev[0].sender,
                         ev[0].type >= 0 && ev[0].type < (int)(sizeof what / sizeof what[0]) &&
                                 what[ev[0].type]
                             ? what[ev[0].type]
                             : "changed",
                         ev[0].target);
}

/* One record of type per channel set in bits (cs->words words), from
 * sender with text, under the lock: an array of *n to presence_put and
 * free (NULL when there is none, or no memory). */
static yard_chatlog_entry_t *events_per_channel(chat_state_t *cs, const uint64_t *bits, int type,
                                                const char *sender, const char *text,
                                                unsigned *n)
{
    unsigned count = 0;
    *n = 0;
    for (unsigned w = 0; w < cs->words; w++)
        count += (unsigned)__builtin_popcountll(bits[w]);
    yard_chatlog_entry_t *ev = count ? malloc(count * sizeof *ev) : NULL;
    for (unsigned w = 0; ev && w < cs->words; w++)
        for (uint64_t b = bits[w]; b; b &= b - 1)
            presence_ev(&ev[(*n)++], type, sender,
                        cs->chans[w * 64 + (unsigned)__builtin_ctzll(b)].name, text);
    return ev;
}

/* Is the account in channel c through a connection other than slot? Under
 * the lock. */
static bool account_in_elsewhere(struct chat_app *app, const struct session *s, int c)
{
    uint64_t bits[(CHAT_CHANNELS_LIMIT + 63) / 64] = {0};
    chat_account_others(app->cs, s->account_key, s->slot, bits);
    return bits[c / 64] >> (c % 64) & 1;
}

/* Flood control charges every delivered target (the line itself paid for
 * the first), so a list of targets cannot multiply one token. */
static void charge(struct session *s, int targets)
{
    if (targets > 1)
        s->tokens -= targets - 1;
}

/* A post: the message's targets, checked here, go into the post job. */
static void post_begin(struct chat_app *app, struct session *s, int type, const char *text)
{
    struct post_job *j = &s->post;
    j->log = app->log;
    j->cs = app->cs;
    j->dir = app->set->data_dir;
    j->sender = s->sender;
    j->sync_state = app->set->fsync_mode == YARD_CHATLOG_FSYNC_ALWAYS;
    j->type = type;
    j->n = 0;
    j->tags_len = 0;
    snprintf(j->text, sizeof j->text, "%s", text);
}

static void post_target(struct session *s, const char *name, bool person)
{
    struct post_job *j = &s->post;
    /* What fits the relayed line ":acc!acc@yard PRIVMSG target :text\r\n". */
    size_t room = LINE_MAX_MSG - 2 - (1 + 2 * strlen(s->account) + 2 + strlen(SERVER) + 1 + 7 +
                                      1 + strlen(name) + 2);
    snprintf(j->t[j->n].name, sizeof j->t[j->n].name, "%s", name);
    j->t[j->n].person = person;
    j->t[j->n].text_len = utf8_cut(j->text, strlen(j->text), room);
    j->t[j->n].rc = 0;
    j->n++;
}

/* Hand the post to the engine's I/O (nothing to do without targets). */
static void post_start(struct session *s, yard_fx_t *fx)
{
    if (!s->post.n)
        return;
    s->posting = true;
    yard_fx_io(fx, post_job_run, &s->post);
}

/* The appends are done: what this connection sent is its own (not echoed
 * back unless asked), and everyone hears of the news. */
static void post_done(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    struct post_job *j = &s->post;
    int delivered = 0;
    uint64_t last = 0;
    for (int i = 0; i < j->n; i++) {
        if (j->t[i].rc == POST_NO_SUCH_NICK) {
            if (j->type != YARD_LOGREC_NOTICE)
                numeric(fx, s, 401, "%s :No such nick/channel", j->t[i].name);
        } else if (j->t[i].rc < 0) {
            yard_log_err("chat: appending to the log: %s", strerror(-j->t[i].rc));
            sendf(fx, ":" SERVER " NOTICE %s :Message not delivered: the server cannot store it "
                      "(%s)",
                  s->account, strerror(-j->t[i].rc));
        } else {
            own_push(s, j->t[i].id);
            last = j->t[i].id;
            delivered++;
        }
    }
    s->posting = false;
    if (j->type != YARD_LOGREC_TOPIC)
        charge(s, delivered);
    if (last)
        yard_bus_publish(app->bus, 0, last);
}

/* ---- registration -------------------------------------------------------- */

static void auth_job_run(void *arg)
{
    struct auth_job *j = arg;
    char hash[YARD_BCRYPT_LEN + 1];
    int max_cost = 0;
    int rc = yard_accounts_lookup(j->dir, j->account, strlen(j->account), hash, j->canon,
                                  &max_cost);
    /* An unknown account is checked anyway, against a hash as dear as the
     * dearest account's, so timing does not tell which accounts exist. */
    if (rc != 0)
        yard_bcrypt_dummy(j->dummy_template, max_cost ? max_cost : DEFAULT_COST, hash);
    bool ok = yard_bcrypt_verify(j->password, hash, &j->cd);
    j->ok = ok && rc == 0;
    explicit_bzero(j->password, sizeof j->password);
}

static void forget_wait(struct session *s)
{
    explicit_bzero(s->wait_password, sizeof s->wait_password);
    s->wait_account[0] = 0;
}

/* A login that is refused before any check (the limits): answered at once. */
static void refuse_login(struct session *s, yard_fx_t *fx, bool sasl, const char *why)
{
    s->state = ST_NEW;
    forget_wait(s);
    if (sasl) {
        numeric(fx, s, 904, ":SASL authentication failed: %s", why);
        return;
    }
    sendf(fx, "ERROR :Closing Link: %s", why);
    yard_fx_close(fx, NULL);
}

/* Check a password, within the login limits (apps/chat_guard.h). */
static void start_auth(struct chat_app *app, struct session *s, yard_fx_t *fx,
                       const char *account, size_t alen, const char *password, size_t plen,
                       bool sasl)
{
    if (alen > CHAT_NAME_MAX)
        alen = CHAT_NAME_MAX;
    if (plen > YARD_ACCOUNT_PASSWORD_MAX)
        plen = YARD_ACCOUNT_PASSWORD_MAX;
    char key[CHAT_NAME_MAX + 1];
    chat_casefold(key, account, alen);
    uint64_t ticket, retry_ns;
    int v = chat_guard_check_begin(app->guard, &s->addr, key, fx->now_ns, &ticket, &retry_ns);
    char why[200], where[64];
    unsigned long long wait_s = (retry_ns + YARD_NS_PER_S - 1) / YARD_NS_PER_S;
    switch (v) {
    case CHAT_GUARD_OK:
        break;
    case CHAT_GUARD_WAIT:
        /* The address has its share of checks in flight: this one waits its
         * turn (reading nothing meanwhile), within the registration time. */
        if (s->wait_account != account) {
            snprintf(s->wait_account, sizeof s->wait_account, "%.*s", (int)alen, account);
            snprintf(s->wait_password, sizeof s->wait_password, "%.*s", (int)plen, password);
        }
        if (s->state == ST_READY) { /* a guest logging in: no waiting in line */
            refuse_login(s, fx, true, "the server is busy checking other logins; try again in "
                                      "a few seconds");
            return;
        }
        s->wait_sasl = sasl;
        s->state = ST_WAIT;
        yard_fx_wake_at(fx, fx->now_ns + CHECK_RETRY_NS < s->register_by
                                ? fx->now_ns + CHECK_RETRY_NS
                                : s->register_by);
        return;
    case CHAT_GUARD_BUSY:
        refuse_login(s, fx, sasl, "the server is busy checking other logins; try again in a few "
                                  "seconds");
        return;
    case CHAT_GUARD_ADDR_LIMIT:
        chat_addr_text(&s->addr, where, sizeof where);
        snprintf(why, sizeof why, "too many failed logins from %s; try again in %llu s", where,
                 wait_s);
        s->failures++;
        refuse_login(s, fx, sasl, why);
        return;
    default: /* CHAT_GUARD_ACCOUNT_LIMIT */
        snprintf(why, sizeof why, "too many failed logins for %s; try again in %llu s", key,
                 wait_s);
        s->failures++;
        refuse_login(s, fx, sasl, why);
        return;
    }
    struct auth_job *j = calloc(1, sizeof *j);
    if (!j) {
        chat_guard_check_end(app->guard, ticket, &s->addr, key, false, fx->now_ns);
        fx->nomem = true;
        return;
    }
    s->check_ticket = ticket;
    s->check_at = fx->now_ns;
    memcpy(s->check_key, key, sizeof key);
    j->dir = app->set->data_dir;
    memcpy(j->dummy_template, app->dummy_template, sizeof j->dummy_template);
    j->sasl = sasl;
    snprintf(j->account, sizeof j->account, "%.*s", (int)alen, account);
    snprintf(j->password, sizeof j->password, "%.*s", (int)plen, password);
    forget_wait(s);
    s->job = j;
    if (s->state != ST_READY) /* a guest logging in goes on relaying meanwhile */
        s->state = ST_AUTH;
    yard_fx_offload(fx, auth_job_run, j);
}

/* The check in flight is over (its job is done). */
static void end_check(struct chat_app *app, struct session *s, bool ok, uint64_t now_ns)
{
    if (!s->check_ticket)
        return;
    chat_guard_check_end(app->guard, s->check_ticket, &s->addr, s->check_key, ok, now_ns);
    s->check_ticket = 0;
}

static void welcome(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    numeric(fx, s, 1, ":Welcome to the yard chat, %s", s->account);
    numeric(fx, s, 2, ":Your host is " SERVER ", running Switchyard 0.1.0");
    numeric(fx, s, 3, ":This server speaks an IRC subset; see docs/chat.md");
    numeric(fx, s, 4, SERVER " 0.1.0 iw MRiklmnotv klov");
    numeric(fx, s, 5, "NETWORK=Switchyard CASEMAPPING=rfc1459 CHANTYPES=#& PREFIX=(ov)@+ "
                      "CHANMODES=,k,l,MRimnt MODES=%d NICKLEN=%d CHANNELLEN=%d TOPICLEN=%d "
                      "KICKLEN=%d AWAYLEN=%d :are supported by this server",
            MODES_MAX, CHAT_NAME_MAX, CHAT_CHAN_MAX, CHAT_TOPIC_MAX, KICK_REASON_MAX,
            CHAT_AWAY_MAX);
    numeric(fx, s, 5, "CHANLIMIT=#&:%u CHATHISTORY=%d MSGREFTYPES=msgid,timestamp "
                      "TARGMAX=PRIVMSG:%d,NOTICE:%d,WHOIS:%d,USERHOST:5,KICK:%d :are supported "
                      "by this server",
            app->set->channels_per_account, HISTORY_MAX, TARGMAX, TARGMAX, TARGMAX, TARGMAX);
    if (app->motd[0]) {
        numeric(fx, s, 375, ":- " SERVER " Message of the day -");
        char copy[sizeof app->motd];
        strcpy(copy, app->motd);
        char *save = NULL;
        for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
            numeric(fx, s, 372, ":- %.400s", l);
        numeric(fx, s, 376, ":End of /MOTD command.");
    } else {
        numeric(fx, s, 422, ":MOTD File is missing");
    }
}

static void ready(struct chat_app *app, struct session *s, yard_fx_t *fx);
static void try_register(struct chat_app *app, struct session *s, yard_fx_t *fx);

/* Logged in: take a member slot and start relaying from the log's end. */
static void become_ready(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    chat_lock(app->cs);
    s->slot = chat_member_add(app->cs, s->account);
    chat_unlock(app->cs);
    snprintf(s->sender, sizeof s->sender, "%s", s->account);
    ready(app, s, fx);
}

/* The member slot is taken (or not: s->slot < 0): relay from the log's end. */
static void ready(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    if (s->slot < 0) {
        sendf(fx, "ERROR :Closing Link: the server is full");
        yard_fx_close(fx, NULL);
        return;
    }
    s->state = ST_READY;
    chat_guard_leave(app->guard, s->enter_ticket);
    s->enter_ticket = 0;
    chat_casefold(s->account_key, s->account, strlen(s->account));
    s->seen = yard_chatlog_cursor_end(app->log, &s->cur);
    s->heard_ns = fx->now_ns;
    /* the registration timeout is over: the timer now watches liveness */
    yard_fx_wake_idle(fx,
                      app->set->ping_interval_ns ? fx->now_ns + app->set->ping_interval_ns : 0);
    welcome(app, s, fx);
    yard_fx_watch(fx, app->bus, 0, s->seen);
}

/* ---- guests (--guests) --------------------------------------------------- */

/* Is an account named nick? Read from DIR/accounts, so an I/O job. */
static void nick_job_run(void *arg)
{
    struct nick_job *j = arg;
    char hash[YARD_BCRYPT_LEN + 1], canon[CHAT_NAME_MAX + 1];
    int rc = yard_accounts_lookup(j->dir, j->nick, strlen(j->nick), hash, canon, NULL);
    j->reserved = rc != -ENOENT; /* an error too: a nick that cannot be checked is not free */
}

static void nick_check(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *nick)
{
    s->nj.dir = app->set->data_dir;
    snprintf(s->nj.nick, sizeof s->nj.nick, "%s", nick);
    s->nick_checking = true;
    yard_fx_io(fx, nick_job_run, &s->nj);
}

/* A guest registers with the nick checked free of accounts: a member slot
 * of its own, unless somebody has the nick or its address has its share. */
static void become_guest(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    char key[CHAT_NAME_MAX + 1];
    chat_casefold(key, s->nick, strlen(s->nick));
    chat_lock(app->cs);
    bool taken = chat_member_named(app->cs, key) >= 0; /* by a guest or an account */
    bool crowded = !taken && chat_guests_from(app->cs, s->addr.b) >= app->set->guests_per_addr;
    s->slot = taken || crowded ? -1 : chat_member_add(app->cs, s->nick);
    if (s->slot >= 0) {
        struct chat_member *m = chat_member_at(app->cs, s->slot);
        m->guest = true;
        memcpy(m->addr, s->addr.b, sizeof m->addr);
    }
    chat_unlock(app->cs);
    if (taken) {
        s->got_nick = false;
        numeric(fx, s, 433, "%s :Nickname is already in use", s->nick);
        return;
    }
    if (crowded) {
        char where[64];
        chat_addr_text(&s->addr, where, sizeof where);
        sendf(fx, "ERROR :Closing Link: too many guests from %s (--guests-per-addr %u)", where,
              app->set->guests_per_addr);
        yard_fx_close(fx, NULL);
        return;
    }
    s->guest = true;
    snprintf(s->account, sizeof s->account, "%s", s->nick);
    /* s->client keeps USER's name: the device, should the guest log in */
    snprintf(s->sender, sizeof s->sender, "~%s", s->nick);
    ready(app, s, fx);
}

/* A guest's nick change, checked free of accounts: told to the guest at
 * once and to the members of its channels through the log (a nick record
 * per channel, told once however many are shared). */
static void guest_rename(struct chat_app *app, struct session *s, yard_fx_t *fx,
                         const char *nick)
{
    char key[CHAT_NAME_MAX + 1];
    chat_casefold(key, nick, strlen(nick));
    chat_lock(app->cs);
    int holder = chat_member_named(app->cs, key);
    bool free_nick = holder < 0 || holder == s->slot; /* a change of case is ours to make */
    yard_chatlog_entry_t *ev = NULL;
    unsigned n = 0;
    if (free_nick) {
        ev = events_per_channel(app->cs, chat_member_at(app->cs, s->slot)->chans,
                                YARD_LOGREC_NICK, s->sender, nick, &n);
        chat_member_rename(app->cs, s->slot, nick);
    }
    chat_unlock(app->cs);
    if (!free_nick) {
        numeric(fx, s, 433, "%s :Nickname is already in use", nick);
        return;
    }
    sendf(fx, ":%s!%s@" SERVER " NICK :%s", s->account, s->account, nick);
    snprintf(s->account, sizeof s->account, "%s", nick);
    snprintf(s->nick, sizeof s->nick, "%s", nick);
    memcpy(s->account_key, key, sizeof s->account_key);
    snprintf(s->sender, sizeof s->sender, "~%s", nick);
    if (n)
        presence_put(app, ev, n);
    free(ev);
}

/* A guest logged in (SASL, or PASS account:password): it becomes the
 * account, in the channels it is in; the others hear its nick change when
 * the account's name differs from the guest's nick. */
static void guest_logs_in(struct chat_app *app, struct session *s, yard_fx_t *fx,
                          const char *account, bool sasl)
{
    char key[CHAT_NAME_MAX + 1];
    chat_casefold(key, account, strlen(account));
    bool renamed = strcmp(s->account, account) != 0;
    yard_chatlog_entry_t *ev = NULL;
    unsigned n = 0;
    chat_lock(app->cs);
    struct chat_member *me = chat_member_at(app->cs, s->slot);
    if (renamed)
        ev = events_per_channel(app->cs, me->chans, YARD_LOGREC_NICK, s->sender, account, &n);
    me->guest = false;
    memset(me->addr, 0, sizeof me->addr);
    chat_member_rename(app->cs, s->slot, account);
    chat_unlock(app->cs);
    if (renamed)
        sendf(fx, ":%s!%s@" SERVER " NICK :%s", s->account, s->account, account);
    s->guest = false;
    s->sasl_done = true;
    snprintf(s->account, sizeof s->account, "%s", account);
    snprintf(s->nick, sizeof s->nick, "%s", account);
    memcpy(s->account_key, key, sizeof s->account_key);
    snprintf(s->sender, sizeof s->sender, "%s", account);
    numeric(fx, s, 900, "%s!%s@" SERVER " %s :You are now logged in as %s", s->account,
            s->account, s->account, s->account);
    if (sasl)
        numeric(fx, s, 903, ":SASL authentication successful");
    if (n)
        presence_put(app, ev, n);
    free(ev);
}

static void nick_done(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    s->nick_checking = false;
    const char *nick = s->nj.nick;
    if (s->nj.reserved) {
        if (s->state != ST_READY)
            s->got_nick = false; /* (and the numeric is addressed to "*") */
        numeric(fx, s, 433, "%s :Nickname is reserved for an account: log in with SASL PLAIN "
                            "or PASS to use it, or choose another",
                nick);
        return;
    }
    if (s->state == ST_READY) {
        if (s->guest)
            guest_rename(app, s, fx, nick);
        return;
    }
    if (strcmp(nick, s->nick)) { /* another NICK came meanwhile: check that one */
        nick_check(app, s, fx, s->nick);
        return;
    }
    if (s->state == ST_NEW && !s->have_pass && !s->sasl_done)
        become_guest(app, s, fx);
    else
        try_register(app, s, fx); /* credentials came meanwhile */
}

/* NICK, USER and (PASS or SASL) are in, and CAP negotiation is over. */
static void try_register(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    if (s->state != ST_NEW || !s->got_nick || !s->got_user || s->cap_active || s->pending_fail)
        return;
    if (s->sasl_done) {
        if (strcasecmp(s->nick, s->account) != 0) {
            /* The nick is the account's name: tell the client so. */
            sendf(fx, ":%s!%s@" SERVER " NICK %s", s->nick, s->account, s->account);
        }
        become_ready(app, s, fx);
        return;
    }
    if (!s->have_pass && app->set->guests) {
        if (!s->nick_checking) /* a guest, unless the nick is an account's */
            nick_check(app, s, fx, s->nick);
        return;
    }
    if (!s->have_pass) {
        numeric(fx, s, 464, ":Password required: log in with SASL PLAIN or PASS (your nick is "
                            "your account)");
        sendf(fx, "ERROR :Closing Link: not logged in");
        yard_fx_close(fx, NULL);
        return;
    }
    start_auth(app, s, fx, s->nick, strlen(s->nick), s->pass, strlen(s->pass), false);
    explicit_bzero(s->pass, sizeof s->pass);
    s->have_pass = false;
}

static void auth_done(struct chat_app *app, struct session *s, struct auth_job *j, yard_fx_t *fx)
{
    s->job = NULL;
    if (s->state != ST_READY)
        s->state = ST_NEW;
    end_check(app, s, j->ok, fx->now_ns);
    if (j->ok && s->guest) {
        guest_logs_in(app, s, fx, j->canon, j->sasl);
    } else if (j->ok) {
        snprintf(s->account, sizeof s->account, "%s", j->canon);
        if (j->sasl) {
            s->sasl_done = true;
            numeric(fx, s, 900, "%s!%s@" SERVER " %s :You are now logged in as %s", s->account,
                    s->account, s->account, s->account);
            numeric(fx, s, 903, ":SASL authentication successful");
        } else {
            s->sasl_done = true; /* the same from here on */
        }
        try_register(app, s, fx);
    } else {
        /* Slow down guessing: the answer waits 1 s per failure so far (at
         * most 10 s), on top of bcrypt's own cost. */
        s->failures++;
        uint64_t delay = (uint64_t)(s->failures < 10 ? s->failures : 10) * YARD_NS_PER_S;
        s->fail_until = fx->now_ns + delay;
        s->pending_fail = j->sasl || s->guest ? 904 : 464; /* a guest stays a guest */
        yard_fx_wake_at(fx, s->fail_until);
    }
    free(j);
}


/* ---- channel commands ---------------------------------------------------- */

static int name_cmp(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

/* The accounts in channel c, each once however many connections it has
 * there, sorted by their casefolded name: n entries of CHAT_NAME_MAX + 1
 * bytes (the account's spelling), or NULL when there is none or no memory
 * (*nomem says which). */
static char (*members_of(struct chat_app *app, int c, size_t *n, bool *nomem))[CHAT_NAME_MAX + 1]
{
    *n = 0;
    *nomem = false;
    chat_lock(app->cs);
    size_t cap = app->cs->chans[c].used ? app->cs->chans[c].members : 0;
    char(*v)[CHAT_NAME_MAX + 1] = cap ? malloc(cap * sizeof *v) : NULL;
    for (unsigned i = 0; v && i < chat_member_end(app->cs) && *n < cap; i++) {
        struct chat_member *m = chat_member_at(app->cs, (int)i);
        if (m->used && chat_is_in(app->cs, (int)i, c))
            snprintf(v[(*n)++], sizeof v[0], "%s", m->account);
    }
    chat_unlock(app->cs);
    if (cap && !v) {
        *nomem = true;
        return NULL;
    }
    /* Sort by the casefolded name with the spelling after it, then keep the
     * first of each run of one account. */
    char(*keyed)[2 * (CHAT_NAME_MAX + 1)] = *n ? malloc(*n * sizeof *keyed) : NULL;
    if (*n && !keyed) {
        free(v);
        *nomem = true;
        return NULL;
    }
    for (size_t i = 0; i < *n; i++) {
        size_t len = strlen(v[i]);
        chat_casefold(keyed[i], v[i], len);
        memcpy(keyed[i] + len + 1, v[i], len + 1);
    }
    qsort(keyed, *n, sizeof *keyed, name_cmp);
    size_t out = 0;
    for (size_t i = 0; i < *n; i++) {
        if (out && strcmp(keyed[i], keyed[i - 1]) == 0)
            continue;
        snprintf(v[out++], sizeof v[0], "%s", keyed[i] + strlen(keyed[i]) + 1);
    }
    free(keyed);
    *n = out;
    return v;
}

/* A member's prefix in NAMES and WHO: the highest rank's, or with
 * multi-prefix every rank's. */
static const char *rank_prefix(int rank, const struct session *s)
{
    bool all = s->caps & CAP_MULTI_PREFIX;
    if (rank & CHAT_RANK_OP)
        return all && (rank & CHAT_RANK_VOICE) ? "@+" : "@";
    return rank & CHAT_RANK_VOICE ? "+" : "";
}

/* The ranks of channel c's record (none when it has no record). */
static void ranks_of(struct chat_app *app, int c, struct chat_chanrec *rec)
{
    chat_lock(app->cs);
    if (!chat_chan_get(app->cs, app->cs->chans[c].key, rec))
        rec->nranks = 0;
    chat_unlock(app->cs);
}

static int rank_in(const struct chat_chanrec *rec, const char *account)
{
    char key[CHAT_NAME_MAX + 1];
    chat_casefold(key, account, strnlen(account, CHAT_NAME_MAX));
    return chat_rank_of(rec, key);
}

static void names(struct chat_app *app, struct session *s, yard_fx_t *fx, int c, const char *name)
{
    size_t n;
    bool nomem;
    char(*who_is)[CHAT_NAME_MAX + 1] = members_of(app, c, &n, &nomem);
    if (nomem)
        fx->nomem = true;
    struct chat_chanrec rec;
    ranks_of(app, c, &rec);
    char line[LINE_MAX_MSG];
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        const char *pre = rank_prefix(rank_in(&rec, who_is[i]), s);
        size_t pn = strlen(pre), an = strlen(who_is[i]);
        if (len + pn + an + 1 > 400) {
            numeric(fx, s, 353, "= %s :%.*s", name, (int)len, line);
            len = 0;
        }
        if (len)
            line[len++] = ' ';
        memcpy(line + len, pre, pn);
        memcpy(line + len + pn, who_is[i], an);
        len += pn + an;
    }
    free(who_is);
    if (len)
        numeric(fx, s, 353, "= %s :%.*s", name, (int)len, line);
    numeric(fx, s, 366, "%s :End of /NAMES list.", name);
}

static void topic_reply(struct chat_app *app, struct session *s, yard_fx_t *fx,
                        const char *name, const char *key)
{
    char topic[CHAT_TOPIC_MAX + 1], by[CHAT_NAME_MAX + 1];
    int64_t at;
    if (!chat_topic_get(app->cs, key, topic, by, &at)) {
        numeric(fx, s, 331, "%s :No topic is set", name);
        return;
    }
    numeric(fx, s, 332, "%s :%s", name, topic);
    numeric(fx, s, 333, "%s %s!%s@" SERVER " %lld", name, by, by, (long long)at);
}

/* Replay what this device of the account missed in this channel: the
 * messages after its read position up to what this connection has already
 * relayed (s->seen), the newest replay_max of them. true when a replay job
 * was started (replay_done finishes it). */
static bool replay_start(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *name,
                         const char *key)
{
    bool known;
    uint64_t from = chat_pos_get(app->cs, s->account, s->client, key, &known);
    if (!known || from >= s->seen) {
        chat_pos_set(app->cs, s->account, s->client, key, s->seen);
        return false;
    }
    struct replay_job *j = &s->rp;
    j->log = app->log;
    snprintf(j->name, sizeof j->name, "%s", name);
    snprintf(j->key, sizeof j->key, "%s", key);
    j->from = from;
    j->upto = s->seen;
    j->max = app->set->replay_max;
    yard_fx_io(fx, replay_job_run, j);
    return true;
}

static void replay_done(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    struct replay_job *j = &s->rp;
    if (j->rc == -ENOMEM && !j->total) {
        sendf(fx, ":" SERVER " NOTICE %s :The history of %s cannot be read now; nothing was "
                  "replayed",
              j->name, j->name);
    } else if (j->rc < 0) {
        yard_log_err("chat: replaying %s for %s: %s", j->name, s->account, strerror(-j->rc));
        sendf(fx, ":" SERVER " NOTICE %s :Part of the history of %s is damaged; what could be "
                  "read is replayed",
              j->name, j->name);
    }
    if (j->total > j->shown)
        sendf(fx, ":" SERVER " NOTICE %s :%llu older messages of %s were not replayed "
                  "(--replay-max %u)",
              j->name, (unsigned long long)(j->total - j->shown), j->name, j->max);
    /* With batch, the replay is one chathistory batch (its reference new
     * for this connection, like a CHATHISTORY answer's). */
    char ref[32] = "";
    if ((s->caps & CAP_BATCH) && j->recs_len) {
        snprintf(ref, sizeof ref, "r%llu", (unsigned long long)++s->batches);
        sendf(fx, ":" SERVER " BATCH +%s chathistory %s", ref, j->name);
    }
    yard_chatlog_rec_t r;
    for (size_t at = 0; at < j->recs_len; at += r.len)
        if (yard_logrec_decode(j->recs + at, j->recs_len - at, &r) != YARD_LOGREC_COMPLETE)
            break;
        else
            relay(fx, s, &r, unguest(&r), ref);
    if (ref[0])
        sendf(fx, ":" SERVER " BATCH -%s", ref);
    free(j->recs);
    j->recs = NULL;
    j->recs_len = 0;
    chat_pos_set(app->cs, s->account, s->client, j->key, j->upto);
}

/* What the member slots say of one account (nick = account): online when
 * any of its connections is; away when every one of them is (a phone left
 * away does not hide the desktop in use), with the message set last;
 * chans, when given, the channels it is in, each once. */
struct presence {
    bool online, away;
    bool guest; /* --guests: a nick with no account */
    char account[CHAT_NAME_MAX + 1];
    char away_msg[CHAT_AWAY_MAX + 1];
};

static void presence_of(struct chat_app *app, const char *nick, struct presence *p, char *chans,
                        size_t chans_cap)
{
    memset(p, 0, sizeof *p);
    char key[CHAT_NAME_MAX + 1], other[CHAT_NAME_MAX + 1];
    size_t len = strlen(nick);
    if (len > CHAT_NAME_MAX)
        return;
    chat_casefold(key, nick, len);
    if (chans)
        chans[0] = 0;
    size_t used = 0;
    bool all_away = true;
    uint64_t latest = 0;
    chat_lock(app->cs);
    uint64_t seen[(CHAT_CHANNELS_LIMIT + 63) / 64] = {0};
    for (unsigned i = 0; i < chat_member_end(app->cs); i++) {
        struct chat_member *m = chat_member_at(app->cs, (int)i);
        if (!m->used)
            continue;
        chat_casefold(other, m->account, strlen(m->account));
        if (strcmp(key, other))
            continue;
        p->online = true;
        p->guest = m->guest;
        snprintf(p->account, sizeof p->account, "%s", m->account);
        all_away = all_away && m->away;
        if (m->away && m->away_at >= latest) {
            latest = m->away_at;
            snprintf(p->away_msg, sizeof p->away_msg, "%s", m->away_msg);
        }
        for (unsigned c = 0; chans && c < app->cs->nchan; c++) {
            if (!app->cs->chans[c].used || !chat_is_in(app->cs, (int)i, (int)c) ||
                (seen[c / 64] >> (c % 64) & 1))
                continue;
            seen[c / 64] |= 1ull << (c % 64);
            int rank = chat_chan_rank(app->cs, app->cs->chans[c].key, key);
            const char *pre = rank & CHAT_RANK_OP ? "@" : rank ? "+" : "";
            size_t n = strlen(pre) + strlen(app->cs->chans[c].name);
            if (used + n + 2 <= chans_cap) {
                snprintf(chans + used, chans_cap - used, "%s%s%s", used ? " " : "", pre,
                         app->cs->chans[c].name);
                used += n + (used ? 1 : 0);
            }
        }
    }
    chat_unlock(app->cs);
    p->away = p->online && all_away;
}

/* away-notify, for a client that joins channel c: the members who are away
 * (only looked for while anybody is). */
static void away_of_members(struct chat_app *app, struct session *s, yard_fx_t *fx, int c)
{
    size_t n;
    bool nomem;
    char(*who_is)[CHAT_NAME_MAX + 1] = members_of(app, c, &n, &nomem);
    if (nomem)
        fx->nomem = true;
    for (size_t i = 0; i < n; i++) {
        struct presence p;
        if (!strcasecmp(who_is[i], s->account))
            continue;
        presence_of(app, who_is[i], &p, NULL, 0);
        if (p.away)
            sendf(fx, ":%s!%s@" SERVER " AWAY :%s", p.account, p.account, p.away_msg);
    }
    free(who_is);
}

/* +i, +k and +l, under the lock: 0 when the account may join the channel
 * (live as c, or else named by fold), or the numeric that refuses it. The
 * channel's operators pass (it is theirs, and a +i channel that emptied
 * would otherwise be closed to everyone for good). */
static int join_refusal(struct chat_app *app, struct session *s, int c, const char *fold,
                        const char *key_given)
{
    chat_state_t *cs = app->cs;
    struct chat_chanrec rec;
    uint32_t modes = 0, limit = 0;
    const char *want = "";
    if (c >= 0) {
        modes = cs->chans[c].modes;
        limit = cs->chans[c].limit;
        want = cs->chans[c].chkey;
    } else if (chat_chan_get(cs, fold, &rec)) {
        modes = rec.modes;
        limit = rec.limit;
        want = rec.key;
    }
    if ((modes & CHAT_MODE_REG_JOIN) && s->guest)
        return 477;
    if (c < 0 && s->guest && !app->set->guests_create && !chat_chan_get(cs, fold, &rec))
        return 403; /* a new channel, and guests may not make one */
    if (!(modes & CHAT_MODE_I) && !want[0] && !limit)
        return 0;
    if (chat_chan_rank(cs, fold, s->account_key) & CHAT_RANK_OP)
        return 0;
    if ((modes & CHAT_MODE_I) && !(c >= 0 && chat_invited(cs, c, s->account_key)))
        return 473;
    if (want[0] && (!key_given || strcmp(key_given, want)))
        return 475;
    if (limit && c >= 0 && chat_channel_accounts(cs, c) >= limit)
        return 471;
    return 0;
}

static void join_one(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *name,
                     const char *key_given)
{
    if (!valid_channel(name)) {
        numeric(fx, s, 403, "%s :No such channel", name);
        return;
    }
    catch_up(app, s, fx);
    if (fx->close)
        return;
    char fold[CHAT_CHAN_MAX + 1];
    chat_casefold(fold, name, strlen(name));
    chat_lock(app->cs);
    int c = chat_channel_find(app->cs, name, strlen(name), false);
    bool already = c >= 0 && chat_is_in(app->cs, s->slot, c);
    /* The account's limit counts its channels over all its connections,
     * this one included (a new channel is one more). */
    bool over = !already && chat_account_channels(app->cs, s->account_key, c) + (c < 0) >
                                app->set->channels_per_account;
    int refused = already || over ? 0 : join_refusal(app, s, c, fold, key_given);
    bool unranked = false; /* a new channel whose record could not be stored */
    if (!already && !over && !refused && c < 0) {
        c = chat_channel_find(app->cs, name, strlen(name), true);
        if (c >= 0)
            unranked = !chat_chan_load(app->cs, c, s->guest ? NULL : s->account_key,
                                       yard_wall_ns() / (int64_t)YARD_NS_PER_S);
    }
    if (refused) {
        chat_unlock(app->cs);
        if (refused == 477)
            numeric(fx, s, 477, "%s :Cannot join channel (+R): log in to an account to join",
                    name);
        else if (refused == 403)
            numeric(fx, s, 403, "%s :No such channel (guests may not create channels here)",
                    name);
        else
            numeric(fx, s, refused, "%s :Cannot join channel (%s)", name,
                    refused == 473 ? "+i" : refused == 475 ? "+k" : "+l");
        return;
    }
    /* An account with several connections is one member: the others hear
     * of its first connection in, not of the ones after. */
    bool first = c >= 0 && !over && !already && !account_in_elsewhere(app, s, c);
    if (c >= 0 && !over)
        chat_set_in(app->cs, s->slot, c, true);
    char shown[CHAT_CHAN_MAX + 1], key[CHAT_CHAN_MAX + 1];
    if (c >= 0) {
        strcpy(shown, app->cs->chans[c].name);
        strcpy(key, app->cs->chans[c].key);
    }
    chat_unlock(app->cs);
    if (over) {
        numeric(fx, s, 405, "%s :You have joined too many channels (CHANLIMIT %u)", name,
                app->set->channels_per_account);
        return;
    }
    if (c == -2) {
        numeric(fx, s, 405, "%s :The server holds no more channels (--max-channels)", name);
        return;
    }
    if (already)
        return;
    if (unranked)
        yard_log_limited(YARD_LOG_WARN, "chat: %s has no operator: DIR/channels has no slot "
                                        "left for it (every slot on its path is in use)",
                         shown);
    if (first) {
        /* An account that is away joins as away: after its JOIN, members
         * with away-notify hear its AWAY in this channel. */
        yard_chatlog_entry_t ev[2];
        struct presence me;
        unsigned n = 0;
        presence_ev(&ev[n++], YARD_LOGREC_JOIN, s->sender, shown, s->realname);
        if (__atomic_load_n(&app->cs->away, __ATOMIC_RELAXED)) {
            presence_of(app, s->account, &me, NULL, 0);
            if (me.away)
                presence_ev(&ev[n++], YARD_LOGREC_AWAY, s->sender, shown, me.away_msg);
        }
        presence_put(app, ev, n);
    }
    if (s->caps & CAP_EXTENDED_JOIN)
        sendf(fx, ":%s!%s@" SERVER " JOIN %s %s :%s", s->account, s->account, shown,
              s->guest ? "*" : s->account, s->realname[0] ? s->realname : s->account);
    else
        sendf(fx, ":%s!%s@" SERVER " JOIN %s", s->account, s->account, shown);
    topic_reply(app, s, fx, shown, key);
    names(app, s, fx, c, shown);
    if ((s->caps & CAP_AWAY_NOTIFY) && __atomic_load_n(&app->cs->away, __ATOMIC_RELAXED))
        away_of_members(app, s, fx, c);
    if (s->guest) /* no account: no read marker, no position to replay from */
        return;
    if (s->caps & CAP_READ_MARKER) {
        char mark[80];
        marker_text(app, s, key, mark, sizeof mark);
        sendf(fx, ":" SERVER " MARKREAD %s %s", shown, mark);
    }
    replay_start(app, s, fx, shown, key);
}

/* Join the channels of a comma list in turn; one whose replay runs as a
 * job leaves the rest in s->join_rest, for after it. */
static void join_list(struct chat_app *app, struct session *s, yard_fx_t *fx, char *list,
                      char *keys)
{
    char *save = NULL, *ksave = NULL;
    char *k = keys ? strtok_r(keys, ",", &ksave) : NULL;
    for (char *t = strtok_r(list, ",", &save); t;
         t = strtok_r(NULL, ",", &save), k = k ? strtok_r(NULL, ",", &ksave) : NULL) {
        join_one(app, s, fx, t, k);
        if (fx->job) {
            const char *rest = strtok_r(NULL, "", &save);
            const char *krest = k ? strtok_r(NULL, "", &ksave) : NULL;
            snprintf(s->join_rest, sizeof s->join_rest, "%s", rest ? rest : "");
            snprintf(s->join_keys, sizeof s->join_keys, "%s", krest ? krest : "");
            return;
        }
    }
    s->join_rest[0] = 0;
    s->join_keys[0] = 0;
}

/* ---- CHATHISTORY ---------------------------------------------------------- */

/* Is this record one of the conversation's messages? */
static bool hist_match(const struct hist_job *j, const yard_chatlog_rec_t *r)
{
    yard_chatlog_rec_t g = *r; /* a guest's name without its '~' */
    unguest(&g);
    r = &g;
    if ((r->type != YARD_LOGREC_MESSAGE && r->type != YARD_LOGREC_NOTICE) ||
        r->target_len > CHAT_CHAN_MAX || r->sender_len > CHAT_NAME_MAX)
        return false;
    char target[CHAT_CHAN_MAX + 1], sender[CHAT_NAME_MAX + 1];
    chat_casefold(target, r->target, r->target_len);
    if (j->channel)
        return !strcmp(target, j->key);
    chat_casefold(sender, r->sender, r->sender_len);
    return (!strcmp(sender, j->me) && !strcmp(target, j->key)) ||
           (!strcmp(sender, j->key) && !strcmp(target, j->me));
}

static int hist_take(const yard_chatlog_rec_t *r, void *arg)
{
    struct hist_job *j = arg;
    if (j->stop_id && (j->down ? r->id <= j->stop_id : r->id >= j->stop_id))
        return 1;
    if (!hist_match(j, r))
        return 0;
    if (j->recs_len + r->len > j->recs_cap || !j->at) {
        size_t cap = j->recs_cap ? 2 * j->recs_cap : 64 * 1024;
        while (cap < j->recs_len + r->len)
            cap *= 2;
        uint8_t *g = realloc(j->recs, cap);
        size_t *a = j->at ? j->at : malloc(HISTORY_MAX * sizeof *a);
        if (!g || !a) {
            if (g)
                j->recs = g;
            if (!j->at)
                free(a);
            j->rc = -ENOMEM;
            return 1;
        }
        j->recs = g;
        j->at = a;
        j->recs_cap = cap;
    }
    long w = yard_logrec_encode(r, j->recs + j->recs_len, j->recs_cap - j->recs_len);
    if (w < 0) {
        j->rc = (int)w;
        return 1;
    }
    j->at[j->n++] = j->recs_len;
    j->recs_len += (size_t)w;
    return --j->want == 0;
}

/* Take up to want matching records walking from id from in direction dir,
 * stopping at stop_id (exclusive, 0: none); they end up in id order. */
static void hist_walk(struct hist_job *j, uint64_t from, int dir, uint64_t stop_id, unsigned want)
{
    if (!want || j->rc < 0)
        return;
    uint32_t h[2] = {yard_chatlog_target_hash(j->key, strlen(j->key)),
                     yard_chatlog_target_hash(j->me, strlen(j->me))};
    unsigned first = j->n;
    j->down = dir < 0;
    j->stop_id = stop_id;
    j->want = want;
    int rc = yard_chatlog_seek(j->log, from, dir, h, j->channel ? 1 : 2, hist_take, j);
    if (rc < 0 && j->rc == 0)
        j->rc = rc;
    if (dir < 0) /* newest first: turn them round */
        for (unsigned a = first, b = j->n; a + 1 < b; a++, b--) {
            size_t t = j->at[a];
            j->at[a] = j->at[b - 1];
            j->at[b - 1] = t;
        }
}

/* A reference's id: msgid=N is N; timestamp=T is the first record at or
 * after T (after: the first after it). */
static uint64_t hist_id(struct hist_job *j, const struct hist_ref *r, bool after)
{
    if (!r->by_time)
        return r->id;
    return yard_chatlog_id_at(j->log, r->ts_ns + (after ? 1 : 0));
}

/* TARGETS: each record of the window, newest first; a conversation's
 * first record seen is its latest. */
static int hist_target_take(const yard_chatlog_rec_t *r, void *arg)
{
    struct hist_job *j = arg;
    if (r->id < j->low_id)
        return 1;
    yard_chatlog_rec_t g = *r; /* a guest's name without its '~' */
    unguest(&g);
    r = &g;
    if ((r->type != YARD_LOGREC_MESSAGE && r->type != YARD_LOGREC_NOTICE) ||
        r->target_len > CHAT_CHAN_MAX || r->sender_len > CHAT_NAME_MAX)
        return 0;
    char target[CHAT_CHAN_MAX + 1], sender[CHAT_NAME_MAX + 1], key[CHAT_CHAN_MAX + 1];
    const char *name;
    size_t len;
    chat_casefold(target, r->target, r->target_len);
    chat_casefold(sender, r->sender, r->sender_len);
    if (target[0] == '#' || target[0] == '&') {
        bool mine = false;
        for (unsigned i = 0; i < j->nchans && !mine; i++)
            mine = !strcmp(j->chans[i], target);
        if (!mine)
            return 0;
        strcpy(key, target);
        name = r->target;
        len = r->target_len;
    } else if (!strcmp(sender, j->me)) { /* I wrote to them */
        strcpy(key, target);
        name = r->target;
        len = r->target_len;
    } else if (!strcmp(target, j->me)) { /* they wrote to me */
        strcpy(key, sender);
        name = r->sender;
        len = r->sender_len;
    } else {
        return 0;
    }
    for (unsigned i = 0; i < j->ntargets; i++)
        if (!strcmp(j->targets[i].key, key))
            return 0; /* seen: that one was later */
    struct hist_target *t = &j->targets[j->ntargets++];
    memcpy(t->name, name, len);
    t->name[len] = 0;
    strcpy(t->key, key);
    t->latest_ns = r->ts_ns;
    return j->ntargets == j->limit;
}

static void history_job_run(void *arg)
{
    struct hist_job *j = arg;
    j->rc = 0;
    if (j->sub == HIST_TARGETS) { /* the window between the two times, newest first */
        int64_t lo = j->a.ts_ns < j->b.ts_ns ? j->a.ts_ns : j->b.ts_ns,
                hi = j->a.ts_ns < j->b.ts_ns ? j->b.ts_ns : j->a.ts_ns;
        j->ntargets = 0;
        j->targets = malloc(j->limit * sizeof *j->targets);
        if (!j->targets) {
            j->rc = -ENOMEM;
            return;
        }
        j->low_id = yard_chatlog_id_at(j->log, lo);
        uint64_t top = yard_chatlog_id_at(j->log, hi);
        if (top > j->low_id) {
            int rc = yard_chatlog_seek(j->log, top - 1, -1, NULL, 0, hist_target_take, j);
            if (rc < 0)
                j->rc = rc;
        }
        return;
    }
    j->n = 0;
    j->recs_len = 0;
    uint64_t a, b;
    switch (j->sub) {
    case HIST_LATEST: /* the newest, after the reference if one is given */
        hist_walk(j, UINT64_MAX, -1,
                  j->a.any ? 0 : j->a.by_time ? hist_id(j, &j->a, true) - 1 : j->a.id, j->limit);
        break;
    case HIST_BEFORE:
        a = hist_id(j, &j->a, false);
        if (a > 1)
            hist_walk(j, a - 1, -1, 0, j->limit);
        break;
    case HIST_AFTER:
        a = hist_id(j, &j->a, true);
        hist_walk(j, j->a.by_time ? a : a + 1, 1, 0, j->limit);
        break;
    case HIST_AROUND: /* the reference and those before it, then those after */
        a = hist_id(j, &j->a, false);
        hist_walk(j, a, -1, 0, (j->limit + 1) / 2);
        hist_walk(j, a + 1, 1, 0, j->limit - j->n);
        break;
    case HIST_BETWEEN:
        a = hist_id(j, &j->a, false);
        b = hist_id(j, &j->b, false);
        if (a < b)
            hist_walk(j, j->a.by_time ? a : a + 1, 1, b, j->limit);
        else if (a > 1)
            hist_walk(j, a - 1, -1, b ? b : 0, j->limit);
        break;
    }
}

/* The result: a chathistory batch (with batch; the lines alone without). */
static void history_done(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    struct hist_job *j = &s->hist;
    (void)app;
    if (j->rc < 0) {
        yard_log_err("chat: CHATHISTORY of %s for %s: %s", j->name, s->account, strerror(-j->rc));
        sendf(fx, ":" SERVER " FAIL CHATHISTORY MESSAGE_ERROR %s :The history cannot be read "
                  "now",
              j->name);
    } else if (j->sub == HIST_TARGETS) { /* oldest of the latest first */
        char ref[32] = "";
        if (s->caps & CAP_BATCH) {
            snprintf(ref, sizeof ref, "h%llu", (unsigned long long)++s->batches);
            sendf(fx, ":" SERVER " BATCH +%s draft/chathistory-targets", ref);
        }
        for (unsigned i = j->ntargets; i-- > 0;) {
            char t[40];
            format_time(t, sizeof t, j->targets[i].latest_ns);
            sendf(fx, "%s%s%s:" SERVER " CHATHISTORY TARGETS %s %s", ref[0] ? "@batch=" : "", ref,
                  ref[0] ? " " : "", j->targets[i].name, t);
        }
        if (ref[0])
            sendf(fx, ":" SERVER " BATCH -%s", ref);
    } else {
        char ref[32] = "";
        if (s->caps & CAP_BATCH) {
            snprintf(ref, sizeof ref, "h%llu", (unsigned long long)++s->batches);
            sendf(fx, ":" SERVER " BATCH +%s chathistory %s", ref, j->name);
        }
        for (unsigned i = 0; i < j->n; i++) {
            yard_chatlog_rec_t r;
            if (yard_logrec_decode(j->recs + j->at[i], j->recs_len - j->at[i], &r) ==
                YARD_LOGREC_COMPLETE)
                relay(fx, s, &r, unguest(&r), ref);
        }
        if (ref[0])
            sendf(fx, ":" SERVER " BATCH -%s", ref);
    }
    free(j->recs);
    free(j->at);
    free(j->chans);
    free(j->targets);
    j->recs = NULL;
    j->at = NULL;
    j->chans = NULL;
    j->targets = NULL;
    j->recs_cap = 0;
}

/* msgid=N, timestamp=YYYY-MM-DDThh:mm:ss[.sss]Z, or * (when star). */
static bool hist_parse_ref(const char *t, bool star, struct hist_ref *r)
{
    memset(r, 0, sizeof *r);
    if (star && !strcmp(t, "*")) {
        r->any = true;
        return true;
    }
    if (!strncmp(t, "msgid=", 6)) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(t + 6, &end, 10);
        r->id = v;
        return !errno && *end == 0 && end != t + 6 && v > 0;
    }
    if (strncmp(t, "timestamp=", 10) != 0)
        return false;
    struct tm tm = {0};
    const char *p = strptime(t + 10, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p)
        return false;
    long ms = 0;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 3)
                ms = ms * 10 + (*p - '0');
        for (; digits < 3 && digits > 0; digits++)
            ms *= 10;
    }
    if (strcmp(p, "Z") != 0)
        return false;
    r->by_time = true;
    r->ts_ns = (int64_t)timegm(&tm) * 1000000000 + (int64_t)ms * 1000000;
    return true;
}

/* MARKREAD target [timestamp=T]: the account's read marker of target, or
 * move it forward (never back). A move goes through the log, so every
 * connection of the account hears it, in any process. */
static void markread(struct chat_app *app, struct session *s, yard_fx_t *fx,
                     const yard_irc_msg_t *m)
{
    const char *target = m->n ? m->params[0] : "";
    size_t tn = strlen(target);
    bool chan = target[0] == '#' || target[0] == '&';
    if (s->guest) {
        sendf(fx, ":" SERVER " FAIL MARKREAD ACCOUNT_REQUIRED %s :Read markers are kept for "
                  "accounts; log in to keep one",
              tn ? target : "*");
        return;
    }
    if (!tn || tn > CHAT_CHAN_MAX || (chan ? !valid_channel(target)
                                           : !yard_account_name_valid(target, tn))) {
        sendf(fx, ":" SERVER " FAIL MARKREAD INVALID_PARAMS %s :Give a channel or nick, and "
                  "optionally timestamp=YYYY-MM-DDThh:mm:ss.sssZ",
              tn ? target : "*");
        return;
    }
    char key[CHAT_CHAN_MAX + 1], now[80];
    chat_casefold(key, target, tn);
    if (m->n < 2) {
        marker_text(app, s, key, now, sizeof now);
        sendf(fx, ":" SERVER " MARKREAD %s %s", target, now);
        return;
    }
    struct hist_ref ref;
    if (!hist_parse_ref(m->params[1], false, &ref) || !ref.by_time || ref.ts_ns <= 0) {
        sendf(fx, ":" SERVER " FAIL MARKREAD INVALID_PARAMS %s :The timestamp is "
                  "timestamp=YYYY-MM-DDThh:mm:ss.sssZ",
              target);
        return;
    }
    bool known;
    uint64_t was = chat_pos_get(app->cs, s->account_key, MARKER_CLIENT, key, &known);
    if (known && was >= (uint64_t)ref.ts_ns) { /* not back: the current one is the answer */
        marker_text(app, s, key, now, sizeof now);
        sendf(fx, ":" SERVER " MARKREAD %s %s", target, now);
        return;
    }
    chat_pos_set(app->cs, s->account_key, MARKER_CLIENT, key, (uint64_t)ref.ts_ns);
    char t[40];
    format_time(t, sizeof t, ref.ts_ns);
    yard_chatlog_entry_t ev;
    presence_ev(&ev, YARD_LOGREC_READ, s->sender, target, t);
    presence_put(app, &ev, 1);
}

static void chathistory(struct chat_app *app, struct session *s, yard_fx_t *fx,
                        const yard_irc_msg_t *m)
{
    static const char *const subs[] = {"LATEST", "BEFORE", "AFTER", "AROUND", "BETWEEN",
                                       "TARGETS"};
    const char *sub = m->n ? m->params[0] : "";
    int k = 0;
    while (k < 6 && strcasecmp(sub, subs[k]) != 0)
        k++;
    if (k == 6) {
        sendf(fx, ":" SERVER " FAIL CHATHISTORY UNKNOWN_COMMAND %s :Unknown subcommand",
              m->n ? sub : "*");
        return;
    }
    int need = k == HIST_BETWEEN ? 5 : 4;
    struct hist_job *j = &s->hist;
    memset(j, 0, sizeof *j);
    if (k == HIST_TARGETS) { /* TARGETS timestamp=T1 timestamp=T2 limit */
        char *tend = NULL;
        long tl = m->n >= 4 ? strtol(m->params[3], &tend, 10) : 0;
        if (m->n < 4 || !hist_parse_ref(m->params[1], false, &j->a) || !j->a.by_time ||
            !hist_parse_ref(m->params[2], false, &j->b) || !j->b.by_time || !tend || *tend ||
            tl < 1) {
            sendf(fx, ":" SERVER " FAIL CHATHISTORY INVALID_PARAMS TARGETS :Give two "
                      "timestamps and a limit of 1 to %d",
                  HISTORY_MAX);
            return;
        }
        /* The channels one is in now: only their history is one's to list. */
        chat_lock(app->cs);
        unsigned cap = chat_account_channels(app->cs, s->account_key, -1) + 1;
        j->chans = malloc(cap * sizeof *j->chans);
        for (unsigned c = 0; j->chans && c < app->cs->nchan && j->nchans < cap; c++)
            if (app->cs->chans[c].used && chat_is_in(app->cs, s->slot, (int)c))
                strcpy(j->chans[j->nchans++], app->cs->chans[c].key);
        chat_unlock(app->cs);
        if (!j->chans) {
            fx->nomem = true;
            return;
        }
        j->log = app->log;
        j->sub = k;
        j->limit = tl > HISTORY_MAX ? HISTORY_MAX : (unsigned)tl;
        strcpy(j->me, s->guest ? "" : s->account_key); /* a guest: channels only */
        strcpy(j->name, "*");
        yard_fx_io(fx, history_job_run, j);
        return;
    }
    char *end = NULL;
    long limit = m->n >= need ? strtol(m->params[need - 1], &end, 10) : 0;
    bool star = k == HIST_LATEST || k == HIST_BETWEEN;
    if (m->n < need || !hist_parse_ref(m->params[2], star, &j->a) ||
        (k == HIST_BETWEEN && !hist_parse_ref(m->params[3], true, &j->b)) || !end || *end ||
        limit < 1 || (j->a.any && k != HIST_LATEST)) {
        sendf(fx, ":" SERVER " FAIL CHATHISTORY INVALID_PARAMS %s :Give a target, %s and a "
                  "limit of 1 to %d",
              subs[k], k == HIST_BETWEEN ? "two references" : "a reference", HISTORY_MAX);
        return;
    }
    const char *target = m->params[1];
    size_t tn = strlen(target);
    j->channel = target[0] == '#' || target[0] == '&';
    bool ok = tn <= CHAT_CHAN_MAX;
    if (ok && j->channel) {
        chat_lock(app->cs);
        int c = chat_channel_find(app->cs, target, tn, false);
        ok = c >= 0 && chat_is_in(app->cs, s->slot, c);
        chat_unlock(app->cs);
    } else if (ok) { /* a private conversation: an account's (a guest has none kept) */
        ok = !s->guest && yard_account_name_valid(target, tn);
    }
    if (!ok) { /* a channel one is not in looks like one that does not exist */
        sendf(fx, ":" SERVER " FAIL CHATHISTORY INVALID_TARGET %s %s :No such channel or nick, "
                  "or you are not in that channel",
              subs[k], target);
        return;
    }
    j->log = app->log;
    j->sub = k;
    j->limit = limit > HISTORY_MAX ? HISTORY_MAX : (unsigned)limit;
    memcpy(j->name, target, tn + 1);
    chat_casefold(j->key, target, tn);
    strcpy(j->me, s->account_key);
    yard_fx_io(fx, history_job_run, j);
}

static void chat_job_done(void *state, void *session, void *arg, yard_fx_t *fx)
{
    struct chat_app *app = state;
    struct session *s = session;
    if (arg == &s->post) {
        post_done(app, s, fx);
    } else if (arg == &s->rd) {
        read_done(app, s, fx);
    } else if (arg == &s->hist) {
        history_done(app, s, fx);
    } else if (arg == &s->nj) {
        nick_done(app, s, fx);
    } else if (arg == &s->rp) {
        replay_done(app, s, fx);
        char rest[sizeof s->join_rest], keys[sizeof s->join_keys];
        memcpy(rest, s->join_rest, sizeof rest);
        memcpy(keys, s->join_keys, sizeof keys);
        join_list(app, s, fx, rest, keys); /* the JOIN's other channels */
    } else {
        auth_done(app, s, arg, fx);
    }
}

/* The live channel ch's name as first created; false if it was freed since. */
static bool channel_name(struct chat_app *app, int ch, char out[CHAT_CHAN_MAX + 1])
{
    chat_lock(app->cs);
    bool live = app->cs->chans[ch].used;
    if (live)
        strcpy(out, app->cs->chans[ch].name);
    chat_unlock(app->cs);
    return live;
}

static int channel_of(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *name,
                      bool need_member)
{
    chat_lock(app->cs);
    int c = chat_channel_find(app->cs, name, strlen(name), false);
    bool in = c >= 0 && chat_is_in(app->cs, s->slot, c);
    chat_unlock(app->cs);
    if (c < 0) {
        numeric(fx, s, 403, "%s :No such channel", name);
        return -1;
    }
    if (need_member && !in) {
        numeric(fx, s, 442, "%s :You're not on that channel", name);
        return -1;
    }
    return c;
}

static void part_one(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *name,
                     const char *why)
{
    int c = channel_of(app, s, fx, name, true);
    if (c < 0)
        return;
    catch_up(app, s, fx);
    if (fx->close)
        return;
    chat_lock(app->cs);
    char shown[CHAT_CHAN_MAX + 1];
    strcpy(shown, app->cs->chans[c].name);
    bool last = !account_in_elsewhere(app, s, c); /* of the account's connections */
    chat_set_in(app->cs, s->slot, c, false); /* the last one out frees the slot */
    chat_unlock(app->cs);
    sendf(fx, ":%s!%s@" SERVER " PART %s :%s", s->account, s->account, shown, why ? why : "");
    if (last) {
        yard_chatlog_entry_t ev;
        presence_ev(&ev, YARD_LOGREC_PART, s->sender, shown, why ? why : "");
        presence_put(app, &ev, 1);
    }
}

/* Split a comma list of targets in place: each target once (compared
 * casefolded), at most max of them; the rest are counted in *dropped (the
 * first of them in *first_dropped). Returns how many there are. */
static int split_targets(char *list, char **out, int max, int *dropped, char **first_dropped)
{
    int n = 0;
    *dropped = 0;
    *first_dropped = NULL;
    char keys[TARGMAX][CHAT_CHAN_MAX + 1];
    char *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char k[CHAT_CHAN_MAX + 1];
        size_t len = strlen(t);
        chat_casefold(k, t, len > CHAT_CHAN_MAX ? CHAT_CHAN_MAX : len);
        bool dup = false;
        for (int i = 0; i < n && !dup; i++)
            dup = strcmp(keys[i], k) == 0;
        if (dup)
            continue;
        if (n == max) {
            if (!(*dropped)++)
                *first_dropped = t;
            continue;
        }
        strcpy(keys[n], k);
        out[n++] = t;
    }
    return n;
}

static void message(struct chat_app *app, struct session *s, yard_fx_t *fx, const yard_irc_msg_t *m,
                    int type)
{
    bool tagmsg = type == YARD_LOGREC_TAGMSG;
    bool notice = type == YARD_LOGREC_NOTICE || tagmsg; /* never answered with an error */
    if (m->n < 1) {
        if (!notice)
            numeric(fx, s, 411, ":No recipient given (%s)", m->cmd);
        return;
    }
    if (!tagmsg && (m->n < 2 || !m->params[1][0])) {
        if (!notice)
            numeric(fx, s, 412, ":No text to send");
        return;
    }
    /* message-tags: the client-only tags (the '+' ones) are kept with the
     * message and relayed to the clients that take tags */
    char ctags[CLIENT_TAGS_MAX + 1];
    long ctn = m->tags && (s->caps & CAP_MESSAGE_TAGS)
                   ? yard_irc_client_tags(m->tags, ctags, sizeof ctags)
                   : 0;
    if (ctn < 0) {
        numeric(fx, s, 417, ":Input line was too long (client-only tags: at most %d bytes)",
                CLIENT_TAGS_MAX);
        return;
    }
    if (tagmsg && !ctn)
        return; /* a TAGMSG without tags tells nothing */
    char *targets[TARGMAX], *first_dropped;
    int dropped;
    int n = split_targets(m->params[0], targets, TARGMAX, &dropped, &first_dropped);
    if (dropped && !notice)
        numeric(fx, s, 407, "%s :Too many targets: at most %d (TARGMAX); %d not sent to",
                first_dropped, TARGMAX, dropped);
    post_begin(app, s, type, tagmsg ? "" : m->params[1]);
    memcpy(s->post.tags, ctags, (size_t)ctn);
    s->post.tags_len = (size_t)ctn;
    for (int i = 0; i < n; i++) {
        char *t = targets[i];
        if (t[0] == '#' || t[0] == '&') {
            chat_lock(app->cs);
            int c = chat_channel_find(app->cs, t, strlen(t), false);
            bool in = c >= 0 && chat_is_in(app->cs, s->slot, c);
            char shown[CHAT_CHAN_MAX + 1] = "";
            uint32_t modes = c >= 0 ? app->cs->chans[c].modes : 0;
            /* +m: the voiced and the operators speak (a rank is read only then) */
            bool muted = (modes & CHAT_MODE_M) &&
                         !chat_chan_rank(app->cs, app->cs->chans[c].key, s->account_key);
            bool guest_muted = (modes & CHAT_MODE_REG_SPEAK) && s->guest;
            if (c >= 0)
                strcpy(shown, app->cs->chans[c].name);
            chat_unlock(app->cs);
            if (c < 0) {
                if (!notice)
                    numeric(fx, s, 403, "%s :No such channel", t);
            } else if (!in && (modes & CHAT_MODE_N)) {
                if (!notice)
                    numeric(fx, s, 404, "%s :Cannot send to channel (+n: join it first)", t);
            } else if (muted) {
                if (!notice)
                    numeric(fx, s, 404, "%s :Cannot send to channel (+m: you need voice)", t);
            } else if (guest_muted) {
                if (!notice)
                    numeric(fx, s, 404, "%s :Cannot send to channel (+M: log in to an account "
                                        "to speak)",
                            t);
            } else {
                post_target(s, shown, false);
            }
            continue;
        }
        if (!yard_account_name_valid(t, strlen(t))) {
            if (!notice)
                numeric(fx, s, 401, "%s :No such nick/channel", t);
            continue;
        }
        if (type == YARD_LOGREC_MESSAGE && __atomic_load_n(&app->cs->away, __ATOMIC_RELAXED)) { /* a person who is away: say so; it still goes */
            struct presence p;
            presence_of(app, t, &p, NULL, 0);
            if (p.away)
                numeric(fx, s, 301, "%s :%s", p.account, p.away_msg);
        }
        /* With --guests, a connected guest is its nick; anyone else is
         * looked up as an account by the job. */
        char spelled[CHAT_NAME_MAX + 1] = "";
        if (app->set->guests) {
            char key[CHAT_NAME_MAX + 1];
            chat_casefold(key, t, strlen(t));
            chat_lock(app->cs);
            int g = chat_member_named(app->cs, key);
            if (g >= 0 && chat_member_at(app->cs, g)->guest)
                strcpy(spelled, chat_member_at(app->cs, g)->account);
            chat_unlock(app->cs);
        }
        if (spelled[0])
            post_target(s, spelled, false);
        else
            post_target(s, t, true);
    }
    post_start(s, fx);
}

/* ---- who is here: WHOIS, ISON, USERHOST, AWAY, LIST, LUSERS ---------------- */

static void whois(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *nick)
{
    struct presence p;
    char chans[400];
    presence_of(app, nick, &p, chans, sizeof chans);
    if (!p.online) {
        numeric(fx, s, 401, "%s :No such nick/channel", nick);
    } else {
        numeric(fx, s, 311, "%s %s " SERVER " * :%s", p.account, p.account, p.account);
        if (chans[0])
            numeric(fx, s, 319, "%s :%s", p.account, chans);
        numeric(fx, s, 312, "%s " SERVER " :Switchyard chat", p.account);
        if (p.away)
            numeric(fx, s, 301, "%s :%s", p.account, p.away_msg);
        if (!p.guest) /* a guest is logged in as nobody */
            numeric(fx, s, 330, "%s %s :is logged in as", p.account, p.account);
    }
    numeric(fx, s, 318, "%s :End of /WHOIS list.", p.online ? p.account : nick);
}

/* WHOWAS: the newest of the last CHAT_WHOWAS_MAX departures (an account's
 * last connection ending), whether or not it is back online. */
static void whowas(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *nick)
{
    struct chat_gone g;
    bool found = false;
    if (strlen(nick) <= CHAT_NAME_MAX) {
        chat_lock(app->cs);
        found = chat_whowas(app->cs, nick, &g);
        chat_unlock(app->cs);
    }
    if (!found) {
        numeric(fx, s, 406, "%s :There was no such nickname", nick);
    } else {
        char when[64];
        format_time(when, sizeof when, g.at_s * (int64_t)YARD_NS_PER_S);
        numeric(fx, s, 314, "%s %s " SERVER " * :%s", g.account, g.account, g.account);
        numeric(fx, s, 312, "%s " SERVER " :%s", g.account, when);
    }
    numeric(fx, s, 369, "%s :End of WHOWAS", found ? g.account : nick);
}

/* ISON and USERHOST: the online ones among the nicks given (USERHOST: at
 * most five, "nick=+nick@host", '-' when away). */
static void ison(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m,
                 bool userhost)
{
    char out[400];
    size_t len = 0;
    int asked = 0;
    out[0] = 0;
    for (int i = 0; i < m->n; i++) {
        char *save = NULL;
        for (char *t = strtok_r(m->params[i], " ", &save); t; t = strtok_r(NULL, " ", &save)) {
            if (userhost && asked == 5)
                break;
            asked++;
            struct presence p;
            presence_of(app, t, &p, NULL, 0);
            if (!p.online)
                continue;
            int w = userhost ? snprintf(out + len, sizeof out - len, "%s%s=%c%s@" SERVER,
                                        len ? " " : "", p.account, p.away ? '-' : '+', p.account)
                             : snprintf(out + len, sizeof out - len, "%s%s", len ? " " : "",
                                        p.account);
            if (w < 0 || (size_t)w >= sizeof out - len) {
                out[len] = 0;
                break;
            }
            len += (size_t)w;
        }
    }
    charge(s, asked);
    numeric(fx, s, userhost ? 302 : 303, ":%s", out);
}

/* Defer one AWAY record per channel the account is in (any connection). */
static void away_notify(struct chat_app *app, struct session *s, const char *msg)
{
    chat_state_t *cs = app->cs;
    uint64_t bits[(CHAT_CHANNELS_LIMIT + 63) / 64] = {0};
    unsigned n;
    chat_lock(cs);
    chat_account_others(cs, s->account_key, -1, bits);
    yard_chatlog_entry_t *ev = events_per_channel(cs, bits, YARD_LOGREC_AWAY, s->sender, msg, &n);
    chat_unlock(cs);
    if (n)
        presence_put(app, ev, n);
    free(ev);
}

static void away(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    const char *msg = m->n ? m->params[0] : "";
    size_t len = utf8_cut(msg, strlen(msg), CHAT_AWAY_MAX);
    struct presence before, after;
    presence_of(app, s->account, &before, NULL, 0);
    chat_lock(app->cs);
    struct chat_member *me = chat_member_at(app->cs, s->slot);
    if ((len > 0) != me->away) /* atomic: PRIVMSG reads it without the lock */
        __atomic_add_fetch(&app->cs->away, len > 0 ? 1u : (unsigned)-1, __ATOMIC_RELAXED);
    me->away = len > 0;
    me->away_at = fx->now_ns;
    memcpy(me->away_msg, msg, len);
    me->away_msg[len] = 0;
    chat_unlock(app->cs);
    /* away-notify: the account's state (away when every connection is) or
     * its message changed: one record per channel it is in, told once. */
    presence_of(app, s->account, &after, NULL, 0);
    if (before.away != after.away || (after.away && strcmp(before.away_msg, after.away_msg)))
        away_notify(app, s, after.away ? after.away_msg : "");
    if (len)
        numeric(fx, s, 306, ":You have been marked as being away");
    else
        numeric(fx, s, 305, ":You are no longer marked as being away");
}

/* LIST [#a,#b]: every live channel (or those named) with its members
 * (accounts, each once) and topic. */
static void list(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    numeric(fx, s, 321, "Channel :Users  Name");
    for (unsigned c = 0; c < app->cs->nchan; c++) {
        char shown[CHAT_CHAN_MAX + 1], key[CHAT_CHAN_MAX + 1];
        chat_lock(app->cs);
        bool used = app->cs->chans[c].used;
        if (used) {
            strcpy(shown, app->cs->chans[c].name);
            strcpy(key, app->cs->chans[c].key);
        }
        chat_unlock(app->cs);
        if (!used)
            continue;
        if (m->n >= 1 && m->params[0][0]) { /* only the channels named */
            bool named = false;
            char want[CHAT_CHAN_MAX + 1];
            const char *p = m->params[0];
            while (*p && !named) {
                size_t n = strcspn(p, ",");
                if (n <= CHAT_CHAN_MAX) {
                    chat_casefold(want, p, n);
                    named = !strcmp(want, key);
                }
                p += n + (p[n] == ',');
            }
            if (!named)
                continue;
        }
        size_t n;
        bool nomem;
        free(members_of(app, (int)c, &n, &nomem));
        if (nomem)
            fx->nomem = true;
        char topic[CHAT_TOPIC_MAX + 1], by[CHAT_NAME_MAX + 1];
        int64_t at;
        if (!chat_topic_get(app->cs, key, topic, by, &at))
            topic[0] = 0;
        numeric(fx, s, 322, "%s %zu :%s", shown, n, topic);
    }
    numeric(fx, s, 323, ":End of /LIST");
}

static void lusers(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    unsigned conns = 0;
    chat_lock(app->cs);
    for (unsigned i = 0; i < chat_member_end(app->cs); i++)
        conns += chat_member_at(app->cs, (int)i)->used;
    unsigned chans = app->cs->live_chans;
    chat_unlock(app->cs);
    numeric(fx, s, 251, ":There are %u users and 0 invisible on 1 servers", conns);
    numeric(fx, s, 254, "%u :channels formed", chans);
    numeric(fx, s, 255, ":I have %u clients and 0 servers", conns);
}

/* ---- channel operators: MODE, KICK, INVITE -------------------------------- */

/* The channel modes without a parameter, by letter; 0 for any other. */
static uint32_t flag_mode(char f)
{
    switch (f) {
    case 'M': return CHAT_MODE_REG_SPEAK;
    case 'R': return CHAT_MODE_REG_JOIN;
    case 'i': return CHAT_MODE_I;
    case 'm': return CHAT_MODE_M;
    case 'n': return CHAT_MODE_N;
    case 't': return CHAT_MODE_T;
    default: return 0;
    }
}

/* 324 (and 329): the channel's modes; its key only to its members. */
static void mode_reply(struct chat_app *app, struct session *s, yard_fx_t *fx, int ch, bool in)
{
    struct chat_chanrec rec;
    chat_lock(app->cs);
    char shown[CHAT_CHAN_MAX + 1];
    strcpy(shown, app->cs->chans[ch].name);
    bool have = chat_chan_get(app->cs, app->cs->chans[ch].key, &rec);
    if (!have) { /* no record (DIR/channels was full): the live copy */
        memset(&rec, 0, sizeof rec);
        rec.modes = app->cs->chans[ch].modes;
        rec.limit = app->cs->chans[ch].limit;
        memcpy(rec.key, app->cs->chans[ch].chkey, sizeof rec.key);
    }
    chat_unlock(app->cs);
    char flags[16], params[80] = "";
    size_t n = 0;
    flags[n++] = '+';
    for (const char *f = "MRiklmnt"; *f; f++) { /* in ASCII order, as servers list them */
        if (*f == 'k' && rec.key[0]) {
            flags[n++] = 'k';
            snprintf(params, sizeof params, " %s", in ? rec.key : "*");
        } else if (*f == 'l' && rec.limit) {
            flags[n++] = 'l';
            snprintf(params + strlen(params), sizeof params - strlen(params), " %u", rec.limit);
        } else if (rec.modes & flag_mode(*f)) {
            flags[n++] = *f;
        }
    }
    flags[n] = 0;
    numeric(fx, s, 324, "%s %s%s", shown, flags, params);
    if (have)
        numeric(fx, s, 329, "%s %lld", shown, (long long)rec.created_s);
}

/* A connection of the account (or the guest) named by key that is in
 * channel ch, its name's spelling in out (under the lock); -1 when none of
 * its connections is in it. */
static int member_in(struct chat_app *app, int ch, const char *key, char out[CHAT_NAME_MAX + 1])
{
    for (unsigned i = 0; i < chat_member_end(app->cs); i++) {
        struct chat_member *mb = chat_member_at(app->cs, (int)i);
        if (mb->used && !strcmp(mb->key, key) && chat_is_in(app->cs, (int)i, ch)) {
            strcpy(out, mb->account);
            return (int)i;
        }
    }
    return -1;
}

/* A +k key: 1..23 bytes, none of them a space, a comma, a colon first or
 * a control character. */
static bool valid_chankey(const char *k)
{
    size_t n = strlen(k);
    if (!n || n > CHAT_CHANKEY_MAX || k[0] == ':')
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)k[i] <= ' ' || k[i] == ',' || k[i] == 0x7f)
            return false;
    return true;
}

/* The changes one MODE made, as they are told: "+o-t" and its parameters. */
struct mode_change {
    char flags[64];
    size_t nflags;
    char params[MODES_MAX * (CHAT_NAME_MAX + 2) + 16];
    bool on; /* the sign flags ends with */
};

static void change_add(struct mode_change *mc, bool on, char flag, const char *param)
{
    if (mc->nflags + 3 >= sizeof mc->flags)
        return;
    if (!mc->nflags || mc->on != on)
        mc->flags[mc->nflags++] = on ? '+' : '-';
    mc->on = on;
    mc->flags[mc->nflags++] = flag;
    mc->flags[mc->nflags] = 0;
    if (param) {
        size_t used = strlen(mc->params);
        snprintf(mc->params + used, sizeof mc->params - used, " %s", param);
    }
}

/* One +o/-o/+v/-v on nick: the rank goes to (or from) the account. Under
 * the lock. */
static void mode_rank(struct chat_app *app, struct session *s, yard_fx_t *fx, int ch,
                      struct chat_chanrec *rec, struct mode_change *mc, bool on, char flag,
                      const char *nick)
{
    char key[CHAT_NAME_MAX + 1], spelled[CHAT_NAME_MAX + 1];
    size_t len = strlen(nick);
    const char *shown = app->cs->chans[ch].name;
    chat_casefold(key, nick, len > CHAT_NAME_MAX ? CHAT_NAME_MAX : len);
    int bit = flag == 'o' ? CHAT_RANK_OP : CHAT_RANK_VOICE;
    int holder = len <= CHAT_NAME_MAX ? member_in(app, ch, key, spelled) : -1;
    bool present = holder >= 0;
    if (on && present && chat_member_at(app->cs, holder)->guest) {
        /* Ranks are kept by name across restarts; a guest's name is not its own. */
        numeric(fx, s, 696, "%s %c %s :A guest cannot hold a rank (log in to an account)", shown,
                flag, nick);
        return;
    }
    /* A rank is given to a member; it may be taken from an account that is
     * not there (ranks are kept while one is away). */
    if (!present && !(!on && (chat_rank_of(rec, key) & bit))) {
        numeric(fx, s, 441, "%s %s :They aren't on that channel", nick, shown);
        return;
    }
    if (!present)
        snprintf(spelled, sizeof spelled, "%s", nick);
    if (!!(chat_rank_of(rec, key) & bit) == on)
        return; /* nothing changes */
    if (!chat_rank_set(rec, key, bit, on)) {
        numeric(fx, s, 696, "%s %c %s :The channel has no room for more ranks (%d accounts)",
                shown, flag, nick, CHAT_RANKS_MAX);
        return;
    }
    change_add(mc, on, flag, spelled);
}

/* MODE #chan [changes [parameters]]: a query, a list query, or changes by
 * an operator. The changes are kept in DIR/channels, then told to every
 * member through the log (a mode record), the setter included. */
static void chan_mode(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    int ch = channel_of(app, s, fx, m->params[0], false);
    if (ch < 0)
        return;
    chat_lock(app->cs);
    bool in = chat_is_in(app->cs, s->slot, ch);
    chat_unlock(app->cs);
    if (m->n == 1) {
        mode_reply(app, s, fx, ch, in);
        return;
    }
    /* The list queries a client sends on JOIN (irssi waits for each end
     * before it calls the channel synced): bans, exceptions and invite
     * exceptions are not kept here, so the lists are empty. */
    const char *q = m->params[1] + (m->params[1][0] == '+');
    if (m->n == 2 && (!strcmp(q, "b") || !strcmp(q, "e") || !strcmp(q, "I"))) {
        int code = q[0] == 'b' ? 368 : q[0] == 'e' ? 349 : 347;
        const char *what = q[0] == 'b' ? "ban" : q[0] == 'e' ? "exception" : "invite";
        numeric(fx, s, code, "%s :End of channel %s list", m->params[0], what);
        return;
    }
    if (!in) {
        numeric(fx, s, 442, "%s :You're not on that channel", m->params[0]);
        return;
    }
    chat_lock(app->cs);
    chat_state_t *cs = app->cs;
    char shown[CHAT_CHAN_MAX + 1], key[CHAT_CHAN_MAX + 1];
    strcpy(shown, cs->chans[ch].name);
    strcpy(key, cs->chans[ch].key);
    struct chat_chanrec rec;
    if (!chat_chan_get(cs, key, &rec) || !(chat_rank_of(&rec, s->account_key) & CHAT_RANK_OP)) {
        chat_unlock(cs);
        numeric(fx, s, 482, "%s :You're not channel operator", shown);
        return;
    }
    struct mode_change mc = {.nflags = 0};
    bool on = true;
    int arg = 2, with_param = 0;
    for (const char *p = m->params[1]; *p; p++) {
        char f = *p;
        if (f == '+' || f == '-') {
            on = f == '+';
            continue;
        }
        uint32_t bit = flag_mode(f);
        if (bit) {
            if (!!(rec.modes & bit) != on) {
                rec.modes ^= bit;
                change_add(&mc, on, f, NULL);
            }
            continue;
        }
        bool takes = f == 'o' || f == 'v' || f == 'k' || (f == 'l' && on);
        if (!takes && f != 'l') {
            numeric(fx, s, 472, "%c :is an unknown mode char to me (modes: MRiklmnotv)", f);
            continue;
        }
        const char *param = NULL;
        if (takes) {
            if (arg >= m->n || with_param == MODES_MAX) {
                if (f != 'k' || on) /* -k may come without its key */
                    numeric(fx, s, 696, "%s %c * :%s", shown, f,
                            arg >= m->n ? "This mode needs a parameter"
                                        : "Too many changes with a parameter (MODES)");
                if (f != 'k' || on)
                    continue;
            } else {
                param = m->params[arg++];
                with_param++;
            }
        }
        if (f == 'o' || f == 'v') {
            mode_rank(app, s, fx, ch, &rec, &mc, on, f, param);
        } else if (f == 'k' && on) {
            if (!valid_chankey(param)) {
                numeric(fx, s, 696, "%s k %s :A key is 1-%d characters, no spaces or commas",
                        shown, param, CHAT_CHANKEY_MAX);
            } else if (strcmp(rec.key, param)) {
                snprintf(rec.key, sizeof rec.key, "%s", param);
                change_add(&mc, true, 'k', param);
            }
        } else if (f == 'k') {
            if (rec.key[0]) {
                rec.key[0] = 0;
                change_add(&mc, false, 'k', "*");
            }
        } else if (on) { /* +l */
            char *end;
            errno = 0;
            unsigned long v = strtoul(param, &end, 10);
            if (errno || *end || end == param || param[0] == '-' || !v || v > 1000000) {
                numeric(fx, s, 696, "%s l %s :A limit is a number of members, 1 to 1000000",
                        shown, param);
            } else if (rec.limit != v) {
                rec.limit = (uint32_t)v;
                change_add(&mc, true, 'l', param);
            }
        } else if (rec.limit) { /* -l */
            rec.limit = 0;
            change_add(&mc, false, 'l', NULL);
        }
    }
    bool kept = !mc.nflags || chat_chan_put(cs, key, &rec, yard_wall_ns() / (int64_t)YARD_NS_PER_S);
    chat_unlock(cs);
    if (!mc.nflags)
        return;
    if (!kept) {
        numeric(fx, s, 482, "%s :The modes were not changed: the server keeps no more channels",
                shown);
        return;
    }
    yard_chatlog_entry_t ev;
    char text[sizeof mc.flags + sizeof mc.params];
    snprintf(text, sizeof text, "%s%s", mc.flags, mc.params);
    presence_ev(&ev, YARD_LOGREC_MODE, s->sender, shown, text);
    presence_put(app, &ev, 1);
}

/* KICK #chan nick[,nick] [:reason]: an operator takes every connection of
 * each account out of the channel; the members and the kicked hear it
 * through the log (a kick record, "nick reason"). */
static void kick(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    if (m->n < 2) {
        numeric(fx, s, 461, "KICK :Not enough parameters");
        return;
    }
    int ch = channel_of(app, s, fx, m->params[0], true);
    if (ch < 0)
        return;
    char shown[CHAT_CHAN_MAX + 1];
    chat_lock(app->cs);
    strcpy(shown, app->cs->chans[ch].name);
    bool op = chat_chan_rank(app->cs, app->cs->chans[ch].key, s->account_key) & CHAT_RANK_OP;
    chat_unlock(app->cs);
    if (!op) {
        numeric(fx, s, 482, "%s :You're not channel operator", shown);
        return;
    }
    const char *why = m->n > 2 && m->params[2][0] ? m->params[2] : s->account;
    size_t wn = utf8_cut(why, strlen(why), KICK_REASON_MAX);
    char *targets[TARGMAX], *first_dropped;
    int dropped;
    int n = split_targets(m->params[1], targets, TARGMAX, &dropped, &first_dropped);
    if (dropped)
        numeric(fx, s, 407, "%s :Too many targets: at most %d (TARGMAX)", first_dropped, TARGMAX);
    yard_chatlog_entry_t ev[TARGMAX];
    unsigned nev = 0;
    for (int i = 0; i < n; i++) {
        char key[CHAT_NAME_MAX + 1], spelled[CHAT_NAME_MAX + 1], text[CHAT_NAME_MAX + 2 + KICK_REASON_MAX];
        size_t len = strlen(targets[i]);
        bool found = false;
        chat_casefold(key, targets[i], len > CHAT_NAME_MAX ? CHAT_NAME_MAX : len);
        chat_lock(app->cs);
        /* The channel may have emptied (a kick of oneself, the last member) */
        if (len <= CHAT_NAME_MAX && app->cs->chans[ch].used &&
            member_in(app, ch, key, spelled) >= 0)
            found = chat_account_leave(app->cs, key, ch) > 0;
        chat_unlock(app->cs);
        if (!found) {
            numeric(fx, s, 441, "%s %s :They aren't on that channel", targets[i], shown);
            continue;
        }
        snprintf(text, sizeof text, "%s %.*s", spelled, (int)wn, why);
        presence_ev(&ev[nev++], YARD_LOGREC_KICK, s->sender, shown, text);
    }
    charge(s, n);
    if (nev)
        presence_put(app, ev, nev);
}

/* INVITE nick #chan: a member (an operator, when the channel is +i) lets
 * an account join past +i while the channel stays live; the account hears
 * it through the log (an invite record). */
static void invite(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    if (m->n < 2) {
        numeric(fx, s, 461, "INVITE :Not enough parameters");
        return;
    }
    const char *nick = m->params[0];
    int ch = channel_of(app, s, fx, m->params[1], true);
    if (ch < 0)
        return;
    struct presence p;
    presence_of(app, nick, &p, NULL, 0);
    if (!p.online) {
        numeric(fx, s, 401, "%s :No such nick/channel", nick);
        return;
    }
    char key[CHAT_NAME_MAX + 1], spelled[CHAT_NAME_MAX + 1], shown[CHAT_CHAN_MAX + 1];
    chat_casefold(key, p.account, strlen(p.account));
    chat_lock(app->cs);
    strcpy(shown, app->cs->chans[ch].name);
    bool there = member_in(app, ch, key, spelled) >= 0;
    bool allowed = !(app->cs->chans[ch].modes & CHAT_MODE_I) ||
                   (chat_chan_rank(app->cs, app->cs->chans[ch].key, s->account_key) &
                    CHAT_RANK_OP);
    if (!there && allowed)
        chat_invite_add(app->cs, ch, key);
    chat_unlock(app->cs);
    if (there) {
        numeric(fx, s, 443, "%s %s :is already on channel", p.account, shown);
        return;
    }
    if (!allowed) {
        numeric(fx, s, 482, "%s :You're not channel operator (+i)", shown);
        return;
    }
    numeric(fx, s, 341, "%s %s", p.account, shown);
    yard_chatlog_entry_t ev;
    presence_ev(&ev, YARD_LOGREC_INVITE, s->sender, p.account, shown);
    presence_put(app, &ev, 1);
}

/* ---- the command table --------------------------------------------------- */

static void cap(struct chat_app *app, struct session *s, yard_fx_t *fx, const yard_irc_msg_t *m)
{
    const char *sub = m->n ? m->params[0] : "";
    if (!strcasecmp(sub, "LS") || !strcasecmp(sub, "LIST")) {
        if (s->state != ST_READY)
            s->cap_active = true;
        bool ls = !strcasecmp(sub, "LS");
        /* Values (sasl=PLAIN) only for clients that said they read them:
         * CAP LS 302. */
        bool values = ls && m->n > 1 && atoi(m->params[1]) >= 302;
        char names[400];
        size_t n = 0;
        names[0] = 0;
        for (size_t i = 0; i < NCAPS; i++)
            if (ls || (s->caps & cap_names[i].bit))
                n += (size_t)snprintf(names + n, sizeof names - n, "%s%s%s", n ? " " : "",
                                      cap_names[i].name,
                                      values && cap_names[i].bit == CAP_SASL ? "=PLAIN" : "");
        sendf(fx, ":" SERVER " CAP %s %s :%s", who(s), ls ? "LS" : "LIST", names);
    } else if (!strcasecmp(sub, "REQ")) {
        if (s->state != ST_READY)
            s->cap_active = true;
        const char *list = m->n > 1 ? m->params[1] : "";
        char copy[512];
        snprintf(copy, sizeof copy, "%s", list);
        unsigned caps = s->caps;
        bool ok = true;
        char *save = NULL;
        for (char *c = strtok_r(copy, " ", &save); c && ok; c = strtok_r(NULL, " ", &save)) {
            bool off = c[0] == '-';
            const char *name = off ? c + 1 : c;
            size_t i = 0;
            while (i < NCAPS && strcmp(name, cap_names[i].name) != 0)
                i++;
            if (i == NCAPS)
                ok = false; /* all or nothing */
            else if (off)
                caps &= ~cap_names[i].bit;
            else
                caps |= cap_names[i].bit;
        }
        if (ok)
            s->caps = caps;
        sendf(fx, ":" SERVER " CAP %s %s :%s", who(s), ok ? "ACK" : "NAK", list);
    } else if (!strcasecmp(sub, "END")) {
        s->cap_active = false;
        try_register(app, s, fx);
    } else {
        numeric(fx, s, 410, "%s :Invalid CAP command", sub);
    }
}

/* A device's client id: letters, digits, '-', '_' and '.', lower case. */
static void set_client(struct session *s, const char *id, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o < CHAT_CLIENT_MAX; i++) {
        char c = id[i];
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.')
            s->client[o++] = c;
        else if (c >= 'A' && c <= 'Z')
            s->client[o++] = (char)(c - 'A' + 'a');
    }
    s->client[o] = 0;
}

static void authenticate(struct chat_app *app, struct session *s, yard_fx_t *fx,
                         const yard_irc_msg_t *m)
{
    if ((s->state == ST_READY && !s->guest) || s->sasl_done) {
        numeric(fx, s, 907, ":You have already authenticated using SASL");
        return;
    }
    if (s->guest && !(s->caps & CAP_SASL)) {
        numeric(fx, s, 904, ":SASL authentication failed: ask for the sasl capability first "
                            "(CAP REQ :sasl), or log in with PASS account:password");
        return;
    }
    if (m->n < 1) {
        numeric(fx, s, 461, "AUTHENTICATE :Not enough parameters");
        return;
    }
    const char *arg = m->params[0];
    if (!s->sasl_plain) {
        if (!strcmp(arg, "*")) {
            numeric(fx, s, 906, ":SASL authentication aborted");
        } else if (strcasecmp(arg, "PLAIN") != 0) {
            numeric(fx, s, 908, "PLAIN :are available SASL mechanisms");
            numeric(fx, s, 904, ":SASL authentication failed");
        } else {
            s->sasl_plain = true;
            s->sasl_len = 0;
            sendf(fx, "AUTHENTICATE +");
        }
        return;
    }
    if (!strcmp(arg, "*")) {
        s->sasl_plain = false;
        numeric(fx, s, 906, ":SASL authentication aborted");
        return;
    }
    /* The payload comes in 400-byte pieces; a shorter one (or "+") ends it. */
    size_t n = strcmp(arg, "+") ? strlen(arg) : 0;
    if (s->sasl_len + n >= sizeof s->sasl_buf) {
        s->sasl_plain = false;
        numeric(fx, s, 905, ":SASL message too long");
        return;
    }
    memcpy(s->sasl_buf + s->sasl_len, arg, n);
    s->sasl_len += n;
    if (n == 400)
        return;
    s->sasl_plain = false;
    char plain[768];
    long len = yard_b64decode(s->sasl_buf, s->sasl_len, plain, sizeof plain);
    explicit_bzero(s->sasl_buf, sizeof s->sasl_buf);
    const char *user, *pass;
    size_t ulen, plen;
    if (len <= 0 || !yard_sasl_plain_split(plain, (size_t)len, &user, &ulen, &pass, &plen)) {
        numeric(fx, s, 904, ":SASL authentication failed (malformed PLAIN)");
        explicit_bzero(plain, sizeof plain);
        return;
    }
    /* "alice@phone": the account alice, from the device called phone. */
    const char *at = memchr(user, '@', ulen);
    if (at) {
        set_client(s, at + 1, (size_t)(user + ulen - at - 1));
        s->client_from_sasl = true;
        ulen = (size_t)(at - user);
    }
    start_auth(app, s, fx, user, ulen, pass, plen, true);
    explicit_bzero(plain, sizeof plain);
}

static void command(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    const char *c = m->cmd;
    if (!strcmp(c, "PING")) {
        sendf(fx, ":" SERVER " PONG " SERVER " :%s", m->n ? m->params[0] : "");
        return;
    }
    if (!strcmp(c, "PONG"))
        return;
    if (!strcmp(c, "QUIT")) {
        snprintf(s->quit_reason, sizeof s->quit_reason, "Quit: %s", m->n ? m->params[0] : "");
        sendf(fx, "ERROR :Closing Link: %s (Quit: %s)", who(s), m->n ? m->params[0] : "");
        yard_fx_close(fx, NULL);
        return;
    }
    if (!strcmp(c, "CAP")) {
        cap(app, s, fx, m);
        return;
    }
    if (s->state != ST_READY) {
        if (!strcmp(c, "AUTHENTICATE")) {
            authenticate(app, s, fx, m);
        } else if (!strcmp(c, "PASS")) {
            if (m->n < 1) {
                numeric(fx, s, 461, "PASS :Not enough parameters");
            } else {
                snprintf(s->pass, sizeof s->pass, "%s", m->params[0]);
                s->have_pass = true;
            }
        } else if (!strcmp(c, "NICK")) {
            if (m->n < 1) {
                numeric(fx, s, 431, ":No nickname given");
            } else if (!yard_account_name_valid(m->params[0], strlen(m->params[0]))) {
                numeric(fx, s, 432, "%s :Erroneous nickname", m->params[0]);
            } else {
                snprintf(s->nick, sizeof s->nick, "%s", m->params[0]);
                s->got_nick = true;
                try_register(app, s, fx);
            }
        } else if (!strcmp(c, "USER")) {
            if (m->n < 4) {
                numeric(fx, s, 461, "USER :Not enough parameters");
            } else {
                /* The user name says which device this is ("phone", or
                 * "alice@phone"), unless SASL's user name already did. */
                const char *u = m->params[0], *at = strchr(u, '@');
                if (!s->client_from_sasl)
                    set_client(s, at ? at + 1 : u, strlen(at ? at + 1 : u));
                const char *real = m->params[3];
                size_t rn = utf8_cut(real, strlen(real), CHAT_REALNAME_MAX);
                memcpy(s->realname, real, rn);
                s->realname[rn] = 0;
                s->got_user = true;
                try_register(app, s, fx);
            }
        } else {
            numeric(fx, s, 451, "%s :You have not registered", c);
        }
        return;
    }
    if (!strcmp(c, "PRIVMSG")) {
        message(app, s, fx, m, YARD_LOGREC_MESSAGE);
    } else if (!strcmp(c, "NOTICE")) {
        message(app, s, fx, m, YARD_LOGREC_NOTICE);
    } else if (!strcmp(c, "TAGMSG")) {
        message(app, s, fx, m, YARD_LOGREC_TAGMSG);
    } else if (!strcmp(c, "JOIN")) {
        if (m->n < 1) {
            numeric(fx, s, 461, "JOIN :Not enough parameters");
            return;
        }
        if (!strcmp(m->params[0], "0")) { /* leave every channel */
            for (unsigned i = 0; i < app->cs->nchan; i++) {
                chat_lock(app->cs);
                bool in = app->cs->chans[i].used && chat_is_in(app->cs, s->slot, (int)i);
                char name[CHAT_CHAN_MAX + 1];
                strcpy(name, app->cs->chans[i].name);
                chat_unlock(app->cs);
                if (in)
                    part_one(app, s, fx, name, "Left all channels");
            }
            return;
        }
        int n = 0; /* as strtok_r counts them: empty names are skipped */
        for (const char *p = m->params[0]; *p; p++)
            n += *p != ',' && (p == m->params[0] || p[-1] == ',');
        charge(s, n);
        join_list(app, s, fx, m->params[0], m->n > 1 ? m->params[1] : NULL);
    } else if (!strcmp(c, "PART")) {
        if (m->n < 1) {
            numeric(fx, s, 461, "PART :Not enough parameters");
            return;
        }
        char *save = NULL;
        int n = 0;
        for (char *t = strtok_r(m->params[0], ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            part_one(app, s, fx, t, m->n > 1 ? m->params[1] : NULL);
            n++;
        }
        charge(s, n);
    } else if (!strcmp(c, "NAMES")) {
        if (m->n < 1) {
            numeric(fx, s, 366, "* :End of /NAMES list.");
            return;
        }
        char *save = NULL;
        int n = 0;
        for (char *t = strtok_r(m->params[0], ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            char shown[CHAT_CHAN_MAX + 1];
            int ch = channel_of(app, s, fx, t, false);
            if (ch >= 0 && channel_name(app, ch, shown))
                names(app, s, fx, ch, shown);
            n++;
        }
        charge(s, n);
    } else if (!strcmp(c, "TOPIC")) {
        if (m->n < 1) {
            numeric(fx, s, 461, "TOPIC :Not enough parameters");
            return;
        }
        int ch = channel_of(app, s, fx, m->params[0], m->n > 1);
        if (ch < 0)
            return;
        chat_lock(app->cs);
        char shown[CHAT_CHAN_MAX + 1], key[CHAT_CHAN_MAX + 1];
        strcpy(shown, app->cs->chans[ch].name);
        strcpy(key, app->cs->chans[ch].key);
        chat_unlock(app->cs);
        if (m->n == 1) {
            topic_reply(app, s, fx, shown, key);
            return;
        }
        chat_lock(app->cs);
        bool locked = (app->cs->chans[ch].modes & CHAT_MODE_T) &&
                      !(chat_chan_rank(app->cs, key, s->account_key) & CHAT_RANK_OP);
        chat_unlock(app->cs);
        if (locked) {
            numeric(fx, s, 482, "%s :You're not channel operator (+t)", shown);
            return;
        }
        /* The change goes through the log like a message: every member
         * sees it, in the log's order, and the topic outlives a restart. */
        const char *text = m->params[1];
        size_t len = utf8_cut(text, strlen(text), CHAT_TOPIC_MAX);
        char topic[CHAT_TOPIC_MAX + 1];
        memcpy(topic, text, len);
        topic[len] = 0;
        if (!chat_topic_set(app->cs, key, topic, len, s->account, yard_wall_ns() / (int64_t)YARD_NS_PER_S)) {
            sendf(fx, ":" SERVER " NOTICE %s :The topic of %s was not set: the server holds no "
                      "more topics",
                  s->account, shown);
            return;
        }
        post_begin(app, s, YARD_LOGREC_TOPIC, topic);
        post_target(s, shown, false);
        post_start(s, fx);
    } else if (!strcmp(c, "MOTD")) {
        if (app->motd[0]) {
            numeric(fx, s, 375, ":- " SERVER " Message of the day -");
            numeric(fx, s, 372, ":- %.400s", app->motd);
            numeric(fx, s, 376, ":End of /MOTD command.");
        } else {
            numeric(fx, s, 422, ":MOTD File is missing");
        }
    } else if (!strcmp(c, "WHO")) {
        const char *mask = m->n ? m->params[0] : "*";
        int ch = (mask[0] == '#' || mask[0] == '&') ? channel_of(app, s, fx, mask, false) : -1;
        char shown[CHAT_CHAN_MAX + 1];
        if (ch >= 0 && channel_name(app, ch, shown)) {
            size_t n;
            bool nomem;
            char(*who_is)[CHAT_NAME_MAX + 1] = members_of(app, ch, &n, &nomem);
            if (nomem)
                fx->nomem = true;
            struct chat_chanrec rec;
            ranks_of(app, ch, &rec);
            for (size_t i = 0; i < n; i++)
                numeric(fx, s, 352, "%s %s " SERVER " " SERVER " %s H%s :0 %s", shown, who_is[i],
                        who_is[i], rank_prefix(rank_in(&rec, who_is[i]), s), who_is[i]);
            free(who_is);
        }
        numeric(fx, s, 315, "%s :End of /WHO list.", mask);
    } else if (!strcmp(c, "MODE")) {
        if (m->n >= 1 && (m->params[0][0] == '#' || m->params[0][0] == '&')) {
            chan_mode(app, s, fx, m);
        } else if (m->n >= 1 && strcasecmp(m->params[0], s->account)) {
            numeric(fx, s, 502, ":Cannot change mode for other users");
        } else if (m->n == 1) {
            numeric(fx, s, 221, "+%s%s", s->umode_i ? "i" : "", s->umode_w ? "w" : "");
        } else {
            /* +i and +w are kept (and change nothing else here); others: 501 */
            bool on = true, i = s->umode_i, w = s->umode_w, unknown = false;
            for (const char *p = m->params[1]; *p; p++) {
                if (*p == '+' || *p == '-')
                    on = *p == '+';
                else if (*p == 'i')
                    i = on;
                else if (*p == 'w')
                    w = on;
                else
                    unknown = true;
            }
            if (unknown)
                numeric(fx, s, 501, ":Unknown MODE flag");
            if (i != s->umode_i || w != s->umode_w) {
                char change[8];
                size_t n = 0;
                if ((i && !s->umode_i) || (w && !s->umode_w)) {
                    change[n++] = '+';
                    if (i && !s->umode_i)
                        change[n++] = 'i';
                    if (w && !s->umode_w)
                        change[n++] = 'w';
                }
                if ((!i && s->umode_i) || (!w && s->umode_w)) {
                    change[n++] = '-';
                    if (!i && s->umode_i)
                        change[n++] = 'i';
                    if (!w && s->umode_w)
                        change[n++] = 'w';
                }
                change[n] = 0;
                s->umode_i = i;
                s->umode_w = w;
                sendf(fx, ":%s!%s@" SERVER " MODE %s :%s", s->account, s->account, s->account,
                      change);
            }
        }
    } else if (!strcmp(c, "WHOIS") || !strcmp(c, "WHOWAS")) {
        if (m->n < 1) {
            numeric(fx, s, 431, ":No nickname given");
            return;
        }
        /* WHOIS [server] nick[,nick]: the nicks are the last parameter;
         * WHOWAS nick[,nick] [count]: the first */
        bool is = c[3] == 'I';
        char *save = NULL;
        int n = 0;
        for (char *t = strtok_r(m->params[is ? m->n - 1 : 0], ",", &save); t && n < TARGMAX;
             t = strtok_r(NULL, ",", &save), n++)
            (is ? whois : whowas)(app, s, fx, t);
        charge(s, n);
    } else if (!strcmp(c, "ISON") || !strcmp(c, "USERHOST")) {
        if (m->n < 1) {
            numeric(fx, s, 461, "%s :Not enough parameters", c);
            return;
        }
        ison(app, s, fx, m, c[0] == 'U');
    } else if (!strcmp(c, "AWAY")) {
        away(app, s, fx, m);
    } else if (!strcmp(c, "KICK")) {
        kick(app, s, fx, m);
    } else if (!strcmp(c, "INVITE")) {
        invite(app, s, fx, m);
    } else if (!strcmp(c, "CHATHISTORY")) {
        chathistory(app, s, fx, m);
    } else if (!strcmp(c, "MARKREAD")) {
        markread(app, s, fx, m);
    } else if (!strcmp(c, "LIST")) {
        list(app, s, fx, m);
    } else if (!strcmp(c, "LUSERS")) {
        lusers(app, s, fx);
    } else if (!strcmp(c, "VERSION")) {
        numeric(fx, s, 351, "switchyard-chat " SERVER " :Switchyard chat (docs/chat.md)");
    } else if (!strcmp(c, "TIME")) {
        char when[64];
        format_time(when, sizeof when, yard_wall_ns());
        numeric(fx, s, 391, SERVER " :%s", when);
    } else if (!strcmp(c, "NICK")) {
        if (m->n < 1) {
            numeric(fx, s, 431, ":No nickname given");
        } else if (!s->guest) {
            if (strcasecmp(m->params[0], s->account) != 0)
                numeric(fx, s, 432, "%s :Your nick is your account name", m->params[0]);
        } else if (!yard_account_name_valid(m->params[0], strlen(m->params[0]))) {
            numeric(fx, s, 432, "%s :Erroneous nickname (1-%d characters: a letter or one of "
                                "[\\]^_`{|} first, then also digits and -)",
                    m->params[0], CHAT_NAME_MAX);
        } else if (strcmp(m->params[0], s->account) && !s->nick_checking) {
            nick_check(app, s, fx, m->params[0]); /* an account's? then in use? */
        }
    } else if (!strcmp(c, "PASS") && s->guest) {
        /* A guest logs in with PASS account:password (its nick may be
         * anything, so the account is named here). */
        const char *colon = m->n ? strchr(m->params[0], ':') : NULL;
        if (!colon || colon == m->params[0]) {
            numeric(fx, s, 461, "PASS :Give account:password to log in");
            return;
        }
        start_auth(app, s, fx, m->params[0], (size_t)(colon - m->params[0]), colon + 1,
                   strlen(colon + 1), false);
        explicit_bzero(m->params[0], strlen(m->params[0]));
    } else if (!strcmp(c, "USER") || !strcmp(c, "PASS")) {
        numeric(fx, s, 462, ":You may not reregister");
    } else if (!strcmp(c, "AUTHENTICATE")) {
        authenticate(app, s, fx, m); /* a guest may log in; an account is told 907 */
    } else {
        numeric(fx, s, 421, "%s :Unknown command", c);
    }
}

/* ---- the app callbacks --------------------------------------------------- */

static void chat_open(void *state, void *session, yard_fx_t *fx)
{
    struct chat_app *app = state;
    struct session *s = session;
    s->slot = -1;
    s->tokens = app->set->flood_burst;
    s->tokens_at = fx->now_ns;
    s->register_by = fx->now_ns + app->set->register_timeout_ns;
    chat_addr_of(fx->peer, &s->addr);
    int v = chat_guard_enter(app->guard, &s->addr, fx->now_ns, &s->enter_ticket);
    if (v != CHAT_GUARD_OK) {
        char where[64];
        chat_addr_text(&s->addr, where, sizeof where);
        if (v == CHAT_GUARD_TOO_MANY)
            sendf(fx, "ERROR :Closing Link: too many connections from %s have not logged in "
                      "(at most %u)",
                  where, app->set->unregistered_per_addr);
        else
            sendf(fx, "ERROR :Closing Link: the server is busy; try again later");
        yard_fx_close(fx, NULL);
        return;
    }
    yard_fx_wake_at(fx, s->register_by);
}

/* A logged-in client silent for --ping-interval-ms gets a PING; one that
 * stays silent --ping-timeout-ms more is closed. Sending anything counts as
 * an answer, so the timer is only looked at when it fires (nothing is
 * re-armed per line): it wakes when the next of the two could be due. */
static void liveness(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    const struct chat_settings *set = app->set;
    if (!set->ping_interval_ns)
        return;
    uint64_t now = fx->now_ns;
    if (s->pinged_ns && now >= s->pinged_ns + set->ping_timeout_ns) {
        snprintf(s->quit_reason, sizeof s->quit_reason, "Ping timeout: %llu seconds",
                 (unsigned long long)((now - s->heard_ns) / YARD_NS_PER_S));
        sendf(fx, "ERROR :Closing Link: %s (%s)", s->account, s->quit_reason);
        yard_fx_close(fx, NULL);
        return;
    }
    if (!s->pinged_ns && now >= s->heard_ns + set->ping_interval_ns) {
        sendf(fx, "PING :" SERVER);
        s->pinged_ns = now;
    }
    yard_fx_wake_idle(fx, s->pinged_ns ? s->pinged_ns + set->ping_timeout_ns
                                       : s->heard_ns + set->ping_interval_ns);
}

static void chat_timer(void *state, void *session, yard_fx_t *fx)
{
    struct chat_app *app = state;
    struct session *s = session;
    if (s->pending_fail && fx->now_ns >= s->fail_until) {
        int code = s->pending_fail;
        s->pending_fail = 0;
        if (code == 904) {
            numeric(fx, s, 904, ":SASL authentication failed");
            try_register(app, s, fx); /* NICK and USER may be waiting */
        } else {
            numeric(fx, s, 464, ":Password incorrect");
            sendf(fx, "ERROR :Closing Link: password incorrect");
            yard_fx_close(fx, NULL);
            return;
        }
        if (s->state != ST_READY)
            yard_fx_wake_at(fx, s->register_by);
        else
            liveness(app, s, fx); /* a guest's failed login: its timer watches it again */
        return;
    }
    if (s->state == ST_WAIT && fx->now_ns < s->register_by) {
        start_auth(app, s, fx, s->wait_account, strlen(s->wait_account), s->wait_password,
                   strlen(s->wait_password), s->wait_sasl);
        if (s->state == ST_NEW && !fx->close)
            yard_fx_wake_at(fx, s->register_by); /* refused at once (904): time goes on */
        return;
    }
    if (s->state != ST_READY) {
        sendf(fx, "ERROR :Closing Link: registration timed out");
        yard_fx_close(fx, NULL);
        return;
    }
    /* Otherwise: a flood-control pause is over (the engine offers the
     * waiting input again), or it is time to look at liveness. */
    liveness(app, s, fx);
}

static size_t chat_data(void *state, void *session, const uint8_t *in, size_t n, yard_fx_t *fx)
{
    struct chat_app *app = state;
    struct session *s = session;
    size_t used = 0;
    s->heard_ns = fx->now_ns; /* any line is a sign of life (the timer checks lazily) */
    s->pinged_ns = 0;
    /* Refill the flood bucket. */
    double dt = (double)(fx->now_ns - s->tokens_at) / 1e9, rate = app->set->flood_rate,
           burst = app->set->flood_burst;
    s->tokens_at = fx->now_ns;
    s->tokens = s->tokens + dt * rate > burst ? burst : s->tokens + dt * rate;
    while (used < n && !fx->close && !fx->job && !s->pending_fail && s->state != ST_WAIT) {
        const char *p = (const char *)in + used;
        size_t left = n - used;
        if (s->discarding) {
            /* The rest of an overlong line, up to its end (a CR or a LF). */
            size_t end = 0;
            while (end < left && p[end] != '\n' && p[end] != '\r')
                end++;
            used += end < left ? end + 1 : left;
            s->discarding = end == left;
            continue;
        }
        size_t start = 0, len = 0, u = 0;
        int f = yard_irc_frame(p, left, &start, &len, &u);
        if (f == YARD_IRC_NEED) {
            used += u;
            break; /* wait for the rest of the line */
        }
        if (f != YARD_IRC_LINE) {
            numeric(fx, s, 417, ":Input line was too long");
            s->discarding = f == YARD_IRC_TOOLONG_OPEN;
            used += u;
            continue;
        }
        if (memchr(p + start, 0, len)) {
            numeric(fx, s, 421, "* :Line contains a NUL byte");
            used += u;
            continue;
        }
        if (s->state == ST_READY && rate > 0) {
            if (s->tokens < 1) {
                /* Flooding: stop reading this client until a token is due
                 * (a list of targets may have taken the bucket below 0). */
                yard_fx_wake_at(fx, fx->now_ns + (uint64_t)((1 - s->tokens) * 1e9 / rate));
                break;
            }
            s->tokens -= 1;
        }
        used += u;
        char line[LINE_MAX_MSG + LINE_MAX_TAGS + 2];
        memcpy(line, p + start, len);
        line[len] = 0;
        /* Nothing a terminal would act on reaches the log or another client:
         * ESC, other C0 controls than IRC's formatting codes and CTCP's
         * 0x01, DEL, C1. */
        len = yard_irc_strip_controls(line, len);
        yard_irc_msg_t m;
        if (yard_irc_parse(line, &m))
            command(app, s, fx, &m);
        else
            numeric(fx, s, 421, "* :Not a command");
    }
    /* At the end of input the engine drops what is left, unless a job
     * (a post) stopped the loop: then the rest comes after it. */
    return used;
}

static void chat_close(void *state, void *session)
{
    struct chat_app *app = state;
    struct session *s = session;
    if (s->slot >= 0) {
        /* The members who shared a channel with it hear that it left: a
         * quit when this was the account's last connection, else a part
         * for each channel none of its other connections is in. Not when
         * the server is stopping: everybody is leaving then, and nobody
         * is left to tell. */
        yard_chatlog_entry_t *ev = NULL;
        unsigned n = 0;
        const char *why = s->quit_reason[0] ? s->quit_reason : "Connection closed";
        chat_lock(app->cs);
        if (!yard_stopping()) {
            chat_state_t *cs = app->cs;
            uint64_t others[(CHAT_CHANNELS_LIMIT + 63) / 64] = {0};
            uint64_t left[(CHAT_CHANNELS_LIMIT + 63) / 64];
            bool online = chat_account_others(cs, s->account_key, s->slot, others);
            struct chat_member *me = chat_member_at(cs, s->slot);
            for (unsigned w = 0; w < cs->words; w++)
                left[w] = me->chans[w] & ~others[w];
            ev = events_per_channel(cs, left, online ? YARD_LOGREC_PART : YARD_LOGREC_QUIT,
                                    s->sender, why, &n);
        }
        chat_member_remove(app->cs, s->slot, yard_wall_ns() / (int64_t)YARD_NS_PER_S);
        chat_unlock(app->cs);
        if (n)
            presence_put(app, ev, n);
        free(ev);
    }
    free(s->rp.recs); /* a replay whose job_done did not run */
    free(s->hist.recs); /* a CHATHISTORY's, likewise */
    free(s->hist.at);
    free(s->hist.chans);
    free(s->hist.targets);
    chat_guard_leave(app->guard, s->enter_ticket);
    /* A job is never running here (the engine waits for it), but its
     * job_done may not have run: its check is over either way. close has
     * no clock of the engine's; the check's start is a time no later than
     * now, which is all the limits need (their time never runs backwards). */
    if (s->job)
        end_check(app, s, s->job->ok, s->check_at);
    free(s->job);
    explicit_bzero(s->pass, sizeof s->pass);
    forget_wait(s);
}

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
    struct chat_app *app = yard_shm_alloc(shm, sizeof *app);
    if (!app) {
        snprintf(err, errlen, "shared region too small");
        return -1;
    }
    app->set = set;
    app->cs = yard_shm_alloc(shm, sizeof *app->cs);
    app->bus = yard_bus_create(shm, 1);
    unsigned members = cfg->max_conns > 0 && cfg->max_conns < 100000 ? (unsigned)cfg->max_conns : 16384;
    char warn[800];
    if (!app->cs || !app->bus ||
        chat_state_init(app->cs, shm, set->data_dir, set->max_channels, members, err, errlen,
                        warn, sizeof warn) < 0) {
        if (!err[0])
            snprintf(err, errlen, "shared region too small");
        return -1;
    }
    if (warn[0])
        yard_log_warn("chat: %s", warn);
    chat_guard_opts_t go = CHAT_GUARD_DEFAULT_OPTS;
    go.max_pending = set->login_max_pending;
    go.pending_per_addr = set->login_pending_per_addr;
    go.max_unregistered = set->max_unregistered;
    go.unregistered_per_addr = set->unregistered_per_addr;
    go.addr_failures = (chat_rate_t){set->login_fail_addr.burst, set->login_fail_addr.per_s};
    go.account_failures = (chat_rate_t){set->login_fail_account.burst,
                                        set->login_fail_account.per_s};
    /* No connection stays unregistered past its timeout; a slot older than
     * that (its process was killed) is free again. */
    go.unregistered_ttl_ns = set->register_timeout_ns + 10 * YARD_NS_PER_S;
    app->guard = chat_guard_create(shm, &go, err, errlen);
    if (!app->guard)
        return -1;
    yard_chatlog_opts_t lo = {0};
    yard_chatlog_opts_default(&lo);
    lo.fsync = set->fsync_mode;
    lo.fsync_interval_ns = set->fsync_interval_ns;
    lo.retain_s = set->retain_s;
    yard_chatlog_recovery_t rec = {0};
    if (yard_chatlog_open(set->data_dir, &lo, &app->log, &rec, err, errlen) < 0)
        return -1;
    if (rec.dropped_bytes)
        yard_log_warn("chat: %s", rec.message);
    yard_bus_publish(app->bus, 0, yard_chatlog_last_id(app->log));
    struct crypt_data *cd = calloc(1, sizeof *cd);
    bool ok = cd && yard_bcrypt_hash("not a password", 4, cd, app->dummy_template);
    free(cd);
    if (!ok) {
        snprintf(err, errlen, "bcrypt is not available");
        return -1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/motd", set->data_dir);
    yard_read_text_file(path, app->motd, sizeof app->motd);
    if (yard_chatlog_writer_start(app->log, presence_published, app, err, errlen) < 0)
        return -1;
    *state = app;
    return 0;
}

static void chat_fini(void *state)
{
    struct chat_app *app = state;
    yard_chatlog_sync(app->log);
    yard_chatlog_close(app->log);
    chat_state_fini(app->cs);
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

#define CHAT_FIELD(member) YARD_OPT_FIELD(struct chat_settings, member)

static const yard_opt_t chat_opts[] = {
    {.name = "data", .form = "DIR", .type = YARD_OPT_STRING, CHAT_FIELD(data_dir),
     .help = "the data directory: accounts (yard-chat account), the message log, read positions",
     .required = "accounts, the message log, read positions"},
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
    {.name = "flood-rate", .form = "N", .type = YARD_OPT_INT, CHAT_FIELD(flood_rate), .min = 0,
     .max = 1000000, .def = "100",
     .help = "lines per second one client may send, sustained (a list of targets counts each); "
             "a faster client is not read until it is due; 0: no limit (benchmarks of the log)"},
    {.name = "flood-burst", .form = "N", .type = YARD_OPT_INT, CHAT_FIELD(flood_burst), .min = 1,
     .max = 1000000, .def = "200",
     .help = "lines one client may send at once before --flood-rate applies"},
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
    {.name = "guests", .type = YARD_OPT_SWITCH, CHAT_FIELD(guests),
     .help = "a public server: a client that registers with NICK and USER and no credentials is "
             "a guest (accounts' names stay theirs); off: logging in is required"},
    {.name = "guests-may-create-channels", .form = "on|off", .type = YARD_OPT_ENUM,
     CHAT_FIELD(guests_create), .choices = chat_onoff, .def = "on",
     .help = "with --guests: whether a guest's JOIN may create a channel"},
    {.name = "guests-per-addr", .form = "N", .type = YARD_OPT_INT, CHAT_FIELD(guests_per_addr),
     .min = 1, .max = 65536, .def = "16",
     .help = "with --guests: guests connected from one address (an IPv4 address or an IPv6 /64)"},
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
