/* The chat's command table and its dispatcher (commands.h). */
#define _DEFAULT_SOURCE /* explicit_bzero */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "channel.h"
#include "chanop.h"
#include "commands.h"
#include "guest.h"
#include "history.h"
#include "message.h"
#include "query.h"
#include "register.h"
#include "session.h"
#include "yard/clock.h"

void chat_command(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m)
{
    const char *c = m->cmd;
    if (!strcmp(c, "PING")) {
        chat_sendf(fx, ":" SERVER " PONG " SERVER " :%s", m->n ? m->params[0] : "");
        return;
    }
    if (!strcmp(c, "PONG"))
        return;
    if (!strcmp(c, "QUIT")) {
        snprintf(s->quit_reason, sizeof s->quit_reason, "Quit: %s", m->n ? m->params[0] : "");
        chat_sendf(fx, "ERROR :Closing Link: %s (Quit: %s)", chat_who(s), m->n ? m->params[0] : "");
        yard_fx_close(fx, NULL);
        return;
    }
    if (!strcmp(c, "CAP")) {
        chat_cap(app, s, fx, m);
        return;
    }
    if (s->state != ST_READY) {
        if (!strcmp(c, "AUTHENTICATE")) {
            chat_authenticate(app, s, fx, m);
        } else if (!strcmp(c, "PASS")) {
            if (m->n < 1) {
                chat_numeric(fx, s, 461, "PASS :Not enough parameters");
            } else {
                snprintf(s->pass, sizeof s->pass, "%s", m->params[0]);
                s->have_pass = true;
            }
        } else if (!strcmp(c, "NICK")) {
            if (m->n < 1) {
                chat_numeric(fx, s, 431, ":No nickname given");
            } else if (!yard_account_name_valid(m->params[0], strlen(m->params[0]))) {
                chat_numeric(fx, s, 432, "%s :Erroneous nickname", m->params[0]);
            } else {
                snprintf(s->nick, sizeof s->nick, "%s", m->params[0]);
                s->got_nick = true;
                chat_try_register(app, s, fx);
            }
        } else if (!strcmp(c, "USER")) {
            if (m->n < 4) {
                chat_numeric(fx, s, 461, "USER :Not enough parameters");
            } else {
                /* The user name says which device this is ("phone", or
                 * "alice@phone"), unless SASL's user name already did. */
                const char *u = m->params[0], *at = strchr(u, '@');
                if (!s->client_from_sasl)
                    chat_set_client(s, at ? at + 1 : u, strlen(at ? at + 1 : u));
                const char *real = m->params[3];
                size_t rn = chat_utf8_cut(real, strlen(real), CHAT_REALNAME_MAX);
                memcpy(s->realname, real, rn);
                s->realname[rn] = 0;
                s->got_user = true;
                chat_try_register(app, s, fx);
            }
        } else {
            chat_numeric(fx, s, 451, "%s :You have not registered", c);
        }
        return;
    }
    if (!strcmp(c, "PRIVMSG")) {
        chat_message(app, s, fx, m, YARD_LOGREC_MESSAGE);
    } else if (!strcmp(c, "NOTICE")) {
        chat_message(app, s, fx, m, YARD_LOGREC_NOTICE);
    } else if (!strcmp(c, "TAGMSG")) {
        chat_message(app, s, fx, m, YARD_LOGREC_TAGMSG);
    } else if (!strcmp(c, "JOIN")) {
        if (m->n < 1) {
            chat_numeric(fx, s, 461, "JOIN :Not enough parameters");
            return;
        }
        if (!strcmp(m->params[0], "0")) { /* leave every channel */
            for (unsigned i = 0; i < app->cs->nchan; i++) {
                chat_lock(app->cs);
                bool in = app->cs->chans[i].used && chat_is_in(app->cs, s->slot, (int)i);
                char name[CHAT_CHAN_MAX + 1];
                strcpy(name, app->cs->chans[i].name);
                chat_unlock(app->cs);
                if (in)
                    chat_part_one(app, s, fx, name, "Left all channels");
            }
            return;
        }
        int n = 0; /* as strtok_r counts them: empty names are skipped */
        for (const char *p = m->params[0]; *p; p++)
            n += *p != ',' && (p == m->params[0] || p[-1] == ',');
        chat_charge(s, n);
        chat_join_list(app, s, fx, m->params[0], m->n > 1 ? m->params[1] : NULL);
    } else if (!strcmp(c, "PART")) {
        if (m->n < 1) {
            chat_numeric(fx, s, 461, "PART :Not enough parameters");
            return;
        }
        char *save = NULL;
        int n = 0;
        for (char *t = strtok_r(m->params[0], ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            chat_part_one(app, s, fx, t, m->n > 1 ? m->params[1] : NULL);
            n++;
        }
        chat_charge(s, n);
    } else if (!strcmp(c, "NAMES")) {
        if (m->n < 1) {
            chat_numeric(fx, s, 366, "* :End of /NAMES list.");
            return;
        }
        char *save = NULL;
        int n = 0;
        for (char *t = strtok_r(m->params[0], ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            char shown[CHAT_CHAN_MAX + 1];
            int ch = chat_channel_of(app, s, fx, t, false);
            if (ch >= 0 && chat_channel_name(app, ch, shown))
                chat_names(app, s, fx, ch, shown);
            n++;
        }
        chat_charge(s, n);
    } else if (!strcmp(c, "TOPIC")) {
        if (m->n < 1) {
            chat_numeric(fx, s, 461, "TOPIC :Not enough parameters");
            return;
        }
        int ch = chat_channel_of(app, s, fx, m->params[0], m->n > 1);
        if (ch < 0)
            return;
        chat_lock(app->cs);
        char shown[CHAT_CHAN_MAX + 1], key[CHAT_CHAN_MAX + 1];
        strcpy(shown, app->cs->chans[ch].name);
        strcpy(key, app->cs->chans[ch].key);
        chat_unlock(app->cs);
        if (m->n == 1) {
            chat_topic_reply(app, s, fx, shown, key);
            return;
        }
        chat_lock(app->cs);
        bool locked = (app->cs->chans[ch].modes & CHAT_MODE_T) &&
                      !(chat_chan_rank(app->cs, key, s->account_key) & CHAT_RANK_OP);
        chat_unlock(app->cs);
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
        if (!chat_topic_set(app->cs, key, topic, len, s->account, yard_wall_ns() / (int64_t)YARD_NS_PER_S)) {
            chat_sendf(fx, ":" SERVER " NOTICE %s :The topic of %s was not set: the server holds no "
                      "more topics",
                  s->account, shown);
            return;
        }
        chat_post_begin(app, s, YARD_LOGREC_TOPIC, topic);
        chat_post_target(s, shown, false);
        chat_post_start(s, fx);
    } else if (!strcmp(c, "MOTD")) {
        if (app->motd[0]) {
            chat_numeric(fx, s, 375, ":- " SERVER " Message of the day -");
            chat_numeric(fx, s, 372, ":- %.400s", app->motd);
            chat_numeric(fx, s, 376, ":End of /MOTD command.");
        } else {
            chat_numeric(fx, s, 422, ":MOTD File is missing");
        }
    } else if (!strcmp(c, "WHO")) {
        const char *mask = m->n ? m->params[0] : "*";
        int ch = (mask[0] == '#' || mask[0] == '&') ? chat_channel_of(app, s, fx, mask, false) : -1;
        char shown[CHAT_CHAN_MAX + 1];
        if (ch >= 0 && chat_channel_name(app, ch, shown)) {
            size_t n;
            bool nomem;
            char(*who_is)[CHAT_NAME_MAX + 1] = chat_members_of(app, ch, &n, &nomem);
            if (nomem)
                fx->nomem = true;
            struct chat_chanrec rec;
            chat_ranks_of(app, ch, &rec);
            for (size_t i = 0; i < n; i++)
                chat_numeric(fx, s, 352, "%s %s " SERVER " " SERVER " %s H%s :0 %s", shown, who_is[i],
                             who_is[i], chat_rank_prefix(chat_rank_in(&rec, who_is[i]), s), who_is[i]);
            free(who_is);
        }
        chat_numeric(fx, s, 315, "%s :End of /WHO list.", mask);
    } else if (!strcmp(c, "MODE")) {
        if (m->n >= 1 && (m->params[0][0] == '#' || m->params[0][0] == '&')) {
            chat_chan_mode(app, s, fx, m);
        } else if (m->n >= 1 && strcasecmp(m->params[0], s->account)) {
            chat_numeric(fx, s, 502, ":Cannot change mode for other users");
        } else if (m->n == 1) {
            chat_numeric(fx, s, 221, "+%s%s", s->umode_i ? "i" : "", s->umode_w ? "w" : "");
        } else {
            /* +i and +w are kept (and change nothing else here); others: 501 */
            bool on = true, i = s->umode_i, w = s->umode_w, unknown = false;
            for (const char *p = m->params[1]; *p; p++) {
                if (*p == '+' || *p == '-')
                    on = *p == '+';
                else if (*p == 'i')
                    i = on;
                else if (*p == 'w')
                    w = on;
                else
                    unknown = true;
            }
            if (unknown)
                chat_numeric(fx, s, 501, ":Unknown MODE flag");
            if (i != s->umode_i || w != s->umode_w) {
                char change[8];
                size_t n = 0;
                if ((i && !s->umode_i) || (w && !s->umode_w)) {
                    change[n++] = '+';
                    if (i && !s->umode_i)
                        change[n++] = 'i';
                    if (w && !s->umode_w)
                        change[n++] = 'w';
                }
                if ((!i && s->umode_i) || (!w && s->umode_w)) {
                    change[n++] = '-';
                    if (!i && s->umode_i)
                        change[n++] = 'i';
                    if (!w && s->umode_w)
                        change[n++] = 'w';
                }
                change[n] = 0;
                s->umode_i = i;
                s->umode_w = w;
                chat_sendf(fx, ":%s!%s@" SERVER " MODE %s :%s", s->account, s->account, s->account,
                           change);
            }
        }
    } else if (!strcmp(c, "WHOIS") || !strcmp(c, "WHOWAS")) {
        if (m->n < 1) {
            chat_numeric(fx, s, 431, ":No nickname given");
            return;
        }
        /* WHOIS [server] nick[,nick]: the nicks are the last parameter;
         * WHOWAS nick[,nick] [count]: the first */
        bool is = c[3] == 'I';
        char *save = NULL;
        int n = 0;
        for (char *t = strtok_r(m->params[is ? m->n - 1 : 0], ",", &save); t && n < TARGMAX;
             t = strtok_r(NULL, ",", &save), n++)
            (is ? chat_whois_reply : chat_whowas_reply)(app, s, fx, t);
        chat_charge(s, n);
    } else if (!strcmp(c, "ISON") || !strcmp(c, "USERHOST")) {
        if (m->n < 1) {
            chat_numeric(fx, s, 461, "%s :Not enough parameters", c);
            return;
        }
        chat_ison(app, s, fx, m, c[0] == 'U');
    } else if (!strcmp(c, "AWAY")) {
        chat_away(app, s, fx, m);
    } else if (!strcmp(c, "KICK")) {
        chat_kick(app, s, fx, m);
    } else if (!strcmp(c, "INVITE")) {
        chat_invite(app, s, fx, m);
    } else if (!strcmp(c, "CHATHISTORY")) {
        chat_chathistory(app, s, fx, m);
    } else if (!strcmp(c, "MARKREAD")) {
        chat_markread(app, s, fx, m);
    } else if (!strcmp(c, "LIST")) {
        chat_list(app, s, fx, m);
    } else if (!strcmp(c, "LUSERS")) {
        chat_lusers(app, s, fx);
    } else if (!strcmp(c, "VERSION")) {
        chat_numeric(fx, s, 351, "switchyard-chat " SERVER " :Switchyard chat (docs/chat.md)");
    } else if (!strcmp(c, "TIME")) {
        char when[64];
        chat_format_time(when, sizeof when, yard_wall_ns());
        chat_numeric(fx, s, 391, SERVER " :%s", when);
    } else if (!strcmp(c, "NICK")) {
        if (m->n < 1) {
            chat_numeric(fx, s, 431, ":No nickname given");
        } else if (!s->guest) {
            if (strcasecmp(m->params[0], s->account) != 0)
                chat_numeric(fx, s, 432, "%s :Your nick is your account name", m->params[0]);
        } else if (!yard_account_name_valid(m->params[0], strlen(m->params[0]))) {
            chat_numeric(fx, s, 432, "%s :Erroneous nickname (1-%d characters: a letter or one of "
                                "[\\]^_`{|} first, then also digits and -)",
                    m->params[0], CHAT_NAME_MAX);
        } else if (strcmp(m->params[0], s->account) && !s->nick_checking) {
            chat_nick_check(app, s, fx, m->params[0]); /* an account's? then in use? */
        }
    } else if (!strcmp(c, "PASS") && s->guest) {
        /* A guest logs in with PASS account:password (its nick may be
         * anything, so the account is named here). */
        const char *colon = m->n ? strchr(m->params[0], ':') : NULL;
        if (!colon || colon == m->params[0]) {
            chat_numeric(fx, s, 461, "PASS :Give account:password to log in");
            return;
        }
        chat_start_auth(app, s, fx, m->params[0], (size_t)(colon - m->params[0]), colon + 1,
                        strlen(colon + 1), false);
        explicit_bzero(m->params[0], strlen(m->params[0]));
    } else if (!strcmp(c, "USER") || !strcmp(c, "PASS")) {
        chat_numeric(fx, s, 462, ":You may not reregister");
    } else if (!strcmp(c, "AUTHENTICATE")) {
        chat_authenticate(app, s, fx, m); /* a guest may log in; an account is told 907 */
    } else {
        chat_numeric(fx, s, 421, "%s :Unknown command", c);
    }
}
