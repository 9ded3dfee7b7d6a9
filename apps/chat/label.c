/* IRCv3 labeled-response: a request's label on its answer (label.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "label.h"

/* The label of a request's tags ("a=1;label=xyz;+b"), when the client may
 * use one: 1 to CHAT_LABEL_MAX bytes, as sent (still escaped, which is how
 * it goes back). false when there is none or it is too long. */
static bool label_of(const char *tags, char *out)
{
    for (const char *t = tags; t && *t;) {
        size_t n = strcspn(t, ";");
        if (n > 6 && !strncmp(t, "label=", 6)) {
            if (n - 6 > CHAT_LABEL_MAX)
                return false;
            memcpy(out, t + 6, n - 6);
            out[n - 6] = 0;
            return true;
        }
        t += n + (t[n] == ';');
    }
    return false;
}

static size_t out_len(const yard_fx_t *fx)
{
    return fx->out ? fx->out->len : 0;
}

/* Lines sent since at. */
static unsigned region_lines(const yard_fx_t *fx, size_t at)
{
    unsigned lines = 0;
    if (fx->out->len <= at)
        return 0; /* (an empty buffer may have no memory at all) */
    const uint8_t *p = yard_buf_head(fx->out) + at, *end = yard_buf_head(fx->out) + fx->out->len;
    while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        lines++;
        p++;
    }
    return lines;
}

/* Does a line's tag section (after '@', up to its space) hold key? */
static bool has_tag(const uint8_t *tags, size_t n, const char *key)
{
    size_t kn = strlen(key);
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && tags[e] != ';')
            e++;
        if (e - i >= kn && !memcmp(tags + i, key, kn) && (e - i == kn || tags[i + kn] == '='))
            return true;
        i = e + 1;
    }
    return false;
}

/* One line (CRLF included) sent again with tag added to its tags; a line
 * already in a batch keeps its own when tag is a batch's (the start and
 * end of a nested batch, which have none, take the outer one). */
static void send_tagged(yard_fx_t *fx, const uint8_t *line, size_t n, const char *tag)
{
    size_t tn = strlen(tag);
    const uint8_t *sp = n && line[0] == '@' ? memchr(line, ' ', n) : NULL;
    if (sp && !strncmp(tag, "batch=", 6) && has_tag(line + 1, (size_t)(sp - line - 1), "batch")) {
        yard_fx_send(fx, line, n);
        return;
    }
    uint8_t *w = yard_fx_send_reserve(fx, n + tn + 2);
    if (!w)
        return;
    size_t k = 0;
    if (sp) { /* "@a=b" ";" tag " rest" */
        size_t head = (size_t)(sp - line);
        memcpy(w, line, head);
        w[head] = ';';
        memcpy(w + head + 1, tag, tn);
        memcpy(w + head + 1 + tn, sp, n - head);
        k = n + tn + 1;
    } else { /* "@" tag " " line */
        w[0] = '@';
        memcpy(w + 1, tag, tn);
        w[1 + tn] = ' ';
        memcpy(w + 2 + tn, line, n);
        k = n + tn + 2;
    }
    yard_fx_send_commit(fx, k);
}

/* Send the lines since at again, each with tag, after first (a line
 * without CRLF, or NULL). */
static void rewrite_region(yard_fx_t *fx, size_t at, const char *first, const char *tag)
{
    size_t len = fx->out->len - at;
    if (!len) { /* nothing to send again (and maybe no memory behind the buffer) */
        if (first)
            chat_sendf(fx, "%s", first);
        return;
    }
    uint8_t *copy = malloc(len);
    if (!copy) {
        fx->nomem = true;
        return; /* the answer goes unlabeled rather than not at all */
    }
    memcpy(copy, yard_buf_head(fx->out) + at, len);
    fx->out->len = at; /* what is past at was this call's own, and is sent again below */
    if (first)
        chat_sendf(fx, "%s", first);
    for (size_t i = 0; i < len;) {
        const uint8_t *nl = memchr(copy + i, '\n', len - i);
        size_t n = nl ? (size_t)(nl - copy) + 1 - i : len - i;
        if (nl)
            send_tagged(fx, copy + i, n, tag);
        else
            yard_fx_send(fx, copy + i, n); /* not a line: as it was */
        i += n;
    }
    free(copy);
}

static void forget(struct session *s)
{
    s->label.tag[0] = 0;
    s->label.batch[0] = 0;
    s->label.records = 0;
    s->label.echoed = 0;
}

/* The answer's batch starts (its start line carries the label), before
 * the lines sent since at (none when at is the end). */
static void open_batch(struct session *s, yard_fx_t *fx, size_t at)
{
    char first[CHAT_LABEL_MAX + 80], tag[40];
    snprintf(s->label.batch, sizeof s->label.batch, "L%llu", (unsigned long long)++s->batches);
    snprintf(first, sizeof first, "@label=%s :" SERVER " BATCH +%s labeled-response",
             s->label.tag, s->label.batch);
    snprintf(tag, sizeof tag, "batch=%s", s->label.batch);
    rewrite_region(fx, at, first, tag);
}

/* The answer is over: its batch ends, or, when nothing was sent, ACK. */
static void finish(struct session *s, yard_fx_t *fx)
{
    if (s->label.batch[0])
        chat_sendf(fx, ":" SERVER " BATCH -%s", s->label.batch);
    else
        chat_sendf(fx, "@label=%s :" SERVER " ACK", s->label.tag);
    forget(s);
}

void chat_label_begin(struct session *s, yard_fx_t *fx, const yard_irc_msg_t *m)
{
    if (s->label.tag[0]) /* an older answer whose records have not come back (yet) */
        finish(s, fx);
    s->label.at = CHAT_LABEL_NO_REGION;
    if ((s->caps & (CAP_LABELED | CAP_BATCH)) != (CAP_LABELED | CAP_BATCH) || !fx->out ||
        !label_of(m->tags, s->label.tag)) {
        s->label.tag[0] = 0;
        return;
    }
    s->label.at = fx->out->len;
}

void chat_label_mark(struct session *s, const yard_fx_t *fx)
{
    s->label.at = s->label.tag[0] && fx->out ? fx->out->len : CHAT_LABEL_NO_REGION;
}

void chat_label_skip(struct session *s, const yard_fx_t *fx)
{
    if (s->label.at != CHAT_LABEL_NO_REGION)
        s->label.at = out_len(fx);
}

void chat_label_interim(struct session *s, yard_fx_t *fx)
{
    size_t at = s->label.at;
    if (!s->label.tag[0] || at == CHAT_LABEL_NO_REGION || out_len(fx) <= at)
        return;
    if (s->label.batch[0]) {
        char tag[40];
        snprintf(tag, sizeof tag, "batch=%s", s->label.batch);
        rewrite_region(fx, at, NULL, tag);
    } else {
        open_batch(s, fx, at);
    }
    s->label.at = out_len(fx);
}

void chat_label_settle(struct session *s, yard_fx_t *fx)
{
    size_t at = s->label.at;
    s->label.at = CHAT_LABEL_NO_REGION;
    if (!s->label.tag[0] || at == CHAT_LABEL_NO_REGION || !fx->out)
        return;
    bool more = fx->job || s->login.pending_fail || s->label.records || s->in.hist_paused;
    unsigned lines = region_lines(fx, at);
    if (more) { /* the rest comes later: what there is opens the batch */
        s->label.at = at;
        chat_label_interim(s, fx);
        s->label.at = CHAT_LABEL_NO_REGION;
        return;
    }
    if (!s->label.batch[0] && lines == 1) { /* one line: it carries the label */
        char tag[CHAT_LABEL_MAX + 8];
        snprintf(tag, sizeof tag, "label=%s", s->label.tag);
        rewrite_region(fx, at, NULL, tag);
        forget(s);
        return;
    }
    if (lines) {
        s->label.at = at;
        chat_label_interim(s, fx);
        s->label.at = CHAT_LABEL_NO_REGION;
    }
    finish(s, fx);
}

void chat_label_expect(struct session *s, uint64_t first, uint64_t last, unsigned n)
{
    if (!s->label.tag[0] || !n)
        return;
    s->label.first_id = first;
    s->label.last_id = last;
    s->label.records = n;
    s->label.echoed = 0;
}

bool chat_label_awaits_records(const struct session *s)
{
    return s->label.tag[0] && s->label.records;
}

bool chat_label_record(struct session *s, yard_fx_t *fx, uint64_t id, bool shown, char *tag,
                       size_t cap)
{
    tag[0] = 0;
    if (!chat_label_awaits_records(s) || id < s->label.first_id || id > s->label.last_id)
        return false;
    if (!shown)
        return true;
    if (!s->label.batch[0] && s->label.records == 1 && !s->label.echoed) {
        snprintf(tag, cap, "label=%s", s->label.tag); /* its one line */
    } else {
        if (!s->label.batch[0])
            open_batch(s, fx, out_len(fx));
        snprintf(tag, cap, "batch=%s", s->label.batch);
    }
    s->label.echoed++;
    return true;
}

void chat_label_record_done(struct session *s, yard_fx_t *fx)
{
    if (--s->label.records)
        return;
    if (!s->label.batch[0] && s->label.echoed == 1)
        forget(s); /* its one line carried the label */
    else
        finish(s, fx);
}
