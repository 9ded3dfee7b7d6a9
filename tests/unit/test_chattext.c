/* The chat tools' text module (tools/chat/text.c): UTF-8 decoding with one
 * U+FFFD per maximal invalid subpart, grapheme clusters, display widths,
 * control characters escaped for a terminal, cutting between characters,
 * JSON strings and base64. Widths need a UTF-8 locale: C.UTF-8, which
 * glibc has built in. */
#include <locale.h>
#include <stdbool.h>
#include <string.h>

#include "test.h"
#include "text.h"

#define S(lit) lit, sizeof lit - 1

static const char *sanitize(const char *p, size_t n, bool utf8)
{
    static char out[1024];
    size_t o = chat_sanitize(p, n, utf8, out, sizeof out);
    ASSERT_EQ(o, strlen(out));
    return out;
}

/* The code points (or ~0 for a replacement) decoding p yields, as a count. */
static int decode_all(const char *p, size_t n, uint32_t *cps, int max)
{
    int k = 0;
    for (size_t i = 0; i < n && k < max;) {
        size_t l = chat_utf8_decode(p + i, n - i, &cps[k++]);
        ASSERT(l >= 1 && l <= 4 && l <= n - i);
        i += l;
    }
    return k;
}

static void test_decode(void)
{
    uint32_t cp[16];
    ASSERT_EQ(decode_all(S("a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x91\xA9"), cp, 16), 4);
    ASSERT_EQ(cp[0], 'a');
    ASSERT_EQ(cp[1], 0xE9);
    ASSERT_EQ(cp[2], 0x4E2D);
    ASSERT_EQ(cp[3], 0x1F469);
    /* Edges of the valid ranges. */
    ASSERT_EQ(decode_all(S("\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80\xF4\x8F\xBF\xBF"),
                         cp, 16),
              6);
    ASSERT_EQ(cp[0], 0x80);
    ASSERT_EQ(cp[1], 0x7FF);
    ASSERT_EQ(cp[2], 0x800);
    ASSERT_EQ(cp[3], 0xD7FF);
    ASSERT_EQ(cp[4], 0xE000);
    ASSERT_EQ(cp[5], 0x10FFFF);
    /* Maximal subparts, as in the Unicode standard's table 3-8 example:
     * 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 gives a, FFFD, FFFD, FFFD, b,
     * FFFD, c, FFFD, FFFD, d. */
    int n = decode_all(S("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"), cp, 16);
    static const uint32_t want[] = {'a', CHAT_INVALID, CHAT_INVALID, CHAT_INVALID, 'b',
                                    CHAT_INVALID, 'c', CHAT_INVALID, CHAT_INVALID, 'd'};
    ASSERT_EQ(n, 10);
    for (int i = 0; i < n; i++)
        ASSERT_EQ(cp[i], want[i]);
    /* Overlong, surrogate, past U+10FFFF, F5+: each byte on its own. */
    ASSERT_EQ(decode_all(S("\xC0\xAF"), cp, 16), 2);
    ASSERT_EQ(decode_all(S("\xE0\x80\xAF"), cp, 16), 3);
    ASSERT_EQ(decode_all(S("\xED\xA0\x80"), cp, 16), 3);
    ASSERT_EQ(decode_all(S("\xF4\x90\x80\x80"), cp, 16), 4);
    ASSERT_EQ(decode_all(S("\xF5\x80"), cp, 16), 2);
    ASSERT_EQ(cp[0], CHAT_INVALID);
    /* A truncated sequence is one subpart. */
    ASSERT_EQ(decode_all(S("\xF0\x9F\x91"), cp, 16), 1);
    ASSERT_EQ(cp[0], CHAT_INVALID);
    ASSERT(chat_utf8_valid(S("ünïcödé ✓ 👩‍💻")));
    ASSERT(!chat_utf8_valid(S("ok\xFF")));
    ASSERT(!chat_utf8_valid(S("\xE2\x82")));
}

static void test_encode(void)
{
    char b[4];
    uint32_t cp;
    static const uint32_t cps[] = {0, 0x7F, 0x80, 0x7FF, 0x800, 0xFFFD, 0x10000, 0x10FFFF};
    for (size_t i = 0; i < sizeof cps / sizeof cps[0]; i++) {
        size_t k = chat_utf8_encode(cps[i], b);
        ASSERT(k >= 1);
        ASSERT_EQ(chat_utf8_decode(b, k, &cp), k);
        ASSERT_EQ(cp, cps[i]);
    }
    ASSERT_EQ(chat_utf8_encode(0xD800, b), 0);
    ASSERT_EQ(chat_utf8_encode(0x110000, b), 0);
}

static void test_controls_escaped(void)
{
    ASSERT(chat_is_control(0) && chat_is_control(0x1B) && chat_is_control(0x7F));
    ASSERT(chat_is_control(0x85) && chat_is_control(0x9F) && !chat_is_control(0xA0));
    ASSERT(!chat_is_control(' ') && !chat_is_control('~'));
    ASSERT_STR_EQ(sanitize(S("red \x1b[31mRED\x1b[0m"), true), "red ^[[31mRED^[[0m");
    ASSERT_STR_EQ(sanitize(S("\x1b]0;title\x07"), true), "^[]0;title^G");
    ASSERT_STR_EQ(sanitize(S("a\rb\tc\x7f\x00"), true), "a^Mb^Ic^?^@");
    /* C1 as code points (valid UTF-8): cat -v's M- notation. */
    ASSERT_STR_EQ(sanitize(S("\xC2\x9B"
                             "31m \xC2\x85\xC2\x80\xC2\x9F"),
                           true),
                  "M-^[31m M-^EM-^@M-^_");
    /* A bare 0x9B byte is not UTF-8: U+FFFD, never the byte. */
    ASSERT_STR_EQ(sanitize(S("x\x9B"
                             "31m"),
                           true),
                  "x\xEF\xBF\xBD"
                  "31m");
    /* ASCII mode: the same escapes, '?' for anything else, one per cluster. */
    ASSERT_STR_EQ(sanitize(S("\x1b[1m caf\xC3\xA9 e\xCC\x81 \xE4\xB8\xAD \xFF \xC2\x9B"), false),
                  "^[[1m caf? ? ? ? M-^[");
    /* Nothing below 0x20, no DEL, no C1 in any output, for every byte. */
    for (int c = 0; c < 256; c++) {
        char in[3] = {'x', (char)c, 'y'};
        const char *o = sanitize(in, 3, true);
        ASSERT(chat_utf8_valid(o, strlen(o)));
        for (size_t i = 0; o[i]; i++)
            ASSERT((unsigned char)o[i] >= 0x20 && (unsigned char)o[i] != 0x7F);
        ASSERT(!strstr(o, "\xC2\x80") && !strstr(o, "\xC2\x9B"));
    }
}

static void test_clusters(void)
{
    /* e + COMBINING ACUTE is one cluster, as is an emoji ZWJ sequence
     * (woman, ZWJ, laptop) and a heart with VS16. */
    ASSERT_EQ(chat_cluster_len(S("e\xCC\x81x")), 3);
    ASSERT_EQ(chat_cluster_len(S("\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBBx")), 11);
    ASSERT_EQ(chat_cluster_len(S("\xE2\x9D\xA4\xEF\xB8\x8Fx")), 6);
    /* Several marks; a family of four (7 code points). */
    ASSERT_EQ(chat_cluster_len(S("a\xCC\x81\xCC\xA3\xCC\x88!")), 7);
    ASSERT_EQ(chat_cluster_len(S("\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D"
                                 "\xF0\x9F\x91\xA7\xE2\x80\x8D\xF0\x9F\x91\xA6")),
              25);
    /* ZWJ joins pictographs only: "a ZWJ b" is a+ZWJ, then b (as tmux). */
    ASSERT_EQ(chat_cluster_len(S("a\xE2\x80\x8D"
                                 "b")),
              4);
    /* Skin tones and flag pairs stay apart (terminals give them their own cells). */
    ASSERT_EQ(chat_cluster_len(S("\xF0\x9F\x91\x8B\xF0\x9F\x8F\xBD")), 4);
    ASSERT_EQ(chat_cluster_len(S("\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7")), 4);
    /* Controls and bad bytes are clusters of their own: a mark after ESC
     * does not attach to it. */
    ASSERT_EQ(chat_cluster_len(S("\x1b\xCC\x81")), 1);
    ASSERT_EQ(chat_cluster_len(S("\xFF\xCC\x81")), 1);
    ASSERT_EQ(chat_cluster_len(S("e\xFF")), 1);
    ASSERT_EQ(chat_cluster_len(S("e\x1b")), 1);
    /* CJK: one each. */
    ASSERT_EQ(chat_cluster_len(S("\xE4\xB8\xAD\xE6\x96\x87")), 3);

    /* prev walks back by the same clusters. */
    const char s[] = "ab\xE4\xB8\xAD"
                     "e\xCC\x81\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBBz";
    size_t n = sizeof s - 1;
    static const size_t bounds[] = {0, 1, 2, 5, 8, 19, 20};
    ASSERT_EQ(n, 20);
    for (int i = 6; i > 0; i--)
        ASSERT_EQ(chat_cluster_prev(s, n, bounds[i]), bounds[i - 1]);
    ASSERT_EQ(chat_cluster_prev(s, n, 0), 0);
    ASSERT_EQ(chat_cluster_prev(s, n, 12), 8); /* inside the emoji: its start */
    for (int i = 0; i < 6; i++)
        ASSERT_EQ(chat_cluster_len(s + bounds[i], n - bounds[i]), bounds[i + 1] - bounds[i]);
}

static void test_widths(void)
{
    ASSERT_EQ(chat_text_width(S("abc"), true), 3);
    ASSERT_EQ(chat_text_width(S("\xE4\xB8\xAD\xE6\x96\x87"), true), 4); /* 中文 */
    ASSERT_EQ(chat_text_width(S("e\xCC\x81"), true), 1);                /* é, two code points */
    /* ünïcödé, and the woman-technologist ZWJ sequence as one 2-column cluster */
    ASSERT_EQ(chat_text_width(S("\xC3\xBCn\xC3\xAF" "c\xC3\xB6" "d\xC3\xA9"), true), 7);
    ASSERT_EQ(chat_text_width(S("\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB"), true), 2);
    ASSERT_EQ(chat_text_width(S("\xE2\x9C\x93"), true), 1);           /* ✓ */
    ASSERT_EQ(chat_text_width(S("\x1b[0m"), true), 5);                  /* ^[[0m */
    ASSERT_EQ(chat_text_width(S("\xC2\x9B"), true), 4);                 /* M-^[ */
    ASSERT_EQ(chat_text_width(S("\xFF\xFE"), true), 2);                 /* two U+FFFD */
    ASSERT_EQ(chat_text_width(S("\xE4\xB8\xAD"), false), 1);            /* ? */

    chat_unit_t u;
    ASSERT_EQ(chat_unit_next(S("\xE4\xB8\xAD!"), true, &u), 3);
    ASSERT_EQ(u.kind, CHAT_UNIT_TEXT);
    ASSERT_EQ(u.width, 2);
    /* A combining mark with nothing before it gets a space to sit on. */
    ASSERT_EQ(chat_unit_next(S("\xCC\x81x"), true, &u), 2);
    ASSERT(u.kind == CHAT_UNIT_TEXT && u.no_base && u.width == 1);
    ASSERT_STR_EQ(sanitize(S("\x1b\xCC\x81"), true), "^[ \xCC\x81");
    /* Unassigned and U+2028: the C library cannot tell their width. */
    ASSERT_EQ(chat_unit_next(S("\xCD\xB8"), true, &u), 2);
    ASSERT_EQ(u.kind, CHAT_UNIT_SUBST);
    ASSERT_STR_EQ(u.show, "\xEF\xBF\xBD");
    ASSERT_EQ(chat_unit_next(S("\xE2\x80\xA8"), true, &u), 3);
    ASSERT_EQ(u.kind, CHAT_UNIT_SUBST);
    ASSERT_EQ(chat_unit_next(S("\x1b"), true, &u), 1);
    ASSERT_EQ(u.kind, CHAT_UNIT_ESCAPE);
    ASSERT_STR_EQ(u.show, "^[");
}

static void test_cut(void)
{
    const char s[] = "ab\xE4\xB8\xAD"
                     "e\xCC\x81\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBBz";
    size_t n = sizeof s - 1;
    ASSERT_EQ(chat_cut(s, n, 100), n);
    ASSERT_EQ(chat_cut(s, n, 4), 2);   /* not inside 中 */
    ASSERT_EQ(chat_cut(s, n, 7), 5);   /* not between e and its accent */
    ASSERT_EQ(chat_cut(s, n, 18), 8);  /* not inside the ZWJ sequence */
    ASSERT_EQ(chat_cut(s, n, 19), 19);
    /* One cluster longer than max: cut between its code points. */
    ASSERT_EQ(chat_cut(s + 8, 11, 9), 7);
    ASSERT_EQ(chat_cut(s + 8, 11, 3), 0);
    /* Bad bytes count as characters of their own. */
    ASSERT_EQ(chat_cut(S("\xFF\xFE\xFD"), 2), 2);
}

static const char *json(const char *p, size_t n)
{
    static char out[1024];
    size_t o = chat_json_string(p, n, out, sizeof out);
    ASSERT(o > 0);
    ASSERT_EQ(o, strlen(out));
    return out;
}

static void test_json(void)
{
    ASSERT_STR_EQ(json(S("plain")), "\"plain\"");
    ASSERT_STR_EQ(json(S("q\"b\\s/")), "\"q\\\"b\\\\s/\"");
    ASSERT_STR_EQ(json(S("\n\r\t\b\f")), "\"\\n\\r\\t\\b\\f\"");
    ASSERT_STR_EQ(json(S("\x1b[0m\x7f\x01")), "\"\\u001b[0m\\u007f\\u0001\"");
    ASSERT_STR_EQ(json(S("\xC2\x85\xE2\x80\xA8\xE2\x80\xA9")), "\"\\u0085\\u2028\\u2029\"");
    /* UTF-8 stays UTF-8: é, 中, the emoji sequence. */
    ASSERT_STR_EQ(json(S("\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB")),
                  "\"\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB\"");
    /* One \ufffd per maximal subpart, like Python's errors="replace". */
    ASSERT_STR_EQ(json(S("a\xFF\xE2\x82"
                         "b\xED\xA0\x80")),
                  "\"a\\ufffd\\ufffdb\\ufffd\\ufffd\\ufffd\"");
    ASSERT_STR_EQ(json("", 0), "\"\"");
    /* Room: 6 per byte and the quotes; less is refused, not overrun. */
    char small[9];
    ASSERT_EQ(chat_json_string(S("x"), small, sizeof small), 3);
    ASSERT_EQ(chat_json_string(S("xy"), small, sizeof small), 0);
}

static void test_b64(void)
{
    /* RFC 4648's test vectors. */
    static const char *const v[][2] = {
        {"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},          {"foo", "Zm9v"},
        {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"},
    };
    char out[32];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        ASSERT_EQ(chat_b64_encode(v[i][0], strlen(v[i][0]), out, sizeof out), strlen(v[i][1]));
        ASSERT_STR_EQ(out, v[i][1]);
    }
    ASSERT_STR_EQ((chat_b64_encode(S("\xFF\xFE\x00"), out, sizeof out), out), "//4A");
    ASSERT_EQ(chat_b64_encode(S("foo"), out, 4), 0); /* needs 5 with the NUL */
    ASSERT_EQ(chat_b64_encode(S("foo"), out, 5), 4);
}

int main(int argc, char **argv)
{
    if (!setlocale(LC_ALL, "C.UTF-8"))
        TEST_FAIL("no C.UTF-8 locale: the widths need one");
    static const struct test_case cases[] = {
        {"decode", test_decode},     {"encode", test_encode}, {"controls", test_controls_escaped},
        {"clusters", test_clusters}, {"widths", test_widths}, {"cut", test_cut},
        {"json", test_json},         {"b64", test_b64},       {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
