/* What yard-serve was asked to do, parsed from its command line. */
#ifndef YARD_CONFIG_H
#define YARD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "yard/net.h"

enum yard_flush_mode { YARD_FLUSH_EACH, YARD_FLUSH_BUFFERED };

typedef struct yard_config {
    const char *app;
    const char *model;
    yard_addr_t listen;
    int workers;        /* 0: the model's default */
    long max_conns;     /* 0: unlimited */
    const char *out;    /* output file of apps that persist bytes (sink) */
    int flush;          /* enum yard_flush_mode */
    uint64_t idle_timeout_ns; /* 0: off */
    bool procs;         /* reactors: processes instead of threads */
    bool pair;          /* fork: papayaChat's RECV/SEND process pair per connection */
    int backlog;
    size_t max_sendq;   /* bytes queued for a peer before it is disconnected; 0: 8 MiB */
    size_t shm_bytes;   /* size of the shared region mapped before any fork */
    /* App settings (counter). */
    bool counter_perms;     /* read/full permissions instead of an atomic */
    /* App settings (rest). */
    uint64_t longpoll_ns;   /* GET /longPoll answers after this long */
    uint64_t request_timeout_ns; /* a request must be complete this long after its first
                                  * byte (408); 0: the app's default */
    int bcrypt_cost;        /* bcrypt cost (log2 rounds) */
    int offload_threads;    /* event-loop models: job pool size; 0 runs jobs inline */
    size_t store_entries;   /* capacity of each shared key-value store */
    /* App settings (chat). */
    const char *data_dir;   /* accounts, the message log, read positions */
    int fsync_mode;         /* enum yard_fsync_mode */
    uint64_t fsync_interval_ns;
    unsigned replay_max;    /* messages replayed on JOIN at most */
    uint64_t retain_s;      /* prune log segments older than this; 0: keep */
    uint64_t register_timeout_ns;
    unsigned max_channels;  /* channels the server can hold */
    unsigned channels_per_account; /* CHANLIMIT: channels one account may be in */
    /* Login limits (apps/chat_guard.h). */
    unsigned login_max_pending;      /* password checks in flight, server-wide */
    unsigned login_pending_per_addr; /* ... from one source address */
    unsigned max_unregistered;       /* connections not logged in yet, in total */
    unsigned unregistered_per_addr;  /* ... from one source address */
    double login_fail_addr_burst, login_fail_addr_per_s;       /* failures per address */
    double login_fail_account_burst, login_fail_account_per_s; /* failures per account */
} yard_config_t;

enum yard_fsync_mode { YARD_FSYNC_INTERVAL, YARD_FSYNC_ALWAYS, YARD_FSYNC_NEVER };

#endif
