/* The chat service's durable message log: append-only segments of
 * CRC32C-framed records (yard/proto_logrec.h) under DIR/log/, each named
 * by the id of its first record (00000000000000000001.seg).
 *
 * - Appends from every thread and every process of one server are
 *   serialised by a process-shared, robust mutex in a shared mapping made
 *   at open (before any fork), which also holds the next id and the active
 *   segment's committed size; ids are 1, 2, 3... with no gaps. A second
 *   server on the same directory is refused (an OFD lock on DIR/log/LOCK).
 * - Durability: --fsync always (fdatasync before append returns),
 *   interval (at most every fsync_interval_ns, on an append or a sync
 *   call, and at close) or never. A failed write is cut back off, so the
 *   file never keeps half a record.
 * - Open checks the last segment: a torn or corrupt tail is truncated to
 *   the last good record and reported. Segments rotate at segment_bytes;
 *   whole segments older than retain_s (by their last write) are deleted,
 *   never the active one.
 * - Readers iterate from any id, across segments, and see appends made by
 *   any process after they started; they never read past the committed
 *   size, so a record being written is not mistaken for corruption.
 * - The newest YARD_CHATLOG_TAIL_BYTES of the active segment are also kept
 *   in the shared mapping (the tail): a reader that keeps up reads them
 *   from memory (yard_chatlog_read_tail) and never touches the files; only
 *   a reader further behind needs yard_chatlog_read, which does I/O.
 * - Deferred appends: code that may not do I/O (an app callback) queues
 *   records with yard_chatlog_defer, in shared memory, without I/O. Every
 *   append writes what is queued first, and the log's writer thread
 *   (yard_chatlog_writer_start) writes it when nobody appends; so a record
 *   deferred before an append is in the log before it, and the records of
 *   one defer call are consecutive. */
#ifndef YARD_CHATLOG_H
#define YARD_CHATLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "yard/proto_logrec.h"

enum yard_chatlog_fsync { YARD_CHATLOG_FSYNC_INTERVAL, YARD_CHATLOG_FSYNC_ALWAYS,
                          YARD_CHATLOG_FSYNC_NEVER };

typedef struct yard_chatlog_opts {
    uint64_t segment_bytes;     /* default 64 MiB */
    int fsync;                  /* enum yard_chatlog_fsync, default interval */
    uint64_t fsync_interval_ns; /* default 100 ms */
    uint64_t retain_s;          /* 0: keep everything */
} yard_chatlog_opts_t;

typedef struct yard_chatlog_recovery {
    uint64_t dropped_bytes; /* cut off the tail at open */
    char message[512];      /* what was done, for the server's log */
} yard_chatlog_recovery_t;

#define YARD_CHATLOG_TAIL_BYTES (1u << 20)

typedef yard_logrec_t yard_chatlog_rec_t;
typedef struct yard_chatlog yard_chatlog_t;
typedef struct yard_chatlog_iter yard_chatlog_iter_t;

void yard_chatlog_opts_default(yard_chatlog_opts_t *o);
/* 0, or -errno with err naming the call and the file. */
int yard_chatlog_open(const char *dir, const yard_chatlog_opts_t *o, yard_chatlog_t **out,
                      yard_chatlog_recovery_t *rec, char *err, size_t errlen);
void yard_chatlog_close(yard_chatlog_t *log);
/* Append one record; its id and timestamp come back. 0 or -errno. */
int yard_chatlog_append(yard_chatlog_t *log, int type, const char *sender, size_t sender_len,
                        const char *target, size_t target_len, const char *text,
                        size_t text_len, uint64_t *id, int64_t *ts_ns);
/* A record to append later (yard_chatlog_defer). */
#define YARD_CHATLOG_DEFER_TEXT 256
#define YARD_CHATLOG_DEFER_SLOTS 1024 /* records queued at most */
typedef struct yard_chatlog_entry {
    int type;
    char sender[YARD_LOGREC_NAME_MAX + 1];
    char target[YARD_LOGREC_NAME_MAX + 1];
    uint16_t text_len;
    char text[YARD_CHATLOG_DEFER_TEXT];
} yard_chatlog_entry_t;

/* Queue n records, all or none, for the next append or the writer thread;
 * no file I/O, a short lock and a wake-up. false when the queue has no room
 * for them (the log has stalled): nothing is queued, and they are counted
 * as dropped (yard_chatlog_deferred_dropped). Any process of the server. */
bool yard_chatlog_defer(yard_chatlog_t *log, const yard_chatlog_entry_t *e, unsigned n);
uint64_t yard_chatlog_deferred_dropped(yard_chatlog_t *log);
/* Start the log's writer thread in this process (once, after open, before
 * any fork): it writes deferred records as they come and then calls
 * appended(arg, id of the last one). yard_chatlog_close in this process
 * writes what is left and stops it. 0, or -errno with err. */
int yard_chatlog_writer_start(yard_chatlog_t *log, void (*appended)(void *arg, uint64_t last_id),
                              void *arg, char *err, size_t errlen);
/* Write the deferred records now; the id of the last one (0: none). I/O. */
uint64_t yard_chatlog_write_deferred(yard_chatlog_t *log);

/* fdatasync now if anything is unsynced. */
int yard_chatlog_sync(yard_chatlog_t *log);
uint64_t yard_chatlog_last_id(yard_chatlog_t *log);
/* Delete segments older than the retention; the number deleted. */
int yard_chatlog_prune(yard_chatlog_t *log, int64_t now_s);

/* A reader's place in the log: plain values (no descriptor, no pointer),
 * so it may live in a session that several threads or processes share. */
typedef struct yard_chatlog_cursor {
    uint64_t seg;  /* the segment (its first id); 0: not placed yet */
    uint64_t off;  /* the next record's offset in it */
    uint64_t from; /* records below this id are skipped */
} yard_chatlog_cursor_t;

/* A cursor at the log's end, for what is appended from now on; returns the
 * last id in the log. No I/O. */
uint64_t yard_chatlog_cursor_end(yard_chatlog_t *log, yard_chatlog_cursor_t *cur);
/* A cursor at the first retained record with id >= from_id. No I/O: the
 * first read places it. */
void yard_chatlog_cursor_at(yard_chatlog_cursor_t *cur, uint64_t from_id);
/* Copy committed bytes at the cursor into buf (cap >= YARD_LOGREC_MAX),
 * then take the records out of them with yard_chatlog_take. read_tail
 * does no I/O: the bytes (0 when nothing is new), or -EAGAIN when they are
 * no longer (or not yet known to be) in the tail. read reads the files
 * when it must (blocking I/O: from a job, never an event loop): the bytes,
 * 0 when nothing is new, or -errno. */
long yard_chatlog_read_tail(yard_chatlog_t *log, yard_chatlog_cursor_t *cur, uint8_t *buf,
                            size_t cap);
long yard_chatlog_read(yard_chatlog_t *log, yard_chatlog_cursor_t *cur, uint8_t *buf, size_t cap);
/* The next record at or past the cursor's id in buf[*pos, len), which a
 * read at this cursor returned: 1 with *r (pointing into buf; the cursor
 * and *pos move past it), 0 when the rest needs another read, -EBADMSG on
 * committed bytes that do not decode. */
int yard_chatlog_take(yard_chatlog_cursor_t *cur, const uint8_t *buf, size_t len, size_t *pos,
                      yard_chatlog_rec_t *r);

/* The index (DIR/log/<first>.idx beside each segment: where each record
 * is, its timestamp and a hash of its target), for looking things up
 * without reading the log from its start. Derived data: open checks each
 * segment's index and rebuilds one that does not match. */
/* A hash of a target as IRC's rfc1459 casemapping folds it (never 0). */
uint32_t yard_chatlog_target_hash(const char *target, size_t len);
/* Visit the records from id from (inclusive) upwards (dir > 0) or
 * downwards (dir < 0), only those whose target hashes to one of
 * hashes[0..nhash) (nhash 0: every record), reading no other record: fn
 * returns non-zero to stop. Blocking I/O (a job's). 0, or -errno. */
int yard_chatlog_seek(yard_chatlog_t *log, uint64_t from, int dir, const uint32_t *hashes,
                      int nhash, int (*fn)(const yard_chatlog_rec_t *r, void *arg), void *arg);
/* A long read of old data (a piece of a history lookup) runs between
 * these, one at a time across every thread and process of the server:
 * however many clients look things up at once, and under whichever model
 * (a lane of a loop's pool, or the client's own thread or process), they
 * take one core at most between them, and the rest is left to deliveries.
 * A holder that dies leaves it free again. */
void yard_chatlog_scan_begin(yard_chatlog_t *log);
void yard_chatlog_scan_end(yard_chatlog_t *log);
/* yard_chatlog_seek in pieces: each index entry looked at (whether its
 * record is read or not) takes one of *entries_left (NULL: no bound). 0
 * when the walk reached its end; YARD_CHATLOG_SEEK_STOPPED when fn stopped
 * it, YARD_CHATLOG_SEEK_MORE when the entries ran out: *next is then the
 * id the walk goes on from, in its direction (0: none is left below);
 * -errno. */
enum { YARD_CHATLOG_SEEK_STOPPED = 1, YARD_CHATLOG_SEEK_MORE = 2 };
int yard_chatlog_seek_piece(yard_chatlog_t *log, uint64_t from, int dir, const uint32_t *hashes,
                            int nhash, uint64_t *entries_left,
                            int (*fn)(const yard_chatlog_rec_t *r, void *arg), void *arg,
                            uint64_t *next);
/* The id of the first record written at or after ts_ns (one past the last
 * when none is). Blocking I/O. */
uint64_t yard_chatlog_id_at(yard_chatlog_t *log, int64_t ts_ns);

/* An iterator from the first retained record with id >= from_id: a cursor
 * with its own buffer, reading with yard_chatlog_read (I/O). */
int yard_chatlog_iter_open(yard_chatlog_t *log, uint64_t from_id, yard_chatlog_iter_t **out);
/* 1 with *r (valid until the next call), 0 when there is nothing more yet,
 * -errno on an error (a corrupt record: -EBADMSG). */
int yard_chatlog_next(yard_chatlog_iter_t *it, yard_chatlog_rec_t *r);
void yard_chatlog_iter_close(yard_chatlog_iter_t *it);

typedef struct yard_chatlog_verify {
    uint64_t segments, records, first_id, last_id;
    char problem[512]; /* empty when clean */
} yard_chatlog_verify_t;
/* Read every record of DIR's log in order without opening it for writing
 * (works beside a running server: it stops at the first record that does
 * not decode, which may be one being written). fn returns non-zero to stop.
 * 0, or -errno. */
int yard_chatlog_walk(const char *dir, int (*fn)(const yard_chatlog_rec_t *r, void *arg),
                      void *arg);
/* Walk every segment: CRCs, ids continuous within and across segments.
 * 0 when clean, -EBADMSG with v->problem otherwise, -errno on I/O errors. */
int yard_chatlog_verify(const char *dir, yard_chatlog_verify_t *v);

#endif
