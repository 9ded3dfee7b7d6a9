/* Looking things up in the message log through the segments' indexes
 * (include/yard/chatlog.h): the records of some targets, forwards or
 * backwards from an id, in pieces of a bounded number of entries
 * (yard_chatlog_seek_piece), and the first id at a time (binary search on
 * the entries' timestamps). */
#include "chatlog_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "yard/shm.h"

/* One segment opened for lookups: its index and its records. */
struct seg_reader {
    uint64_t first, n; /* entries usable: committed records only */
    int ifd, sfd;
};

static int seg_open(yard_chatlog_t *log, uint64_t first, uint64_t next_id, struct seg_reader *sr)
{
    char path[4200];
    sr->first = first;
    chatlog_idx_path(path, sizeof path, log->dir, first);
    sr->ifd = open(path, O_RDONLY | O_CLOEXEC);
    chatlog_seg_path(path, sizeof path, log->dir, first);
    sr->sfd = sr->ifd < 0 ? -1 : open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (sr->sfd < 0 || fstat(sr->ifd, &st) < 0) {
        int e = errno;
        if (sr->ifd >= 0)
            close(sr->ifd);
        return -e;
    }
    sr->n = (uint64_t)st.st_size / sizeof(struct idx_entry);
    if (first + sr->n > next_id) /* an append under way: not committed yet */
        sr->n = next_id > first ? next_id - first : 0;
    return 0;
}

static void seg_close(struct seg_reader *sr)
{
    close(sr->ifd);
    close(sr->sfd);
}

static bool hash_wanted(uint32_t h, const uint32_t *hashes, int nhash)
{
    if (!nhash)
        return true;
    for (int i = 0; i < nhash; i++)
        if (hashes[i] == h)
            return true;
    return false;
}

/* A walk through the index: what it looks for, and how far it may go. */
struct seek_walk {
    int dir;
    const uint32_t *hashes;
    int nhash;
    uint64_t *entries_left; /* index entries it may still look at (NULL: any) */
    uint64_t next; /* the id to go on from, once it stopped */
    int (*fn)(const yard_chatlog_rec_t *r, void *arg);
    void *arg;
};

/* Entries [lo, hi) of a segment in the walk's direction, in blocks: 0 when
 * the range is done, YARD_CHATLOG_SEEK_STOPPED when fn stopped,
 * YARD_CHATLOG_SEEK_MORE when the entries allowed ran out (w->next says
 * where in both cases), -errno. */
static int seg_visit(struct seg_reader *sr, uint64_t lo, uint64_t hi, struct seek_walk *w)
{
    struct idx_entry blk[1024];
    uint8_t rec[YARD_LOGREC_MAX];
    int dir = w->dir;
    while (lo < hi) {
        uint64_t k = hi - lo < 1024 ? hi - lo : 1024;
        uint64_t at = dir > 0 ? lo : hi - k; /* the block's first entry */
        long got = yard_pread_full(sr->ifd, blk, k * sizeof blk[0], at * sizeof blk[0]);
        if (got != (long)(k * sizeof blk[0]))
            return got < 0 ? (int)got : -EIO;
        for (uint64_t j = 0; j < k; j++) {
            uint64_t id = sr->first + at + (dir > 0 ? j : k - 1 - j);
            if (w->entries_left && (*w->entries_left)-- == 0) {
                *w->entries_left = 0;
                w->next = id;
                return YARD_CHATLOG_SEEK_MORE;
            }
            const struct idx_entry e = chatlog_idx_host(blk[dir > 0 ? j : k - 1 - j]);
            if (!hash_wanted(e.hash, w->hashes, w->nhash))
                continue;
            long n = yard_pread_full(sr->sfd, rec, sizeof rec, e.off);
            yard_logrec_t r;
            if (n <= 0 || yard_logrec_decode(rec, (size_t)n, &r) != YARD_LOGREC_COMPLETE ||
                r.id != id)
                return n < 0 ? (int)n : -EBADMSG;
            if (w->fn(&r, w->arg)) {
                w->next = dir > 0 ? id + 1 : id - 1;
                return YARD_CHATLOG_SEEK_STOPPED;
            }
        }
        if (dir > 0)
            lo += k;
        else
            hi -= k;
    }
    return 0;
}

int yard_chatlog_seek_piece(yard_chatlog_t *log, uint64_t from, int dir, const uint32_t *hashes,
                            int nhash, uint64_t *entries_left,
                            int (*fn)(const yard_chatlog_rec_t *r, void *arg), void *arg,
                            uint64_t *next)
{
    struct seek_walk w = {.dir = dir, .hashes = hashes, .nhash = nhash,
                          .entries_left = entries_left, .fn = fn, .arg = arg};
    *next = 0;
    chatlog_lock(log);
    uint64_t next_id = log->sh->next_id;
    chatlog_unlock(log);
    uint64_t *segs;
    size_t nseg;
    int rc = chatlog_list_segments(log->dir, &segs, &nseg);
    if (rc < 0)
        return rc;
    if (dir < 0 && from >= next_id)
        from = next_id - 1;
    for (size_t step = 0; rc == 0 && step < nseg; step++) {
        size_t i = dir > 0 ? step : nseg - 1 - step;
        if (dir > 0 ? (i + 1 < nseg && segs[i + 1] <= from) : segs[i] > from)
            continue; /* wholly before (after) where the walk starts */
        struct seg_reader sr;
        if ((rc = seg_open(log, segs[i], next_id, &sr)) == -ENOENT) {
            rc = 0; /* pruned meanwhile */
            continue;
        }
        if (rc < 0)
            break;
        uint64_t lo = 0, hi = sr.n;
        if (dir > 0 && from > sr.first)
            lo = from - sr.first < sr.n ? from - sr.first : sr.n;
        if (dir < 0 && from + 1 - sr.first < sr.n)
            hi = from + 1 - sr.first;
        rc = seg_visit(&sr, lo, hi, &w);
        seg_close(&sr);
    }
    free(segs);
    if (rc > 0)
        *next = w.next;
    return rc;
}

int yard_chatlog_seek(yard_chatlog_t *log, uint64_t from, int dir, const uint32_t *hashes,
                      int nhash, int (*fn)(const yard_chatlog_rec_t *r, void *arg), void *arg)
{
    uint64_t next;
    int rc = yard_chatlog_seek_piece(log, from, dir, hashes, nhash, NULL, fn, arg, &next);
    return rc < 0 ? rc : 0;
}

uint64_t yard_chatlog_id_at(yard_chatlog_t *log, int64_t ts_ns)
{
    chatlog_lock(log);
    uint64_t next_id = log->sh->next_id;
    chatlog_unlock(log);
    uint64_t *segs;
    size_t nseg;
    if (chatlog_list_segments(log->dir, &segs, &nseg) < 0)
        return next_id;
    uint64_t id = next_id;
    /* From the newest segment back: the first whose first record is not
     * later than ts_ns holds the answer (or its successor's first id). */
    for (size_t step = 0; step < nseg; step++) {
        struct seg_reader sr;
        if (seg_open(log, segs[nseg - 1 - step], next_id, &sr) < 0)
            break;
        struct idx_entry e;
        uint64_t lo = 0, hi = sr.n; /* the first entry with ts >= ts_ns is in [lo, hi] */
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (pread(sr.ifd, &e, sizeof e, (off_t)(mid * sizeof e)) != (ssize_t)sizeof e)
                break;
            if (chatlog_idx_host(e).ts_ns < ts_ns)
                lo = mid + 1;
            else
                hi = mid;
        }
        seg_close(&sr);
        if (lo < sr.n || sr.n == 0)
            id = sr.first + lo;
        if (lo > 0)
            break; /* the record before it is in this segment: earlier ones are older */
    }
    free(segs);
    return id;
}
