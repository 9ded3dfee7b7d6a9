/* Operator bans: K-lines (kline.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bans.h"
#include "kline.h"
#include "oper.h"
#include "register.h"
#include "relay.h"
#include "yard/clock.h"
#include "yard/log.h"

#define NO_PRIVILEGES ":Permission Denied- You're not an IRC operator"
#define KLINE_KILLS_AT_ONCE 32 /* kill records deferred in one go */

static int64_t wall_s(const yard_fx_t *fx) { return fx->wall_ns / (int64_t)YARD_NS_PER_S; }

/* The K-lines in force, a copy of DIR/klines in the shared region (so
 * that every process of every model sees the same one), read by each
 * registration's check without I/O. It is replaced by every K-line
 * request's answer (the file read after the change, or alone), and is
 * stale when DIR/klines.gen has moved past the generation it was read at
 * (`yard-chat kline` changed the file, or another server on the same
 * directory did): the next check then reloads it with a job. */
struct chat_klines {
    pthread_mutex_t mu;
    bool loaded;
    uint64_t gen; /* DIR/klines.gen's number when list was read */
    unsigned n;
    yard_kline_t list[YARD_KLINES_MAX];
};

/* A request's list, if the file was read, replaces the copy, unless the
 * copy is newer (two answers can come back out of order). */
static void klines_install(struct chat_app *app, const struct yard_chat_kline *j)
{
    struct chat_klines *kl = app->klines;
    if (!j->listed)
        return;
    yard_shm_mutex_lock(&kl->mu);
    if (!kl->loaded || j->gen >= kl->gen) {
        kl->n = j->n < YARD_KLINES_MAX ? (unsigned)j->n : YARD_KLINES_MAX;
        if (kl->n)
            memcpy(kl->list, j->list, kl->n * sizeof *kl->list);
        kl->gen = j->gen;
        kl->loaded = true;
    }
    pthread_mutex_unlock(&kl->mu);
}

/* One look at the copy, under its lock once: the K-line that applies to
 * who at now_s into out (false when none does), and, when stale is not
 * NULL, whether DIR/klines.gen has moved past the copy. */
static bool klines_lookup(struct chat_app *app, const struct chat_mask_subject *who,
                          int64_t now_s, yard_kline_t *out, bool *stale)
{
    struct chat_klines *kl = app->klines;
    uint64_t now_gen = stale ? yard_chat_store_klines_gen(app->store) : 0;
    bool hit = false;
    yard_shm_mutex_lock(&kl->mu);
    if (stale)
        *stale = !kl->loaded || kl->gen != now_gen;
    for (unsigned i = 0; i < kl->n && !hit; i++) {
        const yard_kline_t *k = &kl->list[i];
        if ((!k->expires_s || k->expires_s > now_s) && chat_mask_matches(k->mask, who)) {
            *out = *k;
            hit = true;
        }
    }
    pthread_mutex_unlock(&kl->mu);
    return hit;
}

int chat_klines_init(struct chat_app *app, yard_shm_t *shm, char *err, size_t errlen)
{
    app->klines = yard_shm_alloc(shm, sizeof *app->klines);
    if (!app->klines) {
        snprintf(err, errlen, "shared region too small");
        return -1;
    }
    int rc = yard_shm_mutex_init(&app->klines->mu);
    if (rc < 0) {
        snprintf(err, errlen, "the K-lines' mutex: %s", strerror(-rc));
        return -1;
    }
    /* Loaded at start, before any fork: the store's request, run here. */
    struct yard_chat_kline j = {.op = YARD_CHAT_KLINE, .store = app->store,
                                .sub = YARD_CHAT_KLINE_LOAD};
    yard_chat_store_run(&j);
    klines_install(app, &j);
    free(j.list);
    return 0;
}

/* A K-line's job for this connection (one at a time, as every job). */
static bool kline_job(struct chat_app *app, struct session *s, yard_fx_t *fx, int sub,
                      const yard_kline_t *k)
{
    struct yard_chat_kline *j = calloc(1, sizeof *j);
    if (!j) {
        yard_log_err("chat: out of memory for a K-line request");
        return false;
    }
    j->op = YARD_CHAT_KLINE;
    j->store = app->store;
    j->sub = sub;
    if (k)
        j->k = *k;
    s->kline = j;
    yard_fx_io(fx, yard_chat_store_run, j);
    return true;
}

/* A K-line applies: 465, and closed (its channels hear it as the quit's
 * reason). */
static void refuse(struct session *s, yard_fx_t *fx, const yard_kline_t *k)
{
    snprintf(s->quit_reason, sizeof s->quit_reason, CHAT_KLINED "%s", k->reason);
    chat_numeric(fx, s, 465, ":You are banned from this server (%s)", s->quit_reason);
    chat_sendf(fx, "ERROR :Closing Link: %s", s->quit_reason);
    yard_fx_close(fx, NULL);
}

/* Who a registration is, to the K-lines: an account's name, or the guest's
 * nick to be (its member slot is not taken yet). */
static void registration_subject(const struct session *s, struct chat_mask_subject *who)
{
    bool account = s->reg.sasl_done;
    *who = (struct chat_mask_subject){.nick = account ? s->account : s->reg.nick,
                                      .user = s->user, .addr = &s->login.addr, .guest = !account};
}

/* Does a K-line of the copy apply to who (then 465 and closed)? stale as
 * klines_lookup's: when the copy is stale and a reload could be started,
 * the copy does not decide (the reload's answer will). */
static bool refused(struct chat_app *app, struct session *s, yard_fx_t *fx,
                    const struct chat_mask_subject *who, bool *stale)
{
    yard_kline_t k;
    bool hit = klines_lookup(app, who, wall_s(fx), &k, stale);
    if (stale && *stale && kline_job(app, s, fx, YARD_CHAT_KLINE_LOAD, NULL))
        return false;
    if (stale)
        *stale = false;
    if (hit)
        refuse(s, fx, &k);
    return hit;
}

bool chat_kline_checking(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    if (s->reg.kline_checked)
        return false;
    if (s->kline)
        return true;
    /* A stale copy is reloaded first (a job, whose answer comes back to
     * registration_checked); without memory for a job, the stale copy
     * decides. */
    struct chat_mask_subject who;
    registration_subject(s, &who);
    bool reloading;
    if (refused(app, s, fx, &who, &reloading) || reloading)
        return true;
    s->reg.kline_checked = true;
    return false;
}

/* The copy reloaded for a registration: 465 and closed, or on with it. */
static void registration_checked(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    struct chat_mask_subject who;
    registration_subject(s, &who);
    if (refused(app, s, fx, &who, NULL))
        return;
    s->reg.kline_checked = true;
    chat_try_register(app, s, fx);
}

/* A guest that logged in: as the account now, is it K-lined? With
 * reloading, a stale copy is reloaded first and the answer decides. */
static void recheck(struct chat_app *app, struct session *s, yard_fx_t *fx, bool *reloading)
{
    struct chat_mask_subject who;
    chat_mask_subject_of(s, &who);
    refused(app, s, fx, &who, reloading);
}

void chat_kline_recheck(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    bool reloading;
    recheck(app, s, fx, &reloading);
    s->kline_recheck = reloading;
}

/* STATS k: each K-line in force, 216 MASK EXPIRES BY :REASON, then 219. */
static void stats_listed(struct session *s, const struct yard_chat_kline *j, yard_fx_t *fx)
{
    unsigned shown = 0;
    for (size_t i = 0; j->rc >= 0 && i < j->n; i++) {
        const yard_kline_t *k = &j->list[i];
        if (k->expires_s && k->expires_s <= wall_s(fx))
            continue;
        chat_numeric(fx, s, 216, "K %s %lld %s :%s", k->mask, (long long)k->expires_s, k->by,
                     k->reason);
        shown++;
    }
    chat_numeric(fx, s, 219, "k :End of /STATS report");
    chat_charge(s, chat_lines_price(shown + 1));
}

/* A new K-line's matches among the connected: each closed by a kill
 * record (relayed in every process, as KILL's). */
static unsigned kline_apply(struct chat_app *app, struct session *s, const yard_kline_t *k)
{
    yard_chatlog_entry_t ev[KLINE_KILLS_AT_ONCE];
    unsigned nev = 0, killed = 0;
    char why[YARD_KLINE_REASON_MAX + 16];
    snprintf(why, sizeof why, CHAT_KLINED "%s", k->reason);
    unsigned end = chat_member_slots(app->cs);
    for (unsigned i = 0; i < end; i++) {
        struct chat_member mb;
        if (!chat_member_copy(app->cs, (int)i, &mb) || mb.killed)
            continue;
        chat_addr_t from;
        memcpy(from.b, mb.from, sizeof from.b);
        struct chat_mask_subject who = {.nick = mb.account, .user = mb.user, .addr = &from,
                                        .guest = mb.guest};
        bool hit = chat_mask_matches(k->mask, &who);
        uint64_t serial = mb.serial;
        if (!hit)
            continue;
        char target[YARD_LOGREC_NAME_MAX + 1];
        snprintf(target, sizeof target, CHAT_MEMBER_TARGET, (int)i, (unsigned long long)serial);
        chat_presence_ev(&ev[nev++], YARD_LOGREC_KILL, s->sender, target, why);
        killed++;
        if (nev == KLINE_KILLS_AT_ONCE) {
            chat_presence_put(app, ev, nev);
            nev = 0;
        }
    }
    if (nev)
        chat_presence_put(app, ev, nev);
    return killed;
}

void chat_kline_done(struct chat_app *app, struct session *s, struct yard_chat_kline *j,
                     yard_fx_t *fx)
{
    s->kline = NULL;
    klines_install(app, j);
    if (j->sub == YARD_CHAT_KLINE_LOAD && s->state != ST_READY) {
        registration_checked(app, s, fx);
    } else if (j->sub == YARD_CHAT_KLINE_LOAD && s->kline_recheck) {
        s->kline_recheck = false;
        recheck(app, s, fx, NULL);
    } else if (j->sub == YARD_CHAT_KLINE_LOAD) {
        stats_listed(s, j, fx);
    } else if (j->rc == -ENOENT) {
        chat_sendf(fx, ":" SERVER " NOTICE %s :No K-line for %s", s->account, j->k.mask);
    } else if (j->rc < 0) {
        chat_sendf(fx, ":" SERVER " NOTICE %s :The K-lines could not be changed: %s", s->account,
                   strerror(-j->rc));
    } else if (j->sub == YARD_CHAT_KLINE_DEL) {
        chat_sendf(fx, ":" SERVER " NOTICE %s :Removed the K-line for %s", s->account, j->k.mask);
    } else {
        unsigned killed = kline_apply(app, s, &j->k);
        char until[64] = "for good";
        if (j->k.expires_s) {
            char at[40];
            chat_format_time(at, sizeof at, j->k.expires_s * (int64_t)YARD_NS_PER_S);
            snprintf(until, sizeof until, "until %s", at);
        }
        chat_sendf(fx, ":" SERVER " NOTICE %s :Added a K-line for %s %s (%s); connections closed: %u",
                   s->account, j->k.mask, until, j->k.reason, killed);
    }
    free(j->list);
    free(j);
}

/* A KLINE or UNKLINE mask normalized into out, or the refusal told. */
static bool kline_mask(struct session *s, yard_fx_t *fx, const char *given,
                       char out[YARD_KLINE_MASK_MAX + 1])
{
    if (yard_kline_normalize(given, out))
        return true;
    chat_sendf(fx, ":" SERVER " NOTICE %s :Not a K-line mask: %s (an account, $a:account, "
                   "nick!user@host or an address, at most %d characters)",
               s->account, given, YARD_KLINE_MASK_MAX);
    return false;
}

void chat_cmd_kline(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    if (!s->umode_o) {
        chat_numeric(fx, s, 481, NO_PRIVILEGES);
        return;
    }
    int at = 0;
    uint64_t dur_ns = 0;
    /* A duration first (no mask starts with a digit): a bare number is in
     * minutes, as other servers take it; 30s, 2h, 7d are read too. */
    if (m->params[0][0] >= '0' && m->params[0][0] <= '9') {
        if (yard_parse_duration_ns(m->params[0], 60 * YARD_NS_PER_S, &dur_ns) < 0 ||
            dur_ns < YARD_NS_PER_S) {
            chat_sendf(fx, ":" SERVER " NOTICE %s :Not a K-line duration: %s (minutes, or "
                           "30s, 2h, 7d)", s->account, m->params[0]);
            return;
        }
        at = 1;
    }
    if (at >= m->n) {
        chat_numeric(fx, s, 461, "KLINE :Not enough parameters");
        return;
    }
    yard_kline_t k;
    memset(&k, 0, sizeof k);
    if (!kline_mask(s, fx, m->params[at], k.mask))
        return;
    const char *reason = at + 1 < m->n && m->params[at + 1][0] ? m->params[at + 1]
                                                               : "No reason given";
    size_t rn = chat_utf8_cut(reason, strlen(reason), YARD_KLINE_REASON_MAX);
    memcpy(k.reason, reason, rn);
    for (size_t i = 0; i < rn; i++) /* IRC's formatting codes: the file's reason is plain text */
        if ((unsigned char)k.reason[i] < ' ' || k.reason[i] == 0x7f)
            k.reason[i] = ' ';
    k.set_s = wall_s(fx);
    k.expires_s = dur_ns ? k.set_s + (int64_t)(dur_ns / YARD_NS_PER_S) : 0;
    snprintf(k.by, sizeof k.by, "%s", s->account);
    kline_job(app, s, fx, YARD_CHAT_KLINE_ADD, &k);
}

void chat_cmd_unkline(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    if (!s->umode_o) {
        chat_numeric(fx, s, 481, NO_PRIVILEGES);
        return;
    }
    yard_kline_t k;
    memset(&k, 0, sizeof k);
    if (kline_mask(s, fx, m->params[0], k.mask))
        kline_job(app, s, fx, YARD_CHAT_KLINE_DEL, &k);
}

void chat_cmd_stats(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    char q = m->n ? m->params[0][0] : 0;
    if (q != 'k' && q != 'K') {
        chat_numeric(fx, s, 219, "%s :End of /STATS report", m->n ? m->params[0] : "*");
        return;
    }
    if (!s->umode_o) {
        chat_numeric(fx, s, 481, NO_PRIVILEGES);
        return;
    }
    kline_job(app, s, fx, YARD_CHAT_KLINE_LOAD, NULL);
}
