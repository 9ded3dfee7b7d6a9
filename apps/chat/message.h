/* Messages (message.c): PRIVMSG, NOTICE and TAGMSG checked against the
 * channels' modes and handed to a post job (one append per target, the
 * accounts of private targets looked up first); TOPIC posts through the
 * same job. When the appends are done the ids are this connection's own
 * (echo-message decides whether they come back) and the bus is told. */
#ifndef YARD_CHAT_MESSAGE_H
#define YARD_CHAT_MESSAGE_H

#include "session.h"

void chat_post_begin(struct chat_app *app, struct session *s, int type, const char *text);
void chat_post_target(struct session *s, const char *name, bool person);
void chat_post_start(struct session *s, yard_fx_t *fx);
void chat_post_done(struct chat_app *app, struct session *s, yard_fx_t *fx);
int chat_split_targets(char *list, char **out, int max, int *dropped, char **first_dropped);

chat_cmd_fn chat_cmd_privmsg; /* PRIVMSG */
chat_cmd_fn chat_cmd_notice;  /* NOTICE */
chat_cmd_fn chat_cmd_tagmsg;  /* TAGMSG */

#endif
