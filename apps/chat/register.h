/* Registration and login (register.c): CAP negotiation, PASS, NICK and
 * USER before registration, SASL PLAIN (AUTHENTICATE), the password check
 * (an offloaded bcrypt job) within the login limits (guard.h), the delayed
 * answer to a failed login, and the welcome once a connection is in. */
#ifndef YARD_CHAT_REGISTER_H
#define YARD_CHAT_REGISTER_H

#include "session.h"

/* app->server_name from --server-name, or from the host name when it is not
 * given (and "yard" when the host name is not a valid server name); -1 with
 * err filled when the given one is not valid. */
int chat_server_name_init(struct chat_app *app, const char *given, char *err, size_t errlen);
void chat_forget_wait(struct session *s);
/* Who the connection is (the account, or for a guest its nick) and the
 * nick it is shown by: s->account, account_key, nick and sender (the log's
 * name for it, yard_chat_from). */
void chat_set_names(struct session *s, const char *account, const char *nick, bool guest);
/* The log's name for the account shown by nick (account NULL: a guest),
 * as yard_chat_from reads it back: "~nick", "account/nick" or "account". */
void chat_sender_name(char *out, size_t cap, const char *account, const char *nick);
void chat_start_auth(struct chat_app *app, struct session *s, yard_fx_t *fx,
                     const char *account, size_t alen, const char *password, size_t plen,
                     bool sasl);
/* OPER NAME PASSWORD: checked like a login (its answer: oper.c's
 * chat_oper_done). */
void chat_start_oper(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *name,
                     const char *password);
/* The login that waited its turn (ST_WAIT), checked now. */
void chat_retry_check(struct chat_app *app, struct session *s, yard_fx_t *fx);
void chat_end_check(struct chat_app *app, struct session *s, bool ok, uint64_t now_ns);
void chat_ready(struct chat_app *app, struct session *s, yard_fx_t *fx);
void chat_try_register(struct chat_app *app, struct session *s, yard_fx_t *fx);
/* A failed login or OPER: the answer (numeric) waits --login-fail-delay-ms
 * per failure of the connection so far (at most 10 of them), and no line is
 * taken meanwhile (session.c answers when the time comes). */
void chat_login_failed(struct chat_app *app, struct session *s, yard_fx_t *fx, int numeric);
void chat_auth_done(struct chat_app *app, struct session *s, struct yard_chat_auth *j, yard_fx_t *fx);

chat_cmd_fn chat_cmd_cap;          /* CAP */
chat_cmd_fn chat_cmd_authenticate; /* AUTHENTICATE: SASL PLAIN (an account in already: 907) */
chat_cmd_fn chat_cmd_pass;         /* PASS, before registration */
chat_cmd_fn chat_cmd_nick;         /* NICK, before registration */
chat_cmd_fn chat_cmd_user;         /* USER, before registration */
chat_cmd_fn chat_cmd_reregister;   /* USER (and an account's PASS) once registered: 462 */
chat_cmd_fn chat_cmd_setname;      /* SETNAME :realname */

#endif
