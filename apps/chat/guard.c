/* The chat service's login limits (guard.h). */
#include "guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "yard/hash.h"

#define BUCKETS 4096 /* per table: addresses, accounts */
#define PROBE 32     /* slots looked at for a key before one is replaced */
#define TRUSTED 4    /* addresses an account remembers logging in from */
#define KEY_LEN 32

/* A ticket names a slot and the generation that took it, so a slot that was
 * reclaimed and taken again is not freed by its first holder. */
struct slot {
    uint32_t gen; /* 0: free */
    bool creds;   /* unregistered: it offered credentials (never shed) */
    chat_addr_t addr;
    uint64_t since_ns;
};

struct bucket {
    bool used;
    uint8_t key[KEY_LEN];
    double tokens;
    uint64_t at_ns;
    unsigned ntrusted;
    chat_addr_t trusted[TRUSTED];
};

struct chat_guard {
    pthread_mutex_t mu;
    chat_guard_opts_t o;
    uint32_t gen;
    struct slot *pending;      /* o.max_pending */
    struct slot *unregistered; /* o.max_unregistered */
    struct bucket *addrs, *accounts;
};

void chat_addr_of(const yard_addr_t *a, chat_addr_t *out)
{
    memset(out, 0, sizeof *out);
    if (!a)
        return;
    if (a->ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)&a->ss;
        out->b[10] = out->b[11] = 0xff;
        memcpy(out->b + 12, &in->sin_addr, 4);
    } else if (a->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)&a->ss;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
            memcpy(out->b, &in6->sin6_addr, 16);
        else
            memcpy(out->b, &in6->sin6_addr, 8); /* the /64 */
    }
}

static bool addr_is_v4(const chat_addr_t *a)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(a->b, prefix, 12) == 0;
}

void chat_addr_text(const chat_addr_t *a, char *buf, size_t len)
{
    char t[INET6_ADDRSTRLEN];
    if (addr_is_v4(a)) {
        inet_ntop(AF_INET, a->b + 12, t, sizeof t);
        snprintf(buf, len, "%s", t);
    } else {
        inet_ntop(AF_INET6, a->b, t, sizeof t);
        snprintf(buf, len, "%s/64", t);
    }
}

static void guard_lock(chat_guard_t *g)
{
    yard_shm_mutex_lock(&g->mu); /* a killed holder: the tables stay usable */
}

static void guard_unlock(chat_guard_t *g) { pthread_mutex_unlock(&g->mu); }

chat_guard_t *chat_guard_create(yard_shm_t *shm, const chat_guard_opts_t *o, char *err,
                                size_t errlen)
{
    chat_guard_t *g = yard_shm_alloc(shm, sizeof *g);
    if (!g)
        goto full;
    g->o = *o;
    g->pending = yard_shm_alloc(shm, o->max_pending * sizeof *g->pending);
    g->unregistered = yard_shm_alloc(shm, o->max_unregistered * sizeof *g->unregistered);
    g->addrs = yard_shm_alloc(shm, BUCKETS * sizeof *g->addrs);
    g->accounts = yard_shm_alloc(shm, BUCKETS * sizeof *g->accounts);
    if (!g->pending || !g->unregistered || !g->addrs || !g->accounts)
        goto full;
    int e = yard_shm_mutex_init(&g->mu);
    if (e < 0) {
        snprintf(err, errlen, "pthread_mutex_init: %s", strerror(-e));
        return NULL;
    }
    return g;
full:
    snprintf(err, errlen, "shared region too small for the login limits");
    return NULL;
}

/* ---- slots: connections not logged in, checks in flight ----------------- */

/* Callers on other threads may come with a clock read a little earlier than
 * the one that last touched the tables: time never runs backwards here. */
static uint64_t since(uint64_t now_ns, uint64_t then_ns)
{
    return now_ns > then_ns ? now_ns - then_ns : 0;
}

static bool slot_live(const struct slot *s, uint64_t now_ns, uint64_t ttl_ns)
{
    return s->gen && since(now_ns, s->since_ns) < ttl_ns;
}

/* Count the live slots of addr, and find a free one. */
static unsigned slots_scan(struct slot *v, unsigned n, const chat_addr_t *a, uint64_t now_ns,
                           uint64_t ttl_ns, unsigned *live, int *free_at)
{
    unsigned mine = 0;
    *live = 0;
    *free_at = -1;
    for (unsigned i = 0; i < n; i++) {
        if (!slot_live(&v[i], now_ns, ttl_ns)) {
            if (*free_at < 0)
                *free_at = (int)i;
            continue;
        }
        (*live)++;
        if (memcmp(&v[i].addr, a, sizeof *a) == 0)
            mine++;
    }
    return mine;
}

static uint64_t slot_take(chat_guard_t *g, struct slot *s, const chat_addr_t *a,
                          uint64_t now_ns, unsigned index)
{
    if (++g->gen == 0)
        g->gen = 1;
    s->gen = g->gen;
    s->creds = false;
    s->addr = *a;
    s->since_ns = now_ns;
    return (uint64_t)s->gen << 32 | (index + 1);
}

static void slot_free(struct slot *v, unsigned n, uint64_t ticket)
{
    uint32_t index = (uint32_t)ticket, gen = (uint32_t)(ticket >> 32);
    if (index == 0 || index > n)
        return;
    if (v[index - 1].gen == gen)
        v[index - 1].gen = 0;
}

/* A live slot without credentials, for choosing whom to shed. */
struct open_slot {
    chat_addr_t addr;
    uint64_t since_ns;
    unsigned index;
};

static int by_addr_then_age(const void *x, const void *y)
{
    const struct open_slot *a = x, *b = y;
    int c = memcmp(&a->addr, &b->addr, sizeof a->addr);
    return c ? c : a->since_ns < b->since_ns ? -1 : a->since_ns > b->since_ns;
}

/* The slot to shed for a newcomer from a: the oldest credential-less one
 * of the address holding the most of them (of two holding as many, the one
 * whose oldest is older), when a holds fewer; else -1. Under the lock. */
static int shed_victim(chat_guard_t *g, const chat_addr_t *a, uint64_t now_ns)
{
    unsigned n = g->o.max_unregistered, k = 0;
    struct open_slot *v = malloc(n * sizeof *v);
    if (!v)
        return -1;
    for (unsigned i = 0; i < n; i++) {
        const struct slot *sl = &g->unregistered[i];
        if (slot_live(sl, now_ns, g->o.unregistered_ttl_ns) && !sl->creds)
            v[k++] = (struct open_slot){sl->addr, sl->since_ns, i};
    }
    qsort(v, k, sizeof *v, by_addr_then_age);
    unsigned best = 0, best_n = 0, mine = 0; /* best: the first (oldest) of its group */
    for (unsigned i = 0; i < k;) {
        unsigned j = i;
        while (j < k && !memcmp(&v[j].addr, &v[i].addr, sizeof v[i].addr))
            j++;
        if (!memcmp(&v[i].addr, a, sizeof *a))
            mine = j - i;
        if (j - i > best_n || (j - i == best_n && v[i].since_ns < v[best].since_ns)) {
            best = i;
            best_n = j - i;
        }
        i = j;
    }
    int victim = best_n > mine && best_n > 0 ? (int)v[best].index : -1;
    free(v);
    return victim;
}

int chat_guard_enter(chat_guard_t *g, const chat_addr_t *a, uint64_t now_ns, uint64_t *ticket,
                     int *shed)
{
    *ticket = 0;
    *shed = -1;
    guard_lock(g);
    unsigned live;
    int free_at;
    unsigned mine = slots_scan(g->unregistered, g->o.max_unregistered, a, now_ns,
                               g->o.unregistered_ttl_ns, &live, &free_at);
    unsigned open = 0;
    for (unsigned i = 0; i < g->o.max_unregistered; i++)
        open += slot_live(&g->unregistered[i], now_ns, g->o.unregistered_ttl_ns) &&
                !g->unregistered[i].creds;
    unsigned open_cap = (unsigned)((uint64_t)g->o.max_unregistered * g->o.open_share / 100);
    int v = CHAT_GUARD_OK;
    if (mine >= g->o.unregistered_per_addr) {
        v = CHAT_GUARD_TOO_MANY;
    } else if (free_at < 0 || open >= open_cap) {
        /* Full, or the credential-less hold their share: a newcomer takes
         * the place of the oldest of the address holding the most. */
        int victim = shed_victim(g, a, now_ns);
        if (victim < 0) {
            v = CHAT_GUARD_FULL;
        } else {
            *shed = victim;
            *ticket = slot_take(g, &g->unregistered[victim], a, now_ns, (unsigned)victim);
        }
    } else {
        *ticket = slot_take(g, &g->unregistered[free_at], a, now_ns, (unsigned)free_at);
    }
    guard_unlock(g);
    return v;
}

static struct slot *ticket_slot(chat_guard_t *g, uint64_t ticket)
{
    uint32_t index = (uint32_t)ticket, gen = (uint32_t)(ticket >> 32);
    if (index == 0 || index > g->o.max_unregistered || g->unregistered[index - 1].gen != gen)
        return NULL;
    return &g->unregistered[index - 1];
}

void chat_guard_credentials(chat_guard_t *g, uint64_t ticket)
{
    if (!ticket)
        return;
    guard_lock(g);
    struct slot *sl = ticket_slot(g, ticket);
    if (sl)
        sl->creds = true;
    guard_unlock(g);
}

bool chat_guard_holds(chat_guard_t *g, uint64_t ticket)
{
    if (!ticket)
        return true;
    guard_lock(g);
    bool holds = ticket_slot(g, ticket) != NULL;
    guard_unlock(g);
    return holds;
}

void chat_guard_leave(chat_guard_t *g, uint64_t ticket)
{
    if (!ticket)
        return;
    guard_lock(g);
    slot_free(g->unregistered, g->o.max_unregistered, ticket);
    guard_unlock(g);
}

/* ---- token buckets ------------------------------------------------------- */

static uint64_t key_hash(const uint8_t *k) { return yard_fnv1a(YARD_FNV1A_INIT, k, KEY_LEN); }

static double bucket_level(const struct bucket *b, const chat_rate_t *r, uint64_t now_ns)
{
    double t = b->tokens + (double)since(now_ns, b->at_ns) / 1e9 * r->per_s;
    return t > r->burst ? r->burst : t;
}

/* The bucket of key, refilled to now; a full new one if key has none. When
 * the probe window is taken, the fullest bucket in it is replaced: a full
 * bucket limits nothing, so forgetting it loses the least. */
static struct bucket *bucket_get(struct bucket *table, const uint8_t *key, const chat_rate_t *r,
                                 uint64_t now_ns)
{
    size_t i0 = key_hash(key) % BUCKETS;
    struct bucket *victim = NULL;
    double victim_level = -1;
    for (size_t p = 0; p < PROBE; p++) {
        struct bucket *b = &table[(i0 + p) % BUCKETS];
        if (b->used && memcmp(b->key, key, KEY_LEN) == 0) {
            b->tokens = bucket_level(b, r, now_ns);
            if (now_ns > b->at_ns)
                b->at_ns = now_ns;
            return b;
        }
        double level = b->used ? bucket_level(b, r, now_ns) : r->burst + 1;
        if (level > victim_level) {
            victim = b;
            victim_level = level;
        }
    }
    memset(victim, 0, sizeof *victim);
    victim->used = true;
    memcpy(victim->key, key, KEY_LEN);
    victim->tokens = r->burst;
    victim->at_ns = now_ns;
    return victim;
}

static uint64_t retry_after(const struct bucket *b, const chat_rate_t *r)
{
    double s = (1.0 - b->tokens) / r->per_s;
    return s <= 0 ? 0 : (uint64_t)(s * 1e9) + 1;
}

static bool trusted(const struct bucket *b, const chat_addr_t *a)
{
    for (unsigned i = 0; i < b->ntrusted; i++)
        if (memcmp(&b->trusted[i], a, sizeof *a) == 0)
            return true;
    return false;
}

static void account_key(uint8_t key[KEY_LEN], const char *account)
{
    memset(key, 0, KEY_LEN);
    size_t n = strnlen(account, KEY_LEN - 1);
    memcpy(key, account, n);
}

int chat_guard_check_begin(chat_guard_t *g, const chat_addr_t *a, const char *account,
                           uint64_t now_ns, uint64_t *ticket, uint64_t *retry_ns)
{
    *ticket = 0;
    *retry_ns = 0;
    uint8_t akey[KEY_LEN] = {0}, ckey[KEY_LEN];
    memcpy(akey, a->b, sizeof a->b);
    account_key(ckey, account);
    guard_lock(g);
    unsigned live;
    int free_at;
    unsigned mine = slots_scan(g->pending, g->o.max_pending, a, now_ns, g->o.pending_ttl_ns,
                               &live, &free_at);
    struct bucket *ab = bucket_get(g->addrs, akey, &g->o.addr_failures, now_ns);
    struct bucket *cb = bucket_get(g->accounts, ckey, &g->o.account_failures, now_ns);
    int v = CHAT_GUARD_OK;
    /* The buckets first: a login that could not go ahead anyway is told so at
     * once, not made to wait for a slot. */
    if (ab->tokens < 1) {
        v = CHAT_GUARD_ADDR_LIMIT;
        *retry_ns = retry_after(ab, &g->o.addr_failures);
    } else if (cb->tokens < 1 && !trusted(cb, a)) {
        v = CHAT_GUARD_ACCOUNT_LIMIT;
        *retry_ns = retry_after(cb, &g->o.account_failures);
    } else if (mine >= g->o.pending_per_addr) {
        v = CHAT_GUARD_WAIT;
    } else if (free_at < 0) {
        v = CHAT_GUARD_BUSY;
    } else {
        *ticket = slot_take(g, &g->pending[free_at], a, now_ns, (unsigned)free_at);
        ab->tokens -= 1;
        if (cb->tokens >= 1)
            cb->tokens -= 1; /* a trusted address does not overdraw it */
    }
    guard_unlock(g);
    return v;
}

void chat_guard_check_end(chat_guard_t *g, uint64_t ticket, const chat_addr_t *a,
                          const char *account, bool ok, uint64_t now_ns)
{
    guard_lock(g);
    slot_free(g->pending, g->o.max_pending, ticket);
    if (ok) {
        uint8_t akey[KEY_LEN] = {0}, ckey[KEY_LEN];
        memcpy(akey, a->b, sizeof a->b);
        account_key(ckey, account);
        struct bucket *ab = bucket_get(g->addrs, akey, &g->o.addr_failures, now_ns);
        struct bucket *cb = bucket_get(g->accounts, ckey, &g->o.account_failures, now_ns);
        /* Only the token this login took: an address that owns one account
         * must not earn guesses against others by logging in to it. */
        ab->tokens = ab->tokens + 1 > g->o.addr_failures.burst ? g->o.addr_failures.burst
                                                               : ab->tokens + 1;
        /* Only the owner knows the password: the account's failures are
         * forgiven, and the address is remembered. */
        cb->tokens = g->o.account_failures.burst;
        if (!trusted(cb, a)) {
            if (cb->ntrusted == TRUSTED)
                memmove(&cb->trusted[0], &cb->trusted[1], (TRUSTED - 1) * sizeof cb->trusted[0]);
            else
                cb->ntrusted++;
            cb->trusted[cb->ntrusted - 1] = *a;
        }
    }
    guard_unlock(g);
}
