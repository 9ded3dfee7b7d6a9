#include "test.h"
#include "yard/proto_counter.h"

static void test_encode_big_endian(void)
{
    uint8_t out[8];
    yard_counter_encode(0x0102030405060708ull, out);
    static const uint8_t want[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    ASSERT_MEM_EQ(out, want, 8);
    yard_counter_encode(80000, out);
    ASSERT_U64_EQ(yard_counter_reply_value(out), 80000);
    yard_counter_encode(UINT64_MAX, out);
    ASSERT_U64_EQ(yard_counter_reply_value(out), UINT64_MAX);
}

static void test_decode(void)
{
    ASSERT_EQ(yard_counter_decode(0x00), YARD_COUNTER_READ);
    ASSERT_EQ(yard_counter_decode(0x01), YARD_COUNTER_INCR);
    for (int b = 2; b < 256; b++)
        ASSERT_EQ(yard_counter_decode((uint8_t)b), YARD_COUNTER_BAD);
}

static void test_valid_prefix(void)
{
    static const uint8_t ok[] = {0, 1, 1, 0};
    static const uint8_t bad[] = {1, 1, 'x', 1};
    ASSERT_EQ(yard_counter_valid_prefix(ok, sizeof ok), 4);
    ASSERT_EQ(yard_counter_valid_prefix(bad, sizeof bad), 2);
    ASSERT_EQ(yard_counter_valid_prefix(bad, 0), 0);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"encode_big_endian", test_encode_big_endian},
        {"decode", test_decode},
        {"valid_prefix", test_valid_prefix},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
