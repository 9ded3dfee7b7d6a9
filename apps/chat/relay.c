/* The log and the news: what a chat connection hears (relay.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "label.h"
#include "monitor.h"
#include "oper.h"
#include "relay.h"
#include "session.h"
#include "yard/hash.h"
#include "yard/log.h"

#define NEWS_BATCH 1024 /* records relayed per news call before yielding */

static bool is_presence(int type)
{
    return type == YARD_LOGREC_JOIN || type == YARD_LOGREC_PART || type == YARD_LOGREC_QUIT ||
           type == YARD_LOGREC_AWAY || type == YARD_LOGREC_NICK;
}

size_t chat_rec_text(const yard_chatlog_rec_t *r, char *out, size_t cap)
{
    size_t n = r->text_len < cap ? r->text_len : cap - 1;
    memcpy(out, r->text, n);
    n = yard_irc_strip_controls(out, n);
    out[n] = 0;
    return n;
}

void chat_own_push(struct session *s, uint64_t id)
{
    if (s->relay.own_len == OWN_RING) { /* forget the oldest: it will be relayed back once */
        s->relay.own_head = (s->relay.own_head + 1) % OWN_RING;
        s->relay.own_len--;
    }
    s->relay.own[(s->relay.own_head + s->relay.own_len) % OWN_RING] = id;
    s->relay.own_len++;
}

/* Is id one this connection sent? Ids come in order, so the ring's front
 * is the only candidate (older fronts were passed). */
static bool own_pop(struct session *s, uint64_t id)
{
    while (s->relay.own_len && s->relay.own[s->relay.own_head] < id) {
        s->relay.own_head = (s->relay.own_head + 1) % OWN_RING;
        s->relay.own_len--;
    }
    if (s->relay.own_len && s->relay.own[s->relay.own_head] == id) {
        s->relay.own_head = (s->relay.own_head + 1) % OWN_RING;
        s->relay.own_len--;
        return true;
    }
    return false;
}

/* A message record's text may start with its sender's client-only tags,
 * ended by a NUL (a client's text never holds one: such a line gets 421):
 * *r is left with the text after it. */
static void split_client_tags(yard_chatlog_rec_t *r, const char **tags, size_t *tags_len)
{
    const char *nul = memchr(r->text, 0, r->text_len);
    *tags = NULL;
    *tags_len = 0;
    if (!nul)
        return;
    *tags = r->text;
    *tags_len = (size_t)(nul - r->text);
    r->text_len -= *tags_len + 1;
    r->text = nul + 1;
}

/* The tags a connection asked for on a relayed record: server-time, msgid
 * (message-tags; the log's id, the same for everyone), account
 * (account-tag; every sender is an account), extra (the batch it is part
 * of, "batch=R", or its request's label, "label=X"), and a message's
 * client-only tags (message-tags): "" or "@... " ending in a space. */
static void tags_with(const struct session *s, const yard_chatlog_rec_t *r, bool guest,
                      const char *extra, const char *ctags, size_t ctags_len, char *out,
                      size_t cap)
{
    size_t n = 0;
    out[0] = 0;
#define TAG(...) n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, __VA_ARGS__)
    if (s->caps & CAP_TIME) {
        char t[40];
        chat_format_time(t, sizeof t, r->ts_ns);
        TAG("%ctime=%s", n ? ';' : '@', t);
    }
    if (s->caps & CAP_MESSAGE_TAGS)
        TAG("%cmsgid=%llu", n ? ';' : '@', (unsigned long long)r->id);
    if ((s->caps & CAP_ACCOUNT_TAG) && !guest) /* a guest has no account: no tag */
        TAG("%caccount=%.*s", n ? ';' : '@', (int)r->sender_len, r->sender);
    if (extra && extra[0])
        TAG("%c%s", n ? ';' : '@', extra);
    if (ctags_len && (s->caps & CAP_MESSAGE_TAGS))
        TAG("%c%.*s", n ? ';' : '@', (int)ctags_len, ctags);
    if (n)
        TAG(" ");
#undef TAG
    if (n >= cap)
        out[0] = 0; /* cannot happen with the sizes used: no tags rather than half */
}

/* tags_with, for a record without client-only tags. */
static void tags_for(const struct session *s, const yard_chatlog_rec_t *r, bool guest,
                     const char *extra, char *out, size_t cap)
{
    tags_with(s, r, guest, extra, NULL, 0, out, cap);
}

/* A message, notice, TAGMSG or topic record as its line, from its sender
 * (from), with extra among its tags (tags_with). */
static void relay_line(yard_fx_t *fx, const struct session *s, const yard_chatlog_rec_t *r,
                       const yard_chat_from_t *from, const char *extra)
{
    bool guest = from->guest;
    int fn = (int)from->nick_len;
    const char *cmd = r->type == YARD_LOGREC_NOTICE  ? "NOTICE"
                      : r->type == YARD_LOGREC_TOPIC ? "TOPIC"
                                                     : "PRIVMSG";
    const char *ctags = NULL;
    size_t ctags_len = 0;
    yard_chatlog_rec_t msg = *r;
    if (r->type != YARD_LOGREC_TOPIC)
        split_client_tags(&msg, &ctags, &ctags_len);
    if (msg.target_len > 1 && msg.target[0] == '~') { /* a guest: its nick */
        msg.target++;
        msg.target_len--;
    }
    r = &msg;
    char tags[CLIENT_TAGS_MAX + 400]; /* a label (CHAT_LABEL_MAX) among the server's tags */
    if (r->type == YARD_LOGREC_TAGMSG) { /* only tags: for clients that take them */
        if (!(s->caps & CAP_MESSAGE_TAGS))
            return;
        tags_with(s, r, guest, extra, ctags, ctags_len, tags, sizeof tags);
        chat_sendf(fx, "%s:%.*s!%.*s@" SERVER " TAGMSG %.*s", tags, fn, from->nick, fn, from->nick,
                   (int)r->target_len, r->target);
        return;
    }
    /* Text is stored without control characters (chat_data removes them),
     * but a log written before that rule may hold some. */
    char clean[YARD_LOGREC_TEXT_MAX + 1];
    yard_chatlog_rec_t copy;
    if (yard_irc_has_controls(r->text, r->text_len)) {
        copy = *r;
        memcpy(clean, r->text, r->text_len);
        copy.text_len = yard_irc_strip_controls(clean, r->text_len);
        copy.text = clean;
        r = &copy;
    }
    tags_with(s, r, guest, extra, ctags, ctags_len, tags, sizeof tags);
    /* To this connection's account: shown to its nick */
    const char *to = r->target;
    int tn = (int)r->target_len;
    char key[CHAT_NAME_MAX + 1];
    if (r->target_len <= CHAT_NAME_MAX && r->target[0] != '#' && r->target[0] != '&') {
        chat_casefold(key, r->target, r->target_len);
        if (!strcmp(key, s->account_key)) {
            to = s->nick;
            tn = (int)strlen(s->nick);
        }
    }
    chat_sendf(fx, "%s:%.*s!%.*s@" SERVER " %s %.*s :%.*s", tags, fn, from->nick, fn, from->nick,
               cmd, tn, to, (int)r->text_len, r->text);
}

/* A presence or channel operator's record (join, part, quit, away, nick,
 * kick, mode) as its line, from its sender (from), after tags (a prefix
 * of the line: "" or "@...; "). */
static void event_line(yard_fx_t *fx, const struct session *s, const yard_chatlog_rec_t *r,
                       const yard_chat_from_t *from, const char *tags)
{
    char text[YARD_CHATLOG_DEFER_TEXT];
    size_t wn = chat_rec_text(r, text, sizeof text);
    int fn = (int)from->nick_len, tn = (int)r->target_len;
    const char *nick = from->nick;
    switch (r->type) {
    case YARD_LOGREC_JOIN: /* extended-join: the account and the realname (else the nick) */
        if (s->caps & CAP_EXTENDED_JOIN)
            chat_sendf(fx, "%s:%.*s!%.*s@" SERVER " JOIN %.*s %.*s :%.*s", tags, fn, nick, fn, nick,
                       tn, r->target, from->guest ? 1 : (int)r->sender_len,
                       from->guest ? "*" : r->sender, wn ? (int)wn : fn, wn ? text : nick);
        else
            chat_sendf(fx, "%s:%.*s!%.*s@" SERVER " JOIN %.*s", tags, fn, nick, fn, nick, tn,
                       r->target);
        break;
    case YARD_LOGREC_PART:
        chat_sendf(fx, "%s:%.*s!%.*s@" SERVER " PART %.*s%s%s", tags, fn, nick, fn, nick, tn,
                   r->target, wn ? " :" : "", text);
        break;
    case YARD_LOGREC_AWAY:
        chat_sendf(fx, "%s:%.*s!%.*s@" SERVER " AWAY%s%s", tags, fn, nick, fn, nick,
                   wn ? " :" : "", text);
        break;
    case YARD_LOGREC_NICK:
        chat_sendf(fx, "%s:%.*s!%.*s@" SERVER " NICK :%s", tags, fn, nick, fn, nick, text);
        break;
    case YARD_LOGREC_QUIT:
        chat_sendf(fx, "%s:%.*s!%.*s@" SERVER " QUIT :%s", tags, fn, nick, fn, nick, text);
        break;
    case YARD_LOGREC_KICK: { /* "nick reason" */
        size_t vn = strcspn(text, " ");
        chat_sendf(fx, "%s:%.*s!%.*s@" SERVER " KICK %.*s %.*s :%s", tags, fn, nick, fn, nick, tn,
                   r->target, (int)vn, text, text[vn] ? text + vn + 1 : "");
        break;
    }
    case YARD_LOGREC_MODE:
        chat_sendf(fx, "%s:%.*s!%.*s@" SERVER " MODE %.*s %s", tags, fn, nick, fn, nick, tn,
                   r->target, text);
        break;
    }
}

void chat_relay(yard_fx_t *fx, const struct session *s, const yard_chatlog_rec_t *r,
                const yard_chat_from_t *from, const char *batch)
{
    char tag[40] = "";
    if (batch && batch[0])
        snprintf(tag, sizeof tag, "batch=%s", batch);
    if (r->type == YARD_LOGREC_MESSAGE || r->type == YARD_LOGREC_NOTICE ||
        r->type == YARD_LOGREC_TAGMSG || r->type == YARD_LOGREC_TOPIC) {
        relay_line(fx, s, r, from, tag);
        return;
    }
    char tags[240];
    tags_for(s, r, from->guest, tag, tags, sizeof tags);
    event_line(fx, s, r, from, tags);
}

/* Is this record for this connection, and through which channel? */
static bool for_me(struct chat_app *app, struct session *s, const yard_chatlog_rec_t *r,
                   char *chan_key)
{
    chan_key[0] = 0;
    char target[CHAT_CHAN_MAX + 2];
    if (r->target_len > CHAT_CHAN_MAX + 1)
        return false;
    chat_casefold(target, r->target, r->target_len);
    char status = chat_status_prefix(target); /* "@#chan", "+#chan": by rank */
    const char *chan = status ? target + 1 : target;
    if (chan[0] == '#' || chan[0] == '&') {
        struct chat_chan_view v;
        chat_channel_lookup(app->cs, chan, strlen(chan), s->slot, status ? CHAT_VIEW_RANK : 0, &v);
        bool in = v.in;
        if (in && status)
            in = status == '@' ? (v.rank & CHAT_RANK_OP) != 0 : v.rank != 0;
        if (in && !status) /* read positions are of what every member hears */
            strcpy(chan_key, target);
        return in;
    }
    if (r->target[0] == '~') /* to a guest, as the log names one (rfc1459 folds '~' to '^') */
        return s->guest && !strcmp(target + 1, s->account_key);
    return strcmp(target, s->account_key) == 0;
}

/* The target of a nick record: "*SLOT:SERIAL", the member that changed
 * its nick (state.h's slot and serial). */
#define NICK_TARGET CHAT_MEMBER_TARGET

/* The slot of the member a nick record names, when it is still connected
 * and shares a channel with this connection (and is not it); else -1. A
 * target that does not parse names nobody. */
static int nick_member(struct chat_app *app, const struct session *s, const yard_chatlog_rec_t *r)
{
    char t[YARD_LOGREC_NAME_MAX + 1];
    memcpy(t, r->target, r->target_len); /* target_len <= YARD_LOGREC_NAME_MAX: decoded */
    t[r->target_len] = 0;
    int slot, end = 0;
    unsigned long long serial;
    if (sscanf(t, NICK_TARGET "%n", &slot, &serial, &end) != 2 || end != (int)r->target_len ||
        slot < 0 || s->slot < 0 || slot == s->slot)
        return -1;
    return chat_member_still_shares(app->cs, slot, serial, s->slot) ? slot : -1;
}

/* Whether anybody could be told of the member in slot's changes: it is in
 * a channel, or somebody monitors anything. Under the lock. */
static bool member_heard(chat_state_t *cs, int slot)
{
    const struct chat_member *m = chat_member_at(cs, slot);
    bool anywhere = false;
    for (unsigned w = 0; w < cs->words && !anywhere; w++)
        anywhere = m->chans[w] != 0;
    return anywhere || cs->monitoring;
}

/* A record of type naming the member in slot (its target: NICK_TARGET). */
static void member_ev(chat_state_t *cs, yard_chatlog_entry_t *e, int slot, int type,
                      const char *sender, const char *text)
{
    char target[YARD_LOGREC_NAME_MAX + 1];
    snprintf(target, sizeof target, NICK_TARGET, slot,
             (unsigned long long)chat_member_at(cs, slot)->serial);
    chat_presence_ev(e, type, sender, target, text);
}

/* One record of type naming the member in slot, when anybody could hear
 * it: false when the log's queue has no room. */
static bool member_put(struct chat_app *app, int slot, int type, const char *sender,
                       const char *text)
{
    if (!member_heard(app->cs, slot))
        return true;
    yard_chatlog_entry_t e;
    member_ev(app->cs, &e, slot, type, sender, text);
    return yard_chatlog_defer(app->log, &e, 1);
}

bool chat_nick_put(struct chat_app *app, int slot, const char *sender, const char *nick)
{
    return member_put(app, slot, YARD_LOGREC_NICK, sender, nick);
}

bool chat_setname_put(struct chat_app *app, int slot, const char *sender, const char *realname)
{
    return member_put(app, slot, YARD_LOGREC_SETNAME, sender, realname);
}

bool chat_login_put(struct chat_app *app, int slot, const struct chat_login_news *n)
{
    if (!member_heard(app->cs, slot))
        return true;
    yard_chatlog_entry_t e[2];
    unsigned k = 0;
    if (n->nick)
        member_ev(app->cs, &e[k++], slot, YARD_LOGREC_NICK, n->old_sender, n->nick);
    member_ev(app->cs, &e[k++], slot, YARD_LOGREC_ACCOUNT, n->new_sender, n->account);
    return yard_chatlog_defer(app->log, e, k); /* both or neither */
}

/* A join, part or quit of another account in a channel this connection
 * is in. An account's own presence is never relayed to it: its connection
 * that joined or left was answered directly, and the log has a join only
 * when the account's first connection joins, a part or quit only when its
 * last one leaves. */
static void presence_relay(struct chat_app *app, struct session *s, yard_fx_t *fx,
                           const yard_chatlog_rec_t *r, const yard_chat_from_t *from)
{
    bool guest = from->guest;
    char sender[CHAT_NAME_MAX + 1], key[CHAT_CHAN_MAX + 1];
    if (r->sender_len > CHAT_NAME_MAX)
        return;
    chat_casefold(sender, r->sender, r->sender_len);
    int nick_slot = -1;
    if (r->type == YARD_LOGREC_NICK && r->target_len && r->target[0] == '*') {
        /* One record per change, naming the member (chat_nick_put): told
         * when this connection shares a channel with it. */
        nick_slot = nick_member(app, s, r);
        if (nick_slot < 0)
            return;
    }
    bool grouped = r->type == YARD_LOGREC_QUIT || r->type == YARD_LOGREC_AWAY ||
                   (r->type == YARD_LOGREC_NICK && nick_slot < 0); /* a log from before: per
                                                                     * channel */
    if (grouped) { /* one record per channel: told once */
        /* Consecutive records of one sender, type and text: one change
         * (two changes in a row differ in their text: away, back) */
        uint64_t text_hash = yard_fnv1a(YARD_FNV1A_INIT, r->text, r->text_len);
        if (r->id != s->relay.group_id + 1 || r->type != s->relay.group_type ||
            text_hash != s->relay.group_text || strcmp(sender, s->relay.group_key) != 0) {
            strcpy(s->relay.group_key, sender); /* a new departure or away change */
            s->relay.group_type = r->type;
            s->relay.group_text = text_hash;
            s->relay.group_told = false;
        }
        s->relay.group_id = r->id;
        if (s->relay.group_told)
            return;
    }
    if (r->type == YARD_LOGREC_AWAY && !(s->caps & CAP_AWAY_NOTIFY))
        return;
    /* An AWAY's last record, to "*", is for those that monitor it
     * (extended-monitor) and were not told through a channel. */
    bool to_monitors = r->type == YARD_LOGREC_AWAY && r->target_len == 1 && r->target[0] == '*';
    if (to_monitors ? !chat_monitor_watches(s, from)
                    : nick_slot < 0 && (!strcmp(sender, s->account_key) || !for_me(app, s, r, key)))
        return;
    if (r->type == YARD_LOGREC_NICK && r->text_len <= CHAT_NAME_MAX) {
        char to[CHAT_NAME_MAX + 1];
        chat_casefold(to, r->text, r->text_len);
        char mine[CHAT_NAME_MAX + 1];
        chat_casefold(mine, s->nick, strlen(s->nick));
        if (!strcmp(to, mine))
            return; /* the one that changed its nick: told at once */
    }
    char tags[200];
    tags_for(s, r, guest, NULL, tags, sizeof tags);
    s->relay.group_told = grouped;
    event_line(fx, s, r, from, tags);
}

/* A SETNAME of a member this connection shares a channel with or
 * monitors (extended-monitor), for a client with the capability (the
 * member itself was answered at once). */
static void setname_relay(struct chat_app *app, struct session *s, yard_fx_t *fx,
                          const yard_chatlog_rec_t *r, const yard_chat_from_t *from)
{
    if (!(s->caps & CAP_SETNAME) ||
        (nick_member(app, s, r) < 0 && !chat_monitor_watches(s, from)))
        return;
    char tags[200], real[YARD_CHATLOG_DEFER_TEXT];
    tags_for(s, r, from->guest, NULL, tags, sizeof tags);
    chat_rec_text(r, real, sizeof real);
    int fn = (int)from->nick_len;
    chat_sendf(fx, "%s:%.*s!%.*s@" SERVER " SETNAME :%s", tags, fn, from->nick, fn, from->nick, real);
}

/* IRCv3 account-notify: a member this connection shares a channel with,
 * or monitors (extended-monitor), logged in (the member itself was
 * answered 900; the account's own other connections knew already). */
static void account_relay(struct chat_app *app, struct session *s, yard_fx_t *fx,
                          const yard_chatlog_rec_t *r, const yard_chat_from_t *from)
{
    char account[CHAT_NAME_MAX + 1];
    if (!(s->caps & CAP_ACCOUNT_NOTIFY) || r->text_len < 1 || r->text_len > CHAT_NAME_MAX ||
        (nick_member(app, s, r) < 0 && !chat_monitor_watches(s, from)))
        return;
    memcpy(account, r->text, r->text_len);
    account[r->text_len] = 0;
    char key[CHAT_NAME_MAX + 1];
    chat_casefold(key, account, r->text_len);
    if (!strcmp(key, s->account_key))
        return;
    char tags[200];
    tags_for(s, r, false, NULL, tags, sizeof tags);
    int fn = (int)from->nick_len;
    chat_sendf(fx, "%s:%.*s!%.*s@" SERVER " ACCOUNT %s", tags, fn, from->nick, fn, from->nick,
               account);
}

/* A MODE or KICK in a channel this connection is in (its setter's
 * included), a KICK of its account, or an INVITE of its account. */
static void chanop_relay(struct chat_app *app, struct session *s, yard_fx_t *fx,
                         const yard_chatlog_rec_t *r, const yard_chat_from_t *from)
{
    bool guest = from->guest;
    const char *nick = from->nick;
    char key[CHAT_CHAN_MAX + 1], tags[200], text[YARD_CHATLOG_DEFER_TEXT];
    bool to_me = for_me(app, s, r, key);
    chat_rec_text(r, text, sizeof text);
    int sn = (int)from->nick_len;
    if (r->type == YARD_LOGREC_KICK) {
        /* "nick reason": the kicked account is out of the channel already,
         * so it hears the kick as its nick's */
        size_t vn = strcspn(text, " ");
        char victim[CHAT_NAME_MAX + 1], mine[CHAT_NAME_MAX + 1];
        if (vn > CHAT_NAME_MAX)
            return;
        chat_casefold(victim, text, vn);
        chat_casefold(mine, s->nick, strlen(s->nick));
        if (!to_me && strcmp(victim, mine))
            return;
    } else if (!to_me) {
        return;
    }
    tags_for(s, r, guest, NULL, tags, sizeof tags);
    if (r->type == YARD_LOGREC_INVITE)
        chat_sendf(fx, "%s:%.*s!%.*s@" SERVER " INVITE %s %s", tags, sn, nick, sn, nick,
                   s->nick, text);
    else
        event_line(fx, s, r, from, tags);
}

/* A read marker of this connection's account moved: tell it (all its
 * connections with the capability, the one that moved it included). */
static void marker_relay(struct session *s, yard_fx_t *fx, const yard_chatlog_rec_t *r)
{
    char sender[CHAT_NAME_MAX + 1];
    if (!(s->caps & CAP_READ_MARKER) || r->sender_len > CHAT_NAME_MAX)
        return;
    chat_casefold(sender, r->sender, r->sender_len);
    if (!strcmp(sender, s->account_key))
        chat_sendf(fx, ":" SERVER " MARKREAD %.*s timestamp=%.*s", (int)r->target_len, r->target,
                   (int)r->text_len, r->text);
}

/* Read positions move once per channel per batch of relayed records, not
 * once per record: each move takes the shared lock. */
struct pos_batch {
    struct {
        char key[CHAT_CHAN_MAX + 1];
        uint64_t id;
    } at[8];
    int n;
};

static void pos_flush(struct chat_app *app, struct session *s, struct pos_batch *pb)
{
    for (int i = 0; i < pb->n; i++)
        chat_pos_set(app->cs, s->account, s->client, pb->at[i].key, pb->at[i].id);
    pb->n = 0;
}

static void pos_note(struct chat_app *app, struct session *s, struct pos_batch *pb,
                     const char *key, uint64_t id)
{
    for (int i = 0; i < pb->n; i++)
        if (strcmp(pb->at[i].key, key) == 0) {
            pb->at[i].id = id;
            return;
        }
    if (pb->n == (int)(sizeof pb->at / sizeof pb->at[0]))
        pos_flush(app, s, pb);
    strcpy(pb->at[pb->n].key, key);
    pb->at[pb->n++].id = id;
}

/* The log cannot be read for this connection: it cannot go on relaying,
 * and must not spin on the same record. `yard-chat log verify` says where. */
static void log_unreadable(struct session *s, yard_fx_t *fx, int err)
{
    yard_log_err("chat: reading the log for %s after id %llu: %s", s->account,
                 (unsigned long long)s->relay.seen, strerror(-err));
    chat_sendf(fx, "ERROR :Closing Link: the server cannot read its log");
    yard_fx_close(fx, NULL);
}

/* Relay the records of one read at s->relay.cur; *count grows by those taken.
 * 0, or -EBADMSG on committed bytes that do not decode. */
static int relay_read(struct chat_app *app, struct session *s, yard_fx_t *fx, const uint8_t *buf,
                      size_t len, int *count)
{
    yard_chatlog_rec_t r;
    struct pos_batch pos = {0};
    size_t at = 0;
    int rc;
    chat_label_interim(s, fx); /* what is relayed is no labeled answer (but the post's own) */
    while ((rc = yard_chatlog_take(&s->relay.cur, buf, len, &at, &r)) == 1) {
        ++*count;
        if (r.id <= s->relay.seen)
            continue;
        s->relay.seen = r.id;
        yard_chat_from_t from = yard_chat_from(&r); /* r->sender: who sent it */
        if (r.type == YARD_LOGREC_READ) {
            marker_relay(s, fx, &r);
            continue;
        }
        if (r.type == YARD_LOGREC_KILL || r.type == YARD_LOGREC_WALLOPS) {
            chat_oper_relay(app, s, fx, &r, &from);
            continue;
        }
        if (r.type == YARD_LOGREC_ONLINE || r.type == YARD_LOGREC_NICK)
            chat_monitor_relay(app, s, fx, &r, &from);
        if (r.type == YARD_LOGREC_ONLINE)
            continue;
        if (is_presence(r.type)) {
            presence_relay(app, s, fx, &r, &from);
            continue;
        }
        if (r.type == YARD_LOGREC_SETNAME) {
            setname_relay(app, s, fx, &r, &from);
            continue;
        }
        if (r.type == YARD_LOGREC_ACCOUNT) {
            account_relay(app, s, fx, &r, &from);
            continue;
        }
        if (r.type == YARD_LOGREC_MODE || r.type == YARD_LOGREC_KICK ||
            r.type == YARD_LOGREC_INVITE) {
            chanop_relay(app, s, fx, &r, &from);
            continue;
        }
        char key[CHAT_CHAN_MAX + 1], label[CHAT_LABEL_MAX + 8] = "";
        bool mine = own_pop(s, r.id);
        bool to_me = for_me(app, s, &r, key);
        /* echo-message: the sender sees its message, a private one too. A
         * topic change goes to every member, its setter included. */
        bool echo = mine && r.type != YARD_LOGREC_TOPIC && (s->caps & CAP_ECHO);
        /* A private message to oneself (not a STATUSMSG "@#chan", whose
         * key is empty too: its sender is not sent it back). */
        bool to_channel = r.target_len && strchr("#&@+", r.target[0]);
        bool to_self = mine && to_me && !key[0] && !to_channel && r.type != YARD_LOGREC_TOPIC;
        bool shown = r.type == YARD_LOGREC_TOPIC ? to_me : mine ? echo || to_self : to_me;
        if (r.type == YARD_LOGREC_TAGMSG && !(s->caps & CAP_MESSAGE_TAGS))
            shown = false; /* tags only: nothing for a client that takes none */
        /* Its own records may be a labeled request's answer (label.h). */
        bool answer = mine && chat_label_record(s, fx, r.id, shown, label, sizeof label);
        if (shown && echo && to_self) /* to oneself: delivered, and echoed */
            relay_line(fx, s, &r, &from, NULL);
        if (shown)
            relay_line(fx, s, &r, &from, label);
        if (answer)
            chat_label_record_done(s, fx);
        if (to_me && key[0] && r.type != YARD_LOGREC_TAGMSG && !s->guest)
            pos_note(app, s, &pos, key, r.id);
    }
    pos_flush(app, s, &pos);
    chat_label_skip(s, fx);
    return rc < 0 ? rc : 0;
}

/* Relay what the log's tail holds past s->relay.seen, NEWS_BATCH records at
 * most: 0, -EAGAIN when the rest is not in the tail (a read job's work),
 * or -EBADMSG after closing the connection. */
static int relay_tail(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    int n = 0;
    while (n < NEWS_BATCH) {
        long got = yard_chatlog_read_tail(app->log, &s->relay.cur, s->rd.buf, sizeof s->rd.buf);
        if (got == -EAGAIN)
            return -EAGAIN;
        if (got <= 0)
            break;
        int rc = relay_read(app, s, fx, s->rd.buf, (size_t)got, &n);
        if (rc < 0) {
            log_unreadable(s, fx, rc);
            return rc;
        }
    }
    return 0;
}

/* Before this connection joins or leaves a channel, it relays what is
 * already in the log: what happened before it joined is not news to it
 * afterwards (the NAMES it gets shows it), and what was said before it left
 * is still its to hear. */
void chat_catch_up(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    if (!s->relay.posting)
        relay_tail(app, s, fx); /* a connection further behind reads on as before */
}

/* Relay what the log holds past s->relay.seen, then watch from there. What is in
 * the log's tail is read from memory; a connection further behind reads
 * the files in a job (read_done goes on from there). */
void chat_news(void *state, void *session, yard_fx_t *fx)
{
    struct chat_app *app = state;
    struct session *s = session;
    if (s->state != ST_READY) { /* its slot's topic: was it shed? */
        if (!chat_shed(app, s, fx) && s->login.enter_ticket) {
            uint32_t topic = 1 + (uint32_t)chat_guard_slot(s->login.enter_ticket);
            yard_fx_watch(fx, app->bus, topic, yard_bus_seq(app->bus, topic));
        }
        return;
    }
    if (s->relay.posting)
        return; /* after the post: its ids must be known as ours first */
    int rc = relay_tail(app, s, fx);
    if (rc == -EAGAIN) {
        s->rd.store = app->store;
        s->rd.cur = s->relay.cur;
        s->rd.op = YARD_CHAT_READ;
        yard_fx_io(fx, yard_chat_store_run, &s->rd);
        return;
    }
    if (rc == 0)
        yard_fx_watch(fx, app->bus, 0, s->relay.seen);
}

void chat_read_done(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    struct yard_chat_read *j = &s->rd;
    s->relay.cur = j->cur; /* the read placed it (or moved it to the next segment) */
    int n = 0, rc = j->n < 0 ? (int)j->n : relay_read(app, s, fx, j->buf, (size_t)j->n, &n);
    if (rc < 0) {
        log_unreadable(s, fx, rc);
        return;
    }
    yard_fx_watch(fx, app->bus, 0, s->relay.seen); /* news goes on from here */
}

/* Presence (a member joining, leaving, quitting) goes through the log like
 * a message, so that everyone sees it in the log's one order. Callbacks
 * may not do I/O, so they defer the records (yard_chatlog_defer): the next
 * append, a post's included, writes them first, and the log's writer
 * thread writes them when nobody posts. */
void chat_presence_ev(yard_chatlog_entry_t *e, int type, const char *sender,
                      const char *target, const char *text)
{
    e->type = type;
    snprintf(e->sender, sizeof e->sender, "%s", sender);
    snprintf(e->target, sizeof e->target, "%s", target);
    e->text_len = (uint16_t)chat_utf8_cut(text, strlen(text), sizeof e->text - 1);
    memcpy(e->text, text, e->text_len);
    e->text[e->text_len] = 0;
}

void chat_presence_put(struct chat_app *app, yard_chatlog_entry_t *ev, unsigned n)
{
    static const char *const what[] = {
        [YARD_LOGREC_JOIN] = "joined", [YARD_LOGREC_PART] = "left", [YARD_LOGREC_QUIT] = "left",
        [YARD_LOGREC_AWAY] = "went away or came back in", [YARD_LOGREC_MODE] = "changed the modes of",
        [YARD_LOGREC_KICK] = "kicked somebody out of", [YARD_LOGREC_INVITE] = "invited"};
    if (!yard_chatlog_defer(app->log, ev, n))
        yard_log_limited(YARD_LOG_WARN, "chat: that %s %s %s is not told: the queue for the log "
                                        "is full (is the disk stalled?)",
                         ev[0].sender,
                         ev[0].type >= 0 && ev[0].type < (int)(sizeof what / sizeof what[0]) &&
                                 what[ev[0].type]
                             ? what[ev[0].type]
                             : "changed",
                         ev[0].target);
}

/* One record of type per channel set in bits (cs->words words), from
 * sender with text, under the lock: an array of *n to presence_put and
 * free (NULL when there is none, or no memory). */
yard_chatlog_entry_t *chat_events_per_channel(chat_state_t *cs, const uint64_t *bits, int type,
                                              const char *sender, const char *text,
                                              unsigned *n)
{
    unsigned count = 0;
    *n = 0;
    for (unsigned w = 0; w < cs->words; w++)
        count += (unsigned)__builtin_popcountll(bits[w]);
    yard_chatlog_entry_t *ev = count ? malloc(count * sizeof *ev) : NULL;
    for (unsigned w = 0; ev && w < cs->words; w++)
        for (uint64_t b = bits[w]; b; b &= b - 1)
            chat_presence_ev(&ev[(*n)++], type, sender,
                             cs->chans[w * 64 + (unsigned)__builtin_ctzll(b)].name, text);
    return ev;
}

/* Is the account in channel c through a connection other than slot? Under
 * the lock. */
bool chat_account_in_elsewhere(struct chat_app *app, const struct session *s, int c)
{
    uint64_t bits[(CHAT_CHANNELS_LIMIT + 63) / 64] = {0};
    chat_account_others(app->cs, s->account_key, s->slot, bits);
    return bits[c / 64] >> (c % 64) & 1;
}
