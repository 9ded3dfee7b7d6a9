/* The chat's replies line by line, through the sans-socket harness (chat_harness.h):
 * registration and login (PASS, NICK, USER, the welcome and the motd), CAP, PING, the
 * server's name, the command table's answers and bad input. The formats are the ones
 * tests/integration/test_chat*.py expect of the real server. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat_cases.h"

static void test_welcome(void)
{
    chat_harness_t *h = start();
    int a = ch_connect(h);
    CH_EXPECT_NONE(h, a);
    ch_feed(h, a, "PASS pw-alice\r\nNICK alice\r\n");
    CH_EXPECT_NONE(h, a); /* USER is still to come */
    ch_feed(h, a, "USER alice 0 * :Alice A\r\n");
    CH_EXPECT(h, a, S "001 alice :Welcome to the yard chat, alice");
    CH_EXPECT_PREFIX(h, a, S "002 alice :Your host is yard, running Switchyard ");
    CH_EXPECT(h, a, S "003 alice :This server speaks an IRC subset; see docs/chat.md");
    CH_EXPECT_PREFIX(h, a, S "004 alice yard ");
    const char *l = CH_EXPECT_PREFIX(h, a, S "005 alice ");
    ASSERT(strstr(l, " NETWORK=Switchyard "));
    ASSERT(strstr(l, " CASEMAPPING=rfc1459 "));
    ASSERT(strstr(l, " CHANTYPES=#& "));
    ASSERT(strstr(l, " PREFIX=(ov)@+ "));
    ASSERT(strstr(l, " CHANMODES=beI,k,l,MRimnst "));
    ASSERT(strstr(l, " NICKLEN=30 "));
    ASSERT(strstr(l, " :are supported by this server"));
    l = CH_EXPECT_PREFIX(h, a, S "005 alice ");
    ASSERT(strstr(l, " CHANLIMIT=#&:50 "));
    ASSERT(strstr(l, " CHATHISTORY=1000 "));
    ASSERT(strstr(l, " TARGMAX=PRIVMSG:4,NOTICE:4,"));
    ASSERT(strstr(l, " ELIST=MNU "));
    CH_EXPECT(h, a, S "422 alice :MOTD File is missing");
    CH_EXPECT_NONE(h, a);
    /* Registered: a second USER or PASS is 462. */
    ch_feed(h, a, "USER alice 0 * :again\r\nPASS x\r\n");
    CH_EXPECT(h, a, S "462 alice :You may not reregister");
    CH_EXPECT(h, a, S "462 alice :You may not reregister");
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

/* The data directory's motd: a 372 per line (CR LF or LF, blank lines
 * dropped), in the welcome and for MOTD alike. */
static void test_motd(void)
{
    static const char *const files[] = {"motd", "Welcome, \xc3\xa9t\xc3\xa9 \xf0\x9f\x8d\x8a\r\n"
                                                "rules: be kind\n\nbye\n",
                                        NULL};
    chat_harness_t *h = ch_start_files(NULL, files);
    ch_account(h, "alice", "pw-alice");
    int a = ch_connect(h);
    ch_feed(h, a, "PASS pw-alice\r\nNICK alice\r\nUSER alice 0 * :A\r\n");
    for (int round = 0; round < 2; round++) {
        CH_SKIP_TO(h, a, S "375 alice :- yard Message of the day -");
        CH_EXPECT(h, a, S "372 alice :- Welcome, \xc3\xa9t\xc3\xa9 \xf0\x9f\x8d\x8a");
        CH_EXPECT(h, a, S "372 alice :- rules: be kind");
        CH_EXPECT(h, a, S "372 alice :- bye");
        CH_EXPECT(h, a, S "376 alice :End of /MOTD command.");
        CH_EXPECT_NONE(h, a);
        ch_feed(h, a, "MOTD\r\n");
    }
    ch_stop(h);
}

/* TIME reads the wall clock of the effects context (the harness's fake
 * one), not the system's: a day on the fake clock is a day in the reply. */
static void test_time_is_the_effects_clock(void)
{
    static const char *const no_pings[] = {"ping-interval-ms=0", NULL};
    chat_harness_t *h = ch_start(no_pings);
    ch_account(h, "alice", "pw-alice");
    int a = ch_login(h, "alice", "pw-alice", NULL);
    for (int day = 0; day < 2; day++) {
        time_t secs = (time_t)(ch_wall(h) / 1000000000);
        struct tm tm;
        char want[128];
        gmtime_r(&secs, &tm);
        size_t n = (size_t)snprintf(want, sizeof want, S "391 alice yard :");
        strftime(want + n, sizeof want - n, "%Y-%m-%dT%H:%M:%S", &tm);
        ch_feed(h, a, "TIME\r\n");
        const char *l = CH_EXPECT_PREFIX(h, a, want);
        ASSERT_EQ(strlen(l), strlen(want) + 5); /* ".mmmZ" */
        CH_EXPECT_NONE(h, a);
        ch_advance(h, 86400 * (uint64_t)1000000000);
    }
    ASSERT(!ch_closed(h, a));
    ch_stop(h);
}

static void test_registration_errors(void)
{
    chat_harness_t *h = start();
    int c = ch_connect(h);
    ch_feed(h, c, "JOIN #x\r\nFOO bar\r\nNICK\r\n");
    CH_EXPECT(h, c, S "451 * JOIN :You have not registered");
    CH_EXPECT(h, c, S "451 * FOO :You have not registered");
    CH_EXPECT(h, c, S "431 * :No nickname given");
    ch_feed(h, c, "USER a\r\nNICK 9lives\r\n");
    CH_EXPECT(h, c, S "461 * USER :Not enough parameters");
    CH_EXPECT(h, c, S "432 * 9lives :Erroneous nickname");
    CH_EXPECT_NONE(h, c);
    /* An account's nick in use by a logged-in client is 433 for a guest. */
    ch_stop(h);

    const char *guests[] = {"guests", NULL};
    h = ch_start(guests);
    ch_account(h, "ana", "pw-ana");
    int z = ch_connect(h);
    ch_feed(h, z, "NICK ANA\r\nUSER zed 0 * :Zed\r\n");
    CH_EXPECT_PREFIX(h, z, S "433 * ANA :Nickname is reserved for an account: log in");
    CH_EXPECT_NONE(h, z);
    ch_feed(h, z, "NICK zed\r\n");
    CH_SKIP_TO(h, z, S "001 zed ");
    int y = ch_connect(h);
    ch_feed(h, y, "NICK Zed\r\nUSER y 0 * :Y\r\n");
    CH_EXPECT(h, y, S "433 * Zed :Nickname is already in use");
    CH_EXPECT_NONE(h, y);
    ch_stop(h);
}

static void test_bad_password(void)
{
    chat_harness_t *h = start();
    int c = ch_connect(h);
    ch_feed(h, c, "PASS wrong\r\nNICK alice\r\nUSER alice 0 * :A\r\n");
    CH_EXPECT_NONE(h, c); /* the answer to a failed check is delayed */
    ASSERT(!ch_closed(h, c));
    ASSERT(ch_next_wake(h) > ch_now(h));
    ch_advance(h, ch_next_wake(h) - ch_now(h));
    CH_EXPECT(h, c, S "464 alice :Password incorrect");
    CH_EXPECT(h, c, "ERROR :Closing Link: password incorrect");
    ASSERT(ch_closed(h, c));
    ch_stop(h);
}

static void test_cap(void)
{
    chat_harness_t *h = start();
    int c = ch_connect(h);
    ch_feed(h, c, "CAP LS 302\r\n");
    CH_EXPECT(h, c, S "CAP * LS :account-notify account-tag away-notify batch cap-notify "
                      "draft/chathistory draft/event-playback draft/read-marker echo-message "
                      "extended-join extended-monitor labeled-response message-tags multi-prefix "
                      "sasl=PLAIN server-time setname userhost-in-names");
    ch_feed(h, c, "CAP REQ :echo-message server-time\r\nCAP REQ :away-notify no-such-cap\r\n");
    CH_EXPECT(h, c, S "CAP * ACK :echo-message server-time");
    CH_EXPECT(h, c, S "CAP * NAK :away-notify no-such-cap");
    /* Registration waits for CAP END. */
    ch_feed(h, c, "PASS pw-alice\r\nNICK alice\r\nUSER alice 0 * :A\r\n");
    CH_EXPECT_NONE(h, c);
    ch_feed(h, c, "CAP LIST\r\nCAP END\r\n");
    CH_EXPECT(h, c, S "CAP alice LIST :echo-message server-time");
    CH_EXPECT(h, c, S "001 alice :Welcome to the yard chat, alice");
    ch_stop(h);
}

static void test_ping(void)
{
    chat_harness_t *h = start();
    int a = ch_login(h, "alice", "pw-alice", NULL);
    ch_feed(h, a, "PING :still-here\r\nPONG :yard\r\n");
    CH_EXPECT(h, a, S "PONG yard :still-here");
    CH_EXPECT_NONE(h, a); /* a PONG is not answered */
    /* A silent client is PINGed after --ping-interval-ms (120 s). */
    ch_advance(h, 120 * (uint64_t)1000000000);
    CH_EXPECT(h, a, "PING :yard");
    ch_stop(h);
}

static void test_command_table(void)
{
    chat_harness_t *h = start();
    int a = ch_login(h, "alice", "pw-alice", NULL);
    ch_feed(h, a, "FROB\r\nfrob x\r\nJOIN\r\nPRIVMSG\r\nWHOIS\r\nNAMES\r\nKICK #x\r\n");
    CH_EXPECT(h, a, S "421 alice FROB :Unknown command");
    CH_EXPECT(h, a, S "421 alice FROB :Unknown command");
    CH_EXPECT(h, a, S "461 alice JOIN :Not enough parameters");
    CH_EXPECT(h, a, S "411 alice :No recipient given (PRIVMSG)");
    CH_EXPECT(h, a, S "431 alice :No nickname given");
    CH_EXPECT(h, a, S "366 alice * :End of /NAMES list.");
    CH_EXPECT(h, a, S "461 alice KICK :Not enough parameters");
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

static void test_bad_input(void)
{
    chat_harness_t *h = start();
    int a = ch_login(h, "alice", "pw-alice", NULL);
    char big[1200];
    memset(big, 'x', sizeof big);
    memcpy(big, "PRIVMSG #x :", 12);
    ch_feed_n(h, a, big, sizeof big);
    ch_feed(h, a, "still the long line\r\nPING :after-long\r\n");
    CH_EXPECT(h, a, S "417 alice :Input line was too long");
    CH_EXPECT(h, a, S "PONG yard :after-long");
    static const char nul[] = "PING :a\0b\r\nPING :after-nul\r\n";
    ch_feed_n(h, a, nul, sizeof nul - 1);
    CH_EXPECT(h, a, S "421 alice * :Line contains a NUL byte");
    CH_EXPECT(h, a, S "PONG yard :after-nul");
    /* A line in pieces is answered once it is whole. */
    ch_feed(h, a, "PI");
    ch_feed(h, a, "NG :pie");
    CH_EXPECT_NONE(h, a);
    ch_feed(h, a, "ces\n");
    CH_EXPECT(h, a, S "PONG yard :pieces");
    /* QUIT closes with an ERROR line. */
    ch_feed(h, a, "QUIT :done\r\nPING :never\r\n");
    CH_EXPECT_PREFIX(h, a, "ERROR :Closing Link: ");
    CH_EXPECT_NONE(h, a);
    ASSERT(ch_closed(h, a));
    ch_stop(h);
}

/* USER's user name and realname are kept and shown by WHOIS (311) and
 * WHOWAS (314); an empty realname is 461 (issue 40). */
static void test_user_fields(void)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    int e = ch_connect(h);
    ch_feed(h, e, "NICK zed\r\nUSER u 0 * :\r\n");
    CH_EXPECT(h, e, S "461 zed USER :Not enough parameters");
    CH_EXPECT_NONE(h, e);
    ch_feed(h, e, "USER zuser 0 * :Zed Real\r\n");
    CH_SKIP_TO(h, e, S "422 zed ");
    int y = guest(h, "yan");
    ch_feed(h, y, "WHOIS zed\r\n");
    CH_EXPECT(h, y, S "311 yan zed zuser yard * :Zed Real");
    ch_discard(h, y);
    ch_feed(h, e, "QUIT\r\n");
    ch_feed(h, y, "WHOWAS zed\r\n");
    CH_EXPECT(h, y, S "314 yan zed zuser yard * :Zed Real");
    ch_stop(h);
}

/* --server-name names the server in 002, 004, PONG, TIME, VERSION and
 * WHOIS's 312 (issue 40); the numerics' source stays "yard". */
static void test_server_name(void)
{
    const char *flags[] = {"server-name=My.Little.Server", NULL};
    chat_harness_t *h = ch_start(flags);
    ch_account(h, "alice", "pw-alice");
    int a = ch_connect(h);
    ch_feed(h, a, "PASS pw-alice\r\nNICK alice\r\nUSER alice 0 * :Alice\r\n");
    CH_SKIP_TO(h, a, S "002 alice :Your host is My.Little.Server, running Switchyard ");
    CH_SKIP_TO(h, a, S "004 alice My.Little.Server ");
    ch_discard(h, a);
    ch_feed(h, a, "PING :tok\r\nTIME\r\nVERSION\r\nWHOIS alice\r\n");
    CH_EXPECT(h, a, S "PONG My.Little.Server :tok");
    CH_EXPECT_PREFIX(h, a, S "391 alice My.Little.Server :");
    CH_EXPECT_PREFIX(h, a, S "351 alice switchyard-chat My.Little.Server :");
    CH_SKIP_TO(h, a, S "312 alice alice My.Little.Server :");
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"welcome", test_welcome},
        {"motd", test_motd},
        {"time_is_the_effects_clock", test_time_is_the_effects_clock},
        {"registration_errors", test_registration_errors},
        {"bad_password", test_bad_password},
        {"cap", test_cap},
        {"ping", test_ping},
        {"command_table", test_command_table},
        {"user_fields", test_user_fields},
        {"server_name", test_server_name},
        {"bad_input", test_bad_input},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
