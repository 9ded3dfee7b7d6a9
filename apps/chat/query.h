/* Queries (query.c): who is here and what the server is. WHO, WHOIS,
 * WHOWAS, ISON, USERHOST, AWAY (and its away-notify records), LIST,
 * LUSERS, MOTD, VERSION and TIME; an account's presence over all its
 * connections (online, away, the channels it is in). */
#ifndef YARD_CHAT_QUERY_H
#define YARD_CHAT_QUERY_H

#include "session.h"

/* What the member slots say of one account (nick = account): online when
 * any of its connections is; away when every one of them is (a phone left
 * away does not hide the desktop in use), with the message set last;
 * chans, when given, the channels it is in, each once. */
struct presence {
    bool online, away;
    bool guest; /* --guests: a nick with no account */
    char account[CHAT_NAME_MAX + 1];
    char away_msg[CHAT_AWAY_MAX + 1];
};

void chat_presence_of(struct chat_app *app, const char *nick, struct presence *p, char *chans,
                      size_t chans_cap);
void chat_away_of_members(struct chat_app *app, struct session *s, yard_fx_t *fx, int c);
void chat_whois_reply(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *nick);
void chat_whowas_reply(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *nick);
void chat_ison(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m,
               bool userhost);
void chat_away(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m);
void chat_list(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m);
void chat_lusers(struct chat_app *app, struct session *s, yard_fx_t *fx);

#endif
