/* A tiny unit-test harness in the libuv shape: each test file is one
 * executable registered with CTest; every ASSERT prints file, line and both
 * values, then exits non-zero so CTest reports the failure. */
#ifndef YARD_TEST_H
#define YARD_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_FAIL(...)                                                                             \
    do {                                                                                           \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        exit(1);                                                                                   \
    } while (0)

#define ASSERT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond))                                                                               \
            TEST_FAIL("assertion failed: %s", #cond);                                              \
    } while (0)

#define ASSERT_INT_OP(a, op, b)                                                                    \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (!(a_ op b_))                                                                           \
            TEST_FAIL("%s %s %s: %lld vs %lld", #a, #op, #b, a_, b_);                              \
    } while (0)

#define ASSERT_EQ(a, b) ASSERT_INT_OP(a, ==, b)
#define ASSERT_NE(a, b) ASSERT_INT_OP(a, !=, b)
#define ASSERT_LT(a, b) ASSERT_INT_OP(a, <, b)
#define ASSERT_LE(a, b) ASSERT_INT_OP(a, <=, b)
#define ASSERT_GT(a, b) ASSERT_INT_OP(a, >, b)
#define ASSERT_GE(a, b) ASSERT_INT_OP(a, >=, b)

#define ASSERT_U64_EQ(a, b)                                                                        \
    do {                                                                                           \
        uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);                                           \
        if (a_ != b_)                                                                              \
            TEST_FAIL("%s == %s: %" PRIu64 " vs %" PRIu64, #a, #b, a_, b_);                        \
    } while (0)

#define ASSERT_STR_EQ(a, b)                                                                        \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (strcmp(a_, b_) != 0)                                                                   \
            TEST_FAIL("%s == %s: \"%s\" vs \"%s\"", #a, #b, a_, b_);                               \
    } while (0)

#define ASSERT_MEM_EQ(a, b, n)                                                                     \
    do {                                                                                           \
        if (memcmp((a), (b), (n)) != 0)                                                            \
            TEST_FAIL("%s and %s differ in their first %zu bytes", #a, #b, (size_t)(n));           \
    } while (0)

typedef void (*test_fn)(void);
struct test_case {
    const char *name;
    test_fn fn;
};

/* Runs every case, or only the one named in argv[1]. */
static inline int test_main(int argc, char **argv, const struct test_case *cases)
{
    int ran = 0;
    for (const struct test_case *c = cases; c->name; c++) {
        if (argc > 1 && strcmp(argv[1], c->name) != 0)
            continue;
        c->fn();
        printf("ok %s\n", c->name);
        fflush(stdout); /* nothing buffered may be duplicated by a fork */
        ran++;
    }
    if (!ran) {
        fprintf(stderr, "no test named %s\n", argc > 1 ? argv[1] : "(any)");
        return 1;
    }
    return 0;
}

#endif
