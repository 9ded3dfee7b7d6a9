/* The chat's store: everything the chat keeps in files, behind one API, in
 * one library (yard_chat_store, src/chat/) that the chat app and yard-chat
 * both link and the engine's core does not.
 *
 *   DIR/log/         the message log (yard/chatlog.h)
 *   DIR/accounts     accounts, DIR/certfps their client certificates, and
 *                    DIR/opers the server operators (yard/chat_accounts.h)
 *   DIR/positions, DIR/topics, DIR/channels, DIR/bans
 *                    the chat's tables of fixed slots, mapped shared from
 *                    their files (yard_table_file_t): what a crash of any
 *                    process leaves is what the kernel has
 *   DIR/motd         the message of the day, read once at open
 *
 * How the chat app uses it. init opens it (yard_chat_store_open: the log,
 * the tables, the log's writer thread) and fini closes it; nothing else of
 * the app touches a file or starts a thread. Work that needs a file is a
 * request: the app fills one of the request structs below and hands
 * yard_chat_store_run with it to the engine (yard_fx_io; yard_fx_offload
 * for a password check, which is CPU-bound), which runs it where the model
 * runs blocking work (inline in the blocking models, on the I/O lane in
 * the others); at job_done the answer is in the struct. What needs no I/O
 * the app calls directly: the log's tail in shared memory and its
 * deferred records (yard_chatlog_read_tail, _take, _cursor_end, _defer,
 * _last_id), and the tables' memory. tests/unit/check_symbols.py holds the
 * app to exactly that list.
 *
 * yard-chat (tools/chat), a command line at the configuration edge, calls
 * the log's and the accounts' functions directly. */
#ifndef YARD_CHAT_STORE_H
#define YARD_CHAT_STORE_H

#include <crypt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "yard/bcrypt.h"
#include "yard/chat_accounts.h"
#include "yard/chat_klines.h"
#include "yard/chatlog.h"
#include "yard/proto_ircline.h"

#define YARD_CHAT_NAME_MAX YARD_ACCOUNT_NAME_MAX /* an account, a nick */
#define YARD_CHAT_CHAN_MAX 50                    /* a channel's name, with its '#' */
#define YARD_CHAT_TARGETS_MAX 4                  /* targets of one PRIVMSG or NOTICE */
/* A message's client-only tags kept (message-tags): a client's tag data
 * at most, and the bot tag (";bot") the chat adds. */
#define YARD_CHAT_TAGS_MAX (YARD_IRC_CLIENT_TAGS_MAX + 4)
#define YARD_CHAT_READ_BYTES 8192u /* bytes of the log read at a time */
_Static_assert(YARD_CHAT_READ_BYTES >= YARD_LOGREC_MAX, "a read holds the longest record");
_Static_assert(YARD_CHAT_TAGS_MAX + 1 + YARD_IRC_MSG_MAX <= YARD_LOGREC_TEXT_MAX,
               "a record holds a message with its client-only tags");
#define YARD_CHAT_HISTORY_MAX 1000 /* messages one CHATHISTORY returns at most */
/* One job of a CHATHISTORY reads at most this many log records, or looks
 * at this many index entries, and the next piece goes on from there (a new
 * job, queued behind the others' on the scan lane): no request holds the
 * lane for longer than a piece (a few milliseconds). */
#define YARD_CHAT_HISTORY_PIECE 4096
#define YARD_CHAT_HISTORY_PIECE_ENTRIES 65536
#define YARD_CHAT_TABLES_MAX 4

typedef struct yard_chat_store yard_chat_store_t;

/* A table of fixed slots in a file of DIR (yard_table_file_t). */
typedef struct yard_chat_table {
    const char *name;  /* the file, in DIR */
    const char *magic; /* up to 8 bytes, the file's format */
    size_t slot_size, nslots;
    const char *afresh; /* NULL, or what it means when the file starts afresh */
    void *slots;    /* out: the shared mapping */
    bool restarted; /* out: the file was of another format or size: it starts afresh */
} yard_chat_table_t;

typedef struct yard_chat_store_opts {
    yard_chatlog_opts_t log;
    yard_chat_table_t *tables; /* opened, and their mappings filled in */
    unsigned ntables;          /* at most YARD_CHAT_TABLES_MAX */
    /* Called by the log's writer thread when deferred records are in the
     * log (the last one's id). */
    void (*appended)(void *arg, uint64_t last_id);
    void *appended_arg;
    /* The chat's --server-password-required: open fails unless
     * DIR/server-password holds a hash (yard-chat server-password set). */
    bool server_password;
} yard_chat_store_opts_t;

/* Open DIR's store, before any fork: 0, or -errno with err naming the file.
 * What open repaired (a torn log tail) is in warn ("" when nothing). */
int yard_chat_store_open(const char *dir, yard_chat_store_opts_t *o, yard_chat_store_t **out,
                         char *warn, size_t warnlen, char *err, size_t errlen);
/* Sync and close everything; the tables' mappings end. */
void yard_chat_store_close(yard_chat_store_t *st);
/* The log, for the functions that need no I/O (the header's list). */
yard_chatlog_t *yard_chat_store_log(yard_chat_store_t *st);
const char *yard_chat_store_motd(const yard_chat_store_t *st);
/* DIR/klines.gen's number now (yard/chat_klines.h), read from its mapping
 * without I/O: when it has moved since a K-line request read it (gen
 * below), the K-lines changed. */
uint64_t yard_chat_store_klines_gen(const yard_chat_store_t *st);

/* A record's sender as the chat writes it: an account's name ("alice"),
 * an account's name and the nick its connection had when the two differ
 * ("alice/al": SASL keeps the nick a client registered with), or a guest's
 * nick after a '~' ("~zed"). Neither character is allowed in a name. */
#define YARD_CHAT_NICK_SEP '/'
typedef struct yard_chat_from {
    const char *nick; /* the name to show, into the record */
    size_t nick_len;
    bool guest;
} yard_chat_from_t;

/* r's sender cut to who sent it (the account, or the guest's nick), and
 * the name to show it by. */
static inline yard_chat_from_t yard_chat_from(yard_chatlog_rec_t *r)
{
    yard_chat_from_t f = {r->sender, r->sender_len, false};
    if (r->sender_len >= 2 && r->sender[0] == '~') {
        r->sender++;
        r->sender_len--;
        f.nick = r->sender;
        f.nick_len = r->sender_len;
        f.guest = true;
        return f;
    }
    const char *sep = memchr(r->sender, YARD_CHAT_NICK_SEP, r->sender_len);
    if (sep && sep > r->sender && (size_t)(sep - r->sender) + 1 < r->sender_len) {
        f.nick = sep + 1;
        f.nick_len = r->sender_len - (size_t)(sep - r->sender) - 1;
        r->sender_len = (size_t)(sep - r->sender);
    }
    return f;
}

/* yard_chat_from, for who sent it only: true for a guest. */
static inline bool yard_chat_unguest(yard_chatlog_rec_t *r)
{
    return yard_chat_from(r).guest;
}

/* The requests. Each starts with its op (what job_done dispatches on) and
 * the store; the rest is the question, then the answer ("out"). */
enum yard_chat_op {
    YARD_CHAT_AUTH = 1, /* struct yard_chat_auth: a password (or certificate) check, CPU */
    YARD_CHAT_NICK,     /* struct yard_chat_nick: is a nick an account's? */
    YARD_CHAT_POST,     /* struct yard_chat_post: a PRIVMSG, NOTICE, TAGMSG or TOPIC appended */
    YARD_CHAT_READ,     /* struct yard_chat_read: the log read past its tail */
    YARD_CHAT_REPLAY,   /* struct yard_chat_replay: a JOIN's replay */
    YARD_CHAT_HISTORY,  /* struct yard_chat_history: a CHATHISTORY lookup */
    YARD_CHAT_KLINE,    /* struct yard_chat_kline: DIR/klines read or changed */
};

/* Run the request that req points to (its op says which). The engine's
 * job function: yard_fx_io(fx, yard_chat_store_run, req). */
void yard_chat_store_run(void *req);

/* A login: the account's password checked with bcrypt, or, with certfp,
 * the account that lists the certificate (SASL EXTERNAL; account, if
 * given, must be that one); with oper, a server operator's password
 * (DIR/opers) instead of an account's; with server, the server's
 * (DIR/server-password). An unknown account costs as much as the
 * dearest known one, so timing does not tell which exist. The password is
 * wiped once checked. */
struct yard_chat_auth {
    enum yard_chat_op op;
    yard_chat_store_t *store;
    char account[YARD_CHAT_NAME_MAX + 1];
    char password[YARD_ACCOUNT_PASSWORD_MAX + 1];
    char certfp[YARD_CERTFP_LEN + 1];
    bool sasl; /* the asker's: which answer a failure gets */
    bool oper; /* OPER: account names a server operator (DIR/opers), not an account */
    bool server; /* the server's password (DIR/server-password); account is the nick */
    /* out: */
    bool ok;
    bool known; /* the account (or operator) exists: OPER tells 464 from 491 */
    char canon[YARD_CHAT_NAME_MAX + 1]; /* the account as spelt in the file */
    struct crypt_data cd;
};

/* Is an account named nick? */
struct yard_chat_nick {
    enum yard_chat_op op;
    yard_chat_store_t *store;
    char nick[YARD_CHAT_NAME_MAX + 1];
    bool reserved; /* out: an account has that name (or the file could not be read) */
};

/* One PRIVMSG, NOTICE, TAGMSG or TOPIC: the private targets' accounts
 * looked up (their spelling replaces the name given), then one append per
 * target; with --fsync always the tables are synced too. */
enum { YARD_CHAT_NO_SUCH_NICK = 1 };
struct yard_chat_post {
    enum yard_chat_op op;
    yard_chat_store_t *store;
    const char *sender;
    int type, n;
    char text[YARD_IRC_MSG_MAX + 1];
    char tags[YARD_CHAT_TAGS_MAX + 1]; /* client-only tags, stored before a NUL in the text */
    size_t tags_len;
    struct {
        char name[YARD_CHAT_CHAN_MAX + 2]; /* the channel as shown (with a STATUSMSG prefix:
                                            * "@#chan"), or the nick given */
        bool person;                       /* the account is looked up first */
        size_t text_len;                   /* what fits the relayed line */
        int rc;                            /* out: 0, YARD_CHAT_NO_SUCH_NICK or -errno */
        uint64_t id;                       /* out */
    } t[YARD_CHAT_TARGETS_MAX];
};

/* Bytes of the log at cur, read from the files (the reader fell behind the
 * tail). The buffer also takes the app's reads of the tail. */
struct yard_chat_read {
    enum yard_chat_op op;
    yard_chat_store_t *store;
    yard_chatlog_cursor_t cur;
    long n; /* out: bytes in buf, or -errno */
    uint8_t buf[YARD_CHAT_READ_BYTES];
};

/* A JOIN's replay: the channel's messages in (from, upto], the newest max. */
struct yard_chat_replay {
    enum yard_chat_op op;
    yard_chat_store_t *store;
    char name[YARD_CHAT_CHAN_MAX + 1], key[YARD_CHAT_CHAN_MAX + 1]; /* key: casefolded */
    uint64_t from, upto;
    unsigned max;
    /* out: */
    uint8_t *recs; /* the records, encoded, back to back (the asker frees it) */
    size_t recs_len;
    uint64_t total, shown;
    int rc; /* 0, or -errno when (part of) the history could not be read */
};

/* CHATHISTORY: a lookup through the log's index. */
enum { YARD_CHAT_HIST_LATEST, YARD_CHAT_HIST_BEFORE, YARD_CHAT_HIST_AFTER,
       YARD_CHAT_HIST_AROUND, YARD_CHAT_HIST_BETWEEN, YARD_CHAT_HIST_TARGETS };
struct yard_chat_hist_ref {
    bool any;     /* "*" */
    bool by_time; /* timestamp=, else msgid= */
    uint64_t id;
    int64_t ts_ns;
};
struct yard_chat_history {
    enum yard_chat_op op;
    yard_chat_store_t *store;
    int sub;                          /* YARD_CHAT_HIST_* */
    bool channel;                     /* else a private conversation with key */
    char name[YARD_CHAT_CHAN_MAX + 1]; /* the target as given */
    char key[YARD_CHAT_CHAN_MAX + 1];  /* casefolded */
    char me[YARD_CHAT_NAME_MAX + 1];   /* the asking account, casefolded */
    struct yard_chat_hist_ref a, b;
    unsigned limit;
    /* draft/event-playback: a channel's TOPIC, JOIN, PART, QUIT, KICK and
     * MODE records and TAGMSGs are history too, counted as messages are */
    bool events;
    /* TARGETS: the channels the asker is in (keys; the asker's memory) */
    char (*chans)[YARD_CHAT_CHAN_MAX + 1];
    unsigned nchans;
    /* out: the records, encoded, and where each starts (in id order); the
     * asker frees recs, at and targets */
    uint8_t *recs;
    size_t recs_len, recs_cap;
    size_t *at;
    unsigned n;
    /* TARGETS: each conversation once, with its latest message's time,
     * newest first (the oldest limit of those whose latest is in the window) */
    struct yard_chat_hist_target {
        char name[YARD_CHAT_CHAN_MAX + 1], key[YARD_CHAT_CHAN_MAX + 1];
        int64_t latest_ns;
        bool listed; /* its latest message is in the window (the walk's) */
    } *targets;
    unsigned ntargets, targets_cap;
    int64_t window_end_ns; /* TARGETS: a latest message at or past this is not listed */
    unsigned long read; /* log records this piece read (flood control's price) */
    bool more; /* out: the answer is not whole yet; run the job again for the next piece */
    int rc;
    /* the walks (the store's): at most two (AROUND's), each read in pieces
     * of YARD_CHAT_HISTORY_PIECE records or YARD_CHAT_HISTORY_PIECE_ENTRIES
     * index entries, each piece going on where the last one stopped */
    struct yard_chat_hist_walk {
        uint64_t from, stop_id; /* from: where the next piece starts (0: done, going down) */
        int dir;
        unsigned want; /* 0: what the limit leaves when the walk starts */
    } walks[2];
    unsigned nwalks, walk, walk_first; /* walk_first: its first record in at[] */
    uint64_t entries_left;             /* index entries this piece may still look at */
    bool started, piece_full;
    bool down;
    uint64_t low_id, stop_id;
    unsigned want;
};

/* The K-lines (yard/chat_klines.h): load them all, or add k, or remove
 * the one with k.mask and then load them all; the asker frees list. gen is
 * DIR/klines.gen's number read before the list was (the list is at least
 * as new as it). */
enum { YARD_CHAT_KLINE_LOAD, YARD_CHAT_KLINE_ADD, YARD_CHAT_KLINE_DEL };
struct yard_chat_kline {
    enum yard_chat_op op;
    yard_chat_store_t *store;
    int sub; /* YARD_CHAT_KLINE_* */
    yard_kline_t k;
    /* out: */
    int rc; /* 0, or -errno (-ENOENT: DEL of a mask without a K-line) */
    yard_kline_t *list;
    size_t n;
    bool listed; /* list is the file's (false: it could not be read) */
    uint64_t gen;
};

#endif
