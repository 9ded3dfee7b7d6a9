/* Channel operators (chanop.c): MODE (a channel's modes and ranks, kept
 * in DIR/channels and told through the log; a user's +i/+w), KICK and
 * INVITE. */
#ifndef YARD_CHAT_CHANOP_H
#define YARD_CHAT_CHANOP_H

#include "session.h"

chat_cmd_fn chat_cmd_mode;   /* MODE */
chat_cmd_fn chat_cmd_kick;   /* KICK */
chat_cmd_fn chat_cmd_invite; /* INVITE */

#endif
