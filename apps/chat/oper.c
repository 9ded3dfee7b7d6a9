/* Server operators: OPER, KILL, WALLOPS (oper.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oper.h"
#include "register.h"
#include "relay.h"
#include "yard/clock.h"

#define NO_PRIVILEGES ":Permission Denied- You're not an IRC operator"

void chat_cmd_oper(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    /* Every name is checked, a malformed or unknown one too (against a
     * hash as dear as the operators'): the answer's time tells nothing. */
    chat_start_oper(app, s, fx, m->params[0], m->params[1]);
}

void chat_oper_done(struct chat_app *app, struct session *s, struct yard_chat_auth *j, yard_fx_t *fx)
{
    if (j->ok) {
        if (!s->umode_o) {
            s->umode_o = true;
            if (s->slot >= 0) {
                chat_member_set_oper(app->cs, s->slot);
            }
            chat_sendf(fx, ":%s!%s@" SERVER " MODE %s :+o", s->nick, s->nick, s->nick);
        }
        chat_numeric(fx, s, 381, ":You are now an IRC operator");
        return;
    }
    chat_login_failed(app, s, fx, j->known ? 464 : 491); /* as a failed login's */
    s->login.fail_oper = true;
}

/* The newest connection whose account or nick folds to key (KILL's
 * target), found by chat_members_each. */
struct kill_target {
    const char *key;
    int slot;
    uint64_t serial;
};

static bool newest_named(chat_state_t *cs, int slot, struct chat_member *mb, void *ctx)
{
    (void)cs;
    struct kill_target *t = ctx;
    bool named = !strcmp(mb->key, t->key) || !strcmp(mb->nick_key, t->key);
    if (!mb->killed && named && mb->serial > t->serial) {
        t->slot = slot;
        t->serial = mb->serial;
    }
    return true;
}

/* KILL nick [reason]: the nick's newest connection is closed (an account's
 * other connections stay). The kill record names it by slot and serial;
 * the connection closes itself when it relays the record. */
void chat_cmd_kill(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    if (!s->umode_o) {
        chat_numeric(fx, s, 481, NO_PRIVILEGES);
        return;
    }
    const char *nick = m->params[0];
    const char *reason = m->n > 1 && m->params[1][0] ? m->params[1] : "No reason given";
    size_t len = strlen(nick);
    int slot = -1;
    uint64_t serial = 0;
    if (len <= CHAT_NAME_MAX) {
        char key[CHAT_NAME_MAX + 1];
        chat_casefold(key, nick, len);
        struct kill_target t = {.key = key, .slot = -1, .serial = 0};
        chat_members_each(app->cs, newest_named, &t);
        slot = t.slot;
        serial = t.serial;
    }
    if (slot < 0) {
        chat_numeric(fx, s, 401, "%s :No such nick/channel", nick);
        return;
    }
    char target[YARD_LOGREC_NAME_MAX + 1];
    snprintf(target, sizeof target, CHAT_MEMBER_TARGET, slot, (unsigned long long)serial);
    yard_chatlog_entry_t ev;
    chat_presence_ev(&ev, YARD_LOGREC_KILL, s->sender, target, reason);
    chat_presence_put(app, &ev, 1);
}

/* WALLOPS text: to every connection with user mode +w. */
void chat_cmd_wallops(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    if (!s->umode_o) {
        chat_numeric(fx, s, 481, NO_PRIVILEGES);
        return;
    }
    yard_chatlog_entry_t ev;
    chat_presence_ev(&ev, YARD_LOGREC_WALLOPS, s->sender, "*", m->params[0]);
    chat_presence_put(app, &ev, 1);
}

void chat_oper_relay(struct chat_app *app, struct session *s, yard_fx_t *fx,
                     const yard_chatlog_rec_t *r, const yard_chat_from_t *from)
{
    char text[YARD_CHATLOG_DEFER_TEXT];
    chat_rec_text(r, text, sizeof text);
    int sn = (int)from->nick_len;
    if (r->type == YARD_LOGREC_WALLOPS) {
        if (s->umode_w)
            chat_sendf(fx, ":%.*s!%.*s@" SERVER " WALLOPS :%s", sn, from->nick, sn, from->nick,
                       text);
        return;
    }
    /* A kill: of this very connection (its slot, and the serial it had
     * then: a slot taken over since is somebody else)? */
    char t[YARD_LOGREC_NAME_MAX + 1];
    memcpy(t, r->target, r->target_len); /* target_len <= YARD_LOGREC_NAME_MAX: decoded */
    t[r->target_len] = 0;
    int slot, end = 0;
    unsigned long long serial;
    if (s->slot < 0 || fx->close ||
        sscanf(t, CHAT_MEMBER_TARGET "%n", &slot, &serial, &end) != 2 ||
        end != (int)r->target_len || slot != s->slot)
        return;
    if (!chat_member_kill(app->cs, s->slot, serial))
        return;
    /* Those who share a channel with it hear this as its quit (chat_close). */
    if (!strncmp(text, CHAT_KLINED, strlen(CHAT_KLINED))) {
        snprintf(s->quit_reason, sizeof s->quit_reason, "%s", text);
        chat_numeric(fx, s, 465, ":You are banned from this server (%s)", text);
    } else {
        snprintf(s->quit_reason, sizeof s->quit_reason, "Killed (%.*s (%s))", sn, from->nick, text);
    }
    chat_sendf(fx, "ERROR :Closing Link: %s", s->quit_reason);
    yard_fx_close(fx, NULL);
}
