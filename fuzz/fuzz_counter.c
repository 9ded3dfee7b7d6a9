/* The counter request stream: whatever the bytes, the valid prefix ends at
 * the first byte that is neither 0x00 nor 0x01, and encode/decode of a
 * reply round-trips. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "yard/proto_counter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t valid = yard_counter_valid_prefix(data, size);
    if (valid > size)
        abort();
    for (size_t i = 0; i < valid; i++)
        if (data[i] > 1)
            abort();
    if (valid < size && data[valid] <= 1)
        abort();
    if (size >= 8) {
        uint64_t v;
        memcpy(&v, data, 8);
        uint8_t out[YARD_COUNTER_REPLY_LEN];
        yard_counter_encode(v, out);
        if (yard_counter_reply_value(out) != v)
            abort();
    }
    return 0;
}
