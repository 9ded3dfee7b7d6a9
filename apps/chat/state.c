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

void chat_casefold(char *out, const char *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = yard_irc_fold(in[i]);
    out[n] = 0;
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

/* The lock is this file's alone (state.h): chat_state_locked and the
 * operations below take it. */
static void chat_lock(chat_state_t *cs)
{
    /* A holder that died (a killed child) is taken over: the tables are
     * updated field by field and stay usable. */
    yard_shm_mutex_lock(&cs->mu);
}

static void chat_unlock(chat_state_t *cs) { pthread_mutex_unlock(&cs->mu); }

void chat_state_locked(chat_state_t *cs, chat_locked_fn *fn, void *ctx)
{
    chat_lock(cs);
    fn(cs, ctx);
    chat_unlock(cs);
}

void chat_members_each(chat_state_t *cs, chat_member_fn *fn, void *ctx)
{
    chat_lock(cs);
    for (unsigned i = 0; i < cs->member_end; i++) {
        struct chat_member *m = chat_member_at(cs, (int)i);
        if (m->used && !fn(cs, (int)i, m, ctx))
            break;
    }
    chat_unlock(cs);
}

/* Channel c's view for slot, under the lock. */
static bool view_of(chat_state_t *cs, int c, int slot, unsigned want, struct chat_chan_view *v)
{
    memset(v, 0, sizeof *v);
    if (c < 0 || !cs->chans[c].used)
        return false;
    const struct chat_channel *ch = &cs->chans[c];
    v->live = true;
    v->in = slot >= 0 && chat_is_in(cs, slot, c);
    v->rank = slot >= 0 && (want & CHAT_VIEW_RANK) ? chat_member_rank(cs, slot, c) : 0;
    v->modes = ch->modes;
    v->limit = ch->limit;
    v->nbans = ch->nbans;
    v->members = ch->members;
    memcpy(v->name, ch->name, sizeof v->name);
    memcpy(v->key, ch->key, sizeof v->key);
    return true;
}

bool chat_channel_view(chat_state_t *cs, int c, int slot, unsigned want,
                       struct chat_chan_view *v)
{
    chat_lock(cs);
    bool live = view_of(cs, c, slot, want, v);
    chat_unlock(cs);
    return live;
}

int chat_channel_lookup(chat_state_t *cs, const char *name, size_t len, int slot, unsigned want,
                        struct chat_chan_view *v)
{
    chat_lock(cs);
    int c = chat_channel_find(cs, name, len, false);
    view_of(cs, c, slot, want, v);
    chat_unlock(cs);
    return c;
}

int chat_guest_rank_in(chat_state_t *cs, int c, const char *key)
{
    chat_lock(cs);
    int rank = cs->chans[c].used ? chat_guest_rank_named(cs, c, key) : -1;
    chat_unlock(cs);
    return rank;
}

bool chat_member_copy(chat_state_t *cs, int slot, struct chat_member *out)
{
    chat_lock(cs);
    memcpy(out, chat_member_at(cs, slot), sizeof *out);
    chat_unlock(cs);
    return out->used;
}

int chat_member_lookup(chat_state_t *cs, const char *key, struct chat_member *out)
{
    chat_lock(cs);
    int slot = chat_member_named(cs, key);
    if (slot >= 0)
        memcpy(out, chat_member_at(cs, slot), sizeof *out);
    chat_unlock(cs);
    return slot;
}

bool chat_member_still_shares(chat_state_t *cs, int slot, uint64_t serial, int other)
{
    chat_lock(cs);
    bool told = slot >= 0 && (unsigned)slot < cs->nmember;
    if (told) {
        const struct chat_member *m = chat_member_at(cs, slot);
        told = m->used && m->serial == serial && chat_members_share(cs, slot, other);
    }
    chat_unlock(cs);
    return told;
}

unsigned chat_member_slots(chat_state_t *cs)
{
    chat_lock(cs);
    unsigned end = cs->member_end;
    chat_unlock(cs);
    return end;
}

void chat_state_counts(chat_state_t *cs, unsigned *users, unsigned *users_max,
                       unsigned *live_chans)
{
    chat_lock(cs);
    *users = cs->users;
    *users_max = cs->users_max;
    *live_chans = cs->live_chans;
    chat_unlock(cs);
}

void chat_monitoring_note(chat_state_t *cs, bool has)
{
    chat_lock(cs);
    if (has)
        cs->monitoring++;
    else if (cs->monitoring)
        cs->monitoring--;
    chat_unlock(cs);
}

bool chat_monitoring_any(chat_state_t *cs)
{
    chat_lock(cs);
    bool any = cs->monitoring > 0;
    chat_unlock(cs);
    return any;
}

void chat_member_umodes(chat_state_t *cs, int slot, bool invisible, bool oper, bool bot)
{
    chat_lock(cs);
    struct chat_member *m = chat_member_at(cs, slot);
    m->invisible = invisible;
    m->oper = oper;
    m->bot = bot;
    chat_unlock(cs);
}

void chat_member_set_oper(chat_state_t *cs, int slot)
{
    chat_lock(cs);
    chat_member_at(cs, slot)->oper = true;
    chat_unlock(cs);
}

void chat_member_set_away(chat_state_t *cs, int slot, const char *msg, size_t len,
                          uint64_t at_ns)
{
    if (len > CHAT_AWAY_MAX)
        len = CHAT_AWAY_MAX;
    chat_lock(cs);
    struct chat_member *me = chat_member_at(cs, slot);
    if ((len > 0) != me->away) /* atomic: PRIVMSG reads it without the lock */
        __atomic_add_fetch(&cs->away, len > 0 ? 1u : (unsigned)-1, __ATOMIC_RELAXED);
    me->away = len > 0;
    me->away_at = at_ns;
    memcpy(me->away_msg, msg, len);
    me->away_msg[len] = 0;
    chat_unlock(cs);
}

bool chat_member_kill(chat_state_t *cs, int slot, uint64_t serial)
{
    chat_lock(cs);
    struct chat_member *m = chat_member_at(cs, slot);
    bool same = m->serial == serial;
    if (same)
        m->killed = true;
    chat_unlock(cs);
    return same;
}

unsigned chat_member_channel_keys(chat_state_t *cs, int slot, char (*keys)[CHAT_CHAN_MAX + 1],
                                  unsigned cap)
{
    unsigned n = 0;
    chat_lock(cs);
    for (unsigned c = 0; c < cs->nchan && n < cap; c++)
        if (cs->chans[c].used && chat_is_in(cs, slot, (int)c))
            memcpy(keys[n++], cs->chans[c].key, sizeof keys[0]);
    chat_unlock(cs);
    return n;
}

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

bool chat_whowas_find(chat_state_t *cs, const char *account_key, unsigned nth,
                      struct chat_gone *out)
{
    chat_lock(cs);
    bool found = chat_whowas_nth(cs, account_key, nth, out);
    chat_unlock(cs);
    return found;
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

int chat_channel_index(chat_state_t *cs, const char *key)
{
    int c;
    unsigned free_at;
    index_find(cs, key, &c, &free_at);
    return c;
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
