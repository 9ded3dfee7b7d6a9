/* The chat app's common ground, shared by its modules (apps/chat/): the
 * limits of the protocol as it is spoken here, the app's flags (struct
 * chat_settings, filled from init.c's table), what every process shares
 * (struct chat_app: the shared tables, the news bus, the log, the login
 * limits), the IRCv3 capabilities and the registration states. A
 * connection's own state is session.h's; each module's header says what
 * that module owns.
 *
 * The chat: a self-hosted chat service speaking an IRC subset, so that
 * irssi, WeeChat and ii can use it (docs/chat.md lists what is supported).
 * Every message is appended to a durable log (src/chat/chatlog*.c) and the
 * log's last id is published on a news bus; every connection watches the
 * bus and, when there is news, reads the log from where it was and relays
 * what is for it: messages to channels it is in, and to its account. One
 * order for everyone (the log's), nothing lost while offline (a durable
 * read position per account and channel, replayed on JOIN), and the sender
 * of every message is the account that logged in, never what the client
 * claims.
 *
 * No callback touches a file: everything kept in files is the store's
 * (yard/chat_store.h). Appends (with their account lookups and syncs),
 * replays on JOIN, CHATHISTORY and reads of a log a connection has fallen
 * behind are the store's requests, which the engine runs (yard_fx_io)
 * inline in the blocking models and on its I/O thread in the others. A
 * connection that keeps up reads new records from the log's tail in shared
 * memory. The wall clock comes in the effects context (fx->wall_ns). */
#ifndef YARD_CHAT_CHAT_H
#define YARD_CHAT_CHAT_H

#include <stdbool.h>
#include <stdint.h>

#include "guard.h"
#include "state.h"
#include "yard/app.h"
#include "yard/bcrypt.h"
#include "yard/chat_store.h"
#include "yard/proto_ircline.h"

#define SERVER "yard"
#define LINE_MAX_MSG YARD_IRC_MSG_MAX
#define LINE_MAX_TAGS YARD_IRC_TAGS_MAX
#define TARGMAX YARD_CHAT_TARGETS_MAX /* targets of one PRIVMSG or NOTICE */
#define MODES_MAX 4 /* channel mode changes with a parameter in one MODE */
#define CLIENT_TAGS_MAX YARD_CHAT_TAGS_MAX /* a message's client-only tags kept and relayed */
#define CHAT_SERVER_NAME_MAX 63 /* --server-name */
#define KICK_REASON_MAX 200 /* what of a KICK's reason is kept (a deferred record's text) */


/* Filled from the flags (chat_opts, at the bottom). */
struct chat_settings {
    const char *data_dir;         /* accounts, the message log, read positions */
    const char *server_name;      /* --server-name (NULL: the host name) */
    int fsync_mode;               /* YARD_CHATLOG_FSYNC_* */
    uint64_t fsync_interval_ns;
    unsigned replay_max;          /* messages replayed on JOIN at most */
    uint64_t retain_s;            /* prune log segments older than this; 0: keep */
    uint64_t register_timeout_ns;
    uint64_t login_fail_delay_ns; /* a failed login's answer waits this per failure so far */
    uint64_t ping_interval_ns;    /* PING a client silent this long (0: never) */
    uint64_t ping_timeout_ns;     /* ... and close it if it stays silent this much longer */
    unsigned max_channels;        /* channels the server can hold */
    unsigned channels_per_account; /* CHANLIMIT: channels one account may be in */
    unsigned flood_rate;          /* lines per second a client may send, sustained (0: any) */
    unsigned flood_burst;         /* ... and at once */
    bool guests;                  /* NICK + USER without credentials: a guest */
    bool server_password;         /* PASS is DIR/server-password, required; accounts: SASL */
    int guests_create;            /* guests may create channels (1) or not (0) */
    unsigned guests_channel_share; /* percent of max_channels guests' channels may take */
    unsigned guests_per_addr;     /* guests connected from one address at most */
    int plaintext_login;          /* a password over a plain connection beside a TLS
                                   * listener: taken (1) or refused (0) */
    uint64_t sts_duration_ns;     /* IRCv3 sts: advertised for this long (0: not at all) */
    /* Output waiting for a client (yard_fx_out_bounds): past hold its input
     * waits, past max it is closed; an account's, and a guest's or a
     * connection's not logged in yet. max 0: the engine's --max-sendq. */
    size_t sendq_hold, sendq_max;
    size_t guests_sendq_hold, guests_sendq_max;
    /* Login limits (guard.h). */
    unsigned login_max_pending;      /* password checks in flight, server-wide */
    unsigned login_pending_per_addr; /* ... from one source address */
    unsigned max_unregistered;       /* connections not logged in yet, in total */
    unsigned unregistered_per_addr;  /* ... from one source address */
    unsigned unregistered_guest_share; /* percent of them without credentials */
    yard_rate_t login_fail_addr;     /* failed logins per address */
    yard_rate_t login_fail_account;  /* ... per account */
};

struct chat_app {
    const struct chat_settings *set;
    chat_state_t *cs;
    yard_bus_t *bus;
    yard_chat_store_t *store; /* everything kept in files (yard/chat_store.h) */
    yard_chatlog_t *log;      /* the store's log, for its tail in shared memory */
    chat_guard_t *guard;
    struct chat_klines *klines; /* the K-lines in force, copied (kline.c) */
    /* The server's name in 002, 004, PONG, TIME, VERSION, WHO, WHOIS and
     * WHOWAS (--server-name, or the host name). */
    char server_name[CHAT_SERVER_NAME_MAX + 1];
    /* The bounds on waiting output (chat_sendq_bounds), from the flags:
     * an account's hold is at most half the engine's --max-sendq when
     * --sendq-max leaves the close to it. */
    size_t hold, max, guests_hold, guests_max;
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
    CAP_USERHOST_IN_NAMES = 1u << 11, /* NAMES lists nick!user@host */
    CAP_LABELED = 1u << 12,      /* labeled-response: a request's label on its answer (label.c) */
    CAP_SETNAME = 1u << 13,      /* SETNAME of oneself and of the members one shares a channel with */
    /* extended-monitor: the AWAY (with away-notify) and SETNAME (with
     * setname) of the nicks one monitors, sharing a channel or not */
    CAP_EXTENDED_MONITOR = 1u << 14,
    /* cap-notify: CAP NEW and DEL would come with it; the chat's
     * capabilities never change while it runs, so none ever does */
    CAP_CAP_NOTIFY = 1u << 15,
    /* account-notify: ACCOUNT when a member one shares a channel with (or
     * monitors, with extended-monitor) logs in */
    CAP_ACCOUNT_NOTIFY = 1u << 16,
    /* draft/event-playback: CHATHISTORY gives a channel's JOIN, PART, QUIT,
     * KICK, MODE and TOPIC, and TAGMSGs, besides messages */
    CAP_EVENT_PLAYBACK = 1u << 17,
};

/* ST_WAIT: credentials are in, waiting for the address's turn to check. */
enum { ST_NEW, ST_WAIT, ST_AUTH, ST_READY };

#endif
