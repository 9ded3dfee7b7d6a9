/* The chat's operator bans (K-lines): DIR/klines, one line per ban,
 *
 *   MASK EXPIRES_S SET_S BY :REASON
 *
 * MASK is $a:ACCOUNT (an account, * and ? allowed) or nick!user@host;
 * EXPIRES_S is when it stops applying (Unix seconds; 0: never); SET_S when
 * it was set, BY by whom. Written like DIR/accounts (under its lock, a new
 * file fsynced and renamed over the old, mode 0600), by `yard-chat kline`
 * and by the server's KLINE and UNKLINE (store requests).
 *
 * Every change also moves a generation number, DIR/klines.gen (8 bytes, a
 * counter in the host's byte order, written under the same lock after the
 * rename). A running server maps that file (yard_klines_gen_map) and keeps
 * the list in memory: it reads the file again only when the number it
 * sees has moved, so a ban added or removed by either applies to the next
 * registration without a read of DIR/klines for each one. */
#ifndef YARD_CHAT_KLINES_H
#define YARD_CHAT_KLINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "yard/chat_accounts.h"

#define YARD_KLINE_MASK_MAX 100
#define YARD_KLINE_REASON_MAX 200
#define YARD_KLINES_MAX 4096 /* bans in the file at most */

/* The account extban's prefix (EXTBAN=$,a): $a:NAME. */
#define YARD_EXTBAN_ACCOUNT "$a:"

/* A ban mask completed as servers list them, into out (cap bytes): nick
 * alone is nick!*@*, user@host *!user@host, nick!user nick!user@*; $a:NAME
 * as given. False for what cannot be a mask (empty, not fitting, spaces,
 * commas, control characters, ':' first, another extban). Needs no I/O:
 * channel bans (the app) use it too. */
bool yard_mask_complete(const char *given, char *out, size_t cap);

typedef struct yard_kline {
    char mask[YARD_KLINE_MASK_MAX + 1];
    int64_t expires_s; /* 0: never */
    int64_t set_s;
    char by[YARD_ACCOUNT_NAME_MAX + 1];
    char reason[YARD_KLINE_REASON_MAX + 1];
} yard_kline_t;

/* A K-line's mask as it is kept: an account name alone is $a:NAME, an
 * address (with a '.' or ':') *!*@ADDR, user@host *!user@host, nick!user
 * nick!user@*; $a:PATTERN and nick!user@host as given. False for what
 * cannot be one (empty, too long, spaces, commas, control characters,
 * another extban). */
bool yard_kline_normalize(const char *given, char out[YARD_KLINE_MASK_MAX + 1]);

/* Add k (one with the same mask, compared casefolded, is replaced): 0, or
 * -errno: -EINVAL a reason with a control character, -ENOSPC
 * YARD_KLINES_MAX already. */
int yard_klines_add(const char *dir, const yard_kline_t *k);
/* Remove the one with this mask: 0, -ENOENT (none), or -errno. */
int yard_klines_remove(const char *dir, const char *mask);
/* Every K-line in the file, expired ones too, in *out (the caller frees
 * it; NULL and 0 when there is no file): 0, or -errno (-EINVAL: a line
 * that is not a K-line). */
int yard_klines_load(const char *dir, yard_kline_t **out, size_t *n);

/* The same three for the command line (yard-chat kline), which says what
 * went wrong: on failure err holds a message naming the file and the line
 * or the problem. The server's requests use the ones above. */
int yard_klines_add_msg(const char *dir, const yard_kline_t *k, char *err, size_t errlen);
int yard_klines_remove_msg(const char *dir, const char *mask, char *err, size_t errlen);
int yard_klines_load_msg(const char *dir, yard_kline_t **out, size_t *n, char *err,
                         size_t errlen);

/* DIR/klines.gen mapped shared and read-only into *gen (made, as 0, when
 * missing): 0, or -errno with err naming the file. Unmap it with
 * yard_klines_gen_unmap. */
int yard_klines_gen_map(const char *dir, const uint64_t **gen, char *err, size_t errlen);
void yard_klines_gen_unmap(const uint64_t *gen);
/* The generation now, from a mapping (no I/O). */
static inline uint64_t yard_klines_gen(const uint64_t *gen)
{
    return __atomic_load_n(gen, __ATOMIC_ACQUIRE);
}

#endif
