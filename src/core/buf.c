#include "yard/buf.h"

#include <stdlib.h>
#include <string.h>

uint8_t *yard_buf_reserve(yard_buf_t *b, size_t n)
{
    /* An empty buffer has no memory yet: even room for 0 bytes needs some,
     * or NULL would read as out of memory (a request with nothing to answer). */
    if (b->data && b->cap - b->off - b->len >= n)
        return b->data + b->off + b->len;
    /* Compacting is cheaper than growing when the consumed prefix would do. */
    if (b->off && b->cap - b->len >= n) {
        memmove(b->data, b->data + b->off, b->len);
        b->off = 0;
        return b->data + b->len;
    }
    if (n > SIZE_MAX / 2 - b->len)
        return NULL;
    size_t want = b->len + n;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < want)
        cap *= 2;
    uint8_t *p = malloc(cap);
    if (!p)
        return NULL;
    if (b->len)
        memcpy(p, b->data + b->off, b->len);
    free(b->data);
    b->data = p;
    b->off = 0;
    b->cap = cap;
    return b->data + b->len;
}

void yard_buf_commit(yard_buf_t *b, size_t n) { b->len += n; }

int yard_buf_append(yard_buf_t *b, const void *p, size_t n)
{
    if (!n)
        return 0;
    uint8_t *dst = yard_buf_reserve(b, n);
    if (!dst)
        return -1;
    memcpy(dst, p, n);
    b->len += n;
    return 0;
}

void yard_buf_consume(yard_buf_t *b, size_t n)
{
    if (n >= b->len) {
        b->off = 0;
        b->len = 0;
        return;
    }
    b->off += n;
    b->len -= n;
}

void yard_buf_clear(yard_buf_t *b)
{
    b->off = 0;
    b->len = 0;
}

void yard_buf_shrink(yard_buf_t *b, size_t keep)
{
    if (b->len == 0 && b->cap > keep)
        yard_buf_free(b);
}

void yard_buf_free(yard_buf_t *b)
{
    free(b->data);
    b->data = NULL;
    b->off = b->len = b->cap = 0;
}
