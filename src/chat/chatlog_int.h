/* The message log's insides, shared by its files (yard/chatlog.h is its API):
 * chatlog.c owns the on-disk format (segments, their indexes), open and
 * recovery, the shared region and its robust mutex; chatlog_writer.c the
 * appends, the deferred queue, the writer thread, rotation and retention;
 * chatlog_read.c reading by cursor, iterators, verify and walk;
 * chatlog_seek.c the lookups through the index. Not a public interface. */
#ifndef YARD_CHATLOG_INT_H
#define YARD_CHATLOG_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "yard/chatlog.h"

#define SEG_SUFFIX ".seg"
#define IDX_SUFFIX ".idx"

/* What every process of the server shares (an anonymous shared mapping
 * made at open, before any fork). */
struct shared {
    pthread_mutex_t mu;
    uint64_t next_id;
    uint64_t active_first; /* name of the segment appends go to */
    uint64_t active_size;  /* its committed size: readers stop there */
    uint64_t last_sync_ns;
    bool dirty;
    /* The segment before the active one and its final size, so that a
     * cursor at its end moves on without looking at the directory. */
    uint64_t prev_first, prev_size;
    /* The tail: the active segment's bytes [tail_lo, active_size) are also
     * in tail[] (at offset % YARD_CHATLOG_TAIL_BYTES), so readers that keep
     * up never touch the files. */
    uint64_t tail_lo;
    uint8_t tail[YARD_CHATLOG_TAIL_BYTES];
    /* Deferred records, oldest at qhead (guarded by qmu, never held across
     * I/O; taken out only under mu, so that appends keep their order). */
    pthread_mutex_t qmu;
    unsigned qhead, qlen;
    uint64_t qdropped;
    yard_chatlog_entry_t q[YARD_CHATLOG_DEFER_SLOTS];
    pthread_mutex_t scan_mu; /* held by the one long read under way (yard_chatlog_scan_begin) */
};

struct yard_chatlog {
    char dir[4096]; /* DIR/log */
    yard_chatlog_opts_t o;
    struct shared *sh;
    int lock_fd;
    /* The descriptor appends go through (guarded by sh->mu). Inherited over
     * fork: every process writes at an explicit offset under the mutex. */
    int wfd;
    int ifd; /* the active segment's index, beside wfd */
    uint64_t wseg;
    /* The writer thread, in the process that started it. wake_fd (an
     * eventfd made at open, so every process has it) wakes it. */
    int wake_fd;
    pid_t writer_pid; /* 0: no writer thread */
    pthread_t writer_thread;
    atomic_bool writer_stop;
    void (*appended)(void *arg, uint64_t last_id);
    void *appended_arg;
};

/* The index of a segment (DIR/log/<first>.idx): one entry per record, in
 * id order, so entry i is record first + i. It is derived from the segment
 * and rebuilt from it whenever it does not match (open checks). On disk an
 * entry is 24 bytes, each field little-endian like the records' (a log
 * moved to a big-endian machine reads as it is): chatlog_idx_disk() before a
 * write, chatlog_idx_host() after a read. */
struct idx_entry {
    uint64_t off;  /* the record's offset in the segment */
    int64_t ts_ns; /* its timestamp */
    uint32_t hash; /* yard_chatlog_target_hash of its target */
    uint32_t type;
};
_Static_assert(sizeof(struct idx_entry) == 24, "the index entry is 24 bytes on disk");

/* chatlog.c: the clock the syncs are paced by. */
uint64_t chatlog_mono_ns(void);
/* DIR/log/<first>.seg and DIR/log/<first>.idx. */
void chatlog_seg_path(char *out, size_t cap, const char *dir, uint64_t first);
void chatlog_idx_path(char *out, size_t cap, const char *dir, uint64_t first);
/* An index entry as written to the disk, and as read back. */
struct idx_entry chatlog_idx_disk(struct idx_entry e);
struct idx_entry chatlog_idx_host(struct idx_entry e);
/* The segments' first ids, ascending (*ids: the caller frees it). */
int chatlog_list_segments(const char *dir, uint64_t **ids, size_t *n);
/* A whole file read into *data (the caller frees it). */
int chatlog_slurp(const char *path, uint8_t **data, size_t *len);
/* How many good records a segment's bytes hold, and where they end. */
size_t chatlog_scan(const uint8_t *p, size_t n, uint64_t first, uint64_t *count,
                    int64_t *last_ts);
/* A new segment and its index (*ifd); the segment's descriptor or -errno. */
int chatlog_create_segment(yard_chatlog_t *log, uint64_t first, int *ifd);
/* Under the lock: the tail's bytes in, and out. */
void chatlog_tail_put(struct shared *sh, uint64_t off, const uint8_t *p, size_t n);
void chatlog_tail_get(const struct shared *sh, uint64_t off, uint8_t *out, size_t n);
/* The log's process-shared, robust mutex (sh->mu). */
void chatlog_lock(yard_chatlog_t *log);
void chatlog_unlock(yard_chatlog_t *log);

#endif
