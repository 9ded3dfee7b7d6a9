/* NAMES and WHO list an account once however many of its connections are in the channel,
 * through the sans-socket harness (chat_harness.h). Moved from
 * tests/integration/test_chat_hardening.py, which checked it against a real server. */
#include <stdio.h>
#include <string.h>

#include "chat_cases.h"

static void test_an_account_is_listed_once(void)
{
    chat_harness_t *h = ch_start(NULL);
    ch_account(h, "u1", "pw-u1");
    ch_account(h, "u2", "pw-u2");
    int conns[3];
    for (int i = 0; i < 3; i++)
        conns[i] = ch_login(h, "u1", "pw-u1", NULL);
    int b = ch_login(h, "u2", "pw-u2", NULL);
    for (int i = 0; i < 3; i++) {
        ch_feed(h, conns[i], "JOIN #d\r\n");
        CH_SKIP_TO(h, conns[i], S "366 ");
    }
    ch_feed(h, b, "JOIN #d\r\n");
    CH_SKIP_TO(h, b, S "366 ");
    ch_discard(h, b);
    ch_feed(h, b, "NAMES #d\r\nWHO #d\r\n");
    /* u1 made #d: its operator, listed once */
    CH_EXPECT(h, b, S "353 u2 = #d :@u1 u2");
    CH_EXPECT(h, b, S "366 u2 #d :End of /NAMES list.");
    CH_EXPECT(h, b, S "352 u2 #d u1 yard yard u1 H@ :0 u1");
    CH_EXPECT(h, b, S "352 u2 #d u2 yard yard u2 H :0 u2");
    CH_EXPECT(h, b, S "315 u2 #d :End of /WHO list.");
    CH_EXPECT_NONE(h, b);
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"an_account_is_listed_once", test_an_account_is_listed_once},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
