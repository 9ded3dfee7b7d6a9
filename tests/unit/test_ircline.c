/* IRC lines: framing with the RFC 1459 and IRCv3 limits (also byte at a
 * time), parsing, base64 and SASL PLAIN. */
#include <stdarg.h>
#include <string.h>

#include "test.h"
#include "yard/proto_ircline.h"

static int frame(const char *s, size_t *start, size_t *len, size_t *used)
{
    return yard_irc_frame(s, strlen(s), start, len, used);
}

static void test_framing(void)
{
    size_t st, len, used;
    ASSERT_EQ(frame("PING x\r\nNEXT", &st, &len, &used), YARD_IRC_LINE);
    ASSERT_EQ(st, 0);
    ASSERT_EQ(len, 6);
    ASSERT_EQ(used, 8);
    ASSERT_EQ(frame("\r\n\nPING y\n", &st, &len, &used), YARD_IRC_LINE);
    ASSERT_EQ(st, 3);
    ASSERT_EQ(len, 6);
    ASSERT_EQ(used, 10);
    ASSERT_EQ(frame("PING", &st, &len, &used), YARD_IRC_NEED);
    ASSERT_EQ(used, 0);
    ASSERT_EQ(frame("\r\n", &st, &len, &used), YARD_IRC_NEED);
    ASSERT_EQ(used, 2);
}

static void test_limits(void)
{
    char buf[10000];
    size_t st, len, used;
    /* 510 bytes + CRLF = 512: the limit, accepted; one more is too long. */
    memset(buf, 'a', 510);
    memcpy(buf + 510, "\r\n", 3);
    ASSERT_EQ(frame(buf, &st, &len, &used), YARD_IRC_LINE);
    ASSERT_EQ(len, 510);
    memset(buf, 'a', 511);
    memcpy(buf + 511, "\r\n", 3);
    ASSERT_EQ(frame(buf, &st, &len, &used), YARD_IRC_TOOLONG);
    ASSERT_EQ(used, 513);
    /* Without its end, 511 bytes may still become a 511+LF line: wait; 512 cannot. */
    memset(buf, 'a', 511);
    buf[511] = 0;
    ASSERT_EQ(frame(buf, &st, &len, &used), YARD_IRC_NEED);
    memset(buf, 'a', 600);
    buf[600] = 0;
    ASSERT_EQ(frame(buf, &st, &len, &used), YARD_IRC_TOOLONG_OPEN);
    ASSERT_EQ(used, 600);
    /* Tags have their own 8191 bytes. */
    buf[0] = '@';
    memset(buf + 1, 't', 8189);
    strcpy(buf + 8190, " PRIVMSG #a :hi\r\n");
    ASSERT_EQ(frame(buf, &st, &len, &used), YARD_IRC_LINE);
    buf[0] = '@';
    memset(buf + 1, 't', 8191);
    strcpy(buf + 8192, " PRIVMSG #a :hi\r\n");
    ASSERT_EQ(frame(buf, &st, &len, &used), YARD_IRC_TOOLONG);
}

static void test_byte_at_a_time(void)
{
    const char *s = "NICK a\r\nUSER a 0 * :A B\r\n";
    size_t n = strlen(s), lines = 0, off = 0;
    for (size_t have = 1; have <= n; have++) {
        size_t st, len, used;
        int f = yard_irc_frame(s + off, have - off, &st, &len, &used);
        ASSERT(f == YARD_IRC_LINE || f == YARD_IRC_NEED);
        if (f == YARD_IRC_LINE) {
            lines++;
            off += used;
        } else {
            off += used;
        }
    }
    ASSERT_EQ(lines, 2);
    ASSERT_EQ(off, n);
}

static void test_parse(void)
{
    char l1[] = "@time=x :nick!u@h privmsg #chan :hello  world";
    yard_irc_msg_t m;
    ASSERT(yard_irc_parse(l1, &m));
    ASSERT_STR_EQ(m.cmd, "PRIVMSG");
    ASSERT_EQ(m.n, 2);
    ASSERT_STR_EQ(m.params[0], "#chan");
    ASSERT_STR_EQ(m.params[1], "hello  world");
    ASSERT_STR_EQ(m.tags, "time=x");
    char l2[] = "USER a 0 *  :";
    ASSERT(yard_irc_parse(l2, &m));
    ASSERT_EQ(m.n, 4);
    ASSERT_STR_EQ(m.params[3], "");
    char l3[] = "CMD 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17";
    ASSERT(yard_irc_parse(l3, &m));
    ASSERT_EQ(m.n, 15);
    ASSERT_STR_EQ(m.params[14], "15 16 17");
    char l4[] = "001 x :hi";
    ASSERT(yard_irc_parse(l4, &m));
    ASSERT(m.tags == NULL);
    char bad1[] = ":onlyprefix", bad2[] = "", bad3[] = "PR1VMSG x", bad4[] = "@tagsonly";
    ASSERT(!yard_irc_parse(bad1, &m));
    ASSERT(!yard_irc_parse(bad2, &m));
    ASSERT(!yard_irc_parse(bad3, &m));
    ASSERT(!yard_irc_parse(bad4, &m));
}

/* Client-only tags: '+' keys that are well formed, each once (the last
 * value), the others dropped; too long for the buffer is -1. */
static void test_client_tags(void)
{
    char out[64];
    ASSERT_EQ(yard_irc_client_tags("time=1;+typing=active;msgid=9;+example.com/x=a\\sb", out,
                                   sizeof out),
              (long)strlen("+typing=active;+example.com/x=a\\sb"));
    ASSERT_STR_EQ(out, "+typing=active;+example.com/x=a\\sb");
    ASSERT_EQ(yard_irc_client_tags("+a=1;+b;+a=2", out, sizeof out), 7);
    ASSERT_STR_EQ(out, "+b;+a=2");
    ASSERT_EQ(yard_irc_client_tags("+a=1;+a=2;+a=3", out, sizeof out), 4);
    ASSERT_STR_EQ(out, "+a=3");
    ASSERT_EQ(yard_irc_client_tags("+=x;+/y=1;+v/=1;+a b=1;+ok;;+", out, sizeof out), 3);
    ASSERT_STR_EQ(out, "+ok");
    ASSERT_EQ(yard_irc_client_tags("a=1;b=2", out, sizeof out), 0);
    ASSERT_STR_EQ(out, "");
    ASSERT_EQ(yard_irc_client_tags("", out, sizeof out), 0);
    ASSERT_EQ(yard_irc_client_tags("+abcdefgh=12345678", out, 19), 18);
    ASSERT_EQ(yard_irc_client_tags("+abcdefgh=12345678", out, 18), -1);
}

static void test_sasl(void)
{
    char out[64];
    ASSERT_EQ(yard_b64decode("AGFsaWNlAHMzY3JldA==", 20, out, sizeof out), 13);
    const char *u, *p;
    size_t ul, pl;
    ASSERT(yard_sasl_plain_split(out, 13, &u, &ul, &p, &pl));
    ASSERT_EQ(ul, 5);
    ASSERT_MEM_EQ(u, "alice", 5);
    ASSERT_MEM_EQ(p, "s3cret", 6);
    ASSERT(yard_sasl_plain_split("alice\0alice\0pw", 14, &u, &ul, &p, &pl));
    ASSERT(!yard_sasl_plain_split("bob\0alice\0pw", 12, &u, &ul, &p, &pl)); /* authzid differs */
    ASSERT(!yard_sasl_plain_split("\0alice", 6, &u, &ul, &p, &pl));
    ASSERT(!yard_sasl_plain_split("\0\0pw", 4, &u, &ul, &p, &pl));
    ASSERT(!yard_sasl_plain_split("\0a\0p\0x", 7, &u, &ul, &p, &pl));
    ASSERT_EQ(yard_b64decode("abc", 3, out, sizeof out), -1);
    ASSERT_EQ(yard_b64decode("a!cd", 4, out, sizeof out), -1);
    ASSERT_EQ(yard_b64decode("QQ==", 4, out, sizeof out), 1);
    ASSERT_EQ(out[0], 'A');
    ASSERT_EQ(yard_b64decode("QUJD", 4, out, 2), -1); /* no room */
}

static size_t vline(char *out, size_t cap, bool *cut, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = yard_irc_vline(out, cap, cut, fmt, ap);
    va_end(ap);
    return n;
}

static void test_vline(void)
{
    char buf[64];
    bool cut;
    ASSERT_EQ(vline(buf, sizeof buf, &cut, "PING %s", "x"), 8);
    ASSERT(!cut);
    ASSERT_MEM_EQ(buf, "PING x\r\n", 8);
    /* Every capacity: never past it, always ends in CRLF, cut when short. */
    for (size_t cap = 3; cap < 20; cap++) {
        char small[32];
        memset(small, '#', sizeof small);
        size_t n = vline(small, cap, &cut, "PRIVMSG #a :%s", "hello");
        ASSERT(n <= cap && n >= 2);
        ASSERT_MEM_EQ(small + n - 2, "\r\n", 2);
        ASSERT_EQ(small[cap], '#');
        /* vsnprintf keeps a byte for its NUL: a line needs its length + 3. */
        ASSERT_EQ(cut, strlen("PRIVMSG #a :hello") + 3 > cap);
    }
}

/* A bare CR ends a line: text after it can never pose as a line of its own
 * inside the first (the chat hardening issue's forged sender). */
static void test_bare_cr(void)
{
    const char *s = "PRIVMSG #x :hi\r:bob!bob@yard PRIVMSG #x :FAKE\r\n";
    size_t st, len, used;
    ASSERT_EQ(frame(s, &st, &len, &used), YARD_IRC_LINE);
    ASSERT_EQ(len, strlen("PRIVMSG #x :hi"));
    ASSERT_EQ(used, len + 1);
    ASSERT_EQ(frame(s + used, &st, &len, &used), YARD_IRC_LINE);
    ASSERT_EQ(len, strlen(":bob!bob@yard PRIVMSG #x :FAKE"));
    ASSERT_EQ(used, len + 2); /* the CRLF consumed whole */
    /* A CR at the end of what arrived ends the line; the LF that follows
     * later is an empty line. */
    ASSERT_EQ(frame("PING a\r", &st, &len, &used), YARD_IRC_LINE);
    ASSERT_EQ(len, 6);
    ASSERT_EQ(used, 7);
    ASSERT_EQ(frame("\nPING b\n", &st, &len, &used), YARD_IRC_LINE);
    ASSERT_EQ(st, 1);
    ASSERT_EQ(len, 6);
}

static void test_strip_controls(void)
{
    char s[64];
    /* ESC and an OSC sequence lose their control bytes; formatting codes
     * and CTCP's 0x01 stay; a tab becomes a space; C1 (U+009B) goes. */
    strcpy(s, "a\x1b[31mred\x1b]0;t\x07\x02b\x02 \x01" "ACTION x\x01\tz\xc2\x9bq\x7f\xc3\xa9");
    size_t n = yard_irc_strip_controls(s, strlen(s));
    ASSERT_STR_EQ(s, "a[31mred]0;t\x02b\x02 \x01" "ACTION x\x01 zq\xc3\xa9");
    ASSERT_EQ(n, strlen(s));
    ASSERT(!yard_irc_has_controls(s, n));
    ASSERT(yard_irc_has_controls("a\x1b", 2));
    ASSERT(yard_irc_has_controls("\xc2\x85", 2));
    ASSERT(!yard_irc_has_controls("\xc2\xa0\x03" "4red", 6));
    /* Nothing to remove: unchanged. */
    strcpy(s, "plain \xe2\x9c\x93");
    ASSERT_EQ(yard_irc_strip_controls(s, strlen(s)), strlen("plain \xe2\x9c\x93"));
}

int main(void)
{
    test_bare_cr();
    test_strip_controls();
    test_vline();
    test_framing();
    test_limits();
    test_byte_at_a_time();
    test_parse();
    test_client_tags();
    test_sasl();
    return 0;
}
