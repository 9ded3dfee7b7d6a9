/* The HTTP/1.1 request parser: valid and invalid requests, pipelining,
 * chunked bodies, the head and body limits, and byte-at-a-time feeding. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "yard/proto_http.h"

static int parse(const char *s, yard_http_req_t *req)
{
    return yard_http_parse((const uint8_t *)s, strlen(s), req);
}

static void test_simple_get(void)
{
    yard_http_req_t r;
    const char *s = "GET /user/get/bob?x=1 HTTP/1.1\r\nHost: a\r\n\r\n";
    ASSERT_EQ(parse(s, &r), YARD_HTTP_COMPLETE);
    ASSERT_EQ(r.method_len, 3);
    ASSERT_MEM_EQ(r.method, "GET", 3);
    ASSERT_EQ(r.target_len, strlen("/user/get/bob?x=1"));
    ASSERT_MEM_EQ(r.target, "/user/get/bob?x=1", r.target_len);
    ASSERT_EQ(r.minor, 1);
    ASSERT(r.keep_alive);
    ASSERT_EQ(r.total_len, strlen(s));
    ASSERT_EQ(r.body_len, 0);
}

static void test_content_length_body(void)
{
    yard_http_req_t r;
    const char *s = "POST /p HTTP/1.1\r\nHost: a\r\ncontent-length: 5\r\n\r\nhelloGET";
    ASSERT_EQ(parse(s, &r), YARD_HTTP_COMPLETE);
    ASSERT_EQ(r.body_len, 5);
    ASSERT_MEM_EQ(r.body, "hello", 5);
    ASSERT_EQ(r.total_len, strlen(s) - 3);
}

static void test_connection_semantics(void)
{
    yard_http_req_t r;
    ASSERT_EQ(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", &r),
              YARD_HTTP_COMPLETE);
    ASSERT(!r.keep_alive);
    ASSERT_EQ(parse("GET / HTTP/1.0\r\n\r\n", &r), YARD_HTTP_COMPLETE);
    ASSERT(!r.keep_alive);
    ASSERT_EQ(r.minor, 0);
    ASSERT_EQ(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &r), YARD_HTTP_COMPLETE);
    ASSERT(r.keep_alive);
    ASSERT_EQ(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, close\r\n\r\n", &r),
              YARD_HTTP_COMPLETE);
    ASSERT(!r.keep_alive);
}

static void test_pipelined(void)
{
    const char *s = "GET /a HTTP/1.1\r\nHost: a\r\n\r\n"
                    "POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nxy"
                    "GET /c HTTP/1.1\r\nHost: a\r\n\r\n";
    const uint8_t *p = (const uint8_t *)s;
    size_t n = strlen(s), off = 0;
    const char *targets[] = {"/a", "/b", "/c"};
    for (int i = 0; i < 3; i++) {
        yard_http_req_t r;
        ASSERT_EQ(yard_http_parse(p + off, n - off, &r), YARD_HTTP_COMPLETE);
        ASSERT_EQ(r.target_len, 2);
        ASSERT_MEM_EQ(r.target, targets[i], 2);
        off += r.total_len;
    }
    ASSERT_EQ(off, n);
}

static void test_chunked(void)
{
    yard_http_req_t r;
    const char *s = "POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "5;ext=1\r\nhello\r\nA\r\n, world!!!\r\n0\r\nX-Trailer: t\r\n\r\nNEXT";
    ASSERT_EQ(parse(s, &r), YARD_HTTP_COMPLETE);
    ASSERT(r.chunked);
    ASSERT_EQ(r.body_len, 15);
    ASSERT_EQ(r.total_len, strlen(s) - 4);
    ASSERT(r.body == NULL);
    uint8_t out[15];
    yard_http_dechunk((const uint8_t *)s, &r, out);
    ASSERT_MEM_EQ(out, "hello, world!!!", 15);
}

static void test_chunked_errors(void)
{
    yard_http_req_t r;
    const char *h = "POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    char buf[256];
    snprintf(buf, sizeof buf, "%sZ\r\n", h);
    ASSERT_EQ(parse(buf, &r), YARD_HTTP_ERROR);
    ASSERT_EQ(r.status, 400);
    snprintf(buf, sizeof buf, "%s3\r\nabcX\r\n", h); /* data not followed by CRLF */
    ASSERT_EQ(parse(buf, &r), YARD_HTTP_ERROR);
    ASSERT_EQ(r.status, 400);
    snprintf(buf, sizeof buf, "%s10001\r\n", h); /* 65537 bytes: over the limit */
    ASSERT_EQ(parse(buf, &r), YARD_HTTP_ERROR);
    ASSERT_EQ(r.status, 413);
    snprintf(buf, sizeof buf, "%s123456789\r\n", h);
    ASSERT_EQ(parse(buf, &r), YARD_HTTP_ERROR);
    ASSERT_EQ(r.status, 413);
    ASSERT_EQ(parse("POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", &r),
              YARD_HTTP_ERROR);
    ASSERT_EQ(r.status, 501);
    ASSERT_EQ(parse("POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
                    "Content-Length: 3\r\n\r\n",
                    &r),
              YARD_HTTP_ERROR);
    ASSERT_EQ(r.status, 400);
}

static void test_malformed(void)
{
    static const char *bad[] = {
        "GET\r\n\r\n",
        "GET / HTTP/1.1\nHost: a\n\n",            /* bare LF */
        "GET  / HTTP/1.1\r\nHost: a\r\n\r\n",     /* double space */
        "GET foo HTTP/1.1\r\nHost: a\r\n\r\n",    /* not origin-form */
        "GET / HTTX/1.1\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost : a\r\n\r\n",     /* space before colon */
        "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
        "GET / HTTP/1.1\r\n\r\n",                 /* 1.1 without Host */
        "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\x01\r\n\r\n",
        "G\x7f / HTTP/1.1\r\n\r\n",
        NULL,
    };
    for (int i = 0; bad[i]; i++) {
        yard_http_req_t r;
        if (parse(bad[i], &r) != YARD_HTTP_ERROR || r.status != 400)
            TEST_FAIL("case %d (%s) was not rejected with 400 (status %d)", i, bad[i], r.status);
    }
    yard_http_req_t r;
    ASSERT_EQ(parse("GET / HTTP/2.0\r\nHost: a\r\n\r\n", &r), YARD_HTTP_ERROR);
    ASSERT_EQ(r.status, 505);
}

static void test_early_reject(void)
{
    /* Garbage fails before the head limit is reached. */
    yard_http_req_t r;
    ASSERT_EQ(parse("GET /\n", &r), YARD_HTTP_ERROR);
    ASSERT_EQ(parse("GE\x00", &r), YARD_HTTP_PARTIAL); /* strlen stops at NUL: "GE" */
}

static void test_head_limit(void)
{
    size_t n = YARD_HTTP_HEAD_LIMIT + 100;
    char *s = malloc(n + 1);
    memset(s, 'a', n);
    memcpy(s, "GET / HTTP/1.1\r\nHost: a\r\nX: ", 28);
    s[n] = 0;
    yard_http_req_t r;
    ASSERT_EQ(parse(s, &r), YARD_HTTP_ERROR);
    ASSERT_EQ(r.status, 431);
    /* Just under the limit: still waiting for the end of the head. */
    s[YARD_HTTP_HEAD_LIMIT - 10] = 0;
    ASSERT_EQ(parse(s, &r), YARD_HTTP_PARTIAL);
    free(s);
}

static void test_body_limit(void)
{
    yard_http_req_t r;
    ASSERT_EQ(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 65537\r\n\r\n", &r),
              YARD_HTTP_ERROR);
    ASSERT_EQ(r.status, 413);
    ASSERT_EQ(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 65536\r\n\r\n", &r),
              YARD_HTTP_PARTIAL);
    ASSERT_GT(r.head_len, 0);
}

static void test_expect_continue(void)
{
    yard_http_req_t r;
    const char *s = "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n"
                    "Content-Length: 3\r\n\r\n";
    ASSERT_EQ(parse(s, &r), YARD_HTTP_PARTIAL);
    ASSERT(r.expect_continue);
    ASSERT_GT(r.head_len, 0);
}

/* Every prefix of a valid stream is PARTIAL, the whole is COMPLETE. */
static void byte_at_a_time(const char *s, size_t body_len)
{
    size_t n = strlen(s);
    yard_http_req_t r;
    for (size_t i = 0; i < n; i++)
        if (yard_http_parse((const uint8_t *)s, i, &r) != YARD_HTTP_PARTIAL)
            TEST_FAIL("prefix of %zu bytes of %s was not PARTIAL", i, s);
    ASSERT_EQ(yard_http_parse((const uint8_t *)s, n, &r), YARD_HTTP_COMPLETE);
    ASSERT_EQ(r.total_len, n);
    ASSERT_EQ(r.body_len, body_len);
}

static void test_byte_at_a_time(void)
{
    byte_at_a_time("GET /longPoll HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n", 0);
    byte_at_a_time("POST /user/set/a HTTP/1.1\r\nHost: a\r\nContent-Length: 7\r\n\r\n{\"a\":1}", 7);
    byte_at_a_time("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                   "3\r\nabc\r\n1;e\r\nd\r\n0\r\nT: 1\r\n\r\n",
                   4);
}

static void test_reason(void)
{
    ASSERT_STR_EQ(yard_http_reason(404), "Not Found");
    ASSERT_STR_EQ(yard_http_reason(431), "Request Header Fields Too Large");
    ASSERT_STR_EQ(yard_http_reason(299), "Unknown");
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        {"simple_get", test_simple_get},
        {"content_length_body", test_content_length_body},
        {"connection_semantics", test_connection_semantics},
        {"pipelined", test_pipelined},
        {"chunked", test_chunked},
        {"chunked_errors", test_chunked_errors},
        {"malformed", test_malformed},
        {"early_reject", test_early_reject},
        {"head_limit", test_head_limit},
        {"body_limit", test_body_limit},
        {"expect_continue", test_expect_continue},
        {"byte_at_a_time", test_byte_at_a_time},
        {"reason", test_reason},
        {NULL, NULL},
    };
    return test_main(argc, argv, cases);
}
