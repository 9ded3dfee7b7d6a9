/* The Eve study's atomic-counter protocol: one request byte, 0x00 = read,
 * 0x01 = increment; every request is answered with the counter's value
 * (after the increment) as 8 bytes, big-endian. Pure: no I/O. */
#ifndef YARD_PROTO_COUNTER_H
#define YARD_PROTO_COUNTER_H

#include <stddef.h>
#include <stdint.h>

enum yard_counter_op { YARD_COUNTER_READ = 0x00, YARD_COUNTER_INCR = 0x01, YARD_COUNTER_BAD = -1 };

#define YARD_COUNTER_REPLY_LEN 8

static inline int yard_counter_decode(uint8_t byte)
{
    return byte == YARD_COUNTER_READ || byte == YARD_COUNTER_INCR ? byte : YARD_COUNTER_BAD;
}
void yard_counter_encode(uint64_t value, uint8_t out[YARD_COUNTER_REPLY_LEN]);
uint64_t yard_counter_reply_value(const uint8_t in[YARD_COUNTER_REPLY_LEN]);
/* Length of the longest prefix of a request stream made of valid bytes. */
size_t yard_counter_valid_prefix(const uint8_t *p, size_t n);

#endif
