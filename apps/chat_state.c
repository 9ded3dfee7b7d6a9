/* The chat app's shared state (apps/chat_state.h). */
#include "chat_state.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define POS_SLOTS 65536 /* accounts x channels with a read position */

void chat_casefold(char *out, const char *in, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = in[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        else if (c == '[')
            c = '{';
        else if (c == ']')
            c = '}';
        else if (c == '\\')
            c = '|';
        else if (c == '~')
            c = '^';
        out[i] = c;
    }
    out[n] = 0;
}

int chat_state_init(chat_state_t *cs, yard_shm_t *shm, const char *dir, unsigned nchan,
                    unsigned nmember, char *err, size_t errlen)
{
    cs->pos_fd = -1;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    int e = pthread_mutex_init(&cs->mu, &a);
    pthread_mutexattr_destroy(&a);
    if (e) {
        snprintf(err, errlen, "pthread_mutex_init: %s", strerror(e));
        return -1;
    }
    cs->nchan = nchan;
    cs->nmember = nmember;
    cs->words = (nchan + 63) / 64;
    cs->member_size = (sizeof(struct chat_member) + cs->words * sizeof(uint64_t) + 63) & ~(size_t)63;
    cs->chans = yard_shm_alloc(shm, nchan * sizeof *cs->chans);
    cs->members = yard_shm_alloc(shm, nmember * cs->member_size);
    if (!cs->chans || !cs->members) {
        snprintf(err, errlen, "shared region too small for %u channels and %u members", nchan,
                 nmember);
        return -1;
    }
    /* Read positions live in DIR/positions, mapped shared: a crash of any
     * process loses nothing the kernel has (the page cache), and msync at the
     * log's fsync points makes them durable. */
    char path[4096];
    snprintf(path, sizeof path, "%s/positions", dir);
    cs->npos = POS_SLOTS;
    size_t bytes = cs->npos * sizeof(struct chat_pos);
    cs->pos_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    struct stat st;
    if (cs->pos_fd < 0 || fstat(cs->pos_fd, &st) < 0 ||
        ((size_t)st.st_size != bytes && ftruncate(cs->pos_fd, (off_t)bytes) < 0)) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    cs->pos = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, cs->pos_fd, 0);
    if (cs->pos == MAP_FAILED) {
        cs->pos = NULL;
        snprintf(err, errlen, "mmap %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

void chat_state_fini(chat_state_t *cs)
{
    if (cs->pos) {
        msync(cs->pos, cs->npos * sizeof(struct chat_pos), MS_SYNC);
        munmap(cs->pos, cs->npos * sizeof(struct chat_pos));
    }
    if (cs->pos_fd >= 0)
        close(cs->pos_fd);
    cs->pos = NULL;
    cs->pos_fd = -1;
}

void chat_lock(chat_state_t *cs)
{
    if (pthread_mutex_lock(&cs->mu) == EOWNERDEAD) {
        /* Its holder died (a killed child): the tables are updated field
         * by field and stay usable; take it over. */
        pthread_mutex_consistent(&cs->mu);
    }
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
            snprintf(m->account, sizeof m->account, "%s", account);
            memset(m->chans, 0, cs->words * sizeof(uint64_t));
            return (int)i;
        }
    }
    return -1;
}

void chat_member_remove(chat_state_t *cs, int slot)
{
    struct chat_member *m = chat_member_at(cs, slot);
    for (unsigned c = 0; c < cs->nchan; c++)
        if (chat_is_in(cs, slot, (int)c))
            chat_set_in(cs, slot, (int)c, false);
    m->used = false;
}

int chat_channel_find(chat_state_t *cs, const char *name, size_t len, bool create)
{
    char key[CHAT_CHAN_MAX + 1];
    if (len > CHAT_CHAN_MAX)
        return -1;
    chat_casefold(key, name, len);
    int free_slot = -1;
    for (unsigned i = 0; i < cs->nchan; i++) {
        if (cs->chans[i].used && strcmp(cs->chans[i].key, key) == 0)
            return (int)i;
        if (!cs->chans[i].used && free_slot < 0)
            free_slot = (int)i;
    }
    if (!create)
        return -1;
    if (free_slot < 0)
        return -2;
    struct chat_channel *c = &cs->chans[free_slot];
    memset(c, 0, sizeof *c);
    c->used = true;
    memcpy(c->name, name, len);
    memcpy(c->key, key, len + 1);
    return free_slot;
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
        cs->chans[chan].members--;
    }
}

static size_t pos_hash(const char *a, const char *c)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *a; a++)
        h = (h ^ (uint8_t)*a) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
    for (; *c; c++)
        h = (h ^ (uint8_t)*c) * 1099511628211ull;
    return (size_t)h;
}

/* The slot of (account, chan), or a free one to claim, or NULL when full. */
static struct chat_pos *pos_slot(chat_state_t *cs, const char *account, const char *chan)
{
    char a[CHAT_NAME_MAX + 2];
    chat_casefold(a, account, strnlen(account, CHAT_NAME_MAX));
    size_t i = pos_hash(a, chan) % cs->npos;
    for (size_t probe = 0; probe < cs->npos; probe++, i = (i + 1) % cs->npos) {
        struct chat_pos *p = &cs->pos[i];
        if (!p->account[0]) {
            snprintf(p->account, sizeof p->account, "%s", a);
            snprintf(p->chan, sizeof p->chan, "%s", chan);
            p->id = 0;
            return p;
        }
        if (strcmp(p->account, a) == 0 && strcmp(p->chan, chan) == 0)
            return p;
    }
    return NULL;
}

uint64_t chat_pos_get(chat_state_t *cs, const char *account, const char *chan_key, bool *known)
{
    chat_lock(cs);
    struct chat_pos *p = pos_slot(cs, account, chan_key);
    uint64_t stored = p ? p->id : 0;
    chat_unlock(cs);
    *known = stored != 0;
    return stored ? stored - 1 : 0;
}

void chat_pos_set(chat_state_t *cs, const char *account, const char *chan_key, uint64_t id)
{
    chat_lock(cs);
    struct chat_pos *p = pos_slot(cs, account, chan_key);
    if (p && id + 1 > p->id)
        p->id = id + 1; /* stored + 1: 0 is "never joined", distinct from "seen nothing" */
    chat_unlock(cs);
}

void chat_pos_sync(chat_state_t *cs)
{
    msync(cs->pos, cs->npos * sizeof(struct chat_pos), MS_ASYNC);
}
