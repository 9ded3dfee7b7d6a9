/* CHATHISTORY read in pieces (issue 44), through the sans-socket harness
 * (chat_harness.h): a request that reads much of the log is several jobs of
 * at most YARD_CHAT_HISTORY_PIECE records (or YARD_CHAT_HISTORY_PIECE_ENTRIES
 * index entries) each, the next one going on where the last stopped, and the
 * next piece waits for the client's flood tokens, so that its reads per
 * second are bounded within one request too. The answer is the same as if it
 * were read at once. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_cases.h"
#include "yard/chat_store.h"

#define MS 1000000ull
#define TARGETS_ALL                                                                        \
    "CHATHISTORY TARGETS timestamp=2000-01-01T00:00:00.000Z "                              \
    "timestamp=2100-01-01T00:00:00.000Z 10\r\n"

/* n messages "m<i>" to channel from client id, 1,000 lines at a time, with
 * the flood control of flags (the fake clock moves on while the client waits
 * for tokens; a PING's wait, far later, is not one of those). */
static void fill(chat_harness_t *h, int id, const char *channel, int from, int n)
{
    char lines[1000 * 40];
    for (int at = from; at < from + n; at += 1000) {
        size_t len = 0;
        for (int i = at; i < from + n && i < at + 1000; i++)
            len += (size_t)snprintf(lines + len, sizeof lines - len, "PRIVMSG %s :m%d\r\n",
                                    channel, i);
        ch_feed_n(h, id, lines, len);
        for (int guard = 0; ch_next_wake(h) && ch_next_wake(h) - ch_now(h) < 1000 * MS; guard++) {
            ASSERT(guard < 1000000);
            ch_advance(h, ch_next_wake(h) - ch_now(h));
        }
        ch_discard(h, id);
    }
    ASSERT(!ch_closed(h, id));
}

/* A TARGETS of the whole log reads every record: 10,000 messages and the
 * JOIN are three pieces, and the answer is the one it always was. */
static void test_targets_in_pieces(void)
{
    const char *flags[] = {"flood-rate=0", NULL};
    chat_harness_t *h = ch_start(flags);
    ch_account(h, "alice", "pw-alice");
    int a = ch_login(h, "alice", "pw-alice", NULL);
    ch_feed(h, a, "JOIN #h\r\n");
    fill(h, a, "#h", 0, 10000);
    ch_discard(h, a);
    unsigned long jobs = ch_jobs(h, a);
    ch_feed(h, a, TARGETS_ALL);
    unsigned long records = 10001; /* the messages and the JOIN */
    ASSERT_EQ(ch_jobs(h, a) - jobs,
              (records + YARD_CHAT_HISTORY_PIECE - 1) / YARD_CHAT_HISTORY_PIECE);
    CH_EXPECT_PREFIX(h, a, S "CHATHISTORY TARGETS #h 20");
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

/* With a small bucket, each piece waits until the client has a token again:
 * 4,096 records cost 4.096 tokens, so at 1,000 tokens a second the second
 * piece starts 3.096 ms after the first (the bucket of 3 paid the line and
 * went to -2.096), and nothing the client sends meanwhile is taken. */
static void test_pieces_wait_for_tokens(void)
{
    const char *flags[] = {"flood-rate=1000", "flood-burst=3", NULL};
    chat_harness_t *h = ch_start(flags);
    ch_account(h, "alice", "pw-alice");
    int a = ch_login(h, "alice", "pw-alice", NULL);
    ch_feed(h, a, "JOIN #h\r\n");
    fill(h, a, "#h", 0, 10000);
    ch_advance(h, 1000 * MS); /* a full bucket */
    ch_discard(h, a);
    unsigned long jobs = ch_jobs(h, a);
    ch_feed(h, a, TARGETS_ALL "PING :after\r\n");
    ASSERT_EQ(ch_jobs(h, a) - jobs, 1);
    CH_EXPECT_NONE(h, a);
    uint64_t wait = ch_next_wake(h) - ch_now(h);
    ASSERT(wait >= 3090000 && wait <= 3100000);
    ch_advance(h, 3 * MS);
    ASSERT_EQ(ch_jobs(h, a) - jobs, 1);
    ch_advance(h, MS / 5);
    /* 1.104 tokens then, -2.992 after the piece: 3.992 ms more. */
    ASSERT_EQ(ch_jobs(h, a) - jobs, 2);
    CH_EXPECT_NONE(h, a);
    ch_advance(h, 3 * MS + 9 * MS / 10);
    ASSERT_EQ(ch_jobs(h, a) - jobs, 2);
    CH_EXPECT_NONE(h, a);
    ch_advance(h, MS / 10);
    ASSERT_EQ(ch_jobs(h, a) - jobs, 3);
    CH_EXPECT_PREFIX(h, a, S "CHATHISTORY TARGETS #h 20");
    /* The PING waited behind it (the line then waits for its own token). */
    for (int guard = 0; !ch_pending(h, a) && guard < 100; guard++)
        ch_advance(h, MS);
    CH_EXPECT(h, a, S "PONG yard :after");
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

/* A conversation whose messages are few and far between: the walk looks at
 * index entries it does not read, at most YARD_CHAT_HISTORY_PIECE_ENTRIES of
 * them a piece. AROUND's two walks, each split, give the same answer as an
 * unsplit one: the reference and those before it, then those after, in
 * order. */
static void test_sparse_walk_in_pieces(void)
{
    const char *flags[] = {"flood-rate=0", NULL};
    chat_harness_t *h = ch_start(flags);
    ch_account(h, "alice", "pw-alice");
    int a = ch_login(h, "alice", "pw-alice", "message-tags");
    ch_feed(h, a, "JOIN #h,#rare\r\n");
    int big = YARD_CHAT_HISTORY_PIECE_ENTRIES + 100;
    ch_feed(h, a, "PRIVMSG #rare :r0\r\n");
    fill(h, a, "#h", 0, big);
    ch_feed(h, a, "PRIVMSG #rare :r1\r\n");
    fill(h, a, "#h", big, big);
    ch_feed(h, a, "PRIVMSG #rare :r2\r\n");
    ch_discard(h, a);
    ch_feed(h, a, "CHATHISTORY LATEST #rare * 2\r\n"); /* r1's id, from its msgid tag */
    unsigned long r1 = 0;
    ASSERT_EQ(sscanf(CH_EXPECT_PREFIX(h, a, "@msgid="), "@msgid=%lu", &r1), 1);
    ch_discard(h, a);
    char line[128];
    snprintf(line, sizeof line, "CHATHISTORY AROUND #rare msgid=%lu 3\r\n", r1);
    unsigned long jobs = ch_jobs(h, a);
    ch_feed(h, a, line);
    /* Down from r1 past big entries, up past big more: 2 * (big + 1) entries
     * looked at, YARD_CHAT_HISTORY_PIECE_ENTRIES a piece at most. */
    ASSERT_EQ(ch_jobs(h, a) - jobs, 3);
    ASSERT(strstr(CH_EXPECT_PREFIX(h, a, "@msgid="), "PRIVMSG #rare :r0"));
    ASSERT(strstr(CH_EXPECT_PREFIX(h, a, "@msgid="), "PRIVMSG #rare :r1"));
    ASSERT(strstr(CH_EXPECT_PREFIX(h, a, "@msgid="), "PRIVMSG #rare :r2"));
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"targets_in_pieces", test_targets_in_pieces},
        {"pieces_wait_for_tokens", test_pieces_wait_for_tokens},
        {"sparse_walk_in_pieces", test_sparse_walk_in_pieces},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
