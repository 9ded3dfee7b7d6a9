/* Long passwords, through the chat's sans-socket harness (chat_harness.h):
 * accounts and operators take passwords of 1 to YARD_ACCOUNT_PASSWORD_MAX
 * (600) bytes, SASL PLAIN carries them in 400-byte AUTHENTICATE pieces (the
 * sizes of irctest's sasl.testPlainLarge, testPlainLarge800 and
 * testPlainLargeEquals400), and bcrypt reads the first 72 bytes of one, as
 * every $2b$ bcrypt does (docs/chat.md, "Accounts"). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_cases.h"
#include "yard/chat_accounts.h"

/* The bound docs/chat.md gives (YARD_ACCOUNT_PASSWORD_MAX). */
#define LONGEST 600

/* RFC 4648 base64 of n bytes into out (4 * ceil(n / 3) + 1 bytes). */
static void b64(const char *in, size_t n, char *out)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)(unsigned char)in[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)(unsigned char)in[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)in[i + 2];
        out[o++] = abc[v >> 18 & 63];
        out[o++] = abc[v >> 12 & 63];
        out[o++] = i + 1 < n ? abc[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? abc[v & 63] : '=';
    }
    out[o] = 0;
}

/* A SASL PLAIN login of "foo" with password: the payload sent in 400-byte
 * pieces, and "AUTHENTICATE +" after a last piece of exactly 400. Returns
 * the client, its 903 or 904 expected by the caller. */
static int plain_in_pieces(chat_harness_t *h, const char *password, size_t *payload_len)
{
    char plain[1024], payload[1400], line[500];
    size_t pn = strlen(password);
    memcpy(plain, "foo\0foo\0", 8);
    memcpy(plain + 8, password, pn);
    b64(plain, 8 + pn, payload);
    size_t n = strlen(payload);
    *payload_len = n;
    int id = ch_connect(h);
    ch_feed(h, id, "CAP LS 302\r\nCAP REQ :sasl\r\nNICK foo\r\nUSER foo 0 * :foo\r\n"
                   "AUTHENTICATE PLAIN\r\n");
    CH_SKIP_TO(h, id, "AUTHENTICATE +");
    size_t at = 0;
    do {
        size_t piece = n - at > 400 ? 400 : n - at;
        snprintf(line, sizeof line, "AUTHENTICATE %.*s\r\n", (int)piece, payload + at);
        ch_feed(h, id, line);
        at += piece;
        if (at == n && piece == 400)
            ch_feed(h, id, "AUTHENTICATE +\r\n");
    } while (at < n);
    return id;
}

static void repeat(char *out, const char *unit, int times)
{
    out[0] = 0;
    for (int i = 0; i < times; i++)
        strcat(out, unit);
}

/* irctest's three sizes: a 300-byte password (a 412-byte payload), one of
 * 291 bytes (a payload of exactly 400, then +) and one of 592 (exactly
 * 800: two pieces, then +). */
static void test_sasl_long_passwords(void)
{
    static const struct {
        const char *unit;
        int times;
        size_t payload;
    } cases[] = {{"bar", 100, 412}, {"bar", 97, 400}, {"x", 592, 800}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char pw[LONGEST + 1];
        repeat(pw, cases[i].unit, cases[i].times);
        chat_harness_t *h = ch_start(NULL);
        ch_account(h, "foo", pw);
        size_t n;
        int id = plain_in_pieces(h, pw, &n);
        ASSERT_EQ((int)n, (int)cases[i].payload);
        CH_EXPECT(h, id, S "900 foo foo!foo@yard foo :You are now logged in as foo");
        CH_EXPECT(h, id, S "903 foo :SASL authentication successful");
        /* Wrong in its first byte: refused. */
        pw[0] = 'Q';
        id = plain_in_pieces(h, pw, &n);
        ch_advance(h, 2000000000ull); /* a failure's answer waits (--login-fail-delay-ms) */
        CH_EXPECT_PREFIX(h, id, S "904 ");
        ch_stop(h);
    }
}

/* A piece over 400 bytes is not one the spec allows: 905, and the
 * exchange is over (irctest's sasl.testSaslTooLong); a whole payload
 * past what any PLAIN login needs is 904. */
static void test_sasl_pieces_too_long(void)
{
    chat_harness_t *h = ch_start(NULL);
    ch_account(h, "foo", "sesame");
    int id = ch_connect(h);
    char line[600];
    ch_feed(h, id, "CAP LS 302\r\nCAP REQ :sasl\r\nNICK foo\r\nUSER foo 0 * :foo\r\n"
                   "AUTHENTICATE PLAIN\r\n");
    CH_SKIP_TO(h, id, "AUTHENTICATE +");
    memset(line, 0, sizeof line);
    memcpy(line, "AUTHENTICATE ", 13);
    memset(line + 13, 'A', 401);
    strcat(line, "\r\n");
    ch_feed(h, id, line);
    CH_EXPECT(h, id, S "905 foo :SASL message too long (pieces are at most 400 bytes)");
    CH_EXPECT_NONE(h, id);
    /* Over: a payload now is no login, and PLAIN starts again. */
    ch_feed(h, id, "AUTHENTICATE AGZvbwBmb28Ac2VzYW1l\r\n");
    CH_EXPECT_PREFIX(h, id, S "908 ");
    CH_EXPECT_PREFIX(h, id, S "904 ");
    ch_feed(h, id, "AUTHENTICATE PLAIN\r\n");
    CH_EXPECT(h, id, "AUTHENTICATE +");
    memset(line + 13, 'A', 400);
    line[413] = 0;
    strcat(line, "\r\n");
    for (int i = 0; i < 3; i++)
        ch_feed(h, id, line);
    CH_EXPECT(h, id, S "904 foo :SASL authentication failed: the PLAIN message is too long");
    CH_EXPECT_NONE(h, id);
    ch_stop(h);
}

/* bcrypt hashes the first 72 bytes: a password that differs only past
 * them logs in too (what every $2b$ bcrypt does, so the hash verifies
 * elsewhere); one that differs at byte 72 does not. */
static void test_bcrypt_reads_72_bytes(void)
{
    char pw[LONGEST + 1];
    memset(pw, 'k', LONGEST);
    pw[LONGEST] = 0;
    chat_harness_t *h = ch_start(NULL);
    ch_account(h, "foo", pw);
    size_t n;
    pw[LONGEST - 1] = 'z';
    pw[72] = 'z';
    int id = plain_in_pieces(h, pw, &n);
    CH_EXPECT_PREFIX(h, id, S "900 ");
    pw[71] = 'z';
    id = plain_in_pieces(h, pw, &n);
    ch_advance(h, 2000000000ull);
    CH_EXPECT_PREFIX(h, id, S "904 ");
    ch_stop(h);
}

/* The bound: 600 bytes are an account's or an operator's password, 601 are
 * refused with the bound named. */
static void test_password_bound(void)
{
    chat_harness_t *h = ch_start(NULL);
    char pw[LONGEST + 2], err[256];
    memset(pw, 'p', LONGEST + 1);
    pw[LONGEST + 1] = 0;
    ASSERT_EQ(yard_accounts_add(ch_data_dir(h), "big", pw, 4, err, sizeof err), -EINVAL);
    ASSERT_STR_EQ(err, "the password must be 1-600 bytes on one line");
    ASSERT_EQ(yard_opers_add(ch_data_dir(h), "big", pw, 4, err, sizeof err), -EINVAL);
    ASSERT_STR_EQ(err, "the password must be 1-600 bytes on one line");
    pw[LONGEST] = 0;
    ASSERT_EQ(yard_accounts_add(ch_data_dir(h), "big", pw, 4, err, sizeof err), 0);
    ASSERT_EQ(yard_opers_add(ch_data_dir(h), "big", pw, 4, err, sizeof err), 0);
    /* An operator's long password works for OPER (a line of 9 + 400 bytes). */
    ch_account(h, "al", "pw-al");
    int a = ch_login(h, "al", "pw-al", NULL);
    pw[400] = 0;
    pw[399] = 'q';
    ch_oper(h, "op", pw);
    char line[LONGEST + 16];
    snprintf(line, sizeof line, "OPER op %s\r\n", pw);
    ch_feed(h, a, line);
    CH_SKIP_TO(h, a, S "381 al ");
    ch_stop(h);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"sasl_long_passwords", test_sasl_long_passwords},
        {"sasl_pieces_too_long", test_sasl_pieces_too_long},
        {"bcrypt_reads_72_bytes", test_bcrypt_reads_72_bytes},
        {"password_bound", test_password_bound},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
