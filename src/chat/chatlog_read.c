/* Reading the message log (include/yard/chatlog.h): cursors, the tail in
 * shared memory, reads across segments (the index finds where a cursor
 * starts), iterators, and the read-only passes over DIR/log (verify, walk).
 * Lookups by target and time: chatlog_seek.c. */
#include "chatlog_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "yard/shm.h"

#define READ_CHUNK (64u * 1024u)

uint64_t yard_chatlog_last_id(yard_chatlog_t *log)
{
    chatlog_lock(log);
    uint64_t v = log->sh->next_id - 1;
    chatlog_unlock(log);
    return v;
}

uint64_t yard_chatlog_cursor_end(yard_chatlog_t *log, yard_chatlog_cursor_t *cur)
{
    chatlog_lock(log);
    *cur = (yard_chatlog_cursor_t){.seg = log->sh->active_first, .off = log->sh->active_size,
                                   .from = log->sh->next_id};
    chatlog_unlock(log);
    return cur->from - 1;
}

void yard_chatlog_cursor_at(yard_chatlog_cursor_t *cur, uint64_t from_id)
{
    *cur = (yard_chatlog_cursor_t){.seg = 0, .off = 0, .from = from_id};
}

/* Under the lock: move a cursor at the end of the previous segment, or one
 * not placed yet that asks only for what is to come, to the active one. */
static void cursor_settle(const struct shared *sh, yard_chatlog_cursor_t *cur)
{
    if (cur->seg && cur->seg == sh->prev_first && cur->off >= sh->prev_size) {
        cur->seg = sh->active_first;
        cur->off = 0;
    } else if (!cur->seg && cur->from >= sh->next_id) {
        cur->seg = sh->active_first;
        cur->off = sh->active_size;
    }
}

long yard_chatlog_read_tail(yard_chatlog_t *log, yard_chatlog_cursor_t *cur, uint8_t *buf,
                            size_t cap)
{
    if (cap < YARD_LOGREC_MAX)
        return -EINVAL;
    chatlog_lock(log);
    struct shared *sh = log->sh;
    cursor_settle(sh, cur);
    long n = -EAGAIN;
    if (cur->seg == sh->active_first && cur->off >= sh->tail_lo && cur->off <= sh->active_size) {
        uint64_t avail = sh->active_size - cur->off;
        n = (long)(avail < cap ? avail : cap);
        chatlog_tail_get(sh, cur->off, buf, (size_t)n);
    }
    chatlog_unlock(log);
    return n;
}

/* The first segment after seg (0: none), or the one holding from_id when
 * seg is 0. */
static int segment_after(const char *dir, uint64_t seg, uint64_t from_id, uint64_t *out)
{
    uint64_t *segs;
    size_t n;
    int rc = chatlog_list_segments(dir, &segs, &n);
    if (rc < 0)
        return rc;
    *out = 0;
    if (seg) {
        for (size_t i = 0; i < n && !*out; i++)
            if (segs[i] > seg)
                *out = segs[i];
    } else if (n) {
        *out = segs[0];
        for (size_t i = 0; i < n; i++)
            if (segs[i] <= from_id)
                *out = segs[i];
    }
    free(segs);
    return 0;
}

/* Where record from_id starts in segment seg, through the segment's index
 * (entry i is record seg + i), so that a read from the middle of a 64 MiB
 * segment does not decode every record before it; 0 (the segment's start,
 * the records below from_id skipped) when the index cannot tell. */
static uint64_t idx_offset(yard_chatlog_t *log, uint64_t seg, uint64_t from_id)
{
    chatlog_lock(log);
    bool committed = from_id < log->sh->next_id; /* its entry is written */
    chatlog_unlock(log);
    if (from_id <= seg || !committed)
        return 0;
    char path[4200];
    chatlog_idx_path(path, sizeof path, log->dir, seg);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct idx_entry e;
    long got = yard_pread_full(fd, &e, sizeof e, (off_t)((from_id - seg) * sizeof e));
    close(fd);
    return got == (long)sizeof e ? chatlog_idx_host(e).off : 0;
}

long yard_chatlog_read(yard_chatlog_t *log, yard_chatlog_cursor_t *cur, uint8_t *buf, size_t cap)
{
    long n = yard_chatlog_read_tail(log, cur, buf, cap);
    if (n != -EAGAIN)
        return n;
    /* Each turn returns or moves to a later segment. */
    for (;;) {
        if (!cur->seg) {
            int rc = segment_after(log->dir, 0, cur->from, &cur->seg);
            if (rc < 0)
                return rc;
            if (!cur->seg)
                return 0; /* no segment at all */
            cur->off = idx_offset(log, cur->seg, cur->from);
        }
        chatlog_lock(log);
        uint64_t active = log->sh->active_first, committed = log->sh->active_size;
        chatlog_unlock(log);
        char path[4200];
        chatlog_seg_path(path, sizeof path, log->dir, cur->seg);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        uint64_t limit = 0;
        if (fd >= 0 && cur->seg == active)
            limit = committed;
        else if (fd >= 0 && fstat(fd, &st) == 0)
            limit = (uint64_t)st.st_size; /* a complete segment */
        else if (fd < 0 && errno != ENOENT)
            return -errno;
        if (fd >= 0 && cur->off < limit) {
            size_t want = limit - cur->off < cap ? (size_t)(limit - cur->off) : cap;
            long got = yard_pread_full(fd, buf, want, cur->off);
            close(fd);
            return got;
        }
        if (fd >= 0)
            close(fd);
        if (cur->seg >= active)
            return 0; /* nothing more yet */
        /* This segment is complete (or was pruned): on to the next one. */
        uint64_t next;
        int rc = segment_after(log->dir, cur->seg, 0, &next);
        if (rc < 0)
            return rc;
        if (!next)
            return 0;
        cur->seg = next;
        cur->off = 0;
    }
}

int yard_chatlog_take(yard_chatlog_cursor_t *cur, const uint8_t *buf, size_t len, size_t *pos,
                      yard_chatlog_rec_t *r)
{
    while (*pos < len) {
        int v = yard_logrec_decode(buf + *pos, len - *pos, r);
        if (v == YARD_LOGREC_PARTIAL && *pos > 0)
            return 0; /* the rest comes with the next read */
        if (v != YARD_LOGREC_COMPLETE)
            return -EBADMSG; /* committed bytes that do not decode */
        *pos += r->len;
        cur->off += r->len;
        if (r->id >= cur->from)
            return 1;
    }
    return 0;
}

struct yard_chatlog_iter {
    yard_chatlog_t *log;
    yard_chatlog_cursor_t cur;
    uint8_t *buf;
    size_t len, pos;
};

int yard_chatlog_iter_open(yard_chatlog_t *log, uint64_t from_id, yard_chatlog_iter_t **out)
{
    yard_chatlog_iter_t *it = calloc(1, sizeof *it);
    if (!it || !(it->buf = malloc(READ_CHUNK))) {
        free(it);
        return -ENOMEM;
    }
    it->log = log;
    yard_chatlog_cursor_at(&it->cur, from_id);
    *out = it;
    return 0;
}

void yard_chatlog_iter_close(yard_chatlog_iter_t *it)
{
    if (!it)
        return;
    free(it->buf);
    free(it);
}

int yard_chatlog_next(yard_chatlog_iter_t *it, yard_chatlog_rec_t *r)
{
    for (;;) {
        int rc = yard_chatlog_take(&it->cur, it->buf, it->len, &it->pos, r);
        if (rc != 0)
            return rc;
        long n = yard_chatlog_read(it->log, &it->cur, it->buf, READ_CHUNK);
        it->len = it->pos = 0;
        if (n <= 0)
            return (int)n;
        it->len = (size_t)n;
    }
}

/* Read DIR/log's segments in order, read-only, and hand each one's bytes to
 * fn (non-zero stops). A segment pruned meanwhile is skipped. */
static int each_segment(const char *dir,
                        int (*fn)(const char *path, uint64_t first, const uint8_t *data,
                                  size_t len, void *arg),
                        void *arg)
{
    char logdir[4200];
    snprintf(logdir, sizeof logdir, "%s/log", dir);
    uint64_t *segs;
    size_t n;
    int rc = chatlog_list_segments(logdir, &segs, &n);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        char path[4300];
        chatlog_seg_path(path, sizeof path, logdir, segs[i]);
        uint8_t *data;
        size_t len;
        if ((rc = chatlog_slurp(path, &data, &len)) < 0) {
            if (rc == -ENOENT) {
                rc = 0;
                continue;
            }
            break;
        }
        int stop = fn(path, segs[i], data, len, arg);
        free(data);
        if (stop)
            break;
    }
    free(segs);
    return rc;
}

struct verify_state {
    yard_chatlog_verify_t *v;
    uint64_t expect;
};

static int verify_segment(const char *path, uint64_t first, const uint8_t *data, size_t len,
                          void *arg)
{
    struct verify_state *vs = arg;
    yard_chatlog_verify_t *v = vs->v;
    if (vs->expect && first != vs->expect)
        snprintf(v->problem, sizeof v->problem,
                 "%.300s: starts at id %" PRIu64 ", expected %" PRIu64, path, first, vs->expect);
    uint64_t count;
    size_t good = chatlog_scan(data, len, first, &count, NULL);
    if (!v->problem[0] && good < len)
        snprintf(v->problem, sizeof v->problem,
                 "%.300s: %zu bytes at offset %zu do not decode as record %" PRIu64, path,
                 len - good, good, first + count);
    if (!v->first_id && count)
        v->first_id = first;
    if (count)
        v->last_id = first + count - 1;
    v->records += count;
    v->segments++;
    vs->expect = first + count;
    return v->problem[0] != 0;
}

int yard_chatlog_verify(const char *dir, yard_chatlog_verify_t *v)
{
    memset(v, 0, sizeof *v);
    struct verify_state vs = {.v = v};
    int rc = each_segment(dir, verify_segment, &vs);
    if (rc < 0)
        return rc;
    return v->problem[0] ? -EBADMSG : 0;
}

struct walk_state {
    int (*fn)(const yard_chatlog_rec_t *r, void *arg);
    void *arg;
};

static int walk_segment(const char *path, uint64_t first, const uint8_t *data, size_t len,
                        void *arg)
{
    struct walk_state *ws = arg;
    yard_logrec_t r;
    for (size_t off = 0;
         off < len && yard_logrec_decode(data + off, len - off, &r) == YARD_LOGREC_COMPLETE;
         off += r.len)
        if (ws->fn(&r, ws->arg))
            return 1;
    return 0;
}

int yard_chatlog_walk(const char *dir, int (*fn)(const yard_chatlog_rec_t *r, void *arg),
                      void *arg)
{
    struct walk_state ws = {fn, arg};
    return each_segment(dir, walk_segment, &ws);
}
