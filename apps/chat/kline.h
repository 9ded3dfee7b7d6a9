/* Operator bans, K-lines (kline.c): kept in DIR/klines by the store
 * (yard/chat_klines.h) and copied into the shared region, checked against
 * that copy at each registration (reloaded by a job only when
 * DIR/klines.gen says the file changed), set and removed by
 * server operators with KLINE and UNKLINE (and by the host's admin with
 * `yard-chat kline`), listed with STATS k. A K-line added by KLINE also
 * closes the connections it matches then (kill records, through the log). */
#ifndef YARD_CHAT_KLINE_H
#define YARD_CHAT_KLINE_H

#include "session.h"

/* The copy, loaded from DIR/klines (chat_init, after the store is open):
 * 0, or -1 with err. */
int chat_klines_init(struct chat_app *app, yard_shm_t *shm, char *err, size_t errlen);
/* Registration (register.c): true while the K-lines are being checked (a
 * reload of a stale copy is in flight) or one applied (the connection is
 * told 465 and closed), false once none applies. */
bool chat_kline_checking(struct chat_app *app, struct session *s, yard_fx_t *fx);
/* A guest just logged in to an account (SASL or PASS once registered):
 * the K-lines are checked again, as the account (a job). */
void chat_kline_recheck(struct chat_app *app, struct session *s, yard_fx_t *fx);
/* The store's answer to a K-line request (session.c's job_done). */
void chat_kline_done(struct chat_app *app, struct session *s, struct yard_chat_kline *j,
                     yard_fx_t *fx);

chat_cmd_fn chat_cmd_kline;   /* KLINE [duration] mask [:reason]: operators only */
chat_cmd_fn chat_cmd_unkline; /* UNKLINE mask: operators only */
chat_cmd_fn chat_cmd_stats;   /* STATS k: the K-lines, operators only */

#endif
