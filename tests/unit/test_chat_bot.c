/* IRCv3 bot mode (issue 40), through the sans-socket harness
 * (chat_harness.h): user mode +B (BOT=B in 005), shown by MODE (221),
 * WHOIS (335) and WHO ('B'), and the bot tag on the bot's messages for
 * clients with message-tags (its own echo too), never for the others. */
#include <stdio.h>
#include <string.h>

#include "chat_cases.h"

static void test_bot_mode(void)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    int b = ch_connect(h);
    ch_feed(h, b, "CAP LS 302\r\nCAP REQ :echo-message message-tags\r\nCAP END\r\n"
                  "NICK botnick\r\nUSER bot 0 * :B\r\n");
    CH_SKIP_TO(h, b, S "004 botnick yard 0.1.0 Biow MRbeIiklmnostv beIklov");
    const char *l = CH_SKIP_TO(h, b, S "005 botnick CHANLIMIT");
    ASSERT(strstr(l, " BOT=B "));
    CH_SKIP_TO(h, b, S "422 botnick ");
    int t = guest_caps(h, "tagged", "message-tags");
    int p = guest_caps(h, "plain", NULL);
    ch_feed(h, b, "MODE botnick +B\r\nMODE botnick\r\n");
    CH_EXPECT(h, b, ":botnick!botnick@yard MODE botnick :+B");
    CH_EXPECT(h, b, S "221 botnick +B");
    ch_feed(h, p, "WHOIS botnick\r\n");
    CH_SKIP_TO(h, p, S "335 plain botnick :is a bot");
    ch_feed(h, b, "JOIN #c\r\n");
    ch_feed(h, t, "JOIN #c\r\n");
    ch_feed(h, p, "JOIN #c\r\n");
    ch_discard(h, b);
    ch_discard(h, t);
    ch_discard(h, p);
    ch_feed(h, p, "WHO botnick\r\n");
    CH_EXPECT(h, p, S "352 plain * bot yard yard botnick HB :0 B");
    ch_feed(h, b, "PRIVMSG #c :beep boop\r\nPRIVMSG plain :hi\r\n");
    l = CH_EXPECT_PREFIX(h, b, "@");
    ASSERT(strstr(l, ";bot ") || strstr(l, "@bot;") || strstr(l, "@bot "));
    ASSERT(strstr(l, " :botnick!botnick@yard PRIVMSG #c :beep boop"));
    l = CH_EXPECT_PREFIX(h, t, "@");
    ASSERT(strstr(l, ";bot ") || strstr(l, "@bot;") || strstr(l, "@bot "));
    CH_SKIP_TO(h, p, ":botnick!botnick@yard PRIVMSG #c :beep boop"); /* after WHO's 315 */
    CH_EXPECT(h, p, ":botnick!botnick@yard PRIVMSG plain :hi");
    /* -B: no more tag. */
    ch_discard(h, b);
    ch_feed(h, b, "MODE botnick -B\r\nPRIVMSG #c :human now\r\n");
    CH_EXPECT(h, b, ":botnick!botnick@yard MODE botnick :-B");
    l = CH_EXPECT_PREFIX(h, t, "@");
    ASSERT(!strstr(l, "bot;") && !strstr(l, ";bot ") && !strstr(l, "@bot "));
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"bot_mode", test_bot_mode},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
