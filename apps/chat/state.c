/* The chat app's shared state (state.h). */
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

void chat_casefold(char *out, const char *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = yard_irc_fold(in[i]);
    out[n] = 0;
}

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

int chat_state_init(chat_state_t *cs, yard_shm_t *shm, unsigned nchan, unsigned nmember,
                    char *err, size_t errlen)
{
    int e = yard_shm_mutex_init(&cs->mu);
    if (e < 0) {
        snprintf(err, errlen, "pthread_mutex_init: %s", strerror(-e));
        return -1;
    }
    cs->nchan = nchan;
    cs->nmember = nmember;
    cs->words = (nchan + 63) / 64;
    cs->member_size =
        (sizeof(struct chat_member) + 3 * cs->words * sizeof(uint64_t) + 63) & ~(size_t)63;
    for (cs->index_cap = 16; cs->index_cap < 2 * nchan; cs->index_cap *= 2) {
    }
    cs->chans = yard_shm_alloc(shm, nchan * sizeof *cs->chans);
    cs->index = yard_shm_alloc(shm, cs->index_cap * sizeof *cs->index);
    cs->members = yard_shm_alloc(shm, nmember * cs->member_size);
    cs->gone = yard_shm_alloc(shm, CHAT_WHOWAS_MAX * sizeof *cs->gone);
    if (!cs->chans || !cs->index || !cs->members || !cs->gone) {
        snprintf(err, errlen, "shared region too small for %u channels and %u members", nchan,
                 nmember);
        return -1;
    }
    for (unsigned i = 0; i < cs->index_cap; i++)
        cs->index[i] = -1;
    return 0;
}

void chat_lock(chat_state_t *cs)
{
    /* A holder that died (a killed child) is taken over: the tables are
     * updated field by field and stay usable. */
    yard_shm_mutex_lock(&cs->mu);
}

void chat_unlock(chat_state_t *cs) { pthread_mutex_unlock(&cs->mu); }

struct chat_member *chat_member_at(chat_state_t *cs, int slot)
{
    return (struct chat_member *)(void *)(cs->members + (size_t)slot * cs->member_size);
}

int chat_member_add(chat_state_t *cs, const char *account)
{
    for (unsigned i = 0; i < cs->nmember; i++) {
        struct chat_member *m = chat_member_at(cs, (int)i);
        if (!m->used) {
            m->used = true;
            m->guest = false;
            memset(m->addr, 0, sizeof m->addr);
            memset(m->from, 0, sizeof m->from);
            m->away = false;
            m->invisible = false;
            m->oper = false;
            m->bot = false;
            m->killed = false;
            m->away_at = 0;
            m->away_msg[0] = 0;
            m->user[0] = m->realname[0] = 0;
            m->serial = ++cs->serials;
            chat_member_rename(cs, (int)i, account);
            memset(m->chans, 0, 3 * cs->words * sizeof(uint64_t));
            if (i + 1 > cs->member_end)
                cs->member_end = i + 1;
            if (++cs->users > cs->users_max)
                cs->users_max = cs->users;
            return (int)i;
        }
    }
    return -1;
}

int chat_member_named(chat_state_t *cs, const char *key)
{
    for (unsigned i = 0; i < cs->member_end; i++) {
        struct chat_member *m = chat_member_at(cs, (int)i);
        if (m->used && (!strcmp(m->key, key) || !strcmp(m->nick_key, key)))
            return (int)i;
    }
    return -1;
}

bool chat_account_nick(chat_state_t *cs, const char *account_key, char nick[CHAT_NAME_MAX + 1])
{
    for (unsigned i = 0; i < cs->member_end; i++) {
        struct chat_member *m = chat_member_at(cs, (int)i);
        if (m->used && !m->guest && !strcmp(m->key, account_key)) {
            memcpy(nick, m->nick, CHAT_NAME_MAX + 1);
            return true;
        }
    }
    return false;
}

void chat_member_set_nick(chat_state_t *cs, int slot, const char *nick)
{
    struct chat_member *m = chat_member_at(cs, slot);
    snprintf(m->nick, sizeof m->nick, "%s", nick);
    chat_casefold(m->nick_key, m->nick, strlen(m->nick));
}

unsigned chat_guests_from(chat_state_t *cs, const uint8_t addr[16])
{
    unsigned n = 0;
    for (unsigned i = 0; i < cs->member_end; i++) {
        struct chat_member *m = chat_member_at(cs, (int)i);
        n += m->used && m->guest && !memcmp(m->addr, addr, sizeof m->addr);
    }
    return n;
}

void chat_member_ident(chat_state_t *cs, int slot, const char *user, const char *realname,
                       bool tls)
{
    struct chat_member *m = chat_member_at(cs, slot);
    m->tls = tls;
    snprintf(m->user, sizeof m->user, "%s", user);
    snprintf(m->realname, sizeof m->realname, "%s", realname);
}

void chat_member_rename(chat_state_t *cs, int slot, const char *name)
{
    struct chat_member *m = chat_member_at(cs, slot);
    snprintf(m->account, sizeof m->account, "%s", name);
    chat_casefold(m->key, m->account, strlen(m->account));
    chat_member_set_nick(cs, slot, name);
}

unsigned chat_member_channels(chat_state_t *cs, int slot)
{
    chat_lock(cs);
    const struct chat_member *m = chat_member_at(cs, slot);
    unsigned n = 0;
    for (unsigned w = 0; w < cs->words; w++)
        n += (unsigned)__builtin_popcountll(m->chans[w]);
    chat_unlock(cs);
    return n;
}

bool chat_members_share(chat_state_t *cs, int a, int b)
{
    const struct chat_member *ma = chat_member_at(cs, a), *mb = chat_member_at(cs, b);
    for (unsigned w = 0; w < cs->words; w++)
        if (ma->chans[w] & mb->chans[w])
            return true;
    return false;
}

static bool same_account(const char *a, const char *b)
{
    char ka[CHAT_NAME_MAX + 1], kb[CHAT_NAME_MAX + 1];
    chat_casefold(ka, a, strnlen(a, CHAT_NAME_MAX));
    chat_casefold(kb, b, strnlen(b, CHAT_NAME_MAX));
    return !strcmp(ka, kb);
}

void chat_member_remove(chat_state_t *cs, int slot, int64_t at_s)
{
    struct chat_member *m = chat_member_at(cs, slot);
    for (unsigned w = 0; w < cs->words; w++)
        while (m->chans[w])
            chat_set_in(cs, slot, (int)(w * 64 + (unsigned)__builtin_ctzll(m->chans[w])), false);
    if (m->away) /* atomic: PRIVMSG reads it without the lock */
        __atomic_sub_fetch(&cs->away, 1, __ATOMIC_RELAXED);
    m->away = false;
    m->used = false;
    cs->users--;
    bool last = true;
    for (unsigned i = 0; last && i < cs->member_end; i++) {
        struct chat_member *o = chat_member_at(cs, (int)i);
        last = !(o->used && same_account(o->account, m->account));
    }
    if (last && cs->gone) {
        struct chat_gone *g = &cs->gone[cs->gone_next];
        snprintf(g->account, sizeof g->account, "%s", m->nick); /* WHOWAS asks by nick */
        memcpy(g->user, m->user, sizeof g->user);
        memcpy(g->realname, m->realname, sizeof g->realname);
        g->at_s = at_s;
        cs->gone_next = (cs->gone_next + 1) % CHAT_WHOWAS_MAX;
        if (cs->gone_count < CHAT_WHOWAS_MAX)
            cs->gone_count++;
    }
    /* The lowest free slot is taken first, so used slots stay dense. */
    while (cs->member_end && !chat_member_at(cs, (int)cs->member_end - 1)->used)
        cs->member_end--;
}

bool chat_whowas(chat_state_t *cs, const char *account_key, struct chat_gone *out)
{
    return chat_whowas_nth(cs, account_key, 0, out);
}

bool chat_whowas_nth(chat_state_t *cs, const char *account_key, unsigned nth,
                     struct chat_gone *out)
{
    for (unsigned k = 1; k <= cs->gone_count; k++) {
        struct chat_gone *g = &cs->gone[(cs->gone_next + CHAT_WHOWAS_MAX - k) % CHAT_WHOWAS_MAX];
        if (same_account(g->account, account_key) && nth-- == 0) {
            *out = *g;
            return true;
        }
    }
    return false;
}

static uint64_t str_hash(const char *k) { return yard_fnv1a(YARD_FNV1A_INIT, k, strlen(k)); }

/* The index entry of key, or (when absent) the first reusable entry on its
 * probe path in *free_at. */
static unsigned index_find(chat_state_t *cs, const char *key, int *chan, unsigned *free_at)
{
    unsigned mask = cs->index_cap - 1, i = (unsigned)str_hash(key) & mask;
    *free_at = UINT32_MAX;
    for (unsigned probe = 0; probe < cs->index_cap; probe++, i = (i + 1) & mask) {
        int32_t v = cs->index[i];
        if (v == -1) {
            if (*free_at == UINT32_MAX)
                *free_at = i;
            break;
        }
        if (v == -2) {
            if (*free_at == UINT32_MAX)
                *free_at = i;
            continue;
        }
        if (strcmp(cs->chans[v].key, key) == 0) {
            *chan = v;
            return i;
        }
    }
    *chan = -1;
    return UINT32_MAX;
}

/* Deleted entries lengthen every probe: past a quarter of the index, it is
 * built again from the live channels (which keep their slots). */
static void index_rebuild(chat_state_t *cs)
{
    for (unsigned i = 0; i < cs->index_cap; i++)
        cs->index[i] = -1;
    for (unsigned c = 0; c < cs->nchan; c++) {
        if (!cs->chans[c].used)
            continue;
        int found;
        unsigned free_at;
        index_find(cs, cs->chans[c].key, &found, &free_at);
        cs->index[free_at] = (int32_t)c;
    }
    cs->index_dead = 0;
}

int chat_channel_find(chat_state_t *cs, const char *name, size_t len, bool create)
{
    char key[CHAT_CHAN_MAX + 1];
    if (len > CHAT_CHAN_MAX)
        return -1;
    chat_casefold(key, name, len);
    int c;
    unsigned free_at;
    index_find(cs, key, &c, &free_at);
    if (c >= 0 || !create)
        return c;
    if (cs->live_chans == cs->nchan)
        return -2;
    for (c = 0; cs->chans[c].used; c++) {
    }
    struct chat_channel *ch = &cs->chans[c];
    memset(ch, 0, sizeof *ch);
    ch->used = true;
    memcpy(ch->name, name, len);
    memcpy(ch->key, key, len + 1);
    if (cs->index[free_at] == -2)
        cs->index_dead--;
    cs->index[free_at] = c;
    cs->live_chans++;
    return c;
}

void chat_channel_joined(chat_state_t *cs, int c, bool guest, bool created)
{
    struct chat_channel *ch = &cs->chans[c];
    if (guest && created && !ch->guests_only) {
        ch->guests_only = true;
        cs->guest_chans++;
    } else if (!guest && ch->guests_only) {
        ch->guests_only = false;
        cs->guest_chans--;
    }
}

static void channel_free(chat_state_t *cs, int c)
{
    if (cs->chans[c].guests_only)
        cs->guest_chans--;
    int found;
    unsigned free_at, at = index_find(cs, cs->chans[c].key, &found, &free_at);
    if (at != UINT32_MAX) {
        cs->index[at] = -2;
        cs->index_dead++;
    }
    cs->chans[c].used = false;
    cs->live_chans--;
    if (cs->index_dead > cs->index_cap / 4)
        index_rebuild(cs);
}

bool chat_is_in(chat_state_t *cs, int slot, int chan)
{
    return chat_member_at(cs, slot)->chans[chan / 64] >> (chan % 64) & 1;
}

void chat_set_in(chat_state_t *cs, int slot, int chan, bool in)
{
    uint64_t *w = &chat_member_at(cs, slot)->chans[chan / 64];
    uint64_t bit = (uint64_t)1 << (chan % 64);
    if (in == !!(*w & bit))
        return;
    if (in) {
        *w |= bit;
        cs->chans[chan].members++;
    } else {
        *w &= ~bit;
        chat_guest_rank_set(cs, slot, chan, CHAT_RANK_OP | CHAT_RANK_VOICE, false);
        if (--cs->chans[chan].members == 0)
            channel_free(cs, chan);
    }
}

bool chat_account_others(chat_state_t *cs, const char *account_key, int slot, uint64_t *bits)
{
    bool any = false;
    for (unsigned i = 0; i < cs->member_end; i++) {
        struct chat_member *m = chat_member_at(cs, (int)i);
        if (!m->used || (int)i == slot || strcmp(m->key, account_key) != 0)
            continue;
        any = true;
        for (unsigned w = 0; w < cs->words; w++)
            bits[w] |= m->chans[w];
    }
    return any;
}

unsigned chat_account_channels(chat_state_t *cs, const char *account_key, int extra)
{
    uint64_t bits[(CHAT_CHANNELS_LIMIT + 63) / 64] = {0};
    chat_account_others(cs, account_key, -1, bits);
    if (extra >= 0)
        bits[extra / 64] |= (uint64_t)1 << (extra % 64);
    unsigned n = 0;
    for (unsigned w = 0; w < cs->words; w++)
        n += (unsigned)__builtin_popcountll(bits[w]);
    return n;
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

uint64_t chat_pos_get(chat_state_t *cs, const char *account, const char *client,
                      const char *chan_key, bool *known)
{
    chat_lock(cs);
    struct chat_pos *p = pos_slot(cs, account, client, chan_key);
    uint64_t stored = p ? p->id : 0;
    chat_unlock(cs);
    *known = stored != 0;
    return stored ? stored - 1 : 0;
}

void chat_pos_set(chat_state_t *cs, const char *account, const char *client,
                  const char *chan_key, uint64_t id)
{
    chat_lock(cs);
    struct chat_pos *p = pos_slot(cs, account, client, chan_key);
    if (p && id + 1 > p->id)
        p->id = id + 1; /* stored + 1: 0 is "never joined", distinct from "seen nothing" */
    chat_unlock(cs);
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
    size_t i = str_hash(key) % t->nslots;
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
    size_t i = str_hash(key) % t->nslots, victim = SIZE_MAX;
    int64_t victim_at = INT64_MAX;
    for (size_t probe = 0; probe < DUAL_PROBE; probe++, i = (i + 1) % t->nslots) {
        const uint8_t *c = dual_best(t, i);
        if (!dual_key(t, i)[0] || !c)
            return i;
        struct dual_head h;
        memcpy(&h, c, sizeof h);
        int live;
        unsigned free_at;
        index_find(cs, dual_key(t, i), &live, &free_at);
        if (live < 0 && h.at_s < victim_at) {
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

bool chat_topic_get(chat_state_t *cs, const char *chan_key, char topic[CHAT_TOPIC_MAX + 1],
                    char by[CHAT_NAME_MAX + 1], int64_t *at_s)
{
    bool found = false;
    chat_lock(cs);
    struct dual_table t = topics_table(cs);
    const uint8_t *best;
    size_t i = dual_find(&t, chan_key, &best);
    struct topic_copy c;
    if (i != SIZE_MAX)
        memcpy(&c, best, sizeof c);
    if (i != SIZE_MAX && c.len && c.len <= CHAT_TOPIC_MAX) {
        memcpy(topic, c.text, c.len);
        topic[c.len] = 0;
        snprintf(by, CHAT_NAME_MAX + 1, "%s", c.by);
        *at_s = c.at_s;
        found = true;
    }
    chat_unlock(cs);
    return found;
}

bool chat_topic_set(chat_state_t *cs, const char *chan_key, const char *topic, size_t len,
                    const char *by, int64_t at_s)
{
    if (len > CHAT_TOPIC_MAX)
        len = CHAT_TOPIC_MAX;
    struct topic_copy c;
    memset(&c, 0, sizeof c);
    c.at_s = at_s;
    snprintf(c.by, sizeof c.by, "%s", by);
    c.len = (uint16_t)len;
    memcpy(c.text, topic, len);
    chat_lock(cs);
    struct dual_table t = topics_table(cs);
    bool ok = dual_write(cs, &t, chan_key, &c);
    chat_unlock(cs);
    return ok;
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
    int c;
    unsigned free_at;
    index_find(cs, chan_key, &c, &free_at);
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
    int c;
    unsigned free_at;
    index_find(cs, chan_key, &c, &free_at);
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

/* A guest's rank bits: the member's second and third bitmaps. */
static uint64_t *guest_rank_words(chat_state_t *cs, int slot, int rank)
{
    return chat_member_at(cs, slot)->chans + (rank == CHAT_RANK_OP ? 1 : 2) * cs->words;
}

int chat_guest_rank(chat_state_t *cs, int slot, int chan)
{
    int rank = 0;
    for (int r = CHAT_RANK_VOICE; r <= CHAT_RANK_OP; r <<= 1)
        if (guest_rank_words(cs, slot, r)[chan / 64] >> (chan % 64) & 1)
            rank |= r;
    return rank;
}

void chat_guest_rank_set(chat_state_t *cs, int slot, int chan, int rank, bool on)
{
    bool had = chat_guest_rank(cs, slot, chan) != 0;
    uint64_t bit = (uint64_t)1 << (chan % 64);
    for (int r = CHAT_RANK_VOICE; r <= CHAT_RANK_OP; r <<= 1) {
        if (!(rank & r))
            continue;
        uint64_t *w = &guest_rank_words(cs, slot, r)[chan / 64];
        *w = on ? *w | bit : *w & ~bit;
    }
    bool has = chat_guest_rank(cs, slot, chan) != 0;
    if (has != had)
        cs->chans[chan].guest_ranked += has ? 1 : (unsigned)-1;
}

int chat_member_rank(chat_state_t *cs, int slot, int chan)
{
    struct chat_member *m = chat_member_at(cs, slot);
    if (m->guest)
        return chat_guest_rank(cs, slot, chan);
    return chat_chan_rank(cs, cs->chans[chan].key, m->key);
}

int chat_guest_rank_named(chat_state_t *cs, int chan, const char *key)
{
    for (unsigned i = 0; cs->chans[chan].guest_ranked && i < cs->member_end; i++) {
        struct chat_member *m = chat_member_at(cs, (int)i);
        if (m->used && m->guest && !strcmp(m->key, key))
            return chat_guest_rank(cs, (int)i, chan);
    }
    return -1;
}

int chat_live_rank(chat_state_t *cs, int chan, const char *key)
{
    int rank = chat_guest_rank_named(cs, chan, key);
    return rank >= 0 ? rank : chat_chan_rank(cs, cs->chans[chan].key, key);
}

unsigned chat_account_leave(chat_state_t *cs, const char *account_key, int chan)
{
    unsigned n = 0;
    for (unsigned i = 0; i < cs->member_end && cs->chans[chan].used; i++) {
        struct chat_member *m = chat_member_at(cs, (int)i);
        if (m->used && !strcmp(m->key, account_key) && chat_is_in(cs, (int)i, chan)) {
            chat_set_in(cs, (int)i, chan, false);
            n++;
        }
    }
    return n;
}

unsigned chat_channel_accounts(chat_state_t *cs, int chan)
{
    unsigned n = 0;
    for (unsigned i = 0; i < cs->member_end; i++) {
        struct chat_member *m = chat_member_at(cs, (int)i);
        if (!m->used || !chat_is_in(cs, (int)i, chan))
            continue;
        bool seen = false; /* counted already through another of its connections? */
        for (unsigned j = 0; j < i && !seen; j++) {
            struct chat_member *o = chat_member_at(cs, (int)j);
            seen = o->used && chat_is_in(cs, (int)j, chan) && !strcmp(o->key, m->key);
        }
        n += !seen;
    }
    return n;
}

bool chat_invite_add(chat_state_t *cs, int chan, const char *account_key)
{
    struct chat_channel *ch = &cs->chans[chan];
    if (chat_invited(cs, chan, account_key))
        return true;
    snprintf(ch->invited[ch->invite_next], sizeof ch->invited[0], "%s", account_key);
    ch->invite_next = (ch->invite_next + 1) % CHAT_INVITES_MAX;
    return true;
}

bool chat_invited(chat_state_t *cs, int chan, const char *account_key)
{
    for (unsigned i = 0; i < CHAT_INVITES_MAX; i++)
        if (!strcmp(cs->chans[chan].invited[i], account_key))
            return true;
    return false;
}
