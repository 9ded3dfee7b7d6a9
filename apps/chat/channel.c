/* Channels and membership: JOIN, PART, NAMES, TOPIC (channel.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bans.h"
#include "channel.h"
#include "history.h"
#include "message.h"
#include "query.h"
#include "relay.h"
#include "session.h"
#include "yard/clock.h"
#include "yard/log.h"

static int name_cmp(const void *a, const void *b)
{
    return strcmp(((const struct chat_name *)a)->key, ((const struct chat_name *)b)->key);
}

/* chat_members_of's walk: the members of channel c into v (room for cap). */
struct members_walk {
    int c;
    struct chat_name *v;
    size_t cap, n;
};

static bool member_of(chat_state_t *cs, int slot, struct chat_member *m, void *ctx)
{
    struct members_walk *w = ctx;
    if (w->n == w->cap)
        return false;
    if (!chat_is_in(cs, slot, w->c))
        return true;
    struct chat_name *e = &w->v[w->n++];
    memcpy(e->key, m->key, sizeof e->key);
    memcpy(e->account, m->account, sizeof e->account);
    memcpy(e->nick, m->nick, sizeof e->nick);
    return true;
}

struct chat_name *chat_members_of(struct chat_app *app, int c, size_t *n, bool *nomem)
{
    *n = 0;
    *nomem = false;
    /* Room for those in it now, taken before the walk (one who joins
     * meanwhile may be left out, as if it came just after). */
    struct chat_chan_view view;
    size_t cap = chat_channel_view(app->cs, c, -1, 0, &view) ? view.members : 0;
    struct members_walk w = {.c = c, .v = cap ? malloc(cap * sizeof *w.v) : NULL, .cap = cap};
    if (w.v)
        chat_members_each(app->cs, member_of, &w);
    struct chat_name *v = w.v;
    *n = w.n;
    if (cap && !v) {
        *nomem = true;
        return NULL;
    }
    /* Sorted by the casefolded account, the first of each run of one
     * account kept. */
    if (*n)
        qsort(v, *n, sizeof *v, name_cmp);
    size_t out = 0;
    for (size_t i = 0; i < *n; i++)
        if (!out || strcmp(v[i].key, v[out - 1].key) != 0)
            v[out++] = v[i];
    *n = out;
    return v;
}

/* A member's prefix in NAMES and WHO: the highest rank's, or with
 * multi-prefix every rank's. */
const char *chat_rank_prefix(int rank, const struct session *s)
{
    bool all = s->caps & CAP_MULTI_PREFIX;
    if (rank & CHAT_RANK_OP)
        return all && (rank & CHAT_RANK_VOICE) ? "@+" : "@";
    return rank & CHAT_RANK_VOICE ? "+" : "";
}

/* The ranks of channel c's record (none when it has no record). */
void chat_ranks_of(struct chat_app *app, int c, struct chat_chanrec *rec)
{
    char name[CHAT_CHAN_MAX + 1];
    chat_channel_record(app->cs, c, name, rec); /* without a record: no ranks */
}

int chat_rank_in(struct chat_app *app, int c, const struct chat_chanrec *rec, const char *name)
{
    char key[CHAT_NAME_MAX + 1];
    chat_casefold(key, name, strnlen(name, CHAT_NAME_MAX));
    int guest = chat_guest_rank_in(app->cs, c, key);
    return guest >= 0 ? guest : chat_rank_of(rec, key);
}

/* The 353 lines of channel c (none when it is empty): '=', or '@' for a
 * secret channel. */
static void names_list(struct chat_app *app, struct session *s, yard_fx_t *fx, int c,
                       const char *name)
{
    char kind = chat_channel_secret(app, c) ? '@' : '=';
    size_t n;
    bool nomem;
    struct chat_name *who_is = chat_members_of(app, c, &n, &nomem);
    if (nomem)
        fx->nomem = true;
    struct chat_chanrec rec;
    chat_ranks_of(app, c, &rec);
    char line[LINE_MAX_MSG];
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        const char *pre = chat_rank_prefix(chat_rank_in(app, c, &rec, who_is[i].key), s);
        char full[CHAT_NAME_MAX + CHAT_USER_MAX + sizeof SERVER + 3];
        const char *entry = who_is[i].nick;
        if (s->caps & CAP_USERHOST_IN_NAMES) { /* nick!user@host */
            struct presence p;
            chat_presence_of(app, who_is[i].account, &p, NULL, 0);
            snprintf(full, sizeof full, "%s!%s@" SERVER, who_is[i].nick,
                     p.online ? p.user : who_is[i].nick);
            entry = full;
        }
        size_t pn = strlen(pre), an = strlen(entry);
        if (len + pn + an + 1 > 400) {
            chat_numeric(fx, s, 353, "%c %s :%.*s", kind, name, (int)len, line);
            len = 0;
        }
        if (len)
            line[len++] = ' ';
        memcpy(line + len, pre, pn);
        memcpy(line + len + pn, entry, an);
        len += pn + an;
    }
    free(who_is);
    if (len)
        chat_numeric(fx, s, 353, "%c %s :%.*s", kind, name, (int)len, line);
}

static void names(struct chat_app *app, struct session *s, yard_fx_t *fx, int c, const char *name)
{
    names_list(app, s, fx, c, name);
    chat_numeric(fx, s, 366, "%s :End of /NAMES list.", name);
}

/* 332 and 333; when there is no topic, 331 to a TOPIC query (asked) and
 * nothing in a JOIN's burst. */
static void topic_reply(struct chat_app *app, struct session *s, yard_fx_t *fx,
                        const char *name, const char *key, bool asked)
{
    char topic[CHAT_TOPIC_MAX + 1], by[CHAT_NAME_MAX + 1];
    int64_t at;
    if (!chat_topic_get(app->cs, key, topic, by, &at)) {
        if (asked)
            chat_numeric(fx, s, 331, "%s :No topic is set", name);
        return;
    }
    chat_numeric(fx, s, 332, "%s :%s", name, topic);
    chat_numeric(fx, s, 333, "%s %s!%s@" SERVER " %lld", name, by, by, (long long)at);
}

/* Replay what this device of the account missed in this channel: the
 * messages after its read position up to what this connection has already
 * relayed (s->relay.seen), the newest replay_max of them. true when a replay job
 * was started (replay_done finishes it). */
static bool replay_start(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *name,
                         const char *key)
{
    bool known;
    uint64_t from = chat_pos_get(app->cs, s->account, s->client, key, &known);
    if (!known || from >= s->relay.seen) {
        chat_pos_set(app->cs, s->account, s->client, key, s->relay.seen);
        return false;
    }
    struct yard_chat_replay *j = &s->rp;
    j->store = app->store;
    snprintf(j->name, sizeof j->name, "%s", name);
    snprintf(j->key, sizeof j->key, "%s", key);
    j->from = from;
    j->upto = s->relay.seen;
    j->max = app->set->replay_max;
    j->op = YARD_CHAT_REPLAY;
    yard_fx_scan(fx, yard_chat_store_run, j);
    return true;
}

static void replay_done(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    struct yard_chat_replay *j = &s->rp;
    if (j->rc == -ENOMEM && !j->total) {
        chat_sendf(fx, ":" SERVER " NOTICE %s :The history of %s cannot be read now; nothing was "
                       "replayed",
                   j->name, j->name);
    } else if (j->rc < 0) {
        yard_log_err("chat: replaying %s for %s: %s", j->name, s->account, strerror(-j->rc));
        chat_sendf(fx, ":" SERVER " NOTICE %s :Part of the history of %s is damaged; what could be "
                       "read is replayed",
                   j->name, j->name);
    }
    if (j->total > j->shown)
        chat_sendf(fx, ":" SERVER " NOTICE %s :%llu older messages of %s were not replayed "
                       "(--replay-max %u)",
                   j->name, (unsigned long long)(j->total - j->shown), j->name, j->max);
    /* With batch, the replay is one chathistory batch (its reference new
     * for this connection, like a CHATHISTORY answer's). */
    char ref[32] = "";
    if ((s->caps & CAP_BATCH) && j->recs_len) {
        snprintf(ref, sizeof ref, "r%llu", (unsigned long long)++s->batches);
        chat_sendf(fx, ":" SERVER " BATCH +%s chathistory %s", ref, j->name);
    }
    yard_chatlog_rec_t r;
    for (size_t at = 0; at < j->recs_len; at += r.len)
        if (yard_logrec_decode(j->recs + at, j->recs_len - at, &r) != YARD_LOGREC_COMPLETE)
            break;
        else {
            yard_chat_from_t from = yard_chat_from(&r);
            chat_relay(fx, s, &r, &from, ref);
        }
    if (ref[0])
        chat_sendf(fx, ":" SERVER " BATCH -%s", ref);
    free(j->recs);
    j->recs = NULL;
    j->recs_len = 0;
    chat_pos_set(app->cs, s->account, s->client, j->key, j->upto);
}

/* How many channels made by guests the table may hold (--guests-channel-share). */
static unsigned guest_channels_max(const struct chat_app *app)
{
    return (unsigned)((uint64_t)app->set->max_channels * app->set->guests_channel_share / 100);
}

/* +R, +b, +i, +k and +l, under the lock: 0 when the account may join the channel
 * (live as c, or else named by fold), or the numeric that refuses it. The
 * channel's operators pass (it is theirs, and a +i channel that emptied
 * would otherwise be closed to everyone for good). */
static int join_refusal(struct chat_app *app, const struct session *s, int c, const char *fold,
                        const char *key_given)
{
    chat_state_t *cs = app->cs;
    struct chat_chanrec rec;
    uint32_t modes = 0, limit = 0;
    const char *want = "";
    if (c >= 0) {
        modes = cs->chans[c].modes;
        limit = cs->chans[c].limit;
        want = cs->chans[c].chkey;
    } else if (chat_chan_get(cs, fold, &rec)) {
        modes = rec.modes;
        limit = rec.limit;
        want = rec.key;
    }
    if ((modes & CHAT_MODE_REG_JOIN) && s->guest)
        return 477;
    if (c < 0 && s->guest && !app->set->guests_create && !chat_chan_get(cs, fold, &rec))
        return 403; /* a new channel, and guests may not make one */
    bool banned = chat_banned(cs, s, c, fold);
    if (!(modes & CHAT_MODE_I) && !want[0] && !limit && !banned)
        return 0;
    if (chat_chan_rank(cs, fold, s->account_key) & CHAT_RANK_OP)
        return 0;
    if (banned)
        return 474;
    if ((modes & CHAT_MODE_I) && !(c >= 0 && chat_invited(cs, c, s->account_key)) &&
        !chat_invex(cs, s, c, fold))
        return 473;
    if (want[0] && (!key_given || strcmp(key_given, want)))
        return 475;
    if (limit && c >= 0 && chat_channel_accounts(cs, c) >= limit)
        return 471;
    return 0;
}

/* A JOIN under the lock (enter_channel): the channel found or made, the
 * limits and modes checked, and the connection in it. */
struct joining {
    struct chat_app *app;
    const struct session *s;
    const char *name, *fold, *key_given; /* fold: name casefolded */
    int64_t now_s;
    /* out: */
    int c;       /* the channel; -2 the table is full, -3 the guests' share is */
    int refused; /* the numeric refusing it, or 0 */
    bool already, over, unranked, first;
    char shown[CHAT_CHAN_MAX + 1], key[CHAT_CHAN_MAX + 1];
};

static void enter_channel(chat_state_t *cs, void *ctx)
{
    struct joining *j = ctx;
    struct chat_app *app = j->app;
    const struct session *s = j->s;
    int c = chat_channel_find(cs, j->name, strlen(j->name), false);
    j->already = c >= 0 && chat_is_in(cs, s->slot, c);
    /* The account's limit counts its channels over all its connections,
     * this one included (a new channel is one more). */
    j->over = !j->already && chat_account_channels(cs, s->account_key, c) + (c < 0) >
                                 app->set->channels_per_account;
    bool open = !j->already && !j->over;
    j->refused = open ? join_refusal(app, s, c, j->fold, j->key_given) : 0;
    bool created = false; /* unranked: a new channel whose record could not be stored */
    if (open && !j->refused && c < 0 && s->guest && cs->guest_chans >= guest_channels_max(app))
        c = -3; /* the guests' share of the table is taken */
    else if (open && !j->refused && c < 0) {
        c = chat_channel_find(cs, j->name, strlen(j->name), true);
        created = c >= 0;
        if (c >= 0)
            j->unranked = !chat_chan_load(cs, c, s->guest ? NULL : s->account_key, j->now_s);
    }
    j->c = c;
    if (j->refused)
        return;
    /* An account with several connections is one member: the others hear
     * of its first connection in, not of the ones after. */
    j->first = c >= 0 && open && !chat_account_in_elsewhere(app, s, c);
    if (c >= 0 && !j->over) {
        chat_set_in(cs, s->slot, c, true);
        chat_channel_joined(cs, c, s->guest, created);
        /* Whoever creates a channel is its operator: an account's rank is
         * in the record chat_chan_load made, a guest's lasts while it is in. */
        if (created && s->guest)
            chat_guest_rank_set(cs, s->slot, c, CHAT_RANK_OP, true);
    }
    if (c >= 0) {
        strcpy(j->shown, cs->chans[c].name);
        strcpy(j->key, cs->chans[c].key);
    }
}

static void join_one(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *name,
                     const char *key_given)
{
    if (!chat_valid_channel(name)) {
        chat_numeric(fx, s, 403, "%s :No such channel", name);
        return;
    }
    chat_catch_up(app, s, fx);
    if (fx->close)
        return;
    char fold[CHAT_CHAN_MAX + 1];
    chat_casefold(fold, name, strlen(name));
    struct joining j = {.app = app, .s = s, .name = name, .fold = fold, .key_given = key_given,
                        .now_s = fx->wall_ns / (int64_t)YARD_NS_PER_S};
    chat_state_locked(app->cs, enter_channel, &j);
    int c = j.c, refused = j.refused;
    bool already = j.already, over = j.over, unranked = j.unranked, first = j.first;
    const char *shown = j.shown, *key = j.key;
    if (refused) {
        if (refused == 477)
            chat_numeric(fx, s, 477, "%s :Cannot join channel (+R): log in to an account to join",
                         name);
        else if (refused == 403)
            chat_numeric(fx, s, 403, "%s :No such channel (guests may not create channels here)",
                         name);
        else
            chat_numeric(fx, s, refused, "%s :Cannot join channel (%s)", name,
                         refused == 473   ? "+i"
                         : refused == 474 ? "+b"
                         : refused == 475 ? "+k"
                                          : "+l");
        return;
    }
    if (over) {
        chat_numeric(fx, s, 405, "%s :You have joined too many channels (CHANLIMIT %u)", name,
                     app->set->channels_per_account);
        return;
    }
    if (c == -2) {
        chat_numeric(fx, s, 405, "%s :The server holds no more channels (--max-channels)", name);
        return;
    }
    if (c == -3) {
        chat_numeric(fx, s, 405, "%s :The server holds no more channels made by guests "
                                 "(--guests-channel-share %u%% of %u)",
                     name, app->set->guests_channel_share, app->set->max_channels);
        return;
    }
    if (already)
        return;
    if (unranked)
        yard_log_limited(YARD_LOG_WARN, "chat: %s has no operator: DIR/channels has no slot "
                                        "left for it (every slot on its path is in use)",
                         shown);
    if (first) {
        /* An account that is away joins as away: after its JOIN, members
         * with away-notify hear its AWAY in this channel. */
        yard_chatlog_entry_t ev[2];
        struct presence me;
        unsigned n = 0;
        chat_presence_ev(&ev[n++], YARD_LOGREC_JOIN, s->sender, shown, s->realname);
        if (__atomic_load_n(&app->cs->away, __ATOMIC_RELAXED)) {
            chat_presence_of(app, s->account, &me, NULL, 0);
            if (me.away)
                chat_presence_ev(&ev[n++], YARD_LOGREC_AWAY, s->sender, shown, me.away_msg);
        }
        chat_presence_put(app, ev, n);
    }
    if (s->caps & CAP_EXTENDED_JOIN)
        chat_sendf(fx, ":%s!%s@" SERVER " JOIN %s %s :%s", s->nick, s->nick, shown,
                   s->guest ? "*" : s->account, s->realname[0] ? s->realname : s->nick);
    else
        chat_sendf(fx, ":%s!%s@" SERVER " JOIN %s", s->nick, s->nick, shown);
    topic_reply(app, s, fx, shown, key, false);
    names_list(app, s, fx, c, shown);
    /* The read-marker draft wants the channel's marker before 366. */
    if (s->caps & CAP_READ_MARKER) { /* a guest's too: its connection's */
        char mark[80];
        chat_marker_text(app, s, key, mark, sizeof mark);
        chat_sendf(fx, ":" SERVER " MARKREAD %s %s", shown, mark);
    }
    chat_numeric(fx, s, 366, "%s :End of /NAMES list.", shown);
    if ((s->caps & CAP_AWAY_NOTIFY) && __atomic_load_n(&app->cs->away, __ATOMIC_RELAXED))
        chat_away_of_members(app, s, fx, c);
    if (s->guest) /* no account: no position to replay from */
        return;
    replay_start(app, s, fx, shown, key);
}

/* Join the channels of a comma list in turn; one whose replay runs as a
 * job leaves the rest in s->join_rest, for after it. */
static void join_list(struct chat_app *app, struct session *s, yard_fx_t *fx, char *list,
                      char *keys)
{
    char *save = NULL, *ksave = NULL;
    char *k = keys ? strtok_r(keys, ",", &ksave) : NULL;
    for (char *t = strtok_r(list, ",", &save); t;
         t = strtok_r(NULL, ",", &save), k = k ? strtok_r(NULL, ",", &ksave) : NULL) {
        join_one(app, s, fx, t, k);
        if (fx->job) {
            const char *rest = strtok_r(NULL, "", &save);
            const char *krest = k ? strtok_r(NULL, "", &ksave) : NULL;
            snprintf(s->join_rest, sizeof s->join_rest, "%s", rest ? rest : "");
            snprintf(s->join_keys, sizeof s->join_keys, "%s", krest ? krest : "");
            return;
        }
    }
    s->join_rest[0] = 0;
    s->join_keys[0] = 0;
}

/* The live channel ch's name as first created; false if it was freed since. */
bool chat_channel_name(struct chat_app *app, int ch, char out[CHAT_CHAN_MAX + 1])
{
    struct chat_chan_view v;
    bool live = chat_channel_view(app->cs, ch, -1, 0, &v);
    if (live)
        strcpy(out, v.name);
    return live;
}

bool chat_channel_secret(struct chat_app *app, int ch)
{
    struct chat_chan_view v;
    return chat_channel_view(app->cs, ch, -1, 0, &v) && (v.modes & CHAT_MODE_S);
}

bool chat_channel_hidden(struct chat_app *app, const struct session *s, int ch)
{
    struct chat_chan_view v;
    return chat_channel_view(app->cs, ch, s->slot, 0, &v) && (v.modes & CHAT_MODE_S) && !v.in;
}

int chat_channel_of(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *name,
                    bool need_member)
{
    struct chat_chan_view v;
    int c = chat_channel_lookup(app->cs, name, strlen(name), s->slot, 0, &v);
    bool in = v.in;
    if (c < 0) {
        chat_numeric(fx, s, 403, "%s :No such channel", name);
        return -1;
    }
    if (need_member && !in) {
        chat_numeric(fx, s, 442, "%s :You're not on that channel", name);
        return -1;
    }
    return c;
}

/* A PART under the lock (leave_channel): the connection out of channel c. */
struct parting {
    struct chat_app *app;
    const struct session *s;
    int c;
    char shown[CHAT_CHAN_MAX + 1]; /* out: its name */
    bool last;                     /* out: the account's last connection in it */
};

static void leave_channel(chat_state_t *cs, void *ctx)
{
    struct parting *p = ctx;
    strcpy(p->shown, cs->chans[p->c].name);
    p->last = !chat_account_in_elsewhere(p->app, p->s, p->c); /* of the account's connections */
    chat_set_in(cs, p->s->slot, p->c, false); /* the last one out frees the slot */
}

static void part_one(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *name,
                     const char *why)
{
    int c = chat_channel_of(app, s, fx, name, true);
    if (c < 0)
        return;
    chat_catch_up(app, s, fx);
    if (fx->close)
        return;
    struct parting p = {.app = app, .s = s, .c = c};
    chat_state_locked(app->cs, leave_channel, &p);
    const char *shown = p.shown;
    bool last = p.last;
    chat_sendf(fx, ":%s!%s@" SERVER " PART %s :%s", s->nick, s->nick, shown, why ? why : "");
    if (last) {
        yard_chatlog_entry_t ev;
        chat_presence_ev(&ev, YARD_LOGREC_PART, s->sender, shown, why ? why : "");
        chat_presence_put(app, &ev, 1);
    }
}

/* A JOIN's replay job is done: relay what it found, then join the JOIN's
 * other channels. */
void chat_replay_done(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    replay_done(app, s, fx);
    char rest[sizeof s->join_rest], keys[sizeof s->join_keys];
    memcpy(rest, s->join_rest, sizeof rest);
    memcpy(keys, s->join_keys, sizeof keys);
    join_list(app, s, fx, rest, keys);
}

/* JOIN #a,#b [keys], or JOIN 0: leave every channel. */
void chat_cmd_join(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    if (!strcmp(m->params[0], "0")) { /* leave every channel */
        for (unsigned i = 0; i < app->cs->nchan; i++) {
            struct chat_chan_view v;
            if (chat_channel_view(app->cs, (int)i, s->slot, 0, &v) && v.in)
                part_one(app, s, fx, v.name, "Left all channels");
        }
        return;
    }
    int n = 0; /* as strtok_r counts them: empty names are skipped */
    for (const char *p = m->params[0]; *p; p++)
        n += *p != ',' && (p == m->params[0] || p[-1] == ',');
    chat_charge(s, n);
    join_list(app, s, fx, m->params[0], m->n > 1 ? m->params[1] : NULL);
}

/* PART #a,#b [:reason] */
void chat_cmd_part(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    char *save = NULL;
    int n = 0;
    for (char *t = strtok_r(m->params[0], ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        part_one(app, s, fx, t, m->n > 1 ? m->params[1] : NULL);
        n++;
    }
    chat_charge(s, n);
}

/* NAMES #a,#b */
void chat_cmd_names(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    if (m->n == 0) { /* every channel (a secret one only to its members), then one end */
        for (unsigned c = 0; c < app->cs->nchan; c++) {
            char shown[CHAT_CHAN_MAX + 1];
            if (chat_channel_name(app, (int)c, shown) && !chat_channel_hidden(app, s, (int)c))
                names_list(app, s, fx, (int)c, shown);
        }
        chat_numeric(fx, s, 366, "* :End of /NAMES list.");
        return;
    }
    char *save = NULL;
    int n = 0;
    for (char *t = strtok_r(m->params[0], ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char shown[CHAT_CHAN_MAX + 1];
        struct chat_chan_view v;
        int ch = chat_channel_lookup(app->cs, t, strlen(t), -1, 0, &v);
        /* An unknown or invalid channel is only the end of its (empty) list,
         * as a secret one is to whoever is not in it. */
        if (ch >= 0 && chat_channel_name(app, ch, shown) && !chat_channel_hidden(app, s, ch))
            names(app, s, fx, ch, shown);
        else
            chat_numeric(fx, s, 366, "%s :End of /NAMES list.", t);
        n++;
    }
    chat_charge(s, n);
}

/* TOPIC #chan [:topic]: the topic, or a change (by an operator when +t). */
void chat_cmd_topic(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    int ch = chat_channel_of(app, s, fx, m->params[0], m->n > 1);
    if (ch < 0)
        return;
    struct chat_chan_view v;
    chat_channel_view(app->cs, ch, -1, 0, &v);
    const char *shown = v.name, *key = v.key;
    if (m->n == 1) {
        topic_reply(app, s, fx, shown, key, true);
        return;
    }
    struct chat_chan_view now;
    chat_channel_view(app->cs, ch, s->slot, CHAT_VIEW_RANK, &now);
    bool locked = (now.modes & CHAT_MODE_T) && !(now.rank & CHAT_RANK_OP);
    if (locked) {
        chat_numeric(fx, s, 482, "%s :You're not channel operator (+t)", shown);
        return;
    }
    /* The change goes through the log like a message: every member
     * sees it, in the log's order, and the topic outlives a restart. */
    const char *text = m->params[1];
    size_t len = chat_utf8_cut(text, strlen(text), CHAT_TOPIC_MAX);
    char topic[CHAT_TOPIC_MAX + 1];
    memcpy(topic, text, len);
    topic[len] = 0;
    if (!chat_topic_set(app->cs, key, topic, len, s->nick,
                        fx->wall_ns / (int64_t)YARD_NS_PER_S)) {
        chat_sendf(fx, ":" SERVER " NOTICE %s :The topic of %s was not set: the server holds no "
                       "more topics",
                   s->nick, shown);
        return;
    }
    chat_post_begin(app, s, YARD_LOGREC_TOPIC, topic);
    chat_post_target(s, shown, false);
    chat_post_start(s, fx);
}
