/* IRCv3 labeled-response through the chat's sans-socket harness
 * (chat_harness.h): one line labeled, several in a labeled-response batch,
 * none acknowledged with ACK; answers made later by a job (JOIN's replay,
 * CHATHISTORY, whose own batch nests in the labeled one) and by the log
 * (echo-message, a TOPIC change); a message to oneself delivered and
 * echoed, only the echo labeled; no label without the capabilities, and
 * none taken past 64 bytes. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_harness.h"
#include "test.h"

#define S ":yard "
#define CAPS "batch labeled-response"

static chat_harness_t *start(void)
{
    chat_harness_t *h = ch_start(NULL);
    ch_account(h, "alice", "pw-alice");
    ch_account(h, "bob", "pw-bob");
    return h;
}

/* The next line starts a labeled-response batch with this label: its
 * reference, in ref. */
static void expect_batch_start(chat_harness_t *h, int id, const char *label, char *ref,
                               size_t cap)
{
    char want[128];
    snprintf(want, sizeof want, "@label=%s " S "BATCH +", label);
    const char *l = CH_EXPECT_PREFIX(h, id, want);
    const char *r = l + strlen(want);
    size_t n = strcspn(r, " ");
    ASSERT(n > 0 && n < cap);
    memcpy(ref, r, n);
    ref[n] = 0;
    ASSERT_STR_EQ(r + n, " labeled-response");
    for (size_t i = 0; i < n; i++) /* a batch's reference: letters, digits, '-' */
        ASSERT(ref[i] == '-' || (ref[i] >= '0' && ref[i] <= '9') ||
               ((ref[i] | 32) >= 'a' && (ref[i] | 32) <= 'z'));
}

/* The next line is rest in the batch ref (its only tag). */
static void expect_in_batch(chat_harness_t *h, int id, const char *ref, const char *rest)
{
    char want[600];
    snprintf(want, sizeof want, "@batch=%s %s", ref, rest);
    CH_EXPECT(h, id, want);
}

static void expect_batch_end(chat_harness_t *h, int id, const char *ref)
{
    char want[64];
    snprintf(want, sizeof want, S "BATCH -%s", ref);
    CH_EXPECT(h, id, want);
}

/* One line: labeled. None: ACK. An unknown command's 421 too. */
static void test_one_line_and_none(void)
{
    chat_harness_t *h = start();
    int a = ch_login(h, "alice", "pw-alice", CAPS);
    ch_feed(h, a, "@label=98765 PING adhoc\r\n");
    const char *l = CH_EXPECT_PREFIX(h, a, "@label=98765 " S "PONG ");
    ASSERT(strstr(l, " :adhoc"));
    CH_EXPECT_NONE(h, a);
    ch_feed(h, a, "@label=98765 PONG adhoc\r\n");
    CH_EXPECT(h, a, "@label=98765 " S "ACK");
    ch_feed(h, a, "@label=deadbeef NONEXISTENT_COMMAND\r\n");
    CH_EXPECT(h, a, "@label=deadbeef " S "421 alice * :Not a command"); /* '_': no command */
    ch_feed(h, a, "@label=deadbeef NOSUCHCOMMAND\r\n");
    CH_EXPECT(h, a, "@label=deadbeef " S "421 alice NOSUCHCOMMAND :Unknown command");
    /* Other tags beside it, and an escaped value, as sent. */
    ch_feed(h, a, "@+x=1;label=a\\sb;y PONG z\r\n");
    CH_EXPECT(h, a, "@label=a\\sb " S "ACK");
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

/* No label without both capabilities, an empty one, or one over 64 bytes. */
static void test_no_label(void)
{
    chat_harness_t *h = start();
    int a = ch_login(h, "alice", "pw-alice", "labeled-response");
    int b = ch_login(h, "bob", "pw-bob", CAPS);
    ch_feed(h, a, "@label=1 PONG x\r\n@label=1 LUSERS\r\n");
    CH_EXPECT_PREFIX(h, a, S "251 alice ");
    ch_discard(h, a);
    char line[200];
    snprintf(line, sizeof line, "@label=%065d PONG x\r\n@label= PONG x\r\n@label PONG x\r\n", 7);
    ch_feed(h, b, line);
    CH_EXPECT_NONE(h, b);
    snprintf(line, sizeof line, "@label=%064d PONG x\r\n", 7); /* 64 bytes: taken */
    ch_feed(h, b, line);
    snprintf(line, sizeof line, "@label=%064d " S "ACK", 7);
    CH_EXPECT(h, b, line);
    ch_stop(h);
}

/* Several lines of one command: a batch around them, the label on its
 * start, every line in it. */
static void test_several_lines(void)
{
    chat_harness_t *h = start();
    int a = ch_login(h, "alice", "pw-alice", CAPS " server-time");
    ch_feed(h, a, "@label=lu LUSERS\r\n");
    char ref[32];
    expect_batch_start(h, a, "lu", ref, sizeof ref);
    for (int i = 0; i < 5; i++) {
        const char *l = ch_line(h, a);
        ASSERT(l);
        char want[64];
        snprintf(want, sizeof want, "@batch=%s " S "2", ref);
        ASSERT(!strncmp(l, want, strlen(want)));
    }
    expect_batch_end(h, a, ref);
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

/* JOIN answers after its replay job: the JOIN, the NAMES, all in one
 * batch that ends when the job is done. */
static void test_join(void)
{
    chat_harness_t *h = start();
    int a = ch_login(h, "alice", "pw-alice", CAPS);
    ch_feed(h, a, "@label=j JOIN #xyz\r\n");
    char ref[32];
    expect_batch_start(h, a, "j", ref, sizeof ref);
    expect_in_batch(h, a, ref, ":alice!alice@yard JOIN #xyz");
    expect_in_batch(h, a, ref, S "353 alice = #xyz :@alice");
    expect_in_batch(h, a, ref, S "366 alice #xyz :End of /NAMES list.");
    expect_batch_end(h, a, ref);
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

/* CHATHISTORY answers in its scan job: its chathistory batch inside the
 * labeled one, its start and end in the outer batch, its messages in the
 * inner one only. An empty answer is the inner batch alone; an error one
 * labeled line. */
static void test_chathistory(void)
{
    chat_harness_t *h = start();
    int a = ch_login(h, "alice", "pw-alice", CAPS);
    int b = ch_login(h, "bob", "pw-bob", NULL);
    ch_feed(h, a, "JOIN #h\r\n");
    ch_feed(h, b, "JOIN #h\r\nPRIVMSG #h :one\r\nPRIVMSG #h :two\r\n");
    ch_discard(h, a);
    ch_feed(h, a, "@label=hist CHATHISTORY LATEST #h * 10\r\n");
    char ref[32], want[200];
    expect_batch_start(h, a, "hist", ref, sizeof ref);
    snprintf(want, sizeof want, "@batch=%s " S "BATCH +", ref);
    const char *l = CH_EXPECT_PREFIX(h, a, want);
    char inner[32];
    ASSERT_EQ(sscanf(l + strlen(want), "%31s", inner), 1);
    snprintf(want, sizeof want, "@batch=%s " S "BATCH +%s chathistory #h", ref, inner);
    ASSERT_STR_EQ(l, want);
    ASSERT(strcmp(inner, ref) != 0);
    snprintf(want, sizeof want, "@batch=%s :bob!bob@yard PRIVMSG #h :one", inner);
    CH_EXPECT(h, a, want);
    snprintf(want, sizeof want, "@batch=%s :bob!bob@yard PRIVMSG #h :two", inner);
    CH_EXPECT(h, a, want);
    snprintf(want, sizeof want, S "BATCH -%s", inner);
    expect_in_batch(h, a, ref, want);
    expect_batch_end(h, a, ref);
    CH_EXPECT_NONE(h, a);
    ch_feed(h, a, "@label=bad CHATHISTORY LATEST #nowhere * 10\r\n");
    CH_EXPECT(h, a, "@label=bad " S "FAIL CHATHISTORY INVALID_TARGET LATEST #nowhere :No such "
                    "channel or nick, or you are not in that channel");
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

/* echo-message: the echo of a labeled message carries the label, the
 * recipient's copy does not; to several targets the echoes are a batch;
 * without echo-message, ACK. */
static void test_echo(void)
{
    chat_harness_t *h = start();
    int a = ch_login(h, "alice", "pw-alice", CAPS " echo-message");
    int b = ch_login(h, "bob", "pw-bob", CAPS " echo-message");
    ch_feed(h, b, "JOIN #e\r\n");
    ch_feed(h, a, "JOIN #e\r\n");
    ch_discard(h, a);
    ch_discard(h, b);
    ch_feed(h, a, "@label=12345 PRIVMSG bob :hi\r\n");
    CH_EXPECT(h, a, "@label=12345 :alice!alice@yard PRIVMSG bob :hi");
    CH_EXPECT_NONE(h, a);
    CH_EXPECT(h, b, ":alice!alice@yard PRIVMSG bob :hi");
    CH_EXPECT_NONE(h, b);
    ch_feed(h, a, "@label=m NOTICE bob,#e :both\r\n");
    char ref[32];
    expect_batch_start(h, a, "m", ref, sizeof ref);
    expect_in_batch(h, a, ref, ":alice!alice@yard NOTICE bob :both");
    expect_in_batch(h, a, ref, ":alice!alice@yard NOTICE #e :both");
    expect_batch_end(h, a, ref);
    CH_EXPECT_NONE(h, a);
    CH_EXPECT(h, b, ":alice!alice@yard NOTICE bob :both");
    CH_EXPECT(h, b, ":alice!alice@yard NOTICE #e :both");
    /* A target that fails and one that does not: the 401 and the echo. */
    ch_feed(h, a, "@label=p PRIVMSG nobody,bob :x\r\n");
    expect_batch_start(h, a, "p", ref, sizeof ref);
    expect_in_batch(h, a, ref, S "401 alice nobody :No such nick/channel");
    expect_in_batch(h, a, ref, ":alice!alice@yard PRIVMSG bob :x");
    expect_batch_end(h, a, ref);
    CH_EXPECT_NONE(h, a);
    /* Without echo-message nothing comes back: ACK. */
    ch_discard(h, b);
    ch_feed(h, b, "CAP REQ :-echo-message\r\n");
    ch_discard(h, b);
    ch_feed(h, b, "@label=q PRIVMSG alice :y\r\n");
    CH_EXPECT(h, b, "@label=q " S "ACK");
    CH_EXPECT_NONE(h, b);
    ch_stop(h);
}

/* A message to oneself with echo-message: delivered and echoed, only the
 * echo labeled. A TOPIC change comes back through the log, labeled. */
static void test_self_and_topic(void)
{
    chat_harness_t *h = start();
    int a = ch_login(h, "alice", "pw-alice", CAPS " echo-message");
    ch_feed(h, a, "@label=s PRIVMSG alice :me\r\n");
    CH_EXPECT(h, a, ":alice!alice@yard PRIVMSG alice :me");
    CH_EXPECT(h, a, "@label=s :alice!alice@yard PRIVMSG alice :me");
    CH_EXPECT_NONE(h, a);
    ch_feed(h, a, "JOIN #t\r\n");
    ch_discard(h, a);
    ch_feed(h, a, "@label=t TOPIC #t :new topic\r\n");
    CH_EXPECT(h, a, "@label=t :alice!alice@yard TOPIC #t :new topic");
    CH_EXPECT_NONE(h, a);
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"one_line_and_none", test_one_line_and_none},
        {"no_label", test_no_label},
        {"several_lines", test_several_lines},
        {"join", test_join},
        {"chathistory", test_chathistory},
        {"echo", test_echo},
        {"self_and_topic", test_self_and_topic},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
