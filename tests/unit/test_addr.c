#include <arpa/inet.h>
#include <netinet/in.h>

#include "test.h"
#include "yard/clock.h"
#include "yard/net.h"

static void roundtrip(const char *in, const char *want)
{
    yard_addr_t a;
    char err[256] = "", out[YARD_ADDR_STRLEN];
    if (yard_addr_parse(in, &a, err, sizeof err) < 0)
        TEST_FAIL("parse '%s' failed: %s", in, err);
    yard_addr_format(&a, out, sizeof out);
    ASSERT_STR_EQ(out, want);
}

static void rejects(const char *in, const char *needle)
{
    yard_addr_t a;
    char err[256] = "";
    if (yard_addr_parse(in, &a, err, sizeof err) == 0)
        TEST_FAIL("'%s' was accepted", in);
    if (!strstr(err, needle))
        TEST_FAIL("error for '%s' is '%s', expected it to mention '%s'", in, err, needle);
}

static void test_parse_valid(void)
{
    roundtrip("127.0.0.1:0", "127.0.0.1:0");
    roundtrip("0.0.0.0:8080", "0.0.0.0:8080");
    roundtrip("localhost:65535", "127.0.0.1:65535");
    roundtrip("[::1]:9", "[::1]:9");
    roundtrip("[::]:0", "[::]:0");
    yard_addr_t a;
    char err[64];
    ASSERT_EQ(yard_addr_parse("[::1]:443", &a, err, sizeof err), 0);
    ASSERT_EQ(a.ss.ss_family, AF_INET6);
    ASSERT_EQ(yard_addr_port(&a), 443);
}

static void test_parse_invalid(void)
{
    rejects("", "empty");
    rejects("127.0.0.1", "HOST:PORT");
    rejects("127.0.0.1:", "port");
    rejects("127.0.0.1:65536", "port");
    rejects("127.0.0.1:-1", "port");
    rejects("127.0.0.1:80x", "port");
    rejects(":80", "host");
    rejects("example.com:80", "numeric");
    rejects("999.0.0.1:80", "numeric");
    rejects("::1:80", "[ADDR]:PORT");
    rejects("[::1]80", "[IPv6]:PORT");
    rejects("[::1", "[IPv6]:PORT");
    rejects("[nonsense]:1", "IPv6");
}

static void test_duration(void)
{
    uint64_t ns;
    ASSERT_EQ(yard_parse_duration_ns("30", YARD_NS_PER_S, &ns), 0);
    ASSERT_U64_EQ(ns, 30 * YARD_NS_PER_S);
    ASSERT_EQ(yard_parse_duration_ns("250ms", YARD_NS_PER_S, &ns), 0);
    ASSERT_U64_EQ(ns, 250 * YARD_NS_PER_MS);
    ASSERT_EQ(yard_parse_duration_ns("1.5s", YARD_NS_PER_S, &ns), 0);
    ASSERT_U64_EQ(ns, 1500 * YARD_NS_PER_MS);
    ASSERT_EQ(yard_parse_duration_ns("30d", YARD_NS_PER_S, &ns), 0);
    ASSERT_U64_EQ(ns, 30 * 86400 * YARD_NS_PER_S);
    ASSERT_EQ(yard_parse_duration_ns("-1s", YARD_NS_PER_S, &ns), -1);
    ASSERT_EQ(yard_parse_duration_ns("5 parsecs", YARD_NS_PER_S, &ns), -1);
    ASSERT_EQ(yard_parse_duration_ns("", YARD_NS_PER_S, &ns), -1);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"parse_valid", test_parse_valid},
        {"parse_invalid", test_parse_invalid},
        {"duration", test_duration},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
