/* Queries: who is here, and what the server is (query.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bans.h"
#include "channel.h"
#include "query.h"
#include "relay.h"
#include "session.h"
#include "yard/clock.h"

/* chat_presence_of's walk over the members named by key, under the lock. */
struct presence_walk {
    const char *key;
    struct presence *p;
    char *chans; /* the channels shown in a WHOIS, or NULL */
    size_t chans_cap, used;
    bool all_away, all_tls;
    uint64_t latest;
    uint64_t seen[(CHAT_CHANNELS_LIMIT + 63) / 64];
};

/* The member's channels into w->chans, each once (its rank's prefix
 * first); a secret channel (+s) is nobody's to see in a WHOIS. */
static void presence_channels(chat_state_t *cs, int slot, struct presence_walk *w)
{
    for (unsigned c = 0; c < cs->nchan; c++) {
        if (!cs->chans[c].used || !chat_is_in(cs, slot, (int)c) ||
            (cs->chans[c].modes & CHAT_MODE_S) || (w->seen[c / 64] >> (c % 64) & 1))
            continue;
        w->seen[c / 64] |= 1ull << (c % 64);
        int rank = chat_member_rank(cs, slot, (int)c);
        const char *pre = rank & CHAT_RANK_OP ? "@" : rank ? "+" : "";
        size_t n = strlen(pre) + strlen(cs->chans[c].name);
        if (w->used + n + 2 <= w->chans_cap) {
            snprintf(w->chans + w->used, w->chans_cap - w->used, "%s%s%s", w->used ? " " : "",
                     pre, cs->chans[c].name);
            w->used += n + (w->used ? 1 : 0);
        }
    }
}

static bool presence_member(chat_state_t *cs, int slot, struct chat_member *m, void *ctx)
{
    struct presence_walk *w = ctx;
    struct presence *p = w->p;
    if (strcmp(w->key, m->key) && strcmp(w->key, m->nick_key))
        return true;
    if (!p->online) {
        snprintf(p->user, sizeof p->user, "%s", m->user[0] ? m->user : m->nick);
        snprintf(p->realname, sizeof p->realname, "%s", m->realname);
    }
    p->online = true;
    p->guest = m->guest;
    p->oper = p->oper || m->oper;
    p->bot = p->bot || m->bot;
    snprintf(p->account, sizeof p->account, "%s", m->account);
    snprintf(p->nick, sizeof p->nick, "%s", m->nick);
    w->all_away = w->all_away && m->away;
    w->all_tls = w->all_tls && m->tls;
    if (m->away && m->away_at >= w->latest) {
        w->latest = m->away_at;
        snprintf(p->away_msg, sizeof p->away_msg, "%s", m->away_msg);
    }
    if (w->chans)
        presence_channels(cs, slot, w);
    return true;
}

void chat_presence_of(struct chat_app *app, const char *nick, struct presence *p, char *chans,
                      size_t chans_cap)
{
    memset(p, 0, sizeof *p);
    char key[CHAT_NAME_MAX + 1];
    size_t len = strlen(nick);
    if (len > CHAT_NAME_MAX)
        return;
    chat_casefold(key, nick, len);
    if (chans)
        chans[0] = 0;
    struct presence_walk w = {.key = key, .p = p, .chans = chans, .chans_cap = chans_cap,
                              .all_away = true, .all_tls = true};
    chat_members_each(app->cs, presence_member, &w);
    p->away = p->online && w.all_away;
    p->secure = p->online && w.all_tls;
}

/* away-notify, for a client that joins channel c: the members who are away
 * (only looked for while anybody is). */
void chat_away_of_members(struct chat_app *app, struct session *s, yard_fx_t *fx, int c)
{
    size_t n;
    bool nomem;
    struct chat_name *who_is = chat_members_of(app, c, &n, &nomem);
    if (nomem)
        fx->nomem = true;
    for (size_t i = 0; i < n; i++) {
        struct presence p;
        if (!strcmp(who_is[i].key, s->account_key))
            continue;
        chat_presence_of(app, who_is[i].account, &p, NULL, 0);
        if (p.away)
            chat_sendf(fx, ":%s!%s@" SERVER " AWAY :%s", p.nick, p.nick, p.away_msg);
    }
    free(who_is);
}

static void whois(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *nick)
{
    struct presence p;
    char chans[400];
    chat_presence_of(app, nick, &p, chans, sizeof chans);
    if (!p.online) {
        chat_numeric(fx, s, 401, "%s :No such nick/channel", nick);
    } else {
        chat_numeric(fx, s, 311, "%s %s " SERVER " * :%s", p.nick, p.user, p.realname);
        if (chans[0])
            chat_numeric(fx, s, 319, "%s :%s", p.nick, chans);
        chat_numeric(fx, s, 312, "%s %s :Switchyard chat", p.nick, app->server_name);
        if (p.away)
            chat_numeric(fx, s, 301, "%s :%s", p.nick, p.away_msg);
        if (p.oper)
            chat_numeric(fx, s, 313, "%s :is an IRC operator", p.nick);
        if (p.bot)
            chat_numeric(fx, s, 335, "%s :is a bot", p.nick);
        if (!p.guest) /* a guest is logged in as nobody */
            chat_numeric(fx, s, 330, "%s %s :is logged in as", p.nick, p.account);
        /* Encrypted: every connection of the nick is (TLS). One's own
         * certificate too: the fingerprint to list with yard-chat account
         * certfp add (another user's is theirs to tell). */
        if (p.secure)
            chat_numeric(fx, s, 671, "%s :is using a secure connection", p.nick);
        if (!strcasecmp(p.account, s->account) && s->certfp[0])
            chat_numeric(fx, s, 276, "%s :has client certificate fingerprint %s", p.nick,
                         s->certfp);
    }
    chat_numeric(fx, s, 318, "%s :End of /WHOIS list.", p.online ? p.nick : nick);
}

/* WHOWAS: the departures (an account's last connection ending) of the
 * last CHAT_WHOWAS_MAX that were nick's, newest first, at most count of
 * them (0: all), whether or not it is back online. */
static void whowas_n(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *nick,
                     unsigned count)
{
    struct chat_gone g;
    char spelled[CHAT_NAME_MAX + 1] = "";
    unsigned found = 0;
    while (strlen(nick) <= CHAT_NAME_MAX && (!count || found < count)) {
        bool more = chat_whowas_find(app->cs, nick, found, &g);
        if (!more)
            break;
        char when[64];
        chat_format_time(when, sizeof when, g.at_s * (int64_t)YARD_NS_PER_S);
        chat_numeric(fx, s, 314, "%s %s " SERVER " * :%s", g.account,
                     g.user[0] ? g.user : g.account, g.realname);
        chat_numeric(fx, s, 312, "%s %s :%s", g.account, app->server_name, when);
        if (!found++)
            snprintf(spelled, sizeof spelled, "%s", g.account);
    }
    if (!found)
        chat_numeric(fx, s, 406, "%s :There was no such nickname", nick);
    chat_numeric(fx, s, 369, "%s :End of WHOWAS", found ? spelled : nick);
}

/* ISON and USERHOST: the online ones among the nicks given (USERHOST: at
 * most five, "nick=+nick@host", '-' when away). */
static void ison(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m,
                 bool userhost)
{
    char out[400];
    size_t len = 0;
    int asked = 0;
    out[0] = 0;
    for (int i = 0; i < m->n; i++) {
        char *save = NULL;
        for (char *t = strtok_r(m->params[i], " ", &save); t; t = strtok_r(NULL, " ", &save)) {
            if (userhost && asked == 5)
                break;
            asked++;
            struct presence p;
            chat_presence_of(app, t, &p, NULL, 0);
            if (!p.online)
                continue;
            int w = userhost ? snprintf(out + len, sizeof out - len, "%s%s=%c%s@" SERVER,
                                        len ? " " : "", p.nick, p.away ? '-' : '+', p.nick)
                             : snprintf(out + len, sizeof out - len, "%s%s", len ? " " : "",
                                        p.nick);
            if (w < 0 || (size_t)w >= sizeof out - len) {
                out[len] = 0;
                break;
            }
            len += (size_t)w;
        }
    }
    chat_charge(s, asked);
    chat_numeric(fx, s, userhost ? 302 : 303, ":%s", out);
}

struct away_events {
    const struct session *s;
    const char *msg;
    yard_chatlog_entry_t *ev; /* out: n records (malloc'd) */
    unsigned n;
    bool monitors; /* out: somebody monitors anything (extended-monitor) */
};

/* Under the lock: an AWAY record for each channel of the account's. */
static void away_events(chat_state_t *cs, void *ctx)
{
    struct away_events *a = ctx;
    uint64_t bits[(CHAT_CHANNELS_LIMIT + 63) / 64] = {0};
    chat_account_others(cs, a->s->account_key, -1, bits);
    a->ev = chat_events_per_channel(cs, bits, YARD_LOGREC_AWAY, a->s->sender, a->msg, &a->n);
    a->monitors = cs->monitoring > 0;
}

/* Defer one AWAY record per channel the account is in (any connection),
 * and, while somebody monitors anything, one more to "*" for monitors
 * that share no channel with it (extended-monitor; the last of the group,
 * so that one told through a channel is not told again); charge the
 * connection one token per record. */
static void away_notify(struct chat_app *app, struct session *s, const char *msg)
{
    struct away_events a = {.s = s, .msg = msg};
    chat_state_locked(app->cs, away_events, &a);
    unsigned n = a.n;
    yard_chatlog_entry_t *ev = a.ev;
    if (a.monitors) {
        yard_chatlog_entry_t *more = realloc(ev, (n + 1) * sizeof *ev);
        if (more) {
            ev = more;
            chat_presence_ev(&ev[n++], YARD_LOGREC_AWAY, s->sender, "*", msg);
        }
    }
    chat_charge(s, (int)n);
    if (n)
        chat_presence_put(app, ev, n);
    free(ev);
}

/* AWAY [:message] */
void chat_cmd_away(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    const char *msg = m->n ? m->params[0] : "";
    size_t len = chat_utf8_cut(msg, strlen(msg), CHAT_AWAY_MAX);
    struct presence before, after;
    chat_presence_of(app, s->account, &before, NULL, 0); /* its account: all its connections */
    chat_member_set_away(app->cs, s->slot, msg, len, fx->now_ns);
    /* away-notify: the account's state (away when every connection is) or
     * its message changed: one record per channel it is in, told once. */
    chat_presence_of(app, s->account, &after, NULL, 0);
    if (before.away != after.away || (after.away && strcmp(before.away_msg, after.away_msg)))
        away_notify(app, s, after.away ? after.away_msg : "");
    if (len)
        chat_numeric(fx, s, 306, ":You have been marked as being away");
    else
        chat_numeric(fx, s, 305, ":You are no longer marked as being away");
}

/* LIST [#a,#b]: every live channel (or those named) with its members
 * (accounts, each once) and topic. */
/* Whether LIST's filters let a channel (casefolded key, users members)
 * through (ELIST=MNU): names and masks (any of them), "!mask" (none of
 * them), ">N" and "<N" (more or fewer users); none: every channel. */
static bool list_wanted(const char *filters, const char *key, size_t users)
{
    bool named = false, name_ok = false, ok = true;
    char want[CHAT_CHAN_MAX + 1];
    for (const char *p = filters; *p && ok; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) {
        size_t n = strcspn(p, ",");
        if (p[0] == '>' || p[0] == '<') {
            unsigned long v = strtoul(p + 1, NULL, 10);
            ok = p[0] == '>' ? users > v : users < v;
        } else if (p[0] == '!' && n - 1 <= CHAT_CHAN_MAX) {
            chat_casefold(want, p + 1, n - 1);
            ok = !chat_mask_match(want, key);
        } else if (n <= CHAT_CHAN_MAX) {
            named = true;
            chat_casefold(want, p, n);
            name_ok = name_ok || chat_mask_match(want, key);
        } else {
            named = true;
        }
    }
    return ok && (!named || name_ok);
}

void chat_cmd_list(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    chat_numeric(fx, s, 321, "Channel :Users  Name");
    const char *filters = m->n >= 1 ? m->params[0] : "";
    for (unsigned c = 0; c < app->cs->nchan; c++) {
        struct chat_chan_view v;
        if (!chat_channel_view(app->cs, (int)c, -1, 0, &v) || chat_channel_hidden(app, s, (int)c))
            continue;
        size_t n;
        bool nomem;
        free(chat_members_of(app, (int)c, &n, &nomem));
        if (nomem)
            fx->nomem = true;
        if (!list_wanted(filters, v.key, n))
            continue;
        char topic[CHAT_TOPIC_MAX + 1], by[CHAT_NAME_MAX + 1];
        int64_t at;
        if (!chat_topic_get(app->cs, v.key, topic, by, &at))
            topic[0] = 0;
        chat_numeric(fx, s, 322, "%s %zu :%s", v.name, n, topic);
    }
    chat_numeric(fx, s, 323, ":End of /LIST");
}

void chat_cmd_lusers(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    unsigned conns, most, chans;
    chat_state_counts(app->cs, &conns, &most, &chans);
    chat_numeric(fx, s, 251, ":There are %u users and 0 invisible on 1 servers", conns);
    chat_numeric(fx, s, 254, "%u :channels formed", chans);
    chat_numeric(fx, s, 255, ":I have %u clients and 0 servers", conns);
    /* One server: its local users are all of them. */
    chat_numeric(fx, s, 265, "%u %u :Current local users %u, max %u", conns, most, conns, most);
    chat_numeric(fx, s, 266, "%u %u :Current global users %u, max %u", conns, most, conns, most);
}

/* One line of a WHO answer: an account (however many connections it has)
 * or a guest. */
struct who_entry {
    char key[CHAT_NAME_MAX + 1];
    char nick[CHAT_NAME_MAX + 1];
    char user[CHAT_USER_MAX + 1];
    char realname[CHAT_REALNAME_MAX + 1];
    char account[CHAT_NAME_MAX + 1]; /* WHOX's account field ("0": a guest) */
    bool away; /* every connection of it is */
    bool oper; /* one connection of it is a server operator */
    bool bot;  /* one connection of it has user mode +B */
};

static int who_cmp(const void *a, const void *b)
{
    return strcmp(((const struct who_entry *)a)->key, ((const struct who_entry *)b)->key);
}

struct who_filter {
    const struct session *s;
    int ch;
    const char *mask;
    bool wild;
    struct who_entry *v; /* room for cap, n of them filled */
    size_t cap, n;
};

/* chat_members_each: the member into f->v when WHO lists it. */
static bool who_member(chat_state_t *cs, int slot, struct chat_member *mb, void *ctx)
{
    struct who_filter *f = ctx;
    const struct session *s = f->s;
    if (f->n == f->cap)
        return false;
    if (f->ch >= 0 && !chat_is_in(cs, slot, f->ch))
        return true;
    if (f->ch < 0 && (!chat_mask_match(f->mask, mb->nick_key) ||
                      (f->wild && mb->invisible && slot != s->slot &&
                       strcmp(mb->key, s->account_key) &&
                       !(s->slot >= 0 && chat_members_share(cs, slot, s->slot)))))
        return true;
    struct who_entry *e = &f->v[f->n++];
    memcpy(e->key, mb->key, sizeof e->key);
    memcpy(e->nick, mb->nick, sizeof e->nick);
    snprintf(e->user, sizeof e->user, "%s", mb->user[0] ? mb->user : mb->nick);
    memcpy(e->realname, mb->realname, sizeof e->realname);
    snprintf(e->account, sizeof e->account, "%s", mb->guest ? "0" : mb->account);
    e->away = mb->away;
    e->oper = mb->oper;
    e->bot = mb->bot;
    return true;
}

/* The members WHO lists: those in channel ch (ch >= 0), or those whose nick
 * matches the casefolded mask, the invisible (+i) ones among them only when
 * named exactly or sharing a channel with the asker. Sorted, each account
 * once; NULL with *n 0 when none (*nomem when out of memory). */
static struct who_entry *who_entries(struct chat_app *app, struct session *s, int ch,
                                     const char *mask, size_t *n, bool *nomem)
{
    chat_state_t *cs = app->cs;
    bool wild = strpbrk(mask, "*?") != NULL;
    *n = 0;
    *nomem = false;
    /* Room for every slot used now, taken before the walk (a member who
     * connects meanwhile may be left out, as if it came just after). */
    size_t cap = chat_member_slots(cs);
    struct who_filter f = {.s = s, .ch = ch, .mask = mask, .wild = wild, .cap = cap, .n = 0};
    f.v = cap ? malloc(cap * sizeof *f.v) : NULL;
    if (cap && !f.v)
        *nomem = true;
    if (f.v)
        chat_members_each(cs, who_member, &f);
    struct who_entry *v = f.v;
    *n = f.n;
    if (*n)
        qsort(v, *n, sizeof *v, who_cmp);
    size_t out = 0;
    for (size_t i = 0; i < *n; i++) {
        if (out && !strcmp(v[out - 1].key, v[i].key)) {
            v[out - 1].away = v[out - 1].away && v[i].away;
            v[out - 1].oper = v[out - 1].oper || v[i].oper;
            v[out - 1].bot = v[out - 1].bot || v[i].bot;
            continue;
        }
        v[out++] = v[i];
    }
    *n = out;
    return v;
}

/* WHOX (WHO mask %FIELDS[,TOKEN]): which fields, in the order they are
 * always sent, and the token that 't' echoes. */
#define WHOX_ORDER "tcuihsnfdlaor"
struct whox {
    bool on;
    char fields[sizeof WHOX_ORDER]; /* those asked for, in WHOX_ORDER's order */
    char token[4];                  /* 1 to 3 digits ("0" when none is given) */
};

static void whox_parse(const char *arg, struct whox *x)
{
    memset(x, 0, sizeof *x);
    if (!arg || arg[0] != '%')
        return;
    x->on = true;
    const char *comma = strchr(arg, ',');
    size_t nf = 0;
    for (const char *f = WHOX_ORDER; *f; f++) {
        const char *at = strchr(arg + 1, *f);
        if (at && (!comma || at < comma))
            x->fields[nf++] = *f;
    }
    size_t tn = comma ? strspn(comma + 1, "0123456789") : 0;
    if (tn >= 1 && tn <= 3 && !comma[1 + tn])
        memcpy(x->token, comma + 1, tn);
    else
        strcpy(x->token, "0");
}

/* One 354 line: the fields asked for, the realname (always last) as the
 * trailing parameter. Flags as 352's. */
static void whox_reply(struct chat_app *app, struct session *s, yard_fx_t *fx,
                       const struct whox *x, const char *chan, const struct who_entry *e,
                       const char *flags)
{
    char line[512];
    size_t len = 0;
    for (const char *f = x->fields; *f; f++) {
        const char *v = "";
        switch (*f) {
        case 't': v = x->token; break;
        case 'c': v = chan; break;
        case 'u': v = e->user; break;
        case 'i': v = "255.255.255.255"; break; /* addresses are not shown */
        case 'h': v = SERVER; break;
        case 's': v = app->server_name; break;
        case 'n': v = e->nick; break;
        case 'f': v = flags; break;
        case 'd': v = "0"; break;  /* hops: one server */
        case 'l': v = "0"; break;  /* idle time: not kept */
        case 'a': v = e->account; break;
        case 'o': v = "n/a"; break;
        case 'r': v = e->realname; break;
        }
        int w = snprintf(line + len, sizeof line - len, "%s%s%s", len ? " " : "",
                         *f == 'r' ? ":" : "", v);
        if (w < 0 || (size_t)w >= sizeof line - len)
            break;
        len += (size_t)w;
    }
    chat_numeric(fx, s, 354, "%s", line);
}

/* WHO #chan: its members; WHO mask (a nick, or with '*' and '?'; "*" and
 * "0" are everyone): the users whose nick matches it. 352 flags: H here or
 * G away, '*' a server operator, 'B' a bot, and the rank's prefix in a
 * channel. With a second parameter %FIELDS[,TOKEN], WHOX: 354 lines of
 * those fields. */
void chat_cmd_who(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    const char *mask = m->n ? m->params[0] : "*";
    bool chan = mask[0] == '#' || mask[0] == '&';
    struct whox x;
    whox_parse(m->n > 1 ? m->params[1] : NULL, &x);
    int ch = chan ? chat_channel_of(app, s, fx, mask, false) : -1;
    char shown[CHAT_CHAN_MAX + 1] = "*";
    if (!chan || (ch >= 0 && chat_channel_name(app, ch, shown))) {
        char fold[CHAT_NAME_MAX + 1] = "*";
        size_t len = strlen(mask);
        if (!chan && strcmp(mask, "0") && len <= CHAT_NAME_MAX)
            chat_casefold(fold, mask, len);
        size_t n = 0;
        bool nomem = false;
        struct who_entry *v =
            !chan && len > CHAT_NAME_MAX ? NULL : who_entries(app, s, ch, fold, &n, &nomem);
        if (nomem)
            fx->nomem = true;
        struct chat_chanrec rec;
        if (chan)
            chat_ranks_of(app, ch, &rec);
        for (size_t i = 0; i < n; i++) {
            const char *pre =
                chan ? chat_rank_prefix(chat_rank_in(app, ch, &rec, v[i].key), s) : "";
            char flags[16];
            snprintf(flags, sizeof flags, "%c%s%s%s", v[i].away ? 'G' : 'H',
                     v[i].oper ? "*" : "", v[i].bot ? "B" : "", pre);
            if (x.on)
                whox_reply(app, s, fx, &x, shown, &v[i], flags);
            else
                chat_numeric(fx, s, 352, "%s %s " SERVER " %s %s %s :0 %s", shown, v[i].user,
                             app->server_name, v[i].nick, flags, v[i].realname);
        }
        free(v);
    }
    chat_numeric(fx, s, 315, "%s :End of /WHO list.", mask);
}

/* reply for each nick of a comma list, TARGMAX of them at most. */
static void each_nick(struct chat_app *app, struct session *s, yard_fx_t *fx, char *list,
                      void (*reply)(struct chat_app *, struct session *, yard_fx_t *,
                                    const char *))
{
    char *save = NULL;
    int n = 0;
    for (char *t = strtok_r(list, ",", &save); t && n < TARGMAX;
         t = strtok_r(NULL, ",", &save), n++)
        reply(app, s, fx, t);
    chat_charge(s, n);
}

/* WHOIS [server] nick[,nick]: the nicks are the last parameter. */
void chat_cmd_whois(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    each_nick(app, s, fx, m->params[m->n - 1], whois);
}

/* WHOWAS nick[,nick] [count]: the first. */
/* WHOWAS nick[,nick] [count]: count 0 or less, or none, is every entry. */
void chat_cmd_whowas(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    long count = m->n > 1 ? strtol(m->params[1], NULL, 10) : 0;
    char *save = NULL;
    int n = 0;
    for (char *t = strtok_r(m->params[0], ",", &save); t && n < TARGMAX;
         t = strtok_r(NULL, ",", &save), n++)
        whowas_n(app, s, fx, t, count > 0 ? (unsigned)count : 0);
    chat_charge(s, n);
}

void chat_cmd_ison(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    ison(app, s, fx, m, false);
}

void chat_cmd_userhost(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    ison(app, s, fx, m, true);
}

/* Also the welcome's end (m NULL): the store's motd, a 372 per line. */
void chat_cmd_motd(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    const char *motd = yard_chat_store_motd(app->store);
    if (motd[0]) {
        chat_numeric(fx, s, 375, ":- " SERVER " Message of the day -");
        for (const char *l = motd; *l;) {
            size_t n = strcspn(l, "\r\n");
            if (n)
                chat_numeric(fx, s, 372, ":- %.*s", (int)(n < 400 ? n : 400), l);
            l += n;
            l += strspn(l, "\r\n");
        }
        chat_numeric(fx, s, 376, ":End of /MOTD command.");
    } else {
        chat_numeric(fx, s, 422, ":MOTD File is missing");
    }
}

void chat_cmd_version(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    chat_numeric(fx, s, 351, "switchyard-chat %s :Switchyard chat (docs/chat.md)", app->server_name);
}

void chat_cmd_time(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    char when[64];
    chat_format_time(when, sizeof when, fx->wall_ns);
    chat_numeric(fx, s, 391, "%s :%s", app->server_name, when);
}

/* INFO [target]: what this server is, as 371 lines and 374. A target is a
 * server's name or a mask of one (RFC 2812); there is one server, so
 * anything that does not name it is 402. */
void chat_cmd_info(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    if (m->n && m->params[0][0]) {
        char mask[CHAT_SERVER_NAME_MAX + 1], name[CHAT_SERVER_NAME_MAX + 1];
        size_t len = strlen(m->params[0]);
        chat_casefold(mask, m->params[0], len > CHAT_SERVER_NAME_MAX ? CHAT_SERVER_NAME_MAX : len);
        chat_casefold(name, app->server_name, strlen(app->server_name));
        if (len > CHAT_SERVER_NAME_MAX || (!chat_mask_match(mask, name) && strcmp(mask, SERVER) != 0)) {
            chat_numeric(fx, s, 402, "%s :No such server", m->params[0]);
            return;
        }
    }
    static const char *const about[] = {
        "A self-hosted chat service speaking an IRC subset: accounts, a durable",
        "message log, offline catch-up and history (CHATHISTORY).",
        "One server, no links. docs/chat.md says what it supports.",
    };
    chat_numeric(fx, s, 371, ":Switchyard chat 0.1.0, on server %s", app->server_name);
    for (size_t i = 0; i < sizeof about / sizeof about[0]; i++)
        chat_numeric(fx, s, 371, ":%s", about[i]);
    chat_numeric(fx, s, 374, ":End of /INFO list");
}
