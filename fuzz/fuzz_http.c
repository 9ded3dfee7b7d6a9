/* The HTTP/1.1 request parser on arbitrary bytes: whatever the input, the
 * verdict is one of three, a complete request lies inside the buffer, is
 * found again when the buffer is cut right after it, and its chunked body
 * decodes into exactly body_len bytes (ASan watches the copy). Pipelined
 * streams are walked request by request. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "yard/proto_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_one(const uint8_t *in, size_t n, const yard_http_req_t *r)
{
    if (r->total_len > n || r->head_len == 0 || r->head_len > r->total_len ||
        r->head_len > YARD_HTTP_HEAD_LIMIT || r->body_len > YARD_HTTP_BODY_LIMIT)
        abort();
    if (r->minor != 0 && r->minor != 1)
        abort();
    if (r->method_len == 0 || r->target_len == 0 || r->target[0] != '/')
        abort();
    if (!r->chunked && (r->body != in + r->head_len || r->head_len + r->body_len != r->total_len))
        abort();
    /* The same request, with nothing after it. */
    yard_http_req_t again;
    if (yard_http_parse(in, r->total_len, &again) != YARD_HTTP_COMPLETE ||
        again.total_len != r->total_len || again.body_len != r->body_len)
        abort();
    if (r->chunked) {
        /* Exactly body_len bytes: a heap buffer so ASan sees any overrun. */
        uint8_t *out = malloc(r->body_len ? r->body_len : 1);
        if (!out)
            abort();
        yard_http_dechunk(in, r, out);
        free(out);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    for (int i = 0; i < 64 && off <= size; i++) {
        yard_http_req_t r;
        int v = yard_http_parse(data + off, size - off, &r);
        if (v == YARD_HTTP_ERROR) {
            int s = r.status;
            if (s != 400 && s != 413 && s != 431 && s != 501 && s != 505)
                abort();
            return 0;
        }
        if (v == YARD_HTTP_PARTIAL)
            return 0;
        if (v != YARD_HTTP_COMPLETE)
            abort();
        check_one(data + off, size - off, &r);
        off += r.total_len;
    }
    return 0;
}
