/* IRCv3 setname through the chat's sans-socket harness (chat_harness.h):
 * SETNAME changes the realname WHOIS shows, the sender hears it at once
 * and the members it shares a channel with hear it through the log, only
 * those with the capability; an empty realname is refused, a long one cut
 * as USER's is. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_harness.h"
#include "test.h"

#define S ":yard "

static void test_setname(void)
{
    chat_harness_t *h = ch_start(NULL);
    ch_account(h, "alice", "pw-alice");
    ch_account(h, "bob", "pw-bob");
    ch_account(h, "cy", "pw-cy");
    int a = ch_login(h, "alice", "pw-alice", "setname");
    int b = ch_login(h, "bob", "pw-bob", "setname");
    int c = ch_login(h, "cy", "pw-cy", NULL);
    int lone = ch_login(h, "bob", "pw-bob", "setname"); /* bob's other device, in no channel */
    ch_feed(h, a, "JOIN #s\r\n");
    ch_feed(h, b, "JOIN #s\r\n");
    ch_feed(h, c, "JOIN #s\r\n");
    ch_discard(h, a);
    ch_discard(h, b);
    ch_discard(h, c);
    ch_discard(h, lone);
    ch_feed(h, a, "SETNAME :Alice in Chains\r\n");
    CH_EXPECT(h, a, ":alice!alice@yard SETNAME :Alice in Chains");
    CH_EXPECT_NONE(h, a);
    CH_EXPECT(h, b, ":alice!alice@yard SETNAME :Alice in Chains");
    CH_EXPECT_NONE(h, b);
    CH_EXPECT_NONE(h, c);    /* no capability */
    CH_EXPECT_NONE(h, lone); /* shares no channel with alice */
    ch_feed(h, c, "WHOIS alice\r\n");
    CH_EXPECT(h, c, S "311 cy alice alice yard * :Alice in Chains");
    ch_discard(h, c);
    /* Refused: empty. Cut: past 100 bytes, as USER's realname. */
    ch_feed(h, a, "SETNAME :\r\n");
    CH_EXPECT(h, a, S "FAIL SETNAME INVALID_REALNAME :The realname may not be empty");
    ch_feed(h, a, "SETNAME\r\n");
    CH_EXPECT(h, a, S "461 alice SETNAME :Not enough parameters");
    char line[400], want[101];
    memset(want, 'r', 100);
    want[100] = 0;
    snprintf(line, sizeof line, "SETNAME :%s%s\r\n", want, "tail");
    ch_feed(h, a, line);
    snprintf(line, sizeof line, ":alice!alice@yard SETNAME :%s", want);
    CH_EXPECT(h, a, line);
    CH_EXPECT_NONE(h, a);
    CH_EXPECT(h, b, line);
    /* Without the capability: made, and told to those with it, not to it. */
    ch_feed(h, c, "SETNAME :Cy Twombly\r\nWHOIS cy\r\n");
    CH_EXPECT(h, c, S "311 cy cy cy yard * :Cy Twombly");
    ch_discard(h, c);
    CH_EXPECT(h, a, ":cy!cy@yard SETNAME :Cy Twombly");
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

/* Before registration: 451, as for any command that needs it. */
static void test_setname_unregistered(void)
{
    chat_harness_t *h = ch_start(NULL);
    int a = ch_connect(h);
    ch_feed(h, a, "SETNAME :x\r\n");
    CH_EXPECT(h, a, S "451 * SETNAME :You have not registered");
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"setname", test_setname},
        {"setname_unregistered", test_setname_unregistered},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
