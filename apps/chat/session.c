/* A chat connection's callbacks and its output helpers (session.h). */
#define _DEFAULT_SOURCE /* explicit_bzero */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "channel.h"
#include "commands.h"
#include "guest.h"
#include "history.h"
#include "kline.h"
#include "label.h"
#include "monitor.h"
#include "message.h"
#include "register.h"
#include "relay.h"
#include "session.h"
#include "yard/clock.h"

void chat_sendf(yard_fx_t *fx, const char *fmt, ...)
{
    char line[LINE_MAX_MSG + LINE_MAX_TAGS + 4];
    bool cut;
    va_list ap;
    va_start(ap, fmt);
    size_t n = yard_irc_vline(line, sizeof line, &cut, fmt, ap);
    va_end(ap);
    if (n)
        yard_fx_send(fx, line, n);
}

/* Whom a numeric is addressed to: its nick, or the nick given so far. */
const char *chat_who(const struct session *s)
{
    return s->state == ST_READY ? s->nick : s->reg.got_nick ? s->reg.nick : "*";
}

void chat_numeric(yard_fx_t *fx, const struct session *s, int code, const char *fmt, ...)
{
    char rest[LINE_MAX_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rest, sizeof rest, fmt, ap);
    va_end(ap);
    chat_sendf(fx, ":" SERVER " %03d %s %s", code, chat_who(s), rest);
}

void chat_format_time(char *out, size_t cap, int64_t ns)
{
    time_t secs = (time_t)(ns / 1000000000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, cap - n, ".%03dZ", (int)(ns / 1000000 % 1000));
}

bool chat_valid_channel(const char *c)
{
    size_t n = strlen(c);
    if (n < 2 || n > CHAT_CHAN_MAX || (c[0] != '#' && c[0] != '&'))
        return false;
    for (size_t i = 0; i < n; i++)
        if (c[i] == ' ' || c[i] == ',' || c[i] == 7 || c[i] == ':' || (unsigned char)c[i] < 32)
            return false;
    return true;
}

/* The length of text[0..len) cut to at most max bytes, never inside a UTF-8
 * sequence. */
size_t chat_utf8_cut(const char *text, size_t len, size_t max)
{
    if (len <= max)
        return len;
    len = max;
    while (len > 0 && ((unsigned char)text[len] & 0xC0) == 0x80)
        len--;
    return len;
}

/* Flood control charges a request what it costs (the line itself paid one
 * token): every delivered target, so a list of targets cannot multiply one
 * token; the channels a join, part, nick change or away is told in; the
 * lines of a LIST, WHO, NAMES or CHATHISTORY answer (chat_lines_price).
 * The bucket may go below zero: the client is not read until it is back
 * above one. */
void chat_charge(struct session *s, int targets)
{
    if (targets > 1)
        s->in.tokens -= targets - 1;
}

void chat_refill(struct chat_app *app, struct session *s, uint64_t now_ns)
{
    double dt = (double)(now_ns - s->in.tokens_at) / 1e9, rate = app->set->flood_rate,
           burst = app->set->flood_burst;
    s->in.tokens_at = now_ns;
    s->in.tokens = s->in.tokens + dt * rate > burst ? burst : s->in.tokens + dt * rate;
}

void chat_sendq_bounds(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    bool account = s->state == ST_READY && !s->guest;
    s->in.hold = account ? app->hold : app->guests_hold;
    yard_fx_out_bounds(fx, s->in.hold, account ? app->max : app->guests_max);
}

void chat_job_done(void *state, void *session, void *arg, yard_fx_t *fx)
{
    struct chat_app *app = state;
    struct session *s = session;
    chat_label_mark(s, fx); /* a labeled request's answer may go on here */
    switch (*(const enum yard_chat_op *)arg) { /* every request starts with its op */
    case YARD_CHAT_AUTH:
        chat_auth_done(app, s, arg, fx);
        break;
    case YARD_CHAT_NICK:
        chat_nick_done(app, s, fx);
        break;
    case YARD_CHAT_POST:
        chat_post_done(app, s, fx);
        break;
    case YARD_CHAT_READ:
        chat_read_done(app, s, fx);
        break;
    case YARD_CHAT_REPLAY:
        chat_replay_done(app, s, fx);
        break;
    case YARD_CHAT_HISTORY:
        chat_history_done(app, s, fx);
        break;
    case YARD_CHAT_KLINE:
        chat_kline_done(app, s, arg, fx);
        break;
    }
    chat_label_settle(s, fx);
}

void chat_open(void *state, void *session, yard_fx_t *fx)
{
    struct chat_app *app = state;
    struct session *s = session;
    s->slot = -1;
    s->label.at = CHAT_LABEL_NO_REGION;
    s->tls = fx->tls;
    if (fx->certfp)
        snprintf(s->certfp, sizeof s->certfp, "%s", fx->certfp);
    s->in.tokens = app->set->flood_burst;
    s->in.tokens_at = fx->now_ns;
    s->reg.register_by = fx->now_ns + app->set->register_timeout_ns;
    chat_sendq_bounds(app, s, fx);
    chat_addr_of(fx->peer, &s->login.addr);
    int shed;
    int v = chat_guard_enter(app->guard, &s->login.addr, fx->now_ns, &s->login.enter_ticket,
                             &shed);
    if (shed >= 0) /* the connection whose place this one took: it hears so and closes */
        yard_bus_publish(app->bus, 1 + (uint32_t)shed, yard_bus_seq(app->bus, 1 + (uint32_t)shed) + 1);
    if (v == CHAT_GUARD_OK) { /* and so would this one, were it shed in turn */
        uint32_t topic = 1 + (uint32_t)chat_guard_slot(s->login.enter_ticket);
        yard_fx_watch(fx, app->bus, topic, yard_bus_seq(app->bus, topic));
    }
    if (v != CHAT_GUARD_OK) {
        char where[64];
        chat_addr_text(&s->login.addr, where, sizeof where);
        if (v == CHAT_GUARD_TOO_MANY)
            chat_sendf(fx, "ERROR :Closing Link: too many connections from %s have not logged in "
                           "(at most %u)",
                       where, app->set->unregistered_per_addr);
        else
            chat_sendf(fx, "ERROR :Closing Link: the server is busy; try again later");
        yard_fx_close(fx, NULL);
        return;
    }
    yard_fx_wake_idle(fx, s->reg.register_by);
}

/* A logged-in client silent for --ping-interval-ms gets a PING; one that
 * stays silent --ping-timeout-ms more is closed. Sending anything counts as
 * an answer, so the timer is only looked at when it fires (nothing is
 * re-armed per line): it wakes when the next of the two could be due. */
static void liveness(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    const struct chat_settings *set = app->set;
    if (!set->ping_interval_ns)
        return;
    uint64_t now = fx->now_ns;
    if (s->in.pinged_ns && now >= s->in.pinged_ns + set->ping_timeout_ns) {
        snprintf(s->quit_reason, sizeof s->quit_reason, "Ping timeout: %llu seconds",
                 (unsigned long long)((now - s->in.heard_ns) / YARD_NS_PER_S));
        chat_sendf(fx, "ERROR :Closing Link: %s (%s)", s->nick, s->quit_reason);
        yard_fx_close(fx, NULL);
        return;
    }
    if (!s->in.pinged_ns && now >= s->in.heard_ns + set->ping_interval_ns) {
        chat_sendf(fx, "PING :" SERVER);
        s->in.pinged_ns = now;
    }
    yard_fx_wake_idle(fx, s->in.pinged_ns ? s->in.pinged_ns + set->ping_timeout_ns
                                       : s->in.heard_ns + set->ping_interval_ns);
}

void chat_timer(void *state, void *session, yard_fx_t *fx)
{
    struct chat_app *app = state;
    struct session *s = session;
    if (s->in.hist_paused) { /* its tokens are back: the next piece */
        s->in.hist_paused = false;
        chat_history_go_on(app, s, fx);
    }
    if (s->login.pending_fail && fx->now_ns >= s->login.fail_until) {
        int code = s->login.pending_fail;
        s->login.pending_fail = 0;
        chat_label_mark(s, fx); /* the delayed answer of a labeled request */
        if (s->login.fail_oper) { /* OPER's: the connection stays */
            s->login.fail_oper = false;
            chat_numeric(fx, s, code, code == 491 ? ":No O-lines for your host"
                                                  : ":Password incorrect");
        } else if (code == 904) {
            chat_numeric(fx, s, 904, ":SASL authentication failed");
            chat_try_register(app, s, fx); /* NICK and USER may be waiting */
        } else if (s->reg.server_pass_missing) { /* --server-password-required */
            chat_numeric(fx, s, 464, ":Password required: this server's password first (PASS)");
            chat_sendf(fx, "ERROR :Closing Link: password required");
            yard_fx_close(fx, NULL);
        } else {
            chat_numeric(fx, s, 464, ":Password incorrect");
            chat_sendf(fx, "ERROR :Closing Link: password incorrect");
            yard_fx_close(fx, NULL);
        }
        chat_label_settle(s, fx);
        if (fx->close)
            return;
        if (s->state != ST_READY)
            yard_fx_wake_idle(fx, s->reg.register_by);
        else
            liveness(app, s, fx); /* a guest's failed login: its timer watches it again */
        return;
    }
    if (s->state == ST_WAIT && fx->now_ns < s->reg.register_by) {
        chat_retry_check(app, s, fx);
        if (s->state == ST_NEW && !fx->close)
            yard_fx_wake_idle(fx, s->reg.register_by); /* refused at once (904): time goes on */
        return;
    }
    if (s->state != ST_READY) {
        chat_sendf(fx, "ERROR :Closing Link: registration timed out");
        yard_fx_close(fx, NULL);
        return;
    }
    /* Otherwise: a flood-control pause is over (the engine offers the
     * waiting input again), or it is time to look at liveness. */
    liveness(app, s, fx);
}

bool chat_shed(struct chat_app *app, struct session *s, yard_fx_t *fx)
{
    if (s->state == ST_READY || chat_guard_holds(app->guard, s->login.enter_ticket))
        return false;
    s->login.enter_ticket = 0; /* the slot is another's now */
    chat_sendf(fx, "ERROR :Closing Link: too many connections have not logged in; this was the "
                   "oldest from the address that has the most (--max-unregistered %u)",
               app->set->max_unregistered);
    yard_fx_close(fx, NULL);
    return true;
}

size_t chat_data(void *state, void *session, const uint8_t *in, size_t n, yard_fx_t *fx)
{
    struct chat_app *app = state;
    struct session *s = session;
    size_t used = 0;
    if (s->state != ST_READY && chat_shed(app, s, fx))
        return n;
    s->in.heard_ns = fx->now_ns; /* any line is a sign of life (the timer checks lazily) */
    s->in.pinged_ns = 0;
    if (s->in.hist_paused) { /* a CHATHISTORY's next piece comes first (at its timer) */
        yard_fx_pause_input(fx);
        return 0;
    }
    chat_refill(app, s, fx->now_ns);
    double rate = app->set->flood_rate;
    while (used < n && !fx->close && !fx->job && !s->login.pending_fail && s->state != ST_WAIT) {
        if (yard_fx_pending(fx) >= s->in.hold) {
            /* Its answers wait for it past the bound: its further lines
             * wait too, until they have drained (the engine offers them
             * again then, and does not read meanwhile). */
            yard_fx_hold_input(fx);
            break;
        }
        const char *p = (const char *)in + used;
        size_t left = n - used;
        if (s->in.discarding) {
            /* The rest of an overlong line, up to its end (a CR or a LF). */
            size_t end = 0;
            while (end < left && p[end] != '\n' && p[end] != '\r')
                end++;
            used += end < left ? end + 1 : left;
            s->in.discarding = end == left;
            continue;
        }
        size_t start = 0, len = 0, u = 0;
        int f = yard_irc_frame(p, left, &start, &len, &u);
        if (f == YARD_IRC_NEED) {
            used += u;
            break; /* wait for the rest of the line */
        }
        if (f != YARD_IRC_LINE) {
            chat_numeric(fx, s, 417, ":Input line was too long");
            s->in.discarding = f == YARD_IRC_TOOLONG_OPEN;
            used += u;
            continue;
        }
        if (memchr(p + start, 0, len)) {
            chat_numeric(fx, s, 421, "* :Line contains a NUL byte");
            used += u;
            continue;
        }
        if (s->state == ST_READY && rate > 0) {
            if (s->in.tokens < 1) {
                /* Flooding: stop reading this client until a token is due
                 * (a list of targets may have taken the bucket below 0). */
                yard_fx_wake_at(fx, fx->now_ns + (uint64_t)((1 - s->in.tokens) * 1e9 / rate));
                yard_fx_pause_input(fx); /* nor read meanwhile: it waits in the kernel */
                break;
            }
            s->in.tokens -= 1;
        }
        used += u;
        char line[LINE_MAX_MSG + LINE_MAX_TAGS + 2];
        memcpy(line, p + start, len);
        line[len] = 0;
        /* Nothing a terminal would act on reaches the log or another client:
         * ESC, other C0 controls than IRC's formatting codes and CTCP's
         * 0x01, DEL, C1. */
        len = yard_irc_strip_controls(line, len);
        yard_irc_msg_t m;
        if (yard_irc_parse(line, &m))
            chat_command(app, s, fx, &m);
        else
            chat_not_a_command(s, fx, &m);
    }
    /* At the end of input the engine drops what is left, unless a job
     * (a post) stopped the loop: then the rest comes after it. */
    return used;
}

/* A connection leaving, under the lock (leave_state): its part or quit
 * records to log, and its member slot freed. */
struct leaving {
    const struct session *s;
    const char *why;
    int64_t at_s;
    yard_chatlog_entry_t *ev; /* out: n records (malloc'd) */
    unsigned n;
    bool gone; /* out: it was the account's last connection */
};

static void leave_state(chat_state_t *cs, void *ctx)
{
    struct leaving *l = ctx;
    const struct session *s = l->s;
    if (!yard_stopping()) {
        uint64_t others[(CHAT_CHANNELS_LIMIT + 63) / 64] = {0};
        uint64_t left[(CHAT_CHANNELS_LIMIT + 63) / 64];
        bool online = chat_account_others(cs, s->account_key, s->slot, others);
        struct chat_member *me = chat_member_at(cs, s->slot);
        for (unsigned w = 0; w < cs->words; w++)
            left[w] = me->chans[w] & ~others[w];
        l->ev = chat_events_per_channel(cs, left, online ? YARD_LOGREC_PART : YARD_LOGREC_QUIT,
                                        s->sender, l->why, &l->n);
        l->gone = !online;
    }
    chat_member_remove(cs, s->slot, l->at_s);
}

void chat_close(void *state, void *session, const yard_fx_t *fx)
{
    struct chat_app *app = state;
    struct session *s = session;
    if (s->slot >= 0) {
        /* The members who shared a channel with it hear that it left: a
         * quit when this was the account's last connection, else a part
         * for each channel none of its other connections is in. Not when
         * the server is stopping: everybody is leaving then, and nobody
         * is left to tell. */
        yard_chatlog_entry_t *ev = NULL;
        unsigned n = 0;
        bool gone = false; /* the account's last connection: MONITOR's offline */
        const char *why = s->quit_reason[0] ? s->quit_reason : "Connection closed";
        struct leaving l = {.s = s, .why = why, .at_s = fx->wall_ns / (int64_t)YARD_NS_PER_S};
        chat_state_locked(app->cs, leave_state, &l);
        n = l.n;
        ev = l.ev;
        gone = l.gone;
        if (n)
            chat_presence_put(app, ev, n);
        free(ev);
        if (gone)
            chat_monitor_gone(app, s);
    }
    chat_monitor_forget(app, s);
    free(s->rp.recs); /* a replay whose job_done did not run */
    free(s->hist.recs); /* a CHATHISTORY's, likewise */
    free(s->hist.at);
    free(s->hist.chans);
    free(s->hist.targets);
    if (s->kline) /* a K-line request whose job_done did not run */
        free(s->kline->list);
    free(s->kline);
    chat_guard_leave(app->guard, s->login.enter_ticket);
    /* A job is never running here (the engine waits for it), but its
     * job_done may not have run: its check is over either way. close has
     * no clock of the engine's; the check's start is a time no later than
     * now, which is all the limits need (their time never runs backwards). */
    if (s->login.job)
        chat_end_check(app, s, s->login.job->ok, s->login.check_at);
    free(s->login.job);
    explicit_bzero(s->reg.pass, sizeof s->reg.pass);
    chat_forget_wait(s);
}
