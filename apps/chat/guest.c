/* Guests, with --guests (guest.h). */
#define _DEFAULT_SOURCE /* explicit_bzero */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "guest.h"
#include "register.h"
#include "relay.h"
#include "session.h"

void chat_nick_check(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *nick)
{
    s->nj.store = app->store;
    snprintf(s->nj.nick, sizeof s->nj.nick, "%s", nick);
    s->nick_checking = true;
    s->nj.op = YARD_CHAT_NICK;
    yard_fx_io(fx, yard_chat_store_run, &s->nj);
}

/* A guest's member slot, taken under the lock (guest_slot). */
struct guest_claim {
    struct chat_app *app;
    struct session *s;
    const char *key; /* its nick, casefolded */
    bool taken, crowded;
};

static void guest_slot(chat_state_t *cs, void *ctx)
{
    struct guest_claim *g = ctx;
    struct session *s = g->s;
    g->taken = chat_member_named(cs, g->key) >= 0; /* by a guest or an account */
    g->crowded =
        !g->taken && chat_guests_from(cs, s->login.addr.b) >= g->app->set->guests_per_addr;
    s->slot = g->taken || g->crowded ? -1 : chat_member_add(cs, s->reg.nick);
    if (s->slot >= 0) {
        struct chat_member *m = chat_member_at(cs, s->slot);
        m->guest = true;
        memcpy(m->addr, s->login.addr.b, sizeof m->addr);
        memcpy(m->from, s->login.addr.b, sizeof m->from);
        chat_member_ident(cs, s->slot, s->user, s->realname, s->tls);
    }
}

/* A guest registers with the nick checked free of accounts: a member slot
 * of its own, unless somebody has the nick or its address has its share. */
static void become_guest(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    char key[CHAT_NAME_MAX + 1];
    chat_casefold(key, s->reg.nick, strlen(s->reg.nick));
    struct guest_claim g = {.app = app, .s = s, .key = key};
    chat_state_locked(app->cs, guest_slot, &g);
    bool taken = g.taken, crowded = g.crowded;
    if (taken) {
        s->reg.got_nick = false;
        chat_numeric(fx, s, 433, "%s :Nickname is already in use", s->reg.nick);
        return;
    }
    if (crowded) {
        char where[64];
        chat_addr_text(&s->login.addr, where, sizeof where);
        chat_sendf(fx, "ERROR :Closing Link: too many guests from %s (--guests-per-addr %u)", where,
                   app->set->guests_per_addr);
        yard_fx_close(fx, NULL);
        return;
    }
    s->guest = true;
    /* s->client keeps USER's name: the device, should the guest log in */
    chat_set_names(s, s->reg.nick, s->reg.nick, true);
    chat_ready(app, s, fx);
}

/* The answer to a nick change the log cannot take now (its queue is
 * full: the disk is stalled, or records come faster than it writes them):
 * refused rather than made unheard. */
static void nick_busy(yard_fx_t *fx, const struct session *s, const char *nick)
{
    chat_numeric(fx, s, 437, "%s :Nick/channel is temporarily unavailable (the server's log is "
                             "busy: try again in a moment)",
                 nick);
}

/* A guest's nick change, checked free of accounts: told to the guest at
 * once and to the members of its channels through the log (one nick
 * record, told to each member sharing a channel with it). */
struct rename {
    struct chat_app *app;
    const struct session *s;
    const char *nick, *key; /* key: the nick casefolded */
    bool free_nick, told;
};

/* Under the lock: the nick free (or the guest's own), the change told in
 * the log, then made. */
static void rename_guest(chat_state_t *cs, void *ctx)
{
    struct rename *r = ctx;
    int holder = chat_member_named(cs, r->key);
    r->free_nick = holder < 0 || holder == r->s->slot; /* a change of case is ours to make */
    r->told = r->free_nick && chat_nick_put(r->app, r->s->slot, r->s->sender, r->nick);
    if (r->told)
        chat_member_rename(cs, r->s->slot, r->nick);
}

static void guest_rename(struct chat_app *app, struct session *s, yard_fx_t *fx,
                         const char *nick)
{
    char key[CHAT_NAME_MAX + 1];
    chat_casefold(key, nick, strlen(nick));
    struct rename r = {.app = app, .s = s, .nick = nick, .key = key};
    chat_state_locked(app->cs, rename_guest, &r);
    bool free_nick = r.free_nick, told = r.told;
    if (!free_nick) {
        chat_numeric(fx, s, 433, "%s :Nickname is already in use", nick);
        return;
    }
    if (!told) {
        nick_busy(fx, s, nick);
        return;
    }
    chat_sendf(fx, ":%s!%s@" SERVER " NICK :%s", s->nick, s->nick, nick);
    chat_charge(s, (int)chat_member_channels(app->cs, s->slot)); /* the channels told */
    snprintf(s->reg.nick, sizeof s->reg.nick, "%s", nick);
    chat_set_names(s, nick, nick, true);
}

struct login {
    struct chat_app *app;
    const struct session *s;
    const char *account, *key; /* key: the account casefolded */
    char *nick;                /* out: the nick it is shown by */
    bool renamed, told;
};

/* Under the lock: the guest's slot becomes the account's, with the nick
 * its other connections have; told in the log first (the nick when it
 * changes, and the account for account-notify). */
static void guest_to_account(chat_state_t *cs, void *ctx)
{
    struct login *l = ctx;
    const struct session *s = l->s;
    if (!chat_account_nick(cs, l->key, l->nick))
        memcpy(l->nick, s->nick, CHAT_NAME_MAX + 1);
    l->renamed = strcmp(s->nick, l->nick) != 0;
    char sender[sizeof s->sender];
    chat_sender_name(sender, sizeof sender, l->account, l->nick);
    struct chat_login_news news = {.old_sender = s->sender, .nick = l->renamed ? l->nick : NULL,
                                   .new_sender = sender, .account = l->account};
    l->told = chat_login_put(l->app, s->slot, &news);
    if (l->told) {
        struct chat_member *me = chat_member_at(cs, s->slot);
        me->guest = false;
        memset(me->addr, 0, sizeof me->addr);
        chat_member_rename(cs, s->slot, l->account);
        chat_member_set_nick(cs, s->slot, l->nick);
    }
}

/* A guest logged in (SASL, or PASS account:password): it becomes the
 * account, in the channels it is in, and keeps its nick, unless the
 * account is connected elsewhere: its connections share one nick, so it
 * takes theirs, and the others hear the change. When the log cannot take
 * that change now, the login is refused (437) and it stays a guest. */
void chat_guest_logs_in(struct chat_app *app, struct session *s, yard_fx_t *fx,
                        const char *account, bool sasl)
{
    char key[CHAT_NAME_MAX + 1], nick[CHAT_NAME_MAX + 1];
    chat_casefold(key, account, strlen(account));
    struct login l = {.app = app, .s = s, .account = account, .key = key, .nick = nick};
    chat_state_locked(app->cs, guest_to_account, &l);
    bool renamed = l.renamed, told = l.told;
    if (!told) {
        nick_busy(fx, s, nick);
        return;
    }
    if (renamed)
        chat_sendf(fx, ":%s!%s@" SERVER " NICK :%s", s->nick, s->nick, nick);
    s->guest = false;
    chat_sendq_bounds(app, s, fx); /* an account's now */
    s->reg.sasl_done = true;
    snprintf(s->reg.nick, sizeof s->reg.nick, "%s", nick);
    chat_set_names(s, account, nick, false);
    chat_numeric(fx, s, 900, "%s!%s@" SERVER " %s :You are now logged in as %s", s->nick, s->nick,
                 s->account, s->account);
    if (sasl)
        chat_numeric(fx, s, 903, ":SASL authentication successful");
}

void chat_nick_done(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    s->nick_checking = false;
    const char *nick = s->nj.nick;
    if (s->state != ST_READY && s->reg.sasl_done) {
        /* Logged in before registering: is its nick another account's? */
        if (strcmp(nick, s->reg.nick) != 0) { /* another NICK came meanwhile */
            chat_nick_check(app, s, fx, s->reg.nick);
            return;
        }
        s->reg.nick_checked = true;
        s->reg.nick_reserved = s->nj.reserved;
        chat_try_register(app, s, fx);
        return;
    }
    if (s->nj.reserved) {
        if (s->state != ST_READY)
            s->reg.got_nick = false; /* (and the numeric is addressed to "*") */
        chat_numeric(fx, s, 433, "%s :Nickname is reserved for an account: log in with SASL PLAIN "
                                 "or PASS to use it, or choose another",
                     nick);
        return;
    }
    if (s->state == ST_READY) {
        if (s->guest)
            guest_rename(app, s, fx, nick);
        return;
    }
    if (strcmp(nick, s->reg.nick)) { /* another NICK came meanwhile: check that one */
        chat_nick_check(app, s, fx, s->reg.nick);
        return;
    }
    if (s->state == ST_NEW && !s->reg.have_pass && !s->reg.sasl_done)
        become_guest(app, s, fx);
    else
        chat_try_register(app, s, fx); /* credentials came meanwhile */
}

/* NICK once registered: a guest's nick change, checked free of accounts
 * (an account's nick is its name). */
void chat_cmd_nick_registered(struct chat_app *app, struct session *s, yard_fx_t *fx,
                              yard_irc_msg_t *m)
{
    if (!s->guest) {
        if (strcasecmp(m->params[0], s->nick) != 0)
            chat_numeric(fx, s, 432, "%s :An account keeps the nick it logged in with",
                         m->params[0]);
    } else if (!yard_account_name_valid(m->params[0], strlen(m->params[0]))) {
        chat_numeric(fx, s, 432, "%s :Erroneous nickname (1-%d characters: a letter or one of "
                                 "[\\]^_`{|} first, then also digits and -)",
                     m->params[0], CHAT_NAME_MAX);
    } else if (strcmp(m->params[0], s->nick) && !s->nick_checking) {
        chat_nick_check(app, s, fx, m->params[0]); /* an account's? then in use? */
    }
}

/* PASS once registered: a guest logs in with PASS account:password (its
 * nick may be anything, so the account is named here). */
void chat_cmd_pass_registered(struct chat_app *app, struct session *s, yard_fx_t *fx,
                              yard_irc_msg_t *m)
{
    if (!s->guest || app->set->server_password) { /* there, accounts log in with SASL only */
        chat_cmd_reregister(app, s, fx, m);
        return;
    }
    const char *colon = m->n ? strchr(m->params[0], ':') : NULL;
    if (!colon || colon == m->params[0]) {
        chat_numeric(fx, s, 461, "PASS :Give account:password to log in");
        return;
    }
    chat_start_auth(app, s, fx, m->params[0], (size_t)(colon - m->params[0]), colon + 1,
                    strlen(colon + 1), false);
    explicit_bzero(m->params[0], strlen(m->params[0]));
}
