/* Queries (query.c): who is here and what the server is. WHO, WHOIS,
 * WHOWAS, ISON, USERHOST, AWAY (and its away-notify records), LIST,
 * LUSERS, MOTD, VERSION, TIME and INFO; an account's presence over all its
 * connections (online, away, the channels it is in). */
#ifndef YARD_CHAT_QUERY_H
#define YARD_CHAT_QUERY_H

#include "session.h"

/* What the member slots say of one user, named by its nick or its account
 * (or a guest's nick): online when
 * any of its connections is; away when every one of them is (a phone left
 * away does not hide the desktop in use), with the message set last;
 * chans, when given, the channels it is in, each once. */
struct presence {
    bool online, away;
    bool guest; /* --guests: a nick with no account */
    bool secure; /* every connection of it is encrypted (TLS) */
    bool oper;  /* one of its connections is a server operator (+o) */
    bool bot;   /* one of its connections has user mode +B */
    char account[CHAT_NAME_MAX + 1]; /* who it is (a guest's: its nick) */
    char nick[CHAT_NAME_MAX + 1];    /* the nick it is shown by */
    char away_msg[CHAT_AWAY_MAX + 1];
    char user[CHAT_USER_MAX + 1];         /* its first connection's USER */
    char realname[CHAT_REALNAME_MAX + 1];
};

void chat_presence_of(struct chat_app *app, const char *nick, struct presence *p, char *chans,
                      size_t chans_cap);
void chat_away_of_members(struct chat_app *app, struct session *s, yard_fx_t *fx, int c);

chat_cmd_fn chat_cmd_who;      /* WHO */
chat_cmd_fn chat_cmd_whois;    /* WHOIS */
chat_cmd_fn chat_cmd_whowas;   /* WHOWAS */
chat_cmd_fn chat_cmd_ison;     /* ISON */
chat_cmd_fn chat_cmd_userhost; /* USERHOST */
chat_cmd_fn chat_cmd_away;     /* AWAY */
chat_cmd_fn chat_cmd_list;     /* LIST */
chat_cmd_fn chat_cmd_lusers;   /* LUSERS */
chat_cmd_fn chat_cmd_motd;     /* MOTD */
chat_cmd_fn chat_cmd_version;  /* VERSION */
chat_cmd_fn chat_cmd_time;     /* TIME */
chat_cmd_fn chat_cmd_info;     /* INFO */

#endif
