/* Log records on arbitrary bytes: decoded back to back, every COMPLETE
 * record re-encodes to the very same bytes and decodes to the same fields,
 * PARTIAL only ever means "the input ended", and nothing is read outside
 * the input (ASan watches a heap copy of exactly its size). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "yard/proto_logrec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *in = malloc(size ? size : 1);
    if (!in)
        abort();
    memcpy(in, data, size);
    size_t off = 0;
    while (off < size) {
        yard_logrec_t r;
        int v = yard_logrec_decode(in + off, size - off, &r);
        if (v == YARD_LOGREC_CORRUPT || v == YARD_LOGREC_PARTIAL)
            break;
        if (v != YARD_LOGREC_COMPLETE || r.len > size - off || r.len < YARD_LOGREC_MIN)
            abort();
        uint8_t again[YARD_LOGREC_MAX];
        long n = yard_logrec_encode(&r, again, sizeof again);
        if (n != (long)r.len || memcmp(again, in + off, r.len) != 0)
            abort();
        yard_logrec_t d;
        if (yard_logrec_decode(again, (size_t)n, &d) != YARD_LOGREC_COMPLETE || d.id != r.id ||
            d.ts_ns != r.ts_ns || d.type != r.type || d.text_len != r.text_len ||
            memcmp(d.text, r.text, r.text_len) != 0)
            abort();
        off += r.len;
    }
    free(in);
    return 0;
}
