/* IRCv3 draft/event-playback through the chat's sans-socket harness
 * (chat_harness.h): with the capability, a channel's CHATHISTORY gives the
 * JOIN, PART, QUIT, KICK, MODE and TOPIC records its log holds, and
 * TAGMSGs (a channel's and a private conversation's), in the log's order,
 * each with its msgid and time, counted by the limit as messages are and
 * read in the same pieces; without it, the answer is as it always was. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_cases.h"
#include "yard/chat_store.h"

#define MS 1000000ull

/* alice (with caps) made #e; bob joined, was voiced, talked, was kicked,
 * came back and left; cy joined and quit; alice set the topic. */
static chat_harness_t *eventful(const char *alice_caps, int *a)
{
    chat_harness_t *h = start();
    ch_account(h, "cy", "pw-cy");
    *a = ch_login(h, "alice", "pw-alice", alice_caps);
    int b = ch_login(h, "bob", "pw-bob", NULL);
    int c = ch_login(h, "cy", "pw-cy", NULL);
    ch_feed(h, *a, "JOIN #e\r\n");
    ch_feed(h, b, "JOIN #e\r\n");
    ch_feed(h, *a, "TOPIC #e :the topic\r\nMODE #e +v bob\r\n");
    ch_feed(h, b, "PRIVMSG #e :hello\r\n");
    ch_feed(h, *a, "KICK #e bob :out\r\n");
    ch_feed(h, b, "JOIN #e\r\nPART #e :bye\r\n");
    ch_feed(h, c, "JOIN #e\r\nQUIT :gone\r\n");
    ch_discard(h, *a);
    return h;
}

/* The lines of a CHATHISTORY answer to a (no batch asked for), up to a
 * PONG sent after it, in one malloc'd string. */
static char *answer(chat_harness_t *h, int a, const char *request)
{
    char line[200];
    snprintf(line, sizeof line, "%s\r\nPING :end\r\n", request);
    ch_feed(h, a, line);
    char *all = ch_take_all(h, a);
    char *pong = strstr(all, S "PONG yard :end\n");
    ASSERT(pong != NULL);
    *pong = 0;
    return all;
}

static void test_channel_events(void)
{
    int a;
    chat_harness_t *h = eventful("draft/event-playback", &a);
    char *got = answer(h, a, "CHATHISTORY LATEST #e * 50");
    ASSERT_STR_EQ(got, ":alice!alice@yard JOIN #e\n"
                       ":bob!bob@yard JOIN #e\n"
                       ":alice!alice@yard TOPIC #e :the topic\n"
                       ":alice!alice@yard MODE #e +v bob\n"
                       ":bob!bob@yard PRIVMSG #e :hello\n"
                       ":alice!alice@yard KICK #e bob :out\n"
                       ":bob!bob@yard JOIN #e\n"
                       ":bob!bob@yard PART #e :bye\n"
                       ":cy!cy@yard JOIN #e\n"
                       ":cy!cy@yard QUIT :Quit: gone\n");
    free(got);
    /* The limit counts events as messages: the newest three. */
    got = answer(h, a, "CHATHISTORY LATEST #e * 3");
    ASSERT_STR_EQ(got, ":bob!bob@yard PART #e :bye\n"
                       ":cy!cy@yard JOIN #e\n"
                       ":cy!cy@yard QUIT :Quit: gone\n");
    free(got);
    ch_stop(h);
}

/* Without the capability: the message only, as before. */
static void test_without_the_capability(void)
{
    int a;
    chat_harness_t *h = eventful(NULL, &a);
    char *got = answer(h, a, "CHATHISTORY LATEST #e * 50");
    ASSERT_STR_EQ(got, ":bob!bob@yard PRIVMSG #e :hello\n");
    free(got);
    got = answer(h, a, "CHATHISTORY LATEST #e * 1");
    ASSERT_STR_EQ(got, ":bob!bob@yard PRIVMSG #e :hello\n");
    free(got);
    ch_stop(h);
}

/* In a batch, with message-tags and server-time: every event has its
 * msgid and time, the batch's tag, and the account of its sender (with
 * account-tag); extended-join's JOIN carries the account and realname. */
static void test_events_are_tagged(void)
{
    int a;
    chat_harness_t *h = eventful("draft/event-playback batch message-tags account-tag "
                                 "extended-join",
                                 &a);
    char *got = answer(h, a, "CHATHISTORY BEFORE #e msgid=3 10");
    /* alice's JOIN is record 1, bob's 2 (the logins wrote nothing). */
    char ref[32];
    ASSERT_EQ(sscanf(got, ":yard BATCH +%31s chathistory #e\n", ref), 1);
    char want[600];
    snprintf(want, sizeof want,
             ":yard BATCH +%s chathistory #e\n"
             "@msgid=1;account=alice;batch=%s :alice!alice@yard JOIN #e alice :alice\n"
             "@msgid=2;account=bob;batch=%s :bob!bob@yard JOIN #e bob :bob\n"
             ":yard BATCH -%s\n",
             ref, ref, ref, ref);
    ASSERT_STR_EQ(got, want);
    free(got);
    ch_stop(h);
}

/* TAGMSG: in a channel's history and a private one with the capability
 * (and message-tags), never without it. */
static void test_tagmsg(void)
{
    chat_harness_t *h = start();
    int a = ch_login(h, "alice", "pw-alice", "draft/event-playback message-tags");
    int n = ch_login(h, "alice", "pw-alice", "message-tags"); /* alice again, without it */
    int b = ch_login(h, "bob", "pw-bob", "message-tags");
    ch_feed(h, a, "JOIN #t\r\n");
    ch_feed(h, n, "JOIN #t\r\n");
    ch_feed(h, b, "JOIN #t\r\n@+typing=active TAGMSG #t\r\n@+react=x TAGMSG alice\r\n");
    ch_discard(h, a);
    ch_discard(h, n);
    char *got = answer(h, a, "CHATHISTORY LATEST #t * 10");
    ASSERT(strstr(got, ";+typing=active :bob!bob@yard TAGMSG #t\n") != NULL);
    free(got);
    got = answer(h, a, "CHATHISTORY LATEST bob * 10");
    ASSERT(strstr(got, ";+react=x :bob!bob@yard TAGMSG alice\n") != NULL);
    free(got);
    got = answer(h, n, "CHATHISTORY LATEST #t * 10");
    ASSERT(strstr(got, "TAGMSG") == NULL);
    free(got);
    got = answer(h, n, "CHATHISTORY LATEST bob * 10");
    ASSERT_STR_EQ(got, "");
    free(got);
    ch_stop(h);
}

/* Events are read in the same pieces as messages (issue 44) and count in
 * the limit: 5,000 topics and a JOIN; the newest 1,000 are one piece and
 * 1,000 lines, and AFTER the JOIN with no capability reads them all (two
 * pieces) to find nothing. */
static void test_events_in_pieces(void)
{
    const char *flags[] = {"flood-rate=0", NULL};
    chat_harness_t *h = ch_start(flags);
    ch_account(h, "alice", "pw-alice");
    int a = ch_login(h, "alice", "pw-alice", "draft/event-playback");
    int n = ch_login(h, "alice", "pw-alice", NULL);
    ch_feed(h, a, "JOIN #p\r\n");
    ch_feed(h, n, "JOIN #p\r\n");
    static char lines[1000 * 40];
    for (int at = 0; at < 5000; at += 1000) {
        size_t len = 0;
        for (int i = at; i < at + 1000; i++)
            len += (size_t)snprintf(lines + len, sizeof lines - len, "TOPIC #p :t%d\r\n", i);
        ch_feed_n(h, a, lines, len);
        ch_discard(h, a);
    }
    ch_discard(h, n);
    unsigned long jobs = ch_jobs(h, a);
    char *got = answer(h, a, "CHATHISTORY LATEST #p * 1000");
    ASSERT_EQ(ch_jobs(h, a) - jobs, 1);
    unsigned lines_n = 0;
    for (char *p = got; (p = strstr(p, " TOPIC #p :t")); p++)
        lines_n++;
    ASSERT_EQ(lines_n, 1000);
    ASSERT(strstr(got, ":t4000\n") != NULL && strstr(got, ":t3999\n") == NULL);
    free(got);
    jobs = ch_jobs(h, n);
    got = answer(h, n, "CHATHISTORY AFTER #p msgid=1 1000");
    ASSERT_STR_EQ(got, "");
    ASSERT_EQ(ch_jobs(h, n) - jobs, (5000 + YARD_CHAT_HISTORY_PIECE - 1) / YARD_CHAT_HISTORY_PIECE);
    free(got);
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"channel_events", test_channel_events},
        {"without_the_capability", test_without_the_capability},
        {"events_are_tagged", test_events_are_tagged},
        {"tagmsg", test_tagmsg},
        {"events_in_pieces", test_events_in_pieces},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
