/* The command table (commands.c): one row per command, sorted by name,
 * and the one dispatcher that answers what no handler should have to:
 * 451 for a command that needs registration (or any unknown one before
 * it), 421 for an unknown command, and 461 (or the row's own answer) for
 * too few parameters. A handler runs with at least its row's minimum of
 * parameters. Adding a command is one row here and one handler in the
 * module it belongs to, declared in that module's header as a chat_cmd_fn. */
#ifndef YARD_CHAT_COMMANDS_H
#define YARD_CHAT_COMMANDS_H

#include "session.h"

/* Run the command m (its name upper-cased by yard_irc_parse). */
void chat_command(struct chat_app *app, struct session *s, yard_fx_t *fx, yard_irc_msg_t *m);

/* 421 for a line that is no command (m as yard_irc_parse left it). */
void chat_not_a_command(struct session *s, yard_fx_t *fx, const yard_irc_msg_t *m);

/* 0, or -1 when the table is out of order (chat_init refuses to start). */
int chat_commands_check(void);

#endif
