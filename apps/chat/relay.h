/* The log and the news (relay.c): what a connection hears. When the bus
 * says the log grew, a connection reads it on from where it was (the tail
 * in shared memory, or the files in a read job when it fell behind) and
 * relays what is for it: messages of its channels and to its account (with
 * the tags it asked for), presence (joins, parts, quits, away, nick
 * changes: told once per change), MODE, KICK and INVITE records, and its
 * account's read markers; its read positions move as it relays. Also the
 * presence records themselves: a callback may not write the log, so it
 * defers them (chat_presence_put) and the next append or the log's writer
 * thread writes them. */
#ifndef YARD_CHAT_RELAY_H
#define YARD_CHAT_RELAY_H

#include "session.h"

/* STATUSMSG (005's STATUSMSG=@+): a message to "@#chan" reaches the
 * channel's operators, one to "+#chan" its voiced and operators; the log
 * keeps the target with its prefix. The prefix of such a target, or 0. */
static inline char chat_status_prefix(const char *target)
{
    return (target[0] == '@' || target[0] == '+') && (target[1] == '#' || target[1] == '&')
               ? target[0]
               : 0;
}

void chat_own_push(struct session *s, uint64_t id);
/* A record's text as a line may show it: at most cap - 1 bytes, control
 * characters taken out, NUL-terminated; its length. */
size_t chat_rec_text(const yard_chatlog_rec_t *r, char *out, size_t cap);
/* A message, notice, tagmsg or topic record, from (yard_chat_from) the
 * name it is shown by; in the batch when batch is not NULL or "". */
void chat_relay(yard_fx_t *fx, const struct session *s, const yard_chatlog_rec_t *r,
                const yard_chat_from_t *from, const char *batch);
void chat_catch_up(struct chat_app *app, struct session *s, yard_fx_t *fx);
void chat_news(void *state, void *session, yard_fx_t *fx);
void chat_read_done(struct chat_app *app, struct session *s, yard_fx_t *fx);
void chat_presence_ev(yard_chatlog_entry_t *e, int type, const char *sender,
                      const char *target, const char *text);
void chat_presence_put(struct chat_app *app, yard_chatlog_entry_t *ev, unsigned n);
yard_chatlog_entry_t *chat_events_per_channel(chat_state_t *cs, const uint64_t *bits, int type,
                                              const char *sender, const char *text,
                                              unsigned *n);
/* A nick change (sender, the member in slot, is now nick): one record,
 * told to every member sharing a channel with it when it is relayed (none
 * when it is in no channel). Under the lock, before the member is renamed:
 * false when the log's queue has no room (the change must be refused, so
 * that nobody misses it). */
/* How a record's target names one connection (a member slot and its
 * serial, state.h): nick and kill records. */
#define CHAT_MEMBER_TARGET "*%d:%llu"
bool chat_nick_put(struct chat_app *app, int slot, const char *sender, const char *nick);
/* A SETNAME (the member in slot has a new realname): one record, told
 * like a nick change to those with the setname capability. Under the lock;
 * false when the log's queue has no room. */
bool chat_setname_put(struct chat_app *app, int slot, const char *sender, const char *realname);
/* A guest in slot logged in to account: an account record (account-notify)
 * whose sender is new_sender (the account, shown by the nick it keeps), after
 * a nick record from old_sender when its nick becomes nick (not NULL: the
 * account's other connections have that one). Under the lock, before the
 * member changes; both or neither: false when the log's queue has no room. */
struct chat_login_news {
    const char *old_sender, *nick, *new_sender, *account;
};
bool chat_login_put(struct chat_app *app, int slot, const struct chat_login_news *n);
bool chat_account_in_elsewhere(struct chat_app *app, const struct session *s, int c);

#endif
