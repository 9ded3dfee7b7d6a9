/* Channels and membership (channel.c): JOIN (with +i/+k/+l/+R checks,
 * the account's CHANLIMIT, the topic, NAMES and the replay of what this
 * device missed, as a replay job), PART, NAMES and TOPIC; a channel's
 * members, sorted, and their ranks' prefixes. */
#ifndef YARD_CHAT_CHANNEL_H
#define YARD_CHAT_CHANNEL_H

#include "session.h"

/* A member of a channel: who it is, casefolded and as spelled, and the
 * nick it is shown by. */
struct chat_name {
    char key[CHAT_NAME_MAX + 1];
    char account[CHAT_NAME_MAX + 1];
    char nick[CHAT_NAME_MAX + 1];
};
/* The accounts (and guests) in channel c, each once however many
 * connections it has there, sorted by their casefolded name: n of them,
 * or NULL when there is none or no memory (*nomem says which). */
struct chat_name *chat_members_of(struct chat_app *app, int c, size_t *n, bool *nomem);
const char *chat_rank_prefix(int rank, const struct session *s);
void chat_ranks_of(struct chat_app *app, int c, struct chat_chanrec *rec);
int chat_rank_in(struct chat_app *app, int c, const struct chat_chanrec *rec, const char *name);
void chat_replay_done(struct chat_app *app, struct session *s, yard_fx_t *fx);
bool chat_channel_name(struct chat_app *app, int ch, char out[CHAT_CHAN_MAX + 1]);
/* Is live channel ch secret (+s)? Hidden: and the connection not in it. */
bool chat_channel_secret(struct chat_app *app, int ch);
bool chat_channel_hidden(struct chat_app *app, const struct session *s, int ch);
int chat_channel_of(struct chat_app *app, struct session *s, yard_fx_t *fx, const char *name,
                    bool need_member);

chat_cmd_fn chat_cmd_join;  /* JOIN */
chat_cmd_fn chat_cmd_part;  /* PART */
chat_cmd_fn chat_cmd_names; /* NAMES */
chat_cmd_fn chat_cmd_topic; /* TOPIC */

#endif
