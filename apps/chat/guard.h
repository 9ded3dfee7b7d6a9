/* The chat service's login limits: what keeps a stranger from slowing every
 * login down, and from guessing passwords faster than a back-off allows.
 *
 * - A bound on password checks in flight, server-wide: past it a login is
 *   answered at once with a temporary failure, and nothing is hashed.
 * - A bound on checks in flight per source address: past it a login waits
 *   its turn (the address cannot fill the server-wide bound by itself).
 * - Failures per source address and per account, each a token bucket: a
 *   check takes a token from both before it starts (so concurrent guesses
 *   cannot overdraw them); an empty bucket is answered at once, saying when
 *   to try again. A successful login gives its address token back and
 *   refills its account's bucket, and the address becomes one the account
 *   trusts: a login from there is not held back by the account's bucket
 *   (the owner keeps getting in while somebody else guesses).
 * - A cap on connections that have not logged in yet, per address and in
 *   total. Those that have offered no credentials yet (no PASS, no SASL:
 *   would-be guests, or a crowd that never logs in) may hold only a share
 *   of it; a login in progress is never shed. When the total or that share
 *   is reached, a newcomer takes the place of the oldest credential-less
 *   connection of the address holding the most of them (when its own
 *   address holds fewer), which is then closed: a crowd from a few
 *   addresses cannot shut a fresh address out.
 *
 * An account is counted whether or not it exists, so the limits do not tell
 * which accounts do. A source address is an IPv4 address, or the /64 of an
 * IPv6 one (what one host usually holds).
 *
 * All of it lives in the shared region under one process-shared robust
 * mutex, so the limits hold across the fork and reactors --procs models.
 * Nothing here calls the operating system: time comes from the caller, and
 * a slot whose holder vanished (a killed process) is reclaimed once it is
 * older than any holder could keep it. */
#ifndef YARD_CHAT_GUARD_H
#define YARD_CHAT_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "yard/net.h"
#include "yard/shm.h"

typedef struct chat_addr {
    uint8_t b[16]; /* IPv4 as ::ffff:a.b.c.d; IPv6 cut to its /64 */
} chat_addr_t;

/* The key of a peer's address (all zeros when a is NULL or not IP). */
void chat_addr_of(const yard_addr_t *a, chat_addr_t *out);
/* "127.0.0.1" or "2001:db8:1:2::/64". */
void chat_addr_text(const chat_addr_t *a, char *buf, size_t len);

typedef struct chat_rate {
    double burst;  /* tokens when full */
    double per_s;  /* tokens added per second */
} chat_rate_t;

/* (yard_parse_rate reads one from a flag: "10/10m".) */

typedef struct chat_guard_opts {
    unsigned max_pending;      /* password checks in flight, server-wide */
    unsigned pending_per_addr; /* ... from one address */
    unsigned max_unregistered; /* connections not logged in yet, in total */
    unsigned unregistered_per_addr;
    unsigned open_share; /* percent of max_unregistered without credentials */
    chat_rate_t addr_failures, account_failures;
    uint64_t unregistered_ttl_ns; /* no connection stays unregistered longer */
    uint64_t pending_ttl_ns;      /* no check takes longer */
} chat_guard_opts_t;

#define CHAT_GUARD_DEFAULT_OPTS                                                                    \
    {.max_pending = 16, .pending_per_addr = 2, .max_unregistered = 1024,                           \
     .unregistered_per_addr = 64, .open_share = 50, .addr_failures = {30, 30.0 / 600},                                \
     .account_failures = {10, 10.0 / 600}, .unregistered_ttl_ns = 70 * 1000000000ull,              \
     .pending_ttl_ns = 120 * 1000000000ull}

typedef struct chat_guard chat_guard_t;

enum chat_guard_verdict {
    CHAT_GUARD_OK = 0,
    CHAT_GUARD_WAIT,          /* the address has its checks in flight: try again soon */
    CHAT_GUARD_BUSY,          /* the server has max_pending checks in flight */
    CHAT_GUARD_ADDR_LIMIT,    /* too many failures from this address */
    CHAT_GUARD_ACCOUNT_LIMIT, /* too many failures for this account */
    CHAT_GUARD_TOO_MANY,      /* unregistered connections: the address's cap */
    CHAT_GUARD_FULL,          /* unregistered connections: the server's cap */
};

chat_guard_t *chat_guard_create(yard_shm_t *shm, const chat_guard_opts_t *o, char *err,
                                size_t errlen);

/* A connection opened: count it as not logged in, without credentials.
 * CHAT_GUARD_OK and a ticket (never 0), or TOO_MANY / FULL. *shed is the
 * slot (chat_guard_slot) of the connection whose place it took, which is
 * to be closed, or -1. */
int chat_guard_enter(chat_guard_t *g, const chat_addr_t *a, uint64_t now_ns, uint64_t *ticket,
                     int *shed);
/* The slot a ticket names: 0 .. max_unregistered - 1. */
static inline int chat_guard_slot(uint64_t ticket) { return (int)(uint32_t)ticket - 1; }
/* The connection offered credentials (PASS, AUTHENTICATE): it is never
 * shed, and no longer counts against the share of those without. */
void chat_guard_credentials(chat_guard_t *g, uint64_t ticket);
/* Does the ticket still hold its slot (false: it was shed)? A 0 ticket
 * holds nothing and is not shed: true. */
bool chat_guard_holds(chat_guard_t *g, uint64_t ticket);
/* It logged in or closed (a 0 ticket is ignored). */
void chat_guard_leave(chat_guard_t *g, uint64_t ticket);

/* Before checking a password for account (casefolded). OK: a check slot is
 * held (*ticket) and a token taken from both buckets. WAIT or BUSY: nothing
 * is held. ADDR_LIMIT / ACCOUNT_LIMIT: nothing is held, and *retry_ns says
 * how long until a token is due. */
int chat_guard_check_begin(chat_guard_t *g, const chat_addr_t *a, const char *account,
                           uint64_t now_ns, uint64_t *ticket, uint64_t *retry_ns);
/* The check is over: the slot is freed; ok gives the tokens back (see
 * above). */
void chat_guard_check_end(chat_guard_t *g, uint64_t ticket, const chat_addr_t *a,
                          const char *account, bool ok, uint64_t now_ns);

#endif
