/* Registration and login (register.h). */
#define _DEFAULT_SOURCE /* explicit_bzero */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "guest.h"
#include "kline.h"
#include "monitor.h"
#include "oper.h"
#include "query.h"
#include "register.h"
#include "relay.h"
#include "session.h"
#include "yard/clock.h"

#define CHECK_RETRY_NS (50 * YARD_NS_PER_MS) /* a login waiting for its address's turn */

/* The IRCv3 capabilities' names, in CAP LS's order. */
static const struct {
    const char *name;
    unsigned bit;
} cap_names[] = {
    {"account-notify", CAP_ACCOUNT_NOTIFY},
    {"account-tag", CAP_ACCOUNT_TAG}, {"away-notify", CAP_AWAY_NOTIFY},
    {"batch", CAP_BATCH},             {"cap-notify", CAP_CAP_NOTIFY},
    {"draft/chathistory", CAP_CHATHISTORY}, {"draft/event-playback", CAP_EVENT_PLAYBACK},
    {"draft/read-marker", CAP_READ_MARKER}, {"echo-message", CAP_ECHO},
    {"extended-join", CAP_EXTENDED_JOIN}, {"extended-monitor", CAP_EXTENDED_MONITOR},
    {"labeled-response", CAP_LABELED},
    {"message-tags", CAP_MESSAGE_TAGS},
    {"multi-prefix", CAP_MULTI_PREFIX},   {"sasl", CAP_SASL},
    {"server-time", CAP_TIME},        {"setname", CAP_SETNAME},
    {"userhost-in-names", CAP_USERHOST_IN_NAMES},
};
#define NCAPS (sizeof cap_names / sizeof cap_names[0])

void chat_forget_wait(struct session *s)
{
    explicit_bzero(s->login.wait_password, sizeof s->login.wait_password);
    s->login.wait_account[0] = 0;
}

void chat_set_names(struct session *s, const char *account, const char *nick, bool guest)
{
    if (account != s->account)
        snprintf(s->account, sizeof s->account, "%s", account);
    chat_casefold(s->account_key, s->account, strlen(s->account));
    if (nick != s->nick)
        snprintf(s->nick, sizeof s->nick, "%s", nick);
    chat_sender_name(s->sender, sizeof s->sender, guest ? NULL : s->account, s->nick);
}

void chat_sender_name(char *out, size_t cap, const char *account, const char *nick)
{
    if (!account)
        snprintf(out, cap, "~%s", nick);
    else if (strcmp(nick, account) != 0)
        snprintf(out, cap, "%s%c%s", account, YARD_CHAT_NICK_SEP, nick);
    else
        snprintf(out, cap, "%s", account);
}

/* What a password check is for: an account's login, OPER, or the
 * server's password (--server-password-required; the nick given is the
 * name the login limits count it under). */
enum { CHECK_PASS, CHECK_SASL, CHECK_OPER, CHECK_SERVER };

/* A login that is refused before any check (the limits): answered at once.
 * An OPER refused so is told 464 with why, and stays as it was. */
static void refuse_login(struct session *s, yard_fx_t *fx, int how, const char *why)
{
    bool sasl = how == CHECK_SASL;
    if (how == CHECK_OPER) {
        chat_numeric(fx, s, 464, ":%s", why);
        return;
    }
    s->state = ST_NEW;
    chat_forget_wait(s);
    if (sasl) {
        chat_numeric(fx, s, 904, ":SASL authentication failed: %s", why);
        return;
    }
    chat_sendf(fx, "ERROR :Closing Link: %s", why);
    yard_fx_close(fx, NULL);
}

/* Check a password, within the login limits (guard.h). An OPER's is
 * counted as a login of the name it gives: the same limits, the same
 * delayed answer to a failure. */
static void start_check(struct chat_app *app, struct session *s, yard_fx_t *fx,
                        const char *account, size_t alen, const char *password, size_t plen,
                        int how)
{
    bool sasl = how == CHECK_SASL;
    char why[200], where[64];
    if (!s->tls && fx->tls_port && !app->set->plaintext_login) {
        snprintf(why, sizeof why, "log in over TLS, on port %u: this server takes no passwords "
                                  "in clear text", (unsigned)fx->tls_port);
        refuse_login(s, fx, how, why);
        return;
    }
    if (alen > CHAT_NAME_MAX)
        alen = CHAT_NAME_MAX;
    if (plen > YARD_ACCOUNT_PASSWORD_MAX)
        plen = YARD_ACCOUNT_PASSWORD_MAX;
    char key[CHAT_NAME_MAX + 1];
    chat_casefold(key, account, alen);
    uint64_t ticket, retry_ns;
    int v = chat_guard_check_begin(app->guard, &s->login.addr, key, fx->now_ns, &ticket, &retry_ns);
    unsigned long long wait_s = (retry_ns + YARD_NS_PER_S - 1) / YARD_NS_PER_S;
    switch (v) {
    case CHAT_GUARD_OK:
        break;
    case CHAT_GUARD_WAIT:
        /* The address has its share of checks in flight: this one waits its
         * turn (reading nothing meanwhile), within the registration time. */
        if (s->login.wait_account != account) {
            snprintf(s->login.wait_account, sizeof s->login.wait_account, "%.*s", (int)alen,
                     account);
            snprintf(s->login.wait_password, sizeof s->login.wait_password, "%.*s", (int)plen,
                     password);
        }
        if (s->state == ST_READY) { /* a guest logging in: no waiting in line */
            refuse_login(s, fx, how == CHECK_OPER ? how : CHECK_SASL,
                         "the server is busy checking other logins; try again in a few seconds");
            return;
        }
        s->login.wait_sasl = sasl;
        s->login.wait_server = how == CHECK_SERVER;
        s->state = ST_WAIT;
        yard_fx_wake_at(fx, fx->now_ns + CHECK_RETRY_NS < s->reg.register_by
                                ? fx->now_ns + CHECK_RETRY_NS
                                : s->reg.register_by);
        return;
    case CHAT_GUARD_BUSY:
        refuse_login(s, fx, how, "the server is busy checking other logins; try again in a few "
                                 "seconds");
        return;
    case CHAT_GUARD_ADDR_LIMIT:
        chat_addr_text(&s->login.addr, where, sizeof where);
        snprintf(why, sizeof why, "too many failed logins from %s; try again in %llu s", where,
                 wait_s);
        s->login.failures++;
        refuse_login(s, fx, how, why);
        return;
    default: /* CHAT_GUARD_ACCOUNT_LIMIT */
        snprintf(why, sizeof why, "too many failed logins for %s; try again in %llu s", key,
                 wait_s);
        s->login.failures++;
        refuse_login(s, fx, how, why);
        return;
    }
    struct yard_chat_auth *j = calloc(1, sizeof *j);
    if (!j) {
        chat_guard_check_end(app->guard, ticket, &s->login.addr, key, false, fx->now_ns);
        fx->nomem = true;
        return;
    }
    s->login.check_ticket = ticket;
    s->login.check_at = fx->now_ns;
    memcpy(s->login.check_key, key, sizeof key);
    j->op = YARD_CHAT_AUTH;
    j->store = app->store;
    j->sasl = sasl;
    j->oper = how == CHECK_OPER;
    j->server = how == CHECK_SERVER;
    snprintf(j->account, sizeof j->account, "%.*s", (int)alen, account);
    snprintf(j->password, sizeof j->password, "%.*s", (int)plen, password);
    chat_forget_wait(s);
    s->login.job = j;
    if (s->state != ST_READY) /* a guest logging in goes on relaying meanwhile */
        s->state = ST_AUTH;
    yard_fx_offload(fx, yard_chat_store_run, j);
}

void chat_start_auth(struct chat_app *app, struct session *s, yard_fx_t *fx,
                     const char *account, size_t alen, const char *password, size_t plen,
                     bool sasl)
{
    start_check(app, s, fx, account, alen, password, plen, sasl ? CHECK_SASL : CHECK_PASS);
}

void chat_start_oper(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *name,
                     const char *password)
{
    start_check(app, s, fx, name, strlen(name), password, strlen(password), CHECK_OPER);
}

void chat_retry_check(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    start_check(app, s, fx, s->login.wait_account, strlen(s->login.wait_account),
                s->login.wait_password, strlen(s->login.wait_password),
                s->login.wait_server ? CHECK_SERVER
                : s->login.wait_sasl ? CHECK_SASL
                                     : CHECK_PASS);
}

/* --server-password-required: the PASS given checked as the server's
 * password (a job, whose answer comes back to chat_try_register), or, with
 * none given, the refusal, after the failed-login delay as a wrong one's. */
static void check_server_password(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    if (!s->reg.have_pass) {
        s->reg.server_pass_missing = true;
        chat_login_failed(app, s, fx, 464);
        return;
    }
    start_check(app, s, fx, s->reg.nick, strlen(s->reg.nick), s->reg.pass, strlen(s->reg.pass),
                CHECK_SERVER);
    explicit_bzero(s->reg.pass, sizeof s->reg.pass);
    s->reg.have_pass = false; /* it was the server's: no account's login */
}

/* The check in flight is over (its job is done). */
void chat_end_check(struct chat_app *app, struct session *s, bool ok, uint64_t now_ns)
{
    if (!s->login.check_ticket)
        return;
    chat_guard_check_end(app->guard, s->login.check_ticket, &s->login.addr, s->login.check_key, ok,
                         now_ns);
    s->login.check_ticket = 0;
}

/* A server name as IRC spells one: a host name (labels of letters, digits
 * and '-', not starting or ending with '-', joined by single dots), at
 * most CHAT_SERVER_NAME_MAX bytes. */
static bool server_name_valid(const char *n)
{
    size_t len = strlen(n), label = 0;
    if (!len || len > CHAT_SERVER_NAME_MAX || n[len - 1] == '.' || n[len - 1] == '-')
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = n[i];
        if (c == '.') {
            if (!label || n[i - 1] == '-')
                return false;
            label = 0;
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   (c == '-' && label)) {
            label++;
        } else {
            return false;
        }
    }
    return true;
}

int chat_server_name_init(struct chat_app *app, const char *given, char *err, size_t errlen)
{
    if (given && given[0]) {
        if (!server_name_valid(given)) {
            snprintf(err, errlen, "--server-name %.100s: not a server name (letters, digits, "
                                  "'-' and dots, as a host name; at most %d bytes)",
                     given, CHAT_SERVER_NAME_MAX);
            return -1;
        }
        snprintf(app->server_name, sizeof app->server_name, "%s", given);
        return 0;
    }
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) < 0 || !server_name_valid(host))
        snprintf(host, sizeof host, "%s", SERVER);
    memcpy(app->server_name, host, strlen(host) + 1); /* valid: at most CHAT_SERVER_NAME_MAX */
    return 0;
}

static void welcome(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    chat_numeric(fx, s, 1, ":Welcome to the yard chat, %s", s->nick);
    chat_numeric(fx, s, 2, ":Your host is %s, running Switchyard 0.1.0", app->server_name);
    chat_numeric(fx, s, 3, ":This server speaks an IRC subset; see docs/chat.md");
    chat_numeric(fx, s, 4, "%s 0.1.0 Biow MRbeIiklmnostv beIklov", app->server_name);
    chat_numeric(fx, s, 5, "NETWORK=Switchyard CASEMAPPING=rfc1459 CHANTYPES=#& PREFIX=(ov)@+ "
                           "CHANMODES=beI,k,l,MRimnst MODES=%d NICKLEN=%d CHANNELLEN=%d "
                           "TOPICLEN=%d KICKLEN=%d AWAYLEN=%d EXCEPTS INVEX "
                           ":are supported by this server",
                 MODES_MAX, CHAT_NAME_MAX, CHAT_CHAN_MAX, CHAT_TOPIC_MAX, KICK_REASON_MAX,
                 CHAT_AWAY_MAX);
    chat_numeric(fx, s, 5, "CHANLIMIT=#&:%u CHATHISTORY=%d MSGREFTYPES=msgid,timestamp "
                           "TARGMAX=PRIVMSG:%d,NOTICE:%d,WHOIS:%d,USERHOST:5,KICK:%d ELIST=MNU "
                           "STATUSMSG=@+ EXTBAN=$,a ACCOUNTEXTBAN=a MAXLIST=beI:%d MONITOR=%d BOT=B WHOX "
                           ":are supported by this server",
                 app->set->channels_per_account, YARD_CHAT_HISTORY_MAX, TARGMAX, TARGMAX, TARGMAX,
                 TARGMAX, CHAT_BANS_MAX, CHAT_MONITOR_MAX);
    chat_cmd_motd(app, s, fx, NULL);
}

struct account_claim {
    struct session *s;
    const char *key, *want; /* the account and the nick asked for, casefolded */
    bool own, wanted_ok;
    char *nick; /* out */
};

/* Under the lock: the nick (become_ready says which) and a member slot. */
static void account_slot(chat_state_t *cs, void *ctx)
{
    struct account_claim *a = ctx;
    struct session *s = a->s;
    if (!chat_account_nick(cs, a->key, a->nick)) {
        bool free_nick = !a->own && a->wanted_ok && chat_member_named(cs, a->want) < 0;
        snprintf(a->nick, CHAT_NAME_MAX + 1, "%s", free_nick ? s->reg.nick : s->account);
    }
    s->slot = chat_member_add(cs, s->account);
    if (s->slot >= 0) {
        chat_member_set_nick(cs, s->slot, a->nick);
        chat_member_ident(cs, s->slot, s->user, s->realname, s->tls);
        memcpy(chat_member_at(cs, s->slot)->from, s->login.addr.b, sizeof s->login.addr.b);
    }
}

/* Logged in: take a member slot and start relaying from the log's end.
 * Its nick is the one the account's other connections have (they share
 * one), else the one the client registered with when that is free
 * (wanted_ok: it is the account's name, or no account's, checked by a nick
 * job) and nobody connected has it, else the account's name. */
static void become_ready(struct chat_app *app, struct session *s, yard_fx_t *fx, bool wanted_ok)
{
    char key[CHAT_NAME_MAX + 1], want[CHAT_NAME_MAX + 1], nick[CHAT_NAME_MAX + 1];
    chat_casefold(key, s->account, strlen(s->account));
    chat_casefold(want, s->reg.nick, strlen(s->reg.nick));
    bool own = !strcmp(want, key); /* the account's name, perhaps spelled otherwise */
    struct account_claim a = {.s = s, .key = key, .want = want, .own = own,
                              .wanted_ok = wanted_ok, .nick = nick};
    chat_state_locked(app->cs, account_slot, &a);
    if (strcasecmp(nick, s->reg.nick) != 0) /* not the nick it asked for: tell it */
        chat_sendf(fx, ":%s!%s@" SERVER " NICK :%s", s->reg.nick, s->reg.nick, nick);
    chat_set_names(s, s->account, nick, false);
    chat_ready(app, s, fx);
}

/* The member slot is taken (or not: s->slot < 0): relay from the log's end. */
void chat_ready(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    if (s->slot < 0) {
        chat_sendf(fx, "ERROR :Closing Link: the server is full");
        yard_fx_close(fx, NULL);
        return;
    }
    s->state = ST_READY;
    chat_sendq_bounds(app, s, fx); /* an account's, or a guest's */
    chat_guard_leave(app->guard, s->login.enter_ticket);
    s->login.enter_ticket = 0;
    chat_casefold(s->account_key, s->account, strlen(s->account));
    s->relay.seen = yard_chatlog_cursor_end(app->log, &s->relay.cur);
    s->in.heard_ns = fx->now_ns;
    /* the registration timeout is over: the timer now watches liveness */
    yard_fx_wake_idle(fx,
                      app->set->ping_interval_ns ? fx->now_ns + app->set->ping_interval_ns : 0);
    welcome(app, s, fx);
    chat_monitor_ready(app, s);
    yard_fx_watch(fx, app->bus, 0, s->relay.seen);
}

/* NICK, USER and (PASS or SASL) are in, and CAP negotiation is over. */
void chat_try_register(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    if (s->state != ST_NEW || !s->reg.got_nick || !s->reg.got_user || s->reg.cap_active ||
        s->login.pending_fail)
        return;
    if (app->set->server_password && !s->reg.server_pass_ok) {
        check_server_password(app, s, fx);
        return;
    }
    /* An account's K-lines are checked once it has logged in, a guest's
     * before its nick is; a job, that comes back here. */
    if ((s->reg.sasl_done || (!s->reg.have_pass && app->set->guests)) &&
        chat_kline_checking(app, s, fx))
        return;
    if (s->reg.sasl_done) {
        /* Logged in. The nick it asked for is kept unless it is another
         * account's name (a nick job reads the accounts file) */
        bool own = !strcasecmp(s->reg.nick, s->account);
        if (!own && !s->reg.nick_checked) {
            if (!s->nick_checking)
                chat_nick_check(app, s, fx, s->reg.nick);
            return;
        }
        become_ready(app, s, fx, own || !s->reg.nick_reserved);
        return;
    }
    if (!s->reg.have_pass && app->set->guests) {
        if (!s->nick_checking) /* a guest, unless the nick is an account's */
            chat_nick_check(app, s, fx, s->reg.nick);
        return;
    }
    if (!s->reg.have_pass) {
        if (app->set->server_password)
            chat_numeric(fx, s, 464, ":Password required: log in with SASL PLAIN (PASS is this "
                                     "server's password)");
        else
            chat_numeric(fx, s, 464, ":Password required: log in with SASL PLAIN or PASS (your "
                                     "nick is your account)");
        chat_sendf(fx, "ERROR :Closing Link: not logged in");
        yard_fx_close(fx, NULL);
        return;
    }
    chat_start_auth(app, s, fx, s->reg.nick, strlen(s->reg.nick), s->reg.pass, strlen(s->reg.pass),
                    false);
    explicit_bzero(s->reg.pass, sizeof s->reg.pass);
    s->reg.have_pass = false;
}

void chat_auth_done(struct chat_app *app, struct session *s, struct yard_chat_auth *j, yard_fx_t *fx)
{
    s->login.job = NULL;
    if (s->state != ST_READY)
        s->state = ST_NEW;
    chat_end_check(app, s, j->ok, fx->now_ns);
    if (j->server && j->ok) {
        s->reg.server_pass_ok = true;
        chat_try_register(app, s, fx);
    } else if (j->oper) {
        chat_oper_done(app, s, j, fx);
    } else if (j->ok && s->guest) {
        chat_guest_logs_in(app, s, fx, j->canon, j->sasl);
        if (!s->guest) /* it is the account now: is that one K-lined? */
            chat_kline_recheck(app, s, fx);
    } else if (j->ok) {
        snprintf(s->account, sizeof s->account, "%s", j->canon);
        if (j->sasl) {
            s->reg.sasl_done = true;
            chat_numeric(fx, s, 900, "%s!%s@" SERVER " %s :You are now logged in as %s",
                         chat_who(s), chat_who(s), s->account, s->account);
            chat_numeric(fx, s, 903, ":SASL authentication successful");
        } else {
            s->reg.sasl_done = true; /* the same from here on */
        }
        chat_try_register(app, s, fx);
    } else {
        /* Slow down guessing, on top of bcrypt's own cost. */
        chat_login_failed(app, s, fx, j->sasl || s->guest ? 904 : 464); /* a guest stays a guest */
    }
    free(j);
}

void chat_login_failed(struct chat_app *app, struct session *s, yard_fx_t *fx, int numeric)
{
    s->login.failures++;
    unsigned counted = s->login.failures < 10 ? s->login.failures : 10;
    s->login.fail_until = fx->now_ns + counted * app->set->login_fail_delay_ns;
    s->login.pending_fail = numeric;
    yard_fx_wake_at(fx, s->login.fail_until);
}

/* CAP LS [302], LIST, REQ :caps, END. */
void chat_cmd_cap(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    const char *sub = m->n ? m->params[0] : "";
    if (!strcasecmp(sub, "LS") || !strcasecmp(sub, "LIST")) {
        if (s->state != ST_READY)
            s->reg.cap_active = true;
        bool ls = !strcasecmp(sub, "LS");
        /* Values (sasl=PLAIN) only for clients that said they read them:
         * CAP LS 302. */
        bool values = ls && m->n > 1 && atoi(m->params[1]) >= 302;
        char names[400];
        size_t n = 0;
        names[0] = 0;
        for (size_t i = 0; i < NCAPS; i++)
            if (ls || (s->caps & cap_names[i].bit))
                n += (size_t)snprintf(names + n, sizeof names - n, "%s%s%s", n ? " " : "",
                                      cap_names[i].name,
                                      !values || cap_names[i].bit != CAP_SASL ? ""
                                      : s->tls                                 ? "=PLAIN,EXTERNAL"
                                                                               : "=PLAIN");
        /* sts (IRCv3 strict transport security) is a value only, never
         * requested: the TLS port on a plain connection, how long to keep
         * to TLS on an encrypted one. */
        if (values && app->set->sts_duration_ns && fx->tls_port) {
            if (s->tls)
                snprintf(names + n, sizeof names - n, " sts=duration=%llu",
                         (unsigned long long)(app->set->sts_duration_ns / YARD_NS_PER_S));
            else
                snprintf(names + n, sizeof names - n, " sts=port=%u", (unsigned)fx->tls_port);
        }
        chat_sendf(fx, ":" SERVER " CAP %s %s :%s", chat_who(s), ls ? "LS" : "LIST", names);
    } else if (!strcasecmp(sub, "REQ")) {
        if (s->state != ST_READY)
            s->reg.cap_active = true;
        const char *list = m->n > 1 ? m->params[1] : "";
        char copy[512];
        snprintf(copy, sizeof copy, "%s", list);
        unsigned caps = s->caps;
        bool ok = true;
        char *save = NULL;
        for (char *c = strtok_r(copy, " ", &save); c && ok; c = strtok_r(NULL, " ", &save)) {
            bool off = c[0] == '-';
            const char *name = off ? c + 1 : c;
            size_t i = 0;
            while (i < NCAPS && strcmp(name, cap_names[i].name) != 0)
                i++;
            if (i == NCAPS)
                ok = false; /* all or nothing */
            else if (off)
                caps &= ~cap_names[i].bit;
            else
                caps |= cap_names[i].bit;
        }
        if (ok)
            s->caps = caps;
        chat_sendf(fx, ":" SERVER " CAP %s %s :%s", chat_who(s), ok ? "ACK" : "NAK", list);
    } else if (!strcasecmp(sub, "END")) {
        s->reg.cap_active = false;
        chat_try_register(app, s, fx);
    } else {
        chat_numeric(fx, s, 410, "%s :Invalid CAP command", sub);
    }
}

/* A device's client id: letters, digits, '-', '_' and '.', lower case. */
static void set_client(struct session *s, const char *id, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o < CHAT_CLIENT_MAX; i++) {
        char c = id[i];
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.')
            s->client[o++] = c;
        else if (c >= 'A' && c <= 'Z')
            s->client[o++] = (char)(c - 'A' + 'a');
    }
    s->client[o] = 0;
}

/* SASL EXTERNAL: the client certificate's account (checked by an I/O job
 * that reads DIR/certfps), with the authzid the client may name ("+":
 * none). No password, so no bcrypt and no guessing to slow down. */
static void start_external(struct chat_app *app, struct session *s, yard_fx_t *fx,
                           const char *arg)
{
    if (!s->certfp[0]) {
        chat_numeric(fx, s, 904, ":SASL authentication failed: no client certificate was "
                                 "presented");
        return;
    }
    char authzid[CHAT_NAME_MAX + 1] = "";
    if (strcmp(arg, "+") != 0) {
        long len = yard_b64decode(arg, strlen(arg), authzid, sizeof authzid - 1);
        if (len < 0 || !yard_account_name_valid(authzid, (size_t)len)) {
            chat_numeric(fx, s, 904, ":SASL authentication failed (malformed EXTERNAL)");
            return;
        }
        authzid[len] = 0;
    }
    struct yard_chat_auth *j = calloc(1, sizeof *j);
    if (!j) {
        fx->nomem = true;
        return;
    }
    j->op = YARD_CHAT_AUTH;
    j->store = app->store;
    j->sasl = true;
    memcpy(j->account, authzid, sizeof authzid);
    memcpy(j->certfp, s->certfp, sizeof j->certfp);
    s->login.job = j;
    if (s->state != ST_READY)
        s->state = ST_AUTH;
    yard_fx_io(fx, yard_chat_store_run, j);
}

/* AUTHENTICATE's payload comes in pieces of at most this many bytes
 * (IRCv3 sasl-3.1). */
#define SASL_PIECE_MAX 400
/* The whole of it (base64, in sasl_buf) holds the longest PLAIN message a
 * login needs: two names of a 64-byte account@device each and the
 * longest password; decoded, in 768 bytes. */
#define SASL_PLAIN_MAX (2 * 64 + 2 + YARD_ACCOUNT_PASSWORD_MAX)
_Static_assert((SASL_PLAIN_MAX + 2) / 3 * 4 < sizeof(((struct session_reg *)0)->sasl_buf) &&
                   SASL_PLAIN_MAX <= 768,
               "sasl_buf holds a PLAIN message with the longest password");

/* AUTHENTICATE PLAIN, then the payload in pieces (or * to abort). */
void chat_cmd_authenticate(struct chat_app *app, struct session *s, yard_fx_t *fx,
                           yard_irc_msg_t *m)
{
    if ((s->state == ST_READY && !s->guest) || s->reg.sasl_done) {
        chat_numeric(fx, s, 907, ":You have already authenticated using SASL");
        return;
    }
    if (s->guest && !(s->caps & CAP_SASL)) {
        chat_numeric(fx, s, 904, ":SASL authentication failed: ask for the sasl capability first "
                                 "(CAP REQ :sasl), or log in with PASS account:password");
        return;
    }
    if (m->n < 1) {
        chat_numeric(fx, s, 461, "AUTHENTICATE :Not enough parameters");
        return;
    }
    const char *arg = m->params[0];
    if (s->reg.sasl_external) {
        s->reg.sasl_external = false;
        if (!strcmp(arg, "*"))
            chat_numeric(fx, s, 906, ":SASL authentication aborted");
        else
            start_external(app, s, fx, arg);
        return;
    }
    if (!s->reg.sasl_plain) {
        if (!strcmp(arg, "*")) {
            chat_numeric(fx, s, 906, ":SASL authentication aborted");
        } else if (!strcasecmp(arg, "EXTERNAL") && s->tls) {
            s->reg.sasl_external = true;
            chat_sendf(fx, "AUTHENTICATE +");
        } else if (strcasecmp(arg, "PLAIN") != 0) {
            chat_numeric(fx, s, 908, "%s :are available SASL mechanisms",
                         s->tls ? "PLAIN,EXTERNAL" : "PLAIN");
            chat_numeric(fx, s, 904, ":SASL authentication failed%s",
                         !strcasecmp(arg, "EXTERNAL") ? ": EXTERNAL needs a TLS connection" : "");
        } else {
            s->reg.sasl_plain = true;
            s->reg.sasl_len = 0;
            chat_guard_credentials(app->guard, s->login.enter_ticket); /* never shed now */
            chat_sendf(fx, "AUTHENTICATE +");
        }
        return;
    }
    if (!strcmp(arg, "*")) {
        s->reg.sasl_plain = false;
        chat_numeric(fx, s, 906, ":SASL authentication aborted");
        return;
    }
    /* The payload comes in 400-byte pieces; a shorter one (or "+") ends it. */
    size_t n = strcmp(arg, "+") ? strlen(arg) : 0;
    if (n > SASL_PIECE_MAX) {
        s->reg.sasl_plain = false;
        s->reg.sasl_len = 0;
        chat_numeric(fx, s, 905, ":SASL message too long (pieces are at most %d bytes)",
                     SASL_PIECE_MAX);
        return;
    }
    if (s->reg.sasl_len + n >= sizeof s->reg.sasl_buf) {
        s->reg.sasl_plain = false;
        /* 905 is for one line over 400 bytes; a whole payload past what any
         * PLAIN login needs is a failed authentication. */
        chat_numeric(fx, s, 904, ":SASL authentication failed: the PLAIN message is too long");
        return;
    }
    memcpy(s->reg.sasl_buf + s->reg.sasl_len, arg, n);
    s->reg.sasl_len += n;
    if (n == SASL_PIECE_MAX)
        return;
    s->reg.sasl_plain = false;
    char plain[768];
    long len = yard_b64decode(s->reg.sasl_buf, s->reg.sasl_len, plain, sizeof plain);
    explicit_bzero(s->reg.sasl_buf, sizeof s->reg.sasl_buf);
    const char *user, *pass;
    size_t ulen, plen;
    if (len <= 0 || !yard_sasl_plain_split(plain, (size_t)len, &user, &ulen, &pass, &plen)) {
        chat_numeric(fx, s, 904, ":SASL authentication failed (malformed PLAIN)");
        explicit_bzero(plain, sizeof plain);
        return;
    }
    /* "alice@phone": the account alice, from the device called phone. */
    const char *at = memchr(user, '@', ulen);
    if (at) {
        set_client(s, at + 1, (size_t)(user + ulen - at - 1));
        s->reg.client_from_sasl = true;
        ulen = (size_t)(at - user);
    }
    chat_start_auth(app, s, fx, user, ulen, pass, plen, true);
    explicit_bzero(plain, sizeof plain);
}

/* PASS password, before registration (a guest's PASS is guest.c's). */
void chat_cmd_pass(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    snprintf(s->reg.pass, sizeof s->reg.pass, "%s", m->params[0]);
    s->reg.have_pass = true;
    chat_guard_credentials(app->guard, s->login.enter_ticket); /* never shed now */
}

/* NICK nick, before registration: the account's name, or a guest's nick. */
void chat_cmd_nick(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    if (!yard_account_name_valid(m->params[0], strlen(m->params[0]))) {
        chat_numeric(fx, s, 432, "%s :Erroneous nickname", m->params[0]);
        return;
    }
    snprintf(s->reg.nick, sizeof s->reg.nick, "%s", m->params[0]);
    s->reg.got_nick = true;
    s->reg.nick_checked = false; /* a login keeps this one if it is no other account's */
    chat_try_register(app, s, fx);
}

/* USER name mode unused :realname. */
void chat_cmd_user(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    if (!m->params[3][0]) { /* an empty realname is a missing one */
        chat_numeric(fx, s, 461, "USER :Not enough parameters");
        return;
    }
    /* The user name says which device this is ("phone", or
     * "alice@phone"), unless SASL's user name already did. */
    const char *u = m->params[0], *at = strchr(u, '@');
    if (!s->reg.client_from_sasl)
        set_client(s, at ? at + 1 : u, strlen(at ? at + 1 : u));
    const char *real = m->params[3];
    /* The user name as WHOIS and WHO show it: what USER gave, up to an '@'
     * (which names the device). */
    size_t un = at ? (size_t)(at - u) : strlen(u);
    un = un > CHAT_USER_MAX ? CHAT_USER_MAX : un;
    memcpy(s->user, u, un);
    s->user[un] = 0;
    size_t rn = chat_utf8_cut(real, strlen(real), CHAT_REALNAME_MAX);
    memcpy(s->realname, real, rn);
    s->realname[rn] = 0;
    s->reg.got_user = true;
    chat_try_register(app, s, fx);
}

/* SETNAME :realname (IRCv3 setname): a new realname for this connection,
 * shown by WHOIS, WHO and extended-join from now on, and told to the
 * members it shares a channel with that have the capability (through the
 * log, like a nick change), and to itself. */
struct realname {
    struct chat_app *app;
    const struct session *s;
    const char *realname;
    bool told;
};

/* Under the lock: the change told in the log, then made. */
static void set_realname(chat_state_t *cs, void *ctx)
{
    struct realname *r = ctx;
    const struct session *s = r->s;
    r->told = s->slot < 0 || chat_setname_put(r->app, s->slot, s->sender, r->realname);
    if (r->told && s->slot >= 0)
        chat_member_ident(cs, s->slot, s->user, r->realname, s->tls);
}

void chat_cmd_setname(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    const char *real = m->params[0];
    if (!real[0]) {
        chat_sendf(fx, ":" SERVER " FAIL SETNAME INVALID_REALNAME :The realname may not be empty");
        return;
    }
    char cut[CHAT_REALNAME_MAX + 1];
    size_t rn = chat_utf8_cut(real, strlen(real), CHAT_REALNAME_MAX);
    memcpy(cut, real, rn);
    cut[rn] = 0;
    struct realname r = {.app = app, .s = s, .realname = cut};
    chat_state_locked(app->cs, set_realname, &r);
    bool told = r.told;
    if (!told) { /* never changed unheard: a stalled disk holds the log's queue */
        chat_sendf(fx, ":" SERVER " FAIL SETNAME CANNOT_CHANGE_REALNAME :The server's log is "
                       "busy: try again in a moment");
        return;
    }
    memcpy(s->realname, cut, rn + 1);
    if (s->caps & CAP_SETNAME)
        chat_sendf(fx, ":%s!%s@" SERVER " SETNAME :%s", s->account, s->account, cut);
}

/* USER, or an account's PASS, once registered. */
void chat_cmd_reregister(struct chat_app *app, struct session *s, yard_fx_t *fx,
                         yard_irc_msg_t *m)
{
    chat_numeric(fx, s, 462, ":You may not reregister");
}
