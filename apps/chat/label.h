/* IRCv3 labeled-response (label.c): a client that negotiated both
 * labeled-response and batch may put `label=X` on a request, and its
 * answer comes back labeled: one line carries the label, several come in a
 * `labeled-response` batch whose start carries it, and a request that has
 * no answer is acknowledged with `ACK`.
 *
 * An answer is not always made in one callback: a command may start a job
 * (a replay, a CHATHISTORY lookup, a post) whose job_done answers later,
 * and a post's echoes come back through the log. So the label lives in the
 * session (struct session_label) until the answer is over, and each
 * callback that may add to it marks where its output starts and settles it
 * at the end: what it sent is then labeled, or opens the batch when more
 * is to come. The relay of the log keeps its own lines out of the answer
 * (chat_label_interim, chat_label_skip) and tags the post's own records
 * (chat_label_record). */
#ifndef YARD_CHAT_LABEL_H
#define YARD_CHAT_LABEL_H

#include "session.h"

/* A command starts (chat_command): its label, if it has one the client may
 * use, is this connection's labeled request from now on; an older one still
 * waiting for its records is ended first (its batch closed, or an ACK). */
void chat_label_begin(struct session *s, yard_fx_t *fx, const yard_irc_msg_t *m);
/* A callback that may add to the answer (a job's done, a delayed answer)
 * starts: its output from here on is the answer's. */
void chat_label_mark(struct session *s, const yard_fx_t *fx);
/* That callback, or the command, ends: what it sent of the answer is
 * labeled; the answer is over unless a job, a delayed answer or the
 * post's records are still to come. */
void chat_label_settle(struct session *s, yard_fx_t *fx);
/* The relay is about to send lines that are not the answer's: what the
 * answer sent so far in this callback is settled as part of a longer
 * answer (chat_label_skip after the relay leaves its lines out). */
void chat_label_interim(struct session *s, yard_fx_t *fx);
void chat_label_skip(struct session *s, const yard_fx_t *fx);
/* A post is appended: its records first..last, n of them, are relayed
 * back to this connection as part of the answer (echo-message, TOPIC). */
void chat_label_expect(struct session *s, uint64_t first, uint64_t last, unsigned n);
/* Does the labeled answer wait for records of this connection's own? */
bool chat_label_awaits_records(const struct session *s);
/* The relay of one of this connection's own records: true when it is part
 * of the answer. Then, if shown (a line will be sent for it), *tag is the
 * tag that line takes ("label=X" or "batch=R"; a batch's start may be sent
 * first); call chat_label_record_done once the line is sent. */
bool chat_label_record(struct session *s, yard_fx_t *fx, uint64_t id, bool shown, char *tag,
                       size_t cap);
void chat_label_record_done(struct session *s, yard_fx_t *fx);

#endif
