/* CHATHISTORY's references as irctest's chathistory module reads them,
 * through the chat's sans-socket harness (chat_harness.h): a timestamp is
 * the millisecond a client sees in server-time, so the message shown at T
 * is not "after T", nor between T and another time; the last times the
 * log can hold (2262) are references; and a private message to oneself is
 * delivered without echo-message too. */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat_harness.h"
#include "test.h"

#define S ":yard "

static long long wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* alice says "m1", "m2", "m3" in #h, each in a millisecond of its own (the
 * log's clock is the real one): their time tags in t[0..2]. */
static chat_harness_t *three_messages(int *a, char t[3][32])
{
    chat_harness_t *h = ch_start(NULL);
    ch_account(h, "alice", "pw-alice");
    *a = ch_login(h, "alice", "pw-alice", "server-time echo-message");
    ch_feed(h, *a, "JOIN #h\r\n");
    ch_discard(h, *a);
    for (int i = 0; i < 3; i++) {
        long long was = wall_ms();
        while (wall_ms() == was) /* the next millisecond (a condition, not a pause) */
            ;
        char line[32];
        snprintf(line, sizeof line, "PRIVMSG #h :m%d\r\n", i + 1);
        ch_feed(h, *a, line);
        const char *l = CH_EXPECT_PREFIX(h, *a, "@time=");
        ASSERT_EQ(sscanf(l, "@time=%31s", t[i]), 1);
    }
    return h;
}

/* The history lines of the answer: "m1 m2 " and so on. */
static void expect_history(chat_harness_t *h, int a, const char *want)
{
    char got[64] = "";
    const char *l;
    while ((l = ch_line(h, a)) != NULL) {
        const char *m = strstr(l, " PRIVMSG #h :");
        ASSERT(m);
        strncat(got, m + 13, sizeof got - strlen(got) - 2);
        strcat(got, " ");
    }
    ASSERT_STR_EQ(got, want);
}

static void test_timestamps_are_milliseconds(void)
{
    int a;
    char t[3][32], line[160];
    chat_harness_t *h = three_messages(&a, t);
    snprintf(line, sizeof line, "CHATHISTORY AFTER #h timestamp=%s 10\r\n", t[0]);
    ch_feed(h, a, line);
    expect_history(h, a, "m2 m3 ");
    snprintf(line, sizeof line, "CHATHISTORY LATEST #h timestamp=%s 10\r\n", t[0]);
    ch_feed(h, a, line);
    expect_history(h, a, "m2 m3 ");
    snprintf(line, sizeof line, "CHATHISTORY BEFORE #h timestamp=%s 10\r\n", t[2]);
    ch_feed(h, a, line);
    expect_history(h, a, "m1 m2 ");
    snprintf(line, sizeof line, "CHATHISTORY BETWEEN #h timestamp=%s timestamp=%s 10\r\n", t[0],
             t[2]);
    ch_feed(h, a, line);
    expect_history(h, a, "m2 ");
    snprintf(line, sizeof line, "CHATHISTORY BETWEEN #h timestamp=%s timestamp=%s 10\r\n", t[2],
             t[0]);
    ch_feed(h, a, line);
    expect_history(h, a, "m2 ");
    snprintf(line, sizeof line, "CHATHISTORY AROUND #h timestamp=%s 3\r\n", t[1]);
    ch_feed(h, a, line);
    expect_history(h, a, "m1 m2 m3 ");
    ch_stop(h);
}

/* 2262-01-01 is within the log's times: a reference (irctest's TARGETS
 * "after all"); past 2262-04-11 is not. */
static void test_last_year(void)
{
    int a;
    char t[3][32];
    chat_harness_t *h = three_messages(&a, t);
    ch_feed(h, a, "CHATHISTORY TARGETS timestamp=2020-01-01T00:00:00.000Z "
                  "timestamp=2262-01-01T00:00:00.000Z 10\r\n");
    CH_EXPECT_PREFIX(h, a, S "CHATHISTORY TARGETS #h ");
    CH_EXPECT_NONE(h, a);
    ch_feed(h, a, "CHATHISTORY BEFORE #h timestamp=2262-01-01T00:00:00.000Z 1\r\n");
    expect_history(h, a, "m3 ");
    ch_feed(h, a, "CHATHISTORY BEFORE #h timestamp=2262-04-12T00:00:00.000Z 1\r\n");
    CH_EXPECT_PREFIX(h, a, S "FAIL CHATHISTORY INVALID_PARAMS BEFORE ");
    ch_stop(h);
}

/* The next line lists target at time; returns nothing. */
static void expect_target(chat_harness_t *h, int a, const char *target, const char *time)
{
    char want[128];
    snprintf(want, sizeof want, S "CHATHISTORY TARGETS %s %s", target, time);
    CH_EXPECT(h, a, want);
}

/* TARGETS lists the conversations whose latest message is inside the
 * window (both ends excluded, to the millisecond), oldest first, the first
 * limit of them: one with a later message is not listed, though it has
 * some in the window. */
static void test_targets(void)
{
    int a;
    char t[3][32], line[200];
    chat_harness_t *h = three_messages(&a, t);
    ch_feed(h, a, "JOIN #g\r\n");
    ch_discard(h, a);
    long long was = wall_ms();
    while (wall_ms() == was)
        ;
    ch_feed(h, a, "PRIVMSG #g :g1\r\n");
    char g[32];
    ASSERT_EQ(sscanf(CH_EXPECT_PREFIX(h, a, "@time="), "@time=%31s", g), 1);
    const char *all = "timestamp=2020-01-01T00:00:00.000Z timestamp=2262-01-01T00:00:00.000Z";
    snprintf(line, sizeof line, "CHATHISTORY TARGETS %s 10\r\nCHATHISTORY TARGETS %s 1\r\n", all,
             all);
    ch_feed(h, a, line);
    expect_target(h, a, "#h", t[2]);
    expect_target(h, a, "#g", g);
    expect_target(h, a, "#h", t[2]); /* the limit: the first of the listing */
    CH_EXPECT_NONE(h, a);
    /* #h's latest (m3) is at t[2]: outside a window that ends there. */
    snprintf(line, sizeof line, "CHATHISTORY TARGETS timestamp=2020-01-01T00:00:00.000Z "
                                "timestamp=%s 10\r\n", t[2]);
    ch_feed(h, a, line);
    CH_EXPECT_NONE(h, a);
    /* A window that starts at t[2]: #h's latest is at its start, excluded. */
    snprintf(line, sizeof line, "CHATHISTORY TARGETS timestamp=%s "
                                "timestamp=2262-01-01T00:00:00.000Z 10\r\n", t[2]);
    ch_feed(h, a, line);
    expect_target(h, a, "#g", g);
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

/* A guest's private conversation is the guest's: an account made later
 * with its nick does not get it back (irctest's testChathistoryDMs), while
 * the guest's partner does; the guest hears messages to it by its nick. */
static void test_guest_conversation_is_not_an_account_s(void)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    ch_account(h, "alice", "pw-alice");
    int a = ch_login(h, "alice", "pw-alice", NULL);
    int z = ch_connect(h);
    ch_feed(h, z, "NICK zed\r\nUSER zed 0 * :Zed\r\n");
    CH_SKIP_TO(h, z, S "422 zed ");
    ch_feed(h, a, "PRIVMSG zed :hi guest\r\n");
    CH_EXPECT(h, z, ":alice!alice@yard PRIVMSG zed :hi guest");
    ch_feed(h, z, "PRIVMSG alice :hi account\r\nQUIT\r\n");
    CH_EXPECT(h, a, ":zed!zed@yard PRIVMSG alice :hi account");
    ch_feed(h, a, "CHATHISTORY LATEST zed * 10\r\n");
    CH_EXPECT(h, a, ":alice!alice@yard PRIVMSG zed :hi guest");
    CH_EXPECT(h, a, ":zed!zed@yard PRIVMSG alice :hi account");
    CH_EXPECT_NONE(h, a);
    ch_account(h, "zed", "pw-zed"); /* the name is an account's now */
    int z2 = ch_login(h, "zed", "pw-zed", NULL);
    ch_feed(h, z2, "CHATHISTORY LATEST alice * 10\r\n");
    CH_EXPECT_NONE(h, z2);
    ch_feed(h, z2, "CHATHISTORY TARGETS timestamp=2020-01-01T00:00:00.000Z "
                   "timestamp=2262-01-01T00:00:00.000Z 10\r\n");
    CH_EXPECT_NONE(h, z2);
    ch_feed(h, a, "PRIVMSG zed :hi account zed\r\n");
    CH_EXPECT(h, z2, ":alice!alice@yard PRIVMSG zed :hi account zed");
    ch_feed(h, z2, "CHATHISTORY LATEST alice * 10\r\n");
    CH_EXPECT(h, z2, ":alice!alice@yard PRIVMSG zed :hi account zed");
    CH_EXPECT_NONE(h, z2);
    ch_stop(h);
}

/* A private message to oneself: delivered once without echo-message,
 * delivered and echoed with it (irctest's testMessagesToSelf). */
static void test_message_to_self(void)
{
    chat_harness_t *h = ch_start(NULL);
    ch_account(h, "alice", "pw-alice");
    int a = ch_login(h, "alice", "pw-alice", NULL);
    ch_feed(h, a, "PRIVMSG alice :note to self\r\n");
    CH_EXPECT(h, a, ":alice!alice@yard PRIVMSG alice :note to self");
    CH_EXPECT_NONE(h, a);
    ch_feed(h, a, "CAP REQ echo-message\r\n");
    ch_discard(h, a);
    ch_feed(h, a, "PRIVMSG alice :again\r\n");
    CH_EXPECT(h, a, ":alice!alice@yard PRIVMSG alice :again");
    CH_EXPECT(h, a, ":alice!alice@yard PRIVMSG alice :again");
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"timestamps_are_milliseconds", test_timestamps_are_milliseconds},
        {"last_year", test_last_year},
        {"targets", test_targets},
        {"guest_conversation_is_not_an_account_s", test_guest_conversation_is_not_an_account_s},
        {"message_to_self", test_message_to_self},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
