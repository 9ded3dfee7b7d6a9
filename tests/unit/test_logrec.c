/* The chat log's record codec: CRC32C vectors, round trips, every
 * truncation is PARTIAL, every bit flip is caught, limits. */
#include <errno.h>
#include <string.h>

#include "test.h"
#include "yard/proto_logrec.h"

static void test_crc_vectors(void)
{
    ASSERT_U64_EQ(yard_crc32c(0, "123456789", 9), 0xE3069283u);
    uint8_t zeros[32] = {0};
    ASSERT_U64_EQ(yard_crc32c(0, zeros, 32), 0x8A9136AAu);
    /* Incremental equals one shot. */
    ASSERT_U64_EQ(yard_crc32c(yard_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
}

static long make(uint8_t *buf, size_t cap, const char *text)
{
    yard_logrec_t r = {.type = YARD_LOGREC_MESSAGE, .id = 42, .ts_ns = 1234567890123,
                       .sender = "alice", .sender_len = 5, .target = "#room", .target_len = 5,
                       .text = text, .text_len = strlen(text)};
    return yard_logrec_encode(&r, buf, cap);
}

static void test_round_trip(void)
{
    uint8_t buf[YARD_LOGREC_MAX];
    long n = make(buf, sizeof buf, "hello, world");
    ASSERT(n > 0);
    yard_logrec_t d;
    ASSERT_EQ(yard_logrec_decode(buf, (size_t)n, &d), YARD_LOGREC_COMPLETE);
    ASSERT_EQ(d.len, n);
    ASSERT_U64_EQ(d.id, 42);
    ASSERT_EQ(d.ts_ns, 1234567890123);
    ASSERT_EQ(d.type, YARD_LOGREC_MESSAGE);
    ASSERT_MEM_EQ(d.sender, "alice", 5);
    ASSERT_MEM_EQ(d.target, "#room", 5);
    ASSERT_EQ(d.text_len, 12);
    ASSERT_MEM_EQ(d.text, "hello, world", 12);
    /* Trailing bytes belong to the next record. */
    buf[n] = 0x59;
    ASSERT_EQ(yard_logrec_decode(buf, (size_t)n + 1, &d), YARD_LOGREC_COMPLETE);
    ASSERT_EQ(d.len, n);
}

static void test_truncations_and_flips(void)
{
    uint8_t buf[YARD_LOGREC_MAX];
    long n = make(buf, sizeof buf, "some text");
    yard_logrec_t d;
    for (long k = 0; k < n; k++)
        ASSERT_EQ(yard_logrec_decode(buf, (size_t)k, &d), YARD_LOGREC_PARTIAL);
    /* Any single bit flip is CORRUPT, except in the length field where a
     * longer claim can look PARTIAL (a torn tail): never COMPLETE. */
    for (long i = 0; i < n; i++) {
        for (int b = 0; b < 8; b++) {
            buf[i] ^= (uint8_t)(1u << b);
            int v = yard_logrec_decode(buf, (size_t)n, &d);
            ASSERT(v != YARD_LOGREC_COMPLETE);
            if (i < 4 || i >= 8)
                ASSERT_EQ(v, YARD_LOGREC_CORRUPT);
            buf[i] ^= (uint8_t)(1u << b);
        }
    }
}

static void test_limits(void)
{
    uint8_t buf[YARD_LOGREC_MAX + 16];
    char text[YARD_LOGREC_TEXT_MAX + 2];
    memset(text, 'x', sizeof text - 1);
    text[YARD_LOGREC_TEXT_MAX] = 0;
    ASSERT(make(buf, sizeof buf, text) > 0);
    text[YARD_LOGREC_TEXT_MAX] = 'x';
    text[YARD_LOGREC_TEXT_MAX + 1] = 0;
    ASSERT_EQ(make(buf, sizeof buf, text), -EINVAL);
    ASSERT_EQ(make(buf, 10, "x"), -ENOSPC);
    yard_logrec_t r = {.type = 9, .id = 1, .sender = "a", .sender_len = 1, .target = "b",
                       .target_len = 1};
    ASSERT_EQ(yard_logrec_encode(&r, buf, sizeof buf), -EINVAL);
    r.type = YARD_LOGREC_NOTICE;
    r.sender_len = 0;
    ASSERT_EQ(yard_logrec_encode(&r, buf, sizeof buf), -EINVAL);
}

/* One flipped bit of the type byte (outside the CRC) never makes another
 * valid record type: encoding rejects the flipped type. */
static void test_types_two_bits_apart(void)
{
    static const int types[] = {YARD_LOGREC_MESSAGE, YARD_LOGREC_NOTICE, YARD_LOGREC_TOPIC,
                                YARD_LOGREC_JOIN, YARD_LOGREC_PART, YARD_LOGREC_QUIT,
                                YARD_LOGREC_AWAY, YARD_LOGREC_READ, YARD_LOGREC_MODE,
                                YARD_LOGREC_KICK, YARD_LOGREC_INVITE, YARD_LOGREC_TAGMSG,
                                YARD_LOGREC_NICK, YARD_LOGREC_KILL, YARD_LOGREC_WALLOPS,
                                YARD_LOGREC_SETNAME, YARD_LOGREC_ONLINE,
                                YARD_LOGREC_ACCOUNT};
    uint8_t buf[YARD_LOGREC_MAX];
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        yard_logrec_t r = {.type = types[i], .id = 1, .sender = "a", .sender_len = 1,
                           .target = "#b", .target_len = 2, .text = "", .text_len = 0};
        ASSERT(yard_logrec_encode(&r, buf, sizeof buf) > 0);
        yard_logrec_t d;
        ASSERT_EQ(yard_logrec_decode(buf, sizeof buf, &d), YARD_LOGREC_COMPLETE);
        ASSERT_EQ(d.type, types[i]);
        for (int bit = 0; bit < 8; bit++) {
            r.type = types[i] ^ (1 << bit);
            ASSERT_EQ(yard_logrec_encode(&r, buf, sizeof buf), -EINVAL);
        }
    }
}

int main(void)
{
    test_types_two_bits_apart();
    test_crc_vectors();
    test_round_trip();
    test_truncations_and_flips();
    test_limits();
    return 0;
}
