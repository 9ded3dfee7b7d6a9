/* FNV-1a, the hash of the shared tables' keys (the rest app's stores, the
 * chat's channels, read positions, topics and login limits): small keys,
 * no allocation, the same value in every process. Chain calls to hash
 * several fields: yard_fnv1a(yard_fnv1a(YARD_FNV1A_INIT, a, n), b, m). */
#ifndef YARD_HASH_H
#define YARD_HASH_H

#include <stddef.h>
#include <stdint.h>

#define YARD_FNV1A_INIT 1469598103934665603ull

static inline uint64_t yard_fnv1a(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

#endif
