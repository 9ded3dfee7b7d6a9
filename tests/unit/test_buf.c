#include "test.h"
#include "yard/buf.h"

static void test_append_consume(void)
{
    yard_buf_t b = YARD_BUF_INIT;
    ASSERT_EQ(b.cap, 0);
    ASSERT_EQ(yard_buf_append(&b, "hello", 5), 0);
    ASSERT_EQ(b.len, 5);
    ASSERT_MEM_EQ(yard_buf_head(&b), "hello", 5);
    yard_buf_consume(&b, 2);
    ASSERT_EQ(b.len, 3);
    ASSERT_MEM_EQ(yard_buf_head(&b), "llo", 3);
    yard_buf_consume(&b, 3);
    ASSERT_EQ(b.len, 0);
    ASSERT_EQ(b.off, 0);
    yard_buf_free(&b);
}

static void test_queue_does_not_creep(void)
{
    /* Used as a FIFO with a steady backlog, the buffer compacts instead of
     * growing without bound. */
    yard_buf_t b = YARD_BUF_INIT;
    uint8_t chunk[100];
    for (int i = 0; i < 100; i++)
        chunk[i] = (uint8_t)i;
    for (int round = 0; round < 100000; round++) {
        ASSERT_EQ(yard_buf_append(&b, chunk, sizeof chunk), 0);
        if (b.len > 300) {
            ASSERT_EQ(yard_buf_head(&b)[0] % 100, 0);
            yard_buf_consume(&b, 100);
        }
    }
    ASSERT_LE(b.cap, 1024);
    yard_buf_free(&b);
}

static void test_reserve_commit_grows(void)
{
    yard_buf_t b = YARD_BUF_INIT;
    size_t total = 0;
    for (int i = 0; i < 50; i++) {
        size_t n = (size_t)(i * 997 + 1);
        uint8_t *p = yard_buf_reserve(&b, n);
        ASSERT(p != NULL);
        for (size_t j = 0; j < n; j++)
            p[j] = (uint8_t)(total + j);
        yard_buf_commit(&b, n);
        total += n;
    }
    ASSERT_EQ(b.len, total);
    for (size_t j = 0; j < total; j++)
        ASSERT_EQ(yard_buf_head(&b)[j], (uint8_t)j);
    yard_buf_free(&b);
}

/* Room for nothing is not a failure, even in a buffer that has no memory
 * yet (the counter app reserves 0 bytes of replies for a lone bad byte). */
static void test_reserve_nothing(void)
{
    yard_buf_t b = YARD_BUF_INIT;
    ASSERT(yard_buf_reserve(&b, 0) != NULL);
    yard_buf_commit(&b, 0);
    ASSERT_EQ(b.len, 0);
    ASSERT(yard_buf_reserve(&b, 0) != NULL);
    yard_buf_free(&b);
}

static void test_shrink_only_when_empty(void)
{
    yard_buf_t b = YARD_BUF_INIT;
    yard_buf_append(&b, "x", 1);
    yard_buf_shrink(&b, 0);
    ASSERT(b.data != NULL);
    yard_buf_consume(&b, 1);
    yard_buf_shrink(&b, 0);
    ASSERT(b.data == NULL);
    ASSERT_EQ(b.cap, 0);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"append_consume", test_append_consume},
        {"queue_does_not_creep", test_queue_does_not_creep},
        {"reserve_commit_grows", test_reserve_commit_grows},
        {"reserve_nothing", test_reserve_nothing},
        {"shrink_only_when_empty", test_shrink_only_when_empty},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
