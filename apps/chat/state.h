/* The chat app's shared state: who is online in which channel, channel
 * topics, and every device's durable read position per channel. All of it
 * is mapped MAP_SHARED before any fork, so the fork and reactors --procs
 * models see the same tables as the threaded ones; one process-shared,
 * robust mutex guards it (a process killed while holding it does not wedge
 * the others). Only this module takes it (see "The lock" below).
 *
 * A channel holds a live slot only while somebody is in it: the last one
 * out frees it, so nobody can use up the table by joining and leaving.
 * What outlives its members, the topic, is kept in DIR/topics, its
 * modes and operators in DIR/channels, and its bans in DIR/bans.
 *
 * state.c: members, channels and who is in which; records.c: the records
 * kept in files (read positions, topics, channel records, ban lists). */
#ifndef YARD_CHAT_STATE_H
#define YARD_CHAT_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "yard/chat_store.h"
#include "yard/shm.h"

#define CHAT_NAME_MAX YARD_CHAT_NAME_MAX /* an account's name, a nick */
#define CHAT_CLIENT_MAX 30 /* a device's client id ("alice@phone") */
#define CHAT_CHAN_MAX YARD_CHAT_CHAN_MAX /* channel name, with its '#' */
#define CHAT_TOPIC_MAX 390
#define CHAT_USER_MAX 30      /* USER's user name, as WHOIS and WHO show it */
#define CHAT_REALNAME_MAX 100 /* USER's realname */
#define CHAT_CHANNELS_LIMIT 4096 /* --max-channels at most */

#define CHAT_CHANKEY_MAX 23 /* a +k key */
#define CHAT_RANKS_MAX 64   /* accounts with +o or +v in one channel */
#define CHAT_INVITES_MAX 16 /* pending INVITEs per live channel (the oldest is forgotten) */
#define CHAT_BANS_MAX 32      /* +b masks per channel (MAXLIST=b:32) */
#define CHAT_BANMASK_MAX 100  /* a +b mask: nick!user@host, or $a:account */

/* Channel modes (the flags of struct chat_chanrec.modes). */
enum { CHAT_MODE_I = 1u << 0, CHAT_MODE_M = 1u << 1, CHAT_MODE_N = 1u << 2, CHAT_MODE_T = 1u << 3,
       CHAT_MODE_REG_JOIN = 1u << 4,   /* +R: only accounts join (no guests) */
       CHAT_MODE_REG_SPEAK = 1u << 5, /* +M: only accounts speak */
       CHAT_MODE_S = 1u << 6 };       /* +s: secret (LIST and NAMES hide it from outsiders) */
/* An account's rank in a channel (bits). */
enum { CHAT_RANK_VOICE = 1, CHAT_RANK_OP = 2 };

struct chat_channel {
    bool used;
    char name[CHAT_CHAN_MAX + 1]; /* as first created */
    char key[CHAT_CHAN_MAX + 1];  /* casefolded */
    unsigned members;             /* member slots (connections) in it */
    /* Created by a guest's JOIN and joined by no account since: one of the
     * channels --guests-channel-share bounds (cs->guest_chans counts them). */
    bool guests_only;
    /* A copy of its durable record's modes (chat_chan_load, chat_chan_put),
     * so that JOIN and PRIVMSG check them without reading the record. */
    uint32_t modes, limit;
    char chkey[CHAT_CHANKEY_MAX + 1];
    /* Accounts (casefolded) invited while it is +i: not kept once it empties. */
    char invited[CHAT_INVITES_MAX][CHAT_NAME_MAX + 1];
    unsigned invite_next;
    /* Guests in it holding a rank (chat_guest_rank_set): while none does,
     * NAMES and WHO take every rank from the record alone. */
    unsigned guest_ranked;
    /* How many +b masks its record in DIR/bans holds (chat_bans_put keeps
     * it): 0 spares JOIN and PRIVMSG reading the record. */
    unsigned nbans;
};

/* What a channel keeps across restarts in DIR/channels, whether or not
 * anybody is in it: its modes and who has a rank. The account that creates
 * a channel (the first JOIN of a name without a record) is its operator. */
struct chat_rank {
    char account[CHAT_NAME_MAX + 1]; /* casefolded */
    uint8_t rank;                    /* CHAT_RANK_* bits */
};
struct chat_chanrec {
    uint64_t seq; /* these two first: the file's two-copy slots use them */
    int64_t at_s; /* last change */
    int64_t created_s;
    uint32_t modes, limit; /* CHAT_MODE_*; +l (0: none) */
    char key[CHAT_CHANKEY_MAX + 1]; /* +k ("": none) */
    uint16_t nranks;
    struct chat_rank ranks[CHAT_RANKS_MAX];
    uint32_t crc;
};

/* A channel's ban list, kept in DIR/bans (a table of its own, so that
 * DIR/channels keeps its format): masks as set (normalized to
 * nick!user@host, or an extban $a:account), compared casefolded. It
 * holds the ban exceptions (+e) and invite exceptions (+I) too, each
 * entry marked with its list. */
enum { CHAT_LIST_BAN = 0, CHAT_LIST_EXCEPT = 1, CHAT_LIST_INVEX = 2 };
struct chat_ban {
    char mask[CHAT_BANMASK_MAX + 1];
    char by[CHAT_NAME_MAX + 1]; /* the setter's nick */
    /* CHAT_LIST_*: in bytes that were padding before, zero in every entry
     * written then (each was zeroed first), so the file keeps its format
     * and its older entries are bans. */
    uint8_t list;
    int64_t at_s;
};
struct chat_banrec {
    uint64_t seq; /* these two first: the file's two-copy slots use them */
    int64_t at_s;
    uint16_t n;
    struct chat_ban bans[CHAT_BANS_MAX];
    uint32_t crc;
};

#define CHAT_AWAY_MAX 200

struct chat_member {
    bool used;
    bool guest;                        /* --guests: a nick with no account */
    uint8_t addr[16];                  /* a guest's source address (chat_addr_t) */
    uint8_t from[16];                  /* its source address, a guest's or an account's
                                        * (chat_addr_t: K-lines match it) */
    bool away;                         /* AWAY with a message, on this connection */
    bool tls;                          /* this connection is encrypted (WHOIS 671) */
    bool invisible;                    /* user mode +i: hidden from WHO's masks */
    bool oper;                         /* user mode +o: a server operator (OPER) */
    bool bot;                          /* user mode +B: a bot (WHOIS 335, WHO 'B') */
    bool killed;                       /* KILLed, closing: no longer a KILL's target (under
                                        * fork --pair the slot outlives the socket a moment) */
    uint64_t away_at;                  /* when it was set (the latest message is shown) */
    char account[CHAT_NAME_MAX + 1];   /* the account (a guest's: its nick) */
    char key[CHAT_NAME_MAX + 1];       /* the account casefolded */
    /* The nick shown for it: the account's name, or the nick its client
     * registered with (SASL keeps it). An account's connections share one
     * nick; no nick is another member's account or nick. */
    char nick[CHAT_NAME_MAX + 1];
    char nick_key[CHAT_NAME_MAX + 1];  /* casefolded */
    char away_msg[CHAT_AWAY_MAX + 1];
    char user[CHAT_USER_MAX + 1];         /* USER's user name and realname, */
    char realname[CHAT_REALNAME_MAX + 1]; /* for WHOIS, WHOWAS and WHO */
    uint64_t serial;                   /* which connection holds the slot (a nick record
                                        * names its member by slot and serial, relay.c) */
    /* Three bitmaps of cs->words words each: the joined channels, then a
     * guest's operator and voice ranks per channel (a guest's rank lasts
     * while it is in the channel; an account's is the channel record's). */
    uint64_t chans[];
};

struct chat_pos;
struct chat_topic_slot;
struct chat_chan_slot;
struct chat_ban_slot;

/* WHOWAS: the accounts whose last connection ended most recently. */
#define CHAT_WHOWAS_MAX 64
struct chat_gone {
    char account[CHAT_NAME_MAX + 1]; /* the nick it had */
    char user[CHAT_USER_MAX + 1];
    char realname[CHAT_REALNAME_MAX + 1];
    int64_t at_s; /* wall clock */
};

typedef struct chat_state {
    pthread_mutex_t mu;
    unsigned nchan, nmember, words; /* words: uint64_t per member bitmap */
    unsigned member_end; /* no slot at or past this one is used: scans stop here */
    unsigned live_chans;
    unsigned guest_chans; /* live channels with guests_only */
    unsigned away; /* member slots marked away: 0 spares a PRIVMSG the scan for 301 */
    unsigned monitoring; /* connections with a MONITOR list: 0 spares the log online records */
    unsigned users, users_max; /* member slots used now, and at most since the start (LUSERS) */
    uint64_t serials; /* member slots handed out so far: the next one's serial */
    size_t member_size;
    struct chat_channel *chans;
    int32_t *index; /* open addressing over chans by key: -1 empty, -2 deleted */
    unsigned index_cap, index_dead;
    uint8_t *members; /* nmember x member_size */
    struct chat_pos *pos;
    size_t npos;
    struct chat_gone *gone; /* a ring of CHAT_WHOWAS_MAX, newest at gone_next - 1 */
    unsigned gone_next, gone_count;
    struct chat_topic_slot *topics;
    size_t ntopics;
    struct chat_chan_slot *chanrecs;
    size_t nchanrecs;
    struct chat_ban_slot *banrecs;
    size_t nbanrecs;
} chat_state_t;

/* IRC's rfc1459 casemapping: ASCII lower case, and []\~ as {}|^. */
void chat_casefold(char *out, const char *in, size_t n);

/* The tables in shared memory, for nchan channels and nmember members:
 * 0, or -1 with err. */
int chat_state_init(chat_state_t *cs, yard_shm_t *shm, unsigned nchan, unsigned nmember,
                    char *err, size_t errlen);
/* The tables kept in files of the data directory, which the store opens
 * (yard/chat_store.h): chat_state_tables says what they are, and
 * chat_state_attach takes their mappings once the store has opened them. */
enum { CHAT_TABLE_POSITIONS, CHAT_TABLE_TOPICS, CHAT_TABLE_CHANNELS, CHAT_TABLE_BANS, CHAT_TABLES };
void chat_state_tables(yard_chat_table_t t[CHAT_TABLES]);
void chat_state_attach(chat_state_t *cs, const yard_chat_table_t t[CHAT_TABLES]);

/* The lock. Only state.c takes it (its lock functions are static): the
 * rest of the app, records.c included, calls the operations below, each of
 * which takes it inside, or hands a callback to chat_state_locked or
 * chat_members_each.
 * A callback runs under the lock, so it reads and changes the tables and
 * returns: no I/O, no sleeping, nothing that takes the lock again (the
 * functions further down marked "under the lock" are the ones it may
 * call). The symbol check holds the other modules to this. */
typedef void chat_locked_fn(chat_state_t *cs, void *ctx);
void chat_state_locked(chat_state_t *cs, chat_locked_fn *fn, void *ctx);
/* fn for each used member slot, in slot order, under the lock (one taking
 * for the whole walk); fn returns false to stop the walk. */
typedef bool chat_member_fn(chat_state_t *cs, int slot, struct chat_member *m, void *ctx);
void chat_members_each(chat_state_t *cs, chat_member_fn *fn, void *ctx);

/* What a caller asks of one live channel at a time, copied out under the
 * lock (chat_channel_view, chat_channel_lookup). */
struct chat_chan_view {
    bool live;
    bool in;   /* the slot asked about is a member (false for slot -1) */
    int rank;  /* that slot's CHAT_RANK_* bits, when asked for (else 0) */
    uint32_t modes, limit;
    unsigned nbans;
    unsigned members; /* member slots (connections) in it */
    char name[CHAT_CHAN_MAX + 1]; /* as first created */
    char key[CHAT_CHAN_MAX + 1];  /* casefolded */
};
enum { CHAT_VIEW_RANK = 1 }; /* want: also read the slot's rank (it may read a record) */
/* Live channel c as slot sees it; false (v->live false) when c is free. */
bool chat_channel_view(chat_state_t *cs, int c, int slot, unsigned want,
                       struct chat_chan_view *v);
/* The live channel named name (len bytes, any case): its index, and its view
 * in v; -1 when nobody is in it. */
int chat_channel_lookup(chat_state_t *cs, const char *name, size_t len, int slot, unsigned want,
                        struct chat_chan_view *v);
/* The rank in live channel c of the guest named by key (casefolded),
 * chat_guest_rank_named's; -1 when c is free or no such guest holds one. */
int chat_guest_rank_in(chat_state_t *cs, int c, const char *key);
/* A copy of the member in slot (its fixed fields, not its bitmaps); false
 * when the slot is free. */
bool chat_member_copy(chat_state_t *cs, int slot, struct chat_member *out);
/* The member that key (casefolded) names (chat_member_named): its slot,
 * and a copy of it in out; -1 when nobody connected has that name. */
int chat_member_lookup(chat_state_t *cs, const char *key, struct chat_member *out);
/* Does the member in slot, still the connection that had serial, share
 * a channel with the member in slot other? false for a slot out of range. */
bool chat_member_still_shares(chat_state_t *cs, int slot, uint64_t serial, int other);
/* chat_member_end, read under the lock. */
unsigned chat_member_slots(chat_state_t *cs);
/* The counts LUSERS shows: member slots used now and at most, live channels. */
void chat_state_counts(chat_state_t *cs, unsigned *users, unsigned *users_max,
                       unsigned *live_chans);
/* Connections with a MONITOR list: one more (has) or one fewer; any at all. */
void chat_monitoring_note(chat_state_t *cs, bool has);
bool chat_monitoring_any(chat_state_t *cs);
/* The user modes kept with the member in slot (WHO and WHOIS show them). */
void chat_member_umodes(chat_state_t *cs, int slot, bool invisible, bool oper, bool bot);
void chat_member_set_oper(chat_state_t *cs, int slot);
/* AWAY on the connection in slot: msg (len bytes, 0: back) since at_ns. */
void chat_member_set_away(chat_state_t *cs, int slot, const char *msg, size_t len,
                          uint64_t at_ns);
/* A kill of the connection in slot holding serial: marks it killed and
 * returns true, or false when the slot has changed hands since. */
bool chat_member_kill(chat_state_t *cs, int slot, uint64_t serial);
/* The channels the member in slot is in, their keys into keys (at most
 * cap); how many. */
unsigned chat_member_channel_keys(chat_state_t *cs, int slot, char (*keys)[CHAT_CHAN_MAX + 1],
                                  unsigned cap);

/* Under the lock: */
int chat_member_add(chat_state_t *cs, const char *account); /* slot or -1 (full) */
/* Slots below this may be used (iterate over [0, chat_member_end)). */
static inline unsigned chat_member_end(const chat_state_t *cs) { return cs->member_end; }
/* Frees the slot; when it was the account's last connection, the account
 * goes into the WHOWAS ring with at_s. */
void chat_member_remove(chat_state_t *cs, int slot, int64_t at_s);
/* The newest departure of the account (casefolded key); false if none in
 * the ring. */
bool chat_whowas(chat_state_t *cs, const char *account_key, struct chat_gone *out);
/* The same, the nth newest (0: the newest); false past the last. */
bool chat_whowas_nth(chat_state_t *cs, const char *account_key, unsigned nth,
                     struct chat_gone *out);
/* chat_whowas_nth, taking the lock. */
bool chat_whowas_find(chat_state_t *cs, const char *account_key, unsigned nth,
                      struct chat_gone *out);
struct chat_member *chat_member_at(chat_state_t *cs, int slot);
/* A used slot whose account or nick folds to key (an account's first
 * connection, or the guest with that nick), or -1. The two name one user:
 * an account's name is no other member's nick. */
int chat_member_named(chat_state_t *cs, const char *key);
/* The nick the connections of the account (casefolded) have, into nick;
 * false when none is connected. */
bool chat_account_nick(chat_state_t *cs, const char *account_key, char nick[CHAT_NAME_MAX + 1]);
/* The nick shown for the member in slot (an account's: its connections share it). */
void chat_member_set_nick(chat_state_t *cs, int slot, const char *nick);
/* Guests connected from this address (a chat_addr_t's bytes). */
unsigned chat_guests_from(chat_state_t *cs, const uint8_t addr[16]);
/* USER's user name and realname, and whether the connection is encrypted
 * (TLS), kept with the member in slot. */
void chat_member_ident(chat_state_t *cs, int slot, const char *user, const char *realname,
                       bool tls);
/* A guest's new nick (its account field and its nick), or the account a
 * guest logged in to (its nick then set apart with chat_member_set_nick). */
void chat_member_rename(chat_state_t *cs, int slot, const char *name);
/* How many channels the member in slot is in (takes the lock). */
unsigned chat_member_channels(chat_state_t *cs, int slot);
/* Do the members in slots a and b share a channel? Under the lock. */
bool chat_members_share(chat_state_t *cs, int a, int b);
/* The live channel's index for a casefolded name, -1 when nobody is in it.
 * Under the lock. */
int chat_channel_index(chat_state_t *cs, const char *key);
/* The channel's index, created when create is set: -1 unknown, -2 full. */
int chat_channel_find(chat_state_t *cs, const char *name, size_t len, bool create);
/* Channel c gets a member: a guest's that created it (created true) makes
 * it a guests' channel, an account's makes it one no more. Under the lock. */
void chat_channel_joined(chat_state_t *cs, int c, bool guest, bool created);
bool chat_is_in(chat_state_t *cs, int slot, int chan);
/* Leaving the last member frees the channel's slot. */
void chat_set_in(chat_state_t *cs, int slot, int chan, bool in);
/* How many channels the account (casefolded) is in, over all its
 * connections; with extra, counting that channel too. */
unsigned chat_account_channels(chat_state_t *cs, const char *account_key, int extra);
/* The channels of the account's connections other than slot, ORed into
 * bits (cs->words words); false when it has no other connection. */
bool chat_account_others(chat_state_t *cs, const char *account_key, int slot, uint64_t *bits);

/* Durable read positions per (account, client id, channel key); the lock is
 * taken inside. */
uint64_t chat_pos_get(chat_state_t *cs, const char *account, const char *client,
                      const char *chan_key, bool *known);
void chat_pos_set(chat_state_t *cs, const char *account, const char *client,
                  const char *chan_key, uint64_t id);

/* Topics, kept in DIR/topics whether or not the channel is live (the lock
 * is taken inside). get: false when none is set. set: false when the table
 * is full of topics of live channels. */
bool chat_topic_get(chat_state_t *cs, const char *chan_key, char topic[CHAT_TOPIC_MAX + 1],
                    char by[CHAT_NAME_MAX + 1], int64_t *at_s);
bool chat_topic_set(chat_state_t *cs, const char *chan_key, const char *topic, size_t len,
                    const char *by, int64_t at_s);

/* Channel records (DIR/channels), under the lock. get: false when the
 * channel has none. put: writes r (its at_s set to now_s) and refreshes the
 * live channel's copy of its modes; false when the file has no slot left
 * (every slot on the key's path belongs to a live channel). */
bool chat_chan_get(chat_state_t *cs, const char *chan_key, struct chat_chanrec *out);
bool chat_chan_put(chat_state_t *cs, const char *chan_key, struct chat_chanrec *r, int64_t now_s);
/* Ban lists (DIR/bans), under the lock. get: an empty list when the
 * channel has none. put: writes r (its at_s set to now_s) and refreshes the
 * live channel's count; false when the file has no slot left. */
void chat_bans_get(chat_state_t *cs, const char *chan_key, struct chat_banrec *out);
bool chat_bans_put(chat_state_t *cs, const char *chan_key, struct chat_banrec *r, int64_t now_s);
/* Live channel c's name into name and its record into out, read together
 * (the lock is taken inside): true when it has a record, false when it has
 * none (DIR/channels was full) and out is made of the live copy of its
 * modes. */
bool chat_channel_record(chat_state_t *cs, int c, char name[CHAT_CHAN_MAX + 1],
                         struct chat_chanrec *out);
/* Live channel c's name and ban list, read together (the lock is taken
 * inside). */
void chat_channel_bans(chat_state_t *cs, int c, char name[CHAT_CHAN_MAX + 1],
                       struct chat_banrec *out);
/* The live channel c was just created: its modes come from its record, or,
 * when it has none, it is new: +nt with founder_key as its operator (none
 * when founder_key is NULL: a guest's channel; false when that record could
 * not be stored: the channel then has no operator). */
bool chat_chan_load(chat_state_t *cs, int c, const char *founder_key, int64_t now_s);
/* The account's CHAT_RANK_* bits in a record, or through the file. */
int chat_rank_of(const struct chat_chanrec *r, const char *account_key);
int chat_chan_rank(chat_state_t *cs, const char *chan_key, const char *account_key);
/* Give or take rank bits; false when the record has no room for another
 * account (CHAT_RANKS_MAX). */
bool chat_rank_set(struct chat_chanrec *r, const char *account_key, int rank, bool on);
/* A guest's rank in live channel chan (CHAT_RANK_* bits), kept in its
 * member slot and gone when it leaves the channel. Under the lock. */
int chat_guest_rank(chat_state_t *cs, int slot, int chan);
void chat_guest_rank_set(chat_state_t *cs, int slot, int chan, int rank, bool on);
/* The rank in live channel chan of the member in slot: a guest's own, an
 * account's from the channel's record. Under the lock. */
int chat_member_rank(chat_state_t *cs, int slot, int chan);
/* The rank in live channel chan of the account or guest named by key
 * (casefolded); a guest only while it is in the channel. Under the lock. */
int chat_live_rank(chat_state_t *cs, int chan, const char *key);
/* The rank of the guest named by key in chan; -1 when no guest holding a
 * rank there has that name. Under the lock. */
int chat_guest_rank_named(chat_state_t *cs, int chan, const char *key);
/* Take every connection of the account out of channel chan (KICK); how
 * many were in it. */
unsigned chat_account_leave(chat_state_t *cs, const char *account_key, int chan);
/* The accounts in chan, each once (+l counts these). */
unsigned chat_channel_accounts(chat_state_t *cs, int chan);
/* INVITE: the account may join chan past +i while chan stays live. */
bool chat_invite_add(chat_state_t *cs, int chan, const char *account_key);
bool chat_invited(chat_state_t *cs, int chan, const char *account_key);

#endif
