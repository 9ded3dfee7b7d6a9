/* The durable chat log: append and iterate, rotation, reopen, torn tails,
 * many processes and threads appending at once, iterators that see later
 * appends, a second server refused, pruning, a failed write (file size
 * limit) that leaves no half record, and cursors: reading the shared tail
 * without I/O, across a rotation, and from the files once behind it;
 * deferred records: written before the next append, consecutively, by the
 * writer thread when nobody appends (a forked child's too), and refused
 * when the queue is full; an iterator from a segment's middle placed
 * through the index; the index's bytes (little-endian on every host). */
#define _XOPEN_SOURCE 700 /* nftw (X/Open) */

#include <errno.h>
#include <ftw.h>
#include <stdatomic.h>
#include <time.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "yard/chatlog.h"

static char root[256];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(p);
}

static void fresh(char *dir, const char *name)
{
    snprintf(dir, 512, "%s/%s", root, name);
}

static yard_chatlog_t *open_log(const char *dir, uint64_t seg_bytes, yard_chatlog_recovery_t *rec)
{
    yard_chatlog_opts_t o;
    yard_chatlog_opts_default(&o);
    if (seg_bytes)
        o.segment_bytes = seg_bytes;
    yard_chatlog_t *log = NULL;
    char err[512];
    yard_chatlog_recovery_t dummy;
    int rc = yard_chatlog_open(dir, &o, &log, rec ? rec : &dummy, err, sizeof err);
    if (rc < 0)
        TEST_FAIL("open %s: %s", dir, err);
    return log;
}

static uint64_t append(yard_chatlog_t *log, const char *text)
{
    uint64_t id;
    int64_t ts;
    int rc = yard_chatlog_append(log, YARD_LOGREC_MESSAGE, "alice", 5, "#room", 5, text,
                                 strlen(text), &id, &ts);
    ASSERT_EQ(rc, 0);
    ASSERT(ts > 0);
    return id;
}

static void test_append_iterate_rotate_reopen(void)
{
    char dir[512];
    fresh(dir, "basic");
    yard_chatlog_t *log = open_log(dir, 400, NULL); /* a few records per segment */
    for (int i = 1; i <= 50; i++) {
        char t[32];
        snprintf(t, sizeof t, "message %d", i);
        ASSERT_U64_EQ(append(log, t), (uint64_t)i);
    }
    ASSERT_U64_EQ(yard_chatlog_last_id(log), 50);
    yard_chatlog_verify_t v;
    ASSERT_EQ(yard_chatlog_verify(dir, &v), 0);
    ASSERT_U64_EQ(v.records, 50);
    ASSERT(v.segments > 5);
    /* From the middle, across segments. */
    yard_chatlog_iter_t *it;
    ASSERT_EQ(yard_chatlog_iter_open(log, 23, &it), 0);
    yard_chatlog_rec_t r;
    for (uint64_t want = 23; want <= 50; want++) {
        ASSERT_EQ(yard_chatlog_next(it, &r), 1);
        ASSERT_U64_EQ(r.id, want);
        char t[32];
        int n = snprintf(t, sizeof t, "message %d", (int)want);
        ASSERT_EQ(r.text_len, n);
        ASSERT_MEM_EQ(r.text, t, (size_t)n);
    }
    ASSERT_EQ(yard_chatlog_next(it, &r), 0);
    /* It sees what comes later. */
    append(log, "later");
    ASSERT_EQ(yard_chatlog_next(it, &r), 1);
    ASSERT_U64_EQ(r.id, 51);
    yard_chatlog_iter_close(it);
    /* A second server on the same directory is refused. */
    yard_chatlog_opts_t o;
    yard_chatlog_opts_default(&o);
    yard_chatlog_t *other = NULL;
    yard_chatlog_recovery_t rec;
    char err[512];
    ASSERT(yard_chatlog_open(dir, &o, &other, &rec, err, sizeof err) < 0);
    ASSERT(strstr(err, "another server is using this log"));
    yard_chatlog_close(log);
    /* Reopen: ids go on. */
    log = open_log(dir, 400, &rec);
    ASSERT_U64_EQ(rec.dropped_bytes, 0);
    ASSERT_U64_EQ(append(log, "after reopen"), 52);
    yard_chatlog_close(log);
}

static void test_torn_tail(void)
{
    char dir[512], seg[1024];
    fresh(dir, "torn");
    yard_chatlog_t *log = open_log(dir, 0, NULL);
    for (int i = 0; i < 5; i++)
        append(log, "x");
    yard_chatlog_close(log);
    snprintf(seg, sizeof seg, "%s/log/%020d.seg", dir, 1);
    struct stat st;
    ASSERT_EQ(stat(seg, &st), 0);
    /* Cut the last record in half. */
    ASSERT_EQ(truncate(seg, st.st_size - 7), 0);
    yard_chatlog_recovery_t rec;
    log = open_log(dir, 0, &rec);
    ASSERT(rec.dropped_bytes > 0);
    ASSERT(strstr(rec.message, "torn or corrupt tail"));
    ASSERT_U64_EQ(yard_chatlog_last_id(log), 4);
    ASSERT_U64_EQ(append(log, "y"), 5);
    yard_chatlog_close(log);
    yard_chatlog_verify_t v;
    ASSERT_EQ(yard_chatlog_verify(dir, &v), 0);
    /* Garbage in the middle is found by verify. */
    FILE *f = fopen(seg, "r+");
    ASSERT(f);
    fseek(f, 40, SEEK_SET);
    fputc('!', f);
    fclose(f);
    ASSERT_EQ(yard_chatlog_verify(dir, &v), -EBADMSG);
    ASSERT(strstr(v.problem, "do not decode"));
}

struct thr {
    yard_chatlog_t *log;
    int who, n;
};

static void *thread_appender(void *arg)
{
    struct thr *t = arg;
    for (int i = 0; i < t->n; i++) {
        char text[32];
        snprintf(text, sizeof text, "t%d-%d", t->who, i);
        uint64_t id;
        int64_t ts;
        if (yard_chatlog_append(t->log, YARD_LOGREC_MESSAGE, "bob", 3, "#x", 2, text,
                                strlen(text), &id, &ts) != 0)
            abort();
    }
    return NULL;
}

static void test_many_writers(void)
{
    char dir[512];
    fresh(dir, "many");
    yard_chatlog_t *log = open_log(dir, 4096, NULL);
    /* Processes first (TSan: no fork after threads). */
    enum { PROCS = 4, PER = 500, THREADS = 3 };
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        ASSERT(pids[p] >= 0);
        if (pids[p] == 0) {
            for (int i = 0; i < PER; i++) {
                char text[32];
                snprintf(text, sizeof text, "p%d-%d", p, i);
                uint64_t id;
                int64_t ts;
                if (yard_chatlog_append(log, YARD_LOGREC_MESSAGE, "carol", 5, "#x", 2, text,
                                        strlen(text), &id, &ts) != 0)
                    _exit(1);
            }
            _exit(0);
        }
    }
    for (int p = 0; p < PROCS; p++) {
        int status;
        ASSERT_EQ(waitpid(pids[p], &status, 0), pids[p]);
        ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    pthread_t t[THREADS];
    struct thr a[THREADS];
    for (int i = 0; i < THREADS; i++) {
        a[i] = (struct thr){log, i, PER};
        ASSERT_EQ(pthread_create(&t[i], NULL, thread_appender, &a[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    uint64_t total = (PROCS + THREADS) * PER;
    ASSERT_U64_EQ(yard_chatlog_last_id(log), total);
    /* Every message exactly once, ids 1..total without gaps. */
    static unsigned char seen[PROCS + THREADS][PER];
    memset(seen, 0, sizeof seen);
    yard_chatlog_iter_t *it;
    ASSERT_EQ(yard_chatlog_iter_open(log, 1, &it), 0);
    yard_chatlog_rec_t r;
    uint64_t want = 1;
    while (yard_chatlog_next(it, &r) == 1) {
        ASSERT_U64_EQ(r.id, want);
        want++;
        char text[32];
        snprintf(text, sizeof text, "%.*s", (int)r.text_len, r.text);
        int w, i;
        char kind;
        ASSERT_EQ(sscanf(text, "%c%d-%d", &kind, &w, &i), 3);
        int row = kind == 'p' ? w : PROCS + w;
        ASSERT_EQ(seen[row][i], 0);
        seen[row][i] = 1;
    }
    ASSERT_U64_EQ(want, total + 1);
    yard_chatlog_iter_close(it);
    yard_chatlog_close(log);
    yard_chatlog_verify_t v;
    ASSERT_EQ(yard_chatlog_verify(dir, &v), 0);
    ASSERT_U64_EQ(v.records, total);
}

static void test_prune(void)
{
    char dir[512];
    fresh(dir, "prune");
    yard_chatlog_opts_t o;
    yard_chatlog_opts_default(&o);
    o.segment_bytes = 200;
    o.retain_s = 3600;
    yard_chatlog_t *log = NULL;
    yard_chatlog_recovery_t rec;
    char err[512];
    ASSERT_EQ(yard_chatlog_open(dir, &o, &log, &rec, err, sizeof err), 0);
    for (int i = 0; i < 20; i++)
        append(log, "some text to fill segments");
    yard_chatlog_verify_t v;
    ASSERT_EQ(yard_chatlog_verify(dir, &v), 0);
    uint64_t before = v.segments;
    ASSERT(before > 3);
    /* Age every segment by two hours: all but the active one go. */
    char path[1024];
    snprintf(path, sizeof path, "%s/log", dir);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "touch -d '-2 hours' %s/*.seg", path);
    ASSERT_EQ(system(cmd), 0);
    int deleted = yard_chatlog_prune(log, (int64_t)time(NULL));
    ASSERT_EQ(deleted, (int)before - 1);
    ASSERT_EQ(yard_chatlog_verify(dir, &v), 0);
    ASSERT_U64_EQ(v.segments, 1);
    /* Appends and an iterator from a pruned id still work. */
    uint64_t id = append(log, "after prune");
    yard_chatlog_iter_t *it;
    ASSERT_EQ(yard_chatlog_iter_open(log, 1, &it), 0);
    yard_chatlog_rec_t r;
    uint64_t last = 0;
    while (yard_chatlog_next(it, &r) == 1)
        last = r.id;
    ASSERT_U64_EQ(last, id);
    yard_chatlog_iter_close(it);
    yard_chatlog_close(log);
}

static void test_failed_write_leaves_no_half_record(void)
{
    char dir[512];
    fresh(dir, "full");
    yard_chatlog_t *log = open_log(dir, 0, NULL);
    append(log, "first");
    /* A file size limit stands in for a full disk: the write fails (EFBIG
     * with SIGXFSZ ignored), nothing of it stays, the next append works. */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 100;
    setrlimit(RLIMIT_FSIZE, &lim);
    char big[900];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = 0;
    uint64_t id;
    int64_t ts;
    int rc = yard_chatlog_append(log, YARD_LOGREC_MESSAGE, "alice", 5, "#room", 5, big,
                                 strlen(big), &id, &ts);
    setrlimit(RLIMIT_FSIZE, &old);
    ASSERT(rc < 0);
    ASSERT_U64_EQ(append(log, "second"), 2);
    yard_chatlog_close(log);
    yard_chatlog_verify_t v;
    ASSERT_EQ(yard_chatlog_verify(dir, &v), 0);
    ASSERT_U64_EQ(v.records, 2);
}

/* Take every record of one read; their ids must be want, want + 1, ... */
static uint64_t take_all(yard_chatlog_cursor_t *cur, const uint8_t *buf, long n, uint64_t want)
{
    ASSERT(n >= 0);
    size_t pos = 0;
    yard_chatlog_rec_t r;
    int rc;
    while ((rc = yard_chatlog_take(cur, buf, (size_t)n, &pos, &r)) == 1) {
        ASSERT_U64_EQ(r.id, want);
        want++;
    }
    ASSERT_EQ(rc, 0);
    return want;
}

static void test_cursor_tail_and_files(void)
{
    char dir[512];
    fresh(dir, "cursor");
    /* Segments of 64 KiB: the 1 MiB tail spans only the active one. */
    yard_chatlog_t *log = open_log(dir, 64 * 1024, NULL);
    for (int i = 0; i < 10; i++)
        append(log, "before the reader");
    yard_chatlog_cursor_t cur, behind, old;
    ASSERT_U64_EQ(yard_chatlog_cursor_end(log, &cur), 10);
    yard_chatlog_cursor_at(&old, 3);
    static uint8_t buf[YARD_LOGREC_MAX * 4];
    /* Nothing new yet; a cursor not placed yet must go to the files. */
    ASSERT_EQ(yard_chatlog_read_tail(log, &cur, buf, sizeof buf), 0);
    ASSERT_EQ(yard_chatlog_read_tail(log, &old, buf, sizeof buf), -EAGAIN);
    ASSERT_EQ(yard_chatlog_read_tail(log, &cur, buf, YARD_LOGREC_MAX - 1), -EINVAL);
    /* The files hold ids 3.. for the old cursor, in reads of buf's size. */
    uint64_t want = 3;
    long n;
    while ((n = yard_chatlog_read(log, &old, buf, sizeof buf)) > 0)
        want = take_all(&old, buf, n, want);
    ASSERT_EQ(n, 0);
    ASSERT_U64_EQ(want, 11);

    /* Appends reach a reader that keeps up from memory alone: with the
     * segment files gone, the tail still has them. */
    behind = cur;
    char path[600];
    snprintf(path, sizeof path, "%s/log/%020d.seg", dir, 1);
    ASSERT_EQ(unlink(path), 0);
    append(log, "eleven");
    append(log, "twelve");
    n = yard_chatlog_read_tail(log, &cur, buf, sizeof buf);
    ASSERT(n > 0);
    ASSERT_U64_EQ(take_all(&cur, buf, n, 11), 13);

    /* Across rotations: about 1500 records of 1 KiB, many segments, and a
     * reader that reads after every append stays in memory. */
    char text[1000];
    memset(text, 'x', sizeof text - 1);
    text[sizeof text - 1] = 0;
    want = 13;
    for (int i = 0; i < 1500; i++) {
        append(log, text);
        n = yard_chatlog_read_tail(log, &cur, buf, sizeof buf);
        ASSERT(n > 0);
        want = take_all(&cur, buf, n, want);
        ASSERT_U64_EQ(want, 14 + (uint64_t)i);
    }
    /* The reader left behind at id 11 lost the tail (its segment is not
     * the active one any more); the files still serve it, from 13 on
     * (11 and 12 were in the unlinked segment, which the reader skips). */
    ASSERT_EQ(yard_chatlog_read_tail(log, &behind, buf, sizeof buf), -EAGAIN);
    n = yard_chatlog_read(log, &behind, buf, sizeof buf);
    ASSERT(n > 0);
    yard_chatlog_rec_t r;
    size_t pos = 0;
    ASSERT_EQ(yard_chatlog_take(&behind, buf, (size_t)n, &pos, &r), 1);
    ASSERT(r.id >= 13);
    yard_chatlog_close(log);
}

static yard_chatlog_entry_t entry(int type, const char *sender, const char *target,
                                  const char *text)
{
    yard_chatlog_entry_t e = {.type = type, .text_len = (uint16_t)strlen(text)};
    snprintf(e.sender, sizeof e.sender, "%s", sender);
    snprintf(e.target, sizeof e.target, "%s", target);
    memcpy(e.text, text, e.text_len);
    return e;
}

/* The records of the log from id from on: n of them, types and senders. */
static int read_back(yard_chatlog_t *log, uint64_t from, int *types, char (*senders)[8], int max)
{
    yard_chatlog_iter_t *it;
    ASSERT_EQ(yard_chatlog_iter_open(log, from, &it), 0);
    yard_chatlog_rec_t r;
    int n = 0;
    while (n < max && yard_chatlog_next(it, &r) == 1) {
        ASSERT_EQ(r.id, from + (uint64_t)n);
        types[n] = r.type;
        snprintf(senders[n], 8, "%.*s", (int)r.sender_len, r.sender);
        n++;
    }
    yard_chatlog_iter_close(it);
    return n;
}

static _Atomic uint64_t written_upto;

static void on_written(void *arg, uint64_t last_id)
{
    ASSERT(arg == &written_upto);
    atomic_store(&written_upto, last_id);
}

static void wait_written(uint64_t id)
{
    for (int i = 0; i < 5000 && atomic_load(&written_upto) < id; i++)
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    ASSERT_EQ(atomic_load(&written_upto), id);
}

static void test_deferred(void)
{
    char dir[512];
    fresh(dir, "deferred");
    yard_chatlog_t *log = open_log(dir, 0, NULL);
    /* Deferred, then an append: they come first, in order, consecutively. */
    yard_chatlog_entry_t three[3] = {entry(YARD_LOGREC_JOIN, "ann", "#a", ""),
                                      entry(YARD_LOGREC_PART, "bob", "#a", "bye"),
                                      entry(YARD_LOGREC_QUIT, "cy", "#a", "Quit: zzz")};
    ASSERT(yard_chatlog_defer(log, three, 3));
    yard_chatlog_entry_t one = entry(YARD_LOGREC_JOIN, "dee", "#b", "");
    ASSERT(yard_chatlog_defer(log, &one, 1));
    ASSERT_EQ(yard_chatlog_last_id(log), 0);
    ASSERT_EQ(append(log, "after them"), 5);
    int types[8];
    char senders[8][8];
    ASSERT_EQ(read_back(log, 1, types, senders, 8), 5);
    static const int want[] = {YARD_LOGREC_JOIN, YARD_LOGREC_PART, YARD_LOGREC_QUIT,
                               YARD_LOGREC_JOIN, YARD_LOGREC_MESSAGE};
    static const char *const who[] = {"ann", "bob", "cy", "dee", "alice"};
    for (int i = 0; i < 5; i++) {
        ASSERT_EQ(types[i], want[i]);
        ASSERT(!strcmp(senders[i], who[i]));
    }
    /* A full queue refuses the whole batch and counts it. */
    static yard_chatlog_entry_t many[YARD_CHATLOG_DEFER_SLOTS];
    for (int i = 0; i < YARD_CHATLOG_DEFER_SLOTS; i++)
        many[i] = entry(YARD_LOGREC_JOIN, "eve", "#c", "");
    ASSERT(yard_chatlog_defer(log, many, YARD_CHATLOG_DEFER_SLOTS - 1));
    ASSERT(!yard_chatlog_defer(log, many, 2));
    ASSERT_EQ(yard_chatlog_deferred_dropped(log), 2);
    ASSERT(yard_chatlog_defer(log, many, 1));
    ASSERT_EQ(yard_chatlog_write_deferred(log), 5 + YARD_CHATLOG_DEFER_SLOTS);
    ASSERT_EQ(yard_chatlog_write_deferred(log), 0);
    /* The writer thread writes them with nobody appending, a forked
     * child's included, and says up to where. */
    char err[256];
    ASSERT_EQ(yard_chatlog_writer_start(log, on_written, &written_upto, err, sizeof err), 0);
    uint64_t base = yard_chatlog_last_id(log);
    ASSERT(yard_chatlog_defer(log, three, 2));
    wait_written(base + 2);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0)
        _exit(yard_chatlog_defer(log, &one, 1) ? 0 : 1);
    int status;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    wait_written(base + 3);
    ASSERT_EQ(read_back(log, base + 1, types, senders, 8), 3);
    ASSERT(!strcmp(senders[2], "dee"));
    /* What is deferred when the log closes is written by the close. */
    ASSERT(yard_chatlog_defer(log, &one, 1));
    yard_chatlog_close(log);
    log = open_log(dir, 0, NULL);
    ASSERT_EQ(yard_chatlog_last_id(log), base + 4);
    yard_chatlog_close(log);
}

struct seen {
    uint64_t ids[64];
    int n, max;
};

static int collect(const yard_chatlog_rec_t *r, void *arg)
{
    struct seen *v = arg;
    v->ids[v->n++] = r->id;
    return v->n == v->max;
}

/* The index: lookups by target (case-insensitively) in both directions
 * across segments, by time, and indexes rebuilt when missing or short. */
static void test_index(void)
{
    char dir[512], path[1024];
    fresh(dir, "index");
    yard_chatlog_t *log = open_log(dir, 700, NULL); /* a few records per segment */
    int64_t mid_ts = 0;
    for (int i = 1; i <= 30; i++) {
        uint64_t id;
        int64_t ts;
        const char *t = i % 3 == 0 ? "#Room[1]" : "#other";
        ASSERT_EQ(yard_chatlog_append(log, YARD_LOGREC_MESSAGE, "alice", 5, t, strlen(t), "hello",
                                      5, &id, &ts),
                  0);
        if (i == 15)
            mid_ts = ts;
    }
    uint32_t h = yard_chatlog_target_hash("#room{1}", 8); /* rfc1459: [ is { */
    ASSERT_EQ(h, yard_chatlog_target_hash("#ROOM[1]", 8));
    struct seen v = {.max = 4};
    ASSERT_EQ(yard_chatlog_seek(log, UINT64_MAX, -1, &h, 1, collect, &v), 0);
    ASSERT_EQ(v.n, 4);
    ASSERT_EQ(v.ids[0], 30);
    ASSERT_EQ(v.ids[3], 21);
    v = (struct seen){.max = 64};
    ASSERT_EQ(yard_chatlog_seek(log, 10, 1, &h, 1, collect, &v), 0);
    ASSERT_EQ(v.n, 7); /* 12, 15, ..., 30 */
    ASSERT_EQ(v.ids[0], 12);
    v = (struct seen){.max = 64};
    ASSERT_EQ(yard_chatlog_seek(log, 5, -1, NULL, 0, collect, &v), 0);
    ASSERT_EQ(v.n, 5); /* every record, 5 down to 1 */
    ASSERT_EQ(yard_chatlog_id_at(log, mid_ts), 15);
    ASSERT_EQ(yard_chatlog_id_at(log, 0), 1);
    ASSERT_EQ(yard_chatlog_id_at(log, INT64_MAX), 31);
    yard_chatlog_close(log);
    /* An index lost, another cut short: open rebuilds them. */
    snprintf(path, sizeof path, "%s/log/%020d.idx", dir, 1);
    ASSERT_EQ(unlink(path), 0);
    log = open_log(dir, 700, NULL);
    yard_chatlog_close(log);
    snprintf(path, sizeof path, "%s/log/%020d.idx", dir, 1);
    struct stat st;
    ASSERT_EQ(stat(path, &st), 0);
    ASSERT(st.st_size > 0);
    ASSERT_EQ(truncate(path, st.st_size - 24), 0);
    log = open_log(dir, 700, NULL);
    ASSERT_EQ(stat(path, &st), 0);
    v = (struct seen){.max = 64};
    ASSERT_EQ(yard_chatlog_seek(log, 1, 1, &h, 1, collect, &v), 0);
    ASSERT_EQ(v.n, 10);
    yard_chatlog_close(log);
}

/* The index file is defined by its bytes, not by the host's: entry i is 24
 * bytes, the record's offset (8), timestamp (8), target hash (4) and type
 * (4), each little-endian, so a log written on x86-64 is read as it is on
 * a big-endian machine (and the other way). */
static uint64_t le_bytes(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void test_index_bytes(void)
{
    char dir[512], path[1024];
    fresh(dir, "index-bytes");
    yard_chatlog_t *log = open_log(dir, 0, NULL);
    int64_t ts[2];
    uint64_t id;
    ASSERT_EQ(yard_chatlog_append(log, YARD_LOGREC_MESSAGE, "alice", 5, "#room", 5, "hi", 2, &id,
                                  &ts[0]),
              0);
    ASSERT_EQ(yard_chatlog_append(log, YARD_LOGREC_NOTICE, "bob", 3, "#other", 6, "hello", 5, &id,
                                  &ts[1]),
              0);
    yard_chatlog_close(log);
    uint8_t idx[64], seg[4096];
    snprintf(path, sizeof path, "%s/log/%020d.idx", dir, 1);
    FILE *f = fopen(path, "rb");
    ASSERT(f != NULL);
    ASSERT_EQ(fread(idx, 1, sizeof idx, f), 48);
    fclose(f);
    snprintf(path, sizeof path, "%s/log/%020d.seg", dir, 1);
    f = fopen(path, "rb");
    ASSERT(f != NULL);
    size_t seglen = fread(seg, 1, sizeof seg, f);
    fclose(f);
    uint64_t len1 = le_bytes(seg + 4, 4); /* the record's own length field */
    ASSERT(len1 > 0 && len1 < seglen);
    ASSERT_U64_EQ(le_bytes(idx, 8), 0);
    ASSERT_U64_EQ(le_bytes(idx + 8, 8), (uint64_t)ts[0]);
    ASSERT_U64_EQ(le_bytes(idx + 16, 4), yard_chatlog_target_hash("#room", 5));
    ASSERT_U64_EQ(le_bytes(idx + 20, 4), YARD_LOGREC_MESSAGE);
    ASSERT_U64_EQ(le_bytes(idx + 24, 8), len1);
    ASSERT_U64_EQ(le_bytes(idx + 32, 8), (uint64_t)ts[1]);
    ASSERT_U64_EQ(le_bytes(idx + 40, 4), yard_chatlog_target_hash("#other", 6));
    ASSERT_U64_EQ(le_bytes(idx + 44, 4), YARD_LOGREC_NOTICE);
    /* And it is read as it is: open keeps it (no rebuild), seek finds by it. */
    log = open_log(dir, 0, NULL);
    uint32_t h = yard_chatlog_target_hash("#other", 6);
    struct seen v = {.max = 4};
    ASSERT_EQ(yard_chatlog_seek(log, 1, 1, &h, 1, collect, &v), 0);
    ASSERT_EQ(v.n, 1);
    ASSERT_EQ(v.ids[0], 2);
    ASSERT_EQ(yard_chatlog_id_at(log, ts[1]), ts[1] == ts[0] ? 1 : 2);
    yard_chatlog_close(log);
    snprintf(path, sizeof path, "%s/log/%020d.idx", dir, 1);
    f = fopen(path, "rb");
    ASSERT(f != NULL);
    uint8_t again[64];
    ASSERT_EQ(fread(again, 1, sizeof again, f), 48);
    fclose(f);
    ASSERT_MEM_EQ(again, idx, 48);
}

/* An iterator from the middle of a segment starts at its record through
 * the index, not by decoding every record before it: with the segment's
 * first record damaged on disk (after the fact, past the shared tail), a
 * read from a later id still gets every record from there on. */
static void test_iterate_from_the_middle_through_the_index(void)
{
    char dir[512], path[1024], text[600];
    fresh(dir, "mid");
    yard_chatlog_t *log = open_log(dir, 0, NULL); /* one 64 MiB segment */
    memset(text, 'x', sizeof text - 1);
    text[sizeof text - 1] = 0;
    for (int i = 1; i <= 3000; i++) /* about 1.9 MB: the first ones are out of the tail */
        ASSERT_EQ(append(log, text), (uint64_t)i);
    snprintf(path, sizeof path, "%s/log/%020d.seg", dir, 1);
    FILE *f = fopen(path, "r+b");
    ASSERT(f != NULL);
    ASSERT_EQ(fwrite("garbage!", 1, 8, f), 8); /* record 1's head */
    ASSERT_EQ(fclose(f), 0);
    yard_chatlog_iter_t *it;
    ASSERT_EQ(yard_chatlog_iter_open(log, 1500, &it), 0);
    yard_chatlog_rec_t r;
    uint64_t want = 1500;
    int rc;
    while ((rc = yard_chatlog_next(it, &r)) == 1)
        ASSERT_EQ(r.id, want++);
    ASSERT_EQ(rc, 0);
    ASSERT_EQ(want, 3001);
    yard_chatlog_iter_close(it);
    /* From the start, the damage is found and said. */
    ASSERT_EQ(yard_chatlog_iter_open(log, 1, &it), 0);
    ASSERT_EQ(yard_chatlog_next(it, &r), -EBADMSG);
    yard_chatlog_iter_close(it);
    yard_chatlog_close(log);
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/yard-test-chatlog-XXXXXX");
    ASSERT(mkdtemp(root));
    test_many_writers(); /* forks: before any thread exists */
    test_append_iterate_rotate_reopen();
    test_torn_tail();
    test_prune();
    test_failed_write_leaves_no_half_record();
    test_cursor_tail_and_files();
    test_deferred();
    test_index();
    test_index_bytes();
    test_iterate_from_the_middle_through_the_index();
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}
