/* Who a channel operator's MODE +o/+v and KICK name, through the chat's
 * sans-socket harness (chat_harness.h): a nick nobody connected has is 401
 * (ERR_NOSUCHNICK), a user who is connected but not in the channel 441
 * (ERR_USERNOTINCHANNEL), as irctest's chmodes.operator tests want; a rank
 * may still be taken from an account that is away. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_cases.h"

/* A public server (guests too): alice made #x, bob joined it; cy is
 * connected but in no channel. */
static chat_harness_t *start_x(int *a, int *b, int *c)
{
    static const char *const flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    ch_account(h, "alice", "pw-alice");
    ch_account(h, "bob", "pw-bob");
    ch_account(h, "cy", "pw-cy");
    ch_account(h, "dee", "pw-dee");
    *a = ch_login(h, "alice", "pw-alice", NULL);
    *b = ch_login(h, "bob", "pw-bob", NULL);
    *c = ch_login(h, "cy", "pw-cy", NULL);
    ch_feed(h, *a, "JOIN #x\r\n");
    ch_feed(h, *b, "JOIN #x\r\n");
    ch_discard(h, *a);
    ch_discard(h, *b);
    ch_discard(h, *c);
    return h;
}

static void test_mode_rank_targets(void)
{
    int a, b, c;
    chat_harness_t *h = start_x(&a, &b, &c);
    int g = guest(h, "gus"); /* a guest, in no channel */
    /* Nobody has it (dee is an account, but not connected): 401. */
    ch_feed(h, a, "MODE #x +o nobody\r\nMODE #x +v nobody\r\nMODE #x +o dee\r\n");
    CH_EXPECT(h, a, S "401 alice nobody :No such nick/channel");
    CH_EXPECT(h, a, S "401 alice nobody :No such nick/channel");
    CH_EXPECT(h, a, S "401 alice dee :No such nick/channel");
    CH_EXPECT_NONE(h, a);
    /* Connected, not in #x: 441, an account's and a guest's alike. */
    ch_feed(h, a, "MODE #x +o cy\r\nMODE #x +v gus\r\nMODE #x -o nobody\r\n");
    CH_EXPECT(h, a, S "441 alice cy #x :They aren't on that channel");
    CH_EXPECT(h, a, S "441 alice gus #x :They aren't on that channel");
    CH_EXPECT(h, a, S "401 alice nobody :No such nick/channel");
    CH_EXPECT_NONE(h, a);
    /* A rank given to bob stays while bob is away, and may be taken then. */
    ch_feed(h, a, "MODE #x +v bob\r\n");
    CH_EXPECT(h, a, ":alice!alice@yard MODE #x +v bob");
    ch_discard(h, b);
    ch_feed(h, b, "QUIT :bye\r\n");
    ch_discard(h, a);
    ch_feed(h, a, "MODE #x -v bob\r\n");
    CH_EXPECT(h, a, ":alice!alice@yard MODE #x -v bob");
    CH_EXPECT_NONE(h, a);
    CH_EXPECT_NONE(h, g);
    ch_stop(h);
}

static void test_kick_targets(void)
{
    int a, b, c;
    chat_harness_t *h = start_x(&a, &b, &c);
    int g = guest(h, "gus");
    ch_feed(h, a, "KICK #x nobody\r\nKICK #x cy\r\nKICK #x gus\r\nKICK #x nobody,cy\r\n");
    CH_EXPECT(h, a, S "401 alice nobody :No such nick/channel");
    CH_EXPECT(h, a, S "441 alice cy #x :They aren't on that channel");
    CH_EXPECT(h, a, S "441 alice gus #x :They aren't on that channel");
    CH_EXPECT(h, a, S "401 alice nobody :No such nick/channel");
    CH_EXPECT(h, a, S "441 alice cy #x :They aren't on that channel");
    CH_EXPECT_NONE(h, a);
    CH_EXPECT_NONE(h, b);
    CH_EXPECT_NONE(h, c);
    CH_EXPECT_NONE(h, g);
    /* INVITE already told the two apart. */
    ch_feed(h, a, "INVITE nobody #x\r\n");
    CH_EXPECT(h, a, S "401 alice nobody :No such nick/channel");
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"mode_rank_targets", test_mode_rank_targets},
        {"kick_targets", test_kick_targets},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
