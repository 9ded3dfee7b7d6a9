/* CHATHISTORY and read markers (history.h). */
#define _DEFAULT_SOURCE /* strptime */
#define _XOPEN_SOURCE 700 /* strptime */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "history.h"
#include "relay.h"
#include "session.h"
#include "yard/log.h"

/* The account's marker of target (casefolded): "timestamp=..." or "*". */
/* A guest's marker of key: its slot, or NULL. */
static struct guest_marker *guest_marker(struct session *s, const char *key)
{
    for (unsigned i = 0; i < CHAT_GUEST_MARKERS; i++)
        if (s->markers[i].key[0] && !strcmp(s->markers[i].key, key))
            return &s->markers[i];
    return NULL;
}

void chat_marker_text(struct chat_app *app, struct session *s, const char *key, char *out,
                      size_t cap)
{
    bool known = false;
    uint64_t ns = 0;
    if (s->guest) {
        struct guest_marker *g = guest_marker(s, key);
        known = g != NULL;
        ns = g ? (uint64_t)g->ts_ns : 0;
    } else {
        ns = chat_pos_get(app->cs, s->account_key, MARKER_CLIENT, key, &known);
    }
    if (!known || !ns) {
        snprintf(out, cap, "*");
        return;
    }
    char t[40];
    chat_format_time(t, sizeof t, (int64_t)ns);
    snprintf(out, cap, "timestamp=%s", t);
}

/* The next piece of a CHATHISTORY (the store reads one at a time): at
 * once while the client has tokens, else when it has one again (the
 * timer), so that a request reads no faster than the price allows. */
void chat_history_go_on(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    double rate = app->set->flood_rate;
    chat_refill(app, s, fx->now_ns);
    if (s->state == ST_READY && rate > 0 && s->in.tokens < 1) {
        s->in.hist_paused = true;
        yard_fx_wake_at(fx, fx->now_ns + (uint64_t)((1 - s->in.tokens) * 1e9 / rate));
        yard_fx_pause_input(fx);
        return;
    }
    yard_fx_scan(fx, yard_chat_store_run, &s->hist);
}

/* A piece is done: its reads are paid; the next one, or the answer: a
 * chathistory batch (with batch; the lines alone without). */
void chat_history_done(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    struct yard_chat_history *j = &s->hist;
    /* Its price: the records each piece read to find the answer (a
     * TARGETS window is read whole), then the lines of the answer. */
    s->in.tokens -= (double)j->read / CHAT_READS_PER_TOKEN;
    if (j->more) {
        chat_history_go_on(app, s, fx);
        return;
    }
    unsigned long lines = j->rc < 0 ? 1 : j->sub == YARD_CHAT_HIST_TARGETS ? j->ntargets : j->n;
    chat_charge(s, chat_lines_price(lines));
    if (j->rc < 0) {
        yard_log_err("chat: CHATHISTORY of %s for %s: %s", j->name, s->account, strerror(-j->rc));
        chat_sendf(fx, ":" SERVER " FAIL CHATHISTORY MESSAGE_ERROR %s :The history cannot be read "
                       "now",
                   j->name);
    } else if (j->sub == YARD_CHAT_HIST_TARGETS) { /* oldest of the latest first */
        char ref[32] = "";
        if (s->caps & CAP_BATCH) {
            snprintf(ref, sizeof ref, "h%llu", (unsigned long long)++s->batches);
            chat_sendf(fx, ":" SERVER " BATCH +%s draft/chathistory-targets", ref);
        }
        for (unsigned i = j->ntargets; i-- > 0;) {
            char t[40];
            chat_format_time(t, sizeof t, j->targets[i].latest_ns);
            chat_sendf(fx, "%s%s%s:" SERVER " CHATHISTORY TARGETS %s %s", ref[0] ? "@batch=" : "",
                       ref, ref[0] ? " " : "", j->targets[i].name, t);
        }
        if (ref[0])
            chat_sendf(fx, ":" SERVER " BATCH -%s", ref);
    } else {
        char ref[32] = "";
        if (s->caps & CAP_BATCH) {
            snprintf(ref, sizeof ref, "h%llu", (unsigned long long)++s->batches);
            chat_sendf(fx, ":" SERVER " BATCH +%s chathistory %s", ref, j->name);
        }
        for (unsigned i = 0; i < j->n; i++) {
            yard_chatlog_rec_t r;
            if (yard_logrec_decode(j->recs + j->at[i], j->recs_len - j->at[i], &r) !=
                YARD_LOGREC_COMPLETE)
                continue;
            yard_chat_from_t from = yard_chat_from(&r);
            chat_relay(fx, s, &r, &from, ref);
        }
        if (ref[0])
            chat_sendf(fx, ":" SERVER " BATCH -%s", ref);
    }
    free(j->recs);
    free(j->at);
    free(j->chans);
    free(j->targets);
    j->recs = NULL;
    j->at = NULL;
    j->chans = NULL;
    j->targets = NULL;
    j->recs_cap = 0;
}

/* msgid=N, timestamp=YYYY-MM-DDThh:mm:ss[.sss]Z, or * (when star). */
/* Days from 1970-01-01 to year-month-day of the proleptic Gregorian
 * calendar (negative before it): whole 400-year eras of 146,097 days from
 * a year that starts in March, so that the leap day ends a year. */
static int64_t days_since_epoch(int64_t year, int month, int day)
{
    int64_t y = month <= 2 ? year - 1 : year;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t year_of_era = y - era * 400;                                 /* 0..399 */
    int64_t day_of_year = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
    int64_t day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    return era * 146097 + day_of_era - 719468; /* 719468: 0000-03-01 to 1970-01-01 */
}

static bool hist_parse_ref(const char *t, bool star, struct yard_chat_hist_ref *r)
{
    memset(r, 0, sizeof *r);
    if (star && !strcmp(t, "*")) {
        r->any = true;
        return true;
    }
    if (!strncmp(t, "msgid=", 6)) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(t + 6, &end, 10);
        r->id = v;
        return !errno && *end == 0 && end != t + 6 && v > 0;
    }
    if (strncmp(t, "timestamp=", 10) != 0)
        return false;
    struct tm tm = {0};
    const char *p = strptime(t + 10, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p)
        return false;
    long ms = 0;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 3)
                ms = ms * 10 + (*p - '0');
        for (; digits < 3 && digits > 0; digits++)
            ms *= 10;
    }
    if (strcmp(p, "Z") != 0)
        return false;
    /* The log's times are int64 nanoseconds (1677-09-21 to 2262-04-11): a
     * time outside them is no reference, not an overflow (the check of
     * secs below takes the rest of the years' ends). Counted here in 64
     * bits, not with timegm, whose time_t is 32 bits on i386. */
    int64_t year = (int64_t)tm.tm_year + 1900;
    if (year < 1678 || year > 2262)
        return false;
    int64_t secs = days_since_epoch(year, tm.tm_mon + 1, tm.tm_mday) * 86400 +
                   tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec;
    if (secs <= INT64_MIN / 1000000000 || secs >= INT64_MAX / 1000000000)
        return false;
    r->by_time = true;
    r->ts_ns = secs * 1000000000 + (int64_t)ms * 1000000;
    return true;
}

/* MARKREAD target [timestamp=T]: the account's read marker of target, or
 * move it forward (never back). A move goes through the log, so every
 * connection of the account hears it, in any process. A guest's markers
 * are its connection's (it has no other), answered at once. */
void chat_cmd_markread(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    if (!m->n) {
        chat_sendf(fx, ":" SERVER " FAIL MARKREAD NEED_MORE_PARAMS :Give a channel or nick, and "
                       "optionally timestamp=YYYY-MM-DDThh:mm:ss.sssZ");
        return;
    }
    const char *target = m->params[0];
    size_t tn = strlen(target);
    bool chan = target[0] == '#' || target[0] == '&';
    if (!tn || tn > CHAT_CHAN_MAX || (chan ? !chat_valid_channel(target)
                                           : !yard_account_name_valid(target, tn))) {
        chat_sendf(fx, ":" SERVER " FAIL MARKREAD INVALID_PARAMS %s :Give a channel or nick, and "
                       "optionally timestamp=YYYY-MM-DDThh:mm:ss.sssZ",
                   tn ? target : "*");
        return;
    }
    char key[CHAT_CHAN_MAX + 1], now[80];
    chat_casefold(key, target, tn);
    if (m->n < 2) {
        chat_marker_text(app, s, key, now, sizeof now);
        chat_sendf(fx, ":" SERVER " MARKREAD %s %s", target, now);
        return;
    }
    struct yard_chat_hist_ref ref;
    if (!hist_parse_ref(m->params[1], false, &ref) || !ref.by_time || ref.ts_ns <= 0) {
        chat_sendf(fx, ":" SERVER " FAIL MARKREAD INVALID_PARAMS %s :The timestamp is "
                       "timestamp=YYYY-MM-DDThh:mm:ss.sssZ",
                   target);
        return;
    }
    if (s->guest) {
        struct guest_marker *g = guest_marker(s, key);
        if (!g) { /* a new one: a free slot, or the oldest one's */
            g = &s->markers[s->marker_next];
            s->marker_next = (s->marker_next + 1) % CHAT_GUEST_MARKERS;
            snprintf(g->key, sizeof g->key, "%s", key);
            g->ts_ns = 0;
        }
        if (ref.ts_ns > g->ts_ns)
            g->ts_ns = ref.ts_ns;
        chat_marker_text(app, s, key, now, sizeof now);
        chat_sendf(fx, ":" SERVER " MARKREAD %s %s", target, now);
        return;
    }
    bool known;
    uint64_t was = chat_pos_get(app->cs, s->account_key, MARKER_CLIENT, key, &known);
    if (known && was >= (uint64_t)ref.ts_ns) { /* not back: the current one is the answer */
        chat_marker_text(app, s, key, now, sizeof now);
        chat_sendf(fx, ":" SERVER " MARKREAD %s %s", target, now);
        return;
    }
    chat_pos_set(app->cs, s->account_key, MARKER_CLIENT, key, (uint64_t)ref.ts_ns);
    char t[40];
    chat_format_time(t, sizeof t, ref.ts_ns);
    yard_chatlog_entry_t ev;
    chat_presence_ev(&ev, YARD_LOGREC_READ, s->sender, target, t);
    chat_presence_put(app, &ev, 1);
}

void chat_cmd_chathistory(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    static const char *const subs[] = {"LATEST", "BEFORE", "AFTER", "AROUND", "BETWEEN",
                                       "TARGETS"};
    const char *sub = m->n ? m->params[0] : "";
    int k = 0;
    while (k < 6 && strcasecmp(sub, subs[k]) != 0)
        k++;
    if (k == 6) {
        chat_sendf(fx, ":" SERVER " FAIL CHATHISTORY UNKNOWN_COMMAND %s :Unknown subcommand",
                   m->n ? sub : "*");
        return;
    }
    int need = k == YARD_CHAT_HIST_BETWEEN ? 5 : 4;
    struct yard_chat_history *j = &s->hist;
    memset(j, 0, sizeof *j);
    j->op = YARD_CHAT_HISTORY;
    if (k == YARD_CHAT_HIST_TARGETS) { /* TARGETS timestamp=T1 timestamp=T2 limit */
        char *tend = NULL;
        long tl = m->n >= 4 ? strtol(m->params[3], &tend, 10) : 0;
        if (m->n < 4 || !hist_parse_ref(m->params[1], false, &j->a) || !j->a.by_time ||
            !hist_parse_ref(m->params[2], false, &j->b) || !j->b.by_time || !tend || *tend ||
            tl < 1) {
            chat_sendf(fx, ":" SERVER " FAIL CHATHISTORY INVALID_PARAMS TARGETS :Give two "
                           "timestamps and a limit of 1 to %d",
                       YARD_CHAT_HISTORY_MAX);
            return;
        }
        /* The channels one is in now: only their history is one's to list. */
        unsigned cap = chat_member_channels(app->cs, s->slot) + 1;
        j->chans = malloc(cap * sizeof *j->chans);
        if (j->chans)
            j->nchans = chat_member_channel_keys(app->cs, s->slot, j->chans, cap);
        if (!j->chans) {
            fx->nomem = true;
            return;
        }
        j->store = app->store;
        j->sub = k;
        j->limit = tl > YARD_CHAT_HISTORY_MAX ? YARD_CHAT_HISTORY_MAX : (unsigned)tl;
        strcpy(j->me, s->guest ? "" : s->account_key); /* a guest: channels only */
        strcpy(j->name, "*");
        yard_fx_scan(fx, yard_chat_store_run, j);
        return;
    }
    char *end = NULL;
    long limit = m->n >= need ? strtol(m->params[need - 1], &end, 10) : 0;
    bool star = k == YARD_CHAT_HIST_LATEST || k == YARD_CHAT_HIST_BETWEEN;
    if (m->n < need || !hist_parse_ref(m->params[2], star, &j->a) ||
        (k == YARD_CHAT_HIST_BETWEEN && !hist_parse_ref(m->params[3], true, &j->b)) || !end || *end ||
        limit < 1 || (j->a.any && k != YARD_CHAT_HIST_LATEST)) {
        chat_sendf(fx, ":" SERVER " FAIL CHATHISTORY INVALID_PARAMS %s :Give a target, %s and a "
                       "limit of 1 to %d",
                   subs[k], k == YARD_CHAT_HIST_BETWEEN ? "two references" : "a reference", YARD_CHAT_HISTORY_MAX);
        return;
    }
    const char *target = m->params[1];
    size_t tn = strlen(target);
    j->channel = target[0] == '#' || target[0] == '&';
    bool ok = tn <= CHAT_CHAN_MAX;
    if (ok && j->channel) {
        struct chat_chan_view v;
        ok = chat_channel_lookup(app->cs, target, tn, s->slot, 0, &v) >= 0 && v.in;
    } else if (ok) { /* a private conversation: an account's (a guest has none kept) */
        ok = !s->guest && yard_account_name_valid(target, tn);
    }
    if (!ok) { /* a channel one is not in looks like one that does not exist */
        chat_sendf(fx, ":" SERVER " FAIL CHATHISTORY INVALID_TARGET %s %s :No such channel or "
                       "nick, or you are not in that channel",
                   subs[k], target);
        return;
    }
    j->store = app->store;
    j->sub = k;
    j->limit = limit > YARD_CHAT_HISTORY_MAX ? YARD_CHAT_HISTORY_MAX : (unsigned)limit;
    j->events = (s->caps & CAP_EVENT_PLAYBACK) != 0;
    memcpy(j->name, target, tn + 1);
    chat_casefold(j->key, target, tn);
    if (!j->channel) { /* a connected user's nick names its account */
        struct chat_member who;
        if (chat_member_lookup(app->cs, j->key, &who) >= 0)
            strcpy(j->key, who.key);
    }
    strcpy(j->me, s->account_key);
    yard_fx_scan(fx, yard_chat_store_run, j);
}
