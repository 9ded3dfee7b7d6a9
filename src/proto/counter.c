#include "yard/proto_counter.h"

void yard_counter_encode(uint64_t value, uint8_t out[YARD_COUNTER_REPLY_LEN])
{
    for (int i = YARD_COUNTER_REPLY_LEN - 1; i >= 0; i--) {
        out[i] = (uint8_t)value;
        value >>= 8;
    }
}

uint64_t yard_counter_reply_value(const uint8_t in[YARD_COUNTER_REPLY_LEN])
{
    uint64_t v = 0;
    for (int i = 0; i < YARD_COUNTER_REPLY_LEN; i++)
        v = v << 8 | in[i];
    return v;
}

size_t yard_counter_valid_prefix(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n && yard_counter_decode(p[i]) != YARD_COUNTER_BAD)
        i++;
    return i;
}
