/* The chat's operator bans, DIR/klines (include/yard/chat_klines.h), and
 * the masks they share with channel bans (yard_mask_complete). */
#include "yard/chat_klines.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
#include "yard/chat_store.h"

#define KLINES_FILE "klines"

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

int yard_klines_load(const char *dir, yard_kline_t **out, size_t *n, char *err, size_t errlen)
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
    int rc = yard_klines_load(dir, &all, &n, err, errlen);
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
    free(all);
    close(lock);
    return rc;
}

int yard_klines_add(const char *dir, const yard_kline_t *k, char *err, size_t errlen)
{
    return klines_change(dir, k, NULL, err, errlen);
}

int yard_klines_remove(const char *dir, const char *mask, char *err, size_t errlen)
{
    return klines_change(dir, NULL, mask, err, errlen);
}
