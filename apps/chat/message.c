/* PRIVMSG, NOTICE, TAGMSG and the post job's two ends (message.h). */
#include <stdio.h>
#include <string.h>

#include "bans.h"
#include "label.h"
#include "message.h"
#include "query.h"
#include "relay.h"
#include "session.h"
#include "yard/log.h"

/* A post: the message's targets, checked here, go into the post job. */
void chat_post_begin(struct chat_app *app, struct session *s, int type, const char *text)
{
    struct yard_chat_post *j = &s->post;
    j->store = app->store;
    j->sender = s->sender;
    j->type = type;
    j->n = 0;
    j->tags_len = 0;
    snprintf(j->text, sizeof j->text, "%s", text);
}

void chat_post_target(struct session *s, const char *name, bool person)
{
    struct yard_chat_post *j = &s->post;
    /* What fits the relayed line ":acc!acc@yard PRIVMSG target :text\r\n". */
    size_t room = LINE_MAX_MSG - 2 - (1 + 2 * strlen(s->nick) + 2 + strlen(SERVER) + 1 + 7 +
                                      1 + strlen(name) + 2);
    snprintf(j->t[j->n].name, sizeof j->t[j->n].name, "%s", name);
    j->t[j->n].person = person;
    j->t[j->n].text_len = chat_utf8_cut(j->text, strlen(j->text), room);
    j->t[j->n].rc = 0;
    j->n++;
}

/* Hand the post to the engine's I/O (nothing to do without targets). */
void chat_post_start(struct session *s, yard_fx_t *fx)
{
    if (!s->post.n)
        return;
    s->relay.posting = true;
    s->post.op = YARD_CHAT_POST;
    yard_fx_io(fx, yard_chat_store_run, &s->post);
}

/* The appends are done: what this connection sent is its own (not echoed
 * back unless asked), and everyone hears of the news. */
void chat_post_done(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    struct yard_chat_post *j = &s->post;
    int delivered = 0;
    uint64_t first = 0, last = 0;
    for (int i = 0; i < j->n; i++) {
        if (j->t[i].rc == YARD_CHAT_NO_SUCH_NICK) {
            if (j->type != YARD_LOGREC_NOTICE)
                chat_numeric(fx, s, 401, "%s :No such nick/channel", j->t[i].name);
        } else if (j->t[i].rc < 0) {
            yard_log_err("chat: appending to the log: %s", strerror(-j->t[i].rc));
            chat_sendf(fx, ":" SERVER " NOTICE %s :Message not delivered: the server cannot store "
                           "it (%s)",
                       s->nick, strerror(-j->t[i].rc));
        } else {
            chat_own_push(s, j->t[i].id);
            first = first ? first : j->t[i].id;
            last = j->t[i].id;
            delivered++;
        }
    }
    s->relay.posting = false;
    if (j->type != YARD_LOGREC_TOPIC)
        chat_charge(s, delivered);
    /* A labeled request's answer is what comes back of its records: the
     * echoes (echo-message) or the topic change. They are relayed now,
     * within its answer, as far as the log's tail holds them. */
    if (delivered && (j->type == YARD_LOGREC_TOPIC || (s->caps & CAP_ECHO)))
        chat_label_expect(s, first, last, (unsigned)delivered);
    if (chat_label_awaits_records(s))
        chat_catch_up(app, s, fx);
    if (last)
        yard_bus_publish(app->bus, 0, last);
}

/* Split a comma list of targets in place: each target once (compared
 * casefolded), at most max of them; the rest are counted in *dropped (the
 * first of them in *first_dropped). Returns how many there are. */
int chat_split_targets(char *list, char **out, int max, int *dropped, char **first_dropped)
{
    int n = 0;
    *dropped = 0;
    *first_dropped = NULL;
    char keys[TARGMAX][CHAT_CHAN_MAX + 1];
    char *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char k[CHAT_CHAN_MAX + 1];
        size_t len = strlen(t);
        chat_casefold(k, t, len > CHAT_CHAN_MAX ? CHAT_CHAN_MAX : len);
        bool dup = false;
        for (int i = 0; i < n && !dup; i++)
            dup = strcmp(keys[i], k) == 0;
        if (dup)
            continue;
        if (n == max) {
            if (!(*dropped)++)
                *first_dropped = t;
            continue;
        }
        strcpy(keys[n], k);
        out[n++] = t;
    }
    return n;
}

/* Whether a member may speak in the channel named name, as read under
 * the lock (may_speak). */
struct speak {
    const struct session *s;
    const char *name;
    int c; /* the live channel, or -1 */
    bool in, muted, banned;
    uint32_t modes;
    char shown[CHAT_CHAN_MAX + 1];
};

static void may_speak(chat_state_t *cs, void *ctx)
{
    struct speak *sp = ctx;
    const struct session *s = sp->s;
    int c = sp->c = chat_channel_find(cs, sp->name, strlen(sp->name), false);
    sp->in = c >= 0 && chat_is_in(cs, s->slot, c);
    sp->modes = c >= 0 ? cs->chans[c].modes : 0;
    /* +m: the voiced and the operators speak (a rank is read only then) */
    sp->muted = (sp->modes & CHAT_MODE_M) && !chat_member_rank(cs, s->slot, c);
    /* +b: a banned member is silent unless voiced or an operator */
    sp->banned = c >= 0 && cs->chans[c].nbans && chat_banned(cs, s, c, NULL) &&
                 !chat_member_rank(cs, s->slot, c);
    sp->shown[0] = 0;
    if (c >= 0)
        strcpy(sp->shown, cs->chans[c].name);
}

static void message(struct chat_app *app, struct session *s, yard_fx_t *fx,
                    const yard_irc_msg_t *m, int type)
{
    bool tagmsg = type == YARD_LOGREC_TAGMSG;
    bool notice = type == YARD_LOGREC_NOTICE || tagmsg; /* never answered with an error */
    if (m->n < 1) {
        if (!notice)
            chat_numeric(fx, s, 411, ":No recipient given (%s)", m->cmd);
        return;
    }
    if (!tagmsg && (m->n < 2 || !m->params[1][0])) {
        if (!notice)
            chat_numeric(fx, s, 412, ":No text to send");
        return;
    }
    /* message-tags: the client-only tags (the '+' ones) are kept with the
     * message and relayed to the clients that take tags; a client's tag
     * data is 4094 bytes at most (IRCv3), so they always fit. */
    if (m->tags && strlen(m->tags) > YARD_IRC_CLIENT_TAGS_MAX) {
        chat_numeric(fx, s, 417, ":Input line was too long (tag data: at most %d bytes)",
                     YARD_IRC_CLIENT_TAGS_MAX);
        return;
    }
    char ctags[CLIENT_TAGS_MAX + 1];
    long ctn = m->tags && (s->caps & CAP_MESSAGE_TAGS)
                   ? yard_irc_client_tags(m->tags, ctags, sizeof ctags)
                   : 0;
    if (ctn < 0)
        return; /* cannot happen: they are part of the tag data */
    if (tagmsg && !ctn)
        return; /* a TAGMSG without tags tells nothing */
    /* A bot's messages carry the bot tag (IRCv3 bot mode), kept with them. */
    if (s->umode_B && (size_t)ctn + sizeof ";bot" <= sizeof ctags)
        ctn += snprintf(ctags + ctn, sizeof ctags - (size_t)ctn, "%sbot", ctn ? ";" : "");
    char *targets[TARGMAX], *first_dropped;
    int dropped;
    int n = chat_split_targets(m->params[0], targets, TARGMAX, &dropped, &first_dropped);
    if (dropped && !notice)
        chat_numeric(fx, s, 407, "%s :Too many targets: at most %d (TARGMAX); %d not sent to",
                     first_dropped, TARGMAX, dropped);
    chat_post_begin(app, s, type, tagmsg ? "" : m->params[1]);
    memcpy(s->post.tags, ctags, (size_t)ctn);
    s->post.tags_len = (size_t)ctn;
    for (int i = 0; i < n; i++) {
        char *t = targets[i];
        /* STATUSMSG: "@#chan" for the channel's operators, "+#chan" for its
         * voiced and operators; who may send is as for "#chan" */
        char status = chat_status_prefix(t);
        if (status)
            t++;
        if (t[0] == '#' || t[0] == '&') {
            struct speak sp = {.s = s, .name = t};
            chat_state_locked(app->cs, may_speak, &sp);
            int c = sp.c;
            bool in = sp.in, muted = sp.muted, banned = sp.banned;
            uint32_t modes = sp.modes;
            bool guest_muted = (modes & CHAT_MODE_REG_SPEAK) && s->guest;
            const char *shown = sp.shown;
            if (c < 0) {
                if (!notice)
                    chat_numeric(fx, s, 403, "%s :No such channel", t);
            } else if (!in && (modes & CHAT_MODE_N)) {
                if (!notice)
                    chat_numeric(fx, s, 404, "%s :Cannot send to channel (+n: join it first)", t);
            } else if (muted) {
                if (!notice)
                    chat_numeric(fx, s, 404, "%s :Cannot send to channel (+m: you need voice)", t);
            } else if (banned) {
                if (!notice)
                    chat_numeric(fx, s, 404, "%s :Cannot send to channel (+b: you are banned)", t);
            } else if (guest_muted) {
                if (!notice)
                    chat_numeric(fx, s, 404, "%s :Cannot send to channel (+M: log in to an account "
                                             "to speak)",
                                 t);
            } else if (status) {
                char to[CHAT_CHAN_MAX + 2];
                snprintf(to, sizeof to, "%c%s", status, shown);
                chat_post_target(s, to, false);
            } else {
                chat_post_target(s, shown, false);
            }
            continue;
        }
        if (!yard_account_name_valid(t, strlen(t))) {
            if (!notice)
                chat_numeric(fx, s, 401, "%s :No such nick/channel", t);
            continue;
        }
        /* a person who is away: say so; it still goes */
        if (type == YARD_LOGREC_MESSAGE && __atomic_load_n(&app->cs->away, __ATOMIC_RELAXED)) {
            struct presence p;
            chat_presence_of(app, t, &p, NULL, 0);
            if (p.away)
                chat_numeric(fx, s, 301, "%s :%s", p.nick, p.away_msg);
        }
        /* A connected user's nick names its account; a guest is its nick,
         * written "~nick" as its messages' sender is (an account made later
         * with that name is not it). Anything else is looked up as an
         * account by the job. */
        char spelled[CHAT_NAME_MAX + 2] = "";
        bool guest = false;
        char key[CHAT_NAME_MAX + 1];
        chat_casefold(key, t, strlen(t));
        struct chat_member to;
        if (chat_member_lookup(app->cs, key, &to) >= 0) {
            guest = to.guest;
            snprintf(spelled, sizeof spelled, "%s%s", guest ? "~" : "", to.account);
        }
        chat_post_target(s, spelled[0] ? spelled : t, !guest);
    }
    chat_post_start(s, fx);
}

void chat_cmd_privmsg(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    message(app, s, fx, m, YARD_LOGREC_MESSAGE);
}

void chat_cmd_notice(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    message(app, s, fx, m, YARD_LOGREC_NOTICE);
}

void chat_cmd_tagmsg(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    message(app, s, fx, m, YARD_LOGREC_TAGMSG);
}
