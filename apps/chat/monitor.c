/* IRCv3 MONITOR (monitor.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor.h"
#include "relay.h"

static int monitor_find(const struct chat_monitor *m, const char *key)
{
    for (unsigned i = 0; i < m->n; i++)
        if (!strcmp(m->key[i], key))
            return (int)i;
    return -1;
}

/* Does any connection (of any process) monitor anything? Records are
 * logged only then. */
static bool anyone_monitors(struct chat_app *app)
{
    return chat_monitoring_any(app->cs);
}

/* The count of connections monitoring anything moves with this one's
 * list becoming empty or not. */
static void monitoring_moved(struct chat_app *app, bool had, bool has)
{
    if (had == has)
        return;
    chat_monitoring_note(app->cs, has);
}

void chat_monitor_forget(struct chat_app *app, struct session *s)
{
    monitoring_moved(app, s->monitor.n, false);
    s->monitor.n = 0;
}

static void tell(struct chat_app *app, const char *sender, bool online)
{
    yard_chatlog_entry_t ev;
    chat_presence_ev(&ev, YARD_LOGREC_ONLINE, sender, "*", online ? "+" : "-");
    chat_presence_put(app, &ev, 1);
}

struct other_conn {
    const struct session *s;
    bool found;
};

/* chat_members_each: is another connection of the account connected?
 * (the walk stops at the first) */
static bool another_connection(chat_state_t *cs, int slot, struct chat_member *mb, void *ctx)
{
    (void)cs;
    struct other_conn *o = ctx;
    o->found = slot != o->s->slot && !mb->guest && !strcmp(mb->key, o->s->account_key);
    return !o->found;
}

void chat_monitor_ready(struct chat_app *app, struct session *s)
{
    if (!anyone_monitors(app))
        return;
    struct other_conn o = {.s = s, .found = false};
    if (!s->guest)
        chat_members_each(app->cs, another_connection, &o);
    bool first = !o.found;
    if (first)
        tell(app, s->sender, true);
}

void chat_monitor_gone(struct chat_app *app, const struct session *s)
{
    if (anyone_monitors(app))
        tell(app, s->sender, false);
}

/* Whether the nick (casefolded key) is connected: nick!user@host in out. */
static bool online_as(struct chat_app *app, const char *key, char *out, size_t cap)
{
    struct chat_member mb;
    int at = chat_member_lookup(app->cs, key, &mb);
    if (at >= 0)
        snprintf(out, cap, "%s!%s@" SERVER, mb.nick, mb.user[0] ? mb.user : mb.nick);
    return at >= 0;
}

/* 730 for nick (as nick!user@host when connected), or 731, to s. */
static void tell_one(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *nick,
                     bool online)
{
    char key[CHAT_NAME_MAX + 1], who[CHAT_NAME_MAX + CHAT_USER_MAX + 16];
    size_t len = strlen(nick);
    chat_casefold(key, nick, len > CHAT_NAME_MAX ? CHAT_NAME_MAX : len);
    if (!online)
        chat_numeric(fx, s, 731, ":%s", nick);
    else if (online_as(app, key, who, sizeof who))
        chat_numeric(fx, s, 730, ":%s", who);
    else
        chat_numeric(fx, s, 730, ":%s", nick); /* gone again since: its offline record follows */
}

bool chat_monitor_watches(const struct session *s, const yard_chat_from_t *from)
{
    if (!(s->caps & CAP_EXTENDED_MONITOR) || !s->monitor.n || from->nick_len > CHAT_NAME_MAX)
        return false;
    char key[CHAT_NAME_MAX + 1], mine[CHAT_NAME_MAX + 1];
    chat_casefold(key, from->nick, from->nick_len);
    chat_casefold(mine, s->nick, strlen(s->nick));
    return strcmp(key, mine) != 0 && monitor_find(&s->monitor, key) >= 0;
}

void chat_monitor_relay(struct chat_app *app, struct session *s, yard_fx_t *fx,
                        const yard_chatlog_rec_t *r, const yard_chat_from_t *from)
{
    if (!s->monitor.n || from->nick_len > CHAT_NAME_MAX)
        return;
    char nick[CHAT_NAME_MAX + 1], key[CHAT_NAME_MAX + 1];
    memcpy(nick, from->nick, from->nick_len);
    nick[from->nick_len] = 0;
    chat_casefold(key, nick, from->nick_len);
    if (r->type == YARD_LOGREC_ONLINE) {
        if (monitor_find(&s->monitor, key) >= 0)
            tell_one(app, s, fx, nick, r->text_len && r->text[0] == '+');
        return;
    }
    /* a guest's nick change: the old nick goes, the new one comes */
    char to[CHAT_NAME_MAX + 1], to_key[CHAT_NAME_MAX + 1];
    if (!r->text_len || r->text_len > CHAT_NAME_MAX)
        return;
    memcpy(to, r->text, r->text_len);
    to[r->text_len] = 0;
    chat_casefold(to_key, to, r->text_len);
    if (!strcmp(key, to_key))
        return; /* a change of case */
    if (monitor_find(&s->monitor, key) >= 0)
        tell_one(app, s, fx, nick, false);
    if (monitor_find(&s->monitor, to_key) >= 0)
        tell_one(app, s, fx, to, true);
}


/* Answer lines of nicks, comma-separated, each line at most ~400 bytes. */
struct nick_lines {
    char buf[420];
    size_t len;
    int code;
};

static void line_flush(struct session *s, yard_fx_t *fx, struct nick_lines *l)
{
    if (l->len)
        chat_numeric(fx, s, l->code, ":%s", l->buf);
    l->len = 0;
    l->buf[0] = 0;
}

static void line_add(struct session *s, yard_fx_t *fx, struct nick_lines *l, const char *item)
{
    size_t n = strlen(item);
    if (l->len && l->len + 1 + n >= 400)
        line_flush(s, fx, l);
    l->len += (size_t)snprintf(l->buf + l->len, sizeof l->buf - l->len, "%s%s", l->len ? "," : "",
                               item);
}

/* 730 and 731 for the nicks given (or, with given NULL, the whole list). */
static void status(struct chat_app *app, struct session *s, yard_fx_t *fx, char *const *given,
                   int n)
{
    struct nick_lines on = {.code = 730}, off = {.code = 731};
    int count = given ? n : (int)s->monitor.n;
    for (int i = 0; i < count; i++) {
        char key[CHAT_NAME_MAX + 1], who[CHAT_NAME_MAX + CHAT_USER_MAX + 16];
        const char *nick = given ? given[i] : s->monitor.key[i];
        chat_casefold(key, nick, strlen(nick));
        if (online_as(app, key, who, sizeof who)) {
            line_add(s, fx, &on, who);
        } else {
            line_add(s, fx, &off, nick);
        }
    }
    line_flush(s, fx, &on);
    line_flush(s, fx, &off);
    chat_charge(s, chat_lines_price((unsigned long)count));
}

/* MONITOR + nick,nick: added (to the bound: 734 for the rest), then their
 * status; nicks that are not valid nicks are left out. */
static void monitor_add(struct chat_app *app, struct session *s, yard_fx_t *fx, char *list)
{
    char *added[CHAT_MONITOR_MAX];
    int n = 0;
    bool had = s->monitor.n;
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!yard_account_name_valid(t, strlen(t)))
            continue;
        char key[CHAT_NAME_MAX + 1];
        chat_casefold(key, t, strlen(t));
        if (monitor_find(&s->monitor, key) >= 0) {
            if (n < CHAT_MONITOR_MAX)
                added[n++] = t;
            continue;
        }
        if (s->monitor.n >= CHAT_MONITOR_MAX) {
            chat_numeric(fx, s, 734, "%d %s%s%s :Monitor list is full.", CHAT_MONITOR_MAX, t,
                         save && *save ? "," : "", save && *save ? save : "");
            break;
        }
        memcpy(s->monitor.key[s->monitor.n++], key, sizeof key);
        added[n++] = t;
    }
    monitoring_moved(app, had, s->monitor.n);
    status(app, s, fx, added, n);
}

static void monitor_remove(struct chat_app *app, struct session *s, char *list)
{
    bool had = s->monitor.n;
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        char key[CHAT_NAME_MAX + 1];
        size_t len = strlen(t);
        chat_casefold(key, t, len > CHAT_NAME_MAX ? CHAT_NAME_MAX : len);
        int at = len <= CHAT_NAME_MAX ? monitor_find(&s->monitor, key) : -1;
        if (at >= 0)
            memcpy(s->monitor.key[at], s->monitor.key[--s->monitor.n], sizeof s->monitor.key[0]);
    }
    monitoring_moved(app, had, s->monitor.n);
}

void chat_cmd_monitor(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    char op = m->params[0][0];
    bool targets = m->params[0][1] == 0 && (op == '+' || op == '-');
    if (targets && m->n < 2) {
        chat_numeric(fx, s, 461, "MONITOR :Not enough parameters");
    } else if (targets && op == '+') {
        monitor_add(app, s, fx, m->params[1]);
    } else if (targets) {
        monitor_remove(app, s, m->params[1]);
    } else if ((op == 'C' || op == 'c') && !m->params[0][1]) {
        monitoring_moved(app, s->monitor.n, false);
        s->monitor.n = 0;
    } else if ((op == 'L' || op == 'l') && !m->params[0][1]) {
        struct nick_lines l = {.code = 732};
        for (unsigned i = 0; i < s->monitor.n; i++)
            line_add(s, fx, &l, s->monitor.key[i]);
        line_flush(s, fx, &l);
        chat_numeric(fx, s, 733, ":End of MONITOR list");
    } else if ((op == 'S' || op == 's') && !m->params[0][1]) {
        status(app, s, fx, NULL, 0);
    } else {
        chat_numeric(fx, s, 461, "MONITOR :Give +, -, C, L or S");
    }
}
