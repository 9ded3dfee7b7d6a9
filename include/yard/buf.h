/* A growable byte buffer with a read offset: bytes live in data[off, off+len).
 * Appending compacts before it grows, so a buffer used as a queue does not
 * creep. An empty buffer holds no memory until something is reserved. */
#ifndef YARD_BUF_H
#define YARD_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct yard_buf {
    uint8_t *data;
    size_t off; /* start of unread bytes */
    size_t len; /* number of unread bytes */
    size_t cap; /* allocated size of data */
} yard_buf_t;

#define YARD_BUF_INIT {NULL, 0, 0, 0}

/* Make room for n more bytes after the unread ones; returns the place to
 * write them, or NULL when memory runs out (the buffer is unchanged). */
uint8_t *yard_buf_reserve(yard_buf_t *b, size_t n);
/* Declare that n bytes were written at the place reserve returned. */
void yard_buf_commit(yard_buf_t *b, size_t n);
int yard_buf_append(yard_buf_t *b, const void *p, size_t n);
/* Drop n unread bytes from the front (n <= len). */
void yard_buf_consume(yard_buf_t *b, size_t n);
static inline const uint8_t *yard_buf_head(const yard_buf_t *b) { return b->data + b->off; }
/* Forget the contents; keep the memory. */
void yard_buf_clear(yard_buf_t *b);
/* Give the memory back when the buffer is empty and larger than keep bytes. */
void yard_buf_shrink(yard_buf_t *b, size_t keep);
void yard_buf_free(yard_buf_t *b);

#endif
