/* CHATHISTORY and read markers (history.c): CHATHISTORY's subcommands
 * parsed and run as a lookup job through the log's index, the answer as a
 * chathistory batch; MARKREAD (draft/read-marker), an account's marker per
 * target, moved forward only and told to all its connections through the
 * log. */
#ifndef YARD_CHAT_HISTORY_H
#define YARD_CHAT_HISTORY_H

#include "session.h"

#define MARKER_CLIENT "~read" /* the read positions' client id for markers: no device has it */

void chat_marker_text(struct chat_app *app, struct session *s, const char *key, char *out,
                      size_t cap);
void chat_history_done(struct chat_app *app, struct session *s, yard_fx_t *fx);
void chat_history_go_on(struct chat_app *app, struct session *s, yard_fx_t *fx);

chat_cmd_fn chat_cmd_chathistory; /* CHATHISTORY */
chat_cmd_fn chat_cmd_markread;    /* MARKREAD */

#endif
