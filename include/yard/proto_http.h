/* A sans-I/O HTTP/1.1 request parser. It reads one request from the front of
 * a buffer and says how long it is; it keeps no state between calls, so the
 * caller simply offers the whole unconsumed buffer again when more bytes
 * arrive (the head is bounded by YARD_HTTP_HEAD_LIMIT, the body by
 * YARD_HTTP_BODY_LIMIT, which bounds the cost of parsing again).
 *
 * Strict on purpose (request smuggling lives in leniency): CRLF line ends,
 * no obs-fold, no whitespace before a header's colon, one Content-Length,
 * never both Content-Length and Transfer-Encoding, and "chunked" is the only
 * transfer coding. Only origin-form targets ("/path?query"). */
#ifndef YARD_PROTO_HTTP_H
#define YARD_PROTO_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define YARD_HTTP_HEAD_LIMIT 8192          /* request line + headers: 431 beyond */
#define YARD_HTTP_BODY_LIMIT 65536         /* decoded body: 413 beyond */
#define YARD_HTTP_CHUNKED_RAW_LIMIT 262144 /* chunked framing + data: 413 beyond */

enum yard_http_result {
    YARD_HTTP_PARTIAL = 0,  /* need more bytes */
    YARD_HTTP_COMPLETE = 1, /* one whole request at the front of the buffer */
    YARD_HTTP_ERROR = -1,   /* malformed or over a limit: answer req->status, close */
};

typedef struct yard_http_req {
    /* Set on COMPLETE; method/target/head fields also on PARTIAL once
     * head_len != 0 (the head is complete, the body is not). */
    const char *method;
    size_t method_len;
    const char *target; /* origin-form, including any query */
    size_t target_len;
    int minor;          /* HTTP/1.<minor>: 0 or 1 */
    bool keep_alive;    /* the connection persists after this request */
    bool chunked;       /* Transfer-Encoding: chunked */
    bool expect_continue; /* Expect: 100-continue */
    size_t head_len;    /* bytes of request line and headers, final CRLF included */
    size_t body_len;    /* decoded body length */
    size_t total_len;   /* bytes this request occupies in the buffer */
    /* Content-Length bodies: a pointer into the buffer. Chunked bodies: NULL;
     * copy the decoded bytes out with yard_http_dechunk. */
    const uint8_t *body;
    int status; /* on ERROR: 400, 413, 431, 501 or 505 */
} yard_http_req_t;

/* Parse the request at the front of in[0..n). */
int yard_http_parse(const uint8_t *in, size_t n, yard_http_req_t *req);

/* Copy the decoded body of a COMPLETE chunked request (from the same buffer)
 * into out, which has room for req->body_len bytes. */
void yard_http_dechunk(const uint8_t *in, const yard_http_req_t *req, uint8_t *out);

/* The reason phrase for a status code ("Not Found"); "Unknown" otherwise. */
const char *yard_http_reason(int status);

#endif
