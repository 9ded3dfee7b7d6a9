/* The chat store's requests (yard/chat_store.h), run by the engine away
 * from the app's callbacks: yard_chat_store_run and one function per op. */
#define _DEFAULT_SOURCE /* explicit_bzero */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "yard/log.h"

#define DEFAULT_COST 12 /* yard-chat account add's, for a server without accounts */

/* A name as IRC's rfc1459 casemapping folds it, into out (n + 1 bytes). */
static void fold(char *out, const char *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = yard_irc_fold(in[i]);
    out[n] = 0;
}

static void read_run(void *arg)
{
    struct yard_chat_read *j = arg;
    j->n = yard_chatlog_read(j->store->log, &j->cur, j->buf, sizeof j->buf);
}

static void post_run(void *arg)
{
    struct yard_chat_post *j = arg;
    bool appended = false;
    for (int i = 0; i < j->n; i++) {
        if (j->t[i].person) {
            char hash[YARD_BCRYPT_LEN + 1], canon[YARD_CHAT_NAME_MAX + 1];
            if (yard_accounts_lookup(j->store->dir, j->t[i].name, strlen(j->t[i].name), hash, canon,
                                     NULL) != 0) {
                j->t[i].rc = YARD_CHAT_NO_SUCH_NICK;
                continue;
            }
            snprintf(j->t[i].name, sizeof j->t[i].name, "%s", canon);
        }
        int64_t ts;
        const char *text = j->text;
        size_t len = j->t[i].text_len;
        char tagged[YARD_CHAT_TAGS_MAX + 1 + YARD_IRC_MSG_MAX + 1];
        if (j->tags_len) { /* the tags, a NUL, the text (include/yard/proto_logrec.h) */
            memcpy(tagged, j->tags, j->tags_len);
            tagged[j->tags_len] = 0;
            memcpy(tagged + j->tags_len + 1, j->text, len);
            text = tagged;
            len += j->tags_len + 1;
        }
        j->t[i].rc = yard_chatlog_append(j->store->log, j->type, j->sender, strlen(j->sender),
                                         j->t[i].name, strlen(j->t[i].name), text, len,
                                         &j->t[i].id, &ts);
        appended |= j->t[i].rc == 0;
    }
    /* The log syncs itself per --fsync; read positions are a shared file
     * mapping (a crash of any process keeps them) flushed at shutdown, and
     * pushed along here when every message must be durable. */
    if (appended && j->store->sync_tables)
        yard_chat_store_sync_tables(j->store);
}

/* Is r one a JOIN replays: a message or notice to the replay's channel? */
static bool replayed(const struct yard_chat_replay *j, const yard_chatlog_rec_t *r)
{
    char target[YARD_CHAT_CHAN_MAX + 1];
    if (r->target_len > YARD_CHAT_CHAN_MAX ||
        (r->type != YARD_LOGREC_MESSAGE && r->type != YARD_LOGREC_NOTICE))
        return false;
    fold(target, r->target, r->target_len);
    return strcmp(target, j->key) == 0;
}

/* The newest max matching records of [from + 1, upto], found in one pass
 * that keeps their ids in a ring, then copied in a second. */
static void replay_run(void *arg)
{
    struct yard_chat_replay *j = arg;
    j->recs = NULL;
    j->recs_len = 0;
    j->total = j->shown = 0;
    j->rc = 0;
    uint64_t *ids = j->max ? calloc(j->max, sizeof *ids) : NULL;
    yard_chatlog_iter_t *it = NULL;
    if ((j->max && !ids) || yard_chatlog_iter_open(j->store->log, j->from + 1, &it) < 0) {
        free(ids);
        j->rc = -ENOMEM;
        return;
    }
    yard_chatlog_rec_t r;
    int rc;
    while ((rc = yard_chatlog_next(it, &r)) == 1 && r.id <= j->upto) {
        if (!replayed(j, &r))
            continue;
        if (j->max)
            ids[j->total % j->max] = r.id;
        j->total++;
    }
    yard_chatlog_iter_close(it);
    j->rc = rc < 0 ? rc : 0;
    j->shown = j->total < j->max ? j->total : j->max;
    uint64_t first = j->shown ? ids[(j->total - j->shown) % j->max] : 0;
    free(ids);
    if (!j->shown)
        return;
    size_t cap = 0;
    uint64_t got = 0;
    if (yard_chatlog_iter_open(j->store->log, first, &it) < 0) {
        j->shown = 0;
        j->rc = -ENOMEM;
        return;
    }
    while (got < j->shown && yard_chatlog_next(it, &r) == 1 && r.id <= j->upto) {
        if (!replayed(j, &r))
            continue;
        if (j->recs_len + r.len > cap) {
            size_t ncap = cap ? 2 * cap : 16 * YARD_LOGREC_MAX;
            while (ncap < j->recs_len + r.len)
                ncap *= 2;
            uint8_t *g = realloc(j->recs, ncap);
            if (!g) {
                j->rc = -ENOMEM;
                break;
            }
            j->recs = g;
            cap = ncap;
        }
        long w = yard_logrec_encode(&r, j->recs + j->recs_len, cap - j->recs_len);
        if (w < 0) {
            j->rc = (int)w;
            break;
        }
        j->recs_len += (size_t)w;
        got++;
    }
    yard_chatlog_iter_close(it);
    j->shown = got;
}

/* SASL EXTERNAL: the account that lists the certificate; an authzid the
 * client named (j->account) must be that one. */
static void external_job_run(struct yard_chat_auth *j)
{
    char want[YARD_CHAT_NAME_MAX + 1];
    snprintf(want, sizeof want, "%s", j->account);
    j->ok = yard_accounts_certfp_lookup(j->store->dir, j->certfp, j->canon) == 0 &&
            (!want[0] || !strcasecmp(want, j->canon));
}

/* A password check: an account's (PASS, SASL PLAIN), a server operator's
 * (OPER) against DIR/opers, or the server's (PASS with
 * --server-password-required) against DIR/server-password, the same way. */
static void auth_run(void *arg)
{
    struct yard_chat_auth *j = arg;
    if (j->certfp[0]) {
        external_job_run(j);
        return;
    }
    char hash[YARD_BCRYPT_LEN + 1];
    int max_cost = 0;
    const char *dir = j->store->dir;
    char err[512];
    int rc = j->server ? yard_server_password_lookup(dir, hash, err, sizeof err)
             : j->oper ? yard_opers_lookup(dir, j->account, strlen(j->account), hash, j->canon,
                                           &max_cost)
                       : yard_accounts_lookup(dir, j->account, strlen(j->account), hash,
                                              j->canon, &max_cost);
    j->known = rc == 0;
    /* An unknown account (or operator) is checked anyway, against a hash as dear as the
     * dearest account's, so timing does not tell which accounts exist. */
    if (rc != 0)
        yard_bcrypt_dummy(j->store->dummy_template, max_cost ? max_cost : DEFAULT_COST, hash);
    bool ok = yard_bcrypt_verify(j->password, hash, &j->cd);
    j->ok = ok && rc == 0;
    explicit_bzero(j->password, sizeof j->password);
}

static void nick_run(void *arg)
{
    struct yard_chat_nick *j = arg;
    char hash[YARD_BCRYPT_LEN + 1], canon[YARD_CHAT_NAME_MAX + 1];
    int rc = yard_accounts_lookup(j->store->dir, j->nick, strlen(j->nick), hash, canon, NULL);
    j->reserved = rc != -ENOENT; /* an error too: a nick that cannot be checked is not free */
}

/* A record's target as the log writes a guest's ("~nick"): the nick, and
 * true (yard_chat_unguest for the target). */
static bool unguest_target(yard_chatlog_rec_t *r)
{
    if (r->target_len < 2 || r->target[0] != '~')
        return false;
    r->target++;
    r->target_len--;
    return true;
}

/* Whether a record of type is history for j: messages and notices; with
 * event-playback also TAGMSGs, and a channel's events. */
static bool hist_type(const struct yard_chat_history *j, int type)
{
    if (type == YARD_LOGREC_MESSAGE || type == YARD_LOGREC_NOTICE)
        return true;
    if (!j->events)
        return false;
    return type == YARD_LOGREC_TAGMSG ||
           (j->channel && (type == YARD_LOGREC_TOPIC || type == YARD_LOGREC_JOIN ||
                           type == YARD_LOGREC_PART || type == YARD_LOGREC_QUIT ||
                           type == YARD_LOGREC_KICK || type == YARD_LOGREC_MODE));
}

/* Is this record one of the conversation's history? The asker's side of a
 * private one is its account, never a guest that had its name before. */
static bool hist_match(const struct yard_chat_history *j, const yard_chatlog_rec_t *r)
{
    yard_chatlog_rec_t g = *r; /* a guest's name without its '~' */
    bool from_guest = yard_chat_unguest(&g), to_guest = unguest_target(&g);
    r = &g;
    if (!hist_type(j, r->type) || r->target_len > YARD_CHAT_CHAN_MAX ||
        r->sender_len > YARD_CHAT_NAME_MAX)
        return false;
    char target[YARD_CHAT_CHAN_MAX + 1], sender[YARD_CHAT_NAME_MAX + 1];
    fold(target, r->target, r->target_len);
    if (j->channel)
        return !strcmp(target, j->key);
    fold(sender, r->sender, r->sender_len);
    return (!from_guest && !strcmp(sender, j->me) && !strcmp(target, j->key)) ||
           (!to_guest && !strcmp(sender, j->key) && !strcmp(target, j->me));
}

/* One record of a walk: 1 when the walk is over (its stop, or enough). */
static int hist_take_one(struct yard_chat_history *j, const yard_chatlog_rec_t *r)
{
    if (j->stop_id && (j->down ? r->id <= j->stop_id : r->id >= j->stop_id))
        return 1;
    if (!hist_match(j, r))
        return 0;
    if (j->recs_len + r->len > j->recs_cap || !j->at) {
        size_t cap = j->recs_cap ? 2 * j->recs_cap : 64 * 1024;
        while (cap < j->recs_len + r->len)
            cap *= 2;
        uint8_t *g = realloc(j->recs, cap);
        size_t *a = j->at ? j->at : malloc(YARD_CHAT_HISTORY_MAX * sizeof *a);
        if (!g || !a) {
            if (g)
                j->recs = g;
            if (!j->at)
                free(a);
            j->rc = -ENOMEM;
            return 1;
        }
        j->recs = g;
        j->at = a;
        j->recs_cap = cap;
    }
    long w = yard_logrec_encode(r, j->recs + j->recs_len, j->recs_cap - j->recs_len);
    if (w < 0) {
        j->rc = (int)w;
        return 1;
    }
    j->at[j->n++] = j->recs_len;
    j->recs_len += (size_t)w;
    return --j->want == 0;
}

static int hist_target_take_one(struct yard_chat_history *j, const yard_chatlog_rec_t *r);

/* A record read by a walk: taken, and the piece ends once it has read its
 * share (piece_full: the walk goes on in the next piece). */
static int hist_take(const yard_chatlog_rec_t *r, void *arg)
{
    struct yard_chat_history *j = arg;
    j->read++;
    int over = j->sub == YARD_CHAT_HIST_TARGETS ? hist_target_take_one(j, r) : hist_take_one(j, r);
    if (over)
        return 1;
    if (j->read >= YARD_CHAT_HISTORY_PIECE) {
        j->piece_full = true;
        return 1;
    }
    return 0;
}

/* The plan's next walk starts (or none is left: j->walk is past them).
 * One with nothing to take is skipped. */
static void hist_next_walk(struct yard_chat_history *j)
{
    for (j->walk++; j->walk < j->nwalks; j->walk++) {
        const struct yard_chat_hist_walk *w = &j->walks[j->walk];
        j->walk_first = j->n;
        j->want = w->want ? w->want : j->limit > j->n ? j->limit - j->n : 0;
        if (j->want)
            return;
    }
}

/* The current walk's next piece: up to its want of matching records from
 * its from in its direction, stopping at its stop_id (exclusive, 0: none).
 * A walk's records end up in id order once it is over; then the next walk
 * starts. j->more says whether anything is left for another piece. */
static void hist_walk_piece(struct yard_chat_history *j)
{
    struct yard_chat_hist_walk *w = &j->walks[j->walk];
    char guest_key[YARD_CHAT_CHAN_MAX + 2]; /* the other side, when it was a guest */
    snprintf(guest_key, sizeof guest_key, "~%s", j->key);
    uint32_t h[3] = {yard_chatlog_target_hash(j->key, strlen(j->key)),
                     yard_chatlog_target_hash(j->me, strlen(j->me)),
                     yard_chatlog_target_hash(guest_key, strlen(guest_key))};
    bool targets = j->sub == YARD_CHAT_HIST_TARGETS; /* every record: no hashes */
    j->down = w->dir < 0;
    j->stop_id = w->stop_id;
    j->piece_full = false;
    uint64_t next = 0;
    int rc = yard_chatlog_seek_piece(j->store->log, w->from, w->dir, h,
                                     targets ? 0 : j->channel ? 1 : 3,
                                     &j->entries_left, hist_take, j, &next);
    if (rc < 0 && j->rc == 0)
        j->rc = rc;
    bool walk_over = j->rc < 0 || rc == 0 || (rc == YARD_CHATLOG_SEEK_STOPPED && !j->piece_full) ||
                     (w->dir < 0 && next == 0);
    if (!walk_over) {
        w->from = next;
        j->more = true;
        return;
    }
    if (w->dir < 0 && !targets) /* newest first: turn them round */
        for (unsigned a = j->walk_first, b = j->n; a + 1 < b; a++, b--) {
            size_t t = j->at[a];
            j->at[a] = j->at[b - 1];
            j->at[b - 1] = t;
        }
    hist_next_walk(j);
}

/* A reference's id: msgid=N is N; timestamp=T is the first record at or
 * after T (after: the first after it). A time is as clients see it, to
 * the millisecond (server-time): a record is at T when it is in T's
 * millisecond, so the first after T is the first of the next one. */
#define HIST_TIME_STEP_NS 1000000
static uint64_t hist_id(struct yard_chat_history *j, const struct yard_chat_hist_ref *r, bool after)
{
    if (!r->by_time)
        return r->id;
    return yard_chatlog_id_at(j->store->log, r->ts_ns + (after ? HIST_TIME_STEP_NS : 0));
}

/* TARGETS: each record from the log's newest down to the window's start;
 * a conversation's first record seen is its latest, and it is listed when
 * that one is before the window's end (one with a later message is not,
 * though it has some in the window). */
static int hist_target_take_one(struct yard_chat_history *j, const yard_chatlog_rec_t *r)
{
    if (r->id < j->low_id)
        return 1;
    yard_chatlog_rec_t g = *r; /* a guest's name without its '~' */
    bool from_guest = yard_chat_unguest(&g), to_guest = unguest_target(&g);
    r = &g;
    if ((r->type != YARD_LOGREC_MESSAGE && r->type != YARD_LOGREC_NOTICE) ||
        r->target_len > YARD_CHAT_CHAN_MAX || r->sender_len > YARD_CHAT_NAME_MAX)
        return 0;
    char target[YARD_CHAT_CHAN_MAX + 1], sender[YARD_CHAT_NAME_MAX + 1], key[YARD_CHAT_CHAN_MAX + 1];
    const char *name;
    size_t len;
    fold(target, r->target, r->target_len);
    fold(sender, r->sender, r->sender_len);
    if (target[0] == '#' || target[0] == '&') {
        bool mine = false;
        for (unsigned i = 0; i < j->nchans && !mine; i++)
            mine = !strcmp(j->chans[i], target);
        if (!mine)
            return 0;
        strcpy(key, target);
        name = r->target;
        len = r->target_len;
    } else if (target[0] == '@' || target[0] == '+') {
        return 0; /* a STATUSMSG ("@#chan"): for some of a channel's members, not history */
    } else if (!from_guest && !strcmp(sender, j->me)) { /* I wrote to them */
        strcpy(key, target);
        name = r->target;
        len = r->target_len;
    } else if (!to_guest && !strcmp(target, j->me)) { /* they wrote to me */
        strcpy(key, sender);
        name = r->sender;
        len = r->sender_len;
    } else {
        return 0;
    }
    for (unsigned i = 0; i < j->ntargets; i++)
        if (!strcmp(j->targets[i].key, key))
            return 0; /* seen: that one was later */
    if (j->ntargets == j->targets_cap) {
        unsigned cap = j->targets_cap ? 2 * j->targets_cap : 16;
        struct yard_chat_hist_target *t = realloc(j->targets, cap * sizeof *t);
        if (!t) {
            j->rc = -ENOMEM;
            return 1;
        }
        j->targets = t;
        j->targets_cap = cap;
    }
    struct yard_chat_hist_target *t = &j->targets[j->ntargets++];
    memcpy(t->name, name, len);
    t->name[len] = 0;
    strcpy(t->key, key);
    t->latest_ns = r->ts_ns;
    t->listed = r->ts_ns < j->window_end_ns;
    return 0;
}

/* TARGETS' answer: the listed conversations, the oldest limit of them
 * (first in the listing, which goes oldest first), kept newest first. */
static void hist_targets_keep(struct yard_chat_history *j)
{
    unsigned n = 0;
    for (unsigned i = 0; i < j->ntargets; i++)
        if (j->targets[i].listed)
            j->targets[n++] = j->targets[i];
    unsigned from = n > j->limit ? n - j->limit : 0;
    if (from) /* (none at all: no array either) */
        memmove(j->targets, j->targets + from, (n - from) * sizeof *j->targets);
    j->ntargets = n - from;
}

/* A walk of the plan (want 0: what the limit leaves when it starts). */
static void hist_plan(struct yard_chat_history *j, uint64_t from, int dir, uint64_t stop_id,
                      unsigned want)
{
    j->walks[j->nwalks++] = (struct yard_chat_hist_walk){from, stop_id, dir, want};
}

/* The walks a request takes, from its references. */
static void history_start(struct yard_chat_history *j)
{
    j->rc = 0;
    j->n = 0;
    j->recs_len = 0;
    j->nwalks = j->walk = j->walk_first = 0;
    uint64_t a, b;
    switch (j->sub) {
    case YARD_CHAT_HIST_TARGETS: { /* the window between the two times, both excluded */
        int64_t lo = j->a.ts_ns < j->b.ts_ns ? j->a.ts_ns : j->b.ts_ns,
                hi = j->a.ts_ns < j->b.ts_ns ? j->b.ts_ns : j->a.ts_ns;
        j->ntargets = j->targets_cap = 0;
        j->targets = NULL;
        j->window_end_ns = hi;
        j->low_id = yard_chatlog_id_at(j->store->log, lo + HIST_TIME_STEP_NS);
        uint64_t top = yard_chatlog_id_at(j->store->log, INT64_MAX); /* past the newest */
        if (top > j->low_id)
            hist_plan(j, top - 1, -1, 0, 1);
        break;
    }
    case YARD_CHAT_HIST_LATEST: /* the newest, after the reference if one is given */
        hist_plan(j, UINT64_MAX, -1,
                  j->a.any ? 0 : j->a.by_time ? hist_id(j, &j->a, true) - 1 : j->a.id, j->limit);
        break;
    case YARD_CHAT_HIST_BEFORE:
        a = hist_id(j, &j->a, false);
        if (a > 1)
            hist_plan(j, a - 1, -1, 0, j->limit);
        break;
    case YARD_CHAT_HIST_AFTER:
        a = hist_id(j, &j->a, true);
        hist_plan(j, j->a.by_time ? a : a + 1, 1, 0, j->limit);
        break;
    case YARD_CHAT_HIST_AROUND: /* the reference and those before it, then those after */
        a = hist_id(j, &j->a, false);
        hist_plan(j, a, -1, 0, (j->limit + 1) / 2);
        hist_plan(j, a + 1, 1, 0, 0);
        break;
    case YARD_CHAT_HIST_BETWEEN: /* both ends excluded */
        a = hist_id(j, &j->a, false);
        b = hist_id(j, &j->b, false);
        if (a < b)
            hist_plan(j, j->a.by_time ? hist_id(j, &j->a, true) : a + 1, 1, b, j->limit);
        else if (a > 1)
            hist_plan(j, a - 1, -1, j->b.by_time ? hist_id(j, &j->b, true) - 1 : b, j->limit);
        break;
    }
    j->walk = (unsigned)-1; /* hist_next_walk starts the first */
    hist_next_walk(j);
}

/* One piece of a CHATHISTORY, one piece at a time server-wide
 * (yard_chatlog_scan_begin): the first plans the walks; each reads up to
 * a piece's worth and says whether more is to come (j->more). TARGETS'
 * walk reads every record from the newest down to its window's start (its
 * want is never used up); its answer is kept from what it saw once over. */
static void history_run(void *arg)
{
    struct yard_chat_history *j = arg;
    j->read = 0;
    j->entries_left = YARD_CHAT_HISTORY_PIECE_ENTRIES;
    j->more = false;
    yard_chatlog_scan_begin(j->store->log);
    if (!j->started) {
        j->started = true;
        history_start(j);
    }
    while (!j->more && j->walk < j->nwalks && j->rc == 0)
        hist_walk_piece(j);
    yard_chatlog_scan_end(j->store->log);
    if (!j->more && j->sub == YARD_CHAT_HIST_TARGETS)
        hist_targets_keep(j);
}

/* DIR/klines changed, then read (with the generation it is at least);
 * a failure other than a missing mask is the server's to log. */
static void kline_run(struct yard_chat_kline *j)
{
    const char *dir = j->store->dir;
    j->list = NULL;
    j->n = 0;
    j->rc = 0;
    if (j->sub == YARD_CHAT_KLINE_ADD)
        j->rc = yard_klines_add(dir, &j->k);
    else if (j->sub == YARD_CHAT_KLINE_DEL)
        j->rc = yard_klines_remove(dir, j->k.mask);
    if (j->rc < 0 && j->rc != -ENOENT)
        yard_log_err("chat: %s/klines: %s", dir, strerror(-j->rc));
    j->gen = yard_chat_store_klines_gen(j->store);
    int rc = yard_klines_load(dir, &j->list, &j->n);
    j->listed = rc == 0;
    if (rc == -EINVAL)
        yard_log_err("chat: %s/klines has a line that is not a K-line (yard-chat kline list "
                     "--data %s names it)",
                     dir, dir);
    else if (rc < 0)
        yard_log_err("chat: %s/klines: %s", dir, strerror(-rc));
    if (rc < 0 && j->sub == YARD_CHAT_KLINE_LOAD)
        j->rc = rc;
}

void yard_chat_store_run(void *req)
{
    switch (*(enum yard_chat_op *)req) {
    case YARD_CHAT_AUTH:
        auth_run(req);
        break;
    case YARD_CHAT_NICK:
        nick_run(req);
        break;
    case YARD_CHAT_POST:
        post_run(req);
        break;
    case YARD_CHAT_READ:
        read_run(req);
        break;
    case YARD_CHAT_REPLAY:
        replay_run(req);
        break;
    case YARD_CHAT_HISTORY:
        history_run(req);
        break;
    case YARD_CHAT_KLINE:
        kline_run(req);
        break;
    }
}
