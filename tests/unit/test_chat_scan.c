/* Long reads of the chat log (issue 44): the index walked in pieces
 * (yard_chatlog_seek_piece: a budget of index entries, and the id the next
 * piece goes on from), which together visit what one unbounded walk does;
 * and one long read at a time across processes (yard_chatlog_scan_begin),
 * given up by a holder that dies. */
#define _GNU_SOURCE /* nftw (X/Open), syscall and SYS_get_robust_list (Linux) */

#include <ftw.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

/* A log of 30 messages over several segments (700 bytes each): every
 * third one to #room, the others to #other. */
static yard_chatlog_t *log_of_30(const char *name)
{
    char dir[512], err[512];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    yard_chatlog_opts_t o;
    yard_chatlog_opts_default(&o);
    o.segment_bytes = 700;
    yard_chatlog_t *log = NULL;
    yard_chatlog_recovery_t rec;
    if (yard_chatlog_open(dir, &o, &log, &rec, err, sizeof err) < 0)
        TEST_FAIL("open %s: %s", dir, err);
    for (int i = 1; i <= 30; i++) {
        uint64_t id;
        int64_t ts;
        const char *t = i % 3 == 0 ? "#room" : "#other";
        ASSERT_EQ(yard_chatlog_append(log, YARD_LOGREC_MESSAGE, "alice", 5, t, strlen(t), "hi", 2,
                                      &id, &ts),
                  0);
    }
    return log;
}

struct seen {
    uint64_t ids[64];
    int n;
};

static int collect(const yard_chatlog_rec_t *r, void *arg)
{
    struct seen *v = arg;
    if (v->n < 64)
        v->ids[v->n++] = r->id;
    return 0;
}

static int stop_at_first(const yard_chatlog_rec_t *r, void *arg)
{
    collect(r, arg);
    return 1;
}

/* Pieces of at most budget entries from from in dir until the walk ends:
 * how many pieces it took. */
static int walk_in_pieces(yard_chatlog_t *log, uint64_t from, int dir, const uint32_t *h,
                          int nhash, uint64_t budget, struct seen *v)
{
    int pieces = 0, rc;
    do {
        uint64_t left = budget, next = 0;
        rc = yard_chatlog_seek_piece(log, from, dir, h, nhash, &left, collect, v, &next);
        ASSERT(rc == 0 || rc == YARD_CHATLOG_SEEK_MORE);
        if (rc == YARD_CHATLOG_SEEK_MORE)
            ASSERT_EQ(left, 0);
        pieces++;
        from = next;
        ASSERT(pieces < 100);
    } while (rc == YARD_CHATLOG_SEEK_MORE && from);
    return pieces;
}

static void test_seek_in_pieces(void)
{
    yard_chatlog_t *log = log_of_30("pieces");
    /* Every record, upwards, 7 entries a piece: 1..30 in 5 pieces. */
    struct seen v = {0};
    ASSERT_EQ(walk_in_pieces(log, 1, 1, NULL, 0, 7, &v), 5);
    ASSERT_EQ(v.n, 30);
    for (int i = 0; i < 30; i++)
        ASSERT_EQ(v.ids[i], (uint64_t)i + 1);
    /* #room's, downwards from the newest, 4 entries a piece (each entry
     * counts, read or not): 30, 27, ..., 3, as one unbounded walk. */
    uint32_t h = yard_chatlog_target_hash("#room", 5);
    struct seen whole = {0}, parts = {0};
    ASSERT_EQ(yard_chatlog_seek(log, UINT64_MAX, -1, &h, 1, collect, &whole), 0);
    ASSERT_EQ(whole.n, 10);
    ASSERT_EQ(walk_in_pieces(log, UINT64_MAX, -1, &h, 1, 4, &parts), 8);
    ASSERT_EQ(parts.n, whole.n);
    ASSERT(!memcmp(parts.ids, whole.ids, sizeof whole.ids[0] * (size_t)whole.n));
    /* fn stopping the walk: STOPPED, and where to go on from. */
    uint64_t left = 1000, next = 0;
    struct seen one = {0};
    ASSERT_EQ(yard_chatlog_seek_piece(log, 12, 1, NULL, 0, &left, stop_at_first, &one, &next),
              YARD_CHATLOG_SEEK_STOPPED);
    ASSERT_EQ(one.ids[0], 12);
    ASSERT_EQ(next, 13);
    ASSERT_EQ(left, 999);
    yard_chatlog_close(log);
}

/* Has the pipe a byte within ms? */
static bool readable_within(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 1;
}

/* Does the kernel this runs on keep robust futex lists? Linux does; qemu-user,
 * which runs the cross builds' tests (tests/cross/run), answers ENOSYS, and
 * there a lock whose holder died stays held. */
static bool robust_futexes(void)
{
    void *head;
    size_t len;
    return syscall(SYS_get_robust_list, 0, &head, &len) == 0;
}

/* A child that wants the scan while this process holds it waits until it
 * is given up; a child that dies holding it does not keep it (where the
 * kernel keeps robust futex lists). */
static void test_one_scan_at_a_time(void)
{
    yard_chatlog_t *log = log_of_30("scan");
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    yard_chatlog_scan_begin(log);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        yard_chatlog_scan_begin(log);
        char b = 1;
        _exit(write(fds[1], &b, 1) == 1 ? 0 : 1); /* dies holding it */
    }
    ASSERT(!readable_within(fds[0], 300)); /* it waits for this process */
    yard_chatlog_scan_end(log);
    ASSERT(readable_within(fds[0], 10000));
    int st;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (robust_futexes()) {
        yard_chatlog_scan_begin(log); /* taken over from the dead child, not a hang */
        yard_chatlog_scan_end(log);
    } else {
        printf("skipped: taking the scan over from a dead holder (no robust futex lists "
               "here: an emulator?)\n");
    }
    close(fds[0]);
    close(fds[1]);
    yard_chatlog_close(log);
}

int main(void)
{
    snprintf(root, sizeof root, "/tmp/yard-test-chat-scan-XXXXXX");
    ASSERT(mkdtemp(root));
    test_one_scan_at_a_time(); /* forks: before any thread exists */
    test_seek_in_pieces();
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}
