/* IRCv3 MONITOR (monitor.c): a connection's list of nicks (at most
 * CHAT_MONITOR_MAX, ISUPPORT MONITOR), told 730 when one comes online and
 * 731 when it goes. Online and offline are an account's first connection
 * registering and its last one ending (a guest's: its own), which go
 * through the log as online records (so connections in every process hear
 * them), and a guest's nick change (its nick record). */
#ifndef YARD_CHAT_MONITOR_H
#define YARD_CHAT_MONITOR_H

#include "session.h"

/* The connection in s just registered: an online record when it is the
 * account's first (a guest's always), and somebody monitors anything. */
void chat_monitor_ready(struct chat_app *app, struct session *s);
/* The account's last connection (a guest) ended: its offline record, when
 * somebody monitors anything. */
void chat_monitor_gone(struct chat_app *app, const struct session *s);
/* An online record, or a guest's nick record (relay.c); from: its sender, and the nick it
 * was shown by. */
void chat_monitor_relay(struct chat_app *app, struct session *s, yard_fx_t *fx,
                        const yard_chatlog_rec_t *r, const yard_chat_from_t *from);
/* extended-monitor: has s the capability, and does it monitor the nick
 * of from (not its own)? */
bool chat_monitor_watches(const struct session *s, const yard_chat_from_t *from);
/* The connection is gone: its list no longer counts. */
void chat_monitor_forget(struct chat_app *app, struct session *s);

chat_cmd_fn chat_cmd_monitor; /* MONITOR + - C L S */

#endif
