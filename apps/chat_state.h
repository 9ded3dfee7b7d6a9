/* The chat app's shared state: who is online in which channel, channel
 * topics, and every account's durable read position per channel. All of
 * it is mapped MAP_SHARED before any fork, so the fork and reactors --procs
 * models see the same tables as the threaded ones; one process-shared,
 * robust mutex guards it (a process killed while holding it does not wedge
 * the others). */
#ifndef YARD_CHAT_STATE_H
#define YARD_CHAT_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "yard/shm.h"

#define CHAT_NAME_MAX 30    /* account = nick */
#define CHAT_CHAN_MAX 50    /* channel name, with its '#' */
#define CHAT_TOPIC_MAX 390

struct chat_channel {
    bool used;
    char name[CHAT_CHAN_MAX + 1]; /* as first created */
    char key[CHAT_CHAN_MAX + 1];  /* casefolded */
    char topic[CHAT_TOPIC_MAX + 1];
    char topic_by[CHAT_NAME_MAX + 1];
    int64_t topic_at; /* seconds */
    unsigned members;
};

struct chat_member {
    bool used;
    char account[CHAT_NAME_MAX + 1];
    uint64_t chans[]; /* bitmap of joined channels */
};

/* A durable read position: the last message of chan delivered to account
 * (stored + 1, so 0 means the account never joined chan). */
struct chat_pos {
    char account[CHAT_NAME_MAX + 2]; /* casefolded; "" = free slot */
    char chan[CHAT_CHAN_MAX + 2];    /* casefolded */
    uint64_t id;
};

typedef struct chat_state {
    pthread_mutex_t mu;
    unsigned nchan, nmember, words; /* words: uint64_t per member bitmap */
    size_t member_size;
    struct chat_channel *chans;
    uint8_t *members; /* nmember x member_size */
    struct chat_pos *pos;
    size_t npos;
    int pos_fd;
} chat_state_t;

/* IRC's rfc1459 casemapping: ASCII lower case, and []\~ as {}|^. */
void chat_casefold(char *out, const char *in, size_t n);

int chat_state_init(chat_state_t *cs, yard_shm_t *shm, const char *dir, unsigned nchan,
                    unsigned nmember, char *err, size_t errlen);
void chat_state_fini(chat_state_t *cs);
void chat_lock(chat_state_t *cs);
void chat_unlock(chat_state_t *cs);

/* Under the lock: */
int chat_member_add(chat_state_t *cs, const char *account); /* slot or -1 (full) */
void chat_member_remove(chat_state_t *cs, int slot);
struct chat_member *chat_member_at(chat_state_t *cs, int slot);
/* The channel's index, created when create is set: -1 unknown, -2 full. */
int chat_channel_find(chat_state_t *cs, const char *name, size_t len, bool create);
bool chat_is_in(chat_state_t *cs, int slot, int chan);
void chat_set_in(chat_state_t *cs, int slot, int chan, bool in);

/* Durable read positions (the lock is taken inside). */
uint64_t chat_pos_get(chat_state_t *cs, const char *account, const char *chan_key, bool *known);
void chat_pos_set(chat_state_t *cs, const char *account, const char *chan_key, uint64_t id);
void chat_pos_sync(chat_state_t *cs);

#endif
