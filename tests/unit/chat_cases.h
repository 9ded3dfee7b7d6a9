/* What the chat's protocol tests (tests/unit/test_chat_*.c) share: the
 * server's prefix, CHATHISTORY's refusal, and the starts most of them use:
 * two accounts, both of them in #x, a guest. */
#ifndef YARD_TESTS_CHAT_CASES_H
#define YARD_TESTS_CHAT_CASES_H

#include <stdio.h>

#include "chat_harness.h"
#include "test.h"

#define S ":yard "
/* CHATHISTORY's answer to a subcommand's parameters it cannot use. */
#define HIST_INVALID(sub) \
    S "FAIL CHATHISTORY INVALID_PARAMS " sub " :Give a target, a reference and a limit of 1 to 1000"

static inline chat_harness_t *start(void)
{
    chat_harness_t *h = ch_start(NULL);
    ch_account(h, "alice", "pw-alice");
    ch_account(h, "bob", "pw-bob");
    return h;
}

/* alice (with caps) made #x and is its operator, bob joined it; what they
 * were sent until then is read. */
static inline chat_harness_t *both_in_x(const char *alice_caps, int *a, int *b)
{
    chat_harness_t *h = start();
    *a = ch_login(h, "alice", "pw-alice", alice_caps);
    *b = ch_login(h, "bob", "pw-bob", NULL);
    ch_feed(h, *a, "JOIN #x\r\n");
    ch_feed(h, *b, "JOIN #x\r\n");
    ch_discard(h, *a);
    ch_discard(h, *b);
    return h;
}

/* A guest that registers as nick (user name unick, realname "Real nick"),
 * having asked for caps first (NULL: none), with what it was sent until its
 * welcome's end read. */
static inline int guest_caps(chat_harness_t *h, const char *nick, const char *caps)
{
    int g = ch_connect(h);
    char line[300];
    if (caps) {
        snprintf(line, sizeof line, "CAP LS 302\r\nCAP REQ :%s\r\nCAP END\r\n", caps);
        ch_feed(h, g, line);
    }
    snprintf(line, sizeof line, "NICK %s\r\nUSER u%s 0 * :Real %s\r\n", nick, nick, nick);
    ch_feed(h, g, line);
    snprintf(line, sizeof line, S "422 %s ", nick);
    CH_SKIP_TO(h, g, line);
    return g;
}

static inline int guest(chat_harness_t *h, const char *nick) { return guest_caps(h, nick, NULL); }

#endif
