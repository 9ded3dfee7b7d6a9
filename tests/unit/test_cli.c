/* The command line's edge (yard/cli.h): whole numbers and the usage error's
 * two lines. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "yard/cli.h"

static void test_whole_numbers_and_nothing_else(void)
{
    long long v = -1;
    ASSERT_EQ(yard_parse_int("42", 0, 100, &v), 0);
    ASSERT_EQ(v, 42);
    ASSERT_EQ(yard_parse_int("-7", -10, 10, &v), 0);
    ASSERT_EQ(v, -7);
    ASSERT_EQ(yard_parse_int("+3", 0, 10, &v), 0);
    ASSERT_EQ(v, 3);
    ASSERT_EQ(yard_parse_int("9223372036854775807", 0, LLONG_MAX, &v), 0);
    ASSERT(v == LLONG_MAX);
    v = 5;
    const char *bad[] = {"", " 1", "1 ", "1k", "0x10", "-", "+", "abc", "1.5", "--1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ASSERT_EQ(yard_parse_int(bad[i], LLONG_MIN, LLONG_MAX, &v), -EINVAL);
    ASSERT_EQ(yard_parse_int(NULL, 0, 1, &v), -EINVAL);
    ASSERT_EQ(yard_parse_int("101", 0, 100, &v), -ERANGE);
    ASSERT_EQ(yard_parse_int("-1", 0, 100, &v), -ERANGE);
    ASSERT_EQ(yard_parse_int("99999999999999999999", LLONG_MIN, LLONG_MAX, &v), -ERANGE);
    ASSERT_EQ(v, 5); /* untouched by a failure */
}

/* What yard_usage_error writes to stderr, captured through a pipe. */
static void test_usage_error_names_the_program_and_its_help(void)
{
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    fflush(stderr);
    int saved = dup(2);
    ASSERT(saved >= 0);
    ASSERT(dup2(fds[1], 2) >= 0);
    int rc = yard_usage_error("yard-chat account", "%s: expected %d", "--cost", 4);
    fflush(stderr);
    ASSERT(dup2(saved, 2) >= 0);
    close(saved);
    close(fds[1]);
    char out[256];
    ssize_t n = read(fds[0], out, sizeof out - 1);
    close(fds[0]);
    ASSERT(n > 0);
    out[n] = 0;
    ASSERT_EQ(rc, YARD_EXIT_USAGE);
    ASSERT_STR_EQ(out, "yard-chat account: --cost: expected 4\nTry 'yard-chat --help'.\n");
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"whole_numbers_and_nothing_else", test_whole_numbers_and_nothing_else},
        {"usage_error_names_the_program_and_its_help", test_usage_error_names_the_program_and_its_help},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
