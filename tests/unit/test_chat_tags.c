/* A client's tags up to IRCv3's limit, through the chat's sans-socket
 * harness (chat_harness.h): tag data of 4094 bytes (4096 with the '@' and
 * the space) is taken, its client-only tags kept in the log and relayed
 * whole, on a TAGMSG and on a PRIVMSG of a full 512-byte message part; one
 * byte more is 417 and nothing is sent (irctest's
 * message_tags.testLengthLimits). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_cases.h"

/* "@foo=bar;+baz=" and n a's: tag data of 13 + n bytes, then rest. */
static char *tagged_line(size_t n, const char *rest)
{
    size_t cap = n + strlen(rest) + 32;
    char *line = malloc(cap);
    ASSERT(line != NULL);
    int k = snprintf(line, cap, "@foo=bar;+baz=");
    memset(line + k, 'a', n);
    snprintf(line + k + n, cap - (size_t)k - n, " %s\r\n", rest);
    return line;
}

/* The value of tag key in line ("@k=v;k2=v2 ..."), copied into out. */
static const char *tag_value(const char *line, const char *key, char *out, size_t cap)
{
    size_t kn = strlen(key);
    const char *end = strchr(line, ' ');
    for (const char *p = line + 1; p && p < end; p = strchr(p, ';') ? strchr(p, ';') + 1 : NULL) {
        if (!strncmp(p, key, kn) && p[kn] == '=') {
            size_t vn = strcspn(p + kn + 1, "; ");
            ASSERT(vn < cap);
            memcpy(out, p + kn + 1, vn);
            out[vn] = 0;
            return out;
        }
    }
    return NULL;
}

static void expect_baz(chat_harness_t *h, int id, size_t n, const char *tail)
{
    const char *l = ch_line(h, id);
    ASSERT(l != NULL);
    static char got[8192];
    ASSERT(tag_value(l, "+baz", got, sizeof got) != NULL);
    ASSERT_EQ((int)strlen(got), (int)n);
    ASSERT_EQ((int)strspn(got, "a"), (int)n);
    ASSERT(tag_value(l, "foo", got, sizeof got) == NULL); /* not a client-only tag */
    ASSERT(strlen(l) > strlen(tail) && !strcmp(l + strlen(l) - strlen(tail), tail));
}

static void test_tags_at_the_limit(void)
{
    int a, b;
    chat_harness_t *h = both_in_x("message-tags echo-message", &a, &b);
    int c = ch_login(h, "bob", "pw-bob", "message-tags draft/chathistory"); /* takes tags */
    ch_discard(h, c);
    /* 4094 bytes of tag data: relayed whole, to alice (echo) and to bob's
     * device with message-tags; bob's plain device hears no TAGMSG. */
    char *line = tagged_line(4081, "TAGMSG #x");
    ASSERT_EQ((int)(strstr(line, "TAGMSG") - line), 4096);
    ch_feed(h, a, line);
    free(line);
    expect_baz(h, a, 4081, ":alice!alice@yard TAGMSG #x");
    CH_EXPECT_NONE(h, b);
    CH_EXPECT_NONE(h, c); /* in no channel */
    ch_feed(h, c, "JOIN #x\r\n");
    ch_discard(h, a);
    ch_discard(h, b);
    ch_discard(h, c);
    /* One byte more: 417, nothing sent. */
    line = tagged_line(4082, "TAGMSG #x");
    ch_feed(h, a, line);
    free(line);
    CH_EXPECT(h, a, S "417 alice :Input line was too long (tag data: at most 4094 bytes)");
    CH_EXPECT_NONE(h, a);
    CH_EXPECT_NONE(h, b);
    CH_EXPECT_NONE(h, c);
    /* The longest PRIVMSG a client may send: 4096 + 510 bytes. Its tags are
     * kept whole, its text cut to what the relayed line holds. */
    char rest[600] = "PRIVMSG #x :";
    memset(rest + strlen(rest), 'b', 498); /* 510 bytes, and the CRLF */
    line = tagged_line(4081, rest);
    ASSERT_EQ((int)strlen(line), 4096 + 512);
    ch_feed(h, a, line);
    free(line);
    const char *l = ch_line(h, a);
    ASSERT(l != NULL);
    const char *text = strstr(l, " PRIVMSG #x :");
    ASSERT(text != NULL);
    size_t tn = strlen(text + 13);
    ASSERT(tn >= 400 && tn <= 498 && strspn(text + 13, "b") == tn);
    char want[600];
    snprintf(want, sizeof want, ":alice!alice@yard PRIVMSG #x :%s", text + 13);
    expect_baz(h, c, 4081, want);
    CH_EXPECT(h, b, want); /* no tags for the device without message-tags */
    /* CHATHISTORY gives the tags back from the log. */
    ch_feed(h, c, "CHATHISTORY LATEST #x * 1\r\n");
    expect_baz(h, c, 4081, want);
    CH_EXPECT_NONE(h, c);
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"tags_at_the_limit", test_tags_at_the_limit},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
