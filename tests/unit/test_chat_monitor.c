/* IRCv3 MONITOR (apps/chat/monitor.c, issue 40), through the sans-socket
 * harness (chat_harness.h): the status of nicks added (730/731), told
 * again when they come and go (an account's first and last connection, a
 * guest's nick change), the list (732/733), removing and clearing, the
 * bound (734) and MONITOR=N in 005; extended-monitor: the AWAY and
 * SETNAME of a monitored nick that shares no channel with the watcher,
 * told once to one that also shares a channel with it. */
#include <stdio.h>
#include <string.h>

#include "chat_cases.h"


static const char *const guests[] = {"guests", NULL};

static void test_monitor_online_offline(void)
{
    chat_harness_t *h = ch_start(guests);
    ch_account(h, "bob", "pw-bob");
    int f = ch_connect(h);
    ch_feed(h, f, "NICK foo\r\nUSER u 0 * :F\r\n");
    const char *l = CH_SKIP_TO(h, f, S "005 foo CHANLIMIT");
    ASSERT(strstr(l, " MONITOR=100 "));
    ch_discard(h, f);
    ch_feed(h, f, "MONITOR + bar,BOB,*!u@host\r\n");
    CH_EXPECT(h, f, S "731 foo :bar,BOB"); /* a mask is no nick: left out */
    CH_EXPECT_NONE(h, f);
    int b = guest(h, "bar");
    CH_EXPECT(h, f, S "730 foo :bar!ubar@yard");
    /* An account: online with its first connection, offline with its last. */
    int b1 = ch_login(h, "bob", "pw-bob", NULL);
    CH_EXPECT(h, f, S "730 foo :bob!bob@yard");
    int b2 = ch_login(h, "bob", "pw-bob", NULL);
    CH_EXPECT_NONE(h, f);
    ch_feed(h, b1, "QUIT :bye\r\n");
    CH_EXPECT_NONE(h, f);
    ch_feed(h, b2, "QUIT :bye\r\n");
    CH_EXPECT(h, f, S "731 foo :bob");
    /* A guest's nick change: the old nick goes, the new one is not watched. */
    ch_feed(h, b, "NICK baz\r\n");
    CH_EXPECT(h, f, S "731 foo :bar");
    ch_feed(h, f, "MONITOR S\r\nMONITOR L\r\n");
    CH_EXPECT(h, f, S "731 foo :bar,bob");
    CH_EXPECT(h, f, S "732 foo :bar,bob");
    CH_EXPECT(h, f, S "733 foo :End of MONITOR list");
    ch_feed(h, f, "MONITOR - bar\r\nMONITOR + baz\r\n");
    CH_EXPECT(h, f, S "730 foo :baz!ubar@yard");
    ch_feed(h, b, "QUIT\r\n");
    CH_EXPECT(h, f, S "731 foo :baz");
    ch_feed(h, f, "MONITOR C\r\nMONITOR L\r\n");
    CH_EXPECT(h, f, S "733 foo :End of MONITOR list");
    int b3 = guest(h, "baz");
    (void)b3;
    CH_EXPECT_NONE(h, f);
    ch_feed(h, f, "MONITOR\r\nMONITOR +\r\nMONITOR x\r\n");
    CH_EXPECT(h, f, S "461 foo MONITOR :Not enough parameters");
    CH_EXPECT(h, f, S "461 foo MONITOR :Not enough parameters");
    CH_EXPECT(h, f, S "461 foo MONITOR :Give +, -, C, L or S");
    ch_stop(h);
}

/* Two watchers, one removes its nick: only the other is told. */
static void test_monitor_two_watchers(void)
{
    chat_harness_t *h = ch_start(guests);
    int f = guest(h, "foo");
    int g = guest(h, "goo");
    ch_feed(h, f, "MONITOR + qux\r\n");
    ch_feed(h, g, "MONITOR + qux\r\nMONITOR - qux\r\n");
    ch_discard(h, f);
    ch_discard(h, g);
    guest(h, "qux");
    CH_EXPECT(h, f, S "730 foo :qux!uqux@yard");
    CH_EXPECT_NONE(h, g);
    ch_stop(h);
}

/* The list holds 100 nicks; past that 734 names the rest. */
static void test_monitor_bound(void)
{
    chat_harness_t *h = ch_start(guests);
    int f = guest(h, "foo");
    char line[2048] = "MONITOR + ";
    for (int i = 0; i < 100; i++)
        snprintf(line + strlen(line), sizeof line - strlen(line), "%sn%d", i ? "," : "", i);
    strcat(line, "\r\n");
    ch_feed(h, f, line);
    const char *l = CH_EXPECT_PREFIX(h, f, S "731 foo :n0,n1,");
    ASSERT(strstr(l, ",n99") && strlen(l) < 512);
    CH_EXPECT_NONE(h, f);
    ch_feed(h, f, "MONITOR + n5,x1,x2\r\n");
    CH_EXPECT(h, f, S "734 foo 100 x1,x2 :Monitor list is full.");
    CH_EXPECT(h, f, S "731 foo :n5");
    CH_EXPECT_NONE(h, f);
    ch_stop(h);
}

/* A watcher with extended-monitor (and away-notify, setname), one
 * without it, and the watched guest bar. */
static void test_extended_monitor(void)
{
    chat_harness_t *h = ch_start(guests);
    int f = ch_connect(h);
    ch_feed(h, f, "CAP LS 302\r\nCAP REQ :extended-monitor away-notify setname\r\nCAP END\r\n"
                  "NICK foo\r\nUSER u 0 * :F\r\nMONITOR + bar\r\n");
    CH_SKIP_TO(h, f, S "731 foo :bar");
    int p = ch_connect(h);
    ch_feed(h, p, "CAP LS 302\r\nCAP REQ :away-notify setname\r\nCAP END\r\n"
                  "NICK plain\r\nUSER u 0 * :P\r\nMONITOR + bar\r\n");
    CH_SKIP_TO(h, p, S "731 plain :bar");
    int b = guest(h, "bar");
    CH_EXPECT(h, f, S "730 foo :bar!ubar@yard");
    CH_EXPECT(h, p, S "730 plain :bar!ubar@yard");
    ch_feed(h, b, "AWAY :afk\r\n");
    CH_EXPECT(h, f, ":bar!bar@yard AWAY :afk");
    CH_EXPECT_NONE(h, f);
    ch_feed(h, b, "AWAY\r\nSETNAME :new name\r\n");
    CH_EXPECT(h, f, ":bar!bar@yard AWAY");
    CH_EXPECT(h, f, ":bar!bar@yard SETNAME :new name");
    CH_EXPECT_NONE(h, f);
    CH_EXPECT_NONE(h, p); /* no extended-monitor: nothing */
    /* Sharing a channel too: told once. */
    ch_feed(h, f, "JOIN #m\r\n");
    ch_feed(h, b, "JOIN #m\r\n");
    ch_discard(h, f);
    ch_feed(h, b, "AWAY :lunch\r\n");
    CH_EXPECT(h, f, ":bar!bar@yard AWAY :lunch");
    CH_EXPECT_NONE(h, f);
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"monitor_online_offline", test_monitor_online_offline},
        {"monitor_two_watchers", test_monitor_two_watchers},
        {"monitor_bound", test_monitor_bound},
        {"extended_monitor", test_extended_monitor},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
