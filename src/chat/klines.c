/* The chat's operator bans, DIR/klines (include/yard/chat_klines.h), and
 * the masks they share with channel bans (yard_mask_complete). */
#include "yard/chat_klines.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "yard/chat_store.h"
#include "yard/shm.h"

#define KLINES_FILE "klines"
#define KLINES_GEN_FILE "klines.gen"
#define KLINES_GEN_BYTES sizeof(uint64_t)

/* DIR/klines.gen opened for reading and writing, made 8 zero bytes long
 * when it is shorter: a descriptor, or -errno with err. */
static int gen_open(const char *dir, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/" KLINES_GEN_FILE, dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    struct stat st;
    int e = fd < 0 || fstat(fd, &st) < 0 ? errno : 0;
    if (!e && st.st_size < (off_t)KLINES_GEN_BYTES && ftruncate(fd, KLINES_GEN_BYTES) < 0)
        e = errno;
    if (e) {
        snprintf(err, errlen, "%.4000s: %s", path, strerror(e));
        if (fd >= 0)
            close(fd);
        return -e;
    }
    return fd;
}

int yard_klines_gen_map(const char *dir, const uint64_t **gen, char *err, size_t errlen)
{
    *gen = NULL;
    int fd = gen_open(dir, err, errlen);
    if (fd < 0)
        return fd;
    void *p = mmap(NULL, KLINES_GEN_BYTES, PROT_READ, MAP_SHARED, fd, 0);
    int e = p == MAP_FAILED ? errno : 0;
    close(fd);
    if (e) {
        snprintf(err, errlen, "%.4000s/" KLINES_GEN_FILE ": mmap: %s", dir, strerror(e));
        return -e;
    }
    *gen = p;
    return 0;
}

void yard_klines_gen_unmap(const uint64_t *gen)
{
    if (gen)
        munmap((void *)gen, KLINES_GEN_BYTES);
}

/* One more change (under the directory's lock): DIR/klines.gen's counter
 * moves on, which servers that map the file see at once. 0 or -errno. */
static int gen_bump(const char *dir, char *err, size_t errlen)
{
    int fd = gen_open(dir, err, errlen);
    if (fd < 0)
        return fd;
    uint64_t gen = 0;
    long got = yard_pread_full(fd, &gen, sizeof gen, 0);
    int e = got < 0 ? (int)-got : 0;
    gen++;
    errno = 0;
    if (!e && pwrite(fd, &gen, sizeof gen, 0) != (ssize_t)sizeof gen)
        e = errno ? errno : EIO;
    close(fd);
    if (e)
        snprintf(err, errlen, "%.4000s/" KLINES_GEN_FILE ": %s", dir, strerror(e));
    return -e;
}

static bool mask_chars_ok(const char *m)
{
    for (; *m; m++)
        if ((unsigned char)*m <= ' ' || *m == ',' || *m == 0x7f)
            return false;
    return true;
}

bool yard_mask_complete(const char *given, char *out, size_t cap)
{
    size_t n = strlen(given);
    if (!n || n >= cap || given[0] == ':' || !mask_chars_ok(given))
        return false;
    if (given[0] == '$') { /* an extban: only the account's */
        if (strncmp(given, YARD_EXTBAN_ACCOUNT, 3) || !given[3])
            return false;
        memcpy(out, given, n + 1);
        return true;
    }
    const char *bang = strchr(given, '!'), *at = strchr(given, '@');
    if (at && bang && at < bang)
        return false; /* user@host!nick: no order a server lists */
    int w;
    if (bang && at)
        w = snprintf(out, cap, "%s", given);
    else if (bang)
        w = snprintf(out, cap, "%s@*", given);
    else if (at)
        w = snprintf(out, cap, "*!%s", given);
    else
        w = snprintf(out, cap, "%s!*@*", given);
    return w > 0 && (size_t)w < cap;
}

bool yard_kline_normalize(const char *given, char out[YARD_KLINE_MASK_MAX + 1])
{
    char buf[YARD_KLINE_MASK_MAX + 8];
    const char *m = given;
    if (!strpbrk(given, "!@$") && mask_chars_ok(given)) {
        /* an address alone (IPv4 or IPv6), or else an account's name */
        snprintf(buf, sizeof buf, strpbrk(given, ".:") ? "*!*@%s" : YARD_EXTBAN_ACCOUNT "%s",
                 given);
        if (strlen(given) > YARD_KLINE_MASK_MAX)
            return false;
        m = buf;
    }
    return yard_mask_complete(m, out, YARD_KLINE_MASK_MAX + 1);
}

/* "MASK EXPIRES_S SET_S BY :REASON" */
static bool kline_line(char *line, void *elem)
{
    yard_kline_t *k = elem;
    memset(k, 0, sizeof *k);
    char *colon = strstr(line, " :");
    if (!colon)
        return false;
    *colon = 0;
    const char *reason = colon + 2;
    char mask[YARD_KLINE_MASK_MAX + 2], by[YARD_ACCOUNT_NAME_MAX + 2];
    int64_t expires, set;
    int end = 0;
    if (sscanf(line, "%101s %" SCNd64 " %" SCNd64 " %31s%n", mask, &expires, &set, by, &end) != 4 ||
        line[end] || strlen(mask) > YARD_KLINE_MASK_MAX || strlen(by) > YARD_ACCOUNT_NAME_MAX ||
        strlen(reason) > YARD_KLINE_REASON_MAX || expires < 0)
        return false;
    strcpy(k->mask, mask);
    strcpy(k->by, by);
    strcpy(k->reason, reason);
    k->expires_s = expires;
    k->set_s = set;
    return true;
}

static void kline_lines(FILE *f, const void *items, size_t n)
{
    const yard_kline_t *k = items;
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s %" PRId64 " %" PRId64 " %s :%s\n", k[i].mask, k[i].expires_s, k[i].set_s,
                k[i].by[0] ? k[i].by : "-", k[i].reason);
}

int yard_klines_load_msg(const char *dir, yard_kline_t **out, size_t *n, char *err,
                         size_t errlen)
{
    int rc = yard_chat_file_load(dir, KLINES_FILE, sizeof **out, kline_line,
                                 "MASK EXPIRES SET BY :REASON", (void **)out, n, err, errlen);
    return rc == -ENOENT ? 0 : rc; /* no file: no K-lines */
}

/* The index of mask (casefolded) among k[0..n), or -1. */
static long kline_find(const yard_kline_t *k, size_t n, const char *mask)
{
    for (size_t i = 0; i < n; i++) {
        const char *a = k[i].mask, *b = mask;
        while (*a && yard_irc_fold(*a) == yard_irc_fold(*b)) {
            a++;
            b++;
        }
        if (!*a && !*b)
            return (long)i;
    }
    return -1;
}

/* Load, change with add (k) or remove (mask), store, under the lock. */
static int klines_change(const char *dir, const yard_kline_t *k, const char *mask, char *err,
                         size_t errlen)
{
    for (const char *r = k ? k->reason : ""; *r; r++)
        if ((unsigned char)*r < ' ' || *r == 0x7f) {
            snprintf(err, errlen, "a reason is one line, without control characters");
            return -EINVAL;
        }
    int lock = yard_chat_dir_lock(dir, err, errlen);
    if (lock < 0)
        return lock;
    yard_kline_t *all = NULL;
    size_t n = 0;
    int rc = yard_klines_load_msg(dir, &all, &n, err, errlen);
    long at = rc < 0 ? -1 : kline_find(all, n, k ? k->mask : mask);
    if (rc < 0) {
        /* err says why */
    } else if (!k && at < 0) {
        snprintf(err, errlen, "no K-line for %s", mask);
        rc = -ENOENT;
    } else if (!k) {
        memmove(&all[at], &all[at + 1], (n - (size_t)at - 1) * sizeof *all);
        rc = yard_chat_file_replace(dir, KLINES_FILE, kline_lines, all, n - 1, err, errlen);
    } else if (at >= 0) {
        all[at] = *k;
        rc = yard_chat_file_replace(dir, KLINES_FILE, kline_lines, all, n, err, errlen);
    } else if (n >= YARD_KLINES_MAX) {
        snprintf(err, errlen, "%d K-lines already: remove some first", YARD_KLINES_MAX);
        rc = -ENOSPC;
    } else {
        yard_kline_t *grown = realloc(all, (n + 1) * sizeof *all);
        if (!grown) {
            snprintf(err, errlen, "out of memory");
            rc = -ENOMEM;
        } else {
            all = grown;
            all[n] = *k;
            rc = yard_chat_file_replace(dir, KLINES_FILE, kline_lines, all, n + 1, err, errlen);
        }
    }
    if (rc == 0)
        rc = gen_bump(dir, err, errlen);
    free(all);
    close(lock);
    return rc;
}

int yard_klines_add_msg(const char *dir, const yard_kline_t *k, char *err, size_t errlen)
{
    return klines_change(dir, k, NULL, err, errlen);
}

int yard_klines_remove_msg(const char *dir, const char *mask, char *err, size_t errlen)
{
    return klines_change(dir, NULL, mask, err, errlen);
}

/* The server's: the same work with no message (snprintf writes nothing
 * into a buffer of 0 bytes). */
int yard_klines_load(const char *dir, yard_kline_t **out, size_t *n)
{
    return yard_klines_load_msg(dir, out, n, NULL, 0);
}

int yard_klines_add(const char *dir, const yard_kline_t *k)
{
    return klines_change(dir, k, NULL, NULL, 0);
}

int yard_klines_remove(const char *dir, const char *mask)
{
    return klines_change(dir, NULL, mask, NULL, 0);
}
