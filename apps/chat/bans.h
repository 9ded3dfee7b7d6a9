/* Channel bans (bans.c): +b masks, nick!user@host with * and ? or the
 * account extban $a:NAME, kept per channel in DIR/bans (state.h's ban
 * records); who they match, and the list's changes and its listing
 * (367/368) for MODE (chanop.c). */
#ifndef YARD_CHAT_BANS_H
#define YARD_CHAT_BANS_H

#include "session.h"

/* A glob with * and ? over text, both compared by the server's casemapping
 * (rfc1459). */
bool chat_mask_match(const char *mask, const char *text);

/* Whom a mask is matched against: nick!user@host, with host both "yard"
 * and the source address (an IPv6 address as its /64's prefix,
 * "2001:db8:1:2::"); $a:PATTERN the account's name (never a guest's). */
struct chat_mask_subject {
    const char *nick, *user; /* user "": the nick */
    const chat_addr_t *addr;
    bool guest;
};
bool chat_mask_matches(const char *mask, const struct chat_mask_subject *who);
/* The subject of a registered connection. */
void chat_mask_subject_of(const struct session *s, struct chat_mask_subject *who);

/* Is the connection banned by the list: a ban matches it and no
 * exception (+e) does? */
bool chat_bans_match(const struct chat_banrec *r, const struct session *s);
/* May the connection join the +i channel (live as c, else named by key)
 * by an invite exception (+I)? Under the lock. */
bool chat_invex(chat_state_t *cs, const struct session *s, int c, const char *key);

/* May the connection not join or speak in the channel (live as c, else
 * named by key, casefolded)? Under the lock. */
bool chat_banned(chat_state_t *cs, const struct session *s, int c, const char *key);

/* A +b parameter as it is kept (yard_mask_complete): a nick alone is
 * nick!*@*, user@host is *!user@host, and so on; $a:NAME as given. False
 * for a mask that cannot be one: empty, too long, with spaces, commas or
 * control characters, or an extban other than $a:. */
bool chat_ban_normalize(const char *given, char out[CHAT_BANMASK_MAX + 1]);

/* The list a mode letter names (b, e, I: CHAT_LIST_*), or -1. */
int chat_list_of_mode(char mode);
/* +b mask (on) or -b mask (+e, +I: list) on the record, by setter at
 * at_s: 1 changed, 0 nothing to change (already there, or not there), -1
 * the record is full (its three lists hold CHAT_BANS_MAX masks in all). */
int chat_ban_set(struct chat_banrec *r, int list, const char *mask, bool on, const char *setter,
                 int64_t at_s);

/* MODE #chan +b (+e, +I): the channel's list, 367 (348, 346) per mask and
 * 368 (349, 347). */
void chat_bans_list(struct chat_app *app, struct session *s, yard_fx_t *fx, int ch, int list);

#endif
