#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

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
    int rc = yard_addr_parse(in, &a, err, sizeof err);
    if (rc == 0)
        TEST_FAIL("'%s' was accepted", in);
    ASSERT_EQ(rc, -EINVAL);
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

static void test_resolve(void)
{
    yard_addr_list_t l;
    char err[256] = "";
    ASSERT_EQ(yard_addr_resolve("127.0.0.1:7", &l, err, sizeof err), 0);
    ASSERT_EQ(l.n, 1);
    ASSERT(!l.named);
    ASSERT_EQ(yard_addr_resolve("127.0.0.1:port", &l, err, sizeof err), -EINVAL);
    ASSERT(strstr(err, "port") != NULL);
}

/* A listener, its port, and the errors of the calls around it: -errno of
 * the call that failed, and the text the programs show for it. */
static void test_sockets(void)
{
    yard_addr_t any, bound;
    char err[256], msg[256];
    const char *call = "";
    ASSERT_EQ(yard_addr_parse("127.0.0.1:0", &any, err, sizeof err), 0);
    int fd = yard_listen(&any, 16, false, false, &call);
    ASSERT(fd >= 0);
    ASSERT_EQ(yard_sock_name(fd, &bound), 0);
    ASSERT(yard_addr_port(&bound) > 0);
    /* The port is taken: bind says so. */
    ASSERT_EQ(yard_listen(&bound, 16, false, false, &call), -EADDRINUSE);
    ASSERT_STR_EQ(call, "bind");
    char where[YARD_ADDR_STRLEN], want[256];
    yard_addr_format(&bound, where, sizeof where);
    yard_net_message(msg, sizeof msg, &bound, call, -EADDRINUSE);
    snprintf(want, sizeof want, "cannot listen on %s: bind: Address already in use", where);
    ASSERT_STR_EQ(msg, want);
    /* A connection: its peer's name, no delay, a write. */
    int c = yard_connect(&bound, false, &call);
    ASSERT(c >= 0);
    yard_addr_t peer;
    ASSERT_EQ(yard_peer_name(c, &peer), 0);
    ASSERT_EQ(yard_addr_port(&peer), yard_addr_port(&bound));
    ASSERT_EQ(yard_set_nodelay(c), 0);
    ASSERT_EQ(yard_write_all(c, "x", 1), 0);
    close(c);
    close(fd);
    /* Nobody listens there any more. */
    ASSERT_EQ(yard_connect(&bound, false, &call), -ECONNREFUSED);
    ASSERT_STR_EQ(call, "connect");
    yard_net_message(msg, sizeof msg, &bound, call, -ECONNREFUSED);
    snprintf(want, sizeof want, "connect to %s: Connection refused", where);
    ASSERT_STR_EQ(msg, want);
    /* Not a socket, not a descriptor. */
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    ASSERT_EQ(yard_set_nodelay(p[0]), -ENOTSOCK);
    ASSERT_EQ(yard_peer_name(p[0], &peer), -ENOTSOCK);
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    ASSERT_EQ(yard_write_all(p[1], "x", 1), -EPIPE);
    close(p[1]);
    ASSERT_EQ(yard_sock_name(-1, &peer), -EBADF);
    ASSERT_EQ(yard_write_all(-1, "x", 1), -EBADF);
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
        {"resolve", test_resolve},
        {"sockets", test_sockets},
        {"duration", test_duration},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
