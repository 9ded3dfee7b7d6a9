/* The chat's replies line by line, through the sans-socket harness (chat_harness.h):
 * CHATHISTORY in a batch, far timestamps, and a guest's read markers. The formats are
 * the ones tests/integration/test_chat*.py expect of the real server. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_cases.h"

static void test_chathistory_batch(void)
{
    chat_harness_t *h = start();
    int a = ch_login(h, "alice", "pw-alice", "batch message-tags");
    int b = ch_login(h, "bob", "pw-bob", NULL);
    ch_feed(h, a, "JOIN #h\r\n");
    ch_feed(h, b, "JOIN #h\r\nPRIVMSG #h :one\r\nPRIVMSG #h :two\r\n");
    ch_discard(h, a);
    ch_feed(h, a, "CHATHISTORY LATEST #h * 10\r\n");
    const char *l = CH_EXPECT_PREFIX(h, a, S "BATCH +");
    char ref[32];
    ASSERT_EQ(sscanf(l, ":yard BATCH +%31s chathistory #h", ref), 1);
    char want[128];
    snprintf(want, sizeof want, S "BATCH +%s chathistory #h", ref);
    ASSERT_STR_EQ(l, want);
    snprintf(want, sizeof want, ";batch=%s :bob!bob@yard PRIVMSG #h :one", ref);
    l = CH_EXPECT_PREFIX(h, a, "@msgid=");
    ASSERT(strstr(l, want));
    snprintf(want, sizeof want, ";batch=%s :bob!bob@yard PRIVMSG #h :two", ref);
    l = CH_EXPECT_PREFIX(h, a, "@msgid=");
    ASSERT(strstr(l, want));
    snprintf(want, sizeof want, S "BATCH -%s", ref);
    CH_EXPECT(h, a, want);
    CH_EXPECT_NONE(h, a);
    /* Without batch (bob): the same lines, no batch around them. */
    ch_discard(h, b);
    ch_feed(h, b, "CHATHISTORY LATEST #h * 1\r\nCHATHISTORY LATEST\r\nCHATHISTORY\r\n");
    CH_EXPECT(h, b, ":bob!bob@yard PRIVMSG #h :two");
    CH_EXPECT(h, b, HIST_INVALID("LATEST"));
    CH_EXPECT(h, b, S "FAIL CHATHISTORY UNKNOWN_COMMAND * :Unknown subcommand");
    CH_EXPECT_NONE(h, b);
    ch_stop(h);
}

/* A timestamp past 2262 does not fit the log's nanoseconds: it is refused,
 * not multiplied past INT64_MAX (found by fuzz/fuzz_chat.c). */
static void test_chathistory_far_timestamp(void)
{
    chat_harness_t *h = start();
    int a = ch_login(h, "alice", "pw-alice", NULL);
    ch_feed(h, a, "JOIN #h\r\nPRIVMSG #h :one\r\n");
    ch_discard(h, a);
    ch_feed(h, a, "CHATHISTORY BEFORE #h timestamp=4040-01-01T00:00:00.000Z 5\r\n"
                  "CHATHISTORY AFTER #h timestamp=1000-01-01T00:00:00.000Z 5\r\n"
                  "MARKREAD #h timestamp=9999-12-31T23:59:59.999Z\r\n");
    CH_EXPECT(h, a, HIST_INVALID("BEFORE"));
    CH_EXPECT(h, a, HIST_INVALID("AFTER"));
    CH_EXPECT_PREFIX(h, a, S "FAIL MARKREAD INVALID_PARAMS #h :");
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

/* A guest's read markers are its connection's: set, read back, never moved
 * back, told in a JOIN's NAMES before 366; a bare MARKREAD is
 * NEED_MORE_PARAMS (issue 40, irctest's read_marker). */
static void test_guest_read_markers(void)
{
    const char *flags[] = {"guests", NULL};
    chat_harness_t *h = ch_start(flags);
    int z = ch_connect(h);
    ch_feed(h, z, "CAP LS 302\r\nCAP REQ :draft/read-marker\r\nNICK zed\r\n"
                  "USER z 0 * :Zed\r\nCAP END\r\n");
    CH_SKIP_TO(h, z, S "422 zed ");
    ch_feed(h, z, "MARKREAD #none\r\nJOIN #t\r\n");
    CH_EXPECT(h, z, S "MARKREAD #none *");
    /* The marker comes between NAMES and its end (the draft: before 366). */
    CH_SKIP_TO(h, z, S "353 zed = #t :");
    CH_EXPECT(h, z, S "MARKREAD #t *");
    CH_EXPECT(h, z, S "366 zed #t :End of /NAMES list.");
    ch_feed(h, z, "MARKREAD #t timestamp=2020-03-15T10:00:00.000Z\r\n"
                  "MARKREAD #T timestamp=2019-01-01T00:00:00.000Z\r\nPART #t\r\nJOIN #t\r\n");
    CH_EXPECT(h, z, S "MARKREAD #t timestamp=2020-03-15T10:00:00.000Z");
    CH_EXPECT(h, z, S "MARKREAD #T timestamp=2020-03-15T10:00:00.000Z");
    CH_SKIP_TO(h, z, S "353 zed = #t :");
    CH_EXPECT(h, z, S "MARKREAD #t timestamp=2020-03-15T10:00:00.000Z");
    CH_EXPECT(h, z, S "366 zed #t :End of /NAMES list.");
    /* A bare MARKREAD lacks its target. */
    ch_feed(h, z, "MARKREAD\r\n");
    CH_EXPECT(h, z, S "FAIL MARKREAD NEED_MORE_PARAMS :Give a channel or nick, and optionally "
                      "timestamp=YYYY-MM-DDThh:mm:ss.sssZ");
    CH_EXPECT_NONE(h, z);
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"chathistory_batch", test_chathistory_batch},
        {"chathistory_far_timestamp", test_chathistory_far_timestamp},
        {"guest_read_markers", test_guest_read_markers},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
