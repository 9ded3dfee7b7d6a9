/* Server operators (oper.c): OPER checks a name and password against the
 * data directory's operators (DIR/opers, `yard-chat oper add`) like a
 * login, within the same limits; an operator has user mode +o ('*' in
 * WHO, 313 in WHOIS) and may KILL a connection and send WALLOPS. KILL and
 * WALLOPS go through the log (kill and wallops records), so that they
 * reach connections in every process. */
#ifndef YARD_CHAT_OPER_H
#define YARD_CHAT_OPER_H

#include "session.h"

/* The answer to an OPER's check (register.c's chat_auth_done calls it):
 * 381 and +o, or, after the delay a failed login waits, 464 (wrong
 * password) or 491 (no such operator). */
void chat_oper_done(struct chat_app *app, struct session *s, struct yard_chat_auth *j, yard_fx_t *fx);
/* A kill or wallops record (relay.c): a kill of this connection closes it,
 * a wallops is told when it has user mode +w. */
void chat_oper_relay(struct chat_app *app, struct session *s, yard_fx_t *fx,
                     const yard_chatlog_rec_t *r, const yard_chat_from_t *from);

/* A kill record's text that starts so is a K-line's (kline.c): the
 * connection is told 465 and "Closing Link: K-lined: reason". */
#define CHAT_KLINED "K-lined: "

chat_cmd_fn chat_cmd_oper;    /* OPER name password */
chat_cmd_fn chat_cmd_kill;    /* KILL nick [reason]: operators only */
chat_cmd_fn chat_cmd_wallops; /* WALLOPS text: operators only */

#endif
