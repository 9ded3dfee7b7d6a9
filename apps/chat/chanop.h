/* Channel operators (chanop.c): MODE (a channel's modes and ranks, kept
 * in DIR/channels and told through the log; a user's +i/+w), KICK and
 * INVITE. */
#ifndef YARD_CHAT_CHANOP_H
#define YARD_CHAT_CHANOP_H

#include "session.h"

void chat_chan_mode(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m);
void chat_kick(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m);
void chat_invite(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m);

#endif
