/* The records the chat keeps in files of the data directory (state.h):
 * read positions, topics, channels' modes and ranks, and ban lists. Each
 * is a table of fixed slots that the store maps shared; topics, channel
 * records and ban lists keep every record in two copies, each with a CRC,
 * so that a process killed while writing one leaves the other valid. */
#include "state.h"


#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "yard/hash.h"
#include "yard/proto_ircline.h"
#include "yard/proto_logrec.h"


#define POS_SLOTS 262144 /* accounts x devices x channels with a read position */
#define TOPIC_SLOTS 8192
#define CHANREC_SLOTS 4096

/* A durable read position: the last message of chan delivered to a device
 * of an account (stored + 1, so 0 means that device never joined chan). */
struct chat_pos {
    char account[CHAT_NAME_MAX + 2]; /* casefolded; "" = free slot */
    char client[CHAT_CLIENT_MAX + 2];
    char chan[CHAT_CHAN_MAX + 2]; /* casefolded */
    uint64_t id;
};

/* A topic in two copies, each with a CRC over the key and itself: a process
 * killed while writing one leaves the other, older one valid. */
struct topic_copy {
    uint64_t seq; /* the newer valid copy wins */
    int64_t at_s;
    char by[CHAT_NAME_MAX + 1];
    uint16_t len;
    char text[CHAT_TOPIC_MAX + 1];
    uint32_t crc;
};

struct chat_topic_slot {
    char key[CHAT_CHAN_MAX + 2]; /* casefolded; "" = never used */
    struct topic_copy copy[2];
};

/* A channel's record in two copies (see the topics' slots). */
struct chat_chan_slot {
    char key[CHAT_CHAN_MAX + 2]; /* casefolded; "" = never used */
    struct chat_chanrec copy[2];
};

/* A channel's ban list in two copies (the same). */
struct chat_ban_slot {
    char key[CHAT_CHAN_MAX + 2]; /* casefolded; "" = never used */
    struct chat_banrec copy[2];
};


/* Positions, topics and channel records are tables of fixed slots in
 * files of the data directory, which the store maps shared
 * (yard/chat_store.h): a crash of any process loses nothing the kernel
 * has, and the store pushes them to the disk with the log's syncs. */
void chat_state_tables(yard_chat_table_t t[CHAT_TABLES])
{
    t[CHAT_TABLE_POSITIONS] = (yard_chat_table_t){.name = "positions", .magic = "YARDPOS",
                                                  .slot_size = sizeof(struct chat_pos),
                                                  .nslots = POS_SLOTS,
                                                  .afresh = "devices catch up from their "
                                                            "next JOIN on"};
    t[CHAT_TABLE_TOPICS] = (yard_chat_table_t){.name = "topics", .magic = "YARDTOP",
                                               .slot_size = sizeof(struct chat_topic_slot),
                                               .nslots = TOPIC_SLOTS};
    t[CHAT_TABLE_CHANNELS] = (yard_chat_table_t){.name = "channels", .magic = "YARDCHN",
                                                 .slot_size = sizeof(struct chat_chan_slot),
                                                 .nslots = CHANREC_SLOTS};
    t[CHAT_TABLE_BANS] = (yard_chat_table_t){.name = "bans", .magic = "YARDBAN",
                                             .slot_size = sizeof(struct chat_ban_slot),
                                             .nslots = CHANREC_SLOTS};
}

void chat_state_attach(chat_state_t *cs, const yard_chat_table_t t[CHAT_TABLES])
{
    cs->pos = t[CHAT_TABLE_POSITIONS].slots;
    cs->npos = t[CHAT_TABLE_POSITIONS].nslots;
    cs->topics = t[CHAT_TABLE_TOPICS].slots;
    cs->ntopics = t[CHAT_TABLE_TOPICS].nslots;
    cs->chanrecs = t[CHAT_TABLE_CHANNELS].slots;
    cs->nchanrecs = t[CHAT_TABLE_CHANNELS].nslots;
    cs->banrecs = t[CHAT_TABLE_BANS].slots;
    cs->nbanrecs = t[CHAT_TABLE_BANS].nslots;
}

/* ---- read positions ------------------------------------------------------ */

static size_t pos_hash(const char *a, const char *d, const char *c)
{
    /* The fields apart: ("ab", "c") and ("a", "bc") are other keys. */
    static const uint8_t sep1 = 0xff, sep2 = 0xfe;
    uint64_t h = yard_fnv1a(YARD_FNV1A_INIT, a, strlen(a));
    h = yard_fnv1a(yard_fnv1a(h, &sep1, 1), d, strlen(d));
    return (size_t)yard_fnv1a(yard_fnv1a(h, &sep2, 1), c, strlen(c));
}

/* The slot of (account, client, chan), or a free one to claim, or NULL when
 * full. */
static struct chat_pos *pos_slot(chat_state_t *cs, const char *account, const char *client,
                                 const char *chan)
{
    char a[CHAT_NAME_MAX + 2], d[CHAT_CLIENT_MAX + 2];
    chat_casefold(a, account, strnlen(account, CHAT_NAME_MAX));
    chat_casefold(d, client, strnlen(client, CHAT_CLIENT_MAX));
    size_t i = pos_hash(a, d, chan) % cs->npos;
    for (size_t probe = 0; probe < cs->npos; probe++, i = (i + 1) % cs->npos) {
        struct chat_pos *p = &cs->pos[i];
        if (!p->account[0]) {
            snprintf(p->client, sizeof p->client, "%s", d);
            snprintf(p->chan, sizeof p->chan, "%s", chan);
            p->id = 0;
            snprintf(p->account, sizeof p->account, "%s", a); /* last: claims the slot */
            return p;
        }
        if (strcmp(p->account, a) == 0 && strcmp(p->client, d) == 0 &&
            strcmp(p->chan, chan) == 0)
            return p;
    }
    return NULL;
}

/* A read position asked for or moved, under the lock (pos_get, pos_set). */
struct pos_access {
    const char *account, *client, *chan_key;
    uint64_t id; /* as stored (+ 1) when read; the new position when set */
};

static void pos_get(chat_state_t *cs, void *ctx)
{
    struct pos_access *a = ctx;
    struct chat_pos *p = pos_slot(cs, a->account, a->client, a->chan_key);
    a->id = p ? p->id : 0;
}

static void pos_set(chat_state_t *cs, void *ctx)
{
    struct pos_access *a = ctx;
    struct chat_pos *p = pos_slot(cs, a->account, a->client, a->chan_key);
    if (p && a->id + 1 > p->id)
        p->id = a->id + 1; /* stored + 1: 0 is "never joined", distinct from "seen nothing" */
}

uint64_t chat_pos_get(chat_state_t *cs, const char *account, const char *client,
                      const char *chan_key, bool *known)
{
    struct pos_access a = {.account = account, .client = client, .chan_key = chan_key};
    chat_state_locked(cs, pos_get, &a);
    uint64_t stored = a.id;
    *known = stored != 0;
    return stored ? stored - 1 : 0;
}

void chat_pos_set(chat_state_t *cs, const char *account, const char *client,
                  const char *chan_key, uint64_t id)
{
    struct pos_access a = {.account = account, .client = client, .chan_key = chan_key, .id = id};
    chat_state_locked(cs, pos_set, &a);
}

/* ---- slots kept in two copies (topics, channels) ----------------------- */

/* A slot of the topics or channels file is a key, then two copies of its
 * record. Each copy starts with struct dual_head and ends, at crc_off, with
 * a CRC over the key and the copy: a process killed while writing one copy
 * leaves the other, older one valid, and the newer valid copy wins. */
struct dual_head {
    uint64_t seq; /* 0: never written */
    int64_t at_s; /* when it was written (the oldest record of a channel nobody is in goes first) */
};

struct dual_table {
    uint8_t *slots;
    size_t nslots, slot_size;
    size_t copy_off, copy_size, crc_off; /* within a slot; within a copy */
};

#define DUAL_PROBE 64

static char *dual_key(const struct dual_table *t, size_t i) { return (char *)(t->slots + i * t->slot_size); }

static uint8_t *dual_copy(const struct dual_table *t, size_t i, int k)
{
    return t->slots + i * t->slot_size + t->copy_off + (size_t)k * t->copy_size;
}

static uint32_t dual_crc(const struct dual_table *t, size_t i, const uint8_t *copy)
{
    uint32_t crc = yard_crc32c(0, dual_key(t, i), CHAT_CHAN_MAX + 2);
    return yard_crc32c(crc, copy, t->crc_off);
}

/* The newer valid copy of slot i, or NULL. */
static const uint8_t *dual_best(const struct dual_table *t, size_t i)
{
    const uint8_t *best = NULL;
    uint64_t best_seq = 0;
    for (int k = 0; k < 2; k++) {
        const uint8_t *c = dual_copy(t, i, k);
        struct dual_head h;
        uint32_t crc;
        memcpy(&h, c, sizeof h);
        memcpy(&crc, c + t->crc_off, sizeof crc);
        if (h.seq && h.seq > best_seq && crc == dual_crc(t, i, c)) {
            best = c;
            best_seq = h.seq;
        }
    }
    return best;
}

/* The slot holding key's record, with its newer valid copy in *best, or
 * SIZE_MAX. */
static size_t dual_find(const struct dual_table *t, const char *key, const uint8_t **best)
{
    size_t i = yard_fnv1a(YARD_FNV1A_INIT, key, strlen(key)) % t->nslots;
    for (size_t probe = 0; probe < DUAL_PROBE; probe++, i = (i + 1) % t->nslots) {
        if (!dual_key(t, i)[0])
            return SIZE_MAX;
        if (strcmp(dual_key(t, i), key) == 0 && (*best = dual_best(t, i)) != NULL)
            return i;
    }
    return SIZE_MAX;
}

/* A slot for a key that has none: a never-used one, one whose copies are
 * both invalid (a torn first write), or else the oldest record of a channel
 * nobody is in; SIZE_MAX when every slot on the key's path is live. */
static size_t dual_claim(chat_state_t *cs, const struct dual_table *t, const char *key)
{
    size_t i = yard_fnv1a(YARD_FNV1A_INIT, key, strlen(key)) % t->nslots, victim = SIZE_MAX;
    int64_t victim_at = INT64_MAX;
    for (size_t probe = 0; probe < DUAL_PROBE; probe++, i = (i + 1) % t->nslots) {
        const uint8_t *c = dual_best(t, i);
        if (!dual_key(t, i)[0] || !c)
            return i;
        struct dual_head h;
        memcpy(&h, c, sizeof h);
        if (chat_channel_index(cs, dual_key(t, i)) < 0 && h.at_s < victim_at) {
            victim = i;
            victim_at = h.at_s;
        }
    }
    return victim;
}

/* Write rec (copy_size bytes, starting with a dual_head whose at_s is set)
 * as key's newer copy; false when there is no slot for it. Under the lock. */
static bool dual_write(chat_state_t *cs, const struct dual_table *t, const char *key, void *rec)
{
    const uint8_t *best;
    size_t i = dual_find(t, key, &best);
    uint8_t *c;
    struct dual_head h;
    memcpy(&h, rec, sizeof h);
    h.seq = 1;
    if (i != SIZE_MAX) {
        struct dual_head bh;
        memcpy(&bh, best, sizeof bh);
        h.seq = bh.seq + 1;
        c = best == dual_copy(t, i, 0) ? dual_copy(t, i, 1) : dual_copy(t, i, 0);
    } else if ((i = dual_claim(cs, t, key)) != SIZE_MAX) {
        /* A new key: both copies become invalid before the key changes. */
        memset(dual_copy(t, i, 0), 0, 2 * t->copy_size);
        memset(dual_key(t, i), 0, CHAT_CHAN_MAX + 2);
        snprintf(dual_key(t, i), CHAT_CHAN_MAX + 2, "%s", key);
        c = dual_copy(t, i, 0);
    } else {
        return false;
    }
    memcpy(rec, &h, sizeof h);
    memcpy(c, rec, t->crc_off);
    uint32_t crc = dual_crc(t, i, c);
    memcpy(c + t->crc_off, &crc, sizeof crc); /* last: the copy is valid from here on */
    return true;
}

/* ---- topics ------------------------------------------------------------- */

static struct dual_table topics_table(chat_state_t *cs)
{
    return (struct dual_table){.slots = (uint8_t *)cs->topics, .nslots = cs->ntopics,
                               .slot_size = sizeof(struct chat_topic_slot),
                               .copy_off = offsetof(struct chat_topic_slot, copy),
                               .copy_size = sizeof(struct topic_copy),
                               .crc_off = offsetof(struct topic_copy, crc)};
}

/* A topic read or written under the lock (topic_read, topic_write): the
 * newest valid copy of its slot. */
struct topic_access {
    const char *chan_key;
    struct topic_copy c;
    bool found; /* read: a valid copy; write: it was stored */
};

static void topic_read(chat_state_t *cs, void *ctx)
{
    struct topic_access *a = ctx;
    struct dual_table t = topics_table(cs);
    const uint8_t *best;
    a->found = dual_find(&t, a->chan_key, &best) != SIZE_MAX;
    if (a->found)
        memcpy(&a->c, best, sizeof a->c);
}

static void topic_write(chat_state_t *cs, void *ctx)
{
    struct topic_access *a = ctx;
    struct dual_table t = topics_table(cs);
    a->found = dual_write(cs, &t, a->chan_key, &a->c);
}

bool chat_topic_get(chat_state_t *cs, const char *chan_key, char topic[CHAT_TOPIC_MAX + 1],
                    char by[CHAT_NAME_MAX + 1], int64_t *at_s)
{
    struct topic_access a = {.chan_key = chan_key};
    chat_state_locked(cs, topic_read, &a);
    const struct topic_copy *c = &a.c;
    if (!a.found || !c->len || c->len > CHAT_TOPIC_MAX)
        return false;
    memcpy(topic, c->text, c->len);
    topic[c->len] = 0;
    snprintf(by, CHAT_NAME_MAX + 1, "%s", c->by);
    *at_s = c->at_s;
    return true;
}

bool chat_topic_set(chat_state_t *cs, const char *chan_key, const char *topic, size_t len,
                    const char *by, int64_t at_s)
{
    if (len > CHAT_TOPIC_MAX)
        len = CHAT_TOPIC_MAX;
    struct topic_access a;
    memset(&a, 0, sizeof a); /* the copy's padding too: its CRC covers every byte */
    a.chan_key = chan_key;
    struct topic_copy *c = &a.c;
    c->at_s = at_s;
    snprintf(c->by, sizeof c->by, "%s", by);
    c->len = (uint16_t)len;
    memcpy(c->text, topic, len);
    chat_state_locked(cs, topic_write, &a);
    return a.found;
}

/* ---- channels: modes and ranks ------------------------------------------ */

static struct dual_table chans_table(chat_state_t *cs)
{
    return (struct dual_table){.slots = (uint8_t *)cs->chanrecs, .nslots = cs->nchanrecs,
                               .slot_size = sizeof(struct chat_chan_slot),
                               .copy_off = offsetof(struct chat_chan_slot, copy),
                               .copy_size = sizeof(struct chat_chanrec),
                               .crc_off = offsetof(struct chat_chanrec, crc)};
}

bool chat_chan_get(chat_state_t *cs, const char *chan_key, struct chat_chanrec *out)
{
    struct dual_table t = chans_table(cs);
    const uint8_t *best;
    if (dual_find(&t, chan_key, &best) == SIZE_MAX)
        return false;
    memcpy(out, best, sizeof *out);
    if (out->nranks > CHAT_RANKS_MAX)
        out->nranks = CHAT_RANKS_MAX;
    out->key[CHAT_CHANKEY_MAX] = 0;
    return true;
}

/* The live channel's copy of what JOIN and PRIVMSG check. */
static void chan_cache(struct chat_channel *ch, const struct chat_chanrec *r)
{
    ch->modes = r->modes;
    ch->limit = r->limit;
    memcpy(ch->chkey, r->key, sizeof ch->chkey);
    ch->chkey[CHAT_CHANKEY_MAX] = 0;
}

bool chat_chan_put(chat_state_t *cs, const char *chan_key, struct chat_chanrec *r, int64_t now_s)
{
    struct dual_table t = chans_table(cs);
    r->at_s = now_s;
    if (!dual_write(cs, &t, chan_key, r))
        return false;
    int c = chat_channel_index(cs, chan_key);
    if (c >= 0)
        chan_cache(&cs->chans[c], r);
    return true;
}

static struct dual_table bans_table(chat_state_t *cs)
{
    return (struct dual_table){.slots = (uint8_t *)cs->banrecs, .nslots = cs->nbanrecs,
                               .slot_size = sizeof(struct chat_ban_slot),
                               .copy_off = offsetof(struct chat_ban_slot, copy),
                               .copy_size = sizeof(struct chat_banrec),
                               .crc_off = offsetof(struct chat_banrec, crc)};
}

void chat_bans_get(chat_state_t *cs, const char *chan_key, struct chat_banrec *out)
{
    struct dual_table t = bans_table(cs);
    const uint8_t *best;
    if (dual_find(&t, chan_key, &best) == SIZE_MAX) {
        memset(out, 0, sizeof *out);
        return;
    }
    memcpy(out, best, sizeof *out);
    if (out->n > CHAT_BANS_MAX)
        out->n = CHAT_BANS_MAX;
    for (unsigned i = 0; i < out->n; i++) { /* a file is never trusted to end its strings */
        out->bans[i].mask[CHAT_BANMASK_MAX] = 0;
        out->bans[i].by[CHAT_NAME_MAX] = 0;
    }
}

bool chat_bans_put(chat_state_t *cs, const char *chan_key, struct chat_banrec *r, int64_t now_s)
{
    struct dual_table t = bans_table(cs);
    r->at_s = now_s;
    if (!dual_write(cs, &t, chan_key, r))
        return false;
    int c = chat_channel_index(cs, chan_key);
    if (c >= 0)
        cs->chans[c].nbans = r->n;
    return true;
}

bool chat_chan_load(chat_state_t *cs, int c, const char *founder_key, int64_t now_s)
{
    struct chat_channel *ch = &cs->chans[c];
    struct chat_chanrec r;
    struct chat_banrec bans;
    chat_bans_get(cs, ch->key, &bans);
    ch->nbans = bans.n;
    if (chat_chan_get(cs, ch->key, &r)) {
        chan_cache(ch, &r);
        return true;
    }
    memset(&r, 0, sizeof r);
    r.created_s = now_s;
    r.modes = CHAT_MODE_N | CHAT_MODE_T;
    chan_cache(ch, &r);
    if (founder_key)
        chat_rank_set(&r, founder_key, CHAT_RANK_OP, true);
    return chat_chan_put(cs, ch->key, &r, now_s);
}

int chat_rank_of(const struct chat_chanrec *r, const char *account_key)
{
    for (unsigned i = 0; i < r->nranks; i++)
        if (!strcmp(r->ranks[i].account, account_key))
            return r->ranks[i].rank;
    return 0;
}

bool chat_rank_set(struct chat_chanrec *r, const char *account_key, int rank, bool on)
{
    unsigned i = 0;
    while (i < r->nranks && strcmp(r->ranks[i].account, account_key))
        i++;
    if (i == r->nranks) {
        if (!on)
            return true;
        if (r->nranks == CHAT_RANKS_MAX)
            return false;
        memset(&r->ranks[i], 0, sizeof r->ranks[i]);
        snprintf(r->ranks[i].account, sizeof r->ranks[i].account, "%s", account_key);
        r->nranks++;
    }
    if (on)
        r->ranks[i].rank |= (uint8_t)rank;
    else
        r->ranks[i].rank &= (uint8_t)~rank;
    if (!r->ranks[i].rank) /* no rank left: the entry goes, the last one takes its place */
        r->ranks[i] = r->ranks[--r->nranks];
    return true;
}

int chat_chan_rank(chat_state_t *cs, const char *chan_key, const char *account_key)
{
    struct dual_table t = chans_table(cs);
    const uint8_t *best;
    if (dual_find(&t, chan_key, &best) == SIZE_MAX)
        return 0;
    const struct chat_chanrec *r = (const struct chat_chanrec *)(const void *)best;
    unsigned n = r->nranks < CHAT_RANKS_MAX ? r->nranks : CHAT_RANKS_MAX;
    for (unsigned k = 0; k < n; k++)
        if (!strncmp(r->ranks[k].account, account_key, sizeof r->ranks[k].account))
            return r->ranks[k].rank;
    return 0;
}

/* ---- a live channel with its records ------------------------------------ */

struct channel_records {
    int c;
    char *name;
    struct chat_chanrec *rec;
    struct chat_banrec *bans;
    bool have;
};

static void channel_records(chat_state_t *cs, void *ctx)
{
    struct channel_records *r = ctx;
    const struct chat_channel *ch = &cs->chans[r->c];
    strcpy(r->name, ch->name);
    if (r->bans)
        chat_bans_get(cs, ch->key, r->bans);
    if (!r->rec)
        return;
    r->have = chat_chan_get(cs, ch->key, r->rec);
    if (!r->have) { /* no record (DIR/channels was full): the live copy */
        memset(r->rec, 0, sizeof *r->rec);
        r->rec->modes = ch->modes;
        r->rec->limit = ch->limit;
        memcpy(r->rec->key, ch->chkey, sizeof r->rec->key);
    }
}

bool chat_channel_record(chat_state_t *cs, int c, char name[CHAT_CHAN_MAX + 1],
                         struct chat_chanrec *out)
{
    struct channel_records r = {.c = c, .name = name, .rec = out};
    chat_state_locked(cs, channel_records, &r);
    return r.have;
}

void chat_channel_bans(chat_state_t *cs, int c, char name[CHAT_CHAN_MAX + 1],
                       struct chat_banrec *out)
{
    struct channel_records r = {.c = c, .name = name, .bans = out};
    chat_state_locked(cs, channel_records, &r);
}
