/* The chat's replies line by line, through the sans-socket harness (chat_harness.h): the
 * queries: WHO, LIST's filters, WHOWAS, and the smaller deviations irctest found (NAMES,
 * LUSERS, PING, KICK, INVITE). The formats are the ones tests/integration/test_chat*.py
 * expect of the real server. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_cases.h"

/* WHO for a nick, a mask and '*', with USER's fields, H or G, and the
 * rank's prefix in a channel's WHO; +i hides a user from masks only
 * (issue 40). */
static void test_who(void)
{
    const char *flags[] = {"guests", "server-name=irc.example", NULL};
    chat_harness_t *h = ch_start(flags);
    int z = guest(h, "zed");
    int y = guest(h, "yan");
    ch_feed(h, z, "JOIN #w\r\nAWAY :gone\r\n");
    ch_discard(h, z);
    ch_feed(h, y, "WHO ZED\r\n");
    CH_EXPECT(h, y, S "352 yan * uzed yard irc.example zed G :0 Real zed");
    CH_EXPECT(h, y, S "315 yan ZED :End of /WHO list.");
    ch_feed(h, y, "WHO z*\r\nWHO *\r\nWHO nobody\r\nWHO #w\r\n");
    CH_EXPECT(h, y, S "352 yan * uzed yard irc.example zed G :0 Real zed");
    CH_EXPECT(h, y, S "315 yan z* :End of /WHO list.");
    CH_EXPECT(h, y, S "352 yan * uyan yard irc.example yan H :0 Real yan");
    CH_EXPECT(h, y, S "352 yan * uzed yard irc.example zed G :0 Real zed");
    CH_EXPECT(h, y, S "315 yan * :End of /WHO list.");
    CH_EXPECT(h, y, S "315 yan nobody :End of /WHO list.");
    CH_EXPECT(h, y, S "352 yan #w uzed yard irc.example zed G@ :0 Real zed");
    CH_EXPECT(h, y, S "315 yan #w :End of /WHO list.");
    /* +i: not found by a mask, still by its nick, and by a mask once the
     * two share a channel. */
    ch_feed(h, z, "AWAY\r\nMODE zed +i\r\n");
    ch_feed(h, y, "WHO z*\r\nWHO zed\r\n");
    CH_EXPECT(h, y, S "315 yan z* :End of /WHO list.");
    CH_EXPECT(h, y, S "352 yan * uzed yard irc.example zed H :0 Real zed");
    CH_EXPECT(h, y, S "315 yan zed :End of /WHO list.");
    ch_feed(h, y, "JOIN #w\r\n");
    ch_discard(h, y);
    ch_feed(h, y, "WHO z*\r\n");
    CH_EXPECT(h, y, S "352 yan * uzed yard irc.example zed H :0 Real zed");
    ch_stop(h);
}

/* The smaller deviations irctest found (issue 40): no 331 in a JOIN's
 * burst, NAMES of an unknown channel and bare NAMES, LUSERS's 265/266, a
 * bare PING, KICK with a channel per nick, INVITE to a channel nobody is
 * in, an endless AUTHENTICATE, userhost-in-names. */
static void test_smaller_deviations(void)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    ch_account(h, "alice", "pw-alice");
    int z = guest(h, "zed");
    int y = guest(h, "yan");
    int x = guest(h, "xi");
    ch_feed(h, z, "JOIN #a\r\n");
    CH_EXPECT(h, z, ":zed!zed@yard JOIN #a");
    CH_EXPECT(h, z, S "353 zed = #a :@zed");
    CH_EXPECT(h, z, S "366 zed #a :End of /NAMES list.");
    ch_feed(h, z, "TOPIC #a\r\nNAMES #nope,bad\r\n");
    CH_EXPECT(h, z, S "331 zed #a :No topic is set"); /* asked for: said */
    CH_EXPECT(h, z, S "366 zed #nope :End of /NAMES list.");
    CH_EXPECT(h, z, S "366 zed bad :End of /NAMES list.");
    ch_feed(h, y, "JOIN #b\r\n");
    ch_feed(h, x, "JOIN #a,#b\r\n");
    ch_feed(h, y, "JOIN #a\r\n");
    ch_discard(h, y);
    ch_feed(h, y, "NAMES\r\n");
    CH_EXPECT(h, y, S "353 yan = #a :xi yan @zed");
    CH_EXPECT(h, y, S "353 yan = #b :xi @yan");
    CH_EXPECT(h, y, S "366 yan * :End of /NAMES list.");
    ch_feed(h, y, "LUSERS\r\nPING\r\n");
    CH_SKIP_TO(h, y, S "265 yan 3 3 :Current local users 3, max 3");
    CH_EXPECT(h, y, S "266 yan 3 3 :Current global users 3, max 3");
    CH_EXPECT(h, y, S "461 yan PING :Not enough parameters");
    /* Two nicks, each from the channel in its place, each its own KICK. */
    ch_discard(h, z);
    ch_feed(h, z, "KICK #a,#a yan,xi :bye\r\n");
    CH_EXPECT(h, z, ":zed!zed@yard KICK #a yan :bye");
    CH_EXPECT(h, z, ":zed!zed@yard KICK #a xi :bye");
    CH_EXPECT_NONE(h, z);
    ch_discard(h, y);
    ch_feed(h, z, "INVITE yan #empty\r\n");
    CH_EXPECT(h, z, S "341 zed yan #empty");
    CH_EXPECT(h, y, ":zed!zed@yard INVITE yan #empty");
    ch_discard(h, x);
    ch_feed(h, x, "CAP REQ :multi-prefix userhost-in-names\r\nNAMES #b\r\n");
    CH_EXPECT(h, x, S "CAP xi ACK :multi-prefix userhost-in-names");
    CH_EXPECT(h, x, S "353 xi = #b :xi!uxi@yard @yan!uyan@yard");
    /* SASL past any PLAIN login's length: 904, once. */
    int a = ch_connect(h);
    ch_feed(h, a, "CAP LS 302\r\nCAP REQ :sasl\r\nAUTHENTICATE PLAIN\r\n");
    ch_discard(h, a);
    char piece[420] = "AUTHENTICATE ";
    memset(piece + 13, 'A', 400);
    memcpy(piece + 413, "\r\n", 3);
    for (int i = 0; i < 20; i++)
        ch_feed(h, a, piece);
    CH_EXPECT(h, a, S "904 * :SASL authentication failed: the PLAIN message is too long");
    ch_stop(h);
}

/* LIST's filters, announced as ELIST=MNU: names and masks, "!mask",
 * ">N" and "<N" users (issue 40). */
static void test_list_filters(void)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    int z = guest(h, "zed");
    int y = guest(h, "yan");
    ch_feed(h, z, "JOIN #chan1,#chan2\r\n");
    ch_feed(h, y, "JOIN #chan2\r\n");
    ch_discard(h, y);
    ch_feed(h, y, "LIST *an1\r\nLIST !#c*n2\r\nLIST >1\r\nLIST <1\r\nLIST #CH*,>0\r\n");
    CH_EXPECT(h, y, S "321 yan Channel :Users  Name");
    CH_EXPECT(h, y, S "322 yan #chan1 1 :");
    CH_EXPECT(h, y, S "323 yan :End of /LIST");
    CH_EXPECT(h, y, S "321 yan Channel :Users  Name");
    CH_EXPECT(h, y, S "322 yan #chan1 1 :");
    CH_EXPECT(h, y, S "323 yan :End of /LIST");
    CH_EXPECT(h, y, S "321 yan Channel :Users  Name");
    CH_EXPECT(h, y, S "322 yan #chan2 2 :");
    CH_EXPECT(h, y, S "323 yan :End of /LIST");
    CH_EXPECT(h, y, S "321 yan Channel :Users  Name");
    CH_EXPECT(h, y, S "323 yan :End of /LIST");
    CH_EXPECT(h, y, S "321 yan Channel :Users  Name");
    CH_EXPECT(h, y, S "322 yan #chan1 1 :");
    CH_EXPECT(h, y, S "322 yan #chan2 2 :");
    CH_EXPECT(h, y, S "323 yan :End of /LIST");
    ch_stop(h);
}

/* WHOWAS lists a nick's departures newest first, up to its count (issue
 * 40, irctest's whowas). */
static void test_whowas_count(void)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    int y = guest(h, "yan");
    for (int i = 2; i <= 3; i++) {
        int z = ch_connect(h);
        char line[80];
        snprintf(line, sizeof line, "NICK zed\r\nUSER ident%d 0 * :Real\r\n", i);
        ch_feed(h, z, line);
        CH_SKIP_TO(h, z, S "422 zed ");
        ch_feed(h, z, "QUIT\r\n");
    }
    ch_discard(h, y);
    ch_feed(h, y, "WHOWAS zed\r\n");
    CH_EXPECT(h, y, S "314 yan zed ident3 yard * :Real");
    CH_EXPECT_PREFIX(h, y, S "312 yan zed yard :");
    CH_EXPECT(h, y, S "314 yan zed ident2 yard * :Real");
    CH_EXPECT_PREFIX(h, y, S "312 yan zed yard :");
    CH_EXPECT(h, y, S "369 yan zed :End of WHOWAS");
    ch_feed(h, y, "WHOWAS zed 1\r\n");
    CH_EXPECT(h, y, S "314 yan zed ident3 yard * :Real");
    CH_EXPECT_PREFIX(h, y, S "312 yan zed yard :");
    CH_EXPECT(h, y, S "369 yan zed :End of WHOWAS");
    ch_feed(h, y, "WHOWAS zed -1\r\n");
    CH_SKIP_TO(h, y, S "314 yan zed ident2 ");
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"who", test_who},
        {"smaller_deviations", test_smaller_deviations},
        {"list_filters", test_list_filters},
        {"whowas_count", test_whowas_count},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
