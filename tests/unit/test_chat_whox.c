/* WHOX (IRCv3's WHO mask %FIELDS[,TOKEN], announced as WHOX in 005; issue
 * 40, irctest's who.testWhox*), through the sans-socket harness
 * (chat_harness.h): 354 lines carry the fields asked for in their fixed
 * order (tcuihsnfdlaor) whatever order they were asked in, the realname
 * last as the trailing parameter, the token only with 't', an account's
 * name or 0 for a guest; plain WHO is unchanged. */
#include <stdio.h>
#include <string.h>

#include "chat_harness.h"
#include "test.h"

#define S ":yard "

static chat_harness_t *start(int *asker, int *guest, int *acct)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    ch_account(h, "Alice", "pw-alice");
    *acct = ch_login(h, "Alice", "pw-alice", NULL);
    *guest = ch_connect(h);
    ch_feed(h, *guest, "NICK coolNick\r\nUSER myusernam 0 * :My UniqueReal Name\r\n");
    CH_SKIP_TO(h, *guest, S "422 coolNick ");
    *asker = ch_connect(h);
    ch_feed(h, *asker, "NICK other\r\nUSER o 0 * :O\r\n");
    const char *l = CH_SKIP_TO(h, *asker, S "005 other CHANLIMIT");
    ASSERT(strstr(l, " WHOX "));
    CH_SKIP_TO(h, *asker, S "422 other ");
    return h;
}

static void test_whox_fields(void)
{
    int o, g, a;
    chat_harness_t *h = start(&o, &g, &a);
    const char *end = S "315 other coolNick :End of /WHO list.";
    ch_feed(h, o, "WHO coolNick %tcuihsnfdlaor,123\r\n");
    CH_EXPECT(h, o, S "354 other 123 * myusernam 255.255.255.255 yard yard coolNick H 0 0 0 n/a "
                      ":My UniqueReal Name");
    CH_EXPECT(h, o, end);
    /* Asked in reverse: the same order out. */
    ch_feed(h, o, "WHO coolNick %roaldfnshiuct,123\r\n");
    CH_EXPECT(h, o, S "354 other 123 * myusernam 255.255.255.255 yard yard coolNick H 0 0 0 n/a "
                      ":My UniqueReal Name");
    CH_EXPECT(h, o, end);
    ch_feed(h, o, "WHO coolNick %tn,321\r\nWHO coolNick %n\r\nWHO coolNick %t\r\n");
    CH_EXPECT(h, o, S "354 other 321 coolNick");
    CH_EXPECT(h, o, end);
    CH_EXPECT(h, o, S "354 other coolNick");
    CH_EXPECT(h, o, end);
    CH_EXPECT(h, o, S "354 other 0"); /* no token given */
    CH_EXPECT(h, o, end);
    /* The account: its name as written; a guest's is 0. */
    ch_feed(h, o, "WHO alice %na\r\nWHO coolNick %na\r\n");
    CH_EXPECT(h, o, S "354 other Alice Alice");
    CH_EXPECT(h, o, S "315 other alice :End of /WHO list.");
    CH_EXPECT(h, o, S "354 other coolNick 0");
    CH_EXPECT(h, o, end);
    /* In a channel: its name, and the rank in the flags. */
    ch_feed(h, g, "JOIN #w\r\n");
    ch_feed(h, o, "WHO #w %cnf\r\nWHO coolNick\r\n");
    CH_EXPECT(h, o, S "354 other #w coolNick H@");
    CH_EXPECT(h, o, S "315 other #w :End of /WHO list.");
    CH_EXPECT(h, o, S "352 other * myusernam yard yard coolNick H :0 My UniqueReal Name");
    CH_EXPECT(h, o, end);
    CH_EXPECT_NONE(h, o);
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"whox_fields", test_whox_fields},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
