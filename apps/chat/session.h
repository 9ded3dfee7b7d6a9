/* A connection of the chat (session.c): its state (struct session), the
 * app's callbacks that the engine calls for it (open, data, timer, job_done,
 * close; news is relay.h's), the line splitting and flood control of its
 * input, and the helpers every module answers it with (sendf, numeric). */
#ifndef YARD_CHAT_SESSION_H
#define YARD_CHAT_SESSION_H

#include "chat.h"


#define OWN_RING 1024

/* The registration's progress (register.c): what the client has sent of
 * CAP, PASS, NICK, USER and SASL so far. */
struct session_reg {
    bool cap_active;   /* CAP LS/REQ seen: registration waits for CAP END */
    bool sasl_plain;   /* AUTHENTICATE PLAIN accepted, payload expected */
    bool sasl_external; /* AUTHENTICATE EXTERNAL accepted, the authzid expected */
    bool sasl_done;
    bool got_nick, got_user, have_pass;
    /* --server-password-required: PASS was the server's password, or none
     * was given (the delayed 464 says which) */
    bool server_pass_ok, server_pass_missing;
    bool client_from_sasl;
    /* Logged in with another nick than the account's name: whether that
     * nick was checked (a nick job) and found to be another account's. */
    bool nick_checked, nick_reserved;
    bool kline_checked;      /* no K-line applies (kline.c) */
    char nick[CHAT_NAME_MAX + 1];
    char pass[YARD_ACCOUNT_PASSWORD_MAX + 1];
    char sasl_buf[1024];
    size_t sasl_len;
    uint64_t register_by;    /* the registration timeout */
};

/* A login within the login limits (guard.h): this connection's tickets,
 * the password check in flight, one waiting for its turn, and a failed
 * one's delayed answer. */
struct session_login {
    chat_addr_t addr;        /* the source address the login limits count */
    uint64_t enter_ticket;   /* counted as not logged in yet */
    uint64_t check_ticket;   /* a password check in flight */
    uint64_t check_at;       /* when it began (fx->now_ns) */
    char check_key[CHAT_NAME_MAX + 1]; /* its account, casefolded */
    struct yard_chat_auth *job;    /* the check's job */
    /* ST_WAIT: the login to check once the address has its turn. */
    char wait_account[CHAT_NAME_MAX + 1];
    char wait_password[YARD_ACCOUNT_PASSWORD_MAX + 1];
    bool wait_sasl;
    bool wait_server;        /* the waiting check is of the server's password */
    unsigned failures;
    uint64_t fail_until; /* a failed login's answer waits until then */
    int pending_fail;    /* 0, or 904 / 464: the answer to give at fail_until */
    bool fail_oper;      /* that answer is OPER's (464 or 491), and the connection stays */
};

/* Where relaying is (relay.c). */
struct session_relay {
    yard_chatlog_cursor_t cur; /* where relaying goes on (past seen) */
    uint64_t seen;       /* last log id relayed (or skipped) */
    bool posting;        /* a post job is in flight: news waits for its ids */
    uint64_t own[OWN_RING]; /* ids this connection appended, oldest first */
    unsigned own_head, own_len;
    /* The quit or away records relayed last: one departure's (or away
     * change's) records, one per channel, are consecutive, and a member who
     * shares several of those channels is told once. */
    uint64_t group_id;
    int group_type;
    uint64_t group_text; /* a hash of its text */
    char group_key[CHAT_NAME_MAX + 1];
    bool group_told;
};

/* Input and liveness (session.c): flood control, overlong lines, PINGs. */
struct session_input {
    bool discarding;     /* inside an overlong line */
    size_t hold;         /* output past which no line is taken (chat_sendq_bounds) */
    double tokens;       /* the flood bucket */
    uint64_t tokens_at;
    uint64_t heard_ns;   /* when the client last sent anything */
    uint64_t pinged_ns;  /* when the server PINGed it, unanswered (0: none) */
    bool hist_paused;    /* a CHATHISTORY waits for tokens before its next piece (the
                          * timer goes on with it; no line is taken meanwhile) */
};

/* A labeled request being answered (label.c, IRCv3 labeled-response):
 * its label, and where its answer is. An answer may span callbacks (a
 * job's done, the relay of the request's own log records), so what was
 * sent of it, whether it opened a batch, and which log records of this
 * connection's are still part of it are kept here. */
#define CHAT_LABEL_MAX 64
#define CHAT_LABEL_NO_REGION ((size_t)-1)
struct session_label {
    char tag[CHAT_LABEL_MAX + 1]; /* the label ("": no labeled request in progress) */
    char batch[24];      /* the labeled-response batch opened for it ("": none) */
    size_t at;           /* where its unsettled output starts in this callback's fx->out
                          * (CHAT_LABEL_NO_REGION outside a command's or job's callback) */
    unsigned records;    /* its own log records still to relay (a post's echoes) */
    uint64_t first_id;   /* ... the ids of those records: first_id to last_id */
    uint64_t last_id;
    unsigned echoed;     /* lines relayed of them so far */
};

/* MONITOR's list (monitor.c): casefolded nicks. */
#define CHAT_MONITOR_MAX 100
struct chat_monitor {
    unsigned n;
    char key[CHAT_MONITOR_MAX][CHAT_NAME_MAX + 1];
};

/* A guest's read markers (history.c): held for the connection's life, the
 * oldest set forgotten when they are all taken. */
#define CHAT_GUEST_MARKERS 16
struct guest_marker {
    char key[CHAT_CHAN_MAX + 1]; /* the target casefolded ("": unused) */
    int64_t ts_ns;
};

struct session {
    int state;               /* ST_* */
    unsigned caps;           /* CAP_* negotiated */
    uint64_t batches;        /* batch references handed out */
    bool umode_i, umode_w;   /* user modes: kept and shown, nothing more */
    bool umode_o;            /* a server operator (OPER, oper.c) */
    bool umode_B;            /* a bot: its messages carry the bot tag */
    char account[CHAT_NAME_MAX + 1]; /* who it is: the account (a guest's: its nick) */
    char account_key[CHAT_NAME_MAX + 1];
    /* The nick it is shown by: the account's name, or the nick it registered
     * with when SASL logged it in (chat_set_names); a guest's nick. */
    char nick[CHAT_NAME_MAX + 1];
    char client[CHAT_CLIENT_MAX + 1]; /* the device: "alice@phone", or USER's name */
    char realname[CHAT_REALNAME_MAX + 1]; /* USER's, shown by extended-join */
    char user[CHAT_USER_MAX + 1];         /* USER's user name (WHOIS, WHO) */
    bool guest;              /* --guests: a nick, no account (s->account holds the nick) */
    struct guest_marker markers[CHAT_GUEST_MARKERS];
    unsigned marker_next;    /* the slot the next new guest marker takes */
    bool tls;                /* the connection is encrypted */
    char certfp[65];         /* its client certificate's SHA-256 ("" when none) */
    char sender[2 * CHAT_NAME_MAX + 2]; /* as the log names it (yard_chat_from): the
                                         * account, "account/nick", or "~nick" */
    int slot;                /* the member slot (state.h), or -1 */
    char quit_reason[600]; /* what the others are told when it goes ("": the default) */
    struct session_reg reg;
    struct session_login login;
    struct session_relay relay;
    struct session_input in;
    struct session_label label;
    /* The store's requests (yard/chat_store.h), one of each kind in flight at most. */
    bool nick_checking;      /* a nick job is in flight */
    struct yard_chat_nick nj;
    struct yard_chat_post post;
    struct yard_chat_read rd;
    struct yard_chat_replay rp;
    struct yard_chat_history hist;
    struct yard_chat_kline *kline; /* a K-line request in flight (kline.c) */
    bool kline_recheck;            /* ... checking a guest that logged in */
    struct chat_monitor monitor;   /* MONITOR's list (monitor.c), in the session itself:
                                    * fork --pair's SEND process reads it too */
    char join_rest[LINE_MAX_MSG + 1]; /* JOIN's channels still to join after a replay */
    char join_keys[LINE_MAX_MSG + 1]; /* ... and their keys */
};

/* A command's handler (commands.c's table): m has at least the row's
 * minimum of parameters, and its strings may be cut in place. */
typedef void chat_cmd_fn(struct chat_app *app, struct session *s, yard_fx_t *fx,
                         yard_irc_msg_t *m);

void chat_sendf(yard_fx_t *fx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A numeric reply to this connection: ":yard NNN <who> ...". */
void chat_numeric(yard_fx_t *fx, const struct session *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

const char *chat_who(const struct session *s);
void chat_format_time(char *out, size_t cap, int64_t ns);
bool chat_valid_channel(const char *c);
size_t chat_utf8_cut(const char *text, size_t len, size_t max);
void chat_charge(struct session *s, int targets);
/* The flood bucket refilled for the time since it was last (tokens). */
void chat_refill(struct chat_app *app, struct session *s, uint64_t now_ns);
/* The prices of flood control (docs/chat.md, "What a request costs"), in
 * tokens: lines of an answer (LIST, WHO, NAMES, CHATHISTORY) per token,
 * and log records a CHATHISTORY read per token. */
#define CHAT_LINES_PER_TOKEN 10
#define CHAT_READS_PER_TOKEN 1000
/* Tokens for an answer of this many lines (at least one). */
static inline int chat_lines_price(unsigned long lines)
{
    unsigned long t = (lines + CHAT_LINES_PER_TOKEN - 1) / CHAT_LINES_PER_TOKEN;
    return t < 1 ? 1 : t > 1000000 ? 1000000 : (int)t;
}
/* The bounds on output waiting for this connection (yard_fx_out_bounds):
 * an account's, or the lower ones of a guest and of a connection not
 * logged in yet. */
void chat_sendq_bounds(struct chat_app *app, struct session *s, yard_fx_t *fx);
/* A connection not logged in yet whose place a newcomer took (guard.h):
 * told so and closed (true). */
bool chat_shed(struct chat_app *app, struct session *s, yard_fx_t *fx);
void chat_job_done(void *state, void *session, void *arg, yard_fx_t *fx);
void chat_open(void *state, void *session, yard_fx_t *fx);
void chat_timer(void *state, void *session, yard_fx_t *fx);
size_t chat_data(void *state, void *session, const uint8_t *in, size_t n, yard_fx_t *fx);
void chat_close(void *state, void *session, const yard_fx_t *fx);

#endif
