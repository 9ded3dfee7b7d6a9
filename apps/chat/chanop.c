/* Channel operators: MODE, KICK, INVITE (chanop.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bans.h"
#include "channel.h"
#include "chanop.h"
#include "message.h"
#include "query.h"
#include "relay.h"
#include "session.h"
#include "yard/clock.h"

/* The channel modes without a parameter, by letter; 0 for any other. */
static uint32_t flag_mode(char f)
{
    switch (f) {
    case 'M': return CHAT_MODE_REG_SPEAK;
    case 'R': return CHAT_MODE_REG_JOIN;
    case 'i': return CHAT_MODE_I;
    case 'm': return CHAT_MODE_M;
    case 'n': return CHAT_MODE_N;
    case 's': return CHAT_MODE_S;
    case 't': return CHAT_MODE_T;
    default: return 0;
    }
}

/* 324 (and 329): the channel's modes; its key only to its members. */
static void mode_reply(struct chat_app *app, struct session *s, yard_fx_t *fx, int ch, bool in)
{
    struct chat_chanrec rec;
    char shown[CHAT_CHAN_MAX + 1];
    bool have = chat_channel_record(app->cs, ch, shown, &rec);
    char flags[16], params[80] = "";
    size_t n = 0;
    flags[n++] = '+';
    for (const char *f = "MRiklmnst"; *f; f++) { /* in ASCII order, as servers list them */
        if (*f == 'k' && rec.key[0]) {
            flags[n++] = 'k';
            snprintf(params, sizeof params, " %s", in ? rec.key : "*");
        } else if (*f == 'l' && rec.limit) {
            flags[n++] = 'l';
            snprintf(params + strlen(params), sizeof params - strlen(params), " %u", rec.limit);
        } else if (rec.modes & flag_mode(*f)) {
            flags[n++] = *f;
        }
    }
    flags[n] = 0;
    chat_numeric(fx, s, 324, "%s %s%s", shown, flags, params);
    if (have)
        chat_numeric(fx, s, 329, "%s %lld", shown, (long long)rec.created_s);
}

/* A connection in channel ch of the user that key (casefolded) names,
 * by its nick or its account (a guest: its nick): the nick it is shown by
 * into out, and key replaced by its account's (under the lock); -1 when
 * none of its connections is in it. */
static int member_in(chat_state_t *cs, int ch, char key[CHAT_NAME_MAX + 1],
                     char out[CHAT_NAME_MAX + 1])
{
    for (unsigned i = 0; i < chat_member_end(cs); i++) {
        struct chat_member *mb = chat_member_at(cs, (int)i);
        if (mb->used && (!strcmp(mb->key, key) || !strcmp(mb->nick_key, key)) &&
            chat_is_in(cs, (int)i, ch)) {
            strcpy(out, mb->nick);
            strcpy(key, mb->key);
            return (int)i;
        }
    }
    return -1;
}

/* Whether anybody connected is named key (casefolded), by nick or account,
 * in any channel or none: 441 then, 401 when nobody is (under the lock). */
static bool anyone_named(chat_state_t *cs, const char *key)
{
    for (unsigned i = 0; i < chat_member_end(cs); i++) {
        struct chat_member *mb = chat_member_at(cs, (int)i);
        if (mb->used && (!strcmp(mb->key, key) || !strcmp(mb->nick_key, key)))
            return true;
    }
    return false;
}

/* The refusal of a MODE +o/+v or KICK of nick, not in the channel shown:
 * 441 for somebody connected, 401 for a nick nobody has. */
static void not_in_channel(struct session *s, yard_fx_t *fx, bool connected, const char *nick,
                           const char *shown)
{
    if (connected)
        chat_numeric(fx, s, 441, "%s %s :They aren't on that channel", nick, shown);
    else
        chat_numeric(fx, s, 401, "%s :No such nick/channel", nick);
}

/* A +k key: 1..23 bytes, none of them a space, a comma, a colon first or
 * a control character. */
static bool valid_chankey(const char *k)
{
    size_t n = strlen(k);
    if (!n || n > CHAT_CHANKEY_MAX || k[0] == ':')
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)k[i] <= ' ' || k[i] == ',' || k[i] == 0x7f)
            return false;
    return true;
}

/* A refused mode parameter as 696 repeats it: "*" when it is empty or has
 * a space (it would not be one parameter of the reply). */
static const char *param_shown(const char *param)
{
    return param[0] && !strchr(param, ' ') && param[0] != ':' ? param : "*";
}

/* The changes one MODE made, as they are told: "+o-t" and its parameters. */
struct mode_change {
    char flags[64];
    size_t nflags;
    char params[MODES_MAX * (CHAT_BANMASK_MAX + 2) + 16];
    bool on; /* the sign flags ends with */
    bool bans_changed; /* the ban list too (DIR/bans) */
};

static void change_add(struct mode_change *mc, bool on, char flag, const char *param)
{
    if (mc->nflags + 3 >= sizeof mc->flags)
        return;
    if (!mc->nflags || mc->on != on)
        mc->flags[mc->nflags++] = on ? '+' : '-';
    mc->on = on;
    mc->flags[mc->nflags++] = flag;
    mc->flags[mc->nflags] = 0;
    if (param) {
        size_t used = strlen(mc->params);
        snprintf(mc->params + used, sizeof mc->params - used, " %s", param);
    }
}

/* One +o/-o/+v/-v on nick: the rank goes to (or from) the account. Under
 * the lock. */
static void mode_rank(struct chat_app *app, struct session *s, yard_fx_t *fx, int ch,
                      struct chat_chanrec *rec, struct mode_change *mc, bool on, char flag,
                      const char *nick)
{
    char key[CHAT_NAME_MAX + 1], spelled[CHAT_NAME_MAX + 1];
    size_t len = strlen(nick);
    const char *shown = app->cs->chans[ch].name;
    chat_casefold(key, nick, len > CHAT_NAME_MAX ? CHAT_NAME_MAX : len);
    int bit = flag == 'o' ? CHAT_RANK_OP : CHAT_RANK_VOICE;
    int holder = len <= CHAT_NAME_MAX ? member_in(app->cs, ch, key, spelled) : -1;
    bool present = holder >= 0;
    if (present && chat_member_at(app->cs, holder)->guest) {
        /* Ranks are kept by name across restarts, and a guest's name is not
         * its own: its rank is its connection's, while it is in the channel. */
        if (!!(chat_guest_rank(app->cs, holder, ch) & bit) != on) {
            chat_guest_rank_set(app->cs, holder, ch, bit, on);
            change_add(mc, on, flag, spelled);
        }
        return;
    }
    /* A rank is given to a member; it may be taken from an account that is
     * not there (ranks are kept while one is away). */
    if (!present && !(!on && (chat_rank_of(rec, key) & bit))) {
        not_in_channel(s, fx, len <= CHAT_NAME_MAX && anyone_named(app->cs, key), nick, shown);
        return;
    }
    if (!present)
        snprintf(spelled, sizeof spelled, "%s", nick);
    if (!!(chat_rank_of(rec, key) & bit) == on)
        return; /* nothing changes */
    if (!chat_rank_set(rec, key, bit, on)) {
        chat_numeric(fx, s, 696, "%s %c %s :The channel has no room for more ranks (%d accounts)",
                     shown, flag, nick, CHAT_RANKS_MAX);
        return;
    }
    change_add(mc, on, flag, spelled);
}

/* One +b/-b (+e/-e, +I/-I: flag) mask on the ban record bans. Under the
 * lock. */
static void mode_ban(struct session *s, yard_fx_t *fx, const char *shown,
                     struct chat_banrec *bans, struct mode_change *mc, bool on, char flag,
                     const char *given)
{
    char mask[CHAT_BANMASK_MAX + 1];
    if (!chat_ban_normalize(given, mask)) {
        chat_numeric(fx, s, 696, "%s %c %s :A mask is nick!user@host (with * and ?, at most %d "
                                 "characters) or $a:account",
                     shown, flag, param_shown(given), CHAT_BANMASK_MAX);
        return;
    }
    /* What one MODE changes is told in one log record: masks past what it
     * holds wait for another MODE. */
    if (mc->nflags + strlen(mc->params) + strlen(mask) + 4 >= YARD_CHATLOG_DEFER_TEXT) {
        chat_numeric(fx, s, 696, "%s %c %s :Too many masks in one MODE; send it again", shown,
                     flag, mask);
        return;
    }
    int rc = chat_ban_set(bans, chat_list_of_mode(flag), mask, on, s->account,
                          fx->wall_ns / (int64_t)YARD_NS_PER_S);
    if (rc < 0) {
        chat_numeric(fx, s, 478, "%s %s :Channel ban list is full (%d with +e and +I)", shown,
                     mask, CHAT_BANS_MAX);
    } else if (rc > 0) {
        mc->bans_changed = true;
        change_add(mc, on, flag, mask);
    }
}

/* The changes of MODE #chan changes [parameters] applied to rec and bans
 * and noted in mc, each one refused answered; under the lock. */
static void mode_changes(struct chat_app *app, struct session *s, yard_fx_t *fx, int ch,
                         const char *shown, const yard_irc_msg_t *m, struct chat_chanrec *rec,
                         struct chat_banrec *bans, struct mode_change *mc)
{
    bool on = true;
    int arg = 2, with_param = 0;
    for (const char *p = m->params[1]; *p; p++) {
        char f = *p;
        if (f == '+' || f == '-') {
            on = f == '+';
            continue;
        }
        uint32_t bit = flag_mode(f);
        if (bit) {
            if (!!(rec->modes & bit) != on) {
                rec->modes ^= bit;
                change_add(mc, on, f, NULL);
            }
            continue;
        }
        bool listed = chat_list_of_mode(f) >= 0; /* b, e, I */
        bool takes = f == 'o' || f == 'v' || f == 'k' || listed || (f == 'l' && on);
        if (!takes && f != 'l') {
            chat_numeric(fx, s, 472, "%c :is an unknown mode char to me (modes: MRbeIiklmnostv)",
                         f);
            continue;
        }
        if (listed && arg >= m->n)
            continue; /* a list query among changes: the list is MODE #chan b's */
        const char *param = NULL;
        if (takes) {
            if (arg >= m->n || with_param == MODES_MAX) {
                if (f != 'k' || on) /* -k may come without its key */
                    chat_numeric(fx, s, 696, "%s %c * :%s", shown, f,
                                 arg >= m->n ? "This mode needs a parameter"
                                        : "Too many changes with a parameter (MODES)");
                if (f != 'k' || on)
                    continue;
            } else {
                param = m->params[arg++];
                with_param++;
            }
        }
        if (f == 'o' || f == 'v') {
            mode_rank(app, s, fx, ch, rec, mc, on, f, param);
        } else if (listed) {
            mode_ban(s, fx, shown, bans, mc, on, f, param);
        } else if (f == 'k' && on) {
            if (!valid_chankey(param)) {
                /* '*': a refused key is not repeated (it may be most of a
                 * secret, and a long one would not fit) */
                chat_numeric(fx, s, 696, "%s k * :A key is 1-%d characters, no spaces or commas",
                             shown, CHAT_CHANKEY_MAX);
            } else if (strcmp(rec->key, param)) {
                snprintf(rec->key, sizeof rec->key, "%s", param);
                change_add(mc, true, 'k', param);
            }
        } else if (f == 'k') {
            if (rec->key[0]) {
                rec->key[0] = 0;
                change_add(mc, false, 'k', "*");
            }
        } else if (on) { /* +l */
            char *end;
            errno = 0;
            unsigned long v = strtoul(param, &end, 10);
            if (errno || *end || end == param || param[0] == '-' || !v || v > 1000000) {
                chat_numeric(fx, s, 696, "%s l %s :A limit is a number of members, 1 to 1000000",
                             shown, param_shown(param));
            } else if (rec->limit != v) {
                rec->limit = (uint32_t)v;
                change_add(mc, true, 'l', param);
            }
        } else if (rec->limit) { /* -l */
            rec->limit = 0;
            change_add(mc, false, 'l', NULL);
        }
    }
}

/* A MODE change of channel ch by an operator, made under the lock
 * (edit_modes): the record and ban list read, changed and written back. */
struct mode_edit {
    struct chat_app *app;
    struct session *s;
    yard_fx_t *fx;
    const yard_irc_msg_t *m;
    int ch;
    char shown[CHAT_CHAN_MAX + 1];
    bool op;   /* out: the asker is its operator (else nothing changed) */
    bool kept; /* out: the changes were stored */
    struct mode_change mc;
};

static void edit_modes(chat_state_t *cs, void *ctx)
{
    struct mode_edit *e = ctx;
    char key[CHAT_CHAN_MAX + 1];
    strcpy(e->shown, cs->chans[e->ch].name);
    strcpy(key, cs->chans[e->ch].key);
    struct chat_chanrec rec;
    e->op = chat_chan_get(cs, key, &rec) &&
            (chat_member_rank(cs, e->s->slot, e->ch) & CHAT_RANK_OP);
    if (!e->op)
        return;
    struct chat_banrec bans;
    chat_bans_get(cs, key, &bans);
    mode_changes(e->app, e->s, e->fx, e->ch, e->shown, e->m, &rec, &bans, &e->mc);
    int64_t now_s = e->fx->wall_ns / (int64_t)YARD_NS_PER_S;
    e->kept = !e->mc.nflags || chat_chan_put(cs, key, &rec, now_s);
    if (e->kept && e->mc.bans_changed)
        e->kept = chat_bans_put(cs, key, &bans, now_s);
}

/* MODE #chan [changes [parameters]]: a query, a list query, or changes by
 * an operator. The changes are kept in DIR/channels, then told to every
 * member through the log (a mode record), the setter included. */
static void chan_mode(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    int ch = chat_channel_of(app, s, fx, m->params[0], false);
    if (ch < 0)
        return;
    struct chat_chan_view v;
    chat_channel_view(app->cs, ch, s->slot, 0, &v);
    bool in = v.in;
    if (m->n == 1) {
        mode_reply(app, s, fx, ch, in);
        return;
    }
    /* The list queries (a client sends them on JOIN: irssi waits for each
     * end before it calls the channel synced): the bans, the exceptions
     * and the invite exceptions. */
    const char *q = m->params[1] + (m->params[1][0] == '+');
    if (m->n == 2 && q[0] && !q[1] && chat_list_of_mode(q[0]) >= 0) {
        chat_bans_list(app, s, fx, ch, chat_list_of_mode(q[0]));
        return;
    }
    if (!in) {
        chat_numeric(fx, s, 442, "%s :You're not on that channel", m->params[0]);
        return;
    }
    struct mode_edit e = {.app = app, .s = s, .fx = fx, .m = m, .ch = ch, .mc = {.nflags = 0}};
    chat_state_locked(app->cs, edit_modes, &e);
    const char *shown = e.shown;
    struct mode_change mc = e.mc;
    bool kept = e.kept;
    if (!e.op) {
        chat_numeric(fx, s, 482, "%s :You're not channel operator", shown);
        return;
    }
    if (!mc.nflags)
        return;
    if (!kept) {
        chat_numeric(fx, s, 482,
                     "%s :The modes were not changed: the server keeps no more channels", shown);
        return;
    }
    yard_chatlog_entry_t ev;
    char text[sizeof mc.flags + sizeof mc.params];
    snprintf(text, sizeof text, "%s%s", mc.flags, mc.params);
    chat_presence_ev(&ev, YARD_LOGREC_MODE, s->sender, shown, text);
    chat_presence_put(app, &ev, 1);
}

/* A kick under the lock (kick_out): every connection of the user named
 * by key taken out of channel ch, when one of them is in it. */
struct kick {
    int ch;
    char *key, *spelled; /* member_in's */
    bool found;
    bool connected; /* when not found: whether anybody has the nick */
};

static void kick_out(chat_state_t *cs, void *ctx)
{
    struct kick *k = ctx;
    /* The channel may have emptied (a kick of oneself, the last member) */
    k->found = cs->chans[k->ch].used && member_in(cs, k->ch, k->key, k->spelled) >= 0 &&
               chat_account_leave(cs, k->key, k->ch) > 0;
    k->connected = k->found || anyone_named(cs, k->key);
}

/* One kick of nick out of the channel named chan, by an operator: its
 * kick record in ev (true), or the refusal answered (false). */
static bool kick_one(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *chan,
                     const char *nick, const char *why, size_t wn, yard_chatlog_entry_t *ev)
{
    int ch = chat_channel_of(app, s, fx, chan, true);
    if (ch < 0)
        return false;
    struct chat_chan_view v;
    chat_channel_view(app->cs, ch, s->slot, CHAT_VIEW_RANK, &v);
    const char *shown = v.name;
    if (!(v.rank & CHAT_RANK_OP)) {
        chat_numeric(fx, s, 482, "%s :You're not channel operator", shown);
        return false;
    }
    char key[CHAT_NAME_MAX + 1], spelled[CHAT_NAME_MAX + 1];
    char text[CHAT_NAME_MAX + 2 + KICK_REASON_MAX];
    size_t len = strlen(nick);
    bool found = false, connected = false;
    chat_casefold(key, nick, len > CHAT_NAME_MAX ? CHAT_NAME_MAX : len);
    if (len <= CHAT_NAME_MAX) {
        struct kick k = {.ch = ch, .key = key, .spelled = spelled};
        chat_state_locked(app->cs, kick_out, &k);
        found = k.found;
        connected = k.connected;
    }
    if (!found) {
        not_in_channel(s, fx, connected, nick, shown);
        return false;
    }
    snprintf(text, sizeof text, "%s %.*s", spelled, (int)wn, why);
    chat_presence_ev(ev, YARD_LOGREC_KICK, s->sender, shown, text);
    return true;
}

/* KICK #chan nick[,nick] [:reason], or KICK #a,#b nick,nick (each nick from
 * the channel in its place): an operator takes every connection of each
 * account out of the channel; the members and the kicked hear it through
 * the log (a kick record, "nick reason"), one KICK line per nick. */
void chat_cmd_kick(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    const char *why = m->n > 2 && m->params[2][0] ? m->params[2] : s->nick;
    size_t wn = chat_utf8_cut(why, strlen(why), KICK_REASON_MAX);
    char *targets[TARGMAX], *chans[TARGMAX], *first_dropped, *cfirst;
    int dropped, cdropped;
    int n = chat_split_targets(m->params[1], targets, TARGMAX, &dropped, &first_dropped);
    int nc = chat_split_targets(m->params[0], chans, TARGMAX, &cdropped, &cfirst);
    if (nc == 0 || (nc > 1 && nc != n)) {
        chat_numeric(fx, s, 461, "KICK :Not enough parameters (one channel, or one per nick)");
        return;
    }
    if (dropped)
        chat_numeric(fx, s, 407, "%s :Too many targets: at most %d (TARGMAX)", first_dropped,
                     TARGMAX);
    yard_chatlog_entry_t ev[TARGMAX];
    unsigned nev = 0;
    for (int i = 0; i < n; i++)
        nev += kick_one(app, s, fx, chans[nc == 1 ? 0 : i], targets[i], why, wn, &ev[nev]);
    chat_charge(s, n);
    if (nev)
        chat_presence_put(app, ev, nev);
}

/* An invitation under the lock (invite_in): noted unless the user named
 * by key is in channel ch already, or the asker may not (+i). */
struct invite {
    const struct session *s;
    int ch;
    char *key, *spelled, *shown; /* member_in's; the channel's name (out) */
    bool there, allowed;
};

static void invite_in(chat_state_t *cs, void *ctx)
{
    struct invite *iv = ctx;
    strcpy(iv->shown, cs->chans[iv->ch].name);
    iv->there = member_in(cs, iv->ch, iv->key, iv->spelled) >= 0;
    iv->allowed = !(cs->chans[iv->ch].modes & CHAT_MODE_I) ||
                  (chat_member_rank(cs, iv->s->slot, iv->ch) & CHAT_RANK_OP);
    if (!iv->there && iv->allowed)
        chat_invite_add(cs, iv->ch, iv->key);
}

/* INVITE nick #chan: a member (an operator, when the channel is +i) lets
 * an account join past +i while the channel stays live; the account hears
 * it through the log (an invite record). */
/* INVITE alone: the live channels the connection's account (a guest: its
 * nick) is invited to, 336 each, then 337. */
struct invited {
    const char *key; /* the account (a guest: its nick) */
    unsigned c;      /* the channel looked at */
    bool invited;    /* out: it is live and key is invited; */
    char name[CHAT_CHAN_MAX + 1]; /* its name then */
};

static void invited_to(chat_state_t *cs, void *ctx)
{
    struct invited *iv = ctx;
    iv->invited = cs->chans[iv->c].used && chat_invited(cs, (int)iv->c, iv->key);
    if (iv->invited)
        strcpy(iv->name, cs->chans[iv->c].name);
}

static void invite_list(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    chat_state_t *cs = app->cs;
    unsigned listed = 0;
    struct invited iv = {.key = s->account_key};
    for (iv.c = 0; iv.c < cs->nchan; iv.c++) { /* the lock for one channel at a time */
        chat_state_locked(cs, invited_to, &iv);
        if (iv.invited) {
            chat_numeric(fx, s, 336, "%s", iv.name);
            listed++;
        }
    }
    chat_numeric(fx, s, 337, ":End of /INVITE list");
    chat_charge(s, chat_lines_price(listed + 1));
}

void chat_cmd_invite(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    if (m->n == 0) {
        invite_list(app, s, fx);
        return;
    }
    if (m->n < 2) {
        chat_numeric(fx, s, 461, "INVITE :Not enough parameters");
        return;
    }
    const char *nick = m->params[0];
    struct chat_chan_view v;
    bool exists = chat_channel_lookup(app->cs, m->params[1], strlen(m->params[1]), -1, 0, &v) >= 0;
    if (!exists && chat_valid_channel(m->params[1])) {
        /* Nobody is in it, so nobody's say is needed: the invitation is
         * only told (the channel has no +i to pass yet). */
        struct presence p;
        chat_presence_of(app, nick, &p, NULL, 0);
        if (!p.online) {
            chat_numeric(fx, s, 401, "%s :No such nick/channel", nick);
            return;
        }
        chat_numeric(fx, s, 341, "%s %s", p.nick, m->params[1]);
        yard_chatlog_entry_t ev;
        chat_presence_ev(&ev, YARD_LOGREC_INVITE, s->sender, p.account, m->params[1]);
        chat_presence_put(app, &ev, 1);
        return;
    }
    int ch = chat_channel_of(app, s, fx, m->params[1], true);
    if (ch < 0)
        return;
    struct presence p;
    chat_presence_of(app, nick, &p, NULL, 0);
    if (!p.online) {
        chat_numeric(fx, s, 401, "%s :No such nick/channel", nick);
        return;
    }
    char key[CHAT_NAME_MAX + 1], spelled[CHAT_NAME_MAX + 1], shown[CHAT_CHAN_MAX + 1];
    chat_casefold(key, p.account, strlen(p.account));
    struct invite iv = {.s = s, .ch = ch, .key = key, .spelled = spelled, .shown = shown};
    chat_state_locked(app->cs, invite_in, &iv);
    bool there = iv.there, allowed = iv.allowed;
    if (there) {
        chat_numeric(fx, s, 443, "%s %s :is already on channel", p.nick, shown);
        return;
    }
    if (!allowed) {
        chat_numeric(fx, s, 482, "%s :You're not channel operator (+i)", shown);
        return;
    }
    chat_numeric(fx, s, 341, "%s %s", p.nick, shown);
    yard_chatlog_entry_t ev;
    chat_presence_ev(&ev, YARD_LOGREC_INVITE, s->sender, p.account, shown);
    chat_presence_put(app, &ev, 1);
}

/* A user's MODE: +i, +w and +B are kept (+B marks a bot: WHOIS, WHO and
 * the bot tag on its messages); -o gives up being a server operator, +o
 * is OPER's only (ignored here); other flags: 501. */
static void user_mode(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *flags)
{
    bool on = true, unknown = false;
    enum { FLAGS = 4 };
    bool want[FLAGS] = {s->umode_i, s->umode_w, s->umode_o, s->umode_B};
    bool *had[FLAGS] = {&s->umode_i, &s->umode_w, &s->umode_o, &s->umode_B};
    static const char letter[FLAGS] = {'i', 'w', 'o', 'B'};
    for (const char *p = flags; *p; p++) {
        if (*p == '+' || *p == '-')
            on = *p == '+';
        else if (*p == 'i')
            want[0] = on;
        else if (*p == 'w')
            want[1] = on;
        else if (*p == 'o')
            want[2] = want[2] && on;
        else if (*p == 'B')
            want[3] = on;
        else
            unknown = true;
    }
    if (unknown)
        chat_numeric(fx, s, 501, ":Unknown MODE flag");
    char change[8];
    size_t n = 0;
    for (int sign = 1; sign >= 0; sign--) {
        size_t at = n;
        for (int k = 0; k < FLAGS; k++)
            if (want[k] != *had[k] && want[k] == (sign == 1)) {
                if (n == at)
                    change[n++] = sign ? '+' : '-';
                change[n++] = letter[k];
            }
    }
    change[n] = 0;
    if (!n)
        return;
    for (int k = 0; k < FLAGS; k++)
        *had[k] = want[k];
    if (s->slot >= 0) {
        chat_member_umodes(app->cs, s->slot, s->umode_i, s->umode_o, s->umode_B);
    }
    chat_sendf(fx, ":%s!%s@" SERVER " MODE %s :%s", s->nick, s->nick, s->nick, change);
}

/* MODE #chan [changes], or MODE mynick [changes]. */
void chat_cmd_mode(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    if (m->params[0][0] == '#' || m->params[0][0] == '&')
        chan_mode(app, s, fx, m);
    else if (strcasecmp(m->params[0], s->nick))
        chat_numeric(fx, s, 502, ":Cannot change mode for other users");
    else if (m->n == 1)
        chat_numeric(fx, s, 221, "+%s%s%s%s", s->umode_B ? "B" : "", s->umode_i ? "i" : "",
                     s->umode_w ? "w" : "", s->umode_o ? "o" : "");
    else
        user_mode(app, s, fx, m->params[1]);
}
