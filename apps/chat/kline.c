/* Operator bans: K-lines (kline.h). */
#include <errno.h>
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

bool chat_kline_checking(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    if (s->reg.kline_checked)
        return false;
    if (s->kline)
        return true;
    if (!kline_job(app, s, fx, YARD_CHAT_KLINE_LOAD, NULL))
        s->reg.kline_checked = true; /* nothing to check with: let it in, as an unreadable file does */
    return !s->reg.kline_checked;
}

/* The K-line among list that applies to who at now_s, or NULL. */
static const yard_kline_t *kline_matching(const yard_kline_t *list, size_t n,
                                          const struct chat_mask_subject *who, int64_t now_s)
{
    for (size_t i = 0; i < n; i++)
        if ((!list[i].expires_s || list[i].expires_s > now_s) &&
            chat_mask_matches(list[i].mask, who))
            return &list[i];
    return NULL;
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

/* The registration's check: 465 and closed, or on with the registration. */
static void registration_checked(struct chat_app *app, struct session *s,
                                 const struct yard_chat_kline *j, yard_fx_t *fx)
{
    /* An account's name, or the guest's nick to be (its member slot is not taken yet). */
    bool account = s->reg.sasl_done;
    struct chat_mask_subject who = {.nick = account ? s->account : s->reg.nick, .user = s->user,
                                    .addr = &s->login.addr, .guest = !account};
    const yard_kline_t *k = j->rc < 0 ? NULL : kline_matching(j->list, j->n, &who, wall_s(fx));
    if (k) {
        refuse(s, fx, k);
        return;
    }
    s->reg.kline_checked = true;
    chat_try_register(app, s, fx);
}

void chat_kline_recheck(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    s->kline_recheck = kline_job(app, s, fx, YARD_CHAT_KLINE_LOAD, NULL);
}

/* A guest that logged in: as the account now, is it K-lined? */
static void recheck_done(struct session *s, const struct yard_chat_kline *j, yard_fx_t *fx)
{
    s->kline_recheck = false;
    struct chat_mask_subject who;
    chat_mask_subject_of(s, &who);
    const yard_kline_t *k = j->rc < 0 ? NULL : kline_matching(j->list, j->n, &who, wall_s(fx));
    if (k)
        refuse(s, fx, k);
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
    chat_lock(app->cs);
    unsigned end = chat_member_end(app->cs);
    chat_unlock(app->cs);
    for (unsigned i = 0; i < end; i++) {
        chat_lock(app->cs);
        const struct chat_member *mb = chat_member_at(app->cs, (int)i);
        chat_addr_t from;
        memcpy(from.b, mb->from, sizeof from.b);
        struct chat_mask_subject who = {.nick = mb->account, .user = mb->user, .addr = &from,
                                        .guest = mb->guest};
        bool hit = mb->used && !mb->killed && chat_mask_matches(k->mask, &who);
        uint64_t serial = mb->serial;
        chat_unlock(app->cs);
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
    if (j->sub == YARD_CHAT_KLINE_LOAD && s->state != ST_READY) {
        registration_checked(app, s, j, fx);
    } else if (j->sub == YARD_CHAT_KLINE_LOAD && s->kline_recheck) {
        recheck_done(s, j, fx);
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
