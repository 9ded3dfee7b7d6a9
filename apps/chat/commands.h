/* The command table (commands.c): one row per command, looked up by name,
 * and the dispatcher that answers unknown commands, commands sent before
 * registration and too few parameters, before a handler runs. */
#ifndef YARD_CHAT_COMMANDS_H
#define YARD_CHAT_COMMANDS_H

#include "session.h"

void chat_command(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m);

#endif
