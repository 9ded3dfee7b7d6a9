/* The chat's jobs: the work that runs away from the connection's callbacks
 * (the engine runs it, with no session and no fx), each on its own memory.
 * The I/O jobs (yard_fx_io) are the only code of the app that touches a
 * file, through the core's log and account functions: a post's account
 * lookups and appends, a read of the log by a connection that fell behind
 * its tail, a JOIN's replay, a CHATHISTORY lookup, a guest's nick checked
 * against the accounts. The password check is a CPU job (yard_fx_offload).
 * Each job's *_done, in the module that started it, carries on with the
 * result (session.c's chat_job_done calls it). */
#ifndef YARD_CHAT_JOBS_H
#define YARD_CHAT_JOBS_H

#include "chat.h"

#define LOG_READ 8192u /* bytes of the log read at a time (the tail or the files) */

/* Which job a job_done is for: every job struct starts with its kind,
 * set when the job is started, and chat_job_done dispatches on it. */
enum chat_job_kind {
    CHAT_JOB_AUTH = 1, /* struct auth_job: a password check (CPU) */
    CHAT_JOB_NICK,     /* struct nick_job: is a guest's nick an account's? */
    CHAT_JOB_POST,     /* struct post_job: a PRIVMSG, NOTICE, TAGMSG or TOPIC appended */
    CHAT_JOB_READ,     /* struct read_job: the log read by a connection behind its tail */
    CHAT_JOB_REPLAY,   /* struct replay_job: a JOIN's replay */
    CHAT_JOB_HISTORY,  /* struct hist_job: a CHATHISTORY lookup */
};

struct auth_job {
    enum chat_job_kind kind; /* first: what job_done reads */
    const char *dir;
    char dummy_template[YARD_BCRYPT_LEN + 1];
    char account[CHAT_NAME_MAX + 1];
    char canon[CHAT_NAME_MAX + 1];
    char password[YARD_ACCOUNT_PASSWORD_MAX + 1];
    char certfp[65]; /* SASL EXTERNAL: the account is the certificate's, not a password's */
    bool ok;
    bool sasl;
    struct crypt_data cd;
};

/* Is an account named nick? Read from DIR/accounts, so an I/O job. */
struct nick_job {
    enum chat_job_kind kind; /* first: what job_done reads */
    const char *dir;
    char nick[CHAT_NAME_MAX + 1];
    bool reserved; /* an account has that name */
};

/* The I/O jobs. Each lives in the session (one of each kind at most is in
 * flight, and with fork --pair each is started and finished by one process
 * of the pair), so none is lost when a connection ends before its
 * job_done. */

/* One PRIVMSG, NOTICE or TOPIC: its targets' accounts looked up, then one
 * append per target. */
enum { POST_NO_SUCH_NICK = 1 };
struct post_job {
    enum chat_job_kind kind; /* first: what job_done reads */
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
    enum chat_job_kind kind; /* first: what job_done reads */
    yard_chatlog_t *log;
    yard_chatlog_cursor_t cur;
    long n; /* bytes in buf, or -errno */
    uint8_t buf[LOG_READ];
};

/* A JOIN's replay: the channel's messages after the device's read position
 * up to what the connection had relayed, the newest max of them. */
struct replay_job {
    enum chat_job_kind kind; /* first: what job_done reads */
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
    enum chat_job_kind kind; /* first: what job_done reads */
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
    unsigned long read; /* out: log records the walks read (flood control's price) */
    int rc;
};

void chat_auth_job_run(void *arg);    /* struct auth_job */
void chat_nick_job_run(void *arg);    /* struct nick_job */
void chat_post_job_run(void *arg);    /* struct post_job */
void chat_read_job_run(void *arg);    /* struct read_job */
void chat_replay_job_run(void *arg);  /* struct replay_job */
void chat_history_job_run(void *arg); /* struct hist_job */

#endif
