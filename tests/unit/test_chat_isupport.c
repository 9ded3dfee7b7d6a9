/* What the chat says about itself and the 005 tokens it keeps to, through
 * the sans-socket harness (chat_harness.h): INFO (371, 374, 402), the
 * ISUPPORT tokens irctest looks for, and STATUSMSG (a message to "@#chan"
 * reaches the channel's operators only, "+#chan" its voiced too; issue 40). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_cases.h"

/* INFO: 371 lines, then 374; a target that names this server (or a mask
 * of its name) is the same, any other is 402. */
static void test_info(void)
{
    const char *flags[] = {"guests", "server-name=My.Little.Server", NULL};
    chat_harness_t *h = ch_start(flags);
    int g = guest(h, "zed");
    ch_feed(h, g, "INFO\r\n");
    CH_EXPECT(h, g, S "371 zed :Switchyard chat 0.1.0, on server My.Little.Server");
    int infos = 1;
    const char *l;
    while ((l = ch_line(h, g)) && !strncmp(l, S "371 zed :", strlen(S "371 zed :")))
        infos++;
    ASSERT(l != NULL);
    ASSERT(!strcmp(l, S "374 zed :End of /INFO list"));
    ASSERT_GE(infos, 2);
    CH_EXPECT_NONE(h, g);
    ch_feed(h, g, "INFO my.little.server\r\n");
    CH_SKIP_TO(h, g, S "374 zed :End of /INFO list");
    ch_feed(h, g, "INFO *Little*\r\n");
    CH_SKIP_TO(h, g, S "374 zed :End of /INFO list");
    ch_feed(h, g, "INFO invalid.server.example\r\n");
    CH_EXPECT(h, g, S "402 zed invalid.server.example :No such server");
    CH_EXPECT_NONE(h, g);
    ch_stop(h);
}

/* Every token irctest reads is in 005, with the value the chat keeps to;
 * UTF8ONLY is not (non-UTF-8 text is relayed as bytes). */
static void test_isupport_tokens(void)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    int g = ch_connect(h);
    ch_feed(h, g, "NICK zed\r\nUSER u 0 * :Zed\r\n");
    char all[2048] = "";
    for (const char *l; (l = ch_line(h, g)) && !strstr(l, " 422 ");)
        if (!strncmp(l, S "005 ", strlen(S "005 ")))
            snprintf(all + strlen(all), sizeof all - strlen(all), "%s ", l);
    static const char *const want[] = {
        " CHANTYPES=#& ", " CHANMODES=beI,k,l,MRimnst ", " PREFIX=(ov)@+ ", " NICKLEN=30 ",
        " CHANNELLEN=50 ", " TOPICLEN=390 ", " AWAYLEN=200 ", " KICKLEN=200 ", " MODES=4 ",
        " TARGMAX=PRIVMSG:4,NOTICE:4,WHOIS:4,USERHOST:5,KICK:4 ", " ELIST=MNU ",
        " STATUSMSG=@+ ", " EXCEPTS ", " INVEX ", " MAXLIST=beI:32 ", " WHOX ",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(all, want[i]))
            TEST_FAIL("005 lacks %s: %s", want[i], all);
    ASSERT(strstr(all, "UTF8ONLY") == NULL);
    ch_stop(h);
}

/* "@#g" reaches the operator (zed, the creator) and not the others;
 * "+#g" reaches the voiced and the operators; the sender, without
 * echo-message, is sent nothing. A non-member of a +n channel is 404, as
 * for "#g". */
static void test_statusmsg(void)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    int op = guest(h, "zed");
    int joe = guest(h, "joe");
    int vo = guest(h, "vic");
    int out = guest(h, "oscar");
    ch_feed(h, op, "JOIN #g\r\n");
    ch_feed(h, joe, "JOIN #g\r\n");
    ch_feed(h, vo, "JOIN #g\r\n");
    ch_feed(h, op, "MODE #g +v vic\r\n");
    ch_discard(h, op);
    ch_discard(h, joe);
    ch_discard(h, vo);
    ch_feed(h, joe, "PRIVMSG @#g :for operators\r\n");
    CH_EXPECT_NONE(h, joe);
    CH_EXPECT(h, op, ":joe!joe@yard PRIVMSG @#g :for operators");
    CH_EXPECT_NONE(h, vo);
    ch_feed(h, joe, "NOTICE +#g :for the voiced\r\n");
    CH_EXPECT_NONE(h, joe);
    CH_EXPECT(h, op, ":joe!joe@yard NOTICE +#g :for the voiced");
    CH_EXPECT(h, vo, ":joe!joe@yard NOTICE +#g :for the voiced");
    ch_feed(h, vo, "PRIVMSG #g :everyone\r\n");
    CH_EXPECT(h, op, ":vic!vic@yard PRIVMSG #g :everyone");
    CH_EXPECT(h, joe, ":vic!vic@yard PRIVMSG #g :everyone");
    CH_EXPECT_NONE(h, op);
    CH_EXPECT_NONE(h, joe);
    ch_discard(h, out);
    ch_feed(h, out, "PRIVMSG @#g :from outside\r\n");
    CH_EXPECT(h, out, S "404 oscar #g :Cannot send to channel (+n: join it first)");
    CH_EXPECT_NONE(h, op);
    ch_feed(h, out, "PRIVMSG @#nowhere :x\r\n");
    CH_EXPECT(h, out, S "403 oscar #nowhere :No such channel");
    /* An operator's own "@#g" is not sent back to it (irctest's
     * statusmsg.testStatusmsgFromOp), without echo-message. */
    ch_discard(h, joe);
    ch_feed(h, op, "PRIVMSG @#g :among us\r\n");
    CH_EXPECT_NONE(h, op);
    CH_EXPECT_NONE(h, joe);
    ch_stop(h);
}

/* A status message is not the channel's history: CHATHISTORY of #g leaves
 * it out for its operator too, and TARGETS does not list "@#g". */
static void test_statusmsg_not_history(void)
{
    chat_harness_t *h = ch_start(NULL);
    ch_account(h, "alice", "pw-alice");
    ch_account(h, "bob", "pw-bob");
    int a = ch_login(h, "alice", "pw-alice", NULL);
    int b = ch_login(h, "bob", "pw-bob", NULL);
    ch_feed(h, a, "JOIN #g\r\n");
    ch_feed(h, b, "JOIN #g\r\n");
    ch_feed(h, b, "PRIVMSG #g :public\r\nPRIVMSG @#g :to ops\r\n");
    CH_SKIP_TO(h, a, ":bob!bob@yard PRIVMSG @#g :to ops");
    ch_discard(h, a);
    ch_discard(h, b);
    ch_feed(h, a, "CHATHISTORY LATEST #g * 10\r\n");
    char *got = ch_take_all(h, a);
    if (!strstr(got, "PRIVMSG #g :public") || strstr(got, "to ops"))
        TEST_FAIL("CHATHISTORY of #g: %s", got);
    free(got);
    ch_feed(h, b, "CHATHISTORY TARGETS timestamp=2000-01-01T00:00:00.000Z "
                  "timestamp=2100-01-01T00:00:00.000Z 10\r\n");
    got = ch_take_all(h, b);
    if (!strstr(got, "TARGETS #g ") || strstr(got, "@#g"))
        TEST_FAIL("CHATHISTORY TARGETS: %s", got);
    free(got);
    ch_stop(h);
}

int main(void)
{
    test_info();
    test_isupport_tokens();
    test_statusmsg();
    test_statusmsg_not_history();
    puts("ok");
    return 0;
}
