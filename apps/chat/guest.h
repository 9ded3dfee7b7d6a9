/* Guests (guest.c, --guests): a client that registers with NICK and USER
 * and no credentials gets a member slot under its nick once a nick job has
 * checked that no account has that name; a guest may change its nick (told
 * to its channels through the log) and log in later, becoming the account
 * in the channels it is in. */
#ifndef YARD_CHAT_GUEST_H
#define YARD_CHAT_GUEST_H

#include "session.h"

void chat_nick_check(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *nick);
void chat_guest_logs_in(struct chat_app *app, struct session *s, yard_fx_t *fx,
                        const char *account, bool sasl);
void chat_nick_done(struct chat_app *app, struct session *s, yard_fx_t *fx);

chat_cmd_fn chat_cmd_nick_registered; /* NICK once registered */
chat_cmd_fn chat_cmd_pass_registered; /* PASS once registered: a guest logs in */

#endif
